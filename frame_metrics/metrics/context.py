"""What a ranking-metric builder reads: the pieces of one user's evaluation, as expressions.

A builder writes its metric once, against the :class:`RankingPieces` protocol: hit counts,
the number of relevant items, discounted gain sums, the AP numerator, the reciprocal rank
and a few sums over the recommended list. Two classes implement it:

:class:`RankingContext`
    Over one user's rows of the spec's long table, inside a caller's own
    ``group_by(...).agg(...)`` (:mod:`frame_metrics.exprs`): every piece is an aggregation.
:class:`frame_metrics.families.ranking.stats.UserStats`
    The engine's: every piece is a column of a per-user statistics frame that the engine
    builds from the hits (top-k recommendations joined with relevant truth), the truth
    alone and the recommended list alone (see :mod:`frame_metrics.families.ranking.query`).

Both give results that do not depend on the order in which rows arrive: integer counts
are exact, and float sums whose value depends on the order of addition are taken in
rank order (or ideal-position order) after an explicit per-user sort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from frame_metrics.options import RBP_PERSISTENCE, MetricOptions

__all__ = [
    "BASELINE_RANK",
    "BOUNDED_FLOATS",
    "IN_HISTORY",
    "IN_TAIL",
    "PIVOT_MAX_K",
    "POPULARITY",
    "SELF_INFORMATION",
    "RankingContext",
    "RankingPieces",
    "dcg_term",
    "dcg_terms",
    "discount",
    "discount_sums",
    "gain_expr",
    "ideal_slots",
    "is_relevant",
    "over_constant",
    "rbp_weight",
]

# Item and history columns the engine joins when a metric needs them (see
# ``frame_metrics.extras``): train popularity (distinct users), its self-information
# -log2(pop / n_train_users) and the long-tail flag (on the recommended rows); the
# baseline's rank of the same (user, item) (null when absent) and whether the pair is in
# the user's train rows (on the hit rows).
POPULARITY = "_fm_popularity"
SELF_INFORMATION = "_fm_self_information"
IN_TAIL = "_fm_in_tail"
BASELINE_RANK = "_fm_baseline_rank"
IN_HISTORY = "_fm_in_history"

#: Float item columns whose values lie in [0, bound): the engine sums them in fixed point
#: (exact integer sums, so no sort is needed for a result independent of row order).
#: Self-information is log2(n_train_users / pop) <= log2(2^63).
BOUNDED_FLOATS: dict[str, float] = {SELF_INFORMATION: 64.0}

#: Largest cutoff for which diversity pivots a user's items into one row (see the engine).
PIVOT_MAX_K = 32


def is_relevant(relevance: pl.Expr, options: MetricOptions) -> pl.Expr:
    """The relevance mask after the threshold (``rel > 0`` by default); null is not relevant."""
    t = options.threshold
    return ((relevance > 0) if t is None else (relevance >= t)).fill_null(False)


def gain_expr(relevance: pl.Expr, options: MetricOptions) -> pl.Expr:
    """The DCG gain of a relevant item's relevance, as Float64."""
    rel = relevance.cast(pl.Float64)
    if isinstance(options.gain, tuple):
        # A trec_eval gain table: listed levels take its gain, others keep their relevance.
        levels = [level for level, _ in options.gain]
        gains = [gain for _, gain in options.gain]
        return rel.replace(levels, gains)
    return {
        "linear": rel,
        "exponential": pl.lit(2.0).pow(rel) - 1.0,
        "binary": pl.lit(1.0),
    }[options.gain]


def over_constant(value: pl.Expr, k: int) -> pl.Expr:
    """``value / k``, correctly rounded on every row (``value`` finite).

    polars divides a column of more than one row by a scalar as a multiplication by the
    scalar's reciprocal (``3 / 10`` gives 0.30000000000000004 there, 0.3 on one row),
    so the last bit would depend on how rows are grouped into columns. Dividing by a
    column of k's is an IEEE division on every row.
    """
    return value / (value.cast(pl.Float64) * 0.0 + float(k))


def rbp_weight(rank: pl.Expr, persistence: float) -> pl.Expr:
    """``p^(rank - 1)``, as exp((rank - 1)·ln p).

    polars' ``pow`` takes another path for a one-row column than for a longer one, so
    its last bit would depend on how rows are grouped; ``exp`` and ``log`` do not.
    """
    return ((rank.cast(pl.Float64) - 1.0) * math.log(persistence)).exp()


def discount_sums(k: int) -> list[float]:
    """H(n) for n = 0..k: the DCG discounts 1/log2(p + 1) of positions 1..n, added in order.

    Examples
    --------
    >>> discount_sums(3)[1:] == [1.0, 1.0 + 1 / math.log2(3), 1.0 + 1 / math.log2(3) + 0.5]
    True
    """
    table = [0.0]
    for p in range(1, k + 1):
        table.append(table[-1] + 1.0 / math.log2(p + 1))
    return table


def discount(position: pl.Expr | int) -> pl.Expr:
    """``log2(position + 1)``, the DCG discount."""
    p = pl.lit(position) if isinstance(position, int) else position
    return (p.cast(pl.Float64) + 1.0).log(2)


def dcg_term(gain: pl.Expr, position: pl.Expr) -> pl.Expr:
    """``gain / log2(position + 1)``: one item's DCG term.

    The one arithmetic for every DCG and ideal DCG: a list in ideal order has exactly the
    ideal's terms, and both are added in position order by the same summation, so its
    NDCG is exactly 1.0.
    """
    return gain.cast(pl.Float64) / discount(position)


def dcg_terms(gains: pl.Expr) -> pl.Expr:
    """The DCG terms of a list column of gains held at positions 1, 2, ... (:func:`dcg_term`)."""
    positions = pl.int_ranges(1, gains.list.len() + 1, dtype=pl.Int64)
    return gains / positions.list.eval(discount(pl.element()))


def ideal_slots(k: int) -> float:
    """``Σ_{p<=k} 1/log2(p + 1)``: the DCG of k items of gain 1 (RecTools' ideal DCG).

    Computed with the terms and the list summation of :class:`UserStats` DCG, so a list
    of k relevant items under a binary gain scores exactly 1.

    Examples
    --------
    >>> abs(ideal_slots(3) - (1 + 1 / math.log2(3) + 0.5)) < 1e-15
    True
    """
    gains = pl.DataFrame({"gain": [[1.0] * k]}, schema={"gain": pl.List(pl.Float64)})
    total = gains.select(dcg_terms(pl.col("gain")).list.sum()).item()
    return float(total)


class RankingPieces(Protocol):
    """What ranking and list metrics are written against (one user, one cutoff k)."""

    @property
    def options(self) -> MetricOptions:
        """The call's metric options."""
        ...

    def hits(self, k: int) -> pl.Expr:
        """``hits@k``: relevant items ranked within the cutoff."""
        ...

    def n_relevant(self) -> pl.Expr:
        """``|R|``: the user's relevant items, recommended or not."""
        ...

    def n_listed(self, k: int) -> pl.Expr:
        """``|L[:k]|``: items recommended within the cutoff."""
        ...

    def relevant_mass(self) -> pl.Expr:
        """``|R|`` as the metrics divide by it: the number of relevant items.

        With propensity weights (spec 9.4), ``Σ_R w̃``; :meth:`n_relevant` stays the
        count (who is evaluated, R-precision's cutoff, the ideal list's length).
        """
        ...

    def gain_sum(self, k: int) -> pl.Expr:
        """``Σ_{r<=k} gain(L[r]) / log2(r + 1)``: the DCG of the top k."""
        ...

    def ideal_gain_sum(self, k: int) -> pl.Expr:
        """The DCG of the best k relevant items: ``Σ_{p<=k} gain_(p) / log2(p + 1)``."""
        ...

    def ideal_slots_sum(self, k: int) -> pl.Expr:
        """``Σ_{p<=k} 1 / log2(p + 1)``: k ideal slots of gain 1 (``idcg="k"``).

        Added as :meth:`gain_sum` adds, so k relevant items under a binary gain give
        exactly this value.
        """
        ...

    def precision_at_hits_sum(self, k: int) -> pl.Expr:
        """``Σ_{r<=k, L[r]∈R} hits@r / r``: the numerator of AP@k."""
        ...

    def reciprocal_rank(self, k: int) -> pl.Expr:
        """``1 / rank`` of the first relevant item within the cutoff, 0 if none."""
        ...

    def listed_sum(self, k: int, column: str) -> pl.Expr:
        """``Σ_{r<=k}`` of a numeric item column over the recommended items, in rank order."""
        ...

    def listed_count(self, k: int, flag: str) -> pl.Expr:
        """How many of ``L[:k]`` have the boolean item column ``flag`` set."""
        ...

    def hit_count(self, k: int, flag: pl.Expr) -> pl.Expr:
        """How many relevant items within the cutoff satisfy ``flag`` (read on hit rows)."""
        ...

    def in_population(self) -> pl.Expr:
        """Whether the user is among those ``users=`` lets be evaluated."""
        ...

    def any_hit(self, k: int) -> pl.Expr:
        """1.0 if a relevant item is within the cutoff, else 0.0.

        Under ``ties="average"``, the probability over the orders of tied items.
        """
        ...

    def hits_within_relevant(self) -> pl.Expr:
        """``hits@R``: relevant items ranked within R, the user's number of relevant items."""
        ...

    def rbp_sum(self) -> pl.Expr:
        """``Σ_{L[r] ∈ R} p^(r-1)`` over the whole list, p = ``options.persistence``."""
        ...

    def err_sum(self, k: int) -> pl.Expr:
        """``Σ_{r<=k} P_r / r · Π_{i<r} (1 - P_i)``, P from the graded relevance."""
        ...

    def bpref_sum(self) -> pl.Expr:
        """``Σ_{relevant retrieved r} (1 - min(n_r, R) / min(R, N))`` (1 when n_r = 0)."""
        ...

    def judged_count(self, k: int) -> pl.Expr:
        """How many of ``L[:k]`` have a truth row, of any relevance."""
        ...


@dataclass(frozen=True)
class RankingContext:
    """The pieces over one user's rows of the long table, inside any ``group_by().agg()``.

    ``rank`` is null for a relevant item that was not recommended. Sums whose float value
    depends on the order of addition sort first, and add with ``cum_sum`` (polars drops
    a ``sort()`` right before a ``sum()``, which would make the result depend on the
    order the rows arrived in).
    """

    rank: pl.Expr
    relevance: pl.Expr
    options: MetricOptions

    @classmethod
    def from_columns(
        cls, rank: str | pl.Expr, relevance: str | pl.Expr, options: MetricOptions
    ) -> RankingContext:
        """The context of a long table's ``rank`` and ``relevance`` (names or expressions)."""
        rank_e = pl.col(rank) if isinstance(rank, str) else rank
        rel = pl.col(relevance) if isinstance(relevance, str) else relevance
        return cls(rank_e, rel.fill_null(0), options)

    @property
    def is_rel(self) -> pl.Expr:
        """The relevance mask after the threshold."""
        return is_relevant(self.relevance, self.options)

    @property
    def gain(self) -> pl.Expr:
        """The DCG gain of relevant rows, 0 elsewhere."""
        return pl.when(self.is_rel).then(gain_expr(self.relevance, self.options)).otherwise(0.0)

    def in_k(self, k: int) -> pl.Expr:
        """Rows recommended within the cutoff (false for unrecommended rows)."""
        return (self.rank <= k).fill_null(False)

    def hits(self, k: int) -> pl.Expr:  # noqa: D102 (documented in the protocol)
        return (self.is_rel & self.in_k(k)).sum()

    def n_relevant(self) -> pl.Expr:  # noqa: D102
        return self.is_rel.sum()

    def n_listed(self, k: int) -> pl.Expr:  # noqa: D102
        return self.in_k(k).sum()

    def relevant_mass(self) -> pl.Expr:  # noqa: D102
        # One user's rows carry no propensity weights: the count.
        return self.n_relevant()

    @staticmethod
    def _ordered_sum(terms: pl.Expr, order: pl.Expr) -> pl.Expr:
        return terms.sort_by(order).cum_sum().last().fill_null(0.0)

    def gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        hit = self.is_rel & self.in_k(k)
        return self._ordered_sum(dcg_term(self.gain, self.rank).filter(hit), self.rank.filter(hit))

    def ideal_gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        best = self.gain.filter(self.is_rel).sort(descending=True).head(k)
        terms = dcg_term(best, pl.int_range(1, best.len() + 1))
        return terms.cum_sum().last().fill_null(0.0)

    def ideal_slots_sum(self, k: int) -> pl.Expr:  # noqa: D102
        return dcg_term(pl.lit(1.0), pl.int_range(1, k + 1)).cum_sum().last()

    def precision_at_hits_sum(self, k: int) -> pl.Expr:  # noqa: D102
        ranks = self.rank.filter(self.is_rel & self.in_k(k)).sort()
        terms = pl.int_range(1, ranks.len() + 1, dtype=pl.Int64) / ranks.cast(pl.Float64)
        return terms.cum_sum().last().fill_null(0.0)

    def reciprocal_rank(self, k: int) -> pl.Expr:  # noqa: D102
        first = self.rank.filter(self.is_rel & self.in_k(k)).min()
        return pl.when(first.is_not_null()).then(1.0 / first.cast(pl.Float64)).otherwise(0.0)

    def listed_sum(self, k: int, column: str) -> pl.Expr:  # noqa: D102
        within = self.in_k(k)
        return self._ordered_sum(pl.col(column).filter(within), self.rank.filter(within))

    def listed_count(self, k: int, flag: str) -> pl.Expr:  # noqa: D102
        return (self.in_k(k) & pl.col(flag).fill_null(False)).sum()

    def hit_count(self, k: int, flag: pl.Expr) -> pl.Expr:  # noqa: D102
        return (self.is_rel & self.in_k(k) & flag.fill_null(False)).sum()

    def in_population(self) -> pl.Expr:  # noqa: D102
        # One user's rows know nothing of the other frame: every user is a member.
        return pl.lit(True)

    def any_hit(self, k: int) -> pl.Expr:  # noqa: D102
        return (self.hits(k) > 0).cast(pl.Float64)

    def hits_within_relevant(self) -> pl.Expr:  # noqa: D102
        return (self.is_rel & (self.rank <= self.n_relevant()).fill_null(False)).sum()

    def rbp_sum(self) -> pl.Expr:  # noqa: D102
        listed = self.is_rel & self.rank.is_not_null()
        p, gain = self.options.persistence_or(RBP_PERSISTENCE), self.options.rbp_gain
        terms = rbp_weight(self.rank, p)
        if gain != "binary":
            terms = terms * self.relevance.cast(pl.Float64)
        if gain == "relative":
            top = self.relevance.cast(pl.Float64).max()
            terms = pl.when(top > 0).then(terms / top).otherwise(0.0)
        return self._ordered_sum(terms.filter(listed), self.rank.filter(listed))

    def err_sum(self, k: int) -> pl.Expr:  # noqa: D102
        raise NotImplementedError("err reads the largest relevance of all truth")

    def bpref_sum(self) -> pl.Expr:  # noqa: D102
        raise NotImplementedError("bpref needs the judged non-relevant items")

    def judged_count(self, k: int) -> pl.Expr:  # noqa: D102
        raise NotImplementedError("judged needs the judged non-relevant items")
