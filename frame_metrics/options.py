"""The metric options and cutoffs, validated once, up front.

Every option is declared once, as a row of :data:`OPTIONS`: its accepted values, its
default, a doc line, the metrics that read it, whether it changes the per-user
statistics or only how they combine, and its command-line flag. :class:`MetricOptions`
takes its defaults and its validation from the table; the conventions' option lists
(:data:`frame_metrics.conventions.METRIC_OPTIONS`), :data:`CHOICES`,
:data:`COMBINATION_OPTIONS`, the command line's flags and the documentation's options
page derive from it. Adding an option is one row here, a field of :class:`MetricOptions`
and a keyword of :func:`frame_metrics.evaluate` (a test holds the three equal), plus its
meaning in the metrics that read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, get_args

from frame_metrics.errors import InvalidOptionError, shown
from frame_metrics.numerics import is_int, is_real

__all__ = [
    "CHOICES",
    "COMBINATION_OPTIONS",
    "DEFAULT_K",
    "EE_PERSISTENCE",
    "EVERY",
    "MAX_K",
    "NOT_GIVEN",
    "OPTIONS",
    "RANKING",
    "RBP_PERSISTENCE",
    "GainTable",
    "MetricOptions",
    "NotGiven",
    "Option",
    "format_value",
    "given",
    "is_int",
    "is_real",
    "markdown",
    "option",
    "other_tie_rules",
    "validate_k",
]


class NotGiven:
    """The default of ``threshold``, told apart from an explicit ``None``.

    Both mean ``rel > 0``; passing ``threshold=None`` also says that this is meant, which
    silences :class:`~frame_metrics.errors.RelevanceWarning` (spec section 8). Written
    ``None``, as the signature and the help show it.
    """

    def __repr__(self) -> str:
        return "None"

    def __reduce__(self) -> str:
        return "NOT_GIVEN"  # one object, in every process


#: ``threshold``'s default: ``None`` not passed by the caller (see :class:`NotGiven`).
NOT_GIVEN: Final = NotGiven()


def given(value: object) -> bool:
    """Whether an option's value was passed (``None`` included) rather than left out.

    Examples
    --------
    >>> given(NOT_GIVEN), given(None), given(4)
    (False, True, True)
    """
    return value is not NOT_GIVEN


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
Exposure = Literal["log", "rbp", "uniform"]
ParityTargetName = Literal["catalog", "merit", "uniform"]
#: An explicit parity target: (group, share) pairs, sorted by group (spec 9.2).
ParityTable = tuple[tuple[Any, float], ...]
ParityTarget = ParityTargetName | ParityTable
CalibrationWeight = Literal["uniform", "reciprocal", "log"]
Divergence = Literal["kl", "js"]
#: How propensity weights are normalised (spec 9.4): per user over the relevant items
#: (self-normalised), or not at all.
Ips = Literal["snips", "ips"]

#: ``Option.metrics`` of an option every ranking metric reads (those judged against the
#: relevance in truth: a metric string of any of them may set it).
RANKING: Final = "ranking"
#: ``Option.metrics`` of an option about the input rows, read whatever the metric.
EVERY: Final = "every"

#: Which metrics read an option (see ``Option.metrics``).
Readers = tuple[str, ...] | Literal["ranking", "every"]

#: When an option is read: ``"statistics"``, it changes the per-user statistics (hits,
#: gains, the relevant set); ``"combination"``, only how a metric combines them, so two
#: metric strings that differ in it alone share their statistics.
Stage = Literal["statistics", "combination"]


@dataclass(frozen=True)
class Option:
    """One option, declared once: what it accepts, its default, who reads it, its flag.

    Parameters
    ----------
    name
        The keyword of :func:`frame_metrics.evaluate` and field of :class:`MetricOptions`.
    default
        The spec's value.
    expected
        The accepted values as an error message says them after "expected" (for an
        option with :attr:`choices`, what the message adds after them: ``gain``'s table).
    doc
        One line saying what it does, in the Python API's terms.
    metrics
        The metrics that read it: names, :data:`RANKING` (every ranking metric) or
        :data:`EVERY` (it is about the input rows).
    stage
        ``"statistics"`` or ``"combination"`` (see :data:`Stage`).
    help
        The command line's help line for :attr:`flag`, in its terms, without the default.
    choices
        The accepted strings, the default among them (from the option's ``Literal``).
    table
        Also accepts a ``{relevance level: gain}`` table (``gain``).
    preset
        A convention may set it, so ``evaluate`` defaults it to ``None`` (the
        convention's value, else the spec's).
    per_metric
        A metric string may set it for one metric (``"ndcg(gain=binary)@10"``).
    metavar
        The command line's name for its value (an option without :attr:`choices`).
    cli_default
        What the command line's help says for the default, when not the value itself.
    check
        Validates a value and returns it in its normal form; raises
        :class:`~frame_metrics.errors.InvalidOptionError`.

    Examples
    --------
    >>> option("ap_denominator").choices
    ('min_k', 'relevant', 'hits', 'k')
    >>> option("ap_denominator").flag, option("ap_denominator").stage
    ('--ap-denominator', 'combination')
    >>> option("head_share").check(0.5)
    0.5
    >>> option("head_share").check(2)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: head_share: expected a number in (0, 1), got 2
    """

    name: str
    default: Any
    expected: str
    doc: str
    metrics: Readers
    stage: Stage
    help: str
    check: Callable[[object], Any]
    choices: tuple[str, ...] = ()
    table: bool = False
    preset: bool = True
    per_metric: bool = True
    metavar: str | None = None
    cli_default: str | None = None
    #: How the option's table reads, in the documentation (``table`` options).
    table_doc: str = "{level: gain}"
    #: The command line's reader of a ``table`` option's value (None: gain's), or of a
    #: text option's (``str``: a column name).
    parse: Callable[[str], Any] | None = None
    #: Metrics beyond :attr:`metrics` that read it: those judged against relevance in
    #: other families (who is evaluated: expected exposure), or the parity metrics,
    #: whose merit target counts relevant truth rows.
    also: tuple[str, ...] = ()
    #: Its annotation in ``evaluate``'s signature, as the source writes it.
    annotation: str = ""
    #: Its entry in ``evaluate``'s docstring (:func:`frame_metrics.keywords.parameters_doc`).
    api_doc: str = ""

    @property
    def flag(self) -> str:
        """The command line's option: ``--`` and the name, ``_`` written ``-``."""
        return "--" + self.name.replace("_", "-")


def _refuse(name: str, expected: str, got: str) -> InvalidOptionError:
    return InvalidOptionError(f"expected {expected}, got {got}", option=name)


def _one_of(name: str, choices: tuple[str, ...], extra: str = "") -> Callable[[object], Any]:
    """A check that the value is one of ``choices`` (``extra``: said after them)."""

    def check(value: object) -> object:
        if not isinstance(value, str) or value not in choices:
            listed = ", ".join(repr(c) for c in choices)
            raise _refuse(name, f"one of {listed}{extra}", shown(value))
        return value

    return check


def _in_range(
    name: str, low: float, high: float, expected: str, *, none: bool = False
) -> Callable[[object], Any]:
    """A check that the value is a number in the open interval (``low``, ``high``)."""

    def check(value: object) -> float | None:
        if none and value is None:
            return None
        number = _as_float(value)
        if number is None or not low < number < high:
            raise _refuse(name, expected, _refused(value))
        return number

    return check


_THRESHOLD = "a finite number >= 0 or None"
_GAIN_NAMES: tuple[str, ...] = get_args(GainName)
_GAIN_TABLE = " or a {relevance level: gain} table such as {2: 3, 3: 7}"


def _check_threshold(value: object) -> float | None:
    if value is None:
        return None
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise _refuse("threshold", _THRESHOLD, _refused(value))
    # numpy scalars become Python numbers: polars reads them as literals of their own.
    return number


def _check_gain(value: object) -> Gain:
    """A gain's name, or a mapping of relevance levels to gains as a sorted tuple."""
    if isinstance(value, tuple):  # already a gain table (a copy made by ``changed``)
        return value
    if not isinstance(value, str):
        return _gain_table(value)
    checked: GainName = _one_of("gain", _GAIN_NAMES, _GAIN_TABLE)(value)
    return checked


_PARITY_TABLE = " or a {group: share} table such as {'head': 0.5, 'tail': 0.5}"


def _check_parity_target(value: object) -> ParityTarget:
    """A target's name, or a ``{group: share}`` mapping as a tuple sorted by group.

    Shares are numbers >= 0 with a positive sum; they are normalised where they are
    used, over the groups. Groups of several types sort by type name first.
    """
    if isinstance(value, tuple):  # already a table (a copy made by ``changed``)
        return value
    if isinstance(value, str):
        checked: ParityTargetName = _one_of(
            "parity_target", get_args(ParityTargetName), _PARITY_TABLE
        )(value)
        return checked
    expected = "expected a {group: share} table of finite numbers >= 0 with a positive sum"
    items = list(value.items()) if isinstance(value, Mapping) else None
    if not items:
        raise InvalidOptionError(f"{expected}, got {shown(value)}", option="parity_target")
    pairs: dict[Any, float] = {}
    for group, share in items:
        number = _as_float(share)
        if number is None or not math.isfinite(number) or number < 0:
            raise InvalidOptionError(
                f"{expected}, got {_refused(share)} in {shown(value)}", option="parity_target"
            )
        pairs[group] = number
    if not sum(pairs.values()) > 0:
        raise InvalidOptionError(
            f"{expected}, got shares summing to 0 in {shown(value)}", option="parity_target"
        )
    return tuple(sorted(pairs.items(), key=lambda p: (type(p[0]).__name__, p[0])))


def _parse_parity_target(text: str) -> str | dict[Any, float]:
    """The command line's ``--parity-target``: a name, or ``GROUP=SHARE,...``.

    A group written as a number is read as one (a numeric group column).

    Examples
    --------
    >>> _parse_parity_target("merit"), _parse_parity_target("head=1,tail=3")
    ('merit', {'head': 1.0, 'tail': 3.0})
    """
    import argparse

    if text.strip() in get_args(ParityTargetName):
        return text.strip()
    table: dict[Any, float] = {}
    try:
        for part in text.split(","):
            group, eq, share = part.partition("=")
            if not eq or not group.strip():
                raise ValueError(part)
            key: Any = group.strip()
            # A group written as a number is one: a numeric group column.
            key = _number_or(key)
            table[key] = float(share)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(get_args(ParityTargetName))} or a table GROUP=SHARE,... "
            f"such as head=0.5,tail=0.5, got {text!r}"
        ) from None
    return table


def _number_or(text: str) -> float | str:
    """``text`` as a float when it is one, else itself."""
    try:
        return float(text)
    except ValueError:
        return text


_PROPENSITY = "a truth column name, 'popularity' or None"


def _check_propensity(value: object) -> str | None:
    """A column name of truth holding P, or ``"popularity"`` (spec 9.4)."""
    if value is None or (isinstance(value, str) and value):
        return value
    raise _refuse("propensity", _PROPENSITY, shown(value))


_GAMMA = "a finite number >= -1 or None"


def _check_gamma(value: object) -> float | None:
    """Yang et al.'s gamma: P = (n / max n)^((gamma + 1) / 2) <= 1 needs gamma >= -1."""
    if value is None:
        return None
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number < -1:
        raise _refuse("propensity_gamma", _GAMMA, _refused(value))
    return number


_MAX_WEIGHT = "a finite number > 0 or None"


def _check_max_weight(value: object) -> float | None:
    if value is None:
        return None
    number = _as_float(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise _refuse("max_weight", _MAX_WEIGHT, _refused(value))
    return number


def _choice(
    name: str,
    literal: Any,
    doc: str,
    help: str,
    metrics: Readers,
    stage: Stage,
    **more: Any,
) -> Option:
    """A row for an option whose values are the strings of ``literal``, the first the default."""
    choices: tuple[str, ...] = get_args(literal)
    return Option(
        name, choices[0], "", doc, metrics, stage, help, _one_of(name, choices), choices, **more
    )


#: Expected exposure's metrics: judged against relevance, outside the ranking family.
_EE = ("ee_loss", "ee_disparity", "ee_relevance")
#: The per-user metrics of the top rows not judged against relevance.
_LISTED = ("novelty", "arp", "aplt", "diversity", "miscalibration", "list_parity")

#: Every option, in the order the command line and the documentation list them.
OPTIONS: tuple[Option, ...] = (
    Option(
        "threshold",
        None,
        _THRESHOLD,
        "Relevance an item needs to count as relevant (rel >= threshold); None: any "
        "relevance > 0; 0: every truth row, whatever its relevance.",
        RANKING,
        "statistics",
        "relevance needed to count as relevant, rel >= X; 0: every truth row",
        _check_threshold,
        metavar="X",
        cli_default="rel > 0",
        also=(*_EE, "exposure_parity", "list_parity"),
        annotation="float | NotGiven | None",
        api_doc=(
            "Relevance needed to count as relevant (``rel >= threshold``); default: ``rel > "
            "0``. ``0``: every truth row is relevant, whatever its relevance. Left out on "
            "levels that look like star ratings (0.5 to 5, say), the call warns "
            "(:class:`~frame_metrics.errors.RelevanceWarning`); ``threshold=None`` keeps ``rel "
            "> 0`` and says it is meant."
        ),
    ),
    Option(
        "gain",
        "linear",
        _GAIN_TABLE,
        "DCG gain: linear (rel), exponential (2^rel - 1), binary (1), or a trec_eval "
        "table {level: gain} (other levels keep their relevance as gain).",
        ("dcg", "ndcg"),
        "statistics",
        "DCG gain: linear, exponential, binary or a trec_eval table LEVEL=GAIN,...",
        _check_gain,
        _GAIN_NAMES,
        table=True,
        metavar="GAIN",
        annotation="GainName | Mapping[float, float] | None",
        api_doc=(
            'DCG gain: ``"linear"`` (default), ``"exponential"`` (2^rel - 1), ``"binary"``, or '
            "a trec_eval gain table ``{level: gain}`` (levels outside it keep their relevance)."
        ),
    ),
    _choice(
        "gain_scope",
        GainScope,
        "Which truth items gain in DCG and the ideal DCG: those passing threshold, or "
        "every relevance > 0 (trec_eval's ndcg).",
        "who gains in DCG: items passing --threshold, or every rel > 0",
        ("dcg", "ndcg", "rbp"),
        "statistics",
        annotation="GainScope | None",
        api_doc=(
            '``"relevant"`` (items passing ``threshold`` gain, default) or ``"positive"`` '
            "(every relevance > 0 gains: trec_eval's ndcg)."
        ),
    ),
    _choice(
        "idcg",
        Idcg,
        "The ideal DCG: from the user's relevant items, best k; or k slots of gain 1 "
        "(RecTools' NDCG).",
        "the ideal DCG: the user's relevant items, or k slots of gain 1",
        ("ndcg",),
        "combination",
        annotation="Idcg | None",
        api_doc=(
            '``"relevant"`` (the user\'s best relevant items, default) or ``"k"`` (k slots of '
            "gain 1: RecTools' NDCG)."
        ),
    ),
    _choice(
        "ap_denominator",
        ApDenominator,
        "The D of AP@k: min(|R|, k), |R|, hits@k or k.",
        "the denominator of AP@k",
        ("ap",),
        "combination",
        annotation="ApDenominator | None",
        api_doc=('D in AP@k: ``"min_k"`` (default), ``"relevant"``, ``"hits"`` or ``"k"``.'),
    ),
    _choice(
        "mrr_cutoff",
        MrrCutoff,
        "MRR's first relevant item: within k, or anywhere in the list (trec_eval's recip_rank).",
        "MRR: the first relevant item within k, or anywhere",
        ("mrr",),
        "combination",
        annotation="MrrCutoff | None",
        api_doc=(
            '``"k"`` (default) or ``"none"``: the first relevant item anywhere in the list '
            "(trec_eval's recip_rank)."
        ),
    ),
    _choice(
        "zero_ideal",
        ZeroIdeal,
        "ndcg of a user whose ideal DCG is 0: 0 (trec_eval, scikit-learn), or no value, "
        "left out of the mean (Recommenders).",
        "ndcg of a user whose ideal DCG is 0: 0, or left out",
        ("ndcg",),
        "combination",
        annotation="ZeroIdeal | None",
        api_doc=(
            'ndcg of a user whose ideal DCG is 0 (relevant items that all gain 0): ``"zero"`` '
            '(default, trec_eval and scikit-learn) or ``"skip"`` (no value, left out of the '
            "mean: Recommenders)."
        ),
    ),
    _choice(
        "ties",
        Ties,
        "Equal scores: item ascending, item descending, item descending as text, the "
        "input order, or the expected value over every order of the tied items.",
        "equal scores (with --score-col): a tie rule, or the average",
        RANKING,
        "statistics",
        also=(*_LISTED, *_EE),
        annotation="Ties | None",
        api_doc=(
            'Equal scores (with ``score``): ``"item"`` (item ascending, default), '
            '``"item_desc"`` (item descending: RePlay), ``"item_desc_text"`` (item descending '
            'compared as text: trec_eval\'s docnos), ``"input"`` (input row order: a stable '
            'sort, as Recommenders and ranx) or ``"average"`` (dcg, ndcg, precision, recall, f1 '
            "and hit_rate take their expected value over every order of the tied items). Ranks "
            "given in a ``rank`` column are unique within a user and never tie: a tie rule "
            "given with them (here or in a metric string) is ignored with a warning."
        ),
    ),
    _choice(
        "users",
        Users,
        "Who may be evaluated: every user seen, those with a truth row, those with a "
        "recommendation, or those with both.",
        "who may be evaluated: every user seen, or those in truth/recs/both",
        RANKING,
        "combination",
        also=_EE,
        annotation="Users | None",
        api_doc=(
            'Who may be evaluated: ``"all"`` (every user seen, default), ``"truth"`` (users '
            'with a truth row), ``"recs"`` (users with a recommendation) or ``"both"``; then '
            "``empty`` decides for those without a relevant item."
        ),
    ),
    _choice(
        "empty",
        EmptyPolicy,
        "Users without a relevant item: left out of the means, or scored 0.",
        "users without a relevant item: left out or scored 0",
        RANKING,
        "combination",
        also=_EE,
        annotation="EmptyPolicy | None",
        api_doc=('Users without a relevant item: ``"skip"`` (left out, default) or ``"zero"``.'),
    ),
    _choice(
        "relevant_set",
        RelevantSet,
        "Where R comes from: every relevant truth item, or only those recommended at "
        "some rank (torchmetrics, scikit-learn).",
        "R: every relevant truth item, or those recommended",
        RANKING,
        "statistics",
        annotation="RelevantSet | None",
        api_doc=(
            '``"truth"`` (every relevant truth item, default) or ``"listed"`` (only those '
            "recommended at some rank: what torchmetrics and scikit-learn see)."
        ),
    ),
    Option(
        "persistence",
        None,
        "a number in (0, 1) or None",
        "RBP browsing's p, the chance the user reads on to the next item; None: 0.8 for "
        "rbp and exposure='rbp', 0.5 for expected exposure.",
        (
            "rbp",
            "exposure_gini",
            "exposure_parity",
            "list_parity",
            "ee_loss",
            "ee_disparity",
            "ee_relevance",
        ),
        "combination",
        "RBP browsing's persistence p in (0, 1)",
        _in_range("persistence", 0.0, 1.0, "a number in (0, 1) or None", none=True),
        metavar="P",
        cli_default="0.8; 0.5 for expected exposure",
        annotation="float | None",
        api_doc=(
            "The p of RBP browsing: rbp's, ``exposure=\"rbp\"``'s (default 0.8) and expected "
            "exposure's (default 0.5)."
        ),
    ),
    _choice(
        "rbp_gain",
        RbpGain,
        "What a relevant item adds to rbp: 1, its relevance (ranx), or its relevance "
        "over the user's largest judged relevance (trec_eval).",
        "what a relevant item adds to rbp: 1, its relevance, or relative",
        ("rbp",),
        "combination",
        annotation="RbpGain | None",
        api_doc=(
            'What a relevant item adds to rbp: ``"binary"`` (1, default), ``"relevance"`` '
            '(ranx) or ``"relative"`` (relevance over the user\'s largest: trec_eval 10.0).'
        ),
    ),
    Option(
        "max_relevance",
        None,
        "a number in (0, 1000) or None",
        "err's g_max, in P = (2^g - 1) / 2^g_max; None: the largest relevance in truth.",
        ("err",),
        "combination",
        "err's largest relevance g_max",
        _in_range("max_relevance", 0.0, 1000.0, "a number in (0, 1000) or None", none=True),
        metavar="G",
        cli_default="the largest in TRUTH",
        annotation="float | None",
        api_doc=("err's g_max (default: the largest relevance in truth)."),
    ),
    _choice(
        "on_duplicate",
        DuplicatePolicy,
        "A repeated (user, item) row: an error, or keep the best-ranked recommendation "
        "and the highest-relevance truth row.",
        "a repeated (user, item) row: fail or keep the best",
        EVERY,
        "statistics",
        per_metric=False,
        annotation="DuplicatePolicy | None",
        api_doc=(
            'A repeated (user, item) row: ``"error"`` (default) or ``"first"`` (keep the '
            "best-ranked recommendation, the highest-relevance truth row)."
        ),
    ),
    _choice(
        "similarity",
        Similarity,
        "Item similarity for diversity: chosen from the features dtype, Jaccard over "
        "categories, or cosine over a vector.",
        "item similarity for diversity",
        ("diversity",),
        "statistics",
        preset=False,
        per_metric=False,
        annotation="Similarity",
        api_doc=('``"auto"`` (from the features dtype), ``"jaccard"`` or ``"cosine"``.'),
    ),
    _choice(
        "unexpected",
        Unexpected,
        "What makes an item unexpected for serendipity: not in the baseline's top k, or "
        "not in the user's train rows.",
        "serendipity's unexpected items: not in --baseline or --train",
        ("serendipity",),
        "statistics",
        preset=False,
        per_metric=False,
        annotation="Unexpected",
        api_doc=(
            "Serendipity's unexpected items: ``\"baseline\"`` (not in the baseline's top k, "
            'default) or ``"history"`` (not in the user\'s ``train`` rows).'
        ),
    ),
    Option(
        "head_share",
        0.2,
        "a number in (0, 1)",
        "aplt's short head: the most popular train items holding this share of the train "
        "interactions (the rest is the long tail).",
        ("aplt",),
        "statistics",
        "aplt's short head: the most popular --train items holding this share of the interactions",
        _in_range("head_share", 0.0, 1.0, "a number in (0, 1)"),
        preset=False,
        per_metric=False,
        metavar="X",
        annotation="float",
        api_doc=(
            "aplt's long-tail cut: the short head is the most popular train items holding this "
            "share of train (user, item) pairs (default 0.2); the rest is the tail."
        ),
    ),
    _choice(
        "exposure",
        Exposure,
        "The browsing model, the attention e(r) rank r gets: 1/log2(r+1), RBP's p^(r-1) "
        "(persistence, default 0.8), or 1.",
        "browsing model of exposure metrics: e(r) = 1/log2(r+1), p^(r-1) or 1",
        ("exposure_gini", "exposure_parity", "list_parity"),
        "statistics",
        annotation="Exposure | None",
        api_doc=(
            "The browsing model of exposure_gini, exposure_parity and list_parity: the "
            'attention rank r gets, ``"log"`` (1/log2(r+1), default), ``"rbp"`` (p^(r-1), p = '
            '``persistence``, 0.8 when unset) or ``"uniform"`` (1).'
        ),
    ),
    Option(
        "parity_target",
        "catalog",
        _PARITY_TABLE,
        "The item groups' target shares of exposure: their shares of catalog items, of "
        "relevant truth rows (merit), equal shares, or a {group: share} table (normalised).",
        ("exposure_parity", "list_parity"),
        "statistics",
        "target shares of exposure_parity and list_parity: catalog, merit, uniform or a "
        "table GROUP=SHARE,...",
        _check_parity_target,
        get_args(ParityTargetName),
        table=True,
        metavar="TARGET",
        table_doc="{group: share}",
        parse=_parse_parity_target,
        annotation="ParityTargetName | Mapping[Any, float] | None",
        api_doc=(
            'The target shares of exposure_parity and list_parity: ``"catalog"`` (each item '
            'group\'s share of catalog items, default), ``"merit"`` (its share of relevant truth '
            'rows), ``"uniform"``, or a ``{group: share}`` table (normalised; it names every '
            "group, and only groups there are)."
        ),
    ),
    Option(
        "calibration_alpha",
        0.01,
        "a number in (0, 1)",
        "miscalibration's smoothing: the list's distribution q is mixed with the history's p "
        "as (1 - alpha)·q + alpha·p, so a missed category costs at most log2(1/alpha) bits.",
        ("miscalibration",),
        "statistics",
        "miscalibration's smoothing alpha in (0, 1)",
        _in_range("calibration_alpha", 0.0, 1.0, "a number in (0, 1)"),
        metavar="A",
        annotation="float | None",
        api_doc=(
            "miscalibration's smoothing α in (0, 1) (default 0.01): the list's category "
            "distribution enters KL as (1 − α)·q + α·p."
        ),
    ),
    _choice(
        "calibration_weight",
        CalibrationWeight,
        "miscalibration's weight of the item at rank r in the list's distribution: 1, "
        "1/r, or 1/log2(r + 1).",
        "miscalibration's weight of rank r: 1, 1/r or 1/log2(r+1)",
        ("miscalibration",),
        "statistics",
        annotation="CalibrationWeight | None",
        api_doc=(
            'The weight of rank r in miscalibration\'s list distribution: ``"uniform"`` (1, '
            'default), ``"reciprocal"`` (1/r) or ``"log"`` (1/log2(r + 1)).'
        ),
    ),
    _choice(
        "divergence",
        Divergence,
        "miscalibration's divergence: KL(p || smoothed q) in bits (Steck), or the "
        "Jensen-Shannon distance sqrt(JSD(p, q)) with log2, unsmoothed, in [0, 1].",
        "miscalibration's divergence: KL with alpha, or the Jensen-Shannon distance",
        ("miscalibration",),
        "statistics",
        annotation="Divergence | None",
        api_doc=(
            "miscalibration's divergence: ``\"kl\"`` (default, Steck's smoothed KL in bits) or "
            '``"js"`` (the Jensen–Shannon distance √JSD, log2, unsmoothed).'
        ),
    ),
    Option(
        "propensity",
        None,
        _PROPENSITY,
        "Propensity-scored metrics (spec 9.4): each relevant item counts 1/P times, P from "
        "this truth column or, with 'popularity', from train popularity; None: unweighted.",
        RANKING,
        "statistics",
        "propensity-scored metrics: P from this truth column, or 'popularity' (from --train)",
        _check_propensity,
        preset=False,
        per_metric=False,
        metavar="COL",
        cli_default="none (unweighted)",
        parse=str,
        annotation="str | None",
        api_doc=(
            "Propensity-scored ranking metrics (spec 9.4), for logs where popular items are "
            "observed more: a truth column holding each truth row's propensity P in (0, 1] (the "
            'chance the pair was observed), or ``"popularity"``: P_i = (n_i / max_j n_j)^((γ + '
            "1) / 2) from ``train`` (n_i the distinct train users of item i over the whole "
            "frame, 1 for an item not in train; Yang et al., RecSys 2018). Each relevant item "
            "then counts w = 1/P times in every ranking metric: hits@k and |R| are sums of "
            "weights, DCG gains and the ideal DCG's are weighted, AP's hits@r too; MRR and "
            'hit_rate are unchanged. With equal P per user (``ips="snips"``) or P = 1 '
            '(``"ips"``) every value equals the unweighted one exactly. A null P, P <= 0 or P > '
            "1 on a truth row is an error. ``fm.diagnose`` reports the weights' effective "
            "sample size."
        ),
    ),
    Option(
        "propensity_gamma",
        None,
        _GAMMA,
        "With propensity='popularity' (required there): P_i = (n_i / max n)^((gamma + 1) / 2), "
        "n_i the distinct train users of item i (Yang et al. 2018). No default: it depends "
        "on the data; Yang et al. estimated 1.55 to 3.07 on their three data sets, so about 2 "
        "is a start (report a range). A larger gamma lowers rare items' P faster, so they "
        "weigh more: more correction, more variance; -1 gives P = 1, unweighted.",
        RANKING,
        "statistics",
        "the gamma of --propensity popularity: P = (n / max n)^((gamma + 1) / 2); "
        "larger: rare items weigh more (Yang et al. estimated 1.55 to 3.07)",
        _check_gamma,
        preset=False,
        per_metric=False,
        metavar="G",
        cli_default="none: required with --propensity popularity",
        annotation="float | None",
        api_doc=('γ of ``propensity="popularity"`` (required there, no default; >= -1).'),
    ),
    _choice(
        "ips",
        Ips,
        "Propensity weights w = 1/P normalised per user to average 1 over the relevant "
        "items (snips), or used as they are (ips).",
        "propensity weights: normalised per user (snips) or as they are (ips)",
        RANKING,
        "statistics",
        preset=False,
        annotation="Ips",
        api_doc=(
            '``"snips"`` (default): the weights are normalised per user to average 1 over the '
            "user's relevant items, w · |R| / Σ_R w (so recall is Σ_hits w / Σ_R w, Yang's "
            'SNIPS recall); ``"ips"``: w as it is. A metric string may set it: '
            '``"recall(ips=ips)@10"``.'
        ),
    ),
    Option(
        "max_weight",
        None,
        _MAX_WEIGHT,
        "Propensity weights 1/P are clipped at this value (before snips normalises them); "
        "None: not clipped.",
        RANKING,
        "statistics",
        "clip propensity weights 1/P at W",
        _check_max_weight,
        preset=False,
        per_metric=False,
        metavar="W",
        cli_default="none",
        annotation="float | None",
        api_doc=("Clip the weights 1/P at this value (before normalising them); default: none."),
    ),
)

_BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def option(name: str) -> Option:
    """The row of :data:`OPTIONS` named ``name``."""
    return _BY_NAME[name]


#: The accepted values of every string option, first one the default.
CHOICES: dict[str, tuple[str, ...]] = {o.name: o.choices for o in OPTIONS if o.choices}

#: Options that change only how a metric combines its statistics, not the statistics.
COMBINATION_OPTIONS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.stage == "combination")


#: The spec's default of every option, for :class:`MetricOptions`' fields.
_DEFAULTS: dict[str, Any] = {o.name: o.default for o in OPTIONS}


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
    expected = "expected a {relevance level: gain} table of finite numbers >= 0"
    if not items:
        raise InvalidOptionError(f"{expected}, got {shown(value)}", option="gain")

    def checked(v: object) -> float:
        number = _as_float(v)
        if number is None or not math.isfinite(number) or number < 0:
            raise InvalidOptionError(
                f"{expected}, got {_refused(v)} in {shown(value)}", option="gain"
            )
        return number

    pairs = {checked(level): checked(gain) for level, gain in items}
    return tuple(sorted(pairs.items()))


@dataclass(frozen=True)
class MetricOptions:
    """The options of one metric (or of the call), after its convention: one field per row.

    Each field is a row of :data:`OPTIONS`, which says what it accepts, its default, who
    reads it and what it does (its ``doc``, and its entry in ``fm.evaluate``'s docstring,
    ``api_doc``); ``docs/options.md`` lists them. ``tests/test_options.py`` holds the
    fields, their defaults and the rows equal, so nothing here repeats them.

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

    # The defaults are the table's (OPTIONS); the fields are written out for the type checker.
    threshold: float | None = _DEFAULTS["threshold"]
    gain: Gain = _DEFAULTS["gain"]
    ap_denominator: ApDenominator = _DEFAULTS["ap_denominator"]
    empty: EmptyPolicy = _DEFAULTS["empty"]
    on_duplicate: DuplicatePolicy = _DEFAULTS["on_duplicate"]
    unexpected: Unexpected = _DEFAULTS["unexpected"]
    similarity: Similarity = _DEFAULTS["similarity"]
    head_share: float = _DEFAULTS["head_share"]
    ties: Ties = _DEFAULTS["ties"]
    users: Users = _DEFAULTS["users"]
    idcg: Idcg = _DEFAULTS["idcg"]
    mrr_cutoff: MrrCutoff = _DEFAULTS["mrr_cutoff"]
    relevant_set: RelevantSet = _DEFAULTS["relevant_set"]
    gain_scope: GainScope = _DEFAULTS["gain_scope"]
    persistence: float | None = _DEFAULTS["persistence"]
    max_relevance: float | None = _DEFAULTS["max_relevance"]
    rbp_gain: RbpGain = _DEFAULTS["rbp_gain"]
    zero_ideal: ZeroIdeal = _DEFAULTS["zero_ideal"]
    exposure: Exposure = _DEFAULTS["exposure"]
    parity_target: ParityTarget = _DEFAULTS["parity_target"]
    calibration_alpha: float = _DEFAULTS["calibration_alpha"]
    calibration_weight: CalibrationWeight = _DEFAULTS["calibration_weight"]
    divergence: Divergence = _DEFAULTS["divergence"]
    propensity: str | None = _DEFAULTS["propensity"]
    propensity_gamma: float | None = _DEFAULTS["propensity_gamma"]
    ips: Ips = _DEFAULTS["ips"]
    max_weight: float | None = _DEFAULTS["max_weight"]

    def __post_init__(self) -> None:
        # Each option checked, and kept in its normal form, by its row of the table.
        for row in OPTIONS:
            object.__setattr__(self, row.name, row.check(getattr(self, row.name)))

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

    def persistence_or(self, default: float) -> float:
        """``persistence``, or a metric's default when unset (:data:`RBP_PERSISTENCE`, ...).

        Examples
        --------
        >>> MetricOptions().persistence_or(RBP_PERSISTENCE)
        0.8
        >>> MetricOptions(persistence=0.9).persistence_or(RBP_PERSISTENCE)
        0.9
        """
        return default if self.persistence is None else self.persistence

    def changed(self, **options: Any) -> MetricOptions:
        """A copy with some options replaced (validated again)."""
        return replace(self, **options)


#: RBP's persistence when ``persistence`` is unset: rbp, and ``exposure="rbp"`` (spec 9).
RBP_PERSISTENCE: Final = 0.8
#: Expected exposure's persistence when ``persistence`` is unset (spec 9.2, Diaz et al.).
EE_PERSISTENCE: Final = 0.5

#: The largest cutoff: far beyond any list a person reads, and small enough that every
#: fixed-point sum over a top k (novelty, cosine diversity) keeps 35 or more bits below
#: the point (see ``families/ranking/stats.py``).
MAX_K = 2**20

#: The cutoff of a metric named without one, in a call without ``k`` (spec section 8).
DEFAULT_K = 10

_K_EXPECTED = f"expected an int in [1, {MAX_K}] or a list of them"


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
            raise InvalidOptionError(f"{_K_EXPECTED}, got None", option="k")
        return ()
    values: list[object] = (
        list(k) if isinstance(k, Iterable) and not isinstance(k, (str, bytes)) else [k]
    )
    if not values:
        raise InvalidOptionError(f"{_K_EXPECTED}, got an empty list", option="k")
    for v in values:
        if not is_int(v) or not 1 <= int(v) <= MAX_K:  # type: ignore[call-overload]
            given = v if len(values) > 1 or not isinstance(k, Iterable) else k
            if is_int(given):
                given = int(given)  # type: ignore[call-overload]
            raise InvalidOptionError(f"{_K_EXPECTED}, got {shown(given)}", option="k")
    return tuple(sorted({int(v) for v in values}))  # type: ignore[call-overload]


_READ_BY = {RANKING: "every ranking metric", EVERY: "every metric (the input rows)"}
_STAGES = {"statistics": "the statistics", "combination": "how they combine"}


def format_value(value: object) -> str:
    """An option value written plainly, as the conventions' tables show it.

    Examples
    --------
    >>> format_value(4.0), format_value(0.95), format_value(((2.0, 3.0), (3.0, 7.0)))
    ('4', '0.95', '{2:3,3:7}')
    """
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "{" + ",".join(f"{format_value(a)}:{format_value(b)}" for a, b in value) + "}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return str(value)


def markdown() -> str:
    """Every option as a Markdown table: the documentation's options page.

    The page ``docs/options.md`` is this text (a test keeps them equal).

    Examples
    --------
    >>> print(markdown().splitlines()[0])
    # Options
    """
    lines = [
        "# Options",
        "",
        "Every option of `fm.evaluate` that changes what a metric means, from the table "
        "`frame_metrics.options.OPTIONS` (the command line's flags, the presets' option "
        "lists and this page are generated from it). Each is a keyword of `fm.evaluate`; "
        "those a preset may set default to `None` there (the preset's value, else the "
        "default here). *Where*: `call` (the keyword, and the command line's flag), "
        "`convention` (a preset sets it: [Conventions and presets](conventions.md)), "
        '`metric` (a metric string sets it for one metric: `"ndcg(gain=binary)@10"`). '
        "*Changes*: the per-user statistics (hits, gains, the relevant set), or only how a "
        "metric combines them.",
        "",
        # Six columns, the flag under its option and what it changes under where it is set:
        # the eight of the table as separate columns did not fit the page's column.
        "| option, flag | values | default | read by | where; changes | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for row in OPTIONS:
        if row.choices:
            values = ", ".join(f"`{c}`" for c in row.choices)
            values += f" or a `{row.table_doc}` table" if row.table else ""
        else:
            values = row.expected
        default = "None" if row.default is None else format_value(row.default)
        read_by = (
            _READ_BY[row.metrics]
            if isinstance(row.metrics, str)
            else ", ".join(f"`{m}`" for m in row.metrics)
        )
        if row.also:
            read_by += ", and " + ", ".join(f"`{m}`" for m in row.also)
        where = ", ".join(
            w
            for w, yes in (("call", True), ("convention", row.preset), ("metric", row.per_metric))
            if yes
        )
        lines.append(
            f"| `{row.name}`<br>`{row.flag}` | {values} | `{default}` | {read_by} "
            f"| {where}; *changes* {_STAGES[row.stage]} "
            f"| {row.doc.replace('|', chr(92) + '|')} |"
        )
    return "\n".join(lines) + "\n"
