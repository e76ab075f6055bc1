"""``orchestrator digest``: the canonical digest of a JSON document (records.md)."""

from __future__ import annotations

import typer

from orchestrator.commands._command_options import (
    DigestAsJsonOption,
    DigestFileArgument,
    DigestOracleKeysOption,
)


def digest(
    file: DigestFileArgument,
    oracle_keys: DigestOracleKeysOption = None,
    as_json: DigestAsJsonOption = False,
) -> None:
    """Print sha256:<hex> of the canonical JSON (sorted keys, compact, UTF-8).

    FILE is a JSON file, or - for standard input.

    With --oracle-keys only the named keys are hashed (a key the document lacks is
    left out), as the timing admission's locked oracle digest is.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.core.digest import CANONICALIZATION, oracle_digest
    from orchestrator.errors import InputError
    from orchestrator.files import read_json

    keys = tuple(k.strip() for k in (oracle_keys or "").split(",") if k.strip())
    if oracle_keys is not None and not keys:
        raise InputError("--oracle-keys: give at least one key name")
    value = oracle_digest(read_json(file), keys)
    if as_json:
        doc = {"digest": value, "canonicalization": CANONICALIZATION, "oracle_keys": list(keys)}
        echo_json(doc)
    else:
        typer.echo(value)


def register(app: typer.Typer) -> None:
    app.command("digest")(digest)
