"""One hermetic container as a context manager (:class:`Container`): created from an
image ID, started, its output followed, processes run in it with ``docker exec``, waited
for against our own deadline, and always removed."""

from __future__ import annotations

import contextlib
import io
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, NoReturn

import requests.exceptions

from orchestrator import interrupts
from orchestrator.adapters.docker._sdk import (
    SdkContainer,
    docker,
    failure_reason,
    failures,
    infra_retry,
    ping,
    translated,
)
from orchestrator.adapters.docker.config import container_config
from orchestrator.adapters.owners import Owner
from orchestrator.core.backend import Cancelled, Exit, Limits, LiveContainers
from orchestrator.core.bounded_lines import BoundedLines
from orchestrator.core.labels import ContainerFacts
from orchestrator.errors import EngineError
from orchestrator.log import get_logger

log = get_logger(__name__)

# What an init (docker-init, catatonit) exits with when it cannot execute the container's
# command: 127 when no such executable exists, 126 when it may not be run.
NOT_EXECUTED = {127: "has no `{}` executable", 126: "cannot execute `{}`"}


def command_not_run(command: Sequence[str], state: Mapping[str, Any]) -> str | None:
    """Why a container whose own process is gone never ran ``command``, from its inspected
    ``State``: the image lacks the executable (or may not run it); None when it ran or
    is running. Pure."""
    code = state.get("ExitCode")
    if state.get("Running") or not command or not isinstance(code, int):
        return None
    problem = NOT_EXECUTED.get(code)
    if problem is None:
        return None
    shown = " ".join(command)
    return (
        f"the image {problem.format(command[0])}: the container's own command `{shown}` "
        f"could not start (exit {code}), so nothing can run in it"
    )


class Container:
    """One hermetic container as a context manager (cibuildwheel's ``OCIContainer`` style).

    On enter it is created from ``config`` (see :func:`container_config`; created by
    name, so a retried create adopts the container it made) and started. On exit it
    is killed unless it already stopped, and removed with its volumes - always: when
    the body returns, raises, or is interrupted (``KeyboardInterrupt``). A removal
    the engine refuses is logged, never raised over the body's outcome; the
    container stays in ``live`` for a later :meth:`LiveContainers.remove_all`, and its
    owner labels let :func:`sweep_leftovers` remove it after a crash.

    ``cancelled`` (set by another thread) stops it from starting (:class:`Cancelled`)
    and ends :meth:`wait` early. ``before_start`` runs between create and start (to
    copy files in with :meth:`put_archive`). Engine failures raise :class:`EngineError`.

    ``keep`` is the one exception to the removal (``reproduce --keep``): a container
    that started is left as it is on exit, running, for ``docker exec``; its owner
    labels still let :func:`sweep_leftovers` remove it once this process is gone. One
    that failed to start is removed all the same.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        config: Mapping[str, Any],
        *,
        live: LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
        before_start: Callable[[Container], None] | None = None,
    ) -> None:
        self.name = str(config["name"])
        self._client = client
        self._config = dict(config)
        # Every exec runs in the working directory asked for. When that directory is a
        # tmpfs mount point (a writable tree), Docker would make it 0755 and root's at
        # create, whatever the tmpfs's mode (and Podman refuses the uid= that would hand
        # it over): the container itself then starts in /tmp, its processes in the tree.
        self._exec_dir: str | None = self._config.get("working_dir")
        if self._exec_dir is not None and self._exec_dir in (self._config.get("tmpfs") or {}):
            self._config["working_dir"] = "/tmp"
        self._before_start = before_start
        self._live = live
        self._cancelled = cancelled if cancelled is not None else threading.Event()
        self._keep = keep
        self._handle: SdkContainer | None = None
        self._started = False
        self._stopped = False  # it exited, or we killed it: nothing left to kill
        self._removed = False

    def __enter__(self) -> Container:
        with translated(self._client):
            self._handle = create_container(self._client, self._config)
        if self._live is not None:
            self._live.add(self)
        try:
            if self._before_start is not None:
                self._before_start(self)
            if self._cancelled.is_set():
                raise Cancelled(f"{self.name}: cancelled before start")
            with translated(self._client):
                self._handle.start()  # never retried: a retry could run the replay twice
        except BaseException:
            self._close()
            raise
        self._started = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _sdk(self) -> SdkContainer:
        if self._handle is None:
            raise RuntimeError(f"{self.name}: not created (use the container as a context)")
        return self._handle

    @property
    def id(self) -> str:
        return str(self._sdk().id)

    def put_archive(self, path: str, data: bytes | Iterable[bytes] | io.BufferedReader) -> None:
        """Unpack a tar into ``path`` (a volume's path in a read-only container)."""
        with translated(self._client):
            if not self._sdk().put_archive(path, data):
                raise EngineError("docker_api", f"{self.name}: copying into {path} failed")

    def get_archive(self, path: str) -> bytes:
        """``path`` as a tar (also after the container stopped, from a volume)."""
        with translated(self._client):
            stream, _stat = self._sdk().get_archive(path)
            return b"".join(stream)

    def follow_logs(self, on_line: Callable[[str], None]) -> threading.Thread:
        """Feed the container's output, line by line, to ``on_line`` on a daemon thread."""
        handle = self._sdk()

        def pump() -> None:
            lines = BoundedLines(on_line)
            try:
                for chunk in handle.logs(stream=True, follow=True, stdout=True, stderr=True):
                    lines.feed(chunk)
            except Exception:  # the stream ends however the container ends
                return
            lines.close()

        thread = threading.Thread(target=pump, name=f"logs-{self.name}", daemon=True)
        thread.start()
        return thread

    def wait(self, *, deadline: float, poll_s: float = 2.0) -> Exit:
        """Wait for the container against our own monotonic deadline; kill it past the
        deadline, or as soon as ``cancelled`` is set.

        ``wait(timeout=…)`` only bounds one HTTP read (and raises a connection error,
        not a timeout), so we loop with short waits. A wait returns as soon as the
        container exits, so polling adds no latency.
        """
        handle = self._sdk()
        with translated(self._client):
            while True:
                if self._cancelled.is_set():
                    self._kill_or_raise()
                    return Exit(
                        status_code=self._final_status(), killed_at_deadline=False, cancelled=True
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._kill_or_raise()
                    return Exit(
                        status_code=self._final_status(), killed_at_deadline=True, cancelled=False
                    )
                try:
                    result = handle.wait(timeout=max(0.05, min(poll_s, remaining)))
                except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
                    if ping(self._client):
                        continue  # our own short read timed out; the container still runs
                    raise EngineError("engine_gone", str(error)) from error
                self._stopped = True
                status = result.get("StatusCode") if isinstance(result, Mapping) else None
                return Exit(
                    status_code=int(status) if isinstance(status, int) else None,
                    killed_at_deadline=False,
                    cancelled=self._cancelled.is_set(),
                )

    def facts(self, exit_: Exit) -> ContainerFacts:
        """The container's final state as facts: image ID, exit code, OOM kill. Never raises:
        an engine that fails the inspection is a fact too."""
        return self.settled(exit_)[0]

    def settled(self, exit_: Exit) -> tuple[ContainerFacts, bool]:
        """:meth:`facts`, and whether the container still runs: its command ran with exec,
        so its results can still be read from inside it. Never raises."""
        try:
            attrs = _inspect(self._sdk())
        except failures() as error:
            facts = ContainerFacts(
                engine_error=failure_reason(self._client, error),
                message=f"inspect after exit failed: {error}",
                killed_at_deadline=exit_.killed_at_deadline,
                cancelled=exit_.cancelled,
            )
            return facts, False
        state = attrs.get("State", {})
        exit_code = state.get("ExitCode", exit_.status_code)
        facts = ContainerFacts(
            image_id=attrs.get("Image"),
            exit_code=exit_code if isinstance(exit_code, int) else exit_.status_code,
            oom_killed=bool(state.get("OOMKilled")),
            killed_at_deadline=exit_.killed_at_deadline,
            cancelled=exit_.cancelled,
        )
        # Its own command may have failed to start only after an exec got in (the exec
        # then dies with it): the container's end, not the exec's, says why.
        why = command_not_run(self._config["command"], state)
        if why is not None:
            facts = replace(facts, engine_error="docker_api", message=f"{self.name}: {why}")
        return facts, bool(state.get("Running"))

    def ended(self, exit_: Exit) -> ContainerFacts:
        """:meth:`facts` once the engine has taken in the container's end, for one that an
        exec found ending (a reader whose stream was cut short): see :meth:`_settle_end`."""
        self._settle_end()
        return self.facts(exit_)

    def _settle_end(self) -> None:
        """Stop the container and wait until the engine shows it stopped. An exec can meet
        a container whose own command just ended (its task gone) while the engine still
        shows it running, for as long as it takes the engine to handle the exit (longer on
        a loaded machine): only a stopped container's exit code says why. The kill cannot
        change the exit code of a command that had already ended; one that still ran is
        ended by us (137: nothing said about the image). A kept container is left as it
        is: its state is taken as the engine shows it."""
        if self._keep or self._handle is None:
            return
        with contextlib.suppress(*failures()):
            self._kill_or_raise()
        self._final_status()

    # -- processes run in the started container (``docker exec``) -----------------

    def _exec_create(
        self,
        command: Sequence[str],
        environment: Mapping[str, str],
        *,
        tty: bool,
        user: str | None = None,
        workdir: str | None = None,
    ) -> str:
        try:
            with translated(self._client):
                created = self._client.api.exec_create(
                    self.id,
                    list(command),
                    stdout=True,
                    stderr=True,
                    stdin=tty,
                    tty=tty,
                    environment=dict(environment),
                    workdir=self._exec_dir if workdir is None else workdir,
                    user=user or "",  # "": the container's own
                )
        except EngineError as error:
            self._reraise(error)
        return str(created["Id"])

    def _reraise(self, error: BaseException) -> NoReturn:
        """Raise ``error``; an engine failure of a container whose own command never
        started is raised as the one line that says why (the engine only says that the
        container is not running)."""
        explained = self._command_failure() if isinstance(error, EngineError) else None
        if explained is None:
            raise error
        raise explained from error

    def _command_failure(self) -> EngineError | None:
        """Why nothing can run in the container when its own command could not start (an
        image without the executable it names), as one line; None otherwise, or when the
        engine cannot tell."""
        if self._stopped:
            return None  # we stopped it: its exit code says nothing about the image
        self._settle_end()
        try:
            attrs = _inspect(self._sdk())
        except failures():
            return None
        state = attrs.get("State") or {}
        why = command_not_run(self._config["command"], state)
        return None if why is None else EngineError("docker_api", f"{self.name}: {why}")

    def exec_exit_code(self, exec_id: str) -> int | None:
        """The exit code of a finished ``exec`` (None while it runs, or unknown)."""
        with translated(self._client):
            state = self._client.api.exec_inspect(exec_id)
        code = state.get("ExitCode")
        return code if isinstance(code, int) and not state.get("Running") else None

    def exec_stream(
        self,
        command: Sequence[str],
        *,
        environment: Mapping[str, str],
        on_output: Callable[[bytes], None],
        deadline: float,
        kill_at_deadline: bool = True,
    ) -> Exit:
        """Run ``command`` in the container (its user, folder and environment, plus
        ``environment``), no terminal, no stdin; hand its output (stdout and stderr as
        they come) to ``on_output``. Past our monotonic ``deadline`` (or once
        ``cancelled`` is set) the container is killed, which ends the process too;
        with ``kill_at_deadline`` false it is left running for the caller to read
        what it left (then kill it), and the exit says the deadline passed."""
        exec_id = self._exec_create(command, environment, tty=False)
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                with translated(self._client):
                    for chunk in self._client.api.exec_start(exec_id, stream=True):
                        on_output(chunk)
            except BaseException as error:  # handed to the waiting thread
                failure.append(error)

        thread = threading.Thread(target=pump, name=f"exec-{self.name}", daemon=True)
        thread.start()
        # Joined in short steps up to the deadline (the stream ends when the process does):
        # a Ctrl-C is acted on between them (orchestrator.interrupts).
        while thread.is_alive() and (remaining := deadline - time.monotonic()) > 0:
            thread.join(timeout=min(0.5, remaining))
            interrupts.checkpoint()
            if self._cancelled.is_set():
                break
        cancelled = self._cancelled.is_set() and thread.is_alive()
        late = thread.is_alive() and not cancelled
        if cancelled or (late and kill_at_deadline):
            with translated(self._client):
                self._kill_or_raise()
            thread.join(timeout=10)
        if failure and not (late or cancelled):
            self._reraise(failure[0])
        try:
            status = None if late and not kill_at_deadline else self.exec_exit_code(exec_id)
        except EngineError as error:  # the engine forgets an exec once its container ended
            self._reraise(error)
        return Exit(status_code=status, killed_at_deadline=late, cancelled=cancelled)

    def exec_chunks(
        self,
        command: Sequence[str],
        *,
        deadline: float,
        user: str | None = None,
        workdir: str | None = None,
    ) -> tuple[Iterator[bytes], Callable[[], int | None]]:
        """Run ``command`` (no terminal, no stdin; as ``user`` in ``workdir`` when given,
        else the container's) and hand back its standard output as chunks, and a
        function for its exit code once they are consumed; the standard error is
        dropped. Past our monotonic ``deadline`` the container is killed, which ends the
        stream."""
        exec_id = self._exec_create(command, {}, tty=False, user=user, workdir=workdir)
        chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=64)

        def pump() -> None:
            try:
                with translated(self._client):
                    for out, _err in self._client.api.exec_start(exec_id, stream=True, demux=True):
                        if out:
                            chunks.put(out)
            except BaseException as error:  # the reading side decides what it means
                chunks.put(error)
            else:
                chunks.put(None)

        threading.Thread(target=pump, name=f"read-{self.name}", daemon=True).start()

        def taken() -> Iterator[bytes]:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    item = chunks.get(timeout=max(0.01, remaining))
                except queue.Empty:
                    self.kill()  # the stream ends short: what was read is refused whole
                    return
                if item is None:
                    return
                if isinstance(item, BaseException):
                    self._reraise(item)
                yield item

        return taken(), lambda: self.exec_exit_code(exec_id)

    def exec_terminal(
        self, command: Sequence[str], *, environment: Mapping[str, str]
    ) -> ExecTerminal:
        """Start ``command`` in the container on a terminal of its own (a TTY, with stdin);
        the caller relays its socket to the user's terminal (``adapters.terminal``)."""
        exec_id = self._exec_create(command, environment, tty=True)
        with translated(self._client):
            hijacked = self._client.api.exec_start(exec_id, tty=True, socket=True)
        # The SDK hands back its socket wrapper (``SocketIO`` on a Unix socket): reads and
        # writes go to the socket itself, with select() on it.
        raw = getattr(hijacked, "_sock", hijacked)
        if not isinstance(raw, socket.socket):
            with contextlib.suppress(Exception):
                hijacked.close()
            raise EngineError("docker_api", "the engine's exec stream is not a socket here")
        return ExecTerminal(client=self._client, exec_id=exec_id, socket=raw, owner=self)

    def kill(self) -> None:
        """Kill it now (from any thread); a container that already stopped, or an engine
        that is gone, is left to the removal to decide."""
        if self._handle is None or self._stopped:
            return
        with contextlib.suppress(*failures()):
            self._handle.kill()

    def close(self) -> None:
        """Kill unless stopped, then remove (with its volumes); a started container made
        with ``keep`` is left running instead. Idempotent; never raises an engine failure
        (it is logged, and the container stays in ``live``)."""
        if self._keep and self._started:
            if self._live is not None:
                self._live.discard(self)
            log.info("container.kept", container=self.name)
            return
        self._close()

    def _close(self) -> None:
        if self._handle is None or self._removed:
            return
        try:
            self.kill()
        finally:
            try:
                _remove(self._handle)
            except failures() as error:
                log.warning("container.remove_failed", container=self.name, error=str(error))
            else:
                self._removed = True
                if self._live is not None:
                    self._live.discard(self)

    def _kill_or_raise(self) -> None:
        try:
            self._sdk().kill()
        except docker.errors.APIError as error:
            if error.status_code != 409:  # 409: it already stopped
                raise
        self._stopped = True

    def _final_status(self) -> int | None:
        try:
            result = self._sdk().wait(timeout=10)
        except failures():
            return None
        status = result.get("StatusCode") if isinstance(result, Mapping) else None
        return int(status) if isinstance(status, int) else None


@dataclass(frozen=True, kw_only=True)
class ExecTerminal:
    """A process started by :meth:`Container.exec_terminal`: its terminal's socket (raw
    bytes both ways), its size, its exit code."""

    client: docker.DockerClient
    exec_id: str
    socket: socket.socket
    owner: Container

    def resize(self, rows: int, columns: int) -> None:
        """Tell the process's terminal its size; a process already gone is not a failure."""
        with contextlib.suppress(*failures()):
            self.client.api.exec_resize(self.exec_id, height=rows, width=columns)

    def exit_code(self) -> int | None:
        return self.owner.exec_exit_code(self.exec_id)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()


def create_container(client: docker.DockerClient, config: Mapping[str, Any]) -> SdkContainer:
    """Create by name; a retry that finds the name taken adopts the container it made."""
    attempts = 0

    @infra_retry
    def attempt() -> SdkContainer:
        nonlocal attempts
        attempts += 1
        try:
            return client.containers.create(**config)
        except docker.errors.APIError as error:
            if error.status_code == 409 and attempts > 1:
                return client.containers.get(str(config["name"]))
            raise

    return attempt()


@infra_retry
def _remove(handle: SdkContainer) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        handle.remove(force=True, v=True)


@infra_retry
def _inspect(handle: SdkContainer) -> Mapping[str, Any]:
    handle.reload()
    return dict(handle.attrs)


def run_command(
    client: docker.DockerClient,
    image_id: str,
    command: Sequence[str],
    *,
    purpose: str,
    timeout_s: float = 120.0,
) -> tuple[int | None, str]:
    """Run ``command`` once in a hermetic container of ``image_id`` (no network, read-only,
    uid 1000) and return its exit code and output; the container is always removed."""
    owner = Owner.current(f"{purpose}-{uuid.uuid4().hex[:8]}")
    config = container_config(
        image_id=image_id,
        name=f"orchestrator-{owner.run_id}",
        command=command,
        mounts=(),
        environment={"HOME": "/tmp"},
        labels=owner.labels(purpose),
        limits=Limits(),
        working_dir="/tmp",
    )
    output: list[str] = []
    with Container(client, config) as container:
        pump = container.follow_logs(output.append)
        exit_ = container.wait(deadline=time.monotonic() + timeout_s, poll_s=1.0)
        pump.join(timeout=5)
    return exit_.status_code, "\n".join(output)
