"""The reaper and the reader in a real container (adapters/results.py): what the tests
left running is killed before the results are read, the container's own idle process is
told apart by what a copy cannot forge (it started first), and the reader runs where no
process of the tree can reach it."""

from __future__ import annotations

import os
import time

import pytest

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import results
from orchestrator.adapters.docker import Container
from orchestrator.core.side_spec import OUT, RESULTS_TMPFS

pytestmark = pytest.mark.docker

# Lists the container's processes but itself: pid, parent, uid, command line.
PROCESSES = r"""
import os
for name in sorted(os.listdir("/proc"), key=lambda n: (len(n), n)):
    if name.isdigit() and int(name) != os.getpid():
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").replace(b"\n", b" ").decode().strip()
            with open(f"/proc/{name}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle.read().splitlines())
        except OSError:
            continue
        if fields["State"].split()[0] != "Z" and command:
            print(name, fields["PPid"].strip(), fields["Uid"].split()[0], command, sep="|")
"""

# Waits for the results reader (an interpreter run with -I -S whose script names
# report.json: not the shell that starts this) and writes into its standard output.
WRITER = r"""
setsid python3 -c '
import os, time
while True:
    for name in os.listdir("/proc"):
        try:
            if name == str(os.getpid()):
                continue
            command = open("/proc/%s/cmdline" % name, "rb").read()
            if command.startswith(b"python3\0-I\0-S\0") and b"report.json" in command:
                fd = os.open("/proc/%s/fd/1" % name, os.O_WRONLY)
                os.write(fd, b"forged" * 1000)
                open("/tmp/wrote", "w").close()
        except (OSError, ValueError):
            pass
    time.sleep(0.001)
' </dev/null >/dev/null 2>&1 &
"""

# Left behind by "a test": copies of the idle process's command line in their own
# sessions (their parent gone, so the init's children, as the idle process is), a busy
# forker, and the writer.
STRAYS = (
    r"""
setsid sleep infinity </dev/null >/dev/null 2>&1 &
setsid sleep infinity </dev/null >/dev/null 2>&1 &
setsid sh -c 'while :; do sleep 1 & done' </dev/null >/dev/null 2>&1 &
"""
    + WRITER
)


def processes(container: Container) -> list[tuple[int, int, int, str]]:
    chunks, _ = container.exec_chunks(
        ["python3", "-I", "-S", "-c", PROCESSES], deadline=time.monotonic() + 60
    )
    rows = []
    for line in b"".join(chunks).decode().splitlines():
        pid, ppid, uid, command = line.split("|", 3)
        rows.append((int(pid), int(ppid), int(uid), command))
    return rows


def idle_container(docker_client: object, runner_image_id: str) -> Container:
    """A replay's container as a side has it before its command: idle, a results tmpfs."""
    owner = docker_adapter.Owner.current(f"test-reaper-{os.urandom(4).hex()}")
    config = docker_adapter.container_config(
        image_id=runner_image_id,
        name=f"orchestrator-test-{owner.run_id}",
        command=["sleep", "infinity"],
        mounts=[],
        environment={},
        labels=owner.labels("t"),
        limits=docker_adapter.Limits(),
        working_dir="/tmp",
        tmpfs={OUT: RESULTS_TMPFS},
    )
    return Container(docker_client, config)  # type: ignore[arg-type]


def test_the_reaper_leaves_only_the_init_and_the_idle_process(docker_client, runner_image_id):
    with idle_container(docker_client, runner_image_id) as container:
        (idle,) = [row for row in processes(container) if row[3] == "sleep infinity"]
        container.exec_stream(
            ["sh", "-c", STRAYS],
            environment={},
            on_output=lambda _chunk: None,
            deadline=time.monotonic() + 60,
        )
        before = processes(container)
        assert len([row for row in before if row[3] == "sleep infinity"]) >= 3, before

        chunks, _ = container.exec_chunks(
            results.reaper_command("python3"), deadline=time.monotonic() + 60, workdir="/"
        )
        reaped = results.status_line(chunks)
        assert '"left": 0' in reaped, reaped

        after = processes(container)
        # The init and the idle process (the same pid: the first one, not a copy).
        assert [row[3] for row in after if row[0] == 1] == ["/sbin/docker-init -- sleep infinity"]
        assert [row for row in after if row[3] == "sleep infinity"] == [idle]
        assert len(after) == 2, after

        chunks, _ = container.exec_chunks(
            results.reader_command("python3", OUT, processes=True),
            deadline=time.monotonic() + 60,
            user=results.READER_USER,
            workdir="/",
        )
        read = results.read_results_stream(chunks)
        assert read.problem is None  # nothing alive, nothing written into its output
        assert container.settled(
            docker_adapter.Exit(status_code=None, killed_at_deadline=False, cancelled=False)
        )[1]  # still running: a kept container serves the second phase


def test_a_stray_the_reaper_missed_cannot_reach_the_reader_which_refuses_the_folder(
    docker_client, runner_image_id
):
    with idle_container(docker_client, runner_image_id) as container:
        container.exec_stream(
            ["sh", "-c", WRITER],
            environment={},
            on_output=lambda _chunk: None,
            deadline=time.monotonic() + 60,
        )
        # No reaper: the writer is alive, and still cannot write into the reader's output
        # (another user's), so the stream is whole and says it is alive.
        for _ in range(3):
            chunks, _ = container.exec_chunks(
                results.reader_command("python3", OUT, processes=True),
                deadline=time.monotonic() + 60,
                user=results.READER_USER,
                workdir="/",
            )
            read = results.read_results_stream(chunks)
            assert read.problem == (
                "1 processes the tests left behind were still alive when the results were read"
            )
        chunks, _ = container.exec_chunks(
            ["sh", "-c", "test -e /tmp/wrote && echo wrote || echo never"],
            deadline=time.monotonic() + 60,
        )
        assert results.status_line(chunks) == "never"  # every open of the fd was refused


class LosesOutput:
    """A real container whose first ``lost`` execs' output the engine "loses": each
    runs for real, its output is drained and dropped (what moby/moby#27289 does)."""

    def __init__(self, container: Container, lost: int) -> None:
        self._container = container
        self.lost = lost
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._container, name)

    def exec_chunks(self, command, **options):  # type: ignore[no-untyped-def]
        chunks, exit_code = self._container.exec_chunks(command, **options)
        self.calls += 1
        if self.calls <= self.lost:
            for _chunk in chunks:
                pass
            return iter(()), exit_code
        return chunks, exit_code


@pytest.mark.parametrize("lost", [1, 3])
def test_a_reader_stream_the_engine_lost_is_asked_for_again(docker_client, runner_image_id, lost):
    from orchestrator.services.sides.side_run import READ_ATTEMPTS, read_stream_back

    with idle_container(docker_client, runner_image_id) as container:
        container.exec_stream(
            ["sh", "-c", f"printf '{{}}' > {OUT}/replay-001.json"],
            environment={},
            on_output=lambda _chunk: None,
            deadline=time.monotonic() + 60,
        )
        losing = LosesOutput(container, lost)
        read = read_stream_back(losing, interpreter="python3", out=OUT)  # type: ignore[arg-type]
        if lost < READ_ATTEMPTS:
            assert read.problem is None, read.problem
            assert read.files == {"replay-001.json": b"{}"}
            assert losing.calls == lost + 1
        else:  # lost every time: the folder is refused, as any unreadable stream
            assert read.unreadable
            assert read.problem is not None
            assert "not readable" in read.problem
            assert losing.calls == READ_ATTEMPTS
