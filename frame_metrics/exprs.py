"""Metrics as polars expressions, for a caller's own ``group_by(...).agg(...)``.

Every registered metric is a function here: ``exprs.<metric>(k, *, rank="rank",
relevance="relevance", threshold=None, gain="linear", ap_denominator="min_k",
empty="skip")``. Each reads one user's rows of a long table (a null ``rank`` marks a
relevant item that was not recommended) and returns a ``pl.Expr`` named
``"<metric>@<k>"``. ``rank`` and ``relevance`` take a column name or an expression.

The expressions assume one row per (user, item) with unique ranks: they do not check
input the way :func:`frame_metrics.evaluate` does. A user with no relevant item gets
null (``empty="skip"``), which ``mean()`` ignores, or 0 (``empty="zero"``).

Examples
--------
>>> import polars as pl
>>> import frame_metrics as fm
>>> long = pl.DataFrame({
...     "user": [1, 1, 1, 2, 2],
...     "rank": [1, 2, None, 1, 2],
...     "relevance": [1, 0, 1, 0, 0],
... })
>>> long.group_by("user").agg(fm.exprs.recall(2), fm.exprs.ndcg(2)).sort("user")
shape: (2, 3)
┌──────┬──────────┬──────────┐
│ user ┆ recall@2 ┆ ndcg@2   │
│ ---  ┆ ---      ┆ ---      │
│ i64  ┆ f64      ┆ f64      │
╞══════╪══════════╪══════════╡
│ 1    ┆ 0.5      ┆ 0.613147 │
│ 2    ┆ null     ┆ null     │
└──────┴──────────┴──────────┘

User 1: one of two relevant items at rank 1, so nDCG@2 = 1 / (1 + 1/log2(3)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidOptionError
from frame_metrics.metrics.context import RankingContext
from frame_metrics.metrics.registry import ALIASES, REGISTRY, resolve
from frame_metrics.options import DEFAULT_K, MetricOptions, is_int, validate_k

__all__ = ["expressible", "metric"]  # and one function per registered metric, via __getattr__


def metric(
    name: str,
    k: int | None = None,
    *,
    rank: str | pl.Expr = "rank",
    relevance: str | pl.Expr = "relevance",
    threshold: float | None = None,
    gain: str = "linear",
    ap_denominator: str = "min_k",
    empty: str = "skip",
    persistence: float | None = None,
) -> pl.Expr:
    """The expression of the registered metric ``name`` at cutoff ``k``.

    Examples
    --------
    >>> import frame_metrics as fm
    >>> fm.exprs.metric("map", 10).meta.output_name()
    'ap@10'
    >>> fm.exprs.metric("ndcg", 0)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: k: expected an int in [1, 1048576] or a list of them, got 0
    """
    entry = resolve(name)
    names = expressible()
    if entry.name not in names:
        raise InvalidOptionError(
            f"expected a metric computed from rank and relevance alone "
            f"({', '.join(sorted(names))}), got {name!r}; use frame_metrics.evaluate",
            option="name",
        )
    if entry.takes_k:
        (k,) = validate_k(DEFAULT_K if k is None else k if is_int(k) else [k])
    else:
        k = 0  # r_precision, rbp: the whole list
    if threshold == 0:
        raise InvalidOptionError(
            "expected a number > 0 or None in a long table (relevance 0 marks "
            "a recommended item that is not relevant there), got 0",
            option="threshold",
        )
    options = MetricOptions(
        threshold,
        gain,  # type: ignore[arg-type]
        ap_denominator,  # type: ignore[arg-type]
        empty,  # type: ignore[arg-type]
        persistence=persistence,
    )
    return entry.expr(RankingContext.from_columns(rank, relevance, options), k)


def expressible() -> frozenset[str]:
    """The metrics an expression can compute: those that read only ranks and relevance.

    Read from the registry when asked: the families register their entries when the
    package is imported, after this module.

    Examples
    --------
    >>> from frame_metrics.exprs import expressible
    >>> "ndcg" in expressible(), "coverage" in expressible()
    (True, False)
    """
    return frozenset(
        name
        for name, m in REGISTRY.items()
        if m.family == "ranking" and m.needs == frozenset({"truth"})
    )


def _bound(name: str) -> Callable[..., pl.Expr]:
    entry = resolve(name)

    def build(k: int, **kwargs: Any) -> pl.Expr:
        return metric(name, k, **kwargs)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (
        f"``{entry.name}@k`` as a polars expression over one user's rows: {entry.formula}.\n\n"
        "Keyword arguments as in :func:`frame_metrics.exprs.metric`."
    )
    return build


def __getattr__(name: str) -> Callable[..., pl.Expr]:
    if ALIASES.get(name, name) in expressible():
        return _bound(name)
    raise AttributeError(f"module 'frame_metrics.exprs' has no attribute {name!r}")


def __dir__() -> list[str]:
    names = expressible()
    return sorted([*globals(), *names, *(a for a, n in ALIASES.items() if n in names)])
