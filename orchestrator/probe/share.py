"""One worker's share of a replay: which collected tests this pytest session runs.

The driver (``orchestrator/probe/runner.py``) starts J pytest sessions for one replay, each
with ``REPLAY_WORKER=w/J``. Every session collects the whole selection (so every test
module is imported in every worker, as in one process), then keeps only its own share:
:func:`orchestrator.probe.schedule.split_by_module` over the collected node ids and the
recorded durations in ``$REPLAY_DURATIONS``. Every worker computes the same split from the
same collection; each writes it to ``$REPLAY_SPLIT`` before its first test runs, so the
driver knows which tests a worker that dies owned. Tests of one module stay together and
in order. Standard library and pytest only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pytest

from orchestrator.probe import SPLIT_ENV, SPLIT_SCHEMA, WORKER_ENV
from orchestrator.probe.atomic import write_json_atomic
from orchestrator.probe.schedule import split_by_module

DURATIONS_ENV: Final = "REPLAY_DURATIONS"
# The size of the whole replay's selection, before this worker kept its share (the
# probe's per-test progress lines count against it).
SELECTION_SIZE: Final = pytest.StashKey[int]()


@dataclass(frozen=True, kw_only=True)
class Share:
    """Worker ``worker`` (1-based) of ``workers``."""

    worker: int
    workers: int


def parse_share(text: str) -> Share:
    """``2/4`` -> Share(worker=2, workers=4); anything else is a ``ValueError``."""
    worker_text, sep, workers_text = text.strip().partition("/")
    if not sep:
        raise ValueError(f"{WORKER_ENV} must look like w/J, got {text!r}")
    worker, workers = int(worker_text), int(workers_text)
    if not 1 <= worker <= workers:
        raise ValueError(f"{WORKER_ENV}: worker {worker} is not in 1..{workers}")
    return Share(worker=worker, workers=workers)


def read_durations(path: str | None) -> dict[str, float]:
    """Node id -> milliseconds from a durations file (``replay-durations/1`` or a plain
    object); an absent, unreadable or foreign file is no durations (every test equal)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return {}
    if isinstance(document, Mapping) and isinstance(document.get("durations_ms"), Mapping):
        document = document["durations_ms"]
    if not isinstance(document, Mapping):
        return {}
    return {
        str(key): float(value)
        for key, value in document.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


class WorkerShare:
    """The pytest plugin that keeps a worker's share of the collected tests."""

    def __init__(self, share: Share, durations: Mapping[str, float], split_path: str | None):
        self.share = share
        self.durations = dict(durations)
        self.split_path = split_path

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # trylast: -k, -m and the project's own hooks have selected and ordered already.
        test_ids = [item.nodeid for item in items]
        config.stash[SELECTION_SIZE] = len(test_ids)
        split = split_by_module(test_ids, self.durations, self.share.workers)
        mine = set(split[self.share.worker - 1])
        kept = [item for item in items if item.nodeid in mine]
        others = [item for item in items if item.nodeid not in mine]
        if self.split_path:
            document: dict[str, Any] = {
                "schema": SPLIT_SCHEMA,
                "worker": self.share.worker,
                "workers": self.share.workers,
                "bins": [list(part) for part in split],
            }
            write_json_atomic(self.split_path, document)
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = kept


def register_share(config: pytest.Config) -> None:
    """Register :class:`WorkerShare` when ``$REPLAY_WORKER`` names a share; else nothing."""
    raw = os.environ.get(WORKER_ENV, "").strip()
    if not raw:
        return
    try:
        share = parse_share(raw)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    durations = read_durations(os.environ.get(DURATIONS_ENV))
    plugin = WorkerShare(share, durations, os.environ.get(SPLIT_ENV) or None)
    config.pluginmanager.register(plugin, "replay-worker-share")
