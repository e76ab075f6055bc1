"""``orchestrator accept``: trust a drafted property only after a mutant dies (seed 001)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.commands._grouped import Variant, grouped, take
from orchestrator.commands._option_groups import (
    FixtureAndShrink,
    Limits,
    OneTest,
    Oracle,
    Outputs,
    Recording,
    Scheduling,
)
from orchestrator.commands._options import (
    ACCEPT_REPLAYS,
    DEFAULT_TIMEOUT_S,
    RUNNER_IMAGE,
    AcceptJsonOption,
    AcceptReplaysOption,
    ImageOption,
    MutantOption,
    PropertyOption,
    RepoOption,
    RevOption,
    TestsFromRevOption,
    TimeoutOption,
)
from orchestrator.commands._output import echo_line

if TYPE_CHECKING:
    from orchestrator.services.accept import AcceptResult

# accept's spelling of the shared groups: one test at a revision, its image and replays.
_Test = Annotated[
    OneTest,
    take(
        repo=Variant(RepoOption),
        property_id=Variant(PropertyOption),
        rev=Variant(RevOption, "HEAD"),
    ),
]
_Oracle = Annotated[Oracle, take("test_paths", tests_from=TestsFromRevOption)]
_Scheduling = Annotated[Scheduling, take(replays=Variant(AcceptReplaysOption, ACCEPT_REPLAYS))]
_Limits = Annotated[
    Limits,
    take(
        image=Variant(ImageOption, RUNNER_IMAGE),
        timeout_s=Variant(TimeoutOption, DEFAULT_TIMEOUT_S),
    ),
]


@grouped
def accept(
    *,
    test: _Test,
    mutant: MutantOption,
    oracle: _Oracle,
    fixture: Annotated[FixtureAndShrink, take("fixture")],
    scheduling: _Scheduling,
    limits: _Limits,
    recording: Annotated[Recording, take("ledger")],
    outputs: Annotated[Outputs, take(as_json=AcceptJsonOption)],
) -> None:
    """Accept a drafted property only if it is a real check and a mutant kills it.

    Static checks first (no container starts when one refuses): a constant assertion,
    an expression compared with itself, no assertion (nor pytest.raises), or no
    assertion fed by a call of the code under test. Then the property is replayed on
    --rev (it must pass every replay) and on the mutant (it must fail every replay),
    in hermetic containers from one pinned image. Every outcome is appended to the
    ledger as an ACCEPT event (`orchestrator tally` counts them).

    With --tests-from, a pull request's new test can be accepted with the base as its
    mutant: --rev PATCH --mutant BASE --tests-from PATCH.

    Exit status: 0 accepted, 1 refused (constant_assertion, self_comparison,
    no_assertion, no_call_under_test, fails_unmutated, mutant_survived), 3 infra
    (a timeout or harness error: never an acceptance), 2 bad input.
    """
    from orchestrator.commands._command_arguments import AcceptArguments
    from orchestrator.commands._output import echo_json
    from orchestrator.services.accept import accept as run_accept

    arguments = AcceptArguments(
        test=test, mutant=mutant, oracle=replace(oracle, sides=()), fixture=fixture,
        scheduling=scheduling, limits=limits, recording=recording, outputs=outputs,
    )  # fmt: skip
    arguments.validate()
    result = run_accept(
        arguments.accept_options(),
        ledger_url=arguments.recording.ledger,
        now=datetime.now(UTC),
        progress=_progress_logger(),
    )
    if arguments.outputs.as_json:
        echo_json(result.to_json())
    else:
        _print(result)
    if result.outcome.exit_status:
        raise typer.Exit(result.outcome.exit_status)


def _progress_logger() -> Any:
    from orchestrator import log
    from orchestrator.commands._progress import progress_logger

    return progress_logger(log.get_logger("orchestrator.accept"), "accept.progress")


def _print(result: AcceptResult) -> None:
    from orchestrator.core.acceptance import Outcome

    rev = result.rev[:12]
    if result.overlay is not None:
        echo_line(f"tests from {result.overlay.ref} ({result.overlay.rev[:12]}) on both trees")
    if result.outcome is Outcome.ACCEPTED:
        n = len(result.replays.get("mutant", ()))
        echo_line(
            f"accepted: {result.property_id} passes on {rev} and the mutant "
            f"({result.mutant.ref}) makes it fail in {n}/{n} replays"
        )
    elif result.outcome is Outcome.INFRA:
        echo_line(f"infra: {result.property_id}: {result.infra_reason} (never an acceptance)")
    else:
        echo_line(f"refused ({result.outcome.value}): {result.property_id}")
        for finding in result.findings:
            echo_line(f"  line {finding.line}: {finding.code.value}: {finding.detail}")
        for side, replays in result.replays.items():
            labels = ", ".join(replay.label for replay in replays)
            echo_line(f"  {side}: {labels}")
    if result.event_id is not None:
        echo_line(f"ledger event {result.event_id}")


def register(app: typer.Typer) -> None:
    app.command("accept")(accept)
