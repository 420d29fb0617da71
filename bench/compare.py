"""Benchmark of ``fm.compare``: 10k bootstrap resamples over 100k users x 3 models.

Each job runs in its own subprocess (time and peak RSS of that process alone):

- ``frame_metrics``: ``fm.compare`` on a per-user frame of 3 models x ``--metrics``
  metric columns: every mean, interval, paired difference and test, Holm-corrected.
- ``scipy``: ``scipy.stats.bootstrap(..., method="percentile")`` for the same intervals
  (one call per model and metric, and one paired call per difference), plus
  ``ttest_rel`` and ``wilcoxon``: what a user would write without frame_metrics. At the
  full size it is timed on ``--scipy-share`` of the columns and scaled up (printed as such).

Run: ``python bench/compare.py`` (about 2 minutes); ``--users 20000`` for a quick look.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

import numpy as np
import polars as pl

MARK = "@@RESULT "
MODELS = ("a", "b", "c")


def make_per_user(n_users: int, n_metrics: int, seed: int = 0) -> pl.DataFrame:
    """Per-user values of 3 models: mostly zeros with a continuous tail, like NDCG/recall."""
    rng = np.random.default_rng(seed)
    frames = []
    for shift, name in zip((0.0, 0.01, -0.005), MODELS, strict=True):
        columns: dict[str, Any] = {"model": name, "user": np.arange(n_users)}
        for j in range(n_metrics):
            hit = rng.random(n_users) < 0.3 + shift
            columns[f"m{j}@10"] = np.where(hit, rng.random(n_users), 0.0)
        frames.append(pl.DataFrame(columns))
    return pl.concat(frames)


def _peak_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def job_frame_metrics(n_users: int, n_metrics: int, resamples: int) -> dict[str, Any]:
    import frame_metrics as fm

    per_user = make_per_user(n_users, n_metrics)
    start = time.perf_counter()
    out = fm.compare(per_user, baseline_model="a", n_resamples=resamples, seed=0, progress=False)
    seconds = time.perf_counter() - start
    first = out.filter(pl.col("model") == "b").row(0, named=True)
    return {"seconds": seconds, "peak_mib": _peak_mib(), "ci": [first["ci_low"], first["ci_high"]]}


def job_scipy(n_users: int, n_metrics: int, resamples: int, share: float) -> dict[str, Any]:
    from scipy import stats  # type: ignore[import-untyped]

    per_user = make_per_user(n_users, n_metrics)
    columns = [c for c in per_user.columns if c not in ("model", "user")]
    timed = columns[: max(1, round(len(columns) * share))]
    values = {m: per_user.filter(pl.col("model") == m) for m in MODELS}
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for column in timed:
        base = values["a"][column].to_numpy()
        for m in MODELS:
            x = values[m][column].to_numpy()
            stats.bootstrap(
                (x,),
                np.mean,
                n_resamples=resamples,
                method="percentile",
                random_state=rng,
                batch=max(1, 20_000_000 // n_users),
            )
            if m == "a":
                continue
            stats.bootstrap(
                (x, base),
                lambda u, v, axis=-1: np.mean(u - v, axis=axis),
                paired=True,
                n_resamples=resamples,
                method="percentile",
                random_state=rng,
                batch=max(1, 20_000_000 // n_users),
            )
            stats.ttest_rel(x, base)
            stats.wilcoxon(x, base, method="approx")
    seconds = (time.perf_counter() - start) * len(columns) / len(timed)
    return {"seconds": seconds, "peak_mib": _peak_mib(), "scaled_from": len(timed) / len(columns)}


def run(job: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        job,
        "--users",
        str(args.users),
        "--metrics",
        str(args.metrics),
        "--resamples",
        str(args.resamples),
        "--scipy-share",
        str(args.scipy_share),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return dict(json.loads(line[len(MARK) :]))
    return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no result"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--metrics", type=int, default=4, help="metric columns per model")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--scipy-share", type=float, default=0.25)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--worker", choices=["frame_metrics", "scipy"])
    args = parser.parse_args(argv)
    if args.worker == "frame_metrics":
        print(MARK + json.dumps(job_frame_metrics(args.users, args.metrics, args.resamples)))
        return 0
    if args.worker == "scipy":
        result = job_scipy(args.users, args.metrics, args.resamples, args.scipy_share)
        print(MARK + json.dumps(result))
        return 0
    print(
        f"compare: {args.users:,} users x {len(MODELS)} models x {args.metrics} metrics, "
        f"{args.resamples:,} resamples"
    )
    results = {job: run(job, args) for job in ("frame_metrics", "scipy")}
    base = results["frame_metrics"].get("seconds", float("nan"))
    print("| tool | seconds | ratio | peak MiB | note |\n| --- | --- | --- | --- | --- |")
    for job, r in results.items():
        if "error" in r:
            print(f"| {job} | failed | | | {r['error']} |")
            continue
        note = ""
        if "scaled_from" in r and r["scaled_from"] < 1:
            note = f"timed on {r['scaled_from']:.0%} of the metrics, scaled up"
        print(
            f"| {job} | {r['seconds']:.2f} | {r['seconds'] / base:.1f}x | {r['peak_mib']:.0f} | {note} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
