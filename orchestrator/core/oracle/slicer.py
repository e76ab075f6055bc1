"""One property's oracle slice: its test found in its module and closed over what it
references. Pure."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import PurePosixPath

from orchestrator.core.oracle.analysis import (
    AnalysedModule,
    Item,
    References,
    Scope,
    analyse_source,
    file_dump,
    parse,
    scope_of_class,
)
from orchestrator.core.oracle.model import (
    NO_MODULES,
    OracleSlice,
    PartKey,
    ProjectModules,
    ReasonKind,
    SliceStatus,
)
from orchestrator.core.oracle.resolve import Home, Resolver, is_testless
from orchestrator.core.pytest_command import NodeId, split_node_id


def oracle_slice(
    source: str | bytes | None,
    conftests: Mapping[str, str | bytes | None],
    property_id: str,
    modules: ProjectModules = NO_MODULES,
) -> OracleSlice:
    """The oracle slice of ``property_id`` given its module's source (None: no such file),
    the source of each ``conftest.py`` above it (path -> source, None: absent) and the
    project's other modules its classes may inherit from. Pure."""
    node = split_node_id(property_id)
    if source is None:
        return OracleSlice(property_id=property_id, path=node.path, status=SliceStatus.ABSENT)
    conftest_parts = {
        (ReasonKind.CONFTEST, path): (file_dump(text),)
        for path, text in conftests.items()
        if text is not None
    }

    def whole_parts() -> dict[PartKey, tuple[str, ...]]:
        return {(ReasonKind.WHOLE_FILE, node.path): (file_dump(source),), **conftest_parts}

    # Dumping a whole module is the costliest part of a slice, and a sliced side needs it
    # only when the other side cannot be sliced.
    whole: Mapping[PartKey, tuple[str, ...]] = _LazyParts(whole_parts)

    def doctest_slice(text: str) -> OracleSlice:  # the examples a doctest item runs
        return OracleSlice(
            property_id=property_id,
            path=node.path,
            status=SliceStatus.SLICED,
            parts={(ReasonKind.DOCTEST, node.names[0]): (text,), **conftest_parts},
            whole_file=whole,
        )

    examples = text_doctest_examples(source, node.path, node.names)
    if examples is not None:
        return doctest_slice(examples)
    analysed = analyse_source(source)
    note = problem = ""
    if analysed is None:
        note, problem = "does not parse", parse(source)[1]
    elif not node.function.isidentifier() or not all(c.isidentifier() for c in node.classes):
        note = "not a Python test function"
    if analysed is not None and note:
        docstring = doctest_docstring(parse(source)[0], node.path, node.names)
        if docstring is not None:
            return doctest_slice(docstring)
    if analysed is None or note:
        whole = whole_parts()
        return OracleSlice(
            property_id=property_id,
            path=node.path,
            status=SliceStatus.WHOLE_FILE,
            parts=whole,
            whole_file=whole,
            note=note,
            problem=problem,
        )
    found = Slicer(analysed, node, Resolver(modules, memo=True)).parts()
    if found is None:
        return OracleSlice(property_id=property_id, path=node.path, status=SliceStatus.ABSENT)
    return OracleSlice(
        property_id=property_id,
        path=node.path,
        status=SliceStatus.SLICED,
        parts={**found, **conftest_parts},
        whole_file=whole,
    )


def text_doctest_examples(source: str | bytes, path: str, names: tuple[str, ...]) -> str | None:
    """The examples of a text file pytest runs as one doctest (``--doctest-glob``:
    ``docs/usage.rst::usage.rst``), as the oracle: each example's source, expected output,
    expected exception and directives, in order. The prose around them, and where they
    stand, are not part of it. None for a Python module, or a file that is no UTF-8 text
    or whose examples do not parse as doctest reads them (the whole file is then its
    oracle). Pure."""
    if path.endswith(".py") or names != (PurePosixPath(path).name,):
        return None
    import doctest  # with pdb behind it: only for a suite that has text doctests

    try:
        text = source.decode("utf-8") if isinstance(source, bytes) else source
        examples = doctest.DocTestParser().get_examples(text, name=path)
    except (UnicodeDecodeError, ValueError):
        return None
    # Directives by name: their numbers are the doctest module's own, its names are stable.
    flags = {number: name for name, number in doctest.OPTIONFLAGS_BY_NAME.items()}
    return json.dumps(
        [
            [
                example.source,
                example.want,
                example.exc_msg,
                sorted((flags.get(flag, str(flag)), on) for flag, on in example.options.items()),
            ]
            for example in examples
        ],
        ensure_ascii=False,
    )


def doctest_docstring(module: ast.Module | None, path: str, names: tuple[str, ...]) -> str | None:
    """The docstring a doctest item of this module runs, or None when the node id is not
    one (``pkg/mod.py::pkg.mod.Class.method``: pytest names a doctest by the object's
    dotted name, which starts with the module's import name, whatever the rootdir made of
    it). The module's own docstring is named by the module alone. Pure."""
    if module is None or len(names) != 1 or not path.endswith(".py"):
        return None
    dotted = names[0].split(".")
    if len(dotted) < 2 or not all(part.isidentifier() for part in dotted):
        return None
    # The longest tail of the dotted name that names an object of the module.
    for start in range(len(dotted)):
        found = _object_at(module, dotted[start:])
        if found is not None:
            return ast.get_docstring(found, clean=False)
    stem = PurePosixPath(path).stem
    own_name = PurePosixPath(path).parent.name if stem == "__init__" else stem
    return ast.get_docstring(module, clean=False) if dotted[-1] == own_name else None


def _object_at(
    module: ast.Module, names: list[str]
) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    body: list[ast.stmt] = module.body
    found: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None = None
    for name in names:
        found = next(
            (
                stmt
                for stmt in reversed(body)  # the last definition wins, as at run time
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and stmt.name == name
            ),
            None,
        )
        if found is None:
            return None
        body = found.body
    return found


class _LazyParts(Mapping[PartKey, tuple[str, ...]]):
    """Parts computed the first time they are read."""

    def __init__(self, make: Callable[[], Mapping[PartKey, tuple[str, ...]]]) -> None:
        self._make = make
        self._parts: Mapping[PartKey, tuple[str, ...]] | None = None

    def _get(self) -> Mapping[PartKey, tuple[str, ...]]:
        if self._parts is None:
            self._parts = self._make()
        return self._parts

    def __getitem__(self, key: PartKey) -> tuple[str, ...]:
        return self._get()[key]

    def __iter__(self) -> Iterator[PartKey]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


_Placed = tuple[Item, Home]


class Slicer:
    """Finds one property's test in an analysed module and closes over what it references."""

    def __init__(self, module: AnalysedModule, node: NodeId, resolver: Resolver) -> None:
        self.module = module
        self.node = node
        self.home: Home = (node.path, module)
        self.resolver = resolver
        self.chain: list[Scope] = []  # every class in the slice, as scopes
        self.chain_homes: list[Home] = []  # the module each of them is defined in
        self.chain_classes: set[int] = set()  # ids of their ClassDef nodes
        self.innermost = 0  # where the test's own class (then its bases) starts in the chain
        self.external_base = False  # the class may inherit from a base defined elsewhere

    def parts(self) -> dict[PartKey, tuple[str, ...]] | None:
        """The slice's parts, or None when the test does not exist on this side."""
        tests = self._locate()
        if tests is None:
            return None
        seeds: list[_Placed] = [
            (item, self.home) for item in self.module.scope.items if item.always
        ]
        seeds += [
            (item, home)
            for scope, home in zip(self.chain, self.chain_homes, strict=True)
            for item in scope.items
            if item.always
        ]
        # What another module runs when it is imported (not its hooks or fixtures: those
        # apply to its own tests only).
        foreign = {path: module for path, module in self.chain_homes if path != self.node.path}
        seeds += [
            (item, (path, module))
            for path, module in foreign.items()
            for item in module.scope.items
            if item.always and not isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        grouped: dict[PartKey, list[Item]] = {}
        for item, key in self._close(tests, seeds):
            grouped.setdefault(key, []).append(item)
        return {key: _texts(items) for key, items in grouped.items()}

    # -- finding the test

    def _locate(self) -> list[_Placed] | None:
        """The items that define the test (as ``test body``); None when it is absent."""
        scope = self.module.scope
        classes = self.node.classes
        first = classes[0] if classes else self.node.function
        if not classes or first not in scope.classes:
            bound = scope.by_name.get(first)
            if bound:
                return [(_as_test(item), self.home) for item in bound]
            # A star import may bind it: slice without the body rather than call it absent.
            return [] if self.module.star_import else None
        cls, qualname = scope.classes[first], first
        for depth in range(len(classes)):
            following = classes[depth + 1] if depth + 1 < len(classes) else None
            if following is None:
                self.innermost, self.external_base = len(self.chain), False
            self._enter(cls, qualname, skip=following)
            if following is None:
                break
            inner = [s for s in cls.body if isinstance(s, ast.ClassDef) and s.name == following]
            if not inner:
                return [] if self.external_base else None
            cls, qualname = inner[-1], f"{qualname}.{following}"
        for class_scope, home in zip(
            self.chain[self.innermost :], self.chain_homes[self.innermost :], strict=True
        ):
            found = class_scope.by_name.get(self.node.function)
            if found:
                return [(_as_test(item), home) for item in found]
        return [] if self.external_base else None

    def _enter(self, cls: ast.ClassDef, qualname: str, *, skip: str | None) -> None:
        """Put ``cls`` and then its bases (breadth-first) into the chain: those defined in
        the module, and those its imports bind to a class of another project module."""
        pending: list[tuple[ast.ClassDef, str, str | None, Home]] = [
            (cls, qualname, skip, self.home)
        ]
        while pending:
            current, name, skipped, home = pending.pop(0)
            if id(current) in self.chain_classes:
                continue
            self.chain_classes.add(id(current))
            self.chain.append(scope_of_class(current, name, skipped))
            self.chain_homes.append(home)
            for base in current.bases:
                found = self.resolver.base(base, home)
                if found is not None:
                    defined, where = found
                    label = (
                        defined.name
                        if where[0] == self.node.path
                        else f"{where[0]}::{defined.name}"
                    )
                    pending.append((defined, label, None, where))
                elif not is_testless(base, home[1]):
                    self.external_base = True

    # -- closing over references

    def _close(self, tests: list[_Placed], seeds: list[_Placed]) -> Iterator[tuple[Item, PartKey]]:
        """The test, the seeds and everything they reference, transitively, each with the
        key of its part (a name of another module is keyed by that module's path too)."""
        test_nodes = {id(item.node) for item, _ in tests}
        # The test's own statement is its ``test body`` part, never also a helper.
        seen = {
            id(item)
            for scope in (self.module.scope, *self.chain)
            for item in scope.items
            if id(item.node) in test_nodes
        }
        for item, _ in tests:
            yield item, item.key
        pending = [*seeds]
        for item, home in tests:
            pending.extend(self._resolve(item.references, home))
        while pending:
            item, home = pending.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            yield item, self._key(item, home)
            pending.extend(self._resolve(item.references, home))

    def _key(self, item: Item, home: Home) -> PartKey:
        """A name of another module is keyed by its path; its classes' parts already are."""
        kind, subject = item.key
        if home[0] == self.node.path or kind is ReasonKind.CLASS_SETUP or "::" in subject:
            return item.key
        return kind, f"{home[0]}::{subject}" if subject else home[0]

    def _resolve(self, refs: References, home: Home) -> Iterator[_Placed]:
        scope = home[1].scope
        for name in refs.names:
            for item in scope.by_name.get(name, ()):
                # A class of the chain is in the slice by its parts, never whole.
                if id(item.node) not in self.chain_classes:
                    yield item, home
        for name in refs.fixtures:
            for item in scope.by_fixture.get(name, ()):
                yield item, home
        for name in refs.dotted:
            for item in scope.submodules.get(name, ()):
                yield item, home
        for name in refs.names | refs.attributes:
            for class_scope, class_home in zip(self.chain, self.chain_homes, strict=True):
                for item in class_scope.by_name.get(name, ()):
                    yield item, class_home


def _texts(items: Sequence[Item]) -> tuple[str, ...]:
    """A part's dumps in source order; an import binding that a later one repeats binds
    nothing new (``import a`` then ``import a.b``) and is one."""
    ordered = sorted(items, key=lambda item: item.order)
    texts: list[str] = []
    for index, item in enumerate(ordered):
        if item.import_binding and any(
            later.import_binding and later.text == item.text for later in ordered[index + 1 :]
        ):
            continue
        texts.append(item.text)
    return tuple(texts)


def _as_test(item: Item) -> Item:
    return Item(
        key=(ReasonKind.TEST_BODY, ""),
        node=item.node,
        order=item.order,
        bound=item.bound,
        injects=isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef),
    )
