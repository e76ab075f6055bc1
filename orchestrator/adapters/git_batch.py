"""Git's objects through GitPython, and ``git ls-tree -r -z`` records parsed.

:class:`Objects` is one repository's object database (GitPython's ``Repo.odb``, a
``GitCmdObjectDB``): every object is asked for through GitPython's persistent ``git
cat-file --batch-check`` first (its kind and size, never a byte of its body), and only
an object the caller then reads is streamed from the persistent ``git cat-file
--batch`` (``odb.stream``), in chunks of at most :data:`CHUNK` bytes. So the blob readers
of :mod:`orchestrator.adapters.git` and the tree writer of
:mod:`orchestrator.adapters.tree_export` see an object's size before any of it is in
memory and refuse a huge one unread. GitPython's persistent process is not for threads:
each :class:`Objects` has its own ``Repo`` (one per call, closed with it). A body left
half-read (the caller stopped, or git died) stops both processes, so the next object
starts a fresh batch, and a failure is a :class:`GitError` with git's last line.

GitPython is imported when an :class:`Objects` is opened, never at start-up (``--help``
and the read commands stay fast).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from orchestrator.errors import GitError

CHUNK = 1 << 20


def gitpython() -> Any:
    """The ``git`` package (GitPython), imported on first use. A missing git command is
    this adapter's own error (:class:`GitError`, when a command runs), not an import
    failure."""
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    import git

    return git


@dataclass(frozen=True, kw_only=True)
class Found:
    """One object by name: ``kind`` is None when git does not have it (missing, or an
    ambiguous name); ``oid`` its full id when found."""

    name: str
    kind: str | None
    size: int = 0
    oid: str = ""


class Objects:
    """One repository's objects (a context manager): :meth:`header` of any object name,
    then :meth:`chunks` or :meth:`read` of a found object's body."""

    def __init__(self, repo: Path) -> None:
        git = gitpython()
        try:
            self._repo = git.Repo(os.fspath(repo))
        except (git.exc.InvalidGitRepositoryError, git.exc.NoSuchPathError) as error:
            raise GitError(f"git cat-file failed: {repo}: not a git repository ({error})") from None

    def __enter__(self) -> Objects:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def header(self, name: str) -> Found:
        """The kind and size of the object ``name`` names (``<sha>:<path>``, an object id),
        read from ``cat-file --batch-check``: nothing of its body is read."""
        if "\n" in name:
            raise ValueError("an object name cannot hold a line break")
        if name.endswith("\r"):  # the batch reads "<name>\r\n" as "<name>": asked apart
            return self._header_apart(name)
        try:
            oid, kind, size = self._repo.git.get_object_header(name)
        except ValueError:  # "<name> missing" or "ambiguous": no object, unless git died
            self._check_alive("cat_file_header")
            return Found(name=name, kind=None)
        except OSError as error:  # the persistent process is gone (a broken pipe)
            self._fail("cat_file_header", str(error))
        return Found(name=name, kind=_text(kind), size=int(size), oid=_text(oid))

    def _header_apart(self, name: str) -> Found:
        """:meth:`header` by git's own commands, for a name the batch cannot carry."""
        git = gitpython()
        try:
            oid = self._repo.git.rev_parse("--verify", "--quiet", "--end-of-options", name)
            kind = self._repo.git.cat_file("-t", oid)
            size = self._repo.git.cat_file("-s", oid)
        except git.GitCommandError:  # no such object (or an ambiguous name), as the batch
            return Found(name=name, kind=None)
        return Found(name=name, kind=kind, size=int(size), oid=oid)

    def chunks(self, found: Found) -> Generator[bytes, None, None]:
        """The body of an object :meth:`header` found, in chunks of at most :data:`CHUNK`
        (the caller checked its size first)."""
        from gitdb.util import hex_to_bin

        body: Any = None
        left, complete = found.size, False
        try:
            try:
                stream = self._repo.odb.stream(hex_to_bin(found.oid))
            except (ValueError, OSError) as error:
                self._fail("cat_file_all", str(error))
            body = stream.stream  # GitPython's sized view of the persistent batch's output
            if stream.size != found.size:
                self._fail("cat_file_all", f"{found.name}: its size changed while read")
            while left > 0:
                chunk = body.read(min(CHUNK, left))
                if not chunk:
                    self._fail("cat_file_all", f"{found.name}: the object ended early")
                left -= len(chunk)
                yield chunk
            complete = True
        finally:
            if not complete:
                self._abandon(body)

    def read(self, found: Found) -> bytes:
        """A found object's body, whole: the caller checked its size first."""
        return b"".join(self.chunks(found))

    def close(self) -> None:
        """Stop GitPython's persistent processes and release the repository."""
        self._repo.close()

    def _abandon(self, body: Any) -> None:
        """A body left unread: the batch's next answer would start inside it, so both
        persistent processes stop (the next object starts fresh). GitPython would read
        the rest of an unread body when the stream is collected: there is none to read."""
        if body is not None:
            body._nbr = body._size
        self._repo.git.clear_cache()

    def _check_alive(self, which: str) -> None:
        command = getattr(self._repo.git, which, None)
        process = getattr(command, "proc", None)
        if process is not None and process.poll() is not None:
            self._fail(which, "")

    def _fail(self, which: str, detail: str) -> Any:
        """The batch failed (a corrupt object, git gone): git's last line, as a GitError."""
        command = getattr(self._repo.git, which, None)
        process = getattr(command, "proc", None)
        last = ""
        if process is not None and process.stderr is not None and process.poll() is not None:
            lines = process.stderr.read().decode(errors="replace").strip().splitlines()
            last = lines[-1].removeprefix("fatal: ") if lines else ""
        self._repo.git.clear_cache()
        raise GitError(f"git cat-file failed: {last or detail or 'the batch ended early'}")


def _text(value: str | bytes) -> str:
    """A header's word (GitPython hands them over as bytes)."""
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


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
