"""Benchmark of the beyond-accuracy metrics at k=10: frame_metrics, and RecTools where it has them.

Run ``python bench/beyond.py`` (100k and 1M users; see ``--help`` and ``bench/README.md``).

The data is synthetic and deterministic (seeded numpy, generated once per size in a
subprocess): a catalog of 20 000 items with a power-law popularity, 10 distinct
recommendations per user, a train split of 10..30 distinct items per user (mean 20) drawn
from the same popularity, 1..3 genres out of 20 per item (a list of strings, for Jaccard
diversity) and a 16-dim float vector per item (for the cosine variant).

Every job runs in its own subprocess like ``ranking.py``: it loads the start frames
(polars, or pandas for the pandas-input job and the peer) untimed, then times the call
from those frames to the metric values; its peak memory is the process's own ``VmHWM``.
Untimed checks: frame_metrics gives identical values for polars and pandas input and for
each metric family alone; RecTools' coverage, novelty (MIUF) and ARP equal frame_metrics';
personalization equals the naive mean over all user pairs on 2 000 users.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/beyond.py` already has it
    sys.path.insert(0, str(HERE))

from generate import _distinct_rows, _popularity_cdf  # noqa: E402
from ranking import RESULT_MARK, _fmt_s, _status_kib, print_report, render  # noqa: E402

K = 10
N_ITEMS = 20_000
N_RECS = 10
TRAIN_MIN, TRAIN_MAX = 10, 30  # distinct train items per user, uniform: mean 20
N_GENRES = 20
GENRES = [f"genre_{g:02d}" for g in range(N_GENRES)]
DIM = 16
#: Users of the naive (all pairs) personalization check.
NAIVE_USERS = 2_000
ALL_METRICS = ["coverage", "novelty", "diversity", "personalization", "arp", "aplt", "gini"]
#: Relative difference under which two values count as equal (peers, naive check):
#: |a - b| <= TOLERANCE * max(1, |b|). Sums in another order differ in the last bits.
TOLERANCE = 1e-12

Values = dict[str, float]


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


def make_arrays(n_users: int, seed: int = 0, n_items: int = N_ITEMS) -> dict[str, np.ndarray]:
    """The benchmark data as numpy columns, deterministic in ``(n_users, seed, n_items)``.

    Keys: ``recs.user``, ``recs.item``, ``recs.rank`` (10 distinct items per user, ranks
    1..10), ``train.user``, ``train.item`` (10..30 distinct items per user), ``items.item``
    (the catalog), ``items.n_genres`` (1..3 per item), ``genres.code`` (the items' genre
    codes, flat, item after item) and ``items.vector`` (``(n_items, DIM)`` floats).
    Popularity follows a Zipf-like law (exponent 1, as in ``generate.py``), shared by the
    recommendations and train; genres have a skewed frequency too (a few are common).
    """
    if n_users < 1:
        raise ValueError(f"n_users: expected an int >= 1, got {n_users}")
    rng = np.random.default_rng(seed)
    cdf = _popularity_cdf(n_items, exponent=1.0, offset=10.0)
    item_ids = rng.permutation(n_items).astype(np.int64)  # popularity rank -> item id

    # Recommendations: distinct popular-leaning items, in a random order within the list.
    pop = _distinct_rows(rng, cdf, n_users, N_RECS)
    pop = np.take_along_axis(pop, np.argsort(rng.random(pop.shape), axis=1), axis=1)
    # Train: TRAIN_MAX distinct draws per user, of which the first n_u are kept.
    n_train = rng.integers(TRAIN_MIN, TRAIN_MAX + 1, size=n_users)
    draws = _distinct_rows(rng, cdf, n_users, TRAIN_MAX)
    keep = np.arange(TRAIN_MAX)[None, :] < n_train[:, None]

    # Genres, per item id (independent of popularity): 1..3 distinct per item, by weighted
    # sampling without replacement (Gumbel top-k) with weights 1 / (g + 2).
    n_genres = rng.integers(1, 4, size=n_items)
    keys = np.log(1.0 / (np.arange(N_GENRES) + 2.0))[None, :] + rng.gumbel(size=(n_items, N_GENRES))
    top = np.argsort(-keys, axis=1)[:, :3]
    codes = top[np.arange(3)[None, :] < n_genres[:, None]]  # row-major: item after item
    return {
        "recs.user": np.repeat(np.arange(n_users, dtype=np.int64), N_RECS),
        "recs.item": item_ids[pop].ravel(),
        "recs.rank": np.tile(np.arange(1, N_RECS + 1, dtype=np.int32), n_users),
        "train.user": np.repeat(np.arange(n_users, dtype=np.int64), n_train),
        "train.item": item_ids[draws[keep]],
        "items.item": np.arange(n_items, dtype=np.int64),
        "items.n_genres": n_genres,
        "genres.code": codes.astype(np.int8),
        "items.vector": rng.standard_normal((n_items, DIM)),
    }


#: The stored columns (one ``.npy`` file each).
ARRAYS = [
    "recs.user",
    "recs.item",
    "recs.rank",
    "train.user",
    "train.item",
    "items.item",
    "items.n_genres",
    "genres.code",
    "items.vector",
]


def save_arrays(n_users: int, seed: int, out: Path) -> dict[str, int]:
    """Generate the data once, store every column as ``.npy`` in ``out``, count the rows."""
    cols = make_arrays(n_users, seed)
    out.mkdir(parents=True, exist_ok=True)
    for name, arr in cols.items():
        np.save(out / f"{name}.npy", arr)
    per_user = np.bincount(cols["recs.user"])
    return {
        "users": n_users,
        "rec_rows": len(cols["recs.user"]),
        "train_rows": len(cols["train.user"]),
        "items": len(cols["items.item"]),
        "genre_rows": len(cols["genres.code"]),
        "item_pairs": int((per_user * (per_user - 1) // 2).sum()),
    }


@dataclass
class Inputs:
    """The start frames of a job, all polars or all pandas (numpy dtypes, lists as objects).

    ``features``: item + ``features`` (a list of genre strings); ``vectors``: item +
    ``features`` (an ``Array(Float64, DIM)``, polars only); ``catalog``: item;
    ``catalog_ids``: the catalog as a numpy array (what RecTools takes).
    """

    kind: str
    recs: Any
    train: Any
    features: Any
    vectors: Any
    catalog: Any
    catalog_ids: np.ndarray


def load_inputs(data_dir: Path, kind: str) -> Inputs:
    """Load the stored columns into the start frames of ``kind`` ("polars" or "pandas")."""
    import polars as pl

    cols = {name: np.load(data_dir / f"{name}.npy") for name in ARRAYS}
    items = cols["items.item"]
    recs = {name: cols[f"recs.{name}"] for name in ("user", "item", "rank")}
    train = {name: cols[f"train.{name}"] for name in ("user", "item")}
    features = (
        pl.DataFrame(
            {
                "item": np.repeat(items, cols["items.n_genres"]),
                "genre": np.array(GENRES)[cols["genres.code"]],
            }
        )
        .group_by("item", maintain_order=True)
        .agg(pl.col("genre").alias("features"))
    )
    if kind == "polars":
        return Inputs(
            kind,
            pl.DataFrame(recs),
            pl.DataFrame(train),
            features,
            pl.DataFrame({"item": items, "features": cols["items.vector"]}),
            pl.DataFrame({"item": items}),
            items,
        )
    if kind == "pandas":
        import pandas as pd

        return Inputs(
            kind,
            pd.DataFrame(recs, copy=False),
            pd.DataFrame(train, copy=False),
            pd.DataFrame(
                {"item": features["item"].to_numpy(), "features": features["features"].to_list()}
            ),
            None,
            pd.DataFrame({"item": items}),
            items,
        )
    raise ValueError(f"kind: expected 'polars' or 'pandas', got {kind!r}")


def naive_personalization(users: np.ndarray, items: np.ndarray) -> float:
    """1 - the mean cosine similarity of the users' binary item vectors over all user pairs.

    The textbook definition (e.g. recmetrics' ``personalization``): a user x item 0/1
    matrix, its Gram matrix (shared items of every pair), cosine, the mean of the upper
    triangle. Quadratic in users: 10^12 pairs at 1M users, so only for a sample.
    """
    _, u = np.unique(users, return_inverse=True)
    _, i = np.unique(items, return_inverse=True)
    m = np.zeros((int(u.max()) + 1, int(i.max()) + 1), dtype=np.float32)
    m[u, i] = 1.0
    shared = (m @ m.T).astype(np.float64)  # small integers: exact in float32
    norms = np.sqrt(m.sum(axis=1, dtype=np.float64))
    cosine = shared / np.outer(norms, norms)
    upper = np.triu_indices(len(norms), 1)
    return 1.0 - float(cosine[upper].mean())


# --------------------------------------------------------------------------------------
# The jobs. Each prepare_* gets the start frames and returns what to time.
# --------------------------------------------------------------------------------------

Run = Callable[[], Values]


def _fm_values(out: Any) -> Values:
    """Every column of the one aggregate row of a frame_metrics result."""
    import polars as pl

    if isinstance(out, pl.DataFrame):
        row = out.row(0, named=True)
    else:
        row = {str(k): v for k, v in out.iloc[0].to_dict().items()}
    return {name: float(value) for name, value in row.items()}


#: The extra inputs each metric reads.
NEEDS = {
    "coverage": "catalog",
    "personalization": "",
    "gini": "catalog",
    "novelty": "train",
    "arp": "train",
    "aplt": "train",
    "diversity": "item_features",
}


def prepare_fm(
    inputs: Inputs,
    metrics: Sequence[str],
    *,
    cosine: bool = False,
    in_memory: bool = False,
    validate: bool = True,
) -> Run:
    """frame_metrics.evaluate with only the extra inputs the metrics read.

    ``in_memory``: collect with polars' in-memory engine instead of the package default
    (streaming), as ``ranking.py``'s in-memory variants do. ``validate=False`` skips the
    input checks (nulls, ranks, duplicates, unknown items).
    """
    import frame_metrics as fm
    import frame_metrics.engine

    if in_memory:
        frame_metrics.engine.DEFAULT_ENGINE = "in-memory"

    given = {
        "catalog": inputs.catalog,
        "train": inputs.train,
        "item_features": inputs.vectors if cosine else inputs.features,
    }
    extras = {NEEDS[m]: given[NEEDS[m]] for m in metrics if NEEDS[m]}

    def run() -> Values:
        out = fm.evaluate(
            inputs.recs, metrics=list(metrics), k=K, aggregate=True, validate=validate, **extras
        )
        return _fm_values(out)

    return run


def _rectools_reco(inputs: Inputs) -> Any:
    from rectools import Columns

    return inputs.recs.rename(
        columns={"user": Columns.User, "item": Columns.Item, "rank": Columns.Rank}
    )


def prepare_rectools_popularity(inputs: Inputs) -> Run:
    """RecTools CatalogCoverage(normalize=True), MeanInvUserFreq, AvgRecPopularity."""
    from rectools import Columns
    from rectools.metrics import AvgRecPopularity, CatalogCoverage, MeanInvUserFreq

    def run() -> Values:
        reco = _rectools_reco(inputs)
        prev = inputs.train.rename(columns={"user": Columns.User, "item": Columns.Item})
        return {
            f"coverage@{K}": float(
                CatalogCoverage(k=K, normalize=True).calc(reco, inputs.catalog_ids)
            ),
            f"novelty@{K}": float(MeanInvUserFreq(k=K).calc(reco, prev)),
            f"arp@{K}": float(AvgRecPopularity(k=K).calc(reco, prev)),
        }

    return run


def prepare_rectools_ild(inputs: Inputs) -> Run:
    """RecTools IntraListDiversity, Hamming distance over one-hot genre columns (uint8).

    The one-hot frame (items x 20 genres) is built inside the timed run from the same
    genre lists frame_metrics gets.
    """
    import pandas as pd
    from rectools.metrics import IntraListDiversity, PairwiseHammingDistanceCalculator

    def run() -> Values:
        reco = _rectools_reco(inputs)
        genres = inputs.features.explode("features")
        onehot = pd.crosstab(genres["item"], genres["features"]).astype(np.uint8)
        ild = IntraListDiversity(k=K, distance_calculator=PairwiseHammingDistanceCalculator(onehot))
        return {f"ild_hamming@{K}": float(ild.calc(reco))}

    return run


def prepare_naive_check(inputs: Inputs) -> Run:
    """Untimed: frame_metrics' personalization and the naive all-pairs one, first 2k users."""
    import polars as pl

    import frame_metrics as fm

    def run() -> Values:
        recs = inputs.recs.filter(pl.col("user") < NAIVE_USERS)
        out = _fm_values(fm.evaluate(recs, metrics=["personalization"], k=K, aggregate=True))
        naive = naive_personalization(recs["user"].to_numpy(), recs["item"].to_numpy())
        return {**out, "naive_personalization": naive}

    return run


#: Timed runs of every stage of the diversity breakdown (median reported), fewer once
#: a stage's runs add up to STAGE_BUDGET seconds.
STAGE_REPEATS = 3
STAGE_BUDGET = 10.0
STAGE_ROWS = "top-k rows x features (join on item)"
STAGE_PAIRS = "+ self-join on user, rank < rank_b: the pairs"
STAGE_JACCARD = "+ Jaccard per pair (list.set_intersection)"
STAGE_NO_SORT = "+ group_by user, 1 - mean(sim): a plain (order-dependent) sum"
REPLICA_STAGE = "+ group_by user, instead sort + cum_sum per user (order-independent sum)"
FM_STAGE = "frame_metrics diversity, validate=False (its own plan)"
#: The stage each stage's increment is measured from.
STAGE_BASE = {
    STAGE_PAIRS: STAGE_ROWS,
    STAGE_JACCARD: STAGE_PAIRS,
    REPLICA_STAGE: STAGE_JACCARD,
    STAGE_NO_SORT: STAGE_JACCARD,
}


def diversity_stages(inputs: Inputs) -> dict[str, Callable[[], object]]:
    """The pairwise (self-join) diversity plan in growing prefixes, then frame_metrics.

    The textbook plan, written with public polars operations only (independent of how
    frame_metrics computes diversity, which ``LazyFrame.explain()`` of a lazy
    ``evaluate`` shows): the top-k rows joined with their features, the self-join of each
    user's rows into pairs (rank < rank_b), Jaccard per pair, and the per-user mean, first
    as a plain mean, then as a sorted ``cum_sum`` (a float sum that does not depend on the
    order rows arrive in, as frame_metrics guarantees). Each prefix ends in a one-row
    aggregate that reads its newest columns, so its work is done but its output is not
    materialised. The last stage is frame_metrics itself, for comparison.
    """
    import polars as pl

    import frame_metrics as fm
    import frame_metrics.engine

    engine = frame_metrics.engine.DEFAULT_ENGINE
    top = inputs.recs.lazy().filter(pl.col("rank") <= K).select("user", "item", "rank")
    features = inputs.features.lazy().select("item", pl.col("features").list.unique())
    rows = top.join(features, on="item")
    pairs = rows.join(rows, on="user", suffix="_b").filter(pl.col("rank") < pl.col("rank_b"))
    a, b = pl.col("features"), pl.col("features_b")
    shared = a.list.set_intersection(b).list.len().cast(pl.Float64)
    union = a.list.len().cast(pl.Float64) + b.list.len().cast(pl.Float64) - shared
    sim = pl.when(union > 0).then(shared / union).otherwise(0.0)
    scored = pairs.select("user", sim.alias("sim"))
    plain = scored.group_by("user").agg((1.0 - pl.col("sim").mean()).alias("d"))
    ordered = pl.col("sim").sort().cum_sum().last() / pl.len()
    per_user = scored.group_by("user").agg((1.0 - ordered).alias("d"))
    both_lists = a.list.len().sum() + b.list.len().sum()
    # The plain variant runs before the ordered one, so that the peak RSS so far
    # (monotonic) shows which of the two raises it.
    queries = {
        STAGE_ROWS: rows.select(pl.len(), a.list.len().sum()),
        STAGE_PAIRS: pairs.select(pl.len(), both_lists),
        STAGE_JACCARD: pairs.select(pl.len(), sim.sum()),
        STAGE_NO_SORT: plain.select(pl.len(), pl.col("d").mean()),
        REPLICA_STAGE: per_user.select(pl.len(), pl.col("d").mean()),
    }

    def collect(query: pl.LazyFrame) -> Callable[[], object]:
        return lambda: query.collect(engine=engine)

    stages = {name: collect(q) for name, q in queries.items()}
    # The same call as the fm-diversity job, without its input checks.
    stages[FM_STAGE] = lambda: fm.evaluate(
        inputs.recs,
        metrics=["diversity"],
        k=K,
        aggregate=True,
        item_features=inputs.features,
        validate=False,
    )
    return stages


def prepare_stages(inputs: Inputs) -> Run:
    """Untimed job: time each stage of :func:`diversity_stages`; peak RSS after each."""
    import polars as pl

    def run() -> Values:
        out: Values = {}
        results: dict[str, object] = {}
        for name, stage in diversity_stages(inputs).items():
            times, cpu = [], []
            for _ in range(STAGE_REPEATS):
                gc.collect()
                start, start_cpu = time.perf_counter(), time.process_time()
                result = stage()
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                if sum(times) > STAGE_BUDGET:
                    break
            out[f"s:{name}"] = statistics.median(times)
            out[f"cpu:{name}"] = statistics.median(cpu)
            out[f"peak:{name}"] = _status_kib("VmHWM") / 1024
            results[name] = result
        # The rebuilt plan must compute frame_metrics' value (up to the order of the mean).
        replica = results[REPLICA_STAGE]
        assert isinstance(replica, pl.DataFrame)
        out["replica_diversity"] = float(replica["d"][0])
        out[f"diversity@{K}"] = _fm_values(results[FM_STAGE])[f"diversity@{K}"]
        return out

    return run


@dataclass(frozen=True)
class Job:
    """One (tool, job): its start frames, what it runs, and what its ratio is against."""

    tool: str
    label: str
    kind: str
    prepare: Callable[[Inputs], Run]
    #: The frame_metrics job whose median is the ratio's denominator.
    vs: str = "fm-all"
    #: Only at sizes up to ``--small-max`` users.
    small: bool = False
    timed: bool = True


CORPUS = ["personalization", "coverage", "gini"]
POPULARITY = ["novelty", "arp", "aplt"]
RECTOOLS_SET = ["coverage", "novelty", "arp"]


def _fm(metrics: list[str], **opts: bool) -> Callable[[Inputs], Run]:
    return lambda inputs: prepare_fm(inputs, metrics, **opts)


JOBS: dict[str, Job] = {
    "fm-all": Job("frame_metrics", "all seven, one call (polars)", "polars", _fm(ALL_METRICS)),
    "fm-all-no-validate": Job(
        "frame_metrics",
        "all seven, one call, validate=False",
        "polars",
        _fm(ALL_METRICS, validate=False),
    ),
    "fm-corpus": Job("frame_metrics", "personalization+coverage+gini", "polars", _fm(CORPUS)),
    "fm-popularity": Job("frame_metrics", "novelty+arp+aplt", "polars", _fm(POPULARITY)),
    "fm-diversity": Job(
        "frame_metrics", "diversity (Jaccard, genres)", "polars", _fm(["diversity"])
    ),
    "fm-diversity-in-memory": Job(
        "frame_metrics",
        "diversity (Jaccard), in-memory engine",
        "polars",
        _fm(["diversity"], in_memory=True),
        vs="fm-diversity",
    ),
    "fm-diversity-cosine": Job(
        "frame_metrics",
        f"diversity (cosine, {DIM}-dim vectors)",
        "polars",
        _fm(["diversity"], cosine=True),
        vs="fm-diversity",
        small=True,
    ),
    "fm-all-pandas": Job(
        "frame_metrics", "all seven, one call (pandas)", "pandas", _fm(ALL_METRICS), small=True
    ),
    "fm-rectools-set": Job("frame_metrics", "coverage+novelty+arp", "polars", _fm(RECTOOLS_SET)),
    "rectools-popularity": Job(
        "RecTools",
        "CatalogCoverage+MeanInvUserFreq+AvgRecPopularity",
        "pandas",
        prepare_rectools_popularity,
        vs="fm-rectools-set",
    ),
    "rectools-ild": Job(
        "RecTools",
        "IntraListDiversity (Hamming, one-hot genres)",
        "pandas",
        prepare_rectools_ild,
        vs="fm-diversity",
    ),
    "diversity-stages": Job(
        "frame_metrics",
        "diversity plan, stage by stage (untimed here: see its own table)",
        "polars",
        prepare_stages,
        timed=False,
    ),
    "naive-check": Job(
        "numpy",
        f"naive all-pairs personalization, {NAIVE_USERS:,} users (untimed)",
        "polars",
        prepare_naive_check,
        timed=False,
    ),
}
BASELINE = "fm-all"


# --------------------------------------------------------------------------------------
# Worker (one subprocess per job)
# --------------------------------------------------------------------------------------


def _busy_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (``/proc/stat``), or nan."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return math.nan
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait.
    ticks = [int(x) for x in fields[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def worker(name: str, data_dir: Path, repeats: int, budget: float) -> dict[str, Any]:
    """Load the start frames, time ``repeats`` runs (fewer past ``budget`` s), report."""
    job = JOBS[name]
    inputs = load_inputs(data_dir, job.kind)
    gc.collect()
    report: dict[str, Any] = {"base_kib": _status_kib("VmRSS")}
    run = job.prepare(inputs)
    times: list[float] = []
    cpu: list[float] = []
    values: Values = {}
    busy, own = _busy_seconds(), time.process_time()
    for _ in range(repeats if job.timed else 1):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        values = run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if sum(times) > budget:
            break
    report["peak_kib"] = _status_kib("VmHWM")
    # Cores kept busy by other processes during the timed runs, on average: what the
    # machine's busy time adds beyond this process's own CPU time. 0 on an idle machine.
    others = (_busy_seconds() - busy) - (time.process_time() - own)
    report["other_cores"] = max(0.0, others) / sum(times) if times else math.nan
    report["times"] = times if job.timed else []
    report["cpu"] = cpu if job.timed else []
    report["values"] = values
    return report


def worker_main(name: str, data_dir: Path, repeats: int, budget: float) -> int:
    """Run :func:`worker` and print its report (or the error) as one marked JSON line."""
    return print_report(lambda: worker(name, data_dir, repeats, budget))


# --------------------------------------------------------------------------------------
# Parent: run the jobs in subprocesses, print the tables
# --------------------------------------------------------------------------------------


@dataclass
class Result:
    """One job's outcome as seen by the parent."""

    name: str
    users: int
    times: list[float] = field(default_factory=list)
    #: CPU seconds (user + system, all threads) of each timed run.
    cpu: list[float] = field(default_factory=list)
    #: Cores kept busy by other processes during the timed runs (a load check).
    other_cores: float = math.nan
    values: Values = field(default_factory=dict)
    peak_mib: float = math.nan
    base_mib: float = math.nan
    error: str = ""

    @property
    def job(self) -> Job:
        return JOBS[self.name]

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else math.nan


def _subprocess(args: list[str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Run this script with ``args``; its marked JSON report (None if none) and why not."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            out, _ = proc.communicate()
        finally:
            timer.cancel()
        err.seek(0)
        stderr_tail = err.read()[-2000:]
    lines = [line for line in out.splitlines() if line.startswith(RESULT_MARK)]
    if not lines:
        why = (
            f"killed after {timeout:.0f}s"
            if proc.returncode < 0
            else f"exit code {proc.returncode}"
        )
        return None, f"no result ({why}); stderr tail: {stderr_tail.strip()[-300:]}"
    report: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    return report, ""


def run_job(
    name: str, users: int, data_dir: Path, *, repeats: int, budget: float, timeout: float
) -> Result:
    """Run one job in a fresh interpreter and collect its report."""
    args = ["--worker", name, "--data-dir", str(data_dir), "--repeats", str(repeats)]
    report, why = _subprocess([*args, "--budget", str(budget)], timeout)
    result = Result(name, users)
    if report is None or "error" in report:
        result.error = why if report is None else str(report["error"])
        return result
    result.times = report["times"]
    result.cpu = report["cpu"]
    result.other_cores = report["other_cores"]
    result.values = report["values"]
    result.base_mib = report["base_kib"] / 1024
    result.peak_mib = report["peak_kib"] / 1024
    return result


def generate_in_subprocess(users: int, seed: int, data_dir: Path) -> dict[str, int]:
    """Run :func:`save_arrays` in a subprocess, so that this process stays small."""
    args = ["--save-data", "--users", str(users), "--seed", str(seed), "--data-dir", str(data_dir)]
    report, why = _subprocess(args, timeout=600)
    if report is None:
        raise RuntimeError(f"data generation failed: {why}")
    return {str(k): int(v) for k, v in report.items()}


def wait_for_idle(limit: float, threshold: float = 0.3, window: float = 2.0) -> float:
    """Wait (up to ``limit`` s) until other processes keep < ``threshold`` cores busy.

    Samples the machine's busy time over ``window`` seconds while this process sleeps;
    returns the seconds waited. A shared machine's other jobs inflate wall times: the
    ``other load`` column shows how much they did during each job's timed runs anyway.
    """
    waited = 0.0
    while waited < limit:
        before = _busy_seconds()
        time.sleep(window)
        if math.isnan(before) or (_busy_seconds() - before) / window < threshold:
            break
        waited += window
    return waited


def plan(users: int, args: argparse.Namespace) -> list[str]:
    """The jobs at one size: ``--only`` narrows them; the baseline always runs."""
    wanted = {n.strip() for n in args.only.split(",") if n.strip()} if args.only else set(JOBS)
    unknown = wanted - set(JOBS)
    if unknown:
        raise SystemExit(f"--only: unknown jobs {sorted(unknown)}; known: {', '.join(JOBS)}")
    names = [
        n for n, job in JOBS.items() if n in wanted and (not job.small or users <= args.small_max)
    ]
    if "rectools-ild" in names and 0 < args.ild_max < users:
        names.remove("rectools-ild")
    return list(dict.fromkeys([BASELINE, *names]))


def _progress(result: Result) -> str:
    if result.error:
        return f"FAILED: {result.error}"
    if not result.times:
        return f"untimed check, peak {result.peak_mib:,.0f} MiB"
    return (
        f"median {_fmt_s(result.median)}s over {len(result.times)} run(s), "
        f"peak {result.peak_mib:,.0f} MiB"
    )


def timing_table(results: list[Result]) -> list[list[str]]:
    """Rows of the timing table; each ratio is against the frame_metrics job named."""
    medians = {(r.users, r.name): r.median for r in results if r.times}
    rows = [
        [
            "users",
            "tool",
            "job",
            "median s",
            "cpu s",
            "runs",
            "ratio",
            "ratio to (frame_metrics)",
            "peak MiB",
            "data MiB",
            "other load",
        ]
    ]
    for r in results:
        if not r.job.timed:
            continue
        if r.error:
            rows.append(
                [
                    f"{r.users:,}",
                    r.job.tool,
                    r.job.label,
                    "FAILED",
                    "",
                    "",
                    "",
                    r.error[:100],
                    "",
                    "",
                    "",
                ]
            )
            continue
        ref = medians.get((r.users, r.job.vs), math.nan)
        ratio = r.median / ref
        rows.append(
            [
                f"{r.users:,}",
                r.job.tool,
                r.job.label,
                _fmt_s(r.median),
                _fmt_s(statistics.median(r.cpu)),
                str(len(r.times)),
                "-" if math.isnan(ratio) else f"{ratio:.2f}x",
                JOBS[r.job.vs].label,
                f"{r.peak_mib:,.0f}",
                f"{r.base_mib:,.0f}",
                f"{r.other_cores:.2f}",
            ]
        )
    return rows


def rows_table(infos: list[dict[str, int]]) -> list[list[str]]:
    """The sizes of the inputs at every size."""
    head = [
        "users",
        "rec rows",
        "train rows",
        "catalog items",
        "item-genre rows",
        "diversity pairs",
    ]
    keys = ["users", "rec_rows", "train_rows", "items", "genre_rows", "item_pairs"]
    return [head, *([f"{info[k]:,}" for k in keys] for info in infos)]


def _diff(a: float, b: float) -> float:
    return abs(a - b)


def checks_table(results: list[Result]) -> list[list[str]]:
    """Correctness lines: each compares two values; the last column says whether they agree."""
    by_key = {(r.users, r.name): r for r in results if not r.error}
    rows = [["users", "check", "value", "reference", "ref value", "|diff|", "verdict"]]

    def add(users: int, check: str, got: float, ref_name: str, ref: float, exact: bool) -> None:
        diff = _diff(got, ref)
        ok = diff == 0 if exact else diff <= TOLERANCE * max(1.0, abs(ref))
        verdict = ("identical" if diff == 0 else "equal") if ok else "MISMATCH"
        rows.append(
            [
                f"{users:,}",
                check,
                f"{got:.12g}",
                ref_name,
                f"{ref:.12g}",
                "0" if diff == 0 else f"{diff:.1e}",
                verdict,
            ]
        )

    for users in sorted({r.users for r in results}):
        base = by_key.get((users, BASELINE))
        if base is None:
            continue
        for name in SELF_CHECKS:
            other = by_key.get((users, name))
            if other is None:
                continue
            # Every value of the job (n_users included) against the headline call's: one
            # line with the largest difference.
            cols = [c for c in other.values if c in base.values]
            worst = max(cols, key=lambda c: _diff(other.values[c], base.values[c]))
            add(
                users,
                f"fm {other.job.label}: its {len(cols)} values (n_users included); shown: "
                f"the largest |diff|, {worst}",
                other.values[worst],
                f"fm {base.job.label}",
                base.values[worst],
                exact=True,
            )
        peer = by_key.get((users, "rectools-popularity"))
        if peer is not None:
            for col, value in peer.values.items():
                if col not in PEER_NAMES or col not in base.values:
                    continue
                add(
                    users,
                    f"RecTools {PEER_NAMES[col]}",
                    value,
                    f"fm {col}",
                    base.values[col],
                    exact=False,
                )
        stages = by_key.get((users, "diversity-stages"))
        if stages is not None:
            add(
                users,
                "diversity of the rebuilt plan (stage table)",
                stages.values["replica_diversity"],
                f"fm diversity@{K}",
                stages.values[f"diversity@{K}"],
                exact=False,
            )
        naive = by_key.get((users, "naive-check"))
        if naive is not None:
            add(
                users,
                f"naive all-pairs personalization ({NAIVE_USERS:,} users)",
                naive.values["naive_personalization"],
                f"fm personalization@{K}, same users",
                naive.values[f"personalization@{K}"],
                exact=False,
            )
    return rows


#: frame_metrics jobs whose values must equal the headline call's exactly.
SELF_CHECKS = [
    "fm-all-no-validate",
    "fm-all-pandas",
    "fm-corpus",
    "fm-popularity",
    "fm-diversity",
    "fm-rectools-set",
]
PEER_NAMES = {
    f"coverage@{K}": "CatalogCoverage(normalize=True)",
    f"novelty@{K}": "MeanInvUserFreq",
    f"arp@{K}": "AvgRecPopularity",
}


def values_table(results: list[Result]) -> list[list[str]]:
    """The headline values (and RecTools' Hamming ILD, not comparable) per size."""
    rows = [["users", "n_users", *(f"{m}@{K}" for m in ALL_METRICS), f"RecTools ILD Hamming@{K}"]]
    by_key = {(r.users, r.name): r for r in results if not r.error}
    for users in sorted({r.users for r in results}):
        base = by_key.get((users, BASELINE))
        if base is None:
            continue
        ild = by_key.get((users, "rectools-ild"))
        rows.append(
            [
                f"{users:,}",
                f"{base.values['n_users']:,.0f}",
                *(f"{base.values[f'{m}@{K}']:.6g}" for m in ALL_METRICS),
                f"{ild.values[f'ild_hamming@{K}']:.6g}" if ild is not None else "-",
            ]
        )
    return rows


def stages_table(results: list[Result]) -> list[list[str]]:
    """The diversity breakdown: each stage's median, its increment and the peak RSS so far."""
    rows = [
        [
            "users",
            "stage (each includes the ones above)",
            "median s",
            "+ s",
            "cpu s",
            "+ cpu s",
            "peak MiB so far",
        ]
    ]
    for r in results:
        if r.name != "diversity-stages" or r.error:
            continue
        for key, seconds in r.values.items():
            if not key.startswith("s:"):
                continue
            name = key[2:]
            base = STAGE_BASE.get(name)
            step = seconds - r.values[f"s:{base}"] if base else math.nan
            cpu = r.values[f"cpu:{name}"]
            cpu_step = cpu - r.values[f"cpu:{base}"] if base else math.nan
            rows.append(
                [
                    f"{r.users:,}",
                    name,
                    _fmt_s(seconds),
                    "" if math.isnan(step) else f"{step:+.3f}",
                    _fmt_s(cpu),
                    "" if math.isnan(cpu_step) else f"{cpu_step:+.3f}",
                    f"{r.values[f'peak:{name}']:,.0f}",
                ]
            )
    return rows


def _source_state() -> str:
    """Where frame_metrics is imported from: this checkout's git commit (and whether its
    sources have local changes), or the directory (e.g. a snapshot on ``PYTHONPATH``)."""
    from importlib.util import find_spec

    spec = find_spec("frame_metrics")
    if spec is None or spec.origin is None:
        return "(not found)"
    package = Path(spec.origin).resolve().parent
    root = HERE.parent
    if package != root / "frame_metrics":
        return f"imported from {package}"

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return f"imported from {package} (not a git checkout)"
    dirty = git("status", "--porcelain", "--", "frame_metrics")
    return f"git {commit}" + (" + uncommitted changes" if dirty else "")


def environment() -> str:
    """Python, package versions, cores and load: what the timings depend on."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("frame_metrics", "polars", "pandas", "numpy", "rectools"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    found.append(f"frame_metrics source {_source_state()}")
    return f"python {sys.version.split()[0]}; {'; '.join(found)}\n{os.cpu_count()} cores; load average {load}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command line options."""
    p = argparse.ArgumentParser(
        description=f"Beyond-accuracy benchmark at k={K}: frame_metrics vs RecTools."
    )
    p.add_argument(
        "--users",
        default="100000,1000000",
        help="comma-separated sizes in users (10 recommendations each)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per job (median reported)")
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
        "--small-max",
        type=int,
        default=100_000,
        help="pandas input and cosine diversity only at sizes up to this many users",
    )
    p.add_argument(
        "--ild-max",
        type=int,
        default=0,
        help="RecTools IntraListDiversity only at sizes up to this many users (0: every size; "
        "a run past --timeout is reported as failed)",
    )
    p.add_argument(
        "--only",
        default="",
        help=f"comma-separated jobs (the baseline always runs): {', '.join(JOBS)}",
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="before each job, wait up to this many seconds for other processes to stop "
        "using the CPU (a shared machine)",
    )
    p.add_argument(
        "--data-dir", type=Path, help="keep the generated .npy data here (default: a temp dir)"
    )
    p.add_argument("--json", type=Path, help="write all results as JSON here")
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--save-data", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Generate each size, run every job in a subprocess, print the tables; 1 on a mismatch."""
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.data_dir, args.repeats, args.budget)
    if args.save_data:
        info = save_arrays(int(args.users), args.seed, args.data_dir)
        print(RESULT_MARK + json.dumps(info), flush=True)
        return 0

    sizes = [int(u) for u in args.users.split(",") if u.strip()]
    print(environment(), flush=True)
    started = time.perf_counter()
    results: list[Result] = []
    infos: list[dict[str, int]] = []
    with tempfile.TemporaryDirectory(prefix="fm-beyond-") as tmp:
        for users in sizes:
            data_dir = (args.data_dir or Path(tmp)) / f"beyond-u{users}-s{args.seed}"
            start = time.perf_counter()
            info = generate_in_subprocess(users, args.seed, data_dir)
            infos.append(info)
            print(
                f"\n== {users:,} users: {info['rec_rows']:,} rec rows, {info['train_rows']:,} "
                f"train rows, {info['items']:,} items (generated in "
                f"{time.perf_counter() - start:.1f}s)",
                flush=True,
            )
            for name in plan(users, args):
                if args.wait_idle > 0:
                    waited = wait_for_idle(args.wait_idle)
                    if waited:
                        print(f"  (waited {waited:.0f}s for the machine to be idle)", flush=True)
                result = run_job(
                    name,
                    users,
                    data_dir,
                    repeats=args.repeats,
                    budget=args.budget,
                    timeout=args.timeout,
                )
                results.append(result)
                print(f"  {name:<22} {_progress(result)}", flush=True)

    print("\nInputs")
    print(render(rows_table(infos), args.markdown))
    print(
        f"\nTimings (k={K}; median of up to {args.repeats} runs; ratio = median / the median of "
        "the frame_metrics job named, same size; peak = peak RSS (VmHWM) of the job's "
        "process, data = its RSS after loading the start frames; other load = cores other "
        "processes kept busy during the timed runs, 0 on an idle machine)"
    )
    print(render(timing_table(results), args.markdown))
    stages = stages_table(results)
    if len(stages) > 1:
        print(
            "\nThe pairwise (self-join) diversity plan, stage by stage, and frame_metrics' own "
            f"(polars, Jaccard; median of up to {STAGE_REPEATS} "
            f"runs per stage, fewer past {STAGE_BUDGET:.0f}s; peak RSS so far = the job's VmHWM "
            "after the stage's runs)"
        )
        print(render(stages, args.markdown))
    print("\nValues (frame_metrics, all seven in one call)")
    print(render(values_table(results), args.markdown))
    checks = checks_table(results)
    print(
        f"\nChecks (frame_metrics against itself: exact; against peers and naive: |diff| <= {TOLERANCE:g} x max(1, |ref value|))"
    )
    print(render(checks, args.markdown))
    mismatches = sum(row[-1] == "MISMATCH" for row in checks[1:])
    failed = [f"{r.name}@{r.users:,}" for r in results if r.error]
    print(
        f"\n{mismatches} mismatch(es); {len(failed)} failed job(s)"
        f"{': ' + ', '.join(failed) if failed else ''}; total {time.perf_counter() - started:.0f}s"
    )
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
