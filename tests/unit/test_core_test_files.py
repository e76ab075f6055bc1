"""Which files are test files, and the overlay of one revision's test files (--tests-from)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.test_files import (
    TestFileRule,
    is_test_file_name,
    is_test_module_name,
    missing_test_paths,
    normal_path,
    outer_test_folder,
    overlaid_tree,
    plan_overlay,
    rule_for_tests,
)


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        ("tests/test_x.py", "tests"),
        ("tests/unit/test_x.py", "tests"),
        ("src/pkg/tests/test_x.py", "src/pkg/tests"),
        ("pkg/testing/sub/check.py", "pkg/testing"),
        ("api_tests/test_x.py", "api_tests"),
        ("testsuite/E74.py", "testsuite"),  # pycodestyle's older layout
        ("test_x.py", None),
        ("pkg/test_x.py", None),  # tests beside the code: the folder is code
        ("latest/test_x.py", None),
    ],
)
def test_the_test_folder_is_the_outermost_folder_named_like_one(path, folder):
    assert outer_test_folder(path) == folder


def test_the_rule_takes_the_properties_folders_modules_and_the_name_rule_anywhere():
    rule = rule_for_tests(
        ("tests/unit/test_a.py::test_x", "pkg/check_b.py::test_y", "tests/test_c.py::C::test_z"),
        ("ignored/",),
        ("data/golden.json", "fixtures"),
    )
    assert rule.folders == ("tests",)
    assert rule.files == ("tests/unit/test_a.py", "pkg/check_b.py", "tests/test_c.py")
    taken = [
        "tests/helpers.py",
        "tests/data/input.txt",
        "pkg/check_b.py",
        "conftest.py",
        "pkg/conftest.py",
        "pkg/test_mod.py",
        "pkg/mod_test.py",
        "data/golden.json",
        "fixtures/a/b.json",
    ]
    kept = ["pkg/mod.py", "pkg/check_c.py", "README.md", "data/other.json", "testsuite/x.py"]
    assert [path for path in taken if not rule.matches(path)] == []
    assert [path for path in kept if rule.matches(path)] == []


def test_without_properties_the_commands_paths_name_the_test_folders():
    rule = rule_for_tests((), ("tests/unit", "checks/test_x.py::test_y", "src/"), ())
    assert rule.folders == ("tests",)
    assert rule.files == ("checks/test_x.py",)
    assert not rule.matches("src/lib.py")
    assert rule_for_tests((), (), ()) == TestFileRule()  # no tree: the name rule only


def test_a_command_without_paths_takes_the_folder_of_every_test_module_whole():
    base = [
        "lib.py",
        "tests/__init__.py",
        "tests/test_a.py",
        "tests/data/golden.json",
        "src/pkg/tests/test_b.py",
        "src/pkg/mod.py",
        "pkg/test_c.py",
        "pkg/util.py",
    ]
    patch = ["lib.py", "tests/__init__.py", "tests/test_a.py", "it/test_d.py",
             "testing/helpers.py", "testing/data/E50.py", "django/test/client.py"]  # fmt: skip
    rule = rule_for_tests((), (), (), trees=[base, patch])
    assert rule.folders == ("src/pkg/tests", "tests", "testing")
    taken = ["tests/__init__.py", "tests/data/golden.json", "src/pkg/tests/test_b.py",
             "pkg/test_c.py", "it/test_d.py", "conftest.py",
             # A root folder named like a test folder holds the suite's support and data,
             # test modules in it or not.
             "testing/helpers.py", "testing/data/E50.py"]  # fmt: skip
    assert [path for path in taken if not rule.matches(path)] == []
    # Code beside a test module, and a deeper folder named like a test folder with no
    # test module (the library's own django/test/), stay the side's.
    assert [p for p in ("lib.py", "src/pkg/mod.py", "pkg/util.py", "django/test/client.py")
            if rule.matches(p)] == []  # fmt: skip
    # A command that names a path keeps its own rule.
    assert rule_for_tests((), ("tests/test_a.py",), (), trees=[base]).folders == ("tests",)
    assert rule_for_tests((), ("pkg",), (), trees=[base]).folders == ()


def test_the_overlay_says_what_it_laid_over():
    rule = rule_for_tests((), (), ("golden",), trees=[["tests/test_a.py"]])
    tests = {"tests/__init__.py": "1", "tests/test_a.py": "2", "golden/x.json": "3",
             "pkg/test_c.py": "4", "lib.py": "5"}  # fmt: skip
    side = {"tests/test_old.py": "6", "lib.py": "5"}
    overlay = plan_overlay(ref="patch", rev="r", rule=rule, tests_tree=tests,
                           side_trees={"base": side, "patch": tests})  # fmt: skip
    assert overlay.summary() == (
        "3 files from tests/, golden/ and 1 test file elsewhere laid over each tree, 1 removed"
    )
    assert overlay.to_json()["overlay_summary"] == overlay.summary()
    alone = plan_overlay(ref="r", rev="r", rule=TestFileRule(), tests_tree={"test_x.py": "1"},
                         side_trees={})  # fmt: skip
    assert alone.summary() == "1 test file laid over each tree"


@pytest.mark.parametrize(
    ("text", "normal"),
    [("tests/data/", "tests/data"), ("./data/x.json", "data/x.json"), ("a//b", "a/b"),
     ("/etc/passwd", None), ("../x", None), ("a/../../x", None), ("", None), (".", None)],
)  # fmt: skip
def test_test_paths_are_repository_relative(text, normal):
    assert normal_path(text) == normal


def test_a_test_path_must_exist_on_some_side():
    trees = [{"data/a.json": "1", "tests/test_x.py": "2"}, {"golden/b.json": "3"}]
    assert missing_test_paths(["data", "golden/b.json", "tests"], trees) == ()
    assert missing_test_paths(["dat", "golden/c.json", "nowhere"], trees) == (
        "dat",
        "golden/c.json",
        "nowhere",
    )


def test_added_modified_and_deleted_test_files_all_follow_the_chosen_revision():
    rule = rule_for_tests(("tests/test_a.py::test_x",), (), ())
    tests_tree = {"lib.py": "L2", "tests/test_a.py": "A2", "tests/test_new.py": "N2"}
    base = {"lib.py": "L1", "tests/test_a.py": "A1", "tests/test_old.py": "O1", "conftest.py": "C"}
    patch = {"lib.py": "L2", "tests/test_a.py": "A2", "tests/test_new.py": "N2"}
    overlay = plan_overlay(
        ref="patch", rev="f" * 40, rule=rule, tests_tree=tests_tree,
        side_trees={"base": base, "patch": patch},
    )  # fmt: skip
    assert dict(overlay.files) == {"tests/test_a.py": "A2", "tests/test_new.py": "N2"}
    assert {side: dict(removed) for side, removed in overlay.removed.items()} == {
        "base": {"conftest.py": "C", "tests/test_old.py": "O1"},
        "patch": {},
    }
    assert overlaid_tree(base, overlay) == {
        "lib.py": "L1",  # the code stays the side's
        "tests/test_a.py": "A2",
        "tests/test_new.py": "N2",
    }
    on_base = overlay.side("base")
    assert (on_base.rev, on_base.write) == ("f" * 40, ("tests/test_a.py", "tests/test_new.py"))
    assert on_base.remove == ("conftest.py", "tests/test_old.py")
    doc = overlay.to_json()
    assert doc["tests_from"] == "f" * 40
    assert doc["overlaid_files"] == [
        {"path": "tests/test_a.py", "blob": "A2"},
        {"path": "tests/test_new.py", "blob": "N2"},
    ]
    assert doc["overlay_removed"]["base"][1] == {"path": "tests/test_old.py", "blob": "O1"}


paths = st.sampled_from(
    ["lib.py", "pkg/mod.py", "tests/test_a.py", "tests/helpers.py", "tests/data/x.json",
     "conftest.py", "pkg/test_b.py", "docs/index.md", "golden/out.json"]
)  # fmt: skip
trees = st.dictionaries(paths, st.sampled_from(["1", "2", "3"]))


@given(side=trees, tests=trees, extra=st.lists(st.sampled_from(["golden", "docs/index.md"])))
def test_an_overlaid_tree_has_the_chosen_tests_and_the_sides_code(side, tests, extra):
    rule = rule_for_tests(("tests/test_a.py::test_x",), (), tuple(extra))
    overlay = plan_overlay(ref="r", rev="r", rule=rule, tests_tree=tests, side_trees={"s": side})
    after = overlaid_tree(side, overlay)
    assert {p: b for p, b in after.items() if rule.matches(p)} == {
        p: b for p, b in tests.items() if rule.matches(p)
    }
    assert {p: b for p, b in after.items() if not rule.matches(p)} == {
        p: b for p, b in side.items() if not rule.matches(p)
    }
    # Applying the side's overlay (remove, then write) gives the same tree.
    plan = overlay.side("s")
    applied = {p: b for p, b in side.items() if p not in plan.remove}
    applied.update({p: tests[p] for p in plan.write})
    assert applied == after


whole_tree_paths = st.sampled_from(
    ["lib.py", "tests/__init__.py", "tests/test_a.py", "tests/helpers.py", "tests/data/x.json",
     "src/pkg/tests/test_b.py", "src/pkg/tests/util.py", "src/pkg/mod.py", "pkg/test_c.py",
     "pkg/util.py", "testing/helpers.py", "docs/index.md", "conftest.py"]
)  # fmt: skip


@given(st.lists(st.lists(whole_tree_paths, max_size=8), min_size=1, max_size=3))
def test_without_paths_a_file_is_taken_exactly_when_a_test_module_shares_its_test_folder(trees):
    """...or when it lies under a root folder named test, tests or testing."""
    rule = rule_for_tests((), (), (), trees=trees)
    modules = {p for tree in trees for p in tree if is_test_module_name(p.rsplit("/", 1)[-1])}
    for path in {p for tree in trees for p in tree}:
        folder = outer_test_folder(path)
        shared = folder is not None and any(outer_test_folder(m) == folder for m in modules)
        named = is_test_file_name(path.rsplit("/", 1)[-1])
        root = "/" in path and path.split("/", 1)[0] in ("test", "tests", "testing", "testsuite")
        assert rule.matches(path) == (shared or named or root), (path, rule)
