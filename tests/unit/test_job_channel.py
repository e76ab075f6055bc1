"""Serve mode's FIFOs on the host (adapters/job_channel.py): a private folder, FIFOs only
the container's user can open, opened without following links or blocking."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time

import pytest

from orchestrator.adapters.job_channel import CONTAINER_UID, JobChannel, Received


def test_the_fifos_live_in_a_private_folder_and_are_the_containers_users(tmp_path):
    channel = JobChannel(tmp_path / "channel")
    try:
        assert stat.S_IMODE(os.stat(channel.folder).st_mode) == 0o700
        for path in (channel.jobs_path, channel.results_path):
            info = os.lstat(path)
            assert stat.S_ISFIFO(info.st_mode)
            if os.geteuid() == 0:
                assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (CONTAINER_UID, 0o600)
            else:
                assert stat.S_IMODE(info.st_mode) == 0o666  # behind the private folder
        mounts = dict(channel.mounts("/replay/serve"))
        assert mounts == {
            channel.jobs_path: "/replay/serve/jobs",
            channel.results_path: "/replay/serve/results",
            channel.files: "/replay/serve/files",
        }
        channel.open()
        fixture = channel.put_file("fixture-000001.json", b"{}")
        assert fixture.parent == channel.files
        assert stat.S_IMODE(os.stat(fixture).st_mode) == 0o644
    finally:
        channel.close()


def test_a_folder_already_there_is_never_taken(tmp_path):
    (tmp_path / "channel").mkdir()
    with pytest.raises(FileExistsError):
        JobChannel(tmp_path / "channel")


def test_a_link_in_place_of_a_fifo_is_never_followed(tmp_path):
    channel = JobChannel(tmp_path / "channel")
    try:
        os.unlink(channel.results_path)
        os.mkfifo(tmp_path / "elsewhere")
        os.symlink(tmp_path / "elsewhere", channel.results_path)
        with pytest.raises(OSError, match="symbolic links") as refused:
            channel.open()
        assert refused.value.errno == errno.ELOOP
    finally:
        channel.close()


def test_a_regular_file_in_place_of_a_fifo_is_refused(tmp_path):
    channel = JobChannel(tmp_path / "channel")
    try:
        os.unlink(channel.jobs_path)
        channel.jobs_path.write_text("")
        with pytest.raises(OSError, match="not a FIFO"):
            channel.open()
    finally:
        channel.close()


def test_a_fixtures_temporary_name_taken_by_a_link_is_refused(tmp_path):
    channel = JobChannel(tmp_path / "channel")
    try:
        os.symlink(tmp_path / "target", channel.files / ".fixture.json.part")
        with pytest.raises(FileExistsError):
            channel.put_file("fixture.json", b"{}")
        assert not (tmp_path / "target").exists()
    finally:
        channel.close()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"exit_code": ' + b"9" * 5000 + b"}", "digits"),
        (b'{"wall_ms": NaN}', "not a number"),
    ],
)
def test_a_hostile_result_line_is_refused_not_raised(tmp_path, line, said):
    channel = JobChannel(tmp_path / "channel")
    try:
        channel.open()
        writer = os.open(channel.results_path, os.O_WRONLY)  # the host's end is open
        # Longer than the pipe's buffer: written while the channel reads.
        sending = threading.Thread(target=os.write, args=(writer, line + b"\n"))
        sending.start()
        try:
            received = channel.receive(time.monotonic() + 30)
        finally:
            sending.join()
            os.close(writer)
        assert isinstance(received, Received)
        assert received.document is None
        assert said in (received.problem or "")
    finally:
        channel.close()
