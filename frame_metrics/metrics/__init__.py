"""The metric registry and the ranking family's definitions.

Importing :mod:`frame_metrics.families` registers every other family's entries (a
family's module holds them); importing the package does both.
"""

from __future__ import annotations

from frame_metrics.metrics import beyond as beyond
from frame_metrics.metrics import ir as ir
from frame_metrics.metrics import ranking as ranking
from frame_metrics.metrics.registry import REGISTRY, Metric, resolve

__all__ = ["REGISTRY", "Metric", "resolve"]

#: Computed when ``metrics=`` is not given (dcg is unnormalised, so it is opt-in).
DEFAULT_RANKING = ("precision", "recall", "f1", "hit_rate", "mrr", "ap", "ndcg")
