"""The screening's containers kept for the second phase (a context manager opened around
both phases of ``replay``'s screening).

A side's container idles and the driver is run in it with an exec, so a container whose
screening exec ended well can run the second phase's replays too: the second phase then
costs no container start, and the same as replays 2..N sharing one container in the
default isolation (each replay a fresh pytest forked by the driver; ``/tmp`` and a
``--writable-tree`` copy persist within the container; docs/lanes.md).

:class:`WarmPool` holds, from the first phase until it closes: the containers parked by
engine and side, what they mount (the exported trees and the private copies of the
fixture and the durations, in one :class:`~orchestrator.services.sides.exports.Exports`
the second phase finds them in; each engine's staging), and the ``live`` list and
``cancelled`` event both phases share, so that a Ctrl-C kills a parked container as it
kills any other. Closing it removes every parked container (in parallel), then the
staging and the folders, also on Ctrl-C or an exception; their owner labels still let
a later run's sweep remove what a crash left.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import TracebackType

from orchestrator.core.backend import LiveContainers, SideContainer, SideJob, Staging
from orchestrator.errors import Interrupted
from orchestrator.log import get_logger
from orchestrator.services.interrupts import DeferredSignals
from orchestrator.services.sides.exports import Exports, entered

log = get_logger(__name__)

# Containers removed at once when the pool closes (each removal is a round trip or two).
REMOVERS = 8


@dataclass(frozen=True, kw_only=True)
class Parked:
    """A screening container whose exec ended well, idle until a second-phase batch of the
    same side on the same engine takes it."""

    engine: int
    side: str
    job: SideJob  # as it was made: a batch takes it only for the same job
    container: SideContainer
    remove: Callable[[], None]  # idempotent; never raises an engine failure


class WarmPool:
    """The first phase's containers and inputs, kept for the second (see the module)."""

    def __init__(self, *, reuse: bool = True, repark: bool = False) -> None:
        # With ``reuse`` false nothing is parked (a container per replay): the pool still
        # keeps the inputs, so the second phase exports and stages nothing again.
        self.reuse = reuse
        # Rounds of evidence may follow the second phase (lanes.md section 3b): its
        # containers whose exec ended well are parked again, for the rounds to run in.
        self.repark = repark
        # In the names of the containers a later phase makes: ``replays``, ``round-<n>``.
        self.phase = "replays"
        self.cancelled = threading.Event()
        self.live = LiveContainers()
        # The first phase ended: the second exports, copies and stages nothing again.
        self.screened = False
        self.serving = False  # the second phase started: nothing is parked any more
        self.interpreter: str | None = None  # the image's driver interpreter, once known
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._parked: list[Parked] = []
        self._exports: Exports | None = None
        self._stagings: dict[int, Staging] = {}
        self._removers: list[threading.Thread] = []
        self._closed = False
        # Engines where a side's screening was reused from an earlier run: no side of
        # theirs is kept, so both sides' second phase starts in fresh containers alike.
        self._cold: set[int] = set()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt | Interrupted)
        hits = self.close(interrupted=interrupted)
        if hits and exc_type is None:
            raise Interrupted("interrupted; containers and sources removed")

    # -- the first phase ---------------------------------------------------------

    def exports(self) -> Exports:
        """The trees and copies both phases mount: made by the first phase, kept until
        close (removed after the containers and the staging). Called from the main thread."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the warm pool is closed")
            if self._exports is None:
                self._exports = entered(self._stack, Exports("run"))
            return self._exports

    def staging(
        self, engine: int, make: Callable[[], contextlib.AbstractContextManager[Staging]]
    ) -> Staging:
        """The engine's staging, made once (by the first phase that reaches it) and kept
        until close. Called from the engine's own thread."""
        with self._lock:
            staged = self._stagings.get(engine)
        if staged is not None:
            return staged
        made = make()
        staged = made.__enter__()
        with self._lock:
            self._stack.push(made.__exit__)
            self._stagings[engine] = staged
        return staged

    def park(self, parked: Parked) -> bool:
        """Keep a container for the second phase (or, with ``repark``, for the next round
        of evidence); False (it is not kept) once that started or the pool is closing."""
        with self._lock:
            if not self.reuse or (self.serving and not self.repark) or self._closed:
                return False
            if parked.engine in self._cold:
                return False
            self._parked.append(parked)
        log.debug("container.parked", container=parked.container.name, side=parked.side)
        return True

    def cool(self, engine: int) -> None:
        """A side's screening on ``engine`` came from an earlier run (no container of it
        to keep): keep none of the other sides' there either, and remove any already
        kept, so that the second phase runs both sides in fresh containers."""
        with self._lock:
            self._cold.add(engine)
            dropped = [parked for parked in self._parked if parked.engine == engine]
            self._parked = [parked for parked in self._parked if parked.engine != engine]
        _remove_all(dropped)

    # -- the second phase --------------------------------------------------------

    def serve(self, needed: Mapping[tuple[int, str], int]) -> None:
        """The second phase starts: no more parking; of the parked containers keep only
        ``needed[(engine, side)]`` per engine and side (one per batch), and remove the
        others now, on a thread of their own."""
        with self._lock:
            self.serving = True
            wanted = Counter(needed)
            kept: list[Parked] = []
            extra: list[Parked] = []
            for parked in self._parked:
                key = (parked.engine, parked.side)
                if wanted[key] > 0:
                    wanted[key] -= 1
                    kept.append(parked)
                else:
                    extra.append(parked)
            self._parked = kept
            if extra:
                remover = threading.Thread(
                    target=_remove_all, args=(extra,), name="warm-remove", daemon=False
                )
                self._removers.append(remover)
                remover.start()
        log.debug("warm.serving", kept=len(kept), removed=len(extra))

    def take(self, engine: int, side: str, job: SideJob) -> Parked | None:
        """A parked container of ``side`` on ``engine`` made for the same job (but its
        name), or None. The caller owns it from here: it removes it when done."""
        with self._lock:
            for index, parked in enumerate(self._parked):
                if (parked.engine, parked.side) == (engine, side):
                    del self._parked[index]
                    break
            else:
                return None
        if replace(job, name=parked.job.name) != parked.job:
            log.warning("container.not_reused", container=parked.container.name, reason="job")
            parked.remove()
            return None
        return parked

    # -- the end -----------------------------------------------------------------

    def close(self, *, interrupted: bool = False) -> int:
        """Remove every parked container, the staging and the folders; signals that come
        meanwhile are deferred. Idempotent. Returns how many came."""
        with DeferredSignals(interrupted=interrupted) as deferred:
            with self._lock:
                if self._closed:
                    return 0
                self._closed = True
                parked, self._parked = self._parked, []
            self.cancelled.set()  # any exec still running in one of them ends
            _remove_all(parked)
            for remover in self._removers:
                remover.join()
            self.live.remove_all()  # those whose removal the engine refused before
            self._stack.close()  # the staging, then the trees and copies
        return deferred.hits


def _remove_all(parked: list[Parked]) -> None:
    if len(parked) <= 1:
        for one in parked:
            one.remove()
        return
    with ThreadPoolExecutor(max_workers=min(REMOVERS, len(parked))) as removers:
        for done in [removers.submit(one.remove) for one in parked]:
            done.result()
