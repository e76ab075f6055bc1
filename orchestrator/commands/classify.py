"""``orchestrator classify``: one evidence document in, one lane decision out."""

from __future__ import annotations

import typer

from orchestrator.commands._command_options import (
    ClassifyAsJsonOption,
    ClassifyEvidenceArgument,
)
from orchestrator.commands._output import echo_line


def classify(
    evidence: ClassifyEvidenceArgument,
    as_json: ClassifyAsJsonOption = False,
) -> None:
    """Decide the lane for one property's bilateral evidence (docs/lanes.md section 3).

    EVIDENCE is a replay-evidence/1 JSON file (docs/records.md), or - for standard input.

    Exit status: 0 a non-blocking lane (no_freeze, fix_candidate, flake_queue_eligible),
    1 a blocking lane (reject_run, property_regression, different_bug, block_patch),
    3 undecided (reject_malformed, infra_queue, rerun_shrink), 2 unreadable input.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.core.evidence import parse_evidence
    from orchestrator.core.lanes import decide
    from orchestrator.files import read_json

    decision = decide(parse_evidence(read_json(evidence)))
    if as_json:
        echo_json(decision.to_json())
    else:
        verdict = (
            "blocking"
            if decision.blocking
            else ("undecided" if decision.lane.undecided else "non-blocking")
        )
        freeze = "freeze allowed" if decision.freeze_allowed else "no freeze"
        echo_line(f"{decision.lane.value} ({decision.code}): {verdict}, {freeze}")
        for reason in decision.reasons:
            echo_line(f"  - {reason}")
    raise typer.Exit(decision.lane.exit_status)


def register(app: typer.Typer) -> None:
    app.command("classify")(classify)
