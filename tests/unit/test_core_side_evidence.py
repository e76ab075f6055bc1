"""The key of a side's screening evidence, what may be stored, and the stored entry's
checks (orchestrator/core/side_evidence.py). Pure."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.side_evidence import (
    SHARED,
    SideEvidence,
    SideKeyInputs,
    StoredReplay,
    deadline_problem,
    entry_problem,
    scope_of,
    side_key,
    unclean_reason,
    without_deadline,
)

IMAGE = "sha256:" + "1" * 64
KEY = "sha256:" + "a" * 64

BASE_INPUTS = SideKeyInputs(
    scope=SHARED,
    tree="b" * 40,
    overlay_write={"tests/test_x.py": "c" * 40},
    overlay_remove=("tests/test_old.py",),
    mutant=None,
    image_id=IMAGE,
    interpreter="python3",
    runner_id="local",
    commands=(("python3", "-m", "orchestrator.probe.replay", "--replays", "1"),),
    exec_environment={"PYTHONHASHSEED": "0"},
    environment={"REPLAY_SEED": "0", "PYTHONPATH": "/src:/opt/orchestrator"},
    limits={"memory": "512m", "pids": 256, "cpus": 1.0, "tmp_size": "64m"},
    tmpfs={"/replay-out": "rw"},
    isolation="side",
    fixture_sha256=None,
    probe_digest="sha256:" + "d" * 64,
    probe_version="7",
)

text = st.text(min_size=1, max_size=12)
# One field at a time, changed to a value other than its own.
CHANGES: dict[str, Any] = {
    "scope": st.just("patch:" + "e" * 40),
    "tree": text,
    "overlay_write": st.dictionaries(text, text, min_size=1),
    "overlay_remove": st.lists(text, min_size=2).map(tuple),
    "mutant": text,
    "image_id": text,
    "interpreter": text,
    "runner_id": text,
    "commands": st.lists(st.lists(text, min_size=1).map(tuple), min_size=2).map(tuple),
    "exec_environment": st.dictionaries(text, text, min_size=2),
    "environment": st.dictionaries(text, text, min_size=3),
    "limits": st.dictionaries(text, st.integers(), min_size=5),
    "tmpfs": st.dictionaries(text, text, min_size=2),
    "isolation": st.just("container"),
    "fixture_sha256": text,
    "probe_digest": text,
    "probe_version": text,
}


@given(data=st.data(), name=st.sampled_from(sorted(CHANGES)))
def test_any_change_of_an_input_changes_the_key(data, name):
    value = data.draw(CHANGES[name])
    changed = dataclasses.replace(BASE_INPUTS, **{name: value})
    if changed.to_json() == BASE_INPUTS.to_json():  # drawn equal to the original
        return
    assert side_key(changed) != side_key(BASE_INPUTS)


@given(st.dictionaries(text, text), st.lists(text).map(tuple))
def test_equal_inputs_give_equal_keys(write, remove):
    one = dataclasses.replace(BASE_INPUTS, overlay_write=write, overlay_remove=remove)
    # Built again, the mapping in another order and the removals reversed.
    two = dataclasses.replace(
        BASE_INPUTS,
        overlay_write=dict(reversed(list(write.items()))),
        overlay_remove=tuple(reversed(remove)),
    )
    assert side_key(one) == side_key(two)
    assert side_key(one).startswith("sha256:")


def test_every_field_of_the_inputs_is_in_the_key():
    fields = {field.name for field in dataclasses.fields(SideKeyInputs)}
    assert fields == set(CHANGES)
    assert fields <= set(BASE_INPUTS.to_json())


def test_a_side_with_another_revisions_bytes_is_scoped_to_the_patch():
    assert scope_of(foreign_bytes=False, patch_rev="f" * 40) == SHARED
    assert scope_of(foreign_bytes=True, patch_rev="f" * 40) == "patch:" + "f" * 40


def test_the_deadline_is_left_out_of_the_command_and_checked_on_the_entry():
    command = ("python3", "-m", "x", "--timeout", "600", "--seed", "0")
    assert without_deadline(command) == (
        "python3",
        "-m",
        "x",
        "--timeout",
        "<deadline>",
        "--seed",
        "0",
    )
    assert without_deadline(command) == without_deadline(
        ("python3", "-m", "x", "--timeout", "1800", "--seed", "0")
    )
    quick = [ReplayFile(replay=1, state="ok", doc={"wall_ms": 2000})]
    assert deadline_problem(quick, 600) is None
    assert "more than half" in (deadline_problem(quick, 3) or "")
    assert deadline_problem([ReplayFile(replay=1, state="ok", doc={})], 600) is not None


def run_doc(
    *, tests=("tests/test_a.py::test_x",), seed=0, timeout_s=60.0, **extra
) -> dict[str, Any]:
    return {
        "schema": "replay-run/1",
        "status": "completed",
        "replay": 1,
        "seed": seed,
        "timeout_s": timeout_s,
        "wall_ms": 10,
        "result": {
            "schema": "replay-probe/1",
            "tests": [{"nodeid": nodeid, "label": "assert_pass"} for nodeid in tests],
            "skipped": [],
        },
        **extra,
    }


def clean(number: int = 1, **doc: Any) -> tuple[ReplayFile, ContainerFacts]:
    return (
        ReplayFile(replay=number, state="ok", doc=run_doc(**doc)),
        ContainerFacts(image_id=IMAGE, exit_code=0),
    )


def reason(observed, **kwargs: Any) -> str | None:
    defaults: dict[str, Any] = {
        "replays": len(observed),
        "image_id": IMAGE,
        "seed": 0,
        "timeout_s": 60.0,
    }
    return unclean_reason(observed, **{**defaults, **kwargs})


def test_a_clean_screening_may_be_stored():
    assert reason([clean(1), clean(2)]) is None
    assert reason([clean(1)], property_ids=("tests/test_a.py",)) is None
    assert reason([clean(1)], property_ids=("tests/test_a.py::test_x",)) is None


def test_anything_but_a_clean_screening_is_not_stored():
    facts = ContainerFacts(image_id=IMAGE, exit_code=0)
    assert reason([clean(1)], replays=2)  # a replay missing
    assert reason([(clean(1)[0], ContainerFacts(image_id=IMAGE, exit_code=137))])
    assert reason([(clean(1)[0], ContainerFacts(image_id=IMAGE, exit_code=0, oom_killed=True))])
    assert reason([(clean(1)[0], ContainerFacts(image_id=IMAGE, exit_code=0, cancelled=True))])
    assert reason([(clean(1)[0], ContainerFacts(image_id="sha256:other", exit_code=0))])
    assert reason([(ReplayFile(replay=1, state="unsafe", problem="a symlink"), facts)])
    assert reason([(ReplayFile(replay=1, state="corrupt", problem="not JSON"), facts)])
    assert reason(
        [(ReplayFile(replay=1, state="ok", doc={**run_doc(), "status": "timeout"}), facts)]
    )
    assert reason([clean(1, results_full=True)])
    assert reason([clean(1, seed=3)])  # forged-looking: not the run's seed
    assert reason([clean(1, timeout_s=5)])
    assert reason([clean(1, tests=("<session>",))])  # the session failed
    assert reason([clean(1, tests=())])  # nothing reported
    assert reason([clean(1), clean(2, tests=("tests/test_a.py::test_y",))])  # other tests
    # A test the run did not ask for.
    assert "not asked for" in (
        reason([clean(1, tests=("tests/test_b.py::test_z",))], property_ids=("tests/test_a.py",))
        or ""
    )


def entry() -> SideEvidence:
    return SideEvidence(
        key=KEY,
        scope=SHARED,
        side="base",
        rev="9" * 40,
        run_id="run-1",
        stored_at="2026-12-07T00:00:00+00:00",
        replays=(StoredReplay(replay=1, data=b'{"a": 1}', image_id=IMAGE, exit_code=0),),
    )


def test_a_stored_entry_reads_back_for_its_key_only():
    doc = json.loads(json.dumps(entry().to_json()))
    found, problem = entry_problem(doc, KEY)
    assert problem is None
    assert found == entry()
    assert entry_problem(doc, "sha256:" + "b" * 64) == (None, "stored under another key")


@given(st.sampled_from(["side", "run_id", "scope", "rev"]), st.text(max_size=5))
def test_an_altered_entry_is_not_trusted(name, value):
    doc = entry().to_json()
    if doc[name] == value:
        return
    doc[name] = value
    found, problem = entry_problem(doc, KEY)
    assert found is None
    assert "digest" in (problem or "")


def test_altered_bytes_are_not_trusted_even_with_a_recomputed_digest():
    from orchestrator.core.digest import digest

    body = entry().body()
    body["replays"][0]["bytes"] = "eyJhIjogMn0="  # {"a": 2}
    doc = {**body, "digest": digest(body)}
    found, problem = entry_problem(doc, KEY)
    assert found is None
    assert "do not match their digest" in (problem or "")
    assert entry_problem("not a mapping", KEY)[0] is None
    assert entry_problem({**entry().to_json(), "schema": "other/1"}, KEY)[0] is None


@given(
    st.lists(st.binary(max_size=3 * 1024), min_size=1, max_size=4),
    st.text(max_size=8),
    st.integers(min_value=1, max_value=4096),
)
def test_the_entry_made_piece_by_piece_is_its_canonical_json(files, run_id, step):
    from orchestrator.core.digest import canonical_json

    whole = dataclasses.replace(
        entry(),
        run_id=run_id,
        replays=tuple(
            StoredReplay(replay=n, data=data, image_id=IMAGE, exit_code=0)
            for n, data in enumerate(files, start=1)
        ),
    )
    pieces = list(whole.canonical_pieces(step=3 * step))  # any size cut at a multiple of 3
    assert b"".join(pieces) == canonical_json(whole.to_json())
    found, problem = entry_problem(json.loads(b"".join(pieces)), KEY)
    assert problem is None
    assert found == whole


def test_a_screening_is_stored_only_with_reuse_on_a_screened_run_and_a_store():
    from orchestrator.core.side_evidence import screening_stored

    def stored(**changed: bool) -> bool:
        flags = {"reuse": True, "screens": True, "ledger": True, "cache": False, **changed}
        return screening_stored(**flags)

    assert stored()  # the defaults: a screened run recording in its ledger
    assert stored(ledger=False, cache=True)  # --no-record with an evidence cache
    assert not stored(reuse=False)  # --no-reuse
    assert not stored(screens=False)  # --property: nothing screened
    assert not stored(ledger=False)  # --no-record, no cache: nowhere to keep it
