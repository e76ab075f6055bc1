"""The options of the commands outside the replay family (image, thaw, report, tally,
merge, digest, classify, admit, doctor, freeze show/export): one declaration each, as
:mod:`orchestrator.commands._options` holds those of replay and the commands that share
its options. A command names its options; none is declared in a command's module
(tests/unit/test_options_declared_once.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands._options import image_reference, json_option
from orchestrator.core.bounds import MAX_REPLAYS

PLOT_EXTRA_HINT = "pip install 'orchestrator[plot]'"

# admit -------------------------------------------------------------------------------

AdmitRequestArgument = Annotated[
    str,
    typer.Argument(
        metavar="REQUEST",
        help="A timing-admission-request/1 JSON file, or - for standard input.",
    ),
]
AdmitAsJsonOption = Annotated[bool, json_option(text="Print the timing-admission/1 document.")]
AdmitRecordOption = Annotated[
    bool,
    typer.Option(
        "--record",
        help="Store the code in the ledger's event log; timing_debt_opened also "
        "writes the timing freeze.",
    ),
]
AdmitOwnerOption = Annotated[
    str | None, typer.Option("--owner", help="The freeze's owner (overrides the request's).")
]
# classify ----------------------------------------------------------------------------

ClassifyEvidenceArgument = Annotated[
    str,
    typer.Argument(
        metavar="EVIDENCE",
        help="A replay-evidence/1 JSON file (docs/records.md), or - for standard input.",
    ),
]
ClassifyAsJsonOption = Annotated[bool, json_option(text="Print the replay-decision/1 document.")]
# digest ------------------------------------------------------------------------------

DigestFileArgument = Annotated[
    str, typer.Argument(metavar="FILE", help="A JSON file, or - for standard input.")
]
DigestOracleKeysOption = Annotated[
    str | None,
    typer.Option(
        "--oracle-keys",
        metavar="a,b,c",
        help="Hash only these top-level keys (the oracle); default: the whole document.",
    ),
]
DigestAsJsonOption = Annotated[
    bool, json_option(text="Print a JSON document instead of the bare digest.")
]
# merge -------------------------------------------------------------------------------

MergeRunDirsArgument = Annotated[
    list[Path],
    typer.Argument(
        metavar="RUN_DIR...",
        help="The run folders of every shard (replay --shard I/N), in any order.",
    ),
]
MergeAsJsonOption = Annotated[
    bool, json_option(text="Print the merged replay-report/2 document, every property.")
]
MergeOutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Also write the merged run as a run folder here (`orchestrator report` reads it).",
    ),
]
# tally -------------------------------------------------------------------------------

TallyWeeksOption = Annotated[
    int, typer.Option("--weeks", min=1, max=520, help="How many ISO weeks to show.")
]
TallyPngOption = Annotated[
    Path | None,
    typer.Option(
        "--png",
        help="Also draw the weekly series to this PNG (a panel per count); needs "
        f"matplotlib: {PLOT_EXTRA_HINT}.",
    ),
]
TallyMarkdownOption = Annotated[
    bool, typer.Option("--markdown", help="Print a Markdown table (for $GITHUB_STEP_SUMMARY).")
]
TallyAsJsonOption = Annotated[bool, json_option(text="Print a tally/1 JSON document.")]
TallyNowOption = Annotated[
    str | None,
    typer.Option("--now", help="Count as of this instant (ISO-8601; UTC if no offset)."),
]
# report ------------------------------------------------------------------------------

ReportRunDirsArgument = Annotated[
    list[Path],
    typer.Argument(
        metavar="RUN_DIR...", help="Finished run folders (replay's --out; several at once)."
    ),
]
ReportHtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Write the page here (default with no other output: RUN_DIR/report.html).",
    ),
]
ReportMarkdownOption = Annotated[
    bool,
    typer.Option("--markdown", help="Print Markdown for the CI job summary on stdout."),
]
ReportSummaryOption = Annotated[
    Path | None,
    typer.Option(
        "--summary",
        help='Append the Markdown to this file, e.g. "$GITHUB_STEP_SUMMARY" '
        "(kept under GitHub's 1 MiB limit).",
    ),
]
ReportJunitOption = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")]
ReportAnnotationsOption = Annotated[
    bool | None,
    typer.Option(
        "--annotations/--no-annotations",
        help="Print GitHub annotations (::error for blocking, ::warning for undecided "
        "properties) on stdout. Default: on when GITHUB_ACTIONS is set, unless "
        "--markdown has stdout.",
        show_default=False,
    ),
]
# thaw --------------------------------------------------------------------------------

ThawRepoOption = Annotated[
    Path, typer.Option("--repo", help="The repository under test (default: here).")
]
ThawRevOption = Annotated[
    str, typer.Option("--rev", help="Revision to re-probe at (default: HEAD).")
]
ThawDueWithinOption = Annotated[
    str,
    typer.Option(
        "--due-within",
        help="Also take freezes expiring within this long from now (30m, 72h, 7d).",
    ),
]
ThawReplaysOption = Annotated[
    int,
    typer.Option(
        "--replays", min=1, max=MAX_REPLAYS, help="Replays per flake freeze (timing: >= 5)."
    ),
]
ThawAsJsonOption = Annotated[bool, json_option(text="Print a thaw-report/1 document.")]
# image -------------------------------------------------------------------------------

ImageBuildRepoOption = Annotated[Path, typer.Option("--repo", help="The project's git repository.")]
ImageBuildRevOption = Annotated[
    str,
    typer.Option("--rev", help="The revision whose pyproject.toml and requirement files are read."),
]
ImageBuildRequirementsOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--requirements",
        metavar="FILE",
        help="A pip requirements file (repeatable), read at --rev through git when it "
        "lies in the repository, else from disk (its includes stay in its folder); `-e .` "
        "and the project's own name are left out.",
    ),
]
ImageBuildExtrasOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--extra",
        metavar="NAME",
        help="An extra of [project.optional-dependencies] (repeatable).",
    ),
]
ImageBuildGroupsOption = Annotated[
    tuple[str, ...],
    typer.Option("--group", metavar="NAME", help="A group of [dependency-groups] (repeatable)."),
]
ImageBuildPipOption = Annotated[
    tuple[str, ...],
    typer.Option("--pip", metavar="SPEC", help="One more requirement (repeatable)."),
]
ImageBuildAptOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--apt",
        metavar="PKG",
        help="A Debian package for the base (repeatable): the base is then made offline "
        "with mmdebstrap from this machine's apt sources (needs root).",
    ),
]
ImageBuildPythonImageOption = Annotated[
    str | None,
    typer.Option(
        "--python-image",
        metavar="REF",
        parser=image_reference,  # a malformed reference is exit 2, before anything runs
        help="The image to build on: a local image with python3 and ensurepip, never pulled.",
        show_default="orchestrator-runner:latest",
    ),
]
ImageBuildIndexUrlOption = Annotated[
    str | None,
    typer.Option(
        "--index-url",
        metavar="URL",
        help="The package index (default: $PIP_INDEX_URL, else pip's own).",
    ),
]
ImageBuildExtraIndexUrlsOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--extra-index-url",
        metavar="URL",
        help="Another index (repeatable; default: $PIP_EXTRA_INDEX_URL).",
    ),
]
ImageBuildFindLinksOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--find-links",
        metavar="DIR|URL",
        help="A folder of wheels, mounted read-only into the build container, or a URL "
        "(repeatable; default: $PIP_FIND_LINKS).",
    ),
]
ImageBuildNoIndexOption = Annotated[
    bool | None,
    typer.Option(
        "--no-index/--index",
        help="Use only --find-links (default: $PIP_NO_INDEX; implied with no network).",
        show_default=False,
    ),
]
ImageBuildTrustedHostsOption = Annotated[
    tuple[str, ...],
    typer.Option(
        "--trusted-host",
        metavar="HOST",
        help="A host pip may reach without valid HTTPS (repeatable; default: $PIP_TRUSTED_HOST).",
    ),
]
ImageBuildCertOption = Annotated[
    Path | None,
    typer.Option(
        "--cert",
        metavar="FILE",
        help="A CA bundle for the index's HTTPS, mounted read-only (default: $PIP_CERT).",
    ),
]
ImageBuildNetworkOption = Annotated[
    str | None,
    typer.Option(
        "--network",
        metavar="NAME",
        help="The network the build container joins to reach an index: host, or a "
        "network's name (default: $ORCHESTRATOR_IMAGE_NETWORK, else none).",
        show_default=False,
    ),
]
ImageBuildAsJsonOption = Annotated[
    bool, json_option(text="Print the project-image/1 JSON document.")
]
ImageRunnerBaseImageOption = Annotated[
    str | None,
    typer.Option(
        "--base-image",
        metavar="REF",
        parser=image_reference,
        help="Build on this local image (python3, pytest and useradd; never pulled) "
        "instead of the base made offline from Debian's packages.",
    ),
]
ImageRunnerAsJsonOption = Annotated[
    bool, json_option(text="Print the runner-image/1 JSON document.")
]
# doctor ------------------------------------------------------------------------------

DoctorAsJsonOption = Annotated[bool, json_option(text="Print a doctor/1 JSON document.")]
# freeze_documents -------------------------------------------------------------------

ShowFreezeFreezeIdArgument = Annotated[
    int, typer.Argument(metavar="ID", help="The freeze id (from freeze list).")
]
ExportFreezesOutOption = Annotated[
    Path | None,
    typer.Option("--out", help="Write the document to FILE (atomically) instead of stdout."),
]
