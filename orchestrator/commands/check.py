"""``orchestrator check``: fail CI while any live freeze is past its expiry."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from orchestrator.commands._ledger_option import json_flag, ledger_option
from orchestrator.commands._output import echo_line


# Plain Click, not Typer: a read command starts without importing Typer.
@click.command("check")
@json_flag("Print a freeze-check/1 JSON document.")
@ledger_option
def check(*, as_json: bool, ledger: str) -> None:
    """Exit 1 listing every live freeze past its expiry (with owners), else exit 0.

    Each expired freeze found also appends an OVERDUE event to the ledger's log, so the
    weekly tally counts freezes that outlived their expiry. Meant for CI (see
    docs/ci/thaw.yml): a freeze is a time box, and this is where the box closes.
    """
    from orchestrator.errors import ExitCode, VerdictError
    from orchestrator.services.ledger_access import overdue_freezes

    now = datetime.now(UTC)
    expired = overdue_freezes(ledger, now)
    if as_json:
        from orchestrator.commands._output import echo_json

        doc = {
            "schema": "freeze-check/1",
            "now": now.isoformat(),
            "expired": [row.to_json() for row in expired],
        }
        echo_json(doc)
    else:
        for row in expired:
            echo_line(
                f"overdue: freeze {row.id} ({row.kind.value}) {row.subject} "
                f"owner={row.owner} expired {row.expires_at.isoformat(timespec='seconds')}"
            )
        if not expired:
            click.echo("no live freeze is past its expiry")
    if expired:
        raise VerdictError(
            f"{len(expired)} live freeze(s) past expiry; owners must thaw or fix",
            ExitCode.BLOCKING,
        )


command = check
