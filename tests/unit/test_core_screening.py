"""Screening (core/screening.py): which properties earn their N replays. Pure."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from test_core_replay_run import run_plan

from orchestrator.core import replay_run, screening
from orchestrator.core.lanes import decide
from orchestrator.core.oracle import OracleChange
from orchestrator.core.screening import Screening, ScreenPolicy
from orchestrator.model import Lane, Replay

PROP = "tests/t.py::test_a"
OTHER = "tests/t.py::test_b"
LABELS = st.sampled_from(["assert_pass", "assert_fail", "timeout", "harness_error"])
COUNTS = st.dictionaries(st.sampled_from(["clock", "sleep", "open"]), st.integers(0, 3))


def passing(calls: dict[str, int] | None = None) -> Replay:
    return Replay(
        label="assert_pass", calls={"clock": 1} if calls is None else calls, duration_ms=1.0
    )


def same_oracle(property_id: str = PROP) -> OracleChange:
    return OracleChange(property_id=property_id, base_digest="sha256:x", patch_digest="sha256:x")


@given(COUNTS, st.integers(1, 4), st.integers(1, 4))
def test_passing_everywhere_with_equal_counts_is_no_signal(calls, base_k, patch_k) -> None:
    base = tuple(passing(calls) for _ in range(base_k))
    patch = tuple(passing(calls) for _ in range(patch_k))
    assert screening.signal_reasons(base, patch, same_oracle()) == ()
    assert screening.signal_reasons(base, patch, None) == ()


@given(st.lists(LABELS, min_size=1, max_size=4), st.lists(LABELS, min_size=1, max_size=4))
def test_any_replay_not_passing_on_either_side_is_signal(base_labels, patch_labels) -> None:
    base = tuple(Replay(label=label, calls={"clock": 1}) for label in base_labels)
    patch = tuple(Replay(label=label, calls={"clock": 1}) for label in patch_labels)
    reasons = screening.signal_reasons(base, patch, same_oracle())
    failing_sides = {
        side
        for side, labels in (("base", base_labels), ("patch", patch_labels))
        if any(label != "assert_pass" for label in labels)
    }
    assert {reason.split(":", 1)[0] for reason in reasons} == failing_sides


@given(COUNTS, COUNTS)
def test_call_counts_that_differ_between_the_sides_are_signal(base_calls, patch_calls) -> None:
    reasons = screening.signal_reasons((passing(base_calls),), (passing(patch_calls),), None)
    moved = {
        name
        for name in {*base_calls, *patch_calls}
        if base_calls.get(name, 0) != patch_calls.get(name, 0)
    }
    assert [reason for reason in reasons if reason.startswith("calls ")] == [
        f"calls {name}: base {{{base_calls.get(name, 0)}}} vs patch {{{patch_calls.get(name, 0)}}}"
        for name in sorted(moved)
    ]


def test_an_oracle_change_and_a_test_on_one_side_only_are_signal() -> None:
    edited = OracleChange(property_id=PROP, base_digest="sha256:a", patch_digest="sha256:b")
    new = OracleChange(property_id=PROP, base_digest=None, patch_digest="sha256:b")
    assert screening.signal_reasons((passing(),), (passing(),), edited) == (
        "oracle changed: digests differ",
    )
    assert screening.signal_reasons((passing(),), (passing(),), new)


def test_screen_collects_the_signal_of_replayable_properties_only() -> None:
    policy = ScreenPolicy(screen=1, replays=5)
    screened = {
        "base": {PROP: (passing(),), OTHER: (passing(),), "<session>": (Replay(label="x"),)},
        "patch": {PROP: (passing({"clock": 2}),), OTHER: (passing(),), "<session>": ()},
    }
    found = screening.screen(policy, screened, {}, base="base", patch="patch")
    assert set(found.signals) == {PROP}
    assert found.replays_of(PROP) == 5
    assert found.replays_of(OTHER) == 1
    assert found.more == 4
    enough = Screening(policy=ScreenPolicy(screen=3, replays=2), signals={PROP: ()})
    assert (enough.replays_of(PROP), enough.more) == (3, 0)
    assert found.summary([PROP, OTHER, "<session>"]) == {
        "policy": "screen",
        "screen": 1,
        "replays": 5,
        "screened": 3,
        "replayed": 1,
    }


@given(st.integers(0, 3), st.booleans(), st.lists(st.just(PROP), max_size=1))
def test_the_default_screens_once_without_named_properties(screen, replays_all, named) -> None:
    explicit = screen or None
    chosen = screening.screen_replays(explicit, replays_all=replays_all, named=bool(named))
    if replays_all:
        assert chosen == 0
    elif explicit is not None:
        assert chosen == explicit
    else:
        assert chosen == (0 if named else 1)


def test_combine_appends_the_n_replays_of_properties_with_signal_only() -> None:
    found = Screening(policy=ScreenPolicy(screen=1, replays=2), signals={PROP: ("why",)})
    first = Replay(label="assert_fail")
    screened = {"base": {PROP: (first,), OTHER: (passing(),)}, "patch": {}}
    more = {"base": {PROP: (passing(), passing())}}
    combined = screening.combine(screened, more, found)
    assert combined["base"][PROP] == (first, passing(), passing())
    assert combined["base"][OTHER] == (passing(),)
    assert list(combined["base"]) == [PROP, OTHER]


def test_a_side_is_handed_only_the_properties_it_has() -> None:
    missing = Replay(label="harness_error", reason="not_found")
    side = {PROP: (missing,), OTHER: (passing(),)}
    assert screening.replay_targets([PROP, OTHER], side) == (OTHER,)
    assert screening.replay_targets([PROP], side) == (PROP,)  # none: all, each not found


def test_evidence_declares_the_replays_each_property_got() -> None:
    plan = run_plan()
    plan = replace(plan, options=replace(plan.options, replays=3))
    found = Screening(policy=ScreenPolicy(screen=1, replays=3), signals={OTHER: ("base: x",)})
    labelled = {
        "base": {
            PROP: (passing(),),
            OTHER: (Replay(label="assert_fail", calls={"clock": 1}), *(passing(),) * 2),
        },
        "patch": {PROP: (passing(),), OTHER: (passing(),) * 3},
    }
    items = replay_run.decide_all(plan, labelled, {}, found)
    by_id = {item.evidence.property_id: item for item in items}
    quiet, loud = by_id[PROP], by_id[OTHER]
    assert (quiet.evidence.replays, quiet.evidence.screened, quiet.evidence.signal) == (1, 1, ())
    assert (quiet.decision.lane, quiet.decision.code) == (Lane.NO_FREEZE, "not_reproduced")
    assert (loud.evidence.replays, loud.evidence.signal) == (3, ("base: x",))
    assert loud.decision.lane is Lane.FIX_CANDIDATE
    doc = quiet.evidence.to_json()
    assert (doc["replays"], doc["screened"], doc["signal"]) == (1, 1, [])
    # Row 1 still checks the count: a screened property that lost a replay is malformed.
    short = replace(loud.evidence, base=loud.evidence.base[:2])
    assert decide(short).code == "replay_count"
    entries = [replay_run.report_entry(item) for item in items]
    report = replay_run.report_document(
        plan,
        [replay_run.decided(item, entry) for item, entry in zip(items, entries, strict=True)],
        found,
    )
    assert report["screening"]["replayed"] == 1
    assert replay_run.screening_line(report["screening"]) == "screened 2, replayed 1"
    assert [entry["replays"] for entry in entries] == [1, 3]
    assert [entry["replays"] for entry in report["decisions"]] == [3]  # the one needing a look
    assert report["decisions_left_out"] == 1


def test_without_screening_the_evidence_is_as_before() -> None:
    plan = run_plan()
    labelled = {"base": {PROP: (passing(),) * 2}, "patch": {PROP: (passing(),) * 2}}
    (item,) = replay_run.decide_all(plan, labelled, {})
    doc = item.evidence.to_json()
    assert doc["replays"] == 2
    assert "screened" not in doc
    assert "signal" not in doc
    decided = replay_run.decided(item, replay_run.report_entry(item))
    summary = replay_run.report_document(plan, [decided])["screening"]
    assert summary == {
        "policy": "replays_all",
        "screen": 0,
        "replays": 2,
        "screened": 0,
        "replayed": 1,
    }


# ---------------------------------------------------------------- raw folders of both phases

FOLDERS_1 = st.sampled_from(["raw", "raw/e1-b1", "raw/e1-b2", "raw/e2-b1"])
FOLDERS_2 = st.sampled_from(
    ["raw/replays", "raw/replays/e1-b1", "raw/replays/e1-b2", "raw/replays/e2-b1"]
)


def apply_links(
    links: tuple[screening.RawLink, ...], files: dict[str, int]
) -> dict[tuple[str, int], tuple[str, int]]:
    """Where each (folder, replay number) comes from after the links, as link_raw does
    (never overwriting); ``files`` says how many replay files each source folder has."""
    placed: dict[tuple[str, int], tuple[str, int]] = {
        (folder, k): (folder, k) for folder, count in files.items() for k in range(1, count + 1)
    }
    for link in links:
        for k in range(1, files.get(link.source, 0) + 1):
            if link.upto is not None and k > link.upto:
                continue
            placed.setdefault((link.target, k + link.offset), (link.source, k))
    return placed


@given(
    st.dictionaries(
        st.from_regex(r"t\.py::test_[a-h]", fullmatch=True), st.tuples(FOLDERS_1, FOLDERS_2)
    ),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_every_replayed_propertys_folder_holds_its_screening_then_its_second_phase(
    phases, screen, more
) -> None:
    first = {p: a for p, (a, _) in phases.items()}
    second = {p: b for p, (_, b) in phases.items()}
    dirs, links = screening.raw_layout(first, second, screen=screen)
    assert set(dirs) == set(second)
    files = dict.fromkeys(first.values(), screen) | dict.fromkeys(second.values(), more)
    placed = apply_links(links, files)
    for property_id, folder in dirs.items():
        for k in range(1, screen + 1):  # replay k <= K: its screening folder's replay k
            assert placed[(folder, k)] == (first[property_id], k)
        for k in range(1, more + 1):  # then the second phase's, numbered after K
            assert placed[(folder, screen + k)] == (second[property_id], k)
    # No two links write one file.
    written = [
        (link.target, k + link.offset)
        for link in links
        for k in range(1, files.get(link.source, 0) + 1)
        if link.upto is None or k <= link.upto
    ]
    assert len(written) == len(set(written))


def test_one_batch_per_phase_keeps_everything_in_raw() -> None:
    dirs, links = screening.raw_layout(
        {PROP: "raw", OTHER: "raw"}, {PROP: "raw/replays", OTHER: "raw/replays"}, screen=1
    )
    assert dirs == {PROP: "raw", OTHER: "raw"}
    assert links == (screening.RawLink(source="raw/replays", target="raw", offset=1),)
    assert screening.second_phase_dir("raw") == "raw/replays"
    assert screening.second_phase_dir("raw/e1-b2") == "raw/replays/e1-b2"


def test_a_screening_folder_split_over_two_second_phase_batches_gets_folders_of_its_own() -> None:
    dirs, _ = screening.raw_layout(
        {PROP: "raw", OTHER: "raw"},
        {PROP: "raw/replays/e1-b1", OTHER: "raw/replays/e2-b1"},
        screen=1,
    )
    assert dirs == {PROP: "raw/screen+e1-b1", OTHER: "raw/screen+e2-b1"}


def test_the_second_phase_keeps_the_suite_order_of_the_screening():
    """Longest first cuts batches; pytest is handed the tests in the order the sides ran
    them (base's, then any only the patch has)."""
    base = {"t::a": (), "t::b": (), "t::c": ()}
    patch = {"t::a": (), "t::new": (), "t::b": (), "t::c": ()}
    by_duration = ["t::c", "t::new", "t::a"]
    assert screening.in_suite_order(by_duration, [base, patch]) == ("t::a", "t::c", "t::new")


@given(
    st.lists(st.sampled_from("abcdefgh"), unique=True),
    st.lists(st.lists(st.sampled_from("abcdefgh"), unique=True), max_size=3),
)
def test_suite_order_is_a_permutation_that_follows_the_sides(wanted, sides):
    ordered = screening.in_suite_order(wanted, [dict.fromkeys(side) for side in sides])
    assert sorted(ordered) == sorted(wanted)
    seen = [p for side in sides for p in side if p in wanted]
    first_seen = list(dict.fromkeys(seen))
    assert list(ordered[: len(first_seen)]) == first_seen


def test_rounds_of_evidence_join_the_earlier_folders_numbered_after_them() -> None:
    """A round's folder is raw/round-<n>[/<batch>]; its files follow the replays the
    property had (its offset), in the folder the earlier phases left it in, and a round's
    batches never share a folder name with the second phase's."""
    assert screening.second_phase_dir("raw", "round-1") == "raw/round-1"
    assert screening.second_phase_dir("raw/e1-b2", "round-2") == "raw/round-2/e1-b2"
    dirs, links = screening.raw_layout({PROP: "raw"}, {PROP: "raw/round-1"}, screen=5)
    assert dirs == {PROP: "raw"}
    assert links == (screening.RawLink(source="raw/round-1", target="raw", offset=5),)
    dirs, _ = screening.raw_layout(
        {PROP: "raw/screen+e1-b1", OTHER: "raw/screen+e1-b1"},
        {PROP: "raw/round-1/e1-b1", OTHER: "raw/round-1/e2-b1"},
        screen=10,
    )
    assert dirs == {
        PROP: "raw/screen+e1-b1+round-1-e1-b1",
        OTHER: "raw/screen+e1-b1+round-1-e2-b1",
    }


def test_extend_appends_the_later_replays_of_the_named_properties_only() -> None:
    p, f = Replay(label="assert_pass"), Replay(label="assert_fail")
    earlier = {"base": {PROP: (p,), OTHER: (p,)}, "patch": {PROP: (f,), OTHER: (p,)}}
    later = {"base": {PROP: (p, p)}, "patch": {PROP: (f, p), OTHER: (f,)}}
    extended = screening.extend(earlier, later, [PROP])
    assert extended == {
        "base": {PROP: (p, p, p), OTHER: (p,)},
        "patch": {PROP: (f, f, p), OTHER: (p,)},
    }
