"""A test module that imports on one side only, under --tests-from (core/one_sided_imports)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.one_sided_imports import DOES_NOT_IMPORT, IMPORTS, one_sided_imports
from orchestrator.model import Replay

SIDES = ("base", "patch")
MODULE = "tests/test_new.py"
TEST = f"{MODULE}::test_new"
OTHER = "tests/test_old.py::test_old"

PASS = Replay(label="assert_pass", calls={"clock": 1})
FAIL = Replay(label="assert_fail", assertion_key="k")
BROKEN = Replay(label="harness_error", reason="collection_error", message="ImportError: x")
NOT_FOUND = Replay(label="harness_error", reason="not_found")


def forward(replays: int = 2) -> dict[str, dict[str, tuple[Replay, ...]]]:
    return {
        "base": {MODULE: (BROKEN,) * replays, TEST: (BROKEN,) * replays, OTHER: (PASS,) * replays},
        "patch": {
            MODULE: (NOT_FOUND,) * replays,
            TEST: (PASS,) * replays,
            OTHER: (PASS,) * replays,
        },
    }


def test_a_module_that_does_not_import_on_base_only_fails_there_and_passes_on_the_patch():
    read = one_sided_imports(forward(), sides=SIDES)
    assert {r.label for r in read["base"][TEST]} == {"assert_fail"}
    assert {r.reason for r in read["base"][TEST]} == {DOES_NOT_IMPORT}
    assert {r.assertion_key for r in read["base"][TEST]} == {f"{MODULE}:import"}
    assert "ImportError: x" in (read["base"][TEST][0].message or "")
    assert read["patch"][TEST] == (PASS, PASS)  # what ran is never touched
    assert {(r.label, r.reason) for r in read["base"][MODULE]} == {("assert_fail", DOES_NOT_IMPORT)}
    assert {(r.label, r.reason) for r in read["patch"][MODULE]} == {("assert_pass", IMPORTS)}
    assert read["base"][OTHER] == read["patch"][OTHER] == (PASS, PASS)


def test_a_module_broken_on_both_sides_stays_a_harness_error():
    labelled = forward()
    labelled["patch"][MODULE] = (BROKEN, BROKEN)
    labelled["patch"][TEST] = (BROKEN, BROKEN)
    assert one_sided_imports(labelled, sides=SIDES) == labelled


def test_a_test_absent_on_both_sides_is_left_alone():
    labelled = forward()
    labelled["patch"][TEST] = (NOT_FOUND, NOT_FOUND)
    read = one_sided_imports(labelled, sides=SIDES)
    assert read["base"][TEST] == (BROKEN, BROKEN)
    assert read["patch"][TEST] == (NOT_FOUND, NOT_FOUND)


replays = st.lists(st.sampled_from([PASS, FAIL, BROKEN, NOT_FOUND]), min_size=1, max_size=3).map(
    tuple
)
side = st.dictionaries(st.sampled_from([MODULE, TEST, OTHER, "tests/test_old.py"]), replays)


@given(base=side, patch=side)
def test_swapping_the_sides_swaps_the_reading(base, patch):
    read = one_sided_imports({"base": base, "patch": patch}, sides=SIDES)
    swapped = one_sided_imports({"patch": base, "base": patch}, sides=("patch", "base"))
    assert swapped == {"patch": read["base"], "base": read["patch"]}


@given(base=side, patch=side)
def test_only_harness_errors_are_ever_read_again_and_the_counts_stay(base, patch):
    read = one_sided_imports({"base": base, "patch": patch}, sides=SIDES)
    for name, given_side in (("base", base), ("patch", patch)):
        assert set(read[name]) == set(given_side)
        for property_id, before in given_side.items():
            after = read[name][property_id]
            assert len(after) == len(before)
            if after != before:
                assert {r.label for r in before} == {"harness_error"}


@given(base=side, patch=side)
def test_without_a_one_sided_collection_error_nothing_changes(base, patch):
    for labelled in (base, patch):
        for property_id, found in list(labelled.items()):
            if "::" not in property_id and all(r is BROKEN for r in found):
                labelled[property_id] = (PASS,) * len(found)
    assert one_sided_imports({"base": base, "patch": patch}, sides=SIDES) == {
        "base": base,
        "patch": patch,
    }
