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
from frame_metrics.planner import Plan, check_call, query
from frame_metrics.spec import Spec
from frame_metrics.validation import run_checks

if TYPE_CHECKING:
    import polars as pl
    from polars._typing import EngineType

__all__ = ["DEFAULT_ENGINE", "evaluate", "means_and_per_user"]

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
    if inputs.source.kind == "polars-lazy":
        _run(spec, inputs, plan, [])
        return inputs.source.give_back(result)
    (frame,) = _run(spec, inputs, plan, [result])
    return inputs.source.give_back(frame)


def means_and_per_user(spec: Spec, inputs: Inputs) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The aggregate of a call and its per-user values, in one batch, as polars frames.

    What :func:`frame_metrics.report` shows: the two results share one plan, so its
    per-user rows are computed once (two calls compute them twice); the per-user
    values are those of the metrics with one (``spec.per_user_columns``), as a
    per-user call of those metrics gives them; None when there is none.
    """
    check_call(spec, aggregate=True)
    plan = Plan(spec, inputs)
    per_user = plan.per_user()
    results = [plan.result(per_user, aggregate=True)]
    if spec.per_user_columns:
        results.append(per_user.select(*spec.columns.keys, *spec.per_user_columns))
    means, *values = _run(spec, inputs, plan, results)
    return means, values[0] if values else None


def _run(spec: Spec, inputs: Inputs, plan: Plan, results: list[pl.LazyFrame]) -> list[pl.DataFrame]:
    """The call's checks, its screens and ``results`` in one batch (checks first if any).

    Nothing is returned unless every check passed; each screen then says what it found.
    """
    if plan.first_checks:
        run_checks(plan.first_checks, engine=DEFAULT_ENGINE)
    truth = None if inputs.truth is None else inputs.truth.lazy
    top = None if plan.ctx.prepared is None else plan.ctx.prepared.top
    looks = screens(spec, inputs.source.lazy, truth, top=top)
    screening = [[*s.queries()] for s in looks]
    queries = [q for qs in screening for q in qs]
    collected = run_checks(plan.checks, with_queries=[*results, *queries], engine=DEFAULT_ENGINE)
    report(looks, screening, collected[len(results) :])
    return collected[: len(results)]
