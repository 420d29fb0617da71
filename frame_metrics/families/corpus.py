"""Corpus metrics (spec section 6): one value per ``by`` group, from item exposure counts.

The engine counts, per group and item, how many users have the item in their top k
(the exposure ``c_i``), and per group the users with a recommended item within k
(``U``) and the catalog size ``n``. Every metric here is an expression over one group's
rows of that exposure table, so none of them ever pairs users: personalization over
1M users costs one pass over their lists.

Coverage, personalization and gini are integer sums divided once, so they are exact and
independent of row order.

The corpus family: one value per ``by`` group from how often each item is shown.

Coverage, Gini and personalization read the exposure of each item (users with the item
in their top k) and the users with a list, per group. Both are counts over users, so a
partition's frame adds up with the others' (:meth:`CorpusFamily.combine`).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from frame_metrics import shared_tables
from frame_metrics.errors import InvalidOptionError
from frame_metrics.extras import catalog_items, missing_from
from frame_metrics.family import GROUP_USERS, Context, Family, Partitioned
from frame_metrics.metrics.registry import Metric, register
from frame_metrics.prepare import RANK
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, null_checks

__all__ = [
    "CATALOG_SIZE",
    "FAMILY",
    "CorpusContext",
    "CorpusFamily",
    "exposure_column",
    "users_column",
]


#: Column of the catalog size, joined onto every exposure row of its group.
CATALOG_SIZE = "_fm_catalog_size"


def exposure_column(k: int) -> str:
    """The exposure count ``c_i`` at cutoff k: users with item i in their top k."""
    return f"_fm_exposure@{k}"


def users_column(k: int) -> str:
    """``U`` at cutoff k: users of the group with at least one item in their top k."""
    return f"_fm_listed_users@{k}"


@dataclass(frozen=True)
class CorpusContext:
    """One group's exposure rows (one per recommended item) and the group constants."""

    def exposure(self, k: int) -> pl.Expr:
        """``c_i``: how many users have item i within their top k (0 when none)."""
        return pl.col(exposure_column(k))

    def n_users(self, k: int) -> pl.Expr:
        """``U``: the group's users with a recommended item within k."""
        return pl.col(users_column(k)).first().cast(pl.Int64)

    def catalog_size(self) -> pl.Expr:
        """``n``: the catalog's items."""
        return pl.col(CATALOG_SIZE).first().cast(pl.Int64)


def _coverage(ctx: CorpusContext, k: int) -> pl.Expr:
    return (ctx.exposure(k) > 0).sum() / ctx.catalog_size()


def _ref_coverage(lists: Mapping[Hashable, Sequence[Hashable]], k: int, n: int) -> float:
    return len({i for items in lists.values() for i in items[:k]}) / n


def _personalization(ctx: CorpusContext, k: int) -> pl.Expr:
    # Σ over ordered user pairs of |L_u ∩ L_v| is Σ_i c_i (c_i - 1): each item shared by
    # c_i users appears in c_i (c_i - 1) ordered pairs.
    c = ctx.exposure(k).cast(pl.Int64)
    u = ctx.n_users(k)
    shared = (c * (c - 1)).sum()
    return (
        pl.when(u > 1)
        .then(1.0 - shared.cast(pl.Float64) / (k * u * (u - 1)).cast(pl.Float64))
        .otherwise(None)
    )


def _ref_personalization(lists: Mapping[Hashable, Sequence[Hashable]], k: int, n: int) -> float:
    users = [set(items[:k]) for items in lists.values() if items[:k]]
    pairs = [(a, b) for x, a in enumerate(users) for b in users[x + 1 :]]
    return 1.0 - sum(len(a & b) / k for a, b in pairs) / len(pairs)


def _gini(ctx: CorpusContext, k: int) -> pl.Expr:
    # Gini over all n catalog items, exposures sorted ascending: Σ_j (2j - n - 1) e_(j) / (n Σe).
    # Unexposed items sort first and add 0, so only the m exposed ones are summed, at
    # positions n - m + 1 .. n.
    e = ctx.exposure(k).cast(pl.Int64)
    exposed = e.filter(e > 0).sort()
    m = exposed.len().cast(pl.Int64)
    n = ctx.catalog_size()
    position = n - m + exposed.cum_count().cast(pl.Int64)
    weighted = ((2 * position - n - 1) * exposed).sum()
    total = exposed.sum()
    return (
        pl.when(total > 0)
        .then(weighted.cast(pl.Float64) / (n * total).cast(pl.Float64))
        .otherwise(None)
    )


def _ref_gini(lists: Mapping[Hashable, Sequence[Hashable]], k: int, n: int) -> float:
    counts: dict[Hashable, int] = {}
    for items in lists.values():
        for i in items[:k]:
            counts[i] = counts.get(i, 0) + 1
    e = sorted([0] * (n - len(counts)) + list(counts.values()))
    return sum((2 * j - n - 1) * x for j, x in enumerate(e, start=1)) / (n * sum(e))


register(
    Metric(
        "coverage",
        _coverage,
        _ref_coverage,
        "distinct items in anyone's L[:k] / catalog size",
        needs=frozenset({"catalog_size"}),
        notes="RecTools CatalogCoverage(normalize=True): the same with catalog=. Recommenders "
        "catalog_coverage: divides by the distinct train items (ours with catalog= the train "
        "items; above 1 when unseen items are recommended), no cutoff. recmetrics "
        "prediction_coverage: a percentage rounded to 2 decimals, no cutoff.",
        family="corpus",
        population="corpus",
    )
)
register(
    Metric(
        "personalization",
        _personalization,
        _ref_personalization,
        "1 - mean over user pairs of |L_u[:k] ∩ L_v[:k]| / k = 1 - Σ_i c_i(c_i - 1) / (k·U·(U - 1))",
        needs=frozenset(),
        notes="recmetrics personalization: 1 - the mean cosine between users' binary item "
        "vectors, which is |L_u ∩ L_v| / k when every list holds exactly k items; it needs "
        "lists of one length and builds the U x U similarity matrix.",
        family="corpus",
        population="corpus",
    )
)
register(
    Metric(
        "gini",
        _gini,
        _ref_gini,
        "Gini index of item exposure c_i over the catalog: Σ_j (2j - n - 1) c_(j) / (n Σ c), "
        "c sorted ascending",
        higher_is_better=False,
        needs=frozenset({"catalog_size"}),
        notes="None of RecTools, Recommenders or recmetrics computes it. Unexposed catalog "
        "items count (as zeros), as in the usual Gini of exposure.",
        family="corpus",
        population="corpus",
    )
)


# --------------------------------------------------------------------------- the family


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
        return shared_tables.seen_items(spec, run)

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """Nothing: the default catalog's items (``seen_items``) are read when finishing."""
        return frozenset()


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
