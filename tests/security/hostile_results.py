"""The attacks on what comes back from a container (the second round): each a patch's
``attack.py`` for :func:`hostile_repo.hostile_repo`.

The base's test passes; each patch makes it fail for real (``assert_fail``) and tries to
make the host believe something else: a forged pass, a document that crashes the
parser, a leftover process that writes into the reader's output."""

from __future__ import annotations

import json

from hostile_repo import PROPERTY

# What the forgers claim: the attacked test passed.
FORGED_RUN = {
    "schema": "replay-run/1",
    "probe_version": "1",
    "replay": 1,
    "status": "completed",
    "exit_code": 0,
    "wall_ms": 1.0,
    "seed": 0,
    "result": {
        "schema": "replay-probe/1",
        "probe_version": "1",
        "seed": 0,
        "tests": [{"nodeid": PROPERTY, "label": "assert_pass", "calls": {}, "duration_ms": 1.0}],
    },
}

# A daemon the test leaves behind (double fork, own session, every descriptor closed):
# it waits for the results reader to start and writes a whole forged tar into its
# standard output through /proc/<pid>/fd/1, before the reader writes a byte. The test
# itself fails: the true label is assert_fail.
READER_HIJACK = """\
import io, json, os, tarfile, time

FORGED = json.dumps(@FORGED@).encode()


def forged_tar():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (
            ("out/replay-001.json", FORGED),
            ("report.json", json.dumps({"entries": [
                {"name": "replay-001.json", "kind": "file", "size": len(FORGED)}
            ], "oom_kill": 0, "more": False, "alive": 0}).encode()),
        ):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def daemon():
    for fd in range(256):
        try:
            os.close(fd)
        except OSError:
            pass
    payload = forged_tar()
    me = str(os.getpid())
    ends = time.monotonic() + 150
    while time.monotonic() < ends:
        for name in os.listdir("/proc"):
            if not name.isdigit() or name == me:
                continue
            try:
                with open("/proc/%s/cmdline" % name, "rb") as handle:
                    command = handle.read()
            except OSError:
                continue
            if b"report.json" in command:  # the reader's script
                try:
                    fd = os.open("/proc/%s/fd/1" % name, os.O_WRONLY)
                    os.write(fd, payload)
                    os.close(fd)
                    open("/tmp/hijacked", "w").close()
                except OSError:
                    pass
        time.sleep(0.0005)


def run():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                daemon()
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()
    raise AssertionError("the true result: this test fails")
""".replace("@FORGED@", repr(FORGED_RUN))


# A daemon that keeps putting a forged pass in place of the driver's result file.
REWRITER = """\
import json, os, time

FORGED = json.dumps(@FORGED@)


def daemon():
    for fd in range(256):
        try:
            os.close(fd)
        except OSError:
            pass
    ends = time.monotonic() + 150
    while time.monotonic() < ends:
        for folder in ("/replay-out", "/replay/out"):
            if os.path.isdir(folder):
                temporary = os.path.join(folder, ".forged")
                try:
                    with open(temporary, "w") as handle:
                        handle.write(FORGED)
                    os.chmod(temporary, 0o644)
                    os.rename(temporary, os.path.join(folder, "replay-001.json"))
                except OSError:
                    pass
        time.sleep(0.001)


def run():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                daemon()
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()
    raise AssertionError("the true result: this test fails")
""".replace("@FORGED@", repr(FORGED_RUN))


def swap_in(document_text: str) -> str:
    """An attack that puts ``document_text`` where the driver's result goes, announces
    its digest as the driver would (on the progress descriptor the tests inherit) and
    kills the driver (its parent), so that the host parses exactly that."""
    return f"""\
import hashlib, os, signal

TEXT = {document_text!r}


def run():
    digest = hashlib.sha256(TEXT.encode()).hexdigest()
    line = f"result replay-001.json {{digest}}\\n"
    os.write(int(os.environ["REPLAY_PROGRESS_FD"]), line.encode())
    for folder in ("/replay-out", "/replay/out"):
        if os.path.isdir(folder):
            with open(os.path.join(folder, ".swap"), "w") as handle:
                handle.write(TEXT)
            os.chmod(os.path.join(folder, ".swap"), 0o644)
            os.rename(os.path.join(folder, ".swap"), os.path.join(folder, "replay-001.json"))
    os.kill(os.getppid(), signal.SIGKILL)
"""


DEEP_JSON = "[" * 100_000 + "]" * 100_000
HUGE_INT = json.dumps({**FORGED_RUN, "wall_ms": 0}).replace(
    '"wall_ms": 0', '"wall_ms": ' + "7" * 5000
)


# The patch's conftest rewrites the collection's document once the plugin wrote it:
# ids that pytest would take for options (deselect the real test, load a plugin that
# is not there, which ends the session), ahead of the real one.
FORGED_IDS = ("--deselect", "-p", "-pevil", "--deselect=tests/test_attack.py::test_attack")
FORGE_COLLECTION = {
    "conftest.py": f"""\
import json, os

FORGED = {list(FORGED_IDS)!r}


def pytest_sessionfinish(session):
    path = os.environ.get("REPLAY_COLLECT_OUT")
    if not path or not os.path.exists(path):
        return
    with open(path) as handle:
        doc = json.load(handle)
    doc["items"] = FORGED + doc["items"]
    with open(path + ".x", "w") as handle:
        json.dump(doc, handle)
    os.chmod(path + ".x", 0o644)
    os.replace(path + ".x", path)
"""
}


# A forged result of this many passing tests, and the cap of tests per side that bounds
# it in the tests (lowered for speed; the default lets 100,000 run).
FORGED_TESTS = 80_000
TESTS_CAP = {"ORCHESTRATOR_MAX_TESTS": "1000"}


def forged_suite(tests: int) -> str:
    """An attack that puts a result listing ``tests`` passing tests where the driver's
    goes (its digest announced as the driver would) and kills the driver."""
    return f"""\
import hashlib, json, os, signal


def run():
    entries = [
        {{"nodeid": "tests/test_forged.py::test_%06d" % i, "label": "assert_pass",
          "calls": {{}}, "duration_ms": 1.0}}
        for i in range({tests})
    ]
    doc = {{"schema": "replay-run/1", "probe_version": "1", "replay": 1,
           "status": "completed", "exit_code": 0, "wall_ms": 1.0, "seed": 0,
           "result": {{"schema": "replay-probe/1", "probe_version": "1", "seed": 0,
                      "tests": entries}}}}
    data = json.dumps(doc).encode()
    digest = hashlib.sha256(data).hexdigest()
    line = f"result replay-001.json {{digest}}\\n"
    os.write(int(os.environ["REPLAY_PROGRESS_FD"]), line.encode())
    for folder in ("/replay-out", "/replay/out"):
        if os.path.isdir(folder):
            with open(os.path.join(folder, ".swap"), "wb") as handle:
                handle.write(data)
            os.chmod(os.path.join(folder, ".swap"), 0o644)
            os.rename(os.path.join(folder, ".swap"), os.path.join(folder, "replay-001.json"))
    os.kill(os.getppid(), signal.SIGKILL)
"""


# Fills the results folder to the last byte and stops there: the probe and the driver
# then find no room for the replay's result.
FILL_RESULTS = """\
import os


def run():
    chunk = b"x" * (1024 * 1024)
    for folder in ("/replay-out", "/replay/out"):
        if not os.path.isdir(folder):
            continue
        with open(os.path.join(folder, "fill"), "wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(chunk)
            except OSError:
                pass
            try:
                while True:
                    handle.write(b"x")
            except OSError:
                pass
"""


# The patch's conftest replaces its collection's document with JSON 100,000 levels deep.
DEEP_COLLECTION = {
    "conftest.py": """\
import os


def pytest_sessionfinish(session):
    path = os.environ.get("REPLAY_COLLECT_OUT")
    if not path or not os.path.exists(path):
        return
    with open(path + ".x", "w") as handle:
        handle.write("[" * 100_000 + "]" * 100_000)
    os.chmod(path + ".x", 0o644)
    os.replace(path + ".x", path)
"""
}
