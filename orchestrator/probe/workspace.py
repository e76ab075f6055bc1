"""The folders a replay finds ready: `--make-dir` folders, empty `--fresh-dir` folders and
a fresh `--copy-tree` copy.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path


def empty_dir(folder: Path) -> None:
    """Remove everything in ``folder`` (not the folder: it may be a mount point)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def copy_contents(source: Path, dest: Path) -> None:
    """Copy what ``source`` holds into the empty ``dest`` (links kept as links). The
    copies belong to whoever runs the driver, so they are writable."""
    import shutil

    with os.scandir(source) as entries:
        for entry in entries:
            target = dest / entry.name
            if entry.is_dir(follow_symlinks=False):
                shutil.copytree(entry.path, target, symlinks=True)
            else:
                shutil.copy2(entry.path, target, follow_symlinks=False)


@dataclass(frozen=True, kw_only=True)
class Workspace:
    """HOME and the like (``make_dirs``), folders each replay finds empty (``fresh_dirs``:
    Hypothesis's example database) and the writable copy of a tree (``copy_tree``)."""

    make_dirs: tuple[Path, ...] = ()
    fresh_dirs: tuple[Path, ...] = ()
    copy_tree: tuple[Path, Path] | None = None

    def reset(self) -> None:
        """HOME there, the fresh folders empty, and (with --copy-tree) a fresh tree, for
        the next replay."""
        for folder in self.make_dirs:
            folder.mkdir(parents=True, exist_ok=True)
        for folder in self.fresh_dirs:
            empty_dir(folder)
        if self.copy_tree is None:
            return
        source, dest = self.copy_tree
        empty_dir(dest)
        copy_contents(source, dest)
        # The replay runs in its copy: a container whose working directory is this tmpfs
        # starts elsewhere (the engine would make the mount point root's), so a driver
        # that is the container's own command (serve mode) enters it here.
        os.chdir(dest)
        import importlib

        # Folders on sys.path that did not exist when the driver started (the tree's
        # src/ before its first copy) are cached as "nothing here": forget that.
        importlib.invalidate_caches()
        for entry in [key for key, finder in sys.path_importer_cache.items() if not finder]:
            del sys.path_importer_cache[entry]  # what Python < 3.10 does not forget
