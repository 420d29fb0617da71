"""Add a metric family from outside the package: one module, registered here.

A family is an instance of :class:`Family` (its per-user query, how its values add up
over users, what it leaves out), the registry entries of its metrics (:class:`Metric`),
and the frames (:class:`ExtraInput`) and columns (:class:`Role`) it reads beyond the
package's. :func:`register_family` adds them all at once: ``fm.evaluate`` then takes the
frames and columns as keywords (its ``**more``) and the metric names in ``metrics=``;
``fm.diagnose``, the bucket runner, Spark and Dask compute them as the package's own.
:func:`unregister_family` removes them all.

On Spark, the family's module must be importable on the workers (installed, or on their
``PYTHONPATH``): registering it at the module's import is what makes a worker know it.

Examples
--------
A family computing each user's mean price of the top-k items, from an item table
``prices`` with a ``price`` column:

>>> import polars as pl
>>> import frame_metrics as fm
>>> from frame_metrics import extend
>>> class Price(extend.Family):
...     name = "price"
...     def per_user(self, ctx):
...         price = ctx.spec.columns.column("price")
...         prices = ctx.inputs.extra("prices", [ctx.spec.columns.item, price])
...         rows = ctx.prepared.top.join(prices.frame, on=[*prices.by, ctx.spec.columns.item])
...         return rows.group_by(ctx.keys).agg(
...             q.value(None) for q in ctx.requests(self.name))
>>> mean_price = extend.Metric(
...     "mean_price",
...     build=lambda ctx, k: pl.col("cost").filter(pl.col(extend.RANK) <= k).mean(),
...     reference=lambda case, k: None,
...     formula="mean over the top k of price(i)",
...     bounds=(0.0, None),
...     needs=frozenset({"prices"}),
...     family="price",
...     population="listed",
... )
>>> extend.register_family(
...     Price(),
...     metrics=[mean_price],
...     inputs=[extend.ExtraInput("prices", keyed=False, reads=("by", "item", "price"),
...             needs=frozenset({"prices"}), what="item prices", doc="", help="")],
...     roles=[extend.Role("price", "str", "price", "", "--price-col", "price of an item")],
... )
>>> recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
>>> prices = pl.DataFrame({"item": ["a", "b"], "cost": [2.0, 4.0]})
>>> fm.evaluate(recs, metrics="mean_price@2", prices=prices, price="cost").row(0)
(1, 3.0)
>>> extend.unregister_family("price")
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from frame_metrics.errors import InvalidOptionError
from frame_metrics.families import FAMILIES
from frame_metrics.family import Context, DiagnosticCount, Family, Partitioned
from frame_metrics.keywords import ExtraInput, Role, register_input, register_role, unregister
from frame_metrics.metrics.registry import REGISTRY, Metric, register
from frame_metrics.prepare import RANK

__all__ = [
    "RANK",
    "Context",
    "DiagnosticCount",
    "ExtraInput",
    "Family",
    "Metric",
    "Partitioned",
    "Role",
    "register_family",
    "unregister_family",
]

#: What each family registered from outside the package, to remove it again.
_ADDED: dict[str, tuple[list[str], list[str]]] = {}


def register_family(
    family: Family,
    *,
    metrics: Iterable[Metric],
    inputs: Iterable[ExtraInput] = (),
    roles: Iterable[Role] = (),
) -> None:
    """Add a family, its metrics and the frames and columns it reads.

    Each metric's ``family`` is the family's ``name``; names of metrics, frames and
    columns must be new. The family runs in its ``order`` among the package's.
    """
    metrics, inputs, roles = list(metrics), list(inputs), list(roles)
    if family.name in FAMILIES:
        raise InvalidOptionError(
            f"expected a family name not in use, got {family.name!r}", option="family"
        )
    for metric in metrics:
        if metric.family != family.name or metric.name in REGISTRY:
            raise InvalidOptionError(
                f"expected a new metric of family {family.name!r}, got {metric.name!r} "
                f"(family {metric.family!r}"
                + (", already registered)" if metric.name in REGISTRY else ")"),
                option="metrics",
            )
    # Outside the package: taken by evaluate's **more, not its written signature. Roles
    # first: an input's reads may name them.
    added: list[str] = []
    try:
        for row in roles:
            register_role(replace(row, builtin=False))
            added.append(row.name)
        for extra in inputs:
            register_input(replace(extra, builtin=False))
            added.append(extra.name)
    except InvalidOptionError:
        for name in added:  # all or nothing: a refused row leaves no other behind
            unregister(name)
        raise
    for metric in metrics:
        register(metric)
    FAMILIES[family.name] = family
    ordered = sorted(FAMILIES.values(), key=lambda f: (f.order, f.name))
    FAMILIES.clear()
    FAMILIES.update((f.name, f) for f in ordered)
    _ADDED[family.name] = (
        [m.name for m in metrics],
        [*(e.name for e in inputs), *(r.name for r in roles)],
    )


def unregister_family(name: str) -> None:
    """Remove a family :func:`register_family` added, its metrics, frames and columns."""
    metrics, keywords = _ADDED.pop(name)
    for metric in metrics:
        REGISTRY.pop(metric, None)
    for keyword in keywords:
        unregister(keyword)
    FAMILIES.pop(name, None)
