"""Plots for notebooks: metric@k curves, per-user distributions, forest plots.

Each function takes a frame of any supported kind (the output of
:func:`frame_metrics.compare`, :func:`frame_metrics.gaps` or :func:`frame_metrics.evaluate`)
and returns a
``matplotlib.figure.Figure`` (``pip install 'frame_metrics[plot]'``), open in pyplot like
any ``plt.figure()``: ``plt.show()`` shows it in a script, and a notebook shows it once at
the end of the cell (assign it, ``fig = fm.plot.forest(result)``, or end the line with
``;``: a bare last expression would also be shown as the cell's value). Nothing here
computes a metric: the numbers are those of the frame given.

Examples
--------
>>> import frame_metrics as fm
>>> from frame_metrics.datasets import synthetic
>>> recs, truth = synthetic(n_users=200)
>>> result = fm.compare(recs, truth, metrics="ndcg", k=[1, 5, 10], baseline_model="popularity",
...                     n_resamples=200)
>>> fig = fm.plot.metric_at_k(result, "ndcg")
>>> [ax.get_title() for ax in fig.axes]
['ndcg@k']
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidOptionError, MissingColumnsError
from frame_metrics.frames import to_lazy
from frame_metrics.gaps import GROUP
from frame_metrics.gaps import gaps as user_gaps

__all__ = ["distribution", "forest", "gaps", "group_gaps", "metric_at_k"]


def _new_figure(**kwargs: Any) -> Any:
    """A pyplot figure, left open like any ``plt.figure()``.

    Open, so ``plt.show()`` shows it in a script, and a notebook's inline backend shows
    it once at the end of the cell: write ``fig = fm.plot.forest(result)`` (or end the
    line with ``;``), as a bare last expression is also shown as the cell's value.
    """
    try:
        pyplot = importlib.import_module("matplotlib.pyplot")
    except ImportError:  # pragma: no cover - matplotlib is in the dev extra
        raise ImportError(
            "frame_metrics.plot needs matplotlib: pip install 'frame_metrics[plot]'"
        ) from None
    return pyplot.figure(**kwargs)


def _frame(frame: object, needed: Sequence[str]) -> pl.DataFrame:
    df = to_lazy(frame, "frame").lazy.collect()
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise MissingColumnsError("frame", missing, df.columns)
    return df


def _segments(df: pl.DataFrame, by: Sequence[str]) -> list[tuple[str, pl.DataFrame]]:
    if not by:
        return [("", df)]
    parts = df.partition_by(list(by), as_dict=True, maintain_order=True)
    return [
        (", ".join(f"{b}={v}" for b, v in zip(by, key, strict=True)), part)
        for key, part in sorted(parts.items(), key=lambda kv: tuple(str(x) for x in kv[0]))
    ]


def metric_at_k(
    result: object,
    metric: str,
    *,
    by: str | Sequence[str] | None = None,
    ax: Any = None,
) -> Any:
    """``metric@k`` against k, one line per model, with its confidence band.

    Parameters
    ----------
    result
        The output of :func:`frame_metrics.compare` (``metric``, ``k``, ``model``,
        ``mean``, ``ci_low``, ``ci_high``), computed at several k.
    metric
        The metric to draw (``"ndcg"``).
    by
        Segment columns of ``result``: one panel per segment.
    ax
        A matplotlib Axes to draw in (one segment only); default: a new figure.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> result = pl.DataFrame({"metric": "ndcg", "k": [5, 10] * 2, "model": ["a", "a", "b", "b"],
    ...                        "mean": [0.1, 0.12, 0.2, 0.22], "ci_low": [0.08, 0.1, 0.18, 0.2],
    ...                        "ci_high": [0.12, 0.14, 0.22, 0.24]})
    >>> fig = fm.plot.metric_at_k(result, "ndcg")
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['a', 'b']
    """
    segs = [by] if isinstance(by, str) else list(by or [])
    df = _frame(result, ["metric", "k", "model", "mean", "ci_low", "ci_high", *segs])
    # Every pair compared: a model is on a row per pair, its mean the same on each.
    df = df.filter(pl.col("metric") == metric).unique([*segs, "k", "model"], maintain_order=True)
    if df.is_empty():
        raise InvalidOptionError(
            f"expected one of {sorted(set(_frame(result, ['metric'])['metric']))}, got {metric!r}",
            option="metric",
        )
    panels = _segments(df, segs)
    if ax is None:
        fig = _new_figure(figsize=(5 * len(panels), 3.5))
        axes = list(fig.subplots(1, len(panels), squeeze=False, sharey=True)[0])
    else:
        fig, axes = ax.figure, [ax]
    for panel_ax, (label, part) in zip(axes, panels, strict=False):
        for model in sorted(part["model"].unique().to_list()):
            rows = part.filter(pl.col("model") == model).sort("k")
            ks = rows["k"].to_list()
            (line,) = panel_ax.plot(ks, rows["mean"].to_list(), marker="o", label=model)
            panel_ax.fill_between(
                ks,
                rows["ci_low"].fill_null(float("nan")).to_list(),
                rows["ci_high"].fill_null(float("nan")).to_list(),
                color=line.get_color(),
                alpha=0.2,
            )
        panel_ax.set_xlabel("k")
        panel_ax.set_title(f"{metric}@k" + (f" ({label})" if label else ""))
        panel_ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"mean {metric}@k")
    axes[0].legend(title="model")
    fig.tight_layout()
    return fig


def distribution(
    per_user: object,
    column: str,
    *,
    model: str = "model",
    ax: Any = None,
) -> Any:
    """The distribution of one per-user metric, per model: empirical CDFs.

    An ECDF shows what a histogram hides for these metrics: the mass at 0 (users with no
    hit) and at 1, and where two models cross.

    Parameters
    ----------
    per_user
        Per-user values (the output of :func:`frame_metrics.evaluate` with ``model`` in
        ``by``).
    column
        The metric column (``"ndcg@10"``).
    model
        The column naming the model.
    ax
        A matplotlib Axes to draw in; default: a new figure.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> per_user = pl.DataFrame({"model": ["a", "a", "b", "b"], "user": [1, 2, 1, 2],
    ...                          "ndcg@10": [0.0, 0.5, 0.2, 0.9]})
    >>> fig = fm.plot.distribution(per_user, "ndcg@10")
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['a (n=2, 50% at 0)', 'b (n=2, 0% at 0)']
    """
    df = _frame(per_user, [model, column])
    if ax is None:
        fig = _new_figure(figsize=(5.5, 3.5))
        ax = fig.subplots()
    else:
        fig = ax.figure
    for name in sorted(df[model].cast(pl.String).unique().to_list()):
        values = (
            df.filter(pl.col(model).cast(pl.String) == name)[column].drop_nulls().sort().to_list()
        )
        if not values:
            continue
        n = len(values)
        share_zero = sum(v == 0 for v in values) / n
        ax.step(
            values,
            [(i + 1) / n for i in range(n)],
            where="post",
            label=f"{name} (n={n}, {share_zero:.0%} at 0)",
        )
    ax.set_xlabel(column)
    ax.set_ylabel("share of users <= x")
    ax.set_title(f"{column} per user")
    ax.grid(alpha=0.3)
    ax.legend(title="model")
    fig.tight_layout()
    return fig


def forest(
    result: object,
    *,
    by: str | Sequence[str] | None = None,
    adjusted: bool = True,
    alpha: float = 0.05,
    ax: Any = None,
) -> Any:
    """Each model's difference to the baseline per metric@k, with its interval.

    A filled marker is significant under the paired t-test (corrected when ``adjusted``)
    at ``alpha``; an open one is not. The dashed line is no difference.

    Parameters
    ----------
    result
        The output of :func:`frame_metrics.compare`.
    by
        Segment columns of ``result``: their values join each row's label.
    adjusted
        Judge significance on ``p_ttest_adj`` (default) or the raw ``p_ttest``.
    alpha
        The significance level of the markers.
    ax
        A matplotlib Axes to draw in; default: a new figure.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> per_user = pl.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "user": [1, 2, 3, 4] * 2,
    ...                          "hit_rate@1": [0.0, 1, 0, 0, 1, 1, 1, 0]})
    >>> fig = fm.plot.forest(fm.compare(per_user, baseline_model="a", n_resamples=200))
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['hit_rate@1  b']

    Every pair compared: each row names its pair (model - baseline).

    >>> three = pl.concat([per_user, per_user.filter(model="b").with_columns(model=pl.lit("c"))])
    >>> fig = fm.plot.forest(fm.compare(three, n_resamples=200))
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['hit_rate@1  b - a', 'hit_rate@1  c - a', 'hit_rate@1  c - b']
    """
    segs = [by] if isinstance(by, str) else list(by or [])
    p_col = "p_ttest_adj" if adjusted else "p_ttest"
    df = _frame(
        result, ["metric", "k", "model", "baseline", "diff", "diff_low", "diff_high", p_col, *segs]
    ).filter(pl.col("diff").is_not_null())
    if ax is None:
        fig = _new_figure(figsize=(6.5, max(2.0, 0.35 * df.height + 1.0)))
        ax = fig.subplots()
    else:
        fig = ax.figure
    labels = []
    colors: dict[str, Any] = {}
    baselines = df["baseline"].unique(maintain_order=True).to_list()
    for y, row in enumerate(df.iter_rows(named=True)):
        k = "" if row["k"] is None else f"@{row['k']}"
        seg = ", ".join(str(row[s]) for s in segs)
        # Every pair compared: each row names its pair.
        pair = row["model"] if len(baselines) < 2 else f"{row['model']} - {row['baseline']}"
        labels.append(f"{row['metric']}{k}  {pair}" + (f"  [{seg}]" if seg else ""))
        color = colors.setdefault(row["model"], f"C{len(colors)}")
        significant = row[p_col] is not None and row[p_col] < alpha
        low, high = row["diff_low"], row["diff_high"]
        if low is not None and high is not None:
            ax.plot([low, high], [y, y], color=color, lw=2)
        ax.plot(
            [row["diff"]],
            [y],
            marker="o",
            color=color,
            markerfacecolor=color if significant else "white",
            markersize=7,
        )
    ax.axvline(0.0, color="grey", ls="--", lw=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    baseline = baselines[0] if len(baselines) == 1 else "baseline"
    ax.set_xlabel(f"difference to {baseline} (mean over paired users)")
    ax.set_title(f"vs {baseline}: filled = {p_col} < {alpha}")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


#: The columns of a :func:`frame_metrics.gaps` result that :func:`gaps` draws.
_GAPS_COLUMNS = ("metric", "k", GROUP, "n_users", "mean", "diff", "diff_low", "diff_high", "range")


def group_gaps(
    frame: object,
    group: object | None = None,
    *,
    by: str | Sequence[str] | None = None,
    ax: Any = None,
    **gaps_kwargs: Any,
) -> Any:
    """Each metric's group means, and the gap between the groups with its interval.

    Two panels sharing one row per (``by`` group, metric, cutoff): on the left each
    group's mean (a colour per group); on the right, with two groups, the difference
    (first minus second group) and its bootstrap interval, with a dashed line at no
    difference; with more groups, the range of the group means (an open marker).

    Parameters
    ----------
    frame
        The output of :func:`frame_metrics.gaps`, or per-user values, then passed to it
        with ``group``, ``by`` and ``gaps_kwargs`` first.
    group
        Per-user input: the groups (see :func:`frame_metrics.gaps`).
    by
        The ``by`` columns (models) of ``frame``: their values join each row's label.
    ax
        A pair of matplotlib Axes to draw in (means, gaps); default: a new figure.
    **gaps_kwargs
        Per-user input: passed to :func:`frame_metrics.gaps` (``train=``, ``seed=`` ...).

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> per_user = pl.DataFrame({"user": [1, 2, 3, 4], "group": ["a", "a", "b", "b"],
    ...                          "ndcg@10": [0.25, 0.75, 0.0, 0.5]})
    >>> fig = fm.plot.group_gaps(per_user, "group", n_resamples=200)
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['ndcg@10']
    >>> fig.axes[1].get_xlabel()
    'difference of the means, a - b (bootstrap interval)'
    """
    segs = [by] if isinstance(by, str) else list(by or [])
    df = to_lazy(frame, "frame").lazy.collect()
    if not all(c in df.columns for c in _GAPS_COLUMNS[:5]):
        df = user_gaps(df, group, by=by, **gaps_kwargs)
    df = _frame(df, [*_GAPS_COLUMNS, *segs])
    groups = df[GROUP].unique().sort().to_list()
    rows = df.unique([*segs, "metric", "k"], maintain_order=True)
    if ax is None:
        fig = _new_figure(figsize=(9.0, max(2.0, 0.4 * rows.height + 1.2)))
        mean_ax, gap_ax = fig.subplots(1, 2, sharey=True)
    else:
        mean_ax, gap_ax = ax
        fig = mean_ax.figure
    labels = []
    for y, row in enumerate(rows.iter_rows(named=True)):
        k = "" if row["k"] is None else f"@{row['k']}"
        seg = ", ".join(str(row[s]) for s in segs)
        labels.append(f"{row['metric']}{k}" + (f"  [{seg}]" if seg else ""))
        same = pl.all_horizontal(
            *[
                pl.col(c).is_null() if row[c] is None else pl.col(c) == row[c]
                for c in [*segs, "metric", "k"]
            ]
        )
        for i, g in enumerate(groups):
            means = df.filter(same & (pl.col(GROUP) == g))["mean"].drop_nulls()
            if means.len():
                mean_ax.plot(
                    [means[0]],
                    [y],
                    marker="o",
                    color=f"C{i}",
                    ls="none",
                    label=str(g) if y == 0 else None,
                )
        if row["diff"] is not None:
            low, high = row["diff_low"], row["diff_high"]
            if low is not None and high is not None:
                gap_ax.plot([low, high], [y, y], color="C0", lw=2)
            gap_ax.plot([row["diff"]], [y], marker="o", color="C0")
        elif row["range"] is not None:
            gap_ax.plot([row["range"]], [y], marker="o", color="C0", markerfacecolor="white")
    mean_ax.set_yticks(range(len(labels)), labels)
    mean_ax.invert_yaxis()
    mean_ax.set_xlabel("mean per group")
    mean_ax.set_title(f"{len(groups)} groups")
    mean_ax.legend(title="group")
    gap_ax.axvline(0.0, color="grey", ls="--", lw=1)
    if len(groups) == 2:
        gap_ax.set_xlabel(
            f"difference of the means, {groups[0]} - {groups[1]} (bootstrap interval)"
        )
    else:
        gap_ax.set_xlabel("range of the group means (largest - smallest)")
    for panel in (mean_ax, gap_ax):
        panel.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def gaps(
    frame: object,
    group: object | None = None,
    *,
    by: str | Sequence[str] | None = None,
    ax: Any = None,
    **gaps_kwargs: Any,
) -> Any:
    """Deprecated spelling of :func:`group_gaps`, for one release.

    ``fm.plot.gaps`` named a plot as ``fm.gaps`` names the statistics: imported by name,
    one hid the other.
    """
    import warnings

    warnings.warn(
        "fm.plot.gaps is renamed fm.plot.group_gaps (fm.gaps computes the gaps it draws); "
        "the old name goes in the next release",
        FutureWarning,
        stacklevel=2,
    )
    return group_gaps(frame, group, by=by, ax=ax, **gaps_kwargs)
