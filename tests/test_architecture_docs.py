"""The architecture page (docs/architecture.md) and the README's layout stay true to the code.

The page is written by hand except its diagram and its table of the families' methods,
which docs/gen/gen_architecture.py draws at build time from the import-linter layers
contract of pyproject.toml and from ``frame_metrics.families``. These tests hold the
written parts to the code (every module path exists, every layer of the contract is
described in order, every dotted name resolves) and the generated parts to their sources,
read independently: the contract as import-linter itself parses it, the families as the
package finds them.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from importlinter.contracts.layers import LayerField

from frame_metrics.families import FAMILIES, Family

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "frame_metrics"
SVG = "{http://www.w3.org/2000/svg}"


def _gen() -> ModuleType:
    """docs/gen/gen_architecture.py (the generators import each other by bare names)."""
    folder = str(ROOT / "docs" / "gen")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("gen_architecture")


def _toml(text: str) -> dict[str, Any]:
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    loads = cast("Callable[[str], dict[str, Any]]", importlib.import_module(name).loads)
    return loads(text)


def linter_layers(pyproject: str) -> list[tuple[list[str], bool]]:
    """The layers contract as import-linter parses it: (module names, independent), top first.

    Names in a layer keep the order they are written in (import-linter holds them in a set).
    """
    contracts = _toml(pyproject)["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "layers"]
    layers = []
    for raw in contract["layers"]:
        parsed = LayerField().parse(raw)
        written = [part.strip().strip("()") for part in re.split(r"[|:]", raw)]
        assert sorted(written) == sorted(t.name for t in parsed.module_tails), raw
        layers.append((written, parsed.is_independent))
    return layers


LAYERS = linter_layers((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The text of the ``## title`` section, up to the next ``## `` heading."""
    assert f"\n## {title}\n" in text, title
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    assert re.search(r"^  - Architecture: architecture\.md$", nav, re.M)


def test_every_module_path_the_page_names_exists() -> None:
    paths = re.findall(r"\b((?:frame_metrics|tests|docs)/[\w./]*\w/?)", page())
    assert len(set(paths)) >= 10, paths
    missing = [
        p for p in paths if not (ROOT / p).exists() or (p.endswith("/") and not (ROOT / p).is_dir())
    ]
    assert not missing


def _module(name: str) -> Path:
    """The file or folder of a module of frame_metrics: ``a/b``, ``a.b``, ``a/b.py`` or ``a/``."""
    if name.endswith(".py"):
        return PACKAGE / name
    parts = name.strip("/").replace(".", "/")
    folder, file = PACKAGE / parts, PACKAGE / f"{parts}.py"
    return folder if folder.is_dir() else file


def test_the_layers_section_describes_the_contract_top_to_bottom() -> None:
    """One bullet per layer of the contract, in its order, opening with the layer's modules."""
    layers = section(page(), "Layers")
    bullets = re.findall(r"^- ((?:`[\w/]+`(?:,\s+|\s+and\s+)?)+):", layers, re.M)
    named = [[n.rstrip("/") for n in re.findall(r"`([\w/]+)`", b)] for b in bullets]
    assert named == [modules for modules, _ in LAYERS]
    for modules in named:
        for module in modules:
            assert _module(module).exists(), module


def _resolve(dotted: str) -> object:
    """A dotted name under frame_metrics: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module("frame_metrics." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ModuleNotFoundError(dotted)


def test_every_dotted_name_on_the_page_resolves() -> None:
    """``planner.query``, ``family.Family.per_user``, ``Family.combine``: each is real.

    A name opens with a module of frame_metrics, with ``Family``, or with ``fm`` or ``pl``
    (the package and polars as imported); file names (``pyproject.toml``) are not names.
    """
    import polars as pl

    import frame_metrics as fm

    spans = set(re.findall(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", page()))
    names = sorted(s for s in spans if not re.search(r"\.(py|toml|md|yml|json)$", s))
    modules = {
        p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()
    }
    roots: dict[str, object] = {"Family": Family, "fm": fm, "pl": pl}
    for name in names:
        head, _, rest = name.partition(".")
        if head in roots:
            found = roots[head]
            for attr in rest.split("."):
                found = getattr(found, attr)
        else:
            assert head in modules, f"{name}: name the module it is in"
            _resolve(name)
    assert len(names) >= 30, names


def test_every_family_method_is_described() -> None:
    """Each method of the Family interface is named in the section that explains it."""
    text = section(page(), "The Family interface")
    public = [n for n, v in vars(Family).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert len(public) >= 10
    assert [n for n in public if f"`{n}`" not in text] == []
    assert "<!-- architecture:families -->" in text


# -- the generated parts -------------------------------------------------------------------


def test_the_generator_reads_the_contract_as_import_linter_does(tmp_path: Path) -> None:
    gen = _gen()
    read = gen.contract_layers(ROOT / "pyproject.toml")
    assert [(list(layer.modules), layer.independent) for layer in read] == LAYERS
    # Both delimiters and optional layers, as import-linter's documentation writes them.
    written = """
[tool.importlinter]
root_package = "p"
[[tool.importlinter.contracts]]
name = "other"
type = "forbidden"
source_modules = ["p.a"]
forbidden_modules = ["p.b"]
[[tool.importlinter.contracts]]
name = "layers"
type = "layers"
containers = ["p"]
layers = ["top", "left | right", "(maybe)", "one : two : three", "bottom"]
"""
    path = tmp_path / "pyproject.toml"
    path.write_text(written, encoding="utf-8")
    got = [(list(layer.modules), layer.independent) for layer in gen.contract_layers(path)]
    assert got == linter_layers(written)
    assert got[3] == (["one", "two", "three"], False)


def _diagram() -> ET.Element:
    svg: str = _gen().diagram()
    return ET.fromstring(svg)


def _texts(element: ET.Element) -> list[str]:
    return ["".join(t.itertext()).strip() for t in element.iter(f"{SVG}text")]


def test_the_diagram_draws_every_layer_top_to_bottom() -> None:
    root = _diagram()
    boxes = [g for g in root.iter(f"{SVG}g") if "fm-layer" in g.get("class", "").split()]
    assert len(boxes) == len(LAYERS)
    tops = []
    for box, (modules, independent) in zip(boxes, LAYERS, strict=True):
        shown = [t.rstrip("/") for t in _texts(box)]
        for module in modules:
            assert module in shown, (module, shown)
            # A package is drawn with its slash, a module without.
            assert (module + "/" in _texts(box)) == _module(module).is_dir(), module
        assert ("fm-dependent" in box.get("class", "")) == (not independent)
        rect = box.find(f"{SVG}rect")
        assert rect is not None
        tops.append((float(rect.get("y", "nan")), float(rect.get("height", "nan"))))
    for (y, height), (below, _) in itertools.pairwise(tops):
        assert y + height < below  # each box above the next, not overlapping
    assert "imports only downwards" in " ".join(_texts(root))


def test_the_diagram_puts_every_family_inside_its_layer() -> None:
    root = _diagram()
    (families,) = [
        g
        for g in root.iter(f"{SVG}g")
        if "fm-layer" in g.get("class", "").split() and "families/" in _texts(g)
    ]
    inside = _texts(families)
    assert list(FAMILIES) == [t for t in inside if t in FAMILIES]  # in plan order
    elsewhere = [
        t
        for g in root.iter(f"{SVG}g")
        if "fm-layer" in g.get("class", "").split() and g is not families
        for t in _texts(g)
    ]
    assert not set(FAMILIES) & set(elsewhere)


def test_the_diagram_is_self_contained_and_themed() -> None:
    svg: str = _gen().diagram()
    assert "<script" not in svg
    assert "href" not in svg
    assert re.findall(r"https?://[^\"]+", svg) == ["http://www.w3.org/2000/svg"]
    # Colours come from the theme's palette variables, so light and dark schemes both work.
    assert "var(--md-default-fg-color" in svg
    assert "var(--md-default-bg-color" in svg
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    assert root.find(f"{SVG}title") is not None


def test_the_family_table_says_which_family_implements_what() -> None:
    table: str = _gen().family_table()
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("|")
    ]
    header, _, *body = rows
    assert header[2:] == [f"`{name}`" for name in FAMILIES]
    methods = [
        n for n, v in vars(Family).items() if inspect.isfunction(v) and not n.startswith("_")
    ]
    by_name = {row[0].strip("`"): row for row in body}
    for method in methods:
        row = by_name[method]
        assert row[1], method  # what it answers
        for family, cell in zip(FAMILIES.values(), row[2:], strict=True):
            own = getattr(type(family), method) is not getattr(Family, method)
            assert cell == ("✓" if own else "–"), (method, family.name, cell)
    for attribute in ("name", "rows", "order"):
        row = by_name[attribute]
        cells = [c.strip("`") for c in row[2:]]
        assert cells == [str(getattr(f, attribute)) for f in FAMILIES.values()], attribute


def test_the_page_is_filled_in_at_build_time() -> None:
    text = page()
    assert "<!-- architecture:diagram -->" in text
    filled: str = _gen().fill(text)
    assert "<!-- architecture:" not in filled
    assert filled.count("<svg") == 1
    assert "| `per_user` |" in filled


# -- the README --------------------------------------------------------------------------


def test_readme_layout_names_modules_that_exist_and_links_the_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = section(readme, "Layout")
    assert "(docs/architecture.md)" in layout
    names = re.findall(r"`(\w[\w/.]*|\.\./[\w/.]+)`", layout)
    assert len(names) >= 20
    for name in names:
        if name.startswith("../"):
            continue  # outside the repository (the design notes of the project)
        if name.startswith(("frame_metrics/", "tests/", "docs/")) or name.endswith(".toml"):
            assert (ROOT / name).exists(), name
        else:
            assert _module(name).exists(), name
    for modules, _ in LAYERS:
        assert any(f"`{m}`" in layout or f"`{m}/`" in layout for m in modules), modules
