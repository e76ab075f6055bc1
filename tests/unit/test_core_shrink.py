"""The shrinker: same-way failures, memo, determinism, 1-minimality, the seed's walkthrough."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.digest import canonical_json, digest
from orchestrator.core.shrink import (
    RETURNED_FALSE,
    FailureIdentity,
    NoVerdict,
    ShrinkTarget,
    assertion_identity,
    candidate_verdict,
    leaves,
    outcome,
    replace_at,
    replay_shrink_path,
    shrink,
    shrink_report,
    shrink_report_with,
    shrink_with,
)
from orchestrator.errors import PropertyDoesNotFailError
from orchestrator.model import Label, Replay

ALLOWED_ROLES = {"admin", "viewer"}


def role_property(payload: dict[str, Any]) -> None:
    """Seed 000's walkthrough: a non-negative user_id must carry an allowed role."""
    if payload["user_id"] >= 0:
        assert payload["role"] in ALLOWED_ROLES


def wide_payload(rng: random.Random, width: int = 300) -> dict[str, Any]:
    def noise(depth: int) -> Any:
        kind = rng.randrange(5 if depth < 2 else 3)
        if kind == 0:
            return rng.randint(-(10**6), 10**6)
        if kind == 1:
            return "".join(rng.choice("abcxyz ") for _ in range(rng.randrange(30)))
        if kind == 2:
            return rng.choice([None, True, False, 2.5])
        if kind == 3:
            return [noise(depth + 1) for _ in range(rng.randrange(6))]
        return {f"n{i}": noise(depth + 1) for i in range(rng.randrange(6))}

    items = [(f"field_{i}", noise(0)) for i in range(width)]
    items.insert(rng.randrange(width), ("user_id", 48213))
    items.insert(rng.randrange(width), ("role", "superuser-from-generator"))
    return dict(items)


def single_steps(payload: Any) -> list[Any]:
    """Every candidate one operation away: drop one child, shorten one string by one
    character or to empty, move one integer one step toward zero or to zero."""
    candidates = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, dict):
            for key in node:
                smaller = {k: v for k, v in node.items() if k != key}
                candidates.append(replace_at(payload, path, smaller))
                walk(node[key], (*path, key))
        elif isinstance(node, list):
            for i in range(len(node)):
                candidates.append(replace_at(payload, path, node[:i] + node[i + 1 :]))
                walk(node[i], (*path, i))
        elif isinstance(node, str) and node:
            candidates.append(replace_at(payload, path, node[:-1]))
            candidates.append(replace_at(payload, path, ""))
        elif isinstance(node, int) and not isinstance(node, bool) and node:
            candidates.append(replace_at(payload, path, node - (1 if node > 0 else -1)))
            candidates.append(replace_at(payload, path, 0))

    walk(payload, ())
    return candidates


def assert_one_minimal(payload: Any, prop: Any) -> None:
    target = outcome(prop, payload)
    for candidate in single_steps(payload):
        assert outcome(prop, candidate) != target, f"not 1-minimal: {candidate!r} still fails"


def test_seed_walkthrough_fixture_from_a_wide_generated_payload() -> None:
    origin = wide_payload(random.Random(0))
    result = shrink(origin, role_property)
    assert result.minimal == {"user_id": 0, "role": ""}
    assert result.minimal_digest == digest({"user_id": 0, "role": ""})
    assert result.origin_digest == digest(origin)
    assert result.failure.kind == "builtins.AssertionError"
    assert replay_shrink_path(origin, result.shrink_path) == result.minimal
    ops = {step["op"] for step in result.shrink_path}
    assert ops == {"drop_key", "shorten_string", "move_integer"}
    assert {"op": "shorten_string", "path": ["role"], "length": 0} in result.shrink_path
    assert_one_minimal(result.minimal, role_property)


def test_deleting_the_role_fails_differently_and_is_refused() -> None:
    # Without "role" the property raises KeyError at another line: a different failure.
    assert outcome(role_property, {"user_id": 0}) != outcome(
        role_property, {"user_id": 0, "role": ""}
    )
    result = shrink({"role": "x", "user_id": 5, "extra": [1, 2]}, role_property)
    assert "role" in result.minimal


def test_a_false_return_is_a_failure_with_its_own_identity() -> None:
    def short_names(payload: dict[str, Any]) -> bool:
        return all(len(name) < 3 for name in payload.get("names", []))

    result = shrink({"names": ["al", "bob", "christina"], "n": 7}, short_names)
    assert result.failure == RETURNED_FALSE
    assert result.minimal == {"names": ["bob"]}
    assert_one_minimal(result.minimal, short_names)


def test_the_property_is_never_called_twice_on_one_candidate() -> None:
    seen: list[bytes] = []

    def recording(payload: Any) -> None:
        seen.append(canonical_json(payload))
        role_property(payload)

    result = shrink(wide_payload(random.Random(3), width=80), recording)
    assert len(seen) == len(set(seen))
    assert result.property_calls == len(seen)


def test_the_same_input_gives_the_same_minimum_byte_for_byte() -> None:
    origin = wide_payload(random.Random(5), width=120)
    first, second = shrink(origin, role_property), shrink(origin, role_property)
    assert canonical_json(first.minimal) == canonical_json(second.minimal)
    assert first.shrink_path == second.shrink_path
    assert first.property_calls == second.property_calls


def test_the_callers_payload_is_left_alone_even_by_a_mutating_property() -> None:
    origin = {"user_id": 3, "role": "ghost", "tags": ["a", "b"]}
    snapshot = canonical_json(origin)

    def mutating(payload: dict[str, Any]) -> None:
        payload.pop("tags", None)
        role_property(payload)

    shrink(origin, mutating)
    assert canonical_json(origin) == snapshot


def test_zig_zag_pair_reaches_one_and_zero_quickly() -> None:
    rng = random.Random(7)
    items = [(f"noise_{i}", rng.randint(0, 10**6)) for i in range(60)]
    items.insert(17, ("a", 48213))
    items.insert(44, ("b", 48212))

    def adjacent(payload: dict[str, Any]) -> None:
        assert abs(payload["a"] - payload["b"]) != 1

    result = shrink(dict(items), adjacent)
    assert result.minimal == {"a": 1, "b": 0}
    assert result.property_calls <= 100


def test_an_integer_held_by_another_costs_one_call_not_a_binary_search() -> None:
    def needs_both(payload: dict[str, Any]) -> None:
        assert payload.get("big", 0) + payload.get("small", 0) > -4830

    result = shrink({"big": -4821, "small": -17}, needs_both)
    assert_one_minimal(result.minimal, needs_both)
    assert result.minimal["big"] + result.minimal["small"] == -4830
    # Whichever value moved first, the other one is pinned: at most one value walks a
    # binary search (about 13 calls for 4821), the pinned one costs zero and one step.
    assert result.property_calls <= 25


def test_nested_lists_and_objects_shrink_inside() -> None:
    payload = {
        "items": [{"sku": "a1", "qty": 3}, {"sku": "b2", "qty": -250}, {"sku": "c", "qty": 1}]
    }

    def no_negative(p: dict[str, Any]) -> None:
        for item in p.get("items", []):
            assert item.get("qty", 0) >= 0

    result = shrink(payload, no_negative)
    assert result.minimal == {"items": [{"qty": -1}]}
    assert replay_shrink_path(payload, result.shrink_path) == result.minimal


def test_a_holding_property_is_refused() -> None:
    with pytest.raises(PropertyDoesNotFailError):
        shrink({"user_id": 1, "role": "admin"}, role_property)


def test_shrink_report_keys_and_stability() -> None:
    payload = wide_payload(random.Random(1), width=40)
    report = shrink_report(payload, role_property, attempts=3)
    doc = report.to_json()
    # The fields of the first version, then the ones added since (none renamed).
    assert list(doc)[:10] == [
        "schema",
        "minimal",
        "minimal_digest",
        "origin",
        "origin_digest",
        "shrink_path",
        "property_calls",
        "attempts",
        "identical_minima",
        "stable",
    ]
    assert list(doc)[10:] == [
        "property",
        "test",
        "repo",
        "rev",
        "image_id",
        "image_ref",
        "seed",
        "timeout_s",
        "tests_from",
        "failure",
        "assertion_key",
        "minima",
    ]
    assert (doc["attempts"], doc["identical_minima"], doc["stable"]) == (3, 3, True)
    # A host-side shrink has no test pins; each attempt's minimum and calls are listed.
    assert (doc["test"], doc["rev"], doc["image_id"], doc["assertion_key"]) == (None,) * 4
    assert doc["failure"].startswith("builtins.AssertionError at ")
    assert (
        doc["minima"]
        == [{"minimal_digest": doc["minimal_digest"], "property_calls": doc["property_calls"]}] * 3
    )
    assert report.summary().minimal_digest == doc["minimal_digest"]
    # The wide payload travels with the report, so a freeze can keep its bytes too.
    assert doc["origin"] == payload
    assert digest(doc["origin"]) == doc["origin_digest"]


def test_a_non_deterministic_property_gives_an_unstable_report() -> None:
    attempt = {"number": 0}

    def drifting(payload: dict[str, Any]) -> None:
        # Its threshold moves between shrinks (each attempt starts from the origin).
        if payload.get("n") == 1000 and "pad" in payload:
            attempt["number"] += 1
        assert payload.get("n", 0) < 10 + 5 * attempt["number"]

    report = shrink_report({"n": 1000, "pad": list(range(30))}, drifting, attempts=2)
    assert report.minimal == {"n": 15}
    assert not report.stable
    assert report.identical_minima == 1


def test_one_attempt_is_never_stable() -> None:
    report = shrink_report({"user_id": 2, "role": "x"}, role_property, attempts=1)
    assert not report.stable


# --- properties -------------------------------------------------------------------------

json_payloads = st.dictionaries(
    st.sampled_from(list("abcdefgh")),
    st.recursive(
        st.none() | st.booleans() | st.integers(-500, 500) | st.text("abxy", max_size=8),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.sampled_from(list("pqrs")), children, max_size=3)
        ),
        max_leaves=10,
    ),
    min_size=1,
    max_size=8,
)


def _ints(payload: Any) -> list[int]:
    return [v for _, v in leaves(payload) if isinstance(v, int) and not isinstance(v, bool)]


def sum_at_least_100(payload: Any) -> None:
    assert sum(abs(v) for v in _ints(payload)) < 100


def has_x(payload: Any) -> bool:
    return not any(isinstance(v, str) and "x" in v for _, v in leaves(payload))


def many_leaves(payload: Any) -> None:
    if len(leaves(payload)) >= 3:
        raise ValueError("three or more leaves")


def key_a_big(payload: Any) -> None:
    value = payload["a"]  # KeyError when "a" is gone: a different failure
    if isinstance(value, int) and value > 7:
        raise AssertionError("a too big")


PROPERTIES = [sum_at_least_100, has_x, many_leaves, key_a_big]


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(json_payloads, st.sampled_from(PROPERTIES))
def test_shrink_results_fail_the_same_way_are_smaller_minimal_and_repeatable(
    payload: dict[str, Any], prop: Any
) -> None:
    original = outcome(prop, payload)
    assume(original is not None)
    result = shrink(payload, prop)
    assert outcome(prop, result.minimal) == original
    assert len(canonical_json(result.minimal)) <= len(canonical_json(payload))
    assert_one_minimal(result.minimal, prop)
    again = shrink(payload, prop)
    assert canonical_json(again.minimal) == canonical_json(result.minimal)
    assert replay_shrink_path(payload, result.shrink_path) == result.minimal


# --- judges: a test in a container answers with labels and assertion keys ----------------

KEY_ROLE = "tests/test_users.py::test_role@test_role+3:AssertionError"
KEY_SIZE = "tests/test_users.py::test_role@test_role+2:AssertionError"


def test_a_judge_per_attempt_and_no_memo_shared_between_attempts() -> None:
    payload = wide_payload(random.Random(3), width=60)
    seen: dict[int, list[bytes]] = {}

    def judge_for(attempt: int) -> Any:
        asked = seen.setdefault(attempt, [])

        def judge(candidate: Any) -> Any:
            asked.append(canonical_json(candidate))
            return outcome(role_property, candidate)

        return judge

    report = shrink_report_with(payload, judge_for, attempts=2, target=ShrinkTarget(test="t::x"))
    assert report.minimal == {"user_id": 0, "role": ""}
    # Both attempts asked every question afresh: the second was not fed by the first.
    assert seen[1] == seen[2]
    assert len(seen[1]) == len(set(seen[1])) == report.property_calls
    assert report.minima == ((report.minimal_digest, report.property_calls),) * 2
    assert report.to_json()["test"] == "t::x"


def test_what_a_judge_raises_ends_the_shrink_unchanged() -> None:
    class Stop(Exception):
        pass

    calls = {"n": 0}

    def judge(candidate: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 4:
            raise Stop("candidate 4 gave no verdict")
        return outcome(role_property, candidate)

    with pytest.raises(Stop, match="candidate 4"):
        shrink_with(wide_payload(random.Random(4), width=40), judge)
    assert calls["n"] == 4


@settings(max_examples=examples(60), deadline=None)
@given(json_payloads, st.integers(min_value=1, max_value=6))
def test_a_smaller_candidate_failing_another_way_never_pulls_the_shrink(
    payload: dict[str, Any], threshold: int
) -> None:
    # A test with two assertions: below `threshold` keys the size check fails first (its
    # own key); from there on, a payload with a key "a" fails the role check.
    def judge(candidate: Any) -> FailureIdentity | None:
        if len(candidate) < threshold:
            return assertion_identity(KEY_SIZE)
        return assertion_identity(KEY_ROLE) if "a" in candidate else None

    assume("a" in payload and len(payload) >= threshold)
    result = shrink_with(payload, judge)
    assert judge(result.minimal) == assertion_identity(KEY_ROLE)
    assert len(result.minimal) == threshold
    assert "a" in result.minimal


def test_candidate_verdicts_from_labels() -> None:
    passed = Replay(label=Label.ASSERT_PASS)
    failed = Replay(label=Label.ASSERT_FAIL, assertion_id="t@t.py:9:E", assertion_key=KEY_ROLE)
    keyless = Replay(label=Label.ASSERT_FAIL, assertion_id="t@t.py:9:E")
    timeout = Replay(label=Label.TIMEOUT, reason="replay_timeout", message="passed --timeout")
    harness = Replay(label=Label.HARNESS_ERROR, reason="setup_error", message="boom\nmore")
    assert candidate_verdict(passed) is None
    assert candidate_verdict(failed) == assertion_identity(KEY_ROLE)
    assert candidate_verdict(failed) != assertion_identity(KEY_SIZE)
    assert candidate_verdict(keyless) == assertion_identity("t@t.py:9:E")
    # A skip is the test saying the candidate is outside what it checks: it holds.
    assert candidate_verdict(harness, skipped=True) is None
    stopped = candidate_verdict(timeout)
    assert isinstance(stopped, NoVerdict)
    assert stopped.describe() == "timeout (replay_timeout): passed --timeout"
    stopped = candidate_verdict(harness)
    assert isinstance(stopped, NoVerdict)
    assert stopped.describe() == "harness_error (setup_error): boom"
    assert NoVerdict(label="timeout", reason=None, message=None).describe() == "timeout"


def test_a_test_shrink_report_records_its_pins_and_its_assertion_key() -> None:
    target = ShrinkTarget(
        test="tests/test_users.py::test_role",
        repo="/r",
        rev="a" * 40,
        image_id="sha256:" + "b" * 64,
        image_ref="orchestrator-runner:latest",
        seed=7,
        timeout_s=30.0,
    )

    def judge(candidate: Any) -> FailureIdentity | None:
        return assertion_identity(KEY_ROLE) if "role" in candidate else None

    report = shrink_report_with(
        {"role": "x", "noise": 1}, lambda attempt: judge, attempts=2, target=target
    )
    doc = report.to_json()
    assert (doc["test"], doc["rev"], doc["image_id"], doc["seed"]) == (
        "tests/test_users.py::test_role",
        "a" * 40,
        "sha256:" + "b" * 64,
        7,
    )
    assert (doc["property"], doc["timeout_s"], doc["tests_from"]) == (None, 30.0, None)
    assert doc["assertion_key"] == KEY_ROLE
    assert doc["failure"] == f"assert_fail at {KEY_ROLE}"
    summary = report.summary()
    assert (summary.test, summary.rev, summary.image_id, summary.seed) == (
        target.test,
        target.rev,
        target.image_id,
        7,
    )
    assert summary.to_json()["seed"] == 7
