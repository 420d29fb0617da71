"""Beyond-accuracy and rating metrics on a small example, worked out by hand, on every kind.

The example (also the one the peer tests start from):

    train  user 1: items 1, 2, 3     user 2: items 1, 2     user 3: items 1, 4
           pop: item 1 -> 3 users, item 2 -> 2, item 3 -> 1, item 4 -> 1; items 5, 6 unseen
           N = 3 train users; 7 (user, item) pairs
    recs   user 1: [4, 5, 6]         user 2: [3, 4, 5]       user 3: [2]
    truth  user 1: {4, 6}            user 2: {5}             user 3: {2}
    items seen in the inputs: 1..6

Every expected value below is arithmetic on this table, written out.
"""

from __future__ import annotations

import math
import re
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import (
    FrameMetricsError,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
)
from tests.conftest import Constructor, assert_kind, to_polars

TRAIN = pl.DataFrame({"user": [1, 1, 1, 2, 2, 3, 3], "item": [1, 2, 3, 1, 2, 1, 4]})
RECS = pl.DataFrame(
    {"user": [1, 1, 1, 2, 2, 2, 3], "item": [4, 5, 6, 3, 4, 5, 2], "rank": [1, 2, 3, 1, 2, 3, 1]}
)
TRUTH = pl.DataFrame({"user": [1, 1, 2, 3], "item": [4, 6, 5, 2], "relevance": [1, 1, 1, 1]})
#: Vectors for cosine, and genre sets for Jaccard.
VECTORS = pl.DataFrame(
    {
        "item": [1, 2, 3, 4, 5, 6],
        "features": [[1.0, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1]],
    }
)
GENRES = pl.DataFrame(
    {
        "item": [1, 2, 3, 4, 5, 6],
        "features": [["a"], ["a", "b"], ["b"], ["c"], ["a", "c"], ["b", "c", "d"]],
    }
)
LOG2_3 = math.log2(3)


def run(constructor: Constructor, recs: pl.DataFrame, *args: Any, **kwargs: Any) -> pl.DataFrame:
    """Evaluate with every frame (recs, truth and extra inputs) of one kind."""
    args = tuple(constructor(a) if isinstance(a, pl.DataFrame) else a for a in args)
    extras = {k: constructor(v) if isinstance(v, pl.DataFrame) else v for k, v in kwargs.items()}
    out = fm.evaluate(constructor(recs), *args, **extras)
    assert_kind(out, constructor)
    return to_polars(out)


def column(frame: pl.DataFrame, name: str) -> list[Any]:
    return frame[name].to_list()


# --- novelty and popularity -------------------------------------------------------------------


def test_novelty_arp_aplt(constructor: Constructor) -> None:
    out = run(
        constructor,
        RECS,
        metrics=["novelty", "arp", "aplt"],
        k=[1, 3],
        train=TRAIN,
        head_share=0.5,
    )
    assert column(out, "user") == [1, 2, 3]
    # novelty: -log2(pop / 3); items 5 and 6 were seen by nobody and count as seen by one
    # user (RecTools' MeanInvUserFreq): -log2(1/3) = log2(3).
    assert column(out, "novelty@1") == pytest.approx([LOG2_3, LOG2_3, math.log2(3 / 2)], rel=1e-15)
    assert column(out, "novelty@3") == pytest.approx(
        [(LOG2_3 * 3) / 3, (LOG2_3 * 3) / 3, math.log2(3 / 2)], rel=1e-15
    )
    # arp: mean distinct-user popularity (0 for unseen items), over the list's own length.
    assert column(out, "arp@1") == [1.0, 1.0, 2.0]
    assert column(out, "arp@3") == [(1 + 0 + 0) / 3, (1 + 1 + 0) / 3, 2 / 1]
    # head_share 0.5 of 7 pairs = 3.5: item 1 (nothing more popular: 0 < 3.5) and item 2
    # (item 1 holds 3 < 3.5) are the head; items 3 and 4 (3 + 2 = 5 >= 3.5), 5, 6 the tail.
    assert column(out, "aplt@1") == [1.0, 1.0, 0.0]
    assert column(out, "aplt@3") == [1.0, 1.0, 0.0]


def test_aplt_default_cut() -> None:
    # head_share 0.2 of 7 pairs = 1.4: only item 1 is in the head (item 2: 3 >= 1.4).
    recs = pl.DataFrame({"user": [1, 1, 2], "item": [1, 2, 1], "rank": [1, 2, 1]})
    out = fm.evaluate(recs, metrics="aplt@2", train=TRAIN)
    assert column(out, "aplt@2") == [1 / 2, 0 / 1]


def test_popularity_ties_stay_together() -> None:
    # Four items of equal popularity: none is more popular than another, so all are head.
    train = pl.DataFrame({"user": [1, 2, 3, 4], "item": [1, 2, 3, 4]})
    recs = pl.DataFrame({"user": [9, 9], "item": [1, 4], "rank": [1, 2]})
    assert fm.evaluate(recs, metrics="aplt@2", train=train)["aplt@2"].item() == 0.0


# --- corpus metrics ------------------------------------------------------------------------------


def test_coverage_personalization_gini(constructor: Constructor) -> None:
    out = run(
        constructor,
        RECS,
        TRUTH,
        metrics=["coverage", "personalization", "gini"],
        k=[1, 3],
        aggregate=True,
        train=TRAIN,
    )
    assert out.columns == [
        "n_users",
        "coverage@1",
        "coverage@3",
        "personalization@1",
        "personalization@3",
        "gini@1",
        "gini@3",
    ]
    row = out.row(0, named=True)
    assert row["n_users"] == 3
    # Catalog = items seen in recs, truth and train: 1..6.
    assert row["coverage@1"] == 3 / 6  # {4, 3, 2}
    assert row["coverage@3"] == 5 / 6  # {2, 3, 4, 5, 6}
    # Top 1: [4], [3], [2] share nothing; top 3: users 1 and 2 share {4, 5}, 2 of k = 3.
    assert row["personalization@1"] == 1 - (0 + 0 + 0) / 3
    assert row["personalization@3"] == pytest.approx(1 - (2 / 3 + 0 + 0) / 3, rel=1e-15)
    # Gini over the n = 6 catalog items, exposures sorted ascending, Σ_j (2j - n - 1) e_j / (n Σe):
    # top 1: [0, 0, 0, 1, 1, 1] -> (1 + 3 + 5) / (6 * 3)
    assert row["gini@1"] == pytest.approx((1 + 3 + 5) / (6 * 3), rel=1e-15)
    # top 3: item 1 -> 0, items 2, 3, 6 -> 1, items 4, 5 -> 2:
    # [0, 1, 1, 1, 2, 2] -> (-3 - 1 + 1 + 3 * 2 + 5 * 2) / (6 * 7)
    assert row["gini@3"] == pytest.approx((-3 - 1 + 1 + 6 + 10) / (6 * 7), rel=1e-15)


def test_catalog_frame_sets_the_denominator(constructor: Constructor) -> None:
    catalog = pl.DataFrame({"item": list(range(1, 11))})
    out = run(constructor, RECS, metrics=["coverage@3", "gini@3"], aggregate=True, catalog=catalog)
    assert out["coverage@3"].item() == 5 / 10
    # [0]*5 + [1, 1, 1, 2, 2] over n = 10: positions 6..10 -> (2j - 11) = 1, 3, 5, 7, 9
    assert out["gini@3"].item() == pytest.approx((1 + 3 + 5 + 7 * 2 + 9 * 2) / (10 * 7), rel=1e-15)


def test_personalization_pairs_users_only_in_principle() -> None:
    # Three users with the same list: every pair shares all k items.
    recs = pl.DataFrame({"user": [1, 1, 2, 2, 3, 3], "item": [7, 8] * 3, "rank": [1, 2] * 3})
    out = fm.evaluate(recs, metrics="personalization@2", aggregate=True)
    assert out["personalization@2"].item() == 0.0
    # One user: no pair, so no value (null), not 0 or 1.
    one = fm.evaluate(recs.filter(pl.col("user") == 1), metrics="personalization@2", aggregate=True)
    assert one["personalization@2"].item() is None


def test_corpus_metrics_per_group(constructor: Constructor) -> None:
    """Each ``by`` group is its own corpus: the same as evaluating it alone."""
    stacked = pl.concat(
        [
            RECS.with_columns(model=pl.lit("a")),
            RECS.filter(pl.col("user") != 2).with_columns(model=pl.lit("b")),
        ]
    )
    catalog = pl.DataFrame({"item": list(range(1, 9))})
    metrics = ["coverage@3", "personalization@3", "gini@3", "novelty@3"]
    out = run(
        constructor,
        stacked,
        metrics=metrics,
        by="model",
        aggregate=True,
        catalog=catalog,
        train=TRAIN,
    )
    for model in ("a", "b"):
        alone = fm.evaluate(
            stacked.filter(pl.col("model") == model).drop("model"),
            metrics=metrics,
            aggregate=True,
            catalog=catalog,
            train=TRAIN,
        )
        got = out.filter(pl.col("model") == model).drop("model")
        assert got.rows() == alone.rows()
    b = out.filter(pl.col("model") == "b").row(0, named=True)
    # Model b: users 1 ([4, 5, 6]) and 3 ([2]) share nothing; items {2, 4, 5, 6} of 8.
    assert b["personalization@3"] == 1.0
    assert b["coverage@3"] == 4 / 8


# --- diversity ------------------------------------------------------------------------------


def test_diversity_cosine(constructor: Constructor) -> None:
    out = run(constructor, RECS, metrics="diversity", k=[2, 3], item_features=VECTORS)
    # user 1: items 4 (0,0,1), 5 (1,0,1), 6 (0,1,1): cos 45 = cos 46 = 1/√2, cos 56 = 1/2
    # user 2: items 3 (0,1,0), 4, 5: cos 34 = cos 35 = 0, cos 45 = 1/√2
    # user 3: one item, no pair: no value, so no row (and left out of the mean).
    s = 1 / math.sqrt(2)
    assert column(out, "user") == [1, 2]
    assert column(out, "diversity@2") == pytest.approx([1 - s, 1 - 0], rel=1e-15)
    assert column(out, "diversity@3") == pytest.approx(
        [1 - (s + s + 1 / 2) / 3, 1 - (0 + 0 + s) / 3], rel=1e-15
    )
    mean = run(constructor, RECS, metrics="diversity@3", item_features=VECTORS, aggregate=True)
    assert mean.row(0) == pytest.approx((2, ((1 - (2 * s + 0.5) / 3) + (1 - s / 3)) / 2), rel=1e-15)


def test_diversity_jaccard(constructor: Constructor) -> None:
    out = run(constructor, RECS, metrics="diversity@3", item_features=GENRES)
    # user 1: 4 {c}, 5 {a,c}, 6 {b,c,d}: J45 = 1/2, J46 = 1/3, J56 = 1/4
    # user 2: 3 {b}, 4 {c}, 5 {a,c}: J34 = 0, J35 = 0, J45 = 1/2
    assert column(out, "diversity@3") == pytest.approx(
        [1 - (1 / 2 + 1 / 3 + 1 / 4) / 3, 1 - (0 + 0 + 1 / 2) / 3], rel=1e-15
    )


def test_diversity_similarity_can_be_forced() -> None:
    # Integer category ids are categories by default; similarity="cosine" reads them as a vector.
    ids = pl.DataFrame({"item": [1, 2], "features": [[1, 2], [2, 4]]})
    recs = pl.DataFrame({"user": [1, 1], "item": [1, 2], "rank": [1, 2]})
    jac = fm.evaluate(recs, metrics="diversity@2", item_features=ids)
    assert jac["diversity@2"].item() == 1 - 1 / 3  # {1, 2} vs {2, 4}
    cos = fm.evaluate(recs, metrics="diversity@2", item_features=ids, similarity="cosine")
    assert cos["diversity@2"].item() == pytest.approx(0.0, abs=1e-15)  # parallel vectors


# --- serendipity ----------------------------------------------------------------------------


def test_serendipity_baseline_and_history(constructor: Constructor) -> None:
    baseline = pl.DataFrame({"user": [1, 1, 2, 3], "item": [6, 4, 5, 1], "rank": [1, 2, 3, 1]})
    out = run(constructor, RECS, TRUTH, metrics="serendipity", k=[1, 3], baseline=baseline)
    # k=1: user 1: 4 relevant, baseline top 1 = {6}: unexpected -> 1/1; user 2: 3 not relevant
    # -> 0; user 3: 2 relevant, baseline top 1 = {1} -> 1.
    assert column(out, "serendipity@1") == [1.0, 0.0, 1.0]
    # k=3: user 1: 4 and 6 relevant, both in the baseline's top 3 -> 0/3; user 2: 5 relevant,
    # in the baseline at rank 3 -> 0/3; user 3: 2 relevant, unexpected -> 1/3 (divides by k).
    assert column(out, "serendipity@3") == [0.0, 0.0, 1 / 3]
    history = pl.DataFrame({"user": [1, 3], "item": [6, 2]})
    out = run(
        constructor, RECS, TRUTH, metrics="serendipity@3", train=history, unexpected="history"
    )
    # user 1: 4 (new) relevant, 6 relevant but seen -> 1/3; user 2: 5 -> 1/3; user 3: 2 seen.
    assert column(out, "serendipity@3") == [1 / 3, 1 / 3, 0.0]


# --- rating errors ----------------------------------------------------------------------------

RATINGS = pl.DataFrame({"user": [1, 1, 2, 3], "item": [1, 2, 1, 4], "relevance": [5.0, 3, 4, 1]})
PREDICTIONS = pl.DataFrame(
    {"user": [1, 1, 2, 3], "item": [1, 2, 1, 5], "prediction": [4.0, 3.5, 2, 3]}
)


def test_rating_errors_per_user_and_pooled(constructor: Constructor) -> None:
    # Pairs with both sides: (1,1) error 1, (1,2) error -0.5, (2,1) error 2. (3,4) has no
    # prediction and (3,5) no rating: left out (diagnose counts them).
    per_user = run(constructor, PREDICTIONS, RATINGS, metrics=["mse", "rmse", "mae"])
    assert column(per_user, "user") == [1, 2]
    assert column(per_user, "mse") == [(1 + 0.25) / 2, 4.0]
    assert column(per_user, "rmse") == [math.sqrt((1 + 0.25) / 2), 2.0]
    assert column(per_user, "mae") == [(1 + 0.5) / 2, 2.0]
    pooled = run(constructor, PREDICTIONS, RATINGS, metrics=["mse", "rmse", "mae"], aggregate=True)
    assert pooled.columns == ["n_users", "n_pairs", "mse", "rmse", "mae"]
    # Pooled over the 3 pairs, not the mean of the users' values.
    assert pooled.row(0) == (2, 3, (1 + 0.25 + 4) / 3, math.sqrt((1 + 0.25 + 4) / 3), 3.5 / 3)


def test_rating_errors_from_one_table(constructor: Constructor) -> None:
    long = PREDICTIONS.join(RATINGS, on=["user", "item"], how="full", coalesce=True)
    out = run(constructor, long, metrics="rmse", aggregate=True)
    assert out.row(0) == (2, 3, math.sqrt((1 + 0.25 + 4) / 3))


def test_one_sided_pairs_are_diagnosed(constructor: Constructor) -> None:
    d = fm.diagnose(constructor(PREDICTIONS), constructor(RATINGS), metrics=["rmse"])
    assert (d.n_users, d.pairs_without_rating, d.pairs_without_prediction) == (2, 1, 1)
    assert "ratings without a prediction (left out):" in str(d)
    assert str(d).splitlines()[-1].endswith(" 1")


def test_rating_and_ranking_in_one_call(constructor: Constructor) -> None:
    """Ranking reads the top k; rating errors read every pair, whatever its rank."""
    recs = PREDICTIONS.with_columns(rank=pl.Series([1, 2, 1, 1]))
    out = run(constructor, recs, RATINGS, metrics=["precision@1", "rmse"], aggregate=True)
    # precision@1: users 1 (item 1 relevant) and 2 (item 1) hit, user 3 (item 5) misses.
    assert out.row(0) == (3, 3, (1 + 1 + 0) / 3, math.sqrt((1 + 0.25 + 4) / 3))


# --- one call, who is averaged ------------------------------------------------------------------


def test_mixed_call_each_mean_over_its_own_users(constructor: Constructor) -> None:
    # User 4 has a recommendation but nothing relevant: novelty is defined for them,
    # precision is not (left out under empty="skip").
    recs = pl.concat([RECS, pl.DataFrame({"user": [4], "item": [1], "rank": [1]})])
    per_user = run(constructor, recs, TRUTH, metrics=["precision@1", "novelty@1"], train=TRAIN)
    assert column(per_user, "user") == [1, 2, 3, 4]
    assert column(per_user, "precision@1") == [1.0, 0.0, 1.0, None]
    assert column(per_user, "novelty@1")[3] == 0.0  # item 1: all 3 train users had it
    mean = run(
        constructor, recs, TRUTH, metrics=["precision@1", "novelty@1"], train=TRAIN, aggregate=True
    )
    assert mean.row(0) == pytest.approx(
        (4, 2 / 3, (LOG2_3 + LOG2_3 + math.log2(3 / 2) + 0.0) / 4), rel=1e-15
    )


def test_unseen_items_are_diagnosed(constructor: Constructor) -> None:
    d = fm.diagnose(constructor(RECS), metrics="novelty", k=[1, 3], train=constructor(TRAIN))
    assert d.items_not_in_train == 2  # items 5 and 6, within k = 3
    assert "recommended items no train user had: " in str(d)
    assert str(d).splitlines()[-1].endswith(" 2")
    assert (
        fm.diagnose(
            constructor(RECS), metrics="novelty@1", train=constructor(TRAIN)
        ).items_not_in_train
        == 0
    )


def test_recommendations_alone_need_no_relevance(constructor: Constructor) -> None:
    out = run(constructor, RECS, metrics=["arp@1"], train=TRAIN, aggregate=True)
    assert out.row(0) == (3, (1 + 1 + 2) / 3)


def test_lazy_stays_lazy_until_collected() -> None:
    out = fm.evaluate(
        RECS.lazy(), metrics=["coverage@3", "novelty@3"], aggregate=True, train=TRAIN.lazy()
    )
    assert isinstance(out, pl.LazyFrame)
    assert out.collect()["coverage@3"].item() == 5 / 6


def test_empty_input_gives_typed_empty_result(constructor: Constructor) -> None:
    empty = RECS.clear()
    per_user = run(
        constructor, empty, metrics=["novelty@3", "diversity@3"], train=TRAIN, item_features=VECTORS
    )
    assert per_user.height == 0
    assert per_user.columns == ["user", "novelty@3", "diversity@3"]
    corpus = run(constructor, empty, metrics=["coverage@3"], aggregate=True)
    assert corpus.height == 0
    assert corpus.columns == ["n_users", "coverage@3"]


def test_shortcuts() -> None:
    # Corpus shortcuts aggregate by default; items seen in recs and train: 1..6.
    recs: Any = RECS  # the namespace is registered at run time
    predictions: Any = PREDICTIONS
    assert recs.recmetrics.coverage(k=3, train=TRAIN)["coverage@3"].item() == 5 / 6
    assert predictions.recmetrics.rmse(RATINGS, aggregate=True)["rmse"].item() == pytest.approx(
        math.sqrt(5.25 / 3), rel=1e-15
    )


# --- bad input ------------------------------------------------------------------------------------

BAD: list[tuple[str, dict[str, Any], type[FrameMetricsError], str]] = [
    (
        "novelty-without-train",
        {"metrics": "novelty@3"},
        InvalidOptionError,
        "novelty: expected train= (reference interactions with the user and item columns, "
        "usually the train split), got None",
    ),
    (
        "serendipity-without-baseline",
        {"metrics": "serendipity@3"},
        InvalidOptionError,
        "serendipity: expected baseline= (a baseline model's recommendations with the user, item "
        "and rank/score columns), got None; or pass unexpected='history' to judge against train= "
        "instead",
    ),
    (
        "corpus-per-user",
        {"metrics": ["precision@3", "coverage@3"]},
        InvalidOptionError,
        "aggregate: expected True for corpus metrics (one value per by group, not per user), got "
        "False with coverage@3",
    ),
    (
        "rating-with-k",
        {"metrics": "rmse@3"},
        InvalidOptionError,
        "metrics: expected 'rmse' without a cutoff (it has none), got 'rmse@3'",
    ),
    (
        "train-missing-column",
        {"metrics": "novelty@3", "train": TRAIN.rename({"item": "movie"})},
        MissingColumnsError,
        "train: expected column 'item', not found; available columns: 'user', 'movie'",
    ),
    (
        "item-not-in-catalog",
        {
            "metrics": "coverage@3",
            "aggregate": True,
            "catalog": pl.DataFrame({"item": [1, 2, 3, 4, 5]}),
        },
        InvalidValueError,
        "catalog: expected every recommended item (within the largest k) to be in the catalog, "
        "found 1 missing, e.g. item=6; pass a catalog that holds every recommended item",
    ),
    (
        "item-without-features",
        {"metrics": "diversity@3", "item_features": VECTORS.filter(pl.col("item") != 5)},
        InvalidValueError,
        "item_features: expected every recommended item (within the largest k) to have a features "
        "row, found 1 missing, e.g. item=5; add their features or leave the items out",
    ),
    (
        "features-not-a-list",
        {
            "metrics": "diversity@3",
            "item_features": pl.DataFrame({"item": [1], "features": ["a|b"]}),
        },
        InvalidValueError,
        "item_features: expected column 'features' to hold a list (categories) or a vector "
        "(numbers) per item, found dtype String; if each row is one (item, category), make one "
        "list per item: item_features.group_by('item').agg('features')",
    ),
    (
        "ragged-vectors",
        {
            "metrics": "diversity@3",
            "item_features": VECTORS.with_columns(
                pl.when(pl.col("item") == 3)
                .then(pl.lit([1.0, 2.0]))
                .otherwise(pl.col("features"))
                .alias("features")
            ),
        },
        InvalidValueError,
        "item_features: expected vectors of one length in column 'features', found 1 of another "
        "length than the first row's, e.g. item=3, features=[1.0, 2.0]",
    ),
    (
        "zero-vector",
        {
            "metrics": "diversity@3",
            "item_features": VECTORS.with_columns(
                pl.when(pl.col("item") == 4)
                .then(pl.lit([0.0, 0.0, 0.0]))
                .otherwise(pl.col("features"))
                .alias("features")
            ),
        },
        InvalidValueError,
        "item_features: expected non-zero vectors of numbers in column 'features' (cosine is "
        "undefined otherwise), found 1, e.g. item=4, features=[0.0, 0.0, 0.0]",
    ),
    (
        "duplicate-feature-rows",
        {"metrics": "diversity@3", "item_features": pl.concat([GENRES, GENRES.head(1)])},
        FrameMetricsError,
        "item_features: expected one row per item, found 2 rows that repeat one, e.g. item=1, "
        "features=['a']",
    ),
    (
        "bad-head-share",
        {"metrics": "aplt@3", "train": TRAIN, "head_share": 1.5},
        InvalidOptionError,
        "head_share: expected a number in (0, 1), got 1.5",
    ),
    (
        "bad-similarity",
        {"metrics": "diversity@3", "item_features": GENRES, "similarity": "dice"},
        InvalidOptionError,
        "similarity: expected one of 'auto', 'jaccard', 'cosine', got 'dice'",
    ),
    (
        "cosine-over-strings",
        {"metrics": "diversity@3", "item_features": GENRES, "similarity": "cosine"},
        InvalidOptionError,
        "similarity: expected a numeric vector column for 'cosine', found 'features' of dtype "
        "List(String)",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"), [pytest.param(*case[1:], id=case[0]) for case in BAD]
)
def test_bad_input_message(
    constructor: Constructor, kwargs: dict[str, Any], error: type[FrameMetricsError], message: str
) -> None:
    extras = {k: constructor(v) if isinstance(v, pl.DataFrame) else v for k, v in kwargs.items()}
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        to_polars(fm.evaluate(constructor(RECS), **extras))  # a LazyFrame fails at evaluate


def test_rating_prediction_column_missing(constructor: Constructor) -> None:
    with pytest.raises(
        MissingColumnsError,
        match=r"^recs: expected column 'prediction', not found; available columns: 'user', 'item', 'rank'$",
    ):
        fm.evaluate(constructor(RECS), constructor(RATINGS), metrics="rmse")


def test_every_metric_beyond_ranking_documents_its_peers() -> None:
    """Each beyond-accuracy and rating metric names how peers differ, in its docstring."""
    frame: Any = pl.DataFrame()
    for name, metric in fm.REGISTRY.items():
        if metric.needs == frozenset({"truth"}) and metric.family == "ranking":
            continue  # ranking metrics: see tests/test_peers.py
        assert metric.notes, name
        doc = getattr(frame.recmetrics, name).__doc__
        assert metric.formula in doc, name
        assert f"Peers: {metric.notes}" in doc, name


def test_extra_inputs_per_group(constructor: Constructor) -> None:
    """A train, catalog or baseline carrying the ``by`` column applies per group (a fold)."""
    train_b = pl.DataFrame({"user": [1, 2, 3], "item": [4, 4, 5]})
    stacked = pl.concat([RECS.with_columns(fold=pl.lit(1)), RECS.with_columns(fold=pl.lit(2))])
    trains = pl.concat([TRAIN.with_columns(fold=pl.lit(1)), train_b.with_columns(fold=pl.lit(2))])
    catalogs = pl.DataFrame({"item": [*range(1, 7), *range(1, 13)], "fold": [1] * 6 + [2] * 12})
    metrics = ["novelty@3", "arp@3", "aplt@3", "coverage@3", "gini@3"]
    out = run(
        constructor,
        stacked,
        metrics=metrics,
        by="fold",
        aggregate=True,
        train=trains,
        catalog=catalogs,
    )
    for fold, train in ((1, TRAIN), (2, train_b)):
        alone = fm.evaluate(
            RECS,
            metrics=metrics,
            aggregate=True,
            train=train,
            catalog=catalogs.filter(pl.col("fold") == fold).drop("fold"),
        )
        assert out.filter(pl.col("fold") == fold).drop("fold").rows() == alone.rows()
    # Fold 2: train users 1, 2, 3; item 4 had by 2 of them, item 5 by 1: user 2's list
    # [3, 4, 5] has novelty (log2(3) + log2(3/2) + log2(3)) / 3 (item 3 unseen: as one user).
    two = fm.evaluate(RECS, metrics="novelty@3", train=train_b)
    assert two["novelty@3"][1] == pytest.approx((LOG2_3 + math.log2(3 / 2) + LOG2_3) / 3, rel=1e-15)


@pytest.mark.parametrize("n_categories", [64, 65, 200])
def test_jaccard_with_many_categories(constructor: Constructor, n_categories: int) -> None:
    """Up to 64 categories the sets become bit masks; beyond, lists: the same values."""
    names = [f"c{i}" for i in range(n_categories)]
    features = pl.DataFrame(
        {
            "item": [1, 2, 3, 4],
            # items 1 and 2 share c5..c9 of c0..c14; item 3 has no category; item 4 holds
            # every other category, so the vocabulary has n_categories entries.
            "features": [names[0:10], names[5:15], [], names[15:]],
        }
    )
    recs = pl.DataFrame({"user": [1, 1, 1], "item": [1, 2, 3], "rank": [1, 2, 3]})
    out = run(constructor, recs, metrics="diversity", k=[2, 3], item_features=features)
    # J(1, 2) = 5 / 15; an item without categories shares nothing (J = 0) with any item.
    assert column(out, "diversity@2") == [1 - 5 / 15]
    assert column(out, "diversity@3") == pytest.approx([1 - (5 / 15 + 0 + 0) / 3], rel=1e-15)
