"""Git's machine-readable output: ``git cat-file --batch`` streamed (one object at a
time, its body in chunks) and ``git ls-tree -r -z`` records parsed.

The output of a batch is never held whole: each object's header is read, then its body
is read, copied or skipped in chunks of at most :data:`CHUNK` bytes, so the caller sees
an object's size before a byte of it is in memory and can refuse a huge one (the blob
readers of :mod:`orchestrator.adapters.git` and the tree writer of
:mod:`orchestrator.adapters.tree_export` do). The names are fed by a thread, so neither
pipe can fill while the other waits; the process is killed if the caller stops early.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from orchestrator.errors import GitError

CHUNK = 1 << 20
_KINDS = frozenset({"blob", "tree", "commit", "tag"})
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, kw_only=True)
class Found:
    """One object of the batch: ``kind`` is None when git does not have it (missing, or
    an ambiguous name)."""

    name: str
    kind: str | None
    size: int = 0


def parse_header(name: str, line: bytes) -> Found:
    """A ``%(objectname) %(objecttype) %(objectsize)`` header, else ``<name> missing``
    (or ``ambiguous``): only a hex object name starts a found object's line."""
    fields = line.rstrip(b"\n").split(b" ")
    if len(fields) == 3 and fields[2].isdigit():
        oid, kind = fields[0].decode("ascii", "replace"), fields[1].decode("ascii", "replace")
        if len(oid) in (40, 64) and set(oid) <= _HEX and kind in _KINDS:
            return Found(name=name, kind=kind, size=int(fields[2]))
    return Found(name=name, kind=None)


class CatFile:
    """One ``git cat-file --batch`` over ``names`` (a context manager): iterate
    :meth:`objects`; for the current object, :meth:`read` or :meth:`chunks` its body (or
    leave it: it is skipped). A batch that ends early is a :class:`GitError` with git's
    last line (a corrupt object)."""

    def __init__(self, repo: Path, names: Sequence[str]) -> None:
        if any("\n" in name for name in names):
            raise ValueError("a batch name cannot hold a line break")
        self.repo = repo
        self.names = list(names)
        self._process: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._writer: threading.Thread | None = None
        self._left = -1  # bytes of the current body not read yet (-1: no body)
        self._done = False

    def __enter__(self) -> CatFile:
        if not self.names:
            self._done = True
            return self
        self._stderr = tempfile.TemporaryFile()  # never a pipe nobody drains
        self._process = subprocess.Popen(
            ["git", "-C", str(self.repo), "cat-file", "--buffer",
             "--batch=%(objectname) %(objecttype) %(objectsize)"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, bufsize=CHUNK,
        )  # fmt: skip
        self._stdout = self._process.stdout
        _widen(self._stdout)
        data = "".join(f"{name}\n" for name in self.names).encode("utf-8", "surrogateescape")
        self._writer = threading.Thread(
            target=_feed, args=(self._process.stdin, data), name="cat-file-names", daemon=True
        )
        self._writer.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def objects(self) -> Iterator[Found]:
        """Each name's object, in order (its body must be read before the next, or it is
        skipped); the batch is checked complete at the end."""
        for name in self.names:
            self._finish_body()
            line = self._out().readline()
            if not line.endswith(b"\n"):
                self._fail()
            found = parse_header(name, line)
            self._left = found.size if found.kind is not None else -1
            yield found
        self._finish_body()
        self._end()

    def chunks(self) -> Iterator[bytes]:
        """The current object's body (what is left of it), in chunks of :data:`CHUNK`."""
        while self._left > 0:
            chunk = self._out().read(min(CHUNK, self._left))
            if not chunk:
                self._fail()
            self._left -= len(chunk)
            yield chunk

    def read(self) -> bytes:
        """The current object's body, whole: the caller checked its size first."""
        return b"".join(self.chunks())

    def close(self) -> None:
        """Stop the batch (killed when it did not end by itself) and release its pipes."""
        process = self._process
        if process is None:
            return
        self._process = None
        if process.poll() is None and not self._done:
            process.kill()
        if process.stdout is not None:
            process.stdout.close()
        process.wait()
        if self._writer is not None:
            self._writer.join()
        if self._stderr is not None:
            self._stderr.close()

    def _out(self) -> IO[bytes]:
        if self._stdout is None:
            raise RuntimeError("use the batch as a context manager")
        return self._stdout

    def _finish_body(self) -> None:
        for _ in self.chunks():
            pass
        if self._left == 0 and self._out().read(1) != b"\n":  # every body ends in one
            self._fail()
        self._left = -1

    def _end(self) -> None:
        self._done = True
        process = self._process
        if process is None:
            return
        if process.wait() != 0:
            self._fail()

    def _fail(self) -> None:
        """The batch ended before its last object: git's reason, as a GitError."""
        process = self._process
        detail = ""
        if process is not None:
            process.wait()
            if self._stderr is not None:
                self._stderr.seek(0)
                lines = self._stderr.read().decode(errors="replace").strip().splitlines()
                detail = lines[-1].removeprefix("fatal: ") if lines else ""
            detail = detail or f"exit status {process.returncode}"
        raise GitError(f"git cat-file failed: {detail or 'the batch ended early'}")


@dataclass(frozen=True, kw_only=True)
class TreeEntry:
    """One leaf of ``git ls-tree -r``: a blob (file or link) or a commit (submodule)."""

    mode: str
    kind: str
    oid: str
    path: str
    size: int = 0  # with ``ls-tree -l``: the blob's size (a submodule's: 0)


def parse_ls_tree(output: bytes) -> list[TreeEntry]:
    """``git ls-tree -r -z [-l]`` records (``<mode> <type> <oid>[ <size>]\\t<path>``), in
    git's order."""
    entries = []
    for record in output.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, oid, *size = meta.decode("ascii").split()
        entries.append(
            TreeEntry(
                mode=mode,
                kind=kind,
                oid=oid,
                path=path.decode("utf-8", "surrogateescape"),
                size=int(size[0]) if size and size[0].isdigit() else 0,
            )
        )
    return entries


def _widen(pipe: IO[bytes] | None) -> None:
    """A pipe of :data:`CHUNK` bytes where Linux allows it (64 KiB by default): git and
    this process take turns less often. Best effort."""
    if pipe is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, CHUNK)


def _feed(stdin: IO[bytes] | None, data: bytes) -> None:
    if stdin is None:
        return
    try:
        stdin.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the batch was stopped (or died): its reader says why
    finally:
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin.close()
