"""End-to-end benchmark of ranking metrics at k=10: frame_metrics against its peers.

Run ``python bench/ranking.py --users 100000`` (see ``--help`` and ``bench/README.md``).

Every (tool, variant) runs in its own subprocess, which loads the same generated data
(see ``generate.py``) into the start frames of its variant *untimed*: polars eager frames,
or pandas frames with numpy dtypes for the pandas-based tools. Everything after that is
timed: converting into the tool's own input format (renamed pandas frames, nested
qrels/run dicts, a LazyFrame), computing precision, recall, AP, NDCG and MRR at k=10, and
reducing them to one mean per metric. The peak resident memory of each subprocess is read
from the kernel (``VmHWM`` of the subprocess, measured after the timed runs), which sees
native allocations (polars, numba, C) that ``tracemalloc`` does not. The parent stays
small (the data is generated in a subprocess too) because a child's ``ru_maxrss`` starts
from the parent's peak RSS: Linux carries it over the fork and exec.

The mean values of every tool are then compared with frame_metrics under the matching
convention (AP denominator, binary or graded gain, cutoff) and the largest absolute
difference is printed, with the reason for every expected mismatch.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/ranking.py` already has it
    sys.path.insert(0, str(HERE))

from generate import RECS_SCHEMA, TRUTH_SCHEMA, make_arrays  # noqa: E402

K = 10
METRICS = ["precision", "recall", "ap", "ndcg", "mrr"]
RESULT_MARK = "BENCH-RESULT "
#: Absolute difference under which two mean values count as equal.
TOLERANCE = 1e-9

Values = dict[str, float]
Engine = Literal["in-memory", "streaming"]


# --------------------------------------------------------------------------------------
# Start frames (untimed) and shared conversions (timed, inside the tools' runs)
# --------------------------------------------------------------------------------------


@dataclass
class Inputs:
    """The start frames of a run: polars eager frames or pandas frames (numpy dtypes)."""

    kind: str
    recs: Any
    truth: Any
    n_recs: int


def save_arrays(n_users: int, seed: int, n_recs: int, out: Path) -> dict[str, int]:
    """Generate the data once and store every column as ``.npy`` in ``out``."""
    recs, truth = make_arrays(n_users, n_recs, seed)
    out.mkdir(parents=True, exist_ok=True)
    for prefix, cols in (("recs", recs), ("truth", truth)):
        for name, arr in cols.items():
            np.save(out / f"{prefix}.{name}.npy", arr)
    return {"rec_rows": len(recs["user"]), "truth_rows": len(truth["user"])}


def load_inputs(data_dir: Path, kind: str) -> Inputs:
    """Load the stored columns into the start frames of ``kind`` ("polars" or "pandas")."""
    recs = {name: np.load(data_dir / f"recs.{name}.npy") for name in RECS_SCHEMA}
    truth = {name: np.load(data_dir / f"truth.{name}.npy") for name in TRUTH_SCHEMA}
    n_recs = int(recs["rank"].max())
    if kind == "polars":
        import polars as pl

        return Inputs(kind, pl.DataFrame(recs), pl.DataFrame(truth), n_recs)
    if kind == "pandas":
        import pandas as pd

        return Inputs(kind, pd.DataFrame(recs, copy=False), pd.DataFrame(truth, copy=False), n_recs)
    raise ValueError(f"kind: expected 'polars' or 'pandas', got {kind!r}")


def nested_dict(
    users: np.ndarray, items: np.ndarray, values: np.ndarray
) -> dict[str, dict[str, Any]]:
    """``{str(user): {str(item): value}}``, the qrels/run format of trec_eval and ranx.

    Groups by sorting once and slicing, which is much faster than a per-row
    ``setdefault`` loop; ids become strings as both tools require.
    """
    order = np.argsort(users, kind="stable")
    u = users[order]
    cuts = np.flatnonzero(u[1:] != u[:-1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(u)]
    keys = list(map(str, u[starts].tolist()))
    item_ids = list(map(str, items[order].tolist()))
    vals = values[order].tolist()
    return {
        key: dict(zip(item_ids[s:e], vals[s:e], strict=True))
        for key, s, e in zip(keys, starts, ends, strict=True)
    }


def qrels_and_run(
    inputs: Inputs, cut: int | None
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Nested qrels (graded relevance) and run (score) dicts from pandas start frames."""
    recs, truth = inputs.recs, inputs.truth
    if cut is not None:
        recs = recs[recs["rank"].to_numpy() <= cut]
    qrels = nested_dict(
        truth["user"].to_numpy(), truth["item"].to_numpy(), truth["relevance"].to_numpy()
    )
    run = nested_dict(recs["user"].to_numpy(), recs["item"].to_numpy(), recs["score"].to_numpy())
    return qrels, run


# --------------------------------------------------------------------------------------
# The tools. Each prepare_* gets the start frames and returns what to time.
# --------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """What a worker times (``run``), and what it calls untimed after or between runs."""

    run: Callable[[], Values] | None
    extras: Callable[[], Values] | None = None
    reset: Callable[[], None] | None = None


def _fm_row(out: Any) -> dict[str, Any]:
    """The single aggregate row of a frame_metrics result (polars or pandas)."""
    import polars as pl

    if isinstance(out, pl.LazyFrame):
        out = out.collect()
    if isinstance(out, pl.DataFrame):
        return out.row(0, named=True)
    return {str(k): v for k, v in out.iloc[0].to_dict().items()}


def _fm_values(row: dict[str, Any], k: int = K) -> Values:
    values = {m: float(row[f"{m}@{k}"]) for m in METRICS if f"{m}@{k}" in row}
    values["n_users"] = float(row["n_users"])
    return values


def prepare_frame_metrics(
    inputs: Inputs, engine: Engine, lazy: bool = False, validate: bool = True
) -> Prepared:
    """frame_metrics.evaluate on the start frames with the given polars engine."""
    import polars as pl

    import frame_metrics as fm
    import frame_metrics.engine

    frame_metrics.engine.DEFAULT_ENGINE = engine

    def run() -> Values:
        recs, truth = inputs.recs, inputs.truth
        if lazy:
            recs, truth = recs.lazy(), truth.lazy()
        out = fm.evaluate(recs, truth, metrics=METRICS, k=K, aggregate=True, validate=validate)
        if isinstance(out, pl.LazyFrame):
            out = out.collect(engine=engine)
        return _fm_values(_fm_row(out))

    return Prepared(run)


def prepare_frame_metrics_reference(inputs: Inputs) -> Prepared:
    """Untimed: the frame_metrics means under every convention the peers are compared with."""
    import polars as pl

    import frame_metrics as fm

    recs, truth = inputs.recs, inputs.truth

    def mean(metric: str, k: int = K, t: pl.DataFrame = truth, **opts: Any) -> float:
        out = fm.evaluate(recs, t, metrics=[metric], k=k, aggregate=True, **opts)
        return _fm_values(_fm_row(out), k)[metric]

    def extras() -> Values:
        binary = truth.with_columns(pl.lit(1, dtype=pl.Int32).alias("relevance"))
        # RecTools' default NDCG divides the binary DCG by the IDCG of k relevant items:
        # rescale per user by IDCG(min(|R|, k)) / IDCG(k).
        per_user = fm.evaluate(recs, binary, metrics=["ndcg"], k=K, aggregate=False)
        counts = truth.group_by("user").agg(pl.len().alias("n_relevant"))
        joined = per_user.join(counts, on="user")
        disc = 1.0 / np.log2(np.arange(2, K + 2))
        idcg = np.concatenate(([0.0], np.cumsum(disc)))
        n = np.minimum(joined["n_relevant"].to_numpy(), K)
        scaled = joined[f"ndcg@{K}"].to_numpy() * idcg[n] / idcg[K]
        values = _fm_values(_fm_row(fm.evaluate(recs, truth, metrics=METRICS, k=K, aggregate=True)))
        return {
            **values,
            "ap_relevant": mean("ap", ap_denominator="relevant"),
            "ndcg_binary": mean("ndcg", t=binary),
            "ndcg_binary_idcg_k": float(scaled.mean()),
            "mrr_full": mean("mrr", k=inputs.n_recs),
        }

    return Prepared(None, extras)


PYTREC_MEASURES = {"P_10", "recall_10", "map_cut_10", "ndcg_cut_10", "recip_rank"}


def prepare_pytrec_eval(inputs: Inputs, cut: int | None) -> Prepared:
    """pytrec_eval: build qrels/run dicts, evaluate, average over queries."""
    import pytrec_eval

    def run() -> Values:
        qrels, trec_run = qrels_and_run(inputs, cut)
        per_query = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(trec_run)
        means = {
            m: float(np.mean([q[m] for q in per_query.values()])) for m in sorted(PYTREC_MEASURES)
        }
        means["n_users"] = float(len(per_query))
        return means

    return Prepared(run)


def prepare_rectools(inputs: Inputs) -> Prepared:
    """RecTools calc_metrics on pandas frames renamed to its Columns."""
    from rectools import Columns
    from rectools.metrics import MAP, MRR, NDCG, Precision, Recall, calc_metrics

    def frames() -> tuple[Any, Any]:
        reco = inputs.recs.rename(
            columns={"user": Columns.User, "item": Columns.Item, "rank": Columns.Rank}
        )
        inter = inputs.truth.rename(columns={"user": Columns.User, "item": Columns.Item})
        return reco[[Columns.User, Columns.Item, Columns.Rank]], inter[[Columns.User, Columns.Item]]

    def run() -> Values:
        reco, inter = frames()
        metrics = {
            "Precision": Precision(k=K),
            "Recall": Recall(k=K),
            "MAP": MAP(k=K),
            "NDCG(divide_by_achievable=True)": NDCG(k=K, divide_by_achievable=True),
            "MRR": MRR(k=K),
        }
        return {name: float(v) for name, v in calc_metrics(metrics, reco, inter).items()}

    def extras() -> Values:
        reco, inter = frames()
        metrics = {"NDCG (default)": NDCG(k=K), "MAP(divide_by_k=True)": MAP(k=K, divide_by_k=True)}
        return {name: float(v) for name, v in calc_metrics(metrics, reco, inter).items()}

    return Prepared(run, extras)


RANX_METRICS = [f"precision@{K}", f"recall@{K}", f"map@{K}", f"ndcg@{K}", f"mrr@{K}"]


def prepare_ranx(inputs: Inputs) -> Prepared:
    """ranx: Qrels/Run from nested dicts (its from_df rejects pandas 3 string columns)."""
    from ranx import Qrels, Run, evaluate

    def run() -> Values:
        qrels, trec_run = qrels_and_run(inputs, None)
        result = evaluate(Qrels(qrels), Run(trec_run), RANX_METRICS, make_comparable=False)
        return {name: float(v) for name, v in result.items()}

    return Prepared(run)


def prepare_recommenders(inputs: Inputs) -> Prepared:
    """Recommenders python_evaluation on pandas frames (ranks by the score column)."""
    from recommenders.evaluation import python_evaluation as pe

    cols = {"col_user": "user", "col_item": "item", "col_prediction": "score", "k": K}

    def frames() -> tuple[Any, Any]:
        # Its own "rank" column clashes with ours in ndcg_at_k's merges: drop ours.
        return inputs.truth, inputs.recs[["user", "item", "score"]]

    def run() -> Values:
        truth, pred = frames()
        return {
            "precision_at_k": float(pe.precision_at_k(truth, pred, **cols)),
            "recall_at_k": float(pe.recall_at_k(truth, pred, **cols)),
            "map_at_k": float(pe.map_at_k(truth, pred, **cols)),
            "ndcg_at_k(score_type='raw')": float(
                pe.ndcg_at_k(truth, pred, col_rating="relevance", score_type="raw", **cols)
            ),
        }

    def extras() -> Values:
        truth, pred = frames()
        return {
            "map": float(pe.map(truth, pred, **cols)),
            "ndcg_at_k (default)": float(pe.ndcg_at_k(truth, pred, col_rating="relevance", **cols)),
        }

    def reset() -> None:
        # lru_cache_df would otherwise serve repeats (same frame contents) from its cache.
        for fn in (pe.merge_ranking_true_pred, pe._get_reciprocal_rank):
            clear = getattr(fn, "cache_clear", None)
            if clear is not None:
                clear()

    return Prepared(run, extras, reset)


@dataclass(frozen=True)
class Check:
    """Compare the tool's value ``label`` with the frame_metrics reference value ``ref``.

    ``matched``: the conventions agree, so the values must be equal; otherwise the row
    documents an expected difference, explained by ``note``.
    """

    label: str
    ref: str
    note: str = ""
    matched: bool = True


#: Names of the frame_metrics reference values, as shown in the agreement table.
REF_NAMES = {
    "precision": f"precision@{K}",
    "recall": f"recall@{K}",
    "ap": f"ap@{K} (min_k)",
    "ap_relevant": f"ap@{K} (relevant)",
    "ndcg": f"ndcg@{K}",
    "ndcg_binary": f"ndcg@{K} (binary gain)",
    "ndcg_binary_idcg_k": f"ndcg@{K} binary x IDCG(min(|R|,k))/IDCG(k)",
    "mrr": f"mrr@{K}",
    "mrr_full": "mrr@n_recs (whole list)",
    "n_users": "n_users",
}
#: Which table column a reference value belongs to.
METRIC_OF = {
    "mrr_full": "MRR",
    "precision": "P",
    "recall": "R",
    "ap": "AP",
    "ap_relevant": "AP",
    "ndcg": "NDCG",
    "ndcg_binary": "NDCG",
    "mrr": "MRR",
}


@dataclass(frozen=True)
class Runner:
    """How to start one (tool, variant): its start frames and its prepare function."""

    tool: str
    variant: str
    kind: str
    prepare: Callable[[Inputs], Prepared]
    slow: bool = False
    #: What to compare with the frame_metrics reference values.
    compare: tuple[Check, ...] = ()


_FM_SAME = tuple(Check(m, m) for m in METRICS)
_PYTREC_COMPARE = (
    Check("P_10", "precision"),
    Check("recall_10", "recall"),
    Check("map_cut_10", "ap_relevant", "map_cut divides by |R|: ap_denominator='relevant'"),
    Check("map_cut_10", "ap", "fm's default AP divides by min(|R|, k)", matched=False),
    Check("ndcg_cut_10", "ndcg", "linear gain, IDCG over all judged items"),
)

RUNNERS: dict[str, Runner] = {
    "fm-reference": Runner(
        "frame_metrics", "reference values (untimed)", "polars", prepare_frame_metrics_reference
    ),
    "fm-polars-in-memory": Runner(
        "frame_metrics",
        "polars eager, in-memory",
        "polars",
        lambda i: prepare_frame_metrics(i, "in-memory"),
        compare=_FM_SAME,
    ),
    "fm-polars-streaming": Runner(
        "frame_metrics",
        "polars eager, streaming",
        "polars",
        lambda i: prepare_frame_metrics(i, "streaming"),
        compare=_FM_SAME,
    ),
    "fm-polars-no-validate": Runner(
        "frame_metrics",
        "polars eager, streaming, validate=False",
        "polars",
        lambda i: prepare_frame_metrics(i, "streaming", validate=False),
        compare=_FM_SAME,
    ),
    "fm-lazy-in-memory": Runner(
        "frame_metrics",
        "polars LazyFrame, in-memory",
        "polars",
        lambda i: prepare_frame_metrics(i, "in-memory", lazy=True),
        compare=_FM_SAME,
    ),
    "fm-lazy-streaming": Runner(
        "frame_metrics",
        "polars LazyFrame, streaming",
        "polars",
        lambda i: prepare_frame_metrics(i, "streaming", lazy=True),
        compare=_FM_SAME,
    ),
    "fm-pandas-in-memory": Runner(
        "frame_metrics",
        "pandas, in-memory",
        "pandas",
        lambda i: prepare_frame_metrics(i, "in-memory"),
        compare=_FM_SAME,
    ),
    "fm-pandas-streaming": Runner(
        "frame_metrics",
        "pandas, streaming",
        "pandas",
        lambda i: prepare_frame_metrics(i, "streaming"),
        compare=_FM_SAME,
    ),
    "pytrec_eval-full": Runner(
        "pytrec_eval",
        "dicts, full run (all ranks)",
        "pandas",
        lambda i: prepare_pytrec_eval(i, None),
        compare=(
            *_PYTREC_COMPARE,
            Check(
                "recip_rank",
                "mrr",
                "recip_rank has no cutoff: a first hit below rank k counts",
                matched=False,
            ),
            Check("recip_rank", "mrr_full", "recip_rank = MRR over the whole list"),
        ),
    ),
    "pytrec_eval-cut": Runner(
        "pytrec_eval",
        f"dicts, run cut to rank <= {K}",
        "pandas",
        lambda i: prepare_pytrec_eval(i, K),
        compare=(
            *_PYTREC_COMPARE,
            Check("recip_rank", "mrr", "the cut run makes recip_rank = mrr@k"),
        ),
    ),
    "rectools": Runner(
        "RecTools",
        "calc_metrics, pandas",
        "pandas",
        prepare_rectools,
        compare=(
            Check("Precision", "precision"),
            Check("Recall", "recall"),
            Check("MAP", "ap_relevant", "MAP divides by |R|: ap_denominator='relevant'"),
            Check(
                "NDCG(divide_by_achievable=True)",
                "ndcg_binary",
                "RecTools NDCG has binary gain only",
            ),
            Check(
                "NDCG(divide_by_achievable=True)",
                "ndcg",
                "graded relevance is ignored (binary gain)",
                matched=False,
            ),
            Check("MRR", "mrr"),
            Check(
                "NDCG (default)",
                "ndcg_binary",
                "default IDCG = k relevant items, not min(|R|, k)",
                matched=False,
            ),
            Check("NDCG (default)", "ndcg_binary_idcg_k", "default = binary DCG / IDCG of k items"),
            Check(
                "MAP(divide_by_k=True)",
                "ap",
                "divide_by_k divides by k, not min(|R|, k)",
                matched=False,
            ),
        ),
    ),
    "ranx": Runner(
        "ranx",
        "Qrels/Run from dicts",
        "pandas",
        prepare_ranx,
        slow=True,
        compare=(
            Check(f"precision@{K}", "precision"),
            Check(f"recall@{K}", "recall"),
            Check(f"map@{K}", "ap_relevant", "map@k divides by |R|: ap_denominator='relevant'"),
            Check(f"ndcg@{K}", "ndcg", "linear (Jarvelin) gain"),
            Check(f"mrr@{K}", "mrr"),
        ),
    ),
    "recommenders": Runner(
        "Recommenders",
        "python_evaluation, pandas",
        "pandas",
        prepare_recommenders,
        slow=True,
        compare=(
            Check("precision_at_k", "precision"),
            Check("recall_at_k", "recall"),
            Check("map_at_k", "ap", "map_at_k divides by min(|R|, k): the default ap"),
            Check("ndcg_at_k(score_type='raw')", "ndcg", "score_type='raw' = linear gain"),
            Check("ndcg_at_k (default)", "ndcg_binary", "default score_type='binary'"),
            Check("map", "ap_relevant", "map (no _at_k) divides by |R|"),
        ),
    ),
}
BASELINE = "fm-polars-streaming"  # the package default engine
REFERENCE = "fm-reference"
FAST_PEERS = ["pytrec_eval-full", "pytrec_eval-cut", "rectools"]
SLOW_PEERS = ["ranx", "recommenders"]
FM_VARIANTS = [name for name in RUNNERS if name.startswith("fm-") and name != REFERENCE]


# --------------------------------------------------------------------------------------
# Worker (one subprocess per job)
# --------------------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    """A memory field of ``/proc/self/status`` in KiB: ``VmRSS`` (now) or ``VmHWM`` (peak).

    ``VmHWM`` is the peak RSS of this process image only, unlike ``ru_maxrss``, which
    starts from the parent's peak (carried over fork and exec).
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


def worker(name: str, data_dir: Path, repeats: int, budget: float) -> dict[str, Any]:
    """Load the start frames, time ``repeats`` runs (fewer past ``budget`` s), report."""
    runner = RUNNERS[name]
    inputs = load_inputs(data_dir, runner.kind)
    gc.collect()
    report: dict[str, Any] = {"base_kib": _status_kib("VmRSS")}
    prepared = runner.prepare(inputs)
    times: list[float] = []
    values: Values = {}
    for _ in range(repeats if prepared.run is not None else 0):
        assert prepared.run is not None
        if prepared.reset is not None:
            prepared.reset()
        gc.collect()
        start = time.perf_counter()
        values = prepared.run()
        times.append(time.perf_counter() - start)
        if sum(times) > budget:
            break
    report["peak_kib"] = _status_kib("VmHWM")  # before the untimed extras
    report["times"] = times
    report["values"] = values
    report["extras"] = prepared.extras() if prepared.extras is not None else {}
    return report


def print_report(run: Callable[[], dict[str, Any]]) -> int:
    """Run a worker and print its report (or its error) as one marked JSON line."""
    try:
        report = run()
    except Exception as exc:  # report any failure of a tool instead of crashing the run
        traceback.print_exc()
        report = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARK + json.dumps(report), flush=True)
    return 0


def worker_main(name: str, data_dir: Path, repeats: int, budget: float) -> int:
    """Run :func:`worker` and print its report (or the error) as one marked JSON line."""
    return print_report(lambda: worker(name, data_dir, repeats, budget))


# --------------------------------------------------------------------------------------
# Parent: plan jobs, run them in subprocesses, print the tables
# --------------------------------------------------------------------------------------


@dataclass
class Result:
    """One job's outcome as seen by the parent."""

    name: str
    users: int
    times: list[float] = field(default_factory=list)
    values: Values = field(default_factory=dict)
    extras: Values = field(default_factory=dict)
    peak_mib: float = math.nan
    rusage_peak_mib: float = math.nan
    base_mib: float = math.nan
    error: str = ""

    @property
    def runner(self) -> Runner:
        return RUNNERS[self.name]

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else math.nan


def run_job(
    name: str, users: int, data_dir: Path, *, repeats: int, budget: float, timeout: float
) -> Result:
    """Run one job in a fresh interpreter and collect its report.

    ``os.wait4``'s ``ru_maxrss`` is kept as a cross-check (``rusage_peak_mib``; it can
    only be higher than the job's own ``VmHWM``, by up to the parent's peak RSS).
    """
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--data-dir",
        str(data_dir),
        "--repeats",
        str(repeats),
        "--budget",
        str(budget),
    ]
    result = Result(name, users)
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            timer.cancel()
        err.seek(0)
        stderr_tail = err.read()[-2000:]
    result.rusage_peak_mib = usage.ru_maxrss / 1024  # KiB on Linux
    lines = [line for line in out.splitlines() if line.startswith(RESULT_MARK)]
    if not lines:
        why = (
            f"timed out after {timeout:.0f}s"
            if proc.returncode < 0
            else f"exit code {proc.returncode}"
        )
        result.error = f"no result ({why}); stderr tail: {stderr_tail.strip()[-300:]}"
        return result
    report = json.loads(lines[-1][len(RESULT_MARK) :])
    if "error" in report:
        result.error = report["error"]
        return result
    result.times = report["times"]
    result.values = report["values"]
    result.extras = report["extras"]
    result.base_mib = report["base_kib"] / 1024
    result.peak_mib = report["peak_kib"] / 1024
    return result


def generate_in_subprocess(users: int, seed: int, n_recs: int, data_dir: Path) -> dict[str, int]:
    """Run :func:`save_arrays` in a subprocess, so that this process stays small."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--save-data",
        "--users",
        str(users),
        "--seed",
        str(seed),
        "--recs",
        str(n_recs),
        "--data-dir",
        str(data_dir),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = next(line for line in out.splitlines() if line.startswith(RESULT_MARK))
    info: dict[str, int] = json.loads(line[len(RESULT_MARK) :])
    return info


def plan(args: argparse.Namespace) -> list[tuple[int, list[str]]]:
    """Which jobs run at which size: ``[(users, [job, ...]), ...]``.

    The main size runs every frame_metrics variant and the fast peers (plus ranx and
    Recommenders with ``--slow-peers``); ``--slow-size`` runs every peer on a smaller
    dataset. ``--only`` narrows both (naming a slow peer runs it at the main size too).
    The untimed reference and the baseline always run.
    """
    wanted = {n.strip() for n in args.only.split(",") if n.strip()} if args.only else None
    unknown = (wanted or set()) - set(RUNNERS)
    if unknown:
        raise SystemExit(f"--only: unknown jobs {sorted(unknown)}; known: {', '.join(RUNNERS)}")

    def keep(names: list[str]) -> list[str]:
        names = [n for n in names if wanted is None or n in wanted]
        return list(dict.fromkeys([REFERENCE, BASELINE, *names]))

    slow_main = SLOW_PEERS if args.slow_peers or wanted else []
    stages = [(args.users, keep([*FM_VARIANTS, *FAST_PEERS, *slow_main]))]
    if args.slow_size and args.slow_size != args.users:
        small = ["fm-pandas-streaming", *FAST_PEERS, *SLOW_PEERS]
        stages.append((args.slow_size, keep(small)))
    return stages


def _fmt_s(x: float) -> str:
    if math.isnan(x):
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _progress(result: Result) -> str:
    """One line about a finished job."""
    if result.error:
        return f"FAILED: {result.error}"
    if not result.times:
        return f"{len(result.extras)} reference values, peak {result.peak_mib:,.0f} MiB"
    return (
        f"median {_fmt_s(result.median)}s over {len(result.times)} run(s), "
        f"peak {result.peak_mib:,.0f} MiB"
    )


def timing_table(results: list[Result]) -> list[list[str]]:
    """Rows of the timing table; the ratio is against the baseline at the same size."""
    base = {r.users: r.median for r in results if r.name == BASELINE and r.times}
    rows = [
        [
            "users",
            "tool",
            "variant",
            "median s",
            "best s",
            "first s",
            "runs",
            "peak MiB",
            "data MiB",
            "peak-data",
            "ratio",
        ]
    ]
    for r in results:
        if r.name == REFERENCE:
            continue
        ref = base.get(r.users, math.nan)
        ratio = r.median / ref if r.times and not math.isnan(ref) else math.nan
        if r.error:
            rows.append(
                [
                    f"{r.users:,}",
                    r.runner.tool,
                    r.runner.variant,
                    "FAILED",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    r.error[:120],
                ]
            )
            continue
        rows.append(
            [
                f"{r.users:,}",
                r.runner.tool,
                r.runner.variant,
                _fmt_s(r.median),
                _fmt_s(min(r.times)),
                _fmt_s(r.times[0]),
                str(len(r.times)),
                f"{r.peak_mib:,.0f}",
                f"{r.base_mib:,.0f}",
                f"{r.peak_mib - r.base_mib:,.0f}",
                "-" if math.isnan(ratio) else f"{ratio:.1f}x",
            ]
        )
    return rows


def _references(results: list[Result]) -> dict[int, Values]:
    """The frame_metrics reference values (baseline job, extras included) per size."""
    return {
        r.users: {**r.values, **r.extras} for r in results if r.name == REFERENCE and not r.error
    }


def _fmt_diff(diff: float) -> str:
    return "0" if diff == 0 else f"{diff:.1e}"


def agreement_table(results: list[Result]) -> list[list[str]]:
    """Rows comparing every tool's means with frame_metrics, matched conventions first."""
    refs = _references(results)
    rows = [
        [
            "users",
            "tool / variant",
            "tool metric",
            "tool mean",
            "frame_metrics",
            "fm mean",
            "|diff|",
            "verdict",
        ]
    ]
    for r in results:
        ref = refs.get(r.users)
        if r.error or ref is None or r.name == REFERENCE:
            continue
        got = {**r.values, **r.extras}
        checks = [*r.runner.compare, Check("n_users", "n_users")]
        for c in sorted(checks, key=lambda c: not c.matched):
            if c.label not in got or c.ref not in ref:
                continue
            diff = abs(got[c.label] - ref[c.ref])
            if c.matched:
                verdict = "equal" if diff <= TOLERANCE else "MISMATCH"
            else:
                verdict = "differs, as expected" if diff > TOLERANCE else "equal on this data"
            rows.append(
                [
                    f"{r.users:,}",
                    f"{r.runner.tool} / {r.runner.variant}",
                    c.label,
                    f"{got[c.label]:.6f}",
                    REF_NAMES.get(c.ref, c.ref),
                    f"{ref[c.ref]:.6f}",
                    _fmt_diff(diff),
                    f"{verdict}: {c.note}" if c.note else verdict,
                ]
            )
    return rows


def max_diff_table(results: list[Result]) -> list[list[str]]:
    """Largest |diff| per tool and metric over the matched-convention checks (all sizes)."""
    refs = _references(results)
    table: dict[str, dict[str, float]] = {}
    for r in results:
        ref = refs.get(r.users)
        if r.error or ref is None or r.name == REFERENCE:
            continue
        got = {**r.values, **r.extras}
        row = table.setdefault(f"{r.runner.tool} / {r.runner.variant}", {})
        for c in r.runner.compare:
            if c.matched and c.label in got and c.ref in ref and c.ref in METRIC_OF:
                m = METRIC_OF[c.ref]
                row[m] = max(row.get(m, 0.0), abs(got[c.label] - ref[c.ref]))
    rows = [["tool / variant", "P", "R", "AP", "NDCG", "MRR"]]
    for name, cells in table.items():
        rows.append(
            [
                name,
                *(
                    _fmt_diff(cells[m]) if m in cells else "n/a"
                    for m in ("P", "R", "AP", "NDCG", "MRR")
                ),
            ]
        )
    return rows


def render(rows: list[list[str]], markdown: bool = False) -> str:
    """A plain or markdown table."""
    if markdown:
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in rows[0]) + " |"]
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command line options."""
    p = argparse.ArgumentParser(
        description="Ranking-metric benchmark: frame_metrics vs peers, k=10."
    )
    p.add_argument(
        "--users", type=int, default=100_000, help="users at the main size (x --recs rows)"
    )
    p.add_argument("--recs", type=int, default=100, help="recommendations per user")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--slow-size",
        type=int,
        default=10_000,
        help="also run every peer, ranx and Recommenders included, at this many users (0: skip)",
    )
    p.add_argument(
        "--slow-peers", action="store_true", help="also run ranx and Recommenders at --users"
    )
    p.add_argument(
        "--only",
        default="",
        help=f"comma-separated jobs (the baseline always runs): {', '.join(RUNNERS)}",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs per job (median reported)")
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="stop repeating a job after this many timed seconds",
    )
    p.add_argument(
        "--timeout", type=float, default=600.0, help="kill a job after this many seconds"
    )
    p.add_argument(
        "--data-dir", type=Path, help="keep the generated .npy data here (default: a temp dir)"
    )
    p.add_argument("--json", type=Path, help="write all results as JSON here")
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--save-data", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


PACKAGES = [
    "frame_metrics",
    "polars",
    "pandas",
    "numpy",
    "pytrec-eval-terrier",
    "rectools",
    "ranx",
    "recommenders",
]


def environment() -> str:
    """Python, package versions, cores and load: what the timings depend on."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"python {sys.version.split()[0]}; {'; '.join(found)}\n"
        f"{os.cpu_count()} cores; load average {load}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Plan, run every job in a subprocess, print the tables; 1 if a matched check fails."""
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.data_dir, args.repeats, args.budget)
    if args.save_data:
        info = save_arrays(args.users, args.seed, args.recs, args.data_dir)
        print(RESULT_MARK + json.dumps(info), flush=True)
        return 0

    print(environment(), flush=True)
    started = time.perf_counter()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="fm-bench-") as tmp:
        for users, names in plan(args):
            data_dir = (args.data_dir or Path(tmp)) / f"u{users}-r{args.recs}-s{args.seed}"
            start = time.perf_counter()
            info = generate_in_subprocess(users, args.seed, args.recs, data_dir)
            print(
                f"\n== {users:,} users: {info['rec_rows']:,} rec rows, "
                f"{info['truth_rows']:,} truth rows (generated in {time.perf_counter() - start:.1f}s)",
                flush=True,
            )
            for name in names:
                result = run_job(
                    name,
                    users,
                    data_dir,
                    repeats=args.repeats,
                    budget=args.budget,
                    timeout=args.timeout,
                )
                results.append(result)
                print(f"  {name:<24} {_progress(result)}", flush=True)

    print(
        f"\nTimings (k={K}; median of up to {args.repeats} runs; ratio = median / frame_metrics "
        "polars eager with the default (streaming) engine at the same size; peak = peak RSS (VmHWM) of the job's process, "
        "data = its RSS after loading the start frames, before importing the tool)"
    )
    print(render(timing_table(results), args.markdown))
    agreement = agreement_table(results)
    print(
        f"\nAgreement of mean values with frame_metrics (|diff| <= {TOLERANCE:g} counts as equal)"
    )
    print(render(agreement, args.markdown))
    print("\nLargest |diff| per metric under matching conventions")
    print(render(max_diff_table(results), args.markdown))
    mismatches = sum(row[-1].startswith("MISMATCH") for row in agreement[1:])
    failed = [r.name for r in results if r.error]
    print(
        f"\n{mismatches} mismatch(es) under matching conventions; "
        f"{len(failed)} failed job(s){': ' + ', '.join(failed) if failed else ''}; "
        f"total {time.perf_counter() - started:.0f}s"
    )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
