"""frame_metrics test suite."""

from __future__ import annotations
