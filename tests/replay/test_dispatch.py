"""The dispatcher on engines that do what a test tells them: lanes, refusals, engines
that go away, the retry queue. No container runs here; the Docker path is in
tests/engines/ (a real second engine, SIGKILLed mid-run)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.pool import Batch, plan_batches
from orchestrator.errors import EngineError
from orchestrator.services.sides.dispatch import Dispatched, Dispatcher, SideResults
from orchestrator.services.sides.pool import EngineRefused

SIDES = ("base", "patch")
PROPS = tuple(f"t.py::test_{n}" for n in range(8))


@dataclass(eq=False)
class FakeEngine:
    index: int
    url: str
    slots: int = 2
    runner_id: str = ""
    refuse: bool = False
    unusable: bool = False
    dies_after: int | None = None  # batches it finishes before it stops answering
    alive: bool = True
    ran: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answers(self) -> bool:
        return self.alive


def ok(batch: Batch, engine: FakeEngine) -> SideResults:
    facts = ContainerFacts(exit_code=0, message=engine.url)
    return {side: [(ReplayFile(replay=1, state="missing"), facts)] for side in SIDES}


def dispatch(engines: list[FakeEngine], batches: tuple[Batch, ...]) -> Dispatched:
    @contextlib.contextmanager
    def prepare(engine: FakeEngine) -> Iterator[object]:
        if engine.refuse:
            raise EngineRefused(f"{engine.url}: another image")
        if engine.unusable:
            raise EngineError("engine_gone", "no answer")
        yield object()

    def run_batch(engine: FakeEngine, batch: Batch, staging: object) -> SideResults:
        with engine.lock:
            if engine.dies_after is not None and len(engine.ran) >= engine.dies_after:
                engine.alive = False
            if not engine.alive:
                facts = ContainerFacts(engine_error="engine_gone", message="gone")
                return {side: [(ReplayFile(replay=1, state="missing"), facts)] for side in SIDES}
            engine.ran.append(batch.key)
        return ok(batch, engine)

    def unrun(batch: Batch, facts: ContainerFacts) -> SideResults:
        return {side: [(ReplayFile(replay=1, state="missing"), facts)] for side in SIDES}

    errors: list[BaseException] = []
    dispatcher = Dispatcher(
        engines=engines,
        batches=batches,
        prepare=prepare,
        run_batch=run_batch,
        unrun=unrun,
        cancelled=threading.Event(),
        on_internal_error=errors.append,
    )
    dispatcher.start()
    for event in dispatcher.finished:
        assert event.wait(timeout=30)
    assert errors == []
    return dispatcher.outcome()


def finals(dispatched: Dispatched) -> dict[str, tuple[int, str | None]]:
    """Batch key -> (engine, its facts' engine_error)."""
    return {
        batch.key: (batch.engine, results["base"][0][1].engine_error)
        for batch, results in dispatched.finals
    }


def test_every_batch_runs_once_on_its_engine():
    engines = [FakeEngine(0, "e1", slots=4), FakeEngine(1, "e2", slots=2)]
    batches = plan_batches(PROPS, [4, 2], {})
    done = dispatch(engines, batches)
    assert finals(done) == {b.key: (b.engine, None) for b in batches}
    assert sorted(engines[0].ran + engines[1].ran) == sorted(b.key for b in batches)
    assert done.attempts == ()
    assert [e.status for e in done.engines] == ["ok", "ok"]


def test_an_engine_that_goes_away_gives_its_batch_to_another_once_and_it_is_recorded():
    engines = [FakeEngine(0, "e1"), FakeEngine(1, "e2", dies_after=0)]
    batches = plan_batches(PROPS, [2, 2], {})
    done = dispatch(engines, batches)
    assert finals(done) == {"e1-b1": (0, None), "e2-b1-attempt2": (0, None)}
    (attempt,) = done.attempts
    assert (attempt.batch.key, attempt.batch.engine) == ("e2-b1", 1)
    assert [e.status for e in done.engines] == ["ok", "gone"]


def test_with_no_engine_left_a_batch_is_engine_gone():
    engines = [FakeEngine(0, "e1", dies_after=1), FakeEngine(1, "e2", dies_after=0)]
    batches = plan_batches(PROPS, [2, 2], {})
    done = dispatch(engines, batches)
    assert finals(done) == {"e1-b1": (0, None), "e2-b1-attempt2": (0, "engine_gone")}
    assert [e.status for e in done.engines] == ["gone", "gone"]


def test_a_batch_that_fails_twice_keeps_its_second_attempt():
    engines = [
        FakeEngine(0, "e1", dies_after=1),
        FakeEngine(1, "e2", dies_after=0),
        FakeEngine(2, "e3", dies_after=0),
    ]
    batches = (
        Batch(key="e2-b1", engine=1, property_ids=PROPS[:4]),
        Batch(key="e3-b1", engine=2, property_ids=PROPS[4:]),
    )
    done = dispatch(engines, batches)
    result = finals(done)
    assert sorted(result) == ["e2-b1-attempt2", "e3-b1-attempt2"]
    # e1 ran one of them and then went away with the other: that one failed twice.
    assert sorted(error is None for _, error in result.values()) == [False, True]
    assert len(done.attempts) == 3


def test_a_refused_engine_runs_nothing_and_its_batches_say_why():
    engines = [FakeEngine(0, "e1"), FakeEngine(1, "e2", refuse=True)]
    batches = plan_batches(PROPS, [2, 2], {})
    done = dispatch(engines, batches)
    assert finals(done) == {"e1-b1": (0, None), "e2-b1": (1, "image_mismatch")}
    assert engines[1].ran == []
    assert [e.status for e in done.engines] == ["ok", "refused"]


@pytest.mark.parametrize("slots", [1, 2, 5])
def test_an_engine_that_cannot_be_prepared_hands_its_batches_to_the_others(slots):
    engines = [FakeEngine(0, "e1", slots=slots), FakeEngine(1, "e2", slots=slots, unusable=True)]
    batches = plan_batches(PROPS, [slots, slots], {})
    done = dispatch(engines, batches)
    assert {engine for engine, _ in finals(done).values()} == {0}
    assert all(error is None for _, error in finals(done).values())
    assert done.attempts == ()  # nothing ran there: no attempt to record
    assert [e.status for e in done.engines] == ["ok", "gone"]
