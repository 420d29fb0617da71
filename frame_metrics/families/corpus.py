"""The corpus family: one value per ``by`` group from how often each item is shown.

Coverage, Gini and personalization read the exposure of each item (users with the item
in their top k) and the users with a list, per group. Both are counts over users, so a
partition's frame adds up with the others' (:meth:`CorpusFamily.combine`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import polars as pl

from frame_metrics.errors import InvalidOptionError
from frame_metrics.extras import catalog_items, missing_from
from frame_metrics.families.base import ENGINE, GROUP_USERS, Context, Family, Partitioned
from frame_metrics.metrics.corpus import CATALOG_SIZE, CorpusContext, exposure_column, users_column
from frame_metrics.prepare import RANK
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, null_checks

__all__ = ["FAMILY", "CorpusFamily", "global_seen_items"]


class CorpusFamily(Family):
    """Corpus metrics: per group, from item exposures."""

    name: ClassVar[str] = "corpus"
    order: ClassVar[int] = 40

    def check_call(self, spec: Spec, *, aggregate: bool) -> None:
        """Corpus metrics have one value per group: they need ``aggregate=True``."""
        corpus = [q.column for q in spec.of_family(self.name)]
        if corpus and not aggregate:
            raise InvalidOptionError(
                f"expected True for corpus metrics (one value per by group, not per "
                f"user), got False with {', '.join(corpus)}",
                option="aggregate",
                columns=corpus,
            )

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """The default catalog is every item seen, at any rank."""
        # The default catalog is every item seen, at any rank.
        return "catalog_size" in spec.needs and "catalog" not in broadcast

    def summed(self, spec: Spec) -> list[str]:
        """No per-user value: nothing summed over users."""
        return []

    def finished(self, spec: Spec) -> list[pl.Expr]:
        """No per-user value: the group frame holds the metrics."""
        return []

    def partials(self, ctx: Context) -> pl.LazyFrame | None:
        """Per (``by``, item): exposures within each corpus k; per ``by``: users within k.

        The users rows have a null item: both kinds add up over disjoint sets of users.
        """
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        c = ctx.spec.columns
        by, top = list(c.by), ctx.prepared.top
        ks = sorted({q.k for q in requests})
        exposure = top.group_by([*by, c.item]).agg(
            (pl.col(RANK) <= k).sum().cast(pl.Int64).alias(exposure_column(k)) for k in ks
        )
        user = pl.col(c.user[0]) if len(c.user) == 1 else pl.struct(list(c.user))
        users_aggs = [
            user.filter(pl.col(RANK) <= k).n_unique().cast(pl.Int64).alias(users_column(k))
            for k in ks
        ]
        users = top.group_by(by).agg(users_aggs) if by else top.select(users_aggs)
        item = pl.lit(None, top.collect_schema()[c.item]).alias(c.item)
        return pl.concat([exposure, users.with_columns(item)], how="diagonal_relaxed")

    def combine(self, spec: Spec, stacked: pl.DataFrame) -> pl.DataFrame:
        """Exposures and user counts added up per (``by``, item); users rows have a null item."""
        keys = [*spec.columns.by, spec.columns.item]
        return stacked.group_by(keys, maintain_order=True).agg(pl.all().sum())

    def finish_groups(self, ctx: Context, partials: pl.LazyFrame) -> pl.LazyFrame | None:
        """Corpus metrics per ``by`` group (and ``GROUP_USERS``) from :meth:`partials`."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        c = ctx.spec.columns
        by = list(c.by)
        ks = sorted({q.k for q in requests})
        item = pl.col(c.item)
        exposure = partials.filter(item.is_not_null()).select(
            *by, c.item, *(pl.col(exposure_column(k)).fill_null(0) for k in ks)
        )
        users = partials.filter(item.is_null()).select(
            *by, *(pl.col(users_column(k)).fill_null(0) for k in ks)
        )
        exposure = (
            exposure.join(users, on=by, how="left") if by else exposure.join(users, how="cross")
        )
        if "catalog_size" in ctx.spec.needs:
            exposure = _with_catalog_size(ctx, exposure)
        cctx = CorpusContext()
        aggs = [cctx.n_users(ks[-1]).alias(GROUP_USERS), *(q.value(cctx) for q in requests)]
        return exposure.group_by(by).agg(aggs) if by else exposure.select(aggs)

    def global_tables(self, spec: Spec, run: Partitioned) -> dict[str, Any]:
        """The items seen in every partition: the catalog when none is given."""
        if "catalog_size" not in spec.needs or "catalog" in run.broadcast:
            return {}
        return global_seen_items(spec, run)


def global_seen_items(spec: Spec, run: Partitioned) -> dict[str, Any]:
    """``"seen_items"``: the items of every partition's recs, truth and train.

    The default catalog, as the one-pass run takes it (the exposure family's too).
    """
    item = spec.columns.item
    # Plain values only in the closure: a Spark worker gets it pickled.
    dtype = run.schemas["recs"][item]

    def items(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
        # As the one-pass default catalog: the items of recs (every rank), truth, train.
        seen = [f.lazy() for f in frames.values()]
        found = pl.concat(f.select(pl.col(item).cast(dtype, strict=False)) for f in seen)
        return found.unique().collect(engine=ENGINE)

    names = tuple(n for n in ("recs", "truth", "train") if n in run.schemas)
    return {"seen_items": run.collect(items, names).unique().drop_nulls()}


FAMILY = CorpusFamily()


def _with_catalog_size(ctx: Context, exposure: pl.LazyFrame) -> pl.LazyFrame:
    """The exposure rows with their group's catalog size.

    The catalog given, else the items seen in the inputs: recommendations (every rank),
    truth and train (in a partitioned run, every partition's: ``seen_items``).
    """
    inputs, c = ctx.inputs, ctx.spec.columns
    shared = inputs.shared
    if "catalog" in inputs.extras:
        catalog = inputs.extra("catalog", [c.item])
        keys = [*catalog.by, c.item]
        ctx.checks.append(CheckedFrame("catalog", catalog.frame, null_checks(keys, "key"), keys))
        items = catalog_items(catalog, c)
        assert ctx.prepared is not None
        ctx.checks.append(
            missing_from(
                ctx.prepared.top,
                items,
                keys,
                "catalog",
                "recommended item (within the largest k) to be in the catalog",
                "; pass a catalog that holds every recommended item",
            )
        )
        size_by = list(catalog.by)
        sizes = (
            items.group_by(size_by).agg(pl.len().alias(CATALOG_SIZE))
            if size_by
            else items.select(pl.len().alias(CATALOG_SIZE))
        )
    elif shared is not None and shared.seen_items is not None:
        size_by = []
        sizes = shared.seen_items.lazy().select(pl.len().alias(CATALOG_SIZE))
    else:
        assert ctx.prepared is not None
        item_dtype = ctx.prepared.top.collect_schema()[c.item]
        seen = [inputs.source.lazy.select(pl.col(c.item).cast(item_dtype, strict=False))]
        if inputs.truth is not None:
            seen.append(inputs.truth.lazy.select(pl.col(c.item).cast(item_dtype, strict=False)))
        if "train" in inputs.extras:
            train = inputs.extras["train"].frame
            seen.append(train.select(pl.col(c.item).cast(item_dtype, strict=False)))
        size_by = []
        sizes = pl.concat(seen).select(pl.col(c.item).drop_nulls().n_unique().alias(CATALOG_SIZE))
    if size_by:
        return exposure.join(sizes, on=size_by, how="left").with_columns(
            pl.col(CATALOG_SIZE).fill_null(0)
        )
    return exposure.join(sizes, how="cross")
