"""The quarantine in a team's own test session: ``pytest -p orchestrator.quarantine
--quarantine SOURCE`` (``$ORCHESTRATOR_QUARANTINE`` is the option's default).

SOURCE is a ledger URL or a file ``orchestrator freeze export`` wrote. A test a live freeze
names runs as usual; what the freeze covers (``orchestrator.core.quarantine``: a flake
freeze, any failure of the test's body; a timing freeze, only its timing check) does not
fail the session:

- its report becomes a skip of its own category (``quarantined``, letter ``Q``), so the
  session, pytest's counts and a JUnit file (``<skipped message="quarantined by flake
  freeze 12 ...">``) never count it as a failure, and its traceback is printed under
  "QUARANTINED FAILURES";
- a pass under a live freeze is listed as a thaw candidate;
- a failure whose freezes have all expired, or which its freeze does not cover, fails as
  usual, and its report says why the quarantine did not apply.

The freezes are read once, when the session starts, and decided against that moment; under
pytest-xdist the controller reads them and hands them to its workers. Beside the replay's
own probe (``orchestrator.probe.plugin``) the quarantine stands aside: a replay's labels are
evidence and are never quarantined.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.quarantine import (
    Freeze,
    Leaf,
    Standing,
    by_test,
    failure_kind,
    rule,
)
from orchestrator.core.text_safety import terminal_safe
from orchestrator.quarantine.source import ENV_VAR, SourceError, load
from orchestrator.quarantine.summary import write_summary

PLUGIN_NAME = "orchestrator-quarantine"
WORKER_KEY = "orchestrator_quarantine"  # what an xdist controller hands each worker
REPORT_KEY = "orchestrator_quarantine"  # a report's attribute: the ruling on it (JSON)
CATEGORY = "quarantined"
PROBE_PLUGIN = "orchestrator.probe.plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("quarantine", "orchestrator quarantine (live freezes)")
    group.addoption(
        "--quarantine",
        dest="orchestrator_quarantine",
        metavar="SOURCE",
        default=None,
        help="A ledger URL, or a file `orchestrator freeze export` wrote: a failure a live "
        f"freeze covers does not fail the session (default: ${ENV_VAR}).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Quarantine.for_session(config), PLUGIN_NAME)


class Quarantine:
    """The session's freezes, decided at one moment; the rulings on its reports."""

    def __init__(
        self,
        *,
        freezes: tuple[Freeze, ...] = (),
        now: datetime | None = None,
        header: str,
        active: bool = True,
    ) -> None:
        self.freezes = freezes
        self.now = now or datetime.now(UTC)
        self.index = by_test(freezes)
        self.header = header
        self.active = active
        self.entries: list[tuple[str, dict[str, Any]]] = []  # (node id, ruling) reported

    @classmethod
    def for_session(cls, config: pytest.Config) -> Quarantine:
        handed = getattr(config, "workerinput", {}).get(WORKER_KEY)
        if handed is not None:  # an xdist worker: the controller read the source
            return cls.from_json(handed)
        if config.pluginmanager.has_plugin(PROBE_PLUGIN):
            return cls(header="off: a replay's labels are never quarantined", active=False)
        source = config.getoption("orchestrator_quarantine") or os.environ.get(ENV_VAR, "")
        if not source.strip() or config.getoption("help", False):
            return cls(header=f"off (no --quarantine SOURCE, ${ENV_VAR} unset)", active=False)
        try:
            loaded = load(source.strip())
        except SourceError as error:
            raise pytest.UsageError(f"--quarantine: {error}") from None
        now = datetime.now(UTC)
        live = [f for f in loaded.freezes if f.live(now)]
        kinds = ", ".join(
            f"{sum(f.kind.value == kind for f in live)} {kind}" for kind in ("flake", "timing")
        )
        header = (
            f"{len(live)} live freezes ({kinds}), {len(loaded.freezes) - len(live)} expired,"
            f" from {loaded.shown} ({loaded.form}) at {now.isoformat(timespec='seconds')}"
        )
        return cls(freezes=loaded.freezes, now=now, header=terminal_safe(header))

    def to_json(self) -> dict[str, Any]:
        return {
            "freezes": [f.to_json() for f in self.freezes],
            "now": self.now.isoformat(),
            "header": self.header,
            "active": self.active,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Quarantine:
        return cls(
            freezes=tuple(Freeze.from_json(f) for f in doc["freezes"]),
            now=datetime.fromisoformat(doc["now"]),
            header=doc["header"],
            active=doc["active"],
        )

    # -- the session --

    def pytest_report_header(self) -> str:
        return f"quarantine: {self.header}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist's controller: each worker gets the freezes read here."""
        node.workerinput[WORKER_KEY] = self.to_json()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        # Outermost: the report as every other plugin left it (xfail decided, unittest's
        # real exception in ``call``).
        report = yield
        freezes = self.index.get(item.nodeid) if self.active else None
        if not freezes or report.skipped or (report.passed and report.when != "call"):
            return report
        failure = None if report.passed else failure_kind(report.when, _leaves(call))
        raised = None if call.excinfo is None else call.excinfo.type.__name__
        ruling = rule(freezes, failure=failure, now=self.now, exception=raised)
        if ruling is None:
            return report
        entry: dict[str, Any] = {
            "standing": ruling.standing.value,
            "note": ruling.note,
            "freeze": ruling.freeze.to_json(),
            "when": report.when,
            "failed": ruling.failed,
            "failure_kind": None if failure is None else failure.value,
            "failure": _crash_line(report, item) if report.failed else None,
            "message": _crash_message(report) if report.failed else None,
            "duration_ms": round(report.duration * 1000, 3),
        }
        if ruling.standing is Standing.QUARANTINED:
            entry["traceback"] = report.longreprtext
            path, line = _location(report, item)
            report.outcome = "skipped"
            report.longrepr = (path, line, f"{ruling.note}: {entry['message']}")
        elif ruling.fails_session:
            _explain(report, terminal_safe(ruling.note))
        setattr(report, REPORT_KEY, entry)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Any:
        entry = getattr(report, REPORT_KEY, None)
        if entry is not None and entry["standing"] == Standing.QUARANTINED.value:
            return CATEGORY, "Q", ("QUARANTINED", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = getattr(report, REPORT_KEY, None)
        if entry is not None:
            self.entries.append((report.nodeid, entry))

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.entries:
            write_summary(terminalreporter, self.entries, tracebacks=config.option.tbstyle != "no")


def _leaves(call: pytest.CallInfo[None]) -> tuple[Leaf, ...]:
    excinfo = call.excinfo
    return () if excinfo is None else tuple(_leaves_of(excinfo.value))


def _leaves_of(value: BaseException) -> Iterator[Leaf]:
    if isinstance(value, BaseExceptionGroup):
        for inner in value.exceptions:
            yield from _leaves_of(inner)
        return
    try:
        message = str(value)
    except Exception:  # a broken __str__ must not break the session
        message = ""
    types = tuple(f"{cls.__module__}.{cls.__qualname__}" for cls in type(value).__mro__)
    yield Leaf(types=types, message=message)


def _crash_line(report: pytest.TestReport, item: pytest.Item) -> str:
    """Where and how it failed, on one line: ``path:line: message``."""
    path, line = _location(report, item)
    return f"{path}:{line}: {_crash_message(report)}"


def _crash_message(report: pytest.TestReport) -> str:
    """The first line of the failure's message (its exception type and text)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else report.longreprtext
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if crash is None:  # a failure without an exception: its report's last line says why
        return lines[-1] if lines else f"failed in {report.when}"
    return lines[0] if lines else f"failed in {report.when}"


def _location(report: pytest.TestReport, item: pytest.Item) -> tuple[str, int]:
    """The failure's file (relative to the rootdir when it is under it) and line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        path, line, _ = item.location
        return path, (line or 0) + 1
    crashed = Path(crash.path)
    root = item.config.rootpath
    shown = crashed.relative_to(root).as_posix() if crashed.is_relative_to(root) else str(crashed)
    return shown, int(crash.lineno)


def _explain(report: pytest.TestReport, note: str) -> None:
    """Say in the failure itself (terminal and JUnit) why the quarantine did not apply."""
    addsection = getattr(report.longrepr, "addsection", None)
    if addsection is not None:  # an exception's report: its sections print with it
        addsection("quarantine", note)
    else:
        report.sections.append(("quarantine", note))
