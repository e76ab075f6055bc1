"""Who owns a leftover, and may a sweep remove it (orchestrator/core/owners.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import owners

HOST = "0123456789abcdef"
hosts = st.text(alphabet="0123456789abcdef", min_size=16, max_size=16)
pids = st.integers(min_value=1, max_value=4_194_304)
starts = st.text(alphabet="0123456789", min_size=1, max_size=20).filter(lambda s: s != "0")
process_owners = st.builds(owners.ProcessOwner, host_id=hosts, pid=pids, start=starts)
ages = st.none() | st.floats(min_value=0, max_value=10 * owners.FOREIGN_MAX_AGE_S)


@given(owner=process_owners, alive=st.booleans(), age=ages)
def test_a_local_owner_is_judged_by_its_process_alone(owner, alive, age):
    verdict = owners.sweep_verdict(owner, host_id=owner.host_id, owner_alive=alive, age_s=age)
    assert verdict.remove is (not alive)
    assert not verdict.foreign


@given(owner=process_owners, here=hosts, age=ages)
def test_another_hosts_leftover_goes_only_when_old(owner, here, age):
    if owner.host_id == here:
        return
    verdict = owners.sweep_verdict(owner, host_id=here, owner_alive=None, age_s=age)
    assert verdict.foreign
    assert verdict.remove is (age is not None and age > owners.FOREIGN_MAX_AGE_S)
    if verdict.remove:
        assert owner.host_id in verdict.why


@given(age=ages)
def test_a_leftover_without_a_readable_owner_goes_only_when_old(age):
    verdict = owners.sweep_verdict(None, host_id=HOST, owner_alive=None, age_s=age)
    assert verdict.foreign
    assert verdict.remove is (age is not None and age > owners.FOREIGN_MAX_AGE_S)


def test_a_live_local_owner_is_never_swept_however_old():
    owner = owners.ProcessOwner(host_id=HOST, pid=7, start="9")
    verdict = owners.sweep_verdict(owner, host_id=HOST, owner_alive=True, age_s=1e12)
    assert not verdict.remove


@given(owner=process_owners)
def test_a_scratch_stem_names_its_owner(owner):
    stem = owners.scratch_stem(owner)
    assert "-" not in stem  # the folder name splits its stem at the first "-"
    assert owners.owner_from_stem(stem, host_id=HOST) == owner


@given(pid=pids)
def test_an_older_scratch_name_is_this_hosts(pid):
    assert owners.owner_from_stem(str(pid), host_id=HOST) == owners.ProcessOwner(
        host_id=HOST, pid=pid
    )


@given(stem=st.text(max_size=30))
def test_an_unreadable_stem_names_no_owner_or_a_well_formed_one(stem):
    owner = owners.owner_from_stem(stem, host_id=HOST)
    assert owner is None or owner.pid >= 0


@given(owner=process_owners, nonce=st.text(alphabet="0123456789abcdef", min_size=12, max_size=12))
def test_a_claim_token_fits_the_column_and_names_its_owner(owner, nonce):
    token = owners.claim_token(owner, nonce)
    assert len(token) <= 64  # freeze_claims.claimed_by is String(64)
    assert owners.owner_from_token(token) == owner


def test_an_older_tools_claim_token_names_no_owner():
    assert owners.owner_from_token("0f" * 16) is None  # uuid4().hex
    assert owners.owner_from_token("a:b:c:d") is None
