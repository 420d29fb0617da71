"""``fm.split`` against a pure-Python reference of the sheet's section 10, on every frame kind."""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import given, settings

import frame_metrics as fm
from frame_metrics import protocol as fm_protocol
from frame_metrics import splits
from tests.conftest import Constructor, recmetrics, to_polars
from tests.split_reference import Fold, reference_split, seeded_hash

# Each method with the options of one case; the hypothesis tests vary them.
CASES: dict[str, dict[str, Any]] = {
    "last_n": {"n": 1},
    "last_n-2": {"n": 2},
    "ratio": {"test_share": 0.3},
    "ratio-random": {"test_share": 0.5, "order": "random"},
    "last_n-ties-random": {"n": 1, "ties": "random", "seed": 3},
    "time-share": {"test_share": 0.25},
    "time-at": {"at": 6},
    "random": {"test_share": 0.2, "seed": 11},
    "user_kfold": {"n_folds": 3},
    "user_kfold-share": {"n_folds": 2, "test_share": 0.5, "order": "random"},
    "time_windows": {"n_folds": 2, "window": 2},
    "keep-all": {"n": 2, "cold_users": "keep", "cold_items": "keep", "seen": "keep"},
}


_CALL_DEFAULTS = {
    "user": "user",
    "item": "item",
    "cold_users": "drop",
    "cold_items": "drop",
    "seen": "drop",
}


def _method(case: str) -> str:
    return {
        "last_n-2": "last_n",
        "ratio-random": "ratio",
        "last_n-ties-random": "last_n",
        "time-share": "time",
        "time-at": "time",
        "user_kfold-share": "user_kfold",
        "keep-all": "last_n",
    }.get(case, case)


def _events(rows: int = 120, seed: int = 5) -> pl.DataFrame:
    """Small integer data with ties at one time, repeated events and one-event users."""
    rng = random.Random(seed)
    data: dict[str, list[int]] = {"user": [], "item": [], "t": [], "row": []}
    for index in range(rows):
        data["user"].append(rng.randrange(12))
        data["item"].append(rng.randrange(15))
        data["t"].append(rng.randrange(10))
        data["row"].append(index)
    for index in range(5):  # repeats of an event: one event, other columns differ
        data["user"].append(data["user"][index])
        data["item"].append(data["item"][index])
        data["t"].append(data["t"][index])
        data["row"].append(rows + index)
    data["user"].append(99)  # a user with one event stays in train
    data["item"].append(1)
    data["t"].append(3)
    data["row"].append(rows + 5)
    return pl.DataFrame(data)


def _rows(frame: Any) -> list[int]:
    return sorted(to_polars(frame)["row"].to_list())


def _expected(frame: pl.DataFrame, method: str, options: dict[str, Any]) -> list[Fold]:
    return reference_split(frame.to_dicts(), method, **options)


def _report_matches(report: pl.DataFrame, folds: list[Fold], frame: pl.DataFrame) -> None:
    for f, fold in enumerate(folds):
        rows = report.filter(pl.col("fold") == f)
        train = rows.filter(pl.col("side") == "train").row(0, named=True)
        test = rows.filter(pl.col("side") == "test").row(0, named=True)
        for side, got, indices in (("train", train, fold.train), ("test", test, fold.test)):
            part = frame[indices]
            assert got["rows"] == len(indices), side
            assert got["users"] == part["user"].n_unique(), side
            assert got["items"] == part["item"].n_unique(), side
            assert got["time_min"] == part["t"].min(), side
            assert got["time_max"] == part["t"].max(), side
        assert test["dropped_cold_users"] == fold.dropped["cold_users"]
        assert test["dropped_cold_items"] == fold.dropped["cold_items"]
        assert test["dropped_seen"] == fold.dropped["seen"]
        assert test["users_only_in_train"] == fold.only_train
        assert test["ties_across_cut"] == fold.ties
        if math.isnan(fold.share):
            assert test["test_share"] is None or math.isnan(test["test_share"])
        else:
            assert test["test_share"] == pytest.approx(fold.share, rel=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_split_matches_the_reference_on_every_kind(constructor: Constructor, case: str) -> None:
    frame = _events()
    method, options = _method(case), CASES[case]
    expected = _expected(frame, method, options)
    result = fm.split(constructor(frame), method, time="t", **options)
    if method in ("user_kfold", "time_windows"):
        assert isinstance(result, fm.Folds)
        assert len(result) == len(expected)
        splits_ = list(result)
        test_all = to_polars(result.test)
        assert test_all.columns == [*frame.columns, "fold"]
        for f, fold in enumerate(expected):
            assert sorted(test_all.filter(pl.col("fold") == f)["row"]) == sorted(fold.test)
        report = result.report.frame
    else:
        assert isinstance(result, fm.Split)
        splits_ = [result]
        report = result.report.frame
    for got, fold in zip(splits_, expected, strict=True):
        train, test = got
        assert type(train) is type(constructor(frame)) or isinstance(train, pl.LazyFrame)
        assert _rows(train) == sorted(fold.train)
        assert _rows(test) == sorted(fold.test)
        assert to_polars(test).columns == frame.columns
    _report_matches(report, expected, frame)


def test_lazy_in_lazy_out_and_nothing_collected() -> None:
    frame = _events()
    calls = []

    def counted(batch: pl.Series) -> pl.Series:
        calls.append(len(batch))
        return batch

    lazy = frame.lazy().with_columns(pl.col("t").map_batches(counted, return_dtype=pl.Int64))
    split = fm.split(lazy, "last_n", time="t")
    folds = fm.split(lazy, "user_kfold", time="t", n_folds=2)
    assert isinstance(split.train, pl.LazyFrame)
    assert isinstance(split.test, pl.LazyFrame)
    assert isinstance(folds.test, pl.LazyFrame)
    assert isinstance(folds[1].train, pl.LazyFrame)
    assert calls == []  # nothing read until the caller collects
    expected = _expected(frame, "last_n", {"n": 1})[0]
    assert _rows(split.test) == sorted(expected.test)
    assert calls


def test_a_negative_seed_is_read_modulo_2_to_the_64() -> None:
    # The seeded hash takes any integer seed modulo 2^64: -1 is 2^64 - 1.
    frame = _events(200, seed=3)
    negative = fm.split(frame, "random", time="t", test_share=0.3, seed=-1)
    expected = _expected(frame, "random", {"test_share": 0.3, "seed": 2**64 - 1})[0]
    assert _rows(negative.test) == sorted(expected.test)


@pytest.mark.parametrize("case", ["last_n", "ratio-random", "random", "user_kfold", "time-share"])
def test_row_order_does_not_change_the_split(case: str) -> None:
    frame = _events(200, seed=9)
    method, options = _method(case), CASES[case]
    first = fm.split(frame, method, time="t", **options)
    shuffled = fm.split(
        frame.sample(fraction=1.0, shuffle=True, seed=1), method, time="t", **options
    )
    if isinstance(first, fm.Folds):
        assert _rows(first.test) == _rows(shuffled.test)
        assert to_polars(first.test).sort("row").equals(to_polars(shuffled.test).sort("row"))
    else:
        assert _rows(first.test) == _rows(shuffled.test)
        assert _rows(first.train) == _rows(shuffled.train)


def test_pinned_folds_and_hashes() -> None:
    # The seeded hash is splitmix64 over integer words: these values hold on every polars
    # version (the reference computes them in Python integers).
    assert seeded_hash(0) == 0xE220A8397B1DCDAF  # splitmix64.c's first output for seed 0
    users = pl.DataFrame({"user": list(range(1, 9)), "item": [1] * 8, "t": [1] * 8})
    more = pl.DataFrame({"user": list(range(1, 9)), "item": [2] * 8, "t": [2] * 8})
    folds = fm.split(pl.concat([users, more]), "user_kfold", n_folds=3, time="t", cold_items="keep")
    got = dict(to_polars(folds.test).select("user", "fold").iter_rows())
    dealt = sorted(range(1, 9), key=lambda u: (seeded_hash(0, u), u))
    assert got == {u: i % 3 for i, u in enumerate(dealt)}
    # and written out (from the Python reference), so that a change of the mixer shows
    assert got == {1: 0, 2: 0, 3: 2, 4: 1, 5: 2, 6: 1, 7: 0, 8: 1}


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 5)), min_size=1, max_size=40
    ),
    case=st.sampled_from(list(CASES)),
    min_train=st.integers(0, 2),
    seed=st.integers(0, 2**64 - 1),
)
def test_split_matches_the_reference_under_hypothesis(
    data: list[tuple[int, int, int]], case: str, min_train: int, seed: int
) -> None:
    frame = pl.DataFrame(
        {
            "user": [d[0] for d in data],
            "item": [d[1] for d in data],
            "t": [d[2] for d in data],
            "row": list(range(len(data))),
        }
    )
    method, options = _method(case), dict(CASES[case])
    if method in ("last_n", "ratio", "user_kfold"):
        options["min_train"] = min_train
    if "seed" in options or method in ("random", "user_kfold"):
        options["seed"] = seed
    if method == "user_kfold" and frame["user"].n_unique() < options["n_folds"]:
        with pytest.raises(fm.InvalidOptionError, match="n_folds"):
            fm.split(frame, method, time="t", **options)
        return
    if method == "time_windows":
        first_edge = frame["t"].max() - options["n_folds"] * options["window"]
        if first_edge < frame["t"].min():
            with pytest.raises(fm.InvalidOptionError, match="window"):
                fm.split(frame, method, time="t", **options)
            return
    expected = _expected(frame, method, options)
    if method == "time" and options.get("at", 0) > frame["t"].max():
        with pytest.warns(fm.EmptySplitWarning, match="after the last time"):
            result = fm.split(frame, method, time="t", **options)
    else:
        result = fm.split(frame, method, time="t", **options)
    got = list(result) if isinstance(result, fm.Folds) else [result]
    for split, fold in zip(got, expected, strict=True):
        assert _rows(split.train) == sorted(fold.train)
        assert _rows(split.test) == sorted(fold.test)
    _report_matches(result.report.frame, expected, frame)


def test_datetimes_agree_on_every_kind(constructor: Constructor) -> None:
    frame = _events().with_columns(
        (pl.datetime(2024, 1, 1) + pl.duration(hours=pl.col("t"))).alias("t")
    )
    cases: list[tuple[str, dict[str, Any]]] = [
        ("last_n", {"n": 1, "ties": "random"}),
        ("random", {"test_share": 0.3}),
        ("time_windows", {"n_folds": 2, "window": "2h"}),
        ("time_windows", {"n_folds": 2, "window": dt.timedelta(hours=2)}),
        ("time", {"at": dt.datetime(2024, 1, 1, 6)}),
    ]
    for method, options in cases:
        ours = fm.split(frame, method, time="t", **options)
        theirs = fm.split(constructor(frame), method, time="t", **options)
        if isinstance(ours, fm.Folds):
            assert _rows(theirs.test) == _rows(ours.test)
            assert _rows(theirs[0].train) == _rows(ours[0].train)
        else:
            assert _rows(theirs.test) == _rows(ours.test)
            assert _rows(theirs.train) == _rows(ours.train)
        # and the same as the integer times they were made from
        as_ints = fm.split(_events(), method, time="t", **_hours(options))
        if isinstance(ours, fm.Folds) or ("ties" not in options and method != "random"):
            # hashes of a datetime differ from its hour's: only the time rules compare
            assert _rows(as_ints.test) == _rows(ours.test)


def _hours(options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    if isinstance(out.get("window"), str):
        out["window"] = int(out["window"].rstrip("h"))
    if isinstance(out.get("window"), dt.timedelta):
        out["window"] = int(out["window"].total_seconds() // 3600)
    if isinstance(out.get("at"), dt.datetime):
        out["at"] = out["at"].hour
    return out


def test_folds_evaluate_in_one_query_by_fold() -> None:
    frame = _events(300, seed=2)
    folds = fm.split(frame, "user_kfold", n_folds=3, time="t", cold_items="keep", seen="keep")
    test = folds.test.with_columns(relevance=pl.lit(1))
    # a "model" that recommends to each user its own test items by item id, then 0, 1, 2
    recs = (
        pl.concat(
            [
                test.select("user", "fold", "item"),
                test.select("user", "fold")
                .unique()
                .join(pl.DataFrame({"item": [0, 1, 2]}), how="cross"),
            ]
        )
        .unique(["user", "fold", "item"])
        .with_columns(rank=pl.col("item").rank("ordinal").over("user", "fold"), model=pl.lit("m"))
    )
    together = fm.evaluate(recs, test, by=["model", "fold"], metrics="recall@3", aggregate=True)
    for f in range(3):
        alone = fm.evaluate(
            recs.filter(pl.col("fold") == f),
            folds[f].test.with_columns(relevance=pl.lit(1)),
            metrics="recall@3",
            aggregate=True,
        )
        row = together.filter(pl.col("fold") == f)
        assert row["recall@3"].item() == pytest.approx(alone["recall@3"].item(), rel=1e-15)


def test_train_of_a_fold_feeds_novelty_and_exclude() -> None:
    frame = _events(300, seed=4)
    folds = fm.split(frame, "user_kfold", n_folds=2, time="t")
    fold = folds[0]
    assert set(_rows(fold.train)).isdisjoint(_rows(fold.test))


def test_empty_input_gives_empty_typed_frames(constructor: Constructor) -> None:
    frame = _events().clear()
    for method, options in CASES.items():
        result = fm.split(constructor(frame), _method(method), time="t", **options)
        sides = [result.test, result[0].train] if isinstance(result, fm.Folds) else list(result)
        for side in sides:
            got = to_polars(side)
            assert got.height == 0
            assert got.select(frame.columns).schema == to_polars(constructor(frame)).schema


ERRORS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("last_n", {}, fm.InvalidOptionError, "time: expected the time column for method 'last_n'"),
    ("last_n", {"time": "t", "n": 0}, fm.InvalidOptionError, "n: expected an integer >= 1"),
    ("ratio", {"time": "t", "test_share": 1.0}, fm.InvalidOptionError, r"test_share: .*\(0, 1\)"),
    ("ratio", {"time": "t", "test_share": 0}, fm.InvalidOptionError, "test_share"),
    ("ratio", {"time": "t"}, fm.InvalidOptionError, "test_share: expected the share"),
    (
        "random",
        {"time": "t", "test_share": 0.2, "seed": 1.5},
        fm.InvalidOptionError,
        "seed: expected an integer, got 1.5",
    ),
    (
        "user_kfold",
        {"time": "t", "n_folds": 1},
        fm.InvalidOptionError,
        "n_folds: expected an integer >= 2",
    ),
    (
        "user_kfold",
        {"time": "t", "n_folds": 50},
        fm.InvalidOptionError,
        "n_folds: expected at most one fold per user, got 50 folds for 13 users",
    ),
    (
        "time_windows",
        {"time": "t", "n_folds": 2, "window": 9},
        fm.InvalidOptionError,
        "window: expected 2 windows",
    ),
    (
        "time_windows",
        {"time": "t", "n_folds": 2},
        fm.InvalidOptionError,
        "window: expected the length",
    ),
    (
        "time_windows",
        {"time": "t", "n_folds": 2, "window": "7d"},
        fm.InvalidOptionError,
        "window: expected a positive number",
    ),
    ("time", {"time": "t", "at": 3, "test_share": 0.2}, fm.InvalidOptionError, "got both"),
    (
        "last_n",
        {"time": "t", "at": 3},
        fm.InvalidOptionError,
        "at: method 'last_n' does not read it",
    ),
    ("lastn", {"time": "t"}, fm.InvalidOptionError, "did you mean 'last_n'"),
    ("last_n", {"time": "tt"}, fm.MissingColumnsError, "did you mean 't'"),
    (
        "last_n",
        {"time": "label"},
        fm.InvalidValueError,
        "time: expected column 'label' to be a datetime, date, integer or float, found String",
    ),
]


@pytest.mark.parametrize(("method", "options", "error", "message"), ERRORS)
def test_bad_input_is_named(
    constructor: Constructor,
    method: str,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    frame = _events().with_columns(label=pl.lit("x"))
    with pytest.raises(error, match=message):
        _collect_test(fm.split(constructor(frame), method, **options))


def _collect_test(result: Any) -> pl.DataFrame:
    # a LazyFrame's data checks run when it is collected
    return to_polars(result.test)


def test_null_times_are_refused_also_when_lazy() -> None:
    frame = _events().with_columns(t=pl.when(pl.col("row") == 3).then(None).otherwise("t"))
    with pytest.raises(
        fm.InvalidValueError, match="expected no null values in time column 't', found 1"
    ):
        fm.split(frame, "last_n", time="t")
    split = fm.split(frame.lazy(), "last_n", time="t")  # lazy: when collected
    with pytest.raises(fm.InvalidValueError, match="time column 't'"):
        split.test.collect()


def test_at_outside_the_data_warns() -> None:
    frame = _events()
    with pytest.warns(fm.EmptySplitWarning, match="after the last time"):
        split = fm.split(frame, "time", time="t", at=100)
    assert split.test.height == 0
    with pytest.warns(fm.EmptySplitWarning, match="train split is empty"):
        fm.split(frame, "time", time="t", at=-5)


def test_the_namespace_forwards(constructor: Constructor) -> None:
    frame = _events()
    via_namespace = recmetrics(constructor(frame)).split("ratio", time="t", test_share=0.3)
    direct = fm.split(frame, "ratio", time="t", test_share=0.3)
    assert _rows(via_namespace.test) == _rows(direct.test)
    assert _rows(via_namespace.train) == _rows(direct.train)


@pytest.mark.parametrize("case", list(CASES))
def test_partitions_by_user_with_globals_give_the_same_labels(case: str) -> None:
    # What Spark and Dask do: each partition holds some users whole and reads the values
    # over every row (cut, threshold, end, folds of users, cold items) from Globals.
    frame = _events(300, seed=8)
    method, given_options = _method(case), CASES[case]
    options = fm_protocol._options(
        method, {**fm_protocol._DEFAULTS, **_CALL_DEFAULTS, "time": "t", **given_options}
    )
    schema = frame.schema
    whole = splits.labelled(frame.lazy(), options, schema).labelled.collect()
    events = frame.unique(["user", "item", "t"])
    cut = threshold = None
    if method == "time" and options.test_share is not None:
        times = sorted(events["t"].to_list())
        cut = times[math.floor((1 - options.test_share) * len(times))]
    if method == "random":
        assert options.test_share is not None
        hashes = sorted(
            seeded_hash(options.seed, *e) for e in events.select("user", "item", "t").rows()
        )
        k = math.floor(options.test_share * len(hashes) + 0.5)
        threshold = hashes[k - 1] if k else None
    dealt = splits.dealt_users(frame.lazy().select("user"), options, schema)
    parts = [frame.filter(pl.col("user") % 3 == b).lazy() for b in range(3)]
    found = splits.Globals(cut=cut, threshold=threshold, end=frame["t"].max(), dealt=dealt)
    # Each partition labels without the cold items, which need every user's rows; its
    # tallies add up to the cold (item, fold) pairs, applied to each partition after.
    keep = replace(options, cold_items="keep")
    labelled = [splits.labelled(p, keep, schema, found).labelled for p in parts]
    tallies = pl.concat([splits.item_tallies(rows, options) for rows in labelled])
    cold = splits.cold_items(tallies, options, schema, found)
    if options.cold_items == "drop":
        labelled = [splits.with_cold_items(rows, cold, "item") for rows in labelled]
    pieces = pl.concat(labelled)
    key = ["row"]
    got = pieces.collect().select("row", splits.FOLD, splits.DROP).sort(key)
    assert got.equals(whole.select("row", splits.FOLD, splits.DROP).sort(key))


def test_the_command_line_writes_parquet(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.cli import main

    frame = _events()
    frame.write_parquet(tmp_path / "events.parquet")
    status = main(
        [
            "split",
            str(tmp_path / "events.parquet"),
            "--method",
            "user_kfold",
            "--n-folds",
            "3",
            "--time-col",
            "t",
            "--cold-items",
            "keep",
            "--out-dir",
            str(tmp_path / "out"),
        ]
    )
    assert status == 0
    folds = fm.split(frame, "user_kfold", n_folds=3, time="t", cold_items="keep")
    written = pl.read_parquet(tmp_path / "out" / "test.parquet")
    assert written.sort("row").equals(folds.test.sort("row"))
    for f in range(3):
        train = pl.read_parquet(tmp_path / "out" / f"train_{f}.parquet")
        assert train.sort("row").equals(folds[f].train.sort("row"))
    report = pl.read_csv(tmp_path / "out" / "report.csv")
    assert report["rows"].to_list() == folds.report.frame["rows"].to_list()
    assert "fold 2" in capsys.readouterr().out
    status = main(
        [
            "split",
            str(tmp_path / "events.parquet"),
            "--method",
            "last_n",
            "--out-dir",
            str(tmp_path / "x"),
        ]
    )
    assert status == 2
    assert "--time-col: expected the time column" in capsys.readouterr().err


def test_text_ids_and_a_composite_key_agree_on_every_kind(constructor: Constructor) -> None:
    base = _events(200, seed=3)
    frame = base.with_columns(
        user=pl.format("u{}", "user"),
        session=(pl.col("row") % 2),
        # zero-padded, so that text order is the integers' order (ties by item)
        item=pl.format("i{}", pl.col("item").cast(pl.String).str.zfill(3)),
    )
    cases: list[tuple[str, dict[str, Any]]] = [
        ("random", {"test_share": 0.3, "seed": 5}),
        ("ratio", {"test_share": 0.5, "order": "random"}),
        ("user_kfold", {"n_folds": 3}),
    ]
    for method, options in cases:
        ours = fm.split(frame, method, user=["user", "session"], time="t", **options)
        theirs = fm.split(constructor(frame), method, user=["user", "session"], time="t", **options)
        assert _rows(theirs.test) == _rows(ours.test)
    # the composite key is the user: last_n takes the last event of each (user, session)
    split = fm.split(frame, "last_n", user=["user", "session"], time="t", cold_items="keep")
    expected = reference_split(
        base.with_columns(user=pl.col("user") * 2 + pl.col("row") % 2).to_dicts(),
        "last_n",
        n=1,
        cold_items="keep",
    )[0]
    assert _rows(split.test) == sorted(expected.test)


def test_dates_and_float_times() -> None:
    frame = _events()
    as_dates = frame.with_columns(t=pl.date(2024, 1, 1) + pl.duration(days=pl.col("t")))
    as_floats = frame.with_columns(t=pl.col("t").cast(pl.Float64) / 4)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("last_n", {"n": 2}),
        ("time", {"test_share": 0.3}),
        ("time_windows", {"n_folds": 2, "window": 2}),
    ]
    for method, options in cases:
        expected = fm.split(frame, method, time="t", **options)
        dated = fm.split(
            as_dates,
            method,
            time="t",
            **({**options, "window": dt.timedelta(days=2)} if "window" in options else options),
        )
        floated = fm.split(
            as_floats,
            method,
            time="t",
            **({**options, "window": 0.5} if "window" in options else options),
        )
        assert _rows(dated.test) == _rows(expected.test)
        assert _rows(floated.test) == _rows(expected.test)
    with pytest.raises(fm.InvalidValueError, match="expected no NaN values in time column 't'"):
        fm.split(as_floats.with_columns(t=pl.lit(float("nan"))), "last_n", time="t")


def test_at_as_text_and_as_a_value_of_the_column() -> None:
    frame = _events().with_columns(t=pl.datetime(2024, 1, 1) + pl.duration(days=pl.col("t")))
    by_text = fm.split(frame, "time", time="t", at="2024-01-07")
    by_value = fm.split(frame, "time", time="t", at=dt.datetime(2024, 1, 7))
    assert _rows(by_text.test) == _rows(by_value.test)
    expected = reference_split(_events().to_dicts(), "time", at=6)[0]
    assert _rows(by_value.test) == sorted(expected.test)
    with pytest.raises(fm.InvalidOptionError, match=r"at: expected a datetime\.datetime"):
        fm.split(frame, "time", time="t", at="next tuesday")


def test_null_keys_are_refused() -> None:
    frame = _events().with_columns(item=pl.when(pl.col("row") < 2).then(None).otherwise("item"))
    with pytest.raises(
        fm.InvalidValueError, match=r"expected no null values in key column 'item', found 2"
    ):
        fm.split(frame, "last_n", time="t")


def test_the_printed_report_of_an_empty_frame() -> None:
    text = fm.split(_events().clear(), "last_n", time="t").report.text()
    assert "test share: - of events" in text
    assert "nan" not in text
