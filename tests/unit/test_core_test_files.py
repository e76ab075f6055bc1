"""Which files are test files, and the overlay of one revision's test files (--tests-from)."""

from __future__ import annotations

import fnmatch
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.oracle.model import ChangeReason, OracleChange, ReasonKind
from orchestrator.core.pytest_collection import CollectionConfig
from orchestrator.core.test_files import (
    TestFileRule,
    explain_not_laid_over,
    is_test_file_name,
    is_test_module_name,
    lay_over_hint,
    missing_test_paths,
    normal_path,
    outer_test_folder,
    overlaid_tree,
    plan_overlay,
    removed_tests_line,
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


# --- pytest's configuration: testpaths, python_files, doctest globs -------------------------

DOCS_TREE = [
    "lib.py", "src/pkg/__init__.py", "src/pkg/mod.py", "src/pkg/README.rst",
    "src/pkg/check_inline.py", "pkg2/__init__.py", "pkg2/notes.rst", "tests/test_a.py",
    "docs/usage.rst", "docs/api/ref.rst", "docs/conf.py", "docs/data.json", "README.rst",
    "checks/check_x.py", "other/check_y.py", "other/guide.rst",
]  # fmt: skip


def test_testpaths_doctest_globs_and_python_files_make_test_files():
    config = CollectionConfig(
        testpaths=("tests", "docs", "checks"),
        python_files=("test_*.py", "check_*.py", "*.py"),
        doctest_globs=("*.rst",),
        doctest_modules=True,
    )
    rule = rule_for_tests((), (), (), trees=[DOCS_TREE], config=config)
    assert dict(rule.collected) == {
        "docs/usage.rst": "--doctest-glob *.rst",
        "docs/api/ref.rst": "--doctest-glob *.rst",
        "checks/check_x.py": "python_files check_*.py",
    }
    laid = [path for path in DOCS_TREE if rule.matches(path)]
    assert laid == ["tests/test_a.py", "docs/usage.rst", "docs/api/ref.rst", "checks/check_x.py"]
    # Outside testpaths nothing is pytest's test by them; in the library's code never a
    # doctest text file, and never a module for --doctest-modules or "*.py".
    assert rule.to_json()["collected"] == {
        "--doctest-glob *.rst": ["docs/api/ref.rst", "docs/usage.rst"],
        "python_files check_*.py": ["checks/check_x.py"],
    }
    # Without testpaths pytest searches the whole tree: a module by python_files anywhere
    # (the library's own too: the project says it is a test), text files outside code.
    whole = rule_for_tests((), (), (), trees=[DOCS_TREE], config=replace(config, testpaths=()))
    assert [p for p in DOCS_TREE if whole.matches(p) and not rule.matches(p)] == [
        "src/pkg/check_inline.py", "README.rst", "other/check_y.py", "other/guide.rst"]  # fmt: skip
    # The command's paths are where pytest searches when it names some.
    named = rule_for_tests(
        (), ("docs/usage.rst",), (), trees=[DOCS_TREE], config=CollectionConfig()
    )
    assert dict(named.collected) == {"docs/usage.rst": "the command's path"}
    # Named properties name their files: pytest's configuration adds nothing then.
    assert rule_for_tests(("tests/test_a.py::t",), (), (), config=config).collected == ()


def test_the_overlay_says_which_files_pytests_configuration_laid_over():
    config = CollectionConfig(testpaths=("tests", "docs"), doctest_globs=("*.rst",))
    rule = rule_for_tests((), (), (), trees=[DOCS_TREE], config=config)
    tree = dict.fromkeys(DOCS_TREE, "1")
    overlay = plan_overlay(ref="patch", rev="r", rule=rule, tests_tree=tree, side_trees={})
    assert overlay.summary() == (
        "1 file from tests/ and 2 files by --doctest-glob *.rst laid over each tree"
    )
    assert overlay.to_json()["rule_for_tests"]["pytest_config"]["testpaths"] == ["tests", "docs"]


def test_a_changed_oracle_the_overlay_left_each_sides_own_says_how_to_lay_it_over():
    rule = rule_for_tests((), (), ("golden",), trees=[DOCS_TREE], config=CollectionConfig())
    overlay = plan_overlay(ref="patch", rev="r", rule=rule, tests_tree={}, side_trees={})

    def change(property_id, reason):
        return OracleChange(property_id=property_id, base_digest="a", patch_digest="b",
                            reasons=(reason,))  # fmt: skip

    text = explain_not_laid_over(
        change(
            "docs/usage.rst::usage.rst", ChangeReason(kind=ReasonKind.DOCTEST, subject="usage.rst")
        ),
        overlay,
    )
    assert text.reason_texts == (
        "doctest usage.rst: docs/usage.rst is not laid over"
        " (--test-path docs/usage.rst lays it over)",
    )
    data = ChangeReason(kind=ReasonKind.WHOLE_FILE, subject="cases/a.case", detail="does not parse")
    assert explain_not_laid_over(change("cases/a.case::a", data), overlay).reason_texts == (
        "whole file cases/a.case: does not parse;"
        " cases/a.case is not laid over (--test-path cases/a.case lays it over)",
    )
    module = ChangeReason(kind=ReasonKind.DOCTEST, subject="pkg.mod.f")
    assert explain_not_laid_over(change("pkg/mod.py::pkg.mod.f", module), overlay).reason_texts == (
        "doctest pkg.mod.f: pkg/mod.py is code under test, which --tests-from never lays over",
    )
    # A file the overlay took, or an unchanged oracle, is left as it is.
    golden = change("golden/x.txt::x.txt", ChangeReason(kind=ReasonKind.DOCTEST, subject="x"))
    assert explain_not_laid_over(golden, overlay) == golden
    assert lay_over_hint("README.rst") == (
        "README.rst is not laid over (--test-path README.rst lays it over)"
    )


def test_the_line_for_tests_the_chosen_revision_lacks():
    assert removed_tests_line("patch", "f" * 40, ()) is None
    assert removed_tests_line("patch", "f" * 40, ("t.py::a",)) == (
        "the patch removes 1 test the base has (t.py::a): they judge neither side"
    )
    assert removed_tests_line("v2", "abcdef123456789", ("a", "b", "c", "d", "e")) == (
        "--tests-from v2 (abcdef123456) lacks 5 tests the base has (a, b, c and 2 more):"
        " they judge neither side"
    )


ini_trees = st.lists(
    st.sampled_from(
        ["lib.py", "src/pkg/__init__.py", "src/pkg/mod.py", "src/pkg/check_m.py",
         "src/pkg/notes.txt", "src/pkg/guide.rst", "src/pkg/tests/test_t.py",
         "src/pkg/tests/data.txt", "src/top.rst", "pkg/__init__.py", "pkg/api.py",
         "pkg/doc.rst", "pkg/test_inline.py", "tests/test_a.py", "tests/check_b.py",
         "tests/data/x.json", "docs/usage.rst", "docs/index.md", "docs/test_guide.txt",
         "docs/conf.py", "docs/check_doc.py", "checks/check_c.py", "checks/notes.md",
         "README.rst", "test_top.txt"]
    ),
    max_size=12,
)  # fmt: skip
configs = st.builds(
    CollectionConfig,
    testpaths=st.lists(st.sampled_from(["tests", "docs", "src", "checks", "pkg", "."]),
                       max_size=3, unique=True).map(tuple),
    python_files=st.lists(st.sampled_from(["test_*.py", "*_test.py", "check_*.py", "*.py"]),
                          min_size=1, max_size=3, unique=True).map(tuple),
    doctest_globs=st.lists(st.sampled_from(["test*.txt", "*.rst", "*.md", "*.txt", "*"]),
                           min_size=1, max_size=2, unique=True).map(tuple),
    doctest_modules=st.booleans(),
)  # fmt: skip


def pytest_collects(path: str, config: CollectionConfig) -> str | None:
    """What pytest makes of ``path`` under ``config`` (None: no test file), written apart
    from the rule: within the searched paths, a module matching python_files, or any other
    file matching a doctest glob."""
    roots = config.testpaths or (".",)
    if not any(root == "." or path == root or path.startswith(root + "/") for root in roots):
        return None
    name = path.rsplit("/", 1)[-1]
    if path.endswith(".py"):
        return "module" if any(fnmatch.fnmatchcase(name, p) for p in config.python_files) else None
    return "text" if any(fnmatch.fnmatchcase(name, g) for g in config.doctest_globs) else None


@settings(max_examples=examples(300), deadline=None)
@given(tree=ini_trees, config=configs)
def test_the_overlay_is_the_test_tree_pytest_sees_and_never_the_librarys_code(tree, config):
    rule = rule_for_tests((), (), (), trees=[tree], config=config)
    packages = {p.rsplit("/", 1)[0] for p in tree if p.endswith("/__init__.py")}
    for path in tree:
        name = path.rsplit("/", 1)[-1]
        by_name = is_test_file_name(name) or any(
            fnmatch.fnmatchcase(name, p) for p in config.python_files if p != "*.py"
        )
        in_test_folder = outer_test_folder(path) is not None
        # Nothing under src/ (nor in a package) is laid over unless a test pattern or a
        # test folder makes it a test file.
        library = path.startswith("src/") or path.rsplit("/", 1)[0] in packages
        if library and rule.matches(path):
            assert by_name or in_test_folder, (path, rule)
        collected = pytest_collects(path, config)
        # Every file pytest collects as a test is laid over: a module by a pattern that
        # names test modules, a text doctest outside the library's code.
        if collected == "module" and by_name:
            assert rule.matches(path), (path, rule)
        if collected == "text" and (not library or in_test_folder):
            assert rule.matches(path), (path, rule)
        # --doctest-modules never makes a plain module a test file.
        if path.endswith(".py") and not by_name and not in_test_folder:
            assert not rule.matches(path), (path, rule)
