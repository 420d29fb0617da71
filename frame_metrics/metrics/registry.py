"""The metric registry: one entry per metric, everything the engine and tests need.

Adding a metric is one :func:`register` call in the module of its family (under
:mod:`frame_metrics.families`, whose import registers them all), plus its tests;
the engine, the namespace shortcuts, :mod:`frame_metrics.exprs` and the
reference-vs-expression property test all read from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import polars as pl

from frame_metrics.errors import InvalidOptionError, Keyword, Part, Pass
from frame_metrics.metrics.context import RankingContext, RankingPieces
from frame_metrics.options import MetricOptions, format_value

__all__ = [
    "ALIASES",
    "REGISTRY",
    "Family",
    "Metric",
    "Population",
    "RankingContext",
    "RankingPieces",
    "Requested",
    "UserCase",
    "register",
    "resolve",
]


@dataclass(frozen=True)
class UserCase:
    """One user's data in plain Python, for the reference implementations.

    ``ranks`` maps each recommended item to its rank; ``relevance`` maps each truth item
    to its relevance (absent = 0).
    """

    ranks: Mapping[Any, int]
    relevance: Mapping[Any, float]

    def relevant(self, options: MetricOptions) -> set[Hashable]:
        """The relevant set R under the options' threshold."""
        t = options.threshold
        return {i for i, r in self.relevance.items() if (r > 0 if t is None else r >= t)}

    def top(self, k: int) -> list[Hashable]:
        """Recommended items with rank <= k, best first."""
        return [i for i, r in sorted(self.ranks.items(), key=lambda p: p[1]) if r <= k]


Builder = Callable[[Any, int], pl.Expr]
Reference = Callable[..., Any]

#: Which family computes a metric: the name of a module of :mod:`frame_metrics.families`
#: (its ``FAMILY.name``), which decides the query it joins. Today ``"ranking"`` (an
#: expression over one user's statistics), ``"diversity"`` (over the pairs of one user's
#: top-k items), ``"rating"`` (over one user's (rating, prediction) pairs, pooled in the
#: aggregate) and ``"corpus"`` (one value per ``by`` group from item exposures); a new
#: family is a new module there, not a change here.
Family = str

#: Who gets a value, i.e. who is averaged:
#: ``"relevant"`` - the spec's section 3 policy (users with a relevant item; ``empty=``);
#: ``"listed"`` - users with at least one recommended item within the cutoff;
#: ``"rated"`` - users with at least one (rating, prediction) pair;
#: ``"corpus"`` - no per-user value; one per ``by`` group;
#: ``"history"`` - users with a recommended item within the cutoff whose train history
#: holds a categorised item (calibration);
Population = Literal["relevant", "listed", "rated", "corpus", "history"]


@dataclass(frozen=True)
class Metric:
    """A registry entry.

    ``build(ctx, k)`` returns the metric's value from the context of its ``family``
    (for ranking metrics, :class:`RankingPieces`: a user's hits, relevant items and list), assuming the
    user belongs to its ``population``: the policy for everyone else is applied around
    it, once, for every metric. ``reference`` is a slow pure-Python twin used by the
    tests. ``needs`` names the inputs beyond the recommendations (``"truth"``,
    ``"train"``, ``"catalog"``, ``"item_features"``, ``"baseline"``, ``"prediction"``,
    ``"popularity"`` or ``"history"`` (both read ``train``), ``"catalog_size"`` (the
    ``catalog`` if given, else the items seen), or ``"unexpected"``: baseline or
    history, as the ``unexpected`` option says).
    """

    name: str
    build: Builder
    reference: Reference
    formula: str
    takes_k: bool = True
    higher_is_better: bool = True
    bounds: tuple[float, float | None] = (0.0, 1.0)
    needs: frozenset[str] = field(default_factory=lambda: frozenset({"truth"}))
    family: Family = "ranking"
    population: Population = "relevant"
    #: How peers define the same metric where they differ (named peer, differing choice).
    notes: str = ""
    #: How to read a value, for a metric whose range alone does not say it (its upper
    #: bound depends on the options or on the user): what 0 and the bound mean and which
    #: lists reach them.
    scale: str = ""
    #: Options this metric reads beyond those of its population (see :meth:`reads`).
    options: frozenset[str] = frozenset()
    #: Reads the whole recommended list, not only the top k (bpref, rbp, r_precision).
    whole_list: bool = False
    #: Has a tie-averaged value (``ties="average"``): linear in the tied items' positions.
    tie_average: bool = False
    #: (option, value) pairs under which the metric has no upper bound (rbp gaining the
    #: relevance itself).
    unbounded_under: frozenset[tuple[str, object]] = frozenset()
    #: (option, value) pairs under which it reads the whole list, not only the top k
    #: (mrr with ``mrr_cutoff="none"``: the first relevant item anywhere).
    whole_list_under: frozenset[tuple[str, object]] = frozenset()
    #: A gain it applies whatever the ``gain`` option (err's 2^rel), which the relevance
    #: checks must allow for.
    own_gain: str | None = None
    #: Reads several rankings per user told apart by ``sample=`` (expected exposure).
    samples: bool = False
    #: Has no upper bound under propensity weights (spec 9.4): a relevant item counts
    #: w̃ times, which may be more than once (precision, f1, AP, err, rbp; recall,
    #: NDCG and R-precision stay within 1, as ratios of a part to its whole).
    weighted_unbounded: bool = False

    def effective(self, options: MetricOptions) -> MetricOptions:
        """The options as this metric applies them.

        ``gain_scope="positive"`` (trec_eval's ndcg, which ignores ``-l``): every item
        with relevance > 0 gains, so for dcg and ndcg the threshold is that of ``rel > 0``.
        """
        if "gain_scope" in self.options and options.gain_scope == "positive":
            return options.changed(threshold=None)
        return options

    def reads(self) -> frozenset[str]:
        """The options a metric string may give this metric (``name(option=value)``).

        A metric judged against relevance reads the options of who is evaluated
        (``threshold``, ``empty``, ``users``, a ``convention``), a ranking one also the
        ranking options; every per-user metric of the top rows the tie rule; every
        metric its own (:attr:`options`).
        """
        own = set(self.options)
        if self.population in ("listed", "history", "relevant"):
            # A per-user metric of the top rows reads the tie rule that ranked scores
            # (the planner ranks them apart for it: Plan.tie_contexts).
            own.add("ties")
        if self.population != "relevant":
            return frozenset(own)
        # Who is evaluated (section 3) reads the threshold, empty= and users=, and a
        # convention may set them: every metric of that population reads them, so a
        # metric string may set them (spec section 8: it never says less than the call).
        base = {"threshold", "empty", "users", "convention"}
        if self.family == "ranking":
            base |= {"relevant_set", "ips"}
        return frozenset(base | own)

    def column(self, k: int) -> str:
        """The output column: ``"<name>@<k>"``, or the bare name for a metric without k."""
        return f"{self.name}@{k}" if self.takes_k else self.name

    def range_under(self, options: MetricOptions | None) -> tuple[float, float | None]:
        """The metric's range under ``options``.

        Its :attr:`bounds`, less an upper bound that :attr:`unbounded_under` lifts.
        """
        low, high = self.bounds
        if options is not None and any(
            getattr(options, name) == value for name, value in self.unbounded_under
        ):
            high = None
        if options is not None and self.weighted_unbounded and options.propensity is not None:
            high = None
        return low, high

    def value(self, ctx: Any, k: int, options: MetricOptions | None = None) -> pl.Expr:
        """The metric from its family's context, as Float64, named by :meth:`column`.

        Held within its range (:meth:`range_under`, with ``options`` or the context's):
        a value computed in floating point may pass a bound that its exact value cannot
        pass by a rounding error of a few units in the last place (a pair's cosine of
        1 + 2^-52, an expected DCG a last bit above its ideal); the bound is then the
        nearer float to the exact value. Zero is always +0.0.
        """
        low, high = self.range_under(options or getattr(ctx, "options", None))
        value = self.build(ctx, k).cast(pl.Float64).clip(low, high)
        # A sum of nothing is -0.0 in polars; zero is written 0.0 whatever the path
        # (-0.0 == 0.0, but its bits and its printed sign differ).
        return pl.when(value == 0.0).then(0.0).otherwise(value).alias(self.column(k))

    def expr(self, ctx: RankingPieces, k: int) -> pl.Expr:
        """A ranking-family metric with its population policy applied, named by :meth:`column`.

        A user in the population (``users=``) with a relevant item gets the value; one
        without gets 0 under ``empty="zero"``, else null; a user outside it gets null.
        """
        value = self.value(ctx, k)
        null = pl.lit(None, pl.Float64)
        if self.population == "listed":
            return pl.when(ctx.n_listed(k) > 0).then(value).otherwise(null).alias(self.column(k))
        member = ctx.in_population()
        defined = member & (ctx.n_relevant() > 0)
        otherwise = pl.when(member).then(0.0) if ctx.options.empty == "zero" else null
        return pl.when(defined).then(value).otherwise(otherwise).alias(self.column(k))

    def reads_whole_list(self, options: MetricOptions) -> bool:
        """Whether it reads recommendations ranked below its cutoff, under ``options``.

        :attr:`whole_list`; an option value of :attr:`whole_list_under`; or, in the
        ranking family, a relevant set taken from the recommended items at any rank
        (``relevant_set="listed"``: the family's statistics read every listed row).
        """
        if self.whole_list or any(getattr(options, o) == v for o, v in self.whole_list_under):
            return True
        return self.family == "ranking" and options.relevant_set == "listed"

    def inputs(self, options: MetricOptions) -> frozenset[str]:
        """``needs`` with ``"unexpected"`` resolved by the options."""
        if "unexpected" not in self.needs:
            return self.needs
        source = "baseline" if options.unexpected == "baseline" else "history"
        return (self.needs - {"unexpected"}) | {source}


class Requested(NamedTuple):
    """One metric to compute: at cutoff ``k`` (0: none), with its options, in ``column``.

    ``presets`` pairs each option a preset set (and nothing overrode) with the preset,
    as a message names it: ``("threshold", Keyword("convention", "rectools"))``.
    """

    metric: Metric
    k: int
    options: MetricOptions
    column: str
    presets: tuple[tuple[str, str | Keyword], ...] = ()
    #: The tool whose measure name the caller wrote (``"ir_measures"`` for ``"ERR@10"``),
    #: with the options that name fixes; None for the package's own names.
    tool: str | None = None
    fixed: tuple[tuple[str, Any], ...] = ()
    #: The options its string sets (``"convention"`` for a tool's name, which carries
    #: trec_eval's): what the caller said for this metric alone.
    own: frozenset[str] = frozenset()

    def set_by(self, option: str) -> tuple[Part, ...]:
        """Who set ``option``, as a message's tail: ``", set by <preset> (...)"``.

        No part when the caller did, or the spec's default stands.
        """
        preset = dict(self.presets).get(option)
        if preset is None:
            return ()
        return (", set by ", preset, " (", Pass(option), " to override it)")

    @property
    def canonical(self) -> str:
        """The metric's one name in a call: ``name(option=value, ...)@k``.

        The options it reads that differ from the spec's defaults, sorted, after the
        convention and the call's options applied: two requests of one call with the
        same canonical name compute the same values, whatever their strings (an alias,
        a tool's name, a preset). Read back as a metric string, it means the same.

        Examples
        --------
        >>> from frame_metrics.spec import resolve_requests
        >>> names = ["map(ap_denominator=relevant)@10", "ndcg(convention=rectools)@5", "rmse"]
        >>> [q.canonical for q in resolve_requests(names, None, [])]
        ['ap(ap_denominator=relevant)@10', 'ndcg(gain=binary,idcg=k,threshold=0,users=truth)@5', 'rmse']
        """
        defaults = MetricOptions()
        changed = [
            f"{name}={format_value(getattr(self.options, name))}"
            for name in sorted(self.metric.reads() - {"convention"})
            if getattr(self.options, name) != getattr(defaults, name)
        ]
        inner = f"({','.join(changed)})" if changed else ""
        return f"{self.metric.name}{inner}" + (f"@{self.k}" if self.metric.takes_k else "")

    def value(self, ctx: Any) -> pl.Expr:
        """The metric from its family's context, named by :attr:`column`."""
        return self.metric.value(ctx, self.k, self.options).alias(self.column)

    def expr(self, ctx: RankingPieces) -> pl.Expr:
        """The ranking metric with its population policy, named by :attr:`column`."""
        return self.metric.expr(ctx, self.k).alias(self.column)


REGISTRY: dict[str, Metric] = {}
#: Other accepted names (the output column is the name as written).
ALIASES: dict[str, str] = {"map": "ap"}


def register(metric: Metric) -> Metric:
    """Add a metric to the registry (names are unique)."""
    if metric.name in REGISTRY:
        raise ValueError(f"metric {metric.name!r} is registered twice")
    REGISTRY[metric.name] = metric
    return metric


def resolve(name: str) -> Metric:
    """Look a metric up by name or alias.

    Examples
    --------
    >>> import frame_metrics
    >>> resolve("map").name
    'ap'
    >>> resolve("ndgc")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected a known metric name, got 'ndgc' (did you mean 'ndcg'?); known metrics: 'ap', ...
    """
    if not isinstance(name, str):
        raise InvalidOptionError(
            f"expected metric names as strings, got {name!r}", option="metrics"
        )
    key = ALIASES.get(name.lower(), name.lower())
    if key in REGISTRY:
        return REGISTRY[key]
    from frame_metrics.measure_names import spellings

    known = sorted([*REGISTRY, *ALIASES])
    # The hint also offers trec_eval's and ir_measures' names, compared in lower case.
    candidates = {c.lower(): c for c in spellings()} | {c: c for c in known}
    hint = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.6)
    suffix = f" (did you mean {candidates[hint[0]]!r}?)" if hint else ""
    raise InvalidOptionError(
        f"expected a known metric name, got {name!r}{suffix}; "
        f"known metrics: {', '.join(repr(m) for m in known)}",
        option="metrics",
    )


def split_names(raw: object) -> list[object]:
    """A comma-separated string of metric names as its names; anything else as it is.

    Commas inside parentheses, as in ``"ap(ap_denominator=relevant)@10"``, stay.

    Examples
    --------
    >>> split_names("ndcg, recall@5")
    ['ndcg', 'recall@5']
    """
    if not isinstance(raw, str):
        return [raw]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    names: list[object] = [p.strip() for p in parts]
    return [n for n in names if n] if len(names) > 1 else names
