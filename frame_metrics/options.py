"""The metric options and cutoffs, validated once, up front.

Validation is declarative: :data:`CHOICES` lists the accepted values of every string
option, so a new variant is one new entry there plus its meaning in the metric that
reads it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from frame_metrics.errors import InvalidOptionError

__all__ = ["CHOICES", "DEFAULT_K", "MAX_K", "MetricOptions", "is_int", "is_real", "validate_k"]

Gain = Literal["linear", "exponential", "binary"]
ApDenominator = Literal["min_k", "relevant", "hits", "k"]
EmptyPolicy = Literal["skip", "zero"]
DuplicatePolicy = Literal["error", "first"]
Unexpected = Literal["baseline", "history"]
Similarity = Literal["auto", "jaccard", "cosine"]

#: The accepted values of every string option, first one the default.
CHOICES: dict[str, tuple[str, ...]] = {
    "gain": ("linear", "exponential", "binary"),
    "ap_denominator": ("min_k", "relevant", "hits", "k"),
    "empty": ("skip", "zero"),
    "on_duplicate": ("error", "first"),
    "unexpected": ("baseline", "history"),
    "similarity": ("auto", "jaccard", "cosine"),
}


def _check_choice(name: str, value: object) -> None:
    allowed = CHOICES[name]
    if not isinstance(value, str) or value not in allowed:
        raise InvalidOptionError(
            f"{name}: expected one of {', '.join(repr(a) for a in allowed)}, got {value!r}"
        )


@dataclass(frozen=True)
class MetricOptions:
    """How relevance, gains, AP and empty cases are treated (see the spec, sections 2-4).

    Parameters
    ----------
    threshold
        Relevance an item needs to count as relevant (``rel >= threshold``); ``None``
        means any positive relevance.
    gain
        DCG gain: ``"linear"`` (rel), ``"exponential"`` (2^rel - 1) or ``"binary"`` (1).
    ap_denominator
        The D in AP@k: ``"min_k"`` = min(|R|, k), ``"relevant"`` = |R|,
        ``"hits"`` = hits@k, ``"k"`` = k.
    empty
        Users with no relevant item: ``"skip"`` leaves them out, ``"zero"`` scores them 0.
    on_duplicate
        A repeated (user, item) row: ``"error"`` raises, ``"first"`` keeps the
        best-ranked recommendation and the highest-relevance truth row.
    unexpected
        What makes an item unexpected for serendipity: ``"baseline"`` = not in the
        baseline model's top k for the user, ``"history"`` = not in the user's train rows.
    similarity
        Item similarity for diversity: ``"jaccard"`` over a list of categories,
        ``"cosine"`` over a numeric vector, ``"auto"`` = chosen from the features dtype
        (a list of strings, categories or integers: Jaccard; floats or an array: cosine).
    head_share
        The popularity cut of aplt: the short head is the most popular train items that
        together hold this share of the train interactions (ties kept together); every
        other item, unseen ones included, is in the long tail.

    Examples
    --------
    >>> MetricOptions(gain="exponential").gain
    'exponential'
    >>> MetricOptions(gain="log")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: gain: expected one of 'linear', 'exponential', 'binary', got 'log'
    >>> MetricOptions(threshold=0)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: threshold: expected a finite number > 0 or None, got 0
    """

    threshold: float | None = None
    gain: Gain = "linear"
    ap_denominator: ApDenominator = "min_k"
    empty: EmptyPolicy = "skip"
    on_duplicate: DuplicatePolicy = "error"
    unexpected: Unexpected = "baseline"
    similarity: Similarity = "auto"
    head_share: float = 0.2

    def __post_init__(self) -> None:
        t = self.threshold
        if t is not None and (not is_real(t) or not math.isfinite(t) or t <= 0):
            # 0 would make every recommended item relevant (absent items have rel 0).
            raise InvalidOptionError(f"threshold: expected a finite number > 0 or None, got {t!r}")
        if t is not None:
            # numpy scalars become Python numbers: polars reads them as literals of their own.
            object.__setattr__(self, "threshold", float(t))
        h = self.head_share
        if not is_real(h) or not 0 < h < 1:
            raise InvalidOptionError(f"head_share: expected a number in (0, 1), got {h!r}")
        object.__setattr__(self, "head_share", float(h))
        for name in CHOICES:
            _check_choice(name, getattr(self, name))


#: The largest cutoff: far beyond any list a person reads, and small enough that every
#: fixed-point sum over a top k (novelty, cosine diversity) keeps 35 or more bits below
#: the point (see ``metrics/user_stats.py``).
MAX_K = 2**20

#: The cutoff of a metric named without one, in a call without ``k`` (spec section 8).
DEFAULT_K = 10

_K_EXPECTED = f"k: expected an int in [1, {MAX_K}] or a list of them"


def is_int(value: object) -> bool:
    """An integer, Python's or numpy's (not a bool)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A real number, Python's or numpy's (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def validate_k(k: int | Iterable[int] | None, *, required: bool = True) -> tuple[int, ...]:
    """Return the cutoffs as a sorted tuple of distinct ints in [1, ``MAX_K``].

    numpy integers and arrays are ints to a data scientist, and are accepted as such.

    Examples
    --------
    >>> validate_k([10, 5, 10])
    (5, 10)
    >>> validate_k(0)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: k: expected an int in [1, 1048576] or a list of them, got 0
    >>> validate_k(2**64)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: k: expected an int in [1, 1048576] or a list of them, got 18446744073709551616
    """
    if k is None:
        if required:
            raise InvalidOptionError(f"{_K_EXPECTED}, got None")
        return ()
    values: list[object] = (
        list(k) if isinstance(k, Iterable) and not isinstance(k, (str, bytes)) else [k]
    )
    if not values:
        raise InvalidOptionError(f"{_K_EXPECTED}, got an empty list")
    for v in values:
        if not is_int(v) or not 1 <= int(v) <= MAX_K:  # type: ignore[call-overload]
            shown = v if len(values) > 1 or not isinstance(k, Iterable) else k
            if is_int(shown):
                shown = int(shown)  # type: ignore[call-overload]
            raise InvalidOptionError(f"{_K_EXPECTED}, got {shown!r}")
    return tuple(sorted({int(v) for v in values}))  # type: ignore[call-overload]
