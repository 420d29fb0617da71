"""The engine's ranking context: every piece a metric reads is a per-user statistic.

Two phases, one way. While the metrics' expressions are built, a builder asks
:class:`UserStats` for a piece (``hits(10)``, ``gain_sum(5)``, ...) and gets back an
expression over columns of a per-user statistics frame; asking records the statistic.
When every expression exists, :meth:`UserStats.recorded` gives the frozen
:class:`NeededStats`: which statistics, from which rows, and how to compute them. The
query (:mod:`frame_metrics.families.ranking.query`) reads that description, with what it
learns from the data (the distinct gains), and computes exactly the recorded statistics,
each from the smallest rows that hold it:

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

Propensity-scored metrics (spec 9.4, ``propensity=``) count each relevant item w̃ times
(:mod:`frame_metrics.families.ranking.weights`): the hit and truth rows carry ``WEIGHT``
and a gain already multiplied by it, hits@k is the sum of the weights of the hits within
k, ``|R|`` the user's weight mass, and AP's hits@r the running sum of weights. A sum over
a set of relevant items (hits@k, ``|R|``, bpref's) adds its terms in descending order,
one way for every set, so a list holding all of R has hits@k = ``|R|`` to the bit (recall
exactly 1). These are the unweighted sums with each 1 replaced by w̃, so weights of
exactly 1.0 give the unweighted bits. The number of hits (how many terms a prefix holds), the number of
relevant items (who is evaluated, R-precision's cutoff, the ideal list's length), the
first hit's rank and any-hit stay counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import polars as pl

from frame_metrics.families.ranking.weights import WEIGHT
from frame_metrics.metrics.context import (
    BOUNDED_FLOATS,
    dcg_term,
    dcg_terms,
    discount_sums,
    ideal_slots,
    rbp_weight,
)
from frame_metrics.options import RBP_PERSISTENCE, MetricOptions
from frame_metrics.prepare import RANK, REL, TIE_FIRST, TIE_LAST

__all__ = [
    "GAIN",
    "HIT_N_RELEVANT",
    "IN_RECS",
    "IN_TRUTH",
    "IS_REL",
    "MAX_GAIN",
    "N_NONRELEVANT",
    "N_RELEVANT",
    "RANK",
    "SOURCES",
    "USER_MAX_RELEVANCE",
    "NeededStats",
    "Source",
    "UserStats",
]

Source = Literal["hits", "truth", "listed", "judged"]
SOURCES: tuple[Source, ...] = ("truth", "hits", "listed", "judged")

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
_HIT_WEIGHTS = "_fm_hit_weights"
_IDEAL_GAINS = "_fm_ideal_gains"
_SAME_GROUP = "_fm_uniform_tie_group"
#: Columns joined onto hit or judged rows when a statistic reads them: the user's number
#: of relevant items and of judged non-relevant ones, err's g_max, the relevance flag of
#: a judged row.
HIT_N_RELEVANT = "_fm_hit_n_relevant"
N_NONRELEVANT = "_fm_n_nonrelevant"
MAX_GAIN = "_fm_g_max"
USER_MAX_RELEVANCE = "_fm_user_max_relevance"
IS_REL = "_fm_is_rel"
#: Population flags: the user has a truth row / a recommendation.
IN_TRUTH = "_fm_in_truth"
IN_RECS = "_fm_in_recs"


def _prefix(terms: pl.Expr, length: pl.Expr) -> pl.Expr:
    """The sum of a list's first ``length`` terms (0 for none).

    ``list.sum`` adds one list's values with a fixed algorithm, so equal lists give
    equal sums to the last bit. It sums nothing to -0.0, which the metric's value turns
    into 0.0 (``Metric.value``; polars simplifies ``x + 0.0`` away, so that cannot).
    """
    return terms.list.head(length).list.sum()


@dataclass
class _Record:
    """What the metrics built so far read: one record, shared by every view of a recorder."""

    #: name -> (source, aggregation over the source's rows of one user)
    aggs: dict[str, tuple[Source, pl.Expr]] = field(default_factory=dict)
    #: Per-row terms gathered into lists in rank order (list name -> (source, term)), and
    #: the sums taken of them (name -> (list name, k: over the first hits@k terms, or
    #: None: the whole list)).
    terms: dict[str, tuple[Source, pl.Expr]] = field(default_factory=dict)
    prefix_sums: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    #: Cutoffs of the DCG, the AP numerator and the ideal DCG.
    dcg: set[int] = field(default_factory=set)
    ap: set[int] = field(default_factory=set)
    ideal: set[int] = field(default_factory=set)
    #: The hit-row conditions counted so far (hit_count), to count each only once.
    hit_flags: list[pl.Expr] = field(default_factory=list)
    #: Population flags read (``"truth"``, ``"recs"``), and whether any metric scores
    #: users without a relevant item 0 (then every user seen gets a row).
    flags: set[str] = field(default_factory=set)
    zero: bool = False
    #: Columns the hit / judged rows need: REL, and joined per user or overall
    #: N_RELEVANT, N_NONRELEVANT, USER_MAX_RELEVANCE, MAX_GAIN; the flag of a tie
    #: group of one gain, all relevant (_SAME_GROUP, see gain_sum).
    row_needs: dict[Source, set[str]] = field(
        default_factory=lambda: {"hits": set(), "judged": set()}
    )


class UserStats:
    """Records the per-user statistics the requested metrics read.

    Implements :class:`~frame_metrics.metrics.context.RankingPieces`: each piece returns
    an expression over a statistics column and records the statistic. Statistics of the
    ``"hits"`` and ``"listed"`` sources are 0 for a user without such rows, except the
    first hit's rank (null when there is none). Once every metric is built,
    :meth:`recorded` describes what the query must compute.

    Parameters
    ----------
    options
        The options the statistics depend on (threshold, gain, tie rule, ...).
    tied
        Whether hit and listed rows carry their tie group's first and last position
        (``TIE_FIRST``, ``TIE_LAST``: ranks from scores, with ties), so that
        ``ties="average"`` takes expected values over the orders of tied scores.
    """

    def __init__(self, options: MetricOptions, *, tied: bool = False) -> None:
        self._options = options
        self._tied = tied
        self._record = _Record()
        #: Propensity-scored (spec 9.4): relevant items count ``WEIGHT`` times.
        self._weighted = options.propensity is not None

    @property
    def options(self) -> MetricOptions:
        """The call's metric options."""
        return self._options

    def view(self, options: MetricOptions) -> UserStats:
        """A recorder into the same record, for a metric with its own options.

        Options that change only how a metric combines the statistics (the AP
        denominator, ``empty``, ``users``, the IDCG scope, the MRR cutoff, rbp's
        persistence, err's g_max) need no statistics of their own.
        """
        other = UserStats(options, tied=self._tied)
        other._record = self._record  # every metric's statistics land in one record
        return other

    def recorded(self) -> NeededStats:
        """The statistics recorded so far, frozen: what the query computes.

        Examples
        --------
        >>> stats = UserStats(MetricOptions())
        >>> precision = stats.hits(10).cast(pl.Float64) / 10
        >>> needed = stats.recorded()
        >>> needed.columns("hits"), needed.uses("truth")
        (['_fm_hits@10'], False)
        """
        r = self._record
        return NeededStats(
            aggs=MappingProxyType(dict(r.aggs)),
            terms=MappingProxyType(dict(r.terms)),
            prefix_sums=MappingProxyType(dict(r.prefix_sums)),
            dcg=frozenset(r.dcg),
            ap=frozenset(r.ap),
            ideal=frozenset(r.ideal),
            row_needs=MappingProxyType({s: frozenset(n) for s, n in r.row_needs.items()}),
            flags=frozenset(r.flags),
            zero=r.zero,
            tied=self._tied,
            weighted=self._weighted,
        )

    # -- the pieces (RankingPieces) -------------------------------------------------------

    def _agg(self, source: Source, name: str, expr: pl.Expr) -> pl.Expr:
        self._record.aggs.setdefault(name, (source, expr))
        return pl.col(name)

    def _term_sum(
        self, source: Source, name: str, term: pl.Expr, prefix_k: int | None = None
    ) -> pl.Expr:
        """The sum of a per-row term over the user's rows in rank order.

        Over the first ``hits@prefix_k`` of them when ``prefix_k`` is given.
        """
        list_name = f"{name}.terms"
        self._record.terms.setdefault(list_name, (source, term))
        if prefix_k is not None:
            self._count(prefix_k)
        self._record.prefix_sums.setdefault(name, (list_name, prefix_k))
        return pl.col(name)

    def _weight_sum(self, source: Source, name: str, terms: pl.Expr) -> pl.Expr:
        """A sum over a set of the user's relevant items counted w̃ times: ``Σ w̃``, or bpref's.

        Every such sum (hits@k, ``|R|``, the hits within ``|R|``, bpref's) adds its
        set's terms in one order, descending values, whatever rows the set came from:
        the same set gives the same float, so a list holding all of R has hits@k equal
        to ``Σ_R w̃`` to the bit (recall exactly 1; spec 9, clarified 2026-11-27). Terms
        of 1.0 sum to their count, the unweighted value; bpref's unweighted terms fall
        along the ranks, so in rank order they are already in this order.
        """
        return self._term_sum(source, name, terms.sort(descending=True))

    @property
    def _averaged(self) -> bool:
        return self._tied and self.options.ties == "average"

    def _straddle(
        self, k: int, *, weighted: bool = False
    ) -> tuple[pl.Expr, pl.Expr, pl.Expr, pl.Expr]:
        """Hits in tie groups wholly within k, and the straddling group's m, n and s.

        Under ``ties="average"``: the one group that straddles k has m relevant items, n
        positions and s slots within k. ``weighted``: the hits and m as sums of w̃.
        """
        a, b = pl.col(TIE_FIRST), pl.col(TIE_LAST)
        inside = self._agg("hits", f"_fm_inside@{k}", (b <= k).sum())
        across = (a <= k) & (b > k)
        m = self._agg("hits", f"_fm_across@{k}", across.sum())
        if weighted:
            # The same counts with each relevant item counting w̃ (sums in rank order).
            w = pl.col(WEIGHT)
            inside = self._weight_sum("hits", f"_fm_winside@{k}", w.filter(b <= k))
            m = self._weight_sum("hits", f"_fm_wacross@{k}", w.filter(across))
        n = self._agg("hits", f"_fm_across_n@{k}", (b - a + 1).filter(across).first())
        slots = self._agg("hits", f"_fm_across_s@{k}", (k - a + 1).filter(across).first())
        return inside, m, n, slots

    def hits(self, k: int) -> pl.Expr:  # noqa: D102 (documented in the protocol)
        if self._averaged:
            # Groups wholly within k hold all their relevant items; the one group that
            # straddles k puts each of its m relevant items within k with probability
            # s / n. An integer plus one fraction m·s/n (not n shares of s/n, which need
            # not add back up to s): a user whose tied items are all relevant gets
            # exactly k hits, and hits@k never exceeds k or |R|.
            inside, m, n, slots = self._straddle(k, weighted=self._weighted)
            if self._weighted:
                # m·s/n with m a sum of weights (a whole number of them when all are 1).
                share = (m * slots.cast(pl.Float64)) / n.cast(pl.Float64)
            else:
                share = (m.cast(pl.Int64) * slots).cast(pl.Float64) / n.cast(pl.Float64)
            return inside.cast(pl.Float64) + pl.when(m > 0).then(share).otherwise(0.0)
        if self._weighted:
            # Σ w̃ over the hits within k.
            within = pl.col(WEIGHT).filter(pl.col(RANK) <= k)
            return self._weight_sum("hits", f"_fm_whits@{k}", within)
        return self._count(k)

    def _count(self, k: int) -> pl.Expr:
        """The number of hits within k (how many terms of a rank-ordered list lie within k)."""
        return self._agg("hits", f"_fm_hits@{k}", (pl.col(RANK) <= k).sum())

    def any_hit(self, k: int) -> pl.Expr:  # noqa: D102
        if not self._averaged:
            # Counts no items (spec 9.4): the same with weights.
            return (self._count(k) > 0).cast(pl.Float64)
        inside, m, n, slots = self._straddle(k, weighted=False)
        # P(none of the group's m relevant items lands in its s slots within k), of its n
        # positions: C(n - m, s) / C(n, s) = Π_{j<m} (n - s - j) / (n - j).
        j = pl.int_ranges(0, m, dtype=pl.Int64)
        factors = (n - slots - j).cast(pl.List(pl.Float64)) / (n - j).cast(pl.List(pl.Float64))
        none = factors.list.eval(pl.element().product()).list.first().fill_null(1.0)
        return pl.when(inside > 0).then(1.0).when(m > 0).then(1.0 - none).otherwise(0.0)

    def in_population(self) -> pl.Expr:  # noqa: D102
        users = self.options.users
        self._record.zero |= self.options.empty == "zero"
        wanted = {"all": (), "truth": ("truth",), "recs": ("recs",), "both": ("truth", "recs")}
        self._record.flags.update(wanted[users])
        columns = {"truth": IN_TRUTH, "recs": IN_RECS}
        return pl.all_horizontal(pl.lit(True), *(pl.col(columns[f]) for f in wanted[users]))

    def hits_within_relevant(self) -> pl.Expr:  # noqa: D102
        self.n_relevant()
        self._record.row_needs["hits"].add(N_RELEVANT)
        if self._weighted:
            # The cutoff stays the number of relevant items (positions), the hits weigh w̃.
            hit = pl.col(RANK) <= pl.col(HIT_N_RELEVANT)
            return self._weight_sum("hits", "_fm_whits_within_r", pl.col(WEIGHT).filter(hit))
        within = (pl.col(RANK) <= pl.col(HIT_N_RELEVANT)).sum()
        return self._agg("hits", "_fm_hits_within_r", within)

    def rbp_sum(self) -> pl.Expr:  # noqa: D102
        p, gain = self.options.persistence_or(RBP_PERSISTENCE), self.options.rbp_gain
        term = rbp_weight(pl.col(RANK), p)
        if gain != "binary":
            self._record.row_needs["hits"].add(REL)
            term = term * pl.col(REL)
        if gain == "relative":
            # rel / the user's largest judged relevance; a user whose judged rows are all
            # 0 (relevant only under threshold=0) gains 0, not 0/0.
            self._record.row_needs["hits"].add(USER_MAX_RELEVANCE)
            top = pl.col(USER_MAX_RELEVANCE)
            term = pl.when(top > 0).then(term / top).otherwise(0.0)
        if self._weighted:
            term = term * pl.col(WEIGHT)
        return self._term_sum("hits", f"_fm_rbp_{p!r}_{gain}", term)

    def err_sum(self, k: int) -> pl.Expr:  # noqa: D102
        g_max = self.options.max_relevance
        if g_max is None:
            self._record.row_needs["hits"].add(MAX_GAIN)
            top: pl.Expr = pl.col(MAX_GAIN)
        else:
            top = pl.lit(g_max)
        # Hit rows only: a non-relevant item has P = 0, so it neither adds a term nor
        # changes the product over the items above.
        self._record.row_needs["hits"].add(REL)
        p = (pl.lit(2.0).pow(pl.col(REL)) - 1.0) / pl.lit(2.0).pow(top)
        still = (1.0 - p).cum_prod().shift(1, fill_value=1.0)
        term = still * p / pl.col(RANK).cast(pl.Float64)
        if self._weighted:
            # The item's term counts w̃ times; the cascade above it (the chance the user
            # reads down to it) is the unweighted one: P stays a probability.
            term = term * pl.col(WEIGHT)
        return self._term_sum("hits", f"_fm_err_{g_max!r}@{k}", term, prefix_k=k)

    def bpref_sum(self) -> pl.Expr:  # noqa: D102
        self._record.row_needs["judged"] |= {N_RELEVANT, N_NONRELEVANT}
        nonrel = (~pl.col(IS_REL)).cast(pl.Int64)
        above = nonrel.cum_sum() - nonrel
        r, n = pl.col(HIT_N_RELEVANT).cast(pl.Float64), pl.col(N_NONRELEVANT).cast(pl.Float64)
        term = (
            pl.when(above > 0)
            .then(1.0 - pl.min_horizontal(above.cast(pl.Float64), r) / pl.min_horizontal(r, n))
            .otherwise(1.0)
        )
        if self._weighted:
            # Each relevant item's term counts w̃ times; n_r, R and N inside it stay counts.
            # Summed as |R| is: a list with no judged non-relevant item above a relevant
            # one has bpref exactly 1.
            self._record.row_needs["judged"].add(WEIGHT)
            term = term * pl.col(WEIGHT)
            return self._weight_sum("judged", "_fm_bpref", term.filter(pl.col(IS_REL)))
        return self._term_sum("judged", "_fm_bpref", term.filter(pl.col(IS_REL)))

    def judged_count(self, k: int) -> pl.Expr:  # noqa: D102
        return self._agg("judged", f"_fm_judged@{k}", (pl.col(RANK) <= k).sum())

    def n_relevant(self) -> pl.Expr:  # noqa: D102
        return self._agg("truth", N_RELEVANT, pl.len())

    def relevant_mass(self) -> pl.Expr:  # noqa: D102
        if not self._weighted:
            return self.n_relevant()
        # Σ_R w̃ as every weighted count is summed (not |R| under snips, which the
        # rounded w̃ need not add up to).
        return self._weight_sum("truth", "_fm_relevant_mass", pl.col(WEIGHT))

    def n_listed(self, k: int) -> pl.Expr:  # noqa: D102
        return self._agg("listed", f"_fm_listed@{k}", (pl.col(RANK) <= k).sum())

    def gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        if self._averaged:
            # A tie group over positions a..b spreads each item's gain evenly over its
            # positions: gain / (b - a + 1) · Σ_{p=a..min(b,k)} 1/log2(p + 1). A group
            # whose positions all hold relevant items of one gain has that DCG in every
            # order: its own terms are taken as they are (dcg_term), so a list in ideal
            # order gets exactly the ideal's terms and its NDCG is exactly 1.
            a, b = pl.col(TIE_FIRST), pl.col(TIE_LAST)
            h = pl.lit(pl.Series("_fm_h", discount_sums(k), dtype=pl.Float64))
            span = h.gather(pl.min_horizontal(b, k)) - h.gather(pl.min_horizontal(a - 1, k))
            averaged = pl.col(GAIN) / (b - a + 1).cast(pl.Float64) * span
            same = pl.col(_SAME_GROUP)
            self._record.row_needs["hits"].add(_SAME_GROUP)
            term = pl.when(same).then(dcg_term(pl.col(GAIN), pl.col(RANK))).otherwise(averaged)
            counted = pl.when(same).then(pl.col(RANK) <= k).otherwise(a <= k)
            return self._term_sum("hits", f"_fm_expected_dcg@{k}", term.filter(counted))
        self._count(k)
        self._record.dcg.add(k)
        return pl.col(f"_fm_dcg@{k}")

    def ideal_gain_sum(self, k: int) -> pl.Expr:  # noqa: D102
        self.n_relevant()
        self._record.ideal.add(k)
        return pl.col(f"_fm_idcg@{k}")

    def ideal_slots_sum(self, k: int) -> pl.Expr:  # noqa: D102
        # A column of the value, not a literal: polars divides a column by a scalar as a
        # multiplication by its reciprocal, which is not the correctly rounded quotient
        # (see over_constant), and a DCG equal to this ideal must give exactly 1.
        return self.n_relevant().cast(pl.Float64) * 0.0 + ideal_slots(k)

    def precision_at_hits_sum(self, k: int) -> pl.Expr:  # noqa: D102
        self._count(k)
        self._record.ap.add(k)
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
        seen = self._record.hit_flags
        for i, flag_seen in enumerate(seen):
            if flag_seen.meta.eq(within):
                return pl.col(f"_fm_hit_count_{i}")
        seen.append(within)
        return self._agg("hits", f"_fm_hit_count_{len(seen) - 1}", within.sum())


@dataclass(frozen=True, eq=False)
class NeededStats:
    """The per-user statistics the metrics read, and how to compute each (frozen).

    Made by :meth:`UserStats.recorded` once every metric's expression exists; the query
    reads it and changes nothing in it. How the ideal DCG is computed depends on the
    data's distinct gains, which the query passes to :meth:`aggregations`,
    :meth:`finish` and :meth:`lists` (``gain_levels``).
    """

    #: name -> (source, aggregation over the source's rows of one user)
    aggs: Mapping[str, tuple[Source, pl.Expr]]
    #: Per-row terms gathered into lists in rank order (list name -> (source, term)), and
    #: the sums taken of them (name -> (list name, k: over the first hits@k terms, or
    #: None: the whole list)).
    terms: Mapping[str, tuple[Source, pl.Expr]]
    prefix_sums: Mapping[str, tuple[str, int | None]]
    #: Cutoffs of the DCG, the AP numerator and the ideal DCG.
    dcg: frozenset[int]
    ap: frozenset[int]
    ideal: frozenset[int]
    #: Columns the hit / judged rows need: REL, and joined per user or overall
    #: N_RELEVANT, N_NONRELEVANT, USER_MAX_RELEVANCE, MAX_GAIN; the tie-group flag.
    row_needs: Mapping[Source, frozenset[str]]
    #: Population flags read (``"truth"``, ``"recs"``).
    flags: frozenset[str]
    #: Whether any metric scores users without a relevant item 0 (every user seen gets
    #: a row).
    zero: bool
    #: Whether hit rows carry their tie group's first and last position (ties averaged).
    tied: bool
    #: Whether relevant items count ``WEIGHT`` times (propensity-scored, spec 9.4).
    weighted: bool = False

    @property
    def ideal_columns(self) -> list[str]:
        """The ideal DCG columns, one per cutoff of :attr:`ideal`."""
        return [f"_fm_idcg@{k}" for k in sorted(self.ideal)]

    @property
    def ideal_alone(self) -> bool:
        """Whether the ideal DCG is the only statistic the truth's lists make.

        (No term of another metric is gathered from the truth rows.)
        """
        return bool(self.ideal) and not any(s == "truth" for s, _ in self.terms.values())

    @property
    def wants_ideal(self) -> bool:
        """Whether an ideal DCG was asked for (the query then looks at the gains)."""
        return bool(self.ideal)

    def uses(self, source: Source) -> bool:
        """Whether any recorded statistic reads ``source``."""
        return any(s == source for s, _ in [*self.aggs.values(), *self.terms.values()])

    def row_columns(self, source: Source, keys: Sequence[str]) -> list[pl.Expr]:
        """Columns to add to the source's rows (of users ``keys``) before aggregating them."""
        columns: list[pl.Expr] = []
        if source == "hits" and self.dcg:
            columns.append(dcg_term(pl.col(GAIN), pl.col(RANK)).alias(_DCG_TERM))
        if source == "hits" and _SAME_GROUP in self.row_needs["hits"]:
            # The row's tie group is all hits (as many hit rows as positions) of one gain.
            group = [*keys, TIE_FIRST]
            size = pl.col(TIE_LAST) - pl.col(TIE_FIRST) + 1
            uniform = (pl.len().over(group) == size) & (
                pl.col(GAIN).min().over(group) == pl.col(GAIN).max().over(group)
            )
            columns.append(uniform.alias(_SAME_GROUP))
        return columns

    def ordered(self, source: Source) -> bool:
        """Whether the source's rows must reach the aggregation sorted by (user, rank).

        polars keeps the order of a group's rows in the lists an aggregation gathers
        (documented for ``group_by``, in every engine); one sort of the rows is much
        cheaper than a sort within each of a million groups.
        """
        if source == "truth":
            return False  # no ranks: its lists are in value order (see _weight_sum)
        terms = any(s == source for s, _ in self.terms.values())
        return terms or (source == "hits" and bool(self.dcg or self.ap))

    def aggregations(
        self, source: Source, *, gain_levels: tuple[float, ...] | None
    ) -> list[pl.Expr]:
        """One user's aggregations over the source's rows (lists in rank order).

        ``gain_levels``: the distinct gains of the relevant truth rows, best first, when
        there are few (the ideal DCG is then built from counts of each), else None.
        """
        aggs = [expr.alias(name) for name, (s, expr) in self.aggs.items() if s == source]
        aggs += [expr.alias(name) for name, (s, expr) in self.terms.items() if s == source]
        if source == "hits":
            # The rows come sorted by rank (see ordered()): a group's list keeps their order.
            if self.dcg:
                aggs.append(pl.col(_DCG_TERM).alias(_DCG_TERMS))
            if self.ap:
                aggs.append(pl.col(RANK).alias(_HIT_RANKS))
                if self.weighted:
                    aggs.append(pl.col(WEIGHT).alias(_HIT_WEIGHTS))
        elif source == "truth" and self.ideal:
            if gain_levels is not None:
                aggs += [
                    (pl.col(GAIN) == g).sum().alias(f"_fm_level_{j}")
                    for j, g in enumerate(gain_levels)
                ]
            else:
                best = max(self.ideal)
                aggs.append(pl.col(GAIN).sort(descending=True).head(best).alias(_IDEAL_GAINS))
        return aggs

    def finish(
        self, source: Source, *, gain_levels: tuple[float, ...] | None
    ) -> list[list[pl.Expr]]:
        """Stages of expressions that turn the source's lists into statistics.

        The first stage makes lists of terms where they are not gathered as such (the
        AP terms ``j / r`` and the discounted ideal gains), the second sums each list's
        prefix that lies within each cutoff. The query drops the lists (:meth:`lists`).
        ``gain_levels`` as for :meth:`aggregations`.
        """
        terms: list[pl.Expr] = []
        prefixes: list[pl.Expr] = []
        if source == "hits":
            hits = {k: pl.col(f"_fm_hits@{k}") for k in self.dcg | self.ap}
            prefixes += [
                _prefix(pl.col(_DCG_TERMS), hits[k]).alias(f"_fm_dcg@{k}") for k in sorted(self.dcg)
            ]
            if self.ap:
                ranks = pl.col(_HIT_RANKS)
                if self.weighted:
                    # The j-th hit contributes w̃_j · hits@r / r, hits@r the running sum of
                    # the weights (j when they are all 1.0, and then the same bits).
                    w = pl.col(_HIT_WEIGHTS)
                    running = w.list.eval(pl.element().cum_sum())
                    ap_terms = (w * running) / ranks.cast(pl.List(pl.Float64))
                else:
                    # The j-th hit in rank order contributes hits@r / r = j / r.
                    ordinal = pl.int_ranges(1, ranks.list.len() + 1, dtype=pl.Int64)
                    ap_terms = ordinal.cast(pl.List(pl.Float64)) / ranks.cast(pl.List(pl.Float64))
                terms.append(ap_terms.alias(_AP_TERMS))
                prefixes += [
                    _prefix(pl.col(_AP_TERMS), hits[k]).alias(f"_fm_ap_sum@{k}")
                    for k in sorted(self.ap)
                ]
        for name, (list_name, prefix_k) in self.prefix_sums.items():
            if self.terms[list_name][0] != source:
                continue
            if prefix_k is None:
                prefixes.append(pl.col(list_name).list.sum().alias(name))
            else:
                length = pl.col(f"_fm_hits@{prefix_k}")
                prefixes.append(_prefix(pl.col(list_name), length).alias(name))
        if source == "truth" and self.ideal:
            gains = pl.col(_IDEAL_GAINS)
            if gain_levels is not None:
                # The ideal list itself, from the counts: each gain repeated as often as it
                # occurs, best first, cut at the largest cutoff (no per-user sort).
                best = max(self.ideal)
                gains = pl.concat_list(
                    pl.lit(g, pl.Float64).repeat_by(
                        pl.min_horizontal(pl.col(f"_fm_level_{j}"), pl.lit(best))
                    )
                    for j, g in enumerate(gain_levels)
                ).list.head(best)
            # The same terms as the list's DCG (dcg_terms), summed the same way (_prefix):
            # a list in ideal order has the ideal's terms, so its NDCG is exactly 1.
            terms.append(dcg_terms(gains).alias(_IDEAL_GAINS))
            prefixes += [
                _prefix(
                    pl.col(_IDEAL_GAINS), pl.min_horizontal(pl.col(N_RELEVANT), pl.lit(k))
                ).alias(f"_fm_idcg@{k}")
                for k in sorted(self.ideal)
            ]
        return [stage for stage in (terms, prefixes) if stage]

    def lists(self, source: Source, *, gain_levels: tuple[float, ...] | None) -> list[str]:
        """The list columns :meth:`aggregations` makes for ``source`` (dropped after use)."""
        terms = [name for name, (s, _) in self.terms.items() if s == source]
        names = {
            "hits": [_DCG_TERMS] * bool(self.dcg)
            + [_HIT_RANKS, _AP_TERMS] * bool(self.ap)
            + [_HIT_WEIGHTS] * bool(self.ap and self.weighted),
            "truth": [_IDEAL_GAINS] * bool(self.ideal)
            + [f"_fm_level_{j}" for j in range(len(gain_levels or ()) * bool(self.ideal))],
            "listed": [],
            "judged": [],
        }
        return names[source] + terms

    def columns(self, source: Source) -> list[str]:
        """The statistic columns the source's frame ends with."""
        names = [name for name, (s, _) in self.aggs.items() if s == source]
        if source == "hits":
            names += [f"_fm_dcg@{k}" for k in sorted(self.dcg)]
            names += [f"_fm_ap_sum@{k}" for k in sorted(self.ap)]
        elif source == "truth":
            names += self.ideal_columns
        names += [n for n, (lst, _) in self.prefix_sums.items() if self.terms[lst][0] == source]
        return names

    def zero_fill(self, source: Source) -> list[str]:
        """Columns that are 0 (not null) for a user without rows in ``source``."""
        straddle = ("_fm_across_n@", "_fm_across_s@")
        return [c for c in self.columns(source) if c != _FIRST_HIT and not c.startswith(straddle)]
