"""``python -m frame_metrics``: evaluate two models on a built-in synthetic dataset."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import polars as pl

import frame_metrics as fm
from frame_metrics.datasets import synthetic

__all__ = ["demo", "main"]


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
    return fm.evaluate(
        recs,
        truth,
        metrics=[
            "precision",
            "recall",
            "ndcg",
            "map",
            "mrr",
            "coverage",
            "personalization",
            "gini",
        ],
        k=[5, 10],
        by="model",
        aggregate=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo and print its table."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] not in ("demo",):
        print(f"frame-metrics: expected the command 'demo', got {args[0]!r}", file=sys.stderr)
        return 2
    recs, truth = synthetic()
    print(
        f"frame_metrics {fm.__version__} - synthetic data: {recs['user'].n_unique()} users, "
        f"{truth.height} liked items, 2 models x 20 recommendations\n"
    )
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=4, tbl_width_chars=250):
        print(demo())
    return 0


if __name__ == "__main__":
    sys.exit(main())
