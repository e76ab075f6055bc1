"""``orchestrator merge``: the run folders of a CI matrix's shards as one report and one exit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import typer

from orchestrator.commands._command_options import (
    MergeAsJsonOption,
    MergeOutOption,
    MergeRunDirsArgument,
)
from orchestrator.commands._table import Column, print_table

_COLUMNS = (
    Column(heading="property"),
    Column(heading="base"),
    Column(heading="patch"),
    Column(heading="lane"),
    Column(heading="code"),
    Column(heading="shard", justify="right"),
    Column(heading="reasons"),
)


def merge(
    run_dirs: MergeRunDirsArgument,
    *,
    as_json: MergeAsJsonOption = False,
    out: MergeOutOption = None,
) -> None:
    """Join the shards of one run (replay --shard 1/N ... N/N) into one report and one
    exit status.

    RUN_DIR... is the run folder of every shard (replay's --out), in any order.

    Refuses (exit 2, naming the folder) shards with different pins (base, patch,
    image ID, command, seed, test source, fixture, replays, screening, environment), cut from
    another selection, a shard missing or given twice, a property in two shards, and
    a folder that is not a finished run (no summary.json, or marked incomplete).

    Exit status: the worst of the shards' (0 no blocking lane, 1 blocking, 3
    undecided), 2 for folders that cannot be merged.
    """
    from orchestrator.commands._output import echo_json_with_list, echo_line
    from orchestrator.services.merge import merge as merge_shards

    result = merge_shards(run_dirs, out=out)
    merged = result.merged
    if as_json:  # every property, read again from the shards
        document = {**merged.summary, "decisions": [], "decisions_left_out": 0}
        echo_json_with_list(document, "decisions", result.entries())
    else:
        listed = merged.summary.get("decisions") or []
        if listed:
            print_table(_COLUMNS, (_row(entry) for entry in _blocking_first(listed)))
        left_out = merged.summary.get("decisions_left_out") or 0
        if left_out:
            echo_line(
                f"{left_out} {'more' if listed else 'properties, all'} in no_freeze (behaved "
                "alike on both sides): `orchestrator report` lists them"
            )
        shards = merged.run_log.get("merged_from") or []
        screening = merged.summary.get("screening")
        if isinstance(screening, Mapping) and screening.get("policy") == "screen":
            from orchestrator.core.replay_run import screening_line

            typer.echo(screening_line(screening))
        typer.echo(f"merged {len(shards)} shards, {merged.summary.get('properties')} properties")
        if out is not None:
            typer.echo(f"run folder: {out}")
    status = merged.summary.get("exit_status")
    if isinstance(status, int) and status:
        raise typer.Exit(status)


def _blocking_first(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    from orchestrator.core.reports.view import lane_kind, lane_rank

    def rank(entry: Mapping[str, Any]) -> tuple[int, int]:
        lane = str(entry.get("lane"))
        return (lane_kind(lane, entry.get("blocking") is True).rank, lane_rank(lane))

    return sorted(entries, key=rank)


def _labels(labels: Any, reasons: Any) -> str:
    """``assert_pass x5`` / ``harness_error(engine_gone) x2``, as replay's table says."""
    names: dict[str, int] = {}
    for index, label in enumerate(labels if isinstance(labels, Sequence) else ()):
        reason = reasons[index] if isinstance(reasons, Sequence) and index < len(reasons) else None
        name = str(label)
        if name not in ("assert_pass", "assert_fail") and reason:
            name = f"{name}({reason})"
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in names.items()) or "-"


def _row(entry: Mapping[str, Any]) -> tuple[str, ...]:
    from orchestrator.core.replay_run import table_reasons

    return (
        str(entry.get("property_id")),
        _labels(entry.get("base_labels"), entry.get("base_reasons")),
        _labels(entry.get("patch_labels"), entry.get("patch_reasons")),
        str(entry.get("lane")),
        str(entry.get("code")),
        str(entry.get("shard")),
        table_reasons(str(entry.get("code")), [str(r) for r in entry.get("reasons") or ()]),
    )


def register(app: typer.Typer) -> None:
    app.command("merge")(merge)
