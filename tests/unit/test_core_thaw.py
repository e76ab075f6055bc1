"""Thaw verdicts (lanes.md section 6): a re-probe thaws a freeze or leaves it overdue."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from seed004 import SAMPLES_STILL_SLOW, SAMPLES_THAWED

from orchestrator import model
from orchestrator.core.thaw import flake_thaw_verdict, timing_thaw_verdict

P, F, T, H = "assert_pass", "assert_fail", "timeout", "harness_error"


def replays(*labels: str, calls: tuple[int, ...] | None = None) -> tuple[model.Replay, ...]:
    counts = calls or (1,) * len(labels)
    return tuple(
        model.Replay(
            label=label,
            assertion_id="t.py::t@t.py:3:AssertionError" if label == F else None,
            calls={"clock": count},
            reason="deadline" if label == T else None,
        )
        for label, count in zip(labels, counts, strict=True)
    )


def test_a_flake_the_project_now_skips_does_not_thaw() -> None:
    skipped = (*replays(*[P] * 4), model.Replay(label="skipped", message="needs BACKEND_URL"))
    verdict = flake_thaw_verdict(skipped, 5)
    assert (verdict.thawed, verdict.code, verdict.reasons) == (
        False,
        "skipped",
        ("needs BACKEND_URL",),
    )


def test_a_flake_thaws_only_on_all_pass_with_one_call_budget() -> None:
    assert flake_thaw_verdict(replays(*[P] * 5), 5).thawed
    still = flake_thaw_verdict(replays(P, F, *[P] * 3), 5)
    assert (still.thawed, still.code) == (False, "still_failing")
    assert still.reasons[0] == "1/5 replays failed"
    infra = flake_thaw_verdict(replays(P, T, *[P] * 3), 5)
    assert (infra.thawed, infra.code, infra.reasons) == (
        False,
        "probe_infra_error",
        ("timeout:deadline",),
    )
    moved = flake_thaw_verdict(replays(*[P] * 5, calls=(1, 1, 2, 1, 1)), 5)
    assert (moved.thawed, moved.code, moved.reasons) == (
        False,
        "call_budget_unstable",
        ("clock: counts {1, 2}",),
    )
    short = flake_thaw_verdict(replays(*[P] * 4), 5)
    assert (short.thawed, short.code) == (False, "replay_count")


def test_timing_thaw_with_seed_004_sample_lists() -> None:
    passes = [P] * 5
    slow = timing_thaw_verdict(passes, SAMPLES_STILL_SLOW, 400.0)
    assert (slow.thawed, slow.code) == (False, "over_budget")
    assert timing_thaw_verdict(passes, SAMPLES_THAWED, 400.0).thawed
    assert timing_thaw_verdict([P], [200.0], 400.0).code == "sample_too_small"
    red = timing_thaw_verdict([*passes[:4], F], SAMPLES_THAWED, 400.0)
    assert (red.thawed, red.code) == (False, "property_red")
    wide = timing_thaw_verdict(passes, (100.0, 390.0, 200.0, 250.0, 300.0), 400.0)
    assert (wide.thawed, wide.code) == (False, "spread_too_wide")


@given(
    st.lists(st.sampled_from([P, P, P, F, T, H, "assert_maybe"]), min_size=1, max_size=6),
    st.lists(st.integers(1, 2), min_size=6, max_size=6),
)
def test_a_flake_thaws_exactly_on_all_pass_with_one_count_per_dependency(
    labels: list[str], counts: list[int]
) -> None:
    probe = replays(*labels, calls=tuple(counts[: len(labels)]))
    verdict = flake_thaw_verdict(probe, len(labels))
    one_budget = len(set(counts[: len(labels)])) == 1
    assert verdict.thawed is (set(labels) == {P} and one_budget)
    if not set(labels) <= {P, F}:
        assert verdict.code == "probe_infra_error"  # an infra label never reads as a failure
