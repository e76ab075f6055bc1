"""``orchestrator report``: a run folder as an HTML page, a job summary, JUnit XML, annotations."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import typer

from orchestrator.commands._command_options import (
    ReportAnnotationsOption,
    ReportHtmlOption,
    ReportJunitOption,
    ReportMarkdownOption,
    ReportRunDirsArgument,
    ReportSummaryOption,
)

PAGE_NAME = "report.html"


def report(
    run_dirs: ReportRunDirsArgument,
    *,
    html: ReportHtmlOption = None,
    markdown: ReportMarkdownOption = False,
    summary: ReportSummaryOption = None,
    junit: ReportJunitOption = None,
    annotations: ReportAnnotationsOption = None,
) -> None:
    """Write other views of finished run folders: nothing is replayed or decided again.

    RUN_DIR... is one or more run folders that `replay` wrote (its --out), or that
    `merge` joined.

    The HTML page is one self-contained file (no network when opened): the pins,
    the exit status and a count per lane, then one row per property, blocking lanes
    first, with each side's replays as a strip of cells linking to their logs, the
    call counts that differ, reasons, failing assertions, a lane filter and a search
    box. Every file is written atomically. A folder without summary.json (an
    interrupted run) or marked incomplete is refused (exit 2).

    Exit status: 0 when written (whatever the runs decided), 2 for a folder or an
    option that cannot be used.
    """
    from orchestrator.core.reports.annotations import render_annotations
    from orchestrator.core.reports.markdown import render_markdown
    from orchestrator.errors import InputError
    from orchestrator.services.run_folders import (
        ReportTargets,
        check_targets,
        read_folders,
        views,
        write_reports,
    )

    if annotations is None:
        annotations = bool(os.environ.get("GITHUB_ACTIONS")) and not markdown
    documents = read_folders(run_dirs)  # every refusal before anything is written
    if html is None and not (markdown or summary or junit or annotations):
        if len(run_dirs) > 1:
            raise InputError("several run folders: name the page with --html FILE")
        html = run_dirs[0] / PAGE_NAME
    targets = ReportTargets(html=html, junit=junit, summary=summary)
    check_targets(targets)
    written = write_reports(documents, targets)
    if markdown:
        runs = views(documents, report_dir=Path.cwd())
        typer.echo(render_markdown(runs), nl=False)
    if annotations:
        runs = views(documents, report_dir=Path.cwd())
        typer.echo(render_annotations(runs), nl=False)
    # Paths go where they do not mix with Markdown or annotations a CI step may capture.
    print_written(written, err=markdown or annotations)


def print_written(written: Mapping[str, Path], *, err: bool) -> None:
    for kind, path in written.items():
        typer.echo(f"{kind}: {path}", err=err)


def check_replay_targets(*, html: Path | None, junit: Path | None, summary: Path | None) -> None:
    """``replay --html/--junit/--summary``: refuse unwritable paths before anything runs."""
    from orchestrator.services.run_folders import ReportTargets, check_targets

    check_targets(ReportTargets(html=html, junit=junit, summary=summary))


def write_after_replay(
    run_dir: Path, *, html: Path | None, junit: Path | None, summary: Path | None, err: bool
) -> None:
    """``replay --html/--junit/--summary``: the same reports, of the run just finished."""
    from orchestrator.services.run_folders import ReportTargets, read_folders, write_reports

    targets = ReportTargets(html=html, junit=junit, summary=summary)
    print_written(write_reports(read_folders([run_dir]), targets), err=err)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
