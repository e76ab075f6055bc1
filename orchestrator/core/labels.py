"""Replay labels from facts: one probe result file plus the engine's facts -> one label.

:func:`label_replay` combines what a ``replay-<k>.json`` file says (read by
``orchestrator.adapters.results`` into a :class:`ReplayFile`: ``ok``, ``missing``,
``corrupt``, ``unsafe``: not a regular file, or over its cap, see
:mod:`orchestrator.core.result_files`, or ``full``: the driver had no room left in the
results folder to write it) with what the engine says about the container that ran it
(:class:`ContainerFacts`) into one :class:`~orchestrator.model.Replay` for one
property. Labels come from facts, never from an exit status alone. The documents'
schema ids are the probe's own (``orchestrator.probe``), never copied.

Seed 000's classifier of one side's label list (:func:`classify_labels`) lives here
too: it keeps the seed's vocabulary so that its examples can be checked; the
composed two-sided rule is ``orchestrator.core.lanes.decide``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from orchestrator.core.result_files import RESULTS_FULL, UNSAFE_RESULT, results_full_message
from orchestrator.model import KNOWN_LABELS, Label, Replay
from orchestrator.probe import RESULT_SCHEMA, RUN_SCHEMA

FileState = Literal["ok", "missing", "corrupt", "unsafe", "full"]
RUN_STATUSES = ("completed", "timeout", "no_result", "corrupt_result")
SESSION_NODES = ("", "<session>")


@dataclass(frozen=True, kw_only=True)
class ReplayFile:
    """What one ``replay-<k>.json`` holds, or that it is missing or unusable.

    ``doc`` is set exactly when ``state`` is ``ok``, and is then a document that
    :func:`run_doc_problem` accepts.
    """

    replay: int
    state: FileState
    doc: Mapping[str, Any] | None = None
    problem: str | None = None


@dataclass(frozen=True, kw_only=True)
class ContainerFacts:
    """What the engine reported about the container that ran a replay.

    ``engine_error`` is a harness sub-reason (``docker_api``, ``engine_gone``,
    ``image_not_found``) when the engine failed us; ``killed_at_deadline`` is set
    only when *we* killed the container at the side's deadline; ``cancelled`` when
    we killed it because the user interrupted the run.
    """

    image_id: str | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    killed_at_deadline: bool = False
    cancelled: bool = False
    engine_error: str | None = None
    message: str | None = None


# ------------------------------------------------------------------ document checks


# Past the memory a side's container has (--memory; docs/security.md).
OOM_MESSAGE = (
    "the container hit its memory limit and was OOM-killed (replay --memory gives it more)"
)


def run_doc_problem(doc: Any) -> str | None:
    """Why a ``replay-run/1`` document cannot be used (``None`` when it can)."""
    if not isinstance(doc, Mapping):
        return "not a JSON object"
    if doc.get("schema") != RUN_SCHEMA:
        return f"schema is {doc.get('schema')!r}, expected {RUN_SCHEMA!r}"
    status = doc.get("status")
    if status not in RUN_STATUSES:
        return f"unknown status {status!r}"
    if status == "completed":
        return probe_doc_problem(doc.get("result"))
    return None


def probe_doc_problem(result: Any) -> str | None:
    """Why a ``replay-probe/1`` document cannot be used (``None`` when it can)."""
    if not isinstance(result, Mapping):
        return "completed without a result"
    if result.get("schema") != RESULT_SCHEMA:
        return f"result schema is {result.get('schema')!r}, expected {RESULT_SCHEMA!r}"
    tests = result.get("tests")
    if not isinstance(tests, list):
        return "result has no tests list"
    for entry in tests:
        if not isinstance(entry, Mapping):
            return "a test entry is not an object"
        if not isinstance(entry.get("nodeid"), str) or not isinstance(entry.get("label"), str):
            return "a test entry lacks nodeid or label"
        calls = entry.get("calls", {})
        if not isinstance(calls, Mapping) or not all(
            isinstance(name, str) and isinstance(count, int) and not isinstance(count, bool)
            for name, count in calls.items()
        ):
            return f"{entry['nodeid']}: calls is not a map of counts"
        duration = entry.get("duration_ms")
        if duration is not None and not isinstance(duration, int | float):
            return f"{entry['nodeid']}: duration_ms is not a number"
    return None


def tests_named(doc: Mapping[str, Any]) -> int:
    """How many test entries a ``replay-run/1`` document holds (run and skipped)."""
    result = doc.get("result")
    if not isinstance(result, Mapping):
        return 0
    tests, skipped = result.get("tests"), result.get("skipped")
    return (len(tests) if isinstance(tests, list) else 0) + (
        len(skipped) if isinstance(skipped, list) else 0
    )


def _tests(doc: Mapping[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    """A completed run's test entries (the document's own list: never copied, a replay
    of a whole suite holds one entry per test)."""
    if doc is None or doc.get("status") != "completed":
        return ()
    tests: Sequence[Mapping[str, Any]] = doc["result"]["tests"]
    return tests


def _skipped_entries(doc: Mapping[str, Any] | None) -> dict[str, str | None]:
    """The tests a completed run skipped (its result's ``skipped`` list): node id -> the
    skip's reason (None when it gave none)."""
    if doc is None or doc.get("status") != "completed":
        return {}
    listed = doc["result"].get("skipped")
    if not isinstance(listed, list):
        return {}
    found: dict[str, str | None] = {}
    for entry in listed:
        if isinstance(entry, Mapping) and isinstance(entry.get("nodeid"), str):
            reason = entry.get("reason")
            found[entry["nodeid"]] = reason if isinstance(reason, str) else None
    return found


def nodeids_seen(files: Iterable[ReplayFile]) -> tuple[str, ...]:
    """Every test node id any completed replay reported, in first-seen order: the tests
    that ran, then those it skipped (a skipped test is a state, not an absent test)."""
    seen: dict[str, None] = {}
    for replay_file in files:
        if replay_file.state == "ok":
            for entry in _tests(replay_file.doc):
                seen.setdefault(entry["nodeid"], None)
            for nodeid in _skipped_entries(replay_file.doc):
                seen.setdefault(nodeid, None)
    return tuple(seen)


def skipped_in(replay_file: ReplayFile, property_id: str) -> bool:
    """Did this completed run skip ``property_id`` (its result lists it as skipped)?"""
    if replay_file.state != "ok":
        return False
    return property_id in _skipped_entries(replay_file.doc)


# ------------------------------------------------------------------ one replay


def _encloses(parent: str, property_id: str) -> bool:
    """Is ``parent`` (a module, a directory, the session) a node above ``property_id``?"""
    return (
        parent in SESSION_NODES
        or property_id.startswith(parent + "::")
        or property_id.startswith(parent.rstrip("/") + "/")
    )


class EntryIndex:
    """One replay's test entries, indexed so that finding the entry of each of thousands
    of properties does not scan every entry for each of them."""

    def __init__(
        self,
        tests: Sequence[Mapping[str, Any]],
        skipped: Mapping[str, str | None] | None = None,
    ) -> None:
        self.last: dict[str, Mapping[str, Any]] = {}
        self.skipped: Mapping[str, str | None] = skipped or {}
        # harness_error entries by node id, and by node id without trailing slashes (a
        # directory), each with its position, so that enclosing nodes come out in order.
        self.harness: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
        self.harness_dirs: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
        for position, entry in enumerate(tests):
            nodeid = entry["nodeid"]
            self.last[nodeid] = entry
            if entry["label"] == Label.HARNESS_ERROR:
                self.harness.setdefault(nodeid, []).append((position, entry))
                self.harness_dirs.setdefault(nodeid.rstrip("/"), []).append((position, entry))

    def skip_of(self, property_id: str) -> tuple[bool, str | None]:
        """Whether the run skipped ``property_id`` or a node above it (a module that skips
        itself on import), and the skip's reason."""
        if not self.skipped:
            return False, None
        if property_id in self.skipped:
            return True, self.skipped[property_id]
        for cut in range(len(property_id) - 1, 0, -1):
            if property_id.startswith(("::", "/"), cut):
                parent = property_id[:cut]
                if parent in self.skipped:
                    return True, self.skipped[parent]
        return False, None

    def enclosing(self, property_id: str) -> list[Mapping[str, Any]]:
        """The harness_error entries of nodes above ``property_id`` (``_encloses``), in order."""
        if not self.harness:  # a run without any (most): nothing encloses anything
            return []
        found: dict[int, Mapping[str, Any]] = {}
        parents = set(SESSION_NODES)
        start = property_id.find("::")
        while start >= 0:  # a module or a class: property_id starts with parent + "::"
            parents.add(property_id[:start])
            start = property_id.find("::", start + 1)
        for parent in parents:
            for position, entry in self.harness.get(parent, ()):
                found[position] = entry
        slash = property_id.find("/")
        while slash >= 0:  # a directory: property_id starts with parent.rstrip("/") + "/"
            for position, entry in self.harness_dirs.get(property_id[:slash], ()):
                found[position] = entry
            slash = property_id.find("/", slash + 1)
        return [
            entry for position, entry in sorted(found.items()) if entry["nodeid"] != property_id
        ]


def _entry_for(property_id: str, index: EntryIndex) -> Mapping[str, Any] | None:
    """The entry that tells what happened to ``property_id`` in one replay.

    A collection error is reported against the module (or a directory, or the
    session), not the test; pytest then also reports the test as not found. The
    collection error is the cause, so it wins over that ``not_found``.
    """
    exact = index.last.get(property_id)
    above = index.enclosing(property_id)
    if exact is not None and not (exact.get("reason") == "not_found" and above):
        return exact
    if above:
        return above[0]
    return None


def _harness(reason: str, message: str | None) -> Replay:
    return Replay(label=Label.HARNESS_ERROR, reason=reason, message=message)


# pytest's exit codes that end a session before it writes results (pytest.ExitCode).
_PYTEST_EXITS = {2: "interrupted", 3: "internal error", 4: "usage error"}
_TAIL_MESSAGE_CHARS = 1000


def no_result_message(driver_status: str, exit_code: Any, output_tail: Any) -> str:
    """Why a replay has no result, in one line: pytest's exit code and what it printed
    last (the driver's ``output_tail``, e.g. ``unrecognized arguments: --cov``). Pure."""
    what = "wrote no result" if driver_status == "no_result" else f"reported {driver_status}"
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code >= 0:
        meaning = _PYTEST_EXITS.get(exit_code)
        message = f"pytest exited {exit_code}{f' ({meaning})' if meaning else ''} and {what}"
    else:
        message = f"the driver {what}"
    if isinstance(output_tail, str) and output_tail.strip():
        lines = [line.strip() for line in output_tail.splitlines() if line.strip()]
        message += ": " + " | ".join(lines)[-_TAIL_MESSAGE_CHARS:]
    return message


USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR
USAGE_HINT = (
    "pytest refused the command or the project's configuration (an addopts option of a "
    "plugin, required_plugins, minversion): the image lacks what the project's tests need. "
    "Build the project's image with its test dependencies (orchestrator image build --repo "
    "...) or replay with --image of one that has them"
)


def without_result(doc: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """For a ``replay-run/1`` document whose session wrote no usable result: why, in one
    line (:func:`no_result_message`), and what to do when pytest refused its arguments;
    None for a completed or timed-out replay. Pure."""
    status = doc.get("status")
    if status in ("completed", "timeout"):
        return None
    exit_code = doc.get("exit_code")
    message = no_result_message(str(status), exit_code, doc.get("output_tail"))
    return message, USAGE_HINT if exit_code == USAGE_ERROR else None


def _unfinished(
    facts: ContainerFacts,
    driver_status: str | None,
    exit_code: Any,
    output_tail: Any = None,
) -> Replay:
    """The label of a replay without a usable result, from the container's facts."""
    if facts.engine_error is not None:
        return _harness(facts.engine_error, facts.message)
    if facts.oom_killed:
        return _harness(
            "oom",
            OOM_MESSAGE,
        )
    if driver_status is None and facts.killed_at_deadline:
        return Replay(label=Label.TIMEOUT, reason="deadline", message="side deadline passed")
    if driver_status is None and facts.cancelled:
        return _harness("interrupted", "the run was interrupted")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code < 0:
        return _harness("signal", f"the replay process was killed by signal {-exit_code}")
    if driver_status is None and facts.exit_code is not None and facts.exit_code > 128:
        signal_number = facts.exit_code - 128
        return _harness("signal", f"the container exited by signal {signal_number}")
    if driver_status is not None:
        return _harness(driver_status, no_result_message(driver_status, exit_code, output_tail))
    return _harness("no_result", "no result file was written")


READ_ONLY_TREE = "read_only_tree"
READ_ONLY_FS = "read_only_fs"
WRITABLE_TREE_HINT = "replay with --writable-tree to give each side a private writable copy"


def read_only_replay(entry: Mapping[str, Any]) -> Replay | None:
    """A failure the read-only file system caused (the probe's ``read_only`` fact) is no
    verdict on the code: ``harness_error`` with ``read_only_tree`` (a write into the
    tested tree, which ``--writable-tree`` allows) or ``read_only_fs`` (a write elsewhere
    on the image's read-only root; HOME and TMPDIR are writable). The write may be a
    test's, or the session's at any moment (the ``<session>`` entry: a plugin or a
    conftest at its start, a hook at its end)."""
    fact = entry.get("read_only")
    if not isinstance(fact, Mapping) or entry.get("label") == Label.ASSERT_PASS:
        return None
    path = fact.get("path")
    where = path if isinstance(path, str) else "a file"
    message = entry.get("message")
    detail = f" ({message})" if isinstance(message, str) and message else ""
    who = "the pytest session" if entry.get("nodeid") in SESSION_NODES else "the test"
    if fact.get("in_rootdir") is False:
        return _harness(
            READ_ONLY_FS,
            f"{who} wrote {where} on the image's read-only file system{detail}; "
            "write under $TMPDIR or $HOME",
        )
    return _harness(
        READ_ONLY_TREE,
        f"{who} wrote {where} in its read-only tree{detail}; {WRITABLE_TREE_HINT}",
    )


class SharedValues:
    """One object for each distinct value many replays carry (a suite's labels, the
    call counts of its tests, mostly all zero): a whole suite's replays hold one copy
    each instead of one per test. The values handed out are never changed (a
    :class:`~orchestrator.model.Replay` is frozen, and so are its counts by use)."""

    def __init__(self) -> None:
        self._calls: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
        self._strings: dict[str, str] = {}

    def calls(self, counts: Mapping[str, int]) -> dict[str, int]:
        key = tuple(counts.items())
        found = self._calls.get(key)
        if found is None:
            found = self._calls[key] = dict(counts)
        return found

    def string(self, value: str) -> str:
        return self._strings.setdefault(value, value)


def _from_entry(
    entry: Mapping[str, Any],
    property_id: str,
    *,
    image_digest: str | None = None,
    runner_id: str | None = None,
    shared: SharedValues | None = None,
) -> Replay:
    duration = entry.get("duration_ms")
    reason = entry.get("reason")
    message = entry.get("message")
    assertion_id = entry.get("assertion_id")
    assertion_key = entry.get("assertion_key")
    calls = entry.get("calls", {})
    calls = shared.calls(calls) if shared is not None else dict(calls)
    label = entry["label"]
    if entry["nodeid"] != property_id and label == Label.HARNESS_ERROR:
        reason = reason or "collection_error"
    read_only = read_only_replay(entry)
    if read_only is not None:
        return replace(
            read_only,
            calls=calls,
            duration_ms=float(duration) if duration is not None else None,
            image_digest=image_digest,
            runner_id=runner_id,
        )
    return Replay(
        label=shared.string(label) if shared is not None else label,
        assertion_id=assertion_id if isinstance(assertion_id, str) else None,
        assertion_key=assertion_key if isinstance(assertion_key, str) else None,
        calls=calls,
        duration_ms=float(duration) if duration is not None else None,
        image_digest=image_digest,
        runner_id=runner_id,
        reason=reason if isinstance(reason, str) else None,
        message=message if isinstance(message, str) else None,
    )


def label_replay(
    replay_file: ReplayFile,
    facts: ContainerFacts,
    property_id: str,
    index: EntryIndex | None = None,
) -> Replay:
    """The label of one property in one replay (without image/runner stamps); ``index``
    is :class:`EntryIndex` of the replay's entries, when the caller labels many."""
    return _label(replay_file, facts, property_id, index)


def _label(
    replay_file: ReplayFile,
    facts: ContainerFacts,
    property_id: str,
    index: EntryIndex | None,
    *,
    runner_id: str | None = None,
    shared: SharedValues | None = None,
) -> Replay:
    """:func:`label_replay`; with ``runner_id`` stamped with it and the image (the label
    of a test's own entry is made stamped, not copied)."""
    stamped = runner_id is not None
    if replay_file.state == "unsafe":  # never followed, never copied: no verdict
        return _harness(UNSAFE_RESULT, replay_file.problem)
    if replay_file.state == "full":  # the driver had no room left to write it
        return _harness(RESULTS_FULL, results_full_message())
    if replay_file.state == "corrupt":
        if facts.oom_killed:
            return _harness(
                "oom",
                OOM_MESSAGE,
            )
        return _harness("corrupt_result", replay_file.problem)
    if replay_file.state == "missing" or replay_file.doc is None:
        return _unfinished(facts, None, None)
    doc = replay_file.doc
    status = doc["status"]
    if status == "timeout":
        return Replay(
            label=Label.TIMEOUT, reason="replay_timeout", message="the replay passed --timeout"
        )
    if status != "completed" and doc.get("results_full") is True:
        return _harness(RESULTS_FULL, results_full_message())
    if status != "completed":
        return _unfinished(facts, status, doc.get("exit_code"), doc.get("output_tail"))
    if index is None:
        index = EntryIndex(_tests(doc), _skipped_entries(doc))
    exact = index.last.get(property_id)
    if exact is None or exact.get("reason") == "not_found":
        skipped, reason = index.skip_of(property_id)
        if skipped:
            return skipped_replay(reason)
    entry = _entry_for(property_id, index)
    if entry is None:
        return _harness("not_found", f"{property_id} was not collected")
    if not stamped:
        return _from_entry(entry, property_id)
    return _from_entry(
        entry, property_id, image_digest=facts.image_id, runner_id=runner_id, shared=shared
    )


def skipped_replay(reason: str | None) -> Replay:
    """The project skipped the test (or it xfailed): ``skipped``, its reason as message."""
    return Replay(label=Label.SKIPPED, message=reason or None)


def label_replays(
    observed: Sequence[tuple[ReplayFile, ContainerFacts]],
    property_ids: Sequence[str],
    *,
    runner_id: str,
) -> dict[str, tuple[Replay, ...]]:
    """One :class:`Replay` per property per replay, stamped with image and runner."""
    indexes = [
        EntryIndex(_tests(replay_file.doc), _skipped_entries(replay_file.doc))
        for replay_file, _ in observed
    ]
    shared = SharedValues()
    pairs = list(zip(observed, indexes, strict=True))
    labelled: dict[str, tuple[Replay, ...]] = {}
    for property_id in property_ids:
        replays = []
        for (replay_file, facts), index in pairs:
            replay = _label(
                replay_file, facts, property_id, index, runner_id=runner_id, shared=shared
            )
            if replay.runner_id != runner_id or replay.image_digest != facts.image_id:
                replay = replace(replay, image_digest=facts.image_id, runner_id=runner_id)
            replays.append(replay)
        labelled[property_id] = tuple(replays)
    return labelled


def mark_image_mismatch(
    labelled: Mapping[str, tuple[Replay, ...]], expected: str, observed: Iterable[str | None]
) -> dict[str, tuple[Replay, ...]]:
    """Every replay becomes ``harness_error``/``image_mismatch``."""
    seen = ", ".join(sorted({image or "none" for image in observed}))
    message = f"containers ran images {seen}, the run pinned {expected}"
    return {
        property_id: tuple(
            replace(
                replay,
                label=Label.HARNESS_ERROR,
                assertion_id=None,
                assertion_key=None,
                reason="image_mismatch",
                message=message,
            )
            for replay in replays
        )
        for property_id, replays in labelled.items()
    }


# ------------------------------------------------------------------ seed 000

SEED_REPLAYS = 5  # the seed's proposal, not a tuned threshold


def classify_labels(runs: Sequence[str], replays: int = SEED_REPLAYS) -> str:
    """``reject_malformed``, ``infra_queue``, ``block_patch``, ``not_reproduced`` or
    ``freeze_eligible`` for one replay list (seed 000)."""
    if len(runs) != replays or any(run not in KNOWN_LABELS for run in runs):
        return "reject_malformed"
    if not all(Label.is_completed(run) for run in runs):
        return "infra_queue"
    fails = sum(run == Label.ASSERT_FAIL for run in runs)
    if fails == replays:
        return "block_patch"
    if fails == 0:
        return "not_reproduced"
    return "freeze_eligible"
