"""``exclude=``: seen (user, item) pairs leave the lists before the cutoff (spec section 10).

The remaining items keep their order and move up (re-ranked 1, 2, ... by rank, or by
score under the tie rule), so ``@k`` counts k items the user could still choose; truth
is not touched. Expectations are written as arithmetic on the lists after the removal,
and a slow pure-Python reference (filter, re-rank, count) is held equal to ``evaluate``
on random tables.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics.errors import (
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
)
from tests.conftest import (
    Constructor,
    assert_kind,
    evaluate_as_polars,
    recmetrics,
    to_polars,
    user_values,
)

pytest.importorskip("dask.dataframe", reason="the dask extra is part of the dev install")
from tests.test_distributed import backend

__all__ = ["backend"]  # a fixture used here; spark is in conftest

# User 1's list a, b, c, d loses b; user 2's x, y loses y (y is relevant: truth keeps
# it); user 3's only item z is excluded (an empty list); user 4 has no truth; user 5 no
# list. The pairs of users 9 and 1 (again) change nothing.
RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 2, 2, 3, 4, 4],
        "item": ["a", "b", "c", "d", "x", "y", "z", "p", "q"],
        "rank": [1, 2, 3, 4, 1, 2, 1, 1, 2],
    }
)
TRUTH = pl.DataFrame(
    {
        "user": [1, 1, 1, 2, 3, 5],
        "item": ["a", "c", "d", "y", "z", "w"],
        "relevance": [1, 1, 2, 1, 1, 1],
    }
)
# Other columns (a time) are not read; a repeated pair is one pair.
EXCLUDE = pl.DataFrame(
    {
        "user": [1, 2, 3, 9, 1],
        "item": ["b", "y", "z", "a", "b"],
        "ts": [10, 11, 12, 13, 14],
    }
)
METRICS = ["precision@2", "recall@2", "ndcg@3"]


def _log2(x: float) -> float:
    return math.log2(x)


#: User 1's list is a, c, d: a and c are relevant at ranks 1 and 2, d (rel 2) at 3.
USER_1 = {
    "precision@2": 2 / 2,
    "recall@2": 2 / 3,
    "ndcg@3": (1 / _log2(2) + 1 / _log2(3) + 2 / _log2(4))
    / (2 / _log2(2) + 1 / _log2(3) + 1 / _log2(4)),
}


def test_pairs_leave_the_lists_before_the_cutoff(constructor: Constructor) -> None:
    got = evaluate_as_polars(
        constructor, RECS, TRUTH, metrics=METRICS, exclude=constructor(EXCLUDE)
    )
    assert got["user"].to_list() == [1, 2, 3, 5]  # user 4: no relevant item
    for metric, value in USER_1.items():
        assert math.isclose(user_values(got, metric)[1], value, rel_tol=1e-15), metric
    # User 2's y is excluded from the list, not from truth: x alone is listed, a miss,
    # and y still counts in recall's denominator; user 3's list is empty: 0.
    for user in (2, 3, 5):
        assert [user_values(got, m)[user] for m in METRICS] == [0.0, 0.0, 0.0]
    # Without exclude=, user 1's top 2 is a, b: one hit.
    plain = fm.evaluate(RECS, TRUTH, metrics=METRICS)
    assert user_values(plain, "precision@2")[1] == 1 / 2


def test_the_namespace_forwards_it(constructor: Constructor) -> None:
    recs, exclude = constructor(RECS), constructor(EXCLUDE)
    got = to_polars(recmetrics(recs).evaluate(constructor(TRUTH), metrics=METRICS, exclude=exclude))
    assert_frame_equal(got, fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=EXCLUDE))
    shortcut = to_polars(recmetrics(recs).precision(constructor(TRUTH), k=2, exclude=exclude))
    assert user_values(shortcut, "precision@2")[1] == 1.0
    found = recmetrics(recs).diagnose(constructor(TRUTH), k=2, exclude=exclude)
    assert found.excluded_rows == 3


def test_the_mean_is_over_the_same_users(constructor: Constructor) -> None:
    got = evaluate_as_polars(
        constructor, RECS, TRUTH, metrics=METRICS, exclude=constructor(EXCLUDE), aggregate=True
    )
    assert got["n_users"].item() == 4
    assert got["precision@2"].item() == (1.0 + 0 + 0 + 0) / 4


def test_an_empty_exclude_changes_nothing(constructor: Constructor) -> None:
    # A gap (user 1 has no rank 3) stays a gap, with or without exclude=.
    recs = RECS.with_columns(
        rank=pl.when(pl.col("rank") >= 3).then(pl.col("rank") + 1).otherwise("rank")
    )
    want = fm.evaluate(recs, TRUTH, metrics=METRICS)
    empty = pl.DataFrame(schema={"user": pl.Int64, "item": pl.String})
    got = evaluate_as_polars(constructor, recs, TRUTH, metrics=METRICS, exclude=constructor(empty))
    assert_frame_equal(got, want)
    # Columns of no dtype (a frame of empty lists) hold no pair either.
    no_dtype = pl.DataFrame({"user": [], "item": []})
    assert_frame_equal(fm.evaluate(recs, TRUTH, metrics=METRICS, exclude=no_dtype), want)
    found = fm.diagnose(recs, TRUTH, k=2, exclude=empty)
    assert (found.excluded_rows, found.short_after_exclude) == (0, {2: 0})


def test_a_gap_in_the_ranks_stays_and_the_rest_moves_up() -> None:
    # Ranks 1, 2, 5 (positions 3 and 4 empty): without b, c moves up by one, to 4.
    recs = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "rank": [1, 2, 5]})
    truth = pl.DataFrame({"user": 1, "item": ["c"], "relevance": 1})
    exclude = pl.DataFrame({"user": [1], "item": ["b"]})
    got = fm.evaluate(recs, truth, metrics=["precision@3", "precision@4"], exclude=exclude)
    assert got.row(0) == (1, 0.0, 1 / 4)
    plain = fm.evaluate(recs, truth, metrics=["precision@4", "precision@5"])
    assert plain.row(0) == (1, 0.0, 1 / 5)


# -- scores and the tie rule ----------------------------------------------------------------

# a and b tie at 0.9, c and d at 0.5; a is excluded, so b, then c and d tied, then e.
SCORED = pl.DataFrame(
    {"user": 1, "item": ["a", "b", "c", "d", "e"], "score": [0.9, 0.9, 0.5, 0.5, 0.1]}
)
LIKED_D = pl.DataFrame({"user": 1, "item": ["d"], "relevance": 1})
SEEN_A = pl.DataFrame({"user": [1], "item": ["a"]})


@pytest.mark.parametrize(
    ("ties", "precision", "ndcg"),
    [
        # b, c, d: d third.
        ("item", 0.0, 1 / _log2(4)),
        # b, d, c: d second.
        ("item_desc", 1 / 2, 1 / _log2(3)),
        # c and d share positions 2 and 3: d is second in half of the orders.
        ("average", (1 / 2) * (1 / 2), (1 / 2) * (1 / _log2(3)) + (1 / 2) * (1 / _log2(4))),
    ],
)
def test_scores_are_ranked_after_the_removal(
    constructor: Constructor, ties: str, precision: float, ndcg: float
) -> None:
    got = evaluate_as_polars(
        constructor,
        SCORED,
        LIKED_D,
        score="score",
        ties=ties,
        metrics=["precision@2", "ndcg@3"],
        exclude=constructor(SEEN_A),
    )
    assert math.isclose(got["precision@2"].item(), precision, rel_tol=1e-15)
    assert math.isclose(got["ndcg@3"].item(), ndcg, rel_tol=1e-15)


def test_ties_at_the_cutoff_are_those_of_the_lists_after_the_removal() -> None:
    # As given, the 2nd and 3rd scores are 0.9 and 0.5; without a, 0.5 and 0.5 tie there.
    plain = fm.diagnose(SCORED, LIKED_D, score="score", k=2)
    found = fm.diagnose(SCORED, LIKED_D, score="score", k=2, exclude=SEEN_A)
    assert (plain.ties_at_cutoff, found.ties_at_cutoff) == ({2: 0}, {2: 1})


def test_input_order_ties_keep_the_input_positions() -> None:
    # ties="input": the rows' order in recs decides, numbered before the removal.
    scored = pl.DataFrame({"user": 1, "item": ["e", "a", "d", "c"], "score": [0.5] * 4})
    got = fm.evaluate(
        scored, LIKED_D, score="score", ties="input", metrics="precision@2", exclude=SEEN_A
    )
    assert got["precision@2"].item() == 1 / 2  # e, d


# -- by groups, samples, long tables --------------------------------------------------------


def test_pairs_apply_to_every_group_unless_exclude_carries_the_by_columns() -> None:
    recs = pl.DataFrame(
        {
            "model": ["m1", "m1", "m2", "m2"],
            "user": 1,
            "item": ["a", "b", "b", "a"],
            "rank": [1, 2, 1, 2],
        }
    )
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    kwargs: dict[str, Any] = {"metrics": "precision@1", "by": "model"}
    assert fm.evaluate(recs, truth, **kwargs)["precision@1"].to_list() == [0.0, 1.0]
    every = pl.DataFrame({"user": [1], "item": ["b"]})
    # m1: a; m2: a (b left both lists).
    assert fm.evaluate(recs, truth, exclude=every, **kwargs)["precision@1"].to_list() == [0.0, 0.0]
    # With a model column, the pair leaves m1's list alone: m2 still shows b first.
    own = every.with_columns(model=pl.lit("m1"))
    assert fm.evaluate(recs, truth, exclude=own, **kwargs)["precision@1"].to_list() == [0.0, 1.0]
    # A column that is no by column of the call (a fold) is not read.
    fold = every.with_columns(fold=pl.lit(0))
    assert fm.evaluate(recs, truth, exclude=fold, **kwargs)["precision@1"].to_list() == [0.0, 0.0]


def test_a_long_table_drops_the_pairs_as_recommendations_and_keeps_their_relevance(
    constructor: Constructor,
) -> None:
    long = RECS.join(TRUTH, on=["user", "item"], how="full", coalesce=True)
    got = evaluate_as_polars(constructor, long, None, metrics=METRICS, exclude=constructor(EXCLUDE))
    assert_frame_equal(got, fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=EXCLUDE))
    found = fm.diagnose(long, k=[1, 2, 3], exclude=EXCLUDE)
    assert found.excluded_rows == 3
    assert found.short_after_exclude == {1: 1, 2: 1, 3: 0}


def test_each_sample_of_a_user_loses_the_pairs() -> None:
    # Two rankings of user 1 (samples 0 and 1): a leaves both, b is first in each.
    recs = pl.DataFrame(
        {"user": 1, "s": [0, 0, 1, 1], "item": ["a", "b", "b", "a"], "rank": [1, 2, 1, 2]}
    )
    moved_up = pl.DataFrame({"user": 1, "s": [0, 1], "item": ["b", "b"], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    call: dict[str, Any] = {"metrics": "ee_relevance@1", "sample": "s", "persistence": 0.5}
    assert_frame_equal(
        fm.evaluate(recs, truth, exclude=SEEN_A, **call), fm.evaluate(moved_up, truth, **call)
    )


# -- diagnose ---------------------------------------------------------------------------------


def test_diagnose_counts_the_rows_removed_and_the_lists_made_short(
    constructor: Constructor,
) -> None:
    found = fm.diagnose(
        constructor(RECS), constructor(TRUTH), k=[1, 2, 3], exclude=constructor(EXCLUDE)
    )
    # (1, b), (2, y), (3, z): user 9's pair and the repeat remove nothing.
    assert found.excluded_rows == 3
    # After: user 1 has 3 items, user 2 one, user 3 none, user 4 two (as given: 4, 2, 1, 2).
    assert found.short_lists == {1: 1, 2: 2, 3: 3}
    # Short only after the removal: user 3 at k=1 (1 item before), user 2 at k=2.
    assert found.short_after_exclude == {1: 1, 2: 1, 3: 0}
    # User 3's list is empty: an evaluated user without recommendations, as user 5.
    assert (found.users_without_recommendations, found.n_users) == (2, 4)
    text = str(found)
    assert "recommendations removed by exclude=: 3" in " ".join(text.split())
    assert "of which short only after exclude=" in text
    plain = fm.diagnose(RECS, TRUTH, k=[1, 2, 3])
    assert (plain.excluded_rows, plain.short_after_exclude) == (None, {})
    assert "exclude" not in str(plain)


# -- a slow reference on random tables --------------------------------------------------------

USERS = [1, 2, 3, 4]
ITEMS = list(range(8))


@st.composite
def _tables(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    recs_rows = []
    for user in USERS:
        items = draw(st.permutations(ITEMS))[: draw(st.integers(0, len(ITEMS)))]
        scores = [draw(st.sampled_from([0.1, 0.2, 0.3])) for _ in items]
        # Ranks 1, 2, 3, ..., or with gaps (empty positions): 1 then steps of 1 or 2.
        steps = [draw(st.sampled_from([1, 1, 2])) for _ in items]
        ranks = [sum(steps[: n + 1]) - steps[0] + 1 for n in range(len(items))]
        recs_rows += [(user, i, r, s) for i, r, s in zip(items, ranks, scores, strict=True)]
    truth_rows = [
        (u, i, draw(st.integers(0, 3)))
        for u in [*USERS, 5]
        for i in ITEMS
        if draw(st.booleans()) and draw(st.booleans())
    ]
    pairs = draw(
        st.lists(st.tuples(st.sampled_from([*USERS, 6]), st.sampled_from(ITEMS)), max_size=20)
    )
    recs = pl.DataFrame(recs_rows, schema=["user", "item", "rank", "score"], orient="row")
    truth = pl.DataFrame(truth_rows, schema=["user", "item", "relevance"], orient="row")
    exclude = pl.DataFrame(pairs, schema=["user", "item"], orient="row")
    return recs, truth, exclude


def _reference(
    recs: pl.DataFrame, truth: pl.DataFrame, exclude: pl.DataFrame, k: int, by_score: bool
) -> dict[str, dict[int, float]]:
    """Precision, recall and ndcg at k by hand: filter, re-rank, count.

    By score: the rest ranked 1, 2, ... (score descending, item ascending). By rank:
    each remaining item moves up by the excluded items ranked above it (1, 2, ... for a
    list without gaps; an empty position stays empty).
    """
    seen = set(exclude.iter_rows())
    lists: dict[int, dict[int, int]] = {}  # user: {new rank: item}
    if by_score:
        for user, item, _, _ in sorted(recs.iter_rows(), key=lambda r: (r[0], -r[3], r[1])):
            if (user, item) not in seen:
                listed = lists.setdefault(user, {})
                listed[len(listed) + 1] = item
    else:
        for user, item, rank, _ in recs.iter_rows():
            above = sum(
                1 for u, i, r, _ in recs.iter_rows() if u == user and r < rank and (u, i) in seen
            )
            if (user, item) not in seen:
                lists.setdefault(user, {})[rank - above] = item
    liked: dict[int, dict[int, float]] = {}
    for user, item, rel in truth.iter_rows():
        if rel > 0:
            liked.setdefault(user, {})[item] = float(rel)
    out: dict[str, dict[int, float]] = {"precision": {}, "recall": {}, "ndcg": {}}
    for user, rels in liked.items():
        top = {r: i for r, i in lists.get(user, {}).items() if r <= k}
        hits = [i for i in top.values() if i in rels]
        out["precision"][user] = len(hits) / k
        out["recall"][user] = len(hits) / len(rels)
        dcg = sum(rels.get(i, 0.0) / math.log2(r + 1) for r, i in sorted(top.items()))
        ideal = sorted(rels.values(), reverse=True)[:k]
        out["ndcg"][user] = dcg / sum(g / math.log2(p + 2) for p, g in enumerate(ideal))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables=_tables(), by_score=st.booleans())
def test_evaluate_equals_a_reference_by_hand(
    tables: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame], by_score: bool
) -> None:
    recs, truth, exclude = tables
    call: dict[str, Any] = {"score": "score"} if by_score else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ids that barely meet, lists missing: not the point
        got = fm.evaluate(
            recs.drop("rank" if by_score else "score"),
            truth,
            metrics=["precision", "recall", "ndcg"],
            k=[1, 2, 3],
            exclude=exclude,
            threshold=None,
            **call,
        )
    for k in (1, 2, 3):
        want = _reference(recs, truth, exclude, k, by_score)
        for name, values in want.items():
            found = user_values(got, f"{name}@{k}")
            assert set(found) == set(values), (name, k)
            for user, value in values.items():
                assert math.isclose(found[user], value, rel_tol=1e-12, abs_tol=1e-15), (
                    name,
                    k,
                    user,
                )


# -- the baseline -----------------------------------------------------------------------------


def test_the_baseline_loses_the_same_pairs() -> None:
    # serendipity@1 counts a top item that is relevant and not in the baseline's top 1.
    recs = pl.DataFrame({"user": 1, "item": ["a", "b", "c"], "rank": [1, 2, 3]})
    truth = pl.DataFrame({"user": 1, "item": ["b", "c"], "relevance": 1})
    baseline = pl.DataFrame({"user": 1, "item": ["a", "b"], "rank": [1, 2]})
    call: dict[str, Any] = {"metrics": "serendipity@1", "baseline": baseline}
    assert fm.evaluate(recs, truth, **call)["serendipity@1"].item() == 0.0  # a: not liked
    # Without a, both lists start with b: expected (the baseline shows it), so 0 again.
    assert fm.evaluate(recs, truth, exclude=SEEN_A, **call)["serendipity@1"].item() == 0.0
    # Excluding b as well: c tops the list, a baseline of a, b shows nothing: unexpected.
    seen = pl.DataFrame({"user": [1, 1], "item": ["a", "b"]})
    assert fm.evaluate(recs, truth, exclude=seen, **call)["serendipity@1"].item() == 1.0


# -- bad input ----------------------------------------------------------------------------------


def test_a_missing_column_names_what_exclude_has(constructor: Constructor) -> None:
    bad = constructor(pl.DataFrame({"usr": [1], "item": ["b"], "ts": [3]}))
    with pytest.raises(MissingColumnsError) as raised:
        fm.evaluate(constructor(RECS), constructor(TRUTH), metrics=METRICS, exclude=bad)
    assert str(raised.value) == (
        "exclude: expected column 'user' (did you mean 'usr'?), not found; available "
        "columns: 'usr', 'item', 'ts'"
    )
    with pytest.raises(MissingColumnsError, match=r"^exclude: expected column 'user'"):
        fm.diagnose(constructor(RECS), constructor(TRUTH), k=2, exclude=bad)


def test_a_composite_user_key_is_read_whole() -> None:
    recs = RECS.with_columns(session=pl.lit(7))
    truth = TRUTH.with_columns(session=pl.lit(7))
    exclude = EXCLUDE.with_columns(session=pl.lit(7))
    call: dict[str, Any] = {"metrics": METRICS, "user": ["user", "session"]}
    got = fm.evaluate(recs, truth, exclude=exclude, **call)
    assert_frame_equal(
        got.drop("session"), fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=EXCLUDE)
    )
    # Another session's pairs are other pairs.
    other = EXCLUDE.with_columns(session=pl.lit(8))
    assert_frame_equal(
        fm.evaluate(recs, truth, exclude=other, **call), fm.evaluate(recs, truth, **call)
    )
    with pytest.raises(MissingColumnsError, match=r"^exclude: expected column 'session'"):
        fm.evaluate(recs, truth, exclude=EXCLUDE, **call)


def test_ids_of_another_kind_are_refused() -> None:
    text_ids = EXCLUDE.with_columns(pl.col("user").cast(pl.String))
    with pytest.raises(InvalidValueError) as raised:
        fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=text_ids)
    assert str(raised.value) == (
        "recs and exclude: expected key column 'user' to have dtypes whose values can be "
        "matched exactly, found Int64 in recs and String in exclude"
    )
    # Integer ids of other widths, or floats holding whole numbers, match.
    wide = EXCLUDE.with_columns(pl.col("user").cast(pl.Float64))
    assert_frame_equal(
        fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=wide),
        fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=EXCLUDE),
    )


def test_a_null_key_is_an_error() -> None:
    nulls = pl.DataFrame(
        {"user": [1, None], "item": ["b", "c"]}, schema={"user": pl.Int64, "item": pl.String}
    )
    with pytest.raises(
        InvalidValueError, match=r"^exclude: expected no nulls in key column 'user'"
    ):
        fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=nulls)
    assert fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=nulls, validate=False).height == 4


def test_rating_metrics_alone_ignore_it_with_a_warning() -> None:
    recs = RECS.with_columns(prediction=pl.lit(1.0))
    with pytest.warns(IgnoredOptionWarning, match=r"^exclude: ignored: the rating metrics"):
        got = fm.evaluate(recs, TRUTH, metrics="rmse", exclude=EXCLUDE, aggregate=True)
    assert_frame_equal(got, fm.evaluate(recs, TRUTH, metrics="rmse", aggregate=True))


# -- buckets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregate", [False, True], ids=["per-user", "aggregate"])
def test_buckets_give_the_one_pass_numbers(aggregate: bool) -> None:
    call: dict[str, Any] = {"metrics": METRICS, "exclude": EXCLUDE, "aggregate": aggregate}
    got = fm.evaluate(RECS.lazy(), TRUTH, buckets=3, **call)
    assert isinstance(got, pl.LazyFrame)
    assert_frame_equal(got.collect(), fm.evaluate(RECS, TRUTH, **call))


# -- Spark and Dask ----------------------------------------------------------------------------


def _sorted(frame: pl.DataFrame, aggregate: bool) -> pl.DataFrame:
    keys = [c for c in ("model", "user") if c in frame.columns]
    return frame if aggregate or not keys else frame.sort(keys)


@pytest.mark.parametrize("aggregate", [False, True], ids=["per-user", "aggregate"])
@pytest.mark.parametrize(
    "call",
    [
        {"metrics": METRICS},
        {"metrics": METRICS, "by": "model"},
        {"metrics": ["precision@2", "ndcg@3", "novelty@2"], "score": "score", "train": RECS},
    ],
    ids=["rank", "by", "score"],
)
@pytest.mark.parametrize("local", [False, True], ids=["distributed-exclude", "local-exclude"])
def test_spark_and_dask_give_the_same_numbers(
    backend: Any, call: dict[str, Any], aggregate: bool, local: bool
) -> None:
    to_backend, to_polars_result, _ = backend
    # Two models: m2 lists every user's items in reverse; scores follow the ranks.
    recs = pl.concat(
        [
            RECS.with_columns(model=pl.lit("m1")),
            RECS.with_columns(
                model=pl.lit("m2"), rank=pl.col("rank").max().over("user") + 1 - pl.col("rank")
            ),
        ]
    ).with_columns(score=-pl.col("rank").cast(pl.Float64))
    if "score" in call:
        recs = recs.drop("rank")
    if "by" not in call:
        recs = recs.filter(model="m1").drop("model")
    want = fm.evaluate(recs, TRUTH, exclude=EXCLUDE, aggregate=aggregate, **call)
    exclude = EXCLUDE if local else to_backend(EXCLUDE, 2)
    dist = {n: to_backend(v, 2) if isinstance(v, pl.DataFrame) else v for n, v in call.items()}
    result = fm.evaluate(
        to_backend(recs, 3), to_backend(TRUTH, 2), exclude=exclude, aggregate=aggregate, **dist
    )
    got = _sorted(to_polars_result(result), aggregate)
    assert_frame_equal(got, want, check_dtypes=False, rel_tol=1e-12, abs_tol=0.0)


def test_spark_and_dask_diagnose_the_same(backend: Any) -> None:
    to_backend, _, _ = backend
    want = fm.diagnose(RECS, TRUTH, k=[1, 2, 3], exclude=EXCLUDE)
    found = fm.diagnose(
        to_backend(RECS, 3), to_backend(TRUTH, 2), k=[1, 2, 3], exclude=to_backend(EXCLUDE, 2)
    )
    assert (found.excluded_rows, found.short_after_exclude) == (3, {1: 1, 2: 1, 3: 0})
    assert found.short_lists == want.short_lists
    assert found.users_without_recommendations == want.users_without_recommendations
    plain = fm.diagnose(to_backend(RECS, 3), to_backend(TRUTH, 2), k=2)
    assert (plain.excluded_rows, plain.short_after_exclude) == (None, {})


# -- fm.group_exposure and fm.policy_value -----------------------------------------------------------


EXPOSURE_RECS = pl.DataFrame(
    {"user": [1, 1, 2, 2], "item": ["a", "c", "a", "b"], "rank": [1, 2, 1, 2]}
)
GROUPS = pl.DataFrame({"item": ["a", "b", "c", "d"], "group": ["x", "x", "y", "y"]})


def test_exposure_counts_the_lists_after_the_removal(constructor: Constructor) -> None:
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [1]})
    seen = pl.DataFrame({"user": [1], "item": ["a"]})
    out = fm.group_exposure(
        constructor(EXPOSURE_RECS),
        constructor(truth),
        k=1,
        item_groups=constructor(GROUPS),
        catalog=constructor(GROUPS),
        exposure="uniform",
        exclude=constructor(seen),
    )
    assert_kind(out, constructor)
    # At k = 1: user 1 shows c (a is out), user 2 shows a. Merit is truth's: all x.
    assert to_polars(out).rows() == [("x", 1.0, 0.5, 0.5, 1.0), ("y", 1.0, 0.5, 0.5, 0.0)]
    plain = fm.group_exposure(EXPOSURE_RECS, k=1, item_groups=GROUPS, exposure="uniform")
    assert plain["exposure"].to_list() == [2.0, 0.0]
    # The namespace forwards it.
    again = recmetrics(constructor(EXPOSURE_RECS)).exposure(
        k=1, item_groups=constructor(GROUPS), exposure="uniform", exclude=constructor(seen)
    )
    assert to_polars(again)["exposure"].to_list() == [1.0, 1.0]


LOGS = pl.DataFrame(
    {
        "user": [1, 1, 2, 2],
        "item": ["a", "b", "c", "d"],
        "reward": [0.0, 1.0, 0.0, 1.0],
        "pscore": 0.5,
    }
)
POLICY = pl.DataFrame(
    {"user": [1, 1, 2, 2], "item": ["a", "b", "c", "d"], "rank": [1, 2, 1, 2], "q": 0.5}
)
SEEN_AC = pl.DataFrame({"user": [1, 2], "item": ["a", "c"]})


@pytest.mark.parametrize(
    ("estimator", "without", "with_exclude"),
    [
        # Shown: a and c (reward 0), w = 1 / 0.5 on them; then b and d (reward 1).
        ("ips", (2 * 0 + 2 * 0) / 4, (2 * 1 + 2 * 1) / 4),
        ("snips", (2 * 0 + 2 * 0) / (2 + 2), (2 * 1 + 2 * 1) / (2 + 2)),
        ("matching", 0.0, 1.0),
        # q̂ = 0.5: per row 0.5 + w (r - 0.5), w = 2 on the shown rows, 0 on the others.
        (
            "dr",
            ((0.5 + 2 * (0 - 0.5)) + 0.5 + (0.5 + 2 * (0 - 0.5)) + 0.5) / 4,
            (0.5 + (0.5 + 2 * (1 - 0.5)) + 0.5 + (0.5 + 2 * (1 - 0.5))) / 4,
        ),
    ],
)
def test_policy_value_shows_the_next_items(
    constructor: Constructor, estimator: str, without: float, with_exclude: float
) -> None:
    call: dict[str, Any] = {"k": 1, "estimator": estimator, "n_resamples": 0}
    if estimator == "dr":
        call["reward_model"] = "q"
    plain = fm.policy_value(LOGS, POLICY, **call)
    out = fm.policy_value(
        constructor(LOGS), constructor(POLICY), exclude=constructor(SEEN_AC), **call
    )
    assert_kind(out, constructor)
    got = to_polars(out)
    assert (plain["value"].item(), got["value"].item()) == (without, with_exclude)
    # Logs are not touched: every logged row counts.
    assert got["n_rows"].item() == 4
    via = recmetrics(constructor(LOGS)).policy_value(
        constructor(POLICY), exclude=constructor(SEEN_AC), **call
    )
    assert to_polars(via)["value"].item() == with_exclude


def test_policy_value_refuses_exclude_with_given_probabilities() -> None:
    with pytest.raises(InvalidOptionError, match=r"^exclude: expected recs ranked by rank or"):
        fm.policy_value(LOGS, POLICY.with_columns(p=pl.lit(0.5)), probability="p", exclude=SEEN_AC)


def test_exposure_and_policy_value_refuse_a_bad_exclude(constructor: Constructor) -> None:
    missing = constructor(pl.DataFrame({"usr": [1], "item": ["b"], "ts": [3]}))
    with pytest.raises(MissingColumnsError, match=r"^exclude: expected column 'user'"):
        fm.group_exposure(constructor(RECS), k=2, item_groups=GROUPS, exclude=missing)
    with pytest.raises(MissingColumnsError, match=r"^exclude: expected column 'user'"):
        fm.policy_value(constructor(LOGS), constructor(POLICY), exclude=missing)
    text_ids = EXCLUDE.with_columns(pl.col("user").cast(pl.String))
    # (Without truth, fm.group_exposure reads recs as a long table, and names it so.)
    with pytest.raises(InvalidValueError, match="and exclude: expected key column 'user'"):
        fm.group_exposure(RECS, k=2, item_groups=GROUPS, exclude=text_ids)
    with pytest.raises(InvalidValueError, match=r"^recs and exclude: expected key column 'user'"):
        fm.policy_value(LOGS, POLICY, exclude=text_ids)


def test_spark_and_dask_exposure_and_policy_value(backend: Any) -> None:
    to_backend, to_polars_result, _ = backend
    seen = pl.DataFrame({"user": [1], "item": ["a"]})
    table = fm.group_exposure(
        to_backend(EXPOSURE_RECS, 2),
        k=1,
        item_groups=GROUPS,
        exposure="uniform",
        exclude=to_backend(seen, 1),
    )
    assert to_polars_result(table)["exposure"].to_list() == [1.0, 1.0]
    value = fm.policy_value(
        to_backend(LOGS, 2),
        to_backend(POLICY, 2),
        k=1,
        estimator="ips",
        n_resamples=0,
        exclude=to_backend(SEEN_AC, 1),
    )
    assert to_polars_result(value)["value"].to_list() == [1.0]


# -- the command line ---------------------------------------------------------------------------


def _files(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "recs": tmp_path / "recs.parquet",
        "truth": tmp_path / "truth.csv",
        "train": tmp_path / "train.parquet",
        "groups": tmp_path / "groups.csv",
        "logs": tmp_path / "logs.parquet",
        "policy": tmp_path / "policy.csv",
        "seen": tmp_path / "seen.csv",
    }
    RECS.write_parquet(paths["recs"])
    TRUTH.write_csv(paths["truth"])
    EXCLUDE.write_parquet(paths["train"])
    GROUPS.write_csv(paths["groups"])
    LOGS.write_parquet(paths["logs"])
    POLICY.write_csv(paths["policy"])
    SEEN_AC.write_csv(paths["seen"])
    return paths


def _csv(out: str) -> pl.DataFrame:
    import io

    return pl.read_csv(io.StringIO(out))


def test_the_command_line_takes_an_exclude_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    f = _files(tmp_path)
    m = ",".join(METRICS)
    args = ["evaluate", f["recs"], f["truth"], "-m", m, "--exclude", f["train"], "--format", "csv"]
    assert main([str(a) for a in [*args, "--per-user", "--threshold", "none"]]) == 0
    got = _csv(capsys.readouterr().out)
    assert_frame_equal(got, fm.evaluate(RECS, TRUTH, metrics=METRICS, exclude=EXCLUDE))
    exposure = ["group-exposure", f["recs"], "-k", "1", "--item-groups", f["groups"], "--exclude"]
    assert main([str(a) for a in [*exposure, f["train"], "--format", "csv"]]) == 0
    want = fm.group_exposure(RECS, k=1, item_groups=GROUPS, exclude=EXCLUDE)
    assert_frame_equal(_csv(capsys.readouterr().out), want)
    value = ["policy-value", f["logs"], f["policy"], "-k", "1", "--estimator", "ips"]
    value_csv = [*value, "--resamples", "0", "--exclude", f["seen"], "--format", "csv"]
    assert main([str(a) for a in value_csv]) == 0
    assert _csv(capsys.readouterr().out)["value"].item() == 1.0


def test_the_command_line_says_a_missing_column_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    f = _files(tmp_path)
    bad = tmp_path / "bad.csv"
    pl.DataFrame({"usr": [1], "item": ["b"]}).write_csv(bad)
    code = main([str(a) for a in ["evaluate", f["recs"], f["truth"], "--exclude", bad]])
    err = capsys.readouterr().err
    assert code == 2
    assert "exclude: expected column 'user' (did you mean 'usr'?), not found" in err
    assert len(err.strip().splitlines()) == 1
