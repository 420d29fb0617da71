"""Every Python code block of the README runs as written, top to bottom, in one namespace.

A reader copies them into a notebook or a script; each block defines what it uses (on
``fm.datasets``) or uses what an earlier block defined. Plots render with matplotlib's
non-interactive Agg backend, where ``plt.show()`` returns at once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    """The fenced ```python blocks of the README, in order."""
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_python_blocks() -> None:
    assert len(python_blocks()) >= 3


def test_every_python_block_runs() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict[str, object] = {"__name__": "__readme__"}
    try:
        for i, block in enumerate(python_blocks()):
            code = compile(block, f"README.md python block {i + 1}", "exec")
            exec(code, namespace)
    finally:
        plt.close("all")
    assert "result" in namespace  # the compare block ran to its end
