"""``fm.Accumulator`` (definition sheet section 11) against ``fm.evaluate`` on all the rows.

The expectation of every test is the one-shot ``evaluate(all rows, aggregate=True)``,
which the rest of the suite checks against the spec's arithmetic and the peers; the
claim here is that batching, the order of the updates, merging (in any tree),
pickling and the frame kind change no bit of it. Hypothesis draws the tables, the
batches and the merge trees.
"""

from __future__ import annotations

import multiprocessing
import pickle
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from polars.testing import assert_frame_equal

import frame_metrics as fm
from tests.conftest import Constructor, assert_kind, to_polars

ITEMS = 12
TRAIN = pl.DataFrame(
    {"user": [u % 9 for u in range(40)], "item": [(3 * u) % 14 for u in range(40)]}
).unique()
FEATURES = pl.DataFrame(
    {"item": range(14), "features": [[f"g{i % 3}", f"h{i % 4}"] for i in range(14)]}
)
GROUPS = pl.DataFrame({"item": range(14), "group": [f"p{i % 3}" for i in range(14)]})
CATALOG = pl.DataFrame({"item": range(14)})

#: One case per family (or way of reading the data): metrics and the tables they read.
CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "ranking": (
        [
            "ndcg@3",
            "ap@5",
            "recall@2",
            "precision@3",
            "f1@3",
            "hit_rate@2",
            "mrr@5",
            "rbp",
            "r_precision",
            "err@3",
        ],
        {"max_relevance": 3},
    ),
    "rating": (["rmse", "mae"], {}),
    "beyond": (
        ["novelty@3", "arp@3", "aplt@3", "diversity@3", "serendipity@3"],
        {"train": TRAIN, "item_features": FEATURES, "unexpected": "history"},
    ),
    "corpus": (["coverage@3", "gini@3", "personalization@3"], {"catalog": CATALOG}),
    "calibration": (["miscalibration@3"], {"train": TRAIN, "item_features": FEATURES}),
    "exposure": (
        ["exposure_gini@3", "exposure_parity@3", "list_parity@3"],
        {"item_groups": GROUPS, "catalog": CATALOG},
    ),
    "propensity": (["ndcg@3", "recall@3"], {"propensity": "p", "max_weight": 1.8}),
    "exclude": (["ndcg@3", "precision@2"], {"exclude": TRAIN}),
    # Tables over every user built from update rows. Only the finish reads the default
    # catalog of coverage and gini: each update's items are kept (O(items)).
    "default catalog": (["coverage@3", "gini@3", "ndcg@3"], {"train": TRAIN}),
    # A user's values read them: the rows are kept (RowsHeldWarning).
    "default g_max": (["err@3", "ndcg@3"], {}),
    "exposure default catalog": (["exposure_gini@3", "list_parity@3"], {"item_groups": GROUPS}),
    "merit": (
        ["exposure_parity@3"],
        {"item_groups": GROUPS, "catalog": CATALOG, "parity_target": "merit"},
    ),
    "truth without by": (["ndcg@3", "recall@2", "coverage@3"], {"catalog": CATALOG}),
}

#: The cases whose truth lacks the by column (it applies to every model's lists).
NO_BY = {"truth without by"}


def _truth(case: str, truth: pl.DataFrame) -> pl.DataFrame:
    """Truth as the case gives it: one copy per model, or one without the model column."""
    if case in NO_BY:
        return truth.filter(pl.col("model") == "a").drop("model")
    return truth


@st.composite
def _tables(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, list[list[int]]]:
    """Recs of two models, graded truth with propensities, and users cut into batches."""
    n = draw(st.integers(1, 9))
    recs, truth = [], []
    for user in range(n):
        for model in ("a", "b"):
            items = draw(st.lists(st.integers(0, ITEMS - 1), max_size=6, unique=True))
            recs += [
                (user, model, item, rank + 1, float(item % 5)) for rank, item in enumerate(items)
            ]
        liked = draw(st.lists(st.integers(0, ITEMS - 1), max_size=4, unique=True))
        for item in liked:
            relevance = draw(st.integers(0, 3))
            for model in ("a", "b"):
                truth.append((user, model, item, relevance, 0.25 + (item % 4) / 4))
    order = draw(st.permutations(list(range(n))))
    cuts = sorted(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=4, unique=True)))
    batches = [list(order[a:b]) for a, b in zip([0, *cuts], [*cuts, n], strict=True) if a < b]
    recs_frame = pl.DataFrame(
        recs,
        schema={"user": pl.Int64, "model": pl.String, "item": pl.Int64, "rank": pl.Int64,
                "prediction": pl.Float64},
        orient="row",
    )  # fmt: skip
    truth_frame = pl.DataFrame(
        truth,
        schema={"user": pl.Int64, "model": pl.String, "item": pl.Int64, "relevance": pl.Int64,
                "p": pl.Float64},
        orient="row",
    )  # fmt: skip
    return recs_frame, truth_frame, batches


def _of(frame: pl.DataFrame, users: list[int]) -> pl.DataFrame:
    return frame.filter(pl.col("user").is_in(pl.Series(users, dtype=pl.Int64).implode()))


def _merged(accumulators: list[fm.Accumulator], tree: list[int]) -> fm.Accumulator:
    """Merge in the order ``tree`` draws: each step merges two of the remaining ones."""
    pool = list(accumulators)
    for pick in tree:
        if len(pool) < 2:
            break
        i = pick % (len(pool) - 1)
        right = pool.pop(i + 1)
        pool[i] = pool[i].merge(pickle.loads(pickle.dumps(right)))
    while len(pool) > 1:
        right = pool.pop()
        pool[-1] = pool[-1].merge(right)
    return pool[0]


def _evaluate(recs: Any, truth: Any, metrics: list[str], **kwargs: Any) -> pl.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # star ratings, lists missing: said once, not here
        out = fm.evaluate(recs, truth, metrics=metrics, by="model", aggregate=True, **kwargs)
    assert isinstance(out, pl.DataFrame)
    return out.sort("model")


@pytest.mark.parametrize("case", list(CASES))
@settings(max_examples=12, deadline=None)
@given(
    tables=_tables(),
    tree=st.lists(st.integers(0, 10), max_size=6),
    buffer=st.sampled_from([0, 7, 10**6]),
)
def test_equals_evaluate_whatever_the_batches_and_merges(
    case: str,
    tables: tuple[pl.DataFrame, pl.DataFrame, list[list[int]]],
    tree: list[int],
    buffer: int,
) -> None:
    """Each update evaluated at once (buffer 0), a few held together, or all of them."""
    metrics, kwargs = CASES[case]
    recs, truth, batches = tables
    truth = _truth(case, truth)
    want = _evaluate(recs, truth, metrics, **kwargs)
    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, users in enumerate(batches):
            acc = fm.Accumulator(metrics, by="model", buffer_rows=buffer, **kwargs)
            # Some accumulators take their users in two updates.
            for half in (users[::2], users[1::2]) if i % 2 else (users,):
                acc.update(_of(recs, half), _of(truth, half))
            parts.append(acc)
        got = _merged(parts, tree).compute()
    assert_frame_equal(got.sort("model"), want)


@pytest.mark.parametrize(
    "case", ["ranking", "beyond", "corpus", "propensity", "default catalog", "default g_max"]
)
@settings(max_examples=10, deadline=None)
@given(tables=_tables(), buffer=st.sampled_from([0, 7, 10**6]))
def test_compute_at_any_time_is_the_call_on_the_rows_so_far(
    case: str, tables: tuple[pl.DataFrame, pl.DataFrame, list[list[int]]], buffer: int
) -> None:
    """compute() between updates, and updates after it: each time the one call's value
    on the users given so far (held updates are evaluated by compute, not lost)."""
    metrics, kwargs = CASES[case]
    recs, truth, batches = tables
    truth = _truth(case, truth)
    acc = fm.Accumulator(metrics, by="model", buffer_rows=buffer, **kwargs)
    so_far: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for users in batches:
            acc.update(_of(recs, users), _of(truth, users))
            so_far += users
            want = _evaluate(_of(recs, so_far), _of(truth, so_far), metrics, **kwargs)
            assert_frame_equal(acc.compute().sort("model"), want)


@pytest.mark.parametrize(
    "case", ["ranking", "corpus", "exposure", "default catalog", "default g_max"]
)
def test_one_accumulator_many_updates_on_every_frame_kind(
    case: str, constructor: Constructor
) -> None:
    metrics, kwargs = CASES[case]
    recs = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 2, 3, 3, 3, 4] * 2,
            "model": ["a"] * 9 + ["b"] * 9,
            "item": [0, 1, 2, 1, 3, 4, 5, 0, 7, 2, 1, 0, 3, 1, 5, 4, 6, 7],
            "rank": [1, 2, 3, 1, 2, 1, 2, 3, 1, 1, 2, 3, 1, 2, 1, 2, 3, 1],
        }
    )
    truth = pl.DataFrame(
        {"user": [1, 1, 2, 3, 5], "item": [1, 2, 3, 9, 0], "relevance": [1, 3, 2, 1, 1]}
    ).join(pl.DataFrame({"model": ["a", "b"]}), how="cross")
    truth = truth.with_columns(p=pl.lit(0.5))
    want = _evaluate(recs, truth, metrics, **kwargs)
    acc = fm.Accumulator(metrics, by="model", buffer_rows=0, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fm.RowsHeldWarning)
        for users in ([3], [1, 5], [2, 4]):
            acc.update(constructor(_of(recs, users)), constructor(_of(truth, users)))
    got = acc.compute()
    # The kind of the first update's recs; a LazyFrame's is a (computed) DataFrame.
    if isinstance(constructor(pl.DataFrame({"a": [1]})), pl.LazyFrame):
        assert isinstance(got, pl.DataFrame)
    else:
        assert_kind(got, constructor)
    assert_frame_equal(to_polars(got).sort("model"), want, check_dtypes=False)


def test_numpy_arrays_and_torch_tensors() -> None:
    metrics = ["ndcg@2", "recall@2"]
    recs = {
        "user": np.array([1, 1, 2]),
        "item": np.array([10, 11, 10]),
        "rank": np.array([1, 2, 1]),
    }
    truth = {
        "user": np.array([1, 2]),
        "item": np.array([11, 12]),
        "relevance": np.array([1.0, 1.0]),
    }
    want = fm.evaluate(pl.DataFrame(recs), pl.DataFrame(truth), metrics=metrics, aggregate=True)
    acc = fm.Accumulator(metrics)
    acc.update(recs, truth)
    # User 1: 11 at rank 2 of one liked item: ndcg 1/log2(3), recall 1; user 2: nothing.
    assert acc.compute().row(0) == pytest.approx((2, (1 / np.log2(3)) / 2, 1 / 2), rel=1e-15)
    assert_frame_equal(acc.compute(), want)
    torch = pytest.importorskip("torch", reason="torch is not part of the dev install")
    tensors = fm.Accumulator(metrics)
    tensors.update(
        {k: torch.tensor(v) for k, v in recs.items()},
        {k: torch.tensor(v, requires_grad=k == "relevance") for k, v in truth.items()},
    )
    assert_frame_equal(tensors.compute(), want)


def _worker(users: list[int]) -> fm.Accumulator:
    recs, truth = _SPREAD
    acc = fm.Accumulator(["ndcg@3", "coverage@3"], catalog=CATALOG)
    acc.update(_of(recs, users), _of(truth, users))
    return acc


_SPREAD = (
    pl.DataFrame(
        {"user": [u for u in range(8) for _ in range(3)], "item": [(u * 5 + r) % 14 for u in range(8) for r in range(3)], "rank": [1, 2, 3] * 8}
    ),
    pl.DataFrame({"user": list(range(8)), "item": [(u * 5 + 1) % 14 for u in range(8)], "relevance": [1] * 8}),
)  # fmt: skip


def test_workers_in_other_processes_merge_to_the_one_shot_value() -> None:
    recs, truth = _SPREAD
    want = fm.evaluate(
        recs, truth, metrics=["ndcg@3", "coverage@3"], catalog=CATALOG, aggregate=True
    )
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        parts = pool.map(_worker, [[0, 3, 6], [1, 4], [2, 5, 7]])
    total = parts[0].merge(parts[1]).merge(parts[2])
    assert_frame_equal(total.compute(), want)


def test_a_user_seen_before_is_an_error_naming_it() -> None:
    recs = pl.DataFrame({"user": [1, 2], "item": [1, 2], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": [1, 3], "relevance": [1, 1]})
    acc = fm.Accumulator("ndcg@2")
    acc.update(recs.filter(pl.col("user") == 1), truth.filter(pl.col("user") == 1))
    with pytest.raises(fm.InvalidValueError, match=r"got 1 seen before, e\.g\. user=1"):
        acc.update(recs, truth)  # user 1 is held: refused at once
    evaluated = fm.Accumulator("ndcg@2", buffer_rows=0)
    evaluated.update(recs.filter(pl.col("user") == 1), truth.filter(pl.col("user") == 1))
    with pytest.raises(fm.InvalidValueError, match=r"got 1 seen before, e\.g\. user=1"):
        evaluated.update(recs, truth)  # user 1 was evaluated: refused when this one is
    other = fm.Accumulator("ndcg@2")
    other.update(recs, truth)
    with pytest.raises(fm.InvalidValueError, match=r"merge: .* e\.g\. user=1"):
        fm.Accumulator("ndcg@2").merge(acc).merge(other)
    unchecked = fm.Accumulator("ndcg@2", check_repeats=False, buffer_rows=0)
    unchecked.update(recs, truth)
    unchecked.update(recs, truth)  # counted twice, as asked
    assert unchecked.compute()["n_users"].item() == 4


def test_merge_refuses_another_call_naming_the_difference() -> None:
    with pytest.raises(fm.InvalidOptionError, match=r"got k=5 and k=10"):
        fm.Accumulator("ndcg", k=5).merge(fm.Accumulator("ndcg", k=10))
    with pytest.raises(fm.InvalidOptionError, match=r"got threshold=2 and threshold="):
        fm.Accumulator("ndcg@5", threshold=2).merge(fm.Accumulator("ndcg@5"))
    other_catalog = CATALOG.head(5)
    with pytest.raises(fm.InvalidOptionError, match="got two catalog tables"):
        fm.Accumulator("coverage@5", catalog=CATALOG).merge(
            fm.Accumulator("coverage@5", catalog=other_catalog)
        )


def test_tables_over_rows_still_to_come_keep_the_rows_and_say_what_to_pass() -> None:
    """err's default g_max is the largest relevance of every update's truth: the later
    update's grade 3 changes the first user's err, so the rows are kept, said once."""
    recs = pl.DataFrame({"user": [1, 2], "item": [1, 2], "rank": [1, 1]})
    truth = pl.DataFrame({"user": [1, 2], "item": [1, 2], "relevance": [1, 3]})
    acc = fm.Accumulator("err@3")
    with pytest.warns(fm.RowsHeldWarning, match=r"err@3 read g_max.*pass max_relevance="):
        acc.update(recs.filter(pl.col("user") == 1), truth.filter(pl.col("user") == 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said at the first update only
        acc.update(recs.filter(pl.col("user") == 2), truth.filter(pl.col("user") == 2))
    # g_max 3: user 1's grade 1 stops with (2^1 - 1)/2^3 = 1/8, user 2's with 7/8.
    assert acc.compute()["err@3"].item() == pytest.approx((1 / 8 + 7 / 8) / 2, rel=1e-15)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "exposure_gini@3": ({"item_groups": GROUPS}, "pass catalog="),
        "exposure_parity@3": (
            {"item_groups": GROUPS, "catalog": CATALOG, "parity_target": "merit"},
            "pass another parity_target",
        ),
    }
    for metric, (kwargs, said) in cases.items():
        with pytest.warns(fm.RowsHeldWarning, match=said):
            fm.Accumulator(metric, **kwargs).update(recs, truth)
    with pytest.warns(fm.RowsHeldWarning, match=r"truth without the by columns \['model'\]"):
        fm.Accumulator("ndcg@3", by="model").update(recs.with_columns(model=pl.lit("a")), truth)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default catalog of coverage: no rows kept
        fm.Accumulator("coverage@3").update(recs, truth)
        fm.Accumulator("err@3", max_relevance=3).update(recs, truth)
    with pytest.raises(fm.UnknownKeywordError, match="did you mean threshold"):
        fm.Accumulator("ndcg@3", treshold=1)
    with pytest.raises(fm.UnknownKeywordError, match="aggregate"):
        fm.Accumulator("ndcg@3", aggregate=True)
    acc = fm.Accumulator("ndcg@3")
    acc.update(recs, truth)
    with pytest.raises(fm.InvalidOptionError, match="expected every update with truth"):
        acc.update(recs.with_columns(relevance=pl.lit(1)))


def test_rows_kept_are_checked_at_their_update_and_give_per_user_rows() -> None:
    recs, truth = _SPREAD
    acc = fm.Accumulator("err@3", keep_per_user=True, buffer_rows=0)
    bad = pl.DataFrame({"user": [9, 9], "item": [1, 1], "rank": [1, 2]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fm.RowsHeldWarning)
        acc.update(_of(recs, [0, 1, 2]), _of(truth, [0, 1, 2]))
        with pytest.raises(fm.DuplicateRowsError, match="user=9, item=1"):
            acc.update(bad, truth.head(0))
        acc.update(_of(recs, [3, 4, 5, 6, 7]), _of(truth, [3, 4, 5, 6, 7]))
    assert_frame_equal(acc.per_user(), fm.evaluate(recs, truth, metrics="err@3"))
    assert_frame_equal(
        pickle.loads(pickle.dumps(acc)).compute(),
        fm.evaluate(recs, truth, metrics="err@3", aggregate=True),
    )
    sums = fm.Accumulator("err@3", max_relevance=1)
    sums.update(recs, truth)
    with pytest.raises(fm.InvalidOptionError, match="got max_relevance=None and max_relevance=1"):
        acc.merge(sums)


def test_nothing_computed_is_the_empty_typed_aggregate() -> None:
    empty = fm.Accumulator(["ndcg@3", "rmse"], by="model").compute()
    recs = pl.DataFrame(schema={"model": pl.Int64, "user": pl.Int64, "item": pl.Int64, "rank": pl.Int64, "prediction": pl.Float64})  # fmt: skip
    truth = pl.DataFrame(schema={"model": pl.Int64, "user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64})  # fmt: skip
    want = fm.evaluate(recs, truth, metrics=["ndcg@3", "rmse"], by="model", aggregate=True)
    assert empty.height == 0
    assert empty.columns == want.columns


def test_per_user_rows_when_kept(constructor: Constructor) -> None:
    recs, truth = _SPREAD
    acc = fm.Accumulator("ndcg@3", keep_per_user=True, buffer_rows=10)
    for users in ([5, 1], [0, 2, 3], [4, 6, 7]):
        acc.update(constructor(_of(recs, users)), constructor(_of(truth, users)))
    want = fm.evaluate(recs, truth, metrics="ndcg@3")
    assert_frame_equal(to_polars(acc.per_user()), want, check_dtypes=False)
    with pytest.raises(fm.InvalidOptionError, match="keep_per_user=True"):
        fm.Accumulator("ndcg@3").per_user()


def test_held_updates_are_checked_when_evaluated() -> None:
    """A bad row is reported when the updates holding it are evaluated: at once with
    buffer_rows=0, else at the update that fills the buffer, or at compute()."""
    good = pl.DataFrame({"user": [1], "item": [1], "rank": [1]})
    bad = pl.DataFrame({"user": [2, 2], "item": [1, 1], "rank": [1, 2]})  # item 1 twice
    truth = pl.DataFrame({"user": [1, 2], "item": [1, 1], "relevance": [1, 1]})
    at_once = fm.Accumulator("ndcg@2", buffer_rows=0)
    at_once.update(good, truth.filter(pl.col("user") == 1))
    with pytest.raises(fm.DuplicateRowsError, match="user=2, item=1"):
        at_once.update(bad, truth.filter(pl.col("user") == 2))
    held = fm.Accumulator("ndcg@2")
    held.update(good, truth.filter(pl.col("user") == 1))
    held.update(bad, truth.filter(pl.col("user") == 2))
    with pytest.raises(fm.DuplicateRowsError, match="user=2, item=1"):
        held.compute()
    # The held updates are discarded: user 2 may come again, mended (and 1 too).
    held.update(bad.head(1), truth.filter(pl.col("user") == 2))
    held.update(good, truth.filter(pl.col("user") == 1))
    assert_frame_equal(
        held.compute(),
        fm.evaluate(pl.concat([good, bad.head(1)]), truth, metrics="ndcg@2", aggregate=True),
    )
    with pytest.raises(fm.InvalidOptionError, match="buffer_rows: expected an integer >= 0"):
        fm.Accumulator("ndcg@2", buffer_rows=-1)


def _stream(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two models' lists and graded truth (per model) for 30 users, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    recs, truth = [], []
    for user in range(30):
        for model in ("a", "b"):
            items = rng.permutation(ITEMS)[: rng.integers(0, 6)]
            recs += [(user, model, int(i), r + 1) for r, i in enumerate(items)]
            liked = rng.permutation(ITEMS)[: rng.integers(0, 4)]
            truth += [(user, model, int(i), int(rng.integers(0, 4))) for i in liked]
    schema = ["user", "model", "item", "rank"]
    return (
        pl.DataFrame(recs, schema=schema, orient="row"),
        pl.DataFrame(truth, schema=[*schema[:3], "relevance"], orient="row"),
    )


class AccumulatorMachine(RuleBasedStateMachine):
    """Updates, merges (pickled), pickling and compute() interleaved in any order: each
    accumulator's compute() is always the one call on the users it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.recs, self.truth = _stream(7)
        self.next_user = 0
        self.pool: list[tuple[fm.Accumulator, list[int]]] = []
        self.metrics: list[str] = []
        self.kwargs: dict[str, Any] = {}

    @initialize(case=st.sampled_from(["default catalog", "default g_max", "ranking"]))
    def choose(self, case: str) -> None:
        self.metrics, self.kwargs = CASES[case]
        self.pool = [(self._new(), []) for _ in range(3)]

    def _new(self) -> fm.Accumulator:
        return fm.Accumulator(self.metrics, by="model", buffer_rows=20, **self.kwargs)

    @rule()
    def add(self) -> None:
        self.pool.append((self._new(), []))

    @precondition(lambda self: bool(self.pool) and self.next_user < 30)
    @rule(which=st.integers(0, 100), n=st.integers(1, 4))
    def update(self, which: int, n: int) -> None:
        acc, users = self.pool[which % len(self.pool)]
        batch = list(range(self.next_user, min(self.next_user + n, 30)))
        self.next_user += len(batch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fm.RowsHeldWarning)
            acc.update(_of(self.recs, batch), _of(self.truth, batch))
        users += batch

    @precondition(lambda self: len(self.pool) >= 2)
    @rule(which=st.integers(0, 100), other=st.integers(0, 100))
    def merge(self, which: int, other: int) -> None:
        i, j = which % len(self.pool), other % len(self.pool)
        if i == j:
            return
        (acc, users), (right, more) = self.pool[i], self.pool[j]
        acc.merge(pickle.loads(pickle.dumps(right)))
        self.pool[i] = (acc, users + more)
        self.pool.pop(j)

    @precondition(lambda self: bool(self.pool))
    @rule(which=st.integers(0, 100))
    def repickle(self, which: int) -> None:
        i = which % len(self.pool)
        acc, users = self.pool[i]
        self.pool[i] = (pickle.loads(pickle.dumps(acc)), users)

    @precondition(lambda self: bool(self.pool))
    @rule(which=st.integers(0, 100))
    def compute(self, which: int) -> None:
        acc, users = self.pool[which % len(self.pool)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fm.RelevanceWarning)
            got = acc.compute()
        if not users:
            assert got.height == 0
            return
        event("compute() over some users")
        want = _evaluate(_of(self.recs, users), _of(self.truth, users), self.metrics, **self.kwargs)
        assert_frame_equal(got.sort("model"), want)


AccumulatorMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=20, deadline=None
)
test_update_merge_pickle_and_compute_in_any_order = AccumulatorMachine.TestCase
