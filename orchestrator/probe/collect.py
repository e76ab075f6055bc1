"""A pytest plugin that writes the node ids a run collects, for cutting a run in parts.

    python3 -m pytest --collect-only -p orchestrator.probe.collect <pytest args>

with ``REPLAY_COLLECT_OUT`` naming the result file. It writes ``replay-collect/1``:
``{"schema", "items": [node ids in collection order], "errors": [node ids of
collectors that failed], "skipped": [node ids of collectors that skipped themselves]}``
atomically, whatever pytest's verbosity or the project's ``addopts`` (its terminal output
is never parsed). Standard library and pytest only.
"""

from __future__ import annotations

import os
from typing import Any

from orchestrator.probe.atomic import write_json_atomic

COLLECT_SCHEMA = "replay-collect/1"
OUT_VARIABLE = "REPLAY_COLLECT_OUT"

_errors: list[str] = []
_skipped: list[str] = []


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _errors.append(str(report.nodeid))
    elif report.skipped:  # a module that skips itself as it is imported: no items of its own
        _skipped.append(str(report.nodeid))


def pytest_collection_finish(session: Any) -> None:
    path = os.environ.get(OUT_VARIABLE)
    if not path:
        return
    write_json_atomic(
        path,
        {
            "schema": COLLECT_SCHEMA,
            "items": [str(item.nodeid) for item in session.items],
            "errors": list(dict.fromkeys(_errors)),
            "skipped": list(dict.fromkeys(_skipped)),
        },
    )
