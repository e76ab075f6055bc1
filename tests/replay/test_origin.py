"""Where the unshrunk payload comes from when a shrunk fixture is replayed."""

import json

import pytest

from orchestrator.core.digest import canonical_json, digest
from orchestrator.core.shrink import shrink_report
from orchestrator.errors import InputError
from orchestrator.services.replay_plan import origin_bytes_from


def role_allowed(payload):
    if payload.get("user_id", -1) >= 0:
        assert payload.get("role") in {"admin", "viewer"}


WIDE = {"user_id": 7, "role": "", "noise": "x" * 30, "extra": [1, 2, 3]}


def test_the_shrink_report_carries_the_origin_and_replay_takes_its_bytes():
    report = shrink_report(WIDE, role_allowed).to_json()
    data = origin_bytes_from(report, None, report["origin_digest"])
    assert data == canonical_json(WIDE)
    assert digest(json.loads(data)) == report["origin_digest"]


def test_an_origin_file_overrides_and_keeps_its_own_bytes(tmp_path):
    report = shrink_report(WIDE, role_allowed).to_json()
    del report["origin"]  # an older report, or one from another tool
    origin = tmp_path / "wide.json"
    origin.write_text(json.dumps(WIDE, indent=4))
    assert origin_bytes_from(report, origin, report["origin_digest"]) == origin.read_bytes()
    assert origin_bytes_from(report, None, report["origin_digest"]) is None


def test_an_origin_that_is_not_the_reports_is_refused(tmp_path):
    report = shrink_report(WIDE, role_allowed).to_json()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**WIDE, "user_id": 8}))
    with pytest.raises(InputError, match="is not the report's origin_digest"):
        origin_bytes_from(report, other, report["origin_digest"])
    report["origin"] = {"tampered": True}
    with pytest.raises(InputError, match="is not the report's origin_digest"):
        origin_bytes_from(report, None, report["origin_digest"])
