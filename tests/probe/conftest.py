"""Helpers for probe tests: run pytest under the probe in-process and read its result."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Imported once for the whole test process, so every in-process run shares one audit
# hook and one sleep wrapper instead of stacking a new pair per run.
import orchestrator.probe.plugin  # noqa: F401

PLUGIN = "orchestrator.probe.plugin"
# The plugin is already imported here, so the inner session cannot rewrite it.
NO_REWRITE_WARNING = "ignore::pytest.PytestAssertRewriteWarning"
# Hypothesis's plugin re-imports (and re-rewrites) hypothesis in every inner session:
# seconds per run, and nothing the probe needs.
INNER_OPTIONS = (
    "-p",
    PLUGIN,
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-W",
    NO_REWRITE_WARNING,
)

ProbeRun = Callable[..., dict[str, Any]]


@pytest.fixture
def probe_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> ProbeRun:
    """Run pytest with the probe inside this process; return the replay-probe/1 document."""
    counter = iter(range(1, 1000))

    def run(*args: str, seed: int | None = None, fixture: Path | None = None) -> dict[str, Any]:
        result_path = pytester.path / f"result-{next(counter)}.json"
        monkeypatch.setenv("REPLAY_RESULT", str(result_path))
        if seed is None:
            monkeypatch.delenv("REPLAY_SEED", raising=False)
        else:
            monkeypatch.setenv("REPLAY_SEED", str(seed))
        if fixture is None:
            monkeypatch.delenv("REPLAY_FIXTURE", raising=False)
        else:
            monkeypatch.setenv("REPLAY_FIXTURE", str(fixture))
        pytester.runpytest_inprocess(*INNER_OPTIONS, *args)
        document: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
        return document

    return run
