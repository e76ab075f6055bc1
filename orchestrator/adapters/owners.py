"""Who owns a container or volume: the labels written on it (its run, this process's
session, its owning pid with the pid's start time, and host), read back by the sweep."""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from orchestrator.adapters.host import current_owner
from orchestrator.core.owners import ProcessOwner

LABEL_MARK = "orchestrator.replay"
LABEL_RUN = "orchestrator.run-id"
LABEL_SESSION = "orchestrator.session"
LABEL_PID = "orchestrator.pid"
LABEL_PID_START = "orchestrator.pid-start"
LABEL_HOST = "orchestrator.host"  # the host id (adapters/host.py), where the pid means something
LABEL_HOSTNAME = "orchestrator.hostname"
LABEL_SIDE = "orchestrator.side"

# One id per process: every container this process makes shares it.
SESSION = uuid.uuid4().hex[:12]


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Who owns a container: labels written on it, read back by the sweep.

    ``host`` is the host id (``orchestrator.adapters.host.host_id``: machine, boot and
    pid namespace), the only place where ``pid`` means something; ``hostname`` is for
    people reading the labels."""

    run_id: str
    session: str
    pid: int
    pid_start: str
    host: str
    hostname: str = ""

    @classmethod
    def current(cls, run_id: str) -> Owner:
        me = current_owner()
        return cls(
            run_id=run_id,
            session=SESSION,
            pid=me.pid,
            pid_start=me.start,
            host=me.host_id,
            hostname=socket.gethostname(),
        )

    def labels(self, side: str) -> dict[str, str]:
        return {
            LABEL_MARK: "1",
            LABEL_RUN: self.run_id,
            LABEL_SESSION: self.session,
            LABEL_PID: str(self.pid),
            LABEL_PID_START: self.pid_start,
            LABEL_HOST: self.host,
            LABEL_HOSTNAME: self.hostname,
            LABEL_SIDE: side,
        }


def owner_of(labels: Mapping[str, str]) -> ProcessOwner | None:
    """The process a container's labels name (None when they name none). Pure."""
    pid_text = labels.get(LABEL_PID, "")
    host = labels.get(LABEL_HOST, "")
    if not re.fullmatch(r"[0-9]+", pid_text) or not host:
        return None
    return ProcessOwner(host_id=host, pid=int(pid_text), start=labels.get(LABEL_PID_START, ""))


def owner_gone(labels: Mapping[str, str], *, host: str, is_alive: Callable[..., bool]) -> bool:
    """Is the container's owner a process of host ``host`` that is gone?"""
    owner = owner_of(labels)
    if owner is None or owner.host_id != host:
        return False  # another host's run: its pid means nothing here
    return not is_alive(owner.pid, owner.start or None)
