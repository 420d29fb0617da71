"""frame_metrics: recommender-system metrics on DataFrames, as polars expressions.

Importing the package registers the ``.recmetrics`` namespace on polars DataFrames and
LazyFrames, and on pandas DataFrames.

Examples
--------
>>> import polars as pl
>>> import frame_metrics as fm
>>> recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "c"], "rank": [1, 2, 3]})
>>> truth = pl.DataFrame({"user": [1, 1, 1, 1], "item": ["a", "b", "d", "e"],
...                       "relevance": [3, 2, 3, 0]})
>>> ndcg = recs.recmetrics.ndcg(truth, k=3)["ndcg@3"].item()
>>> import math
>>> math.isclose(ndcg, (3 + 2 / math.log2(3)) / (3 + 3 / math.log2(3) + 2 / math.log2(4)))
True
"""

from __future__ import annotations

import importlib.metadata as _metadata

from frame_metrics import datasets, exprs, plot
from frame_metrics.accumulator import Accumulator
from frame_metrics.api import diagnose, evaluate
from frame_metrics.compare import compare
from frame_metrics.conventions import CONVENTIONS, conventions
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.errors import (
    BaselineChoiceWarning,
    DuplicateRowsError,
    EmptySplitWarning,
    FrameMetricsError,
    FrameMetricsWarning,
    GateFailedError,
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    MissingDependencyError,
    MissingInputError,
    NoRecommendationsWarning,
    RelevanceWarning,
    RowsHeldWarning,
    SmallSampleWarning,
    UndefinedMetricWarning,
    UnknownKeywordError,
    UnmatchedIdsWarning,
)
from frame_metrics.exposure_table import exposure, group_exposure
from frame_metrics.gaps import gaps
from frame_metrics.gates import check
from frame_metrics.metrics import REGISTRY
from frame_metrics.namespace import register_all as _register_all
from frame_metrics.policy_value import policy_value
from frame_metrics.protocol import Folds, Split, split
from frame_metrics.reports import report

try:
    __version__ = _metadata.version("frame_metrics")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

_register_all()

__all__ = [
    "CONVENTIONS",
    "REGISTRY",
    "Accumulator",
    "BaselineChoiceWarning",
    "Diagnostics",
    "DuplicateRowsError",
    "EmptySplitWarning",
    "Folds",
    "FrameMetricsError",
    "FrameMetricsWarning",
    "GateFailedError",
    "IgnoredOptionWarning",
    "InvalidOptionError",
    "InvalidValueError",
    "MissingColumnsError",
    "MissingDependencyError",
    "MissingInputError",
    "NoRecommendationsWarning",
    "RelevanceWarning",
    "RowsHeldWarning",
    "SmallSampleWarning",
    "Split",
    "UndefinedMetricWarning",
    "UnknownKeywordError",
    "UnmatchedIdsWarning",
    "__version__",
    "check",
    "compare",
    "conventions",
    "datasets",
    "diagnose",
    "evaluate",
    "exposure",
    "exprs",
    "gaps",
    "group_exposure",
    "plot",
    "policy_value",
    "report",
    "split",
]


def __dir__() -> list[str]:
    # The public API only: not the modules the package is built from, nor the names
    # its own imports leave behind (``annotations``).
    return sorted(__all__)
