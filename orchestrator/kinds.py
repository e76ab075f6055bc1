"""The kinds of freeze, apart from :mod:`orchestrator.model` (which re-exports them).

A ledger row carries its kind; the read commands (``freeze list``, ``check``) build rows
and print them, and creating ``model``'s dataclasses was the largest part of their
import time. Stdlib only, beside ``model`` at the bottom of the layers.
"""

from __future__ import annotations

from enum import StrEnum


class FreezeKind(StrEnum):
    FLAKE = "flake"
    TIMING = "timing"
