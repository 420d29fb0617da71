"""Benchmark of fm.policy_value against Open Bandit Pipeline (obp 0.5.7) on the same frames.

Run ``python bench/policy_value.py --data-dir /tmp/fmdata`` (1M users x 10 logged rows
= 10M rows; see ``--help`` and ``bench/README.md``).

The data is synthetic and deterministic (seeded numpy, generated once per size in a
subprocess and cached as parquet): 20 items; per user a logging policy π_b, a softmax
of random logits, which showed 10 items (drawn with replacement), each with its pscore
π_b(item | user) and a Bernoulli reward; the evaluated policy is each user's top 10 of
a random score, with a reward model's q̂ beside each of its rows.

Every job runs on the harness (``harness.py``) in fresh processes that read the two
parquet frames untimed (``pl.read_parquet``) and time the call from those frames to the
value. obp takes arrays, so its timing includes their conversion from the frames: the
logged columns ``to_numpy``, the evaluated policy's ``action_dist`` (rounds x items x 1:
π_e = 1/10 on the user's top 10) and, for DR, ``estimated_rewards_by_reg_model`` (same
shape: q̂), built with numpy from the recs frame. The ids are 0..n-1 integers here, so
the conversion indexes with them directly (other ids would need a factorisation first,
which obp's timing does not pay here). Untimed checks: obp's IPW, SNIPW and DR values
equal frame_metrics' ips, snips and dr to 1e-12 (relative).

obp 0.5.7 declares Python < 3.11 and imports torch: where it is not installed here, its
jobs run with the Python named by ``FM_BENCH_OBP_PYTHON`` (an environment with obp,
polars and numpy), or fail and are reported as failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/policy_value.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

K = 10
N_ITEMS = 20
ROWS_PER_USER = 10
#: Relative difference under which obp's value and ours count as equal.
TOLERANCE = 1e-12
#: The environment variable naming a Python with obp (it declares Python < 3.11).
OBP_PYTHON = "FM_BENCH_OBP_PYTHON"


# --------------------------------------------------------------------------------------
# Data and start frames
# --------------------------------------------------------------------------------------


def make_arrays(n_users: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The benchmark data as numpy columns, deterministic in ``(n_users, seed)``.

    Keys: ``logs.user``, ``logs.item``, ``logs.reward``, ``logs.pscore`` (10 rows per
    user: items drawn from the user's π_b with replacement), ``recs.user``,
    ``recs.item``, ``recs.rank`` (each user's top 10 of 20 by a random score),
    ``recs.q`` (q̂ in [0, 1)).
    """
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_users, N_ITEMS))
    pi_b = np.exp(logits)
    pi_b /= pi_b.sum(axis=1, keepdims=True)
    cdf = np.cumsum(pi_b, axis=1)
    draws = rng.random((n_users, ROWS_PER_USER))
    # The first item whose cumulative probability passes the draw (the last one when
    # rounding leaves the sum a hair below 1).
    item = np.minimum((draws[:, :, None] > cdf[:, None, :]).sum(axis=2), N_ITEMS - 1)
    users = np.repeat(np.arange(n_users, dtype=np.int64), ROWS_PER_USER)
    pscore = pi_b[users, item.ravel()]
    reward = rng.binomial(1, 0.1 + 0.5 * pscore).astype(np.float64)
    top = np.argsort(-rng.random((n_users, N_ITEMS)), axis=1)[:, :K]
    return {
        "logs.user": users,
        "logs.item": item.ravel().astype(np.int64),
        "logs.reward": reward,
        "logs.pscore": pscore,
        "recs.user": np.repeat(np.arange(n_users, dtype=np.int64), K),
        "recs.item": top.ravel().astype(np.int64),
        "recs.rank": np.tile(np.arange(1, K + 1, dtype=np.int64), n_users),
        "recs.q": rng.random(n_users * K),
    }


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """Generate the data of ``params`` (users, seed) as ``logs`` and ``recs`` parquet files."""
    import polars as pl

    cols = make_arrays(params["users"], params["seed"])
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, columns in (
        ("logs", ("user", "item", "reward", "pscore")),
        ("recs", ("user", "item", "rank", "q")),
    ):
        frame = pl.DataFrame({c: cols[f"{name}.{c}"] for c in columns})
        frame.write_parquet(data_dir / f"{name}.parquet")
    return {
        "users": params["users"],
        "logged_rows": len(cols["logs.user"]),
        "rec_rows": len(cols["recs.user"]),
        "items": N_ITEMS,
    }


@dataclass
class Inputs:
    """The start frames of a job: the logs and the evaluated policy, as polars frames."""

    logs: Any
    recs: Any


def load(data_dir: Path, kind: str, params: harness.Params) -> Inputs:
    """The two frames, read as users read them."""
    import polars as pl

    if kind != "polars":
        raise ValueError(f"kind: expected 'polars', got {kind!r}")
    return Inputs(
        pl.read_parquet(data_dir / "logs.parquet"), pl.read_parquet(data_dir / "recs.parquet")
    )


# --------------------------------------------------------------------------------------
# The jobs
# --------------------------------------------------------------------------------------


def fm_job(estimator: str, n_resamples: int = 0) -> Callable[[Inputs], Prepared]:
    """A prepare function: ``fm.policy_value`` from the two frames; its value (and interval)."""

    def prepare(i: Inputs) -> Prepared:
        import frame_metrics as fm

        def run() -> Values:
            out = fm.policy_value(
                i.logs,
                i.recs,
                k=K,
                estimator=estimator,  # type: ignore[arg-type]
                reward_model="q" if estimator == "dr" else None,
                n_resamples=n_resamples,
            )
            row = out.row(0, named=True)
            values = {"value": float(row["value"]), "n_rows": float(row["n_rows"])}
            if n_resamples:
                values |= {"ci_low": float(row["ci_low"]), "ci_high": float(row["ci_high"])}
            return values

        return Prepared(run)

    return prepare


def obp_arrays(logs: Any, recs: Any, *, with_q: bool) -> dict[str, np.ndarray]:
    """obp's inputs from the frames: logged columns, action_dist and (DR) q̂ per round.

    A round is a logged row; π_e(a | its user) is 1/K on the user's top K, 0 elsewhere;
    q̂ is recs' q on those rows (0 elsewhere, which obp's DR multiplies by π_e = 0 or
    by a weight of 0).
    """
    import polars as pl

    user = logs["user"].to_numpy()
    action = logs["item"].to_numpy()
    top = recs.filter(pl.col("rank") <= K)
    top_user, top_item = top["user"].to_numpy(), top["item"].to_numpy()
    n_users = int(max(user.max(), top_user.max())) + 1
    n_items = int(max(action.max(), top_item.max())) + 1
    policy = np.zeros((n_users, n_items))
    policy[top_user, top_item] = 1.0 / K
    out = {
        "action": action,
        "reward": logs["reward"].to_numpy(),
        "pscore": logs["pscore"].to_numpy(),
        "action_dist": policy[user][:, :, None],
    }
    if with_q:
        q = np.zeros((n_users, n_items))
        q[top_user, top_item] = top["q"].to_numpy()
        out["estimated_rewards_by_reg_model"] = q[user][:, :, None]
    return out


#: obp's estimator class for each of ours.
OBP_ESTIMATORS = {
    "ips": "InverseProbabilityWeighting",
    "snips": "SelfNormalizedInverseProbabilityWeighting",
    "dr": "DoublyRobust",
}


def obp_job(estimator: str) -> Callable[[Inputs], Prepared]:
    """A prepare function: obp's estimator on arrays converted from the frames (timed)."""

    def prepare(i: Inputs) -> Prepared:
        import obp.ope

        cls = getattr(obp.ope, OBP_ESTIMATORS[estimator])

        def run() -> Values:
            arrays = obp_arrays(i.logs, i.recs, with_q=estimator == "dr")
            value = cls().estimate_policy_value(**arrays)
            return {"value": float(value), "n_rows": float(len(arrays["action"]))}

        return Prepared(run)

    return prepare


FM, OBP = "frame_metrics", "Open Bandit Pipeline"
INTERVAL = frozenset({"interval"})
JOBS = harness.job_table(
    Job("fm-snips", FM, "snips, value only (n_resamples=0)", fm_job("snips"), "polars"),
    Job("fm-ips", FM, "ips, value only", fm_job("ips"), "polars"),
    Job("fm-dr", FM, "dr, value only", fm_job("dr"), "polars"),
    Job(
        "fm-snips-interval",
        FM,
        "snips with its interval (1000 resamples over users, the default)",
        fm_job("snips", 1000),
        "polars",
        tags=INTERVAL,
    ),
    Job(
        "obp-snipw",
        OBP,
        "SelfNormalizedInverseProbabilityWeighting, arrays from the frames",
        obp_job("snips"),
        "polars",
        vs="fm-snips",
        python_env=OBP_PYTHON,
    ),
    Job(
        "obp-ipw",
        OBP,
        "InverseProbabilityWeighting, arrays from the frames",
        obp_job("ips"),
        "polars",
        vs="fm-ips",
        python_env=OBP_PYTHON,
    ),
    Job(
        "obp-dr",
        OBP,
        "DoublyRobust, arrays (q̂ too) from the frames",
        obp_job("dr"),
        "polars",
        vs="fm-dr",
        python_env=OBP_PYTHON,
    ),
)
BASELINE = "fm-snips"
#: Each pair (ours, obp's) must agree to TOLERANCE.
PAIRS = (("fm-ips", "obp-ipw"), ("fm-snips", "obp-snipw"), ("fm-dr", "obp-dr"))
BIG = 1_000_000
TARGETS = [
    harness.Target(
        f"policy_value faster than obp: {ours} / {peer}", (ours,), peer, 1.0, applies=BIG
    )
    for ours, peer in PAIRS
]
SUITE = harness.Suite(
    f"fm.policy_value at k={K} vs Open Bandit Pipeline's IPW, SNIPW and DR.",
    Path(__file__).resolve(),
    JOBS,
    BASELINE,
    load,
    make_data,
    ("frame_metrics", "polars", "numpy", "obp"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """The jobs at each size: ``--only`` narrows them; the baseline always runs."""
    wanted = harness.wanted_jobs(SUITE, args.only) or set(JOBS)
    if args.no_interval:
        wanted -= {n for n, job in JOBS.items() if job.tags & INTERVAL}
    stages = []
    for users in harness.parse_sizes(args.users):
        params = {"users": users, "seed": args.seed}
        names = [n for n in JOBS if n in wanted]
        stages.append(
            Stage(
                users,
                Path(f"policy-value-u{users}-s{args.seed}"),
                params,
                list(dict.fromkeys([BASELINE, *names])),
            )
        )
    return stages


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def checks_table(results: Sequence[Result]) -> list[list[str]]:
    """obp's value against ours, per estimator and size."""
    by_key = {(r.users, r.job): r for r in results if not r.error and r.side == harness.AFTER}
    rows = [harness.AGREEMENT_HEAD]
    for users in sorted({r.users for r in results}):
        for ours, peer in PAIRS:
            a, b = by_key.get((users, peer)), by_key.get((users, ours))
            if a is None or b is None:
                continue
            rows.append(
                harness.agreement_row(
                    users,
                    f"obp {OBP_ESTIMATORS[ours.removeprefix('fm-')]}",
                    a.values["value"],
                    f"fm policy_value({ours.removeprefix('fm-')})",
                    b.values["value"],
                    tolerance=TOLERANCE,
                    relative=True,
                )
            )
    return rows


def values_table(results: Sequence[Result]) -> list[list[str]]:
    """Our values (and the interval where it was computed) per size."""
    head = ["users", "logged rows", "ips", "snips", "dr", "snips interval (95%)"]
    by_key = {(r.users, r.job): r for r in results if not r.error and r.side == harness.AFTER}
    rows = [head]
    for users in sorted({r.users for r in results}):

        def value(job: str) -> str:
            r = by_key.get((users, job))  # noqa: B023 - used at once, inside the loop
            return f"{r.values['value']:.12g}" if r is not None else "-"

        interval = by_key.get((users, "fm-snips-interval"))
        base = by_key.get((users, BASELINE))
        rows.append(
            [
                f"{users:,}",
                f"{base.values['n_rows']:,.0f}" if base is not None else "-",
                value("fm-ips"),
                value("fm-snips"),
                value("fm-dr"),
                (
                    f"[{interval.values['ci_low']:.6g}, {interval.values['ci_high']:.6g}]"
                    if interval is not None
                    else "-"
                ),
            ]
        )
    return rows


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The values, the checks against obp and the targets; the mismatches."""
    print("\nValues (frame_metrics)")
    print(harness.render(values_table(results), args.markdown))
    checks = checks_table(results)
    print(f"\nChecks (obp against frame_metrics: |diff| <= {TOLERANCE:g} x max(1, |ref value|))")
    print(harness.render(checks, args.markdown))
    print("\nTargets")
    print(harness.render(harness.targets_table(SUITE, results, TARGETS), args.markdown))
    return harness.mismatches(checks)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The harness's options and the suite's own."""
    p = harness.parser(SUITE, users="1000000", repeats=3)
    p.add_argument(
        "--no-interval",
        action="store_true",
        help="skip the job timing the default interval (1000 resamples over users)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Generate each size, run every job in fresh processes, print the tables; 1 on a mismatch."""
    return harness.main(SUITE, parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
