"""Recorded test durations, kept between runs of the same repository.

One file per repository, ``<root>/.replay/durations/<key>.json`` (``replay-durations/1``,
docs/records.md), where ``<root>`` is the folder whose ``.replay/runs/`` holds the run
folders (the working directory of ``replay``) and ``<key>`` is the repository's mainline
root commit (:func:`repository_key`: the same in every clone). Each run reads the file
when it is planned (to split tests across workers and order work longest first) and,
once it has decided, folds what it measured into it (:func:`record_durations`); the
run folder keeps its own measurements as ``durations.json``. The pure rules (what a run
measured, how records merge, how they schedule) are :mod:`orchestrator.core.schedule`.

A missing, unreadable or foreign file is no record (every test counts the same); it is
never an error, because durations only decide where and in which order tests run, never a
label or a lane. Two runs that finish at once both write the file atomically; the later
one wins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.core.schedule import (
    durations_document,
    merge_durations,
    parse_durations_document,
)
from orchestrator.errors import SchemaError
from orchestrator.log import get_logger

log = get_logger(__name__)

DURATIONS_FOLDER = Path(".replay") / "durations"
RUN_FILE = "durations.json"  # in the run folder: what that run measured


def repository_key(repo: Path, rev: str) -> str:
    """The key a repository's durations are kept under: its mainline root commit."""
    return git_adapter.mainline_root(repo, rev)


def store_path(root: Path, key: str) -> Path:
    """``<root>/.replay/durations/<key>.json``."""
    return root / DURATIONS_FOLDER / f"{key}.json"


def read_durations(path: Path) -> dict[str, float]:
    """Node id -> milliseconds recorded in ``path``; empty when there is no usable record."""
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        log.warning("durations.unreadable", path=str(path), error=str(error))
        return {}
    try:
        return parse_durations_document(document)
    except SchemaError as error:
        log.warning("durations.ignored", path=str(path), error=str(error))
        return {}


def record_durations(
    path: Path, key: str, measured: Mapping[str, float], *, now: datetime
) -> dict[str, float]:
    """Fold ``measured`` into the record at ``path`` (re-read now, so a run that finished
    meanwhile keeps its tests) and write it atomically; the merged record."""
    merged = merge_durations(read_durations(path), measured)
    files.write_json_atomic(path, durations_document(key, merged, now))
    return merged


def write_run_durations(
    run_dir: Path, key: str, measured: Mapping[str, float], *, now: datetime
) -> Path:
    """``<run_dir>/durations.json``: what one run measured (a shard's share, to merge)."""
    path = run_dir / RUN_FILE
    files.write_json_atomic(path, durations_document(key, measured, now))
    return path
