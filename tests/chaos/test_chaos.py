"""The chaos loop, bounded (bench/chaos.py is the long version): every fault of issue 14
hits a real replay at a random moment, and every invariant is checked after it and after
the next run started. On the session's second Docker engine (tests/support), emptied
after the loop.

The seed is printed (and taken from ORCHESTRATOR_CHAOS_SEED when set), so that a failure
can be replayed: `ORCHESTRATOR_CHAOS_SEED=<seed> pytest tests/chaos -s`.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from chaos_loop import FAULTS, Loop, chaos, table
from support.engine import SecondEngine

from orchestrator import log
from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters.host import host_id
from orchestrator.core.owners import FOREIGN_MAX_AGE_S

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="starts its own dockerd and mounts a tmpfs"),
]


@pytest.fixture(scope="module")
def loop(second_engine: SecondEngine) -> Iterator[Loop]:
    seed = int(os.environ.get("ORCHESTRATOR_CHAOS_SEED") or random.SystemRandom().randrange(2**31))
    print(f"\nchaos seed {seed} (ORCHESTRATOR_CHAOS_SEED={seed} replays this loop)")
    second_engine.restart()
    try:
        with chaos(seed, max_delay_s=6.0, engine_root=second_engine.root) as running:
            yield running
    finally:
        second_engine.restart()  # the loop SIGKILLs it at times
        second_engine.clean()


def test_a_sweep_on_a_shared_engine_takes_only_this_hosts_dead_owners_containers_and_volumes(
    loop: Loop, capsys: pytest.CaptureFixture[str]
) -> None:
    import docker

    log.configure("json", {})
    client = docker.DockerClient(base_url=loop.engine.url)
    run_id = f"chaos-sweep-{uuid.uuid4().hex[:8]}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here, elsewhere = host_id(), "f" * 16
    owners = {  # name -> (host, pid): which process on which host owns it
        "mine-dead": (here, dead.pid),
        "mine-live": (here, os.getpid()),
        "other-host-live-here": (elsewhere, os.getpid()),  # a pid that means nothing here
        "other-host": (elsewhere, dead.pid),
        "older-tool": ("a-hostname", dead.pid),  # an older version's label: not a host id
    }
    made, volumes = {}, {}  # name -> the container's, the volume's (issue 16's staging)
    ours = {"label": f"orchestrator.run-id={run_id}"}
    try:
        for name, (host, pid) in owners.items():
            labels = {
                **docker_adapter.Owner.current(run_id).labels(name),
                docker_adapter.LABEL_HOST: host,
                docker_adapter.LABEL_PID: str(pid),
                docker_adapter.LABEL_PID_START: "",
            }
            made[name] = client.containers.create(
                "orchestrator-runner:latest", ["true"], name=f"{run_id}-{name}", labels=labels
            ).name
            volumes[name] = client.volumes.create(f"{run_id}-{name}-src", labels=labels).name

        def left() -> set[str]:
            return {c.name for c in client.containers.list(all=True, filters=ours)} | {
                v.name for v in client.volumes.list(filters=ours)
            }

        first = docker_adapter.sweep_leftovers(client)
        assert set(first) & left() == set()
        assert {made["mine-dead"], volumes["mine-dead"]} <= set(first)
        assert left() == {
            item for n in owners if n != "mine-dead" for item in (made[n], volumes[n])
        }

        a_day_later = time.time() + FOREIGN_MAX_AGE_S + 60
        second = docker_adapter.sweep_leftovers(client, now=a_day_later)
        foreign = ("other-host-live-here", "other-host", "older-tool")
        assert set(second) == {item for n in foreign for item in (made[n], volumes[n])}
        assert left() == {made["mine-live"], volumes["mine-live"]}
        logged = capsys.readouterr().err
        assert logged.count('"event": "sweep.foreign_removed"') == 6  # and it says so
    finally:
        for container in client.containers.list(all=True, filters=ours):
            container.remove(force=True)
        for volume in client.volumes.list(filters=ours):
            volume.remove(force=True)
        client.close()


def test_the_bounded_chaos_loop_holds_every_invariant(loop: Loop) -> None:
    faults = list(FAULTS)
    loop.random.shuffle(faults)  # every fault once, in a seeded order, at seeded moments
    history = loop.iterate(len(faults), faults=faults)
    final = loop.final_check()
    print(table(loop.history))
    broken = [o for o in history if o.violations]
    assert not broken, "\n".join(f"{o.plan}: {o.violations}" for o in broken)
    assert not final, final
