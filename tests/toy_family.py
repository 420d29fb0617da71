"""A toy metric family in one module: the proof that adding a family touches one file.

``price@k``: each user's mean price of the top-k recommended items that have a price,
from an extra frame ``item_prices`` (one row per item; its ``price`` column named by
the ``price=`` keyword). Nothing else in the package or the tests names it: importing
this module registers the family, its metric, its frame and its column, and
``fm.evaluate``, ``fm.diagnose``, the command line, the bucket runner, Spark and Dask
take them (Spark's workers import this module when they unpickle the metric).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from frame_metrics import extend

#: The price of a recommended item, beside its rank.
PRICE = "_fm_toy_price"


def _mean_price(ctx: object, k: int) -> pl.Expr:
    """Mean price of the items ranked within k (over one user's priced top rows)."""
    return pl.col(PRICE).filter(pl.col(extend.RANK) <= k).mean()


def _reference(prices: Mapping[object, float], ranked: list[object], k: int) -> float | None:
    """The same in plain Python: ``ranked`` the user's items best first."""
    priced = [prices[i] for i in ranked[:k] if i in prices]
    return sum(priced) / len(priced) if priced else None


class PriceFamily(extend.Family):
    """Per user, the mean price of the priced top-k items; averaged over those users."""

    name = "toy_price"

    def _priced(self, ctx: extend.Context) -> tuple[pl.LazyFrame, list[str]]:
        c = ctx.spec.columns
        price = c.column("price")
        assert price is not None
        table = ctx.inputs.extra("item_prices", [c.item, price])
        on = [*table.by, c.item]
        prices = table.frame.select(*on, pl.col(price).cast(pl.Float64).alias(PRICE))
        return prices, on

    def per_user(self, ctx: extend.Context) -> pl.LazyFrame | None:
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        prices, on = self._priced(ctx)
        rows = ctx.prepared.top.join(prices, on=on, how="inner")
        # A user without a priced item within k has no value (null): left out of the mean.
        return rows.group_by(ctx.keys).agg(q.value(None) for q in requests)

    def diagnostics(self, ctx: extend.Context) -> list[extend.DiagnosticCount]:
        if not ctx.requests(self.name):
            return []
        assert ctx.prepared is not None
        prices, on = self._priced(ctx)
        k = ctx.spec.max_k
        top = ctx.prepared.top.filter(pl.col(extend.RANK) <= k)
        unpriced = top.join(prices, on=on, how="anti").select(*on).unique()
        return [
            extend.DiagnosticCount(
                "items_without_price", "recommended items without a price", unpriced, True
            )
        ]


FAMILY = PriceFamily()

extend.register_family(
    FAMILY,
    metrics=[
        extend.Metric(
            "price",
            build=_mean_price,
            reference=_reference,
            formula="mean over i in top-k with a price of price(i)",
            bounds=(0.0, None),
            needs=frozenset({"item_prices"}),
            family=FAMILY.name,
            population="listed",
        )
    ],
    inputs=[
        extend.ExtraInput(
            "item_prices",
            keyed=False,
            reads=("by", "item", "price"),
            needs=frozenset({"item_prices"}),
            what="one row per item with the item column and the price column",
            doc="One row per item with its price, for price@k.",
            help="item and --price-col per item, for price@k",
        )
    ],
    roles=[
        extend.Role(
            "price",
            "str",
            "price",
            "The price column of ``item_prices``.",
            "--price-col",
            "the price column of --item-prices",
        )
    ],
)
