"""A property's oracle: the code that decides its verdict, sliced out of its test module.

Pure. Given the source of a test module, the ``conftest.py`` files above it and a property's
node id, :func:`oracle_slice` returns the property's *oracle slice* (lanes.md row 2):

- the test function, with its decorators (parametrize marks included); a node id's
  ``[param]`` maps to the function;
- for a method: every class on the node id's path and every base class defined in the
  module, each with its header (name, bases, decorators), class attributes, set-up and
  tear-down methods and the fixtures it defines; methods the slice calls through an
  attribute (``self.make()``) are helpers; a test method inherited from a base class
  defined in the module is found there;
- every module-level name the slice references, transitively: helpers, constants,
  classes, fixtures (a test's and a fixture's parameters name fixtures; so do
  ``usefixtures``/``getfixturevalue`` strings), and the import that binds a referenced
  name (one imported name at a time, so importing something else on the same line
  changes nothing);
- what runs for every test of the module: ``pytestmark``, ``pytest_plugins``,
  ``setup_module``/``teardown_module`` and the other xunit and hook functions, autouse
  fixtures, ``from x import *`` and ``from __future__`` imports, and every module-level
  statement that is neither a definition nor an import (``sys.path.insert(...)``,
  ``if``/``try`` blocks); docstrings and ``if __name__ == "__main__":`` blocks run
  nothing under pytest and are left out;
- every ``conftest.py`` above the module, whole.

Conservative where the source cannot tell: a name bound by a star import is unknown, so
star imports are in every slice; a test not found in a module that has a star import (or
in a class with a base defined elsewhere) is sliced without its body, so the slice still
changes when the body appears or goes; a local variable that shadows a module-level name
pulls that name in. A module or node id that cannot be sliced (a syntax error, a test that
is not a Python function) is compared whole; :func:`compare_slices` then compares both
sides whole and says so.

Digests are position-free: every part is ``ast.dump`` without line and column
attributes, parts are keyed by what they are (``helper make_list``) and, within one key,
kept in source order; blank lines, comments and unrelated definitions anywhere in the
module leave the digest alone. Digests compare within one run (one Python's ``ast``).
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache

from orchestrator.core.digest import digest
from orchestrator.core.pytest_command import NodeId, split_node_id

SLICE_VERSION = "oracle-slice/1"
NEW_ON_PATCH_HINT = "replay with --tests-from patch to ask whether it fails on base"

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


class ReasonKind(StrEnum):
    """What changed in a property's oracle (the order is the order reasons are listed in)."""

    NEW_ON_PATCH = "new on patch"
    GONE_ON_PATCH = "gone on patch"
    WHOLE_FILE = "whole file"
    TEST_BODY = "test body"
    CLASS_SETUP = "class set-up"
    MODULE_SETUP = "module set-up"
    FIXTURE = "fixture"
    HELPER = "helper"
    CONFTEST = "conftest.py"


_KIND_ORDER = {kind: index for index, kind in enumerate(ReasonKind)}
# Reasons named without their part's subject (one line however many classes changed).
_UNNAMED = frozenset({ReasonKind.TEST_BODY, ReasonKind.CLASS_SETUP, ReasonKind.MODULE_SETUP})

PartKey = tuple[ReasonKind, str]


@dataclass(frozen=True, kw_only=True)
class ChangeReason:
    """One thing that differs between two slices: ``helper make_list``, ``test body``, ..."""

    kind: ReasonKind
    subject: str = ""
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.kind.value} {self.subject}" if self.subject else self.kind.value
        return f"{text}: {self.detail}" if self.detail else text

    def sort_key(self) -> tuple[int, str, str]:
        return _KIND_ORDER[self.kind], self.subject, self.detail


class SliceStatus(StrEnum):
    SLICED = "sliced"
    WHOLE_FILE = "whole_file"  # the module could not be sliced; its whole text is the oracle
    ABSENT = "absent"  # no such test on this side


@dataclass(frozen=True, kw_only=True)
class OracleSlice:
    """One property's oracle on one side.

    ``parts`` maps what each part is (``(HELPER, "make_list")``) to its position-free
    dumps in source order: the slice, or the whole file when ``status`` is WHOLE_FILE
    (``note`` says why). ``whole_file`` is always the whole-file form, which
    :func:`compare_slices` falls back to when the other side cannot be sliced.
    """

    property_id: str
    path: str
    status: SliceStatus
    parts: Mapping[PartKey, tuple[str, ...]] = field(default_factory=dict)
    whole_file: Mapping[PartKey, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""
    problem: str = ""  # the parser's message, when the module does not parse

    @property
    def digest(self) -> str | None:
        """``sha256:…`` of the slice (or of the whole file); None when the test is absent."""
        if self.status is SliceStatus.ABSENT:
            return None
        return parts_digest(self.parts)


@dataclass(frozen=True, kw_only=True)
class OracleChange:
    """A property's oracle on both sides: the digests that were compared and what differs.

    A digest is None on a side where the test does not exist. ``whole_file`` is true when
    one side could not be sliced and both were compared whole.
    """

    property_id: str
    base_digest: str | None
    patch_digest: str | None
    reasons: tuple[ChangeReason, ...] = ()
    whole_file: bool = False

    @property
    def changed(self) -> bool:
        return self.base_digest != self.patch_digest

    @property
    def reason_texts(self) -> tuple[str, ...]:
        return tuple(str(reason) for reason in self.reasons)


def parts_digest(parts: Mapping[PartKey, Sequence[str]]) -> str:
    """The digest of a slice's parts: canonical, whatever order they were built in. Pure."""
    rows = sorted([kind.value, subject, list(dumps)] for (kind, subject), dumps in parts.items())
    return digest({"oracle": SLICE_VERSION, "parts": rows})


# ---------------------------------------------------------------- the slice


def oracle_slice(
    source: str | bytes | None,
    conftests: Mapping[str, str | bytes | None],
    property_id: str,
) -> OracleSlice:
    """The oracle slice of ``property_id`` given its module's source (None: no such file)
    and the source of each ``conftest.py`` above it (path -> source, None: absent). Pure."""
    node = split_node_id(property_id)
    if source is None:
        return OracleSlice(property_id=property_id, path=node.path, status=SliceStatus.ABSENT)
    conftest_parts = {
        (ReasonKind.CONFTEST, path): (_file_dump(text),)
        for path, text in conftests.items()
        if text is not None
    }

    def whole_parts() -> dict[PartKey, tuple[str, ...]]:
        return {(ReasonKind.WHOLE_FILE, node.path): (_file_dump(source),), **conftest_parts}

    # Dumping a whole module is the costliest part of a slice, and a sliced side needs it
    # only when the other side cannot be sliced.
    whole: Mapping[PartKey, tuple[str, ...]] = _LazyParts(whole_parts)
    analysed = _analyse_source(source)
    note = problem = ""
    if analysed is None:
        note, problem = "does not parse", _parse(source)[1]
    elif not node.function.isidentifier() or not all(c.isidentifier() for c in node.classes):
        note = "not a Python test function"
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
    found = _Slicer(analysed, node).parts()
    if found is None:
        return OracleSlice(property_id=property_id, path=node.path, status=SliceStatus.ABSENT)
    return OracleSlice(
        property_id=property_id,
        path=node.path,
        status=SliceStatus.SLICED,
        parts={**found, **conftest_parts},
        whole_file=whole,
    )


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


def compare_slices(base: OracleSlice, patch: OracleSlice) -> OracleChange:
    """What differs between a property's oracle on base and on patch. Pure.

    A side that cannot be sliced makes both sides compared whole (the reason says so).
    """
    property_id = patch.property_id
    if base.status is SliceStatus.ABSENT or patch.status is SliceStatus.ABSENT:
        reasons: tuple[ChangeReason, ...] = ()
        if base.status is SliceStatus.ABSENT and patch.status is not SliceStatus.ABSENT:
            reasons = (ChangeReason(kind=ReasonKind.NEW_ON_PATCH, detail=NEW_ON_PATCH_HINT),)
        elif patch.status is SliceStatus.ABSENT and base.status is not SliceStatus.ABSENT:
            reasons = (ChangeReason(kind=ReasonKind.GONE_ON_PATCH),)
        return OracleChange(
            property_id=property_id,
            base_digest=base.digest,
            patch_digest=patch.digest,
            reasons=reasons,
        )
    whole = SliceStatus.WHOLE_FILE in (base.status, patch.status)
    before, after = (base.whole_file, patch.whole_file) if whole else (base.parts, patch.parts)
    detail = _whole_file_detail(base, patch)
    return OracleChange(
        property_id=property_id,
        base_digest=parts_digest(before),
        patch_digest=parts_digest(after),
        reasons=_differences(before, after, whole_detail=detail),
        whole_file=whole,
    )


def _whole_file_detail(base: OracleSlice, patch: OracleSlice) -> str:
    """Why the sides were compared whole: ``does not parse on patch (invalid syntax, line 4)``."""
    if base.note and (base.note, base.problem) == (patch.note, patch.problem):
        sides = [("both sides", base)]
    else:
        sides = [(name, side) for name, side in (("base", base), ("patch", patch)) if side.note]
    return "; ".join(
        f"{side.note} on {name}" + (f" ({side.problem})" if side.problem else "")
        for name, side in sides
    )


def compare_sources(
    base: tuple[str | bytes | None, Mapping[str, str | bytes | None]],
    patch: tuple[str | bytes | None, Mapping[str, str | bytes | None]],
    property_id: str,
) -> OracleChange:
    """:func:`compare_slices` of the slices of ``(module source, conftests)`` on each side."""
    return compare_slices(
        oracle_slice(base[0], base[1], property_id),
        oracle_slice(patch[0], patch[1], property_id),
    )


def _differences(
    before: Mapping[PartKey, Sequence[str]],
    after: Mapping[PartKey, Sequence[str]],
    *,
    whole_detail: str,
) -> tuple[ChangeReason, ...]:
    reasons: dict[str, ChangeReason] = {}
    for key in set(before) | set(after):
        if before.get(key) == after.get(key):
            continue
        kind, subject = key
        if kind in _UNNAMED:
            subject = ""
        reason = ChangeReason(
            kind=kind,
            subject=subject,
            detail=whole_detail if kind is ReasonKind.WHOLE_FILE else "",
        )
        reasons[str(reason)] = reason
    return tuple(sorted(reasons.values(), key=ChangeReason.sort_key))


# ---------------------------------------------------------------- parsing and dumping


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=True, include_attributes=False)


@lru_cache(maxsize=64)
def _parse(source: str | bytes) -> tuple[ast.Module | None, str]:
    """The module's AST, or None and why not (bytes honour a coding cookie). Cached: the
    whole-file part and the analysis read the same tree, which nothing changes."""
    try:
        return ast.parse(source), ""
    except SyntaxError as error:
        return None, f"{error.msg}, line {error.lineno}"
    except (ValueError, RecursionError) as error:
        return None, str(error) or type(error).__name__


@lru_cache(maxsize=256)
def _file_dump(source: str | bytes) -> str:
    """A whole file as one part: its AST when it parses (comments and blank lines do not
    count), else the digest of its bytes."""
    module, _ = _parse(source)
    if module is not None:
        return _dump(module)
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    return "bytes:sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- what the module holds


@dataclass(eq=False)
class _Item:
    """One piece a slice may take: a statement (or one imported name, or a class header)."""

    key: PartKey
    node: ast.AST
    order: tuple[int, int, int]
    bound: frozenset[str] = frozenset()
    fixture: str | None = None  # the fixture name, when this defines a fixture
    always: bool = False  # in every slice of its scope
    injects: bool = False  # its parameters are fixture requests

    @cached_property
    def text(self) -> str:
        return _dump(self.node)

    @cached_property
    def references(self) -> _References:
        return _references(self)


@dataclass(eq=False)
class _Scope:
    """The items of a module or a class body, indexed by the names they bind."""

    items: list[_Item] = field(default_factory=list)
    by_name: dict[str, list[_Item]] = field(default_factory=dict)
    by_fixture: dict[str, list[_Item]] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)

    def add(self, item: _Item) -> None:
        self.items.append(item)
        for name in item.bound:
            self.by_name.setdefault(name, []).append(item)
        if item.fixture is not None:
            self.by_fixture.setdefault(item.fixture, []).append(item)


@dataclass(eq=False)
class _Module:
    scope: _Scope
    star_import: bool
    testless_names: frozenset[str]  # names imported from unittest that define no tests


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


def _import_items(stmt: ast.Import | ast.ImportFrom, key_kind: ReasonKind) -> Iterator[_Item]:
    """One item per imported name, so another name on the same line changes nothing."""
    for index, alias in enumerate(stmt.names):
        bound = (alias.asname or alias.name).split(".")[0]
        node: ast.stmt
        if isinstance(stmt, ast.Import):
            node = ast.Import(names=[alias])
        else:
            node = ast.ImportFrom(module=stmt.module, names=[alias], level=stmt.level)
        yield _Item(
            key=(key_kind, bound),
            node=node,
            order=_order(stmt, index),
            bound=frozenset({bound}),
        )


def _module_items(stmt: ast.stmt) -> Iterator[_Item]:
    setup: PartKey = (ReasonKind.MODULE_SETUP, "")
    if isinstance(stmt, ast.ImportFrom) and (
        stmt.module == "__future__" or any(alias.name == "*" for alias in stmt.names)
    ):
        yield _Item(key=setup, node=stmt, order=_order(stmt), always=True)
    elif isinstance(stmt, ast.Import | ast.ImportFrom):
        yield from _import_items(stmt, ReasonKind.HELPER)
    elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        bound = frozenset({stmt.name})
        fixture = _fixture_name(stmt)
        if fixture is not None:
            yield _Item(
                key=(ReasonKind.FIXTURE, fixture),
                node=stmt,
                order=_order(stmt),
                bound=bound,
                fixture=fixture,
                always=_is_autouse(stmt),
                injects=True,
            )
        elif stmt.name in MODULE_HOOKS or stmt.name.startswith("pytest_"):
            yield _Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True)
        else:
            yield _Item(
                key=(ReasonKind.HELPER, stmt.name), node=stmt, order=_order(stmt), bound=bound
            )
    elif isinstance(stmt, ast.ClassDef):
        yield _Item(
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
            yield _Item(
                key=setup, node=stmt, order=_order(stmt), bound=_bound_anywhere(stmt), always=True
            )
            return
        for name in dict.fromkeys(names):
            yield _Item(
                key=(ReasonKind.HELPER, name),
                node=stmt,
                order=_order(stmt),
                bound=frozenset({name}),
            )


@lru_cache(maxsize=64)
def _analyse_source(source: str | bytes) -> _Module | None:
    """The module's items, once per source text (a module holds many properties)."""
    module = _parse(source)[0]
    return None if module is None else _analyse(module)


def _analyse(module: ast.Module) -> _Module:
    scope = _Scope()
    star = False
    testless: set[str] = set()
    for stmt in module.body:
        if _is_inert(stmt):
            continue
        if isinstance(stmt, ast.ClassDef):
            scope.classes[stmt.name] = stmt  # the last definition wins, as at run time
        if isinstance(stmt, ast.ImportFrom):
            star = star or any(alias.name == "*" for alias in stmt.names)
            if stmt.module == "unittest":
                testless |= {
                    alias.asname or alias.name
                    for alias in stmt.names
                    if alias.name in TESTLESS_BASES
                }
        for item in _module_items(stmt):
            scope.add(item)
    return _Module(scope=scope, star_import=star, testless_names=frozenset(testless))


@lru_cache(maxsize=4096)
def _class_scope(cls: ast.ClassDef, qualname: str, skip: str | None) -> _Scope:
    """A class in the slice: its header, attributes, hooks and fixtures always; methods and
    nested classes only when referenced. ``skip`` is the nested class the node id enters.

    Cached per class node (of a cached analysis), so the many test methods of one class
    share its items and each item's dump and references are computed once; a scope is
    never changed once built."""
    scope = _Scope()
    setup: PartKey = (ReasonKind.CLASS_SETUP, qualname)
    header = copy.copy(cls)  # the class without its body: name, bases, decorators
    header.body = []
    scope.add(_Item(key=setup, node=header, order=_order(cls, -1), always=True))
    for stmt in cls.body:
        if _is_inert(stmt):
            continue
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            bound = frozenset({stmt.name})
            fixture = _fixture_name(stmt)
            if fixture is not None:
                key: PartKey = (ReasonKind.FIXTURE, f"{qualname}.{fixture}")
                scope.add(
                    _Item(
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
                scope.add(_Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True))
            else:
                key = (ReasonKind.HELPER, f"{qualname}.{stmt.name}")
                scope.add(_Item(key=key, node=stmt, order=_order(stmt), bound=bound))
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name != skip:
                key = (ReasonKind.HELPER, f"{qualname}.{stmt.name}")
                scope.add(
                    _Item(key=key, node=stmt, order=_order(stmt), bound=frozenset({stmt.name}))
                )
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for item in _import_items(stmt, ReasonKind.CLASS_SETUP):
                item.key, item.always = setup, True
                scope.add(item)
        else:
            bound = _bound_anywhere(stmt)
            scope.add(_Item(key=setup, node=stmt, order=_order(stmt), bound=bound, always=True))
    return scope


# ---------------------------------------------------------------- slicing one property


@dataclass(frozen=True)
class _References:
    names: frozenset[str]
    attributes: frozenset[str]
    fixtures: frozenset[str]


def _references(item: _Item) -> _References:
    names: set[str] = set()
    attributes: set[str] = set()
    fixtures: set[str] = set()
    for node in ast.walk(item.node):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # usefixtures("db"), getfixturevalue("db"), parametrize("db,user", indirect=True)
            fixtures.update(part.strip() for part in node.value.split(","))
    if item.injects and isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = item.node.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            fixtures.add(arg.arg)
            names.add(arg.arg)
    return _References(frozenset(names), frozenset(attributes), frozenset(fixtures))


class _Slicer:
    """Finds one property's test in an analysed module and closes over what it references."""

    def __init__(self, module: _Module, node: NodeId) -> None:
        self.module = module
        self.node = node
        self.chain: list[_Scope] = []  # every class in the slice, as scopes
        self.chain_classes: set[int] = set()  # ids of their ClassDef nodes
        self.innermost = 0  # where the test's own class (then its bases) starts in the chain
        self.external_base = False  # the class may inherit from a base defined elsewhere

    def parts(self) -> dict[PartKey, tuple[str, ...]] | None:
        """The slice's parts, or None when the test does not exist on this side."""
        tests = self._locate()
        if tests is None:
            return None
        seeds = [item for item in self.module.scope.items if item.always]
        seeds += [item for scope in self.chain for item in scope.items if item.always]
        grouped: dict[PartKey, list[_Item]] = {}
        for item in self._close(tests, seeds):
            grouped.setdefault(item.key, []).append(item)
        return {
            key: tuple(item.text for item in sorted(items, key=lambda i: i.order))
            for key, items in grouped.items()
        }

    # -- finding the test

    def _locate(self) -> list[_Item] | None:
        """The items that define the test (as ``test body``); None when it is absent."""
        scope = self.module.scope
        classes = self.node.classes
        first = classes[0] if classes else self.node.function
        if not classes or first not in scope.classes:
            bound = scope.by_name.get(first)
            if bound:
                return [_as_test(item) for item in bound]
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
        for class_scope in self.chain[self.innermost :]:
            found = class_scope.by_name.get(self.node.function)
            if found:
                return [_as_test(item) for item in found]
        return [] if self.external_base else None

    def _enter(self, cls: ast.ClassDef, qualname: str, *, skip: str | None) -> None:
        """Put ``cls`` and then its module-defined bases (breadth-first) into the chain."""
        pending: list[tuple[ast.ClassDef, str, str | None]] = [(cls, qualname, skip)]
        while pending:
            current, name, skipped = pending.pop(0)
            if id(current) in self.chain_classes:
                continue
            self.chain_classes.add(id(current))
            self.chain.append(_class_scope(current, name, skipped))
            for base in current.bases:
                defined = self._module_class(base)
                if defined is not None:
                    pending.append((defined, defined.name, None))
                elif not self._testless(base):
                    self.external_base = True

    def _module_class(self, base: ast.expr) -> ast.ClassDef | None:
        """The module's class a base names, when that name is bound to classes only."""
        if not isinstance(base, ast.Name):
            return None
        scope = self.module.scope
        cls = scope.classes.get(base.id)
        bound = scope.by_name.get(base.id, [])
        if cls is not None and all(isinstance(item.node, ast.ClassDef) for item in bound):
            return cls
        return None

    def _testless(self, base: ast.expr) -> bool:
        if isinstance(base, ast.Name):
            return base.id == "object" or base.id in self.module.testless_names
        return (
            isinstance(base, ast.Attribute)
            and isinstance(base.value, ast.Name)
            and base.value.id == "unittest"
            and base.attr in TESTLESS_BASES
        )

    # -- closing over references

    def _close(self, tests: list[_Item], seeds: list[_Item]) -> list[_Item]:
        """The test, the seeds and everything they reference, transitively."""
        test_nodes = {id(item.node) for item in tests}
        # The test's own statement is its ``test body`` part, never also a helper.
        seen = {
            id(item)
            for scope in (self.module.scope, *self.chain)
            for item in scope.items
            if id(item.node) in test_nodes
        }
        chosen = list(tests)
        pending = [*seeds]
        for item in tests:
            pending.extend(self._resolve(item.references))
        while pending:
            item = pending.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            chosen.append(item)
            pending.extend(self._resolve(item.references))
        return chosen

    def _resolve(self, refs: _References) -> Iterator[_Item]:
        scope = self.module.scope
        for name in refs.names:
            for item in scope.by_name.get(name, ()):
                # A class of the chain is in the slice by its parts, never whole.
                if id(item.node) not in self.chain_classes:
                    yield item
        for name in refs.fixtures:
            yield from scope.by_fixture.get(name, ())
        for name in refs.names | refs.attributes:
            for class_scope in self.chain:
                yield from class_scope.by_name.get(name, ())


def _as_test(item: _Item) -> _Item:
    return _Item(
        key=(ReasonKind.TEST_BODY, ""),
        node=item.node,
        order=item.order,
        bound=item.bound,
        injects=isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef),
    )
