"""Run the command line as a child process, as CI would: its exit status, its output,
its own peak memory (``wait4``'s rusage of that child alone) and whether it had to be
killed at the deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

DEADLINE_S = 120.0
# The wrapper's only child is the command line: its children's peak is the CLI's own.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:]).returncode\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def _peak_kib(rss_file: Path, fallback: int) -> int:
    """The CLI's peak as the wrapper saw it (the wrapper's own when it was killed)."""
    try:
        return int(rss_file.read_text())
    except (OSError, ValueError):
        return fallback  # far beyond what a refusal takes; a blocked child is killed here


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
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        rss_file = Path(scratch) / "max-rss-kb"
        # Through a small wrapper: a child forked from this (large, long-lived) test
        # process starts with its resident pages, which its own rusage would count.
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MEASURE,
                str(rss_file),
                sys.executable,
                "-m",
                "orchestrator",
                *args,
            ],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        # The wrapper and the command line are one process group: both go at the deadline.
        killer = threading.Timer(deadline_s, os.killpg, (child.pid, signal.SIGKILL))
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
            peak_rss_bytes=_peak_kib(rss_file, usage.ru_maxrss) * 1024,  # KiB on Linux
            killed=os.WIFSIGNALED(status),
        )


def tree_of(folder: Path) -> list[str]:
    """Everything under ``folder``, relative, sorted (to say that nothing was written)."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))
