"""Every group the inputs show has a row in the aggregate, evaluated users or not.

A ``by`` group with a recommendation or a truth row gets ``n_users`` 0 and null means
when none of its users is evaluated (a model whose truth rows are absent); without
``by``, so does the whole call. Empty input shows no group: no rows (spec section 4).
"""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import Constructor, evaluate_as_polars

# Model a: user 1 [x, y, z], user 2 [x, w]; model b: user 1 [z, x], user 3 [y].
RECS = pl.DataFrame(
    {
        "model": ["a"] * 5 + ["b"] * 3,
        "user": [1, 1, 1, 2, 2, 1, 1, 3],
        "item": ["x", "y", "z", "x", "w", "z", "x", "y"],
        "rank": [1, 2, 3, 1, 2, 1, 2, 1],
    }
)
# Truth for model a only: user 1 likes y and z, user 2 likes q.
TRUTH = pl.DataFrame(
    {"model": ["a"] * 3, "user": [1, 1, 2], "item": ["y", "z", "q"], "relevance": [1, 2, 1]}
)
# Judged but not relevant: the users match, and nobody has a relevant item.
JUDGED_ZERO = pl.DataFrame({"user": [1, 2, 3], "item": ["x", "x", "y"], "relevance": [0, 0, 0]})

SCHEMA = {"n_users": pl.Int64, "precision@2": pl.Float64}


def test_model_without_truth_rows(constructor: Constructor) -> None:
    got = evaluate_as_polars(
        constructor, RECS, TRUTH, metrics="precision@2", by="model", aggregate=True
    )
    assert got.schema == pl.Schema({"model": pl.String, **SCHEMA})
    # a: user 1 [x, y] holds y (1/2), user 2 [x, w] nothing (0); b: no truth, no user.
    assert got.rows() == [("a", 2, (1 / 2 + 0) / 2), ("b", 0, None)]


def test_no_evaluated_user_at_all(constructor: Constructor) -> None:
    got = evaluate_as_polars(
        constructor,
        RECS.filter(pl.col("model") == "a").drop("model"),
        JUDGED_ZERO,
        metrics="precision@2",
        aggregate=True,
    )
    assert got.schema == pl.Schema(SCHEMA)
    assert got.rows() == [(0, None)]


def test_no_evaluated_user_in_any_group(constructor: Constructor) -> None:
    # Truth without the model column applies to both models.
    got = evaluate_as_polars(
        constructor, RECS, JUDGED_ZERO, metrics="precision@2", by="model", aggregate=True
    )
    assert got.rows() == [("a", 0, None), ("b", 0, None)]
    assert got.schema == pl.Schema({"model": pl.String, **SCHEMA})


def test_no_evaluated_user_is_not_empty_input(constructor: Constructor) -> None:
    """Zero rows in: zero rows out, with or without by; one row in: a group is seen."""
    for by in (None, "model"):
        got = evaluate_as_polars(
            constructor, RECS.clear(), TRUTH.clear(), metrics="precision@2", by=by, aggregate=True
        )
        assert got.height == 0
        assert got.schema == pl.Schema({**({"model": pl.String} if by else {}), **SCHEMA})
    # Recommendations alone (truth empty): seen, and nobody evaluated.
    got = evaluate_as_polars(
        constructor, RECS, TRUTH.clear(), metrics="precision@2", by="model", aggregate=True
    )
    assert got.rows() == [("a", 0, None), ("b", 0, None)]


def test_rating_metrics_group_without_pairs(constructor: Constructor) -> None:
    recs = RECS.with_columns(prediction=pl.col("rank").cast(pl.Float64))
    got = evaluate_as_polars(
        constructor, recs, TRUTH, metrics=["rmse", "precision@2"], by="model", aggregate=True
    )
    # a: rated pairs (1, y) predicted 2 vs 1 and (1, z) predicted 3 vs 2: both errors 1.
    assert got.columns == ["model", "n_users", "n_pairs", "rmse", "precision@2"]
    assert got.rows() == [("a", 2, 2, 1.0, 1 / 4), ("b", 0, 0, None, None)]


def test_corpus_metrics_keep_their_value(constructor: Constructor) -> None:
    got = evaluate_as_polars(
        constructor,
        RECS,
        TRUTH,
        metrics=["precision@2", "coverage@2"],
        by="model",
        aggregate=True,
    )
    # The catalog: items seen in recs and truth, {q, w, x, y, z}. Top 2: a {x, y, w},
    # b {z, x, y}. Coverage needs no evaluated user: b keeps its own.
    assert got.rows() == [("a", 2, 1 / 4, 3 / 5), ("b", 0, None, 3 / 5)]


def test_corpus_metrics_alone_with_a_group_seen_only_in_truth(
    constructor: Constructor,
) -> None:
    truth = TRUTH.with_columns(model=pl.lit("c"))  # a model nothing was recommended for
    got = evaluate_as_polars(
        constructor, RECS, truth, metrics="coverage@2", by="model", aggregate=True
    )
    # n_users: users with a recommendation within 2 (a: 1, 2; b: 1, 3).
    assert got.rows() == [("a", 2, 3 / 5), ("b", 2, 3 / 5), ("c", 0, None)]
    assert got.schema == pl.Schema(
        {"model": pl.String, "n_users": pl.Int64, "coverage@2": pl.Float64}
    )


@pytest.mark.parametrize("aggregate", [False, True])
def test_per_user_rows_are_still_evaluated_users_only(
    constructor: Constructor, aggregate: bool
) -> None:
    got = evaluate_as_polars(
        constructor, RECS, TRUTH, metrics="precision@2", by="model", aggregate=aggregate
    )
    if aggregate:
        assert got["model"].to_list() == ["a", "b"]
    else:
        assert got.rows() == [("a", 1, 1 / 2), ("a", 2, 0.0)]
