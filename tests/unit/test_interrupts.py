"""SIGINT and SIGTERM, one way (orchestrator/interrupts.py), in a process of their own.

Each case runs a small script in a fresh interpreter that installs the handlers and
sends itself real signals; the test reads what the script printed and how it ended.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PRELUDE = """\
import os, signal, sys, time
from orchestrator import interrupts
interrupts.install()

def send(signum):
    os.kill(os.getpid(), signum)
    for _ in range(200):  # the handler runs at the next bytecode boundary
        time.sleep(0.001)
"""


def run_script(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM"])
def test_the_first_signal_interrupts_and_the_next_are_only_noted(first):
    done = run_script(
        f"""
        try:
            send(signal.{first})
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted by", interrupts.signal_name())
        send(signal.SIGINT)  # a second one, while cleaning up
        send(signal.SIGTERM)
        print("cleanup finished")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"interrupted by {first}", "cleanup finished"]


def test_a_shield_holds_a_signal_until_it_ends():
    done = run_script(
        """
        try:
            with interrupts.shielded():
                send(signal.SIGTERM)
                print("inside, still running")
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted after the shield")
        """
    )
    assert done.stdout.splitlines() == ["inside, still running", "interrupted after the shield"]


def test_a_checkpoint_inside_a_shield_acts_on_the_signal():
    done = run_script(
        """
        try:
            with interrupts.shielded():
                send(signal.SIGINT)
                interrupts.checkpoint()
                print("past the checkpoint")
        except KeyboardInterrupt:
            print("interrupted at the checkpoint")
        """
    )
    assert done.stdout.splitlines() == ["interrupted at the checkpoint"]


def test_after_close_a_signal_changes_nothing():
    done = run_script(
        """
        interrupts.close()
        send(signal.SIGTERM)
        send(signal.SIGINT)
        print("exiting normally")
        sys.exit(3)
        """
    )
    assert (done.returncode, done.stdout.strip()) == (3, "exiting normally")


def test_a_signal_in_code_that_holds_locks_is_raised_once_that_code_returned():
    # A function that passes for the stdlib's threading module: raising in it could leave
    # a lock held for good, so the signal waits until the caller's code runs again.
    done = run_script(
        """
        import threading
        seen = {}
        scope = {"os": os, "signal": signal, "time": time, "seen": seen}
        exec(compile(
            "def in_threading():\\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\\n"
            "    end = time.monotonic() + 0.1\\n"
            "    while time.monotonic() < end:\\n"
            "        pass\\n"
            "    seen['returned'] = True\\n",
            threading.__file__,
            "exec",
        ), scope)
        try:
            scope["in_threading"]()
            for _ in range(30000):  # until the retry timer fires (milliseconds, unless broken)
                time.sleep(0.001)
            outcome = "not interrupted"
        except KeyboardInterrupt:
            outcome = "interrupted by " + interrupts.signal_name()
        # One print, after the signal: it may be raised at any line of the caller's code.
        print(("returned" if seen.get("returned") else "raised inside") + "\\n" + outcome)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["returned", "interrupted by SIGTERM"]


def test_a_signal_in_a_finalizer_is_not_lost():
    # An exception raised in __del__ is printed and dropped: the interruption must wait
    # until the finalizer returned, and then still happen.
    done = run_script(
        """
        class Finalized:
            def __del__(self):
                send(signal.SIGINT)
                print("finalizer done")

        try:
            Finalized()
            for _ in range(30000):  # until the retry timer fires
                time.sleep(0.001)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted by", interrupts.signal_name())
        """
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.stdout.splitlines() == ["finalizer done", "interrupted by SIGINT"]


def test_a_pending_signal_taken_by_a_cleanup_is_not_raised_later():
    done = run_script(
        """
        with interrupts.shielded():
            send(signal.SIGTERM)
            print("taken:", interrupts.take_pending())
        for _ in range(200):
            time.sleep(0.001)
        print("cleanup finished;", interrupts.signal_name())
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["taken: True", "cleanup finished; SIGTERM"]


def test_a_signal_in_a_librarys_weakref_callback_is_not_lost():
    # A callback given to weakref.ref (as SQLAlchemy's event registry does) runs from the
    # collector in whatever code dropped the last reference: no frame tells the handler
    # where it is, so the KeyboardInterrupt is raised there, printed and dropped. It must
    # be raised again once that callback returned.
    done = run_script(
        """
        import weakref

        class Watched:
            pass

        def collected(ref):
            send(signal.SIGINT)
            print("callback done")

        watched = Watched()
        ref = weakref.ref(watched, collected)
        try:
            del watched
            for _ in range(30000):  # until the retry timer fires
                time.sleep(0.001)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted by", interrupts.signal_name())
        """
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1] == "interrupted by SIGINT", done.stdout
