"""Small file helpers for the imperative shell: read a document, write atomically."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.errors import InputError


def read_text(source: str) -> str:
    """Read a file, or standard input for ``-``; a missing file is an ``InputError``."""
    try:
        if source == "-":
            return sys.stdin.read()
        return Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{source}: is a directory") from None
    except UnicodeDecodeError:
        raise InputError(f"{source}: not UTF-8 text") from None
    except OSError as error:
        raise InputError(f"{source}: {error.strerror}") from None


def read_json(source: str) -> Any:
    """Parse a JSON document from a file or ``-``; bad JSON is a one-line ``InputError``."""
    text = read_text(source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        name = "stdin" if source == "-" else source
        raise InputError(
            f"{name}: not JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None


def dumps(document: Any) -> str:
    """Human-facing JSON: sorted keys, indented, UTF-8 kept as is."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, document: Any) -> None:
    write_atomic(path, (dumps(document) + "\n").encode("utf-8"))
