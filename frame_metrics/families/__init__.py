"""The metric families: one module each, found here, run by the planner in ``order``.

Each module defines ``FAMILY``, an instance of :class:`~frame_metrics.family.Family`,
and registers its metrics' entries when imported (the ranking family, a package, in
its submodules). A new family is a new module here and its tests: nothing else lists
the families.
"""

from __future__ import annotations

import importlib
import pkgutil

from frame_metrics.family import Family

__all__ = ["FAMILIES", "Family"]


def _discover() -> dict[str, Family]:
    found: list[Family] = []
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        found.append(loaded.FAMILY)
    return {f.name: f for f in sorted(found, key=lambda f: (f.order, f.name))}


#: Every family by its registry name, in plan order.
FAMILIES: dict[str, Family] = _discover()
