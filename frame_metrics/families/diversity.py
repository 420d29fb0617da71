"""The diversity family: metrics over the pairs of one user's top items.

Intra-list diversity from item features: the similarity of each pair of a user's
items within k (Jaccard of feature sets, or cosine of feature vectors), averaged.
"""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from frame_metrics.extras import FEATURES, feature_table, missing_from
from frame_metrics.families.base import Context, Family
from frame_metrics.metrics.context import PIVOT_MAX_K
from frame_metrics.metrics.diversity import (
    PAIR_RANK,
    SIMILARITIES,
    SIMILARITY,
    DiversityContext,
    pair_column,
    vector_sums,
)
from frame_metrics.prepare import RANK

__all__ = ["FAMILY", "DiversityFamily"]


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


FAMILY = DiversityFamily()
