"""``fm.report`` and ``frame-metrics report`` (definition sheet 12).

What the report shows is checked against the calls it stands for: its means are
``fm.evaluate(..., aggregate=True)``'s, its intervals and comparisons ``fm.compare``'s on
the per-user values, its left-out counts ``fm.diagnose``'s. Then the page is looked at:
headless Chromium renders it at 1,280 and 390 px wide, in the light and the dark
scheme; a probe measures what a reader would see (nothing wider than the window but the
tables' own scroll boxes, the text's contrast, the charts' size) and the screenshot must
show the charts' coloured lines where the probe says they are.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics.api import means_and_per_user
from frame_metrics.reports import Report
from tests import result_matrix
from tests.conftest import Constructor

METRICS = ["ndcg", "recall", "coverage"]
K = [5, 10]


def _three_models(n_users: int = 300) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The synthetic data's two models and a third: personal's lists, reshuffled."""
    recs, truth = fm.datasets.synthetic(n_users=n_users)
    third = recs.filter(pl.col("model") == "personal").with_columns(
        model=pl.lit("shuffled"), rank=pl.col("rank").shuffle(seed=3).over("user")
    )
    return pl.concat([recs, third]), truth


@pytest.fixture(scope="module")
def data() -> tuple[pl.DataFrame, pl.DataFrame]:
    return _three_models()


@pytest.fixture(scope="module")
def built(data: tuple[pl.DataFrame, pl.DataFrame]) -> Report:
    recs, truth = data
    return fm.report(recs, truth, metrics=METRICS, k=K, threshold=4, n_resamples=300, seed=2)


def test_the_report_shows_the_calls_it_stands_for(
    built: Report, data: tuple[pl.DataFrame, pl.DataFrame]
) -> None:
    recs, truth = data
    means = fm.evaluate(recs, truth, metrics=METRICS, k=K, by="model", aggregate=True, threshold=4)
    assert_frame_equal(built.means, means.sort("model"))
    per_user = fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=K, by="model", threshold=4)
    comparison = fm.compare(per_user, n_resamples=300, seed=2, progress=False)
    pairs = comparison.filter(pl.col("model") != pl.col("baseline"))
    assert built.comparison is not None
    assert_frame_equal(built.comparison, pairs)
    for row in comparison.iter_rows(named=True):
        column = f"{row['metric']}@{row['k']}"
        assert built.intervals[(row["model"], column)] == (row["ci_low"], row["ci_high"])
    diagnosed = fm.diagnose(recs, truth, metrics=METRICS, k=K, by="model", threshold=4)
    assert built.diagnostics is not None
    assert built.diagnostics.lines() == diagnosed.lines()
    # The distributions: each model's per-user values summed up; coverage has none.
    assert set(built.distributions) == {"ndcg@5", "ndcg@10", "recall@5", "recall@10"}
    np = pytest.importorskip("numpy")
    for model in ("personal", "popularity", "shuffled"):
        values = per_user.filter(pl.col("model") == model)["ndcg@10"].drop_nulls().to_numpy()
        found = built.distributions["ndcg@10"][model]
        assert found.n == values.size
        assert found.at_0 == (values == 0).sum() / values.size
        for q, value in found.quantiles.items():
            assert value == pytest.approx(np.quantile(values, q), rel=1e-12, abs=1e-15)
        # The CDF's points: a value, and the share of users at or below it (the rank's).
        ordered = np.sort(values)
        assert found.points[0] == (ordered[0], 1 / values.size)
        assert found.points[-1] == (ordered[-1], 1.0)
        for x, share in found.points:
            rank = round(share * values.size) - 1
            assert ordered[rank] == x
    assert built.curves() == {
        "ndcg": [(5, "ndcg@5"), (10, "ndcg@10")],
        "recall": [(5, "recall@5"), (10, "recall@10")],
        "coverage": [(5, "coverage@5"), (10, "coverage@10")],
    }


@pytest.mark.parametrize("case", result_matrix.CASES, ids=[c[0] for c in result_matrix.CASES])
def test_one_pass_gives_the_two_calls_bit_for_bit(case: result_matrix.Case) -> None:
    """The report's means and per-user values (one plan, one batch) are the two calls'.

    Over the result matrix's cases: every family, convention, tie rule, key and option
    it records; the per-user call of the metrics with a value per user (none: corpus).
    """
    call = result_matrix._call(case, _matrix_frames())
    recs, truth = call.pop("recs"), call.pop("truth")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each call's own warnings are tested elsewhere
        means, per_user = means_and_per_user(
            recs.lazy(), None if truth is None else truth.lazy(), **call
        )
        assert_frame_equal(means, fm.evaluate(recs, truth, aggregate=True, **call))
        if case[0] == "corpus":
            assert per_user is None
        else:
            assert per_user is not None
            assert_frame_equal(per_user, fm.evaluate(recs, truth, **call))


_MATRIX: dict[str, pl.DataFrame] = {}


def _matrix_frames() -> dict[str, pl.DataFrame]:
    if not _MATRIX:
        _MATRIX.update(result_matrix.frames())
    return _MATRIX


def test_the_page_holds_every_section_and_loads_nothing(built: Report) -> None:
    page = built.html()
    assert page.startswith("<!doctype html>")
    for section in ("means", "curves", "distributions", "comparison", "left-out", "called"):
        assert f'<section id="{section}">' in page, section
    # Self-contained: no script, no stylesheet or image fetched, no font from elsewhere.
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page
    assert "url(" not in page
    # Three curves (ndcg, recall, coverage) and four distributions, each an inline SVG.
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg"') == 3 + 4
    # The means as the table shows them (4 significant digits), and the versions.
    ndcg = built.means.filter(pl.col("model") == "personal")["ndcg@10"].item()
    assert f"{ndcg:.4g}" in page
    assert f"polars {pl.__version__}" in page
    assert "ndcg(threshold=4)@10" in page  # the metric with its options


def test_markdown_holds_the_same_numbers(built: Report) -> None:
    text = built.markdown()
    assert text.startswith("# Evaluation report\n")
    for heading in ("## Means per model", "## Metric@k", "## Per-user distributions",
                    "## Comparisons", "## Who was left out, and why", "## What was called"):  # fmt: skip
        assert heading in text
    assert built.comparison is not None
    first = built.comparison.row(0, named=True)
    assert f"{first['diff']:.4g} [{first['diff_low']:.4g}, {first['diff_high']:.4g}]" in text
    for label, value in built.diagnostics.lines():  # type: ignore[union-attr]
        assert f"| {label} | {value} |" in text


def test_every_frame_kind_gives_the_same_report(
    constructor: Constructor, data: tuple[pl.DataFrame, pl.DataFrame], built: Report
) -> None:
    recs, truth = data
    got = fm.report(
        constructor(recs), constructor(truth), metrics=METRICS, k=K, threshold=4,
        n_resamples=300, seed=2,
    )  # fmt: skip
    assert_frame_equal(got.means, built.means, check_dtypes=False)
    assert got.comparison is not None
    assert built.comparison is not None
    assert_frame_equal(got.comparison, built.comparison, check_dtypes=False)
    assert got.distributions == built.distributions


def test_buckets_give_the_same_report(
    constructor: Constructor, data: tuple[pl.DataFrame, pl.DataFrame], built: Report
) -> None:
    """evaluate's ``buckets`` reach the evaluation (users in 3 buckets, one after
    another); the diagnosis counts in one pass as always. The same report."""
    recs, truth = data
    got = fm.report(
        constructor(recs), constructor(truth), metrics=METRICS, k=K, threshold=4,
        n_resamples=300, seed=2, buckets=3,
    )  # fmt: skip
    assert_frame_equal(got.means, built.means, check_dtypes=False, check_exact=True)
    assert got.comparison is not None
    assert built.comparison is not None
    assert_frame_equal(got.comparison, built.comparison, check_dtypes=False, check_exact=True)
    assert got.diagnostics is not None
    assert built.diagnostics is not None
    assert got.diagnostics.lines() == built.diagnostics.lines()


def test_from_results_already_computed(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    recs, truth = data
    per_user = fm.evaluate(recs, truth, metrics=["ndcg@10"], by="model", threshold=4)
    shown = fm.report(per_user=per_user, baseline_model="popularity", n_resamples=200)
    assert shown.comparison is not None
    assert shown.comparison["baseline"].unique().to_list() == ["popularity"]
    # Means of the per-user values (no corpus metric to read without recs).
    means = per_user.group_by("model").agg(pl.len().alias("n_users"), pl.col("ndcg@10").mean())
    assert_frame_equal(shown.means, means.sort("model"), check_dtypes=False)
    comparison = fm.compare(per_user, n_resamples=200)
    only = fm.report(comparison=comparison)
    assert only.models == ["personal", "popularity", "shuffled"]
    assert only.distributions == {}
    assert "<svg" not in only.html().split('id="comparison"')[0].split('id="means"')[1]


def test_one_model_and_a_split(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    recs, truth = data
    one = recs.filter(pl.col("model") == "personal").drop("model")
    single = fm.report(one, truth, metrics=["ndcg@10"], threshold=4, n_resamples=100)
    assert single.models == ["all"]
    assert single.comparison is None
    assert "One model: nothing to compare." in single.html()
    interactions = truth.with_columns(time=pl.int_range(pl.len()).over("user"))
    split = fm.split(interactions, "last_n", time="time")
    text = fm.report(one, truth, metrics=["ndcg@10"], split=split, n_resamples=100).markdown()
    assert "## The split" in text
    assert split.report.text() in text


def test_fingerprints_read_the_rows_in_any_order(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    recs, truth = data
    small = recs.filter(pl.col("user") < 40)

    def digests(frame: pl.DataFrame) -> dict[str, Any]:
        shown = fm.report(frame, truth, metrics=["ndcg@5"], n_resamples=50, threshold=4)
        return {f.name: (f.rows, f.users, f.items, f.digest) for f in shown.fingerprints}

    first = digests(small)
    assert first["recs"][:3] == (small.height, small["user"].n_unique(), small["item"].n_unique())
    assert digests(small.reverse()) == first
    changed = small.with_columns(item=pl.col("item") + 10_000)
    assert digests(changed)["recs"][3] != first["recs"][3]
    assert digests(changed)["truth"] == first["truth"]


def test_writes_html_or_markdown_and_refuses_what_it_cannot(
    built: Report, tmp_path: Path, data: tuple[pl.DataFrame, pl.DataFrame]
) -> None:
    assert built.write(tmp_path / "r.html").read_text(encoding="utf-8") == built.html()
    assert built.write(tmp_path / "r.md").read_text(encoding="utf-8") == built.markdown()
    with pytest.raises(fm.InvalidOptionError, match=r"path: expected a file name ending in"):
        built.write(tmp_path / "r.pdf")
    with pytest.raises(fm.InvalidOptionError, match=r"path: expected a file that can be written"):
        built.write(tmp_path / "missing" / "r.html")
    recs, truth = data
    with pytest.raises(fm.InvalidOptionError, match="got neither"):
        fm.report()
    with pytest.raises(fm.InvalidOptionError, match="got both"):
        fm.report(recs, truth, per_user=recs)
    with pytest.raises(fm.InvalidOptionError, match="by: expected the models"):
        fm.report(recs, truth, by="model")
    with pytest.raises(fm.InvalidOptionError, match="alpha: expected a number in"):
        fm.report(recs, truth, alpha=2)
    with pytest.raises(fm.InvalidOptionError, match=r"split: expected fm\.split"):
        fm.report(recs, truth, metrics=["ndcg@5"], split=42, n_resamples=20)


def test_the_command_line_writes_the_report(
    tmp_path: Path, data: tuple[pl.DataFrame, pl.DataFrame]
) -> None:
    recs, truth = data
    recs.write_parquet(tmp_path / "recs.parquet")
    truth.write_csv(tmp_path / "truth.csv")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "frame_metrics", "report", str(tmp_path / "recs.parquet"),
             str(tmp_path / "truth.csv"), *args],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    done = run("-m", "ndcg,recall", "-k", "5,10", "--threshold", "4", "--resamples", "200",
               "--baseline-model", "popularity", "--title", "Ranker v2", "-o",
               str(tmp_path / "r.md"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    direct = fm.report(recs, truth, metrics=["ndcg", "recall"], k=[5, 10], threshold=4,
                       n_resamples=200, baseline_model="popularity", title="Ranker v2")  # fmt: skip
    # The same report but for the time it was generated and the inputs' names.
    assert (
        text.split("## Comparisons")[1].split("## What")[0]
        == direct.markdown().split("## Comparisons")[1].split("## What")[0]
    )
    bad = run("-o", str(tmp_path / "no" / "r.html"))
    assert bad.returncode == 2
    assert "-o: expected a file in an existing directory" in bad.stderr
    folder = tmp_path / "a.html"
    folder.mkdir()
    unwritable = run("-m", "ndcg@5", "--resamples", "20", "-o", str(folder))
    assert unwritable.returncode == 2
    assert "-o: expected a file that can be written" in unwritable.stderr


# --- the page in a browser ------------------------------------------------------------------

#: Measures what a reader sees; reports into <pre id="fm-probe"> for --dump-dom.
_PROBE = """
<script>
(function () {
  function rgb(text) { var m = text.match(/[\\d.]+/g) || [0, 0, 0]; return m.slice(0, 3).map(Number); }
  function lum(c) {
    var a = c.map(function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * a[0] + 0.7152 * a[1] + 0.0722 * a[2];
  }
  function contrast(a, b) { var x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }
  var page = rgb(getComputedStyle(document.body).backgroundColor);
  function of(selector, property) {
    var el = document.querySelector(selector);
    return el ? contrast(rgb(getComputedStyle(el)[property]), page) : null;
  }
  var charts = Array.prototype.map.call(document.querySelectorAll("svg.chart"), function (svg) {
    var r = svg.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height};
  });
  var wide = Array.prototype.filter.call(document.querySelectorAll("main > *, section > *"), function (el) {
    return el.getBoundingClientRect().right > window.innerWidth + 1;
  }).map(function (el) { return el.tagName + "." + el.className; });
  var series = [0, 1, 2].map(function (i) {
    var el = document.querySelector(".legend .s" + i + " i");
    return el ? contrast(rgb(getComputedStyle(el).backgroundColor), page) : null;
  });
  var report = {
    inner: window.innerWidth, scroll: document.documentElement.scrollWidth, wide: wide,
    page: page, dark: lum(page) < 0.2, charts: charts, series: series,
    text: of("p.note", "color"), body: of("h1", "color"), cell: of("td", "color"),
    label: of("svg .label", "fill"), font: parseFloat(getComputedStyle(document.querySelector("td")).fontSize)
  };
  // The page is in a frame as wide as a phone (a window is at least 500 px wide):
  // the report goes to the window's document, which --dump-dom prints.
  var pre = parent.document.createElement("pre"); pre.id = "fm-probe"; pre.hidden = true;
  pre.textContent = JSON.stringify(report); parent.document.body.appendChild(pre);
})();
</script>
"""


def _render(
    chromium: str, page: Path, tmp: Path, width: int, dark: bool
) -> tuple[dict[str, Any], Any]:
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    shot = tmp / f"shot-{width}-{dark}.png"
    height = 2600
    # A frame of the width under test (srcdoc: the same origin as the window, which the
    # probe reports to), at the window's top left corner.
    wrapper = tmp / f"frame-{width}.html"
    wrapper.write_text(
        '<!doctype html><html><body style="margin:0">'
        f'<iframe style="border:0;display:block;width:{width}px;height:{height}px" srcdoc="'
        f'{html.escape(page.read_text(encoding="utf-8"), quote=True)}"></iframe></body></html>',
        encoding="utf-8",
    )
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", "--disable-background-networking", f"--user-data-dir={tmp / 'p'}",
         f"--window-size={max(width, 500)},{height}", *(["--force-dark-mode"] if dark else []),
         "--virtual-time-budget=5000", f"--screenshot={shot}", "--dump-dom", wrapper.as_uri()],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    found = re.search(r'<pre id="fm-probe" hidden="">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    with image.open(shot) as img:
        pixels = np.asarray(img.convert("RGB"), dtype=np.int16)
    return json.loads(html.unescape(found.group(1))), pixels


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_a_reader_sees_it_in_a_browser(
    built: Report, chromium: str, tmp_path: Path, width: int, dark: bool
) -> None:
    page = tmp_path / "report.html"
    page.write_text(built.html().replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    probe, pixels = _render(chromium, page, tmp_path, width, dark)
    assert probe["dark"] == dark, probe["page"]
    # Nothing is wider than the window: a wide table scrolls in its own box.
    assert probe["scroll"] <= probe["inner"] == width, probe
    assert probe["wide"] == [], probe["wide"]
    # Text readable (WCAG AA: 4.5 for text), series and axis labels distinct (3 for marks).
    for name in ("text", "body", "cell", "label"):
        assert probe[name] >= 4.5, (name, probe[name])
    assert all(c >= 3 for c in probe["series"]), probe["series"]
    assert probe["font"] >= 13, probe["font"]
    # The charts fill their column: at least 330 px wide on a phone, and the first one's
    # pixels hold the three series' coloured lines.
    charts = probe["charts"]
    assert len(charts) == 7
    assert all(c["w"] >= min(330, width - 40) for c in charts), charts
    box = charts[0]
    region = pixels[
        int(box["y"]) : int(box["y"] + box["h"]), int(box["x"]) : int(box["x"] + box["w"])
    ]
    assert region.shape[0] > 150, (box, pixels.shape)
    colour = (region.max(axis=2) - region.min(axis=2)) > 80
    assert colour.mean() > 0.004, f"few coloured marks: {colour.mean():.4f}"
    # Each series' colour is drawn: the legend's swatches' colours appear in the chart.
    background = region[2, 2]
    assert (abs(region - background).sum(axis=2) > 60).mean() > 0.02


def test_default_resamples_shrink_for_very_many_users(
    data: tuple[pl.DataFrame, pl.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 resamples, fewer when resamples x users would pass the cap (at least 200)."""
    recs, truth = data
    per_user = fm.evaluate(recs, truth, metrics=["ndcg@10"], by="model", threshold=4)
    users = int(per_user.group_by("model").len()["len"].max())  # type: ignore[arg-type]

    def drawn(report: Report) -> str:
        return dict(report.called)["comparison"].split("n_resamples=")[1].split(",")[0]

    assert drawn(fm.report(per_user=per_user)) == "1000"
    from frame_metrics import reports

    monkeypatch.setattr(reports, "_DRAWS", 500 * users)
    shown = fm.report(per_user=per_user)
    assert drawn(shown) == "500"
    want = fm.compare(per_user, n_resamples=500, progress=False)
    assert shown.comparison is not None
    assert_frame_equal(shown.comparison, want.filter(pl.col("model") != pl.col("baseline")))
    monkeypatch.setattr(reports, "_DRAWS", 10 * users)
    assert drawn(fm.report(per_user=per_user)) == "200"
