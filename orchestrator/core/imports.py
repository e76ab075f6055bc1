"""A repository's import graph, read statically from its Python sources (``replay --changed``).

Pure. Every ``.py`` file is a node; an edge goes from a file to each project file one of
its import statements may load. Names resolve the way ``sys.path`` would find them:

- a file's package is the chain of folders above it that hold an ``__init__.py``; it may
  be imported by its name relative to the first folder above that chain (``src/pkg/a.py``
  is ``pkg.a``: a ``src/`` layout needs nothing special) and, to stay on the safe side,
  relative to every folder further up (``src.pkg.a``), so rootdir-relative imports in
  tests resolve too;
- ``from . import x`` and ``from ..y import z`` resolve against the importing file's
  package;
- importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, and
  ``from a import b`` may load the submodule ``a/b.py``;
- imports anywhere in a file count (inside functions, ``try`` blocks, ``if
  TYPE_CHECKING``), and so do ``importlib.import_module("x")`` and ``__import__("x")``
  with a literal name.

What it cannot see (docs/lanes.md lists it): names computed at run time, plugins loaded
by entry points or ``-p``, files that are not Python (data, C extensions, configuration)
and changes to ``sys.path`` at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import PurePosixPath

IMPORT_FUNCTIONS = frozenset({"import_module", "__import__"})


# ---------------------------------------------------------------- what an import binds


def bound_name(alias: ast.alias, *, from_import: bool) -> str:
    """The one name an imported alias binds in the importing scope: ``import a.b`` binds
    ``a``, ``import a.b as c`` binds ``c``, ``from a import b`` binds ``b``."""
    if alias.asname:
        return alias.asname
    return alias.name if from_import else alias.name.split(".")[0]


def binding(
    statement: ast.Import | ast.ImportFrom, alias: ast.alias
) -> ast.Import | ast.ImportFrom:
    """The import of ``alias`` reduced to what it binds, as a statement: ``import a.b``
    binds the top package ``a`` exactly as ``import a`` does, so both reduce to ``import
    a``; ``import a.b as c`` and ``from a import b`` keep their module (the object bound
    depends on it)."""
    if isinstance(statement, ast.ImportFrom):
        return ast.ImportFrom(module=statement.module, names=[alias], level=statement.level)
    if alias.asname:
        return ast.Import(names=[alias])
    return ast.Import(names=[ast.alias(name=alias.name.split(".")[0])])


def loaded_submodules(statement: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, ...]:
    """The dotted submodules an ``import a.b.c`` (without ``as``) makes reachable as
    attributes of the name it binds: ``a.b`` and ``a.b.c``. Empty for every other import:
    they bind the submodule itself, or a name from a module."""
    if isinstance(statement, ast.ImportFrom) or alias.asname:
        return ()
    parts = alias.name.split(".")
    return tuple(".".join(parts[:end]) for end in range(2, len(parts) + 1))


def _package_depth(folders: tuple[str, ...], files: frozenset[str]) -> int:
    """How many leading folders are *not* part of the package chain ending at the file."""
    depth = len(folders)
    while depth > 0 and "/".join(folders[:depth]) + "/__init__.py" in files:
        depth -= 1
    return depth


def _module_parts(path: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(folders, the module's dotted parts) of a ``.py`` path; None for other files."""
    pure = PurePosixPath(path)
    if pure.suffix != ".py":
        return None
    folders = pure.parts[:-1]
    parts = folders if pure.name == "__init__.py" else (*folders, pure.stem)
    return folders, parts


def module_names(path: str, files: frozenset[str]) -> tuple[str, ...]:
    """Every dotted name ``path`` may be imported as, shortest first (``src/pkg/a.py`` ->
    ``pkg.a``, ``src.pkg.a``). Empty for a file that is no importable module."""
    split = _module_parts(path)
    if split is None:
        return ()
    folders, parts = split
    depth = _package_depth(folders, files)
    names = []
    for start in range(depth, -1, -1):
        tail = parts[start:]
        if tail and all(part.isidentifier() for part in tail):
            names.append(".".join(tail))
    return tuple(names)


def own_name(path: str, files: frozenset[str]) -> tuple[str, bool] | None:
    """The name relative imports in ``path`` resolve against, and whether it is a package."""
    names = module_names(path, files)
    if not names:
        return None
    return names[0], PurePosixPath(path).name == "__init__.py"


def _with_parents(name: str) -> Iterable[str]:
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def _relative_base(importer: tuple[str, bool] | None, level: int) -> str | None:
    if importer is None:
        return None
    name, is_package = importer
    parts = name.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    if keep < 1:
        return None
    return ".".join(parts[:keep])


def absolute_module(
    module: str | None, level: int, importer: str, files: frozenset[str]
) -> str | None:
    """The absolute dotted name ``from <level dots><module> import ...`` in the file
    ``importer`` names; None when a relative import climbs out of its package."""
    if not level:
        return module
    base = _relative_base(own_name(importer, files), level)
    if base is None:
        return None
    return f"{base}.{module}" if module else base


def imported_names(source: str | bytes, importer: tuple[str, bool] | None) -> frozenset[str]:
    """Every absolute dotted name the module may import (parents included). ``importer``
    is :func:`own_name` of the module (None: relative imports resolve to nothing). A
    module that does not parse imports nothing we can see."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(_with_parents(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _relative_base(importer, node.level)
                if base is None:
                    continue
                module = f"{base}.{node.module}" if node.module else base
            elif node.module:
                module = node.module
            else:
                continue
            found.update(_with_parents(module))
            for alias in node.names:
                if alias.name != "*":
                    found.add(f"{module}.{alias.name}")
        elif isinstance(node, ast.Call) and node.args:
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else None
            if isinstance(function, ast.Name):
                called = function.id
            first = node.args[0]
            if (
                called in IMPORT_FUNCTIONS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and first.value
                and not first.value.startswith(".")
            ):
                found.update(_with_parents(first.value))
    return frozenset(found)


def name_index(files: frozenset[str]) -> dict[str, frozenset[str]]:
    """Dotted name -> the project files it may load."""
    index: dict[str, set[str]] = {}
    for path in files:
        for name in module_names(path, files):
            index.setdefault(name, set()).add(path)
    return {name: frozenset(paths) for name, paths in index.items()}


@lru_cache(maxsize=8)
def _cached_index(files: frozenset[str]) -> dict[str, frozenset[str]]:
    return name_index(files)


def module_paths(name: str, files: frozenset[str]) -> tuple[str, ...]:
    """The project files the dotted module ``name`` may load, sorted (the index of one
    tree is built once, however many names are looked up in it)."""
    return tuple(sorted(_cached_index(files).get(name, ())))


def import_graph(sources: Mapping[str, str | bytes]) -> dict[str, frozenset[str]]:
    """File -> the project files it imports, for one tree (``sources``: every ``.py`` file
    of the tree with its text)."""
    files = frozenset(sources)
    index = name_index(files)
    graph: dict[str, frozenset[str]] = {}
    for path, source in sources.items():
        names = imported_names(source, own_name(path, files))
        graph[path] = frozenset(
            target for name in names for target in index.get(name, ()) if target != path
        )
    return graph


def merge_graphs(*graphs: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """The union of several graphs' edges (base's and patch's)."""
    merged: dict[str, set[str]] = {}
    for graph in graphs:
        for path, targets in graph.items():
            merged.setdefault(path, set()).update(targets)
    return {path: frozenset(targets) for path, targets in merged.items()}


def importers_of(graph: Mapping[str, Iterable[str]], changed: Iterable[str]) -> frozenset[str]:
    """Every file that imports one of ``changed``, directly or through other files (a
    changed file itself only when it imports another changed file)."""
    reverse: dict[str, set[str]] = {}
    for path, targets in graph.items():
        for target in targets:
            reverse.setdefault(target, set()).add(path)
    found: set[str] = set()
    pending = [importer for path in changed for importer in reverse.get(path, ())]
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found.add(path)
        pending.extend(reverse.get(path, ()))
    return frozenset(found)
