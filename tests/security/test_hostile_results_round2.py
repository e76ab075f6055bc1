"""What comes back from a container cannot hurt the host or the other side (round two).

Each test replays a scratch repository whose patch is an attack, through the real CLI
and engine, with the canary in the CLI's environment (docs/security.md lists them):
a leftover process that writes its own results into the reader's output or keeps
rewriting the result file, JSON that would crash a parser. The host's labels are the
true ones (the patch's test fails for real) or that side's ``harness_error``, never the
forged pass; the other side is decided as usual."""

from __future__ import annotations

import pytest
from hostile_repo import assert_no_host_bytes, hostile_repo, replay
from hostile_results import DEEP_JSON, HUGE_INT, READER_HIJACK, REWRITER, swap_in

pytestmark = pytest.mark.docker


def assert_decided_without_the_forgery(run) -> None:
    assert run.code in (1, 3), run.stderr.decode()[-2000:]
    decision = run.decision()
    assert decision["base_labels"] == ["assert_pass"]
    assert decision["patch_labels"] != ["assert_pass"], decision
    assert decision["patch_labels"] in (["assert_fail"], ["harness_error"]), decision
    assert_no_host_bytes(run)


def test_a_leftover_process_cannot_write_into_the_readers_output(tmp_path):
    run = replay(tmp_path, hostile_repo(tmp_path, READER_HIJACK))
    assert_decided_without_the_forgery(run)
    # Killed before the reader started: the true failure is what the host saw.
    assert run.decision()["patch_labels"] == ["assert_fail"]


def test_a_leftover_process_rewriting_the_result_is_never_believed(tmp_path):
    run = replay(tmp_path, hostile_repo(tmp_path, REWRITER))
    assert_decided_without_the_forgery(run)


@pytest.mark.parametrize(
    ("attack", "said"),
    [(DEEP_JSON, "nested deeper"), (HUGE_INT, "digits")],
    ids=["100,000 levels deep", "a 5,000-digit number"],
)
def test_hostile_json_is_that_sides_corrupt_result_and_the_rest_is_decided(tmp_path, attack, said):
    run = replay(tmp_path, hostile_repo(tmp_path, swap_in(attack)))
    assert run.code == 3, run.stderr.decode()[-2000:]
    assert b"internal error" not in run.stderr
    decision = run.decision()
    assert decision["base_labels"] == ["assert_pass"]
    assert decision["patch_labels"] == ["harness_error"]
    assert decision["patch_reasons"] == ["corrupt_result"]
    assert_no_host_bytes(run)
