"""``fm.split`` on Spark and Dask: the polars plan of :mod:`frame_metrics.splits` per partition.

The rows are partitioned by user key once and kept by the engine (persisted); every
pass below runs polars on each partition, which holds each of its users whole, and only
small results reach the driver:

1. **First pass**: the data checks' aggregates (added up by
   :mod:`frame_metrics.protocol`), the distinct events, the largest time, and what needs
   no global value: the cold-item tallies (:func:`~frame_metrics.splits.item_tallies`,
   regrouped by item by the engine and summed there), the hashes of the distinct users
   (``user_kfold``: 8 bytes a user, sorted and dealt on the driver), and a first
   histogram of the events' hashes (``random``) or times (``time`` with a share).
2. **Order statistics** (``random``'s threshold, ``time``'s cut) exactly, by rounds of
   histograms over what is left (:func:`_kth`): usually the first pass's histogram and
   one pass fetching the few values of one bin.
3. **Labels**: each partition runs :func:`~frame_metrics.splits.labelled` with those
   values (:class:`~frame_metrics.splits.Globals`), the same polars code as on one
   frame; its rows are kept by the engine with their fold and filter, and its part of the
   report comes back in the same pass (:func:`~frame_metrics.splits.report_parts`).

Train, test and every fold's test are then filters of the kept rows in the engine
(:class:`Condition`), frames of the input's kind. The adapters
(:mod:`frame_metrics.distributed.spark`, :mod:`frame_metrics.distributed.dask`) give the
engine's side: :class:`Parts` and :class:`Labelled`.
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
from frame_metrics.splits import DROP, FOLD, SIDE, Globals, Plan, SplitOptions

__all__ = [
    "BINS",
    "FETCH",
    "FROM",
    "ROW",
    "Condition",
    "DistributedSides",
    "Labelled",
    "Parts",
    "conform",
    "run",
]

PartFn = Callable[[pl.DataFrame], pl.DataFrame]
LabelFn = Callable[[pl.DataFrame], tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]]

#: Bins of one histogram round: partitions x 4096 rows reach the driver per round.
BINS: Final = 4096
#: A bin of at most this many events is fetched whole (its distinct values, counted).
FETCH: Final = 1 << 17
#: Rounds of histograms before a bin is fetched whatever its size (each round narrows
#: the range around the wanted rank to about one bin of every partition's histogram).
_ROUNDS: Final = 8

#: The first fold whose train holds a row (time windows; ``n_folds``: none).
FROM: Final = f"{RESERVED_PREFIX}from"
#: Which kind of row an engine's kept frame holds (Spark: rows, items, report parts).
ROW: Final = f"{RESERVED_PREFIX}row"
#: Which kind of row a first-pass row is (see the codes below).
_WHAT: Final = f"{RESERVED_PREFIX}what"
_CHECK, _TALLY, _USER, _BIN = 0, 1, 2, 3
_CHECKED: Final = f"{RESERVED_PREFIX}check:"
_EVENTS: Final = f"{RESERVED_PREFIX}n_events"
_END: Final = f"{RESERVED_PREFIX}end"
_HASH: Final = splits.HASH
_KEY: Final = f"{RESERVED_PREFIX}key"
_VALUE: Final = f"{RESERVED_PREFIX}value"
_LOW: Final = f"{RESERVED_PREFIX}low"
_HIGH: Final = f"{RESERVED_PREFIX}high"
_COUNT: Final = f"{RESERVED_PREFIX}count"
_BELOW: Final = f"{RESERVED_PREFIX}below"
_BIN_ID: Final = f"{RESERVED_PREFIX}bin"


# --------------------------------------------------------------------------- the engine's side


class Parts(Protocol):
    """One call's rows partitioned by user key and kept by the engine (an adapter's).

    ``run``: ``fn`` on each partition's ``columns`` (polars frames of ``schema``), its
    rows stacked on the driver; with ``regroup`` (a column), the engine first moves them
    so that each value of it is in one place, and ``combine`` runs there. ``label``: the
    last pass, kept by the engine.
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
        """``fn`` on every partition (``meta``: its result's schema), stacked here."""
        ...

    def label(
        self, fn: LabelFn, metas: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]
    ) -> Labelled:
        """The last pass: ``fn``'s rows kept, its report parts (``metas``) beside them."""
        ...


class Labelled(Protocol):
    """The labelled rows, kept by the engine, and the report's parts of every partition.

    ``stats``: every partition's report stats, on the driver; ``item_counts(fn, meta)``:
    the report's item rows regrouped by item, ``fn`` on each group; ``rows(...)``: the
    rows meeting every condition, with ``columns`` (and the fold as ``fold_as``).
    """

    stats: pl.DataFrame

    def item_counts(self, fn: PartFn, meta: pl.DataFrame) -> pl.DataFrame:
        """``fn`` on the report's item rows, regrouped by item; stacked here."""
        ...

    def rows(
        self, conditions: Sequence[Condition], columns: Sequence[str], fold_as: str | None
    ) -> Any:
        """The kept rows meeting every condition, as a frame of the engine (lazy)."""
        ...


@dataclass(frozen=True)
class Condition:
    """A test on one integer column of the labelled rows: ``column op value``."""

    column: str
    op: str  # "==", "!=" or "<="
    value: int


def conform(frame: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with ``meta``'s columns and dtypes (a missing column null).

    A partition's result may lack a kind of row (a partition with bad rows skips its
    tallies); the engine needs one schema for every partition.
    """
    return frame.select(
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(d).alias(c)
        for c, d in meta.schema.items()
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
    events = part.select(options.event).unique()
    if options.method == "random":
        values = splits.with_hash(events, options.seed, options.event, schema)[_HASH]
    else:
        assert options.time is not None
        values = events.get_column(options.time)
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


# --------------------------------------------------------------------------- folds of users


@dataclass(frozen=True)
class _Dealt:
    """Every user's seeded hash, sorted, and the folds of users sharing a hash.

    A user's fold is its position in the sorted hashes modulo ``n_folds``
    (:func:`frame_metrics.splits.dealt_users`: hash order, ties by key); the few users
    of a shared hash are placed by their key, on the driver.
    """

    hashes: pl.Series
    shared: pl.DataFrame | None


def _dealt(
    users: pl.DataFrame, options: SplitOptions, schema: pl.Schema, dealt: _Dealt
) -> pl.DataFrame:
    """The folds (``USER_FOLD``) of ``users``' distinct keys."""
    keys = users.select(options.key).unique()
    hashed = splits.with_hash(keys, options.seed, options.key, schema)
    position = dealt.hashes.search_sorted(hashed.get_column(_HASH), side="left")
    folds = hashed.with_columns(
        (pl.Series(position).cast(pl.Int64) % options.n_folds).alias(splits.USER_FOLD)
    ).drop(_HASH)
    if dealt.shared is not None and dealt.shared.height:
        shared = dealt.shared.rename({splits.USER_FOLD: "_fm_shared"})
        folds = folds.join(shared, on=options.key, how="left", nulls_equal=True).select(
            *options.key,
            pl.coalesce("_fm_shared", splits.USER_FOLD).alias(splits.USER_FOLD),
        )
    return folds


def _shared_pass(
    part: pl.DataFrame, options: SplitOptions, schema: pl.Schema, shared: pl.Series
) -> pl.DataFrame:
    users = part.select(options.key).unique()
    hashed = splits.with_hash(users, options.seed, options.key, schema)
    return _as_wire(hashed.filter(pl.col(_HASH).is_in(shared.implode())))


def _deal(parts: Parts, options: SplitOptions, schema: pl.Schema, users: pl.DataFrame) -> _Dealt:
    """Users dealt into folds from their hashes (the first pass's ``_USER`` rows)."""
    hashes = _from_wire(users.get_column(_HASH)).sort()
    repeated = hashes.filter(hashes.is_duplicated()).unique()
    shared = None
    if repeated.len():
        # Two users with one hash (text or composite keys only: an integer key's hash
        # is a bijection): their order is their key's, as dealt_users sorts.
        fn = functools.partial(_shared_pass, options=options, schema=schema, shared=repeated)
        meta = _as_wire(
            pl.DataFrame(schema={**{k: schema[k] for k in options.key}, _HASH: pl.UInt64})
        )
        found = parts.run(fn, meta, options.key)
        found = found.with_columns(_from_wire(found.get_column(_HASH)))
        first = hashes.search_sorted(found.get_column(_HASH), side="left")
        ordered = found.with_columns(pl.Series(first).cast(pl.Int64).alias("_fm_first")).sort(
            [_HASH, *options.key]
        )
        shared = ordered.select(
            *options.key,
            ((pl.col("_fm_first") + pl.int_range(pl.len()).over(_HASH)) % options.n_folds).alias(
                splits.USER_FOLD
            ),
        )
    return _Dealt(hashes, shared)


# --------------------------------------------------------------------------- the passes


def _first_pass(
    part: pl.DataFrame,
    options: SplitOptions,
    schema: pl.Schema,
    checks: list[pl.Expr],
    tallies: bool,
    histogram: bool,
) -> pl.DataFrame:
    """One partition's first pass: checks, and what needs no global value (see module)."""
    time = [pl.col(options.time).max().alias(_END)] if options.time else []
    event = pl.struct(options.event).n_unique().cast(pl.Int64).alias(_EVENTS)
    rows = [
        part.select(
            *[c.name.prefix(_CHECKED) for c in checks], event, *time, pl.lit(_CHECK).alias(_WHAT)
        )
    ]
    bad = [pl.col(c).is_null().any() for c in options.event]
    if options.time is not None and schema[options.time].is_float():
        bad.append(pl.col(options.time).is_nan().any())
    if part.select(pl.any_horizontal(bad)).item():
        # The checks will refuse these rows; nothing else is read of them.
        return _as_wire(pl.concat(rows, how="diagonal_relaxed"))
    if tallies:
        found = splits.item_tallies(part.lazy(), options, schema).collect()
        rows.append(found.with_columns(pl.lit(_TALLY).alias(_WHAT)))
    if options.method == "user_kfold":
        users = part.select(options.key).unique()
        hashed = splits.with_hash(users, options.seed, options.key, schema).select(_HASH)
        rows.append(hashed.with_columns(pl.lit(_USER).alias(_WHAT)))
    if histogram:
        found = _histogram(_events(part, options, schema), None, None)
        rows.append(found.with_columns(pl.lit(_BIN).alias(_WHAT)))
    return _as_wire(pl.concat(rows, how="diagonal_relaxed"))


def _summed(rows: pl.DataFrame, options: SplitOptions, tallies: pl.DataFrame) -> pl.DataFrame:
    """The regrouped first-pass rows: each item's tallies added up, the others as they are."""
    is_tally = pl.col(_WHAT) == _TALLY
    mine = rows.filter(is_tally).select(tallies.columns).cast(tallies.schema)
    summed = splits.summed_tallies(_tallies_from_wire(mine).lazy(), options).collect()
    summed = _as_wire(summed).with_columns(pl.lit(_TALLY).alias(_WHAT))
    return pl.concat([rows.filter(~is_tally), summed], how="diagonal_relaxed")


def _tallies_from_wire(frame: pl.DataFrame) -> pl.DataFrame:
    if splits.ITEM_LAST in frame.columns:
        return frame.with_columns(_from_wire(frame.get_column(splits.ITEM_LAST)))
    return frame


def _label_pass(
    part: pl.DataFrame,
    options: SplitOptions,
    schema: pl.Schema,
    globals_: Globals,
    dealt: _Dealt | None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One partition's labelled rows (kept by the engine) and its report parts."""
    if dealt is not None:
        globals_ = replace(globals_, dealt=_dealt(part, options, schema, dealt).lazy())
    plan = splits.labelled(part.lazy(), options, schema, globals_)
    rows = plan.labelled.collect()
    plan = Plan(options, rows.lazy(), plan.columns, plan.edges)
    stats, items = splits.report_parts(plan, range(options.n_folds))
    labels = [
        pl.col(FOLD).fill_null(-1).cast(pl.Int64),
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
        labels.append(first.fill_null(folds).alias(FROM))
    data, stats_rows, item_rows = pl.collect_all(
        [rows.lazy().select(*plan.columns, *labels), stats, items]
    )
    return data, stats_rows, item_rows


def _item_count_pass(items: pl.DataFrame) -> pl.DataFrame:
    return splits.item_counts(items.lazy()).collect()


# --------------------------------------------------------------------------- the run


class DistributedSides:
    """A split's sides on the engine: filters of the kept labelled rows.

    Implements :class:`frame_metrics.protocol.Sides`: ``sides(f)`` and ``test_rows()``
    give frames of the input's kind, lazy over the kept rows; ``report(folds)`` adds
    the partitions' report parts up (the item counts are one more engine pass over the
    report's item rows, the first time).
    """

    def __init__(
        self,
        options: SplitOptions,
        schema: pl.Schema,
        labelled: Labelled,
        empty: pl.DataFrame,
    ) -> None:
        self.options = options
        self._schema = schema
        self._labelled = labelled
        self._empty = empty  # an empty partition's stats: every fold and side has a row
        self._counts: pl.DataFrame | None = None

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
        if self._counts is None:
            meta = pl.DataFrame(schema={"fold": pl.Int64, SIDE: pl.Int8, "items": pl.Int64})
            self._counts = self._labelled.item_counts(_item_count_pass, meta)
        wanted = pl.col("fold").is_in(list(folds))
        stats = pl.concat([self._labelled.stats, self._empty], how="vertical_relaxed")
        return splits.report_frame(
            stats.filter(wanted), self._counts.filter(wanted), self.options, self._schema
        )


def run(
    adapter: Any,
    frame: Any,
    options: SplitOptions,
    schema: pl.Schema,
    checks: list[pl.Expr],
    on_checks: Callable[[pl.DataFrame], None],
) -> DistributedSides:
    """Split a Spark or Dask ``frame`` (of polars ``schema``) by ``options``.

    ``adapter``: the engine's module (``split_parts`` partitions the rows by user key
    and keeps them while the call runs); ``checks``: the data checks' aggregates, run on
    each partition; ``on_checks`` gets them stacked (with an empty partition's row) and
    raises on a failed check.
    """
    with adapter.split_parts(frame, options.key, schema) as parts:
        return _run(parts, options, schema, checks, on_checks)


def _run(
    parts: Parts,
    options: SplitOptions,
    schema: pl.Schema,
    checks: list[pl.Expr],
    on_checks: Callable[[pl.DataFrame], None],
) -> DistributedSides:
    columns = list(schema.names())
    empty = pl.DataFrame(schema=schema)
    tallies = options.cold_items == "drop"
    wants_rank = options.method == "random" or (
        options.method == "time" and options.test_share is not None
    )
    first_fn = functools.partial(
        _first_pass,
        options=options,
        schema=schema,
        checks=checks,
        tallies=tallies,
        histogram=wants_rank,
    )
    first_meta = first_fn(empty)
    tally_meta = _tally_meta(options, schema)
    # Tallies need every partition's rows of an item: regrouped by item, summed there.
    combine = functools.partial(_summed, options=options, tallies=tally_meta) if tallies else None
    first = parts.run(
        first_fn,
        first_meta,
        columns,
        regroup=options.item if tallies else None,
        combine=combine,
    )
    first = pl.concat([first, first_meta], how="vertical_relaxed")
    what = pl.col(_WHAT)
    checked = first.filter(what == _CHECK)
    on_checks(
        checked.select(
            pl.col(c).alias(c.removeprefix(_CHECKED))
            for c in checked.columns
            if c.startswith(_CHECKED)
        )
    )
    events = int(checked.get_column(_EVENTS).sum())
    globals_ = Globals()
    dealt: _Dealt | None = None
    if events:
        if options.time is not None:
            ends = checked.get_column(_END).drop_nulls()
            globals_ = replace(globals_, end=ends.sort().tail(1))
        if options.method == "user_kfold":
            dealt = _deal(parts, options, schema, first.filter(what == _USER))
        if wants_rank:
            dtype = pl.UInt64() if options.method == "random" else schema[options.time or ""]
            bins = first.filter(what == _BIN).select(_BELOW, _COUNT, _LOW, _HIGH)
            if options.method == "random":
                assert options.test_share is not None
                wanted = math.floor(options.test_share * events + 0.5)
                if wanted:
                    found = _kth(parts, options, schema, wanted, bins, dtype)
                    globals_ = replace(globals_, threshold=int(found.item()))
            else:
                assert options.test_share is not None
                position = math.floor((1.0 - options.test_share) * events)
                cut = _kth(parts, options, schema, position + 1, bins, dtype)
                globals_ = replace(globals_, cut=cut)
        if tallies:
            summed = _tallies_from_wire(
                first.filter(what == _TALLY).select(tally_meta.columns).cast(tally_meta.schema)
            )
            known = globals_
            if dealt is not None:
                users = summed.select(options.key).drop_nulls()
                known = replace(known, dealt=_dealt(users, options, schema, dealt).lazy())
            items = splits.cold_items(summed.lazy(), options, schema, known).collect()
            globals_ = replace(globals_, items=items.lazy())
    label = functools.partial(
        _label_pass, options=options, schema=schema, globals_=globals_, dealt=dealt
    )
    empty_dealt = _Dealt(pl.Series([], dtype=pl.UInt64), None) if dealt is not None else None
    metas = _label_pass(empty, options, schema, globals_, empty_dealt)
    labelled = parts.label(label, metas)
    return DistributedSides(options, schema, labelled, metas[1])


def _tally_meta(options: SplitOptions, schema: pl.Schema) -> pl.DataFrame:
    """The columns and dtypes of :func:`~frame_metrics.splits.item_tallies`, on the wire."""
    empty = pl.DataFrame(schema=schema).lazy()
    return _as_wire(splits.item_tallies(empty, options, schema).collect())
