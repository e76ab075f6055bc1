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
loaded = sorted({name.split(".")[0] for name in sys.modules})
sys.__stdout__.write("\\n" + json.dumps(loaded) + "\\n")
"""


def loaded_by(*args: str, cwd=None) -> set[str]:
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
