"""A project's runner image as values: what goes in, what is left out, the tag, the labels
and the Dockerfile. Pure: file texts in, values out (``services/image.py`` reads the files
at a revision, downloads the wheels and builds).

What goes into the image's virtual environment: the project's runtime dependencies
(``[project].dependencies``, or ``install_requires`` of ``setup.cfg``), the extras and
dependency groups asked for, the requirement files and ``--pip`` specs, and pytest when
none of them names it (the probe runs under the project's own pytest). The project itself
never goes in: each side's exported tree is what is tested, so a requirement naming it is
dropped (its extras are expanded instead), and a wheel of it that the resolver pulled in as
another package's dependency is left out of the wheelhouse. Every such step leaves a note.

The tag is a digest of everything the image is made of (base image ID, the wheels' names
and hashes, the apt packages, the Dockerfile and the labels), so the same inputs name the
same image and a second build reuses it.
"""

from __future__ import annotations

import configparser
import posixpath
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from orchestrator.core.digest import digest
from orchestrator.core.replay_env import LABEL_PYTHON  # read by replays (replay_env)
from orchestrator.errors import InputError

REPORT_SCHEMA = "project-image/1"
INPUTS_SCHEMA = "project-image-inputs/1"
IMAGE_REPOSITORY = "orchestrator-project"
APT_BASE_REPOSITORY = "orchestrator-project-base"

VENV = "/opt/orchestrator-venv"
VENV_PYTHON = f"{VENV}/bin/python"
WHEELS_DIR = "wheels"  # in the build context

# Labels on a project image (and the build stage that installs the wheels).
LABEL_PROJECT_IMAGE = "orchestrator.project-image"  # "1": how doctor finds project images
LABEL_PROJECT = "orchestrator.project"
LABEL_VENV = "orchestrator.venv"
LABEL_PACKAGES = "orchestrator.packages"  # "name==version ..." sorted
LABEL_EXCLUDED = "orchestrator.excluded"  # wheels of the project itself, left out
LABEL_APT = "orchestrator.apt"
LABEL_BASE = "orchestrator.base-image"
LABEL_INPUTS = "orchestrator.inputs"  # the inputs digest the tag abbreviates
LABEL_STAGE = "orchestrator.project-stage"  # the install stage, pruned after the build

# images/base/build's packages; --apt adds to them.
BASE_INCLUDES = (
    "python3",
    "python3-pytest",
    "python3-venv",
    "passwd",
    "tzdata",
    "ca-certificates",
)
DEFAULT_SUITE = "bookworm"

_COMMENT = re.compile(r"(^|\s+)#.*$")
_HASH_OPTION = re.compile(r"\s--hash[=\s]\S+")
_APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_EXTRAS_SUFFIX = re.compile(r"^(?P<path>.*?)(?:\[(?P<extras>[^\]]*)\])?$")
# pip options a requirements file may carry that we pass on to pip unchanged.
_PASSED_OPTIONS = (
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--no-index",
    "--pre",
    "--prefer-binary",
    "--only-binary",
    "--no-binary",
    "--trusted-host",
)


# ---------------------------------------------------------------- the project's metadata


@dataclass(frozen=True, kw_only=True)
class GroupInclude:
    """``{include-group = "name"}`` in a dependency group (PEP 735)."""

    group: str


@dataclass(frozen=True, kw_only=True)
class ProjectMetadata:
    """What the project's own files say about its name and dependencies."""

    name: str | None
    dependencies: tuple[str, ...] = ()
    optional: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # normalized extra
    groups: Mapping[str, tuple[str | GroupInclude, ...]] = field(default_factory=dict)
    dependency_files: tuple[str, ...] = ()  # setuptools' dynamic dependencies = {file = ...}
    source: str = "none"  # where name and dependencies were read
    notes: tuple[str, ...] = ()

    @property
    def canonical_name(self) -> str | None:
        return canonicalize_name(self.name) if self.name else None


def _toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{where}: not valid TOML ({error})") from None


def _string_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{where}: expected a list of strings")
    return tuple(value)


def _groups(value: Any, where: str) -> dict[str, tuple[str | GroupInclude, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table of lists")
    groups: dict[str, tuple[str | GroupInclude, ...]] = {}
    for name, items in value.items():
        if not isinstance(items, list):
            raise InputError(f"{where}.{name}: expected a list")
        entries: list[str | GroupInclude] = []
        for item in items:
            if isinstance(item, str):
                entries.append(item)
            elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
                entries.append(GroupInclude(group=item["include-group"]))
            else:
                raise InputError(
                    f"{where}.{name}: {item!r} is neither a requirement nor an include-group"
                )
        groups[canonicalize_name(str(name))] = tuple(entries)
    return groups


def _setup_cfg_lines(value: str) -> tuple[str, ...]:
    lines = []
    for raw in value.splitlines():
        line = _COMMENT.sub("", raw).strip()
        if line:
            lines.append(line)
    return tuple(lines)


def read_metadata(
    *, pyproject: str | None, setup_cfg: str | None, setup_py: str | None
) -> ProjectMetadata:
    """The project's name, runtime dependencies, extras and dependency groups.

    ``pyproject.toml``'s ``[project]`` table first; ``setup.cfg``'s ``[metadata]`` and
    ``[options]`` for what it lacks; ``setup.py`` only for a literal ``name=`` (its
    ``install_requires`` would need running it: list them with ``--requirements``).
    """
    notes: list[str] = []
    name: str | None = None
    dependencies: tuple[str, ...] = ()
    optional: dict[str, tuple[str, ...]] = {}
    groups: dict[str, tuple[str | GroupInclude, ...]] = {}
    dependency_files: tuple[str, ...] = ()
    source = "none"
    dynamic: tuple[str, ...] = ()
    if pyproject is not None:
        doc = _toml(pyproject, "pyproject.toml")
        project = doc.get("project")
        groups = _groups(doc.get("dependency-groups"), "pyproject.toml [dependency-groups]")
        if isinstance(project, dict):
            source = "pyproject.toml"
            raw_name = project.get("name")
            name = raw_name if isinstance(raw_name, str) and raw_name.strip() else None
            dependencies = _string_list(
                project.get("dependencies"), "pyproject.toml [project].dependencies"
            )
            extras = project.get("optional-dependencies") or {}
            if not isinstance(extras, dict):
                raise InputError("pyproject.toml [project.optional-dependencies]: expected a table")
            for extra, items in extras.items():
                optional[canonicalize_name(str(extra))] = _string_list(
                    items, f"pyproject.toml [project.optional-dependencies].{extra}"
                )
            dynamic = _string_list(project.get("dynamic"), "pyproject.toml [project].dynamic")
            if "dependencies" in dynamic:
                setuptools_dynamic = (
                    doc.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("dependencies")
                )
                if isinstance(setuptools_dynamic, dict):
                    dependency_files = _string_list(
                        setuptools_dynamic.get("file"),
                        "pyproject.toml [tool.setuptools.dynamic].dependencies.file",
                    )
    if setup_cfg is not None and (name is None or "dependencies" in dynamic or source == "none"):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(setup_cfg)
        except configparser.Error as error:
            raise InputError(f"setup.cfg: cannot be read ({error.message})") from None
        if name is None and parser.has_option("metadata", "name"):
            name = parser.get("metadata", "name").strip() or None
        if parser.has_option("options", "install_requires") and not dependencies:
            dependencies = _setup_cfg_lines(parser.get("options", "install_requires"))
            source = "setup.cfg" if source == "none" else f"{source} + setup.cfg"
        if parser.has_section("options.extras_require") and not optional:
            for extra, value in parser.items("options.extras_require"):
                optional[canonicalize_name(extra)] = _setup_cfg_lines(value)
        if source == "none" and name is not None:
            source = "setup.cfg"
    if name is None and setup_py is not None:
        match = re.search(r"""\bname\s*=\s*["']([A-Za-z0-9][A-Za-z0-9._-]*)["']""", setup_py)
        if match:
            name = match.group(1)
            source = "setup.py" if source == "none" else source
        if "install_requires" in setup_py and not dependencies:
            notes.append(
                "setup.py's install_requires are not read (that would mean running it): "
                "list them with --requirements or --pip"
            )
    return ProjectMetadata(
        name=name,
        dependencies=dependencies,
        optional=optional,
        groups=groups,
        dependency_files=dependency_files,
        source=source,
        notes=tuple(notes),
    )


# ---------------------------------------------------------------- requirements


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
        line = " ".join(_COMMENT.sub("", pending + raw).split())
        pending = ""
        if line:
            yield start, line
    if pending.strip():
        line = " ".join(_COMMENT.sub("", pending).split())
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
    def __init__(self, metadata: ProjectMetadata, read: Callable[[str], str | None]) -> None:
        self.metadata = metadata
        self.project = metadata.canonical_name
        self.read = read
        self.lines: list[str] = []
        self.constraints: list[str] = []
        self.options: list[str] = []
        self.notes: list[str] = list(metadata.notes)
        self.expanded_extras: set[str] = set()
        self.expanding_groups: list[str] = []
        self.files_seen: list[str] = []

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

    def file(self, path: str, where: str, *, constraints: bool = False) -> None:
        path = posixpath.normpath(path)
        if path in self.files_seen:
            return  # included twice (or a cycle): once is enough
        self.files_seen.append(path)
        text = self.read(path)
        if text is None:
            raise InputError(f"{where}: no such file {path}")
        folder = posixpath.dirname(path)
        for number, line in _logical_lines(text):
            self.file_line(line, folder, f"{path}:{number}", constraints=constraints)

    def file_line(self, line: str, folder: str, where: str, *, constraints: bool) -> None:
        included = _option_value(line, "-r", "--requirement")
        if included is not None:
            self.file(posixpath.join(folder, included), where, constraints=constraints)
            return
        constraint_file = _option_value(line, "-c", "--constraint")
        if constraint_file is not None:
            self.file(posixpath.join(folder, constraint_file), where, constraints=True)
            return
        editable = _option_value(line, "-e", "--editable")
        if editable is not None:
            self.local(editable, where, editable=True, shown=line)
            return
        if line.startswith("-"):
            option = line.split("=", 1)[0].split(maxsplit=1)[0]
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


def _looks_local(spec: str) -> bool:
    head = spec.split(";", 1)[0].strip()
    if head.startswith(("file:", ".", "/")):
        return True
    return "/" in head and "://" not in head and "@" not in head


def collect_requirements(
    *,
    metadata: ProjectMetadata,
    requirement_files: Sequence[str] = (),
    extras: Sequence[str] = (),
    groups: Sequence[str] = (),
    pip_specs: Sequence[str] = (),
    read: Callable[[str], str | None],
) -> Requirements:
    """Everything pip should resolve for the image, in order: the project's runtime
    dependencies, ``--extra``, ``--group``, ``--requirements`` files, ``--pip`` specs,
    and pytest when nothing names it.

    ``read(path)`` returns the text of a file of the project (a repository-relative
    path, ``None`` when absent); requirement files include others relative to
    themselves, as pip does.
    """
    collector = _Collector(metadata, read)
    for spec in metadata.dependencies:
        collector.add(spec, f"{metadata.source} dependencies")
    for path in metadata.dependency_files:
        collector.file(path, "[tool.setuptools.dynamic].dependencies")
    for extra in extras:
        collector.extra(extra, "--extra")
    for group in groups:
        collector.group(group, "--group")
    for path in requirement_files:
        collector.file(path, "--requirements")
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


# ---------------------------------------------------------------- the wheelhouse


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """One file of the wheelhouse."""

    filename: str
    name: str  # canonical
    version: str
    sha256: str

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "file": self.filename,
            "sha256": self.sha256,
        }


def wheel(filename: str, sha256: str) -> Wheel:
    """A wheel named as PEP 427 says; anything else is refused."""
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as error:
        raise InputError(f"{filename}: not a wheel file name ({error})") from None
    return Wheel(filename=filename, name=str(name), version=str(version), sha256=sha256)


def is_sdist(filename: str) -> bool:
    try:
        parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return False
    return True


def sdist_name(filename: str) -> str:
    name, _version = parse_sdist_filename(filename)
    return str(name)


def split_project(
    wheels: Sequence[Wheel], project: str | None
) -> tuple[tuple[Wheel, ...], tuple[Wheel, ...]]:
    """(kept, excluded): the project's own wheels are excluded, whoever pulled them in."""
    if project is None:
        return tuple(sorted(wheels, key=_wheel_order)), ()
    own = canonicalize_name(project)
    kept = tuple(sorted((w for w in wheels if w.name != own), key=_wheel_order))
    excluded = tuple(sorted((w for w in wheels if w.name == own), key=_wheel_order))
    return kept, excluded


def _wheel_order(item: Wheel) -> tuple[str, str]:
    return (item.name, item.filename)


def excluded_notes(excluded: Sequence[Wheel]) -> tuple[str, ...]:
    return tuple(
        f"left out {item.filename}: it is the project under test (another requirement "
        "depends on it); each side's own tree is what is tested"
        for item in excluded
    )


def pip_target_args(image_python: str, host_python: str) -> tuple[str, ...]:
    """Extra ``pip download`` arguments when the image's Python differs from the host's.

    The same ``major.minor``: none (markers are evaluated by the host's pip). Otherwise
    wheels for the image's version only: pip cannot build sdists for another interpreter.
    """
    if _minor(image_python) == _minor(host_python):
        return ()
    return ("--python-version", _minor(image_python), "--only-binary=:all:")


def _minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


# ---------------------------------------------------------------- apt


def check_apt(packages: Sequence[str]) -> tuple[str, ...]:
    """Debian package names, sorted and unique; anything else is refused."""
    for package in packages:
        if not _APT_NAME.match(package):
            raise InputError(f"--apt {package!r}: not a Debian package name")
    return tuple(sorted(set(packages)))


def apt_includes(apt: Sequence[str]) -> tuple[str, ...]:
    """The base image's packages plus ``apt``, in a stable order."""
    extra = [package for package in check_apt(apt) if package not in BASE_INCLUDES]
    return (*BASE_INCLUDES, *extra)


def apt_base_tag(*, suite: str, includes: Sequence[str], sources: Sequence[str]) -> str:
    """The tag of a Debian base with ``includes``, built from these apt sources."""
    hexdigest = digest({"suite": suite, "includes": list(includes), "sources": list(sources)})
    return f"{APT_BASE_REPOSITORY}:{hexdigest.removeprefix('sha256:')[:16]}"


def apt_sources(files: Sequence[tuple[str, str]], suite: str) -> tuple[str, ...]:
    """One-line ``deb`` sources for ``suite`` (and ``suite-*``) from the host's apt source
    files, one-line (``*.list``) and deb822 (``*.sources``) alike, as images/base/build
    reads them: other suites (third-party repositories) are left out."""

    def ours(name: str) -> bool:
        return name == suite or name.startswith(suite + "-")

    out: list[str] = []
    for path, text in files:
        if path.endswith(".sources"):
            out.extend(_deb822_sources(text, ours))
            continue
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if words[:1] != ["deb"]:
                continue
            rest = words[1:]
            if rest and rest[0].startswith("["):
                while rest and not rest[0].endswith("]"):
                    rest = rest[1:]
                rest = rest[1:]
            if len(rest) >= 2 and ours(rest[1]):
                out.append(" ".join(words))
    return tuple(out)


def _deb822_sources(text: str, ours: Callable[[str], bool]) -> list[str]:
    out: list[str] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        suites = [name for name in fields.get("suites", "").split() if ours(name)]
        signed = fields.get("signed-by", "")
        options = f" [signed-by={signed}]" if signed.startswith("/") else ""
        for uri in fields.get("uris", "").split():
            for name in suites:
                out.append(f"deb{options} {uri} {name} {fields.get('components', 'main')}")
    return out


# ---------------------------------------------------------------- the image


def dockerfile(*, base_image_id: str, add_user: bool) -> str:
    """Two stages: the first installs the wheelhouse into a venv with no index (the build
    has no network), the second copies only the venv, so no wheel stays in a layer.

    ``add_user``: a Debian base made for ``--apt`` gets the runner user (uid 1000) that
    images/runner/Dockerfile adds to the shared base.
    """
    user = (
        "RUN useradd --create-home --uid 1000 --user-group --shell /bin/sh runner\n"
        if add_user
        else ""
    )
    return (
        "# A project's runner image: its test dependencies in a virtual environment.\n"
        f"FROM {base_image_id} AS install\n"
        "USER root\n"
        "ARG STAGE\n"
        f"LABEL {LABEL_STAGE}=$STAGE\n"
        f"COPY {WHEELS_DIR}/ /tmp/wheels/\n"
        f"RUN python3 -m venv {VENV} \\\n"
        f" && {VENV_PYTHON} -m pip install --no-index --no-deps --no-cache-dir \\\n"
        "      --disable-pip-version-check --find-links /tmp/wheels /tmp/wheels/*.whl\n"
        f"FROM {base_image_id}\n"
        "USER root\n"
        f"{user}"
        f"COPY --from=install {VENV} {VENV}\n"
        f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH\n"
        "USER 1000\n"
    )


def image_labels(
    *,
    project: str | None,
    wheels: Sequence[Wheel],
    excluded: Sequence[Wheel],
    apt: Sequence[str],
    base_image_id: str,
) -> dict[str, str]:
    """The labels of a project image (the inputs digest is added once it is known)."""
    return {
        LABEL_PROJECT_IMAGE: "1",
        LABEL_PROJECT: project or "",
        LABEL_PYTHON: VENV_PYTHON,
        LABEL_VENV: VENV,
        LABEL_PACKAGES: " ".join(sorted(item.pin for item in wheels)),
        LABEL_EXCLUDED: " ".join(sorted(item.pin for item in excluded)),
        LABEL_APT: " ".join(apt),
        LABEL_BASE: base_image_id,
    }


def inputs_digest(
    *,
    base_image_id: str,
    wheels: Sequence[Wheel],
    apt: Sequence[str],
    dockerfile_text: str,
    labels: Mapping[str, str],
) -> str:
    """``sha256:…`` of everything the image is made of."""
    return digest(
        {
            "schema": INPUTS_SCHEMA,
            "base_image": base_image_id,
            "wheels": sorted([item.filename, item.sha256] for item in wheels),
            "apt": sorted(apt),
            "dockerfile": dockerfile_text,
            "labels": dict(labels),
        }
    )


def image_tag(project: str | None, inputs: str) -> str:
    """``orchestrator-project/<name>:<16 hex of the inputs digest>``."""
    name = canonicalize_name(project) if project else "unnamed"
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unnamed"
    return f"{IMAGE_REPOSITORY}/{slug}:{inputs.removeprefix('sha256:')[:16]}"


def packages_from_label(value: str | None) -> tuple[str, ...]:
    return tuple((value or "").split())


def report_document(
    *,
    image_id: str,
    tag: str,
    reused: bool,
    project: str | None,
    rev: str,
    base_ref: str,
    base_image_id: str,
    python: str,
    wheels: Sequence[Wheel],
    excluded: Sequence[Wheel],
    apt: Sequence[str],
    requirements: Requirements,
    inputs: str,
    notes: Sequence[str],
) -> dict[str, Any]:
    """The ``project-image/1`` document ``image build --json`` prints."""
    return {
        "schema": REPORT_SCHEMA,
        "image_id": image_id,
        "tag": tag,
        "reused": reused,
        "project": project,
        "rev": rev,
        "base_image": {"ref": base_ref, "id": base_image_id},
        "python": python,
        "interpreter": VENV_PYTHON,
        "venv": VENV,
        "packages": [item.to_json() for item in wheels],
        "excluded": [item.to_json() for item in excluded],
        "apt": list(apt),
        "requirements": list(requirements.lines),
        "constraints": list(requirements.constraints),
        "inputs_digest": inputs,
        "notes": list(notes),
    }
