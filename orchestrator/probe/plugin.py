"""The replay probe: a pytest plugin that labels each test and counts its dependency calls.

Load it explicitly: `pytest -p orchestrator.probe.plugin`. It writes one replay-probe/1
document (docs/records.md, "Public shapes") atomically to $REPLAY_RESULT at the
end of the session. Labels follow docs/lanes.md section 1; the probe never
writes `timeout` (the driver that kills a replay does).

With $REPLAY_PROGRESS_FD set (a descriptor the driver opened on its own output), each
finished test also writes one line there, `test <done>/<total> <outcome>`: tests this
session finished, tests of the whole replay's selection (all workers), and passed,
failed (the call), error (setup or teardown) or skipped. One write per test, below
pytest's output capture (which only redirects descriptors 1 and 2). Progress only: a
test can write the same line, so nothing is decided from it.

Importing this module installs the audit hook and the `time.sleep` wrapper, so both
are in place before conftest files and test modules are imported.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import random
import re
import sys
from collections.abc import Generator
from pathlib import Path
from time import monotonic, perf_counter
from types import TracebackType
from typing import Any, Final

import pytest

from orchestrator.probe import PROBE_VERSION, RESULT_SCHEMA, neutral
from orchestrator.probe.atomic import write_chunks_atomic
from orchestrator.probe.deps import Deps
from orchestrator.probe.meter import METER, install, wrap_library_readers
from orchestrator.probe.record import (
    MESSAGE_LIMIT,
    PhaseRecord,
    harness_entry,
    read_only_write,
)
from orchestrator.probe.share import SELECTION_SIZE, register_share
from orchestrator.probe.spool import TestSpool

install()

RESULT_ENV: Final = "REPLAY_RESULT"
SEED_ENV: Final = "REPLAY_SEED"
FIXTURE_ENV: Final = "REPLAY_FIXTURE"
PROGRESS_FD_ENV: Final = "REPLAY_PROGRESS_FD"
# At most one progress line this often, but for the first test, a failing one and the last.
PROGRESS_EVERY_S: Final = 0.1
FAILING_OUTCOMES: Final = frozenset({"failed", "error"})
DEFAULT_SEED: Final = 0
SESSION: Final = "<session>"
SESSION_ERROR: Final = "session_error"

_NOT_FOUND_LINE = re.compile(r"(?:not found|found no collectors for):?\s+(?P<arg>\S.*)$")


def _message(value: BaseException) -> str:
    text = str(value) or type(value).__name__
    return text[:MESSAGE_LIMIT]


def progress_fd(environ: dict[str, str] | os._Environ[str]) -> int | None:
    """The descriptor named by $REPLAY_PROGRESS_FD, or None (unset or not a descriptor
    number above the standard three, which are the replay's log)."""
    raw = environ.get(PROGRESS_FD_ENV, "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 6:
        return None
    fd = int(raw)
    return fd if fd > 2 else None


def progress_outcome(setup: str | None, call: str | None, teardown: str | None) -> str:
    """One finished test's outcome on a progress line."""
    if call == "failed":
        return "failed"
    if setup == "failed" or teardown == "failed":
        return "error"
    if setup == "skipped" or call == "skipped":
        return "skipped"
    return "passed"


def read_seed(environ: dict[str, str] | os._Environ[str]) -> int:
    raw = environ.get(SEED_ENV, "").strip()
    if not raw:
        return DEFAULT_SEED
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{SEED_ENV} must be an integer, got {raw!r}") from None


def seed_generators(seed: int, random_state: tuple[Any, ...] | None = None) -> None:
    """Seed `random`, and numpy's global generator when numpy is already imported.

    `random_state`, when given, is `random.getstate()` taken right after
    `random.seed(seed)`: restoring it gives the same draws and skips re-running
    Mersenne Twister's key schedule for every test.
    """
    if random_state is None:
        random.seed(seed)
    else:
        random.setstate(random_state)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        # A numpy stub or a partial import must not break the run.
        with contextlib.suppress(Exception):
            numpy.random.seed(seed % 2**32)


class _SameFile:
    """Compares a traceback frame's file with a test file, resolving symlinks once."""

    def __init__(self) -> None:
        self._real: dict[str, str] = {}

    def real(self, filename: str) -> str:
        resolved = self._real.get(filename)
        if resolved is None:
            resolved = os.path.realpath(filename)
            self._real[filename] = resolved
        return resolved

    def __call__(self, filename: str, target: str) -> bool:
        return filename == target or self.real(filename) == self.real(target)


class ProbeSession:
    """Per-session recorder, registered by `pytest_configure`."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.result_path = os.environ.get(RESULT_ENV) or None
        self.fixture_path = os.environ.get(FIXTURE_ENV) or None
        self.seed = read_seed(os.environ)
        self.records: dict[str, PhaseRecord] = {}
        self.current: PhaseRecord | None = None
        # Encoded entries (see encode_entry), on disk beside the result as they finish.
        self.tests = TestSpool(self.result_path)
        self.skipped: list[dict[str, Any]] = []
        self.written = False
        self._same_file = _SameFile()
        self._fixture_bytes: bytes | None = None
        self._collect_read_only: dict[str, dict[str, Any]] = {}
        # Collectors already recorded as skipped or failed: a second collection (around a
        # module that skipped itself) reports them again.
        self._collectors_seen: set[str] = set()
        seed_generators(self.seed)
        self._random_state = random.getstate()
        self._progress_fd = progress_fd(os.environ)
        self._tests_done = 0
        self._tests_total = 0
        self._progress_pending = 0  # finished tests not yet on a progress line
        self._progress_outcome = "passed"  # the last of them
        self._progress_at = 0.0  # when the last line was written (monotonic)
        # The test whose body runs now: a call report made meanwhile is one of its subtests'.
        self._running: PhaseRecord | None = None
        self._session_error: str | None = None  # the entry of a session that failed

    # -- collection ---------------------------------------------------------------

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.nodeid in self._collectors_seen:  # a second collection (see below)
            return
        if report.skipped:  # a module (or package) that skips itself as it is imported
            self._collectors_seen.add(report.nodeid)
            self.skipped.append({"nodeid": report.nodeid, "reason": _skip_reason(report)})
            return
        if report.failed:
            self._collectors_seen.add(report.nodeid)
            nodeid = report.nodeid or SESSION
            read_only = self._collect_read_only.pop(report.nodeid, None)
            self.tests.add(
                harness_entry(nodeid, "collection_error", report.longreprtext, read_only)
            )

    def pytest_exception_interact(
        self, node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any], report: Any
    ) -> None:
        # A collector's exception is seen here only: its report carries text, not the error.
        if isinstance(report, pytest.CollectReport) and call.excinfo is not None:
            fact = read_only_write(call.excinfo.value, self.config.rootpath)
            if fact is not None:
                self._collect_read_only[report.nodeid] = fact

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, None]:
        outcome = yield
        excinfo = outcome.excinfo
        if excinfo is not None and isinstance(excinfo[1], pytest.UsageError):
            if self._collect_around_skipped_modules(session, excinfo[1]):
                outcome.force_result(None)  # the session goes on with the other arguments
                return
            self._record_usage_error(excinfo[1])

    def _not_found(self, error: pytest.UsageError) -> list[str]:
        """The node ids pytest reported it could not find (as rootdir-relative ids)."""
        found = []
        for argument in error.args:
            for line in str(argument).splitlines():
                match = _NOT_FOUND_LINE.search(line)
                if match is not None and not line.startswith("("):
                    found.append(self._relative_arg(match.group("arg").strip()))
        return found

    def _collect_around_skipped_modules(
        self, session: pytest.Session, error: pytest.UsageError
    ) -> bool:
        """A node id inside a module that skipped itself on import is "not found", and
        pytest then stops the whole session. When every argument it could not find lies in
        such a module, collect the other arguments again, so that they run (the skipped
        module's tests are listed as skipped through the module). False: not that case."""
        missing = self._not_found(error)
        skipped = {entry["nodeid"] for entry in self.skipped}
        if not missing or not all(_under_any(arg, skipped) for arg in missing):
            return False
        invoked = self.config.invocation_params.dir
        remaining = [
            arg
            for arg in self.config.args
            if self._relative_arg(_absolute_arg(arg, invoked)) not in missing
        ]
        try:
            session.perform_collect(remaining)
        except pytest.UsageError as again:  # not expected: pytest names every miss at once
            self._record_usage_error(again)
            session.items = []
        return True

    def _record_usage_error(self, error: pytest.UsageError) -> None:
        found_any = False
        for argument in error.args:
            for line in str(argument).splitlines():
                match = _NOT_FOUND_LINE.search(line)
                if match is None or line.startswith("("):
                    continue
                arg = match.group("arg").strip()
                self.tests.add(harness_entry(self._relative_arg(arg), "not_found", str(argument)))
                found_any = True
        if not found_any:
            message = "; ".join(str(a) for a in error.args)
            self.tests.add(harness_entry(SESSION, "usage_error", message))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._tests_total = self.config.stash.get(SELECTION_SIZE, len(session.items))

    def _relative_arg(self, arg: str) -> str:
        """A command-line argument as a node id (paths relative to the rootdir)."""
        path, sep, rest = arg.partition("::")
        if os.path.isabs(path):
            with contextlib.suppress(ValueError):
                path = Path(path).relative_to(self.config.rootpath).as_posix()
        return path + sep + rest

    # -- running --------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        wrap_library_readers()  # loaded by now, if a test module imported it
        record = PhaseRecord(nodeid)
        self.records[nodeid] = record
        self.current = record
        # Every test starts from the same random state, whatever ran before it.
        seed_generators(self.seed, self._random_state)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        record = self.records.get(item.nodeid)
        METER.start(record.declared if record is not None else ())
        started = perf_counter()
        if record is not None:  # a rerun (pytest-rerunfailures) starts its subtests afresh
            record.subtest_failure = record.subtest_pending = None
        self._running = record
        yield
        self._running = None
        elapsed = perf_counter() - started
        METER.stop()
        if record is not None:
            record.duration_ms = elapsed * 1000.0
            record.calls = METER.counts
            record.network = METER.network

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_fixture_setup(self) -> Generator[None, Any, None]:
        # A fixture the body asks for (request.getfixturevalue) is set up while it runs:
        # its calls are setup's, as before the body, and a wider-scoped one is set up only
        # by the first test that asks (the next would count nothing).
        metered = METER.active
        METER.active = False
        yield
        METER.active = metered

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        # A wrapper sees the exception after every other implementation: pytest's unittest
        # support hands a TestCase's real failure (its traceback and type) to `call` only
        # in its own makereport, so an earlier look finds no exception at all.
        metered = METER.active
        # A subtest's report is made while the body runs: pytest reading source files to
        # render its traceback is not the test's own dependency call.
        METER.active = False
        yield
        METER.active = metered
        self._record_failure(item, call)

    def _record_failure(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        excinfo = call.excinfo
        if excinfo is None:  # the pass path: nothing to record
            return
        record = self.records.get(item.nodeid)
        if record is None:
            return
        value = excinfo.value
        assertion_id, assertion_key = self._assertion(item, value, excinfo.tb)
        failure = (assertion_id, _message(value), assertion_key)
        if record is self._running:
            # A subtest's report, made while the body still runs: whether it failed is
            # the report's to say (an xfail mark turns a failure into a skip).
            record.subtest_pending = failure
        else:
            record.failures[call.when] = failure
        if record.read_only is None:
            record.read_only = read_only_write(value, self.config.rootpath)

    def _assertion(
        self, item: pytest.Item, value: BaseException, tb: TracebackType
    ) -> tuple[str, str]:
        """The failure's `assertion_id` and `assertion_key`, at the deepest frame in the
        test's file (the deepest frame of all when none is in it).

        id: `<nodeid>@<path>:<line>:<ExceptionType>`, readable. key:
        `<nodeid>@<qualname>+<offset>:<ExceptionType>`, the line as an offset from the
        first line of the enclosing function's definition, so lines inserted above the
        test leave it alone (a frame outside the test's file adds its path:
        `<nodeid>@<path>::<qualname>+<offset>:<ExceptionType>`). Both stay put when the
        code under test changes, because frames in other files are passed over.
        """
        own_file = str(item.path)
        own = self._deepest_in(tb, own_file)
        if own is None:
            # A test inherited from a class in another module (a mixin in the test
            # package's __init__.py): the file its function is defined in is its own.
            defined_in = _defining_file(item)
            if defined_in is not None:
                own = self._deepest_in(tb, defined_in)
        deepest: TracebackType = tb
        while deepest.tb_next is not None:
            deepest = deepest.tb_next
        exception = type(value).__name__
        frame = own if own is not None else deepest
        code = frame.tb_frame.f_code
        line = frame.tb_lineno
        offset = (line - code.co_firstlineno) if line is not None else 0
        # co_qualname is Python 3.11+; older runner images get the bare name.
        function = f"{getattr(code, 'co_qualname', code.co_name)}+{offset}"
        if own is not None and self._same_file(code.co_filename, own_file):
            location = f"{item.nodeid.split('::', 1)[0]}:{line}"
        else:
            path = self._relative_arg(code.co_filename)
            location = f"{path}:{line}"
            function = f"{path}::{function}"
        return (
            f"{item.nodeid}@{location}:{exception}",
            f"{item.nodeid}@{function}:{exception}",
        )

    def _deepest_in(self, tb: TracebackType, filename: str) -> TracebackType | None:
        """The deepest frame of ``tb`` in ``filename`` (None when none is)."""
        found: TracebackType | None = None
        cursor: TracebackType | None = tb
        while cursor is not None:
            if self._same_file(cursor.tb_frame.f_code.co_filename, filename):
                found = cursor
            cursor = cursor.tb_next
        return found

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = self.records.get(report.nodeid)
        if record is None:
            return
        when = report.when
        outcome = report.outcome
        if record is self._running:
            self._subtest_reported(record, report)
            return
        if when == "call":
            record.call = outcome
            if record.subtest_failure is not None and outcome in ("passed", "failed"):
                # pytest counts a failed subtest as a failure (and exits 1) even when the
                # test's own report passed (unittest's subTest under pytest 9, older
                # pytest-subtests): the test failed, first where its first subtest did.
                record.call = "failed"
                record.failures["call"] = record.subtest_failure
            if outcome == "passed":
                xfail_reason = getattr(report, "wasxfail", None)
                if xfail_reason is not None:  # a non-strict xpass: not a verdict
                    record.skip_reason = f"xpassed: {xfail_reason}".rstrip(": ")
            elif outcome == "skipped":
                record.skip_reason = _skip_reason(report)
            elif "call" not in record.failures:
                # A failure without an exception (strict xpass, a plugin's verdict).
                record.failures["call"] = _failure_without_exception(report)
        elif when == "setup":
            record.setup = outcome
            if outcome == "skipped":
                record.skip_reason = _skip_reason(report)
        else:
            record.teardown = outcome
            self._finish(record)
            if self._progress_fd is not None:
                self._report_progress(progress_outcome(record.setup, record.call, outcome))

    def _subtest_reported(self, record: PhaseRecord, report: pytest.TestReport) -> None:
        """A subtest's report (made while its test's body runs): only a failure counts; a
        subtest that passed, skipped or xfailed leaves the test's verdict to the test."""
        pending, record.subtest_pending = record.subtest_pending, None
        if report.outcome != "failed" or record.subtest_failure is not None:
            return
        record.subtest_failure = pending or _failure_without_exception(report)

    def _report_progress(self, outcome: str) -> None:
        """Count a finished test; a line for it and those before it when one is due: the
        first test's, a failing test's and the selection's last at once, else at most one
        every PROGRESS_EVERY_S (a line per test was a write through the engine's log
        stream per test, and work for the host's reader)."""
        if self._progress_fd is None:
            return
        self._tests_done += 1
        self._progress_pending += 1
        self._progress_outcome = outcome
        now = monotonic()
        if (
            self._tests_done == 1
            or outcome in FAILING_OUTCOMES
            or self._tests_done >= self._tests_total
            or now - self._progress_at >= PROGRESS_EVERY_S
        ):
            self._write_progress(now)

    def _write_progress(self, now: float) -> None:
        """``test <done>/<total> <outcome>``, then `` +<n>`` when the line counts n tests
        (the ones since the last line; the outcome is the last one's)."""
        fd, count = self._progress_fd, self._progress_pending
        if fd is None or count == 0:
            return
        self._progress_pending, self._progress_at = 0, now
        total = max(self._tests_total, self._tests_done)
        more = f" +{count}" if count > 1 else ""
        line = f"test {self._tests_done}/{total} {self._progress_outcome}{more}\n"
        try:
            os.write(fd, line.encode("ascii"))
        except OSError:  # closed by a test, or the reader went away: progress is cosmetic
            self._progress_fd = None

    def _finish(self, record: PhaseRecord) -> None:
        encoded = record.encoded()
        if encoded is None:
            self.skipped.append({"nodeid": record.nodeid, "reason": record.skip_reason})
        else:
            self.tests.add(encoded)
        self.records.pop(record.nodeid, None)
        if self.current is record:
            self.current = None

    # -- writing --------------------------------------------------------------------

    # The innermost wrapper: it writes before any plugin's own session end runs, and it is
    # the first to see one fail (an outer wrapper re-raising, such as the terminal
    # reporter's, would end the teardown of the others under pluggy 1.0).
    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, Any, None]:
        self.write(int(exitstatus))
        outcome = yield
        error = outcome.excinfo[1] if outcome.excinfo is not None else None
        if error is not None and not isinstance(error, pytest.exit.Exception):
            # A later hook raised: pytest ends without a verdict of its own (plain pytest
            # prints the traceback and exits non-zero), so the result says so too.
            self._session_failed(error)
            self.written = False
            self.write(int(exitstatus))

    def pytest_internalerror(
        self, excrepr: object, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> None:
        """pytest's INTERNALERROR (a plugin's hook raised around the tests, e.g. pytest-cov
        writing its data into the read-only tree): the session's end is no verdict."""
        self._session_failed(excinfo.value)

    def _session_failed(self, error: BaseException) -> None:
        if self._session_error is not None:
            return  # the first one is the cause
        message = f"the pytest session failed: {type(error).__name__}: {_message(error)}"
        read_only = read_only_write(error, self.config.rootpath)
        self._session_error = harness_entry(SESSION, SESSION_ERROR, message, read_only)

    def write(self, exit_status: int | None) -> None:
        if self.written:
            return
        self.written = True
        self._write_progress(monotonic())  # the tests since the last line
        for record in list(self.records.values()):
            self._finish(record)  # tests the session abandoned mid-way
        if self.result_path is None:
            return
        document = {
            "schema": RESULT_SCHEMA,
            "probe_version": PROBE_VERSION,
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "seed": self.seed,
            "fixture": self.fixture_path,
            "exit_status": exit_status,
            "skipped": self.skipped,
            # The plugins of orchestrator/probe/neutral.py this session had (neutralised).
            "neutralised": neutral.present(self.config),
        }
        # "tests" sorts after every other key, so appending it to the encoded rest gives
        # the bytes `json.dumps(..., sort_keys=True)` of the whole document would.
        head = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        extra = () if self._session_error is None else (self._session_error,)
        opening = f'{head[:-1]},"tests":['.encode()
        chunks = itertools.chain((opening,), self.tests.chunks(extra), (b"]}",))
        write_chunks_atomic(self.result_path, chunks)

    # -- fixture support ---------------------------------------------------------------

    def declare(self, name: str) -> None:
        if self.current is not None:
            self.current.declare(name)

    def fixture_document(self) -> Any:
        if self.fixture_path is None:
            raise RuntimeError(f"{FIXTURE_ENV} is not set: this replay has no pinned fixture")
        if self._fixture_bytes is None:
            with open(self.fixture_path, "rb") as handle:  # no Path: see probe/atomic.py
                self._fixture_bytes = handle.read()
        # Parsed afresh per test so no test sees another's mutations.
        return json.loads(self._fixture_bytes)


def _failure_without_exception(report: pytest.TestReport) -> tuple[str, str, str]:
    """A failed report with no exception to place (a strict xpass, a plugin's verdict): at
    the test's ``def``, as ``Failed``: (assertion_id, message, assertion_key)."""
    location = f"{report.location[0]}:{(report.location[1] or 0) + 1}"
    function = report.location[2].split("[", 1)[0]
    return (
        f"{report.nodeid}@{location}:Failed",
        report.longreprtext[:MESSAGE_LIMIT],
        f"{report.nodeid}@{function}+0:Failed",
    )


def _under_any(nodeid: str, parents: set[str]) -> bool:
    """Is ``nodeid`` one of ``parents`` or inside one of them (a module, a directory)?"""
    return any(
        nodeid == parent or nodeid.startswith((parent + "::", parent.rstrip("/") + "/"))
        for parent in parents
    )


def _absolute_arg(arg: str, invoked: Path) -> str:
    """A command-line argument with its path made absolute against the invocation folder."""
    path, sep, rest = arg.partition("::")
    return os.path.normpath(invoked / path) + sep + rest


def _defining_file(item: pytest.Item) -> str | None:
    """The file the test's function is written in (its decorators unwrapped), or None."""
    function: Any = getattr(item, "obj", None)
    with contextlib.suppress(Exception):  # a test object of a kind we cannot read
        seen = 0
        while hasattr(function, "__wrapped__") and seen < 100:  # a cycle is no chain
            function = function.__wrapped__
            seen += 1
        function = getattr(function, "__func__", function)  # a bound method
        code = getattr(function, "__code__", None)
        if code is not None:
            return str(code.co_filename)
    return None


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    xfail_reason = getattr(report, "wasxfail", None)
    if xfail_reason is not None:
        return f"xfailed: {xfail_reason}".rstrip(": ")
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    # pytest prefixes the reason it was given; the reason alone is what people wrote.
    prefix = "Skipped: "
    return text[len(prefix) :] if text.startswith(prefix) else text


_SESSION_KEY = pytest.StashKey[ProbeSession]()


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser
) -> Generator[None, Any, None]:
    """Once the initial conftests are in: inert stand-ins for what a replay switched off
    or blocked (orchestrator/probe/neutral.py). A session that died here (a plugin or an
    initial conftest writing into the read-only tree: pytest-cov erasing .coverage) never
    reaches the probe's session: its result is written here, when a read-only write was
    the cause."""
    outcome = yield
    if outcome.excinfo is None:
        neutral.register_stand_ins(parser)
        return
    error = outcome.excinfo[1]
    if read_only_write(error, early_config.rootpath) is not None:
        probe = ProbeSession(early_config)
        probe._session_failed(error)
        probe.write(None)


# First of every plugin's configure: a session another plugin's configure breaks (an
# INTERNALERROR) still has its probe, and says why.
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    install()  # idempotent; covers a module imported before a previous session ended
    neutral.register_markers(config)
    probe = ProbeSession(config)
    config.stash[_SESSION_KEY] = probe
    config.pluginmanager.register(probe, "replay-probe-session")
    register_share(config)  # one worker of a split replay keeps its share of the tests


def pytest_unconfigure(config: pytest.Config) -> None:
    probe = config.stash.get(_SESSION_KEY, None)
    if probe is not None:
        probe.write(None)  # no-op when the session already wrote its result
        probe.tests.remove()
        config.pluginmanager.unregister(probe)


def _probe(request: pytest.FixtureRequest) -> ProbeSession:
    return request.config.stash[_SESSION_KEY]


@pytest.fixture
def deps(request: pytest.FixtureRequest) -> Deps:
    """Fake clocks (`deps.clock(start=...)`) and spies (`deps.spy(name, fn)`) the probe counts."""
    return Deps(_probe(request).declare)


@pytest.fixture
def replay_seed(request: pytest.FixtureRequest) -> int:
    """The replay's seed ($REPLAY_SEED, default 0); `random` is already seeded with it."""
    return _probe(request).seed


@pytest.fixture
def replay_fixture(request: pytest.FixtureRequest) -> Any:
    """The pinned JSON fixture named by $REPLAY_FIXTURE, parsed afresh for each test."""
    return _probe(request).fixture_document()
