"""Users in buckets one after another give the one-pass numbers, in less memory.

The expectation is always the one-pass result on the same frames (checked against the
spec and the peers by the rest of the suite): per-user values equal, means to 1e-12.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics.errors import DuplicateRowsError, InvalidOptionError
from frame_metrics.progress import Progress
from tests.test_distributed import (
    CASES,
    GROUP_METRICS,
    RECS,
    TRAIN,
    TRUTH,
    TRUTH_BY_MODEL,
    UNMATCHED_IDS_EXPECTED,
    _sorted,
    _tables,
)


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


@pytest.mark.parametrize("bad", [0, -1, 2.5, "many"])
def test_bad_buckets(bad: object) -> None:
    with pytest.raises(InvalidOptionError, match="buckets: expected a positive integer"):
        fm.evaluate(RECS, TRUTH, k=2, buckets=bad)  # type: ignore[arg-type]


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
