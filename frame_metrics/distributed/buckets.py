"""Buckets of user keys one after another, on one machine: inputs larger than memory.

The engine's memory follows its hash tables (the hit join, the per-user group-bys, the
duplicate checks), which follow the number of users in one query. Splitting the users
into buckets and evaluating them one after another, as the Spark and Dask adapters do
in parallel (:mod:`frame_metrics.distributed.core`), divides that memory by the number
of buckets; the means, pooled errors and corpus metrics are added up from every bucket's
sums.

A single integer user column is split into ranges of ids, so that parquet files written
in user order are read once in all (a bucket's filter skips the row groups of the
others); any other key is split by a hash, and each bucket reads every row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import polars as pl

from frame_metrics.diagnosis import report, screens
from frame_metrics.distributed import core
from frame_metrics.family import ENGINE
from frame_metrics.frames import to_lazy
from frame_metrics.planner import reads
from frame_metrics.progress import Progress
from frame_metrics.spec import Spec

__all__ = ["BUCKET_ROWS", "auto_buckets", "evaluate"]

#: ``buckets="auto"``: one bucket per this many recommendation rows (at 250M rows a
#: bucket peaks near 3 GB with P, R, MAP, NDCG and MRR at k=10).
BUCKET_ROWS = 250_000_000


def auto_buckets(recs: pl.LazyFrame) -> int:
    """The number of buckets for ``recs``: its rows over :data:`BUCKET_ROWS`.

    Counting the rows of a parquet scan reads only the files' metadata.

    Examples
    --------
    >>> auto_buckets(pl.LazyFrame({"user": [1, 2]}))
    1
    """
    rows = int(recs.select(pl.len()).collect().item())
    return max(1, math.ceil(rows / BUCKET_ROWS))


def _conditions(
    frames: Mapping[str, pl.LazyFrame], user: list[str], schema: pl.Schema, n: int
) -> list[pl.Expr]:
    """One filter per bucket that holds a user, covering every row of every frame once.

    Of the ``n`` buckets asked for, only those holding a user get a filter (each is one
    pass over the inputs), found in one pass over the user columns: never more than the
    distinct users, and no Python loop over ``n``. Rows with a null key go to the first
    bucket, where the checks report them.
    """
    if len(user) == 1 and schema[user[0]].is_integer():
        col = pl.col(user[0])
        ends = [f.select(col.min().alias("lo"), col.max().alias("hi")) for f in frames.values()]
        lo, hi = pl.concat(ends).select(pl.col("lo").min(), pl.col("hi").max()).collect().row(0)
        if lo is None:
            return [pl.lit(True)]
        lo, hi = int(lo), int(hi)
        step = max(1, math.ceil((hi - lo + 1) / n))
        # Int128 holds every difference of two ids of the (at most 64-bit) key dtypes.
        bucket = (col.cast(pl.Int128) - lo) // step
        ranges = [
            col.is_between(lo + b * step, lo + (b + 1) * step - 1) for b in _used(frames, bucket)
        ]
        return [ranges[0] | col.is_null(), *ranges[1:]]
    key = pl.col(user[0]) if len(user) == 1 else pl.struct(user)
    bucket = key.hash(seed=0) % n  # a null key has a hash too: its rows are in a bucket
    # Every frame empty: one bucket, for the empty result.
    return [bucket == b for b in _used(frames, bucket)] or [pl.lit(True)]


def _used(frames: Mapping[str, pl.LazyFrame], bucket: pl.Expr) -> list[int]:
    """The buckets holding a row of some frame, ascending (at most one per user)."""
    ids = pl.concat([f.select(bucket.alias("b")) for f in frames.values()]).unique()
    return sorted(int(b) for b in ids.drop_nulls().collect(engine=ENGINE)["b"])


def _screen(job: core.Job, frames: Mapping[str, pl.LazyFrame], first: pl.Expr) -> None:
    """Warn of what the call likely did not mean (:func:`frame_metrics.diagnosis.screens`).

    The ids' sample is the first bucket's: one more read of that bucket's users (with
    ranges of ids and parquet statistics, of its row groups alone); every row is read
    again only when a sample breaks its rule.
    """
    looks = screens(job.spec, frames["recs"], frames.get("truth"), within=first)
    queries = [s.queries() for s in looks]
    report(looks, queries, pl.collect_all([q for qs in queries for q in qs], engine=ENGINE))


def evaluate(
    spec: Spec,
    recs: object,
    truth: object,
    extras: Mapping[str, object | None],
    *,
    aggregate: bool,
    buckets: int,
    progress: bool,
) -> pl.DataFrame:
    """:func:`frame_metrics.evaluate` over ``buckets`` buckets of users, one after another."""
    keyed, items = core.split_inputs(recs, truth, extras)
    # The frames keyed by user are read bucket by bucket: only the columns the call
    # reads are converted (the item tables are small, and read whole).
    read = reads(spec)
    frames = {name: to_lazy(f, name, read[name]).lazy for name, f in keyed.items()}
    broadcast = {name: to_lazy(f, name).lazy.collect() for name, f in items.items()}
    raw = {name: f.collect_schema() for name, f in frames.items()}
    job = core.unified_job(spec, raw, broadcast, aggregate)
    schemas = dict(job.schemas)
    c = spec.columns
    user = list(c.user)
    keys = [*c.by, *user, c.item]
    # Frames whose user key already has the shared dtype are filtered before anything
    # else, so that the filter reaches the scan (parquet statistics skip row groups).
    as_is = {name for name in frames if all(raw[name][u] == schemas[name][u] for u in user)}
    typed = {
        name: f.with_columns(pl.col(c).cast(schemas[name][c]) for c in keys if c in schemas[name])
        for name, f in frames.items()
    }
    conditions = _conditions(typed, user, schemas["recs"], buckets)
    bar = Progress(
        len(conditions), "frame_metrics: buckets", enabled=progress, delay=2.0, unit="bucket"
    )

    def bucket(cond: pl.Expr, names: tuple[str, ...]) -> dict[str, pl.LazyFrame]:
        return {
            name: (
                frames[name]
                .filter(cond)
                .with_columns(pl.col(c).cast(schemas[name][c]) for c in keys if c in schemas[name])
                if name in as_is
                else typed[name].filter(cond)
            )
            for name in names
        }

    def collect(
        fn: Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame],
        names: tuple[str, ...] | None = None,
    ) -> pl.DataFrame:
        chosen = tuple(typed) if names is None else names
        parts = [fn(bucket(cond, chosen)) for cond in conditions]  # type: ignore[arg-type]
        return pl.concat(parts, how="vertical_relaxed")

    def distinct(cols: list[str]) -> pl.DataFrame:
        return typed["recs"].select(cols).unique().collect(engine=ENGINE)

    def has_recs() -> bool:
        return typed["recs"].select(user).head(1).collect().height > 0

    shared = core.global_tables(job, collect, distinct, has_recs=has_recs)
    job = core.Job(spec, aggregate, schemas, broadcast, shared)
    step = core.partition_checked_result if spec.validate else core.partition_result
    parts = []
    try:
        for cond in conditions:
            parts.append(step(bucket(cond, tuple(typed)), job))  # type: ignore[arg-type]
            bar.update()
    finally:
        bar.close()
    rows = pl.concat(parts, how="vertical_relaxed")
    if spec.validate:
        core.raise_first(rows.filter(pl.col(core.TAG) == "failure").select(core.failure_columns()))
        _screen(job, typed, conditions[0])
        meta = core.result_schema(job)
        rows = rows.filter(pl.col(core.TAG) == "result").select(list(meta)).cast(meta)
    if aggregate:
        return core.finish(rows, job)
    return rows.sort(c.keys)
