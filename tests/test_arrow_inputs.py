"""Arrow streams and DuckDB relations at the edge: read once, given back in kind.

Every constructor-parametrized test already runs on pyarrow Tables and DuckDB relations
(``tests/conftest.py``); these are the cases the constructors do not cover: a stream
that is not a Table, SQL-first input, what is (not) imported, empty input, missing
pyarrow and ids that Arrow cannot hold. Expected values are the arithmetic by hand.
"""

from __future__ import annotations

import decimal
import re
import subprocess
import sys
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    MissingDependencyError,
)

RECS = pl.DataFrame(
    {"user": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "a", "d"], "rank": [1, 2, 3, 1, 2]}
)
TRUTH = pl.DataFrame({"user": [1, 1, 2], "item": ["b", "z", "d"], "relevance": [3, 1, 1]})
# user 1: b at rank 2 of the relevant {b, z}; user 2: d at rank 2 of {d}.
EXPECTED = {
    "user": [1, 2],
    "precision@2": [1 / 2, 1 / 2],
    "recall@2": [1 / 2, 1 / 1],
    "mrr@2": [1 / 2, 1 / 2],
}
METRICS = ["precision", "recall", "mrr"]

RECS_SQL = """
    select * from (values (1, 'a', 1), (1, 'b', 2), (1, 'c', 3), (2, 'a', 1), (2, 'd', 2))
    as t("user", item, "rank")
"""


class CStream:
    """A bare Arrow PyCapsule stream, as a library other than pyarrow would hand over."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def _reader(frame: pl.DataFrame) -> pa.RecordBatchReader:
    table = frame.to_arrow()
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2))


def _values(table: Any) -> dict[str, list[Any]]:
    assert isinstance(table, pa.Table)
    out: dict[str, list[Any]] = table.to_pydict()
    return out


@pytest.mark.parametrize(
    "make", [_reader, CStream, lambda df: df.to_arrow()], ids=["reader", "c-stream", "table"]
)
def test_arrow_stream_gives_a_pyarrow_table_with_polars_values(make: Any) -> None:
    out = fm.evaluate(make(RECS), make(TRUTH), metrics=METRICS, k=2)
    assert isinstance(out, pa.Table)
    assert _values(out) == EXPECTED
    back = pl.from_arrow(out)
    assert isinstance(back, pl.DataFrame)
    assert back.equals(fm.evaluate(RECS, TRUTH, metrics=METRICS, k=2))


def test_reader_as_an_extra_frame() -> None:
    # train= as a stream: novelty from train popularity, each item of 2 train users seen
    # by one of them: -log2(1/2) = 1 bit; items a and b at ranks 1-2 for user 1.
    train = pl.DataFrame({"user": [7, 8], "item": ["a", "b"]})
    out = fm.evaluate(
        RECS.to_arrow(), TRUTH.to_arrow(), metrics="novelty", k=2, train=_reader(train)
    )
    assert isinstance(out, pa.Table)
    assert _values(out)["novelty@2"][0] == (1 + 1) / 2


def test_duckdb_sql_gives_a_relation() -> None:
    recs = duckdb.sql(RECS_SQL)
    out = fm.evaluate(recs, TRUTH, metrics=METRICS, k=2)
    assert isinstance(out, duckdb.DuckDBPyRelation)
    assert out.columns == list(EXPECTED)
    rows = [tuple(r) for r in zip(*EXPECTED.values(), strict=True)]
    assert out.fetchall() == rows
    assert out.fetchall() == rows  # backed by a table: read again, same rows
    # On the default connection, so plain duckdb.sql can query it by name.
    total = duckdb.sql('select sum("recall@2") from out')
    assert total is not None
    assert total.fetchall() == [(1 / 2 + 1 / 1,)]


def test_duckdb_relation_of_another_connection() -> None:
    con = duckdb.connect()
    try:
        con.sql("create table users as select 2 as \"user\", 'gold' as tier")
        out = fm.evaluate(con.sql(RECS_SQL), con.sql("select * from TRUTH"), metrics="mrr", k=2)
        assert isinstance(out, duckdb.DuckDBPyRelation)
        # The result is on the default connection (DuckDB does not say which connection a
        # relation is on); the documented way to bring it to ``con``:
        back = con.from_arrow(out.arrow())
        assert back.join(con.table("users"), '"user"').select('tier, "mrr@2"').fetchall() == [
            ("gold", 1 / 2)
        ]
    finally:
        con.close()


def test_polars_use_imports_neither_duckdb_nor_pyarrow() -> None:
    code = (
        "import sys, polars as pl, frame_metrics as fm\n"
        "r = pl.DataFrame({'user': [1], 'item': [1], 'rank': [1]})\n"
        "t = pl.DataFrame({'user': [1], 'item': [1], 'relevance': [1]})\n"
        "print(fm.evaluate(r, t, metrics='mrr', k=1)['mrr@1'].item())\n"
        "print(fm.evaluate(r.lazy(), t, metrics='mrr', k=1).collect()['mrr@1'].item())\n"
        "print(sorted(m for m in ('duckdb', 'pyarrow', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["1.0", "1.0", "[]"]


@pytest.mark.parametrize("kind", ["pyarrow", "duckdb"])
def test_empty_input_gives_an_empty_typed_result(kind: str) -> None:
    recs, truth = RECS.clear(), TRUTH.clear()
    if kind == "pyarrow":
        out = fm.evaluate(recs.to_arrow(), truth.to_arrow(), metrics="ndcg", k=5)
        assert isinstance(out, pa.Table)
        assert out.num_rows == 0
        assert out.schema.names == ["user", "ndcg@5"]
        assert out.schema.types == [pa.int64(), pa.float64()]
    else:
        rel = duckdb.sql('select 1 as "user", \'a\' as item, 1 as "rank" where false')
        out = fm.evaluate(rel, truth.to_arrow(), metrics="ndcg", k=5, aggregate=True)
        assert isinstance(out, duckdb.DuckDBPyRelation)
        assert out.fetchall() == []
        assert out.columns == ["n_users", "ndcg@5"]
        assert [str(t) for t in out.types] == ["BIGINT", "DOUBLE"]


def test_missing_pyarrow_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stream that polars reads without pyarrow; the pyarrow Table result needs it.
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"pip install pyarrow") as caught:
        fm.evaluate(CStream(RECS), CStream(TRUTH), metrics="mrr", k=2)
    assert isinstance(caught.value, ImportError)
    assert caught.value.name == "pyarrow"
    assert isinstance(caught.value, fm.FrameMetricsError)


@pytest.mark.parametrize("kind", ["pyarrow", "duckdb"])
def test_int128_keys_come_back_as_uint64(kind: str) -> None:
    # Int64 users in recs, UInt64 users in truth (one beyond Int64): the keys meet as
    # Int128, which Arrow has not; every evaluated user fits UInt64.
    big = 2**63 + 1
    recs = pl.DataFrame({"user": [5, big - 2**63], "item": [10, 10], "rank": [1, 1]})
    truth = pl.DataFrame(
        {"user": [5, big], "item": [10, 11], "relevance": [1.0, 1.0]},
        schema_overrides={"user": pl.UInt64},
    )
    if kind == "pyarrow":
        out = fm.evaluate(recs.to_arrow(), truth.to_arrow(), metrics="hit_rate", k=1)
        assert isinstance(out, pa.Table)
        assert out.schema.field("user").type == pa.uint64()
        assert sorted(zip(*_values(out).values(), strict=True)) == [(5, 1.0), (big, 0.0)]
    else:
        out = fm.evaluate(duckdb.from_arrow(recs.to_arrow()), truth, metrics="hit_rate", k=1)
        assert isinstance(out, duckdb.DuckDBPyRelation)
        assert str(out.types[0]) == "UBIGINT"
        assert sorted(out.fetchall()) == [(5, 1.0), (big, 0.0)]


def test_ids_arrow_cannot_hold_are_refused() -> None:
    # A negative Int64 user and a beyond-Int64 UInt64 user both evaluated: neither Int64
    # nor UInt64 holds both.
    big = 2**63 + 1
    recs = pl.DataFrame({"user": [-1], "item": [10], "rank": [1]})
    truth = pl.DataFrame(
        {"user": [big], "item": [10], "relevance": [1.0]}, schema_overrides={"user": pl.UInt64}
    )
    with pytest.raises(InvalidValueError, match=r"^expected ids that Arrow can hold in column"):
        fm.evaluate(recs.to_arrow(), truth, metrics="hit_rate", k=1, empty="zero")
    polars_out = fm.evaluate(recs, truth, metrics="hit_rate", k=1, empty="zero")
    assert sorted(polars_out["user"].to_list()) == [-1, big]  # polars keeps them


def test_a_series_is_not_a_frame() -> None:
    with pytest.raises(InvalidOptionError, match=r"got Series$"):
        fm.evaluate(RECS["user"], TRUTH, k=2)


def test_a_stream_of_non_rows_is_named() -> None:
    with pytest.raises(InvalidValueError, match=r"^truth: expected an Arrow stream of table rows"):
        fm.evaluate(RECS, pa.chunked_array([[1, 2]]), k=2)


# Columns the call never reads are never converted: a DuckDB INTERVAL or an Arrow
# decimal256 (polars reads neither: an error, or a panic) may sit beside the ones read.
_INTERVAL_SQL = f'select *, interval (t."rank") day as "wait" from ({RECS_SQL}) as t'


def _with_decimal256(frame: pl.DataFrame, name: str = "price") -> pa.Table:
    values = pa.array([decimal.Decimal(i) / 4 for i in range(frame.height)], pa.decimal256(50, 2))
    return frame.to_arrow().append_column(name, values)


@pytest.mark.parametrize("buckets", [None, 2], ids=["one-pass", "buckets"])
@pytest.mark.parametrize("kind", ["duckdb-interval", "arrow-decimal256"])
def test_unread_columns_of_unreadable_types_are_left_alone(kind: str, buckets: int | None) -> None:
    recs: Any = duckdb.sql(_INTERVAL_SQL) if kind == "duckdb-interval" else _with_decimal256(RECS)
    truth = _with_decimal256(TRUTH, "weight")  # an unread truth column too
    out = fm.evaluate(recs, truth, metrics=METRICS, k=2, buckets=buckets)
    rows = (
        out.fetchall()
        if kind == "duckdb-interval"
        else list(zip(*out.to_pydict().values(), strict=True))
    )
    assert rows == list(zip(*EXPECTED.values(), strict=True))


def test_unread_pandas_column_polars_cannot_read_is_left_alone() -> None:
    recs = RECS.to_pandas()
    recs["note"] = pd.Series(["fine", 3, "x", 4.5, None], dtype=object)  # mixed kinds
    out = fm.evaluate(recs, TRUTH.to_pandas(), metrics=METRICS, k=2)
    assert out.to_dict("list") == EXPECTED


def test_a_missing_column_lists_the_unread_ones() -> None:
    message = (
        "recs: expected column 'usr' (did you mean 'user'?), not found; available columns: "
        "'user', 'item', 'rank', 'wait'"
    )
    with pytest.raises(MissingColumnsError, match=f"^{re.escape(message)}$"):
        fm.evaluate(duckdb.sql(_INTERVAL_SQL), TRUTH, k=2, user="usr")


@pytest.mark.parametrize(
    ("recs", "found"),
    [
        (
            lambda: duckdb.sql(_INTERVAL_SQL.replace('as "wait"', 'as "score"')),
            "DuckDB type INTERVAL",
        ),
        (lambda: _with_decimal256(RECS, "score"), "Arrow type decimal256(50, 2)"),
    ],
    ids=["duckdb-interval", "arrow-decimal256"],
)
def test_a_read_column_polars_cannot_read_is_named(recs: Any, found: str) -> None:
    # The panic (a BaseException) and polars' ComputeError become one error class.
    head = f"recs: expected column 'score' to have a type polars reads, found {found} (polars: "
    with pytest.raises(InvalidValueError, match=f"^{re.escape(head)}.+\\); cast it first$"):
        fm.evaluate(recs(), TRUTH, k=2, score="score")


def test_the_duplicate_hint_still_sees_the_unread_columns() -> None:
    # Two models stacked without by=: the hint names the column telling them apart,
    # though the call converted neither it nor the decimal256 column. Within k=2 each
    # model has 4 (user, rank) rows, each repeated by the other model: 8 rows.
    stacked = pl.concat([RECS.with_columns(model=pl.lit(m)) for m in ("x", "y")])
    message = (
        "recs: expected one row per rank within a user, found 8 rows that repeat one, "
        "e.g. user=1, item='a', rank=1; the rows differ in column(s) 'model': if they hold "
        "several models or segments, pass by='model'"
    )
    with pytest.raises(DuplicateRowsError, match=f"^{re.escape(message)}$"):
        fm.evaluate(_with_decimal256(stacked), TRUTH, k=2)
