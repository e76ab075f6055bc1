"""--tests-from and --changed on real repositories built here (git only, no engine): the
overlay of one revision's test files on an exported tree, the plan's checks, the selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scratch_git import commit, git, init

from orchestrator.adapters import git as git_adapter
from orchestrator.core.replay_run import ReplayOptions
from orchestrator.core.test_files import explain_not_laid_over, rule_for_tests
from orchestrator.errors import ExitCode, InputError
from orchestrator.services.changed import select_changed_tests
from orchestrator.services.oracle import property_oracles
from orchestrator.services.replay_tests import plan_tests
from orchestrator.services.tests_from import plan_test_overlay

TEST_A = "import lib\n\n\ndef test_a():\n    assert lib.VALUE == 1\n"
TEST_A_NEW = TEST_A + "\n\ndef test_new():\n    assert lib.VALUE > 0\n"


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    return scratch


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """base: a test module, a helper, data, a test module of its own; patch: the code
    changed, test_a.py modified, test_old.py deleted, test_new.py and data added."""
    path = init(tmp_path / "repo")
    base = commit(
        path,
        {
            "lib.py": "VALUE = 1\n",
            "tests/test_a.py": TEST_A,
            "tests/helpers.py": "H = 1\n",
            "tests/old/test_old.py": "def test_old():\n    pass\n",
            "golden/out.json": "1\n",
            "README.md": "base\n",
        },
        "base",
    )
    patch = commit(
        path,
        {
            "lib.py": "VALUE = 2\n",
            "tests/test_a.py": TEST_A_NEW,
            "tests/test_new.py": "def test_n():\n    pass\n",
            "golden/out.json": "2\n",
            "README.md": "patch\n",
        },
        "patch",
        remove=("tests/old/test_old.py",),
    )
    return path, base, patch


def overlay_for(path: Path, base: str, patch: str, rev: str, *test_paths: str):
    return plan_test_overlay(
        path,
        ref=rev,
        rev=rev,
        sides={"base": base, "patch": patch},
        property_ids=("tests/test_a.py::test_a",),
        command_paths=(),
        test_paths=test_paths,
    )


def files_of(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): p.read_text() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_the_patchs_tests_over_the_base_tree_added_modified_and_deleted(repo, private_tmp):
    path, base, patch = repo
    overlay = overlay_for(path, base, patch, patch, "golden")
    with git_adapter.checkout(path, base, tests=overlay.side("base")) as tree:
        assert files_of(tree) == {
            "lib.py": "VALUE = 1\n",  # the code is base's
            "README.md": "base\n",
            "tests/test_a.py": TEST_A_NEW,  # modified: the patch's
            "tests/test_new.py": "def test_n():\n    pass\n",  # added
            "tests/helpers.py": "H = 1\n",
            "golden/out.json": "2\n",  # --test-path: the patch's
        }
        assert not (tree / "tests" / "old").exists()  # deleted, its empty folder too
    assert list(private_tmp.iterdir()) == []
    # The base's tests over the patch tree: the deleted test comes back, the new one goes.
    back = overlay_for(path, base, patch, base)
    with git_adapter.checkout(path, patch, tests=back.side("patch")) as tree:
        assert (tree / "tests/old/test_old.py").is_file()
        assert not (tree / "tests/test_new.py").exists()
        assert (tree / "tests/test_a.py").read_text() == TEST_A
        assert (tree / "lib.py").read_text() == "VALUE = 2\n"
        assert (tree / "golden/out.json").read_text() == "2\n"  # not a test file without -p


def test_the_overlay_records_every_file_with_its_blob(repo):
    path, base, patch = repo
    overlay = overlay_for(path, base, patch, patch)
    blob = git(path, "rev-parse", f"{patch}:tests/test_a.py")
    assert dict(overlay.files) == {
        "tests/helpers.py": git(path, "rev-parse", f"{patch}:tests/helpers.py"),
        "tests/test_a.py": blob,
        "tests/test_new.py": git(path, "rev-parse", f"{patch}:tests/test_new.py"),
    }
    assert dict(overlay.removed["base"]) == {
        "tests/old/test_old.py": git(path, "rev-parse", f"{base}:tests/old/test_old.py")
    }
    assert dict(overlay.removed["patch"]) == {}


def test_the_overlaid_tree_is_removed_when_the_body_raises(repo, private_tmp):
    path, base, patch = repo
    overlay = overlay_for(path, base, patch, patch)
    with pytest.raises(RuntimeError), git_adapter.checkout(path, base, tests=overlay.side("base")):
        raise RuntimeError("boom")
    assert list(private_tmp.iterdir()) == []


def test_list_tree_and_read_objects_read_a_revision(repo):
    path, base, _ = repo
    tree = git_adapter.list_tree(path, base)
    assert set(tree) == {"lib.py", "tests/test_a.py", "tests/helpers.py",
                         "tests/old/test_old.py", "golden/out.json", "README.md"}  # fmt: skip
    objects = git_adapter.read_objects(path, [tree["lib.py"], tree["tests/test_a.py"]])
    assert objects == {tree["lib.py"]: b"VALUE = 1\n", tree["tests/test_a.py"]: TEST_A.encode()}


def test_with_tests_from_both_sides_compare_one_oracle(repo):
    path, base, patch = repo
    ids = ["tests/test_a.py::test_a", "tests/test_a.py::test_new"]
    own = property_oracles(path, base, patch, ids)
    assert own["tests/test_a.py::test_new"].changed  # new on patch
    overlay = overlay_for(path, base, patch, patch)
    judged = property_oracles(path, base, patch, ids, overlay=overlay)
    for change in judged.values():
        assert change.base_digest == change.patch_digest is not None
        assert change.reasons == ()


def options(path: Path, base: str, patch: str, **changes) -> ReplayOptions:
    return ReplayOptions(
        repo=path, base=base, patch=patch, image="orchestrator-runner:latest", **changes
    )


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"tests_from": "no-such-rev"}, "--tests-from 'no-such-rev': not a revision of"),
        ({"tests_from": "patch", "test_paths": ("nowhere",)}, "--test-path nowhere: no such"),
        ({"tests_from": "patch", "test_paths": ("../x",)}, "--test-path '../x': expected"),
        ({"tests_from": "base", "property_ids": ("tests/test_a.py::test_new",)},
         "has no test tests/test_a.py::test_new"),
    ],
)  # fmt: skip
def test_bad_test_options_are_exit_2_before_anything_runs(repo, changes, problem):
    # Options that do not go together are refused with the command line (test_planning).
    path, base, patch = repo
    with pytest.raises(InputError) as raised:
        plan_tests(options(path, base, patch, **changes), path, base, patch)
    assert raised.value.exit_code is ExitCode.USAGE
    assert problem in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_revision_with_no_test_module_is_exit_2(repo):
    path, base, patch = repo
    bare = commit(path, {}, "no tests", remove=("tests/test_a.py", "tests/test_new.py"))
    with pytest.raises(InputError, match="no test module there"):
        plan_tests(options(path, base, patch, tests_from=bare), path, base, patch)


def test_the_plan_hands_each_side_only_the_tests_it_has(repo):
    path, base, patch = repo
    ids = ("tests/test_a.py::test_a", "tests/test_a.py::test_new")
    plan = plan_tests(options(path, base, patch, property_ids=ids), path, base, patch)
    assert plan.overlay is None
    assert plan.targets == {"base": ("tests/test_a.py::test_a",), "patch": ids}
    judged = plan_tests(
        options(path, base, patch, property_ids=ids, tests_from="patch"), path, base, patch
    )
    assert judged.overlay is not None
    assert judged.overlay.rev == patch
    assert judged.targets == {"base": ids, "patch": ids}


SRC_LAYOUT = {
    "src/pkg/__init__.py": "from .core import total\n",
    "src/pkg/core.py": "from .util import add\n\n\ndef total(xs):\n    return sum(xs)\n",
    "src/pkg/util.py": "def add(a, b):\n    return a + b\n",
    "src/pkg/io.py": "def read():\n    return 1\n",
    "tests/conftest.py": "import pytest\n",
    "tests/test_core.py": "from pkg import total\n\n\ndef test_total():\n"
    "    assert total([1]) == 1\n",
    "tests/test_io.py": "from pkg.io import read\n\n\ndef test_read():\n    assert read() == 1\n"
    "\n\ndef test_more():\n    assert read() > 0\n",
    "tests/unit/test_plain.py": "def test_plain():\n    assert True\n",
}


def test_changed_follows_the_import_graph_of_a_src_layout(tmp_path):
    path = init(tmp_path / "src-repo")
    base = commit(path, SRC_LAYOUT, "base")
    util = commit(path, {"src/pkg/util.py": "def add(a, b):\n    return b + a\n"}, "util")
    chosen = select_changed_tests(path, base, util, ())
    # pkg/__init__ imports core, core imports util: every test that imports pkg is chosen.
    assert chosen.changed_modules == ("src/pkg/util.py",)
    assert chosen.selected == (
        "tests/test_core.py::test_total",
        "tests/test_io.py::test_read",
        "tests/test_io.py::test_more",
    )
    assert len(chosen.candidates) == 4
    git(path, "checkout", "-q", base)
    body = commit(
        path,
        {"tests/test_io.py": SRC_LAYOUT["tests/test_io.py"].replace("> 0", ">= 1")},
        "one test body",
    )
    assert select_changed_tests(path, base, body, ()).selected == ("tests/test_io.py::test_more",)
    assert select_changed_tests(path, base, body, ("tests/unit",)).selected == ()


def test_the_rule_without_properties_comes_from_the_command(repo):
    path, base, patch = repo
    plan = plan_tests(
        options(path, base, patch, tests_from="patch", command="pytest -q tests/"),
        path,
        base,
        patch,
    )
    assert plan.overlay is not None
    expected = rule_for_tests((), ("tests/",), ())
    rule = plan.overlay.rule
    assert (rule.folders, rule.files, rule.extra) == (expected.folders, (), ())
    assert "tests/helpers.py" in plan.overlay.files
    assert plan.targets == {}
    # The patch deleted tests/old/test_old.py: no side runs its test, and the plan says so.
    assert plan.overlay.removed_tests == ("tests/old/test_old.py::test_old",)


# --- pytest's configuration: a doctest in docs/, data beside it ------------------------------

DOCS_LIB = "def double(x):\n    return {body}\n"
USAGE = "Usage\n=====\n\n>>> from lib import double\n>>> double({arg})\n{out}\n"
DOCS_TESTS = "import lib\n\n\ndef test_double():\n    assert lib.double(2) == 4\n"
FIX_TEST = "\n\ndef test_fix():\n    assert lib.double(-1) == -2\n"


@pytest.fixture
def docs_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """base: tox.ini searches tests/ and docs/ and runs *.rst as doctests; the patch fixes
    the code and updates the doctest in docs/usage.rst with it, and adds a test."""
    path = init(tmp_path / "docs-repo")
    tox = "[pytest]\ntestpaths = tests docs\naddopts = --doctest-glob='*.rst'\n"
    base = commit(path, {
        "tox.ini": tox, "lib.py": DOCS_LIB.format(body="abs(x) * 2"),
        "tests/test_lib.py": DOCS_TESTS, "docs/usage.rst": USAGE.format(arg=2, out=4),
        "docs/conf.py": "project = 'lib'\n", "src/README.rst": ">>> 1\n1\n",
    }, "base")  # fmt: skip
    patch = commit(path, {
        "lib.py": DOCS_LIB.format(body="x * 2"),
        "tests/test_lib.py": DOCS_TESTS + FIX_TEST,
        "docs/usage.rst": USAGE.format(arg=-2, out=-4),
    }, "fix")  # fmt: skip
    return path, base, patch


def test_the_overlay_takes_the_doctests_pytests_configuration_collects(docs_repo, private_tmp):
    path, base, patch = docs_repo
    plan = plan_tests(options(path, base, patch, tests_from="patch"), path, base, patch)
    overlay = plan.overlay
    assert overlay is not None
    assert dict(overlay.rule.collected) == {"docs/usage.rst": "--doctest-glob *.rst"}
    assert set(overlay.files) == {"tests/test_lib.py", "docs/usage.rst"}  # not conf.py, src/
    assert overlay.summary() == (
        "1 file from tests/ and 1 file by --doctest-glob *.rst laid over each tree"
    )
    assert overlay.rule.config is not None
    assert overlay.rule.config.where == ("tox.ini at base", "tox.ini at patch")
    with git_adapter.checkout(path, base, tests=overlay.side("base")) as tree:
        assert "double(-2)" in (tree / "docs/usage.rst").read_text()
        assert "abs(x)" in (tree / "lib.py").read_text()  # the code stays the base's
    # Both sides compare one doctest: its oracle no longer differs.
    doctest = "docs/usage.rst::usage.rst"
    judged = property_oracles(path, base, patch, [doctest], overlay=overlay)
    assert not judged[doctest].changed
    assert plan.overlay.removed_tests == ()


def test_a_doctest_the_overlay_leaves_alone_names_the_option_that_lays_it_over(tmp_path):
    path = init(tmp_path / "plain")
    base = commit(path, {"lib.py": "X = 1\n", "tests/test_x.py": "def test_x():\n    pass\n",
                         "docs/usage.rst": ">>> 1\n1\n"}, "base")  # fmt: skip
    patch = commit(path, {"docs/usage.rst": ">>> 2\n2\n"}, "docs")
    plan = plan_tests(options(path, base, patch, tests_from="patch"), path, base, patch)
    assert plan.overlay is not None
    doctest = "docs/usage.rst::usage.rst"  # run by a command that names it, say
    (change,) = property_oracles(path, base, patch, [doctest], overlay=plan.overlay).values()
    # What the decision says of it (core.replay_run.decide_all explains every change so).
    change = explain_not_laid_over(change, plan.overlay)
    assert change.reason_texts == (
        "doctest usage.rst: docs/usage.rst is not laid over"
        " (--test-path docs/usage.rst lays it over)",
    )
    laid = plan_tests(
        options(path, base, patch, tests_from="patch", test_paths=("docs",)), path, base, patch
    )
    assert laid.overlay is not None
    assert not property_oracles(path, base, patch, [doctest], overlay=laid.overlay)[doctest].changed


def test_a_revert_that_deletes_the_fixs_test_is_found_before_anything_runs(docs_repo):
    path, _base, fix = docs_repo
    revert = commit(path, {
        "lib.py": DOCS_LIB.format(body="abs(x) * 2"), "tests/test_lib.py": DOCS_TESTS,
        "docs/usage.rst": USAGE.format(arg=2, out=4),
    }, "revert")  # fmt: skip
    plan = plan_tests(options(path, fix, revert, tests_from="patch"), path, fix, revert)
    assert plan.overlay is not None
    assert plan.overlay.removed_tests == ("tests/test_lib.py::test_fix",)
    assert plan.overlay.removed_tests_line() == (
        "the patch removes 1 test the base has (tests/test_lib.py::test_fix):"
        " they judge neither side"
    )
    assert plan.overlay.to_json()["removed_tests"] == ["tests/test_lib.py::test_fix"]
    # Named tests are what they are: nothing to report.
    one = ("tests/test_lib.py::test_double",)
    named = plan_tests(
        options(path, fix, revert, tests_from="patch", property_ids=one), path, fix, revert
    )
    assert named.overlay is not None
    assert named.overlay.removed_tests == ()


def test_the_patchs_own_configuration_never_lays_code_over_unless_its_tests_judge(tmp_path):
    """A patch that names its code a test module (python_files = lib*.py) would have the
    base's code laid over it under --tests-from base: its configuration does not count."""
    path = init(tmp_path / "config")
    base = commit(path, {"lib.py": "X = 1\n", "tests/test_x.py": "def test_x():\n    pass\n"}, "b")
    patch = commit(
        path, {"lib.py": "X = 2\n", "pytest.ini": "[pytest]\npython_files = lib*.py\n"}, "p"
    )
    judged_by_base = plan_tests(options(path, base, patch, tests_from="base"), path, base, patch)
    assert judged_by_base.overlay is not None
    assert not judged_by_base.overlay.takes("lib.py")
    assert judged_by_base.overlay.rule.config is not None
    assert judged_by_base.overlay.rule.config.where == ()  # the base has no ini file
    # Under --tests-from patch the patch's tests judge, and its configuration with them.
    judged_by_patch = plan_tests(options(path, base, patch, tests_from="patch"), path, base, patch)
    assert judged_by_patch.overlay is not None
    assert judged_by_patch.overlay.takes("lib.py")


def test_a_whole_suites_deadline_comes_from_its_recorded_durations(docs_repo):
    from orchestrator.services.replay_plan import plan_deadline

    path, base, patch = docs_repo
    unset = options(path, base, patch, timeout_source=None)
    tests = plan_tests(unset, path, base, patch)
    none = plan_deadline(unset, path, (base, patch), tests, {})
    assert (none.timeout_s, none.rule) == (1800.0, "the whole-suite default (no record)")
    record = {"tests/test_lib.py::test_double": 300_000.0, "docs/usage.rst::usage.rst": 100_000.0,
              "tests/test_gone.py::test_x": 900_000.0}  # fmt: skip
    found = plan_deadline(unset, path, (base, patch), tests, record)
    assert found.timeout_s == 3 * 400 + 60
    assert found.rule == "recorded durations: 3 x 400.0 s (2 tests) + 60 s, at least 600 s"
    # A --timeout (or the project's timeout =) wins; named tests keep a minute.
    given = options(path, base, patch, timeout_s=7.0)
    assert plan_deadline(given, path, (base, patch), tests, record).timeout_s == 7.0
    named = options(
        path, base, patch, timeout_source=None, property_ids=("tests/test_lib.py::test_double",)
    )
    assert plan_deadline(named, path, (base, patch), tests, record).timeout_s == 60.0
