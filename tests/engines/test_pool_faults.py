"""Faults of issue 14 on a run spread over two engines (issue 16's pool and volumes).

Real engines (the machine's and a second one this session started), real git, the real
CLI in a subprocess, real signals. An interruption anywhere (the collection that cuts a
run while it plans, the batches on both engines) is one line and exit 130 and leaves
nothing on either engine: no container, no volume, no scratch folder; a run killed
outright leaves its containers and volumes on both, and the next run sweeps them there.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from second_engine import CLI, ERROR, CliProcess, SecondEngine, ours, replay_command, wait_for

from fixtures.build_example import git
from fixtures.sleepy import SleepyRepo, build_sleepy

pytestmark = [pytest.mark.docker, pytest.mark.slow]


# A signal, not a deadline, ends these runs. The test waits up to WAIT_S for containers
# on both engines; a sleepy test outlasts that wait (the first engine's container still
# runs when the last one starts), and the replay's --timeout outlasts the sleep.
WAIT_S = 60.0
SLEEP_S = 90.0
TIMEOUT_S = 120.0


def running_on(client: Any, pid: int, *, name_part: str = "") -> bool:
    """Is a container of process ``pid`` running on the engine (its name holding
    ``name_part``)?"""
    label = f"orchestrator.pid={pid}"
    found = client.containers.list(filters={"label": label, "status": "running"})
    return any(name_part in container.name for container in found)


def scratch_left(scratch: Path) -> list[str]:
    return sorted(p.name for p in scratch.glob("orchestrator-*"))


def slow_to_collect(dest: Path) -> SleepyRepo:
    """Sleepy tests whose collection itself waits (a conftest that sleeps on import):
    a run that collects them is caught while it plans."""
    repo = build_sleepy(dest, count=4, seconds=1.0)
    git(dest, "checkout", "-q", repo.base)
    (dest / "tests" / "conftest.py").write_text(f"import time\n\ntime.sleep({SLEEP_S})\n")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "a slow conftest")
    base = git(dest, "rev-parse", "HEAD")
    (dest / "README.md").write_text("patched\n")
    git(dest, "commit", "-q", "-am", "patch")
    patch = git(dest, "rev-parse", "HEAD")
    return SleepyRepo(path=dest, base=base, patch=patch, property_ids=repo.property_ids)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", ["collecting", "batches"])
def test_an_interrupted_run_on_two_engines_leaves_nothing_on_either(
    tmp_path: Path,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    docker_client: Any,
    with_image: str,
    moment: str,
    signum: int,
) -> None:
    if moment == "collecting":
        repo = slow_to_collect(tmp_path / "slow")
    else:
        repo = build_sleepy(tmp_path / "sleepy", count=4, seconds=SLEEP_S)
    out = tmp_path / "run"
    scratch = tmp_path / "scratch"
    # Without --property the run collects its tests first (containers while it plans).
    properties = () if moment == "collecting" else repo.property_ids
    cli = CliProcess(scratch)
    process = cli.start(
        replay_command(
            repo.path,
            repo.base,
            repo.patch,
            image=with_image,
            out=out,
            engines=[main_url, second.url],
            properties=properties,
            replays=1,
            timeout_s=TIMEOUT_S,
        )
    )
    watcher = second.client(timeout=10)
    try:

        def there() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the replay ended early: {process.communicate()[1][-3000:]}")
            if moment == "collecting":
                return running_on(docker_client, process.pid, name_part="collect")
            return running_on(watcher, process.pid) and running_on(docker_client, process.pid)

        wait_for(there, timeout=WAIT_S, what=f"the run's containers ({moment})")
    finally:
        watcher.close()
    process.send_signal(signum)
    done = cli.finish(process, out, timeout=300)

    name = signal.Signals(signum).name
    assert done.exit_code == 130, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (line,) = done.error_lines()
    assert line.startswith(f"{ERROR}interrupted ({name})"), line
    # Marked incomplete from before the collection on (which mounts its fixture copy).
    assert (out / "INCOMPLETE").exists()
    assert not (out / "summary.json").exists()
    assert "marked incomplete" in line
    assert ours(docker_client, done.pid) == ([], [])
    assert ours(second_client, done.pid) == ([], [])
    assert scratch_left(scratch) == []


def test_a_sigkilled_run_on_two_engines_is_swept_from_both_by_the_next_run(
    tmp_path: Path,
    main_url: str,
    second: SecondEngine,
    second_client: Any,
    docker_client: Any,
    with_image: str,
) -> None:
    repo = build_sleepy(tmp_path / "sleepy", count=4, seconds=SLEEP_S)
    out = tmp_path / "killed"
    scratch = tmp_path / "scratch"
    cli = CliProcess(scratch)
    process = cli.start(
        replay_command(
            repo.path,
            repo.base,
            repo.patch,
            image=with_image,
            out=out,
            engines=[main_url, second.url],
            properties=repo.property_ids,
            replays=1,
            timeout_s=TIMEOUT_S,
        )
    )
    watcher = second.client(timeout=10)
    try:
        wait_for(
            lambda: running_on(watcher, process.pid) and running_on(docker_client, process.pid),
            timeout=WAIT_S,
            what="the run's containers on both engines",
        )
    finally:
        watcher.close()
    process.send_signal(signal.SIGKILL)
    killed = cli.finish(process, out)
    assert killed.exit_code == -signal.SIGKILL
    assert (out / "INCOMPLETE").exists()
    refused = subprocess.run(
        [str(CLI), "report", str(out)], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2
    assert "marked incomplete" in refused.stderr
    # What a killed run leaves, on each engine: its containers and its volumes.
    for client in (docker_client, second_client):
        containers, volumes = ours(client, killed.pid)
        assert containers, (containers, volumes)
        assert volumes, (containers, volumes)
    assert scratch_left(scratch) != []

    quick = build_sleepy(tmp_path / "quick", count=2, seconds=0.1)
    follow = cli.run(
        replay_command(
            quick.path,
            quick.base,
            quick.patch,
            image=with_image,
            out=tmp_path / "next",
            engines=[main_url, second.url],
            properties=quick.property_ids,
            replays=1,
        ),
        tmp_path / "next",
    )
    assert follow.exit_code == 0, follow.stderr[-3000:]
    assert ours(docker_client, killed.pid) == ([], [])
    assert ours(second_client, killed.pid) == ([], [])
    assert scratch_left(scratch) == []
