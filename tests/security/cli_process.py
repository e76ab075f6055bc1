"""Run the command line as a child process, as CI would: its exit status, its output,
its own peak memory (``wait4``'s rusage of that child alone) and whether it had to be
killed at the deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

DEADLINE_S = 120.0  # far beyond what a refusal takes; a blocked child is killed here


@dataclass(frozen=True)
class Finished:
    code: int
    stdout: str
    stderr: str
    peak_rss_bytes: int
    killed: bool

    @property
    def error_line(self) -> str:
        """The one ``orchestrator: error:`` line (Click's "Try ... --help" hint aside)."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("orchestrator: error: ")]
        hints = [line for line in lines if line.startswith("Try 'orchestrator ")]
        assert len(errors) == 1, self.stderr
        assert len(errors) + len(hints) == len(lines), self.stderr
        return errors[0]


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, deadline_s: float = DEADLINE_S
) -> Finished:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
        killer = threading.Timer(deadline_s, child.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            killer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Finished(
            code=child.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            peak_rss_bytes=usage.ru_maxrss * 1024,  # KiB on Linux
            killed=os.WIFSIGNALED(status),
        )


def tree_of(folder: Path) -> list[str]:
    """Everything under ``folder``, relative, sorted (to say that nothing was written)."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))
