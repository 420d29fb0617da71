"""The few statistical functions :mod:`frame_metrics.compare` needs, in plain Python.

Written out here so that comparing models needs no scipy (numpy only): Student's t and the normal
survival functions, the paired t-test and the Wilcoxon signed-rank test (normal
approximation), and the Holm and Benjamini-Hochberg corrections. ``tests/test_compare.py``
checks each against scipy on random data. :func:`welch_t_test` serves
:mod:`frame_metrics.gaps` (unpaired groups of users); ``tests/test_gaps.py`` checks it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "benjamini_hochberg",
    "holm",
    "normal_sf",
    "paired_t_test",
    "regularized_incomplete_beta",
    "student_t_sf",
    "welch_t_test",
    "wilcoxon_signed_rank",
]


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    # Lentz's method for the continued fraction of I_x(a, b) (Numerical Recipes, betacf).
    tiny, eps = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float, y: float | None = None) -> float:
    """``I_x(a, b)``, the regularized incomplete beta function, for ``0 <= x <= 1``.

    ``y`` is ``1 - x`` when the caller knows it more precisely than ``1.0 - x``.

    Examples
    --------
    >>> round(regularized_incomplete_beta(2.0, 3.0, 0.4), 12)  # 1 - Σ_{j<2} C(4,j) .4^j .6^(4-j)
    0.5248
    """
    if y is None:
        y = 1.0 - x
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    front = math.exp(log_front)
    # The continued fraction converges fast for x < (a + 1) / (a + b + 2); use symmetry above.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, y) / b


def student_t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom.

    Examples
    --------
    >>> round(student_t_sf(2.0, 10), 10)
    0.0366940174
    """
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    t2 = t * t
    # 1 - x is passed as computed here: 1.0 - x would lose it when t is near 0.
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))
    return tail if t > 0 else 1.0 - tail


def normal_sf(z: float) -> float:
    """``P(Z > z)`` for the standard normal.

    Examples
    --------
    >>> round(normal_sf(1.959963984540054), 12)
    0.025
    """
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def paired_t_test(diffs: Sequence[float] | npt.NDArray[np.float64]) -> tuple[float, float]:
    """Two-sided paired t-test on the differences: ``(t, p)``, as ``scipy.stats.ttest_rel``.

    Fewer than two differences, or all differences equal to 0: ``(nan, nan)``. Equal
    non-zero differences: ``t = ±inf``, ``p = 0``.

    Examples
    --------
    >>> t, p = paired_t_test([1.0, 2.0, 0.5, 1.5])   # mean 1.25, sd sqrt(5/12), n 4
    >>> round(t, 6), round(p, 6)
    (3.872983, 0.030466)
    """
    import numpy

    d = numpy.asarray(diffs, dtype=numpy.float64)
    n = d.size
    if n < 2:
        return math.nan, math.nan
    mean = float(d.mean())
    var = float(((d - mean) ** 2).sum() / (n - 1))
    if var == 0.0:
        if mean == 0.0:
            return math.nan, math.nan
        return math.copysign(math.inf, mean), 0.0
    t = mean / math.sqrt(var / n)
    return t, min(1.0, 2.0 * student_t_sf(abs(t), n - 1))


def wilcoxon_signed_rank(diffs: Sequence[float] | npt.NDArray[np.float64]) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test, normal approximation: ``(statistic, p)``.

    As ``scipy.stats.wilcoxon(diffs, method="approx")``: zero differences are dropped
    (``zero_method="wilcox"``), tied absolute differences get average ranks and the
    variance its tie correction, no continuity correction; the statistic is
    ``min(W+, W-)``. No non-zero difference: ``(nan, nan)``. scipy's default
    (``method="auto"``) uses the exact distribution instead for n <= 50 without ties,
    so on small samples it can differ from this.

    Examples
    --------
    >>> w, p = wilcoxon_signed_rank([1.0, 2.0, -0.5, 1.5, 3.0, 0.0])
    >>> w, round(p, 6)
    (1.0, 0.079616)
    """
    import numpy

    d = numpy.asarray(diffs, dtype=numpy.float64)
    d = d[d != 0.0]
    n = d.size
    if n == 0:
        return math.nan, math.nan
    # Average ranks of |d|: a tie group spanning sorted positions s..e gets (s + e) / 2.
    _, inverse, counts = numpy.unique(numpy.abs(d), return_inverse=True, return_counts=True)
    ends = numpy.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2.0)[inverse]
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    statistic = min(w_plus, w_minus)
    mean = n * (n + 1) / 4.0
    tie_term = float((counts.astype(numpy.float64) ** 3 - counts).sum())
    var = n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0
    if var <= 0.0:
        return statistic, math.nan
    z = (statistic - mean) / math.sqrt(var)
    return statistic, min(1.0, 2.0 * normal_sf(abs(z)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted).

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    idx = sorted(
        (i for i, p in enumerate(p_values) if not math.isnan(p)), key=lambda i: p_values[i]
    )
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false discovery rate; NaN not counted).

    Examples
    --------
    >>> [round(p, 6) for p in benjamini_hochberg([0.01, 0.04, 0.03])]
    [0.03, 0.04, 0.04]
    """
    idx = sorted(
        (i for i, p in enumerate(p_values) if not math.isnan(p)), key=lambda i: p_values[i]
    )
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = idx[rank]
        running = min(running, m * p_values[i] / (rank + 1))
        out[i] = running
    return out


def welch_t_test(
    a: Sequence[float] | npt.NDArray[np.float64], b: Sequence[float] | npt.NDArray[np.float64]
) -> tuple[float, float]:
    """Two-sided Welch's t-test of two independent samples: ``(t, p)``.

    As ``scipy.stats.ttest_ind(a, b, equal_var=False)``: ``t = (mean_a - mean_b) /
    sqrt(s_a²/n_a + s_b²/n_b)`` with sample variances, and the Welch-Satterthwaite
    degrees of freedom. Fewer than two values in either sample: ``(nan, nan)``. Both
    variances 0: ``(nan, nan)`` for equal means, else ``t = ±inf``, ``p = 0``.

    Examples
    --------
    >>> t, p = welch_t_test([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0])
    >>> round(t, 6)   # (2 - 5) / sqrt(1/3 + (20/3)/4)
    -2.12132
    >>> round(p, 6)   # scipy.stats.ttest_ind(..., equal_var=False): 0.09991286431180087
    0.099913
    """
    import numpy

    x = numpy.asarray(a, dtype=numpy.float64)
    y = numpy.asarray(b, dtype=numpy.float64)
    n_x, n_y = x.size, y.size
    if n_x < 2 or n_y < 2:
        return math.nan, math.nan
    mean_x, mean_y = float(x.mean()), float(y.mean())
    # Each sample's variance of its mean, s²/n, with the sample variance (n - 1).
    v_x = float(((x - mean_x) ** 2).sum() / (n_x - 1)) / n_x
    v_y = float(((y - mean_y) ** 2).sum() / (n_y - 1)) / n_y
    diff = mean_x - mean_y
    if v_x + v_y == 0.0:
        if diff == 0.0:
            return math.nan, math.nan
        return math.copysign(math.inf, diff), 0.0
    t = diff / math.sqrt(v_x + v_y)
    # Welch-Satterthwaite, (v_x + v_y)² / (v_x²/(n_x - 1) + v_y²/(n_y - 1)), with each
    # variance as its share of the sum: the squares of tiny variances (1e-170) underflow
    # to 0 and made the formula 0/0.
    f_x, f_y = v_x / (v_x + v_y), v_y / (v_x + v_y)
    df = 1.0 / (f_x**2 / (n_x - 1) + f_y**2 / (n_y - 1))
    return t, min(1.0, 2.0 * student_t_sf(abs(t), df))
