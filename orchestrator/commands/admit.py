"""``orchestrator admit``: seed 004's admission of a timing freeze request."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.commands._command_options import (
    AdmitAsJsonOption,
    AdmitOwnerOption,
    AdmitRecordOption,
    AdmitRequestArgument,
)
from orchestrator.commands._options import LedgerOption
from orchestrator.commands._output import echo_line

if TYPE_CHECKING:
    from orchestrator.core.admission import AdmissionOutcome


def admission_for(document: Any, *, now: datetime | None = None) -> AdmissionOutcome:
    """Parse a timing-admission-request/1 document and run the admission.

    ``now`` wins over the document's ``now``; with neither, the real clock is read
    (here in the shell, never in the core). The outcome carries the ``TimingFreeze``
    row that a ``--record`` option would hand to the ledger.
    """
    from orchestrator.core.admission import evaluate, parse_admission_request

    request = parse_admission_request(document)
    moment = now or request.now or datetime.now(UTC)
    return evaluate(request, moment)


def admit(
    request: AdmitRequestArgument,
    as_json: AdmitAsJsonOption = False,
    record: AdmitRecordOption = False,
    owner: AdmitOwnerOption = None,
    *,
    ledger: LedgerOption,
) -> None:
    """Admit (or refuse) a timing freeze: lanes.md section 4's gates, first failing code wins.

    REQUEST is a timing-admission-request/1 JSON file, or - for standard input.

    Codes in order: sample_too_small, age_out_of_band, missing_owner,
    fixture_oracle_drift, property_red, fixture_red, spread_too_tight, not_timing,
    already_expired; otherwise timing_debt_opened with expires_at = opened_at +
    max_age_hours. The request's "now" is used when present, else the current time.
    Exit 0 only for timing_debt_opened, 1 for a refusal, 2 for unreadable input.
    The ledger is touched only with --record.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.files import read_json

    document = read_json(request)
    if owner is not None and isinstance(document, dict):
        document = {**document, "owner": owner}
    outcome = admission_for(document)
    admission = outcome.admission
    if record:
        from orchestrator.commands._admit_record import record_outcome

        admission = record_outcome(outcome, ledger)
    if as_json:
        echo_json(outcome.to_json())
    elif admission.allowed:
        echo_line(
            f"{admission.code}: {outcome.request.freeze.test_name} frozen until {admission.detail}"
        )
    else:
        echo_line(f"refused: {admission.code} ({admission.detail})")
    raise typer.Exit(0 if admission.allowed else 1)


def register(app: typer.Typer) -> None:
    app.command("admit")(admit)
