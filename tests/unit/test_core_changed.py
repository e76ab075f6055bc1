"""--changed, pure: the import graph read statically, the tests found statically, the selection."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.changed import (
    Selection,
    candidate_modules,
    changed_paths,
    select_changed,
    static_test_ids,
)
from orchestrator.core.imports import (
    import_graph,
    imported_names,
    importers_of,
    module_names,
    own_name,
)
from orchestrator.core.oracle import ProjectModules, compare_sources
from orchestrator.core.pytest_command import without_params


def code(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# ---------------------------------------------------------------- names and imports

FILES = frozenset(
    {
        "src/pkg/__init__.py", "src/pkg/core.py", "src/pkg/sub/__init__.py", "src/pkg/sub/x.py",
        "tests/test_a.py", "tests/helpers.py", "flat.py", "app/__init__.py",
        "app/tests/__init__.py", "app/tests/test_b.py",
    }
)  # fmt: skip


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("src/pkg/core.py", ("pkg.core", "src.pkg.core")),  # a src/ layout
        ("src/pkg/__init__.py", ("pkg", "src.pkg")),
        ("src/pkg/sub/x.py", ("pkg.sub.x", "src.pkg.sub.x")),
        ("tests/helpers.py", ("helpers", "tests.helpers")),  # rootdir-relative in tests
        ("flat.py", ("flat",)),
        ("app/tests/test_b.py", ("app.tests.test_b",)),
        ("README.md", ()),
    ],
)
def test_a_file_may_be_imported_by_its_package_name_and_from_any_folder_above(path, names):
    assert module_names(path, FILES) == names


def test_relative_imports_resolve_against_the_importing_package():
    source = code(
        """
        from . import core
        from .sub import x as y
        from .. import outside
        import json, pkg.sub
        """
    )
    names = imported_names(source, own_name("src/pkg/__init__.py", FILES))
    assert {"pkg", "pkg.core", "pkg.sub", "pkg.sub.x", "json"} <= names
    assert not any(name.startswith("outside") for name in names)
    inner = imported_names("from ..core import f\n", own_name("src/pkg/sub/x.py", FILES))
    assert {"pkg", "pkg.core", "pkg.core.f"} <= inner


def test_imports_anywhere_and_literal_import_module_count():
    source = code(
        """
        import importlib

        def load():
            from pkg import late
            return importlib.import_module("pkg.plugin"), __import__("other")

        name = "pkg.dynamic"
        importlib.import_module(name)  # computed: cannot be seen
        """
    )
    names = imported_names(source, None)
    assert {"pkg.late", "pkg.plugin", "other"} <= names
    assert "pkg.dynamic" not in names
    assert imported_names("def broken(:\n", None) == frozenset()


def test_the_graph_follows_src_layouts_packages_and_transitive_imports():
    sources = {
        "src/pkg/__init__.py": "from .core import *\n",
        "src/pkg/core.py": "from pkg.sub import x\n",
        "src/pkg/sub/__init__.py": "",
        "src/pkg/sub/x.py": "VALUE = 1\n",
        "tests/test_a.py": "import pkg\n",
        "tests/test_c.py": "from helpers import make\n",
        "tests/helpers.py": "def make():\n    return 1\n",
        "tests/test_d.py": "import json\n",
    }
    graph = import_graph(sources)
    assert graph["tests/test_a.py"] == {"src/pkg/__init__.py"}
    assert graph["src/pkg/core.py"] == {"src/pkg/__init__.py", "src/pkg/sub/__init__.py",
                                        "src/pkg/sub/x.py"}  # fmt: skip
    assert importers_of(graph, ["src/pkg/sub/x.py"]) >= {"tests/test_a.py", "src/pkg/core.py"}
    assert "tests/test_d.py" not in importers_of(graph, ["src/pkg/sub/x.py"])
    assert importers_of(graph, ["tests/helpers.py"]) == {"tests/test_c.py"}
    # A changed file is not its own importer.
    assert "tests/test_c.py" not in importers_of(graph, ["tests/test_c.py"])


@given(
    st.dictionaries(
        st.sampled_from("abcdef"), st.frozensets(st.sampled_from("abcdef"), max_size=3)
    ),
    st.frozensets(st.sampled_from("abcdef"), max_size=2),
)
def test_importers_are_exactly_the_files_with_a_path_to_a_changed_one(graph, changed):
    def reaches(start: str) -> bool:
        seen, pending = set(), list(graph.get(start, ()))
        while pending:
            node = pending.pop()
            if node in changed:
                return True
            if node not in seen:
                seen.add(node)
                pending.extend(graph.get(node, ()))
        return False

    nodes = set(graph) | {n for targets in graph.values() for n in targets}
    assert importers_of(graph, changed) == {node for node in nodes if reaches(node)}


# ---------------------------------------------------------------- tests found statically

TRICKY = code(
    """
    import unittest
    import pytest
    from unittest import TestCase

    def test_plain():
        pass

    async def test_async():
        pass

    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n):
        pass

    def helper_test():
        pass

    class Base(TestCase):
        def test_inherited(self):
            pass

    class ChildTests(Base):
        def test_own(self):
            pass

    class Other(unittest.TestCase):
        def test_o(self):
            pass
        def helper(self):
            pass

    class TestPlain:
        def test_m(self):
            pass
        class TestInner:
            def test_i(self):
                pass

    class TestWithInit:
        def __init__(self):
            pass
        def test_never(self):
            pass

    class TestOff:
        __test__ = False
        def test_off(self):
            pass

    class Helper:
        def test_not_collected(self):
            pass

    def test_rebound():
        pass

    test_rebound = None
    """
)


def test_tests_are_found_as_pytest_collects_them_by_default():
    assert static_test_ids(TRICKY, "t.py") == (
        "t.py::test_plain",
        "t.py::test_async",
        "t.py::test_param",
        "t.py::Base::test_inherited",
        "t.py::ChildTests::test_own",
        "t.py::ChildTests::test_inherited",
        "t.py::Other::test_o",
        "t.py::TestPlain::test_m",
        "t.py::TestPlain::TestInner::test_i",
    )
    assert static_test_ids("def test_x(:\n", "t.py") == ()


def test_the_static_tests_are_the_ones_pytest_collects(tmp_path):
    (tmp_path / "test_t.py").write_text(TRICKY)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "test_t.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    collected = {without_params(line.strip()) for line in done.stdout.splitlines() if "::" in line}
    assert collected == set(static_test_ids(TRICKY, "test_t.py")), done.stdout


MIXED = {
    "tests/__init__.py": code(
        """
        from .mixins import Sized


        class Checks:
            def test_in_package(self):
                pass
        """
    ),
    "tests/mixins.py": code(
        """
        import unittest


        class Base(unittest.TestCase):
            def test_base(self):
                pass


        class Sized:
            def test_size(self):
                pass

            def helper(self):
                pass
        """
    ),
    "tests/test_mixed.py": code(
        """
        import unittest

        import tests.mixins as m
        from tests import Checks, Sized


        class TestSized(Sized, unittest.TestCase):
            def test_own(self):
                pass


        class WithBase(m.Base):
            pass


        class NotCollected(Checks):
            pass


        class TestPlainMixin(Checks):
            pass
        """
    ),
}


def test_tests_inherited_from_other_modules_are_the_ones_pytest_collects(tmp_path):
    for path, text in MIXED.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/test_mixed.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    collected = {line.strip() for line in done.stdout.splitlines() if "::" in line}
    modules = ProjectModules(files=frozenset(MIXED), sources=MIXED)
    found = static_test_ids(MIXED["tests/test_mixed.py"], "tests/test_mixed.py", modules)
    assert collected == set(found), done.stdout
    assert "tests/test_mixed.py::TestSized::test_size" in found
    # Without the other modules the source shows only the class's own tests.
    alone = static_test_ids(MIXED["tests/test_mixed.py"], "tests/test_mixed.py")
    assert "tests/test_mixed.py::TestSized::test_size" not in alone


def test_candidates_are_the_test_modules_the_command_runs():
    trees = [{"tests/test_a.py": "1", "tests/unit/b_test.py": "2", "lib.py": "3"},
             {"other/test_c.py": "4", "tests/conftest.py": "5"}]  # fmt: skip
    assert candidate_modules(trees, ()) == [
        "other/test_c.py", "tests/test_a.py", "tests/unit/b_test.py"]  # fmt: skip
    assert candidate_modules(trees, ("tests/unit", "other/test_c.py::test_x")) == [
        "other/test_c.py", "tests/unit/b_test.py"]  # fmt: skip
    assert changed_paths({"a": "1", "b": "2"}, {"b": "3", "c": "4"}) == ("a", "b", "c")


# ---------------------------------------------------------------- the selection

LIB = "def add(a, b):\n    return a + b\n"
OTHER = "VALUE = 1\n"
TEST_LIB = code(
    """
    import lib

    def helper():
        return 1

    def test_add():
        assert lib.add(1, 1) == 2

    def test_helper():
        assert helper() == 1
    """
)
TEST_OTHER = "import other\n\n\ndef test_other():\n    assert other.VALUE == 1\n"
TEST_PLAIN = "def test_alone():\n    assert True\n"


def choose(base: dict[str, str], patch: dict[str, str]) -> Selection:
    modules = candidate_modules([base, patch], ())
    tests = {}
    for module in modules:
        ids: dict[str, None] = {}
        for tree in (base, patch):
            if module in tree:
                ids.update(dict.fromkeys(static_test_ids(tree[module], module)))
        tests[module] = tuple(ids)
    every = [nodeid for ids in tests.values() for nodeid in ids]

    def side(tree, nodeid):
        path = nodeid.partition("::")[0]
        return tree.get(path), {"tests/conftest.py": tree.get("tests/conftest.py")}

    oracle = {n: compare_sources(side(base, n), side(patch, n), n) for n in every}
    blobs = {**{p: str(hash(t)) for p, t in base.items()}}
    after = {p: str(hash(t)) for p, t in patch.items()}
    return select_changed(
        tests=tests, oracle=oracle, base_sources=base, patch_sources=patch,
        changed=changed_paths(blobs, after),
    )  # fmt: skip


BASE = {
    "lib.py": LIB,
    "other.py": OTHER,
    "tests/conftest.py": "import pytest\n",
    "tests/test_lib.py": TEST_LIB,
    "tests/test_other.py": TEST_OTHER,
    "tests/test_plain.py": TEST_PLAIN,
}


def test_a_changed_module_selects_every_test_of_the_modules_that_import_it():
    chosen = choose(BASE, {**BASE, "lib.py": LIB.replace("a + b", "b + a")})
    assert chosen.selected == ("tests/test_lib.py::test_add", "tests/test_lib.py::test_helper")
    assert chosen.importing == ("tests/test_lib.py",)
    assert chosen.changed_modules == ("lib.py",)
    assert chosen.summary() == (
        "selected 2 of 4 tests found in 3 test modules"
        " (0 by their oracle, 2 by an import of a changed module)"
    )


def test_an_edited_helper_selects_only_the_test_that_uses_it():
    patch = {**BASE, "tests/test_lib.py": TEST_LIB.replace("return 1", "return 2 - 1")}
    chosen = choose(BASE, patch)
    assert chosen.selected == ("tests/test_lib.py::test_helper",)
    assert chosen.oracle_changed == ("tests/test_lib.py::test_helper",)
    assert chosen.importing == ()


def test_a_new_test_is_selected_and_a_removed_one_too():
    patch = {**BASE, "tests/test_plain.py": "def test_new():\n    assert True\n"}
    assert choose(BASE, patch).selected == (
        "tests/test_plain.py::test_alone",
        "tests/test_plain.py::test_new",
    )


def test_a_conftest_that_imports_a_changed_module_selects_the_tests_below_it():
    base = {**BASE, "tests/conftest.py": "import other\n"}
    chosen = choose(base, {**base, "other.py": "VALUE = 2\n"})
    assert set(chosen.importing) == {
        "tests/test_lib.py", "tests/test_other.py", "tests/test_plain.py"}  # fmt: skip
    assert len(chosen.selected) == 4


def test_nothing_is_selected_when_the_patch_touches_no_python():
    chosen = choose(BASE, BASE)
    assert chosen.selected == ()
    assert chosen.summary().startswith("selected 0 of 4 tests")


def test_a_module_whose_every_test_is_selected_goes_to_pytest_whole():
    chosen = choose(BASE, {**BASE, "lib.py": LIB + "\nX = 1\n"})
    assert chosen.targets(()) == ("tests/test_lib.py",)
    # A side that lacks some of them still has the module.
    assert chosen.targets({"tests/test_lib.py::test_add"}) == ("tests/test_lib.py",)
    edited = TEST_LIB.replace("return 1", "return 1 + 0")
    helper = choose(BASE, {**BASE, "tests/test_lib.py": edited})
    assert helper.targets(()) == ("tests/test_lib.py::test_helper",)
    assert helper.targets({"tests/test_lib.py::test_helper"}) == ()
