"""Bounded metrics stay in their range exactly and reach their maximum exactly.

A list in ideal order scores exactly 1.0 (not 0.9999999999999998) on NDCG, AP, MRR, hit
rate, R-precision, bpref, and on precision, recall and F1 where the cutoff allows it, for
every gain, gain table, tie rule, preset and engine; and no metric of a random table ever
leaves its range, by a last bit either. Every assertion here is exact: no tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import InvalidOptionError, InvalidValueError
from frame_metrics.metrics.registry import REGISTRY
from frame_metrics.options import MetricOptions
from tests.conftest import Constructor, evaluate_as_polars
from tests.test_beyond_reference import World, worlds
from tests.test_reference import tables

#: Relevance levels that make DCG terms with long binary expansions (0.1, 0.7, 2.5, ...).
LEVELS = [0.1, 0.3, 0.7, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0]
#: Gains as the caller passes them: the three named ones and trec_eval gain tables.
GAINS: list[Any] = ["linear", "exponential", "binary", {1.0: 3.0, 2.0: 9.0, 4.0: 4.5}]


@dataclass
class Perfect:
    """Users whose recommended list is in ideal order: best gains first, then non-relevant."""

    rels: dict[int, list[float]]  # user -> relevances of the relevant items, best first
    nonrelevant: dict[int, int]  # user -> non-relevant items recommended after them
    judged: bool  # whether those non-relevant items have a truth row of relevance 0

    def recs(self, scored: bool = False, tie_groups: bool = False) -> pl.DataFrame:
        rows = []
        for u, rels in self.rels.items():
            listed = [*rels, *[0.0] * self.nonrelevant[u]]
            for position, rel in enumerate(listed, start=1):
                # Scores fall with the position; equal relevances may share a score (a
                # tie group of one gain, which every tie rule orders ideally).
                score = rel if tie_groups else float(len(listed) - position) + rel / 100
                rows.append((u, u * 1000 + position, position, score))
        frame = pl.DataFrame(
            rows,
            schema={"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64, "score": pl.Float64},
            orient="row",
        )
        return frame.drop("rank") if scored else frame.drop("score")

    def truth(self) -> pl.DataFrame:
        rows = []
        for u, rels in self.rels.items():
            rows += [(u, u * 1000 + p, rel) for p, rel in enumerate(rels, start=1)]
            if self.judged:
                first = len(rels) + 1
                rows += [(u, u * 1000 + first + j, 0.0) for j in range(self.nonrelevant[u])]
        return pl.DataFrame(
            rows,
            schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64},
            orient="row",
        )


@st.composite
def perfect_lists(draw: st.DrawFn, levels: list[float] | None = None) -> Perfect:
    pool = st.sampled_from(levels or LEVELS)
    n_users = draw(st.integers(1, 6))
    rels, nonrelevant = {}, {}
    for u in range(1, n_users + 1):
        values = draw(st.lists(pool, min_size=1, max_size=12))
        rels[u] = sorted(values, reverse=True)
        nonrelevant[u] = draw(st.integers(0, 4))
    return Perfect(rels, nonrelevant, draw(st.booleans()))


def _gain_order(perfect: Perfect, gain: Any) -> bool:
    """Whether the list's relevance order is also its gain order (a table may reorder)."""
    chosen: Any = gain if isinstance(gain, str) else tuple(gain.items())
    options = MetricOptions(gain=chosen)
    return all(
        [options.gain_of(r) for r in rels]
        == sorted((options.gain_of(r) for r in rels), reverse=True)
        for rels in perfect.rels.values()
    )


def _maxima(perfect: Perfect, frame: pl.DataFrame, ks: list[int]) -> list[tuple[str, int, float]]:
    """(column, user, value) of every metric that must be exactly 1.0 for these lists."""
    out = []
    for row in frame.iter_rows(named=True):
        u = row["user"]
        n_rel = len(perfect.rels[u])
        listed = n_rel + perfect.nonrelevant[u]
        for k in ks:
            must = {f"ndcg@{k}", f"ap@{k}", f"mrr@{k}", f"hit_rate@{k}"}
            if n_rel >= k:
                must.add(f"precision@{k}")
            if n_rel <= k:
                must.add(f"recall@{k}")
            if n_rel == k:
                must.add(f"f1@{k}")
            if perfect.judged and listed >= k:
                must.add(f"judged@{k}")
            out += [(c, u, row[c]) for c in must if c in row]
        out += [(c, u, row[c]) for c in ("r_precision", "bpref") if c in row]
    return out


RANKING = ["ndcg", "ap", "mrr", "hit_rate", "precision", "recall", "f1", "judged"]


@settings(max_examples=120, deadline=None)
@given(
    perfect=perfect_lists(),
    gain=st.sampled_from(GAINS),
    ks=st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True),
    scored=st.booleans(),
)
def test_a_list_in_ideal_order_scores_exactly_one(
    perfect: Perfect, gain: Any, ks: list[int], scored: bool
) -> None:
    if not _gain_order(perfect, gain):
        return  # a gain table that reorders levels makes another list the ideal one
    kwargs: dict[str, Any] = {"gain": gain, "k": ks}
    recs = perfect.recs(scored=scored)
    if scored:
        kwargs["score"] = "score"
    got = fm.evaluate(recs, perfect.truth(), metrics=[*RANKING, "r_precision", "bpref"], **kwargs)
    assert isinstance(got, pl.DataFrame)
    for column, user, value in _maxima(perfect, got, ks):
        assert value == 1.0, (column, user, value, gain)


@settings(max_examples=60, deadline=None)
@given(
    perfect=perfect_lists(levels=[float(v) for v in range(1, 40)]),
    ks=st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True),
)
def test_ideal_order_is_exact_with_many_distinct_gains(perfect: Perfect, ks: list[int]) -> None:
    # More than 16 distinct gains: the ideal DCG comes from each user's sorted gains
    # rather than from counts per gain level; both must give the list's own sum.
    got = fm.evaluate(perfect.recs(), perfect.truth(), metrics=["ndcg"], k=ks)
    assert isinstance(got, pl.DataFrame)
    assert all(v == 1.0 for k in ks for v in got[f"ndcg@{k}"])


@settings(max_examples=60, deadline=None)
@given(
    perfect=perfect_lists(levels=[0.7, 1.0, 2.5, 3.0]),
    ks=st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True),
    gain=st.sampled_from(GAINS[:3]),
)
def test_ideal_order_with_tied_scores_under_every_tie_rule(
    perfect: Perfect, ks: list[int], gain: Any
) -> None:
    # Items of one relevance share a score: whatever the tie rule, every order of a
    # group is ideal, and under ties="average" the expected DCG is the ideal DCG.
    recs = perfect.recs(scored=True, tie_groups=True)
    rules: list[Any] = ["item", "item_desc", "item_desc_text", "input", "average"]
    for ties in rules:
        metrics = ["ndcg", "precision", "recall", "hit_rate"]
        if ties != "average":
            metrics += ["ap", "mrr"]
        got = fm.evaluate(
            recs, perfect.truth(), metrics=metrics, k=ks, score="score", ties=ties, gain=gain
        )
        assert isinstance(got, pl.DataFrame)
        for column, user, value in _maxima(perfect, got, ks):
            assert value == 1.0, (ties, column, user, value)


@pytest.mark.parametrize("engine", ["in-memory", "streaming"])
def test_users_sharing_one_ideal_list_score_exactly_one(engine: Any) -> None:
    """Every user's counts per gain alike: the ideal DCG is computed once (one distinct
    vector of counts) and joined back to each user, and NDCG = DCG / IDCG is still
    exactly 1.0 on both engines (the in-memory join once gave 0.9999999999999999)."""
    rels = [4.0, 4.0, 4.0, 4.0, 2.0, 2.0, 0.1, 0.1]
    users = [1, 2]
    recs = pl.DataFrame(
        {
            "user": [u for u in users for _ in rels],
            "item": [i for _ in users for i in range(len(rels))],
            "rank": [i + 1 for _ in users for i in range(len(rels))],
        }
    )
    truth = recs.select("user", "item", relevance=pl.Series(rels * len(users)))
    lazy = fm.evaluate(recs.lazy(), truth.lazy(), metrics=["ndcg"], k=[3, 5, 10])
    assert isinstance(lazy, pl.LazyFrame)
    got = lazy.collect(engine=engine)
    assert got.select(pl.exclude("user")).to_numpy().ravel().tolist() == [1.0] * 6


@settings(max_examples=60, deadline=None)
@given(perfect=perfect_lists(), ks=st.lists(st.integers(1, 20), min_size=1, max_size=3))
def test_ideal_order_is_exact_in_the_expressions_and_in_buckets(
    perfect: Perfect, ks: list[int]
) -> None:
    ks = sorted(set(ks))
    long = (
        perfect.recs()
        .join(perfect.truth(), on=["user", "item"], how="full", coalesce=True)
        .select("user", "item", "rank", "relevance")
    )
    exprs = long.group_by("user").agg(fm.exprs.ndcg(k) for k in ks)
    assert all(v == 1.0 for k in ks for v in exprs[f"ndcg@{k}"])
    lazy = fm.evaluate(perfect.recs().lazy(), perfect.truth().lazy(), metrics=["ndcg"], k=ks)
    assert isinstance(lazy, pl.LazyFrame)
    for engine in ["in-memory", "streaming"]:
        frame = lazy.collect(engine=engine)  # type: ignore[call-overload]
        assert all(v == 1.0 for k in ks for v in frame[f"ndcg@{k}"])
    buckets = fm.evaluate(perfect.recs(), perfect.truth(), metrics=["ndcg"], k=ks, buckets=3)
    assert isinstance(buckets, pl.DataFrame)
    assert all(v == 1.0 for k in ks for v in buckets[f"ndcg@{k}"])
    mean = fm.evaluate(perfect.recs(), perfect.truth(), metrics=["ndcg"], k=ks, aggregate=True)
    assert isinstance(mean, pl.DataFrame)
    assert all(mean[f"ndcg@{k}"].item() == 1.0 for k in ks)


@settings(max_examples=40, deadline=None)
@given(
    # Integer levels: trec_eval's and several peers' relevance levels are integers >= 1.
    perfect=perfect_lists(levels=[1.0, 2.0, 3.0, 4.0, 5.0]),
    ks=st.lists(st.integers(1, 20), min_size=1, max_size=3),
)
def test_ideal_order_is_exact_under_every_preset(perfect: Perfect, ks: list[int]) -> None:
    ks = sorted(set(ks))
    for convention in fm.CONVENTIONS:
        scored = convention in {"sklearn", "torchmetrics"}
        kwargs: dict[str, Any] = {"score": "score"} if scored else {}
        got = fm.evaluate(
            perfect.recs(scored=scored),
            perfect.truth(),
            metrics=["ndcg", "precision", "recall"],
            k=ks,
            convention=convention,
            **kwargs,
        )
        assert isinstance(got, pl.DataFrame)
        for row in got.iter_rows(named=True):
            n_rel = len(perfect.rels[row["user"]])
            for k in ks:
                if convention == "rectools" and n_rel < k:
                    continue  # RecTools' ideal is k slots of gain 1: fewer items score less
                if convention == "sklearn" and perfect.nonrelevant[row["user"]] and k > n_rel:
                    continue  # sklearn gives the listed non-relevant items gain 0 in its ideal
                assert row[f"ndcg@{k}"] in (1.0, None), (convention, row, k)
                if n_rel >= k and row[f"precision@{k}"] is not None:
                    assert row[f"precision@{k}"] == 1.0, (convention, row, k)


def test_sklearn_docstring_case_is_exactly_one() -> None:
    # scikit-learn's own example: ndcg_score([[10, 0, 0, 1, 5]], [[10, 0, 0, 1, 5]], k=4)
    # is 1.0 (the scores rank the items in the order of their relevance).
    recs = pl.DataFrame({"user": [1] * 5, "item": list("abcde"), "score": [10.0, 0, 0, 1, 5]})
    truth = pl.DataFrame({"user": [1] * 5, "item": list("abcde"), "relevance": [10.0, 0, 0, 1, 5]})
    got = fm.evaluate(recs, truth, metrics=["ndcg"], k=4, score="score", convention="sklearn")
    assert got["ndcg@4"].item() == 1.0
    got = fm.evaluate(recs, truth, metrics=["ndcg"], k=4, score="score")
    assert got["ndcg@4"].item() == 1.0


def test_binary_perfect_list_of_four() -> None:
    # Σ 1/log2(p + 1) over p = 1..4 on both sides: exactly 1.0 (was 0.9999999999999998).
    recs = pl.DataFrame({"user": [1] * 4, "item": list("abcd"), "rank": [1, 2, 3, 4]})
    truth = pl.DataFrame({"user": [1] * 4, "item": list("abcd"), "relevance": [1] * 4})
    gains: list[Any] = ["binary", "linear", "exponential"]
    for gain in gains:
        got = fm.evaluate(recs, truth, metrics=["ndcg", "ndcg(idcg=k,gain=binary)"], k=4, gain=gain)
        assert got.row(0)[1:] == (1.0, 1.0), gain


def test_all_tied_all_relevant_under_average() -> None:
    # Three tied items, all relevant: exactly one hit expected within k=1, three within 3.
    recs = pl.DataFrame({"user": [1] * 3, "item": list("abc"), "score": [0.5] * 3})
    truth = pl.DataFrame({"user": [1] * 3, "item": list("abc"), "relevance": [1.0] * 3})
    got = fm.evaluate(
        recs,
        truth,
        metrics=["precision", "recall", "ndcg", "hit_rate"],
        k=[1, 3],
        score="score",
        ties="average",
    )
    assert got.row(0, named=True) == {
        "user": 1,
        "precision@1": 1.0,
        "precision@3": 1.0,
        "recall@1": 1 / 3,
        "recall@3": 1.0,
        "ndcg@1": 1.0,
        "ndcg@3": 1.0,
        "hit_rate@1": 1.0,
        "hit_rate@3": 1.0,
    }


def test_tie_average_counts_one_fraction() -> None:
    # Five tied items of which two are relevant, k = 2: E[hits] = 2 · 2/5 = 0.8.
    recs = pl.DataFrame({"user": [1] * 5, "item": list("abcde"), "score": [1.0] * 5})
    truth = pl.DataFrame({"user": [1, 1], "item": ["a", "e"], "relevance": [1.0, 1.0]})
    got = fm.evaluate(
        recs, truth, metrics=["precision", "recall"], k=2, score="score", ties="average"
    )
    assert got.row(0) == (1, 0.8 / 2, 0.8 / 2)


BOUNDED = [
    name
    for name, m in REGISTRY.items()
    if m.family == "ranking" and m.needs == frozenset({"truth"}) and m.bounds[1] is not None
]


def _scored(recs: pl.DataFrame) -> pl.DataFrame:
    """``recs`` ranked by a score with many ties (rank mod 3) instead of its ranks."""
    return recs.with_columns(score=(pl.col("rank") % 3).cast(pl.Float64)).drop("rank")


def _assert_in_range(got: pl.DataFrame, options_of: Callable[[str], MetricOptions | None]) -> None:
    """Every metric column of ``got`` within its metric's range under its options."""
    for column in got.columns:
        if column in ("user", "n_users"):
            continue
        name = column.split("@")[0].split("(")[0]
        low, high = REGISTRY[name].range_under(options_of(name))
        for value in got[column].drop_nulls():
            assert low <= value <= (high if high is not None else math.inf), (column, value)


@settings(max_examples=100, deadline=None)
@given(
    table=tables(),
    gain=st.sampled_from(GAINS),
    ks=st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True),
    ties=st.sampled_from(["item", "average"]),
)
def test_random_tables_stay_in_range(table: Any, gain: Any, ks: list[int], ties: str) -> None:
    metrics = [m for m in BOUNDED if ties != "average" or REGISTRY[m].tie_average]
    cases: list[tuple[pl.DataFrame, dict[str, Any]]] = [
        (table.recs(), {}),
        (_scored(table.recs()), {"score": "score", "ties": ties}),
    ]
    for frame, kwargs in cases:
        for aggregate in [False, True]:
            got = fm.evaluate(
                frame,
                table.truth(),
                metrics=metrics,
                k=ks,
                gain=gain,
                aggregate=aggregate,
                **kwargs,
            )
            assert isinstance(got, pl.DataFrame)
            _assert_in_range(got, lambda name: None)


@pytest.mark.parametrize("vector", [[0.938, -0.9], [-0.19, 0.905], [0.1, 0.7, 0.3]])
def test_cosine_diversity_of_identical_vectors_is_not_negative(vector: list[float]) -> None:
    # Three items with one vector: every cosine is 1 and diversity is 0; the fixed-point
    # vector sums make some cosines a last bit above 1 (diversity -2.2e-16 before).
    d = len(vector)
    items = pl.DataFrame(
        {"item": [1, 2, 3], "features": [vector] * 3},
        schema={"item": pl.Int64, "features": pl.Array(pl.Float64, d)},
    )
    recs = pl.DataFrame({"user": [1, 1, 1], "item": [1, 2, 3], "rank": [1, 2, 3]})
    truth = pl.DataFrame({"user": [1], "item": [1], "relevance": [1.0]})
    got = fm.evaluate(recs, truth, metrics=["diversity"], k=3, item_features=items)
    assert 0.0 <= got["diversity@3"].item() < 1e-15


def test_ndcg_over_k_slots_refuses_graded_gains(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    truth = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "relevance": [3.0, 4.0]})
    with pytest.raises(InvalidOptionError) as err:
        evaluate_as_polars(constructor, recs, truth, metrics=["ndcg(idcg=k)"], k=2)
    assert str(err.value) == (
        "idcg: expected 'relevant' for ndcg(idcg=k)@2 under gain='linear' (idcg='k' is k "
        "ideal slots of gain 1, an upper bound of DCG only under gain='binary': pass "
        "gain='binary' with it), got 'k'"
    )
    got = evaluate_as_polars(constructor, recs, truth, metrics=["ndcg(idcg=k)"], k=2, gain="binary")
    assert got["ndcg(idcg=k)@2"].item() == 1.0


def test_err_refuses_relevance_above_max_relevance(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "c"], "rank": [1, 2, 3]})
    truth = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "relevance": [3.0, 4.0]})
    with pytest.raises(InvalidValueError) as err:
        evaluate_as_polars(constructor, recs, truth, metrics=["err@3"], max_relevance=2)
    assert str(err.value) == (
        "truth: expected values of at most 2.0 in column 'relevance' (err reads "
        "P = (2^rel - 1) / 2^max_relevance, a probability), found 2 larger, e.g. user=1, "
        "item='a', relevance=3.0; give max_relevance= the largest relevance or more, or "
        "leave it out to use the largest relevance in truth"
    )
    # At max_relevance = 4: P = 7/16 then 15/16; err = 7/16 + (9/16)(15/16)/2.
    got = evaluate_as_polars(constructor, recs, truth, metrics=["err@3"], max_relevance=4)
    assert got["err@3"].item() == 7 / 16 + (9 / 16) * (15 / 16) / 2


def test_relative_rbp_of_a_user_judged_all_zero_is_zero(constructor: Constructor) -> None:
    # threshold=0 makes relevance-0 rows relevant; their relative gain 0/0 is taken as 0.
    recs = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "a"], "rank": [1, 2, 1]})
    truth = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "c", "a"], "relevance": [0, 0, 2]})
    got = evaluate_as_polars(
        constructor, recs, truth, metrics=["rbp(rbp_gain=relative)"], threshold=0
    )
    assert got.rows() == [(1, 0.0), (2, 1 - 0.8)]


def test_first_duplicate_keeps_its_own_input_position(constructor: Constructor) -> None:
    # x at 0.5 (row 0), y at 0.9 (row 1), x again at 0.9 (row 2): the kept x is row 2's,
    # so y (row 1) comes first among the two at 0.9.
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["x", "y", "x"], "score": [0.5, 0.9, 0.9]})
    truth = pl.DataFrame({"user": [1], "item": ["y"], "relevance": [1.0]})
    got = evaluate_as_polars(
        constructor,
        recs,
        truth,
        metrics=["mrr@1"],
        score="score",
        ties="input",
        on_duplicate="first",
    )
    assert got.rows() == [(1, 1.0)]


BAD_VALUES = [
    ("rank-zero", {"rank": [0, 2, 1]}, {}, "expected ranks >= 1"),
    ("rank-negative", {"rank": [-3, 2, 1]}, {}, "expected ranks >= 1"),
    # pandas with numpy dtypes reads NaN as missing: then the null check speaks.
    ("relevance-nan", {}, {"relevance": [math.nan, 1.0]}, "expected (finite numbers|no nulls)"),
    ("relevance-inf", {}, {"relevance": [math.inf, 1.0]}, "expected finite numbers"),
    ("relevance-minus-inf", {}, {"relevance": [-math.inf, 1.0]}, "expected"),
]


@pytest.mark.parametrize(
    ("recs_change", "truth_change", "message"),
    [c[1:] for c in BAD_VALUES],
    ids=[c[0] for c in BAD_VALUES],
)
@pytest.mark.parametrize("path", ["aggregate", "buckets", "per-user"])
def test_checks_win_on_the_aggregate_path(
    constructor: Constructor,
    recs_change: dict[str, list[Any]],
    truth_change: dict[str, list[Any]],
    message: str,
    path: str,
) -> None:
    recs = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "a"], "rank": [1, 2, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "relevance": [1.0, 1.0]})
    recs = recs.with_columns(pl.Series(n, v) for n, v in recs_change.items())
    truth = truth.with_columns(pl.Series(n, v) for n, v in truth_change.items())
    kwargs: dict[str, Any] = {"aggregate": path != "per-user"}
    if path == "buckets":
        kwargs["buckets"] = 2
    with pytest.raises(InvalidValueError, match=message):
        fm.evaluate(constructor(recs), constructor(truth), k=3, **kwargs)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_checks_win_for_predictions_on_the_aggregate_path(
    constructor: Constructor, bad: float
) -> None:
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "prediction": [bad, 1.0]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "relevance": [1.0, 1.0]})
    message = "expected (finite numbers|no nulls) in .*column 'prediction'"
    with pytest.raises(InvalidValueError, match=message):
        fm.evaluate(constructor(recs), constructor(truth), metrics=["rmse"], aggregate=True)


def test_unchecked_nonfinite_values_give_nan_not_a_crash() -> None:
    # validate=False: no check runs; a NaN prediction makes the pooled error NaN.
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "prediction": [math.nan, 1.0]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "relevance": [1.0, 1.0]})
    got = fm.evaluate(recs, truth, metrics=["rmse"], aggregate=True, validate=False)
    assert math.isnan(got["rmse"].item())


@settings(max_examples=80, deadline=None)
@given(
    world=worlds(),
    ks=st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True),
    kind=st.sampled_from(["cosine", "jaccard"]),
)
def test_beyond_accuracy_metrics_stay_in_range(world: World, ks: list[int], kind: str) -> None:
    names = ["aplt", "diversity", "serendipity", "coverage", "personalization", "gini"]
    for aggregate in [False, True]:
        metrics = names if aggregate else names[:3]
        got = fm.evaluate(
            world.recs_frame(),
            world.truth_frame(),
            metrics=metrics,
            k=ks,
            aggregate=aggregate,
            train=world.train_frame(),
            item_features=world.features_frame(kind),
            baseline=world.recs_frame(world.baseline),
        )
        assert isinstance(got, pl.DataFrame)
        for name in metrics:
            low, high = REGISTRY[name].bounds
            assert high is not None
            for k in ks:
                for value in got[f"{name}@{k}"].drop_nulls():
                    assert low <= value <= high, (name, k, value)


def test_zero_is_positive_zero(constructor: Constructor) -> None:
    # A user without a hit: DCG, AP and err sum no term (polars sums nothing to -0.0).
    recs = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "c"], "rank": [1, 2, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "z"], "relevance": [1.0, 2.0]})
    got = evaluate_as_polars(constructor, recs, truth, metrics=["dcg", "ap", "ndcg", "err"], k=2)
    user_2 = got.filter(pl.col("user") == 2).row(0)[1:]
    assert [math.copysign(1.0, v) for v in user_2] == [1.0] * 4, user_2


@settings(max_examples=60, deadline=None)
@given(
    table=tables(),
    convention=st.sampled_from(sorted(fm.CONVENTIONS)),
    ks=st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True),
    buckets=st.sampled_from([1, 3]),
)
def test_random_tables_stay_in_range_under_presets_and_buckets(
    table: Any, convention: str, ks: list[int], buckets: int
) -> None:
    scored = convention in {"sklearn", "torchmetrics"}  # peers that rank by score
    frame = table.recs()
    kwargs: dict[str, Any] = {}
    if scored:
        frame = _scored(frame)
        kwargs["score"] = "score"
    ties = fm.CONVENTIONS[convention].options_for("ndcg").get("ties")
    metrics = [m for m in BOUNDED if ties != "average" or REGISTRY[m].tie_average]
    for aggregate in [False, True]:
        got = fm.evaluate(
            frame,
            table.truth(),
            metrics=metrics,
            k=ks,
            convention=convention,
            aggregate=aggregate,
            buckets=buckets,
            **kwargs,
        )
        assert isinstance(got, pl.DataFrame)
        # Under the preset's options: ranx's rbp gains the relevance, unbounded above.
        _assert_in_range(
            got, lambda name: MetricOptions(**fm.CONVENTIONS[convention].options_for(name))
        )


def _sklearn_case(scores: list[float]) -> tuple[pl.DataFrame, pl.DataFrame]:
    # scikit-learn's docstring table: one sample, five documents a..e.
    items = list("abcde")
    recs = pl.DataFrame({"user": [1] * 5, "item": items, "score": scores})
    truth = pl.DataFrame({"user": [1] * 5, "item": items, "relevance": [10.0, 0, 0, 1, 5]})
    return recs, truth


@pytest.mark.parametrize(
    ("scores", "k", "ties", "want"),
    [
        # ndcg_score(true_relevance, true_relevance, k=4) == 1.0
        ([10.0, 0, 0, 1, 5], 4, "average", 1.0),
        # scores [1, 0, 0, 0, 1], k=1: a and e tie at the top, their gains 10 and 5
        # average to 7.5 at position 1, over the ideal 10: 0.75.
        ([1.0, 0, 0, 0, 1], 1, "average", 0.75),
    ],
)
def test_scikit_learn_docstring_cases_exactly(
    scores: list[float], k: int, ties: Any, want: float
) -> None:
    recs, truth = _sklearn_case(scores)
    got = fm.evaluate(
        recs, truth, metrics=["ndcg"], k=k, score="score", ties=ties, convention="sklearn"
    )
    assert got[f"ndcg@{k}"].item() == want


def test_scikit_learn_docstring_cases_against_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    relevance = [[10, 0, 0, 1, 5]]
    cases: list[tuple[list[float], int | None]] = [
        ([0.1, 0.2, 0.3, 4, 70], None),
        ([0.05, 1.1, 1.0, 0.5, 0.0], None),
        ([0.05, 1.1, 1.0, 0.5, 0.0], 4),
        ([10, 0, 0, 1, 5], 4),
        ([1, 0, 0, 0, 1], 1),
    ]
    for scores, k in cases:
        recs, truth = _sklearn_case([float(s) for s in scores])
        cutoff = 5 if k is None else k
        got = fm.evaluate(
            recs, truth, metrics=["ndcg"], k=cutoff, score="score", convention="sklearn"
        )
        want = float(metrics.ndcg_score(relevance, [scores], k=k))
        assert math.isclose(got[f"ndcg@{cutoff}"].item(), want, rel_tol=1e-15), (scores, k)
        if want == 1.0:
            assert got[f"ndcg@{cutoff}"].item() == 1.0


@pytest.mark.parametrize("aggregate", [False, True], ids=["per-user", "aggregate"])
def test_zero_ideal(constructor: Constructor, aggregate: bool) -> None:
    # threshold=0: user 1's only relevant item has relevance 0, so its ideal DCG is 0;
    # user 2's list is ideal (1.0). "zero" scores user 1 0 (mean 1/2); "skip" gives it
    # no ndcg (Recommenders' NaN), so the mean is user 2's alone.
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "relevance": [0, 2]})
    kwargs: dict[str, Any] = {"metrics": ["ndcg@1"], "threshold": 0, "aggregate": aggregate}
    zero = evaluate_as_polars(constructor, recs, truth, **kwargs)
    skip = evaluate_as_polars(constructor, recs, truth, zero_ideal="skip", **kwargs)
    if aggregate:
        assert zero["ndcg@1"].item() == (0.0 + 1.0) / 2
        assert skip["ndcg@1"].item() == 1.0
    else:
        assert zero.rows() == [(1, 0.0), (2, 1.0)]
        assert skip.rows() == [(2, 1.0)]
    with pytest.raises(InvalidOptionError, match="zero_ideal: expected one of 'zero', 'skip'"):
        evaluate_as_polars(constructor, recs, truth, zero_ideal="nan", **kwargs)
