"""Expected exposure (spec 9.2): ee_loss, ee_disparity and ee_relevance.

Values written out from the spec's definition, a pure-Python reference under
hypothesis (graded relevance with ties, lists shorter than k, several samples per user,
users without a list), expeval's own computation transcribed (the authors' code), and
the same bits whatever the row order, frame kind, buckets, Dask and Spark.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import InvalidOptionError
from frame_metrics.families.expected_exposure import ExposureCase
from frame_metrics.options import MetricOptions
from tests.conftest import Constructor, to_polars

pytestmark = pytest.mark.filterwarnings(
    # Random worlds: their users and items need not meet (frame_metrics.id_match).
    "ignore::frame_metrics.errors.UnmatchedIdsWarning"
)

EE = ["ee_loss", "ee_disparity", "ee_relevance"]

# -- the spec's example, written out -----------------------------------------------------
#
# User 1: relevant {a: 2, b: 1, c: 1}, ranking [c, a], p = 0.5, k = 2.
#   ε = {c: p^0 = 1, a: p^1 = 0.5}.
#   ε*: grade 2 (m = 1, b = 0) holds position 1: ε*_a = 1; grade 1 (m = 2, b = 1)
#   holds positions 2..min(3, 2) = 2: ε*_b = ε*_c = 0.5 / 2 = 0.25.
#   disparity = 1² + 0.5² = 1.25; relevance = 1·0.25 + 0.5·1 = 0.75;
#   loss = (0.5 - 1)² + (0 - 0.25)² + (1 - 0.25)² = 0.25 + 0.0625 + 0.5625 = 0.875;
#   ‖ε*‖² = 1 + 0.0625 + 0.0625 = 1.125 = 0.875 - 1.25 + 2·0.75 (the identity).
# User 2: relevant {a: 1}, no list: ε = 0, loss = ‖ε*‖² = 1, disparity = relevance = 0.
# User 3: a list [a], nothing relevant: not evaluated (spec section 3).
RECS = pl.DataFrame({"user": [1, 1, 3], "item": ["c", "a", "a"], "rank": [1, 2, 1]})
TRUTH = pl.DataFrame(
    {"user": [1, 1, 1, 2], "item": ["a", "b", "c", "a"], "relevance": [2.0, 1.0, 1.0, 1.0]}
)
WORKED = {1: (0.875, 1.25, 0.75), 2: (1.0, 0.0, 0.0)}


def test_the_spec_example_on_every_frame_kind(constructor: Constructor) -> None:
    got = to_polars(fm.evaluate(constructor(RECS), constructor(TRUTH), metrics=EE, k=2))
    assert got.columns == ["user", "ee_loss@2", "ee_disparity@2", "ee_relevance@2"]
    assert {row[0]: row[1:] for row in got.rows()} == WORKED
    mean = to_polars(
        fm.evaluate(constructor(RECS), constructor(TRUTH), metrics=EE, k=2, aggregate=True)
    )
    assert mean.rows() == [(2, (0.875 + 1.0) / 2, 1.25 / 2, 0.75 / 2)]


def test_the_identity_loss_is_disparity_minus_twice_relevance_plus_the_target_norm() -> None:
    got = fm.evaluate(RECS, TRUTH, metrics=EE, k=2).row(0)
    target_norm = 1.0 + 0.25**2 + 0.25**2
    assert got[1] == got[2] - 2 * got[3] + target_norm


def test_many_cutoffs_and_persistence() -> None:
    # k = 1: ε = {c: 1}; grade 2 holds position 1 (ε*_a = 1), grade 1 no position
    # within 1: loss = 1 + 1 = 2, disparity 1, relevance 0.
    # k = 3, p = 0.8: ε = {c: 1, a: 0.8}; ε*_a = 1, grade 1 holds positions 2, 3:
    # (0.8 + 0.64) / 2 = 0.72 each. loss = 0.2² + 0.72² + 0.28², disparity = 1 + 0.64,
    # relevance = 0.72 + 0.8.
    got = fm.evaluate(RECS, TRUTH, metrics=EE, k=[1, 3], persistence=0.8)
    one = got.filter(pl.col("user") == 1).row(0, named=True)
    assert one["ee_loss@1"] == 2.0
    assert one["ee_disparity@1"] == 1.0
    assert one["ee_relevance@1"] == 0.0
    assert one["ee_loss@3"] == pytest.approx(0.2**2 + 0.72**2 + 0.28**2, rel=1e-15)
    assert one["ee_disparity@3"] == pytest.approx(1 + 0.64, rel=1e-15)
    assert one["ee_relevance@3"] == pytest.approx(0.72 + 0.8, rel=1e-15)


def test_an_ideal_deterministic_ranking_has_no_loss() -> None:
    # Distinct grades ranked by grade: ε = ε* term by term, so the loss is exactly 0.
    recs = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "rank": [1, 2, 3]})
    truth = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "relevance": [3.0, 2.0, 1.0]})
    got = fm.evaluate(recs, truth, metrics=EE, k=[2, 3], persistence=0.7).row(0, named=True)
    assert got["ee_loss@2"] == 0.0
    assert got["ee_loss@3"] == 0.0
    assert got["ee_disparity@3"] == got["ee_relevance@3"]
    assert got["ee_disparity@3"] == pytest.approx(1 + 0.7**2 + 0.7**4, rel=1e-15)


def test_the_loss_reaches_its_bound_when_no_attention_falls_on_a_relevant_item() -> None:
    # The scale the registry gives ee_loss: for ε, ε* >= 0, ‖ε − ε*‖² <= ‖ε‖² + ‖ε*‖²,
    # equal when ε·ε* = 0, and each norm is at most one full list's Σ_{r<=k} p^(2(r−1)).
    # User 1: relevant a, b, c of distinct grades, shown x, y, z (nothing relevant) at
    # k = 3, p = 0.5: ε over x, y, z and ε* over a, b, c are both (1, 0.5, 0.25).
    # User 2: the same relevant items and no list: the loss of an empty list is ‖ε*‖².
    recs = pl.DataFrame({"user": 1, "item": ["x", "y", "z"], "rank": [1, 2, 3]})
    truth = pl.DataFrame(
        {"user": [1, 1, 1, 2, 2, 2], "item": ["a", "b", "c"] * 2, "relevance": [3, 2, 1] * 2}
    )
    got = fm.evaluate(recs, truth, metrics=EE, k=[1, 3])
    rows = {row["user"]: row for row in got.iter_rows(named=True)}
    full = 1 + 0.5**2 + 0.25**2  # Σ_{r<=3} 0.5^(2(r−1))
    assert full == (1 - 0.5**6) / (1 - 0.5**2)
    assert rows[1]["ee_loss@3"] == 2 * full == 2.625
    assert rows[1]["ee_disparity@3"] == full
    assert rows[1]["ee_relevance@3"] == 0.0
    assert rows[1]["ee_loss@1"] == 2.0  # 2(1 − p²)/(1 − p²) at k = 1
    assert rows[2]["ee_loss@3"] == full  # ‖ε*‖², the empty list's loss
    assert rows[2]["ee_loss@1"] == 1.0


def test_samples_average_the_exposure_over_each_users_own_rankings(
    constructor: Constructor,
) -> None:
    # User 1, three samples: [a, b], [b, a], [c] (p = 0.5, k = 2):
    #   ε_a = (1 + 0.5 + 0) / 3 = 0.5, ε_b = 0.5, ε_c = 1 / 3.
    #   Relevant {a: 1, b: 1}: one grade, m = 2, positions 1, 2: ε* = 1.5 / 2 = 0.75 each.
    #   loss = 2·0.25² + (1/3)², disparity = 2·0.25 + 1/9, relevance = 2·0.5·0.75.
    # User 2, one sample [a]: ε_a = 1; relevant {a}: ε*_a = 1; loss 0.
    recs = pl.DataFrame(
        {
            "user": [1, 1, 1, 1, 1, 2],
            "draw": [1, 1, 2, 2, 3, 7],
            "item": ["a", "b", "b", "a", "c", "a"],
            "rank": [1, 2, 1, 2, 1, 1],
        }
    )
    truth = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "a"], "relevance": [1, 1, 1]})
    got = to_polars(
        fm.evaluate(constructor(recs), constructor(truth), metrics=EE, k=2, sample="draw")
    )
    one, two = got.rows()
    assert one[0] == 1
    assert one[1] == pytest.approx(2 * 0.25**2 + 1 / 9, rel=1e-15)
    assert one[2] == pytest.approx(2 * 0.25 + 1 / 9, rel=1e-15)
    assert one[3] == 0.75
    assert two == (2, 0.0, 1.0, 1.0)


def test_a_sample_without_an_item_within_k_still_counts() -> None:
    # Two samples: [a] and [b, a] read at k = 1 ... and a third whose only item is at rank 5.
    recs = pl.DataFrame(
        {"user": 1, "draw": [1, 2, 2, 3], "item": ["a", "b", "a", "a"], "rank": [1, 1, 2, 5]}
    )
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [1]})
    got = fm.evaluate(recs, truth, metrics="ee_disparity", k=1, sample="draw")
    # ε_a = 1/3, ε_b = 1/3 (three rankings): disparity = 2/9.
    assert got["ee_disparity@1"].item() == pytest.approx(2 / 9, rel=1e-15)


def test_scores_rank_each_sample_on_its_own() -> None:
    recs = pl.DataFrame(
        {"user": 1, "draw": [1, 1, 2, 2], "item": ["a", "b", "a", "b"], "s": [0.9, 0.1, 0.2, 0.8]}
    )
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [1]})
    got = fm.evaluate(recs, truth, metrics="ee_relevance", k=2, score="s", sample="draw")
    # ε_a = (1 + 0.5) / 2 = 0.75; ε*_a = 1.
    assert got["ee_relevance@2"].item() == 0.75


def test_tied_scores_average_the_attention_over_the_tie_group() -> None:
    # a and b tie at positions 1..2, c at 3; k = 2, p = 0.5: each tied item's expected
    # attention is (1 + 0.5) / 2 = 0.75; c gets 0. Relevant {a}: ε*_a = 1.
    recs = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "s": [1.0, 1.0, 0.5]})
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [1]})
    got = fm.evaluate(recs, truth, metrics=EE, k=2, score="s", ties="average").row(0)
    assert got == (1, 0.25**2 + 0.75**2, 2 * 0.75**2, 0.75)
    # A group straddling k: b, c, d tie at positions 2..4, k = 2: each gets 0.5 / 3.
    wide = pl.DataFrame({"user": 1, "item": ["a", "b", "c", "d"], "s": [2.0, 1.0, 1.0, 1.0]})
    out = fm.evaluate(wide, truth, metrics="ee_disparity", k=2, score="s", ties="average")
    assert out.item(0, 1) == pytest.approx(1 + 3 * (0.5 / 3) ** 2, rel=1e-15)


def test_empty_and_users_follow_the_ranking_policy() -> None:
    # User 3 has a list and nothing relevant: left out, or 0 under empty="zero".
    zero = fm.evaluate(RECS, TRUTH, metrics="ee_loss", k=2, empty="zero")
    assert zero.rows() == [(1, 0.875), (2, 1.0), (3, 0.0)]
    # users="recs": user 2 (no recommendation) is not evaluated.
    recs_only = fm.evaluate(RECS, TRUTH, metrics="ee_loss", k=2, users="recs")
    assert recs_only.rows() == [(1, 0.875)]
    # threshold=2: only a is relevant for user 1 (ε*_a = 1); user 2 has none.
    strict = fm.evaluate(RECS, TRUTH, metrics="ee_loss", k=2, threshold=2)
    assert strict.rows() == [(1, 0.5**2 + 1.0)]


def test_by_groups_are_independent_evaluations(constructor: Constructor) -> None:
    stacked = pl.concat(
        [
            RECS.with_columns(model=pl.lit("x")),
            pl.DataFrame({"user": [1, 1], "item": ["a", "c"], "rank": [1, 2], "model": "y"}),
        ],
        how="diagonal",
    )
    got = to_polars(
        fm.evaluate(constructor(stacked), constructor(TRUTH), metrics="ee_loss", k=2, by="model")
    )
    # Model y ranks a, c: ε = {a: 1, c: 0.5}, ε* = {a: 1, b: 0.25, c: 0.25}:
    # loss = 0 + 0.0625 + 0.0625 = 0.125; user 2 (no list) has loss 1 in both models.
    assert got.sort("model", "user").rows() == [
        ("x", 1, 0.875),
        ("x", 2, 1.0),
        ("y", 1, 0.125),
        ("y", 2, 1.0),
    ]


# -- a pure-Python reference under hypothesis --------------------------------------------


def reference(
    rankings: Sequence[Mapping[Any, int]],
    relevance: Mapping[Any, float],
    k: int,
    p: float,
    threshold: float | None,
) -> tuple[float, float, float]:
    """(loss, disparity, relevance) of one user, from the spec's words."""
    eps: dict[Hashable, float] = {}
    for ranking in rankings:
        for item, rank in ranking.items():
            if rank <= k:
                eps[item] = eps.get(item, 0.0) + p ** (rank - 1) / len(rankings)
    rel = {i: r for i, r in relevance.items() if (r > 0 if threshold is None else r >= threshold)}
    # The ideal ranking: relevant items by grade, descending; position j gets p^(j-1)
    # within k; a grade's items share its positions' attention equally.
    ideal = sorted(rel.values(), reverse=True)
    target: dict[Hashable, float] = {}
    for item, grade in rel.items():
        positions = [j for j, g in enumerate(ideal, start=1) if g == grade]
        target[item] = sum(p ** (j - 1) for j in positions if j <= k) / len(positions)
    items = set(eps) | set(target)
    loss = sum((eps.get(i, 0.0) - target.get(i, 0.0)) ** 2 for i in items)
    disparity = sum(v * v for v in eps.values())
    relevance_ = sum(eps[i] * target[i] for i in eps if i in target)
    return loss, disparity, relevance_


@dataclass
class World:
    """Per user: several rankings (item -> rank, gaps allowed) and graded truth."""

    rankings: dict[int, list[dict[int, int]]]
    relevance: dict[int, dict[int, float]]

    def recs(self) -> pl.DataFrame:
        rows = [
            (u, s, i, r)
            for u, samples in self.rankings.items()
            for s, ranking in enumerate(samples)
            for i, r in ranking.items()
        ]
        schema = {"user": pl.Int64, "draw": pl.Int64, "item": pl.Int64, "rank": pl.Int64}
        return pl.DataFrame(rows, schema=schema, orient="row")

    def truth(self) -> pl.DataFrame:
        rows = [(u, i, v) for u, d in self.relevance.items() for i, v in d.items()]
        schema = {"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64}
        return pl.DataFrame(rows, schema=schema, orient="row")


@st.composite
def worlds(draw: st.DrawFn, max_samples: int = 3) -> World:
    users = draw(st.lists(st.integers(1, 30), min_size=1, max_size=6, unique=True))
    rankings: dict[int, list[dict[int, int]]] = {}
    relevance: dict[int, dict[int, float]] = {}
    for u in users:
        samples = []
        for _ in range(draw(st.integers(0, max_samples))):
            items = draw(st.lists(st.integers(0, 7), min_size=1, max_size=6, unique=True))
            ranks = sorted(
                draw(
                    st.lists(
                        st.integers(1, 9), min_size=len(items), max_size=len(items), unique=True
                    )
                )
            )
            samples.append(dict(zip(items, ranks, strict=True)))
        if samples:
            rankings[u] = samples
        graded = draw(st.dictionaries(st.integers(0, 7), st.sampled_from([0.0, 1.0, 2.0, 3.0])))
        if graded:
            relevance[u] = graded
    return World(rankings, relevance)


def _check(world: World, got: pl.DataFrame, ks: list[int], p: float, t: float | None) -> None:
    """Every user with a relevant item has the reference's values; no one else a row."""
    population = {
        u
        for u, graded in world.relevance.items()
        if any((r > 0 if t is None else r >= t) for r in graded.values())
    }
    assert set(got["user"]) == population
    for row in got.iter_rows(named=True):
        u = row["user"]
        for k in ks:
            want = reference(world.rankings.get(u, []), world.relevance.get(u, {}), k, p, t)
            for name, value in zip(EE, want, strict=True):
                assert math.isclose(row[f"{name}@{k}"], value, rel_tol=1e-12, abs_tol=1e-15), (
                    u,
                    name,
                    k,
                )


@settings(max_examples=120, deadline=None)
@given(
    world=worlds(),
    ks=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
    persistence=st.sampled_from([None, 0.3, 0.5, 0.9]),
    threshold=st.sampled_from([None, 2.0]),
)
def test_random_worlds_match_the_reference(
    world: World, ks: list[int], persistence: float | None, threshold: float | None
) -> None:
    got = fm.evaluate(
        world.recs(),
        world.truth(),
        metrics=EE,
        k=ks,
        sample="draw",
        persistence=persistence,
        threshold=threshold,
    )
    p = 0.5 if persistence is None else persistence
    _check(world, got, sorted(ks), p, threshold)
    # The registry's reference agrees, and the identity holds.
    options = MetricOptions(persistence=persistence, threshold=threshold)
    for row in got.iter_rows(named=True):
        u = row["user"]
        case = ExposureCase(world.rankings.get(u, []), world.relevance.get(u, {}))
        for k in ks:
            for name in EE:
                want = fm.REGISTRY[name].reference(case, k, options)
                assert math.isclose(row[f"{name}@{k}"], want, rel_tol=1e-12, abs_tol=1e-15)
            # ‖ε*‖²: the loss of a user without a list (ε = 0).
            norm = reference([], world.relevance.get(u, {}), k, p, threshold)[0]
            identity = row[f"ee_disparity@{k}"] - 2 * row[f"ee_relevance@{k}"] + norm
            assert math.isclose(row[f"ee_loss@{k}"], identity, rel_tol=1e-9, abs_tol=1e-12)
    # Aggregated: the plain mean over the evaluated users.
    mean = fm.evaluate(
        world.recs(),
        world.truth(),
        metrics=EE,
        k=ks,
        sample="draw",
        persistence=persistence,
        threshold=threshold,
        aggregate=True,
    )
    if got.height:
        assert mean["n_users"].item() == got.height
        for column in got.columns[1:]:
            assert math.isclose(
                mean[column].item(), math.fsum(got[column]) / got.height, rel_tol=1e-15
            )


@settings(max_examples=60, deadline=None)
@given(
    world=worlds(max_samples=1), ks=st.lists(st.integers(1, 8), min_size=1, max_size=2, unique=True)
)
def test_one_ranking_per_user_needs_no_sample_column(world: World, ks: list[int]) -> None:
    recs = world.recs().drop("draw")
    got = fm.evaluate(recs, world.truth(), metrics=EE, k=ks)
    _check(world, got, sorted(ks), 0.5, None)


# -- expeval (diazf/expeval), transcribed ----------------------------------------------
#
# expeval is not on PyPI. Its computation, from exposure.py (expected, target with
# umType="rbp") and util.py (l2, distance, dot) at commit 69ab070, transcribed; the CLI's
# defaults differ (-u gerr, normalised: -U gives the raw values), so we compare with
# "-u rbp -U". Its ideal ranking is not cut at k: the values agree where every relevant
# item fits within k, and each ranking is a whole permutation (ranks 1..n, n <= k).


def _expeval_expected(permutations: dict[str, list[str]], p: float) -> dict[str, float]:
    num_samples = len(permutations.keys())
    exposures: dict[str, float] = {}
    for permutation in permutations.values():
        for i in range(len(permutation)):
            did = permutation[i]
            if did not in exposures:
                exposures[did] = 0.0
            e_i = p ** (i)
            exposures[did] += e_i / num_samples
    return exposures


def _expeval_target(qrels: dict[str, int], p: float) -> dict[str, float]:
    accumulators: dict[int, int] = {}
    for rel in qrels.values():
        accumulators[rel] = accumulators.get(rel, 0) + 1
    levels = sorted(([k, v] for k, v in accumulators.items()), reverse=True)
    b = 0
    per_level = {}
    for g, m in levels:
        per_level[g] = (p ** (b) - p ** (b + m)) / (m * (1.0 - p))
        b = b + m
    return {did: per_level[rel] for did, rel in qrels.items()}


def _expeval_l2(x: dict[str, float]) -> float:
    retval = 0.0
    for v in x.values():
        retval = retval + v * v
    return retval


def _expeval_distance(x: dict[str, float], y: dict[str, float]) -> float:
    retval = 0.0
    for key in set(x) | set(y):
        d = x.get(key, 0.0) - y.get(key, 0.0)
        retval = retval + d * d
    return retval


def _expeval_dot(x: dict[str, float], y: dict[str, float]) -> float:
    return sum(x[key] * y[key] for key in set(x) & set(y))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), persistence=st.sampled_from([0.5, 0.8]))
def test_expeval_gives_the_same_values_where_its_ideal_fits_within_k(
    data: st.DataObject, persistence: float
) -> None:
    k = 6
    users = data.draw(st.integers(1, 4))
    rows, truth_rows, want = [], [], {}
    for u in range(users):
        samples = {}
        for s in range(data.draw(st.integers(1, 3))):
            items = data.draw(
                st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=k, unique=True)
            )
            samples[str(s)] = items
            rows += [(u, s, i, r) for r, i in enumerate(items, start=1)]
        # Relevant items (relevance > 0: expeval's incomplete qrels) that fit within k.
        qrels = data.draw(
            st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 3), min_size=1, max_size=k)
        )
        truth_rows += [(u, i, float(r)) for i, r in qrels.items()]
        run = _expeval_expected(samples, persistence)
        target = _expeval_target(qrels, persistence)
        want[u] = (_expeval_distance(target, run), _expeval_l2(run), _expeval_dot(target, run))
    recs = pl.DataFrame(rows, schema=["user", "draw", "item", "rank"], orient="row")
    truth = pl.DataFrame(truth_rows, schema=["user", "item", "relevance"], orient="row")
    got = fm.evaluate(recs, truth, metrics=EE, k=k, sample="draw", persistence=persistence)
    assert got.height == users
    for row in got.rows():
        for value, expected in zip(row[1:], want[row[0]], strict=True):
            assert math.isclose(value, expected, rel_tol=1e-12, abs_tol=1e-15)


def test_expeval_does_not_cut_its_ideal_at_k() -> None:
    # Three relevant items of one grade, k = 2: expeval's target shares three positions
    # (1 + 0.5 + 0.25) / 3 = 7/12 each; the spec's shares the two within k: 0.5 each.
    qrels = {"a": 1, "b": 1, "c": 1}
    assert _expeval_target(qrels, 0.5)["a"] == pytest.approx(7 / 12)
    recs = pl.DataFrame({"user": 1, "item": ["a", "b"], "rank": [1, 2]})
    truth = pl.DataFrame({"user": 1, "item": list(qrels), "relevance": 1.0})
    got = fm.evaluate(recs, truth, metrics="ee_relevance", k=2)
    assert got.item(0, 1) == (1 + 0.5) * 0.5


# -- the same bits whatever the path -------------------------------------------------------


def _random_frames(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = random.Random(seed)
    rows, truth = [], []
    for model in ("x", "y"):
        for u in range(40):
            for s in range(rng.randint(0, 4)):
                items = rng.sample(range(30), rng.randint(1, 8))
                rows += [(model, u, s, i, r) for r, i in enumerate(items, start=1)]
    for u in range(45):
        for i in rng.sample(range(30), rng.randint(0, 6)):
            truth.append((u, i, float(rng.choice([0, 1, 1, 2, 3, 4]))))
    recs = pl.DataFrame(rows, schema=["model", "user", "draw", "item", "rank"], orient="row")
    return recs, pl.DataFrame(truth, schema=["user", "item", "relevance"], orient="row")


CALL: dict[str, Any] = {"metrics": EE, "k": [1, 3, 5], "sample": "draw", "by": "model"}


@pytest.mark.parametrize("aggregate", [False, True])
def test_the_same_bits_whatever_the_row_order_and_frame_kind(
    constructor: Constructor, aggregate: bool
) -> None:
    recs, truth = _random_frames(7)
    want = fm.evaluate(recs, truth, aggregate=aggregate, **CALL)
    shuffled = fm.evaluate(
        constructor(recs.sample(fraction=1.0, shuffle=True, seed=3)),
        constructor(truth.sample(fraction=1.0, shuffle=True, seed=4)),
        aggregate=aggregate,
        **CALL,
    )
    assert to_polars(shuffled).equals(want, null_equal=True)


@pytest.mark.parametrize("aggregate", [False, True])
def test_the_same_bits_in_buckets_and_on_dask(aggregate: bool) -> None:
    dd = pytest.importorskip("dask.dataframe")
    recs, truth = _random_frames(11)
    want = fm.evaluate(recs, truth, aggregate=aggregate, **CALL)
    buckets = fm.evaluate(recs.lazy(), truth, buckets=3, aggregate=aggregate, **CALL).collect()
    assert buckets.equals(want, null_equal=True)
    on_dask = fm.evaluate(
        dd.from_pandas(recs.to_pandas(), npartitions=3),
        dd.from_pandas(truth.to_pandas(), npartitions=2),
        aggregate=aggregate,
        **CALL,
    ).compute()
    keys = ["model"] if aggregate else ["model", "user"]
    assert pl.from_pandas(on_dask).sort(keys).equals(want, null_equal=True)


def test_the_same_bits_on_spark() -> None:
    sql = pytest.importorskip("pyspark.sql")
    from frame_metrics.distributed.spark import _arrow

    session = (
        sql.SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    recs, truth = _random_frames(13)
    for aggregate in (False, True):
        want = fm.evaluate(recs, truth, aggregate=aggregate, **CALL)
        got = fm.evaluate(
            session.createDataFrame(_arrow(recs)).repartition(3),
            session.createDataFrame(_arrow(truth)).repartition(2),
            aggregate=aggregate,
            **CALL,
        )
        out = pl.from_arrow(got.toArrow())
        assert isinstance(out, pl.DataFrame)
        keys = ["model"] if aggregate else ["model", "user"]
        assert out.sort(keys).equals(want, null_equal=True)


# -- refusals ----------------------------------------------------------------------------


def test_other_metrics_are_refused_with_samples() -> None:
    recs = RECS.with_columns(draw=pl.lit(1))
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(recs, TRUTH, metrics=["ee_loss", "ndcg"], k=2, sample="draw")
    assert str(info.value) == (
        "sample: expected only metrics that read several rankings per user (ee_disparity, "
        "ee_loss, ee_relevance) with 'draw' as the sample column, got 'ndcg@2'; evaluate "
        "them in a call without sample="
    )
    assert info.value.option == "sample"


def test_samples_need_truth_apart_from_recs() -> None:
    long = RECS.with_columns(draw=pl.lit(1), relevance=pl.lit(1.0))
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(long, metrics="ee_loss", k=2, sample="draw")
    assert str(info.value) == (
        "sample: expected recs and truth with the sample column 'draw', got a long table; "
        "pass truth= separately (a long table would repeat each relevance once per sample)"
    )


# -- diagnose and the command line ----------------------------------------------------------

SAMPLED = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 1, 2],
        "draw": [1, 1, 2, 2, 3, 7],
        "item": ["a", "b", "b", "a", "c", "a"],
        "rank": [1, 2, 1, 2, 1, 1],
    }
)
SAMPLED_TRUTH = pl.DataFrame(
    {"user": [1, 1, 2, 3], "item": ["a", "b", "a", "a"], "relevance": [1, 1, 1, 1]}
)


def test_diagnose_counts_the_rankings(constructor: Constructor) -> None:
    d = fm.diagnose(
        constructor(SAMPLED), constructor(SAMPLED_TRUTH), metrics="ee_loss", k=2, sample="draw"
    )
    # User 1 has 3 samples, user 2 one; user 3 (truth only) is evaluated with no attention.
    assert d.samples_per_user == (1, 3)
    assert (d.n_users, d.users_without_recommendations) == (3, 1)
    # Rankings shorter than k = 2: user 1's [c] and user 2's [a].
    assert d.short_lists == {2: 2}
    assert "rankings (samples) per user, fewest to most: 1 to 3" in str(d)
    plain = fm.diagnose(constructor(RECS), constructor(TRUTH), metrics="ee_loss", k=2)
    assert plain.samples_per_user is None


def test_the_command_line_reads_the_sample_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    SAMPLED.write_csv(tmp_path / "recs.csv")
    SAMPLED_TRUTH.write_csv(tmp_path / "truth.csv")
    files = [str(tmp_path / "recs.csv"), str(tmp_path / "truth.csv")]
    code = main(["evaluate", *files, "-m", "ee_loss", "-k", "2", "--sample-col", "draw",
                 "--per-user", "--format", "csv"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    want = fm.evaluate(SAMPLED, SAMPLED_TRUTH, metrics="ee_loss", k=2, sample="draw")
    assert pl.read_csv(io.StringIO(out)).equals(want)
    # With another metric it is refused, in the command line's terms.
    code = main(["evaluate", *files, "-m", "ndcg,ee_loss", "-k", "2", "--sample-col", "draw"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.strip() == (
        "frame-metrics: error: sample: expected only metrics that read several rankings per "
        "user (ee_disparity, ee_loss, ee_relevance) with 'draw' as the sample column, got "
        "'ndcg@2'; evaluate them in a call without --sample-col"
    )


def test_the_docs_page_example() -> None:
    # docs/metrics/expected_exposure.md, user 2: rankings [a], [b], [b, a]; relevant {a, b}:
    # ε_a = (1 + 0.5) / 3, ε_b = 2 / 3, ε* = 0.75 each.
    recs = pl.DataFrame(
        {
            "user": [1, 1, 2, 2, 2, 2, 3],
            "draw": [1, 1, 1, 2, 3, 3, 1],
            "item": ["c", "a", "a", "b", "b", "a", "a"],
            "rank": [1, 2, 1, 1, 1, 2, 1],
        }
    )
    truth = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 2, 4],
            "item": ["a", "b", "c", "a", "b", "a"],
            "relevance": [2, 1, 1, 1, 1, 3],
        }
    )
    got = fm.evaluate(recs, truth, metrics=EE, k=2, sample="draw")
    assert got["user"].to_list() == [1, 2, 4]  # user 3: no relevant item
    rows = {row[0]: row[1:] for row in got.rows()}
    assert rows[1] == WORKED[1]
    assert rows[4] == (1.0, 0.0, 0.0)
    e_a, e_b = 1.5 / 3, 2 / 3
    assert rows[2][0] == pytest.approx((e_a - 0.75) ** 2 + (e_b - 0.75) ** 2, rel=1e-15)
    assert rows[2][1] == pytest.approx(e_a**2 + e_b**2, rel=1e-15)
    assert rows[2][2] == pytest.approx(0.75 * (e_a + e_b), rel=1e-15)
