"""The splits of the evaluation protocol as polars plans (definition sheet, section 10).

Every method labels the rows of one LazyFrame: which fold's test a row is a candidate of
(``_fm_fold``), and what the filters made of it (``_fm_drop``: kept, or dropped as a cold
user's, a cold item's or an already seen pair's). Train, test and the report are filters
and aggregates of that labelled frame, so eager and lazy input, pandas and Arrow (through
polars) and Spark and Dask partitions (the same code on each user's rows) give the same
rows. Nothing here collects: :mod:`frame_metrics.protocol` decides when.

Randomness comes only from :func:`with_hash`, a splitmix64 chain over the key columns:
fixed integer arithmetic, so for integer ids and times the split is the same on every
frame kind, row order, engine and polars version.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import polars as pl

from frame_metrics.columns import RESERVED_PREFIX

__all__ = [
    "DROP",
    "DROP_CODES",
    "FOLD",
    "FOLD_COLUMN",
    "GLOBAL_METHODS",
    "HASH",
    "ITEM_COLD",
    "ITEM_FIRST",
    "ITEM_ROWS",
    "METHODS",
    "MULTI_FOLD",
    "PER_USER",
    "QUOTA",
    "REPORT_COLUMNS",
    "SIDE",
    "USER_FOLD",
    "Aggregate",
    "Globals",
    "Plan",
    "SplitOptions",
    "candidates",
    "cold_items",
    "dealt_users",
    "fold_type",
    "folds_of_rows",
    "item_counts",
    "item_tallies",
    "kept_test_rows",
    "labelled",
    "plan_of",
    "reads_end",
    "report_frame",
    "report_parts",
    "summed_tallies",
    "train_rows",
    "window_edges",
    "with_cold_items",
    "with_hash",
]

Method = Literal["last_n", "ratio", "time", "random", "user_kfold", "time_windows"]
METHODS: Final[tuple[str, ...]] = (
    "last_n",
    "ratio",
    "time",
    "random",
    "user_kfold",
    "time_windows",
)
#: Methods that take each user's last (or hashed-first) rows, under ``min_train``.
PER_USER: Final = frozenset({"last_n", "ratio", "user_kfold"})
#: Methods that put each row where one rule for everybody says.
GLOBAL_METHODS: Final = frozenset({"time", "random", "time_windows"})
#: Methods that give several folds.
MULTI_FOLD: Final = frozenset({"user_kfold", "time_windows"})

#: The fold whose test a row is a candidate of (null: no fold's test).
FOLD: Final = f"{RESERVED_PREFIX}fold"
#: What the filters made of a test candidate (null for the other rows).
DROP: Final = f"{RESERVED_PREFIX}drop"
#: The values of ``DROP``, in the sheet's order: a row several filters drop is counted
#: by the first of users, items, seen.
DROP_CODES: Final = {"kept": 0, "cold_users": 1, "cold_items": 2, "seen": 3}
#: The seeded hash's column (:func:`with_hash`).
HASH: Final = f"{RESERVED_PREFIX}hash"
_HASH: Final = HASH
_EVENT: Final = f"{RESERVED_PREFIX}event"
_EVENTS: Final = f"{RESERVED_PREFIX}events"
#: A user's number of test events (per-user methods): 0 keeps the user wholly in train.
QUOTA: Final = f"{RESERVED_PREFIX}quota"
#: Each user's fold (user_kfold).
USER_FOLD: Final = f"{RESERVED_PREFIX}user_fold"
_CANDIDATE: Final = f"{RESERVED_PREFIX}candidate"
_TRAIN_UP_TO: Final = f"{RESERVED_PREFIX}train_up_to"
_CUT: Final = f"{RESERVED_PREFIX}cut"
_END: Final = f"{RESERVED_PREFIX}end"
ITEM_FIRST: Final = f"{RESERVED_PREFIX}item_first"
ITEM_ROWS: Final = f"{RESERVED_PREFIX}item_rows"
ITEM_COLD: Final = f"{RESERVED_PREFIX}item_cold"

# splitmix64 (Steele, Lea and Flood 2014; Vigna's reference code): the increment and the
# two multipliers of its finaliser. UInt64 arithmetic in polars wraps, as the mixer needs.
_GAMMA: Final = 0x9E3779B97F4A7C15
_MUL_1: Final = 0xBF58476D1CE4E5B9
_MUL_2: Final = 0x94D049BB133111EB
_MASK: Final = (1 << 64) - 1


def _u64(value: int) -> pl.Expr:
    return pl.lit(value & _MASK, dtype=pl.UInt64)


def _shifted_right(z: pl.Expr, bits: int) -> pl.Expr:
    # Integer division of an unsigned integer by 2**bits is the logical right shift.
    return z // _u64(1 << bits)


def _mix_int(x: int) -> int:
    """splitmix64's step on a Python integer (the seed's, a constant).

    Examples
    --------
    The first output of Vigna's ``splitmix64.c`` seeded with 0:

    >>> _mix_int(0)
    16294208416658607535
    """
    z = (x + _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * _MUL_1) & _MASK
    z = ((z ^ (z >> 27)) * _MUL_2) & _MASK
    return z ^ (z >> 31)


def _as_u64(column: str, dtype: pl.DataType) -> pl.Expr:
    """A column's values as 64-bit words for the mixer.

    Integers are their two's-complement value (so 5 is 5 in Int32 and Int64 alike);
    datetimes are microseconds since the epoch (the same instant in any unit or time
    zone), dates days, durations microseconds; booleans 0 and 1. Strings and every other
    type go through ``Expr.hash`` with fixed seeds: the same on every frame kind and
    engine of one polars version, not promised across versions.
    """
    col = pl.col(column)
    if dtype == pl.UInt64:
        word = col
    elif dtype.is_integer():
        word = col.cast(pl.Int64).reinterpret(signed=False)
    elif dtype == pl.Boolean:
        word = col.cast(pl.UInt64)
    elif isinstance(dtype, pl.Datetime):
        word = col.dt.epoch("us").reinterpret(signed=False)
    elif dtype == pl.Date:
        word = col.cast(pl.Int32).cast(pl.Int64).reinterpret(signed=False)
    elif isinstance(dtype, pl.Duration):
        word = col.dt.total_microseconds().reinterpret(signed=False)
    else:
        if isinstance(dtype, pl.Categorical | pl.Enum):
            col = col.cast(pl.String)
        word = col.hash(seed=0)
    return word


FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)


def with_hash(
    frame: FrameT, seed: int, columns: Sequence[str], schema: pl.Schema, name: str = _HASH
) -> FrameT:
    """``frame`` with the sheet's seeded 64-bit hash of ``columns`` as column ``name``.

    A splitmix64 chain: ``h = mix(seed)``, then ``h = mix(h xor word(c))`` for each
    column ``c`` in order, where ``mix`` is splitmix64's step and ``word`` a value as 64
    bits (integers themselves; see :func:`_as_u64`). Used for the order of
    ``ties="random"`` and ``order="random"`` (columns user key, item, time), for
    ``"random"`` and for dealing users into folds (the user key alone).

    Each step of the mixer is one ``with_columns`` reading the step before as a column:
    written as one expression, each step would hold two copies of the one before, a tree
    of 8^k nodes for k columns (17 s for 10M rows of three columns, against 0.1 s).

    Examples
    --------
    Pinned values: integer keys give these on every polars version.

    >>> schema = pl.Schema({"user": pl.Int64, "item": pl.Int64})
    >>> frame = pl.DataFrame({"user": [1, 2], "item": [10, 10]})
    >>> with_hash(frame, 0, ["user", "item"], schema)[_HASH].to_list()
    [5075022953786957343, 4544264740642119646]
    >>> _mix_int(_mix_int(_mix_int(0) ^ 1) ^ 10)  # the same, in Python integers
    5075022953786957343
    """
    h = _u64(_mix_int(seed & _MASK))
    z = pl.col(name)
    for column in columns:
        frame = frame.with_columns(
            (h.xor(_as_u64(column, schema[column])) + _u64(_GAMMA)).alias(name)
        )
        frame = frame.with_columns((z.xor(_shifted_right(z, 30)) * _u64(_MUL_1)).alias(name))
        frame = frame.with_columns((z.xor(_shifted_right(z, 27)) * _u64(_MUL_2)).alias(name))
        frame = frame.with_columns(z.xor(_shifted_right(z, 31)).alias(name))
        h = z
    if not columns:
        frame = frame.with_columns(h.alias(name))
    return frame


@dataclass(frozen=True)
class SplitOptions:
    """A call's options, checked (by :mod:`frame_metrics.protocol`) and complete."""

    method: Method
    user: tuple[str, ...]
    item: str
    time: str | None
    n: int | None = None
    test_share: float | None = None
    at: object = None
    n_folds: int = 1
    window: object = None
    end: object = None
    order: Literal["time", "random"] = "time"
    ties: Literal["item", "random"] = "item"
    min_train: int = 1
    cold_users: Literal["drop", "keep"] = "drop"
    cold_items: Literal["drop", "keep"] = "drop"
    seen: Literal["drop", "keep"] = "drop"
    seed: int = 0

    @property
    def event(self) -> list[str]:
        """The columns that make one event: repeats of them are one event of the split."""
        return [*self.user, self.item, *([self.time] if self.time else [])]

    @property
    def key(self) -> list[str]:
        """The user key's columns."""
        return list(self.user)


def fold_type(options: SplitOptions) -> pl.DataType:
    """The type of ``FOLD`` and ``USER_FOLD`` in the labels: the smallest for the folds.

    Every row carries one (as Int64, 700 MB more at 100M rows).

    Examples
    --------
    >>> fold_type(SplitOptions("user_kfold", ("u",), "i", "t", n=1, n_folds=500))
    Int32
    """
    return pl.Int8() if options.n_folds <= 127 else pl.Int32()


@dataclass(frozen=True)
class Globals:
    """What a split reads over every row, for a run that sees one part of the users.

    On one frame these are expressions over the whole frame. Spark and Dask partition the
    rows by user, so a partition sees each of its users whole but not the others: the
    runner computes these first (sheet section 10's values, from every partition) and a
    partition's plan reads them as literals and tables.

    ``cut``: the time method's cut; ``threshold``: the random method's k-th smallest event
    hash (None: no test row); ``end``: the largest time (time windows); ``dealt``: each
    user's fold (user_kfold, columns key + ``USER_FOLD``). The cold items come after the
    labels (:func:`with_cold_items`). ``cut`` and ``end`` may be one-value Series (every
    digit of a nanosecond time kept).
    """

    cut: object = None
    threshold: int | None = None
    end: object = None
    dealt: pl.LazyFrame | None = None


@dataclass(frozen=True)
class Aggregate:
    """One value over every row that the data checks read: ``kind`` of ``columns``.

    Kinds: ``rows`` (the rows), ``nulls`` and ``nans`` (of one column), ``min`` and
    ``max`` (of one column), ``distinct`` (distinct values of the columns together). A
    list of them is one aggregate: polars runs :meth:`expr`, an engine its own (Spark,
    Dask), with the same numbers.
    """

    name: str
    kind: Literal["rows", "nulls", "nans", "min", "max", "distinct"]
    columns: tuple[str, ...] = ()

    def expr(self) -> pl.Expr:
        """The value as a polars aggregate expression.

        Examples
        --------
        >>> pl.DataFrame({"a": [1, None]}).select(Aggregate("n", "nulls", ("a",)).expr()).item()
        1
        """
        if self.kind == "rows":
            out = pl.len().cast(pl.Int64)
        elif self.kind == "distinct":
            out = pl.struct(self.columns).n_unique().cast(pl.Int64)
        else:
            column = pl.col(self.columns[0])
            out = {
                "nulls": column.null_count().cast(pl.Int64),
                "nans": column.is_nan().sum().cast(pl.Int64),
                "min": column.min(),
                "max": column.max(),
            }[self.kind]
        return out.alias(self.name)


def round_half_up(x: pl.Expr) -> pl.Expr:
    """floor(x + 0.5), the sheet's rounding of a share of rows."""
    return (x + 0.5).floor()


def _lit(value: object, dtype: pl.DataType) -> pl.Expr:
    """A literal of the time column's type (a date for a date column, ...).

    ``value`` may be a one-value Series: a value found in the data (a partitioned run's
    cut or largest time) keeps its every digit that way, where a Python ``datetime``
    would drop a nanosecond time's last three.
    """
    if isinstance(value, pl.Series):
        return pl.lit(value).first().cast(dtype, strict=True)
    return pl.lit(value).cast(dtype, strict=True)


def window_edges(
    options: SplitOptions,
    dtype: pl.DataType,
    globals_: Globals | None = None,
    largest: pl.Expr | None = None,
) -> list[pl.Expr]:
    """``edges[j]`` = end − j·window for j = 0..n_folds: window f is (edges[F−f], edges[F−f−1]].

    ``end`` is the call's or the largest time (``largest``, or the column ``_global``
    adds). A window given as text (``"7d"``, ``"1mo"``) is stepped back with
    ``dt.offset_by``, one window at a time, so calendar units work.
    """
    assert options.time is not None
    if options.end is not None:
        end = _lit(options.end, dtype)
    elif globals_ is not None and globals_.end is not None:
        end = _lit(globals_.end, dtype)
    elif largest is not None:
        end = largest
    else:
        end = pl.col(_END)  # the largest time, a column _global adds
    edges = [end]
    window = options.window
    for _ in range(options.n_folds):
        previous = edges[-1]
        if isinstance(window, str):
            edges.append(previous.dt.offset_by(f"-{window}"))
        else:
            edges.append(previous - pl.lit(window))
    return edges


@dataclass(frozen=True)
class Plan:
    """What a split computes, as lazy frames of the caller's rows (with their columns).

    Two parts, apart so that train is a filter of the input and the filters look up
    the few test candidates instead of labelling every row: ``rest``, the rows that are
    no fold's test candidate (``FOLD`` null), and ``tested``, the candidates with
    ``FOLD`` and ``DROP``; both with the work columns the report reads (``USER_FOLD``,
    the largest time the windows' edges read). ``labelled`` is the two together, every row labelled.
    """

    options: SplitOptions
    rest: pl.LazyFrame
    tested: pl.LazyFrame
    columns: list[str]
    edges: list[pl.Expr] = field(default_factory=list)
    #: The candidates before the filters' lookups (None: ``tested``): what other folds'
    #: train reads, which needs no lookup.
    held: pl.LazyFrame | None = None

    @classmethod
    def of_labelled(
        cls,
        options: SplitOptions,
        labelled: pl.LazyFrame,
        columns: list[str],
        edges: list[pl.Expr] | None = None,
    ) -> Plan:
        """The plan of rows labelled already (every row with ``FOLD`` and ``DROP``)."""
        fold = pl.col(FOLD)
        rest = labelled.filter(fold.is_null())
        return cls(options, rest, labelled.filter(fold.is_not_null()), columns, edges or [])

    @property
    def labelled(self) -> pl.LazyFrame:
        """Every row with ``FOLD`` and ``DROP`` (null for the rows that are no candidate)."""
        names = self.tested.collect_schema().names()
        rest = self.rest.with_columns(pl.lit(None, dtype=pl.UInt8).alias(DROP))
        return pl.concat([rest.select(names), self.tested])

    def train(self, fold: int) -> pl.LazyFrame:
        """Fold ``fold``'s train rows, with the input's columns."""
        return train_rows(self, fold)

    def test(self, fold: int | None) -> pl.LazyFrame:
        """Fold ``fold``'s kept test rows (every fold's, with ``FOLD``, when None)."""
        return kept_test_rows(self, fold)


def train_rows(plan: Plan, fold: int) -> pl.LazyFrame:
    """Fold ``fold``'s train: the rows its test did not take (time windows: up to its edge).

    One fold: the rows that are no candidate, as they come. user_kfold: those and the
    other folds' candidates. Time windows: every row up to the fold's left edge.
    """
    options = plan.options
    columns = plan.columns
    if options.method == "time_windows":
        assert options.time is not None
        edge = plan.edges[options.n_folds - fold]
        up_to = pl.col(options.time) <= edge
        parts = [plan.rest.filter(up_to), _held(plan).filter(up_to)]
        return pl.concat([part.select(columns) for part in parts])
    rest = plan.rest.select(columns)
    if options.method not in MULTI_FOLD:
        return rest
    others = _held(plan).filter(pl.col(FOLD) != fold).select(columns)
    return pl.concat([rest, others])


def _held(plan: Plan) -> pl.LazyFrame:
    return plan.tested if plan.held is None else plan.held


def kept_test_rows(plan: Plan, fold: int | None) -> pl.LazyFrame:
    """Fold ``fold``'s kept test rows; all folds' (with ``FOLD``) when ``fold`` is None."""
    kept = pl.col(DROP) == DROP_CODES["kept"]
    if fold is None:
        # The fold column users read is Int64 (the labels' small type is for memory).
        return plan.tested.filter(kept).select(*plan.columns, pl.col(FOLD).cast(pl.Int64))
    return plan.tested.filter(kept & (pl.col(FOLD) == fold)).select(plan.columns)


#: The column of all folds' test rows naming each row's fold.
FOLD_COLUMN: Final = "fold"
#: The report's side column in its partials: 0 train, 1 test.
SIDE: Final = f"{RESERVED_PREFIX}side"
SIDES: Final = ("train", "test")
#: A side's distinct events (the share of test events is read from them).
_SIDE_EVENTS: Final = f"{RESERVED_PREFIX}side_events"
_DROPPED: Final = tuple(f"dropped_{name}" for name in DROP_CODES if name != "kept")
#: The report's columns, in order.
REPORT_COLUMNS: Final = (
    "fold",
    "side",
    "rows",
    "users",
    "items",
    "time_min",
    "time_max",
    *_DROPPED,
    "users_only_in_train",
    "ties_across_cut",
    "test_share",
)


def report_parts(plan: Plan, folds: Sequence[int]) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """What the report reads, as parts that add up over partitions of users.

    ``stats``: per fold and side (``SIDE``) the rows, users, time range, the test rows
    each filter dropped, the users only in train, the ties across the cut and the
    side's distinct events: counts of users and of their rows, so partitions holding
    each user whole add them up (times: min and max). ``items``: the distinct
    ``(fold, SIDE, item)``, counted over every partition by :func:`item_counts`.
    :func:`report_frame` makes the report of them.
    """
    options = plan.options
    key = list(options.user)
    # The repeats of an event share its labels (placed together), so each side's
    # distinct events are counted on one row per event, found once for every fold.
    events = Plan.of_labelled(
        options,
        plan.labelled.unique(subset=options.event, keep="any"),
        plan.columns,
        plan.edges,
    )
    count = pl.len().cast(pl.Int64).alias(_SIDE_EVENTS)
    stats: list[pl.LazyFrame] = []
    items: list[pl.LazyFrame] = []
    for fold in folds:
        train = plan.train(fold)
        test = plan.test(fold)
        candidates = plan.tested.filter(pl.col(FOLD) == fold)
        train_events = events.train(fold).select(count)
        stats.append(
            pl.concat(
                [train.select(*_side_stats(options, fold, 0)), train_events], how="horizontal"
            )
        )
        if options.method in PER_USER:
            population = plan.labelled
            if options.method == "user_kfold":
                population = population.filter(pl.col(USER_FOLD) == fold)
            # A user's quota is 0 exactly when it has no candidate (positions start at 1).
            none = pl.col(FOLD).is_null().all().alias("_fm_none")
            only_train = population.group_by(key).agg(none).filter(pl.col("_fm_none"))
        else:
            only_train = (
                train.select(key)
                .unique()
                .join(candidates.select(key).unique(), on=key, how="anti", nulls_equal=True)
            )
        fold_level = [
            candidates.select(
                (pl.col(DROP) == code).sum().cast(pl.Int64).alias(f"dropped_{name}")
                for name, code in DROP_CODES.items()
                if name != "kept"
            ),
            events.tested.filter(pl.col(FOLD) == fold).select(count),
            only_train.select(pl.len().cast(pl.Int64).alias("users_only_in_train")),
        ]
        if options.time is not None:
            at = [*key, options.time]
            # Train rows at a candidate's (user, time): the candidates' few pairs are the
            # hash table the train rows are looked up in.
            moments = candidates.select(at).unique()
            tied = train.select(at).join(moments, on=at, how="semi", nulls_equal=True).unique()
            ties = candidates.select(at).join(tied, on=at, how="semi", nulls_equal=True)
            fold_level.append(ties.select(pl.len().cast(pl.Int64).alias("ties_across_cut")))
        test_stats = test.select(*_side_stats(options, fold, 1))
        stats.append(pl.concat([test_stats, *fold_level], how="horizontal"))
        for side, rows in ((0, train), (1, test)):
            items.append(
                rows.select(options.item)
                .unique()
                .select(
                    pl.lit(fold, dtype=pl.Int64).alias("fold"),
                    pl.lit(side, dtype=pl.Int8).alias(SIDE),
                    options.item,
                )
            )
    return pl.concat(stats, how="diagonal_relaxed"), pl.concat(items)


def _side_stats(options: SplitOptions, fold: int, side: int) -> list[pl.Expr]:
    time: list[pl.Expr] = []
    if options.time is not None:
        time = [
            pl.col(options.time).min().alias("time_min"),
            pl.col(options.time).max().alias("time_max"),
        ]
    return [
        pl.lit(fold, dtype=pl.Int64).alias("fold"),
        pl.lit(side, dtype=pl.Int8).alias(SIDE),
        pl.len().cast(pl.Int64).alias("rows"),
        _distinct(options.user).cast(pl.Int64).alias("users"),
        *time,
    ]


def _distinct(columns: Sequence[str]) -> pl.Expr:
    """Distinct values of ``columns`` together (a struct only for several: it costs)."""
    if len(columns) == 1:
        return pl.col(columns[0]).n_unique()
    return pl.struct(columns).n_unique()


def item_counts(items: pl.LazyFrame) -> pl.LazyFrame:
    """The distinct items of :func:`report_parts`' ``items`` per fold and side.

    Over every item's rows: partitions of the items (not of the users) add these up.
    """
    return items.unique().group_by("fold", SIDE).agg(pl.len().cast(pl.Int64).alias("items"))


def report_frame(
    stats: pl.DataFrame, items: pl.DataFrame, options: SplitOptions, schema: pl.Schema
) -> pl.DataFrame:
    """The report of every partition's :func:`report_parts` ``stats`` and ``items``.

    ``stats``: the partitions' rows stacked (with one of an empty partition, so that
    each fold and side has a row); ``items``: :func:`item_counts` of each partition of
    the items, stacked. The test share is the test events over the train and test
    events of the fold, before the filters.
    """
    sums = ["rows", "users", _SIDE_EVENTS, *_DROPPED, "users_only_in_train"]
    if options.time is not None:
        sums.append("ties_across_cut")
    extremes: list[pl.Expr] = []
    if options.time is not None:
        extremes = [pl.col("time_min").min(), pl.col("time_max").max()]
    total = (
        stats.group_by("fold", SIDE)
        .agg(pl.col(sums).sum(), *extremes)
        .join(
            items.group_by("fold", SIDE).agg(pl.col("items").sum()),
            on=["fold", SIDE],
            how="left",
        )
        .sort("fold", SIDE)
    )
    events = pl.col(_SIDE_EVENTS)
    test = pl.col(SIDE) == 1
    # This fold's train events, beside its test row.
    train_events = events.filter(~test).first().over("fold")
    share = pl.when(test).then(events / (train_events + events))
    on_test = [pl.when(test).then(pl.col(c)).alias(c) for c in (*_DROPPED, "users_only_in_train")]
    ties = (
        pl.when(test).then(pl.col("ties_across_cut"))
        if options.time is not None
        else pl.lit(None, dtype=pl.Int64)
    )
    if options.time is not None:
        time = [pl.col("time_min"), pl.col("time_max")]
    else:
        time = [pl.lit(None, dtype=pl.Null).alias(c) for c in ("time_min", "time_max")]
    frame = total.select(
        pl.col("fold"),
        pl.col(SIDE).replace_strict(dict(enumerate(SIDES)), return_dtype=pl.String).alias("side"),
        pl.col("rows"),
        pl.col("users"),
        pl.col("items").fill_null(0),
        *time,
        *on_test,
        ties.alias("ties_across_cut"),
        share.cast(pl.Float64).alias("test_share"),
    )
    if options.time is not None:
        frame = frame.with_columns(pl.col("time_min", "time_max").cast(schema[options.time]))
    return frame.select(REPORT_COLUMNS)


def _event_position(options: SplitOptions) -> pl.Expr:
    """Each row's event position within its user, 1 = first to go to test.

    Time order: the last event first (time descending, then item descending: the later
    item is the larger one; ``ties="random"``: the larger hash is the later). Random
    order: the smallest hash first. A dense rank, so repeats of an event share its place.
    The hash is the column ``HASH`` (:func:`with_hash` of the event), where read.
    """
    hashed = pl.col(_HASH)
    if options.order == "random":
        keys: list[pl.Expr] = [hashed, pl.col(options.item)]
        if options.time:
            keys.append(pl.col(options.time))
        descending = False
    else:
        assert options.time is not None
        keys = [pl.col(options.time)]
        if options.ties == "random":
            keys.append(hashed)
        keys.append(pl.col(options.item))
        descending = True
    return pl.struct(keys).rank("dense", descending=descending).over(options.key)


def _quota(options: SplitOptions, events: pl.Expr) -> pl.Expr:
    """How many of a user's events go to test: n or round_half_up(share · n_u).

    Capped so that ``min_train`` events stay in train, and never below 0.
    """
    if options.n is not None:
        wanted: pl.Expr = pl.lit(options.n, dtype=pl.Int64)
    else:
        assert options.test_share is not None
        wanted = round_half_up(pl.lit(options.test_share) * events.cast(pl.Float64)).cast(pl.Int64)
    cap = events.cast(pl.Int64) - options.min_train
    return pl.min_horizontal(wanted, cap).clip(lower_bound=0)


def _per_user(frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema) -> pl.LazyFrame:
    if options.order == "random" or options.ties == "random":
        frame = with_hash(frame, options.seed, options.event, schema).cache()
    position = _event_position(options)
    frame = frame.with_columns(position.alias(_EVENT))
    frame = frame.with_columns(pl.col(_EVENT).max().over(options.key).alias(_EVENTS))
    frame = frame.with_columns(_quota(options, pl.col(_EVENTS)).alias(QUOTA))
    candidate = pl.col(_EVENT).cast(pl.Int64) <= pl.col(QUOTA)
    fold = (
        pl.col(USER_FOLD) if options.method == "user_kfold" else pl.lit(0, dtype=fold_type(options))
    )
    return frame.with_columns(
        pl.when(candidate).then(fold).otherwise(None).cast(fold_type(options)).alias(FOLD)
    )


def dealt_users(users: pl.LazyFrame, options: SplitOptions, schema: pl.Schema) -> pl.LazyFrame:
    """Each distinct user of ``users`` (the key columns) with its fold (``USER_FOLD``)."""
    return (
        with_hash(users.unique(), options.seed, options.key, schema)
        .sort([_HASH, *options.key])
        .with_columns(
            (pl.int_range(pl.len(), dtype=pl.Int64) % options.n_folds)
            .cast(fold_type(options))
            .alias(USER_FOLD)
        )
        .drop(HASH)
    )


def _user_folds(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None
) -> pl.LazyFrame:
    """Deal users into folds by the seeded hash of the user key, like cards.

    The i-th user in hash order (ties by the key) goes to fold i mod n_folds, so fold
    sizes differ by at most one user.
    """
    if globals_ is not None and globals_.dealt is not None:
        dealt = globals_.dealt
    else:
        dealt = dealt_users(frame.select(options.key), options, schema)
    # Inner: every user is dealt (a left join took longer in the streaming engine).
    return frame.join(dealt, on=options.key, how="inner", nulls_equal=True)


def _global(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None
) -> pl.LazyFrame:
    zero = pl.lit(0, dtype=fold_type(options))
    if options.method == "time":
        assert options.time is not None
        time = pl.col(options.time)
        if options.at is not None:
            cut: pl.Expr = _lit(options.at, schema[options.time])
        elif globals_ is not None:
            cut = _lit(globals_.cut, schema[options.time])
        else:
            assert options.test_share is not None
            # The time at 0-based position floor((1 − s)·n) of the events' sorted times
            # (null for no rows).
            events = frame.select(options.event).unique()
            position = (pl.lit(1.0 - options.test_share) * pl.len().cast(pl.Float64)).floor()
            # (slice, not get: polars 2.1's streaming engine panics on get of nothing)
            at = time.sort().slice(position.cast(pl.Int64), 1).max().alias(_CUT)
            frame = frame.join(events.select(at), how="cross")
            cut = pl.col(_CUT)
        return frame.with_columns(pl.when(time >= cut).then(zero).alias(FOLD))
    if options.method == "random":
        assert options.test_share is not None
        # Cached: both sides of the threshold's cross join read the hashes (left to
        # polars, a cache of the labels above it is not shared: the lookups doubled
        # the reads of the input each).
        frame = with_hash(frame, options.seed, options.event, schema).cache()
        hashed = pl.col(_HASH)
        if globals_ is not None:
            threshold: pl.Expr = pl.lit(globals_.threshold, dtype=pl.UInt64)
        else:
            # The k-th smallest hash of the events, k = round_half_up(s·n); null when k
            # is 0. An event's repeats share its hash, so the events are the distinct
            # hashes (two events whose 64-bit hashes collide would count as one: about
            # n²/2**65 of a chance, 3e-4 at 100M events).
            # Sorted, the distinct hashes are where a hash differs from the one before
            # and the k-th is where their running count reaches k: no hash table of
            # every distinct hash (0.22 s against 0.35-0.50 s for 10M rows).
            new = f"{RESERVED_PREFIX}new"
            sorted_ = frame.select(hashed.sort()).with_columns(
                (hashed != hashed.shift(1)).fill_null(value=True).alias(new)
            )
            distinct = pl.col(new).sum().cast(pl.Float64)
            wanted = round_half_up(pl.lit(options.test_share) * distinct).cast(pl.UInt32)
            kth = hashed.filter(pl.col(new).cum_sum() == wanted).first().alias(_CUT)
            frame = frame.join(sorted_.select(kth), how="cross")
            threshold = pl.col(_CUT)
        chosen = (hashed <= threshold).fill_null(value=False)
        return frame.with_columns(pl.when(chosen).then(zero).alias(FOLD))
    # time_windows: each row's window, numbered 0 (oldest) .. n_folds − 1.
    assert options.time is not None
    if reads_end(options, globals_):
        frame = frame.with_columns(pl.col(options.time).max().alias(_END))
    edges = window_edges(options, schema[options.time], globals_)
    time = pl.col(options.time)
    folds = options.n_folds
    which: Any = pl.lit(None, dtype=fold_type(options))
    for fold in range(folds):
        inside = (time > edges[folds - fold]) & (time <= edges[folds - fold - 1])
        which = pl.when(inside).then(pl.lit(fold, dtype=fold_type(options))).otherwise(which)
    return frame.with_columns(which.alias(FOLD))


def item_tallies(candidates: pl.LazyFrame, options: SplitOptions) -> pl.LazyFrame:
    """Per item, what decides whether it is cold; partitions' tallies add up.

    ``candidates``: rows with ``FOLD`` (:func:`candidates`, or :func:`labelled`'s rows).
    Time windows: the item's earliest time (``ITEM_FIRST``; partitions' take the min).
    The other methods: the item's rows per ``FOLD`` (null: no fold's test) as
    ``ITEM_ROWS`` (partitions' add up). Read by :func:`cold_items`.
    """
    if options.method == "time_windows":
        assert options.time is not None
        first = pl.col(options.time).min().alias(ITEM_FIRST)
        return candidates.group_by(options.item).agg(first)
    return candidates.group_by(options.item, FOLD).agg(pl.len().cast(pl.Int64).alias(ITEM_ROWS))


def summed_tallies(tallies: pl.LazyFrame, options: SplitOptions) -> pl.LazyFrame:
    """:func:`item_tallies` of several partitions as one, for the items they hold whole.

    An item's rows in several partitions add up (the earliest time: the least). Of the
    other methods' items only those that may be cold stay (one ``FOLD``, not null), so
    what is left is small.
    """
    if options.method == "time_windows":
        return tallies.group_by(options.item).agg(pl.col(ITEM_FIRST).min())
    summed = tallies.group_by(options.item, FOLD).agg(pl.col(ITEM_ROWS).sum())
    return summed.filter((pl.len().over(options.item) == 1) & pl.col(FOLD).is_not_null())


def cold_items(
    tallies: pl.LazyFrame,
    options: SplitOptions,
    schema: pl.Schema,
    globals_: Globals | None = None,
) -> pl.LazyFrame:
    """The ``(item, FOLD)`` pairs of items cold in a fold, from every partition's tallies.

    Fold f's train is every row but fold f's candidates, so an item is cold in fold f
    when all its rows are fold f's candidates: one ``FOLD`` group, and it is f. Time
    windows: fold f's train is every row up to its window's left edge, so the item is
    cold in each fold whose edge is before its earliest time (``globals_.end`` or the
    call's ``end`` gives the edges). Read by :func:`with_cold_items`.
    """
    summed = summed_tallies(tallies, options)
    item = options.item
    if options.method != "time_windows":
        return summed.select(item, FOLD)
    assert options.time is not None
    edges = window_edges(options, schema[options.time], globals_)
    folds = options.n_folds
    return pl.concat(
        [
            summed.filter(pl.col(ITEM_FIRST) > edges[folds - fold]).select(
                item, pl.lit(fold, dtype=fold_type(options)).alias(FOLD)
            )
            for fold in range(folds)
        ]
    )


def with_cold_items(labelled: pl.LazyFrame, cold: pl.LazyFrame, item: str) -> pl.LazyFrame:
    """Labelled rows of a partition of users with the cold-item filter applied.

    ``labelled``: :func:`labelled`'s rows with ``cold_items="keep"``; ``cold``:
    :func:`cold_items` over every partition. A candidate kept or dropped as already seen
    whose item is cold in its fold is dropped as a cold item (the sheet's order: users,
    items, seen); a cold user's row stays counted as one.
    """
    flagged = cold.select(item, FOLD, pl.lit(True).alias(ITEM_COLD))
    joined = labelled.join(
        flagged, on=[item, FOLD], how="left", nulls_equal=True, maintain_order="left"
    )
    code = pl.col(DROP)
    movable = code.is_in([DROP_CODES["kept"], DROP_CODES["seen"]])
    # An untyped literal takes the column's integer type (UInt8 here, Int8 on Dask's rows).
    return joined.with_columns(
        pl.when(pl.col(ITEM_COLD).fill_null(value=False) & movable)
        .then(pl.lit(DROP_CODES["cold_items"]))
        .otherwise(code)
        .alias(DROP)
    ).drop(ITEM_COLD)


_FIRST_OF: Final = {
    "user": f"{RESERVED_PREFIX}user_first",
    "item": f"{RESERVED_PREFIX}item_first_row",
    "pair": f"{RESERVED_PREFIX}pair_first",
}
_FOUND: Final = {
    "user": f"{RESERVED_PREFIX}user_in_rest",
    "item": f"{RESERVED_PREFIX}item_in_rest",
    "pair": f"{RESERVED_PREFIX}pair_in_rest",
}
_FOLDS_OF_ITEM: Final = f"{RESERVED_PREFIX}item_folds"
#: The filters in the sheet's order: a row several drop is counted by the first.
_RULES: Final = ("cold_users", "cold_items", "seen")


def _looked_up(
    tested: pl.LazyFrame,
    candidates: pl.LazyFrame,
    rows: pl.LazyFrame,
    on: list[str],
    found: pl.Expr | None,
    name: str,
) -> pl.LazyFrame:
    """``tested`` with ``name``: ``found`` over the ``rows`` of each one's ``on`` values.

    ``tested`` is ``candidates`` with lookups joined already: the keys are read from
    ``candidates`` (read from ``tested``, each lookup would read the ones before it
    twice, and polars computes such nested branches again: 2^k reads of the input).
    ``found`` is an aggregate (None: True where there is a row); null where the
    candidate's values have no row. For several columns (pairs) the candidates' values
    are the small side: ``rows`` is cut to them by a semi join (a hash table of the
    candidates' keys, the many rows streamed past it) before the group-by.
    """
    if len(on) == 1:
        # One column's distinct values are few (users, items): grouping every row is
        # cheaper than cutting them first (0.04 s against 0.09 s for 8M rows).
        cut = rows
    else:
        # (A semi join builds its hash table of the right side's distinct keys itself.)
        cut = rows.join(candidates.select(on), on=on, how="semi", nulls_equal=True)
    if found is None:
        table = cut.unique().with_columns(pl.lit(value=True).alias(name))
    else:
        table = cut.group_by(on).agg(found.alias(name))
    # Row order not kept: ordered, the join took 3.6x as long (0.52 s against 0.14 s for
    # 1.4M candidates); polars' own joins do not keep it either by default.
    return tested.join(table, on=on, how="left", nulls_equal=True)


def _filters(
    base: pl.LazyFrame,
    rest: pl.LazyFrame,
    candidates: pl.LazyFrame,
    options: SplitOptions,
    edges: list[pl.Expr],
) -> pl.LazyFrame:
    """The test ``candidates`` of ``base`` (every row with ``FOLD``), each with ``DROP``.

    ``rest``: the rows of ``base`` that are no candidate. ``DROP``: kept, or dropped by
    the first filter that drops it. Looked up with joins of the candidates' users,
    items and pairs against the rows, not window functions over every row. On a partition of the users (Spark, Dask) the cold
    items, which need every user's rows, are left to :func:`with_cold_items` (the run
    labels with ``cold_items="keep"``).
    """
    key, item = options.key, options.item
    pair = [*key, item]
    fold = pl.col(FOLD)
    tested = candidates
    wanted = {name for name in _RULES if getattr(options, name) == "drop"}
    lookups = (("cold_users", key, "user"), ("cold_items", [item], "item"), ("seen", pair, "pair"))
    if options.method == "time_windows":
        # Fold f's train is every row up to its left edge: a user, item or pair has a
        # train row in fold f when its earliest row is at or before that edge.
        assert options.time is not None
        # Each candidate's train edge, on the candidates only (a column of every row
        # held 8 bytes a row more in the labels).
        n_folds = options.n_folds
        left = pl.lit(None, dtype=base.collect_schema()[options.time])
        for f in range(n_folds):
            left = pl.when(fold == f).then(edges[n_folds - f]).otherwise(left)
        tested = tested.with_columns(left.alias(_TRAIN_UP_TO))
        rows = base.select(*pair, options.time)
        first = pl.col(options.time).min()
        for name, on, what in lookups:
            if name in wanted:
                tested = _looked_up(tested, candidates, rows, on, first, _FIRST_OF[what])
        edge = pl.col(_TRAIN_UP_TO)
        cold_user = pl.col(_FIRST_OF["user"]) > edge
        cold_item = pl.col(_FIRST_OF["item"]) > edge
        seen = pl.col(_FIRST_OF["pair"]) <= edge
    else:
        # Fold f's train is every row but fold f's candidates. A user's candidates are all
        # in one fold, so a user or pair is in train when it has a row that is no
        # candidate; an item when it has such a row or candidates in two folds.
        if options.method in PER_USER and options.min_train >= 1:
            # min_train keeps a train row for every user: none is cold (a lookup saved)
            wanted.discard("cold_users")
        for name, on, what in lookups:
            if name in wanted:
                tested = _looked_up(tested, candidates, rest.select(on), on, None, _FOUND[what])
        cold_user = pl.col(_FOUND["user"]).is_null()
        cold_item = pl.col(_FOUND["item"]).is_null()
        seen = pl.col(_FOUND["pair"]).is_not_null()
        if options.method in MULTI_FOLD and "cold_items" in wanted:
            folds = candidates.group_by(item).agg(fold.n_unique().alias(_FOLDS_OF_ITEM))
            tested = tested.join(folds, on=item, how="left", nulls_equal=True)
            cold_item = cold_item & (pl.col(_FOLDS_OF_ITEM) == 1)
    dropped = {"cold_users": cold_user, "cold_items": cold_item, "seen": seen}
    code = pl.lit(DROP_CODES["kept"], dtype=pl.UInt8)
    # Written last to first so that the first filter in the sheet's order wins.
    for name in reversed(_RULES):
        if name in wanted:
            drop = pl.lit(DROP_CODES[name], dtype=pl.UInt8)
            code = pl.when(dropped[name]).then(drop).otherwise(code)
    names = base.collect_schema().names()
    return tested.select(*names, code.alias(DROP))


def candidates(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None = None
) -> pl.LazyFrame:
    """Every row with ``FOLD``: the fold whose test it is a candidate of (null: none)."""
    if options.method in PER_USER:
        if options.method == "user_kfold":
            frame = _user_folds(frame, options, schema, globals_)
        return _per_user(frame, options, schema)
    return _global(frame, options, schema, globals_)


def labelled(
    frame: pl.LazyFrame,
    options: SplitOptions,
    schema: pl.Schema,
    globals_: Globals | None = None,
    guard: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None,
) -> Plan:
    """Label every row of ``frame`` with its test fold (``FOLD``) and filter (``DROP``).

    ``globals_``: given when ``frame`` is one partition of the users (Spark, Dask), or
    the values a caller found already (time windows' largest time). ``guard``: a filter
    of every row once it has its fold (the data checks of a LazyFrame), which both
    parts read.
    """
    base = folds_of_rows(frame, options, schema, globals_)
    if guard is not None:
        base = guard(base)
    # Both parts and the filters' lookups read the labels: computed once. (Polars
    # shares only identical branches by itself, and these are filtered differently.)
    return plan_of(base.cache(), options, schema, globals_)


def folds_of_rows(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None = None
) -> pl.LazyFrame:
    """Every row of ``frame`` with its input columns, ``FOLD`` and the plan's work columns.

    The work columns are what :func:`plan_of` reads: ``USER_FOLD`` (user_kfold), the
    largest time (time windows ending there, :func:`reads_end`).
    """
    extra: list[str] = []
    if reads_end(options, globals_):
        extra = [_END]  # what the windows' edges read
    if options.method == "user_kfold":
        extra = [USER_FOLD]
    columns = list(schema.names())
    return candidates(frame, options, schema, globals_).select(*columns, FOLD, *extra)


def plan_of(
    base: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None = None
) -> Plan:
    """The :class:`Plan` of :func:`folds_of_rows`' rows: its two parts are filters of them."""
    edges: list[pl.Expr] = []
    if options.method == "time_windows":
        assert options.time is not None
        edges = window_edges(options, schema[options.time], globals_)
    fold = pl.col(FOLD)
    rest, held = base.filter(fold.is_null()), base.filter(fold.is_not_null())
    tested = _filters(base, rest, held, options, edges)
    return Plan(options, rest, tested, list(schema.names()), edges, held)


def reads_end(options: SplitOptions, globals_: Globals | None = None) -> bool:
    """Whether the split's windows end at the largest time, not yet known as a value.

    Time windows without ``end``, when ``globals_`` does not hold the largest time: the
    plan computes it (the column ``_END``), and a caller that has it can pass it.
    """
    no_end = options.end is None and (globals_ is None or globals_.end is None)
    return options.method == "time_windows" and no_end


def description(options: SplitOptions) -> str:
    """The split in words, for the report's heading.

    Examples
    --------
    >>> description(SplitOptions("last_n", ("user",), "item", "ts", n=1))
    "last_n: each user's last 1 event (by 'ts', ties by item) is test"
    """
    order = (
        "by the seeded hash"
        if options.order == "random"
        else f"by {options.time!r}, ties by "
        + ("the seeded hash" if options.ties == "random" else "item")
    )
    share = _share(options.test_share)
    if options.method == "time":
        rule = (
            f"rows with {options.time} >= {options.at!r} are test"
            if options.at is not None
            else f"the latest {share} of events by {options.time!r} are test"
        )
    elif options.method == "user_kfold":
        each = f"last {options.n}" if options.n is not None else f"last {share}"
        rule = f"{options.n_folds} folds of users; each user's {each} ({order}) is test"
    elif options.method == "time_windows":
        ending = "the largest time" if options.end is None else repr(options.end)
        rule = f"{options.n_folds} windows of {options.window!r} ending at {ending}"
    elif options.method == "last_n":
        many = options.n != 1
        rule = (
            f"each user's last {options.n} event{'s' if many else ''} ({order}) "
            f"{'are' if many else 'is'} test"
        )
    elif options.method == "ratio":
        rule = f"each user's last {share} of events ({order}) are test"
    else:
        rule = f"{share} of events, by the seeded hash, are test"
    return f"{options.method}: {rule}"


def _share(share: float | None) -> str:
    return "" if share is None else f"{100 * share:g}%"


def is_temporal(dtype: pl.DataType) -> bool:
    """Whether ``dtype`` orders as a time column may (datetime, date, time, duration)."""
    return dtype.is_temporal()


def orderable(dtype: pl.DataType) -> bool:
    """Whether a time column of ``dtype`` is accepted: numbers and temporal types."""
    return dtype.is_numeric() or dtype.is_temporal()


def window_fits(window: object, dtype: pl.DataType) -> str | None:
    """Why ``window`` does not suit a time column of ``dtype`` (None when it does)."""
    why: str | None = None
    if isinstance(window, bool):
        why = "expected a duration or a number, got a bool"
    elif dtype.is_numeric():
        ok = isinstance(window, int | float) and math.isfinite(window) and window > 0
        why = None if ok else "expected a positive number in the time column's unit"
    elif isinstance(window, dt.timedelta):
        why = None if window > dt.timedelta(0) else "expected a positive duration"
    elif isinstance(window, str):
        try:
            pl.select(pl.lit(dt.datetime(2000, 1, 1)).dt.offset_by(f"-{window}"))
        except Exception:  # polars says why in its own words; we say what we take
            why = "expected a duration such as '7d', '12h' or '1mo' (polars' offset_by)"
    else:
        why = "expected a datetime.timedelta or a duration string such as '7d'"
    return why
