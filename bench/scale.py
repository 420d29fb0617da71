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
2. runs each job on the harness (``harness.py``): a fresh process per run, which scans
   the shards (lazily, untimed) and times the call; ``process s`` is the whole
   process (interpreter start and imports included), peak memory its ``VmHWM`` (for a
   killed job, the highest RSS the parent saw while polling):

   - ``cli``: ``frame-metrics evaluate DIR/recs DIR/truth -m precision,recall,ap,ndcg,mrr
     -k 10 --format json`` (``frame_metrics.cli.main`` in the process, which is what
     the console script runs);
   - ``fm``: ``fm.evaluate(pl.scan_parquet(recs), pl.scan_parquet(truth), metrics=...,
     k=10, aggregate=True).collect(engine="streaming")``;
   - ``handwritten``: the obvious hand-written polars query (``peers.py``) over the
     same scans, collected with ``engine="streaming"``;

   a job is killed after ``--timeout`` seconds, or as soon as its resident memory
   exceeds ``--max-rss-mib`` (the machine has no swap: this keeps the OOM killer away);
3. prints a markdown table (users, rows, job, seconds, peak MiB, status) and, per size,
   the largest difference between the jobs' means (a mismatch above 1e-9).

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
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # running as `python bench/scale.py` already has it
    sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import peers  # noqa: E402
from harness import Job, Prepared, Result, Stage, Values  # noqa: E402

K = 10
METRICS = peers.RANKING
SIZES = {"100M": 1_000_000, "1B": 10_000_000, "2B": 20_000_000}
DEFAULT_DATA = Path("/tmp/fmscale")
N_RECS = 100
#: Truth per user: geometric with this mean, clipped to 1..MAX_TRUTH, repeats dropped.
#: generate.py's defaults (8, 30) give 7.5 rows per user; these give ~14.5 (~145M at 10M).
MEAN_TRUTH = 16.0
MAX_TRUTH = 60
#: The largest difference between two jobs' means that counts as agreement.
TOLERANCE = 1e-9


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------


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


def load(directory: Path, kind: str, params: harness.Params) -> Any:
    """The directory (``cli``), or lazy scans of its shards: nothing is read yet."""
    import polars as pl

    if kind == "directory":
        return directory
    return tuple(pl.scan_parquet(directory / side / "*.parquet") for side in ("recs", "truth"))


def _means(row: dict[str, Any]) -> Values:
    return {
        m: float(row[f"{m}@{K}"] if f"{m}@{K}" in row else row[m]) for m in ["n_users", *METRICS]
    }


def prepare_cli(directory: Path) -> Prepared:
    """The console script's ``main`` on the two directories, its JSON output read back."""
    from frame_metrics.cli import main

    def run() -> Values:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main(cli_args(directory))
        if status != 0:
            raise RuntimeError(f"frame-metrics exited with {status}")
        (row,) = json.loads(out.getvalue())
        return _means(row)

    return Prepared(run)


def prepare_fm(scans: tuple[Any, Any]) -> Prepared:
    """``fm.evaluate`` on the scans, collected with the streaming engine; ``inner`` says
    how long ``evaluate`` took (it runs the checks, and with several buckets all the
    work) and the peak RSS after it."""
    import frame_metrics as fm

    prepared = Prepared(None)

    def run() -> Values:
        start = time.perf_counter()
        lazy = fm.evaluate(*scans, metrics=METRICS, k=K, aggregate=True)
        prepared.inner["evaluate s"] = time.perf_counter() - start
        prepared.inner["evaluate VmHWM MiB"] = harness.status_kib("VmHWM") / 1024
        frame = lazy.collect(engine="streaming")
        prepared.inner["collect s"] = time.perf_counter() - start - prepared.inner["evaluate s"]
        return _means(frame.row(0, named=True))

    prepared.run = run
    return prepared


def prepare_handwritten(scans: tuple[Any, Any]) -> Prepared:
    """The hand-written polars query over the scans, streaming."""
    return peers.prepare_handwritten(*scans, K, collect="streaming")


JOBS = harness.job_table(
    Job("cli", "frame_metrics", "frame-metrics evaluate (CLI)", prepare_cli, "directory", vs="fm"),
    Job("fm", "frame_metrics", "fm.evaluate(scan_parquet)", prepare_fm, "scans"),
    Job(
        "handwritten",
        "polars (hand-written)",
        "hand-written query",
        prepare_handwritten,
        "scans",
        vs="fm",
    ),
)
SUITE = harness.Suite(
    "Scale benchmark: ranking metrics over sharded parquet, 100M to 2B recommendation rows.",
    Path(__file__).resolve(),
    JOBS,
    "fm",
    load,
    fail_on_error=True,
)


# --------------------------------------------------------------------------------------
# Plan and tables
# --------------------------------------------------------------------------------------


def plan(args: argparse.Namespace) -> list[Stage]:
    """Generate every size (once), then run the jobs on it."""
    jobs = [name for name in JOBS if name in (harness.wanted_jobs(SUITE, args.only) or JOBS)]
    gen = Generation(seed=args.seed, shard_users=args.shard_users)
    stages = []
    for users in parse_users(args.users):
        info = generate(args.data_dir, users, gen, workers=args.gen_workers)
        info["rec_rows"], info["truth_rows"] = row_counts(size_dir(args.data_dir, users))
        stages.append(Stage(users, Path(f"u{users}"), {}, jobs, info))
    return stages


def max_difference(results: Sequence[Result]) -> dict[int, float]:
    """Per size, the largest absolute difference of a mean between two finished jobs."""
    out: dict[int, float] = {}
    for n in sorted({r.users for r in results}):
        done = [r.values for r in results if r.users == n and not r.error]
        diffs = [abs(a[m] - b[m]) for a in done for b in done for m in ["n_users", *METRICS]]
        out[n] = max(diffs, default=float("nan"))
    return out


def report(results: list[Result], stages: list[Stage], args: argparse.Namespace) -> int:
    """The generations, the jobs (rows, seconds, peak, status), the jobs' agreement."""
    rows = [["users", "truth rows", "disk GiB", "shards generated", "generation s"]]
    for s in stages:
        g = s.info
        rows.append(
            [
                f"{s.users:,}",
                f"{g['truth_rows']:,}",
                f"{g['bytes'] / 2**30:.2f}",
                f"{g['generated_shards']} (+{g['linked_shards']} linked)",
                f"{g['seconds']:.0f}",
            ]
        )
    print()
    print(harness.render(rows, markdown=True))
    info = {s.users: s.info for s in stages}
    rows = [
        ["users", "rec rows", "truth rows", "job", "seconds", "process s", "peak MiB", "status"]
    ]
    for r in results:
        side = f" [{r.side}]" if r.side != harness.AFTER else ""
        rows.append(
            [
                f"{r.users:,}",
                f"{info[r.users]['rec_rows']:,}",
                f"{info[r.users]['truth_rows']:,}",
                r.job + side,
                harness.fmt_s(r.median),
                harness.fmt_s(max(r.wall, default=float("nan"))),
                f"{r.peak_mib:,.0f}",
                r.error[:120] or "ok",
            ]
        )
    print()
    print(harness.render(rows, markdown=True))
    print()
    mismatches = 0
    for size, diff in max_difference([r for r in results if r.side == harness.AFTER]).items():
        print(f"u{size}: largest difference between the jobs' means: {diff:.3g}")
        mismatches += diff > TOLERANCE
    return mismatches


def parse_users(text: str) -> list[int]:
    """Comma-separated user counts, or the named sizes of :data:`SIZES`.

    >>> parse_users("100M,2_000")
    [1000000, 2000]
    """
    return harness.parse_sizes(
        ",".join(str(SIZES.get(t.strip(), t.strip())) for t in text.split(","))
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, run the jobs, print the tables; 1 when a job failed or the jobs disagree."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["_shard"]:  # a generation subprocess
        _, directory, index, n = args_list[:4]
        gen = Generation(**json.loads(args_list[args_list.index("--gen") + 1]))
        write_shard(Path(directory), int(index), int(n), gen)
        return 0
    p = harness.parser(
        SUITE,
        users="1000000",
        repeats=1,
        only=("--jobs", "--only"),
        data=("--data", "--data-dir"),
        data_default=DEFAULT_DATA,
    )
    p.set_defaults(max_rss_mib=20_000.0)
    p.add_argument("--shard-users", type=int, default=1_000_000)
    p.add_argument(
        "--gen-workers", type=int, default=1, help="shards generated at once (~5 GB each)"
    )
    p.add_argument("--generate-only", action="store_true")
    p.add_argument(
        "--idle-load",
        type=float,
        help="before each job, wait until other processes keep fewer than this many cores busy",
    )
    args = p.parse_args(args_list)
    if args.idle_load is not None:
        args.wait_idle, args.idle_cores = 3600.0, args.idle_load
    if args.generate_only:
        for stage in plan(argparse.Namespace(**{**vars(args), "only": ""})):
            print(harness.stage_line(stage))
        return 0
    return harness.main(SUITE, args, plan, report)


if __name__ == "__main__":
    sys.exit(main())
