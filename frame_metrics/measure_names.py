"""Other tools' measure names: trec_eval's and ir_measures' (spec section 8).

``"P_10"``, ``"ndcg_cut_10"``, ``"recip_rank"`` (trec_eval) and ``"P@10"``, ``"nDCG@10"``,
``"RR"`` (ir_measures) are accepted wherever a metric name is, and mean that measure as
the tool defines it: the package's metric under ``convention="trec_eval"`` (ir_measures
runs trec_eval for these), with the few options a name itself fixes: ir_measures'
``ERR@k`` is gdeval's (``max_relevance=4``), and its ``RR@k`` stops at k where
``RR`` and trec_eval's ``recip_rank`` read the whole list. The call's own options
(``threshold=`` as trec_eval's ``-l``, ``users="truth"`` as ``-c``) still apply; the
call's ``convention`` does not (the name already says whose conventions hold).

One spelling, one meaning (spec section 8): a tool's name matches only as that tool
writes it, case included (``"nDCG"``, ``"P_10"``, ``"RR"``); a name the package itself
uses matches in any case and keeps the package's meaning (``"NDCG@10"``, ``"MAP@10"``,
``"Mrr"``: the aliases ir_measures also accepts for its nDCG, AP and RR are the
package's here, as users mean them); ``"ndcg(convention=trec_eval)@10"`` is
trec_eval's. A tool's name in another case that is not the package's (``"p_10"``,
``"Ndcg_Cut_10"``, ``"rr"``) is an error naming the exact spelling, and a measure of
either tool that the package does not compute an error naming it, rather than
"unknown". The three canonical ir_measures names that are also the package's in
another case, ``ERR``, ``Bpref`` and ``Judged``, are ir_measures' as written (the
sheet lists them as its names); ``err``, ``BPREF``, ``judged`` are the package's.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Literal

from frame_metrics.errors import InvalidOptionError

__all__ = ["TOOL_CONVENTION", "ToolMeasure", "possessive", "spellings", "tool_measure"]

#: The conventions of every tool name: ir_measures computes these through trec_eval.
TOOL_CONVENTION = "trec_eval"

Tool = Literal["trec_eval", "ir_measures"]


@dataclass(frozen=True)
class ToolMeasure:
    """A tool's measure as the package computes it.

    ``k`` is the cutoff the name carries (``P_10``: 10), ``None`` for a name that takes
    it from ``"@k"`` or the call; ``whole_list`` marks a measure without a cutoff at all
    (``RR``, ``recip_rank``: its column is the name alone). ``fixed`` are the options
    the name itself sets, above the call's.
    """

    tool: Tool
    name: str
    metric: str
    k: int | None = None
    whole_list: bool = False
    fixed: tuple[tuple[str, Any], ...] = ()


#: trec_eval measures that carry their cutoff in the name (``P_10``), and the metric.
_TREC_EVAL_CUT = {
    "P": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "ap",
    "ndcg_cut": "ndcg",
}
_TREC_EVAL_CUT_NAME = re.compile(r"(" + "|".join(_TREC_EVAL_CUT) + r")_(\d+)")
_TREC_EVAL_CUT_NAME_ANY_CASE = re.compile(_TREC_EVAL_CUT_NAME.pattern, re.IGNORECASE)

#: trec_eval measures without a cutoff. (``map``, ``ndcg``, ``bpref``, ``rbp`` are the
#: package's own names and keep its meaning.)
_TREC_EVAL_WHOLE = {
    "recip_rank": ("mrr", (("mrr_cutoff", "none"),)),
    "Rprec": ("r_precision", ()),
    "Rprec_mult_1.00": ("r_precision", ()),
}

#: ir_measures' names with the metric; a cutoff is written ``"@k"``. Its aliases that
#: are the package's names in another case (``MAP``, ``NDCG``, ``MRR``, ``BPref``) are
#: not here: they are the package's (spec section 8, one spelling one meaning).
_IR_MEASURES = {
    "P": "precision",
    "R": "recall",
    "Success": "hit_rate",
    "AP": "ap",
    "nDCG": "ndcg",
    "RR": "mrr",
    "Rprec": "r_precision",
    "RPrec": "r_precision",
    "Bpref": "bpref",
    "ERR": "err",
    "Judged": "judged",
}

#: Options an ir_measures name fixes: gdeval's ERR has g_max = 4 (gdeval.pl, which
#: ir_measures runs for ERR@k).
_IR_FIXED: dict[str, tuple[tuple[str, Any], ...]] = {"ERR": (("max_relevance", 4),)}

_NO_GEOMETRIC = "a geometric mean over topics; frame_metrics means are arithmetic"
_NOT_A_METRIC = "a count, not a metric (an aggregate's n_users counts the users averaged)"

#: trec_eval measures the package does not compute (full-name patterns), and why.
_TREC_EVAL_NOT_COMPUTED: dict[str, str] = {
    r"runid|relstring(_\d+)?": "a string, not a number",
    r"num_q|num_ret|num_rel|num_rel_ret|num_nonrel_judged_ret|num_nonjudged_ret": _NOT_A_METRIC,
    r"gm_map|gm_bpref": _NO_GEOMETRIC,
    r"infAP": "inferred AP over sampled judgements",
    r"iprec_at_recall(_[\d.]+)?|11pt_avg.*": "interpolated precision at recall levels",
    r"Rprec_mult(_[\d.]+)?": "precision at a multiple of R (Rprec_mult_1.00 is Rprec)",
    r"relative_P(_\d+)?": "hits@k / min(k, R)",
    r"set_P|set_relative_P|set_map|set_F(_[\d.]+)?": "a measure of the retrieved set",
    r"set_recall": "recall over the whole list: recall@k with k past the longest list",
    r"utility.*": "a set utility",
    r"Rndcg|ndcg_rel|ndcg_p|ideal_dcg|binG|G": "an nDCG variant or gain measure",
    r"unj(_\d+)?": "the share of unjudged documents",
    r"rbp_resid": "the RBP residual",
    r"yaap|map_avgjg|P_avgjg(_\d+)?|Rprec_mult_avgjg.*|prefs_.*": "a measure over judgment "
    "groups or preferences",
}

#: ir_measures measures the package does not compute, and why.
_IR_MEASURES_NOT_COMPUTED: dict[str, str] = {
    "SetP|SetRelP|SetR|SetF|SetAP": "a measure of the retrieved set",
    "NumQ|NumRel|NumRet|NumRelRet": _NOT_A_METRIC,
    "infAP": "inferred AP over sampled judgements",
    "IPrec": "interpolated precision at a recall level",
    "BPM|INST|INSQ|NERR8|NERR9|NERR10|NERR11|SDCG": "a C/W/L measure (cwl_eval)",
    "alpha_DCG|α_DCG|alpha_nDCG|α_nDCG|ERR_IA|nERR_IA|NRBP|nNRBP|AP_IA|MAP_IA|P_IA|StRecall": (
        "a diversity measure over query intents (ndeval)"
    ),
    "Compat": "compatibility with an ideal ranking",
    "Accuracy": "a pairwise accuracy",
}


_POSSESSIVE = {"trec_eval": "'s", "ir_measures": "'"}


def possessive(tool: str) -> str:
    """``"trec_eval's"``, ``"ir_measures'"``: a tool's name as a message's possessive."""
    return tool + _POSSESSIVE[tool]


def _not_computed(name: str) -> tuple[Tool, str] | None:
    for tool, table in (
        ("trec_eval", _TREC_EVAL_NOT_COMPUTED),
        ("ir_measures", _IR_MEASURES_NOT_COMPUTED),
    ):
        for pattern, why in table.items():
            if re.fullmatch(pattern, name):
                return tool, why  # type: ignore[return-value]
    return None


def tool_measure(
    name: str, cut: str | None, raw: str, package: Container[str] = ()
) -> ToolMeasure | None:
    """The tool measure ``name`` (its ``"@k"`` text ``cut``) spells, or None if none does.

    A tool's exact spelling comes first (``"NDCG"``, ``"Bpref"``); then a name in
    ``package`` (the package's names, lower case) is the package's (``"ndcg"``,
    ``"BPREF"``); then a tool measure the package does not compute is an error.

    Examples
    --------
    >>> tool_measure("P_10", None, "P_10")
    ToolMeasure(tool='trec_eval', name='P_10', metric='precision', k=10, whole_list=False, fixed=())
    >>> tool_measure("nDCG", "10", "nDCG@10").metric
    'ndcg'
    >>> tool_measure("RR", "10", "RR@10").fixed, tool_measure("RR", None, "RR").whole_list
    ((('mrr_cutoff', 'k'),), True)
    >>> tool_measure("ndcg", "10", "ndcg@10", {"ndcg"}) is None  # the package's own name
    True
    >>> tool_measure("gm_map", None, "gm_map")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected a measure frame_metrics computes, got 'gm_map': trec_eval's gm_map is a geometric mean over topics; frame_metrics means are arithmetic
    """
    cut_in_name = _TREC_EVAL_CUT_NAME.fullmatch(name)
    if cut_in_name or name in _TREC_EVAL_WHOLE:
        if cut is not None:
            why = "trec_eval writes the cutoff in the name" if cut_in_name else "it has none"
            raise InvalidOptionError(
                f"expected {name!r} without a cutoff ({why}), got {raw!r}", option="metrics"
            )
        if cut_in_name:
            return ToolMeasure(
                "trec_eval", name, _TREC_EVAL_CUT[cut_in_name[1]], int(cut_in_name[2])
            )
        metric, fixed = _TREC_EVAL_WHOLE[name]
        return ToolMeasure("trec_eval", name, metric, whole_list=True, fixed=fixed)
    if name in _IR_MEASURES:
        metric = _IR_MEASURES[name]
        if metric == "mrr":  # RR: the whole list; RR@k: within k
            fixed = (("mrr_cutoff", "none" if cut is None else "k"),)
            return ToolMeasure("ir_measures", name, metric, whole_list=cut is None, fixed=fixed)
        return ToolMeasure("ir_measures", name, metric, fixed=_IR_FIXED.get(name, ()))
    if name.lower() in package:
        return None
    odd = _exact_spelling(name)
    if odd is not None:
        tool, spelling, metric = odd
        written = spelling if cut is None else f"{spelling}@{cut}"
        ours = metric if cut is None else f"{metric}@{cut}"
        if cut is None and spelling != name and (tail := _cut_of(spelling)) is not None:
            ours = f"{metric}@{tail}"
        raise InvalidOptionError(
            f"expected {possessive(tool)} spelling {written!r} (a tool's name matches only as the "
            f"tool writes it, case included) or this package's {ours!r}, got {raw!r}",
            option="metrics",
        )
    if name in _TREC_EVAL_CUT:  # success, map_cut, ndcg_cut (P is ir_measures')
        raise InvalidOptionError(
            f"expected trec_eval's {name} with its cutoff ({name}_<k>, such as "
            f"{name}_10), got {raw!r}",
            option="metrics",
        )
    refused = _not_computed(name)
    if refused is not None:
        tool, why = refused
        raise InvalidOptionError(
            f"expected a measure frame_metrics computes, got {raw!r}: "
            f"{possessive(tool)} {name} is {why}",
            option="metrics",
        )
    return None


def _exact_spelling(name: str) -> tuple[Tool, str, str] | None:
    """The tool, exact spelling and metric of a tool name written in another case.

    ``"p_10"`` is trec_eval's ``"P_10"`` (precision), ``"rr"`` ir_measures' ``"RR"``;
    None when ``name`` is no tool's name in any case.

    Examples
    --------
    >>> _exact_spelling("Ndcg_Cut_10"), _exact_spelling("rr")
    (('trec_eval', 'ndcg_cut_10', 'ndcg'), ('ir_measures', 'RR', 'mrr'))
    """
    lowered = name.lower()
    cut_in_name = _TREC_EVAL_CUT_NAME_ANY_CASE.fullmatch(name)
    if cut_in_name:
        stem = next(s for s in _TREC_EVAL_CUT if s.lower() == cut_in_name[1].lower())
        return "trec_eval", f"{stem}_{cut_in_name[2]}", _TREC_EVAL_CUT[stem]
    for spelling, (metric, _) in _TREC_EVAL_WHOLE.items():
        if spelling.lower() == lowered:
            return "trec_eval", spelling, metric
    for spelling, metric in _IR_MEASURES.items():
        if spelling.lower() == lowered:
            return "ir_measures", spelling, metric
    return None


def _cut_of(spelling: str) -> str | None:
    """The cutoff a trec_eval name carries (``"P_10"``: ``"10"``), else None."""
    match = _TREC_EVAL_CUT_NAME.fullmatch(spelling)
    return None if match is None else match[2]


def spellings() -> list[str]:
    """Every tool name without a number in it, for a did-you-mean hint."""
    cut = [f"{name}_<k>" for name in _TREC_EVAL_CUT]
    return sorted({*_IR_MEASURES, *_TREC_EVAL_WHOLE, *cut})
