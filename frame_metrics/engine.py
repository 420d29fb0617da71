"""The one-pass runner: a call's plan collected once, with its checks, on one machine.

The planner (:mod:`frame_metrics.planner`) builds one lazy plan for everything the
caller asked; this module runs it: the input checks first (for eager input in the same
batch as the result, so both share one pass over the data), then the result in the
caller's frame kind. What ``fm.diagnose`` counts is :mod:`frame_metrics.diagnosis`'s,
shared with the partitioned runners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frame_metrics.diagnosis import report, screens
from frame_metrics.family import ENGINE
from frame_metrics.inputs import Inputs
from frame_metrics.planner import query
from frame_metrics.spec import Spec
from frame_metrics.validation import run_checks

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = ["DEFAULT_ENGINE", "evaluate"]

#: The polars engine of the final collect; ``bench/ranking.py`` measures both.
DEFAULT_ENGINE: EngineType = ENGINE


def evaluate(spec: Spec, inputs: Inputs, *, aggregate: bool) -> Any:
    """Run the call and give the result back in the caller's frame kind.

    The input checks run first; for eager input they are collected in the same batch as
    the result, so both share one pass over the data and nothing is returned unless
    every check passed. A LazyFrame stays lazy: its checks run now, its metrics when
    the caller collects.
    """
    plan, result = query(spec, inputs, aggregate=aggregate)
    if plan.first_checks:
        run_checks(plan.first_checks, engine=DEFAULT_ENGINE)
    truth = None if inputs.truth is None else inputs.truth.lazy
    top = None if plan.ctx.prepared is None else plan.ctx.prepared.top
    looks = screens(spec, inputs.source.lazy, truth, top=top)
    screening = [[*s.queries()] for s in looks]
    queries = [q for qs in screening for q in qs]
    if inputs.source.kind == "polars-lazy":
        screened = run_checks(plan.checks, with_queries=queries, engine=DEFAULT_ENGINE)
        report(looks, screening, screened)
        return inputs.source.give_back(result)
    frame, *screened = run_checks(
        plan.checks, with_queries=[result, *queries], engine=DEFAULT_ENGINE
    )
    report(looks, screening, screened)
    return inputs.source.give_back(frame)
