"""classify, shrink, digest and admit through the real CLI entry point.

``orchestrator.cli.main`` is the function the console script runs: it maps
errors to exit statuses and one-line messages, so the tests call it directly.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from seed004 import ORACLE_KEYS, PAYLOAD, admission_request
from unit_factories import evidence_doc

from orchestrator.cli import main
from orchestrator.core.digest import digest, oracle_digest


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    def run(*argv: str, stdin: str | None = None) -> Run:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        with pytest.raises(SystemExit) as stopped:
            main(list(argv))
        captured = capsys.readouterr()
        code = stopped.value.code
        return Run(int(code or 0), captured.out, captured.err)

    return run


def write(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def assert_one_line_error(run: Run, fragment: str) -> None:
    assert run.code == 2
    assert run.err.startswith("orchestrator: error: ")
    assert fragment in run.err
    assert len(run.err.strip().splitlines()) == 1
    assert "Traceback" not in run.err


# --- classify ---------------------------------------------------------------------------


def test_classify_exit_statuses(cli: Any, tmp_path: Path) -> None:
    passing = cli("classify", write(tmp_path / "ok.json", evidence_doc()))
    assert passing.code == 0
    assert passing.out.startswith("no_freeze (not_reproduced)")

    budget = evidence_doc()
    for entry in budget["patch"]:
        entry["calls"] = {"clock": 2}
    blocking = cli("classify", "--json", write(tmp_path / "budget.json", budget))
    assert blocking.code == 1
    assert blocking.json() == {
        "schema": "replay-decision/1",
        "lane": "property_regression",
        "code": "call_budget",
        "blocking": True,
        "freeze_allowed": False,
        "reasons": ["clock: base {1} vs patch {2}"],
    }

    infra = evidence_doc()
    infra["base"][1]["label"] = "timeout"
    assert cli("classify", write(tmp_path / "infra.json", infra)).code == 3


def test_classify_unknown_label_is_reject_malformed(cli: Any) -> None:
    doc = evidence_doc()
    doc["patch"][0]["label"] = "assert_maybe"
    run = cli("classify", "--json", "-", stdin=json.dumps(doc))
    assert run.code == 3
    assert (run.json()["lane"], run.json()["code"]) == ("reject_malformed", "unknown_label")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not JSON"),
        (json.dumps({**evidence_doc(), "schema": "replay-evidence/9"}), "replay-evidence/1"),
        (json.dumps({**evidence_doc(), "replays": "five"}), "replays: expected an integer"),
        (json.dumps([]), "expected a JSON object"),
    ],
)
def test_classify_bad_input_is_exit_2_one_line(cli: Any, text: str, fragment: str) -> None:
    run = cli("classify", "-", stdin=text)
    assert_one_line_error(run, fragment)
    assert run.out == ""


def test_classify_missing_file(cli: Any, tmp_path: Path) -> None:
    assert_one_line_error(cli("classify", str(tmp_path / "absent.json")), "no such file")


def test_no_traceback_from_the_installed_entry_point(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1,", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "classify", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- digest -----------------------------------------------------------------------------


def test_digest_prints_the_seed_walkthrough_digest(cli: Any, tmp_path: Path) -> None:
    fixture = write(tmp_path / "min.json", {"user_id": 0, "role": ""})
    run = cli("digest", fixture)
    assert run.code == 0
    assert run.out.strip() == digest({"user_id": 0, "role": ""})


def test_digest_oracle_keys(cli: Any, tmp_path: Path) -> None:
    path = write(tmp_path / "payload.json", PAYLOAD)
    run = cli("digest", "--oracle-keys", ",".join(ORACLE_KEYS), "--json", path)
    assert run.json()["digest"] == oracle_digest(PAYLOAD, ORACLE_KEYS)
    assert run.json()["canonicalization"] == "json-sort-keys"
    assert_one_line_error(cli("digest", "--oracle-keys", ",", path), "--oracle-keys")
    listed = write(tmp_path / "list.json", [1, 2])
    assert_one_line_error(cli("digest", "--oracle-keys", "a", listed), "not a JSON object")


# --- shrink -----------------------------------------------------------------------------

PROPERTY_MODULE = """
ALLOWED = {"admin", "viewer"}


def role_allowed(payload):
    if payload["user_id"] >= 0:
        assert payload["role"] in ALLOWED
"""


@pytest.fixture
def props_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "props"
    folder.mkdir()
    (folder / "unit_cli_props.py").write_text(PROPERTY_MODULE, encoding="utf-8")
    (folder / "unit_cli_broken.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command prepends --path
    return folder


def test_shrink_writes_the_minimal_fixture_and_reports(
    cli: Any, tmp_path: Path, props_dir: Path
) -> None:
    wide = {f"noise_{i}": i * 7 for i in range(50)} | {"user_id": 912, "role": "ghost"}
    fixture = write(tmp_path / "wide.json", wide)
    out = tmp_path / "out" / "min.json"
    run = cli(
        "shrink", fixture, "--property", "unit_cli_props:role_allowed",
        "--path", str(props_dir), "--out", str(out), "--json", "--attempts", "3",
    )  # fmt: skip
    assert run.code == 0, run.err
    report = run.json()
    assert report["schema"] == "shrink-report/1"
    assert report["minimal"] == {"user_id": 0, "role": ""}
    assert report["minimal_digest"] == digest({"user_id": 0, "role": ""})
    assert report["origin_digest"] == digest(wide)
    assert (report["attempts"], report["identical_minima"], report["stable"]) == (3, 3, True)
    assert report["property_calls"] > 0
    assert json.loads(out.read_text(encoding="utf-8")) == {"user_id": 0, "role": ""}


def test_shrink_human_summary(cli: Any, tmp_path: Path, props_dir: Path) -> None:
    fixture = write(tmp_path / "f.json", {"user_id": 3, "role": "x", "a": 1})
    run = cli(
        "shrink", fixture, "--property", "unit_cli_props:role_allowed", "--path", str(props_dir)
    )
    assert run.code == 0
    for key in ("minimal:", "minimal_digest:", "origin_digest:", "shrink_path:", "property_calls:"):
        assert key in run.out
    assert "stable: yes" in run.out


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("unit_cli_props", "expected MODULE:FUNCTION"),
        ("unit_cli_absent:prop", "cannot import unit_cli_absent"),
        ("unit_cli_broken:prop", "RuntimeError: boom"),
        ("unit_cli_props:missing", "has no missing"),
        ("unit_cli_props:ALLOWED", "not callable"),
    ],
)
def test_shrink_unimportable_property_is_exit_2(
    cli: Any, tmp_path: Path, props_dir: Path, spec: str, fragment: str
) -> None:
    fixture = write(tmp_path / "f.json", {"user_id": 3, "role": "x"})
    assert_one_line_error(
        cli("shrink", fixture, "--property", spec, "--path", str(props_dir)), fragment
    )


def test_shrink_refuses_a_fixture_the_property_does_not_fail(
    cli: Any, tmp_path: Path, props_dir: Path
) -> None:
    fixture = write(tmp_path / "ok.json", {"user_id": 3, "role": "admin"})
    out = tmp_path / "min.json"
    run = cli(
        "shrink", fixture, "--property", "unit_cli_props:role_allowed",
        "--path", str(props_dir), "--out", str(out),
    )  # fmt: skip
    assert_one_line_error(run, "property holds")
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "give either --property MODULE:FUNCTION or --test NODEID"),
        (["--property", "m:f", "--test", "t.py::test_a"], "give either"),
        (["--test", "t.py::test_a"], "--test needs --repo and --rev and --image"),
        (["--test", "t.py::test_a", "--repo", ".", "--rev", "HEAD"], "--test needs --image"),
        (["--test", "t.py", "--repo", ".", "--rev", "HEAD", "--image", "i"], "node id"),
        (
            ["--test", "t.py::t", "--repo", ".", "--rev", "H", "--image", "i", "--path", "."],
            "--path goes with --property",
        ),
        (["--property", "m:f", "--rev", "HEAD"], "--rev go with --test"),
    ],
)
def test_shrink_usage_mistakes_are_found_before_any_engine_is_asked(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], fragment: str
) -> None:
    # An engine asked anyway would fail with exit 3 (nothing answers at this socket).
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    fixture = write(tmp_path / "f.json", {"user_id": 3, "role": "x"})
    assert_one_line_error(cli("shrink", fixture, *args), fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--property", "t.py::test_a"], "--shrink needs --fixture"),
        (["--fixture", "{fixture}"], "--shrink needs exactly one --property"),
        (
            ["--fixture", "{fixture}", "--property", "t.py::a", "--property", "t.py::b"],
            "exactly one --property",
        ),
        (
            ["--fixture", "{fixture}", "--property", "t.py::a", "--shrink-report", "{fixture}"],
            "drop --shrink-report",
        ),
    ],
)
def test_replay_shrink_usage_mistakes_are_found_before_any_engine_is_asked(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], fragment: str
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    fixture = write(tmp_path / "f.json", {"user_id": 3, "role": "x"})
    filled = [fixture if arg == "{fixture}" else arg for arg in args]
    run = cli(
        "replay", "--repo", str(tmp_path), "--base", "a", "--patch", "b", "--image", "i",
        "--shrink", "--no-record", *filled,
    )  # fmt: skip
    assert_one_line_error(run, fragment)


# --- admit ------------------------------------------------------------------------------


def test_admit_case_d_opens_timing_debt(cli: Any, tmp_path: Path) -> None:
    run = cli("admit", "--json", write(tmp_path / "d.json", admission_request()))
    assert run.code == 0
    doc = run.json()
    assert (doc["code"], doc["allowed"]) == ("timing_debt_opened", True)
    assert doc["expires_at"] == "2026-09-25T11:00:00+00:00"
    assert (doc["latency_ms"], doc["spread_ms"], doc["latency_class"]) == (840.0, 300.0, "timing")
    assert doc["freeze"]["sample_runs"] == 5
    assert doc["freeze"]["oracle_digest"] == oracle_digest(PAYLOAD, ORACLE_KEYS)
    human = cli("admit", write(tmp_path / "d2.json", admission_request()))
    assert human.out.startswith("timing_debt_opened: list_latency frozen until 2026-09-25T11:00")


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"samples": [840, 700, 1000, 820]}, "sample_too_small"),
        ({"owner": ""}, "missing_owner"),
        ({"payload": {**PAYLOAD, "body_sha256": "changed"}}, "fixture_oracle_drift"),
        ({"samples": [700, 700, 710, 705, 702]}, "spread_too_tight"),
        ({"spread_ms": 20, "sample_runs": 5}, "spread_too_tight"),
        ({"now": "2026-09-26T00:00:00Z"}, "already_expired"),
    ],
)
def test_admit_refusals_exit_1(cli: Any, overrides: dict[str, Any], code: str) -> None:
    run = cli("admit", "-", stdin=json.dumps(admission_request(**overrides)))
    assert run.code == 1
    assert run.out.startswith(f"refused: {code}")


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"schema": "timing-freeze/1"}, "timing-admission-request/1"),
        ({"opened_at": "yesterday"}, "opened_at"),
        ({"samples": ["fast"]}, "samples"),
        ({"checks": [{"name": "x", "passed": "no", "kind": "timing"}]}, "checks[0].passed"),
        ({"checks": [{"name": "x", "passed": False, "kind": "speed"}]}, "checks[0].kind"),
        ({"budget_ms": None}, "budget_ms: missing"),
    ],
)
def test_admit_bad_request_is_exit_2(cli: Any, overrides: dict[str, Any], fragment: str) -> None:
    assert_one_line_error(
        cli("admit", "-", stdin=json.dumps(admission_request(**overrides))), fragment
    )


def test_commands_have_help(cli: Any) -> None:
    for command in ("classify", "shrink", "digest", "admit"):
        run = cli(command, "--help")
        assert run.code == 0
        assert "Usage:" in run.out
