"""Checks of values, declared as a table and run in one pass before any metric is computed.

Each :class:`Check` counts offending rows with an expression; all counts of all frames
are collected together (``pl.collect_all``), and only when one is non-zero is a second,
small query run to show an example row in the error message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from frame_metrics.errors import (
    DuplicateRowsError,
    FrameMetricsError,
    InvalidValueError,
    Keyword,
    LeaveOut,
    Part,
    Pass,
)

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = [
    "Check",
    "CheckedFrame",
    "Failure",
    "Parts",
    "SharedScreen",
    "dump_parts",
    "duplicate_check",
    "duplicate_checks",
    "find_failures",
    "finite_check",
    "load_parts",
    "magnitude_check",
    "nan_check",
    "nan_label_checks",
    "negative_check",
    "nonintegral_check",
    "null_checks",
    "rank_below_one_check",
    "repeats_per_group",
    "repeats_within_runs",
    "row_check",
    "run_checks",
]


@dataclass(frozen=True, eq=False)
class SharedScreen:
    """One column of a query that counts for several checks of a frame at once.

    Checks whose screens hold the same ``query`` (the same function) run it once per
    batch, each reading its own ``column`` of its one row.
    """

    query: Callable[[pl.LazyFrame], pl.LazyFrame]
    column: str


#: A count over a frame: an expression, a query of the frame giving one value, or one
#: value of a query shared with other checks.
Screen = pl.Expr | Callable[[pl.LazyFrame], pl.LazyFrame] | SharedScreen
#: Text after a check's message: words, and the arguments it proposes.
Parts = tuple[Part, ...]


def _count_query(frame: pl.LazyFrame, count: Screen) -> pl.LazyFrame:
    if isinstance(count, pl.Expr):
        return frame.select(count.cast(pl.Int64))
    if isinstance(count, SharedScreen):
        return count.query(frame).select(count.column)
    return count(frame)


@dataclass(frozen=True)
class Check:
    """One rule: ``count`` offending rows; ``offending`` selects them for an example.

    ``screens``, when given, are cheaper counts, each 0 whenever ``count`` is (they may
    be positive spuriously), cheapest first: the batch runs the first, and each next
    one (then ``count``) runs only when the one before was not 0.
    """

    count: pl.Expr
    offending: pl.Expr
    error: type[FrameMetricsError]
    message: str  # formatted with n= and example=
    screens: tuple[Screen, ...] = ()
    #: On failure only: more to say, read from the data (a likely cause).
    explain: Callable[[], Parts] | None = None
    #: Said after the message on failure, before ``explain``'s (a way out that always applies).
    advice: Parts = ()
    #: ``count`` is the number of rows ``offending`` holds for, and ``offending`` reads
    #: each row alone: the batch then counts only the rows some such check of the frame
    #: offends (see :func:`row_check`).
    row_wise: bool = False


def row_check(
    offending: pl.Expr, error: type[FrameMetricsError], message: str, advice: Parts = ()
) -> Check:
    """A check of each row on its own: ``count`` is the number of rows ``offending`` holds for.

    The batch counts such checks over ``frame.filter(any of them offends)``: on valid
    data nothing passes the filter, and on a parquet scan polars answers the filter from
    the files' statistics (null counts, minima and maxima per row group) without reading
    the column values at all (1M users x 100: 0.001 s instead of 0.3 s).
    """
    return Check(offending.sum(), offending, error, message, advice=advice, row_wise=True)


@dataclass(frozen=True)
class CheckedFrame:
    """A frame, the label used in messages, and the checks to run on it."""

    label: str
    frame: pl.LazyFrame
    checks: Sequence[Check]
    show: Sequence[str]  # columns printed in an example


def null_checks(columns: Sequence[str], role: str) -> list[Check]:
    """No nulls in the given columns."""
    return [
        row_check(
            pl.col(c).is_null(),
            InvalidValueError,
            f"expected no nulls in {role} column {c!r}, found {{n}} null row(s), e.g. {{example}}",
        )
        for c in columns
    ]


def nan_label_checks(columns: Sequence[str], role: str, schema: pl.Schema) -> list[Check]:
    """No NaN in the float ones of ``columns``: a NaN label names no group, as a null.

    polars groups NaN apart as a value of its own; beside :func:`null_checks`.
    """
    return [
        row_check(
            pl.col(c).is_nan(),
            InvalidValueError,
            f"expected no NaN in {role} column {c!r}, found {{n}} NaN row(s), e.g. {{example}}",
        )
        for c in columns
        if schema[c].is_float()
    ]


def negative_check(column: str) -> Check:
    """Relevance must be >= 0."""
    return row_check(
        pl.col(column) < 0,
        InvalidValueError,
        f"expected relevance >= 0 in column {column!r}, found {{n}} negative value(s), "
        "e.g. {example}",
    )


def nan_check(column: str, dtype: pl.DataType) -> list[Check]:
    """A float column must hold numbers: NaN is not a score (±inf is, and sorts)."""
    if not dtype.is_float():
        return []
    return [
        row_check(
            pl.col(column).is_nan(),
            InvalidValueError,
            f"expected numbers in column {column!r}, found {{n}} NaN value(s), e.g. {{example}}",
        )
    ]


def finite_check(column: str, dtype: pl.DataType) -> list[Check]:
    """A relevance, rating or prediction must be a finite number: NaN or ±inf has no mean."""
    if not dtype.is_float():
        return []
    bad = ~pl.col(column).is_finite()
    return [
        row_check(
            bad,
            InvalidValueError,
            f"expected finite numbers in column {column!r}, found {{n}} NaN or infinite "
            "value(s), e.g. {example}",
        )
    ]


def magnitude_check(column: str, bound: float, shown: str, why: str) -> Check:
    """``|value| <= bound``, so that every sum the metrics take stays finite.

    ``shown`` is how the message writes the bound, ``why`` what it protects.
    """
    bad = pl.col(column).cast(pl.Float64, strict=False).abs() > bound
    return row_check(
        bad,
        InvalidValueError,
        f"expected values of magnitude at most {shown} in column {column!r} ({why}), "
        "found {n} larger, e.g. {example}",
    )


def upper_bound_check(column: str, bound: float, why: str, advice: Parts = ()) -> Check:
    """``value <= bound`` (a definition's bound, not a finiteness one).

    ``why`` says whose bound it is; ``advice`` is said after the example (a way out).
    """
    bad = pl.col(column).cast(pl.Float64, strict=False) > bound
    return row_check(
        bad,
        InvalidValueError,
        f"expected values of at most {bound!r} in column {column!r} ({why}), "
        "found {n} larger, e.g. {example}",
        advice=advice,
    )


def rank_below_one_check(column: str) -> Check:
    """Ranks start at 1."""
    return row_check(
        pl.col(column) < 1,
        InvalidValueError,
        f"expected ranks >= 1 in column {column!r} (1 = top), found {{n}} rank(s) below 1, "
        "e.g. {example}",
    )


def nonintegral_check(column: str, dtype: pl.DataType) -> list[Check]:
    """A float rank column must hold whole numbers (NaN and ±inf included in the count)."""
    if not dtype.is_float():
        return []
    bad = ~pl.col(column).is_finite() | (pl.col(column) != pl.col(column).floor())
    return [
        row_check(
            bad,
            InvalidValueError,
            f"expected integer ranks in column {column!r}, found {{n}} non-integer value(s), "
            "e.g. {example}",
        )
    ]


def repeats_per_group(key: Sequence[str]) -> Callable[[pl.LazyFrame], pl.LazyFrame]:
    """Rows beyond the first of each ``key`` value, counted within groups of ``key[:-1]``.

    Exact (0 exactly when no key repeats, nulls counted as values), and two to three
    times cheaper than counting distinct keys over the whole frame: each group's small
    set of last-column values stays in cache.
    """
    *groups, last = key

    def count(frame: pl.LazyFrame) -> pl.LazyFrame:
        excess = (pl.len() - pl.col(last).n_unique()).alias("_fm_excess")
        if not groups:
            return frame.select(excess.cast(pl.Int64))
        per_group = frame.group_by(groups).agg(excess)
        return per_group.select(pl.col("_fm_excess").sum().cast(pl.Int64))

    return count


#: A row's run number and its run's key (see :func:`repeats_within_runs`).
_RUN = "_fm_run"
_RUN_KEY = "_fm_run_key"
#: Per row, whether a ``rising`` value fails to rise (see :func:`repeats_within_runs`).
_FALLS = "_fm_falls:"


def repeats_within_runs(
    groups: Sequence[str],
    values: Sequence[str],
    nullable: Collection[str] = (),
    *,
    rising: Collection[str] = (),
) -> Callable[[pl.LazyFrame], pl.LazyFrame]:
    """Per value column, its repeats within runs of equal ``groups`` (one-row query).

    Each column ``value`` of the one row counts the value's repeats within runs, plus
    the runs whose ``groups`` an earlier run had. A run is a stretch of consecutive rows
    with the same ``groups`` values (a user's list). The second term is 0 only when no
    two runs share their ``groups`` values, so every group's rows are one run: then the
    first term counts the rows beyond the first of each (groups, value), and otherwise
    the sum is positive and the finer screens decide. A null value counts as a value
    (a spurious repeat when a run holds two; nulls are the null checks' to report),
    except in the ``nullable`` columns, where nulls are not compared (a long table's
    unranked rows).

    Frames usually hold each list's rows together (written user by user, or from a
    group-by and explode), and then this is one streaming group-by over run numbers
    (``rle_id``), which are sorted, so no hash table of the groups is built: 1M users x
    100 rows, about 0.9 s and 90 MB against 2.6 s and 3.6 GB counting per hashed group
    (x 10 rows: 0.31 s against 0.38 s). The value columns of several checks share the
    one pass.

    A value of ``rising`` (a rank) is screened instead by whether it rises within each
    run: its first term counts the rows whose value is not above the row before in the
    same run (a null counts). 0 with 0 shared runs means no repeat (a strictly rising
    run holds each value once), and costs a comparison per row instead of a count of
    distinct values per run: lists come in rank order more often than not (a ranker
    writes them so). At 1M users the check of the ranks and items within the cutoff
    took 0.26 s at k=10 and 0.91 s at k=100 (100M rows), the items alone 0.16 s and
    0.51 s. Out of order the count is positive, spuriously, and the next screens decide.

    Runs are told apart by the ``groups`` values themselves when ``groups`` is one
    integer column, else by a 64-bit hash of them: two groups with one hash can only
    merge runs or make the second term positive, that is, make the count spuriously
    positive, never hide a repeat (a merged run of rising values holds each group's
    values in rising order).
    """

    def excess(v: str) -> pl.Expr:
        if v in rising:
            return pl.col(f"{_FALLS}{v}").sum()
        if v in nullable:
            return pl.col(v).count() - pl.col(v).n_unique() + (pl.col(v).null_count() > 0)
        return pl.len() - pl.col(v).n_unique()

    def count(frame: pl.LazyFrame) -> pl.LazyFrame:
        schema = frame.collect_schema()
        if len(groups) == 1 and schema[groups[0]].is_integer():
            key = pl.col(groups[0])
        else:
            key = pl.struct(list(groups)).hash()
        # Run numbers only grow, so telling polars they are sorted is always true; a
        # group-by on a sorted key streams through the runs in order.
        # The key computed once, in its own select (written twice in one, a hash of
        # the groups was computed twice: 1.2 s against 0.8 s over 30M rows).
        rows = frame.select(*values, key.alias(_RUN_KEY))
        run_key = pl.col(_RUN_KEY)
        same_run = run_key.eq_missing(run_key.shift(1))
        rows = rows.with_columns(
            run_key.rle_id().set_sorted().alias(_RUN),
            *(
                (same_run & ~(pl.col(v) > pl.col(v).shift(1)).fill_null(False)).alias(
                    f"{_FALLS}{v}"
                )
                for v in values
                if v in rising
            ),
        )
        per_run = rows.group_by(_RUN).agg(
            *(excess(v).alias(v) for v in values), pl.col(_RUN_KEY).first()
        )
        shared = pl.len() - pl.col(_RUN_KEY).n_unique()
        return per_run.select((pl.col(v).sum() + shared).cast(pl.Int64).alias(v) for v in values)

    return count


def duplicate_checks(
    groups: Sequence[str],
    checks: Sequence[tuple[str, str, Sequence[Part]]],
    nullable: Collection[str] = (),
    *,
    ascending: Collection[str] = (),
) -> list[Check]:
    """:func:`duplicate_check` of ``(*groups, value)`` for each ``(value, what, advice)``.

    Their first screen is one shared query (:func:`repeats_within_runs`, ``nullable`` as
    there): one pass over the frame for the checks of a list's items and of its ranks.
    A value of ``ascending`` (a rank) is screened there by whether it rises within each
    run (``rising``), and by its own count within runs next.
    """
    shared = repeats_within_runs(
        groups, [value for value, _, _ in checks], nullable, rising=ascending
    )
    out = []
    for value, what, advice in checks:
        first: tuple[Screen, ...] = (SharedScreen(shared, value),)
        if value in ascending:
            # Out of rank order: the count of distinct values within runs next.
            first += (SharedScreen(repeats_within_runs(groups, [value], nullable), value),)
        out.append(duplicate_check([*groups, value], what, advice, first_screens=first))
    return out


def duplicate_check(
    key: Sequence[str],
    what: str,
    advice: Sequence[Part] = (),
    *,
    first_screens: tuple[Screen, ...] = (),
) -> Check:
    """The columns in ``key`` identify at most one row (null keys are not compared).

    ``advice``: said after the example (how to resolve repeats). With two or more key
    columns the count within runs of equal ``key[:-1]`` runs first
    (:func:`repeats_within_runs`; ``first_screens``: the screens to run before the
    per-group count instead, e.g. that count shared with other checks, see
    :func:`duplicate_checks`), and the per-group count only when they are not 0.
    """
    dup = pl.struct(list(key)).is_duplicated() & pl.all_horizontal(
        pl.col(c).is_not_null() for c in key
    )
    screens: tuple[Screen, ...] = (repeats_per_group(key),)
    if len(key) > 1:
        *groups, last = key
        runs = first_screens or (SharedScreen(repeats_within_runs(groups, [last]), last),)
        screens = (*runs, *screens)
    return Check(
        dup.sum(),
        dup,
        DuplicateRowsError,
        f"expected one row per {what}, found {{n}} rows that repeat one, e.g. {{example}}",
        screens=screens,
        advice=tuple(advice),
    )


def _describe(row: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in row.items()) or "(no columns)"


@dataclass(frozen=True)
class Failure:
    """A failed check: which one (its position in the batch), how many rows, an example."""

    index: int
    error: type[FrameMetricsError]
    label: str
    message: str  # formatted with n= and example=
    n: int
    example: str
    more: Parts = ()

    def exception(self) -> FrameMetricsError:
        """The error to raise, its message naming the count and the example row."""
        text = self.message.format(n=self.n, example=self.example)
        return self.error(f"{self.label}: {text}", *self.more, frame=self.label)


def dump_parts(parts: Parts) -> str:
    """``parts`` as text, to travel in a frame (a partition's failures); see :func:`load_parts`.

    Examples
    --------
    >>> load_parts(dump_parts(("; pass ", Keyword("by", "model"), ", ", LeaveOut("k"))))
    ('; pass ', Keyword(name='by', value='model'), ', ', LeaveOut(name='k'))
    """
    return json.dumps(
        [p if isinstance(p, str) else [type(p).__name__, *vars(p).values()] for p in parts]
    )


#: The argument parts by class name, as :func:`dump_parts` writes them.
_PARTS: dict[str, Callable[..., Part]] = {"Keyword": Keyword, "Pass": Pass, "LeaveOut": LeaveOut}


def load_parts(text: str | None) -> Parts:
    """The parts :func:`dump_parts` wrote (none for ``None``)."""
    if not text:
        return ()
    return tuple(p if isinstance(p, str) else _PARTS[p[0]](*p[1:]) for p in json.loads(text))


def run_checks(
    frames: Sequence[CheckedFrame],
    *,
    with_queries: Sequence[pl.LazyFrame] = (),
    engine: EngineType = "auto",
) -> list[pl.DataFrame]:
    """Run every check of every frame in one batch; raise the first failure found.

    ``with_queries`` are collected in the same batch, so a result and the checks of its
    inputs share one pass over the data (polars shares common subplans in
    ``collect_all``); their frames are returned only when every check passed.
    """
    failures, results = find_failures(frames, with_queries=with_queries, engine=engine)
    if failures:
        raise failures[0].exception()
    return results


def find_failures(
    frames: Sequence[CheckedFrame],
    *,
    with_queries: Sequence[pl.LazyFrame] = (),
    engine: EngineType = "auto",
    first_only: bool = True,
) -> tuple[list[Failure], list[pl.DataFrame]]:
    """The failed checks in batch order (only the first unless ``first_only=False``).

    A distributed run finds every failure of each partition, then sums the counts of
    the same check over partitions (:class:`Failure` ``index``).
    """
    checked = [cf for cf in frames if cf.checks]
    # One query per frame for its expression counts, one per frame-level count.
    queries: list[pl.LazyFrame] = []
    slots: list[list[tuple[int, int]]] = []  # per frame, per check: (query, column)
    for cf in checked:
        firsts = [c.screens[0] if c.screens else c.count for c in cf.checks]
        row_wise = {i for i, c in enumerate(cf.checks) if c.row_wise and not c.screens}
        rows = [(i, cf.checks[i].offending) for i in sorted(row_wise)]
        exprs = [
            (i, f) for i, f in enumerate(firsts) if isinstance(f, pl.Expr) and i not in row_wise
        ]
        where: dict[int, tuple[int, int]] = {}
        if rows:
            # Only the rows some check offends (none, on valid data; a filter parquet
            # statistics can answer), each check's count over them.
            offended = cf.frame.filter(pl.any_horizontal(bad for _, bad in rows))
            queries.append(
                offended.select(
                    bad.fill_null(False).sum().cast(pl.Int64).alias(f"c{i}") for i, bad in rows
                )
            )
            where |= {i: (len(queries) - 1, col) for col, (i, _) in enumerate(rows)}
        if exprs:
            queries.append(cf.frame.select(f.cast(pl.Int64).alias(f"c{i}") for i, f in exprs))
            where |= {i: (len(queries) - 1, col) for col, (i, _) in enumerate(exprs)}
        shared: dict[int, tuple[int, list[str]]] = {}  # per shared query: (query, columns)
        for i, f in enumerate(firsts):
            if isinstance(f, SharedScreen):
                if id(f.query) not in shared:
                    query = f.query(cf.frame)
                    queries.append(query)
                    shared[id(f.query)] = (len(queries) - 1, query.collect_schema().names())
                q, names = shared[id(f.query)]
                where[i] = (q, names.index(f.column))
            elif not isinstance(f, pl.Expr):
                queries.append(_count_query(cf.frame, f))
                where[i] = (len(queries) - 1, 0)
        slots.append([where[i] for i in range(len(firsts))])
    results = pl.collect_all([*queries, *with_queries], engine=engine)
    failures: list[Failure] = []
    index = -1
    for cf, frame_slots in zip(checked, slots, strict=True):
        for check, (q, col) in zip(cf.checks, frame_slots, strict=True):
            index += 1
            n = results[q].row(0)[col] if results[q].height else 0
            for finer in [*check.screens[1:], check.count] if check.screens else []:
                if not n:
                    break
                n = _count_query(cf.frame, finer).collect(engine=engine).item()
            if n:
                example = cf.frame.filter(check.offending).select(cf.show).head(1).collect()
                shown = _describe(example.row(0, named=True)) if example.height else "(none)"
                more = check.advice + (check.explain() if check.explain is not None else ())
                failures.append(
                    Failure(index, check.error, cf.label, check.message, int(n), shown, more)
                )
                if first_only:
                    return failures, []
    return failures, results[len(queries) :]
