"""``--tests-from base|patch|REV``: pin the revision whose test files judge both sides.

Plans the overlay before anything runs (the pure rule and overlay are
:mod:`orchestrator.core.test_files`; the git adapter lays it over each exported tree).
pytest's configuration (``testpaths``, ``python_files``, the doctest options) is read at
the first side (the base) and at the chosen revision, never at the patch unless the patch
is that revision: the patch is what is judged, and its configuration could otherwise make
its own code a "test file" laid over the base (or the base's over it).
Bad input is an :class:`~orchestrator.errors.InputError` (exit 2), found here: an unknown
revision, a ``--test-path`` that exists on no side, a revision without test files or
without a selected test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from orchestrator.adapters import git as git_adapter
from orchestrator.core.changed import in_scope, static_test_ids
from orchestrator.core.oracle import OracleChange
from orchestrator.core.pytest_collection import (
    CollectionConfig,
    collection_config,
    is_test_module,
    merge_configs,
)
from orchestrator.core.replay_env import INI_FILES
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
    command_options: Sequence[str] = (),
) -> TestOverlay:
    """The test files of ``rev`` to lay over every side (``sides``: name -> SHA, the base
    first). Without ``property_ids``, pytest's configuration adds what it collects."""
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
    config = None
    if not property_ids:
        config = pytest_config(repo, sides, ref=ref, rev=rev, command_options=command_options)
    rule = rule_for_tests(
        property_ids,
        command_paths,
        test_paths,
        trees=[tests_tree, *side_trees.values()],
        config=config,
    )
    overlay = plan_overlay(
        ref=ref, rev=rev, rule=rule, tests_tree=tests_tree, side_trees=side_trees
    )
    named = {*rule.files, *(path for path, _ in rule.collected)}
    if not any(
        is_test_module_name(path.rsplit("/", 1)[-1]) or path in named for path in overlay.files
    ):
        raise InputError(f"--tests-from {ref} ({rev[:12]}): no test module there to take")
    return overlay


def pytest_config(
    repo: Path,
    sides: Mapping[str, str],
    *,
    ref: str,
    rev: str,
    command_options: Sequence[str],
) -> CollectionConfig:
    """What pytest collects, as the first side's (the base's) configuration and the chosen
    revision's say (both: a file either would collect as a test is one)."""
    named = dict.fromkeys([*list(sides.items())[:1], (ref, rev)])
    found = git_adapter.read_blobs_at(repo, [(sha, INI_FILES) for _, sha in named])
    return merge_configs(
        collection_config(files, command_options, at=name)
        for (name, _), files in zip(named, found, strict=True)
    )


def with_removed_tests(
    repo: Path, overlay: TestOverlay, base_rev: str, command_paths: Sequence[str]
) -> TestOverlay:
    """The overlay with the tests the base's own test files define (as the sources show
    them) that the overlaid trees do not, among those the command runs: whole test files
    the chosen revision lacks, and test functions its version of a file lacks."""
    base_tree = git_adapter.list_tree(repo, base_rev)
    config = overlay.rule.config
    collected = dict(overlay.rule.collected)

    def is_module(path: str) -> bool:
        name = PurePosixPath(path).name
        return is_test_module_name(name) or (config is not None and is_test_module(path, config))

    changed = [
        path
        for path, blob in sorted(base_tree.items())
        if overlay.takes(path)
        and overlay.files.get(path) != blob
        and in_scope(path, command_paths)
        and (is_module(path) or collected.get(path, "").startswith("--doctest-glob"))
    ]
    modules = [path for path in changed if path.endswith(".py")]
    found = git_adapter.read_objects(
        repo,
        [base_tree[path] for path in modules]
        + [overlay.files[path] for path in modules if path in overlay.files],
    )
    removed: list[str] = []
    for path in changed:
        if not path.endswith(".py"):
            if path not in overlay.files:  # a text doctest file, run as one test
                removed.append(f"{path}::{PurePosixPath(path).name}")
            continue
        before = static_test_ids(found[base_tree[path]], path)
        after = set()
        if path in overlay.files:
            after = set(static_test_ids(found[overlay.files[path]], path))
        removed.extend(nodeid for nodeid in before if nodeid not in after)
    return replace(overlay, removed_tests=tuple(removed))


def log_overlay(overlay: TestOverlay) -> None:
    """One log line saying what was laid over (once the input was found good)."""
    log.info(
        "tests_from.overlay",
        tests_from=overlay.ref,
        rev=overlay.rev,
        folders=[*overlay.rule.folders, *overlay.rule.extra],
        files=len(overlay.files),
        collected={why: len(paths) for why, paths in overlay.rule.collected_by().items()},
        pytest_config=None if overlay.rule.config is None else overlay.rule.config.to_json(),
        removed_tests=len(overlay.removed_tests),
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
