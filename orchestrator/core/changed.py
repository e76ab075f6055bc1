"""``replay --changed``: the tests a pull request touched, chosen without running anything.

Pure. Selected are

- the tests whose oracle slice differs between base and patch (:mod:`orchestrator.core.oracle`:
  a new test, a removed one, an edited body, helper, fixture or ``conftest.py``), and
- every test of a test module that imports a module the patch changed, directly or
  through other modules, or whose ``conftest.py`` files do (:mod:`orchestrator.core.imports`).

The tests are found statically (:func:`static_test_ids`), as pytest collects by default:
``test*`` functions at module level; ``test*`` methods of ``Test*`` classes without an
``__init__`` (nested ones too) and of ``unittest.TestCase`` subclasses, including the
methods they inherit from classes defined in the same module or, through its imports, in
another module of the project (a mixin in ``tests/__init__.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any

from orchestrator.core.imports import import_graph, importers_of, merge_graphs
from orchestrator.core.oracle import OracleChange, ProjectModules, imported_class
from orchestrator.core.pytest_command import conftest_paths
from orchestrator.core.test_files import is_test_module_name

UNITTEST_BASES = frozenset({"TestCase", "IsolatedAsyncioTestCase"})
MAX_MODULE_DEPTH = 8  # modules a chain of bases is followed through


def _is_unittest_base(base: ast.expr) -> bool:
    if isinstance(base, ast.Name):
        return base.id in UNITTEST_BASES
    return isinstance(base, ast.Attribute) and base.attr in UNITTEST_BASES


def _has_init(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "__init__"
        for stmt in cls.body
    )


def _not_a_test(body: Sequence[ast.stmt]) -> bool:
    """``__test__ = False`` in a class body."""
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__test__" for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and stmt.value.value is False
        ):
            return True
    return False


@lru_cache(maxsize=256)
def _parsed(source: str | bytes) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None


class _Classes:
    """The classes one scope defines (the last definition of a name wins); at a module's
    top level (``home``: its path and source), also those its imports bring from other
    modules of the project."""

    def __init__(
        self,
        body: Sequence[ast.stmt],
        *,
        home: tuple[str, str | bytes] | None = None,
        modules: ProjectModules | None = None,
        depth: int = 0,
    ) -> None:
        self.home, self.modules, self.depth = home, modules, depth
        self.by_name: dict[str, ast.ClassDef] = {}
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                self.by_name[stmt.name] = stmt
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign):
                for name in _bound(stmt):
                    self.by_name.pop(name, None)

    def imported(self, base: ast.expr) -> tuple[ast.ClassDef, _Classes] | None:
        """The class of another module ``base`` names, with that module's classes."""
        if self.home is None or self.modules is None or self.depth > MAX_MODULE_DEPTH:
            return None
        found = imported_class(base, self.home[0], self.home[1], self.modules)
        if found is None:
            return None
        path, name = found
        source = self.modules.sources.get(path)
        module = None if source is None else _parsed(source)
        if source is None or module is None:
            return None
        classes = _Classes(
            module.body, home=(path, source), modules=self.modules, depth=self.depth + 1
        )
        cls = classes.by_name.get(name)
        return None if cls is None else (cls, classes)

    def is_unittest(self, cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
        for base in cls.bases:
            if _is_unittest_base(base):
                return True
            if isinstance(base, ast.Name) and base.id in self.by_name:
                if base.id not in seen and self.is_unittest(
                    self.by_name[base.id], seen | {cls.name}
                ):
                    return True
                continue
            elsewhere = self.imported(base)
            if elsewhere is not None and elsewhere[1].is_unittest(elsewhere[0]):
                return True
        return False

    def methods(self, cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> list[str]:
        """``test*`` methods of ``cls``, then of its bases defined here (first one wins)."""
        names: dict[str, bool] = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                names[stmt.name] = stmt.name.startswith("test")
            else:
                for name in _bound(stmt):
                    names[name] = False  # an attribute shadows an inherited test
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.by_name:
                if base.id not in seen:
                    for name in self.methods(self.by_name[base.id], seen | {cls.name}):
                        names.setdefault(name, True)
                continue
            elsewhere = self.imported(base)
            if elsewhere is not None:
                for name in elsewhere[1].methods(elsewhere[0]):
                    names.setdefault(name, True)
        return [name for name, is_test in names.items() if is_test]


def _bound(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def static_test_ids(
    source: str | bytes, path: str, modules: ProjectModules | None = None
) -> tuple[str, ...]:
    """The node ids pytest would collect from ``source`` by default (without parameters),
    following test classes' bases into the project's other ``modules``; nothing for a
    module that does not parse."""
    module = _parsed(source)
    if module is None:
        return ()
    ids: dict[str, None] = {}
    functions: dict[str, bool] = {}
    for stmt in module.body:
        for name in _bound(stmt):
            functions[name] = isinstance(
                stmt, ast.FunctionDef | ast.AsyncFunctionDef
            ) and name.startswith("test")
        if isinstance(stmt, ast.ClassDef):
            functions.pop(stmt.name, None)
    classes = _Classes(module.body, home=(path, source), modules=modules)
    for stmt in module.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and functions.get(stmt.name):
            ids.setdefault(f"{path}::{stmt.name}", None)
        elif isinstance(stmt, ast.ClassDef) and classes.by_name.get(stmt.name) is stmt:
            for nodeid in _class_ids(classes, stmt, f"{path}::{stmt.name}"):
                ids.setdefault(nodeid, None)
    return tuple(ids)


def _class_ids(classes: _Classes, cls: ast.ClassDef, prefix: str) -> list[str]:
    if _not_a_test(cls.body):
        return []
    if classes.is_unittest(cls):
        return [f"{prefix}::{name}" for name in classes.methods(cls)]
    if not cls.name.startswith("Test") or _has_init(cls):
        return []
    found = [f"{prefix}::{name}" for name in classes.methods(cls)]
    inner = _Classes(cls.body)
    for stmt in cls.body:
        if (
            isinstance(stmt, ast.ClassDef)
            and inner.by_name.get(stmt.name) is stmt
            and stmt.name.startswith("Test")
            and not inner.is_unittest(stmt)
        ):
            found.extend(_class_ids(inner, stmt, f"{prefix}::{stmt.name}"))
    return found


def in_scope(path: str, command_paths: Sequence[str]) -> bool:
    """Is the test module ``path`` among what the command runs (all, without paths)?"""
    if not command_paths:
        return True
    for argument in command_paths:
        target = str(PurePosixPath(argument.partition("::")[0].strip() or "."))
        if target in (".", path) or path.startswith(target + "/"):
            return True
    return False


def candidate_modules(
    trees: Iterable[Mapping[str, str]], command_paths: Sequence[str]
) -> list[str]:
    """The test modules of both trees the command runs, sorted."""
    paths = {path for tree in trees for path in tree}
    return sorted(
        path
        for path in paths
        if is_test_module_name(PurePosixPath(path).name) and in_scope(path, command_paths)
    )


def changed_paths(base: Mapping[str, str], patch: Mapping[str, str]) -> tuple[str, ...]:
    """Paths added, removed or modified between two trees (path -> blob), sorted."""
    paths = set(base) | set(patch)
    return tuple(sorted(path for path in paths if base.get(path) != patch.get(path)))


def with_conftests(
    graph: Mapping[str, frozenset[str]], modules: Iterable[str], files: Iterable[str]
) -> dict[str, frozenset[str]]:
    """The graph with an edge from each test module to the ``conftest.py`` files above it:
    their fixtures run in its tests, so what they import counts as imported by it."""
    present = set(files)
    extended = dict(graph)
    for module in modules:
        above = {path for path in conftest_paths(module) if path in present and path != module}
        extended[module] = extended.get(module, frozenset()) | frozenset(above)
    return extended


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What ``--changed`` chose: ``selected`` out of ``candidates`` (node ids), and why."""

    candidates: tuple[str, ...]
    selected: tuple[str, ...]
    oracle_changed: tuple[str, ...]
    importing: tuple[str, ...]  # test modules that import a changed module
    changed_modules: tuple[str, ...]  # the .py files the patch changed
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # module -> its tests

    def summary(self) -> str:
        """``selected 3 of 120 tests found in 14 test modules (2 by their oracle, 1 by an
        import of a changed module)``: what was considered is every test the sources of the
        command's test modules show (a parametrized test counts once)."""
        by_oracle = len(set(self.selected) & set(self.oracle_changed))
        modules = len(self.modules)
        return (
            f"selected {len(self.selected)} of {len(self.candidates)} tests"
            f" found in {modules} test module{'' if modules == 1 else 's'}"
            f" ({by_oracle} by their oracle,"
            f" {len(self.selected) - by_oracle} by an import of a changed module)"
        )

    def targets(self, absent: Iterable[str]) -> tuple[str, ...]:
        """What pytest is handed on a side that lacks ``absent``: a module whose every test
        is selected goes whole (pytest matches hundreds of node ids slowly), the others
        test by test."""
        missing = set(absent)
        chosen = set(self.selected)
        targets: list[str] = []
        for module, ids in self.modules.items():
            present = [nodeid for nodeid in ids if nodeid in chosen and nodeid not in missing]
            if present and all(nodeid in chosen for nodeid in ids):
                targets.append(module)
            else:
                targets.extend(present)
        return tuple(targets)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": "changed",
            "candidates": len(self.candidates),
            "test_modules": len(self.modules),
            "selected": list(self.selected),
            "oracle_changed": list(self.oracle_changed),
            "importing_changed": list(self.importing),
            "changed_modules": list(self.changed_modules),
        }


def select_changed(
    *,
    tests: Mapping[str, Sequence[str]],
    oracle: Mapping[str, OracleChange],
    base_sources: Mapping[str, str | bytes],
    patch_sources: Mapping[str, str | bytes],
    changed: Sequence[str],
) -> Selection:
    """The selection: ``tests`` maps each test module to its static node ids (both sides),
    ``oracle`` each node id to its oracle change, ``*_sources`` every ``.py`` file of each
    tree to its text, ``changed`` the paths the patch changed."""
    files = set(base_sources) | set(patch_sources)
    graph = with_conftests(
        merge_graphs(import_graph(base_sources), import_graph(patch_sources)), tests, files
    )
    changed_modules = tuple(path for path in changed if path in files)
    importing = sorted(importers_of(graph, changed_modules) & set(tests))
    candidates = [nodeid for module in sorted(tests) for nodeid in tests[module]]
    by_oracle = [nodeid for nodeid in candidates if oracle[nodeid].changed]
    chosen_modules = set(importing)
    selected = [
        nodeid
        for module in sorted(tests)
        for nodeid in tests[module]
        if module in chosen_modules or oracle[nodeid].changed
    ]
    return Selection(
        candidates=tuple(candidates),
        selected=tuple(selected),
        oracle_changed=tuple(by_oracle),
        importing=tuple(importing),
        changed_modules=changed_modules,
        modules={module: tuple(tests[module]) for module in sorted(tests)},
    )
