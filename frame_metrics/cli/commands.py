"""The commands: ``evaluate``, ``compare``, ``demo``, ``gaps``, ``exposure``, ``policy-value`` and ``split``, each run on the parsed arguments."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

import frame_metrics as fm
from frame_metrics.cli.files import (
    extra_files,
    output_format,
    read_frame,
    read_inputs,
    write_result,
)
from frame_metrics.cli.messages import EXIT_GATES, PROG, UsageError
from frame_metrics.datasets import synthetic
from frame_metrics.gates import failed_lines
from frame_metrics.keywords import ROLES
from frame_metrics.options import OPTIONS

#: A command: runs on the parsed arguments, returns the exit status.
Command = Callable[[argparse.Namespace], int]


def _cutoffs(text: str | None) -> list[int] | None:
    """Parse ``-k``: ints; evaluate judges their values (``-k 0`` is its error).

    Examples
    --------
    >>> _cutoffs("5,10")
    [5, 10]
    >>> _cutoffs("ten")
    Traceback (most recent call last):
    ...
    frame_metrics.cli.messages.UsageError: -k: expected an int >= 1 or a comma-separated list of them, got 'ten'
    """
    if text is None:
        return None
    # Blank parts are dropped; none left, or a part not an int, is this one usage error.
    try:
        cutoffs = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        cutoffs = []
    if not cutoffs:
        raise UsageError(
            f"-k: expected an int >= 1 or a comma-separated list of them, got {text!r}"
        )
    return cutoffs


def _user(args: argparse.Namespace) -> str | list[str]:
    """``--user-col`` as the calls take it: one name, or the names of a composite key."""
    user: list[str] = args.user_col
    return user[0] if len(user) == 1 else user


def _ranking_columns(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of the flags ``parser._add_ranking_columns`` adds: user, item, rank, score."""
    return {
        "user": _user(args),
        "item": args.item_col,
        # The flags exclude each other; the default rank column is not the caller's.
        "rank": None if args.score_col is not None else args.rank_col,
        "score": args.score_col,
    }


def _evaluate_options(args: argparse.Namespace, frames: dict[str, pl.LazyFrame]) -> dict[str, Any]:
    """The keywords of ``fm.evaluate`` the options set: columns, metric options, extras."""
    ranking = _ranking_columns(args)
    return {
        **{
            r.name: getattr(args, r.dest) for r in ROLES if r.name not in ranking and r.name != "by"
        },
        **ranking,
        **{row.name: getattr(args, row.name) for row in OPTIONS},
        "convention": args.convention,
        **{name: frames[name] for name in extra_files() if name in frames},
    }


def run_evaluate(args: argparse.Namespace) -> int:
    """``frame-metrics evaluate``: evaluate the files, write the result."""
    fmt = output_format(args)
    k = _cutoffs(args.k)
    frames = read_inputs(args)
    gated = bool(args.fail_under or args.max_drop)
    if gated and args.per_user:
        raise UsageError(
            "--fail-under/--max-drop: expected means to judge, got --per-user; leave it out"
        )
    result = fm.evaluate(
        frames["recs"],
        frames.get("truth"),
        metrics=args.metrics,
        k=k[0] if k is not None and len(k) == 1 else k,
        aggregate=not args.per_user,
        by=args.by,
        buckets=args.buckets,
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
        **_evaluate_options(args, frames),
    )
    if not gated:
        write_result(result, fmt, args.output, args.precision)
        return 0
    means = result.collect(engine="streaming")  # small: judged and written from one run
    return _gated(means, args, fmt, model=args.model_col)


def _statistics(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of ``parser._add_comparison_statistics``' options (compare, report)."""
    return {
        "level": args.level,
        "n_resamples": args.resamples,
        "seed": args.seed,
        "correction": args.correction,
    }


def run_compare(args: argparse.Namespace) -> int:
    """``frame-metrics compare``: compare the models of the files, write the comparison."""
    fmt = output_format(args)
    k = _cutoffs(args.k)
    frames = read_inputs(args)
    options = _evaluate_options(args, frames)
    user = options.pop("user")
    truth = frames.get("truth")
    kwargs = {} if truth is None else options
    result = fm.compare(
        frames["recs"],
        truth,
        baseline_model=args.baseline_model,
        model=args.model_col,
        by=args.by,
        user=user,
        metrics=args.metrics,
        k=k[0] if k is not None and len(k) == 1 else k,
        **_statistics(args),
        progress=False if args.no_progress else None,
        **kwargs,
    )
    if args.fail_under or args.max_drop:
        return _gated(result.collect(), args, fmt, model=args.model_col)
    write_result(result, fmt, args.output, args.precision)
    return 0


def _gated(result: pl.DataFrame, args: argparse.Namespace, fmt: str, *, model: str) -> int:
    """Judge ``--fail-under``/``--max-drop`` on ``result``, write it, and say the failures.

    The gates are judged first (a gate on a metric not computed is a usage error, and
    nothing is written); the result is then written as usual, and each failed (gate,
    model) is a line on standard error: exit status 3.
    """
    try:
        judged = fm.check(
            result,
            {name: f">= {bound!r}" for name, bound in args.fail_under},
            max_drop=dict(args.max_drop) or None,
            baseline_model=args.baseline_model if args.max_drop else None,
            model=model,
        )
    except fm.InvalidOptionError as exc:
        if exc.option not in ("gates", "max_drop"):
            raise
        # Said in this command line's terms: the gates are its two flags.
        raise UsageError(f"--fail-under/--max-drop: {str(exc).partition(': ')[2]}") from exc
    write_result(result.lazy(), fmt, args.output, args.precision)
    lines = failed_lines(judged)
    for line in lines:
        sys.stderr.write(f"{PROG}: gate failed: {line}\n")
    return EXIT_GATES if lines else 0


#: The demo's metrics and what each row of its table is (printed under it).
_DEMO_METRICS: dict[str, str] = {
    "precision": "share of the top k the user liked",
    "recall": "share of the user's liked items that are in the top k",
    "ndcg": "liked items near the top count more (discounted gain); 1 = the best order",
    "ap": "average precision (alias map): the precision at each liked item of the top "
    "k, summed and divided by min(liked items, k)",
    "mrr": "1 / the rank of the first liked item in the top k (0 without one)",
    "coverage": "share of the catalog that anyone is shown (one value per model)",
    "personalization": "1 - the share of items two users' lists have in common, on "
    "average (one value per model)",
    "gini": "how unequal the items' exposure is: 0 = all shown equally, near 1 = a few "
    "items shown to everyone (one value per model; lower is better)",
}


#: What to try after the demo: a command and what it does.
_DEMO_NEXT: tuple[tuple[str, str], ...] = (
    (
        "python3 -m frame_metrics evaluate RECS TRUTH -k 10",
        "your own parquet or CSV files: recommendations (user, item, rank, or a score "
        "with --score-col) and truth (user, item, relevance)",
    ),
    ("python3 -m frame_metrics evaluate --help", "every metric and option"),
    (
        "python3 -m frame_metrics compare --help",
        "is one model better? bootstrap intervals and paired tests",
    ),
    (
        'python3 -c "import frame_metrics as fm; help(fm.evaluate)"',
        "the same from Python, on polars or pandas frames",
    ),
)


def demo() -> pl.DataFrame:
    """Evaluate the synthetic ``popularity`` and ``personal`` models at k = 5 and 10.

    Accuracy and, in the same call, what the lists look like as a whole: the share of
    the catalog they cover, how different users' lists are, and how unequal exposure is.

    Examples
    --------
    >>> demo().select("model", "n_users").rows()
    [('personal', 1000), ('popularity', 1000)]
    """
    recs, truth = synthetic()
    # Every truth item is one the user likes, its grade the gain: rel > 0, as meant.
    return fm.evaluate(
        recs,
        truth,
        metrics=list(_DEMO_METRICS),
        k=[5, 10],
        by="model",
        aggregate=True,
        threshold=None,
    )


def _demo_report(result: pl.DataFrame, recs: pl.DataFrame, truth: pl.DataFrame, width: int) -> str:
    r"""The demo's printout, ``width`` columns wide.

    What was evaluated; one row per metric and cutoff with a column per model (a block per
    model when that is wider than ``width``); what the rows are; and what to try next.

    Examples
    --------
    >>> result = pl.DataFrame({"model": ["a", "b"], "n_users": [2, 2], "recall@5": [0.5, 0.25]})
    >>> recs = pl.DataFrame({"model": ["a", "b"], "user": [1, 1], "item": [1, 2], "rank": 1})
    >>> truth = pl.DataFrame({"user": [1], "item": [1], "relevance": [1]})
    >>> print(_demo_report(result, recs, truth, 80).split("\n\n")[2])
    metric        a       b
    recall@5  0.5000  0.2500
    n_users        2       2
    """
    models = result["model"].to_list()
    metrics = [c for c in result.columns if c not in ("model", "n_users")]
    cells = {c: [f"{v:.4f}" for v in result[c]] for c in metrics}
    cells["n_users"] = [str(v) for v in result["n_users"]]
    label = max(len(c) for c in ["metric", *cells])
    value = max(len(s) for s in [*models, *(v for vs in cells.values() for v in vs)])
    per_user = recs.group_by("model", "user").len().select(pl.col("len").max()).item()
    lines = [
        textwrap.fill(
            f"frame_metrics {fm.__version__} demo: {len(models)} models recommend {per_user} "
            f"items to each of {recs['user'].n_unique()} synthetic users, who like "
            f"{truth.height} items between them. 'popularity' shows everyone the same "
            "most popular items; 'personal' ranks each user's candidates by a noisy score "
            "that favours the items they like.",
            width,
        ),
        "",
        textwrap.fill(
            "Each model at k = 5 and 10; a per-user metric is the mean over the model's "
            "n_users users:",
            width,
            break_on_hyphens=False,
        ),
        "",
    ]
    if label + (value + 2) * len(models) <= width:
        lines.append("metric".ljust(label) + "".join(f"  {m:>{value}}" for m in models))
        lines += [
            c.ljust(label) + "".join(f"  {v:>{value}}" for v in vs) for c, vs in cells.items()
        ]
    else:  # too narrow for a column per model: one block per model
        for i, model in enumerate(models):
            lines += [*([""] if i else []), f"{model}:"]
            lines += [f"  {c.ljust(label)}  {vs[i]:>{value}}" for c, vs in cells.items()]
    names = [n for n in _DEMO_METRICS if any(c.startswith(f"{n}@") for c in metrics)]
    key = max(len(f"{n}@k") for n in names) + 2
    lines += ["", textwrap.fill("What the rows are (per user at cutoff k, then the mean):", width)]
    for name in names:
        text = _DEMO_METRICS[name]
        if width - key >= 30:  # the name, then the text in a column beside it
            wrapped = textwrap.wrap(text, width - key - 2)
            lines.append(f"  {name + '@k':<{key}}{wrapped[0]}")
            lines += [" " * (key + 2) + rest for rest in wrapped[1:]]
        else:
            lines += [
                f"  {name}@k",
                *textwrap.wrap(text, width - 4, initial_indent="    ", subsequent_indent="    "),
            ]
    lines += ["", "Try next:"]
    for command, what in _DEMO_NEXT:
        lines.append(f"  {command}")
        lines += textwrap.wrap(
            what, max(width - 6, 20), initial_indent="      ", subsequent_indent="      "
        )
    return "\n".join(lines)


def run_demo(args: argparse.Namespace) -> int:
    """``frame-metrics demo``: print the demo's report, as wide as the terminal."""
    import shutil

    recs, truth = synthetic()
    # The terminal's width ($COLUMNS first), 80 when the output is not a terminal.
    width = shutil.get_terminal_size((80, 24)).columns
    print(_demo_report(demo(), recs, truth, width))
    return 0


def run_gaps(args: argparse.Namespace) -> int:
    """``frame-metrics gaps``: the gaps between user groups of a per-user file."""
    fmt = output_format(args)
    per_user = read_frame(args.per_user, "PER_USER")
    group: object = args.group_col
    if args.groups is not None:
        group = read_frame(args.groups, "--groups")
    result = fm.gaps(
        per_user,
        group,
        train=None if args.train is None else read_frame(args.train, "--train"),
        active_share=args.active_share,
        level=args.level,
        n_resamples=args.resamples,
        seed=args.seed,
        user=_user(args),
        by=args.by,
        progress=False if args.no_progress else None,
    )
    write_result(result, fmt, args.output, args.precision)
    return 0


def run_exposure(args: argparse.Namespace) -> int:
    """``frame-metrics group-exposure``: the exposure table of the item groups of a file."""
    if args.command == "exposure":
        print(
            "frame-metrics: note: the command exposure is renamed group-exposure; the old "
            "name goes in the next release",
            file=sys.stderr,
        )
    fmt = output_format(args)
    frames = read_inputs(args)
    # Options not given stay fm.group_exposure's defaults.
    options = {
        name: value
        for name in ("exposure", "persistence", "threshold", "ties", "on_duplicate")
        if (value := getattr(args, name)) is not None
    }
    result = fm.group_exposure(
        frames["recs"],
        frames.get("truth"),
        k=args.k,
        item_groups=frames.get("item_groups"),
        by=args.by,
        train=frames.get("train"),
        catalog=frames.get("catalog"),
        relevance=args.relevance_col,
        group=args.group_col,
        head_share=args.head_share,
        exclude=frames.get("exclude"),
        **_ranking_columns(args),
        **options,
    )
    write_result(result, fmt, args.output, args.precision)
    return 0


def run_policy_value(args: argparse.Namespace) -> int:
    """``frame-metrics policy-value``: the off-policy value of the policies of a file."""
    fmt = output_format(args)
    user: list[str] = args.user_col
    ids = [*user, args.item_col] if args.ids_as_text else []
    result = fm.policy_value(
        read_frame(args.logs, "LOGS", ids),
        read_frame(args.recs, "RECS", ids),
        k=args.k,
        estimator=args.estimator,
        reward=args.reward_col,
        pscore=args.pscore_col,
        probability=args.probability_col,
        reward_model=args.reward_model_col,
        max_weight=args.max_weight,
        by=args.by,
        level=args.level,
        n_resamples=args.resamples,
        seed=args.seed,
        ties=args.ties,
        exclude=None if args.exclude is None else read_frame(args.exclude, "--exclude", ids),
        **_ranking_columns(args),
    )
    write_result(result, fmt, args.output, args.precision)
    return 0


def run_split(args: argparse.Namespace) -> int:
    """``frame-metrics split``: train and test parquet files of a file of interactions."""
    from pathlib import Path

    interactions = read_frame(args.interactions, "INTERACTIONS")
    options = {
        name: value
        for name in ("n", "test_share", "at", "n_folds", "window", "end")
        if (value := getattr(args, name)) is not None
    }
    result = fm.split(
        interactions,
        args.method,
        user=_user(args),
        item=args.item_col,
        time=args.time_col,
        order=args.order,
        ties=args.ties,
        min_train=args.min_train,
        cold_users=args.cold_users,
        cold_items=args.cold_items,
        seen=args.seen,
        seed=args.seed,
        **options,
    )
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(result, fm.Folds):
        outputs = {"test.parquet": result.test}
        outputs.update({f"train_{f}.parquet": fold.train for f, fold in enumerate(result)})
    else:
        outputs = {"train.parquet": result.train, "test.parquet": result.test}
    for name, frame in outputs.items():
        frame.sink_parquet(out / name)  # streamed: the input may be larger than memory
    report = result.report
    report.frame.write_csv(out / "report.csv")
    print(report.text())
    print(f"wrote {', '.join(sorted(outputs))} and report.csv to {out}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    """``frame-metrics report``: evaluate, compare and diagnose the files, write the report."""
    from frame_metrics.reports import SUFFIXES

    if Path(args.output).suffix.lower() not in SUFFIXES:
        raise UsageError(
            f"-o: expected a file name ending in {', '.join(SUFFIXES)}, got {args.output!r}"
        )
    if not Path(args.output).parent.is_dir():
        raise UsageError(f"-o: expected a file in an existing directory, got {args.output!r}")
    k = _cutoffs(args.k)
    frames = read_inputs(args)
    options = _evaluate_options(args, frames)
    try:
        _write_report(args, frames, options, k)
    except fm.InvalidOptionError as exc:
        if exc.option != "path":
            raise
        raise UsageError(f"-o: {str(exc).partition(': ')[2]}") from exc
    sys.stderr.write(f"{PROG}: wrote {args.output}\n")
    return 0


def _write_report(
    args: argparse.Namespace,
    frames: dict[str, pl.LazyFrame],
    options: dict[str, Any],
    k: list[int] | None,
) -> None:
    fm.report(
        frames["recs"],
        frames.get("truth"),
        model=args.model_col,
        baseline_model=args.baseline_model,
        metrics=args.metrics,
        k=k[0] if k is not None and len(k) == 1 else k,
        **_statistics(args),
        title=args.title,
        path=args.output,
        **options,
    )


#: Each command of the parser and what runs it.
RUNS: dict[str, Command] = {
    "evaluate": run_evaluate,
    "compare": run_compare,
    "report": run_report,
    "demo": run_demo,
    "gaps": run_gaps,
    "group-exposure": run_exposure,
    "exposure": run_exposure,  # the old name of group-exposure, for one release
    "policy-value": run_policy_value,
    "split": run_split,
}
#: The optional modules a command imports, checked before it reads any input.
NEEDS: dict[str, tuple[str, ...]] = {
    "compare": ("numpy",),
    "report": ("numpy",),
    "gaps": ("numpy",),
    "policy-value": ("numpy",),
}
