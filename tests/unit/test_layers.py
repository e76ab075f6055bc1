"""The rooms of docs/architecture.md hold: no import runs upward, and the probe imports
nothing of the package outside itself (it runs in any image with pytest)."""

from __future__ import annotations

import ast
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
    "model": 5, "kinds": 5, "errors": 5, "log": 5, "interrupts": 5, "images": 5,
    "lazy_names": 5, "prompt_exit": 5,
}  # fmt: skip


def room(module: str) -> str:
    """``orchestrator.services.sides`` -> ``services``; the package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import of the package in the file, also the
    ones inside functions and under TYPE_CHECKING."""
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
    return [(line, name) for line, name in found if name.startswith("orchestrator.")]


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
