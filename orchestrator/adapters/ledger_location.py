"""Which ledger a command uses. Kept apart from the store so that choosing the URL does
not import SQLAlchemy (a third of a second the replay command should not wait for)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "ORCHESTRATOR_LEDGER"


def ledger_url(option: str | None, env: Mapping[str, str], root: Path) -> str:
    """``--ledger``, then ``$ORCHESTRATOR_LEDGER``, then ``sqlite:///<root>/.replay/ledger.db``."""
    if option:
        return option
    if env.get(ENV_VAR):
        return env[ENV_VAR]
    return f"sqlite:///{(root / '.replay' / 'ledger.db').resolve()}"
