"""Spark and Dask against polars and Recommenders' SparkRankingEvaluation, same data.

Each job runs on the harness (``harness.py``) in a fresh process; peak memory is the
whole process tree's (Spark's JVM and Python workers, Dask's worker processes), sampled
every 50 ms. Times include reading the parquet files and, for Spark and Dask, the work
at ``evaluate`` time (checks, global tables) plus collecting the aggregate; the session
or cluster start is untimed and reported apart (``start s``).

Jobs (P, R, MAP, NDCG, MRR at k=10 unless said; ``aggregate=True``):

- ``polars``: ``fm.evaluate`` on ``pl.read_parquet`` frames (the single-machine engine);
- ``fm-spark``: ``fm.evaluate`` on Spark frames, ``local[2]``, result ``.toArrow()``;
- ``fm-dask``: ``fm.evaluate`` on dask frames, a ``LocalCluster`` of 2 worker processes;
- ``recommenders-spark``: ``SparkRankingEvaluation(..., k=10, relevancy_method="top_k")``
  precision, recall, NDCG and MAP (its conventions: binary relevance, MAP over the
  relevant items, ranking by score);
- ``spark-plumbing`` and ``dask-plumbing``: no metric, only what any per-user
  computation on the engine must do first, written with the engine's own API: read the
  same columns, keep the rows ranked within the cutoff, hash-partition recommendations
  and truth by user, hand every partition's rows to Python (Spark: ``mapInArrow``; Dask:
  ``map_partitions`` on the shuffled pandas frames), count them; Spark's Arrow batches of
  100,000 rows, as in frame_metrics' own jobs. What ``fm-spark`` and ``fm-dask`` take
  beyond it is frame_metrics' own;
- ``fm-spark-2000``: ``fm.evaluate`` on 2,000 recommendation rows (the first 200 users)
  on a running session: the first call is timed, the second is reported apart
  (``second call s``).

The splits (``fm.split`` on Spark and Dask against the same floors) are in
``bench/split.py --distributed``.

Run ``python bench/distributed.py --users 1000000`` (data generated with
``bench/generate.py`` into ``--data-dir``, reused when present).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/distributed.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import peers  # noqa: E402
from engines import dask_client, spark_session  # noqa: E402
from engines import timed_start as _timed_start  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

# This file is named like dask's `distributed` package, which `dask.distributed` imports:
# with this directory first on sys.path, that import would find this file instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

K = 10
METRICS = [f"{m}@{K}" for m in peers.RANKING]
Paths = tuple[str, str, int]  # recs, truth, Spark shuffle partitions


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """``generate.make_data(users, seed=seed)`` as ``recs.parquet`` and ``truth.parquet``."""
    from generate import make_data, write_parquet

    recs, truth = make_data(params["users"], seed=params["seed"])
    write_parquet(recs, truth, data_dir)
    return {"rec_rows": recs.height, "truth_rows": truth.height}


def load(data_dir: Path, kind: str, params: harness.Params) -> Any:
    """The parquet paths: every job reads them inside its timed call."""
    return str(data_dir / "recs.parquet"), str(data_dir / "truth.parquet"), params["partitions"]


def prepare_polars(paths: Paths) -> Prepared:
    """``fm.evaluate`` on ``pl.read_parquet`` frames (the reading is timed)."""
    import polars as pl

    import frame_metrics as fm

    def run() -> Values:
        recs = pl.read_parquet(paths[0], columns=["user", "item", "rank"])
        out = fm.evaluate(recs, pl.read_parquet(paths[1]), metrics=METRICS, aggregate=True)
        return peers.fm_floats(out)

    return Prepared(run)


def prepare_spark(paths: Paths) -> Prepared:
    """``fm.evaluate`` on Spark frames, collected with ``toArrow()``."""
    import polars as pl

    import frame_metrics as fm

    spark, inner = _timed_start(lambda: spark_session(paths[2]))

    def run() -> Values:
        recs = spark.read.parquet(paths[0]).select("user", "item", "rank")
        out = fm.evaluate(recs, spark.read.parquet(paths[1]), metrics=METRICS, aggregate=True)
        return peers.fm_floats(pl.from_arrow(out.toArrow()))

    return Prepared(run, inner=inner, close=spark.stop)


def prepare_spark_plumbing(paths: Paths) -> Prepared:
    """Spark's own work under ``fm-spark``: read, filter, hash-partition, Arrow to Python."""
    from engines import spark_hand_over
    from pyspark.sql import functions as F

    spark, inner = _timed_start(lambda: spark_session(paths[2]))

    def run() -> Values:
        recs = spark.read.parquet(paths[0]).select("user", "item", "rank")
        recs = recs.where(F.col("rank") <= K).withColumn("tag", F.lit(0).cast("byte"))
        truth = spark.read.parquet(paths[1]).withColumn("tag", F.lit(1).cast("byte"))
        both = recs.unionByName(truth, allowMissingColumns=True)
        return {"rows": float(spark_hand_over(both, "user"))}

    return Prepared(run, inner=inner, close=spark.stop)


def prepare_spark_small(paths: Paths) -> Prepared:
    """``fm.evaluate`` on the first 200 users' top 10 (2,000 rows) on a running session."""
    import polars as pl

    import frame_metrics as fm

    spark, inner = _timed_start(lambda: spark_session(paths[2]))
    recs_pl = pl.read_parquet(paths[0], columns=["user", "item", "rank"])
    users = recs_pl["user"].unique().sort().head(200)
    recs_pl = recs_pl.filter(pl.col("user").is_in(users.implode()), pl.col("rank") <= K)
    truth_pl = pl.read_parquet(paths[1]).filter(pl.col("user").is_in(users.implode()))
    recs, truth = (
        spark.createDataFrame(recs_pl.to_arrow()),
        spark.createDataFrame(truth_pl.to_arrow()),
    )
    inner["rows"] = float(recs_pl.height)

    def call() -> Values:
        out = fm.evaluate(recs, truth, metrics=METRICS, aggregate=True)
        return peers.fm_floats(pl.from_arrow(out.toArrow()))

    def second() -> Values:
        t0 = time.perf_counter()
        call()
        return {"second call s": time.perf_counter() - t0}

    return Prepared(call, extras=second, inner=inner, close=spark.stop)


def prepare_dask(paths: Paths) -> Prepared:
    """``fm.evaluate`` on dask frames on a 2-process ``LocalCluster``."""
    import dask.dataframe as dd

    import frame_metrics as fm

    client, inner = _timed_start(dask_client)

    def run() -> Values:
        recs = dd.read_parquet(paths[0], columns=["user", "item", "rank"])
        out = fm.evaluate(recs, dd.read_parquet(paths[1]), metrics=METRICS, aggregate=True)
        return peers.fm_floats(out.compute())

    return Prepared(run, inner=inner, close=client.close)


def prepare_dask_plumbing(paths: Paths) -> Prepared:
    """Dask's own work under ``fm-dask``: read, filter, shuffle by user, hand to Python."""
    import dask.dataframe
    from engines import dask_hand_over

    dd: Any = dask.dataframe  # untyped
    client, inner = _timed_start(dask_client)

    def run() -> Values:
        recs = dd.read_parquet(paths[0], columns=["user", "item", "rank"])
        recs = recs[recs["rank"] <= K]
        truth = dd.read_parquet(paths[1])
        return {"rows": float(dask_hand_over([recs, truth], "user"))}

    return Prepared(run, inner=inner, close=client.close)


def prepare_recommenders(paths: Paths) -> Prepared:
    """Recommenders' SparkRankingEvaluation (see :func:`peers.prepare_recommenders_spark`)."""
    spark, inner = _timed_start(lambda: spark_session(paths[2]))
    prepared = peers.prepare_recommenders_spark(spark, paths[0], paths[1], K)
    prepared.inner, prepared.close = inner, spark.stop
    return prepared


FM = "frame_metrics"
JOBS = harness.job_table(
    Job("polars", FM, "fm.evaluate on pl.read_parquet frames", prepare_polars),
    Job("fm-spark", FM, "fm on Spark local[2]", prepare_spark, tree=True),
    Job("fm-dask", FM, "fm on Dask, 2 workers", prepare_dask, tree=True),
    Job(
        "spark-plumbing",
        "pyspark",
        "Spark: read, filter, hash-partition, Arrow to Python (no metric)",
        prepare_spark_plumbing,
        tree=True,
    ),
    Job(
        "dask-plumbing",
        "dask",
        "Dask: read, filter, shuffle by user, to Python (no metric)",
        prepare_dask_plumbing,
        tree=True,
    ),
    Job(
        "fm-spark-2000",
        FM,
        "fm on Spark, 2,000 rows, running session",
        prepare_spark_small,
        tree=True,
    ),
    Job(
        "recommenders-spark",
        "Recommenders",
        "SparkRankingEvaluation (top-10 rows given)",
        prepare_recommenders,
        tree=True,
    ),
)
SUITE = harness.Suite(
    "Spark and Dask against polars and Recommenders' SparkRankingEvaluation, same data.",
    Path(__file__).resolve(),
    JOBS,
    "polars",
    load,
    make_data,
    ("frame_metrics", "polars", "pandas", "pyspark", "dask", "recommenders"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """Every job named by ``--only`` (all by default) on the data of ``--users``."""
    wanted = harness.wanted_jobs(SUITE, args.only) or set(JOBS)
    jobs = [name for name in JOBS if name in wanted]
    stages = []
    if jobs:
        params, options = {"users": args.users, "seed": args.seed}, {"partitions": args.partitions}
        stages.append(
            Stage(args.users, Path(f"u{args.users}-s{args.seed}"), params, jobs, options=options)
        )
    return stages


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The session or cluster start and every job's values."""
    names = list(dict.fromkeys(n for r in results for n in r.all_values))
    rows = [["job", "start s", *names]]
    for r in results:
        label = r.job + (f" [{r.side}]" if r.side != harness.AFTER else "")
        start = harness.fmt_s(r.inner.get("start s", 0.0))
        rows.append(
            [label, start, *(f"{r.all_values[n]:.12g}" if n in r.all_values else "" for n in names)]
        )
    print(f"\n{args.users:,} users; Spark local[2], {args.partitions} shuffle partitions")
    print(harness.render(rows, args.markdown))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the jobs, print the timings and the values."""
    p = harness.parser(SUITE, users="1000000", repeats=1, timeout=900.0)
    p.set_defaults(data_dir=Path("/tmp/fmdist"))
    p.add_argument("--partitions", type=int, default=16, help="Spark shuffle partitions")
    args = p.parse_args(argv)
    args.users = harness.parse_sizes(args.users)[0]
    return harness.main(SUITE, args, plan, report)


if __name__ == "__main__":
    sys.exit(main())
