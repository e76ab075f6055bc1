"""Every lane is declared once (``model.Lane``: its kind and meaning, in display order),
and every table of lanes the package or its documents hold covers every lane and agrees
with that declaration: a new lane forgotten in one of them fails here, not in a report
that sorts it last."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.lanes import worst_exit_status
from orchestrator.core.replay_run import worst_exit
from orchestrator.core.reports.html import LANE_MEANING
from orchestrator.core.reports.view import GREEN_LANES, LANE_ORDER, lane_kind, lane_rank
from orchestrator.model import Decision, Lane, LaneKind

LANES_MD = Path(__file__).resolve().parents[2] / "docs" / "lanes.md"
EXIT_STATUSES = {LaneKind.BLOCKING: 1, LaneKind.UNDECIDED: 3, LaneKind.NON_BLOCKING: 0}


def test_every_lane_is_in_every_table() -> None:
    lanes = set(Lane)
    assert set(LANE_ORDER) == lanes
    assert len(LANE_ORDER) == len(lanes)
    assert set(LANE_MEANING) == lanes
    assert all(LANE_MEANING.values())
    assert {lane.value for lane in lanes} >= GREEN_LANES
    for lane in Lane:
        assert lane_kind(lane.value) is lane.kind
        assert lane_rank(lane.value) < len(LANE_ORDER)
        assert lane.meaning
        assert lane.kind in LaneKind


def test_the_exit_status_of_each_kind_is_the_one_records_md_gives() -> None:
    assert {kind: kind.exit_status for kind in LaneKind} == EXIT_STATUSES
    for lane in Lane:
        assert lane.exit_status == EXIT_STATUSES[lane.kind]
        assert lane.blocking == (lane.kind is LaneKind.BLOCKING)
        assert lane.undecided == (lane.kind is LaneKind.UNDECIDED)


def test_the_display_order_puts_the_worse_kinds_first() -> None:
    severities = [lane.severity for lane in LANE_ORDER if isinstance(lane, Lane)]
    assert severities == sorted(severities, reverse=True)


@given(st.lists(st.sampled_from(list(Lane)), min_size=1, max_size=8))
def test_both_exit_rankings_agree(lanes: list[Lane]) -> None:
    """The worst lane (by ``Lane.severity``) and the worst exit status of its decisions
    (by ``lanes.worst_exit_status``, which merge and the reports use) are one status."""
    decisions = [
        Decision(lane=lane, code="c", blocking=lane.blocking, freeze_allowed=False)
        for lane in lanes
    ]
    assert worst_exit(decisions) == worst_exit_status([lane.exit_status for lane in lanes])


def test_docs_lanes_md_lists_every_lane_by_kind_and_in_the_decision_table() -> None:
    text = LANES_MD.read_text(encoding="utf-8")
    listed = {}
    for heading, kind in (
        ("Blocking lanes:", LaneKind.BLOCKING),
        ("Undecided lanes:", LaneKind.UNDECIDED),
        ("Non-blocking:", LaneKind.NON_BLOCKING),
    ):
        line = next(line for line in text.splitlines() if line.startswith(heading))
        listed[kind] = set(re.findall(r"`([a-z_]+)`", line))
    assert listed == {kind: {lane.value for lane in Lane if lane.kind is kind} for kind in LaneKind}
    table_lanes = set(re.findall(r"^\|[^|]*\|[^|]*\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert table_lanes == {lane.value for lane in Lane}
