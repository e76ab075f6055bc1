"""The command lines of ``accept``, ``budget``, ``shrink`` and ``reproduce``, each made of
the option groups of :mod:`orchestrator.commands._option_groups`, checked in one place
(``validate()``: every usage mistake, exit 2, before git or an engine is asked), and the
request each hands its service."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.commands._option_groups import (
    FixtureAndShrink,
    HostProperty,
    Limits,
    OneTest,
    Oracle,
    Outputs,
    RecordedReplay,
    Recording,
    Sampling,
    Scheduling,
    Session,
    TimingAdmission,
    check_all,
)
from orchestrator.commands._options import ACCEPT_REPLAYS
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from orchestrator.core.reproduce import Mode
    from orchestrator.services.accept import AcceptOptions
    from orchestrator.services.budget import AdmissionOptions, BudgetOptions
    from orchestrator.services.reproduce import ReproduceRequest
    from orchestrator.services.shrink import ShrinkTestRequest


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
        check_all(
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
            replays=self.scheduling.replays or ACCEPT_REPLAYS,
            timeout_s=self.limits.seconds,
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
        check_all(
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
            budget_ms=self.sampling.budget_ms or 0.0,
            samples=self.sampling.samples,
            command=test.command or "pytest -q",
            timeout_s=self.limits.seconds,
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
        check_all(self.test, self.fixture, self.limits, self.oracle, self.outputs)

    def with_project(self) -> ShrinkArguments:
        """Against a test, ``[tool.orchestrator]`` at --rev lies under the command line as
        under ``replay``'s: its command (the test's pytest options), image and timeout; an
        option given wins. Against a host-side property no table is read."""
        test = self.test
        if test.property_id is None or test.repo is None or test.rev is None:
            return self
        from orchestrator.core.project_config import replay_settings
        from orchestrator.services.project_config import load_config

        settings = replay_settings(
            load_config(test.repo, test.rev).config,
            command=None,  # shrink has no --command: the table's, else pytest -q
            image=self.limits.image,
            replays=None,
            timeout_s=self.limits.timeout_s,
            pythonpath=(),
            env=(),
        )
        return replace(
            self,
            test=replace(test, command=settings.command),
            limits=replace(self.limits, image=settings.image, timeout_s=settings.timeout_s),
        )

    def test_request(self) -> ShrinkTestRequest:
        from orchestrator.services.shrink import ShrinkTestRequest

        test = self.test
        return ShrinkTestRequest(
            repo=test.repo or Path(),
            rev=test.rev or "",
            image=self.limits.image or "",
            test=test.property_id or "",
            seed=self.fixture.seed,
            timeout_s=self.limits.seconds,
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
        check_all(self.session, self.recorded)

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
