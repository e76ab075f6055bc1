"""How many tests a side may name and how many bytes a run folder may take. Pure.

What a container hands back is the tree's to write: a process it left behind can forge a
result that lists a hundred thousand tests, and the host's memory and the run folder
grow with every test it keeps. These caps are the safety net (the defaults let a suite
of 100,000 tests run; the CI owner may set others in the host's environment):

- tests per side, :data:`TESTS_PER_SIDE` (``ORCHESTRATOR_MAX_TESTS``): a side's
  collection that names more is refused (exit 3 naming the cap, before any replay); a
  replay result that names more is that replay's ``harness_error`` / ``corrupt_result``,
  its tests never labelled;
- bytes per run folder, :data:`RUN_BYTES` (``ORCHESTRATOR_MAX_RUN_BYTES``): a write that
  would take the folder past it is refused before a byte of it is written; the run ends
  with exit 3 naming the cap, its folder left ``INCOMPLETE`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

GIB: Final = 1024 * 1024 * 1024
TESTS_PER_SIDE: Final = 200_000
RUN_BYTES: Final = 16 * GIB
TESTS_VARIABLE: Final = "ORCHESTRATOR_MAX_TESTS"
BYTES_VARIABLE: Final = "ORCHESTRATOR_MAX_RUN_BYTES"
RUN_FOLDER_CAP: Final = "run_folder_cap"  # the reason of the write refused


@dataclass(frozen=True, kw_only=True)
class RunCaps:
    max_tests: int = TESTS_PER_SIDE
    max_run_bytes: int = RUN_BYTES


def run_caps(env: Mapping[str, str]) -> RunCaps:
    """The caps, from the defaults or the host's environment; a value that is not a
    positive whole number raises ValueError naming the variable."""
    values = {}
    for name, default in ((TESTS_VARIABLE, TESTS_PER_SIDE), (BYTES_VARIABLE, RUN_BYTES)):
        text = env.get(name, "").strip()
        if not text:
            values[name] = default
            continue
        if not text.isascii() or not text.isdigit() or int(text) < 1:
            raise ValueError(f"{name} must be a positive whole number, not {text!r}")
        values[name] = int(text)
    return RunCaps(max_tests=values[TESTS_VARIABLE], max_run_bytes=values[BYTES_VARIABLE])


def too_many_tests(count: int, caps: RunCaps, *, what: str = "the result") -> str | None:
    """Why ``what`` naming ``count`` tests is refused, naming the cap; None when it fits."""
    if count > caps.max_tests:
        return (
            f"{what} names {count} tests, over the cap of {caps.max_tests} tests per side "
            f"({TESTS_VARIABLE})"
        )
    return None


def bytes_problem(used: int, adding: int, caps: RunCaps) -> str | None:
    """Why writing ``adding`` more bytes into a run folder holding ``used`` is refused."""
    if used + adding > caps.max_run_bytes:
        return (
            f"the run folder would take {used + adding} bytes, over the cap of "
            f"{caps.max_run_bytes} ({BYTES_VARIABLE})"
        )
    return None
