"""A report a colleague can open: :func:`report` (definition sheet 12).

One self-contained HTML file (styles and charts inline, no script, nothing from the
network; light and dark with the reader's colour scheme; readable from a phone's 390 px
to a desktop's width) and the same as Markdown: the means per model with their
intervals, metric@k curves, per-user distributions, every comparison with its corrected
p-values, who was left out and why (``fm.diagnose``), the split's report when given, and
what was called (metrics with their options after the convention, versions, and each
input's rows, users, items and content hash).

From recommendations and truth, :func:`report` evaluates (the means, then the per-user
values of the metrics that have one), compares (``fm.compare``: against
``baseline_model``, or every pair) and diagnoses; from results already computed
(``per_user=``, ``means=``, ``comparison=``) it shows what they hold.
"""

from __future__ import annotations

import datetime
import hashlib
import html
import importlib.metadata
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from frame_metrics import api
from frame_metrics.compare import compare
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.distributed import to_local
from frame_metrics.errors import InvalidOptionError, InvalidValueError, MissingColumnsError
from frame_metrics.frames import to_lazy
from frame_metrics.metric_names import join_column, joined_column, split_column
from frame_metrics.svg import Series, ecdf_chart, line_chart

__all__ = ["Report", "report"]

#: The model of a result without a model column (one model).
ONE_MODEL = "all"
#: Quantiles of the per-user values shown beside each distribution.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: The suffixes a report is written as, and the format of each.
SUFFIXES = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}
#: The bootstrap's draws (resamples x users) a report's default stays under: the
#: resamples of a report of very many users (at least 200).
_DRAWS = 200_000_000
#: At most this many distributions are drawn (the others are in the quantile table).
MAX_CHARTS = 16


@dataclass(frozen=True)
class Distribution:
    """One model's per-user values of one metric, summed up: what the report shows.

    ``n``: users with a value; ``at_0``: the share of them at 0; ``quantiles``: at
    :data:`QUANTILES` (numpy's linear interpolation); ``points``: the empirical CDF at
    about 200 evenly spaced ranks, (value, share of users at or below it) pairs.
    """

    n: int
    at_0: float | None
    quantiles: dict[float, float | None]
    points: list[tuple[float, float]]

    @staticmethod
    def of(values: pl.Series, steps: int = 200) -> Distribution:
        """The summary of ``values`` (nulls left out)."""
        ordered = values.drop_nulls().cast(pl.Float64).sort()
        n = ordered.len()
        if n == 0:
            return Distribution(0, None, dict.fromkeys(QUANTILES), [])
        ranks = sorted({min(n - 1, round(j * (n - 1) / steps)) for j in range(steps + 1)})
        xs = ordered.gather(ranks).to_list()
        return Distribution(
            n,
            float((ordered == 0).mean()),
            {q: ordered.quantile(q, "linear") for q in QUANTILES},
            [(x, (rank + 1) / n) for x, rank in zip(xs, ranks, strict=True)],
        )


@dataclass(frozen=True)
class Fingerprint:
    """An input's size and content: rows, users, items, and a hash of its rows."""

    name: str
    rows: int
    users: int | None
    items: int | None
    digest: str


@dataclass
class Report:
    """What :func:`report` gathered, and its HTML and Markdown.

    ``means``: a row per model (the ``model`` column, ``n_users``, a column per
    metric); ``intervals``: (model, column) -> (low, high) from ``fm.compare``;
    ``comparison``: ``fm.compare``'s rows of the pairs compared; ``distributions``:
    column -> model -> :class:`Distribution` of its per-user values; ``called``: what was called, as
    (label, value) lines; ``fingerprints``: the inputs'.
    """

    title: str
    model: str
    means: pl.DataFrame
    intervals: dict[tuple[Any, str], tuple[float | None, float | None]]
    comparison: pl.DataFrame | None
    distributions: dict[str, dict[Any, Distribution]]
    diagnostics: Diagnostics | None
    split: Any | None
    called: list[tuple[str, str]]
    fingerprints: list[Fingerprint]
    level: float
    alpha: float
    generated: str = field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
    )

    # -- the parts ---------------------------------------------------------------------

    @property
    def models(self) -> list[Any]:
        """The models, in the order of the means table."""
        return self.means[self.model].to_list()

    @property
    def metric_columns(self) -> list[str]:
        """The means table's metric columns."""
        return [c for c in self.means.columns if c not in (self.model, "n_users")]

    def curves(self) -> dict[str, list[tuple[int, str]]]:
        """Each metric computed at two cutoffs or more: its (k, column) pairs."""
        found: dict[str, list[tuple[int, str]]] = {}
        for column in self.metric_columns:
            name, k = split_column(column)
            if k is not None:
                found.setdefault(name, []).append((k, column))
        return {name: sorted(ks) for name, ks in found.items() if len(ks) > 1}

    def quantiles(self) -> pl.DataFrame:
        """Per metric and model: users with a value, share at 0, and the quantiles."""
        rows = []
        for column, per_model in self.distributions.items():
            for model in [m for m in self.models if m in per_model]:
                found = per_model[model]
                row: dict[str, Any] = {
                    "metric": column,
                    "model": model,
                    "n_users": found.n,
                    "at_0": found.at_0,
                }
                for q in QUANTILES:
                    row[f"p{round(q * 100)}"] = found.quantiles[q]
                rows.append(row)
        return pl.DataFrame(rows)

    # -- HTML --------------------------------------------------------------------------

    def html(self) -> str:
        """The whole report as one HTML document (nothing loaded from elsewhere)."""
        sections = [
            ("means", "Means per model", self._html_means()),
            ("curves", "Metric@k", self._html_curves()),
            ("distributions", "Per-user distributions", self._html_distributions()),
            ("comparison", "Comparisons", self._html_comparison()),
            ("left-out", "Who was left out, and why", self._html_left_out()),
            ("split", "The split", self._html_split()),
            ("called", "What was called", self._html_called()),
        ]
        shown = [(anchor, heading, body) for anchor, heading, body in sections if body]
        nav = "".join(f'<li><a href="#{a}">{html.escape(h)}</a></li>' for a, h, _ in shown)
        body = "".join(
            f'<section id="{a}"><h2>{html.escape(h)}</h2>{b}</section>' for a, h, b in shown
        )
        models = ", ".join(html.escape(str(m)) for m in self.models)
        users = self.means["n_users"].max() if self.means.height else 0
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body><main>"
            f"<header><h1>{html.escape(self.title)}</h1>"
            f'<p class="meta">{len(self.models)} model{"s" if len(self.models) != 1 else ""} '
            f"({models}), {_count(users)} users, {len(self.metric_columns)} metrics. "
            f"Generated {html.escape(self.generated)} by frame_metrics "
            f"{html.escape(_version('frame_metrics'))} (polars {html.escape(pl.__version__)}).</p>"
            f'</header><nav aria-label="sections"><ul>{nav}</ul></nav>{body}</main></body></html>'
        )

    def _legend(self) -> str:
        items = "".join(
            f'<span class="s{i % 8}"><i></i>{html.escape(str(m))}</span>'
            for i, m in enumerate(self.models)
        )
        return f'<div class="legend">{items}</div>'

    def _html_means(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.metric_columns)
        rows = []
        for row in self.means.iter_rows(named=True):
            model = row[self.model]
            cells = []
            for column in self.metric_columns:
                low, high = self.intervals.get((model, column), (None, None))
                interval = (
                    f'<br><span class="ci">[{_num(low)}, {_num(high)}]</span>'
                    if low is not None or high is not None
                    else ""
                )
                cells.append(f"<td>{_num(row[column])}{interval}</td>")
            rows.append(
                f'<tr><th scope="row">{html.escape(str(model))}</th>'
                f"<td>{_count(row['n_users'])}</td>{''.join(cells)}</tr>"
            )
        note = (
            f'<p class="note">Exact means over the users evaluated; in brackets the '
            f"{self.level:.0%} bootstrap percentile interval over users (fm.compare).</p>"
            if self.intervals
            else '<p class="note">Exact means over the users evaluated.</p>'
        )
        return (
            f'{note}<div class="table-wrap"><table><thead><tr><th>model</th><th>users</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )

    def _html_curves(self) -> str:
        curves = self.curves()
        if not curves:
            return ""
        figures = []
        for name, ks in curves.items():
            series = []
            for model in self.models:
                row = self.means.filter(pl.col(self.model) == model).row(0, named=True)
                bands = [self.intervals.get((model, c), (None, None)) for _, c in ks]
                series.append(
                    Series(
                        str(model),
                        [k for k, _ in ks],
                        [row[c] for _, c in ks],
                        [b[0] for b in bands],
                        [b[1] for b in bands],
                    )
                )
            chart = line_chart(f"{name}@k per model", series, "k", f"{name}@k")
            figures.append(
                f"<figure><figcaption>{html.escape(name)}@k</figcaption>{chart}</figure>"
            )
        return (
            '<p class="note">The mean at each cutoff, the band its interval.</p>'
            f'{self._legend()}<div class="charts">{"".join(figures)}</div>'
        )

    def _html_distributions(self) -> str:
        if not self.distributions:
            return ""
        figures = []
        for column, per_model in list(self.distributions.items())[:MAX_CHARTS]:
            chart = ecdf_chart(
                f"{column} per user",
                [(str(m), per_model[m].points if m in per_model else []) for m in self.models],
                column,
            )
            figures.append(
                f"<figure><figcaption>{html.escape(column)}</figcaption>{chart}</figure>"
            )
        table = _html_table(self.quantiles(), count_columns=("n_users",), share_columns=("at_0",))
        return (
            '<p class="note">The share of users at or below each value (empirical CDF): '
            "the mass at 0 is the users with no hit. The quantiles below.</p>"
            f'{self._legend()}<div class="charts">{"".join(figures)}</div>{table}'
        )

    def _html_comparison(self) -> str:
        if self.comparison is None:
            return f'<p class="note">{self._nothing_to_compare()}</p>'
        pairs = self.comparison
        rows = []
        for row in pairs.iter_rows(named=True):
            column = join_column(row["metric"], row["k"])
            p_adj = row["p_ttest_adj"]
            significant = p_adj is not None and p_adj < self.alpha
            direction = "better" if (row["diff"] or 0) > 0 else "worse"
            verdict = f'<span class="sig {direction}">{direction}</span>' if significant else "–"
            rows.append(
                "<tr>"
                f'<th scope="row">{html.escape(column)}</th>'
                f"<td>{html.escape(str(row['model']))}</td>"
                f"<td>{html.escape(str(row['baseline']))}</td>"
                f'<td>{_num(row["diff"])}<br><span class="ci">[{_num(row["diff_low"])}, '
                f"{_num(row['diff_high'])}]</span></td><td>{verdict}</td>"
                f'<td>{_num(row["d_z"])}<br><span class="ci">[{_num(row["d_z_low"])}, '
                f"{_num(row['d_z_high'])}]</span></td>"
                f"<td>{_count(row['wins'])} / {_count(row['ties'])} / {_count(row['losses'])}</td>"
                f"<td>{_p(row['p_ttest_adj'])}</td><td>{_p(row['p_wilcoxon_adj'])}</td>"
                f"<td>{_p(row['p_randomization_adj'])}</td></tr>"
            )
        return (
            f'<p class="note">Each model against its baseline over the users both were '
            f"evaluated on: the mean difference (model − baseline) with its {self.level:.0%} "
            "paired bootstrap interval, the effect size d<sub>z</sub> (mean / sd of the "
            "differences) with its interval, users won / tied / lost, and the p-values of "
            "the paired t-test, Wilcoxon's signed-rank test and the paired randomization "
            f"test, corrected over every comparison. Verdict: corrected t-test p &lt; "
            f"{self.alpha:g}.</p>"
            '<div class="table-wrap"><table><thead><tr><th>metric</th><th>model</th>'
            "<th>baseline</th><th>diff</th><th>verdict</th><th>d<sub>z</sub></th>"
            "<th>won / tied / lost</th><th>p t-test</th><th>p Wilcoxon</th><th>p random.</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )

    def _html_left_out(self) -> str:
        if self.diagnostics is None:
            return ""
        lines = "".join(
            f'<tr><th scope="row">{html.escape(label)}</th><td>{html.escape(value)}</td></tr>'
            for label, value in self.diagnostics.lines()
        )
        return (
            '<p class="note">fm.diagnose: who each mean counts, and what it leaves out.</p>'
            f'<div class="table-wrap"><table class="pairs"><tbody>{lines}</tbody></table></div>'
        )

    def _html_split(self) -> str:
        if self.split is None:
            return ""
        return f"<pre>{html.escape(self.split.text())}</pre>"

    def _html_called(self) -> str:
        lines = "".join(
            f'<tr><th scope="row">{html.escape(label)}</th><td><code>{html.escape(value)}'
            "</code></td></tr>"
            for label, value in self.called
        )
        inputs = ""
        if self.fingerprints:
            rows = "".join(
                f'<tr><th scope="row">{html.escape(f.name)}</th><td>{_count(f.rows)}</td>'
                f"<td>{_count(f.users)}</td><td>{_count(f.items)}</td>"
                f"<td><code>{f.digest}</code></td></tr>"
                for f in self.fingerprints
            )
            inputs = (
                '<h3>Inputs</h3><div class="table-wrap"><table><thead><tr><th>frame</th>'
                "<th>rows</th><th>users</th><th>items</th><th>content hash</th></tr></thead>"
                f"<tbody>{rows}</tbody></table></div>"
                '<p class="note">The hash is of the rows in any order (polars\' row hash, '
                "summed): the same rows give the same hash with the same polars version.</p>"
            )
        return (
            f'<div class="table-wrap"><table class="pairs"><tbody>{lines}</tbody></table>'
            f"</div>{inputs}"
        )

    # -- Markdown ----------------------------------------------------------------------

    def markdown(self) -> str:
        """The report as Markdown: the same tables; the charts as their numbers."""
        out = [
            f"# {self.title}",
            "",
            f"{len(self.models)} model(s) ({', '.join(str(m) for m in self.models)}). Generated "
            f"{self.generated} by frame_metrics {_version('frame_metrics')} (polars "
            f"{pl.__version__}).",
            "",
            "## Means per model",
            "",
        ]
        header = ["model", "users", *self.metric_columns]
        rows = []
        for row in self.means.iter_rows(named=True):
            model = row[self.model]
            cells = [str(model), _count(row["n_users"])]
            for column in self.metric_columns:
                low, high = self.intervals.get((model, column), (None, None))
                interval = f" [{_num(low)}, {_num(high)}]" if low is not None else ""
                cells.append(f"{_num(row[column])}{interval}")
            rows.append(cells)
        out += _md_table(header, rows)
        if self.intervals:
            out += ["", f"In brackets: the {self.level:.0%} bootstrap interval over users."]
        if self.curves():
            out += ["", "## Metric@k", ""]
            for name, ks in self.curves().items():
                out += _md_table(
                    ["model", *(f"{name}@{k}" for k, _ in ks)],
                    [[str(m), *(_num(self._mean(m, c)) for _, c in ks)] for m in self.models],
                )
                out.append("")
        if self.distributions:
            q = self.quantiles()
            out += ["## Per-user distributions", ""]
            out += _md_table(
                q.columns,
                [
                    [
                        _count(v) if c == "n_users" else
                        (f"{v:.1%}" if c == "at_0" and v is not None else
                         (_num(v) if isinstance(v, float) else str(v)))
                        for c, v in row.items()
                    ]
                    for row in q.iter_rows(named=True)
                ],
            )  # fmt: skip
            out.append("")
        out += ["## Comparisons", ""]
        if self.comparison is None:
            out.append(self._nothing_to_compare())
        else:
            out += _md_table(
                ["metric", "model", "baseline", "diff [interval]", "d_z [interval]",
                 "won / tied / lost", "p t-test", "p Wilcoxon", "p randomization"],
                [
                    [
                        join_column(r["metric"], r["k"]),
                        str(r["model"]), str(r["baseline"]),
                        f"{_num(r['diff'])} [{_num(r['diff_low'])}, {_num(r['diff_high'])}]",
                        f"{_num(r['d_z'])} [{_num(r['d_z_low'])}, {_num(r['d_z_high'])}]",
                        f"{_count(r['wins'])} / {_count(r['ties'])} / {_count(r['losses'])}",
                        _p(r["p_ttest_adj"]), _p(r["p_wilcoxon_adj"]),
                        _p(r["p_randomization_adj"]),
                    ]
                    for r in self.comparison.iter_rows(named=True)
                ],
            )  # fmt: skip
            out += ["", "p-values corrected over every comparison; diff = model − baseline."]
        if self.diagnostics is not None:
            out += ["", "## Who was left out, and why", ""]
            out += _md_table(["", "count"], [list(line) for line in self.diagnostics.lines()])
        if self.split is not None:
            out += ["", "## The split", "", "```", self.split.text(), "```"]
        out += ["", "## What was called", ""]
        out += _md_table(["", ""], [[label, f"`{value}`"] for label, value in self.called])
        if self.fingerprints:
            out += [""]
            out += _md_table(
                ["frame", "rows", "users", "items", "content hash"],
                [
                    [f.name, _count(f.rows), _count(f.users), _count(f.items), f"`{f.digest}`"]
                    for f in self.fingerprints
                ],
            )
        return "\n".join(out) + "\n"

    def _nothing_to_compare(self) -> str:
        n = len(self.models)
        return (
            "No model: nothing to compare."
            if n == 0
            else ("One model: nothing to compare." if n == 1 else "No comparison was given.")
        )

    def _mean(self, model: Any, column: str) -> float | None:
        value = self.means.filter(pl.col(self.model) == model)[column]
        return None if value.is_empty() else value.item()

    # -- writing -----------------------------------------------------------------------

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the report: HTML for ``.html``/``.htm``, Markdown for ``.md``."""
        target = Path(path)
        kind = SUFFIXES.get(target.suffix.lower())
        if kind is None:
            raise InvalidOptionError(
                f"expected a file name ending in {', '.join(SUFFIXES)}, got {str(path)!r}",
                option="path",
            )
        text = self.html() if kind == "html" else self.markdown()
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InvalidOptionError(
                f"expected a file that can be written, got {str(path)!r}: {exc.strerror}",
                option="path",
            ) from exc
        return target

    def _repr_html_(self) -> str:
        # In a notebook: the page in a frame of its own, so its styles stay in it.
        return (
            '<iframe style="width:100%;height:640px;border:1px solid #ccc" srcdoc="'
            f'{html.escape(self.html(), quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        return (
            f"Report({self.title!r}: {len(self.models)} models, "
            f"{len(self.metric_columns)} metrics; .html(), .markdown(), .write(path))"
        )


def report(
    recs: object | None = None,
    truth: object | None = None,
    *,
    per_user: object | None = None,
    means: object | None = None,
    comparison: object | None = None,
    diagnostics: Diagnostics | None = None,
    split: Any | None = None,
    model: str = "model",
    user: str | Sequence[str] = "user",
    baseline_model: object | None = None,
    metrics: str | Iterable[str] | None = None,
    k: int | Iterable[int] | None = None,
    level: float = 0.95,
    n_resamples: int | None = None,
    seed: int = 0,
    correction: str = "holm",
    alpha: float = 0.05,
    title: str = "Evaluation report",
    path: str | os.PathLike[str] | None = None,
    **evaluate_kwargs: Any,
) -> Report:
    """A report to share: means with intervals, curves, distributions, comparisons.

    Parameters
    ----------
    recs
        Recommendations (with a ``model`` column for several models), as
        :func:`frame_metrics.evaluate` takes them: evaluated (the means, and the
        per-user values of the metrics that have one), compared and diagnosed here.
        Or leave them out and pass results already computed (``per_user=``, ``means=``,
        ``comparison=``).
    truth
        Truth for ``recs``, as :func:`frame_metrics.evaluate` takes it.
    per_user
        Per-user values (``fm.evaluate``'s default output) with a ``model`` column.
    means
        Means (``fm.evaluate(..., aggregate=True)``); default: from ``per_user``.
    comparison
        ``fm.compare``'s result; default: computed from ``per_user``.
    diagnostics
        ``fm.diagnose``'s result (computed here from ``recs`` and ``truth``).
    split
        A split (``fm.split``'s ``Split`` or ``Folds``, or their ``.report()``): its
        report is shown.
    model
        The model column.
    user
        The user key (for the per-user values and the inputs' counts).
    baseline_model
        Compare every model with this one; default: every pair (``fm.compare``).
    metrics
        The metrics to evaluate, as :func:`frame_metrics.evaluate`'s ``metrics``.
    k
        The cutoffs of the metrics named without one (:func:`frame_metrics.evaluate`'s).
    level
        Confidence level of the intervals (:func:`frame_metrics.compare`'s).
    n_resamples
        Bootstrap resamples and sign flips (:func:`frame_metrics.compare`'s). Default:
        1,000, fewer for very many users (resamples x users at most 2e8, and at least
        200 resamples: 200 at 1M users), so that a report of 1M users takes seconds;
        ``fm.compare``'s own default is 10,000. The report says how many it drew.
    seed
        Seed of the resampling (:func:`frame_metrics.compare`'s).
    correction
        ``"holm"`` or ``"bh"`` (:func:`frame_metrics.compare`'s).
    alpha
        The corrected t-test p-value below which the report calls a difference.
    title
        The report's title.
    path
        Also write it there: ``.html`` (one self-contained file) or ``.md``.
    **evaluate_kwargs
        Passed to :func:`frame_metrics.evaluate` and :func:`frame_metrics.diagnose`
        (``threshold=``, ``train=``, ``convention=`` ...).

    Returns
    -------
    Report
        ``.html()``, ``.markdown()``, ``.write(path)``; a notebook shows the page.

    Examples
    --------
    >>> import frame_metrics as fm
    >>> recs, truth = fm.datasets.synthetic(n_users=200)
    >>> shared = fm.report(recs, truth, metrics=["ndcg", "recall"], k=[5, 10], threshold=4,
    ...                    n_resamples=200)
    >>> shared.models, shared.metric_columns
    (['personal', 'popularity'], ['ndcg@5', 'ndcg@10', 'recall@5', 'recall@10'])
    >>> page = shared.html()
    >>> page.startswith("<!doctype html>"), "<script" in page, page.count("<svg")
    (True, False, 6)
    >>> shared.markdown().splitlines()[0]
    '# Evaluation report'
    """
    if not 0 < alpha < 1:
        raise InvalidOptionError(f"expected a number in (0, 1), got {alpha!r}", option="alpha")
    if "by" in evaluate_kwargs:
        raise InvalidOptionError(
            "expected the models as the report's groups (model=), got by=; evaluate each "
            "segment on its own, or pass per_user= with the segment in the model column",
            option="by",
        )
    called: list[tuple[str, str]] = []
    fingerprints: list[Fingerprint] = []
    if recs is not None:
        if per_user is not None or means is not None or comparison is not None:
            raise InvalidOptionError(
                "expected either recs (and truth) to evaluate, or results (per_user=, "
                "means=, comparison=), got both",
                option="per_user",
            )
        recs_frame = to_lazy(to_local(recs), "recs").lazy
        truth_frame = None if truth is None else to_lazy(to_local(truth), "truth").lazy
        has_model = model in recs_frame.collect_schema().names()
        by = [model] if has_model else None
        common: dict[str, Any] = {"by": by, "user": user, **evaluate_kwargs}
        # The means and the per-user values from one pass: the rows checked once.
        means_frame: pl.DataFrame | None
        means_frame, per_user_frame = api.means_and_per_user(
            recs_frame, truth_frame, metrics=metrics, k=k, **common
        )
        # The inputs were checked above (same frames, same options): the counts skip
        # the checks, and their warnings, said once. fm.diagnose always counts in one
        # pass: evaluate's buckets and progress bar are not its keywords.
        counted = {n: v for n, v in common.items() if n not in ("buckets", "progress")}
        checked = {**counted, "validate": False}
        if diagnostics is None:
            diagnostics = api.diagnose(recs_frame, truth_frame, metrics=metrics, k=k, **checked)
        called += _called(metrics, k, evaluate_kwargs, truth is not None)
        item = str(evaluate_kwargs.get("item", "item"))
        users = [user] if isinstance(user, str) else list(user)
        inputs = {"recs": recs_frame, **({"truth": truth_frame} if truth_frame is not None else {})}
        fingerprints = _fingerprints({**inputs, **_extra_frames(evaluate_kwargs)}, users, item)
        if not has_model:
            means_frame = means_frame.select(pl.lit(ONE_MODEL).alias(model), pl.all())
            if per_user_frame is not None:
                per_user_frame = per_user_frame.with_columns(pl.lit(ONE_MODEL).alias(model))
    else:
        if per_user is None and means is None and comparison is None:
            raise InvalidOptionError(
                "expected recs (and truth) to evaluate, or results to show (per_user=, "
                "means=, comparison=), got neither",
                option="per_user",
            )
        per_user_frame = None if per_user is None else _polars(per_user, "per_user")
        means_frame = None if means is None else _polars(means, "means")
        if per_user_frame is not None and model not in per_user_frame.columns:
            per_user_frame = per_user_frame.with_columns(pl.lit(ONE_MODEL).alias(model))
        if means_frame is not None and model not in means_frame.columns:
            if "n_users" not in means_frame.columns:
                raise MissingColumnsError("means", ["n_users"], means_frame.columns)
            means_frame = means_frame.select(pl.lit(ONE_MODEL).alias(model), pl.all())
        if means_frame is None and per_user_frame is not None:
            means_frame = _means(per_user_frame, model, user)
        called.append(("results", "given (per_user, means, comparison)"))
    comparison_frame = None if comparison is None else _polars(comparison, "comparison")
    if comparison_frame is None and per_user_frame is not None:
        models = per_user_frame[model].unique().to_list()
        if n_resamples is None:
            most = per_user_frame.group_by(model).len()["len"].max() or 1
            n_resamples = min(1000, max(200, _DRAWS // int(most)))  # type: ignore[arg-type]
        comparison_frame = compare(
            per_user_frame,
            baseline_model=baseline_model if len(models) > 1 else models[0] if models else None,
            model=model,
            user=user,
            level=level,
            n_resamples=n_resamples,
            seed=seed,
            correction=correction,  # type: ignore[arg-type]
            progress=False,
        )
    if means_frame is None:
        assert comparison_frame is not None
        means_frame = _means_of_comparison(comparison_frame, model)
    if comparison is not None:
        called.append(("comparison", "given"))
    elif comparison_frame is not None:
        pairs_of = "every pair" if baseline_model is None else f"against {baseline_model!r}"
        called.append(
            (
                "comparison",
                f"{pairs_of}, level={level}, n_resamples={n_resamples}, seed={seed}, "
                f"correction={correction!r}",
            )
        )
    called += [("frame_metrics", _version("frame_metrics")), ("polars", pl.__version__)]
    intervals: dict[tuple[Any, str], tuple[float | None, float | None]] = {}
    pairs = None
    if comparison_frame is not None:
        for row in comparison_frame.iter_rows(named=True):
            column = join_column(row["metric"], row["k"])
            intervals.setdefault((row["model"], column), (row["ci_low"], row["ci_high"]))
        pairs = comparison_frame.filter(pl.col("model") != pl.col("baseline"))
        if pairs.height == 0:
            pairs = None
    distributions: dict[str, dict[Any, Distribution]] = {}
    if per_user_frame is not None:
        keys = {model, *([user] if isinstance(user, str) else user)}
        parts = per_user_frame.partition_by(model, as_dict=True)
        for column in [c for c in per_user_frame.columns if c not in keys]:
            if per_user_frame.schema[column].is_numeric():
                distributions[column] = {
                    key[0]: Distribution.of(part[column]) for key, part in parts.items()
                }
    split_report = None
    if split is not None:
        # A Split's or Folds' report (a property), or a report itself.
        split_report = getattr(split, "report", split)
        if not callable(getattr(split_report, "text", None)):
            raise InvalidOptionError(
                f"expected fm.split's Split or Folds (or its report), got {type(split).__name__}",
                option="split",
            )
    means_frame = means_frame.sort(model)
    built = Report(
        title=title,
        model=model,
        means=means_frame,
        intervals=intervals,
        comparison=pairs,
        distributions=distributions,
        diagnostics=diagnostics,
        split=split_report,
        called=called,
        fingerprints=fingerprints,
        level=level,
        alpha=alpha,
    )
    if path is not None:
        built.write(path)
    return built


def _called(
    metrics: object, k: object, options: Mapping[str, Any], with_truth: bool
) -> list[tuple[str, str]]:
    """What was called: the metrics with their options after the convention, the rest."""
    arguments = api._arguments(
        {**api._DEFAULTS, **{n: v for n, v in options.items() if n in api._DEFAULTS},
         "metrics": metrics, "k": k},
        {n: v for n, v in options.items() if n not in api._DEFAULTS},
    )  # fmt: skip
    spec, _ = api._spec(True if with_truth else None, arguments)
    lines = [("metrics", ", ".join(q.canonical for q in spec.requests))]
    given = {
        n: v for n, v in options.items() if not isinstance(v, (pl.DataFrame, pl.LazyFrame))
        and not hasattr(v, "columns")
    }  # fmt: skip
    if given:
        lines.append(("options", ", ".join(f"{n}={v!r}" for n, v in sorted(given.items()))))
    return lines


def _extra_frames(options: Mapping[str, Any]) -> dict[str, pl.LazyFrame]:
    """The frames among evaluate's keywords (train, catalog, ...), as LazyFrames."""
    out = {}
    for name, value in options.items():
        if (value is not None and hasattr(value, "columns")) or isinstance(value, pl.LazyFrame):
            try:
                out[name] = to_lazy(to_local(value), name).lazy
            except (InvalidOptionError, TypeError):
                continue
    return out


def _fingerprints(
    frames: Mapping[str, pl.LazyFrame], users: list[str], item: str
) -> list[Fingerprint]:
    """Each frame's rows, distinct users and items, and an order-free hash of its rows.

    Collected together (polars runs the frames' passes side by side).
    """
    queries, schemas = [], []
    for frame in frames.values():
        schema = frame.collect_schema()
        names = schema.names()
        exprs = [pl.len().alias("rows"), pl.struct(pl.all()).hash(seed=0).sum().alias("hash")]
        if all(u in names for u in users):
            # One column's distinct values directly: a struct's are slower to count.
            key = pl.col(users[0]) if len(users) == 1 else pl.struct(users)
            exprs.append(key.n_unique().alias("users"))
        if item in names:
            exprs.append(pl.col(item).n_unique().alias("items"))
        queries.append(frame.select(exprs))
        schemas.append(schema)
    out = []
    for name, schema, found in zip(frames, schemas, pl.collect_all(queries), strict=True):
        row = found.row(0, named=True)
        text = f"{schema}|{row['rows']}|{row['hash']}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        out.append(Fingerprint(name, row["rows"], row.get("users"), row.get("items"), digest))
    return out


def _polars(frame: object, name: str) -> pl.DataFrame:
    return to_lazy(to_local(frame), name).lazy.collect()


def _means(per_user: pl.DataFrame, model: str, user: str | Sequence[str]) -> pl.DataFrame:
    """Means per model of per-user values (over the users with a value)."""
    keys = {model, *([user] if isinstance(user, str) else user)}
    metrics = [c for c in per_user.columns if c not in keys and per_user.schema[c].is_numeric()]
    if not metrics:
        raise InvalidValueError(
            "per_user: expected numeric metric columns beside the keys, found none; columns: "
            f"{per_user.columns}",
            frame="per_user",
        )
    return per_user.group_by(model).agg(pl.len().alias("n_users"), pl.col(metrics).mean())


def _means_of_comparison(comparison: pl.DataFrame, model: str) -> pl.DataFrame:
    """Means per model read from a comparison (one row per metric and model)."""
    rows = comparison.with_columns(_column=joined_column()).unique(
        ["model", "_column"], keep="first", maintain_order=True
    )
    wide = rows.pivot("_column", index="model", values="mean")
    users = rows.group_by("model").agg(pl.col("n_users").max())
    return users.join(wide, on="model").rename({"model": model})


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _num(value: object) -> str:
    """A number as the report shows it: 4 significant digits; – when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    number = float(value)  # type: ignore[arg-type]
    if number != 0 and abs(number) < 1e-3:
        return f"{number:.2e}"
    return f"{number:.4g}"


def _count(value: object) -> str:
    return "–" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


def _p(value: object) -> str:
    if value is None:
        return "–"
    number = float(value)  # type: ignore[arg-type]
    return "< 0.001" if number < 0.001 else f"{number:.3g}"


def _html_table(
    frame: pl.DataFrame, *, count_columns: Sequence[str] = (), share_columns: Sequence[str] = ()
) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.iter_rows(named=True):
        cells = []
        for i, (column, value) in enumerate(row.items()):
            if column in count_columns:
                text = _count(value)
            elif column in share_columns:
                text = "–" if value is None else f"{value:.1%}"
            elif isinstance(value, float):
                text = _num(value)
            else:
                text = html.escape(str(value))
            cells.append(f'<th scope="row">{text}</th>' if i == 0 else f"<td>{text}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(" --- " for _ in header) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


#: The page's style: light by default, dark with the reader's scheme; a table wider
#: than the screen scrolls in its box (its first column stays), charts scale down.
_CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;
--soft:#f6f8fa;--accent:#0b5cad;--good:#1a7f37;--bad:#c0362c;--s0:#0b63c5;--s1:#c25400;
--s2:#1b8a5a;--s3:#a2399b;--s4:#7d6400;--s5:#00798f;--s6:#6b4fbb;--s7:#c2185b}
@media (prefers-color-scheme:dark){:root{--bg:#0f1419;--fg:#e6edf3;--muted:#a3aeb9;
--line:#30363d;--soft:#161b22;--accent:#6cb6ff;--good:#56d364;--bad:#ff7b72;--s0:#6cb6ff;
--s1:#ffa657;--s2:#56d364;--s3:#e29ee8;--s4:#e3b341;--s5:#39c5cf;--s6:#b4a1ff;--s7:#ff8cb3}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1160px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.75rem;line-height:1.25;margin:0 0 .3rem}
h2{font-size:1.3rem;margin:2.2rem 0 .6rem;padding-bottom:.3rem;border-bottom:1px solid var(--line)}
h3{font-size:1.05rem;margin:1.4rem 0 .5rem}
.meta,.note{color:var(--muted);font-size:.92rem;max-width:75ch}
nav ul{display:flex;flex-wrap:wrap;gap:.3rem 1.1rem;padding:0;margin:1rem 0;list-style:none}
a{color:var(--accent)}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em;
overflow-wrap:anywhere}
.table-wrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px;margin:.6rem 0}
table{border-collapse:collapse;font-size:.92rem;font-variant-numeric:tabular-nums;width:100%}
th,td{padding:.45rem .65rem;border-bottom:1px solid var(--line);text-align:right;
vertical-align:top;white-space:nowrap}
tr:last-child th,tr:last-child td{border-bottom:none}
thead th{background:var(--soft);font-weight:600}
th:first-child,td:first-child{text-align:left;position:sticky;left:0;background:var(--bg)}
thead th:first-child{background:var(--soft)}
table.pairs td{text-align:left;white-space:normal}
table.pairs th{white-space:normal;width:50%}
.ci{color:var(--muted);font-size:.84em}
.sig{font-weight:600}.sig.better{color:var(--good)}.sig.worse{color:var(--bad)}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,340px),1fr));gap:1rem}
figure{margin:0;padding:.6rem;border:1px solid var(--line);border-radius:6px}
figcaption{font-size:.92rem;font-weight:600;margin-bottom:.2rem}
.legend{display:flex;flex-wrap:wrap;gap:.2rem 1rem;font-size:.9rem;margin:.4rem 0 .8rem}
.legend i{display:inline-block;width:.85em;height:.85em;border-radius:2px;margin-right:.35em;
vertical-align:-.05em;background:var(--c)}
.s0{--c:var(--s0)}.s1{--c:var(--s1)}.s2{--c:var(--s2)}.s3{--c:var(--s3)}
.s4{--c:var(--s4)}.s5{--c:var(--s5)}.s6{--c:var(--s6)}.s7{--c:var(--s7)}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:var(--line);stroke-width:1}svg .axis{stroke:var(--muted);stroke-width:1}
svg .label{fill:var(--muted);font-size:12px;font-family:inherit}
svg .line,svg .step{fill:none;stroke:var(--c);stroke-width:2.2}
svg .dot{fill:var(--c);stroke:var(--bg);stroke-width:1}
svg .band{fill:var(--c);opacity:.2;stroke:none}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--soft);padding:.8rem;
border-radius:6px;font-size:.85rem}
@media (max-width:600px){main{padding:16px 12px 32px}h1{font-size:1.4rem}
table{font-size:.86rem}th,td{padding:.4rem .5rem}}
"""
