"""Fixtures for the ledger suite: every test runs on SQLite and on a real PostgreSQL 15.

The PostgreSQL server is a throwaway: ``initdb`` into a temporary folder, ``pg_ctl`` on a
free loopback port, run as an unprivileged user when the tests run as root, stopped at
the end of the session whatever happens. Each test gets its own database: an empty one
where the test is about creating or upgrading the schema (``FRESH_MODULES``), else a copy
(``CREATE DATABASE ... TEMPLATE``) of one database migrated once per session, which
``Ledger.open`` finds at the head revision and leaves as it is.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_USER = "orchestrator"


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_account() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: pick an unprivileged account when we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a postgres nor a nobody account exists")


@dataclass(frozen=True, kw_only=True)
class PostgresServer:
    port: int
    data_dir: Path

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, template: str | None = None) -> str:
        """A new database: empty, or a copy of ``template``."""
        import psycopg

        name = f"ledger_{uuid.uuid4().hex[:12]}"
        copy = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={PG_USER} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}')
        return name


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.fail(
            "PostgreSQL server binaries (initdb, pg_ctl) not found; "
            "install the Debian package postgresql-15 (make test does)"
        )
    account = _server_account()
    base = Path(tempfile.mkdtemp(prefix="orchestrator-pg-"))
    data_dir = base / "data"
    log_file = base / "server.log"
    prefix: list[str] = []
    if account is not None:
        os.chown(base, account.pw_uid, account.pw_gid)
        prefix = ["runuser", "-u", account.pw_name, "--"]
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}

    def run(*args: str) -> None:
        subprocess.run(
            [*prefix, *args], check=True, capture_output=True, env=env, cwd=base, timeout=120
        )

    started = False
    try:
        run(
            initdb,
            "-D",
            str(data_dir),
            "-U",
            PG_USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-locale",
        )
        options = (
            f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        run(
            pg_ctl,
            "-D",
            str(data_dir),
            "-o",
            options,
            "-l",
            str(log_file),
            "-w",
            "-t",
            "60",
            "start",
        )
        started = True
        yield PostgresServer(port=port, data_dir=data_dir)
    except subprocess.CalledProcessError as error:
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        pytest.fail(f"PostgreSQL did not start: {error.stderr!r} {log[-2000:]}")
    finally:
        if started:
            subprocess.run(
                [*prefix, pg_ctl, "-D", str(data_dir), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                env=env,
                cwd=base,
                timeout=120,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts the PostgreSQL server carries the ``postgres`` mark."""
    for item in items:
        if "postgres_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


# Tests of creating and upgrading the schema (concurrently, too): an empty database each.
FRESH_MODULES = ("test_migrations.py", "test_concurrency.py")


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    """A database migrated to the head revision once, copied for each test."""
    from orchestrator.adapters.ledger import Ledger

    name = postgres_server.create_database()
    with Ledger.open(postgres_server.url(name)):
        pass  # opening migrates; closing disposes of every connection (a template has none)
    return name


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new ledger URL on each back end: an empty SQLite file; on PostgreSQL an empty
    database for the schema tests (``FRESH_MODULES``), a migrated copy for the others."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    if request.path.name in FRESH_MODULES:
        return server.url(server.create_database())
    return server.url(server.create_database(request.getfixturevalue("postgres_template")))


@pytest.fixture
def backend(ledger_url: str) -> str:
    return "postgresql" if ledger_url.startswith("postgresql") else "sqlite"
