"""Small file helpers for the imperative shell: read a document, write atomically."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from orchestrator.core.json_text import indented
from orchestrator.errors import InputError
from orchestrator.probe.atomic import write_bytes_atomic, write_many_atomic
from orchestrator.probe.atomic import write_chunks_atomic as _write_chunks


def read_text(source: str) -> str:
    """Read a file, or standard input for ``-``, as UTF-8 text: one regular file of at
    most ``core.bounds.MAX_INPUT_BYTES`` (``adapters.input_file``); anything else is an
    ``InputError``."""
    from orchestrator.adapters.input_file import read_input, read_stdin

    data = read_stdin() if source == "-" else read_input(Path(source))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{'stdin' if source == '-' else source}: not UTF-8 text") from None


def read_json(source: str) -> Any:
    """Parse a JSON document from a file or ``-``; bad JSON is a one-line ``InputError``."""
    return parse_json(read_text(source), "stdin" if source == "-" else source)


def read_bytes(path: Path, *, name: str | None = None) -> bytes:
    """A regular file's bytes (at most ``core.bounds.MAX_INPUT_BYTES``); anything else is
    an ``InputError`` naming it (``name``, else its path)."""
    from orchestrator.adapters.input_file import read_input

    return read_input(path, name=name)


def parse_json(data: str | bytes, name: str) -> Any:
    """A JSON document from text or UTF-8 bytes; ``name`` says where it came from."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InputError(
            f"{name}: not JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None


def dumps(document: Any) -> str:
    """Human-facing JSON: sorted keys, indented, UTF-8 kept as is (``json.dumps``' text,
    written by ``core.json_text``: about twice as fast for a run folder's documents)."""
    return indented(document)


def write_atomic(path: Path, data: bytes, *, sync_parent: bool = True) -> None:
    """Write a file for the user atomically (``orchestrator.probe.atomic``'s writer).

    The folder is created when missing; the file gets the user's umask (0666 less it,
    as ``open()`` would), never a private 0600 nor a forced 0644.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data, mode=None, sync_folder=sync_parent)


def write_chunks_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """:func:`write_atomic` of ``chunks`` one after the other (never joined in memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_chunks(path, chunks, mode=None)


def write_json_atomic(path: Path, document: Any) -> None:
    write_atomic(path, (dumps(document) + "\n").encode("utf-8"))


def write_json_many(
    documents: Iterable[tuple[Path, Any]], *, before: Callable[[int], None] | None = None
) -> None:
    """Write many documents, each exactly as :func:`write_json_atomic` would, made durable
    together (``probe.atomic.write_many_atomic``: one ``syncfs`` for the batch instead of
    an ``fsync`` per file; for thousands of small files, a run's evidence and decisions,
    about twice as fast as fsyncs overlapped on threads). ``before`` is handed the bytes
    of all of them before any is written (it may raise: then none is)."""
    encoded = [(path, (dumps(document) + "\n").encode("utf-8")) for path, document in documents]
    if not encoded:
        return
    if before is not None:
        before(sum(len(data) for _, data in encoded))
    for folder in sorted({path.parent for path, _ in encoded}):
        folder.mkdir(parents=True, exist_ok=True)
    write_many_atomic(encoded)
