"""A project's metadata: its name, dependencies, extras and dependency groups, from
``pyproject.toml`` or ``setup.cfg``. Pure."""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from orchestrator.errors import InputError

# A comment to the end of the line, in requirement files and setup.cfg lists.
COMMENT = re.compile(r"(^|\s+)#.*$")


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
        line = COMMENT.sub("", raw).strip()
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
