r"""The metric pages, generated from the registry (``frame_metrics.REGISTRY``) at build time.

One page per family: the module that registers the metric (``frame_metrics.metrics.<module>``
for the ranking family's pages, ``frame_metrics.families.<family>`` for the others), titled
by the module's docstring. For every metric:
its formula in LaTeX (:data:`LATEX`, below) and as the registry writes it, what kind of
computation it is, who is averaged, the cutoff and range, the inputs it needs, the options
a metric string may give it (``Metric.reads()``), how peers differ (``Metric.notes``) and
an example whose output is computed when the site is built.

A registry metric without a LaTeX formula here fails the build (:func:`check_formulas`),
so a new metric cannot reach the site without one; everything else about it appears on
its own.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from collections.abc import Collection, Iterable, Mapping

from griffe_sphinx_roles import without_roles

from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.registry import ALIASES, REGISTRY, Metric
from frame_metrics.options import CHOICES, OPTIONS, MetricOptions

__all__ = [
    "LATEX",
    "cell",
    "check_formulas",
    "facts",
    "family_of",
    "family_pages",
    "index_page",
    "page_path",
]

#: The formula of every registry metric in LaTeX, keyed by metric name; a long one is
#: set on two or three lines (``gathered``) so that it fits the page's column. Notation on the
#: metrics index page: L is a user's list by rank, L[r] its item at rank r, L_{:k} the top
#: k, R the relevant items, rel(i) an item's relevance.
LATEX: dict[str, str] = {
    # ranking accuracy
    "precision": r"\mathrm{precision@}k = \frac{\mathrm{hits@}k}{k},"
    r"\qquad \mathrm{hits@}k = |L_{:k} \cap R|",
    "recall": r"\mathrm{recall@}k = \frac{\mathrm{hits@}k}{|R|}",
    "f1": r"\mathrm{F1@}k = \frac{2 \cdot P@k \cdot R@k}{P@k + R@k}"
    r"\quad (0 \text{ when } P@k = R@k = 0)",
    "hit_rate": r"\mathrm{hit\_rate@}k = \mathbb{1}\left[\mathrm{hits@}k > 0\right]",
    "mrr": r"\mathrm{mrr@}k = \frac{1}{\min\{r \le k : L[r] \in R\}}"
    r"\quad (0 \text{ when no relevant item is in } L_{:k})",
    "ap": r"\begin{gathered}\mathrm{AP@}k = \frac{1}{D} \sum_{r \le k,\ L[r] \in R}"
    r"\frac{\mathrm{hits@}r}{r},\\"
    r"D = \min(|R|, k) \text{ by default } (\texttt{ap\_denominator})\end{gathered}",
    "dcg": r"\mathrm{DCG@}k = \sum_{r=1}^{k} \frac{g\left(\mathrm{rel}(L[r])\right)}{\log_2(r + 1)},"
    r"\qquad g(x) = x \text{ by default } (\texttt{gain})",
    "ndcg": r"\mathrm{nDCG@}k = \frac{\mathrm{DCG@}k}{\mathrm{IDCG@}k},"
    r"\qquad \mathrm{IDCG@}k = \text{DCG@}k \text{ of } R \text{ sorted by relevance}",
    # IR measures
    "r_precision": r"\mathrm{R\text{-}precision} = \frac{\mathrm{hits@}|R|}{|R|}",
    "bpref": r"\mathrm{bpref} = \frac{1}{|R|} \sum_{r:\ L[r] \in R}"
    r"\left(1 - \frac{\min(n_r, |R|)}{\min(|R|, N)}\right)",
    "err": r"\mathrm{ERR@}k = \sum_{r=1}^{k} \frac{1}{r}\, P_r \prod_{i < r} (1 - P_i),"
    r"\qquad P_i = \frac{2^{g_i} - 1}{2^{g_{\max}}}",
    "rbp": r"\mathrm{RBP} = (1 - p) \sum_{r \ge 1} \mathbb{1}\left[L[r] \in R\right] p^{\,r - 1}",
    "judged": r"\mathrm{judged@}k = \frac{|\{i \in L_{:k} : i \text{ has a truth row}\}|}{k}",
    # beyond accuracy, per user
    "novelty": r"\mathrm{novelty@}k = \frac{1}{|L_{:k}|} \sum_{i \in L_{:k}}"
    r"-\log_2 \frac{\mathrm{pop}(i)}{N_{\mathrm{train}}}",
    "arp": r"\mathrm{arp@}k = \frac{1}{|L_{:k}|} \sum_{i \in L_{:k}} \mathrm{pop}(i)",
    "aplt": r"\mathrm{aplt@}k = \frac{|L_{:k} \setminus H|}{|L_{:k}|},"
    r"\qquad H = \text{the short head (}\texttt{head\_share}\text{ of train pairs)}",
    "serendipity": r"\mathrm{serendipity@}k = \frac{|\{i \in L_{:k} : i \in R,\ i \in U\}|}{k},"
    r"\qquad U = \text{unexpected items}",
    "diversity": r"\mathrm{diversity@}k = 1 - \frac{2}{n(n - 1)}"
    r"\sum_{\{i, j\} \subseteq L_{:k}} \mathrm{sim}(i, j),\qquad n = |L_{:k}| \ge 2",
    # corpus
    "coverage": r"\mathrm{coverage@}k = \frac{\left|\bigcup_u L_{u,:k}\right|}{|C|}",
    "personalization": r"\mathrm{personalization@}k = 1 - \frac{\sum_i c_i (c_i - 1)}{k \cdot U (U - 1)}",
    "gini": r"\mathrm{gini@}k = \frac{\sum_{j=1}^{n} (2j - n - 1)\, c_{(j)}}{n \sum_{j} c_j},"
    r"\qquad c_{(1)} \le \dots \le c_{(n)}",
    # rating errors
    "mse": r"\mathrm{MSE} = \frac{1}{|P|} \sum_{(u, i) \in P} (r_{ui} - \hat r_{ui})^2",
    "rmse": r"\mathrm{RMSE} = \sqrt{\frac{1}{|P|} \sum_{(u, i) \in P} (r_{ui} - \hat r_{ui})^2}",
    "mae": r"\mathrm{MAE} = \frac{1}{|P|} \sum_{(u, i) \in P} |r_{ui} - \hat r_{ui}|",
    # expected exposure (spec 9.2): ε over the user's S rankings, ε* of the ideal
    "ee_loss": r"\begin{gathered}\mathrm{ee\_loss@}k = \sum_{i} (\epsilon_i - \epsilon^*_i)^2,"
    r"\\ \epsilon_i = \frac{1}{S} \sum_{s=1}^{S} [r_{is} \le k]\, p^{r_{is} - 1},"
    r"\qquad \epsilon^*_i = \frac{1}{m_g} \sum_{r=b_g+1}^{\min(b_g + m_g,\, k)} p^{r-1}"
    r"\end{gathered}",
    "ee_disparity": r"\mathrm{ee\_disparity@}k = \sum_{i} \epsilon_i^2",
    "ee_relevance": r"\mathrm{ee\_relevance@}k = \sum_{i} \epsilon_i\, \epsilon^*_i",
    # exposure and provider fairness
    "exposure_gini": r"\begin{gathered}\mathrm{exposure\_gini@}k = "
    r"\frac{\sum_{j=1}^{n} (2j - n - 1)\, E_{(j)}}{n \sum_{j} E_j},\\"
    r"E(i) = \sum_u e(\mathrm{rank}_u(i)),\ "
    r"e(r) = \tfrac{1}{\log_2(r + 1)} \text{ by default } (\texttt{exposure})\end{gathered}",
    "exposure_parity": r"\begin{gathered}\mathrm{exposure\_parity@}k = "
    r"1 - \sqrt{\mathrm{JSD}_2(s, t)},\\"
    r"s_g = \frac{\sum_{i \in g} E(i)}{\sum_{g'} \sum_{i \in g'} E(i)},"
    r"\ t = \texttt{parity\_target}\end{gathered}",
    "list_parity": r"\mathrm{list\_parity@}k = 1 - \sqrt{\mathrm{JSD}_2(s_u, t)},"
    r"\qquad s_{u,g} \propto \sum_{r \le k,\ L[r] \in g} e(r)",
    # calibration
    "miscalibration": r"\begin{gathered}\mathrm{miscalibration@}k = \sum_{g:\ p(g|u) > 0} p(g|u)"
    r"\log_2 \frac{p(g|u)}{(1 - \alpha)\, q(g|u) + \alpha\, p(g|u)},\\"
    r"p(g|u) = \frac{\sum_{i \in H_u} w_{ui}\, p(g|i)}{\sum_{i \in H_u} w_{ui}},"
    r"\qquad q(g|u) = \frac{\sum_{r \le k} w_r\, p(g|L[r])}{\sum_{r \le k} w_r}"
    r"\end{gathered}",
}

#: Who gets a value, by ``Metric.population``.
POPULATION: dict[str, str] = {
    "relevant": "users with at least one relevant item (the spec's section 3 policy): "
    '`empty="zero"` scores users without one 0 instead of leaving them out, and `users=` '
    "chooses who may be evaluated at all (every user seen, truth, recs or both)",
    "listed": "users with at least one recommended item within the cutoff "
    "(diversity: at least two)",
    "rated": "users with at least one (rating, prediction) pair; with `aggregate=True` "
    "the error is pooled over every pair of the group, not averaged over users",
    "corpus": "no per-user value: one value per `by` group, so it needs `aggregate=True`",
    "history": "users with at least one recommended item within the cutoff whose `train` "
    "history holds a categorised item (`fm.diagnose` counts the others)",
}

#: What ``Metric.family`` (how the engine computes a metric) means.
KIND: dict[str, str] = {
    "ranking": "an expression over one user's rows of the long table",
    "diversity": "over the pairs of one user's top-k items",
    "rating": "over one user's (rating, prediction) pairs",
    "corpus": "from the item exposure counts of a `by` group",
    "expected_exposure": "from each user's attention per item, averaged over the user's "
    "rankings (`sample=`), against the ideal ranking's",
    "exposure": "from counts of users per (item, rank) and of rows per (item group, rank), "
    "weighted by the browsing model",
    "calibration": "from one user's history and top-k category distributions",
}

#: The inputs behind each ``Metric.needs`` entry, as evaluate's keywords.
NEEDS: dict[str, str] = {
    "truth": "`truth` (user, item, relevance)",
    "judged": "`truth` rows of any relevance, 0 included (the judged items)",
    "max_relevance": "the largest relevance in `truth` (or `max_relevance=`)",
    "popularity": "`train=` (user, item): popularity = distinct train users per item",
    "history": "`train=`: each user's history",
    "unexpected": '`baseline=` (another model\'s recommendations; `unexpected="baseline"`, '
    'the default) or `train=` (`unexpected="history"`)',
    "catalog_size": "`catalog=` (the catalog's items; default: the items seen in the inputs)",
    "item_features": "`item_features=` (item + a `features` column: a list of categories "
    "for Jaccard, a numeric vector for cosine; `similarity=`)",
    "prediction": "a `prediction` column in `recs` (the predicted rating), `relevance` "
    "in `truth` (the true rating)",
    "train": "`train=` (user, item; `history_weight=` a weight column): each user's history",
}

#: Family pages first in this order; any other module follows in registry order.
ORDER = ("ranking", "ir", "beyond", "diversity", "corpus", "rating")

#: The frames the examples run on, by name; a family page defines those its examples use.
FRAMES: dict[str, str] = {
    "recs": """\
recs = pl.DataFrame({  # three users' lists, rank 1 = top
    "user": [1, 1, 1, 1, 2, 2, 2, 3, 3],
    "item": ["a", "b", "c", "d", "a", "e", "f", "b", "c"],
    "rank": [1, 2, 3, 4, 1, 2, 3, 1, 2],
})""",
    "truth": """\
truth = pl.DataFrame({  # graded; "x" is never recommended, "e" is judged 0
    "user": [1, 1, 1, 2, 2, 3],
    "item": ["b", "d", "x", "a", "e", "c"],
    "relevance": [3, 1, 2, 2, 0, 1],
})""",
    "train": """\
train = pl.DataFrame({  # past interactions: popularity and history
    "user": [1, 4, 4, 5, 5, 6, 6],
    "item": ["a", "a", "b", "a", "c", "a", "e"],
})""",
    "catalog": """catalog = pl.DataFrame({"item": ["a", "b", "c", "d", "e", "f", "x", "y"]})""",
    "item_features": """\
item_features = pl.DataFrame({  # genres per item: Jaccard similarity
    "item": ["a", "b", "c", "d", "e", "f", "x", "y"],
    "features": [["drama"], ["drama", "crime"], ["comedy"], ["comedy", "drama"],
                 ["horror"], ["drama"], ["crime"], ["comedy"]],
})""",
    "baseline": """\
baseline = pl.DataFrame({  # a popularity model: its items are "expected"
    "user": [1, 1, 2, 2, 3, 3],
    "item": ["a", "b", "a", "b", "a", "b"],
    "rank": [1, 2, 1, 2, 1, 2],
})""",
    "predictions": """\
predictions = pl.DataFrame({  # predicted ratings ...
    "user": [1, 1, 2, 2, 3],
    "item": ["a", "b", "a", "c", "b"],
    "prediction": [4.5, 2.0, 3.0, 4.0, 1.5],
})""",
    "ratings": """\
ratings = pl.DataFrame({  # ... and the true ones
    "user": [1, 1, 2, 2, 3],
    "item": ["a", "b", "a", "c", "b"],
    "relevance": [5.0, 3.0, 3.0, 2.0, 2.0],
})""",
}


def setup(examples: Iterable[str]) -> str:
    """The imports and the frames the ``examples`` use, in :data:`FRAMES` order."""
    examples = list(examples)
    used = [
        code for name, code in FRAMES.items() if any(re.search(rf"\b{name}\b", e) for e in examples)
    ]
    return "\n".join(["import polars as pl", "import frame_metrics as fm", "", *used]) + "\n"


_KEYWORDS = {
    "popularity": "train=train",
    "history": "train=train",
    "unexpected": "baseline=baseline",
    "catalog_size": "catalog=catalog",
    "item_features": "item_features=item_features",
    "train": "train=train",
}


def module_of(metric: Metric) -> str:
    """The module that registers ``metric`` (its builder's)."""
    return str(getattr(metric.build, "__module__", None) or metric.reference.__module__)


def family_of(metric: Metric) -> str:
    """The page of ``metric``: the last part of its module's name."""
    return module_of(metric).rsplit(".", 1)[-1]


def family_module(family: str) -> str:
    """The module that registers the metrics of page ``family``."""
    return next(module_of(m) for m in REGISTRY.values() if family_of(m) == family)


def page_path(family: str) -> str:
    """The family page's path in the site's sources."""
    return f"metrics/{family}.md"


def families() -> dict[str, list[Metric]]:
    """Registry metrics grouped by family, families in :data:`ORDER` then registry order."""
    grouped: dict[str, list[Metric]] = {}
    for metric in REGISTRY.values():
        grouped.setdefault(family_of(metric), []).append(metric)
    ranked = sorted(grouped, key=lambda f: ORDER.index(f) if f in ORDER else len(ORDER))
    return {f: grouped[f] for f in ranked}


def family_title(family: str) -> str:
    """The page title: the first line of the family module's docstring, before ``(``."""
    module = importlib.import_module(family_module(family))
    first = inspect.cleandoc(module.__doc__ or family).splitlines()[0]
    return re.split(r" \(|:", first)[0].strip().rstrip(".")


def check_formulas() -> None:
    """Fail when a registry metric has no LaTeX formula here (or one is left over)."""
    missing = sorted(set(REGISTRY) - set(LATEX))
    stale = sorted(set(LATEX) - set(REGISTRY))
    if missing or stale:
        raise RuntimeError(
            "docs/gen/gen_metrics.py LATEX must hold one formula per registry metric: "
            f"missing {missing}, not in the registry {stale}"
        )
    for metric in REGISTRY.values():
        if metric.population not in POPULATION:
            raise RuntimeError(f"docs: describe population {metric.population!r} in POPULATION")
        if metric.family not in KIND:
            raise RuntimeError(f"docs: describe family {metric.family!r} in KIND")
        unknown = sorted(set(metric.needs) - set(NEEDS))
        if unknown:
            raise RuntimeError(f"docs: describe the needs {unknown} of {metric.name!r} in NEEDS")
    weightless = sorted(_ranking_readers() - set(WEIGHTED))
    if weightless:
        raise RuntimeError(f"docs: say what {weightless} compute with propensity= in WEIGHTED")


#: What each metric judged against relevance computes under ``propensity=`` (spec 9.4):
#: each relevant item counts w̃ times (w = min(1/P, max_weight), normalised per user to
#: average 1 under ``ips="snips"``). A metric of the ranking options' readers without an
#: entry fails the build.
WEIGHTED: dict[str, str] = {
    "precision": "Σ w̃ over the hits within k, over k (above 1 when heavy items are hit)",
    "recall": "Σ w̃ over the hits within k, over Σ_R w̃: Yang et al.'s SNIPS recall "
    "Σ_hits 1/P / Σ_R 1/P",
    "f1": "2·P·R / (P + R) of the weighted precision and recall",
    "hit_rate": "unchanged: it counts no items",
    "mrr": "unchanged: it counts no items",
    "ap": "(1/D)·Σ over hits r <= k of w̃_r·hits@r / r, hits@r the running Σ w̃, "
    "D = min(Σ_R w̃, k) (`ap_denominator` as usual, with |R| = Σ_R w̃)",
    "dcg": "gains w̃·gain(rel)",
    "ndcg": "gains w̃·gain(rel) in the DCG and in the ideal DCG, whose list is sorted by "
    "weighted gain (so a perfect list still scores 1; with `idcg='k'` the slots keep gain 1)",
    "err": "each item's term (1/r)·P_r·Π(1 − P_i) counts w̃ times; the stop "
    "probabilities P_i (the cascade above it) are not weighted, so they stay probabilities",
    "rbp": "(1 − p)·Σ w̃·p^(r−1) over the relevant listed items",
    "r_precision": "Σ w̃ over the hits within rank |R| over Σ_R w̃; the cutoff stays the "
    "number of relevant items (a position), not their weight",
    "bpref": "each relevant retrieved item's term counts w̃ times, over Σ_R w̃; inside a "
    "term, n_r, R and N stay counts",
    "judged": "unchanged: it counts judged items, relevant or not",
    "serendipity": "unchanged: a share of the list (beyond accuracy), not an estimate of relevance",
}


def option_docs() -> dict[str, str]:
    """Each metric option's description: its row's entry in ``fm.evaluate``'s docstring."""
    out = {row.name: " ".join(without_roles(row.api_doc).split()) for row in OPTIONS}
    out["convention"] = (
        "A peer's preset by name, for this metric alone in a metric string "
        '(`"ndcg(convention=rectools)@10"`): see [Conventions and presets](../conventions.md).'
    )
    return out


def _ranking_readers() -> set[str]:
    """The metrics propensity weights reach: those that read the ranking options (``ips``)."""
    return {m.name for m in REGISTRY.values() if "ips" in m.reads()}


def _option_link(option: str) -> str:
    return f"[`{option}`](index.md#option-{option.replace('_', '-')})"


def cell(text: str) -> str:
    """Text for a table cell: outside code spans, pipes, HTML and ``*`` escaped.

    ``*`` is the registry's "ideal" mark (``ε*``), which Markdown would read as emphasis.
    """
    parts = text.replace("\n", " ").split("`")
    return "`".join(
        p if i % 2 else html.escape(p, quote=False).replace("|", "\\|").replace("*", "\\*")
        for i, p in enumerate(parts)
    )


def _code_cell(text: str) -> str:
    """Inline code in a table cell."""
    return cell(f"`{text}`")


def _range(metric: Metric) -> str:
    low, high = metric.bounds
    upper = "∞" if high is None else f"{high:g}"
    better = "higher is better" if metric.higher_is_better else "lower is better"
    weighted = "; no upper bound with `propensity=`" if metric.weighted_unbounded else ""
    return f"[{low:g}, {upper}{']' if high is not None else ')'}; {better}{weighted}"


def _print_call(args: list[str]) -> str:
    """``print(fm.evaluate(...))`` on one line, or wrapped within 79 columns."""
    line = f"print(fm.evaluate({', '.join(args)}))"
    if len(line) <= 79:
        return line + "\n"
    lines = [""]
    for arg in args:
        if lines[-1] and len(lines[-1]) + len(arg) + 2 > 75:
            lines.append("")
        lines[-1] += f"{arg}, "
    body = "\n".join("    " + line.rstrip() for line in lines)
    return f"print(fm.evaluate(\n{body}\n))\n"


#: Metrics over item groups: ``item_groups=``, or ``train=`` for aplt's head and tail
#: groups (the examples use these), which no ``needs`` entry says (either frame will do).
_GROUPED = frozenset({"exposure_parity", "list_parity"})


def example(metric: Metric) -> str:
    """The example call for one metric, built from what it needs."""
    if "prediction" in metric.needs:
        frames = ["predictions", "ratings"]
    elif "truth" in metric.needs or "judged" in metric.needs:
        frames = ["recs", "truth"]
    else:
        frames = ["recs"]
    args = [*frames, f'metrics="{metric.name}"']
    if metric.takes_k:  # diversity needs two items: k=1 would be null for everyone
        args.append("k=[2, 3]" if metric.family == "diversity" else "k=[1, 3]")
    args += sorted({_KEYWORDS[n] for n in metric.needs if n in _KEYWORDS})
    if metric.name in _GROUPED:
        args.append("train=train")
    if metric.population == "corpus":
        return _print_call([*args, "aggregate=True"])
    return _print_call(args) + _print_call([*args, "aggregate=True"])


def facts(metric: Metric) -> list[tuple[str, str]]:
    """What a metric page lists about ``metric``, as (label, Markdown) rows.

    Its column, who is averaged, its range, inputs, kind, other names, whether it is a
    default, ties and the options a metric string may give it.
    """
    aliases = [a for a, target in ALIASES.items() if target == metric.name]
    column = (
        f"`{metric.name}@k` (one column per cutoff)"
        if metric.takes_k
        else (
            f"`{metric.name}` (no cutoff"
            + ("; it reads the whole list)" if metric.whole_list else ")")
        )
    )
    rows = [
        ("Column", column),
        ("Who is averaged", POPULATION[metric.population]),
        ("Range", _range(metric)),
        *([("Scale", cell(metric.scale))] if metric.scale else []),
        ("Inputs", "; ".join(NEEDS[n] for n in sorted(metric.needs)) or "`recs` only"),
        ("Computed", f"`{metric.family}`: {KIND[metric.family]}"),
    ]
    if aliases:
        rows.append(("Also named", ", ".join(f"`{a}`" for a in aliases)))
    if metric.name in DEFAULT_RANKING:
        rows.append(("Default", "computed when `metrics=` is not given"))
    if metric.tie_average:
        rows.append(("Ties", 'has a tie-averaged value (`ties="average"`)'))
    if metric.name in _ranking_readers():
        rows.append(("With `propensity=` (spec 9.4)", cell(WEIGHTED[metric.name])))
    reads = sorted(metric.reads())
    rows.append(
        (
            "Options in a metric string",
            ", ".join(_option_link(o) for o in reads)
            if reads
            else "none (its keywords are evaluate's: see Inputs)",
        )
    )
    return rows


def _metric_section(
    metric: Metric, options: dict[str, str], own_pages: Mapping[str, str]
) -> Iterable[str]:
    yield f"## `{metric.name}` {{#{metric.name.replace('_', '-')}}}"
    yield ""
    yield "$$"
    yield LATEX[metric.name]
    yield "$$"
    yield ""
    yield f"**As the registry defines it:** `{metric.formula}`"
    yield ""
    rows = facts(metric)
    if metric.name in own_pages:
        rows.append(
            (
                "Its own page",
                f"[{own_pages[metric.name]}]({metric.name}.md): its variants and how "
                "each peer differs, side by side",
            )
        )
    yield from (f"- **{name}:** {value}" for name, value in rows)
    yield ""
    reads = sorted(metric.reads())
    missing = sorted(set(reads) - set(options))
    if missing:
        raise RuntimeError(f"docs: options {missing} of {metric.name!r} have no description")
    yield "**How peers differ.** " + (
        html.escape(metric.notes, quote=False)
        if metric.notes
        else "See the [presets](../conventions.md): where a peer's number differs, an "
        "option or `convention=` reproduces it."
    )
    yield ""
    yield "**Example** (with the frames at the top of this page):"
    yield ""
    yield "```python exec"
    yield example(metric).rstrip("\n")
    yield "```"
    yield ""


def family_pages(
    own_pages: Mapping[str, str] | None = None, guides: Collection[str] = ()
) -> dict[str, str]:
    """The Markdown of every family page, keyed by its path.

    ``own_pages`` maps the metrics with a page of their own (beside the family pages, at
    ``metrics/<name>.md``) to its title, which their sections link to. ``guides`` are the
    families whose page is written by hand (``docs/metrics/<family>.md``: a walk-through
    of the family): theirs is the registry part alone, under a heading of its own, which
    the build appends to the hand-written page, so that the family has one page.
    """
    own_pages = own_pages or {}
    check_formulas()
    options = option_docs()
    pages = {}
    for family, metrics in families().items():
        title = family_title(family)
        if family in guides:
            head = [
                "## Every metric of the page, from the registry {#registry}",
                "",
                "Generated from the metric registry when the site is built: every metric "
                f"registered in `{family_module(family)}`, with its formula, its "
                "inputs, its options and an example. The notation is on the "
                "[metrics overview](index.md#notation); the printed outputs below are "
                "computed by the build.",
            ]
        else:
            head = [
                f"# {title}",
                "",
                "Generated from the metric registry when the site is built: every metric "
                f"registered in `{family_module(family)}`. The notation is on the "
                "[metrics overview](index.md#notation); the printed outputs below are "
                "computed by the build.",
            ]
        lines = [
            *head,
            "",
            "| metric | formula |",
            "|---|---|",
            *(
                f"| [`{m.name}`](#{m.name.replace('_', '-')}) | {_code_cell(m.formula)} |"
                for m in metrics
            ),
            "",
            "Every example on this page runs on these frames:",
            "",
            "```python exec",
            setup(example(m) for m in metrics).rstrip("\n"),
            "```",
            "",
        ]
        for metric in metrics:
            lines += list(_metric_section(metric, options, own_pages))
        pages[page_path(family)] = "\n".join(lines) + "\n"
    return pages


def index_page(own_pages: Mapping[str, str] | None = None) -> str:
    """The metrics overview: every metric, the notation and every option.

    ``own_pages``: the metrics with a page of their own and its title, listed first.
    """
    check_formulas()
    options = option_docs()
    own_pages = own_pages or {}
    lines = [
        "# Metrics",
        "",
        "Every metric `frame_metrics` computes, generated from the registry "
        "(`frame_metrics.REGISTRY`) when the site is built: one page per family. Names "
        'work anywhere a metric is named: `metrics=["ndcg", "recall@5"]`, with options '
        '(`"ap(ap_denominator=relevant)@10"`), on the command line (`-m ndcg@10`). '
        f"Without `metrics=`, evaluate computes {', '.join(f'`{m}`' for m in DEFAULT_RANKING)}; "
        "without `k`, a metric named without a cutoff uses k = 10.",
        "",
    ]
    if own_pages:
        lines += [
            "The metrics most reports quote have a page of their own, with their variants "
            "and how each peer library differs, computed side by side: "
            + ", ".join(f"[{title}]({name}.md)" for name, title in own_pages.items())
            + ".",
            "",
        ]
    lines += ["## Every metric {#every-metric}"]
    for family, metrics in families().items():
        page = page_path(family).removeprefix("metrics/")
        lines += [
            "",
            f"### [{family_title(family)}]({page})",
            "",
            "| metric | formula | cutoff | who gets a value | better |",
            "|---|---|---|---|---|",
        ]
        for m in metrics:
            lines.append(
                f"| [`{m.name}`]({page}#{m.name.replace('_', '-')}) "
                f"| {_code_cell(m.formula)} | {'k' if m.takes_k else '—'} "
                f"| [{m.population}](#populations) "
                f"| {'higher' if m.higher_is_better else 'lower'} |"
            )
    lines += [
        "",
        "## Notation {#notation}",
        "",
        "For one user: \\(L\\) is the recommended list in rank order (rank 1 = top), "
        "\\(L[r]\\) the item at rank \\(r\\), \\(L_{:k}\\) the top \\(k\\); \\(R\\) the "
        "relevant items (relevance \\(\\ge\\) `threshold`, default \\(> 0\\)); "
        "\\(\\mathrm{rel}(i)\\) an item's relevance (0 when it has no truth row); "
        "\\(\\mathrm{hits@}k = |L_{:k} \\cap R|\\). Over a `by` group: \\(c_i\\) the number "
        "of users with item \\(i\\) in their top \\(k\\), \\(U\\) the users with a "
        "recommendation, \\(C\\) the catalog. Rating errors: \\(P\\) the (user, item) pairs "
        "with both a rating \\(r_{ui}\\) and a prediction \\(\\hat r_{ui}\\).",
        "",
        "## Who is averaged {#populations}",
        "",
        "| population | who gets a value |",
        "|---|---|",
        *(f"| `{p}` | {cell(text)} |" for p, text in POPULATION.items()),
        "",
        "Means are plain means over the users with a value, reported with `n_users`; "
        "`fm.diagnose(...)` counts who was left out and why.",
        "",
        "## Options {#options}",
        "",
        "Keywords of `fm.evaluate` (and `--options` of the command line); ranking metrics "
        'also take them in a metric string, `"name(option=value)@k"`, for that metric alone. '
        "A `convention=` preset sets several at once: [Conventions and presets](../conventions.md).",
        "",
    ]
    for option, text in options.items():
        choices = CHOICES.get(option)
        default = getattr(MetricOptions(), option, None)
        lines += [f"### `{option}` {{#option-{option.replace('_', '-')}}}", "", text, ""]
        if choices:
            lines += [
                f"Values: {', '.join(f'`{c!r}`' for c in choices)} (default `{choices[0]!r}`).",
                "",
            ]
        elif option != "convention":
            lines += [f"Default: `{default!r}`.", ""]
    return "\n".join(lines) + "\n"
