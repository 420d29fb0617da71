"""Cross-checks of frame_metrics against peer libraries, on seeded random data.

Each peer's convention was read from its installed source; the comment above each test
names the source function and the frame_metrics options that reproduce it. Where no
option reproduces a peer, a test states the difference with explicit arithmetic.

Peers: trec_eval (through ``pytrec_eval``), ``ranx``, scikit-learn's ``ndcg_score`` and
``dcg_score``, Microsoft Recommenders (``recommenders.evaluation.python_evaluation``) and
RecTools (``rectools.metrics``). Each test skips when its peer is not installed.

How every peer sees a ranked list: trec_eval, ranx, scikit-learn and Recommenders rank by
score and use the *position* in that order, not a rank value. So on the ``rank`` path a
gap in ranks is handed to them as a pad item with no judgement at the missing position
(ranks 1, 3 -> [item, pad, item]), which is exactly what a gap means in frame_metrics; on
the ``score`` path they get the raw scores (distinct within a user, so no tie rule
matters) and frame_metrics gets ``score=``. RecTools takes rank values as they are.

Tolerance: 1e-12 relative (1e-15 absolute, for zeros).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import to_polars

Constructor = Callable[[pl.DataFrame], Any]
UserValues = dict[int, float]

KS: tuple[int, ...] = (1, 3, 5, 10, 20)
#: A cutoff past every recommended rank, for peers whose measure has no cutoff.
NO_CUTOFF = 1000
RTOL = 1e-12
ATOL = 1e-15
PATHS = ("rank", "score")


# The `constructor` fixture (tests/conftest.py) runs every check on polars eager, polars
# lazy, pandas with numpy dtypes, pandas with pyarrow dtypes, pyarrow Tables and DuckDB
# relations.


# --- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """Recommendations ``user, item, rank, score`` and truth ``user, item, relevance``.

    Within a user, ``score`` orders items exactly as ``rank`` does and is distinct.
    """

    recs: pl.DataFrame
    truth: pl.DataFrame


def make_data(seed: int, *, n_users: int = 300, float_relevance: bool = False) -> Data:
    """Seeded random data with every case the spec names.

    About 75% of users have recommendations (1-15 items, about half of them from the
    truth) and truth (1-12 items, graded relevance 1-4 with ~20% zeros); the rest have
    truth but no recommendations, recommendations and only zero-relevance truth, or
    recommendations and no truth at all. Ranks have gaps (steps of 1, 2 or 3, so a list
    may also start at rank 2 or 3). User ids are sparse, rows are shuffled.
    """
    rng = np.random.default_rng(seed)
    n_items = 150
    rec_rows: list[tuple[int, int, int, float]] = []
    truth_rows: list[tuple[int, int, float]] = []
    kinds = ["full", "no_recs", "no_relevant", "no_truth"]
    for index in range(n_users):
        user = 7 * index + 3
        kind = kinds[int(rng.choice(4, p=[0.75, 0.10, 0.08, 0.07]))]
        truth_items = np.empty(0, dtype=np.int64)
        if kind != "no_truth":
            n_truth = int(rng.integers(1, 13))
            truth_items = rng.choice(n_items, size=n_truth, replace=False)
            if float_relevance:
                rels = np.round(rng.uniform(0.1, 4.0, n_truth), 3)
            else:
                rels = rng.integers(1, 5, n_truth).astype(np.float64)
            rels[rng.random(n_truth) < 0.2] = 0.0
            if kind == "no_relevant":
                rels[:] = 0.0
            truth_rows.extend(
                (user, int(i), float(r)) for i, r in zip(truth_items, rels, strict=True)
            )
        if kind != "no_recs":
            n_recs = int(rng.integers(1, 16))
            others = rng.choice(n_items, size=n_recs, replace=False)
            pool = np.union1d(truth_items, others)
            items = rng.choice(pool, size=min(n_recs, pool.size), replace=False)
            ranks = np.cumsum(rng.choice([1, 1, 1, 1, 2, 3], size=items.size))
            scores = np.sort(rng.uniform(0.0, 1.0, items.size))[::-1]
            assert np.unique(scores).size == scores.size
            rec_rows.extend(
                (user, int(i), int(r), float(s))
                for i, r, s in zip(items, ranks, scores, strict=True)
            )
    recs = pl.DataFrame(
        rec_rows,
        schema={"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64, "score": pl.Float64},
        orient="row",
    ).sample(fraction=1.0, shuffle=True, seed=seed)
    truth = pl.DataFrame(
        truth_rows,
        schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64},
        orient="row",
    ).sample(fraction=1.0, shuffle=True, seed=seed + 1)
    if not float_relevance:
        truth = truth.with_columns(pl.col("relevance").cast(pl.Int64))
    return Data(recs, truth)


@pytest.fixture(scope="module")
def data() -> Data:
    return make_data(20240611)


@pytest.fixture(scope="module")
def float_data() -> Data:
    return make_data(777, float_relevance=True)


@dataclass(frozen=True)
class Slot:
    """One position of a user's list as a position-based peer sees it."""

    position: int
    item: int | None  # None: a pad standing for a gap in ranks
    score: float


def ordered_lists(recs: pl.DataFrame, path: str) -> dict[int, list[Slot]]:
    """Each user's list in peer form: by rank with pads at gaps, or by score without."""
    lists: dict[int, list[Slot]] = {}
    if path == "rank":
        for (user,), group in recs.group_by(["user"]):
            by_rank = dict(zip(group["rank"].to_list(), group["item"].to_list(), strict=True))
            lists[int(user)] = [
                Slot(r, by_rank.get(r), -float(r)) for r in range(1, max(by_rank) + 1)
            ]
    else:
        for (user,), group in recs.sort("score", descending=True).group_by(
            ["user"], maintain_order=True
        ):
            lists[int(user)] = [
                Slot(p, int(i), float(s))
                for p, (i, s) in enumerate(
                    zip(group["item"].to_list(), group["score"].to_list(), strict=True), 1
                )
            ]
    return lists


def truth_map(truth: pl.DataFrame) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for user, item, rel in truth.iter_rows():
        out.setdefault(int(user), {})[int(item)] = float(rel)
    return out


def pad_id(slot: Slot) -> str:
    return str(slot.item) if slot.item is not None else f"pad{slot.position}"


# --- calling frame_metrics -------------------------------------------------------------------


def run_fm(constructor: Constructor, data: Data, path: str, **options: Any) -> pl.DataFrame:
    """``fm.evaluate`` on the given frame kind, the result checked for kind, as polars."""
    if path == "score":
        recs = constructor(data.recs.drop("rank"))
        options = {"score": "score", **options}
    else:
        recs = constructor(data.recs.drop("score"))
    out = fm.evaluate(recs, constructor(data.truth), **options)
    return as_polars(out, like=recs)


def as_polars(out: Any, *, like: Any) -> pl.DataFrame:
    assert type(out) is type(like), type(out)  # given back in the kind of recs
    return to_polars(out)


def per_user(result: pl.DataFrame, column: str) -> UserValues:
    return {
        int(u): float(v)
        for u, v in zip(result["user"].to_list(), result[column].to_list(), strict=True)
    }


def assert_values(got: Mapping[int, float], expected: Mapping[int, float], label: str) -> None:
    """Same users, values within RTOL; on failure, name the first mismatching users."""
    assert set(got) == set(expected), (
        f"{label}: users only in frame_metrics {sorted(set(got) - set(expected))[:10]}, "
        f"only in the peer {sorted(set(expected) - set(got))[:10]}"
    )
    bad = [
        (u, expected[u], got[u])
        for u in sorted(expected)
        if not math.isclose(got[u], expected[u], rel_tol=RTOL, abs_tol=ATOL)
    ]
    assert not bad, f"{label}: {len(bad)} users differ, (user, expected, got): {bad[:5]}"


def assert_mean(got: float, expected: float, label: str) -> None:
    assert math.isclose(got, expected, rel_tol=RTOL, abs_tol=ATOL), (
        f"{label}: expected {expected!r}, got {got!r}"
    )


@contextmanager
def quiet() -> Iterator[None]:
    """Silence the peers' own warnings (numba casts, RecTools rank checks, pandas)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def users_with_relevant(truth: pl.DataFrame, threshold: float | None) -> set[int]:
    rel = pl.col("relevance")
    mask = rel > 0 if threshold is None else rel >= threshold
    return set(truth.filter(mask)["user"].to_list())


def all_users(data: Data) -> set[int]:
    return set(data.recs["user"].to_list()) | set(data.truth["user"].to_list())


# --- trec_eval (pytrec_eval) -----------------------------------------------------------------
# Source: the trec_eval C code bundled in pytrec_eval-terrier 0.5.11 (RelevanceEvaluator).
# - Orders a query's documents by score descending, ties by docno *descending* (strcmp,
#   form_res_rels.c comp_sim_docno); measures use positions 1, 2, ... in that order.
# - P_k = relevant in top k / k (k even when fewer retrieved)       == precision@k
# - recall_k = relevant in top k / num_rel                          == recall@k
# - success_k = 1 if a relevant doc in top k                         == hit_rate@k
# - map_cut_k = Σ_{relevant at position r <= k} P@r / num_rel        == ap@k, ap_denominator="relevant"
# - ndcg_cut_k: gain = judged relevance (linear), discount 1/log2(position + 1), ideal from
#   all judged docs with rel > 0, best k                            == ndcg@k, gain="linear"
# - recip_rank has no cutoff                                         == mrr@k for k past every rank
# - relevance_level=t (default 1) makes rel >= t relevant for P, recall, success, map_cut,
#   recip_rank (== threshold=t); ndcg_cut ignores it (gains from every rel > 0).
# - Evaluates the queries in both qrels and run: a query with judgements only at 0 is
#   reported with zeros (== empty="zero"); a query with an empty run dict is reported with
#   zeros (== a user without recommendations); users without judgements are not reported.

_TREC_TO_FM = {
    "P": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "ap",
    "ndcg_cut": "ndcg",
}


def _trec_results(
    data: Data, path: str, measures: set[str], relevance_level: int = 1
) -> dict[int, dict[str, float]]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels: dict[str, dict[str, int]] = {
        str(u): {str(i): int(r) for i, r in items.items()}
        for u, items in truth_map(data.truth).items()
    }
    lists = ordered_lists(data.recs, path)
    run: dict[str, dict[str, float]] = {
        q: {pad_id(s): s.score for s in lists.get(int(q), [])} for q in qrels
    }
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=relevance_level)
    results = evaluator.evaluate(run)
    assert set(results) == set(qrels)
    return {int(q): values for q, values in results.items()}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("threshold", [None, 2])
def test_trec_eval(constructor: Constructor, data: Data, path: str, threshold: int | None) -> None:
    measures = {f"{m}_{k}" for m in _TREC_TO_FM for k in KS} | {"recip_rank"}
    assert data.recs["rank"].max() < NO_CUTOFF  # type: ignore[operator]
    trec = _trec_results(data, path, measures, relevance_level=threshold or 1)
    metrics = ["precision", "recall", "hit_rate", "ap", "ndcg", f"mrr@{NO_CUTOFF}"]
    options: dict[str, Any] = {"metrics": metrics, "k": list(KS), "ap_denominator": "relevant"}
    skip = run_fm(constructor, data, path, threshold=threshold, **options)
    zero = run_fm(constructor, data, path, threshold=threshold, empty="zero", **options)
    # ndcg_cut ignores relevance_level: compare it with frame_metrics' default threshold.
    ndcg_skip = run_fm(constructor, data, path, metrics="ndcg", k=list(KS))
    ndcg_zero = run_fm(constructor, data, path, metrics="ndcg", k=list(KS), empty="zero")

    judged = set(trec)
    relevant = users_with_relevant(data.truth, threshold)
    any_positive = users_with_relevant(data.truth, None)
    # Users in recs with no truth row are not reported by trec_eval; with empty="zero"
    # frame_metrics scores them 0, checked here directly.
    unjudged = all_users(data) - judged
    for name, fm_name in _TREC_TO_FM.items():
        for k in KS:
            column = f"{fm_name}@{k}"
            measure = f"{name}_{k}"
            s, z = (ndcg_skip, ndcg_zero) if name == "ndcg_cut" else (skip, zero)
            keep = any_positive if name == "ndcg_cut" else relevant
            expected = {u: trec[u][measure] for u in judged}
            assert_values(
                per_user(s, column),
                {u: v for u, v in expected.items() if u in keep},
                f"trec {measure} vs {column} (empty='skip')",
            )
            got_zero = per_user(z, column)
            assert all(got_zero[u] == 0.0 for u in unjudged), column
            assert_values(
                {u: v for u, v in got_zero.items() if u in judged},
                expected,
                f"trec {measure} vs {column} (empty='zero')",
            )
    expected_rr = {u: trec[u]["recip_rank"] for u in relevant}
    assert_values(per_user(skip, f"mrr@{NO_CUTOFF}"), expected_rr, "trec recip_rank vs mrr")


def test_trec_eval_ndcg_ignores_relevance_level(constructor: Constructor, data: Data) -> None:
    # trec_eval's ndcg_cut at relevance_level=2 still gains from rel-1 documents, so it is
    # NOT frame_metrics' ndcg with threshold=2 (which gives non-relevant items gain 0 in
    # both DCG and IDCG, like ranx's "-l2"); it is the default-threshold ndcg.
    trec = _trec_results(data, "rank", {"ndcg_cut_5"}, relevance_level=2)
    default = per_user(run_fm(constructor, data, "rank", metrics="ndcg", k=5), "ndcg@5")
    thresholded = per_user(
        run_fm(constructor, data, "rank", metrics="ndcg", k=5, threshold=2), "ndcg@5"
    )
    assert_values(default, {u: trec[u]["ndcg_cut_5"] for u in default}, "trec ndcg_cut_5 l=2")
    differs = [u for u in thresholded if not math.isclose(thresholded[u], trec[u]["ndcg_cut_5"])]
    assert differs, "expected rel-1 gains to make some users differ from threshold=2"


def test_trec_eval_breaks_ties_by_docno_descending(constructor: Constructor) -> None:
    # One user, items 1 and 2 both scored 0.5, item 1 relevant. trec_eval puts docno "2"
    # first (ties by docno descending): P_1 = 0, recip_rank = 1/2. frame_metrics with
    # score= breaks ties by item ascending: precision@1 = 1, mrr = 1. Ranking by
    # (score desc, item desc) by hand and passing rank= reproduces trec_eval.
    pytrec_eval = pytest.importorskip("pytrec_eval")
    evaluator = pytrec_eval.RelevanceEvaluator({"1": {"1": 1}}, {"P_1", "recip_rank"})
    trec = evaluator.evaluate({"1": {"1": 0.5, "2": 0.5}})["1"]
    assert (trec["P_1"], trec["recip_rank"]) == (0.0, 0.5)
    recs = pl.DataFrame({"user": [1, 1], "item": [1, 2], "score": [0.5, 0.5]})
    truth = pl.DataFrame({"user": [1], "item": [1], "relevance": [1]})
    by_score = as_polars(
        fm.evaluate(
            constructor(recs), constructor(truth), metrics=["precision", "mrr"], k=1, score="score"
        ),
        like=constructor(recs),
    )
    assert (by_score["precision@1"].item(), by_score["mrr@1"].item()) == (1.0, 1.0)
    trec_order = recs.with_columns(
        rank=pl.struct(pl.col("score"), pl.col("item")).rank("ordinal", descending=True)
    ).drop("score")
    by_trec_rank = as_polars(
        fm.evaluate(constructor(trec_order), constructor(truth), metrics=["precision", "mrr"], k=2),
        like=constructor(trec_order),
    )
    assert by_trec_rank["precision@2"].item() == 0.5
    assert by_trec_rank["mrr@2"].item() == trec["recip_rank"]


# --- ranx --------------------------------------------------------------------------------------
# Source: ranx 0.3.21, ranx/metrics/*.py (numba), ranx/meta/evaluate.py.
# - Run.to_typed_list sorts each query's docs by score descending with np.argsort (not
#   stable: tie order unspecified); metrics use positions.
# - "-lN" suffix: rel_lvl N (int, default 1); common.clean_qrels keeps judgements >= N,
#   everything below counts as unjudged (gain 0 in DCG and IDCG)        == threshold=N
# - precision@k = _hits / k (k even when fewer retrieved)                == precision@k
# - recall@k = _hits / |R|; f1@k 0 when P+R = 0; hit_rate@k             == recall, f1, hit_rate
# - mrr@k: reciprocal_rank.py documents k as ignored, but the code cuts at fix_k(k)
#                                                                        == mrr@k
# - map@k: Σ_{hit at position r <= k} hits@r / r / |R|                   == ap@k, ap_denominator="relevant"
# - dcg@k / ndcg@k: gain = rel (jarvelin=True), 1/log2(position + 1); IDCG = _dcg(qrels,
#   qrels) over the qrels sorted by relevance, best k                     == dcg@k / ndcg@k, gain="linear"
# - dcg_burges@k / ndcg_burges@k: gain 2^rel - 1                         == gain="exponential"
# - Every query of the qrels is scored; one with no judgement >= N scores 0 in every
#   metric (== empty="zero"); qrels and run must have the same query ids, so a user without
#   recommendations gets an empty run dict (scores 0), and a user without judgements
#   cannot be represented.

_RANX_TO_FM = {
    "precision": ("precision", "linear"),
    "recall": ("recall", "linear"),
    "f1": ("f1", "linear"),
    "hit_rate": ("hit_rate", "linear"),
    "mrr": ("mrr", "linear"),
    "map": ("ap", "linear"),
    "dcg": ("dcg", "linear"),
    "ndcg": ("ndcg", "linear"),
    "dcg_burges": ("dcg", "exponential"),
    "ndcg_burges": ("ndcg", "exponential"),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("threshold", [None, 2])
def test_ranx(constructor: Constructor, data: Data, path: str, threshold: int | None) -> None:
    ranx = pytest.importorskip("ranx")
    qrels_dict = {
        str(u): {str(i): int(r) for i, r in items.items()}
        for u, items in truth_map(data.truth).items()
    }
    lists = ordered_lists(data.recs, path)
    run_dict = {q: {pad_id(s): s.score for s in lists.get(int(q), [])} for q in qrels_dict}
    suffix = "" if threshold is None else f"-l{threshold}"
    names = [f"{m}@{k}{suffix}" for m in _RANX_TO_FM for k in KS]
    with quiet():
        run = ranx.Run.from_dict(run_dict)
        ranx.evaluate(ranx.Qrels.from_dict(qrels_dict), run, names, return_mean=False)
    scores = {name: {int(q): float(v) for q, v in run.scores[name].items()} for name in names}

    relevant = users_with_relevant(data.truth, threshold)
    unjudged = all_users(data) - {int(q) for q in qrels_dict}
    base = ["precision", "recall", "f1", "hit_rate", "mrr", "ap", "dcg", "ndcg"]
    for gain in ("linear", "exponential"):
        metrics = base if gain == "linear" else ["dcg", "ndcg"]
        options: dict[str, Any] = {
            "metrics": metrics,
            "k": list(KS),
            "gain": gain,
            "threshold": threshold,
            "ap_denominator": "relevant",
        }
        skip = run_fm(constructor, data, path, **options)
        zero = run_fm(constructor, data, path, empty="zero", **options)
        for ranx_name, (fm_name, fm_gain) in _RANX_TO_FM.items():
            if fm_gain != gain:
                continue
            for k in KS:
                expected = scores[f"{ranx_name}@{k}{suffix}"]
                column = f"{fm_name}@{k}"
                assert_values(
                    per_user(skip, column),
                    {u: v for u, v in expected.items() if u in relevant},
                    f"ranx {ranx_name}@{k}{suffix} vs {column} gain={gain} (skip)",
                )
                got_zero = per_user(zero, column)
                assert all(got_zero[u] == 0.0 for u in unjudged), column
                assert_values(
                    {u: v for u, v in got_zero.items() if u not in unjudged},
                    expected,
                    f"ranx {ranx_name}@{k}{suffix} vs {column} gain={gain} (zero)",
                )


# --- scikit-learn --------------------------------------------------------------------------------
# Source: sklearn/metrics/_ranking.py, ndcg_score / dcg_score -> _dcg_sample_scores,
# _tie_averaged_dcg, _ndcg_sample_scores.
# - One row per sample over a fixed set of labels; y_true is the gain as given (linear, no
#   threshold: any y_true > 0 gains), discount 1/log_base(position + 1), log_base=2.
# - IDCG: the same DCG of y_true ordered by itself, over every label of the row, best k.
# - ignore_ties=False (default): within a group of tied y_score the gains are averaged
#   over the group's positions (McSherry & Najork), i.e. the mean over the group's
#   orderings; ignore_ties=True uses np.argsort order (unspecified among ties).
# - A row whose y_true is all 0 gets ndcg 0 (== empty="zero"); ndcg_score/dcg_score
#   return the mean over rows, so each user is scored as a one-row call here.
# Row per user: the list positions (pads, relevance 0, at gaps), then max(KS) more pads so
# that nothing unrecommended enters the top k, then the unrecommended truth items.


def _sklearn_rows(data: Data, path: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    truth = truth_map(data.truth)
    lists = ordered_lists(data.recs, path)
    rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for user in all_users(data):
        rels = truth.get(user, {})
        slots = lists.get(user, [])
        listed = {s.item for s in slots if s.item is not None}
        y_true = [rels.get(s.item, 0.0) if s.item is not None else 0.0 for s in slots]
        y_score = [s.score for s in slots]
        floor = min(y_score, default=0.0)
        tail = [0.0] * max(KS) + [r for i, r in rels.items() if i not in listed]
        y_true += tail
        y_score += [floor - 1.0 - j for j in range(len(tail))]
        rows[user] = (np.array([y_true]), np.array([y_score]))
    return rows


@pytest.mark.parametrize("path", PATHS)
def test_sklearn_ndcg_dcg(constructor: Constructor, float_data: Data, path: str) -> None:
    # ndcg_score(k) == ndcg@k and dcg_score(k) == dcg@k with gain="linear", threshold=None.
    metrics = pytest.importorskip("sklearn.metrics")
    rows = _sklearn_rows(float_data, path)
    skip = run_fm(constructor, float_data, path, metrics=["dcg", "ndcg"], k=list(KS))
    zero = run_fm(constructor, float_data, path, metrics=["dcg", "ndcg"], k=list(KS), empty="zero")
    relevant = users_with_relevant(float_data.truth, None)
    for k in KS:
        for ignore_ties in (False, True):
            ndcg = {
                u: float(metrics.ndcg_score(t, s, k=k, ignore_ties=ignore_ties))
                for u, (t, s) in rows.items()
            }
            dcg = {
                u: float(metrics.dcg_score(t, s, k=k, ignore_ties=ignore_ties))
                for u, (t, s) in rows.items()
            }
            for name, expected in (("ndcg", ndcg), ("dcg", dcg)):
                column = f"{name}@{k}"
                label = f"sklearn {name}_score k={k} ignore_ties={ignore_ties} vs {column}"
                assert_values(per_user(zero, column), expected, label + " (zero)")
                assert_values(
                    per_user(skip, column),
                    {u: v for u, v in expected.items() if u in relevant},
                    label + " (skip)",
                )


def _orderings(groups: list[list[int]]) -> Iterator[list[int]]:
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [item for part in parts for item in part]


def test_sklearn_averages_tied_scores(constructor: Constructor) -> None:
    # Scores with ties: sklearn's default (ignore_ties=False) ndcg is the MEAN of
    # frame_metrics' ndcg over every ordering of the tied items (exact: DCG is linear in
    # the gain placed at each position). frame_metrics with score= takes ONE ordering,
    # ties by item ascending, so it differs from sklearn here.
    metrics = pytest.importorskip("sklearn.metrics")
    items = [10, 11, 12, 13, 14, 15]
    scores = [0.9, 0.7, 0.7, 0.7, 0.2, 0.2]
    rels = [0, 1, 3, 0, 2, 1]
    groups = [[10], [11, 12, 13], [14, 15]]
    truth = pl.DataFrame({"user": 1, "item": items, "relevance": rels})
    k = 3  # cuts the middle tie group
    values = []
    for order in _orderings(groups):
        recs = pl.DataFrame({"user": 1, "item": order, "rank": range(1, len(order) + 1)})
        out = as_polars(
            fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg", k=k),
            like=constructor(recs),
        )
        values.append(out["ndcg@3"].item())
    expected = float(metrics.ndcg_score(np.array([rels]), np.array([scores]), k=k))
    assert_mean(float(np.mean(values)), expected, "sklearn tie-averaged ndcg@3")
    recs = pl.DataFrame({"user": 1, "item": items, "score": scores})
    by_score = as_polars(
        fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg", k=k, score="score"),
        like=constructor(recs),
    )["ndcg@3"].item()
    # item ascending puts 11 (rel 1) at position 2 and 12 (rel 3) at position 3
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert_mean(by_score, (1 / math.log2(3) + 3 / math.log2(4)) / idcg, "fm score= ties")
    assert not math.isclose(by_score, expected)


# --- Recommenders (recommenders.evaluation.python_evaluation) -------------------------------------
# Source: recommenders 1.2.1, python_evaluation.py: merge_ranking_true_pred,
# get_top_k_items, precision_at_k, recall_at_k, map, map_at_k, ndcg_at_k.
# - Every row of rating_true is relevant (no relevance threshold): pass only the rows with
#   rel > 0 (or >= t) and frame_metrics gets the full truth with threshold=t.
# - get_top_k_items: sort by prediction descending (pandas multi-column sort, stable: ties
#   keep input row order), head(k), rank = position 1..k; relevancy_method="top_k".
# - precision_at_k = Σ hits/k / n_users, recall_at_k = Σ hits/|R| / n_users, where
#   n_users = users in BOTH frames (common_users): a user with truth but no predictions is
#   left out (frame_metrics scores such a user 0): == the frame_metrics mean over truth
#   restricted to users with recommendations.
# - map = Σ_{hits} (hit index / rank) / |R|       == ap@k, ap_denominator="relevant"
#   map_at_k = same / min(|R|, k)                 == ap@k, ap_denominator="min_k" (default)
#   (same n_users as precision).
# - ndcg_at_k: dcg over hits rel/log(1 + rank), idcg over all truth rows of the user sorted
#   by rating, best k (log base cancels in the ratio; discfun_type="loge" default);
#   score_type "raw" == gain="linear", "exp" == "exponential", "binary" == "binary". Its
#   mean runs over the users of the OUTER merge with rating_true: every truth user, those
#   without predictions scoring 0: == the plain frame_metrics mean (empty="skip").
# - `threshold` is not a relevance threshold: with relevancy_method="by_threshold" it is
#   the list cutoff used instead of k (precision still divides by k).

_REC_COLS = {
    "col_user": "userID",
    "col_item": "itemID",
    "col_rating": "rating",
    "col_prediction": "prediction",
}


def _recommenders_frames(data: Data, path: str, threshold: int | None) -> tuple[Any, Any]:
    pd = pytest.importorskip("pandas")
    rel = pl.col("relevance")
    relevant = data.truth.filter(rel > 0 if threshold is None else rel >= threshold)
    rating_true = pd.DataFrame(
        {
            "userID": relevant["user"].to_numpy(),
            "itemID": relevant["item"].to_numpy(),
            "rating": relevant["relevance"].cast(pl.Float64).to_numpy(),
        }
    )
    rows = [
        (user, s.item if s.item is not None else -s.position, s.score)
        for user, slots in ordered_lists(data.recs, path).items()
        for s in slots
    ]
    rating_pred = pd.DataFrame(rows, columns=["userID", "itemID", "prediction"]).astype(
        {"userID": "int64", "itemID": "int64", "prediction": "float64"}
    )
    return rating_true, rating_pred


def _fm_mean(
    constructor: Constructor, data: Data, path: str, metric: str, k: int, **options: Any
) -> tuple[int, float]:
    out = run_fm(constructor, data, path, metrics=metric, k=k, aggregate=True, **options)
    return int(out["n_users"].item()), float(out[f"{metric}@{k}"].item())


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("threshold", [None, 2])
def test_recommenders(
    constructor: Constructor, data: Data, path: str, threshold: int | None
) -> None:
    pytest.importorskip("recommenders")
    pe = pytest.importorskip("recommenders.evaluation.python_evaluation")
    rating_true, rating_pred = _recommenders_frames(data, path, threshold)
    with_recs = set(data.recs["user"].to_list())
    restricted = Data(data.recs, data.truth.filter(pl.col("user").is_in(list(with_recs))))
    common = set(rating_true["userID"]) & set(rating_pred["userID"])
    for k in KS:
        args = {"k": k, "relevancy_method": "top_k", **_REC_COLS}
        with quiet():
            peer = {
                ("precision", "min_k", "linear"): pe.precision_at_k(
                    rating_true, rating_pred, **args
                ),
                ("recall", "min_k", "linear"): pe.recall_at_k(rating_true, rating_pred, **args),
                ("ap", "relevant", "linear"): pe.map(rating_true, rating_pred, **args),
                ("ap", "min_k", "linear"): pe.map_at_k(rating_true, rating_pred, **args),
            }
            ndcg = {
                gain: pe.ndcg_at_k(rating_true, rating_pred, score_type=score_type, **args)
                for gain, score_type in (
                    ("linear", "raw"),
                    ("exponential", "exp"),
                    ("binary", "binary"),
                )
            }
        for (metric, denominator, gain), expected in peer.items():
            n, got = _fm_mean(
                constructor,
                restricted,
                path,
                metric,
                k,
                threshold=threshold,
                ap_denominator=denominator,
                gain=gain,
            )
            assert n == len(common)
            assert_mean(
                got,
                float(expected),
                f"recommenders {metric} D={denominator} k={k} (truth of users with recs)",
            )
        for gain, expected in ndcg.items():
            n, got = _fm_mean(constructor, data, path, "ndcg", k, threshold=threshold, gain=gain)
            assert n == rating_true["userID"].nunique()
            assert_mean(got, float(expected), f"recommenders ndcg_at_k gain={gain} k={k}")


def test_recommenders_threshold_is_a_list_cutoff(constructor: Constructor, data: Data) -> None:
    # relevancy_method="by_threshold", threshold=3, k=10: the list is cut at 3 but
    # precision still divides by 10: == frame_metrics precision@3 * 3 / 10.
    pytest.importorskip("recommenders")
    pe = pytest.importorskip("recommenders.evaluation.python_evaluation")
    rating_true, rating_pred = _recommenders_frames(data, "score", None)
    with quiet():
        peer = pe.precision_at_k(
            rating_true,
            rating_pred,
            k=10,
            threshold=3,
            relevancy_method="by_threshold",
            **_REC_COLS,
        )
    with_recs = data.truth.filter(pl.col("user").is_in(data.recs["user"].to_list()))
    _, p3 = _fm_mean(constructor, Data(data.recs, with_recs), "score", "precision", 3)
    assert_mean(p3 * 3 / 10, float(peer), "recommenders by_threshold precision")


# --- RecTools (rectools.metrics) ---------------------------------------------------------------
# Source: rectools 0.19.0, rectools/metrics/base.py merge_reco (interactions LEFT JOIN
# reco), classification.py calc_confusions, ranking.py MAP / NDCG / MRR, scoring.py
# calc_metrics.
# - Every interaction row is relevant (binary; no relevance column): pass rows with
#   rel > 0 (or >= t) == threshold=t. Users = the users of the interactions, those without
#   recommendations scoring 0 == empty="skip"; recommended users without interactions are
#   ignored. Rank VALUES are used as given (gaps allowed; a warning if min rank != 1).
# - Precision(k) = tp / k; Recall(k) = tp / |R|; HitRate(k) = tp > 0; with tp = #(rank <= k)
#                                                  == precision@k, recall@k, hit_rate@k
# - MRR(k) = 1 / min relevant rank <= k, else 0   == mrr@k
# - MAP(k): Σ_{relevant at rank r <= k} hits@r / r over |R| == ap_denominator="relevant";
#   MAP(k, divide_by_k=True) over k                == ap_denominator="k"
# - NDCG(k, divide_by_achievable=True): binary gain, IDCG = Σ_{i <= min(|R|, k)} 1/log(i+1)
#                                                  == ndcg@k, gain="binary" (log_base cancels)
# - NDCG(k) default: IDCG = Σ_{i <= k} 1/log(i+1) for every user, as if each had k relevant
#   items: no frame_metrics option; == dcg@k(gain="binary") / Σ_{i<=k} 1/log2(i+1).
# - F1Beta(k, beta=1) = 2pr/(p+r), set to 0 where p = r = 0  == f1@k


def _rectools_frames(data: Data, threshold: int | None) -> tuple[Any, Any]:
    rel = pl.col("relevance")
    relevant = data.truth.filter(rel > 0 if threshold is None else rel >= threshold)
    interactions = relevant.select(user_id="user", item_id="item").to_pandas()
    reco = data.recs.select(user_id="user", item_id="item", rank="rank").to_pandas()
    return reco, interactions


def _series(values: Any) -> UserValues:
    return {int(u): float(v) for u, v in values.items()}


@pytest.mark.parametrize("threshold", [None, 2])
def test_rectools(constructor: Constructor, data: Data, threshold: int | None) -> None:
    rm = pytest.importorskip("rectools.metrics")
    reco, interactions = _rectools_frames(data, threshold)
    peers: dict[str, tuple[Any, str, dict[str, Any]]] = {}
    for k in KS:
        peers[f"precision@{k}"] = (rm.Precision(k), f"precision@{k}", {})
        peers[f"recall@{k}"] = (rm.Recall(k), f"recall@{k}", {})
        peers[f"hit_rate@{k}"] = (rm.HitRate(k), f"hit_rate@{k}", {})
        peers[f"f1@{k}"] = (rm.F1Beta(k, beta=1.0), f"f1@{k}", {})
        peers[f"mrr@{k}"] = (rm.MRR(k), f"mrr@{k}", {})
        peers[f"map@{k}"] = (rm.MAP(k), f"ap@{k}", {"ap_denominator": "relevant"})
        peers[f"map_by_k@{k}"] = (rm.MAP(k, divide_by_k=True), f"ap@{k}", {"ap_denominator": "k"})
        peers[f"ndcg_achievable@{k}"] = (
            rm.NDCG(k, divide_by_achievable=True),
            f"ndcg@{k}",
            {"gain": "binary"},
        )
        peers[f"ndcg_achievable_log3@{k}"] = (
            rm.NDCG(k, log_base=3, divide_by_achievable=True),
            f"ndcg@{k}",
            {"gain": "binary"},
        )
    with quiet():
        means = rm.calc_metrics(
            {name: m for name, (m, _, _) in peers.items()}, reco=reco, interactions=interactions
        )
        per = {
            name: _series(m.calc_per_user(reco, interactions)) for name, (m, _, _) in peers.items()
        }
    relevant = users_with_relevant(data.truth, threshold)
    groups: dict[tuple[tuple[str, Any], ...], list[str]] = {}
    for name, (_, _, options) in peers.items():
        groups.setdefault(tuple(sorted(options.items())), []).append(name)
    for key, names in groups.items():
        options = dict(key)
        metrics = sorted({peers[n][1].split("@")[0] for n in names})
        out = run_fm(
            constructor, data, "rank", metrics=metrics, k=list(KS), threshold=threshold, **options
        )
        agg = run_fm(
            constructor,
            data,
            "rank",
            metrics=metrics,
            k=list(KS),
            threshold=threshold,
            aggregate=True,
            **options,
        )
        assert agg["n_users"].item() == len(relevant) == interactions["user_id"].nunique()
        for name in names:
            column = peers[name][1]
            assert_values(
                per_user(out, column), per[name], f"rectools {name} vs {column} {options}"
            )
            assert_mean(
                float(agg[column].item()),
                float(means[name]),
                f"rectools calc_metrics {name} vs mean {column} {options}",
            )


@pytest.mark.parametrize("k", KS)
def test_rectools_ndcg_default_idcg_assumes_k_relevant(
    constructor: Constructor, data: Data, k: int
) -> None:
    # RecTools NDCG(k) (divide_by_achievable=False, the default) divides every user's
    # binary DCG by the same Σ_{i=1..k} 1/log2(i+1); no frame_metrics ndcg option does
    # that, but frame_metrics' dcg with gain="binary" over that constant reproduces it.
    rm = pytest.importorskip("rectools.metrics")
    reco, interactions = _rectools_frames(data, None)
    with quiet():
        peer = _series(rm.NDCG(k).calc_per_user(reco, interactions))
    ideal_k = sum(1 / math.log2(i + 1) for i in range(1, k + 1))
    out = run_fm(constructor, data, "rank", metrics=["dcg", "ndcg"], k=k, gain="binary")
    dcg = per_user(out, f"dcg@{k}")
    assert_values({u: v / ideal_k for u, v in dcg.items()}, peer, f"rectools NDCG({k})")
    if k > 1:  # users with fewer than k relevant items make the two ndcg conventions differ
        ndcg = per_user(out, f"ndcg@{k}")
        assert any(not math.isclose(ndcg[u], peer[u]) for u in peer)
