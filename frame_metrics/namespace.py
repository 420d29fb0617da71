"""The ``.recmetrics`` namespace: a thin forwarder to :mod:`frame_metrics.api`.

Registered on ``polars.DataFrame`` and ``polars.LazyFrame`` at import, and on
``pandas.DataFrame`` as soon as pandas is imported (before or after this package).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import polars as pl

from frame_metrics import api
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.metrics.registry import ALIASES, REGISTRY, resolve

__all__ = ["NAMESPACE", "RecMetricsNamespace", "register_all"]

NAMESPACE = "recmetrics"


class RecMetricsNamespace:
    """Recommender metrics on this frame: ``frame.recmetrics.<method>``.

    ``evaluate`` and ``diagnostics`` take the arguments of :func:`frame_metrics.evaluate`;
    every registered metric is also a method (``ndcg``, ``recall``, ``map`` ...) that
    computes that one metric, per user unless ``aggregate=True`` (corpus metrics such as
    ``coverage`` are one value per ``by`` group, so their methods aggregate by default).

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics
    >>> recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    >>> truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1]})
    >>> recs.recmetrics.mrr(truth, k=2)["mrr@2"].item()
    0.5
    >>> recs.lazy().recmetrics.evaluate(truth, metrics="hit_rate@1").collect()["hit_rate@1"].item()
    0.0
    """

    def __init__(self, frame: Any) -> None:
        self._frame = frame

    def evaluate(self, truth: object | None = None, **kwargs: Any) -> Any:
        """Evaluate this frame's recommendations; see :func:`frame_metrics.evaluate`."""
        return api.evaluate(self._frame, truth, **kwargs)

    def compare(self, truth: object | None = None, **kwargs: Any) -> Any:
        """Compare models with intervals and paired tests; see :func:`frame_metrics.compare`.

        On a per-user result with a model column, or on stacked recommendations with
        ``truth``.
        """
        from frame_metrics.compare import compare

        return compare(self._frame, truth, **kwargs)

    def report(self, truth: object | None = None, **kwargs: Any) -> Any:
        """A report to share of this frame's recommendations; see :func:`frame_metrics.report`."""
        from frame_metrics.reports import report

        return report(self._frame, truth, **kwargs)

    def check(self, gates: object | None = None, **kwargs: Any) -> Any:
        """Judge gates on this result (means or a comparison); see :func:`frame_metrics.check`.

        ``df.recmetrics.evaluate(truth, aggregate=True).recmetrics.check({...})`` in a chain.
        """
        from frame_metrics.gates import check

        return check(self._frame, gates, **kwargs)  # type: ignore[arg-type]

    def gaps(self, group: object | None = None, **kwargs: Any) -> Any:
        """Metric gaps between user groups of per-user values; see :func:`frame_metrics.gaps`."""
        from frame_metrics.gaps import gaps

        return gaps(self._frame, group, **kwargs)

    def group_exposure(self, truth: object | None = None, **kwargs: Any) -> Any:
        """The exposure of item groups as a table; see :func:`frame_metrics.group_exposure`."""
        from frame_metrics.exposure_table import group_exposure

        return group_exposure(self._frame, truth, **kwargs)

    def exposure(self, truth: object | None = None, **kwargs: Any) -> Any:
        """Deprecated spelling of :meth:`group_exposure` (``fm.group_exposure``'s name)."""
        warnings.warn(
            "recmetrics.exposure is renamed recmetrics.group_exposure, as fm.group_exposure; "
            "the old name goes in the next release",
            FutureWarning,
            stacklevel=2,
        )
        return self.group_exposure(truth, **kwargs)

    def split(self, method: str, **kwargs: Any) -> Any:
        """Split these interactions into train and test; see :func:`frame_metrics.split`."""
        from frame_metrics.protocol import split

        return split(self._frame, method, **kwargs)

    def policy_value(self, recs: object, **kwargs: Any) -> Any:
        """The off-policy value of ``recs`` from these logs; see :func:`frame_metrics.policy_value`."""
        from frame_metrics.policy_value import policy_value

        return policy_value(self._frame, recs, **kwargs)

    def diagnose(self, truth: object | None = None, **kwargs: Any) -> Diagnostics:
        """Explain the evaluation; see :func:`frame_metrics.diagnose`."""
        return api.diagnose(self._frame, truth, **kwargs)

    def diagnostics(self, truth: object | None = None, **kwargs: Any) -> Diagnostics:
        """Deprecated spelling of :meth:`diagnose` (``fm.diagnose``'s name), for one release."""
        warnings.warn(
            "recmetrics.diagnostics is renamed recmetrics.diagnose, as fm.diagnose; "
            "the old name goes in the next release",
            FutureWarning,
            stacklevel=2,
        )
        return api.diagnose(self._frame, truth, **kwargs)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in REGISTRY and name not in ALIASES:
            raise AttributeError(f"{NAMESPACE!r} namespace has no attribute {name!r}")
        metric = resolve(name)
        frame = self._frame

        def one_metric(truth: object | None = None, **kwargs: Any) -> Any:
            if metric.population == "corpus":
                # One value per by group: there is no per-user frame to give.
                kwargs.setdefault("aggregate", True)
            return api.evaluate(frame, truth, metrics=[name], **kwargs)

        one_metric.__name__ = name
        label = name if not metric.takes_k else f"{name}@k"  # the column as called
        one_metric.__doc__ = (
            f"``{label}``: {metric.formula}. See frame_metrics.evaluate."
            + (f"\n\nScale: {metric.scale}" if metric.scale else "")
            + (f"\n\nPeers: {metric.notes}" if metric.notes else "")
        )
        return one_metric

    def __dir__(self) -> list[str]:
        return sorted([*super().__dir__(), *REGISTRY, *ALIASES])


def _register_pandas(pandas: ModuleType) -> None:
    if NAMESPACE not in getattr(pandas.DataFrame, "_accessors", set()):
        pandas.api.extensions.register_dataframe_accessor(NAMESPACE)(RecMetricsNamespace)


def _register_dask(dask_dataframe: ModuleType) -> None:
    frame = dask_dataframe.DataFrame
    if NAMESPACE not in getattr(frame, "_accessors", set()):
        from dask.dataframe.extensions import register_dataframe_accessor

        register_dataframe_accessor(NAMESPACE)(RecMetricsNamespace)  # type: ignore[no-untyped-call]


def _register_spark(dataframe_module: ModuleType) -> None:
    # Spark has no accessor API: a property on the class (classic or Connect).
    frame = dataframe_module.DataFrame
    if NAMESPACE not in vars(frame):
        setattr(frame, NAMESPACE, property(RecMetricsNamespace))


#: Modules whose frames get the namespace, and how, as soon as they are imported.
_REGISTER: dict[str, Callable[[ModuleType], None]] = {
    "pandas": _register_pandas,
    "dask.dataframe": _register_dask,
    "pyspark.sql.dataframe": _register_spark,
    "pyspark.sql.connect.dataframe": _register_spark,
}


class _ImportHook(importlib.abc.MetaPathFinder):
    """Registers an accessor right after its library is imported, if it ever is.

    Importing pandas (or dask, or pyspark) only to register an accessor would cost a
    polars-only user a fraction of a second at every start; this hook costs nothing
    until the library loads.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module
        register = _REGISTER[fullname]

        def exec_module(module: ModuleType) -> None:
            original_exec(module)
            register(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def register_all() -> None:
    """Register the namespace on polars now, and on other libraries' frames.

    pandas, dask and Spark frames get it now, or as soon as their library is imported.
    """
    for register in (pl.api.register_dataframe_namespace, pl.api.register_lazyframe_namespace):
        register(NAMESPACE)(RecMetricsNamespace)
    for name, register_frames in _REGISTER.items():
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "DataFrame"):
            register_frames(module)
        elif not any(isinstance(f, _ImportHook) and f.name == name for f in sys.meta_path):
            sys.meta_path.insert(0, _ImportHook(name))
