"""The option groups of ``replay``, ``reproduce``, ``shrink``, ``accept`` and ``budget``,
each a frozen value with its own ``validate()``: every usage mistake is refused here
(exit 2, one line) before an engine is asked for anything. A command takes the groups
it has and leaves the fields it lacks at their defaults, so an option checked for one
command is checked the same way for every other. Imported when a command runs, never
for ``--help`` (building the classes costs what the help itself takes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchestrator.commands._options import DEFAULT_TIMEOUT_S, ISOLATIONS, REPRODUCE_SIDES
from orchestrator.core.bounds import (
    MAX_EVIDENCE_CAP,
    MAX_JOBS,
    MAX_REPLAYS,
    MAX_SHRINK_ATTEMPTS,
    MAX_SLOTS,
    MAX_TIMEOUT_S,
    count_problem,
    false_block_rate_problem,
    screen_problem,
)
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from datetime import timedelta

    from orchestrator.core.replay_run import ReplayOptions
    from orchestrator.core.reproduce import Mode
    from orchestrator.core.shards import Shard
    from orchestrator.services.accept import AcceptOptions
    from orchestrator.services.budget import AdmissionOptions, BudgetOptions
    from orchestrator.services.reproduce import ReproduceRequest
    from orchestrator.services.shrink import ShrinkTestRequest

# A run id names a folder, containers and volumes: nothing that needs quoting.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _check_count(flag: str, count: int | None, maximum: int, minimum: int = 1) -> None:
    problem = (
        None if count is None else count_problem(flag, count, maximum=maximum, minimum=minimum)
    )
    if problem is not None:
        raise InputError(problem)


def _check_node_id(flag: str, node_id: str) -> None:
    from orchestrator.core.pytest_command import split_node_id

    if not split_node_id(node_id).names_a_test:
        raise InputError(f"{flag} {node_id!r}: expected a pytest node id (path::test)")


class _Group(Protocol):
    def validate(self) -> None: ...


def _check_all(*groups: _Group) -> None:
    for group in groups:
        group.validate()


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What is replayed: the repository, the two revisions, the command and its tests."""

    repo: Path
    base: str
    patch: str
    command: str
    property_ids: tuple[str, ...] = ()
    changed: bool = False
    shard: str | None = None  # I/N as given

    def validate(self) -> None:
        from orchestrator.core.pytest_command import pytest_args

        for property_id in self.property_ids:
            _check_node_id("--property", property_id)
        if self.changed and self.property_ids:
            raise InputError(
                "--changed selects the properties itself: it does not go with --property"
            )
        pytest_args(self.command, self.property_ids)  # a bad --command is exit 2
        self.parsed_shard()

    def parsed_shard(self) -> Shard | None:
        from orchestrator.core.shards import parse_shard

        return None if self.shard is None else parse_shard(self.shard)


@dataclass(frozen=True, kw_only=True)
class OneTest:
    """One test at one revision: what ``accept`` and ``budget`` run, and ``shrink --test``
    (a smaller :class:`Selection`: its node id and ``--command`` are checked the same way)."""

    repo: Path | None = None
    rev: str | None = None
    property_id: str | None = None
    command: str | None = None
    flag: str = "--property"  # the option that names the test, for the message

    def validate(self) -> None:
        from orchestrator.core.pytest_command import pytest_args

        if self.property_id is not None:
            _check_node_id(self.flag, self.property_id)
        if self.command is not None:  # a bad --command is exit 2
            pytest_args(self.command, () if self.property_id is None else (self.property_id,))


@dataclass(frozen=True, kw_only=True)
class Oracle:
    """Whose test files judge both sides (``--tests-from``; each side its own without)."""

    tests_from: str | None = None
    test_paths: tuple[str, ...] = ()
    sides: tuple[str, ...] = ("base", "patch")  # names --tests-from takes besides a revision

    def validate(self) -> None:
        from orchestrator.services.tests_from import normal_test_paths

        if self.test_paths and self.tests_from is None:
            raise InputError(
                "--test-path goes with --tests-from (it names more test files to take)"
            )
        if self.tests_from is not None and not self.tests_from.strip():
            names = f"{', '.join(self.sides)} or a revision" if self.sides else "a revision"
            raise InputError(f"--tests-from needs {names}")
        normal_test_paths(self.test_paths)


@dataclass(frozen=True, kw_only=True)
class FixtureAndShrink:
    """The payload every replay reads, the shrink it came from, or the shrink to run."""

    fixture: Path | None = None
    shrink_report: Path | None = None
    origin: Path | None = None  # the unshrunk payload, when the shrink report lacks it
    seed: int = 0
    shrink: bool = False  # --shrink: shrink the fixture when the patch fails
    attempts: int | None = None  # shrink --attempts; replay's --shrink makes its own two

    def validate(self) -> None:
        from orchestrator.adapters.input_file import check_input

        _check_count("--attempts", self.attempts, MAX_SHRINK_ATTEMPTS)

        if self.shrink_report is not None and self.fixture is None:
            raise InputError("--shrink-report needs --fixture (the minimal fixture it describes)")
        if self.shrink:
            if self.fixture is None:
                raise InputError("--shrink needs --fixture (the wide payload to shrink)")
            if self.shrink_report is not None or self.origin is not None:
                raise InputError(
                    "--shrink writes its own shrink report: drop --shrink-report/--origin"
                )
        if self.origin is not None and self.shrink_report is None:
            raise InputError("--origin goes with --shrink-report (it is the shrink's input)")
        # Each a regular file under the cap, refused before anything is opened.
        for flag, path in (
            ("--fixture", self.fixture),
            ("--shrink-report", self.shrink_report),
            ("--origin", self.origin),
        ):
            if path is not None:
                check_input(path, name=f"{flag} {path}")


@dataclass(frozen=True, kw_only=True)
class Scheduling:
    """How many replays, where they run and how many at once."""

    replays: int = 5
    screen: int | None = None  # None: the default rule (core.screening)
    replays_all: bool = False
    false_block_rate: float = 0.01  # the evidence rule (core.significance)
    evidence_cap: int = 20
    jobs: int | None = None
    engines: tuple[str, ...] = ()
    slots: int | None = None
    isolation: str = "side"
    runner_id: str | None = None  # as given: a pool names its engines by URL without it

    def validate(self) -> None:
        if self.replays < 1:
            raise InputError("--replays must be at least 1")
        if self.screen is not None and self.screen < 1:
            raise InputError(
                "--screen must be at least 1 (--replays-all replays without screening)"
            )
        for flag, count, maximum in (
            ("--replays", self.replays, MAX_REPLAYS),
            ("--screen", self.screen, MAX_REPLAYS),
            ("--evidence-cap", self.evidence_cap, MAX_EVIDENCE_CAP),
            ("--jobs", self.jobs, MAX_JOBS),
            ("--slots", self.slots, MAX_SLOTS),
        ):
            _check_count(flag, count, maximum)
        problem = screen_problem(self.screen, self.replays) or false_block_rate_problem(
            "--false-block-rate", self.false_block_rate
        )
        if problem is not None:
            raise InputError(problem)
        if self.screen is not None and self.replays_all:
            raise InputError("--screen and --replays-all exclude each other")
        if self.jobs is not None and self.jobs < 1:
            raise InputError("--jobs must be at least 1")
        if self.isolation not in ISOLATIONS:
            raise InputError(f"--isolation must be one of: {', '.join(ISOLATIONS)}")
        if self.runner_id is not None and not self.runner_id.strip():
            raise InputError("--runner-id must not be empty")
        if self.slots is not None and self.slots < 1:
            raise InputError("--slots must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What each replay's container gets: the image, the time, the environment."""

    image: str | None = None  # None: the project's default, asked of the engine last
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: tuple[tuple[str, str], ...] = ()
    pythonpath: tuple[str, ...] = ()
    writable_tree: bool = False
    # Who set timeout_s (None: nobody; replay derives a whole suite's own).
    timeout_source: str | None = "--timeout"

    def validate(self) -> None:
        from orchestrator.core.replay_env import check_pythonpath, parse_env

        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(
                f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}"
            )
        parse_env([f"{key}={value}" for key, value in self.env])
        check_pythonpath(self.pythonpath)


@dataclass(frozen=True, kw_only=True)
class Recording:
    """Where the run is recorded: its id, the ledger, and the freezes it may write."""

    ledger: str
    record: bool = True
    freeze: bool = False
    owner: str | None = None
    expires: str | None = None
    run_id: str | None = None
    reuse: bool = True  # --no-reuse: no side's screening is looked up nor stored
    evidence_cache: Path | None = None

    def validate(self) -> None:
        if (
            self.evidence_cache is not None
            and self.evidence_cache.exists()
            and not (self.evidence_cache.is_dir())
        ):
            raise InputError(f"--evidence-cache {self.evidence_cache}: not a folder")
        if self.run_id is not None and not _RUN_ID.match(self.run_id):
            raise InputError(
                f"--run-id {self.run_id!r}: letters, digits, '.', '_' and '-' only (at most 100)"
            )
        if (self.owner or self.expires) and not self.freeze:
            raise InputError("--owner and --expires go with --freeze")
        if self.freeze and not self.record:
            raise InputError("--freeze writes to the ledger: it cannot go with --no-record")
        missing = [
            name
            for name, value in (("--owner", self.owner), ("--expires", self.expires))
            if self.freeze and not (value or "").strip()
        ]
        if missing:
            raise InputError(f"--freeze needs {' and '.join(missing)}")

    def expires_at(self, now: datetime) -> datetime | None:
        """When a freeze expires (a bad --expires is exit 2)."""
        from orchestrator.core.durations import parse_expiry

        return parse_expiry(self.expires, now) if self.freeze and self.expires else None


@dataclass(frozen=True, kw_only=True)
class Outputs:
    """What the run leaves besides its run folder, and what it prints."""

    out: Path | None = None
    as_json: bool = False
    html: Path | None = None
    junit: Path | None = None
    summary: Path | None = None

    @property
    def views(self) -> bool:
        return bool(self.html or self.junit or self.summary)

    def validate(self) -> None:
        if self.views:  # a report path that cannot be written: exit 2 before running
            from orchestrator.commands.report import check_replay_targets

            check_replay_targets(html=self.html, junit=self.junit, summary=self.summary)


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """``budget``'s samples of one check and the budget they are held to."""

    samples: int = 5
    budget_ms: float = 0.0

    def validate(self) -> None:
        _check_count("--samples", self.samples, MAX_REPLAYS, minimum=5)
        if not self.budget_ms >= 0:
            raise InputError("--budget-ms must be a number of milliseconds, at least 0")


@dataclass(frozen=True, kw_only=True)
class TimingAdmission:
    """``budget --admit``: who owns the timing freeze it may open, and for how long."""

    admit: bool = False
    owner: str | None = None
    max_age: str = "24h"
    oracle_keys: str = ""  # comma-separated, as given
    locked_digest: str | None = None

    def validate(self) -> None:
        self.max_age_delta()  # a bad --max-age is exit 2, with --admit or without
        if self.admit and not (self.owner or "").strip():
            raise InputError("--admit needs --owner NAME")

    def max_age_delta(self) -> timedelta:
        from orchestrator.core.durations import parse_duration

        return parse_duration(self.max_age, option="--max-age")

    def keys(self) -> tuple[str, ...]:
        return tuple(key.strip() for key in self.oracle_keys.split(",") if key.strip())


@dataclass(frozen=True, kw_only=True)
class HostProperty:
    """``shrink --property MODULE:FUNCTION``: a property called on the host, and the
    folders it is imported from (importing it is the command's, after every check)."""

    spec: str | None = None
    paths: tuple[Path, ...] = ()

    def validate(self) -> None:
        if self.paths and self.spec is None:
            raise InputError("--path goes with --property, not --test")


@dataclass(frozen=True, kw_only=True)
class RecordedReplay:
    """``reproduce``: which recorded replay of which run to run again, and where its
    commits are (the run log's repository unless --repo names another)."""

    run_dir: Path
    property_id: str
    side: str = "patch"
    replay: int | None = None  # None: the first that did not pass
    repo: Path | None = None

    def validate(self) -> None:
        if self.side not in REPRODUCE_SIDES:
            raise InputError(f"--side must be one of: {', '.join(REPRODUCE_SIDES)}")
        if self.replay is not None and self.replay < 1:
            raise InputError("--replay must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Session:
    """``reproduce``: how the replay is run again (the test, a shell, pdb) and whether its
    container stays."""

    shell: bool = False
    pdb: bool = False
    keep: bool = False

    def validate(self) -> None:
        if self.shell and self.pdb:
            raise InputError("--shell and --pdb do not go together: a shell, or pytest under pdb")


@dataclass(frozen=True, kw_only=True)
class ReplayArguments:
    """``replay``'s command line, in its groups, checked in one place."""

    selection: Selection
    oracle: Oracle
    fixture: FixtureAndShrink
    scheduling: Scheduling
    limits: Limits
    recording: Recording
    outputs: Outputs

    def validate(self) -> None:
        """Every usage mistake, found before an engine is asked for anything."""
        _check_all(
            self.scheduling,
            self.limits,
            self.recording,
            self.selection,
            self.oracle,
            self.fixture,
            self.outputs,
        )
        if self.fixture.shrink:
            if len(self.selection.property_ids) != 1:
                raise InputError(
                    "--shrink needs exactly one --property (the test to shrink against)"
                )
            if self.selection.shard is not None or len(self.scheduling.engines) > 1:
                raise InputError(
                    "--shrink runs on one engine: not with --shard or several --engine"
                )

    def replay_options(self, image: str) -> ReplayOptions:
        """The run's options as the services take them, with the image to pin."""
        from orchestrator.core.replay_run import ReplayOptions

        selection, scheduling, limits = self.selection, self.scheduling, self.limits
        return ReplayOptions(
            repo=selection.repo,
            base=selection.base,
            patch=selection.patch,
            image=image,
            command=selection.command,
            property_ids=selection.property_ids,
            changed=selection.changed,
            shard=selection.parsed_shard(),
            tests_from=self.oracle.tests_from,
            test_paths=self.oracle.test_paths,
            fixture=self.fixture.fixture,
            shrink_report=self.fixture.shrink_report,
            origin=self.fixture.origin,
            seed=self.fixture.seed,
            replays=scheduling.replays,
            screen=scheduling.screen,
            replays_all=scheduling.replays_all,
            false_block_rate=scheduling.false_block_rate,
            evidence_cap=scheduling.evidence_cap,
            jobs=scheduling.jobs,
            engines=scheduling.engines,
            slots=scheduling.slots,
            isolation=scheduling.isolation,
            runner_id=scheduling.runner_id if scheduling.runner_id is not None else "local",
            timeout_s=limits.timeout_s,
            timeout_source=limits.timeout_source,
            env=limits.env,
            pythonpath=limits.pythonpath,
            writable_tree=limits.writable_tree,
            run_id=self.recording.run_id,
            out=self.outputs.out,
            reuse=self.recording.reuse,
            evidence_cache=(
                None
                if self.recording.evidence_cache is None
                else self.recording.evidence_cache.resolve()
            ),
        )


@dataclass(frozen=True, kw_only=True)
class AcceptArguments:
    """``accept``'s command line: one test at a revision, its mutant, checked in one place."""

    test: OneTest
    mutant: str
    oracle: Oracle
    fixture: FixtureAndShrink
    scheduling: Scheduling
    limits: Limits
    recording: Recording
    outputs: Outputs

    def validate(self) -> None:
        """Every usage mistake, found before git or an engine is asked for anything."""
        _check_all(
            self.scheduling,
            self.limits,
            self.recording,
            self.test,
            self.oracle,
            self.fixture,
            self.outputs,
        )

    def accept_options(self) -> AcceptOptions:
        from orchestrator.services.accept import AcceptOptions

        test = self.test
        return AcceptOptions(
            repo=test.repo or Path(),
            property_id=test.property_id or "",
            mutant=self.mutant,
            rev=test.rev or "HEAD",
            image=self.limits.image or "",
            fixture=self.fixture.fixture,
            replays=self.scheduling.replays,
            timeout_s=self.limits.timeout_s,
            tests_from=self.oracle.tests_from,
            test_paths=self.oracle.test_paths,
        )


@dataclass(frozen=True, kw_only=True)
class BudgetArguments:
    """``budget``'s command line: one check sampled at one revision, checked in one place."""

    test: OneTest
    fixture: FixtureAndShrink
    sampling: Sampling
    scheduling: Scheduling
    limits: Limits
    recording: Recording
    admission: TimingAdmission
    outputs: Outputs

    def validate(self) -> None:
        """Every usage mistake, found before git or an engine is asked for anything."""
        _check_all(
            self.sampling,
            self.scheduling,
            self.limits,
            self.recording,
            self.admission,
            self.test,
            self.fixture,
            self.outputs,
        )

    def budget_options(self) -> BudgetOptions:
        from orchestrator.services.budget import BudgetOptions

        test = self.test
        return BudgetOptions(
            repo=test.repo or Path(),
            rev=test.rev or "",
            image=self.limits.image or "",
            property_id=test.property_id or "",
            budget_ms=self.sampling.budget_ms,
            samples=self.sampling.samples,
            command=test.command or "pytest -q",
            timeout_s=self.limits.timeout_s,
            runner_id=self.scheduling.runner_id or "local",
            fixture=self.fixture.fixture,
        )

    def admission_options(self) -> AdmissionOptions | None:
        """With --admit, what the timing admission records (None without it)."""
        from orchestrator.services.budget import AdmissionOptions

        admission = self.admission
        if not admission.admit:
            return None
        return AdmissionOptions(
            owner=admission.owner or "",
            max_age=admission.max_age_delta(),
            oracle_keys=admission.keys(),
            locked_digest=admission.locked_digest,
            ledger_url=self.recording.ledger,
        )


@dataclass(frozen=True, kw_only=True)
class ShrinkArguments:
    """``shrink``'s command line: against a host-side property or a test in its container."""

    host: HostProperty
    test: OneTest  # flag "--test"
    oracle: Oracle
    fixture: FixtureAndShrink
    limits: Limits
    outputs: Outputs

    @property
    def against_test(self) -> bool:
        return self.test.property_id is not None

    def validate(self) -> None:
        """Every usage mistake, found before the fixture is read or an engine is asked."""
        test = self.test
        if (self.host.spec is None) == (test.property_id is None):
            raise InputError("give either --property MODULE:FUNCTION or --test NODEID")
        with_test = (
            ("--repo", test.repo),
            ("--rev", test.rev),
            ("--image", self.limits.image),
            ("--tests-from", self.oracle.tests_from),
        )
        if not self.against_test:
            extra = [name for name, value in with_test if value is not None]
            if extra:
                raise InputError(f"{', '.join(extra)} go with --test, not --property")
        else:
            self.host.validate()
            missing = [name for name, value in with_test[:3] if value is None]
            if missing:
                table = " (or image = in [tool.orchestrator])" if "--image" in missing else ""
                raise InputError(f"--test needs {' and '.join(missing)}{table}")
        _check_all(self.test, self.fixture, self.limits, self.oracle, self.outputs)

    def test_request(self) -> ShrinkTestRequest:
        from orchestrator.services.shrink import ShrinkTestRequest

        test = self.test
        return ShrinkTestRequest(
            repo=test.repo or Path(),
            rev=test.rev or "",
            image=self.limits.image or "",
            test=test.property_id or "",
            seed=self.fixture.seed,
            timeout_s=self.limits.timeout_s,
            attempts=self.fixture.attempts or 2,
            command=test.command or "pytest -q",
            tests_from=self.oracle.tests_from,
        )


@dataclass(frozen=True, kw_only=True)
class ReproduceArguments:
    """``reproduce``'s command line, checked in one place (the run folder itself is read
    and checked by the service, before any container starts)."""

    recorded: RecordedReplay
    session: Session

    def validate(self) -> None:
        _check_all(self.session, self.recorded)

    @property
    def mode(self) -> Mode:
        from orchestrator.core.reproduce import Mode

        session = self.session
        return Mode.SHELL if session.shell else Mode.PDB if session.pdb else Mode.RUN

    def request(self) -> ReproduceRequest:
        from orchestrator.services.reproduce import ReproduceRequest

        recorded = self.recorded
        return ReproduceRequest(
            run_dir=recorded.run_dir,
            property_id=recorded.property_id,
            side=recorded.side,
            replay=recorded.replay,
            mode=self.mode,
            keep=self.session.keep,
            repo=recorded.repo,
        )
