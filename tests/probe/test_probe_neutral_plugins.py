"""What a replay does to the plugins that act in every session they are installed in
(pytest-rerunfailures, flaky, pytest-randomly, pytest-random-order), with the real ones:
installed from the wheelhouse (`make wheelhouse`) into a folder of their own on the
replay's PYTHONPATH, never into this venv, where they would act on the suite itself.
The parts (the table, the stand-ins) have fast tests: tests/unit/test_core_neutralise.py,
tests/probe/test_probe_neutral.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.neutralise import neutraliser_args
from tests.probe.test_probe_driver import PACKAGE_ROOT, driver_command, driver_env, load, write

pytestmark = pytest.mark.slow

WHEELHOUSE = Path(PACKAGE_ROOT) / ".cache" / "wheelhouse"
SEED = 5


def _install(tmp_path_factory: pytest.TempPathFactory, *packages: str) -> Path:
    if not any(WHEELHOUSE.glob("pytest_rerunfailures-*.whl")):
        pytest.fail(f"{WHEELHOUSE} lacks the plugins' wheels: run `make wheelhouse`")
    target = tmp_path_factory.mktemp("plugins")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--find-links", str(WHEELHOUSE),
         "--target", str(target), *packages],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    return target


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _install(
        tmp_path_factory, "pytest-rerunfailures", "pytest-randomly", "pytest-random-order"
    )


@pytest.fixture(scope="module")
def flaky_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """flaky alone: with pytest-rerunfailures it fails on the other's `flaky` marker."""
    return _install(tmp_path_factory, "flaky")


def _replays(
    project: Path, plugins: Path, *args: str, replays: int = 1, neutralise: bool = True
) -> list[dict[str, Any]]:
    out = project / "out"
    neutralisers = neutraliser_args(SEED) if neutralise else ()
    command = driver_command(
        out, "-p", "no:cacheprovider", *args, *neutralisers, replays=replays, seed=SEED
    )
    env = driver_env(PYTHONPATH=f"{PACKAGE_ROOT}:{plugins}")
    done = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.splitlines()[-1] == f"replay {replays}/{replays} completed", done
    return [load(out / f"replay-{k:03d}.json") for k in range(1, replays + 1)]


def _labels(run: dict[str, Any]) -> dict[str, str]:
    return {e["nodeid"].split("::")[-1]: e["label"] for e in run["result"]["tests"]}


RERUN = """
    import pytest

    RUNS = {}


    def first_attempt_fails(name):
        RUNS[name] = RUNS.get(name, 0) + 1
        assert RUNS[name] > 1, "fails on its first attempt"


    @pytest.mark.flaky(reruns=3)
    def test_marked():
        first_attempt_fails("marked")


    def test_rerun_by_the_command_line():
        first_attempt_fails("global")
"""


@pytest.mark.parametrize(
    ("installed", "source", "config", "key"),
    [
        ("plugins", RERUN, "--reruns 3 --strict-markers\nreruns = 2", "rerunfailures"),
        (
            "flaky_plugin",
            RERUN.replace("reruns=3", "max_runs=3").replace(
                "def test_rerun", "@pytest.mark.flaky\n    def test_rerun"
            ),
            "--max-runs 3 --strict-markers",
            "flaky",
        ),
    ],
)
def test_no_rerun_plugin_hides_a_failure(tmp_path, request, installed, source, config, key):
    folder = request.getfixturevalue(installed)
    write(tmp_path, "test_retried.py", source)
    write(tmp_path, "pytest.ini", f"[pytest]\naddopts = {config}\n")
    (run,) = _replays(tmp_path, folder)
    assert set(_labels(run).values()) == {"assert_fail"}  # each test's raw outcome
    assert key in run["result"]["neutralised"]
    # Without the neutralisers the same tests pass on a rerun: the test can fail.
    (plain,) = _replays(tmp_path, folder, neutralise=False)
    assert set(_labels(plain).values()) == {"assert_pass"}


ORDERED = """
    import random

    SEEN = []


    def test_c():
        SEEN.append("c")


    def test_a():
        SEEN.append("a")


    def test_b(pytestconfig):
        SEEN.append("b")
        assert SEEN == ["c", "a", "b"]  # the file's order
        assert pytestconfig.getoption("randomly_seed") == 5
        print("draw", random.random())
"""


def test_randomly_is_pinned_to_the_runs_seed_in_the_suites_own_order(tmp_path, plugins):
    write(tmp_path, "test_order.py", ORDERED)
    write(tmp_path, "pytest.ini", "[pytest]\naddopts = -p randomly --random-order\n")
    runs = _replays(tmp_path, plugins, "-s", replays=2)
    for run in runs:
        assert set(_labels(run).values()) == {"assert_pass"}
        assert {"randomly", "random_order"} <= set(run["result"]["neutralised"])
    logs = [(tmp_path / "out" / f"replay-00{k}.log").read_text() for k in (1, 2)]
    draws = [found for log in logs for found in re.findall(r"draw (\S+)", log)]
    assert len(draws) == 2
    assert draws[0] == draws[1]  # the same random state in every replay


def test_a_project_that_turns_randomly_off_keeps_it_off(tmp_path, plugins):
    write(tmp_path, "test_order.py", ORDERED.replace("== 5", "== 'default'"))
    write(tmp_path, "pytest.ini", "[pytest]\naddopts = -p no:randomly\n")
    (run,) = _replays(tmp_path, plugins)
    assert _labels(run) == {
        "test_c": "assert_pass",
        "test_a": "assert_pass",
        "test_b": "assert_fail",
    }
