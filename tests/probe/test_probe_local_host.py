"""Which hosts the probe's network rule calls local: loopback, the unspecified host and
the machine's own name (docs/lanes.md, section 1: a property must be pure)."""

from __future__ import annotations

import socket
import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.probe.meter import is_local_host

NAMES = st.text(alphabet=string.ascii_letters + string.digits + "-.", min_size=1, max_size=40)


@given(NAMES)
def test_the_machines_own_name_is_local_in_any_case(name: str) -> None:
    own = name.lower()
    assert is_local_host(name, own_host=own)
    assert is_local_host(name.upper(), own_host=own)
    assert is_local_host(name.encode(), own_host=own)


@given(NAMES, NAMES)
def test_the_own_name_adds_itself_and_nothing_else(name: str, own: str) -> None:
    without = is_local_host(name, own_host="")
    assert is_local_host(name, own_host=own.lower()) == (without or name.lower() == own.lower())


@given(st.sampled_from(["127.0.0.1", "::1", "[::1]", "0.0.0.0", "localhost", "db.localhost", ""]))
def test_loopback_stays_local_without_an_own_name(host: str) -> None:
    assert is_local_host(host, own_host="")


def test_the_default_own_name_is_this_machines() -> None:
    assert is_local_host(socket.gethostname())
    assert not is_local_host("192.0.2.10")
