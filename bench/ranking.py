"""End-to-end benchmark of ranking metrics at k=10: frame_metrics against its peers.

Run ``python bench/ranking.py --users 100000`` (see ``--help`` and ``bench/README.md``).

Every job (a tool and a variant) runs on the harness (``harness.py``): fresh processes
that load the same generated data (``generate.py``, cached as parquet in ``--data-dir``)
into the job's start frames *untimed*, as the readers return them: ``pl.read_parquet``
(polars eager frames), ``pd.read_parquet`` with numpy dtypes (the pandas-based tools)
or with ``dtype_backend="pyarrow"``, or ``pl.scan_parquet`` (LazyFrames of the files:
there the timed call includes the read). Then each times the first call: converting
into the tool's own format, computing precision, recall, AP, NDCG and MRR at k=10, and
reducing them to one mean per metric.

The means of every tool are compared with frame_metrics under the matching convention
(AP denominator, binary or graded gain, cutoff); the exit code is 1 on a mismatch.
Besides the peers, every size times the obvious hand-written polars query
(``polars-handwritten*``) on each reader's frames, and frame_metrics' other call shapes
(``fm-shape-*``: ``score=``, k=100, several k, ``by=``, lazy results) each beside the
hand-written query of the same shape. It ends with a table of the speed, memory and
shape targets, each marked PASS or FAIL."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/ranking.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import peers  # noqa: E402
from harness import Check, Job, Prepared, Result, Stage, Values, fmt_s, verdict  # noqa: E402

K = 10
METRICS = peers.RANKING
#: Absolute difference under which two mean values count as equal.
TOLERANCE = 1e-9
MULTI_K = [1, 5, 10, 20, 50, 100]
#: The stacked models of the by-model shape and the rank shift of each (0: as generated).
MODEL_SHIFTS = {"a": 0, "b": 3, "c": 7}
#: The shapes' limit: each at most this many times the k=10 rank-column time, per row.
SHAPE_LIMIT = 2.0
#: Propensity-scored precision, recall and NDCG@10, against the same call unweighted.
PRN = ["precision", "recall", "ndcg"]
PROPENSITY_LIMIT = 1.3
#: The score path against the rank path (k=10, per input row), and the checks' share of
#: the call: checks on at most 1 / (1 - 0.2) times validate=False.
SCORE_LIMIT = 2.5
CHECKS_LIMIT = 1.25


# --------------------------------------------------------------------------------------
# Data and start frames
# --------------------------------------------------------------------------------------


@dataclass
class Inputs:
    """The start frames of a job, of one of :data:`KINDS`: polars eager frames or
    LazyFrames of the parquet files, or pandas frames (numpy or pyarrow dtypes)."""

    kind: str
    recs: Any
    truth: Any
    n_recs: int


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """Generate the data of ``params`` (users, recs, seed) as parquet in ``data_dir``."""
    from generate import make_data, write_parquet

    recs, truth = make_data(params["users"], params["recs"], params["seed"])
    write_parquet(recs, truth, data_dir)
    return {"rec_rows": recs.height, "truth_rows": truth.height}


def shift_ranks(recs: Any, n_recs: int, shift: int) -> Any:
    """``recs`` with the ranks permuted within each user: ``((rank - 1 + shift) % n_recs) + 1``.

    Every other column is kept (so the scores no longer follow the ranks: only the rank
    column is used).
    """
    import polars as pl

    rank = pl.col("rank")
    return recs.with_columns(((rank - 1 + shift) % n_recs + 1).cast(recs.schema["rank"]))


def stack_models(recs: Any, n_recs: int) -> Any:
    """``recs`` once per model of :data:`MODEL_SHIFTS`, with a String ``model`` column.

    Model ``a`` is ``recs`` as is; the others are :func:`shift_ranks` by their shift.
    """
    import polars as pl

    frames = [
        shift_ranks(recs, n_recs, shift).with_columns(pl.lit(model).alias("model"))
        for model, shift in MODEL_SHIFTS.items()
    ]
    return pl.concat(frames)


#: Start-frame kinds. As the readers return them: ``pl.read_parquet`` (polars eager),
#: ``pd.read_parquet`` with numpy dtypes (pandas) and with ``dtype_backend="pyarrow"``
#: (pandas-pyarrow), ``pl.scan_parquet`` (polars-scan: LazyFrames of the files, so the
#: timed call includes the read). And the polars eager frames of the shapes: without the
#: rank column (``score=``), three stacked models (``by="model"``), truth with propensities.
KINDS = (
    "polars",
    "pandas",
    "pandas-pyarrow",
    "polars-scan",
    "polars-no-rank",
    "polars-3-models",
    "polars-propensity",
    "polars-contiguous",
)


def load(data_dir: Path, kind: str, params: harness.Params) -> Inputs:
    """The start frames of ``kind`` (one of :data:`KINDS`), read as users read them."""
    recs_path, truth_path = data_dir / "recs.parquet", data_dir / "truth.parquet"
    n_recs = int(params["recs"])
    if kind in ("pandas", "pandas-pyarrow"):
        import pandas as pd

        # The default (numpy dtypes), or Arrow-backed columns as pandas 2+ can return them.
        opts: dict[str, Any] = {"dtype_backend": "pyarrow"} if kind == "pandas-pyarrow" else {}
        recs_pd, truth_pd = pd.read_parquet(recs_path, **opts), pd.read_parquet(truth_path, **opts)
        return Inputs(kind, recs_pd, truth_pd, n_recs)
    import polars as pl

    if kind == "polars-scan":
        # Nothing is read yet: the query plan of each file, read by the timed call.
        return Inputs(kind, pl.scan_parquet(recs_path), pl.scan_parquet(truth_path), n_recs)
    truth = pl.read_parquet(truth_path)
    if kind in ("polars", "polars-contiguous"):
        recs = pl.read_parquet(recs_path)
        if kind == "polars-contiguous":
            # The same frames in one chunk each (read_parquet gives one per row group).
            recs, truth = recs.rechunk(), truth.rechunk()
        return Inputs(kind, recs, truth, n_recs)
    if kind == "polars-no-rank":
        return Inputs(
            kind, pl.read_parquet(recs_path, columns=["user", "item", "score"]), truth, n_recs
        )
    if kind == "polars-3-models":
        return Inputs(kind, stack_models(pl.read_parquet(recs_path), n_recs), truth, n_recs)
    if kind == "polars-propensity":
        # Truth with a propensity column p (untimed, as a user's logs would carry it).
        from generate import with_propensity

        recs = pl.read_parquet(recs_path)
        return Inputs(kind, recs, with_propensity(recs, truth, K), n_recs)
    raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")


# --------------------------------------------------------------------------------------
# The frame_metrics jobs and the reference values
# --------------------------------------------------------------------------------------


def by_model_values(out: Any) -> Values:
    """The values of a ``by="model"`` result: model ``a`` (the data as generated) named
    like the reference values, the others with a ``"model:"`` prefix."""
    values: Values = {}
    for row in out.iter_rows(named=True):
        group = str(row.pop("model"))
        prefix = "" if group == "a" else f"{group}:"
        values.update({prefix + n.removesuffix(f"@{K}"): float(v) for n, v in row.items()})
    return values


def fm(
    *, engine: peers.Engine | None = None, collect: peers.Engine | None = None, **call: Any
) -> Callable[[Inputs], Prepared]:
    """A prepare function: ``fm.evaluate`` on the start frames (see :func:`peers.prepare_fm`)."""
    read = by_model_values if call.get("by") else lambda out: peers.fm_floats(out, K)
    opts = {"metrics": METRICS, "k": K, **call}

    def prepare(i: Inputs) -> Prepared:
        return peers.prepare_fm(
            (i.recs, i.truth), engine=engine, collect=collect, read=read, **opts
        )

    return prepare


def prepare_reference(inputs: Inputs) -> Prepared:
    """Untimed: the frame_metrics means under every convention the peers are compared with."""
    import polars as pl

    import frame_metrics as fm

    recs, truth = inputs.recs, inputs.truth

    def mean(metric: str, k: int = K, t: pl.DataFrame = truth, **opts: Any) -> float:
        out = fm.evaluate(recs, t, metrics=[metric], k=k, aggregate=True, **opts)
        return peers.fm_floats(out)[f"{metric}@{k}"]

    def extras() -> Values:
        binary = truth.with_columns(pl.lit(1, dtype=pl.Int32).alias("relevance"))
        # RecTools' default NDCG divides the binary DCG by the IDCG of k relevant items:
        # rescale per user by IDCG(min(|R|, k)) / IDCG(k).
        per_user = fm.evaluate(recs, binary, metrics=["ndcg"], k=K, aggregate=False)
        counts = truth.group_by("user").agg(pl.len().alias("n_relevant"))
        joined = per_user.join(counts, on="user")
        idcg = np.concatenate(([0.0], np.cumsum(1.0 / np.log2(np.arange(2, K + 2)))))
        n = np.minimum(joined["n_relevant"].to_numpy(), K)
        scaled = joined[f"ndcg@{K}"].to_numpy() * idcg[n] / idcg[K]
        out = fm.evaluate(recs, truth, metrics=METRICS, k=K, aggregate=True)
        # Every metric at every cutoff of the k=100 and several-k shapes (@10 as above),
        # and at k=10 for each shifted model of the by-model shape, one model at a time.
        multi = fm.evaluate(recs, truth, metrics=METRICS, k=MULTI_K, aggregate=True)
        models: Values = {}
        for model, shift in MODEL_SHIFTS.items():
            if shift:
                shifted = shift_ranks(recs, inputs.n_recs, shift)
                got = fm.evaluate(shifted, truth, metrics=METRICS, k=K, aggregate=True)
                models |= {f"{model}:{n}": v for n, v in peers.fm_floats(got, K).items()}
        return {
            **peers.fm_floats(multi, K),
            **peers.fm_floats(out, K),
            **models,
            "ap_relevant": mean("ap", ap_denominator="relevant"),
            "ndcg_binary": mean("ndcg", t=binary),
            "ndcg_binary_idcg_k": float(scaled.mean()),
            "mrr_full": mean("mrr", k=inputs.n_recs),
        }

    return Prepared(None, extras)


# --------------------------------------------------------------------------------------
# The jobs
# --------------------------------------------------------------------------------------

#: The models of the by-model shape other than ``a`` (the data as generated).
SHIFTED = [model for model, shift in MODEL_SHIFTS.items() if shift]
#: The reference's values at the cutoffs other than k: ``precision@100``, ...
AT_K = [f"{m}@{k}" for k in MULTI_K if k != K for m in METRICS]
#: Names of the frame_metrics reference values, as shown in the agreement table.
REF_NAMES = {
    **{m: f"{m}@{K}" for m in METRICS},
    **{name: name for name in AT_K},
    **{f"{model}:{m}": f"model {model}: {m}@{K}" for model in SHIFTED for m in METRICS},
    **{f"{model}:n_users": "n_users" for model in SHIFTED},
    "n_users": "n_users",
    "ap": f"ap@{K} (min_k)",
    "ap_relevant": f"ap@{K} (relevant)",
    "ndcg_binary": f"ndcg@{K} (binary gain)",
    "ndcg_binary_idcg_k": f"ndcg@{K} binary x IDCG(min(|R|,k))/IDCG(k)",
    "mrr_full": "mrr@n_recs (whole list)",
}
#: Which column of the largest-difference table a reference value belongs to.
METRIC_OF = {"precision": "P", "recall": "R", "ap": "AP", "ap_relevant": "AP", "ndcg": "NDCG"}
METRIC_OF |= {"ndcg_binary": "NDCG", "mrr": "MRR", "mrr_full": "MRR"}
METRIC_OF |= {name: METRIC_OF[name.split("@")[0]] for name in AT_K}
METRIC_OF |= {f"{model}:{m}": METRIC_OF[m] for model in SHIFTED for m in METRICS}


def differs(label: str, ref: str, note: str) -> Check:
    """A check whose conventions differ: the row documents the difference, ``note`` why."""
    return Check(label, ref, note, matched=False)


SAME = tuple(Check(m, m) for m in METRICS)
PYTREC = (
    Check(f"P_{K}", "precision"),
    Check(f"recall_{K}", "recall"),
    Check(f"map_cut_{K}", "ap_relevant", "map_cut divides by |R|: ap_denominator='relevant'"),
    differs(f"map_cut_{K}", "ap", "fm's default AP divides by min(|R|, k)"),
    Check(f"ndcg_cut_{K}", "ndcg", "linear gain, IDCG over all judged items"),
)
RECTOOLS = (
    Check("Precision", "precision"),
    Check("Recall", "recall"),
    Check("MAP", "ap_relevant", "MAP divides by |R|: ap_denominator='relevant'"),
    Check("NDCG(divide_by_achievable=True)", "ndcg_binary", "RecTools NDCG has binary gain only"),
    differs("NDCG(divide_by_achievable=True)", "ndcg", "graded relevance is ignored (binary gain)"),
    Check("MRR", "mrr"),
    differs("NDCG (default)", "ndcg_binary", "default IDCG = k relevant items, not min(|R|, k)"),
    Check("NDCG (default)", "ndcg_binary_idcg_k", "default = binary DCG / IDCG of k items"),
    differs("MAP(divide_by_k=True)", "ap", "divide_by_k divides by k, not min(|R|, k)"),
)
RANX = (
    *(Check(f"{m}@{K}", m) for m in ("precision", "recall", "mrr")),
    Check(f"map@{K}", "ap_relevant", "map@k divides by |R|: ap_denominator='relevant'"),
    Check(f"ndcg@{K}", "ndcg", "linear (Jarvelin) gain"),
)
RECOMMENDERS = (
    Check("precision_at_k", "precision"),
    Check("recall_at_k", "recall"),
    Check("map_at_k", "ap", "map_at_k divides by min(|R|, k): the default ap"),
    Check("ndcg_at_k(score_type='raw')", "ndcg", "score_type='raw' = linear gain"),
    Check("ndcg_at_k (default)", "ndcg_binary", "default score_type='binary'"),
    Check("map", "ap_relevant", "map (no _at_k) divides by |R|"),
)
BY_MODEL = (
    *(Check(m, m, "model a = the data as generated") for m in METRICS),
    *(Check(f"{m}:n_users", f"{m}:n_users", f"model {m}: the same users") for m in SHIFTED),
    *(
        Check(
            f"{model}:{m}",
            f"{model}:{m}",
            f"model {model}: ranks shifted by {MODEL_SHIFTS[model]}, evaluated alone",
        )
        for model in SHIFTED
        for m in METRICS
    ),
)
K100 = tuple(Check(f"{m}@100", f"{m}@100") for m in METRICS)
TREC_EVAL = (
    Check("precision", "precision"),
    Check("recall", "recall"),
    Check("ap", "ap_relevant", "trec_eval's AP divides by |R|"),
    Check("ndcg", "ndcg"),
    Check("mrr", "mrr_full", "trec_eval's recip_rank reads the whole list"),
)
MULTIK = (*SAME, *(Check(name, name) for name in AT_K))
SCORED = tuple(Check(m, m, "the scores descend with the ranks") for m in METRICS)
FM, HAND, SHAPE_BASE = "frame_metrics", "polars (hand-written)", "fm-shape-k10"
FAST, SLOW, SHAPE = frozenset({"fast-peer"}), frozenset({"slow-peer"}), frozenset({"shape"})
#: The hand-written queries of the shapes (run with the shapes) and of the readers.
HAND_SHAPE, HAND_READER = frozenset({"hand-shape"}), frozenset({"hand-reader"})
#: The hand-written DuckDB queries of the shapes (run with the shapes).
DUCK_SHAPE = frozenset({"duckdb-shape"})


def fm_job(name: str, label: str, kind: str = "polars", **call: Any) -> Job:
    """A frame_metrics variant: ``call`` are :func:`fm`'s options."""
    return Job(name, FM, label, fm(**call), kind, checks=SAME)


def shape(
    name: str, label: str, kind: str = "polars", checks: tuple[Check, ...] = SAME, **call: Any
) -> Job:
    """A call shape: the package's default engine, its ratio against :data:`SHAPE_BASE`."""
    _, rows = shape_reading(call)
    prepare = fm(**call)
    return Job(
        name, FM, f"shape: {label}", prepare, kind, SHAPE_BASE, checks=checks, rows=rows, tags=SHAPE
    )


def strip_k(out: Any) -> Values:
    """The one row of a hand-written result, ``metric@k`` named ``metric`` for k=10 (as
    frame_metrics' values and the reference's are named)."""
    return {n.removesuffix(f"@{K}"): v for n, v in peers.first_row(out).items()}


def shape_reading(query: dict[str, Any]) -> tuple[Callable[[Any], Values], int]:
    """How a hand-written query's result of a shape is read (by model or one row), and
    the shape's rows per k=10 input row (its ratio divides by them)."""
    if query.get("by"):
        return by_model_values, len(MODEL_SHIFTS)
    return strip_k, 1


def hand(
    name: str,
    label: str,
    kind: str = "polars",
    checks: tuple[Check, ...] = SAME,
    *,
    k: int | Sequence[int] = K,
    collect: peers.Engine | None = None,
    tags: frozenset[str] = frozenset(),
    **query: Any,
) -> Job:
    """A hand-written polars query (:func:`peers.prepare_handwritten`): ``query`` are its
    ``by`` and ``score``; a shape's ratio is taken against the k=10 query's, per input row."""
    read, rows = shape_reading(query)
    vs = "polars-handwritten" if tags == HAND_SHAPE else ""

    def prepare(i: Inputs) -> Prepared:
        return peers.prepare_handwritten(i.recs, i.truth, k, collect, read=read, **query)

    return Job(name, HAND, label, prepare, kind, vs, checks=checks, rows=rows, tags=tags)


def duck(
    name: str,
    label: str,
    kind: str = "polars",
    checks: tuple[Check, ...] = SAME,
    *,
    k: int | Sequence[int] = K,
    **query: Any,
) -> Job:
    """The hand-written DuckDB SQL of a shape (:func:`peers.prepare_duckdb`) on the
    shape's polars frames; ``query`` are its ``by`` and ``score``."""
    read, rows = shape_reading(query)

    def prepare(i: Inputs) -> Prepared:
        return peers.prepare_duckdb(i.recs, i.truth, k, read=read, **query)

    return Job(
        name,
        "DuckDB",
        label,
        prepare,
        kind,
        "duckdb-handwritten",
        checks=checks,
        rows=rows,
        tags=DUCK_SHAPE,
    )


def peer(
    name: str,
    tool: str,
    label: str,
    prepare: Callable[[Inputs], Prepared],
    checks: tuple[Check, ...],
    tags: frozenset[str],
) -> Job:
    """A peer's job: pandas start frames (the peers are pandas-based)."""
    return Job(name, tool, label, prepare, "pandas", checks=checks, tags=tags)


JOBS = harness.job_table(
    Job("fm-reference", FM, "reference values (untimed)", prepare_reference, "polars", timed=False),
    fm_job("fm-polars-in-memory", "polars eager, in-memory", engine="in-memory"),
    fm_job("fm-polars-streaming", "polars eager, streaming", engine="streaming"),
    fm_job(
        "fm-polars-contiguous",
        "polars eager, streaming, frames in one chunk each",
        "polars-contiguous",
        engine="streaming",
    ),
    fm_job(
        "fm-polars-no-validate",
        "polars eager, streaming, validate=False",
        engine="streaming",
        validate=False,
    ),
    fm_job(
        "fm-lazy-in-memory", "polars LazyFrame, in-memory", engine="in-memory", collect="in-memory"
    ),
    fm_job(
        "fm-lazy-streaming", "polars LazyFrame, streaming", engine="streaming", collect="streaming"
    ),
    fm_job("fm-pandas-in-memory", "pandas, in-memory", "pandas", engine="in-memory"),
    fm_job("fm-pandas-streaming", "pandas, streaming", "pandas", engine="streaming"),
    # The readers' other layouts: pandas with Arrow dtypes, and the files' LazyFrames
    # (pl.scan_parquet), whose read is part of the call.
    fm_job(
        "fm-pandas-pyarrow",
        "pandas (dtype_backend='pyarrow'), streaming",
        "pandas-pyarrow",
        engine="streaming",
    ),
    fm_job(
        "fm-scan-in-memory",
        "pl.scan_parquet, in-memory: the call includes the read",
        "polars-scan",
        engine="in-memory",
        collect="in-memory",
    ),
    fm_job(
        "fm-scan-streaming",
        "pl.scan_parquet, streaming: the call includes the read",
        "polars-scan",
        engine="streaming",
        collect="streaming",
    ),
    # collect() is polars' engine "auto", which runs the streaming engine in polars 2.x;
    # the in-memory LazyFrame shapes are paired with the query on the in-memory engine.
    hand("polars-handwritten", "LazyFrame query, collect() (polars' default engine)"),
    Job(
        "duckdb-handwritten",
        "DuckDB",
        "hand-written SQL (join, two windows, group-bys) over the polars frames",
        lambda i: peers.prepare_duckdb(i.recs, i.truth, K),
        "polars",
        checks=SAME,
        tags=FAST,
    ),
    hand(
        "polars-handwritten-streaming",
        "LazyFrame query, collect(engine='streaming')",
        collect="streaming",
    ),
    hand(
        "polars-handwritten-in-memory",
        "LazyFrame query, collect(engine='in-memory')",
        collect="in-memory",
    ),
    hand(
        "polars-handwritten-pandas",
        "pl.from_pandas + the query, collect()",
        "pandas",
        tags=HAND_READER,
    ),
    hand(
        "polars-handwritten-pandas-pyarrow",
        "pl.from_pandas (pyarrow dtypes) + the query, collect()",
        "pandas-pyarrow",
        tags=HAND_READER,
    ),
    hand(
        "polars-handwritten-scan",
        "the query on pl.scan_parquet, collect(): includes the read",
        "polars-scan",
        tags=HAND_READER,
    ),
    hand(
        "polars-handwritten-scan-in-memory",
        "the query on pl.scan_parquet, collect(engine='in-memory'): includes the read",
        "polars-scan",
        collect="in-memory",
        tags=HAND_READER,
    ),
    hand(
        "polars-handwritten-scan-streaming",
        "the query on pl.scan_parquet, collect(engine='streaming'): includes the read",
        "polars-scan",
        collect="streaming",
        tags=HAND_READER,
    ),
    peer(
        "pytrec_eval-full",
        "pytrec_eval",
        "dicts, full run (all ranks)",
        lambda i: peers.prepare_pytrec_eval(i.recs, i.truth, K, None),
        (
            *PYTREC,
            differs(
                "recip_rank", "mrr", "recip_rank has no cutoff: a first hit below rank k counts"
            ),
            Check("recip_rank", "mrr_full", "recip_rank = MRR over the whole list"),
        ),
        FAST,
    ),
    peer(
        "pytrec_eval-cut",
        "pytrec_eval",
        f"dicts, run cut to rank <= {K}",
        lambda i: peers.prepare_pytrec_eval(i.recs, i.truth, K, K),
        (*PYTREC, Check("recip_rank", "mrr", "the cut run makes recip_rank = mrr@k")),
        FAST,
    ),
    peer(
        "rectools",
        "RecTools",
        "calc_metrics, pandas",
        lambda i: peers.prepare_rectools_ranking(i.recs, i.truth, K),
        RECTOOLS,
        FAST,
    ),
    peer(
        "ranx",
        "ranx",
        "Qrels/Run from dicts",
        lambda i: peers.prepare_ranx(i.recs, i.truth, K),
        RANX,
        SLOW,
    ),
    peer(
        "recommenders",
        "Recommenders",
        "python_evaluation, pandas",
        lambda i: peers.prepare_recommenders(i.recs, i.truth, K),
        RECOMMENDERS,
        SLOW,
    ),
    # The call shapes: polars eager start frames, the package's default engine, checks on.
    shape(SHAPE_BASE, f"rank column, k={K} (shape reference)"),
    shape(
        "fm-shape-score",
        "score= (score descending, ties by item), no rank column",
        "polars-no-rank",
        SCORED,
        score="score",
    ),
    shape("fm-shape-k100", "k=100", checks=K100, k=100),
    shape("fm-shape-multik", f"k={MULTI_K} in one call", checks=MULTIK, k=MULTI_K),
    shape(
        "fm-shape-by-model",
        f"by='model', {len(MODEL_SHIFTS)} stacked models",
        "polars-3-models",
        BY_MODEL,
        by="model",
    ),
    shape(
        "fm-shape-lazy-in-memory",
        "LazyFrame result, collect(engine='in-memory')",
        collect="in-memory",
    ),
    shape(
        "fm-shape-lazy-streaming",
        "LazyFrame result, collect(engine='streaming')",
        collect="streaming",
    ),
    # The hand-written query of each shape (the LazyFrame shapes' are polars-handwritten
    # and polars-handwritten-streaming: that query is a LazyFrame collected on an engine).
    hand("polars-handwritten-k100", "shape: k=100", checks=K100, k=[100], tags=HAND_SHAPE),
    hand(
        "polars-handwritten-multik",
        f"shape: k={MULTI_K} in one query (cutoffs as filters in the aggregations)",
        checks=MULTIK,
        k=MULTI_K,
        tags=HAND_SHAPE,
    ),
    hand(
        "polars-handwritten-score",
        "shape: top k by score (top_k_by, ties by item), no rank column",
        "polars-no-rank",
        SCORED,
        score="score",
        tags=HAND_SHAPE,
    ),
    hand(
        "polars-handwritten-by-model",
        f"shape: group-bys by model and user, {len(MODEL_SHIFTS)} stacked models",
        "polars-3-models",
        BY_MODEL,
        by=["model"],
        tags=HAND_SHAPE,
    ),
    # The SQL an analyst would write in DuckDB for each shape (issue 35's bar: the k=10
    # query is duckdb-handwritten above, with the fast peers).
    duck(
        "duckdb-score",
        "shape: row_number() over (partition by user order by score desc, item)",
        "polars-no-rank",
        SCORED,
        score="score",
    ),
    duck("duckdb-k100", "shape: k=100", checks=K100, k=100),
    duck(
        "duckdb-multik",
        f"shape: k={MULTI_K}, one FILTER aggregate per cutoff",
        checks=MULTIK,
        k=MULTI_K,
    ),
    duck(
        "duckdb-by-model",
        f"shape: partitions by model and user, {len(MODEL_SHIFTS)} models",
        "polars-3-models",
        BY_MODEL,
        by=["model"],
    ),
    # Propensity-scored P/R/NDCG@10 (spec 9.4) beside the same call unweighted, on the
    # same frames (truth with a propensity column p).
    Job(
        "fm-prn-unweighted",
        FM,
        f"P/R/NDCG@{K}, unweighted (truth with a p column)",
        fm(metrics=PRN),
        "polars-propensity",
        checks=tuple(Check(m, m) for m in PRN),
    ),
    Job(
        "fm-prn-propensity",
        FM,
        f"P/R/NDCG@{K}, propensity='p' (snips)",
        fm(metrics=PRN, propensity="p"),
        "polars-propensity",
        "fm-prn-unweighted",
    ),
    # The score shape's options whose cost the targets bound: trec_eval's conventions
    # (whole lists ranked, its tie rule, AP over |R|, MRR over the whole list) beside the
    # plain score call, and ties="average" (defined for P/R/NDCG) beside the same metrics
    # under the default tie rule. The generated scores have no ties, so the values agree.
    Job(
        "fm-score-trec-eval",
        FM,
        "score=, convention='trec_eval'",
        fm(score="score", convention="trec_eval"),
        "polars-no-rank",
        "fm-shape-score",
        checks=TREC_EVAL,
    ),
    Job(
        "fm-score-prn",
        FM,
        f"score=, P/R/NDCG@{K} (ties='item', the default)",
        fm(score="score", metrics=PRN),
        "polars-no-rank",
        checks=tuple(Check(m, m) for m in PRN),
    ),
    Job(
        "fm-score-average",
        FM,
        f"score=, P/R/NDCG@{K}, ties='average'",
        fm(score="score", metrics=PRN, ties="average"),
        "polars-no-rank",
        "fm-score-prn",
        checks=tuple(Check(m, m, "no tied scores: as ties='item'") for m in PRN),
    ),
)
BASELINE = "fm-polars-streaming"  # the package default engine
REFERENCE = "fm-reference"
SHAPES = [name for name, job in JOBS.items() if "shape" in job.tags]
FAST_PEERS = [name for name, job in JOBS.items() if job.tags == FAST]
SLOW_PEERS = [name for name, job in JOBS.items() if job.tags == SLOW]
HAND_SHAPES = [name for name, job in JOBS.items() if job.tags in (HAND_SHAPE, DUCK_SHAPE)]
HANDWRITTEN = [name for name, job in JOBS.items() if job.tool == HAND and name not in HAND_SHAPES]
#: Each frame_metrics shape and the DuckDB SQL of the same shape (issue 35).
SAME_DUCKDB = {
    SHAPE_BASE: "duckdb-handwritten",
    "fm-shape-score": "duckdb-score",
    "fm-shape-k100": "duckdb-k100",
    "fm-shape-multik": "duckdb-multik",
    "fm-shape-by-model": "duckdb-by-model",
}
#: Each frame_metrics shape and the hand-written query of the same shape.
SAME_SHAPE = {
    SHAPE_BASE: "polars-handwritten",
    "fm-shape-k100": "polars-handwritten-k100",
    "fm-shape-multik": "polars-handwritten-multik",
    "fm-shape-score": "polars-handwritten-score",
    "fm-shape-by-model": "polars-handwritten-by-model",
    "fm-shape-lazy-in-memory": "polars-handwritten-in-memory",
    "fm-shape-lazy-streaming": "polars-handwritten-streaming",
}
#: Each reader's frame_metrics job and the hand-written query on the same start frames.
SAME_READER = {
    "fm-pandas-streaming": "polars-handwritten-pandas",
    "fm-pandas-pyarrow": "polars-handwritten-pandas-pyarrow",
    "fm-scan-in-memory": "polars-handwritten-scan-in-memory",
    "fm-scan-streaming": "polars-handwritten-scan-streaming",
}
FM_VARIANTS = [n for n, j in JOBS.items() if j.tool == FM and j.timed and n not in SHAPES]
#: The requirement's targets: speed against the peers at >= 100k users (>= 6x) and >= 1M
#: users (>= 10x); against the hand-written query and pandas vs polars input at >= 100k
#: users; memory and the shapes at >= 1M users. Smaller sizes show them as ``info``.
MID, BIG = 100_000, 1_000_000
PEERS = ("pytrec_eval-cut", "rectools")
TARGETS = [
    harness.Target(
        "fm / hand-written query, collect()", (BASELINE,), HANDWRITTEN[0], 1.0, applies=MID
    ),
    harness.Target("fm / hand-written query, streaming", (BASELINE,), HANDWRITTEN[1]),
    harness.Target(
        "faster of pytrec_eval (cut to top k) and RecTools / fm",
        PEERS,
        BASELINE,
        6.0,
        False,
        MID,
        (0, BIG),
    ),
    harness.Target(
        "faster of pytrec_eval (cut to top k) and RecTools / fm",
        PEERS,
        BASELINE,
        10.0,
        False,
        BIG,
        (BIG, sys.maxsize),
    ),
    harness.Target(
        "fm pandas input / polars input", ("fm-pandas-streaming",), BASELINE, 1.10, applies=MID
    ),
    harness.Target(
        "peak RSS fm / hand-written query",
        (BASELINE,),
        HANDWRITTEN[0],
        1.0,
        applies=BIG,
        memory=True,
    ),
    harness.Target(
        f"worst shape / {SHAPE_BASE}",
        tuple(s for s in SHAPES if s != SHAPE_BASE),
        SHAPE_BASE,
        SHAPE_LIMIT,
        applies=BIG,
        worst=True,
    ),
    harness.Target(
        f"propensity P/R/NDCG@{K} / unweighted",
        ("fm-prn-propensity",),
        "fm-prn-unweighted",
        PROPENSITY_LIMIT,
        applies=BIG,
    ),
]


def same_query_targets(pairs: dict[str, str], prefix: str, same: str) -> list[harness.Target]:
    """Per pair of :data:`SAME_SHAPE` or :data:`SAME_READER`: the frame_metrics job no
    slower than the hand-written query (from 100k users) and with no more peak memory
    (from 1M users, where the memory is the data's and not the interpreter's)."""
    targets = []
    for fm_name, hand_name in pairs.items():
        if fm_name == SHAPE_BASE:  # k=10: the baseline's own targets above
            continue
        name = f"fm {fm_name.removeprefix(prefix)} / hand-written query, {same}"
        targets += [
            harness.Target(name, (fm_name,), hand_name, 1.0, applies=MID),
            harness.Target(
                f"peak RSS {name}", (fm_name,), hand_name, 1.0, applies=BIG, memory=True
            ),
        ]
    return targets


TARGETS += [
    harness.Target(
        "fm pandas (pyarrow dtypes) input / polars input",
        ("fm-pandas-pyarrow",),
        BASELINE,
        1.10,
        applies=MID,
    ),
    harness.Target(
        "convention='trec_eval' / the same score call",
        ("fm-score-trec-eval",),
        "fm-shape-score",
        3.0,
        applies=BIG,
    ),
    harness.Target(
        "ties='average' / the score call (P/R/NDCG)",
        ("fm-score-average",),
        "fm-score-prn",
        3.0,
        applies=BIG,
    ),
    harness.Target(
        "peak RSS ties='average' / the score call (P/R/NDCG)",
        ("fm-score-average",),
        "fm-score-prn",
        1.5,
        applies=BIG,
        memory=True,
    ),
    *same_query_targets(SAME_SHAPE, "fm-shape-", "same shape"),
    # Issue 35: the package, checks on, against the SQL an analyst would write.
    harness.Target("fm / DuckDB SQL, k=10", (BASELINE,), "duckdb-handwritten", 1.0, applies=MID),
    harness.Target(
        "peak RSS fm / DuckDB SQL, k=10",
        (BASELINE,),
        "duckdb-handwritten",
        1.0,
        applies=MID,
        memory=True,
    ),
    harness.Target(
        "fm as read (a chunk per row group) / frames in one chunk",
        (BASELINE,),
        "fm-polars-contiguous",
        1.10,
        applies=MID,
    ),
    harness.Target(
        "spread of fm's first calls / DuckDB's ((slowest - fastest) / median)",
        (BASELINE,),
        "duckdb-handwritten",
        1.0,
        applies=MID,
        spread=True,
    ),
    harness.Target(
        "fm checks on / validate=False (checks <= 20% of the call)",
        (BASELINE,),
        "fm-polars-no-validate",
        CHECKS_LIMIT,
        applies=MID,
    ),
    *(
        harness.Target(
            f"fm {fm_name.removeprefix('fm-shape-')} / DuckDB SQL, same shape",
            (fm_name,),
            duck_name,
            1.0 if fm_name == "fm-shape-score" else 0.0,
            applies=MID,
        )
        for fm_name, duck_name in SAME_DUCKDB.items()
        if fm_name != SHAPE_BASE
    ),
    harness.Target(
        f"score path / rank path, k={K}", ("fm-shape-score",), SHAPE_BASE, SCORE_LIMIT, applies=BIG
    ),
    *same_query_targets(SAME_READER, "fm-", "same start frames"),
]
SUITE = harness.Suite(
    "Ranking-metric benchmark: frame_metrics vs peers, k=10.",
    Path(__file__).resolve(),
    JOBS,
    BASELINE,
    load,
    make_data,
    (
        "frame_metrics",
        "polars",
        "pandas",
        "numpy",
        "pytrec-eval-terrier",
        "rectools",
        "ranx",
        "recommenders",
    ),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """Which jobs run at which size.

    Every size of ``--users`` runs every frame_metrics variant (the readers' layouts
    among them), the hand-written polars query on each reader's frames, the fast peers
    (plus ranx and Recommenders with ``--slow-peers``) and the call shapes with the
    hand-written query of each (unless ``--no-shapes``); pytrec_eval on the full run only up to
    ``--full-run-max`` users (it needs ~2 GB per 100k users). ``--slow-size`` runs every
    peer on a smaller data set. ``--only`` narrows all of it (naming a slow peer runs it
    at the main sizes too, naming pytrec_eval-full runs it at every size). The untimed
    reference and the baseline always run, and the shape reference whenever a shape does.
    """
    wanted = harness.wanted_jobs(SUITE, args.only)

    def keep(names: list[str]) -> list[str]:
        names = [n for n in names if wanted is None or n in wanted]
        if any(n in SHAPES for n in names):
            names.insert(0, SHAPE_BASE)
        return list(dict.fromkeys([REFERENCE, BASELINE, *names]))

    def stage(users: int, names: list[str]) -> Stage:
        params = {"users": users, "recs": args.recs, "seed": args.seed}
        return Stage(users, Path(f"u{users}-r{args.recs}-s{args.seed}"), params, keep(names))

    slow_main = SLOW_PEERS if args.slow_peers or wanted else []
    shapes = [] if args.no_shapes else [*SHAPES, *HAND_SHAPES]
    sizes = harness.parse_sizes(args.users)
    stages = []
    for users in sizes:
        fast = [
            n for n in FAST_PEERS if n != "pytrec_eval-full" or users <= args.full_run_max or wanted
        ]
        stages.append(stage(users, [*FM_VARIANTS, *HANDWRITTEN, *fast, *slow_main, *shapes]))
    if args.slow_size and args.slow_size not in sizes:
        stages.append(
            stage(args.slow_size, ["fm-pandas-streaming", HANDWRITTEN[0], *FAST_PEERS, *SLOW_PEERS])
        )
    return stages


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def _label(r: Result) -> str:
    job = JOBS[r.job]
    return f"{job.tool} / {job.label}"


def _checked(results: Sequence[Result]) -> list[tuple[Result, Values, Values]]:
    """Each finished result of this checkout with its values and the reference's."""
    refs = {r.users: r.all_values for r in results if r.job == REFERENCE and not r.error}
    return [
        (r, r.all_values, refs[r.users])
        for r in results
        if r.side == harness.AFTER and not r.error and r.job != REFERENCE and r.users in refs
    ]


def agreement_table(results: Sequence[Result]) -> list[list[str]]:
    """Rows comparing every job's means with frame_metrics', matched conventions first."""
    rows = [harness.AGREEMENT_HEAD]
    for r, got, ref in _checked(results):
        checks = [*JOBS[r.job].checks, Check("n_users", "n_users")]
        for c in sorted(checks, key=lambda c: not c.matched):
            if c.label in got and c.ref in ref:
                rows.append(
                    harness.agreement_row(
                        r.users,
                        f"{_label(r)}: {c.label}",
                        got[c.label],
                        REF_NAMES[c.ref],
                        ref[c.ref],
                        tolerance=TOLERANCE,
                        matched=c.matched,
                        note=c.note,
                    )
                )
    return rows


def max_diff_table(results: Sequence[Result]) -> list[list[str]]:
    """Largest |diff| per tool and metric over the matched-convention checks (all sizes)."""
    table: dict[str, dict[str, float]] = {}
    for r, got, ref in _checked(results):
        row = table.setdefault(_label(r), {})
        for c in JOBS[r.job].checks:
            if c.matched and c.label in got and c.ref in ref and c.ref in METRIC_OF:
                m = METRIC_OF[c.ref]
                row[m] = max(row.get(m, 0.0), abs(got[c.label] - ref[c.ref]))
    columns = ("P", "R", "AP", "NDCG", "MRR")
    rows = [["tool / variant", *columns]]
    for name, cells in table.items():
        rows.append(
            [
                name,
                *(harness.fmt_diff(cells[m]) if m in cells else "n/a" for m in columns),
            ]
        )
    return rows


def shape_ratios(results: Sequence[Result]) -> dict[tuple[int, str], float]:
    """``(users, job) -> median per input row / the shape reference's median``."""
    return {
        (r.users, r.job): harness.ratio(SUITE, r, results)[0]
        for r in results
        if r.side == harness.AFTER and r.job in SHAPES and r.times
    }


def shapes_table(results: Sequence[Result]) -> list[list[str]]:
    """Every fm-shape-* job against the k=10 rank-column job, with the shape limit."""
    ratios = shape_ratios(results)
    rows = [
        [
            "users",
            "job",
            "shape",
            "median s",
            "per k=10 rows s",
            "peak MiB",
            "data MiB",
            "ratio",
            "limit",
            "verdict",
        ]
    ]
    for r in results:
        if r.job not in SHAPES or r.side != harness.AFTER:
            continue
        job = JOBS[r.job]
        head = [f"{r.users:,}", r.job, job.label.removeprefix("shape: ")]
        if r.error:
            rows.append([*head, "FAILED", "", "", "", "", "", r.error[:100]])
            continue
        ratio = ratios.get((r.users, r.job), math.nan)
        is_base = r.job == SHAPE_BASE
        rows.append(
            [
                *head,
                fmt_s(r.median),
                fmt_s(r.median / job.rows) if job.rows != 1 else "",
                f"{r.peak_mib:,.0f}",
                f"{r.base_mib:,.0f}",
                "-" if math.isnan(ratio) else f"{ratio:.2f}x",
                "" if is_base else f"<= {SHAPE_LIMIT:.1f}x",
                "" if is_base or math.isnan(ratio) else verdict(ratio <= SHAPE_LIMIT),
            ]
        )
    return rows


def pairs_table(results: Sequence[Result], pairs: dict[str, str]) -> list[list[str]]:
    """Each frame_metrics job of ``pairs`` beside its hand-written query: both medians and
    peaks, and frame_metrics' time and peak memory over the query's (<= 1.00x: the goal)."""
    done = {(r.users, r.job): r for r in results if r.side == harness.AFTER}
    head = ["users", "frame_metrics job", "median s", "peak MiB", "hand-written query"]
    rows = [[*head, "median s", "peak MiB", "fm / query time", "fm / query peak"]]
    for users in dict.fromkeys(r.users for r in results):
        for fm_name, hand_name in pairs.items():
            ours, theirs = done.get((users, fm_name)), done.get((users, hand_name))
            if ours is None or theirs is None:
                continue
            cells = [f"{users:,}", fm_name, "", "", hand_name, "", "", "", ""]
            if ours.error or theirs.error:
                cells[-1] = "FAILED: " + "; ".join(r.error[:80] for r in (ours, theirs) if r.error)
            elif ours.times and theirs.times:
                cells[2:4] = [fmt_s(ours.median), f"{ours.peak_mib:,.0f}"]
                cells[5:] = [
                    fmt_s(theirs.median),
                    f"{theirs.peak_mib:,.0f}",
                    f"{ours.median / theirs.median:.2f}x",
                    f"{ours.peak_mib / theirs.peak_mib:.2f}x",
                ]
            rows.append(cells)
    return rows


def default_engine_note(results: Sequence[Result]) -> str:
    """Which default engine the package reported, and whether the baseline used it."""
    seen = {r.info["default_engine"] for r in results if "default_engine" in r.info}
    if not seen:
        return "package default engine: unknown (no frame_metrics job ran)"
    note = f"package default engine: {', '.join(sorted(seen))}"
    if seen != {"streaming"}:
        note += f"; WARNING: the baseline {BASELINE} sets 'streaming', while the shapes use the package default"
    return note


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The agreement, largest-difference, shapes and targets tables; the mismatches."""
    agreement = agreement_table(results)
    print(
        f"\nAgreement of mean values with frame_metrics (|diff| <= {TOLERANCE:g} counts as equal)"
    )
    print(harness.render(agreement, args.markdown))
    print("\nLargest |diff| per metric under matching conventions")
    print(harness.render(max_diff_table(results), args.markdown))
    if any(r.job in SHAPES for r in results):
        print(
            f"\nShapes (polars eager start frames, package default engine, checks on; ratio = "
            f"median per k={K} input rows / {SHAPE_BASE} median at the same size; by-model "
            f"has {len(MODEL_SHIFTS)}x the rows: its ratio uses median / {len(MODEL_SHIFTS)})"
        )
        print(harness.render(shapes_table(results), args.markdown))
    same_shape = pairs_table(results, SAME_SHAPE)
    if len(same_shape) > 1:
        print(
            "\nEach shape against the hand-written polars query of the same shape (hits only, "
            "one group-by per side, cutoffs as filters inside the aggregations; the same start "
            "frames, fresh processes)"
        )
        print(harness.render(same_shape, args.markdown))
    readers = pairs_table(results, SAME_READER)
    if len(readers) > 1:
        print(
            "\nEach reader's frames: frame_metrics against the hand-written query on the same "
            "start frames (pandas: pl.from_pandas in the query; scan_parquet: both include the read)"
        )
        print(harness.render(readers, args.markdown))
    print(f"\nTargets ({default_engine_note(results)})")
    print(harness.render(harness.targets_table(SUITE, results, TARGETS), args.markdown))
    return harness.mismatches(agreement)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The harness's options and the ranking suite's own."""
    p = harness.parser(SUITE, users="100000", repeats=5)
    p.add_argument("--recs", type=int, default=100, help="recommendations per user")
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
        help="skip the call-shape jobs (fm-shape-*: score=, k=100, several k, by, lazy) "
        "and their hand-written queries (polars-handwritten-k100, ...)",
    )
    p.add_argument(
        "--full-run-max",
        type=int,
        default=100_000,
        help="run pytrec_eval on the full (uncut) run only up to this many users "
        "(~2 GB per 100k users), unless named in --only",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Plan, run every job in fresh processes, print the tables; 1 if a matched check fails."""
    return harness.main(SUITE, parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
