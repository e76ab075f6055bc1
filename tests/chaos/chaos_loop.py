"""The chaos loop: replays of the bundled example, each hit by one fault at a random moment.

Used by tests/chaos/test_chaos.py (a bounded loop in `make test`, on the session's second
engine of tests/support) and bench/chaos.py (the long version, on an engine of its own).
Everything is real: a private Docker engine started with scripts/ensure-docker (its own
socket, data root, exec root and pid file, beside the machine's engine, which is never
touched), the runner image loaded into it offline (`docker save` | `docker load`), a real
SQLite ledger, the real `orchestrator replay` in a subprocess, real signals.

Each iteration picks a scenario (sometimes with --freeze, sometimes the hang), a fault
and a delay (from the moment the tool's signal handlers are in place: before that the
Python interpreter itself is starting, and no program can act on a signal there), then
checks the invariants of issue 14 on what the run left:

- exit status: 0/1 (or 3 for an undecided lane) for a finished run, 130 for an
  interruption, 3 for a dead engine, a full disk or a ledger that stayed locked, 2 for a
  run folder unusable before anything ran; never a traceback; never a death by signal
  except SIGKILL of the CLI; one `orchestrator: error:` line whenever one is due;
- the run folder is complete (summary.json, no INCOMPLETE) or marked incomplete;
- the ledger passes SQLite's integrity and foreign-key checks, every freeze row is
  complete, and the runs it holds are exactly the complete, recorded run folders (no
  decision of an interrupted run);
- once the next run has passed its sweep: no container, volume or scratch folder of a
  dead run is left.

The randomness is seeded; the seed is printed so a failure can be replayed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from support.polling import wait_for  # noqa: E402

from fixtures.build_example import (  # noqa: E402
    BUDGET_PROPERTY,
    FLAKY_PROPERTY,
    OUTPUT_PROPERTY,
    TRIM_PROPERTY,
    build_example,
)

CLI = ROOT / ".venv" / "bin" / "orchestrator"
RUNNER_IMAGE = "orchestrator-runner:latest"
ERROR = "orchestrator: error: "
LEDGER_WAIT_S = 3.0  # how long a chaos run waits for a locked ledger before giving up
HANG_S = 600.0  # a run still going after this long hangs: its threads' stacks are taken
LABEL_MARK = "orchestrator.replay=1"


class Fault(StrEnum):
    NONE = "no fault"
    SIGINT = "SIGINT"
    SIGINT_TWICE = "SIGINT twice"
    SIGTERM = "SIGTERM"
    SIGKILL_CLI = "SIGKILL of the CLI"
    SIGKILL_DOCKERD = "SIGKILL of dockerd"
    LEDGER_LOCKED = "ledger locked by another writer"
    DISK_FULL = "full disk (run folder on a small tmpfs)"


FAULTS = tuple(Fault)


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    patch: str
    properties: tuple[str, ...]
    replays: int = 2
    timeout_s: float = 30.0
    freeze: bool = False


SCENARIOS = (
    Scenario(
        name="regression", patch="extra-clock-read", properties=(BUDGET_PROPERTY, OUTPUT_PROPERTY)
    ),
    Scenario(name="fix", patch="fix-trim-id", properties=(TRIM_PROPERTY,)),
    Scenario(name="flaky", patch="refactor-type", properties=(FLAKY_PROPERTY,), replays=3),
    Scenario(
        name="flaky --freeze",
        patch="refactor-type",
        properties=(FLAKY_PROPERTY,),
        replays=3,
        freeze=True,
    ),
    Scenario(name="hang", patch="hang", properties=(BUDGET_PROPERTY,), timeout_s=3.0),
)


# ---------------------------------------------------------------- the private engine


class PrivateEngine:
    """A dockerd of the loop's own (scripts/ensure-docker with ORCHESTRATOR_DOCKERD_ROOT)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "ORCHESTRATOR_DOCKERD_ROOT": str(root),
            "DOCKER_HOST": f"unix://{root}/docker.sock",
        }
        self.restarts = 0

    @property
    def url(self) -> str:
        return self.env["DOCKER_HOST"]

    def pid(self) -> int | None:
        try:
            return int((self.root / "dockerd.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self) -> None:
        done = subprocess.run(
            [str(ROOT / "scripts" / "ensure-docker")],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the private engine did not start: {done.stderr.strip()}")

    def load_runner_image(self) -> str:
        """The runner image, offline: saved from the machine's engine, loaded into ours."""
        main_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        saver = subprocess.Popen(
            ["docker", "save", RUNNER_IMAGE], env=main_env, stdout=subprocess.PIPE
        )
        loaded = subprocess.run(
            ["docker", "load", "--quiet"],
            env=self.env,
            stdin=saver.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        assert saver.stdout is not None
        saver.stdout.close()
        if saver.wait() != 0 or loaded.returncode != 0:
            raise RuntimeError(f"could not load {RUNNER_IMAGE}: {loaded.stderr.strip()}")
        return self.docker("image", "inspect", "--format", "{{.Id}}", RUNNER_IMAGE).strip()

    def kill(self) -> int | None:
        """SIGKILL the daemon (the fault), as a crash would."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pid

    def restart_if_dead(self) -> bool:
        """After a SIGKILL: wait until the dead daemon is reaped, then start it again on
        the same roots (without live-restore its old containers are stopped, not lost)."""
        pid = self.pid()
        if pid is not None and _alive(pid) and self.answers():
            return False
        if pid is not None:
            wait_for(
                lambda: not Path(f"/proc/{pid}").exists(), timeout=60, what="dockerd to be reaped"
            )
        self.start()
        self.restarts += 1
        return True

    def answers(self) -> bool:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            env=self.env,
            capture_output=True,
            timeout=30,
            check=False,
        )
        return done.returncode == 0

    def docker(self, *args: str) -> str:
        done = subprocess.run(
            ["docker", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def containers(self) -> list[dict[str, Any]]:
        """The tool's containers on this engine: id, labels."""
        ids = self.docker("ps", "-aq", "--filter", f"label={LABEL_MARK}").split()
        if not ids:
            return []
        return [
            {"id": doc["Id"], "labels": doc["Config"]["Labels"] or {}, "state": doc["State"]}
            for doc in json.loads(self.docker("inspect", *ids))
        ]

    def volumes(self) -> list[str]:
        return self.docker("volume", "ls", "-q").split()

    def stop(self) -> None:
        """Stop the daemon, then whatever it left (containerd, shims), unmount, remove."""
        subprocess.run(
            [str(ROOT / "scripts" / "stop-docker")],
            env=self.env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        for pid in self.stray_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        unmount_under(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def stray_pids(self) -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if str(self.root).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
        return found


def unmount_under(root: Path) -> None:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    for target in sorted((line.split()[1] for line in mounts), reverse=True):
        if target == str(root) or target.startswith(f"{root}/"):
            subprocess.run(["umount", "-l", target], check=False)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------- faults


class LedgerLock:
    """Another writer holding the SQLite ledger's write lock for ``hold_s`` seconds."""

    SCRIPT = (
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n"
        "db.rollback()\n"
    )

    def __init__(self, database: Path, hold_s: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(database), f"{hold_s:.3f}"],
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait(self) -> None:
        self.process.wait(timeout=120)


def fill(folder: Path) -> None:
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


def handlers_installed(pid: int) -> bool:
    """True once the process catches SIGTERM (the tool's first statement), or has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


# ---------------------------------------------------------------- one iteration


@dataclass(frozen=True, kw_only=True)
class Plan:
    index: int
    scenario: Scenario
    fault: Fault
    delay_s: float
    second_gap_s: float = 0.0  # SIGINT twice: the gap between the two
    lock_hold_s: float = 0.0  # ledger locked: how long the other writer holds it


@dataclass
class Outcome:
    plan: Plan
    exit_code: int
    stdout: str
    stderr: str
    pid: int
    run_dir: Path
    fault_fired: bool
    seconds: float
    hung: bool = False  # still going after HANG_S: aborted for its stacks
    stacks_file: Path | None = None  # then its stderr, kept outside the loop's folder
    violations: list[str] = field(default_factory=list)
    leftovers_after_next: int | None = None  # of this run, once the next one swept

    @property
    def folder(self) -> str:
        if not self.run_dir.exists():
            return "none"
        if (self.run_dir / "INCOMPLETE").exists():
            return "incomplete"
        if (self.run_dir / "summary.json").is_file():
            return "complete"
        return "unmarked"

    @property
    def outcome(self) -> str:
        if self.exit_code < 0:
            return f"killed ({signal.Signals(-self.exit_code).name})"
        return f"exit {self.exit_code}"

    def swept(self) -> bool:
        """Did this run get past its sweep (so that older leftovers must be gone)?"""
        swept = set()
        for line in self.stderr.splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event") == "sweep.done":
                    swept.add(entry.get("what"))
        return swept >= {"containers", "scratch"}


class Loop:
    """The loop's state: the engine, the example, the ledger, the folders, the history."""

    def __init__(
        self,
        root: Path,
        engine: PrivateEngine,
        *,
        seed: int,
        max_delay_s: float,
        hang_s: float = HANG_S,
        keep_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.hang_s = hang_s
        self.keep_dir = keep_dir  # where a hung run's stderr (its stacks) is kept
        self.engine = engine
        self.seed = seed
        self.random = random.Random(seed)
        self.max_delay_s = max_delay_s
        self.example = build_example(root / "example")
        self.tmp = root / "tmp"  # the CLI's TMPDIR: its scratch folders
        self.tmp.mkdir()
        self.runs = root / "runs"
        self.runs.mkdir()
        self.disk = root / "disk"
        self.database = root / "ledger.db"
        self.ledger_url = f"sqlite:///{self.database}"
        self.history: list[Outcome] = []
        self._mount_disk()

    def _mount_disk(self) -> None:
        self.disk.mkdir(exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(self.disk)], check=True
        )

    def close(self) -> None:
        unmount_under(self.disk)

    # -- planning an iteration

    def plan(self, index: int, fault: Fault | None = None) -> Plan:
        pick = self.random
        scenario = pick.choice(SCENARIOS)
        fault = fault or pick.choice(FAULTS)
        return Plan(
            index=index,
            scenario=scenario,
            fault=fault,
            delay_s=round(pick.uniform(0, self.max_delay_s), 3),
            second_gap_s=round(pick.uniform(0, 0.5), 3),
            lock_hold_s=round(pick.uniform(0.5, 2 * LEDGER_WAIT_S), 3),
        )

    # -- running one

    def args(self, plan: Plan, out: Path) -> list[str]:
        scenario = plan.scenario
        args = [
            str(CLI), "-v", "replay", "--repo", str(self.example.path),
            "--base", self.example.base, "--patch", self.example.rev(scenario.patch),
            "--image", RUNNER_IMAGE, "--fixture", str(self.example.fixture),
            "--replays", str(scenario.replays), "--timeout", f"{scenario.timeout_s:g}",
            "--out", str(out), "--ledger", self.ledger_url, "--json",
        ]  # fmt: skip
        for node_id in scenario.properties:
            args += ["--property", node_id]
        if scenario.freeze:
            args += ["--freeze", "--owner", "chaos", "--expires", "72h"]
        return args

    def run(self, plan: Plan) -> Outcome:
        base = self.disk if plan.fault is Fault.DISK_FULL else self.runs
        out = base / f"run-{plan.index:04d}"
        env = {
            **self.engine.env,
            "TMPDIR": str(self.tmp),
            "CI": "1",
            "ORCHESTRATOR_LEDGER_WAIT_S": f"{LEDGER_WAIT_S:g}",
            "PYTHONFAULTHANDLER": "1",  # a hung run's stacks, when it is aborted
        }
        started = time.monotonic()
        process = subprocess.Popen(
            self.args(plan, out),
            env=env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        pipes: dict[str, str] = {}
        readers = [
            threading.Thread(target=_drain, args=(process.stdout, pipes, "out"), daemon=True),
            threading.Thread(target=_drain, args=(process.stderr, pipes, "err"), daemon=True),
        ]
        for reader in readers:
            reader.start()
        lock: LedgerLock | None = None
        fired = False
        hung = False
        try:
            wait_for(
                lambda: handlers_installed(process.pid), timeout=60, what="the tool's handlers"
            )
            if plan.fault is not Fault.NONE:
                # The planned moment, unless the run ends before it.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=plan.delay_s)
                if process.poll() is None:
                    fired = True
                    lock = self._inject(plan, process)
            try:
                process.wait(timeout=self.hang_s)
            except subprocess.TimeoutExpired:
                hung = True
                # PYTHONFAULTHANDLER: SIGABRT prints every thread's stack on stderr.
                process.send_signal(signal.SIGABRT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=60)
        finally:
            if process.poll() is None:  # a hang is a failure of the loop, reported below
                process.kill()
                process.wait()
            if lock is not None:
                lock.wait()
        for reader in readers:
            reader.join(timeout=30)
        outcome = Outcome(
            plan=plan,
            exit_code=process.returncode,
            stdout=pipes.get("out", ""),
            stderr=pipes.get("err", ""),
            pid=process.pid,
            run_dir=out,
            fault_fired=fired,
            seconds=time.monotonic() - started,
            hung=hung,
        )
        if hung:
            handle, name = tempfile.mkstemp(
                prefix=f"ochaos-hung-{plan.index:03d}-", suffix=".txt", dir=self.keep_dir
            )
            with os.fdopen(handle, "w") as kept:
                kept.write(outcome.stderr)
            outcome.stacks_file = Path(name)
        if plan.fault is Fault.SIGKILL_DOCKERD:
            self.engine.restart_if_dead()
        if plan.fault is Fault.DISK_FULL:
            (self.disk / "filler").unlink(missing_ok=True)
        return outcome

    def _inject(self, plan: Plan, process: subprocess.Popen[str]) -> LedgerLock | None:
        fault = plan.fault
        if fault is Fault.SIGINT:
            process.send_signal(signal.SIGINT)
        elif fault is Fault.SIGINT_TWICE:
            process.send_signal(signal.SIGINT)
            time.sleep(plan.second_gap_s)
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        elif fault is Fault.SIGTERM:
            process.send_signal(signal.SIGTERM)
        elif fault is Fault.SIGKILL_CLI:
            process.send_signal(signal.SIGKILL)
        elif fault is Fault.SIGKILL_DOCKERD:
            self.engine.kill()
        elif fault is Fault.LEDGER_LOCKED:
            return LedgerLock(self.database, plan.lock_hold_s)
        elif fault is Fault.DISK_FULL:
            fill(self.disk)
        return None

    # -- the invariants

    def check(self, outcome: Outcome) -> None:
        """The invariants of one finished iteration, and of the ledger after it."""
        problems = outcome.violations
        plan, code, stderr = outcome.plan, outcome.exit_code, outcome.stderr
        if outcome.hung:
            problems.append(f"no exit after {self.hang_s:g} s (stacks: {outcome.stacks_file})")
        if shows_traceback(stderr):
            problems.append("a traceback on stderr")
        if code < 0 and not (plan.fault is Fault.SIGKILL_CLI and code == -signal.SIGKILL):
            problems.append(f"death by signal {-code}")
        if code not in allowed_exits(plan.fault, fired=outcome.fault_fired):
            problems.append(f"exit {code} is not allowed for {plan.fault.value}")
        errors = [line for line in stderr.splitlines() if line.startswith(ERROR)]
        folder = outcome.folder
        if code in (2, 130) and len(errors) != 1:
            problems.append(f"{len(errors)} error lines for exit {code}")
        if code == 3 and folder != "complete" and len(errors) != 1:
            problems.append(f"{len(errors)} error lines for exit 3 without a verdict")
        if code in (0, 1) and errors:
            problems.append(f"error lines on a finished run: {errors}")
        if folder == "unmarked":
            problems.append("a run folder neither complete nor marked incomplete")
        if code in (0, 1) and folder != "complete":
            problems.append(f"exit {code} with a run folder {folder}")
        if code == 130 and folder == "complete" and not self._recorded(outcome):
            problems.append("exit 130 with a complete folder that was not recorded")
        if plan.fault is Fault.DISK_FULL and outcome.fault_fired and "docker_api" in stderr:
            problems.append("a full disk blamed on the engine (docker_api)")
        problems.extend(self.ledger_problems())

    def _recorded(self, outcome: Outcome) -> bool:
        summary = _summary(outcome.run_dir)
        return bool(summary and (summary.get("ledger") or {}).get("recorded"))

    def ledger_problems(self) -> list[str]:
        if not self.database.exists():
            return []
        problems = []
        with contextlib.closing(sqlite3.connect(self.database, timeout=60)) as db:
            (integrity,) = db.execute("PRAGMA integrity_check").fetchone()
            if integrity != "ok":
                problems.append(f"ledger integrity: {integrity}")
            if db.execute("PRAGMA foreign_key_check").fetchall():
                problems.append("ledger foreign keys broken")
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            if "runs" not in tables:
                return problems
            in_ledger = {row[0] for row in db.execute("SELECT id FROM runs")}
            events = {
                json.loads(row[0]).get("run_id")
                for row in db.execute("SELECT detail FROM events WHERE kind = 'decision'")
            }
            rows = db.execute(
                "SELECT record, fixture_bytes, origin_bytes FROM freezes ORDER BY id"
            ).fetchall()
        freezes = [json.loads(row[0]) for row in rows]
        payloads = [(row[1], row[2]) for row in rows]
        complete, summaries_recorded, incomplete = set(), set(), set()
        for outcome in self.history:
            run_id = _run_id(outcome.run_dir)
            if run_id is None:
                continue
            if outcome.folder == "complete":
                complete.add(run_id)
                summary = _summary(outcome.run_dir) or {}
                if (summary.get("ledger") or {}).get("recorded"):
                    summaries_recorded.add(run_id)
            else:
                incomplete.add(run_id)
        if not in_ledger <= complete:
            problems.append(
                f"the ledger holds runs without a complete folder: {in_ledger - complete}"
            )
        if in_ledger & incomplete:
            problems.append(f"runs marked incomplete are in the ledger: {in_ledger & incomplete}")
        if not summaries_recorded <= in_ledger:
            problems.append(
                f"summaries say recorded, the ledger does not: {summaries_recorded - in_ledger}"
            )
        if not events <= in_ledger:
            problems.append(f"decisions of runs the ledger does not hold: {events - in_ledger}")
        problems.extend(freeze_problems(freezes, payloads))
        return problems

    def leftovers(self, *, spare: Sequence[int] = ()) -> dict[str, list[str]]:
        """Containers, volumes and scratch folders whose owner process is gone (but the
        processes in ``spare``: a run that was itself killed, judged after the next)."""
        dead_containers = [
            item["id"][:12]
            for item in self.engine.containers()
            if not _owner_spared(item["labels"].get("orchestrator.pid", ""), spare)
        ]
        scratch = [
            path.name
            for path in self.tmp.iterdir()
            if path.name.startswith("orchestrator-")
            and not _owner_spared(re.split(r"[-.@]", path.name.split("-", 2)[2])[0], spare)
        ]
        return {"containers": dead_containers, "volumes": self.engine.volumes(), "scratch": scratch}

    # -- the whole loop

    def iterate(self, count: int, *, faults: Sequence[Fault] | None = None) -> list[Outcome]:
        print(f"chaos loop: seed {self.seed}, {count} iterations", flush=True)
        for index in range(count):
            fault = faults[index % len(faults)] if faults else None
            plan = self.plan(index, fault)
            outcome = self.run(plan)
            self.history.append(outcome)
            self.check(outcome)
            if self.history[:-1] and outcome.swept():  # the previous runs' leftovers are gone?
                left = self.leftovers(spare=[outcome.pid])
                count_left = sum(len(v) for v in left.values())
                self.history[-2].leftovers_after_next = count_left
                if count_left:
                    outcome.violations.append(f"after this run's sweep, left: {left}")
            print(describe(outcome), flush=True)
        return self.history

    def final_check(self) -> list[str]:
        """A last clean run must leave nothing of any dead run."""
        plan = Plan(index=len(self.history), scenario=SCENARIOS[0], fault=Fault.NONE, delay_s=0)
        outcome = self.run(plan)
        self.history.append(outcome)
        self.check(outcome)
        left = self.leftovers()
        if self.history[:-1]:
            self.history[-2].leftovers_after_next = sum(len(v) for v in left.values())
        if any(left.values()):
            outcome.violations.append(f"after a clean run, left: {left}")
        print(describe(outcome), flush=True)
        return outcome.violations


def allowed_exits(fault: Fault, *, fired: bool) -> set[int]:
    finished = {0, 1, 3}  # a run that ended on its own (3: an undecided lane)
    if not fired:
        return finished
    return {
        Fault.NONE: finished,
        Fault.SIGINT: finished | {130},
        Fault.SIGINT_TWICE: finished | {130},
        Fault.SIGTERM: finished | {130},
        Fault.SIGKILL_CLI: finished | {-signal.SIGKILL},
        Fault.SIGKILL_DOCKERD: finished,
        Fault.LEDGER_LOCKED: finished,
        Fault.DISK_FULL: finished | {2},
    }[fault]


def _owner_spared(text: str, spare: Sequence[int]) -> bool:
    if not text.isdigit():
        return False
    pid = int(text)
    return pid in spare or _alive(pid)


def shows_traceback(stderr: str) -> bool:
    """A traceback the user sees: anywhere but in a debug log entry (asked for by -v)."""
    for line in stderr.splitlines():
        if "Traceback (most recent call last)" not in line:
            continue
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("level") == "debug":
                continue
        return True
    return False


def freeze_problems(records: Sequence[dict[str, Any]], payloads: Sequence[Any]) -> list[str]:
    """Freeze rows the ledger's own rules would call incomplete (records.md "Freeze rows")."""
    from datetime import timedelta

    from orchestrator import model
    from orchestrator.core import records as rules

    eligible = model.Decision(
        lane=model.Lane.FLAKE_QUEUE_ELIGIBLE,
        code="flake_queue_eligible",
        blocking=False,
        freeze_allowed=True,
        reasons=(),
    )
    problems = []
    for doc, (fixture_bytes, origin_bytes) in zip(records, payloads, strict=True):
        if doc.get("kind") != "flake":
            continue
        record = rules.flake_freeze_from_json(doc)
        codes = rules.validate_flake_freeze(
            record, decision=eligible, now=record.opened_at, max_age=timedelta(days=3650)
        )
        codes += rules.payload_bytes_codes(record, fixture_bytes, origin_bytes)
        missing = [code for code in codes if code.startswith("missing_field:")]
        if missing:
            problems.append(f"a flake freeze row missing {missing}")
    return problems


def _run_id(run_dir: Path) -> str | None:
    for name in ("run-log.json", "summary.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            return str(json.loads((run_dir / name).read_text())["run_id"])
    return None


def _summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def _drain(stream: Any, into: dict[str, str], key: str) -> None:
    into[key] = stream.read()


def describe(outcome: Outcome) -> str:
    plan = outcome.plan
    verdict = "ok" if not outcome.violations else "VIOLATED: " + "; ".join(outcome.violations)
    errors = [line for line in outcome.stderr.splitlines() if line.startswith(ERROR)]
    line = errors[0][len(ERROR) :] if errors else ""
    return (
        f"#{plan.index:03d} {plan.scenario.name:15} {plan.fault.value:40} "
        f"delay {plan.delay_s:5.2f}s{'' if outcome.fault_fired else ' (not fired)'} -> "
        f"{outcome.outcome:18} folder {outcome.folder:10} {outcome.seconds:5.1f}s {verdict}"
        + (f" | {line[:110]}" if line else "")
    )


def table(history: Sequence[Outcome]) -> str:
    """fault x count x outcome x leftovers, as Markdown."""
    rows = [
        "| fault | count | outcome: runs | run folder: runs | leftovers after the next run "
        "| invariants |",
        "|---|---:|---|---|---:|---|",
    ]
    for fault in FAULTS:
        runs = [o for o in history if o.plan.fault is fault]
        if not runs:
            continue
        outcomes = Counter(
            o.outcome if o.fault_fired or fault is Fault.NONE else "ended before the fault"
            for o in runs
        )
        folders = Counter(o.folder for o in runs)
        left = sum(o.leftovers_after_next or 0 for o in runs)
        broken = sum(bool(o.violations) for o in runs)
        rows.append(
            f"| {fault.value} | {len(runs)} | "
            + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
            + " | "
            + ", ".join(f"{k}: {v}" for k, v in sorted(folders.items()))
            + f" | {left} | {'all held' if not broken else f'{broken} violated'} |"
        )
    return "\n".join(rows)


@contextlib.contextmanager
def chaos(
    seed: int,
    *,
    max_delay_s: float = 8.0,
    hang_s: float = HANG_S,
    engine_root: Path | None = None,
) -> Iterator[Loop]:
    """A private engine with the runner image, and a loop around it; all removed after.

    With ``engine_root``: the engine already running there (started with
    scripts/ensure-docker under that root, the runner image loaded), which its owner
    stops; the loop restarts it after each SIGKILL as it would its own."""
    if os.geteuid() != 0:
        raise RuntimeError("the chaos loop starts its own dockerd and mounts a tmpfs: run as root")
    root = Path(tempfile.mkdtemp(prefix="ochaos-", dir="/tmp"))  # short: socket paths
    engine = PrivateEngine(engine_root if engine_root is not None else root / "engine")
    loop: Loop | None = None
    try:
        if engine_root is None:
            engine.start()
            engine.load_runner_image()
        loop = Loop(root / "loop", engine, seed=seed, max_delay_s=max_delay_s, hang_s=hang_s)
        yield loop
    finally:
        if loop is not None:
            loop.close()
        if engine_root is None:
            engine.stop()
        else:
            engine.restart_if_dead()
        unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
