"""The plots render headlessly to a non-empty PNG, from every frame kind, and show the data."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.datasets import synthetic
from frame_metrics.errors import InvalidOptionError, MissingColumnsError
from tests.conftest import Constructor

matplotlib = pytest.importorskip("matplotlib")
image = pytest.importorskip("matplotlib.image")


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    """The plots leave their figures open in pyplot (for ``plt.show()``); close them here."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_figures_are_shown_by_plt_show(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    # A script's plt.show() shows the figures pyplot manages: the plots must be among them.
    import matplotlib.pyplot as plt

    per_user, result = data
    figs = [
        fm.plot.metric_at_k(result, "ndcg"),
        fm.plot.distribution(per_user, "ndcg@10"),
        fm.plot.forest(result),
    ]
    assert [f.number for f in figs] == plt.get_fignums()[-3:]


@pytest.fixture(scope="module")
def data() -> tuple[pl.DataFrame, pl.DataFrame]:
    recs, truth = synthetic(n_users=300)
    per_user = fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=[1, 5, 10, 20], by="model")
    per_user = per_user.with_columns(
        activity=pl.when(pl.col("user") % 2 == 0).then(pl.lit("even")).otherwise(pl.lit("odd"))
    )
    result = fm.compare(
        per_user, baseline_model="popularity", by="activity", n_resamples=200, seed=0
    )
    return per_user, result


def assert_renders(fig: Any) -> None:
    """Saved as PNG: a real image, and not a blank one."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getbuffer().nbytes > 5_000
    buffer.seek(0)
    pixels = np.asarray(image.imread(buffer, format="png"))
    assert pixels.std() > 0.05  # lines, bands and text, not one flat colour


def test_metric_at_k(constructor: Constructor, data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _, result = data
    fig = fm.plot.metric_at_k(constructor(result), "ndcg", by="activity")
    assert [ax.get_title() for ax in fig.axes] == [
        "ndcg@k (activity=even)",
        "ndcg@k (activity=odd)",
    ]
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["personal", "popularity"]
    # The line is the compare means, at k = 1, 5, 10, 20.
    want = result.filter(
        (pl.col("activity") == "even")
        & (pl.col("metric") == "ndcg")
        & (pl.col("model") == "personal")
    ).sort("k")
    assert list(lines[0].get_xdata()) == [1, 5, 10, 20]
    assert list(lines[0].get_ydata()) == want["mean"].to_list()
    assert len(ax.collections) == 2  # one band per model
    assert_renders(fig)


def test_distribution(constructor: Constructor, data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    per_user, _ = data
    fig = fm.plot.distribution(constructor(per_user), "ndcg@10")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    n = per_user.filter(pl.col("model") == "personal").height
    assert lines[0].get_label().startswith(f"personal (n={n},")
    assert lines[0].get_ydata()[-1] == 1.0  # an ECDF ends at 1
    assert_renders(fig)


def test_forest(constructor: Constructor, data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _, result = data
    fig = fm.plot.forest(constructor(result), by="activity")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    compared = result.filter(pl.col("diff").is_not_null())
    assert len(labels) == compared.height == 16  # 2 segments x 2 metrics x 4 k x 1 model
    assert labels[0] == "ndcg@1  personal  [even]"
    assert_renders(fig)


def test_bad_input() -> None:
    with pytest.raises(
        MissingColumnsError,
        match=r"^frame: expected columns 'mean', 'ci_low', 'ci_high', not found; available "
        r"columns: 'metric', 'k', 'model'$",
    ):
        fm.plot.metric_at_k(pl.DataFrame({"metric": ["x"], "k": [1], "model": ["a"]}), "x")
    frame = pl.DataFrame(
        {
            "metric": ["ndcg"],
            "k": [1],
            "model": ["a"],
            "mean": [0.1],
            "ci_low": [0.0],
            "ci_high": [0.2],
        }
    )
    with pytest.raises(
        InvalidOptionError, match=r"^metric: expected one of \['ndcg'\], got 'ndgc'$"
    ):
        fm.plot.metric_at_k(frame, "ndgc")
