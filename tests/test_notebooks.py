"""The notebooks in ``notebooks/``, executed fresh, top to bottom, in a python3 kernel.

Each notebook runs with ``notebooks/`` as its working directory and this checkout's
``frame_metrics`` first on the kernel's path; any cell error fails the test, and so does
anything written to stderr (warnings). After the last cell a probe cell reads the key
results back as JSON, so the numbers that the notebooks' prose quotes are checked too.

They read MovieLens ml-latest-small as the notebooks do: ``$MOVIELENS_DIR``, else the first
``shared/data/movielens/ml-latest-small`` in ``notebooks/`` or a parent folder. Without it,
the tests skip (the notebooks themselves raise a ``FileNotFoundError`` naming where they
looked). The executed notebooks are not written back: the committed outputs are refreshed by
running them in Jupyter (or with nbclient) by hand.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need nbformat")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need nbclient")
pytest.importorskip("ipykernel", reason="the notebook tests need ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT = 120  # seconds; each notebook runs in well under a minute
PROBE_MARKER = "NOTEBOOK-PROBE "

# The expression each probe cell serialises: key results, by the notebooks' own names.
PROBES = {
    "01_quickstart_polars.ipynb": '{r["model"]: r for r in results.iter_rows(named=True)}',
    "02_quickstart_pandas.ipynb": 'results.set_index("model").to_dict("index")',
    "03_tutorial_reproduction.ipynb": (
        '{**reproduced, "map@10": tutorial_map, "ap": means, "user": ap_per_user.filter('
        'pl.col("userId") == USER).row(0, named=True)}'
    ),
    "04_beyond_accuracy.ipynb": '{r["model"]: r for r in table.iter_rows(named=True)}',
    "05_evaluation_protocol.ipynb": (
        '{"hit_rates": hit_rates.rows(named=True), "splits": by_split.rows(named=True), '
        '"folds": per_fold.rows(named=True), "compare": comparison.filter(pl.col("model") == '
        '"genre").rows(named=True), "windows": by_window.rows(named=True), "lazy": lazy_equal}'
    ),
}


@dataclass(frozen=True)
class Run:
    """An executed notebook: its cells with outputs, and what the probe cell read."""

    notebook: Any
    probe: dict[str, Any]

    def outputs(self) -> list[dict[str, Any]]:
        return [o for cell in self.notebook.cells[:-1] for o in cell.get("outputs", [])]

    def text(self) -> str:
        """Everything the notebook printed or displayed as text."""
        parts = []
        for o in self.outputs():
            if o["output_type"] == "stream":
                parts.append(o["text"])
            elif "data" in o:
                parts.append(o["data"].get("text/plain", ""))
        return "\n".join(parts)

    def images(self) -> int:
        return sum("image/png" in o.get("data", {}) for o in self.outputs())


def _movielens() -> Path | None:
    """The folder the notebooks read, found as they find it, or None."""
    if "MOVIELENS_DIR" in os.environ:
        candidates = [Path(os.environ["MOVIELENS_DIR"])]
    else:
        candidates = [
            p / "shared" / "data" / "movielens" / "ml-latest-small"
            for p in (NOTEBOOKS, *NOTEBOOKS.parents)
        ]
    for folder in candidates:
        if (folder / "ratings.csv").is_file() and (folder / "movies.csv").is_file():
            return folder
    return None


def _execute(name: str, **environment: str) -> Run:
    """Run a notebook fresh, with ``environment`` added to the kernel's."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    probe = f"import json\nprint({PROBE_MARKER!r} + json.dumps({PROBES[name]}, default=float))"
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # keep inline figures
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(environment)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(env=env)  # raises CellExecutionError on any cell error
    lines = [
        line
        for o in notebook.cells[-1].get("outputs", [])
        if o["output_type"] == "stream"
        for line in o["text"].splitlines()
        if line.startswith(PROBE_MARKER)
    ]
    assert len(lines) == 1, f"{name}: the probe cell printed {lines!r}"
    return Run(notebook, json.loads(lines[0].removeprefix(PROBE_MARKER)))


@pytest.fixture(scope="module")
def run() -> Callable[[str], Run]:
    """Execute a notebook once per test module, on first use."""
    if _movielens() is None:
        pytest.skip(
            "MovieLens ml-latest-small not found ($MOVIELENS_DIR, or "
            f"shared/data/movielens/ml-latest-small in {NOTEBOOKS} or a parent folder)"
        )
    done: dict[str, Run] = {}

    def get(name: str) -> Run:
        if name not in done:
            done[name] = _execute(name)
        return done[name]

    return get


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(PROBES)


@pytest.mark.parametrize("name", sorted(PROBES))
def test_committed_with_outputs(name: str) -> None:
    """The committed notebook carries its outputs, executed in order, with no error."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    for cell in code:
        for o in cell.outputs:
            assert o["output_type"] != "error", f"{name}: committed with an error"
            assert not (o["output_type"] == "stream" and o["name"] == "stderr"), (
                f"{name}: committed with stderr output: {o['text']!r}"
            )


@pytest.mark.parametrize("name", sorted(PROBES))
def test_runs_clean(run: Callable[[str], Run], name: str) -> None:
    """No cell fails or writes to stderr, and the figures are embedded as PNG."""
    result = run(name)
    stderr = [
        o["text"]
        for o in result.outputs()
        if o["output_type"] == "stream" and o["name"] == "stderr"
    ]
    assert not stderr, f"{name} wrote to stderr: {stderr!r}"
    expected_figures = {"01": 3, "02": 3, "03": 0, "04": 1, "05": 0}[name[:2]]
    assert result.images() == expected_figures
    assert "MovieLens ml-latest-small: " in result.text()


def _shown(cells: list[Any]) -> list[list[tuple[str, ...]]]:
    """What each code cell shows: its outputs' kind and text (a figure by its kind alone:
    PNG bytes differ between matplotlib builds, the figures are checked on the site)."""
    shown = []
    for cell in cells:
        if cell.cell_type != "code":
            continue
        outputs: list[tuple[str, ...]] = []
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                # A print may reach the notebook in several stream messages (a loaded
                # machine flushes mid-line): what the cell shows is their text joined.
                if outputs and outputs[-1][:2] == ("stream", o["name"]):
                    outputs[-1] = ("stream", o["name"], outputs[-1][2] + o["text"])
                else:
                    outputs.append(("stream", o["name"], o["text"]))
            elif o["output_type"] == "error":
                outputs.append(("error", o["ename"], o["evalue"]))
            else:
                data = o.get("data", {})
                text = tuple(data.get(m, "") for m in ("text/plain", "text/html"))
                outputs.append((o["output_type"], *sorted(data), *text))
        shown.append(outputs)
    return shown


@pytest.mark.parametrize("name", sorted(PROBES))
def test_committed_outputs_are_a_fresh_run(run: Callable[[str], Run], name: str) -> None:
    """The committed notebook shows what a fresh run shows, to the last digit."""
    committed = nbformat.read(NOTEBOOKS / name, as_version=4).cells
    fresh = run(name).notebook.cells[:-1]  # without the probe cell
    assert [c.source for c in fresh] == [c.source for c in committed]
    for i, (got, want) in enumerate(zip(_shown(fresh), _shown(committed), strict=True)):
        assert got == want, f"{name}, code cell {i + 1}"


def test_tutorial_outputs_do_not_depend_on_the_thread_count(run: Callable[[str], Run]) -> None:
    """Notebook 03 prints full-precision means: on one thread (another summation order for
    a parallel float sum) they are the same digits."""
    name = "03_tutorial_reproduction.ipynb"
    one_thread = _execute(name, POLARS_MAX_THREADS="1")
    assert _shown(one_thread.notebook.cells[:-1]) == _shown(run(name).notebook.cells[:-1])


def _close(got: float, expected: float, tol: float) -> bool:
    return math.isclose(got, expected, rel_tol=0.0, abs_tol=tol)


def test_quickstart_polars(run: Callable[[str], Run]) -> None:
    results = run("01_quickstart_polars.ipynb").probe
    assert sorted(results) == ["genre", "popularity", "random"]
    assert {r["n_users"] for r in results.values()} == {591}
    # The values the prose quotes, to the digits it quotes them.
    assert _close(results["popularity"]["precision@10"], 0.056, 5e-4)
    assert _close(results["popularity"]["ndcg@10"], 0.071, 5e-4)
    assert _close(results["genre"]["ndcg@10"], 0.067, 5e-4)
    assert _close(results["popularity"]["hit_rate@10"], 0.31, 5e-3)
    assert _close(results["random"]["precision@10"], 0.0017, 5e-5)
    for metric in ["precision@10", "recall@10", "ndcg@10", "hit_rate@10"]:
        assert results["random"][metric] < results["genre"][metric]
        assert results["random"][metric] < results["popularity"][metric]


def test_pandas_gives_the_polars_numbers(run: Callable[[str], Run]) -> None:
    """Same split and deterministic models: popularity and genre agree to the last bit."""
    polars_results = run("01_quickstart_polars.ipynb").probe
    pandas_results = run("02_quickstart_pandas.ipynb").probe
    assert sorted(pandas_results) == ["genre", "popularity", "random"]
    for model in ["popularity", "genre"]:
        assert pandas_results[model] == {
            k: v for k, v in polars_results[model].items() if k != "model"
        }
    assert pandas_results["random"]["n_users"] == 591
    assert pandas_results["random"]["ndcg@10"] < 0.01


def test_tutorial_reproduction(run: Callable[[str], Run]) -> None:
    result = run("03_tutorial_reproduction.ipynb")
    got = result.probe
    assert got["n_users"] == 593
    for metric, published in [
        ("precision@10", 0.05413153456998314),
        ("recall@10", 0.05583956646876157),
        ("map@10", 0.06409232045825639),
    ]:
        assert math.isclose(got[metric], published, rel_tol=1e-12), metric
        assert f"published {published!r}" in result.text()
    text = result.text()
    assert "precision@10: reproduced 0.0541315345699" in text
    assert "recall@10: reproduced 0.0558395664687" in text
    assert "mean of precision@1..10: reproduced 0.0640923204582" in text
    # The side-by-side AP means and the worked user, as the prose quotes them.
    ap = got["ap"]
    for option, quoted in [("min_k", 0.0323), ("relevant", 0.0237), ("hits", 0.153), ("k", 0.0223)]:
        assert _close(ap[option], quoted, 5e-4), option
    user = got["user"]
    assert user["userId"] == 338
    assert math.isclose(user["min_k"], (1 + 2 / 9) / 3, rel_tol=1e-12)
    assert math.isclose(user["relevant"], (1 + 2 / 9) / 3, rel_tol=1e-12)
    assert math.isclose(user["hits"], (1 + 2 / 9) / 2, rel_tol=1e-12)
    assert math.isclose(user["k"], (1 + 2 / 9) / 10, rel_tol=1e-12)


def test_beyond_accuracy(run: Callable[[str], Run]) -> None:
    table = run("04_beyond_accuracy.ipynb").probe
    pop, genre, rand = table["popularity"], table["genre"], table["random"]
    assert (pop["n_users"], genre["n_users"], rand["n_users"]) == (610, 609, 610)
    n_catalog = 9742
    assert round(pop["coverage@10"] * n_catalog) == 98
    assert round(genre["coverage@10"] * n_catalog) == 124
    assert round(rand["coverage@10"] * n_catalog) == 4287
    assert pop["serendipity@10"] == 0.0  # popularity is its own baseline
    for model in table.values():
        # No test movie is in the user's train ratings: against history, every hit is
        # unexpected, so serendipity is precision.
        assert math.isclose(model["serendipity@10 (history)"], model["precision@10"], rel_tol=1e-12)
    assert genre["personalization@10"] > pop["personalization@10"]
    assert genre["novelty@10"] > pop["novelty@10"]
    assert genre["diversity@10"] < pop["diversity@10"] < rand["diversity@10"]
    assert rand["aplt@10"] > 0.95
    assert max(pop["aplt@10"], genre["aplt@10"]) < 0.01
    assert pop["gini@10"] > genre["gini@10"] > rand["gini@10"]


def test_evaluation_protocol_gives_the_page_numbers(run: Callable[[str], Run]) -> None:
    """Notebook 05 does the steps of docs/protocol.md: every number of the page's tables (as
    polars prints them, 6 decimals) is the notebook's."""
    from tests.test_protocol_page import _tables

    got = run("05_evaluation_protocol.ipynb").probe
    assert got["lazy"] is True
    hit_rates, _, splits, _, per_fold, compare, _, windows = _tables()
    folds = sorted(got["folds"], key=lambda r: (r["model"], r["fold"]))  # as the page prints
    for name, page_rows, rows in [
        ("hit_rates", hit_rates, got["hit_rates"]),
        ("splits", splits, got["splits"]),
        ("per_fold", per_fold, folds),
        ("compare", compare, got["compare"]),
        ("windows", windows, got["windows"]),
    ]:
        assert len(rows) == len(page_rows), name
        for row, shown in zip(rows, page_rows, strict=True):
            for column, text in shown.items():
                value = row[column]
                if isinstance(value, float):
                    assert _close(value, float(text), 5e-7), (name, column, value, text)
                else:
                    assert str(value) == text, (name, column, value, text)
