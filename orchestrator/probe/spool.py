"""A session's test entries, kept on disk beside its result as the tests finish.

The probe writes its result (``replay-probe/1``) once, at the end of the session; with
a whole suite that is one entry per test, a few hundred bytes each. Held in the session's
memory until then, 100,000 of them (and the text they are joined into) take more than
the tests' own share of a container's memory. So each finished test's entry goes to a
spool file beside the result (``<result>.tests``), a few hundred KB at a time, and the
result is written from it a chunk at a time (``atomic.write_chunks_atomic``): the bytes
are those the whole list would have given. A spool that cannot be written (its folder is
full: a test filled it) keeps the rest in memory, as before. Standard library only; paths
are strings (see ``probe/atomic.py``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Final

SPOOL_SUFFIX: Final = ".tests"
FLUSH_BYTES: Final = 256 * 1024
READ_BYTES: Final = 1024 * 1024
_APPEND: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
)


def spool_path(result_path: str) -> str:
    return result_path + SPOOL_SUFFIX


class TestSpool:
    """The encoded entries (JSON objects as text) of one session, in the order added."""

    __test__ = False  # not a pytest test class, whatever the name says

    def __init__(self, result_path: str | None) -> None:
        # No result to write: nothing is kept at all.
        self.path = None if result_path is None else spool_path(result_path)
        self.count = 0
        self._pending: list[str] = []  # pieces, each with its separating comma
        self._pending_bytes = 0
        self._on_disk = False
        self._broken = False  # the spool could not be written: the rest stays in memory
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # a spool of an earlier session of this name

    def add(self, encoded: str) -> None:
        if self.path is None:
            return
        piece = ("," if self.count else "") + encoded
        self.count += 1
        self._pending.append(piece)
        self._pending_bytes += len(piece)
        if self._pending_bytes >= FLUSH_BYTES and not self._broken:
            self._flush()

    def _flush(self) -> None:
        assert self.path is not None
        data = "".join(self._pending).encode("utf-8")
        try:
            # Opened for each write: a test that closed or reused a descriptor of ours
            # cannot make the probe write into a file of its own.
            fd = os.open(self.path, _APPEND, 0o600)
            try:
                size = os.fstat(fd).st_size
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                except OSError:
                    os.ftruncate(fd, size)  # what was there stays whole
                    raise
            finally:
                os.close(fd)
        except OSError:
            self._broken = True  # keep the rest in memory (what is on disk stays valid)
            return
        self._on_disk = True
        self._pending, self._pending_bytes = [], 0

    def chunks(self, extra: Sequence[str] = ()) -> Iterator[bytes]:
        """The entries as the inside of a JSON array (``a,b,c``), then ``extra`` ones."""
        if self._on_disk and self.path is not None:
            with open(self.path, "rb") as handle:
                while True:
                    chunk = handle.read(READ_BYTES)
                    if not chunk:
                        break
                    yield chunk
        if self._pending:
            yield "".join(self._pending).encode("utf-8")
        for index, encoded in enumerate(extra):
            yield (("," if self.count or index else "") + encoded).encode("utf-8")

    def remove(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self._on_disk = False
