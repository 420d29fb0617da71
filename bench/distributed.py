"""Spark and Dask against polars and Recommenders' SparkRankingEvaluation, same data.

Each job runs in a fresh process; peak memory is the whole process tree's (Spark's JVM
and Python workers, Dask's worker processes), sampled every 50 ms. Times include
reading the parquet files and, for Spark and Dask, the work at ``evaluate`` time (checks,
global tables) plus collecting the aggregate; the session or cluster start is reported
apart.

Jobs (P, R, MAP, NDCG, MRR at k=10 unless said; ``aggregate=True``):

- ``polars``: ``fm.evaluate`` on ``pl.read_parquet`` frames (the single-machine engine);
- ``fm-spark``: ``fm.evaluate`` on Spark frames, ``local[2]``, result ``.toArrow()``;
- ``fm-dask``: ``fm.evaluate`` on dask frames, a ``LocalCluster`` of 2 worker processes;
- ``recommenders-spark``: ``SparkRankingEvaluation(..., k=10, relevancy_method="top_k")``
  precision, recall, NDCG and MAP (its conventions: binary relevance, MAP over the
  relevant items, ranking by score).

Run ``python bench/distributed.py --users 1000000`` (data generated with
``bench/generate.py`` into ``--data-dir``, reused when present).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).parent))

METRICS = ["precision@10", "recall@10", "ap@10", "ndcg@10", "mrr@10"]
JOBS = ("polars", "fm-spark", "fm-dask", "recommenders-spark")

_SPARK = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "12g")
         .config("spark.sql.shuffle.partitions", "{partitions}").config("spark.ui.enabled", "false")
         .getOrCreate())
"""

_CODE = {
    "polars": """
import polars as pl, frame_metrics as fm
t0 = time.perf_counter()
recs = pl.read_parquet(RECS, columns=["user", "item", "rank"])
truth = pl.read_parquet(TRUTH)
out = fm.evaluate(recs, truth, metrics=METRICS, aggregate=True)
values = out.row(0, named=True)
""",
    "fm-spark": _SPARK
    + """
import polars as pl, frame_metrics as fm
start = time.perf_counter() - START
t0 = time.perf_counter()
recs = spark.read.parquet(RECS).select("user", "item", "rank")
truth = spark.read.parquet(TRUTH)
out = fm.evaluate(recs, truth, metrics=METRICS, aggregate=True)
values = pl.from_arrow(out.toArrow()).row(0, named=True)
""",
    "fm-dask": """
import dask.dataframe as dd, polars as pl, frame_metrics as fm
from dask.distributed import Client, LocalCluster
client = Client(LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="10GB"))
start = time.perf_counter() - START
t0 = time.perf_counter()
recs = dd.read_parquet(RECS, columns=["user", "item", "rank"])
truth = dd.read_parquet(TRUTH)
out = fm.evaluate(recs, truth, metrics=METRICS, aggregate=True)
values = pl.from_pandas(out.compute()).row(0, named=True)
""",
    "recommenders-spark": _SPARK
    + """
from recommenders.evaluation.spark_evaluation import SparkRankingEvaluation
start = time.perf_counter() - START
t0 = time.perf_counter()
recs = spark.read.parquet(RECS).select("user", "item", "score").where("rank <= 10")
truth = spark.read.parquet(TRUTH).withColumnRenamed("relevance", "rating")
ev = SparkRankingEvaluation(truth, recs, k=10, col_user="user", col_item="item",
                            col_rating="rating", col_prediction="score", relevancy_method="top_k")
values = {"precision@10": ev.precision_at_k(), "recall@10": ev.recall_at_k(),
          "ndcg@10 (binary)": ev.ndcg_at_k(), "map@10 (recommenders)": ev.map_at_k()}
""",
}


def _child(job: str, recs: str, truth: str, partitions: int) -> str:
    return (
        "import json, time\nSTART = time.perf_counter()\nstart = 0.0\n"
        f"RECS, TRUTH, METRICS = {recs!r}, {truth!r}, {METRICS!r}\n"
        + _CODE[job].replace("{partitions}", str(partitions))
        + "\nprint(json.dumps({'seconds': time.perf_counter() - t0, 'start': start, "
        "'values': {k: v for k, v in values.items()}}))\n"
    )


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def run_job(job: str, recs: str, truth: str, partitions: int, timeout: float) -> dict[str, Any]:
    """Run one job in a fresh process; its result, time and peak tree RSS."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _child(job, recs, truth, partitions)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        import psutil

        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        out, err = proc.communicate()
        status = f"timeout {timeout:.0f} s"
    stop.set()
    sampler.join()
    result: dict[str, Any] = {"job": job, "status": status, "peak_mib": peak / 2**20}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if status == "ok" and lines:
        result |= json.loads(lines[-1])
    elif status != "ok":
        result["error"] = err.strip().splitlines()[-1:] if err.strip() else []
    return result


def ensure_data(users: int, data_dir: Path) -> tuple[str, str]:
    """Generate (once) and return the recs and truth parquet paths for ``users``."""
    from generate import make_data, write_parquet

    out = data_dir / f"u{users}"
    recs, truth = out / "recs.parquet", out / "truth.parquet"
    if not (recs.exists() and truth.exists()):
        write_parquet(*make_data(users), out)
    return str(recs), str(truth)


def main(argv: list[str] | None = None) -> None:
    """Command line: run the jobs and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/fmdist"))
    parser.add_argument("--only", default=",".join(JOBS))
    parser.add_argument("--partitions", type=int, default=16, help="Spark shuffle partitions")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    recs, truth = ensure_data(args.users, args.data_dir)
    rows = []
    for job in args.only.split(","):
        result = run_job(job, recs, truth, args.partitions, args.timeout)
        rows.append(result)
        print(json.dumps(result), flush=True)
    base = next((r for r in rows if r["job"] == "polars" and r["status"] == "ok"), None)
    print(f"\n{args.users:,} users; Spark local[2], {args.partitions} shuffle partitions\n")
    print("| job | status | seconds | start s | peak MiB | ratio to polars |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        secs = r.get("seconds")
        ratio = f"{secs / base['seconds']:.1f}x" if base and secs else ""
        shown = f"{secs:.1f}" if secs else ""
        print(
            f"| {r['job']} | {r['status']} | {shown} | {r.get('start', 0):.1f} | "
            f"{r['peak_mib']:,.0f} | {ratio} |"
        )
    print("\nvalues:")
    names = sorted({n for r in rows for n in r.get("values", {})})
    frame = pl.DataFrame(
        [{"job": r["job"], **{n: r.get("values", {}).get(n) for n in names}} for r in rows]
    )
    with pl.Config(tbl_cols=-1, tbl_width_chars=200, float_precision=12):
        print(frame)


if __name__ == "__main__":
    main()
