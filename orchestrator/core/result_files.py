"""Which files a container may hand back, and how large. Pure.

The tree under test runs in the same container as the probe and can write anything into
the results folder: a symlink to a host secret, a FIFO, a device, a file of gigabytes.
The host never opens that folder. A small reader the tool runs in the container
reports every top-level entry (its kind and size) and the bytes of the regular ones
under the cap; this module decides, from that report alone, what the host accepts:
regular files with a plain name, each under :data:`FILE_BYTES`, at most
:data:`ENTRIES` of them. Anything else is *unsafe*: labelled ``harness_error`` /
``unsafe_result``, never followed, never copied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Final

MIB: Final = 1024 * 1024
# Where the results folder is in the container.
RESULTS_FOLDER: Final = "/replay-out"
# The results folder is a tmpfs of this size in the container (charged to its memory).
TMPFS_BYTES: Final = 64 * MIB
# One result file (a replay of a whole suite of some ten thousand tests is a few MiB).
FILE_BYTES: Final = 32 * MIB
# Entries the reader reports; a folder with more is refused whole.
ENTRIES: Final = 1024
# What the host reads of the reader's stream: every file at its cap, plus tar headers.
STREAM_BYTES: Final = TMPFS_BYTES + 2 * MIB
# A plain file name: what the driver and the collection plugin write, nothing else.
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

UNSAFE_RESULT: Final = "unsafe_result"
RESULTS_FULL: Final = "results_full"
KINDS: Final = ("file", "symlink", "fifo", "directory", "device", "socket", "other")


@dataclass(frozen=True, kw_only=True)
class ResultEntry:
    """One top-level entry of the results folder as the reader saw it (``lstat``)."""

    name: str
    kind: str
    size: int


def entry_problem(entry: ResultEntry, *, file_bytes: int = FILE_BYTES) -> str | None:
    """Why the host must not take this entry, or None when it is a plain, small file."""
    if not _PLAIN_NAME.fullmatch(entry.name):
        return f"a result entry with a name that is not plain ({entry.name!r})"
    if entry.kind != "file":
        kind = entry.kind if entry.kind in KINDS else "other"
        return f"{entry.name} is a {kind}, not a regular file"
    if entry.size < 0 or entry.size > file_bytes:
        return f"{entry.name} is {entry.size} bytes, over the cap of {file_bytes} bytes"
    return None


def folder_problem(entries: int, *, limit: int = ENTRIES) -> str | None:
    """Why the whole folder is refused: more entries than any run writes."""
    if entries > limit:
        return f"the results folder holds more than {limit} entries"
    return None


def stray_problem(alive: object) -> str | None:
    """Why the whole folder is refused when the reader found processes of the tree still
    alive (the reaper kills every one before it reads; one that survived could have
    written the reader's output): ``alive`` as its report says it."""
    if isinstance(alive, int) and not isinstance(alive, bool) and alive == 0:
        return None
    if isinstance(alive, int) and not isinstance(alive, bool) and alive > 0:
        return (
            f"{alive} processes the tests left behind were still alive when the results were read"
        )
    return "the results report is malformed"


# The driver's line after it wrote a result: ``result <name> <sha256 of the bytes>``. A
# process the tree left behind may rewrite the file after that; the host takes a replay
# file only when the driver announced exactly those bytes, and only one version.
_ANNOUNCED: Final = re.compile(r"result (replay-[0-9]{3}\.json) ([0-9a-f]{64})")
# The driver's line when the folder had no room left for a result: ``results-full <name>``.
_FULL: Final = re.compile(r"results-full (replay-[0-9]{3}\.json)")
ANNOUNCED_NAME: Final = re.compile(r"replay-[0-9]{3}\.json")


def announcement(line: str) -> tuple[str, str] | None:
    """``(name, digest)`` of a driver's result line, None for any other line."""
    found = _ANNOUNCED.fullmatch(line.strip())
    return None if found is None else (found.group(1), found.group(2))


def full_announcement(line: str) -> str | None:
    """The name of the result the driver had no room to write, or None."""
    found = _FULL.fullmatch(line.strip())
    return None if found is None else found.group(1)


def results_full_message() -> str:
    """Why a replay has no result when its folder filled up (the tests share it)."""
    return (
        f"the results folder ({RESULTS_FOLDER}, {TMPFS_BYTES // MIB} MiB) is full: a test "
        "wrote into it, and its result had no room left"
    )


def announced_problem(name: str, digest: str, announced: Mapping[str, Set[str]]) -> str | None:
    """Why a replay file's bytes (``digest``, their SHA-256) are not the driver's:
    ``announced`` holds every digest the container's output announced for each name."""
    said = announced.get(name, frozenset())
    if len(said) > 1:
        return f"{name} was announced with {len(said)} different contents"
    if digest not in said:
        return f"{name} is not the file the driver wrote (changed after it, or not by it)"
    return None


# A served job's result (the probe driver's serve mode with ``--result-files``): one file
# in a folder of the job's own in the results folder, announced by a notice on the job
# channel. The host reads the file through its reader, as a replay's.
SERVED_RESULT: Final = "replay-001.json"
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


def served_folder(number: int) -> str:
    """The name of job ``number``'s folder in the results folder."""
    return f"job-{number:06d}"


@dataclass(frozen=True, kw_only=True)
class JobNotice:
    """What a serving driver said of a job it finished: the SHA-256 of the result file it
    wrote (:data:`SERVED_RESULT`), or that it had no room to write one (``full``)."""

    digest: str | None
    full: bool = False


def job_notice(document: Mapping[str, object], *, number: int, job_id: str) -> JobNotice | str:
    """The notice of job ``number`` (sent as ``job_id``), or why ``document`` is not one."""
    said_id, said_number = document.get("job"), document.get("replay")
    if said_id != job_id:
        return f"a result for job {said_id!r} came back for job {job_id!r}"
    if isinstance(said_number, bool) or said_number != number:
        return f"job {job_id!r} came back as job number {said_number!r}, not {number}"
    digest = document.get("sha256")
    if digest is None and document.get("result") is None and document.get("results_full") is True:
        return JobNotice(digest=None, full=True)
    if document.get("result") != SERVED_RESULT:
        return f"job {job_id!r}'s notice names no result file {SERVED_RESULT}"
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        return f"job {job_id!r}'s notice carries no SHA-256 of its result"
    return JobNotice(digest=digest)
