"""A side's screening evidence kept for a later run of the same side (docs/lanes.md
section 10, "Reusing a side's screening"). Pure.

The **key** digests everything that decides what a side's screening containers observe:
the tree as the container sees it (the commit's tree id, what an overlay laid over it or
removed, a mutant's bytes), the image ID, the interpreter, the driver's whole command line
(replays K, seed, workers, writable tree, the neutralisers, the node ids handed to
pytest; not the deadline, which moves with the recorded durations: an entry stands in
only where each of its replays ended in at most half of the reusing run's deadline),
the container's environment (PYTHONPATH included) and limits, the isolation, the runner
id, the fixture's bytes, the probe's own digest and this rule's version. Two runs with
one key run the same bytes the same way: their evidence has one distribution.

The **scope** is part of the key: ``shared`` for a side whose tree is its own revision's
and nothing else, so that only a run of that very tree can reuse it; ``patch:<sha>`` for
a side that holds bytes of another revision (``--tests-from``: a pull request's tests laid
over the base), which only a run of the same patch (a re-run of the same pull request)
reuses. A pull request cannot write evidence under a shared key of any tree but its own.

An **entry** is the raw ``replay-<k>.json`` bytes of each screening replay as the reader
brought them back, with the engine's facts about their container; a reusing run parses
and labels them exactly as it would have the container's (so reuse decides nothing
itself). It is stored only from a side whose screening went cleanly
(:func:`unclean_reason`) and is verified by digest when read (:func:`entry_problem`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.digest import DIGEST_PREFIX, canonical_json, digest
from orchestrator.core.labels import SESSION_NODES, ContainerFacts, ReplayFile

ENTRY_SCHEMA = "replay-side-evidence/1"
# Bumped whenever what a key covers, or what an entry holds, changes meaning.
KEY_VERSION = 1
SHARED = "shared"
PATCH_SCOPE = "patch:"


def scope_of(*, foreign_bytes: bool, patch_rev: str) -> str:
    """``shared`` for a tree that is its own revision's alone; ``patch:<sha>`` for one that
    holds another revision's bytes (an overlay, a mutant): only a run of the same patch
    may reuse it, so no pull request plants evidence another one reads."""
    return f"{PATCH_SCOPE}{patch_rev}" if foreign_bytes else SHARED


def screening_stored(*, reuse: bool, screens: bool, ledger: bool, cache: bool) -> bool:
    """Whether a run's sides' screening is looked up in a store and kept there: reuse on
    (no ``--no-reuse``), a screened run, and a store (the ledger it records in, an
    evidence cache). The one rule: the run's reuse and its default workers
    (``core.schedule.screening_jobs``) both follow it."""
    return reuse and screens and (ledger or cache)


@dataclass(frozen=True, kw_only=True)
class SideKeyInputs:
    """Everything that decides what one side's screening containers observe."""

    scope: str
    tree: str  # the commit's tree id
    overlay_write: Mapping[str, str] = field(default_factory=dict)  # path -> blob laid over
    overlay_remove: tuple[str, ...] = ()  # paths removed from the tree
    mutant: str | None = None  # sha256 of the mutant's bytes
    image_id: str
    interpreter: str
    runner_id: str
    # The driver's command line per container (what pytest is handed, K, seed, workers,
    # the neutralisers, the writable tree's copy), its deadline left out
    # (:func:`without_deadline`).
    commands: tuple[tuple[str, ...], ...]
    exec_environment: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)  # PYTHONPATH included
    limits: Mapping[str, Any] = field(default_factory=dict)
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    isolation: str = "side"
    fixture_sha256: str | None = None
    probe_digest: str
    probe_version: str

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ENTRY_SCHEMA,
            "key_version": KEY_VERSION,
            "scope": self.scope,
            "tree": self.tree,
            "overlay_write": dict(sorted(self.overlay_write.items())),
            "overlay_remove": sorted(self.overlay_remove),
            "mutant": self.mutant,
            "image_id": self.image_id,
            "interpreter": self.interpreter,
            "runner_id": self.runner_id,
            "commands": [list(command) for command in self.commands],
            "exec_environment": dict(self.exec_environment),
            "environment": dict(self.environment),
            "limits": dict(self.limits),
            "tmpfs": dict(self.tmpfs),
            "isolation": self.isolation,
            "fixture_sha256": self.fixture_sha256,
            "probe_digest": self.probe_digest,
            "probe_version": self.probe_version,
        }


DEADLINE = "<deadline>"  # what stands for the replay's deadline in a keyed command


def without_deadline(command: Sequence[str]) -> tuple[str, ...]:
    """The driver's command with its ``--timeout`` value left out of the key: the
    deadline derived from recorded durations moves from run to run, and an entry is
    taken only where its replays ended well within the reusing run's deadline
    (:func:`deadline_problem`)."""
    words = list(command)
    for index, word in enumerate(words[:-1]):
        if word == "--timeout":
            words[index + 1] = DEADLINE
            break
    return tuple(words)


def deadline_problem(replays: Sequence[ReplayFile], timeout_s: float) -> str | None:
    """Why an entry's replays may not stand in for replays under ``timeout_s`` (None:
    they may): each ended (completed) in at most half of it, so the same replay under
    this deadline would have ended the same way, with room for its usual variation."""
    for replay_file in replays:
        doc = replay_file.doc or {}
        wall_ms = doc.get("wall_ms")
        if not isinstance(wall_ms, int | float) or wall_ms < 0:
            return f"replay {replay_file.replay}: no wall time"
        if wall_ms / 1000.0 > timeout_s / 2:
            return (
                f"replay {replay_file.replay} took {wall_ms / 1000.0:.1f} s, more than half"
                f" of this run's deadline ({timeout_s:g} s)"
            )
    return None


def side_key(inputs: SideKeyInputs) -> str:
    """``sha256:<hex>`` of the key's canonical JSON: equal inputs, equal keys; any input
    changed, another key."""
    return digest(inputs.to_json())


def key_hex(key: str) -> str | None:
    """The 64 hex digits of a key (None: not a key this rule makes)."""
    hex_part = key.removeprefix("sha256:")
    if not key.startswith("sha256:") or len(hex_part) != 64:
        return None
    if any(ch not in "0123456789abcdef" for ch in hex_part):
        return None
    return hex_part


# ---------------------------------------------------------------- what may be stored


def _doc_problem(doc: Mapping[str, Any], number: int, *, seed: int, timeout_s: float) -> str | None:
    if doc.get("status") != "completed":
        return f"replay {number}: status {doc.get('status')!r}"
    if doc.get("results_full") is True:
        return f"replay {number}: the results folder was full"
    if doc.get("seed") != seed:
        return f"replay {number}: seed {doc.get('seed')!r}, the run's is {seed}"
    doc_timeout = doc.get("timeout_s")
    if not isinstance(doc_timeout, int | float) or float(doc_timeout) != float(timeout_s):
        return f"replay {number}: deadline {doc_timeout!r}, the run's is {timeout_s:g}"
    result = doc.get("result")
    tests = result.get("tests") if isinstance(result, Mapping) else None
    if not isinstance(tests, list):
        return f"replay {number}: no tests"
    for entry in tests:
        if isinstance(entry, Mapping) and entry.get("nodeid") in SESSION_NODES:
            return f"replay {number}: the pytest session failed ({entry.get('reason')})"
    return None


def _node_ids(doc: Mapping[str, Any]) -> frozenset[str]:
    result = doc.get("result")
    found: set[str] = set()
    if isinstance(result, Mapping):
        for key in ("tests", "skipped"):
            for entry in result.get(key) or ():
                if isinstance(entry, Mapping) and isinstance(entry.get("nodeid"), str):
                    found.add(entry["nodeid"])
    return frozenset(found)


def _planned(node_id: str, planned: frozenset[str]) -> bool:
    """Was ``node_id`` asked for: named, a parametrization of a named function, a test in
    a named module or folder, or a module or folder entry enclosing a named test."""
    if node_id in planned or node_id.split("[", 1)[0] in planned:
        return True
    for name in planned:
        inside = name.rstrip("/")
        if node_id.startswith((inside + "::", inside + "/")):
            return True
        if name.startswith((node_id + "::", node_id + "/")):
            return True
    return False


def unclean_reason(
    observed: Sequence[tuple[ReplayFile, ContainerFacts]],
    *,
    replays: int,
    image_id: str,
    seed: int,
    timeout_s: float,
    property_ids: Sequence[str] = (),
) -> str | None:
    """Why a side's screening may not be stored (None: it may).

    Stored only when every one of its ``replays`` came back whole from a container that
    ended well (no engine error, OOM, deadline or interruption; the pinned image), each
    file a completed ``replay-run/1`` document of the run's seed and deadline,
    with no failed pytest session, every replay reporting the same tests, and none that
    the run did not ask for (``property_ids``; empty: the whole suite)."""
    numbers = [replay_file.replay for replay_file, _ in observed]
    if numbers != list(range(1, replays + 1)):
        return f"replays {numbers} of {replays}"
    seen: frozenset[str] | None = None
    planned = frozenset(property_ids)
    for replay_file, facts in observed:
        number = replay_file.replay
        if facts.engine_error or facts.oom_killed or facts.killed_at_deadline or facts.cancelled:
            return f"replay {number}: the container did not end well"
        if facts.exit_code != 0:
            return f"replay {number}: the driver exited {facts.exit_code}"
        if facts.image_id != image_id:
            return f"replay {number}: image {facts.image_id}, the run pinned {image_id}"
        if replay_file.state != "ok" or replay_file.doc is None:
            return f"replay {number}: {replay_file.state} ({replay_file.problem})"
        problem = _doc_problem(replay_file.doc, number, seed=seed, timeout_s=timeout_s)
        if problem is not None:
            return problem
        ids = _node_ids(replay_file.doc)
        if seen is not None and ids != seen:
            return f"replay {number}: other tests than replay 1"
        seen = ids
        unplanned = sorted(i for i in ids if planned and not _planned(i, planned))
        if unplanned:
            return f"replay {number}: {unplanned[0]} was not asked for"
    if not seen:
        return "no test reported"
    return None


# ---------------------------------------------------------------- the entry


# Base64 of this many bytes at a time (a multiple of 3: the pieces join into the whole's).
BASE64_STEP = 3 * 256 * 1024


@dataclass(frozen=True, kw_only=True)
class StoredReplay:
    """One screening replay as stored: its number, the reader's bytes, the engine's facts."""

    replay: int
    data: bytes
    image_id: str
    exit_code: int

    def facts(self) -> ContainerFacts:
        return ContainerFacts(image_id=self.image_id, exit_code=self.exit_code)


@dataclass(frozen=True, kw_only=True)
class SideEvidence:
    """A side's screening evidence under its key, and the run it came from."""

    key: str
    scope: str
    side: str
    rev: str
    run_id: str
    stored_at: str  # ISO 8601, UTC
    replays: tuple[StoredReplay, ...]

    def body(self) -> dict[str, Any]:
        body = self.body_without_bytes()
        for stored, item in zip(self.replays, body["replays"], strict=True):
            item["bytes"] = base64.b64encode(stored.data).decode("ascii")
        return body

    def body_without_bytes(self) -> dict[str, Any]:
        """:meth:`body`, each replay's ``bytes`` left out (a caller puts them in)."""
        return {
            "schema": ENTRY_SCHEMA,
            "key": self.key,
            "scope": self.scope,
            "side": self.side,
            "rev": self.rev,
            "run_id": self.run_id,
            "stored_at": self.stored_at,
            "replays": [
                {
                    "replay": stored.replay,
                    "image_id": stored.image_id,
                    "exit_code": stored.exit_code,
                    "sha256": hashlib.sha256(stored.data).hexdigest(),
                }
                for stored in self.replays
            ],
        }

    def to_json(self) -> dict[str, Any]:
        """The stored document: the body and the digest of its canonical JSON."""
        body = self.body()
        return {**body, "digest": digest(body)}

    def canonical_pieces(self, *, step: int = BASE64_STEP) -> Iterator[bytes]:
        """The canonical JSON of :meth:`to_json`, piece by piece: the same bytes, without
        ever holding a whole result file's base64 (a side of 100,000 tests has result
        files of tens of MB, and the whole document would be copied three times over)."""
        marks = {f"replay-bytes-{secrets.token_hex(16)}": stored for stored in self.replays}

        def with_marks(extra: Mapping[str, Any]) -> bytes:
            body = self.body_without_bytes()
            for mark, item in zip(marks, body["replays"], strict=True):
                item["bytes"] = mark
            return canonical_json({**body, **extra})

        if step <= 0 or step % 3:
            raise ValueError("base64 pieces join only when cut at a multiple of 3 bytes")
        hasher = hashlib.sha256()
        for piece in _spliced(with_marks({}), marks, step):
            hasher.update(piece)
        done = with_marks({"digest": DIGEST_PREFIX + hasher.hexdigest()})
        yield from _spliced(done, marks, step)

    @property
    def size(self) -> int:
        return sum(len(stored.data) for stored in self.replays)


def _spliced(text: bytes, marks: Mapping[str, StoredReplay], step: int) -> Iterator[bytes]:
    """``text`` with each mark (a JSON string's value) replaced by its replay's base64."""
    rest = text
    for mark, stored in marks.items():
        before, found, rest = rest.partition(mark.encode("ascii"))
        if not found:  # a mark is made here and found once: never a document's own text
            raise AssertionError(f"{mark} is not in the document")
        yield before
        for start in range(0, len(stored.data), step):
            yield base64.b64encode(stored.data[start : start + step])
    yield rest


def _replays_from(raw: Any) -> tuple[tuple[StoredReplay, ...] | None, str | None]:
    if not isinstance(raw, list) or not raw:
        return None, "no replays"
    replays = []
    for number, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping) or item.get("replay") != number:
            return None, f"replay {number} is not in its place"
        image_id, exit_code = item.get("image_id"), item.get("exit_code")
        encoded, sha = item.get("bytes"), item.get("sha256")
        if not isinstance(image_id, str) or exit_code != 0 or not isinstance(encoded, str):
            return None, f"replay {number}: malformed"
        try:
            data = base64.b64decode(encoded.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            return None, f"replay {number}: its bytes are not base64"
        if hashlib.sha256(data).hexdigest() != sha:
            return None, f"replay {number}: its bytes do not match their digest"
        replays.append(StoredReplay(replay=number, data=data, image_id=image_id, exit_code=0))
    return tuple(replays), None


def entry_problem(doc: Any, key: str) -> tuple[SideEvidence | None, str | None]:
    """The entry a stored document holds for ``key``, or why it is not to be trusted
    (another schema or key, a digest that does not match its body, bytes that do not
    match theirs). Never raises on a malformed document."""
    if not isinstance(doc, Mapping):
        return None, "not a JSON object"
    if doc.get("schema") != ENTRY_SCHEMA:
        return None, f"schema {doc.get('schema')!r}"
    if doc.get("key") != key:
        return None, "stored under another key"
    body = {name: value for name, value in doc.items() if name != "digest"}
    if doc.get("digest") != digest(body):
        return None, "its digest does not match its content"
    fields = {name: doc.get(name) for name in ("scope", "side", "rev", "run_id", "stored_at")}
    if not all(isinstance(value, str) for value in fields.values()):
        return None, "a field is missing"
    replays, problem = _replays_from(doc.get("replays"))
    if replays is None:
        return None, problem
    return (
        SideEvidence(
            key=key,
            scope=str(fields["scope"]),
            side=str(fields["side"]),
            rev=str(fields["rev"]),
            run_id=str(fields["run_id"]),
            stored_at=str(fields["stored_at"]),
            replays=replays,
        ),
        None,
    )
