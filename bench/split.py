"""Benchmark of the evaluation-protocol splits (``fm.split``, spec section 10) against peers.

Run ``python bench/split.py --users 100000`` (10M interactions; see ``--help`` and
``bench/README.md``); the default is 1M users and 100M interactions.

The data is synthetic and deterministic (seeded numpy, generated once per size in a
subprocess and cached as parquet with several row groups): ``user`` and ``item``
(Int64), ``time`` (Datetime, microseconds, one-second steps over 180 days) and
``rating`` (Float32, 0.5..5), in time order as a log is written. Every user has at
least one row, activity is skewed (log-normal), items follow a Zipf-like popularity,
each user is active in a window of its own (so a global cut leaves cold users), about
5% of rows repeat the previous row's time of the same user (ties at the cut) and about
0.1% repeat its (item, time) too (a repeated event).

Every job runs on the harness (``harness.py``) in fresh processes that read the start
frames untimed (``pl.read_parquet``, or ``pd.read_parquet`` for the pandas peers) and
time the first call, from the start frames to train and test as frames in memory. The
lazy jobs start from ``pl.scan_parquet`` (the timed call includes the read) and collect
train and test together (``pl.collect_all``); Spark and Dask read the parquet inside the
timed call too. For every method of the sheet:

- ``fm-<method>`` / ``fm-<method>-lazy``: ``fm.split`` on eager / scanned frames;
- ``polars-<method>`` / ``polars-<method>-lazy``: the same split written by hand in
  polars (:func:`hand_split`: window functions, group-bys and joins, the tie rule, the
  dedup of repeated events, ``min_train=1`` and the three test filters), the baseline
  of each method's ratios;
- the peers where they have the method: RePlay (polars and pandas), RecTools,
  Microsoft Recommenders, LensKit, each in its own virtual environment (``--python-for
  replay=/path/to/python`` or ``--peer-venvs DIR``), only up to ``--peers-max-rows``;
- with ``--distributed``: ``fm.split`` on Spark ``local[2]`` and on a 2-worker Dask
  cluster, and the engines' own floors (``spark-plumbing``, ``dask-plumbing``).

The multi-fold methods time every fold's test rows (``folds.test``) plus the last
fold's train. Untimed, every job's train and test are fingerprinted (rows, and a sum
of a 64-bit mix of (user, item, time[, fold]) per row): frame_metrics and the
hand-written queries must give the same rows; the peers' differences are documented.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/split.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import Check, Job, Prepared, Result, Stage, Values  # noqa: E402

# This directory holds a `distributed.py`, the name of dask's `distributed` package that
# `dask.distributed` imports: it goes last on sys.path (as in distributed.py).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

# --------------------------------------------------------------------------------------
# The methods of the sheet, as timed
# --------------------------------------------------------------------------------------

N_LAST = 1
TEST_SHARE = 0.2
N_FOLDS = 5
N_WINDOWS = 3
WINDOW = dt.timedelta(days=7)
SEED = 0
MIN_TRAIN = 1
#: The fold whose train the multi-fold jobs time (besides every fold's test rows).
LAST = -1

#: ``fm.split``'s arguments per method (the filters at their defaults: all three "drop").
CALLS: dict[str, dict[str, Any]] = {
    "last_n": {"n": N_LAST},
    "ratio": {"test_share": TEST_SHARE},
    "time": {"test_share": TEST_SHARE},
    "random": {"test_share": TEST_SHARE, "seed": SEED},
    "user_kfold": {"n_folds": N_FOLDS, "n": N_LAST, "seed": SEED},
    "time_windows": {"n_folds": N_WINDOWS, "window": WINDOW},
}
METHODS = tuple(CALLS)
MULTI_FOLD = ("user_kfold", "time_windows")
COLUMNS = ("user", "item", "time", "rating")

# --------------------------------------------------------------------------------------
# Data and start frames
# --------------------------------------------------------------------------------------

#: Rows per parquet row group (100M rows: 96 groups; 10M rows: 10).
ROW_GROUP = 1 << 20
START = np.datetime64("2025-01-01T00:00:00", "us")
SPAN_DAYS = 180
#: Mean length of a user's active period (exponential, cut at the span's end).
ACTIVE_DAYS = 60.0
#: Share of rows (not a user's first) that take the previous row's time: ties.
TIE_SHARE = 0.05
#: Share of rows (not a user's first) that repeat the previous row's item and time.
REPEAT_SHARE = 0.001


def make_arrays(
    n_rows: int, n_users: int, seed: int = 0, *, n_items: int | None = None
) -> dict[str, np.ndarray]:
    """The interactions as numpy columns (``COLUMNS``), deterministic in the arguments.

    Every user has at least one row; the others are dealt by a log-normal activity.
    Items follow the Zipf-like popularity of ``generate.py`` over ``n_items`` (default
    one per 5 users, at least 1 000). A user is active from a uniform start over
    ``SPAN_DAYS`` for an exponential length (mean ``ACTIVE_DAYS``); its rows are uniform
    in that period, in whole seconds. Then ``TIE_SHARE`` of the rows take the previous
    row's time of the same user and ``REPEAT_SHARE`` its item and time (the same event
    twice, ratings apart). The rows come in time order, as a log is written.
    """
    from generate import _draw, _popularity_cdf

    if not 1 <= n_users <= n_rows:
        raise ValueError(f"expected 1 <= users <= rows, got {n_users} users, {n_rows} rows")
    rng = np.random.default_rng(seed)
    n_items = n_items or max(1_000, n_users // 5)
    weights = rng.lognormal(0.0, 1.2, n_users)
    counts = 1 + rng.multinomial(n_rows - n_users, weights / weights.sum())
    user = np.repeat(np.arange(n_users, dtype=np.int64), counts)
    span = SPAN_DAYS * 86_400
    start = rng.integers(0, span, n_users)
    length = np.minimum(span - start, rng.exponential(ACTIVE_DAYS * 86_400, n_users) + 1)
    seconds = start[user] + (rng.random(n_rows) * length[user]).astype(np.int64)
    item_ids = rng.permutation(n_items).astype(np.int64)
    item = item_ids[_draw(rng, _popularity_cdf(n_items, 1.0, 10.0), n_rows)]
    order = np.lexsort((seconds, user))  # by user, then time
    seconds, item = seconds[order], item[order]
    first = np.zeros(n_rows, dtype=bool)
    first[np.cumsum(counts) - counts] = True
    tied = np.flatnonzero((rng.random(n_rows) < TIE_SHARE) & ~first)
    seconds[tied] = seconds[tied - 1]
    repeated = np.flatnonzero((rng.random(n_rows) < REPEAT_SHARE) & ~first)
    seconds[repeated], item[repeated] = seconds[repeated - 1], item[repeated - 1]
    rating = (rng.integers(1, 11, n_rows) / 2).astype(np.float32)
    log_order = np.argsort(seconds, kind="stable")
    return {
        "user": user[log_order],
        "item": item[log_order],
        "time": START + seconds[log_order].astype("timedelta64[s]"),
        "rating": rating,
    }


def make_frame(n_rows: int, n_users: int, seed: int = 0, **kwargs: Any) -> Any:
    """:func:`make_arrays` as a polars DataFrame.

    >>> make_frame(50, 5).schema
    Schema([('user', Int64), ('item', Int64), ('time', Datetime(time_unit='us', time_zone=None)), ('rating', Float32)])
    """
    import polars as pl

    return pl.DataFrame(make_arrays(n_rows, n_users, seed, **kwargs))


def make_data(data_dir: Path, params: harness.Params) -> dict[str, Any]:
    """``interactions.parquet`` of ``params`` (rows, users, seed), in row groups."""
    frame = make_frame(params["rows"], params["users"], params["seed"])
    data_dir.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(data_dir / "interactions.parquet", row_group_size=ROW_GROUP)
    events = frame.select("user", "item", "time").unique().height
    return {
        "rows": frame.height,
        "events": events,
        "items": frame["item"].n_unique(),
        "row_groups": -(-frame.height // ROW_GROUP),
    }


@dataclass
class Inputs:
    """A job's start frames: a polars DataFrame or LazyFrame, a pandas frame, or the path
    (Spark and Dask read it in the timed call)."""

    kind: str
    frame: Any
    path: str
    params: harness.Params


#: ``pl.read_parquet``, ``pl.scan_parquet``, ``pd.read_parquet`` (numpy dtypes), the path.
KINDS = ("polars", "polars-scan", "pandas", "path")


def load(data_dir: Path, kind: str, params: harness.Params) -> Inputs:
    """The start frames of ``kind`` (one of :data:`KINDS`), read as users read them."""
    path = data_dir / "interactions.parquet"
    if kind == "pandas":
        import pandas as pd

        return Inputs(kind, pd.read_parquet(path), str(path), params)
    if kind in ("polars", "polars-scan"):
        import polars as pl

        frame = pl.scan_parquet(path) if kind == "polars-scan" else pl.read_parquet(path)
        return Inputs(kind, frame, str(path), params)
    if kind == "path":
        return Inputs(kind, None, str(path), params)
    raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")


# --------------------------------------------------------------------------------------
# Fingerprints of the outputs (untimed, the same in every environment)
# --------------------------------------------------------------------------------------

_M1, _M2, _GOLDEN = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64's finalizer on a Python int (mod 2**64); of the golden gamma, the first
    output of splitmix64 seeded with 0.

    >>> hex(mix64(0x9E3779B97F4A7C15))
    '0xe220a8397b1dcdaf'
    """
    x &= _MASK
    x = ((x ^ (x >> 30)) * _M1) & _MASK
    x = ((x ^ (x >> 27)) * _M2) & _MASK
    return x ^ (x >> 31)


def _mix_np(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on a uint64 array (wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_M2)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def row_keys(user: Any, item: Any, time_us: Any, fold: Any = None) -> np.ndarray:
    """A 64-bit mix of (user, item, time in microseconds[, fold]) per row."""
    h = np.full(len(user), _GOLDEN, dtype=np.uint64)
    parts = [user, item, time_us] + ([] if fold is None else [fold])
    for part in parts:
        h = _mix_np(h ^ np.asarray(part).astype(np.int64).view(np.uint64))
    return h


def frame_columns(frame: Any) -> tuple[np.ndarray, ...]:
    """``(user, item, time in microseconds[, fold])`` of a polars or pandas frame (or of
    LensKit's ``user_id``/``item_id``/``timestamp``) as numpy arrays."""
    names = frame.columns
    user, item = ("user", "item") if "user" in names else ("user_id", "item_id")
    time = "time" if "time" in names else "timestamp"
    if hasattr(frame, "to_pandas"):  # polars
        import polars as pl

        cols = [frame[user].to_numpy(), frame[item].to_numpy()]
        cols.append(frame[time].cast(pl.Datetime("us")).to_physical().to_numpy())
    else:
        cols = [frame[user].to_numpy(), frame[item].to_numpy()]
        cols.append(frame[time].to_numpy().astype("datetime64[us]").astype(np.int64))
    if "fold" in names:
        cols.append(np.asarray(frame["fold"].to_numpy()).astype(np.int64))
    return tuple(cols)


def fingerprint(frame: Any) -> tuple[float, float]:
    """``(rows, sum of the row keys mod 2**52)``: equal for the same multiset of rows."""
    cols = frame_columns(frame)
    total = int(row_keys(*cols).sum(dtype=np.uint64)) if len(cols[0]) else 0
    return float(len(cols[0])), float(total & ((1 << 52) - 1))


def split_values(train: Any, test: Any) -> Values:
    """The fingerprints of a split's train and test (the test's fold, if any, included)."""
    (train_rows, train_sum), (test_rows, test_sum) = fingerprint(train), fingerprint(test)
    return {
        "train_rows": train_rows,
        "test_rows": test_rows,
        "train_sum": train_sum,
        "test_sum": test_sum,
    }


# --------------------------------------------------------------------------------------
# The hand-written polars queries: the same split as fm.split, as a user would write it
# --------------------------------------------------------------------------------------


def with_seeded_hash(frame: Any, seed: int, keys: Sequence[str], name: str = "_h") -> Any:
    """``frame`` with ``name``: the sheet's seeded 64-bit hash of integer-like columns,
    a splitmix64 chain: ``h = mix(seed)``, then ``h = mix(h xor key)`` per key, ``mix``
    being splitmix64's step (add the golden gamma, then its finalizer) and a key its
    integer (a datetime: microseconds since the epoch) as unsigned 64 bits.

    Not ``Expr.hash``, whose values may change between polars releases. One step per
    ``with_columns``: written as one nested expression, each step repeats the ones
    before it (17 s instead of 0.3 s on 10M rows).
    """
    import polars as pl

    u64, h = pl.UInt64, pl.col(name)
    schema = frame.collect_schema()
    frame = frame.with_columns(pl.lit(mix64(seed + _GOLDEN), u64).alias(name))
    for key in keys:
        if isinstance(schema[key], pl.Datetime):
            word = pl.col(key).dt.epoch("us")
        else:
            word = pl.col(key).cast(pl.Int64)
        frame = frame.with_columns(((h ^ word.reinterpret(signed=False)) + _GOLDEN).alias(name))
        for shift, factor in ((30, _M1), (27, _M2)):
            step = (h ^ (h // pl.lit(1 << shift, u64))) * pl.lit(factor, u64)
            frame = frame.with_columns(step.alias(name))
        frame = frame.with_columns((h ^ (h // pl.lit(1 << 31, u64))).alias(name))
    return frame


def python_hash(seed: int, *keys: int) -> int:
    """:func:`with_seeded_hash` of one row, in Python.

    >>> import polars as pl
    >>> frame = pl.DataFrame({"user": [3, -1], "item": [7, 2]})
    >>> with_seeded_hash(frame, 5, ["user", "item"])["_h"].to_list() == [
    ...     python_hash(5, 3, 7), python_hash(5, -1, 2)]
    True

    frame_metrics' pinned values (``frame_metrics.splits.seeded_hash``):

    >>> python_hash(0, 1, 10), python_hash(0, 2, 10)
    (5075022953786957343, 4544264740642119646)
    """
    h = mix64(seed + _GOLDEN)
    for key in keys:
        h = mix64((h ^ (key & _MASK)) + _GOLDEN)
    return h


def _filter_test(train: Any, test: Any, user: str, item: str) -> Any:
    """Test rows whose user and item have train rows and whose (user, item) has none."""
    return (
        test.join(train.select(user).unique(), on=user, how="semi")
        .join(train.select(item).unique(), on=item, how="semi")
        .join(train.select(user, item), on=[user, item], how="anti")
    )


def _per_user_test(x: Any, n_test: Any, user: str, item: str, time: str) -> Any:
    """``x`` with ``_test``: the user's last ``n_test`` events by (time, item), repeated
    (user, item, time) rows one event, capped so that ``MIN_TRAIN`` events stay in train.

    ``n_test`` may read ``_n``, the user's number of events.
    """
    import polars as pl

    pos = pl.struct(time, item).rank("dense", descending=True).over(user)  # 1: the last
    x = x.with_columns(pos.alias("_pos")).with_columns(pl.col("_pos").max().over(user).alias("_n"))
    cap = pl.min_horizontal(n_test, pl.col("_n") - MIN_TRAIN)
    return shared(x.with_columns((pl.col("_pos") <= cap).alias("_test")))


def shared(frame: Any) -> Any:
    """A LazyFrame that several branches read, computed once (``cache()``): polars'
    common-subplan elimination shares only identical branches, so the rank under train
    (``~_test``) and test (``_test``) would be computed twice. A DataFrame as it is."""
    import polars as pl

    return frame.cache() if isinstance(frame, pl.LazyFrame) else frame


def _round_half_up(x: Any) -> Any:
    """floor(x + 0.5) as an Int64 expression."""
    import polars as pl

    return (x + 0.5).floor().cast(pl.Int64)


def hand_split(
    frame: Any,
    method: str,
    *,
    user: str = "user",
    item: str = "item",
    time: str = "time",
    n: int = N_LAST,
    test_share: float = TEST_SHARE,
    n_folds: int | None = None,
    window: dt.timedelta = WINDOW,
    seed: int = SEED,
) -> tuple[Any, Any]:
    """``method``'s split of a polars DataFrame (eager steps) or LazyFrame, by hand.

    Returns ``(train, test)`` of the input's kind with its columns; for the multi-fold
    methods, the last fold's train and every fold's test rows with an Int32 ``fold``.
    """
    import polars as pl

    cols = frame.collect_schema().names()
    if method in ("last_n", "ratio"):
        if method == "last_n":
            n_test: Any = pl.lit(n)
        else:
            n_test = _round_half_up(test_share * pl.col("_n"))
        x = _per_user_test(frame, n_test, user, item, time)
        train = x.filter(~pl.col("_test")).select(cols)
        test = x.filter(pl.col("_test")).select(cols)
        return train, _filter_test(train, test, user, item)
    if method == "time":
        # The cut: the time at 0-based position floor((1 - s) * n) of the n events' times
        # (a scalar in the frame's context: a cross join with a one-row frame of it makes
        # polars 2.1's optimizer panic once the branches share a cache).
        events = pl.struct(user, item, time).unique().struct.field(time)
        at = (events.len() * (1 - test_share)).floor().cast(pl.Int64)
        x = shared(frame.with_columns(events.sort().get(at).alias("_cut")))
        train = x.filter(pl.col(time) < pl.col("_cut")).select(cols)
        test = x.filter(pl.col(time) >= pl.col("_cut")).select(cols)
        return train, _filter_test(train, test, user, item)
    if method == "random":
        # round_half_up(s * n) events with the smallest hash (a repeated row has its
        # event's hash): every row up to the k-th smallest distinct hash.
        x = with_seeded_hash(frame, seed, [user, item, time])
        hashes = pl.col("_h").unique().sort()
        k = _round_half_up(test_share * hashes.len())
        x = shared(x.with_columns(pl.when(k > 0).then(hashes.get(k - 1)).alias("_cut")))
        is_test = (pl.col("_h") <= pl.col("_cut")).fill_null(False)
        train = x.filter(~is_test).select(cols)
        test = x.filter(is_test).select(cols)
        return train, _filter_test(train, test, user, item)
    if method == "user_kfold":
        k_folds = n_folds or N_FOLDS
        # Users dealt into folds in the order of their seeded hash (ties by key).
        users = (
            with_seeded_hash(frame.select(user).unique(), seed, [user])
            .sort("_h", user)
            .with_columns((pl.int_range(pl.len()) % k_folds).cast(pl.Int32).alias("fold"))
            .select(user, "fold")
        )
        x = _per_user_test(frame.join(users, on=user), pl.lit(n), user, item, time)
        held = x.filter(pl.col("_test"))
        # In fold f, a held-out row's user trains on its other rows (every other user on
        # all of theirs): an item is cold in f when every row of it is held out in f.
        items = x.group_by(item).agg(pl.len().alias("_rows"))
        cold = (
            held.group_by(item, "fold")
            .agg(pl.len().alias("_held"))
            .join(items, on=item)
            .filter(pl.col("_held") == pl.col("_rows"))
            .select(item, "fold")
        )
        own_train = x.filter(~pl.col("_test"))
        test = (
            held.join(own_train.select(user).unique(), on=user, how="semi")
            .join(cold, on=[item, "fold"], how="anti")
            .join(own_train.select(user, item), on=[user, item], how="anti")
            .select(*cols, "fold")
        )
        last = k_folds - 1
        train = x.filter(~(pl.col("_test") & (pl.col("fold") == last))).select(cols)
        return train, test
    if method == "time_windows":
        k_windows = n_folds or N_WINDOWS
        w_us = int(window / dt.timedelta(microseconds=1))
        # Window f = (end - (K - f) w, end - (K - f - 1) w]: f = K - 1 - floor((end - t) / w).
        back = (pl.col(time).max() - pl.col(time)).dt.total_microseconds() // w_us
        frame = shared(frame)
        x = frame.with_columns((k_windows - 1 - back).cast(pl.Int32).alias("fold"))
        end = pl.col(time).max()
        left = end - pl.duration(microseconds=(k_windows - pl.col("fold")) * w_us)
        x = x.with_columns(left.alias("_left"))
        test = x.filter(pl.col("fold") >= 0)
        # A fold's train is every row at or before its left edge: the user, the item and
        # the (user, item) are in it when their first row is.
        firsts = [
            frame.group_by(user).agg(pl.col(time).min().alias("_u0")),
            frame.group_by(item).agg(pl.col(time).min().alias("_i0")),
        ]
        pairs = frame.join(test.select(user, item).unique(), on=[user, item], how="semi")
        test = (
            test.join(firsts[0], on=user)
            .join(firsts[1], on=item)
            .join(pairs.group_by(user, item).agg(pl.col(time).min().alias("_ui0")), on=[user, item])
            .filter(
                pl.col("_u0") <= pl.col("_left"),
                pl.col("_i0") <= pl.col("_left"),
                pl.col("_ui0") > pl.col("_left"),
            )
            .select(*cols, "fold")
        )
        # The last fold's train: every row at or before its left edge, end - w.
        train = x.filter(pl.col(time) <= end - pl.duration(microseconds=w_us))
        return train.select(cols), test
    raise ValueError(f"method: expected one of {METHODS}, got {method!r}")


# --------------------------------------------------------------------------------------
# Jobs: frame_metrics, the hand-written queries
# --------------------------------------------------------------------------------------


def _kept(run: Callable[[], tuple[Any, Any]]) -> Prepared:
    """A job whose timed call returns (train, test) frames: their rows are its values,
    their fingerprints its untimed extras."""
    kept: list[Any] = []

    def timed() -> Values:
        train, test = run()
        kept[:] = [train, test]
        return {"train_rows": float(len(train)), "test_rows": float(len(test))}

    return Prepared(timed, extras=lambda: split_values(*kept))


def fm_frames(out: Any, method: str) -> tuple[Any, Any]:
    """A Split's ``(train, test)``, or a Folds' last train and every fold's test rows."""
    if method in MULTI_FOLD:
        train, _ = out[len(out) - 1]
        return train, out.test
    train, test = out
    return train, test


def prepare_fm(inputs: Inputs, method: str) -> Prepared:
    """``fm.split`` on the start frames; a LazyFrame's train and test collected together."""
    import polars as pl

    import frame_metrics

    fm_any: Any = frame_metrics  # fm.split is new: not in every checkout

    def run() -> tuple[Any, Any]:
        out = fm_any.split(inputs.frame, method, time="time", **CALLS[method])
        train, test = fm_frames(out, method)
        if isinstance(train, pl.LazyFrame):
            train, test = pl.collect_all([train, test])
        return train, test

    return _kept(run)


def prepare_hand(inputs: Inputs, method: str) -> Prepared:
    """:func:`hand_split` on the start frames; lazy: both collected together."""
    import polars as pl

    kwargs = {k: v for k, v in CALLS[method].items() if k in ("n", "test_share", "window", "seed")}
    if method in MULTI_FOLD:
        kwargs["n_folds"] = CALLS[method]["n_folds"]

    def run() -> tuple[Any, Any]:
        train, test = hand_split(inputs.frame, method, **kwargs)
        if isinstance(train, pl.LazyFrame):
            train, test = pl.collect_all([train, test])
        return train, test

    return _kept(run)


# --------------------------------------------------------------------------------------
# Peers (each in its own environment: their pins conflict)
# --------------------------------------------------------------------------------------

#: Peer -> the environment variable naming its Python (``--python-for``, ``--peer-venvs``).
PEER_PYTHON = {
    "replay": "FM_BENCH_REPLAY_PYTHON",
    "rectools": "FM_BENCH_RECTOOLS_PYTHON",
    "recommenders": "FM_BENCH_RECOMMENDERS_PYTHON",
    "lenskit": "FM_BENCH_LENSKIT_PYTHON",  # the same variable as bench/beyond.py's
}
#: The distribution whose version each peer's job reports.
PEER_DIST = {
    "replay": "replay-rec",
    "rectools": "rectools",
    "recommenders": "recommenders",
    "lenskit": "lenskit",
}


def _versions(peer: str) -> dict[str, str]:
    """The peer's, pandas' and polars' versions in the job's environment, and its Python."""
    from importlib.metadata import PackageNotFoundError, version

    info = {"python": sys.executable}
    for name in (PEER_DIST[peer], "pandas", "polars", "numpy"):
        with contextlib.suppress(PackageNotFoundError):
            info[name] = version(name)
    return info


def prepare_replay(inputs: Inputs, method: str) -> Prepared:
    """RePlay's splitter of ``method`` on polars or pandas frames (its own columns named);
    KFolds: every fold's test (a ``fold`` column added) and the last fold's train."""
    import importlib

    rs: Any = importlib.import_module("replay.splitters")  # untyped

    names = {"query_column": "user", "item_column": "item"}
    drop = {"drop_cold_users": True, "drop_cold_items": True}
    timed = {**names, "timestamp_column": "time", **drop}
    frame = inputs.frame

    def make() -> Any:
        if method == "last_n":
            return rs.LastNSplitter(N=N_LAST, divide_column="user", **timed)
        if method == "ratio":
            return rs.RatioSplitter(test_size=TEST_SHARE, divide_column="user", **timed)
        if method == "time":
            return rs.TimeSplitter(time_threshold=TEST_SHARE, **timed)
        if method == "random":
            return rs.RandomSplitter(test_size=TEST_SHARE, seed=SEED, **names, **drop)
        if method == "user_kfold":
            return rs.KFolds(n_folds=N_FOLDS, seed=SEED, **timed)
        raise ValueError(f"RePlay has no splitter for {method!r} here")

    def run() -> tuple[Any, Any]:
        splitter = make()
        if method != "user_kfold":
            train, test = splitter.split(frame)
            return train, test
        tests: list[Any] = []
        trains: list[Any] = []
        for fold, (train, test) in enumerate(splitter.split(frame)):
            tests.append(_with_fold(test, fold))
            trains[:] = [train]  # the last fold's
        return trains[0], _concat(tests)

    prepared = _kept(run)
    prepared.info = _versions("replay")
    return prepared


def _with_fold(frame: Any, fold: int) -> Any:
    """``frame`` with a constant ``fold`` column (polars or pandas)."""
    if hasattr(frame, "to_pandas"):
        import polars as pl

        return frame.with_columns(pl.lit(fold, pl.Int32).alias("fold"))
    return frame.assign(fold=np.int32(fold))


def _concat(frames: list[Any]) -> Any:
    if hasattr(frames[0], "to_pandas"):
        import polars as pl

        return pl.concat(frames)
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def prepare_rectools(inputs: Inputs, method: str) -> Prepared:
    """RecTools' splitter (its default filters: cold users, cold items, already seen) on
    ``Interactions`` of the renamed frame; train and test taken from the start frame by
    the row numbers it yields. TimeRangeSplitter: every fold's test and the last train."""
    from rectools import Columns
    from rectools.dataset import Interactions
    from rectools.model_selection import LastNSplitter, RandomSplitter, TimeRangeSplitter

    frame = inputs.frame
    rename = {"user": Columns.User, "item": Columns.Item, "rating": Columns.Weight}
    rename["time"] = Columns.Datetime

    def make() -> Any:
        if method == "last_n":
            return LastNSplitter(n=N_LAST)
        if method == "random":
            return RandomSplitter(test_fold_frac=TEST_SHARE, random_state=SEED)
        if method == "time_windows":
            return TimeRangeSplitter(test_size=f"{WINDOW.days}D", n_splits=N_WINDOWS)
        raise ValueError(f"RecTools has no splitter for {method!r} here")

    def run() -> tuple[Any, Any]:
        interactions = Interactions(frame.rename(columns=rename))
        folds = list(make().split(interactions))
        tests = [
            _with_fold(frame.iloc[test_idx], fold) if len(folds) > 1 else frame.iloc[test_idx]
            for fold, (_, test_idx, _) in enumerate(folds)
        ]
        test = _concat(tests) if len(tests) > 1 else tests[0]
        return frame.iloc[folds[LAST][0]], test

    prepared = _kept(run)
    prepared.info = _versions("rectools")
    return prepared


def prepare_recommenders(inputs: Inputs, method: str) -> Prepared:
    """Microsoft Recommenders' ``python_chrono_split`` (ratio: train share 0.8 per user,
    by time) or ``python_random_split`` (random) on the pandas frame."""
    from recommenders.datasets import python_splitters as ps

    frame = inputs.frame

    def run() -> tuple[Any, Any]:
        if method == "ratio":
            cols = {"col_user": "user", "col_item": "item", "col_timestamp": "time"}
            train, test = ps.python_chrono_split(frame, ratio=1 - TEST_SHARE, **cols)
        elif method == "random":
            train, test = ps.python_random_split(frame, ratio=1 - TEST_SHARE, seed=SEED)
        else:
            raise ValueError(f"Recommenders has no splitter for {method!r} here")
        return train, test

    prepared = _kept(run)
    prepared.info = _versions("recommenders")
    return prepared


def prepare_lenskit(inputs: Inputs, method: str) -> Prepared:
    """LensKit's ``crossfold_users(data, 5, LastN(1))`` on a Dataset built from the pandas
    frame (repeats allowed: ``from_interactions_df`` refuses a repeated (user, item));
    every fold's test (``test_df``, a ``fold`` column added) and the last fold's train."""
    from lenskit.data import DatasetBuilder
    from lenskit.splitting import LastN, crossfold_users

    if method != "user_kfold":
        raise ValueError(f"LensKit's job here is user_kfold, not {method!r}")
    frame = inputs.frame
    rename = {"user": "user_id", "item": "item_id", "time": "timestamp"}

    def run() -> tuple[Any, Any]:
        builder = DatasetBuilder()
        builder.add_interactions(
            "interaction",
            frame.rename(columns=rename),
            entities=["user", "item"],
            missing="insert",
            allow_repeats=True,
            default=True,
        )
        data = builder.build()
        tests, train = [], None
        for fold, split in enumerate(crossfold_users(data, N_FOLDS, LastN(N_LAST), rng=SEED)):
            tests.append(split.test_df.assign(fold=np.int32(fold)))
            train = split.train
        assert train is not None
        return train.interactions().pandas(ids=True), _concat(tests)

    prepared = _kept(run)
    prepared.info = _versions("lenskit")
    return prepared


# --------------------------------------------------------------------------------------
# Spark and Dask: fm.split on their frames, and their own floors
# --------------------------------------------------------------------------------------


def prepare_fm_spark(inputs: Inputs, method: str) -> Prepared:
    """``fm.split`` on a Spark frame read in the timed call (``local[2]``); train and test
    materialised with Spark's ``noop`` writer, their rows counted."""
    import engines

    import frame_metrics

    fm_any: Any = frame_metrics  # fm.split is new: not in every checkout

    spark, inner = engines.timed_start(lambda: engines.spark_session(inputs.params["partitions"]))

    kept: list[Any] = []

    def run() -> Values:
        frame = spark.read.parquet(inputs.path)
        train, test = fm_frames(fm_any.split(frame, method, time="time", **CALLS[method]), method)
        for part in (train, test):
            part.write.format("noop").mode("overwrite").save()
        kept[:] = [train, test]
        return {}

    def counted() -> Values:  # untimed: Spark computes them again
        return {"train_rows": float(kept[0].count()), "test_rows": float(kept[1].count())}

    return Prepared(run, extras=counted, inner=inner, close=spark.stop)


def prepare_fm_dask(inputs: Inputs, method: str) -> Prepared:
    """``fm.split`` on a dask frame read in the timed call (a 2-worker ``LocalCluster``);
    train and test computed together, their partitions' rows counted."""
    import dask.dataframe
    import engines

    import frame_metrics

    fm_any: Any = frame_metrics  # fm.split is new: not in every checkout
    dd: Any = dask.dataframe  # untyped
    client, inner = engines.timed_start(engines.dask_client)

    def run() -> Values:
        frame = dd.read_parquet(inputs.path)
        train, test = fm_frames(fm_any.split(frame, method, time="time", **CALLS[method]), method)
        rows = dd.compute(train.map_partitions(len).sum(), test.map_partitions(len).sum())
        return {"train_rows": float(rows[0]), "test_rows": float(rows[1])}

    return Prepared(run, inner=inner, close=client.close)


def prepare_spark_plumbing(inputs: Inputs) -> Prepared:
    """Spark's own work under a per-user split: read, hash-partition by user, every row to
    Python and back (``mapInArrow``), counted (``engines.spark_hand_over``)."""
    import engines

    spark, inner = engines.timed_start(lambda: engines.spark_session(inputs.params["partitions"]))

    def run() -> Values:
        frame = spark.read.parquet(inputs.path)
        return {"rows": float(engines.spark_hand_over(frame, "user", keep_rows=True))}

    return Prepared(run, inner=inner, close=spark.stop)


def prepare_dask_plumbing(inputs: Inputs) -> Prepared:
    """Dask's own work under a per-user split: read, shuffle by user, hand every partition
    to Python, count (``engines.dask_hand_over``)."""
    import dask.dataframe as dd
    import engines

    client, inner = engines.timed_start(engines.dask_client)

    def run() -> Values:
        frame = dd.read_parquet(inputs.path)
        return {"rows": float(engines.dask_hand_over([frame], "user"))}

    return Prepared(run, inner=inner, close=client.close)


# --------------------------------------------------------------------------------------
# The job table
# --------------------------------------------------------------------------------------

FM, HAND = "frame_metrics", "polars (hand-written)"
#: Tags: the method of a job, and its group.
FM_TAG, HAND_TAG, PEER_TAG, DIST_TAG = "fm", "hand", "peer", "distributed"
SAME = tuple(Check(name, name) for name in ("train_rows", "test_rows", "train_sum", "test_sum"))


def hand_name(method: str, lazy: bool = False) -> str:
    return f"polars-{method}" + ("-lazy" if lazy else "")


LABEL_VALUES: dict[str, Any] = {"window": f"{WINDOW.days}d"}


def _eager_and_lazy(
    method: str, name: str, tool: str, eager: str, prepare: Callable[..., Prepared], tag: str
) -> list[Job]:
    """A method's job on ``pl.read_parquet`` frames (``eager``: its label) and on the
    scan (``name`` + ``-lazy``), each against the hand-written query of its kind."""
    tags = frozenset({method, tag})
    run = functools.partial(prepare, method=method)
    return [
        Job(name, tool, eager, run, "polars", hand_name(method), checks=SAME, tags=tags),
        Job(
            f"{name}-lazy",
            tool,
            f"{method}, pl.scan_parquet, pl.collect_all",
            run,
            "polars-scan",
            hand_name(method, lazy=True),
            checks=SAME,
            tags=tags,
        ),
    ]


def _fm_jobs(method: str) -> list[Job]:
    label = ", ".join(f"{k}={LABEL_VALUES.get(k, v)!r}" for k, v in CALLS[method].items())
    eager = f"{method} ({label}), pl.read_parquet frame"
    return _eager_and_lazy(method, f"fm-{method}", FM, eager, prepare_fm, FM_TAG)


def _hand_jobs(method: str) -> list[Job]:
    eager = f"{method}, eager DataFrame steps"
    return _eager_and_lazy(method, hand_name(method), HAND, eager, prepare_hand, HAND_TAG)


def differs(note: str) -> tuple[Check, ...]:
    """A peer's checks: its rows and fingerprints against the hand-written query's, an
    expected difference."""
    return tuple(Check(c.label, c.ref, note, matched=False) for c in SAME)


#: Where each peer's definition differs from the sheet's (spec section 10).
NOTES = {
    "replay-last_n": "ties by the sort's row order (polars: unstable sort); no min_train "
    "(a 1-row user is all test, then dropped as cold); no seen filter; repeated events "
    "counted as rows",
    "replay-ratio": "test = rows whose round(row/count, 3) > 0.8 (not round_half_up(0.2 n)); "
    "ties by row order; no min_train; no seen filter",
    "replay-time": "cut at row position int(0.8 n) of the time-sorted rows (polars: rows at "
    "the cut time before that position stay train); no seen filter",
    "replay-random": "a seeded row sample, not the sheet's hash; no seen filter",
    "replay-user_kfold": "KFolds deals each user's rows into the 5 folds (every user in "
    "every fold's test), not users into folds; no seen filter",
    "rectools-last_n": "ties by row order (rank method='first'); no min_train (a 1-row user "
    "is all test, then dropped as cold); repeated events counted as rows",
    "rectools-random": "round(0.2 n) rows of a seeded permutation, not the sheet's hash; "
    "repeated events may be split",
    "rectools-time_windows": "windows [start, end) closed on the left, ending at the last "
    "time ceiled to the day (the sheet: (left, right], ending at the largest time)",
    "recommenders-ratio": "train = rows with rank <= round(0.8 n) (numpy rounding, half to "
    "even); ties by row order; no filters; repeated events counted as rows",
    "recommenders-random": "a seeded row sample of the whole frame; no filters",
    "lenskit-user_kfold": "users dealt by a shuffled array_split; test per (user, item) pair "
    "of the collapsed matrix (last time), ties by an unstable argsort; no min_train (a "
    "1-pair user is all test); train drops every row of a test pair; no cold-item filter",
}

PEERS: dict[str, tuple[str, str, Callable[..., Prepared], str, list[str]]] = {
    # name prefix: (tool, label, prepare, kind, methods)
    "replay-polars": (
        "RePlay",
        "polars",
        prepare_replay,
        "polars",
        ["last_n", "ratio", "time", "random", "user_kfold"],
    ),
    "replay-pandas": (
        "RePlay",
        "pandas",
        prepare_replay,
        "pandas",
        ["last_n", "ratio", "time", "random", "user_kfold"],
    ),
    "rectools": (
        "RecTools",
        "pandas",
        prepare_rectools,
        "pandas",
        ["last_n", "random", "time_windows"],
    ),
    "recommenders": ("Recommenders", "pandas", prepare_recommenders, "pandas", ["ratio", "random"]),
    "lenskit": ("LensKit", "pandas", prepare_lenskit, "pandas", ["user_kfold"]),
}
PEER_LABELS = {
    ("replay", "last_n"): "LastNSplitter(N=1), cold users/items dropped",
    ("replay", "ratio"): "RatioSplitter(test_size=0.2), cold users/items dropped",
    ("replay", "time"): "TimeSplitter(time_threshold=0.2), cold users/items dropped",
    ("replay", "random"): "RandomSplitter(test_size=0.2, seed=0), cold users/items dropped",
    ("replay", "user_kfold"): "KFolds(n_folds=5, seed=0): 5 tests + last train",
    ("rectools", "last_n"): "LastNSplitter(n=1), its 3 filters",
    ("rectools", "random"): "RandomSplitter(test_fold_frac=0.2), its 3 filters",
    ("rectools", "time_windows"): "TimeRangeSplitter('7D', n_splits=3): 3 tests + last train",
    ("recommenders", "ratio"): "python_chrono_split(ratio=0.8)",
    ("recommenders", "random"): "python_random_split(ratio=0.8, seed=0)",
    ("lenskit", "user_kfold"): "crossfold_users(5, LastN(1)): 5 tests + last train",
}


def _peer_jobs() -> list[Job]:
    jobs = []
    for prefix, (tool, frames, prepare, kind, methods) in PEERS.items():
        peer = prefix.split("-")[0]
        for method in methods:
            name = f"{prefix}-{method}"
            jobs.append(
                Job(
                    name,
                    tool,
                    f"{PEER_LABELS[(peer, method)]} ({frames})",
                    functools.partial(prepare, method=method),
                    kind,
                    hand_name(method),
                    checks=differs(NOTES[f"{peer}-{method}"]),
                    tags=frozenset({method, PEER_TAG}),
                    python_env=PEER_PYTHON[peer],
                )
            )
    return jobs


def _distributed_jobs() -> list[Job]:
    jobs = []
    for method in METHODS:
        tags = frozenset({method, DIST_TAG})
        jobs.append(
            Job(
                f"fm-{method}-spark",
                FM,
                f"{method} on Spark local[2] (read, split, noop write)",
                functools.partial(prepare_fm_spark, method=method),
                "path",
                hand_name(method, lazy=True),
                tree=True,
                checks=SAME[:2],
                tags=tags,
            )
        )
        jobs.append(
            Job(
                f"fm-{method}-dask",
                FM,
                f"{method} on Dask, 2 workers (read, split, count)",
                functools.partial(prepare_fm_dask, method=method),
                "path",
                hand_name(method, lazy=True),
                tree=True,
                checks=SAME[:2],
                tags=tags,
            )
        )
    floor = frozenset({DIST_TAG})
    jobs.append(
        Job(
            "spark-plumbing",
            "pyspark",
            "Spark: read, hash-partition by user, rows to Python and back (no split)",
            prepare_spark_plumbing,
            "path",
            hand_name("last_n", lazy=True),
            tree=True,
            tags=floor,
        )
    )
    jobs.append(
        Job(
            "dask-plumbing",
            "dask",
            "Dask: read, shuffle by user, to Python (no split)",
            prepare_dask_plumbing,
            "path",
            hand_name("last_n", lazy=True),
            tree=True,
            tags=floor,
        )
    )
    return jobs


JOBS = harness.job_table(
    *[job for method in METHODS for job in (*_hand_jobs(method), *_fm_jobs(method))],
    *_peer_jobs(),
    *_distributed_jobs(),
)
BASELINE = hand_name("last_n")
#: Each peer job's note (:data:`NOTES` of its peer and method).
NOTES_BY_JOB = {name: job.checks[0].note for name, job in JOBS.items() if PEER_TAG in job.tags}
SUITE = harness.Suite(
    "Evaluation-protocol splits: fm.split, hand-written polars queries and peers.",
    Path(__file__).resolve(),
    JOBS,
    BASELINE,
    load,
    make_data,
    ("frame_metrics", "polars", "pandas", "numpy", "pyspark", "dask"),
)


# --------------------------------------------------------------------------------------
# Plan and tables
# --------------------------------------------------------------------------------------


def peer_pythons(args: argparse.Namespace) -> dict[str, str]:
    """The Python of each peer, from ``--peer-venvs`` and ``--python-for`` (which wins),
    exported as the peers' environment variables for their jobs' processes."""
    found: dict[str, str] = {}
    if args.peer_venvs:
        for peer in PEER_PYTHON:
            exe = Path(args.peer_venvs) / peer / "bin" / "python"
            if exe.exists():
                found[peer] = str(exe)
    for item in args.python_for:
        for pair in filter(None, item.split(",")):
            peer, sep, path = pair.partition("=")
            if not sep or peer not in PEER_PYTHON:
                raise SystemExit(
                    f"--python-for: expected NAME=PATH with NAME one of {sorted(PEER_PYTHON)}, "
                    f"got {pair!r}"
                )
            found[peer] = path
    for peer, python in found.items():
        os.environ[PEER_PYTHON[peer]] = python
    return found


def plan(args: argparse.Namespace) -> list[Stage]:
    """One data set (``--rows``, ``--users``): the hand-written queries and fm's jobs of
    every method of ``--methods``; the peers up to ``--peers-max-rows``; Spark and Dask
    with ``--distributed``. ``--only`` narrows it (naming a job runs it at any size)."""
    wanted = harness.wanted_jobs(SUITE, args.only)
    methods = set(args.methods.split(",")) if args.methods else set(METHODS)
    unknown = methods - set(METHODS)
    if unknown:
        raise SystemExit(f"--methods: unknown {sorted(unknown)}; known: {', '.join(METHODS)}")
    groups = [HAND_TAG, FM_TAG]
    if args.rows <= args.peers_max_rows:
        groups.append(PEER_TAG)
    if args.distributed:
        groups.append(DIST_TAG)
    names = []
    for name, job in JOBS.items():
        in_methods = not (job.tags & set(METHODS)) or bool(job.tags & methods)
        if wanted is not None:
            if name in wanted:
                names.append(name)
        elif in_methods and job.tags & set(groups):
            names.append(name)
    params = {"rows": args.rows, "users": args.users, "seed": args.seed}
    data = Path(f"r{args.rows}-u{args.users}-s{args.seed}")
    options = {"partitions": args.partitions}
    return [Stage(args.users, data, params, names, options=options)]


def _method(job: Job) -> str:
    return next((m for m in METHODS if m in job.tags), "")


def agreement_table(results: Sequence[Result]) -> list[list[str]]:
    """Each job's train and test rows against the hand-written lazy query of its method
    (the eager one where the lazy did not run). frame_metrics and the hand-written
    queries must be identical, fingerprints included (else ``MISMATCH``); a peer's
    difference is expected, its reason in :data:`NOTES`."""
    done = {r.job: r for r in results if r.side == harness.AFTER and not r.error}
    head = ["users", "job", "train rows", "test rows", "reference", "ref train", "ref test"]
    rows = [[*head, "verdict"]]
    for r in results:
        job = JOBS[r.job]
        method = _method(job)
        if r.side != harness.AFTER or r.error or not method:
            continue
        names = (hand_name(method, lazy=True), hand_name(method))
        ref_name = next((n for n in names if n in done and n != r.job), None)
        if ref_name is None:
            continue
        got, ref = r.all_values, done[ref_name].all_values
        cells = [f"{r.users:,}", r.job]
        cells += [f"{got.get(k, math.nan):,.0f}" for k in ("train_rows", "test_rows")]
        cells += [ref_name, *(f"{ref.get(k, math.nan):,.0f}" for k in ("train_rows", "test_rows"))]
        compared = [c.label for c in job.checks if c.label in got and c.ref in ref]
        differ = [c.label for c in job.checks if c.label in compared and got[c.label] != ref[c.ref]]
        if all(c.matched for c in job.checks):
            what = "rows and fingerprints" if "test_sum" in compared else "rows"
            verdict = f"MISMATCH: {', '.join(differ)}" if differ else f"identical ({what})"
        elif not differ:
            verdict = "the same rows (fingerprints equal) on this data"
        elif not {"train_rows", "test_rows"} & set(differ):
            verdict = "as many rows, not the same ones (notes below)"
        else:
            verdict = "differs, as expected (notes below)"
        rows.append([*cells, verdict])
    return rows


def notes_table(results: Sequence[Result]) -> list[list[str]]:
    """Where each peer job that ran defines its split otherwise than the sheet."""
    rows = [["job", "how its definition differs from spec section 10"]]
    for name in dict.fromkeys(r.job for r in results if r.job in NOTES_BY_JOB):
        rows.append([name, NOTES_BY_JOB[name]])
    return rows


def environments_table(results: Sequence[Result]) -> list[list[str]]:
    """The Python and package versions each peer's jobs reported."""
    rows = [["tool", "python", "versions"]]
    seen: set[str] = set()
    for r in results:
        job = JOBS[r.job]
        if PEER_TAG not in job.tags or job.tool in seen:
            continue
        seen.add(job.tool)
        if r.error:
            rows.append([job.tool, job.python, f"FAILED: {r.error[:160]}"])
            continue
        info = dict(r.info)
        python = info.pop("python", job.python)
        info.pop("fm_file", None)
        rows.append([job.tool, python, ", ".join(f"{k} {v}" for k, v in info.items())])
    return rows


def summary_table(results: Sequence[Result]) -> list[list[str]]:
    """Per method: every job's median seconds, peak MiB and ratio to the hand-written
    query of the same start frames (eager, or lazy for the lazy/Spark/Dask jobs)."""
    medians = harness.medians(results)
    rows = [["method", "job", "tool", "median s", "peak MiB", "ratio", "ratio to"]]
    for method in (*METHODS, ""):
        for r in results:
            job = JOBS[r.job]
            if r.side != harness.AFTER or _method(job) != method:
                continue
            if r.error:
                rows.append([method or "-", r.job, job.tool, "FAILED", "", "", r.error[:100]])
                continue
            base = medians.get((r.users, job.vs), float("nan"))
            ratio = r.median / base
            rows.append(
                [
                    method or "-",
                    r.job,
                    job.tool,
                    harness.fmt_s(r.median),
                    f"{r.peak_mib:,.0f}",
                    "-" if math.isnan(ratio) else f"{ratio:.2f}x",
                    job.vs,
                ]
            )
    return rows


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The per-method summary, the agreement of the rows, the peers' environments."""
    print(
        "\nPer method (ratio = median / the hand-written polars query's on the same start "
        "frames: eager for fm and the peers, lazy for fm lazy, Spark and Dask)"
    )
    print(harness.render(summary_table(results), args.markdown))
    agreement = agreement_table(results)
    print(
        "\nRows of every job against the hand-written query of its method (fm and the "
        "queries also their fingerprints: a sum of a 64-bit mix of (user, item, time"
        "[, fold]) per row, so the same rows and folds, not only as many)"
    )
    print(harness.render(agreement, args.markdown))
    notes = notes_table(results)
    if len(notes) > 1:
        print("\nThe peers' definitions")
        print(harness.render(notes, args.markdown))
    if any(PEER_TAG in JOBS[r.job].tags for r in results):
        print("\nPeers' environments (as their jobs reported them)")
        print(harness.render(environments_table(results), args.markdown))
    return harness.mismatches(agreement)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The harness's options and the split suite's own."""
    p = harness.parser(SUITE, users="1000000", repeats=3, timeout=900.0)
    p.set_defaults(data_dir=Path("/tmp/fmsplit"))
    p.add_argument(
        "--rows", type=int, default=0, help="interactions (default: 100 per user of --users)"
    )
    p.add_argument("--methods", default="", help=f"comma-separated, of {', '.join(METHODS)}")
    p.add_argument(
        "--peers-max-rows",
        type=int,
        default=10_000_000,
        help="run the peers only up to this many interactions (unless named in --only)",
    )
    p.add_argument(
        "--python-for",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help=f"the Python of a peer's environment, NAME one of {', '.join(PEER_PYTHON)} "
        "(repeatable or comma-separated)",
    )
    p.add_argument(
        "--peer-venvs",
        metavar="DIR",
        help="a directory of virtual environments named like the peers (DIR/replay/bin/python, ...)",
    )
    p.add_argument(
        "--distributed",
        action="store_true",
        help="also fm.split on Spark and Dask, and their floors",
    )
    p.add_argument("--partitions", type=int, default=16, help="Spark shuffle partitions")
    args = p.parse_args(argv)
    args.users = harness.parse_sizes(args.users)[0]
    args.rows = args.rows or 100 * args.users
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Plan, run every job in fresh processes, print the tables; 1 if fm's rows differ."""
    args = parse_args(argv)
    if not args.worker and not args.save_data:
        for peer, python in peer_pythons(args).items():
            print(f"{peer}: {python}")
    return harness.main(SUITE, args, plan, report)


if __name__ == "__main__":
    sys.exit(main())
