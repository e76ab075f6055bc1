"""`orchestrator accept` on the bundled example: real git, real Docker, real mutants.

The static refusals and bad inputs need no engine (they must not start a container);
the dynamic outcomes replay the property in the runner image.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.build_example import (
    BUDGET_PROPERTY,
    OUTPUT_PROPERTY,
    TAUTOLOGY_PROPERTY,
    TRIM_PROPERTY,
    ExampleRepo,
    build_example,
    write_mutant,
)
from orchestrator.adapters.ledger import Ledger
from orchestrator.cli import main
from orchestrator.model import EventKind

NO_SUCH_IMAGE = "orchestrator-no-such-image:never"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExampleRepo:
    return build_example(tmp_path_factory.mktemp("accept") / "example")


@pytest.fixture(scope="module")
def clock_mutant(example: ExampleRepo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """seed 001's mutant: one extra clock read, the same returned dict."""
    return write_mutant(example, "extra-clock-read", tmp_path_factory.mktemp("m") / "clock.patch")


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def accept(
    capsys: pytest.CaptureFixture[str], example: ExampleRepo, ledger_url: str, *args: str
) -> tuple[int, dict[str, Any], str]:
    argv = [
        "accept", "--repo", str(example.path), "--ledger", ledger_url,
        "--fixture", str(example.fixture), "--json", *args,
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), (json.loads(out) if out.strip() else {}), err


def accept_events(url: str) -> list[tuple[str, str | None]]:
    with Ledger.open(url) as ledger:
        return [(e.code, e.subject) for e in ledger.events(kinds=[EventKind.ACCEPT])]


# ---------------------------------------------------------------- no engine needed


def test_tautological_property_is_refused_statically_without_a_container(
    capsys: pytest.CaptureFixture[str], example: ExampleRepo, clock_mutant: Path, ledger_url: str
) -> None:
    # An image that does not exist: had a container been asked for, this would be infra (3).
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", TAUTOLOGY_PROPERTY, "--mutant", str(clock_mutant), "--image", NO_SUCH_IMAGE,
    )  # fmt: skip
    assert status == 1
    assert doc["schema"] == "acceptance/1"
    assert doc["outcome"] == "self_comparison"
    assert doc["accepted"] is False
    assert doc["replays"] == {}
    assert doc["image_id"] is None
    assert doc["findings"][0]["code"] == "self_comparison"
    assert "normalize_event(PAYLOAD, now=clock) == normalize_event" in doc["findings"][0]["detail"]
    assert doc["rev"] == example.base
    assert accept_events(ledger_url) == [("self_comparison", TAUTOLOGY_PROPERTY)]


def test_static_refusal_text_output_names_the_code_and_line(
    capsys: pytest.CaptureFixture[str], example: ExampleRepo, clock_mutant: Path, ledger_url: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([
            "accept", "--repo", str(example.path), "--ledger", ledger_url,
            "--property", TAUTOLOGY_PROPERTY, "--mutant", str(clock_mutant),
            "--image", NO_SUCH_IMAGE,
        ])  # fmt: skip
    out, _ = capsys.readouterr()
    assert exited.value.code == 1
    assert out.startswith(f"refused (self_comparison): {TAUTOLOGY_PROPERTY}\n")
    assert "line 13: self_comparison:" in out


def _patch_editing_the_property(example: ExampleRepo, folder: Path) -> Path:
    patch = folder / "edits-test.patch"
    patch.write_text(
        "--- a/tests/test_budget.py\n+++ b/tests/test_budget.py\n@@ -1 +1 @@\n-x\n+y\n"
    )
    return patch


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--property", BUDGET_PROPERTY, "--mutant", "no-such-branch"], "neither a patch file"),
        (["--property", BUDGET_PROPERTY, "--mutant", "{clock}", "--rev", "nope"],
         "unknown revision"),
        (["--property", "tests/test_budget.py::test_nothing", "--mutant", "{clock}"],
         "no test function"),
        (["--property", "tests/test_none.py::test_x", "--mutant", "{clock}"], "no such file at"),
        (["--property", "test_budget", "--mutant", "{clock}"], "expected a pytest node id"),
        (["--property", "tests/budget.txt::test_x", "--mutant", "{clock}"],
         "is not a Python file"),
        (["--property", BUDGET_PROPERTY, "--mutant", "{edits}"], "edits the property's own file"),
        (["--property", BUDGET_PROPERTY, "--mutant", "{notdiff}"], "not a unified diff"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_records_nothing(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    clock_mutant: Path,
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    not_a_diff = tmp_path / "notes.txt"
    not_a_diff.write_text("just words\n")
    names = {
        "{clock}": str(clock_mutant),
        "{edits}": str(_patch_editing_the_property(example, tmp_path)),
        "{notdiff}": str(not_a_diff),
    }
    ledger_file = tmp_path / "ledger.db"
    args = [names.get(arg, arg) for arg in args]
    status, doc, err = accept(capsys, example, f"sqlite:///{ledger_file}", *args)
    assert status == 2
    assert doc == {}
    assert message in err
    assert err.startswith("orchestrator: error: ")
    assert err.count("\n") == 1
    assert not ledger_file.exists()  # nothing recorded, not even an empty ledger


def test_a_revision_mutant_that_changes_the_property_file_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo = build_example(
        tmp_path / "ex",
        extra_patches={"edit-test": {"tests/test_budget.py": "def test_x():\n    pass\n"}},
    )
    status, _, err = accept(
        capsys, repo, f"sqlite:///{tmp_path / 'l.db'}",
        "--property", BUDGET_PROPERTY, "--mutant", "patch/edit-test",
    )  # fmt: skip
    assert status == 2
    assert "changes the property's own file tests/test_budget.py" in err


# ---------------------------------------------------------------- real engine


@pytest.mark.docker
@pytest.mark.slow
def test_extra_clock_read_kills_the_budget_property(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    clock_mutant: Path,
    ledger_url: str,
    runner_image_id: str,
) -> None:
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", BUDGET_PROPERTY, "--mutant", str(clock_mutant), "--replays", "2",
    )  # fmt: skip
    assert status == 0
    assert doc["outcome"] == "accepted"
    assert doc["image_id"] == runner_image_id
    assert doc["mutant"]["kind"] == "patch"
    unmutated, mutant = doc["replays"]["unmutated"], doc["replays"]["mutant"]
    assert [r["label"] for r in unmutated] == ["assert_pass", "assert_pass"]
    assert [r["label"] for r in mutant] == ["assert_fail", "assert_fail"]
    assert {r["calls"]["clock"] for r in unmutated} == {1}
    assert {r["calls"]["clock"] for r in mutant} == {2}
    assert accept_events(ledger_url) == [("accepted", BUDGET_PROPERTY)]

    # Count 1 of the tally reads these events: two drafted this week, one killed a mutant.
    accept(
        capsys, example, ledger_url,
        "--property", TAUTOLOGY_PROPERTY, "--mutant", str(clock_mutant),
    )  # fmt: skip
    with pytest.raises(SystemExit):
        main(["tally", "--ledger", ledger_url, "--weeks", "1", "--json"])
    week = json.loads(capsys.readouterr().out)["weeks"][-1]
    assert (week["properties_drafted"], week["properties_killed_mutant"]) == (2, 1)


@pytest.mark.docker
@pytest.mark.slow
def test_output_only_property_survives_the_mutant_and_is_refused(
    capsys: pytest.CaptureFixture[str], example: ExampleRepo, ledger_url: str, runner_image_id: str
) -> None:
    # The mutant given as a revision this time: the patch branch of the example.
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", OUTPUT_PROPERTY, "--mutant", "patch/extra-clock-read", "--replays", "2",
        "--rev", "base",
    )  # fmt: skip
    assert status == 1
    assert doc["outcome"] == "mutant_survived"
    assert doc["mutant"] == {
        "kind": "rev", "ref": "patch/extra-clock-read", "rev": example.rev("extra-clock-read")
    }  # fmt: skip
    assert [r["label"] for r in doc["replays"]["mutant"]] == ["assert_pass", "assert_pass"]
    assert accept_events(ledger_url) == [("mutant_survived", OUTPUT_PROPERTY)]


@pytest.mark.docker
@pytest.mark.slow
def test_property_failing_on_the_unmutated_revision_is_refused(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    clock_mutant: Path,
    ledger_url: str,
    runner_image_id: str,
) -> None:
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", TRIM_PROPERTY, "--mutant", str(clock_mutant), "--replays", "1",
    )  # fmt: skip
    assert status == 1
    assert doc["outcome"] == "fails_unmutated"
    assert [r["label"] for r in doc["replays"]["unmutated"]] == ["assert_fail"]


@pytest.mark.docker
@pytest.mark.slow
def test_a_mutant_that_hangs_is_infra_never_an_acceptance(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    tmp_path: Path,
    ledger_url: str,
    runner_image_id: str,
) -> None:
    hang = write_mutant(example, "hang", tmp_path / "hang.patch")
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", BUDGET_PROPERTY, "--mutant", str(hang), "--replays", "1", "--timeout", "10",
    )  # fmt: skip
    assert status == 3
    assert doc["outcome"] == "infra"
    assert doc["accepted"] is False
    assert doc["replays"]["mutant"][0]["label"] == "timeout"
    assert "timeout" in doc["infra_reason"]
    assert accept_events(ledger_url) == [("infra", BUDGET_PROPERTY)]


def test_no_engine_is_an_infra_outcome_and_is_recorded(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    clock_mutant: Path,
    ledger_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", BUDGET_PROPERTY, "--mutant", str(clock_mutant),
    )  # fmt: skip
    assert status == 3
    assert doc["outcome"] == "infra"
    assert doc["replays"] == {}
    assert doc["infra_reason"]
    assert accept_events(ledger_url) == [("infra", BUDGET_PROPERTY)]


@pytest.mark.docker
def test_a_missing_image_is_infra_and_never_pulled(
    capsys: pytest.CaptureFixture[str],
    example: ExampleRepo,
    clock_mutant: Path,
    ledger_url: str,
    docker_client: Any,
) -> None:
    status, doc, _ = accept(
        capsys, example, ledger_url,
        "--property", BUDGET_PROPERTY, "--mutant", str(clock_mutant), "--image", NO_SUCH_IMAGE,
    )  # fmt: skip
    assert status == 3
    assert doc["outcome"] == "infra"
    assert NO_SUCH_IMAGE in doc["infra_reason"]
    assert docker_client.images.list(name=NO_SUCH_IMAGE.split(":", maxsplit=1)[0]) == []


MIXIN = "class Checks:\n    def check_total(self):\n        assert sum([1, 2]) == 3\n"
MIXED = (
    "from tests.checks import Checks\n\n\n"
    "class TestTotals(Checks):\n    def test_total(self):\n        self.check_total()\n"
)
MIXED_PROPERTY = "tests/test_mixed.py::TestTotals::test_total"


@pytest.mark.parametrize("kind", ["patch", "rev"])
def test_a_mutant_that_changes_the_property_class_base_module_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    """The assertion lives in a mixin in another module: a mutant that edits it edits the
    property, whichever form the mutant takes."""
    weakened = MIXIN.replace("== 3", "== sum([1, 2])")
    repo = build_example(
        tmp_path / "ex",
        extra_files={"tests/__init__.py": "", "tests/checks.py": MIXIN,
                     "tests/test_mixed.py": MIXED},
        extra_patches={"weaken": {"tests/checks.py": weakened}},
    )  # fmt: skip
    patch = tmp_path / "weaken.patch"
    patch.write_text(
        "--- a/tests/checks.py\n+++ b/tests/checks.py\n@@ -3 +3 @@\n"
        "-        assert sum([1, 2]) == 3\n+        assert sum([1, 2]) == sum([1, 2])\n"
    )
    mutant = str(patch) if kind == "patch" else "patch/weaken"
    status, _, err = accept(
        capsys, repo, f"sqlite:///{tmp_path / 'l.db'}",
        "--property", MIXED_PROPERTY, "--mutant", mutant,
    )  # fmt: skip
    assert status == 2
    assert "tests/checks.py, which the property's class inherits from" in err
    assert err.count("\n") == 1


def test_a_mutant_of_the_code_beside_a_mixin_property_is_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The refusal names only the modules the class inherits from: a mutant of the code
    under test passes planning (the missing image then ends it before any verdict)."""
    repo = build_example(
        tmp_path / "ex",
        extra_files={"tests/__init__.py": "", "tests/checks.py": MIXIN,
                     "tests/test_mixed.py": MIXED},
    )  # fmt: skip
    status, _, err = accept(
        capsys, repo, f"sqlite:///{tmp_path / 'l.db'}",
        "--property", MIXED_PROPERTY, "--mutant", "patch/extra-clock-read",
        "--image", NO_SUCH_IMAGE,
    )  # fmt: skip
    assert "inherits from" not in err
    assert "own file" not in err
    assert status != 0
