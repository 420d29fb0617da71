"""Benchmark of ``fm.compare``: 10k resamples over 100k users x 5 models x 4 metrics.

Each job runs on the harness (``harness.py``) in a fresh process, which reads the
per-user frame (generated once, cached as parquet) untimed:

- ``frame_metrics``: ``fm.compare`` on a per-user frame of ``--models`` models x
  ``--metrics`` metric columns against model ``a``: every mean, interval, paired
  difference and test, Holm-corrected.
- ``frame_metrics-all-pairs``: the same without ``baseline_model``: every pair of
  models (definition sheet 12).
- ``scipy``: ``scipy.stats.bootstrap(..., method="percentile")`` for the same intervals
  (one call per model and metric, and one paired call per difference), plus
  ``ttest_rel`` and ``wilcoxon``: what a user would write without frame_metrics. It is
  timed on ``--scipy-share`` of the columns and scaled up (printed as such).

Run: ``python bench/compare.py`` (a few minutes); ``--users 20000`` for a quick look;
``--models 3`` for the earlier table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/compare.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import peers  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

#: The models' names and how much more often each has a value above 0 than ``a``.
SHIFTS = {"a": 0.0, "b": 0.01, "c": -0.005, "d": 0.004, "e": 0.0}


def make_per_user(n_users: int, n_metrics: int, seed: int = 0, n_models: int = 5) -> Any:
    """Per-user values of the first ``n_models`` models: mostly zeros with a continuous
    tail, like NDCG/recall (model e draws as a does: a pair without a difference)."""
    import polars as pl

    rng = np.random.default_rng(seed)
    frames = []
    for name, shift in list(SHIFTS.items())[:n_models]:
        columns: dict[str, Any] = {"model": name, "user": np.arange(n_users)}
        for j in range(n_metrics):
            hit = rng.random(n_users) < 0.3 + shift
            columns[f"m{j}@10"] = np.where(hit, rng.random(n_users), 0.0)
        frames.append(pl.DataFrame(columns))
    return pl.concat(frames)


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """The per-user frame of ``params`` as ``per_user.parquet``."""
    frame = make_per_user(params["users"], params["metrics"], params["seed"], params["models"])
    data_dir.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(data_dir / "per_user.parquet")
    return {"rows": frame.height}


def load(data_dir: Path, kind: str, params: harness.Params) -> tuple[Any, harness.Params]:
    """The per-user frame (``pl.read_parquet``) and the run's parameters."""
    import polars as pl

    return pl.read_parquet(data_dir / "per_user.parquet"), params


def prepare_fm(inputs: tuple[Any, harness.Params], baseline: str | None = "a") -> Prepared:
    """``fm.compare`` against model ``a``; its values: model ``b``'s first interval."""
    import polars as pl

    import frame_metrics as fm

    per_user, params = inputs

    def run() -> Values:
        out = fm.compare(
            per_user,
            baseline_model=baseline,
            n_resamples=params["resamples"],
            seed=0,
            progress=False,
        )
        first = out.filter(pl.col("model") == "b").row(0, named=True)
        return {"ci_low": float(first["ci_low"]), "ci_high": float(first["ci_high"])}

    return Prepared(run)


def prepare_fm_all_pairs(inputs: tuple[Any, harness.Params]) -> Prepared:
    """``fm.compare`` without a baseline: every pair of models."""
    return prepare_fm(inputs, baseline=None)


def prepare_scipy(inputs: tuple[Any, harness.Params]) -> Prepared:
    """scipy.stats for the same work (see :func:`peers.prepare_scipy_compare`)."""
    per_user, params = inputs
    models = list(SHIFTS)[: params["models"]]
    return peers.prepare_scipy_compare(per_user, models, params["resamples"], params["scipy_share"])


JOBS = harness.job_table(
    Job("frame_metrics", "frame_metrics", "fm.compare, baseline_model='a'", prepare_fm),
    Job("frame_metrics-all-pairs", "frame_metrics", "fm.compare, every pair", prepare_fm_all_pairs),
    Job("scipy", "scipy", "stats.bootstrap, ttest_rel, wilcoxon", prepare_scipy),
)
SUITE = harness.Suite(
    "Benchmark of fm.compare: bootstrap resamples over users x models x metrics.",
    Path(__file__).resolve(),
    JOBS,
    "frame_metrics",
    load,
    make_data,
    ("frame_metrics", "polars", "numpy", "scipy"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """Both jobs (or those of ``--only``) on one per-user frame."""
    jobs = [name for name in JOBS if name in (harness.wanted_jobs(SUITE, args.only) or JOBS)]
    users = harness.parse_sizes(args.users)[0]
    params = {"users": users, "metrics": args.metrics, "seed": args.seed, "models": args.models}
    options = {"resamples": args.resamples, "scipy_share": args.scipy_share}
    directory = Path(f"compare-u{users}-m{args.metrics}-M{args.models}-s{args.seed}")
    return [Stage(users, directory, params, jobs, options=options)]


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """scipy's time scaled up to every metric column, against frame_metrics'."""
    print(
        f"\ncompare: {stages[0].users:,} users x {args.models} models x {args.metrics} "
        f"metrics, {args.resamples:,} resamples"
    )
    base = next((r.median for r in results if r.job == "frame_metrics" and r.times), np.nan)
    rows = [["tool", "seconds", "ratio", "peak MiB", "note"]]
    for r in results:
        label = r.job + (f" [{r.side}]" if r.side != harness.AFTER else "")
        if r.error:
            rows.append([label, "failed", "", "", r.error[:120]])
            continue
        seconds, note = r.median, ""
        if "seconds_all" in r.values:  # timed on a share of the columns
            seconds = r.values["seconds_all"]
            if r.inner["scaled_from"] < 1:
                note = f"timed on {r.inner['scaled_from']:.0%} of the metrics, scaled up"
        rows.append([label, f"{seconds:.2f}", f"{seconds / base:.1f}x", f"{r.peak_mib:.0f}", note])
    print(harness.render(rows, markdown=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: both jobs, the timings and the scaled comparison."""
    p = harness.parser(SUITE, users="100000", repeats=1, timeout=900.0)
    p.add_argument("--metrics", type=int, default=4, help="metric columns per model")
    p.add_argument("--models", type=int, default=5, choices=range(2, 6), help="models (2-5)")
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--scipy-share", type=float, default=0.25)
    return harness.main(SUITE, p.parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
