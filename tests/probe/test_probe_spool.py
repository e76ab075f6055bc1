"""A session's test entries go to a spool beside its result as the tests finish, and the
result is written from it: the same document a list held in memory gave."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.probe import spool as spool_module
from orchestrator.probe.spool import TestSpool, spool_path

ENTRY = st.dictionaries(
    st.sampled_from(["nodeid", "label", "message"]), st.text(max_size=40), max_size=3
).map(lambda entry: json.dumps(entry, ensure_ascii=False))


@settings(max_examples=examples(50))
@given(st.lists(ENTRY, max_size=30), st.lists(ENTRY, max_size=2), st.integers(1, 200))
def test_the_spooled_entries_are_the_joined_list(
    tmp_path_factory: pytest.TempPathFactory, entries: list[str], extra: list[str], flush: int
) -> None:
    result = tmp_path_factory.mktemp("spool") / "result.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spool_module, "FLUSH_BYTES", flush)  # many small flushes
        spooled = TestSpool(str(result))
        for entry in entries:
            spooled.add(entry)
        text = b"".join(spooled.chunks(extra)).decode("utf-8")
    assert text == ",".join([*entries, *extra])
    assert json.loads(f"[{text}]") == [json.loads(e) for e in [*entries, *extra]]
    spooled.remove()
    assert not Path(spool_path(str(result))).exists()


def test_a_spool_that_cannot_be_written_keeps_the_rest_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "FLUSH_BYTES", 10)
    result = tmp_path / "result.json"
    spooled = TestSpool(str(result))
    spooled.add('{"nodeid": "t.py::a"}')  # flushed to the spool
    real_open = os.open

    def full(path: str, flags: int, mode: int = 0o777) -> int:
        if path.endswith(".tests"):  # the results folder is full (a test filled it)
            raise OSError(28, "No space left on device")
        return real_open(path, flags, mode)

    with monkeypatch.context() as patch:
        patch.setattr(spool_module.os, "open", full)
        spooled.add('{"nodeid": "t.py::b"}')
        spooled.add('{"nodeid": "t.py::c"}')
    text = b"".join(spooled.chunks()).decode()
    assert json.loads(f"[{text}]") == [{"nodeid": f"t.py::{n}"} for n in "abc"]


def test_a_session_of_many_tests_writes_its_whole_result_from_the_spool(pytester, probe_run):
    # More than one flush of entries (a few hundred bytes each, 256 KB a flush).
    body = "".join(f"\ndef test_{n}():\n    assert {n} >= 0\n" for n in range(1500))
    pytester.makepyfile(test_many=body + "\ndef test_fails():\n    assert 1 == 2\n")
    document = probe_run()
    tests = document["tests"]
    assert len(tests) == 1501
    assert [t["nodeid"] for t in tests[:2]] == ["test_many.py::test_0", "test_many.py::test_1"]
    assert tests[-1]["label"] == "assert_fail"
    assert not list(pytester.path.glob("*.tests"))  # the spool is gone with the session
