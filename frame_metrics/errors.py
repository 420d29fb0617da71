"""Errors and warnings raised by frame_metrics.

Every error is a :class:`ValueError` subclass, so ``except ValueError`` keeps working for
callers that do not care which check failed, and each message says what was expected,
what was found and, for columns, which columns exist.
"""

from __future__ import annotations

import difflib
import math
import numbers
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "DuplicateRowsError",
    "FrameMetricsError",
    "IgnoredOptionWarning",
    "InvalidOptionError",
    "InvalidValueError",
    "Keyword",
    "MissingColumnsError",
    "MissingDependencyError",
    "UndefinedMetricWarning",
    "UnmatchedIdsWarning",
    "shown",
]


@dataclass(frozen=True)
class Keyword:
    """An argument a message proposes, kept apart from the text around it.

    Python code reads it as ``name='value'`` (``name=`` when it names a frame or an
    option to set); the command line says it as its own option or argument.

    Examples
    --------
    >>> str(Keyword("by", "model")), str(Keyword("truth"))
    ("by='model'", 'truth=')
    """

    name: str
    value: str | None = None

    def __str__(self) -> str:
        return f"{self.name}=" if self.value is None else f"{self.name}={self.value!r}"


class FrameMetricsError(ValueError):
    """Base class of every error raised for bad input.

    The message is given in ``parts``: text, and the arguments it proposes
    (:class:`Keyword`), so that a front end other than Python (the command line) can
    say them in its own terms.

    Examples
    --------
    >>> error = FrameMetricsError("rows repeat; pass ", Keyword("by", "model"))
    >>> str(error), error.parts[1]
    ("rows repeat; pass by='model'", Keyword(name='by', value='model'))
    """

    def __init__(self, *parts: str | Keyword) -> None:
        self.parts: tuple[str | Keyword, ...] = parts
        super().__init__("".join(str(part) for part in parts))


class MissingColumnsError(FrameMetricsError):
    """A column named by the caller is not in the frame.

    Examples
    --------
    >>> raise MissingColumnsError("recs", ["usr"], ["user", "item", "rank"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingColumnsError: recs: expected column 'usr' (did you mean 'user'?), not found; available columns: 'user', 'item', 'rank'
    """

    def __init__(self, frame: str, missing: Sequence[str], available: Sequence[str]) -> None:
        self.frame = frame
        self.missing = list(missing)
        self.available = list(available)
        parts = []
        for name in self.missing:
            hint = difflib.get_close_matches(name, self.available, n=1, cutoff=0.6)
            suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
            parts.append(f"{name!r}{suffix}")
        plural = "s" if len(parts) > 1 else ""
        super().__init__(
            f"{frame}: expected column{plural} {', '.join(parts)}, not found; "
            f"available columns: {_quoted(self.available)}"
        )


class DuplicateRowsError(FrameMetricsError):
    """The same (user, item) pair, or the same rank within a user, occurs more than once."""


class InvalidValueError(FrameMetricsError):
    """A column holds values the metrics cannot use (nulls in keys, negative relevance, ...)."""


class InvalidOptionError(FrameMetricsError):
    """A keyword argument has a value outside the accepted ones."""


class MissingDependencyError(FrameMetricsError, ImportError):
    """An optional library the input's kind needs is not installed (``pip install`` names it).

    Also an :class:`ImportError`, whose ``name`` is the missing module.

    Examples
    --------
    >>> raise MissingDependencyError("pyarrow", "a pyarrow Table result", "arrow")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingDependencyError: expected pyarrow to be installed for a pyarrow Table result, not found: pip install pyarrow (or pip install 'frame_metrics[arrow]')
    """

    def __init__(self, module: str, purpose: str, extra: str) -> None:
        super().__init__(
            f"expected {module} to be installed for {purpose}, not found: pip install {module} "
            f"(or pip install 'frame_metrics[{extra}]')"
        )
        self.name = module


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined for some users and was handled by the empty-case policy."""


class IgnoredOptionWarning(UserWarning):
    """An option was given that cannot change the result, and was ignored.

    The call still means something (the result is what it would be without the
    option); the message names the option, its value and why it has no effect.
    """


class UnmatchedIdsWarning(UserWarning):
    """Few or none of the recommended users, or none of their items, are in truth.

    Ids written differently in the two frames (``"0015"`` against ``15``) match nothing,
    and every metric is then 0 or undefined without any error. The message gives the
    counts and an example id from each frame.
    """


def warn(message: str, category: type[Warning]) -> None:
    """Issue a warning attributed to the caller's own line, outside frame_metrics.

    A fixed ``stacklevel`` would point into the package when the call came through the
    namespace, ``compare`` or the command line.
    """
    package = __name__.rpartition(".")[0] + "."
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names) or "(none)"


#: Longest value a message repeats whole: past it, its start and its length.
_SHOWN_CHARS = 60


def shown(value: object) -> str:
    """``repr(value)`` for a message, shortened when long (a 400-digit int, a huge string).

    A message names the value it refuses; repeating a value of thousands of characters
    would bury the message itself (and Python refuses to write an int of more than 4300
    digits as text).

    Examples
    --------
    >>> shown(0.5), shown("linear")
    ('0.5', "'linear'")
    >>> shown(10**400)
    '10000000000000000000... (an integer of 401 digits)'
    >>> shown("x" * 1000)
    "'xxxxxxxxxxxxxxxxxxx... (1002 characters)"
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        magnitude = abs(int(value))
        if magnitude >= 10**_SHOWN_CHARS:
            # Digits from the logarithm, corrected at powers of ten where it may be off.
            digits = int(math.log10(magnitude)) + 1
            digits += (magnitude >= 10**digits) - (magnitude < 10 ** (digits - 1))
            head = str(magnitude // 10 ** (digits - 20))
            sign = "-" if value < 0 else ""
            return f"{sign}{head}... (an integer of {digits} digits)"
    try:
        text = repr(value)
    except ValueError:  # a container holding an int of more than 4300 digits
        return f"a {type(value).__name__} too large to show"
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:20]}... ({len(text)} characters)"
