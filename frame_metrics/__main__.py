"""``python -m frame_metrics`` and the ``frame-metrics`` script: see :mod:`frame_metrics.cli`.

Without arguments, runs the demo: two models evaluated on built-in synthetic data.
"""

from __future__ import annotations

import sys

from frame_metrics.cli import demo, main

__all__ = ["demo", "main"]

if __name__ == "__main__":
    sys.exit(main())
