"""Side screening evidence in a folder a CI cache step keeps (``--evidence-cache DIR``).

One file per key, ``DIR/<2 hex>/<64 hex>.json.z``: the entry's canonical JSON
(:mod:`orchestrator.core.side_evidence`), zlib-compressed, written atomically (a
temporary file beside it, then a rename), so a reader sees a whole entry or none. The
folder is bounded: after a write, the least recently used entries (a hit touches its
file) are removed until it holds at most ``max_bytes``. Reading is bounded too (the
compressed file and what it inflates to), and every entry is checked by its digest
(:func:`decode_entry`): a truncated, altered or foreign file is ignored, never trusted.

:func:`encode_entry` and :func:`decode_entry` are the one encoding, shared with the
ledger's table (:mod:`orchestrator.adapters.ledger.side_evidence`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core import bounded_json
from orchestrator.core.side_evidence import SideEvidence, entry_problem, key_hex

ENV_VAR = "ORCHESTRATOR_EVIDENCE_CACHE"
SIZE_ENV_VAR = "ORCHESTRATOR_EVIDENCE_CACHE_BYTES"
DEFAULT_MAX_BYTES = 2 * 1024**3  # the folder, all entries
# One entry, inflated: K whole-suite result files of a side (a 20,000-test result is
# about 3.6 MB; the cap of tests per side is far above what one entry needs).
MAX_ENTRY_BYTES = 1024**3
SUFFIX = ".json.z"


def encode_entry(entry: SideEvidence) -> bytes:
    """The stored bytes: the entry's canonical JSON, compressed (made and compressed a
    piece at a time: a whole-suite entry is never held whole)."""
    deflater = zlib.compressobj(level=6)
    compressed = [deflater.compress(piece) for piece in entry.canonical_pieces()]
    compressed.append(deflater.flush())
    return b"".join(compressed)


def decode_entry(data: bytes, key: str) -> tuple[SideEvidence | None, str | None]:
    """The entry stored bytes hold for ``key``, or why they are not to be trusted."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data, MAX_ENTRY_BYTES)
    except zlib.error as error:
        return None, f"not compressed as an entry ({error})"
    if inflater.unconsumed_tail:
        return None, "larger than an entry may be"
    if not inflater.eof:
        return None, "truncated"
    try:
        doc = bounded_json.loads(raw)
    except bounded_json.JsonRefused as error:
        return None, f"not an entry ({error})"
    return entry_problem(doc, key)


def max_bytes_from(env: dict[str, str] | os._Environ[str]) -> int:
    """``$ORCHESTRATOR_EVIDENCE_CACHE_BYTES`` when it is a positive whole number, else 2 GiB."""
    text = env.get(SIZE_ENV_VAR, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_BYTES


@dataclass(frozen=True, kw_only=True)
class FolderStore:
    """Entries in a folder (see the module)."""

    root: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def name(self) -> str:
        return f"cache {self.root}"

    def _path(self, key: str) -> Path | None:
        hex_part = key_hex(key)
        if hex_part is None:
            return None
        return self.root / hex_part[:2] / f"{hex_part}{SUFFIX}"

    def load(self, key: str) -> bytes | None:
        """The stored bytes for ``key`` (None: none, or none that can be read as a regular
        file under the cap: a link or a FIFO there is not followed)."""
        path = self._path(key)
        if path is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_ENTRY_BYTES + 1)
        if len(data) > MAX_ENTRY_BYTES:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last to be evicted
        return data

    def save(self, entry: SideEvidence) -> bool:
        """Write the entry (atomically; an entry already there is kept: one key, one
        distribution), then evict down to ``max_bytes``. False when it was not written."""
        path = self._path(entry.key)
        if path is None:
            return False
        if path.exists():
            return False
        data = encode_entry(entry)
        if len(data) > self.max_bytes:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".incoming-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self.evict()
        return True

    def evict(self) -> int:
        """Remove the least recently used entries until the folder holds at most
        ``max_bytes``; how many were removed."""
        entries = []
        for path in self.root.glob(f"??/*{SUFFIX}"):
            with contextlib.suppress(OSError):
                stat = path.lstat()
                entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                removed += 1
        return removed
