"""``fm.split`` on Spark and Dask: the same rows, folds and report as on one polars frame.

The polars split is checked against the sheet's words by ``tests/test_split.py``; here
the claim is that partitioning the users changes nothing: every case of that file, in
any row order and number of partitions, with datetimes, floats, an empty frame, two
users of one hash and a bin of the order statistics too full to fetch at once. Results
come back as frames of the input's kind, and bad data raises the package's error.
"""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics.distributed import split as engine_split
from tests.split_reference import MASK, mix
from tests.test_split import CASES, _events, _method

dd = pytest.importorskip("dask.dataframe", reason="the dask extra is part of the dev install")

ToEngine = Callable[[pl.DataFrame, int], Any]
ToPolars = Callable[[Any], pl.DataFrame]


def _from_dask(frame: Any) -> pl.DataFrame:
    out = pl.from_pandas(frame.compute())
    assert isinstance(out, pl.DataFrame)
    return out


def _from_spark(frame: Any) -> pl.DataFrame:
    out = pl.from_arrow(frame.toArrow())
    assert isinstance(out, pl.DataFrame)
    return out


@pytest.fixture(params=["dask", "spark"])
def engine(request: pytest.FixtureRequest) -> tuple[ToEngine, ToPolars, type]:
    """How a polars frame becomes the engine's (in n partitions), and back."""
    if request.param == "dask":

        def to_dask(frame: pl.DataFrame, partitions: int) -> Any:
            return dd.from_pandas(frame.to_pandas(), npartitions=partitions)

        return to_dask, _from_dask, dd.DataFrame
    session = request.getfixturevalue("spark")
    from pyspark.sql import DataFrame

    from frame_metrics.distributed.spark import _arrow

    def to_spark(frame: pl.DataFrame, partitions: int) -> Any:
        return session.createDataFrame(_arrow(frame)).repartition(partitions)

    return to_spark, _from_spark, DataFrame


def _like(got: pl.DataFrame, want: pl.DataFrame) -> pl.DataFrame:
    """``got`` in ``want``'s dtypes: Spark gives a datetime in its session's time zone."""
    changed = []
    for name, dtype in want.schema.items():
        column = pl.col(name)
        if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
            changed.append(column.dt.convert_time_zone(dtype.time_zone).cast(dtype))
        else:
            changed.append(column.cast(dtype))
    return got.select(changed)


def _same_rows(got: Any, want: pl.DataFrame, to_polars: ToPolars) -> None:
    rows = to_polars(got)
    assert rows.columns == want.columns
    assert_frame_equal(_like(rows, want).sort("row"), want.sort("row"))


def _same_split(got: Any, want: Any, to_polars: ToPolars, kind: type, *, text: bool = True) -> None:
    """Every side, fold, ``folds.test`` and report of ``got`` are ``want``'s.

    ``text``: the printed reports too (a heading shows ``at`` in the column's time zone,
    which Spark names its way).
    """
    if isinstance(want, fm.Folds):
        assert isinstance(got, fm.Folds)
        assert len(got) == len(want)
        assert isinstance(got.test, kind)
        _same_rows(got.test, want.test, to_polars)
        pairs = list(zip(got, want, strict=True))
    else:
        assert isinstance(got, fm.Split)
        pairs = [(got, want)]
    for mine, theirs in pairs:
        assert isinstance(mine.train, kind)
        assert isinstance(mine.test, kind)
        _same_rows(mine.train, theirs.train, to_polars)
        _same_rows(mine.test, theirs.test, to_polars)
        assert_frame_equal(_like(mine.report.frame, theirs.report.frame), theirs.report.frame)
    assert_frame_equal(_like(got.report.frame, want.report.frame), want.report.frame)
    if text:
        assert got.report.text() == want.report.text()


@pytest.mark.parametrize("case", list(CASES))
def test_every_case_is_the_polars_split(engine: Any, case: str) -> None:
    to_engine, to_polars, kind = engine
    frame = _events(150, seed=8)
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 3), method, time="t", **options)
    _same_split(got, want, to_polars, kind)


@pytest.mark.parametrize("case", ["last_n-ties-random", "random", "user_kfold", "time-share"])
def test_row_order_and_partitions_change_nothing(engine: Any, case: str) -> None:
    to_engine, to_polars, kind = engine
    frame = _events(150, seed=3)
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=4)
    for partitions in (1, 5):
        got = fm.split(to_engine(shuffled, partitions), method, time="t", **options)
        _same_split(got, want, to_polars, kind)


DATETIME_CASES: list[tuple[str, dict[str, Any]]] = [
    ("last_n", {"n": 1, "ties": "random"}),
    ("random", {"test_share": 0.3}),
    ("time", {"test_share": 0.3}),
    ("time", {"at": dt.datetime(2024, 1, 1, 6)}),
    ("time_windows", {"n_folds": 2, "window": "2h"}),
    (
        "time_windows",
        {
            "n_folds": 2,
            "window": dt.timedelta(hours=2),
            "end": dt.datetime(2024, 1, 1, 8, tzinfo=dt.timezone.utc),
        },
    ),
]


@pytest.mark.parametrize(("method", "options"), DATETIME_CASES, ids=str)
def test_datetimes(engine: Any, method: str, options: dict[str, Any]) -> None:
    to_engine, to_polars, kind = engine
    # In UTC, as Spark gives a datetime back (its session's zone, UTC here).
    hours = pl.datetime(2024, 1, 1, time_zone="UTC") + pl.duration(hours=pl.col("t"))
    frame = _events(150, seed=5).with_columns(t=hours)
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 3), method, time="t", **options)
    _same_split(got, want, to_polars, kind, text=not {"at", "end"} & set(options))


@pytest.mark.parametrize("case", ["time-share", "random", "ratio-random"])
def test_float_times_with_negatives(engine: Any, case: str) -> None:
    # Floats are ranked by their bits, flipped for negative values (-0.0 among them).
    to_engine, to_polars, kind = engine
    values = [-2.5, -0.0, 0.0, 1e-300, 3.25, -1e10, 7.0, 1e12, -1e-300, 2.0]
    times = pl.col("t").replace_strict(dict(enumerate(values)), return_dtype=pl.Float64)
    frame = _events(150, seed=6).with_columns(t=times)
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 3), method, time="t", **options)
    _same_split(got, want, to_polars, kind)


@pytest.mark.parametrize("case", ["time-share", "random"])
def test_order_statistics_in_rounds(
    engine: Any, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bin is fetched once it holds at most FETCH events: with 3 and many ties at one
    # time, the cut and the threshold take several rounds of histograms (the threshold
    # once its first pass's window around the expected hash is set aside).
    monkeypatch.setattr(engine_split, "FETCH", 3)
    monkeypatch.setattr(engine_split, "BINS", 4)
    monkeypatch.setattr(engine_split, "_from_window", lambda *_: None)
    to_engine, to_polars, kind = engine
    frame = _events(200, seed=7).with_columns(
        t=pl.when(pl.col("row") % 3 == 0).then(pl.col("t") * 10**12).otherwise(pl.col("t"))
    )
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 4), method, time="t", **options)
    _same_split(got, want, to_polars, kind)


@pytest.mark.parametrize("case", ["time-share", "random"])
def test_windows_hold_the_rank(engine: Any, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first pass's windows hold the cut and the threshold: no histogram round.
    rounds: list[int] = []
    monkeypatch.setattr(engine_split, "_kth", lambda *_: rounds.append(1))
    to_engine, to_polars, kind = engine
    frame = _events(300, seed=11)
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 5), method, time="t", **options)
    _same_split(got, want, to_polars, kind)
    assert not rounds


@given(
    st.lists(st.lists(st.integers(0, 12), min_size=0, max_size=15), min_size=1, max_size=5),
    st.randoms(use_true_random=False),
)
def test_a_window_answers_only_what_it_knows(parts: list[list[int]], rnd: Any) -> None:
    # Each partition brings its events in a range of its own choice and counts those
    # below it: the k-th smallest of all is answered when the ranges say it exactly
    # (checked against sorting them all), else None, for every k.
    rows = []
    for values in parts:
        events = pl.DataFrame({"_fm_key": values, "_fm_value": values}).cast(
            {"_fm_key": pl.Int128, "_fm_value": pl.Int64}
        )
        ordered = sorted(values)
        if ordered:
            first = rnd.randrange(len(ordered))
            last = rnd.randrange(first, len(ordered))
            rows.append(engine_split._brought(events, ordered[first], ordered[last]))
        else:
            rows.append(engine_split._brought(events, None, None))
    brought = pl.concat(rows, how="diagonal_relaxed")
    everything = sorted(v for values in parts for v in values)
    with_events = sum(1 for values in parts if values)
    for k in range(1, len(everything) + 1):
        found = engine_split._from_window(brought, k, pl.Int64(), with_events)
        if found is not None:
            assert found.to_list() == [everything[k - 1]]
    # Every partition's window the whole range of values: every rank is known.
    whole = [
        engine_split._brought(
            pl.DataFrame({"_fm_key": v, "_fm_value": v}).cast(
                {"_fm_key": pl.Int128, "_fm_value": pl.Int64}
            ),
            0,
            12,
        )
        for v in parts
        if v
    ]
    for k in range(1, len(everything) + 1):
        brought_all = pl.concat(whole, how="diagonal_relaxed")
        found = engine_split._from_window(brought_all, k, pl.Int64(), with_events)
        assert found is not None
        assert found.to_list() == [everything[k - 1]]
    # A partition with events that brought no window: nothing is known.
    if everything:
        assert engine_split._from_window(brought, 1, pl.Int64(), with_events + 1) is None


def test_users_sharing_a_hash_are_dealt_by_key(engine: Any) -> None:
    # A composite key (a, b) whose hashes collide: mix(mix(seed) ^ a) ^ b is the value
    # mixed last, so b = mix(c ^ a1) ^ mix(c ^ a2) makes (a2, b) hash as (a1, 0).
    to_engine, to_polars, kind = engine
    start = mix(0)
    twin = mix(start ^ 1) ^ mix(start ^ 2)
    signed = twin - (1 << 64) if twin >= 1 << 63 else twin
    assert (mix(start ^ 1) ^ 0) & MASK == (mix(start ^ 2) ^ twin) & MASK
    users = [(1, 0), (2, signed), *[(a, 5) for a in range(3, 12)]]
    rows = [
        {"a": a, "b": b, "item": item, "t": t, "row": i}
        for i, ((a, b), item, t) in enumerate(
            (users[u], (u * 7 + k) % 9, k) for u in range(len(users)) for k in range(4)
        )
    ]
    frame = pl.DataFrame(
        rows,
        schema={"a": pl.Int64, "b": pl.Int64, "item": pl.Int64, "t": pl.Int64, "row": pl.Int64},
    )
    options: dict[str, Any] = {"user": ["a", "b"], "time": "t", "n_folds": 3, "cold_items": "keep"}
    want = fm.split(frame, "user_kfold", **options)
    got = fm.split(to_engine(frame, 3), "user_kfold", **options)
    _same_split(got, want, to_polars, kind)


@pytest.mark.parametrize("case", ["last_n", "time-share", "random", "user_kfold", "time_windows"])
def test_empty_input(engine: Any, case: str) -> None:
    to_engine, to_polars, kind = engine
    frame = _events().clear()
    method, options = _method(case), CASES[case]
    want = fm.split(frame, method, time="t", **options)
    got = fm.split(to_engine(frame, 2), method, time="t", **options)
    _same_split(got, want, to_polars, kind)


def test_null_time_is_refused_at_the_call(engine: Any) -> None:
    to_engine, _, _ = engine
    frame = _events().with_columns(t=pl.when(pl.col("row") == 3).then(None).otherwise("t"))
    with pytest.raises(fm.InvalidValueError) as single:
        fm.split(frame, "last_n", time="t")
    with pytest.raises(fm.InvalidValueError) as spread:
        fm.split(to_engine(frame, 3), "last_n", time="t")
    assert str(spread.value) == str(single.value)
    assert "found 1 of 126 rows" in str(spread.value)


def test_too_many_folds_and_a_bad_window_are_refused(engine: Any) -> None:
    to_engine, _, _ = engine
    distributed = to_engine(_events(), 2)
    with pytest.raises(fm.InvalidOptionError, match="got 50 folds for 13 users"):
        fm.split(distributed, "user_kfold", time="t", n_folds=50)
    with pytest.raises(fm.InvalidOptionError, match="window: expected 2 windows"):
        fm.split(distributed, "time_windows", time="t", n_folds=2, window=9)
    with pytest.warns(fm.EmptySplitWarning, match="after the last time"):
        fm.split(distributed, "time", time="t", at=100)


def test_spark_keeps_the_labelled_rows_while_a_side_lives(spark: Any) -> None:
    # The labelled rows are cached once; the cache goes with the last frame given out
    # of it, and a frame derived from one is still right afterwards (recomputed).
    from frame_metrics.distributed.spark import _arrow

    frame = _events()
    spark.catalog.clearCache()
    cache = spark._jsparkSession.sharedState().cacheManager()
    train, test = fm.split(spark.createDataFrame(_arrow(frame)), "last_n", time="t")
    assert not cache.isEmpty()
    derived = test.select("row")
    want = sorted(fm.split(frame, "last_n", time="t").test["row"])
    assert sorted(_from_spark(test)["row"]) == want
    del train, test
    gc.collect()
    assert cache.isEmpty()
    assert sorted(_from_spark(derived)["row"]) == want


def test_spark_summary_rows_carry_counts_past_32_bits() -> None:
    # A partition's checks travel as rows after its labelled rows, a count as two 31-bit
    # words of the Int32 fold column: 2^40 + 5 rows come back as 2^40 + 5.
    from frame_metrics.distributed import spark as spark_engine
    from frame_metrics.splits import DROP, FOLD, Aggregate

    aggregates = (
        Aggregate("rows", "rows"),
        Aggregate("nulls:t", "nulls", ("t",)),
        Aggregate("time_min", "min", ("t",)),
        Aggregate("time_max", "max", ("t",)),
    )

    class Huge(engine_split.Tally):
        def checks(self, part: pl.DataFrame) -> pl.DataFrame:
            return super().checks(part).with_columns(rows=pl.lit(2**40 + 5, pl.Int64))

    part = pl.DataFrame({"item": [1, 2, 2], "t": [5, 3, 9]})

    def labels(rows: pl.DataFrame) -> pl.DataFrame:
        return rows.with_columns(pl.lit(0, pl.Int32).alias(FOLD), pl.lit(0, pl.Int8).alias(DROP))

    for tally, rows in [
        (engine_split.Tally(aggregates, "item", None), 3),
        (Huge(aggregates, "item", None), 2**40 + 5),
    ]:
        summary = spark_engine._summarised(part, labels, tally)
        mark = pl.col(spark_engine._MARK)
        assert summary.filter(mark == 0).height == 3
        found = spark_engine._checks_of(summary.filter(mark >= 2), tally)
        assert found.row(0, named=True) == {
            "rows": rows,
            "nulls:t": 0,
            "time_min": 3,
            "time_max": 9,
        }
        items = summary.filter(mark == 1).sort("item").select("item", FOLD)
        assert items.rows() == [(1, 0), (2, 0)]
