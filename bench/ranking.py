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

Besides the peers, every size (``--users 100000,1000000``) times the obvious hand-written
polars query (``polars-handwritten*``) and frame_metrics' other call shapes
(``fm-shape-*``: ``score=``, k=100, several k, ``by=``, lazy results), and ends with a
table of the speed, memory and shape targets, each marked PASS or FAIL.
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


#: The stacked models of the by-model shape and the rank shift of each (0: as generated).
MODEL_SHIFTS = {"a": 0, "b": 3, "c": 7}
#: Start-frame kinds: polars eager, pandas (numpy dtypes), and the polars frames of two
#: shapes, both derived untimed from the polars frames: without the rank column
#: (``score=``) and the recommendations of three stacked models (``by="model"``).
KINDS = ("polars", "pandas", "polars-no-rank", "polars-3-models")


def stack_models(recs: Any, n_recs: int) -> Any:
    """``recs`` once per model of :data:`MODEL_SHIFTS`, with a String ``model`` column.

    Model ``a`` is ``recs`` as is; the others permute the ranks within each user,
    ``rank' = ((rank - 1 + shift) % n_recs) + 1``, and keep every other column (so their
    scores no longer follow their ranks: only the rank column is used).
    """
    import polars as pl

    rank = recs.schema["rank"]
    frames = [
        recs.with_columns(
            ((pl.col("rank") - 1 + shift) % n_recs + 1).cast(rank).alias("rank"),
            pl.lit(model).alias("model"),
        )
        for model, shift in MODEL_SHIFTS.items()
    ]
    return pl.concat(frames)


def load_inputs(data_dir: Path, kind: str) -> Inputs:
    """Load the stored columns into the start frames of ``kind`` (one of :data:`KINDS`)."""
    recs = {name: np.load(data_dir / f"recs.{name}.npy") for name in RECS_SCHEMA}
    truth = {name: np.load(data_dir / f"truth.{name}.npy") for name in TRUTH_SCHEMA}
    n_recs = int(recs["rank"].max())
    if kind.startswith("polars"):
        import polars as pl

        recs_pl, truth_pl = pl.DataFrame(recs), pl.DataFrame(truth)
        if kind == "polars-no-rank":
            recs_pl = recs_pl.drop("rank")
        elif kind == "polars-3-models":
            recs_pl = stack_models(recs_pl, n_recs)
        elif kind != "polars":
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        return Inputs(kind, recs_pl, truth_pl, n_recs)
    if kind == "pandas":
        import pandas as pd

        return Inputs(kind, pd.DataFrame(recs, copy=False), pd.DataFrame(truth, copy=False), n_recs)
    raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")


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
    """Nested qrels (graded relevance) and run (score) dicts from pandas start frames.

    The run's score is ``-rank``: trec_eval orders by score, breaking ties by document
    id. With the generator's squashed scores its means differed from every other tool
    by 4e-8 to 5e-7 at 1M users (11 users' top-11 scores tie in single precision); with
    ``-rank`` they agree to 5e-13, and the dicts cost the same to build.
    """
    recs, truth = inputs.recs, inputs.truth
    if cut is not None:
        recs = recs[recs["rank"].to_numpy() <= cut]
    qrels = nested_dict(
        truth["user"].to_numpy(), truth["item"].to_numpy(), truth["relevance"].to_numpy()
    )
    rank = recs["rank"].to_numpy()
    run = nested_dict(recs["user"].to_numpy(), recs["item"].to_numpy(), -rank.astype(np.float64))
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
    #: Facts about the run shown beside the tables, e.g. the package's default engine.
    info: dict[str, str] = field(default_factory=dict)


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


def _fm_all_values(row: dict[str, Any], prefix: str = "") -> Values:
    """Every ``metric@k`` of a result row: ``metric`` for k = K (as the reference values
    are named), ``metric@k`` for the other cutoffs; ``prefix`` is put before each name."""
    values: Values = {f"{prefix}n_users": float(row["n_users"])}
    for name, value in row.items():
        metric, at, k = str(name).partition("@")
        if at and metric in METRICS:
            values[f"{prefix}{metric if k == str(K) else name}"] = float(value)
    return values


def _default_engine() -> dict[str, str]:
    """The package's default polars engine, as imported (before a job changes it)."""
    import frame_metrics.engine

    return {"default_engine": str(frame_metrics.engine.DEFAULT_ENGINE)}


def prepare_frame_metrics(
    inputs: Inputs, engine: Engine, lazy: bool = False, validate: bool = True
) -> Prepared:
    """frame_metrics.evaluate on the start frames with the given polars engine."""
    import polars as pl

    import frame_metrics as fm
    import frame_metrics.engine

    info = _default_engine()
    frame_metrics.engine.DEFAULT_ENGINE = engine

    def run() -> Values:
        recs, truth = inputs.recs, inputs.truth
        if lazy:
            recs, truth = recs.lazy(), truth.lazy()
        out = fm.evaluate(recs, truth, metrics=METRICS, k=K, aggregate=True, validate=validate)
        if isinstance(out, pl.LazyFrame):
            out = out.collect(engine=engine)
        return _fm_values(_fm_row(out))

    return Prepared(run, info=info)


def prepare_fm_shape(
    inputs: Inputs,
    *,
    k: int | list[int] = K,
    score: str | None = None,
    by: str | None = None,
    collect: Engine | None = None,
) -> Prepared:
    """One call shape of frame_metrics.evaluate, with the package's default engine.

    ``score``: rank by this column (the start frame has no rank column); ``by``: one
    result row per group (the values of model ``a``, the data as generated, are named
    like the reference values, the others get a ``"model:"`` prefix); ``collect``: start
    from LazyFrames and collect the lazy result with this engine (only the final collect:
    ``frame_metrics.engine.DEFAULT_ENGINE`` is left as the package sets it).
    """
    import polars as pl

    import frame_metrics as fm

    def run() -> Values:
        recs, truth = inputs.recs, inputs.truth
        if collect is not None:
            recs, truth = recs.lazy(), truth.lazy()
        out = fm.evaluate(recs, truth, metrics=METRICS, k=k, aggregate=True, score=score, by=by)
        if isinstance(out, pl.LazyFrame):
            if collect is None:
                raise TypeError("expected an eager result from eager input")
            out = out.collect(engine=collect)
        if by is None:
            return _fm_all_values(_fm_row(out))
        values: Values = {}
        for row in out.iter_rows(named=True):
            group = str(row.pop(by))
            values.update(_fm_all_values(row, "" if group == "a" else f"{group}:"))
        return values

    return Prepared(run, info=_default_engine())


def handwritten_per_user(recs: Any, truth: Any, k: int = K) -> Any:
    """The obvious hand-written polars query: one row per user with truth, lazily.

    Linear gain, relevant = relevance > 0, AP divided by min(|R|, k), as frame_metrics'
    defaults; users with relevant truth but no hit in the top k score 0.
    """
    import polars as pl

    top = recs.lazy().filter(pl.col("rank") <= k)
    relevant = truth.lazy().filter(pl.col("relevance") > 0)
    hits = (
        top.join(relevant, on=["user", "item"], how="inner")
        .group_by("user")
        .agg(
            pl.len().alias("hits"),
            (pl.col("relevance") / (pl.col("rank") + 1).log(2)).sum().alias("dcg"),
            (pl.int_range(1, pl.len() + 1) / pl.col("rank").sort()).sum().alias("ap_sum"),
            pl.col("rank").min().alias("first_hit"),
        )
    )
    ideal = relevant.group_by("user").agg(
        pl.len().alias("n_relevant"),
        (pl.col("relevance").sort(descending=True) / pl.int_range(2, pl.len() + 2).log(2))
        .head(k)
        .sum()
        .alias("idcg"),
    )
    return (
        ideal.join(hits, on="user", how="left")
        .with_columns(pl.col("hits", "dcg", "ap_sum").fill_null(0))
        .select(
            "user",
            (pl.col("hits") / k).alias("precision"),
            (pl.col("hits") / pl.col("n_relevant")).alias("recall"),
            (pl.col("ap_sum") / pl.min_horizontal("n_relevant", pl.lit(k))).alias("ap"),
            (pl.col("dcg") / pl.col("idcg")).alias("ndcg"),
            (1 / pl.col("first_hit")).fill_null(0).alias("mrr"),
        )
    )


def handwritten_means(recs: Any, truth: Any, k: int = K) -> Any:
    """The means of :func:`handwritten_per_user` and the number of users (lazily)."""
    import polars as pl

    per_user = handwritten_per_user(recs, truth, k)
    return per_user.select(pl.len().alias("n_users"), pl.col(METRICS).mean())


def prepare_handwritten(inputs: Inputs, collect: Engine | None) -> Prepared:
    """The hand-written polars query on the eager start frames; ``collect``: the engine
    passed to ``collect()`` (None: polars' own default, in-memory)."""

    def run() -> Values:
        query = handwritten_means(inputs.recs, inputs.truth)
        out = query.collect() if collect is None else query.collect(engine=collect)
        return {name: float(v) for name, v in out.row(0, named=True).items()}

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
            "mrr@100": mean("mrr", k=100),
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
    "mrr@100": "mrr@100",
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
    "mrr@100": "MRR",
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
    #: Input rows relative to the start frames of k=10 (the shapes table's per-row ratio).
    rows_factor: int = 1


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
_HANDWRITTEN = "polars (hand-written)"
RUNNERS["polars-handwritten"] = Runner(
    _HANDWRITTEN,
    "LazyFrame query, collect() (in-memory)",
    "polars",
    lambda i: prepare_handwritten(i, None),
    compare=_FM_SAME,
)
RUNNERS["polars-handwritten-streaming"] = Runner(
    _HANDWRITTEN,
    "LazyFrame query, collect(engine='streaming')",
    "polars",
    lambda i: prepare_handwritten(i, "streaming"),
    compare=_FM_SAME,
)

# The call shapes: polars eager start frames, the package's default engine, checks on.
_SHAPE = "frame_metrics"
_MULTI_K = [1, 5, 10, 20, 50, 100]
RUNNERS["fm-shape-k10"] = Runner(
    _SHAPE,
    f"shape: rank column, k={K} (shape reference)",
    "polars",
    prepare_fm_shape,
    compare=_FM_SAME,
)
RUNNERS["fm-shape-score"] = Runner(
    _SHAPE,
    "shape: score= (score descending, ties by item), no rank column",
    "polars-no-rank",
    lambda i: prepare_fm_shape(i, score="score"),
    compare=tuple(Check(m, m, "the scores descend with the ranks") for m in METRICS),
)
RUNNERS["fm-shape-k100"] = Runner(
    _SHAPE,
    "shape: k=100",
    "polars",
    lambda i: prepare_fm_shape(i, k=100),
    compare=(Check("mrr@100", "mrr@100"),),
)
RUNNERS["fm-shape-multik"] = Runner(
    _SHAPE,
    f"shape: k={_MULTI_K} in one call",
    "polars",
    lambda i: prepare_fm_shape(i, k=_MULTI_K),
    compare=(*_FM_SAME, Check("mrr@100", "mrr@100")),
)
RUNNERS["fm-shape-by-model"] = Runner(
    _SHAPE,
    f"shape: by='model', {len(MODEL_SHIFTS)} stacked models",
    "polars-3-models",
    lambda i: prepare_fm_shape(i, by="model"),
    compare=(
        *(Check(m, m, "model a = the data as generated") for m in METRICS),
        *(
            Check(f"{model}:n_users", "n_users", f"model {model}: the same users")
            for model in MODEL_SHIFTS
            if model != "a"
        ),
        *(
            Check(f"{model}:{m}", m, f"model {model}: ranks shifted by {shift}", matched=False)
            for model, shift in MODEL_SHIFTS.items()
            if model != "a"
            for m in ("ndcg", "mrr")
        ),
    ),
    rows_factor=len(MODEL_SHIFTS),
)
RUNNERS["fm-shape-lazy-in-memory"] = Runner(
    _SHAPE,
    "shape: LazyFrame result, collect(engine='in-memory')",
    "polars",
    lambda i: prepare_fm_shape(i, collect="in-memory"),
    compare=_FM_SAME,
)
RUNNERS["fm-shape-lazy-streaming"] = Runner(
    _SHAPE,
    "shape: LazyFrame result, collect(engine='streaming')",
    "polars",
    lambda i: prepare_fm_shape(i, collect="streaming"),
    compare=_FM_SAME,
)

BASELINE = "fm-polars-streaming"  # the package default engine
REFERENCE = "fm-reference"
#: The reference of the shapes table: k=10 from a rank column, package default engine.
SHAPE_BASE = "fm-shape-k10"
FAST_PEERS = ["pytrec_eval-full", "pytrec_eval-cut", "rectools"]
SLOW_PEERS = ["ranx", "recommenders"]
HANDWRITTEN = ["polars-handwritten", "polars-handwritten-streaming"]
SHAPES = [name for name in RUNNERS if name.startswith("fm-shape-")]
FM_VARIANTS = [
    name for name in RUNNERS if name.startswith("fm-") and name not in {REFERENCE, *SHAPES}
]
#: The peers whose faster one frame_metrics is compared with in the targets.
TARGET_PEERS = ["pytrec_eval-cut", "rectools"]


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
    report["info"] = prepared.info
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
    info: dict[str, str] = field(default_factory=dict)
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
    result.info = report.get("info", {})
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


def parse_sizes(text: str) -> list[int]:
    """``"100000,1000000"`` -> ``[100000, 1000000]`` (duplicates dropped, order kept)."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--users: expected comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--users: expected sizes >= 1, got {text!r}")
    return list(dict.fromkeys(sizes))


def plan(args: argparse.Namespace) -> list[tuple[int, list[str]]]:
    """Which jobs run at which size: ``[(users, [job, ...]), ...]``.

    Every size of ``--users`` runs every frame_metrics variant, the hand-written polars
    query, the fast peers (plus ranx and Recommenders with ``--slow-peers``) and the
    call shapes (unless ``--no-shapes``); pytrec_eval on the full run only up to
    ``--full-run-max`` users (it needs ~2 GB per 100k users). ``--slow-size`` runs every
    peer on a smaller dataset. ``--only`` narrows all of it (naming a slow peer runs it
    at the main sizes too, naming pytrec_eval-full runs it at every size). The untimed
    reference and the baseline always run, and the shape reference whenever a shape does.
    """
    wanted = {n.strip() for n in args.only.split(",") if n.strip()} if args.only else None
    unknown = (wanted or set()) - set(RUNNERS)
    if unknown:
        raise SystemExit(f"--only: unknown jobs {sorted(unknown)}; known: {', '.join(RUNNERS)}")

    def keep(names: list[str]) -> list[str]:
        names = [n for n in names if wanted is None or n in wanted]
        if any(n in SHAPES for n in names):
            names.insert(0, SHAPE_BASE)
        return list(dict.fromkeys([REFERENCE, BASELINE, *names]))

    slow_main = SLOW_PEERS if args.slow_peers or wanted else []
    shapes = [] if args.no_shapes else SHAPES
    sizes = parse_sizes(args.users)
    stages = []
    for users in sizes:
        peers = [
            n for n in FAST_PEERS if n != "pytrec_eval-full" or users <= args.full_run_max or wanted
        ]
        stages.append((users, keep([*FM_VARIANTS, *HANDWRITTEN, *peers, *slow_main, *shapes])))
    if args.slow_size and args.slow_size not in sizes:
        small = ["fm-pandas-streaming", HANDWRITTEN[0], *FAST_PEERS, *SLOW_PEERS]
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
        if r.name == REFERENCE or r.name in SHAPES:
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


#: The shapes' limit: each at most this many times the k=10 rank-column time.
SHAPE_LIMIT = 2.0


def shape_ratios(results: list[Result]) -> dict[tuple[int, str], float]:
    """``(users, job) -> median / the shape reference's median`` per input row."""
    base = {r.users: r.median for r in results if r.name == SHAPE_BASE and r.times}
    return {
        (r.users, r.name): r.median / r.runner.rows_factor / base[r.users]
        for r in results
        if r.name in SHAPES and r.times and r.users in base
    }


def shapes_table(results: list[Result]) -> list[list[str]]:
    """Rows of the shapes table: every fm-shape-* job against the k=10 rank-column job."""
    ratios = shape_ratios(results)
    rows = [
        ["users", "job", "shape", "median s", "per k=10 rows s", "peak MiB", "data MiB", "ratio"]
    ]
    rows[0] += ["limit", "verdict"]
    for r in results:
        if r.name not in SHAPES:
            continue
        head = [f"{r.users:,}", r.name, r.runner.variant.removeprefix("shape: ")]
        if r.error:
            rows.append([*head, "FAILED", "", "", "", "", "", r.error[:100]])
            continue
        ratio = ratios.get((r.users, r.name), math.nan)
        per_row = r.median / r.runner.rows_factor
        is_base = r.name == SHAPE_BASE
        rows.append(
            [
                *head,
                _fmt_s(r.median),
                _fmt_s(per_row) if r.runner.rows_factor != 1 else "",
                f"{r.peak_mib:,.0f}",
                f"{r.base_mib:,.0f}",
                "-" if math.isnan(ratio) else f"{ratio:.2f}x",
                "" if is_base else f"<= {SHAPE_LIMIT:.1f}x",
                "" if is_base or math.isnan(ratio) else _verdict(ratio <= SHAPE_LIMIT),
            ]
        )
    return rows


def _verdict(ok: bool, applies: bool = True, where: str = "") -> str:
    if applies:
        return "PASS" if ok else "FAIL"
    return f"info ({'passes' if ok else 'fails'}; the target is {where})"


def targets_table(results: list[Result]) -> list[list[str]]:
    """The requirement's targets per size, each marked PASS or FAIL where it applies.

    Speed against the peers applies at >= 100k users (>= 6x) and >= 1M users (>= 10x);
    against the hand-written query and pandas vs polars input at >= 100k users; memory
    and the shapes at >= 1M users. Smaller sizes show the same numbers as ``info``.
    """
    by = {(r.users, r.name): r for r in results if r.times and not r.error}
    ratios = shape_ratios(results)
    rows = [["users", "target", "measured", "limit", "verdict"]]
    for users in dict.fromkeys(r.users for r in results):
        fm = by.get((users, BASELINE))
        if fm is None:
            continue
        n = f"{users:,}"
        big = users >= 1_000_000
        mid = users >= 100_000
        rows.append(
            [
                n,
                f"frame_metrics, polars eager ({BASELINE})",
                f"{_fmt_s(fm.median)} s, peak {fm.peak_mib:,.0f} MiB",
                "",
                "",
            ]
        )
        for name in HANDWRITTEN:
            hand = by.get((users, name))
            if hand is None:
                continue
            primary = name == HANDWRITTEN[0]
            ratio = fm.median / hand.median
            rows.append(
                [
                    n,
                    f"fm / {hand.runner.tool}, {hand.runner.variant}",
                    f"{_fmt_s(fm.median)} / {_fmt_s(hand.median)} s = {ratio:.2f}x",
                    "<= 1.00x" if primary else "",
                    _verdict(ratio <= 1.0, mid, "at >= 100,000 users") if primary else "info",
                ]
            )
        peers = [by[(users, p)] for p in TARGET_PEERS if (users, p) in by]
        if peers:
            fastest = min(peers, key=lambda r: r.median)
            need = 10.0 if big else 6.0
            ratio = fastest.median / fm.median
            rows.append(
                [
                    n,
                    "faster of pytrec_eval (cut to top k) and RecTools / fm",
                    f"{fastest.runner.tool} {_fmt_s(fastest.median)} / {_fmt_s(fm.median)} s = {ratio:.1f}x",
                    f">= {need:.0f}x",
                    _verdict(ratio >= need, mid, "at >= 100,000 users"),
                ]
            )
        pandas = by.get((users, "fm-pandas-streaming"))
        if pandas is not None:
            ratio = pandas.median / fm.median
            rows.append(
                [
                    n,
                    "fm pandas input / polars input (fm-pandas-streaming)",
                    f"{_fmt_s(pandas.median)} / {_fmt_s(fm.median)} s = {ratio:.2f}x",
                    "<= 1.10x",
                    _verdict(ratio <= 1.10, mid, "at >= 100,000 users"),
                ]
            )
        hand = by.get((users, HANDWRITTEN[0]))
        if hand is not None:
            rows.append(
                [
                    n,
                    f"peak RSS fm / {hand.runner.tool}, {hand.runner.variant}",
                    f"{fm.peak_mib:,.0f} / {hand.peak_mib:,.0f} MiB",
                    "fm <= hand-written",
                    _verdict(fm.peak_mib <= hand.peak_mib, big, "at >= 1,000,000 users"),
                ]
            )
        mine = {
            job: ratio for (u, job), ratio in ratios.items() if u == users and job != SHAPE_BASE
        }
        failed = [r.name for r in results if r.users == users and r.name in SHAPES and r.error]
        if mine or failed:
            worst = max(mine, key=lambda job: mine[job]) if mine else ""
            rows.append(
                [
                    n,
                    f"worst shape / {SHAPE_BASE}" + (f" ({len(failed)} FAILED)" if failed else ""),
                    f"{worst.removeprefix('fm-shape-')} {mine[worst]:.2f}x" if worst else "-",
                    f"<= {SHAPE_LIMIT:.1f}x",
                    _verdict(
                        not failed and bool(mine) and mine[worst] <= SHAPE_LIMIT,
                        big,
                        "at >= 1,000,000 users",
                    ),
                ]
            )
    return rows


def default_engine_note(results: list[Result]) -> str:
    """Which default engine the package reported, and whether the baseline used it."""
    seen = {r.info["default_engine"] for r in results if "default_engine" in r.info}
    if not seen:
        return "package default engine: unknown (no frame_metrics job ran)"
    note = f"package default engine: {', '.join(sorted(seen))}"
    if seen != {"streaming"}:
        note += (
            f"; WARNING: the baseline {BASELINE} sets 'streaming', "
            f"while the shapes use the package default"
        )
    return note


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
        "--users",
        default="100000",
        help="users at the main size(s), comma-separated, e.g. 100000,1000000 (x --recs rows)",
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
        "--no-shapes",
        action="store_true",
        help="skip the call-shape jobs (fm-shape-*: score=, k=100, several k, by, lazy)",
    )
    p.add_argument(
        "--full-run-max",
        type=int,
        default=100_000,
        help="run pytrec_eval on the full (uncut) run only up to this many users "
        "(~2 GB per 100k users), unless named in --only",
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
        (users,) = parse_sizes(args.users)
        info = save_arrays(users, args.seed, args.recs, args.data_dir)
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
    if any(r.name in SHAPES for r in results):
        print(
            f"\nShapes (polars eager start frames, package default engine, checks on; ratio = "
            f"median per k={K} input rows / {SHAPE_BASE} median at the same size; by-model "
            f"has {len(MODEL_SHIFTS)}x the rows: its ratio uses median / {len(MODEL_SHIFTS)})"
        )
        print(render(shapes_table(results), args.markdown))
    print(f"\nTargets ({default_engine_note(results)})")
    print(render(targets_table(results), args.markdown))
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
