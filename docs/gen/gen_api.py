"""Write ``fm.evaluate``'s keywords into ``frame_metrics/api.py`` from the tables.

The signature after ``*,`` and the docstring's entries from ``metrics`` to the last
keyword are :func:`frame_metrics.keywords.signature_lines` and
:func:`frame_metrics.keywords.parameters_doc`; ``tests/test_keywords.py`` holds the file
equal to them. After changing a row of a table (a role, an extra input, an option, a
setting), run::

    python docs/gen/gen_api.py

and commit the rewritten ``frame_metrics/api.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from frame_metrics.keywords import parameters_doc, signature_lines

API = Path(__file__).resolve().parents[2] / "frame_metrics" / "api.py"


def rewritten(source: str) -> str:
    """``source`` (api.py) with evaluate's keywords written from the tables."""
    lines = source.split("\n")
    start = lines.index("def evaluate(")
    star = lines.index("    *,", start)
    end = lines.index(") -> FrameT:", star)
    lines[star + 1 : end] = signature_lines()
    first = lines.index("    metrics", end)
    last = lines.index("    Returns", first) - 1  # the blank line before Returns
    lines[first:last] = parameters_doc().split("\n")
    return "\n".join(lines)


def main() -> int:
    """Rewrite api.py; exit 1 with ``--check`` when it differs."""
    source = API.read_text(encoding="utf-8")
    new = rewritten(source)
    if "--check" in sys.argv:
        return int(new != source)
    API.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
