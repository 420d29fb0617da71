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


def quickstart_commands() -> list[str]:
    """The commands of the README's Quickstart block (comments and blank lines left out)."""
    section = README.read_text().split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    assert block, "README.md: Quickstart has no ```bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


#: Each Quickstart command starts by making (or reusing) and activating a virtual
#: environment: Debian's and Ubuntu's Python refuse `pip install` outside one
#: ("externally-managed-environment"), and a new shell would not have it active.
VENV = "python3 -m venv .venv && . .venv/bin/activate && "


def test_quickstart_is_two_commands_in_a_virtual_environment() -> None:
    install, test = quickstart_commands()
    assert install.startswith(VENV), install
    assert install.endswith("python3 -m frame_metrics"), install
    assert test.startswith(VENV), test
    assert test.endswith("&& python3 -m pytest"), test
    for command in (install, test):
        steps = command.split(" && ")
        installs = [s for s in steps if " -m pip install" in s]
        assert installs, command
        # pip runs after the activation, so it installs into .venv.
        assert steps.index(". .venv/bin/activate") < steps.index(installs[0]), command


def test_ci_runs_the_readme_test_command() -> None:
    ci = (README.parent / ".ci" / "run").read_text()
    commands = [line for line in ci.splitlines() if line and not line.lstrip().startswith("#")]
    assert commands[-1] == quickstart_commands()[1]
    assert sum(" -m pip install" in line for line in commands) == 1  # no other install
