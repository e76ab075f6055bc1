"""What one test did, phase by phase, and its entry in the probe's result (stdlib only).

The plugin (:mod:`orchestrator.probe.plugin`) fills a :class:`PhaseRecord` per test from
pytest's reports; the record says which label the test gets (docs/lanes.md section 1)
and encodes its entry of the ``replay-probe/1`` document when the test finishes.
"""

from __future__ import annotations

import errno
import json
import os
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Final

from orchestrator.probe.meter import METER, STABLE_DEPENDENCIES

MESSAGE_LIMIT: Final = 4000

ASSERT_PASS: Final = "assert_pass"
ASSERT_FAIL: Final = "assert_fail"
HARNESS_ERROR: Final = "harness_error"

# Each entry is encoded when its test finishes: a finished test then holds one string
# (which the garbage collector never scans) instead of nested dicts, and the document
# is spliced together at the end. Same settings as the whole-document encoding used
# before, so the bytes are identical.
encode_entry = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_STABLE_ZERO: Final = dict.fromkeys(STABLE_DEPENDENCIES, 0)
_STABLE_ZERO_JSON: Final = encode_entry(_STABLE_ZERO)


class PhaseRecord:
    """What one test did, filled in phase by phase (a slotted class: it is made per test)."""

    __slots__ = (
        "call",
        "calls",
        "declared",
        "duration_ms",
        "failures",
        "network",
        "nodeid",
        "read_only",
        "setup",
        "skip_reason",
        "subtest_failure",
        "subtest_pending",
        "teardown",
    )

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.declared: list[str] = []
        self.calls: dict[str, int] | None = None
        self.network: list[str] = []
        self.duration_ms = 0.0
        # Failure details per phase ("setup", "call", "teardown"):
        # (assertion_id, message, assertion_key).
        self.failures: dict[str, tuple[str, str, str]] = {}
        self.setup: str | None = None
        self.call: str | None = None
        self.teardown: str | None = None
        self.skip_reason: str | None = None
        # A write the read-only file system refused (EROFS) in a failing phase.
        self.read_only: dict[str, Any] | None = None
        # Subtests (unittest's subTest, the subtests fixture): the first one that failed,
        # and the exception of the last one reported, until its report says how it ended.
        self.subtest_failure: tuple[str, str, str] | None = None
        self.subtest_pending: tuple[str, str, str] | None = None

    def declare(self, name: str) -> None:
        if name not in self.declared:
            self.declared.append(name)
        if METER.active and name not in METER.counts:
            METER.counts[name] = 0

    def final_calls(self) -> dict[str, int]:
        # Meter.start already put every stable name into the counts of a test that ran.
        calls = _STABLE_ZERO.copy() if self.calls is None else self.calls
        for name in self.declared:
            calls.setdefault(name, 0)
        return calls

    def encoded(self) -> str | None:
        """The entry as JSON (None when skipped or xfailed), the pass path without a dict.

        The fast path writes exactly what `encode_entry(self.entry())` would: keys in
        sorted order, floats by `repr`, strings by json's own escaping.
        """
        if (
            self.call == "passed"
            and self.read_only is None
            and self.setup != "failed"
            and self.skip_reason is None
            and not self.network
            and self.teardown != "failed"
        ):
            calls = self.final_calls()
            calls_json = _STABLE_ZERO_JSON if calls == _STABLE_ZERO else encode_entry(calls)
            return (
                f'{{"assertion_id":null,"assertion_key":null,"calls":{calls_json},'
                f'"duration_ms":{round(self.duration_ms, 3)!r},"label":"{ASSERT_PASS}",'
                f'"message":null,"nodeid":{encode_basestring(self.nodeid)},"reason":null}}'
            )
        entry = self.entry()
        return None if entry is None else encode_entry(entry)

    def entry(self) -> dict[str, Any] | None:
        """The result entry, or None when the test was skipped or xfailed."""
        label: str
        reason: str | None = None
        assertion_id: str | None = None
        assertion_key: str | None = None
        message: str | None = None
        call = self.call
        if self.setup == "failed":
            label, reason = HARNESS_ERROR, "setup_error"
            message = self.failures.get("setup", ("", "", ""))[1]
        elif self.skip_reason is not None:
            return None
        elif self.network:
            label, reason = HARNESS_ERROR, "impure_network"
            message = "network attempted in the test body: " + "; ".join(self.network)
        elif self.teardown == "failed" and call != "failed":
            # A body that failed is the test's verdict even when its teardown fails too
            # (plain pytest reports it failed); a teardown that fails a passing body is none.
            label, reason = HARNESS_ERROR, "teardown_error"
            message = self.failures.get("teardown", ("", "", ""))[1]
        elif call == "passed":
            label = ASSERT_PASS
        elif call == "failed":
            label = ASSERT_FAIL
            failure = self.failures.get("call")
            if failure is not None:
                assertion_id, message, assertion_key = failure
        else:
            label, reason = HARNESS_ERROR, "interrupted"
            message = "the session ended before this test finished"
        entry: dict[str, Any] = {
            "nodeid": self.nodeid,
            "label": label,
            "reason": reason,
            "assertion_id": assertion_id,
            "assertion_key": assertion_key,
            "message": message,
            "calls": self.final_calls(),
            "duration_ms": round(self.duration_ms, 3),
        }
        if self.read_only is not None and label != ASSERT_PASS:
            entry["read_only"] = self.read_only
        return entry


def harness_entry(
    nodeid: str, reason: str, message: str, read_only: dict[str, Any] | None = None
) -> str:
    entry: dict[str, Any] = {
        "nodeid": nodeid,
        "label": HARNESS_ERROR,
        "reason": reason,
        "assertion_id": None,
        "assertion_key": None,
        "message": message[:MESSAGE_LIMIT],
        "calls": dict.fromkeys(STABLE_DEPENDENCIES, 0),
        "duration_ms": 0.0,
    }
    if read_only is not None:
        entry["read_only"] = read_only
    return encode_entry(entry)


def read_only_write(value: BaseException | None, rootdir: Path) -> dict[str, Any] | None:
    """The fact behind a failure that the read-only file system caused, or None.

    Looks through the exception and what it was raised from (``__cause__``,
    ``__context__``) for an ``OSError`` with ``EROFS``, or with ``EACCES``/``EPERM`` on a
    path in a tested tree this process may not write (a tree staged read-only by
    ownership rather than by its mount): ``path`` is the file it names (absolute, None when
    it names none), ``in_rootdir`` whether that lies in the tested tree (a write without a
    path is taken to be there: the tree is where tests write).
    """
    seen: set[int] = set()
    root = str(rootdir)
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        if isinstance(value, OSError) and value.errno in _REFUSED:
            filename = value.filename
            path = None if filename is None else os.path.abspath(os.fsdecode(filename))
            inside = path is None or path == root or path.startswith(root.rstrip("/") + "/")
            if value.errno == errno.EROFS:
                return {"path": path, "in_rootdir": inside}
            if path is not None and inside and not _writable(root):
                return {"path": path, "in_rootdir": True}
        value = value.__cause__ or value.__context__
    return None


_REFUSED = frozenset((errno.EROFS, errno.EACCES, errno.EPERM))


def _writable(folder: str) -> bool:
    """May this process write into ``folder`` (a read-only mount, or another owner's)?"""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return False
    except OSError:
        return True  # cannot tell: an access refusal is then not called the tree's
    return os.access(folder, os.W_OK)
