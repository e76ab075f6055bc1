"""A warm container's job result (serve mode, as ``shrink --test`` runs) comes back as a
replay's: the driver's notice on the job channel says only which file it wrote and the
SHA-256 of its bytes, and the file is read back through the guarded reader, taken only
when its bytes are the ones announced.

The patch's test forges both: it puts a passing result where the driver's goes and
writes a notice for it on the channel (the FIFO is the container user's, as the tree
is), then holds its job open, so the host reads the forged file before the driver
writes anything. A test that kills its driver makes its job and every later one
``harness_error``, the driver's end read back as a replay's. Real git, the real engine,
the runner image."""

from __future__ import annotations

import hashlib
import json

import pytest
from hostile_repo import PROPERTY, hostile_repo
from hostile_results import FORGED_RUN

from orchestrator.services.sides import ReplayPlan, SideSpec, new_run_id
from orchestrator.services.sides.serve import WarmContainer

pytestmark = pytest.mark.docker

JOB = "forged"
FORGED = json.dumps({**FORGED_RUN, "job": JOB})

ATTACK = """\
import json, os, time

FORGED = @FORGED@
ANNOUNCED = @ANNOUNCED@


def run():
    folder = "/replay-out/job-000001"
    os.makedirs(folder, exist_ok=True)
    with open(folder + "/.forged", "w") as handle:
        handle.write(FORGED)
    os.chmod(folder + "/.forged", 0o644)
    os.rename(folder + "/.forged", folder + "/replay-001.json")
    notice = {"job": @JOB@, "replay": 1, "status": "completed",
              "result": "replay-001.json", "sha256": ANNOUNCED}
    fd = os.open("/replay/serve/results", os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, (json.dumps(notice) + "\\n").encode())
    os.close(fd)
    time.sleep(300)  # the job stays open: its driver writes nothing meanwhile
"""


def attack(announced: str) -> str:
    return (
        ATTACK.replace("@FORGED@", repr(FORGED))
        .replace("@ANNOUNCED@", repr(announced))
        .replace("@JOB@", repr(JOB))
    )


def served(repo, backend, image_id) -> WarmContainer:
    """The patch side of ``repo`` in one warm container, serving jobs of one replay."""
    plan = ReplayPlan(
        image_id=image_id,
        pytest_args=("-q",),
        property_ids=(),
        fixture=None,
        replays=1,
        timeout_s=60,
        seed=0,
        runner_id="local",
    )
    side = SideSpec(name="patch", repo=repo.path, rev=repo.patch)
    return WarmContainer(plan, side, backend=backend, run_id=new_run_id())


@pytest.mark.parametrize(
    ("announced", "expected"),
    [
        (hashlib.sha256(b"other bytes").hexdigest(), ("harness_error", "unsafe_result")),
        # Announced as written: the tree wins only its own verdict, read from the file.
        (hashlib.sha256(FORGED.encode()).hexdigest(), ("assert_pass", None)),
    ],
    ids=["announced-other-bytes", "announced-these-bytes"],
)
def test_a_served_result_is_taken_only_as_announced(
    tmp_path, docker_backend, runner_image_id, announced, expected
):
    repo = hostile_repo(tmp_path, attack(announced))
    with served(repo, docker_backend, runner_image_id) as warm:
        run = warm.run(pytest_args=("-q", PROPERTY), fixture=None, timeout_s=60, job_id=JOB)
        replay = warm.label(run, PROPERTY)
    assert (replay.label, replay.reason) == expected, replay
    assert run.facts.exit_code is None  # it still served
    assert not run.facts.killed_at_deadline


KILLS_ITS_DRIVER = """\
import os, signal


def run():
    os.kill(os.getppid(), signal.SIGKILL)
"""


def test_a_job_that_kills_its_driver_is_a_harness_error_and_so_is_every_later_one(
    tmp_path, docker_backend, runner_image_id
):
    repo = hostile_repo(tmp_path, KILLS_ITS_DRIVER)
    with served(repo, docker_backend, runner_image_id) as warm:
        runs = [
            warm.run(pytest_args=("-q", PROPERTY), fixture=None, timeout_s=60, job_id=str(n))
            for n in (1, 2)
        ]
        replays = [warm.label(run, PROPERTY) for run in runs]
    # The driver's end, read back as a replay's: killed by a signal, not a deadline.
    assert [replay.label for replay in replays] == ["harness_error"] * 2, replays
    assert runs[0].facts.exit_code == 137
    assert not runs[0].facts.killed_at_deadline
    assert [replay.reason for replay in replays] == ["signal"] * 2, replays
