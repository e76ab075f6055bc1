"""Read finished run folders; write reports of them (atomically).

A run folder is what ``replay`` writes: ``run-log.json`` first, then ``raw/<side>/``,
the property store ``properties.jsonl.gz`` (every property's entry, evidence and
decision), and ``summary.json`` last (``replay-report/2``). A folder of an earlier
version (``replay-report/1``) has an ``evidence-<n>.json`` and a ``decision-<n>.json``
per property instead of the store, and lists every property in ``summary.json``: both
are read. A folder without ``summary.json`` (an interrupted run, a run still going, or
not a run folder at all), or one marked incomplete, is refused by name (exit 2): a
report of half a run would read like a verdict it is not.

Which fields a report reads is listed in docs/records.md ("Reports").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from orchestrator import files
from orchestrator.core.reports.view import SIDES, RunDocuments, RunView, raw_dir_of, read_run
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import REPORT_SCHEMA

SUMMARY = "summary.json"
RUN_LOG = "run-log.json"
INCOMPLETE_MARKERS = ("INCOMPLETE", "incomplete")  # a status file an interrupted run may leave


@dataclass(frozen=True, kw_only=True)
class ReportTargets:
    """Where reports go; None skips one. ``summary`` is appended to (a job summary file)."""

    html: Path | None = None
    junit: Path | None = None
    summary: Path | None = None


def _read_json(path: Path, name: str) -> Any:
    """A run folder's document: a regular file (a FIFO or a link in a downloaded artifact
    is refused, never opened) of at most ``MAX_RUN_DOCUMENT_BYTES``."""
    from orchestrator.adapters.input_file import read_input
    from orchestrator.core.bounds import MAX_RUN_DOCUMENT_BYTES

    if not path.exists() and not path.is_symlink():
        raise InputError(f"{name}: {path.name} is missing")
    data = read_input(path, name=f"{name}: {path.name}", cap=MAX_RUN_DOCUMENT_BYTES)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(f"{name}: {path.name}: cannot read ({error})") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{name}: {path.name}: not JSON ({error.msg})") from None


def _incomplete(run_log: Any) -> bool:
    if not isinstance(run_log, Mapping):
        return False
    return run_log.get("incomplete") is True or run_log.get("status") == "incomplete"


def link_to(folder: Path, report_dir: Path) -> str:
    """The folder's URL relative to a report written in ``report_dir`` ("" when the same)."""
    relative = Path(os.path.relpath(folder.resolve(), report_dir.resolve())).as_posix()
    return "" if relative == "." else quote(relative) + "/"


def _raw_documents(folder: Path, entries: Iterable[Any]) -> dict[str, Any]:
    """The raw replay files of every raw folder the entries name (``raw`` by default;
    a run cut into batches or a merged folder names others, ``raw_dir`` per property):
    each file's own fields, without its probe ``result`` (a whole suite's tests, which
    no reader of these takes)."""
    raw_dirs = {"raw"} | {raw_dir_of(entry) for entry in entries}
    raw: dict[str, Any] = {}
    for raw_dir in sorted(raw_dirs):
        for side in SIDES:
            side_dir = folder / raw_dir / side
            if not side_dir.is_dir():
                continue
            for path in sorted(side_dir.glob("replay-*.json")):
                name = f"{raw_dir}/{side}/{path.name}"
                try:
                    raw[name] = run_head(path.read_bytes())
                except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                    raw[name] = None  # linked, shown as unreadable
    return raw


_RESULT_KEY = b',"result":'


def run_head(data: bytes) -> Any:
    """A ``replay-run/1`` file's fields but its ``result``: the driver writes the result
    last (``probe.jobs.encode_run``), so the text before it, closed, is the rest; any
    other file is parsed whole."""
    start = data.find(_RESULT_KEY)
    while start >= 0:
        try:
            head = json.loads(data[:start] + b"}")
        except (UnicodeDecodeError, json.JSONDecodeError):  # the key inside a string
            start = data.find(_RESULT_KEY, start + 1)
            continue
        if isinstance(head, dict):
            return head
        break
    return json.loads(data)


def _named_files(summary: Any, key: str) -> list[str]:
    entries = summary.get("decisions") if isinstance(summary, Mapping) else None
    if not isinstance(entries, list):
        return []
    names = [entry.get(key) for entry in entries if isinstance(entry, Mapping)]
    # Only plain names inside the folder: a summary must not point a report elsewhere.
    return [name for name in names if isinstance(name, str) and name == Path(name).name]


def read_documents(folder: Path) -> RunDocuments:
    """The folder's documents (links relative to the folder itself; see ``views``)."""
    name = str(folder)
    if not folder.exists():
        raise InputError(f"{name}: no such run folder")
    if not folder.is_dir():
        raise InputError(f"{name}: not a folder")
    run_log = _read_json(folder / RUN_LOG, name) if (folder / RUN_LOG).is_file() else None
    if _incomplete(run_log) or any((folder / marker).exists() for marker in INCOMPLETE_MARKERS):
        raise InputError(f"{name}: marked incomplete: the run did not finish")
    if not (folder / SUMMARY).is_file():
        raise InputError(f"{name}: no {SUMMARY}: not a finished run (interrupted, or running)")
    summary = _read_json(folder / SUMMARY, name)
    if isinstance(summary, Mapping) and summary.get("schema") == REPORT_SCHEMA:
        from orchestrator.services.property_store import StoreRead

        stored = StoreRead(folder, name=name)
        return RunDocuments(
            name=name,
            link="",
            summary=summary,
            run_log=run_log,
            records=stored,
            raw=_raw_documents(folder, (record["entry"] for record in stored.records())),
        )
    evidence = {
        file_name: _read_json(folder / file_name, name)
        for file_name in _named_files(summary, "evidence_file")
    }
    decisions = {
        file_name: _read_json(folder / file_name, name)
        for file_name in _named_files(summary, "decision_file")
    }
    entries = summary.get("decisions") if isinstance(summary, Mapping) else None
    return RunDocuments(
        name=name,
        link="",
        summary=summary,
        run_log=run_log,
        evidence=evidence,
        decisions=decisions,
        raw=_raw_documents(folder, entries if isinstance(entries, list) else []),
    )


def read_folders(folders: Sequence[Path]) -> tuple[RunDocuments, ...]:
    """Every folder's documents; any refusal is an ``InputError`` naming its folder."""
    seen: set[Path] = set()
    documents = []
    for folder in folders:
        key = folder.resolve()
        if key in seen:
            raise InputError(f"{folder}: named twice")
        seen.add(key)
        documents.append(read_documents(folder))
    return tuple(documents)


def views(documents: Sequence[RunDocuments], *, report_dir: Path) -> tuple[RunView, ...]:
    """The runs as seen from a report written in ``report_dir`` (its relative links)."""
    runs = []
    for docs in documents:
        folder = Path(docs.name)
        try:
            runs.append(read_run(replace(docs, link=link_to(folder, report_dir))))
        except SchemaError as error:
            raise InputError(f"{docs.name}: {error}") from None
    return tuple(runs)


def read_runs(folders: Sequence[Path], *, report_dir: Path) -> tuple[RunView, ...]:
    return views(read_folders(folders), report_dir=report_dir)


def check_targets(targets: ReportTargets) -> None:
    """Refuse (exit 2) a report path that cannot be written, before any work is done:
    a folder, or a path whose nearest existing parent is not a writable folder."""
    for path in (targets.html, targets.junit, targets.summary):
        if path is None:
            continue
        if path.is_dir():
            raise InputError(f"{path}: is a folder, not a file to write")
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{path}: cannot be written ({parent} is not a writable folder)")


def write_text(path: Path, data: bytes) -> None:
    try:
        files.write_atomic(path, data)
    except OSError as error:
        raise InputError(f"{path}: cannot write ({error.strerror or error})") from None


def append_summary(path: Path, render: Callable[[int], str]) -> None:
    """Append to a job summary file atomically, keeping the whole file under GitHub's
    limit: ``render(max_bytes)`` gets the room left after what is already there."""
    from orchestrator.core.reports.markdown import DEFAULT_MAX_BYTES

    try:
        existing = path.read_bytes() if path.is_file() else b""
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    text = render(max(DEFAULT_MAX_BYTES - len(existing), 0))
    separator = b"\n" if existing and not existing.endswith(b"\n") else b""
    write_text(path, existing + separator + text.encode("utf-8"))


def write_reports(documents: Sequence[RunDocuments], targets: ReportTargets) -> dict[str, Path]:
    """Write the asked reports of folders already read; returns what was written, by kind.
    Every view is rendered before the first file is written."""
    from orchestrator.core.reports.html import render_html
    from orchestrator.core.reports.junit import render_junit
    from orchestrator.core.reports.markdown import render_markdown

    texts: dict[str, tuple[Path, str]] = {}
    if targets.html is not None:
        texts["html"] = (
            targets.html,
            render_html(views(documents, report_dir=targets.html.parent)),
        )
    if targets.junit is not None:
        runs = views(documents, report_dir=targets.junit.parent)
        texts["junit"] = (targets.junit, render_junit(runs))
    for path, text in texts.values():
        write_text(path, text.encode("utf-8"))
    written = {kind: path for kind, (path, _) in texts.items()}
    if targets.summary is not None:
        runs = views(documents, report_dir=targets.summary.parent)
        append_summary(targets.summary, lambda limit: render_markdown(runs, max_bytes=limit))
        written["summary"] = targets.summary
    return written
