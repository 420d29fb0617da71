"""``fm.group_exposure``: the exposure of item groups as a table (spec 9.2).

The table's numbers are checked against sums written out by hand (1/log2(r+1) per
rank), and against the metrics: ``exposure_parity@k`` recomputed by hand from the
table's shares equals the metric. Every frame kind gives the same rows; the command
line prints the function's table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import (
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    MissingInputError,
)

from .conftest import Constructor, assert_kind, is_pandas_numpy, recmetrics, to_polars

# User 1: a b c; user 2: a d. Item d is in two groups (y and z), e in none.
RECS = pl.DataFrame(
    {"user": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "a", "d"], "rank": [1, 2, 3, 1, 2]}
)
TRUTH = pl.DataFrame({"user": [1, 2], "item": ["b", "d"], "relevance": [1, 2]})
GROUPS = pl.DataFrame({"item": ["a", "b", "c", "d", "d"], "group": ["x", "x", "y", "y", "z"]})

E1, E2, E3 = 1.0, 1 / math.log2(3), 1 / math.log2(4)  # e(r) = 1/log2(r+1)

SCHEMA = {
    "group": pl.String,
    "exposure": pl.Float64,
    "exposure_share": pl.Float64,
    "catalog_share": pl.Float64,
    "merit_share": pl.Float64,
}


def _jsd(s: Sequence[float], t: Sequence[float]) -> float:
    """Jensen-Shannon divergence in bits, term by term (spec 9.2)."""
    out = 0.0
    for a, b in zip(s, t, strict=True):
        m = (a + b) / 2
        out += (0.5 * a * math.log2(a / m) if a else 0.0) + (
            0.5 * b * math.log2(b / m) if b else 0.0
        )
    return out


def test_table_by_hand_on_every_kind(constructor: Constructor) -> None:
    # Exposure within k = 3, summed by rank: x = 2·e(1) [a, twice] + e(2) [b];
    # y = e(2) [d] + e(3) [c]; z = e(2) [d] (d counts fully in y and in z).
    x, y, z = 2 * E1 + E2, E2 + E3, E2
    total = x + y + z
    # Catalog: the items seen, a b c d (recs and truth): x holds a, b; y c, d; z d.
    # Merit: relevant truth rows b (x) and d (y and z).
    want = [
        ("x", x, x / total, 2 / 5, 1 / 3),
        ("y", y, y / total, 2 / 5, 1 / 3),
        ("z", z, z / total, 1 / 5, 1 / 3),
    ]
    out = fm.group_exposure(
        constructor(RECS), constructor(TRUTH), k=3, item_groups=constructor(GROUPS)
    )
    assert_kind(out, constructor)
    got = to_polars(out)
    assert got.columns == list(SCHEMA)
    # The same floats as the sums above, to the bit: the engine sums by rank, then groups
    # in sorted order, as written.
    assert got.rows() == want
    polars = fm.group_exposure(RECS, TRUTH, k=3, item_groups=GROUPS)
    assert isinstance(polars, pl.DataFrame)
    assert polars.schema == pl.Schema(SCHEMA)
    assert got.rows() == polars.rows()


def test_namespace_forwards(constructor: Constructor) -> None:
    want = fm.group_exposure(RECS, TRUTH, k=2, item_groups=GROUPS)
    got = recmetrics(constructor(RECS)).group_exposure(
        constructor(TRUTH), k=2, item_groups=constructor(GROUPS)
    )
    assert_kind(got, constructor)
    assert to_polars(got).rows() == want.rows()


def test_the_old_names_warn_and_give_the_same_table(
    constructor: Constructor, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    want = fm.group_exposure(RECS, TRUTH, k=2, item_groups=GROUPS)
    with pytest.warns(FutureWarning, match="renamed fm.group_exposure"):
        old = fm.exposure(constructor(RECS), constructor(TRUTH), k=2, item_groups=GROUPS)
    assert to_polars(old).rows() == want.rows()
    with pytest.warns(FutureWarning, match="renamed recmetrics.group_exposure"):
        old = recmetrics(constructor(RECS)).exposure(constructor(TRUTH), k=2, item_groups=GROUPS)
    assert to_polars(old).rows() == want.rows()
    f = _files(tmp_path)
    args = [f["recs.parquet"], f["truth.csv"], "-k", "2", "--item-groups", f["groups.csv"]]
    args += ["--group-col", "provider"]
    assert main(["group-exposure", *args, "-o", str(tmp_path / "new.csv")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["exposure", *args, "-o", str(tmp_path / "old.csv")]) == 0
    assert "the command exposure is renamed group-exposure" in capsys.readouterr().err
    assert pl.read_csv(tmp_path / "old.csv").equals(pl.read_csv(tmp_path / "new.csv"))


def test_without_truth_no_merit_column() -> None:
    out = fm.group_exposure(RECS, k=1, item_groups=GROUPS)
    # k = 1: only a, twice, at rank 1; y and z get nothing. Catalog: a b c d (recs).
    assert out.rows() == [("x", 2.0, 1.0, 2 / 5), ("y", 0.0, 0.0, 2 / 5), ("z", 0.0, 0.0, 1 / 5)]
    assert out.columns == ["group", "exposure", "exposure_share", "catalog_share"]


def test_parity_from_the_table_equals_the_metric() -> None:
    out = fm.group_exposure(RECS, TRUTH, k=3, item_groups=GROUPS)
    s = out["exposure_share"].to_list()
    metrics = fm.evaluate(
        RECS,
        TRUTH,
        metrics=["exposure_parity@3", "exposure_parity(parity_target=merit)@3"],
        item_groups=GROUPS,
        aggregate=True,
    ).row(0, named=True)
    catalog = 1 - math.sqrt(_jsd(s, out["catalog_share"].to_list()))
    merit = 1 - math.sqrt(_jsd(s, out["merit_share"].to_list()))
    assert metrics["exposure_parity@3"] == pytest.approx(catalog, abs=1e-15)
    assert metrics["exposure_parity(parity_target=merit)@3"] == pytest.approx(merit, abs=1e-15)


def _models() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Two models over 30 users and 12 items, truth, and train with a popular head."""
    import random

    rng = random.Random(7)
    rows = [
        (model, u, i, r)
        for model in ("pop", "rand")
        for u in range(30)
        for r, i in enumerate(
            rng.sample(range(12), 6) if model == "rand" else [0, 1, 2, 3, 4, 5], start=1
        )
    ]
    recs = pl.DataFrame(rows, schema=["model", "user", "item", "rank"], orient="row")
    truth = pl.DataFrame(
        [(u, rng.randrange(12), rng.choice([0, 1, 2])) for u in range(30)],
        schema=["user", "item", "relevance"],
        orient="row",
    ).unique(["user", "item"], keep="first")
    train = pl.DataFrame(
        [(u, i) for u in range(40) for i in range(12) if i < 3 or (u + i) % 9 == 0],
        schema=["user", "item"],
        orient="row",
    )
    return recs, truth, train


@pytest.mark.parametrize(
    "options",
    [{}, {"exposure": "rbp", "persistence": 0.85}, {"exposure": "uniform"}, {"threshold": 2}],
    ids=["log", "rbp", "uniform", "threshold"],
)
def test_by_models_with_default_groups_match_the_metric(options: dict[str, Any]) -> None:
    recs, truth, train = _models()
    out = fm.group_exposure(recs, truth, k=5, by="model", train=train, **options)
    assert out["group"].to_list() == ["head", "tail", "head", "tail"]
    metrics = fm.evaluate(
        recs,
        truth,
        metrics=["exposure_parity@5", "exposure_parity(parity_target=merit)@5"],
        by="model",
        train=train,
        aggregate=True,
        **options,
    )
    for model in ("pop", "rand"):
        part = out.filter(model=model)
        for column in ("exposure_share", "catalog_share", "merit_share"):
            assert math.fsum(part[column]) == pytest.approx(1.0, abs=1e-15), (model, column)
        s = part["exposure_share"].to_list()
        row = metrics.filter(model=model).row(0, named=True)
        catalog = 1 - math.sqrt(_jsd(s, part["catalog_share"].to_list()))
        merit = 1 - math.sqrt(_jsd(s, part["merit_share"].to_list()))
        assert row["exposure_parity@5"] == pytest.approx(catalog, abs=1e-14), model
        merit_metric = row["exposure_parity(parity_target=merit)@5"]
        assert merit_metric == pytest.approx(merit, abs=1e-14), model


def test_default_groups_by_hand() -> None:
    # train: a has 3 users, b 1, c 1: the head holding 20% of the 5 pairs is {a}; z is
    # absent from train, so tail. List [a, z]: head e(1) = 1, tail e(2).
    train = pl.DataFrame({"user": [1, 2, 3, 4, 5], "item": ["a", "a", "a", "b", "c"]})
    recs = pl.DataFrame({"user": [9, 9], "item": ["a", "z"], "rank": [1, 2]})
    out = fm.group_exposure(recs, k=2, train=train)
    # Catalog seen: a, z (recs), b, c (train): head 1 of 4.
    total = E1 + E2
    assert out.rows() == [("head", E1, E1 / total, 1 / 4), ("tail", E2, E2 / total, 3 / 4)]


def test_rbp_weights_by_hand() -> None:
    # rbp, p = 0.5: e(r) = 0.5^(r-1). x: a at 1 twice, b at 2 -> 2 + 0.5; y: d at 2,
    # c at 3 -> 0.5 + 0.25; z: d at 2 -> 0.5.
    out = fm.group_exposure(RECS, k=3, item_groups=GROUPS, exposure="rbp", persistence=0.5)
    assert out["exposure"].to_list() == [2.5, 0.75, 0.5]
    assert out["exposure_share"].to_list() == [2.5 / 3.75, 0.75 / 3.75, 0.5 / 3.75]


def test_given_catalog() -> None:
    catalog = pl.DataFrame({"item": ["a", "b", "c", "d", "e", "f"]})  # e, f in no group
    out = fm.group_exposure(RECS, k=3, item_groups=GROUPS, catalog=catalog)
    # x: a, b; y: c, d; z: d (items without a group are in no share).
    assert out["catalog_share"].to_list() == [2 / 5, 2 / 5, 1 / 5]


def test_empty_recs_give_an_empty_typed_table(constructor: Constructor) -> None:
    empty = RECS.clear()
    out = fm.group_exposure(
        constructor(empty), constructor(TRUTH), k=3, item_groups=constructor(GROUPS)
    )
    assert_kind(out, constructor)
    got = to_polars(out)
    assert (got.columns, got.height) == (list(SCHEMA), 0)
    polars = fm.group_exposure(empty, TRUTH, k=3, item_groups=GROUPS)
    assert polars.schema == pl.Schema(SCHEMA)
    by_model = fm.group_exposure(
        empty.with_columns(model=pl.lit("m")), k=3, item_groups=GROUPS, by="model"
    )
    without_merit = {c: dtype for c, dtype in SCHEMA.items() if c != "merit_share"}
    assert by_model.schema == pl.Schema({"model": pl.String, **without_merit})


def test_lazy_stays_lazy() -> None:
    out = fm.group_exposure(RECS.lazy(), TRUTH, k=3, item_groups=GROUPS)
    assert isinstance(out, pl.LazyFrame)
    assert out.collect().equals(fm.group_exposure(RECS, TRUTH, k=3, item_groups=GROUPS))


def test_dask_frames_give_a_dask_result() -> None:
    import importlib

    dd: Any = importlib.import_module("dask.dataframe")  # untyped: Any
    recs, truth, train = _models()
    want = fm.group_exposure(recs, truth, k=5, by="model", train=train)
    got = fm.group_exposure(
        dd.from_pandas(recs.to_pandas(), npartitions=3),
        dd.from_pandas(truth.to_pandas(), npartitions=2),
        k=5,
        by="model",
        train=dd.from_pandas(train.to_pandas(), npartitions=2),
    )
    assert isinstance(got, dd.DataFrame)
    assert pl.from_pandas(got.compute()).rows() == want.rows()


# -- bad input ---------------------------------------------------------------------------


def test_groups_or_train_are_needed() -> None:
    with pytest.raises(MissingInputError) as info:
        fm.group_exposure(RECS, TRUTH, k=3)
    assert str(info.value) == (
        "exposure: expected item_groups= (one row per (item, group) with the item column "
        "and the group column), got None; or pass train= for aplt's head and tail groups"
    )


@pytest.mark.parametrize(
    ("k", "shown"), [(0, "0"), ([5, 10], "[5, 10]"), (2.5, "2.5"), (True, "True")]
)
def test_k_is_one_int(k: Any, shown: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        fm.group_exposure(RECS, k=k, item_groups=GROUPS)
    assert str(info.value) == f"k: expected an int >= 1, got {shown}"


def test_missing_group_column() -> None:
    with pytest.raises(MissingColumnsError) as info:
        fm.group_exposure(RECS, k=3, item_groups=GROUPS, group="provider")
    assert str(info.value) == (
        "item_groups: expected column 'provider', not found; available columns: 'item', 'group'"
    )


def test_missing_recs_column() -> None:
    with pytest.raises(MissingColumnsError) as info:
        fm.group_exposure(RECS.drop("rank"), k=3, item_groups=GROUPS)
    assert str(info.value).startswith("recs: expected column 'rank', not found; ")
    assert "available columns: 'user', 'item'" in str(info.value)


def test_bad_option_value() -> None:
    with pytest.raises(InvalidOptionError) as info:
        fm.group_exposure(RECS, k=3, item_groups=GROUPS, exposure="linear")  # type: ignore[arg-type]
    assert str(info.value) == "exposure: expected one of 'log', 'rbp', 'uniform', got 'linear'"


# -- the command line --------------------------------------------------------------------


def _files(tmp_path: Path) -> dict[str, str]:
    paths = {name: str(tmp_path / name) for name in ("recs.parquet", "truth.csv", "groups.csv")}
    RECS.write_parquet(paths["recs.parquet"])
    TRUTH.write_csv(paths["truth.csv"])
    GROUPS.rename({"group": "provider"}).write_csv(paths["groups.csv"])
    return paths


def test_cli_exposure_gives_the_api_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    f = _files(tmp_path)
    groups = GROUPS.rename({"group": "provider"})
    want = fm.group_exposure(RECS, TRUTH, k=3, item_groups=groups, group="provider")
    out = tmp_path / "out.csv"
    args = ["group-exposure", f["recs.parquet"], f["truth.csv"], "-k", "3"]
    code = main(
        [*args, "--item-groups", f["groups.csv"], "--group-col", "provider", "-o", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()
    # A browsing model and persistence, from the option table.
    want = fm.group_exposure(
        RECS, k=3, item_groups=groups, group="provider", exposure="rbp", persistence=0.5
    )
    rbp = ["group-exposure", f["recs.parquet"], "-k", "3", "--item-groups", f["groups.csv"]]
    rbp += ["--group-col", "provider", "--exposure", "rbp", "--persistence", "0.5"]
    code = main([*rbp, "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()


def test_cli_evaluate_reads_item_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.cli import main

    f = _files(tmp_path)
    want = fm.evaluate(
        RECS,
        TRUTH,
        metrics="exposure_parity@3",
        item_groups=GROUPS.rename({"group": "provider"}),
        group="provider",
        aggregate=True,
    )
    out = tmp_path / "out.csv"
    args = ["evaluate", f["recs.parquet"], f["truth.csv"], "-m", "exposure_parity@3"]
    code = main(
        [*args, "--item-groups", f["groups.csv"], "--group-col", "provider", "-o", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            [],
            "exposure: expected --item-groups FILE (one row per (item, group) with the item "
            "column and the group column); or pass --train for aplt's head and tail groups",
        ),
        (
            ["--item-groups", "groups.csv"],
            "item_groups: expected column 'group', not found; available columns: 'item', "
            "'provider' (set with --group-col)",
        ),
        (["--item-groups", "groups.csv", "-k", "0"], "-k: expected an int >= 1, got 0"),
    ],
    ids=["no groups", "group column", "k"],
)
def test_cli_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from frame_metrics.cli import main

    f = _files(tmp_path)
    extra = [f.get(e, e) for e in extra]
    code = main(["group-exposure", f["recs.parquet"], *extra])
    assert (code, capsys.readouterr().err) == (2, f"frame-metrics: error: {message}\n")


# -- item groups per by group (spec 9, clarified 2026-11-27) ----------------------------

# Two models, two users each, lists of two. Each model has its own item groups: m1
# groups a (x), b and c (y); m2 groups c, d, e (x) and f (y), an item no list shows.
MODEL_RECS = pl.DataFrame(
    {
        "model": ["m1"] * 4 + ["m2"] * 4,
        "user": [1, 1, 2, 2, 1, 1, 2, 2],
        "item": ["a", "b", "a", "c", "c", "d", "d", "e"],
        "rank": [1, 2, 1, 2, 1, 2, 1, 2],
    }
)
MODEL_GROUPS = pl.DataFrame(
    {
        "model": ["m1", "m1", "m1", "m2", "m2", "m2", "m2"],
        "item": ["a", "b", "c", "c", "d", "e", "f"],
        "group": ["x", "y", "y", "x", "x", "x", "y"],
    }
)
# Truth without the model column: judged the same for both models. Relevant: b and e
# (user 1), c (user 2).
MODEL_TRUTH = pl.DataFrame({"user": [1, 1, 2], "item": ["b", "e", "c"], "relevance": [1, 1, 1]})


def test_item_groups_per_model_give_each_model_its_own_shares(constructor: Constructor) -> None:
    # Uniform attention within k = 2. m1: a (x) twice, b and c (y) once each: 2 and 2.
    # m2: c, d, d, e, all x: 4 and 0.
    # Catalog: each model's own rows of item_groups: m1 x {a}, y {b, c}: 1/3, 2/3;
    # m2 x {c, d, e}, y {f}: 3/4, 1/4.
    # Merit: relevant b, e, c. m1 groups b (y) and c (y), not e: 0 and 2 rows;
    # m2 groups e (x) and c (x), not b: 2 and 0.
    want = [
        ("m1", "x", 2.0, 2 / 4, 1 / 3, 0 / 2),
        ("m1", "y", 2.0, 2 / 4, 2 / 3, 2 / 2),
        ("m2", "x", 4.0, 4 / 4, 3 / 4, 2 / 2),
        ("m2", "y", 0.0, 0 / 4, 1 / 4, 0 / 2),
    ]
    call: dict[str, Any] = {"by": "model", "exposure": "uniform"}
    out = fm.group_exposure(
        constructor(MODEL_RECS),
        constructor(MODEL_TRUTH),
        k=2,
        item_groups=constructor(MODEL_GROUPS),
        **call,
    )
    assert_kind(out, constructor)
    assert to_polars(out).rows() == want
    # The metrics read the same tables: 1 - JS(exposure shares, target) per model.
    metrics = to_polars(
        fm.evaluate(
            constructor(MODEL_RECS),
            constructor(MODEL_TRUTH),
            metrics=[
                "exposure_parity@2",
                "exposure_parity(parity_target=merit)@2",
                "list_parity@2",
            ],
            item_groups=constructor(MODEL_GROUPS),
            aggregate=True,
            **call,
        )
    )
    catalog = {"m1": [1 / 3, 2 / 3], "m2": [3 / 4, 1 / 4]}
    merit = {"m1": [0.0, 1.0], "m2": [1.0, 0.0]}
    shares = {"m1": [0.5, 0.5], "m2": [1.0, 0.0]}
    for row in metrics.iter_rows(named=True):
        m = row["model"]
        want_catalog = 1 - math.sqrt(_jsd(shares[m], catalog[m]))
        assert row["exposure_parity@2"] == pytest.approx(want_catalog, abs=1e-15), m
        want_merit = 1 - math.sqrt(_jsd(shares[m], merit[m]))
        assert row["exposure_parity(parity_target=merit)@2"] == pytest.approx(want_merit, abs=1e-15)
        # Every user's list has the model's exposure shares: list_parity is the same.
        assert row["list_parity@2"] == pytest.approx(want_catalog, abs=1e-15), m
    # m2's exposure is all on x, its merit target too: parity exactly 1.
    assert metrics.filter(model="m2")["exposure_parity(parity_target=merit)@2"].item() == 1.0


def test_a_given_catalog_limits_each_models_own_rows() -> None:
    # The catalog a..e leaves out f: m2's y holds no catalog item (x: c, d, e).
    catalog = pl.DataFrame({"item": ["a", "b", "c", "d", "e"]})
    out = fm.group_exposure(MODEL_RECS, k=2, by="model", item_groups=MODEL_GROUPS, catalog=catalog)
    assert out.select("model", "group", "catalog_share").rows() == [
        ("m1", "x", 1 / 3),
        ("m1", "y", 2 / 3),
        ("m2", "x", 3 / 3),
        ("m2", "y", 0 / 3),
    ]


def test_train_per_model_gives_each_model_its_head_and_tail() -> None:
    # Each model's train: m1's users had a three times, b and c once (head {a}, the
    # items holding 20% of its 5 pairs); m2's had d three times, e and c once (head {d}).
    train = pl.DataFrame(
        {
            "model": ["m1"] * 5 + ["m2"] * 5,
            "user": [1, 2, 3, 4, 5] * 2,
            "item": ["a", "a", "a", "b", "c", "d", "d", "d", "e", "c"],
        }
    )
    out = fm.group_exposure(MODEL_RECS, k=2, by="model", train=train, exposure="uniform")
    # Catalog: the items seen, a..e; each model's head is one of the five.
    # Exposure: m1 a, a (head), b, c (tail); m2 d, d (head), c, e (tail).
    assert out.rows() == [
        ("m1", "head", 2.0, 2 / 4, 1 / 5),
        ("m1", "tail", 2.0, 2 / 4, 4 / 5),
        ("m2", "head", 2.0, 2 / 4, 1 / 5),
        ("m2", "tail", 2.0, 2 / 4, 4 / 5),
    ]


# -- ranks from scores, without truth -----------------------------------------------------


def test_scores_rank_without_truth(constructor: Constructor) -> None:
    # Scores, higher first, equal ones by item ascending (evaluate's default): user 1
    # ranks c (0.9), then a and b (0.5 each: a first); user 2 ranks d, then a.
    scored = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 2],
            "item": ["a", "b", "c", "a", "d"],
            "score": [0.5, 0.5, 0.9, 0.1, 0.7],
        }
    )
    out = fm.group_exposure(
        constructor(scored), score="score", k=2, item_groups=constructor(GROUPS)
    )
    assert_kind(out, constructor)
    # Within k = 2: user 1 c (y) at 1, a (x) at 2; user 2 d (y and z) at 1, a (x) at 2.
    x, y, z = 2 * E2, E1 + E1, E1
    total = x + y + z
    # Catalog: the items seen, a b c d: x holds a, b; y c, d; z d.
    want = [
        ("x", x, x / total, 2 / 5),
        ("y", y, y / total, 2 / 5),
        ("z", z, z / total, 1 / 5),
    ]
    assert to_polars(out).rows() == want
    # The same table as from the ranks those scores give (b third, in the catalog).
    ranked = pl.DataFrame(
        {"user": [1, 1, 1, 2, 2], "item": ["c", "a", "b", "d", "a"], "rank": [1, 2, 3, 1, 2]}
    )
    assert fm.group_exposure(ranked, k=2, item_groups=GROUPS).rows() == want


# -- names that clash with the result's ---------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"group": "exposure"},
            "group: expected a column name other than the output column 'exposure' (a "
            "column of the result), got 'exposure'; rename the column",
        ),
        (
            {"group": "catalog_share"},
            "group: expected a column name other than the output column 'catalog_share' "
            "(a column of the result), got 'catalog_share'; rename the column",
        ),
        (
            {"by": "merit_share"},
            "by: expected a column name other than the output column 'merit_share' (a "
            "column of the result), got 'merit_share'; rename the column",
        ),
        (
            {"by": "group"},
            "by: expected a column name other than the output column 'group' (the item "
            "groups' column), got 'group'; rename the column",
        ),
        (
            {"by": "model", "group": "model"},
            "by: expected a column name other than the output column 'model' (the item "
            "groups' column), got 'model'; rename the column",
        ),
    ],
    ids=["group-exposure", "group-catalog-share", "by-merit-share", "by-group", "by-is-group"],
)
def test_a_name_of_the_result_is_refused(
    constructor: Constructor, options: dict[str, Any], message: str
) -> None:
    # Every input carries each column the options name (the group column too).
    group = options.get("group", "group")
    recs = RECS.with_columns(pl.lit("m").alias(options.get("by", "model")))
    groups = GROUPS.rename({"group": group})
    with pytest.raises(InvalidOptionError) as info:
        fm.group_exposure(
            constructor(recs), constructor(TRUTH), k=3, item_groups=constructor(groups), **options
        )
    assert str(info.value) == message
    # With the default groups (train) as well: the group column is the result's alone.
    with pytest.raises(InvalidOptionError) as info:
        fm.group_exposure(recs, k=3, train=TRUTH.select("user", "item"), **options)
    assert str(info.value) == message


def test_a_nan_group_is_refused_as_a_null_is(constructor: Constructor) -> None:
    # Float group labels: d's NaN names no group (polars would make it a group).
    groups = constructor(GROUPS.with_columns(group=pl.Series([1.0, 1.0, 2.0, 2.0, math.nan])))
    with pytest.raises(InvalidValueError) as info:
        fm.group_exposure(constructor(RECS), k=3, item_groups=groups)
    if is_pandas_numpy(groups):
        # numpy-backed pandas has no missing value but NaN: it arrives as a null.
        want = "expected no nulls in key or group column 'group', found 1 null row(s)"
        label = "None"
    else:
        want = "expected no NaN in group column 'group', found 1 NaN row(s)"
        label = "nan"
    assert str(info.value) == f"item_groups: {want}, e.g. item='d', group={label}"


def test_a_by_column_named_like_an_evaluate_output(constructor: Constructor) -> None:
    # n_users is an output of evaluate's aggregate, not of the exposure table: a by column
    # of that name is no clash here. x at rank 1 gets 1/log2(2) = 1, y at 2 1/log2(3).
    recs = pl.DataFrame({"n_users": ["a", "a"], "user": [1, 1], "item": ["x", "y"], "rank": [1, 2]})
    groups = pl.DataFrame({"item": ["x", "y"], "group": ["g1", "g2"]})
    out = fm.group_exposure(constructor(recs), k=2, by="n_users", item_groups=constructor(groups))
    assert_kind(out, constructor)
    got = to_polars(out)
    e_y = 1 / math.log2(3)
    assert got.columns == ["n_users", "group", "exposure", "exposure_share", "catalog_share"]
    assert got.rows() == [
        ("a", "g1", 1.0, 1 / (1 + e_y), 0.5),
        ("a", "g2", e_y, e_y / (1 + e_y), 0.5),
    ]
