"""The ranking family's query: per-user statistics from the hits, the truth and the list.

The cost follows the rows that can change a value, not an outer join of everything:

1. **hits** - the recommendations within the largest cutoff, inner-joined with the
   relevant truth rows on (user, item), then one ``group_by(user)``: hit counts per
   cutoff, the first hit's rank, the DCG and AP numerators (see
   :mod:`frame_metrics.families.ranking.stats` for how their float sums are kept
   independent of row order);
2. **truth** - the relevant truth rows alone, one ``group_by(user)``: ``|R|`` and the
   ideal DCG per cutoff;
3. **listed** - the recommendations within the largest cutoff alone (only when a list
   metric such as novelty is asked for): list lengths and sums of item columns.

The query computes what a frozen
:class:`~frame_metrics.families.ranking.stats.NeededStats` describes, and nothing else;
the one thing it learns from the data first is whether the relevant rows have few
distinct gains (then the ideal DCG is built from counts of each, without a per-user
sort). Users with a relevant item (from 2) are the evaluated ones; 1 joins onto them (a user
without a hit scores 0), and 3 adds users who only have a list. Truth without some of
the ``by`` columns applies to every group: its statistics are computed once per user and
repeated for each group, and the hit join matches on the columns truth has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from frame_metrics.families.ranking.stats import (
    GAIN,
    HIT_N_RELEVANT,
    IN_RECS,
    IN_TRUTH,
    IS_REL,
    MAX_GAIN,
    N_NONRELEVANT,
    N_RELEVANT,
    SOURCES,
    USER_MAX_RELEVANCE,
    NeededStats,
    Source,
)
from frame_metrics.families.ranking.weights import WEIGHT, with_weights
from frame_metrics.metrics.context import gain_expr, is_relevant
from frame_metrics.options import MetricOptions
from frame_metrics.prepare import PROPENSITY, RANK, REL, TIE_FIRST, TIE_LAST

__all__ = ["PackedKey", "RankingInputs", "user_statistics"]


@dataclass(frozen=True)
class RankingInputs:
    """The prepared rows the ranking query reads.

    ``top`` holds ``keys``, the item and ``RANK`` of every recommendation within the
    largest cutoff (plus any item columns list metrics read); ``truth`` holds the truth
    key (``truth_keys``), the item and the relevance column ``relevance`` (rows with
    relevance 0 may be left out). ``groups`` are the distinct values of the ``by``
    columns truth lacks (None when it has them all); ``all_keys`` every key seen, for
    ``empty="zero"``. ``hit_columns`` are frames joined onto the hit rows (a baseline's
    ranks, train history) with the columns to join them on; ``packed`` an exact packing
    of integer join columns (see :class:`PackedKey`).
    """

    keys: list[str]
    truth_keys: list[str]
    item: str
    relevance: str
    top: pl.LazyFrame
    truth: pl.LazyFrame
    groups: pl.LazyFrame | None
    all_keys: pl.LazyFrame
    hit_columns: Sequence[tuple[pl.LazyFrame, list[str]]] = field(default_factory=tuple)
    #: How to join top with truth on one integer key (None: on the columns themselves).
    packed: PackedKey | None = None
    #: Judged rows (truth keys, item, relevance, 0 included), for bpref and judged@k.
    judged: pl.LazyFrame | None = None
    #: Every key with a recommendation / with a truth row, for ``users=``.
    recs_keys: pl.LazyFrame | None = None
    truth_user_keys: pl.LazyFrame | None = None
    #: The largest relevance over every partition's truth (one partition of a larger
    #: run); None: read from ``all_truth`` (truth before any restriction), else ``truth``.
    max_relevance: float | None = None
    all_truth: pl.LazyFrame | None = None


_JOIN_KEY = "_fm_join_key"


@dataclass(frozen=True)
class PackedKey:
    """An exact packing of integer join columns into one Int64, over the truth's ranges.

    ``ranges`` maps each join column to the (min, max) of its values in truth. A row
    whose value lies outside a range cannot match any truth row; inside them, the key
    ``Σ (value - min) * stride`` is distinct for distinct value combinations.
    """

    ranges: dict[str, tuple[int, int]]

    @classmethod
    def for_truth(cls, truth: pl.LazyFrame, on: Sequence[str]) -> PackedKey | None:
        """The packing for ``truth``'s join columns, or None when they do not all fit.

        Reads the minimum and maximum of each join column (one small eager query).
        """
        schema = truth.collect_schema()
        if not all(schema[c].is_integer() for c in on):
            return None
        bounds = truth.select(
            *(pl.col(c).min().alias(f"{c}.min") for c in on),
            *(pl.col(c).max().alias(f"{c}.max") for c in on),
        ).collect()
        ranges: dict[str, tuple[int, int]] = {}
        span = 1
        for c in on:
            lo, hi = bounds[f"{c}.min"].item(), bounds[f"{c}.max"].item()
            if lo is None or hi is None:
                return None  # no truth rows: the plain join is as cheap
            if not -(2**63) <= int(lo) <= int(hi) < 2**63:
                return None  # an unsigned id beyond Int64: the plain join handles it
            ranges[c] = (int(lo), int(hi))
            span *= int(hi) - int(lo) + 1
        return cls(ranges) if span < 2**63 else None

    def key(self) -> pl.Expr:
        """The packed key of a row whose values lie within the ranges."""
        key: pl.Expr = pl.lit(0, pl.Int64)
        stride = 1
        for c, (lo, hi) in self.ranges.items():
            # Offsets from the minimum, computed in Int64 (a UInt64 value above 2^63
            # is outside every range that fits, and is filtered out first).
            offset = pl.col(c).cast(pl.Int64, wrap_numerical=True) - lo
            key = key + offset * stride
            stride *= hi - lo + 1
        return key

    def within(self) -> pl.Expr:
        """Rows whose values all lie within the truth's ranges."""
        return pl.all_horizontal(
            pl.col(c).is_between(lo, hi) for c, (lo, hi) in self.ranges.items()
        )


def _hit_rows(
    top: pl.LazyFrame, relevant: pl.LazyFrame, on: list[str], packed: PackedKey | None
) -> pl.LazyFrame:
    """``top`` inner-joined with the relevant truth rows on ``on``.

    With integer ids, a join on one packed key is about twice as fast as polars' join on
    several columns (which encodes each row first).
    """
    if packed is None:
        return top.join(relevant, on=on, how="inner")
    left = top.filter(packed.within()).with_columns(packed.key().alias(_JOIN_KEY))
    right = relevant.select(packed.key().alias(_JOIN_KEY), pl.exclude(on))
    return left.join(right, on=_JOIN_KEY, how="inner").drop(_JOIN_KEY)


#: Up to this many distinct gains, the ideal DCG is computed from counts per gain.
MAX_GAIN_LEVELS = 16


def _gain_levels(relevant: pl.LazyFrame) -> tuple[float, ...] | None:
    """The distinct gains of the relevant truth rows, best first, if there are few.

    One small query. None when there are many, a non-finite one, or none at all (no
    relevant truth row: the sorted path has nothing to sort).
    """
    levels = relevant.select(pl.col(GAIN).unique().head(MAX_GAIN_LEVELS + 1)).collect()
    values = [float(v) for v in levels[GAIN]]
    if len(values) > MAX_GAIN_LEVELS or not all(math.isfinite(v) for v in values):
        return None
    return tuple(sorted(set(values), reverse=True)) or None


def _aggregate(
    rows: pl.LazyFrame,
    keys: list[str],
    needed: NeededStats,
    source: Source,
    gain_levels: tuple[float, ...] | None = None,
) -> pl.LazyFrame:
    """The source's statistics per user (``gain_levels``: see ``NeededStats.aggregations``)."""
    extra = needed.row_columns(source, keys)
    if extra:
        rows = rows.with_columns(extra)
    if needed.ordered(source):
        rows = rows.sort([*keys, RANK])
    grouped = rows.group_by(keys).agg(needed.aggregations(source, gain_levels=gain_levels))
    if source == "truth" and gain_levels is not None and needed.ideal_alone:
        return _ideal_by_counts(grouped, needed, gain_levels)
    for stage in needed.finish(source, gain_levels=gain_levels):
        grouped = grouped.with_columns(stage)
    return grouped.drop(needed.lists(source, gain_levels=gain_levels))


def _ideal_by_counts(
    grouped: pl.LazyFrame, needed: NeededStats, gain_levels: tuple[float, ...]
) -> pl.LazyFrame:
    """The ideal DCG per user, computed once per distinct vector of counts of each gain.

    The ideal DCG at k depends only on how many relevant items of each gain the user
    has, counted up to the largest cutoff, and most users share those counts with many
    others (at k=10 and 5 gains, a few thousand vectors for a million users). The lists
    of the ideal terms are built for the distinct vectors alone, by the same expressions
    (so with the same bits), and joined back: a list per user cost more than the rest of
    the truth's statistics together. The counts are dropped after use, as
    :func:`_aggregate` drops the lists of the other paths.
    """
    best = max(needed.ideal)
    counts = [*(f"_fm_level_{j}" for j in range(len(gain_levels))), N_RELEVANT]
    capped = {c: f"{c}.capped" for c in counts}
    grouped = grouped.with_columns(
        pl.min_horizontal(pl.col(c), pl.lit(best)).alias(capped[c]) for c in counts
    )
    # min(n, best) in place of n changes no prefix: each is cut at min(n, k), k <= best.
    table = grouped.select(pl.col(capped[c]).alias(c) for c in counts).unique()
    for stage in needed.finish("truth", gain_levels=gain_levels):
        table = table.with_columns(stage)
    table = table.select(*(pl.col(c).alias(capped[c]) for c in counts), *needed.ideal_columns)
    on = list(capped.values())
    joined = grouped.join(table, on=on, how="left").drop(on)
    # A table of one row can come back from the in-memory engine's join as a column
    # held as one value, which polars then divides by as a multiplication by its
    # reciprocal (an ideal list's NDCG of 0.9999999999999999): each value is rebuilt
    # on the user's own row (0.0 + v is v for every v >= 0).
    own_row = pl.col(N_RELEVANT).cast(pl.Float64) * 0.0
    rebuilt = joined.with_columns((own_row + pl.col(c)).alias(c) for c in needed.ideal_columns)
    return rebuilt.drop(counts[:-1])  # the per-gain counts (|R| is a statistic)


def user_statistics(
    inputs: RankingInputs, needed: NeededStats, options: MetricOptions
) -> pl.LazyFrame:
    """One row per user the needed statistics are defined for, with every statistic.

    ``needed`` is what the metrics recorded (:meth:`UserStats.recorded
    <frame_metrics.families.ranking.stats.UserStats.recorded>`): the query holds exactly
    what they asked for, and leaves ``needed`` as it is. Users without hit or list rows
    get 0 there (the first hit's rank stays null).
    """
    keys, item = inputs.keys, inputs.item
    on = [*inputs.truth_keys, item]
    hit_needs = needed.row_needs["hits"]
    gain = gain_expr(pl.col(inputs.relevance), options)
    relevant = inputs.truth.filter(is_relevant(pl.col(inputs.relevance), options)).select(
        *on,
        gain.alias(GAIN),
        *([pl.col(inputs.relevance).alias(REL)] if REL in hit_needs else []),
        *([PROPENSITY] if needed.weighted else []),
    )
    if needed.weighted:
        # Propensity-scored (spec 9.4): each relevant row counts w̃ times, its gain too.
        relevant = with_weights(relevant, inputs.truth_keys, options)
        relevant = relevant.select(
            *on,
            (pl.col(GAIN) * pl.col(WEIGHT)).alias(GAIN),
            *([REL] if REL in hit_needs else []),
            WEIGHT,
        )
        # Cached: the ideal side and the hits read the weighted rows (the weights are
        # windows over each user's rows); without it polars computed them once for each
        # (their projections differ): 2.77 s against 2.52 s at 1M users, checks off.
        relevant = relevant.cache()
    # With few distinct gains the ideal DCG is built from counts of each: levels of this
    # call's data, passed to the truth aggregation and kept nowhere else (weighted gains
    # are as many as the rows: the sorted path).
    levels = _gain_levels(relevant) if needed.wants_ideal and not needed.weighted else None
    frame: pl.LazyFrame | None = None
    per_user_truth: pl.LazyFrame | None = None
    if needed.uses("truth"):
        per_user_truth = _aggregate(relevant, inputs.truth_keys, needed, "truth", levels)
        truth = (
            per_user_truth
            if inputs.groups is None
            else per_user_truth.join(inputs.groups, how="cross")
        )
        frame = truth.select(*keys, *needed.columns("truth"))
        if needed.zero:
            # Users without a relevant item may score 0: every user seen gets a row.
            frame = inputs.all_keys.join(frame, on=keys, how="left", nulls_equal=True)
    if needed.uses("hits"):
        columns = [*keys, item, RANK, *([TIE_FIRST, TIE_LAST] if needed.tied else [])]
        hit_rows = _hit_rows(inputs.top.select(columns), relevant, on, inputs.packed)
        for extra, join_on in inputs.hit_columns:
            hit_rows = hit_rows.join(extra, on=join_on, how="left", nulls_equal=True)
        hit_rows = _with_user_counts(hit_rows, per_user_truth, inputs, hit_needs, options)
        if MAX_GAIN in hit_needs:
            # err's g_max by default: the largest relevance in all of truth.
            whole = inputs.truth if inputs.all_truth is None else inputs.all_truth
            g_max = (
                whole.select(pl.col(inputs.relevance).max().alias(MAX_GAIN))
                if inputs.max_relevance is None
                else pl.LazyFrame({MAX_GAIN: [inputs.max_relevance]})
            )
            hit_rows = hit_rows.join(g_max, how="cross")
        hits = _aggregate(hit_rows, keys, needed, "hits")
        assert frame is not None  # hits are only asked for by metrics over relevant users
        frame = frame.join(hits, on=keys, how="left", nulls_equal=True)
    if needed.uses("judged"):
        assert inputs.judged is not None
        assert frame is not None
        judged = inputs.judged.select(
            *on, is_relevant(pl.col(inputs.relevance), options).alias(IS_REL)
        )
        judged_rows = inputs.top.select(*keys, item, RANK).join(judged, on=on, how="inner")
        if WEIGHT in needed.row_needs["judged"]:
            # The relevant judged rows' w̃ (null on the others, which weigh nothing).
            weights = relevant.select(*on, WEIGHT)
            judged_rows = judged_rows.join(weights, on=on, how="left", nulls_equal=True)
        judged_rows = _with_user_counts(
            judged_rows, per_user_truth, inputs, needed.row_needs["judged"], options
        )
        frame = frame.join(
            _aggregate(judged_rows, keys, needed, "judged"), on=keys, how="left", nulls_equal=True
        )
    if needed.uses("listed"):
        listed = _aggregate(inputs.top, keys, needed, "listed")
        frame = (
            listed
            if frame is None
            else frame.join(listed, on=keys, how="full", coalesce=True, nulls_equal=True)
        )
    assert frame is not None
    for flag, column, users in (
        ("truth", IN_TRUTH, inputs.truth_user_keys),
        ("recs", IN_RECS, inputs.recs_keys),
    ):
        if flag in needed.flags:
            assert users is not None
            members = users.with_columns(pl.lit(True).alias(column))
            frame = frame.join(members, on=keys, how="left", nulls_equal=True).with_columns(
                pl.col(column).fill_null(False)
            )
    fill = [c for source in SOURCES for c in needed.zero_fill(source)]
    present = frame.collect_schema().names()
    return frame.with_columns(pl.col(c).fill_null(0) for c in fill if c in present)


def _with_user_counts(
    rows: pl.LazyFrame,
    per_user_truth: pl.LazyFrame | None,
    inputs: RankingInputs,
    needs: frozenset[str],
    options: MetricOptions,
) -> pl.LazyFrame:
    """``rows`` with the user's number of relevant (and judged non-relevant) items.

    And, for rbp's relative gain, the user's largest judged relevance. The number of
    relevant items is the truth statistics' own (``per_user_truth``, per truth key).
    """
    counts: list[pl.LazyFrame] = []
    if N_RELEVANT in needs:
        assert per_user_truth is not None  # |R| is a truth statistic, so truth is read
        counts.append(
            per_user_truth.select(*inputs.truth_keys, pl.col(N_RELEVANT).alias(HIT_N_RELEVANT))
        )
    if N_NONRELEVANT in needs:
        assert inputs.judged is not None
        nonrelevant = ~is_relevant(pl.col(inputs.relevance), options)
        counts.append(
            inputs.judged.group_by(inputs.truth_keys).agg(nonrelevant.sum().alias(N_NONRELEVANT))
        )
    if USER_MAX_RELEVANCE in needs:
        # rbp's relative gain: over the user's largest judged relevance.
        judged = inputs.truth if inputs.judged is None else inputs.judged
        counts.append(
            judged.group_by(inputs.truth_keys).agg(
                pl.col(inputs.relevance).max().alias(USER_MAX_RELEVANCE)
            )
        )
    for frame in counts:
        rows = rows.join(frame, on=inputs.truth_keys, how="left", nulls_equal=True)
    return rows
