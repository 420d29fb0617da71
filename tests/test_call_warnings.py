"""Definition sheet section 8: what a call most likely did not mean is said, once.

Star ratings as relevance without a threshold (``RelevanceWarning``), more than half of the
evaluated users without a recommendation (``NoRecommendationsWarning``), ``rank=`` beside
``score=`` (``IgnoredOptionWarning``), ``fm.compare`` choosing its own baseline
(``BaselineChoiceWarning``); repeats resolved by ``on_duplicate="first"`` whatever the
input ranks by. Each warning is issued once per call, on every frame kind, and is silenced
by doing what it says (which is tested by doing it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import frame_metrics as fm
from tests.conftest import Constructor, to_polars
from tests.conftest import evaluate_as_polars as run

LOG3 = math.log2(3)

# Two users rated movies in half stars; user 3 rated, and got no list.
RATED = pl.DataFrame(
    {
        "user": [1, 1, 1, 2, 2, 3],
        "item": ["a", "b", "c", "a", "d", "e"],
        "rating": [0.5, 4.0, 5.0, 3.5, 4.5, 4.0],
    }
)
LISTS = pl.DataFrame({"user": [1, 1, 2, 2], "item": ["a", "b", "d", "b"], "rank": [1, 2, 1, 2]})


@contextmanager
def caught() -> Iterator[list[warnings.WarningMessage]]:
    """Every frame_metrics warning issued inside, each once (no filter dedups them)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield seen


def of(seen: list[warnings.WarningMessage], kind: type[Warning]) -> list[str]:
    return [str(w.message) for w in seen if isinstance(w.message, kind)]


def evaluate(constructor: Constructor, recs: pl.DataFrame, truth: pl.DataFrame, **kw: Any) -> Any:
    return to_polars(fm.evaluate(constructor(recs), constructor(truth), **kw))


# --- star ratings as relevance ------------------------------------------------------------------

STARS = (
    "threshold: expected a threshold saying which relevance levels are relevant, found none, "
    "and truth column 'rating' with levels that look like star ratings (0.5, 3.5, 4.0, 4.5, "
    "5.0): every level above 0 counts as relevant (0.5 too) and gains its value; pass "
    "threshold=4 (or the level you mean), or pass threshold=None to keep rel > 0 and say so"
)


def test_star_ratings_without_a_threshold_warn_once(constructor: Constructor) -> None:
    with caught() as seen:
        got = evaluate(constructor, LISTS, RATED, metrics=["recall@2"], relevance="rating")
    # Every rating > 0 is relevant: user 1 has a (0.5) and b of {a, b, c}; user 2 d of {a, d}.
    assert got.rows() == [(1, 2 / 3), (2, 1 / 2), (3, 0.0)]
    assert of(seen, fm.RelevanceWarning) == [STARS]  # levels 0.5, 3.5, 4.0, 4.5, 5.0


@pytest.mark.parametrize(
    "said", [{"threshold": 4}, {"threshold": None}, {"convention": "rectools"}]
)
def test_saying_the_threshold_silences_it(constructor: Constructor, said: dict[str, Any]) -> None:
    with caught() as seen:
        got = evaluate(constructor, LISTS, RATED, metrics=["recall@2"], relevance="rating", **said)
    assert of(seen, fm.RelevanceWarning) == []
    if said == {"threshold": 4}:
        # Doing what it proposes: 4 stars and up. User 1: b of {b, c}; user 2: d of {d}.
        assert got.rows() == [(1, 1 / 2), (2, 1.0), (3, 0.0)]


def test_a_metric_string_can_say_it() -> None:
    with caught() as seen:
        fm.evaluate(LISTS, RATED, metrics=["recall(threshold=4)@2"], relevance="rating")
    assert of(seen, fm.RelevanceWarning) == []
    with caught() as seen:  # one metric saying it, another not: the other reads stars
        fm.evaluate(LISTS, RATED, metrics=["recall(threshold=4)@2", "ndcg@2"], relevance="rating")
    assert len(of(seen, fm.RelevanceWarning)) == 1


@pytest.mark.parametrize(
    "levels",
    [
        [1, 1, 0, 1, 0, 1],  # binary
        [1, 2, 2, 1, 2, 1],  # two levels
        [0.5, 1.0, 1.5, 2.0, 2.5, 1.0],  # largest below 3
        [1.0, 2.0, 3.0, 4.2, 5.0, 1.0],  # not multiples of 0.5
    ],
)
def test_no_warning_unless_the_levels_look_like_stars(levels: list[float]) -> None:
    truth = RATED.with_columns(rating=pl.Series(levels, dtype=pl.Float64))
    with caught() as seen:
        fm.evaluate(LISTS, truth, metrics=["recall@2"], relevance="rating")
    assert of(seen, fm.RelevanceWarning) == []


def test_a_long_table_of_ratings_warns() -> None:
    long = pl.DataFrame(
        {
            "user": [1, 1, 1],
            "item": ["a", "b", "c"],
            "rank": [1, 2, None],
            "relevance": [1.0, 3.0, 5.0],
        }
    )
    with caught() as seen:
        fm.evaluate(long, metrics=["recall@2"])
    [message] = of(seen, fm.RelevanceWarning)
    assert (
        "long table column 'relevance' with levels that look like star ratings (1.0, 3.0, 5.0)"
        in message
    )


# --- users without recommendations --------------------------------------------------------------

NO_LISTS = (
    "recs: expected recommendations for most evaluated users, found none for {n} of the {of} "
    "users with a relevant truth item: they score 0 on every ranking metric (definition sheet, "
    "section 3); pass users='both' to evaluate only the users in both frames"
)


def test_recs_for_one_user_warn(constructor: Constructor) -> None:
    one = LISTS.filter(pl.col("user") == 1)
    with caught() as seen:
        got = evaluate(
            constructor, one, RATED, metrics=["recall@2"], relevance="rating", threshold=4
        )
    # Users 2 and 3 have relevant items (4.5 and 4.0) and no list: 0 each.
    assert got.rows() == [(1, 1 / 2), (2, 0.0), (3, 0.0)]
    assert of(seen, fm.NoRecommendationsWarning) == [NO_LISTS.format(n=2, of=3)]
    # Doing what it says: users in both frames only.
    with caught() as seen:
        got = evaluate(
            constructor,
            one,
            RATED,
            metrics=["recall@2"],
            relevance="rating",
            threshold=4,
            users="both",
        )
    assert got.rows() == [(1, 1 / 2)]
    assert of(seen, fm.NoRecommendationsWarning) == []


def test_empty_recs_warn(constructor: Constructor) -> None:
    empty = LISTS.clear()
    with caught() as seen:
        got = evaluate(
            constructor, empty, RATED, metrics=["ndcg@2"], relevance="rating", threshold=4
        )
    assert got.rows() == [(1, 0.0), (2, 0.0), (3, 0.0)]
    assert of(seen, fm.NoRecommendationsWarning) == [NO_LISTS.format(n=3, of=3)]


def test_half_or_fewer_without_lists_do_not_warn() -> None:
    # Users 1 and 2 of 3 have lists: one in three without.
    with caught() as seen:
        fm.evaluate(LISTS, RATED, metrics=["recall@2"], relevance="rating", threshold=4)
    assert of(seen, fm.NoRecommendationsWarning) == []


def test_the_exact_count_past_the_sample() -> None:
    # 30,000 users with a relevant item; the first 10,000 truth rows (the sample) are users
    # without lists, every later user has one: the exact count (10,000 of 30,000) is under
    # half, so no warning.
    users = pl.int_range(30_000, eager=True)
    truth = pl.DataFrame({"user": users, "item": "a", "relevance": 1})
    recs = pl.DataFrame({"user": users.filter(users >= 10_000), "item": "a", "rank": 1})
    with caught() as seen:
        fm.evaluate(recs, truth, metrics=["hit_rate@1"])
    assert of(seen, fm.NoRecommendationsWarning) == []
    # The other way round: 20,000 of 30,000 without, past the sample too.
    recs = pl.DataFrame({"user": users.filter(users < 10_000), "item": "a", "rank": 1})
    with caught() as seen:
        fm.evaluate(recs, truth, metrics=["hit_rate@1"])
    assert of(seen, fm.NoRecommendationsWarning) == [NO_LISTS.format(n=20_000, of=30_000)]


def test_unmatched_ids_are_said_once_as_ids() -> None:
    # Ids written as text in recs: no user of truth has a list, which the ids warning says.
    recs = LISTS.with_columns(pl.format("00{}", "user").alias("user"))
    truth = RATED.with_columns(pl.col("user").cast(pl.String))
    with caught() as seen:
        fm.evaluate(recs, truth, metrics=["recall@2"], relevance="rating", threshold=4)
    assert len(of(seen, fm.UnmatchedIdsWarning)) == 1
    assert of(seen, fm.NoRecommendationsWarning) == []


# --- rank and score both given ------------------------------------------------------------------

RANK_IGNORED = (
    "rank: 'rank' ignored: score='score' ranks the recommendations (score descending, ties by "
    "the tie rule); leave score out to rank by the rank column, or leave rank out to say the "
    "score ranks"
)


def test_rank_beside_score_is_not_read(constructor: Constructor) -> None:
    # The score puts b first; the rank column puts a first. Truth: b relevant.
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2], "score": [0.1, 0.9]})
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    with caught() as seen:
        got = evaluate(constructor, recs, truth, metrics=["mrr@2"], rank="rank", score="score")
    assert got.rows() == [(1, 1.0)]  # b at rank 1 by score
    assert of(seen, fm.IgnoredOptionWarning) == [RANK_IGNORED]
    # Doing either thing it says silences it.
    for which in ({"score": "score"}, {"rank": "rank"}):
        with caught() as seen:
            got = evaluate(constructor, recs, truth, metrics=["mrr@2"], **which)
        assert of(seen, fm.IgnoredOptionWarning) == []
        assert got.rows() == [(1, 1.0 if "score" in which else 1 / 2)]


# --- on_duplicate="first" -----------------------------------------------------------------------


def test_identical_rows_are_one_repeat_with_ranks(constructor: Constructor) -> None:
    # a twice at rank 1 (identical rows), b at 2: one list a, b.
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "a", "b"], "rank": [1, 1, 2]})
    truth = pl.DataFrame({"user": [1, 1], "item": ["b", "z"], "relevance": [1, 1]})
    got = run(constructor, recs, truth, metrics=["ndcg@2"], on_duplicate="first")
    assert got.rows() == [(1, (1 / LOG3) / (1 + 1 / LOG3))]
    with pytest.raises(fm.DuplicateRowsError, match="one row per rank within a user"):
        fm.evaluate(constructor(recs), constructor(truth), metrics=["ndcg@2"])


def test_two_items_at_one_rank_stay_an_error_that_says_why(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "c"], "rank": [1, 1, 2]})
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    message = (
        "recs: expected one row per rank within a user, found 2 rows that repeat one, e.g. "
        "user=1, item='a', rank=1 (on_duplicate='first' resolves a repeated item, keeping its "
        "best-ranked row; two different items at one rank leave no order between them: give "
        "each its own rank)"
    )
    with pytest.raises(fm.DuplicateRowsError) as refused:
        fm.evaluate(constructor(recs), constructor(truth), k=2, on_duplicate="first")
    assert str(refused.value) == message


def test_a_repeat_below_every_cutoff_is_no_error(constructor: Constructor) -> None:
    # A long table: ranks 5 twice, below k = 2; c and d relevant, not recommended within 2.
    long = pl.DataFrame(
        {
            "user": [1, 1, 1, 1],
            "item": ["a", "b", "c", "d"],
            "rank": [1, 2, 5, 5],
            "relevance": [1, 0, 1, 1],
        }
    )
    got = run(constructor, long, None, metrics=["recall@2"])
    assert got.rows() == [(1, 1 / 3)]


# --- fm.compare's baseline ----------------------------------------------------------------------


def test_compare_without_a_baseline_compares_every_pair_and_chooses_none(
    constructor: Constructor,
) -> None:
    """Sheet 12: no model is picked silently; each pair's baseline is its first by name."""
    per_user = pl.DataFrame(
        {"model": ["b", "b", "a", "a", "c", "c"], "user": [1, 2] * 3,
         "ndcg@5": [0.5, 1.0, 0.0, 0.5, 1.0, 1.0]}
    )  # fmt: skip
    with caught() as seen:
        got = to_polars(fm.compare(constructor(per_user), n_resamples=10))
    assert got.select("model", "baseline", "diff").rows() == [
        ("a", "a", None),  # the first model alone: its mean and interval
        ("b", "a", (0.5 + 0.5) / 2),
        ("c", "a", (1.0 + 0.5) / 2),
        ("c", "b", (0.5 + 0.0) / 2),
    ]
    assert of(seen, fm.BaselineChoiceWarning) == []
    with caught() as seen:
        got = to_polars(fm.compare(constructor(per_user), baseline_model="b", n_resamples=10))
    assert got.select("model", "baseline").rows() == [("a", "b"), ("b", "b"), ("c", "b")]
    one = per_user.filter(pl.col("model") == "a")
    with pytest.raises(fm.InvalidValueError) as refused:
        fm.compare(constructor(one), n_resamples=10)
    assert str(refused.value) == (
        "frame: expected at least two models to compare every pair of, found one, 'a', in "
        "column 'model'"
    )
    assert_frame_equal(  # one model against itself as the baseline: its row alone
        to_polars(fm.compare(constructor(one), baseline_model="a", n_resamples=10)),
        to_polars(fm.compare(constructor(per_user), n_resamples=10)).head(1),
        check_dtypes=False,
    )


def test_compare_of_means_says_what_it_needs(constructor: Constructor) -> None:
    means = pl.DataFrame({"model": ["a", "b"], "n_users": [2, 2], "ndcg@5": [0.25, 0.75]})
    with pytest.raises(fm.InvalidValueError) as refused:
        fm.compare(constructor(means))
    assert str(refused.value) == (
        "frame: expected per-user values (one row per user, with the user column 'user'), found "
        "means (n_users, one row per group): evaluate without aggregate=True (per-user rows are "
        "its default), or pass the recommendations and truth= to evaluate here"
    )


def test_every_warning_is_exported_and_a_frame_metrics_warning() -> None:
    for name in (
        "RelevanceWarning",
        "NoRecommendationsWarning",
        "BaselineChoiceWarning",
        "IgnoredOptionWarning",
        "SmallSampleWarning",
        "UnmatchedIdsWarning",
        "UndefinedMetricWarning",
    ):
        assert issubclass(getattr(fm, name), fm.FrameMetricsWarning), name
        assert name in fm.__all__
