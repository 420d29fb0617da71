"""``fm.split`` against the peers' own splitters, where their definitions match the sheet's.

Each peer's rule was read from its installed source (the comment above each section names
the file and function). On data where the peer's definition and the sheet's (section 10)
coincide, the tests assert the SAME rows on both sides (sets of a ``row`` column, the
row's position in the input), on several seeds of random data (a few thousand rows), and,
where the peer reports them, the same counts. Where a definition differs, a test shows the
difference on a tiny frame, asserting both outputs: that is the documentation for users.

The data (``events``): every user's row count is drawn from a list the test chooses;
items follow a 1/rank law over 1000 items, so some test rows are of items no train row has
(cold) and users repeat popular items (seen); times are distinct over the whole frame and
none falls on a whole hour (so none on a border of RecTools' day windows), or, where a
test asks for ties, whole hours shared by many rows; no (user, item, time) repeats (one
event for the sheet, one row each for the peers); the users' rows are interleaved in a
random order.

RecTools 0.19 (``rectools.model_selection``, installed with --no-deps: its package
``__init__`` imports ``cross_validate`` -> ``rectools.models`` -> ``implicit``, not
installed, so the ``rectools`` fixture imports the splitter modules under a bare package
module and restores ``sys.modules`` after). Filters ``filter_cold_users``,
``filter_cold_items``, ``filter_already_seen``: default True and applied in that order,
the sheet's three defaults and order, so the drop counts (from runs with the filters
switched on one by one) and ``collect_fold_stats`` (rows, users, items per part) are the
report's.

- ``LastNSplitter(n)`` (n_splits=1; its sliding n_splits > 1 has no sheet method) =
  ``"last_n"`` when every user has more than n rows and a user's times are distinct.
  Differs: rows at one time go by row order (the row further down is the later), the
  sheet's by item (the larger is the later); a user with n rows or fewer gives all of
  them to test (and with filter_cold_users, the default, they are then dropped: the
  user is in neither part), the sheet keeps ``min_train=1`` row in train.
- ``TimeRangeSplitter("7D", 3)``, ``("2D", 5)`` = ``"time_windows"`` (same window and
  n_folds, ``end=`` its last border) when no time is on a border. Differs: its windows
  are [start, end) and its train ``< start``, the sheet's (left, right] and ``<= left``;
  its last border is the last time ceiled to the unit (one unit further when on a
  border), the sheet's default ``end`` is the last time. Hours ("12H") are not tested:
  RecTools passes "H" to pandas, and pandas 3 rejects it ("Invalid frequency: H").
- ``RandomSplitter``: not comparable row by row (a numpy ``Generator.permutation`` of the
  row positions; the sheet's rows are those of smallest seeded splitmix64 hash). Its test
  size is ``round(s · n)``, Python's round half to even, the sheet's round half up: the
  one test shows that count.

RePlay 0.22 (``replay.splitters``, each on polars and pandas frames; cold filters, off by
default, compared on and off; no seen filter and no counts):

- ``LastNSplitter(N, strategy="interactions")`` = ``"last_n"`` when every user has more
  than N rows with distinct times (its sorts are not stable). Differs: a user with N rows
  or fewer: on pandas all its rows are test; on polars (``count - N`` in UInt32, which
  wraps below 0) a user with fewer than N rows stays in train and one with exactly N gives
  all to test; the sheet keeps ``min_train=1`` row in train. ``strategy="timedelta"``
  (the rows within N seconds of the user's last) has no sheet method.
- ``TimeSplitter(time_threshold=datetime)`` = ``"time"`` with ``at=``: test is
  time >= threshold on both (a row at the threshold is test). With a float share s: the
  pandas path takes the time at position int(n · (1 − s)) of the sorted times and every
  row at or after it, as the sheet does, ties included; the polars path takes the rows
  from that position on, so rows tied at the cut time are split: the sheet's split only
  with distinct times (shown on a tie). Both count rows where the sheet counts events
  (shown on a repeated row).
- ``RatioSplitter(test_size=s)``: default ``split_by_fractions=True`` tests ceil(s · n_u)
  rows per user (row r of n_u is test when round(r / n_u, 3) > round(1 − s, 3)), a user
  with one row included; ``split_by_fractions=False`` tests floor(s · n_u), but 1 when
  0 < s · n_u < 1 and n_u >= 2. The sheet tests round_half_up(s · n_u) capped at
  n_u − min_train. The tests draw each user's row count from the counts where the rules
  give the same number, and a table for s = 0.2, n_u = 1..10 shows all three.
- ``KFolds``: not comparable: it deals each user's rows (not users) into folds after a
  random shuffle.

LensKit: the 2025 releases need torch (``lenskit.data``) and are not installed. LensKit
0.14.4 is pure Python and ``lenskit.crossfold`` imports without its heavy deps (numba,
csr, cffi are not imported; seedbank, binpickle and msgpack are, all pure Python or
already here): ``pip install --no-deps lenskit==0.14.4 seedbank binpickle==0.3.4``. It is
not in the dev install, so these tests skip unless it is installed by hand.
``partition_users(data, k, LastN(n))`` against ``"user_kfold"`` with ``n`` (filters off),
users of more than n rows with distinct times: each fold's train is the rest of the rows
on both sides, the union of the folds' test rows is the same and the folds hold the same
numbers of users (which user lands in which fold is random there, by seeded hash here).
Differs: ``LastFrac(f)`` tests ``round(f · n_u)`` rows (half to even) and, when that is
0, ``iloc[-0:]``: every row of the user. ``SampleN``, ``SampleFrac``, ``partition_rows``
are random: not comparable.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from math import ceil, floor
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.protocol import Report
from tests.conftest import to_polars

SEEDS = (0, 1, 2)
USERS = 300
ITEMS = 1000
START = dt.datetime(2021, 3, 1)
DAYS = 56
KINDS = ("polars", "pandas")
#: Filters on (the defaults of RecTools and of the sheet) and off.
FILTERS = {"filters-on": True, "filters-off": False}
KEEP_ALL: dict[str, Any] = {"cold_users": "keep", "cold_items": "keep", "seen": "keep"}


@contextmanager
def quiet() -> Iterator[None]:
    """The peers' own deprecation warnings (pandas, polars, their own APIs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- data --------------------------------------------------------------------------------


def events(seed: int, counts: Sequence[int], *, hour_ties: bool = False) -> pl.DataFrame:
    """``user, item, t, row``: each user's number of rows drawn from ``counts``.

    Times are distinct over the frame and never on a whole hour; ``hour_ties``: whole
    hours instead, shared by many rows (of one user too).
    """
    rng = np.random.default_rng(seed)
    per_user = rng.choice(np.asarray(counts), size=USERS)
    user = np.repeat(np.arange(USERS), per_user)
    total = len(user)
    weights = 1.0 / np.arange(1, ITEMS + 1)
    item = rng.choice(ITEMS, size=total, p=weights / weights.sum())
    if hour_ties:
        seconds = rng.integers(0, DAYS * 24, size=total) * 3600
    else:
        # 3599 seconds of each hour (not its first): distinct, never on an hour's border.
        k = rng.choice(DAYS * 24 * 3599, size=total, replace=False)
        seconds = (k // 3599) * 3600 + k % 3599 + 1
    order = rng.permutation(total)
    frame = pl.DataFrame(
        {"user": user[order], "item": item[order], "s": seconds[order]},
        schema={"user": pl.Int64, "item": pl.Int64, "s": pl.Int64},
    )
    # A repeated (user, item, time) is one event for the sheet and one row each for the
    # peers (test_replay_time_share_counts_rows_not_events): none here.
    return frame.unique(["user", "item", "s"], keep="first", maintain_order=True).select(
        "user",
        "item",
        (pl.lit(START) + pl.duration(seconds=pl.col("s"))).alias("t"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("row"),
    )


def hourly(user: Sequence[int], item: Sequence[int] | None = None) -> pl.DataFrame:
    """One row per user id in ``user``, an hour apart, ``row`` its position; each its own
    item unless ``item`` says."""
    n = len(user)
    return pl.DataFrame(
        {
            "user": list(user),
            "item": list(range(n)) if item is None else list(item),
            "t": [START + dt.timedelta(hours=i) for i in range(n)],
            "row": list(range(n)),
        },
        schema_overrides={"user": pl.Int64, "item": pl.Int64},
    )


def rows(frame: Any) -> set[int]:
    """The ``row`` ids of a polars or pandas frame."""
    return set(to_polars(frame)["row"].to_list())


def as_kind(frame: pl.DataFrame, kind: str) -> Any:
    return frame if kind == "polars" else frame.to_pandas()


def filters(on: bool, *, seen: bool | None = None) -> dict[str, Any]:
    """fm.split's three filters, each "drop" when ``on`` (``seen`` apart when given)."""
    word = "drop" if on else "keep"
    seen_word = word if seen is None else ("drop" if seen else "keep")
    return {"cold_users": word, "cold_items": word, "seen": seen_word}


def one_split(frame: Any, method: str, **options: Any) -> tuple[set[int], set[int], fm.Split]:
    result = fm.split(frame, method, time="t", **options)
    assert isinstance(result, fm.Split)
    train, test = result
    return rows(train), rows(test), result


# --- RecTools ------------------------------------------------------------------------------
# rectools/model_selection/splitter.py Splitter.filter: test rows of users not in train,
# then of items not in train, then (user, item) pairs in train (get_not_seen_mask), each
# when its flag is on (all three by default). collect_fold_stats adds the rows, users and
# items of train and of the kept test rows to the fold's info.


@pytest.fixture(scope="module")
def rectools() -> types.SimpleNamespace:
    """RecTools' splitters, imported without ``rectools.model_selection.__init__``.

    That ``__init__`` imports ``cross_validate``, which imports ``rectools.models`` and so
    ``implicit`` (not installed with --no-deps). A bare package module with the package's
    ``__path__`` stands in for it while the splitter modules import; ``sys.modules`` is
    restored after (the classes keep working).
    """
    pytest.importorskip("rectools", reason="RecTools (tests/peers-no-deps.txt) is not installed")
    name = "rectools.model_selection"
    before = set(sys.modules)
    if name not in sys.modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            pytest.skip(f"{name} is not in this RecTools")
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[name] = package
    try:
        with quiet():
            last_n = importlib.import_module(f"{name}.last_n_split")
            time = importlib.import_module(f"{name}.time_split")
            random = importlib.import_module(f"{name}.random_split")
            dataset = importlib.import_module("rectools.dataset")
    except ImportError as error:
        pytest.skip(f"RecTools' splitter modules do not import without their package: {error}")
    finally:
        for key in set(sys.modules) - before:
            if key == name or key.startswith(f"{name}."):
                del sys.modules[key]
    return types.SimpleNamespace(
        LastNSplitter=last_n.LastNSplitter,
        TimeRangeSplitter=time.TimeRangeSplitter,
        RandomSplitter=random.RandomSplitter,
        Interactions=dataset.Interactions,
    )


def rectools_interactions(rt: types.SimpleNamespace, frame: pl.DataFrame) -> Any:
    """RecTools' ``Interactions``: internal integer ids, weight 1, datetime64[ns]."""
    df = pd.DataFrame(
        {
            "user_id": frame["user"].to_numpy(),
            "item_id": frame["item"].to_numpy(),
            "weight": 1.0,
            "datetime": frame["t"].to_pandas().astype("datetime64[ns]"),
        }
    )
    return rt.Interactions(df)


PeerFolds = list[tuple[set[int], set[int], dict[str, Any]]]


def rectools_folds(splitter: Any, interactions: Any, *, stats: bool = False) -> PeerFolds:
    with quiet():
        out = splitter.split(interactions, collect_fold_stats=stats)
        return [(set(train.tolist()), set(test.tolist()), info) for train, test, info in out]


def check_rectools_report(
    report: Report, make: Callable[[bool, bool, bool], Any], interactions: Any
) -> None:
    """The report's drop counts and sizes are RecTools' own.

    Its drops: the test rows each filter removes when the filters are switched on one by
    one in RecTools' order (users, items, seen): the sheet's "counted once, by the first".
    Its sizes: ``collect_fold_stats`` (rows, users, items of train and of kept test rows).
    """
    steps = [(False, False, False), (True, False, False), (True, True, False), (True, True, True)]
    sizes = [[len(test) for _, test, _ in rectools_folds(make(*s), interactions)] for s in steps]
    stats = [
        info for _, _, info in rectools_folds(make(True, True, True), interactions, stats=True)
    ]
    frame = report.frame.sort("fold", "side")
    test = frame.filter(pl.col("side") == "test")
    train = frame.filter(pl.col("side") == "train")
    assert test["dropped_cold_users"].to_list() == [a - b for a, b in zip(*sizes[0:2], strict=True)]
    assert test["dropped_cold_items"].to_list() == [a - b for a, b in zip(*sizes[1:3], strict=True)]
    assert test["dropped_seen"].to_list() == [a - b for a, b in zip(*sizes[2:4], strict=True)]
    for side, part in (("train", train), ("test", test)):
        assert part["rows"].to_list() == [info[side] for info in stats]
        assert part["users"].to_list() == [info[f"{side}_users"] for info in stats]
        assert part["items"].to_list() == [info[f"{side}_items"] for info in stats]


# rectools/model_selection/last_n_split.py LastNSplitter._split_without_filter: per user,
# rank by datetime (method="first": ties by row order), the last n ranks are test, every
# earlier row is train; no minimum train rows.


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("on", list(FILTERS.values()), ids=list(FILTERS))
def test_rectools_last_n(rectools: types.SimpleNamespace, seed: int, n: int, on: bool) -> None:
    frame = events(seed, range(n + 1, n + 25))
    interactions = rectools_interactions(rectools, frame)

    def make(users: bool, items: bool, seen: bool) -> Any:
        return rectools.LastNSplitter(n, 1, users, items, seen)

    [(train, test, _)] = rectools_folds(make(on, on, on), interactions)
    got_train, got_test, result = one_split(frame, "last_n", n=n, **filters(on))
    assert got_train == train
    assert got_test == test
    assert len(test) > 0
    if on:
        check_rectools_report(result.report, make, interactions)
        dropped = result.report.frame.filter(pl.col("side") == "test").row(0, named=True)
        assert dropped["dropped_cold_items"] > 0  # the filters had work to do
        assert dropped["dropped_seen"] > 0


def test_rectools_last_n_differences(rectools: types.SimpleNamespace) -> None:
    """Ties by row order there, by item here; few-row users all to test there."""
    # User 1: items 5 then 3 (in row order) at one time. RecTools: the row further down
    # (item 3) is the later, so it is the last; the sheet: the larger item (5) is later.
    tie = pl.DataFrame(
        {"user": [1, 1], "item": [5, 3], "t": [START, START], "row": [0, 1]},
        schema_overrides={"user": pl.Int64, "item": pl.Int64},
    )
    [(train, test, _)] = rectools_folds(
        rectools.LastNSplitter(1, 1, False, False, False), rectools_interactions(rectools, tie)
    )
    assert (train, test) == ({0}, {1})
    assert one_split(tie, "last_n", n=1, **KEEP_ALL)[:2] == ({1}, {0})

    # n=3 and users of 1, 2, 3 and 4 rows (user 9 has 4 rows of item 7 too, so no test
    # row of the others is of a cold item). RecTools: every row of users 1-3 is test, then
    # dropped as cold users (no train row), and so in neither part; the sheet keeps one
    # row of each in train (min_train=1) and tests the rest.
    sizes = {1: 1, 2: 2, 3: 3, 4: 4}
    user = [u for u, size in sizes.items() for _ in range(size)] + [9] * 4
    few = hourly(user, [7] * len(user))
    interactions = rectools_interactions(rectools, few)
    [(train, test, _)] = rectools_folds(
        rectools.LastNSplitter(3, 1, False, False, False), interactions
    )
    assert train == {6, 10}  # user 4's first row, user 9's first row
    assert test == set(range(10)) - {6} | {11, 12, 13}
    [(train, test, _)] = rectools_folds(
        rectools.LastNSplitter(3, 1, True, False, False), interactions
    )
    assert test == {7, 8, 9, 11, 12, 13}  # users 1-3: all rows test, then dropped
    got_train, got_test, _ = one_split(few, "last_n", n=3, cold_items="keep", seen="keep")
    assert got_train == {0, 1, 3, 6, 10}
    assert got_test == {2, 4, 5, 7, 8, 9, 11, 12, 13}


# rectools/model_selection/time_split.py TimeRangeSplitter: borders from the last time
# ceiled to the unit (one unit on when exactly on it), n_splits windows of test_size back
# from there (pd.date_range); fold i: train = time < start, test = start <= time < end.


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("test_size", "window", "n_folds"), [("7D", "7d", 3), ("2D", dt.timedelta(days=2), 5)]
)
@pytest.mark.parametrize("on", list(FILTERS.values()), ids=list(FILTERS))
def test_rectools_time_range(
    rectools: types.SimpleNamespace,
    seed: int,
    test_size: str,
    window: str | dt.timedelta,
    n_folds: int,
    on: bool,
) -> None:
    frame = events(seed, range(1, 30))
    interactions = rectools_interactions(rectools, frame)

    def make(users: bool, items: bool, seen: bool) -> Any:
        return rectools.TimeRangeSplitter(test_size, n_folds, users, items, seen)

    borders = make(on, on, on).get_test_fold_borders(interactions)
    end = borders[-1][1].to_pydatetime()
    assert end != frame["t"].max()  # ceiled: the sheet's default end would differ
    peer = rectools_folds(make(on, on, on), interactions)
    folds = fm.split(
        frame, "time_windows", time="t", n_folds=n_folds, window=window, end=end, **filters(on)
    )
    assert isinstance(folds, fm.Folds)
    assert len(folds) == len(peer) == n_folds
    for (train, test, _), split in zip(peer, folds, strict=True):
        assert rows(split.train) == train
        assert rows(split.test) == test
        assert len(test) > 0
    by_fold = to_polars(folds.test).group_by("fold").agg(pl.col("row"))
    assert {f: set(r) for f, r in by_fold.iter_rows()} == {
        f: test for f, (_, test, _) in enumerate(peer) if test
    }
    if on:
        check_rectools_report(folds.report, make, interactions)


def test_rectools_time_range_differences(rectools: types.SimpleNamespace) -> None:
    """[start, end) windows and a ceiled end there; (left, right] and the last time here."""
    day = dt.timedelta(days=1)
    hour = dt.timedelta(hours=1)
    times = [
        START + 1 * day + 12 * hour,
        START + 2 * day + 12 * hour,
        START + 4 * day,  # row 2: at midnight, a border of both (with end=)
        START + 4 * day + 18 * hour,
        START + 5 * day + 12 * hour,  # the last time
    ]
    frame = pl.DataFrame(
        {"user": [1] * 5, "item": [1, 2, 3, 4, 5], "t": times, "row": list(range(5))},
        schema_overrides={"user": pl.Int64, "item": pl.Int64},
    )
    interactions = rectools_interactions(rectools, frame)
    splitter = rectools.TimeRangeSplitter("1D", 2, False, False, False)
    borders = splitter.get_test_fold_borders(interactions)
    # The last time ceiled to the day: day 6; windows [day 4, day 5) and [day 5, day 6).
    assert [(a.to_pydatetime(), b.to_pydatetime()) for a, b in borders] == [
        (START + 4 * day, START + 5 * day),
        (START + 5 * day, START + 6 * day),
    ]
    peer = [(train, test) for train, test, _ in rectools_folds(splitter, interactions)]
    assert peer == [({0, 1}, {2, 3}), ({0, 1, 2, 3}, {4})]
    # The same borders (end=): row 2, at day 4 0:00, closes the window before it (the
    # sheet's windows are open on the left), so it trains the first fold.
    end = borders[-1][1].to_pydatetime()
    folds = fm.split(frame, "time_windows", time="t", n_folds=2, window="1d", end=end, **KEEP_ALL)
    assert [(rows(s.train), rows(s.test)) for s in folds] == [({0, 1, 2}, {3}), ({0, 1, 2, 3}, {4})]
    # The sheet's default end is the last time, day 5 12:00: windows (day 3 12:00,
    # day 4 12:00] and (day 4 12:00, day 5 12:00].
    folds = fm.split(frame, "time_windows", time="t", n_folds=2, window="1d", **KEEP_ALL)
    assert [(rows(s.train), rows(s.test)) for s in folds] == [({0, 1}, {2}), ({0, 1, 2}, {3, 4})]


def test_rectools_random_counts_round_half_to_even(rectools: types.SimpleNamespace) -> None:
    """Rows cannot match (a numpy permutation there, a seeded hash here); the counts
    differ at a half: RecTools ``int(round(0.25 · 10))`` = 2, the sheet round_half_up = 3."""
    frame = events(0, [1])[:10]
    splitter = rectools.RandomSplitter(0.25, 1, 0, False, False, False)
    [(train, test, _)] = rectools_folds(splitter, rectools_interactions(rectools, frame))
    assert (len(train), len(test)) == (8, 2)
    got_train, got_test, _ = one_split(frame, "random", test_share=0.25, **KEEP_ALL)
    assert (len(got_train), len(got_test)) == (7, 3)


# --- RePlay ------------------------------------------------------------------------------------
# replay/splitters/base_splitter.py Splitter.split: _core_split, then (when on) test rows of
# items, then of users, not in train (_drop_cold_items_and_users); no seen filter.


@pytest.fixture(scope="module")
def replay() -> Any:
    return pytest.importorskip(
        "replay.splitters", reason="RePlay (tests/peers-no-deps.txt) is not installed"
    )


COLUMNS = {"query_column": "user", "item_column": "item", "timestamp_column": "t"}


def replay_split(splitter: Any, frame: Any) -> tuple[set[int], set[int]]:
    with quiet():
        train, test = splitter.split(frame)
    return rows(train), rows(test)


def replay_filters(on: bool) -> dict[str, Any]:
    return {"drop_cold_users": on, "drop_cold_items": on}


# replay/splitters/last_n_splitter.py LastNSplitter (strategy="interactions"): per user,
# rows sorted by time (not a stable sort), row_num 1.. ; test = row_num > count - N.


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("on", list(FILTERS.values()), ids=list(FILTERS))
def test_replay_last_n(replay: Any, seed: int, n: int, kind: str, on: bool) -> None:
    frame = events(seed, range(n + 1, n + 25))
    splitter = replay.LastNSplitter(
        N=n, divide_column="user", strategy="interactions", **COLUMNS, **replay_filters(on)
    )
    train, test = replay_split(splitter, as_kind(frame, kind))
    got_train, got_test, _ = one_split(
        as_kind(frame, kind), "last_n", n=n, **filters(on, seen=False)
    )
    assert (got_train, got_test) == (train, test)
    assert len(test) < USERS * n if on else len(test) == USERS * n  # on: cold items dropped


def test_replay_last_n_few_rows_differ(replay: Any) -> None:
    """Users with N rows or fewer: all test (pandas), none or all (polars), N_u − 1 here."""
    sizes = [1, 2, 3, 4]  # users 0..3, N = 3
    user = [u for u, size in enumerate(sizes) for _ in range(size)]
    frame = hourly(user)

    def per_user(test: set[int]) -> list[int]:
        return [sum(user[r] == u for r in test) for u in range(len(sizes))]

    splitter = replay.LastNSplitter(N=3, divide_column="user", **COLUMNS)
    assert per_user(replay_split(splitter, frame.to_pandas())[1]) == [1, 2, 3, 3]
    # RePlay 0.22 on polars 2: count - N is UInt32 and wraps for count < N, so those
    # users stay in train; a fixed RePlay would give the pandas answer.
    assert per_user(replay_split(splitter, frame)[1]) in ([0, 0, 3, 3], [1, 2, 3, 3])
    _, test, _ = one_split(frame, "last_n", n=3, **KEEP_ALL)
    assert per_user(test) == [0, 1, 2, 3]


# replay/splitters/time_splitter.py TimeSplitter: a datetime threshold: test = time >=
# threshold (every path). A float share s: pandas: t* = the time at position
# int(n · (1 − s)) of the sorted times, test = time >= t*; polars: the rows at sorted
# positions >= int(n · (1 − s)) (cum_count), whatever their time.


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("on", list(FILTERS.values()), ids=list(FILTERS))
def test_replay_time_threshold(replay: Any, seed: int, kind: str, on: bool) -> None:
    frame = events(seed, range(1, 30))
    at = frame["t"].sort()[int(0.8 * len(frame))]  # a row's own time: >= puts it in test
    assert isinstance(at, dt.datetime)
    splitter = replay.TimeSplitter(time_threshold=at, **COLUMNS, **replay_filters(on))
    train, test = replay_split(splitter, as_kind(frame, kind))
    got_train, got_test, result = one_split(
        as_kind(frame, kind), "time", at=at, **filters(on, seen=False)
    )
    assert (got_train, got_test) == (train, test)
    at_row = frame.filter(pl.col("t") == at)["row"].item()
    assert at_row not in train  # time >= at is test on both sides
    assert on or at_row in test
    if on:
        dropped = result.report.frame.filter(pl.col("side") == "test").row(0, named=True)
        assert dropped["dropped_cold_users"] > 0
        assert dropped["dropped_cold_items"] > 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("share", [0.2, 0.25])
@pytest.mark.parametrize(
    ("kind", "hour_ties"), [("pandas", True), ("pandas", False), ("polars", False)]
)
def test_replay_time_share(
    replay: Any, seed: int, share: float, kind: str, hour_ties: bool
) -> None:
    """The pandas path cuts as the sheet does, ties too; the polars path without ties."""
    frame = events(seed, range(1, 30), hour_ties=hour_ties)
    splitter = replay.TimeSplitter(time_threshold=share, **COLUMNS)
    train, test = replay_split(splitter, as_kind(frame, kind))
    got_train, got_test, _ = one_split(as_kind(frame, kind), "time", test_share=share, **KEEP_ALL)
    assert (got_train, got_test) == (train, test)
    if hour_ties:  # rows tied at the cut time, all of them test on both sides
        cut = frame.filter(pl.col("row").is_in(list(test)))["t"].min()
        assert frame.filter(pl.col("t") == cut).height > 1


def test_replay_time_share_ties_differ_on_polars(replay: Any) -> None:
    """Times 1, 2, 2, 3, 3 and s = 0.5: t* = the time at position int(5 · 0.5) = 2 is 2.

    The sheet and RePlay's pandas path: every row at t = 2 or later, 4 rows. RePlay's
    polars path: the rows from sorted position 2 on, 3 rows, one of the two tied at 2.
    """
    frame = pl.DataFrame(
        {
            "user": [1, 2, 3, 4, 5],
            "item": [1, 2, 3, 4, 5],
            "t": [1, 2, 2, 3, 3],
            "row": [0, 1, 2, 3, 4],
        }
    )
    splitter = replay.TimeSplitter(time_threshold=0.5, **COLUMNS)
    assert replay_split(splitter, frame.to_pandas())[1] == {1, 2, 3, 4}
    test = replay_split(splitter, frame)[1]
    assert len(test) == 3
    assert {3, 4} < test
    assert one_split(frame, "time", test_share=0.5, **KEEP_ALL)[1] == {1, 2, 3, 4}


def test_replay_time_share_counts_rows_not_events(replay: Any) -> None:
    """Rows 0-2 are one event (user 1, item 1, t = 1), so the sheet counts 3 events.

    RePlay (pandas) with s = 0.5: 5 rows, t* = the time at position int(2.5) = 2, which
    is 1: every row is test. The sheet: 3 events, position floor(1.5) = 1 of the event
    times 1, 2, 3: t* = 2, rows 3 and 4.
    """
    frame = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 3],
            "item": [1, 1, 1, 2, 3],
            "t": [1, 1, 1, 2, 3],
            "row": [0, 1, 2, 3, 4],
        }
    )
    splitter = replay.TimeSplitter(time_threshold=0.5, **COLUMNS)
    assert replay_split(splitter, frame.to_pandas()) == (set(), {0, 1, 2, 3, 4})
    assert one_split(frame, "time", test_share=0.5, **KEEP_ALL)[:2] == ({0, 1, 2}, {3, 4})


# replay/splitters/ratio_splitter.py RatioSplitter: per user, rows sorted by time (not a
# stable sort), row_num r = 1..n. split_by_fractions=True (default): test when
# round(r / n, 3) > round(1 − s, 3): the last ceil(s · n) rows (for the shares and counts
# here, where no r / n is within 0.0005 of 1 − s). split_by_fractions=False:
# train_size = n − int(n · s), minus 1 when 0 < n · s < 1 and train_size > 1.


def replay_ratio_quota(n: int, share: float, *, by_fractions: bool) -> int:
    """RePlay's test rows for a user of ``n`` rows (the rules above, in exact arithmetic)."""
    exact = Fraction(str(share)) * n
    if by_fractions:
        return ceil(exact)
    if 0 < exact < 1 and n > 1:
        return 1
    return floor(exact)


def sheet_ratio_quota(n: int, share: float, *, min_train: int = 1) -> int:
    """The sheet's: round_half_up(s · n), capped at n − min_train, at least 0."""
    return max(0, min(floor(Fraction(str(share)) * n + Fraction(1, 2)), n - min_train))


def agreeing_counts(share: float, *, by_fractions: bool) -> list[int]:
    """The row counts 1..40 for which RePlay and the sheet test as many rows."""
    return [
        n
        for n in range(1, 41)
        if replay_ratio_quota(n, share, by_fractions=by_fractions) == sheet_ratio_quota(n, share)
    ]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("share", [0.2, 0.25, 0.5])
@pytest.mark.parametrize("by_fractions", [True, False], ids=["fractions", "counts"])
@pytest.mark.parametrize("kind", KINDS)
def test_replay_ratio(replay: Any, seed: int, share: float, by_fractions: bool, kind: str) -> None:
    counts = agreeing_counts(share, by_fractions=by_fractions)
    assert len(counts) >= 10
    frame = events(seed, counts)
    splitter = replay.RatioSplitter(
        test_size=share, divide_column="user", split_by_fractions=by_fractions, **COLUMNS
    )
    train, test = replay_split(splitter, as_kind(frame, kind))
    got_train, got_test, _ = one_split(as_kind(frame, kind), "ratio", test_share=share, **KEEP_ALL)
    assert (got_train, got_test) == (train, test)


@pytest.mark.parametrize("kind", KINDS)
def test_replay_ratio_rounding_differs(replay: Any, kind: str) -> None:
    """s = 0.2, users of 1..10 rows: test rows per user on each side.

    RePlay by fractions: ceil(0.2 · n) (a user of one row gives it to test); RePlay by
    counts: floor(0.2 · n), 1 below 1 from 2 rows on; the sheet: round_half_up(0.2 · n),
    keeping one train row (min_train=1).
    """
    user = [n for n in range(1, 11) for _ in range(n)]
    frame = hourly(user)

    def per_user(test: set[int]) -> list[int]:
        return [sum(user[r] == n for r in test) for n in range(1, 11)]

    def peer(by_fractions: bool) -> list[int]:
        splitter = replay.RatioSplitter(
            test_size=0.2, divide_column="user", split_by_fractions=by_fractions, **COLUMNS
        )
        return per_user(replay_split(splitter, as_kind(frame, kind))[1])

    #                    n: 1  2  3  4  5  6  7  8  9  10
    assert peer(True) == [1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    assert peer(False) == [0, 1, 1, 1, 1, 1, 1, 1, 1, 2]
    _, test, _ = one_split(as_kind(frame, kind), "ratio", test_share=0.2, **KEEP_ALL)
    assert per_user(test) == [0, 0, 1, 1, 1, 1, 1, 2, 2, 2]
    for n in range(1, 11):  # the rules of the docstring
        assert peer(True)[n - 1] == replay_ratio_quota(n, 0.2, by_fractions=True)
        assert peer(False)[n - 1] == replay_ratio_quota(n, 0.2, by_fractions=False)
        assert per_user(test)[n - 1] == sheet_ratio_quota(n, 0.2)


# --- LensKit 0.14 ------------------------------------------------------------------------------
# lenskit/crossfold.py partition_users: the users, shuffled (util.rng), np.array_split into
# k folds; fold i's test = method(each of its users' rows), train = every other row.
# LastN(n, col): udf.sort_values(col).iloc[-n:] (no minimum train rows; quicksort, not
# stable). LastFrac(f, col): n = round(len(udf) · f); udf.sort_values(col).iloc[-n:].


@pytest.fixture(scope="module")
def lenskit() -> Any:
    return pytest.importorskip(
        "lenskit.crossfold",
        reason="LensKit 0.14 (pure Python; pip install --no-deps lenskit==0.14.4 seedbank "
        "binpickle==0.3.4) is not installed, and LensKit 2025 (torch) has no crossfold",
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 2])
def test_lenskit_partition_users_last_n(lenskit: Any, seed: int, n: int) -> None:
    frame = events(seed, range(n + 1, n + 25))
    data = frame.to_pandas()
    with quiet():
        pairs = list(lenskit.partition_users(data, 4, lenskit.LastN(n, col="t"), rng_spec=seed))
    folds = fm.split(frame, "user_kfold", time="t", n=n, n_folds=4, seed=seed, **KEEP_ALL)
    assert isinstance(folds, fm.Folds)
    everything = set(range(len(frame)))
    peer_tests = [set(pair.test["row"].tolist()) for pair in pairs]
    for pair, test in zip(pairs, peer_tests, strict=True):
        assert set(pair.train["row"].tolist()) == everything - test
    ours = [(rows(s.train), rows(s.test)) for s in folds]
    for train, test in ours:
        assert train == everything - test
    # Which user is in which fold is random there: the same test rows over all folds,
    # folds of the same numbers of users.
    assert set().union(*peer_tests) == set().union(*(test for _, test in ours))
    user = frame["user"].to_list()
    assert sorted(len({user[r] for r in t}) for t in peer_tests) == sorted(
        len({user[r] for r in t}) for _, t in ours
    )


def test_lenskit_last_frac_differs(lenskit: Any) -> None:
    """``round`` half to even, and 0 rows to test is ``iloc[-0:]``: every row."""
    frame = pl.DataFrame(
        {
            "user": [1] * 5 + [2] * 2,
            "item": list(range(7)),
            "t": list(range(7)),
            "row": list(range(7)),
        }
    )
    data = frame.to_pandas()
    # User 1, 5 rows, f = 0.5: round(2.5) = 2 there, round_half_up = 3 here.
    assert set(lenskit.LastFrac(0.5, col="t")(data[data.user == 1])["row"]) == {3, 4}
    assert one_split(frame.filter(pl.col("user") == 1), "ratio", test_share=0.5, **KEEP_ALL)[1] == {
        2,
        3,
        4,
    }
    # User 2, 2 rows, f = 0.2: round(0.4) = 0, and iloc[-0:] is both rows; none here.
    assert set(lenskit.LastFrac(0.2, col="t")(data[data.user == 2])["row"]) == {5, 6}
    assert (
        one_split(frame.filter(pl.col("user") == 2), "ratio", test_share=0.2, **KEEP_ALL)[1]
        == set()
    )
