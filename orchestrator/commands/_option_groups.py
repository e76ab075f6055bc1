"""The option groups of ``replay``, each a frozen value with its own ``validate()``:
every usage mistake is refused here (exit 2, one line) before an engine is asked for
anything. Imported when a command runs, never for ``--help`` (building the classes costs
what the help itself takes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.commands._options import DEFAULT_TIMEOUT_S, ISOLATIONS
from orchestrator.core.bounds import (
    MAX_JOBS,
    MAX_REPLAYS,
    MAX_SLOTS,
    MAX_TIMEOUT_S,
    count_problem,
    screen_problem,
)
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from orchestrator.core.replay_run import ReplayOptions
    from orchestrator.core.shards import Shard

# A run id names a folder, containers and volumes: nothing that needs quoting.
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _check_count(flag: str, count: int | None, maximum: int) -> None:
    problem = None if count is None else count_problem(flag, count, maximum=maximum)
    if problem is not None:
        raise InputError(problem)


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
        from orchestrator.core.pytest_command import pytest_args, split_node_id

        for property_id in self.property_ids:
            if not split_node_id(property_id).names_a_test:
                raise InputError(
                    f"--property {property_id!r}: expected a pytest node id (path::test)"
                )
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
class Oracle:
    """Whose test files judge both sides (``--tests-from``; each side its own without)."""

    tests_from: str | None = None
    test_paths: tuple[str, ...] = ()

    def validate(self) -> None:
        from orchestrator.services.tests_from import normal_test_paths

        if self.test_paths and self.tests_from is None:
            raise InputError(
                "--test-path goes with --tests-from (it names more test files to take)"
            )
        if self.tests_from is not None and not self.tests_from.strip():
            raise InputError("--tests-from needs base, patch or a revision")
        normal_test_paths(self.test_paths)


@dataclass(frozen=True, kw_only=True)
class FixtureAndShrink:
    """The payload every replay reads, the shrink it came from, or the shrink to run."""

    fixture: Path | None = None
    shrink_report: Path | None = None
    origin: Path | None = None  # the unshrunk payload, when the shrink report lacks it
    seed: int = 0
    shrink: bool = False  # --shrink: shrink the fixture when the patch fails

    def validate(self) -> None:
        from orchestrator.adapters.input_file import check_input

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
            ("--jobs", self.jobs, MAX_JOBS),
            ("--slots", self.slots, MAX_SLOTS),
        ):
            _check_count(flag, count, maximum)
        problem = screen_problem(self.screen, self.replays)
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

    def validate(self) -> None:
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
        for group in (
            self.scheduling,
            self.limits,
            self.recording,
            self.selection,
            self.oracle,
            self.fixture,
            self.outputs,
        ):
            group.validate()
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
            jobs=scheduling.jobs,
            engines=scheduling.engines,
            slots=scheduling.slots,
            isolation=scheduling.isolation,
            runner_id=scheduling.runner_id if scheduling.runner_id is not None else "local",
            timeout_s=limits.timeout_s,
            env=limits.env,
            pythonpath=limits.pythonpath,
            writable_tree=limits.writable_tree,
            run_id=self.recording.run_id,
            out=self.outputs.out,
        )
