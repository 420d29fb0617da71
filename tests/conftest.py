"""One ``constructor`` fixture runs each test on every supported frame kind."""

from __future__ import annotations

import importlib
import math
import os
import shutil
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from frame_metrics.namespace import RecMetricsNamespace

Constructor = Callable[[pl.DataFrame], Any]


#: Not collected for doctests: importing the toy family registers it (its test does,
#: and removes it after), which would add it to every other test's registry.
collect_ignore = ["toy_family.py"]


def _pandas_numpy(df: pl.DataFrame) -> pd.DataFrame:
    return df.to_pandas()


def _pandas_pyarrow(df: pl.DataFrame) -> pd.DataFrame:
    return df.to_pandas(use_pyarrow_extension_array=True)


def _pyarrow(df: pl.DataFrame) -> pa.Table:
    return df.to_arrow()


def _duckdb(df: pl.DataFrame) -> duckdb.DuckDBPyRelation:
    # A relation on the default connection, reading an Arrow table, as the edge gives back.
    return duckdb.from_arrow(df.to_arrow())


CONSTRUCTORS: dict[str, Constructor] = {
    "polars": lambda df: df,
    "polars-lazy": lambda df: df.lazy(),
    "pandas-numpy": _pandas_numpy,
    "pandas-pyarrow": _pandas_pyarrow,
    "pyarrow": _pyarrow,
    "duckdb": _duckdb,
}


@pytest.fixture(params=list(CONSTRUCTORS), ids=list(CONSTRUCTORS))
def constructor(request: pytest.FixtureRequest) -> Constructor:
    """Build an input frame of one kind from a polars DataFrame."""
    return CONSTRUCTORS[request.param]


def to_polars(result: Any) -> pl.DataFrame:
    """Bring any result back to a polars DataFrame for comparison."""
    if isinstance(result, pl.LazyFrame):
        return result.collect()  # as a caller would
    if isinstance(result, pl.DataFrame):
        return result
    if isinstance(result, pa.Table):
        out = pl.from_arrow(result)
        assert isinstance(out, pl.DataFrame)
        return out
    if isinstance(result, duckdb.DuckDBPyRelation):
        out = result.pl()
        assert isinstance(out, pl.DataFrame)
        return out
    assert isinstance(result, pd.DataFrame)
    out = pl.from_pandas(result)
    assert isinstance(out, pl.DataFrame)
    return out


def recmetrics(frame: Any) -> Any:
    """``frame.recmetrics``, the namespace on the kinds it is registered on.

    polars and pandas frames carry it; pyarrow Tables (no accessor API) and DuckDB
    relations (an attribute there names a column) do not, and their callers use the
    functions. The namespace is a forwarder to those functions, so on such a frame the
    tests build it by hand: the same methods, on the same frame, with no skip.
    """
    if hasattr(type(frame), "recmetrics"):
        return frame.recmetrics
    return RecMetricsNamespace(frame)


def is_pandas_numpy(frame: object) -> bool:
    """A numpy-backed pandas frame: its floats have no missing value but NaN.

    A NaN in such a frame reaches polars as a null (the frame's way of saying missing).
    """
    return isinstance(frame, pd.DataFrame) and all(
        type(d).__name__ != "ArrowDtype" for d in frame.dtypes
    )


def assert_kind(result: Any, constructor: Constructor) -> None:
    """The result is of the kind the input was."""
    probe = constructor(pl.DataFrame({"a": [1]}))
    assert type(result) is type(probe)


def evaluate_as_polars(
    constructor: Constructor, recs: pl.DataFrame, truth: pl.DataFrame | None, **kwargs: Any
) -> pl.DataFrame:
    """``fm.evaluate`` on the constructor's frame kind, as polars.

    The result comes back in the kind of ``recs`` and equals the polars eager result to
    the bit (same columns, same rows).
    """
    import frame_metrics as fm

    out = fm.evaluate(constructor(recs), None if truth is None else constructor(truth), **kwargs)
    assert_kind(out, constructor)
    got = to_polars(out)
    want = fm.evaluate(recs, truth, **kwargs)
    assert isinstance(want, pl.DataFrame)
    assert got.columns == want.columns
    assert got.rows() == want.rows()
    return got


def user_values(frame: pl.DataFrame, column: str) -> dict[Any, float]:
    """A per-user column as {user: value}, users with a null left out."""
    return {
        u: v
        for u, v in zip(frame["user"].to_list(), frame[column].to_list(), strict=True)
        if v is not None
    }


def assert_user_values(
    got: Mapping[Any, float], want: Mapping[Any, float], label: str = "", tol: float = 1e-12
) -> None:
    """The same users, each value within ``tol`` (relative and absolute)."""
    assert set(got) == set(want), (label, got, want)
    for user, value in want.items():
        assert math.isclose(got[user], value, rel_tol=tol, abs_tol=tol), (
            label,
            user,
            got[user],
            value,
        )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] Spark session for the test session (a JVM start costs ~10 s)."""
    sql = pytest.importorskip("pyspark.sql", reason="the spark extra is part of the dev install")
    session = (
        sql.SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless ``chromium`` for the browser checks (docs site, report).

    Skips without it, but on CI (``CI`` set), where .ci/run installs it.
    """
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing on CI: .ci/run installs Debian's chromium")
        pytest.skip("no chromium (Debian: apt-get install chromium) for the browser check")
    return found


def gen_run() -> types.ModuleType:
    """docs/gen/gen_run.py, which runs and records the pages' examples."""
    folder = str(Path(__file__).resolve().parents[1] / "docs" / "gen")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("gen_run")
