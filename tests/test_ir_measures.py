"""IR measures (spec section 8): r_precision, bpref, err@k, rbp and judged@k.

Three sources of truth, none of them the engine:

- worked examples with their arithmetic written out, on every frame kind, from
  recommendations + truth and from the spec's long table;
- hypothesis tables against each metric's slow registry reference
  (``fm.REGISTRY[name].reference``) and an ERR reference written here from the spec's
  formula, on frame kinds drawn by hypothesis, in both input forms;
- peers: trec_eval (pytrec_eval) ``Rprec`` and ``bpref`` at relevance levels 1 and 2, ranx
  ``r-precision``. Peers rank by position, so a gap in ranks is handed to them as a pad
  item without judgement (see tests/test_peers.py).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.metrics.registry import UserCase
from frame_metrics.options import MetricOptions
from tests.conftest import CONSTRUCTORS, Constructor
from tests.conftest import assert_user_values as assert_close
from tests.conftest import evaluate_as_polars as run
from tests.conftest import user_values as values
from tests.test_reference import Table

TOL = 1e-12


# --- helpers -----------------------------------------------------------------------------------


def long_table(recs: pl.DataFrame, truth: pl.DataFrame) -> pl.DataFrame:
    """The spec's long table: null rank for an unrecommended truth item, null relevance
    for a recommended item without a truth row (an unjudged one)."""
    return recs.join(truth, on=["user", "item"], how="full", coalesce=True).select(
        "user", "item", "rank", pl.col("relevance").cast(pl.Float64)
    )


# --- worked examples --------------------------------------------------------------------------
# user 1: truth {a:1, b:2, c:0, d:1, e:0, f:0, g:1}: R = {a, b, d, g} (4), judged
#         non-relevant N = {c, e, f} (3); list c a x e b f d at ranks 1..7 (x unjudged,
#         g not recommended).
# user 2: truth {p:3, q:1}: R = 2, N = 0; list p, r, q at ranks 1, 3, 4 (a gap; r unjudged).
# user 3: truth {a:0}, list [a]: no relevant item, left out.
# user 4: truth {z:2}, no recommendations: 0 everywhere.
# The largest relevance in truth is 3 (err's default g_max: 2^3 = 8).

IR_RECS = pl.DataFrame(
    [
        *((1, item, rank) for rank, item in enumerate("caxebfd", 1)),
        (2, "p", 1),
        (2, "r", 3),
        (2, "q", 4),
        (3, "a", 1),
    ],
    schema={"user": pl.Int64, "item": pl.String, "rank": pl.Int64},
    orient="row",
)
IR_TRUTH = pl.DataFrame(
    [
        *((1, i, r) for i, r in {"a": 1, "b": 2, "c": 0, "d": 1, "e": 0, "f": 0, "g": 1}.items()),
        (2, "p", 3),
        (2, "q", 1),
        (3, "a", 0),
        (4, "z", 2),
    ],
    schema={"user": pl.Int64, "item": pl.String, "relevance": pl.Int64},
    orient="row",
)

FORMS = ("pair", "long")


def run_form(constructor: Constructor, form: str, **kwargs: Any) -> pl.DataFrame:
    if form == "pair":
        return run(constructor, IR_RECS, IR_TRUTH, **kwargs)
    return run(constructor, long_table(IR_RECS, IR_TRUTH), None, **kwargs)


@pytest.mark.parametrize("form", FORMS)
def test_r_precision_by_hand(constructor: Constructor, form: str) -> None:
    got = run_form(constructor, form, metrics=["r_precision", "r_precision(threshold=2)"])
    assert got.columns == ["user", "r_precision", "r_precision(threshold=2)"]
    # User 1: R = 4, ranks 1-4 hold c, a, x, e: one hit. User 2: R = 2, ranks 1-2 hold p.
    assert_close(values(got, "r_precision"), {1: 1 / 4, 2: 1 / 2, 4: 0.0})
    # threshold=2: user 1 R = {b} (rank 5 > 1); user 2 R = {p} (rank 1); user 4 R = {z}.
    assert_close(values(got, "r_precision(threshold=2)"), {1: 0.0, 2: 1.0, 4: 0.0})


@pytest.mark.parametrize("form", FORMS)
def test_bpref_by_hand(constructor: Constructor, form: str) -> None:
    got = run_form(constructor, form, metrics=["bpref", "bpref(threshold=2)"])
    # User 1 (R = 4, N = 3, min(R, N) = 3), walking the list: c judged non-relevant (n = 1);
    # a relevant: 1 - 1/3; x unjudged: skipped; e (n = 2); b: 1 - 2/3; f (n = 3);
    # d: 1 - 3/3; g never retrieved.
    user_1 = ((1 - 1 / 3) + (1 - 2 / 3) + (1 - 3 / 3)) / 4
    # User 2: N = 0, so each retrieved relevant item adds 1: (1 + 1) / 2.
    assert_close(values(got, "bpref"), {1: user_1, 2: 1.0, 4: 0.0})
    # threshold=2. User 1: R = {b}, N = {a, c, d, e, f, g} = 6; above b: c, a, e (3):
    # 1 - min(3, 1) / min(1, 6) = 0. User 2: R = {p}, N = {q}; p first: 1.
    assert_close(values(got, "bpref(threshold=2)"), {1: 0.0, 2: 1.0, 4: 0.0})


def test_bpref_caps_n_r_at_r(constructor: Constructor) -> None:
    # R = {a, b}, N = {c, e, f}; list c a e f b. a: 1 - min(1, 2)/min(2, 3) = 1/2;
    # b has 3 judged non-relevant items above it: 1 - min(3, 2)/2 = 0.
    recs = pl.DataFrame({"user": [1] * 5, "item": list("caefb"), "rank": [1, 2, 3, 4, 5]})
    truth = pl.DataFrame({"user": [1] * 5, "item": list("abcef"), "relevance": [1, 1, 0, 0, 0]})
    got = run(constructor, recs, truth, metrics="bpref")
    assert_close(values(got, "bpref"), {1: (1 / 2 + 0) / 2})


@pytest.mark.parametrize("form", FORMS)
def test_err_by_hand(constructor: Constructor, form: str) -> None:
    metrics = ["err@1", "err@3", "err@5", "err@7", "err(max_relevance=4)@5", "err(threshold=2)@5"]
    got = run_form(constructor, form, metrics=metrics)
    # g_max = 3: P = (2^g - 1) / 8. User 1: c, x, e, f have P = 0; a (g 1) P = 1/8 at
    # rank 2; b (g 2) P = 3/8 at rank 5; d (g 1) P = 1/8 at rank 7.
    a_term = (1 / 2) * (1 / 8)
    b_term = (1 / 5) * (3 / 8) * (1 - 1 / 8)
    d_term = (1 / 7) * (1 / 8) * (1 - 1 / 8) * (1 - 3 / 8)
    assert math.isclose(a_term + b_term, 41 / 320, rel_tol=TOL)
    # User 2: p (g 3) P = 7/8 at rank 1; q (g 1) P = 1/8 at rank 4.
    p_term = 7 / 8
    q_term = (1 / 4) * (1 / 8) * (1 - 7 / 8)
    assert_close(values(got, "err@1"), {1: 0.0, 2: p_term, 4: 0.0})
    assert_close(values(got, "err@3"), {1: a_term, 2: p_term, 4: 0.0})
    assert_close(values(got, "err@5"), {1: a_term + b_term, 2: p_term + q_term, 4: 0.0})
    assert_close(values(got, "err@7"), {1: a_term + b_term + d_term, 2: p_term + q_term, 4: 0.0})
    # max_relevance=4: P = (2^g - 1) / 16.
    assert_close(
        values(got, "err(max_relevance=4)@5"),
        {
            1: (1 / 2) * (1 / 16) + (1 / 5) * (3 / 16) * (15 / 16),
            2: 7 / 16 + (1 / 4) * (1 / 16) * (9 / 16),
            4: 0.0,
        },
    )
    # threshold=2: rel-1 items are not relevant and have P = 0; g_max stays 3.
    assert_close(values(got, "err(threshold=2)@5"), {1: (1 / 5) * (3 / 8), 2: 7 / 8, 4: 0.0})


@pytest.mark.parametrize("form", FORMS)
def test_rbp_by_hand(constructor: Constructor, form: str) -> None:
    got = run_form(constructor, form, metrics=["rbp", "rbp(persistence=0.5)"])
    assert got.columns == ["user", "rbp", "rbp(persistence=0.5)"]
    # Relevant items at ranks 2, 5, 7 (user 1) and 1, 4 (user 2): (1 - p) Σ p^(rank - 1).
    assert_close(
        values(got, "rbp"), {1: 0.2 * (0.8 + 0.8**4 + 0.8**6), 2: 0.2 * (1 + 0.8**3), 4: 0.0}
    )
    assert_close(
        values(got, "rbp(persistence=0.5)"),
        {1: 0.5 * (0.5 + 0.5**4 + 0.5**6), 2: 0.5 * (1 + 0.5**3), 4: 0.0},
    )
    assert math.isclose(values(got, "rbp(persistence=0.5)")[1], 0.2890625, rel_tol=TOL)
    call = run_form(constructor, form, metrics="rbp", persistence=0.5)
    assert values(call, "rbp") == values(got, "rbp(persistence=0.5)")


def test_rbp_under_trec_eval(constructor: Constructor) -> None:
    # trec_eval 10.0: p = 0.9, users in both truth and recs (not 4), a judged user without a
    # relevant item scores 0 (user 3), and each relevant item gains rel / the user's largest
    # judged relevance (user 1: a 1/2 at 2, b 2/2 at 5, d 1/2 at 7; user 2: p 3/3 at 1,
    # q 1/3 at 4).
    got = run(constructor, IR_RECS, IR_TRUTH, metrics="rbp", convention="trec_eval")
    assert_close(
        values(got, "rbp"),
        {
            1: 0.1 * (0.5 * 0.9 + 1.0 * 0.9**4 + 0.5 * 0.9**6),
            2: 0.1 * (1.0 + 0.9**3 / 3),
            3: 0.0,
        },
    )
    # The spec's binary rbp under the same preset: each relevant item adds 1.
    binary = run(
        constructor, IR_RECS, IR_TRUTH, metrics="rbp", convention="trec_eval", rbp_gain="binary"
    )
    assert_close(
        values(binary, "rbp"), {1: 0.1 * (0.9 + 0.9**4 + 0.9**6), 2: 0.1 * (1 + 0.9**3), 3: 0.0}
    )
    # ranx rbp.9: the relevance itself (1, 2, 1; 3, 1), users of the truth (4 scores 0).
    ranx = run(constructor, IR_RECS, IR_TRUTH, metrics="rbp(persistence=0.9)", convention="ranx")
    assert_close(
        values(ranx, "rbp(persistence=0.9)"),
        {
            1: 0.1 * (0.9 + 2 * 0.9**4 + 0.9**6),
            2: 0.1 * (3 + 0.9**3),
            3: 0.0,
            4: 0.0,
        },
    )


@pytest.mark.parametrize("form", FORMS)
def test_judged_by_hand(constructor: Constructor, form: str) -> None:
    got = run_form(constructor, form, metrics="judged", k=[3, 5, 10])
    # Judged = a truth row of any relevance. User 1: c, a, (x), e, b, f, d; user 2: p, (r), q.
    assert_close(values(got, "judged@3"), {1: 2 / 3, 2: 1 / 3, 4: 0.0})
    assert_close(values(got, "judged@5"), {1: 4 / 5, 2: 2 / 5, 4: 0.0})
    assert_close(values(got, "judged@10"), {1: 6 / 10, 2: 2 / 10, 4: 0.0})


def test_empty_zero_scores_the_judged_user(constructor: Constructor) -> None:
    metrics = ["r_precision", "bpref", "err@3", "rbp", "judged@3"]
    got = run(constructor, IR_RECS, IR_TRUTH, metrics=metrics, empty="zero")
    assert got["user"].to_list() == [1, 2, 3, 4]
    assert got.filter(pl.col("user") == 3).row(0) == (3, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_err_g_max_ignores_relevant_set(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "c"], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "b"], "relevance": [1, 3]})
    got = run(constructor, recs, truth, metrics=["err@1", "err(relevant_set=listed)@1"])
    assert values(got, "err@1") == {1: 1 / 8, 2: 0.0}
    # relevant_set changes R only: user 2's b (not recommended) leaves R, not truth.
    assert values(got, "err(relevant_set=listed)@1") == {1: 1 / 8}


# --- hypothesis: the registry references and an ERR written from the spec --------------------


@st.composite
def tables(draw: st.DrawFn) -> Table:
    users = draw(st.lists(st.integers(-20, 20), min_size=1, max_size=6, unique=True))
    ranks: dict[int, dict[int, int]] = {}
    rels: dict[int, dict[int, float]] = {}
    for u in users:
        items = draw(st.lists(st.integers(0, 12), max_size=8, unique=True))
        rank_values = draw(
            st.lists(st.integers(1, 12), min_size=len(items), max_size=len(items), unique=True)
        )
        if items:
            ranks[u] = dict(zip(items, rank_values, strict=True))
        judged = draw(st.lists(st.integers(0, 12), max_size=8, unique=True))
        levels = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
        if judged:
            rels[u] = {i: draw(levels) for i in judged}
    return Table(ranks, rels)


def err_reference(
    ranks: Mapping[int, int],
    rels: Mapping[int, float],
    k: int,
    threshold: float | None,
    g_max: float,
) -> float:
    """ERR@k from the spec: Σ_{r<=k} (1/r) P_r Π_{i<r} (1 - P_i), P = (2^g - 1) / 2^g_max,
    g the relevance of a relevant item, 0 otherwise (positions without an item: P = 0)."""
    total, reach = 0.0, 1.0
    for item, rank in sorted(ranks.items(), key=lambda p: p[1]):
        if rank > k:
            break
        rel = rels.get(item, 0.0)
        relevant = rel > 0 if threshold is None else rel >= threshold
        p = (2.0 ** (rel if relevant else 0.0) - 1.0) / 2.0**g_max
        total += reach * p / rank
        reach *= 1.0 - p
    return total


@settings(max_examples=50, deadline=None)
@given(
    table=tables(),
    kind=st.sampled_from(list(CONSTRUCTORS)),
    threshold=st.sampled_from([None, 1.0, 2.0]),
    persistence=st.sampled_from([None, 0.5, 0.95]),
    rbp_gain=st.sampled_from(["binary", "relevance", "relative"]),
    max_relevance=st.sampled_from([None, 5.0]),
    empty=st.sampled_from(["skip", "zero"]),
    k=st.integers(1, 9),
)
def test_ir_measures_match_references(
    table: Table,
    kind: str,
    threshold: float | None,
    persistence: float | None,
    rbp_gain: str,
    max_relevance: float | None,
    empty: str,
    k: int,
) -> None:
    constructor = CONSTRUCTORS[kind]
    recs, truth = table.recs(), table.truth()
    metrics = ["r_precision", "bpref", f"err@{k}", "rbp", f"judged@{k}"]
    options: dict[str, Any] = {
        "threshold": threshold,
        "persistence": persistence,
        "rbp_gain": rbp_gain,
        "max_relevance": max_relevance,
        "empty": empty,
    }
    # err's default g_max: the largest relevance in all of truth.
    all_relevance = [v for d in table.rels.values() for v in d.values()]
    g_max = max_relevance if max_relevance is not None else max(all_relevance, default=0.0)
    reference_options = MetricOptions(
        threshold=threshold,
        persistence=0.8 if persistence is None else persistence,
        max_relevance=g_max if g_max > 0 else None,
        rbp_gain=rbp_gain,  # type: ignore[arg-type]
    )
    expected: dict[int, dict[str, float]] = {}
    for u in sorted(set(table.ranks) | set(table.rels)):
        case = UserCase(table.ranks.get(u, {}), table.rels.get(u, {}))
        if not case.relevant(reference_options):
            if empty == "zero":
                expected[u] = dict.fromkeys(metrics, 0.0)
            continue
        want = {
            m: fm.REGISTRY[m.split("@")[0]].reference(case, k, reference_options) for m in metrics
        }
        ours = err_reference(case.ranks, case.relevance, k, threshold, g_max)
        assert math.isclose(want[f"err@{k}"], ours, rel_tol=TOL, abs_tol=TOL)
        expected[u] = want
    forms: dict[str, tuple[pl.DataFrame, pl.DataFrame | None]] = {"pair": (recs, truth)}
    if recs.height or truth.height:
        # The long table: a judged item is a row with a relevance (0 included).
        forms["long"] = (long_table(recs, truth), None)
    for form, (first, second) in forms.items():
        got = run(constructor, first, second, metrics=metrics, **options)
        assert got["user"].to_list() == list(expected), form
        for metric in metrics:
            assert_close(
                values(got, metric), {u: v[metric] for u, v in expected.items()}, f"{form} {metric}"
            )
        mean = run(constructor, first, second, metrics=metrics, aggregate=True, **options)
        if not expected:
            # No evaluated user: n_users 0 and null means, unless nothing came in at all
            # (every metric here reads whole lists: every row shows the call).
            shown = [(0, *[None] * len(metrics))] if recs.height or truth.height else []
            assert mean.rows() == shown, form
            continue
        assert mean["n_users"].item() == len(expected)
        for metric in metrics:
            want_mean = math.fsum(v[metric] for v in expected.values()) / len(expected)
            assert math.isclose(mean[metric].item(), want_mean, rel_tol=TOL, abs_tol=TOL), metric


# --- peers -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerData:
    recs: pl.DataFrame
    truth: pl.DataFrame
    #: Each user's list as peers see it: {doc: score} with pads standing for rank gaps.
    run: dict[str, dict[str, float]]
    qrels: dict[str, dict[str, int]]


def make_peer_data(seed: int, n_users: int = 120) -> PeerData:
    """Users with gapped ranks, graded relevance 0-3 (zeros judged non-relevant), some
    without recommendations, some judged only at 0."""
    rng = random.Random(seed)
    rec_rows: list[tuple[int, int, int]] = []
    truth_rows: list[tuple[int, int, int]] = []
    for user in range(n_users):
        judged = rng.sample(range(40), rng.randint(1, 10))
        levels = [0, 0, 1, 2, 3] if rng.random() > 0.1 else [0]
        truth_rows += [(user, i, rng.choice(levels)) for i in judged]
        if rng.random() < 0.1:
            continue  # no recommendations
        pool = list(set(judged) | set(rng.sample(range(40), 8)))
        items = rng.sample(pool, rng.randint(1, min(12, len(pool))))
        rank = 0
        for item in items:
            rank += rng.choice([1, 1, 1, 2, 3])
            rec_rows.append((user, item, rank))
    recs = pl.DataFrame(
        rec_rows, schema={"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64}, orient="row"
    )
    truth = pl.DataFrame(
        truth_rows, schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Int64}, orient="row"
    )
    qrels: dict[str, dict[str, int]] = {}
    for user, item, rel in truth_rows:
        qrels.setdefault(str(user), {})[str(item)] = rel
    by_rank: dict[int, dict[int, int]] = {}
    for user, item, rank in rec_rows:
        by_rank.setdefault(user, {})[rank] = item
    run_dict: dict[str, dict[str, float]] = {}
    for q in qrels:
        ranked = by_rank.get(int(q), {})
        run_dict[q] = {
            (str(ranked[p]) if p in ranked else f"pad{p}"): -float(p)
            for p in range(1, max(ranked, default=0) + 1)
        }
    return PeerData(recs, truth, run_dict, qrels)


@pytest.fixture(scope="module")
def peer_data() -> PeerData:
    return make_peer_data(20240611)


def relevant_users(truth: pl.DataFrame, level: int) -> set[int]:
    return set(truth.filter(pl.col("relevance") >= level)["user"].to_list())


@pytest.mark.parametrize("level", [1, 2])
def test_trec_eval_rprec_and_bpref(
    constructor: Constructor, peer_data: PeerData, level: int
) -> None:
    # trec_eval: Rprec = relevant in the top R / R; bpref as the spec writes it, N = judged
    # documents below relevance_level. Queries without a relevant document are left out
    # here (frame_metrics' default empty="skip").
    pytrec_eval = pytest.importorskip("pytrec_eval")
    evaluator = pytrec_eval.RelevanceEvaluator(
        peer_data.qrels, {"Rprec", "bpref"}, relevance_level=level
    )
    trec = evaluator.evaluate(peer_data.run)
    got = run(
        constructor,
        peer_data.recs,
        peer_data.truth,
        metrics=["r_precision", "bpref"],
        threshold=level,
    )
    users = relevant_users(peer_data.truth, level)
    assert set(got["user"].to_list()) == users
    # Some users have judged non-relevant items above relevant ones, others none.
    assert 0 < sum(trec[str(u)]["bpref"] < 1 for u in users) < len(users)
    for measure, column in (("Rprec", "r_precision"), ("bpref", "bpref")):
        assert_close(values(got, column), {u: trec[str(u)][measure] for u in users}, measure)


@pytest.mark.parametrize("level", [1, 2])
def test_ranx_r_precision(constructor: Constructor, peer_data: PeerData, level: int) -> None:
    ranx = pytest.importorskip("ranx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qrels = ranx.Qrels.from_dict(peer_data.qrels)
        # ranx needs a document per query: a pad, unjudged, for users without a list.
        run_obj = ranx.Run.from_dict({q: d or {"pad0": 0.0} for q, d in peer_data.run.items()})
        name = f"r-precision-l{level}"
        ranx.evaluate(qrels, run_obj, [name], return_mean=False)
    scores = {int(q): float(v) for q, v in run_obj.scores[name].items()}
    got = run(constructor, peer_data.recs, peer_data.truth, metrics="r_precision", threshold=level)
    users = relevant_users(peer_data.truth, level)
    assert_close(values(got, "r_precision"), {u: scores[u] for u in users}, name)
