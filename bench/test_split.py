"""Tests of the split benchmark: its data, the hand-written queries, the jobs and tables.

Each hand-written polars query (``split.hand_split``, eager and lazy) is compared with a
slow pure-Python reference of spec section 10 on small frames full of ties, repeated
events, one-row users and cold items; where ``fm.split`` exists, with it too. No timing
asserts. Run with ``python -m pytest bench/test_split.py -q`` (a few seconds).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import split

Row = tuple[int, int, int, float]  # user, item, time (us), rating
DAY = 86_400_000_000
#: Small windows, so that the tiny frames' 12 days hold 3 of them and a train before.
WINDOW = dt.timedelta(days=2)


# --------------------------------------------------------------------------------------
# The reference: spec section 10, row by row
# --------------------------------------------------------------------------------------


def _per_user_holdout(rows: list[Row], n_test: Any) -> set[tuple[int, int, int]]:
    """The held-out events: each user's last ``n_test(n_events)`` events by (time, item),
    capped so that one event (``min_train=1``) stays in train."""
    events: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for u, i, t, _ in rows:
        events[u].add((t, i))
    held = set()
    for u, evs in events.items():
        ordered = sorted(evs)  # by time, then item: the later item is the larger
        k = max(0, min(n_test(len(ordered)), len(ordered) - split.MIN_TRAIN))
        held |= {(u, i, t) for t, i in ordered[len(ordered) - k :]}
    return held


def _filtered(train: list[Row], test: list[Row]) -> list[Row]:
    """Test rows whose user and item are in train and whose (user, item) is not."""
    users = {r[0] for r in train}
    items = {r[1] for r in train}
    pairs = {(r[0], r[1]) for r in train}
    return [r for r in test if r[0] in users and r[1] in items and (r[0], r[1]) not in pairs]


def _apart(rows: list[Row], held: set[tuple[int, int, int]]) -> tuple[list[Row], list[Row]]:
    train = [r for r in rows if r[:3] not in held]
    test = [r for r in rows if r[:3] in held]
    return train, _filtered(train, test)


def reference(rows: list[Row], method: str, **kw: Any) -> tuple[list[Row], list[tuple[Any, ...]]]:
    """``(train, test)`` of ``method`` (sorted); multi-fold: the last fold's train and every
    fold's test rows with their fold appended."""
    n, share, seed = kw.get("n", 1), kw.get("test_share", 0.2), kw.get("seed", 0)
    events = sorted({r[:3] for r in rows})
    train: list[Row]
    test: list[tuple[Any, ...]]
    if method == "last_n":
        train, test = _apart(rows, _per_user_holdout(rows, lambda _: n))
    elif method == "ratio":
        train, test = _apart(rows, _per_user_holdout(rows, lambda m: math.floor(share * m + 0.5)))
    elif method == "time":
        times = sorted(t for _, _, t in events)
        cut = times[math.floor(len(times) * (1 - share))]
        train, test = _apart(rows, {e for e in events if e[2] >= cut})
    elif method == "random":
        k = math.floor(share * len(events) + 0.5)
        by_hash = sorted(events, key=lambda e: split.python_hash(seed, *e))
        train, test = _apart(rows, set(by_hash[:k]))
    elif method == "user_kfold":
        k_folds = kw["n_folds"]
        users = sorted({r[0] for r in rows}, key=lambda u: (split.python_hash(seed, u), u))
        fold_of = {u: pos % k_folds for pos, u in enumerate(users)}
        held = _per_user_holdout(rows, lambda _: n)
        test, fold_train = [], rows
        for f in range(k_folds):
            in_f = {e for e in held if fold_of[e[0]] == f}
            fold_train, fold_test = _apart(rows, in_f)
            test += [(*r, f) for r in fold_test]
        train = fold_train  # the last fold's
    elif method == "time_windows":
        k_windows, w = kw["n_folds"], int(kw["window"] / dt.timedelta(microseconds=1))
        end = max(t for _, _, t in events)
        test, fold_train = [], rows
        for f in range(k_windows):
            left, right = end - (k_windows - f) * w, end - (k_windows - f - 1) * w
            fold_train = [r for r in rows if r[2] <= left]
            window = [r for r in rows if left < r[2] <= right]
            test += [(*r, f) for r in _filtered(fold_train, window)]
        train = fold_train
    else:
        raise ValueError(method)
    return sorted(train), sorted(test)


# --------------------------------------------------------------------------------------
# Small frames
# --------------------------------------------------------------------------------------


def small_frame(seed: int, n_rows: int = 60) -> pl.DataFrame:
    """Rows of 9 users over 8 items and 12 days (whole days: many ties), a few rows
    repeated exactly (ratings apart), one user with a single row."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 8, n_rows)
    item = rng.integers(0, 8, n_rows)
    day = rng.integers(0, 12, n_rows)
    rating = rng.integers(1, 6, n_rows).astype(np.float32)
    again = rng.choice(n_rows, 5, replace=False)
    user = np.concatenate([user, user[again], [8]])
    item = np.concatenate([item, item[again], [3]])
    day = np.concatenate([day, day[again], [11]])
    rating = np.concatenate([rating, rating[again] + 0.5, [2.0]]).astype(np.float32)
    order = rng.permutation(len(user))
    return pl.DataFrame(
        {
            "user": user[order].astype(np.int64),
            "item": item[order].astype(np.int64),
            "time": pl.Series(day[order] * DAY).cast(pl.Datetime("us")),
            "rating": rating[order],
        }
    )


def as_rows(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    """Sorted rows with time as integer microseconds (the fold, if any, last)."""
    names = [c for c in ("user", "item", "time", "rating", "fold") if c in frame.columns]
    frame = frame.select(names).with_columns(pl.col("time").dt.epoch("us"))
    if "fold" in names:
        frame = frame.with_columns(pl.col("fold").cast(pl.Int64))
    return sorted(frame.iter_rows())


KWARGS: dict[str, dict[str, Any]] = {
    "last_n": {"n": 1},
    "ratio": {"test_share": 0.3},
    "time": {"test_share": 0.3},
    "random": {"test_share": 0.3, "seed": 7},
    "user_kfold": {"n_folds": 3, "n": 2, "seed": 3},
    "time_windows": {"n_folds": 3, "window": WINDOW},
}
SEEDS = range(12)


@pytest.mark.parametrize("method", split.METHODS)
def test_hand_written_queries_equal_the_reference(method: str) -> None:
    checked_test_rows = 0
    for seed in SEEDS:
        frame = small_frame(seed)
        rows = [(u, i, t, r) for u, i, t, r in as_rows(frame)]
        want_train, want_test = reference(rows, method, **KWARGS[method])
        for start in (frame, frame.lazy()):
            train, test = split.hand_split(start, method, **KWARGS[method])
            if isinstance(train, pl.LazyFrame):
                train, test = pl.collect_all([train, test])
            assert train.columns == frame.columns
            assert as_rows(train) == want_train, (method, seed)
            assert as_rows(test) == want_test, (method, seed)
        checked_test_rows += len(want_test)
    assert checked_test_rows > 0  # the filters do not leave every test empty


def test_the_reference_follows_the_sheet_on_a_worked_example() -> None:
    d = DAY
    rows: list[Row] = [
        # user 1: two events at its last time (items 5 and 4): the larger item is last.
        (1, 1, 0, 1.0),
        (1, 4, 2 * d, 1.0),
        (1, 5, 2 * d, 1.0),
        # user 2: its last event twice (ratings apart): one event, on one side.
        (2, 5, 0, 1.0),
        (2, 4, d, 2.0),
        (2, 4, d, 3.0),
        # user 3: one row, wholly in train (min_train=1).
        (3, 4, d, 1.0),
        # user 4: its last item is 9, which no train row has: cold, dropped.
        (4, 1, 0, 1.0),
        (4, 9, d, 1.0),
        # user 5: its last item was seen in train: dropped.
        (5, 4, 0, 1.0),
        (5, 4, d, 1.0),
    ]
    train, test = reference(rows, "last_n", n=1)
    assert test == [(1, 5, 2 * d, 1.0), (2, 4, d, 2.0), (2, 4, d, 3.0)]
    assert (3, 4, d, 1.0) in train
    assert len(train) + len(test) == len(rows) - 2  # the cold item and the seen one


@pytest.mark.parametrize("method", split.METHODS)
def test_hand_written_queries_equal_fm_split(method: str) -> None:
    fm = pytest.importorskip("frame_metrics")
    if not hasattr(fm, "split"):
        pytest.skip("fm.split is not in this checkout yet")
    for seed in SEEDS:
        frame = small_frame(seed)
        want = split.hand_split(frame, method, **KWARGS[method])
        got = split.fm_frames(fm.split(frame, method, time="time", **KWARGS[method]), method)
        for ours, theirs in zip(got, want, strict=True):
            assert as_rows(ours) == as_rows(theirs), (method, seed)


# --------------------------------------------------------------------------------------
# Data, fingerprints, jobs, tables
# --------------------------------------------------------------------------------------


def test_make_arrays_is_deterministic_with_ties_and_repeats() -> None:
    a, b = split.make_arrays(20_000, 200, seed=1), split.make_arrays(20_000, 200, seed=1)
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["item"], split.make_arrays(20_000, 200, seed=2)["item"])
    frame = pl.DataFrame(a)
    assert frame.height == 20_000
    assert frame["user"].n_unique() == 200  # every user has a row
    assert frame["time"].is_sorted()  # a log, in time order
    repeated = frame.height - frame.select("user", "item", "time").unique().height
    tied = frame.height - frame.select("user", "time").unique().height
    assert 0 < repeated < tied < 0.1 * frame.height
    # Ties at the cut: users whose last two events share their time.
    last_two = frame.sort("user", "time").group_by("user").agg(pl.col("time").tail(2))
    assert last_two.filter(pl.col("time").list.n_unique() == 1).height > 0


def test_fingerprints_ignore_row_order_and_see_every_row() -> None:
    frame = small_frame(0)
    pandas_frame = frame.sample(fraction=1.0, shuffle=True, seed=1).to_pandas()
    assert split.fingerprint(frame) == split.fingerprint(pandas_frame)
    assert split.fingerprint(frame) != split.fingerprint(frame.head(-1))
    folded = frame.with_columns(pl.lit(1).alias("fold"))
    assert split.fingerprint(folded) != split.fingerprint(frame)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("split") / "data"
    info = split.make_data(out, {"rows": 30_000, "users": 300, "seed": 4})
    assert info["rows"] == 30_000
    assert info["events"] < info["rows"]
    return out


@pytest.mark.parametrize("method", split.METHODS)
def test_hand_written_jobs_agree_eager_and_lazy(data_dir: Path, method: str) -> None:
    params = {"rows": 30_000, "users": 300, "seed": 4}
    eager, lazy = (
        harness.worker(split.SUITE, split.hand_name(method, lazy), data_dir, params, extras=True)
        for lazy in (False, True)
    )
    assert eager["values"] == lazy["values"]
    assert eager["extras"] == lazy["extras"]
    assert eager["values"]["test_rows"] > 0


def test_python_for_and_peer_venvs_set_the_peers_pythons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for peer in split.PEER_PYTHON.values():
        monkeypatch.delenv(peer, raising=False)
    python = tmp_path / "replay" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    args = split.parse_args(
        ["--peer-venvs", str(tmp_path), "--python-for", "lenskit=/x/python,rectools=/y/python"]
    )
    assert split.peer_pythons(args) == {
        "replay": str(python),
        "lenskit": "/x/python",
        "rectools": "/y/python",
    }
    assert split.JOBS["replay-pandas-last_n"].python == str(python)
    assert split.JOBS["lenskit-user_kfold"].python == "/x/python"
    assert split.JOBS["recommenders-ratio"].python == sys.executable
    with pytest.raises(SystemExit, match="NAME=PATH"):
        split.peer_pythons(split.parse_args(["--python-for", "sklearn=/z"]))


def test_plan_runs_peers_only_up_to_their_size() -> None:
    def jobs(*argv: str) -> list[str]:
        (stage,) = split.plan(split.parse_args(list(argv)))
        return stage.jobs

    small = jobs("--users", "1000")
    assert "fm-last_n" in small
    assert "polars-time_windows-lazy" in small
    assert "lenskit-user_kfold" in small
    assert not any("spark" in j or "dask" in j for j in small)
    big = jobs("--users", "1000000")
    assert "lenskit-user_kfold" not in big
    assert "fm-random-lazy" in big
    assert jobs("--users", "1000000", "--only", "lenskit-user_kfold") == ["lenskit-user_kfold"]
    assert set(jobs("--users", "1000", "--methods", "time", "--distributed")) == {
        "polars-time",
        "polars-time-lazy",
        "fm-time",
        "fm-time-lazy",
        "replay-polars-time",
        "replay-pandas-time",
        "fm-time-spark",
        "fm-time-dask",
        "spark-plumbing",
        "dask-plumbing",
    }


def test_tables_compare_with_the_hand_written_query() -> None:
    values = {"train_rows": 9.0, "test_rows": 1.0, "train_sum": 5.0, "test_sum": 3.0}

    def result(job: str, t: float, **changed: float) -> harness.Result:
        return harness.Result(
            job,
            1000,
            times=[t],
            cpu=[t],
            other_cores=[0.0],
            peaks=[100.0],
            values={k: values[k] for k in ("train_rows", "test_rows")},
            extras={**{k: values[k] for k in ("train_sum", "test_sum")}, **changed},
        )

    results = [
        result("polars-last_n", 2.0),
        result("polars-last_n-lazy", 1.0),
        result("fm-last_n", 1.0),
        result("fm-last_n-lazy", 0.5, test_sum=4.0),
        result("rectools-last_n", 8.0, test_rows=2.0),
    ]
    agreement = split.agreement_table(results)
    verdicts = {row[1]: row[-1] for row in agreement[1:]}
    assert verdicts == {
        "polars-last_n": "identical (rows and fingerprints)",
        "polars-last_n-lazy": "identical (rows and fingerprints)",
        "fm-last_n": "identical (rows and fingerprints)",
        "fm-last_n-lazy": "MISMATCH: test_sum",
        "rectools-last_n": "differs, as expected (notes below)",
    }
    assert harness.mismatches(agreement) == 1
    assert split.notes_table(results)[1] == ["rectools-last_n", split.NOTES["rectools-last_n"]]
    summary = {row[1]: row[5:] for row in split.summary_table(results)[1:]}
    assert summary["fm-last_n"] == ["0.50x", "polars-last_n"]
    assert summary["fm-last_n-lazy"] == ["0.50x", "polars-last_n-lazy"]
    assert summary["rectools-last_n"] == ["4.00x", "polars-last_n"]
    json.dumps(split.environments_table(results))  # plain strings
