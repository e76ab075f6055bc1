"""Live progress (core/progress.py): the driver's lines parsed, counts kept, log lines
throttled. Pure."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import progress
from orchestrator.core.progress import (
    MAX_COUNT,
    OUTCOMES,
    FinishedTest,
    SideProgress,
    log_due,
    parse_replay_line,
    parse_test_line,
    with_replays,
    with_test,
)

COUNTS = st.integers(1, MAX_COUNT)


@given(st.data(), COUNTS, st.sampled_from(OUTCOMES), st.sampled_from(["", " ", "\r", "\n"]))
def test_a_well_formed_test_line_parses_to_its_numbers(data, total, outcome, blank) -> None:
    done = data.draw(st.integers(1, total))
    parsed = parse_test_line(f"test {done}/{total} {outcome}{blank}")
    assert parsed == FinishedTest(done=done, total=total, outcome=outcome)
    assert parsed.failing == (outcome in ("failed", "error"))


@given(st.data(), COUNTS, st.sampled_from(OUTCOMES))
def test_a_line_for_several_tests_parses_to_their_count(data, total, outcome) -> None:
    done = data.draw(st.integers(1, total))
    count = data.draw(st.integers(1, done))
    parsed = parse_test_line(f"test {done}/{total} {outcome} +{count}")
    assert parsed == FinishedTest(done=done, total=total, outcome=outcome, count=count)


@given(st.text(max_size=60))
def test_any_text_parses_to_nothing_or_to_bounded_numbers(text) -> None:
    parsed = parse_test_line(text)
    if parsed is not None:
        assert 1 <= parsed.done <= parsed.total <= MAX_COUNT
        assert parsed.outcome in OUTCOMES
        assert 1 <= parsed.count <= parsed.done
        more = f" +{parsed.count}" if parsed.count > 1 or "+" in text else ""
        assert text.strip() == f"test {parsed.done}/{parsed.total} {parsed.outcome}{more}"
    replay = parse_replay_line(text)
    if replay is not None:
        assert 1 <= replay.number <= replay.of <= MAX_COUNT


def test_malformed_or_unbounded_lines_are_not_progress() -> None:
    for line in (
        "test 3/2 passed",  # more done than there are
        "test 0/2 passed",
        "test 01/2 passed",
        f"test 1/{MAX_COUNT + 1} passed",
        "test 1/999999999999999999999 passed",
        "test 1/2 passed extra",
        "test 1/2 xpassed",
        "test 1/2",
        "test -1/2 failed",
        "tests 1/2 passed",
        "test \uff11/\uff12 passed",  # non-ASCII digits
        "my test 1/2 passed",
        "test 2/5 passed +3",  # more tests on the line than are done
        "test 2/5 passed +0",
        "test 2/5 passed +01",
        "test 2/5 passed 2",
        "test 2/5 passed +",
    ):
        assert parse_test_line(line) is None, line
    assert parse_replay_line("replay 2/3 completed") == progress.ReplayLine(
        number=2, of=3, status="completed"
    )
    assert parse_replay_line("replay 4/3 completed") is None
    assert parse_replay_line("replay 1/3") is None


LINES = st.builds(
    FinishedTest,
    done=st.just(50),
    total=st.integers(50, 60),
    outcome=st.sampled_from(OUTCOMES),
    count=st.integers(1, 50),
)


@given(st.lists(LINES, max_size=40), st.integers(1, 5), st.integers(0, 8))
def test_counts_follow_the_lines(lines, replays, finished) -> None:
    state = SideProgress(side="base", started_s=0.0, replays_total=replays)
    for line in lines:
        state = with_test(state, line)
    state = with_replays(state, finished)
    assert state.tests_done == sum(line.count for line in lines)
    assert state.failures == sum(1 for line in lines if line.outcome in ("failed", "error"))
    assert state.tests_total >= state.tests_done
    if lines:
        assert state.tests_total == max(
            state.tests_done, max(line.total for line in lines) * replays
        )
    assert state.replays_done == min(finished, replays)
    assert state.finished == (finished >= replays)
    # Replay counts never go back.
    assert with_replays(state, 0).replays_done == state.replays_done


def test_elapsed_is_measured_from_the_start_and_never_negative() -> None:
    state = SideProgress(side="patch", started_s=100.0, replays_total=1)
    assert state.elapsed_s(112.5) == 12.5
    assert state.elapsed_s(99.0) == 0.0


def _logged(times: list[float], finished_at: int | None) -> list[int]:
    """Indexes of the events a side logs (the event at ``finished_at`` says it finished)."""
    last: float | None = None
    logged = []
    for index, now in enumerate(times):
        if log_due(last, now, finished=index == finished_at):
            last = now
            logged.append(index)
    return logged


GAPS = st.lists(st.floats(0.0, 30.0, allow_nan=False), min_size=1, max_size=60)


@given(GAPS)
def test_unfinished_lines_are_logged_at_most_every_ten_seconds(gaps) -> None:
    times = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    logged = _logged(times, None)
    assert logged[0] == 0  # the first counts are shown at once
    for earlier, later in itertools.pairwise(logged):
        assert times[later] - times[earlier] >= progress.LOG_EVERY_S
    # ... and never more than 10 s of events go unlogged.
    for index, now in enumerate(times):
        last = max(i for i in logged if i <= index)
        assert index == last or now - times[last] < progress.LOG_EVERY_S


@given(GAPS)
def test_the_finished_line_is_always_logged(gaps) -> None:
    times = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    assert _logged(times, len(times) - 1)[-1] == len(times) - 1
