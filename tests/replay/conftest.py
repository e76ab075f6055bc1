"""Fixtures shared by the replay tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The run's scratch folders go to a folder of the test's own (what is left there
    after a run is the run's)."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr("tempfile.tempdir", None)
    return folder
