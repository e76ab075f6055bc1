"""The probe inside the real runner image: Debian's Python 3.11.2 and pytest 7.2, no network,
read-only root, uid 1000. Only the standard library and pytest are available there."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator.probe import PROBE_VERSION

pytestmark = pytest.mark.docker

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "orchestrator"

SUITE = """
    import socket
    import time
    from time import sleep

    def normalize_event(payload, now):
        return {**payload, "seen": now()}

    def test_clock_budget(deps):
        clock = deps.clock()
        normalize_event({"id": "evt-1"}, now=clock)
        assert clock.calls == 1

    def test_fails(replay_seed):
        assert replay_seed == 0

    def test_effects(tmp_path):
        (tmp_path / "a").write_text("a")
        with open(tmp_path / "a") as handle:
            handle.read()
        sleep(0)
        time.sleep(0)

    def test_network():
        socket.create_connection(("192.0.2.10", 80), timeout=1)

    def test_own_name():
        # the container's own name (its id), as socket.getfqdn() and email's
        # make_msgid() look it up: no network, a plain pass
        import email.utils
        assert socket.getfqdn()
        assert email.utils.make_msgid().endswith(">")

    class TestKeyed:
        def test_keyed(self):
            event = normalize_event({}, now=lambda: 1)
            assert event == {}
"""


def run_in_runner(
    docker_client: Any, image_id: str, project: Path, out: Path, *driver_args: str
) -> int:
    out.mkdir()
    out.chmod(0o777)  # the container writes as uid 1000
    container = docker_client.containers.run(
        image_id,
        ["python3", "-m", "orchestrator.probe.replay", "--out", "/out", *driver_args],
        detach=True,
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,exec"},
        user="1000",
        working_dir="/work",
        environment={
            "PYTHONPATH": "/probe",
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": "/tmp",
            "REPLAY_SEED": "3",
        },
        volumes={
            str(PACKAGE_DIR): {"bind": "/probe/orchestrator", "mode": "ro"},
            str(project): {"bind": "/work", "mode": "ro"},
            str(out): {"bind": "/out", "mode": "rw"},
        },
    )
    try:
        status: dict[str, Any] = container.wait(timeout=120)
        return int(status["StatusCode"])
    finally:
        container.remove(force=True)


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_labels_and_counts_inside_the_runner_image(docker_client, runner_image_id, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_suite.py").write_text(textwrap.dedent(SUITE))
    out = tmp_path / "out"
    code = run_in_runner(
        docker_client, runner_image_id, project, out,
        "--replays", "2", "--timeout", "60", "--seed", "0", "--", "test_suite.py",
    )  # fmt: skip
    assert code == 0
    assert load(out / "driver.json")["finished"] is True
    for k in (1, 2):
        run = load(out / f"replay-{k:03d}.json")
        assert run["status"] == "completed"
        result = run["result"]
        assert result["probe_version"] == PROBE_VERSION
        assert result["python"].startswith("3.11")
        assert result["pytest"].startswith("7.")
        entries = {entry["nodeid"].split("::")[1]: entry for entry in result["tests"]}
        assert entries["test_clock_budget"]["label"] == "assert_pass"
        assert entries["test_clock_budget"]["calls"]["clock"] == 1
        assert entries["test_fails"]["label"] == "assert_pass"  # --seed 0 wins over the env
        effects = entries["test_effects"]["calls"]
        assert (effects["open"], effects["sleep"]) == (2, 2)  # write_text and open
        network = entries["test_network"]
        assert (network["label"], network["reason"]) == ("harness_error", "impure_network")
        own_name = entries["test_own_name"]
        assert (own_name["label"], own_name["reason"]) == ("assert_pass", None)
        assert own_name["calls"]["socket"] >= 2  # counted, as a loopback call is
        keyed = {e["nodeid"]: e for e in result["tests"]}["test_suite.py::TestKeyed::test_keyed"]
        assert keyed["label"] == "assert_fail"
        assert keyed["assertion_key"] == (
            "test_suite.py::TestKeyed::test_keyed@TestKeyed.test_keyed+2:AssertionError"
        )


def test_timeout_inside_the_runner_image(docker_client, runner_image_id, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(600)\n")
    out = tmp_path / "out"
    code = run_in_runner(
        docker_client, runner_image_id, project, out,
        "--replays", "1", "--timeout", "2", "--", "test_hang.py",
    )  # fmt: skip
    assert code == 0
    run = load(out / "replay-001.json")
    assert (run["status"], run["result"]) == ("timeout", None)
