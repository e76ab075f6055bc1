"""A property's oracle: the code that decides its verdict, sliced out of its test module.

Pure. Given the source of a test module, the ``conftest.py`` files above it and a property's
node id, :func:`oracle_slice` returns the property's *oracle slice* (lanes.md row 2):

- the test function, with its decorators (parametrize marks included); a node id's
  ``[param]`` maps to the function;
- for a method: every class on the node id's path and every base class, each with its
  header (name, bases, decorators), class attributes, set-up and tear-down methods and the
  fixtures it defines; methods the slice calls through an attribute (``self.make()``) are
  helpers; a test method inherited from a base class is found there. A base defined in
  another module of the project (a mixin in ``tests/__init__.py``) is followed through the
  import that binds its name (:class:`ProjectModules` holds the side's other modules), with
  the names of its module it references and that module's statements that run on import;
- every module-level name the slice references, transitively: helpers, constants,
  classes, fixtures (a test's and a fixture's parameters name fixtures; so do
  ``usefixtures``/``getfixturevalue`` strings), and the import that binds a referenced
  name (one imported name at a time, so importing something else on the same line
  changes nothing; each reduced to what it binds, so ``import a.b`` where ``import a``
  was binds nothing new, and the submodule it loads counts only for a slice that names
  ``a.b``);
- what runs for every test of the module: ``pytestmark``, ``pytest_plugins``,
  ``setup_module``/``teardown_module`` and the other xunit and hook functions, autouse
  fixtures, ``from x import *`` and ``from __future__`` imports, and every module-level
  statement that is neither a definition nor an import (``sys.path.insert(...)``,
  ``if``/``try`` blocks); docstrings and ``if __name__ == "__main__":`` blocks run
  nothing under pytest and are left out;
- every ``conftest.py`` above the module, whole.

Conservative where the source cannot tell: a name bound by a star import is unknown, so
star imports are in every slice; a test not found in a module that has a star import (or
in a class with a base the source cannot follow) is sliced without its body, so the slice
still changes when the body appears or goes; a local variable that shadows a module-level name
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
from typing import Any

from orchestrator.core.digest import digest
from orchestrator.core.imports import (
    absolute_module,
    binding,
    bound_name,
    loaded_submodules,
    module_paths,
)
from orchestrator.core.pytest_command import NodeId, split_node_id

SLICE_VERSION = "oracle-slice/1"
NEW_ON_PATCH_HINT = "replay with --tests-from patch to ask whether it fails on base"
# A test on one side only though both sides had one revision's test files (--tests-from):
# the code under test, not the tests, made it.
SAME_TEST_FILES = "collected on one side only under the same test files"

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
# How many re-exports (``from .mixins import Mixin`` in a package) a base is followed through.
MAX_REEXPORTS = 8


@dataclass(frozen=True, kw_only=True)
class ProjectModules:
    """The other modules of one side's tree, for test classes whose bases are imported.

    ``files`` are the tree's paths (an import resolves as :mod:`orchestrator.core.imports`
    says); ``sources`` the modules read so far (path -> text, None: no such file). A path
    missing from ``sources`` is one the slice would read (:func:`inherited_modules`).
    """

    files: frozenset[str] = frozenset()
    sources: Mapping[str, str | bytes | None] = field(default_factory=dict)
    # The bases already resolved against these modules (the many tests of one class ask
    # the same question); never part of what the value is.
    resolved: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


NO_MODULES = ProjectModules()


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
    modules: ProjectModules = NO_MODULES,
) -> OracleSlice:
    """The oracle slice of ``property_id`` given its module's source (None: no such file),
    the source of each ``conftest.py`` above it (path -> source, None: absent) and the
    project's other modules its classes may inherit from. Pure."""
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
    found = _Slicer(analysed, node, _Resolver(modules, memo=True)).parts()
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
    modules: tuple[ProjectModules, ProjectModules] = (NO_MODULES, NO_MODULES),
) -> OracleChange:
    """:func:`compare_slices` of the slices of ``(module source, conftests)`` on each side
    (``modules``: each side's other modules)."""
    return compare_slices(
        oracle_slice(base[0], base[1], property_id, modules[0]),
        oracle_slice(patch[0], patch[1], property_id, modules[1]),
    )


def collected_on_one_side(
    change: OracleChange, *, on_base: bool, on_patch: bool, tests_from: str | None = None
) -> OracleChange:
    """The oracle as collection saw it: a test pytest collected on one side only exists on
    that side only, whatever its source seemed to say (a base class the source could not
    follow), so it has no digest on the other side. Pure."""
    if on_base == on_patch:
        return change
    if on_patch:
        detail = SAME_TEST_FILES if tests_from else NEW_ON_PATCH_HINT
        reason = ChangeReason(kind=ReasonKind.NEW_ON_PATCH, detail=detail)
        return OracleChange(
            property_id=change.property_id,
            base_digest=None,
            patch_digest=change.patch_digest or change.base_digest,
            reasons=(reason,),
        )
    return OracleChange(
        property_id=change.property_id,
        base_digest=change.base_digest or change.patch_digest,
        patch_digest=None,
        reasons=(
            ChangeReason(
                kind=ReasonKind.GONE_ON_PATCH, detail=SAME_TEST_FILES if tests_from else ""
            ),
        ),
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
    import_binding: bool = False  # an import reduced to what it binds (equal ones are one)
    submodule: str | None = None  # ``a.b`` for ``import a.b``: in the slice when it names a.b

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
    submodules: dict[str, list[_Item]] = field(default_factory=dict)

    def add(self, item: _Item) -> None:
        self.items.append(item)
        for name in item.bound:
            self.by_name.setdefault(name, []).append(item)
        if item.fixture is not None:
            self.by_fixture.setdefault(item.fixture, []).append(item)
        if item.submodule is not None:
            self.submodules.setdefault(item.submodule, []).append(item)


@dataclass(eq=False)
class _Module:
    scope: _Scope
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


def _import_items(stmt: ast.Import | ast.ImportFrom, key_kind: ReasonKind) -> Iterator[_Item]:
    """One item per imported name, so another name on the same line changes nothing, each
    reduced to what it binds (``import a.b`` binds ``a`` as ``import a`` does); the
    submodules ``import a.b`` loads are items of their own, taken when the slice names
    ``a.b``."""
    for index, alias in enumerate(stmt.names):
        bound = bound_name(alias, from_import=isinstance(stmt, ast.ImportFrom))
        yield _Item(
            key=(key_kind, bound),
            node=binding(stmt, alias),
            order=_order(stmt, index),
            bound=frozenset({bound}),
            import_binding=True,
        )
        for submodule in loaded_submodules(stmt, alias):
            yield _Item(
                key=(key_kind, submodule),
                node=ast.Import(names=[ast.alias(name=submodule, asname=None)]),
                order=_order(stmt, index),
                import_binding=True,
                submodule=submodule,
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
    return _Module(
        scope=scope, star_import=star, testless_names=frozenset(testless), star_imports=tuple(stars)
    )


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
    dotted: frozenset[str] = frozenset()  # ``a.b``, ``a.b.c`` for ``a.b.c`` (a a name)


def _dotted_parts(node: ast.expr) -> list[str] | None:
    """``a.b.C`` as ``["a", "b", "C"]``; None for anything but names and attributes."""
    attributes: list[str] = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(attributes)]


def _references(item: _Item) -> _References:
    names: set[str] = set()
    attributes: set[str] = set()
    fixtures: set[str] = set()
    dotted: set[str] = set()
    for node in ast.walk(item.node):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
            parts = _dotted_parts(node)
            if parts is not None:  # inner attributes are walked too: every prefix counts
                dotted.add(".".join(parts))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # usefixtures("db"), getfixturevalue("db"), parametrize("db,user", indirect=True)
            fixtures.update(part.strip() for part in node.value.split(","))
    if item.injects and isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = item.node.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            fixtures.add(arg.arg)
            names.add(arg.arg)
    return _References(
        frozenset(names), frozenset(attributes), frozenset(fixtures), frozenset(dotted)
    )


# A module where a class of the slice is defined: its path and its analysis.
_Home = tuple[str, _Module]


class _Resolver:
    """Finds the class a base names, in its own module or, through the imports that bind
    it, in another module of the project (as ``sys.path`` would load it)."""

    def __init__(self, modules: ProjectModules, *, memo: bool = False) -> None:
        self.modules = modules
        self.memo = memo  # keep answers in ``modules.resolved`` (what was read is not tracked)
        self.wanted: set[str] = set()  # modules it would read that it was not given
        self.used: set[str] = set()  # modules it read a class from

    def analysed(self, path: str) -> _Module | None:
        sources = self.modules.sources
        if path not in sources:
            self.wanted.add(path)
            return None
        source = sources[path]
        return None if source is None else _analyse_source(source)

    def base(
        self, base: ast.expr, home: _Home, depth: int = 0
    ) -> tuple[ast.ClassDef, _Home] | None:
        """The class ``base`` names in ``home``'s scope; None when the source cannot tell."""
        if depth or not self.memo:
            return self._base(base, home, depth)
        key = (home[0], home[1], base)
        memo = self.modules.resolved
        if key not in memo:
            memo[key] = self._base(base, home, depth)
        found: tuple[ast.ClassDef, _Home] | None = memo[key]
        return found

    def _base(self, base: ast.expr, home: _Home, depth: int) -> tuple[ast.ClassDef, _Home] | None:
        parts = _dotted_parts(base)
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
    ) -> tuple[ast.ClassDef, _Home] | None:
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


def may_inherit_from_elsewhere(source: str | bytes | None) -> bool:
    """Does a class of this module name a base its imports bind (or a star import may)?
    Only then are the project's other modules worth reading for its slices. Pure."""
    analysed = None if source is None else _analyse_source(source)
    if analysed is None:
        return False
    scope = analysed.scope
    for cls in scope.classes.values():
        for base in cls.bases:
            parts = _dotted_parts(base)
            if parts is None or _testless(base, analysed):
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
    analysed = _analyse_source(source)
    if analysed is None:
        return None
    found = _Resolver(modules).base(base, (path, analysed))
    if found is None or found[1][0] == path:
        return None
    return found[1][0], found[0].name


def inherited_modules(path: str, modules: ProjectModules) -> tuple[frozenset[str], frozenset[str]]:
    """The other project modules the classes of the module at ``path`` inherit from,
    transitively: those ``modules.sources`` holds and those it would still have to read.
    A caller reads the second set and asks again until it is empty. Pure."""
    source = modules.sources.get(path)
    analysed = None if source is None else _analyse_source(source)
    if analysed is None:
        return frozenset(), frozenset()
    resolver = _Resolver(modules)
    pending: list[tuple[ast.ClassDef, _Home]] = [
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


def _testless(base: ast.expr, module: _Module) -> bool:
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
_Placed = tuple[_Item, _Home]


class _Slicer:
    """Finds one property's test in an analysed module and closes over what it references."""

    def __init__(self, module: _Module, node: NodeId, resolver: _Resolver) -> None:
        self.module = module
        self.node = node
        self.home: _Home = (node.path, module)
        self.resolver = resolver
        self.chain: list[_Scope] = []  # every class in the slice, as scopes
        self.chain_homes: list[_Home] = []  # the module each of them is defined in
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
        grouped: dict[PartKey, list[_Item]] = {}
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
        pending: list[tuple[ast.ClassDef, str, str | None, _Home]] = [
            (cls, qualname, skip, self.home)
        ]
        while pending:
            current, name, skipped, home = pending.pop(0)
            if id(current) in self.chain_classes:
                continue
            self.chain_classes.add(id(current))
            self.chain.append(_class_scope(current, name, skipped))
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
                elif not _testless(base, home[1]):
                    self.external_base = True

    # -- closing over references

    def _close(self, tests: list[_Placed], seeds: list[_Placed]) -> Iterator[tuple[_Item, PartKey]]:
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

    def _key(self, item: _Item, home: _Home) -> PartKey:
        """A name of another module is keyed by its path; its classes' parts already are."""
        kind, subject = item.key
        if home[0] == self.node.path or kind is ReasonKind.CLASS_SETUP or "::" in subject:
            return item.key
        return kind, f"{home[0]}::{subject}" if subject else home[0]

    def _resolve(self, refs: _References, home: _Home) -> Iterator[_Placed]:
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


def _texts(items: Sequence[_Item]) -> tuple[str, ...]:
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


def _as_test(item: _Item) -> _Item:
    return _Item(
        key=(ReasonKind.TEST_BODY, ""),
        node=item.node,
        order=item.order,
        bound=item.bound,
        injects=isinstance(item.node, ast.FunctionDef | ast.AsyncFunctionDef),
    )
