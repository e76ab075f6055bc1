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
from collections.abc import Generator
from typing import Any

import pytest

from orchestrator.probe import neutral
from orchestrator.probe.atomic import write_json_atomic

COLLECT_SCHEMA = "replay-collect/1"
OUT_VARIABLE = "REPLAY_COLLECT_OUT"

_errors: list[str] = []
_skipped: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(parser: Any) -> Generator[None, Any, None]:
    """The replay's neutralising arguments parse here too (orchestrator/probe/neutral.py)."""
    outcome = yield
    if outcome.excinfo is None:
        neutral.register_stand_ins(parser)


def pytest_configure(config: Any) -> None:
    neutral.register_markers(config)


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
