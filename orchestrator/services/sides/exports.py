"""What a run puts on this machine for its sides' containers, held for as long as they
need it: :class:`Exports`.

A side's tree is exported once per run (per what is exported: repository, revision,
mutant, ``--tests-from`` overlay), however many batches, engines and phases mount it;
a volume engine's tar of it is made once too. The holder is owned by whoever's
containers use the trees: ``run_sides`` for one run, the screening's
:class:`~orchestrator.services.sides.warm.WarmPool` across both phases, and per call
collection, ``reproduce`` and ``serve``. Closing it removes every tree, tar and copy,
also on Ctrl-C; an export still running then is waited for and removed too.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from orchestrator import interrupts
from orchestrator.adapters import git as git_adapter
from orchestrator.core.backend import Inputs
from orchestrator.core.side_spec import SideSpec
from orchestrator.core.test_files import SideOverlay
from orchestrator.log import get_logger
from orchestrator.services.sides.pool import probe_package, write_tar

log = get_logger(__name__)

EXPORT_WAIT_S = 60.0  # an export still running at close: git ends it soon after
WAIT_STEP_S = 0.5  # short waits: a Ctrl-C is acted on between them

Entered = TypeVar("Entered")


def entered(
    stack: contextlib.ExitStack, made: contextlib.AbstractContextManager[Entered]
) -> Entered:
    """``stack.enter_context(made)`` with signals held: a Ctrl-C or SIGTERM between the
    folder's making and its registration in ``stack`` would leave it behind."""
    with interrupts.shielded():
        return stack.enter_context(made)


def private_fixture(folder: Path, data: bytes) -> Path:
    """The fixture's bytes as one world-readable file in ``folder`` (a private scratch
    folder): the container's user reads it whatever the original's mode."""
    copy = folder / "fixture.json"
    copy.write_bytes(data)
    copy.chmod(0o644)
    return copy


@dataclass(frozen=True)
class TreeKey:
    """What makes two exported trees the same: one export serves every side that asks."""

    repo: Path
    rev: str
    mutant: Path | None
    tests: SideOverlay | None


def tree_key(side: SideSpec) -> TreeKey:
    return TreeKey(repo=side.repo, rev=side.rev, mutant=side.mutant, tests=side.tests)


@dataclass(eq=False)
class _Export:
    """One key's export: done once it is there (or failed); its tar made once."""

    number: int
    done: threading.Event = field(default_factory=threading.Event)
    tree: Path | None = None
    error: BaseException | None = None
    tar: Path | None = None
    tar_lock: threading.Lock = field(default_factory=threading.Lock)


class Exports:
    """A run's exported trees, their tars and the inputs' private copies (a context
    manager; see the module). ``keep`` leaves them for a container that outlives this
    process (``reproduce --keep``; the next run's sweep removes them once it is gone).
    Thread-safe: any thread may ask for a tree; the first exports it, the others wait."""

    def __init__(self, purpose: str, *, keep: bool = False) -> None:
        self.purpose = purpose
        self.keep = keep
        self.exported = 0  # trees exported: each key once
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._scratch: Path | None = None
        self._exports: dict[TreeKey, _Export] = {}
        self._made: dict[str, Path | None] = {}
        self._once_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def __enter__(self) -> Exports:
        # Made and registered for removal as one step: a Ctrl-C between the two would
        # leave a folder nothing removes until the next run's sweep.
        with interrupts.shielded():
            self._scratch = git_adapter.make_scratch(self.purpose)
            if not self.keep:
                self._stack.callback(git_adapter.remove_scratch, self._scratch)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove every tree, tar and copy; an export still running is waited for first
        (and removes its tree itself if it ends later still). Idempotent."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=EXPORT_WAIT_S)
        self._stack.close()

    @property
    def scratch(self) -> Path:
        if self._scratch is None:
            raise RuntimeError("use the exports as a context manager")
        return self._scratch

    # -- trees -------------------------------------------------------------------------

    def tree(self, side: SideSpec) -> Path:
        """The side's revision exported (mutant applied, ``--tests-from`` laid over): the
        first to ask exports it, anyone asking meanwhile waits for that export, later
        ones get it at once. A failed export is that error again for everyone."""
        key = tree_key(side)
        with self._lock:
            if self._closed:
                raise RuntimeError("the exports are closed")
            export = self._exports.get(key)
            mine = export is None
            if export is None:
                export = self._exports[key] = _Export(number=len(self._exports) + 1)
        if mine:
            try:
                export.tree = self._export(side)
            except BaseException as error:
                export.error = error
                raise
            finally:
                export.done.set()
        _wait(export.done)
        if export.error is not None:
            raise export.error
        assert export.tree is not None
        return export.tree

    def tar(self, side: SideSpec) -> Path:
        """The side's tree as a tar (what a volume engine is given), made once."""
        tree = self.tree(side)
        with self._lock:
            export = self._exports[tree_key(side)]
        with export.tar_lock:
            if export.tar is None:
                export.tar = write_tar(tree, self.scratch / f"src-{export.number}.tar")
            return export.tar

    def export_all(
        self,
        sides: Sequence[SideSpec],
        *,
        tars: bool,
        on_failure: Callable[[SideSpec, Exception], None],
    ) -> None:
        """Every side's tree (and with ``tars`` its tar) at once, each side on a thread of
        its own, waited for here (a Ctrl-C is acted on meanwhile; the close waits for
        the threads). A side's failure goes to ``on_failure`` (called in its thread,
        inside the ``except``: a traceback is there to keep)."""

        def export(side: SideSpec) -> None:
            try:
                if tars:
                    self.tar(side)
                else:
                    self.tree(side)
            except Exception as error:
                on_failure(side, error)

        started: list[threading.Thread] = []
        for side in sides:
            thread = threading.Thread(target=export, args=(side,), name=f"src-{side.name}")
            # Started and counted as one step: a thread left out would run on unwaited
            # after the close (and recreate what it removed).
            with interrupts.shielded(), self._lock:
                if self._closed:
                    raise RuntimeError("the exports are closed")
                thread.start()
                self._threads.append(thread)
            started.append(thread)
        for thread in started:
            while thread.is_alive():
                thread.join(timeout=WAIT_STEP_S)
                interrupts.checkpoint()

    def _export(self, side: SideSpec) -> Path:
        with contextlib.ExitStack() as one:
            tree = one.enter_context(
                git_adapter.checkout(
                    side.repo, side.rev, mutant=side.mutant, tests=side.tests, keep=self.keep
                )
            )
            with interrupts.shielded(), self._lock:
                if self._closed:  # the run ended meanwhile: this tree goes at once
                    raise RuntimeError("the exports were closed during an export")
                self._stack.push(one.pop_all())
                self.exported += 1
        log.debug("tree.exported", purpose=self.purpose, side=side.name, rev=side.rev)
        return tree

    # -- the inputs' private copies ---------------------------------------------------------

    def once(self, name: str, make: Callable[[Path], Path | None]) -> Path | None:
        """``make(scratch)``'s copy, made on the first call for ``name`` and the same one
        after (both phases of a screening read the same bytes)."""
        with self._once_lock:  # engines' threads ask at once: one makes it, the rest wait
            if name not in self._made:
                self._made[name] = make(self.scratch)
            return self._made[name]

    def fixture(self, data: bytes) -> Path:
        """A private, world-readable copy of the fixture's bytes."""
        return private_fixture(self.scratch, data)

    def probe_tar(self) -> Path:
        """The probe as a tar (for volume engines), made once."""
        made = self.once(
            "probe.tar",
            lambda folder: write_tar(probe_package(), folder / "probe.tar", arcname="orchestrator"),
        )
        assert made is not None
        return made

    def inputs(
        self,
        sides: Iterable[SideSpec],
        *,
        volumes: bool,
        fixture: Path | None = None,
        durations: Path | None = None,
    ) -> Inputs:
        """What an engine's staging is made from: every side's tree (exported now if not
        yet), and for ``volumes`` their tars and the probe's."""
        sides = tuple(sides)
        return Inputs(
            trees={side.name: self.tree(side) for side in sides},
            probe=probe_package(),
            fixture=fixture,
            durations=durations,
            tars={side.name: self.tar(side) for side in sides} if volumes else {},
            probe_tar=self.probe_tar() if volumes else None,
        )


def _wait(event: threading.Event) -> None:
    while not event.wait(timeout=WAIT_STEP_S):
        interrupts.checkpoint()
