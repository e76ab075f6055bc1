"""The probe under a project's own pytest: pytest 8 with pluggy 1.5 and pytest 9 with the
newest pluggy, each in a project image's venv (pytest 7.2 with pluggy 1.0, Debian's, is
the runner image: tests/probe/test_probe_in_runner.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from image_project import (
    build_args,
    by_property,
    commit,
    init,
    orchestrator,
    pip_env,
    remove_images,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE = """\
import socket
import time
from time import sleep

import pytest


def normalize_event(payload, now):
    return {**payload, "seen": now()}


def test_clock_budget(deps):
    clock = deps.clock()
    normalize_event({"id": "evt-1"}, now=clock)
    assert clock.calls == 1


def test_seed(replay_seed):
    assert replay_seed == 0


def test_effects(tmp_path):
    (tmp_path / "a").write_text("a")
    with open(tmp_path / "a") as handle:
        handle.read()
    sleep(0)
    time.sleep(0)


def test_network():
    socket.create_connection(("192.0.2.10", 80), timeout=1)


class TestKeyed:
    def test_keyed(self):
        event = normalize_event({}, now=lambda: 1)
        assert event == {}


def test_writes_its_tree():
    with open("out.txt", "w") as handle:
        handle.write("x")


@pytest.fixture
def broken():
    raise RuntimeError("set-up failed")


def test_setup_error(broken):
    pass


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass
"""

VERSIONS = {
    "pytest8": (("--pip", "pytest==8.3.5", "--pip", "pluggy==1.5.0"), "8.3.5"),
    "pytest9": (("--pip", "pytest>=9,<10", "--pip", "pluggy>=1.6"), "9."),
}


@pytest.fixture(scope="module")
def probe_repo(tmp_path_factory: pytest.TempPathFactory):
    repo = init(tmp_path_factory.mktemp("probe") / "repo")
    sha = commit(
        repo,
        {"pyproject.toml": '[project]\nname = "probesuite"\n', "test_suite.py": SUITE},
        "suite",
    )
    return repo, sha


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def versioned_image(
    request: pytest.FixtureRequest, probe_repo, docker_client: Any, wheelhouse_cache
) -> Iterator[tuple[str, str, str]]:
    repo, sha = probe_repo
    pins, expected = VERSIONS[request.param]
    done = orchestrator(*build_args(repo, "--rev", sha, *pins), env=pip_env())
    report = done.json()
    try:
        yield report["image_id"], expected, report
    finally:
        remove_images(docker_client, [report["image_id"]])


def test_the_probe_labels_and_counts_under_the_projects_pytest(
    versioned_image, probe_repo, tmp_path
):
    image_id, expected, report = versioned_image
    pluggy = {p["name"]: p["version"] for p in report["packages"]}["pluggy"]
    repo, sha = probe_repo
    out = tmp_path / "run"
    done = orchestrator(
        "replay", "--repo", str(repo), "--base", sha, "--patch", sha, "--image", image_id,
        "--replays", "1", "--no-record", "--out", str(out), "--json",
    )  # fmt: skip
    decisions = by_property(done.json())
    raw = json.loads((out / "raw" / "base" / "replay-001.json").read_text())
    assert raw["result"]["pytest"].startswith(expected), pluggy

    def label(name: str) -> tuple[str, str | None]:
        return decisions[name]["base_labels"][0], decisions[name]["base_reasons"][0]

    assert label("test_clock_budget") == ("assert_pass", None)
    assert decisions["test_clock_budget"]["calls_base"]["clock"] == [1]
    assert label("test_seed") == ("assert_pass", None)
    assert label("test_effects") == ("assert_pass", None)
    assert decisions["test_effects"]["calls_base"]["open"] == [2]
    assert decisions["test_effects"]["calls_base"]["sleep"] == [2]
    assert label("test_network") == ("harness_error", "impure_network")
    assert label("test_keyed") == ("assert_fail", None)
    assert label("test_writes_its_tree") == ("harness_error", "read_only_tree")
    assert label("test_setup_error") == ("harness_error", "setup_error")
    assert label("test_xpass_strict") == ("assert_fail", None)
    entries = {entry["nodeid"]: entry for entry in raw["result"]["tests"]}
    keyed = entries["test_suite.py::TestKeyed::test_keyed"]
    assert keyed["assertion_key"] == (
        "test_suite.py::TestKeyed::test_keyed@TestKeyed.test_keyed+2:AssertionError"
    )
    writes = entries["test_suite.py::test_writes_its_tree"]
    assert writes["read_only"] == {"path": "/src/out.txt", "in_rootdir": True}
