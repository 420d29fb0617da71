"""Recorded outputs of peers that cannot be installed with the test suite."""

from __future__ import annotations
