"""The `orchestrator` command line, run by tests: in a child process, or in this one.

A child process (``CliProcess``) where the test needs a process boundary: signals, a
pid its containers are labelled with, an engine it talks to, its own TMPDIR. In this
process (``invoke``) for what is decided before any container starts (usage errors,
refused inputs): the same ``orchestrator.cli.main`` the console script runs, without
an interpreter start per case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / ".venv" / "bin" / "orchestrator"
SCRATCH_PREFIX = "orchestrator-replay-"  # exported source trees (adapters/git.py)
ERROR = "orchestrator: error: "


@dataclass(frozen=True, kw_only=True)
class Run:
    """One finished `orchestrator` command: its status, its output, its run folder."""

    exit_code: int
    stdout: str
    stderr: str
    pid: int
    out: Path

    @property
    def report(self) -> dict[str, Any]:
        """The JSON report on stdout (``--json``)."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(
                f"no JSON report (exit {self.exit_code}); stderr: {self.stderr[-2000:]}"
            ) from None

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith(ERROR)]

    def summary(self) -> dict[str, Any]:
        path = self.out / "summary.json"
        if not path.exists():
            raise AssertionError(f"no summary.json (exit {self.exit_code}): {self.stderr[-3000:]}")
        return json.loads(path.read_text())

    def run_log(self) -> dict[str, Any]:
        return json.loads((self.out / "run-log.json").read_text())

    def lanes(self) -> dict[str, str]:
        return {entry["property_id"]: entry["lane"] for entry in self.entries()}

    def entries(self) -> list[dict[str, Any]]:
        """Every property's report entry, from the run's store (summary.json lists only
        those that need a look)."""
        return [record["entry"] for record in self.records()]

    def decisions(self) -> list[dict[str, Any]]:
        """The decision of each property, in the run's order."""
        return [record["decision"] for record in self.records()]

    def evidence(self) -> list[dict[str, Any]]:
        """The evidence of each property, in the run's order."""
        return [record["evidence"] for record in self.records()]

    def evidence_of(self, property_id: str) -> dict[str, Any]:
        return stored_record(self.out, property_id)["evidence"]

    def records(self) -> list[dict[str, Any]]:
        # Through summary.json first, and loud when the run wrote none or decided nothing:
        # a check over what a run decided never passes because nothing was found.
        self.summary()
        records = stored_records(self.out)
        if not records:
            raise AssertionError(f"the run decided nothing (exit {self.exit_code})")
        return records

    def written(self, pattern: str) -> list[str]:
        """The names of the files in the run folder that match ``pattern``: for a run
        that must have decided nothing (no summary.json to read through)."""
        return sorted(path.name for path in self.out.glob(pattern))


def stored_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every property's record (``index``, ``property_id``, ``entry``, ``evidence``,
    ``decision``) in a run folder's store, in the run's order."""
    from orchestrator.services.property_store import StoreRead

    return list(StoreRead(run_dir).records())


def stored_record(run_dir: Path, property_id: str | None = None) -> dict[str, Any]:
    """One property's record in a run folder's store (the only one, by default)."""
    records = stored_records(run_dir)
    if property_id is None:
        (record,) = records
        return record
    (record,) = [r for r in records if r["property_id"] == property_id]
    return record


def stored_evidence(run_dir: Path, property_id: str | None = None) -> dict[str, Any]:
    """A property's ``replay-evidence/1`` document in the run's store."""
    return stored_record(run_dir, property_id)["evidence"]


class CliProcess:
    """Starts `orchestrator` in a child process with a private TMPDIR (so the source trees
    it exports can be seen and counted) and CI=1 (JSON log lines, no progress bars)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "TMPDIR": str(self.scratch), "CI": "1"}

    def start(
        self, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            list(args),
            env={**self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.scratch.parent,
        )

    def finish(self, process: subprocess.Popen[str], out: Path, timeout: float = 240) -> Run:
        """Wait for ``process``; past ``timeout`` it is interrupted and the test fails."""
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=120)
            raise AssertionError(
                f"orchestrator did not finish in {timeout}s: {stderr[-3000:]}"
            ) from None
        return Run(
            exit_code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid, out=out
        )

    def run(
        self,
        args: Sequence[str],
        out: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 240,
    ) -> Run:
        return self.finish(self.start(args, env), out, timeout)

    def leftover_trees(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir() if p.name.startswith(SCRATCH_PREFIX))


def invoke(
    capsys: pytest.CaptureFixture[str], args: Sequence[str], *, out: Path | None = None
) -> Run:
    """Run ``orchestrator args`` in this process (``args`` may start with the CLI's path,
    as a child process's would) through ``orchestrator.cli.main``."""
    from orchestrator.cli import main

    argv = list(args)
    if argv and argv[0] == str(CLI):
        argv = argv[1:]
    capsys.readouterr()  # what the test printed before is not the command's
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    captured = capsys.readouterr()
    code = stopped.value.code
    return Run(
        exit_code=code if isinstance(code, int) else (0 if code is None else 1),
        stdout=captured.out,
        stderr=captured.err,
        pid=os.getpid(),
        out=out if out is not None else Path(os.devnull),
    )
