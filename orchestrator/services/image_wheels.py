"""A project image's wheels, resolved and downloaded in a container, never on the host.

What pip resolves was decided from the pinned revision's files (a pull request's,
possibly): downloading it means running code, an sdist's build backend, chosen by the
tree or by an index. It runs in a container made from the image's own base (its own
Python decides the markers), confined as a replay is (non-root, no capabilities, no
privilege gain, read-only root, tmpfs for /tmp and HOME, memory/pids/CPU limits, only
the environment given here), with the generated requirement files and the operator's
local ``--find-links`` folders mounted read-only, one output folder mounted writable,
and no network unless the operator named one. Steps run with ``docker exec`` in the
idling container: ``python3 -m venv`` in the tmpfs (ensurepip, offline), that venv's
``pip download``, then ``pip wheel --no-deps`` of the sdists; pip is ``--isolated``
with no configuration file, told only the operator's index options. The container is
always removed (also on Ctrl-C); the host then takes the wheels out of the output folder
without following anything (:mod:`orchestrator.adapters.build_output`).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import interrupts
from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.build_output import Taken, entry_names, take_wheels
from orchestrator.core import project_image as core
from orchestrator.core.reproduce import IDLE_COMMAND
from orchestrator.core.text_safety import terminal_safe
from orchestrator.errors import ImageBuildError, InfrastructureError, InputError
from orchestrator.log import get_logger

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)

RESOLVE_TIMEOUT_S = 1800.0  # the whole container: venv, download, sdist builds
VENV = "/tmp/resolve-venv"
VENV_PYTHON = f"{VENV}/bin/python"
INPUTS = "/in"
OUTPUT = "/out"
LIMITS = docker_adapter.Limits(memory="2g", pids=512, cpus=1.0, tmp_size="1g")
# The container's whole environment: nothing of the host's (its secrets, its PIP_*).
ENVIRONMENT = {
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONPATH": "",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_CONFIG_FILE": os.devnull,  # no pip.conf of the image's either
}
VENV_SCRIPT = (
    "import platform, sys, venv; venv.EnvBuilder(with_pip=True).create(sys.argv[1]); "
    "print('python=' + platform.python_version())"
)
PIP = (VENV_PYTHON, "-m", "pip", "--isolated", "--no-input", "--disable-pip-version-check")
_KEPT_LINES = 60


@dataclass(frozen=True, kw_only=True)
class Wheelhouse:
    """What the container made: the image's Python version, the wheels copied out (into
    the caller's folder), and notes."""

    python: str
    wheels: tuple[Taken, ...]
    notes: tuple[str, ...]


class _Output:
    """A step's output, line by line: each line capped and made terminal-safe, logged at
    debug, the last ones kept (and the first ``ERROR:`` lines) for its failure."""

    def __init__(self, step: str, on_line: Callable[[str], None] | None) -> None:
        self.step = step
        self.on_line = on_line
        self.last: deque[str] = deque(maxlen=_KEPT_LINES)
        self.errors: list[str] = []
        self.lines = docker_adapter.BoundedLines(self._line, line_bytes=4096)

    def _line(self, raw: str) -> None:
        line = terminal_safe(raw)
        self.last.append(line)
        if line.lstrip().startswith("ERROR:") and len(self.errors) < 5:
            self.errors.append(line)
        if self.on_line is not None:
            self.on_line(line)
        log.debug("image.wheels_output", step=self.step, line=line)

    def seen(self) -> list[str]:
        return [*self.errors, *self.last]


def container_user(out: Path) -> str:
    """The build container's user: uid 1000 when this process is root (the output folder
    is handed to it), else this process's own uid (the folder is already its own)."""
    if os.geteuid() == 0:
        os.chown(out, 1000, 1000)
        return "1000:1000"
    return f"{os.geteuid()}:{os.getegid()}"


@contextlib.contextmanager
def _private_scratch() -> Iterator[Path]:
    with contextlib.ExitStack() as stack:
        with interrupts.shielded():  # made and registered for removal as one step
            folder = git_adapter.make_scratch("wheels")
            stack.callback(git_adapter.remove_scratch, folder)
        folder.chmod(0o700)  # only the mounts reach the container; nobody else gets in
        yield folder


def _run(
    container: docker_adapter.Container,
    command: Sequence[str],
    *,
    step: str,
    deadline: float,
    on_line: Callable[[str], None] | None,
) -> tuple[int, _Output]:
    output = _Output(step, on_line)
    exit_ = container.exec_stream(
        command, environment={}, on_output=output.lines.feed, deadline=deadline
    )
    output.lines.close()
    if exit_.killed_at_deadline:
        raise ImageBuildError(
            f"{step}: the build container took longer than {RESOLVE_TIMEOUT_S:g} s; stopped"
        )
    if exit_.status_code is None:
        raise ImageBuildError(f"{step}: the build container ended without an exit status")
    return exit_.status_code, output


def _pip_step(
    container: docker_adapter.Container,
    args: Sequence[str],
    *,
    step: str,
    deadline: float,
    on_line: Callable[[str], None] | None,
) -> None:
    status, output = _run(container, [*PIP, *args], step=step, deadline=deadline, on_line=on_line)
    if status == 0:
        return
    by_input, line = core.pip_failure(step, output.seen())
    if by_input:
        raise InputError(line)
    raise ImageBuildError(f"{line} (exit {status})")


def make_wheels(
    client: DockerClient,
    *,
    base_image_id: str,
    base_ref: str,
    requirements: core.Requirements,
    index: core.IndexOptions,
    project: str | None,
    dest: Path,
    on_line: Callable[[str], None] | None = None,
) -> Wheelhouse:
    """Resolve, download and build ``requirements`` in a build container of
    ``base_image_id``; the wheels are copied into ``dest`` (a folder of ours)."""
    with _private_scratch() as work:
        inputs = work / "in"
        inputs.mkdir(mode=0o755)
        (inputs / "requirements.txt").write_text(requirements.requirements_text())
        constraints: tuple[str, ...] = ()
        if requirements.constraints:
            (inputs / "constraints.txt").write_text(requirements.constraints_text())
            constraints = ("--constraint", f"{INPUTS}/constraints.txt")
        for path in inputs.iterdir():
            path.chmod(0o644)
        out = work / "out"
        out.mkdir(mode=0o700)
        mounts = [
            docker_adapter.Mount(source=inputs, target=INPUTS),
            docker_adapter.Mount(source=out, target=OUTPUT, read_only=False),
            *(
                docker_adapter.Mount(source=Path(folder), target=target)
                for folder, target in index.mounts()
            ),
        ]
        owner = docker_adapter.Owner.current(f"image-wheels-{uuid.uuid4().hex[:8]}")
        config = docker_adapter.container_config(
            image_id=base_image_id,
            name=f"orchestrator-{owner.run_id}",
            command=IDLE_COMMAND,
            mounts=mounts,
            environment=ENVIRONMENT,
            labels=owner.labels("image-wheels"),
            limits=LIMITS,
            working_dir="/tmp",
            network_mode=index.network,
            user=container_user(out),
        )
        deadline = time.monotonic() + RESOLVE_TIMEOUT_S
        log.info("image.wheels_container", image=base_ref, network=index.network)
        with docker_adapter.Container(client, config) as container:
            status, output = _run(
                container, ["python3", "-I", "-c", VENV_SCRIPT, VENV],
                step="python3 -m venv", deadline=deadline, on_line=on_line,
            )  # fmt: skip
            python = next(
                (line[7:].strip() for line in output.last if line.startswith("python=")), None
            )
            if status != 0 or python is None:
                shown = [line for line in output.seen() if line.strip()]
                detail = shown[-1] if shown else f"exit {status}"
                raise InfrastructureError(
                    f"{base_ref}: its python3 cannot make a virtual environment ({detail}); "
                    "it needs python3 with ensurepip (Debian: python3-venv)"
                )
            index_args = index.pip_args()
            _pip_step(
                container,
                ["download", "--dest", OUTPUT, "--requirement", f"{INPUTS}/requirements.txt",
                 *constraints, *index_args],
                step="pip download", deadline=deadline, on_line=on_line,
            )  # fmt: skip
            # Names only (the container may still write there): what to build is decided
            # by name, and nothing is read until the container is gone.
            sdists, notes = core.sdists_to_build(entry_names(out), project)
            if sdists:
                _pip_step(
                    container,
                    ["wheel", "--no-deps", "--wheel-dir", OUTPUT, *index_args,
                     *(f"{OUTPUT}/{name}" for name in sdists)],
                    step="pip wheel", deadline=deadline, on_line=on_line,
                )  # fmt: skip
        dest.mkdir(parents=True, exist_ok=True)
        wheels = take_wheels(out, dest)
    return Wheelhouse(python=python, wheels=wheels, notes=notes)
