"""Scale benchmark: ranking metrics over sharded parquet, 100M to 2B recommendation rows.

Run ``python bench/scale.py --users 1000000,10000000`` (see ``--help``). For each size it

1. generates (once) ``DATA/u{users}/recs/part-NNNNN.parquet`` and
   ``DATA/u{users}/truth/part-NNNNN.parquet`` with ``generate.make_data``, one shard of
   ``--shard-users`` users (default 1M, 100M recommendation rows) at a time, each in its
   own subprocess. Shard ``i`` holds users ``i * shard_users ...`` and its numpy seed is
   derived from (``--seed``, ``i``) alone, so a shard is the same whatever the total
   size: the 1M-user data set is the first shard of the 10M one, and a full shard
   already generated for another size is hard-linked instead of generated again.
   Shards already on disk are skipped (an interrupted generation resumes), and each file
   is written beside its destination and renamed into place. Truth has 1..60 graded
   items per user, ~14.5 on average (geometric with mean 16, clipped at 60, repeats
   dropped): ~145M truth rows at 10M users;
2. runs each job in a fresh subprocess, measuring its wall time (interpreter start and
   imports included) and its peak resident memory (``VmHWM``, read by the subprocess
   itself at its end; for a killed job, the highest value the parent saw while polling):

   - ``cli``: ``frame-metrics evaluate DIR/recs DIR/truth -m precision,recall,ap,ndcg,mrr
     -k 10 --format json`` (``frame_metrics.cli.main`` in the subprocess, which is what
     the console script runs);
   - ``fm``: ``fm.evaluate(pl.scan_parquet(recs), pl.scan_parquet(truth), metrics=...,
     k=10, aggregate=True).collect(engine="streaming")``;
   - ``handwritten``: the obvious hand-written polars query of ``bench/ranking.py`` over
     the same scans, collected with ``engine="streaming"``;

   a job is killed after ``--timeout`` seconds, or as soon as its resident memory
   exceeds ``--max-rss-mib`` (the machine has no swap: this keeps the OOM killer away);
3. prints a markdown table (users, rows, job, seconds, peak MiB, status) and, per size,
   the largest difference between the jobs' means.

The data directory (default ``/tmp/fmscale``) is outside the repository: ~0.95 GiB per
million users (10M users: 9.5 GiB, ~7 min to generate with ``--gen-workers 2``). Examples::

    python bench/scale.py --users 1000000               # 100M rows: generate + 3 jobs
    python bench/scale.py --users 10000000 --gen-workers 2 --generate-only
    python bench/scale.py --users 10000000 --jobs fm --timeout 300 --json out.json
    python -m pytest bench/test_scale.py -q             # ~2000 users, the jobs agree
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/scale.py` already has it
    sys.path.insert(0, str(HERE))

K = 10
METRICS = ["precision", "recall", "ap", "ndcg", "mrr"]
JOBS = ("cli", "fm", "handwritten")
SIZES = {"100M": 1_000_000, "1B": 10_000_000, "2B": 20_000_000}
DEFAULT_DATA = Path("/tmp/fmscale")
N_RECS = 100
#: Truth per user: geometric with this mean, clipped to 1..MAX_TRUTH, repeats dropped.
#: generate.py's defaults (8, 30) give 7.5 rows per user; these give ~14.5 (~145M at 10M).
MEAN_TRUTH = 16.0
MAX_TRUTH = 60
RESULT_MARK = "SCALE-RESULT "
MiB = 1024 * 1024


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Generation:
    """What determines the data: a size directory holds data of one generation only."""

    seed: int = 0
    shard_users: int = 1_000_000
    n_recs: int = N_RECS
    mean_truth: float = MEAN_TRUTH
    max_truth: int = MAX_TRUTH

    def shard_seed(self, index: int) -> int:
        """The numpy seed of shard ``index``: from (seed, index) alone."""
        import numpy as np

        return int(np.random.SeedSequence([self.seed, index]).generate_state(1)[0])


def size_dir(data_dir: Path, users: int) -> Path:
    return data_dir / f"u{users}"


def shard_paths(directory: Path, index: int) -> tuple[Path, Path]:
    name = f"part-{index:05d}.parquet"
    return directory / "recs" / name, directory / "truth" / name


def n_shards(users: int, shard_users: int) -> int:
    """Shards of ``users``: full ones of ``shard_users`` and a smaller last one.

    >>> n_shards(10_000_000, 1_000_000), n_shards(2_500, 1_000)
    (10, 3)
    """
    return -(-users // shard_users)


def write_shard(directory: Path, index: int, n_users: int, gen: Generation) -> dict[str, int]:
    """Generate shard ``index`` (``n_users`` users) and write its two files atomically."""
    import polars as pl
    from generate import make_data

    recs, truth = make_data(
        n_users,
        gen.n_recs,
        gen.shard_seed(index),
        mean_truth=gen.mean_truth,
        max_truth=gen.max_truth,
    )
    offset = index * gen.shard_users
    counts = {"rec_rows": recs.height, "truth_rows": truth.height}
    for frame, path in zip((recs, truth), shard_paths(directory, index), strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        frame.with_columns(pl.col("user") + offset).write_parquet(partial)
        partial.replace(path)
    return counts


def _check_generation(directory: Path, gen: Generation) -> None:
    """Record ``gen`` in ``directory``, or refuse data of another generation there."""
    meta = directory / "generation.json"
    wanted = asdict(gen)
    if meta.exists():
        found = json.loads(meta.read_text())
        if found != wanted:
            raise SystemExit(
                f"{directory} holds data generated with {found}, not {wanted}: "
                "delete it or pass another --data"
            )
        return
    directory.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps(wanted, indent=1) + "\n")


def _reuse_shard(data_dir: Path, directory: Path, index: int, gen: Generation) -> bool:
    """Hard-link a full shard ``index`` of the same generation from another size."""
    targets = shard_paths(directory, index)
    for other in sorted(data_dir.glob("u*")):
        if other == directory or not (other / "generation.json").exists():
            continue
        if json.loads((other / "generation.json").read_text()) != asdict(gen):
            continue
        sources = shard_paths(other, index)
        if not all(p.exists() for p in sources):
            continue
        for source, target in zip(sources, targets, strict=True):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            try:
                os.link(source, target)
            except OSError:  # another file system: no link, generate instead
                return False
        return True
    return False


def generate(
    data_dir: Path, users: int, gen: Generation, *, workers: int = 1, log: bool = True
) -> dict[str, Any]:
    """Make sure ``data_dir/u{users}`` holds every shard; return what it took.

    Missing shards are generated ``workers`` at a time, each in its own subprocess (the
    parent stays small, and a shard's memory is returned to the system when it ends).
    """
    directory = size_dir(data_dir, users)
    _check_generation(directory, gen)
    start = time.perf_counter()
    todo: list[tuple[int, int]] = []
    linked = 0
    for index in range(n_shards(users, gen.shard_users)):
        n = min(gen.shard_users, users - index * gen.shard_users)
        if all(p.exists() for p in shard_paths(directory, index)):
            continue
        if n == gen.shard_users and _reuse_shard(data_dir, directory, index, gen):
            linked += 1
            continue
        todo.append((index, n))
    running: list[tuple[int, subprocess.Popen[bytes]]] = []
    done = 0
    while todo or running:
        while todo and len(running) < workers:
            index, n = todo.pop(0)
            cmd = [sys.executable, __file__, "_shard", str(directory), str(index), str(n)]
            cmd += ["--gen", json.dumps(asdict(gen))]
            running.append((index, subprocess.Popen(cmd)))
        time.sleep(0.2)
        for index, proc in list(running):
            if proc.poll() is None:
                continue
            running.remove((index, proc))
            if proc.returncode != 0:
                for _, other in running:
                    other.kill()
                raise SystemExit(f"generating shard {index} failed: exit {proc.returncode}")
            done += 1
            if log:
                print(
                    f"  u{users}: shard {index} written ({time.perf_counter() - start:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    seconds = time.perf_counter() - start
    return {
        "generated_shards": done,
        "linked_shards": linked,
        "seconds": seconds,
        "bytes": sum(p.stat().st_size for p in directory.rglob("*.parquet")),
    }


def row_counts(directory: Path) -> tuple[int, int]:
    """Rows of recommendations and truth (from the parquet footers)."""
    import polars as pl

    counts = [
        pl.scan_parquet(directory / side / "*.parquet").select(pl.len()).collect().item()
        for side in ("recs", "truth")
    ]
    return int(counts[0]), int(counts[1])


# --------------------------------------------------------------------------------------
# Jobs (each runs in a fresh subprocess: `scale.py _job NAME DIR`)
# --------------------------------------------------------------------------------------


def _peak_mib() -> float:
    """This process's peak resident memory (``VmHWM``), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cli_args(directory: Path) -> list[str]:
    """The ``frame-metrics`` arguments of the ``cli`` job."""
    return [
        "evaluate",
        str(directory / "recs"),
        str(directory / "truth"),
        "-m",
        ",".join(METRICS),
        "-k",
        str(K),
        "--format",
        "json",
    ]


def run_job(name: str, directory: Path) -> dict[str, Any]:
    """Run job ``name`` on the data in ``directory``: its means and inner timings."""
    import polars as pl

    start = time.perf_counter()
    timings: dict[str, float] = {}
    peaks: dict[str, float] = {}  # VmHWM after a step, MiB
    if name == "cli":
        from frame_metrics.cli import main

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(cli_args(directory))
        if status != 0:
            raise SystemExit(status)
        (row,) = json.loads(out.getvalue())
    else:
        recs = pl.scan_parquet(directory / "recs" / "*.parquet")
        truth = pl.scan_parquet(directory / "truth" / "*.parquet")
        if name == "fm":
            import frame_metrics as fm

            lazy = fm.evaluate(recs, truth, metrics=METRICS, k=K, aggregate=True)
            # evaluate() runs the checks (and, with several buckets, all the work).
            timings["evaluate"] = time.perf_counter() - start
            peaks["evaluate"] = _peak_mib()
            frame = lazy.collect(engine="streaming")
            timings["collect"] = time.perf_counter() - start - timings["evaluate"]
        elif name == "handwritten":
            from ranking import handwritten_means

            frame = handwritten_means(recs, truth, K).collect(engine="streaming")
        else:
            raise ValueError(f"job: expected one of {JOBS}, got {name!r}")
        row = frame.row(0, named=True)
    timings["total"] = time.perf_counter() - start
    values = {
        m: float(row[f"{m}@{K}"] if f"{m}@{K}" in row else row[m]) for m in ["n_users", *METRICS]
    }
    return {"values": values, "timings": timings, "peaks": peaks, "peak_mib": _peak_mib()}


# --------------------------------------------------------------------------------------
# The parent: one subprocess per job, with a timeout and a memory cap
# --------------------------------------------------------------------------------------


@dataclass
class Result:
    users: int
    rec_rows: int
    truth_rows: int
    job: str
    seconds: float
    peak_mib: float | None
    status: str
    values: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)


def _proc_status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of a running process, in KiB (empty once it is gone)."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def run_in_subprocess(
    name: str,
    directory: Path,
    *,
    timeout: float,
    max_rss_mib: float,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> tuple[float, float | None, str, dict[str, Any]]:
    """Run job ``name`` in a fresh subprocess: (seconds, peak MiB, status, its report).

    The job is killed (with its process group) after ``timeout`` seconds or when its
    resident memory exceeds ``max_rss_mib``.
    """
    cmd = [sys.executable, __file__, "_job", name, str(directory)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, env={**os.environ, **(env or {})}, start_new_session=True
        )
        seen_kib, killed = 0, ""
        while proc.poll() is None:
            status = _proc_status(proc.pid)
            seen_kib = max(seen_kib, status.get("VmHWM", 0))
            elapsed = time.perf_counter() - start
            if elapsed > timeout:
                killed = f"timeout ({timeout:g} s)"
            elif status.get("VmRSS", 0) > max_rss_mib * 1024:
                killed = f"killed: RSS above {max_rss_mib:g} MiB"
            if killed:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(stderr)
    report: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            report = json.loads(line.removeprefix(RESULT_MARK))
    peak = report.get("peak_mib", seen_kib / 1024 if seen_kib else None)
    if killed:
        outcome = killed
    elif proc.returncode == -signal.SIGKILL:
        outcome = "killed (SIGKILL: out of memory?)"
    elif proc.returncode != 0 or not report:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        outcome = f"exit {proc.returncode}: {lines[-1][:120] if lines else 'no output'}"
    else:
        outcome = "ok"
    return seconds, peak, outcome, report


def _wait_idle(max_load: float, log: bool) -> None:
    """Wait until no pytest runs and the 1-minute load average is below ``max_load``."""
    while True:
        load = float(Path("/proc/loadavg").read_text().split()[0])
        pgrep = subprocess.run(["pgrep", "-f", "pytest"], check=False, capture_output=True)
        busy = pgrep.returncode == 0
        if load < max_load and not busy:
            return
        if log:
            print(f"  waiting for an idle machine (load {load}, pytest: {busy})", file=sys.stderr)
        time.sleep(30)


def run(
    users: Sequence[int],
    data_dir: Path,
    *,
    jobs: Sequence[str] = JOBS,
    gen: Generation | None = None,
    timeout: float = 600.0,
    max_rss_mib: float = 20_000.0,
    workers: int = 1,
    idle_load: float | None = None,
    log: bool = True,
) -> tuple[list[Result], dict[int, dict[str, Any]]]:
    """Generate every size, then run every job on it: the results and the generations."""
    gen = gen or Generation()
    results: list[Result] = []
    generations: dict[int, dict[str, Any]] = {}
    for n in users:
        generations[n] = generate(data_dir, n, gen, workers=workers, log=log)
        directory = size_dir(data_dir, n)
        rec_rows, truth_rows = row_counts(directory)
        generations[n] |= {"rec_rows": rec_rows, "truth_rows": truth_rows}
        if log:
            g = generations[n]
            print(
                f"u{n}: {rec_rows:,} rec rows, {truth_rows:,} truth rows, "
                f"{g['bytes'] / 2**30:.2f} GiB; {g['generated_shards']} shards generated "
                f"in {g['seconds']:.0f} s, {g['linked_shards']} linked",
                file=sys.stderr,
                flush=True,
            )
        for job in jobs:
            if idle_load is not None:
                _wait_idle(idle_load, log)
            seconds, peak, status, report = run_in_subprocess(
                job,
                directory,
                timeout=timeout,
                max_rss_mib=max_rss_mib,
                log=directory / "logs" / f"{job}.stderr",
            )
            result = Result(
                n,
                rec_rows,
                truth_rows,
                job,
                seconds,
                peak,
                status,
                report.get("values", {}),
                report.get("timings", {}),
                report.get("peaks", {}),
            )
            results.append(result)
            if log:
                inner = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
                inner += "".join(f", VmHWM after {k} {v:.0f} MiB" for k, v in result.peaks.items())
                print(
                    f"  {job}: {seconds:.1f} s, {peak or 0:.0f} MiB, {status} ({inner})",
                    file=sys.stderr,
                    flush=True,
                )
    return results, generations


def max_difference(results: Sequence[Result]) -> dict[int, float]:
    """Per size, the largest absolute difference of a mean between two finished jobs."""
    out: dict[int, float] = {}
    for n in sorted({r.users for r in results}):
        done = [r.values for r in results if r.users == n and r.status == "ok"]
        diffs = [abs(a[m] - b[m]) for a in done for b in done for m in ["n_users", *METRICS]]
        out[n] = max(diffs, default=float("nan"))
    return out


def markdown(results: Sequence[Result]) -> str:
    lines = [
        "| users | rec rows | truth rows | job | seconds | peak MiB | status |",
        "| ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for r in results:
        peak = "" if r.peak_mib is None else f"{r.peak_mib:,.0f}"
        lines.append(
            f"| {r.users:,} | {r.rec_rows:,} | {r.truth_rows:,} | {r.job} | {r.seconds:.1f} "
            f"| {peak} | {r.status} |"
        )
    return "\n".join(lines)


def _parse_users(text: str) -> list[int]:
    return [SIZES.get(t.strip(), 0) or int(t.strip().replace("_", "")) for t in text.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["_shard"]:  # a generation subprocess
        _, directory, index, n = args_list[:4]
        gen = Generation(**json.loads(args_list[args_list.index("--gen") + 1]))
        write_shard(Path(directory), int(index), int(n), gen)
        return 0
    if args_list[:1] == ["_job"]:  # a measured subprocess
        report = run_job(args_list[1], Path(args_list[2]))
        print(RESULT_MARK + json.dumps(report), flush=True)
        return 0

    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--users", default="1000000", help="comma-separated user counts, or 100M, 1B, 2B"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data directory")
    parser.add_argument("--jobs", default=",".join(JOBS), help="comma-separated jobs")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    parser.add_argument(
        "--max-rss-mib", type=float, default=20_000.0, help="kill a job above this RSS"
    )
    parser.add_argument("--shard-users", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gen-workers", type=int, default=1, help="shards generated at once (~5 GB each)"
    )
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument(
        "--idle-load",
        type=float,
        default=None,
        help="before each job, wait for no pytest and a 1-minute load below this",
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(args_list)

    users = _parse_users(args.users)
    jobs = [] if args.generate_only else [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        parser.error(f"--jobs: unknown {unknown}, expected some of {list(JOBS)}")
    gen = Generation(seed=args.seed, shard_users=args.shard_users)
    results, generations = run(
        users,
        args.data,
        jobs=jobs,
        gen=gen,
        timeout=args.timeout,
        max_rss_mib=args.max_rss_mib,
        workers=args.gen_workers,
        idle_load=args.idle_load,
    )
    print("| users | truth rows | disk GiB | shards generated | generation s |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for size, g in generations.items():
        print(
            f"| {size:,} | {g['truth_rows']:,} | {g['bytes'] / 2**30:.2f} | "
            f"{g['generated_shards']} (+{g['linked_shards']} linked) | {g['seconds']:.0f} |"
        )
    if results:
        print()
        print(markdown(results))
        print()
        for size, diff in max_difference(results).items():
            print(f"u{size}: largest difference between the jobs' means: {diff:.3g}")
    if args.json is not None:
        payload = {"generations": generations, "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return 0 if all(r.status == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
