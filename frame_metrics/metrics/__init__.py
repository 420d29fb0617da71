"""The metric registry and the ranking context its expressions read.

Every family's module registers its metrics' entries (the ranking family's in
:mod:`frame_metrics.families.ranking`); importing :mod:`frame_metrics.families`, which
importing the package does, registers them all.
"""

from __future__ import annotations

from frame_metrics.metrics.registry import REGISTRY, Metric, resolve

__all__ = ["REGISTRY", "Metric", "resolve"]

#: Computed when ``metrics=`` is not given (dcg is unnormalised, so it is opt-in).
DEFAULT_RANKING = ("precision", "recall", "f1", "hit_rate", "mrr", "ap", "ndcg")
