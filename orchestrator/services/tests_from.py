"""``--tests-from base|patch|REV``: pin the revision whose test files judge both sides.

Plans the overlay before anything runs (the pure rule and overlay are
:mod:`orchestrator.core.test_files`; the git adapter lays it over each exported tree).
Bad input is an :class:`~orchestrator.errors.InputError` (exit 2), found here: an unknown
revision, a ``--test-path`` that exists on no side, a revision without test files or
without a selected test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.adapters import git as git_adapter
from orchestrator.core.oracle import OracleChange
from orchestrator.core.test_files import (
    TestOverlay,
    is_test_module_name,
    missing_test_paths,
    normal_path,
    plan_overlay,
    rule_for_tests,
)
from orchestrator.errors import InputError, UnknownRevisionError
from orchestrator.log import get_logger

log = get_logger(__name__)


def normal_test_paths(test_paths: Sequence[str]) -> tuple[str, ...]:
    """``--test-path`` values as repository-relative paths; a bad one is exit 2."""
    normal: dict[str, None] = {}
    for text in test_paths:
        path = normal_path(text)
        if path is None:
            raise InputError(
                f"--test-path {text!r}: expected a path inside the repository "
                "(relative, without '..')"
            )
        normal.setdefault(path, None)
    return tuple(normal)


def resolve_tests_from(repo: Path, ref: str, sides: Mapping[str, str]) -> str:
    """The SHA ``--tests-from`` names: a side's name (``base``, ``patch`` for replay) is that
    side's pinned SHA, anything else a revision of ``repo``."""
    if ref in sides:
        return sides[ref]
    try:
        return git_adapter.resolve_rev(repo, ref)
    except UnknownRevisionError:
        names = ", ".join([*sides, "or a revision"])
        raise InputError(f"--tests-from {ref!r}: not a revision of {repo} ({names})") from None


def plan_test_overlay(
    repo: Path,
    *,
    ref: str,
    rev: str,
    sides: Mapping[str, str],
    property_ids: Sequence[str],
    command_paths: Sequence[str],
    test_paths: Sequence[str],
) -> TestOverlay:
    """The test files of ``rev`` to lay over every side (``sides``: name -> SHA)."""
    trees: dict[str, dict[str, str]] = {}

    def tree(sha: str) -> dict[str, str]:
        if sha not in trees:
            trees[sha] = git_adapter.list_tree(repo, sha)
        return trees[sha]

    side_trees = {name: tree(sha) for name, sha in sides.items()}
    tests_tree = tree(rev)
    missing = missing_test_paths(test_paths, [tests_tree, *side_trees.values()])
    if missing:
        raise InputError(
            f"--test-path {missing[0]}: no such file or folder on any side "
            f"({', '.join([ref, *sides])})"
        )
    rule = rule_for_tests(
        property_ids, command_paths, test_paths, trees=[tests_tree, *side_trees.values()]
    )
    overlay = plan_overlay(
        ref=ref, rev=rev, rule=rule, tests_tree=tests_tree, side_trees=side_trees
    )
    if not any(
        is_test_module_name(path.rsplit("/", 1)[-1]) or path in rule.files for path in overlay.files
    ):
        raise InputError(f"--tests-from {ref} ({rev[:12]}): no test module there to take")
    return overlay


def log_overlay(overlay: TestOverlay) -> None:
    """One log line saying what was laid over (once the input was found good)."""
    log.info(
        "tests_from.overlay",
        tests_from=overlay.ref,
        rev=overlay.rev,
        folders=[*overlay.rule.folders, *overlay.rule.extra],
        files=len(overlay.files),
        summary=overlay.summary(),
    )


def missing_at_tests_from(oracle: Mapping[str, OracleChange]) -> tuple[str, ...]:
    """The selected tests an overlaid tree does not have (both sides alike). Pure."""
    return tuple(
        property_id
        for property_id, change in oracle.items()
        if change.base_digest is None and change.patch_digest is None
    )


def refuse_missing(ref: str, rev: str, missing: Sequence[str]) -> None:
    """Exit 2 when the ``--tests-from`` revision lacks a selected test."""
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise InputError(
            f"--tests-from {ref} ({rev[:12]}) has no test {missing[0]}{more}; "
            "its test files judge both sides, so it must hold every selected test"
        )
