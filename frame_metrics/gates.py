"""Gates for pipelines: :func:`check` (definition sheet 12).

A gate is a condition on a result's value: ``"ndcg@10 >= 0.30"`` (the mean of
``fm.evaluate(..., aggregate=True)`` or of ``fm.compare``), ``"ci_low(ndcg@10) >= 0.30"``
(the lower end of ``fm.compare``'s interval: it fails a model whose interval reaches
below), or a largest drop against a baseline model (``max_drop={"ndcg@10": 0.01}``: the
baseline's mean minus the model's, absolute). :func:`check` judges every gate on every
row (model, ``by`` group) of the result and gives a frame of gate, keys, value, passed;
``raise_on_fail=True`` raises :class:`~frame_metrics.errors.GateFailedError` listing
every failure. The command line's ``--fail-under`` and ``--max-drop`` are these gates,
with exit status 3.
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import polars as pl

from frame_metrics.errors import GateFailedError, InvalidOptionError, InvalidValueError
from frame_metrics.frames import to_lazy
from frame_metrics.metric_names import joined_column

__all__ = ["Gate", "check", "parse_gates"]

FrameT = TypeVar("FrameT")

#: The comparisons a gate may make.
_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
#: What a gate reads of a metric: its mean, or an end of its interval (compare's).
_STATISTICS = ("mean", "ci_low", "ci_high")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CONDITION = re.compile(rf"^\s*(>=|<=|>|<)\s*({_NUMBER})\s*$")
_EXPRESSION = re.compile(
    rf"^\s*(?P<target>\S*[^\s<>=!])\s*(?P<op>>=|<=|>|<)\s*(?P<bound>{_NUMBER})\s*$"
)
_TARGET = re.compile(r"^\s*(?P<stat>[a-z_]+)\((?P<metric>.+)\)\s*$")
#: The key columns of a result that name the model.
_MODEL = "model"


@dataclass(frozen=True)
class Gate:
    """One condition: ``statistic(metric) op bound``; ``drop``: a largest drop.

    ``metric`` is the result's metric column (``"ndcg@10"``); ``statistic`` one of
    ``mean``, ``ci_low``, ``ci_high``, or ``drop`` (the baseline's mean minus the
    model's, which must be ``<= bound``).
    """

    metric: str
    statistic: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        """The gate as written back: ``ndcg@10 >= 0.3``, ``ci_low(ndcg@10) >= 0.3``."""
        target = self.metric if self.statistic == "mean" else f"{self.statistic}({self.metric})"
        return f"{target} {self.op} {self.bound:g}"

    def passes(self, value: float | None) -> bool:
        """Whether ``value`` meets it; a missing value (an undefined mean) does not."""
        if value is None or math.isnan(value):
            return False
        return _OPERATORS[self.op](value, self.bound)


def parse_gates(
    gates: str | Iterable[str] | Mapping[str, object] | None,
    max_drop: Mapping[str, float] | None = None,
) -> list[Gate]:
    """The gates written as text or as a mapping, and the largest drops.

    A mapping's key is the metric (or ``ci_low(metric)``), its value a condition
    (``">= 0.30"``) or a number (``0.30``: at least that). Text is a whole gate
    (``"ci_low(ndcg@10) >= 0.30"``).

    Examples
    --------
    >>> [g.text for g in parse_gates({"ndcg@10": ">= 0.3", "ci_low(recall@5)": 0.2})]
    ['ndcg@10 >= 0.3', 'ci_low(recall@5) >= 0.2']
    >>> [g.text for g in parse_gates("rmse <= 0.9", max_drop={"ndcg@10": 0.01})]
    ['rmse <= 0.9', 'drop(ndcg@10) <= 0.01']
    >>> parse_gates("ndcg@10 => 0.3")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: gates: expected a gate such as 'ndcg@10 >= 0.30' or 'ci_low(ndcg@10) >= 0.30' (a metric, or mean/ci_low/ci_high of one; >=, >, <= or <; a number), got 'ndcg@10 => 0.3'
    """
    out: list[Gate] = []
    if isinstance(gates, Mapping):
        for target, condition in gates.items():
            if isinstance(condition, (int, float)) and not isinstance(condition, bool):
                op, bound = ">=", float(condition)
            else:
                found = _CONDITION.match(str(condition))
                if found is None:
                    raise InvalidOptionError(
                        f"expected a condition such as '>= 0.30' (>=, >, <= or <, a number) "
                        f"for {target!r}, got {condition!r}",
                        option="gates",
                    )
                op, bound = found.group(1), float(found.group(2))
            out.append(_gate(str(target), op, bound, str(target)))
    elif gates is not None:
        for text in [gates] if isinstance(gates, str) else list(gates):
            found = _EXPRESSION.match(str(text))
            if found is None:
                raise InvalidOptionError(
                    "expected a gate such as 'ndcg@10 >= 0.30' or 'ci_low(ndcg@10) >= 0.30' "
                    "(a metric, or mean/ci_low/ci_high of one; >=, >, <= or <; a number), "
                    f"got {text!r}",
                    option="gates",
                )
            out.append(_gate(found["target"], found["op"], float(found["bound"]), str(text)))
    for metric, bound in (max_drop or {}).items():
        if not isinstance(bound, (int, float)) or isinstance(bound, bool) or bound < 0:
            raise InvalidOptionError(
                f"expected a number >= 0 (the largest drop of the mean, absolute) for "
                f"{metric!r}, got {bound!r}",
                option="max_drop",
            )
        out.append(Gate(metric.strip(), "drop", "<=", float(bound)))
    return out


def _gate(target: str, op: str, bound: float, written: str) -> Gate:
    """A gate on ``target`` (a metric, or ``statistic(metric)``)."""
    if not math.isfinite(bound):
        raise InvalidOptionError(f"expected a finite bound, got {written!r}", option="gates")
    found = _TARGET.match(target)
    # ``ap(ap_denominator=relevant)`` is a metric with an option, ``ci_lo(...)`` a typo.
    hint = difflib.get_close_matches(found["stat"], _STATISTICS, n=1, cutoff=0.8) if found else []
    if found is None or (found["stat"] not in _STATISTICS and not hint):
        return Gate(target.strip(), "mean", op, bound)
    statistic = found["stat"]
    if statistic not in _STATISTICS:
        raise InvalidOptionError(
            f"expected one of {', '.join(_STATISTICS)} of a metric in a gate, got "
            f"{statistic!r}{f' (did you mean {hint[0]!r}?)' if hint else ''} in {written!r}",
            option="gates",
        )
    return Gate(found["metric"].strip(), statistic, op, bound)


def check(
    result: FrameT,
    gates: str | Iterable[str] | Mapping[str, object] | None = None,
    *,
    max_drop: Mapping[str, float] | None = None,
    baseline_model: object | None = None,
    model: str = _MODEL,
    raise_on_fail: bool = False,
) -> FrameT:
    """Judge gates on a result: a row per gate and model (or ``by`` group).

    Parameters
    ----------
    result
        ``fm.evaluate(..., aggregate=True)`` (its metric columns are means) or
        ``fm.compare(...)`` (a row per metric and model: ``mean``, ``ci_low``,
        ``ci_high``). Any frame kind; the result is of the same kind.
    gates
        ``{"ndcg@10": ">= 0.30", "ci_low(ndcg@10)": ">= 0.25"}`` (a number alone means
        ``>=``), or the gates as text: ``"ndcg@10 >= 0.30"`` or a list of them. The
        operators: ``>=``, ``>``, ``<=``, ``<``. ``ci_low``/``ci_high`` need
        ``fm.compare``'s intervals.
    max_drop
        ``{"ndcg@10": 0.01}``: fails a model whose mean is below ``baseline_model``'s by
        more than 0.01 (absolute). The baseline's own row is not judged.
    baseline_model
        The model ``max_drop`` measures from: a value of the ``model`` column (for a
        ``fm.compare`` result in baseline mode, its baseline by default).
    model
        The model column of an evaluate result (``by=model``).
    raise_on_fail
        Raise :class:`~frame_metrics.errors.GateFailedError` (listing every failed gate
        and model) instead of returning the frame when a gate fails.

    Returns
    -------
    FrameT
        Columns ``gate`` (as written back), the result's keys (``by`` columns, model),
        ``value`` (what the gate read; null when undefined, which fails) and
        ``passed``; in the order of the gates, then of the result's rows.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> means = pl.DataFrame({"model": ["a", "b"], "n_users": [100, 100],
    ...                       "ndcg@10": [0.3125, 0.28125]})
    >>> fm.check(means, {"ndcg@10": ">= 0.30"}).rows()
    [('ndcg@10 >= 0.3', 'a', 0.3125, True), ('ndcg@10 >= 0.3', 'b', 0.28125, False)]
    >>> fm.check(means, max_drop={"ndcg@10": 0.02}, baseline_model="a").rows()  # 0.3125 - 0.28125
    [('drop(ndcg@10) <= 0.02', 'b', 0.03125, False)]
    >>> fm.check(means, "ndcg@10 >= 0.3", raise_on_fail=True)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.GateFailedError: gates: 1 of 2 failed: ndcg@10 >= 0.3 for model='b': 0.28125
    """
    parsed = parse_gates(gates, max_drop)
    if not parsed:
        raise InvalidOptionError(
            "expected at least one gate (gates= or max_drop=), got none", option="gates"
        )
    source = to_lazy(result, "result")
    frame = source.lazy.collect()
    table, keys, metrics, stats = _values(frame, model)
    rows: list[dict[str, Any]] = []
    drops = [g for g in parsed if g.statistic == "drop"]
    baseline = _baseline(frame, table, keys, model, baseline_model) if drops else None
    for gate in parsed:
        values = _read(table, gate, metrics, stats, keys)
        if gate.statistic == "drop":
            assert baseline is not None
            values = _drops(values, gate, keys, model, baseline, frame)
        for key, value in values:
            rows.append({"gate": gate.text, **key, "value": value, "passed": gate.passes(value)})
    schema: dict[str, Any] = {
        "gate": pl.String,
        **{k: frame.schema[k] for k in keys},
        "value": pl.Float64,
        "passed": pl.Boolean,
    }
    out = pl.DataFrame(rows, schema=schema, orient="row")
    if raise_on_fail:
        failed = out.filter(~pl.col("passed"))
        if failed.height:
            raise GateFailedError(failed_lines(out, keys), failed=failed, n_gates=out.height)
    return cast("FrameT", source.give_back(out))


def failed_lines(judged: pl.DataFrame, keys: list[str] | None = None) -> list[str]:
    """One line per failed (gate, model): ``ndcg@10 >= 0.3 for model='b': 0.28``."""
    keys = (
        [c for c in judged.columns if c not in ("gate", "value", "passed")]
        if keys is None
        else keys
    )
    lines = []
    for row in judged.filter(~pl.col("passed")).iter_rows(named=True):
        who = ", ".join(f"{k}={row[k]!r}" for k in keys)
        value = "undefined (null)" if row["value"] is None else f"{row['value']:.6g}"
        lines.append(f"{row['gate']}{f' for {who}' if who else ''}: {value}")
    return lines


def _values(
    frame: pl.DataFrame, model: str
) -> tuple[pl.DataFrame, list[str], list[str] | None, list[str]]:
    """The result as (keys..., metric, statistic, value) rows, and what it has.

    Also its key columns, its metrics (None: a comparison without rows, whose metrics
    are not known) and the statistics it has of them.
    """
    if {"metric", "k", "mean"} <= set(frame.columns):  # fm.compare's
        stats = [s for s in _STATISTICS if s in frame.columns]
        start = frame.columns.index("metric")
        keys = [*frame.columns[:start], "model"]
        # A model is on several rows when every pair is compared: its values are one.
        own = frame.with_columns(joined_column().alias("_fm_metric")).unique(
            [*keys, "_fm_metric"], keep="first", maintain_order=True
        )
        table = own.unpivot(stats, index=[*keys, "_fm_metric"], variable_name="_fm_stat")
        table = table.rename({"_fm_metric": "_fm_column"})
        metrics = table["_fm_column"].unique(maintain_order=True).to_list()
        return table, keys, metrics if frame.height else None, stats
    if "n_users" not in frame.columns:
        raise InvalidValueError(
            "result: expected the means of fm.evaluate(..., aggregate=True) (with n_users) or "
            f"the rows of fm.compare (metric, k, mean), found columns {frame.columns}",
            frame="result",
        )
    start = frame.columns.index("n_users")
    keys = frame.columns[:start]
    metrics = [c for c in frame.columns[start + 1 :] if frame.schema[c].is_numeric()]
    table = frame.unpivot(metrics, index=keys, variable_name="_fm_column").with_columns(
        _fm_stat=pl.lit("mean")
    )
    return table, keys, metrics, ["mean"]


def _read(
    table: pl.DataFrame,
    gate: Gate,
    metrics: list[str] | None,
    stats: list[str],
    keys: list[str],
) -> list[tuple[dict[str, Any], float | None]]:
    """The gate's value on each row of the result."""
    statistic = "mean" if gate.statistic == "drop" else gate.statistic
    if metrics is None:
        return []
    metric = _metric_column(gate.metric, metrics)
    if statistic not in stats:
        raise InvalidOptionError(
            f"expected a result with intervals for the gate {gate.text!r}, got one without: "
            "ci_low and ci_high are fm.compare's",
            option="gates",
        )
    rows = table.filter((pl.col("_fm_column") == metric) & (pl.col("_fm_stat") == statistic))
    return [
        ({k: row[k] for k in keys}, None if row["value"] is None else float(row["value"]))
        for row in rows.iter_rows(named=True)
    ]


def _metric_column(name: str, columns: list[str]) -> str:
    """The result's column a gate names (as the result names it: ``ndcg@10``)."""
    if name in columns:
        return name
    hint = difflib.get_close_matches(name, columns, n=1, cutoff=0.6)
    raise InvalidOptionError(
        f"expected a metric of the result in a gate, got {name!r}"
        f"{f' (did you mean {hint[0]!r}?)' if hint else ''}, not computed; the result's "
        f"metrics: {', '.join(repr(c) for c in columns)}",
        option="gates",
        columns=[name],
    )


def _baseline(
    frame: pl.DataFrame, table: pl.DataFrame, keys: list[str], model: str, wanted: object
) -> object:
    """The model ``max_drop`` measures from."""
    column = "model" if "baseline" in frame.columns else model
    if column not in keys:
        raise InvalidValueError(
            f"result: expected a model column {column!r} for max_drop (a model against a "
            f"baseline), found keys {keys}",
            frame="result",
            columns=[column],
        )
    models = frame[column].unique(maintain_order=True).to_list()
    if wanted is None:
        baselines = frame["baseline"].unique().to_list() if "baseline" in frame.columns else []
        if len(baselines) != 1:
            raise InvalidOptionError(
                "expected the model max_drop measures from, got none; pass baseline_model= "
                f"(one of {', '.join(repr(m) for m in models)})",
                option="baseline_model",
            )
        return baselines[0]
    for m in models:
        if m == wanted or (isinstance(wanted, str) and str(m) == wanted):
            return m
    raise InvalidOptionError(
        f"expected one of the models {', '.join(repr(m) for m in models)}, got {wanted!r}",
        option="baseline_model",
    )


def _drops(
    values: list[tuple[dict[str, Any], float | None]],
    gate: Gate,
    keys: list[str],
    model: str,
    baseline: object,
    frame: pl.DataFrame,
) -> list[tuple[dict[str, Any], float | None]]:
    """Each model's drop from the baseline's mean, in the same ``by`` group."""
    column = "model" if "baseline" in frame.columns else model
    groups = [k for k in keys if k != column]
    base = {
        tuple(key[g] for g in groups): value for key, value in values if key[column] == baseline
    }
    out = []
    for key, value in values:
        if key[column] == baseline:
            continue
        reference = base.get(tuple(key[g] for g in groups))
        drop = None if value is None or reference is None else reference - value
        out.append((key, drop))
    return out
