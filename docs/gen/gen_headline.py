r"""The headline metrics' own pages: NDCG, MAP, recall, precision, MRR and hit rate.

The metrics most reports quote, and the ones libraries disagree on. Each page has the
formula (:data:`gen_metrics.LATEX` and the registry's), the variants the metric's options
give, and how each peer differs: its name for the metric, checked against the peer by
``tests/test_peer_presets.py``, and what its preset (``frame_metrics.conventions``) sets
for this metric, with the peer's reason and a link to its source. Two examples, computed
when the site is built, put the variants and the presets side by side on the same frames.

Only the introductions and the variant lists are written here; everything else is read
from the registry and the presets, so a new option or preset setting appears on its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import gen_metrics

from frame_metrics.conventions import CONVENTIONS, Setting
from frame_metrics.metrics.registry import REGISTRY, Metric
from frame_metrics.options import CHOICES, MetricOptions

__all__ = [
    "HEADLINE",
    "PEER_NAMES",
    "headline_pages",
    "nav",
    "page_path",
    "peer_notes",
    "settings_for",
    "titles",
]


@dataclass(frozen=True)
class Headline:
    """A headline metric's page: its title, what it measures, the variants shown."""

    title: str
    intro: str
    #: Metric strings computed side by side in the variants example (the first: defaults).
    variants: tuple[str, ...]
    #: Words (a regular expression, any case) that name the metric in a preset's notes.
    mentions: str


HEADLINE: dict[str, Headline] = {
    "ndcg": Headline(
        "NDCG",
        "Normalised discounted cumulative gain rewards relevant items near the top of the "
        "list: each adds its gain (its graded relevance, by default) divided by the log of "
        "its rank, and the sum is divided by the best sum the user's relevant items allow "
        "(the ideal DCG), so the best possible order scores 1. It is the metric libraries "
        "disagree on most: the gain, the ideal DCG, ties and who is averaged all vary.",
        (
            "ndcg",
            "ndcg(gain=exponential)",
            "ndcg(gain=binary)",
            "ndcg(gain={3: 10})",
            "ndcg(gain=binary, idcg=k)",
            "ndcg(relevant_set=listed)",
            "ndcg(threshold=2)",
            "ndcg(ties=average)",
        ),
        r"ndcg",
    ),
    "ap": Headline(
        "MAP (average precision)",
        "Average precision adds the precision at the rank of every relevant item in the "
        "top k and divides the sum by a denominator D; its mean over users is MAP (`map` "
        "is an alias: the column is `ap@k`). The sum is the same everywhere, D is not: "
        "libraries divide by min(|R|, k), by |R|, by the hits or by k, so the same lists "
        "give MAP values that differ several-fold ([notebook 03]"
        "(../notebooks/03_tutorial_reproduction.ipynb) shows a published tutorial's "
        '"map@10" that is none of them).',
        (
            "ap",
            "ap(ap_denominator=relevant)",
            "ap(ap_denominator=hits)",
            "ap(ap_denominator=k)",
            "ap(relevant_set=listed)",
            "ap(threshold=2)",
            "ap(ties=item_desc)",
        ),
        r"\bmap\b|\bap\b|map_at_k|map_cut",
    ),
    "recall": Headline(
        "Recall",
        "Recall@k is the share of the user's relevant items that are in the top k. Its "
        "denominator |R| counts every relevant truth item, recommended or not, unless a "
        "library only knows the items it scored (torchmetrics, scikit-learn: "
        '`relevant_set="listed"`); a user with more relevant items than k cannot reach 1.',
        (
            "recall",
            "recall(relevant_set=listed)",
            "recall(threshold=2)",
            "recall(ties=average)",
            "recall(empty=zero)",
            "recall(users=recs)",
        ),
        r"\brecall\b",
    ),
    "precision": Headline(
        "Precision",
        "Precision@k is the share of the top k that is relevant. It divides by k even when "
        "the list is shorter than k, as trec_eval, ranx and RecTools do (torchmetrics' "
        "`adaptive_k=True` divides by the list's length, which no option reproduces).",
        (
            "precision",
            "precision(threshold=2)",
            "precision(ties=item_desc)",
            "precision(ties=average)",
            "precision(empty=zero)",
            "precision(users=recs)",
        ),
        r"\bprecision\b",
    ),
    "mrr": Headline(
        "MRR",
        "Mean reciprocal rank: a user scores 1 / the rank of the first relevant item within "
        "the top k (0 when there is none), and MRR is the mean over users. trec_eval's "
        "`recip_rank` has no cutoff: the first relevant item anywhere in the list.",
        (
            "mrr",
            "mrr(mrr_cutoff=none)",
            "mrr(threshold=2)",
            "mrr(ties=item_desc)",
            "mrr(empty=zero)",
        ),
        r"\bmrr\b|recip_rank",
    ),
    "hit_rate": Headline(
        "Hit rate",
        "Hit rate@k is 1 for a user whose top k holds at least one relevant item, else 0; "
        "its mean is the share of users with a hit (trec_eval calls it `success`).",
        (
            "hit_rate",
            "hit_rate(threshold=2)",
            "hit_rate(ties=average)",
            "hit_rate(empty=zero)",
            "hit_rate(users=recs)",
        ),
        r"hit.?rate|\bsuccess",
    ),
}

#: Each peer's name for a headline metric, by convention (the preset that reproduces it):
#: the calls ``tests/test_peer_presets.py`` checks against the peer. A peer without the
#: metric (or without a checked counterpart) has no entry.
PEER_NAMES: dict[str, dict[str, str]] = {
    "ndcg": {
        "trec_eval": "`ndcg_cut_k`; `ndcg` (no cutoff: a k past the longest list)",
        "ranx": "`ndcg@k`",
        "rectools": "`NDCG(k)`",
        "recommenders": "`ndcg_at_k`",
        "sklearn": "`ndcg_score(y_true, y_score, k=k)`",
        "torchmetrics": "`RetrievalNormalizedDCG(top_k=k)`",
        "replay": "`NDCG(k)`",
    },
    "ap": {
        "trec_eval": "`map_cut_k`; `map` (no cutoff: a k past the longest list)",
        "ranx": "`map@k`",
        "rectools": "`MAP(k)`",
        "recommenders": '`map_at_k`; `map` (`ap_denominator="relevant"`)',
        "torchmetrics": "`RetrievalMAP(top_k=k)`",
        "replay": "`MAP(k)`",
    },
    "recall": {
        "trec_eval": "`recall_k`",
        "ranx": "`recall@k`",
        "rectools": "`Recall(k)`",
        "recommenders": "`recall_at_k`",
        "torchmetrics": "`RetrievalRecall(top_k=k)`",
        "replay": "`Recall(k)`",
    },
    "precision": {
        "trec_eval": "`P_k`",
        "ranx": "`precision@k`",
        "rectools": "`Precision(k)`",
        "recommenders": "`precision_at_k`",
        "torchmetrics": "`RetrievalPrecision(top_k=k)`",
        "replay": "`Precision(k)`",
    },
    "mrr": {
        "trec_eval": "`recip_rank` (no cutoff)",
        "ranx": "`mrr@k`",
        "rectools": "`MRR(k)`",
        "torchmetrics": "`RetrievalMRR(top_k=k)`",
        "replay": "`MRR(k)`",
    },
    "hit_rate": {
        "trec_eval": "`success_k`",
        "ranx": "`hit_rate@k`",
        "rectools": "`HitRate(k)`",
        "torchmetrics": "`RetrievalHitRate(top_k=k)`",
        "replay": "`HitRate(k)`",
    },
}

#: Notes naming one of these are about another metric (bpref, rbp, R-precision, ...).
_OTHER_METRICS = r"bpref|\brbp|rprec|r-precision|\berr\b|ERR@|judged@"

#: The frames and the helper every example of a headline page runs on.
SETUP = '''\
import polars as pl
import frame_metrics as fm

# Scored lists: user 1 has a tie (b and c), user 3 no relevant item.
recs = pl.DataFrame({
    "user": [1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3],
    "item": ["a", "b", "c", "d", "e", "a", "f", "h", "g", "b", "c"],
    "score": [0.9, 0.8, 0.8, 0.5, 0.3, 0.7, 0.6, 0.5, 0.2, 0.9, 0.4],
})
# Graded truth: "x" is never recommended, user 4 gets no list.
truth = pl.DataFrame({
    "user": [1, 1, 1, 1, 2, 3, 4],
    "item": ["b", "d", "x", "e", "g", "c", "a"],
    "relevance": [3, 1, 2, 0, 1, 0, 2],
})


def side_by_side(metrics, k=2):
    """A row per metric string: each user's value, then the mean over users."""
    call = {"score": "score", "metrics": metrics, "k": k}
    per_user = fm.evaluate(recs, truth, **call)
    means = fm.evaluate(recs, truth, aggregate=True, **call).drop("n_users")
    table = per_user.with_columns(pl.format("user {}", "user")).transpose(
        include_header=True, header_name="metric", column_names="user"
    )
    means = means.unpivot(variable_name="metric", value_name="mean")
    table = table.join(means, on="metric", how="left", maintain_order="left")
    # 4 decimals: the table fits the page
    return table.with_columns(pl.exclude("metric").round(4))'''


def page_path(name: str) -> str:
    """A headline metric's page in the site's sources (beside the family pages)."""
    return f"metrics/{name}.md"


def titles() -> dict[str, str]:
    """Each headline metric's page title, by metric name."""
    return {name: h.title for name, h in HEADLINE.items()}


def nav() -> list[dict[str, str]]:
    """The nav entries of the headline pages, in :data:`HEADLINE` order."""
    return [{h.title: page_path(name)} for name, h in HEADLINE.items()]


def _check() -> None:
    """Every headline metric is registered and its page path is free."""
    families = {gen_metrics.page_path(f) for f in gen_metrics.families()}
    for name in HEADLINE:
        if name not in REGISTRY:
            raise RuntimeError(f"docs: headline metric {name!r} is not in the registry")
        if page_path(name) in families:
            raise RuntimeError(f"docs: {page_path(name)} is a family page too")
    unknown = sorted({c for names in PEER_NAMES.values() for c in names} - set(CONVENTIONS))
    if unknown:
        raise RuntimeError(f"docs: PEER_NAMES names no preset {unknown}")


def settings_for(metric: Metric, convention: str) -> list[tuple[str, Setting]]:
    """What a preset sets that this metric reads: (option, setting), in the preset's order.

    Of an option's settings, the last one that applies to the metric wins, as in
    ``Convention.options_for`` (Recommenders: ``users="both"``, but ``"truth"`` for ndcg).
    """
    reads = metric.reads()
    chosen: dict[str, Setting] = {}
    for option, settings in CONVENTIONS[convention].settings.items():
        for setting in settings:
            if option in reads and (not setting.metrics or metric.name in setting.metrics):
                chosen[option] = setting
    return list(chosen.items())


def peer_notes(name: str, convention: str) -> list[str]:
    """A preset's notes about this metric: those naming it, and those naming no metric."""
    mentions = "|".join(h.mentions for h in HEADLINE.values())
    own = HEADLINE[name].mentions
    return [
        note
        for note in CONVENTIONS[convention].notes
        if re.search(own, note, re.I)
        or not (re.search(mentions, note, re.I) or re.search(_OTHER_METRICS, note, re.I))
    ]


def _value(value: object) -> str:
    from frame_metrics.metric_names import format_value

    return format_value(value)


def _values(option: str) -> str:
    """The values an option takes, its default first."""
    default = getattr(MetricOptions(), option, None)
    if option in CHOICES:
        return ", ".join(f"`{c}`" for c in CHOICES[option])
    if option == "threshold":
        return "a number; default: any relevance > 0"
    return f"a number (default `{_value(default)}`)"


def _call(metrics: list[str] | tuple[str, ...]) -> str:
    """``print(side_by_side([...]))``, one metric string per line."""
    body = "".join(f"    {json.dumps(m)},\n" for m in metrics)
    return f"print(side_by_side([\n{body}]))"


def _doc(text: str) -> str:
    """An option's docstring text for a table cell: RST ``code`` as Markdown `code`."""
    return gen_metrics.cell(text.replace("``", "`"))


def _variants_section(metric: Metric, headline: Headline, options: dict[str, str]) -> list[str]:
    reads = sorted(metric.reads() - {"convention"})
    lines = [
        "## Variants",
        "",
        "The options this metric reads, in `fm.evaluate(..., option=value)` for every "
        f'metric of the call, or in the metric\'s name for it alone (`"{headline.variants[1]}@10"`):',
        "",
        "| option | values (default first) | what it changes |",
        "|---|---|---|",
    ]
    for option in reads:
        link = f"[`{option}`](index.md#option-{option.replace('_', '-')})"
        lines.append(f"| {link} | {_values(option)} | {_doc(options[option])} |")
    lines += [
        "",
        "The variants side by side, at k = 2, on the frames at the top of this page (a "
        "missing user is one the variant does not average; the mean is over the users "
        "with a value):",
        "",
        "```python exec",
        _call(headline.variants),
        "```",
        "",
    ]
    return lines


def _peers_section(name: str, metric: Metric) -> list[str]:
    names = PEER_NAMES[name]
    lines = [
        "## How peers differ",
        "",
        "Each peer's name for it (the calls `tests/test_peer_presets.py` checks against "
        f'the peer) and what its preset, `convention="<peer>"`, sets for `{name}`: with '
        "the preset, the same frames give the peer's numbers. Options given explicitly "
        "override the preset ([Conventions and presets](../conventions.md)).",
        "",
        f"| preset | the peer's name for `{name}` | what the preset sets for `{name}` |",
        "|---|---|---|",
    ]
    for convention, peer_name in names.items():
        settings = settings_for(metric, convention)
        shown = ", ".join(f"`{o}={_value(s.value)}`" for o, s in settings)
        lines.append(
            f"| [`{convention}`](#{convention}) | {peer_name} "
            f"| {shown or 'nothing: the defaults are the same'} |"
        )
    without = [c for c in CONVENTIONS if c not in names]
    if without:
        lines += [
            "",
            f"Not listed: {', '.join(f'`{c}`' for c in without)} (no counterpart of "
            f"`{name}` is checked against it).",
        ]
    presets = [f"{name}(convention={c})" for c in names]
    lines += [
        "",
        "Each preset on the frames at the top of this page, at k = 2 (the tie of user 1, "
        "user 3 without a relevant item and user 4 without a list are where they part):",
        "",
        "```python exec",
        _call(presets),
        "```",
        "",
        "### Why, peer by peer",
        "",
        "What each peer does, as its preset records it, with a link to where its code does "
        "it; then what no option reproduces or what maps from the peer's own arguments.",
        "",
    ]
    for convention in names:
        c = CONVENTIONS[convention]
        lines += [f"#### {convention} {{#{convention}}}", "", f"{c.peer}, version {c.version}.", ""]
        settings = settings_for(metric, convention)
        lines += [
            f"- `{option}={_value(s.value)}`: {s.why} ([source]({s.source}))"
            for option, s in settings
        ]
        lines += [f"- {note}" for note in peer_notes(name, convention)]
        if not settings and not peer_notes(name, convention):
            lines.append(f"- Nothing: its `{name}` is the spec's.")
        lines.append("")
    lines += [
        "Which call reproduces which library, peer by peer: [Which number matches my old "
        "library](../peers.md).",
        "",
    ]
    return lines


def _page(name: str, options: dict[str, str], family: str) -> str:
    metric = REGISTRY[name]
    headline = HEADLINE[name]
    anchor = name.replace("_", "-")
    lines = [
        f"# {headline.title}",
        "",
        headline.intro,
        "",
        "Generated when the site is built, from the registry and the presets: every output "
        "on this page is computed by the build. The examples run on these frames and this "
        "helper:",
        "",
        "```python exec",
        SETUP,
        "```",
        "",
        "## Definition",
        "",
        "$$",
        gen_metrics.LATEX[name],
        "$$",
        "",
        f"**As the registry defines it:** `{metric.formula}`. The notation is on the "
        f"[metrics overview](index.md#notation); the reference entry, with every input, is "
        f"[`{name}` in {gen_metrics.family_title(family)}]({family}.md#{anchor}).",
        "",
        *(f"- **{label}:** {value}" for label, value in gen_metrics.facts(metric)),
        "",
    ]
    lines += _variants_section(metric, headline, options)
    lines += _peers_section(name, metric)
    return "\n".join(lines) + "\n"


def headline_pages() -> dict[str, str]:
    """The Markdown of every headline page, keyed by its path."""
    gen_metrics.check_formulas()
    _check()
    options = gen_metrics.option_docs()
    return {
        page_path(name): _page(name, options, gen_metrics.family_of(REGISTRY[name]))
        for name in HEADLINE
    }
