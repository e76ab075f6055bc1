"""The screening's containers serve its second phase: both phases through ``run_sides`` and
one :class:`WarmPool`, on the real engine with a real repository. A test that fails the
first time it runs in a container (its /tmp is fresh) tells which container ran what."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support.scratch_git import commit, init

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters.results import ResultsRead
from orchestrator.core.labels import ContainerFacts
from orchestrator.core.side_spec import OUT, REWRITE_CACHE, REWRITE_CACHE_NAME
from orchestrator.services import sides
from orchestrator.services.sides.container import _reusable
from orchestrator.services.sides.warm import WarmPool

pytestmark = pytest.mark.docker

FIRST_IN_CONTAINER = "tests/test_mark.py::test_fails_first_in_each_container"
MARK_TESTS = """\
import os

MARK = "/tmp/ran-before"


def test_fails_first_in_each_container():
    first = not os.path.exists(MARK)
    with open(MARK, "w"):
        pass
    assert not first
"""


@pytest.fixture
def specs(tmp_path: Path) -> list[sides.SideSpec]:
    repo = init(tmp_path / "repo")
    sha = commit(repo, {"conftest.py": "", "tests/test_mark.py": MARK_TESTS}, "c")
    return [sides.SideSpec(name=name, repo=repo, rev=sha) for name in ("base", "patch")]


@pytest.fixture
def plan(runner_image_id: str) -> sides.ReplayPlan:
    return sides.ReplayPlan(
        image_id=runner_image_id,
        pytest_args=("-q", FIRST_IN_CONTAINER),
        property_ids=(FIRST_IN_CONTAINER,),
        fixture=None,
        replays=1,
        timeout_s=30,
        seed=0,
        runner_id="local",
    )


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """An interrupted cleanup leaves SIGINT and SIGTERM ignored (the process is on its way
    out): put pytest's own handlers back."""
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


def _ours(client, run_id: str) -> list[str]:
    found = client.containers.list(
        all=True, filters={"label": f"{docker_adapter.LABEL_RUN}={run_id}"}
    )
    return sorted(container.name for container in found)


def _labels(outcome: sides.SidesOutcome, side: str) -> list[str]:
    return [replay.label for replay in outcome.labelled[side][FIRST_IN_CONTAINER]]


def _phases(plan, specs, docker_backend, warm: WarmPool, run_id: str, *, between=None):
    first = sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id, warm=warm)
    if between is not None:
        between()
    second = sides.run_sides(
        replace(plan, replays=2), specs, backend=docker_backend, run_id=run_id, warm=warm
    )
    return first, second


def test_the_second_phase_runs_in_the_screening_containers(
    docker_client, docker_backend, plan, specs, scratch
):
    run_id = sides.new_run_id()
    parked: list[str] = []
    with WarmPool() as warm:
        first, second = _phases(
            plan,
            specs,
            docker_backend,
            warm,
            run_id,
            between=lambda: parked.extend(_ours(docker_client, run_id)),
        )
        # Each side's container was kept after the screening, and used up by the second.
        assert len(parked) == 2
        assert _ours(docker_client, run_id) == []
    for side in ("base", "patch"):
        assert _labels(first, side) == ["assert_fail"]  # a fresh /tmp
        assert _labels(second, side) == ["assert_pass", "assert_pass"]  # the same /tmp
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


def test_a_kept_container_is_emptied_but_for_its_rewrite_cache(
    docker_client, docker_backend, plan, specs, scratch
):
    """Between the phases a kept container's results folder holds only the rewritten test
    modules its screening driver left for the second phase's."""
    run_id = sides.new_run_id()
    listed: dict[str, list[str]] = {}

    def look() -> None:
        for name in _ours(docker_client, run_id):
            container = docker_client.containers.get(name)
            found = container.exec_run(["ls", "-A", OUT]).output.decode().split()
            cache = container.exec_run(["ls", "-A", REWRITE_CACHE]).output.decode().split()
            listed[name] = [*found, *(f"cache:{entry[-5:]}" for entry in cache)]

    with WarmPool() as warm:
        _, second = _phases(plan, specs, docker_backend, warm, run_id, between=look)
    assert len(listed) == 2
    for found in listed.values():
        assert found[0] == REWRITE_CACHE_NAME
        assert set(found[1:]) == {"cache:.code"}  # conftest.py's and the test module's
        assert len(found) >= 3
    for side in ("base", "patch"):
        assert _labels(second, side) == ["assert_pass", "assert_pass"]


def test_a_container_per_replay_keeps_none(docker_client, docker_backend, plan, specs, scratch):
    run_id = sides.new_run_id()
    parked: list[str] = []
    plan = replace(plan, isolation="container")
    with WarmPool(reuse=False) as warm:
        _, second = _phases(
            plan,
            specs,
            docker_backend,
            warm,
            run_id,
            between=lambda: parked.extend(_ours(docker_client, run_id)),
        )
    assert parked == []
    for side in ("base", "patch"):
        assert _labels(second, side) == ["assert_fail", "assert_fail"]  # each its own /tmp
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


def test_a_kept_container_that_died_gives_way_to_a_fresh_one(
    docker_client, docker_backend, plan, specs, scratch
):
    run_id = sides.new_run_id()

    def kill_base() -> None:
        (base,) = [name for name in _ours(docker_client, run_id) if name.endswith("-base-1")]
        docker_client.containers.get(base).kill()

    with WarmPool() as warm:
        _, second = _phases(plan, specs, docker_backend, warm, run_id, between=kill_base)
    # The base side's second phase ran in a fresh container (its /tmp fresh again), with
    # the labels of a replay that ran, not of an engine failure; the patch side's in its
    # kept one.
    assert _labels(second, "base") == ["assert_fail", "assert_pass"]
    assert _labels(second, "patch") == ["assert_pass", "assert_pass"]
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_nothing_kept_is_left_after_an_interrupt_or_a_failure(
    docker_client, plan, specs, scratch, signals_kept, error, docker_backend
):
    run_id = sides.new_run_id()
    kept: list[str] = []

    def screen_then_fail() -> None:
        with WarmPool() as warm:
            sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id, warm=warm)
            kept.extend(_ours(docker_client, run_id))
            raise error

    with pytest.raises(error):
        screen_then_fail()
    assert len(kept) == 2  # kept for a second phase, until the pool closed
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


EMPTIED = ResultsRead(emptied=True)


@pytest.mark.parametrize(
    ("facts", "read", "reusable"),
    [
        (ContainerFacts(exit_code=0), EMPTIED, True),
        (ContainerFacts(exit_code=1), EMPTIED, False),
        (ContainerFacts(exit_code=0, oom_killed=True), EMPTIED, False),
        (ContainerFacts(exit_code=0, killed_at_deadline=True), EMPTIED, False),
        (ContainerFacts(exit_code=0, engine_error="docker_api"), EMPTIED, False),
        (ContainerFacts(exit_code=0), ResultsRead(problem="too many entries"), False),
        (ContainerFacts(exit_code=0), ResultsRead(emptied=True, unsafe={"x": "a link"}), False),
        # The reader could not empty the folder, or was not asked to.
        (ContainerFacts(exit_code=0), ResultsRead(emptied=False), False),
        (ContainerFacts(exit_code=0), ResultsRead(), False),
    ],
)
def test_only_a_container_whose_exec_ended_well_is_kept(facts, read, reusable):
    assert _reusable(facts, read) is reusable
