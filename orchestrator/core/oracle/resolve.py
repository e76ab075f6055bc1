"""Base classes followed through imports into the project's other modules. Pure."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import lru_cache

from orchestrator.core.imports import absolute_module, module_paths
from orchestrator.core.oracle.analysis import (
    TESTLESS_BASES,
    AnalysedModule,
    analyse_source,
    dotted_parts,
)
from orchestrator.core.oracle.model import ProjectModules

# How many re-exports (``from .mixins import Mixin`` in a package) a base is followed through.
MAX_REEXPORTS = 8


# A module where a class of the slice is defined: its path and its analysis.
Home = tuple[str, AnalysedModule]


class Resolver:
    """Finds the class a base names, in its own module or, through the imports that bind
    it, in another module of the project (as ``sys.path`` would load it)."""

    def __init__(self, modules: ProjectModules, *, memo: bool = False) -> None:
        self.modules = modules
        self.memo = memo  # keep answers in ``modules.resolved`` (what was read is not tracked)
        self.wanted: set[str] = set()  # modules it would read that it was not given
        self.used: set[str] = set()  # modules it read a class from

    def analysed(self, path: str) -> AnalysedModule | None:
        sources = self.modules.sources
        if path not in sources:
            self.wanted.add(path)
            return None
        source = sources[path]
        return None if source is None else analyse_source(source)

    def base(self, base: ast.expr, home: Home, depth: int = 0) -> tuple[ast.ClassDef, Home] | None:
        """The class ``base`` names in ``home``'s scope; None when the source cannot tell."""
        if depth or not self.memo:
            return self._base(base, home, depth)
        key = (home[0], home[1], base)
        memo = self.modules.resolved
        if key not in memo:
            memo[key] = self._base(base, home, depth)
        found: tuple[ast.ClassDef, Home] | None = memo[key]
        return found

    def _base(self, base: ast.expr, home: Home, depth: int) -> tuple[ast.ClassDef, Home] | None:
        parts = dotted_parts(base)
        if parts is None or depth > MAX_REEXPORTS:
            return None
        path, module = home
        scope = module.scope
        bound = scope.by_name.get(parts[0], [])
        if len(parts) == 1:
            cls = scope.classes.get(parts[0])
            if cls is not None and bound and all(isinstance(i.node, ast.ClassDef) for i in bound):
                return cls, home
        if not bound:
            if len(parts) == 1:  # a star import may bind it: the last one wins
                for star in reversed(module.star_imports):
                    origin = absolute_module(star.module, star.level, path, self.modules.files)
                    found = (
                        None if origin is None else self._class_in(origin, parts[0], depth, path)
                    )
                    if found is not None:
                        return found
            return None
        if not all(item.import_binding for item in bound):
            return None
        node = max(bound, key=lambda item: item.order).node
        attributes = parts[1:]
        if isinstance(node, ast.ImportFrom):
            origin = absolute_module(node.module, node.level, path, self.modules.files)
            if origin is None:
                return None
            name = node.names[0].name
            if not attributes:
                return self._class_in(origin, name, depth, path)
            dotted = ".".join([origin, name, *attributes[:-1]])
            return self._class_in(dotted, parts[-1], depth, path)
        if not isinstance(node, ast.Import) or not attributes:
            return None
        alias = node.names[0]
        prefix = [alias.name] if alias.asname else [parts[0]]
        return self._class_in(".".join([*prefix, *attributes[:-1]]), parts[-1], depth, path)

    def _class_in(
        self, module_name: str, name: str, depth: int, importer: str
    ) -> tuple[ast.ClassDef, Home] | None:
        # Where two files answer to the name, the one nearest the importer first (pytest
        # puts the test's own folder first on sys.path).
        here = importer.split("/")[:-1]
        candidates = sorted(
            module_paths(module_name, self.modules.files),
            key=lambda path: (-_shared(path.split("/")[:-1], here), path),
        )
        for path in candidates:
            analysed = self.analysed(path)
            if analysed is None:
                continue
            found = self.base(ast.Name(id=name, ctx=ast.Load()), (path, analysed), depth + 1)
            if found is not None:
                self.used.add(path)
                return found
        return None


def _shared(first: Sequence[str], second: Sequence[str]) -> int:
    """How many leading folders two paths share."""
    count = 0
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        count += 1
    return count


@lru_cache(maxsize=2048)  # once per module text: a run asks in several passes
def may_inherit_from_elsewhere(source: str | bytes | None) -> bool:
    """Does a class of this module name a base its imports bind (or a star import may)?
    Only then are the project's other modules worth reading for its slices. Pure."""
    if source is None:
        return False
    if (b"class" not in source) if isinstance(source, bytes) else ("class" not in source):
        return False  # no class statement, no base (skips parsing a module of functions)
    analysed = analyse_source(source)
    if analysed is None:
        return False
    scope = analysed.scope
    for cls in scope.classes.values():
        for base in cls.bases:
            parts = dotted_parts(base)
            if parts is None or is_testless(base, analysed):
                continue
            bound = scope.by_name.get(parts[0], [])
            if (bound and all(item.import_binding for item in bound)) or (
                not bound and analysed.star_import
            ):
                return True
    return False


def imported_class(
    base: ast.expr, path: str, source: str | bytes, modules: ProjectModules
) -> tuple[str, str] | None:
    """The other project module, and the name there, of the class ``base`` names in the
    module at ``path`` through its imports; None when it is defined in the module itself or
    the source cannot tell. Pure."""
    analysed = analyse_source(source)
    if analysed is None:
        return None
    found = Resolver(modules).base(base, (path, analysed))
    if found is None or found[1][0] == path:
        return None
    return found[1][0], found[0].name


def inherited_modules(path: str, modules: ProjectModules) -> tuple[frozenset[str], frozenset[str]]:
    """The other project modules the classes of the module at ``path`` inherit from,
    transitively: those ``modules.sources`` holds and those it would still have to read.
    A caller reads the second set and asks again until it is empty. Pure."""
    source = modules.sources.get(path)
    analysed = None if source is None else analyse_source(source)
    if analysed is None:
        return frozenset(), frozenset()
    resolver = Resolver(modules)
    pending: list[tuple[ast.ClassDef, Home]] = [
        (cls, (path, analysed)) for cls in analysed.scope.classes.values()
    ]
    seen: set[int] = set()
    while pending:
        cls, home = pending.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        for base in cls.bases:
            found = resolver.base(base, home)
            if found is not None:
                pending.append(found)
    return frozenset(resolver.used - {path}), frozenset(resolver.wanted - {path})


def is_testless(base: ast.expr, module: AnalysedModule) -> bool:
    """A base known to define no tests: ``object``, ``unittest.TestCase``."""
    if isinstance(base, ast.Name):
        return base.id == "object" or base.id in module.testless_names
    return (
        isinstance(base, ast.Attribute)
        and isinstance(base.value, ast.Name)
        and base.value.id == "unittest"
        and base.attr in TESTLESS_BASES
    )


# One piece of a slice and the module whose names it refers to.
