"""Every Python code block of the README runs as written, top to bottom, in one namespace.

A reader copies them into a notebook or a script; each block defines what it uses (on
``fm.datasets``) or uses what an earlier block defined. Plots render with matplotlib's
non-interactive Agg backend, where ``plt.show()`` returns at once.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    """The fenced ```python blocks of the README, in order."""
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_python_blocks() -> None:
    assert len(python_blocks()) >= 3


def test_every_python_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    # A reader's own folder: what the blocks write (a report) stays out of the clone.
    monkeypatch.chdir(tmp_path)
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


#: Run in a fresh interpreter: the README's Python blocks (JSON on stdin), in order and in
#: one namespace, where importing a module named in argv[1] fails as it does when it is not
#: installed. Prints, per block, null when it ran, else its error and the last module refused.
_RUN_WITHOUT = r"""
import importlib.abc, json, sys

blocked = set(json.loads(sys.argv[1]))
refused = []


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            refused.append(name.split(".")[0])
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
namespace = {"__name__": "__readme__"}
outcomes = []
for i, block in enumerate(json.loads(sys.stdin.read())):
    refused.clear()
    try:
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
        outcomes.append(None)
    except Exception as error:
        outcomes.append([type(error).__name__, str(error), refused[-1] if refused else None])
print(json.dumps(outcomes))
"""


def _normal(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras() -> dict[str, set[str]]:
    """pyproject's extras: the distributions each installs, this package's extras expanded."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    listed: dict[str, list[str]] = project["optional-dependencies"]
    extras: dict[str, set[str]] = {}
    for extra in listed:
        todo, seen, found = [extra], set(), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for requirement in listed[name]:
                match = re.match(r"([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?", requirement)
                assert match, requirement
                if _normal(match.group(1)) == _normal(project["name"]):
                    todo += [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
                else:
                    found.add(_normal(match.group(1)))
        extras[extra] = found
    return extras


def test_each_block_runs_after_the_first_command_or_names_its_extra(tmp_path: Path) -> None:
    """Quickstart's first command installs polars and the package alone. A block that needs
    more (pandas, duckdb, numpy, matplotlib, dask) says which extra brings it, in the block
    itself (``pip install '.[pandas]'``): a reader who copies only the block still sees it.
    Here every module an extra installs is refused on import, as after that command."""
    import importlib.metadata

    extras = _extras()
    from_extras = set().union(*extras.values())
    modules = importlib.metadata.packages_distributions()
    blocked = sorted(
        module
        for module, distributions in modules.items()
        if {_normal(d) for d in distributions} & from_extras
    )
    assert {"pandas", "pyarrow", "numpy", "duckdb"} <= set(blocked)
    blocks = python_blocks()
    done = subprocess.run(
        [sys.executable, "-c", _RUN_WITHOUT, json.dumps(blocked)],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        # A reader's own folder: what the blocks write (a report) stays out of the clone.
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(outcomes) == len(blocks)
    assert outcomes[0] is None, f"the first block needs an extra: {outcomes[0]}"
    for i, (block, outcome) in enumerate(zip(blocks, outcomes, strict=True)):
        if outcome is None:
            continue
        error, message, module = outcome
        assert error in {"ModuleNotFoundError", "ImportError"}, (i + 1, error, message)
        assert module is not None, (i + 1, message)
        needed = {_normal(d) for d in modules[module]}
        named = re.findall(r"pip install '\.\[([a-z]+)\]'", block)
        assert any(needed & extras[extra] for extra in named), (
            f"README.md python block {i + 1} needs {module} ({message}): "
            f"it should say pip install '.[extra]' with an extra that installs it, "
            f"it names {named}"
        )
