"""Shrink a failing fixture against a real test, at a pinned revision, in its image.

Plan first (:func:`plan_test_shrink`: the node id, the revision pinned to its SHA, the
image to its ID, nothing started), then :func:`shrink_test`: one warm container
(:class:`orchestrator.services.sides.serve.WarmContainer`) runs the test on every candidate
the deterministic shrinker (:mod:`orchestrator.core.shrink`) asks about, each in a fresh
pytest session forked from a driver that imported pytest once.

A candidate fails the same way when the test's label is ``assert_fail`` with the same
position-free assertion key as on the original fixture; ``assert_pass`` or a skip holds;
a ``timeout`` or ``harness_error`` is never the same failure and stops the shrink with
:class:`~orchestrator.errors.ShrinkStoppedError` (exit 3), naming the candidate. Every
attempt starts from the original payload with an empty memo, in the same container.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import git as git_adapter
from orchestrator.core.bounds import MAX_SHRINK_ATTEMPTS, count_problem
from orchestrator.core.digest import canonical_json, digest
from orchestrator.core.pytest_command import pytest_args, split_node_id
from orchestrator.core.shrink import (
    FailureIdentity,
    Judge,
    NoVerdict,
    ShrinkReport,
    ShrinkTarget,
    candidate_verdict,
    shrink_report_with,
)
from orchestrator.core.side_spec import ReplayPlan, SideSpec, pytest_arguments
from orchestrator.errors import InputError, PropertyDoesNotFailError, ShrinkStoppedError
from orchestrator.log import get_logger
from orchestrator.services.interrupts import terminate_as_interrupt
from orchestrator.services.sides import new_run_id
from orchestrator.services.sides.serve import JobRun, WarmContainer
from orchestrator.services.tests_from import plan_test_overlay, resolve_tests_from

if TYPE_CHECKING:
    from orchestrator.core.backend import Backend
    from orchestrator.core.test_files import SideOverlay

log = get_logger(__name__)

SHRINK_SIDE = "shrink"  # the side name in the container's name and labels
PREVIEW_CHARS = 160

# (attempt, candidate number, the candidate's key count or None, its verdict) per call.
CandidateProgress = Callable[[int, int, Any, str], None]


@dataclass(frozen=True, kw_only=True)
class ShrinkTestRequest:
    """``orchestrator shrink FIXTURE --test NODEID --repo --rev --image ...``, as values."""

    repo: Path
    rev: str
    image: str
    test: str
    seed: int = 0
    timeout_s: float = 60.0
    attempts: int = 2
    runner_id: str = "local"
    command: str = "pytest -q"
    tests_from: str | None = None  # a revision whose test files judge the candidates


@dataclass(frozen=True, kw_only=True)
class ShrinkTestPlan:
    """A test shrink with everything pinned: nothing has started yet."""

    request: ShrinkTestRequest
    repo: Path
    rev: str  # full SHA
    image_id: str
    pytest_args: tuple[str, ...]
    # --tests-from: that revision's test files laid over the tree (services.tests_from).
    tests: SideOverlay | None = None

    @property
    def target(self) -> ShrinkTarget:
        request = self.request
        return ShrinkTarget(
            test=request.test,
            repo=str(self.repo),
            rev=self.rev,
            image_id=self.image_id,
            image_ref=request.image,
            seed=request.seed,
            timeout_s=request.timeout_s,
            tests_from=None if self.tests is None else self.tests.rev,
        )

    def replay_plan(self) -> ReplayPlan:
        """The container settings a replay of this test would get (environment, limits)."""
        request = self.request
        return ReplayPlan(
            image_id=self.image_id,
            pytest_args=self.pytest_args,
            property_ids=(request.test,),
            fixture=None,
            replays=1,
            timeout_s=request.timeout_s,
            seed=request.seed,
            runner_id=request.runner_id,
        )


def validate_request(request: ShrinkTestRequest) -> None:
    """Usage mistakes, found before anything is asked of git or the engine."""
    if not split_node_id(request.test).names_a_test:
        raise InputError(f"--test {request.test!r}: expected a pytest node id (path::test)")
    problem = count_problem("--attempts", request.attempts, maximum=MAX_SHRINK_ATTEMPTS)
    if problem is not None:
        raise InputError(problem)
    if request.timeout_s <= 0:
        raise InputError("--timeout must be a positive number of seconds")
    if request.tests_from is not None and not request.tests_from.strip():
        raise InputError("--tests-from needs a revision")


def plan_test_shrink(request: ShrinkTestRequest, *, backend: Backend) -> ShrinkTestPlan:
    """Pin the revision, the ``--tests-from`` overlay and the image; check the test file
    exists where the test will come from."""
    validate_request(request)
    repo = request.repo.resolve()
    rev = git_adapter.resolve_rev(repo, request.rev)
    tests = None
    tests_rev = rev
    if request.tests_from is not None:
        ref = request.tests_from.strip()
        tests_rev = resolve_tests_from(repo, ref, {})
        overlay = plan_test_overlay(
            repo,
            ref=ref,
            rev=tests_rev,
            sides={SHRINK_SIDE: rev},
            property_ids=(request.test,),
            command_paths=(),
            test_paths=(),
        )
        tests = overlay.side(SHRINK_SIDE)
    test_file = split_node_id(request.test).path
    if git_adapter.read_blobs(repo, tests_rev, [test_file])[test_file] is None:
        raise InputError(f"--test {request.test!r}: no file {test_file} at {tests_rev[:12]}")
    image = backend.resolve_image(request.image)  # never pulled: exit 3 when absent
    args = pytest_arguments(
        pytest_args(request.command, (request.test,)), (request.test,), seed=request.seed
    )
    return ShrinkTestPlan(
        request=request, repo=repo, rev=rev, image_id=image.id, pytest_args=args, tests=tests
    )


def candidate_preview(candidate: Any) -> str:
    """The candidate's canonical JSON, cut to a readable length. Pure."""
    text = canonical_json(candidate).decode("utf-8")
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def stopped_message(
    plan: ShrinkTestPlan, attempt: int, number: int, candidate: Any, verdict: NoVerdict
) -> str:
    """The one line a stopped shrink ends with: which candidate, what it did. Pure."""
    which = "the original fixture" if number == 1 else f"candidate {number}"
    return (
        f"shrink stopped at {which} of attempt {attempt} ({digest(candidate)}, "
        f"{candidate_preview(candidate)}): {plan.request.test} gave {verdict.describe()}; "
        "a timeout or harness error is never the same failure"
    )


class ContainerJudge:
    """One attempt's judge: runs the test on each candidate in the warm container."""

    def __init__(
        self,
        plan: ShrinkTestPlan,
        warm: WarmContainer,
        attempt: int,
        progress: CandidateProgress | None = None,
    ) -> None:
        self.plan = plan
        self.warm = warm
        self.attempt = attempt
        self.progress = progress
        self.calls = 0
        self.runs: list[JobRun] = []

    def __call__(self, candidate: Any) -> FailureIdentity | None:
        self.calls += 1
        request = self.plan.request
        run = self.warm.run(
            pytest_args=self.plan.pytest_args,
            fixture=canonical_json(candidate),
            timeout_s=request.timeout_s,
            job_id=f"{self.attempt}.{self.calls}",
        )
        self.runs.append(run)
        replay = self.warm.label(run, request.test)
        verdict = candidate_verdict(replay, skipped=self.warm.skipped(run, request.test))
        if self.progress is not None:
            size = len(candidate) if isinstance(candidate, dict | list) else None
            shown = "holds" if verdict is None else _short(verdict)
            self.progress(self.attempt, self.calls, size, shown)
        if isinstance(verdict, NoVerdict):
            message = stopped_message(self.plan, self.attempt, self.calls, candidate, verdict)
            log.error(
                "shrink.stopped",
                attempt=self.attempt,
                candidate=self.calls,
                candidate_digest=digest(candidate),
                label=verdict.label,
                reason=verdict.reason,
                message=verdict.message,
                payload=candidate,
            )
            raise ShrinkStoppedError(message)
        return verdict


def _short(verdict: FailureIdentity | NoVerdict) -> str:
    if isinstance(verdict, NoVerdict):
        return verdict.label
    return f"{verdict.kind} {verdict.location}"


@dataclass(frozen=True, kw_only=True)
class ShrinkTestOutcome:
    """The report, and what the warm container measured (for the bench and the logs)."""

    report: ShrinkReport
    judges: tuple[ContainerJudge, ...]
    wall_s: float

    @property
    def job_runs(self) -> tuple[JobRun, ...]:
        return tuple(run for judge in self.judges for run in judge.runs)


def shrink_test(
    plan: ShrinkTestPlan,
    payload: Any,
    *,
    backend: Backend,
    run_id: str | None = None,
    progress: CandidateProgress | None = None,
) -> ShrinkTestOutcome:
    """Shrink ``payload`` against the planned test, ``attempts`` times, in one container.

    Raises :class:`PropertyDoesNotFailError` (exit 2) when the test passes or skips on
    ``payload``, :class:`ShrinkStoppedError` (exit 3) at the first candidate with no
    verdict; the container and the exported tree are removed either way.
    """
    import time

    request = plan.request
    side = SideSpec(name=SHRINK_SIDE, repo=plan.repo, rev=plan.rev, tests=plan.tests)
    judges: list[ContainerJudge] = []

    def judge_for(attempt: int) -> Judge:
        judge = ContainerJudge(plan, warm, attempt, progress)
        judges.append(judge)
        return judge

    started = time.monotonic()
    with (
        terminate_as_interrupt(),
        WarmContainer(
            plan.replay_plan(), side, backend=backend, run_id=run_id or new_run_id()
        ) as warm,
    ):
        log.info(
            "shrink.started",
            test=request.test,
            rev=plan.rev,
            image_id=plan.image_id,
            container=warm.name,
            attempts=request.attempts,
        )
        try:
            report = shrink_report_with(
                payload, judge_for, attempts=request.attempts, target=plan.target
            )
        except PropertyDoesNotFailError:
            raise PropertyDoesNotFailError(
                f"{request.test} does not fail on this fixture at {plan.rev[:12]}"
                f" (it passes or skips): there is no failure to shrink"
            ) from None
    wall_s = time.monotonic() - started
    log.info(
        "shrink.done",
        test=request.test,
        minimal_digest=report.minimal_digest,
        stable=report.stable,
        property_calls=[calls for _, calls in report.minima],
        wall_s=round(wall_s, 3),
    )
    return ShrinkTestOutcome(report=report, judges=tuple(judges), wall_s=wall_s)
