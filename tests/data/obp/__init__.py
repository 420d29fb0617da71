"""Open Bandit Pipeline's own output (``record.py`` makes it; see its docstring)."""

from __future__ import annotations
