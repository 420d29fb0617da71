"""Public behaviour of evaluate, the namespace, diagnostics and exprs, on every frame kind."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import Constructor, assert_kind, recmetrics, to_polars

L2 = math.log2

RECS = pl.DataFrame(
    {
        "model": ["a"] * 5 + ["b"] * 3,
        "user": [1, 1, 1, 2, 2, 1, 1, 3],
        "item": ["x", "y", "z", "x", "w", "z", "x", "y"],
        "rank": [1, 2, 3, 1, 2, 1, 2, 1],
    }
)
TRUTH = pl.DataFrame(
    {"user": [1, 1, 2, 4], "item": ["y", "z", "q", "x"], "relevance": [1, 2, 1, 1]}
)


def test_per_user_columns_order_and_kind(constructor: Constructor) -> None:
    out = fm.evaluate(
        constructor(RECS), constructor(TRUTH), metrics=["recall", "precision"], k=[2, 1], by="model"
    )
    assert_kind(out, constructor)
    got = to_polars(out)
    assert got.columns == ["model", "user", "recall@1", "recall@2", "precision@1", "precision@2"]
    # Truth has no model column: every model is judged on every truth user (1, 2, 4).
    assert got.select("model", "user").rows() == [
        ("a", 1),
        ("a", 2),
        ("a", 4),
        ("b", 1),
        ("b", 2),
        ("b", 4),
    ]
    # a/1: [x, y, z] vs {y, z}; b/1: [z, x] vs {y, z}; users 2 and 4: nothing relevant shown.
    assert got["recall@2"].to_list() == [1 / 2, 0.0, 0.0, 1 / 2, 0.0, 0.0]
    assert got["precision@1"].to_list() == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]


def test_aggregate_by_model(constructor: Constructor) -> None:
    out = recmetrics(constructor(RECS)).evaluate(
        constructor(TRUTH), metrics=["ndcg", "hit_rate"], k=3, by="model", aggregate=True
    )
    assert_kind(out, constructor)
    got = to_polars(out)
    assert got.columns == ["model", "n_users", "ndcg@3", "hit_rate@3"]
    assert got["n_users"].to_list() == [3, 3]
    ideal_1 = 2 / L2(2) + 1 / L2(3)  # user 1: gains 2 (z), 1 (y)
    ndcg_a1 = (1 / L2(3) + 2 / L2(4)) / ideal_1  # y at 2, z at 3
    ndcg_b1 = (2 / L2(2)) / ideal_1  # z at 1
    assert got["ndcg@3"].to_list() == pytest.approx([ndcg_a1 / 3, ndcg_b1 / 3], rel=1e-15)
    assert got["hit_rate@3"].to_list() == pytest.approx([1 / 3, 1 / 3])


def test_truth_with_by_column_is_joined_on_it(constructor: Constructor) -> None:
    truth = pl.DataFrame(
        {"model": ["a", "b"], "user": [1, 1], "item": ["x", "x"], "relevance": [1, 1]}
    )
    got = to_polars(fm.evaluate(constructor(RECS), constructor(truth), metrics="mrr@3", by="model"))
    assert got.rows() == [("a", 1, 1.0), ("b", 1, 0.5)]


def test_composite_user_key(constructor: Constructor) -> None:
    recs = pl.DataFrame(
        {"user": [1, 1, 1, 1], "session": [1, 1, 2, 2], "item": [5, 6, 5, 6], "rank": [1, 2, 1, 2]}
    )
    truth = pl.DataFrame({"user": [1, 1], "session": [1, 2], "item": [6, 5], "relevance": [1, 1]})
    got = to_polars(
        fm.evaluate(
            constructor(recs), constructor(truth), metrics="mrr@2", user=["user", "session"]
        )
    )
    assert got.rows() == [(1, 1, 1 / 2), (1, 2, 1.0)]


def test_rank_from_score_ties_by_item_ascending(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["c", "a", "b"], "score": [0.5, 0.5, 0.9]})
    truth = pl.DataFrame({"user": [1], "item": ["c"], "relevance": [1]})
    # Order: b (0.9), then a and c tie at 0.5 and "a" < "c": c is third.
    got = to_polars(
        fm.evaluate(constructor(recs), constructor(truth), metrics="mrr@3", score="score")
    )
    assert got["mrr@3"].item() == pytest.approx(1 / 3)
    d = fm.diagnose(constructor(recs), constructor(truth), k=[1, 2], score="score")
    assert d.ties_at_cutoff == {1: 0, 2: 1}


def test_empty_input_gives_empty_typed_result(constructor: Constructor) -> None:
    recs, truth = RECS.clear(), TRUTH.clear()
    per_user = to_polars(fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg@5"))
    assert per_user.height == 0
    assert per_user.columns == ["user", "ndcg@5"]
    assert per_user.schema["ndcg@5"] == pl.Float64
    agg = to_polars(
        fm.evaluate(constructor(recs), constructor(truth), metrics="ndcg@5", aggregate=True)
    )
    assert agg.height == 0
    assert agg.columns == ["n_users", "ndcg@5"]


def test_empty_policy_zero_counts_users_without_relevant(constructor: Constructor) -> None:
    # user 3 (model b) has recommendations but nothing relevant.
    recs = RECS.filter(pl.col("model") == "b")
    skip = to_polars(fm.evaluate(constructor(recs), constructor(TRUTH), metrics="precision@1"))
    zero = to_polars(
        fm.evaluate(constructor(recs), constructor(TRUTH), metrics="precision@1", empty="zero")
    )
    assert skip["user"].to_list() == [1, 2, 4]
    assert zero["user"].to_list() == [1, 2, 3, 4]
    assert zero.filter(pl.col("user") == 3)["precision@1"].item() == 0.0


def test_on_duplicate_first_keeps_best(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "a"], "rank": [3, 1, 2]})
    truth = pl.DataFrame({"user": [1, 1], "item": ["a", "a"], "relevance": [1, 3]})
    got = to_polars(
        fm.evaluate(
            constructor(recs), constructor(truth), metrics=["mrr", "dcg"], k=3, on_duplicate="first"
        )
    )
    # "a" kept at rank 2 (its best), with relevance 3 (its highest).
    assert got["mrr@3"].item() == 1 / 2
    assert got["dcg@3"].item() == pytest.approx(3 / L2(3))
    d = fm.diagnose(constructor(recs), constructor(truth), k=3, on_duplicate="first")
    assert d.duplicates_resolved == {"recs": 1, "truth": 1}


def test_long_table_input(constructor: Constructor) -> None:
    long = pl.DataFrame(
        {
            "user": [1, 1, 1, 2],
            "item": [1, 2, 3, 1],
            "rank": [1, 2, None, 1],
            "relevance": [0, 2, 1, 0],
        }
    )
    got = to_polars(recmetrics(constructor(long)).evaluate(metrics=["recall", "ap"], k=2))
    assert got.rows() == [(1, 1 / 2, (1 / 2) / 2)]
    assert_kind(recmetrics(constructor(long)).recall(k=2), constructor)


def test_long_table_relevant_item_far_below_cutoff(constructor: Constructor) -> None:
    long = pl.DataFrame(
        {"user": [1, 1, 1], "item": [1, 2, 3], "rank": [1, 100, 2], "relevance": [1, 1, 0]}
    )
    got = to_polars(recmetrics(constructor(long)).evaluate(metrics=["ap", "ndcg", "mrr"], k=10))
    # relevant: items 1 (rank 1) and 2 (rank 100, beyond k): AP = (1/1) / min(2, 10).
    assert got.row(0) == pytest.approx((1, 1 / 2, 1 / (1 + 1 / L2(3)), 1.0), rel=1e-15)


def test_shortcuts_and_aliases(constructor: Constructor) -> None:
    recs, truth = constructor(RECS.filter(pl.col("model") == "a")), constructor(TRUTH)
    namespace = recmetrics(recs)
    full = to_polars(namespace.evaluate(truth, metrics=["ap"], k=3))
    assert to_polars(namespace.ap(truth, k=3)).equals(full)
    # The alias names its column as called (spec section 8), with the same values.
    aliased = to_polars(namespace.map(truth, k=3))
    assert aliased.columns == ["user", "map@3"]
    assert aliased.rename({"map@3": "ap@3"}).equals(full)
    mean = to_polars(namespace.ap(truth, k=3, aggregate=True))
    assert mean["ap@3"].item() == pytest.approx(full["ap@3"].mean())
    assert "ndcg" in dir(namespace)
    with pytest.raises(AttributeError, match="no attribute 'ndgc'"):
        _ = namespace.ndgc


def test_diagnostics_counts(constructor: Constructor) -> None:
    d = recmetrics(constructor(RECS)).diagnose(constructor(TRUTH), k=3, by="model")
    assert isinstance(d, fm.Diagnostics)
    # per model: users 1, 2, 4 have relevant items; 2 and 4 (a) / 2 and 4 (b) got nothing
    # relevant recommended, and 4 (both) and 2 (b) got no recommendation at all.
    assert d.n_users == 6
    assert d.users_without_relevant == 1  # user 3 under model b
    assert d.users_without_recommendations == 3
    assert d.per_group["model"].to_list() == ["a", "b"]
    assert "users evaluated" in str(d)


def _lines(d: fm.Diagnostics) -> list[str]:
    """The printout's lines, the padding between label and count collapsed."""
    return [" ".join(line.split()) for line in str(d).split("\n")]


def test_diagnostics_is_the_old_name_of_diagnose(constructor: Constructor) -> None:
    # One name per concept (fm.diagnose, recmetrics.diagnose); the old one warns and
    # gives the same counts for one release.
    namespace = recmetrics(constructor(RECS))
    new = namespace.diagnose(constructor(TRUTH), k=3, by="model")
    with pytest.warns(FutureWarning, match="renamed recmetrics.diagnose"):
        old = namespace.diagnostics(constructor(TRUTH), k=3, by="model")
    assert str(old) == str(new)
    assert old.per_group.equals(new.per_group)


def test_diagnose_says_short_lists_and_rank_gaps(constructor: Constructor) -> None:
    recs = pl.DataFrame(
        {
            "user": [1, 1, 2, 3, 3, 3, 4, 4, 4],
            "item": ["a", "b", "a", "a", "b", "c", "b", "c", "d"],
            "rank": [1, 2, 1, 1, 2, 3, 2, 5, 9],
        }
    )
    truth = pl.DataFrame({"user": [1, 2, 3, 4], "item": ["a"] * 4, "relevance": [1] * 4})
    d = fm.diagnose(constructor(recs), constructor(truth), k=[1, 2, 5])
    # Items ranked within k, users 1 to 4: k=1: 1, 1, 1, 0; k=2: 2, 1, 2, 1; k=5: 2, 1, 3, 2.
    assert d.short_lists == {1: 1, 2: 2, 5: 4}
    assert d.longest_list == 3
    # User 4's ranks within 5 are 2 and 5: positions 1, 3 and 4 are empty.
    assert d.lists_with_rank_gaps == 1
    lines = _lines(d)
    assert "lists shorter than k=1: 1" in lines
    assert "lists shorter than k=2: 2" in lines
    assert "lists shorter than k=5 (the longest has 3 items): 4" in lines
    assert "lists with gaps in their ranks (positions left empty): 1" in lines
    # Lists as long as every k, without gaps: nothing to say.
    full = fm.diagnose(constructor(recs), constructor(truth), k=1)
    assert (full.short_lists, full.longest_list, full.lists_with_rank_gaps) == ({1: 1}, 1, 0)
    assert not [line for line in _lines(full) if "gaps" in line]


def test_diagnose_says_who_is_not_in_truth(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1, 2, 3], "item": ["a", "a", "a"], "rank": [1, 1, 1]})
    # User 2 is in truth with nothing relevant, user 3 only in recs, user 4 only in truth.
    truth = pl.DataFrame({"user": [1, 2, 4], "item": ["a", "b", "c"], "relevance": [1, 0, 1]})
    long = recs.join(truth, on=["user", "item"], how="full", coalesce=True)
    for d in (
        fm.diagnose(constructor(recs), constructor(truth), k=1),
        fm.diagnose(constructor(long), k=1),
    ):
        assert (d.n_users, d.users_without_relevant, d.users_not_in_truth) == (2, 2, 1)
        assert d.users_without_recommendations == 1  # user 4
        lines = _lines(d)
        assert lines[1:3] == [
            "users without a relevant item: 2",
            "of which not in truth (only in recs): 1",
        ]


def test_exprs_accept_expressions_and_match_evaluate() -> None:
    long = pl.DataFrame({"u": [1, 1, 1, 2, 2], "pos": [0, 1, None, 0, 1], "stars": [5, 0, 4, 0, 3]})
    got = (
        long.group_by("u")
        .agg(fm.exprs.ndcg(2, rank=pl.col("pos") + 1, relevance="stars", gain="exponential"))
        .sort("u")
    )
    u1 = (31 / L2(2)) / (31 / L2(2) + 15 / L2(3))
    u2 = (7 / L2(3)) / (7 / L2(2))
    assert got["ndcg@2"].to_list() == pytest.approx([u1, u2], rel=1e-15)


def test_pandas_id_dtypes_round_trip() -> None:
    recs = RECS.filter(pl.col("model") == "a").to_pandas()
    truth = TRUTH.to_pandas()
    expected = to_polars(fm.evaluate(recs, truth, metrics="recall@3"))
    for cast in ("category", "string[pyarrow]", "object"):
        r = recs.astype({"item": cast, "user": "category" if cast == "category" else "int64"})
        t = truth.astype({"item": cast})
        got = fm.evaluate(r, t, metrics="recall@3")
        assert isinstance(got, pd.DataFrame)
        assert got["recall@3"].tolist() == expected["recall@3"].to_list()
    arrow = fm.evaluate(recs.convert_dtypes(dtype_backend="pyarrow"), truth, metrics="recall@3")
    assert str(arrow["recall@3"].dtype) == "double[pyarrow]"


def test_pandas_named_index_is_a_column() -> None:
    recs = RECS.filter(pl.col("model") == "a").to_pandas()
    truth = TRUTH.to_pandas()
    expected = fm.evaluate(recs, truth, metrics="recall@3")
    got = fm.evaluate(recs.set_index("user"), truth.set_index(["user", "item"]), metrics="recall@3")
    assert got.equals(expected)


def test_mixed_integer_id_widths_are_joined() -> None:
    recs = RECS.with_columns(pl.col("user").cast(pl.Int32))
    a = fm.evaluate(recs, TRUTH, metrics="recall@3", by="model")
    b = fm.evaluate(RECS, TRUTH, metrics="recall@3", by="model")
    assert a["recall@3"].to_list() == b["recall@3"].to_list()


def test_import_does_not_import_pandas_and_hooks_it_later() -> None:
    code = (
        "import sys, frame_metrics, polars as pl\n"
        "assert 'pandas' not in sys.modules, 'pandas imported eagerly'\n"
        "import pandas as pd\n"
        "r = pd.DataFrame({'user': [1], 'item': [1], 'rank': [1]})\n"
        "t = pd.DataFrame({'user': [1], 'item': [1], 'relevance': [1]})\n"
        "print(r.recmetrics.mrr(t, k=1)['mrr@1'].item())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1.0"


def test_demo_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "frame_metrics"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "popularity" in done.stdout
    assert "ndcg@10" in done.stdout
