"""Result files come back from a container without the host ever opening its folder.

The results folder is a tmpfs inside the container (``/replay-out``): the tree under
test can write into it, so the host must not follow what it finds there. After the
driver ends (or at our deadline, before the container is killed) the tool runs three
small scripts in the same container (``docker exec``, ``python -I -S``: no
``PYTHONPATH``, no ``site``, nothing of the tree imported), each kept small for a
reviewer:

1. :data:`REAPER_SCRIPT`, as the container's user (the tree's): kills every process of
   the container but its init (pid 1) and its idle process, again and again until
   ``/proc`` shows none, so that nothing the tree left behind (a daemon in its own
   session, a driver still running at the deadline) is alive when the results are read.
   The idle process is the earliest-started child of the init: a process of the tree
   starts later (in an exec) whatever command line it copies.
2. :data:`READER_SCRIPT`, as :data:`READER_USER` (not the tree's user: no process of the
   tree can open its ``/proc/<pid>/fd/1``, signal it or trace it, even one that
   survived): counts the processes still alive besides the init, the idle process and
   itself (any: the folder is refused), ``lstat``s every top-level entry, opens regular
   files with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never blocks it, a symlink is never
   followed) and writes a tar to its standard output: one member ``out/<name>`` per
   regular file under the cap, and a last member ``report.json`` listing every entry of
   a wanted name (name, kind, size), the container's OOM-kill count and the count of
   processes alive.
3. :data:`EMPTIER_SCRIPT`, as the container's user, only for a container kept for the
   screening's second phase: empties the folder but for the entries whose names it was
   told to keep, and says whether that worked.

The host reads the reader's stream with byte caps (:func:`read_results_stream`), its
JSON within bounds (:mod:`orchestrator.core.bounded_json`), and decides with
:mod:`orchestrator.core.result_files`; a replay file is taken only when its bytes are
the one version the driver announced on its output (:func:`checked_against`).

Whatever the tree did in its container, the worst it can win is its own verdict: the
host only ever takes bytes from a capped stream written by a process the tree cannot
reach.

This module then turns ``replay-<k>.json`` bytes into :class:`ReplayFile` values
(``ok``, ``missing``, ``corrupt``, ``unsafe`` or ``full``) and never raises for one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tarfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.core import bounded_json, result_files, run_limits
from orchestrator.core.labels import ReplayFile, run_doc_problem, tests_named
from orchestrator.core.result_entries import compact_objects
from orchestrator.core.result_files import ResultEntry
from orchestrator.core.run_limits import RunCaps

REPORT = "report.json"
_REPORT_BYTES = 1024 * 1024
# The reaper's and emptier's output (a line each) and how long the reaper may take.
_STATUS_BYTES = 4096
REAP_S = 10.0
# The user the reader runs as: not the tree's (uid 1000), so that no process of the tree
# can open its descriptors (/proc/<pid>/fd), signal it or trace it (the kernel checks the
# uid for each). The container drops every capability, so this root reads no more than
# any user: the results folder is 1777 and the driver's files 0644. Its group is the
# container's user's, so an image whose interpreter only that group may reach still
# runs it.
READER_USER = "0:1000"

# What the reaper and the reader agree on: the live processes of the container but
# pid 1 (its init) and the caller, and which of them is the container's own idle
# process: the earliest-started child of the init. A process of the tree cannot start
# before it (the tree starts in an exec, after the container), so its command line,
# which it can copy, is never what tells them apart.
_PROCESSES = r"""
import os
INITS = ("docker-init", "podman-init", "tini", "catatonit", "dumb-init", "init")
def stat_of(pid):
    with open("/proc/%d/stat" % pid, "rb") as handle:
        data = handle.read()
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])
def live_others():
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, os.getpid()):
            continue
        try:
            state, ppid, start = stat_of(int(name))
        except (OSError, ValueError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found[int(name)] = (ppid, start)
    return found
def idle_of(found):
    try:
        with open("/proc/1/comm") as handle:
            if handle.read().strip() not in INITS:
                return None
    except OSError:
        return None
    children = sorted((start, pid) for pid, (ppid, start) in found.items() if ppid == 1)
    return children[0][1] if children else None
def strays():
    found = live_others()
    idle = idle_of(found)
    return sorted(pid for pid in found if pid != idle)
"""

# Runs in the container as its user (the tree's), before the reader: kills every process
# but the init, the idle process and itself, again and again until none is left (a
# process may fork while its siblings die) or REAP_S passes; prints how many it killed
# and how many it could not. The reader checks for itself.
REAPER_SCRIPT = (
    _PROCESSES
    + r"""
import json, signal, sys, time
deadline = time.monotonic() + float(sys.argv[1])
killed, left = 0, []
while time.monotonic() < deadline:
    left = strays()
    if not left:
        break
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    time.sleep(0.002)
print(json.dumps({"killed": killed, "left": len(left)}))
"""
)

# Runs in the container with the image's Python (stdlib only) as READER_USER. argv:
# folder, file cap, entry limit, wanted names, [check processes]. Kept small: it is
# read by a reviewer, not imported.
READER_SCRIPT = (
    _PROCESSES
    + r"""
import io, json, re, stat, sys, tarfile
out, cap, limit, wanted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
check = len(sys.argv) > 5 and sys.argv[5] == "processes"
alive = len(strays()) if check else None
KINDS = ((stat.S_ISREG, "file"), (stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "fifo"),
         (stat.S_ISDIR, "directory"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"),
         (stat.S_ISSOCK, "socket"))
def kind_of(mode):
    for test, name in KINDS:
        if test(mode):
            return name
    return "other"
names = []
try:
    with os.scandir(out) as found:
        for entry in found:
            names.append(entry.name)
            if len(names) > limit:
                break
except OSError:
    pass
tar = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
entries = []
for name in sorted(names):
    if not re.fullmatch(wanted, name):
        continue
    path = os.path.join(out, name)
    try:
        info = os.lstat(path)
    except OSError:
        continue
    kind, size = kind_of(info.st_mode), info.st_size
    if kind == "file" and size <= cap:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError("not a regular file")
                chunks, left = [], cap + 1
                while left > 0:
                    chunk = os.read(fd, min(left, 1 << 20))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= len(chunk)
            finally:
                os.close(fd)
        except OSError:
            kind = "other"
        else:
            data = b"".join(chunks)
            size = len(data)
            if size <= cap:
                member = tarfile.TarInfo("out/" + name)
                member.size = size
                tar.addfile(member, io.BytesIO(data))
    entries.append({"name": name, "kind": kind, "size": size})
oom = None
for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError:
        continue
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            oom = int(value.strip())
    break
report = {"entries": entries, "oom_kill": oom, "more": len(names) > limit, "alive": alive}
report = json.dumps(report).encode()
member = tarfile.TarInfo("report.json")
member.size = len(report)
tar.addfile(member, io.BytesIO(report))
tar.close()
"""
)

# Runs in the container as its user, after the reader, for a container kept for a
# second phase: empties the folder but for the names it is told to keep; prints
# "emptied" when nothing else is left. argv: folder, names to keep.
EMPTIER_SCRIPT = r"""
import os, re, shutil, sys
out, keep = sys.argv[1], sys.argv[2]
emptied = True
try:
    with os.scandir(out) as found:
        doomed = [entry for entry in found if not re.fullmatch(keep, entry.name)]
    for entry in doomed:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            emptied = False
except OSError:
    emptied = False
print("emptied" if emptied else "not emptied")
"""


# The names the host asks for: the driver's results and the collection's; the driver's
# other files there (a replay's output, its rewrite cache) stay in the container.
WANTED = r"replay-[0-9]{3}\.json|collected\.json"


def reader_command(
    interpreter: str, folder: str, wanted: str = WANTED, *, processes: bool = False
) -> list[str]:
    """The reader's command line in the container (run it as :data:`READER_USER`); with
    ``processes`` its report says how many processes other than the container's init
    and idle process were alive when it started. Pure."""
    return [
        interpreter,
        "-I",
        "-S",
        "-c",
        READER_SCRIPT,
        folder,
        str(result_files.FILE_BYTES),
        str(result_files.ENTRIES),
        wanted,
        *(("processes",) if processes else ()),
    ]


def reaper_command(interpreter: str, seconds: float = REAP_S) -> list[str]:
    """The reaper's command line (run it as the container's user). Pure."""
    return [interpreter, "-I", "-S", "-c", REAPER_SCRIPT, f"{seconds:g}"]


def emptier_command(interpreter: str, folder: str, keep: str) -> list[str]:
    """The emptier's command line (run it as the container's user). Pure."""
    return [interpreter, "-I", "-S", "-c", EMPTIER_SCRIPT, folder, keep]


def status_line(chunks: Iterable[bytes]) -> str:
    """The first line of a small helper's output, read to at most a few KiB."""
    taken = b""
    for chunk in chunks:
        taken += chunk
        if len(taken) > _STATUS_BYTES:
            break
    return taken[:_STATUS_BYTES].decode("utf-8", "replace").partition("\n")[0].strip()


@dataclass(frozen=True, kw_only=True)
class ResultsRead:
    """What came back from one container's results folder.

    ``files``: name -> bytes of the entries the host accepts; ``unsafe``: name -> why an
    entry was refused; ``problem``: why the whole folder was refused (nothing in
    ``files`` then); ``oom_kill``: the container's OOM-kill count, when it could tell;
    ``emptied``: whether the emptier emptied the folder after it was read (None: it was
    not asked to); ``full``: the results the driver said it had no room to write.
    """

    files: Mapping[str, bytes] = field(default_factory=dict)
    unsafe: Mapping[str, str] = field(default_factory=dict)
    problem: str | None = None
    oom_kill: int | None = None
    emptied: bool | None = None
    full: frozenset[str] = frozenset()
    # The stream was no tar at all (empty, or cut before its first member): what an exec
    # whose output the engine lost looks like (moby/moby#27289), so worth asking again.
    unreadable: bool = False


class _CappedStream(io.RawIOBase):
    """A file object over byte chunks that refuses to read past ``cap`` bytes."""

    def __init__(self, chunks: Iterable[bytes], cap: int) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""
        self._cap = cap
        self.taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self.taken += len(chunk)
            if self.taken > self._cap:
                raise _OverCap
            self._buffer = chunk
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


class _OverCap(Exception):
    pass


def read_results_stream(chunks: Iterable[bytes], *, cap: int | None = None) -> ResultsRead:
    """Parse the reader's tar stream under byte caps; never raises for what it holds."""
    stream = _CappedStream(chunks, result_files.STREAM_BYTES if cap is None else cap)
    bodies: dict[str, bytes] = {}
    report: Any = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                if not member.isreg():
                    continue
                limit = _REPORT_BYTES if member.name == REPORT else result_files.FILE_BYTES
                if member.size > limit:
                    over = f"the results stream holds {member.name!r} over its cap"
                    return ResultsRead(problem=over)
                source = archive.extractfile(member)
                data = source.read() if source is not None else b""
                if member.name == REPORT:
                    report = bounded_json.loads(data)
                elif member.name.startswith("out/"):
                    bodies[member.name[4:]] = data
    except _OverCap:
        return ResultsRead(problem="the results folder is over its size cap")
    except (tarfile.TarError, EOFError, OSError, ValueError) as error:  # JsonRefused too
        return ResultsRead(
            problem=f"the results stream is not readable ({type(error).__name__})",
            unreadable=report is None and not bodies,
        )
    return _judge(report, bodies)


def _judge(report: Any, bodies: Mapping[str, bytes]) -> ResultsRead:
    if not isinstance(report, dict) or not isinstance(report.get("entries"), list):
        return ResultsRead(problem="the results reader gave no report")
    oom = report.get("oom_kill")
    oom_kill = oom if isinstance(oom, int) and not isinstance(oom, bool) else None
    raw_entries = report["entries"]
    alive = report.get("alive")
    # The reader stops listing past the limit, wanted names or not: refused whole.
    seen = result_files.ENTRIES + 1 if report.get("more") is True else len(raw_entries)
    problem = result_files.folder_problem(seen)
    if problem is None and alive is not None:
        problem = result_files.stray_problem(alive)
    if problem is not None:
        return ResultsRead(problem=problem, oom_kill=oom_kill)
    files: dict[str, bytes] = {}
    unsafe: dict[str, str] = {}
    for raw in raw_entries:
        entry = _entry(raw)
        if entry is None:
            return ResultsRead(problem="the results report is malformed", oom_kill=oom_kill)
        refused = result_files.entry_problem(entry)
        body = bodies.get(entry.name)
        if refused is None and (body is None or len(body) != entry.size):
            refused = f"{entry.name} changed while it was read"
        if refused is not None:
            unsafe[entry.name] = refused
        elif body is not None:
            files[entry.name] = body
    return ResultsRead(files=files, unsafe=unsafe, oom_kill=oom_kill)


def checked_against(
    read: ResultsRead,
    announced: Mapping[str, AbstractSet[str]],
    full: AbstractSet[str] = frozenset(),
) -> ResultsRead:
    """``read`` with every replay file whose bytes the driver did not announce (exactly
    one version of) moved to ``unsafe``, and the names the driver said it had no room
    to write (``full``)."""
    files = dict(read.files)
    unsafe = dict(read.unsafe)
    for name, data in read.files.items():
        if result_files.ANNOUNCED_NAME.fullmatch(name):
            problem = result_files.announced_problem(
                name, hashlib.sha256(data).hexdigest(), announced
            )
            if problem is not None:
                del files[name]
                unsafe[name] = problem
    return replace(read, files=files, unsafe=unsafe, full=frozenset(full))


def _entry(raw: Any) -> ResultEntry | None:
    if not isinstance(raw, dict):
        return None
    name, kind, size = raw.get("name"), raw.get("kind"), raw.get("size")
    if not isinstance(name, str) or not isinstance(kind, str) or not isinstance(size, int):
        return None
    return ResultEntry(name=name, kind=kind, size=size)


def replay_file_name(replay: int) -> str:
    return f"replay-{replay:03d}.json"


# Large result files are parsed one at a time: the sides' threads would only take turns
# at the interpreter anyway, and each parse holds a copy or two of its file meanwhile.
_LARGE = 1 << 20
_ONE_LARGE_PARSE = threading.Lock()


def parse_replay_bytes(raw: bytes, replay: int, *, max_tests: int | None = None) -> ReplayFile:
    """One result file's bytes as a :class:`ReplayFile` (``ok`` or ``corrupt``): JSON
    within bounds (:mod:`orchestrator.core.bounded_json`), a ``replay-run/1`` document,
    naming at most ``max_tests`` tests (default: the cap of tests per side,
    :mod:`orchestrator.core.run_limits`). Its test entries are held compactly
    (:mod:`orchestrator.core.result_entries`: the same keys and values)."""
    try:
        with _ONE_LARGE_PARSE if len(raw) > _LARGE else contextlib.nullcontext():
            doc = bounded_json.loads(raw, object_pairs_hook=compact_objects())
    except bounded_json.JsonRefused as error:
        return ReplayFile(replay=replay, state="corrupt", problem=str(error))
    problem = run_doc_problem(doc)
    if problem is None:
        caps = RunCaps(max_tests=max_tests) if max_tests is not None else host_caps()
        problem = run_limits.too_many_tests(tests_named(doc), caps)
    if problem is not None:
        return ReplayFile(replay=replay, state="corrupt", problem=problem)
    return ReplayFile(replay=replay, state="ok", doc=doc)


def host_caps() -> RunCaps:
    """The caps the CI owner set (checked when the run folder was started), else the
    defaults."""
    try:
        return run_limits.run_caps(os.environ)
    except ValueError:
        return RunCaps()


def replay_file_from(read: ResultsRead, replay: int) -> ReplayFile:
    """Replay ``replay``'s file out of what came back: unsafe, missing, corrupt or ok."""
    name = replay_file_name(replay)
    problem = read.problem or read.unsafe.get(name)
    if problem is not None:
        return ReplayFile(replay=replay, state="unsafe", problem=problem)
    raw = read.files.get(name)
    if raw is None:
        return ReplayFile(replay=replay, state="full" if name in read.full else "missing")
    return parse_replay_bytes(raw, replay)


def replay_files_from(read: ResultsRead, replays: int) -> tuple[ReplayFile, ...]:
    return tuple(replay_file_from(read, k) for k in range(1, replays + 1))
