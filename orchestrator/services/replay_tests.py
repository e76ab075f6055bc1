"""Which tests a replay runs, and whose test files judge them (planned before anything runs).

- ``--changed``: the tests the patch touched (:mod:`orchestrator.services.changed`);
- ``--tests-from``: one revision's test files laid over both sides
  (:mod:`orchestrator.services.tests_from`);
- what pytest is handed on each side: the selected node ids that side has (one node id
  pytest cannot find would stop the whole side), whole modules where ``--changed`` chose
  every test of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestrator.core.changed import Selection
from orchestrator.core.pytest_command import pytest_options, pytest_paths
from orchestrator.core.replay_run import BASE, PATCH, ReplayOptions
from orchestrator.core.test_files import TestOverlay
from orchestrator.services.changed import select_changed_tests
from orchestrator.services.oracle import property_oracles
from orchestrator.services.tests_from import (
    log_overlay,
    missing_at_tests_from,
    normal_test_paths,
    plan_test_overlay,
    refuse_missing,
    resolve_tests_from,
    with_removed_tests,
)


@dataclass(frozen=True, kw_only=True)
class TestsPlan:
    """The tests of a run: the selected node ids (empty: whatever the command runs), the
    overlay and the selection that chose them, and what pytest is handed on each side."""

    __test__ = False

    property_ids: tuple[str, ...]
    overlay: TestOverlay | None = None
    selection: Selection | None = None
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def plan_tests(options: ReplayOptions, repo: Path, base_rev: str, patch_rev: str) -> TestsPlan:
    """Select, overlay, and find what each side lacks; bad input raises InputError (the
    options that do not go together were refused with the command line)."""
    command_paths = pytest_paths(options.command)
    sides = {BASE: base_rev, PATCH: patch_rev}
    selection = None
    property_ids = options.property_ids
    if options.changed:
        selection = select_changed_tests(repo, base_rev, patch_rev, command_paths)
        property_ids = selection.selected
    overlay = None
    if options.tests_from is not None:
        ref = options.tests_from.strip()
        overlay = plan_test_overlay(
            repo,
            ref=ref,
            rev=resolve_tests_from(repo, ref, sides),
            sides=sides,
            property_ids=property_ids,
            command_paths=command_paths,
            test_paths=normal_test_paths(options.test_paths),
            command_options=pytest_options(options.command),
        )
        if not options.property_ids:  # what the overlay takes away, where nobody named tests
            overlay = with_removed_tests(repo, overlay, base_rev, command_paths)
    if not property_ids:
        if overlay is not None:
            log_overlay(overlay)
        return TestsPlan(property_ids=(), overlay=overlay, selection=selection)
    oracle = property_oracles(repo, base_rev, patch_rev, property_ids, overlay=overlay)
    if overlay is not None:
        missing = missing_at_tests_from(oracle)
        if selection is None:
            refuse_missing(overlay.ref, overlay.rev, missing)
        elif missing:
            # --changed chose them on the pull request's own trees; the tests that judge
            # both sides do not have them, so there is nothing to run them by.
            kept = tuple(nodeid for nodeid in property_ids if nodeid not in missing)
            selection = replace(selection, selected=kept)
            property_ids = kept
        log_overlay(overlay)
    absent = {
        BASE: {p for p in property_ids if oracle[p].base_digest is None},
        PATCH: {p for p in property_ids if oracle[p].patch_digest is None},
    }
    targets = {
        side: side_targets(property_ids, missing, selection) for side, missing in absent.items()
    }
    return TestsPlan(
        property_ids=property_ids, overlay=overlay, selection=selection, targets=targets
    )


def side_targets(
    property_ids: tuple[str, ...], absent: set[str], selection: Selection | None
) -> tuple[str, ...]:
    """What pytest is handed on a side that lacks ``absent``: the ids it has (whole modules
    where --changed chose a module's every test); all of them when it has none, so that
    pytest reports them not found rather than running everything. Pure."""
    if selection is not None:
        targets = selection.targets(absent)
    else:
        targets = tuple(p for p in property_ids if p not in absent)
    return targets or property_ids
