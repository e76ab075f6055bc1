"""What one pytest run is and what it leaves: a job, its environment, its result files.

The wire formats of the driver (`orchestrator/probe/driver.py` documents the protocol):
a serve-mode job line (replay-job/1), the probe's result file as the driver validates it,
and the replay-run/1 document with that result spliced in. Standard library only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from orchestrator.probe import JOB_SCHEMA, RESULT_SCHEMA

COMPLETED: Final = "completed"
TIMEOUT: Final = "timeout"
NO_RESULT: Final = "no_result"
CORRUPT_RESULT: Final = "corrupt_result"

FORK: Final = "fork"
EXEC: Final = "exec"
SPAWN_MODES: Final = (FORK, EXEC)

FIXTURE_ENV: Final = "REPLAY_FIXTURE"
PROGRESS_FD_ENV: Final = "REPLAY_PROGRESS_FD"
# The package root, so the child finds the plugin whatever PYTHONPATH the caller set.
PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True, kw_only=True)
class Job:
    """One pytest run: a replay of the batch mode, or one job of serve mode."""

    number: int  # k: the replay-<k> / job-<k> files, and "replay" in the run document
    pytest_args: tuple[str, ...]
    seed: int
    timeout_s: float
    fixture: str | None  # $REPLAY_FIXTURE of the run (None: unset)
    spawn: str
    job_id: str | None = None  # serve mode: the sender's id, echoed as "job"


class BadJob(ValueError):
    """A serve-mode input line that is not a valid replay-job/1 document."""


def hash_seed(seed: int) -> str:
    """The PYTHONHASHSEED of a replay with this seed (it must lie in [0, 2**32))."""
    return str(seed % 2**32)


def child_environment(
    base: dict[str, str],
    *,
    result_path: Path,
    seed: int,
    fixture: str | None = None,
    progress_fd: int | None = None,
) -> dict[str, str]:
    env = dict(base)
    env["REPLAY_RESULT"] = str(result_path)
    env["REPLAY_SEED"] = str(seed)
    if fixture is None:
        env.pop(FIXTURE_ENV, None)
    else:
        env[FIXTURE_ENV] = fixture
    if progress_fd is None:
        env.pop(PROGRESS_FD_ENV, None)
    else:
        env[PROGRESS_FD_ENV] = str(progress_fd)
    # The same string hashing in every replay, so set iteration order cannot differ.
    env["PYTHONHASHSEED"] = hash_seed(seed)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if PACKAGE_ROOT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, *paths])
    return env


def parse_job(line: bytes, number: int, *, default_seed: int, spawn: str) -> Job:
    """One serve-mode input line as a :class:`Job`; :class:`BadJob` says what is wrong."""
    try:
        document = json.loads(line.decode("utf-8"))
    except ValueError as error:
        raise BadJob(f"job {number}: not a JSON line ({error})") from None
    if not isinstance(document, dict) or document.get("schema") != JOB_SCHEMA:
        raise BadJob(f"job {number}: expected a {JOB_SCHEMA} object")
    job_id = document.get("id")
    if not isinstance(job_id, str):
        raise BadJob(f"job {number}: id must be a string")
    args = document.get("pytest_args")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise BadJob(f"job {job_id}: pytest_args must be a list of strings")
    fixture = document.get("fixture")
    if fixture is not None and not isinstance(fixture, str):
        raise BadJob(f"job {job_id}: fixture must be a path or null")
    timeout = document.get("timeout_s")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise BadJob(f"job {job_id}: timeout_s must be a number greater than 0")
    seed = document.get("seed", default_seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BadJob(f"job {job_id}: seed must be an integer")
    # A forked child hashes with the driver's seed: another one needs a new interpreter.
    same_hashing = hash_seed(seed) == hash_seed(default_seed)
    return Job(
        number=number,
        pytest_args=tuple(args),
        seed=seed,
        timeout_s=float(timeout),
        fixture=fixture,
        spawn=spawn if same_hashing else EXEC,
        job_id=job_id,
    )


def encode_notice(
    job: Job, status: str, *, name: str, digest: str | None, full: bool = False
) -> bytes:
    """The line a serving driver with ``--result-files`` writes when a job is done: its
    id, number and status, and the result file it wrote (``name``, in the job's folder)
    with the SHA-256 of its bytes (``digest``; none when there was no room for it:
    ``"results_full": true``). The host reads the file itself and takes only those bytes."""
    notice: dict[str, Any] = {"job": job.job_id, "replay": job.number, "status": status}
    if digest is not None:
        notice.update(result=name, sha256=digest)
    if full:
        notice["results_full"] = True
    return json.dumps(notice, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


def read_result(path: Path) -> tuple[str, bytes | None]:
    """(status, the result's validated JSON bytes); never trusts a half or foreign file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return NO_RESULT, None
    try:
        # Only the document itself is made (a whole suite's test entries are checked as
        # JSON and dropped: this driver shares the container's memory with the tests).
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=_result_only)
    except (ValueError, RecursionError):  # not UTF-8 or not JSON (a half-written file)
        return CORRUPT_RESULT, None
    if not isinstance(document, dict) or document.get("schema") != RESULT_SCHEMA:
        return CORRUPT_RESULT, None
    if not isinstance(document.get("tests"), list):
        return CORRUPT_RESULT, None
    return COMPLETED, raw


def _result_only(pairs: list[tuple[str, Any]]) -> dict[str, Any] | None:
    """The object that names its schema (the result itself), as a dict; no other."""
    return dict(pairs) if any(key == "schema" for key, _ in pairs) else None


def encode_run(run: dict[str, Any], result: bytes | None) -> bytes:
    """The replay-run/1 document with the probe's result spliced in as it was written.

    The result was already parsed once to validate it; splicing its bytes saves
    encoding thousands of test entries a second time.
    """
    head = json.dumps(run, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return head[:-1].encode("utf-8") + b',"result":' + (result or b"null") + b"}"


def encode_run_line(run: dict[str, Any], result: bytes | None) -> bytes:
    """:func:`encode_run` as one line (a result with line breaks is re-encoded compactly)."""
    if result is not None and (b"\n" in result or b"\r" in result):
        compact = json.dumps(
            json.loads(result.decode("utf-8")), separators=(",", ":"), ensure_ascii=False
        )
        result = compact.encode("utf-8")
    return encode_run(run, result) + b"\n"
