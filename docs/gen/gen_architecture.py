"""The architecture page's generated parts: the layers diagram and the families' table.

``docs/architecture.md`` is written by hand around two markers that :func:`fill` replaces
when the site is built (``docs/gen/hooks.py``):

- ``<!-- architecture:diagram -->``: :func:`diagram`, an inline SVG of the layers of the
  import-linter ``layers`` contract in ``pyproject.toml`` (the contract ``lint-imports``
  enforces), top to bottom, with the metric families of ``frame_metrics.families`` inside
  theirs. Inline and drawn here, so the site needs no diagram library from the network;
  its colours are the theme's palette variables, so it reads in light and dark schemes.
- ``<!-- architecture:families -->``: :func:`family_table`, each member of the ``Family``
  interface with the first line of its documentation and which family defines its own.

So a new layer, module or family shows on the page without editing it, and
``tests/test_architecture_docs.py`` fails when the written text falls behind.
"""

from __future__ import annotations

import html
import importlib
import inspect
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, cast

from gen_metrics import cell
from griffe_sphinx_roles import without_roles

from frame_metrics.families import FAMILIES, Family

__all__ = ["DIAGRAM", "FAMILY_TABLE", "Layer", "contract_layers", "diagram", "family_table", "fill"]

ROOT = Path(__file__).resolve().parents[2]
DIAGRAM = "<!-- architecture:diagram -->"
FAMILY_TABLE = "<!-- architecture:families -->"


class Layer(NamedTuple):
    """One layer of the contract: its modules as written, and whether they are independent.

    ``a | b``: independent siblings (neither imports the other); ``a : b``: siblings that
    may import each other. A module in parentheses is optional to import-linter; its name
    is kept without them.
    """

    modules: tuple[str, ...]
    independent: bool


def _load_toml(text: str) -> dict[str, Any]:
    # tomllib is in the standard library from Python 3.11; on 3.10 the docs extra installs
    # tomli, the same parser. Imported by name: mypy checks for 3.10, where tomllib is not.
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    loads = cast("Callable[[str], dict[str, Any]]", importlib.import_module(name).loads)
    return loads(text)


def contract_layers(pyproject: Path = ROOT / "pyproject.toml") -> list[Layer]:
    """The layers of the ``layers`` contract of ``[tool.importlinter]``, top first."""
    config = _load_toml(pyproject.read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c.get("type") == "layers"]
    if len(layered) != 1:
        raise RuntimeError(
            f"docs: expected one layers contract in {pyproject.name}'s [tool.importlinter], "
            f"found {len(layered)}"
        )
    layers = []
    for raw in layered[0]["layers"]:
        delimiter = ":" if ":" in raw else "|"
        names = tuple(part.strip().strip("()").strip() for part in raw.split(delimiter))
        layers.append(Layer(names, delimiter == "|"))
    return layers


def _label(module: str, package: Path) -> str:
    """A module's name as drawn: a package ends with ``/``."""
    return f"{module}/" if (package / module).is_dir() else module


# -- the diagram ---------------------------------------------------------------------------

#: Sizes in SVG units (pixels at 100%). Names are drawn in the theme's monospace font at
#: FONT px, whose characters are 0.6 em wide; CHAR leaves room for a wider fallback.
WIDTH = 640
FONT = 12
CHAR = 7.6
CHIP_HEIGHT = 22
CHIP_PAD = 8
GAP = 6
PAD = 8
LAYER_GAP = 8
ARROW_COLUMN = 44

#: Colours from the theme's palette (mkdocs-material), with the light scheme's values as
#: fallbacks when the SVG is shown outside the site. Names sit on the page's background
#: colour, families on the primary colour with its text colour: both pairs are the
#: theme's own, readable in the default and the slate scheme.
STYLE = """
.fm-architecture text{font-size:12px;font-family:var(--md-code-font-family,monospace)}
.fm-architecture .fm-box{fill:var(--md-default-fg-color--lightest,rgba(0,0,0,.07));stroke:var(--md-default-fg-color--lighter,rgba(0,0,0,.32))}
.fm-architecture .fm-dependent>.fm-box{stroke-dasharray:5 3}
.fm-architecture .fm-chip rect{fill:var(--md-default-bg-color,#fff);stroke:var(--md-default-fg-color--light,rgba(0,0,0,.54))}
.fm-architecture .fm-chip text{fill:var(--md-default-fg-color,rgba(0,0,0,.87))}
.fm-architecture .fm-family rect{fill:var(--md-primary-fg-color,#4051b5);stroke:none}
.fm-architecture .fm-family text{fill:var(--md-primary-bg-color,#fff)}
.fm-architecture .fm-arrow{stroke:var(--md-default-fg-color--light,rgba(0,0,0,.54));fill:var(--md-default-fg-color--light,rgba(0,0,0,.54))}
.fm-architecture text.fm-note{font-family:var(--md-text-font-family,sans-serif);fill:var(--md-default-fg-color,rgba(0,0,0,.87))}
"""


class _Chip(NamedTuple):
    label: str
    family: bool


def _chip_width(label: str) -> int:
    return math.ceil(len(label) * CHAR) + 2 * CHIP_PAD


def _rows(chips: list[_Chip], width: int) -> list[list[_Chip]]:
    """The chips in rows that fit ``width``, left to right (a chip wider than it: alone)."""
    rows: list[list[_Chip]] = [[]]
    used = 0
    for chip in chips:
        needed = _chip_width(chip.label) + (GAP if rows[-1] else 0)
        if rows[-1] and used + needed > width:
            rows.append([])
            used, needed = 0, _chip_width(chip.label)
        rows[-1].append(chip)
        used += needed
    return rows


def _chip_svg(chip: _Chip, x: int, y: int) -> str:
    width = _chip_width(chip.label)
    kind = "fm-chip fm-family" if chip.family else "fm-chip"
    return (
        f'<g class="{kind}"><rect x="{x}" y="{y}" width="{width}" height="{CHIP_HEIGHT}" rx="4"/>'
        f'<text x="{x + width / 2:g}" y="{y + CHIP_HEIGHT / 2:g}" text-anchor="middle" '
        f'dominant-baseline="central">{html.escape(chip.label)}</text></g>'
    )


def _chips(layer: Layer, package: Path, families: list[str]) -> list[_Chip]:
    chips = [_Chip(_label(m, package), False) for m in layer.modules]
    if "families" in layer.modules:
        chips += [_Chip(name, True) for name in families]
    return chips


def diagram(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The layers of the contract as an inline SVG: boxes top to bottom, families inside.

    Each layer is a box holding its modules (packages end with ``/``); the families layer
    also holds each family of ``frame_metrics.families.FAMILIES``, in plan order. An arrow
    down the left side: every module imports only the layers below its own.
    """
    layers = contract_layers(pyproject)
    package = ROOT / "frame_metrics"
    families = list(FAMILIES)
    left, right = ARROW_COLUMN, WIDTH - 1
    inner = right - left - 2 * PAD
    parts: list[str] = []
    y = 1
    for layer in layers:
        rows = _rows(_chips(layer, package, families), inner)
        height = len(rows) * CHIP_HEIGHT + (len(rows) - 1) * GAP + 2 * PAD
        kind = "fm-layer" if layer.independent else "fm-layer fm-dependent"
        names = html.escape(" ".join(layer.modules))
        parts.append(f'<g class="{kind}" data-modules="{names}">')
        parts.append(
            f'<rect class="fm-box" x="{left}" y="{y}" width="{right - left}" '
            f'height="{height}" rx="6"/>'
        )
        top = y + PAD
        for row in rows:
            x = left + PAD
            for chip in row:
                parts.append(_chip_svg(chip, x, top))
                x += _chip_width(chip.label) + GAP
            top += CHIP_HEIGHT + GAP
        parts.append("</g>")
        y += height + LAYER_GAP
    bottom = y - LAYER_GAP
    notes = []
    if not all(layer.independent for layer in layers):
        notes.append("Dashed: modules of one layer that may import each other.")
    notes.append("Modules side by side in a solid box do not import each other.")
    notes.append("Filled: the metric families, one module each, in plan order.")
    for note in notes:
        y += FONT + 4
        parts.append(f'<text class="fm-note" x="{left}" y="{y}">{html.escape(note)}</text>')
    height = y + 6
    # The arrow: a line down the left column, its head at the bottom layer.
    middle = ARROW_COLUMN // 2 - 10
    arrow = (
        f'<g class="fm-arrow"><line x1="{middle}" y1="8" x2="{middle}" y2="{bottom - 12}" '
        f'stroke-width="2"/><polygon points="{middle - 6},{bottom - 14} {middle + 6},'
        f'{bottom - 14} {middle},{bottom - 2}" stroke="none"/></g>'
        f'<text class="fm-note" transform="translate({middle + 12},{(bottom + 1) / 2:g}) '
        f'rotate(90)" text-anchor="middle">imports only downwards</text>'
    )
    described = "; ".join(
        (" | " if layer.independent else " : ").join(
            f"{m} ({', '.join(families)})" if m == "families" else m for m in layer.modules
        )
        for layer in layers
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="fm-architecture" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="fm-architecture-title fm-architecture-desc">'
        f'<title id="fm-architecture-title">The layers of frame_metrics, top to bottom: '
        f"each imports only the layers below it</title>"
        f'<desc id="fm-architecture-desc">{html.escape(described)}</desc>'
        f"<style>{STYLE.strip()}</style>" + arrow + "".join(parts) + "</svg>"
    )


# -- the Family interface ------------------------------------------------------------------


def _markdown(doc: str) -> str:
    """The first line of a docstring as Markdown: roles and ````code```` as inline code."""
    first = inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ")
    return re.sub(r"``([^`]+)``", r"`\1`", without_roles(first))


def _attribute_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comments above the class's annotated attributes, by attribute name."""
    docs: dict[str, str] = {}
    comment: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            comment.append(stripped[2:].strip())
            continue
        match = re.match(r"(\w+): ", stripped)
        if match and comment:
            docs[match.group(1)] = " ".join(comment)
        comment = []
    return docs


def family_table() -> str:
    """The ``Family`` interface, member by member, and what each family defines.

    Attributes give each family's value; a method is ``✓`` where the family's class
    defines its own, ``–`` where it keeps the base's (which reads or computes nothing,
    or, for the aggregate, takes the exact mean of each per-user metric).
    """
    families = list(FAMILIES.values())
    header = ["member", "what it answers", *(f"`{f.name}`" for f in families)]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":--", ":--", *(":-:" for _ in families)]) + "|",
    ]
    attributes = _attribute_docs(Family)
    for name in Family.__annotations__:
        values = [cell(f"`{getattr(f, name)}`") for f in families]
        lines.append(f"| `{name}` | {cell(_markdown(attributes[name]))} | {' | '.join(values)} |")
    for name, member in vars(Family).items():
        if not inspect.isfunction(member) or name.startswith("_"):
            continue
        marks = ["✓" if getattr(type(f), name) is not member else "–" for f in families]
        lines.append(
            f"| `{name}` | {cell(_markdown(member.__doc__ or ''))} | {' | '.join(marks)} |"
        )
    return "\n".join(lines) + "\n"


def fill(markdown: str) -> str:
    """The page's markers replaced by the diagram and the table."""
    if DIAGRAM in markdown:
        svg = diagram()
        markdown = markdown.replace(DIAGRAM, f'<div class="fm-diagram">\n{svg}\n</div>')
    if FAMILY_TABLE in markdown:
        markdown = markdown.replace(FAMILY_TABLE, family_table())
    return markdown
