"""Charts as inline SVG for :func:`frame_metrics.report`: no plotting library, no network.

Each chart is an ``<svg>`` element with a ``viewBox`` (it scales to its container's
width) whose colours are CSS classes (``s0`` .. ``s7`` for the series, ``axis``,
``grid``, ``label``): the page's stylesheet gives them their light and dark colours, so a
chart follows the reader's colour scheme. Two kinds: values at several cutoffs with an
interval band per series (metric@k), and empirical CDFs (per-user distributions).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Series", "ecdf_chart", "line_chart", "nice_ticks"]

#: The drawing's size in SVG units; it is scaled to the width it is shown at. Narrow
#: enough that its 12-unit text stays readable on a phone (about 10 px at 360 px).
WIDTH, HEIGHT = 420, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 46, 12, 12, 40


@dataclass(frozen=True)
class Series:
    """One line: its name (the legend's), x and y, and an optional band (low, high)."""

    name: str
    x: Sequence[float]
    y: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values spanning [low, high] (1, 2 or 5 times a power of 10).

    Examples
    --------
    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    >>> nice_ticks(0.13, 0.48)
    [0.1, 0.2, 0.3, 0.4, 0.5]
    """
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        high = low + 1.0 if math.isfinite(low) else 1.0
        low = low if math.isfinite(low) else 0.0
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-9 or not ticks or ticks[-1] < high:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _number(value: float) -> str:
    """A tick label: as short as the value allows."""
    return f"{value:.4g}"


def _frame(title: str) -> tuple[list[str], tuple[float, float, float, float]]:
    """The opening tag with its title; and the plot area (x0, x1, y0, y1) in SVG units."""
    x0, x1 = _LEFT, WIDTH - _RIGHT
    y0, y1 = HEIGHT - _BOTTOM, _TOP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'class="chart" aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
    ]
    return parts, (x0, x1, y0, y1)


def _axes(
    parts: list[str],
    area: tuple[float, float, float, float],
    x_ticks: list[tuple[float, str]],
    y_ticks: list[float],
    x_of: object,
    y_of: object,
    x_label: str,
    y_label: str,
) -> None:
    x0, x1, y0, y1 = area
    for value in y_ticks:
        y = y_of(value)  # type: ignore[operator]
        parts.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="label" x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_number(value)}</text>"
        )
    for value, text in x_ticks:
        x = x_of(value)  # type: ignore[operator]
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y0 + 4}"/>')
        parts.append(
            f'<text class="label" x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">'
            f"{html.escape(text)}</text>"
        )
    parts.append(f'<line class="axis" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    parts.append(f'<line class="axis" x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}"/>')
    parts.append(
        f'<text class="label" x="{(x0 + x1) / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"{html.escape(x_label)}</text>"
    )
    parts.append(
        f'<text class="label" transform="translate(11 {(y0 + y1) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{html.escape(y_label)}</text>'
    )


def _scale(lo: float, hi: float, out_lo: float, out_hi: float) -> object:
    span = hi - lo if hi > lo else 1.0
    return lambda v: out_lo + (v - lo) / span * (out_hi - out_lo)


def line_chart(title: str, series: Sequence[Series], x_label: str, y_label: str) -> str:
    """Values at a few x (the cutoffs), a line and a band per series.

    Examples
    --------
    >>> svg = line_chart("ndcg@k", [Series("a", [5, 10], [0.2, 0.3], [0.1, 0.2], [0.3, 0.4])],
    ...                  "k", "mean ndcg@k")
    >>> svg.startswith("<svg") and 'class="band s0"' in svg and svg.endswith("</svg>")
    True
    """
    xs = sorted({float(x) for s in series for x in s.x})
    values = [
        float(v)
        for s in series
        for seq in (s.y, s.low or (), s.high or ())
        for v in seq
        if v is not None and math.isfinite(v)
    ]
    low = min(values, default=0.0)
    high = max(values, default=1.0)
    y_ticks = nice_ticks(min(low, 0.0) if low >= 0 and low < 0.1 * high else low, high)
    parts, area = _frame(title)
    x0, x1, y0, y1 = area
    # The cutoffs are evenly spaced (a log-like axis for 1, 5, 10, 100).
    position = {x: i for i, x in enumerate(xs)}
    pad = 0.5 if len(xs) == 1 else 0.0
    x_of_index = _scale(-pad, max(len(xs) - 1, 1) - (0 if len(xs) > 1 else -pad), x0 + 14, x1 - 14)

    def x_of(v: float) -> float:
        return x_of_index(position[float(v)])  # type: ignore[operator,no-any-return]

    y_of = _scale(y_ticks[0], y_ticks[-1], y0, y1)
    _axes(parts, area, [(x, _number(x)) for x in xs], y_ticks, x_of, y_of, x_label, y_label)
    for i, s in enumerate(series):
        css = f"s{i % 8}"
        if s.low is not None and s.high is not None:
            band = [
                (x, lo, hi)
                for x, lo, hi in zip(s.x, s.low, s.high, strict=True)
                if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
            ]
            if band:
                top = " ".join(f"{x_of(x):.1f},{y_of(hi):.1f}" for x, _, hi in band)  # type: ignore[operator]
                bottom = " ".join(
                    f"{x_of(x):.1f},{y_of(lo):.1f}"  # type: ignore[operator]
                    for x, lo, _ in reversed(band)
                )
                parts.append(f'<polygon class="band {css}" points="{top} {bottom}"/>')
        points = [
            (x_of(x), y_of(y))  # type: ignore[operator]
            for x, y in zip(s.x, s.y, strict=True)
            if y is not None and math.isfinite(y)
        ]
        if points:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            parts.append(f'<polyline class="line {css}" points="{path}"/>')
            parts += [
                f'<circle class="dot {css}" cx="{px:.1f}" cy="{py:.1f}" r="3.2"/>'
                for px, py in points
            ]
    parts.append("</svg>")
    return "".join(parts)


def ecdf_chart(
    title: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]], x_label: str
) -> str:
    """Empirical CDFs as steps: each series' (value, share of users at or below it).

    The points are the series' values at ranks spread over its users (a few hundred
    whatever the number of users, see ``reports.Distribution``), ascending.

    Examples
    --------
    >>> svg = ecdf_chart("ndcg@10 per user", [("a", [(0.0, 0.5), (0.5, 0.75), (1.0, 1.0)])],
    ...                  "ndcg@10")
    >>> svg.count('class="step s0"')
    1
    """
    values = [x for _, points in series for x, _ in points]
    low = min(values, default=0.0)
    high = max(values, default=1.0)
    x_ticks = nice_ticks(low, high if high > low else low + 1.0)
    y_ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    parts, area = _frame(title)
    x0, x1, y0, y1 = area
    x_of = _scale(x_ticks[0], x_ticks[-1], x0, x1)
    y_of = _scale(0.0, 1.0, y0, y1)
    _axes(
        parts, area, [(t, _number(t)) for t in x_ticks], y_ticks, x_of, y_of, x_label,
        "share of users <= x",
    )  # fmt: skip
    for i, (_, points) in enumerate(series):
        if not points:
            continue
        path = [f"M{x_of(points[0][0]):.1f},{y_of(0.0):.1f}"]  # type: ignore[operator]
        for x, share in points:
            path.append(f"H{x_of(x):.1f}V{y_of(share):.1f}")  # type: ignore[operator]
        path.append(f"H{x1:.1f}")
        parts.append(f'<path class="step s{i % 8}" d="{"".join(path)}"/>')
    parts.append("</svg>")
    return "".join(parts)
