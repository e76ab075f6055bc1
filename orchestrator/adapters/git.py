"""Git, thin: resolve revisions to full SHAs, list trees, read blobs, export a revision's
tree (and lay another revision's test files over it).

Sources are *exported*, not checked out as worktrees: the revision's tree is read
into a private index file (``GIT_INDEX_FILE`` in our own temporary folder) and
written out with ``checkout-index``. Why this and not ``git worktree add``:

- the result has no ``.git`` file (a worktree's ``.git`` points at a host path and
  breaks git inside a container);
- nothing is written into the repository (no ``.git/worktrees/<name>`` entry to
  prune after a killed run, so concurrent replays of one repository never
  contend for worktree metadata and need no add/remove lock);
- unlike ``git archive`` it honours the same filters and attributes as a normal
  checkout and ignores ``export-ignore``/``export-subst``, so the tests run on
  exactly the files a developer would see.

Every exported tree lives in a scratch folder named after the owning process
(``orchestrator-replay-<pid>.<start>@<host id>-…``); it is removed on exit, and
:func:`sweep_scratch` removes the folders of processes that died (``orchestrator-thaw-…``
too).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import interrupts
from orchestrator.adapters.host import current_owner, host_id, pid_alive
from orchestrator.core.owners import local_owner, owner_from_stem, scratch_stem, sweep_verdict
from orchestrator.core.tree_limits import TreeSize, tree_caps, tree_problem
from orchestrator.errors import GitError, InputError, UnknownRevisionError

if TYPE_CHECKING:
    from orchestrator.core.test_files import SideOverlay

SCRATCH_PREFIX = "orchestrator-replay-"  # exported trees, result folders, fixture copies
THAW_SCRATCH_PREFIX = "orchestrator-thaw-"  # a freeze's stored fixture, written out to mount
SCRATCH_PREFIXES = (SCRATCH_PREFIX, THAW_SCRATCH_PREFIX)  # every scratch folder the tool makes
# Exported files must be readable by the container's uid 1000, whatever the caller's umask.
READABLE_UMASK = 0o022


# Repositories already checked by this process (the check is one ``rev-parse``).
_CHECKED: set[str] = set()


def check_repository(repo: Path) -> None:
    """``repo`` is a repository: the top of a work tree, a bare repository or a ``.git``
    folder; a folder inside a work tree is not (nothing is searched upwards). Anything
    else is bad input, with git's own reason when it gives one."""
    key = os.fspath(repo)
    if key in _CHECKED:
        return
    try:
        completed = subprocess.run(
            ["git", "-C", key, "rev-parse", "--is-inside-git-dir", "--absolute-git-dir",
             "--show-prefix"],
            capture_output=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise GitError("the git command is not installed (or not on PATH)") from None
    lines = completed.stdout.decode("utf-8", errors="surrogateescape").splitlines()
    if completed.returncode != 0 or len(lines) < 2:
        reason = completed.stderr.decode(errors="replace").strip().splitlines()
        detail = reason[-1].removeprefix("fatal: ") if reason else ""
        if not detail or "not a git repository" in detail or "cannot change to" in detail:
            detail = "not a git repository"
        raise InputError(f"{repo}: {detail}")
    inside_git_dir, git_dir = lines[0] == "true", lines[1]
    prefix = lines[2] if len(lines) > 2 else ""
    top = os.path.realpath(git_dir) == os.path.realpath(key) if inside_git_dir else not prefix
    if not top:
        raise InputError(f"{repo}: not a git repository")
    _CHECKED.add(key)


def resolve_rev(repo: Path, rev: str) -> str:
    """The full 40-hex SHA of the commit ``rev`` names in ``repo``."""
    if not rev.strip() or rev.startswith("-"):
        raise UnknownRevisionError(f"{repo}: not a revision: {rev!r}")
    check_repository(repo)
    # rev-parse --verify checks that the object exists and is (or peels to) a commit.
    found = _git_answer(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    sha = found.decode().strip() if found is not None else ""
    if len(sha) < 40:
        raise UnknownRevisionError(f"{repo}: unknown revision {rev!r}")
    return sha


def read_blobs(repo: Path, sha: str, paths: Iterable[str]) -> dict[str, bytes | None]:
    """The bytes of each path at commit ``sha`` (``None`` when the path is absent)."""
    return read_blobs_at(repo, [(sha, paths)])[0]


def read_blobs_at(
    repo: Path, wanted: Sequence[tuple[str, Iterable[str]]]
) -> list[dict[str, bytes | None]]:
    """For each ``(sha, paths)`` of ``wanted``, in order, the bytes of each path at that
    commit (``None`` when absent or not a file: a folder, a submodule), all in one
    ``git cat-file --batch``. A path with a line break cannot be a batch line: it is read
    on its own."""
    check_repository(repo)
    asked = [(sha, list(paths)) for sha, paths in wanted]
    lines = [f"{sha}:{path}" for sha, paths in asked for path in paths if "\n" not in path]
    found = dict(zip(lines, _batch_blobs(repo, lines), strict=True))
    results: list[dict[str, bytes | None]] = []
    for sha, paths in asked:
        side: dict[str, bytes | None] = {}
        for path in paths:
            name = f"{sha}:{path}"
            side[path] = found[name] if name in found else _one_blob(repo, name)
        results.append(side)
    return results


def _batch_blobs(repo: Path, names: Sequence[str]) -> list[bytes | None]:
    """``git cat-file --batch`` of ``<sha>:<path>`` names: each blob's bytes, else None."""
    if not names:
        return []
    output = _git_output(
        repo, "cat-file", "--batch=%(objectname) %(objecttype) %(objectsize)",
        stdin="".join(f"{name}\n" for name in names).encode("utf-8", "surrogateescape"),
    )  # fmt: skip
    blobs: list[bytes | None] = []
    offset = 0
    for _ in names:
        end = output.index(b"\n", offset)
        header = output[offset:end].split(b" ")
        offset = end + 1
        # Found: "<40 or 64 hex> <type> <size>"; else "<name> missing" (or "ambiguous").
        if len(header) == 3 and header[2].isdigit() and header[1] in _OBJECT_TYPES:
            size = int(header[2])
            blob = output[offset : offset + size]
            offset += size + 1  # the object, then a newline
            blobs.append(blob if header[1] == b"blob" else None)
        else:
            blobs.append(None)
    return blobs


_OBJECT_TYPES = frozenset({b"blob", b"tree", b"commit", b"tag"})


def _one_blob(repo: Path, name: str) -> bytes | None:
    return _git_answer(repo, "cat-file", "blob", name)


def _git_answer(repo: Path, *args: str) -> bytes | None:
    """A git command's standard output, or None when it says no (an unknown revision, an
    absent path): for questions whose "no" is an answer, not a failure."""
    completed = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    return completed.stdout if completed.returncode == 0 else None


def tree_id(repo: Path, sha: str) -> str:
    """The id of commit ``sha``'s tree: two commits with one tree export the same files."""
    return _git_output(repo, "rev-parse", "--verify", f"{sha}^{{tree}}").decode().strip()


def list_tree(repo: Path, sha: str) -> dict[str, str]:
    """Every file of commit ``sha``'s tree (regular files and symlinks; no submodules):
    path -> blob SHA, in git's order."""
    output = _git_output(repo, "ls-tree", "-r", "-z", "--full-tree", sha)
    files: dict[str, str] = {}
    for record in output.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        _mode, kind, blob = meta.decode().split()
        if kind == "blob":
            files[path.decode("utf-8", errors="surrogateescape")] = blob
    return files


def tree_modes(repo: Path, sha: str, paths: Iterable[str]) -> dict[str, str | None]:
    """The git mode of each path in commit ``sha``'s tree (``100644``, ``100755``, ``120000``
    for a symbolic link, ``040000`` for a folder, ``160000`` for a submodule); None when the
    tree has no such entry. Paths are literal (no pathspec magic)."""
    wanted = list(dict.fromkeys(paths))
    if not wanted:
        return {}
    check_repository(repo)
    output = _git_output(
        repo, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", sha, "--", *wanted
    )
    found: dict[str, str] = {}
    for record in output.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            found[path.decode("utf-8", errors="surrogateescape")] = meta.split()[0].decode()
    return {path: found.get(path) for path in wanted}


def is_ancestor(repo: Path, ancestor: str, sha: str) -> bool:
    """Whether commit ``ancestor`` is ``sha`` or one of its ancestors in ``repo`` (False
    when either is unknown there). Both are full SHAs the caller checked."""
    completed = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", ancestor, sha],
        capture_output=True,
        check=False,
    )
    return completed.returncode == 0


def read_objects(repo: Path, shas: Iterable[str]) -> dict[str, bytes]:
    """The bytes of each blob SHA (one ``git cat-file --batch`` for all of them)."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    output = _git_output(repo, "cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())
    found: dict[str, bytes] = {}
    offset = 0
    for sha in wanted:
        end = output.index(b"\n", offset)
        header = output[offset:end].decode().split()
        offset = end + 1
        if len(header) != 3:  # "<sha> missing": a resolved tree never lists one
            raise GitError(f"git cat-file failed: {sha} is missing")
        size = int(header[2])
        found[sha] = output[offset : offset + size]
        offset += size + 1  # the object, then a newline
    return found


def make_scratch(purpose: str, *, prefix: str = SCRATCH_PREFIX) -> Path:
    """A new private folder in the temp dir, named after this process (``<prefix><pid>.
    <start>@<host id>-<purpose>-…``, see ``core.owners``); readable by uid 1000."""
    stem = scratch_stem(current_owner())
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{stem}-{purpose}-"))
    folder.chmod(0o755)  # the container's non-root user must traverse it
    return folder


def remove_scratch(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def sweep_scratch(
    is_alive: Callable[..., bool] = pid_alive,
    root: Path | None = None,
    *,
    host: str | None = None,
    now: float | None = None,
) -> list[Path]:
    """Remove the scratch folders (every prefix the tool makes) that no live process owns.

    This host's folders go when their owner is gone; another host's (a temp dir shared
    between pid namespaces) only once a day old, logged. A live run's never."""
    from orchestrator.log import get_logger

    log = get_logger(__name__)
    host = host or host_id()
    now = time.time() if now is None else now
    removed: list[Path] = []
    base = root or Path(tempfile.gettempdir())
    for prefix in SCRATCH_PREFIXES:
        for folder in base.glob(f"{prefix}*"):
            owner = owner_from_stem(folder.name[len(prefix) :].split("-", 1)[0], host_id=host)
            alive = None
            if owner is not None and local_owner(owner, host):
                alive = is_alive(owner.pid, owner.start or None)
            try:
                age_s: float | None = now - folder.stat().st_mtime
            except OSError:
                continue  # gone meanwhile
            verdict = sweep_verdict(owner, host_id=host, owner_alive=alive, age_s=age_s)
            if not verdict.remove:
                continue
            remove_scratch(folder)
            removed.append(folder)
            if verdict.foreign:
                log.warning("sweep.foreign_scratch_removed", folder=str(folder), why=verdict.why)
    log.debug("sweep.done", what="scratch", removed=len(removed))
    return removed


def _git(
    repo: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> None:
    completed = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        umask=READABLE_UMASK,
    )
    if completed.returncode != 0:
        # Only resolved SHAs of a repository that opened get here: the input was good, so
        # a failure is the machine's (a corrupt object, a full disk), not the user's.
        detail = (completed.stderr or completed.stdout).strip().splitlines()
        verb = next((arg for arg in args if not arg.startswith("-")), "")
        raise GitError(f"git {verb} failed: {detail[-1] if detail else completed.returncode}")


def _git_output(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """A git command's standard output; a failure is the machine's (see :func:`_git`)."""
    completed = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False
    )
    if completed.returncode != 0:
        detail = completed.stderr.decode(errors="replace").strip().splitlines()
        verb = next((arg for arg in args if not arg.startswith("-")), "")
        raise GitError(f"git {verb} failed: {detail[-1] if detail else completed.returncode}")
    return completed.stdout


def tree_size(repo: Path, sha: str) -> TreeSize:
    """Files and bytes of commit ``sha``'s tree as the object store says (nothing is
    unpacked: ``ls-tree -l`` reads each object's header)."""
    output = _git_output(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", sha)
    files = total = largest = 0
    largest_path = ""
    for record in output.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        fields = meta.split()
        if len(fields) != 4 or fields[1] != b"blob":
            continue
        size = int(fields[3]) if fields[3].isdigit() else 0
        files += 1
        total += size
        if size > largest:
            largest, largest_path = size, path.decode("utf-8", errors="replace")
    return TreeSize(
        files=files, total_bytes=total, largest_path=largest_path, largest_bytes=largest
    )


def check_tree_size(repo: Path, sha: str) -> None:
    """Refuse (exit 2) a commit whose tree is over the caps (``core.tree_limits``)."""
    try:
        caps = tree_caps(os.environ)
    except ValueError as error:
        raise InputError(str(error)) from None
    problem = tree_problem(tree_size(repo, sha), caps)
    if problem is not None:
        raise InputError(f"{sha[:12]}: {problem}; nothing was exported")


def export_tree(repo: Path, sha: str, dest: Path, index_file: Path) -> None:
    """Write the tree of commit ``sha`` into ``dest`` (no ``.git``), via a private index.

    ``sha`` is a resolved commit (:func:`resolve_rev`): a git command that fails here
    is a :class:`GitError` (exit 3), not bad input.
    """
    check_tree_size(repo, sha)  # before a byte is written: a packed bomb stays packed
    env = {"GIT_INDEX_FILE": str(index_file)}
    _git(repo, "read-tree", sha, env=env)
    dest.mkdir(parents=True, exist_ok=True)
    # --work-tree (not --prefix) so that bare repositories work too.
    _git(repo, f"--work-tree={dest}", "checkout-index", "--all", "--force", env=env)
    index_file.unlink(missing_ok=True)


def apply_patch(tree: Path, patch: Path) -> None:
    """Apply a unified diff (a mutant) to an exported tree; one that does not apply is bad input."""
    if not patch.is_file():
        raise InputError(f"{patch}: no such patch file")
    completed = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(patch.resolve())],
        cwd=tree,
        # The tree has no .git: stop git from discovering a repository above it.
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)},
        capture_output=True,
        text=True,
        check=False,
        umask=READABLE_UMASK,
    )
    if completed.returncode != 0:
        detail = completed.stderr.strip().splitlines()
        raise InputError(f"{patch}: does not apply ({detail[0] if detail else 'git apply failed'})")


def overlay_files(repo: Path, tree: Path, overlay: SideOverlay, index_file: Path) -> None:
    """Lay one revision's files over an exported tree: remove ``overlay.remove``, then
    write ``overlay.write`` as they are at ``overlay.rev`` (through a private index, with
    the same filters and attributes as the export itself)."""
    for path in overlay.remove:
        target = tree / path
        if target.is_symlink() or target.is_file():
            target.unlink()
        _prune_empty(target.parent, tree)
    if not overlay.write:
        return
    check_tree_size(repo, overlay.rev)
    env = {"GIT_INDEX_FILE": str(index_file)}
    _git(repo, "read-tree", overlay.rev, env=env)
    _git(
        repo,
        f"--work-tree={tree}",
        "checkout-index",
        "--force",
        "-z",
        "--stdin",
        env=env,
        stdin="\0".join(overlay.write) + "\0",
    )
    index_file.unlink(missing_ok=True)


def _prune_empty(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents while they are empty, never ``root`` itself."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


@contextmanager
def checkout(
    repo: Path,
    sha: str,
    *,
    mutant: Path | None = None,
    tests: SideOverlay | None = None,
    keep: bool = False,
) -> Iterator[Path]:
    """An exported tree of ``sha`` in a unique temp folder, always removed: ``mutant``
    applied, then the test files of ``tests.rev`` laid over it (``--tests-from``: added,
    modified and deleted test files all follow that revision).

    ``keep`` leaves a complete tree in place for a container that outlives this process
    (``reproduce --keep``); :func:`sweep_scratch` removes it once the process is gone.
    A tree that failed half-way is removed all the same."""
    scratch: Path | None = None
    complete = False
    try:
        with interrupts.shielded():  # a Ctrl-C lands after the folder is known, or before
            scratch = make_scratch("src")
        tree = scratch / "src"
        export_tree(repo, sha, tree, scratch / "index")
        if mutant is not None:
            apply_patch(tree, mutant)
        if tests is not None:
            overlay_files(repo, tree, tests, scratch / "tests-index")
        complete = True
        yield tree
    finally:
        if scratch is not None and not (keep and complete):
            remove_scratch(scratch)


def mainline_root(repo: Path, sha: str) -> str:
    """The first commit of ``sha``'s first-parent history: it names the repository across
    clones and stays the same as the history grows (merged-in histories do not move it)."""
    check_repository(repo)
    roots = _git_output(repo, "rev-list", "--first-parent", "--max-parents=0", sha).split()
    if not roots:
        raise GitError(f"git rev-list found no root commit of {sha}")
    return roots[-1].decode()


def list_paths(repo: Path, sha: str, folder: str) -> tuple[str, ...]:
    """Every file path under ``folder`` (repository-relative) at commit ``sha``."""
    check_repository(repo)
    out = _git_output(repo, "ls-tree", "-r", "-z", "--name-only", sha, "--",
                      folder.rstrip("/") + "/")  # fmt: skip
    return tuple(
        path.decode("utf-8", errors="surrogateescape") for path in out.split(b"\0") if path
    )
