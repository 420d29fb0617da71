"""Benchmark of ``fm.Accumulator``: batches of users against one ``fm.evaluate`` call.

Each job runs on the harness (``harness.py``) in a fresh process, which reads recs and
truth (generated once, cached as parquet, read with ``pl.read_parquet``: one chunk per
row group) and cuts them into ``--updates`` batches of whole users, untimed, as a
training loop or a stream has them:

- ``fm-evaluate``: one ``fm.evaluate(recs, truth, aggregate=True)`` on every row (the
  bar: the accumulator must stay within 1.5x of it, and each update within 2x its
  share of users of it);
- ``fm-accumulator``: ``fm.Accumulator`` updated with every batch, then ``compute()``;
- ``fm-accumulator-unchecked``: the same with ``check_repeats=False``;
- ``torchmetrics``: ``RetrievalNormalizedDCG``, ``RetrievalMAP`` and ``RetrievalRecall``
  (top k) updated with the same batches as tensors (a score per listed item, LISTED + 1
  - rank: torchmetrics reads a score <= 0 as not retrieved; a label, whether truth holds
  it: what a training loop hands torchmetrics), then
  ``compute()``. Its definitions are this package's ``convention="torchmetrics"`` (R
  from the listed items), whose values the report sets beside its own. Needs ``torch``
  and ``torchmetrics`` (``pip install torch --index-url
  https://download.pytorch.org/whl/cpu torchmetrics``); without them the job says so.

Run: ``python bench/accumulator.py --users 1000000 --updates 100`` (a few minutes);
``--users 100000`` for a quick look.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/accumulator.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

K = 10
METRICS = [f"ndcg@{K}", f"ap@{K}", f"recall@{K}"]
LISTED = 20  # recommendations per user


def lists_and_truth(n: int, seed: int, models: Sequence[str] = ()) -> tuple[Any, Any]:
    """``LISTED`` ranked items per user (per model, each model's items shifted by its
    position, with a ``model`` column) and 1-8 liked items per user, half of them listed."""
    import polars as pl

    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(n), LISTED)
    # Distinct items per user: a user's offset plus distinct steps.
    steps = users * 7919 + np.tile(np.arange(LISTED) * 104_729, n)
    ranks = np.tile(np.arange(1, LISTED + 1), n)
    recs = pl.concat(
        [
            pl.DataFrame(
                {"model": model, "user": users, "item": (steps + shift) % 2_000_003, "rank": ranks}
            )
            for shift, model in enumerate(models)
        ]
        if models
        else [pl.DataFrame({"user": users, "item": steps % 2_000_003, "rank": ranks})]
    )
    liked = rng.integers(1, 9, n)
    truth_users = np.repeat(np.arange(n), liked)
    # Half of the liked items among the listed ones, half elsewhere.
    pick = rng.integers(0, LISTED, truth_users.size)
    listed = (truth_users * 7919 + pick * 104_729) % 2_000_003
    other = rng.integers(0, 2_000_003, truth_users.size)
    truth = pl.DataFrame(
        {
            "user": truth_users,
            "item": np.where(rng.random(truth_users.size) < 0.5, listed, other),
            "relevance": np.ones(truth_users.size),
        }
    ).unique(["user", "item"])
    return recs, truth


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """:func:`lists_and_truth` as two parquet files."""
    recs, truth = lists_and_truth(params["users"], params["seed"])
    data_dir.mkdir(parents=True, exist_ok=True)
    recs.write_parquet(data_dir / "recs.parquet", row_group_size=1_000_000)
    truth.write_parquet(data_dir / "truth.parquet", row_group_size=1_000_000)
    return {"rows": recs.height + truth.height}


def load(data_dir: Path, kind: str, params: harness.Params) -> tuple[Any, ...]:
    """Recs, truth (as read) and their batches of whole users (cut untimed)."""
    import polars as pl

    recs = pl.read_parquet(data_dir / "recs.parquet")
    truth = pl.read_parquet(data_dir / "truth.parquet")
    edges = np.linspace(0, params["users"], params["updates"] + 1).astype(int)
    batches = [
        (
            recs.filter(pl.col("user").is_between(a, b - 1)),
            truth.filter(pl.col("user").is_between(a, b - 1)),
        )
        for a, b in itertools.pairwise(edges)
    ]
    return recs, truth, batches, params


def _values(frame: Any) -> Values:
    row = frame.row(0, named=True)
    return {m: float(row[m]) for m in METRICS}


def prepare_evaluate(inputs: tuple[Any, ...]) -> Prepared:
    """One call on every row."""
    import frame_metrics as fm

    recs, truth, _, _ = inputs

    def run() -> Values:
        return _values(fm.evaluate(recs, truth, metrics=METRICS, aggregate=True))

    return Prepared(run)


def _prepare_accumulator(inputs: tuple[Any, ...], check_repeats: bool, **options: Any) -> Prepared:
    import frame_metrics as fm

    _, _, batches, _ = inputs

    def run() -> Values:
        acc = fm.Accumulator(METRICS, check_repeats=check_repeats, **options)
        for recs, truth in batches:
            acc.update(recs, truth)
        return _values(acc.compute())

    return Prepared(run)


def prepare_accumulator(inputs: tuple[Any, ...]) -> Prepared:
    """Every batch into one accumulator, then compute()."""
    return _prepare_accumulator(inputs, True)


def prepare_unchecked(inputs: tuple[Any, ...]) -> Prepared:
    """The same without the check that no user comes twice."""
    return _prepare_accumulator(inputs, False)


def prepare_as_torchmetrics(inputs: tuple[Any, ...]) -> Prepared:
    """The accumulator under ``convention="torchmetrics"``: torchmetrics' definitions."""
    return _prepare_accumulator(inputs, True, convention="torchmetrics")


def prepare_torchmetrics(inputs: tuple[Any, ...]) -> Prepared:
    """torchmetrics' retrieval metrics fed the same batches as tensors (built untimed)."""
    import polars as pl
    import torch
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG, RetrievalRecall

    _, _, batches, _ = inputs
    tensors = []
    for recs, truth in batches:
        labelled = recs.join(
            truth.select("user", "item", pl.lit(True).alias("hit")), on=["user", "item"], how="left"
        ).sort("user", "rank")
        tensors.append(
            (
                torch.from_numpy(labelled["user"].to_numpy()),
                # Positive scores: torchmetrics 1.9 reads an item scored <= 0 as not
                # retrieved (its AP and recall zero such items' labels).
                torch.from_numpy((LISTED + 1 - labelled["rank"].to_numpy()).astype(np.float32)),
                torch.from_numpy(labelled["hit"].fill_null(False).to_numpy()),
            )
        )

    def run() -> Values:
        metrics = {
            f"ndcg@{K}": RetrievalNormalizedDCG(top_k=K),
            f"ap@{K}": RetrievalMAP(top_k=K),
            f"recall@{K}": RetrievalRecall(top_k=K),
        }
        for indexes, preds, target in tensors:
            for metric in metrics.values():
                metric.update(preds, target, indexes=indexes)
        return {name: float(metric.compute()) for name, metric in metrics.items()}

    return Prepared(run)


JOBS = harness.job_table(
    Job("fm-evaluate", "frame_metrics", "evaluate, every row at once", prepare_evaluate),
    Job(
        "fm-accumulator", "frame_metrics", "Accumulator, one update per batch", prepare_accumulator
    ),
    Job(
        "fm-accumulator-unchecked",
        "frame_metrics",
        "Accumulator, check_repeats=False",
        prepare_unchecked,
    ),
    Job(
        "fm-accumulator-as-torchmetrics",
        "frame_metrics",
        "Accumulator, convention='torchmetrics'",
        prepare_as_torchmetrics,
    ),
    Job("torchmetrics", "torchmetrics", "NDCG + MAP + Recall, per batch", prepare_torchmetrics),
)
SUITE = harness.Suite(
    "Benchmark of fm.Accumulator: batches of users against one evaluate call.",
    Path(__file__).resolve(),
    JOBS,
    "fm-evaluate",
    load,
    make_data,
    ("frame_metrics", "polars", "numpy", "torch", "torchmetrics"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """Every job (or those of ``--only``) on one data set."""
    jobs = [name for name in JOBS if name in (harness.wanted_jobs(SUITE, args.only) or JOBS)]
    users = harness.parse_sizes(args.users)[0]
    params = {"users": users, "seed": args.seed, "updates": args.updates}
    directory = Path(f"accumulator-u{users}-s{args.seed}")
    return [Stage(users, directory, params, jobs)]


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """Times as ratios to the one-shot call, with peaks, and the values side by side."""
    users, updates = stages[0].users, args.updates
    print(f"\naccumulator: {users:,} users in {updates} updates of {users // updates:,} users")
    base = next((r for r in results if r.job == "fm-evaluate" and r.times), None)
    rows = [["job", "median s", "ratio", "per update ms", "peak MiB", *METRICS]]
    for r in results:
        if r.error:
            rows.append([r.job, "failed", "", "", "", r.error[:100], "", ""])
            continue
        ratio = "" if base is None else f"{r.median / base.median:.2f}x"
        per = "" if r.job == "fm-evaluate" else f"{1000 * r.median / updates:.1f}"
        values = [f"{r.values.get(m, float('nan')):.6f}" for m in METRICS]
        rows.append([r.job, f"{r.median:.3f}", ratio, per, f"{r.peak_mib:.0f}", *values])
    print(harness.render(rows, markdown=True))
    if base is not None:
        share = 1000 * base.median / updates
        print(f"(an update's share of the one-shot time: {share:.1f} ms; the bar is 2x that)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: the jobs, their timings and values."""
    p = harness.parser(SUITE, users="1000000", repeats=2, timeout=1800.0)
    p.add_argument("--updates", type=int, default=100, help="batches of whole users")
    return harness.main(SUITE, p.parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
