"""The user's terminal, thin: raw mode, its size, and relaying it to a socket.

``reproduce --pdb`` and ``--shell`` give a process in a container a terminal of its own
(:meth:`orchestrator.adapters.docker.Container.exec_terminal`); :func:`relay` joins it to
the user's, as ``docker exec -it`` does: the local terminal goes into raw mode (every key,
Ctrl-C included, goes to the container's terminal, which does its own echo and line
editing), bytes are copied both ways until the container's side closes, and a window
resize (SIGWINCH) is passed on. The local terminal's settings are restored however the
relay ends.

When standard input is not a terminal (a pipe, a test), the bytes are relayed all the
same, without raw mode; at its end of file an end-of-file character (Ctrl-D) is sent, as a
person at a terminal would type it. (Shutting the socket's sending half instead would make
the engine end the whole session, output and all.)
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import termios
import threading
import tty
from collections.abc import Callable, Iterator
from types import FrameType

CHUNK = 65536
END_OF_FILE = b"\x04"  # what Ctrl-D sends: the terminal's end of file (VEOF)


def is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def size(fd: int) -> tuple[int, int] | None:
    """(rows, columns) of the terminal on ``fd``, or None when it is not one."""
    try:
        columns, rows = os.get_terminal_size(fd)
    except OSError:
        return None
    return rows, columns


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[bool]:
    """The terminal on ``fd`` in raw mode for the block, restored after; yields whether
    it is a terminal at all (nothing changes when it is not)."""
    if not is_terminal(fd):
        yield False
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def _window_changes() -> Iterator[int | None]:
    """A pipe that receives a byte on every SIGWINCH (None off the main thread, where no
    signal handler can be set). A pipe, not a flag: select() must wake up for it."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def note(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            os.write(write_end, b"w")

    previous = signal.signal(signal.SIGWINCH, note)
    try:
        yield read_end
    finally:
        signal.signal(signal.SIGWINCH, previous)
        os.close(read_end)
        os.close(write_end)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def relay(
    sock: socket.socket,
    *,
    stdin_fd: int,
    stdout_fd: int,
    on_resize: Callable[[int, int], None] | None = None,
) -> None:
    """Copy ``stdin_fd`` to ``sock`` and ``sock`` to ``stdout_fd`` until the socket's far
    end closes; in raw mode when ``stdin_fd`` is a terminal."""
    with raw_mode(stdin_fd) as raw, _window_changes() as resized:
        if raw and on_resize is not None:
            current = size(stdin_fd)
            if current is not None:
                on_resize(*current)
        reading_input = True
        while True:
            watched: list[int | socket.socket] = [sock]
            if reading_input:
                watched.append(stdin_fd)
            if resized is not None:
                watched.append(resized)
            ready, _, _ = select.select(watched, [], [])
            if resized is not None and resized in ready:
                os.read(resized, CHUNK)
                current = size(stdin_fd)
                if current is not None and on_resize is not None:
                    on_resize(*current)
            if sock in ready:
                try:
                    data = sock.recv(CHUNK)
                except ConnectionResetError:
                    data = b""
                if not data:
                    return
                _write_all(stdout_fd, data)
            if reading_input and stdin_fd in ready:
                data = os.read(stdin_fd, CHUNK)
                if data:
                    sock.sendall(data)
                else:
                    reading_input = False
                    with contextlib.suppress(OSError):
                        sock.sendall(END_OF_FILE)
