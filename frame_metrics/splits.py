"""The splits of the evaluation protocol as polars plans (definition sheet, section 10).

Every method labels the rows of one LazyFrame: which fold's test a row is a candidate of
(``_fm_fold``), and what the filters made of it (``_fm_drop``: kept, or dropped as a cold
user's, a cold item's or an already seen pair's). Train, test and the report are filters
and aggregates of that labelled frame, so eager and lazy input, pandas and Arrow (through
polars) and Spark and Dask partitions (the same code on each user's rows) give the same
rows. Nothing here collects: :mod:`frame_metrics.protocol` decides when.

Randomness comes only from :func:`with_seeded_hash`, a splitmix64 chain over the key columns:
fixed integer arithmetic, so for integer ids and times the split is the same on every
frame kind, row order, engine and polars version.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import polars as pl

from frame_metrics.columns import RESERVED_PREFIX

__all__ = [
    "DROP",
    "DROP_CODES",
    "FOLD",
    "GLOBAL_METHODS",
    "HASH",
    "ITEM_COLD",
    "ITEM_FIRST",
    "ITEM_ROWS",
    "METHODS",
    "MULTI_FOLD",
    "PER_USER",
    "QUOTA",
    "USER_FOLD",
    "Globals",
    "Plan",
    "SplitOptions",
    "candidates",
    "cold_items",
    "dealt_users",
    "kept_test_rows",
    "labelled",
    "mix64",
    "train_rows",
    "window_edges",
    "with_seeded_hash",
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
#: The seeded hash's column (:func:`with_seeded_hash`).
HASH: Final = f"{RESERVED_PREFIX}hash"
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


def mix64(x: int) -> int:
    """splitmix64's step on a Python integer: add the increment, then the finaliser.

    Examples
    --------
    The first output of Vigna's ``splitmix64.c`` seeded with 0:

    >>> mix64(0)
    16294208416658607535
    """
    z = (x + _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * _MUL_1) & _MASK
    z = ((z ^ (z >> 27)) * _MUL_2) & _MASK
    return z ^ (z >> 31)


def _mix_steps(name: str) -> list[pl.Expr]:
    """splitmix64's step on column ``name``, as expressions to apply one after another.

    One step per expression, each reading the column once or twice: written as one
    nested expression, each step would repeat the whole tree below it (8 copies per mix,
    8**4 for a hash of three columns), which polars evaluates copy by copy.
    """
    z = pl.col(name)
    return [
        (z + _u64(_GAMMA)).alias(name),
        (z.xor(_shifted_right(z, 30)) * _u64(_MUL_1)).alias(name),
        (z.xor(_shifted_right(z, 27)) * _u64(_MUL_2)).alias(name),
        z.xor(_shifted_right(z, 31)).alias(name),
    ]


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


def with_seeded_hash(
    frame: pl.LazyFrame, seed: int, columns: Sequence[str], schema: pl.Schema
) -> pl.LazyFrame:
    """``frame`` with the sheet's seeded 64-bit hash of ``columns`` (column ``HASH``).

    A splitmix64 chain: ``h = mix(seed)``, then ``h = mix(h xor word(c))`` for each
    column ``c`` in order, where ``mix`` is splitmix64's step (:func:`mix64`) and ``word``
    a value as 64 bits (integers themselves; see :func:`_as_u64`). Used for the order of
    ``ties="random"`` and ``order="random"`` (columns user key, item, time), for
    ``"random"`` and for dealing users into folds (the user key alone).

    Examples
    --------
    Pinned values: integer keys give these on every polars version.

    >>> schema = pl.Schema({"user": pl.Int64, "item": pl.Int64})
    >>> frame = pl.LazyFrame({"user": [1, 2], "item": [10, 10]})
    >>> with_seeded_hash(frame, 0, ["user", "item"], schema).collect()[HASH].to_list()
    [5075022953786957343, 4544264740642119646]
    >>> mix64(mix64(mix64(0) ^ 1) ^ 10)  # the same, in Python integers
    5075022953786957343
    """
    frame = frame.with_columns(_u64(mix64(seed & _MASK)).alias(HASH))
    for name in columns:
        frame = frame.with_columns(pl.col(HASH).xor(_as_u64(name, schema[name])))
        for step in _mix_steps(HASH):
            frame = frame.with_columns(step)
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


@dataclass(frozen=True)
class Globals:
    """What a split reads over every row, for a run that sees one part of the users.

    On one frame these are expressions over the whole frame. Spark and Dask partition the
    rows by user, so a partition sees each of its users whole but not the others: the
    runner computes these first (sheet section 10's values, from every partition) and a
    partition's plan reads them as literals and tables.

    ``cut``: the time method's cut; ``threshold``: the random method's k-th smallest event
    hash (None: no test row); ``end``: the largest time (time windows); ``dealt``: each
    user's fold (user_kfold, columns key + ``USER_FOLD``); ``items``: the cold-item table
    (:func:`item_tallies` summed, :func:`cold_items`).
    """

    cut: object = None
    threshold: int | None = None
    end: object = None
    dealt: pl.LazyFrame | None = None
    items: pl.LazyFrame | None = None


def round_half_up(x: pl.Expr) -> pl.Expr:
    """floor(x + 0.5), the sheet's rounding of a share of rows."""
    return (x + 0.5).floor()


def _lit(value: object, dtype: pl.DataType) -> pl.Expr:
    """A literal of the time column's type (a date for a date column, ...)."""
    return pl.lit(value).cast(dtype, strict=True)


def window_edges(
    options: SplitOptions,
    dtype: pl.DataType,
    globals_: Globals | None = None,
    largest: pl.Expr | None = None,
) -> list[pl.Expr]:
    """``edges[j]`` = end − j·window for j = 0..n_folds: window f is (edges[F−f], edges[F−f−1]].

    ``end`` is the call's or the largest time (``largest``, or the column _global joins
    in). A window given as text (``"7d"``, ``"1mo"``)
    is stepped back with ``dt.offset_by``, one window at a time, so calendar units work.
    """
    assert options.time is not None
    if options.end is not None:
        end = _lit(options.end, dtype)
    elif globals_ is not None:
        end = _lit(globals_.end, dtype)
    elif largest is not None:
        end = largest
    else:
        end = pl.col(_END)  # the largest time, joined in by _global
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

    ``labelled``: every input row with ``FOLD`` and ``DROP``; ``train(f)``: fold f's train
    rows (input columns only); ``fold_of_users``: for ``user_kfold``, each user's fold.
    """

    options: SplitOptions
    labelled: pl.LazyFrame
    columns: list[str]
    edges: list[pl.Expr] = field(default_factory=list)

    def train(self, fold: int) -> pl.LazyFrame:
        """Fold ``fold``'s train rows, with the input's columns."""
        return train_rows(self, fold)

    def test(self, fold: int | None) -> pl.LazyFrame:
        """Fold ``fold``'s kept test rows (every fold's, with ``FOLD``, when None)."""
        return kept_test_rows(self, fold)


def train_rows(plan: Plan, fold: int) -> pl.LazyFrame:
    """Fold ``fold``'s train: the rows its test did not take (time windows: up to its edge)."""
    options = plan.options
    frame = plan.labelled
    if options.method == "time_windows":
        assert options.time is not None
        edge = plan.edges[options.n_folds - fold]
        frame = frame.filter(pl.col(options.time) <= edge)
    else:
        frame = frame.filter(pl.col(FOLD).is_null() | (pl.col(FOLD) != fold))
    return frame.select(plan.columns)


def kept_test_rows(plan: Plan, fold: int | None) -> pl.LazyFrame:
    """Fold ``fold``'s kept test rows; all folds' (with ``FOLD``) when ``fold`` is None."""
    kept = pl.col(DROP) == DROP_CODES["kept"]
    if fold is None:
        return plan.labelled.filter(kept).select(*plan.columns, FOLD)
    return plan.labelled.filter(kept & (pl.col(FOLD) == fold)).select(plan.columns)


def _event_position(options: SplitOptions, schema: pl.Schema) -> pl.Expr:
    """Each row's event position within its user, 1 = first to go to test.

    Time order: the last event first (time descending, then item descending: the later
    item is the larger one; ``ties="random"``: the larger hash is the later). Random
    order: the smallest hash first. A dense rank, so repeats of an event share its place.
    """
    hashed = pl.col(HASH)
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
        frame = with_seeded_hash(frame, options.seed, options.event, schema)
    position = _event_position(options, schema)
    frame = frame.with_columns(position.alias(_EVENT))
    frame = frame.with_columns(pl.col(_EVENT).max().over(options.key).alias(_EVENTS))
    frame = frame.with_columns(_quota(options, pl.col(_EVENTS)).alias(QUOTA))
    candidate = pl.col(_EVENT).cast(pl.Int64) <= pl.col(QUOTA)
    fold = pl.col(USER_FOLD) if options.method == "user_kfold" else pl.lit(0, dtype=pl.Int64)
    return frame.with_columns(
        pl.when(candidate).then(fold).otherwise(None).cast(pl.Int64).alias(FOLD)
    )


def dealt_users(users: pl.LazyFrame, options: SplitOptions, schema: pl.Schema) -> pl.LazyFrame:
    """Each distinct user of ``users`` (the key columns) with its fold (``USER_FOLD``)."""
    return (
        with_seeded_hash(users.unique(), options.seed, options.key, schema)
        .sort([HASH, *options.key])
        .with_columns((pl.int_range(pl.len(), dtype=pl.Int64) % options.n_folds).alias(USER_FOLD))
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
    return frame.join(dealt, on=options.key, how="left", nulls_equal=True, maintain_order="left")


def _first_of_events(options: SplitOptions) -> pl.Expr:
    return pl.struct(options.event).is_first_distinct()


def _one_row(frame: pl.LazyFrame, value: pl.Expr, name: str) -> pl.LazyFrame:
    """``frame`` with the one value ``value`` (an aggregate of ``frame``) in column ``name``.

    A cross join with the one-row frame of the aggregate, not the aggregate inside a row
    expression: polars' streaming engine computes the one-row frame once and streams the
    join, where it evaluates an aggregate broadcast into rows far more slowly (8x at 5M
    rows for the time cut).
    """
    return frame.join(frame.select(value.alias(name)), how="cross")


def _global(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None
) -> pl.LazyFrame:
    zero = pl.lit(0, dtype=pl.Int64)
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
        frame = with_seeded_hash(frame, options.seed, options.event, schema)
        hashed = pl.col(HASH)
        if globals_ is not None:
            threshold: pl.Expr = pl.lit(globals_.threshold, dtype=pl.UInt64)
        else:
            # The k-th smallest hash of the events, k = round_half_up(s·n); null when k
            # is 0. An event's repeats share its hash, so the events are the distinct
            # hashes (two events whose 64-bit hashes collide would count as one: about
            # n²/2**65 of a chance, 3e-4 at 100M events).
            hashes = frame.select(hashed.unique())
            wanted = round_half_up(pl.lit(options.test_share) * pl.len().cast(pl.Float64))
            kth = hashed.sort().slice(wanted.cast(pl.Int64) - 1, 1).max()
            kth = pl.when(wanted >= 1).then(kth).alias(_CUT)
            frame = frame.join(hashes.select(kth), how="cross")
            threshold = pl.col(_CUT)
        chosen = (hashed <= threshold).fill_null(value=False)
        return frame.with_columns(pl.when(chosen).then(zero).alias(FOLD))
    # time_windows: each row's window, numbered 0 (oldest) .. n_folds − 1.
    assert options.time is not None
    if options.end is None and globals_ is None:
        frame = _one_row(frame, pl.col(options.time).max(), _END)
    edges = window_edges(options, schema[options.time], globals_)
    time = pl.col(options.time)
    folds = options.n_folds
    which: Any = pl.lit(None, dtype=pl.Int64)
    for fold in range(folds):
        inside = (time > edges[folds - fold]) & (time <= edges[folds - fold - 1])
        which = pl.when(inside).then(pl.lit(fold, dtype=pl.Int64)).otherwise(which)
    left = pl.lit(None, dtype=schema[options.time])
    for fold in range(folds):
        left = pl.when(pl.col(FOLD) == fold).then(edges[folds - fold]).otherwise(left)
    return frame.with_columns(which.alias(FOLD)).with_columns(left.alias(_TRAIN_UP_TO))


def item_tallies(candidates: pl.LazyFrame, options: SplitOptions) -> pl.LazyFrame:
    """Per item, what decides whether it is cold in a fold; partitions' tallies add up.

    Time windows: the item's earliest time (``ITEM_FIRST``; partitions' take the min). The
    other methods: the item's rows per ``FOLD`` (null: no fold's test) as ``ITEM_ROWS``
    (partitions' add up). Read by :func:`cold_items`.
    """
    if options.method == "time_windows":
        assert options.time is not None
        first = pl.col(options.time).min().alias(ITEM_FIRST)
        return candidates.group_by(options.item).agg(first)
    return candidates.group_by(options.item, FOLD).agg(pl.len().cast(pl.Int64).alias(ITEM_ROWS))


def cold_items(tallies: pl.LazyFrame, options: SplitOptions) -> pl.LazyFrame:
    """Every partition's :func:`item_tallies` made the table :func:`labelled` reads.

    Fold f's train is every row but fold f's test candidates, so an item is cold in fold
    f when all its rows are fold f's candidates: one ``FOLD`` group, and it is f.
    """
    if options.method == "time_windows":
        return tallies.group_by(options.item).agg(pl.col(ITEM_FIRST).min())
    summed = tallies.group_by(options.item, FOLD).agg(pl.col(ITEM_ROWS).sum())
    return (
        summed.group_by(options.item)
        .agg(pl.len().alias("groups"), pl.col(FOLD).first())
        .filter((pl.col("groups") == 1) & pl.col(FOLD).is_not_null())
        .select(options.item, FOLD, pl.lit(True).alias(ITEM_COLD))
    )


def _filters(
    frame: pl.LazyFrame, options: SplitOptions, globals_: Globals | None = None
) -> pl.LazyFrame:
    """Label each test candidate: kept, or dropped by the first filter that drops it."""
    candidate = pl.col(FOLD).is_not_null()
    if options.method == "time_windows":
        # Fold f's train is every row up to its left edge: a user, item or pair has a
        # train row in fold f when its earliest row is at or before that edge.
        assert options.time is not None
        time = pl.col(options.time)
        edge = pl.col(_TRAIN_UP_TO)
        cold_user = time.min().over(options.key) > edge
        if globals_ is not None and globals_.items is not None:
            frame = frame.join(globals_.items, on=options.item, how="left", nulls_equal=True)
            cold_item = pl.col(ITEM_FIRST) > edge
        else:
            cold_item = time.min().over(options.item) > edge
        seen = time.min().over([*options.key, options.item]) <= edge
    else:
        # Fold f's train is every row but fold f's candidates. A user's candidates are all
        # in one fold, so "a row outside the candidates" is per user and per pair; an item
        # is cold in fold f when all its rows are fold f's candidates.
        other = (~candidate).cast(pl.UInt32)
        if options.method in PER_USER and options.min_train >= 1:
            # min_train keeps a train row for every user: none is cold (a window saved)
            cold_user = pl.lit(value=False)
        else:
            cold_user = other.sum().over(options.key) == 0
        seen = other.sum().over([*options.key, options.item]) > 0
        if globals_ is not None and globals_.items is not None:
            on = [options.item, FOLD]
            frame = frame.join(globals_.items, on=on, how="left", nulls_equal=True)
            cold_item = pl.col(ITEM_COLD).fill_null(value=False)
        elif options.method in MULTI_FOLD:
            in_fold = candidate.cast(pl.UInt32).sum().over([options.item, FOLD])
            cold_item = pl.len().over(options.item) == in_fold
        else:  # one fold: cold when no row of the item is outside the candidates
            cold_item = other.sum().over(options.item) == 0
    code = pl.lit(DROP_CODES["kept"], dtype=pl.UInt8)
    # Written last to first so that the first filter in the sheet's order wins.
    rules = [("seen", seen), ("cold_items", cold_item), ("cold_users", cold_user)]
    for name, dropped in rules:
        if getattr(options, name) == "drop":
            code = pl.when(dropped).then(pl.lit(DROP_CODES[name], dtype=pl.UInt8)).otherwise(code)
    return frame.with_columns(pl.when(candidate).then(code).alias(DROP))


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
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals | None = None
) -> Plan:
    """Label every row of ``frame`` with its test fold (``FOLD``) and filter (``DROP``).

    ``globals_``: given when ``frame`` is one partition of the users (Spark, Dask).
    """
    columns = list(schema.names())
    work = _filters(candidates(frame, options, schema, globals_), options, globals_)
    keep = [*columns, FOLD, DROP]
    edges: list[pl.Expr] = []
    extra: list[str] = []
    if options.method == "time_windows":
        assert options.time is not None
        edges = window_edges(options, schema[options.time], globals_)
        extra = [_TRAIN_UP_TO]
        if options.end is None and globals_ is None:
            extra.append(_END)  # what train_rows' edges read
    if options.method in PER_USER:
        extra = [QUOTA]
        if options.method == "user_kfold":
            extra.append(USER_FOLD)
    return Plan(options, work.select(*keep, *extra), columns, edges)


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
