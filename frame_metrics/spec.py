"""The call, described once and without frames: what every runner receives.

``fm.evaluate`` (and ``diagnose``) resolves its arguments into one frozen :class:`Spec`
before any frame is read: the columns, the call's options after its convention, the
requested metrics each with its own options and the exact string the caller wrote, the
cutoffs, how deep the lists are read and which inputs the metrics need. The one-pass
engine, the bucket runner, Spark and Dask all receive this Spec; none rebuilds it, and
none learns a fact about the call from anything else.

Every check that needs no frame runs here, in a fixed order, so that a typo in an
option costs no pass over the data and every runner raises the same first error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, cast

from frame_metrics.columns import Columns
from frame_metrics.conventions import OPTION_NAMES, preset_settings, resolve_options
from frame_metrics.errors import (
    IgnoredOptionWarning,
    InvalidOptionError,
    Keyword,
    LeaveOut,
    MissingInputError,
    Part,
    Pass,
    shown,
)
from frame_metrics.keywords import EXTRA_INPUTS, ROLES, extra_input
from frame_metrics.measure_names import TOOL_CONVENTION, ToolMeasure, possessive, tool_measure
from frame_metrics.metric_names import ParsedName
from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.registry import (
    ALIASES,
    REGISTRY,
    Metric,
    Requested,
    resolve,
    split_names,
)
from frame_metrics.options import (
    DEFAULT_K,
    NOT_GIVEN,
    OPTIONS,
    MetricOptions,
    is_int,
    other_tie_rules,
    validate_k,
)
from frame_metrics.options import option as option_row

#: The options a metric string may set (``"recall(ips=ips)@10"``): the table's per-metric ones.
_PER_METRIC: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.per_metric)

__all__ = [
    "Spec",
    "build_spec",
    "rank_not_read",
    "resolve_requests",
]


_SERENDIPITY_HINT: dict[tuple[str, str], tuple[Part, ...]] = {
    ("serendipity", "baseline"): (
        "; or ",
        Pass("unexpected", "history"),
        " to judge against ",
        Keyword("train"),
        " instead",
    ),
    ("serendipity", "train"): (
        "; or ",
        Pass("unexpected", "baseline"),
        " (the default) to judge against ",
        Keyword("baseline"),
        " instead",
    ),
}


class RelevanceCap(NamedTuple):
    """The largest relevance err allows, and what a refusal of a larger one advises."""

    value: float
    advice: tuple[Part, ...]


@dataclass(frozen=True)
class Spec:
    """One call of ``evaluate`` without its frames: frozen, checked, built once.

    ``options`` are the call's (what a metric named without options of its own reads),
    after the convention; ``requests`` the metrics to compute, each with its own
    options; ``frames`` the names of the frames passed besides recs (``"truth"``,
    ``"train"``, ...); ``validate`` whether the input checks run.

    Examples
    --------
    >>> spec = build_spec({"truth"}, metrics=["ndcg@5", "recall"], k=[10, 20])
    >>> spec.metric_columns, spec.cutoffs, spec.depth
    (['ndcg@5', 'recall@10', 'recall@20'], (5, 10, 20), 20)
    >>> spec.families, sorted(spec.needs)
    (frozenset({'ranking'}), ['truth'])
    """

    columns: Columns
    options: MetricOptions
    requests: tuple[Requested, ...]
    frames: frozenset[str] = field(default_factory=lambda: frozenset({"truth"}))
    validate: bool = True
    #: What the call gives that cannot change its result, one warning each.
    ignored: tuple[IgnoredOptionWarning, ...] = ()
    #: Whether the call says which relevance counts for every metric reading it (a
    #: threshold, None included, or a convention): if not, star ratings are warned of.
    relevance_said: bool = True

    @property
    def long_table(self) -> bool:
        """Recs without truth: a long table that carries relevance itself."""
        return "truth" not in self.frames

    @property
    def source_label(self) -> str:
        """How messages name the recommendations frame."""
        return "long table" if self.long_table else "recs"

    @cached_property
    def families(self) -> frozenset[str]:
        """The metric families asked for."""
        return frozenset(r.metric.family for r in self.requests)

    def of_family(self, family: str) -> list[Requested]:
        """The requested metrics of one family, in request order."""
        return [r for r in self.requests if r.metric.family == family]

    @cached_property
    def needs(self) -> frozenset[str]:
        """The inputs the metrics read beyond recs (``Metric.needs``, resolved)."""
        return frozenset().union(*(r.metric.inputs(r.options) for r in self.requests))

    @property
    def max_k(self) -> int:
        """The largest cutoff asked for."""
        return max((r.k for r in self.requests if r.metric.takes_k), default=0)

    @property
    def depth(self) -> int | None:
        """How deep into each list any metric reads: rows ranked below it are never read.

        ``None``: the whole list (bpref, rbp, r_precision, an MRR without cutoff, or R
        taken from the recommended items).
        """
        whole = any(r.metric.reads_whole_list(r.options) for r in self.requests)
        return None if whole else self.max_k

    @property
    def cutoffs(self) -> tuple[int, ...]:
        """Every distinct cutoff asked for, ascending."""
        return tuple(sorted({r.k for r in self.requests if r.metric.takes_k}))

    @property
    def metric_columns(self) -> list[str]:
        """Output column names, ``"<metric>@<k>"`` (or the bare name), in request order."""
        return [r.column for r in self.requests]

    @property
    def per_user_columns(self) -> list[str]:
        """The output columns that have a value per user (all but corpus metrics)."""
        return [r.column for r in self.requests if r.metric.population != "corpus"]

    @property
    def all_options(self) -> list[MetricOptions]:
        """The call's options and every metric's: what the prepared rows must serve.

        The call's count even when every metric overrides them: the prepared top rows
        are ranked by the call's tie rule.
        """
        return [self.options, *(q.options for q in self.requests)]

    @property
    def gains(self) -> frozenset[str]:
        """The gains in use, for the relevance checks (a gain table counts as linear)."""
        gains: set[str] = {
            o.gain if isinstance(o.gain, str) else "linear" for o in self.all_options
        }
        gains |= {q.metric.own_gain for q in self.requests if q.metric.own_gain is not None}
        return frozenset(gains)

    @property
    def largest_relevance(self) -> RelevanceCap | None:
        """The smallest ``max_relevance`` err is given, which no relevance may exceed.

        With the advice a refusal gives, which depends on who set it: the call, a
        metric string, or a tool's name (ir_measures' ``ERR`` is gdeval's, whose
        ``max_relevance`` is 4 and cannot be set: this package's ``err`` can).
        """
        caps = [
            q
            for q in self.requests
            if "max_relevance" in q.metric.reads() and q.options.max_relevance is not None
        ]
        if not caps:
            return None
        q = min(caps, key=lambda q: cast("float", q.options.max_relevance))
        value = cast("float", q.options.max_relevance)
        advice: tuple[Part, ...]
        if "max_relevance" in dict(q.fixed):
            ours = f"{q.metric.name}@{q.k}"
            advice = (
                f"; {q.column!r} is {possessive(cast('str', q.tool))} ERR (gdeval's), whose "
                f"max_relevance is {value:g} and cannot be set: name {ours!r} for this "
                f"package's err (max_relevance: the largest relevance in truth), or "
                f"'err(max_relevance=<m>)@{q.k}'",
            )
        else:
            advice = (
                "; give ",
                Keyword("max_relevance"),
                " the largest relevance or more, or leave it out to use the largest "
                "relevance in truth",
            )
        return RelevanceCap(value, advice)

    @property
    def propensity_column(self) -> str | None:
        """The truth column holding propensities (spec 9.4), if ``propensity=`` names one.

        Only ranking metrics read it: a call without one does not read the column.
        """
        p = self.options.propensity
        if p is None or p == "popularity" or "ranking" not in self.families:
            return None
        return p

    @property
    def row_order(self) -> bool:
        """Whether a tie rule reads the input row order (``ties="input"``)."""
        return any(o.ties == "input" for o in self.all_options)


def build_spec(
    frames: Iterable[str],
    *,
    metrics: str | Iterable[str] | None = None,
    k: int | Iterable[int] | None = None,
    convention: str | None = None,
    validate: bool = True,
    **keywords: Any,
) -> Spec:
    """The :class:`Spec` of a call, every frame-free check run, in a fixed order.

    ``frames``: the names of the frames passed besides recs (``"truth"``, ``"train"``,
    ...); ``keywords``: evaluate's column keywords (rows of
    :data:`frame_metrics.keywords.ROLES`) and metric options (rows of
    :data:`frame_metrics.options.OPTIONS`; ``None``: not given).

    Examples
    --------
    >>> build_spec({"truth"}, metrics="novelty@5")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.MissingInputError: novelty: expected train= (reference interactions with the user and item columns, usually the train split), got None
    """
    # Options and names first: a typo costs no pass over the data.
    roles = {row.name for row in ROLES}
    named = {name: keywords.pop(name) for name in list(keywords) if name in roles}
    options = keywords
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise InvalidOptionError(
            f"options: expected keywords among {', '.join(OPTION_NAMES)}, got {', '.join(unknown)}"
        )
    rank, score, sample = named.get("rank"), named.get("score"), named.get("sample")
    # threshold=None says "rel > 0, as meant"; left out, it is the same number, unsaid.
    threshold_given = options.get("threshold", NOT_GIVEN) is not NOT_GIVEN
    if not threshold_given:
        options["threshold"] = None
    given = frozenset(frames)
    by_tools: list[_Unread] = []
    names: list[ParsedName] = []
    requests = tuple(
        resolve_requests(
            metrics,
            k,
            DEFAULT_RANKING,
            given=options,
            convention=convention,
            ignored=by_tools,
            parsed_names=names,
        )
    )
    ignored = [rank_not_read(rank, score)] if rank is not None and score is not None else []
    ignored += _ignored_options(
        names,
        k,
        requests,
        ties=options.get("ties"),
        score=score,
        rank="rank" if rank is None else rank,
        long_table="truth" not in given,
    )
    call = resolve_options(options, convention=convention)
    columns = Columns.of(named)
    long_table = "truth" not in given
    _check_metric_options(requests, long_table, score is not None)
    providers = {need: e for e in EXTRA_INPUTS for need in e.needs}
    for q in requests:
        for need in sorted(q.metric.inputs(q.options)):
            source = providers.get(need)
            if source is not None and source.name not in given:
                raise MissingInputError(
                    q.metric.name,
                    source.name,
                    source.what,
                    *_SERENDIPITY_HINT.get((q.metric.name, source.name), ()),
                )
    if long_table and score is not None:
        raise InvalidOptionError(
            f"expected None for a long table (it carries ranks), got {score!r}; ",
            Pass("truth"),
            " to rank recommendations by score",
            option="score",
        )
    if sample is not None:
        _check_samples(requests, long_table, sample)
    ignored += _unread_warnings(by_tools)
    ignored += _check_propensity(call, requests, given)
    if "exclude" in given and all(q.metric.family == "rating" for q in requests):
        ignored.append(
            IgnoredOptionWarning(
                "ignored: the rating metrics compare each prediction with its rating and "
                "read no ranked list, from which ",
                Keyword("exclude"),
                " removes pairs before the cutoff; ",
                LeaveOut("exclude"),
                option="exclude",
            )
        )
    relevance_said = (
        threshold_given
        or convention is not None
        or not any(
            "threshold" in q.metric.reads() and not {"threshold", "convention"} & q.own
            for q in requests
        )
    )
    return Spec(columns, call, requests, given, validate, tuple(ignored), relevance_said)


def rank_not_read(rank: str, score: str) -> IgnoredOptionWarning:
    """``rank=`` beside ``score=``: the score ranks (spec section 8), said once.

    Examples
    --------
    >>> print(rank_not_read("position", "s"))
    rank: 'position' ignored: score='s' ranks the recommendations (score descending, ties by the tie rule); leave score out to rank by the rank column, or leave rank out to say the score ranks
    """
    return IgnoredOptionWarning(
        f"{rank!r} ignored: score={score!r} ranks the recommendations (score descending, "
        "ties by the tie rule); ",
        LeaveOut("score"),
        " to rank by the rank column, or ",
        LeaveOut("rank"),
        " to say the score ranks",
        option="rank",
    )


def _check_propensity(
    call: MetricOptions, requests: Sequence[Requested], given: frozenset[str]
) -> list[IgnoredOptionWarning]:
    """Propensity scoring's frame-free refusals (spec 9.4), and its options that do nothing.

    ``propensity="popularity"`` needs ``propensity_gamma`` (no default) and ``train``;
    ``propensity_gamma`` without it, and ``max_weight`` without propensities, change
    nothing and are reported.

    Examples
    --------
    >>> opts = MetricOptions(propensity="popularity")
    >>> _check_propensity(opts, [], frozenset({"truth", "train"}))
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: propensity_gamma: expected a finite number >= -1 with propensity='popularity' (P = (n / max n)^((gamma + 1) / 2); it has no default), got None
    """
    messages: list[IgnoredOptionWarning] = []
    weighted = any(q.metric.family == "ranking" for q in requests)
    if call.propensity == "popularity":
        # train first: without it there is no popularity for any gamma to shape.
        if "train" not in given and weighted:
            also = (
                " (propensity_gamma= is needed too: it has no default)"
                if call.propensity_gamma is None
                else ""
            )
            raise MissingInputError(
                "propensity='popularity'",
                "train",
                extra_input("train").what,
                f"; it counts the distinct train users of each item{also}",
            )
        if call.propensity_gamma is None:
            raise InvalidOptionError(
                "expected a finite number >= -1 with propensity='popularity' "
                "(P = (n / max n)^((gamma + 1) / 2); it has no default), got None",
                option="propensity_gamma",
            )
    elif call.propensity_gamma is not None:
        messages.append(
            IgnoredOptionWarning(
                f"{call.propensity_gamma!r} ignored, it is read with propensity='popularity' "
                f"only (propensity is {call.propensity!r}); ",
                LeaveOut("propensity_gamma"),
                option="propensity_gamma",
            )
        )
    if call.propensity is None and call.max_weight is not None:
        messages.append(
            IgnoredOptionWarning(
                f"{call.max_weight!r} ignored, it clips propensity weights and no "
                "propensity= was given; ",
                LeaveOut("max_weight"),
                option="max_weight",
            )
        )
    return messages


def _check_samples(requests: Sequence[Requested], long_table: bool, sample: str) -> None:
    """``sample=``: several rankings per user, which only some metrics read.

    Other metrics would need their expected value over the samples (future work), and
    a long table would repeat each relevance once per sample.
    """
    refused = [q.column for q in requests if not q.metric.samples]
    if refused:
        readers = sorted(m.name for m in REGISTRY.values() if m.samples)
        raise InvalidOptionError(
            f"expected only metrics that read several rankings per user "
            f"({', '.join(readers)}) with {sample!r} as the sample column, got "
            f"{', '.join(repr(c) for c in refused)}; evaluate them in a call without ",
            Keyword("sample"),
            option="sample",
        )
    if long_table:
        raise InvalidOptionError(
            f"expected recs and truth with the sample column {sample!r}, got a long table; ",
            Pass("truth"),
            " separately (a long table would repeat each relevance once per sample)",
            option="sample",
        )


def _check_metric_options(requests: Sequence[Requested], long_table: bool, scored: bool) -> None:
    """Options a metric's input cannot honour, refused before any pass over the data."""
    for q in requests:
        if q.metric.family != "ranking":
            continue
        if long_table and q.options.threshold == 0:
            raise InvalidOptionError(
                f"expected a number > 0 or None for {q.column} on a long table "
                "(relevance 0 marks a recommended item outside truth there; ",
                Pass("truth"),
                " to make every truth row relevant), got 0",
                *q.set_by("threshold"),
                option="threshold",
            )
        gain = q.metric.effective(q.options).gain
        if q.metric.name == "ndcg" and q.options.idcg == "k" and gain != "binary":
            shown = gain if isinstance(gain, str) else dict(gain)
            raise InvalidOptionError(
                f"expected 'relevant' for {q.column} under gain={shown!r} "
                "(idcg='k' is k ideal slots of gain 1, an upper bound of DCG only under "
                "gain='binary': pass ",
                Keyword("gain", "binary"),
                " with it), got 'k'",
                option="idcg",
            )
        if scored and q.options.ties == "average" and not q.metric.tie_average:
            averaged = sorted(m.name for m in REGISTRY.values() if m.tie_average)
            raise InvalidOptionError(
                f"expected {other_tie_rules('average')} for "
                f"{q.column} (ties='average' is defined for {', '.join(averaged)}), "
                "got 'average'",
                *q.set_by("ties"),
                option="ties",
            )


def resolve_requests(
    metrics: str | Iterable[str] | None,
    k: int | Iterable[int] | None,
    default: Iterable[str],
    *,
    given: Mapping[str, Any] | None = None,
    convention: str | None = None,
    ignored: list[_Unread] | None = None,
    parsed_names: list[ParsedName] | None = None,
) -> list[Requested]:
    """Turn ``metrics`` and ``k`` into the ordered, distinct metrics to compute.

    A name carrying its own cutoff (``"ndcg@10"``) uses it; a plain name takes every k.
    A metric without a cutoff (``"rmse"``) ignores ``k`` and is paired with 0. A name
    may carry options (``"ap(ap_denominator=relevant)@10"``): they replace the call's
    (``given``, ``None`` = not given, and ``convention``) for that metric alone. The
    column is the string as written (surrounding spaces aside), ``"@<k>"`` appended for
    a name without its cutoff: two strings of one computation are two columns.
    ``ignored`` collects the call's options a tool's name does not read (spec section
    8: ``threshold=4`` with ir_measures' ``nDCG@10``), for one warning each;
    ``parsed_names`` each string taken apart, in order (the names are parsed here once).

    Examples
    --------
    >>> [(r.metric.name, r.k) for r in resolve_requests(["ndcg", "map@3"], [10, 5], [])]
    [('ndcg', 5), ('ndcg', 10), ('ap', 3)]
    >>> [r.column for r in resolve_requests(["rmse", "mae"], None, [])]
    ['rmse', 'mae']
    >>> [r.column for r in resolve_requests(["map@10", "ap(ap_denominator=min_k)"], None, [])]
    ['map@10', 'ap(ap_denominator=min_k)@10']
    >>> resolve_requests("rmse@5", None, [])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected 'rmse' without a cutoff (it has none), got 'rmse@5'
    >>> resolve_requests("precision(gain=binary)@5", None, [])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected options precision reads (convention, empty, ips, relevant_set, threshold, ties, users), got gain in 'precision(gain=binary)@5'
    """
    from frame_metrics.metric_names import parse_name

    given = dict(given or {})
    given_raw = (
        [metrics] if isinstance(metrics, str) else list(default if metrics is None else metrics)
    )
    # "ndcg,recall" is two names, as on the command line.
    names = [part for raw in given_raw for part in split_names(raw)]
    if not names:
        raise InvalidOptionError(
            "expected at least one metric name, got an empty list", option="metrics"
        )
    ks = validate_k(k, required=False) or None
    known = dict.fromkeys((*_PER_METRIC, "convention"))
    package = {name.lower() for name in (*REGISTRY, *ALIASES)}
    out: list[Requested] = []
    for raw in names:
        if not isinstance(raw, str):
            raise InvalidOptionError(
                f"expected metric names as strings, got {raw!r}", option="metrics"
            )
        parsed = parse_name(raw, known)
        if parsed_names is not None:
            parsed_names.append(parsed)
        tool = tool_measure(parsed.name, parsed.cut, raw, package)
        metric = resolve(parsed.name if tool is None else tool.metric)
        label = metric.name if tool is None else tool.name  # as messages name it
        own = dict(parsed.options)
        # A tool's name fixes its conventions and some options: those are not the caller's.
        readable = metric.reads() - ({"convention", *dict(tool.fixed)} if tool else set())
        unread = sorted(set(own) - readable)
        if tool is not None and unread and set(unread) <= {"convention", *dict(tool.fixed)}:
            # Options the tool's name fixes: the package's own name reads them.
            inner = raw[raw.index("(") : raw.rindex(")") + 1]
            ours = f"{metric.name}{inner}" + (f"@{parsed.cut}" if parsed.cut else "")
            fixes = ", ".join(
                f"{o}={dict(tool.fixed)[o]!r}"
                if o in dict(tool.fixed)
                else f"{o}={TOOL_CONVENTION!r}"
                for o in unread
            )
            raise InvalidOptionError(
                f"expected options {label} reads ({', '.join(sorted(readable)) or 'none'}), "
                f"got {', '.join(unread)} in {raw!r}: {possessive(tool.tool)} {tool.name} "
                f"fixes {fixes}; name {ours!r} for this package's {metric.name}, which reads "
                f"{'them' if len(unread) > 1 else 'it'}",
                option="metrics",
            )
        if unread == ["ties"]:
            # Its top k is ranked once, by the call's tie rule, for every such metric.
            raise InvalidOptionError(
                f"expected options {label} reads in its string "
                f"({', '.join(sorted(readable)) or 'none'}), got ties in {raw!r}: "
                f"{metric.name} reads the call's tie rule (its top k is ranked once for "
                "the call); pass ",
                Keyword("ties", own["ties"]),
                " to the call, or evaluate it in a call of its own",
                option="metrics",
            )
        if unread:
            raise InvalidOptionError(
                f"expected options {label} reads ({', '.join(sorted(readable)) or 'none'}), "
                f"got {', '.join(unread)} in {raw!r}",
                option="metrics",
            )
        layers: dict[str, Any] = {"metric": metric.name}
        if tool is None:
            layers |= {"convention": convention, "metric_convention": own.pop("convention", None)}
            layers["metric_given"] = own
        else:
            # The measure as the tool defines it: trec_eval's conventions, whatever the
            # call's; the call's options over them (trec_eval's -l, -c); the name's own
            # options (gdeval's g_max, RR@k's cutoff) over everything.
            layers |= {"convention": None, "metric_convention": TOOL_CONVENTION}
            layers["metric_given"] = own | dict(tool.fixed)
        options = metric.effective(resolve_options(given, **layers))
        if tool is not None and ignored is not None:
            ignored.extend(_ignored_by_tool(raw, tool, metric, given, convention, layers, options))
        named: dict[str, str | Keyword] = {
            "call": Keyword("convention", convention),
            "metric": repr(raw),
        }
        presets = tuple(
            (option, named[where]) for option, where in preset_settings(given, **layers).items()
        )
        # The column is the string as written (spec section 8): a user indexes the
        # result by what they asked; a name without its cutoff gets "@k" per k.
        as_written = parsed.cut is not None or not metric.takes_k
        if tool is not None and tool.k is not None:
            cuts, as_written = validate_k(tool.k), True  # trec_eval's P_10
        elif tool is not None and tool.whole_list:
            # RR, recip_rank: the first relevant item anywhere (mrr_cutoff="none" above),
            # whatever k; 1 keeps the query's depth and cutoffs as they are.
            cuts, as_written = (1,), True
        elif not metric.takes_k:
            if parsed.cut is not None:
                raise InvalidOptionError(
                    f"expected {label!r} without a cutoff (it has none), got {raw!r}",
                    option="metrics",
                )
            cuts = (0,)
        elif parsed.cut is not None:
            try:
                cut_k = int(parsed.cut)
            except ValueError:
                raise InvalidOptionError(
                    f"expected '<name>@<int k>', got {raw!r}", option="metrics"
                ) from None
            cuts = validate_k(cut_k)
        else:
            if ks is None:
                ks = (DEFAULT_K,)  # spec section 8; the column name says @10
            cuts = ks
        for kk in cuts:
            column = raw if as_written else f"{raw}@{kk}"
            request = Requested(
                metric,
                kk,
                options,
                column,
                presets,
                None if tool is None else tool.tool,
                () if tool is None else tool.fixed,
                frozenset(dict(parsed.options)) | ({"convention"} if tool else set()),
            )
            if request not in out:
                other = next((r for r in out if r.column == column), None)
                if other is not None:
                    raise InvalidOptionError(
                        f"expected one meaning per column, got two for {column!r} "
                        f"({other.canonical} and {request.canonical})",
                        option="metrics",
                    )
                out.append(request)
    return out


class _Unread(NamedTuple):
    """A call option a tool's measure name does not read: what, where, why, instead."""

    option: str
    value: Any
    name: str
    why: str
    ours: str


def _ignored_by_tool(
    raw: str,
    tool: ToolMeasure,
    metric: Metric,
    given: Mapping[str, Any],
    convention: str | None,
    layers: Mapping[str, Any],
    options: MetricOptions,
) -> list[_Unread]:
    """The call's options that the tool's measure name ``raw`` does not read.

    An option the call sets (to other than its default) is not read when the measure
    comes out the same without it: the name fixes it (ir_measures' ``ERR`` fixes
    ``max_relevance``), or trec_eval's conventions, which the name carries, do not read
    it (its nDCG gains from every judged level, whatever ``threshold``). The call's
    ``convention`` never applies to a tool's name. Each comes with the package's
    spelling, which reads the option.
    """
    cut = tool.k if tool.k is not None else (raw.rpartition("@")[2] if "@" in raw else None)
    ours = metric.name if cut is None else f"{metric.name}@{cut}"
    fixed = dict(tool.fixed)
    name = f"{possessive(tool.tool)} {tool.name}"
    found: list[_Unread] = []
    for option, value in given.items():
        # An option at its default (ips='snips', say) was not set by the caller.
        if value is None or option not in metric.reads() or value == option_row(option).default:
            continue
        without = {**given, option: None}
        if metric.effective(resolve_options(without, **layers)) != options:
            continue
        why = (
            f"{name} fixes {option}={fixed[option]!r}"
            if option in fixed
            else f"{name} under {TOOL_CONVENTION}'s conventions does not read it"
        )
        found.append(_Unread(option, value, raw, why, ours))
    if convention is not None and convention != TOOL_CONVENTION:
        why = f"{name} carries {TOOL_CONVENTION}'s conventions"
        found.append(_Unread("convention", convention, raw, why, ours))
    return found


def _unread_warnings(found: Sequence[_Unread]) -> list[IgnoredOptionWarning]:
    """One warning per call option that tool names do not read, naming each name.

    Examples
    --------
    >>> found = []
    >>> _ = resolve_requests(["nDCG@10", "P_5"], None, [], given={"threshold": 4},
    ...                      convention="rectools", ignored=found)
    >>> for w in _unread_warnings(found):
    ...     print(w)
    threshold: 4 ignored by 'nDCG@10' (ir_measures' nDCG under trec_eval's conventions does not read it); name 'ndcg@10' for this package's meaning, which reads it
    convention: 'rectools' ignored by 'nDCG@10' (ir_measures' nDCG carries trec_eval's conventions) and by 'P_5' (trec_eval's P_5 carries trec_eval's conventions); name 'ndcg@10' and 'precision@5' for this package's meaning, which reads it
    """
    options: dict[str, list[_Unread]] = {}
    for one in found:
        options.setdefault(one.option, []).append(one)
    messages = []
    for option, names in options.items():
        by = " and by ".join(f"{u.name!r} ({u.why})" for u in names)
        ours = " and ".join(repr(u.ours) for u in names)
        messages.append(
            IgnoredOptionWarning(
                f"{shown(names[0].value)} ignored by {by}; name {ours} for this package's "
                "meaning, which reads it",
                option=option,
            )
        )
    return messages


def _ignored_options(
    parsed: Sequence[ParsedName],
    k: int | Iterable[int] | None,
    requests: Sequence[Requested],
    *,
    ties: str | None,
    score: str | None,
    rank: str,
    long_table: bool,
) -> list[IgnoredOptionWarning]:
    """What the call gives that cannot change its result, one warning each.

    ``k`` when every metric names its own cutoff or takes none (no column of
    ``requests``, the call's resolved metrics from the ``parsed`` names, is a name with
    a cutoff of ``k`` appended); a tie rule (the call's,
    or a metric's own) when the rows are ranked by a rank column, whose ranks are unique
    within a user (a repeated rank is an error), so that no two items ever tie. A tie
    rule a convention sets is not the caller's doing, and is not reported.

    Examples
    --------
    >>> names = []
    >>> requests = resolve_requests(["ndcg@5", "rmse"], 10, DEFAULT_RANKING, parsed_names=names)
    >>> [str(w) for w in _ignored_options(names, 10, requests, ties=None, score=None,
    ...                                   rank="rank", long_table=False)]
    ["k: 10 ignored, every metric has its own cutoff or none ('ndcg@5', 'rmse'); leave k out, or name a metric without a cutoff to compute it at k"]
    """
    names = [p.raw for p in parsed]
    messages: list[IgnoredOptionWarning] = []
    columns = {q.column for q in requests}
    cuts = () if k is None else validate_k(k)
    if k is not None and not any(f"{n}@{cut}" in columns for n in names for cut in cuts):
        # k is valid here: an int (numpy's too) or an iterable of them.
        shown = int(cast("int", k)) if is_int(k) else [int(v) for v in cast("Iterable[int]", k)]
        messages.append(
            IgnoredOptionWarning(
                f"{shown!r} ignored, every metric has its own cutoff or none "
                f"({', '.join(repr(n) for n in names)}); ",
                LeaveOut("k"),
                ", or name a metric without a cutoff to compute it at k",
                option="k",
            )
        )
    if score is None:
        ranked = (
            f"the long table is ranked by column {rank!r}"
            if long_table
            else f"recs are ranked by column {rank!r}"
        )
        why = (
            f"{ranked}, whose ranks are unique within a user, so no two items tie; ",
            Pass("score"),
            " to rank by a score column instead",
        )
        if ties is not None:
            messages.append(IgnoredOptionWarning(f"{ties!r} ignored: ", *why, option="ties"))
        for p in parsed:
            own = dict(p.options).get("ties")
            if own is not None:
                messages.append(
                    IgnoredOptionWarning(f"{own!r} in {p.raw!r} ignored: ", *why, option="ties")
                )
    return messages
