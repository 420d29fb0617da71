"""The engine's ranking context: every piece a metric reads is a per-user statistic.

A builder asks :class:`UserStats` for a piece (``hits(10)``, ``gain_sum(5)``, ...) and
gets back an expression over columns of a per-user statistics frame; asking records the
statistic, and the engine then computes exactly the recorded ones, each from the
smallest rows that hold it (see :mod:`frame_metrics.ranking_query`):

``"hits"``
    the top-k recommendations joined with the user's relevant truth items (inner): hit
    counts per cutoff, the first hit's rank, DCG and the AP numerator, flags of hits;
``"truth"``
    the user's relevant truth rows alone: ``|R|`` and the ideal DCG per cutoff;
``"listed"``
    the user's top-k recommendations alone: list lengths and sums of item columns.

Counts and integer sums are exact; a bounded float item column (self-information) is
summed in fixed point, as integers. A float sum whose last bit depends on the order of
addition (DCG, ideal DCG, the AP numerator) is taken in a fixed order:
the user's terms are gathered into a list in rank order (or by gain, descending, for the
ideal DCG), and each cutoff sums the list's prefix of length ``hits@k`` (or
``min(k, |R|)``). The result is therefore identical to the last bit
whatever the input row order, frame kind or polars engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import polars as pl

from frame_metrics.metrics.context import BOUNDED_FLOATS, discount
from frame_metrics.options import MetricOptions
from frame_metrics.prepare import RANK

__all__ = ["GAIN", "N_RELEVANT", "RANK", "SOURCES", "Source", "UserStats"]

Source = Literal["hits", "truth", "listed"]
SOURCES: tuple[Source, ...] = ("truth", "hits", "listed")

#: The DCG gain of a relevant item, on hit and truth rows (beside ``RANK`` on hit and
#: listed rows).
GAIN = "_fm_gain"
#: Column names of the statistics.
N_RELEVANT = "_fm_n_relevant"
_FIRST_HIT = "_fm_first_hit"
_DCG_TERM = "_fm_dcg_term"
_DCG_TERMS = "_fm_dcg_terms"
_HIT_RANKS = "_fm_hit_ranks"
_AP_TERMS = "_fm_ap_terms"
_IDEAL_GAINS = "_fm_ideal_gains"


def _prefix(terms: pl.Expr, length: pl.Expr) -> pl.Expr:
    """The sum of a list's first ``length`` terms (0 for none).

    ``list.sum`` adds one list's values with a fixed algorithm, so equal lists give
    equal sums to the last bit.
    """
    return terms.list.head(length).list.sum()


class UserStats:
    """Records the per-user statistics the requested metrics read; builds their queries.

    Implements :class:`~frame_metrics.metrics.context.RankingPieces`. Statistics of the
    ``"hits"`` and ``"listed"`` sources are 0 for a user without such rows, except the
    first hit's rank (null when there is none).
    """

    def __init__(self, options: MetricOptions) -> None:
        self._options = options
        #: name -> (source, aggregation over the source's rows of one user)
        self._aggs: dict[str, tuple[Source, pl.Expr]] = {}
        self._dcg: set[int] = set()
        self._ap: set[int] = set()
        self._ideal: set[int] = set()
        self._hit_flags: list[pl.Expr] = []
        #: The distinct gains of relevant truth rows, best first, when there are few.
        self._levels: tuple[float, ...] | None = None

    @property
    def options(self) -> MetricOptions:
        """The call's metric options."""
        return self._options

    # -- the pieces (RankingPieces) -------------------------------------------------------

    def _agg(self, source: Source, name: str, expr: pl.Expr) -> pl.Expr:
        self._aggs.setdefault(name, (source, expr))
        return pl.col(name)

    def hits(self, k: int) -> pl.Expr:  # noqa: D102 (documented in the protocol)
        return self._agg("hits", f"_fm_hits@{k}", (pl.col(RANK) <= k).sum())

    def n_relevant(self) -> pl.Expr:  # noqa: D102
        return self._agg("truth", N_RELEVANT, pl.len())

    def n_listed(self, k: int) -> pl.Expr:  # noqa: D102
        return self._agg("listed", f"_fm_listed@{k}", (pl.col(RANK) <= k).sum())

    def gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        self.hits(k)
        self._dcg.add(k)
        return pl.col(f"_fm_dcg@{k}")

    def ideal_gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        self.n_relevant()
        self._ideal.add(k)
        return pl.col(f"_fm_idcg@{k}")

    def precision_at_hits_sum(self, k: int) -> pl.Expr:  # noqa: D102
        self.hits(k)
        self._ap.add(k)
        return pl.col(f"_fm_ap_sum@{k}")

    def reciprocal_rank(self, k: int) -> pl.Expr:  # noqa: D102
        first = self._agg("hits", _FIRST_HIT, pl.col(RANK).min())
        return pl.when(first <= k).then(1.0 / first.cast(pl.Float64)).otherwise(0.0)

    def listed_sum(self, k: int, column: str) -> pl.Expr:  # noqa: D102
        within = pl.col(RANK) <= k
        bound = BOUNDED_FLOATS.get(column)
        if bound is None:
            # An integer column: the sum is exact in any order.
            return self._agg(
                "listed",
                f"_fm_sum_{column}@{k}",
                pl.when(within).then(pl.col(column)).otherwise(0).sum(),
            )
        # A float column with values in [0, bound): summed in fixed point, as integers
        # (exact in any order, with no sort), to within k * 2^-scale of the exact sum.
        scale = 2.0 ** (62 - math.ceil(math.log2(bound)) - math.ceil(math.log2(k + 1)))
        units = (pl.col(column) * scale).round().cast(pl.Int64, strict=False)
        total = self._agg(
            "listed", f"_fm_sum_{column}@{k}", pl.when(within).then(units).otherwise(0).sum()
        )
        return total.cast(pl.Float64) / scale

    def listed_count(self, k: int, flag: str) -> pl.Expr:  # noqa: D102
        within = (pl.col(RANK) <= k) & pl.col(flag).fill_null(False)
        return self._agg("listed", f"_fm_count_{flag}@{k}", within.sum())

    def hit_count(self, k: int, flag: pl.Expr) -> pl.Expr:  # noqa: D102
        within = (pl.col(RANK) <= k) & flag.fill_null(False)
        for i, seen in enumerate(self._hit_flags):
            if seen.meta.eq(within):
                return pl.col(f"_fm_hit_count_{i}")
        self._hit_flags.append(within)
        return self._agg("hits", f"_fm_hit_count_{len(self._hit_flags) - 1}", within.sum())

    # -- what the engine builds -----------------------------------------------------------

    @property
    def wants_ideal(self) -> bool:
        """Whether an ideal DCG was asked for (the engine then looks at the gains)."""
        return bool(self._ideal)

    def use_gain_levels(self, levels: Sequence[float]) -> None:
        """Compute the ideal DCG from counts of each distinct gain (call before building).

        With few distinct gains (a rating scale, binary relevance), a user's ideal list
        is its count of each gain, best first: the ideal DCG is
        ``Σ_j g_j · (H(min(C_j, k)) - H(min(C_{j-1}, k)))`` with ``C_j`` the number of
        items with one of the j best gains and ``H(n) = Σ_{p<=n} 1 / log2(p + 1)``. That
        needs one count per gain instead of sorting every user's truth rows.
        """
        self._levels = tuple(sorted(set(levels), reverse=True))

    def uses(self, source: Source) -> bool:
        """Whether any recorded statistic reads ``source``."""
        return any(s == source for s, _ in self._aggs.values())

    def row_columns(self, source: Source) -> list[pl.Expr]:
        """Columns to add to the source's rows before aggregating them."""
        if source == "hits" and self._dcg:
            return [(pl.col(GAIN) / discount(pl.col(RANK))).alias(_DCG_TERM)]
        return []

    def ordered(self, source: Source) -> bool:
        """Whether the source's rows must reach the aggregation sorted by (user, rank).

        polars keeps the order of a group's rows in the lists an aggregation gathers
        (documented for ``group_by``, in every engine); one sort of the rows is much
        cheaper than a sort within each of a million groups.
        """
        return source == "hits" and bool(self._dcg or self._ap)

    def aggregations(self, source: Source) -> list[pl.Expr]:
        """One user's aggregations over the source's rows (lists in rank order)."""
        aggs = [expr.alias(name) for name, (s, expr) in self._aggs.items() if s == source]
        if source == "hits":
            # The rows come sorted by rank (see ordered()): a group's list keeps their order.
            if self._dcg:
                aggs.append(pl.col(_DCG_TERM).alias(_DCG_TERMS))
            if self._ap:
                aggs.append(pl.col(RANK).alias(_HIT_RANKS))
        elif source == "truth" and self._ideal:
            if self._levels is not None:
                aggs += [
                    (pl.col(GAIN) == g).sum().alias(f"_fm_level_{j}")
                    for j, g in enumerate(self._levels)
                ]
            else:
                best = max(self._ideal)
                aggs.append(pl.col(GAIN).sort(descending=True).head(best).alias(_IDEAL_GAINS))
        return aggs

    def finish(self, source: Source) -> list[list[pl.Expr]]:
        """Stages of expressions that turn the source's lists into statistics.

        The first stage makes lists of terms where they are not gathered as such (the
        AP terms ``j / r`` and the discounted ideal gains), the second sums each list's
        prefix that lies within each cutoff. The engine drops the lists (:meth:`lists`).
        """
        terms: list[pl.Expr] = []
        prefixes: list[pl.Expr] = []
        if source == "hits":
            hits = {k: pl.col(f"_fm_hits@{k}") for k in self._dcg | self._ap}
            prefixes += [
                _prefix(pl.col(_DCG_TERMS), hits[k]).alias(f"_fm_dcg@{k}")
                for k in sorted(self._dcg)
            ]
            if self._ap:
                ranks = pl.col(_HIT_RANKS)
                # The j-th hit in rank order contributes hits@r / r = j / r.
                ordinal = pl.int_ranges(1, ranks.list.len() + 1, dtype=pl.Int64)
                ap_terms = ordinal.cast(pl.List(pl.Float64)) / ranks.cast(pl.List(pl.Float64))
                terms.append(ap_terms.alias(_AP_TERMS))
                prefixes += [
                    _prefix(pl.col(_AP_TERMS), hits[k]).alias(f"_fm_ap_sum@{k}")
                    for k in sorted(self._ap)
                ]
        elif source == "truth" and self._ideal and self._levels is not None:
            prefixes += [
                self._ideal_from_levels(k).alias(f"_fm_idcg@{k}") for k in sorted(self._ideal)
            ]
        elif source == "truth" and self._ideal:
            gains = pl.col(_IDEAL_GAINS)
            positions = pl.int_ranges(2, gains.list.len() + 2, dtype=pl.Int64)
            discounts = positions.list.eval(pl.element().cast(pl.Float64).log(2))
            terms.append((gains / discounts).alias(_IDEAL_GAINS))
            prefixes += [
                _prefix(
                    pl.col(_IDEAL_GAINS), pl.min_horizontal(pl.col(N_RELEVANT), pl.lit(k))
                ).alias(f"_fm_idcg@{k}")
                for k in sorted(self._ideal)
            ]
        return [stage for stage in (terms, prefixes) if stage]

    def _ideal_from_levels(self, k: int) -> pl.Expr:
        assert self._levels is not None
        # H(n) for n = 0..k: the discounts of the first n ideal positions, added in order.
        table = [0.0]
        for p in range(1, k + 1):
            table.append(table[-1] + 1.0 / math.log2(p + 1))
        h = pl.lit(pl.Series("_fm_h", table, dtype=pl.Float64))
        total: pl.Expr = pl.lit(0.0)
        before: pl.Expr = pl.lit(0, pl.Int64)
        for j, g in enumerate(self._levels):
            upto = before + pl.col(f"_fm_level_{j}").cast(pl.Int64)
            span = h.gather(pl.min_horizontal(upto, k)) - h.gather(pl.min_horizontal(before, k))
            total = total + g * span
            before = upto
        return total

    def lists(self, source: Source) -> list[str]:
        """The list columns :meth:`aggregations` makes for ``source`` (dropped after use)."""
        names = {
            "hits": [_DCG_TERMS] * bool(self._dcg) + [_HIT_RANKS, _AP_TERMS] * bool(self._ap),
            "truth": (
                [f"_fm_level_{j}" for j in range(len(self._levels))]
                if self._levels is not None
                else [_IDEAL_GAINS] * bool(self._ideal)
            ),
            "listed": [],
        }
        return names[source]

    def columns(self, source: Source) -> list[str]:
        """The statistic columns the source's frame ends with."""
        names = [name for name, (s, _) in self._aggs.items() if s == source]
        if source == "hits":
            names += [f"_fm_dcg@{k}" for k in sorted(self._dcg)]
            names += [f"_fm_ap_sum@{k}" for k in sorted(self._ap)]
        elif source == "truth":
            names += [f"_fm_idcg@{k}" for k in sorted(self._ideal)]
        return names

    def zero_fill(self, source: Source) -> list[str]:
        """Columns that are 0 (not null) for a user without rows in ``source``."""
        return [c for c in self.columns(source) if c != _FIRST_HIT]
