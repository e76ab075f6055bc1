"""What a start of the CLI imports: nothing heavy before it is needed.

`orchestrator --help` and the read commands pay for every module imported on the way
(bench/cli_startup.py measures them); these tests pin which packages stay out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("docker", "sqlalchemy", "alembic", "rich", "structlog", "tenacity", "git", "requests",
         "psycopg", "pydantic", "paramiko", "packaging", "urllib3", "asyncio")  # fmt: skip

PROGRAM = """\
import json, sys
sys.argv = ["orchestrator", *sys.argv[1:]]
try:
    from orchestrator.cli import main
    main()
except SystemExit:
    pass
sys.__stdout__.write("\\n" + json.dumps(sorted(sys.modules)) + "\\n")
"""


def loaded_by(*args: str, cwd=None) -> set[str]:
    """The top-level packages a run of the CLI imported."""
    return {name.split(".")[0] for name in modules_loaded_by(*args, cwd=cwd)}


def modules_loaded_by(*args: str, cwd=None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_imports_nothing_heavy():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, orchestrator.cli; print(json.dumps(list(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize(
    "args", [("--help",), ("--version",), ("replay", "--help"), ("freeze", "--help")]
)
def test_help_imports_nothing_heavy(args):
    loaded = loaded_by(*args)
    assert "orchestrator" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize(
    "args", [("freeze", "list"), ("infra", "list"), ("check",), ("freeze", "list", "--json")]
)
def test_read_commands_on_an_up_to_date_sqlite_ledger_import_nothing_heavy(args, tmp_path):
    first = loaded_by(*args, cwd=tmp_path)
    assert {"alembic", "sqlalchemy"} <= first  # the first one made the ledger (the store)
    loaded = loaded_by(*args, cwd=tmp_path)
    assert "sqlite3" in loaded  # they did read the ledger, with the standard library
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_the_first_logged_line_loads_structlog_configured_as_asked():
    program = """\
import sys
from orchestrator import log
logger = log.get_logger("orchestrator.test")
log.configure("json", {})
assert "structlog" not in sys.modules
logger.info("hello", answer=42)
assert "structlog" in sys.modules
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # logs go to stderr, never onto a command's output
    line = json.loads(done.stderr)
    assert (line["event"], line["answer"], line["level"]) == ("hello", 42, "info")


# Typer's import was the largest part of a start: the root's help and the read commands
# (plain Click) do without it, and import no other command's module; creating
# ``model``'s dataclasses was the next largest (ledger rows need only ``kinds``).
OWN_MODULES = {
    ("--help",): set(),
    ("--version",): set(),
    ("freeze", "--help"): {"freeze"},
    ("freeze", "list"): {"freeze"},
    ("infra", "list"): {"infra"},
    ("check",): {"check"},
}


@pytest.mark.parametrize("args", list(OWN_MODULES), ids=" ".join)
def test_the_help_and_the_read_commands_import_no_typer_and_no_other_command(args, tmp_path):
    if args[-1] != "--help" and args != ("--version",):
        modules_loaded_by(*args, cwd=tmp_path)  # makes the ledger (the store)
    loaded = modules_loaded_by(*args, cwd=tmp_path)
    assert "typer" not in loaded
    assert "orchestrator.model" not in loaded
    commands = {
        name.removeprefix("orchestrator.commands.")
        for name in loaded
        if name.startswith("orchestrator.commands.") and name[len("orchestrator.commands.")] != "_"
    }
    assert commands == OWN_MODULES[args]


def test_the_roots_help_imports_no_command_discovery():
    loaded = modules_loaded_by("--help")
    assert loaded.isdisjoint({"pkgutil", "difflib"}), sorted(loaded & {"pkgutil", "difflib"})


def test_a_typer_declared_command_still_imports_typer():
    """The check above sees Typer when it is there."""
    assert "typer" in modules_loaded_by("replay", "--help")


def test_reading_a_projects_configuration_imports_no_requirement_parser():
    """``replay`` reads labels and the metadata of ``core.project_image``, not its
    requirement parser (nor ``packaging``'s)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, orchestrator.services.project_config;"
            " print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    unwanted = {"orchestrator.core.project_image.requirements", "packaging.requirements"}
    assert loaded.isdisjoint(unwanted), sorted(loaded & unwanted)
