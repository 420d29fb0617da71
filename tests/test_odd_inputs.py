"""Odd but valid inputs give the right number, on every frame kind (issue: trust).

Each case is small enough to work out by hand; the expected values are written as the
arithmetic. The bad-input counterparts (and their exact messages) are in
``test_errors.py``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import InvalidValueError
from tests.conftest import Constructor, to_polars


def _values(result: Any) -> dict[str, list[Any]]:
    return to_polars(result).to_dict(as_series=False)


def test_int64_scores_that_float64_would_tie(constructor: Constructor) -> None:
    # 2**62 and 2**62 + 1 are one Float64; ranked on their own dtype, item 11 is first.
    recs = pl.DataFrame({"user": [1, 1], "item": [10, 11], "score": [2**62, 2**62 + 1]})
    truth = pl.DataFrame({"user": [1], "item": [11], "relevance": [1.0]})
    out = fm.evaluate(
        constructor(recs), constructor(truth), metrics="precision", k=1, score="score"
    )
    assert _values(out)["precision@1"] == [1 / 1]


def test_decimal_scores_that_differ_at_1e_25() -> None:
    # Decimal is kept by polars inputs (pandas turns it into objects): rank on it as given.
    scores = [Decimal("0.1000000000000000000000000"), Decimal("0.1000000000000000000000001")]
    recs = pl.DataFrame(
        {"user": [1, 1], "item": [10, 11], "score": scores},
        schema={"user": pl.Int64, "item": pl.Int64, "score": pl.Decimal(38, 25)},
    )
    truth = pl.DataFrame({"user": [1], "item": [11], "relevance": [1.0]})
    for frame in (recs, recs.lazy()):
        out = fm.evaluate(frame, truth, metrics="precision", k=1, score="score")
        assert _values(out)["precision@1"] == [1.0]


def test_ids_float64_cannot_merge(constructor: Constructor) -> None:
    # Truth's float user 2**53 matches recs' 2**53 only, never 2**53 + 1.
    big = 2**53
    recs = pl.DataFrame({"user": [big, big + 1], "item": [10, 10], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [float(big)], "item": [10], "relevance": [1.0]})
    out = _values(fm.evaluate(constructor(recs), constructor(truth), metrics="recall", k=1))
    assert out["user"] == [big]  # the user with relevant items; 2**53 + 1 has none
    assert out["recall@1"] == [1 / 1]


def test_unsigned_ids_beyond_int64(constructor: Constructor) -> None:
    # UInt64 users in recs (one beyond Int64) against Int64 users in truth: no cast error,
    # and the big id comes back as itself.
    big = 2**63 + 1
    recs = pl.DataFrame(
        {"user": [big, 5], "item": [10, 10], "rank": [1, 1]},
        schema={"user": pl.UInt64, "item": pl.Int64, "rank": pl.Int64},
    )
    truth = pl.DataFrame({"user": [5], "item": [11], "relevance": [1.0]})  # Int64
    out = _values(
        fm.evaluate(constructor(recs), constructor(truth), metrics="hit_rate", k=1, empty="zero")
    )
    assert sorted(zip(out["user"], out["hit_rate@1"], strict=True)) == [(5, 0.0), (big, 0.0)]
    truth_big = pl.DataFrame(
        {"user": [big], "item": [10], "relevance": [1.0]}, schema_overrides={"user": pl.UInt64}
    )
    out = _values(fm.evaluate(constructor(recs), constructor(truth_big), metrics="hit_rate", k=1))
    assert out["user"] == [big]
    assert out["hit_rate@1"] == [1.0]


@pytest.mark.parametrize(
    "rank",
    [
        pl.Series("rank", [1, 2, 2**63 + 5], dtype=pl.UInt64),
        pl.Series("rank", [1.0, 2.0, 1e20]),
    ],
    ids=["uint64-2**63+5", "float-1e20"],
)
def test_huge_ranks_beyond_every_cutoff(constructor: Constructor, rank: pl.Series) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": [10, 11, 12]}).with_columns(rank)
    truth = pl.DataFrame({"user": [1, 1], "item": [11, 12], "relevance": [1.0, 1.0]})
    out = _values(fm.evaluate(constructor(recs), constructor(truth), metrics="recall", k=2))
    assert out["recall@2"] == [1 / 2]  # item 11 at rank 2 found; 12 is far below


def test_empty_frames_with_null_dtype(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [], "item": [], "rank": []})
    truth = pl.DataFrame({"user": [], "item": [], "relevance": []})
    assert recs.schema["user"] == pl.Null
    out = to_polars(fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg", k=5))
    assert out.height == 0
    assert out.columns == ["user", "ndcg@5"]
    agg = to_polars(
        fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg", k=5, aggregate=True)
    )
    assert agg.columns == ["n_users", "ndcg@5"]


def test_numpy_numbers_are_numbers(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": [10, 11, 12], "rank": [1, 2, 3]})
    truth = pl.DataFrame({"user": [1, 1], "item": [11, 12], "relevance": [1.0, 3.0]})
    r, t = constructor(recs), constructor(truth)
    out = _values(fm.evaluate(r, t, metrics="precision", k=np.array([1, 3])))
    assert out["precision@1"] == [0 / 1]
    assert out["precision@3"] == [2 / 3]
    out = _values(fm.evaluate(r, t, metrics="precision", k=np.int64(3), threshold=np.int64(2)))
    assert out["precision@3"] == [1 / 3]  # only item 12 reaches relevance 2


def test_comma_separated_metrics_and_default_k(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1], "item": [10, 11], "rank": [1, 2]})
    truth = pl.DataFrame({"user": [1], "item": [11], "relevance": [1.0]})
    out = _values(fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg,recall"))
    assert list(out) == ["user", "ndcg@10", "recall@10"]
    assert out["ndcg@10"] == [pytest.approx((1 / math.log2(3)) / 1.0, rel=1e-15)]
    assert out["recall@10"] == [1.0]


def test_datetime_by_columns_in_two_units(constructor: Constructor) -> None:
    day = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    recs = pl.DataFrame({"day": [day, day], "user": [1, 1], "item": [10, 11], "rank": [1, 2]})
    recs = recs.with_columns(pl.col("day").dt.cast_time_unit("us"))
    truth = pl.DataFrame({"day": [day], "user": [1], "item": [11], "relevance": [1.0]})
    truth = truth.with_columns(pl.col("day").dt.cast_time_unit("ns"))
    out = _values(fm.evaluate(constructor(recs), constructor(truth), metrics="mrr", k=2, by="day"))
    assert out["mrr@2"] == [1 / 2]


def test_train_items_outside_the_recs_item_dtype(constructor: Constructor) -> None:
    recs = pl.DataFrame(
        {"user": [1, 1], "item": [10, 11], "rank": [1, 2]},
        schema={"user": pl.Int64, "item": pl.Int32, "rank": pl.Int64},
    )
    # Train items 10 (by users 1 and 2) and 2**40 (by user 2): 2**40 is no Int32.
    train = pl.DataFrame({"user": [1, 2, 2], "item": [10, 10, 2**40]})
    out = _values(fm.evaluate(constructor(recs), metrics="arp", k=2, train=constructor(train)))
    assert out["arp@2"] == [(2 + 0) / 2]  # item 11 was never seen in train


def test_novelty_with_empty_train_is_refused(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1], "item": [10], "rank": [1]})
    train = pl.DataFrame({"user": [1], "item": [10]}).clear()
    with pytest.raises(
        InvalidValueError,
        match=r"^train: expected at least one row in train \(novelty, arp and aplt read item "
        r"popularity from it\), found an empty frame$",
    ):
        fm.evaluate(constructor(recs), metrics="novelty", k=1, train=constructor(train))


def test_public_namespace_is_the_api() -> None:
    assert dir(fm) == sorted(fm.__all__)
    for leftover in ("annotations", "register_all", "version", "PackageNotFoundError"):
        assert leftover not in dir(fm)
    recs, truth = fm.datasets.synthetic(n_users=5)
    assert recs.height > 0
    assert truth.height > 0


def test_infinite_scores_rank_first_and_last(constructor: Constructor) -> None:
    # ±inf are numbers that sort: an infinite score is computed exactly, not refused.
    recs = pl.DataFrame(
        {"user": [1, 1, 1], "item": [10, 11, 12], "score": [0.5, float("inf"), float("-inf")]}
    )
    truth = pl.DataFrame({"user": [1, 1], "item": [11, 12], "relevance": [1.0, 1.0]})
    out = _values(
        fm.evaluate(
            constructor(recs), constructor(truth), metrics="mrr,precision", k=2, score="score"
        )
    )
    assert out["mrr@2"] == [1 / 1]  # item 11 (inf) first
    assert out["precision@2"] == [1 / 2]  # item 12 (-inf) third, beyond k
