"""The report's screenshot on docs/share.md: ``python docs/gen/gen_screenshot.py``.

Runs the page's recorded blocks on MovieLens (as ``gen_run.py`` does), writes the report
they build and renders its first screen in headless Chromium, 1,280 px wide, into
``docs/assets/share-report.png``. Needs the data and Debian's ``chromium``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_run

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "docs" / "assets" / "share-report.png"
#: The first screen: the means table and the first curves.
WINDOW = (1280, 1500)


def main() -> int:
    """Record the page, write its report, and shoot the report's first screen."""
    data = gen_run.find_movielens(ROOT)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if data is None or browser is None:
        print("needs MovieLens ml-latest-small and chromium", file=sys.stderr)
        return 1
    page: dict[str, Any] = {}
    gen_run.record_page(ROOT / "docs" / "share.md", data, page)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.html"
        page["shared"].write(report)
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={Path(folder) / 'profile'}",
             f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={TARGET}",
             report.as_uri()],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
