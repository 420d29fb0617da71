"""End-to-end benchmark of ranking metrics at k=10: frame_metrics against its peers.

Run ``python bench/ranking.py --users 100000`` (see ``--help`` and ``bench/README.md``).

Every job (a tool and a variant) runs on the harness (``harness.py``): fresh processes
that load the same generated data (``generate.py``, cached as parquet in ``--data-dir``)
into the job's start frames *untimed*, with ``pl.read_parquet`` (polars eager frames) or
``pd.read_parquet`` (pandas, numpy dtypes, for the pandas-based tools), then time the
first call: converting into the tool's own format, computing precision, recall, AP, NDCG
and MRR at k=10, and reducing them to one mean per metric.

The means of every tool are compared with frame_metrics under the matching convention
(AP denominator, binary or graded gain, cutoff); the exit code is 1 on a mismatch.
Besides the peers, every size times the obvious hand-written polars query
(``polars-handwritten*``) and frame_metrics' other call shapes (``fm-shape-*``:
``score=``, k=100, several k, ``by=``, lazy results), and ends with a table of the
speed, memory and shape targets, each marked PASS or FAIL.
"""

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
PROPENSITY_LIMIT = 1.5


# --------------------------------------------------------------------------------------
# Data and start frames
# --------------------------------------------------------------------------------------


@dataclass
class Inputs:
    """The start frames of a job: polars eager frames or pandas frames (numpy dtypes)."""

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


#: Start-frame kinds: polars eager, pandas (numpy dtypes), and the polars frames of two
#: shapes: without the rank column (``score=``) and three stacked models (``by="model"``).
KINDS = ("polars", "pandas", "polars-no-rank", "polars-3-models", "polars-propensity")


def load(data_dir: Path, kind: str, params: harness.Params) -> Inputs:
    """The start frames of ``kind`` (one of :data:`KINDS`), read as users read them."""
    recs_path, truth_path = data_dir / "recs.parquet", data_dir / "truth.parquet"
    n_recs = int(params["recs"])
    if kind == "pandas":
        import pandas as pd

        return Inputs(kind, pd.read_parquet(recs_path), pd.read_parquet(truth_path), n_recs)
    import polars as pl

    truth = pl.read_parquet(truth_path)
    if kind == "polars":
        return Inputs(kind, pl.read_parquet(recs_path), truth, n_recs)
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
        return {
            **peers.fm_floats(out, K),
            "ap_relevant": mean("ap", ap_denominator="relevant"),
            "ndcg_binary": mean("ndcg", t=binary),
            "ndcg_binary_idcg_k": float(scaled.mean()),
            "mrr_full": mean("mrr", k=inputs.n_recs),
            "mrr@100": mean("mrr", k=100),
        }

    return Prepared(None, extras)


# --------------------------------------------------------------------------------------
# The jobs
# --------------------------------------------------------------------------------------

#: Names of the frame_metrics reference values, as shown in the agreement table.
REF_NAMES = {
    **{m: f"{m}@{K}" for m in METRICS},
    "n_users": "n_users",
    "mrr@100": "mrr@100",
    "ap": f"ap@{K} (min_k)",
    "ap_relevant": f"ap@{K} (relevant)",
    "ndcg_binary": f"ndcg@{K} (binary gain)",
    "ndcg_binary_idcg_k": f"ndcg@{K} binary x IDCG(min(|R|,k))/IDCG(k)",
    "mrr_full": "mrr@n_recs (whole list)",
}
#: Which column of the largest-difference table a reference value belongs to.
METRIC_OF = {"precision": "P", "recall": "R", "ap": "AP", "ap_relevant": "AP", "ndcg": "NDCG"}
METRIC_OF |= {"ndcg_binary": "NDCG", "mrr": "MRR", "mrr_full": "MRR", "mrr@100": "MRR"}


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
    *(Check(f"{m}:n_users", "n_users", f"model {m}: the same users") for m in "bc"),
    *(
        differs(f"{model}:{m}", m, f"model {model}: ranks shifted by {MODEL_SHIFTS[model]}")
        for model in "bc"
        for m in ("ndcg", "mrr")
    ),
)
MRR100 = Check("mrr@100", "mrr@100")
FM, HAND, SHAPE_BASE = "frame_metrics", "polars (hand-written)", "fm-shape-k10"
FAST, SLOW, SHAPE = frozenset({"fast-peer"}), frozenset({"slow-peer"}), frozenset({"shape"})


def fm_job(name: str, label: str, kind: str = "polars", **call: Any) -> Job:
    """A frame_metrics variant: ``call`` are :func:`fm`'s options."""
    return Job(name, FM, label, fm(**call), kind, checks=SAME)


def shape(
    name: str, label: str, kind: str = "polars", checks: tuple[Check, ...] = SAME, **call: Any
) -> Job:
    """A call shape: the package's default engine, its ratio against :data:`SHAPE_BASE`."""
    rows = len(MODEL_SHIFTS) if call.get("by") else 1
    prepare = fm(**call)
    return Job(
        name, FM, f"shape: {label}", prepare, kind, SHAPE_BASE, checks=checks, rows=rows, tags=SHAPE
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
    Job(
        "polars-handwritten",
        HAND,
        "LazyFrame query, collect() (in-memory)",
        lambda i: peers.prepare_handwritten(i.recs, i.truth, K),
        "polars",
        checks=SAME,
    ),
    Job(
        "polars-handwritten-streaming",
        HAND,
        "LazyFrame query, collect(engine='streaming')",
        lambda i: peers.prepare_handwritten(i.recs, i.truth, K, "streaming"),
        "polars",
        checks=SAME,
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
        tuple(Check(m, m, "the scores descend with the ranks") for m in METRICS),
        score="score",
    ),
    shape("fm-shape-k100", "k=100", checks=(MRR100,), k=100),
    shape("fm-shape-multik", f"k={MULTI_K} in one call", checks=(*SAME, MRR100), k=MULTI_K),
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
)
BASELINE = "fm-polars-streaming"  # the package default engine
REFERENCE = "fm-reference"
SHAPES = [name for name, job in JOBS.items() if "shape" in job.tags]
FAST_PEERS = [name for name, job in JOBS.items() if job.tags == FAST]
SLOW_PEERS = [name for name, job in JOBS.items() if job.tags == SLOW]
HANDWRITTEN = ["polars-handwritten", "polars-handwritten-streaming"]
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

    Every size of ``--users`` runs every frame_metrics variant, the hand-written polars
    query, the fast peers (plus ranx and Recommenders with ``--slow-peers``) and the
    call shapes (unless ``--no-shapes``); pytrec_eval on the full run only up to
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
    shapes = [] if args.no_shapes else SHAPES
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
        help="skip the call-shape jobs (fm-shape-*: score=, k=100, several k, by, lazy)",
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
