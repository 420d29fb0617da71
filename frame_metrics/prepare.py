"""Recommendations (+ truth) → the spec's long table, checked before any work is done.

The long table has the key columns (``by`` + user), the item, ``RANK`` (null for a relevant
item that was not recommended) and ``REL`` (0 for a recommended item absent from truth).
Rows ranked below the largest cutoff never reach it: they cannot change any metric, and
dropping them first is what keeps evaluation cheap on long recommendation lists.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import partial

import polars as pl

from frame_metrics.columns import Columns
from frame_metrics.errors import InvalidValueError, Keyword, MissingColumnsError, Part, Pass
from frame_metrics.options import MetricOptions
from frame_metrics.spec import RelevanceCap
from frame_metrics.validation import (
    Check,
    CheckedFrame,
    Parts,
    duplicate_check,
    duplicate_checks,
    finite_check,
    magnitude_check,
    nan_check,
    negative_check,
    nonintegral_check,
    null_checks,
    rank_below_one_check,
    row_check,
    upper_bound_check,
)

__all__ = [
    "PREDICTION",
    "PROPENSITY",
    "RANK",
    "REL",
    "TIE_FIRST",
    "TIE_LAST",
    "Prepared",
    "RatingPairs",
    "prepare",
    "prepare_baseline",
    "prepare_ratings",
    "top_by_score",
]

RANK = "_fm_rank"
REL = "_fm_rel"
#: A truth row's propensity P (spec 9.4), as Float64, when ``propensity=`` names a column.
PROPENSITY = "_fm_propensity"
_SCORE = "_fm_score"
#: The input row number, the tie break of ``ties="input"``.
_ROW = "_fm_row"
#: Under ``ties="average"``: the first and last position of the row's group of equal
#: scores (its ``RANK`` is its position in item order within the group).
TIE_FIRST = "_fm_tie_first"
TIE_LAST = "_fm_tie_last"
_JUDGED = "_fm_judged"
#: A recommended row whose pair is in ``exclude=`` (spec section 10), and how many such
#: rows its list holds above it.
_EXCLUDED = "_fm_excluded"
_SHIFT = "_fm_shift"


@dataclass(frozen=True)
class Prepared:
    """The checked rows the engine reads, and what diagnostics need beside them."""

    #: The key columns of one evaluated user: ``by`` + user.
    keys: list[str]
    item: str
    #: The recommended rows within the largest cutoff: keys, item and ``RANK``.
    top: pl.LazyFrame
    #: Truth rows: ``truth_keys``, item and ``REL`` (rows with ``REL`` 0 may be absent).
    truth: pl.LazyFrame
    #: The user key plus the ``by`` columns truth carries.
    truth_keys: list[str]
    #: The distinct values of the ``by`` columns truth lacks (truth applies to each), or None.
    groups: pl.LazyFrame | None
    #: Every evaluated-or-not key (by + user) seen in the inputs; for ``empty="zero"``.
    all_keys: pl.LazyFrame
    #: Rows of recommendations and truth dropped as duplicates under ``on_duplicate="first"``.
    duplicates: pl.LazyFrame
    #: Per key and cutoff k, whether the k-th and (k+1)-th scores tie (``tie@k``) and
    #: whether items within k tie with different relevance (``within@k``); score input.
    ties: pl.LazyFrame | None
    #: Value checks of the inputs, run by the engine together with the result.
    checks: list[CheckedFrame]
    #: Score input: the deduplicated (keys, item, score) rows, to rank by another tie
    #: rule (see :meth:`ranked`); the depth ``top`` was cut at; the tie rule of ``top``.
    scored: pl.LazyFrame | None = None
    depth: int | None = None
    tie_rule: str = "item"
    #: Every key with a recommendation (any rank), and every key with a truth row.
    recs_keys: pl.LazyFrame | None = None
    truth_user_keys: pl.LazyFrame | None = None
    #: The judged rows (``truth_keys``, item, ``REL``), relevance 0 included: truth's
    #: rows, or a long table's rows with a relevance.
    judged: pl.LazyFrame | None = None
    #: With ``exclude=``: one row, ``n``, the recommended rows it removed (any rank).
    excluded: pl.LazyFrame | None = None

    def ranked(self, ties: str) -> pl.LazyFrame:
        """``top`` with ranks from the tie rule ``ties`` (``top`` itself for rank input)."""
        if self.scored is None or ties == self.tie_rule:
            return self.top
        return top_by_score(
            self.scored, self.keys, self.item, _SCORE, self.depth, keep_score=False, ties=ties
        )

    @property
    def long(self) -> pl.LazyFrame:
        """The spec's long table within the largest cutoff (for diagnostics).

        An outer join of ``top`` and truth: ``RANK`` is null for a truth item not
        recommended within the cutoff, ``REL`` is 0 for a recommended item without truth.
        """
        truth = self.truth if self.groups is None else self.truth.join(self.groups, how="cross")
        on = [*self.keys, self.item]
        return self.top.join(truth.select(*on, REL), on=on, how="full", coalesce=True).with_columns(
            pl.col(REL).fill_null(0.0)
        )


def _require(
    frame: pl.LazyFrame, label: str, names: list[str], rank: str | None = None
) -> pl.Schema:
    """The frame's schema, once every column of ``names`` is in it.

    ``rank``: the rank column, when the call ranks by it: a frame without it but with a
    float column is told to pass that column as ``score=``.
    """
    schema = frame.collect_schema()
    missing = [n for n in names if n not in schema]
    if missing:
        advice: tuple[Part, ...] = ()
        if rank in missing:
            floats = [n for n, dtype in schema.items() if dtype.is_float() and n not in names]
            scores = sorted(floats, key=lambda n: ("score" not in n.lower(), floats.index(n)))
            if scores:
                advice = (
                    f"; to rank {label} by a score column (higher = better), ",
                    Pass("score", scores[0]),
                )
        raise MissingColumnsError(label, missing, list(schema.names()), *advice)
    return schema


def _require_dtype(label: str, column: str, dtype: pl.DataType, expected: str) -> None:
    ok = {
        "numeric": dtype.is_numeric() or dtype == pl.Boolean,
        "integer": dtype.is_integer() or dtype.is_float(),
    }[expected]
    if not ok:
        raise InvalidValueError(
            f"{label}: expected column {column!r} to hold {expected} values, found dtype {dtype}",
            frame=label,
            columns=[column],
        )


#: The largest gain: a sum of up to MAX_K (2^20) gains stays below 2^1021, finite.
_MAX_GAIN_EXPONENT = 1000


def relevance_checks(
    column: str, dtype: pl.DataType, gains: Collection[str], largest: RelevanceCap | None = None
) -> list[Check]:
    """Relevance is a finite number >= 0 whose gain keeps every DCG sum finite.

    ``gains``: the gains in use (``"linear"``, ``"exponential"``, ``"binary"``; a gain
    table keeps the relevance of levels outside it, so it counts as linear; err reads
    2^rel, so it counts as exponential). ``largest``: the largest relevance allowed (err's
    ``max_relevance``, when given: above it err's stopping "probability" would exceed 1).
    """
    checks = [negative_check(column), *finite_check(column, dtype)]
    if largest is not None:
        checks.append(
            upper_bound_check(
                column,
                largest.value,
                "err reads P = (2^rel - 1) / 2^max_relevance, a probability",
                largest.advice,
            )
        )
    if "linear" in gains:
        checks.append(
            magnitude_check(
                column,
                2.0**_MAX_GAIN_EXPONENT,
                f"2^{_MAX_GAIN_EXPONENT} (~1.07e301)",
                "with gain='linear', DCG sums these gains and must stay finite",
            )
        )
    if "exponential" in gains:
        checks.append(
            magnitude_check(
                column,
                float(_MAX_GAIN_EXPONENT),
                str(_MAX_GAIN_EXPONENT),
                "with gain='exponential', DCG sums 2^rel - 1 and must stay finite",
            )
        )
    return checks


def rating_checks(column: str, dtype: pl.DataType) -> list[Check]:
    """A rating or prediction is a finite number whose squared error stays finite."""
    return [
        *finite_check(column, dtype),
        magnitude_check(column, 2.0**500, "2^500 (~3.3e150)", "squared errors must stay finite"),
    ]


def propensity_checks(column: str, where: pl.Expr | None = None) -> list[Check]:
    """A propensity is a probability of observation in (0, 1], on every truth row.

    Checked on every truth row, relevant or not (spec 9.4 gives each truth row a P; a
    null on a judged non-relevant row is as likely a failed join as on a relevant one).
    ``where``: the rows that are truth rows (a long table's rows with a relevance).
    """
    p = pl.col(column).cast(pl.Float64, strict=False)
    rows = pl.lit(True) if where is None else where
    null = rows & pl.col(column).is_null()
    outside = (rows & ~((p > 0.0) & (p <= 1.0))).fill_null(False) & ~null
    return [
        row_check(
            null,
            InvalidValueError,
            f"expected a propensity in (0, 1] on every truth row in column {column!r}, "
            "found {n} null row(s), e.g. {example}",
        ),
        row_check(
            outside,
            InvalidValueError,
            f"expected a propensity in (0, 1] on every truth row in column {column!r}, "
            "found {n} row(s) outside it (P <= 0, P > 1 or NaN), e.g. {example}",
        ),
    ]


def _likely_by(recs: pl.LazyFrame, key: list[str], roles: set[str]) -> Parts:
    """Name the columns that would make repeated rows unique: likely a missing ``by``.

    A frame of several models stacked and evaluated without ``by="model"`` repeats
    every (user, item) a model shares with another. Runs only when the check failed.
    The columns come best first: a ``by`` column groups rows, so few values beat many
    (a model column, not a request id), and a float (a score) is never proposed. A
    column of dtype Null (no values) tells no rows apart.
    """
    schema = recs.collect_schema()
    others = [n for n, d in schema.items() if n not in roles and not isinstance(d, pl.Null)]
    if not others:
        return ()
    # Rows with a null key repeat none (a long table's unranked truth rows).
    keyed = pl.all_horizontal(pl.col(c).is_not_null() for c in key)
    repeated = recs.filter(pl.struct(key).is_duplicated() & keyed)
    stats = repeated.select(
        *(
            (pl.len() - pl.struct([*key, n]).n_unique()).alias(f"_fm_left{i}")
            for i, n in enumerate(others)
        ),
        *(pl.col(n).n_unique().alias(f"_fm_values{i}") for i, n in enumerate(others)),
    ).collect()
    rank = {
        n: (schema[n].is_float(), stats[f"_fm_values{i}"].item())
        for i, n in enumerate(others)
        if stats[f"_fm_left{i}"].item() == 0
    }
    if not rank:
        return ()
    unique_with = sorted(rank, key=rank.__getitem__)  # stable: ties keep column order
    said = f"; the rows differ in column(s) {', '.join(repr(n) for n in unique_with)}"
    if schema[unique_with[0]].is_float():
        return (said,)
    return (
        f"{said}: if they hold several models or segments, pass ",
        Keyword("by", unique_with[0]),
    )


def _duplicate_checks(
    lists: list[str],
    wanted: list[tuple[str, str, Parts]],
    hint_rows: Callable[[], pl.LazyFrame],
    roles: set[str],
    nullable: Collection[str] = (),
    ascending: Collection[str] = (),
) -> list[Check]:
    """The checks that (``lists``, value) repeats no row, per ``(value, what, advice)``.

    One pass for all (:func:`~frame_metrics.validation.duplicate_checks`; a value of
    ``ascending``, the rank of lists as given, first screened by whether it rises
    within each list); on failure each says which column would tell the repeated rows
    apart (:func:`_likely_by`).
    """

    def likely_by(key: list[str]) -> Callable[[], Parts]:
        return lambda: _likely_by(hint_rows(), key, roles)

    checks = duplicate_checks(lists, wanted, nullable, ascending=ascending)
    return [
        replace(check, explain=likely_by([*lists, value]))
        for check, (value, _, _) in zip(checks, wanted, strict=True)
    ]


#: Why ``on_duplicate="first"`` leaves two items at one rank an error (spec section 8).
_FIRST_KEEPS_RANKS: Parts = (
    " (on_duplicate='first' resolves a repeated item, keeping its best-ranked row; two "
    "different items at one rank leave no order between them: give each its own rank)",
)


#: Above this largest cutoff the ranks within it are screened by whether they rise
#: within each list (``validation.repeats_within_runs``'s ``rising``) rather than by
#: counting each list's distinct ranks. Measured at 1M users, the checks of ranks and
#: items, distinct counts against rising ranks: k=10 0.25 against 0.28 s, k=20 0.35
#: against 0.35, k=50 0.60 against 0.54, k=100 0.82 against 0.66.
_RISING_BEYOND = 20


def _dedup_hint(keep: str) -> Parts:
    return (" (pass ", Keyword("on_duplicate", "first"), f" to keep the {keep} row)")


def _unranked_truth(long: pl.LazyFrame, column: str, rank: str) -> Parts:
    """Say how to give truth rows per ``by`` group, when those without ``column`` are unranked.

    A long table made by joining stacked lists with truth leaves a null model on each
    relevant item no model recommended. Runs only when the null check failed.
    """
    null_group = long.filter(pl.col(column).is_null())
    if null_group.select(pl.col(rank).is_not_null().any()).collect().item():
        return ()  # a ranked row of no group: nothing to propose
    return (
        "; they have no rank (truth rows not recommended): with ",
        Keyword("by"),
        f", each {column!r} group of a long table needs its own truth rows, so repeat them "
        f"once per {column!r} value, or pass truth separately (",
        Keyword("truth"),
        f", without {column!r}: it then applies to every {column!r} value)",
    )


def prepare(
    recs: pl.LazyFrame,
    truth: pl.LazyFrame | None,
    columns: Columns,
    options: MetricOptions,
    max_k: int | None,
    *,
    validate: bool = True,
    tie_cutoffs: tuple[int, ...] = (),
    needs_relevance: bool = True,
    groups: pl.DataFrame | None = None,
    gains: Collection[str] = ("linear",),
    largest_relevance: RelevanceCap | None = None,
    row_order: bool = False,
    every_column: Callable[[], pl.LazyFrame] | None = None,
    propensity: str | None = None,
    exclude: pl.LazyFrame | None = None,
) -> Prepared:
    """Build the long table from recommendations and truth, or from a long table alone.

    Without truth, a long table needs a relevance column only when a requested metric
    reads relevance (``needs_relevance``); recommendations alone (for novelty, coverage
    and the like) then have relevance 0 everywhere. ``groups``: the distinct values of
    the ``by`` columns truth lacks, when known beforehand (one partition of a larger run).
    ``max_k``: the depth to read (``None``: whole lists); ``gains`` and
    ``largest_relevance``: see :func:`relevance_checks`; ``row_order``: keep the input row
    number for ties="input"; ``every_column``: recs with the columns the call does not
    read (converted only for the hint of a failed duplicate check), when ``recs`` lacks
    them. ``propensity``: a column of truth (of a long table) holding each truth row's
    propensity, carried on the truth rows as ``PROPENSITY`` and checked (spec 9.4).
    ``exclude``: (``by`` columns it carries, user, item) pairs removed from the lists
    before the cutoff (spec section 10; see :func:`_shifted`); truth is not touched.
    """
    checked: list[CheckedFrame] = []
    if exclude is not None and validate:
        pair = exclude.collect_schema().names()
        checked = [CheckedFrame("exclude", exclude, null_checks(pair, "key"), pair)]
    if truth is None:
        prepared = _prepare_long(
            recs,
            columns,
            options,
            max_k,
            validate=validate,
            needs_relevance=needs_relevance,
            gains=gains,
            largest_relevance=largest_relevance,
            every_column=every_column,
            propensity=propensity,
            exclude=exclude,
        )
    else:
        prepared = _prepare_pair(
            recs,
            truth,
            columns,
            options,
            max_k,
            validate=validate,
            tie_cutoffs=tie_cutoffs,
            known_groups=groups,
            gains=gains,
            largest_relevance=largest_relevance,
            row_order=row_order,
            every_column=every_column,
            propensity=propensity,
            exclude=exclude,
        )
    return replace(prepared, checks=[*prepared.checks, *checked]) if checked else prepared


def _prepare_pair(
    recs: pl.LazyFrame,
    truth: pl.LazyFrame,
    columns: Columns,
    options: MetricOptions,
    max_k: int | None,
    *,
    validate: bool,
    tie_cutoffs: tuple[int, ...],
    known_groups: pl.DataFrame | None,
    gains: Collection[str],
    largest_relevance: RelevanceCap | None,
    row_order: bool,
    every_column: Callable[[], pl.LazyFrame] | None,
    propensity: str | None = None,
    exclude: pl.LazyFrame | None = None,
) -> Prepared:
    c = columns
    order_col = c.order[1]
    rs = _require(recs, "recs", [*c.ranking, c.item, order_col], None if c.score else c.rank)
    # The hint of a failed duplicate check looks at every column of recs.
    hint_rows: Callable[[], pl.LazyFrame] = (lambda: recs) if every_column is None else every_column
    truth_by = [b for b in c.by if b in truth.collect_schema()]
    ts = _require(
        truth,
        "truth",
        [*c.user, *truth_by, c.item, c.relevance, *([propensity] if propensity else [])],
    )
    if propensity is not None:
        _require_dtype("truth", propensity, ts[propensity], "numeric")
    if c.score is not None:
        _require_dtype("recs", c.score, rs[c.score], "numeric")
    else:
        _require_dtype("recs", c.rank, rs[c.rank], "integer")
    _require_dtype("truth", c.relevance, ts[c.relevance], "numeric")
    join_keys = [*c.user, *truth_by, c.item]

    keys, item = c.keys, c.item
    # One ranking: a user's, or with ``sample`` each of a user's several rankings.
    lists, pair = c.ranking, "(user, item) pair" if c.sample is None else "(user, sample, item)"
    scored = None
    # The rows the lists keep (all but the excluded), for the count of repeats dropped.
    listed_rows = recs
    if c.score is not None:
        # Rank from score: score descending, ties by the tie rule (spec sections 4, 8).
        row = [pl.int_range(pl.len(), dtype=pl.Int64).alias(_ROW)] if row_order else []
        scored = recs.select(*lists, item, pl.col(c.score).alias(_SCORE), *row)
        scored = _sorted_flagged(scored, lists)
        if exclude is not None:
            # Before ranking: the rest are ranked 1, 2, ... by score and the tie rule
            # (the row numbers of ties="input" are the input's, taken before).
            scored = _without_pairs(scored, exclude)
            listed_rows = _without_pairs(recs, exclude)
        if options.on_duplicate == "first":
            # The kept row is the best-scored one, whole: its score and its input
            # position (the earliest of the rows with that score), not the best score of
            # one row with the position of another.
            best = pl.col(_SCORE) == pl.col(_SCORE).max()
            scored = scored.group_by([*lists, item]).agg(
                pl.col(_SCORE).max(), *([pl.col(_ROW).filter(best).min()] if row_order else [])
            )
        scan_k = max_k + 1 if tie_cutoffs and max_k is not None else max_k
        # Cached: the result's statistics, the aggregate's two reads of them and the
        # duplicate check all read the top k, and a group-by with a sort in each of
        # millions of groups is the costliest step of a score call (without the cache
        # polars ran it three times: 1M users, 13 s -> 5.5 s).
        top = top_by_score(
            scored, lists, item, _SCORE, scan_k, keep_score=bool(tie_cutoffs), ties=options.ties
        ).cache()
        scored_top = top
        if tie_cutoffs and max_k is not None:
            top = top.filter(pl.col(RANK) <= max_k)
        recs_checks = [
            *null_checks([*lists, item, c.score], "key"),
            *nan_check(c.score, rs[c.score]),  # a NaN score has no place in a ranking
        ]
        # As with ranks: a repeat ranked below the largest cutoff cannot change a metric.
        recs_dup_frame = top.select(*lists, item)
        top = top.drop(_SCORE, strict=False)
    else:
        scored_top = None
        if exclude is not None:
            # Each remaining row moves up past the excluded rows ranked above it; the
            # rows within the cutoff are those it brings there (with their own rank,
            # which the checks read). Cached: the result and the checks read them.
            rows = recs.select(*lists, item, c.rank)
            within = _moved_up(rows, exclude, lists, item, c.rank, max_k).cache()
            top = within.select(*lists, item, RANK)
            # Repeats are counted by the ranks the rows have after the removal.
            listed_rows = within.with_columns(pl.col(RANK).alias(c.rank))
        else:
            within = recs if max_k is None else recs.filter(pl.col(c.rank) <= max_k)
            rank = pl.col(c.rank).cast(pl.Int64, strict=False).alias(RANK)
            top = within.select(*lists, item, rank)
        recs_checks = [
            *null_checks([*lists, item, c.rank], "key"),
            rank_below_one_check(c.rank),
            *nonintegral_check(c.rank, rs[c.rank]),
        ]
        # Repeats beyond the largest cutoff cannot change a metric; checking only the
        # rows within it keeps the (hash-based) duplicate checks cheap.
        recs_dup_frame = within
        if options.on_duplicate == "first":
            top = top.group_by([*lists, item]).agg(pl.col(RANK).min())

    carried = [] if propensity is None else [pl.col(propensity).cast(pl.Float64).alias(PROPENSITY)]
    truth_rows = truth.select(
        *c.user, *truth_by, item, pl.col(c.relevance).cast(pl.Float64).alias(REL), *carried
    )
    if options.on_duplicate == "first":
        # The kept row is the highest-relevance one, whole: its propensity too (the
        # smallest of those rows' when several share it, whatever their order).
        best = pl.col(REL) == pl.col(REL).max()
        kept = [pl.col(PROPENSITY).filter(best).min()] if propensity is not None else []
        truth_rows = truth_rows.group_by(join_keys).agg(pl.col(REL).max(), *kept)
    ties = None
    if scored_top is not None and tie_cutoffs:
        graded = scored_top.join(truth_rows, on=join_keys, how="left")
        ties = _ties(graded.with_columns(pl.col(REL).fill_null(0.0)), lists, tie_cutoffs)

    checks: list[CheckedFrame] = []
    if validate:
        roles = {*lists, item, order_col}
        # The checks of the rows within the cutoff: one row per list and item, and per
        # list and rank; one pass counts both (duplicate_checks).
        wanted: list[tuple[str, str, Parts]] = []
        show_recs = [*lists, item, order_col]
        # Score-ranked duplicates are looked for among the ranked rows, which carry no score.
        show_dups = [*lists, item] if c.score is not None else show_recs
        first_ranks: list[CheckedFrame] = []
        if c.score is None:
            within_what = (
                "rank within a user" if c.sample is None else "rank within a user's sample"
            )
            if options.on_duplicate == "first":
                # A repeated item is resolved first (identical rows are one repeat), so
                # only two different items at one rank are left to refuse.
                deduped = recs_dup_frame.group_by([*lists, item]).agg(pl.col(c.rank).min())
                checks_first = _duplicate_checks(
                    lists, [(c.rank, within_what, _FIRST_KEEPS_RANKS)], hint_rows, roles
                )
                first_ranks.append(CheckedFrame("recs", deduped, checks_first, show_recs))
            else:
                wanted.append((c.rank, within_what, ()))
        if options.on_duplicate == "error":
            wanted.append((item, pair, _dedup_hint("best-ranked")))
        # The rows within the cutoff keep recs' order (a filter): long lists written in
        # rank order have their ranks checked by a comparison per row (see _RISING_BEYOND).
        long_lists = max_k is None or max_k > _RISING_BEYOND
        rising = (c.rank,) if c.score is None and exclude is None and long_lists else ()
        dup_checks = (
            _duplicate_checks(lists, wanted, hint_rows, roles, ascending=rising) if wanted else []
        )
        show_truth = [*c.user, *truth_by, item, c.relevance, *([propensity] if propensity else [])]
        truth_checks = [
            *null_checks([*c.user, *truth_by, item], "key"),
            *null_checks([c.relevance], "relevance"),
            *relevance_checks(c.relevance, ts[c.relevance], gains, largest_relevance),
            *(propensity_checks(propensity) if propensity is not None else []),
        ]
        if options.on_duplicate == "error":
            truth_checks.append(
                duplicate_check(
                    join_keys,
                    "(user, item) pair",
                    _dedup_hint("highest-relevance"),
                )
            )
        checks = [
            CheckedFrame("recs", recs, recs_checks, show_recs),
            *([CheckedFrame("recs", recs_dup_frame, dup_checks, show_dups)] if dup_checks else []),
            *first_ranks,
            CheckedFrame("truth", truth, truth_checks, show_truth),
        ]

    missing_by = [b for b in c.by if b not in truth_by]
    # Each side's distinct keys first (truth's before the cross join): the union of two
    # small frames, and the same frames a diagnosis reads (one pass over recs for both).
    recs_keys = recs.select(keys).unique()
    truth_user_keys = truth_rows.select(*c.user, *truth_by).unique()
    groups = None
    if missing_by:
        # Truth without the by columns applies to every group (e.g. every model): each
        # group is judged on all truth users, recommended to or not.
        groups = recs.select(missing_by).unique() if known_groups is None else known_groups.lazy()
        truth_user_keys = truth_user_keys.join(groups, how="cross")
    truth_user_keys = truth_user_keys.select(keys)
    all_keys = pl.concat([recs_keys, truth_user_keys], how="vertical_relaxed").unique()
    excluded = None if exclude is None else _excluded_rows(recs, exclude)
    dup_counts = (
        _duplicates_dropped(listed_rows, truth, c, max_k, join_keys)
        if options.on_duplicate == "first"
        # Under "error" nothing is dropped: a repeat is an error (the checks), not a count.
        else _no_duplicates_dropped()
    )
    return Prepared(
        keys,
        item,
        top,
        truth_rows,
        [*c.user, *truth_by],
        groups,
        all_keys,
        dup_counts,
        ties,
        checks,
        scored,
        max_k,
        options.ties,
        # A user whose every recommendation is excluded still had a list (now empty).
        recs_keys,
        truth_user_keys,
        truth_rows,
        excluded,
    )


def _pairs(exclude: pl.LazyFrame, columns: Collection[str]) -> tuple[pl.LazyFrame, list[str]]:
    """``exclude``'s distinct pairs on the columns it shares with a frame of ``columns``.

    ``exclude`` holds the ``by`` columns it carries, the user key and the item: pairs
    with ``by`` values apply to their group alone, the others to every group.
    """
    on = [n for n in exclude.collect_schema().names() if n in columns]
    return exclude.select(on).unique(), on


def _without_pairs(rows: pl.LazyFrame, exclude: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` without those whose pair is in ``exclude``."""
    pairs, on = _pairs(exclude, rows.collect_schema().names())
    return rows.join(pairs, on=on, how="anti")


def _excluded_rows(rows: pl.LazyFrame, exclude: pl.LazyFrame) -> pl.LazyFrame:
    """One row, ``n``: how many of ``rows`` have their pair in ``exclude``."""
    pairs, on = _pairs(exclude, rows.collect_schema().names())
    return rows.join(pairs, on=on, how="semi").select(pl.len().cast(pl.Int64).alias("n"))


def _shifted(
    rows: pl.LazyFrame, exclude: pl.LazyFrame, lists: list[str], item: str, rank: str
) -> pl.LazyFrame:
    """``rows`` marked ``_EXCLUDED`` when their pair is excluded, with ranks moved up.

    Each list's rows in rank order (item order within a repeated rank, null ranks
    last): a row's ``RANK`` is its rank minus the excluded rows ranked above it, so a
    list without gaps is re-ranked 1, 2, ... and the order is kept. A gap the list had
    stays a gap (an empty position reads as a miss with or without ``exclude=``, so an
    empty ``exclude`` changes nothing). ``rank`` may be ``RANK`` itself (a long table's).
    """
    pairs, on = _pairs(exclude, rows.collect_schema().names())
    marks = pairs.with_columns(pl.lit(True).alias(_EXCLUDED))
    flagged = rows.join(marks, on=on, how="left").with_columns(pl.col(_EXCLUDED).fill_null(False))
    carried = [n for n in flagged.collect_schema().names() if n not in lists]
    # One sort of all rows, then each list's rows in that order (a group keeps the
    # frame's order): 3x faster than sorting each list's columns within the group-by.
    ordered = flagged.sort([*lists, rank, item], nulls_last=True)
    mark = pl.col(_EXCLUDED).cast(pl.Int64)
    per_list = ordered.group_by(lists).agg(*carried, (mark.cum_sum() - mark).alias(_SHIFT))
    moved = pl.col(rank).cast(pl.Int64, strict=False) - pl.col(_SHIFT)
    return per_list.explode(*carried, _SHIFT).with_columns(moved.alias(RANK)).drop(_SHIFT)


def _moved_up(
    rows: pl.LazyFrame,
    exclude: pl.LazyFrame,
    lists: list[str],
    item: str,
    rank: str,
    depth: int | None,
) -> pl.LazyFrame:
    """The rows of ``rows`` not excluded, moved up (``RANK``), those within ``depth``.

    As :func:`_shifted`, reading only what can reach ``depth``: a list without an
    excluded row keeps its ranks (no sort), and in a list with n of them, no row ranked
    below ``depth + n`` can move up to ``depth``.
    """
    if depth is None:
        return _shifted(rows, exclude, lists, item, rank).filter(~pl.col(_EXCLUDED)).drop(_EXCLUDED)
    names = rows.collect_schema().names()
    pairs, on = _pairs(exclude, names)
    counts = rows.join(pairs, on=on, how="semi").group_by(lists).agg(pl.len().alias(_SHIFT))
    counted = rows.join(counts, on=lists, how="left", nulls_equal=True)
    touched = pl.col(_SHIFT).is_not_null()
    kept = counted.filter(~touched & (pl.col(rank) <= depth)).select(
        *names, pl.col(rank).cast(pl.Int64, strict=False).alias(RANK)
    )
    reach = counted.filter(touched & (pl.col(rank) <= depth + pl.col(_SHIFT))).drop(_SHIFT)
    moved = _shifted(reach, exclude, lists, item, rank)
    moved = moved.filter(~pl.col(_EXCLUDED) & (pl.col(RANK) <= depth)).select(*names, RANK)
    return pl.concat([kept, moved])


def top_by_score(
    rows: pl.LazyFrame,
    keys: list[str],
    item: str,
    score: str,
    k: int | None,
    *,
    keep_score: bool,
    ties: str = "item",
) -> pl.LazyFrame:
    """Each key's best ``k`` rows by score (all with ``None``), ``RANK`` 1..k.

    Score descending; equal scores by ``ties``: ``"item"`` item ascending, ``"item_desc"``
    item descending, ``"item_desc_text"`` item descending compared as text (trec_eval),
    ``"input"`` input row order (a stable sort), ``"average"`` item ascending plus each
    row's tie group (``TIE_FIRST``, ``TIE_LAST``: the group's first and last position),
    with the whole group tied with the k-th row kept.

    A sort of each user's own rows (few) is far cheaper than ranking every row with a
    window, and needs no window over the whole frame (a polars 2.1 streaming window can
    deadlock when it spills to disk). The score comes along only with ``keep_score``
    (a second sorted column costs as much again).
    """
    if ties == "average":
        return _top_with_tie_groups(rows, keys, item, score, k, keep_score=keep_score)
    carried = [item, score] if keep_score else [item]
    order: list[pl.Expr] = [pl.col(score), pl.col(item)]
    descending = [True, False]
    if ties == "item_desc":
        descending = [True, True]
    elif ties == "item_desc_text":
        order, descending = [pl.col(score), pl.col(item).cast(pl.String)], [True, True]
    elif ties == "input":
        order = [pl.col(score), pl.col(_ROW)]

    def best(col: str) -> pl.Expr:
        ordered = pl.col(col).sort_by(order, descending=descending)
        return ordered if k is None else ordered.head(k)

    # maintain_order: polars 2.1 runs this group-by of a sort per group faster with
    # it (1M users x 100 rows: 1.65 s against 2.27 s; shuffled rows: 1.27 against 1.33
    # at 300k users); the groups' order is no part of any result.
    return (
        rows.group_by(keys, maintain_order=True)
        .agg(best(col) for col in carried)
        .with_columns(pl.int_ranges(1, pl.col(item).list.len() + 1, dtype=pl.Int64).alias(RANK))
        .explode(*carried, RANK)
    )


def _sorted_flagged(rows: pl.LazyFrame, lists: Sequence[str]) -> pl.LazyFrame:
    """``rows`` with their list key flagged sorted, when it is one column and sorted.

    Lists usually come written user after user. polars groups a key it knows to be
    sorted by slicing its runs instead of hashing it, and the per-list sort of a
    ``score=`` call (:func:`top_by_score`) costs about a third less so (1M users x 100
    rows: 3.2 -> 2.1 s). The key's order is read first (one small query over one
    column, 0.04 s there; it stops at the first pair out of order) and flagged only when
    it holds with no null key (nulls are the checks' to report). Nothing else changes:
    the same rows in the same order, so the same groups in the same order.
    """
    if len(lists) != 1:
        return rows  # a list keyed by several columns (``by``, ``sample``): hashed
    key = pl.col(lists[0])
    # Streamed: of a scan, the column is read in morsels, not held (100M rows: 124 MB
    # against 858 MB in memory).
    holds = rows.select(key.is_sorted() & (key.null_count() == 0))
    if not holds.collect(engine="streaming").item():
        return rows
    return rows.with_columns(key.set_sorted())


def _top_with_tie_groups(
    rows: pl.LazyFrame, keys: list[str], item: str, score: str, k: int | None, *, keep_score: bool
) -> pl.LazyFrame:
    """``top_by_score`` for ``ties="average"``: the top k and every item tied with the k-th.

    Items in item order within a group of equal scores, with the group's first and last
    position (``TIE_FIRST``, ``TIE_LAST``): a group that straddles k is kept whole, since
    each of its items may land within k. The positions come from ranking each user's
    sorted scores once, inside the list (no second sort of the rows).
    """
    order = [pl.col(score), pl.col(item)]
    lists = rows.group_by(keys, maintain_order=True).agg(  # as in top_by_score
        pl.col(item).sort_by(order, descending=[True, False]),
        pl.col(score).sort_by(order, descending=[True, False]),
    )
    scores = pl.col(score)
    first = scores.list.eval(pl.element().rank("min", descending=True).cast(pl.Int64))
    last = scores.list.eval(pl.element().rank("max", descending=True).cast(pl.Int64))
    lists = lists.with_columns(first.alias(TIE_FIRST), last.alias(TIE_LAST))
    carried = [item, *([score] if keep_score else []), TIE_FIRST, TIE_LAST]
    if k is not None:
        # The list is sorted, so the items whose group starts within k are a prefix.
        kept = pl.col(TIE_FIRST).list.eval((pl.element() <= k).sum()).list.first()
        lists = lists.with_columns(pl.col(c).list.head(kept) for c in carried)
    return (
        lists.select(*keys, *carried)
        .with_columns(pl.int_ranges(1, pl.col(item).list.len() + 1, dtype=pl.Int64).alias(RANK))
        .explode(*carried, RANK)
    )


def _no_duplicates_dropped() -> pl.LazyFrame:
    """The count of rows ``on_duplicate='error'`` drops: none, per frame."""
    return pl.LazyFrame(
        {"frame": ["recs", "truth"], "rows_dropped": [0, 0]},
        schema={"frame": pl.String, "rows_dropped": pl.Int64},
    )


def _duplicates_dropped(
    recs: pl.LazyFrame,
    truth: pl.LazyFrame,
    c: Columns,
    max_k: int | None,
    join_keys: list[str],
) -> pl.LazyFrame:
    """Rows that ``on_duplicate='first'`` drops, per frame (0 under ``'error'``)."""
    if c.score is None and max_k is not None:
        recs = recs.filter(pl.col(c.rank) <= max_k)
    recs_dups = recs.select(pl.len() - pl.struct([*c.ranking, c.item]).n_unique())
    truth_dups = truth.select(pl.len() - pl.struct(join_keys).n_unique())
    return pl.concat(
        [
            recs_dups.select(
                pl.lit("recs").alias("frame"), pl.all().cast(pl.Int64).alias("rows_dropped")
            ),
            truth_dups.select(
                pl.lit("truth").alias("frame"), pl.all().cast(pl.Int64).alias("rows_dropped")
            ),
        ]
    )


def _ties(top: pl.LazyFrame, keys: list[str], cutoffs: tuple[int, ...]) -> pl.LazyFrame:
    """Per key and cutoff k, what the tie rule decided.

    ``tie@k``: the k-th and (k+1)-th scores are equal, so the rule decided who made the
    cut. ``within@k``: two items within k share a score but not a relevance, so the rule
    decided their order, which order-sensitive metrics (AP, NDCG, MRR) read.
    """
    straddle = [
        (
            (pl.col(_SCORE).filter(pl.col(RANK) == k).first())
            == (pl.col(_SCORE).filter(pl.col(RANK) == k + 1).first())
        )
        .fill_null(False)
        .alias(f"tie@{k}")
        for k in cutoffs
    ]
    per_score = top.group_by([*keys, _SCORE]).agg(
        (pl.col(REL).filter(pl.col(RANK) <= k).n_unique() > 1).alias(f"within@{k}") for k in cutoffs
    )
    reordered = per_score.group_by(keys).agg(pl.col(f"within@{k}").any() for k in cutoffs)
    return (
        top.group_by(keys)
        .agg(straddle)
        .join(reordered, on=keys, how="left", nulls_equal=True)
        .with_columns(pl.col(f"within@{k}").fill_null(False) for k in cutoffs)
    )


def _prepare_long(
    long: pl.LazyFrame,
    columns: Columns,
    options: MetricOptions,
    max_k: int | None,
    *,
    validate: bool,
    needs_relevance: bool,
    gains: Collection[str],
    largest_relevance: RelevanceCap | None,
    every_column: Callable[[], pl.LazyFrame] | None,
    propensity: str | None = None,
    exclude: pl.LazyFrame | None = None,
) -> Prepared:
    c = columns
    keys, item = c.keys, c.item
    has_relevance = needs_relevance or c.relevance in long.collect_schema()
    wanted = [*keys, item, c.rank, *([c.relevance] if has_relevance else [])]
    wanted += [propensity] if propensity is not None else []
    schema = _require(long, "long table" if has_relevance else "recs", wanted)
    if propensity is not None:
        _require_dtype("long table", propensity, schema[propensity], "numeric")
    _require_dtype("long table", c.rank, schema[c.rank], "integer")
    if not has_relevance:
        # Recommendations alone: no relevance anywhere, and every row is recommended.
        long = long.with_columns(pl.lit(0.0).alias(c.relevance))
        schema = long.collect_schema()
    _require_dtype("long table", c.relevance, schema[c.relevance], "numeric")
    checked: list[CheckedFrame] = []
    if validate:
        by_checks = null_checks(c.by, "key")
        if has_relevance:
            by_checks = [
                replace(check, explain=partial(_unranked_truth, long, b, c.rank))
                for b, check in zip(c.by, by_checks, strict=True)
            ]
        checks = [
            *by_checks,
            *null_checks([*c.user, item, *([] if has_relevance else [c.rank])], "key"),
            *relevance_checks(c.relevance, schema[c.relevance], gains, largest_relevance),
            rank_below_one_check(c.rank),
            *nonintegral_check(c.rank, schema[c.rank]),
        ]
        if propensity is not None:
            # A long table's truth rows are those with a relevance.
            checks += propensity_checks(propensity, pl.col(c.relevance).is_not_null())
        # Stacked models' tables without by= repeat ranks and items: say which column differs.
        roles = {*keys, item, c.rank, c.relevance}
        # The hint reads the columns the call does not (converted only now it failed).
        hint_rows: Callable[[], pl.LazyFrame] = (
            (lambda: long) if every_column is None else every_column
        )
        shown_cols = [*keys, item, c.rank, c.relevance, *([propensity] if propensity else [])]
        # A rank repeated below the largest cutoff cannot change a metric (spec section 8);
        # a repeated (user, item) is a repeated truth row wherever it is ranked.
        ranked_within = (
            long
            if max_k is None
            else long.filter(pl.col(c.rank).is_null() | (pl.col(c.rank) <= max_k))
        )
        rank_check = (c.rank, "rank within a user", ())
        if options.on_duplicate == "first":
            deduped = ranked_within.group_by([*keys, item]).agg(
                pl.col(c.rank).min(), pl.col(c.relevance).first()
            )
            rank_checks = _duplicate_checks(
                keys, [(*rank_check[:2], _FIRST_KEEPS_RANKS)], hint_rows, roles, {c.rank}
            )
            checked = [
                CheckedFrame("long table", long, checks, shown_cols),
                CheckedFrame("long table", deduped, rank_checks, [*keys, item, c.rank]),
            ]
        else:
            pair_check = (item, "(user, item) pair", _dedup_hint("best-ranked"))
            pair_checks = _duplicate_checks(keys, [pair_check], hint_rows, roles, {c.rank})
            rank_checks = _duplicate_checks(keys, [rank_check], hint_rows, roles, {c.rank})
            checked = [
                CheckedFrame("long table", long, checks, shown_cols),
                CheckedFrame("long table", ranked_within, rank_checks, shown_cols),
                CheckedFrame("long table", long, pair_checks, shown_cols),
            ]
    rows = long.select(
        *keys,
        item,
        pl.col(c.rank).cast(pl.Int64, strict=False).alias(RANK),
        pl.col(c.relevance).cast(pl.Float64).fill_null(0.0).alias(REL),
        pl.col(c.relevance).is_not_null().alias(_JUDGED),
        *([pl.col(propensity).cast(pl.Float64).alias(PROPENSITY)] if propensity else []),
    )
    listed_keys = rows.filter(pl.col(RANK).is_not_null()).select(keys).unique()
    excluded = None
    if exclude is not None:
        # An excluded pair's row is no recommendation (its rank is dropped, the rest of
        # its list moves up); its relevance stays: truth is not touched (spec section 10).
        excluded = _excluded_rows(rows.filter(pl.col(RANK).is_not_null()), exclude)
        shifted = _shifted(rows, exclude, keys, item, RANK)
        rank = pl.when(~pl.col(_EXCLUDED)).then(pl.col(RANK))
        rows = shifted.with_columns(rank.alias(RANK)).drop(_EXCLUDED)
    dups = rows.select(
        pl.lit("long table").alias("frame"),
        (pl.len() - pl.struct([*keys, item]).n_unique()).cast(pl.Int64).alias("rows_dropped"),
    )
    if options.on_duplicate == "first":
        rows = rows.sort(RANK, nulls_last=True).unique(
            subset=[*keys, item], keep="first", maintain_order=True
        )
    # What can matter: rows ranked within the cutoff, and relevant rows (for |R| and the
    # IDCG); a relevant item ranked below the cutoff is, for every metric, not recommended.
    listed = pl.col(RANK).is_not_null() if max_k is None else pl.col(RANK) <= max_k
    top = rows.filter(listed).select(*keys, item, RANK)
    carried = [PROPENSITY] if propensity is not None else []
    truth = rows.filter(pl.col(REL) > 0).select(*keys, item, REL, *carried)
    all_keys = long.select(keys).unique()
    # A long table cannot tell a judged 0 from an unjudged item but by a null relevance.
    judged = rows.filter(pl.col(_JUDGED)).select(*keys, item, REL, *carried)
    return Prepared(
        keys,
        item,
        top,
        truth,
        keys,
        None,
        all_keys,
        dups,
        None,
        checked,
        None,
        max_k,
        options.ties,
        listed_keys,
        judged.select(keys).unique(),
        judged,
        excluded,
    )


def prepare_baseline(
    baseline: pl.LazyFrame,
    baseline_by: list[str],
    columns: Columns,
    max_k: int,
    *,
    validate: bool,
    exclude: pl.LazyFrame | None = None,
) -> tuple[pl.LazyFrame, list[CheckedFrame]]:
    """A baseline model's rows within the largest cutoff: (by it carries, user, item, RANK).

    Ranked like the recommendations: by ``rank``, or from ``score`` with the same tie
    rule (score descending, item ascending); ``exclude``'s pairs are removed from its
    lists as from the recommendations (on the columns the baseline has).
    """
    c = columns
    keys = [*baseline_by, *c.user]
    order_col = c.order[1]
    schema = _require(baseline, "baseline", [*keys, c.item, order_col])
    if c.score is not None:
        _require_dtype("baseline", c.score, schema[c.score], "numeric")
        scored = baseline.select(*keys, c.item, pl.col(c.score).alias(_SCORE))
        if exclude is not None:
            scored = _without_pairs(scored, exclude)
        ranked = top_by_score(scored, keys, c.item, _SCORE, max_k, keep_score=False)
        checks = [
            *null_checks([*keys, c.item, c.score], "key"),
            *nan_check(c.score, schema[c.score]),
        ]
    else:
        _require_dtype("baseline", c.rank, schema[c.rank], "integer")
        if exclude is not None:
            rows = baseline.select(*keys, c.item, c.rank)
            moved = _moved_up(rows, exclude, keys, c.item, c.rank, max_k)
            ranked = moved.select(*keys, c.item, RANK)
        else:
            ranked = baseline.select(
                *keys, c.item, pl.col(c.rank).cast(pl.Int64, strict=False).alias(RANK)
            )
        checks = [
            *null_checks([*keys, c.item, c.rank], "key"),
            rank_below_one_check(c.rank),
            *nonintegral_check(c.rank, schema[c.rank]),
        ]
    top = ranked.filter(pl.col(RANK) <= max_k).group_by([*keys, c.item]).agg(pl.col(RANK).min())
    checked = (
        [CheckedFrame("baseline", baseline, checks, [*keys, c.item, order_col])] if validate else []
    )
    return top, checked


PREDICTION = "_fm_prediction"


@dataclass(frozen=True)
class RatingPairs:
    """(key, item) pairs with a true rating ``REL`` and a ``PREDICTION``, plus counts.

    ``matched`` holds the pairs with both; ``one_sided`` counts, per ``by`` group, the
    pairs with a prediction but no rating and with a rating but no prediction.
    """

    matched: pl.LazyFrame
    one_sided: pl.LazyFrame
    checks: list[CheckedFrame]


def prepare_ratings(
    recs: pl.LazyFrame,
    truth: pl.LazyFrame | None,
    columns: Columns,
    *,
    validate: bool,
) -> RatingPairs:
    """Pair each prediction with its true rating on (key, item).

    With truth, ``recs`` carries the ``prediction`` column and truth the ``relevance``
    (the true rating); truth without the ``by`` columns applies to every group. Without
    truth, one table carries both, and a null on either side marks a one-sided pair.
    """
    c = columns
    keys, item = c.keys, c.item
    if truth is None:
        schema = _require(recs, "long table", [*keys, item, c.relevance, c.prediction])
        _require_dtype("long table", c.prediction, schema[c.prediction], "numeric")
        _require_dtype("long table", c.relevance, schema[c.relevance], "numeric")
        both = recs.select(
            *keys,
            item,
            pl.col(c.relevance).cast(pl.Float64).alias(REL),
            pl.col(c.prediction).cast(pl.Float64).alias(PREDICTION),
        )
        checks = (
            [
                CheckedFrame(
                    "long table",
                    recs,
                    [
                        *null_checks([*keys, item], "key"),
                        negative_check(c.relevance),
                        *rating_checks(c.relevance, schema[c.relevance]),
                        *rating_checks(c.prediction, schema[c.prediction]),
                        duplicate_check([*keys, item], "(user, item) pair", ""),
                    ],
                    [*keys, item, c.relevance, c.prediction],
                )
            ]
            if validate
            else []
        )
    else:
        rs = _require(recs, "recs", [*keys, item, c.prediction])
        truth_by = [b for b in c.by if b in truth.collect_schema()]
        ts = _require(truth, "truth", [*c.user, *truth_by, item, c.relevance])
        _require_dtype("recs", c.prediction, rs[c.prediction], "numeric")
        _require_dtype("truth", c.relevance, ts[c.relevance], "numeric")
        predicted = recs.select(
            *keys, item, pl.col(c.prediction).cast(pl.Float64).alias(PREDICTION)
        )
        rated = truth.select(
            *c.user, *truth_by, item, pl.col(c.relevance).cast(pl.Float64).alias(REL)
        )
        missing_by = [b for b in c.by if b not in truth_by]
        if missing_by:
            rated = rated.join(recs.select(missing_by).unique(), how="cross")
        both = predicted.join(rated, on=[*keys, item], how="full", coalesce=True, nulls_equal=True)
        checks = (
            [
                CheckedFrame(
                    "recs",
                    recs,
                    [
                        *null_checks([*keys, item, c.prediction], "key or prediction"),
                        *rating_checks(c.prediction, rs[c.prediction]),
                        duplicate_check([*keys, item], "(user, item) pair", ""),
                    ],
                    [*keys, item, c.prediction],
                ),
                CheckedFrame(
                    "truth",
                    truth,
                    [
                        *null_checks([*c.user, *truth_by, item, c.relevance], "key or rating"),
                        negative_check(c.relevance),
                        *rating_checks(c.relevance, ts[c.relevance]),
                        duplicate_check([*c.user, *truth_by, item], "(user, item) pair", ""),
                    ],
                    [*c.user, *truth_by, item, c.relevance],
                ),
            ]
            if validate
            else []
        )
    has_pred, has_rel = pl.col(PREDICTION).is_not_null(), pl.col(REL).is_not_null()
    matched = both.filter(has_pred & has_rel)
    counts = [
        (has_pred & ~has_rel).sum().cast(pl.Int64).alias("pairs_without_rating"),
        (has_rel & ~has_pred).sum().cast(pl.Int64).alias("pairs_without_prediction"),
    ]
    one_sided = both.group_by(list(c.by)).agg(counts) if c.by else both.select(counts)
    return RatingPairs(matched, one_sided, checks)
