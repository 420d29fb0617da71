"""A progress bar for long work: tqdm when installed, else one line on stderr.

Shown only when asked for, and then only once the work has taken ``delay`` seconds, so
quick runs print nothing.
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any

__all__ = ["Progress"]


class Progress:
    """Steps of ``total`` done so far, drawn after ``delay`` seconds when ``enabled``.

    Examples
    --------
    >>> bar = Progress(3, "evaluate: buckets", enabled=False)
    >>> bar.update(1); bar.update(2); bar.close()
    >>> bar.done
    3
    """

    def __init__(
        self, total: int, desc: str, *, enabled: bool, delay: float = 0.0, unit: str = "step"
    ) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.desc, self.delay, self.unit = desc, delay, unit
        self.started = time.perf_counter()
        self.bar: Any = None
        self.drawn = False

    def _draw(self) -> None:
        if self.bar is None and not self.drawn:
            try:
                tqdm = importlib.import_module("tqdm.auto").tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit)
                self.bar.update(self.done)
        self.drawn = True
        if self.bar is not None:
            return
        share = self.done / self.total if self.total else 1.0
        filled = int(30 * share)
        elapsed = time.perf_counter() - self.started
        sys.stderr.write(
            f"\r{self.desc} [{'#' * filled}{'.' * (30 - filled)}] "
            f"{self.done}/{self.total} {self.unit}s, {elapsed:.1f} s"
        )
        sys.stderr.flush()

    def update(self, n: int = 1) -> None:
        """Mark ``n`` more steps done."""
        self.done += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
        elif self.drawn or time.perf_counter() - self.started >= self.delay:
            self._draw()

    def close(self) -> None:
        """End the bar (a newline after the stderr line)."""
        if self.bar is not None:
            self.bar.close()
        elif self.drawn:
            sys.stderr.write("\n")
