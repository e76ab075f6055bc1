"""The oracle slice of one property (lanes.md row 2): what is in it, what changes it, and
what does not, on tricky modules."""

from __future__ import annotations

import ast
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.oracle import (
    NEW_ON_PATCH_HINT,
    ReasonKind,
    SliceStatus,
    compare_slices,
    compare_sources,
    oracle_slice,
)
from orchestrator.core.pytest_command import conftest_paths, split_node_id

PATH = "tests/test_mod.py"
CONFTESTS = {"conftest.py": "", "tests/conftest.py": "import pytest\n"}


def module(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def reasons(base: str | None, patch: str | None, test: str, **conftests: str | None) -> list[str]:
    """The change reasons of ``PATH::test`` between two versions of the module."""
    change = changes(base, patch, test, **conftests)
    assert change.changed is bool(change.reasons)
    return list(change.reason_texts)


def changes(base: str | None, patch: str | None, test: str, **patch_conftests: str | None):
    after = {**CONFTESTS, **{k.replace("__", "/") + ".py": v for k, v in patch_conftests.items()}}
    return compare_sources((base, CONFTESTS), (patch, after), f"{PATH}::{test}")


def digest_of(text: str | None, test: str) -> str | None:
    return oracle_slice(text, CONFTESTS, f"{PATH}::{test}").digest


# --- node ids and conftest paths -----------------------------------------------------------


@pytest.mark.parametrize(
    ("node_id", "classes", "function", "param"),
    [
        ("tests/t.py::test_x", (), "test_x", ""),
        ("tests/t.py::C::test_x[a-1]", ("C",), "test_x", "[a-1]"),
        ("t.py::Outer::Inner::test_y[x::y]", ("Outer", "Inner"), "test_y", "[x::y]"),
        ("t.py", (), "", ""),
    ],
)
def test_a_node_id_splits_into_path_classes_function_and_param(node_id, classes, function, param):
    node = split_node_id(node_id)
    assert (node.classes, node.function, node.params) == (classes, function, param)
    assert node.path == node_id.split("::")[0]


def test_conftest_paths_are_every_folder_above_the_module_outermost_first():
    assert conftest_paths("tests/unit/test_x.py") == (
        "conftest.py",
        "tests/conftest.py",
        "tests/unit/conftest.py",
    )
    assert conftest_paths("test_x.py") == ("conftest.py",)


# --- what a slice holds ----------------------------------------------------------------------

NEIGHBOURS = module(
    """
    import pytest
    from lib import add, sub

    LIMIT = 10


    def only_a(x):
        return add(x, 1)


    def test_a():
        assert only_a(1) < LIMIT


    def test_b():
        assert sub(3, 1) == 2
    """
)


def test_an_unchanged_module_has_equal_digests_and_no_reasons():
    change = changes(NEIGHBOURS, NEIGHBOURS, "test_a")
    assert change.base_digest == change.patch_digest
    assert str(change.base_digest).startswith("sha256:")
    assert not change.changed
    assert change.reasons == ()


def test_a_test_added_above_leaves_its_neighbours_alone():
    patch = NEIGHBOURS.replace(
        "def test_a():", "def test_new():\n    assert add(1, 1) == 2\n\n\ndef test_a():"
    )
    assert reasons(NEIGHBOURS, patch, "test_a") == []
    assert reasons(NEIGHBOURS, patch, "test_b") == []
    assert reasons(NEIGHBOURS, patch, "test_new") == [f"new on patch: {NEW_ON_PATCH_HINT}"]


def test_editing_one_body_changes_that_test_only():
    patch = NEIGHBOURS.replace("sub(3, 1) == 2", "sub(3, 2) == 1")
    assert reasons(NEIGHBOURS, patch, "test_b") == ["test body"]
    assert reasons(NEIGHBOURS, patch, "test_a") == []


def test_a_helper_used_by_one_test_changes_that_test_only():
    patch = NEIGHBOURS.replace("add(x, 1)", "add(x, 2)")
    assert reasons(NEIGHBOURS, patch, "test_a") == ["helper only_a"]
    assert reasons(NEIGHBOURS, patch, "test_b") == []


def test_constants_and_imports_are_followed_transitively():
    assert reasons(NEIGHBOURS, NEIGHBOURS.replace("LIMIT = 10", "LIMIT = 11"), "test_a") == [
        "helper LIMIT"
    ]
    # only_a uses add: the import that binds add is in test_a's slice, not test_b's.
    moved = NEIGHBOURS.replace(
        "from lib import add, sub", "from lib import sub\nfrom ops import add"
    )
    assert reasons(NEIGHBOURS, moved, "test_a") == ["helper add"]
    assert reasons(NEIGHBOURS, moved, "test_b") == []


def test_importing_another_name_on_the_same_line_changes_nothing():
    patch = NEIGHBOURS.replace("from lib import add, sub", "from lib import add, mul, sub")
    assert reasons(NEIGHBOURS, patch, "test_a") == []
    assert reasons(NEIGHBOURS, patch, "test_b") == []


def test_a_removed_test_is_gone_on_patch_and_a_missing_module_new_on_patch():
    patch = NEIGHBOURS.replace("def test_b():\n    assert sub(3, 1) == 2\n", "")
    change = changes(NEIGHBOURS, patch, "test_b")
    assert change.reason_texts == ("gone on patch",)
    assert (change.base_digest is None, change.patch_digest is None) == (False, True)
    new = changes(None, NEIGHBOURS, "test_a")
    assert (new.base_digest is None, new.patch_digest is None) == (True, False)
    assert new.reasons[0].kind is ReasonKind.NEW_ON_PATCH
    both_absent = changes(None, None, "test_a")
    assert (both_absent.changed, both_absent.reasons) == (False, ())


def test_a_conftest_above_the_module_is_in_every_slice_whole():
    edited = "import pytest\n\n\n@pytest.fixture\ndef db():\n    return 1\n"
    assert reasons(NEIGHBOURS, NEIGHBOURS, "test_b", tests__conftest=edited) == [
        "conftest.py tests/conftest.py"
    ]
    assert reasons(NEIGHBOURS, NEIGHBOURS, "test_a", tests__conftest="import pytest  # why\n") == []
    assert reasons(NEIGHBOURS, NEIGHBOURS, "test_a", tests__conftest=None) == [
        "conftest.py tests/conftest.py"
    ]


PARAMETRIZED = module(
    """
    import pytest

    CASES = [(1, 2), (2, 3)]


    @pytest.mark.parametrize(("x", "y"), CASES)
    def test_next(x, y):
        assert x + 1 == y


    def test_other():
        assert True
    """
)


def test_a_parametrized_node_id_maps_to_its_function_and_marks_count():
    first = oracle_slice(PARAMETRIZED, CONFTESTS, f"{PATH}::test_next[1-2]")
    second = oracle_slice(PARAMETRIZED, CONFTESTS, f"{PATH}::test_next[2-3]")
    assert first.status is SliceStatus.SLICED
    assert first.digest == second.digest
    marks = PARAMETRIZED.replace('("x", "y")', '"x,y"')
    assert reasons(PARAMETRIZED, marks, "test_next[1-2]") == ["test body"]
    values = PARAMETRIZED.replace("(2, 3)]", "(2, 3), (3, 4)]")
    assert reasons(PARAMETRIZED, values, "test_next[3-4]") == ["helper CASES"]
    assert reasons(PARAMETRIZED, values, "test_other") == []


UNITTEST = module(
    """
    import unittest

    from lib import parse


    class Base(unittest.TestCase):
        maxDiff = None

        def setUp(self):
            self.text = "1"

        def check(self, value):
            self.assertEqual(parse(self.text), value)

        def unused(self):
            return 0

        def test_shared(self):
            self.check(1)


    class ParseTests(Base):
        def test_own(self):
            self.assertTrue(self.text)

        def test_checked(self):
            self.check(1)


    class OtherTests(unittest.TestCase):
        def test_other(self):
            self.assertTrue(True)
    """
)


def test_unittest_classes_with_inheritance_inside_the_module():
    set_up = UNITTEST.replace('self.text = "1"', 'self.text = "2"')
    assert reasons(UNITTEST, set_up, "ParseTests::test_own") == ["class set-up"]
    assert reasons(UNITTEST, set_up, "OtherTests::test_other") == []
    # A helper method reached through self. is a helper of the tests that call it.
    helper = UNITTEST.replace("self.assertEqual(parse", "self.assertIs(parse")
    assert reasons(UNITTEST, helper, "ParseTests::test_checked") == ["helper Base.check"]
    assert reasons(UNITTEST, helper, "ParseTests::test_own") == []
    # A test inherited from a base defined in the module is found there.
    shared = UNITTEST.replace(
        "def test_shared(self):\n        self.check(1)",
        "def test_shared(self):\n        self.check(2)",
    )
    assert shared != UNITTEST
    assert reasons(UNITTEST, shared, "ParseTests::test_shared") == ["test body"]
    assert reasons(UNITTEST, shared, "Base::test_shared") == ["test body"]
    assert reasons(UNITTEST, shared, "ParseTests::test_checked") == []
    assert reasons(UNITTEST, UNITTEST.replace("return 0", "return 1"), "ParseTests::test_own") == []


def test_a_test_removed_from_a_unittest_class_is_gone_on_patch():
    patch = UNITTEST.replace("    def test_own(self):\n        self.assertTrue(self.text)\n\n", "")
    assert reasons(UNITTEST, patch, "ParseTests::test_own") == ["gone on patch"]


def test_a_renamed_class_is_gone_under_its_old_name_and_new_under_the_new_one():
    patch = UNITTEST.replace("class OtherTests(", "class RenamedTests(")
    assert reasons(UNITTEST, patch, "OtherTests::test_other") == ["gone on patch"]
    assert reasons(UNITTEST, patch, "RenamedTests::test_other") == [
        f"new on patch: {NEW_ON_PATCH_HINT}"
    ]
    assert reasons(UNITTEST, patch, "ParseTests::test_own") == []


FIXTURES = module(
    """
    import pytest


    @pytest.fixture
    def raw():
        return {"n": 1}


    @pytest.fixture
    def record(raw):
        return dict(raw, ok=True)


    @pytest.fixture(name="client")
    def make_client():
        return object()


    @pytest.fixture
    def unrelated():
        return 0


    def test_uses_record(record):
        assert record["ok"]


    @pytest.mark.usefixtures("client")
    def test_uses_client():
        assert True


    def test_plain():
        assert True
    """
)


def test_fixtures_that_use_fixtures_are_followed():
    patch = FIXTURES.replace('{"n": 1}', '{"n": 2}')
    assert reasons(FIXTURES, patch, "test_uses_record") == ["fixture raw"]
    assert reasons(FIXTURES, patch, "test_plain") == []
    assert reasons(FIXTURES, FIXTURES.replace("return 0", "return 1"), "test_uses_record") == []


def test_a_fixture_named_in_usefixtures_or_by_name_is_followed():
    patch = FIXTURES.replace("return object()", "return None")
    assert reasons(FIXTURES, patch, "test_uses_client") == ["fixture client"]
    assert reasons(FIXTURES, patch, "test_plain") == []


DECORATED = module(
    """
    import functools


    def retrying(times):
        def wrap(test):
            @functools.wraps(test)
            def run(*args):
                for _ in range(times):
                    test(*args)
            return run
        return wrap


    @retrying(3)
    def test_decorated():
        assert True


    def test_plain():
        assert True
    """
)


def test_a_helper_referenced_only_through_a_decorator_is_in_the_slice():
    patch = DECORATED.replace("for _ in range(times):", "for _ in range(times + 1):")
    assert reasons(DECORATED, patch, "test_decorated") == ["helper retrying"]
    assert reasons(DECORATED, patch, "test_plain") == []


STAR = module(
    """
    from helpers import *

    import pytest


    def test_star():
        assert helper_from_star() == 1


    def test_plain():
        assert True
    """
)


def test_a_star_import_is_in_every_slice_and_keeps_unfound_tests_sliced():
    patch = STAR.replace("from helpers import *", "from other_helpers import *")
    assert reasons(STAR, patch, "test_star") == ["module set-up"]
    assert reasons(STAR, patch, "test_plain") == ["module set-up"]
    # A test the module does not define may come from the star import: it is not absent,
    # and stays unchanged while the module's slice does.
    unfound = oracle_slice(STAR, CONFTESTS, f"{PATH}::test_from_helpers")
    assert unfound.status is SliceStatus.SLICED
    assert reasons(STAR, STAR + "\n\nX = 1\n", "test_from_helpers") == []
    defined = STAR + "\n\ndef test_from_helpers():\n    assert True\n"
    assert reasons(STAR, defined, "test_from_helpers") == ["test body"]


MODULE_SETUP = module(
    """
    import sys

    import pytest

    pytestmark = pytest.mark.slow
    sys.path.insert(0, "vendor")


    def setup_module():
        pass


    @pytest.fixture(autouse=True)
    def fresh_env(monkeypatch):
        monkeypatch.setenv("X", "1")


    def test_one():
        assert True


    if __name__ == "__main__":
        pytest.main([__file__])
    """
)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("pytest.mark.slow", "pytest.mark.fast", "module set-up"),
        ('"vendor"', '"lib"', "module set-up"),
        ("def setup_module():\n    pass", "def setup_module():\n    print()", "module set-up"),
        ('"X", "1"', '"X", "2"', "fixture fresh_env"),
    ],
)
def test_what_runs_for_every_test_is_in_every_slice(old, new, reason):
    assert old in MODULE_SETUP
    assert reasons(MODULE_SETUP, MODULE_SETUP.replace(old, new), "test_one") == [reason]


def test_docstrings_and_the_main_guard_run_nothing_under_pytest():
    patch = '"""Now documented."""\n' + MODULE_SETUP.replace("pytest.main([__file__])", "pass")
    assert reasons(MODULE_SETUP, patch, "test_one") == []


CLASSES = module(
    """
    import pytest


    def build(n):
        return list(range(n))


    class TestThing:
        size = 3

        @pytest.fixture
        def thing(self):
            return build(self.size)

        def make(self):
            return 1

        def test_len(self, thing):
            assert len(thing) == self.size

        def test_make(self):
            assert self.make() == 1

        class TestNested:
            def test_inner(self):
                assert True


    class TestOther:
        def test_other(self):
            assert True
    """
)


def test_class_attributes_fixtures_and_helper_methods():
    attribute = CLASSES.replace("size = 3", "size = 4")
    assert reasons(CLASSES, attribute, "TestThing::test_len") == ["class set-up"]
    assert reasons(CLASSES, attribute, "TestOther::test_other") == []
    fixture = CLASSES.replace("return build(self.size)", "return build(self.size + 0)")
    assert reasons(CLASSES, fixture, "TestThing::test_len") == ["fixture TestThing.thing"]
    helper = CLASSES.replace("return list(range(n))", "return [*range(n)]")
    assert reasons(CLASSES, helper, "TestThing::test_len") == ["helper build"]
    # Every fixture a class defines is in its tests' slices, and thing uses build.
    assert reasons(CLASSES, helper, "TestThing::test_make") == ["helper build"]
    assert reasons(CLASSES, helper, "TestOther::test_other") == []
    method = CLASSES.replace("return 1\n", "return 2\n", 1)
    assert reasons(CLASSES, method, "TestThing::test_make") == ["helper TestThing.make"]
    assert reasons(CLASSES, method, "TestThing::test_len") == []
    # A nested class's tests run inside the enclosing class: its set-up counts, not its tests.
    assert reasons(CLASSES, method, "TestThing::TestNested::test_inner") == []
    assert reasons(CLASSES, attribute, "TestThing::TestNested::test_inner") == ["class set-up"]


def test_a_nested_class_test_is_found_and_sibling_tests_are_not_in_its_slice():
    inner = CLASSES.replace("def test_inner(self):\n", "def test_inner(self):\n            x = 1\n")
    assert reasons(CLASSES, inner, "TestThing::TestNested::test_inner") == ["test body"]
    assert reasons(CLASSES, inner, "TestThing::test_len") == []
    sibling = CLASSES.replace("assert self.make() == 1", "assert self.make() == 1.0")
    assert reasons(CLASSES, sibling, "TestThing::TestNested::test_inner") == []


# --- the whole-file fallback ---------------------------------------------------------------


def test_a_syntax_error_on_one_side_compares_the_whole_file_and_says_so():
    broken = NEIGHBOURS.replace("def test_b():", "def test_b(:")
    change = changes(NEIGHBOURS, broken, "test_a")
    assert (change.whole_file, change.changed) == (True, True)
    (reason,) = change.reasons
    assert reason.kind is ReasonKind.WHOLE_FILE
    assert str(reason).startswith(f"whole file {PATH}: does not parse on patch (")
    assert str(reason).endswith("(invalid syntax, line 15)")
    back = changes(broken, NEIGHBOURS, "test_a")
    assert "does not parse on base" in back.reason_texts[0]
    # The same unreadable file on both sides is the same oracle.
    assert not changes(broken, broken, "test_a").changed
    assert oracle_slice(broken, CONFTESTS, f"{PATH}::test_a").status is SliceStatus.WHOLE_FILE


def test_a_node_id_that_is_not_a_python_function_is_compared_whole():
    doctest = oracle_slice(NEIGHBOURS, CONFTESTS, f"{PATH}::tests.test_mod.only_a")
    assert doctest.status is SliceStatus.WHOLE_FILE
    assert doctest.note == "not a Python test function"
    edited = oracle_slice(NEIGHBOURS + "\nX = 1\n", CONFTESTS, f"{PATH}::tests.test_mod.only_a")
    change = compare_slices(doctest, edited)
    assert change.reason_texts == (f"whole file {PATH}: not a Python test function on both sides",)


def test_bytes_with_a_coding_cookie_are_read_as_python_reads_them():
    text = "# -*- coding: latin-1 -*-\ndef test_x():\n    assert 'é'\n"
    as_bytes = oracle_slice(text.encode("latin-1"), CONFTESTS, f"{PATH}::test_x")
    assert as_bytes.status is SliceStatus.SLICED
    assert as_bytes.digest == digest_of(text, "test_x")


# --- properties ------------------------------------------------------------------------------

TRICKY = module(
    """
    import os
    import unittest

    import pytest
    from lib import add, sub

    CONSTANT = (1, 2)


    def helper(value):
        return add(value, CONSTANT[0])


    def tagged(test):
        return test


    @pytest.fixture
    def base_value():
        return 2


    @pytest.fixture
    def value(base_value):
        return helper(base_value)


    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n, value):
        assert value > n


    @tagged
    def test_tagged():
        assert sub(2, 1) == 1


    class Base(unittest.TestCase):
        def setUp(self):
            self.env = dict(os.environ)

        def test_env(self):
            assert isinstance(self.env, dict)


    class Child(Base):
        def test_child(self):
            assert self.env is not None


    class TestPlain:
        limit = 3

        def test_limit(self, value):
            assert value < self.limit
    """
)
PROPERTIES = (
    "test_param[1]",
    "test_tagged",
    "Base::test_env",
    "Child::test_env",
    "Child::test_child",
    "TestPlain::test_limit",
)
UNRELATED = (
    "def zz_unrelated_{n}(x):\n    return x + {n}\n",
    "ZZ_UNRELATED_{n} = [{n}, 2]\n",
    "class ZzUnrelated{n}:\n    value = {n}\n\n    def method(self):\n        return self.value\n",
    "import zz_unrelated_{n}\n",
    "from os import path as zz_unrelated_{n}\n",
    "@pytest.fixture\ndef zz_unrelated_{n}():\n    return {n}\n",
    "def test_zz_unrelated_{n}():\n    assert {n}\n",
    "class TestZzUnrelated{n}:\n    def test_it(self):\n        assert {n}\n",
)


def statement_starts(text: str) -> list[int]:
    """0-based line indexes where a top-level statement (with its decorators) begins."""
    starts = []
    for stmt in ast.parse(text).body:
        decorators = getattr(stmt, "decorator_list", [])
        starts.append(min([stmt.lineno, *(d.lineno for d in decorators)]) - 1)
    return starts


@st.composite
def unrelated_edits(draw: st.DrawFn, text: str) -> str:
    """``text`` with blank lines, comments and unrelated top-level definitions inserted."""
    lines = text.splitlines(keepends=True)
    starts = [*statement_starts(text), len(lines)]
    inserts: dict[int, list[str]] = {}
    for n in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["blank", "comment", "definition"]))
        if kind == "definition":
            where = draw(st.sampled_from(starts))
            snippet = draw(st.sampled_from(UNRELATED)).format(n=n)
            inserts.setdefault(where, []).append("\n\n" + snippet + "\n\n")
        else:
            where = draw(st.integers(0, len(lines)))
            indent = " " * draw(st.integers(0, 8))
            inserts.setdefault(where, []).append("\n" if kind == "blank" else f"{indent}# c{n}\n")
    out = []
    for index in range(len(lines) + 1):
        out.extend(inserts.get(index, []))
        if index < len(lines):
            out.append(lines[index])
    return "".join(out)


@settings(max_examples=examples(60), deadline=None)
@given(unrelated_edits(TRICKY))
def test_unrelated_code_blank_lines_and_comments_never_change_a_digest(edited: str) -> None:
    for test in PROPERTIES:
        assert digest_of(edited, test) == digest_of(TRICKY, test), test


def function_of(test: str) -> str:
    return test.partition("[")[0]


def body_line(text: str, test: str) -> tuple[int, str]:
    """0-based index of the first body line of ``test`` (``Class::name``) and its indent."""
    *classes, name = function_of(test).split("::")
    scope: list[ast.stmt] = ast.parse(text).body
    for class_name in classes:
        scope = next(s for s in scope if isinstance(s, ast.ClassDef) and s.name == class_name).body
    func = next(s for s in scope if isinstance(s, ast.FunctionDef) and s.name == name)
    first = func.body[0]
    return first.lineno - 1, " " * first.col_offset


@settings(max_examples=examples(60), deadline=None)
@given(
    st.sampled_from([p for p in PROPERTIES if p != "Child::test_env"]),
    st.integers(0, 10**6),
    st.data(),
)
def test_editing_a_test_body_always_changes_its_digest_and_says_test_body(
    test: str, value: int, data: st.DataObject
) -> None:
    index, indent = body_line(TRICKY, test)
    lines = TRICKY.splitlines(keepends=True)
    lines.insert(index, f"{indent}zz_edit = {value}\n")
    edited = "".join(lines)
    noisy = data.draw(unrelated_edits(edited))
    change = changes(TRICKY, noisy, test)
    assert change.changed
    assert change.reason_texts == ("test body",)
    for other in PROPERTIES:
        if function_of(other).rsplit("::", 1)[-1] != function_of(test).rsplit("::", 1)[-1]:
            assert digest_of(noisy, other) == digest_of(TRICKY, other), other


CODE_PATH = "pkg/mod.py"
CODE = module(
    '''
    """Helpers.

    >>> double(half(4))
    4
    """


    def double(x):
        """
        >>> double(2)
        4
        """
        return 2 * x


    def half(x):
        return x // 2


    class Box:
        def size(self):
            """
            >>> Box().size()
            0
            """
            return 0
    '''
)


@pytest.mark.parametrize(
    ("name", "kept"),
    [("pkg.mod.double", "double(2)"), ("mod.Box.size", "Box().size()"), ("pkg.mod", "half(4)")],
)
def test_a_doctest_is_sliced_to_the_docstring_it_runs(name: str, kept: str) -> None:
    """pytest names a doctest by the object's dotted name (after the module's import name,
    whatever the rootdir made of it); the code around it is code under test."""
    property_id = f"{CODE_PATH}::{name}"
    base = oracle_slice(CODE, {}, property_id)
    assert base.status is SliceStatus.SLICED
    assert any(kept in text for texts in base.parts.values() for text in texts)
    code_changed = CODE.replace("return x // 2", "return x >> 1").replace(
        "return 0", "return 0 * 1"
    )
    assert not compare_slices(base, oracle_slice(code_changed, {}, property_id)).changed
    examples_changed = CODE.replace(kept, kept.replace(")", ") + 0", 1))
    change = compare_slices(base, oracle_slice(examples_changed, {}, property_id))
    assert change.reason_texts == (f"doctest {name}",)


def test_a_dotted_name_that_names_no_docstring_is_compared_whole() -> None:
    for name in ("pkg.mod.half", "pkg.mod.nothing", "pkg.other"):
        found = oracle_slice(CODE, {}, f"{CODE_PATH}::{name}")
        assert found.status is SliceStatus.WHOLE_FILE, name


TEXT_PATH = "docs/usage.rst"
TEXT_ID = f"{TEXT_PATH}::usage.rst"
TEXT = """\
Usage
=====

Adding two numbers:

    >>> import pkg
    >>> pkg.add(2, 2)
    4

A long list, shortened:

    >>> list(range(20))  # doctest: +ELLIPSIS
    [0, 1, ..., 19]
    >>> pkg.add(None, 1)
    Traceback (most recent call last):
    TypeError: unsupported operand
"""


def test_a_text_doctest_is_sliced_to_its_examples_not_its_prose() -> None:
    base = oracle_slice(TEXT, {}, TEXT_ID)
    assert base.status is SliceStatus.SLICED
    prose = TEXT.replace("Adding two numbers:", "Adding two numbers, as a\nprogrammer would:")
    prose = prose.replace("Usage\n=====\n", "How to use it\n=============\n\nSee below.\n")
    assert not compare_slices(base, oracle_slice(prose, {}, TEXT_ID)).changed
    as_bytes = oracle_slice(prose.encode(), {}, TEXT_ID)
    assert as_bytes.digest == base.digest


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("pkg.add(2, 2)\n    4", "pkg.add(2, 3)\n    4"),  # an example's source
        ("pkg.add(2, 2)\n    4", "pkg.add(2, 2)\n    5"),  # its expected output
        ("TypeError: unsupported operand", "ValueError: unsupported operand"),  # exception
        ("# doctest: +ELLIPSIS", "# doctest: +NORMALIZE_WHITESPACE"),  # a directive
        ("    >>> import pkg\n", ""),  # an example less
    ],
)
def test_a_text_doctests_examples_are_its_oracle(old: str, new: str) -> None:
    assert old in TEXT
    change = compare_slices(
        oracle_slice(TEXT, {}, TEXT_ID), oracle_slice(TEXT.replace(old, new), {}, TEXT_ID)
    )
    assert change.reason_texts == ("doctest usage.rst",)


def test_a_text_file_doctest_cannot_read_is_compared_whole() -> None:
    for source in (b"\xff\xfe not utf-8 >>> 1\n", "    >>> 1\n  2\n"):  # a short indent
        found = oracle_slice(source, {}, TEXT_ID)
        assert found.status is SliceStatus.WHOLE_FILE, source
    # A Python module is never read as a text doctest.
    assert oracle_slice("x = 1\n", {}, "docs/conf.py::conf.py").status is SliceStatus.WHOLE_FILE


_prose = st.lists(
    st.text(alphabet="abc xyz.,:-", min_size=1, max_size=30).filter(lambda t: t.strip()),
    max_size=3,
).map(lambda lines: "\n".join(line.strip() for line in lines))
_examples = st.lists(
    st.tuples(st.sampled_from(["1 + 1", "len('ab')", "print('x')", "[1, 2]"]),
              st.sampled_from(["2", "'x'", "[1, 2]", ""])),
    min_size=1, max_size=4,
)  # fmt: skip


@given(
    _examples, st.lists(_prose, min_size=5, max_size=5), st.lists(_prose, min_size=5, max_size=5)
)
@settings(max_examples=examples(60))
def test_any_prose_around_the_same_examples_is_the_same_oracle(
    items: list[tuple[str, str]], prose_a: list[str], prose_b: list[str]
) -> None:
    def render(prose: list[str]) -> str:
        blocks = []
        for index, (source, want) in enumerate(items):
            blocks.append(prose[index % len(prose)])
            blocks.append(f"    >>> {source}" + (f"\n    {want}" if want else ""))
        blocks.append(prose[-1])
        return "\n\n".join(block for block in blocks if block) + "\n"

    first = oracle_slice(render(prose_a), {}, TEXT_ID)
    second = oracle_slice(render(prose_b), {}, TEXT_ID)
    assert first.status is second.status is SliceStatus.SLICED
    assert first.digest == second.digest
