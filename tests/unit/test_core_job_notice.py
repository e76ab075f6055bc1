"""A serving driver's notice of a finished job (orchestrator.core.result_files.job_notice):
taken only for the job asked for, with a result file's name and a SHA-256; anything
else is a reason, never an exception."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.result_files import SERVED_RESULT, JobNotice, job_notice, served_folder

DIGEST = hashlib.sha256(b"result").hexdigest()
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=70),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def notice(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "job": "1.7",
        "replay": 3,
        "status": "completed",
        "result": SERVED_RESULT,
        "sha256": DIGEST,
    }
    base.update(changes)
    return base


def test_a_notice_of_the_job_asked_for_gives_its_digest():
    assert job_notice(notice(), number=3, job_id="1.7") == JobNotice(digest=DIGEST)


def test_a_full_folder_is_said_without_a_digest():
    full = notice(result=None, sha256=None, results_full=True)
    assert job_notice(full, number=3, job_id="1.7") == JobNotice(digest=None, full=True)


def test_another_jobs_notice_or_number_is_a_reason():
    assert "came back for job '1.7'" in str(job_notice(notice(job="1.8"), number=3, job_id="1.7"))
    assert "not 3" in str(job_notice(notice(replay=4), number=3, job_id="1.7"))
    assert "not 1" in str(job_notice(notice(replay=True), number=1, job_id="1.7"))


def test_a_folder_name_per_job():
    assert served_folder(12) == "job-000012"


@given(
    key=st.sampled_from(["job", "replay", "result", "sha256", "results_full", "status"]),
    value=JSON_VALUES,
)
def test_any_changed_field_gives_a_notice_or_a_reason_never_an_error(key, value):
    found = job_notice(notice(**{key: value}), number=3, job_id="1.7")
    assert isinstance(found, JobNotice | str)
    if isinstance(found, JobNotice) and found.digest is not None:
        # A digest is only ever a SHA-256 in hex, of the one result file's name.
        assert len(found.digest) == 64
        assert set(found.digest) <= set("0123456789abcdef")


@given(document=st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=6))
def test_no_document_passes_for_a_job_it_does_not_name(document):
    found = job_notice(document, number=1, job_id="the-one-asked-for")
    assert isinstance(found, str) or document.get("job") == "the-one-asked-for"
