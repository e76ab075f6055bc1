"""The options replay, reproduce, shrink, accept and budget share: one declaration each, and
one check each, made for every command before git or an engine is asked for anything.

In this process (``support.cli.invoke``): a usage mistake is exit 2 and one line. The
engine is a socket nothing answers at, so a check that came after the engine was asked
would be exit 3 instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
from support.cli import ERROR, Run, invoke

from orchestrator.cli import build_command
from orchestrator.commands import _option_groups as groups
from orchestrator.errors import InputError

COMMANDS = ("replay", "reproduce", "shrink", "accept", "budget")
PROPERTY = "tests/test_a.py::test_a"


def command_options(name: str) -> dict[str, click.Option]:
    root = build_command()
    assert isinstance(root, click.Group)
    command = root.get_command(click.Context(root), name)
    assert command is not None
    return {param.opts[0]: param for param in command.params if isinstance(param, click.Option)}


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A git repository with one commit (HEAD) of ``files``."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    env = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin", "HOME": str(path.parent),
    }  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


TEST_A = {"tests/test_a.py": "def test_a():\n    assert True\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit (HEAD), one test in it."""
    return make_repo(tmp_path / "repo", TEST_A)


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working folder: nothing answers at the engine's socket, no ledger configured."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    monkeypatch.delenv("ORCHESTRATOR_LEDGER", raising=False)
    return workdir


def refused(run: Run, fragment: str, workdir: Path) -> None:
    """Exit 2, one error line naming the problem, nothing written."""
    assert run.exit_code == 2, run.stderr
    assert run.stdout == ""
    errors = run.error_lines()
    assert len(errors) == 1, run.stderr
    assert fragment in errors[0], errors[0]
    assert list(workdir.iterdir()) == []  # not even the default ledger


def budget(repo: Path, *extra: str) -> list[str]:
    return ["budget", "--repo", str(repo), "--rev", "HEAD", "--image", "i",
            "--property", PROPERTY, "--budget-ms", "10", *extra]  # fmt: skip


def accept(repo: Path, *extra: str) -> list[str]:
    return ["accept", "--repo", str(repo), "--property", PROPERTY, "--mutant", "HEAD",
            "--image", "i", *extra]  # fmt: skip


# --- checks replay made that the others skipped, now made for every command --------------


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--runner-id", " "], "--runner-id must not be empty"),
        (["--command", "make test"], "--command must start with pytest"),
        (["--command", 'pytest "tests'], "--command: No closing quotation"),
        (["--admit", "--owner", " "], "--admit needs --owner"),
    ],
)
def test_budget_refuses_what_replay_refuses_before_the_engine_is_asked(
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    no_engine: Path,
    extra: list[str],
    fragment: str,
) -> None:
    refused(invoke(capsys, budget(repo, *extra)), fragment, no_engine)


def test_budget_refuses_a_property_that_is_no_node_id_as_replay_does(
    capsys: pytest.CaptureFixture[str], repo: Path, no_engine: Path
) -> None:
    args = budget(repo)
    args[args.index(PROPERTY)] = "tests/test_a.py"
    refused(
        invoke(capsys, args), "--property 'tests/test_a.py': expected a pytest node id", no_engine
    )


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--tests-from", " "], "--tests-from needs a revision"),
        (["--test-path", "tests/data"], "--test-path goes with --tests-from"),
        (["--tests-from", "HEAD", "--test-path", "../x"], "--test-path '../x': expected"),
    ],
)
def test_accept_refuses_a_bad_oracle_before_git_is_asked(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_engine: Path,
    extra: list[str],
    fragment: str,
) -> None:
    not_a_repo = tmp_path / "not-a-repo"  # asking git first would say so instead
    not_a_repo.mkdir()
    refused(invoke(capsys, accept(not_a_repo, *extra)), fragment, no_engine)


def test_accept_refuses_a_property_that_is_no_node_id_as_replay_does(
    capsys: pytest.CaptureFixture[str], repo: Path, no_engine: Path
) -> None:
    args = accept(repo)
    args[args.index(PROPERTY)] = "test_a"
    refused(invoke(capsys, args), "--property 'test_a': expected a pytest node id", no_engine)


def test_a_fixture_that_is_no_regular_file_is_refused_before_git_by_budget_and_accept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_engine: Path
) -> None:
    not_a_repo = tmp_path / "not-a-repo"
    not_a_repo.mkdir()
    folder = tmp_path / "fixture-folder"
    folder.mkdir()
    for args in (budget(not_a_repo), accept(not_a_repo)):
        refused(invoke(capsys, [*args, "--fixture", str(folder)]), "--fixture", no_engine)


@pytest.mark.parametrize("value", ["0", "nan", "1e308"])
def test_every_command_with_a_timeout_refuses_a_bad_one_alike(
    capsys: pytest.CaptureFixture[str], repo: Path, no_engine: Path, value: str
) -> None:
    lines = set()
    for args in (
        ["replay", "--repo", str(repo), "--base", "HEAD", "--patch", "HEAD"],
        ["shrink", "-", "--test", PROPERTY, "--repo", str(repo), "--rev", "HEAD"],
        accept(repo),
        budget(repo),
    ):
        run = invoke(capsys, [*args, "--timeout", value])
        assert run.exit_code == 2, run.stderr
        lines.add(run.error_lines()[0])
    assert lines == {
        f"{ERROR}invalid value for '--timeout': {value!r} is not a number of seconds "
        "(from 0.1 to 86400)"
    }


# --- one declaration: the same flag, help and type wherever the option appears -----------


@pytest.mark.parametrize(
    "flag",
    ["--rev", "--seed", "--fixture", "--test-path", "--tests-from", "--image", "--timeout",
     "--ledger", "--property"],
)  # fmt: skip
def test_a_shared_option_reads_the_same_in_every_command(flag: str) -> None:
    found = {
        name: options[flag]
        for name in COMMANDS
        if flag in (options := command_options(name))
        # shrink's --property is a host-side function (MODULE:FUNCTION); replay takes many
        and not (flag == "--property" and name in ("shrink", "replay"))
    }
    assert len(found) >= 2, found
    assert len({option.help for option in found.values()}) == 1, found
    assert len({option.type.name for option in found.values()}) == 1, found
    assert len({option.multiple for option in found.values()}) == 1, found


def test_repo_reads_the_same_in_every_command_that_replays_a_revision() -> None:
    helps = {name: command_options(name)["--repo"].help for name in COMMANDS}
    # reproduce's --repo only says where a recorded run's commits are
    assert helps.pop("reproduce") != helps["replay"]
    assert set(helps.values()) == {"The git repository to replay."}


def test_json_names_each_command_s_document_alike() -> None:
    assert {
        name: command_options(name)["--json"].help for name in COMMANDS if name != "reproduce"
    } == {
        "replay": "Print the replay-report/2 (every property) JSON document.",
        "shrink": "Print the shrink-report/1 JSON document.",
        "accept": "Print the acceptance/1 JSON document.",
        "budget": "Print the budget-report/1 JSON document.",
    }


# --- the groups, one by one -------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "problem"),
    [
        (groups.OneTest(property_id="tests/t.py"), "--property 'tests/t.py': expected"),
        (groups.OneTest(property_id="t.py", flag="--test"), "--test 't.py': expected"),
        (groups.OneTest(command="tox -e py"), "--command must start with pytest"),
        (groups.Oracle(tests_from=" ", sides=()), "--tests-from needs a revision"),
        (groups.FixtureAndShrink(attempts=0), "--attempts 0: must be between 1 and"),
        (groups.Sampling(samples=4), "--samples 4: must be between 5 and"),
        (groups.Scheduling(evidence_cap=0), "--evidence-cap 0: must be between 1 and 200"),
        (groups.Limits(memory="lots"), "--memory 'lots': a size such as 768m or 2g"),
        (groups.Limits(memory="32m"), "--memory '32m': between 64m and"),
        (groups.Scheduling(false_block_rate=0.0), "--false-block-rate 0.0: must be above 0"),
        (groups.Scheduling(false_block_rate=2.0), "--false-block-rate 2.0: must be above 0"),
        (groups.Sampling(budget_ms=float("nan")), "--budget-ms"),
        (groups.TimingAdmission(max_age="soon"), "--max-age: not a duration"),
        (groups.TimingAdmission(admit=True), "--admit needs --owner"),
        (groups.HostProperty(paths=(Path("."),)), "--path goes with --property"),
        (groups.Session(shell=True, pdb=True), "--shell and --pdb do not go together"),
        (groups.RecordedReplay(run_dir=Path("r"), property_id="p", side="x"), "--side"),
        (groups.RecordedReplay(run_dir=Path("r"), property_id="p", replay=0), "--replay"),
    ],
)
def test_bad_options_are_refused_by_their_group_naming_the_option(group: Any, problem: str) -> None:
    with pytest.raises(InputError, match=re.escape(problem)):
        group.validate()


def test_a_group_left_at_its_defaults_is_valid() -> None:
    for group in (
        groups.OneTest(),
        groups.Oracle(),
        groups.FixtureAndShrink(),
        groups.Sampling(),
        groups.TimingAdmission(),
        groups.HostProperty(),
        groups.Session(),
        groups.Scheduling(runner_id="local"),
        groups.Limits(),
        groups.Outputs(),
    ):
        group.validate()


def test_the_oracle_names_the_sides_it_takes() -> None:
    with pytest.raises(InputError, match="--tests-from needs base, patch or a revision"):
        groups.Oracle(tests_from="").validate()


# --- shrink --test reads [tool.orchestrator] at --rev, as replay does at --base -----------

CONFIG = """\
[tool.orchestrator]
command = "pytest -x"
test-paths = ["tests"]
image = "example/runner:1"
timeout = 5
"""


@pytest.fixture
def configured(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "configured", {**TEST_A, "pyproject.toml": CONFIG})


def shrink_arguments(repo: Path | None, **given: Any) -> Any:
    """shrink's command line in its groups, laid over the project's table."""
    from orchestrator.commands._command_arguments import ShrinkArguments

    options: dict[str, Any] = {
        "property_spec": None, "test": PROPERTY, "repo": repo, "rev": "HEAD", "image": None,
        "timeout": None, **given,
    }  # fmt: skip
    return ShrinkArguments(
        host=groups.HostProperty(spec=options["property_spec"]),
        test=groups.OneTest(
            repo=options["repo"], rev=options["rev"], property_id=options["test"], flag="--test"
        ),
        oracle=groups.Oracle(sides=()),
        fixture=groups.FixtureAndShrink(attempts=2),
        limits=groups.Limits(image=options["image"], timeout_s=options["timeout"]),
        outputs=groups.Outputs(),
    ).with_project()


def test_shrink_takes_command_image_and_timeout_from_the_table_at_rev(configured: Path) -> None:
    request = shrink_arguments(configured).test_request()
    assert (request.command, request.image, request.timeout_s) == (
        "pytest -x tests",
        "example/runner:1",
        5.0,
    )


def test_shrink_options_win_over_the_table(configured: Path) -> None:
    request = shrink_arguments(configured, image="mine:2", timeout=7.0).test_request()
    assert (request.image, request.timeout_s) == ("mine:2", 7.0)


def test_shrink_without_a_table_keeps_its_defaults(repo: Path) -> None:
    request = shrink_arguments(repo, image="mine:2").test_request()
    assert (request.command, request.image, request.timeout_s) == ("pytest -q", "mine:2", 60.0)


def test_shrink_against_a_host_property_reads_no_table(configured: Path) -> None:
    arguments = shrink_arguments(None, test=None, rev=None, property_spec="m:f")
    assert (arguments.limits.image, arguments.test.command) == (None, None)


def test_shrink_needs_no_image_option_when_the_table_names_one(
    capsys: pytest.CaptureFixture[str], configured: Path, no_engine: Path, tmp_path: Path
) -> None:
    fixture = tmp_path / "f.json"
    fixture.write_text('{"n": 1}')
    args = ["shrink", str(fixture), "--test", PROPERTY, "--repo", str(configured), "--rev", "HEAD"]
    run = invoke(capsys, args)
    # Past every usage check: the engine is asked for the table's image (and answers not).
    assert run.exit_code == 3, run.stderr
    assert "no Docker engine answers" in run.error_lines()[0]


def test_shrink_refuses_a_bad_table_at_rev_as_replay_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_engine: Path
) -> None:
    files = {**TEST_A, "pyproject.toml": "[tool.orchestrator]\nreplay = 3\n"}
    bad = make_repo(tmp_path / "bad", files)
    args = ["shrink", "-", "--test", PROPERTY, "--repo", str(bad), "--rev", "HEAD", "--image", "i"]
    refused(invoke(capsys, args), "replay", no_engine)
