"""``orchestrator shrink``: shrink a failing JSON fixture against a Python property."""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from orchestrator.core.shrink import Property, ShrinkReport

_MAX_STEPS_SHOWN = 20


def load_property(spec: str, paths: list[Path]) -> Property:
    """Import ``MODULE:FUNCTION``; the --path folders (then the current one) come first."""
    from orchestrator.errors import PropertyImportError

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise PropertyImportError(f"--property {spec!r}: expected MODULE:FUNCTION")
    for folder in reversed(paths):
        sys.path.insert(0, str(folder.resolve()))
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:  # any import-time failure is the user's module, not ours
        raise PropertyImportError(
            f"--property {spec!r}: cannot import {module_name}: "
            f"{type(error).__name__}: {error}".splitlines()[0]
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PropertyImportError(f"--property {spec!r}: {module_name} has no {attribute}")
        target = getattr(target, part)
    if not callable(target):
        raise PropertyImportError(f"--property {spec!r}: {attribute} is not callable")
    prop: Property = target
    return prop


def _describe_path(report: ShrinkReport) -> list[str]:
    steps = report.shrink_path
    if len(steps) <= _MAX_STEPS_SHOWN:
        return [f"  - {step['op']} {step['path']}" + _tail(step) for step in steps]
    counts = Counter(step["op"] for step in steps)
    return [f"  - {op} x{count}" for op, count in sorted(counts.items())]


def _tail(step: dict[str, Any]) -> str:
    if "length" in step:
        return f" -> length {step['length']}"
    if "to" in step:
        return f" -> {step['to']}"
    return ""


def shrink(
    fixture: Annotated[
        str,
        typer.Argument(
            metavar="FIXTURE", help="The failing JSON fixture, or - for standard input."
        ),
    ],
    *,
    property_spec: Annotated[
        str,
        typer.Option(
            "--property",
            metavar="MODULE:FUNCTION",
            help="The property: called with the payload, it fails by raising or returning False.",
        ),
    ],
    path: Annotated[
        list[Path] | None,
        typer.Option(
            "--path",
            metavar="DIR",
            help="A folder to import the property from (repeatable; the current folder is "
            "searched last).",
        ),
    ] = None,
    attempts: Annotated[
        int,
        typer.Option(
            "--attempts", min=1, help="Shrink this many times; stable only if all agree (>= 2)."
        ),
    ] = 2,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write the minimal fixture here (atomically)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the shrink-report/1 document.")
    ] = False,
) -> None:
    """Shrink FIXTURE to a minimal payload that still fails the property the same way.

    FIXTURE is the failing JSON fixture, or - for standard input.

    Same way means the same exception type at the same line of the property (a False
    return is its own failure). Keys and items are dropped from the end, strings
    shortened, integers moved toward zero, until no single step keeps the failure.
    The shrink runs --attempts times; the report is stable when every minimum has the
    same digest. Exit 2 when the property cannot be imported or does not fail on FIXTURE.
    """
    from orchestrator.core.shrink import shrink_report
    from orchestrator.files import dumps, read_json, write_json_atomic

    payload = read_json(fixture)
    prop = load_property(property_spec, list(path or []))
    report = shrink_report(payload, prop, attempts=attempts)
    if out is not None:
        write_json_atomic(out, report.minimal)
    if as_json:
        typer.echo(dumps(report.to_json()))
        return
    from orchestrator.core.digest import canonical_json

    typer.echo(f"minimal: {canonical_json(report.minimal).decode('utf-8')}")
    typer.echo(f"minimal_digest: {report.minimal_digest}")
    typer.echo(f"origin_digest: {report.origin_digest}")
    typer.echo(f"failure: {report.failure.describe()}")
    typer.echo(f"shrink_path: {len(report.shrink_path)} steps")
    for line in _describe_path(report):
        typer.echo(line)
    typer.echo(f"property_calls: {report.property_calls}")
    typer.echo(
        f"attempts: {report.attempts}, identical_minima: {report.identical_minima}, "
        f"stable: {'yes' if report.stable else 'no'}"
    )
    if out is not None:
        typer.echo(f"minimal fixture written to {out}")


def register(app: typer.Typer) -> None:
    app.command("shrink")(shrink)
