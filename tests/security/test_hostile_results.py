"""A hostile patch attacks the results channel, the logs and the host's disk and memory.

Each test replays a scratch repository whose patch turns its one test into an attack,
through the real CLI and the real engine, and asserts the host is untouched: no host
bytes (a host file's contents, the tool's own environment) in any output or in the run
folder, the tool's peak memory and the disk it used bounded, an exit within the
deadline with the documented code, and the attack labelled ``harness_error`` with its
reason where the results were tampered with. docs/security.md lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_repo import (
    BOMB_CAP,
    FILL_DISK,
    FLOOD,
    FLOOD_INI,
    HUGE_RESULT,
    PROPERTY,
    assert_no_host_bytes,
    bomb_repo,
    folder_bytes,
    hostile_repo,
    replay,
    swap_attack,
)

pytestmark = pytest.mark.docker

PEAK_RSS_KB = 400 * 1024  # the CLI's own peak: some 100 MiB normally
RUN_DIR_BYTES = 2 * 1024 * 1024


def host_secret() -> bytes:
    """Something of the host the container cannot see: a line of this host's
    /etc/shadow (root reads it), else of /etc/hostname."""
    for path in (Path("/etc/shadow"), Path("/etc/machine-id"), Path("/etc/hostname")):
        try:
            text = path.read_bytes()
        except OSError:
            continue
        line = text.splitlines()[0] if text.strip() else b""
        if len(line) >= 8:
            return line
    pytest.skip("no host file with a line to look for")


def assert_unsafe(run) -> None:
    assert run.code == 3, run.stderr.decode()[-2000:]  # an undecided lane: no verdict
    decision = run.decision()
    assert decision["patch_labels"] == ["harness_error"]
    assert decision["patch_reasons"] == ["unsafe_result"]
    assert decision["base_labels"] == ["assert_pass"]


@pytest.mark.parametrize(
    "target",
    ["/etc/shadow", "/etc/passwd", "/proc/self/environ", "/proc/1/environ"],
)
def test_a_result_swapped_for_a_symlink_is_never_followed(tmp_path, target):
    repo = hostile_repo(tmp_path, swap_attack(f"os.symlink({target!r}, target)"))
    run = replay(tmp_path, repo)
    assert_unsafe(run)
    assert_no_host_bytes(run, host_secret())


def test_a_result_swapped_for_a_fifo_never_hangs_the_tool(tmp_path):
    repo = hostile_repo(tmp_path, swap_attack("os.mkfifo(target)"))
    run = replay(tmp_path, repo, deadline_s=180)
    assert_unsafe(run)
    assert "is a fifo" in run.decision()["reasons"][0] or run.decision()["reasons"]


def test_a_result_that_is_dev_zero_costs_the_host_no_memory(tmp_path):
    repo = hostile_repo(tmp_path, swap_attack("os.symlink('/dev/zero', target)"))
    run = replay(tmp_path, repo)
    assert_unsafe(run)
    assert run.max_rss_kb < PEAK_RSS_KB


def test_a_huge_result_file_is_refused_and_never_copied(tmp_path):
    # 40 MiB of valid-looking JSON: over the per-file cap, under the folder's tmpfs.
    repo = hostile_repo(tmp_path, swap_attack(HUGE_RESULT))
    run = replay(tmp_path, repo)
    assert_unsafe(run)
    assert folder_bytes(run.run_dir) < RUN_DIR_BYTES
    assert run.max_rss_kb < PEAK_RSS_KB


def test_filling_the_results_folder_and_tmp_stops_at_their_caps(tmp_path):
    repo = hostile_repo(tmp_path, FILL_DISK)
    run = replay(tmp_path, repo)
    assert run.code in (0, 1, 3), run.stderr.decode()[-2000:]
    # Its own file in the results folder is refused (not a result the driver wrote);
    # the replay itself completed: the writes hit the tmpfs caps and were caught.
    assert folder_bytes(run.run_dir) < RUN_DIR_BYTES
    assert folder_bytes(run.scratch) == 0  # every scratch folder removed
    assert run.max_rss_kb < PEAK_RSS_KB


def test_a_flood_of_output_without_newlines_is_bounded(tmp_path, docker_client):
    repo = hostile_repo(tmp_path, FLOOD, extra=FLOOD_INI)
    run = replay(tmp_path, repo)
    assert run.code in (0, 1, 3), run.stderr.decode()[-2000:]
    assert run.max_rss_kb < PEAK_RSS_KB
    assert b"\x1b[2J" not in run.stdout + run.stderr
    assert folder_bytes(run.run_dir) < RUN_DIR_BYTES


def test_a_compression_bomb_in_git_is_refused_before_it_is_written(tmp_path):
    # 96 MiB of zeros against a cap of 64 MiB the CI owner set (the default, 2 GiB, works
    # the same way: sizes come from the objects' headers, nothing is unpacked).
    run = replay(tmp_path, bomb_repo(tmp_path), json_out=False, env=BOMB_CAP)
    assert run.code == 2, run.stderr.decode()[-2000:]
    assert b"over the cap" in run.stderr
    assert folder_bytes(run.scratch) == 0
    assert not run.run_dir.exists()


def test_the_property_name_used_by_these_tests_is_the_attack(tmp_path):
    """The attacks above decide the test they rewrote: a repository whose patch keeps
    the test passing is decided as such (the harness itself is not what fails)."""
    repo = hostile_repo(tmp_path, "def run():\n    return 1 + 1\n")
    run = replay(tmp_path, repo)
    assert run.code == 0, run.stderr.decode()[-2000:]
    decision = run.decision()
    assert decision["property_id"] == PROPERTY
    assert decision["patch_labels"] == ["assert_pass"]
