"""End the process without the interpreter's teardown once a command's work is done.

Tearing down the interpreter after a whole-suite replay (SQLAlchemy, the Docker SDK,
requests and over 100,000 objects of decisions) takes 0.1-0.3 s on a quiet machine and
0.5-0.7 s on a busy one, after the last line is printed and the run folder is complete.
A command that has finished everything it owes (files written and closed, containers
removed, the ledger closed) calls :func:`allow`; the console script then calls
:func:`exit_now` with the exit status, which ends the process with ``os._exit`` only when
nothing can be lost by skipping the teardown:

- the status is a number (a message status still has to be printed by the usual exit);
- no thread other than this one is alive and not a daemon (the usual exit joins them);
- every ``atexit`` handler has run (logging's flush, thread pools, temporary folders'
  finalizers), once: they are run here, and the interpreter clears them as they run;
- both standard streams flush without error (a closed pipe takes the usual exit, which
  reports it as it always did);
- no file object other than the standard streams is open for writing (found by walking
  the collector's objects, 10-30 ms): its buffer would be lost. Objects open only for
  reading (the Docker SDK's response sockets, say) lose nothing.

Otherwise the usual exit runs. Standard library only; every room may use it.
"""

from __future__ import annotations

import _io
import atexit
import gc
import os
import sys
import threading

_allowed = False


def allow() -> None:
    """The running command has finished its work: the process may end promptly."""
    global _allowed
    _allowed = True


def exit_now(status: object) -> None:
    """End the process now with ``status`` if the command allowed it and nothing would be
    lost; return otherwise (the caller goes on with the usual exit)."""
    if not _allowed:
        return
    if status is None:
        status = 0
    if not isinstance(status, int) or isinstance(status, bool):
        return
    if _other_threads_alive():
        return
    atexit._run_exitfuncs()
    if not _flushed(sys.stdout) or not _flushed(sys.stderr):
        return
    if _writable_files_open():
        return
    os._exit(status & 0xFF)


def _other_threads_alive() -> bool:
    current = threading.current_thread()
    return any(
        thread is not current and thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
    )


def _flushed(stream: object) -> bool:
    if stream is None:
        return True
    try:
        stream.flush()  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return False
    return True


def _writable_files_open() -> bool:
    standard = {
        id(stream)
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
        if stream is not None
    }
    # The buffers and raw files beneath the standard streams are theirs too.
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        inner = getattr(stream, "buffer", None)
        while inner is not None:
            standard.add(id(inner))
            inner = getattr(inner, "raw", None)
    for item in gc.get_objects():
        # The C base of every file object (io.IOBase's own base): an isinstance check on
        # the ABC would test each of the thousands of classes against all of IOBase's
        # subclasses, 0.2 s after a whole-suite replay.
        if not isinstance(item, _io._IOBase) or id(item) in standard:
            continue
        try:
            if not item.closed and item.writable():
                return True
        except (OSError, ValueError):
            continue  # detached or half-made: nothing to flush through it
    return False
