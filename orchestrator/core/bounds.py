"""The upper bounds of every count and input file the command line takes. Pure.

A count is spent before any container starts (a plan per replay, a lane per slot, a part
per shard), so an unbounded one spends the host's memory on a typo or a hostile job
definition. Every bound here is far above any run anyone needs, and each refusal is one
line naming the option and its range (exit 2, nothing written).
"""

from __future__ import annotations

from enum import StrEnum

MAX_REPLAYS = 1000  # replays per side: --replays, --screen, thaw --replays, budget --samples
# --evidence-cap: replays per side a round of evidence may reach (lanes.md section 3b);
# the exact tests sum over every deal of that many replays.
MAX_EVIDENCE_CAP = 200
MAX_SHRINK_ATTEMPTS = 20  # shrink --attempts: each is a whole shrink
MAX_JOBS = 1024  # --jobs: pytest workers per replay
MAX_SLOTS = 1024  # --slots: sides an engine runs at once
MAX_SHARDS = 1000  # --shard I/N: N
# --timeout: one replay (a whole-suite one included) past a day is a typo; a timeout the
# container's clock cannot hold would label every replay harness_error.
MAX_TIMEOUT_S = 24 * 3600.0
# A JSON payload given as a file (--fixture, shrink's FIXTURE, --shrink-report, --origin,
# digest's FILE, an admission request, an evidence file): read whole, parsed whole, kept
# in the run folder and mounted into every container.
MAX_INPUT_BYTES = 64 * 1024 * 1024
# A document of a run folder that report, merge and reproduce read (summary.json,
# run-log.json, evidence, decisions): written by the tool, but a folder can come from a
# downloaded CI artifact.
MAX_RUN_DOCUMENT_BYTES = 1024 * 1024 * 1024


def count_problem(flag: str, value: int, *, maximum: int, minimum: int = 1) -> str | None:
    """Why ``value`` is no count for ``flag`` (None: it is one)."""
    if minimum <= value <= maximum:
        return None
    return f"{flag} {value}: must be between {minimum} and {maximum}"


def false_block_rate_problem(flag: str, value: float) -> str | None:
    """Why ``value`` is no false-block rate (None: it is one, above 0 and at most 1; 1
    turns the evidence rule off)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        return f"{flag} {value!r}: must be above 0 and at most 1 (1: no evidence rule)"
    return None


def screen_problem(screen: int | None, replays: int) -> str | None:
    """Why ``--screen K`` cannot go with ``--replays N`` (None: it can).

    The K screening replays are the first of a property's N: K above N would replay a
    property more times than asked for and still decide it on N."""
    if screen is None or screen <= replays:
        return None
    return f"--screen {screen} is more than --replays {replays} (screening replays are part of N)"


class FileKind(StrEnum):
    """What a path names, as ``lstat`` sees it."""

    REGULAR = "regular file"
    DIRECTORY = "directory"
    SYMLINK = "symbolic link"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHARACTER_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"


def input_file_problem(
    name: str, *, kind: FileKind, size: int, cap: int = MAX_INPUT_BYTES
) -> str | None:
    """Why the input file ``name`` is not read (None: it is read, at most ``cap`` bytes).

    Only a regular file, never followed through a symbolic link (a link in a checked-out
    tree can point anywhere on the host), and never larger than the cap: a FIFO or a
    device would block or never end, a huge file would be held, parsed and copied whole.
    """
    if kind is not FileKind.REGULAR:
        return f"{name}: a {kind.value}, not a regular file"
    if size > cap:
        return f"{name}: {size} bytes, more than the {describe_bytes(cap)} an input file may have"
    return None


def describe_bytes(count: int) -> str:
    """``67108864`` -> ``"64 MiB"`` (whole units only; bytes otherwise)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"
