"""Each property's oracle on two revisions of a real git repository built here (no engine)."""

from __future__ import annotations

import pytest
from support.scratch_git import commit, git, init

from orchestrator.core.oracle import NEW_ON_PATCH_HINT
from orchestrator.services.oracle import oracle_files, property_oracles

TESTS = """\
import pytest

from lib import add


def only_b(x):
    return add(x, 1)


def test_a(offset):
    assert add(1, offset) == 2


def test_b():
    assert only_b(1) == 2


class TestOld:
    def test_x(self):
        assert add(0, 0) == 0
"""
CONFTEST = """\
import pytest


@pytest.fixture
def offset():
    return 1
"""
A = "tests/test_mod.py::test_a"
B = "tests/test_mod.py::test_b"
X = "tests/test_mod.py::TestOld::test_x"
NEW = "tests/test_mod.py::test_new"
RENAMED = "tests/test_mod.py::TestNew::test_x"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    path = init(tmp_path_factory.mktemp("oracle") / "repo")
    base = commit(
        path,
        {"lib.py": "def add(a, b):\n    return a + b\n", "tests/conftest.py": CONFTEST,
         "tests/test_mod.py": TESTS},
        "base",
    )  # fmt: skip
    return path, base


def patched(repo, files: dict[str, str]) -> str:
    path, base = repo
    git(path, "checkout", "-q", base)
    return commit(path, files, "patch")


def reasons_of(repo, files: dict[str, str], *properties: str) -> dict[str, tuple[str, ...]]:
    path, base = repo
    found = property_oracles(path, base, patched(repo, files), properties)
    for change in found.values():
        assert change.changed is bool(change.reasons)
    return {property_id: change.reason_texts for property_id, change in found.items()}


def test_a_test_added_above_the_others_is_new_and_its_neighbours_are_unchanged(repo):
    added = TESTS.replace(
        "def test_a(offset):", "def test_new():\n    assert add(2, 2) == 4\n\n\ndef test_a(offset):"
    )
    found = reasons_of(repo, {"tests/test_mod.py": added}, A, B, X, NEW)
    assert found == {A: (), B: (), X: (), NEW: (f"new on patch: {NEW_ON_PATCH_HINT}",)}


def test_one_body_edited_one_helper_edited_a_test_removed_a_class_renamed(repo):
    edited = (
        TESTS.replace("add(1, offset) == 2", "add(offset, 1) == 2")
        .replace("class TestOld:", "class TestNew:")
        .replace("return add(x, 1)", "return add(1, x)")
    )
    found = reasons_of(repo, {"tests/test_mod.py": edited}, A, B, X, RENAMED)
    assert found == {
        A: ("test body",),
        B: ("helper only_b",),
        X: ("gone on patch",),
        RENAMED: (f"new on patch: {NEW_ON_PATCH_HINT}",),
    }


def test_a_conftest_fixture_edit_changes_every_test_below_it(repo):
    edited = CONFTEST.replace("return 1", "return 2")
    found = reasons_of(repo, {"tests/conftest.py": edited}, A, B)
    assert found == {A: ("conftest.py tests/conftest.py",), B: ("conftest.py tests/conftest.py",)}


def test_a_file_that_does_not_parse_on_patch_is_compared_whole(repo):
    broken = TESTS + "\ndef test_broken(:\n"
    path, base = repo
    found = property_oracles(path, base, patched(repo, {"tests/test_mod.py": broken}), [A])
    (reason,) = found[A].reasons
    assert str(reason).startswith("whole file tests/test_mod.py: does not parse on patch")
    assert found[A].whole_file


def test_digests_are_per_property_and_equal_on_an_unchanged_revision(repo):
    path, base = repo
    found = property_oracles(path, base, base, [A, B])
    assert found[A].base_digest == found[A].patch_digest
    assert found[A].base_digest != found[B].base_digest
    assert not found[A].changed


@pytest.mark.parametrize(
    ("property_id", "expected"),
    [
        (A, ("tests/test_mod.py", ("conftest.py", "tests/conftest.py"))),
        ("/etc/passwd::test_x", ("", ())),
        ("../elsewhere.py::test_x", ("", ())),
    ],
)
def test_oracle_files_are_the_module_and_the_conftests_above(property_id, expected):
    assert oracle_files(property_id) == expected


def test_the_lazy_oracle_gives_what_compare_inputs_gives_one_property_at_a_time(repo):
    """Settling a whole suite compares each quiet property's oracle when it is decided
    (services.screening.settle): the values are those compare_inputs makes at once."""
    from orchestrator.services.oracle import (
        LazyOracle,
        OracleComparer,
        compare_inputs,
        oracle_inputs,
    )

    path, base = repo
    patch = patched(repo, {"tests/test_mod.py": TESTS.replace("add(0, 0)", "add(0, 1) - 1")})
    ids = [A, B, X]
    inputs = oracle_inputs(path, base, patch, ids)
    whole = compare_inputs(inputs)
    assert whole[X].changed
    assert not whole[A].changed
    known = {X: whole[X]}
    comparer = OracleComparer()
    try:
        lazy = LazyOracle(known, {p: inputs[p] for p in ids if p != X}, comparer)
        assert lazy.get(NEW) is None
        assert NEW not in lazy
        assert sorted(lazy) == sorted(ids)
        assert len(lazy) == 3
        for property_id in reversed(ids):  # in any order, asked twice
            assert lazy[property_id] == whole[property_id]
            assert lazy.get(property_id) == whole[property_id]
    finally:
        comparer.close()


def test_the_unchanged_oracles_sliced_in_a_helper_process_are_the_ones_made_here(repo, monkeypatch):
    """A whole suite's unchanged properties are sliced in a helper process while settle
    decides (services.screening.settle): the same values, taken in order or not."""
    from orchestrator.adapters.helper_process import HelperProcess
    from orchestrator.services.oracle import (
        LazyOracle,
        OracleComparer,
        compare_inputs,
        oracle_inputs,
        same_files,
        unchanged_ahead,
    )

    monkeypatch.setattr("orchestrator.services.oracle.HELPER_CHUNK", 2)  # several chunks
    path, _ = repo
    helper_files = {"tests/test_more.py": TESTS.replace("test_", "test_more_")}
    base = patched(repo, helper_files)
    patch = patched(repo, {**helper_files, "lib.py": "def add(a, b):\n    return b + a\n"})
    more = [f"tests/test_more.py::{name}" for name in ("test_more_a", "test_more_b")]
    ids = [A, B, X, *more, "tests/test_more.py::TestOld::test_more_x", NEW]
    inputs = oracle_inputs(path, base, patch, ids)
    unchanged = {p: pair for p, pair in inputs.items() if same_files(pair)}
    assert set(unchanged) == set(ids)  # only lib.py differs
    expected = compare_inputs(inputs)
    for asked in (ids, list(reversed(ids))):
        comparer = OracleComparer()
        with HelperProcess(ahead=1) as helper:
            helper.start()
            ahead = unchanged_ahead(ids, unchanged, comparer, helper)
            lazy = LazyOracle({}, unchanged, comparer, ahead)
            assert [lazy[p] for p in asked] == [expected[p] for p in asked]
            assert not helper.failed
        comparer.close()
