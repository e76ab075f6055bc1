"""Where a session's freezes come from: a ledger URL, or a file ``orchestrator freeze
export`` wrote (``freeze-export/1``), so that a CI job without the ledger's credentials
can quarantine from an artifact.

Read once per session, and only that: nothing here writes, and nothing but the source is
reached. A file and a SQLite ledger are read with the standard library; a PostgreSQL URL
goes through the ledger's SQLAlchemy adapter (imported only then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.quarantine import EXPORT_SCHEMA, Freeze, freeze_from_row, freezes_from_export
from orchestrator.errors import OrchestratorError

ENV_VAR = "ORCHESTRATOR_QUARANTINE"
# An export of thousands of freezes with their fixtures stays far below this.
MAX_EXPORT_BYTES = 256 * 1024 * 1024


class SourceError(Exception):
    """A source that cannot be read: one line, naming it."""


@dataclass(frozen=True, kw_only=True)
class Loaded:
    shown: str  # the source as the report names it (a URL without its password)
    form: str  # "ledger" or the document's schema
    freezes: tuple[Freeze, ...]


def is_url(source: str) -> bool:
    return "://" in source


def load(source: str) -> Loaded:
    """The freezes ``source`` holds; :class:`SourceError` when it cannot be read."""
    if is_url(source):
        return _from_ledger(source)
    return _from_file(Path(source))


def _from_file(path: Path) -> Loaded:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_EXPORT_BYTES + 1)
    except OSError as error:
        raise SourceError(f"{path}: {error.strerror or error}") from None
    if len(data) > MAX_EXPORT_BYTES:
        raise SourceError(f"{path}: larger than {MAX_EXPORT_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SourceError(f"{path}: not JSON ({error})") from None
    try:
        freezes = freezes_from_export(document)
    except OrchestratorError as error:
        raise SourceError(f"{path}: {error}") from None
    return Loaded(shown=str(path), form=EXPORT_SCHEMA, freezes=freezes)


def _from_ledger(url: str) -> Loaded:
    from orchestrator.adapters.ledger import read_only

    shown = _shown(url)
    try:
        found = read_only.live_freezes(url)
    except OrchestratorError as error:
        raise SourceError(str(error)) from None
    freezes = tuple(
        freeze_from_row(
            freeze_id=row.id,
            kind=row.kind,
            subject=row.subject,
            owner=row.owner,
            opened_at=row.opened_at,
            expires_at=row.expires_at,
            record=row.record,
        )
        for row in found
    )
    return Loaded(shown=shown, form="ledger", freezes=freezes)


def _shown(url: str) -> str:
    """The URL without a password (``user:secret@`` becomes ``user:***@``)."""
    scheme, _, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{location}"
