"""What a container may hand back (core/result_files.py), the tree caps
(core/tree_limits.py), the capped line splitter and the capped results stream."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.adapters import results
from orchestrator.adapters.docker import BoundedLines
from orchestrator.core import result_files, tree_limits
from orchestrator.core.result_files import ResultEntry, entry_problem
from orchestrator.core.tree_limits import TreeCaps, TreeSize, tree_caps, tree_problem

names = st.text(min_size=1, max_size=40)
kinds = st.sampled_from(result_files.KINDS)
sizes = st.integers(min_value=-1, max_value=2 * result_files.FILE_BYTES)


@given(name=names, kind=kinds, size=sizes)
def test_only_plain_regular_files_under_the_cap_are_taken(name, kind, size):
    problem = entry_problem(ResultEntry(name=name, kind=kind, size=size))
    plain = (
        name[0].isascii()
        and name[0].isalnum()
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
        and len(name) <= 128
    )
    taken = plain and kind == "file" and 0 <= size <= result_files.FILE_BYTES
    assert (problem is None) == taken
    if problem is not None and plain:
        assert name in problem  # the reason names the entry


def test_every_other_kind_is_named_in_the_reason():
    for kind in ("symlink", "fifo", "device", "directory", "socket"):
        problem = entry_problem(ResultEntry(name="replay-001.json", kind=kind, size=0))
        assert problem == f"replay-001.json is a {kind}, not a regular file"


@given(files=st.integers(min_value=0, max_value=10**6), total=st.integers(0, 10**12))
def test_a_tree_is_refused_exactly_when_it_is_over_a_cap(files, total):
    caps = TreeCaps(max_bytes=10**9, max_files=10**5)
    problem = tree_problem(TreeSize(files=files, total_bytes=total), caps)
    assert (problem is None) == (files <= caps.max_files and total <= caps.max_bytes)


def test_tree_caps_come_from_the_hosts_environment_and_bad_values_are_named():
    assert tree_caps({}) == TreeCaps()
    assert tree_caps({tree_limits.BYTES_VARIABLE: "1024"}).max_bytes == 1024
    for bad in ("0", "-1", "1e9", "¹", "lots"):
        with pytest.raises(ValueError, match=tree_limits.BYTES_VARIABLE):
            tree_caps({tree_limits.BYTES_VARIABLE: bad})


@given(
    chunks=st.lists(st.binary(max_size=300), max_size=20),
    cap=st.integers(min_value=1, max_value=64),
)
def test_bounded_lines_never_hand_on_a_line_over_the_cap(chunks, cap):
    seen: list[str] = []
    lines = BoundedLines(seen.append, line_bytes=cap)
    for chunk in chunks:
        lines.feed(chunk)
    lines.close()
    data = b"".join(chunks)
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert len(seen) == len(expected)
    for line, raw in zip(seen, expected, strict=True):
        if len(raw) <= cap:
            assert line == raw.decode("utf-8", errors="replace")
        else:
            assert line.endswith(" [line cut]")
            assert len(line.encode("utf-8")) <= 4 * cap + len(" [line cut]")


def _read_back(folder: Path) -> results.ResultsRead:
    done = subprocess.run(
        results.reader_command(sys.executable, str(folder)),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return results.read_results_stream([done.stdout])


def test_the_reader_reports_links_fifos_and_big_files_and_copies_none(tmp_path):
    (tmp_path / "replay-001.json").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "replay-002.json")
    with (tmp_path / "replay-003.json").open("wb") as big:
        big.truncate(result_files.FILE_BYTES + 1)  # sparse: over the cap, no disk
    (tmp_path / "replay-004.json").write_text("{}")
    read = _read_back(tmp_path)
    assert read.problem is None
    assert set(read.unsafe) == {"replay-001.json", "replay-002.json", "replay-003.json"}
    assert "symlink" in read.unsafe["replay-001.json"]
    assert "fifo" in read.unsafe["replay-002.json"]
    assert "over the cap" in read.unsafe["replay-003.json"]
    assert read.files == {"replay-004.json": b"{}"}
    states = [f.state for f in results.replay_files_from(read, 5)]
    assert states == ["unsafe", "unsafe", "unsafe", "corrupt", "missing"]


def test_a_folder_with_too_many_entries_is_refused_whole(tmp_path):
    for index in range(result_files.ENTRIES + 1):
        (tmp_path / f"f{index}").write_text("x")
    read = _read_back(tmp_path)
    assert read.problem is not None
    assert "entries" in read.problem
    assert read.files == {}


def test_a_stream_over_its_cap_is_refused_without_reading_on():
    pulled = []
    member = tarfile.TarInfo("out/filler")
    member.size = 60 * 1024
    block = member.tobuf() + b"x" * member.size  # 60 KiB: a whole number of 512-byte blocks

    def endless():  # a well-formed tar that never ends
        while True:
            pulled.append(1)
            yield block

    read = results.read_results_stream(endless(), cap=1024 * 1024)
    assert read.problem == "the results folder is over its size cap"
    assert len(pulled) <= 1024 * 1024 // 65536 + 1


def test_a_stream_that_is_not_a_tar_or_has_no_report_is_refused():
    assert results.read_results_stream([b"garbage" * 100]).problem is not None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo("out/replay-001.json")
        member.size = 2
        archive.addfile(member, io.BytesIO(b"{}"))
    read = results.read_results_stream([buffer.getvalue()])
    assert read.problem == "the results reader gave no report"
    assert read.files == {}
