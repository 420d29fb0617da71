"""Benchmark of ``fm.report``: the report of 1M users beyond the evaluation itself.

Each job runs on the harness (``harness.py``) in a fresh process, which reads recs of
two models and truth (generated once, cached as parquet, read with ``pl.read_parquet``)
untimed:

- ``fm-evaluate``: the evaluation a report needs: ``fm.evaluate(..., aggregate=True)``
  (the means) and ``fm.evaluate(...)`` (the per-user values), ``by="model"``;
- ``fm-report``: ``fm.report(recs, truth, ..., path=...)``: the means and the per-user
  values (one pass: ``api.means_and_per_user``), then ``fm.compare`` on the per-user
  values (every pair; the report's default resamples: 1,000, fewer above 200,000 users,
  200 at a million), ``fm.diagnose``, the inputs' fingerprints, the charts, and the
  HTML file.

The report's own cost is the difference of the two medians (the bar: a few seconds).

Run: ``python bench/report.py --users 1000000`` (a minute); ``--users 100000`` for a
quick look.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/report.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from accumulator import lists_and_truth  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

METRICS = ["ndcg", "recall"]
K = [5, 10, 20]
MODELS = ("a", "b")


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """The accumulator benchmark's lists for each of ``MODELS`` and its truth, as parquet."""
    recs, truth = lists_and_truth(params["users"], params["seed"], MODELS)
    data_dir.mkdir(parents=True, exist_ok=True)
    recs.write_parquet(data_dir / "recs.parquet", row_group_size=1_000_000)
    truth.write_parquet(data_dir / "truth.parquet", row_group_size=1_000_000)
    return {"rows": recs.height + truth.height}


def load(data_dir: Path, kind: str, params: harness.Params) -> tuple[Any, ...]:
    """Recs and truth, as ``pl.read_parquet`` gives them."""
    import polars as pl

    return pl.read_parquet(data_dir / "recs.parquet"), pl.read_parquet(data_dir / "truth.parquet")


def _values(means: Any) -> Values:
    import polars as pl

    row = means.filter(pl.col("model") == "a").row(0, named=True)
    return {"ndcg@10": float(row["ndcg@10"]), "recall@10": float(row["recall@10"])}


def prepare_evaluate(inputs: tuple[Any, ...]) -> Prepared:
    """The means and the per-user values: the evaluation a report stands on."""
    import frame_metrics as fm

    recs, truth = inputs

    def run() -> Values:
        means = fm.evaluate(recs, truth, metrics=METRICS, k=K, by="model", aggregate=True)
        fm.evaluate(recs, truth, metrics=METRICS, k=K, by="model")
        return _values(means)

    return Prepared(run)


def prepare_report(inputs: tuple[Any, ...]) -> Prepared:
    """The whole report, written to an HTML file."""
    import frame_metrics as fm

    recs, truth = inputs
    folder = tempfile.mkdtemp(prefix="fm-report-bench-")

    def run() -> Values:
        shared = fm.report(
            recs, truth, metrics=METRICS, k=K, path=str(Path(folder) / "report.html")
        )
        return _values(shared.means)

    return Prepared(run)


JOBS = harness.job_table(
    Job("fm-evaluate", "frame_metrics", "evaluate: means + per-user values", prepare_evaluate),
    Job("fm-report", "frame_metrics", "report: evaluate, compare, diagnose, HTML", prepare_report),
)
SUITE = harness.Suite(
    "Benchmark of fm.report: the report beyond the evaluation itself.",
    Path(__file__).resolve(),
    JOBS,
    "fm-evaluate",
    load,
    make_data,
    ("frame_metrics", "polars", "numpy"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """Both jobs (or those of ``--only``) on one data set."""
    jobs = [name for name in JOBS if name in (harness.wanted_jobs(SUITE, args.only) or JOBS)]
    users = harness.parse_sizes(args.users)[0]
    params = {"users": users, "seed": args.seed}
    return [Stage(users, Path(f"report-u{users}-s{args.seed}"), params, jobs)]


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The report's time beyond the evaluation's, with peaks."""
    print(f"\nreport: {stages[0].users:,} users x {len(MODELS)} models")
    base = next((r for r in results if r.job == "fm-evaluate" and r.times), None)
    rows = [["job", "median s", "beyond the evaluation s", "peak MiB"]]
    for r in results:
        if r.error:
            rows.append([r.job, "failed", r.error[:100], ""])
            continue
        beyond = "" if base is None or r is base else f"{r.median - base.median:.2f}"
        rows.append([r.job, f"{r.median:.3f}", beyond, f"{r.peak_mib:.0f}"])
    print(harness.render(rows, markdown=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: both jobs and the report's own time."""
    p = harness.parser(SUITE, users="1000000", repeats=2, timeout=900.0)
    return harness.main(SUITE, p.parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
