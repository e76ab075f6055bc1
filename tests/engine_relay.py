"""An engine that answers a few requests and drops the rest: a relay, not a mock.

`DroppingRelay` listens on its own unix socket and forwards to the real engine's socket
every request whose request line matches `answered` (by default the ping and the version
the SDK asks for when it connects), byte for byte. Any other request gets its
connection reset (RST), as when a daemon dies under a client: the engine "answers
/_ping and /version and resets every other request". Requests matching `stalled` are
held unanswered instead, so a test knows the client is waiting on that very call.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
from pathlib import Path

METHOD = re.compile(rb"^(GET|HEAD|POST|PUT|DELETE) (\S+) HTTP/1\.[01]\r\n")
PING_AND_VERSION = re.compile(rb"^/(v[0-9.]+/)?(_ping|version)(\?|$)")
# ... and the engine's facts (`/info`), which `replay` reads to size its pool of engines.
CONNECTING = re.compile(rb"^/(v[0-9.]+/)?(_ping|version|info)(\?|$)")


class DroppingRelay:
    def __init__(
        self,
        listen: Path,
        *,
        upstream: str = "/var/run/docker.sock",
        answered: re.Pattern[bytes] = PING_AND_VERSION,
        stalled: re.Pattern[bytes] | None = None,
    ) -> None:
        self.listen = listen
        self.upstream = upstream
        self.answered = answered
        self.stalled = stalled  # requests held unanswered (the client waits), not reset
        self.stalling = threading.Event()  # set once a request is held
        self.dropped: list[bytes] = []  # the request lines that were reset
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(listen))
        self._server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.listen}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            while peeked := client.recv(65536, socket.MSG_PEEK):
                request = METHOD.match(peeked)
                if request and self.stalled is not None and self.stalled.match(request.group(2)):
                    self.stalling.set()
                    while client.recv(65536):  # never answered; ends when the client goes
                        pass
                    return
                if request and not self.answered.match(request.group(2)):
                    self.dropped.append(peeked.split(b"\r\n", 1)[0])
                    _reset(client)  # the request is left unread: the client sees a reset
                    return
                chunk = client.recv(len(peeked))
                if upstream is None:
                    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    upstream.connect(self.upstream)
                    threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
                upstream.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (client, upstream):
                if end is not None:
                    with contextlib.suppress(OSError):
                        end.close()

    def close(self) -> None:
        self._server.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass


def _reset(connection: socket.socket) -> None:
    """Close with unread data (a unix socket's reset): the client sees ECONNRESET."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()
