"""What the image installs: requirement files, ``--pip`` specs and the project's own
dependencies, collected into pip arguments. Pure.

The tree under test may be a pull request's, so what it says is confined: every file it
names (``-r``/``-c`` includes, ``[tool.setuptools.dynamic]`` files, the
``[tool.orchestrator.image-build]`` requirements) is a path inside the repository, read at
the pinned revision (:class:`FileRef`); an absolute path or one that leaves the repository
is refused, naming the file and line. Index and trust options in its files (``-i``,
``--index-url``, ``--extra-index-url``, ``-f``, ``--find-links``, ``--no-index``,
``--trusted-host``) are left out with a note: where pip downloads from is the operator's
choice only (``image build --index-url`` ...). Only the operator's ``--requirements FILE``
may lie outside the repository, and its includes stay in its folder."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from orchestrator.core.project_image.metadata import COMMENT, GroupInclude, ProjectMetadata
from orchestrator.errors import InputError

_HASH_OPTION = re.compile(r"\s--hash[=\s]\S+")
_EXTRAS_SUFFIX = re.compile(r"^(?P<path>.*?)(?:\[(?P<extras>[^\]]*)\])?$")
# pip options a requirements file may carry that we pass on to pip unchanged.
_PASSED_OPTIONS = ("--pre", "--prefer-binary", "--only-binary", "--no-binary")
# Where pip downloads from, and whom it trusts: the operator's options only, never a file's.
# Each maps to the ``image build`` option to use instead.
INDEX_OPTIONS = {
    "-i": "--index-url",
    "--index-url": "--index-url",
    "--extra-index-url": "--extra-index-url",
    "-f": "--find-links",
    "--find-links": "--find-links",
    "--no-index": "--no-index",
    "--trusted-host": "--trusted-host",
}
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


@dataclass(frozen=True, kw_only=True)
class FileRef:
    """A requirement file: a repository-relative path read at the pinned revision
    (``folder`` is None), or a file in an operator's folder on disk (the command line's
    ``--requirements``; ``folder`` absolute). ``path`` is normalised and stays inside."""

    path: str
    folder: str | None = None

    @property
    def shown(self) -> str:
        return self.path if self.folder is None else posixpath.join(self.folder, self.path)

    def include(self, given: str, where: str) -> FileRef:
        """The file ``given`` names from a line of this one, relative to this one's folder,
        in the same place (the repository, or the operator's folder)."""
        _refuse_absolute(given, where, self.folder)
        joined = posixpath.join(posixpath.dirname(self.path), given)
        return FileRef(path=inside_path(joined, where, self.folder), folder=self.folder)


def _place(folder: str | None) -> str:
    return "the repository" if folder is None else f"the folder of {folder}"


def _refuse_absolute(path: str, where: str, folder: str | None) -> None:
    if path.startswith(("/", "\\", "~")) or _WINDOWS_DRIVE.match(path):
        raise InputError(
            f"{where}: {path!r} is an absolute path; files are read from {_place(folder)} "
            "only: name it relative to that"
        )


def inside_path(path: str, where: str, folder: str | None = None) -> str:
    """``path`` normalised, when it names a file inside the repository (``folder`` None)
    or inside the operator's ``folder``; an absolute path, an empty one, or one that
    leaves with ``..`` is an :class:`InputError` naming ``where``."""
    if not path.strip() or "\0" in path:
        raise InputError(f"{where}: {path!r} is not a file name")
    _refuse_absolute(path, where, folder)
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        raise InputError(f"{where}: {path!r} leaves {_place(folder)}")
    if normal == ".":
        raise InputError(f"{where}: {path!r} is a folder, not a file")
    return normal


def operator_file(given: str, *, repo: str, cwd: str) -> FileRef:
    """The command line's ``--requirements FILE``: a path in the repository (read at the
    pinned revision) when it names one, relative to the repository or, lexically, under
    it; otherwise a file on disk in the operator's folder (relative to ``cwd``). Never
    resolved through the working checkout: ``repo`` and ``cwd`` are absolute."""
    if not given.strip() or "\0" in given:
        raise InputError(f"--requirements: {given!r} is not a file name")
    if not posixpath.isabs(given):
        normal = posixpath.normpath(given)
        if normal != ".." and not normal.startswith("../"):
            return FileRef(path=inside_path(normal, "--requirements"))
    absolute = posixpath.normpath(posixpath.join(cwd, given))
    root = posixpath.normpath(repo)
    if absolute.startswith(root.rstrip("/") + "/"):
        return FileRef(path=inside_path(posixpath.relpath(absolute, root), "--requirements"))
    folder, name = posixpath.split(absolute)
    return FileRef(path=inside_path(name, "--requirements", folder), folder=folder or "/")


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """What pip resolves: requirement specifiers, constraints, and pip options kept from
    requirement files; ``notes`` say what was left out or added, and why."""

    lines: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def requirements_text(self) -> str:
        """A requirements file for ``pip download -r``."""
        return "".join(f"{line}\n" for line in (*self.options, *self.lines))

    def constraints_text(self) -> str:
        return "".join(f"{line}\n" for line in self.constraints)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Lines with continuations joined and comments removed, with their first line number."""
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        line = " ".join(COMMENT.sub("", pending + raw).split())
        pending = ""
        if line:
            yield start, line
    if pending.strip():
        line = " ".join(COMMENT.sub("", pending).split())
        if line:
            yield start, line


def _option_value(line: str, short: str, long: str) -> str | None:
    """The value of ``-r x``, ``-rx``, ``--requirement x`` or ``--requirement=x``."""
    for prefix in (f"{long}=", f"{long} ", f"{short} ", short):
        if line.startswith(prefix):
            value = line[len(prefix) :].strip()
            return value or None
    return None


class _Collector:
    def __init__(self, metadata: ProjectMetadata, read: Callable[[FileRef], str | None]) -> None:
        self.metadata = metadata
        self.project = metadata.canonical_name
        self.read = read
        self.lines: list[str] = []
        self.constraints: list[str] = []
        self.options: list[str] = []
        self.notes: list[str] = list(metadata.notes)
        self.expanded_extras: set[str] = set()
        self.expanding_groups: list[str] = []
        self.files_seen: list[FileRef] = []

    # -- specifiers ---------------------------------------------------------------

    def add(self, spec: str, where: str) -> None:
        try:
            requirement = Requirement(spec)
        except InvalidRequirement as error:
            raise InputError(f"{where}: not a requirement: {spec!r} ({error})") from None
        if self.project is not None and canonicalize_name(requirement.name) == self.project:
            extras = sorted(canonicalize_name(extra) for extra in requirement.extras)
            self.notes.append(
                f"left out {spec!r} ({where}): it is the project under test"
                + (f"; its extras {', '.join(extras)} are installed instead" if extras else "")
            )
            for extra in extras:
                self.extra(extra, f"{where} ({spec})")
            return
        if spec not in self.lines:
            self.lines.append(spec)

    def extra(self, name: str, where: str) -> None:
        extra = canonicalize_name(name)
        if extra not in self.metadata.optional:
            known = ", ".join(sorted(self.metadata.optional)) or "none"
            raise InputError(f"{where}: the project has no extra {name!r} (it has: {known})")
        if extra in self.expanded_extras:
            return
        self.expanded_extras.add(extra)
        for spec in self.metadata.optional[extra]:
            self.add(spec, f"[project.optional-dependencies].{extra}")

    def group(self, name: str, where: str) -> None:
        group = canonicalize_name(name)
        if group not in self.metadata.groups:
            known = ", ".join(sorted(self.metadata.groups)) or "none"
            raise InputError(
                f"{where}: pyproject.toml has no dependency group {name!r} (it has: {known})"
            )
        if group in self.expanding_groups:
            cycle = " -> ".join([*self.expanding_groups, group])
            raise InputError(f"[dependency-groups]: include-group cycle {cycle}")
        self.expanding_groups.append(group)
        for item in self.metadata.groups[group]:
            if isinstance(item, GroupInclude):
                self.group(item.group, f"[dependency-groups].{group}")
            else:
                self.add(item, f"[dependency-groups].{group}")
        self.expanding_groups.pop()

    # -- requirement files ----------------------------------------------------------

    def file(self, ref: FileRef, where: str, *, constraints: bool = False) -> None:
        if ref in self.files_seen:
            return  # included twice (or a cycle): once is enough
        self.files_seen.append(ref)
        try:
            text = self.read(ref)
        except InputError as error:  # a link, unreadable, not text: say who named it
            raise InputError(f"{where}: {error}") from None
        if text is None:
            raise InputError(f"{where}: no such file {ref.shown}")
        for number, line in _logical_lines(text):
            self.file_line(line, ref, f"{ref.shown}:{number}", constraints=constraints)

    def file_line(self, line: str, ref: FileRef, where: str, *, constraints: bool) -> None:
        included = _option_value(line, "-r", "--requirement")
        if included is not None:
            self.file(ref.include(included, where), where, constraints=constraints)
            return
        constraint_file = _option_value(line, "-c", "--constraint")
        if constraint_file is not None:
            self.file(ref.include(constraint_file, where), where, constraints=True)
            return
        editable = _option_value(line, "-e", "--editable")
        if editable is not None:
            self.local(editable, where, editable=True, shown=line)
            return
        if line.startswith("-"):
            option = line.split("=", 1)[0].split(maxsplit=1)[0]
            instead = index_option(option)
            if instead is not None:
                # The value is not repeated: an index URL may carry a password.
                self.notes.append(
                    f"left out {instead if option.startswith('--') else option[:2]} ({where}): "
                    "where pip downloads from is the operator's choice only; pass "
                    f"{instead} to `orchestrator image build` instead"
                )
                return
            if option in _PASSED_OPTIONS:
                if not constraints and line not in self.options:
                    self.options.append(line)
                return
            raise InputError(f"{where}: pip option {option!r} is not supported here")
        spec = _HASH_OPTION.sub("", f" {line}").strip()
        if _looks_local(spec):
            self.local(spec, where, editable=False)
            return
        if constraints:
            try:
                Requirement(spec)
            except InvalidRequirement as error:
                raise InputError(f"{where}: not a constraint: {spec!r} ({error})") from None
            if spec not in self.constraints:
                self.constraints.append(spec)
            return
        self.add(spec, where)

    def local(self, target: str, where: str, *, editable: bool, shown: str | None = None) -> None:
        """``.``, ``-e .[tests]``, ``file:.``: the project itself; any other local path or
        editable install is refused (only the exported tree is tested)."""
        match = _EXTRAS_SUFFIX.match(target.strip())
        path = match.group("path") if match else target
        extras_text = (match.group("extras") if match else None) or ""
        path = path.removeprefix("file:").split("#", 1)[0] or "."
        if "://" not in path and posixpath.normpath(path) == ".":
            extras = [item.strip() for item in extras_text.split(",") if item.strip()]
            self.notes.append(
                f"left out {shown or target!r} ({where}): it is the project under test"
                + (f"; its extras {', '.join(extras)} are installed instead" if extras else "")
            )
            for extra in extras:
                self.extra(extra, f"{where} ({target})")
            return
        kind = "an editable requirement" if editable else "a local path requirement"
        raise InputError(
            f"{where}: {target!r} is {kind}; only the project itself (`.`) or packages pip "
            "can download may be listed"
        )


def index_option(option: str) -> str | None:
    """The ``image build`` option to use instead of a requirement file's index or trust
    option (``-ihttps://…`` too), None for any other option."""
    if option in INDEX_OPTIONS:
        return INDEX_OPTIONS[option]
    if option[:2] in ("-i", "-f") and not option.startswith("--"):
        return INDEX_OPTIONS[option[:2]]
    return None


def _looks_local(spec: str) -> bool:
    head = spec.split(";", 1)[0].strip()
    if head.startswith(("file:", ".", "/")):
        return True
    return "/" in head and "://" not in head and "@" not in head


TREE_REQUIREMENTS = "pyproject.toml [tool.orchestrator.image-build].requirements"
DYNAMIC_FILES = "pyproject.toml [tool.setuptools.dynamic].dependencies.file"


def collect_requirements(
    *,
    metadata: ProjectMetadata,
    requirement_files: Sequence[FileRef] = (),
    tree_requirement_files: Sequence[str] = (),
    extras: Sequence[str] = (),
    groups: Sequence[str] = (),
    pip_specs: Sequence[str] = (),
    read: Callable[[FileRef], str | None],
) -> Requirements:
    """Everything pip should resolve for the image, in order: the project's runtime
    dependencies, ``--extra``, ``--group``, requirement files (the operator's
    ``requirement_files``, else the tree's ``tree_requirement_files``), ``--pip`` specs,
    and pytest when nothing names it.

    ``read(ref)`` returns the text of a file (``None`` when absent; an
    :class:`InputError` when it may not be read, a symbolic link in the tree);
    requirement files include others relative to themselves, as pip does, and never
    outside the repository (or the operator's folder).
    """
    collector = _Collector(metadata, read)
    for spec in metadata.dependencies:
        collector.add(spec, f"{metadata.source} dependencies")
    for path in metadata.dependency_files:
        collector.file(FileRef(path=inside_path(path, DYNAMIC_FILES)), DYNAMIC_FILES)
    for extra in extras:
        collector.extra(extra, "--extra")
    for group in groups:
        collector.group(group, "--group")
    for ref in requirement_files:
        collector.file(ref, "--requirements")
    for path in tree_requirement_files:
        collector.file(FileRef(path=inside_path(path, TREE_REQUIREMENTS)), TREE_REQUIREMENTS)
    for spec in pip_specs:
        if _looks_local(spec):
            collector.local(spec, "--pip", editable=False)
        else:
            collector.add(spec, "--pip")
    named = {canonicalize_name(Requirement(line).name) for line in collector.lines}
    if "pytest" not in named:
        collector.lines.append("pytest")
        collector.notes.append(
            "added pytest: nothing asked for it, and the probe runs under the project's pytest"
        )
    return Requirements(
        lines=tuple(collector.lines),
        constraints=tuple(collector.constraints),
        options=tuple(collector.options),
        notes=tuple(collector.notes),
    )
