"""Dask DataFrames: shuffle by a bucket of the user key, the polars engine per partition.

Every frame keyed by user gets the same bucket column and is shuffled into as many
partitions as the recommendations have, so partition i of each holds the same users;
``map_partitions`` runs the engine on each (see :mod:`frame_metrics.distributed.core`).
The few tables over every user (train popularity, ``by`` groups, the seen items) are
computed when the call is made, and so are the input checks, in the one pass that also
gives the result: an aggregate comes back computed (a one-partition frame), per-user rows
lazy over that pass kept with ``persist()``; with ``validate=False`` the result is lazy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import dask
import dask.dataframe
import numpy as np
import pandas as pd
import polars as pl

from frame_metrics.diagnostics import Diagnostics
from frame_metrics.distributed import core
from frame_metrics.distributed.split import Condition, PartFn, Tally, added_up, conform
from frame_metrics.frames import kind_of, to_lazy
from frame_metrics.spec import Spec
from frame_metrics.splits import FOLD, with_cold_items

__all__ = [
    "diagnose",
    "evaluate",
    "is_dask",
    "like",
    "polars_schema",
    "split_parts",
    "to_polars",
]

# dask is untyped: its frames are Any here.
dd: Any = dask.dataframe
dask_core: Any = dask


def is_dask(frame: object) -> bool:
    """Whether ``frame`` is a dask DataFrame (without importing dask)."""
    import sys

    module = sys.modules.get("dask.dataframe")
    return module is not None and isinstance(frame, module.DataFrame)


def _to_polars(frame: pd.DataFrame, name: str) -> pl.DataFrame:
    return to_lazy(frame, name).lazy.collect()


def _to_pandas(frame: pl.DataFrame) -> pd.DataFrame:
    return frame.to_pandas()


def _as_dask(frame: object, name: str) -> Any:
    if is_dask(frame):
        return frame
    kind_of(frame)  # a clear error for an unsupported kind
    return dd.from_pandas(_to_pandas(to_lazy(frame, name).lazy.collect()), npartitions=1)


def _local(frame: object, name: str) -> pl.DataFrame:
    if is_dask(frame):
        return _to_polars(frame.compute(), name)  # type: ignore[attr-defined]
    return to_lazy(frame, name).lazy.collect()


class _Run:
    """One call's frames, shuffled by user bucket, and its job."""

    def __init__(
        self,
        spec: Spec,
        recs: Any,
        truth: Any,
        extras: Mapping[str, object | None],
        *,
        aggregate: bool,
        for_diagnose: bool = False,
    ) -> None:
        given, items = core.split_inputs(recs, truth, extras)
        self.frames = {name: _as_dask(f, name) for name, f in given.items()}
        broadcast = {name: _local(f, name) for name, f in items.items()}
        schemas = {name: _to_polars(f._meta, name).schema for name, f in self.frames.items()}
        job = core.unified_job(spec, schemas, broadcast, aggregate, for_diagnose=for_diagnose)
        core.refuse_row_order(spec, "Dask")
        self.schemas = dict(job.schemas)
        self.n = max(1, self.frames["recs"].npartitions)
        self.job = job
        self.keep = None if for_diagnose else core.row_filter(self.job)
        self.direct = _same_user_dtypes(self.frames, list(spec.columns.user))
        self.shuffled = {name: self._shuffled(name, f) for name, f in self.frames.items()}
        shared = core.global_tables(job, self.collect, self.distinct, has_recs=self.has_recs)
        self.job = core.Job(spec, aggregate, self.schemas, broadcast, shared)

    def _shuffled(self, name: str, frame: Any) -> Any:
        """Frame ``name`` shuffled by user: by its own columns or by a bucket of them."""
        schema, user, n = self.schemas[name], list(self.job.spec.columns.user), self.n
        keep = self.keep if name == "recs" else None
        if keep is not None:
            # The rows below the largest cutoff left out in pandas first (dask may push
            # the filter into the parquet read): only the rest is converted to polars.
            frame = frame[self._coarse_keep(frame)]
        if self.direct:
            # Every frame holds its user columns in one pandas dtype: dask's own hash of
            # them puts a user in the same partition of each, and the rows move as read
            # (no bucket column: a fifth less to shuffle, no pandas-polars round trip
            # before it: 10.2 -> 8.3 s at 1M users). ``_arrived`` conforms them after.
            return frame.shuffle(on=user, npartitions=n)

        def add(part: pd.DataFrame) -> pd.DataFrame:
            polars_part = _to_polars(part, name)
            return _to_pandas(core.with_bucket(polars_part, user, schema, n, keep))

        meta = add(frame._meta)
        return frame.map_partitions(add, meta=meta).shuffle(on=core.BUCKET, npartitions=n)

    def _coarse_keep(self, frame: Any) -> Any:
        """``core.keep_rule`` as a dask mask (pandas' operations).

        polars' filter is applied again in each partition, in ``add``.
        """
        rule = core.keep_rule(self.job)
        assert rule is not None  # only called when row_filter gave a filter
        rank = frame[rule.rank]
        keep = rank <= rule.max_k
        for col in rule.nullable:
            if _may_be_missing(frame[col].dtype):
                keep = keep | frame[col].isna()
        if rule.whole:
            whole = rank == rank.round()  # False for NaN and ±inf (round keeps them)
            keep = keep | ~whole | (rank.abs() == float("inf"))
        return keep

    def per_partition(
        self,
        fn: Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame],
        meta: pl.DataFrame,
        names: tuple[str, ...] | None = None,
    ) -> Any:
        """``fn`` on each partition's frames (all, or ``names``), lazily: a dask DataFrame."""
        names = tuple(self.frames) if names is None else names

        def run(*parts: pd.DataFrame) -> pd.DataFrame:
            frames = {
                name: self._arrived(name, part) for name, part in zip(names, parts, strict=True)
            }
            return _to_pandas(fn(frames))

        return dd.map_partitions(
            run,
            *(self.shuffled[name] for name in names),
            meta=_to_pandas(meta),
            align_dataframes=False,
            enforce_metadata=False,
        )

    def _arrived(self, name: str, part: pd.DataFrame) -> pl.DataFrame:
        """A shuffled partition of frame ``name`` as the engine reads it."""
        if not self.direct:
            return _to_polars(part.drop(columns=core.BUCKET), name)
        keep = self.keep if name == "recs" else None
        return core.conformed(_to_polars(part, name), self.schemas[name], keep)

    def checked_pass(self) -> Any:
        """Every partition's failed checks and result (:func:`core.partition_checked_result`)."""
        job = self.job
        meta = core.partition_checked_result(job.empty(), job)
        return self.per_partition(lambda frames: core.partition_checked_result(frames, job), meta)

    def collect(
        self,
        fn: Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame],
        names: tuple[str, ...] | None = None,
    ) -> pl.DataFrame:
        """``fn`` on each partition's frames, computed now and concatenated."""
        empty = self.job.empty()
        meta = fn(empty if names is None else {n: empty[n] for n in names})
        out = _to_polars(self.per_partition(fn, meta, names).compute(), "partition")
        return out.cast(meta.schema) if out.height else meta

    def distinct(self, cols: list[str]) -> pl.DataFrame:
        """The distinct values of recs' ``cols``."""
        out = _to_polars(self.frames["recs"][cols].drop_duplicates().compute(), "recs")
        return out.cast({c: self.schemas["recs"][c] for c in cols})

    def has_recs(self) -> bool:
        """Whether recs has a row."""
        return bool(len(self.frames["recs"].head(1, npartitions=-1)))


def _same_user_dtypes(frames: Mapping[str, Any], user: list[str]) -> bool:
    """Whether every frame holds each ``user`` column in the same numpy or string dtype.

    Then dask's hash of the columns (``shuffle(on=user)``) agrees across the frames; an
    int32 id and an int64 one may not hash alike, so other dtypes get a bucket computed
    from the unified dtypes (:func:`core.with_bucket`).
    """
    for column in user:
        first, *rest = (frame._meta[column].dtype for frame in frames.values())
        if any(dtype != first for dtype in rest):
            return False
        numpy_integer = isinstance(first, np.dtype) and first.kind in "iu"
        if not (numpy_integer or str(first) in ("object", "string", "str")):
            return False
    return True


def _may_be_missing(dtype: object) -> bool:
    """Whether a pandas column of ``dtype`` can hold a missing value.

    numpy's integer and boolean dtypes cannot: their ``isna()`` is a pass over every row
    that is always False (0.3 s of 100M rows' filter).
    """
    return not (isinstance(dtype, np.dtype) and dtype.kind in "iub")


def evaluate(
    spec: Spec, recs: Any, truth: Any, extras: Mapping[str, object | None], *, aggregate: bool
) -> Any:
    """:func:`frame_metrics.evaluate` on dask DataFrames; gives a dask DataFrame."""
    run = _Run(spec, recs, truth, extras, aggregate=aggregate)
    job = run.job
    meta = pl.DataFrame(schema=core.result_schema(job))
    if spec.validate and aggregate:
        # The pass the checks need gives the sums too, a few rows per partition: they
        # are added up here, with nothing persisted on the workers.
        return like(recs, core.finish(_checked_rows(run, meta), job))
    if spec.validate:
        result = _checked(run, meta)
    else:
        result = run.per_partition(lambda frames: core.partition_result(frames, job), meta)
    if not aggregate:
        return result

    def finish(part: pd.DataFrame) -> pd.DataFrame:
        return _to_pandas(core.finish(_to_polars(part, "sums").cast(meta.schema), job))

    final_meta = _to_pandas(core.finish(meta, job))
    return result.repartition(npartitions=1).map_partitions(finish, meta=final_meta)


def _checked_rows(run: _Run, meta: pl.DataFrame) -> pl.DataFrame:
    """The checks and the (small) result in one computation: the result, here."""
    rows = _to_polars(run.checked_pass().compute(), "checks")
    return core.result_after_checks(rows, meta.schema)


def _checked(run: _Run, meta: pl.DataFrame) -> Any:
    """The result after the checks, from one pass over the data.

    Every partition's failures and result are computed together and kept (persisted);
    the failures raise, the result stays.
    """
    combined = run.checked_pass().persist()
    is_failure = combined[core.TAG] == "failure"
    failures = _to_polars(combined[is_failure][core.failure_columns()].compute(), "checks")
    core.raise_first(failures)
    columns = list(meta.columns)
    return combined[~is_failure][columns]


def diagnose(spec: Spec, recs: Any, truth: Any, extras: Mapping[str, object | None]) -> Diagnostics:
    """:func:`frame_metrics.diagnose` on dask DataFrames."""
    run = _Run(spec, recs, truth, extras, aggregate=False, for_diagnose=True)
    return core.run_diagnostics(run.collect, run.job)


def to_polars(frame: Any) -> pl.DataFrame:
    """Compute a dask DataFrame into a polars DataFrame (on the driver)."""
    return _to_polars(frame.compute(), "frame")


#: pandas' nullable integer dtypes, named as polars names its integer dtypes.
_NULLABLE_INTEGERS = frozenset(f"{u}Int{b}" for u in ("", "U") for b in (8, 16, 32, 64))


def like(frame: Any, result: pl.DataFrame) -> Any:
    """``result`` as a one-partition dask DataFrame (``frame`` is the caller's input).

    Integer columns keep integer dtypes, pandas' nullable ones (``Int64`` for polars'
    Int64): numpy's int64 has no missing value, so a column with a null (compare's
    ``n_paired`` on the baseline's rows) would become float64.
    """
    integers = {n: str(d) for n, d in result.schema.items() if str(d) in _NULLABLE_INTEGERS}
    return dd.from_pandas(_to_pandas(result).astype(integers), npartitions=1)


# --------------------------------------------------------------------------- fm.split


def polars_schema(frame: Any) -> pl.Schema:
    """The polars schema of a dask DataFrame's partitions (read from its meta)."""
    return _to_polars(frame._meta, "interactions").schema


@contextlib.contextmanager
def split_parts(frame: Any, key: list[str], schema: pl.Schema) -> Iterator[_SplitParts]:
    """``frame``'s rows shuffled by ``key``, as polars frames kept by the workers.

    Each partition is converted to polars once and persisted: every pass of
    :func:`frame_metrics.distributed.split.run` reads it as it is (no conversion, no
    second shuffle); the frames are dropped with the last reference to them.
    """
    shuffled = frame.shuffle(on=list(key), npartitions=max(1, frame.npartitions))
    parts = [dask_core.delayed(_polars_part)(part, schema) for part in shuffled.to_delayed()]
    yield _SplitParts(list(dask_core.persist(*parts)), frame._meta, schema)


def _polars_part(part: pd.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    return _to_polars(part, "interactions").cast(schema)


def _applied(
    fn: PartFn, part: pl.DataFrame, columns: Sequence[str], meta: pl.DataFrame
) -> pl.DataFrame:
    return conform(fn(part.select(columns)), meta)


def _buckets(frame: pl.DataFrame, column: str, n: int) -> tuple[pl.DataFrame, ...]:
    """``frame``'s rows in ``n`` parts by a hash of ``column``: a value's rows in one part."""
    bucket = pl.col(column).hash(seed=0) % n
    return tuple(frame.filter(bucket == i) for i in range(n))


def _combined(fn: PartFn, pieces: Sequence[pl.DataFrame], meta: pl.DataFrame) -> pl.DataFrame:
    return conform(fn(pl.concat(pieces, how="vertical_relaxed")), meta)


def _passed(
    parts: Sequence[Any],
    fn: PartFn,
    meta: pl.DataFrame,
    columns: Sequence[str],
    regroup: str | None,
    combine: PartFn | None,
) -> pl.DataFrame:
    """``fn`` on each delayed polars partition; regrouped by a hash and combined; here."""
    outs = [dask_core.delayed(_applied)(fn, part, list(columns), meta) for part in parts]
    if regroup is not None:
        assert combine is not None
        n = len(outs)
        pieces = [dask_core.delayed(_buckets, nout=n)(out, regroup, n) for out in outs]
        outs = [
            dask_core.delayed(_combined)(combine, [piece[i] for piece in pieces], meta)
            for i in range(n)
        ]
    found: list[pl.DataFrame] = list(dask_core.compute(*outs))
    return pl.concat([meta, *found], how="vertical_relaxed").cast(meta.schema)


def _pandas_like(frame: pl.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as pandas, each column in the dtype of ``meta``'s column of that name.

    Through polars a column may come back in another dtype (a nullable ``Int64`` as
    float64, ``string[pyarrow]`` as object): the caller's kind is kept.
    """
    out = _to_pandas(frame)
    changed = {
        c: meta.dtypes[c]
        for c in out.columns
        if c in meta.columns
        and out.dtypes[c] != meta.dtypes[c]
        and not isinstance(meta.dtypes[c], pd.CategoricalDtype)
    }
    return out.astype(changed) if changed else out


class _SplitParts:
    """:class:`frame_metrics.distributed.split.Parts` on persisted polars partitions."""

    def __init__(self, parts: list[Any], meta: pd.DataFrame, schema: pl.Schema) -> None:
        self.parts = parts
        self.meta = meta
        self.schema = schema

    def run(
        self,
        fn: PartFn,
        meta: pl.DataFrame,
        columns: Sequence[str],
        *,
        regroup: str | None = None,
        combine: PartFn | None = None,
    ) -> pl.DataFrame:
        """``fn`` on each partition's ``columns``; with ``regroup``, ``combine`` after it."""
        return _passed(self.parts, fn, meta, columns, regroup, combine)

    def distinct(self, columns: Sequence[str]) -> pl.DataFrame:
        """The distinct values of ``columns`` (each partition's, then all), here."""
        meta = pl.DataFrame(schema={c: self.schema[c] for c in columns})
        return _passed(self.parts, pl.DataFrame.unique, meta, columns, None, None).unique()

    def largest(self, column: str) -> pl.Series:
        """The largest value of ``column``, as a one-value Series."""
        meta = pl.DataFrame(schema={column: self.schema[column]})
        found = _passed(self.parts, _largest, meta, [column], None, None)
        return found.select(pl.col(column).max())[column]

    def label(self, fn: PartFn, meta: pl.DataFrame, tally: Tally) -> _SplitRows:
        """The labelled rows, persisted as polars partitions."""
        labelled = [
            dask_core.delayed(_applied)(fn, part, list(self.schema), meta) for part in self.parts
        ]
        return _SplitRows(list(dask_core.persist(*labelled)), meta, self.meta, tally)


def _largest(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.max()


class _SplitRows:
    """:class:`frame_metrics.distributed.split.Labelled`: persisted labelled partitions.

    The sides are dask DataFrames over them: each partition's side is taken in polars
    (the cold-item filter, :func:`frame_metrics.splits.with_cold_items`, then the
    conditions) and converted to pandas when the frame is computed.
    """

    def __init__(
        self, parts: list[Any], meta: pl.DataFrame, input_meta: pd.DataFrame, tally: Tally
    ) -> None:
        self.parts = parts
        self.meta = meta
        self.input_meta = input_meta
        self.tally = tally
        self.cold: pl.DataFrame | None = None

    def summary(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The checks' aggregates and the cold candidates.

        The aggregates: each partition's, added up; the candidates: each partition's
        tallies per item, regrouped by item.
        """
        tally = self.tally
        columns = self.meta.columns
        checks_meta = tally.checks(self.meta)
        found = _passed(self.parts, tally.checks, checks_meta, columns, None, None)
        items_meta = tally.items(self.meta)
        tallies = _passed(
            self.parts, tally.items, items_meta, columns, tally.item, tally.cold_candidates
        )
        return added_up(found, tally.aggregates), tallies

    def use_cold(self, cold: pl.DataFrame) -> None:
        """The cold ``(item, FOLD)`` pairs, applied to every read from now on."""
        self.cold = cold if cold.height else None

    def _final(self) -> list[Any]:
        if self.cold is None:
            return self.parts
        return [
            dask_core.delayed(_with_cold)(part, self.cold, self.tally.item) for part in self.parts
        ]

    def run(
        self,
        fn: PartFn,
        meta: pl.DataFrame,
        columns: Sequence[str],
        *,
        regroup: str | None = None,
        combine: PartFn | None = None,
    ) -> pl.DataFrame:
        """``fn`` on each partition of the labelled rows."""
        return _passed(self._final(), fn, meta, columns, regroup, combine)

    def rows(
        self, conditions: Sequence[Condition], columns: Sequence[str], fold_as: str | None
    ) -> Any:
        """The labelled rows meeting ``conditions``, with ``columns`` (and ``fold_as``)."""
        empty = _side(self.meta, list(conditions), list(columns), fold_as)
        meta = _pandas_like(empty, self.input_meta)
        sides = [
            dask_core.delayed(_pandas_side)(part, list(conditions), list(columns), fold_as, meta)
            for part in self._final()
        ]
        return dd.from_delayed(sides, meta=meta, verify_meta=False)

    def release(self) -> None:
        """Nothing to do: the partitions go with the last reference to them."""


def _with_cold(part: pl.DataFrame, cold: pl.DataFrame, item: str) -> pl.DataFrame:
    return with_cold_items(part.lazy(), cold.lazy(), item).collect()


def _side(
    part: pl.DataFrame, conditions: list[Condition], columns: list[str], fold_as: str | None
) -> pl.DataFrame:
    keep = pl.lit(True)
    for condition in conditions:
        column = pl.col(condition.column)
        if condition.op == "==":
            keep = keep & (column == condition.value)
        elif condition.op == "!=":
            keep = keep & (column != condition.value)
        else:
            keep = keep & (column <= condition.value)
    chosen = [pl.col(c) for c in columns]
    if fold_as is not None:
        chosen.append(pl.col(FOLD).cast(pl.Int64).alias(fold_as))
    return part.filter(keep).select(chosen)


def _pandas_side(
    part: pl.DataFrame,
    conditions: list[Condition],
    columns: list[str],
    fold_as: str | None,
    meta: pd.DataFrame,
) -> pd.DataFrame:
    return _pandas_like(_side(part, conditions, columns, fold_as), meta)
