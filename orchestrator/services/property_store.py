"""The run's property store, ``properties.jsonl.gz``: written as properties are decided,
read by ``report``, ``merge``, ``reproduce``, the ledger's recording and ``replay --json``.

A run decides its properties in two parts (screening settles the quiet ones while the
others replay; those are decided at the end), each in the run's order. Each part is kept
compressed as gzip members of consecutive properties (about 100 bytes a
property), counted against the run folder's cap of bytes as it is compressed
(``ORCHESTRATOR_MAX_RUN_BYTES``: a run that would pass it stops there, its folder marked
incomplete). When the run is complete the members are written in the run's order after
the header, as one file, atomically: its lines are in the run's order whichever part
decided a property. Until then they wait in a spool file in the run folder
(``.properties.spool``, removed when the store is written or the run stops), so a whole
suite's store is never held in memory. The file format is :mod:`orchestrator.core.run_store`'s.

What the run keeps of each property afterwards is a
:class:`~orchestrator.core.replay_run.DecidedProperty` (its report entry only when it
needs a look): a whole suite's evidence is held once, compressed, never as values.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator import files
from orchestrator.core.bounds import MAX_RUN_DOCUMENT_BYTES
from orchestrator.core.replay_run import DecidedProperty, PropertyOutcome, decided
from orchestrator.core.run_store import (
    MAX_LINE_BYTES,
    encode,
    header,
    header_problem,
    record_of,
    record_problem,
)
from orchestrator.errors import InputError, LocalWriteError
from orchestrator.model import PROPERTIES_FILE, PROPERTIES_SPOOL, Decision
from orchestrator.services import run_writer

SPOOL_FILE = PROPERTIES_SPOOL  # removed when the store is written, or the run stops
# Properties per gzip member: enough for the compression to see the repetition, few enough
# that a member's uncompressed lines (a few KB each) stay small in memory.
MEMBER_LINES = 2048
LEVEL = 6


def _member(lines: Sequence[bytes]) -> bytes:
    """One gzip member of ``lines`` (mtime 0: the same lines, the same bytes)."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)
    return compressor.compress(b"".join(lines)) + compressor.flush()


class PropertyWriter:
    """The store of one run folder, filled as properties are decided (any thread)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        # first index, count, offset and length in the spool: the members wait on disk
        # (a whole suite's store is tens of MB), in the order they were decided
        self._members: list[tuple[int, int, int, int]] = []
        self._spool: Any = None
        self._spooled = 0
        self._decisions: dict[Decision, Decision] = {}  # one value per distinct decision
        self._lock = threading.Lock()
        self._finished = False

    def add(self, outcomes: Iterable[PropertyOutcome]) -> tuple[DecidedProperty, ...]:
        """Keep the properties' lines (compressed; counted against the folder's cap) and
        return what the run keeps of each; ``outcomes`` are taken one at a time (in the
        run's order they compress into fewer members)."""
        kept: list[DecidedProperty] = []
        lines: list[bytes] = []
        first = previous = 0
        for item in outcomes:
            if lines and (item.index != previous + 1 or len(lines) >= MEMBER_LINES):
                self._keep(first, lines)
                lines = []
            if not lines:
                first = item.index
            previous = item.index
            record = record_of(item)
            lines.append(encode(record))
            with self._lock:
                decision = self._decisions.setdefault(item.decision, item.decision)
            row = decided(item, record["entry"])
            kept.append(row if row.decision is decision else _with_decision(row, decision))
        if lines:
            self._keep(first, lines)
        return tuple(kept)

    def add_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Keep records already made (``merge``'s, renumbered), in the run's order; how
        many."""
        lines: list[bytes] = []
        first = previous = count = 0
        for record in records:
            index = record["index"]
            if lines and (index != previous + 1 or len(lines) >= MEMBER_LINES):
                self._keep(first, lines)
                lines = []
            if not lines:
                first = index
            previous = index
            lines.append(encode(record))
            count += 1
        if lines:
            self._keep(first, lines)
        return count

    def _keep(self, first: int, lines: Sequence[bytes]) -> None:
        data = _member(lines)
        run_writer.charge(self.run_dir, len(data))
        with self._lock:
            if self._finished:
                raise RuntimeError("the run's property store was already written")
            try:
                if self._spool is None:
                    # closed by finish or discard
                    self._spool = open(self.spool_path, "w+b", buffering=0)  # noqa: SIM115
                self._spool.write(data)
            except OSError as error:
                reason = run_writer.write_reason(error)
                raise LocalWriteError(
                    reason, f"cannot write {self.spool_path}: {error.strerror or error} ({reason})"
                ) from None
            self._members.append((first, len(lines), self._spooled, len(data)))
            self._spooled += len(data)

    @property
    def spool_path(self) -> Path:
        return self.run_dir / SPOOL_FILE

    def discard(self) -> None:
        """Let go of the spool (the run stopped: its store will not be written)."""
        with self._lock:
            self._finished = True
            self._close_spool()

    def _close_spool(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self.spool_path.unlink(missing_ok=True)

    def finish(self, run_id: str) -> None:
        """Write the store (the header, then every property in the run's order); once."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            members = sorted(self._members, key=lambda member: member[0])
            self._members = []
        expected = 1
        for first, count, _, _ in members:
            if first != expected:
                raise RuntimeError(f"the run's property store lacks property {expected}")
            expected = first + count
        head = _member([encode(header(run_id, expected - 1))])
        run_writer.charge(self.run_dir, len(head))
        path = self.run_dir / PROPERTIES_FILE
        spool = self._spool  # unbuffered: what was written is in the file

        def chunks() -> Iterator[bytes]:
            yield head
            for _, _, offset, length in members:  # one member at a time, in the run's order
                yield os.pread(spool.fileno(), length, offset)

        try:
            files.write_chunks_atomic(path, chunks())
        except OSError as error:
            reason = run_writer.write_reason(error)
            raise LocalWriteError(
                reason, f"cannot write {path}: {error.strerror or error} ({reason})"
            ) from None
        finally:
            with self._lock:
                self._close_spool()


def _with_decision(row: DecidedProperty, decision: Decision) -> DecidedProperty:
    from dataclasses import replace

    return replace(row, decision=decision)


_WRITERS: dict[str, PropertyWriter] = {}
_WRITERS_LOCK = threading.Lock()


def writer_for(run_dir: Path) -> PropertyWriter:
    """The store of the run in ``run_dir`` (one per folder, made on first use)."""
    key = os.path.abspath(run_dir)
    with _WRITERS_LOCK:
        writer = _WRITERS.get(key)
        if writer is None or writer.run_dir != run_dir:
            writer = _WRITERS[key] = PropertyWriter(run_dir)
        return writer


def add(run_dir: Path, outcomes: Iterable[PropertyOutcome]) -> tuple[DecidedProperty, ...]:
    return writer_for(run_dir).add(outcomes)


def finish(run_dir: Path, run_id: str) -> None:
    """Write ``run_dir``'s store (a run that decided nothing: its header alone), and let
    go of it; a store already written stays as it is (a run whose summary is written
    again, to record it)."""
    with _WRITERS_LOCK:
        writer = _WRITERS.pop(os.path.abspath(run_dir), None)
    if writer is None:
        if has_store(run_dir):
            return
        writer = PropertyWriter(run_dir)
    writer.finish(run_id)


def forget(run_dir: Path) -> None:
    """Let go of a store that will not be written (the run stopped)."""
    with _WRITERS_LOCK:
        writer = _WRITERS.pop(os.path.abspath(run_dir), None)
    if writer is not None:
        writer.discard()


# ---------------------------------------------------------------- reading


class StoreRead:
    """A store opened for reading: its header, then its records one at a time
    (:meth:`records`; each a ``dict``, checked by ``core.run_store.record_problem``).
    Every refusal is an :class:`InputError` naming the folder: a file that is not a
    regular file, not gzip, a line that is not JSON or past ``MAX_LINE_BYTES``, records
    out of order, or fewer or more of them than the header says."""

    def __init__(self, run_dir: Path, *, name: str | None = None) -> None:
        self.path = run_dir / PROPERTIES_FILE
        self.name = f"{name or run_dir}: {PROPERTIES_FILE}"
        first = next(self._lines(), None)
        if first is None:
            raise InputError(f"{self.name}: empty")
        head = self._parse(first)
        problem = header_problem(head)
        if problem is not None:
            raise InputError(f"{self.name}: {problem}")
        self.header: Mapping[str, Any] = head
        self.count: int = head["properties"]

    def _lines(self) -> Iterator[bytes]:
        from orchestrator.adapters.input_file import open_input

        handle = open_input(self.path, name=self.name, cap=MAX_RUN_DOCUMENT_BYTES)
        try:
            with gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                while True:
                    line = stream.readline(MAX_LINE_BYTES + 1)
                    if not line:
                        return
                    if len(line) > MAX_LINE_BYTES:
                        raise InputError(f"{self.name}: a line is longer than a record can be")
                    yield line
        except (OSError, EOFError, zlib.error) as error:
            raise InputError(f"{self.name}: cannot read ({error})") from None
        finally:
            handle.close()

    def _parse(self, line: bytes) -> Any:
        try:
            return json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InputError(f"{self.name}: a line is not JSON ({error})") from None

    def records(self) -> Iterator[dict[str, Any]]:
        """Every property's record, in the run's order (read afresh at each call)."""
        lines = self._lines()
        next(lines, None)  # the header, checked when opened
        expected = 1
        for line in lines:
            record = self._parse(line)
            problem = record_problem(record)
            if problem is None and record["index"] != expected:
                problem = f"line {record['index']} where {expected} was due"
            if problem is not None:
                raise InputError(f"{self.name}: {problem}")
            expected += 1
            yield record
        if expected - 1 != self.count:
            raise InputError(
                f"{self.name}: holds {expected - 1} properties, its header says {self.count}"
            )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.records()

    def find(self, property_id: str) -> dict[str, Any] | None:
        """The record of ``property_id`` (None: the run has none). Only a line that holds
        the id as JSON text is parsed."""
        needle = json.dumps(property_id, ensure_ascii=False).encode("utf-8")
        lines = self._lines()
        next(lines, None)
        for line in lines:
            if needle not in line:
                continue
            record = self._parse(line)
            if record_problem(record) is None and record["property_id"] == property_id:
                return dict(record)
        return None


def has_store(run_dir: Path) -> bool:
    return (run_dir / PROPERTIES_FILE).exists() or (run_dir / PROPERTIES_FILE).is_symlink()
