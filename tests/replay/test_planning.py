"""Pure planning pieces of the replay: no engine, no git."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import host as host_adapter
from orchestrator.commands import _option_groups as groups
from orchestrator.core import side_spec as sides
from orchestrator.core.durations import parse_expiry
from orchestrator.core.neutralise import neutraliser_args
from orchestrator.core.replay_run import Pins, ReplayOptions, RunPlan
from orchestrator.errors import InputError
from orchestrator.services import replay_plan as service
from orchestrator.services.sides import side_run

PLAN = sides.ReplayPlan(
    image_id="sha256:" + "a" * 64,
    pytest_args=("-q",),
    property_ids=("tests/test_x.py::test_y",),
    fixture=Path("/tmp/fixture.json"),
    replays=3,
    timeout_s=7.5,
    seed=11,
    runner_id="ci-7",
)


def test_driver_command_runs_the_probe_driver_with_the_plan():
    command = sides.driver_command(PLAN, 3)
    assert command[:3] == ["python3", "-m", "orchestrator.probe.replay"]
    separator = command.index("--")
    options = command[:separator]
    assert options[options.index("--replays") + 1] == "3"
    assert options[options.index("--timeout") + 1] == "7.5"
    assert options[options.index("--seed") + 1] == "11"
    assert options[options.index("--out") + 1] == sides.OUT
    assert command[separator + 1 :] == [
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        "-q",
        *neutraliser_args(11),  # after the command's options (lanes.md section 12)
        "--",  # node ids are never read as options
        "tests/test_x.py::test_y",
    ]


def test_environment_holds_only_the_replays_own_variables():
    env = sides.replay_environment(PLAN)
    assert env == {
        "REPLAY_SEED": "11",
        "REPLAY_FIXTURE": sides.FIXTURE,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": sides.PROBE_ROOT,
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "HYPOTHESIS_STORAGE_DIRECTORY": "/tmp/hypothesis",
    }
    assert "TZ" not in env
    without_fixture = sides.replay_environment(
        sides.ReplayPlan(**{**PLAN.__dict__, "fixture": None})
    )
    assert "REPLAY_FIXTURE" not in without_fixture


def test_env_adds_variables_and_a_sides_import_roots_come_before_the_probe():
    plan = sides.ReplayPlan(**{**PLAN.__dict__, "env": (("TZ", "Europe/Paris"), ("HOME", "/h"))})
    env = sides.replay_environment(plan, ("src", "lib/x", "/opt/abs"))
    assert env["TZ"] == "Europe/Paris"
    assert env["HOME"] == "/h"
    assert env["PYTHONPATH"] == f"/src/src:/src/lib/x:/opt/abs:{sides.PROBE_ROOT}"


def test_driver_makes_home_and_with_a_writable_tree_copies_the_tree():
    command = sides.driver_command(PLAN, 1)
    options = command[: command.index("--")]
    made = [options[i + 1] for i, arg in enumerate(options) if arg == "--make-dir"]
    assert made == ["/tmp/home"]
    assert "--copy-tree" not in options
    writable = sides.ReplayPlan(**{**PLAN.__dict__, "writable_tree": True})
    options = sides.driver_command(writable, 1)
    assert options[options.index("--copy-tree") + 1] == f"{sides.TREE}:{sides.SRC}"


def test_the_interpreter_comes_from_the_plan():
    plan = sides.ReplayPlan(**{**PLAN.__dict__, "interpreter": "/opt/venv/bin/python"})
    assert sides.driver_command(plan, 1)[0] == "/opt/venv/bin/python"


def test_container_config_is_hermetic():
    config = docker_adapter.container_config(
        image_id=PLAN.image_id,
        name="orchestrator-x",
        command=["true"],
        mounts=[
            docker_adapter.Mount(source=Path("/a"), target="/src"),
            docker_adapter.Mount(source=Path("/b"), target="/replay/out", read_only=False),
        ],
        environment={"REPLAY_SEED": "0"},
        labels={"orchestrator.replay": "1"},
        limits=docker_adapter.Limits(memory="256m", pids=64, cpus=0.5),
    )
    assert config["image"] == PLAN.image_id
    assert config["network_mode"] == "none"
    assert config["read_only"] is True
    assert set(config["tmpfs"]) == {"/tmp"}
    assert config["user"] == "1000:1000"
    assert config["cap_drop"] == ["ALL"]
    assert config["security_opt"] == ["no-new-privileges"]
    assert config["mem_limit"] == config["memswap_limit"] == "256m"
    assert config["pids_limit"] == 64
    assert config["nano_cpus"] == 500_000_000
    assert config["init"] is True
    assert "auto_remove" not in config
    assert config["environment"] == {"REPLAY_SEED": "0"}
    assert config["volumes"] == {
        "/a": {"bind": "/src", "mode": "ro"},
        "/b": {"bind": "/replay/out", "mode": "rw"},
    }
    # What the tree can spend on the host through the engine is capped too.
    assert config["log_config"]["Type"] == "json-file"
    assert config["log_config"]["Config"] == {"max-size": "1m", "max-file": "1"}
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in config["ulimits"]}
    assert ulimits == {
        "fsize": (1024**3, 1024**3),
        "nofile": (4096, 4096),
        "nproc": (8192, 8192),
    }


def test_a_sides_container_mounts_nothing_writable_and_results_go_to_a_capped_tmpfs(tmp_path):
    """Every mount of a side's container is read-only: the results folder is a tmpfs
    in the container, and its own process only idles (the driver runs with exec)."""
    writable = sides.ReplayPlan(**{**PLAN.__dict__, "writable_tree": True})
    job = side_run.side_job(
        writable,
        name="orchestrator-x",
        labels={},
        mounts=side_run.side_mounts(tmp_path, None, writable_tree=True),
        tree=tmp_path,
        pythonpath=["/src"],
    )
    config = docker_adapter.job_config(job)
    assert all(mount["mode"] == "ro" for mount in config["volumes"].values())
    assert config["tmpfs"][sides.OUT] == sides.RESULTS_TMPFS
    assert "size=67108864" in sides.RESULTS_TMPFS
    assert "mode=1777" in sides.RESULTS_TMPFS
    assert sides.SRC in config["tmpfs"]  # the writable tree's copy
    assert config["command"] == ["sleep", "infinity"]


def test_the_writable_tree_tmpfs_is_sized_from_blocks_not_sizes(tmp_path):
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as handle:
        handle.truncate(10 * 1024**3)  # 10 GiB long, no blocks
    assert side_run.writable_tree_tmpfs(tmp_path).split(",")[4] == "size=64m"


def test_isolation_side_is_one_container_container_is_one_per_replay():
    assert sides.container_units(PLAN) == ((1, 2, 3),)
    per_replay = sides.ReplayPlan(**{**PLAN.__dict__, "isolation": "container"})
    assert sides.container_units(per_replay) == ((1,), (2,), (3,))


def test_side_deadline_grows_with_replays_and_timeout():
    assert sides.side_deadline_s(PLAN, 3) > 3 * PLAN.timeout_s
    assert sides.side_deadline_s(PLAN, 3) > sides.side_deadline_s(PLAN, 1)


def test_container_names_are_docker_safe():
    name = sides.container_name("20260101T000000Z-abc", "base side/1", 2)
    assert name == "orchestrator-20260101T000000Z-abc-base-side-1-2"


def _labels(host: str, pid: str, start: str = "") -> dict[str, str]:
    return {
        docker_adapter.LABEL_HOST: host,
        docker_adapter.LABEL_PID: pid,
        docker_adapter.LABEL_PID_START: start,
    }


def test_sweep_takes_only_dead_owners_on_this_host():
    def dead(pid, start=None):
        return False

    def alive(pid, start=None):
        return True

    assert docker_adapter.owner_gone(_labels("h", "12"), host="h", is_alive=dead)
    assert not docker_adapter.owner_gone(_labels("h", "12"), host="h", is_alive=alive)
    assert not docker_adapter.owner_gone(_labels("other", "12"), host="h", is_alive=dead)
    assert not docker_adapter.owner_gone(_labels("h", "x"), host="h", is_alive=dead)


def test_a_reused_pid_is_not_the_owner():
    import os

    me = os.getpid()
    assert host_adapter.pid_alive(me, host_adapter.process_start(me))
    assert not host_adapter.pid_alive(me, "not-my-start-time")


def _selection(**changes):
    return groups.Selection(repo=Path("/r"), base="a", patch="b", command="pytest -q", **changes)


@pytest.mark.parametrize(
    ("group", "problem"),
    [
        (groups.Scheduling(replays=0), "--replays"),
        (groups.Limits(timeout_s=0), "--timeout"),
        (groups.Scheduling(isolation="vm"), "--isolation"),
        (groups.FixtureAndShrink(shrink_report=Path("r.json")), "--shrink-report"),
        (groups.Scheduling(runner_id=" "), "--runner-id"),
        (_selection(property_ids=("not-a-node-id",)), "--property"),
        (_selection(property_ids=("tests/t.py::",)), "--property"),
        (_selection(property_ids=("tests/t.py::t",), changed=True), "--changed"),
        (groups.Oracle(test_paths=("tests/data",)), "--test-path"),
        (groups.Oracle(tests_from=" "), "--tests-from needs base, patch or a revision"),
        (groups.Oracle(tests_from="patch", test_paths=("../x",)), "--test-path '../x': expected"),
        (groups.FixtureAndShrink(shrink=True), "--shrink needs --fixture"),
        (groups.Recording(ledger="sqlite://", freeze=True), "--freeze needs --owner"),
        (groups.Recording(ledger="sqlite://", run_id="a b"), "--run-id"),
    ],
)
def test_bad_options_are_refused_naming_the_option(group, problem):
    with pytest.raises(InputError, match=problem):
        group.validate()


def test_shrink_report_must_describe_the_fixture():
    report = {
        "schema": "shrink-report/1",
        "minimal": {},
        "minimal_digest": "sha256:min",
        "origin_digest": "sha256:orig",
        "shrink_path": [{"op": "drop_key", "key": "x"}],
        "attempts": 2,
        "identical_minima": 2,
        "stable": True,
    }
    summary = service.shrink_from_report(report, "sha256:min")
    assert summary.origin_digest == "sha256:orig"
    assert summary.stable
    with pytest.raises(InputError, match="minimal digest"):
        service.shrink_from_report(report, "sha256:other")
    with pytest.raises(InputError, match="--shrink-report"):
        service.shrink_from_report({"schema": "nope"}, "sha256:min")


def test_the_sides_replay_exactly_what_the_run_pinned():
    options = ReplayOptions(
        repo=Path("/repo"),
        base="main",
        patch="HEAD",
        image="orchestrator-runner:latest",
        property_ids=("tests/t.py::test_a",),
        fixture=Path("/tmp/fixture.json"),
        replays=3,
        timeout_s=7.5,
        seed=11,
        runner_id="ci-7",
        isolation="container",
    )
    pins = Pins(
        base_rev="1" * 40,
        patch_rev="2" * 40,
        image_ref=options.image,
        image_id=PLAN.image_id,
        repo_digests=(),
        fixture_digest="sha256:f",
        origin_digest="sha256:f",
        shrink=None,
        probe_version="1.0.0",
    )
    plan = RunPlan(
        run_id="r1",
        run_dir=Path("/runs/r1"),
        started_at=datetime(2026, 1, 2, tzinfo=UTC),
        options=options,
        pins=pins,
        pytest_args=("-q",),
    )
    plan_for_sides = service.sides_plan(plan)
    assert plan_for_sides == sides.ReplayPlan(
        image_id=PLAN.image_id,
        pytest_args=("-q",),
        property_ids=("tests/t.py::test_a",),
        fixture=Path("/runs/r1/fixture.json"),  # the run folder's copy: what was digested
        replays=3,
        timeout_s=7.5,
        seed=11,
        runner_id="ci-7",
        isolation="container",
        interpreter="python3",
        expand_parametrized=True,
    )


@pytest.mark.parametrize(
    ("text", "hours"),
    [
        ("72h", 72),
        ("3d", 72),
        ("1.5h", 1.5),
        ("2026-01-05T03:04:05Z", 72),
        ("2026-01-05T03:04:05", 72),
    ],
)
def test_expiry_is_an_instant_or_a_duration_from_now(text, hours):
    from datetime import timedelta

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_expiry(text, now) == now + timedelta(hours=hours)


@pytest.mark.parametrize("text", ["", "soon", "h", "-3d", "2026-13-01"])
def test_a_bad_expiry_is_bad_input(text):
    with pytest.raises(InputError, match="--expires"):
        parse_expiry(text, datetime(2026, 1, 1, tzinfo=UTC))


def test_each_side_gets_the_overlay_and_the_node_ids_it_has():
    from orchestrator.core.test_files import plan_overlay, rule_for_tests

    new, old = "tests/t.py::test_new", "tests/t.py::test_a"
    overlay = plan_overlay(
        ref="patch",
        rev="2" * 40,
        rule=rule_for_tests((new,), (), ()),
        tests_tree={"tests/t.py": "b" * 40},
        side_trees={"base": {"tests/gone_test.py": "c" * 40}, "patch": {}},
    )
    options = ReplayOptions(
        repo=Path("/repo"), base="main", patch="HEAD", image="i", property_ids=(new, old)
    )
    pins = Pins(
        base_rev="1" * 40, patch_rev="2" * 40, image_ref="i", image_id=PLAN.image_id,
        repo_digests=(), fixture_digest="sha256:f", origin_digest="sha256:f", shrink=None,
        probe_version="1.0.0",
    )  # fmt: skip
    plan = RunPlan(
        run_id="r1",
        run_dir=Path("/runs/r1"),
        started_at=datetime(2026, 1, 2, tzinfo=UTC),
        options=options,
        pins=pins,
        pytest_args=("-q",),
        overlay=overlay,
        targets={"base": (old,), "patch": (new, old)},
    )
    base = service.side_spec(plan, "base", pins.base_rev)
    assert base.tests is not None
    assert (base.tests.rev, base.tests.write, base.tests.remove) == (
        "2" * 40, ("tests/t.py",), ("tests/gone_test.py",))  # fmt: skip
    assert base.targets == (old,)
    replay_plan = service.sides_plan(plan)
    # pytest on base is handed only the test base has; both sides label both properties.
    assert sides.driver_command(replay_plan, 1, sides.side_targets(replay_plan, base))[-1:] == [old]
    assert replay_plan.property_ids == (new, old)
    bare = service.side_spec(RunPlan(**{**plan.__dict__, "overlay": None}), "patch", "2" * 40)
    assert bare.tests is None
    assert sides.side_targets(replay_plan, bare) == (new, old)
