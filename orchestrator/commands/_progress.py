"""Live progress of a replay's sides on standard error: one rich line per side on a
terminal, a throttled log line per side otherwise (CI, JSON logs, a pipe)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.core.progress import SideProgress

SideCallback = Callable[["SideProgress"], None]


def progress_logger(logger: Any, event: str) -> SideCallback:
    """Log ``event`` for a side: its first counts, then at most one line every 10 s, and
    the line that says it is finished. ``done``/``total`` count replays, the test counts
    come as extra fields (docs/records.md)."""
    from orchestrator.core.progress import log_due

    last_logged: dict[str, float] = {}
    lock = threading.Lock()

    def report(progress: SideProgress) -> None:
        now = time.monotonic()
        with lock:
            if not log_due(last_logged.get(progress.side), now, finished=progress.finished):
                return
            last_logged[progress.side] = now
        logger.info(
            event,
            side=progress.side,
            done=progress.replays_done,
            total=progress.replays_total,
            tests_done=progress.tests_done,
            tests_total=progress.tests_total,
            failures=progress.failures,
            elapsed_s=round(progress.elapsed_s(now), 1),
        )

    return report


@contextmanager
def live_progress(json_logs: bool, logger: Any, event: str) -> Iterator[SideCallback]:
    """One line per side on a terminal (tests done / total, failures so far, replays,
    elapsed), removed when the sides end; :func:`progress_logger` off a terminal."""
    if json_logs or not sys.stderr.isatty():
        yield progress_logger(logger, event)
        return
    from datetime import timedelta

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
    from rich.text import Text

    class SideElapsed(ProgressColumn):
        """Time since the side's containers started (not since its line appeared)."""

        def render(self, task: Any) -> Text:
            seconds = max(0.0, time.monotonic() - task.fields["started_s"])
            return Text(str(timedelta(seconds=int(seconds))), style="progress.elapsed")

    with Progress(
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tests, {task.fields[failures]} failed, {task.fields[replays]} replays"),
        SideElapsed(),
        console=Console(stderr=True),
        transient=True,
    ) as lines:
        tasks: dict[str, Any] = {}
        lock = threading.Lock()

        def show(progress: SideProgress) -> None:
            fields: dict[str, Any] = {
                "started_s": progress.started_s,
                "failures": progress.failures,
                "replays": f"{progress.replays_done}/{progress.replays_total}",
            }
            with lock:
                if progress.side not in tasks:
                    tasks[progress.side] = lines.add_task(progress.side, total=None, **fields)
                task = tasks[progress.side]
            lines.update(
                task,
                completed=progress.tests_done,
                total=progress.tests_total or None,
                **fields,
            )

        yield show
