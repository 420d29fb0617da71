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
from typing import Any

__all__ = [
    "NONE",
    "BaselineChoiceWarning",
    "DuplicateRowsError",
    "EmptySplitWarning",
    "FrameMetricsError",
    "FrameMetricsWarning",
    "GateFailedError",
    "IgnoredOptionWarning",
    "InvalidOptionError",
    "InvalidValueError",
    "Keyword",
    "LeaveOut",
    "MissingColumnsError",
    "MissingDependencyError",
    "MissingInputError",
    "NoRecommendationsWarning",
    "Part",
    "Pass",
    "RelevanceWarning",
    "SmallSampleWarning",
    "UndefinedMetricWarning",
    "UnmatchedIdsWarning",
    "shown",
]


class _NoneValue(str):
    """A proposed value of ``None``: ``None`` in Python, ``none`` on the command line."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "None"


#: A message's proposed value ``None`` (``Pass("threshold", NONE)``: ``pass threshold=None``),
#: apart from ``Keyword(name)`` without a value, which proposes a frame (``truth=``).
NONE: str = _NoneValue("none")


@dataclass(frozen=True)
class Keyword:
    """An argument a message proposes, kept apart from the text around it.

    Python code reads it as ``name='value'`` (``name=`` when it names a frame or an
    option to set); the command line says it as its own option or argument.

    Examples
    --------
    >>> str(Keyword("by", "model")), str(Keyword("truth")), str(Keyword("threshold", NONE))
    ("by='model'", 'truth=', 'threshold=None')
    """

    name: str
    value: str | float | None = None

    def __str__(self) -> str:
        return f"{self.name}=" if self.value is None else f"{self.name}={self.value!r}"


@dataclass(frozen=True)
class Pass(Keyword):
    """An argument a message proposes with its verb: ``pass truth=``.

    Apart from the verb because a command line gives an argument (``give TRUTH``) but
    passes an option (``pass --score-col``).

    Examples
    --------
    >>> str(Pass("score")), str(Pass("unexpected", "history"))
    ('pass score=', "pass unexpected='history'")
    """

    def __str__(self) -> str:
        return f"pass {super().__str__()}"


@dataclass(frozen=True)
class LeaveOut:
    """An argument a message proposes to leave out: ``leave k out``.

    The command line puts its option last (``leave out -k``).

    Examples
    --------
    >>> str(LeaveOut("k"))
    'leave k out'
    """

    name: str

    def __str__(self) -> str:
        return f"leave {self.name} out"


#: A piece of a message: text, or an argument it proposes.
Part = str | Keyword | LeaveOut


def _attach(
    message: FrameMetricsError | FrameMetricsWarning,
    parts: tuple[Part, ...],
    option: str | None,
    frame: str | None,
    columns: Iterable[str],
) -> str:
    """Set what a message is about on it; return its text, the option's name first."""
    message.parts = parts
    message.option = option
    message.frame = frame
    message.columns = tuple(columns)
    subject = "" if option is None else f"{option}: "
    return subject + "".join(str(part) for part in parts)


class FrameMetricsError(ValueError):
    """Base class of every error raised for bad input.

    The message is given in ``parts``: text, and the arguments it proposes
    (:class:`Keyword`, :class:`Pass`, :class:`LeaveOut`), so that a front end other than
    Python (the command line) can say them in its own terms. What the error is about:
    ``option``, the keyword argument (the message begins with its name, written from
    ``option`` and not part of ``parts``); ``frame``, the input frame (``"recs"``,
    ``"truth"``, ``"train"``, ...); ``columns``, the columns it names (of ``frame``, or of
    the result: metric columns). Each is ``None`` (or empty) when the error is not about one.

    Examples
    --------
    >>> error = FrameMetricsError("rows repeat; pass ", Keyword("by", "model"))
    >>> str(error), error.parts[1]
    ("rows repeat; pass by='model'", Keyword(name='by', value='model'))
    >>> error = InvalidOptionError("expected a number in (0, 1), got 2", option="head_share")
    >>> str(error), error.option
    ('head_share: expected a number in (0, 1), got 2', 'head_share')
    """

    parts: tuple[Part, ...]
    option: str | None
    frame: str | None
    columns: tuple[str, ...]

    def __init__(
        self,
        *parts: Part,
        option: str | None = None,
        frame: str | None = None,
        columns: Iterable[str] = (),
    ) -> None:
        super().__init__(_attach(self, parts, option, frame, columns))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its message and attributes, not from its constructor's arguments
        # (a subclass takes others), so that an error raised in another process (a Dask
        # or Spark worker) comes back whole.
        state = dict(self.__dict__)
        if isinstance(self, ImportError):  # its name is not in __dict__
            state["name"] = self.name
        return (_rebuilt, (type(self), self.args), state)


def _rebuilt(cls: type[FrameMetricsError], args: tuple[object, ...]) -> FrameMetricsError:
    """An error of ``cls`` with ``args``, its constructor skipped (see ``__reduce__``)."""
    error = cls.__new__(cls)
    error.args = args
    return error


class MissingColumnsError(FrameMetricsError):
    """A column named by the caller is not in the frame.

    Examples
    --------
    >>> raise MissingColumnsError("recs", ["usr"], ["user", "item", "rank"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingColumnsError: recs: expected column 'usr' (did you mean 'user'?), not found; available columns: 'user', 'item', 'rank'

    ``advice`` is said after the columns (another way out):

    >>> raise MissingColumnsError("recs", ["rank"], ["user", "score"], "; or ", Pass("score", "score"))
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingColumnsError: recs: expected column 'rank', not found; available columns: 'user', 'score'; or pass score='score'
    """

    def __init__(
        self, frame: str, missing: Sequence[str], available: Sequence[str], *advice: Part
    ) -> None:
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
            f"available columns: {_quoted(self.available)}",
            *advice,
            frame=frame,
            columns=self.missing,
        )


class DuplicateRowsError(FrameMetricsError):
    """The same (user, item) pair, or the same rank within a user, occurs more than once."""


class InvalidValueError(FrameMetricsError):
    """A column holds values the metrics cannot use (nulls in keys, negative relevance, ...)."""


class InvalidOptionError(FrameMetricsError):
    """A keyword argument has a value outside the accepted ones."""


class UnknownKeywordError(InvalidOptionError, TypeError):
    """A keyword argument no table declares (a typo, or a family's input not registered).

    Also a :class:`TypeError`, as Python's own for an unexpected keyword argument.

    Examples
    --------
    >>> raise UnknownKeywordError("evaluate", ["trian"], ["train", "truth", "catalog"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.UnknownKeywordError: evaluate: expected keyword arguments it declares, got trian (did you mean train?)
    """

    def __init__(self, function: str, unknown: Iterable[str], known: Iterable[str]) -> None:
        import difflib

        known = list(known)
        said = []
        for name in unknown:
            hint = difflib.get_close_matches(name, known, n=1)
            said.append(name + (f" (did you mean {hint[0]}?)" if hint else ""))
        super().__init__(
            f"{function}: expected keyword arguments it declares, got {', '.join(said)}"
        )


class MissingInputError(InvalidOptionError):
    """A metric needs an input frame the call did not pass (``train=`` for novelty).

    ``metric`` names the metric, ``frame`` the input, ``purpose`` what it is; ``advice``
    is said after (another way out).

    Examples
    --------
    >>> raise MissingInputError("novelty", "train", "the train split")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingInputError: novelty: expected train= (the train split), got None
    """

    def __init__(self, metric: str, frame: str, purpose: str, *advice: Part) -> None:
        self.metric = metric
        self.purpose = purpose
        self.advice = advice
        super().__init__(
            f"{metric}: expected ", Keyword(frame), f" ({purpose}), got None", *advice, frame=frame
        )


class GateFailedError(FrameMetricsError):
    """``fm.check(..., raise_on_fail=True)``: gates failed (definition sheet 12).

    The message has one line per failed (gate, model); ``failed`` is the frame of those
    rows (gate, keys, value, passed) and ``n_gates`` how many (gate, model) were judged.
    """

    def __init__(self, lines: Sequence[str], *, failed: Any, n_gates: int) -> None:
        self.failed = failed
        self.n_gates = n_gates
        super().__init__(f"{len(lines)} of {n_gates} failed: " + "; ".join(lines), option="gates")

    def __reduce__(self) -> tuple[Any, ...]:
        return FrameMetricsError.__reduce__(self)


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


class FrameMetricsWarning(UserWarning):
    """Base class of frame_metrics' warnings.

    A message in parts, about an option, a frame or columns, as :class:`FrameMetricsError`.
    """

    parts: tuple[Part, ...]
    option: str | None
    frame: str | None
    columns: tuple[str, ...]

    def __init__(
        self,
        *parts: Part,
        option: str | None = None,
        frame: str | None = None,
        columns: Iterable[str] = (),
    ) -> None:
        super().__init__(_attach(self, parts, option, frame, columns))


class UndefinedMetricWarning(FrameMetricsWarning):
    """A metric is undefined for some users and was handled by the empty-case policy."""


class IgnoredOptionWarning(FrameMetricsWarning):
    """An option was given that cannot change the result, and was ignored.

    The call still means something (the result is what it would be without the
    option); the message names the option, its value and why it has no effect.
    """


class UnmatchedIdsWarning(FrameMetricsWarning):
    """Few or none of the recommended users, or none of their items, are in truth.

    Ids written differently in the two frames (``"0015"`` against ``15``) match nothing,
    and every metric is then 0 or undefined without any error. The message gives the
    counts and an example id from each frame.
    """


class SmallSampleWarning(FrameMetricsWarning):
    """Propensity weights leave few effective relevant items per user (spec 9.4).

    The effective sample size (Σw)²/Σw² of a user's relevant items is below 2 on
    average: a few heavily weighted items decide the user's values, whose variance is
    then large. Clipping the weights (``max_weight=``) trades that variance for bias.
    """


class BaselineChoiceWarning(FrameMetricsWarning):
    """No longer issued: ``fm.compare`` without ``baseline_model`` compares every pair.

    It chose the first model in sorted order as the baseline before (definition sheet
    12 changed that); the class stays for code that filters it.
    """


class RelevanceWarning(FrameMetricsWarning):
    """The relevance column looks like star ratings, and no threshold says what is relevant.

    With at least three levels, all multiples of 0.5 and the largest 3 or more, and
    neither ``threshold=`` nor ``convention=`` given, every rating above 0 is relevant
    (half a star too) and gains its stars (spec section 8). Passing ``threshold=``
    (``None`` included: every level above 0 relevant, as meant) silences it.
    """


class NoRecommendationsWarning(FrameMetricsWarning):
    """More than half of the evaluated users (or all) have no recommendation in the call.

    They score 0 on every ranking metric (spec section 3), which is right for a system
    that recommends nothing to them and wrong for recommendations filtered by mistake;
    ``users="both"`` evaluates only the users in both frames.
    """


class EmptySplitWarning(FrameMetricsWarning):
    """A split's side is empty: ``at`` outside the data's times (``fm.split``)."""


class RowsHeldWarning(FrameMetricsWarning):
    """``fm.Accumulator`` keeps the rows it reads until ``compute()`` (sheet 11).

    A user's values read a table over every user's rows that later updates change
    (err's default g_max, the exposure metrics' default catalog, a ``"merit"`` parity
    target, truth without the ``by`` columns): the result is exact only once every row
    is in, so the rows are kept and evaluated at ``compute()``. The message names the
    keyword that keeps sums only.
    """


def warn(warning: FrameMetricsWarning) -> None:
    """Issue a warning attributed to the caller's own line, outside frame_metrics.

    A fixed ``stacklevel`` would point into the package when the call came through the
    namespace, ``compare`` or the command line. The warning itself is issued, so that a
    handler (the command line's) reads its parts.
    """
    package = __name__.rpartition(".")[0] + "."
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level + 1)


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
