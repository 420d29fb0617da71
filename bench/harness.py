"""The one benchmark harness: jobs in fresh processes, peak memory, tables, targets.

A suite (``ranking.py``, ``beyond.py``, ``scale.py``, ``distributed.py``, ``compare.py``)
declares a :class:`Suite`: its jobs, how to make and load its data, and its own tables;
this module runs it.

- **A job** is a function run in a fresh ``python`` process: the process loads the
  job's start frames (untimed: ``pl.read_parquet`` of data generated once and cached in
  ``--data-dir``, so frames come as users get them), prepares the tool (its imports,
  untimed) and times the first call. ``--repeats`` runs are that many fresh processes,
  so no run profits from a warm cache, a compiled kernel or memory left by the one
  before; fewer once the runs add up to ``--budget`` seconds.
- **Memory** is the peak RSS of the job's process, ``VmHWM`` read by the process itself
  after the timed call (it sees native allocations that ``tracemalloc`` misses, and
  unlike ``ru_maxrss`` it does not start from the parent's peak), or, for jobs that
  start workers (Spark's JVM, Dask's processes), the largest sum of the RSS of the whole
  process tree, sampled by the parent. ``data MiB`` is the RSS after loading the start
  frames, before the tool is imported.
- **Limits**: a job is killed with its process group after ``--timeout`` seconds, or
  when its RSS passes ``--max-rss-mib`` (the machine has no swap).
- **Results**: median, best and first time, CPU time, ratios against a named baseline
  job, ``--json``, plain or ``--markdown`` tables, targets (PASS/FAIL rows) and agreement
  checks (the exit code is 1 on a mismatch).
- **Before/after in one run**: ``--against REF`` runs every frame_metrics job a second
  time against another checkout of the package (a ``git worktree`` of the ref in a temp
  dir, or a directory), interleaved with this checkout's runs, and reports both medians
  and the after/before ratio. Each side's checkout is put first on the ``PYTHONPATH`` of
  its jobs' processes; the header names the ``frame_metrics.__file__`` each side
  imports, and a job that imported the package from elsewhere is reported as failed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: The checkout this file belongs to: its ``frame_metrics`` is the one benchmarked.
ROOT = Path(__file__).resolve().parents[1]
RESULT_MARK = "BENCH-RESULT "
#: The two sides of a before/after run: this checkout, and the one of ``--against``.
AFTER, BEFORE = "after", "before"

Values = dict[str, float]
Params = dict[str, Any]


# --------------------------------------------------------------------------------------
# What a suite declares
# --------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """What a job's process times, and what it calls untimed around it.

    ``run``: the timed call (None: an untimed job, e.g. reference values); ``extras``:
    untimed values computed after it, in the first process only; ``info``: facts shown
    beside the tables (e.g. the package's default engine); ``inner``: timings or peaks
    of the run's own parts, which ``run`` may fill in; ``close``: untimed clean-up (stop a
    Spark session, a Dask cluster).
    """

    run: Callable[[], Values] | None
    extras: Callable[[], Values] | None = None
    info: dict[str, str] = field(default_factory=dict)
    inner: Values = field(default_factory=dict)
    close: Callable[[], None] | None = None


@dataclass(frozen=True)
class Check:
    """Compare a job's value ``label`` with the reference value ``ref``.

    ``matched``: the conventions agree, so the values must be equal; otherwise the row
    documents an expected difference, explained by ``note``.
    """

    label: str
    ref: str
    note: str = ""
    matched: bool = True


@dataclass(frozen=True)
class Job:
    """One (tool, variant): which start frames it loads and what it runs.

    ``kind``: the start frames the suite's loader builds (e.g. ``"polars"``); ``vs``: the
    job whose median is the denominator of this job's ratio (default: the suite's
    baseline); ``timed=False``: one process, values only (references, checks); ``tree``:
    the job starts worker processes, so its memory is the process tree's; ``checks``:
    values compared with the suite's reference values; ``rows``: its input rows relative
    to the baseline's (a per-row ratio); ``tags``: the suite's own groups of jobs.
    """

    name: str
    tool: str
    label: str
    prepare: Callable[[Any], Prepared]
    kind: str = ""
    vs: str = ""
    timed: bool = True
    tree: bool = False
    checks: tuple[Check, ...] = ()
    rows: int = 1
    tags: frozenset[str] = frozenset()
    #: A peer whose pins conflict with this environment's (LensKit needs torch and
    #: pandas < 3) runs in its own: the environment variable naming its Python. Unset,
    #: the job runs here (and fails if the peer is not installed here).
    python_env: str = ""

    @property
    def python(self) -> str:
        """The interpreter of the job's processes: ``python_env``'s, else this one."""
        return (os.environ.get(self.python_env) if self.python_env else None) or sys.executable

    @property
    def on_both_sides(self) -> bool:
        """Whether ``--against`` runs it again on the other checkout: timed fm jobs."""
        return self.timed and self.tool == "frame_metrics"


def job_table(*jobs: Job) -> dict[str, Job]:
    """The jobs by name, in the order given."""
    return {job.name: job for job in jobs}


@dataclass
class Suite:
    """A benchmark: its jobs and how a job's process gets its start frames.

    ``load(data_dir, kind, params)`` builds the start frames of ``kind`` (untimed);
    ``make_data(data_dir, params)`` writes the data once (in a subprocess, so that the
    parent stays small) and returns what to show about it (row counts); None: the suite
    makes its data itself. ``baseline``: the job ratios are taken against by default;
    ``fail_on_error``: a failed job makes the exit code 1 too (not only a mismatch).
    """

    title: str
    script: Path
    jobs: dict[str, Job]
    baseline: str
    load: Callable[[Path, str, Params], Any]
    make_data: Callable[[Path, Params], dict[str, Any]] | None = None
    packages: tuple[str, ...] = ("frame_metrics", "polars", "pandas", "numpy")
    fail_on_error: bool = False


@dataclass
class Stage:
    """The jobs to run on one data set: ``data`` is relative to ``--data-dir``.

    ``params`` make the data (a cached data set is reused for the same ones); the jobs'
    processes get them with ``options``, which change the jobs but not the data.
    """

    users: int
    data: Path
    params: Params
    jobs: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    options: Params = field(default_factory=dict)


@dataclass
class Result:
    """One job on one side at one size: one entry per fresh process in the lists."""

    job: str
    users: int
    side: str = AFTER
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    #: Seconds of each whole process (interpreter start, loading, imports included).
    wall: list[float] = field(default_factory=list)
    #: Peak RSS of each process (of its tree for ``Job.tree``), MiB.
    peaks: list[float] = field(default_factory=list)
    #: Cores kept busy by other processes during each timed call (0: an idle machine).
    other_cores: list[float] = field(default_factory=list)
    base_mib: float = math.nan
    #: ``ru_maxrss`` of the processes, a cross-check only: on Linux it starts from the
    #: parent's peak RSS (carried over fork and exec), so it can only be higher.
    rusage_peak_mib: float = 0.0
    values: Values = field(default_factory=dict)
    extras: Values = field(default_factory=dict)
    inner: Values = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    error: str = ""

    @property
    def median(self) -> float:
        return median(self.times)

    @property
    def peak_mib(self) -> float:
        return max(self.peaks) if self.peaks else math.nan

    @property
    def all_values(self) -> Values:
        return {**self.values, **self.extras}


def median(values: Sequence[float]) -> float:
    """The median, nan for none."""
    return statistics.median(values) if values else math.nan


# --------------------------------------------------------------------------------------
# The job's process
# --------------------------------------------------------------------------------------


def status_kib(name: str, pid: int | str = "self") -> int:
    """A field of ``/proc/PID/status`` in KiB: ``VmRSS`` (now) or ``VmHWM`` (peak); 0 if gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
    return 0


def busy_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (``/proc/stat``), or nan."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return math.nan
    # user nice system idle iowait irq softirq steal: all but idle and iowait.
    ticks = [int(x) for x in fields[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def worker(suite: Suite, name: str, data_dir: Path, params: Params, extras: bool) -> Params:
    """Load the start frames, prepare the tool, time its first call: the report."""
    job = suite.jobs[name]
    inputs = suite.load(data_dir, job.kind, params)
    gc.collect()
    report: Params = {"pid": os.getpid(), "base_kib": status_kib("VmRSS")}
    prepared = job.prepare(inputs)
    if prepared.run is not None:
        gc.collect()
        busy, own = busy_seconds(), time.process_time()
        start = time.perf_counter()
        report["values"] = prepared.run()
        report["time"] = time.perf_counter() - start
        report["cpu"] = time.process_time() - own
        # What the machine's busy time adds beyond this process's own CPU time; not known
        # for a job with workers (their CPU time is not this process's).
        others = max(0.0, (busy_seconds() - busy) - report["cpu"]) / max(report["time"], 1e-9)
        report["other_cores"] = math.nan if job.tree else others
    report["peak_kib"] = status_kib("VmHWM")  # before the untimed extras
    report["extras"] = prepared.extras() if extras and prepared.extras is not None else {}
    report["info"] = prepared.info
    report["inner"] = prepared.inner
    fm = sys.modules.get("frame_metrics")
    report["fm_file"] = str(getattr(fm, "__file__", "") or "")
    if prepared.close is not None:
        prepared.close()
    return report


def print_report(run: Callable[[], Params]) -> int:
    """Run a job (or a generation) and print its report, or its error, as one marked line."""
    try:
        report = run()
    except Exception as exc:  # a failing tool is a row of the tables, not a crash
        traceback.print_exc()
        report = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARK + json.dumps(report), flush=True)
    return 0


# --------------------------------------------------------------------------------------
# The parent: checkouts, data, processes
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """A checkout whose ``frame_metrics`` the jobs import (first on ``PYTHONPATH``)."""

    name: str
    root: Path
    label: str

    def env(self) -> dict[str, str]:
        """The environment of a job's process on this side."""
        paths = [str(self.root), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}

    def fm_file(self) -> str:
        """``frame_metrics.__file__`` as a process of this side imports it."""
        done = subprocess.run(
            [sys.executable, "-c", "import frame_metrics; print(frame_metrics.__file__)"],
            env=self.env(),
            cwd=tempfile.gettempdir(),  # not a directory holding another frame_metrics
            capture_output=True,
            text=True,
            check=False,
        )
        lines = (done.stdout or done.stderr).strip().splitlines()
        return lines[-1] if lines else f"(exit code {done.returncode})"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )


def describe_checkout(root: Path) -> str:
    """The git commit of ``root`` and whether its ``frame_metrics`` has local changes."""
    commit = _git(root, "rev-parse", "--short", "HEAD").stdout.strip()
    if not commit:
        return f"{root} (not a git checkout)"
    dirty = _git(root, "status", "--porcelain", "--", "frame_metrics").stdout.strip()
    return f"{root} (git {commit}{' + uncommitted changes' if dirty else ''})"


def package_root(path: Path) -> Path | None:
    """The directory to put on ``PYTHONPATH`` for ``path`` (a checkout or the package)."""
    path = path.resolve()
    if (path / "frame_metrics" / "__init__.py").is_file():
        return path
    if path.name == "frame_metrics" and (path / "__init__.py").is_file():
        return path.parent
    return None


@contextlib.contextmanager
def checkouts(against: str | None) -> Iterator[list[Side]]:
    """This checkout, and with ``against`` the other one (removed again at the end).

    ``against`` is a directory (a checkout, or the package itself) or a git ref of this
    repository, checked out with ``git worktree add --detach`` into a temp dir.
    """
    after = Side(AFTER, ROOT, describe_checkout(ROOT))
    if not against:
        yield [after]
        return
    root = package_root(Path(against)) if Path(against).is_dir() else None
    if root is not None:
        yield [after, Side(BEFORE, root, describe_checkout(root))]
        return
    with tempfile.TemporaryDirectory(prefix="fm-against-") as tmp:
        tree = Path(tmp) / "checkout"
        added = _git(ROOT, "worktree", "add", "--detach", "--quiet", str(tree), against)
        if added.returncode != 0:
            raise SystemExit(
                f"--against: expected a git ref of {ROOT} or a directory holding "
                f"frame_metrics/, got {against!r} ({added.stderr.strip()})"
            )
        try:
            commit = _git(tree, "rev-parse", "--short", "HEAD").stdout.strip()
            yield [after, Side(BEFORE, tree, f"{against} (git {commit}, worktree {tree})")]
        finally:
            _git(ROOT, "worktree", "remove", "--force", str(tree))


def _subprocess_report(
    cmd: list[str], env: Mapping[str, str], *, timeout: float, max_rss_mib: float, tree: bool
) -> tuple[Params, float, float, float]:
    """Run ``cmd`` in a new process group: (its report, seconds, sampled peak KiB, ru_maxrss KiB).

    The parent samples the RSS while it waits (the process's own, or with ``tree`` the sum
    over the process and all its descendants) and kills the group past ``timeout``
    seconds or ``max_rss_mib`` (0: no cap). The report is ``{"error": ...}`` when the
    process printed none.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=dict(env), start_new_session=True)
        seen_kib, killed, status, usage = 0, "", 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss_kib = tree_rss_kib(proc.pid) if tree else status_kib("VmRSS", proc.pid)
            seen_kib = max(seen_kib, rss_kib, 0 if tree else status_kib("VmHWM", proc.pid))
            if time.perf_counter() - start > timeout:
                killed = f"timed out after {timeout:g}s"
            elif max_rss_mib and rss_kib > max_rss_mib * 1024:
                killed = f"killed: RSS above {max_rss_mib:g} MiB"
            if killed:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    report: Params = json.loads(lines[-1][len(RESULT_MARK) :]) if lines else {}
    if killed or not lines:
        why = killed or (
            "killed (SIGKILL: out of memory?)"
            if proc.returncode == -signal.SIGKILL
            else f"exit code {proc.returncode}"
        )
        report = {"error": f"no result ({why}); stderr tail: {stderr.strip()[-300:]}"}
    return report, seconds, seen_kib, usage.ru_maxrss if usage else 0


def tree_rss_kib(pid: int) -> int:
    """The summed RSS of process ``pid`` and all its descendants, KiB (0 once gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += proc.memory_info().rss
    return total // 1024


@dataclass(frozen=True)
class Settings:
    """How jobs run: fresh processes per job, a time budget, limits."""

    repeats: int = 1
    budget: float = 60.0
    timeout: float = 600.0
    max_rss_mib: float = 0.0
    wait_idle: float = 0.0
    #: What counts as idle for ``wait_idle``: fewer cores kept busy by other processes.
    idle_cores: float = 0.3


def run_process(
    suite: Suite,
    job: Job,
    stage: Stage,
    data_dir: Path,
    side: Side,
    settings: Settings,
    first: bool,
) -> tuple[Params, float, float, float]:
    """One fresh process of ``job`` on ``side``: see :func:`_subprocess_report`."""
    cmd = [job.python, str(suite.script), "--worker", job.name, "--data-dir", str(data_dir)]
    params = {**stage.params, **stage.options}
    cmd += ["--params", json.dumps(params), *(["--extras"] if first else [])]
    return _subprocess_report(
        cmd,
        side.env(),
        timeout=settings.timeout,
        max_rss_mib=settings.max_rss_mib,
        tree=job.tree,
    )


def _record(result: Result, side: Side, report: Params, wall: float, seen: float) -> None:
    """Add one process's report to ``result`` (the first one's values are kept).

    A failed process (killed at the RSS cap, say) still gives its seconds and the peak
    the parent saw.
    """
    if "error" in report:
        result.error = str(report["error"])
        result.wall.append(wall)
        result.peaks += [seen / 1024] if seen else []
        return
    fm_file = report.get("fm_file", "")
    if fm_file and not Path(fm_file).resolve().is_relative_to(side.root.resolve()):
        result.error = f"imported frame_metrics from {fm_file}, not from {side.root}"
        return
    if "time" in report:
        result.times.append(report["time"])
        result.cpu.append(report["cpu"])
        result.other_cores.append(report["other_cores"])
    result.wall.append(wall)
    result.peaks.append(max(report["peak_kib"], seen) / 1024)
    if len(result.wall) == 1:
        result.base_mib = report["base_kib"] / 1024
        result.values = report.get("values", {})
        result.extras = report["extras"]
        result.inner = report["inner"]
        result.info = {**report["info"], **({"fm_file": fm_file} if fm_file else {})}


def wait_for_idle(limit: float, threshold: float = 0.3, window: float = 2.0) -> float:
    """Wait (up to ``limit`` s) until other processes keep < ``threshold`` cores busy.

    Samples the machine's busy time over ``window`` seconds while this process sleeps;
    returns the seconds waited. The ``other load`` column shows how much other processes
    did during each timed call anyway.
    """
    waited = 0.0
    while waited < limit:
        before = busy_seconds()
        time.sleep(window)
        if math.isnan(before) or (busy_seconds() - before) / window < threshold:
            break
        waited += window
    return waited


def run_job(
    suite: Suite, job: Job, stage: Stage, data_dir: Path, sides: Sequence[Side], settings: Settings
) -> list[Result]:
    """Every process of ``job``: ``--repeats`` per side, the sides interleaved.

    The order of the sides alternates from one repeat to the next, so that a drift of
    the machine (another job starting, the CPU warming) weighs on both alike.
    """
    sides = list(sides) if job.on_both_sides else list(sides[:1])
    results = {side.name: Result(job.name, stage.users, side.name) for side in sides}
    for repeat in range(settings.repeats if job.timed else 1):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            result = results[side.name]
            if result.error or sum(result.times) > settings.budget:
                continue
            if settings.wait_idle > 0:
                waited = wait_for_idle(settings.wait_idle, settings.idle_cores)
                if waited:
                    print(f"  (waited {waited:.0f}s for the machine to be idle)", flush=True)
            report, wall, seen, rusage = run_process(
                suite, job, stage, data_dir, side, settings, not result.wall
            )
            result.rusage_peak_mib = max(result.rusage_peak_mib, rusage / 1024)
            _record(result, side, report, wall, seen)
    return list(results.values())


def ensure_data(suite: Suite, directory: Path, params: Params, timeout: float) -> dict[str, Any]:
    """The data of ``params`` in ``directory``: generated once, in a subprocess.

    ``info.json`` is written last, with the parameters: a directory holding it (for the
    same parameters) is reused as it is, anything else is generated again.
    """
    meta = directory / "info.json"
    if meta.exists():
        info: dict[str, Any] = json.loads(meta.read_text())
        if info.get("params") == params:
            return {**info, "cached": True}
    shutil.rmtree(directory, ignore_errors=True)
    cmd = [sys.executable, str(suite.script), "--save-data", "--data-dir", str(directory)]
    cmd += ["--params", json.dumps(params)]
    report, seconds, _, _ = _subprocess_report(
        cmd, os.environ, timeout=timeout, max_rss_mib=0, tree=False
    )
    if "error" in report:
        raise RuntimeError(f"data generation failed: {report['error']}")
    info = {**report, "params": params, "seconds": seconds}
    meta.write_text(json.dumps(info, indent=1))
    return {**info, "cached": False}


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def fmt_s(x: float) -> str:
    """Seconds: three decimals below 10 s, one above; ``-`` for nan."""
    if math.isnan(x):
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_diff(diff: float) -> str:
    """An absolute difference: ``0`` when there is none, else two digits.

    >>> fmt_diff(0.0), fmt_diff(2.5e-13)
    ('0', '2.5e-13')
    """
    return "0" if diff == 0 else f"{diff:.1e}"


def render(rows: Sequence[Sequence[str]], markdown: bool = False) -> str:
    """A plain or markdown table; ``rows[0]`` is the header.

    >>> print(render([["a", "b"], ["1", "x|y"]], markdown=True))
    | a | b |
    |---|---|
    | 1 | x\\|y |
    >>> print(render([["a", "bb"], ["10", "x"]]))
    a   bb
    --  --
    10  x
    """
    if markdown:
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def medians(results: Sequence[Result]) -> dict[tuple[int, str], float]:
    """``(users, job) -> median`` of this checkout's timed results."""
    return {(r.users, r.job): r.median for r in results if r.side == AFTER and r.times}


def ratio(suite: Suite, result: Result, results: Sequence[Result]) -> tuple[float, str]:
    """``result``'s median over its baseline job's at the same size, and that job's name."""
    job = suite.jobs[result.job]
    vs = job.vs or suite.baseline
    base = medians(results).get((result.users, vs), math.nan)
    return result.median / job.rows / base, vs


def timing_table(suite: Suite, results: Sequence[Result]) -> list[list[str]]:
    """One row per timed job of this checkout; ratio = median per input row / its baseline's."""
    head = ["users", "tool", "job", "median s", "best s", "first s", "cpu s", "runs"]
    rows = [[*head, "peak MiB", "data MiB", "peak-data", "ratio", "ratio to", "other load"]]
    for r in results:
        job = suite.jobs[r.job]
        if r.side != AFTER or not job.timed:
            continue
        if r.error:
            rows.append([f"{r.users:,}", job.tool, job.label, "FAILED", *[""] * 9, r.error[:120]])
            continue
        value, vs = ratio(suite, r, results)
        rows.append(
            [
                f"{r.users:,}",
                job.tool,
                job.label,
                fmt_s(r.median),
                fmt_s(min(r.times)),
                fmt_s(r.times[0]),
                fmt_s(median(r.cpu)),
                str(len(r.times)),
                f"{r.peak_mib:,.0f}",
                f"{r.base_mib:,.0f}",
                f"{r.peak_mib - r.base_mib:,.0f}",
                "-" if math.isnan(value) else f"{value:.2f}x",
                vs,
                f"{median(r.other_cores):.2f}".replace("nan", "-"),
            ]
        )
    return rows


def before_after_table(suite: Suite, results: Sequence[Result]) -> list[list[str]]:
    """Per frame_metrics job and size: both sides' medians and peaks, after / before.

    ``values``: the largest difference between the two sides' values (``identical``
    when every value is equal to the bit).
    """
    before = {(r.users, r.job): r for r in results if r.side == BEFORE}
    head = ["users", "job", "before s", "after s", "after/before", "before MiB", "after MiB"]
    rows = [[*head, "runs", "values"]]
    for after in results:
        other = before.get((after.users, after.job))
        if after.side != AFTER or other is None:
            continue
        both = [after, other]
        if any(r.error for r in both):
            errors = "; ".join(f"{r.side}: {r.error[:100]}" for r in both if r.error)
            rows.append([f"{after.users:,}", after.job, *[""] * 6, f"FAILED: {errors}"])
            continue
        shared = [k for k in after.values if k in other.values]
        diff = max((abs(after.values[k] - other.values[k]) for k in shared), default=math.nan)
        rows.append(
            [
                f"{after.users:,}",
                after.job,
                fmt_s(other.median),
                fmt_s(after.median),
                f"{after.median / other.median:.2f}x",
                f"{other.peak_mib:,.0f}",
                f"{after.peak_mib:,.0f}",
                f"{len(other.times)} + {len(after.times)}",
                "identical" if diff == 0 else f"max |diff| {diff:.1e}",
            ]
        )
    return rows


AGREEMENT_HEAD = ["users", "check", "value", "reference", "ref value", "|diff|", "verdict"]


def agreement_row(
    users: int,
    check: str,
    value: float,
    reference: str,
    ref: float,
    *,
    tolerance: float,
    relative: bool = False,
    matched: bool = True,
    note: str = "",
) -> list[str]:
    """A row of an agreement table (:data:`AGREEMENT_HEAD`).

    Equal means ``|diff| <= tolerance`` (times ``max(1, |ref|)`` when ``relative``); a
    matched check that is not equal is a ``MISMATCH`` (the exit code is then 1), an
    unmatched one documents an expected difference.

    >>> agreement_row(10, "P", 0.5, "fm", 0.5 + 2e-9, tolerance=1e-9)[-1]
    'MISMATCH'
    >>> agreement_row(10, "AP", 0.4, "fm", 0.5, tolerance=1e-9, matched=False, note="why")[-1]
    'differs, as expected: why'
    """
    diff = abs(value - ref)
    equal = diff <= tolerance * (max(1.0, abs(ref)) if relative else 1.0)
    if matched:
        verdict = ("identical" if diff == 0 else "equal") if equal else "MISMATCH"
    else:
        verdict = "equal on this data" if equal else "differs, as expected"
    return [
        f"{users:,}",
        check,
        f"{value:.12g}",
        reference,
        f"{ref:.12g}",
        fmt_diff(diff),
        f"{verdict}: {note}" if note else verdict,
    ]


def mismatches(rows: Sequence[Sequence[str]]) -> int:
    """The ``MISMATCH`` rows of an agreement table (its header excluded)."""
    return sum(row[-1].startswith("MISMATCH") for row in rows[1:])


@dataclass(frozen=True)
class Target:
    """A limit on a ratio at each size: the fastest of ``jobs`` (with ``worst``, the
    slowest) over ``vs``, by median seconds per input row (with ``memory``, peak MiB;
    with ``spread``, the spread of the fresh processes' times, (slowest - fastest) /
    median).

    ``at_most``: the ratio must be <= ``limit``, else >= it (``limit`` 0: no verdict);
    ``shown``: the sizes (from, below) whose table has the row; ``applies``: the size
    from which the row is PASS/FAIL, below it ``info``.
    """

    name: str
    jobs: tuple[str, ...]
    vs: str
    limit: float = 0.0
    at_most: bool = True
    applies: int = 0
    shown: tuple[int, int] = (0, sys.maxsize)
    worst: bool = False
    memory: bool = False
    spread: bool = False


def _measure(suite: Suite, target: Target, result: Result) -> float:
    """What ``target`` compares of ``result``: its peak MiB, its spread, or its median
    per input row."""
    if target.memory:
        return result.peak_mib
    if target.spread:
        return (max(result.times) - min(result.times)) / result.median
    return result.median / suite.jobs[result.job].rows


def _ratio(measured: float, base: float) -> float:
    """``measured / base``; of two spreads of 0 (one run each), 1."""
    if base == 0:
        return 1.0 if measured == 0 else math.inf
    return measured / base


def _written(target: Target) -> tuple[Callable[[float], str], str]:
    """How a target's measure is written, and its unit."""
    if target.memory:
        return (lambda x: f"{x:,.0f}"), " MiB"
    if target.spread:
        return (lambda x: f"{x:.2f}"), ""
    return fmt_s, " s"


def targets_table(
    suite: Suite, results: Sequence[Result], targets: Sequence[Target]
) -> list[list[str]]:
    """One row per target and size with the jobs it names: measured, limit, verdict.

    A failed job among a target's ``jobs`` fails the target.
    """
    done = {(r.users, r.job): r for r in results if r.side == AFTER and r.times and not r.error}
    rows = [["users", "target", "measured", "limit", "verdict"]]
    for users in dict.fromkeys(r.users for r in results):
        for t in targets:
            base = done.get((users, t.vs))
            found = [done[(users, j)] for j in t.jobs if (users, j) in done]
            failed = [r.job for r in results if r.users == users and r.job in t.jobs and r.error]
            if base is None or not (found or failed) or not t.shown[0] <= users < t.shown[1]:
                continue
            value = functools.partial(_measure, suite, t)
            pick = (max if t.worst else min)(found, key=value) if found else None
            ratio = _ratio(value(pick), value(base)) if pick else math.nan
            show, unit = _written(t)
            measured = (
                f"{pick.job} {show(value(pick))} / {show(value(base))}{unit}" if pick else "-"
            )
            ok = not failed and (ratio <= t.limit if t.at_most else ratio >= t.limit)
            where = f"at >= {t.applies:,} users"
            rows.append(
                [
                    f"{users:,}",
                    t.name + (f" ({len(failed)} FAILED)" if failed else ""),
                    measured + ("" if math.isnan(ratio) else f" = {ratio:.2f}x"),
                    f"{'<=' if t.at_most else '>='} {t.limit:.2f}x" if t.limit else "",
                    verdict(ok, users >= t.applies, where) if t.limit else "info",
                ]
            )
    return rows


def verdict(ok: bool, applies: bool = True, where: str = "") -> str:
    """``PASS``/``FAIL`` where a target applies, else ``info`` saying where it does.

    >>> verdict(True), verdict(False), verdict(False, False, "at >= 1M users")
    ('PASS', 'FAIL', 'info (fails; the target is at >= 1M users)')
    """
    if applies:
        return "PASS" if ok else "FAIL"
    return f"info ({'passes' if ok else 'fails'}; the target is {where})"


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parser(
    suite: Suite,
    *,
    users: str,
    repeats: int,
    timeout: float = 600.0,
    only: Sequence[str] = ("--only",),
    data: Sequence[str] = ("--data-dir",),
    data_default: Path | None = None,
) -> argparse.ArgumentParser:
    """The options every suite has; a suite adds its own and may rename ``--only``/``--data-dir``."""
    p = argparse.ArgumentParser(description=suite.title)
    p.add_argument("--users", default=users, help="comma-separated sizes, in users")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        *only,
        dest="only",
        default="",
        help=f"comma-separated jobs (the baseline always runs): {', '.join(suite.jobs)}",
    )
    p.add_argument(
        "--repeats", type=int, default=repeats, help="timed runs per job, each a fresh process"
    )
    p.add_argument(
        "--budget", type=float, default=60.0, help="stop repeating a job past this many timed s"
    )
    p.add_argument("--timeout", type=float, default=timeout, help="kill a job after this many s")
    p.add_argument(
        "--max-rss-mib", type=float, default=0.0, help="kill a job above this RSS (0: no cap)"
    )
    p.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="before each process, wait up to this many seconds for other processes to "
        "stop using the CPU (a shared machine)",
    )
    p.add_argument(
        *data,
        dest="data_dir",
        type=Path,
        default=data_default,
        help="keep the generated data here and reuse it (default: a temp dir)",
    )
    p.add_argument(
        "--against",
        metavar="GIT_REF_OR_PATH",
        help="also run every frame_metrics job on this checkout of the package (a git ref "
        "of this repository, or a directory), interleaved; prints both medians",
    )
    p.add_argument("--json", type=Path, help="write all results as JSON here")
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    p.add_argument("--extras", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--save-data", action="store_true", help=argparse.SUPPRESS)
    return p


def parse_sizes(text: str) -> list[int]:
    """``"100000,1000000"`` -> ``[100000, 1000000]`` (duplicates dropped, order kept).

    >>> parse_sizes("2000,1000,2000")
    [2000, 1000]
    """
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--users: expected comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--users: expected sizes >= 1, got {text!r}")
    return list(dict.fromkeys(sizes))


def wanted_jobs(suite: Suite, only: str) -> set[str] | None:
    """The jobs named by ``--only`` (None: all), or SystemExit naming the unknown ones."""
    if not only:
        return None
    wanted = {name.strip() for name in only.split(",") if name.strip()}
    unknown = wanted - set(suite.jobs)
    if unknown:
        raise SystemExit(f"--only: unknown jobs {sorted(unknown)}; known: {', '.join(suite.jobs)}")
    return wanted


def environment(suite: Suite, sides: Sequence[Side]) -> str:
    """The header: Python, package versions, cores, load (as ``uptime``), each side's package."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in suite.packages:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    load = os.getloadavg()
    lines = [
        f"python {sys.version.split()[0]}; {'; '.join(found)}",
        f"{os.cpu_count()} cores; load average (uptime) {', '.join(f'{x:.2f}' for x in load)}",
    ]
    if load[0] > 0.5:
        lines.append(
            f"WARNING: a load of {load[0]:.2f} before the run: other processes compete for "
            "the CPU, so times are inflated (see the 'other load' column)"
        )
    for side in sides:
        lines.append(f"{side.name}: {side.label}; imports frame_metrics from {side.fm_file()}")
    return "\n".join(lines)


def progress(suite: Suite, result: Result) -> str:
    """One line about a finished job."""
    job = suite.jobs[result.job]
    head = f"  {result.job:<28}" + (f" [{result.side}]" if result.side != AFTER else "")
    if result.error:
        return f"{head} FAILED: {result.error}"
    if not job.timed:
        return f"{head} untimed, {len(result.all_values)} values, peak {result.peak_mib:,.0f} MiB"
    return (
        f"{head} median {fmt_s(result.median)}s over {len(result.times)} process(es), "
        f"peak {result.peak_mib:,.0f} MiB"
    )


Report = Callable[[list[Result], list[Stage], argparse.Namespace], int]


def main(
    suite: Suite,
    args: argparse.Namespace,
    plan: Callable[[argparse.Namespace], list[Stage]],
    report: Report,
) -> int:
    """Run a suite from its parsed command line: a job's process, a generation, or a run.

    ``plan`` says which jobs run on which data; ``report`` prints the suite's own tables
    after the timings and returns its number of problems (mismatches): the exit code is
    1 when there are any.
    """
    params: Params = json.loads(args.params)
    if args.worker:
        return print_report(lambda: worker(suite, args.worker, args.data_dir, params, args.extras))
    make = suite.make_data
    if args.save_data and make is not None:
        return print_report(lambda: make(args.data_dir, params))

    stages = plan(args)
    idle = getattr(args, "idle_cores", Settings.idle_cores)
    settings = Settings(
        args.repeats, args.budget, args.timeout, args.max_rss_mib, args.wait_idle, idle
    )
    started = time.perf_counter()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="fm-bench-") as tmp, checkouts(args.against) as sides:
        print(environment(suite, sides), flush=True)
        for stage in stages:
            data_dir = (args.data_dir or Path(tmp)) / stage.data
            if suite.make_data is not None:
                stage.info = ensure_data(suite, data_dir, stage.params, settings.timeout)
            print(f"\n== {stage_line(stage)}", flush=True)
            for name in stage.jobs:
                for result in run_job(suite, suite.jobs[name], stage, data_dir, sides, settings):
                    results.append(result)
                    print(progress(suite, result), flush=True)

    print(
        f"\nTimings (median of up to {args.repeats} fresh processes per job, each timing its "
        "first call after loading the start frames untimed; ratio = median per input row / "
        "the median of the job named in 'ratio to', same size; peak = peak RSS of the job's "
        "process (or process tree), data = its RSS after loading the start frames; other "
        "load = cores other processes kept busy during the timed call, 0 on an idle machine)"
    )
    print(render(timing_table(suite, results), args.markdown))
    if len(sides) > 1:
        print(
            f"\nBefore/after: every frame_metrics job on both checkouts, interleaved "
            f"(before = {sides[1].label}; after = {sides[0].label})"
        )
        print(render(before_after_table(suite, results), args.markdown))
    problems = report(results, stages, args)
    failed = [
        f"{r.job}@{r.users:,}" + (f" [{r.side}]" if r.side != AFTER else "")
        for r in results
        if r.error
    ]
    print(
        f"\n{problems} mismatch(es); {len(failed)} failed job(s)"
        f"{': ' + ', '.join(failed) if failed else ''}; total {time.perf_counter() - started:.0f}s"
    )
    if args.json:
        payload = {"stages": [asdict(s) for s in stages], "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    return 1 if problems or (suite.fail_on_error and failed) else 0


def stage_line(stage: Stage) -> str:
    """What a stage's data holds, e.g. ``5,000 users: 500,000 rec rows (generated in 1.2s)``."""
    counts = [
        f"{value:,} {key.replace('_', ' ')}"
        for key, value in stage.info.items()
        if key not in ("users", "params", "seconds", "cached") and isinstance(value, int)
    ]
    text = f"{stage.users:,} users" + (f": {', '.join(counts)}" if counts else "")
    if "cached" in stage.info:
        how = "cached" if stage.info["cached"] else f"generated in {stage.info['seconds']:.1f}s"
        text += f" ({how})"
    return text
