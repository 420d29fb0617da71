"""Tests of the harness: fresh processes, limits, memory, before/after, data, tables.

A toy suite (written to a temp dir) has jobs that sleep, allocate, start a child process
or read the ``frame_metrics`` they import; two fake checkouts of the package tell the
sides of a before/after run apart. Run with ``python -m pytest bench/test_harness.py -q``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import AFTER, BEFORE, Result, Settings, Side, Stage

TOY = """
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, {bench!r})

import harness
import peers
from harness import Job, Prepared


def load(data_dir, kind, params):
    if kind == "slow":
        time.sleep(params["load_s"])  # untimed: loading the start frames
    return data_dir, params


def log(data_dir, **fields):
    with open(data_dir / "log.jsonl", "a") as out:
        out.write(json.dumps({{"pid": os.getpid(), **fields}}) + "\\n")


def sleep(inputs):
    data_dir, params = inputs

    def run():
        log(data_dir)
        time.sleep(params["sleep_s"])
        return {{"slept": params["sleep_s"]}}

    return Prepared(run)


def allocate(inputs):
    data_dir, params = inputs
    # Bytes written (not calloc'd), so that every page is resident.
    code = f"b = b'x' * ({{params['mib']}} * 2**20); import time; time.sleep(1.0)"

    def in_child():
        subprocess.run([sys.executable, "-c", code], check=True)
        return {{}}

    def here():
        exec(code)
        return {{}}

    return Prepared(in_child if params["child"] else here)


def version(inputs):
    data_dir, params = inputs
    import frame_metrics

    info = peers.set_default_engine(params.get("engine"))

    def run():
        found = getattr(frame_metrics, "VERSION", 0)  # 0: the real package
        log(data_dir, version=found)
        return {{"version": float(found)}}

    return Prepared(run, info=info)


def make_data(data_dir, params):
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir.parent / "generated.txt", "a") as out:
        out.write("x")
    return {{"rows": params["rows"]}}


import json
import subprocess

JOBS = harness.job_table(
    Job("sleep", "toy", "sleeps", sleep),
    Job("slow-load", "toy", "loads slowly, then sleeps", sleep, "slow"),
    Job("child", "toy", "a child allocates", allocate, tree=True),
    Job("child-unwatched", "toy", "a child allocates, process only", allocate),
    Job("version", "frame_metrics", "reads frame_metrics.VERSION", version),
)
SUITE = harness.Suite("toy", Path(__file__).resolve(), JOBS, "sleep", load, make_data)

if __name__ == "__main__":
    args = harness.parser(SUITE, users="1", repeats=1).parse_args()
    sys.exit(harness.main(SUITE, args, lambda a: [], lambda r, s, a: 0))
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The toy suite, loaded here too (the parent needs its jobs)."""
    path = tmp_path_factory.mktemp("toy") / "toy.py"
    path.write_text(TOY.format(bench=str(Path(__file__).resolve().parent)))
    spec = importlib.util.spec_from_file_location("toy", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_checkout(root: Path, version: int, engine: bool = True) -> Path:
    """A directory holding a ``frame_metrics`` package with ``VERSION = version``."""
    package = root / "frame_metrics"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"VERSION = {version}\n")
    if engine:
        (package / "engine.py").write_text('DEFAULT_ENGINE = "in-memory"\n')
    return root


def run(
    toy: ModuleType,
    job: str,
    tmp_path: Path,
    params: harness.Params,
    sides: list[Side] | None = None,
    **settings: Any,
) -> list[Result]:
    stage = Stage(1, Path("data"), params, [job])
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    sides = sides or [Side(AFTER, harness.ROOT, "this checkout")]
    return harness.run_job(toy.SUITE, toy.JOBS[job], stage, data_dir, sides, Settings(**settings))


def logged(tmp_path: Path) -> list[dict[str, int]]:
    lines = (tmp_path / "data" / "log.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_each_repeat_is_a_fresh_process(toy: ModuleType, tmp_path: Path) -> None:
    (result,) = run(toy, "sleep", tmp_path, {"sleep_s": 0.0}, repeats=3)
    assert result.error == ""
    assert len(result.times) == len(result.peaks) == len(result.wall) == 3
    pids = [entry["pid"] for entry in logged(tmp_path)]
    assert len(set(pids)) == 3
    assert os.getpid() not in pids


def test_loading_is_untimed_and_the_first_call_is_timed(toy: ModuleType, tmp_path: Path) -> None:
    (result,) = run(toy, "slow-load", tmp_path, {"sleep_s": 0.2, "load_s": 0.6})
    assert 0.2 <= result.times[0] < 0.6
    assert result.wall[0] >= 0.8  # the process: loading + the call (+ the interpreter)
    assert result.values == {"slept": 0.2}


def test_budget_stops_the_repeats(toy: ModuleType, tmp_path: Path) -> None:
    # 0.2 s per run: after two runs (0.4 s) the budget of 0.3 s is spent.
    (result,) = run(toy, "sleep", tmp_path, {"sleep_s": 0.2}, repeats=5, budget=0.3)
    assert len(result.times) == 2


def test_timeout_kills_the_job(toy: ModuleType, tmp_path: Path) -> None:
    start = time.perf_counter()
    (result,) = run(toy, "sleep", tmp_path, {"sleep_s": 60.0}, timeout=1.0)
    assert time.perf_counter() - start < 30
    assert result.error.startswith("no result (timed out after 1s); stderr tail:")
    assert result.times == []


def test_rss_cap_kills_the_job(toy: ModuleType, tmp_path: Path) -> None:
    params = {"mib": 400, "child": False}
    (result,) = run(toy, "child-unwatched", tmp_path, params, max_rss_mib=200.0)
    assert result.error.startswith("no result (killed: RSS above 200 MiB)")
    assert result.times == []
    assert 200 < result.peak_mib < 400  # what the parent saw when it killed the job
    assert len(result.wall) == 1


def test_peak_memory_of_the_process_tree(toy: ModuleType, tmp_path: Path) -> None:
    params = {"mib": 300, "child": True}
    (tree,) = run(toy, "child", tmp_path, params)
    (alone,) = run(toy, "child-unwatched", tmp_path, params)
    assert tree.error == alone.error == ""
    assert tree.peak_mib >= 300  # the child's 300 MiB, sampled while it sleeps
    assert alone.peak_mib < 300  # the job's own process never held them


def test_before_and_after_run_interleaved_on_their_checkouts(
    toy: ModuleType, tmp_path: Path
) -> None:
    after = fake_checkout(tmp_path / "after", 2)
    before = fake_checkout(tmp_path / "before", 1)
    sides = [Side(AFTER, after, "after"), Side(BEFORE, before, "before")]
    results = run(toy, "version", tmp_path, {}, sides, repeats=2)
    assert [(r.side, r.values) for r in results] == [
        (AFTER, {"version": 2.0}),
        (BEFORE, {"version": 1.0}),
    ]
    assert [len(r.times) for r in results] == [2, 2]
    # Each side's repeats alternate: after, before, then before, after.
    assert [entry["version"] for entry in logged(tmp_path)] == [2, 1, 1, 2]
    assert results[0].info["fm_file"] == str(after / "frame_metrics" / "__init__.py")
    assert results[1].info["fm_file"] == str(before / "frame_metrics" / "__init__.py")
    assert [Side(AFTER, after, "").fm_file(), Side(BEFORE, before, "").fm_file()] == [
        results[0].info["fm_file"],
        results[1].info["fm_file"],
    ]
    # A job that is not frame_metrics' runs on this checkout only.
    assert [r.side for r in run(toy, "sleep", tmp_path, {"sleep_s": 0.0}, sides)] == [AFTER]


def test_engine_is_set_on_a_checkout_that_has_it_and_named_where_missing(
    toy: ModuleType, tmp_path: Path
) -> None:
    with_engine = fake_checkout(tmp_path / "with", 1)
    without = fake_checkout(tmp_path / "without", 1, engine=False)
    params = {"engine": "streaming"}
    (ok,) = run(toy, "version", tmp_path, params, [Side(AFTER, with_engine, "")])
    assert ok.error == ""
    assert ok.info["default_engine"] == "in-memory"  # the default it had
    (missing,) = run(toy, "version", tmp_path, params, [Side(AFTER, without, "")])
    package = without / "frame_metrics" / "__init__.py"
    assert missing.error == (
        "RuntimeError: engine 'streaming': expected frame_metrics.engine.DEFAULT_ENGINE, "
        f"not found in the package at {package}"
    )


def test_a_job_importing_another_frame_metrics_fails(toy: ModuleType, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (result,) = run(toy, "version", tmp_path, {}, [Side(AFTER, empty, "")])
    assert result.error.startswith("imported frame_metrics from ")
    assert result.error.endswith(f", not from {empty}")


def test_checkouts_of_a_directory_and_of_a_git_ref(tmp_path: Path) -> None:
    fake = fake_checkout(tmp_path / "fake", 1)
    with harness.checkouts(str(fake / "frame_metrics")) as sides:
        assert [(s.name, s.root) for s in sides] == [(AFTER, harness.ROOT), (BEFORE, fake)]
    with harness.checkouts("HEAD") as sides:
        tree = sides[1].root
        assert (tree / "frame_metrics" / "__init__.py").is_file()
        assert sides[1].fm_file() == str(tree / "frame_metrics" / "__init__.py")
    assert not tree.exists()
    listed = subprocess.run(
        ["git", "-C", str(harness.ROOT), "worktree", "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(tree) not in listed.stdout
    with pytest.raises(SystemExit, match=r"--against: expected a git ref of .* got 'no-such-ref"):
        harness.checkouts("no-such-ref-x").__enter__()


def test_data_is_generated_once_per_parameters(toy: ModuleType, tmp_path: Path) -> None:
    directory = tmp_path / "sets" / "a"
    first = harness.ensure_data(toy.SUITE, directory, {"rows": 3}, 60)
    again = harness.ensure_data(toy.SUITE, directory, {"rows": 3}, 60)
    other = harness.ensure_data(toy.SUITE, directory, {"rows": 4}, 60)
    assert (first["cached"], again["cached"], other["cached"]) == (False, True, False)
    assert (first["rows"], other["rows"]) == (3, 4)
    assert (tmp_path / "sets" / "generated.txt").read_text() == "xx"


def _result(job: str, median: float, side: str = AFTER, **values: float) -> Result:
    return Result(job, 1000, side, times=[median], cpu=[median], peaks=[100.0], values=values)


def test_ratios_are_per_input_row_against_the_named_job(toy: ModuleType) -> None:
    suite = harness.Suite("t", Path("t.py"), {}, "base", toy.load)
    suite.jobs = harness.job_table(
        harness.Job("base", "t", "base", toy.sleep),
        harness.Job("twice", "t", "twice", toy.sleep),
        harness.Job("rows", "t", "three times the rows", toy.sleep, vs="twice", rows=3),
    )
    results = [_result("base", 1.5), _result("twice", 3.0), _result("rows", 6.0)]
    ratios = {row[2]: (row[11], row[12]) for row in harness.timing_table(suite, results)[1:]}
    assert ratios == {
        "base": ("1.00x", "base"),
        "twice": ("2.00x", "base"),  # 3.0 / 1.5
        "three times the rows": ("0.67x", "twice"),  # 6.0 / 3 / 3.0
    }


def test_before_after_table(toy: ModuleType) -> None:
    results = [
        _result("version", 1.0, AFTER, a=1.0, b=2.0),
        _result("version", 4.0, BEFORE, a=1.0, b=2.5),
        _result("sleep", 1.0, AFTER, a=1.0),
    ]
    (head, row) = harness.before_after_table(toy.SUITE, results)
    assert dict(zip(head, row, strict=True)) == {
        "users": "1,000",
        "job": "version",
        "before s": "4.000",
        "after s": "1.000",
        "after/before": "0.25x",
        "before MiB": "100",
        "after MiB": "100",
        "runs": "1 + 1",
        "values": "max |diff| 5.0e-01",
    }


def test_options_reach_the_jobs(toy: ModuleType, tmp_path: Path) -> None:
    # The data's parameters and the jobs' options (e.g. Spark partitions) are merged.
    stage = Stage(1, Path("data"), {"sleep_s": 0.0}, ["slow-load"], options={"load_s": 0.1})
    (tmp_path / "data").mkdir()
    sides = [Side(AFTER, harness.ROOT, "")]
    job = toy.JOBS["slow-load"]
    (result,) = harness.run_job(toy.SUITE, job, stage, tmp_path / "data", sides, Settings())
    assert (result.error, result.values) == ("", {"slept": 0.0})
