"""Git, thin: resolve revisions to full SHAs, list trees, read blobs, export a revision's
tree (and lay another revision's test files over it).

GitPython is the engine: its ``Repo`` and object database (``Repo.odb`` over its
persistent ``git cat-file``: :mod:`orchestrator.adapters.git_batch`) for every object read,
``git.Git`` for every other command. It is imported on first use, never at start-up
(``--help`` and the read commands stay fast); ``git apply`` of a mutant runs apart (it
needs the process umask that keeps the tree readable, which ``git.Git`` cannot set).

Sources are *exported*, not checked out as worktrees: the revision's tree is listed
(``ls-tree``) and every file written out by the tool itself, its blob streamed from the
object database (:mod:`orchestrator.adapters.tree_export`). Why this and not ``git
worktree add`` or ``checkout-index``:

- the result has no ``.git`` file (a worktree's ``.git`` points at a host path and
  breaks git inside a container);
- nothing is written into the repository (no ``.git/worktrees/<name>`` entry to
  prune after a killed run, no index, so concurrent replays of one repository never
  contend for worktree metadata and need no add/remove lock);
- every file is exactly its committed bytes: the tree's ``.gitattributes`` (``eol=crlf``,
  ``ident``, ``working-tree-encoding``, ``filter=``) and the operator's ``core.autocrlf``
  are not applied, so the tree cap (checked on ``ls-tree -l`` sizes before a byte is
  written, then counted as written) holds for what lands on disk, and no filter driver
  runs on the tree's say. Unlike ``git archive``, ``export-ignore``/``export-subst`` are
  ignored too: the tests run on the files of the commit. (A mutant patch is applied with
  ``git apply`` in the tree, outside any repository: no attribute applies there either,
  and git refuses a path through a link or out of the tree.)

Blobs the host parses (configuration files, test modules, requirement files) are read
streamed, one object at a time, each under a byte cap (``ORCHESTRATOR_MAX_READ_BYTES``,
``core.tree_limits``): over it is exit 2 naming the file, never the whole blob in memory.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import interrupts
from orchestrator.adapters.git_batch import Objects, TreeEntry, gitpython, parse_ls_tree
from orchestrator.adapters.host import current_owner, host_id, pid_alive
from orchestrator.adapters.tree_export import write_tree
from orchestrator.adapters.tree_files import remove_tree_file, tree_usage
from orchestrator.core.owners import local_owner, owner_from_stem, scratch_stem, sweep_verdict
from orchestrator.core.tree_limits import TreeCaps, TreeSize, read_problem, tree_caps, tree_problem
from orchestrator.errors import GitError, InputError, UnknownRevisionError

if TYPE_CHECKING:
    from orchestrator.core.test_files import SideOverlay

SCRATCH_PREFIX = "orchestrator-replay-"  # exported trees, result folders, fixture copies
THAW_SCRATCH_PREFIX = "orchestrator-thaw-"  # a freeze's stored fixture, written out to mount
SCRATCH_PREFIXES = (SCRATCH_PREFIX, THAW_SCRATCH_PREFIX)  # every scratch folder the tool makes
# Exported files must be readable by the container's uid 1000, whatever the caller's umask.
READABLE_UMASK = 0o022
# A regular file's modes in a tree (a link is 120000, a submodule 160000).
REGULAR_MODES = frozenset({"100644", "100755"})


# Repositories already checked by this process (the check is one ``rev-parse``).
_CHECKED: set[str] = set()


def check_repository(repo: Path) -> None:
    """``repo`` is a repository: the top of a work tree, a bare repository or a ``.git``
    folder; a folder inside a work tree is not (nothing is searched upwards). Anything
    else is bad input, with git's own reason when it gives one."""
    key = os.fspath(repo)
    if key in _CHECKED:
        return
    status, out, err = _run(
        "-C", key, "rev-parse", "--is-inside-git-dir", "--absolute-git-dir", "--show-prefix"
    )
    lines = out.decode("utf-8", errors="surrogateescape").splitlines()
    if status != 0 or len(lines) < 2:
        reason = err.decode(errors="replace").strip().splitlines()
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
    streamed ``git cat-file --batch``. A blob over the read cap is an :class:`InputError`
    (exit 2) naming the path, the revision, its size and the cap; it is never read."""
    check_repository(repo)
    caps = _caps()
    asked = [(sha, list(paths)) for sha, paths in wanted]
    keys = [(sha, path) for sha, paths in asked for path in paths]
    names: list[str] = []
    for sha, path in keys:
        # A path with a line break cannot be a batch line: its object is named by its id.
        names.append(f"{sha}:{path}" if "\n" not in path else _object_id(repo, f"{sha}:{path}"))
    found: dict[tuple[str, str], bytes | None] = {}
    with Objects(repo) as objects:
        for (sha, path), name in zip(keys, names, strict=True):
            blob = objects.header(name)
            if blob.kind != "blob":
                found[(sha, path)] = None
                continue
            problem = read_problem(f"{path} at {sha[:12]}", blob.size, caps)
            if problem is not None:
                raise InputError(problem)
            found[(sha, path)] = objects.read(blob)
    return [{path: found[(sha, path)] for path in paths} for sha, paths in asked]


def _object_id(repo: Path, name: str) -> str:
    """The object ``<sha>:<path>`` names, else a name the batch reports missing."""
    answer = _git_answer(repo, "rev-parse", "--verify", "--quiet", name)
    oid = answer.decode().strip() if answer is not None else ""
    return oid if oid and "\n" not in oid else "0" * 40


def _caps() -> TreeCaps:
    try:
        return tree_caps(os.environ)
    except ValueError as error:
        raise InputError(str(error)) from None


def _git_answer(repo: Path, *args: str) -> bytes | None:
    """A git command's standard output, or None when it says no (an unknown revision, an
    absent path): for questions whose "no" is an answer, not a failure."""
    status, out, _ = _run("-C", str(repo), *args)
    return out if status == 0 else None


def tree_id(repo: Path, sha: str) -> str:
    """The id of commit ``sha``'s tree: two commits with one tree export the same files."""
    return _git_output(repo, "rev-parse", "--verify", f"{sha}^{{tree}}").decode().strip()


def list_tree(repo: Path, sha: str) -> dict[str, str]:
    """Every file of commit ``sha``'s tree (regular files and symlinks; no submodules):
    path -> blob SHA, in git's order."""
    return {entry.path: entry.oid for entry in _entries(repo, sha) if entry.kind == "blob"}


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
    status, _, _ = _run("-C", str(repo), "merge-base", "--is-ancestor", ancestor, sha)
    return status == 0


def _entries(repo: Path, sha: str) -> list[TreeEntry]:
    return parse_ls_tree(_git_output(repo, "ls-tree", "-r", "-z", "--full-tree", sha))


def read_objects(
    repo: Path, shas: Iterable[str], *, names: Mapping[str, str] | None = None
) -> dict[str, bytes]:
    """The bytes of each blob SHA (one streamed ``git cat-file --batch`` for all of
    them); one over the read cap is an :class:`InputError` naming it (``names``: a path
    for each SHA, for that message)."""
    wanted = list(dict.fromkeys(shas))
    caps = _caps()
    found: dict[str, bytes] = {}
    if not wanted:
        return found
    with Objects(repo) as objects:
        for sha in wanted:
            blob = objects.header(sha)
            if blob.kind is None:  # a resolved tree never lists one
                raise GitError(f"git cat-file failed: {sha} is missing")
            where = f"{names[sha]} (blob {sha[:12]})" if names and sha in names else f"blob {sha}"
            problem = read_problem(where, blob.size, caps)
            if problem is not None:
                raise InputError(problem)
            found[sha] = objects.read(blob)
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


def _run(*args: str) -> tuple[int, bytes, bytes]:
    """``git *args`` through GitPython's ``git.Git``: its exit status, standard output and
    standard error, as bytes (a missing git command is a :class:`GitError`)."""
    git = gitpython()
    try:
        status, out, err = git.Git().execute(
            ["git", *args],
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
        )
    except git.exc.GitCommandNotFound:
        raise GitError("the git command is not installed (or not on PATH)") from None
    if isinstance(err, str):
        err = err.encode("utf-8", "surrogateescape")
    return int(status), bytes(out), err


def _git_output(repo: Path, *args: str) -> bytes:
    """A git command's standard output; a failure is the machine's (a :class:`GitError`)."""
    status, out, err = _run("-C", str(repo), *args)
    if status != 0:
        detail = err.decode(errors="replace").strip().splitlines()
        verb = next((arg for arg in args if not arg.startswith("-")), "")
        raise GitError(f"git {verb} failed: {detail[-1] if detail else status}")
    return out


def tree_size(repo: Path, sha: str) -> TreeSize:
    """Files and bytes of commit ``sha``'s tree as the object store says (nothing is
    unpacked: ``ls-tree -l`` reads each object's header)."""
    return size_of(_sized_entries(repo, sha))


def _sized_entries(repo: Path, sha: str) -> list[TreeEntry]:
    return parse_ls_tree(_git_output(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", sha))


def size_of(entries: Iterable[TreeEntry]) -> TreeSize:
    """Files (blobs: files and links) and bytes of ``ls-tree -l`` entries. Pure."""
    files = total = largest = 0
    largest_path = ""
    for entry in entries:
        if entry.kind != "blob":
            continue
        files += 1
        total += entry.size
        if entry.size > largest:
            largest, largest_path = entry.size, entry.path
    return TreeSize(
        files=files, total_bytes=total, largest_path=largest_path, largest_bytes=largest
    )


def check_tree_size(repo: Path, sha: str, size: TreeSize | None = None) -> None:
    """Refuse (exit 2) a commit whose tree is over the caps (``core.tree_limits``);
    ``size``: its size when known."""
    problem = tree_problem(size or tree_size(repo, sha), _caps())
    if problem is not None:
        raise InputError(f"{sha[:12]}: {problem}; nothing was exported")


def export_tree(repo: Path, sha: str, dest: Path) -> TreeSize:
    """Write the tree of commit ``sha`` into ``dest`` (no ``.git``), every file as
    committed (:mod:`orchestrator.adapters.tree_export`); what it then holds.

    ``sha`` is a resolved commit (:func:`resolve_rev`): a git command that fails here
    is a :class:`GitError` (exit 3), not bad input; a tree over the caps, or with a path
    the host may not write, is bad input (exit 2).
    """
    entries = _sized_entries(repo, sha)
    # Before a byte is written: a packed bomb stays packed.
    check_tree_size(repo, sha, size_of(entries))
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)
    return write_tree(repo, sha, dest, entries, caps=_caps())


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


def overlay_files(repo: Path, tree: Path, overlay: SideOverlay) -> TreeSize:
    """Lay one revision's files over an exported tree: remove ``overlay.remove``, then
    write ``overlay.write`` as they are at ``overlay.rev`` (as committed, replacing what
    is in the way, never through a link). The tree's bytes after the overlay, counted as
    they are written, stay under the caps."""
    for path in overlay.remove:
        remove_tree_file(tree, path)
    if not overlay.write:
        return TreeSize(files=0, total_bytes=0)
    listed = _sized_entries(repo, overlay.rev)
    check_tree_size(repo, overlay.rev, size_of(listed))
    wanted = set(overlay.write)
    entries = [entry for entry in listed if entry.path in wanted]
    if len(entries) != len(wanted):
        missing = sorted(wanted - {entry.path for entry in entries})[0]
        raise GitError(f"git ls-tree failed: {missing} is not in {overlay.rev[:12]}")
    usage = tree_usage(tree)
    held = TreeSize(files=usage.files, total_bytes=usage.total_bytes)
    return write_tree(repo, overlay.rev, tree, entries, caps=_caps(), written=held, over=True)


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
        export_tree(repo, sha, tree)
        if mutant is not None:
            apply_patch(tree, mutant)
        if tests is not None:
            overlay_files(repo, tree, tests)
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
    """Every regular file under ``folder`` (repository-relative) at commit ``sha``: no
    symbolic link and no submodule, as the host's reads of an exported tree see it."""
    check_repository(repo)
    out = _git_output(
        repo, "--literal-pathspecs", "ls-tree", "-r", "-z", "--full-tree", sha, "--",
        folder.rstrip("/") + "/",
    )  # fmt: skip
    return tuple(entry.path for entry in parse_ls_tree(out) if entry.mode in REGULAR_MODES)


def file_modes(repo: Path, sha: str, names: Iterable[str]) -> dict[str, str]:
    """The mode of each of ``names`` (at the top of the tree) present at commit ``sha``
    (``100644``/``100755``: a regular file, ``120000``: a symbolic link, ``040000``: a
    folder, ``160000``: a submodule); an absent name is left out."""
    wanted = [name for name in names if name]
    if any("/" in name for name in wanted):
        raise ValueError("file_modes takes names at the top of the tree")
    if not wanted:
        return {}
    check_repository(repo)
    out = _git_output(
        repo, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", sha, "--", *wanted
    )
    return {entry.path: entry.mode for entry in parse_ls_tree(out) if entry.path in wanted}


def read_regular_files(
    repo: Path, sha: str, names: Sequence[str]
) -> tuple[dict[str, bytes | None], dict[str, str]]:
    """:func:`read_blobs` of ``names`` (at the top of the tree), regular files only: the
    bytes of each (None when absent or not a regular file), and the mode of each name
    that is there but not a regular file (a symbolic link's text is no configuration,
    and on the host the exported link would never be followed)."""
    modes = file_modes(repo, sha, names)
    regular = [name for name in names if modes.get(name) in REGULAR_MODES]
    read = read_blobs(repo, sha, regular)
    others = {name: mode for name, mode in modes.items() if mode not in REGULAR_MODES}
    return {name: read.get(name) for name in names}, others
