"""The option groups of ``replay``, ``reproduce``, ``shrink``, ``accept``, ``budget`` and
``thaw``, each a frozen value with its own ``validate()``: every usage mistake is refused
here (exit 2, one line) before an engine is asked for anything.

A field that is an option is annotated with its declaration (``_options.py``): the
commands take the groups as parameters (``commands/_grouped.py`` spreads them into Typer's
options), each the fields it has, and leave the others at their defaults, so an option
checked for one command is checked the same way for every other. A field left ``None``
was not given (``replay`` lays ``[tool.orchestrator]`` under it, ``with_project``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchestrator.commands._grouped import values_for
from orchestrator.commands._options import (
    DEFAULT_TIMEOUT_S,
    ISOLATIONS,
    REPRODUCE_SIDES,
    AdmitOption,
    AdmitOwnerOption,
    AllRowsOption,
    BaseOption,
    BudgetCommandOption,
    BudgetMsOption,
    ChangedOption,
    CommandOption,
    EnginesOption,
    EnvOption,
    EvidenceCacheOption,
    EvidenceCapOption,
    ExpiresOption,
    FalseBlockRateOption,
    FixtureOption,
    FreezeOption,
    HostPropertyOption,
    HtmlOption,
    IsolationOption,
    JobsOption,
    JunitOption,
    KeepOption,
    LedgerOption,
    LockedDigestOption,
    MaxAgeOption,
    MemoryOption,
    OptionalImageOption,
    OptionalPropertyOption,
    OptionalRepoOption,
    OptionalRevOption,
    OptionalTimeoutOption,
    OracleKeysOption,
    OriginOption,
    OutOption,
    OwnerOption,
    PatchOption,
    PdbOption,
    PropertiesOption,
    PropertyPathOption,
    PythonpathOption,
    RecordedPropertyArgument,
    RecordOption,
    ReplayNumberOption,
    ReplaysAllOption,
    ReplaysOption,
    RepoOption,
    ReportJsonOption,
    ReuseOption,
    RunDirArgument,
    RunIdOption,
    RunnerIdOption,
    RunRepoOption,
    SamplesOption,
    ScreenOption,
    SeedOption,
    ShardOption,
    ShellOption,
    ShrinkOption,
    ShrinkReportOption,
    SideOption,
    SlotsOption,
    SummaryOption,
    TestPathOption,
    TestsFromOption,
    WritableTreeOption,
)
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

    from orchestrator.core.project_config import ProjectConfig
    from orchestrator.core.replay_run import ReplayOptions
    from orchestrator.core.shards import Shard

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


def check_all(*groups: _Group) -> None:
    for group in groups:
        group.validate()


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What is replayed: the repository, the two revisions, the command and its tests."""

    repo: RepoOption = Path(".")
    base: BaseOption
    patch: PatchOption
    command: CommandOption = None  # replay: the project's command unless given
    property_ids: PropertiesOption = ()
    changed: ChangedOption = False
    shard: ShardOption = None  # I/N as given

    def validate(self) -> None:
        from orchestrator.core.pytest_command import pytest_args

        for property_id in self.property_ids:
            _check_node_id("--property", property_id)
        if self.changed and self.property_ids:
            raise InputError(
                "--changed selects the properties itself: it does not go with --property"
            )
        if self.command is not None:  # a bad --command is exit 2
            pytest_args(self.command, self.property_ids)
        self.parsed_shard()

    def parsed_shard(self) -> Shard | None:
        from orchestrator.core.shards import parse_shard

        return None if self.shard is None else parse_shard(self.shard)


@dataclass(frozen=True, kw_only=True)
class OneTest:
    """One test at one revision: what ``accept`` and ``budget`` run, and ``shrink --test``
    (a smaller :class:`Selection`: its node id and ``--command`` are checked the same way)."""

    repo: OptionalRepoOption = None
    rev: OptionalRevOption = None
    property_id: OptionalPropertyOption = None
    command: BudgetCommandOption = None
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

    tests_from: TestsFromOption = None
    test_paths: TestPathOption = ()
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

    fixture: FixtureOption = None
    shrink_report: ShrinkReportOption = None
    origin: OriginOption = None  # the unshrunk payload, when the shrink report lacks it
    seed: SeedOption = 0
    shrink: ShrinkOption = False  # --shrink: shrink the fixture when the patch fails
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

    replays: ReplaysOption = None  # None: not given
    screen: ScreenOption = None  # None: the default rule (core.screening)
    replays_all: ReplaysAllOption = False
    false_block_rate: FalseBlockRateOption = None  # the evidence rule (core.significance)
    evidence_cap: EvidenceCapOption = None
    jobs: JobsOption = None
    engines: EnginesOption = ()
    slots: SlotsOption = None
    isolation: IsolationOption = "side"
    runner_id: RunnerIdOption = None  # as given: a pool names its engines by URL without it

    def validate(self) -> None:
        if self.replays is not None and self.replays < 1:
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
        problem = (None if self.replays is None else screen_problem(self.screen, self.replays)) or (
            None
            if self.false_block_rate is None
            else false_block_rate_problem("--false-block-rate", self.false_block_rate)
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

    image: OptionalImageOption = None  # None: the project's default, asked of the engine last
    timeout_s: OptionalTimeoutOption = None  # None: the project's, else DEFAULT_TIMEOUT_S
    env: EnvOption = ()  # KEY=VALUE, as given
    pythonpath: PythonpathOption = ()
    writable_tree: WritableTreeOption = False
    # Who set timeout_s (None: nobody; replay derives a whole suite's own).
    timeout_source: str | None = "--timeout"
    memory: MemoryOption = None  # as given (None: the default rule, core.schedule)

    def validate(self) -> None:
        from orchestrator.core.replay_env import check_pythonpath, parse_env

        if self.memory is not None:
            self.memory_mb()
        if self.timeout_s is not None and not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(
                f"--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}"
            )
        parse_env(self.env)
        check_pythonpath(self.pythonpath)

    def memory_mb(self) -> int | None:
        from orchestrator.core.schedule import memory_mb

        if self.memory is None:
            return None
        try:
            return memory_mb(self.memory)
        except ValueError as error:
            raise InputError(str(error)) from None

    @property
    def seconds(self) -> float:
        """The timeout, the default one when none was given."""
        return DEFAULT_TIMEOUT_S if self.timeout_s is None else self.timeout_s

    def env_pairs(self) -> tuple[tuple[str, str], ...]:
        from orchestrator.core.replay_env import parse_env

        return parse_env(self.env)


@dataclass(frozen=True, kw_only=True)
class Recording:
    """Where the run is recorded: its id, the ledger, and the freezes it may write."""

    ledger: LedgerOption
    record: RecordOption = True
    freeze: FreezeOption = False
    owner: OwnerOption = None
    expires: ExpiresOption = None
    run_id: RunIdOption = None
    reuse: ReuseOption = True  # --no-reuse: no side's screening is looked up nor stored
    evidence_cache: EvidenceCacheOption = None

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

    out: OutOption = None
    as_json: ReportJsonOption = False
    all_rows: AllRowsOption = False  # every property in the table, not only those needing a look
    html: HtmlOption = None
    junit: JunitOption = None
    summary: SummaryOption = None

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

    samples: SamplesOption = 5
    budget_ms: BudgetMsOption = 0.0

    def validate(self) -> None:
        _check_count("--samples", self.samples, MAX_REPLAYS, minimum=5)
        if self.budget_ms is None or not self.budget_ms >= 0:
            raise InputError("--budget-ms must be a number of milliseconds, at least 0")


@dataclass(frozen=True, kw_only=True)
class TimingAdmission:
    """``budget --admit``: who owns the timing freeze it may open, and for how long."""

    admit: AdmitOption = False
    owner: AdmitOwnerOption = None
    max_age: MaxAgeOption = "24h"
    oracle_keys: OracleKeysOption = ""  # comma-separated, as given
    locked_digest: LockedDigestOption = None

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

    spec: HostPropertyOption = None
    paths: PropertyPathOption = ()

    def validate(self) -> None:
        if self.paths and self.spec is None:
            raise InputError("--path goes with --property, not --test")


@dataclass(frozen=True, kw_only=True)
class RecordedReplay:
    """``reproduce``: which recorded replay of which run to run again, and where its
    commits are (the run log's repository unless --repo names another)."""

    run_dir: RunDirArgument
    property_id: RecordedPropertyArgument
    side: SideOption = "patch"
    replay: ReplayNumberOption = None  # None: the first that did not pass
    repo: RunRepoOption = None

    def validate(self) -> None:
        if self.side not in REPRODUCE_SIDES:
            raise InputError(f"--side must be one of: {', '.join(REPRODUCE_SIDES)}")
        if self.replay is not None and self.replay < 1:
            raise InputError("--replay must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Session:
    """``reproduce``: how the replay is run again (the test, a shell, pdb) and whether its
    container stays."""

    shell: ShellOption = False
    pdb: PdbOption = False
    keep: KeepOption = False

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
        check_all(
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

    @property
    def groups(self) -> tuple[object, ...]:
        return (
            self.selection,
            self.oracle,
            self.fixture,
            self.scheduling,
            self.limits,
            self.recording,
            self.outputs,
        )

    def with_project(self, config: ProjectConfig) -> ReplayArguments:
        """The command line laid over ``[tool.orchestrator]`` (an option given wins; the
        table's at the base revision, else the defaults, fill what was not given)."""
        from orchestrator.core.pool import check_engine_urls
        from orchestrator.core.project_config import EvidenceGiven, replay_settings
        from orchestrator.core.replay_env import check_pythonpath, parse_env

        scheduling, limits = self.scheduling, self.limits
        settings = replay_settings(
            config,
            command=self.selection.command,
            image=limits.image,
            replays=scheduling.replays,
            timeout_s=limits.timeout_s,
            pythonpath=check_pythonpath(limits.pythonpath) if limits.pythonpath else None,
            env=parse_env(limits.env) if limits.env else None,
            evidence=EvidenceGiven(
                false_block_rate=scheduling.false_block_rate, cap=scheduling.evidence_cap
            ),
        )
        return replace(
            self,
            selection=replace(self.selection, command=settings.command),
            scheduling=replace(
                scheduling,
                replays=settings.replays,
                false_block_rate=settings.false_block_rate,
                evidence_cap=settings.evidence_cap,
                engines=check_engine_urls(scheduling.engines),
            ),
            limits=replace(
                limits,
                image=settings.image,
                timeout_s=settings.timeout_s,
                timeout_source=settings.timeout_source,
                env=tuple(f"{key}={value}" for key, value in settings.env),
                pythonpath=settings.pythonpath,
            ),
        )

    def replay_options(self, image: str) -> ReplayOptions:
        """The run's options as the services take them, with the image to pin: every field
        of ``ReplayOptions`` from the group field of its name, but for these."""
        from orchestrator.core.replay_run import ReplayOptions

        runner_id = self.scheduling.runner_id
        return ReplayOptions(
            **values_for(
                ReplayOptions,
                *self.groups,
                image=image,
                shard=self.selection.parsed_shard(),
                runner_id=runner_id if runner_id is not None else "local",
                timeout_s=self.limits.seconds,
                env=self.limits.env_pairs(),
                memory_mb=self.limits.memory_mb(),
                evidence_cache=(
                    None
                    if self.recording.evidence_cache is None
                    else self.recording.evidence_cache.resolve()
                ),
            )
        )
