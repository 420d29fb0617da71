"""One ``constructor`` fixture runs each test on every supported frame kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import polars as pl
import pytest

Constructor = Callable[[pl.DataFrame], Any]


def _pandas_numpy(df: pl.DataFrame) -> pd.DataFrame:
    return df.to_pandas()


def _pandas_pyarrow(df: pl.DataFrame) -> pd.DataFrame:
    return df.to_pandas(use_pyarrow_extension_array=True)


CONSTRUCTORS: dict[str, Constructor] = {
    "polars": lambda df: df,
    "polars-lazy": lambda df: df.lazy(),
    "pandas-numpy": _pandas_numpy,
    "pandas-pyarrow": _pandas_pyarrow,
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
    assert isinstance(result, pd.DataFrame)
    out = pl.from_pandas(result)
    assert isinstance(out, pl.DataFrame)
    return out


def assert_kind(result: Any, constructor: Constructor) -> None:
    """The result is of the kind the input was."""
    probe = constructor(pl.DataFrame({"a": [1]}))
    assert type(result) is type(probe)
