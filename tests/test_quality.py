"""ruff and mypy --strict are part of the test run, so CI fails on either."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE = [
    d for d in ("frame_metrics", "tests", "bench", "notebooks", "docs/gen") if (ROOT / d).is_dir()
]


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", *CODE],
        [sys.executable, "-m", "ruff", "format", "--check", *CODE],
        [sys.executable, "-m", "mypy", "--strict", "frame_metrics"],
        [sys.executable, "-m", "mypy", "--strict", "tests"],
        [sys.executable, "-m", "mypy", "--strict", "bench"],
        [sys.executable, "-m", "mypy", "--strict", "docs/gen"],
        # The layers contract of pyproject.toml: no module imports a layer above its own.
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
    ],
    ids=[
        "ruff-check",
        "ruff-format",
        "mypy-strict",
        "mypy-strict-tests",
        "mypy-strict-bench",
        "mypy-strict-docs",
        "import-layers",
    ],
)
def test_tool_is_clean(command: list[str]) -> None:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_module_has_future_annotations() -> None:
    for path in [
        *ROOT.glob("frame_metrics/**/*.py"),
        *ROOT.glob("tests/*.py"),
        *ROOT.glob("bench/*.py"),
        *ROOT.glob("docs/gen/*.py"),
    ]:
        text = path.read_text()
        assert "from __future__ import annotations" in text, path


#: numpydoc sections whose entries each document one name (and get its type and default).
_NAMED_SECTIONS = ("Parameters", "Other Parameters", "Attributes")


def _grouped_entries(doc: str) -> list[str]:
    """Entry lines of a named section that document several names at once (``a, b``)."""
    found, section = [], ""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        if line and not line[0].isspace() and underline:
            section = line.strip()
        elif section in _NAMED_SECTIONS and line and not line[0].isspace():
            name = line.split(" : ", 1)[0]
            if "," in name:
                found.append(line)
    return found


def _documented() -> Iterator[tuple[str, object]]:
    """Every function, class and method defined in frame_metrics, by qualified name."""
    import frame_metrics

    for info in pkgutil.walk_packages(frame_metrics.__path__, "frame_metrics."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != info.name:
                continue
            if inspect.isfunction(obj):
                yield f"{info.name}.{name}", obj
            elif inspect.isclass(obj):
                yield f"{info.name}.{name}", obj
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member):
                        yield f"{info.name}.{name}.{attr}", member


def test_docstring_entries_name_one_parameter_each() -> None:
    """A grouped entry ("user, item, rank") is rendered on the API pages as copies of one
    description, each with the first name's type and default: one entry per name."""
    grouped = {
        where: found
        for where, obj in _documented()
        if (found := _grouped_entries(inspect.cleandoc(obj.__doc__ or "")))
    }
    assert not grouped
