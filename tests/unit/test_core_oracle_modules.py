"""The oracle slice across modules: test classes whose bases (mixins) live in another module
of the project, and imports compared by the name they bind (lanes.md row 2)."""

from __future__ import annotations

import ast
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.imports import bound_name
from orchestrator.core.oracle import (
    NEW_ON_PATCH_HINT,
    SAME_TEST_FILES,
    OracleChange,
    ProjectModules,
    SliceStatus,
    collected_on_one_side,
    compare_sources,
    inherited_modules,
    may_inherit_from_elsewhere,
    oracle_slice,
)

CONFTESTS: dict[str, str | None] = {"conftest.py": None, "tests/conftest.py": None}
A = "tests/test_a.py"
INIT = "tests/__init__.py"
MIXINS = "tests/mixins.py"
BASES = "tests/bases.py"

TEST_A = """
import unittest

from tests import SizeMixin


class TestA(SizeMixin, unittest.TestCase):
    def test_own(self):
        self.assertEqual(1, 1)
"""
MIXIN = """
import lib


def sample():
    return [1, 2]


UNUSED = 3


class SizeMixin:
    def make(self):
        return sample()

    def test_size(self):
        self.assertGreater(lib.size(self.make()), 0)
"""
ADDED = """
    def test_missing_size(self):
        self.assertEqual(lib.size(object(), 5) > 0, True)
"""


def text(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


def tree(files: dict[str, str]) -> dict[str, str]:
    return {path: text(source) for path, source in files.items()}


def modules(files: dict[str, str]) -> ProjectModules:
    return ProjectModules(files=frozenset(files), sources=dict(files))


def change(base: dict[str, str], patch: dict[str, str], node_id: str) -> OracleChange:
    module = node_id.split("::", maxsplit=1)[0]
    return compare_sources(
        (base.get(module), CONFTESTS),
        (patch.get(module), CONFTESTS),
        node_id,
        (modules(base), modules(patch)),
    )


BASE = {**tree({A: TEST_A, INIT: MIXIN}), "lib.py": "def size(x): ...\n"}


def test_a_test_a_mixin_in_the_package_adds_is_new_on_patch():
    patch = {**BASE, INIT: BASE[INIT] + "\n" + textwrap.indent(text(ADDED), "    ")}
    found = change(BASE, patch, f"{A}::TestA::test_missing_size")
    assert (found.base_digest, found.reason_texts) == (
        None,
        (f"new on patch: {NEW_ON_PATCH_HINT}",),
    )
    assert found.patch_digest is not None
    # Its siblings are untouched: the mixin grew a method they do not use.
    for test in ("test_size", "test_own"):
        assert not change(BASE, patch, f"{A}::TestA::{test}").changed


def test_an_inherited_test_is_found_in_the_mixin_and_its_helpers_follow_it():
    size = f"{A}::TestA::test_size"
    assert oracle_slice(BASE[A], CONFTESTS, size, modules(BASE)).status is SliceStatus.SLICED
    body = {**BASE, INIT: BASE[INIT].replace("), 0)", "), 1)")}
    assert change(BASE, body, size).reason_texts == ("test body",)
    method = {**BASE, INIT: BASE[INIT].replace("return sample()", "return sample() * 2")}
    assert change(BASE, method, size).reason_texts == (f"helper {INIT}::SizeMixin.make",)
    helper = {**BASE, INIT: BASE[INIT].replace("[1, 2]", "[1]")}
    assert change(BASE, helper, size).reason_texts == (f"helper {INIT}::sample",)
    unrelated = {**BASE, INIT: BASE[INIT].replace("UNUSED = 3", "UNUSED = 4\n\n# note")}
    assert not change(BASE, unrelated, size).changed
    # The test's own class does not use the mixin's helpers.
    assert not change(BASE, method, f"{A}::TestA::test_own").changed


def test_without_the_mixins_module_the_test_is_sliced_without_a_body_never_absent():
    alone = oracle_slice(BASE[A], CONFTESTS, f"{A}::TestA::test_size")
    assert alone.status is SliceStatus.SLICED  # an outside base may define it
    assert inherited_modules(A, ProjectModules(files=frozenset(BASE), sources={A: BASE[A]})) == (
        frozenset(),
        frozenset({INIT}),
    )
    assert inherited_modules(A, modules(BASE)) == (frozenset({INIT}), frozenset())


def test_relative_reexported_and_attribute_bases_across_three_modules():
    files = tree({
        INIT: "from .mixins import SizeMixin\n",
        MIXINS: "from tests.bases import Base\n\n\nclass SizeMixin(Base):\n    pass\n",
        BASES: "class Base:\n    def test_base(self):\n        assert True\n",
        "tests/test_b.py": (
            "import unittest\nfrom . import SizeMixin\n\n\n"
            "class TestB(SizeMixin, unittest.TestCase):\n    pass\n"
        ),
        "tests/test_c.py": (
            "import unittest\nimport tests.mixins as m\n\n\n"
            "class TestC(m.SizeMixin, unittest.TestCase):\n    pass\n"
        ),
        "tests/test_d.py": (
            "import unittest\nimport tests.bases\n\n\n"
            "class TestD(tests.bases.Base, unittest.TestCase):\n    pass\n"
        ),
    })  # fmt: skip
    edited = {**files, BASES: files[BASES].replace("True", "1")}
    for module, cls in (("tests/test_b.py", "TestB"), ("tests/test_c.py", "TestC"),
                        ("tests/test_d.py", "TestD")):  # fmt: skip
        node_id = f"{module}::{cls}::test_base"
        assert change(files, edited, node_id).reason_texts == ("test body",), node_id
        gone = {**files, BASES: "class Base:\n    pass\n"}
        assert change(files, gone, node_id).reason_texts == ("gone on patch",), node_id
    found, wanted = inherited_modules("tests/test_b.py", modules(files))
    assert (found, wanted) == (frozenset({INIT, MIXINS, BASES}), frozenset())


def test_a_base_a_star_import_brings_is_followed():
    files = {
        "tests/helpers.py": "class Mixin:\n    def test_m(self):\n        assert 1\n",
        "tests/test_s.py": "import unittest\nfrom tests.helpers import *\n\n\n"
        "class TestS(Mixin, unittest.TestCase):\n    pass\n",
    }
    edited = {**files, "tests/helpers.py": files["tests/helpers.py"].replace("1", "2")}
    assert change(files, edited, "tests/test_s.py::TestS::test_m").reason_texts == ("test body",)
    assert may_inherit_from_elsewhere(files["tests/test_s.py"])
    assert not may_inherit_from_elsewhere("import unittest\nclass T(unittest.TestCase): pass\n")


def test_collection_on_one_side_overrides_an_unchanged_slice():
    same = OracleChange(
        property_id="t.py::T::test_x", base_digest="sha256:a", patch_digest="sha256:a"
    )
    assert collected_on_one_side(same, on_base=True, on_patch=True) == same
    new = collected_on_one_side(same, on_base=False, on_patch=True)
    assert (new.base_digest, new.patch_digest, new.reason_texts) == (
        None, "sha256:a", (f"new on patch: {NEW_ON_PATCH_HINT}",))  # fmt: skip
    gone = collected_on_one_side(same, on_base=True, on_patch=False, tests_from="abc")
    assert (gone.patch_digest, gone.reason_texts) == (None, (f"gone on patch: {SAME_TEST_FILES}",))
    assert new.changed
    assert gone.changed


# --- an import is compared by the name it binds ----------------------------------------------

UNITTEST_MODULE = """
import unittest


class TestM(unittest.TestCase):
    def test_plain(self):
        self.assertTrue(unittest.TestCase)

    def test_mocks(self):
        with unittest.mock.patch("os.getcwd"):
            pass
"""


def test_an_added_submodule_import_changes_only_the_tests_that_use_the_submodule():
    base = {"tests/test_m.py": text(UNITTEST_MODULE)}
    for added in ("import unittest.mock\n", "import os, unittest.mock\n", "import unittest\n"):
        patch = {"tests/test_m.py": added + base["tests/test_m.py"]}
        plain = change(base, patch, "tests/test_m.py::TestM::test_plain")
        assert not plain.changed, added
    patch = {"tests/test_m.py": "import unittest.mock\n" + base["tests/test_m.py"]}
    mocks = change(base, patch, "tests/test_m.py::TestM::test_mocks")
    assert mocks.reason_texts == ("helper unittest.mock",)
    # A name bound to another object is a change: ``import unittest.mock as unittest``.
    rebound = {"tests/test_m.py": base["tests/test_m.py"] + "import unittest.mock as unittest\n"}
    assert change(base, rebound, "tests/test_m.py::TestM::test_plain").reason_texts == (
        "helper unittest",
    )


# Real modules of the standard library, so that Python itself says what an import binds.
IMPORTABLE = ("os", "os.path", "json", "json.decoder", "collections", "collections.abc",
              "xml", "xml.etree", "xml.etree.ElementTree", "email.mime.text")  # fmt: skip
FROM_IMPORTS = (("os", "path"), ("json", "decoder"), ("collections", "abc"), ("xml", "etree"),
                ("os", "sep"), ("json", "dumps"))  # fmt: skip
ALIASES = ("a", "b", "os", "json")


@st.composite
def import_statements(draw: st.DrawFn) -> str:
    asname = draw(st.none() | st.sampled_from(ALIASES))
    suffix = f" as {asname}" if asname else ""
    if draw(st.booleans()):
        return f"import {draw(st.sampled_from(IMPORTABLE))}{suffix}"
    module, name = draw(st.sampled_from(FROM_IMPORTS))
    return f"from {module} import {name}{suffix}"


def executed(statements: list[str]) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec("\n".join(statements), namespace)
    namespace.pop("__builtins__", None)
    return namespace


@settings(max_examples=examples(150), deadline=None)
@given(import_statements())
def test_the_bound_name_is_the_name_python_binds(statement: str) -> None:
    node = ast.parse(statement).body[0]
    assert isinstance(node, ast.Import | ast.ImportFrom)
    (alias,) = node.names
    assert set(executed([statement])) == {
        bound_name(alias, from_import=isinstance(node, ast.ImportFrom))
    }


def uses(name: str, statements: list[str]) -> str:
    return "\n".join([*statements, "", "", f"def test_x():\n    assert {name} is not None", ""])


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(import_statements(), min_size=1, max_size=4),
    st.lists(import_statements(), min_size=1, max_size=4),
    st.sampled_from(("a", "b", "os", "json", "path", "decoder", "abc", "xml", "etree")),
)
def test_a_slice_is_unchanged_only_when_the_name_it_uses_is_bound_to_the_same_object(
    base: list[str], patch: list[str], name: str
) -> None:
    before, after = executed(base), executed(patch)
    if name not in before or name not in after:
        return
    found = compare_sources(
        (uses(name, base), {}), (uses(name, patch), {}), "tests/test_x.py::test_x"
    )
    if not found.changed:
        assert before[name] is after[name], (base, patch)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(import_statements(), max_size=3),
    st.sampled_from(IMPORTABLE),
    st.integers(min_value=0, max_value=3),
)
def test_importing_a_submodule_of_a_bound_package_leaves_a_plain_use_alone(
    statements: list[str], dotted: str, where: int
) -> None:
    root = dotted.split(".", maxsplit=1)[0]
    base = [*statements, f"import {root}"]
    patch = list(base)
    patch.insert(min(where, len(patch)), f"import {dotted}")
    # The test uses the package, not the submodule: its binding is the same object.
    assert executed(base)[root] is executed(patch)[root]
    found = compare_sources((uses(root, base), {}), (uses(root, patch), {}), "t.py::test_x")
    assert not found.changed, (base, patch)


def test_of_two_modules_with_one_name_the_one_beside_the_test_is_followed():
    mixin = "class M:\n    def test_m(self):\n        assert 1\n"
    files = {
        "other/mixins.py": mixin,
        "tests/mixins.py": mixin,
        "tests/test_x.py": "import unittest\nfrom mixins import M\n\n\n"
        "class TestX(M, unittest.TestCase):\n    pass\n",
    }
    node_id = "tests/test_x.py::TestX::test_m"
    far = {**files, "other/mixins.py": mixin.replace("1", "2")}
    near = {**files, "tests/mixins.py": mixin.replace("1", "2")}
    assert not change(files, far, node_id).changed
    assert change(files, near, node_id).reason_texts == ("test body",)
