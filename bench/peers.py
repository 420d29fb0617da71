"""The tools the suites time, as adapters: convert the start frames, run, read the values.

Each ``prepare_*`` imports its tool when the job is prepared (untimed, in the job's own
process) and returns a :class:`harness.Prepared` whose timed ``run`` converts the start
frames into the tool's own input format (renamed pandas frames, nested qrels/run dicts,
a LazyFrame), evaluates, and returns the tool's mean values under the tool's own names.
The suites' :class:`harness.Check` tables say which frame_metrics value each must equal.

frame_metrics is an adapter too (:func:`prepare_fm`), and so is the obvious hand-written
polars query (:func:`handwritten_per_user`), against which frame_metrics is held.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from harness import Prepared, Values

Engine = Literal["in-memory", "streaming"]

# --------------------------------------------------------------------------------------
# frame_metrics
# --------------------------------------------------------------------------------------


def set_default_engine(engine: str | None) -> dict[str, str]:
    """Set frame_metrics' default polars engine (None: leave it); return the one it had.

    ``frame_metrics.engine.DEFAULT_ENGINE`` is looked up when the job is prepared, so
    the job runs on any checkout that has it (``--against`` runs it on two), and fails
    with this message on one that does not.
    """
    try:
        module: Any = importlib.import_module("frame_metrics.engine")
    except ImportError:
        module = None
    if module is None or not hasattr(module, "DEFAULT_ENGINE"):
        if engine is None:
            return {"default_engine": "unknown (no frame_metrics.engine.DEFAULT_ENGINE)"}
        fm = importlib.import_module("frame_metrics")
        raise RuntimeError(
            f"engine {engine!r}: expected frame_metrics.engine.DEFAULT_ENGINE, "
            f"not found in the package at {fm.__file__}"
        )
    info = {"default_engine": str(module.DEFAULT_ENGINE)}
    if engine is not None:
        module.DEFAULT_ENGINE = engine
    return info


def fm_floats(out: Any, strip_k: int | None = None) -> Values:
    """Every column of the one aggregate row of a frame_metrics result, as floats.

    ``strip_k``: name ``metric@k`` just ``metric`` for this k (as the ranking suite's
    reference values are named); other cutoffs keep their ``@k``.
    """
    import polars as pl

    if isinstance(out, pl.LazyFrame):
        out = out.collect()
    row = (
        out.row(0, named=True)
        if isinstance(out, pl.DataFrame)
        else {str(k): v for k, v in out.iloc[0].to_dict().items()}
    )
    suffix = f"@{strip_k}" if strip_k is not None else None
    return {
        (name.removesuffix(suffix) if suffix else name): float(value)
        for name, value in row.items()
        if isinstance(value, int | float)
    }


def prepare_fm(
    frames: Sequence[Any],
    *,
    engine: Engine | None = None,
    collect: Engine | None = None,
    read: Callable[[Any], Values] = fm_floats,
    **call: Any,
) -> Prepared:
    """``fm.evaluate(*frames, aggregate=True, **call)`` from the start frames.

    ``engine``: set ``frame_metrics.engine.DEFAULT_ENGINE`` first (None: the package
    default); ``collect``: start from LazyFrames (``.lazy()`` of ``frames``, timed) and
    collect the lazy result with this polars engine; ``read``: the values of the result.
    """
    import polars as pl

    import frame_metrics as fm

    info = set_default_engine(engine)

    def run() -> Values:
        given = [f.lazy() for f in frames] if collect is not None else list(frames)
        out = fm.evaluate(*given, aggregate=True, **call)
        if isinstance(out, pl.LazyFrame):
            if collect is None:
                raise TypeError("expected an eager result from eager input")
            out = out.collect(engine=collect)
        return read(out)

    return Prepared(run, info=info)


# --------------------------------------------------------------------------------------
# The hand-written polars query
# --------------------------------------------------------------------------------------

RANKING = ["precision", "recall", "ap", "ndcg", "mrr"]


def as_polars(frame: Any) -> Any:
    """A polars frame as it is (eager or lazy); anything else through ``pl.from_pandas``.

    What a user of the hand-written query does with the frames ``pd.read_parquet``
    returns (numpy or pyarrow dtypes), so the conversion is part of the timed query.
    """
    import polars as pl

    if isinstance(frame, pl.DataFrame | pl.LazyFrame):
        return frame
    return pl.from_pandas(frame)


def top_from_score(recs: Any, k: int, keys: Sequence[str], score: str) -> Any:
    """Each list's best ``k`` rows by ``score`` with their rank 1..k, lazily.

    polars' own top-k primitive (``top_k_by``): score descending, equal scores by item
    ascending, as frame_metrics' ``score=`` with its default ``ties="item"``.
    ``top_k_by`` does not order what it returns, so the k kept rows are sorted (a sort
    of k rows per list, not of the whole list) before the ranks are numbered.
    """
    import polars as pl

    order = [pl.col(score), pl.col("item")]
    item = pl.col("item").top_k_by(order, k, reverse=[False, True])
    kept = pl.col(score).top_k_by(order, k, reverse=[False, True])
    return (
        recs.lazy()
        .group_by(*keys)
        .agg(item.sort_by([kept, item], descending=[True, False]))
        .with_columns(pl.int_ranges(1, pl.col("item").list.len() + 1).alias("rank"))
        .explode("item", "rank")
    )


def handwritten_per_user(
    recs: Any,
    truth: Any,
    k: int | Sequence[int],
    *,
    by: Sequence[str] = (),
    score: str | None = None,
) -> Any:
    """The obvious hand-written polars query: one row per list with truth, lazily.

    Hits only (the top rows inner-joined with the relevant truth), one group-by per
    side (the hits per list, the truth per user), the metrics per list from the two.
    Linear gain, relevant = relevance > 0, AP divided by min(|R|, k), as frame_metrics'
    defaults; users with relevant truth but no hit in the top k score 0.

    Parameters
    ----------
    recs
        Recommendations (``user``, ``item``, and ``rank`` unless ``score`` is given),
        eager or lazy.
    truth
        ``user``, ``item``, ``relevance``.
    k
        One cutoff (metric columns named ``precision``, ...) or several computed in one
        query (named ``precision@k``, ...): the rows within the largest are kept, and
        each smaller cutoff is a filter inside the aggregations.
    by
        Columns of ``recs`` whose every value is a model evaluated on the whole truth:
        each user with truth gets a row per model (0 without hits), as ``by=`` does.
    score
        Rank by this column (:func:`top_from_score`) instead of the ``rank`` column.
    """
    import polars as pl

    ks = [k] if isinstance(k, int) else list(k)
    deepest = max(ks)
    keys = [*by, "user"]
    if score is None:
        top = recs.lazy().filter(pl.col("rank") <= deepest)
    else:
        top = top_from_score(recs, deepest, keys, score)
    relevant = truth.lazy().filter(pl.col("relevance") > 0)

    def within(expr: pl.Expr, cut: int, rank: pl.Expr | None = None) -> pl.Expr:
        # Every kept row is within the largest cutoff: a filter only below it.
        return (
            expr
            if cut == deepest
            else expr.filter((pl.col("rank") if rank is None else rank) <= cut)
        )

    def name(metric: str, cut: int) -> str:
        return metric if isinstance(k, int) else f"{metric}@{cut}"

    ranks = pl.col("rank").sort()
    gains = pl.col("relevance") / (pl.col("rank") + 1).log(2)
    precisions = pl.int_range(1, pl.len() + 1) / ranks
    hits = (
        top.join(relevant, on=["user", "item"], how="inner")
        .group_by(keys)
        .agg(
            expr.alias(name(stat, cut))
            for cut in ks
            for stat, expr in (
                ("hits", pl.len() if cut == deepest else (pl.col("rank") <= cut).sum()),
                ("dcg", within(gains, cut).sum()),
                ("ap_sum", within(precisions, cut, ranks).sum()),
                ("first_hit", within(pl.col("rank"), cut).min()),
            )
        )
    )
    ideal_gains = pl.col("relevance").sort(descending=True) / pl.int_range(2, pl.len() + 2).log(2)
    ideal = relevant.group_by("user").agg(
        pl.len().alias("n_relevant"),
        *(ideal_gains.head(cut).sum().alias(name("idcg", cut)) for cut in ks),
    )
    if by:
        # Every model is judged on every user with truth, hits or not.
        ideal = ideal.join(recs.lazy().select(*by).unique(), how="cross")
    counts = [name(stat, cut) for cut in ks for stat in ("hits", "dcg", "ap_sum")]
    return (
        ideal.join(hits, on=keys, how="left")
        .with_columns(pl.col(counts).fill_null(0))
        .select(
            *keys,
            *(
                expr.alias(name(metric, cut))
                for cut in ks
                for metric, expr in (
                    ("precision", pl.col(name("hits", cut)) / cut),
                    ("recall", pl.col(name("hits", cut)) / pl.col("n_relevant")),
                    (
                        "ap",
                        pl.col(name("ap_sum", cut)) / pl.min_horizontal("n_relevant", pl.lit(cut)),
                    ),
                    ("ndcg", pl.col(name("dcg", cut)) / pl.col(name("idcg", cut))),
                    ("mrr", (1 / pl.col(name("first_hit", cut))).fill_null(0)),
                )
            ),
        )
    )


def handwritten_means(
    recs: Any,
    truth: Any,
    k: int | Sequence[int],
    *,
    by: Sequence[str] = (),
    score: str | None = None,
) -> Any:
    """The means of :func:`handwritten_per_user` and the number of users (lazily), one
    row per model with ``by``."""
    import polars as pl

    per_user = handwritten_per_user(recs, truth, k, by=by, score=score)
    metrics = pl.exclude(*by, "user").mean()
    if by:
        return per_user.group_by(*by).agg(pl.len().alias("n_users"), metrics)
    return per_user.select(pl.len().alias("n_users"), metrics)


def first_row(out: Any) -> Values:
    """The one row of a result of :func:`handwritten_means`, as floats."""
    return {name: float(v) for name, v in out.row(0, named=True).items()}


def prepare_handwritten(
    recs: Any,
    truth: Any,
    k: int | Sequence[int],
    collect: Engine | None = None,
    *,
    by: Sequence[str] = (),
    score: str | None = None,
    read: Callable[[Any], Values] = first_row,
) -> Prepared:
    """The hand-written query on the start frames (pandas ones converted with
    ``pl.from_pandas``, timed); ``collect``: the engine passed to ``collect()`` (None:
    polars' own default, in-memory); ``read``: the values of the collected means."""

    def run() -> Values:
        query = handwritten_means(as_polars(recs), as_polars(truth), k, by=by, score=score)
        out = query.collect() if collect is None else query.collect(engine=collect)
        return read(out)

    return Prepared(run)


# --------------------------------------------------------------------------------------
# The query an analyst would write in DuckDB SQL, over the same polars frames
# --------------------------------------------------------------------------------------


#: P, R, AP (over min(|R|, k)), NDCG (linear gain) and MRR @k per user, then their means:
#: the top rows joined with the relevant truth, a window numbering each list's hits and
#: one ranking each user's truth for the ideal DCG, a group-by per side, a left join.
#: The definitions of :func:`handwritten_per_user` (frame_metrics' defaults).
def duckdb_sql(ks: Sequence[int], *, score: str | None = None, by: Sequence[str] = ()) -> str:
    """The SQL an analyst would write in DuckDB for P, R, AP, NDCG and MRR at ``ks``.

    The package's definitions (AP over min(|R|, k), graded linear gain, users with a
    relevant item, each ``by`` group judged on every truth user): the top rows joined
    with the relevant truth, ``row_number()`` numbering each list's hits and ranking
    each user's truth for the ideal DCG, a group-by per side (one aggregate per cutoff,
    ``FILTER (WHERE rank <= k)``), a left join, the means. With ``score``: the rank is
    ``row_number() OVER (PARTITION BY user ORDER BY score DESC, item)``, kept to the
    largest cutoff (``QUALIFY``). One row per ``by`` group, columns ``metric@k``.
    """
    top_k = max(ks)
    g = "".join(f'"{c}", ' for c in by)
    tg = "".join(f't."{c}", ' for c in by)
    if score is None:
        top = f'SELECT {g}"user", item, "rank" FROM recs WHERE "rank" <= {top_k}'
    else:
        top = (
            f'SELECT {g}"user", item, row_number() OVER (PARTITION BY {g}"user" '
            f'ORDER BY "{score}" DESC, item) AS "rank" FROM recs QUALIFY "rank" <= {top_k}'
        )
    per_k = ",\n           ".join(
        f'count(*) FILTER (WHERE "rank" <= {k}) AS hits_{k}, '
        f'sum(relevance / log2("rank" + 1)) FILTER (WHERE "rank" <= {k}) AS dcg_{k}, '
        f'sum(hit_no / "rank") FILTER (WHERE "rank" <= {k}) AS ap_{k}'
        for k in ks
    )
    ideal_k = ", ".join(
        f"sum(CASE WHEN pos <= {k} THEN relevance / log2(pos + 1) ELSE 0 END) AS idcg_{k}"
        for k in ks
    )
    values = ",\n           ".join(
        f'coalesce(h.hits_{k}, 0) / {k} AS "precision@{k}", '
        f'coalesce(h.hits_{k}, 0) / i.n_relevant AS "recall@{k}", '
        f'coalesce(h.ap_{k}, 0) / least(i.n_relevant, {k}) AS "ap@{k}", '
        f'coalesce(h.dcg_{k}, 0) / i.idcg_{k} AS "ndcg@{k}", '
        f'CASE WHEN h.first_hit <= {k} THEN 1.0 / h.first_hit ELSE 0 END AS "mrr@{k}"'
        for k in ks
    )
    means = ", ".join(
        f'avg("{m}@{k}") AS "{m}@{k}"'
        for k in ks
        for m in ("precision", "recall", "ap", "ndcg", "mrr")
    )
    groups = f"CROSS JOIN (SELECT DISTINCT {g.rstrip(', ')} FROM recs) m " if by else ""
    on = "".join(f' AND h."{c}" = m."{c}"' for c in by)
    mg = "".join(f'm."{c}", ' for c in by)
    group_by = f" GROUP BY {g.rstrip(', ')} ORDER BY {g.rstrip(', ')}" if by else ""
    return f"""
WITH top AS ({top}),
rel AS (SELECT "user", item, relevance FROM truth WHERE relevance > 0),
hits AS (
    SELECT {tg}t."user", t."rank", r.relevance,
           row_number() OVER (PARTITION BY {tg}t."user" ORDER BY t."rank") AS hit_no
    FROM top t JOIN rel r ON t."user" = r."user" AND t.item = r.item
),
per_list AS (
    SELECT {g}"user", {per_k}, min("rank") AS first_hit
    FROM hits GROUP BY {g}"user"
),
ideal AS (
    SELECT "user", count(*) AS n_relevant, {ideal_k}
    FROM (SELECT "user", relevance,
                 row_number() OVER (PARTITION BY "user" ORDER BY relevance DESC) AS pos
          FROM rel)
    GROUP BY "user"
),
per_user AS (
    SELECT {mg}{values}
    FROM ideal i {groups}LEFT JOIN per_list h ON i."user" = h."user"{on}
)
SELECT {g}count(*) AS n_users, {means}
FROM per_user{group_by}
"""


#: The k=10 query of the rank column (the shape every tool is timed on).
DUCKDB_SQL = duckdb_sql([10])


def prepare_duckdb(
    recs: Any,
    truth: Any,
    k: int | Sequence[int],
    *,
    score: str | None = None,
    by: Sequence[str] = (),
    read: Callable[[Any], Values] | None = None,
) -> Prepared:
    """:func:`duckdb_sql` over the start frames (polars, read by DuckDB through Arrow:
    what ``duckdb.sql`` does with a polars frame in scope), the result as a polars
    frame; ``read``: its values (default: the one row as floats, ``metric@k`` named
    ``metric`` for an int ``k``)."""
    import duckdb
    import polars as pl

    ks = [k] if isinstance(k, int) else list(k)
    sql = duckdb_sql(ks, score=score, by=by)

    def first(out: Any) -> Values:
        row = first_row(out)
        return {n.removesuffix(f"@{k}"): v for n, v in row.items()} if isinstance(k, int) else row

    def run() -> Values:
        connection = duckdb.connect()
        connection.register("recs", recs)
        connection.register("truth", truth)
        result = connection.execute(sql)
        # DuckDB 2 names it to_arrow_table, 1.x fetch_arrow_table.
        name = "to_arrow_table" if hasattr(result, "to_arrow_table") else "fetch_arrow_table"
        out = pl.from_arrow(getattr(result, name)())
        connection.close()
        return (read or first)(out)

    return Prepared(run)


# --------------------------------------------------------------------------------------
# pytrec_eval and ranx: nested dicts
# --------------------------------------------------------------------------------------


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
    recs: Any, truth: Any, cut: int | None
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Nested qrels (graded relevance) and run (score) dicts from pandas start frames.

    The run's score is ``-rank``: trec_eval orders by score, breaking ties by document
    id. With the generator's squashed scores its means differed from every other tool
    by 4e-8 to 5e-7 at 1M users (11 users' top-11 scores tie in single precision); with
    ``-rank`` they agree to 5e-13, and the dicts cost the same to build.
    """
    if cut is not None:
        recs = recs[recs["rank"].to_numpy() <= cut]
    qrels = nested_dict(
        truth["user"].to_numpy(), truth["item"].to_numpy(), truth["relevance"].to_numpy()
    )
    rank = recs["rank"].to_numpy()
    run = nested_dict(recs["user"].to_numpy(), recs["item"].to_numpy(), -rank.astype(np.float64))
    return qrels, run


def pytrec_measures(k: int) -> set[str]:
    """The trec_eval measures of P, R, AP, NDCG at ``k`` and MRR (no cutoff)."""
    return {f"P_{k}", f"recall_{k}", f"map_cut_{k}", f"ndcg_cut_{k}", "recip_rank"}


def prepare_pytrec_eval(recs: Any, truth: Any, k: int, cut: int | None) -> Prepared:
    """pytrec_eval: build qrels/run dicts (the run cut to rank <= ``cut``), evaluate,
    average over queries."""
    import pytrec_eval

    measures = pytrec_measures(k)

    def run() -> Values:
        qrels, trec_run = qrels_and_run(recs, truth, cut)
        per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)
        means = {m: float(np.mean([q[m] for q in per_query.values()])) for m in sorted(measures)}
        means["n_users"] = float(len(per_query))
        return means

    return Prepared(run)


def prepare_ranx(recs: Any, truth: Any, k: int) -> Prepared:
    """ranx: Qrels/Run from nested dicts (its from_df rejects pandas 3 string columns)."""
    from ranx import Qrels, Run, evaluate

    metrics = [f"precision@{k}", f"recall@{k}", f"map@{k}", f"ndcg@{k}", f"mrr@{k}"]

    def run() -> Values:
        qrels, trec_run = qrels_and_run(recs, truth, None)
        result = evaluate(Qrels(qrels), Run(trec_run), metrics, make_comparable=False)
        return {name: float(v) for name, v in result.items()}

    return Prepared(run)


# --------------------------------------------------------------------------------------
# RecTools
# --------------------------------------------------------------------------------------


def _rectools_frame(frame: Any, *columns: str) -> Any:
    """``frame`` renamed to RecTools' ``Columns`` (user, item, rank), those columns only."""
    from rectools import Columns

    names = {"user": Columns.User, "item": Columns.Item, "rank": Columns.Rank}
    return frame.rename(columns=names)[[names[c] for c in columns]]


def prepare_rectools_ranking(recs: Any, truth: Any, k: int) -> Prepared:
    """RecTools ``calc_metrics`` of P, R, MAP, NDCG (binary gain) and MRR; extras: its
    default NDCG and MAP(divide_by_k=True)."""
    from rectools.metrics import MAP, MRR, NDCG, Precision, Recall, calc_metrics

    def frames() -> tuple[Any, Any]:
        return _rectools_frame(recs, "user", "item", "rank"), _rectools_frame(truth, "user", "item")

    def run() -> Values:
        reco, inter = frames()
        metrics = {
            "Precision": Precision(k=k),
            "Recall": Recall(k=k),
            "MAP": MAP(k=k),
            "NDCG(divide_by_achievable=True)": NDCG(k=k, divide_by_achievable=True),
            "MRR": MRR(k=k),
        }
        return {name: float(v) for name, v in calc_metrics(metrics, reco, inter).items()}

    def extras() -> Values:
        reco, inter = frames()
        metrics = {"NDCG (default)": NDCG(k=k), "MAP(divide_by_k=True)": MAP(k=k, divide_by_k=True)}
        return {name: float(v) for name, v in calc_metrics(metrics, reco, inter).items()}

    return Prepared(run, extras)


def prepare_rectools_popularity(recs: Any, train: Any, catalog: np.ndarray, k: int) -> Prepared:
    """RecTools CatalogCoverage(normalize=True), MeanInvUserFreq, AvgRecPopularity, named
    by the frame_metrics metric each computes."""
    from rectools.metrics import AvgRecPopularity, CatalogCoverage, MeanInvUserFreq

    def run() -> Values:
        reco = _rectools_frame(recs, "user", "item", "rank")
        prev = _rectools_frame(train, "user", "item")
        return {
            f"coverage@{k}": float(CatalogCoverage(k=k, normalize=True).calc(reco, catalog)),
            f"novelty@{k}": float(MeanInvUserFreq(k=k).calc(reco, prev)),
            f"arp@{k}": float(AvgRecPopularity(k=k).calc(reco, prev)),
        }

    return Prepared(run)


def prepare_rectools_ild(recs: Any, features: Any, k: int) -> Prepared:
    """RecTools IntraListDiversity, Hamming distance over one-hot genre columns (uint8).

    The one-hot frame (items x genres) is built inside the timed run from the same
    genre lists frame_metrics gets (a ``features`` list column).
    """
    import pandas as pd
    from rectools.metrics import IntraListDiversity, PairwiseHammingDistanceCalculator

    def run() -> Values:
        reco = _rectools_frame(recs, "user", "item", "rank")
        genres = features.explode("features")
        onehot = pd.crosstab(genres["item"], genres["features"]).astype(np.uint8)
        ild = IntraListDiversity(k=k, distance_calculator=PairwiseHammingDistanceCalculator(onehot))
        return {f"ild_hamming@{k}": float(ild.calc(reco))}

    return Prepared(run)


# --------------------------------------------------------------------------------------
# LensKit
# --------------------------------------------------------------------------------------

#: LensKit's GeometricRankWeight default patience: ExposureGini's weights p^(r-1).
LENSKIT_PATIENCE = 0.85


def prepare_lenskit_exposure_gini(recs: Any, n_items: int, k: int) -> Prepared:
    """LensKit's ExposureGini with its defaults (geometric weights, patience 0.85).

    Timed: the recommendations frame turned into LensKit's ``ItemListCollection`` (one
    list per user, as LensKit's own pipelines hold them) and ``RunAnalysis.measure``.
    LensKit sums exposure in float32, so it agrees with ``exposure_gini(exposure=rbp,
    persistence=0.85)`` to about 1e-6, not to the last bit. Its pins (torch, pandas < 3)
    conflict with the package's: the job runs in its own environment (``python_env``).
    """
    from lenskit.data import ItemListCollection
    from lenskit.metrics import ExposureGini, RunAnalysis

    def run() -> Values:
        frame = recs.rename(columns={"user": "user_id", "item": "item_id"})
        lists = ItemListCollection.from_df(frame, ["user_id"])
        analysis = RunAnalysis()
        analysis.add_metric(ExposureGini(n=k, items=n_items))
        result = analysis.measure(lists, lists)
        return {f"ExposureGini@{k}": float(result.global_metrics()[f"ExposureGini@{k}"])}

    return Prepared(run)


# --------------------------------------------------------------------------------------
# Recommenders
# --------------------------------------------------------------------------------------


def prepare_recommenders(recs: Any, truth: Any, k: int) -> Prepared:
    """Recommenders python_evaluation on pandas frames (it ranks by the score column).

    Its ``lru_cache_df`` would serve a second call on equal frames from its cache; each
    process times only its first call, so none is served from it.
    """
    from recommenders.evaluation import python_evaluation as pe

    cols = {"col_user": "user", "col_item": "item", "col_prediction": "score", "k": k}
    # Its own "rank" column clashes with ours in ndcg_at_k's merges: drop ours.
    pred = recs[["user", "item", "score"]]

    def run() -> Values:
        return {
            "precision_at_k": float(pe.precision_at_k(truth, pred, **cols)),
            "recall_at_k": float(pe.recall_at_k(truth, pred, **cols)),
            "map_at_k": float(pe.map_at_k(truth, pred, **cols)),
            "ndcg_at_k(score_type='raw')": float(
                pe.ndcg_at_k(truth, pred, col_rating="relevance", score_type="raw", **cols)
            ),
        }

    def extras() -> Values:
        return {
            "map": float(pe.map(truth, pred, **cols)),
            "ndcg_at_k (default)": float(pe.ndcg_at_k(truth, pred, col_rating="relevance", **cols)),
        }

    return Prepared(run, extras)


def prepare_recommenders_spark(spark: Any, recs: str, truth: str, k: int) -> Prepared:
    """Recommenders' SparkRankingEvaluation on parquet files read by ``spark`` (timed).

    It is given the recommendations already cut to the top ``k`` (it ranks by score
    itself; on the whole lists it only does more work). Its conventions: binary
    relevance, MAP over the relevant items.
    """
    from recommenders.evaluation.spark_evaluation import SparkRankingEvaluation

    def run() -> Values:
        pred = spark.read.parquet(recs).select("user", "item", "score").where(f"rank <= {k}")
        true = spark.read.parquet(truth).withColumnRenamed("relevance", "rating")
        ev = SparkRankingEvaluation(
            true,
            pred,
            k=k,
            col_user="user",
            col_item="item",
            col_rating="rating",
            col_prediction="score",
            relevancy_method="top_k",
        )
        return {
            f"precision@{k}": float(ev.precision_at_k()),
            f"recall@{k}": float(ev.recall_at_k()),
            f"ndcg@{k} (binary)": float(ev.ndcg_at_k()),
            f"map@{k} (recommenders)": float(ev.map_at_k()),
        }

    return Prepared(run)


# --------------------------------------------------------------------------------------
# numpy and scipy references
# --------------------------------------------------------------------------------------


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


def prepare_scipy_compare(
    per_user: Any, models: Sequence[str], resamples: int, share: float
) -> Prepared:
    """``scipy.stats`` for ``fm.compare``'s work: what a user would write without it.

    Per model and metric a percentile ``bootstrap`` of the mean, per difference a paired
    one, ``ttest_rel`` and ``wilcoxon``; timed on ``share`` of the metric columns and
    scaled up to all of them (``inner["scaled_from"]`` says which share).
    """
    import polars as pl
    from scipy import stats  # type: ignore[import-untyped]

    columns = [c for c in per_user.columns if c not in ("model", "user")]
    timed = columns[: max(1, round(len(columns) * share))]
    values = {m: per_user.filter(pl.col("model") == m) for m in models}
    batch = max(1, 20_000_000 // values[models[0]].height)
    prepared = Prepared(None, inner={"scaled_from": len(timed) / len(columns)})

    def run() -> Values:
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for column in timed:
            base = values[models[0]][column].to_numpy()
            for m in models:
                x = values[m][column].to_numpy()
                opts: dict[str, Any] = {"n_resamples": resamples, "method": "percentile"}
                stats.bootstrap((x,), np.mean, random_state=rng, batch=batch, **opts)
                if m == models[0]:
                    continue
                stats.bootstrap(
                    (x, base),
                    lambda u, v, axis=-1: np.mean(u - v, axis=axis),
                    paired=True,
                    random_state=rng,
                    batch=batch,
                    **opts,
                )
                stats.ttest_rel(x, base)
                stats.wilcoxon(x, base, method="approx")
        # The untimed share of the columns would take as long per column.
        return {"seconds_all": (time.perf_counter() - start) * len(columns) / len(timed)}

    prepared.run = run
    return prepared


# --------------------------------------------------------------------------------------
# The hand-written pairwise (self-join) diversity plan, stage by stage
# --------------------------------------------------------------------------------------

STAGE_ROWS = "top-k rows x features (join on item)"
STAGE_PAIRS = "+ self-join on user, rank < rank_b: the pairs"
STAGE_JACCARD = "+ Jaccard per pair (list.set_intersection)"
STAGE_NO_SORT = "+ group_by user, 1 - mean(sim): a plain (order-dependent) sum"
STAGE_REPLICA = "+ group_by user, instead sort + cum_sum per user (order-independent sum)"
#: The stage each stage's increment is measured from.
STAGE_BASE = {
    STAGE_PAIRS: STAGE_ROWS,
    STAGE_JACCARD: STAGE_PAIRS,
    STAGE_REPLICA: STAGE_JACCARD,
    STAGE_NO_SORT: STAGE_JACCARD,
}


def diversity_stages(recs: Any, features: Any, k: int) -> dict[str, Any]:
    """The pairwise (self-join) Jaccard diversity plan in growing prefixes (LazyFrames).

    The textbook plan, written with public polars operations only (independent of how
    frame_metrics computes diversity): the top-k rows joined with their features, the
    self-join of each user's rows into pairs (rank < rank_b), Jaccard per pair, and the
    per-user mean, first as a plain mean, then as a sorted ``cum_sum`` (a float sum that
    does not depend on the order rows arrive in, as frame_metrics guarantees). Each
    prefix ends in a one-row aggregate that reads its newest columns, so its work is
    done but its output is not materialised; the last one's ``d`` is the diversity.
    """
    import polars as pl

    top = recs.lazy().filter(pl.col("rank") <= k).select("user", "item", "rank")
    rows = top.join(features.lazy().select("item", pl.col("features").list.unique()), on="item")
    pairs = rows.join(rows, on="user", suffix="_b").filter(pl.col("rank") < pl.col("rank_b"))
    a, b = pl.col("features"), pl.col("features_b")
    shared = a.list.set_intersection(b).list.len().cast(pl.Float64)
    union = a.list.len().cast(pl.Float64) + b.list.len().cast(pl.Float64) - shared
    sim = pl.when(union > 0).then(shared / union).otherwise(0.0)
    scored = pairs.select("user", sim.alias("sim"))
    plain = scored.group_by("user").agg((1.0 - pl.col("sim").mean()).alias("d"))
    ordered = pl.col("sim").sort().cum_sum().last() / pl.len()
    per_user = scored.group_by("user").agg((1.0 - ordered).alias("d"))
    # The plain variant runs before the ordered one, so that the peak RSS so far
    # (monotonic) shows which of the two raises it.
    return {
        STAGE_ROWS: rows.select(pl.len(), a.list.len().sum()),
        STAGE_PAIRS: pairs.select(pl.len(), a.list.len().sum() + b.list.len().sum()),
        STAGE_JACCARD: pairs.select(pl.len(), sim.sum()),
        STAGE_NO_SORT: plain.select(pl.len(), pl.col("d").mean()),
        STAGE_REPLICA: per_user.select(pl.len(), pl.col("d").mean()),
    }
