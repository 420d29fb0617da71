"""Equal scores (spec sections 4 and 8): tie rules and tie-averaged values.

- The tie rules of score input: ``"item"`` (item ascending, the default), ``"item_desc"``,
  ``"item_desc_text"`` (item descending compared as text, trec_eval's docno order) and
  ``"input"`` (input row order), read off hand tables through mrr and precision, and
  trec_eval's own order through pytrec_eval.
- ``ties="average"``: dcg, ndcg, precision, recall, f1 and hit_rate equal the mean over
  every order of the tied items, found here by brute force (itertools.permutations) under
  hypothesis, and dcg/ndcg equal scikit-learn's ``dcg_score`` / ``ndcg_score`` (whose
  ``ignore_ties=False`` averages ties) over the recommended items.
- ``ties="average"`` with ap or mrr is refused; with rank input it changes nothing;
  ``fm.diagnose`` still counts ties at the cutoff.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import IgnoredOptionWarning, InvalidOptionError
from tests.conftest import CONSTRUCTORS, Constructor
from tests.conftest import assert_user_values as assert_close
from tests.conftest import evaluate_as_polars as run
from tests.conftest import user_values as values

TOL = 1e-12
LOG3 = math.log2(3)
AVERAGED = ["precision", "recall", "f1", "hit_rate", "dcg", "ndcg"]


# --- helpers -----------------------------------------------------------------------------------


def raises_exactly(message: str) -> Any:
    return pytest.raises(InvalidOptionError, match=f"^{re.escape(message)}$")


# --- tie rules ----------------------------------------------------------------------------------
# Three users with the same list, in this input row order: item 5 scored 0.9, then items
# 10, 1, 2 tied at 0.5. Each user likes one of the tied items (1, 2, 10), so mrr@4 reads
# the position the rule gives it:
#   item            5, 1, 2, 10        item 1 at 2, item 2 at 3, item 10 at 4
#   item_desc       5, 10, 2, 1        4, 3, 2
#   item_desc_text  5, "2", "10", "1"  4, 2, 3
#   input           5, 10, 1, 2        3, 4, 2

RULE_RECS = pl.DataFrame(
    {
        "user": [u for u in (1, 2, 3) for _ in range(4)],
        "item": [5, 10, 1, 2] * 3,
        "score": [0.9, 0.5, 0.5, 0.5] * 3,
    }
)
RULE_TRUTH = pl.DataFrame({"user": [1, 2, 3], "item": [1, 2, 10], "relevance": [1, 1, 1]})

POSITIONS = {
    "item": {1: 2, 2: 3, 3: 4},
    "item_desc": {1: 4, 2: 3, 3: 2},
    "item_desc_text": {1: 4, 2: 2, 3: 3},
    "input": {1: 3, 2: 4, 3: 2},
}


@pytest.mark.parametrize("ties", list(POSITIONS))
def test_tie_rules(constructor: Constructor, ties: str) -> None:
    got = run(
        constructor,
        RULE_RECS,
        RULE_TRUTH,
        metrics=["mrr@4", "precision@2"],
        score="score",
        ties=ties,
    )
    position = POSITIONS[ties]
    assert values(got, "mrr@4") == {u: 1 / p for u, p in position.items()}
    assert values(got, "precision@2") == {
        u: (1 / 2 if p == 2 else 0.0) for u, p in position.items()
    }


def test_item_is_the_default_tie_rule(constructor: Constructor) -> None:
    got = run(constructor, RULE_RECS, RULE_TRUTH, metrics="mrr@4", score="score")
    assert values(got, "mrr@4") == {u: 1 / p for u, p in POSITIONS["item"].items()}
    # The default does not depend on the row order.
    shuffled = RULE_RECS.reverse()
    again = run(constructor, shuffled, RULE_TRUTH, metrics="mrr@4", score="score")
    assert again.rows() == got.rows()


def test_input_order_is_per_user_row_order(constructor: Constructor) -> None:
    # Rows of two users interleaved, every score equal: user 1 reads 2, 10, 1 and user 2
    # reads 1, 10, 2. Both like item 1.
    recs = pl.DataFrame(
        {"user": [1, 2, 1, 2, 1, 2], "item": [2, 1, 10, 10, 1, 2], "score": [0.5] * 6}
    )
    truth = pl.DataFrame({"user": [1, 2], "item": [1, 1], "relevance": [1, 1]})
    got = run(
        constructor, recs, truth, metrics=["mrr@3", "precision@1"], score="score", ties="input"
    )
    assert got.rows() == [(1, 1 / 3, 0.0), (2, 1.0, 1.0)]


def test_tie_rules_as_metric_options(constructor: Constructor) -> None:
    metrics = [f"mrr(ties={t})@4" for t in POSITIONS]
    got = run(constructor, RULE_RECS, RULE_TRUTH, metrics=metrics, score="score")
    assert got.columns == ["user", *metrics]  # named as written, ties=item (the call's) too
    for ties, column in zip(POSITIONS, got.columns[1:], strict=True):
        assert values(got, column) == {u: 1 / p for u, p in POSITIONS[ties].items()}, ties


def test_trec_eval_tie_order(constructor: Constructor) -> None:
    # trec_eval sorts tied documents by docno descending as text: "2", "10", "1".
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"1": {"1": 1}, "2": {"2": 1}, "3": {"10": 1}}
    run_dict = {q: {"1": 0.5, "2": 0.5, "10": 0.5} for q in qrels}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "P_1"}).evaluate(run_dict)
    recs = pl.DataFrame(
        {
            "user": [u for u in (1, 2, 3) for _ in range(3)],
            "item": [1, 2, 10] * 3,
            "score": [0.5] * 9,
        }
    )
    truth = pl.DataFrame({"user": [1, 2, 3], "item": [1, 2, 10], "relevance": [1, 1, 1]})
    got = run(
        constructor,
        recs,
        truth,
        metrics=["mrr@3", "precision@1"],
        score="score",
        convention="trec_eval",
    )
    assert values(got, "mrr@3") == {1: 1 / 3, 2: 1.0, 3: 1 / 2}
    assert values(got, "mrr@3") == {int(q): trec[q]["recip_rank"] for q in qrels}
    assert values(got, "precision@1") == {int(q): trec[q]["P_1"] for q in qrels}


def test_call_rule_input_when_every_metric_overrides_it(constructor: Constructor) -> None:
    # The call's rule ranks the shared rows even when each metric names its own: with
    # ties="input" at the call and "item" on one metric, both rules must be computable.
    # Rows b, a tied at 0.5 (input order b, a), b relevant.
    recs = pl.DataFrame({"user": 1, "item": ["b", "a", "c"], "score": [0.5, 0.5, 0.1]})
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    metrics = ["ndcg(ties=item)@2", "ndcg@1"]
    got = run(constructor, recs, truth, score="score", metrics=metrics, ties="input")
    # Item order a, b: b at position 2, ndcg = (1/log2 3) / 1.
    assert math.isclose(values(got, "ndcg(ties=item)@2")[1], 1 / LOG3, rel_tol=TOL)
    # Input order b, a: b at position 1.
    assert values(got, "ndcg@1") == {1: 1.0}


# --- ties="average": by hand --------------------------------------------------------------------


def test_average_by_hand(constructor: Constructor) -> None:
    # User 1: e (0.9, not relevant) first, then a, b, c, d tied at 0.5 over positions
    # 2..5, a and c relevant (rel 1). At k = 3 the group has 2 of its 4 positions within k:
    # each of its items is in the top 3 with probability 2/4.
    recs = pl.DataFrame(
        {"user": [1] * 5, "item": list("eabcd"), "score": [0.9, 0.5, 0.5, 0.5, 0.5]}
    )
    truth = pl.DataFrame({"user": [1, 1], "item": ["a", "c"], "relevance": [1, 1]})
    got = run(constructor, recs, truth, metrics=AVERAGED, k=[3, 5], score="score", ties="average")
    row = got.row(0, named=True)
    expected_hits = 2 * 2 / 4
    # DCG: the group's gain sum G = 2 spread over its 4 positions, those within k counted:
    # G/4 · (1/log2(3) + 1/log2(4)).
    dcg = 2 / 4 * (1 / LOG3 + 1 / 2)
    want = {
        "precision@3": expected_hits / 3,
        "recall@3": expected_hits / 2,
        "f1@3": 2 * expected_hits / (3 + 2),
        # 1 - P(neither relevant item in the 2 slots of 4): 1 - C(2, 2)/C(4, 2) = 5/6.
        "hit_rate@3": 1 - 1 / 6,
        "dcg@3": dcg,
        "ndcg@3": dcg / (1 + 1 / LOG3),
        # At k = 5 the whole group is within k.
        "precision@5": 2 / 5,
        "recall@5": 1.0,
        "f1@5": 2 * 2 / (5 + 2),
        "hit_rate@5": 1.0,
        "dcg@5": 2 / 4 * (1 / LOG3 + 1 / 2 + 1 / math.log2(5) + 1 / math.log2(6)),
    }
    want["ndcg@5"] = want["dcg@5"] / (1 + 1 / LOG3)
    for column, value in want.items():
        assert math.isclose(row[column], value, rel_tol=TOL), column
    # The item rule ranks a, b, c, d: a at 2, c at 4 (hits@3 = 1, dcg@3 = 1/log2(3)).
    item = run(constructor, recs, truth, metrics=["precision@3", "dcg@3"], score="score")
    assert item["precision@3"].item() == 1 / 3
    assert math.isclose(item["dcg@3"].item(), 1 / LOG3, rel_tol=TOL)


# --- ties="average": brute force over every order -------------------------------------------------


@dataclass(frozen=True)
class Scored:
    scores: dict[int, dict[int, float]]  # user -> item -> score
    rels: dict[int, dict[int, float]]  # user -> item -> relevance (0 included)

    def recs(self) -> pl.DataFrame:
        rows = [(u, i, s) for u, d in self.scores.items() for i, s in d.items()]
        return pl.DataFrame(
            rows, schema={"user": pl.Int64, "item": pl.Int64, "score": pl.Float64}, orient="row"
        )

    def truth(self) -> pl.DataFrame:
        rows = [(u, i, v) for u, d in self.rels.items() for i, v in d.items()]
        return pl.DataFrame(
            rows, schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64}, orient="row"
        )


@st.composite
def scored_tables(draw: st.DrawFn) -> Scored:
    users = draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True))
    scores: dict[int, dict[int, float]] = {}
    rels: dict[int, dict[int, float]] = {}
    for u in users:
        items = draw(st.lists(st.integers(0, 10), max_size=7, unique=True))
        if items:
            # Scores from a small set: ties are common.
            scores[u] = {i: draw(st.sampled_from([0.25, 0.5, 0.75])) for i in items}
        judged = draw(st.lists(st.integers(0, 10), max_size=6, unique=True))
        if judged:
            rels[u] = {i: draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])) for i in judged}
    return Scored(scores, rels)


def gain_of(relevance: float, gain: str) -> float:
    return float({"linear": relevance, "exponential": 2.0**relevance - 1.0, "binary": 1.0}[gain])


def brute_force(
    scores: Mapping[int, float],
    rels: Mapping[int, float],
    ks: Sequence[int],
    threshold: float | None,
    gain: str,
) -> dict[str, float]:
    """The mean of each metric over every order of the tied items (plain Python)."""
    relevant = {i for i, r in rels.items() if (r > 0 if threshold is None else r >= threshold)}
    ideal = sorted((gain_of(rels[i], gain) for i in relevant), reverse=True)
    groups = [
        [i for i in scores if scores[i] == s] for s in sorted(set(scores.values()), reverse=True)
    ]
    sums: dict[str, list[float]] = {f"{m}@{k}": [] for m in AVERAGED for k in ks}
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for group in combo for i in group]
        for k in ks:
            top = order[:k]
            hits = sum(1 for i in top if i in relevant)
            dcg = sum(
                gain_of(rels[i], gain) / math.log2(position + 1)
                for position, i in enumerate(top, 1)
                if i in relevant
            )
            idcg = sum(g / math.log2(position + 1) for position, g in enumerate(ideal[:k], 1))
            precision, recall = hits / k, hits / len(relevant)
            sums[f"precision@{k}"].append(precision)
            sums[f"recall@{k}"].append(recall)
            sums[f"f1@{k}"].append(
                0.0 if hits == 0 else 2 * precision * recall / (precision + recall)
            )
            sums[f"hit_rate@{k}"].append(1.0 if hits else 0.0)
            sums[f"dcg@{k}"].append(dcg)
            sums[f"ndcg@{k}"].append(dcg / idcg if idcg > 0 else 0.0)
    return {name: math.fsum(v) / len(v) for name, v in sums.items()}


@settings(max_examples=50, deadline=None)
@given(
    table=scored_tables(),
    kind=st.sampled_from(list(CONSTRUCTORS)),
    ks=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
    threshold=st.sampled_from([None, 1.0, 2.0]),
    gain=st.sampled_from(["linear", "exponential", "binary"]),
)
def test_average_is_the_mean_over_every_order(
    table: Scored, kind: str, ks: list[int], threshold: float | None, gain: str
) -> None:
    expected: dict[int, dict[str, float]] = {}
    for u in sorted(set(table.scores) | set(table.rels)):
        rels = table.rels.get(u, {})
        if not any((r > 0 if threshold is None else r >= threshold) for r in rels.values()):
            continue  # no relevant item: left out (empty="skip")
        expected[u] = brute_force(table.scores.get(u, {}), rels, ks, threshold, gain)
    got = run(
        CONSTRUCTORS[kind],
        table.recs(),
        table.truth(),
        metrics=AVERAGED,
        k=ks,
        score="score",
        ties="average",
        threshold=threshold,
        gain=gain,
    )
    assert got["user"].to_list() == list(expected)
    for name in expected[next(iter(expected))] if expected else []:
        assert_close(values(got, name), {u: v[name] for u, v in expected.items()}, name)


# --- ties="average" against scikit-learn ----------------------------------------------------------


@dataclass(frozen=True)
class SkData:
    recs: pl.DataFrame
    truth: pl.DataFrame
    rows: dict[int, tuple[list[float], list[float]]]  # user -> (y_true, y_score) of its list


def make_sk_data(seed: int, n_users: int = 80) -> SkData:
    rng = random.Random(seed)
    rec_rows: list[tuple[int, int, float]] = []
    truth_rows: list[tuple[int, int, int]] = []
    rows: dict[int, tuple[list[float], list[float]]] = {}
    for user in range(n_users):
        judged = rng.sample(range(20), rng.randint(1, 8))
        rels = {i: rng.choice([0, 1, 1, 2, 3]) for i in judged}
        truth_rows += [(user, i, r) for i, r in rels.items()]
        items = rng.sample(range(20), rng.randint(1, 10))
        scores = {i: rng.choice([0.1, 0.2, 0.3, 0.4]) for i in items}
        rec_rows += [(user, i, s) for i, s in scores.items()]
        # sklearn needs two labels or more per row: a pad with gain 0 scored below all,
        # which cannot change any DCG.
        rows[user] = (
            [float(rels.get(i, 0)) for i in items] + [0.0],
            [scores[i] for i in items] + [-1.0],
        )
    recs = pl.DataFrame(
        rec_rows, schema={"user": pl.Int64, "item": pl.Int64, "score": pl.Float64}, orient="row"
    )
    truth = pl.DataFrame(
        truth_rows, schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Int64}, orient="row"
    )
    return SkData(recs, truth, rows)


@pytest.fixture(scope="module")
def sk_data() -> SkData:
    return make_sk_data(1234)


SK_KS = [1, 3, 5, 10]


@pytest.fixture(scope="module")
def sk_scores(sk_data: SkData) -> dict[str, dict[int, float]]:
    """sklearn's tie-averaged dcg and ndcg of each user's recommended items (one row each)."""
    metrics = pytest.importorskip("sklearn.metrics")
    out: dict[str, dict[int, float]] = {}
    for k in SK_KS:
        out[f"dcg@{k}"], out[f"ndcg@{k}"] = {}, {}
        for user, (y_true, y_score) in sk_data.rows.items():
            t, s = np.asarray([y_true]), np.asarray([y_score])
            out[f"dcg@{k}"][user] = float(metrics.dcg_score(t, s, k=k, ignore_ties=False))
            out[f"ndcg@{k}"][user] = float(metrics.ndcg_score(t, s, k=k, ignore_ties=False))
    return out


def test_average_matches_sklearn(
    constructor: Constructor, sk_data: SkData, sk_scores: dict[str, dict[int, float]]
) -> None:
    # R from the listed items only (sklearn sees nothing else); users whose list holds no
    # relevant item are left out here, and score 0 in sklearn's ndcg.
    got = run(
        constructor,
        sk_data.recs,
        sk_data.truth,
        metrics=["dcg", "ndcg"],
        k=SK_KS,
        score="score",
        ties="average",
        relevant_set="listed",
    )
    users = set(got["user"].to_list())
    assert 0 < len(users) < len(sk_data.rows)
    assert all(sk_scores["ndcg@10"][u] == 0.0 for u in set(sk_data.rows) - users)
    for name, per_user in sk_scores.items():
        assert_close(values(got, name), {u: v for u, v in per_user.items() if u in users}, name)
    # dcg does not read R: the default relevant set gives the same dcg.
    plain = run(
        constructor,
        sk_data.recs,
        sk_data.truth,
        metrics="dcg",
        k=SK_KS,
        score="score",
        ties="average",
    )
    for k in SK_KS:
        listed = values(got, f"dcg@{k}")
        assert {u: v for u, v in values(plain, f"dcg@{k}").items() if u in users} == listed
    # Ties matter on this data: the item rule gives other numbers for some users.
    item = run(
        constructor,
        sk_data.recs,
        sk_data.truth,
        metrics="ndcg@3",
        score="score",
        relevant_set="listed",
    )
    assert values(item, "ndcg@3") != values(got, "ndcg@3")


# --- ties="average": errors and no-ops ---------------------------------------------------------

_AVERAGED_NAMES = "dcg, f1, hit_rate, ndcg, precision, recall"


def _average_error(column: str) -> str:
    return (
        f"ties: expected 'item', 'item_desc', 'item_desc_text' or 'input' for {column} "
        f"(ties='average' is defined for {_AVERAGED_NAMES}), got 'average'"
    )


@pytest.mark.parametrize(
    ("kwargs", "column"),
    [
        ({"metrics": ["ndcg@3", "ap@3"], "ties": "average"}, "ap@3"),
        ({"metrics": ["mrr@3", "precision@3"], "ties": "average"}, "mrr@3"),
        ({"ties": "average"}, "mrr@10"),  # the default metrics include mrr and ap
        ({"metrics": ["precision@3", "ap(ties=average)@3"]}, "ap(ties=average)@3"),
        ({"metrics": "mrr(ties=average)@2"}, "mrr(ties=average)@2"),
    ],
)
def test_average_refused_for_ap_and_mrr(
    constructor: Constructor, kwargs: dict[str, Any], column: str
) -> None:
    with raises_exactly(_average_error(column)):
        fm.evaluate(constructor(RULE_RECS), constructor(RULE_TRUTH), score="score", **kwargs)


def test_average_with_a_rule_for_ap(constructor: Constructor) -> None:
    # A metric's own tie rule lifts the refusal for it alone.
    got = run(
        constructor,
        RULE_RECS,
        RULE_TRUTH,
        metrics=["precision@2", "mrr(ties=item)@4"],
        score="score",
        ties="average",
    )
    assert got.columns == ["user", "precision@2", "mrr(ties=item)@4"]
    assert values(got, "mrr(ties=item)@4") == {u: 1 / p for u, p in POSITIONS["item"].items()}
    # precision@2 averaged: position 2 is one of the group's 3 positions (2..4).
    assert_close(values(got, "precision@2"), {1: 1 / 3 / 2, 2: 1 / 3 / 2, 3: 1 / 3 / 2})


RANK_RECS = pl.DataFrame(
    {"user": [1, 1, 1, 1, 2, 2], "item": [1, 2, 3, 4, 1, 5], "rank": [1, 2, 4, 5, 1, 2]}
)
RANK_TRUTH = pl.DataFrame(
    {"user": [1, 1, 1, 2, 3], "item": [2, 4, 9, 5, 1], "relevance": [1, 3, 2, 2, 1]}
)


def test_average_is_a_no_op_with_ranks(constructor: Constructor) -> None:
    """Unique ranks never tie: the option changes nothing, and a warning says so."""
    metrics = [*AVERAGED, "ap", "mrr"]
    default = run(constructor, RANK_RECS, RANK_TRUTH, metrics=metrics, k=[1, 3, 5])
    ignored = r"^ties: 'average' ignored: (recs are|the long table is) ranked by column 'rank'"
    with pytest.warns(IgnoredOptionWarning, match=ignored):
        averaged = run(
            constructor, RANK_RECS, RANK_TRUTH, metrics=metrics, k=[1, 3, 5], ties="average"
        )
    assert averaged.rows() == default.rows()
    long = RANK_RECS.join(RANK_TRUTH, on=["user", "item"], how="full", coalesce=True)
    long_default = run(constructor, long, None, metrics=metrics, k=[1, 3, 5])
    with pytest.warns(IgnoredOptionWarning, match=ignored):
        long_averaged = run(constructor, long, None, metrics=metrics, k=[1, 3, 5], ties="average")
    assert long_averaged.rows() == long_default.rows() == default.rows()
    # A spot check of the values: user 1's hits at ranks 2 (rel 1) and 5 (rel 3).
    assert values(default, "precision@5")[1] == 2 / 5
    assert math.isclose(values(default, "dcg@5")[1], 1 / LOG3 + 3 / math.log2(6), rel_tol=TOL)


# --- diagnostics -------------------------------------------------------------------------------


@pytest.mark.parametrize("ties", ["item", "average"])
def test_diagnose_counts_ties_at_the_cutoff(constructor: Constructor, ties: str) -> None:
    # User 1: scores 0.9, 0.5, 0.5: the 2nd and 3rd tie (at k = 2). User 2: 0.3, 0.3: the
    # 1st and 2nd tie (at k = 1), and differ in relevance (item 2 relevant) within k = 2.
    recs = pl.DataFrame(
        {"user": [1, 1, 1, 2, 2], "item": [1, 2, 3, 1, 2], "score": [0.9, 0.5, 0.5, 0.3, 0.3]}
    )
    truth = pl.DataFrame({"user": [1, 2], "item": [3, 2], "relevance": [1, 1]})
    d = fm.diagnose(
        constructor(recs),
        constructor(truth),
        score="score",
        k=[1, 2],
        ties=ties,
        metrics=["precision"],
    )
    assert d.ties_at_cutoff == {1: 1, 2: 1}
    assert d.ties_within_cutoff == {1: 0, 2: 1}
    assert d.n_users == 2
    # What the rule decided: under "item" user 2's item 1 wins the tie at k = 1; averaged,
    # each of the two is first with probability 1/2.
    got = run(
        constructor,
        recs,
        truth,
        metrics=["precision", "hit_rate"],
        k=[1, 2],
        score="score",
        ties=ties,
    )
    if ties == "item":
        assert got.rows() == [(1, 0.0, 0.0, 0.0, 0.0), (2, 0.0, 1 / 2, 0.0, 1.0)]
    else:
        # User 1: item 3 shares positions 2..3 with item 2: within k = 2 with probability 1/2.
        assert got.rows() == [(1, 0.0, 1 / 4, 0.0, 1 / 2), (2, 1 / 2, 1 / 2, 1 / 2, 1.0)]


# -- lists written user after user: the key flagged sorted, the same values -------------


@settings(max_examples=60, deadline=None)
@given(
    lists=st.lists(
        st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0.1, 0.5, 0.9, 0.5])), max_size=8),
        min_size=1,
        max_size=6,
    ),
    ties=st.sampled_from(["item", "item_desc", "input", "average"]),
    k=st.sampled_from([1, 3, 5]),
    shuffled=st.booleans(),
)
def test_lists_in_user_order_rank_as_any_order(
    lists: list[list[tuple[int, float]]], ties: str, k: int, shuffled: bool
) -> None:
    # A score call reads whether the user key is sorted and, if so, tells polars, which
    # then groups the lists by slicing runs: the values must be those of the same rows
    # grouped by hashing (the flag switched off), for sorted and shuffled rows alike.
    from frame_metrics import prepare

    rows = [
        (user, item, score)
        for user, entries in enumerate(lists)
        for item, score in dict(entries).items()  # one row per (user, item)
    ]
    if shuffled:
        random.Random(len(rows)).shuffle(rows)
    recs = pl.DataFrame(rows, schema=["user", "item", "score"], orient="row")
    truth = recs.filter(pl.col("item") % 3 == 0).select(
        "user", "item", (pl.col("item") % 2 + 1).cast(pl.Float64).alias("relevance")
    )
    call: dict[str, Any] = {"score": "score", "k": k, "ties": ties}
    call["metrics"] = ["precision", "recall", "ndcg"]  # (mrr has no ties="average")
    flagged = fm.evaluate(recs, truth, **call)
    lazy = fm.evaluate(recs.lazy(), truth.lazy(), **call).collect()
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(prepare, "_sorted_flagged", lambda rows, lists: rows)
        hashed = fm.evaluate(recs, truth, **call)
    assert flagged.equals(hashed)
    assert lazy.equals(hashed)
    holds = recs["user"].is_sorted()
    flag = prepare._sorted_flagged(recs.lazy(), ["user"]).collect()["user"].flags
    assert flag["SORTED_ASC"] is holds


def test_chunks_each_in_user_order_are_not_taken_for_a_sorted_key(tmp_path: Any) -> None:
    # Two chunks (or parquet row groups), each sorted by user, together not: the key's
    # order is read across the boundary, so it is not flagged and each user's rows in
    # both chunks form one list.
    from frame_metrics import prepare

    half = pl.DataFrame(
        {"user": [1, 1, 2, 2], "item": [10, 11, 20, 21], "score": [0.9, 0.1, 0.8, 0.2]}
    )
    later = half.with_columns(pl.col("item") + 100, pl.col("score") / 2)
    recs = pl.concat([half, later], rechunk=False)
    assert recs.n_chunks() == 2
    path = tmp_path / "recs.parquet"
    recs.write_parquet(path, row_group_size=4)
    for rows in (recs.lazy(), pl.scan_parquet(path)):
        assert (
            prepare._sorted_flagged(rows, ["user"]).collect()["user"].flags["SORTED_ASC"] is False
        )
    truth = pl.DataFrame({"user": [1, 2], "item": [110, 21], "relevance": [1.0, 1.0]})
    out = fm.evaluate(recs, truth, score="score", metrics=["mrr@4"])
    # user 1: 0.9 (10), 0.45 (110) -> rank 2; user 2: 0.8 (20), 0.4 (120), 0.2 (21) -> 3
    assert out.sort("user")["mrr@4"].to_list() == [1 / 2, 1 / 3]
