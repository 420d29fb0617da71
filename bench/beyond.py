"""Benchmark of the beyond-accuracy metrics at k=10: frame_metrics, and RecTools where it has them.

Run ``python bench/beyond.py`` (100k and 1M users; see ``--help`` and ``bench/README.md``).

The data is synthetic and deterministic (seeded numpy, generated once per size in a
subprocess and cached as parquet): a catalog of 20 000 items with a power-law
popularity, 10 distinct recommendations per user, a train split of 10..30 distinct items
per user (mean 20) drawn from the same popularity, 1..3 genres out of 20 per item (a
list of strings, for Jaccard diversity) and a 16-dim float vector per item (for the
cosine variant).

Every job runs on the harness (``harness.py``), like ``ranking.py``: fresh processes load
the start frames (polars, or pandas for the pandas-input job and the peers) untimed and
time the call from those frames to the metric values. Untimed checks: frame_metrics
gives identical values for polars and pandas input and for each metric family alone;
RecTools' coverage, novelty (MIUF) and ARP equal frame_metrics'; personalization equals
the naive mean over all user pairs on 2 000 users.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/beyond.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import peers  # noqa: E402
from generate import _distinct_rows, popular_lists  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values, fmt_s  # noqa: E402

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
#: LensKit sums exposures in float32 (24 bits): its Gini agrees to about this.
LENSKIT_TOLERANCE = 1e-5


# --------------------------------------------------------------------------------------
# Data and start frames
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
    rng, cdf, item_ids, pop = popular_lists(n_users, N_RECS, seed, n_items)
    # Recommendations: distinct popular-leaning items, in a random order within the list.
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


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """Generate the data of ``params`` (users, seed) as parquet frames in ``data_dir``.

    ``recs``, ``train``, ``catalog`` (item), ``features`` (item + a ``List(String)`` of
    genres) and ``vectors`` (item + an ``Array(Float64, DIM)``): the frames a user has.
    """
    import polars as pl

    cols = make_arrays(params["users"], params["seed"])
    items = cols["items.item"]
    genres = pl.DataFrame(
        {
            "item": np.repeat(items, cols["items.n_genres"]),
            "genre": np.array(GENRES)[cols["genres.code"]],
        }
    )
    frames = {
        "recs": pl.DataFrame({n: cols[f"recs.{n}"] for n in ("user", "item", "rank")}),
        "train": pl.DataFrame({n: cols[f"train.{n}"] for n in ("user", "item")}),
        "catalog": pl.DataFrame({"item": items}),
        "features": genres.group_by("item", maintain_order=True).agg(
            pl.col("genre").alias("features")
        ),
        "vectors": pl.DataFrame({"item": items, "features": cols["items.vector"]}),
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.write_parquet(data_dir / f"{name}.parquet")
    per_user = np.bincount(cols["recs.user"])
    return {
        "users": params["users"],
        "rec_rows": len(cols["recs.user"]),
        "train_rows": len(cols["train.user"]),
        "items": len(items),
        "genre_rows": len(cols["genres.code"]),
        "item_pairs": int((per_user * (per_user - 1) // 2).sum()),
    }


@dataclass
class Inputs:
    """The start frames of a job, all polars or all pandas (numpy dtypes, lists as lists).

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


def load(data_dir: Path, kind: str, params: harness.Params) -> Inputs:
    """The start frames of ``kind`` ("polars" or "pandas"), read as users read them."""
    import polars as pl

    def path(name: str) -> Path:
        return data_dir / f"{name}.parquet"

    features = pl.read_parquet(path("features"))
    if kind == "polars":
        catalog = pl.read_parquet(path("catalog"))
        recs, train = pl.read_parquet(path("recs")), pl.read_parquet(path("train"))
        vectors = pl.read_parquet(path("vectors"))
        return Inputs(kind, recs, train, features, vectors, catalog, catalog["item"].to_numpy())
    if kind == "pandas":
        import pandas as pd

        items = pd.read_parquet(path("catalog"))
        # Genre lists as Python lists, as a pandas user builds them (read_parquet would
        # give numpy arrays).
        lists = pd.DataFrame(
            {"item": features["item"].to_numpy(), "features": features["features"].to_list()}
        )
        frames = pd.read_parquet(path("recs")), pd.read_parquet(path("train"))
        return Inputs(kind, *frames, lists, None, items, items["item"].to_numpy())
    raise ValueError(f"kind: expected 'polars' or 'pandas', got {kind!r}")


# --------------------------------------------------------------------------------------
# The jobs
# --------------------------------------------------------------------------------------

#: The extra inputs each metric reads (by the metric's name, before any options).
NEEDS: dict[str, tuple[str, ...]] = {
    "coverage": ("catalog",),
    "personalization": (),
    "gini": ("catalog",),
    "novelty": ("train",),
    "arp": ("train",),
    "aplt": ("train",),
    "diversity": ("item_features",),
    # The user's genre mix in train against the list's.
    "miscalibration": ("train", "item_features"),
    # Exposure over the catalog; parity's groups are aplt's head/tail from train.
    "exposure_gini": ("catalog",),
    "exposure_parity": ("train", "catalog"),
}
#: LensKit's ExposureGini with its defaults, as a frame_metrics metric string and the
#: call's persistence (a call-level option of the exposure metrics).
LENSKIT_GINI = "exposure_gini(exposure=rbp)"


def fm(
    metrics: Sequence[str],
    *,
    cosine: bool = False,
    engine: peers.Engine | None = None,
    validate: bool = True,
    **options: Any,
) -> Callable[[Inputs], Prepared]:
    """A prepare function: ``fm.evaluate`` with only the extra inputs the metrics read.

    ``cosine``: item features are the vectors (cosine diversity), not the genre lists;
    ``engine``: set the package's default engine first; ``validate=False`` skips the
    input checks (nulls, ranks, duplicates, unknown items); ``options``: the call's.
    """

    def prepare(i: Inputs) -> Prepared:
        given = {
            "catalog": i.catalog,
            "train": i.train,
            "item_features": i.vectors if cosine else i.features,
        }
        extras = {need: given[need] for m in metrics for need in NEEDS[m.split("(")[0]]}
        return peers.prepare_fm(
            (i.recs,),
            engine=engine,
            metrics=list(metrics),
            k=K,
            validate=validate,
            **extras,
            **options,
        )

    return prepare


def prepare_naive_check(inputs: Inputs) -> Prepared:
    """Untimed: frame_metrics' personalization and the naive all-pairs one, first 2k users."""
    import polars as pl

    import frame_metrics as fm

    def run() -> Values:
        recs = inputs.recs.filter(pl.col("user") < NAIVE_USERS)
        out = peers.fm_floats(fm.evaluate(recs, metrics=["personalization"], k=K, aggregate=True))
        naive = peers.naive_personalization(recs["user"].to_numpy(), recs["item"].to_numpy())
        return {**out, "naive_personalization": naive}

    return Prepared(run)


#: Timed runs of every stage of the diversity breakdown (median reported), fewer once
#: a stage's runs add up to STAGE_BUDGET seconds.
STAGE_REPEATS = 3
STAGE_BUDGET = 10.0
FM_STAGE = "frame_metrics diversity, validate=False (its own plan)"


def prepare_stages(inputs: Inputs) -> Prepared:
    """Untimed job: time each stage of :func:`peers.diversity_stages` in this process,
    then frame_metrics' own diversity call; the peak RSS after each."""
    import frame_metrics as fm

    engine = peers.set_default_engine(None)["default_engine"]

    def collect(query: Any) -> Callable[[], Any]:
        return lambda: query.collect(engine=engine)

    queries = peers.diversity_stages(inputs.recs, inputs.features, K)
    stages = {name: collect(query) for name, query in queries.items()}
    # The same call as the fm-diversity job, without its input checks.
    stages[FM_STAGE] = lambda: fm.evaluate(
        inputs.recs,
        metrics=["diversity"],
        k=K,
        aggregate=True,
        item_features=inputs.features,
        validate=False,
    )

    def run() -> Values:
        out: Values = {}
        results: dict[str, Any] = {}
        for name, stage in stages.items():
            times, cpu = [], []
            for _ in range(STAGE_REPEATS):
                gc.collect()
                start, start_cpu = time.perf_counter(), time.process_time()
                results[name] = stage()
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                if sum(times) > STAGE_BUDGET:
                    break
            out[f"s:{name}"] = statistics.median(times)
            out[f"cpu:{name}"] = statistics.median(cpu)
            out[f"peak:{name}"] = harness.status_kib("VmHWM") / 1024
        # The rebuilt plan must compute frame_metrics' value (up to the order of the mean).
        out["replica_diversity"] = float(results[peers.STAGE_REPLICA]["d"][0])
        out[f"diversity@{K}"] = peers.fm_floats(results[FM_STAGE])[f"diversity@{K}"]
        return out

    return Prepared(run)


CORPUS = ["personalization", "coverage", "gini"]
FAIRNESS = frozenset({"fairness"})
#: The environment variable naming a Python with LensKit (its torch and pandas < 3 pins
#: conflict with the package's): ``python -m venv lk; lk/bin/pip install lenskit polars``.
LENSKIT_PYTHON = "FM_BENCH_LENSKIT_PYTHON"
POPULARITY = ["novelty", "arp", "aplt"]
RECTOOLS_SET = ["coverage", "novelty", "arp"]
FM, SMALL = "frame_metrics", frozenset({"small"})
JOBS = harness.job_table(
    Job("fm-all", FM, "all seven, one call (polars)", fm(ALL_METRICS), "polars"),
    Job(
        "fm-all-no-validate",
        FM,
        "all seven, one call, validate=False",
        fm(ALL_METRICS, validate=False),
        "polars",
    ),
    Job("fm-corpus", FM, "personalization+coverage+gini", fm(CORPUS), "polars"),
    Job("fm-popularity", FM, "novelty+arp+aplt", fm(POPULARITY), "polars"),
    Job("fm-diversity", FM, "diversity (Jaccard, genres)", fm(["diversity"]), "polars"),
    Job(
        "fm-diversity-in-memory",
        FM,
        "diversity (Jaccard), in-memory engine",
        fm(["diversity"], engine="in-memory"),
        "polars",
        vs="fm-diversity",
    ),
    Job(
        "fm-diversity-cosine",
        FM,
        f"diversity (cosine, {DIM}-dim vectors)",
        fm(["diversity"], cosine=True),
        "polars",
        vs="fm-diversity",
        tags=SMALL,
    ),
    Job("fm-all-pandas", FM, "all seven, one call (pandas)", fm(ALL_METRICS), "pandas", tags=SMALL),
    Job("fm-rectools-set", FM, "coverage+novelty+arp", fm(RECTOOLS_SET), "polars"),
    Job(
        "rectools-popularity",
        "RecTools",
        "CatalogCoverage+MeanInvUserFreq+AvgRecPopularity",
        lambda i: peers.prepare_rectools_popularity(i.recs, i.train, i.catalog_ids, K),
        "pandas",
        vs="fm-rectools-set",
    ),
    Job(
        "rectools-ild",
        "RecTools",
        "IntraListDiversity (Hamming, one-hot genres)",
        lambda i: peers.prepare_rectools_ild(i.recs, i.features, K),
        "pandas",
        vs="fm-diversity",
    ),
    # Issue 20's targets: calibration and exposure parity against novelty, one metric
    # each, from the same start frames (20 genres, 1..3 per item).
    Job("fm-novelty", FM, "novelty alone", fm(["novelty"]), "polars", tags=FAIRNESS),
    Job(
        "fm-miscalibration",
        FM,
        "miscalibration (KL, genres)",
        fm(["miscalibration"]),
        "polars",
        vs="fm-novelty",
        tags=FAIRNESS,
    ),
    Job(
        "fm-exposure-parity",
        FM,
        "exposure_parity (head/tail, catalog target)",
        fm(["exposure_parity"]),
        "polars",
        vs="fm-novelty",
        tags=FAIRNESS,
    ),
    Job(
        "fm-exposure-gini",
        FM,
        "exposure_gini, LensKit's weights (rbp, p = 0.85)",
        fm([LENSKIT_GINI], persistence=peers.LENSKIT_PATIENCE),
        "polars",
        vs="fm-novelty",
        tags=FAIRNESS,
    ),
    Job(
        "lenskit-exposure-gini",
        "LensKit",
        "ExposureGini (its defaults), from ItemListCollection.from_df",
        lambda i: peers.prepare_lenskit_exposure_gini(i.recs, len(i.catalog_ids), K),
        "pandas",
        vs="fm-exposure-gini",
        tags=FAIRNESS | frozenset({"lenskit"}),
        python_env=LENSKIT_PYTHON,
    ),
    Job(
        "diversity-stages",
        FM,
        "diversity plan, stage by stage (untimed here: see its own table)",
        prepare_stages,
        "polars",
        timed=False,
    ),
    Job(
        "naive-check",
        "numpy",
        f"naive all-pairs personalization, {NAIVE_USERS:,} users (untimed)",
        prepare_naive_check,
        "polars",
        timed=False,
    ),
)
BASELINE = "fm-all"
#: frame_metrics jobs whose values must equal the headline call's exactly.
SELF_CHECKS = [
    "fm-all-no-validate",
    "fm-all-pandas",
    "fm-corpus",
    "fm-popularity",
    "fm-diversity",
    "fm-rectools-set",
]
#: Issue 20: calibration and exposure parity each within 2x novelty's time at 1M users.
BIG = 1_000_000
TARGETS = [
    harness.Target(
        "miscalibration@10 / novelty@10", ("fm-miscalibration",), "fm-novelty", 2.0, applies=BIG
    ),
    harness.Target(
        "exposure_parity@10 / novelty@10", ("fm-exposure-parity",), "fm-novelty", 2.0, applies=BIG
    ),
    harness.Target(
        "LensKit ExposureGini / fm exposure_gini", ("lenskit-exposure-gini",), "fm-exposure-gini"
    ),
]
PEER_NAMES = {
    f"coverage@{K}": "CatalogCoverage(normalize=True)",
    f"novelty@{K}": "MeanInvUserFreq",
    f"arp@{K}": "AvgRecPopularity",
}
SUITE = harness.Suite(
    f"Beyond-accuracy benchmark at k={K}: frame_metrics vs RecTools.",
    Path(__file__).resolve(),
    JOBS,
    BASELINE,
    load,
    make_data,
    ("frame_metrics", "polars", "pandas", "numpy", "rectools"),
)


def plan(args: argparse.Namespace) -> list[Stage]:
    """The jobs at each size: ``--only`` narrows them; the baseline always runs."""
    wanted = harness.wanted_jobs(SUITE, args.only) or set(JOBS)
    stages = []
    for users in harness.parse_sizes(args.users):
        names = [
            n
            for n, job in JOBS.items()
            if n in wanted and ("small" not in job.tags or users <= args.small_max)
        ]
        if "rectools-ild" in names and 0 < args.ild_max < users:
            names.remove("rectools-ild")
        if "lenskit-exposure-gini" in names and 0 < args.lenskit_max < users:
            names.remove("lenskit-exposure-gini")
        params = {"users": users, "seed": args.seed}
        stages.append(
            Stage(
                users,
                Path(f"beyond-u{users}-s{args.seed}"),
                params,
                list(dict.fromkeys([BASELINE, *names])),
            )
        )
    return stages


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def rows_table(stages: Sequence[Stage]) -> list[list[str]]:
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
    return [head, *([f"{s.info[k]:,}" for k in keys] for s in stages if s.info)]


def checks_table(results: Sequence[Result]) -> list[list[str]]:
    """Correctness lines: each compares two values; the last column says whether they agree."""
    by_key = {(r.users, r.job): r for r in results if not r.error and r.side == harness.AFTER}
    rows = [harness.AGREEMENT_HEAD]

    def add(users: int, check: str, got: float, ref_name: str, ref: float, exact: bool) -> None:
        tolerance = 0.0 if exact else TOLERANCE
        rows.append(
            harness.agreement_row(
                users, check, got, ref_name, ref, tolerance=tolerance, relative=True
            )
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
            worst = max(cols, key=lambda c: abs(other.values[c] - base.values[c]))
            add(
                users,
                f"fm {JOBS[name].label}: its {len(cols)} values (n_users included); shown: "
                f"the largest |diff|, {worst}",
                other.values[worst],
                f"fm {JOBS[BASELINE].label}",
                base.values[worst],
                exact=True,
            )
        peer = by_key.get((users, "rectools-popularity"))
        for col, value in peer.values.items() if peer else ():
            if col in PEER_NAMES and col in base.values:
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
            v = stages.values
            add(
                users,
                "diversity of the rebuilt plan (stage table)",
                v["replica_diversity"],
                f"fm diversity@{K}",
                v[f"diversity@{K}"],
                exact=False,
            )
        lenskit, ours = (
            by_key.get((users, "lenskit-exposure-gini")),
            by_key.get((users, "fm-exposure-gini")),
        )
        if lenskit is not None and ours is not None:
            # LensKit adds its exposures in float32: equal to about 1e-6, not to the bit.
            rows.append(
                harness.agreement_row(
                    users,
                    "LensKit ExposureGini (float32 sums)",
                    lenskit.values[f"ExposureGini@{K}"],
                    f"fm {LENSKIT_GINI}@{K}",
                    ours.values[f"{LENSKIT_GINI}@{K}"],
                    tolerance=LENSKIT_TOLERANCE,
                    relative=True,
                )
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


def values_table(results: Sequence[Result]) -> list[list[str]]:
    """The headline values (and RecTools' Hamming ILD, not comparable) per size."""
    rows = [["users", "n_users", *(f"{m}@{K}" for m in ALL_METRICS), f"RecTools ILD Hamming@{K}"]]
    by_key = {(r.users, r.job): r for r in results if not r.error and r.side == harness.AFTER}
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


def stages_table(results: Sequence[Result]) -> list[list[str]]:
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
        if r.job != "diversity-stages" or r.error:
            continue
        v = r.values
        for name in (key[2:] for key in v if key.startswith("s:")):
            base = peers.STAGE_BASE.get(name)
            step = v[f"s:{name}"] - v[f"s:{base}"] if base else math.nan
            cpu_step = v[f"cpu:{name}"] - v[f"cpu:{base}"] if base else math.nan
            rows.append(
                [
                    f"{r.users:,}",
                    name,
                    fmt_s(v[f"s:{name}"]),
                    "" if math.isnan(step) else f"{step:+.3f}",
                    fmt_s(v[f"cpu:{name}"]),
                    "" if math.isnan(cpu_step) else f"{cpu_step:+.3f}",
                    f"{v[f'peak:{name}']:,.0f}",
                ]
            )
    return rows


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The inputs, stages, values and checks tables; the mismatches."""
    print("\nInputs")
    print(harness.render(rows_table(stages), args.markdown))
    breakdown = stages_table(results)
    if len(breakdown) > 1:
        print(
            "\nThe pairwise (self-join) diversity plan, stage by stage, and frame_metrics' own "
            f"(polars, Jaccard; median of up to {STAGE_REPEATS} runs per stage in one process, "
            f"fewer past {STAGE_BUDGET:.0f}s; peak RSS so far = the job's VmHWM after the stage's runs)"
        )
        print(harness.render(breakdown, args.markdown))
    print("\nValues (frame_metrics, all seven in one call)")
    print(harness.render(values_table(results), args.markdown))
    checks = checks_table(results)
    print(
        "\nChecks (frame_metrics against itself: exact; against peers and naive: "
        f"|diff| <= {TOLERANCE:g} x max(1, |ref value|))"
    )
    print(harness.render(checks, args.markdown))
    print("\nTargets")
    print(harness.render(harness.targets_table(SUITE, results, TARGETS), args.markdown))
    return harness.mismatches(checks)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The harness's options and the beyond-accuracy suite's own."""
    p = harness.parser(SUITE, users="100000,1000000", repeats=3)
    p.add_argument(
        "--small-max",
        type=int,
        default=100_000,
        help="pandas input and cosine diversity only at sizes up to this many users",
    )
    p.add_argument(
        "--lenskit-max",
        type=int,
        default=100_000,
        help="LensKit's ExposureGini only at sizes up to this many users (0: every size; "
        "it builds one Python ItemList per user: about 35 s per 100k users)",
    )
    p.add_argument(
        "--ild-max",
        type=int,
        default=0,
        help="RecTools IntraListDiversity only at sizes up to this many users (0: every size; "
        "a run past --timeout is reported as failed)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Generate each size, run every job in fresh processes, print the tables; 1 on a mismatch."""
    return harness.main(SUITE, parse_args(argv), plan, report)


if __name__ == "__main__":
    sys.exit(main())
