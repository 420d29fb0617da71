"""Peer presets: ``convention="trec_eval"`` sets every option in which a peer differs.

The package's defaults are the spec's; each peer library made other choices, and most
"your number disagrees with X" reports come from one of them. A :class:`Convention`
lists, for one peer release, every option whose value differs from the spec's default,
with why and where in the peer's source the behaviour lives. Options the caller passes
explicitly override the preset; a metric's own options (``"ndcg(convention=rectools)@10"``)
override the call's.

Resolution order, last wins: the spec's defaults, the call's ``convention``, the
metric's own ``convention``, the options the call passes, the metric's own options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidOptionError, shown
from frame_metrics.options import OPTIONS, MetricOptions

__all__ = [
    "CONVENTIONS",
    "METRIC_OPTIONS",
    "OPTION_NAMES",
    "Convention",
    "conventions",
    "preset_settings",
    "resolve_options",
]

#: The options a convention may set (evaluate's keyword names), from the option table.
METRIC_OPTIONS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.preset)

#: Every option keyword of evaluate that ends up in :class:`MetricOptions`.
OPTION_NAMES: tuple[str, ...] = tuple(o.name for o in OPTIONS)

_DEFAULTS = MetricOptions()


@dataclass(frozen=True)
class Setting:
    """One option a preset sets: its value, the peer's behaviour, and where it lives."""

    value: Any
    why: str
    source: str
    #: Metrics this setting applies to (empty: every metric that reads the option).
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class Convention:
    """A peer's conventions: the release reproduced and each option it sets."""

    name: str
    peer: str
    version: str
    settings: Mapping[str, tuple[Setting, ...]] = field(default_factory=dict)
    #: What no option reproduces or what the caller must map from the peer's call.
    notes: tuple[str, ...] = ()

    def options_for(self, metric: str | None) -> dict[str, Any]:
        """The options this preset sets for one metric (``None``: settings for all)."""
        out: dict[str, Any] = {}
        for option, settings in self.settings.items():
            for s in settings:
                if not s.metrics or (metric is not None and metric in s.metrics):
                    out[option] = s.value
        return out


_TE = "https://github.com/usnistgov/trec_eval/blob/main/"
_RANX = "https://github.com/AmenRa/ranx/blob/master/ranx/"
_RT = "https://github.com/MobileTeleSystems/RecTools/blob/main/rectools/metrics/"
_REC = (
    "https://github.com/recommenders-team/recommenders/blob/main/"
    "recommenders/evaluation/python_evaluation.py"
)
_SK = "https://github.com/scikit-learn/scikit-learn/blob/main/sklearn/metrics/_ranking.py"
_TM = "https://github.com/Lightning-AI/torchmetrics/blob/master/src/torchmetrics/functional/retrieval/"
_RP = "https://github.com/sb-ai-lab/RePlay/blob/main/replay/metrics/"


def _s(value: Any, why: str, source: str, *metrics: str) -> tuple[Setting, ...]:
    return (Setting(value, why, source, metrics),)


_GAINED = ("dcg", "ndcg")

CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in [
        Convention(
            "trec_eval",
            "trec_eval (C), also through pytrec_eval and ir_measures",
            "10.0 (pytrec_eval-terrier 0.5.11 builds 9.0.8: the same values for these)",
            {
                "threshold": _s(
                    1,
                    "relevance_level (-l) defaults to 1: rel >= 1 is relevant",
                    _TE + "trec_eval.c",
                ),
                "ties": _s(
                    "item_desc_text",
                    "a run is sorted by score descending, ties by docno descending (strcmp); "
                    "the rank column of a run file is ignored",
                    _TE + "form_res_rels.c",
                ),
                "ap_denominator": _s(
                    "relevant", "map and map_cut divide by num_rel", _TE + "m_map_cut.c"
                ),
                "mrr_cutoff": _s(
                    "none",
                    "recip_rank has no cutoff: the first relevant document anywhere",
                    _TE + "m_recip_rank.c",
                ),
                "gain_scope": _s(
                    "positive",
                    "ndcg and ndcg_cut gain from every judged rel > 0, ignoring -l",
                    _TE + "m_ndcg_cut.c",
                ),
                "users": _s(
                    "both",
                    "topics in both qrels and run are evaluated (-c: every qrels topic, "
                    "pass users='truth')",
                    _TE + "trec_eval.c",
                ),
                "empty": _s(
                    "zero", "a judged topic without a relevant document scores 0", _TE + "m_map.c"
                ),
                "persistence": _s(0.9, "rbp's p defaults to 0.9", _TE + "m_rbp.c", "rbp"),
                "rbp_gain": _s(
                    "relative",
                    "rbp gains rel / the topic's largest judged level (ignoring -l, as ndcg)",
                    _TE + "m_rbp.c",
                    "rbp",
                ),
            },
            (
                "Gain tables (-m ndcg.1=3,2=9,4=4.5): gain={1: 3, 2: 9, 4: 4.5}.",
                "-c (average over every qrels topic): users='truth'. -l2: threshold=2.",
                "-M n: keep the top n rows of each run (trec_eval truncates after its sort).",
                "Measures without a cutoff (map, ndcg, Rprec, bpref, recip_rank) read the whole "
                "list: ap and ndcg at a k past the longest list, r_precision, bpref, mrr.",
                "A repeated document is an error in trec_eval, as in frame_metrics by default.",
            ),
        ),
        Convention(
            "ranx",
            "ranx",
            "0.3.21",
            {
                "threshold": _s(
                    1,
                    "metric-lN (rel_lvl, default 1): judgements below N count as unjudged",
                    _RANX + "metrics/common.py",
                ),
                "ties": _s(
                    "input",
                    "Run sorts with numba's quicksort, stable (insertion order) for up to 15 "
                    "documents; longer tied lists have no defined order",
                    _RANX + "data_structures/run.py",
                ),
                "ap_denominator": _s(
                    "relevant", "map@k divides by every relevant document", _RANX + "metrics/map.py"
                ),
                "users": _s(
                    "truth",
                    "every qrels query is evaluated; a query without a run scores 0",
                    _RANX + "meta/evaluate.py",
                ),
                "empty": _s(
                    "zero",
                    "a query without a judgement >= N scores 0",
                    _RANX + "metrics/ndcg.py",
                ),
                "rbp_gain": _s(
                    "relevance",
                    "rbp adds each relevant document's relevance, not 1",
                    _RANX + "metrics/rank_biased_precision.py",
                    "rbp",
                ),
            },
            (
                "Raw dicts passed to ranx.evaluate give tied documents in reverse insertion "
                "order, and pair queries by position, not id: build Run/Qrels objects.",
                "ranx bpref is NaN for a query without a judged non-relevant document "
                "(trec_eval and frame_metrics: 1 per retrieved relevant document).",
                "ranx rbp has no default p: rbp.95 is persistence=0.95.",
                "ndcg_burges: gain='exponential'.",
            ),
        ),
        Convention(
            "rectools",
            "RecTools (rectools.metrics)",
            "0.19.0",
            {
                "threshold": _s(
                    0,
                    "every interaction row is relevant; weights are not read",
                    _RT + "classification.py",
                ),
                "gain": _s("binary", "NDCG is binary", _RT + "ranking.py", *_GAINED),
                "idcg": _s(
                    "k",
                    "NDCG(k) divides by Σ_{i<=k} 1/log(i+1) for every user "
                    "(divide_by_achievable=False, the default)",
                    _RT + "ranking.py",
                    "ndcg",
                ),
                "ap_denominator": _s(
                    "relevant",
                    "MAP(k) divides by the user's number of interactions (divide_by_k=False)",
                    _RT + "ranking.py",
                ),
                "users": _s(
                    "truth",
                    "the users of interactions are averaged; users only in reco are ignored",
                    _RT + "base.py",
                ),
            },
            (
                "Takes rank values as given: pass rank=, not score=.",
                "NDCG(k, divide_by_achievable=True): idcg='relevant'; MAP(k, divide_by_k=True): "
                "ap_denominator='k'.",
                "A repeated interaction or recommendation counts twice in RecTools (its left "
                "join), so its NDCG can exceed 1; frame_metrics refuses repeats by default.",
            ),
        ),
        Convention(
            "recommenders",
            "Microsoft Recommenders (recommenders.evaluation.python_evaluation)",
            "1.2.1",
            {
                "threshold": _s(
                    0,
                    "every rating_true row is relevant, rating 0 included (relevancy_method="
                    "'top_k')",
                    _REC,
                ),
                "ties": _s(
                    "input",
                    "get_top_k_items sorts by prediction with a stable sort: ties keep the row "
                    "order",
                    _REC,
                ),
                "gain": _s("binary", "ndcg_at_k's score_type defaults to 'binary'", _REC, *_GAINED),
                "zero_ideal": _s(
                    "skip",
                    "ndcg_at_k divides by an ideal DCG of 0 for a user whose ratings all gain "
                    "0 (score_type 'raw' or 'exp' with ratings of 0): NaN, which its mean "
                    "skips",
                    _REC,
                    "ndcg",
                ),
                "users": (
                    Setting(
                        "both",
                        "precision, recall, map and map_at_k average over the users in both "
                        "frames (common users)",
                        _REC,
                    ),
                    Setting(
                        "truth",
                        "ndcg_at_k averages over every rating_true user (an outer merge)",
                        _REC,
                        _GAINED,
                    ),
                ),
            },
            (
                "map_at_k divides by min(|R|, k) (the default); map divides by |R|: "
                "ap_denominator='relevant'.",
                "ndcg_at_k(score_type='raw'): gain='linear'; 'exp': gain='exponential' (a user "
                "whose ratings are all 0 is then left out of the mean: zero_ideal='skip').",
                "ndcg_at_k returns 0.0 when no user has a hit, before any mean (frame_metrics: "
                "the mean of the users it has values for).",
                "relevancy_method='by_threshold' cuts the list at `threshold` items (not a "
                "relevance threshold); precision still divides by k.",
                "Repeated rows count twice in Recommenders.",
            ),
        ),
        Convention(
            "sklearn",
            "scikit-learn (sklearn.metrics ndcg_score, dcg_score)",
            "1.9.1",
            {
                "ties": _s(
                    "average",
                    "ignore_ties=False (default): tied scores share their positions' "
                    "discounts (_tie_averaged_dcg)",
                    _SK,
                    *_GAINED,
                ),
                "relevant_set": _s(
                    "listed",
                    "the ideal DCG is over the row's own items: the scored ones",
                    _SK,
                ),
                "users": _s("recs", "one sample per row of y_score", _SK),
                "empty": _s("zero", "a sample whose y_true is all 0 scores 0", _SK),
            },
            (
                "k=None (the default) reads the whole row: a k past the longest list.",
                "ndcg_score needs y_true >= 0; dcg_score(log_base=b) divides by log_b, so "
                "only log_base=2 (the default) is the spec's dcg.",
            ),
        ),
        Convention(
            "torchmetrics",
            "torchmetrics retrieval (Retrieval* metrics)",
            "1.9.0",
            {
                "relevant_set": _s(
                    "listed",
                    "a query knows only the documents given for it: recall, AP and the "
                    "ideal DCG are over those",
                    _TM + "recall.py",
                ),
                "ap_denominator": _s(
                    "hits",
                    "retrieval_average_precision divides by the relevant documents within top_k",
                    _TM + "average_precision.py",
                ),
                "ties": _s(
                    "average",
                    "retrieval_normalized_dcg averages tied scores as scikit-learn does",
                    _TM + "ndcg.py",
                    *_GAINED,
                ),
                "users": _s(
                    "recs", "every query index present is averaged", _TM + "../../retrieval/base.py"
                ),
                "empty": _s(
                    "zero",
                    "empty_target_action='neg' (default): a query without a positive target "
                    "scores 0",
                    _TM + "../../retrieval/base.py",
                ),
            },
            (
                "torchmetrics computes in float32: its values agree to about 1e-7.",
                "Precision, recall, MRR and MAP pick among tied scores with an unstable sort "
                "(no defined order), and count a document scored <= 0 as not retrieved.",
                "top_k=None (the default) reads the whole list; adaptive_k=True divides "
                "precision by min(k, list length) (no frame_metrics option).",
            ),
        ),
        Convention(
            "replay",
            "RePlay (replay.metrics)",
            "replay-rec 0.22.0",
            {
                "threshold": _s(0, "every ground-truth row is relevant", _RP + "base_metric.py"),
                "gain": _s("binary", "NDCG is binary", _RP + "ndcg.py", *_GAINED),
                "ties": _s(
                    "item_desc",
                    "recommendations are sorted by score, ties by item id descending",
                    _RP + "base_metric.py",
                ),
                "users": _s(
                    "truth",
                    "the users of ground_truth are averaged; one without recommendations scores 0",
                    _RP + "base_metric.py",
                ),
            },
            (
                "Repeated ground-truth rows change RePlay's MAP and NDCG denominators on "
                "pandas and polars input (not on Spark): deduplicate first.",
            ),
        ),
    ]
}


def conventions() -> pl.DataFrame:
    """Every preset as a table: one row per (convention, option) it sets.

    Columns: ``convention``, ``peer``, ``version``, ``option``, ``value``, ``default``
    (the spec's), ``metrics`` (the metrics it applies to; empty: all that read it),
    ``why`` and ``source`` (a link to where the peer's code does it).

    Examples
    --------
    >>> import frame_metrics as fm
    >>> table = fm.conventions()
    >>> table.filter(convention="trec_eval", option="ap_denominator")["value"].item()
    'relevant'
    """
    rows = [
        {
            "convention": c.name,
            "peer": c.peer,
            "version": c.version,
            "option": option,
            "value": _show(s.value),
            "default": _show(getattr(_DEFAULTS, option)),
            "metrics": ", ".join(s.metrics),
            "why": s.why,
            "source": s.source,
        }
        for c in CONVENTIONS.values()
        for option, settings in c.settings.items()
        for s in settings
    ]
    return pl.DataFrame(rows, schema={name: pl.String for name in _COLUMNS})


_COLUMNS = (
    "convention",
    "peer",
    "version",
    "option",
    "value",
    "default",
    "metrics",
    "why",
    "source",
)


def _show(value: Any) -> str:
    from frame_metrics.metric_names import format_value

    return format_value(value)


def markdown() -> str:
    """Every preset as Markdown: the options side by side, then a table per peer.

    The conventions page of the documentation is this text (a test keeps them equal).

    Examples
    --------
    >>> print(markdown().splitlines()[0])
    # Conventions: reproducing each peer by name
    """
    peers = list(CONVENTIONS.values())
    options = [o for o in METRIC_OPTIONS if any(o in c.settings for c in peers)]
    lines = [
        "# Conventions: reproducing each peer by name",
        "",
        '`convention="<peer>"` (CLI: `--convention`) sets every option in which that '
        "peer's release differs from the spec's defaults. Options passed explicitly "
        'override the preset; a metric\'s own options (`"ndcg(convention=rectools)@10"`) '
        "override the call's. Resolution order, last wins: the spec's defaults, the call's "
        "convention, the metric's convention, the call's options, the metric's options. "
        "`fm.conventions()` returns these tables as a DataFrame.",
        "",
        "## Side by side",
        "",
        "A blank cell is the spec's default; a value with a metric list in brackets applies "
        "to those metrics only.",
        "",
        "| option | spec default | " + " | ".join(c.name for c in peers) + " |",
        "|---|---|" + "---|" * len(peers),
    ]
    for option in options:
        cells = []
        for c in peers:
            shown = [
                _show(s.value) + (f" [{', '.join(s.metrics)}]" if s.metrics else "")
                for s in c.settings.get(option, ())
            ]
            cells.append("; ".join(f"`{v}`" for v in shown))
        default = _show(getattr(_DEFAULTS, option))
        lines.append(f"| `{option}` | `{default}` | " + " | ".join(cells) + " |")
    for c in peers:
        lines += [
            "",
            f"## {c.name}",
            "",
            f"Reproduces {c.peer}, version {c.version}.",
            "",
            "| option | value | default | metrics | what the peer does | source |",
            "|---|---|---|---|---|---|",
        ]
        for option, settings in c.settings.items():
            for st in settings:
                lines.append(
                    f"| `{option}` | `{_show(st.value)}` | `{_show(getattr(_DEFAULTS, option))}` "
                    f"| {', '.join(st.metrics) or 'all'} | {st.why} | [source]({st.source}) |"
                )
        if c.notes:
            lines += ["", "Not an option, or mapped from the peer's own arguments:", ""]
            lines += [f"- {note}" for note in c.notes]
    return "\n".join(lines) + "\n"


def get(name: object) -> Convention:
    """The preset named ``name``, or a clear error listing them."""
    if isinstance(name, str) and name in CONVENTIONS:
        return CONVENTIONS[name]
    raise InvalidOptionError(
        f"expected one of {', '.join(repr(n) for n in CONVENTIONS)} or None, got {shown(name)}",
        option="convention",
    )


def resolve_options(
    given: Mapping[str, Any],
    *,
    convention: str | None = None,
    metric: str | None = None,
    metric_convention: str | None = None,
    metric_given: Mapping[str, Any] | None = None,
) -> MetricOptions:
    """The options of one metric (or of the call, ``metric=None``).

    Last wins: spec defaults, the call's convention, the metric's convention, the
    options the call gives (``None`` = not given), the metric's own options.

    Examples
    --------
    >>> resolve_options({"ap_denominator": None}, convention="trec_eval").ap_denominator
    'relevant'
    >>> resolve_options({"ap_denominator": "k"}, convention="trec_eval").ap_denominator
    'k'
    """
    values: dict[str, Any] = {}
    for name in (convention, metric_convention):
        if name is not None:
            values |= get(name).options_for(metric)
    values |= {k: v for k, v in given.items() if v is not None}
    values |= dict(metric_given or {})
    known = {f.name for f in fields(MetricOptions)}
    return MetricOptions(**{k: v for k, v in values.items() if k in known})


def preset_settings(
    given: Mapping[str, Any],
    *,
    convention: str | None = None,
    metric: str | None = None,
    metric_convention: str | None = None,
    metric_given: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The options a preset set and nothing later overrode, each with that preset.

    ``"call"`` marks the call's ``convention``, ``"metric"`` the metric's own: a message
    about such a value names the preset, not the caller, who never passed it.

    Examples
    --------
    >>> preset_settings({"threshold": None}, convention="rectools", metric="ndcg")["threshold"]
    'call'
    >>> "threshold" in preset_settings({"threshold": 1}, convention="rectools", metric="ndcg")
    False
    """
    out: dict[str, str] = {}
    for where, name in (("call", convention), ("metric", metric_convention)):
        if name is not None:
            out |= dict.fromkeys(get(name).options_for(metric), where)
    given_here = {k for k, v in given.items() if v is not None} | set(metric_given or {})
    return {option: where for option, where in out.items() if option not in given_here}
