"""ruff and mypy --strict are part of the test run, so CI fails on either."""

from __future__ import annotations

import subprocess
import sys
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
    ],
    ids=[
        "ruff-check",
        "ruff-format",
        "mypy-strict",
        "mypy-strict-tests",
        "mypy-strict-bench",
        "mypy-strict-docs",
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
