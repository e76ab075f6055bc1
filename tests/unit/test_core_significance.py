"""The evidence rule (docs/lanes.md section 3b): exact tests, the verdicts they weigh, and
the rounds the core plans. Pure: every case is values in, values out."""

from __future__ import annotations

import itertools
from collections import Counter
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.evidence_rounds import (
    evidence_line,
    evidence_summary,
    round_plan,
    settled,
    weigh_outcomes,
)
from orchestrator.core.exact_tests import (
    fisher_floor,
    fisher_one_sided,
    split_floor,
    split_test,
)
from orchestrator.core.lanes import decide
from orchestrator.core.replay_run import PropertyOutcome
from orchestrator.core.significance import (
    WEAK,
    EvidencePolicy,
    at_stake,
    claim_of,
    count_at_stake,
    weigh,
)
from orchestrator.model import Evidence, Lane, Replay

KEY_A = "tests/t.py::test_x@test_x+1:AssertionError"
KEY_B = "tests/t.py::test_x@test_x+2:AssertionError"
P = Replay(label="assert_pass", calls={"clock": 1})
F = Replay(label="assert_fail", assertion_id="tests/t.py::test_x@tests/t.py:3:AssertionError",
           assertion_key=KEY_A, calls={"clock": 1})  # fmt: skip
F_B = Replay(label="assert_fail", assertion_id="tests/t.py::test_x@tests/t.py:4:AssertionError",
             assertion_key=KEY_B, calls={"clock": 1})  # fmt: skip


def calls(count: int) -> Replay:
    return Replay(label="assert_pass", calls={"clock": count})


def evidence(base, patch, property_id="tests/t.py::test_x") -> Evidence:
    return Evidence(
        base_rev="b" * 40, patch_rev="c" * 40, image_digest="sha256:" + "1" * 64,
        runner_id="local", command="pytest -q", property_id=property_id, seed=0,
        fixture_digest="sha256:" + "2" * 64, origin_digest="sha256:" + "2" * 64,
        oracle_changed=False, shrink=None, replays=len(base), base=tuple(base),
        patch=tuple(patch),
    )  # fmt: skip


def side(failed: int, replays: int) -> list[Replay]:
    return [F] * failed + [P] * (replays - failed)


# ---------------------------------------------------------------- the exact tests


def test_fisher_known_values():
    # The issue's case: one failure in three against none in three.
    assert fisher_one_sided(patch_failed=1, patch_runs=3, base_failed=0, base_runs=3) == 0.5
    # A deterministic regression at N = 5 and at 10: 1 / C(10, 5), 1 / C(20, 10).
    assert fisher_one_sided(patch_failed=5, patch_runs=5, base_failed=0, base_runs=5) == 1 / 252
    assert fisher_one_sided(patch_failed=10, patch_runs=10, base_failed=0, base_runs=10) == (
        1 / 184756
    )
    assert fisher_one_sided(patch_failed=0, patch_runs=5, base_failed=0, base_runs=5) == 1.0
    assert fisher_floor(failed=5, patch_runs=5, base_runs=5) == 1 / 252
    assert fisher_floor(failed=0, patch_runs=5, base_runs=5) == 1.0


def _hypergeometric(patch_runs, base_runs, failed):
    total = comb(patch_runs + base_runs, failed)
    return {
        x: comb(patch_runs, x) * comb(base_runs, failed - x) / total
        for x in range(max(0, failed - base_runs), min(failed, patch_runs) + 1)
    }


@given(
    patch_runs=st.integers(1, 15),
    base_runs=st.integers(1, 15),
    data=st.data(),
    level=st.sampled_from([0.001, 0.01, 0.05, 0.1, 0.5]),
)
def test_fisher_is_a_valid_exact_test(patch_runs, base_runs, data, level):
    """Under the null (the pooled failures fall on the replays at random), the chance of a
    p-value at or below any level is at most that level."""
    failed = data.draw(st.integers(0, patch_runs + base_runs))
    law = _hypergeometric(patch_runs, base_runs, failed)
    rejected = sum(
        probability
        for x, probability in law.items()
        if fisher_one_sided(
            patch_failed=x, patch_runs=patch_runs, base_failed=failed - x, base_runs=base_runs
        )
        <= level
    )
    assert rejected <= level + 1e-12


@given(
    runs=st.integers(1, 12),
    base_failed=st.integers(0, 12),
    patch_failed=st.integers(0, 11),
)
def test_fisher_more_patch_failures_never_raise_the_p_value(runs, base_failed, patch_failed):
    base_failed, patch_failed = min(base_failed, runs), min(patch_failed, runs - 1)
    before = fisher_one_sided(
        patch_failed=patch_failed, patch_runs=runs, base_failed=base_failed, base_runs=runs
    )
    after = fisher_one_sided(
        patch_failed=patch_failed + 1, patch_runs=runs, base_failed=base_failed, base_runs=runs
    )
    assert after <= before


def _brute_split(base, patch, counted=None):
    pooled = [*base, *patch]

    def statistic(b, p):
        seen_b, seen_p = set(b), set(p)
        return sum(
            1
            for outcome in [*b, *p]
            if (counted is None or outcome in counted)
            and (outcome not in seen_b or outcome not in seen_p)
        )

    observed = statistic(base, patch)
    deals = list(itertools.combinations(range(len(pooled)), len(base)))
    extreme = 0
    for chosen in deals:
        b = [pooled[i] for i in chosen]
        p = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        extreme += statistic(b, p) >= observed
    return 1.0 if observed == 0 else extreme / len(deals), observed


outcomes = st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=6)


@given(base=outcomes, patch=outcomes)
@settings(max_examples=200)
def test_split_test_is_the_permutation_p_value(base, patch):
    expected, _ = _brute_split(base, patch)
    assert split_test(base, patch) == pytest.approx(expected)
    counted = {1, 2}
    expected, _ = _brute_split(base, patch, counted)
    assert split_test(base, patch, counted=counted) == pytest.approx(expected)


@given(pooled=st.lists(st.sampled_from("abc"), min_size=2, max_size=10), data=st.data())
@settings(max_examples=150)
def test_split_test_is_a_valid_exact_test(pooled, data):
    """Every deal of the pooled outcomes is equally likely under the null: the share of
    deals whose p-value is at or below a level is at most that level; the floor is the
    smallest p-value any deal gives."""
    base_runs = data.draw(st.integers(1, len(pooled) - 1))
    level = data.draw(st.sampled_from([0.01, 0.05, 0.1, 0.3]))
    deals = list(itertools.combinations(range(len(pooled)), base_runs))
    values = []
    for chosen in deals:
        base = [pooled[i] for i in chosen]
        patch = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        values.append(split_test(base, patch))
    assert sum(value <= level for value in values) / len(deals) <= level + 1e-12
    assert split_floor(Counter(pooled), base_runs=base_runs) == pytest.approx(min(values))


def test_split_test_known_values():
    # One count on each side, and they differ: 2 / C(10, 5).
    assert split_test([1] * 5, [2] * 5) == 2 / 252
    # The same set of counts on both sides: nothing moved.
    assert split_test([1, 2, 1], [2, 1, 1]) == 1.0


# ---------------------------------------------------------------- the verdicts weighed

POLICY = EvidencePolicy(alpha=0.01, cap=20, replays=5)


def test_policy_looks_and_levels():
    assert POLICY.looks == (5, 10, 20)
    assert EvidencePolicy(replays=3, cap=20).looks == (3, 6, 12, 20)
    assert EvidencePolicy(replays=5, cap=5).looks == (5,)
    assert EvidencePolicy(replays=30, cap=20).looks == (30,)
    assert POLICY.level(1) == pytest.approx(0.01 / 3)  # shared equally by the looks
    assert POLICY.level(4) == pytest.approx(0.01 / 12)  # and by the properties at stake
    assert EvidencePolicy(replays=5, cap=5).level(2) == 0.005
    assert POLICY.next_look(5) == 10
    assert POLICY.next_look(20) is None
    assert not EvidencePolicy(alpha=1).enabled


def test_the_issues_case_replays_more_then_is_set_aside_with_one_line():
    """A flake on both sides failed once in three replays on the patch, never on base."""
    policy = EvidencePolicy(replays=3, cap=20)
    first = evidence(side(0, 3), side(1, 3))
    assert decide(first).code == "new_instability"
    weighing = weigh(first, decide(first), policy=policy, at_stake=1)
    assert weighing.more == 3  # to the next look, 6
    assert weighing.claim is not None
    assert weighing.claim.p_value == 0.5
    capped = evidence(side(0, 20), side(1, 20))
    final = weigh(capped, decide(capped), policy=policy, at_stake=1).decision
    assert final.lane is Lane.NO_FREEZE
    assert final.code == WEAK
    assert not final.blocking
    assert not final.freeze_allowed
    assert final.reasons[0] == (
        "patch failed 1 of 20, base 0 of 20: p = 0.5 > 0.0025, not evidence of a new instability"
    )
    assert "\n" not in final.reasons[0]


def test_a_real_new_instability_blocks_with_its_evidence():
    ev = evidence(side(0, 10), side(8, 10))
    weighing = weigh(ev, decide(ev), policy=POLICY, at_stake=1)
    assert weighing.more == 0
    assert weighing.decision.blocking
    assert weighing.decision.code == "new_instability"
    assert weighing.decision.reasons[-1].startswith("evidence: patch failed 8 of 10, base 0 of 10")


@pytest.mark.parametrize("at_stake_count", [1, 10, 10_000])
def test_deterministic_patterns_block_as_the_table_says_without_a_round(at_stake_count):
    policy = EvidencePolicy(replays=3, cap=20)  # P/F at N = 3 has p = 0.05: no test at all
    for base, patch in (
        (side(0, 3), side(3, 3)),  # row 6
        ([calls(1)] * 3, [calls(2)] * 3),  # row 5: the retry disguise, constant (seed 001)
        ([F] * 3, [F_B] * 3),  # row 10
        ([F] * 3, [F] * 3),  # row 11 with base F: red on both sides
    ):
        ev = evidence(base, patch)
        assert claim_of(ev, decide(ev)) is None, decide(ev).code
        weighing = weigh(ev, decide(ev), policy=policy, at_stake=at_stake_count)
        assert weighing.more == 0
        assert weighing.decision == decide(ev)
        assert weighing.decision.blocking


def test_a_varying_call_count_needs_evidence_and_names_the_dependency():
    base = [calls(1)] * 20
    patch = [calls(1)] * 18 + [calls(2)] * 2
    ev = evidence(base, patch)
    assert decide(ev).code == "call_budget"
    final = weigh(ev, decide(ev), policy=POLICY, at_stake=1).decision
    assert final.code == WEAK
    assert final.reasons[0].startswith("clock: base {1} vs patch {1, 2} in 20 and 20 replays: p =")
    assert final.reasons[0].endswith("not evidence of a moved call budget")
    strong = evidence([calls(1)] * 20, [calls(1)] * 8 + [calls(2)] * 12)
    assert weigh(strong, decide(strong), policy=POLICY, at_stake=1).decision.blocking


def test_a_uniform_failure_on_a_flaky_base_needs_evidence():
    flaky = evidence([F, P, F, F, F], [F] * 5)
    assert decide(flaky).code == "uniform_failure"
    assert claim_of(flaky, decide(flaky)) is not None
    assert weigh(flaky, decide(flaky), policy=POLICY, at_stake=1).more == 5


def test_a_different_assertion_on_a_mixed_side_needs_evidence():
    ev = evidence([F, P, P, P, P], [F_B, P, P, P, P])
    assert decide(ev).code == "different_assertion"
    assert weigh(ev, decide(ev), policy=POLICY, at_stake=1).more == 5


def test_non_blocking_and_other_rows_are_left_alone():
    for base, patch in (
        (side(0, 5), side(0, 5)),
        (side(2, 5), side(0, 5)),
        (side(2, 5), side(1, 5)),
    ):
        ev = evidence(base, patch)
        assert weigh(ev, decide(ev), policy=POLICY, at_stake=9).decision == decide(ev)
    off = EvidencePolicy(alpha=1.0)
    ev = evidence(side(0, 3), side(1, 3))
    assert weigh(ev, decide(ev), policy=off, at_stake=1).decision == decide(ev)


def test_what_is_at_stake():
    assert not at_stake(evidence(side(0, 5), side(0, 5)))
    assert not at_stake(evidence([F] * 5, [F] * 5))  # every replay failed alike
    assert at_stake(evidence(side(1, 5), side(0, 5)))
    assert at_stake(evidence(side(0, 5), side(5, 5)))
    assert at_stake(evidence([calls(1), calls(2)], [calls(1), calls(1)]))
    timed_out = Replay(label="timeout")
    assert not at_stake(evidence([timed_out, P], [P, F]))
    assert count_at_stake([evidence(side(1, 5), side(0, 5)), evidence(side(0, 5), side(0, 5))]) == 1


def _final(base_rate_failures, patch_pattern, policy, at_stake_count):
    """Weigh round after round as the service does, the sides growing by the pattern."""
    replays = policy.replays
    while True:
        ev = evidence(side(base_rate_failures(replays), replays), patch_pattern(replays))
        weighing = weigh(ev, decide(ev), policy=policy, at_stake=at_stake_count)
        if not weighing.more:
            return weighing.decision, replays
        replays += weighing.more


@given(
    replays=st.integers(1, 12),
    cap=st.integers(1, 60),
    at_stake_count=st.integers(1, 10_000),
    alpha=st.sampled_from([0.001, 0.01, 0.05, 0.5]),
)
@settings(max_examples=150, deadline=None)
def test_a_deterministic_regression_always_blocks(replays, cap, at_stake_count, alpha):
    policy = EvidencePolicy(alpha=alpha, cap=cap, replays=replays)
    decision, spent = _final(lambda n: 0, lambda n: [F] * n, policy, at_stake_count)
    assert decision.blocking
    assert decision.code == "assertion_regression"
    assert spent <= max(cap, replays)


@given(
    replays=st.integers(2, 20),
    data=st.data(),
    at_stake_count=st.integers(1, 50),
)
@settings(max_examples=200, deadline=None)
def test_more_patch_failures_never_unblock(replays, data, at_stake_count):
    base_failed = data.draw(st.integers(0, replays))
    patch_failed = data.draw(st.integers(0, replays - 1))
    policy = EvidencePolicy(cap=20, replays=min(replays, 20))

    def blocks_now(failed):
        ev = evidence(side(base_failed, replays), side(failed, replays))
        weighing = weigh(ev, decide(ev), policy=policy, at_stake=at_stake_count)
        return weighing.more == 0 and weighing.decision.blocking

    if blocks_now(patch_failed):
        assert blocks_now(patch_failed + 1)


def _block_probability(rate, policy, at_stake_count):
    """P(a flake at ``rate`` on both sides ends blocked by a verdict on a mixed side),
    summed exactly over every outcome of every look (as bench/flakes.py does)."""
    states = {(0, 0): 1.0}
    done, step, blocked = 0, policy.replays, 0.0
    while states and step:
        law = [comb(step, k) * rate**k * (1 - rate) ** (step - k) for k in range(step + 1)]
        grown: dict[tuple[int, int], float] = {}
        for (b, a), probability in states.items():
            for db, pb in enumerate(law):
                for da, pa in enumerate(law):
                    grown[(b + db, a + da)] = (
                        grown.get((b + db, a + da), 0.0) + probability * pb * pa
                    )
        done += step
        states, step = {}, 0
        for (b, a), probability in grown.items():
            ev = evidence(side(b, done), side(a, done))
            weighing = weigh(ev, decide(ev), policy=policy, at_stake=at_stake_count)
            if weighing.more:
                states[(b, a)], step = probability, weighing.more
            elif weighing.decision.blocking and weighing.claim is not None:
                blocked += probability  # a verdict on a mixed side (a deterministic one
                # is the table's: (r(1 - r))^N for P/F, at most 4^-N)
    return blocked


@pytest.mark.parametrize("rate", [0.01, 0.05, 0.2, 0.5, 0.8])
@pytest.mark.parametrize("replays", [3, 5])
def test_equal_flakes_block_on_a_mixed_side_at_most_alpha(rate, replays):
    policy = EvidencePolicy(alpha=0.01, cap=20, replays=replays)
    assert _block_probability(rate, policy, 1) <= 0.01


# ---------------------------------------------------------------- the rounds planned


def _outcome(index, ev):
    return PropertyOutcome(index=index, evidence=ev, decision=decide(ev))


def test_round_plan_groups_by_replays_and_settles_the_rest():
    outcomes = [
        _outcome(1, evidence(side(0, 5), side(1, 5), "a")),  # weak so far: 5 more
        _outcome(2, evidence(side(0, 5), side(0, 5), "b")),  # nothing to weigh
        _outcome(3, evidence(side(0, 5), side(2, 5), "c")),  # weak so far: 5 more
        _outcome(4, evidence(side(0, 5), side(5, 5), "d")),  # blocks at once
    ]
    weighings = weigh_outcomes(outcomes, policy=POLICY, at_stake=1)
    rounds = round_plan(outcomes, weighings, first=1)
    assert [(one.number, one.replays, one.before, one.property_ids) for one in rounds] == [
        (1, 5, 5, ("a", "c"))
    ]
    assert rounds[0].spent == 20
    assert rounds[0].folder == "round-1"
    kept = settled(outcomes, weighings)
    assert [item.evidence.property_id for item in kept] == ["b", "d"]
    assert kept[1].decision.blocking


def test_evidence_summary_and_line():
    outcomes = [_outcome(1, evidence(side(0, 20), side(1, 20), "a"))]
    weighings = weigh_outcomes(outcomes, policy=POLICY, at_stake=1)
    done = settled(outcomes, weighings)
    rounds = round_plan(
        [_outcome(1, evidence(side(0, 5), side(1, 5), "a"))],
        weigh_outcomes(
            [_outcome(1, evidence(side(0, 5), side(1, 5), "a"))], policy=POLICY, at_stake=1
        ),
        first=1,
    )
    summary = evidence_summary(POLICY, at_stake=1, rounds=rounds, outcomes=done)
    assert summary["replays_spent"] == 10
    assert summary["weak"] == 1
    assert summary["false_block_rate"] == 0.01
    assert summary["looks"] == [5, 10, 20]
    assert evidence_line(summary) == (
        "evidence: 1 replayed more in 1 round, 10 replays spent;"
        " 1 without evidence at the cap (not blocking)"
    )
    quiet = evidence_summary(POLICY, at_stake=0, rounds=(), outcomes=())
    assert evidence_line(quiet) is None


def test_the_tables_cell_of_a_weak_verdict_is_its_one_line():
    from orchestrator.core.replay_run import table_reasons

    capped = evidence(side(0, 20), side(1, 20))
    final = weigh(capped, decide(capped), policy=POLICY, at_stake=1).decision
    assert table_reasons(final.code, final.reasons) == final.reasons[0]
