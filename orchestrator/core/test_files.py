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
- without properties, what pytest's configuration makes a test file
  (:mod:`.pytest_collection`, read at the base and at the chosen revision) in the paths
  it searches (the command's, else ``testpaths``, else the whole tree): modules matching
  ``python_files`` (``check_*.py``), and text files run as doctests (``--doctest-glob``,
  default ``test*.txt``; a ``.txt``/``.rst`` named in ``testpaths``), unless they lie in
  the library's code (a Python package, ``src/``). Never a module for ``--doctest-modules``:
  its docstrings are tests, but the module is the code under test, and laying the chosen
  revision's code over both sides would leave nothing to judge;
- every ``--test-path PATH``: a file, or a folder and everything under it.

:func:`plan_overlay` turns the rule and the three trees (``path -> blob SHA``) into a
:class:`TestOverlay`: the files written on every side and, per side, the test files it
has that the chosen revision does not (removed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any

from orchestrator.core.oracle.model import ChangeReason, OracleChange, ReasonKind
from orchestrator.core.pytest_collection import (
    DOCTEST_SUFFIXES,
    CollectionConfig,
    doctest_glob_of,
    is_test_module,
    search_roots,
)
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


def _within(path: str, root: str) -> bool:
    return root == "." or _under(path, root)


def code_folders(paths: Iterable[str]) -> frozenset[str]:
    """The folders of the library's code among ``paths``: every folder holding an
    ``__init__.py`` (a package), and ``src``; a test folder and what is under it are the
    tests' own."""
    folders = {str(PurePosixPath(path).parent) for path in paths if path.endswith("/__init__.py")}
    folders.add("src")
    return frozenset(
        folder for folder in folders if outer_test_folder(folder, is_folder=True) is None
    )


def in_code(path: str, code: frozenset[str]) -> bool:
    """Does ``path`` lie in the library's code (:func:`code_folders`), outside any test
    folder?"""
    if outer_test_folder(path) is not None:
        return False
    parents = PurePosixPath(path).parents
    return any(str(parent) in code for parent in parents if str(parent) != ".")


@dataclass(frozen=True, kw_only=True)
class TestFileRule:
    """Which paths are test files (the module docstring says why)."""

    __test__ = False  # not a pytest test class, whatever its name

    folders: tuple[str, ...] = ()  # every file under these
    files: tuple[str, ...] = ()  # these files (the properties' own modules)
    extra: tuple[str, ...] = ()  # --test-path: a file, or a folder and what is under it
    # Files pytest's configuration makes tests (path, why): ``python_files check_*.py``,
    # ``--doctest-glob *.rst``, ``testpaths``.
    collected: tuple[tuple[str, str], ...] = ()
    config: CollectionConfig | None = None  # what that configuration said

    @cached_property
    def _named(self) -> frozenset[str]:
        return frozenset((*self.files, *(path for path, _ in self.collected)))

    def matches(self, path: str) -> bool:
        name = PurePosixPath(path).name
        return (
            is_test_file_name(name)
            or path in self._named
            or any(_under(path, folder) for folder in (*self.folders, *self.extra))
        )

    def collected_by(self) -> dict[str, list[str]]:
        """Why -> the files pytest's configuration made tests, in order."""
        grouped: dict[str, list[str]] = {}
        for path, why in self.collected:
            grouped.setdefault(why, []).append(path)
        return grouped

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "folders": list(self.folders),
            "files": list(self.files),
            "extra": list(self.extra),
        }
        if self.config is not None:
            doc["collected"] = self.collected_by()
            doc["pytest_config"] = self.config.to_json()
        return doc


def rule_for_tests(
    property_ids: Sequence[str],
    command_paths: Sequence[str],
    test_paths: Sequence[str],
    trees: Iterable[Iterable[str]] = (),
    config: CollectionConfig | None = None,
) -> TestFileRule:
    """The rule for a run: the properties' test folders and modules (or, without
    properties, the command's paths'; when it names none, the folders of every test module
    of ``trees``, the paths of each tree involved), plus ``--test-path`` (already
    normalised). Without properties, ``config`` (pytest's configuration) adds the files
    it makes tests in the paths pytest searches."""
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
    found = {path for tree in trees for path in tree}
    if not named:
        # The command runs the whole tree: every test module's folder, as pytest finds them
        # (a module outside any test folder is a test file by its name already).
        for module in sorted(
            path
            for path in found
            if is_test_module_name(PurePosixPath(path).name)
            or (config is not None and is_test_module(path, config))
        ):
            take(module, own=False)
        # A folder at the root so named (TEST_FOLDER_NAMES) holds the suite's support and
        # data even when no test module lives in it (testing/data/*.py, which a test module
        # in tests/ reads): SWE-bench's test patch takes it too. Deeper folders so named
        # may be the library's own code (django/test/), so only the root's.
        for root_folder in sorted({path.split("/", 1)[0] for path in found if "/" in path}):
            if root_folder in TEST_FOLDER_NAMES:
                folders.setdefault(root_folder, None)
    collected = () if config is None else collected_tests(command_paths, config, found)
    return TestFileRule(
        folders=tuple(folders),
        files=tuple(files),
        extra=tuple(test_paths),
        collected=collected,
        config=config,
    )


def collected_tests(
    command_paths: Sequence[str], config: CollectionConfig, found: Iterable[str]
) -> tuple[tuple[str, str], ...]:
    """(path, why) for each file of ``found`` that ``config`` makes a test file in the
    paths pytest searches, beyond the default names: a module by ``python_files``, a text
    file by ``--doctest-glob`` (or named as a ``.txt``/``.rst`` path to collect) outside
    the library's code. Sorted by path."""
    paths = sorted(set(found))
    parents = {str(parent) for path in paths for parent in PurePosixPath(path).parents}
    named = [path.partition("::")[0] for path in command_paths]
    roots = [
        root
        for root in (
            "." if entry.strip() in (".", "./") else normal_path(entry)
            for entry in search_roots(named, config, sorted(parents | set(paths)))
        )
        if root is not None
    ]
    from_testpaths = not command_paths and bool(config.testpaths)
    code = code_folders(paths)
    collected: list[tuple[str, str]] = []
    for path in paths:
        if not any(_within(path, root) for root in roots):
            continue
        name = PurePosixPath(path).name
        if is_test_module(path, config):
            if not (is_test_module_name(name) or name == "conftest.py"):
                pattern = next(p for p in config.python_files if _module_pattern(path, p))
                collected.append((path, f"python_files {pattern}"))
            continue
        if in_code(path, code):
            continue
        glob = doctest_glob_of(path, config)
        if glob is not None:
            collected.append((path, f"--doctest-glob {glob}"))
        elif path in roots and path.endswith(DOCTEST_SUFFIXES) and config.doctest_text:
            collected.append((path, "testpaths" if from_testpaths else "the command's path"))
    return tuple(collected)


def _module_pattern(path: str, pattern: str) -> bool:
    return is_test_module(path, CollectionConfig(python_files=(pattern,)))


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
    # Tests the base has that the overlaid trees lack (a test function or a whole test
    # file ``rev`` removed, as the sources show them): no side runs them.
    removed_tests: tuple[str, ...] = ()

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
        """What was laid over, for the screen: ``12 files from tests/, 2 files by
        --doctest-glob *.rst and 1 test file elsewhere laid over each tree, 1 removed``."""
        folders = (*self.rule.folders, *self.rule.extra)
        collected = dict(self.rule.collected)
        under = 0
        by_why: dict[str, int] = {}
        for path in self.files:
            if any(_under(path, folder) for folder in folders):
                under += 1
            elif path in collected:
                by_why[collected[path]] = by_why.get(collected[path], 0) + 1
        elsewhere = len(self.files) - under - sum(by_why.values())
        parts = []
        if folders:
            named = ", ".join(f"{folder}/" for folder in folders)
            parts.append(f"{_count(under, 'file')} from {named}")
        parts += [f"{_count(count, 'file')} by {why}" for why, count in by_why.items()]
        if elsewhere or not parts:
            parts.append(f"{_count(elsewhere, 'test file')}{' elsewhere' if parts else ''}")
        listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        removed = {path for paths in self.removed.values() for path in paths}
        gone = f", {len(removed)} removed" if removed else ""
        return f"{listed} laid over each tree{gone}"

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
            "removed_tests": list(self.removed_tests),
        }

    def removed_tests_line(self) -> str | None:
        """One line under the table when the chosen revision lacks tests the base has
        (None: it lacks none): ``the patch removes 2 tests the base has (a, b): they
        judge neither side``."""
        return removed_tests_line(self.ref, self.rev, self.removed_tests)


def removed_tests_line(ref: str, rev: str, removed: Sequence[str], *, shown: int = 3) -> str | None:
    """:meth:`TestOverlay.removed_tests_line` from its parts (a run folder's, too)."""
    if not removed:
        return None
    more = f" and {len(removed) - shown} more" if len(removed) > shown else ""
    named = ", ".join(removed[:shown]) + more
    tests = _count(len(removed), "test")
    who = "the patch removes" if ref == "patch" else f"--tests-from {ref} ({rev[:12]}) lacks"
    return f"{who} {tests} the base has ({named}): they judge neither side"


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


def lay_over_hint(path: str) -> str:
    """What to say of a property's file that the overlay left each side's own: the option
    that lays a text or data file over, or that a module is code under test."""
    if path.endswith(".py"):
        return f"{path} is code under test, which --tests-from never lays over"
    # The file itself: its folder may be the library's package, whose code must stay.
    return f"{path} is not laid over (--test-path {path} lays it over)"


def explain_not_laid_over(change: OracleChange, overlay: TestOverlay) -> OracleChange:
    """A changed oracle whose doctest or whole file the overlay left each side's own: its
    reason says which file, and how to lay it over (one line). Other changes as they are."""
    path = split_node_id(change.property_id).path
    if not change.changed or not path or overlay.takes(path):
        return change
    kinds = (ReasonKind.DOCTEST, ReasonKind.WHOLE_FILE)
    hint = lay_over_hint(path)
    reasons = tuple(
        ChangeReason(
            kind=reason.kind,
            subject=reason.subject,
            detail=f"{reason.detail}; {hint}" if reason.detail else hint,
        )
        if reason.kind in kinds and (reason.kind is ReasonKind.DOCTEST or reason.subject == path)
        else reason
        for reason in change.reasons
    )
    return OracleChange(
        property_id=change.property_id,
        base_digest=change.base_digest,
        patch_digest=change.patch_digest,
        reasons=reasons,
        whole_file=change.whole_file,
    )
