"""Metric families; importing this package fills the registry."""

from __future__ import annotations

from frame_metrics.metrics import beyond as beyond
from frame_metrics.metrics import calibration as calibration
from frame_metrics.metrics import corpus as corpus
from frame_metrics.metrics import diversity as diversity
from frame_metrics.metrics import expected_exposure as expected_exposure
from frame_metrics.metrics import ir as ir
from frame_metrics.metrics import ranking as ranking
from frame_metrics.metrics import rating as rating
from frame_metrics.metrics.registry import REGISTRY, Metric, resolve

__all__ = ["REGISTRY", "Metric", "resolve"]

#: Computed when ``metrics=`` is not given (dcg is unnormalised, so it is opt-in).
DEFAULT_RANKING = ("precision", "recall", "f1", "hit_rate", "mrr", "ap", "ndcg")
from frame_metrics.metrics import exposure as exposure  # noqa: E402
