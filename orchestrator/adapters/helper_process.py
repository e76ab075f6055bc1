"""A second Python process for pure work the CLI would otherwise do alone, thin.

After the containers the host's work is Python on one interpreter (one core, whatever
the threads), while the machine's other cores are idle. A pure function of the core
(values in, values out: nothing to share but its arguments) can run there instead, on
chunks of a long input, while this process goes on with the rest.

One helper per run, started with ``spawn`` (a fork would copy the Docker client's and the
ledger's threads and locks), ignoring SIGINT (Ctrl-C is the CLI's to handle) and killed
with the thread that started it (``PR_SET_PDEATHSIG``: a SIGKILLed CLI leaves no helper
waiting for work). Anything going wrong with it (it cannot start, it dies, an argument
does not pickle) only means the chunk is computed here: the values are the same either
way.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.log import get_logger

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

log = get_logger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


# prctl(2): the signal this process gets when the thread that started it is gone.
_PR_SET_PDEATHSIG = 1


def _start_helper(parent: int) -> None:
    """In the helper, first: Ctrl-C is the CLI's; and the helper dies with the CLI, also
    when the CLI is SIGKILLed (its queue would otherwise wait for work forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # gone before the line above took effect
        os._exit(0)


def _ready() -> bool:
    return True


class HelperProcess:
    """A context manager around one helper process (:meth:`start` when it will pay)."""

    def __init__(self, *, ahead: int = 4) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._ahead = ahead  # chunks sent before the first answer is awaited
        self.failed = False  # a chunk was computed here because the helper failed

    def __enter__(self) -> HelperProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    def start(self) -> None:
        """Start the helper now (its interpreter starts while this one works)."""
        if self._pool is not None:
            return
        # Imported here: a run too small for a helper does not pay for them.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_helper,
                initargs=(os.getpid(),),
            )
            pool.submit(_ready)  # the pool starts its process on the first submit
        except (OSError, RuntimeError, ValueError, ImportError) as error:
            # ImportError: no working sem_open (a container without /dev/shm)
            log.debug("helper.unavailable", error=str(error))
            return
        self._pool = pool

    def close(self) -> None:
        """Stop the helper; chunks not yet computed are dropped (nothing waits for them)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def map_chunks(
        self,
        work: Callable[[Any], list[Out]],
        chunks: Iterable[Sequence[In]],
        *,
        sent_as: Callable[[Sequence[In]], Any],
        here: Callable[[Sequence[In]], list[Out]],
    ) -> Iterator[Out]:
        """The values of each chunk, in order, one at a time: ``work(sent_as(chunk))`` in
        the helper, a few chunks ahead of what is taken; ``here(chunk)`` (the same
        values) when the helper is not started or fails."""
        pending: deque[tuple[Sequence[In], Future[list[Out]] | None]] = deque()
        source = iter(chunks)

        def send(chunk: Sequence[In]) -> None:
            future: Future[list[Out]] | None = None
            if self._pool is not None and not self.failed:
                try:
                    future = self._pool.submit(work, sent_as(chunk))
                except (RuntimeError, OSError) as error:  # shut down or broken
                    self._fail(error)
            pending.append((chunk, future))

        for chunk in islice(source, self._ahead):
            send(chunk)
        while pending:
            chunk, future = pending.popleft()
            values = None
            if future is not None:
                try:
                    values = future.result()
                except Exception as error:
                    self._fail(error)
            following = next(source, None)
            if following is not None:
                send(following)
            yield from values if values is not None else here(chunk)

    def _fail(self, error: BaseException) -> None:
        if not self.failed:
            log.warning("helper.failed", error=f"{type(error).__name__}: {error}")
        self.failed = True
