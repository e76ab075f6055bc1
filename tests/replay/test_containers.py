"""The container adapter against the real engine: deadline, signals, OOM, sweep, image loss,
and a side that fails in the tool itself."""

from __future__ import annotations

import ast
import contextlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.scratch_git import commit, init

from orchestrator.adapters import docker as docker_adapter
from orchestrator.core.labels import ReplayFile, label_replay
from orchestrator.core.progress import SideProgress
from orchestrator.services import sides

pytestmark = pytest.mark.docker


def _config(image_id: str, name: str, command: list[str], labels: dict[str, str], **limits):
    return docker_adapter.container_config(
        image_id=image_id,
        name=name,
        command=command,
        mounts=[],
        environment={},
        labels=labels,
        limits=docker_adapter.Limits(**limits),
        working_dir="/tmp",
    )


@pytest.fixture
def owner() -> docker_adapter.Owner:
    return docker_adapter.Owner.current(sides.new_run_id())


@pytest.fixture
def made(docker_client, owner):
    """Create and start containers through the adapter; each is removed when the test ends."""
    with contextlib.ExitStack() as stack:

        def make(image_id: str, command: list[str], suffix: str, **limits):
            config = _config(
                image_id,
                f"orchestrator-test-{owner.run_id}-{suffix}",
                command,
                owner.labels("t"),
                **limits,
            )
            return stack.enter_context(docker_adapter.Container(docker_client, config))

        yield make
    assert _ours(docker_client, owner.run_id) == []


def _ours(client, run_id: str) -> list[str]:
    return [
        c.name
        for c in client.containers.list(
            all=True, filters={"label": f"{docker_adapter.LABEL_RUN}={run_id}"}
        )
    ]


def test_past_our_deadline_the_container_is_killed_and_labelled_timeout(
    docker_client, runner_image_id, made
):
    container = made(runner_image_id, ["sleep", "60"], "deadline")
    started = time.monotonic()
    exit_ = container.wait(deadline=started + 1.0, poll_s=0.3)
    assert time.monotonic() - started < 15
    assert exit_.killed_at_deadline
    facts = container.facts(exit_)
    assert facts.image_id == runner_image_id
    replay = label_replay(ReplayFile(replay=1, state="missing"), facts, "t.py::t")
    assert (replay.label, replay.reason) == ("timeout", "deadline")


def test_a_signal_we_did_not_send_is_harness_error_signal(docker_client, runner_image_id, made):
    command = ["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    container = made(runner_image_id, command, "signal")
    exit_ = container.wait(deadline=time.monotonic() + 30)
    facts = container.facts(exit_)
    assert not facts.killed_at_deadline
    assert facts.exit_code == 137
    replay = label_replay(ReplayFile(replay=1, state="missing"), facts, "t.py::t")
    assert (replay.label, replay.reason) == ("harness_error", "signal")


def test_past_the_memory_limit_is_harness_error_oom(docker_client, runner_image_id, made):
    command = [
        "python3",
        "-c",
        "x = bytearray(400 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096])",
    ]
    container = made(runner_image_id, command, "oom", memory="64m")
    exit_ = container.wait(deadline=time.monotonic() + 60)
    facts = container.facts(exit_)
    assert facts.oom_killed
    replay = label_replay(ReplayFile(replay=1, state="missing"), facts, "t.py::t")
    assert (replay.label, replay.reason) == ("harness_error", "oom")


def test_the_container_runs_hermetic(docker_client, runner_image_id, made):
    probe = (
        "import os, socket, pathlib\n"
        "print('uid', os.getuid())\n"
        "print('env', sorted(os.environ))\n"
        "try:\n"
        "    pathlib.Path('/etc/x').write_text('x'); print('root writable')\n"
        "except OSError: print('root read-only')\n"
        "pathlib.Path('/tmp/x').write_text('x'); print('tmp writable')\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2); print('network')\n"
        "except OSError: print('no network')\n"
    )
    container = made(runner_image_id, ["python3", "-c", probe], "hermetic")
    lines: list[str] = []
    reader = container.follow_logs(lines.append)
    container.wait(deadline=time.monotonic() + 30)
    reader.join()  # the stream ends when the container does
    output = "\n".join(lines)
    assert "uid 1000" in output
    assert "root read-only" in output
    assert "tmp writable" in output
    assert "no network" in output
    env_line = next(line for line in output.splitlines() if line.startswith("env"))
    names = set(ast.literal_eval(env_line[len("env ") :]))
    image_env = docker_client.images.get(runner_image_id).attrs["Config"].get("Env") or []
    allowed = {item.split("=", 1)[0] for item in image_env} | {"HOSTNAME", "HOME"}
    assert names <= allowed, names - allowed  # nothing from the host's environment


def test_sweep_removes_a_dead_owners_container_and_keeps_a_live_ones(
    docker_client, runner_image_id, made, owner
):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ghost_labels = {**owner.labels("t"), docker_adapter.LABEL_PID: str(dead.pid)}
    ghost_name = f"orchestrator-test-{owner.run_id}-ghost"
    # Left behind as a killed run leaves it: created, never removed by its owner.
    docker_client.containers.create(**_config(runner_image_id, ghost_name, ["true"], ghost_labels))
    live = made(runner_image_id, ["sleep", "60"], "live")
    removed = docker_adapter.sweep_leftovers(docker_client, host=owner.host)
    # Another run starting at the same moment may sweep the ghost first: what matters is
    # that it is gone and that the live run's container is still there.
    assert live.name not in removed
    assert _ours(docker_client, owner.run_id) == [live.name]
    # The low-level list: containers.list inspects each one, and another run's container
    # removed meanwhile would fail that inspection (404).
    names = {
        name.lstrip("/") for c in docker_client.api.containers(all=True) for name in c["Names"]
    }
    assert ghost_name not in names


def test_an_image_gone_before_start_is_harness_error_and_never_pulled(
    docker_client, tmp_path, monkeypatch, docker_backend
):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    repo = init(tmp_path / "repo")
    sha = commit(repo, {"tests/test_a.py": "def test_a():\n    assert True\n"}, "c")
    missing = "sha256:" + "0" * 64
    plan = sides.ReplayPlan(
        image_id=missing,
        pytest_args=(),
        property_ids=("tests/test_a.py::test_a",),
        fixture=None,
        replays=2,
        timeout_s=10,
        seed=0,
        runner_id="local",
    )
    specs = [sides.SideSpec(name=n, repo=repo, rev=sha) for n in ("base", "patch")]
    run_id = sides.new_run_id()
    labelled = sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id).labelled
    for side in ("base", "patch"):
        replays = labelled[side]["tests/test_a.py::test_a"]
        assert [(r.label, r.reason) for r in replays] == [("harness_error", "image_not_found")] * 2
    assert _ours(docker_client, run_id) == []
    assert [p for p in Path(tmp_path).iterdir() if p.name.startswith("orchestrator-replay-")] == []
    assert not any(missing in (image.id or "") for image in docker_client.images.list())


def _lib_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = init(tmp_path / "lib-repo")
    sha = commit(
        repo,
        {
            "conftest.py": "",
            "lib.py": "def double(x):\n    return 2 * x\n",
            "tests/test_lib.py": (
                "import lib\n\n\ndef test_double():\n    assert lib.double(3) == 6\n"
            ),
        },
        "c",
    )
    return repo, sha


MUTANT = (
    "--- a/lib.py\n+++ b/lib.py\n@@ -1,2 +1,2 @@\n"
    " def double(x):\n-    return 2 * x\n+    return 3 * x\n"
)


def test_a_side_with_a_mutant_runs_the_mutated_sources(
    docker_client, runner_image_id, tmp_path, monkeypatch, docker_backend
):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    repo, sha = _lib_repo(tmp_path)
    mutant = tmp_path / "mutant.diff"
    mutant.write_text(MUTANT)
    plan = sides.ReplayPlan(
        image_id=runner_image_id,
        pytest_args=("-q",),
        property_ids=("tests/test_lib.py::test_double",),
        fixture=None,
        replays=2,
        timeout_s=30,
        seed=0,
        runner_id="local",
    )
    specs = [
        sides.SideSpec(name="original", repo=repo, rev=sha),
        sides.SideSpec(name="mutant", repo=repo, rev=sha, mutant=mutant),
    ]
    seen: list[SideProgress] = []
    labelled = sides.run_sides(plan, specs, backend=docker_backend, progress=seen.append).labelled
    assert [r.label for r in labelled["original"]["tests/test_lib.py::test_double"]] == [
        "assert_pass"
    ] * 2
    assert [r.label for r in labelled["mutant"]["tests/test_lib.py::test_double"]] == [
        "assert_fail"
    ] * 2
    # Each test's line arrives while its side runs, before the replay that ran it ends.
    for side, failures in (("original", 0), ("mutant", 1)):
        counts = [
            (p.tests_done, p.replays_done, p.failures, p.tests_total)
            for p in seen
            if p.side == side
        ]
        assert counts == [
            (1, 0, failures, 2),
            (1, 1, failures, 2),
            (2, 1, 2 * failures, 2),
            (2, 2, 2 * failures, 2),
        ]
    assert [p for p in tmp_path.iterdir() if p.name.startswith("orchestrator-replay-")] == []


def test_a_mutant_that_does_not_apply_is_bad_input_and_leaves_nothing(
    docker_client, runner_image_id, tmp_path, monkeypatch, docker_backend
):
    from orchestrator.errors import InputError

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    repo, sha = _lib_repo(tmp_path)
    mutant = tmp_path / "mutant.diff"
    mutant.write_text(MUTANT.replace("2 * x", "5 * x"))
    plan = sides.ReplayPlan(
        image_id=runner_image_id,
        pytest_args=(),
        property_ids=("tests/test_lib.py::test_double",),
        fixture=None,
        replays=1,
        timeout_s=30,
        seed=0,
        runner_id="local",
    )
    specs = [
        sides.SideSpec(name="original", repo=repo, rev=sha),
        sides.SideSpec(name="mutant", repo=repo, rev=sha, mutant=mutant),
    ]
    run_id = sides.new_run_id()
    with pytest.raises(InputError, match="does not apply"):
        sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id)
    assert _ours(docker_client, run_id) == []
    assert [p for p in tmp_path.iterdir() if p.name.startswith("orchestrator-replay-")] == []


def test_a_fixture_that_vanished_is_bad_input_at_once(
    docker_client, runner_image_id, tmp_path, monkeypatch, docker_backend
):
    from orchestrator.errors import InputError

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    repo, sha = _lib_repo(tmp_path)
    fixture = tmp_path / "fixture.json"
    fixture.write_text("{}")
    plan = sides.ReplayPlan(
        image_id=runner_image_id,
        pytest_args=(),
        property_ids=("tests/test_lib.py::test_double",),
        fixture=fixture,
        replays=1,
        timeout_s=30,
        seed=0,
        runner_id="local",
    )
    fixture.unlink()  # gone after planning, before the run
    started = time.monotonic()
    with pytest.raises(InputError, match="fixture"):
        sides.run_sides(
            plan, [sides.SideSpec(name="base", repo=repo, rev=sha)], backend=docker_backend
        )
    assert time.monotonic() - started < 20
    assert [p for p in tmp_path.iterdir() if p.name.startswith("orchestrator-replay-")] == []


def test_a_side_that_fails_in_the_tool_is_internal_error_not_docker_api(
    docker_client, runner_image_id, tmp_path, monkeypatch, docker_backend
):
    from orchestrator.errors import ExitCode, InternalError

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    repo, sha = _lib_repo(tmp_path)
    plan = sides.ReplayPlan(
        image_id=runner_image_id,
        pytest_args=("-q",),
        property_ids=("tests/test_lib.py::test_double",),
        fixture=None,
        replays=2,
        timeout_s=30,
        seed=0,
        runner_id="local",
    )
    raw = tmp_path / "raw"
    # The broken side's raw copy cannot be written: a directory stands in its place.
    (raw / "broken" / "replay-001.json").mkdir(parents=True)
    specs = [sides.SideSpec(name=n, repo=repo, rev=sha) for n in ("fine", "broken")]
    run_id = sides.new_run_id()
    with pytest.raises(InternalError) as caught:
        sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id, keep_raw=raw)
    error = caught.value
    assert error.exit_code == ExitCode.UNDECIDED
    assert "\n" not in str(error)
    assert "internal error in side broken: IsADirectoryError" in str(error)
    assert "IsADirectoryError" in (raw / "broken" / "internal-error.txt").read_text()
    assert not (raw / "fine" / "internal-error.txt").exists()
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []
