"""A fixed matrix of calls whose results must not change when the code is restructured.

Every registry metric under a dozen option sets (presets, gains, thresholds, tie rules,
``users=``, ``empty=``, ``by=``, a composite user key, score ties), on polars eager,
polars lazy (both engines) and pandas, in one pass and in buckets, per user and
aggregated; the same on Dask and Spark; and the exact error class and message of every
row of ``tests/test_errors.py``. Values are stored as ``float.hex`` strings, so the
comparison is exact to the bit.

Record once, before a change that must not change behaviour, then check after it::

    python -m tests.result_matrix record            # writes tests/result_matrix.json
    python -m tests.result_matrix check             # exit 1 and the differences, if any
    python -m tests.result_matrix check --local     # without Dask and Spark

``tests/test_result_matrix.py`` runs the local check in the test suite. The plans of a
few lazy calls (``LazyFrame.explain()``) are recorded too; ``check`` reports a changed
plan but does not fail on it (a plan may change for the better: say why).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

import frame_metrics as fm

PATH = Path(__file__).with_name("result_matrix.json")

#: The ranking metrics every option set computes (each at k = 1, 3 and 10 unless it takes
#: no cutoff); the beyond-accuracy and rating metrics have cases of their own.
RANKING = [
    "precision",
    "recall",
    "f1",
    "hit_rate",
    "mrr",
    "ap",
    "dcg",
    "ndcg",
    "err",
    "judged",
    "r_precision",
    "bpref",
    "rbp",
]
#: Those with a tie-averaged value (the rest refuse ties="average").
TIE_AVERAGED = ["precision", "recall", "f1", "hit_rate", "dcg", "ndcg"]
BEYOND = ["novelty", "arp", "aplt", "diversity", "serendipity"]
CORPUS = ["coverage", "personalization", "gini"]
RATING = ["mse", "rmse", "mae"]
KS = [1, 3, 10]


def frames() -> dict[str, pl.DataFrame]:
    """The inputs: two models on synthetic data, score ties, a session key, side frames."""
    recs, truth = fm.datasets.synthetic(n_users=60, n_items=80, n_recs=12, seed=7)
    # Scores with ties: equal scores every third rank, so every tie rule matters.
    scored = recs.with_columns(score=((100 - pl.col("rank")) // 3).cast(pl.Float64))
    session = (pl.col("user") % 2).alias("session")
    # Relevance 0 rows (judged non-relevant) for bpref, judged and threshold=0.
    zeros = (
        recs.filter(pl.col("model") == "popularity", pl.col("rank").is_in([2, 5]))
        .select("user", "item", pl.lit(0, pl.Int64).alias("relevance"))
        .join(truth, on=["user", "item"], how="anti")
    )
    graded = pl.concat([truth, zeros]).sort("user", "item")
    items = pl.DataFrame({"item": range(80)})
    return {
        "recs": recs,
        "scored": scored,
        "truth": graded,
        "recs_session": recs.with_columns(session),
        "truth_session": graded.with_columns(session),
        "personal": recs.filter(pl.col("model") == "personal").drop("model"),
        "popular": recs.filter(pl.col("model") == "popularity").drop("model"),
        "train": truth.select("user", "item").filter(pl.col("user") % 3 != 0),
        "genres": items.with_columns(
            features=pl.concat_list(
                (pl.col("item") % 7).cast(pl.String), (pl.col("item") % 5 + 10).cast(pl.String)
            )
        ),
        "vectors": items.with_columns(
            features=pl.concat_list(
                (pl.col("item") % 3 + 1).cast(pl.Float64), (pl.col("item") % 4 - 1).cast(pl.Float64)
            )
        ),
        "catalog": items,
        "predictions": truth.with_columns(
            prediction=pl.col("relevance").cast(pl.Float64) * 0.8 + (pl.col("item") % 3) * 0.25
        ).drop("relevance"),
    }


#: (case id, recs frame, truth frame or None, keyword arguments). Frames by name.
Case = tuple[str, str, str | None, dict[str, Any]]

CASES: list[Case] = [
    ("defaults", "recs", "truth", {"metrics": RANKING, "k": KS, "by": "model"}),
    ("one-model", "personal", "truth", {"metrics": RANKING, "k": KS}),
    ("trec_eval", "personal", "truth", {"metrics": RANKING, "k": KS, "convention": "trec_eval"}),
    (
        "rectools",
        "recs",
        "truth",
        {"metrics": RANKING, "k": KS, "convention": "rectools", "by": "model"},
    ),
    ("ranx", "personal", "truth", {"metrics": RANKING, "k": KS, "convention": "ranx"}),
    (
        "recommenders",
        "personal",
        "truth",
        {"metrics": RANKING, "k": KS, "convention": "recommenders"},
    ),
    (
        "sklearn-scores",
        "scored",
        "truth",
        {
            "metrics": TIE_AVERAGED,
            "k": KS,
            "convention": "sklearn",
            "score": "score",
            "by": "model",
        },
    ),
    (
        "exponential-threshold",
        "personal",
        "truth",
        {"metrics": RANKING, "k": KS, "gain": "exponential", "threshold": 2},
    ),
    (
        "gain-table",
        "personal",
        "truth",
        {"metrics": RANKING, "k": KS, "gain": {1: 3.0, 2: 9.0, 4: 4.5}},
    ),
    (
        "ties-average",
        "scored",
        "truth",
        {"metrics": TIE_AVERAGED, "k": KS, "score": "score", "ties": "average", "by": "model"},
    ),
    (
        "ties-item-desc",
        "scored",
        "truth",
        {"metrics": RANKING, "k": KS, "score": "score", "ties": "item_desc", "by": "model"},
    ),
    (
        "users-empty",
        "personal",
        "truth",
        {
            "metrics": RANKING,
            "k": KS,
            "users": "all",
            "empty": "zero",
            "ap_denominator": "relevant",
            "mrr_cutoff": "none",
        },
    ),
    (
        "composite-key",
        "recs_session",
        "truth_session",
        {"metrics": RANKING, "k": KS, "user": ["user", "session"], "by": "model"},
    ),
    (
        "variants",
        "personal",
        "truth",
        {
            "metrics": [
                "ap(ap_denominator=relevant)@10",
                "ndcg(gain=binary)@3",
                "ndcg(convention=rectools)@10",
                "rbp(persistence=0.5)",
                "err(max_relevance=5)@10",
            ],
        },
    ),
    (
        "beyond",
        "recs",
        "truth",
        {
            "metrics": BEYOND,
            "k": [3, 10],
            "by": "model",
            "train": "train",
            "item_features": "genres",
            "catalog": "catalog",
            "baseline": "popular",
        },
    ),
    (
        "beyond-cosine-history",
        "personal",
        "truth",
        {
            "metrics": ["diversity", "serendipity", "novelty"],
            "k": [5],
            "train": "train",
            "item_features": "vectors",
            "unexpected": "history",
        },
    ),
    # Per user, an error (corpus metrics have one value per group): recorded as such.
    (
        "corpus",
        "recs",
        "truth",
        {"metrics": CORPUS, "k": [3, 10], "by": "model", "catalog": "catalog"},
    ),
    ("rating", "predictions", "truth", {"metrics": RATING}),
]

#: Cases whose lazy plan is recorded, and whether aggregated.
EXPLAINED = {
    "defaults": False,
    "trec_eval": False,
    "ties-average": False,
    "beyond": False,
    "corpus": True,
    "rating": True,
}
#: Cases run on Dask and Spark (each call there costs seconds).
DISTRIBUTED = [
    "defaults",
    "trec_eval",
    "ties-item-desc",
    "composite-key",
    "beyond",
    "corpus",
    "rating",
]


def _encode(frame: pl.DataFrame) -> dict[str, Any]:
    """A frame as columns, dtypes and rows, floats as ``float.hex`` (exact)."""
    rows = [
        [v.hex() if isinstance(v, float) else v for v in row]
        for row in frame.sort(frame.columns).rows()
    ]
    return {"columns": frame.columns, "dtypes": [str(d) for d in frame.dtypes], "rows": rows}


def _call(case: Case, data: dict[str, pl.DataFrame], **more: Any) -> dict[str, Any]:
    _, recs, truth, kwargs = case
    kwargs = {
        k: (data[v] if k in ("train", "item_features", "catalog", "baseline") else v)
        for k, v in kwargs.items()
    }
    return {"recs": data[recs], "truth": None if truth is None else data[truth], **kwargs, **more}


def _run(
    recs: Any, truth: Any, call: dict[str, Any], finish: Callable[[Any], Any] = lambda r: r
) -> dict[str, Any]:
    """``finish(fm.evaluate(recs, truth, **call))``, or the error it raised (class, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = finish(fm.evaluate(recs, truth, **call))
    except fm.FrameMetricsError as error:
        return {"error": type(error).__name__, "message": str(error)}
    if not isinstance(result, pl.DataFrame):
        result = pl.from_arrow(result) if hasattr(result, "schema") else pl.DataFrame(result)
    assert isinstance(result, pl.DataFrame)
    return _encode(result)


def _lazy(frame: pl.DataFrame | None) -> pl.LazyFrame | None:
    return None if frame is None else frame.lazy()


def _pandas(frame: pl.DataFrame | None) -> Any:
    return None if frame is None else frame.to_pandas()


def _local(case: Case, data: dict[str, pl.DataFrame]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One case on every local frame kind and path, per user and aggregated."""
    for aggregate in (False, True):
        call = _call(case, data, aggregate=aggregate)
        recs, truth = call.pop("recs"), call.pop("truth")
        name = "aggregate" if aggregate else "per-user"
        yield f"{name}/polars", _run(recs, truth, call)
        yield f"{name}/lazy", _run(_lazy(recs), _lazy(truth), call, pl.LazyFrame.collect)
        yield (
            f"{name}/lazy-streaming",
            _run(_lazy(recs), _lazy(truth), call, lambda r: r.collect(engine="streaming")),
        )
        yield f"{name}/pandas", _run(_pandas(recs), _pandas(truth), call)
        yield f"{name}/buckets", _run(recs, truth, {**call, "buckets": 3})


def _distributed(
    case: Case, data: dict[str, pl.DataFrame], spark: Any
) -> Iterator[tuple[str, dict[str, Any]]]:
    import dask.dataframe as dd

    from frame_metrics.distributed.spark import _arrow

    def to_dask(frame: pl.DataFrame | None) -> Any:
        return None if frame is None else dd.from_pandas(frame.to_pandas(), npartitions=3)  # type: ignore[no-untyped-call]

    def to_spark(frame: pl.DataFrame | None) -> Any:
        return None if frame is None else spark.createDataFrame(_arrow(frame)).repartition(3)

    for aggregate in (False, True):
        call = _call(case, data, aggregate=aggregate)
        recs, truth = call.pop("recs"), call.pop("truth")
        name = "aggregate" if aggregate else "per-user"
        yield f"{name}/dask", _run(to_dask(recs), to_dask(truth), call, lambda r: r.compute())
        yield f"{name}/spark", _run(to_spark(recs), to_spark(truth), call, lambda r: r.toArrow())


def _errors() -> dict[str, dict[str, Any]]:
    """The class and message of every row of tests/test_errors.py's CASES (polars)."""
    from tests.test_errors import CASES as ERRORS
    from tests.test_errors import RECS, TRUTH

    out = {}
    for case_id, change_recs, change_truth, kwargs, _, _ in ERRORS:
        out[case_id] = _run(change_recs(RECS), change_truth(TRUTH), kwargs)
    return out


def compute(*, local_only: bool) -> dict[str, Any]:
    """Every result of the matrix (Dask and Spark unless ``local_only``)."""
    data = frames()
    results: dict[str, Any] = {}
    for case in CASES:
        results[case[0]] = dict(_local(case, data))
    plans = {}
    for case in CASES:
        if case[0] in EXPLAINED:
            call = _call(case, data, aggregate=EXPLAINED[case[0]])
            recs, truth = call.pop("recs"), call.pop("truth")
            plan = fm.evaluate(recs.lazy(), _lazy(truth), **call).explain()
            # A cache's id is new in every plan: only where caches stand is compared.
            plans[case[0]] = re.sub(r"CACHE\[id: [0-9a-f-]+\]", "CACHE", plan)
    out: dict[str, Any] = {"results": results, "errors": _errors(), "plans": plans}
    if not local_only:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        for case in CASES:
            if case[0] in DISTRIBUTED:
                results[case[0]] |= dict(_distributed(case, data, spark))
        spark.stop()
    return out


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(value and error differences, plan differences) between two matrices."""
    diffs = []
    for case, paths in now["results"].items():
        for path, got in paths.items():
            want = recorded["results"].get(case, {}).get(path)
            if got != want:
                diffs.append(f"{case} {path}: recorded {want!r:.300}, now {got!r:.300}")
    for case, got in now["errors"].items():
        if got != recorded["errors"].get(case):
            diffs.append(f"error {case}: recorded {recorded['errors'].get(case)!r}, now {got!r}")
    plans = [
        f"plan {case} changed"
        for case, text in now["plans"].items()
        if recorded["plans"].get(case) != text
    ]
    return diffs, plans


def main(argv: list[str] | None = None) -> int:
    """``record`` or ``check`` the matrix."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["record", "check"])
    parser.add_argument("--local", action="store_true", help="leave out Dask and Spark")
    args = parser.parse_args(argv)
    now = compute(local_only=args.local)
    if args.command == "record":
        PATH.write_text(json.dumps(now, indent=0, sort_keys=True) + "\n")
        n = sum(len(paths) for paths in now["results"].values())
        print(f"recorded {n} results, {len(now['errors'])} errors, {len(now['plans'])} plans")
        return 0
    recorded = json.loads(PATH.read_text())
    diffs, plans = differences(recorded, now)
    for line in [*diffs, *plans]:
        print(line)
    n = sum(len(paths) for paths in now["results"].values())
    print(f"{n} results and {len(now['errors'])} errors compared: {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
