"""``convention=`` presets against each peer's DEFAULT call, on hypothesis-generated tables.

tests/test_peers.py calls each peer with explicit options and maps them to frame_metrics
options one by one; here each peer is called as a user would call it (its defaults, only
its own arguments mapped: relevance_level / ``-lN`` / k / top_k) and frame_metrics is given
nothing but ``convention=<peer>`` (plus the same mapped threshold). Every per-user value
and the mean must agree at 1e-12 relative (1e-15 absolute; torchmetrics, which computes
in float32, at 1e-6).

The tables are small and adversarial: scores from {0.1, 0.5, 0.9} (ties in most lists),
users on one side only (recommendations without truth, truth without recommendations),
users whose every judgement is 0, graded relevance 0..4, lists of 1..12 items (at most 15
per user keeps ranx's tie order defined), item ids 1..30 (so "2" > "10" as text, the
order trec_eval breaks ties in), ranks with gaps, rows interleaved across users in a
random order (the order peers with a stable sort keep for ties), and thresholds.

Where the peer cannot represent a case or differs for a documented reason
(``fm.conventions()`` notes, /tmp/research), the tables avoid it and a comment says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.conventions import CONVENTIONS
from tests.test_peers import ATOL, RTOL, per_user, quiet

PRESETS = ("trec_eval", "ranx", "rectools", "recommenders", "sklearn", "torchmetrics", "replay")
KS: tuple[int, ...] = (1, 3, 5, 10)
#: A cutoff past every list (12 items) and every user's judgements: "no cutoff".
NO_CUTOFF = 1000
TIED_SCORES = (0.1, 0.5, 0.9)
#: Exact in float32 and distinct there too (torchmetrics' unstable sorts need no ties).
DISTINCT_SCORES = tuple(i / 64 for i in range(1, 64))
#: float32 peers (torchmetrics).
F32_TOL = 1e-6

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

UserValues = dict[int, float]


# --- tables ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """Recommendation rows in input order and truth rows, as plain tuples."""

    #: (user, item, score, rank): ranks increase with the list order, with gaps.
    rows: tuple[tuple[int, int, float, int], ...]
    #: (user, item, relevance), relevance 0..4.
    judgements: tuple[tuple[int, int, int], ...]

    def recs(self, by: str) -> pl.DataFrame:
        """``user, item`` and ``score`` or ``rank``, in the table's row order."""
        frame = pl.DataFrame(
            list(self.rows),
            schema={"user": pl.Int64, "item": pl.Int64, "score": pl.Float64, "rank": pl.Int64},
            orient="row",
        )
        return frame.drop("rank" if by == "score" else "score")

    def truth(self, threshold: float | None = None) -> pl.DataFrame:
        """The truth rows, or only those with relevance >= threshold."""
        frame = pl.DataFrame(
            list(self.judgements),
            schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Int64},
            orient="row",
        )
        return frame if threshold is None else frame.filter(pl.col("relevance") >= threshold)

    def lists(self) -> dict[int, list[tuple[int, float, int]]]:
        """Each user's (item, score, rank) in input row order."""
        out: dict[int, list[tuple[int, float, int]]] = {}
        for user, item, score, rank in self.rows:
            out.setdefault(user, []).append((item, score, rank))
        return out

    def judged(self) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        for user, item, rel in self.judgements:
            out.setdefault(user, {})[item] = rel
        return out


@st.composite
def tables(draw: st.DrawFn, *, distinct_scores: bool = False) -> Table:
    """Up to 6 users; the first has both recommendations and truth.

    The others have both, recommendations only or truth only. A truth user judges some
    of the listed items and some others (at least one item), relevance 0..4, and one in
    five judges everything 0. Scores tie often (or never, ``distinct_scores``).
    """
    users = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6, unique=True))
    rows: list[tuple[int, int, float, int]] = []
    judgements: list[tuple[int, int, int]] = []
    for index, user in enumerate(users):
        kind = "both" if index == 0 else draw(st.sampled_from(["both", "both", "recs", "truth"]))
        items: list[int] = []
        if kind != "truth":
            items = draw(st.lists(st.integers(1, 30), min_size=1, max_size=12, unique=True))
            n = len(items)
            pool = DISTINCT_SCORES if distinct_scores else TIED_SCORES
            scores = draw(
                st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=distinct_scores)
            )
            steps = draw(st.lists(st.sampled_from([1, 1, 1, 2, 3]), min_size=n, max_size=n))
            ranks = list(accumulate(steps))
            rows.extend(zip([user] * n, items, scores, ranks, strict=True))
        if kind != "recs":
            listed = draw(st.lists(st.sampled_from(items), unique=True)) if items else []
            others = draw(
                st.lists(
                    st.sampled_from([i for i in range(1, 41) if i not in items]),
                    min_size=0 if listed else 1,
                    max_size=4,
                    unique=True,
                )
            )
            judged = [*listed, *others]
            all_zero = draw(st.sampled_from([False, False, False, False, True]))
            rels = draw(
                st.lists(
                    st.just(0) if all_zero else st.integers(0, 4),
                    min_size=len(judged),
                    max_size=len(judged),
                )
            )
            judgements.extend(zip([user] * len(judged), judged, rels, strict=True))
    order = draw(st.permutations(range(len(rows))))
    return Table(tuple(rows[i] for i in order), tuple(judgements))


# --- calling frame_metrics and comparing ---------------------------------------------------------


def run_fm(
    table: Table,
    by: str,
    convention: str,
    metrics: Sequence[str],
    ks: Sequence[int],
    *,
    aggregate: bool = False,
    **options: Any,
) -> pl.DataFrame:
    """``fm.evaluate`` with only the preset (and the given options) on the whole table."""
    out = fm.evaluate(
        table.recs(by),
        table.truth(),
        metrics=list(metrics),
        k=list(ks),
        score="score" if by == "score" else None,
        convention=convention,
        aggregate=aggregate,
        **options,
    )
    assert isinstance(out, pl.DataFrame)
    return out


def close(got: float, expected: float, tol: float | None = None) -> bool:
    if tol is None:
        return math.isclose(got, expected, rel_tol=RTOL, abs_tol=ATOL)
    return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)


def check_users(
    got: Mapping[int, float], expected: Mapping[int, float], label: str, tol: float | None = None
) -> None:
    """Same users (by id) and the same value for each."""
    assert set(got) == set(expected), (
        f"{label}: users only in frame_metrics {sorted(set(got) - set(expected))}, "
        f"only in the peer {sorted(set(expected) - set(got))}"
    )
    bad = [(u, expected[u], got[u]) for u in sorted(got) if not close(got[u], expected[u], tol)]
    assert not bad, f"{label}: (user, peer, frame_metrics) {bad}"


def check_mean(
    mean: pl.DataFrame, column: str, expected: float, n: int, label: str, tol: float | None = None
) -> None:
    got = mean[column].item()
    assert got is not None, f"{label}: frame_metrics mean is null, the peer's {expected!r}"
    assert close(float(got), expected, tol), f"{label}: peer {expected!r}, frame_metrics {got!r}"
    assert mean["n_users"].item() == n, f"{label}: n_users {mean['n_users'].item()} != {n}"


def peer_mean(values: Mapping[int, float]) -> float:
    """The mean the peer prints (sum / number of users: trec_eval, sklearn per row)."""
    return math.fsum(values.values()) / len(values)


# --- trec_eval (pytrec_eval) ----------------------------------------------------------------------
# Default RelevanceEvaluator(qrels, measures); relevance_level=t is mapped to threshold=t.
# Run: {query: {docno: score}}: trec_eval sorts by score, ties by docno descending as text
# (preset ties="item_desc_text"; frame_metrics gets the integer ids, the peer their text).
# Reported: queries in both the run and the qrels (users="both"), judged-only-0 queries
# with zeros (empty="zero"). recip_rank, map, ndcg, Rprec and bpref read the whole list:
# mrr at every k (mrr_cutoff="none"), ap and ndcg at NO_CUTOFF, r_precision, bpref.

_TREC_CUT = {
    "P": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "ap",
    "ndcg_cut": "ndcg",
}


@SETTINGS
@given(table=tables(), threshold=st.sampled_from([None, 2, 3]))
def test_trec_eval_preset(table: Table, threshold: int | None) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {str(u): {str(i): r for i, r in d.items()} for u, d in table.judged().items()}
    run = {str(u): {str(i): s for i, s, _ in rows} for u, rows in table.lists().items()}
    measures = {f"{m}_{k}" for m in _TREC_CUT for k in KS}
    measures |= {"recip_rank", "map", "ndcg", "Rprec", "bpref"}
    if threshold is None:
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    else:
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=threshold)
    results: dict[str, dict[str, float]] = evaluator.evaluate(run)
    peer: dict[str, UserValues] = {}
    for query, values in results.items():
        for measure, value in values.items():
            peer.setdefault(measure, {})[int(query)] = float(value)

    pairs = [(f"{m}_{k}", f"{name}@{k}") for m, name in _TREC_CUT.items() for k in KS]
    pairs += [("recip_rank", f"mrr@{k}") for k in (*KS, NO_CUTOFF)]
    pairs += [("map", f"ap@{NO_CUTOFF}"), ("ndcg", f"ndcg@{NO_CUTOFF}")]
    pairs += [("Rprec", "r_precision"), ("bpref", "bpref")]
    metrics = ["precision", "recall", "hit_rate", "ap", "ndcg", "mrr", "r_precision", "bpref"]
    ks = (*KS, NO_CUTOFF)
    options: dict[str, Any] = {} if threshold is None else {"threshold": threshold}
    out = run_fm(table, "score", "trec_eval", metrics, ks, **options)
    mean = run_fm(table, "score", "trec_eval", metrics, ks, aggregate=True, **options)
    n = len(results)
    for measure, column in pairs:
        label = f"trec_eval {measure} l={threshold} vs {column}"
        check_users(per_user(out, column), peer[measure], label)
        check_mean(mean, column, peer_mean(peer[measure]), n, label)


def test_trec_eval_ndcg_ignores_relevance_level() -> None:
    # The smallest case hypothesis found against 4fa0c01 (fixed in b0c063d): with
    # relevance_level=2, trec_eval's ndcg and ndcg_cut still gain from rel 1. User 1
    # (only rel 1) gets 1.0, user 2 (a: 1 listed, b: 2 not) 1/2 at k=1; 4fa0c01 gave 0.0
    # to both (threshold=2 cut the gains, and user 1 counted as empty).
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"1": {"a": 1}, "2": {"a": 1, "b": 2}}
    run = {"1": {"a": 0.9}, "2": {"a": 0.9}}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_1", "ndcg"}, relevance_level=2)
    peer = evaluator.evaluate(run)
    assert peer["1"] == {"ndcg_cut_1": 1.0, "ndcg": 1.0}
    assert peer["2"]["ndcg_cut_1"] == 0.5
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "score": [0.9, 0.9]})
    truth = pl.DataFrame({"user": [1, 2, 2], "item": ["a", "a", "b"], "relevance": [1, 1, 2]})
    out = fm.evaluate(
        recs,
        truth,
        metrics="ndcg",
        k=[1, NO_CUTOFF],
        score="score",
        convention="trec_eval",
        threshold=2,
    )
    assert isinstance(out, pl.DataFrame)
    check_users(per_user(out, "ndcg@1"), {1: 1.0, 2: 0.5}, "ndcg_cut_1 -l2")
    expected = {int(q): v["ndcg"] for q, v in peer.items()}
    check_users(per_user(out, f"ndcg@{NO_CUTOFF}"), expected, "ndcg -l2")


# --- ranx --------------------------------------------------------------------------------------------
# Default ranx.evaluate(Qrels, Run, metrics); "-lN" is mapped to threshold=N. Qrels and Run
# must hold the same query ids (make_comparable=False, the default): every qrels user gets
# a run entry, empty without recommendations (scores 0); recommended users without
# judgements cannot be given (preset users="truth"). Run objects keep insertion order for
# tied scores up to 15 documents: the documents go in in the table's row order, which
# frame_metrics reads with the preset's ties="input". bpref is left out: ranx gives NaN for
# a user without a judged non-relevant item (Convention notes).

_RANX = {
    "precision": "precision",
    "recall": "recall",
    "f1": "f1",
    "hit_rate": "hit_rate",
    "mrr": "mrr",
    "map": "ap",
    "ndcg": "ndcg",
    "dcg": "dcg",
}


@SETTINGS
@given(table=tables(), threshold=st.sampled_from([None, 2, 3]))
def test_ranx_preset(table: Table, threshold: int | None) -> None:
    ranx = pytest.importorskip("ranx")
    judged = table.judged()
    lists = table.lists()
    qrels = ranx.Qrels.from_dict(
        {str(u): {str(i): r for i, r in d.items()} for u, d in judged.items()}
    )
    run = ranx.Run.from_dict({str(u): {str(i): s for i, s, _ in lists.get(u, [])} for u in judged})
    suffix = "" if threshold is None else f"-l{threshold}"
    pairs = [(f"{m}@{k}{suffix}", f"{name}@{k}") for m, name in _RANX.items() for k in KS]
    pairs.append((f"r-precision{suffix}", "r_precision"))
    with quiet():
        ranx.evaluate(qrels, run, [p for p, _ in pairs], return_mean=False)
    options: dict[str, Any] = {} if threshold is None else {"threshold": threshold}
    metrics = [*_RANX.values(), "r_precision"]
    out = run_fm(table, "score", "ranx", metrics, KS, **options)
    mean = run_fm(table, "score", "ranx", metrics, KS, aggregate=True, **options)
    for name, column in pairs:
        expected = {int(q): float(v) for q, v in run.scores[name].items()}
        assert set(expected) == set(judged)
        label = f"ranx {name} vs {column}"
        check_users(per_user(out, column), expected, label)
        check_mean(mean, column, float(run.mean_scores[name]), len(judged), label)


# --- RecTools -----------------------------------------------------------------------------------------
# Default Precision(k), Recall(k), HitRate(k), F1Beta(k), MRR(k), MAP(k), NDCG(k) (so
# divide_by_k=False, divide_by_achievable=False: preset idcg="k"); calc_per_user and
# calc_metrics. interactions = every truth row (RecTools has no relevance: threshold=0);
# the rank column is read as given (gaps too), so frame_metrics gets rank=. Users: those
# of interactions (users="truth"). An explicit threshold=t is checked as the interactions
# with relevance >= t (a user left without one is absent there, skipped here).

_RECTOOLS = {
    "Precision": "precision",
    "Recall": "recall",
    "HitRate": "hit_rate",
    "F1Beta": "f1",
    "MRR": "mrr",
    "MAP": "ap",
    "NDCG": "ndcg",
}


@SETTINGS
@given(table=tables(), threshold=st.sampled_from([None, None, 2]))
def test_rectools_preset(table: Table, threshold: int | None) -> None:
    rm = pytest.importorskip("rectools.metrics")
    truth = table.truth(threshold)
    interactions = truth.select(user_id="user", item_id="item").to_pandas()
    reco = table.recs("rank").select(user_id="user", item_id="item", rank="rank").to_pandas()
    peers = {(cls, k): getattr(rm, cls)(k) for cls in _RECTOOLS for k in KS}
    with quiet():
        per = {
            key: {int(u): float(v) for u, v in m.calc_per_user(reco, interactions).items()}
            for key, m in peers.items()
        }
        means = (
            rm.calc_metrics({f"{c}@{k}": m for (c, k), m in peers.items()}, reco, interactions)
            if len(interactions)
            else {}
        )
    options: dict[str, Any] = {} if threshold is None else {"threshold": threshold}
    metrics = list(_RECTOOLS.values())
    out = run_fm(table, "rank", "rectools", metrics, KS, **options)
    mean = run_fm(table, "rank", "rectools", metrics, KS, aggregate=True, **options)
    users = set(truth["user"].to_list())
    for (cls, k), expected in per.items():
        column = f"{_RECTOOLS[cls]}@{k}"
        label = f"rectools {cls}({k}) threshold={threshold} vs {column}"
        assert set(expected) == users
        check_users(per_user(out, column), expected, label)
        if users:
            check_mean(mean, column, float(means[f"{cls}@{k}"]), len(users), label)


# --- Microsoft Recommenders -----------------------------------------------------------------------
# Default precision_at_k, recall_at_k, map_at_k, ndcg_at_k (relevancy_method="top_k",
# score_type="binary"; the default column names userID, itemID, rating, prediction), k
# mapped. rating_true = every truth row (no relevance cut: threshold=0), rating_pred = the
# recommendation rows in the table's order with prediction = score (a stable sort keeps
# that order for ties: preset ties="input"). Only means exist; precision, recall and map
# average over the users in both frames, ndcg over every rating_true user (the preset's
# per-metric users). map (not map_at_k) is checked with an explicit
# ap_denominator="relevant", and an explicit threshold=t with rating_true cut at t.

_REC = {
    "precision_at_k": "precision",
    "recall_at_k": "recall",
    "map_at_k": "ap",
    "ndcg_at_k": "ndcg",
}


@SETTINGS
@given(table=tables(), threshold=st.sampled_from([None, None, 2]))
def test_recommenders_preset(table: Table, threshold: int | None) -> None:
    pytest.importorskip("recommenders")
    pe = pytest.importorskip("recommenders.evaluation.python_evaluation")
    truth = table.truth(threshold)
    rating_true = (
        truth.select(userID="user", itemID="item", rating=pl.col("relevance").cast(pl.Float64))
    ).to_pandas()
    rating_pred = (
        table.recs("score").select(userID="user", itemID="item", prediction="score").to_pandas()
    )
    common = set(rating_true["userID"]) & set(rating_pred["userID"])
    truth_users = set(rating_true["userID"])
    options: dict[str, Any] = {} if threshold is None else {"threshold": threshold}
    mean = run_fm(
        table, "score", "recommenders", list(_REC.values()), KS, aggregate=True, **options
    )
    relevant = run_fm(
        table,
        "score",
        "recommenders",
        ["ap"],
        KS,
        aggregate=True,
        ap_denominator="relevant",
        **options,
    )
    if not common:  # only when threshold cuts every user of both frames
        assert threshold is not None
        return
    for k in KS:
        with quiet():
            peer = {name: float(getattr(pe, name)(rating_true, rating_pred, k=k)) for name in _REC}
            peer_map = float(pe.map(rating_true, rating_pred, k=k))
        for name, metric in _REC.items():
            column = f"{metric}@{k}"
            label = f"recommenders {name}(k={k}) threshold={threshold} vs mean {column}"
            got = mean[column].item()
            assert got is not None, label
            assert close(float(got), peer[name]), f"{label}: peer {peer[name]!r}, fm {got!r}"
        got = relevant[f"ap@{k}"].item()
        assert got is not None
        assert close(float(got), peer_map), f"recommenders map(k={k}): {peer_map!r}, fm {got!r}"
        assert relevant["n_users"].item() == len(common)
    ndcg_only = run_fm(table, "score", "recommenders", ["ndcg"], KS, aggregate=True, **options)
    assert ndcg_only["n_users"].item() == len(truth_users)


@SETTINGS
@given(table=tables(), score_type=st.sampled_from(["raw", "exp"]))
def test_recommenders_graded_ndcg_leaves_out_users_rated_all_zero(
    table: Table, score_type: str
) -> None:
    # ndcg_at_k(score_type="raw" | "exp"): a user whose ratings are all 0 has an ideal DCG
    # of 0, so 0/0 = NaN, which pandas' mean skips (one in five table users rates all 0).
    pytest.importorskip("recommenders")
    pe = pytest.importorskip("recommenders.evaluation.python_evaluation")
    truth = table.truth()
    rating_true = (
        truth.select(userID="user", itemID="item", rating=pl.col("relevance").cast(pl.Float64))
    ).to_pandas()
    rating_pred = (
        table.recs("score").select(userID="user", itemID="item", prediction="score").to_pandas()
    )
    gain: Any = {"raw": "linear", "exp": "exponential"}[score_type]
    got = run_fm(table, "score", "recommenders", ["ndcg"], KS, aggregate=True, gain=gain)
    for k in KS:
        with quiet():
            peer = float(pe.ndcg_at_k(rating_true, rating_pred, k=k, score_type=score_type))
        value = got[f"ndcg@{k}"].item() if got.height else None
        if value is None:
            # Every truth user rated all 0: no value; Recommenders' mean of NaNs, or its
            # early 0.0 when no recommended item is in truth at all.
            assert math.isnan(peer) or peer == 0.0, (k, peer)
            continue
        assert close(float(value), peer), (score_type, k, value, peer)


# --- scikit-learn ---------------------------------------------------------------------------------
# Default ndcg_score(y_true, y_score, k=k) and dcg_score(..., k=k) (ignore_ties=False:
# tied scores averaged, preset ties="average"), one sample per user with recommendations
# (users="recs"): y_true = the relevance of each recommended item (0 if unjudged), y_score
# its score: only the recommended items (relevant_set="listed"). A sample with y_true all
# 0 scores 0 (empty="zero"). k=None (the whole row) is ndcg at NO_CUTOFF.
# sklearn refuses a one-document sample ("only meaningful when there is more than 1
# document"): a one-item list gets a second document of relevance 0 scored below it,
# which changes neither DCG nor the ideal DCG.


@SETTINGS
@given(table=tables())
def test_sklearn_preset(table: Table) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    judged = table.judged()
    peer: dict[str, UserValues] = {}
    for user, rows in table.lists().items():
        rels = judged.get(user, {})
        y_true = [float(rels.get(i, 0)) for i, _, _ in rows]
        y_score = [s for _, s, _ in rows]
        if len(rows) == 1:
            y_true.append(0.0)
            y_score.append(y_score[0] - 1.0)
        t, s = np.array([y_true]), np.array([y_score])
        for k in (*KS, None):
            at = k or NO_CUTOFF
            peer.setdefault(f"ndcg@{at}", {})[user] = float(metrics.ndcg_score(t, s, k=k))
            peer.setdefault(f"dcg@{at}", {})[user] = float(metrics.dcg_score(t, s, k=k))
    ks = (*KS, NO_CUTOFF)
    out = run_fm(table, "score", "sklearn", ["ndcg", "dcg"], ks)
    mean = run_fm(table, "score", "sklearn", ["ndcg", "dcg"], ks, aggregate=True)
    for column, expected in peer.items():
        label = f"sklearn {column.split('@')[0]}_score k={column.split('@')[1]}"
        check_users(per_user(out, column), expected, label)
        check_mean(mean, column, peer_mean(expected), len(expected), label)


# --- RePlay ---------------------------------------------------------------------------------------
# Default Precision, Recall, HitRate, MRR, MAP, NDCG (topk = the ks; query/item/rating
# column names mapped), on polars frames, mean and mode=PerUser(). Ground truth = every
# truth row, user and item (no relevance: threshold=0); ties by item id descending
# (ties="item_desc"); users of the ground truth (users="truth"), those without
# recommendations scoring 0. Truth rows are unique here: RePlay's MAP and NDCG
# denominators count repeated ground-truth rows (Convention notes).

_REPLAY = {
    "Precision": "precision",
    "Recall": "recall",
    "HitRate": "hit_rate",
    "MRR": "mrr",
    "MAP": "ap",
    "NDCG": "ndcg",
}


@SETTINGS
@given(table=tables())
def test_replay_preset(table: Table) -> None:
    rp = pytest.importorskip("replay.metrics")
    recs = table.recs("score")
    ground_truth = table.truth().select("user", "item")
    columns = {"query_column": "user", "item_column": "item", "rating_column": "score"}
    metrics = list(_REPLAY.values())
    out = run_fm(table, "score", "replay", metrics, KS)
    mean = run_fm(table, "score", "replay", metrics, KS, aggregate=True)
    users = set(ground_truth["user"].to_list())
    for cls, metric in _REPLAY.items():
        with quiet():
            per = getattr(rp, cls)(list(KS), mode=rp.PerUser(), **columns)(recs, ground_truth)
            means = getattr(rp, cls)(list(KS), **columns)(recs, ground_truth)
        for k in KS:
            column = f"{metric}@{k}"
            expected = {int(u): float(v) for u, v in per[f"{cls}-PerUser@{k}"].items()}
            label = f"replay {cls}@{k} vs {column}"
            assert set(expected) == users
            check_users(per_user(out, column), expected, label)
            check_mean(mean, column, float(means[f"{cls}@{k}"]), len(users), label)


# --- torchmetrics ------------------------------------------------------------------------------------
# Default Retrieval*(top_k=k) classes (empty_target_action="neg", aggregation="mean"):
# update(preds, target, indexes=user) over every recommended row, compute(); per user the
# same class on that user's rows alone. Only the recommended items exist for it
# (relevant_set="listed", users="recs"); float32 throughout, hence 1e-6.
# Precision, Recall, HitRate, MRR, MAP and RPrecision take binary targets (relevance > 0,
# frame_metrics' default threshold) and break ties with unstable sorts (no defined order,
# Convention notes): their tables have distinct scores, all > 0 (a score <= 0 counts as
# not retrieved there). NDCG averages ties (ties="average") and takes graded targets:
# its tables tie.

_TM_BINARY = {
    "RetrievalPrecision": "precision",
    "RetrievalRecall": "recall",
    "RetrievalHitRate": "hit_rate",
    "RetrievalMRR": "mrr",
    "RetrievalMAP": "ap",
}


def _torch_inputs(table: Table, *, binary: bool) -> tuple[Any, Any, Any, dict[int, Any]]:
    torch = pytest.importorskip("torch")
    judged = table.judged()
    users = [u for u, _, _, _ in table.rows]
    rels = [judged.get(u, {}).get(i, 0) for u, i, _, _ in table.rows]
    preds = torch.tensor([s for _, _, s, _ in table.rows], dtype=torch.float64)
    target = torch.tensor([r > 0 for r in rels] if binary else rels)
    indexes = torch.tensor(users, dtype=torch.long)
    rows = {u: indexes == u for u in set(users)}
    return preds, target, indexes, rows


def _torch_values(
    cls: Any, preds: Any, target: Any, indexes: Any, rows: Mapping[int, Any]
) -> tuple[float, UserValues]:
    """The class's mean over every query and its value on each query alone."""
    whole = cls()
    whole.update(preds, target, indexes=indexes)
    per: UserValues = {}
    for user, mask in rows.items():
        one = cls()
        one.update(preds[mask], target[mask], indexes=indexes[mask])
        per[user] = float(one.compute())
    return float(whole.compute()), per


@SETTINGS
@given(table=tables(distinct_scores=True))
def test_torchmetrics_preset(table: Table) -> None:
    tm = pytest.importorskip("torchmetrics.retrieval")
    preds, target, indexes, rows = _torch_inputs(table, binary=True)
    metrics = [*_TM_BINARY.values(), "r_precision"]
    out = run_fm(table, "score", "torchmetrics", metrics, KS)
    mean = run_fm(table, "score", "torchmetrics", metrics, KS, aggregate=True)
    peers: list[tuple[str, Any]] = [
        (f"{metric}@{k}", lambda cls=cls, k=k: getattr(tm, cls)(top_k=k))
        for cls, metric in _TM_BINARY.items()
        for k in KS
    ]
    peers.append(("r_precision", tm.RetrievalRPrecision))
    with quiet():
        for column, make in peers:
            peer_avg, per = _torch_values(make, preds, target, indexes, rows)
            label = f"torchmetrics {column}"
            check_users(per_user(out, column), per, label, F32_TOL)
            check_mean(mean, column, peer_avg, len(rows), label, F32_TOL)


@SETTINGS
@given(table=tables())
def test_torchmetrics_ndcg_preset(table: Table) -> None:
    tm = pytest.importorskip("torchmetrics.retrieval")
    preds, target, indexes, rows = _torch_inputs(table, binary=False)
    out = run_fm(table, "score", "torchmetrics", ["ndcg"], (*KS, NO_CUTOFF))
    mean = run_fm(table, "score", "torchmetrics", ["ndcg"], (*KS, NO_CUTOFF), aggregate=True)
    with quiet():
        for k in (*KS, None):
            column = f"ndcg@{k or NO_CUTOFF}"
            make = lambda k=k: tm.RetrievalNormalizedDCG(top_k=k)  # noqa: E731
            peer_avg, per = _torch_values(make, preds, target, indexes, rows)
            label = f"torchmetrics RetrievalNormalizedDCG(top_k={k})"
            check_users(per_user(out, column), per, label, F32_TOL)
            check_mean(mean, column, peer_avg, len(rows), label, F32_TOL)


# --- the presets table and explicit overrides ---------------------------------------------------------


def test_conventions_lists_every_preset() -> None:
    table = fm.conventions()
    assert set(table["convention"].unique().to_list()) == set(PRESETS) == set(CONVENTIONS)
    assert table.columns == [
        "convention",
        "peer",
        "version",
        "option",
        "value",
        "default",
        "metrics",
        "why",
        "source",
    ]
    for name in PRESETS:
        rows = table.filter(convention=name)
        assert rows.height >= 3, name
        (version,) = rows["version"].unique().to_list()
        assert any(c.isdigit() for c in version), (name, version)
        assert rows["peer"].n_unique() == 1
        for row in rows.iter_rows(named=True):
            assert row["source"].startswith("https://github.com/"), row
            assert row["why"], row
            # A preset sets only the options in which the peer differs from the spec.
            assert row["value"] != row["default"], row
        # One row per option, except where a setting applies to some metrics only.
        assert rows.filter(metrics="")["option"].is_unique().all(), name


def test_conventions_table_values() -> None:
    table = fm.conventions()

    def value(convention: str, option: str, metrics: str = "") -> str:
        out = table.filter(convention=convention, option=option, metrics=metrics)["value"]
        return str(out.item())

    assert value("trec_eval", "threshold") == "1"
    assert value("trec_eval", "ties") == "item_desc_text"
    assert value("trec_eval", "users") == "both"
    assert value("ranx", "ties") == "input"
    assert value("rectools", "idcg", "ndcg") == "k"
    assert value("recommenders", "users") == "both"
    assert value("recommenders", "users", "dcg, ndcg") == "truth"
    assert value("sklearn", "relevant_set") == "listed"
    assert value("torchmetrics", "ap_denominator") == "hits"
    assert value("replay", "ties") == "item_desc"


def _one_user() -> tuple[pl.DataFrame, pl.DataFrame]:
    # Scores 0.9 > 0.8 > 0.7 rank a, b, c; truth a (1), c (2), d (1), e (3): |R| = 4 at
    # threshold 1, 2 at threshold 2 (c, e).
    recs = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "score": [0.9, 0.8, 0.7]})
    truth = pl.DataFrame({"user": 1, "item": ["a", "c", "d", "e"], "relevance": [1, 2, 1, 3]})
    return recs, truth


def _value(recs: pl.DataFrame, truth: pl.DataFrame, metric: str, **options: Any) -> float:
    out = fm.evaluate(recs, truth, metrics=metric, score="score", **options)
    assert isinstance(out, pl.DataFrame)
    (column,) = [c for c in out.columns if c != "user"]
    return float(out[column].item())


def test_explicit_options_override_a_preset() -> None:
    recs, truth = _one_user()
    # ap@3: hits at ranks 1 and 3, Σ = 1/1 + 2/3 = 5/3.
    preset = _value(recs, truth, "ap@3", convention="trec_eval")
    assert close(preset, (5 / 3) / 4)  # ap_denominator="relevant": |R| = 4
    min_k = _value(recs, truth, "ap@3", convention="trec_eval", ap_denominator="min_k")
    assert close(min_k, (5 / 3) / 3)  # min(|R|, k) = 3
    assert close(_value(recs, truth, "ap@3", ap_denominator="min_k"), min_k)
    # threshold=2 (pytrec_eval relevance_level=2): only c (rank 3) and e relevant.
    assert close(_value(recs, truth, "ap@3", convention="trec_eval", threshold=2), (1 / 3) / 2)
    # mrr: the preset reads the whole list (recip_rank); mrr_cutoff="k" cuts at k.
    assert close(_value(recs, truth, "mrr@1", convention="trec_eval", threshold=2), 1 / 3)
    assert _value(recs, truth, "mrr@1", convention="trec_eval", threshold=2, mrr_cutoff="k") == 0
    # A metric's own options override the call's and its convention.
    own = _value(recs, truth, "ap(ap_denominator=k)@3", convention="trec_eval")
    assert close(own, (5 / 3) / 3)


def test_metric_convention_overrides_call_convention() -> None:
    recs, truth = _one_user()
    # rectools NDCG(3): binary gain, ideal = 3 slots whatever |R|; only ranks 1 and 3 hit.
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    expected = (1 + 1 / math.log2(4)) / ideal
    assert close(_value(recs, truth, "ndcg@3", convention="rectools"), expected)
    assert close(
        _value(recs, truth, "ndcg(convention=rectools)@3", convention="trec_eval"), expected
    )
    # The metric's own option beats its convention: threshold=2 over RecTools' ideal of
    # k slots of gain 1 (c at rank 3 is the one relevant item listed).
    graded = _value(recs, truth, "ndcg(convention=rectools, threshold=2)@3")
    assert close(graded, (1 / math.log2(4)) / ideal)
    # An explicit option on the call beats the metric's convention: idcg="relevant" at
    # threshold=2 (c and e relevant) makes the ideal two slots.
    achievable = _value(recs, truth, "ndcg(convention=rectools)@3", idcg="relevant", threshold=2)
    assert close(achievable, (1 / math.log2(4)) / (1 + 1 / math.log2(3)))


def test_unknown_convention_is_refused() -> None:
    recs, truth = _one_user()
    with pytest.raises(fm.InvalidOptionError, match="convention"):
        fm.evaluate(recs, truth, metrics="ndcg@3", score="score", convention="pyterrier")
