"""Users in buckets one after another give the one-pass numbers, in less memory.

The expectation is always the one-pass result on the same frames (checked against the
spec and the peers by the rest of the suite): per-user values equal, means to 1e-12.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    FrameMetricsError,
    InvalidOptionError,
    InvalidValueError,
    Keyword,
)
from frame_metrics.progress import Progress
from tests.test_distributed import (
    CASES,
    GROUP_METRICS,
    NAME_CASES,
    NAMED,
    NAMED_COLUMNS,
    RECS,
    TRAIN,
    TRUTH,
    TRUTH_BY_MODEL,
    UNMATCHED_IDS_EXPECTED,
    _sorted,
    _tables,
)
from tests.test_errors import RECS as ERROR_RECS
from tests.test_errors import TRUTH as ERROR_TRUTH


def _as_text(frame: pl.DataFrame) -> pl.DataFrame:
    """String user ids: hash buckets instead of id ranges."""
    return frame.with_columns(pl.col("user").cast(pl.String))


@pytest.mark.parametrize("keys", ["int-ranges", "text-hash"])
@pytest.mark.parametrize("aggregate", [False, True], ids=["per-user", "aggregate"])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_equals_one_pass(case: dict[str, Any], aggregate: bool, keys: str) -> None:
    recs, truth, train = RECS, TRUTH, TRAIN
    if keys == "text-hash":
        recs, truth, train = _as_text(recs), _as_text(truth), _as_text(train)
    extra: dict[str, Any] = {"train": train} if "metrics" in case else {}
    expected = fm.evaluate(recs, truth, aggregate=aggregate, **case, **extra)
    result = fm.evaluate(recs.lazy(), truth, aggregate=aggregate, buckets=3, **case, **extra)
    assert isinstance(result, pl.LazyFrame)
    got = _sorted(result.collect(), aggregate)
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-12, abs_tol=0.0)


@pytest.mark.parametrize("aggregate", [False, True], ids=["per-user", "aggregate"])
def test_columns_as_written(aggregate: bool) -> None:
    result = fm.evaluate(RECS, TRUTH, metrics=NAMED, k=[2, 3], aggregate=aggregate, buckets=3)
    assert result.columns == ["n_users" if aggregate else "user", *NAMED_COLUMNS]


@pytest.mark.parametrize("by", [None, "model"])
def test_corpus_metrics(by: str | None) -> None:
    metrics = ["coverage@2", "personalization@2", "gini@3", "precision@2"]
    expected = fm.evaluate(RECS, TRUTH, metrics=metrics, by=by, aggregate=True)
    result = fm.evaluate(RECS, TRUTH, metrics=metrics, by=by, aggregate=True, buckets=4)
    assert_frame_equal(result, expected, check_dtypes=False, rel_tol=1e-12)


@pytest.mark.parametrize("metrics", GROUP_METRICS, ids=str)
def test_group_without_truth_rows(metrics: list[str]) -> None:
    kwargs: dict[str, Any] = {"metrics": metrics, "by": "model", "aggregate": True}
    expected = fm.evaluate(RECS, TRUTH_BY_MODEL, **kwargs)
    assert expected["model"].to_list() == ["x", "y", "z"]
    result = fm.evaluate(RECS, TRUTH_BY_MODEL, buckets=3, **kwargs)
    assert_frame_equal(result, expected, check_dtypes=False, rel_tol=1e-12)


def test_same_error() -> None:
    dup = pl.concat(
        [RECS, RECS.filter(pl.col("user") == 6).head(1).with_columns(rank=pl.lit(3, pl.Int64))]
    )
    with pytest.raises(DuplicateRowsError) as single:
        fm.evaluate(dup, TRUTH, k=3)
    with pytest.raises(DuplicateRowsError) as bucketed:
        fm.evaluate(dup, TRUTH, k=3, buckets=2)
    assert str(bucketed.value) == str(single.value)
    # The argument it proposes stays apart from the text (the command line says it its way).
    assert bucketed.value.parts == single.value.parts
    assert Keyword("on_duplicate", "first") in single.value.parts


@pytest.mark.parametrize("keys", ["int-ranges", "text-hash"])
@pytest.mark.parametrize(
    ("change_recs", "change_truth", "kwargs", "error", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in NAME_CASES],
)
def test_same_error_for_names_and_options(
    change_recs: Callable[[pl.DataFrame], pl.DataFrame],
    change_truth: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    error: type[FrameMetricsError],
    message: str,
    keys: str,
) -> None:
    # The one-pass class and message, whichever way the users are split (a missing user
    # column was a KeyError from the bucket filters).
    recs, truth = change_recs(ERROR_RECS), change_truth(ERROR_TRUTH)
    if keys == "text-hash":  # text ids wherever the key is (the messages show no dtype)
        user = kwargs.get("user", "user")
        recs, truth = (
            f.with_columns(pl.col(user).cast(pl.String)) if user in f.columns else f
            for f in (recs, truth)
        )
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.evaluate(recs.lazy(), truth, buckets=2, **{"k": 2, **kwargs})


@pytest.mark.parametrize("bad", [0, -1, 2.5, "many"])
def test_bad_buckets(bad: object) -> None:
    with pytest.raises(InvalidOptionError, match="buckets: expected a positive integer"):
        fm.evaluate(RECS, TRUTH, k=2, buckets=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("keys", ["int-ranges", "text-hash"])
def test_no_more_buckets_than_users(keys: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two users far apart: 200 id ranges (or hash values) of which at most two hold a
    # user. Each bucket evaluated is one pass over the inputs, so an empty one is waste.
    from frame_metrics.distributed import core

    recs = pl.DataFrame({"user": [1, 1, 10**6], "item": ["a", "b", "a"], "rank": [1, 2, 1]})
    truth = pl.DataFrame({"user": [1, 10**6], "item": ["b", "a"], "relevance": [1, 1]})
    if keys == "text-hash":
        recs, truth = _as_text(recs), _as_text(truth)
    evaluated = []
    one_bucket = core.partition_checked_result

    def counted(frames: Any, job: core.Job) -> pl.DataFrame:
        evaluated.append(frames)
        return one_bucket(frames, job)

    monkeypatch.setattr(core, "partition_checked_result", counted)
    result = fm.evaluate(recs.lazy(), truth, k=2, buckets=200).collect()
    assert 1 <= len(evaluated) <= 2  # the number of distinct users
    assert_frame_equal(result, fm.evaluate(recs, truth, k=2))


def test_a_billion_buckets_for_two_users_return() -> None:
    # A Python loop over every requested bucket never returned.
    recs = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "b"], "relevance": [1, 1]})
    result = fm.evaluate(recs, truth, metrics="precision@1", buckets=10**9)
    assert result.rows() == [(1, 1.0), (2, 0.0)]  # user 1's top item is relevant


@pytest.mark.parametrize("keys", ["int-ranges", "text-hash"])
def test_null_user_is_reported_not_dropped(keys: str) -> None:
    # A null id is in no id range: its rows were left out of every bucket, and so out of
    # the check that refuses them.
    recs = pl.DataFrame({"user": [1, None, 2], "item": ["a", "b", "a"], "rank": [1, 1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "b"], "relevance": [1, 1]})
    if keys == "text-hash":
        recs, truth = _as_text(recs), _as_text(truth)
    message = (
        "recs: expected no nulls in key column 'user', found 1 null row(s), e.g. user=None, "
        "item='b', rank=1"
    )
    with pytest.raises(InvalidValueError, match=f"^{re.escape(message)}$"):
        fm.evaluate(recs.lazy(), truth, k=1, buckets=2)


def test_auto_is_one_pass_for_small_inputs() -> None:
    from frame_metrics.distributed.buckets import BUCKET_ROWS, auto_buckets

    assert auto_buckets(RECS.lazy()) == 1
    big = pl.LazyFrame({"user": [0]}).select(pl.repeat(0, BUCKET_ROWS + 1).alias("user"))
    assert auto_buckets(big) == 2


def test_progress_bar(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)  # the stderr bar, not tqdm's
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    bar = Progress(4, "frame_metrics: buckets", enabled=True, unit="bucket")
    bar.update()
    bar.update(3)
    bar.close()
    err = capsys.readouterr().err
    assert "frame_metrics: buckets [#######" in err
    assert "4/4 buckets" in err
    quiet = Progress(4, "frame_metrics: buckets", enabled=True, delay=60.0)
    quiet.update(4)
    quiet.close()
    assert capsys.readouterr().err == ""  # quick work draws nothing


@UNMATCHED_IDS_EXPECTED
@settings(max_examples=25, deadline=None)
@given(tables=_tables(), buckets=st.integers(1, 5), aggregate=st.booleans())
def test_random_tables(
    tables: tuple[pl.DataFrame, pl.DataFrame], buckets: int, aggregate: bool
) -> None:
    recs, truth = tables
    expected = fm.evaluate(recs, truth, k=[1, 3, 5], aggregate=aggregate)
    result = fm.evaluate(
        recs.lazy(), truth.lazy(), k=[1, 3, 5], aggregate=aggregate, buckets=buckets
    )
    got = _sorted(result.collect(), aggregate)
    assert_frame_equal(got, expected, check_dtypes=False, rel_tol=1e-12, abs_tol=0.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"metrics": ["coverage@2"]},
            "aggregate: expected True for corpus metrics (one value per by group, not per "
            "user), got False with coverage@2",
        ),
        (
            {"metrics": ["ndcg@2"], "by": "item"},
            None,  # a column in two roles: the one-pass message, whatever it says
        ),
    ],
    ids=["corpus-per-user", "two-roles"],
)
def test_call_checks_speak_before_any_bucket(kwargs: dict[str, Any], message: str | None) -> None:
    # Buckets used to read the frames first and fail inside polars (ColumnNotFoundError).
    with pytest.raises(InvalidOptionError) as one_pass:
        fm.evaluate(RECS, TRUTH, **kwargs)
    with pytest.raises(InvalidOptionError) as buckets:
        fm.evaluate(RECS, TRUTH, buckets=3, **kwargs)
    assert str(buckets.value) == str(one_pass.value)
    if message is not None:
        assert str(buckets.value) == message
