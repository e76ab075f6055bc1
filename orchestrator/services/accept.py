"""Accept a drafted property only after a hand-written mutant dies (seed 001, step 2).

Plan first (pure checks on pinned inputs), then execute:

1. pin ``--rev`` to a full SHA and the mutant to a patch file or a second SHA; with
   ``--tests-from REV`` plan the overlay of that revision's test files on both trees;
   refuse a mutant that edits the property's own files as the trees that run have them
   (that changes the oracle, not the code);
2. read the property's test file at the pinned revision and run the static checks
   (``orchestrator.core.property_lint``); a finding ends it there, no container starts;
3. replay the property on the revision and on the mutant, concurrently, in hermetic
   containers from one pinned image ID (``orchestrator.services.sides``);
4. judge (pure) and append one ACCEPT event to the ledger, whatever the outcome.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.input_file import check_input, read_input
from orchestrator.core.acceptance import ACCEPTANCE_SCHEMA, Outcome, judge_replays, patch_paths
from orchestrator.core.bounds import MAX_REPLAYS, count_problem
from orchestrator.core.property_lint import (
    Finding,
    find_function,
    parse_property_id,
    static_findings,
)
from orchestrator.core.pytest_command import property_files
from orchestrator.core.test_files import TestOverlay
from orchestrator.errors import InfrastructureError, InputError
from orchestrator.log import get_logger
from orchestrator.model import Event, EventKind, Label, Replay
from orchestrator.services.oracle import oracle_inputs, read_side
from orchestrator.services.tests_from import (
    normal_test_paths,
    plan_test_overlay,
    resolve_tests_from,
)

if TYPE_CHECKING:
    from orchestrator.core.backend import Backend
    from orchestrator.services.sides import Progress

log = get_logger(__name__)

UNMUTATED = "unmutated"
MUTANT = "mutant"


@dataclass(frozen=True, kw_only=True)
class AcceptOptions:
    """The command line, as values."""

    repo: Path
    property_id: str
    mutant: str  # a patch file, or a revision
    rev: str = "HEAD"
    image: str = "orchestrator-runner:latest"
    fixture: Path | None = None
    replays: int = 3
    timeout_s: float = 60.0
    seed: int = 0
    runner_id: str = "local"
    # --tests-from REV: that revision's test files on both sides (a pull request's new
    # test, with the base as its mutant); --test-path: more of them.
    tests_from: str | None = None
    test_paths: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class MutantPin:
    """The mutant, pinned: a patch file (with its digest) or a revision's full SHA."""

    kind: str  # "patch" | "rev"
    ref: str  # what the user gave
    rev: str | None = None
    patch: Path | None = None
    patch_digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "ref": self.ref}
        if self.rev is not None:
            doc["rev"] = self.rev
        if self.patch is not None:
            doc["path"] = str(self.patch)
            doc["digest"] = self.patch_digest
        return doc


@dataclass(frozen=True, kw_only=True)
class AcceptPlan:
    options: AcceptOptions
    repo: Path
    rev: str
    mutant: MutantPin
    source: str  # the property's test file at ``rev`` (with --tests-from: at that revision)
    overlay: TestOverlay | None = None


@dataclass(frozen=True, kw_only=True)
class AcceptResult:
    """What happened to one drafted property; ``to_json`` is the acceptance/1 document."""

    property_id: str
    outcome: Outcome
    rev: str
    mutant: MutantPin
    findings: tuple[Finding, ...] = ()
    image_id: str | None = None
    replays: Mapping[str, tuple[Replay, ...]] = field(default_factory=dict)
    infra_reason: str | None = None
    event_id: int | None = None
    overlay: TestOverlay | None = None

    @property
    def tests_from(self) -> str | None:
        return None if self.overlay is None else self.overlay.rev

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED

    def event_detail(self) -> dict[str, Any]:
        """What the ACCEPT event keeps (the tally reads its code and subject)."""
        detail: dict[str, Any] = {
            "rev": self.rev,
            "mutant": self.mutant.to_json(),
            "findings": [finding.to_json() for finding in self.findings],
            "image_id": self.image_id,
            "tests_from": self.tests_from,
        }
        for side, replays in self.replays.items():
            detail[f"{side}_labels"] = [replay.label for replay in replays]
        if self.infra_reason is not None:
            detail["infra_reason"] = self.infra_reason
        return detail

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ACCEPTANCE_SCHEMA,
            "property_id": self.property_id,
            "outcome": self.outcome.value,
            "accepted": self.accepted,
            "exit_status": self.outcome.exit_status,
            "rev": self.rev,
            "mutant": self.mutant.to_json(),
            "findings": [finding.to_json() for finding in self.findings],
            "image_id": self.image_id,
            "replays": {
                side: [replay.to_json() for replay in replays]
                for side, replays in self.replays.items()
            },
            "infra_reason": self.infra_reason,
            "event_id": self.event_id,
            "tests_from": self.tests_from,
            "overlay": None if self.overlay is None else self.overlay.to_json(),
        }


# ---------------------------------------------------------------------------- plan


def pin_mutant(repo: Path, mutant: str, property_files: Sequence[str]) -> MutantPin:
    """A patch file when ``mutant`` names one, else a revision; neither is bad input."""
    candidate = Path(mutant)
    # Anything there but a folder is read as a patch (a FIFO or a link is refused).
    if candidate.is_symlink() or (candidate.exists() and not candidate.is_dir()):
        data = read_input(candidate, name=f"--mutant {mutant}")
        text = data.decode("utf-8", errors="replace")
        touched = patch_paths(text)
        if not touched:
            raise InputError(f"--mutant {mutant}: not a unified diff (no ---/+++ headers)")
        edited = sorted(set(touched) & set(property_files))
        if edited:
            raise InputError(
                f"--mutant {mutant} edits the property's own file {edited[0]}; "
                "a mutant changes the code under test, never the property"
            )
        return MutantPin(
            kind="patch",
            ref=mutant,
            patch=candidate.resolve(),
            patch_digest="sha256:" + hashlib.sha256(data).hexdigest(),
        )
    try:
        sha = git_adapter.resolve_rev(repo, mutant)
    except InputError:
        raise InputError(
            f"--mutant {mutant!r} is neither a patch file nor a revision of {repo}"
        ) from None
    return MutantPin(kind="rev", ref=mutant, rev=sha)


def plan_accept(options: AcceptOptions) -> AcceptPlan:
    """Pin the revision and the mutant and read the property. Nothing runs yet."""
    ref = parse_property_id(options.property_id)
    problem = count_problem("--replays", options.replays, maximum=MAX_REPLAYS)
    if problem is not None:
        raise InputError(problem)
    if options.timeout_s <= 0:
        raise InputError("--timeout must be positive")
    if options.fixture is not None:
        check_input(options.fixture, name=f"--fixture {options.fixture}")
    if options.test_paths and options.tests_from is None:
        raise InputError("--test-path goes with --tests-from (it names more test files to take)")
    test_paths = normal_test_paths(options.test_paths)
    repo = options.repo.resolve()
    rev = git_adapter.resolve_rev(repo, options.rev)
    own_files = property_files(options.property_id)
    mutant = pin_mutant(repo, options.mutant, own_files)
    overlay = _plan_overlay(options, repo, rev, mutant, test_paths)
    # A class's base in another module (a mixin in tests/__init__.py) states the property
    # as much as its own file does: a mutant may edit neither.
    bases = base_modules(repo, rev, options.property_id, overlay)
    if mutant.patch is not None:
        edited = sorted(
            set(
                patch_paths(
                    read_input(mutant.patch, name="--mutant").decode("utf-8", errors="replace")
                )
            )
            & set(bases)
        )
        if edited:
            raise InputError(
                f"--mutant {mutant.ref} edits {edited[0]}, which the property's class "
                "inherits from; a mutant changes the code under test, never the property"
            )
    # The refusal looks at the trees that run: with --tests-from both sides hold the
    # property's files of that one revision, so a revision mutant may be any revision.
    at_rev = read_side(repo, rev, (*own_files, *bases), overlay)
    if mutant.rev is not None:
        at_mutant = read_side(repo, mutant.rev, (*own_files, *bases), overlay)
        changed = [path for path in own_files if at_rev[path] != at_mutant[path]]
        if changed:
            raise InputError(
                f"--mutant {mutant.ref} changes the property's own file {changed[0]}; "
                "a mutant changes the code under test, never the property"
                + ("" if overlay else "; with --tests-from REV both sides take REV's tests")
            )
        changed = [path for path in bases if at_rev[path] != at_mutant[path]]
        if changed:
            raise InputError(
                f"--mutant {mutant.ref} changes {changed[0]}, which the property's class "
                "inherits from; a mutant changes the code under test, never the property"
            )
    data = at_rev[ref.path]
    if data is None:
        where = options.rev if overlay is None else f"--tests-from {overlay.ref}"
        sha = rev if overlay is None else overlay.rev
        raise InputError(f"{ref.path}: no such file at {where} ({sha[:12]})")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{ref.path}: not UTF-8 text") from None
    find_function(source, ref)  # a missing function is bad input, found before any record
    return AcceptPlan(
        options=options, repo=repo, rev=rev, mutant=mutant, source=source, overlay=overlay
    )


def base_modules(
    repo: Path, rev: str, property_id: str, overlay: TestOverlay | None
) -> tuple[str, ...]:
    """The other project modules the classes of the property's module inherit from, on the
    unmutated tree (read as its oracle is)."""
    before, _ = oracle_inputs(repo, rev, rev, [property_id], overlay=overlay)[property_id]
    return tuple(sorted(before[2]))


def _plan_overlay(
    options: AcceptOptions, repo: Path, rev: str, mutant: MutantPin, test_paths: tuple[str, ...]
) -> TestOverlay | None:
    """With --tests-from, the test files of that revision on the unmutated and mutant trees."""
    if options.tests_from is None:
        return None
    ref = options.tests_from.strip()
    if not ref:
        raise InputError("--tests-from needs a revision")
    return plan_test_overlay(
        repo,
        ref=ref,
        rev=resolve_tests_from(repo, ref, {}),
        sides={UNMUTATED: rev, MUTANT: mutant.rev or rev},
        property_ids=(options.property_id,),
        command_paths=(),
        test_paths=test_paths,
    )


# ------------------------------------------------------------------------- execute


def _replay(
    plan: AcceptPlan,
    *,
    backend: Backend | None,
    progress: Progress | None,
) -> tuple[str, dict[str, tuple[Replay, ...]]]:
    """Both sides at once, same image ID; returns the image ID and the labels per side."""
    from orchestrator.services.sides import ReplayPlan, SideSpec, run_sides
    from orchestrator.services.sides.pool import open_backend

    if backend is None:
        import os

        with open_backend(os.environ) as opened:
            return _replay(plan, backend=opened, progress=progress)
    options = plan.options
    image = backend.resolve_image(options.image)
    replay_plan = ReplayPlan(
        image_id=image.id,
        pytest_args=("-q",),
        property_ids=(options.property_id,),
        fixture=options.fixture.resolve() if options.fixture is not None else None,
        replays=options.replays,
        timeout_s=options.timeout_s,
        seed=options.seed,
        runner_id=options.runner_id,
    )
    overlay = plan.overlay
    sides = [
        SideSpec(
            name=UNMUTATED,
            repo=plan.repo,
            rev=plan.rev,
            tests=None if overlay is None else overlay.side(UNMUTATED),
        ),
        SideSpec(
            name=MUTANT,
            repo=plan.repo,
            rev=plan.mutant.rev or plan.rev,
            mutant=plan.mutant.patch,
            tests=None if overlay is None else overlay.side(MUTANT),
        ),
    ]
    labelled = run_sides(replay_plan, sides, backend=backend, progress=progress).labelled
    return image.id, {
        side: labelled.get(side, {}).get(options.property_id, ()) for side in (UNMUTATED, MUTANT)
    }


def _infra_reason(replays: Mapping[str, Sequence[Replay]]) -> str | None:
    for side, side_replays in replays.items():
        for replay in side_replays:
            if not Label.is_completed(replay.label) and replay.label != Label.SKIPPED:
                reason = f"{side}: {replay.label}"
                if replay.reason:
                    reason += f" ({replay.reason})"
                if replay.message and replay.message.strip():
                    reason += ": " + replay.message.strip().splitlines()[0]
                return reason
    if any(not side_replays for side_replays in replays.values()):
        return "no replay reported the property"
    return None


def accept(
    options: AcceptOptions,
    *,
    ledger_url: str,
    now: datetime,
    backend: Backend | None = None,
    progress: Progress | None = None,
) -> AcceptResult:
    """Plan, check, replay, judge; append one ACCEPT event. Bad input raises before any event."""
    from orchestrator.adapters.ledger import Ledger

    plan = plan_accept(options)
    # Opened before any container starts: a ledger that cannot record the outcome fails fast.
    with Ledger.open(ledger_url) as ledger:
        result = check_property(plan, backend=backend, progress=progress)
        event_id = ledger.append_event(
            Event(
                id=None,
                at=now,
                kind=EventKind.ACCEPT,
                code=result.outcome.value,
                subject=options.property_id,
                detail=result.event_detail(),
            )
        )
    return replace(result, event_id=event_id)


def check_property(
    plan: AcceptPlan,
    *,
    backend: Backend | None = None,
    progress: Progress | None = None,
) -> AcceptResult:
    """The static checks, then (only when they pass) both replays and the verdict."""
    options = plan.options
    findings = static_findings(plan.source, parse_property_id(options.property_id))
    if findings:
        log.info("accept.refused", property=options.property_id, code=findings[0].code.value)
        return AcceptResult(
            property_id=options.property_id,
            outcome=findings[0].code,
            rev=plan.rev,
            mutant=plan.mutant,
            findings=findings,
            overlay=plan.overlay,
        )
    image_id: str | None = None
    replays: dict[str, tuple[Replay, ...]] = {}
    infra_reason: str | None = None
    try:
        image_id, replays = _replay(plan, backend=backend, progress=progress)
    except InfrastructureError as error:
        # The machinery failed: an outcome too (never an acceptance), so it is recorded.
        infra_reason = str(error)
    outcome = Outcome.INFRA
    if infra_reason is None:
        outcome = judge_replays(replays[UNMUTATED], replays[MUTANT])
        if outcome is Outcome.INFRA:
            infra_reason = _infra_reason(replays)
    log.info("accept.judged", property=options.property_id, outcome=outcome.value)
    return AcceptResult(
        property_id=options.property_id,
        outcome=outcome,
        rev=plan.rev,
        mutant=plan.mutant,
        image_id=image_id,
        replays=replays,
        infra_reason=infra_reason,
        overlay=plan.overlay,
    )
