"""What a test module holds: its statements as the items a slice may take, each
with the names it binds and references. Pure; cached per source text."""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from orchestrator.core.imports import binding, bound_name, loaded_submodules
from orchestrator.core.oracle.dump import dump
from orchestrator.core.oracle.model import PartKey, ReasonKind

# Module-level names pytest (or unittest) calls for every test of the module.
MODULE_HOOKS = frozenset(
    {
        "setup_module", "teardown_module", "setup_function", "teardown_function",
        "setUpModule", "tearDownModule", "setup", "teardown",
    }
)  # fmt: skip
MODULE_MAGIC = frozenset({"pytestmark", "pytest_plugins"})
# Methods a test class runs around its tests.
CLASS_HOOKS = frozenset(
    {
        "setup_method", "teardown_method", "setup_class", "teardown_class", "setup", "teardown",
        "setUp", "tearDown", "setUpClass", "tearDownClass", "asyncSetUp", "asyncTearDown",
        "run", "debug",
    }
)  # fmt: skip
# Bases known to define no tests: a class with only these (and module-defined) bases
# cannot inherit a test from elsewhere.
TESTLESS_BASES = frozenset({"TestCase", "IsolatedAsyncioTestCase"})
FIXTURE_DECORATORS = frozenset({"fixture", "yield_fixture"})

# ---------------------------------------------------------------- parsing and dumping


@lru_cache(maxsize=64)
def parse(source: str | bytes) -> tuple[ast.Module | None, str]:
    """The module's AST, or None and why not (bytes honour a coding cookie). Cached: the
    whole-file part and the analysis read the same tree, which nothing changes."""
    try:
        return ast.parse(source), ""
    except SyntaxError as error:
        return None, f"{error.msg}, line {error.lineno}"
    except (ValueError, RecursionError) as error:
        return None, str(error) or type(error).__name__


@lru_cache(maxsize=256)
def file_dump(source: str | bytes) -> str:
    """A whole file as one part: its AST when it parses (comments and blank lines do not
    count), else the digest of its bytes."""
    module, _ = parse(source)
    if module is not None:
        return dump(module)
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    return "bytes:sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- what the module holds


@dataclass(eq=False)
class Item:
    """One piece a slice may take: a statement (or one imported name, or a class header)."""

    key: PartKey
    node: ast.AST
    order: tuple[int, int, int]
    bound: frozenset[str] = frozenset()
    fixture: str | None = None  # the fixture name, when this defines a fixture
    always: bool = False  # in every slice of its scope
    injects: bool = False  # its parameters are fixture requests
    import_binding: bool = False  # an import reduced to what it binds (equal ones are one)
    submodule: str | None = None  # ``a.b`` for ``import a.b``: in the slice when it names a.b

    @cached_property
    def text(self) -> str:
        return dump(self.node)

    @cached_property
    def references(self) -> References:
        return _references(self)


@dataclass(eq=False)
class Scope:
    """The items of a module or a class body, indexed by the names they bind."""

    items: list[Item] = field(default_factory=list)
    by_name: dict[str, list[Item]] = field(default_factory=dict)
    by_fixture: dict[str, list[Item]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    submodules: dict[str, list[Item]] = field(default_factory=dict)

    def add(self, item: Item) -> None:
        self.items.append(item)
        for name in item.bound:
            self.by_name.setdefault(name, []).append(item)
        if item.fixture is not None:
            self.by_fixture.setdefault(item.fixture, []).append(item)
        if item.submodule is not None:
            self.submodules.setdefault(item.submodule, []).append(item)


@dataclass(eq=False)
class AnalysedModule:
    scope: Scope
    star_import: bool
    testless_names: frozenset[str]  # names imported from unittest that define no tests
    star_imports: tuple[ast.ImportFrom, ...] = ()


def _order(node: ast.AST, sub: int = 0) -> tuple[int, int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0), sub


def _is_inert(stmt: ast.stmt) -> bool:
    """Statements that run nothing under pytest: docstrings, ``pass``, the main guard."""
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare):
        test = stmt.test
        sides = [test.left, *test.comparators]
        names = {s.id for s in sides if isinstance(s, ast.Name)}
        consts = {s.value for s in sides if isinstance(s, ast.Constant)}
        return names == {"__name__"} and consts == {"__main__"} and not stmt.orelse
    return False


def _terminal_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _fixture_decorator(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    for decorator in func.decorator_list:
        if _terminal_name(decorator) in FIXTURE_DECORATORS:
            return decorator
    return None


def _fixture_name(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    decorator = _fixture_decorator(func)
    if decorator is None:
        return None
    if isinstance(decorator, ast.Call):
        for keyword in decorator.keywords:
            if (
                keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            ):
                return keyword.value.value
    return func.name


def _is_autouse(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An autouse fixture; an ``autouse=`` the source cannot evaluate counts as autouse."""
    decorator = _fixture_decorator(func)
    if not isinstance(decorator, ast.Call):
        return False
    for keyword in decorator.keywords:
        if keyword.arg == "autouse":
            value = keyword.value
            return not (isinstance(value, ast.Constant) and not value.value)
        if keyword.arg is None:  # **options: cannot tell
            return True
    return False


def _target_names(target: ast.expr) -> list[str] | None:
    """The names an assignment target binds; None when it assigns into something else."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        names: list[str] = []
        for element in target.elts:
            found = _target_names(element)
            if found is None:
                return None
            names.extend(found)
        return names
    return None


def _assigned_names(stmt: ast.stmt) -> list[str] | None:
    targets: list[ast.expr]
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return None
    names: list[str] = []
    for target in targets:
        found = _target_names(target)
        if found is None:
            return None
        names.extend(found)
    return names


def _bound_anywhere(stmt: ast.stmt) -> frozenset[str]:
    """Names a compound statement binds in its own scope (not inside functions or classes)."""
    names: set[str] = set()
    pending: list[ast.AST] = [stmt]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        pending.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def _import_items(stmt: ast.Import | ast.ImportFrom, key_kind: ReasonKind) -> Iterator[Item]:
    """One item per imported name, so another name on the same line changes nothing, each
    reduced to what it binds (``import a.b`` binds ``a`` as ``import a`` does); the
    submodules ``import a.b`` loads are items of their own, taken when the slice names
    ``a.b``."""
    for index, alias in enumerate(stmt.names):
        bound = bound_name(alias, from_import=isinstance(stmt, ast.ImportFrom))
        yield Item(
            key=(key_kind, bound),
            node=binding(stmt, alias),
            order=_order(stmt, index),
            bound=frozenset({bound}),
            import_binding=True,
        )
        for submodule in loaded_submodules(stmt, alias):
            yield Item(
                key=(key_kind, submodule),
                node=ast.Import(names=[ast.alias(name=submodule, asname=None)]),
                order=_order(stmt, index),
                import_binding=True,
                submodule=submodule,
            )


def _module_items(stmt: ast.stmt) -> Iterator[Item]:
    setup: PartKey = (ReasonKind.MODULE_SETUP, "")
    if isinstance(stmt, ast.ImportFrom) and (
        stmt.module == "__future__" or any(alias.name == "*" for alias in stmt.names)
    ):
        yield Item(key=setup, node=stmt, order=_order(stmt), always=True)
    elif isinstance(stmt, ast.Import | ast.ImportFrom):
        yield from _import_items(stmt, ReasonKind.HELPER)
    elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        bound = frozenset({stmt.name})
        fixture = _fixture_name(stmt)
        if fixture is not None:
            yield Item(
                key=(ReasonKind.FIXTURE, fixture),
                node=stmt,
                order=_order(stmt),
                bound=bound,
                fixture=fixture,
                always=_is_autouse(stmt),
                injects=True,
            )
        elif stmt.name in MODULE_HOOKS or stmt.name.startswith("pytest_"):
            yield Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True)
        else:
            yield Item(
                key=(ReasonKind.HELPER, stmt.name), node=stmt, order=_order(stmt), bound=bound
            )
    elif isinstance(stmt, ast.ClassDef):
        yield Item(
            key=(ReasonKind.HELPER, stmt.name),
            node=stmt,
            order=_order(stmt),
            bound=frozenset({stmt.name}),
        )
    else:
        names = _assigned_names(stmt)
        alias_name = getattr(stmt, "name", None)  # `type X = ...` (Python 3.12+)
        if (
            names is None
            and type(stmt).__name__ == "TypeAlias"
            and isinstance(alias_name, ast.Name)
        ):
            names = [alias_name.id]
        if names is None or MODULE_MAGIC & set(names):
            yield Item(
                key=setup, node=stmt, order=_order(stmt), bound=_bound_anywhere(stmt), always=True
            )
            return
        for name in dict.fromkeys(names):
            yield Item(
                key=(ReasonKind.HELPER, name),
                node=stmt,
                order=_order(stmt),
                bound=frozenset({name}),
            )


@lru_cache(maxsize=64)
def analyse_source(source: str | bytes) -> AnalysedModule | None:
    """The module's items, once per source text (a module holds many properties)."""
    module = parse(source)[0]
    return None if module is None else _analyse(module)


def _analyse(module: ast.Module) -> AnalysedModule:
    scope = Scope()
    star = False
    stars: list[ast.ImportFrom] = []
    testless: set[str] = set()
    for stmt in module.body:
        if _is_inert(stmt):
            continue
        if isinstance(stmt, ast.ClassDef):
            scope.classes[stmt.name] = stmt  # the last definition wins, as at run time
        if isinstance(stmt, ast.ImportFrom):
            if any(alias.name == "*" for alias in stmt.names):
                star = True
                stars.append(stmt)
            if stmt.module == "unittest":
                testless |= {
                    alias.asname or alias.name
                    for alias in stmt.names
                    if alias.name in TESTLESS_BASES
                }
        for item in _module_items(stmt):
            scope.add(item)
    return AnalysedModule(
        scope=scope, star_import=star, testless_names=frozenset(testless), star_imports=tuple(stars)
    )


@lru_cache(maxsize=4096)
def scope_of_class(cls: ast.ClassDef, qualname: str, skip: str | None) -> Scope:
    """A class in the slice: its header, attributes, hooks and fixtures always; methods and
    nested classes only when referenced. ``skip`` is the nested class the node id enters.

    Cached per class node (of a cached analysis), so the many test methods of one class
    share its items and each item's dump and references are computed once; a scope is
    never changed once built."""
    scope = Scope()
    setup: PartKey = (ReasonKind.CLASS_SETUP, qualname)
    header = copy.copy(cls)  # the class without its body: name, bases, decorators
    header.body = []
    scope.add(Item(key=setup, node=header, order=_order(cls, -1), always=True))
    for stmt in cls.body:
        if _is_inert(stmt):
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            bound = frozenset({stmt.name})
            fixture = _fixture_name(stmt)
            if fixture is not None:
                key: PartKey = (ReasonKind.FIXTURE, f"{qualname}.{fixture}")
                scope.add(
                    Item(
                        key=key,
                        node=stmt,
                        order=_order(stmt),
                        bound=bound,
                        fixture=fixture,
                        always=True,
                        injects=True,
                    )
                )
            elif stmt.name in CLASS_HOOKS or stmt.name.startswith(("__", "pytest_")):
                scope.add(Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True))
            else:
                key = (ReasonKind.HELPER, f"{qualname}.{stmt.name}")
                scope.add(Item(key=key, node=stmt, order=_order(stmt), bound=bound))
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name != skip:
                key = (ReasonKind.HELPER, f"{qualname}.{stmt.name}")
                scope.add(
                    Item(key=key, node=stmt, order=_order(stmt), bound=frozenset({stmt.name}))
                )
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for item in _import_items(stmt, ReasonKind.CLASS_SETUP):
                item.key, item.always = setup, True
                scope.add(item)
        else:
            bound = _bound_anywhere(stmt)
            scope.add(Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True))
    return scope


# ---------------------------------------------------------------- slicing one property


@dataclass(frozen=True)
class References:
    names: frozenset[str]
    attributes: frozenset[str]
    fixtures: frozenset[str]
    dotted: frozenset[str] = frozenset()  # ``a.b``, ``a.b.c`` for ``a.b.c`` (a a name)


def dotted_parts(node: ast.expr) -> list[str] | None:
    """``a.b.C`` as ``["a", "b", "C"]``; None for anything but names and attributes."""
    attributes: list[str] = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(attributes)]


def _references(item: Item) -> References:
    names: set[str] = set()
    attributes: set[str] = set()
    fixtures: set[str] = set()
    dotted: set[str] = set()
    # Every node under the item (``ast.walk``'s, in another order: only sets are made),
    # by a plain stack: the generators of ``ast.walk`` cost more than the checks.
    stack: list[ast.AST] = [item.node]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is not ast.Store:  # type: ignore[attr-defined]
                names.add(node.id)  # type: ignore[attr-defined]
            continue  # its only child is its context
        if kind is ast.Attribute:
            attributes.add(node.attr)  # type: ignore[attr-defined]
            parts = dotted_parts(node)  # type: ignore[arg-type]
            if parts is not None:  # inner attributes are walked too: every prefix counts
                dotted.add(".".join(parts))
            stack.append(node.value)  # type: ignore[attr-defined]
            continue
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if isinstance(value, str):
                # usefixtures("db"), getfixturevalue("db"), parametrize("db,user", indirect=True)
                fixtures.update(part.strip() for part in value.split(","))
            continue
        if kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)  # type: ignore[attr-defined]
            continue
        for name in kind._fields:
            child = getattr(node, name, None)
            if type(child) is list:
                stack.extend(inner for inner in child if isinstance(inner, ast.AST))
            elif isinstance(child, ast.AST):
                stack.append(child)
    if item.injects and isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = item.node.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            fixtures.add(arg.arg)
            names.add(arg.arg)
    return References(
        frozenset(names), frozenset(attributes), frozenset(fixtures), frozenset(dotted)
    )


def forget_modules() -> None:
    """Drop the parsed modules kept for the properties of one module (their trees are a
    few hundred KB each): called once a run's properties are sliced."""
    for cached in (parse, file_dump, analyse_source, scope_of_class):
        cached.cache_clear()
