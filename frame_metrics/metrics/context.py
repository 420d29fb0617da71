"""What a ranking-metric builder reads: one user's rows of the long table, as expressions.

A builder writes its metric once, against :class:`RankingContext`; the context decides
how order-dependent pieces are computed, in one of three ways:

``"group"``
    Inside a caller's own ``group_by(...).agg(...)`` (:mod:`frame_metrics.exprs`): every
    piece is computed per group (a rank within the group for hits@r and ideal positions).
``"pivot"``
    The engine, for cutoffs up to :data:`PIVOT_MAX_K`: a sum over ranks 1..k is the sum,
    in that fixed order, of one aggregation per rank (``when(rank == r).then(term).sum()``,
    which holds at most one non-zero term because ranks are unique within a user). No
    sort, no window, and the float result does not depend on the order in which a
    parallel group-by meets the rows.
``"running"``
    The engine, for larger cutoffs: one global sort, a cumulative sum over the user key
    in that order, and the maximum of it within the cutoff (the terms are non-negative,
    so the maximum is the sum, and a maximum is order-independent too).

Both engine modes give results identical to the last bit whatever the input row order,
frame kind or polars engine; ``tests/test_reference.py`` checks that, and checks every
mode against the pure-Python references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import polars as pl

from frame_metrics.options import MetricOptions

__all__ = [
    "BASELINE_RANK",
    "IN_HISTORY",
    "IN_TAIL",
    "PIVOT_MAX_K",
    "POPULARITY",
    "SELF_INFORMATION",
    "RankingContext",
    "engine_context",
]

# Item and history columns the engine joins onto the long table when a metric needs them
# (see ``frame_metrics.extras``): train popularity (distinct users), its self-information
# -log2(pop / n_train_users), the long-tail flag, the baseline's rank of the same
# (user, item) (null when absent) and whether the pair is in the user's train rows.
POPULARITY = "_fm_popularity"
SELF_INFORMATION = "_fm_self_information"
IN_TAIL = "_fm_in_tail"
BASELINE_RANK = "_fm_baseline_rank"
IN_HISTORY = "_fm_in_history"

#: Largest cutoff computed with per-rank aggregations; above it, running sums.
PIVOT_MAX_K = 32

Mode = Literal["group", "pivot", "running"]

_IDEAL = "_fm_ideal_position"
_HITS = "_fm_hits_at_rank"


@dataclass(frozen=True)
class RankingContext:
    """The building blocks of one user's rows, and the order-aware sums over them.

    ``rank`` is null for a relevant item that was not recommended; ``is_rel`` is the
    relevance mask after the threshold; ``gain`` is the DCG gain of relevant items and
    0 on every other row; ``ideal_position`` is, for a relevant row, its position when the
    user's relevant items are sorted by gain, best first (null elsewhere).
    """

    rank: pl.Expr
    is_rel: pl.Expr
    gain: pl.Expr
    ideal_position: pl.Expr
    options: MetricOptions
    mode: Mode = "group"
    #: "running" mode: the running sums the builders asked for, name -> (order, terms).
    running_sums: dict[str, tuple[str, pl.Expr]] = field(default_factory=dict)

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def _basics(
        rank: str | pl.Expr, relevance: str | pl.Expr, options: MetricOptions
    ) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
        rank_e = pl.col(rank) if isinstance(rank, str) else rank
        rel = (pl.col(relevance) if isinstance(relevance, str) else relevance).fill_null(0)
        threshold = options.threshold
        is_rel = ((rel > 0) if threshold is None else (rel >= threshold)).fill_null(False)
        raw_gain = {
            "linear": rel.cast(pl.Float64),
            "exponential": pl.lit(2.0).pow(rel.cast(pl.Float64)) - 1.0,
            "binary": pl.lit(1.0),
        }[options.gain]
        return rank_e, is_rel, pl.when(is_rel).then(raw_gain).otherwise(0.0)

    @classmethod
    def from_columns(
        cls, rank: str | pl.Expr, relevance: str | pl.Expr, options: MetricOptions
    ) -> RankingContext:
        """The ``"group"`` context, for use inside any ``group_by(...).agg(...)``."""
        rank_e, is_rel, gain = cls._basics(rank, relevance, options)
        ideal = pl.when(is_rel).then(gain).rank("ordinal", descending=True)
        return cls(rank_e, is_rel, gain, ideal, options, "group")

    # -- plain pieces -----------------------------------------------------------------------

    def in_k(self, k: int) -> pl.Expr:
        """Rows recommended within the cutoff (false for unrecommended rows)."""
        return (self.rank <= k).fill_null(False)

    def hits(self, k: int) -> pl.Expr:
        """``hits@k``: relevant items ranked within the cutoff."""
        return (self.is_rel & self.in_k(k)).sum()

    def n_relevant(self) -> pl.Expr:
        """``|R|``: the user's relevant items, recommended or not."""
        return self.is_rel.sum()

    def n_listed(self, k: int) -> pl.Expr:
        """``|L[:k]|``: items recommended within the cutoff."""
        return self.in_k(k).sum()

    def count_within(self, k: int, flag: pl.Expr) -> pl.Expr:
        """How many of ``L[:k]`` satisfy ``flag`` (an exact integer count)."""
        return (self.in_k(k) & flag.fill_null(False)).sum()

    def rank_sum(self, terms: pl.Expr, k: int) -> pl.Expr:
        """``Σ_{r<=k} terms(L[r])`` for non-negative float ``terms``, in rank order."""
        if self.mode == "pivot":
            return self._left_fold(
                [pl.when(self.rank == r).then(terms).otherwise(0.0).sum() for r in range(1, k + 1)]
            )
        return self._sum_within("rank", self.rank, terms, k)

    @staticmethod
    def discount(position: pl.Expr | int) -> pl.Expr:
        """``log2(position + 1)``, the DCG discount."""
        p = pl.lit(position) if isinstance(position, int) else position
        return (p.cast(pl.Float64) + 1.0).log(2)

    # -- order-aware sums -------------------------------------------------------------------

    def _running(self, order: str, terms: pl.Expr) -> pl.Expr:
        for name, (o, t) in self.running_sums.items():
            if o == order and t.meta.eq(terms):  # shared by every cutoff
                return pl.col(name)
        name = f"_fm_running_{len(self.running_sums)}"
        self.running_sums[name] = (order, terms)
        return pl.col(name)

    @staticmethod
    def _left_fold(terms: list[pl.Expr]) -> pl.Expr:
        # An explicit left-to-right sum: sum_horizontal may associate differently in
        # different polars engines, which changes the last bit.
        total = pl.lit(0.0)
        for term in terms:
            total = total + term
        return total

    def _sum_within(self, order: str, position: pl.Expr, terms: pl.Expr, k: int) -> pl.Expr:
        """Σ of non-negative row ``terms`` over rows whose ``position`` is <= k."""
        within = (position <= k).fill_null(False)
        if self.mode == "running":
            return self._running(order, terms).filter(within).max().fill_null(0.0)
        return pl.when(within).then(terms).otherwise(0.0).sum()

    def _discounted_gain_sum(self, order: str, position: pl.Expr, k: int) -> pl.Expr:
        if self.mode == "pivot":
            return self._left_fold(
                [
                    pl.when(position == p).then(self.gain).otherwise(0.0).sum() / self.discount(p)
                    for p in range(1, k + 1)
                ]
            )
        return self._sum_within(order, position, self.gain / self.discount(position), k)

    def gain_sum(self, k: int) -> pl.Expr:
        """``Σ_{r<=k} gain(L[r]) / log2(r + 1)``: the DCG of the top k."""
        return self._discounted_gain_sum("rank", self.rank, k)

    def ideal_gain_sum(self, k: int) -> pl.Expr:
        """The DCG of the best k relevant items: ``Σ_{p<=k} gain_(p) / log2(p + 1)``."""
        return self._discounted_gain_sum("ideal", self.ideal_position, k)

    def precision_at_hits_sum(self, k: int) -> pl.Expr:
        """``Σ_{r<=k, L[r]∈R} hits@r / r``: the numerator of AP@k."""
        if self.mode == "pivot":
            # One aggregation, shared by every cutoff: bit r-1 is set when the item at
            # rank r is relevant (the engine's long table holds ranks <= max k <= 32, so
            # it fits a UInt64); hits@r and the sum then unfold per user, in rank order.
            hit = self.is_rel & self.rank.is_not_null()
            bits = pl.when(hit).then(pl.lit(2, pl.UInt64).pow(self.rank - 1)).otherwise(0).sum()
            total: pl.Expr = pl.lit(0.0)
            hits_so_far: pl.Expr = pl.lit(0, pl.UInt64)
            for r in range(1, k + 1):
                hit_r = (bits // (1 << (r - 1))) % 2
                hits_so_far = hits_so_far + hit_r
                total = total + hit_r * hits_so_far / r
            return total
        recommended_rel = self.is_rel & self.rank.is_not_null()
        if self.mode == "running":
            hits_at_rank = pl.col(_HITS)
        else:
            # rank() keeps nulls null; ranks are unique, so the ordinal is hits@r.
            hits_at_rank = pl.when(recommended_rel).then(self.rank).rank("ordinal")
        terms = pl.when(recommended_rel).then(hits_at_rank / self.rank.cast(pl.Float64))
        return self._sum_within("rank", self.rank, terms, k)


def engine_context(rank: str, relevance: str, options: MetricOptions, max_k: int) -> RankingContext:
    """The engine's context: ``"pivot"`` up to :data:`PIVOT_MAX_K`, else ``"running"``."""
    rank_e, is_rel, gain = RankingContext._basics(rank, relevance, options)
    mode: Mode = "pivot" if max_k <= PIVOT_MAX_K else "running"
    return RankingContext(rank_e, is_rel, gain, pl.col(_IDEAL), options, mode)


def add_row_features(
    long: pl.LazyFrame, keys: list[str], ctx: RankingContext, relevance: str
) -> pl.LazyFrame:
    """Add what the built metrics read beyond the raw columns, for all users at once.

    Call after building every metric with ``ctx``: in ``"running"`` mode it records the
    running sums its builders asked for.
    """
    if ctx.mode == "pivot":
        # Ideal positions: a rank within each user; ties get distinct positions, and as
        # tied gains are equal, which tied item takes which position changes nothing.
        return long.with_columns(
            pl.when(ctx.is_rel)
            .then(ctx.gain)
            .rank("ordinal", descending=True)
            .over(keys)
            .alias(_IDEAL)
        )
    recommended_rel = ctx.is_rel & ctx.rank.is_not_null()

    def running_columns(order: str) -> list[pl.Expr]:
        return [
            terms.fill_null(0.0).cum_sum().over(keys).alias(name)
            for name, (o, terms) in ctx.running_sums.items()
            if o == order
        ]

    long = long.sort(ctx.rank, nulls_last=True).with_columns(
        pl.when(recommended_rel)
        .then(recommended_rel.cast(pl.UInt32).cum_sum().over(keys))
        .alias(_HITS)
    )
    long = long.with_columns(running_columns("rank"))
    # Every gain is non-decreasing in relevance, so relevance order is gain order; a
    # stable sort keeps rank order among equal relevance.
    long = long.sort(relevance, descending=True, nulls_last=True, maintain_order=True)
    long = long.with_columns(
        pl.when(ctx.is_rel).then(ctx.is_rel.cast(pl.UInt32).cum_sum().over(keys)).alias(_IDEAL)
    )
    return long.with_columns(running_columns("ideal"))
