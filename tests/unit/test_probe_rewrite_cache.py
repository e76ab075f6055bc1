"""The driver's cache of rewritten test modules (orchestrator/probe/rewrite_cache.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from orchestrator.probe.rewrite_cache import cached_rewrite


class Config:
    def __init__(self, pass_hook: bool = False) -> None:
        self.pass_hook = pass_hook

    def getini(self, name: str) -> Any:
        assert name == "enable_assertion_pass_hook"
        return self.pass_hook


def counting_original(calls: list[Path]) -> Any:
    def original(fn: Path, config: Any) -> tuple[Any, CodeType]:
        calls.append(fn)
        return "stat", compile(fn.read_text(), str(fn), "exec")

    return original


@pytest.fixture
def no_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)


def test_a_module_is_rewritten_once_then_loaded(tmp_path: Path, no_bytecode: None) -> None:
    module = tmp_path / "test_m.py"
    module.write_text("X = 1\n")
    calls: list[Path] = []
    rewrite = cached_rewrite(counting_original(calls), tmp_path / "cache", "9.9")
    (tmp_path / "cache").mkdir()
    first = rewrite(module, Config())
    again = rewrite(module, Config())
    assert calls == [module]
    namespace: dict[str, Any] = {}
    exec(again[1], namespace)
    assert namespace["X"] == 1
    assert first[0] == "stat"  # what pytest returned, the first time


def test_new_content_another_option_or_pytest_rewrites_again(
    tmp_path: Path, no_bytecode: None
) -> None:
    module = tmp_path / "test_m.py"
    module.write_text("X = 1\n")
    calls: list[Path] = []
    (tmp_path / "cache").mkdir()
    rewrite = cached_rewrite(counting_original(calls), tmp_path / "cache", "9.9")
    rewrite(module, Config())
    module.write_text("X = 2\n")  # same size, other content
    namespace: dict[str, Any] = {}
    exec(rewrite(module, Config())[1], namespace)
    assert namespace["X"] == 2
    rewrite(module, Config(pass_hook=True))
    cached_rewrite(counting_original(calls), tmp_path / "cache", "10.0")(module, Config())
    assert len(calls) == 4


def test_nothing_is_cached_where_bytecode_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    module = tmp_path / "test_m.py"
    module.write_text("X = 1\n")
    calls: list[Path] = []
    (tmp_path / "cache").mkdir()
    rewrite = cached_rewrite(counting_original(calls), tmp_path / "cache", "9.9")
    rewrite(module, Config())
    rewrite(module, Config())
    assert len(calls) == 2
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_foreign_entry_or_a_cache_that_cannot_be_written_is_no_cache(
    tmp_path: Path, no_bytecode: None
) -> None:
    module = tmp_path / "test_m.py"
    module.write_text("X = 1\n")
    calls: list[Path] = []
    missing = tmp_path / "no-such-folder"
    rewrite = cached_rewrite(counting_original(calls), missing, "9.9")
    rewrite(module, Config())
    rewrite(module, Config())
    assert len(calls) == 2  # nothing kept, nothing broken
    cache = tmp_path / "cache"
    cache.mkdir()
    rewrite = cached_rewrite(counting_original(calls), cache, "9.9")
    rewrite(module, Config())
    (entry,) = cache.iterdir()
    entry.write_bytes(b"not marshal")
    namespace: dict[str, Any] = {}
    exec(rewrite(module, Config())[1], namespace)
    assert namespace["X"] == 1
    assert len(calls) == 4


@pytest.mark.parametrize(
    ("total_mib", "free_mib", "kept"),
    [
        (64, 60, True),  # a results tmpfs, nearly empty
        (64, 47, False),  # less than three quarters of it would stay free
        (252 * 1024, 78 * 1024, True),  # a large disk: 256 MiB must stay free
        (252 * 1024, 200, False),
    ],
)
def test_an_entry_is_written_only_while_the_results_keep_their_room(
    tmp_path: Path, no_bytecode: None, monkeypatch, total_mib: int, free_mib: int, kept: bool
) -> None:
    class Stats:
        f_frsize = 1024 * 1024
        f_blocks = total_mib
        f_bavail = free_mib

    monkeypatch.setattr("orchestrator.probe.rewrite_cache.os.statvfs", lambda _path: Stats())
    module = tmp_path / "test_m.py"
    module.write_text("X = 1\n")
    calls: list[Path] = []
    (tmp_path / "cache").mkdir()
    rewrite = cached_rewrite(counting_original(calls), tmp_path / "cache", "9.9")
    for _ in range(2):
        namespace: dict[str, Any] = {}
        exec(rewrite(module, Config())[1], namespace)
        assert namespace["X"] == 1
    assert len(calls) == (1 if kept else 2)
    assert len(list((tmp_path / "cache").iterdir())) == (1 if kept else 0)
