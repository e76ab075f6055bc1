"""Is a drafted property worth trusting? The static half (seed 001, step 2): a lint of
the property's test function, read with ``ast``, before any container starts.

``static_findings(source, node)`` names every reason to refuse the property: a
constant assertion, a comparison of an expression with itself, no assertion at all,
or no assertion fed by a call of the code under test. The checks are deliberately
syntactic: they refuse what cannot be a property and leave the rest to the mutant,
which is the real arbiter (``orchestrator.core.acceptance``).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.acceptance import Outcome
from orchestrator.core.pytest_command import NodeId, split_node_id
from orchestrator.errors import InputError

# The fixed order findings are reported in; the first one is the refusal code.
STATIC_ORDER: tuple[Outcome, ...] = (
    Outcome.CONSTANT_ASSERTION,
    Outcome.SELF_COMPARISON,
    Outcome.NO_ASSERTION,
    Outcome.NO_CALL_UNDER_TEST,
)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One reason to refuse a property, with the line it was found on."""

    code: Outcome
    line: int
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code.value, "line": self.line, "detail": self.detail}


def parse_property_id(node_id: str) -> NodeId:
    """``path::test``, ``path::Class::test`` or ``path::test[param]``: a test function in a
    Python file, the only kind of property the lint can read; anything else is an
    ``InputError``."""
    node = split_node_id(node_id)
    if not node.names_a_test:
        raise InputError(f"property {node_id!r}: expected PATH::FUNCTION (a pytest node id)")
    if not node.path.endswith(".py"):
        raise InputError(f"property {node_id!r}: {node.path!r} is not a Python file")
    if not all(name.isidentifier() for name in node.names):
        raise InputError(f"property {node_id!r}: {'::'.join(node.names)!r} is not a function name")
    return node


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _parse(source: str, path: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as error:
        raise InputError(f"{path}: not valid Python (line {error.lineno})") from None


def _scopes(module: ast.Module, node: NodeId) -> list[list[ast.stmt]]:
    """The module's body, then the body of each class the node id names, outermost first;
    a class that is not there is an ``InputError``."""
    scopes = [module.body]
    for class_name in node.classes:
        found = next(
            (n for n in scopes[-1] if isinstance(n, ast.ClassDef) and n.name == class_name), None
        )
        if found is None:
            raise InputError(f"{node.path}: no class {class_name!r}")
        scopes.append(found.body)
    return scopes


def _find(scopes: Sequence[list[ast.stmt]], node: NodeId) -> FunctionNode:
    for statement in scopes[-1]:
        if isinstance(statement, FunctionNode) and statement.name == node.function:
            return statement
    raise InputError(f"{node.path}: no test function {node.qualname!r}")


def find_function(source: str, node: NodeId) -> FunctionNode:
    """The test function's definition; a missing one or bad syntax is an ``InputError``."""
    return _find(_scopes(_parse(source, node.path), node), node)


def _asserts(function: FunctionNode) -> bool:
    return any(
        isinstance(inner, ast.Assert)
        or (
            isinstance(inner, ast.Call) and (_is_unittest_assert(inner) or _is_pytest_raises(inner))
        )
        for inner in ast.walk(function)
    )


def _calls_code(function: FunctionNode) -> bool:
    """Does a helper call anything beyond builtins, harness modules and assertions?"""
    for inner in ast.walk(function):
        if not isinstance(inner, ast.Call) or _is_unittest_assert(inner):
            continue
        if _is_pytest_raises(inner):
            continue
        func = inner.func
        if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS | _BUILTIN_EXCEPTIONS:
            continue
        if _root_name(func) in _HARNESS_ROOTS:
            continue
        return True
    return False


def _assertion_helpers(scopes: Sequence[list[ast.stmt]]) -> dict[str, bool]:
    """Helpers that assert: module functions (``name``) and methods of the test's classes
    (``self.name``), each with whether it calls code itself (beyond builtins).

    A call of one inside a test is an assertion on its arguments; when the helper calls
    code itself, the assertion is fed by that call even with literal arguments.
    """
    helpers: dict[str, bool] = {}
    for depth, body in enumerate(scopes):
        prefix = "self." if depth else ""
        helpers.update(
            (f"{prefix}{statement.name}", _calls_code(statement))
            for statement in body
            if isinstance(statement, FunctionNode)
            and not statement.name.startswith("test")
            and _asserts(statement)
        )
    return helpers


def static_findings(source: str, node: NodeId) -> tuple[Finding, ...]:
    """Every static reason to refuse the property, in ``STATIC_ORDER`` then line order."""
    scopes = _scopes(_parse(source, node.path), node)
    analysis = _Analysis(_find(scopes, node), source, helpers=_assertion_helpers(scopes))
    findings = analysis.findings()
    order = {code: index for index, code in enumerate(STATIC_ORDER)}
    return tuple(sorted(findings, key=lambda f: (order[f.code], f.line, f.detail)))


# --------------------------------------------------------------------------- analysis

# Calls that compute on values without being the code under test.
_PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "bytes", "callable", "dict", "divmod", "enumerate",
        "filter", "float", "format", "frozenset", "getattr", "hasattr", "hash", "id",
        "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min",
        "next", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple",
        "type", "zip", "range", "print", "vars", "ord", "chr",
    }
)  # fmt: skip
_BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
# Modules and fixtures whose calls are harness or standard library, not code under test.
_HARNESS_ROOTS = frozenset(
    {
        "pytest", "deps", "math", "json", "re", "copy", "itertools", "functools",
        "operator", "collections", "dataclasses", "hypothesis", "st", "strategies",
        "string", "textwrap", "decimal", "fractions", "statistics",
    }
)  # fmt: skip
_UNITTEST_EQUALITY = frozenset(
    {"assertEqual", "assertEquals", "assertIs", "assertAlmostEqual", "assertCountEqual",
     "assertDictEqual", "assertListEqual", "assertSetEqual", "assertTupleEqual",
     "assertSequenceEqual", "assertMultiLineEqual", "assertGreaterEqual", "assertLessEqual",
     "assertNotEqual", "assertIsNot", "assertNotAlmostEqual", "assertGreater", "assertLess"}
)  # fmt: skip
_MAX_SUBSTITUTION_DEPTH = 8


@dataclass(frozen=True, kw_only=True)
class _Assertion:
    node: ast.Assert | ast.Call
    line: int
    operands: tuple[ast.expr, ...]  # what the assertion inspects
    text: str


def _root_name(expr: ast.expr) -> str | None:
    """``a`` for ``a``, ``a.b.c``, ``a[0].b`` and ``a.b(...)``."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Attribute | ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call):
            expr = expr.func
        else:
            return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_UNITTEST_RAISES = {"assertRaises": 1, "assertWarns": 1, "assertRaisesRegex": 2,
                    "assertWarnsRegex": 2}  # fmt: skip


def _raises_callable_index(call: ast.expr) -> int | None:
    """For an exception check, where its inline callable sits; None if not a check.

    ``pytest.raises(E, f, *args)`` and ``self.assertRaises(E, f, *args)``: 1;
    ``self.assertRaisesRegex(E, pattern, f, *args)``: 2.
    """
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr in ("raises", "warns") and _root_name(func.value) == "pytest":
            return 1
        if func.attr in _UNITTEST_RAISES and _root_name(func.value) == "self":
            return _UNITTEST_RAISES[func.attr]
        return None
    return 1 if isinstance(func, ast.Name) and func.id == "raises" else None


def _is_pytest_raises(call: ast.expr) -> bool:
    """``pytest.raises``/``pytest.warns`` or unittest's ``assertRaises`` family."""
    return _raises_callable_index(call) is not None


def _is_unittest_assert(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
        and func.attr.startswith("assert")
    )


class _Constant:
    """Evaluates an expression made only of literals, without executing code."""

    UNKNOWN = object()

    @classmethod
    def is_constant(cls, expr: ast.expr) -> bool:
        allowed = (
            ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp,
            ast.BoolOp, ast.Compare, ast.JoinedStr, ast.FormattedValue, ast.expr_context,
            ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
        )  # fmt: skip
        return all(isinstance(node, allowed) for node in ast.walk(expr))

    @classmethod
    def truth(cls, expr: ast.expr) -> bool | None:
        """True/False when the truth value is evident, None when it is not."""
        if isinstance(expr, ast.Constant):
            return bool(expr.value)
        if isinstance(expr, ast.Tuple | ast.List | ast.Set):
            return bool(expr.elts)
        if isinstance(expr, ast.Dict):
            return bool(expr.keys)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = cls.truth(expr.operand)
            return None if inner is None else not inner
        if (
            isinstance(expr, ast.UnaryOp)
            and isinstance(expr.op, ast.USub | ast.UAdd)
            and isinstance(expr.operand, ast.Constant)
            and isinstance(expr.operand.value, int | float | complex)
        ):
            return bool(expr.operand.value)
        if isinstance(expr, ast.BoolOp):
            values = [cls.truth(value) for value in expr.values]
            if isinstance(expr.op, ast.And):
                if any(v is False for v in values):
                    return False
                return True if all(v is True for v in values) else None
            if any(v is True for v in values):
                return True
            return False if all(v is False for v in values) else None
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            left, right = expr.left, expr.comparators[0]
            if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
                return cls._compare(expr.ops[0], left.value, right.value)
        return None

    @staticmethod
    def _compare(op: ast.cmpop, left: object, right: object) -> bool | None:
        try:
            if isinstance(op, ast.Eq):
                return bool(left == right)
            if isinstance(op, ast.NotEq):
                return bool(left != right)
            if isinstance(op, ast.Is):
                return left is right
            if isinstance(op, ast.IsNot):
                return left is not right
        except Exception:  # a literal's __eq__ never raises, but stay total
            return None
        return None


def _truthy_short_circuit(expr: ast.expr) -> bool:
    """``x or True``: an ``or`` with an evidently true literal can never fail."""
    return (
        isinstance(expr, ast.BoolOp)
        and isinstance(expr.op, ast.Or)
        and any(
            _Constant.is_constant(value) and _Constant.truth(value) is True for value in expr.values
        )
    )


@dataclass(frozen=True, kw_only=True)
class _Binding:
    value: ast.expr
    line: int


def _binding_targets(node: ast.AST) -> tuple[list[ast.expr], ast.expr | None]:
    """(targets, value) of a statement or clause that binds names; value None if opaque."""
    if isinstance(node, ast.Assign):
        return list(node.targets), node.value
    if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        return [node.target], node.value
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return [node.target], node.iter
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars], node.context_expr
    return [], None


class _Analysis:
    """Everything the four static checks need to know about one test function."""

    def __init__(
        self, function: FunctionNode, source: str, *, helpers: Mapping[str, bool] | None = None
    ) -> None:
        self.function = function
        self.lines = source.splitlines()
        self.helpers: Mapping[str, bool] = helpers or {}
        self.nodes = [node for statement in function.body for node in ast.walk(statement)]
        self.bindings = self._single_bindings()
        self.assertions = list(self._assertions())
        self.raises_blocks = list(self._raises_blocks())
        self.tainted = self._taint()

    # -- collection

    def _text(self, node: ast.expr | ast.stmt) -> str:
        """The first source line of ``node`` (offsets are UTF-8 byte offsets)."""
        if 1 <= node.lineno <= len(self.lines):
            line = self.lines[node.lineno - 1].encode("utf-8")
            end = node.end_col_offset if node.end_lineno == node.lineno else None
            text = line[node.col_offset : end].decode("utf-8", errors="replace").strip()
            if text:
                return text
        return ast.unparse(node).splitlines()[0]

    def _assertions(self) -> Iterator[_Assertion]:
        for node in self.nodes:
            if isinstance(node, ast.Assert):
                yield _Assertion(
                    node=node, line=node.lineno, operands=(node.test,), text=self._text(node)
                )
            elif (
                isinstance(node, ast.Call)
                and (_is_unittest_assert(node) or self._is_helper_assert(node))
                and not _is_pytest_raises(node)  # exception checks: see _raises_blocks
            ):
                operands = (*node.args, *(keyword.value for keyword in node.keywords))
                yield _Assertion(
                    node=node, line=node.lineno, operands=operands, text=self._text(node)
                )

    def _helper_name(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            name = f"{func.value.id}.{func.attr}"
        else:
            return None
        return name if name in self.helpers else None

    def _is_helper_assert(self, call: ast.Call) -> bool:
        return self._helper_name(call) is not None

    def _helper_calls_code(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        name = self._helper_name(node)
        return name is not None and self.helpers[name]

    def _raises_blocks(self) -> Iterator[list[ast.AST]]:
        """What each exception check watches: a with-block's body or the inline call."""
        for node in self.nodes:
            if isinstance(node, ast.With | ast.AsyncWith):
                if any(_is_pytest_raises(item.context_expr) for item in node.items):
                    yield list(node.body)
            elif isinstance(node, ast.Call):
                index = _raises_callable_index(node)
                if index is not None and len(node.args) > index:
                    # pytest.raises(Error, function, *args): the call under test is inline.
                    inline = ast.Call(
                        func=node.args[index], args=node.args[index + 1 :], keywords=node.keywords
                    )
                    yield [inline]

    def _single_bindings(self) -> dict[str, _Binding]:
        """Names bound exactly once, by ``name = expr``: what the name stands for."""
        counts: dict[str, int] = {}
        bindings: dict[str, _Binding] = {}
        for node in self.nodes:
            targets, value = _binding_targets(node)
            for target in targets:
                for name in _names(target):
                    counts[name] = counts.get(name, 0) + 1
                    if (
                        isinstance(target, ast.Name)
                        and value is not None
                        and not isinstance(
                            node, ast.For | ast.AsyncFor | ast.comprehension | ast.withitem
                        )
                    ):
                        bindings[name] = _Binding(value=value, line=getattr(node, "lineno", 0))
        return {name: binding for name, binding in bindings.items() if counts[name] == 1}

    # -- calls and taint

    def _is_call_under_test(self, call: ast.Call) -> bool:
        if _is_pytest_raises(call) or _is_unittest_assert(call) or self._is_helper_assert(call):
            return False
        func = call.func
        if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS | _BUILTIN_EXCEPTIONS:
            return False
        root = _root_name(func)
        # A harness root counts unless the test rebinds that name itself.
        return not (root in _HARNESS_ROOTS and root not in self.bindings)

    def _calls_under_test(self, node: ast.AST) -> list[ast.Call]:
        return [
            n for n in ast.walk(node) if isinstance(n, ast.Call) and self._is_call_under_test(n)
        ]

    def _derived_from(self) -> dict[str, set[str]]:
        """name -> names its value was computed from (``clock = deps.clock()``: deps)."""
        derived: dict[str, set[str]] = {}
        for node in self.nodes:
            targets, value = _binding_targets(node)
            if value is None:
                continue
            for target in targets:
                for name in _names(target):
                    derived.setdefault(name, set()).update(_names(value) - {name})
        return derived

    def _taint(self) -> set[str]:
        """Names holding an output or an effect of a call under test (a fixpoint).

        A name is tainted when it is bound from an expression that calls the code under
        test or reads a tainted name, or when it (or anything it was derived from) was
        handed to a call under test: a clock or spy passed in carries the call's effect,
        and so does the ``deps`` fixture it came from.
        """
        derived = self._derived_from()
        tainted: set[str] = set()

        def feeds(expr: ast.AST) -> bool:
            return bool(self._calls_under_test(expr)) or bool(_names(expr) & tainted)

        def taint_with_origins(names: Iterable[str]) -> None:
            pending = list(names)
            while pending:
                name = pending.pop()
                if name not in tainted:
                    tainted.add(name)
                    pending.extend(derived.get(name, ()))

        while True:
            before = len(tainted)
            for node in self.nodes:
                if isinstance(node, ast.Call):
                    arguments = (*node.args, *(keyword.value for keyword in node.keywords))
                    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                    if self._is_call_under_test(node):
                        touched = set().union(*(_names(arg) for arg in arguments))
                        if receiver is not None:
                            touched |= _names(receiver)  # a method may change its object
                        taint_with_origins(touched)
                    elif receiver is not None and any(feeds(arg) for arg in arguments):
                        # items.append(result): the receiver now holds an output.
                        root = _root_name(receiver)
                        if root is not None:
                            taint_with_origins([root])
                if isinstance(node, ast.Try | ast.TryStar) and self._calls_under_test(
                    ast.Module(body=node.body, type_ignores=[])
                ):
                    # ``except E as error``: the exception is an effect of the calls tried.
                    tainted.update(h.name for h in node.handlers if h.name is not None)
                targets, value = _binding_targets(node)
                if value is not None and feeds(value):
                    for target in targets:
                        tainted.update(_names(target))
            if len(tainted) == before:
                return tainted

    # -- self comparison

    def _canonical(self, expr: ast.expr) -> tuple[str, set[str]]:
        """A dump of ``expr`` with singly-bound names replaced by what they stand for."""
        substitute = _Substitute(self.bindings)
        rewritten = substitute.visit(_copy(expr))
        return _dump(rewritten), substitute.used

    def _same(self, left: ast.expr, right: ast.expr, line: int) -> bool:
        """Equal expressions, or names standing for the same fresh return.

        ``n = len(rows()); add(row); assert len(rows()) == n`` is not a self
        comparison: a call under test ran between the binding and the assertion.
        """
        if _dump(left) == _dump(right):
            return True
        left_dump, left_used = self._canonical(left)
        right_dump, right_used = self._canonical(right)
        if left_dump != right_dump:
            return False
        used = left_used | right_used
        if not used:
            return True
        first = min(self.bindings[name].line for name in used)
        inside_bindings = {
            id(node) for name in used for node in ast.walk(self.bindings[name].value)
        }
        return not any(
            first < node.lineno < line and id(node) not in inside_bindings
            for node in self.nodes
            if isinstance(node, ast.Call) and self._is_call_under_test(node)
        )

    def _self_compared(self, expr: ast.expr, line: int) -> bool:
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self._self_compared(expr.operand, line)
        if isinstance(expr, ast.BoolOp):
            return any(self._self_compared(value, line) for value in expr.values)
        if isinstance(expr, ast.Compare):
            operands = [expr.left, *expr.comparators]
            return any(
                self._same(operands[i], operands[j], line)
                for i in range(len(operands))
                for j in range(i + 1, len(operands))
            )
        if isinstance(expr, ast.Call) and len(expr.args) >= 2:
            func = expr.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _UNITTEST_EQUALITY or name in ("isclose", "eq"):
                return self._same(expr.args[0], expr.args[1], line)
        return False

    # -- findings

    def _trivial(self, assertion: _Assertion) -> Finding | None:
        """The constant or self-comparison finding of one assertion, if any."""
        node = assertion.node
        if isinstance(node, ast.Assert):
            test = node.test
            if _Constant.is_constant(test) and _Constant.truth(test) is not False:
                detail = f"{assertion.text!r} can never fail"
                return Finding(code=Outcome.CONSTANT_ASSERTION, line=assertion.line, detail=detail)
            if _truthy_short_circuit(test):
                detail = f"{assertion.text!r} is true whatever the code does"
                return Finding(code=Outcome.CONSTANT_ASSERTION, line=assertion.line, detail=detail)
        else:
            test = node
        if self._self_compared(test, assertion.line):
            detail = f"{assertion.text!r} compares an expression with itself"
            return Finding(code=Outcome.SELF_COMPARISON, line=assertion.line, detail=detail)
        return None

    def findings(self) -> list[Finding]:
        found: list[Finding] = []
        meaningful: list[_Assertion] = []
        for assertion in self.assertions:
            finding = self._trivial(assertion)
            if finding is not None:
                found.append(finding)
            elif not (
                isinstance(assertion.node, ast.Assert)
                and _Constant.is_constant(assertion.node.test)
            ):  # ``assert False`` marks an unreachable branch: it inspects nothing
                meaningful.append(assertion)
        if not self.assertions and not self.raises_blocks:
            detail = f"{self.function.name} has no assert and no pytest.raises"
            found.append(
                Finding(code=Outcome.NO_ASSERTION, line=self.function.lineno, detail=detail)
            )
            return found
        fed = any(
            self._helper_calls_code(assertion.node)
            or any(
                self._calls_under_test(operand) or (_names(operand) & self.tainted)
                for operand in assertion.operands
            )
            for assertion in meaningful
        ) or any(
            self._calls_under_test(statement) for body in self.raises_blocks for statement in body
        )
        if not fed:
            detail = (
                f"no assertion in {self.function.name} inspects an output or an effect "
                "of a call of the code under test"
            )
            found.append(
                Finding(code=Outcome.NO_CALL_UNDER_TEST, line=self.function.lineno, detail=detail)
            )
        return found


def _dump(expr: ast.AST) -> str:
    return ast.dump(expr, annotate_fields=False, include_attributes=False)


def _copy(expr: ast.expr) -> ast.expr:
    copied: ast.expr = ast.parse(ast.unparse(expr), mode="eval").body
    return copied


class _Substitute(ast.NodeTransformer):
    """Replaces singly-bound names by their value, recursively, recording which."""

    def __init__(self, bindings: dict[str, _Binding], depth: int = 0) -> None:
        self.bindings = bindings
        self.depth = depth
        self.used: set[str] = set()

    def visit_Name(self, node: ast.Name) -> ast.AST:
        binding = self.bindings.get(node.id)
        if binding is None or self.depth >= _MAX_SUBSTITUTION_DEPTH:
            return node
        inner = _Substitute(self.bindings, self.depth + 1)
        rewritten: ast.AST = inner.visit(_copy(binding.value))
        self.used |= {node.id} | inner.used
        return rewritten
