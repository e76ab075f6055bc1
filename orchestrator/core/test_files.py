"""Which files are test files, and the overlay of one revision's test files (``--tests-from``).

Pure. ``replay --tests-from base|patch|REV`` (and ``accept --tests-from REV``) judge both
sides by one oracle: the test files of the chosen revision are laid over every exported
tree before anything runs. Added, modified and deleted test files all follow that revision.

The test files are (:class:`TestFileRule`):

- every file under the *test folder* of each selected property: the outermost folder on
  the module's path named like a test folder (``test``, ``tests``, ``testing``,
  ``testsuite``, ``test_*``, ``*_test``, ``*_tests``), e.g. ``tests/`` for
  ``tests/unit/test_x.py`` and ``src/pkg/tests/`` for ``src/pkg/tests/test_x.py``; a
  module in no such folder contributes itself only. Without ``--property``, the paths the
  command names play the properties' part (``pytest tests/`` -> ``tests/``), and a
  command that names no path (``pytest -q``) runs every test module of the tree: their
  folders are taken the same way, found in the trees (as SWE-bench applies a test patch:
  the test package whole, its ``__init__.py``, helper modules and data included), and so
  is every folder at the root so named (``test``, ``tests``, ``testing``, ``testsuite``),
  test modules in it or not (its data and support files: ``testing/data/E50.py`` read by
  ``tests/test_data.py``);
- every ``conftest.py`` and every ``test_*.py`` / ``*_test.py``, anywhere;
- every ``--test-path PATH``: a file, or a folder and everything under it.

:func:`plan_overlay` turns the rule and the three trees (``path -> blob SHA``) into a
:class:`TestOverlay`: the files written on every side and, per side, the test files it
has that the chosen revision does not (removed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from orchestrator.core.pytest_command import split_node_id

# testsuite: pycodestyle's and others' older layout (test modules beside their data files).
TEST_FOLDER_NAMES = frozenset({"test", "tests", "testing", "testsuite"})


def is_test_folder_name(name: str) -> bool:
    """``tests``, ``test``, ``testing``, ``testsuite``, ``test_api``, ``api_test``,
    ``api_tests``."""
    return (
        name in TEST_FOLDER_NAMES or name.startswith("test_") or name.endswith(("_test", "_tests"))
    )


def is_test_module_name(name: str) -> bool:
    """pytest's default ``python_files``: ``test_*.py`` and ``*_test.py``."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def is_test_file_name(name: str) -> bool:
    """A file that is a test file wherever it lives: a test module or a ``conftest.py``."""
    return name == "conftest.py" or is_test_module_name(name)


def outer_test_folder(path: str, *, is_folder: bool = False) -> str | None:
    """The outermost test folder on ``path`` (the path itself counts when it is a folder);
    None when no folder on it is named like one."""
    parts = PurePosixPath(path).parts
    folders = parts if is_folder else parts[:-1]
    for depth, name in enumerate(folders, start=1):
        if is_test_folder_name(name):
            return "/".join(parts[:depth])
    return None


def normal_path(text: str) -> str | None:
    """A repository-relative POSIX path without ``./`` or a trailing ``/``; None when it
    is empty, absolute or climbs out with ``..``."""
    stripped = text.strip()
    if not stripped or stripped.startswith("/"):
        return None
    path = PurePosixPath(stripped)
    if ".." in path.parts or path.is_absolute():
        return None
    normal = str(path)
    return None if normal == "." else normal


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


@dataclass(frozen=True, kw_only=True)
class TestFileRule:
    """Which paths are test files (the module docstring says why)."""

    __test__ = False  # not a pytest test class, whatever its name

    folders: tuple[str, ...] = ()  # every file under these
    files: tuple[str, ...] = ()  # these files (the properties' own modules)
    extra: tuple[str, ...] = ()  # --test-path: a file, or a folder and what is under it

    def matches(self, path: str) -> bool:
        name = PurePosixPath(path).name
        return (
            is_test_file_name(name)
            or path in self.files
            or any(_under(path, folder) for folder in (*self.folders, *self.extra))
        )

    def to_json(self) -> dict[str, Any]:
        return {"folders": list(self.folders), "files": list(self.files), "extra": list(self.extra)}


def rule_for_tests(
    property_ids: Sequence[str],
    command_paths: Sequence[str],
    test_paths: Sequence[str],
    trees: Iterable[Iterable[str]] = (),
) -> TestFileRule:
    """The rule for a run: the properties' test folders and modules (or, without
    properties, the command's paths'; when it names none, the folders of every test module
    of ``trees``, the paths of each tree involved), plus ``--test-path`` (already
    normalised)."""
    folders: dict[str, None] = {}
    files: dict[str, None] = {}

    def take(path: str, *, is_folder: bool = False, own: bool = True) -> None:
        folder = outer_test_folder(path, is_folder=is_folder)
        if folder is not None:
            folders.setdefault(folder, None)
        if own:
            files.setdefault(path, None)

    for property_id in property_ids:
        module = normal_path(split_node_id(property_id).path)
        if module is not None:
            take(module)
    if property_ids:
        return TestFileRule(folders=tuple(folders), files=tuple(files), extra=tuple(test_paths))
    named = False
    for argument in command_paths:
        path_text, sep, _ = argument.partition("::")
        path = normal_path(path_text)
        if path is None:
            continue
        named = True
        named_file = bool(sep) or path.endswith(".py")
        folder = outer_test_folder(path, is_folder=not named_file)
        if folder is not None:
            folders.setdefault(folder, None)
        elif named_file:
            files.setdefault(path, None)
    if not named:
        # The command runs the whole tree: every test module's folder, as pytest finds them
        # (a module outside any test folder is a test file by its name already).
        found = {path for tree in trees for path in tree}
        for module in sorted(
            path for path in found if is_test_module_name(PurePosixPath(path).name)
        ):
            take(module, own=False)
        # A folder at the root so named (TEST_FOLDER_NAMES) holds the suite's support and
        # data even when no test module lives in it (testing/data/*.py, which a test module
        # in tests/ reads): SWE-bench's test patch takes it too. Deeper folders so named
        # may be the library's own code (django/test/), so only the root's.
        for root_folder in sorted({path.split("/", 1)[0] for path in found if "/" in path}):
            if root_folder in TEST_FOLDER_NAMES:
                folders.setdefault(root_folder, None)
    return TestFileRule(folders=tuple(folders), files=tuple(files), extra=tuple(test_paths))


def missing_test_paths(
    test_paths: Iterable[str], trees: Iterable[Mapping[str, str]]
) -> tuple[str, ...]:
    """The ``--test-path`` entries that name neither a file nor a folder on any tree."""
    listed = list(trees)
    return tuple(
        path
        for path in test_paths
        if not any(any(_under(name, path) for name in tree) for tree in listed)
    )


@dataclass(frozen=True, kw_only=True)
class SideOverlay:
    """What the overlay does to one side's exported tree: remove ``remove``, then write
    ``write`` as they are at ``rev``."""

    rev: str
    write: tuple[str, ...]
    remove: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TestOverlay:
    """The test files of one revision laid over every side (``--tests-from``).

    ``ref`` is what the user named (``base``, ``patch`` or a revision), ``rev`` its SHA;
    ``files`` are the test files of ``rev`` (path -> blob SHA), written on every side;
    ``removed`` are, per side, the test files that side has and ``rev`` has not.
    """

    __test__ = False

    ref: str
    rev: str
    rule: TestFileRule
    files: Mapping[str, str]
    removed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def side(self, name: str) -> SideOverlay:
        return SideOverlay(
            rev=self.rev,
            write=tuple(self.files),
            remove=tuple(self.removed.get(name, {})),
        )

    def takes(self, path: str) -> bool:
        """Does ``path`` on an overlaid tree come from ``rev`` (or is it gone)?"""
        return self.rule.matches(path)

    def summary(self) -> str:
        """What was laid over, for the screen: ``12 files from tests/ and 1 test file
        elsewhere laid over each tree, 1 removed``."""
        folders = (*self.rule.folders, *self.rule.extra)
        under = [p for p in self.files if any(_under(p, folder) for folder in folders)]
        elsewhere = len(self.files) - len(under)
        parts = []
        if folders:
            named = ", ".join(f"{folder}/" for folder in folders)
            parts.append(f"{_count(len(under), 'file')} from {named}")
        if elsewhere or not folders:
            parts.append(f"{_count(elsewhere, 'test file')}{' elsewhere' if folders else ''}")
        removed = {path for paths in self.removed.values() for path in paths}
        gone = f", {len(removed)} removed" if removed else ""
        return f"{' and '.join(parts)} laid over each tree{gone}"

    def to_json(self) -> dict[str, Any]:
        """What the run log records: the pinned SHA, the rule, every file with its blob."""
        return {
            "tests_from": self.rev,
            "tests_from_ref": self.ref,
            "rule_for_tests": self.rule.to_json(),
            "overlay_summary": self.summary(),
            "overlaid_files": [{"path": path, "blob": blob} for path, blob in self.files.items()],
            "overlay_removed": {
                side: [{"path": path, "blob": blob} for path, blob in removed.items()]
                for side, removed in self.removed.items()
            },
        }


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def plan_overlay(
    *,
    ref: str,
    rev: str,
    rule: TestFileRule,
    tests_tree: Mapping[str, str],
    side_trees: Mapping[str, Mapping[str, str]],
) -> TestOverlay:
    """The overlay of ``rev``'s test files (``tests_tree``: its path -> blob) on each side
    (``side_trees``: side name -> that side's path -> blob). Paths come out sorted."""
    files = {path: tests_tree[path] for path in sorted(tests_tree) if rule.matches(path)}
    removed = {
        side: {
            path: tree[path] for path in sorted(tree) if rule.matches(path) and path not in files
        }
        for side, tree in side_trees.items()
    }
    return TestOverlay(ref=ref, rev=rev, rule=rule, files=files, removed=removed)


def overlaid_tree(tree: Mapping[str, str], overlay: TestOverlay) -> dict[str, str]:
    """A side's tree (path -> blob) as it is after the overlay."""
    kept = {path: blob for path, blob in tree.items() if not overlay.takes(path)}
    return {**kept, **overlay.files}
