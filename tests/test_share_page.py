"""The "Share and decide" page (docs/share.md): its recorded outputs and its screenshot.

The page runs on MovieLens ml-latest-small, which the repository does not hold: its
examples are ``python recorded`` blocks committed with their outputs (refresh with
``python docs/gen/gen_run.py docs/share.md``, then ``python docs/gen/gen_screenshot.py``
for the report's screenshot). The outputs must be what a fresh run prints (skips without
the data); the numbers the prose quotes must be those outputs' (no data needed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gen_run

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "share.md"


def test_recorded_outputs_are_a_fresh_run() -> None:
    data = gen_run().find_movielens(ROOT)
    if data is None:
        pytest.skip("MovieLens ml-latest-small not found ($MOVIELENS_DIR, or shared/data)")
    page: dict[str, Any] = {}
    fresh = gen_run().record_page(PAGE, data, page)
    assert fresh == PAGE.read_text(encoding="utf-8"), (
        "docs/share.md's outputs are not what its code prints now: "
        "python docs/gen/gen_run.py docs/share.md"
    )
    shared = page["shared"]
    assert shared.models == ["genre", "most-rated", "steam"]
    assert shared.split is not None


def test_prose_quotes_the_outputs() -> None:
    text = PAGE.read_text(encoding="utf-8")
    row = re.search(r"│ ndcg +┆ most-rated ┆ genre +┆ ([\d.]+) +┆ ([\d.]+) +┆ ([\d.]+)", text)
    assert row, "the pairs table's first row"
    diff, low, high = (float(v) for v in row.groups())
    assert "ndcg@10: +0.011, [0.0018, 0.020]" in text
    assert (round(diff, 3), round(low, 4), round(high, 3)) == (0.011, 0.0018, 0.020)
    table = text.split("p_randomization_adj │")[1].split("```")[0]
    p_values = [float(v) for v in re.findall(r"┆ (0\.\d+|1\.0)\b", table)]
    assert len(p_values) == 9 * 3
    assert min(p_values) == pytest.approx(0.12, abs=0.005)
    ties = re.search(r"│ ndcg +┆ most-rated ┆ genre .*┆ (\d+) +┆ (\d+) +┆ (\d+) +│", text)
    assert ties
    assert ties.group(2) == "454"
    assert "454 of\n557 tie on ndcg@10" in text


def test_the_screenshot_is_the_reports_first_screen() -> None:
    image = pytest.importorskip("PIL.Image")
    with image.open(ROOT / "docs" / "assets" / "share-report.png") as shot:
        assert shot.size == (1280, 1500)
    assert "](assets/share-report.png)" in PAGE.read_text(encoding="utf-8")
