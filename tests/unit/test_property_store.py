"""The run's property store (properties.jsonl.gz): written as properties are decided, in
any parts, read back in the run's order; what a reader refuses; what the run keeps."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples
from unit_factories import evidence, side

from orchestrator.core import run_store
from orchestrator.core.lanes import decide
from orchestrator.core.replay_run import PropertyOutcome, report_entry
from orchestrator.errors import CapError, InputError
from orchestrator.model import PROPERTIES_FILE, Decision, Lane
from orchestrator.services import property_store, run_writer
from orchestrator.services.ledger_jobs import decision_event, decision_event_of

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def outcome(index: int, *, failing: bool = False) -> PropertyOutcome:
    found = evidence(
        property_id=f"tests/test_m.py::test_{index}",
        patch=side(*(["assert_fail"] * 3 if failing else ["assert_pass"] * 3)),
    )
    return PropertyOutcome(index=index, evidence=found, decision=decide(found))


def written(folder: Path, parts: list[list[PropertyOutcome]], run_id: str = "r1") -> list[Any]:
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for part in parts:
        kept.extend(property_store.add(folder, part))
    property_store.finish(folder, run_id)
    return kept


def test_parts_decided_apart_are_read_back_in_the_run_s_order(tmp_path: Path) -> None:
    # Screening settles the quiet ones first; the ones with signal (2 and 5) come last.
    quiet = [outcome(n) for n in (1, 3, 4, 6, 7)]
    loud = [outcome(2, failing=True), outcome(5, failing=True)]
    kept = written(tmp_path / "run", [quiet, loud])
    stored = property_store.StoreRead(tmp_path / "run")
    assert (stored.count, stored.header["run_id"]) == (7, "r1")
    records = list(stored.records())
    assert [record["index"] for record in records] == list(range(1, 8))
    for record, item in zip(records, sorted([*quiet, *loud], key=lambda o: o.index), strict=True):
        assert record["property_id"] == item.evidence.property_id
        assert record["evidence"] == item.evidence.to_json()
        assert record["decision"] == item.decision.to_json()
        assert record["entry"] == report_entry(item)
    # The run keeps the entry of what needs a look only (the two regressions).
    assert sorted(row.index for row in kept if row.entry is not None) == [2, 5]
    assert {row.decision.lane for row in kept} == {Lane.NO_FREEZE, Lane.PROPERTY_REGRESSION}


def test_decided_parts_wait_on_disk_and_leave_nothing_behind(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    property_store.add(folder, [outcome(n) for n in (1, 2, 3)])
    spool = folder / property_store.SPOOL_FILE
    assert spool.stat().st_size > 0  # held in the run folder, not in memory
    assert not (folder / PROPERTIES_FILE).exists()
    property_store.finish(folder, "r1")
    assert not spool.exists()
    assert property_store.StoreRead(folder).count == 3
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    property_store.add(stopped, [outcome(1)])
    property_store.forget(stopped)  # the run stopped: its store will never be written
    assert sorted(os.listdir(stopped)) == []
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    (interrupted / run_writer.INCOMPLETE).write_text("")
    property_store.add(interrupted, [outcome(1)])
    assert run_writer.note_incomplete(interrupted, "interrupted")  # as the CLI marks it
    assert sorted(os.listdir(interrupted)) == [run_writer.INCOMPLETE]


def test_the_file_is_plain_gzip_json_lines_with_a_header(tmp_path: Path) -> None:
    written(tmp_path / "run", [[outcome(1), outcome(2)]], run_id="run-9")
    lines = gzip.decompress((tmp_path / "run" / PROPERTIES_FILE).read_bytes()).splitlines()
    assert json.loads(lines[0]) == {
        "schema": "replay-properties/1",
        "run_id": "run-9",
        "properties": 2,
    }
    assert [json.loads(line)["index"] for line in lines[1:]] == [1, 2]


@settings(max_examples=examples(40), deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.booleans(), min_size=n, max_size=n))
    )
)
def test_any_two_parts_of_a_run_come_back_whole_and_in_order(
    tmp_path_factory: pytest.TempPathFactory, drawn: tuple[int, list[bool]]
) -> None:
    count, first_part = drawn
    folder = tmp_path_factory.mktemp("store")
    items = [outcome(n) for n in range(1, count + 1)]
    parts = [
        [item for item, early in zip(items, first_part, strict=True) if early],
        [item for item, early in zip(items, first_part, strict=True) if not early],
    ]
    written(folder, parts)
    assert [r["index"] for r in property_store.StoreRead(folder).records()] == list(
        range(1, count + 1)
    )


def test_a_missing_property_is_never_written_as_a_whole_store(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    property_store.add(folder, [outcome(1), outcome(3)])
    with pytest.raises(RuntimeError, match="lacks property 2"):
        property_store.finish(folder, "r")
    assert not (folder / PROPERTIES_FILE).exists()


def test_a_run_that_decided_nothing_has_a_header_alone(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    property_store.finish(folder, "r")
    stored = property_store.StoreRead(folder)
    assert stored.count == 0
    assert list(stored.records()) == []


def test_a_store_already_written_is_kept_when_the_summary_is_written_again(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run"
    written(folder, [[outcome(1)]])
    before = (folder / PROPERTIES_FILE).read_bytes()
    property_store.finish(folder, "r1")  # recording writes summary.json again
    assert (folder / PROPERTIES_FILE).read_bytes() == before


def test_a_property_is_found_by_its_id_whatever_its_characters(tmp_path: Path) -> None:
    odd = 'tests/test_m.py::test_x["quote\\back\nline\u202e é"]'
    found = evidence(property_id=odd)
    items = [outcome(1), PropertyOutcome(index=2, evidence=found, decision=decide(found))]
    written(tmp_path / "run", [items])
    stored = property_store.StoreRead(tmp_path / "run")
    record = stored.find(odd)
    assert record is not None
    assert record["index"] == 2
    assert record["evidence"]["property_id"] == odd
    assert stored.find("tests/test_m.py::test_x") is None


def test_compressed_members_count_against_the_run_folder_s_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_MAX_RUN_BYTES", "600")
    folder = tmp_path / "run"
    run_writer.start_run_folder(folder, started_at="now")
    with pytest.raises(CapError, match="ORCHESTRATOR_MAX_RUN_BYTES"):
        property_store.add(folder, [outcome(n) for n in range(1, 50)])
    property_store.forget(folder)
    assert not (folder / PROPERTIES_FILE).exists()


def _replace_lines(path: Path, edit: Any) -> None:
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    path.write_bytes(gzip.compress(b"".join(edit(lines))))


@pytest.mark.parametrize(
    ("breaking", "fragment"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-30]), "cannot read"),
        (lambda p: p.write_bytes(b"plain text\n"), "cannot read"),
        (lambda p: _replace_lines(p, lambda lines: lines[:1]), "holds 0 properties, its header"),
        (lambda p: _replace_lines(p, lambda lines: [lines[0], lines[2]]), "where 1 was due"),
        (lambda p: _replace_lines(p, lambda lines: [*lines, b"{"]), "a line is not JSON"),
        (lambda p: _replace_lines(p, lambda lines: [b"[]\n", *lines[1:]]), "first line is not"),
        (
            lambda p: _replace_lines(p, lambda ls: [ls[0], b'{"index": 1}\n', ls[2]]),
            "property_id is not a string",
        ),
        (
            lambda p: _replace_lines(
                p, lambda ls: [ls[0].replace(b"replay-properties/1", b"x/9"), *ls[1:]]
            ),
            "expected a replay-properties/1 header",
        ),
    ],
)
def test_a_damaged_store_is_refused_naming_it(tmp_path: Path, breaking: Any, fragment: str) -> None:
    folder = tmp_path / "run"
    written(folder, [[outcome(1), outcome(2)]])
    breaking(folder / PROPERTIES_FILE)
    with pytest.raises(InputError, match=fragment) as refused:
        list(property_store.StoreRead(folder).records())
    assert str(folder) in str(refused.value)


def test_a_line_past_the_longest_a_record_can_be_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    written(folder, [[outcome(1)]])
    monkeypatch.setattr(property_store, "MAX_LINE_BYTES", 200)
    with pytest.raises(InputError, match="longer than a record can be"):
        list(property_store.StoreRead(folder).records())


def test_a_store_that_is_a_link_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    written(folder, [[outcome(1)]])
    (folder / PROPERTIES_FILE).rename(tmp_path / "elsewhere.gz")
    os.symlink(tmp_path / "elsewhere.gz", folder / PROPERTIES_FILE)
    with pytest.raises(InputError, match=r"symbolic link|not a regular file"):
        property_store.StoreRead(folder)


@given(
    st.sampled_from(list(Lane)),
    st.text(max_size=20),
    st.lists(st.text(max_size=30), max_size=3),
    st.none() | st.text(min_size=1, max_size=40),
)
def test_a_stored_decision_reads_back_as_the_value_it_was(
    lane: Lane, code: str, reasons: list[str], tests_from: str | None
) -> None:
    decision = Decision(
        lane=lane,
        code=code,
        blocking=lane.blocking,
        freeze_allowed=lane is Lane.FLAKE_QUEUE_ELIGIBLE,
        reasons=tuple(reasons),
        tests_from=tests_from,
    )
    assert run_store.decision_from_json(json.loads(json.dumps(decision.to_json()))) == decision


LABELS = st.sampled_from(["assert_pass", "assert_fail", "timeout", "harness_error", "skipped"])


@settings(max_examples=examples(60))
@given(
    st.lists(LABELS, min_size=1, max_size=4),
    st.lists(LABELS, min_size=1, max_size=4),
    st.dictionaries(st.sampled_from(["clock", "open", "http"]), st.integers(0, 5), max_size=3),
    st.none() | st.text(min_size=1, max_size=12),
)
def test_the_ledger_s_event_from_the_store_is_the_event_from_the_values(
    base: list[str], patch: list[str], calls: dict[str, int], tests_from: str | None
) -> None:
    found = evidence(
        base=side(*base, calls=calls), patch=side(*patch, calls=calls), tests_from=tests_from
    )
    decided = decide(found)
    item = PropertyOutcome(index=1, evidence=found, decision=decided)
    stored = json.loads(json.dumps(run_store.record_of(item)))
    from_store = decision_event_of(stored["evidence"], stored["decision"], NOW, run_id="r")
    assert from_store == decision_event(found, decided, NOW, run_id="r")
