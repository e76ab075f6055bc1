"""The prompt end of a finished command (``orchestrator/prompt_exit.py``): taken only when
nothing can be lost, else the usual exit. Each case runs a real interpreter; an object
whose ``__del__`` writes ``teardown`` tells the two ends apart (the usual exit clears the
module's globals and runs it, the prompt end does not)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HEAD = """\
import atexit, os, sys, threading
from orchestrator import prompt_exit

class Marker:
    def __del__(self):
        os.write(2, b"teardown\\n")

marker = Marker()
"""

END = """
try:
    sys.exit(STATUS)
except SystemExit as stop:
    prompt_exit.exit_now(stop.code)
    raise
"""


def run(body: str, status: str = "0", **kwargs):
    program = HEAD + textwrap.dedent(body) + END.replace("STATUS", status)
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, **kwargs
    )


def test_allowed_it_ends_promptly_with_the_status_and_all_output():
    done = run(
        """
        print("x" * 100000, end="")  # more than a pipe's buffer: the flush must write it
        sys.stderr.write("last line\\n")
        prompt_exit.allow()
        """,
        status="3",
    )
    assert done.returncode == 3
    assert done.stdout == "x" * 100000
    assert done.stderr == "last line\n"  # no teardown


def test_without_allow_the_usual_exit_runs():
    done = run("", status="1")
    assert done.returncode == 1
    assert done.stderr == "teardown\n"


def test_atexit_handlers_run_once():
    done = run(
        """
        atexit.register(lambda: sys.stdout.write("handler\\n"))
        prompt_exit.allow()
        """
    )
    assert done.returncode == 0
    assert done.stdout == "handler\n"
    assert "teardown" not in done.stderr


def test_a_file_open_for_writing_takes_the_usual_exit(tmp_path: Path):
    target = tmp_path / "out.txt"
    done = run(
        f"""
        left_open = open({str(target)!r}, "w")
        left_open.write("buffered")
        prompt_exit.allow()
        """
    )
    assert done.returncode == 0
    assert "teardown" in done.stderr
    assert target.read_text() == "buffered"  # the usual exit flushed it


def test_a_file_or_socket_open_only_for_reading_loses_nothing(tmp_path: Path):
    """The Docker SDK leaves its exec responses' sockets open for reading: they must not
    send a finished replay through the teardown."""
    source = tmp_path / "in.txt"
    source.write_text("data")
    done = run(
        f"""
        import socket
        reader = open({str(source)!r})
        left, right = socket.socketpair()
        response = left.makefile("rb")
        prompt_exit.allow()
        """
    )
    assert done.returncode == 0
    assert "teardown" not in done.stderr


def test_a_running_thread_takes_the_usual_exit():
    """A non-daemon thread still working (here: reading a line the test sends once the
    main thread has looked for live threads) is waited for by the usual exit."""
    program = (
        HEAD
        + textwrap.dedent(
            """
        worker = threading.Thread(target=lambda: sys.stderr.write("worker " + sys.stdin.readline()))
        worker.start()
        prompt_exit.allow()
        looked = prompt_exit._other_threads_alive

        def look_then_say():  # the worker cannot end before the look: it waits for "go"
            alive = looked()
            sys.stdout.write("looked\\n")
            sys.stdout.flush()
            return alive

        prompt_exit._other_threads_alive = look_then_say
        """
        )
        + END.replace("STATUS", "0")
    )
    with subprocess.Popen(
        [sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        assert process.stdout.readline() == "looked\n"
        _out, err = process.communicate("go\n")
    assert process.returncode == 0
    assert err == "worker go\nteardown\n"


def test_a_message_status_takes_the_usual_exit():
    done = run("prompt_exit.allow()\n", status='"stopped: because"')
    assert done.returncode == 1
    assert done.stderr.startswith("stopped: because\n")
