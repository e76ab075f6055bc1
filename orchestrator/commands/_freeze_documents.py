"""``orchestrator freeze show|export``: one live freeze, or all of them, as JSON.

Declared with Typer; the ``freeze`` group (``commands/freeze.py``) loads them when asked for.
"""

from __future__ import annotations

import typer

from orchestrator.commands._command_options import (
    ExportFreezesOutOption,
    ShowFreezeFreezeIdArgument,
)
from orchestrator.commands._options import LedgerOption


def show_freeze(
    freeze_id: ShowFreezeFreezeIdArgument,
    *,
    ledger: LedgerOption,
) -> None:
    """Print one live freeze as JSON: its record and the stored fixture bytes.

    ID is a freeze id, as `orchestrator freeze list` shows it.

    The minimal fixture and the unshrunk payload stored beside a flake freeze are
    printed as `fixture` and `origin`. An unknown ID is exit 2.
    """
    import json

    from orchestrator.commands._output import echo_json
    from orchestrator.errors import InputError
    from orchestrator.services.ledger_access import freeze

    row = freeze(ledger, freeze_id)
    if row is None:
        raise InputError(f"freeze {freeze_id}: no such live freeze")
    doc = row.to_json()
    for name, blob in (("fixture", row.fixture_bytes), ("origin", row.origin_bytes)):
        if blob is not None:
            doc[name] = json.loads(blob.decode("utf-8"))
    echo_json(doc)


def export_freezes(
    out: ExportFreezesOutOption = None,
    *,
    ledger: LedgerOption,
) -> None:
    """Canonical JSON of all live rows, sorted, for review in a pull request.

    A freeze-export/1 document: every live freeze row with its stored fixture bytes,
    canonical JSON (sorted keys, compact), so the same rows export the same bytes.
    """
    from orchestrator.core.digest import canonical_json
    from orchestrator.files import write_atomic
    from orchestrator.services.ledger_access import export_document

    data = canonical_json(export_document(ledger)) + b"\n"
    if out is None:
        typer.echo(data.decode("utf-8"), nl=False)
    else:
        write_atomic(out, data)


def register(app: typer.Typer) -> None:
    app.command("show")(show_freeze)
    app.command("export")(export_freezes)
