"""A folder or label a stranger names in a shared place never breaks a sweep.

Owner stems, pids in labels, replay numbers and line numbers are read as ASCII digits
only: ``str.isdigit()`` also takes ``"¹"`` (which ``int()`` refuses) and ``"٣"`` (which
``int()`` reads as 3, another process's pid).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import host as host_adapter
from orchestrator.core import owners
from orchestrator.core.reproduce import where

HOST = "0123456789abcdef"
# Characters str.isdigit() takes that are no ASCII digit: superscripts, other scripts' digits.
UNICODE_DIGITS = st.sampled_from("¹²³⁰٣۴߁०১௫๓᠒０𝟙")
ascii_digits = st.text(alphabet="0123456789", min_size=1, max_size=8)
stems_with_unicode_digits = st.builds(
    lambda head, odd, tail: head + odd + tail,
    st.text(alphabet="0123456789", max_size=4),
    UNICODE_DIGITS,
    st.text(alphabet="0123456789.@abcdef", max_size=20),
)


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    return scratch


@given(stem=stems_with_unicode_digits)
def test_a_stem_with_a_non_ascii_digit_names_no_owner(stem):
    assert owners.owner_from_stem(stem, host_id=HOST) is None


@given(stem=st.text(max_size=30))
def test_reading_any_stem_never_raises(stem):
    owner = owners.owner_from_stem(stem, host_id=HOST)
    assert owner is None or str(owner.pid).isascii()


@given(pid=stems_with_unicode_digits)
def test_a_container_label_with_a_non_ascii_pid_names_no_owner(pid):
    labels = {docker_adapter.LABEL_PID: pid, docker_adapter.LABEL_HOST: HOST}
    assert docker_adapter.owner_of(labels) is None


@given(line=stems_with_unicode_digits)
def test_an_assertion_place_with_a_non_ascii_line_has_no_location(line):
    assert where(f"t.py::test@t.py:{line}:AssertionError") is None


@given(token_pid=stems_with_unicode_digits, start=ascii_digits)
def test_a_claim_token_with_a_non_ascii_pid_names_no_owner(token_pid, start):
    assert owners.owner_from_token(f"{HOST}:{token_pid}:{start}:abcdef") is None


def test_a_stranger_folder_with_a_superscript_in_shared_tmp_leaves_the_sweep_working(
    private_tmp,
):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    hostile = [
        private_tmp / f"{git_adapter.SCRATCH_PREFIX}¹-src",
        private_tmp / f"{git_adapter.THAW_SCRATCH_PREFIX}٣-fixture",
        private_tmp / f"{git_adapter.SCRATCH_PREFIX}¹.2@{host_adapter.host_id()}-src",
    ]
    for folder in hostile:
        folder.mkdir()
    left = private_tmp / f"{git_adapter.SCRATCH_PREFIX}{dead.pid}-src-x"  # a dead owner's
    left.mkdir()

    removed = git_adapter.sweep_scratch(host_adapter.pid_alive)

    assert removed == [left]  # the sweep ran to its end
    # An owner it cannot read is foreign: left alone until a day old, never taken for ours.
    assert all(folder.exists() for folder in hostile)
