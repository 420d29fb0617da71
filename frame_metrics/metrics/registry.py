"""The metric registry: one entry per metric, everything the engine and tests need.

Adding a metric is one :func:`register` call in the module of its family, plus its tests;
the engine, the namespace shortcuts, :mod:`frame_metrics.exprs` and the
reference-vs-expression property test all read from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidOptionError
from frame_metrics.metrics.context import RankingContext
from frame_metrics.options import MetricOptions, validate_k

__all__ = [
    "ALIASES",
    "REGISTRY",
    "Metric",
    "RankingContext",
    "UserCase",
    "register",
    "resolve",
    "resolve_requests",
]


@dataclass(frozen=True)
class UserCase:
    """One user's data in plain Python, for the reference implementations.

    ``ranks`` maps each recommended item to its rank; ``relevance`` maps each truth item
    to its relevance (absent = 0).
    """

    ranks: Mapping[Any, int]
    relevance: Mapping[Any, float]

    def relevant(self, options: MetricOptions) -> set[Hashable]:
        """The relevant set R under the options' threshold."""
        t = options.threshold
        return {i for i, r in self.relevance.items() if (r > 0 if t is None else r >= t)}

    def top(self, k: int) -> list[Hashable]:
        """Recommended items with rank <= k, best first."""
        return [i for i, r in sorted(self.ranks.items(), key=lambda p: p[1]) if r <= k]


Builder = Callable[[RankingContext, int], pl.Expr]
Reference = Callable[[UserCase, int, MetricOptions], float]


@dataclass(frozen=True)
class Metric:
    """A registry entry.

    ``build(ctx, k)`` returns the metric for one user's rows, assuming the user has at
    least one relevant item (the empty-case policy is applied around it, once, for every
    metric); ``reference`` is a slow pure-Python twin used by the tests.
    """

    name: str
    build: Builder
    reference: Reference
    formula: str
    takes_k: bool = True
    higher_is_better: bool = True
    bounds: tuple[float, float | None] = (0.0, 1.0)
    needs: frozenset[str] = field(default_factory=lambda: frozenset({"truth"}))

    def expr(self, ctx: RankingContext, k: int) -> pl.Expr:
        """The metric with the empty-case policy applied, named ``"<name>@<k>"``."""
        empty_value = pl.lit(0.0) if ctx.options.empty == "zero" else pl.lit(None, pl.Float64)
        value = self.build(ctx, k).cast(pl.Float64)
        return (
            pl.when(ctx.n_relevant() > 0)
            .then(value)
            .otherwise(empty_value)
            .alias(f"{self.name}@{k}")
        )


REGISTRY: dict[str, Metric] = {}
#: Other accepted names; the output column uses the canonical name.
ALIASES: dict[str, str] = {"map": "ap"}


def register(metric: Metric) -> Metric:
    """Add a metric to the registry (names are unique)."""
    if metric.name in REGISTRY:
        raise ValueError(f"metric {metric.name!r} is registered twice")
    REGISTRY[metric.name] = metric
    return metric


def resolve(name: str) -> Metric:
    """Look a metric up by name or alias.

    Examples
    --------
    >>> import frame_metrics
    >>> resolve("map").name
    'ap'
    >>> resolve("ndgc")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected a known metric name, got 'ndgc' (did you mean 'ndcg'?); known metrics: 'ap', 'dcg', 'f1', 'hit_rate', 'map', 'mrr', 'ndcg', 'precision', 'recall'
    """
    if not isinstance(name, str):
        raise InvalidOptionError(f"metrics: expected metric names as strings, got {name!r}")
    key = ALIASES.get(name.lower(), name.lower())
    if key in REGISTRY:
        return REGISTRY[key]
    known = sorted([*REGISTRY, *ALIASES])
    hint = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise InvalidOptionError(
        f"metrics: expected a known metric name, got {name!r}{suffix}; "
        f"known metrics: {', '.join(repr(m) for m in known)}"
    )


def resolve_requests(
    metrics: str | Iterable[str] | None,
    k: int | Iterable[int] | None,
    default: Iterable[str],
) -> list[tuple[Metric, int]]:
    """Turn ``metrics`` and ``k`` into the ordered, distinct (metric, k) pairs to compute.

    A name carrying its own cutoff (``"ndcg@10"``) uses it; a plain name takes every k.

    Examples
    --------
    >>> import frame_metrics
    >>> [(m.name, k) for m, k in resolve_requests(["ndcg", "map@3"], [10, 5], [])]
    [('ndcg', 5), ('ndcg', 10), ('ap', 3)]
    """
    names = [metrics] if isinstance(metrics, str) else list(default if metrics is None else metrics)
    if not names:
        raise InvalidOptionError("metrics: expected at least one metric name, got an empty list")
    ks = validate_k(k, required=False) or None
    out: list[tuple[Metric, int]] = []
    for raw in names:
        if not isinstance(raw, str):
            raise InvalidOptionError(f"metrics: expected metric names as strings, got {raw!r}")
        base, sep, cut = raw.partition("@")
        metric = resolve(base)
        if sep:
            try:
                cut_k = int(cut)
            except ValueError:
                raise InvalidOptionError(
                    f"metrics: expected '<name>@<int k>', got {raw!r}"
                ) from None
            own = validate_k(cut_k)
        else:
            if ks is None:
                ks = validate_k(None)  # raises: a plain name needs a cutoff
            own = ks
        for kk in own:
            if (metric, kk) not in out:
                out.append((metric, kk))
    return out
