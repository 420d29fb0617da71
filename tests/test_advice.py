"""Every message that tells the user to do something, done (issue "trust, round four").

Each case triggers a message that proposes an argument, checks the message, then does
what it says and checks the call then works, with a value written out by hand. On every
frame kind.
"""

from __future__ import annotations

import math
import warnings

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import Pass
from tests.conftest import Constructor, to_polars
from tests.conftest import evaluate_as_polars as run

LOG3 = math.log2(3)

TRUTH = pl.DataFrame({"user": [1, 1], "item": ["b", "z"], "relevance": [1, 1]})


def test_only_a_score_column_proposes_score(constructor: Constructor) -> None:
    scored = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "pred": [0.9, 0.1]})
    with pytest.raises(fm.MissingColumnsError) as refused:
        fm.evaluate(constructor(scored), constructor(TRUTH), metrics=["ndcg@2"])
    assert str(refused.value) == (
        "recs: expected column 'rank', not found; available columns: 'user', 'item', 'pred'; "
        "to rank recs by a score column (higher = better), pass score='pred'"
    )
    proposed = refused.value.parts[-1]
    assert proposed == Pass("score", "pred")
    # Doing it: a (0.9) then b (0.1); b, relevant, at rank 2 of R = {b, z}.
    got = run(constructor, scored, TRUTH, metrics=["ndcg@2"], score="pred")
    assert got.rows() == [(1, (1 / LOG3) / (1 + 1 / LOG3))]


def test_a_long_category_frame_proposes_features(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    train = pl.DataFrame({"user": [1, 1], "item": ["c", "d"]})
    # a and c are drama, b and d comedy: history 1/2 each, the list 1/2 each.
    genres = pl.DataFrame({"item": ["a", "b", "c", "d"], "genre": ["d", "c", "d", "c"]})
    call = {"metrics": ["miscalibration@2"], "train": constructor(train)}
    with pytest.raises(fm.MissingColumnsError) as refused:
        fm.evaluate(
            constructor(recs), constructor(TRUTH), item_features=constructor(genres), **call
        )
    assert str(refused.value) == (
        "item_features: expected column 'features', not found; available columns: 'item', "
        "'genre'; if 'genre' holds them, pass features='genre'"
    )
    assert refused.value.parts[-1] == Pass("features", "genre")
    got = to_polars(
        fm.evaluate(
            constructor(recs),
            constructor(TRUTH),
            item_features=constructor(genres),
            features="genre",
            **call,
        )
    )
    # p = q = (1/2, 1/2): KL(p || q~) = 0 with q~ = 0.99 q + 0.01 p = q.
    assert got.rows() == [(1, 0.0)]


def test_popularity_propensities_ask_for_train_first(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1], "item": ["b", "a"], "rank": [1, 2]})
    with pytest.raises(fm.MissingInputError) as refused:
        fm.evaluate(constructor(recs), constructor(TRUTH), metrics=["recall@1"],
                    propensity="popularity")  # fmt: skip
    assert str(refused.value) == (
        "propensity='popularity': expected train= (reference interactions with the user and "
        "item columns, usually the train split), got None; it counts the distinct train users "
        "of each item (propensity_gamma= is needed too: it has no default)"
    )
    # Doing it: b had by 2 train users, z by 1 (the most: 2). gamma = 1: P = n / max n,
    # so w_b = 1, w_z = 2; snips recall@1 = w_b / (w_b + w_z) = 1/3 (b is at rank 1).
    train = pl.DataFrame({"user": [7, 8, 9], "item": ["b", "b", "z"]})
    got = run(
        constructor, recs, TRUTH, metrics=["recall@1"], propensity="popularity",
        propensity_gamma=1.0, train=train,
    )  # fmt: skip
    assert got.rows() == [(1, 1 / 3)]


def test_compare_of_means_advice_works(constructor: Constructor) -> None:
    recs = pl.DataFrame(
        {"model": ["a", "a", "b", "b"], "user": [1, 1, 1, 1], "item": ["b", "x", "x", "b"],
         "rank": [1, 2, 1, 2]}
    )  # fmt: skip
    means = fm.evaluate(recs, TRUTH, metrics=["mrr@2"], by="model", aggregate=True)
    with pytest.raises(fm.InvalidValueError, match="evaluate without aggregate=True"):
        fm.compare(constructor(means))
    # Doing it: per-user values (the default), then compare with a baseline named.
    per_user = fm.evaluate(constructor(recs), constructor(TRUTH), metrics=["mrr@2"], by="model")
    with warnings.catch_warnings():
        warnings.simplefilter("error", fm.BaselineChoiceWarning)
        got = to_polars(fm.compare(per_user, baseline_model="a", n_resamples=10))
    assert got.select("model", "mean").rows() == [("a", 1.0), ("b", 0.5)]
