"""Batches onto engines: each engine's lanes, the retry queue, engines that go away.

One thread per engine prepares it (the image, the staged inputs) and then runs
``lanes_for(slots)`` lanes; a lane takes the engine's own batches (planned by
:func:`orchestrator.core.pool.plan_batches`), then batches queued again by engines
that went away, and waits while any batch may still be queued again. What running a
batch means is injected (``run_batch``): this module knows engines, batches and
their outcomes, not containers.

- An engine whose preparation fails (it stopped answering, or its disk is full) runs
  nothing: its batches go to the queue for the others, as never started.
- An engine refused for the run (:class:`~orchestrator.services.sides.pool.EngineRefused`)
  runs nothing either: its batches are final, unrun, with the refusal's facts
  (``harness_error`` / ``image_mismatch``).
- An engine that stops answering mid-batch (a side's facts say ``engine_gone`` and a
  ping confirms it): that attempt is kept as an :class:`Attempt` (the run folder records
  it), the batch is queued again once (:func:`~orchestrator.core.pool.retry`), and the
  engine's batches not started yet go back to the queue. A batch left when no engine
  is, is final with ``engine_gone`` facts.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from orchestrator.core.backend import Backend, Staging
from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.pool import Batch, lanes_for, retry
from orchestrator.errors import EngineError, one_line
from orchestrator.log import get_logger
from orchestrator.services.sides.pool import EngineRefused

log = get_logger(__name__)

Observed = list[tuple[ReplayFile, ContainerFacts]]
SideResults = dict[str, Observed]  # side name -> one (file, facts) per replay

READY = "ok"
REFUSED = "refused"
GONE = "gone"

E = TypeVar("E", bound=Backend)


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """A batch's run that is not its result: its engine stopped answering."""

    batch: Batch  # as it ran (its engine set)
    results: Mapping[str, Sequence[tuple[ReplayFile, ContainerFacts]]]


@dataclass(frozen=True, kw_only=True)
class EngineOutcome:
    index: int
    status: str  # ok, refused, gone
    detail: str | None = None
    batches: tuple[str, ...] = ()  # the keys of the batches whose results it gave


@dataclass(frozen=True, kw_only=True)
class Dispatched:
    finals: tuple[tuple[Batch, SideResults], ...]  # every batch once, as it ended
    attempts: tuple[Attempt, ...]
    engines: tuple[EngineOutcome, ...]


def engine_gone_in(results: Mapping[str, Sequence[tuple[ReplayFile, ContainerFacts]]]) -> bool:
    return any(
        facts.engine_error == "engine_gone"
        for observed in results.values()
        for _, facts in observed
    )


@dataclass
class Dispatcher(Generic[E]):
    """Runs planned batches on a pool; ``start`` it, wait for ``finished``, then ``outcome``."""

    engines: Sequence[E]
    batches: Sequence[Batch]
    prepare: Callable[[E], contextlib.AbstractContextManager[Staging]]
    run_batch: Callable[[E, Batch, Staging], SideResults]
    unrun: Callable[[Batch, ContainerFacts], SideResults]  # a batch that never ran
    cancelled: threading.Event
    on_internal_error: Callable[[BaseException], None]
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _own: dict[int, deque[Batch]] = field(default_factory=dict)
    _queue: deque[Batch] = field(default_factory=deque)
    _alive: dict[int, bool] = field(default_factory=dict)
    _status: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    _gave: dict[int, list[str]] = field(default_factory=dict)
    _finals: dict[str, tuple[Batch, SideResults]] = field(default_factory=dict)
    _attempts: list[Attempt] = field(default_factory=list)
    _pending: int = 0
    finished: list[threading.Event] = field(default_factory=list)

    def start(self) -> None:
        for engine in self.engines:
            self._own[engine.index] = deque(b for b in self.batches if b.engine == engine.index)
            self._alive[engine.index] = True
            self._status[engine.index] = (READY, None)
            self._gave[engine.index] = []
        self._pending = len(self.batches)
        for engine in self.engines:
            done = threading.Event()
            self.finished.append(done)
            threading.Thread(
                target=self._engine_main, args=(engine, done), name=f"engine-{engine.index + 1}"
            ).start()

    # -- one engine --

    def _engine_main(self, engine: E, done: threading.Event) -> None:
        try:
            with self.prepare(engine) as staging:
                lanes = [threading.Event() for _ in range(lanes_for(engine.slots))]
                for number, lane_done in enumerate(lanes, start=1):
                    threading.Thread(
                        target=self._lane,
                        args=(engine, staging, lane_done),
                        name=f"engine-{engine.index + 1}-lane-{number}",
                    ).start()
                for lane_done in lanes:
                    lane_done.wait()
        except EngineRefused as refusal:
            log.error("engine.refused", engine=engine.url, reason=refusal.message)
            facts = ContainerFacts(engine_error="image_mismatch", message=refusal.message)
            with self._cond:
                self._set_down(engine, REFUSED, refusal.message)
                for batch in self._take_own(engine):
                    self._final(batch, self.unrun(batch, facts))
                self._cond.notify_all()
        except EngineError as error:
            log.error(
                "engine.unusable", engine=engine.url, reason=error.reason, error=error.message
            )
            with self._cond:
                self._set_down(engine, GONE, f"{error.reason}: {error.message}")
                self._queue.extend(self._take_own(engine))
                self._cond.notify_all()
        except BaseException as error:  # the tool's own fault: stop the run, say why
            self.on_internal_error(error)
            self.cancelled.set()
        finally:
            with self._cond:
                self._alive[engine.index] = False
                self._cond.notify_all()
            done.set()

    def _lane(self, engine: E, staging: Staging, done: threading.Event) -> None:
        try:
            while (batch := self._next(engine)) is not None:
                results = self.run_batch(engine, batch, staging)
                gone = engine_gone_in(results) and not engine.answers()
                with self._cond:
                    if gone:
                        self._engine_went_away(engine, batch, results)
                    else:
                        self._gave[engine.index].append(batch.key)
                        self._final(batch, results)
                    self._cond.notify_all()
        except BaseException as error:
            self.on_internal_error(error)
            self.cancelled.set()
        finally:
            done.set()

    def _next(self, engine: E) -> Batch | None:
        with self._cond:
            while True:
                if self.cancelled.is_set() or not self._alive[engine.index]:
                    return None
                own = self._own[engine.index]
                if own:
                    return own.popleft()
                if self._queue:
                    return replace(self._queue.popleft(), engine=engine.index)
                if self._pending == 0:
                    return None
                self._cond.wait(timeout=0.5)

    # -- bookkeeping (under the lock) --

    def _take_own(self, engine: E) -> list[Batch]:
        own = self._own[engine.index]
        taken = list(own)
        own.clear()
        return taken

    def _set_down(self, engine: E, status: str, detail: str | None) -> None:
        self._alive[engine.index] = False
        self._status[engine.index] = (status, detail)

    def _final(self, batch: Batch, results: SideResults) -> None:
        self._finals[batch.key] = (batch, results)
        self._pending -= 1

    def _engine_went_away(self, engine: E, batch: Batch, results: SideResults) -> None:
        log.error("engine.gone", engine=engine.url, batch=batch.key)
        self._set_down(engine, GONE, "stopped answering mid-run")
        self._queue.extend(self._take_own(engine))
        self._attempts.append(Attempt(batch=batch, results=results))
        again = retry(batch)
        if again is None:
            self._final(batch, results)
        else:
            log.warning("batch.queued_again", batch=batch.key, properties=len(batch.property_ids))
            self._queue.append(again)

    # -- after every engine thread finished --

    def outcome(self) -> Dispatched:
        """Every batch once: what ran, and what no engine was left to run."""
        with self._cond:
            for batch in [*self._queue, *(b for own in self._own.values() for b in own)]:
                if self.cancelled.is_set():
                    facts = ContainerFacts(cancelled=True, message="interrupted before start")
                else:
                    facts = ContainerFacts(
                        engine_error="engine_gone", message="no engine of the pool was left"
                    )
                self._finals[batch.key] = (batch, self.unrun(batch, facts))
            self._queue.clear()
            for own in self._own.values():
                own.clear()
            engines = tuple(
                EngineOutcome(
                    index=engine.index,
                    status=self._status[engine.index][0],
                    detail=self._status[engine.index][1],
                    batches=tuple(self._gave[engine.index]),
                )
                for engine in self.engines
            )
            return Dispatched(
                finals=tuple(self._finals.values()),
                attempts=tuple(self._attempts),
                engines=engines,
            )


def describe_error(error: BaseException) -> str:
    return f"{type(error).__name__}: {one_line(error)}"
