"""Spark DataFrames: partition by a hash of the user key, the polars engine per partition.

The frames keyed by user are stacked into one (a column of one name and dtype in
several frames, as the user and item keys are once unified, is one stacked column; the
others are prefixed by their frame's position, so no two frames' columns clash) and
repartitioned by a hash of the stacked user key, and ``mapInArrow`` hands each
partition's rows of every frame to the engine (:mod:`frame_metrics.distributed.core`):
a partition holds whole users. Spark's
adaptive execution sizes the partitions from the data
(``spark.sql.adaptive.advisoryPartitionSizeInBytes``, 64 MB by default).

The few tables over every user (train popularity, ``by`` groups, the seen items) are
computed when the call is made, and so are the input checks, in the one pass that also
gives the result: an aggregate comes back computed (a small local DataFrame), per-user
rows lazy over that pass, kept with ``persist()`` until that DataFrame is dropped. With
``validate=False`` the result is a lazy DataFrame.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import shutil
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from frame_metrics.columns import RESERVED_PREFIX
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.distributed import core
from frame_metrics.distributed.split import Condition, PartFn, Tally, added_up, conform
from frame_metrics.errors import FrameMetricsError, MissingDependencyError
from frame_metrics.frames import kind_of, to_lazy
from frame_metrics.spec import Spec
from frame_metrics.splits import DROP, FOLD, ITEM_FIRST

__all__ = [
    "diagnose",
    "evaluate",
    "is_spark",
    "like",
    "polars_schema",
    "split_parts",
    "to_polars",
]

_TAG = "_fm_frame"
_ONE = "_fm_one"


@contextlib.contextmanager
def _without_pandas_notice() -> Iterator[None]:
    """Silence PySpark's notice that it does not fully support pandas 3, and only it.

    ``mapInArrow`` and ``applyInArrow`` build their UDF with ``pandas_udf``, which
    checks the pandas version and warns on pandas >= 3 each time (four times a call);
    these UDFs take and give Arrow batches, pandas is not involved.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "PySpark does not yet fully support pandas", category=FutureWarning
        )
        yield


def is_spark(frame: object) -> bool:
    """Whether ``frame`` is a Spark DataFrame, classic or Connect (without importing it)."""
    for name in ("pyspark.sql.dataframe", "pyspark.sql.connect.dataframe"):
        module = sys.modules.get(name)
        if module is not None and isinstance(frame, module.DataFrame):
            return True
    return False


def _small_types(table: pa.Table) -> pa.Table:
    """Arrow types Spark reads: plain strings and lists, not their large or view forms."""

    def small(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(small(t.value_type))
        if pa.types.is_fixed_size_list(t):
            return pa.list_(small(t.value_type))
        return t

    return table.cast(pa.schema([f.with_type(small(f.type)) for f in table.schema]))


def _column(name: str) -> Any:
    """A Spark column by its name as written, backquoted.

    A dot in the name (a metric string's ``persistence=0.5``, a user's column name) is
    part of it, not a struct field.
    """
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _arrow(frame: pl.DataFrame) -> pa.Table:
    return _small_types(frame.to_arrow())


def _spark_schema(frame: pl.DataFrame) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(_arrow(frame.clear()).schema)


def _polars_schema(frame: Any) -> pl.Schema:
    """The polars schema of ``frame``'s rows as Spark hands them to Python.

    Spark's Arrow batches hold a timestamp in the session's time zone (a timestamp
    without time zone as it is).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    zone = frame.sparkSession.conf.get("spark.sql.session.timeZone")
    out = pl.from_arrow(to_arrow_schema(frame.schema, timezone=zone).empty_table())
    assert isinstance(out, pl.DataFrame)
    return out.schema


def _local(frame: object, name: str) -> pl.DataFrame:
    if is_spark(frame):
        out = pl.from_arrow(frame.toArrow())  # type: ignore[attr-defined]
        assert isinstance(out, pl.DataFrame)
        return out
    return to_lazy(frame, name).lazy.collect()


class _Run:
    """One call's frames, tagged to be stacked and partitioned by user, and its job."""

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
        session = recs.sparkSession
        given, items = core.split_inputs(recs, truth, extras)
        self.frames: dict[str, Any] = {}
        for name, given_frame in given.items():
            frame = given_frame
            if not is_spark(frame):
                kind_of(frame)  # a clear error for an unsupported kind
                frame = session.createDataFrame(_arrow(to_lazy(frame, name).lazy.collect()))
            self.frames[name] = frame
        broadcast = {name: _local(f, name) for name, f in items.items()}
        schemas = {name: _polars_schema(f) for name, f in self.frames.items()}
        self.job = core.unified_job(spec, schemas, broadcast, aggregate, for_diagnose=for_diagnose)
        core.refuse_row_order(spec, "Spark")
        self.schemas = dict(self.job.schemas)
        self.keep = None if for_diagnose else core.row_filter(self.job)
        self.stacked_names = _stacked_names(self.schemas)
        self.tagged = {name: self._tagged(name) for name in self.frames}
        shared = core.global_tables(self.job, self.collect, self.distinct, has_recs=self.has_recs)
        self.job = core.Job(spec, aggregate, self.schemas, broadcast, shared)

    def _tagged(self, name: str) -> Any:
        """One user frame with a tag of its position and its stacked columns.

        All in Spark: the key columns cast to the dtypes every frame shares (so one user
        is one stacked value, which hashes alike whichever frame it came from), the
        recommendations below the largest cutoff left out while reading. The rows cross
        into Python once, in the per-partition run (``per_partition``), which applies the
        exact row rule.
        """
        from pyspark.sql import functions as F

        schema = self.schemas[name]
        index = list(self.frames).index(name)
        frame = self.frames[name]
        if name == "recs" and self.keep is not None:
            frame = frame.where(self._coarse_keep())
        # (Spark drops a cast to the column's own type.)
        types = {f.name: f.dataType for f in _spark_schema(pl.DataFrame(schema=schema)).fields}
        cast = {c: _column(c).cast(types[c]) for c in schema}
        return frame.select(
            F.lit(index).cast("byte").alias(_TAG),
            *(cast[c].alias(self.stacked_names[name][c]) for c in schema),
        )

    def _coarse_keep(self) -> Any:
        """``core.keep_rule`` as a Spark filter.

        Spark applies it while reading (its vectorised parquet reader), so the rows below
        the largest cutoff never reach Python; polars' filter is applied again in each
        partition.
        """
        from pyspark.sql import functions as F

        rule = core.keep_rule(self.job)
        assert rule is not None  # only called when row_filter gave a filter
        rank = _column(rule.rank)
        keep = rank <= rule.max_k
        for col in rule.nullable:
            keep = keep | _column(col).isNull()
        if rule.whole:
            infinite = F.abs(rank) == F.lit(float("inf"))
            keep = keep | F.isnan(rank) | infinite | (rank != F.floor(rank))
        return keep

    def stacked(self, names: tuple[str, ...]) -> Any:
        """The named frames' tagged rows, stacked (missing columns null)."""
        out = None
        for name in names:
            part = self.tagged[name]
            out = part if out is None else out.unionByName(part, allowMissingColumns=True)
        return out

    def per_partition(
        self,
        fn: Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame],
        meta: pl.DataFrame,
        names: tuple[str, ...] | None = None,
    ) -> Any:
        """``fn`` on each partition's frames (all, or ``names``), lazily: a Spark DataFrame."""
        names = tuple(self.frames) if names is None else names
        # Only plain values in the closure: Spark pickles it for the workers.
        positions = {name: list(self.frames).index(name) for name in names}
        schemas = self.schemas
        stacked_names = {name: self.stacked_names[name] for name in names}
        keep = self.keep

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            parts = [b for b in batches if b.num_rows]
            if parts:  # an empty partition has no user
                table = pa.Table.from_batches(parts)
                frames = _unstack(table, positions, schemas, stacked_names)
                if keep is not None and "recs" in frames:
                    # polars' own row rule (Spark's filter while reading is the same rule
                    # in Spark's expressions).
                    frames["recs"] = frames["recs"].filter(keep)
                out = fn(frames)
                yield from _arrow(out.cast(meta.schema)).to_batches()

        # One polars run per partition, holding whole users: Spark's adaptive execution
        # merges the shuffle's partitions into ones of about
        # spark.sql.adaptive.advisoryPartitionSizeInBytes, so their number follows the
        # data (a group per bucket value ran polars once per handful of users: 200
        # groups of a few rows took 36 s for 2,320 rows).
        # The stacked user key (one column per key column, in the unified dtypes) is
        # hashed where the rows are partitioned, not written as a column first: a
        # materialised bucket was 8 more bytes per row through the shuffle (reading and
        # writing it 5.1 -> 4.4 s at 1M users). The hash is the one the bucket held: each
        # user goes to the shuffle partition it went to before.
        from pyspark.sql import functions as F

        first = next(iter(stacked_names.values()))
        user = [_column(first[c]) for c in self.job.spec.columns.user]
        bucket = F.pmod(F.xxhash64(*user), F.lit(1 << 30))
        return self.stacked(names).repartition(bucket).mapInArrow(run, _spark_schema(meta))

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
        out = pl.from_arrow(self.per_partition(fn, meta, names).toArrow())
        assert isinstance(out, pl.DataFrame)
        return out.cast(meta.schema) if out.height else meta

    def distinct(self, cols: list[str]) -> pl.DataFrame:
        """The distinct values of recs' ``cols``."""
        recs = self.frames["recs"]
        out = pl.from_arrow(recs.select(*(_column(c) for c in cols)).distinct().toArrow())
        assert isinstance(out, pl.DataFrame)
        return out.cast({c: self.schemas["recs"][c] for c in cols})

    def has_recs(self) -> bool:
        """Whether recs has a row."""
        return bool(self.frames["recs"].limit(1).count())


def _stacked_names(schemas: Mapping[str, pl.Schema]) -> dict[str, dict[str, str]]:
    """Each frame's column names in the stacked frame.

    A column of the same name and dtype in several frames (the user and item keys, once
    unified) is one stacked column, named after the first of them, so the rows of the
    stack are no wider than they must be: each column is a cell per row of every frame
    in the shuffle and in the Arrow batches, null in the rows of the frames without it.
    Names are prefixed by a frame's position (``0|user``), which no name of ours starts with.
    """
    first: dict[tuple[str, pl.DataType], str] = {}
    out: dict[str, dict[str, str]] = {}
    for i, (name, schema) in enumerate(schemas.items()):
        out[name] = {c: first.setdefault((c, d), f"{i}|{c}") for c, d in schema.items()}
    return out


def _unstack(
    table: pa.Table,
    positions: Mapping[str, int],
    schemas: Mapping[str, pl.Schema],
    stacked_names: Mapping[str, Mapping[str, str]],
) -> dict[str, pl.DataFrame]:
    """One partition's stacked rows as each frame's own rows and columns."""
    rows = pl.from_arrow(table)
    assert isinstance(rows, pl.DataFrame)
    frames = {}
    for name, i in positions.items():
        mine = rows.filter(pl.col(_TAG) == i)
        names = stacked_names[name]
        frames[name] = mine.select(
            pl.col(names[c]).cast(d).alias(c) for c, d in schemas[name].items()
        )
    return frames


def evaluate(
    spec: Spec, recs: Any, truth: Any, extras: Mapping[str, object | None], *, aggregate: bool
) -> Any:
    """:func:`frame_metrics.evaluate` on Spark DataFrames; gives a Spark DataFrame."""
    with _without_pandas_notice(), _our_actions(recs.sparkSession):
        return _evaluate(spec, recs, truth, extras, aggregate=aggregate)


def _evaluate(
    spec: Spec, recs: Any, truth: Any, extras: Mapping[str, object | None], *, aggregate: bool
) -> Any:
    from pyspark.sql import functions as F

    run = _Run(spec, recs, truth, extras, aggregate=aggregate)
    job = run.job
    meta = pl.DataFrame(schema=core.result_schema(job))
    if spec.validate and aggregate:
        # The pass the checks need gives the sums too, a few rows per partition: they
        # are added up here, with no cached plan or second Spark job left behind.
        sums = _checked_rows(run, meta)
        return like(recs, core.finish(sums, job))
    if spec.validate:
        result = _checked(run, meta)
    else:
        result = run.per_partition(lambda frames: core.partition_result(frames, job), meta)
    if not aggregate:
        return result
    final_meta = core.finish(meta, job)

    def finish(table: pa.Table) -> pa.Table:
        sums = pl.from_arrow(table)
        assert isinstance(sums, pl.DataFrame)
        out = core.finish(sums.drop(_ONE).cast(meta.schema), job)
        return _arrow(out.cast(final_meta.schema))

    # One partition holds the one group: no shuffle into 200 mostly empty partitions.
    one = result.withColumn(_ONE, F.lit(1)).repartition(1, _ONE)
    return one.groupBy(_ONE).applyInArrow(finish, _spark_schema(final_meta))


def _checked_rows(run: _Run, meta: pl.DataFrame) -> pl.DataFrame:
    """The checks and the (small) result in one Spark job: the result, on the driver."""
    rows = pl.from_arrow(run.checked_pass().toArrow())
    assert isinstance(rows, pl.DataFrame)
    return core.result_after_checks(rows, meta.schema)


def _checked(run: _Run, meta: pl.DataFrame) -> Any:
    """The result after the checks, from one pass over the data.

    Every partition's failures and result are computed together and kept (persisted);
    the failures raise, the result reads the kept rows. The cached plan is unpersisted
    when the DataFrame returned is no longer referenced (``weakref.finalize``): the
    session would otherwise hold it until it stops, and calls in a loop would pile up
    cached results. A frame derived from the result and kept longer is still right,
    recomputed from its plan (the checks passed, they are not run again).
    """
    from pyspark.sql import functions as F

    combined = _persisted(run.checked_pass())
    is_failure = F.col(core.TAG) == "failure"
    failures = pl.from_arrow(combined.filter(is_failure).select(*core.failure_columns()).toArrow())
    assert isinstance(failures, pl.DataFrame)
    try:
        core.raise_first(failures)
    except Exception:
        combined.unpersist()
        raise
    result = combined.filter(~is_failure).select(*(_column(c) for c in meta.columns))
    # Not at interpreter exit: the session may be gone by then.
    weakref.finalize(result, _unpersist, combined).atexit = False
    return result


def _unpersist(frame: Any) -> None:
    """``frame.unpersist()``, unless its session has stopped (nothing is cached then)."""
    with contextlib.suppress(Exception):
        frame.unpersist()


#: Spark caches a plan with adaptive execution's partition merging turned off, unless
#: this is true when the plan is cached.
_CACHED_PLAN_PARTITIONING = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"

#: Rows per Arrow batch between the JVM and the Python workers. Spark's default (10,000)
#: makes the batches a cost: 10M recommendation rows and 7.5M truth rows, stacked, took
#: 12.2-12.7 s to reach Python in batches of 10,000 and 9.0-9.1 s in batches of 100,000
#: (1M users, local[2], no metric); a batch of a few columns of 100,000 rows is a few MB.
_ARROW_BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
_OUR_BATCH_ROWS = 100_000


@contextlib.contextmanager
def _session_conf(session: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """The session's ``settings`` while the block runs, its own values restored after.

    Only a setting the user has not made is changed (theirs is kept): Spark reads these
    when a plan is executed or cached, so they hold for the actions run inside.
    """
    conf = session.conf
    changed = {key: value for key, value in settings.items() if conf.get(key, None) is None}
    for key, value in changed.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key in changed:
            conf.unset(key)


@contextlib.contextmanager
def _our_actions(session: Any) -> Iterator[None]:
    """Settings for the Spark jobs a call runs itself (checks, tables over every user).

    A worker that cannot import a module this Python has (pyarrow, polars, the package
    itself) is a worker on another Python: its 40-line ``PythonException`` becomes one
    :class:`MissingDependencyError` that says so and how to fix it
    (:func:`_missing_on_workers`).
    """
    with _session_conf(session, {_ARROW_BATCH_ROWS: str(_OUR_BATCH_ROWS)}):
        try:
            yield
        except Exception as error:
            missing = _missing_on_workers(error, session)
            if missing is None:
                raise
            raise missing from None


#: How a Python worker's traceback ends when an import failed.
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _worker_python(session: Any) -> str | None:
    """The Python Spark starts its workers with, as PySpark gives it to them.

    ``PYSPARK_PYTHON`` when the session started, else ``python3`` of the PATH; ``None``
    on Spark Connect, whose client has no SparkContext (the server decides).
    """
    try:
        return str(session.sparkContext.pythonExec)
    except Exception:
        return None


def _missing_on_workers(error: BaseException, session: Any) -> MissingDependencyError | None:
    """The error to raise for ``error``, a Spark job's, when it is a worker's failed import.

    ``None`` when it is not one: not a ``PythonException``, no ``ModuleNotFoundError``
    in its text, or a module this Python lacks too (then it is not about which Python
    the workers run). ``name`` is the module; the message names the workers' Python and
    this one, and the fix: ``PYSPARK_PYTHON`` set to this interpreter before the session
    starts (PySpark reads it then), or the module installed where the workers run.

    Examples
    --------
    >>> class PythonException(Exception):
    ...     pass
    >>> class Context:
    ...     pythonExec = "/opt/other/python3"
    >>> class Session:
    ...     sparkContext = Context()
    >>> failure = PythonException("ModuleNotFoundError: No module named 'pyarrow'")
    >>> error = _missing_on_workers(failure, Session())
    >>> error.name, str(error).startswith("expected pyarrow on the Python of Spark's workers")
    ('pyarrow', True)
    >>> _missing_on_workers(PythonException("ZeroDivisionError: division by zero"), Session())
    """
    # By its name, which classic sessions' (pyspark.errors.exceptions.captured) and
    # Spark Connect's (pyspark.errors.exceptions.connect) share: no pyspark import here.
    if type(error).__name__ != "PythonException":
        return None
    found = _NO_MODULE.search(str(error))
    if found is None:
        return None
    module = found.group(1)
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    here = sys.executable
    worker = _worker_python(session)
    if worker is None:
        runs = "they run on the Spark Connect server"
        fix = (
            f"install {module} there, or start the server with PYSPARK_PYTHON set to a "
            "Python that has it"
        )
    else:
        path = worker if os.path.isabs(worker) else shutil.which(worker)
        notes = [] if path in (None, worker) else [f"{path} here"]
        if worker == "python3" and "PYSPARK_PYTHON" not in os.environ:
            notes.append("PYSPARK_PYTHON is not set")  # PySpark's default, python3 of the PATH
        where = worker + (f" ({'; '.join(notes)})" if notes else "")
        # Paths compared as written: a virtual environment's python links to its base
        # Python's, which does not see the environment's packages.
        if path is not None and os.path.abspath(path) == os.path.abspath(here):
            runs = f"they run {where}, this Python's path, on machines where it lacks {module}"
            fix = f"install {module} where the workers run: pip install 'frame_metrics[spark]'"
        else:
            runs = f"they run {where}, another Python than this one ({here})"
            fix = f"set PYSPARK_PYTHON={here} in the environment before the Spark session starts"
    # The class's own constructor advises pip install, which is not the fix here: its
    # message is given as FrameMetricsError's parts, and its name set as it sets it.
    missing = MissingDependencyError.__new__(MissingDependencyError)
    FrameMetricsError.__init__(
        missing, f"expected {module} on the Python of Spark's workers, not found: {runs}; {fix}"
    )
    missing.name = module
    return missing


def _persisted(frame: Any) -> Any:
    """``frame.persist()``, its shuffle's partitions still merged to the data's size.

    Without it each of the 200 shuffle partitions (Spark's default) would stay one
    polars run. The session's setting is set only while the plan is cached.
    """
    with _session_conf(frame.sparkSession, {_CACHED_PLAN_PARTITIONING: "true"}):
        return frame.persist()


def diagnose(spec: Spec, recs: Any, truth: Any, extras: Mapping[str, object | None]) -> Diagnostics:
    """:func:`frame_metrics.diagnose` on Spark DataFrames."""
    with _without_pandas_notice(), _our_actions(recs.sparkSession):
        run = _Run(spec, recs, truth, extras, aggregate=False, for_diagnose=True)
        return core.run_diagnostics(run.collect, run.job)


def to_polars(frame: Any) -> pl.DataFrame:
    """Collect a Spark DataFrame into a polars DataFrame (on the driver), through Arrow."""
    return _local(frame, "frame")


def like(frame: Any, result: pl.DataFrame) -> Any:
    """``result`` as a Spark DataFrame of ``frame``'s session."""
    return frame.sparkSession.createDataFrame(_arrow(result))


# --------------------------------------------------------------------------- fm.split


def polars_schema(frame: Any) -> pl.Schema:
    """The polars schema of a Spark DataFrame's rows as they reach Python (Arrow)."""
    return _polars_schema(frame)


#: Spark compresses a cached plan's columns unless this is false when it is cached:
#: for the labelled rows, kept a short while, compressing cost 3 s of 10M rows against
#: 0.4 s for the rows as they are (local[2]).
_CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


@contextlib.contextmanager
def split_parts(frame: Any, key: list[str], schema: pl.Schema) -> Iterator[_SplitParts]:
    """``frame``'s rows hash-partitioned by ``key``, for :mod:`frame_metrics.distributed.split`.

    Nothing is cached while the values over every row are computed: each pass reads the
    input again (one read and shuffle of it costs less than caching it); the labelled
    rows are cached, and stay after the block.
    """
    with _without_pandas_notice(), _our_actions(frame.sparkSession):
        yield _SplitParts(frame, key, schema)


def _mapped(frame: Any, fn: PartFn, schema: Mapping[str, pl.DataType], meta: pl.DataFrame) -> Any:
    """``fn`` on each partition's rows of ``frame`` (polars frames of ``schema``), lazily.

    The function carries only plain values and polars objects: Spark pickles it for the
    workers. An empty partition gives no row.
    """
    types = pl.Schema(schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        if parts:
            rows = pl.from_arrow(pa.Table.from_batches(parts))
            assert isinstance(rows, pl.DataFrame)
            out = conform(fn(rows.cast(types)), meta)
            # In batches as Spark sends them: one batch of a partition's millions of rows
            # is one allocation of that size in the JVM.
            yield from _arrow(out).to_batches(max_chunksize=_OUR_BATCH_ROWS)

    return frame.mapInArrow(run, _spark_schema(meta))


def _collected(frame: Any, meta: pl.DataFrame) -> pl.DataFrame:
    out = pl.from_arrow(frame.toArrow())
    assert isinstance(out, pl.DataFrame)
    return out.cast(meta.schema) if out.height else meta.clear()


def _passed(
    source: Any,
    schema: pl.Schema,
    fn: PartFn,
    meta: pl.DataFrame,
    regroup: str | None,
    combine: PartFn | None,
) -> pl.DataFrame:
    """``fn`` on each partition of ``source``; regrouped and combined; here."""
    out = _mapped(source, fn, schema, meta)
    if regroup is not None:
        assert combine is not None
        out = _mapped(out.repartition(_column(regroup)), combine, meta.schema, meta)
    return _collected(out, meta)


class _SplitParts:
    """:class:`frame_metrics.distributed.split.Parts` on a Spark DataFrame."""

    def __init__(self, frame: Any, key: list[str], schema: pl.Schema) -> None:
        self.frame = frame
        self.key = key
        self.schema = schema

    def _shuffled(self, columns: Sequence[str]) -> Any:
        """``columns`` of the rows, hash-partitioned by the user key (Spark's, adaptive)."""
        wanted = list(dict.fromkeys([*self.key, *columns]))
        moved = self.frame.select(*(_column(c) for c in wanted))
        return moved.repartition(*(_column(k) for k in self.key)).select(
            *(_column(c) for c in columns)
        )

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
        schema = pl.Schema({c: self.schema[c] for c in columns})
        return _passed(self._shuffled(columns), schema, fn, meta, regroup, combine)

    def distinct(self, columns: Sequence[str]) -> pl.DataFrame:
        """The distinct values of ``columns`` (Spark's aggregate), here."""
        rows = self.frame.select(*(_column(c) for c in columns)).distinct()
        return _collected(rows, pl.DataFrame(schema={c: self.schema[c] for c in columns}))

    def largest(self, column: str) -> pl.Series:
        """The largest value of ``column`` (Spark's aggregate)."""
        from pyspark.sql import functions as F

        found = self.frame.agg(F.max(_column(column)).alias(column))
        return _collected(found, pl.DataFrame(schema={column: self.schema[column]}))[column]

    def label(self, fn: PartFn, meta: pl.DataFrame, tally: Tally) -> _SplitRows:
        """The labelled rows, cached as they are (uncompressed) when first read.

        Each partition's summary rows come after its rows (:func:`_summarised`).
        """
        marked = _summarised(meta, fn=lambda rows: rows, tally=tally).clear()
        run = functools.partial(_summarised, fn=fn, tally=tally)
        source = self._shuffled(list(self.schema.names()))
        labelled = _mapped(source, run, self.schema, marked)
        session = self.frame.sparkSession
        with _session_conf(session, {_CACHE_COMPRESSED: "false"}):
            kept = _persisted(labelled)
        return _SplitRows(kept, marked.schema, tally)


#: Which row of a labelled partition a row is: one of its rows, then its summary: an
#: item's tally, a check's value (a count's low 31 bits in ``FOLD``, or a least or
#: largest value in its column) and a count's high bits (``DROP``: which check).
_MARK = f"{RESERVED_PREFIX}mark"
_ROW, _TALLY, _VALUE, _HIGH_BITS = 0, 1, 2, 3
_WORD = 1 << 31  # a count is two such words: FOLD is Int32


def _summarised(part: pl.DataFrame, fn: PartFn, tally: Tally) -> pl.DataFrame:
    """``fn``'s rows of the partition, then its summary rows (:data:`_MARK`).

    The summary comes out of the labelling pass itself and is cached after the rows:
    Spark reads it with a filter on the mark, which skips every cached batch of rows by
    its statistics, instead of a group-by over every cached row.
    """
    rows = fn(part)

    def marked(frame: pl.DataFrame, code: int) -> pl.DataFrame:
        return frame.with_columns(pl.lit(code, pl.Int8).alias(_MARK))

    out = [marked(rows, _ROW)]
    if FOLD in rows.columns:  # else unlabelled rows the checks refuse: they raise
        out.append(marked(tally.items(rows), _TALLY))
    checks = tally.checks(part)
    for i, aggregate in enumerate(tally.aggregates):
        which = pl.lit(i, pl.Int8).alias(DROP)
        value = pl.col(aggregate.name)
        if aggregate.kind in ("min", "max"):
            out.append(marked(checks.select(value.alias(aggregate.columns[0]), which), _VALUE))
        else:
            low = (value % _WORD).cast(pl.Int32).alias(FOLD)
            out.append(marked(checks.select(low, which), _VALUE))
            high = (value // _WORD).cast(pl.Int32).alias(FOLD)
            out.append(marked(checks.select(high, which), _HIGH_BITS))
    return pl.concat(out, how="diagonal_relaxed")


def _checks_of(rows: pl.DataFrame, tally: Tally) -> pl.DataFrame:
    """The checks' values over every partition from their summary rows (one row).

    Each summary row gives one check its part (a count's word, scaled; a least or
    largest value), the others null: :func:`added_up` adds the parts as it adds
    partitions' values.
    """
    which, mark = pl.col(DROP), pl.col(_MARK)
    parts = []
    for i, aggregate in enumerate(tally.aggregates):
        if aggregate.kind in ("min", "max"):
            part = pl.col(aggregate.columns[0])
        else:
            bits = pl.col(FOLD).cast(pl.Int64)
            part = pl.when(mark == _HIGH_BITS).then(bits * _WORD).otherwise(bits)
        parts.append(pl.when(which == i).then(part).alias(aggregate.name))
    return added_up(rows.select(parts), tally.aggregates)


class _SplitRows:
    """:class:`frame_metrics.distributed.split.Labelled`: the cached labelled rows.

    The cache is dropped when this object and every frame given out of it are no longer
    referenced (each frame holds it): a loop of calls does not pile up cached rows. A
    frame derived from one of them and kept longer is still right, recomputed from its
    plan.
    """

    def __init__(self, kept: Any, schema: pl.Schema, tally: Tally) -> None:
        from pyspark.sql import functions as F

        self._kept = kept
        self._rows = kept.where(F.col(_MARK) == _ROW).drop(_MARK)
        self._schema = schema
        self._tally = tally
        self._cold: Any = None
        weakref.finalize(self, _unpersist, kept).atexit = False

    def summary(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The checks' values and the cold candidates, from the cached summary rows.

        The first read fills the cache. The checks' rows are a few per partition, read
        here; the items' tallies are grouped by item by Spark, and only the cold
        candidates (or, for time windows, every item's earliest time) come here.
        """
        from pyspark.sql import functions as F

        tally, mark = self._tally, F.col(_MARK)
        valued = sorted({a.columns[0] for a in tally.aggregates if a.kind in ("min", "max")})
        wanted = [_MARK, DROP, FOLD, *valued]
        meta = pl.DataFrame(schema={c: self._schema[c] for c in wanted})
        found = _collected(self._kept.where(mark >= _VALUE).select(*wanted), meta)
        items = self._kept.where(mark == _TALLY)
        if tally.time is not None:
            first = F.min(_column(tally.time)).alias(ITEM_FIRST)
            rows = items.groupBy(_column(tally.item)).agg(first)
            meta = pl.DataFrame(
                schema={tally.item: self._schema[tally.item], ITEM_FIRST: self._schema[tally.time]}
            )
        else:
            fold = _column(FOLD)
            ranged = items.groupBy(_column(tally.item)).agg(
                F.min(fold).alias(_COLD_FOLD), F.max(fold).alias("_fm_hi")
            )
            one = (F.col(_COLD_FOLD) == F.col("_fm_hi")) & (F.col(_COLD_FOLD) >= 0)
            rows = ranged.where(one).select(_column(tally.item), F.col(_COLD_FOLD).alias(FOLD))
            meta = pl.DataFrame(
                schema={tally.item: self._schema[tally.item], FOLD: self._schema[FOLD]}
            )
        return _checks_of(found, tally), _collected(rows, meta)

    def use_cold(self, cold: pl.DataFrame) -> None:
        """The cold ``(item, FOLD)`` pairs, applied to every read from now on."""
        if cold.height:
            named = cold.select(
                pl.col(self._tally.item).alias(_COLD_ITEM), pl.col(FOLD).alias(_COLD_FOLD)
            )
            self._cold = self._kept.sparkSession.createDataFrame(_arrow(named))

    def _final(self) -> Any:
        """The kept rows with the cold-item filter: a join with the small cold table.

        :func:`frame_metrics.splits.with_cold_items` in Spark's words: a candidate kept
        or dropped as already seen (0, 3) whose item is cold in its fold becomes 2.
        """
        if self._cold is None:
            return self._rows
        from pyspark.sql import functions as F

        on = (_column(self._tally.item) == F.col(_COLD_ITEM)) & (_column(FOLD) == F.col(_COLD_FOLD))
        joined = self._rows.join(F.broadcast(self._cold), on, "left")
        drop = _column(DROP)
        cold = F.col(_COLD_FOLD).isNotNull() & drop.isin(0, 3)
        code = F.when(cold, F.lit(2).cast("byte")).otherwise(drop)
        return joined.withColumn(DROP, code).drop(_COLD_ITEM, _COLD_FOLD)

    def run(
        self,
        fn: PartFn,
        meta: pl.DataFrame,
        columns: Sequence[str],
        *,
        regroup: str | None = None,
        combine: PartFn | None = None,
    ) -> pl.DataFrame:
        """``fn`` on each partition of the kept rows (a broadcast join keeps them as they are)."""
        source = self._final().select(*(_column(c) for c in columns))
        schema = pl.Schema({c: self._schema[c] for c in columns})
        with _without_pandas_notice(), _our_actions(self._kept.sparkSession):
            return _passed(source, schema, fn, meta, regroup, combine)

    def rows(
        self, conditions: Sequence[Condition], columns: Sequence[str], fold_as: str | None
    ) -> Any:
        """The labelled rows meeting ``conditions``, with ``columns`` (and ``fold_as``)."""
        frame = self._final()
        keep = None
        for condition in conditions:
            column = _column(condition.column)
            if condition.op == "==":
                test = column == condition.value
            elif condition.op == "!=":
                test = column != condition.value
            else:
                test = column <= condition.value
            keep = test if keep is None else keep & test
        chosen = [_column(c) for c in columns]
        if fold_as is not None:
            chosen.append(_column(FOLD).cast("long").alias(fold_as))
        out = frame.where(keep).select(*chosen)
        with contextlib.suppress(AttributeError, TypeError):
            out._fm_kept = self  # the cache lives while the frame does
        return out

    def release(self) -> None:
        """Drop the cached rows now."""
        _unpersist(self._kept)


_COLD_ITEM = "_fm_cold_item"
_COLD_FOLD = "_fm_cold_fold"
