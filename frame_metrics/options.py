"""The metric options and cutoffs, validated once, up front.

Validation is declarative: :data:`CHOICES` lists the accepted values of every string
option, so a new variant is one new entry there plus its meaning in the metric that
reads it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from frame_metrics.errors import InvalidOptionError, shown

__all__ = [
    "CHOICES",
    "COMBINATION_OPTIONS",
    "DEFAULT_K",
    "MAX_K",
    "GainTable",
    "MetricOptions",
    "is_int",
    "is_real",
    "other_tie_rules",
    "validate_k",
]

GainName = Literal["linear", "exponential", "binary"]
#: A trec_eval-style gain table: (relevance level, gain) pairs, sorted by level.
GainTable = tuple[tuple[float, float], ...]
Gain = GainName | GainTable
ApDenominator = Literal["min_k", "relevant", "hits", "k"]
EmptyPolicy = Literal["skip", "zero"]
DuplicatePolicy = Literal["error", "first"]
Unexpected = Literal["baseline", "history"]
Similarity = Literal["auto", "jaccard", "cosine"]
Ties = Literal["item", "item_desc", "item_desc_text", "input", "average"]
Users = Literal["all", "truth", "recs", "both"]
Idcg = Literal["relevant", "k"]
MrrCutoff = Literal["k", "none"]
RelevantSet = Literal["truth", "listed"]
GainScope = Literal["relevant", "positive"]
RbpGain = Literal["binary", "relevance", "relative"]
ZeroIdeal = Literal["zero", "skip"]

#: The accepted values of every string option, first one the default.
CHOICES: dict[str, tuple[str, ...]] = {
    "gain": ("linear", "exponential", "binary"),
    "ap_denominator": ("min_k", "relevant", "hits", "k"),
    "empty": ("skip", "zero"),
    "on_duplicate": ("error", "first"),
    "unexpected": ("baseline", "history"),
    "similarity": ("auto", "jaccard", "cosine"),
    "ties": ("item", "item_desc", "item_desc_text", "input", "average"),
    "users": ("all", "truth", "recs", "both"),
    "idcg": ("relevant", "k"),
    "mrr_cutoff": ("k", "none"),
    "relevant_set": ("truth", "listed"),
    "gain_scope": ("relevant", "positive"),
    "rbp_gain": ("binary", "relevance", "relative"),
    "zero_ideal": ("zero", "skip"),
}

#: Options that change only how a metric combines its per-user statistics, not the
#: statistics: metrics that differ only in these share one statistics frame.
COMBINATION_OPTIONS: tuple[str, ...] = (
    "ap_denominator",
    "empty",
    "users",
    "idcg",
    "mrr_cutoff",
    "persistence",
    "max_relevance",
    "rbp_gain",
    "zero_ideal",
)

#: The gains of ``gain=`` given by name (a mapping is a gain table).
GAIN_NAMES: tuple[str, ...] = ("linear", "exponential", "binary")


def _check_choice(name: str, value: object) -> None:
    allowed = CHOICES[name]
    if not isinstance(value, str) or value not in allowed:
        listed = ", ".join(repr(a) for a in allowed)
        if name == "gain":
            listed += " or a {relevance level: gain} table such as {2: 3, 3: 7}"
        raise InvalidOptionError(f"{name}: expected one of {listed}, got {shown(value)}")


def other_tie_rules(rule: str) -> str:
    """The tie rules but ``rule``, as an error message lists them.

    Examples
    --------
    >>> other_tie_rules("average")
    "'item', 'item_desc', 'item_desc_text' or 'input'"
    """
    rules = [repr(r) for r in CHOICES["ties"] if r != rule]
    return f"{', '.join(rules[:-1])} or {rules[-1]}"


def _as_float(value: object) -> float | None:
    """A real number as a float; ``None`` for anything else, or an int past the float range.

    ``float(10**400)`` raises OverflowError: such a value is refused with the others.
    """
    if not is_real(value):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None


def _refused(value: object) -> str:
    """A refused option value as a message shows it, saying when it has no float."""
    past = " (past the float range)" if is_real(value) and _as_float(value) is None else ""
    return shown(value) + past


def _gain_table(value: object) -> GainTable:
    """A mapping of relevance levels to gains as a sorted tuple of float pairs."""
    items = list(value.items()) if isinstance(value, Mapping) else None
    expected = "gain: expected a {relevance level: gain} table of finite numbers >= 0"
    if not items:
        raise InvalidOptionError(f"{expected}, got {shown(value)}")

    def checked(v: object) -> float:
        number = _as_float(v)
        if number is None or not math.isfinite(number) or number < 0:
            raise InvalidOptionError(f"{expected}, got {_refused(v)} in {shown(value)}")
        return number

    pairs = {checked(level): checked(gain) for level, gain in items}
    return tuple(sorted(pairs.items()))


def _number(name: str, value: object, low: float, high: float, expected: str) -> float:
    number = _as_float(value)
    if number is None or not low < number < high:
        raise InvalidOptionError(f"{name}: expected {expected}, got {_refused(value)}")
    return number


@dataclass(frozen=True)
class MetricOptions:
    """How relevance, gains, ties, AP and empty cases are treated (spec sections 2-4, 8).

    Parameters
    ----------
    threshold
        Relevance an item needs to count as relevant (``rel >= threshold``); ``None``
        means any positive relevance; ``0`` makes every truth row relevant, whatever its
        relevance (RecTools, Recommenders: their truth has no relevance cut).
    gain
        DCG gain: ``"linear"`` (rel), ``"exponential"`` (2^rel - 1), ``"binary"`` (1),
        or a table ``{level: gain}`` (trec_eval's ``-m ndcg.1=3,2=9``): relevance levels
        in the table take its gain, the others keep their relevance as gain.
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
    ties
        Equal scores (score-ranked input): ``"item"`` = item ascending (the spec's
        rule), ``"item_desc"`` = item descending (RePlay), ``"item_desc_text"`` = item
        descending compared as text (trec_eval's docno order), ``"input"`` = the input row order (a stable sort: Recommenders,
        pandas), ``"average"`` = the expected value over every order of the tied items
        (dcg, ndcg, precision, recall, f1, hit_rate; McSherry and Najork 2008).
    users
        Who may be evaluated before ``empty`` applies: ``"all"`` = every user seen,
        ``"truth"`` = users with a truth row (any relevance), ``"recs"`` = users with a
        recommendation, ``"both"`` = users with both (trec_eval). Users with a relevant
        item outside this set are left out; users in it without one follow ``empty``.
    idcg
        The ideal DCG: ``"relevant"`` = from the user's relevant items, best k;
        ``"k"`` = k slots of gain 1 whatever the user's relevant items (RecTools'
        ``NDCG`` default).
    mrr_cutoff
        ``"k"``: the first relevant item within k; ``"none"``: anywhere in the list
        (trec_eval's ``recip_rank``).
    relevant_set
        Where R comes from: ``"truth"`` = every relevant truth item; ``"listed"`` = only
        the relevant items that were recommended, at any rank (torchmetrics and
        scikit-learn know only the items they are given scores for).
    gain_scope
        Which truth items gain in DCG and the ideal DCG: ``"relevant"`` = those that
        pass ``threshold``; ``"positive"`` = every item with relevance > 0 (trec_eval's
        ``ndcg`` ignores ``-l``).
    persistence
        rbp's p in (0, 1): the chance the user reads on to the next item.
    rbp_gain
        What a relevant item adds to rbp: ``"binary"`` = 1 (the spec's), ``"relevance"``
        = its relevance (ranx), ``"relative"`` = its relevance over the user's largest
        judged relevance (trec_eval 10.0).
    max_relevance
        err's g_max (P_i = (2^g_i - 1) / 2^g_max); ``None``: the largest relevance in
        truth.
    zero_ideal
        ndcg of a user whose ideal DCG is 0 (relevant items that all gain 0, as under
        ``threshold=0`` with relevance 0): ``"zero"`` scores 0 (trec_eval, scikit-learn),
        ``"skip"`` gives no value, so the user is left out of ndcg's mean (Recommenders'
        ``ndcg_at_k``: 0/0 is NaN, which its mean skips).

    Examples
    --------
    >>> MetricOptions(gain="exponential").gain
    'exponential'
    >>> MetricOptions(gain={3: 7, 2: 3}).gain
    ((2.0, 3.0), (3.0, 7.0))
    >>> MetricOptions(gain="log")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: gain: expected one of 'linear', 'exponential', 'binary' or a {relevance level: gain} table such as {2: 3, 3: 7}, got 'log'
    >>> MetricOptions(threshold=-1)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: threshold: expected a finite number >= 0 or None, got -1
    """

    threshold: float | None = None
    gain: Gain = "linear"
    ap_denominator: ApDenominator = "min_k"
    empty: EmptyPolicy = "skip"
    on_duplicate: DuplicatePolicy = "error"
    unexpected: Unexpected = "baseline"
    similarity: Similarity = "auto"
    head_share: float = 0.2
    ties: Ties = "item"
    users: Users = "all"
    idcg: Idcg = "relevant"
    mrr_cutoff: MrrCutoff = "k"
    relevant_set: RelevantSet = "truth"
    gain_scope: GainScope = "relevant"
    persistence: float = 0.8
    max_relevance: float | None = None
    rbp_gain: RbpGain = "binary"
    zero_ideal: ZeroIdeal = "zero"

    def __post_init__(self) -> None:
        t = self.threshold
        if t is not None:
            number = _as_float(t)
            if number is None or not math.isfinite(number) or number < 0:
                raise InvalidOptionError(
                    f"threshold: expected a finite number >= 0 or None, got {_refused(t)}"
                )
            # numpy scalars become Python numbers: polars reads them as literals of their own.
            object.__setattr__(self, "threshold", number)
        h = _number("head_share", self.head_share, 0.0, 1.0, "a number in (0, 1)")
        object.__setattr__(self, "head_share", h)
        p = _number("persistence", self.persistence, 0.0, 1.0, "a number in (0, 1)")
        object.__setattr__(self, "persistence", p)
        if self.max_relevance is not None:
            g = _number(
                "max_relevance", self.max_relevance, 0.0, 1000.0, "a number in (0, 1000) or None"
            )
            object.__setattr__(self, "max_relevance", g)
        if not isinstance(self.gain, (str, tuple)):
            object.__setattr__(self, "gain", _gain_table(self.gain))
        for name in CHOICES:
            if name != "gain" or isinstance(self.gain, str):
                _check_choice(name, getattr(self, name))

    def is_relevant(self, relevance: float) -> bool:
        """Whether a truth row of this relevance is relevant (pure Python, for references)."""
        t = self.threshold
        return relevance > 0 if t is None else relevance >= t

    def gain_of(self, relevance: float) -> float:
        """The DCG gain of a relevance (pure Python, for references)."""
        if isinstance(self.gain, tuple):
            return dict(self.gain).get(float(relevance), float(relevance))
        gains = {"linear": relevance, "exponential": 2.0**relevance - 1.0, "binary": 1.0}
        return float(gains[self.gain])

    def changed(self, **options: Any) -> MetricOptions:
        """A copy with some options replaced (validated again)."""
        return replace(self, **options)


#: The largest cutoff: far beyond any list a person reads, and small enough that every
#: fixed-point sum over a top k (novelty, cosine diversity) keeps 35 or more bits below
#: the point (see ``families/ranking/stats.py``).
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
            given = v if len(values) > 1 or not isinstance(k, Iterable) else k
            if is_int(given):
                given = int(given)  # type: ignore[call-overload]
            raise InvalidOptionError(f"{_K_EXPECTED}, got {shown(given)}")
    return tuple(sorted({int(v) for v in values}))  # type: ignore[call-overload]
