"""``fm.split`` on Spark and Dask: the polars plan of :mod:`frame_metrics.splits` per partition.

The rows are partitioned by user key, so a partition holds each of its users whole; one
pass runs :func:`~frame_metrics.splits.labelled` on each (the same polars code as on one
frame) and the engine keeps its rows. What a partition cannot see is computed by the
engine over every row, and only small results reach the driver:

- **before the labels**: ``user_kfold``'s folds of users (the distinct users, dealt on
  the driver by :func:`~frame_metrics.splits.dealt_users`), ``time_windows``' largest
  time, and ``random``'s threshold or ``time``'s cut with a share: exact order
  statistics of every partition's distinct events. A first pass brings each
  partition's histogram and its events in a window around where the value should be
  (:func:`_window` for the uniform hashes, :func:`_time_window` around the partition's
  own quantile); when every window holds it, the driver counts up to it, else
  histogram rounds narrow it down (:func:`_kth`);
- **after them**: each partition's summary (the data checks' values and its tallies
  per item, :class:`Tally`), reduced by the engine (Dask reads its kept partitions;
  Spark's labelling pass writes the summary as rows after each partition's rows, cached
  with them and read by their mark); the items whose
  rows are all one fold's test candidates (time windows: first seen after a fold's
  edge) are cold, and a join with that small table applies the filter
  (:func:`~frame_metrics.splits.with_cold_items`; Spark's join says the same).

On Spark the labelling is the one pass through Python for ``last_n``, ``ratio``,
``user_kfold``, ``time`` at a time and ``time_windows``; ``random`` and ``time`` with a
share read the rows once more first (more if their windows miss). Train, test and every
fold's test are filters of the kept rows (:class:`Condition`), frames of the input's
kind; the report is one more pass over them, when asked. The engines' side is
:class:`Parts` and :class:`Labelled` (:mod:`frame_metrics.distributed.spark`,
:mod:`frame_metrics.distributed.dask`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import polars as pl

from frame_metrics import splits
from frame_metrics.columns import RESERVED_PREFIX
from frame_metrics.splits import DROP, FOLD, SIDE, Aggregate, Globals, Plan, SplitOptions

__all__ = [
    "BINS",
    "FETCH",
    "FROM",
    "Condition",
    "DistributedSides",
    "Labelled",
    "Parts",
    "Tally",
    "added_up",
    "conform",
    "run",
]

PartFn = Callable[[pl.DataFrame], pl.DataFrame]

#: Bins of one histogram round: partitions x 4096 rows reach the driver per round.
BINS: Final = 4096
#: A bin of at most this many events is fetched whole (its distinct values, counted).
FETCH: Final = 1 << 17
#: Rounds of histograms before a bin is fetched whatever its size (each round narrows
#: the range around the wanted rank to about one bin of every partition's histogram).
_ROUNDS: Final = 8

#: The first fold whose train holds a row (time windows; ``n_folds``: none).
FROM: Final = f"{RESERVED_PREFIX}from"
#: Which kind of row a pass's row is (see the codes below).
_WHAT: Final = f"{RESERVED_PREFIX}what"
_CHECK, _BIN, _STATS, _ITEMS, _WINDOW = 0, 1, 2, 3, 4
#: ``random``'s window around the expected threshold, in standard deviations of the
#: k-th smallest of a partition's events' hashes (uniform; the whole frame's, with more
#: events, vary less): the first pass brings the hashes inside, about
#: 2 * 12 * sqrt(s (1 - s) n) of a partition's n events.
_SPREAD: Final = 12.0
#: ``time``'s window around a partition's own quantile, in standard deviations of a
#: quantile of its users' events (:func:`_time_window`).
_TIME_SPREAD: Final = 8.0
#: The most events a partition's time window brings (16 bytes each): at 10M rows Spark
#: merges 16 shuffle partitions into 3, each window then ~240,000 events.
_WINDOW_MOST: Final = 1 << 21
_HASH: Final = splits.HASH
_KEY: Final = f"{RESERVED_PREFIX}key"
_VALUE: Final = f"{RESERVED_PREFIX}value"
_LOW: Final = f"{RESERVED_PREFIX}low"
_HIGH: Final = f"{RESERVED_PREFIX}high"
_COUNT: Final = f"{RESERVED_PREFIX}count"
_BELOW: Final = f"{RESERVED_PREFIX}below"
_BIN_ID: Final = f"{RESERVED_PREFIX}bin"
_EVENTS: Final = f"{RESERVED_PREFIX}n_events"


# --------------------------------------------------------------------------- the engine's side


class Parts(Protocol):
    """One call's rows, partitioned by user key by the engine (an adapter's).

    A partition holds each of its users whole. ``distinct`` and ``largest`` are the
    engine's own aggregates; ``run`` and ``label`` run polars on each partition.
    """

    def run(
        self,
        fn: PartFn,
        meta: pl.DataFrame,
        columns: Sequence[str],
        *,
        regroup: str | None = None,
        combine: PartFn | None = None,
    ) -> pl.DataFrame:
        """``fn`` on each partition's ``columns`` (``meta``: its result), stacked here.

        With ``regroup`` (a column), the engine first moves the results so that each of
        its values is in one place, and ``combine`` runs there.
        """
        ...

    def distinct(self, columns: Sequence[str]) -> pl.DataFrame:
        """The distinct values of ``columns``, here."""
        ...

    def largest(self, column: str) -> pl.Series:
        """The largest value of ``column``, as a one-value Series."""
        ...

    def label(self, fn: PartFn, meta: pl.DataFrame, tally: Tally) -> Labelled:
        """``fn``'s rows of every partition, kept by the engine.

        ``tally``: what :meth:`Labelled.summary` reads of them.
        """
        ...


@dataclass(frozen=True)
class Tally:
    """What :meth:`Labelled.summary` reads over the labelled rows.

    ``aggregates``: the data checks' (no ``distinct``); ``item``: the item column;
    ``time``: time windows' time column (the tallies are every item's earliest time),
    else None (the tallies are the items whose rows all have one fold).
    """

    aggregates: tuple[Aggregate, ...]
    item: str
    time: str | None

    def checks(self, part: pl.DataFrame) -> pl.DataFrame:
        """The partition's values of the aggregates (one row; :func:`added_up` adds them)."""
        return part.select(a.expr() for a in self.aggregates)

    def items(self, labelled: pl.DataFrame) -> pl.DataFrame:
        """A partition's tallies per item: its one fold, or its earliest time.

        ``(item, FOLD)``: the one fold of all the item's rows, or -1; with ``time``,
        ``(item, ITEM_FIRST)``: its earliest time. Every item is one row, whatever its
        rows: a partition's -1 makes the item not cold anywhere (items of one fold: the
        same fold in every partition).
        """
        by = labelled.group_by(self.item)
        if self.time is not None:
            return by.agg(pl.col(self.time).min().alias(splits.ITEM_FIRST))
        fold = pl.col(FOLD)
        one = pl.when(fold.min() == fold.max()).then(fold.min()).otherwise(-1)
        return by.agg(one.alias(FOLD))

    def cold_candidates(self, items: pl.DataFrame) -> pl.DataFrame:
        """Partitions' :meth:`items` brought together.

        What :func:`frame_metrics.splits.cold_items` reads: the items of one fold (>= 0)
        in every partition; with ``time``, every item's earliest time.
        """
        by = items.group_by(self.item)
        if self.time is not None:
            return by.agg(pl.col(splits.ITEM_FIRST).min())
        fold = pl.col(FOLD)
        one = by.agg(fold.min().alias("lo"), fold.max().alias("hi"))
        return one.filter((pl.col("lo") == pl.col("hi")) & (pl.col("lo") >= 0)).select(
            self.item, pl.col("lo").alias(FOLD)
        )


class Labelled(Protocol):
    """The labelled rows kept by the engine, partitioned as they were labelled."""

    def summary(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The tally's checks over every row (one row) and its cold candidates.

        The candidates as :meth:`Tally.cold_candidates` gives them.
        """
        ...

    def use_cold(self, cold: pl.DataFrame) -> None:
        """From now on, the rows with the cold-item filter of ``cold`` applied."""
        ...

    def run(
        self,
        fn: PartFn,
        meta: pl.DataFrame,
        columns: Sequence[str],
        *,
        regroup: str | None = None,
        combine: PartFn | None = None,
    ) -> pl.DataFrame:
        """:meth:`Parts.run` on the labelled rows."""
        ...

    def rows(
        self, conditions: Sequence[Condition], columns: Sequence[str], fold_as: str | None
    ) -> Any:
        """The rows meeting every condition, as a frame of the engine (lazy)."""
        ...

    def release(self) -> None:
        """Drop the kept rows now (the call failed)."""
        ...


@dataclass(frozen=True)
class Condition:
    """A test on one integer column of the labelled rows: ``column op value``."""

    column: str
    op: str  # "==", "!=" or "<="
    value: int


def conform(frame: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``meta``'s columns and dtypes (a missing column null).

    A partition's result may lack a kind of row; the engine needs one schema for every
    partition.
    """
    return frame.select(
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(d).alias(c)
        for c, d in meta.schema.items()
    )


def added_up(rows: pl.DataFrame, aggregates: Sequence[Aggregate]) -> pl.DataFrame:
    """Partitions' values of ``aggregates`` as the whole frame's (one row).

    Counts add up (``distinct`` too: it is only asked of the user key, and a partition
    holds each of its users whole); minima and maxima are the least and the largest.
    """
    ops = {"min": pl.Expr.min, "max": pl.Expr.max}
    return rows.select(
        ops.get(a.kind, pl.Expr.sum)(pl.col(a.name)).cast(rows.schema[a.name]).alias(a.name)
        for a in aggregates
    )


def _as_wire(frame: pl.DataFrame) -> pl.DataFrame:
    """Our columns in types Spark carries: it has no unsigned integers.

    64-bit hashes travel as their bits in Int64 (:func:`_from_wire` reads them back);
    smaller unsigned counts are widened. The caller's columns are left as they are
    (a Spark frame has none of these types).
    """
    ours = {c: d for c, d in frame.schema.items() if c.startswith(RESERVED_PREFIX)}
    return frame.with_columns(
        pl.col(c).reinterpret(signed=True) if d == pl.UInt64 else pl.col(c).cast(pl.Int64)
        for c, d in ours.items()
        if d.is_unsigned_integer()
    )


def _from_wire(series: pl.Series) -> pl.Series:
    out: pl.Series = series.cast(pl.Int64).reinterpret(signed=False)
    return out


# --------------------------------------------------------------------------- keys for order statistics


def _order_key(values: pl.Series) -> pl.Series:
    """Integers ordered as ``values``: the physical value; a float's bits, flipped.

    IEEE floats' bits, read as signed integers, order as the floats for non-negative
    values and backwards for negative ones: flipping all but the sign bit of the
    negative ones makes one order (the data checks refused NaN first).
    """
    if values.dtype.is_float():
        import numpy as np

        bits = values.cast(pl.Float64).to_numpy().view(np.int64)
        flipped = np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)
        out: pl.Series = pl.Series(values.name, flipped).cast(pl.Int128)
    else:
        out = values.to_physical().cast(pl.Int128)
    return out


def _events(part: pl.DataFrame, options: SplitOptions, schema: pl.Schema) -> pl.DataFrame:
    """The partition's distinct events as ``(_KEY, _VALUE)``: what is ranked.

    ``random``: the events' seeded hashes; ``time``: their times.
    """
    if options.method == "random":
        # The events are their distinct hashes (as on one frame): one unique of a
        # 64-bit column, not of the event's columns and then a hash.
        hashed = splits.with_hash(part.select(options.event), options.seed, options.event, schema)
        values = hashed.get_column(_HASH).unique()
    else:
        assert options.time is not None
        values = part.select(options.event).unique().get_column(options.time)
    return pl.DataFrame({_KEY: _order_key(values), _VALUE: values})


def _within(events: pl.DataFrame, low: int | None, high: int | None) -> pl.DataFrame:
    if low is None or high is None:
        return events
    key = pl.col(_KEY)
    return events.filter((key >= pl.lit(low, pl.Int128)) & (key <= pl.lit(high, pl.Int128)))


def _histogram(events: pl.DataFrame, low: int | None, high: int | None) -> pl.DataFrame:
    """The events in [low, high] in :data:`BINS` bins over their own range, and those below.

    Each bin gives its events and its smallest and largest value: partitions' bins need
    not line up, the driver bounds the rank from them (:func:`_bounds`). One row gives
    the events below ``low`` (``_BELOW``).
    """
    key = pl.col(_KEY)
    below = 0 if low is None else events.filter(key < pl.lit(low, pl.Int128)).height
    inside = _within(events, low, high)
    lo, hi = inside.select(key.min().alias("lo"), key.max().alias("hi")).row(0)
    start = 0 if lo is None else int(lo)
    width = 1 if lo is None else -(-(int(hi) - start + 1) // BINS)
    bins = inside.group_by(
        ((key - pl.lit(start, pl.Int128)) // pl.lit(width, pl.Int128)).alias(_BIN_ID)
    ).agg(
        pl.len().cast(pl.Int64).alias(_COUNT),
        pl.col(_VALUE).min().alias(_LOW),
        pl.col(_VALUE).max().alias(_HIGH),
    )
    first = pl.DataFrame({_BELOW: [below]}, schema={_BELOW: pl.Int64})
    return _as_wire(pl.concat([first, bins.drop(_BIN_ID)], how="diagonal_relaxed"))


def _histogram_pass(
    part: pl.DataFrame,
    options: SplitOptions,
    schema: pl.Schema,
    low: int | None,
    high: int | None,
) -> pl.DataFrame:
    return _histogram(_events(part, options, schema), low, high)


def _fetch_pass(
    part: pl.DataFrame, options: SplitOptions, schema: pl.Schema, low: int, high: int
) -> pl.DataFrame:
    """The events in [low, high] as (value, count), and how many are below ``low``."""
    events = _events(part, options, schema)
    below = events.filter(pl.col(_KEY) < pl.lit(low, pl.Int128)).height
    values = _within(events, low, high).group_by(_VALUE).agg(pl.len().cast(pl.Int64).alias(_COUNT))
    first = pl.DataFrame({_BELOW: [below]}, schema={_BELOW: pl.Int64})
    return _as_wire(pl.concat([first, values], how="diagonal_relaxed"))


def _values(series: pl.Series, dtype: pl.DataType) -> pl.Series:
    """Values back from the wire: hashes were sent as Int64 bits."""
    return _from_wire(series) if dtype == pl.UInt64 else series


def _bounds(bins: pl.DataFrame, wanted: int) -> tuple[int, int, int]:
    """Keys ``[low, high]`` holding the ``wanted``-th event, and at most how many are inside.

    ``bins``: (``_KEY`` of the smallest value, of the largest, ``_COUNT``) of every
    partition's bins. At most F_hi(x) events (those of the bins starting at or below x)
    and at least F_lo(x) (of the bins ending at or below x) are at or below x, so the
    wanted one is at least the first bin start where F_hi reaches ``wanted`` and at most
    the first bin end where F_lo does.
    """
    by_low = bins.sort(_LOW).with_columns(pl.col(_COUNT).cum_sum().alias("cum"))
    low = int(by_low.filter(pl.col("cum") >= wanted).get_column(_LOW)[0])
    by_high = bins.sort(_HIGH).with_columns(pl.col(_COUNT).cum_sum().alias("cum"))
    high = int(by_high.filter(pl.col("cum") >= wanted).get_column(_HIGH)[0])
    inside = bins.filter((pl.col(_LOW) <= high) & (pl.col(_HIGH) >= low))
    return low, high, int(inside.get_column(_COUNT).sum())


def _kth(
    parts: Parts,
    options: SplitOptions,
    schema: pl.Schema,
    wanted: int,
    bins: pl.DataFrame,
    dtype: pl.DataType,
) -> pl.Series:
    """The ``wanted``-th smallest (1-based) event value, exactly: a one-value Series.

    ``bins``: the first pass's histograms (:func:`_histogram` of every partition). Each
    round narrows the keys to a range holding the wanted event (:func:`_bounds`); once
    at most :data:`FETCH` events are inside (or after :data:`_ROUNDS` rounds), one pass
    brings their distinct values with their counts, and the driver counts up to it.
    """
    columns = list(options.event)
    for round_ in range(_ROUNDS + 1):
        # The rank among the events from ``low`` on: ``_BELOW`` counts those below it.
        rank = wanted - int(bins.get_column(_BELOW).fill_null(0).sum())
        counted = bins.filter(pl.col(_COUNT).is_not_null())
        keyed = pl.DataFrame(
            {
                _LOW: _key_of(counted.get_column(_LOW), dtype),
                _HIGH: _key_of(counted.get_column(_HIGH), dtype),
                _COUNT: counted.get_column(_COUNT),
            }
        )
        low, high, inside = _bounds(keyed, rank)
        if inside <= FETCH or low == high or round_ == _ROUNDS:
            break
        fn = functools.partial(_histogram_pass, options=options, schema=schema, low=low, high=high)
        bins = parts.run(fn, _histogram_meta(dtype), columns)
    fetch = functools.partial(_fetch_pass, options=options, schema=schema, low=low, high=high)
    meta = _as_wire(pl.DataFrame(schema={_BELOW: pl.Int64, _VALUE: dtype, _COUNT: pl.Int64}))
    fetched = parts.run(fetch, meta, columns)
    rank = wanted - int(fetched.get_column(_BELOW).fill_null(0).sum())
    counted = fetched.filter(pl.col(_COUNT).is_not_null())
    values = pl.DataFrame(
        {_VALUE: _values(counted.get_column(_VALUE), dtype), _COUNT: counted.get_column(_COUNT)}
    )
    ordered = (
        values.group_by(_VALUE)
        .agg(pl.col(_COUNT).sum())
        .sort(_VALUE)
        .with_columns(pl.col(_COUNT).cum_sum().alias("cum"))
    )
    return ordered.filter(pl.col("cum") >= rank).get_column(_VALUE).head(1)


def _key_of(values: pl.Series, dtype: pl.DataType) -> pl.Series:
    return _order_key(_values(values, dtype))


def _histogram_meta(dtype: pl.DataType) -> pl.DataFrame:
    schema: dict[str, Any] = {_BELOW: pl.Int64, _COUNT: pl.Int64, _LOW: dtype, _HIGH: dtype}
    return _as_wire(pl.DataFrame(schema=schema))


# --------------------------------------------------------------------------- the passes


def _bad(part: pl.DataFrame, options: SplitOptions, schema: pl.Schema) -> bool:
    """Whether the partition has rows the data checks refuse (null keys or times, NaN).

    Such rows are not labelled; the checks raise after the pass.
    """
    bad = [pl.col(c).is_null().any() for c in options.event]
    if options.time is not None and schema[options.time].is_float():
        bad.append(pl.col(options.time).is_nan().any())
    return bool(part.select(pl.any_horizontal(bad)).item())


def _first_pass(
    part: pl.DataFrame,
    options: SplitOptions,
    schema: pl.Schema,
    aggregates: Sequence[Aggregate],
) -> pl.DataFrame:
    """``random``'s and ``time``'s first pass: the checks, the events, a histogram.

    ``random`` also brings the hashes in a window around the expected threshold
    (:func:`_window`).
    """
    checked = part.select(*(a.expr() for a in aggregates))
    bad = _bad(part, options, schema)
    if not bad:
        found = _events(part, options, schema)  # counted once: its rows are the events
        count: pl.Expr = pl.lit(found.height, pl.Int64)
    else:
        count = pl.lit(part.select(options.event).n_unique(), pl.Int64)
    checked = checked.with_columns(count.alias(_EVENTS))
    rows = [checked.with_columns(pl.lit(_CHECK, pl.Int8).alias(_WHAT))]
    if not bad:  # (else the checks raise after the pass)
        histogram = _histogram(found, None, None)
        rows.append(histogram.with_columns(pl.lit(_BIN, pl.Int8).alias(_WHAT)))
        assert options.test_share is not None
        if options.method == "random":
            window = _window(found, options.test_share)
        else:  # the cut is the time at share 1 - s of the events
            window = _time_window(found, 1.0 - options.test_share, part, options)
        rows.append(window.with_columns(pl.lit(_WINDOW, pl.Int8).alias(_WHAT)))
    return _as_wire(pl.concat(rows, how="diagonal_relaxed"))


def _brought(events: pl.DataFrame, low: object, high: object) -> pl.DataFrame:
    """A window's rows: its range [low, high] and the events below, then those inside.

    One row gives the range (``_LOW``, ``_HIGH``) and the events below ``low``
    (``_BELOW``), the others each value inside it with its events (``_VALUE``,
    ``_COUNT``). ``low`` and ``high``: values of ``events``' ``_VALUE`` type; None: no
    window (no row, the columns only).
    """
    dtype = events.schema[_VALUE]
    bounds = pl.DataFrame({_LOW: [low], _HIGH: [high]}, schema={_LOW: dtype, _HIGH: dtype})
    if low is None:
        counted = events.clear().select(_VALUE, pl.lit(0, pl.Int64).alias(_COUNT))
        return _as_wire(pl.concat([bounds.clear(), counted], how="diagonal_relaxed"))
    (low_key,), (high_key,) = _order_key(bounds[_LOW]), _order_key(bounds[_HIGH])
    below = events.filter(pl.col(_KEY) < pl.lit(low_key, pl.Int128)).height
    inside = _within(events, low_key, high_key)
    counted = inside.group_by(_VALUE).agg(pl.len().cast(pl.Int64).alias(_COUNT))
    bounds = bounds.with_columns(pl.lit(below, pl.Int64).alias(_BELOW))
    return _as_wire(pl.concat([bounds, counted], how="diagonal_relaxed"))


def _time_window(
    events: pl.DataFrame, share: float, part: pl.DataFrame, options: SplitOptions
) -> pl.DataFrame:
    """A partition's event times near its own ``share`` quantile (:func:`_brought`).

    A partition's users are a random sample of the users (partitioned by a hash of
    their key), so its quantile is the whole frame's give or take sqrt(p (1 - p) / m)
    in share, m the users' effective number ((sum e)^2 / sum e^2 of their rows e: a
    user's events may all be at one time). The window is :data:`_TIME_SPREAD` of those;
    the driver finds the cut in it when it lies in every partition's window, else counts
    histograms (:func:`_kth`). A window of more than :data:`_WINDOW_MOST` events is not
    brought.
    """
    n = events.height
    if not n:
        return _brought(events, None, None)
    rows = part.group_by(options.key).len().get_column("len").cast(pl.Float64)
    m = float(rows.sum()) ** 2 / float((rows * rows).sum())
    spread = _TIME_SPREAD * math.sqrt(share * (1.0 - share) / m) + 2.0 / n
    first = max(0, math.floor((share - spread) * n))
    last = min(n - 1, math.ceil((share + spread) * n))
    if last - first > _WINDOW_MOST:
        return _brought(events, None, None)
    ordered = events.sort(_KEY).get_column(_VALUE)
    return _brought(events, ordered[first], ordered[last])


def _window(events: pl.DataFrame, share: float) -> pl.DataFrame:
    """A partition's event hashes near ``share`` * 2^64 (:func:`_brought`).

    The k-th smallest of n uniform 64-bit hashes, k = share * n, is share * 2^64 give or
    take sqrt(share (1 - share) / n) * 2^64; the range is :data:`_SPREAD` of those, with
    this partition's n (the whole frame has more events, so its threshold is closer).
    """
    n = events.height
    if not n:
        return _brought(events, None, None)
    middle = share * 2.0**64
    spread = (_SPREAD * math.sqrt(share * (1.0 - share) / n) + 2.0 / n) * 2.0**64
    low = max(0, int(middle - spread))
    high = min(2**64 - 1, int(middle + spread))
    return _brought(events, low, high)


def _from_window(
    rows: pl.DataFrame, wanted: int, dtype: pl.DataType, partitions: int
) -> pl.Series | None:
    """The ``wanted``-th smallest event value from the partitions' windows, or None.

    ``rows``: every partition's :func:`_brought` rows (values of ``dtype`` on the wire);
    ``partitions``: how many have events. None: a partition brought no window, or the
    value is outside the range [low, high] (the largest of the lows, the least of the
    highs): every partition brought all its events in it and counted those below its own
    low, so the events below ``low`` and those inside are known exactly.
    """
    is_bound = pl.col(_LOW).is_not_null()
    bounds = rows.filter(is_bound)
    if not partitions or bounds.height < partitions:
        return None
    low = int(_key_of(bounds.get_column(_LOW), dtype).max())  # type: ignore[arg-type]
    high = int(_key_of(bounds.get_column(_HIGH), dtype).min())  # type: ignore[arg-type]
    brought = rows.filter(~is_bound)
    values = brought.select(
        _values(brought.get_column(_VALUE), dtype).alias(_VALUE),
        _key_of(brought.get_column(_VALUE), dtype).alias(_KEY),
        pl.col(_COUNT),
    )
    key = pl.col(_KEY)
    below = int(bounds.get_column(_BELOW).sum()) + int(
        values.filter(key < pl.lit(low, pl.Int128)).get_column(_COUNT).sum()
    )
    inside = (
        _within(values, low, high)
        .group_by(_KEY)
        .agg(pl.col(_VALUE).first(), pl.col(_COUNT).sum())
        .sort(_KEY)
        .with_columns(pl.col(_COUNT).cum_sum().alias("cum"))
    )
    rank = wanted - below
    if rank < 1 or not inside.height or rank > inside.get_column("cum").max():  # type: ignore[operator]
        return None
    return inside.filter(pl.col("cum") >= rank).get_column(_VALUE).head(1)


def _label_pass(
    part: pl.DataFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals
) -> pl.DataFrame:
    """A partition's rows with their labels, the cold items left for after.

    Integer labels without nulls, for the engines' filters: ``FOLD`` (-1: no fold's
    test), ``DROP`` (-1: not a candidate), time windows' ``FROM``; ``user_kfold``'s
    ``USER_FOLD``, which the report reads.
    """
    columns = list(schema.names())
    if _bad(part, options, schema):
        return part.select(columns)  # conformed: labels null; the checks raise
    keep = replace(options, cold_items="keep")
    plan = splits.labelled(part.lazy(), keep, schema, globals_)
    # Small types: every byte of these crosses from Python to the engine and is cached.
    labels = [
        pl.col(FOLD).fill_null(-1).cast(pl.Int32),
        pl.col(DROP).cast(pl.Int8).fill_null(-1),
    ]
    if options.method == "time_windows":
        assert options.time is not None
        folds = options.n_folds
        # Fold f's train is every row up to its window's left edge: the first such fold.
        first = pl.min_horizontal(
            pl.when(pl.col(options.time) <= plan.edges[folds - f]).then(pl.lit(f, pl.Int64))
            for f in range(folds)
        )
        labels.append(first.fill_null(folds).cast(pl.Int32).alias(FROM))
    if options.method == "user_kfold":
        labels.append(pl.col(splits.USER_FOLD).cast(pl.Int32))
    return plan.labelled.select(*columns, *labels).collect()


def _report_pass(
    part: pl.DataFrame, options: SplitOptions, schema: pl.Schema, globals_: Globals
) -> pl.DataFrame:
    """A partition's report parts: its stats and its items (to count over every item)."""
    rows = part.with_columns(
        pl.when(pl.col(FOLD) >= 0).then(pl.col(FOLD)).cast(pl.Int64).alias(FOLD),
        pl.when(pl.col(DROP) >= 0).then(pl.col(DROP)).cast(pl.UInt8).alias(DROP),
    )
    edges: list[pl.Expr] = []
    if options.method == "time_windows":
        assert options.time is not None
        edges = splits.window_edges(options, schema[options.time], globals_)
    plan = Plan.of_labelled(options, rows.lazy(), list(schema.names()), edges)
    stats, items = splits.report_parts(plan, range(options.n_folds))
    stats_rows, item_rows = pl.collect_all([stats, items])
    return pl.concat(
        [
            stats_rows.with_columns(pl.lit(_STATS, pl.Int8).alias(_WHAT)),
            item_rows.with_columns(pl.lit(_ITEMS, pl.Int8).alias(_WHAT)),
        ],
        how="diagonal_relaxed",
    )


def _report_combine(rows: pl.DataFrame, options: SplitOptions) -> pl.DataFrame:
    """The report rows regrouped by item: each item's rows counted, the stats as they are."""
    is_items = pl.col(_WHAT) == _ITEMS
    items = rows.filter(is_items).select("fold", SIDE, options.item)
    counts = splits.item_counts(items.lazy()).collect()
    return pl.concat(
        [rows.filter(~is_items), counts.with_columns(pl.lit(_ITEMS, pl.Int8).alias(_WHAT))],
        how="diagonal_relaxed",
    )


# --------------------------------------------------------------------------- the run


class DistributedSides:
    """A split's sides on the engine: filters of the kept labelled rows.

    Implements :class:`frame_metrics.protocol.Sides`: ``sides(f)`` and ``test_rows()``
    give frames of the input's kind, lazy over the kept rows; ``report(folds)`` is one
    more pass over them, the first time it is asked for.
    """

    def __init__(
        self, options: SplitOptions, schema: pl.Schema, labelled: Labelled, globals_: Globals
    ) -> None:
        self.options = options
        self._schema = schema
        self._labelled = labelled
        self._globals = globals_
        self._report: pl.DataFrame | None = None

    def sides(self, fold: int) -> tuple[Any, Any]:
        """Fold ``fold``'s train and kept test rows."""
        columns = list(self._schema.names())
        if self.options.method == "time_windows":
            train = [Condition(FROM, "<=", fold)]
        else:
            train = [Condition(FOLD, "!=", fold)]
        test = [Condition(DROP, "==", 0), Condition(FOLD, "==", fold)]
        return (
            self._labelled.rows(train, columns, None),
            self._labelled.rows(test, columns, None),
        )

    def test_rows(self) -> Any:
        """Every fold's kept test rows, with their fold."""
        columns = list(self._schema.names())
        return self._labelled.rows([Condition(DROP, "==", 0)], columns, splits.FOLD_COLUMN)

    def report(self, folds: Sequence[int]) -> pl.DataFrame:
        """The report's frame of ``folds``."""
        if self._report is None:
            self._report = self._whole_report()
        return self._report.filter(pl.col("fold").is_in(list(folds)))

    def _whole_report(self) -> pl.DataFrame:
        options, schema = self.options, self._schema
        fn = functools.partial(_report_pass, options=options, schema=schema, globals_=self._globals)
        kept = _label_pass(pl.DataFrame(schema=schema), options, schema, self._globals)
        # An empty partition's parts: every fold and side has a row.
        empty = fn(kept)
        combine = functools.partial(_report_combine, options=options)
        meta = combine(empty)
        found = self._labelled.run(fn, meta, kept.columns, regroup=options.item, combine=combine)
        found = pl.concat([found, meta], how="vertical_relaxed")
        what = pl.col(_WHAT)
        stats = found.filter(what == _STATS).drop(_WHAT, "items", options.item)
        counts = found.filter(what == _ITEMS).select("fold", SIDE, "items")
        return splits.report_frame(stats, counts, options, schema)


def run(
    adapter: Any,
    frame: Any,
    options: SplitOptions,
    schema: pl.Schema,
    aggregates: Sequence[Aggregate],
    on_checks: Callable[[pl.DataFrame], None],
) -> DistributedSides:
    """Split a Spark or Dask ``frame`` (of polars ``schema``) by ``options``.

    ``adapter``: the engine's module (``split_parts`` partitions the rows by user key);
    ``aggregates``: what the data checks read, computed over every row; ``on_checks``
    gets them (one row) and raises on a failed check.
    """
    with adapter.split_parts(frame, options.key, schema) as parts:
        return _run(parts, options, schema, aggregates, on_checks)


def _run(
    parts: Parts,
    options: SplitOptions,
    schema: pl.Schema,
    aggregates: Sequence[Aggregate],
    on_checks: Callable[[pl.DataFrame], None],
) -> DistributedSides:
    globals_ = Globals()
    checked = False
    users = 0  # the distinct users, known when they are dealt
    if options.method == "user_kfold":
        distinct = parts.distinct(options.key)
        users = distinct.height
        dealt = splits.dealt_users(distinct.lazy(), options, schema).collect()
        globals_ = replace(globals_, dealt=dealt.lazy())
    if options.method == "time_windows" and options.end is None:
        assert options.time is not None
        globals_ = replace(globals_, end=parts.largest(options.time))
    if options.method == "random" or (options.method == "time" and options.test_share):
        globals_ = _ranked(parts, options, schema, aggregates, on_checks, globals_)
        checked = True
    label = functools.partial(_label_pass, options=options, schema=schema, globals_=globals_)
    meta = label(pl.DataFrame(schema=schema))
    # The distinct users (user_kfold's check) are the users dealt: no engine count.
    asked = tuple(a for a in aggregates if a.kind != "distinct")
    assert all(a.columns == tuple(options.key) for a in _left_out(aggregates, asked))
    by_time = options.time if options.method == "time_windows" else None
    labelled = parts.label(label, meta, Tally(asked, options.item, by_time))
    try:
        found, tallies = labelled.summary()
        if not checked:
            known = [pl.lit(users, pl.Int64).alias(a.name) for a in _left_out(aggregates, asked)]
            on_checks(found.with_columns(known).select(a.name for a in aggregates))
        if options.cold_items == "drop":
            if by_time is None:
                tallies = tallies.with_columns(pl.lit(1, pl.Int64).alias(splits.ITEM_ROWS))
            cold = splits.cold_items(tallies.lazy(), options, schema, globals_).collect()
            labelled.use_cold(cold.cast({FOLD: meta.schema[FOLD]}))
    except BaseException:
        labelled.release()
        raise
    return DistributedSides(options, schema, labelled, globals_)


def _left_out(aggregates: Sequence[Aggregate], asked: Sequence[Aggregate]) -> list[Aggregate]:
    """The aggregates left out of ``asked`` (the distinct users, counted when dealt)."""
    return [a for a in aggregates if a not in asked]


def _ranked(
    parts: Parts,
    options: SplitOptions,
    schema: pl.Schema,
    aggregates: Sequence[Aggregate],
    on_checks: Callable[[pl.DataFrame], None],
    globals_: Globals,
) -> Globals:
    """``random``'s threshold or ``time``'s cut, after the checks of the first pass."""
    empty = pl.DataFrame(schema=schema)
    first_fn = functools.partial(_first_pass, options=options, schema=schema, aggregates=aggregates)
    meta = first_fn(empty)
    first = parts.run(first_fn, meta, options.event)
    checked = pl.concat([first, meta], how="vertical_relaxed").filter(pl.col(_WHAT) == _CHECK)
    names = [a.name for a in aggregates]
    on_checks(added_up(checked.select(names), aggregates))
    events = int(checked.get_column(_EVENTS).sum())
    if not events:
        return globals_
    assert options.test_share is not None
    bins = first.filter(pl.col(_WHAT) == _BIN).select(_BELOW, _COUNT, _LOW, _HIGH)
    if options.method == "random":
        # The k-th smallest event hash, k = round_half_up(s * n) (none when k is 0).
        wanted = math.floor(options.test_share * events + 0.5)
        if not wanted:
            return globals_
        dtype: pl.DataType = pl.UInt64()
    else:
        # The time at 0-based position floor((1 - s) * n) of the events' sorted times.
        assert options.time is not None
        wanted = math.floor((1.0 - options.test_share) * events) + 1
        dtype = schema[options.time]
    window = first.filter(pl.col(_WHAT) == _WINDOW).select(_LOW, _HIGH, _BELOW, _VALUE, _COUNT)
    partitions = checked.filter(pl.col(_EVENTS) > 0).height
    found = _from_window(window, wanted, dtype, partitions)
    if found is None:  # outside some partition's window: histogram rounds
        found = _kth(parts, options, schema, wanted, bins, dtype)
    if options.method == "random":
        return replace(globals_, threshold=int(found.item()))
    return replace(globals_, cut=found)
