"""Assertion rewriting once per container: a driver's later replays reuse the first's.

pytest rewrites the asserts of every test module (and conftest) it imports and keeps the
result as a pyc beside the source - unless it may not write bytecode there, as in a
replay (a read-only tree, ``PYTHONDONTWRITEBYTECODE=1``): then every replay rewrites every
module again, which is most of what a replay of a few tests costs. In fork mode the driver
keeps the rewritten code in a folder of its own instead (``<out>/.rewritten/``: never the
tree, never a folder the tests see), removed when the driver ends; or in the folder
``--rewrite-cache`` names, left for the next driver of the same container (a screening
container that serves the second phase: its replays then rewrite nothing the screening
already did).

An entry is keyed by the module's path and content, the interpreter, the pytest version
and the one option that changes the rewriting (``enable_assertion_pass_hook``), so a
module is loaded only as pytest itself would have rewritten it. Anything unexpected
(another pytest without ``_rewrite_test``, an unreadable or foreign entry, a folder that
cannot be written, bytecode being written) means no cache: pytest rewrites, as it always
did. An entry is only written while most of the folder's file system stays free (the
results share it: :func:`has_room`). As with pytest's own pyc cache, a warning the
rewriting itself gives (an assert on a tuple) shows in the replay that rewrote the module
only. Standard library and pytest only.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any, Final

from orchestrator.probe.atomic import write_bytes_atomic

FOLDER: Final = ".rewritten"
_MARK: Final = "_replay_rewrite_cache"
RESERVE_BYTES: Final = 256 * 1024 * 1024

Rewrite = Callable[[Path, Any], tuple[Any, CodeType]]


def cache_key(path: Path, source: bytes, *, pass_hook: object, pytest_version: str) -> str:
    """The entry's name: the module's path and content, and what else shapes its code."""
    digest = hashlib.sha256()
    for part in (str(path).encode("utf-8", "surrogateescape"), source):
        digest.update(len(part).to_bytes(8, "big") + part)
    digest.update(f"{pass_hook!r}\0{pytest_version}\0{sys.version}".encode())
    return digest.hexdigest()


def cached_rewrite(original: Rewrite, folder: Path, pytest_version: str) -> Rewrite:
    """``original`` (pytest's ``_rewrite_test``), its code objects kept in ``folder``.

    Served only while bytecode is not written (as in every replay): pytest then uses the
    code alone, not the first item it is returned with (a stat or a source hash, by
    version), which is only for writing a pyc."""

    def rewrite(fn: Path, config: Any) -> tuple[Any, CodeType]:
        if not sys.dont_write_bytecode:
            return original(fn, config)
        try:
            source = Path(fn).read_bytes()
            pass_hook = config.getini("enable_assertion_pass_hook") if config else False
            key = cache_key(Path(fn), source, pass_hook=pass_hook, pytest_version=pytest_version)
        except Exception:  # whatever this pytest's config is: no cache, as before
            return original(fn, config)
        entry = folder / f"{key}.code"
        try:
            code = marshal.loads(entry.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            code = None
        if isinstance(code, CodeType):
            return None, code
        result = original(fn, config)
        with contextlib.suppress(OSError, ValueError):  # no entry: the next one rewrites
            data = marshal.dumps(result[1])
            if has_room(folder, len(data)):
                write_bytes_atomic(entry, data, sync_folder=False)
        return result

    setattr(rewrite, _MARK, True)
    return rewrite


def has_room(folder: Path, size: int) -> bool:
    """Whether an entry of ``size`` bytes leaves room for the replays' results that share
    the folder's file system (in a container, a size-capped tmpfs): at least three
    quarters of it free, or 256 MiB on a larger one."""
    stats = os.statvfs(folder)
    total, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
    return free - size >= min(total * 3 // 4, RESERVE_BYTES)


def install(folder: Path) -> bool:
    """Route pytest's rewriting through ``folder`` (in this process and the children it
    forks afterwards); False when this pytest cannot be served so (nothing changed)."""
    try:
        import pytest
        from _pytest.assertion import rewrite as rewrite_module
    except ImportError:
        return False
    original = getattr(rewrite_module, "_rewrite_test", None)
    if not callable(original) or getattr(original, _MARK, False):
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    cached = cached_rewrite(original, folder, str(pytest.__version__))
    setattr(rewrite_module, "_rewrite_test", cached)  # noqa: B010 (typed by pytest's version)
    return True


def remove(folder: Path | None) -> None:
    """The cache goes with the driver that owns it (None: it owns none): only result
    files stay in its folder."""
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
