"""Who owns a leftover (a container, a scratch folder, a thaw claim), and may it go? Pure.

A process id means something only where it was taken: on one machine, since its last
boot, in one pid namespace (CI runners sharing one Docker host have their own). The
adapter that reads ``/proc`` folds those into one **host id**; an owner is a host id, a
pid and the pid's start time (so a reused pid is not taken for the owner).

The rule every sweep follows:

- an owner on **this** host whose process is gone: its leftover is removed;
- an owner on this host that is alive: never touched;
- an owner on **another** host (or none we can read): its pid means nothing here, so the
  leftover is removed only once it is older than a generous age, and the sweep says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Another host's leftovers are left alone for this long (no run of the tool lasts a day).
FOREIGN_MAX_AGE_S = 24 * 3600.0

_HOST_ID = re.compile(r"^[0-9a-f]{8,64}$")
_TOKEN_NONCE = re.compile(r"^[0-9a-f]{6,32}$")
# ASCII digits only: str.isdigit() also takes "¹" or "٣", which int() refuses or misreads.
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, kw_only=True)
class ProcessOwner:
    """A process, as another process of the tool can recognise it later."""

    host_id: str
    pid: int
    start: str = ""  # the kernel's start time of the pid ("" when unknown)


@dataclass(frozen=True, kw_only=True)
class SweepVerdict:
    remove: bool
    foreign: bool  # the owner is not on this host (or unknown): decided by age alone
    why: str


def local_owner(owner: ProcessOwner | None, host_id: str) -> bool:
    """Is ``owner`` a process of this host (so that its pid can be checked here)?"""
    return owner is not None and owner.host_id == host_id


def sweep_verdict(
    owner: ProcessOwner | None,
    *,
    host_id: str,
    owner_alive: bool | None,
    age_s: float | None,
    foreign_max_age_s: float = FOREIGN_MAX_AGE_S,
) -> SweepVerdict:
    """May a leftover of ``owner`` go? ``owner_alive`` is asked only for a local owner
    (None otherwise); ``age_s`` is how old the leftover is (None: unknown)."""
    if owner is not None and local_owner(owner, host_id):
        if owner_alive is None or owner_alive:
            return SweepVerdict(remove=False, foreign=False, why=f"owner {owner.pid} is alive")
        return SweepVerdict(remove=True, foreign=False, why=f"owner {owner.pid} is gone")
    who = "an owner it cannot read" if owner is None else f"host {owner.host_id}"
    if age_s is not None and age_s > foreign_max_age_s:
        hours = age_s / 3600
        return SweepVerdict(
            remove=True,
            foreign=True,
            why=f"{who}, {hours:.1f} h old (past {_hours(foreign_max_age_s)})",
        )
    return SweepVerdict(remove=False, foreign=True, why=f"{who}: not ours to judge yet")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:g} h"


# ---------------------------------------------------------------- scratch folder names


def scratch_stem(owner: ProcessOwner) -> str:
    """``<pid>.<start>@<host id>``: what a scratch folder's name says about its owner."""
    return f"{owner.pid}.{owner.start or 0}@{owner.host_id}"


def owner_from_stem(stem: str, *, host_id: str) -> ProcessOwner | None:
    """The owner a scratch name's stem names. A bare ``<pid>`` (an older version of the
    tool) is taken as this host's, as that version meant it; anything else is None."""
    if _DIGITS.fullmatch(stem):
        return ProcessOwner(host_id=host_id, pid=int(stem))
    process, at, host = stem.partition("@")
    pid, _, start = process.partition(".")
    if not at or not _DIGITS.fullmatch(pid) or not _HOST_ID.match(host):
        return None
    return ProcessOwner(host_id=host, pid=int(pid), start="" if start in ("", "0") else start)


# ---------------------------------------------------------------- thaw claim tokens


def claim_token(owner: ProcessOwner, nonce: str) -> str:
    """``<host id>:<pid>:<start>:<nonce>``: a claim that says which job holds it (<= 64)."""
    return f"{owner.host_id}:{owner.pid}:{owner.start or 0}:{nonce}"


def owner_from_token(token: str) -> ProcessOwner | None:
    """The owner a claim token names; None for a token without one (an older tool's)."""
    parts = token.split(":")
    if len(parts) != 4:
        return None
    host, pid, start, nonce = parts
    if not _HOST_ID.match(host) or not _DIGITS.fullmatch(pid) or not _DIGITS.fullmatch(start):
        return None
    if not _TOKEN_NONCE.match(nonce):
        return None
    return ProcessOwner(host_id=host, pid=int(pid), start="" if start == "0" else start)
