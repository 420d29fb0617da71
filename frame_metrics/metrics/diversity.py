"""Diversity (spec section 6): 1 - the mean pairwise similarity of one user's top k.

The engine pairs each user's recommended items within the largest cutoff (rank a < rank
b, so each unordered pair once) and computes one similarity per pair from the item
features: Jaccard over a list of categories, or cosine over a vector (a dot product of
unit vectors). The builder reads one user's pair rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from frame_metrics.metrics.registry import Metric, register

__all__ = [
    "PAIR_RANK",
    "SIMILARITIES",
    "SIMILARITY",
    "DiversityContext",
    "cosine_of_unit",
    "jaccard",
    "jaccard_bits",
    "ordered_sum",
    "pair_column",
    "ref_similarity",
]

#: The rank of the lower-ranked item of a pair (the pair is within k when it is <= k).
PAIR_RANK = "_fm_pair_rank"
#: The pair's similarity.
SIMILARITY = "_fm_similarity"


def jaccard(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """|A ∩ B| / |A ∪ B| of two list columns of distinct values; 0 when both are empty."""
    shared = a.list.set_intersection(b).list.len().cast(pl.Float64)
    union = a.list.len().cast(pl.Float64) + b.list.len().cast(pl.Float64) - shared
    return pl.when(union > 0).then(shared / union).otherwise(0.0)


def jaccard_bits(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """The same for two bit masks of categories (UInt64): popcount(a & b) / popcount(a | b)."""
    shared = (a & b).bitwise_count_ones().cast(pl.Float64)
    union = (a | b).bitwise_count_ones().cast(pl.Float64)
    return pl.when(union > 0).then(shared / union).otherwise(0.0)


def cosine_of_unit(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """The cosine of two unit vectors (``Array`` columns): their dot product."""
    return (a * b).arr.sum()


#: A pair's similarity from its two feature values, per kind of feature table.
SIMILARITIES: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "jaccard": jaccard,
    "jaccard-bits": jaccard_bits,
    "cosine": cosine_of_unit,
}


@dataclass(frozen=True)
class DiversityContext:
    """One user's pairs within the top k: the sum of their similarities and their number.

    ``"pairs"`` mode reads one row per pair (``PAIR_RANK``, ``SIMILARITY``) inside a
    ``group_by(user).agg``. ``"pivot"`` mode (the engine, k <= 32) reads one row per user
    with a similarity column per pair of ranks (``pair_column(r, s)``, null when either
    rank is empty): no self-join, and the sum is a left fold in rank order.
    """

    mode: Literal["pairs", "pivot"] = "pairs"

    def similarity_sum(self, k: int) -> pl.Expr:
        """Σ sim over the pairs within the top k, in a fixed order."""
        if self.mode == "pivot":
            total: pl.Expr = pl.lit(0.0)
            for r, s in _pairs_within(k):
                total = total + pl.col(pair_column(r, s)).fill_null(0.0)
            return total
        return ordered_sum(pl.col(SIMILARITY).filter(pl.col(PAIR_RANK) <= k).sort())

    def n_pairs(self, k: int) -> pl.Expr:
        """How many pairs of recommended items the top k holds."""
        if self.mode == "pivot":
            count: pl.Expr = pl.lit(0, pl.UInt32)
            for r, s in _pairs_within(k):
                count = count + pl.col(pair_column(r, s)).is_not_null().cast(pl.UInt32)
            return count
        return (pl.col(PAIR_RANK) <= k).sum()


def _pairs_within(k: int) -> list[tuple[int, int]]:
    return [(r, s) for s in range(2, k + 1) for r in range(1, s)]


def pair_column(r: int, s: int) -> str:
    """The pivot column of the similarity of the items at ranks r < s."""
    return f"_fm_sim_{r}_{s}"


def ordered_sum(values: pl.Expr) -> pl.Expr:
    """A left-to-right sum of ``values`` in the order given (sort them first).

    Not ``sum()``: polars drops a ``sort()`` right before a ``sum()`` as pointless,
    and then the float sum depends on the order the group's rows arrived in.
    ``cum_sum`` is sequential by definition, so its last value is reproducible.
    """
    return values.cum_sum().last().fill_null(0.0)


def _diversity(ctx: DiversityContext, k: int) -> pl.Expr:
    n_pairs = ctx.n_pairs(k)
    return pl.when(n_pairs > 0).then(1.0 - ctx.similarity_sum(k) / n_pairs).otherwise(None)


def ref_similarity(
    a: Sequence[float] | frozenset[Hashable], b: Sequence[float] | frozenset[Hashable]
) -> float:
    """Jaccard of two sets, or cosine of two vectors (the reference's twin of the engine's)."""
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return len(a & b) / len(a | b) if a | b else 0.0
    assert not isinstance(a, frozenset)
    assert not isinstance(b, frozenset)
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _ref_diversity(
    ranks: Mapping[Hashable, int],
    k: int,
    features: Mapping[Hashable, Sequence[float] | frozenset[Hashable]],
) -> float | None:
    top = [i for i, r in sorted(ranks.items(), key=lambda p: p[1]) if r <= k]
    sims = [
        ref_similarity(features[a], features[b]) for x, a in enumerate(top) for b in top[x + 1 :]
    ]
    return 1.0 - sum(sims) / len(sims) if sims else None


register(
    Metric(
        "diversity",
        _diversity,
        _ref_diversity,
        "1 - mean over pairs of L[:k] of sim(i, j): Jaccard of categories or cosine of vectors; "
        "undefined (null) for a list of fewer than 2 items",
        bounds=(0.0, 2.0),
        needs=frozenset({"item_features"}),
        notes="RecTools IntraListDiversity (with a cosine or Jaccard distance calculator): "
        "the same mean over pairs, but a one-item list scores 0 where it is left out here. "
        "Recommenders diversity with item_feature_vector: the same (cosine; one-item lists "
        "dropped), without a cutoff. recmetrics intra_list_similarity: 1 - this (cosine); a "
        "one-item list raises ZeroDivisionError.",
        family="diversity",
        population="listed",
    )
)
