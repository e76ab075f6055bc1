"""How one pytest session is started: forked from a warm driver, or a new interpreter.

Both spawners start the session in its own process group (its pid is the group's id)
and append that pid to the caller's list of running groups as soon as it exists, so a
stop signal right after the start still reaches it. The session's standard input is
/dev/null and its output goes to its log, unless ``attach`` keeps the driver's
(`orchestrator/probe/driver.py` has the modes). Standard library and pytest only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Protocol

from orchestrator.probe.jobs import Job

PLUGIN: Final = "orchestrator.probe.plugin"
# A forked replay that died in the driver's own code before pytest ran (EX_SOFTWARE).
_CHILD_FAILED: Final = 70
STOP_SIGNALS: Final = frozenset((signal.SIGTERM, signal.SIGINT))
# Imported lazily by every pytest session (the debugging plugin's configure imports pdb,
# the argument parser _argcomplete): importing them once in the driver saves each forked
# replay 10-20 ms. Standard library and pytest only, nothing of the project under test.
_WARM_MODULES: Final = (
    "pdb",
    "faulthandler",
    "_pytest._argcomplete",
    "_pytest.config.compat",
)


class Spawner(Protocol):
    def start(
        self,
        job: Job,
        env: dict[str, str],
        log_path: Path,
        *,
        running: list[int],
        private_fds: Sequence[int] = (),
    ) -> int:
        """Start one session of ``job``; ``private_fds`` must not reach its tests."""
        ...


def pytest_main_args(job: Job) -> list[str]:
    return ["-p", "no:cacheprovider", *job.pytest_args]


class ExecSpawner:
    """A new interpreter per session (`python -m pytest -p <plugin> ...`)."""

    def __init__(self, *, attach: bool, progress_fd: int | None) -> None:
        self.attach = attach
        self.progress_fd = progress_fd

    def start(
        self,
        job: Job,
        env: dict[str, str],
        log_path: Path,
        *,
        running: list[int],
        private_fds: Sequence[int] = (),
    ) -> int:
        import subprocess

        # Popen closes every descriptor but the three and pass_fds: private_fds included.
        command = [sys.executable, "-m", "pytest", "-p", PLUGIN, *pytest_main_args(job)]
        if self.attach:
            child = subprocess.Popen(command, env=env, process_group=0)
            running.append(child.pid)
            take_terminal(child.pid)
            # Had it read the terminal before it had the foreground, it was stopped.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGCONT)
        else:
            with log_path.open("wb") as log:
                child = subprocess.Popen(
                    command,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=() if self.progress_fd is None else (self.progress_fd,),
                )
            running.append(child.pid)
        # Reaped with os.wait4 by the caller; Popen must not reap it too.
        child.returncode = 0
        return child.pid


class ForkSpawner:
    """A child of this driver, which imported pytest and the probe once (:meth:`prepare`).

    With ``config_templates`` (serve mode) pytest's initial config is built once per
    argument list here and each forked session uses its own copy of it.
    """

    def __init__(self, *, attach: bool, config_templates: bool) -> None:
        self.attach = attach
        self._use_templates = config_templates
        self._pytest: ModuleType | None = None
        self._plugin: ModuleType | None = None
        self._templates: dict[tuple[str, ...], Any] = {}

    def prepare(self, rewrite_cache_dir: Path | None) -> None:
        """Import pytest, its built-in plugins and the probe once, here; with
        ``rewrite_cache_dir`` later sessions load the test modules the first rewrote."""
        import gc
        import importlib

        import pytest
        from _pytest.config import default_plugins

        for name in (*(f"_pytest.{plugin}" for plugin in default_plugins), *_WARM_MODULES):
            # Some built-ins need optional modules; the child reports that like exec would.
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        self._pytest = pytest
        if rewrite_cache_dir is not None:
            from orchestrator.probe import rewrite_cache

            rewrite_cache.install(rewrite_cache_dir)
        # Importing the plugin installs the audit hook and the sleep wrapper, inert
        # here: the meter is only on while a test body runs in a child.
        self._plugin = importlib.import_module(PLUGIN)
        _warm_inspect_cache()
        # What is imported now lives as long as the driver: keep the collector from
        # touching (and so copying) those pages in every forked child.
        gc.collect()
        gc.freeze()

    def start(
        self,
        job: Job,
        env: dict[str, str],
        log_path: Path,
        *,
        running: list[int],
        private_fds: Sequence[int] = (),
    ) -> int:
        template = self._config_template(pytest_main_args(job))
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal between fork and the child's own handlers must not run the
        # driver's handler in the child; the parent takes it right after the fork.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                self._child(  # never returns
                    job,
                    env=env,
                    log_path=log_path,
                    mask=blocked,
                    template=template,
                    private_fds=private_fds,
                )
            running.append(pid)
            # Also set here, so a kill right after the fork reaches the child's group.
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return pid

    def _config_template(self, args: list[str]) -> Any:
        """Serve mode: ``_pytest.config.get_config(args, [plugin])``, built once per
        argument list in the driver; None when it cannot be built (the child then builds
        its own, as in a batch replay).

        What it holds (a plugin manager with pytest's built-in plugins imported and
        registered, minus the ``-p no:`` ones, and the invocation's arguments and folder)
        reads neither the project nor the job's environment, so a forked copy is the
        object the child's own ``get_config`` would have made; the driver never uses it.
        This saves each job a tenth to a fifth of its time.
        """
        key = tuple(args)
        if key in self._templates:
            return self._templates[key]
        template = None
        if self._use_templates and self._plugin is not None and not os.environ.get("PYTEST_DEBUG"):
            try:
                from _pytest.config import get_config

                template = get_config(list(args), [self._plugin])
            except Exception:
                template = None
            import gc

            gc.freeze()  # as in prepare(): the children's collector leaves it alone
        self._templates[key] = template
        return template

    def _child(
        self,
        job: Job,
        *,
        env: dict[str, str],
        log_path: Path,
        mask: set[int | signal.Signals],
        template: Any,
        private_fds: Sequence[int],
    ) -> None:
        """One session in the forked child; always ends in os._exit, never returns."""
        status = _CHILD_FAILED
        try:
            os.setpgid(0, 0)
            # A fresh interpreter's dispositions: SIGTERM kills, SIGINT raises KeyboardInterrupt.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for fd in private_fds:  # the tests must not see the job streams
                with contextlib.suppress(OSError):
                    os.close(fd)
            os.environ.clear()
            os.environ.update(env)
            if self.attach:
                take_terminal()
            else:
                _redirect_stdio(log_path)
            status = self._run_pytest(job, template)
            _interpreter_exit()
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException:
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status & 0xFF)

    def _run_pytest(self, job: Job, template: Any) -> int:
        pytest, plugin = self._pytest, self._plugin
        if pytest is None or plugin is None:
            raise RuntimeError("fork mode: prepare() was not called")
        args = pytest_main_args(job)
        if template is not None:
            _use_config_template(template, args, plugin)
        # What `python -m pytest <args>` would show the tests.
        sys.argv = [str(Path(str(pytest.__file__)).parent / "__main__.py"), *args]
        # The plugin object is registered directly (as `-p` would by name): its module
        # is already imported, and naming it would warn that it cannot be rewritten.
        return int(pytest.main(args, plugins=[plugin]))


def _redirect_stdio(log_path: Path) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)


def _on_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def take_terminal(pgid: int | None = None) -> None:
    """Make process group ``pgid`` (default: our own) the foreground of the terminal on
    stdin, when there is one.

    Asked from a background group, the kernel would stop us with SIGTTOU: ignore it for
    the call, as shells do.
    """
    if not _on_terminal():
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(0, os.getpgrp() if pgid is None else pgid)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _warm_inspect_cache() -> None:
    """Fill ``inspect``'s module-by-file cache for every module imported so far.

    Reporting a failure, pytest asks ``inspect.getmodule`` where the failing source
    lives, which resolves the file of every module in ``sys.modules`` not yet in that
    cache (a realpath each: about 15 ms in the runner image). Done here once, a forked
    replay only resolves the modules it imported itself.
    """
    import inspect

    with contextlib.suppress(Exception):
        inspect.getmodule(compile("", "<orchestrator-warm-up>", "exec"))


def _use_config_template(template: Any, args: list[str], plugin: ModuleType) -> None:
    """In a forked child: pytest.main's ``get_config(args, [plugin])`` returns the
    driver's template (this process's own copy); any other call builds a config."""
    import _pytest.config

    config_module: Any = _pytest.config
    original = config_module.get_config

    def get_config(call_args: Any = None, plugins: Any = None, *rest: Any, **options: Any) -> Any:
        if (
            not rest
            and not options.get("prog")
            and call_args is not None
            and list(call_args) == args
            and plugins is not None
            and list(plugins) == [plugin]
        ):
            config_module.get_config = original  # used once
            return template
        return original(call_args, plugins, *rest, **options)

    config_module.get_config = get_config


def _interpreter_exit() -> None:
    """What a fresh interpreter does on its way out: join non-daemon threads, run atexit."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
