"""Diversity (spec section 6): 1 - the mean pairwise similarity of one user's top k.

For Jaccard over a list of categories, the engine pairs each user's recommended items
within the largest cutoff (rank a < rank b, so each unordered pair once) and computes
one similarity per pair. Cosine over vectors needs no pairs: the sum of a list's unit
vectors gives the sum of its pairs' dot products (:func:`vector_sums`). The builder
reads either through :class:`DiversityContext`.

The diversity family: metrics over the pairs of one user's top items.

Intra-list diversity from item features: the similarity of each pair of a user's
items within k (Jaccard of feature sets, or cosine of feature vectors), averaged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import polars as pl

from frame_metrics.extras import FEATURES, feature_table, missing_from
from frame_metrics.family import Context, Family
from frame_metrics.metrics.context import PIVOT_MAX_K
from frame_metrics.metrics.registry import Metric, register
from frame_metrics.numerics import ordered_sum
from frame_metrics.prepare import RANK
from frame_metrics.spec import Spec

__all__ = [
    "FAMILY",
    "PAIR_RANK",
    "SIMILARITIES",
    "SIMILARITY",
    "DiversityContext",
    "DiversityFamily",
    "cosine_of_unit",
    "jaccard",
    "jaccard_bits",
    "listed_column",
    "pair_column",
    "ref_similarity",
    "vector_sum_column",
    "vector_sums",
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
    ``"vectors"`` mode (the engine, cosine) reads one row per user with the sum of the
    top k's unit vectors (``vector_sum_column(j, k)``, component j, in fixed point
    ``2^scale_bits``) and their number (``listed_column(k)``): no pairs at all (see
    :func:`vector_sums`).
    """

    mode: Literal["pairs", "pivot", "vectors"] = "pairs"
    width: int = 0  # "vectors": the vector length
    scale_bits: int = 0  # "vectors": the fixed point of the sums

    def similarity_sum(self, k: int) -> pl.Expr:
        """Σ sim over the pairs within the top k, in a fixed order."""
        if self.mode == "vectors":
            # Σ_{a<b} u_a·u_b = (|Σ u|² − Σ |u|²) / 2, and each |u|² is 1.
            scale = 2.0**self.scale_bits
            squares: pl.Expr = pl.lit(0.0)
            for j in range(self.width):
                component = pl.col(vector_sum_column(j, k)).cast(pl.Float64) / scale
                squares = squares + component * component
            return (squares - pl.col(listed_column(k)).cast(pl.Float64)) / 2.0
        if self.mode == "pivot":
            total: pl.Expr = pl.lit(0.0)
            for r, s in _pairs_within(k):
                total = total + pl.col(pair_column(r, s)).fill_null(0.0)
            return total
        return ordered_sum(pl.col(SIMILARITY).filter(pl.col(PAIR_RANK) <= k).sort())

    def n_pairs(self, k: int) -> pl.Expr:
        """How many pairs of recommended items the top k holds."""
        if self.mode == "vectors":
            n = pl.col(listed_column(k)).cast(pl.Int64)
            return n * (n - 1) // 2
        if self.mode == "pivot":
            count: pl.Expr = pl.lit(0, pl.UInt32)
            for r, s in _pairs_within(k):
                count = count + pl.col(pair_column(r, s)).is_not_null().cast(pl.UInt32)
            return count
        return (pl.col(PAIR_RANK) <= k).sum()


def _pairs_within(k: int) -> list[tuple[int, int]]:
    return [(r, s) for s in range(2, k + 1) for r in range(1, s)]


def vector_sum_column(j: int, k: int) -> str:
    """The "vectors" column of component j of the sum of the top k's unit vectors."""
    return f"_fm_vsum_{j}@{k}"


def listed_column(k: int) -> str:
    """The "vectors" column of how many items the top k lists."""
    return f"_fm_vlisted@{k}"


def vector_sums(
    vectors: pl.Expr, rank: pl.Expr, width: int, cutoffs: Sequence[int]
) -> tuple[list[pl.Expr], int]:
    """Aggregations (inside ``group_by(user)``) of the sums of unit vectors within each k.

    Mean pairwise cosine of unit vectors needs only their sum: Σ_{a<b} u_a·u_b =
    (|Σ u|² − n) / 2, which is O(n·d) per user where the pairs are O(n²·d). Components
    (in [-1, 1]) are summed in fixed point, as Int64 (exact, so the sums do not depend
    on the row order, and within k · 2^-scale_bits of the real sums); the bits are as
    many as the largest sum (at most max k) leaves. Returns the expressions and the bits.
    """
    scale_bits = 62 - math.ceil(math.log2(max(cutoffs) + 1))
    units = [
        (vectors.arr.get(j) * 2.0**scale_bits).round().cast(pl.Int64, strict=False)
        for j in range(width)
    ]
    out: list[pl.Expr] = []
    for k in sorted(set(cutoffs)):
        within = rank <= k
        out.append(within.sum().alias(listed_column(k)))
        out += [
            pl.when(within).then(u).otherwise(0).sum().alias(vector_sum_column(j, k))
            for j, u in enumerate(units)
        ]
    return out, scale_bits


def pair_column(r: int, s: int) -> str:
    """The pivot column of the similarity of the items at ranks r < s."""
    return f"_fm_sim_{r}_{s}"


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


# --------------------------------------------------------------------------- the family


def _array_width(dtype: pl.DataType) -> int:
    """The length of a fixed-width vector dtype (0 for a list: the feature table is empty)."""
    return dtype.size if isinstance(dtype, pl.Array) else 0


class DiversityFamily(Family):
    """Diversity: one similarity per pair of a user's top items."""

    name: ClassVar[str] = "diversity"
    order: ClassVar[int] = 20

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """The pairs of each user's top items, one similarity per pair."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        spec, c, keys = ctx.spec, ctx.spec.columns, ctx.keys
        max_k = spec.max_k
        top = ctx.prepared.top
        extra = ctx.inputs.extra("item_features", [c.item])
        table, similarity, checks = feature_table(extra, c, spec.options)
        ctx.first_checks.extend(checks)
        on = [*extra.by, c.item]
        ctx.checks.append(
            missing_from(
                top,
                table,
                on,
                "item_features",
                "recommended item (within the largest k) to have a features row",
                "; add their features or leave the items out",
            )
        )
        rows = top.join(table, on=on, how="inner").select(*keys, RANK, FEATURES)
        similar = SIMILARITIES[similarity]
        if similarity == "cosine":
            # Cosine of unit vectors: each user's vector sums give the pair sums.
            width = _array_width(rows.collect_schema()[FEATURES])
            aggs, scale_bits = vector_sums(
                pl.col(FEATURES), pl.col(RANK), width, [q.k for q in requests]
            )
            vctx = DiversityContext("vectors", width, scale_bits)
            return rows.group_by(keys).agg(aggs).select(*keys, *(q.value(vctx) for q in requests))
        if max_k <= PIVOT_MAX_K:
            # One row per user with the features at each rank, then one similarity per
            # pair of ranks: no self-join of the rows.
            at_rank = rows.group_by(keys).agg(
                pl.col(FEATURES).filter(pl.col(RANK) == p).first().alias(f"_fm_f{p}")
                for p in range(1, max_k + 1)
            )

            def pair(a: int, b: int) -> pl.Expr:
                fa, fb = pl.col(f"_fm_f{a}"), pl.col(f"_fm_f{b}")
                # Null when a rank is empty: no pair there.
                both = fa.is_not_null() & fb.is_not_null()
                return pl.when(both).then(similar(fa, fb)).alias(pair_column(a, b))

            sims = [pair(a, b) for b in range(2, max_k + 1) for a in range(1, b)]
            pctx = DiversityContext("pivot")
            # Users without a pair get nulls here; the planner drops rows without a value.
            return at_rank.select(*keys, *sims).select(*keys, *(q.value(pctx) for q in requests))
        pairs = rows.join(rows, on=keys, suffix="_b").filter(pl.col(RANK) < pl.col(f"{RANK}_b"))
        sim = similar(pl.col(FEATURES), pl.col(f"{FEATURES}_b"))
        pairs = pairs.select(*keys, pl.col(f"{RANK}_b").alias(PAIR_RANK), sim.alias(SIMILARITY))
        dctx = DiversityContext("pairs")
        return pairs.group_by(keys).agg(q.value(dctx) for q in requests)

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """No table over every user: item features are given whole."""
        return frozenset()


FAMILY = DiversityFamily()
