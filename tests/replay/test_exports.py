"""Each side's tree is exported once per run, whatever the batches, engines and phases
that mount it (:class:`~orchestrator.services.sides.exports.Exports`), and nothing of it
is left after: a real repository, git and the real engine. The exports are counted at
the git adapter's export (the real one, called through)."""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.scratch_git import commit, init

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.core.pool import Batch
from orchestrator.errors import InputError
from orchestrator.services import sides
from orchestrator.services.sides import exports as exports_module
from orchestrator.services.sides.exports import Exports
from orchestrator.services.sides.pool import DockerEngine, Pool
from orchestrator.services.sides.warm import WarmPool

TESTS = [f"tests/test_t.py::test_{n}" for n in range(4)]
SUITE = "".join(f"def test_{n}():\n    assert True\n\n\n" for n in range(4))
MUTANT = "--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"


@pytest.fixture
def specs(tmp_path: Path) -> list[sides.SideSpec]:
    repo = init(tmp_path / "repo")
    base = commit(repo, {"conftest.py": "", "lib.py": "X = 1\n", "tests/test_t.py": SUITE}, "b")
    patch = commit(repo, {"lib.py": "X = 2\n"}, "p")
    return [
        sides.SideSpec(name="base", repo=repo, rev=base),
        sides.SideSpec(name="patch", repo=repo, rev=patch),
    ]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every export (its revision) and every tar written (its name), as they happen."""
    seen: dict[str, list[str]] = {"exports": [], "tars": []}
    lock = threading.Lock()
    real_checkout, real_tar = git_adapter.checkout, exports_module.write_tar

    def checkout(repo: Path, sha: str, **options: Any) -> object:
        with lock:
            seen["exports"].append(sha)
        return real_checkout(repo, sha, **options)

    def write_tar(folder: Path, dest: Path, **options: Any) -> Path:
        with lock:
            seen["tars"].append(dest.name)
        return real_tar(folder, dest, **options)

    monkeypatch.setattr(git_adapter, "checkout", checkout)
    monkeypatch.setattr(exports_module, "write_tar", write_tar)
    return seen


@pytest.fixture
def two_engines(docker_client) -> Pool:
    """The engine twice (two lanes of the pool), inputs through volumes as for remote ones."""
    url = docker_adapter.engine_url(os.environ)
    engines = tuple(
        DockerEngine(index=i, url=url, runner_id="", client=docker_client, slots=2) for i in (0, 1)
    )
    return Pool(engines=engines, volumes=True)


def _plan(image_id: str, replays: int = 1) -> sides.ReplayPlan:
    return sides.ReplayPlan(
        image_id=image_id,
        pytest_args=("-q",),
        property_ids=tuple(TESTS),
        fixture=None,
        replays=replays,
        timeout_s=60,
        seed=0,
        runner_id="local",
    )


BATCHES = tuple(
    Batch(key=f"e{engine + 1}-b{n + 1}", engine=engine, property_ids=(TESTS[2 * engine + n],))
    for engine in (0, 1)
    for n in (0, 1)
)


def _ours(client, run_id: str) -> list[str]:
    found = client.containers.list(
        all=True, filters={"label": f"{docker_adapter.LABEL_RUN}={run_id}"}
    )
    return [container.name for container in found]


@pytest.mark.docker
def test_a_run_of_several_batches_and_engines_exports_each_side_once(
    docker_client, runner_image_id, two_engines, specs, scratch, counted
):
    run_id = sides.new_run_id()
    outcome = sides.run_sides(
        _plan(runner_image_id), specs, run_id=run_id, pool=two_engines, batches=BATCHES
    )
    for side in ("base", "patch"):
        assert {t: [r.label for r in outcome.labelled[side][t]] for t in TESTS} == {
            t: ["assert_pass"] for t in TESTS
        }
    assert sorted(counted["exports"]) == sorted(spec.rev for spec in specs)
    assert sorted(counted["tars"]) == ["probe.tar", "src-1.tar", "src-2.tar"]
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


@pytest.mark.docker
def test_both_phases_of_a_screening_export_each_side_once(
    docker_client, docker_backend, runner_image_id, specs, scratch, counted
):
    run_id = sides.new_run_id()
    plan = _plan(runner_image_id)
    with WarmPool() as warm:
        sides.run_sides(plan, specs, backend=docker_backend, run_id=run_id, warm=warm)
        assert warm.screened
        second = sides.run_sides(
            replace(plan, replays=2), specs, backend=docker_backend, run_id=run_id, warm=warm
        )
        assert warm.exports().exported == 2
    assert [r.label for r in second.labelled["patch"][TESTS[0]]] == ["assert_pass"] * 2
    assert sorted(counted["exports"]) == sorted(spec.rev for spec in specs)
    assert _ours(docker_client, run_id) == []
    assert list(scratch.iterdir()) == []


def test_sides_asking_for_one_tree_at_once_wait_for_its_one_export(specs, scratch, counted):
    twin = replace(specs[0], name="again")  # another side, the same revision
    trees: list[Path] = []
    with Exports("test") as exports:
        ready = threading.Barrier(4)

        def ask(side: sides.SideSpec) -> None:
            ready.wait()
            found = exports.tree(side)
            trees.append(found)

        threads = [threading.Thread(target=ask, args=(s,)) for s in (specs[0], twin) * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(trees) == 4
        assert len(set(trees)) == 1
        assert (trees[0] / "lib.py").read_text() == "X = 1\n"
        assert exports.tar(twin) == exports.tar(specs[0])
        assert exports.exported == 1
    assert counted["exports"] == [specs[0].rev]
    assert counted["tars"] == ["src-1.tar"]
    assert not trees[0].exists()
    assert list(scratch.iterdir()) == []


def test_a_failed_export_is_the_same_error_for_every_side_and_leaves_nothing(
    specs, scratch, tmp_path, counted
):
    mutant = tmp_path / "mutant.diff"
    mutant.write_text(MUTANT.replace("X = 1", "X = 5"))  # does not apply
    broken = replace(specs[0], mutant=mutant)
    failed: dict[str, Exception] = {}
    with Exports("test") as exports:
        exports.export_all(
            [broken, replace(broken, name="again"), specs[1]],
            tars=True,
            on_failure=lambda side, error: failed.__setitem__(side.name, error),
        )
        assert sorted(failed) == ["again", "base"]
        assert all(isinstance(error, InputError) for error in failed.values())
        assert exports.exported == 1  # the other side's
        with pytest.raises(InputError):
            exports.tree(broken)
    assert len(counted["exports"]) == 2  # the mutant's tried once
    assert list(scratch.iterdir()) == []
