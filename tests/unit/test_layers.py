"""The rooms of docs/architecture.md hold: no import runs upward, the probe imports
nothing of the package outside itself (it runs in any image with pytest), each room
imports only what its allow-list names (the commands no Docker, git or ledger adapter:
they ask a service), and no module imports another module's private name."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
# Lower rank = higher room; a module may import its own room and any room below it.
RANKS = {
    "cli": 0, "_entry": 0, "__main__": 0, "quarantine": 0,
    "commands": 1,
    "services": 2,
    "adapters": 3, "files": 3,  # files: the shell's own reads and atomic writes
    "core": 4,
    "model": 5, "kinds": 5, "errors": 5, "log": 5, "interrupts": 5,
    "lazy_names": 5, "prompt_exit": 5,
}  # fmt: skip


def room(module: str) -> str:
    """``orchestrator.services.sides`` -> ``services``; the package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def all_imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module or module.name) for every import in the file, also the ones
    inside functions and under TYPE_CHECKING."""
    module = "orchestrator." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] if base else []
            found.extend((node.lineno, name) for name in [base, *names] if name)
    return found


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import of the package in the file."""
    return [(line, name) for line, name in all_imports_of(path) if name.startswith("orchestrator.")]


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_upward(path: Path) -> None:
    own = room("orchestrator." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    wrong = []
    for line, name in imports_of(path):
        target = room(name)
        if own == "probe":
            if target != "probe":
                wrong.append(f"line {line}: {name} (the probe imports only itself)")
            continue
        if target in ("probe", "") or own not in RANKS or target not in RANKS:
            continue  # the probe's constants and the package's version are for everyone
        if RANKS[target] < RANKS[own]:
            wrong.append(f"line {line}: {name} ({own} may not import {target})")
    assert not wrong, "\n".join(wrong)


def test_every_room_is_known() -> None:
    """A new top-level module or package is placed in a room on purpose."""
    rooms = {room("orchestrator." + p.relative_to(PACKAGE).with_suffix("").parts[0])
             for p in SOURCES if p.name != "__init__.py" or p.parent != PACKAGE}  # fmt: skip
    assert rooms - set(RANKS) - {"probe"} == set()


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The parser resolves relative and function-level imports (else the test above could
    pass on nothing)."""
    found = imports_of(PACKAGE / "core" / "lanes.py")
    assert found, "core/lanes.py imports something of the package"
    assert all(name.startswith("orchestrator.") for _, name in found)


# --- allow-lists: what each room may import ----------------------------------------------
# A target is a room of the package ("core"), one adapter module ("adapters.git") or an
# outside distribution ("ext:typer"). The standard library is open to every room but the
# commands, which leave processes (subprocess) to the services.

COMMON = {"model", "kinds", "errors", "log", "interrupts", "lazy_names", "prompt_exit", "probe"}
ALLOWED: dict[str, set[str]] = {
    "cli": COMMON | {"cli", "commands", "core", "ext:click", "ext:typer"},
    "_entry": COMMON | {"cli"},
    "__main__": {"_entry"},
    "__init__": COMMON,
    # Parse, validate, call one service, print: never the Docker SDK, git or the ledger.
    # ledger_location (the default URL, no SQL) and input_file (the cap on a file a flag
    # names) are checks of the command line; files the command's own JSON in and out.
    "commands": COMMON
    | {"commands", "services", "core", "files", "ext:click", "ext:typer", "ext:rich"}
    | {"adapters.ledger_location", "adapters.input_file"},
    # The SDK's types (DockerClient, under TYPE_CHECKING) and the Docker adapter only where
    # DOCKER_ADAPTER_USERS says: the others see an engine through the backend seam.
    "services": COMMON
    | {"services", "core", "files", "adapters", "ext:packaging", "ext:matplotlib"}
    | {"ext:docker"},
    "adapters": COMMON
    | {"adapters", "core", "files"}
    | {"ext:docker", "ext:requests", "ext:urllib3", "ext:paramiko", "ext:tenacity"}
    | {"ext:sqlalchemy", "ext:alembic", "ext:psycopg", "ext:git", "ext:gitdb"},
    "files": COMMON | {"core", "adapters.input_file"},
    "core": COMMON | {"core", "ext:packaging"},
    "quarantine": COMMON | {"quarantine", "core", "adapters.ledger", "ext:pytest"},
    "probe": {"probe", "ext:pytest", "ext:_pytest"},
    **{name: COMMON | {"core", "ext:structlog"} for name in COMMON - {"probe"}},
}
# Modules of the standard library a room may not use directly.
REFUSED_STDLIB = {"commands": {"subprocess", "sqlite3", "socket"}}


def target_of(name: str) -> str | None:
    """The allow-list entry an imported name falls under (None: the standard library or
    the package itself)."""
    if name.startswith("orchestrator."):
        parts = name.split(".")
        if parts[1] == "adapters" and len(parts) > 2:
            return f"adapters.{parts[2]}"
        return parts[1]
    top = name.split(".", maxsplit=1)[0]
    if top == "orchestrator" or top in sys.stdlib_module_names or top == "__future__":
        return None
    return f"ext:{top}"


def refusals(own: str, imports: list[tuple[int, str]]) -> list[str]:
    """What of ``imports`` (line, name) the room ``own`` may not import, once per line."""
    allowed = ALLOWED[own]
    wrong: dict[tuple[int, str], str] = {}
    for line, name in imports:
        top = name.split(".")[0]
        if top in REFUSED_STDLIB.get(own, ()):
            wrong[line, top] = f"line {line}: {name} ({own} leaves {top} to a service)"
            continue
        target = target_of(name)
        if target is None or target in allowed:
            continue
        if target.startswith("adapters.") and "adapters" in allowed:
            continue
        wrong.setdefault((line, target), f"line {line}: {name} ({own} may not import {target})")
    return list(wrong.values())


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_room_imports_only_what_its_allow_list_names(path: Path) -> None:
    own = room("orchestrator." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    wrong = refusals(own, all_imports_of(path))
    assert not wrong, "\n".join(wrong)


def test_the_allow_list_refuses_a_command_that_opens_the_ledger_or_runs_git() -> None:
    imports = [
        (1, "orchestrator.adapters.ledger"),
        (1, "orchestrator.adapters.ledger.Ledger"),
        (2, "subprocess"),
        (3, "orchestrator.services.ledger_reads"),
        (4, "git"),
    ]
    assert refusals("commands", imports) == [
        "line 1: orchestrator.adapters.ledger (commands may not import adapters.ledger)",
        "line 2: subprocess (commands leaves subprocess to a service)",
        "line 4: git (commands may not import ext:git)",
    ]
    assert refusals("services", imports[:1]) == []


# --- the backend seam: who in the services may reach the Docker adapter ----------------

# The pool builds the backends (the Docker one, Podman through it): the one module of the
# services that runs sides through the Docker adapter. Images are Docker images: building
# them, and the engine's own diagnosis (doctor), stay on the adapter (docs/architecture.md,
# "Adding a backend").
DOCKER_ADAPTER_USERS = {
    "services/sides/pool.py": "the pool: it constructs the backends",
    "services/engine_client.py": "the image commands' client (image build, image list)",
    "services/image.py": "image build",
    "services/image_wheels.py": "image build: the wheels stage",
    "services/image_reuse.py": "image build: an image already made for the inputs",
    "services/runner_image.py": "image runner: the runner image",
    "services/doctor.py": "doctor: the Docker engine's own facts",
}


def docker_adapter_imports(imports: list[tuple[int, str]]) -> list[str]:
    """Where a module imports the Docker adapter (or the SDK itself), of its ``imports``."""
    return [
        f"line {line}: {name}"
        for line, name in imports
        if name.startswith("orchestrator.adapters.docker") or name.split(".")[0] == "docker"
    ]


SERVICES = sorted((PACKAGE / "services").rglob("*.py"))


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_services_reach_the_docker_adapter_only_through_the_pool(path: Path) -> None:
    name = str(path.relative_to(PACKAGE))
    found = docker_adapter_imports(all_imports_of(path))
    if name in DOCKER_ADAPTER_USERS:
        assert found, f"{name} no longer imports the Docker adapter: drop it from the list"
        return
    assert not found, "\n".join(
        [*found, "(a backend's method, orchestrator.core.backend, does this)"]
    )


def test_the_seam_check_sees_the_docker_adapter() -> None:
    imports = [
        (1, "orchestrator.adapters"),
        (1, "orchestrator.adapters.docker"),
        (2, "orchestrator.adapters.docker.connect"),
        (3, "orchestrator.core.backend.Backend"),
        (4, "docker.DockerClient"),
        (5, "orchestrator.adapters.owners.Owner"),
    ]
    assert [found.split(":")[0] for found in docker_adapter_imports(imports)] == [
        "line 1",
        "line 2",
        "line 4",
    ]
    assert docker_adapter_imports(all_imports_of(PACKAGE / "services" / "sides" / "pool.py"))


# Running sides (services/sides/) is below the workflows (replay, accept, thaw, reproduce,
# shrink, image: one module each in services/): it imports none of them, only these
# helpers of the services beside it.
SIDES_MAY_IMPORT = {"sides", "interrupts", "run_writer", "evidence_reuse"}


@pytest.mark.parametrize(
    "path",
    sorted((PACKAGE / "services" / "sides").rglob("*.py")),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_running_sides_imports_no_workflow(path: Path) -> None:
    wrong = [
        f"line {line}: {name}"
        for line, name in all_imports_of(path)
        if name.startswith("orchestrator.services.") and name.split(".")[2] not in SIDES_MAY_IMPORT
    ]
    assert not wrong, "\n".join(wrong)


# --- private names stay in their module --------------------------------------------------


def private_imports(path: Path) -> list[str]:
    """``from orchestrator.x import _name`` where ``_name`` is no module of the package:
    another module's private name (a private module, ``commands._options``, is fine)."""
    wrong = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if not node.module.startswith("orchestrator") and node.level == 0:
            continue
        for alias in node.names:
            if not alias.name.startswith("_") or alias.name.startswith("__"):
                continue
            if node.level == 0:
                folder = PACKAGE.joinpath(*node.module.split(".")[1:])
                if (folder / f"{alias.name}.py").is_file() or (folder / alias.name).is_dir():
                    continue  # a private module of a package
            wrong.append(f"line {node.lineno}: {node.module}.{alias.name}")
    return wrong


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_s_private_name(path: Path) -> None:
    wrong = private_imports(path)
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_private_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from orchestrator.services.sides import _Run\n"
        "from orchestrator.commands import _options\n"  # a private module: fine
        "from orchestrator.services.sides import run_sides\n"
    )
    assert private_imports(module) == ["line 1: orchestrator.services.sides._Run"]
