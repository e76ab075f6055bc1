"""Which ledger a command uses. Kept apart from the store so that choosing the URL does
not import SQLAlchemy (a third of a second the replay command should not wait for).

The command line reads ``--ledger`` and ``$ORCHESTRATOR_LEDGER`` itself (one shared
option, ``orchestrator.commands._options.LedgerOption``); this module names the
variable and the default file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "ORCHESTRATOR_LEDGER"
# How long a write waits for another writer's lock before it fails (seconds).
WAIT_ENV_VAR = "ORCHESTRATOR_LEDGER_WAIT_S"
DEFAULT_LOCK_WAIT_S = 60.0


def default_ledger_url(root: Path) -> str:
    """The embedded ledger: ``sqlite:///<root>/.replay/ledger.db``."""
    return f"sqlite:///{(root / '.replay' / 'ledger.db').resolve()}"


def lock_wait_s(env: Mapping[str, str]) -> float:
    """``$ORCHESTRATOR_LEDGER_WAIT_S`` when it is a number of seconds (>= 0), else 60."""
    import math

    try:
        value = float(env.get(WAIT_ENV_VAR, "") or DEFAULT_LOCK_WAIT_S)
    except ValueError:
        return DEFAULT_LOCK_WAIT_S
    return value if math.isfinite(value) and value >= 0 else DEFAULT_LOCK_WAIT_S
