"""The decision table of lanes.md section 3, row by row, plus seed 001's examples."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples
from unit_factories import ASSERTION, OTHER_ASSERTION, evidence, replay, side

from orchestrator.core.lanes import decide
from orchestrator.model import Evidence, Lane, Replay, ShrinkSummary

P, F, T, H, S = "assert_pass", "assert_fail", "timeout", "harness_error", "skipped"


def lane_code(ev: Evidence) -> tuple[str, str]:
    decision = decide(ev)
    return decision.lane.value, decision.code


# --- row 1: malformed evidence ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "base_rev",
        "patch_rev",
        "image_digest",
        "runner_id",
        "property_id",
        "fixture_digest",
        "seed",
        "command",
    ],
)
@pytest.mark.parametrize("missing", [None, ""])
def test_row_1_each_missing_required_field_has_its_own_code(name: str, missing: Any) -> None:
    if name == "seed" and missing == "":
        missing = None
    decision = decide(evidence(**{name: missing}))
    assert (decision.lane, decision.code) == (Lane.REJECT_MALFORMED, f"missing_field:{name}")
    assert not decision.freeze_allowed
    assert not decision.blocking


def test_row_1_reports_every_missing_field_in_reasons() -> None:
    decision = decide(evidence(base_rev=None, command=None))
    assert decision.code == "missing_field:base_rev"
    assert len(decision.reasons) == 2
    assert "command" in decision.reasons[1]


def test_row_1_seed_zero_is_not_missing() -> None:
    assert decide(evidence(seed=0)).lane is Lane.NO_FREEZE


def test_row_1_replay_count_differs_from_declared() -> None:
    assert lane_code(evidence(replays=5)) == ("reject_malformed", "replay_count")
    short_patch = evidence(patch=side(P, P))
    assert lane_code(short_patch) == ("reject_malformed", "replay_count")
    assert lane_code(evidence(replays=None)) == ("reject_malformed", "missing_field:replays")


def test_row_1_unknown_label() -> None:
    assert lane_code(evidence(patch=side(P, "assert_maybe", P))) == (
        "reject_malformed",
        "unknown_label",
    )


def test_row_1_image_and_runner_mismatch_between_sides() -> None:
    other_image = "sha256:" + "2" * 64
    on_other_image = side(P, P, P, image_digest=other_image)
    assert lane_code(evidence(patch=on_other_image)) == ("reject_malformed", "image_mismatch")
    on_other_runner = side(P, P, P, runner_id="ci-7")
    assert lane_code(evidence(base=on_other_runner)) == ("reject_malformed", "runner_mismatch")
    same = side(P, P, P, image_digest="sha256:" + "1" * 64, runner_id="local")
    assert lane_code(evidence(base=same, patch=same)) == ("no_freeze", "not_reproduced")


def test_row_1_wins_over_every_later_row() -> None:
    ev = evidence(base=side(T, T, T), oracle_changed=True, command=None)
    assert lane_code(ev) == ("reject_malformed", "missing_field:command")


# --- rows 2-4 ---------------------------------------------------------------------------


def test_row_2_oracle_changed_rejects_the_run_before_infra() -> None:
    ev = evidence(patch=side(T, P, P), oracle_changed=True)
    decision = decide(ev)
    assert (decision.lane, decision.code, decision.blocking) == (
        Lane.REJECT_RUN,
        "oracle_changed",
        True,
    )


DIGEST_A, DIGEST_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.mark.parametrize(
    ("base_digest", "patch_digest", "flag", "moved"),
    [
        (DIGEST_A, DIGEST_A, False, False),
        (DIGEST_A, DIGEST_B, False, True),
        (None, DIGEST_B, False, True),  # new on patch
        (DIGEST_A, None, False, True),  # gone on patch
        (None, None, False, False),  # no digests: the flag decides
        (None, None, True, True),
        (DIGEST_A, DIGEST_A, True, True),  # another CI system's flag still counts
    ],
)
def test_row_2_uses_the_oracle_digests_when_present(
    base_digest: str | None, patch_digest: str | None, flag: bool, moved: bool
) -> None:
    ev = evidence(
        patch=side(F, F, F),
        base_oracle_digest=base_digest,
        patch_oracle_digest=patch_digest,
        oracle_changed=flag,
    )
    assert (decide(ev).code == "oracle_changed") is moved


def test_row_2_reasons_say_what_changed() -> None:
    ev = evidence(
        base_oracle_digest=DIGEST_A,
        patch_oracle_digest=DIGEST_B,
        oracle_changed=True,
        oracle_reasons=("test body", "helper make_list"),
    )
    assert decide(ev).reasons == ("test body", "helper make_list")
    bare = decide(evidence(base_oracle_digest=DIGEST_A, patch_oracle_digest=DIGEST_B))
    assert bare.reasons == (f"the oracle digest differs: base {DIGEST_A} vs patch {DIGEST_B}",)
    flag_only = decide(evidence(oracle_changed=True))
    assert "differs between the sides" in flag_only.reasons[0]


MADE_ON_PATCH = "new on patch: collected on one side only under the same test files"
MADE_ON_BASE = "gone on patch: collected on one side only under the same test files"
NOT_FOUND = {"reason": "not_found"}


@pytest.mark.parametrize(
    ("patch", "lane", "code", "blocking"),
    [
        ((P, P, P), Lane.NO_FREEZE, "only_on_patch", False),
        ((F, F, F), Lane.PROPERTY_REGRESSION, "fails_only_on_patch", True),
        ((P, F, P), Lane.PROPERTY_REGRESSION, "fails_only_on_patch", True),
        ((S, S, S), Lane.NO_FREEZE, "skipped", False),
        ((P, T, P), Lane.INFRA_QUEUE, "timeout", False),
    ],
)
def test_row_2a_a_test_the_code_made_on_the_patch_only_is_judged_on_the_patch(
    patch: tuple[str, ...], lane: Lane, code: str, blocking: bool
) -> None:
    """Under one revision's test files, a test collected on the patch only came from the
    code under test (a parametrization over its data): judged alone, as row 4a does."""
    ev = evidence(
        base=side(H, H, H, **NOT_FOUND),
        patch=side(*patch),
        base_oracle_digest=None,
        patch_oracle_digest=DIGEST_A,
        oracle_changed=True,
        oracle_reasons=(MADE_ON_PATCH,),
        tests_from="b" * 40,
    )
    decision = decide(ev)
    assert (decision.lane, decision.code, decision.blocking) == (lane, code, blocking)
    assert decision.reasons[0] == f"{MADE_ON_PATCH} (the code under test makes its id)"


def test_row_2a_a_test_the_code_made_on_base_only_is_shown_not_blocked() -> None:
    ev = evidence(
        base=side(P, P, P),
        patch=side(H, H, H, **NOT_FOUND),
        base_oracle_digest=DIGEST_A,
        patch_oracle_digest=None,
        oracle_changed=True,
        oracle_reasons=(MADE_ON_BASE,),
        tests_from="b" * 40,
    )
    decision = decide(ev)
    assert (decision.lane, decision.code, decision.blocking) == (
        Lane.NO_FREEZE,
        "only_on_base",
        False,
    )
    assert decision.reasons[1] == "base P: the patch no longer has it"


@pytest.mark.parametrize(
    "reasons",
    [
        ("new on patch: replay with --tests-from patch to ask whether it fails on base",),
        (MADE_ON_PATCH, "test body"),
        ("test body",),
    ],
)
def test_row_2a_is_only_for_a_test_the_code_made(reasons: tuple[str, ...]) -> None:
    """A test the pull request's own test files add or change is still row 2."""
    ev = evidence(
        base_oracle_digest=None,
        patch_oracle_digest=DIGEST_A,
        oracle_changed=True,
        oracle_reasons=reasons,
    )
    assert (decide(ev).lane, decide(ev).code) == (Lane.REJECT_RUN, "oracle_changed")


@pytest.mark.parametrize(
    ("base", "patch", "code"),
    [
        ((P, P, P), (P, T, P), "timeout"),
        ((H, P, P), (F, F, F), "harness_error"),
        ((H, P, P), (T, F, F), "timeout"),
        ((F, P, F), (F, H, P), "harness_error"),
    ],
)
def test_row_3_any_timeout_or_harness_error_goes_to_infra(
    base: tuple[str, ...], patch: tuple[str, ...], code: str
) -> None:
    decision = decide(evidence(base=side(*base), patch=side(*patch)))
    assert (decision.lane, decision.code) == (Lane.INFRA_QUEUE, code)
    assert not decision.freeze_allowed
    assert decision.lane.exit_status == 3


def test_row_3_comes_before_an_unstable_shrink() -> None:
    unstable = ShrinkSummary(attempts=2, identical_minima=1, stable=False)
    assert decide(evidence(patch=side(P, H, P), shrink=unstable)).lane is Lane.INFRA_QUEUE


@pytest.mark.parametrize(
    "summary",
    [
        ShrinkSummary(attempts=1, identical_minima=1, stable=True),
        ShrinkSummary(attempts=2, identical_minima=1, stable=False),
        ShrinkSummary(attempts=3, identical_minima=2, stable=True),
        ShrinkSummary(attempts=2, identical_minima=2, stable=False),
    ],
)
def test_row_4_unstable_shrink_reruns(summary: ShrinkSummary) -> None:
    assert lane_code(evidence(shrink=summary)) == ("rerun_shrink", "shrink_unstable")


def test_row_4_does_not_apply_without_a_shrink_report() -> None:
    assert decide(evidence(shrink=None)).lane is Lane.NO_FREEZE


# --- row 5: call budget -----------------------------------------------------------------


def test_row_5_matching_output_with_moved_budget_is_a_regression() -> None:
    decision = decide(evidence(patch=side(P, P, P, calls={"clock": 2})))
    assert (decision.lane, decision.code) == (Lane.PROPERTY_REGRESSION, "call_budget")
    assert decision.reasons == ("clock: base {1} vs patch {2}",)


def test_row_5_names_each_moved_dependency_and_absent_counts_as_zero() -> None:
    base = side(P, P, P, calls={"clock": 1, "open": 2})
    patch = side(P, P, P, calls={"clock": 1, "sleep": 1})
    decision = decide(evidence(base=base, patch=patch))
    assert decision.reasons == ("open: base {2} vs patch {0}", "sleep: base {0} vs patch {1}")


def test_row_5_compares_sets_so_equal_variation_is_not_a_change() -> None:
    varying = (
        replay(P, calls={"clock": 1}),
        replay(P, calls={"clock": 2}),
        replay(P, calls={"clock": 1}),
    )
    reordered = (varying[1], varying[0], varying[0])
    assert decide(evidence(base=varying, patch=reordered)).lane is Lane.NO_FREEZE
    narrower = side(P, P, P, calls={"clock": 1})
    decision = decide(evidence(base=varying, patch=narrower))
    assert decision.reasons == ("clock: base {1, 2} vs patch {1}",)


def test_row_5_comes_before_the_outcome_rows() -> None:
    ev = evidence(base=side(F, P, F), patch=side(F, P, F, calls={"clock": 3}))
    assert lane_code(ev) == ("property_regression", "call_budget")


# --- rows 6-12: outcomes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "patch", "lane", "code"),
    [
        ((P, P, P), (F, F, F), "property_regression", "assertion_regression"),  # row 6
        ((P, P, P), (F, P, P), "property_regression", "new_instability"),  # row 7
        ((P, P, P), (P, P, P), "no_freeze", "not_reproduced"),  # row 8
        ((F, P, F), (P, P, P), "fix_candidate", "fix_candidate"),  # row 9, base M
        ((F, F, F), (P, P, P), "fix_candidate", "fix_candidate"),  # row 9, base F
        ((F, F, F), (F, F, F), "block_patch", "uniform_failure"),  # row 11, base F
        ((P, F, F), (F, F, F), "block_patch", "uniform_failure"),  # row 11, base M
        ((F, F, F), (F, P, F), "flake_queue_eligible", "flake_queue_eligible"),  # row 12
        ((P, F, P), (F, P, P), "flake_queue_eligible", "flake_queue_eligible"),  # row 12
    ],
)
def test_outcome_rows(base: tuple[str, ...], patch: tuple[str, ...], lane: str, code: str) -> None:
    decision = decide(evidence(base=side(*base), patch=side(*patch)))
    assert (decision.lane.value, decision.code) == (lane, code)
    assert decision.blocking is decision.lane.blocking
    assert decision.freeze_allowed is (lane == "flake_queue_eligible")


def test_row_10_different_failing_assertions_are_a_different_bug() -> None:
    base = side(F, F, F)
    patch = side(F, P, F, assertion_id=OTHER_ASSERTION)
    decision = decide(evidence(base=base, patch=patch))
    assert (decision.lane, decision.code) == (Lane.DIFFERENT_BUG, "different_assertion")
    assert decision.blocking
    assert OTHER_ASSERTION in decision.reasons[0]


# Lines inserted above the test shift the id's line on the patch, never the key.
SHIFTED = ASSERTION.replace(":9:", ":14:")
KEY = "tests/test_budget.py::test_clock_budget@test_clock_budget+4:AssertionError"


def test_rows_10_to_12_compare_keys_when_ids_differ_only_by_line() -> None:
    base = side(F, P, F, assertion_key=KEY)
    flake = side(P, F, F, assertion_id=SHIFTED, assertion_key=KEY)
    decision = decide(evidence(base=base, patch=flake))
    assert (decision.lane, decision.code) == (Lane.FLAKE_QUEUE_ELIGIBLE, "flake_queue_eligible")
    assert decision.freeze_allowed
    assert SHIFTED in decision.reasons[0]  # the reasons name the readable id
    uniform = side(F, F, F, assertion_id=SHIFTED, assertion_key=KEY)
    blocked = decide(evidence(base=side(F, F, F, assertion_key=KEY), patch=uniform))
    assert (blocked.lane, blocked.code) == (Lane.BLOCK_PATCH, "uniform_failure")
    other_key = side(F, F, F, assertion_key=KEY.replace("+4", "+5"))
    moved = decide(evidence(base=side(F, F, F, assertion_key=KEY), patch=other_key))
    assert (moved.lane, moved.code) == (Lane.DIFFERENT_BUG, "different_assertion")


def test_rows_10_to_12_compare_ids_when_a_failure_has_no_key() -> None:
    # A document from another CI system: some failing replays carry no key.
    base = side(F, P, F, assertion_key=KEY)
    patch = side(P, F, F, assertion_id=SHIFTED)
    decision = decide(evidence(base=base, patch=patch))
    assert (decision.lane, decision.code) == (Lane.DIFFERENT_BUG, "different_assertion")
    same_ids = decide(evidence(base=side(F, P, F, assertion_key=KEY), patch=side(P, F, F)))
    assert same_ids.lane is Lane.FLAKE_QUEUE_ELIGIBLE


def test_row_11_says_the_base_fails_too() -> None:
    decision = decide(evidence(base=side(F, F, F), patch=side(F, F, F)))
    assert decision.reasons[0] == "fails_on_base_too"


# --- seed 001's test_classifier_examples, through the reconciled table --------------------


def seed_001_evidence(
    base_passed: bool,
    patch_passed: bool,
    same_assertion: bool,
    shrink_stable: bool,
    base_calls: int,
    patch_calls: int,
    oracle_changed: bool,
    *,
    patch_mixed: bool = False,
) -> Evidence:
    base = (
        side(P, P, P, calls={"clock": base_calls})
        if base_passed
        else side(F, F, F, calls={"clock": base_calls})
    )
    patch_id = ASSERTION if same_assertion else OTHER_ASSERTION
    labels = (F, P, F) if patch_mixed else ((P, P, P) if patch_passed else (F, F, F))
    patch = tuple(
        replay(
            label,
            calls={"clock": patch_calls},
            **({"assertion_id": patch_id} if label == F else {}),
        )
        for label in labels
    )
    stable = ShrinkSummary(
        attempts=2, identical_minima=2 if shrink_stable else 1, stable=shrink_stable
    )
    return evidence(base=base, patch=patch, shrink=stable, oracle_changed=oracle_changed)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((True, True, True, True, 1, 2, False), "property_regression"),
        ((False, False, True, False, 1, 1, False), "rerun_shrink"),
        ((True, False, True, True, 1, 1, False), "property_regression"),
        ((False, True, True, True, 1, 1, False), "fix_candidate"),
        ((True, True, True, True, 1, 1, True), "reject_run"),
        ((True, True, True, True, 1, 1, False), "no_freeze"),
    ],
)
def test_seed_001_classifier_examples(args: tuple[Any, ...], expected: str) -> None:
    assert decide(seed_001_evidence(*args)).lane.value == expected


def test_seed_001_fail_fail_same_assertion_is_eligible_only_when_the_patch_is_mixed() -> None:
    # Seed 001 calls fail/fail/same "flake_queue_eligible"; lanes.md splits it: a uniform
    # failure on the patch blocks it (row 11), a mixed patch is eligible (row 12).
    uniform = decide(seed_001_evidence(False, False, True, True, 1, 1, False))
    assert (uniform.lane, uniform.reasons[0]) == (Lane.BLOCK_PATCH, "fails_on_base_too")
    mixed = decide(seed_001_evidence(False, False, True, True, 1, 1, False, patch_mixed=True))
    assert mixed.lane is Lane.FLAKE_QUEUE_ELIGIBLE
    assert mixed.freeze_allowed


def test_seed_001_retry_disguise_never_reaches_the_flake_queue() -> None:
    ev = seed_001_evidence(False, False, True, True, 1, 2, False, patch_mixed=True)
    assert lane_code(ev) == ("property_regression", "call_budget")


def test_decision_json_has_no_merge_bit() -> None:
    doc = decide(evidence()).to_json()
    assert set(doc) == {"schema", "lane", "code", "blocking", "freeze_allowed", "reasons"}


# --- properties -------------------------------------------------------------------------

labels = st.sampled_from([P, P, F, F, T, H, "skipped", "assert_maybe"])
replays = st.builds(
    Replay,
    label=labels,
    assertion_id=st.sampled_from([None, ASSERTION, OTHER_ASSERTION]),
    assertion_key=st.sampled_from([None, ASSERTION, OTHER_ASSERTION]),
    calls=st.dictionaries(
        st.sampled_from(["clock", "open", "sleep"]), st.integers(0, 3), max_size=2
    ),
    duration_ms=st.none() | st.floats(0, 100),
    image_digest=st.sampled_from([None, None, None, "sha256:" + "1" * 64, "sha256:other"]),
    runner_id=st.sampled_from([None, None, None, "local", "ci-7"]),
)
shrinks = st.none() | st.builds(
    ShrinkSummary,
    attempts=st.integers(0, 3),
    identical_minima=st.integers(0, 3),
    stable=st.booleans(),
)


@st.composite
def any_evidence(draw: st.DrawFn) -> Evidence:
    n = draw(st.integers(1, 4))
    base = tuple(draw(st.lists(replays, min_size=n, max_size=n + draw(st.integers(0, 1)))))
    patch = tuple(draw(st.lists(replays, min_size=n, max_size=n)))
    ev = evidence(
        base=base,
        patch=patch,
        replays=n,
        shrink=draw(shrinks),
        oracle_changed=draw(st.booleans()),
        base_oracle_digest=draw(st.sampled_from([None, "sha256:a", "sha256:b"])),
        patch_oracle_digest=draw(st.sampled_from([None, "sha256:a", "sha256:b"])),
    )
    if draw(st.booleans()):
        name = draw(st.sampled_from(["base_rev", "seed", "command", "runner_id"]))
        ev = dataclasses.replace(ev, **{name: None})
    return ev


@settings(max_examples=examples(100), deadline=None)
@given(any_evidence())
def test_decide_is_total_and_deterministic(ev: Evidence) -> None:
    first, second = decide(ev), decide(ev)
    assert first == second
    assert isinstance(first.lane, Lane)
    assert first.blocking is first.lane.blocking
    assert first.freeze_allowed is (first.lane is Lane.FLAKE_QUEUE_ELIGIBLE)


@settings(max_examples=examples(100), deadline=None)
@given(any_evidence(), st.randoms(use_true_random=False))
def test_permuting_replays_within_a_side_never_changes_the_decision(ev: Evidence, rng: Any) -> None:
    base, patch = list(ev.base), list(ev.patch)
    rng.shuffle(base)
    rng.shuffle(patch)
    assert decide(dataclasses.replace(ev, base=tuple(base), patch=tuple(patch))) == decide(ev)


@settings(max_examples=examples(100), deadline=None)
@given(any_evidence())
def test_no_timeout_or_harness_error_ever_allows_a_freeze(ev: Evidence) -> None:
    if any(r.label in (T, H) for r in (*ev.base, *ev.patch)):
        assert not decide(ev).freeze_allowed


@settings(max_examples=examples(100), deadline=None)
@given(any_evidence())
def test_a_freeze_needs_a_mixed_patch_of_completed_replays(ev: Evidence) -> None:
    if decide(ev).freeze_allowed:
        patch_labels = {r.label for r in ev.patch} - {"skipped"}
        assert patch_labels == {P, F}
        assert {r.label for r in ev.base} <= {P, F, "skipped"}


@pytest.mark.parametrize(
    ("wrong", "error"),
    [
        ({"patch": (replay(P, calls={"clock": "many"}),) * 3}, TypeError),  # a count, not a number
        ({"replays": "3"}, TypeError),  # a declared count that is not a number
        ({"shrink": "stable"}, AttributeError),  # a shrink report that is not one
    ],
)
def test_a_value_of_the_wrong_type_is_a_bug_that_raises_not_a_verdict(
    wrong: dict[str, Any], error: type[Exception]
) -> None:
    # parse_evidence never builds these (its documents are typed, see test_core_records.py):
    # only code can, and a classifier that turned its own slip into reject_malformed would
    # hide the bug behind a calm verdict.
    with pytest.raises(error):
        decide(evidence(**wrong))


def test_a_classifier_bug_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.core import lanes

    def typo(replays: Any) -> Any:
        return replays.lable  # the kind of slip a refactoring leaves behind

    monkeypatch.setattr(lanes, "side_state", typo)
    with pytest.raises(AttributeError):
        decide(evidence())


@given(any_evidence(), st.sampled_from(["3" * 40, "4" * 40]))
def test_tests_from_changes_no_lane_and_the_decision_names_it(ev: Evidence, sha: str) -> None:
    plain = decide(ev)
    judged = decide(dataclasses.replace(ev, tests_from=sha))
    assert judged == dataclasses.replace(plain, tests_from=sha)
    assert judged.to_json()["tests_from"] == sha
    assert "tests_from" not in plain.to_json()


def test_a_clean_fix_that_calls_more_is_a_fix_candidate_not_a_call_budget_regression() -> None:
    """Base fails every replay (and so stops early, calling less), the patch passes every
    one: row 9, not row 5. The same moved budget over a flaky base stays row 5."""
    fails = side("assert_fail", "assert_fail", "assert_fail", calls={"clock": 1})
    passes = side("assert_pass", "assert_pass", "assert_pass", calls={"clock": 4})
    assert lane_code(evidence(base=fails, patch=passes)) == ("fix_candidate", "fix_candidate")
    flaky = side("assert_fail", "assert_pass", "assert_fail", calls={"clock": 1})
    assert lane_code(evidence(base=flaky, patch=passes)) == ("property_regression", "call_budget")
