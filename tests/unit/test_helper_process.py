"""The helper process (adapters.helper_process): a real second interpreter, and the values
of every chunk whatever becomes of it."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence

from orchestrator.adapters.helper_process import HelperProcess


def squares_with_pid(chunk: Sequence[int]) -> list[tuple[int, int]]:
    """Top-level, so that the helper can import it: each value and who made it."""
    return [(n * n, os.getpid()) for n in chunk]


def here(chunk: Sequence[int]) -> list[tuple[int, int]]:
    return squares_with_pid(chunk)


CHUNKS = [list(range(start, start + 7)) for start in range(0, 70, 7)]
EXPECTED = [n * n for n in range(70)]


def test_a_started_helper_makes_every_chunk_in_order_in_another_process() -> None:
    with HelperProcess(ahead=3) as helper:
        helper.start()
        assert helper.started
        got = list(helper.map_chunks(squares_with_pid, CHUNKS, sent_as=list, here=here))
    assert [value for value, _ in got] == EXPECTED
    makers = {pid for _, pid in got}
    assert len(makers) == 1
    assert os.getpid() not in makers
    assert not helper.failed


def test_without_a_started_helper_the_chunks_are_made_here() -> None:
    with HelperProcess() as helper:
        got = list(helper.map_chunks(squares_with_pid, CHUNKS, sent_as=list, here=here))
    assert [value for value, _ in got] == EXPECTED
    assert {pid for _, pid in got} == {os.getpid()}


def test_a_helper_that_dies_midway_leaves_the_rest_to_this_process() -> None:
    with HelperProcess(ahead=1) as helper:
        helper.start()
        values = helper.map_chunks(squares_with_pid, CHUNKS, sent_as=list, here=here)
        first = [next(values) for _ in range(7)]
        helper_pid = first[0][1]
        assert helper_pid != os.getpid()
        os.kill(helper_pid, signal.SIGKILL)
        rest = list(values)
    got = first + rest
    assert [value for value, _ in got] == EXPECTED
    assert rest[-1][1] == os.getpid()  # made here once the helper was gone
    assert helper.failed


def test_a_chunk_that_cannot_be_sent_is_made_here() -> None:
    """An argument that does not pickle fails only that send: the values are the same."""
    with HelperProcess() as helper:
        helper.start()
        got = list(
            helper.map_chunks(
                squares_with_pid,
                CHUNKS,
                sent_as=lambda chunk: lambda: chunk,  # a lambda does not pickle
                here=here,
            )
        )
    assert [value for value, _ in got] == EXPECTED
    assert {pid for _, pid in got} == {os.getpid()}


PARENT = """
import sys
from orchestrator.adapters.helper_process import HelperProcess
sys.path.insert(0, {tests!r})
from test_helper_process import squares_with_pid, here

helper = HelperProcess()
helper.start()
values = helper.map_chunks(squares_with_pid, [[1]], sent_as=list, here=here)
print(next(values)[1], flush=True)
sys.stdin.readline()  # until killed
"""


def test_a_sigkilled_parent_leaves_no_helper_behind() -> None:
    """The helper's queue would wait for work forever: it dies with its parent."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(tests=str(Path(__file__).parent))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    helper_pid = int(parent.stdout.readline())
    assert helper_pid != parent.pid
    assert Path(f"/proc/{helper_pid}").exists()
    parent.kill()
    parent.wait(timeout=60)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{helper_pid}").exists() and not _zombie(helper_pid):
        assert time.monotonic() < deadline, "the helper outlived its parent"
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    from pathlib import Path

    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"
