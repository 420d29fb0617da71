"""Bad input: one table of cases and their exact messages, on every frame kind."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    FrameMetricsError,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
)
from tests.conftest import Constructor

RECS = pl.DataFrame({"user": [1, 1, 2], "item": [10, 11, 10], "rank": [1, 2, 1]})
TRUTH = pl.DataFrame({"user": [1, 2], "item": [11, 12], "relevance": [1.0, 2.0]})

Case = tuple[
    str,
    Callable[[pl.DataFrame], pl.DataFrame],
    Callable[[pl.DataFrame], pl.DataFrame],
    dict[str, Any],
    type[FrameMetricsError],
    str,
]

same: Callable[[pl.DataFrame], pl.DataFrame] = lambda df: df  # noqa: E731

# (id, change recs, change truth, kwargs, error class, exact message)
CASES: list[Case] = [
    (
        "missing-user-column",
        same,
        same,
        {"user": "usr"},
        MissingColumnsError,
        "recs: expected column 'usr' (did you mean 'user'?), not found; "
        "available columns: 'user', 'item', 'rank'",
    ),
    (
        "missing-relevance",
        same,
        lambda t: t.rename({"relevance": "rating"}),
        {},
        MissingColumnsError,
        "truth: expected column 'relevance', not found; available columns: 'user', 'item', 'rating'",
    ),
    (
        "missing-rank-without-score",
        lambda r: r.drop("rank"),
        same,
        {},
        MissingColumnsError,
        "recs: expected column 'rank', not found; available columns: 'user', 'item'",
    ),
    (
        "missing-by",
        same,
        same,
        {"by": "modle"},
        MissingColumnsError,
        "recs: expected column 'modle', not found; available columns: 'user', 'item', 'rank'",
    ),
    (
        "null-user-in-recs",
        lambda r: r.with_columns(user=pl.Series([1, None, 2])),
        same,
        {},
        InvalidValueError,
        "recs: expected no nulls in key column 'user', found 1 null row(s), e.g. user=None, item=11, rank=2",
    ),
    (
        "null-item-in-truth",
        same,
        lambda t: t.with_columns(item=pl.Series([11, None])),
        {},
        InvalidValueError,
        "truth: expected no nulls in key column 'item', found 1 null row(s), e.g. user=2, item=None, relevance=2.0",
    ),
    (
        "negative-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, -2.0])),
        {},
        InvalidValueError,
        "truth: expected relevance >= 0 in column 'relevance', found 1 negative value(s), e.g. user=2, item=12, relevance=-2.0",
    ),
    (
        "nan-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, float("nan")])),
        {},
        InvalidValueError,
        "truth: expected numbers in column 'relevance', found 1 NaN value(s), e.g. user=2, item=12, relevance=nan",
    ),
    (
        "string-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series(["a", "b"])),
        {},
        InvalidValueError,
        "truth: expected column 'relevance' to hold numeric values, found dtype String",
    ),
    (
        "rank-zero",
        lambda r: r.with_columns(rank=pl.Series([0, 2, 1])),
        same,
        {},
        InvalidValueError,
        "recs: expected ranks >= 1 in column 'rank' (1 = top), found 1 rank(s) below 1, e.g. user=1, item=10, rank=0",
    ),
    (
        "rank-not-integer",
        lambda r: r.with_columns(rank=pl.Series([1.0, 2.5, 1.0])),
        same,
        {},
        InvalidValueError,
        "recs: expected integer ranks in column 'rank', found 1 non-integer value(s), e.g. user=1, item=11, rank=2.5",
    ),
    (
        "rank-string",
        lambda r: r.with_columns(rank=pl.Series(["1", "2", "1"])),
        same,
        {},
        InvalidValueError,
        "recs: expected column 'rank' to hold integer values, found dtype String",
    ),
    (
        "duplicate-rank",
        lambda r: r.with_columns(rank=pl.Series([1, 1, 1])),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per rank within a user, found 2 rows that repeat one, e.g. user=1, item=10, rank=1",
    ),
    (
        "duplicate-recs-pair",
        lambda r: r.with_columns(item=pl.Series([10, 10, 10])),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. user=1, item=10, rank=1 "
        "(pass on_duplicate='first' to keep the best-ranked row)",
    ),
    (
        "duplicate-truth-pair",
        same,
        lambda t: t.with_columns(user=pl.Series([2, 2]), item=pl.Series([12, 12])),
        {},
        DuplicateRowsError,
        "truth: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. user=2, item=12, relevance=1.0 "
        "(pass on_duplicate='first' to keep the highest-relevance row)",
    ),
    (
        "join-key-dtypes",
        same,
        lambda t: t.with_columns(pl.col("item").cast(pl.String)),
        {},
        InvalidValueError,
        "recs and truth: expected column 'item' to have the same kind of dtype in both frames, found Int64 in recs and String in truth",
    ),
    (
        "k-zero",
        same,
        same,
        {"k": 0},
        InvalidOptionError,
        "k: expected an int >= 1 or a list of them, got 0",
    ),
    (
        "k-float",
        same,
        same,
        {"k": 2.5},
        InvalidOptionError,
        "k: expected an int >= 1 or a list of them, got 2.5",
    ),
    (
        "k-bool-in-list",
        same,
        same,
        {"k": [5, True]},
        InvalidOptionError,
        "k: expected an int >= 1 or a list of them, got True",
    ),
    (
        "k-missing",
        same,
        same,
        {"metrics": ["ndcg"], "k": None},
        InvalidOptionError,
        "k: expected an int >= 1 or a list of them, got None",
    ),
    (
        "unknown-metric",
        same,
        same,
        {"metrics": ["ndgc"], "k": 5},
        InvalidOptionError,
        "metrics: expected a known metric name, got 'ndgc' (did you mean 'ndcg'?); known metrics: "
        "'ap', 'aplt', 'arp', 'coverage', 'dcg', 'diversity', 'f1', 'gini', 'hit_rate', 'mae', "
        "'map', 'mrr', 'mse', 'ndcg', 'novelty', 'personalization', 'precision', 'recall', "
        "'rmse', 'serendipity'",
    ),
    (
        "bad-metric-cutoff",
        same,
        same,
        {"metrics": ["ndcg@ten"]},
        InvalidOptionError,
        "metrics: expected '<name>@<int k>', got 'ndcg@ten'",
    ),
    (
        "unknown-gain",
        same,
        same,
        {"k": 5, "gain": "log"},
        InvalidOptionError,
        "gain: expected one of 'linear', 'exponential', 'binary', got 'log'",
    ),
    (
        "unknown-ap-denominator",
        same,
        same,
        {"k": 5, "ap_denominator": "R"},
        InvalidOptionError,
        "ap_denominator: expected one of 'min_k', 'relevant', 'hits', 'k', got 'R'",
    ),
    (
        "unknown-empty",
        same,
        same,
        {"k": 5, "empty": "nan"},
        InvalidOptionError,
        "empty: expected one of 'skip', 'zero', got 'nan'",
    ),
    (
        "unknown-on-duplicate",
        same,
        same,
        {"k": 5, "on_duplicate": "last"},
        InvalidOptionError,
        "on_duplicate: expected one of 'error', 'first', got 'last'",
    ),
    (
        "threshold-negative",
        same,
        same,
        {"k": 5, "threshold": -1},
        InvalidOptionError,
        "threshold: expected a finite number > 0 or None, got -1",
    ),
    (
        "user-not-a-name",
        same,
        same,
        {"k": 5, "user": 3},
        InvalidOptionError,
        "user: expected a column name or a list of column names, got 3",
    ),
]


@pytest.mark.parametrize(
    ("change_recs", "change_truth", "kwargs", "error", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_bad_input_message(
    constructor: Constructor,
    change_recs: Callable[[pl.DataFrame], pl.DataFrame],
    change_truth: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    recs, truth = constructor(change_recs(RECS)), constructor(change_truth(TRUTH))
    kwargs = {"k": 2, **kwargs}
    if _is_pandas_numpy(recs) and "NaN" in message:
        # numpy-backed pandas has no missing value but NaN: it arrives as a null.
        message = "truth: expected no nulls in relevance column 'relevance', found 1 null row(s), e.g. user=2, item=12, relevance=None"
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.evaluate(recs, truth, **kwargs)
    assert issubclass(error, ValueError)


def _is_pandas_numpy(frame: object) -> bool:
    import pandas as pd

    return isinstance(frame, pd.DataFrame) and all(
        type(d).__name__ != "ArrowDtype" for d in frame.dtypes
    )


def test_lazy_input_raises_at_call_not_at_collect() -> None:
    """Checks run when evaluate is called, so a LazyFrame result is known to be valid."""
    bad = RECS.with_columns(rank=pl.Series([0, 2, 1])).lazy()
    with pytest.raises(InvalidValueError):
        fm.evaluate(bad, TRUTH.lazy(), k=2)


def test_validate_false_skips_value_checks() -> None:
    dup = RECS.with_columns(rank=pl.Series([1, 1, 1]))
    with pytest.raises(DuplicateRowsError):
        fm.evaluate(dup, TRUTH, k=2)
    fm.evaluate(dup, TRUTH, k=2, validate=False)  # the caller vouches for the input


def test_unsupported_frame_type() -> None:
    with pytest.raises(
        InvalidOptionError,
        match=r"^expected a polars DataFrame, polars LazyFrame or pandas DataFrame, got dict$",
    ):
        fm.evaluate({"user": [1]}, TRUTH, k=2)


LONG = pl.DataFrame(
    {"user": [1, 1, 1], "item": [10, 11, 12], "rank": [1, 2, None], "relevance": [0.0, 1.0, 2.0]}
)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            lambda df: df.with_columns(rank=pl.Series([1, 1, None])),
            DuplicateRowsError,
            "long table: expected one row per rank within a user, found 2 rows that repeat one, "
            "e.g. user=1, item=10, rank=1, relevance=0.0",
        ),
        (
            lambda df: df.with_columns(item=pl.Series([10, 10, 12])),
            DuplicateRowsError,
            "long table: expected one row per (user, item) pair, found 2 rows that repeat one, "
            "e.g. user=1, item=10, rank=1, relevance=0.0 (pass on_duplicate='first' to keep the best-ranked row)",
        ),
        (
            lambda df: df.with_columns(relevance=pl.Series([0.0, -1.0, 2.0])),
            InvalidValueError,
            "long table: expected relevance >= 0 in column 'relevance', found 1 negative value(s), "
            "e.g. user=1, item=11, rank=2, relevance=-1.0",
        ),
        (
            lambda df: df.drop("relevance"),
            MissingColumnsError,
            "long table: expected column 'relevance', not found; available columns: 'user', 'item', 'rank'",
        ),
    ],
    ids=["duplicate-rank", "duplicate-pair", "negative-relevance", "missing-relevance"],
)
def test_bad_long_table(
    constructor: Constructor,
    change: Callable[[pl.DataFrame], pl.DataFrame],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    frame = constructor(change(LONG))
    if _is_pandas_numpy(frame):  # a rank column holding a null is float64 in numpy pandas
        message = re.sub(r"rank=(\d+),", r"rank=\1.0,", message)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.evaluate(frame, k=2)


def test_score_on_long_table_is_refused() -> None:
    with pytest.raises(InvalidOptionError, match=r"^score: expected None for a long table"):
        fm.evaluate(LONG, k=2, score="rank")
