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
