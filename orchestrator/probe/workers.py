"""A replay split across J pytest sessions at once (the driver's ``--workers J``).

For replay k the driver starts J sessions, each a process in its own process group (forked
from the driver, or a new interpreter with ``--spawn exec``), with the same pytest
arguments and ``REPLAY_WORKER=w/J``. Each session collects the whole selection and keeps its
share of whole modules (``orchestrator/probe/share.py``), writing the split to
``DIR/.split-<k>-w<w>.json`` before its first test and its probe result to
``DIR/.probe-<k>-w<w>.json`` at its end; its pytest output goes to
``DIR/replay-<k>-w<w>.log``. The replay's deadline (``--timeout``) applies to all of them:
past it every worker's group is killed.

The replay's result is one ``replay-probe/1`` document, the merge of the workers':

- the entries of every worker that wrote a result, in worker order;
- for each worker that did not, one entry per test of its share (known from its split file,
  or from any other worker's, since all compute the same split): ``timeout``
  (``replay_timeout``) when the deadline killed it, otherwise ``harness_error`` with reason
  ``signal`` (it died by a signal), ``no_result`` or ``corrupt_result``;
- entries of nodes that are no test of any share (a collection error, a name not found),
  which every worker reports, once.

The run document (``replay-run/1``) says ``"workers": J`` and lists each worker's
``worker``, ``status``, ``exit_code``, ``wall_ms`` and ``tests`` (the size of its share).
Its ``status`` is ``completed`` when a result could be merged, ``timeout`` when every
worker passed the deadline without a known share, and otherwise the first worker's status.
The sessions are started and waited for by ``orchestrator/probe/runner.py``; this module
holds the files and the merge. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from orchestrator.probe import PROBE_VERSION, RESULT_SCHEMA, SPLIT_SCHEMA
from orchestrator.probe.jobs import COMPLETED, NO_RESULT, TIMEOUT

HARNESS_ERROR: Final = "harness_error"
NO_CALLS: Final[Mapping[str, int]] = {}


def worker_files(out: Path, k: int, worker: int) -> tuple[Path, Path, Path]:
    """(probe result, split, log) of worker ``worker`` of replay ``k``."""
    stem = f"{k:03d}-w{worker}"
    return out / f".probe-{stem}.json", out / f".split-{stem}.json", out / f"replay-{stem}.log"


@dataclass(frozen=True, kw_only=True)
class WorkerOutcome:
    """How one worker of a split replay ended, and what it left."""

    worker: int
    status: str  # completed, timeout, no_result, corrupt_result
    exit_code: int | None
    wall_ms: float
    result: Mapping[str, Any] | None  # its replay-probe/1 document, when completed
    bins: tuple[tuple[str, ...], ...] | None  # the split it wrote, when it got that far


def read_split(path: Path, count: int) -> tuple[tuple[str, ...], ...] | None:
    """The bins a worker wrote, or None (not written, unreadable, or another shape)."""
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != SPLIT_SCHEMA:
        return None
    bins = document.get("bins")
    if not isinstance(bins, list) or len(bins) != count:
        return None
    if not all(isinstance(part, list) and all(isinstance(t, str) for t in part) for part in bins):
        return None
    return tuple(tuple(part) for part in bins)


def worker_summary(outcome: WorkerOutcome) -> dict[str, Any]:
    share = _share(outcome, [outcome])
    return {
        "worker": outcome.worker,
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "wall_ms": outcome.wall_ms,
        "tests": None if share is None else len(share),
    }


def _share(outcome: WorkerOutcome, everyone: Sequence[WorkerOutcome]) -> tuple[str, ...] | None:
    """The tests of a worker's share: from its own split, else from any other worker's."""
    for source in (outcome, *everyone):
        if source.bins is not None:
            return source.bins[outcome.worker - 1]
    return None


def _lost_entry(test_id: str, outcome: WorkerOutcome, count: int) -> dict[str, Any]:
    """The entry of a test whose worker left no result."""
    who = f"worker {outcome.worker} of {count}"
    if outcome.status == TIMEOUT:
        label, reason, message = TIMEOUT, "replay_timeout", f"the replay passed --timeout ({who})"
    elif isinstance(outcome.exit_code, int) and outcome.exit_code < 0:
        label, reason = HARNESS_ERROR, "signal"
        message = f"{who} was killed by signal {-outcome.exit_code}"
    else:
        label, reason = HARNESS_ERROR, outcome.status
        message = f"{who} left no usable result ({outcome.status}, exit {outcome.exit_code})"
    return {
        "nodeid": test_id,
        "label": label,
        "reason": reason,
        "assertion_id": None,
        "assertion_key": None,
        "message": message,
        "calls": dict(NO_CALLS),
        "duration_ms": 0.0,
    }


def merge_results(
    outcomes: Sequence[WorkerOutcome], count: int
) -> tuple[str, dict[str, Any] | None]:
    """(the replay's status, its merged replay-probe/1 document or None). Pure."""
    completed = [outcome for outcome in outcomes if outcome.result is not None]
    shares = {outcome.worker: _share(outcome, outcomes) for outcome in outcomes}
    if not completed and all(share is None for share in shares.values()):
        if outcomes and all(outcome.status == TIMEOUT for outcome in outcomes):
            return TIMEOUT, None
        return (outcomes[0].status if outcomes else NO_RESULT), None
    owned = {test_id for share in shares.values() if share is not None for test_id in share}
    tests: list[Any] = []
    skipped: list[Any] = []
    seen_other: set[str] = set()  # entries of nodes no share owns, reported by every worker
    for outcome in outcomes:
        if outcome.result is None:
            share = shares[outcome.worker] or ()
            tests.extend(_lost_entry(test_id, outcome, count) for test_id in share)
            continue
        for entry in _list(outcome.result.get("tests")):
            nodeid = entry.get("nodeid") if isinstance(entry, dict) else None
            if isinstance(nodeid, str) and nodeid not in owned:
                key = json.dumps(entry, sort_keys=True)
                if key in seen_other:
                    continue
                seen_other.add(key)
            tests.append(entry)
        skipped.extend(_list(outcome.result.get("skipped")))
    first = completed[0].result if completed and completed[0].result is not None else {}
    merged = {
        "schema": RESULT_SCHEMA,
        "probe_version": first.get("probe_version", PROBE_VERSION),
        "python": first.get("python"),
        "pytest": first.get("pytest"),
        "seed": first.get("seed"),
        "fixture": first.get("fixture"),
        "exit_status": _merged_exit_status(completed),
        "skipped": skipped,
        "tests": tests,
        "workers": count,
    }
    return COMPLETED, merged


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _merged_exit_status(completed: Sequence[WorkerOutcome]) -> int | None:
    """pytest's exit status of the whole: 5 (no tests) only when every worker had none."""
    statuses: list[int] = []
    for outcome in completed:
        status = None if outcome.result is None else outcome.result.get("exit_status")
        if isinstance(status, int) and not isinstance(status, bool):
            statuses.append(status)
    ran = [status for status in statuses if status != 5]
    if ran:
        return max(ran)
    return statuses[0] if statuses else None


def merged_exit_code(outcomes: Sequence[WorkerOutcome]) -> int | None:
    """A signal's (negative) code when a worker died by one, else the highest code but
    pytest's 5 (no tests), which only stands when every worker had it."""
    codes = [outcome.exit_code for outcome in outcomes if outcome.exit_code is not None]
    signalled = [code for code in codes if code < 0]
    if signalled:
        return signalled[0]
    ran = [code for code in codes if code != 5]
    if ran:
        return max(ran)
    return codes[0] if codes else None
