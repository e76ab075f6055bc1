"""A byte stream cut into lines of bounded length (a container's output, a build's log):
whatever a process prints without newlines costs the host a bounded buffer. Pure."""

from __future__ import annotations

from collections.abc import Callable

# A line longer than this is cut (the rest up to its newline is dropped): a container
# that prints without newlines costs the host a bounded buffer.
LINE_BYTES = 64 * 1024


class BoundedLines:
    """Splits a byte stream into lines of at most :data:`LINE_BYTES` for ``on_line``."""

    def __init__(self, on_line: Callable[[str], None], *, line_bytes: int = LINE_BYTES) -> None:
        self._on_line = on_line
        self._line_bytes = line_bytes
        self._pending = bytearray()
        self._dropping = False  # inside a line that was already cut

    def feed(self, chunk: bytes) -> None:
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._dropping:
                room = self._line_bytes - len(self._pending)
                self._pending += chunk[start : start + max(0, min(room, end - start))]
                if end - start > room:
                    self._emit(cut=True)
                    self._dropping = True
            if newline < 0:
                return
            if not self._dropping:
                self._emit(cut=False)
            self._dropping = False
            start = newline + 1

    def close(self) -> None:
        if self._pending and not self._dropping:
            self._emit(cut=False)

    def _emit(self, *, cut: bool) -> None:
        line = self._pending.decode("utf-8", errors="replace")
        self._pending.clear()
        self._on_line(line + (" [line cut]" if cut else ""))
