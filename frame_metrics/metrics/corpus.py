"""Corpus metrics (spec section 6): one value per ``by`` group, from item exposure counts.

The engine counts, per group and item, how many users have the item in their top k
(the exposure ``c_i``), and per group the users with a recommended item within k
(``U``) and the catalog size ``n``. Every metric here is an expression over one group's
rows of that exposure table, so none of them ever pairs users: personalization over
1M users costs one pass over their lists.

Coverage, personalization and gini are integer sums divided once, so they are exact and
independent of row order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from frame_metrics.metrics.registry import Metric, register

__all__ = ["CATALOG_SIZE", "CorpusContext", "exposure_column", "users_column"]

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
