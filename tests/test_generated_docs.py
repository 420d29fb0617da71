"""Documentation pages generated from the code stay equal to what the code generates."""

from __future__ import annotations

from pathlib import Path

from frame_metrics import options
from frame_metrics.conventions import markdown

ROOT = Path(__file__).resolve().parent.parent


def test_conventions_page_is_generated_from_the_presets() -> None:
    # Regenerate with: python -c "from frame_metrics.conventions import markdown;
    # open('docs/conventions.md', 'w').write(markdown())"
    page = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    assert page == markdown()


def test_options_page_is_generated_from_the_option_table() -> None:
    # Regenerate with: python -c "from frame_metrics.options import markdown;
    # open('docs/options.md', 'w').write(markdown())"
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert page == options.markdown()
