"""``admit --record``: hand an admission outcome to the ledger (kept apart from admit.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.core.admission import AdmissionOutcome
    from orchestrator.core.timing import Admission


def record_outcome(outcome: AdmissionOutcome, ledger_url: str) -> Admission:
    """Log the admission code (and write the timing freeze it opens); return the result.

    When the ledger refuses an opened freeze (say, an expiry beyond its maximum), the
    returned admission carries the refusal code, so the command exits 1.
    """
    from orchestrator.services.ledger_access import record_admission

    now = outcome.request.now or datetime.now(UTC)
    recorded = record_admission(
        ledger_url,
        admission_code=outcome.admission.code,
        record=outcome.freeze,
        now=now,
        detail={"detail": outcome.admission.detail, "source": "admit"},
    )
    if recorded.freeze is not None and not recorded.freeze.written:
        code = recorded.freeze.codes[0]
        return replace(outcome.admission, allowed=False, code=code, detail="refused by the ledger")
    return outcome.admission
