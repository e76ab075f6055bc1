"""Probe result files -> :class:`~orchestrator.core.labels.ReplayFile`. Never trusts a
missing or half-written file.

This is the only place that reads ``replay-<k>.json``: it reports a file as ``ok``,
``missing`` or ``corrupt`` and never raises for one. Labelling what the files say
(together with the engine's facts) is pure and lives in :mod:`orchestrator.core.labels`.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.core.labels import ReplayFile, run_doc_problem


def replay_file_name(replay: int) -> str:
    return f"replay-{replay:03d}.json"


def read_replay_file(path: Path, replay: int) -> ReplayFile:
    """Read one result file; a missing, unreadable or half file is reported, not raised."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ReplayFile(replay=replay, state="missing")
    except OSError as error:
        return ReplayFile(replay=replay, state="corrupt", problem=error.strerror)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return ReplayFile(replay=replay, state="corrupt", problem=f"not JSON: {error}")
    problem = run_doc_problem(doc)
    if problem is not None:
        return ReplayFile(replay=replay, state="corrupt", problem=problem)
    return ReplayFile(replay=replay, state="ok", doc=doc)


def read_replay_files(out_dir: Path, replays: int) -> tuple[ReplayFile, ...]:
    return tuple(read_replay_file(out_dir / replay_file_name(k), k) for k in range(1, replays + 1))
