"""``replay --changed``: read both trees and let the pure core choose the tests.

Lists both pinned trees, reads every Python file once (by blob, so a file the patch left
alone is read once), finds the test modules the command runs and their tests statically,
compares every test's oracle slice and follows the import graph
(:mod:`orchestrator.core.changed`). Nothing runs in a container.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.adapters import git as git_adapter
from orchestrator.core.changed import (
    Selection,
    candidate_modules,
    changed_paths,
    select_changed,
    static_test_ids,
)
from orchestrator.core.oracle import ProjectModules
from orchestrator.services.oracle import compare_blobs


def _sources(tree: Mapping[str, str], objects: Mapping[str, bytes]) -> dict[str, bytes]:
    return {path: objects[blob] for path, blob in tree.items() if path.endswith(".py")}


def select_changed_tests(
    repo: Path, base_rev: str, patch_rev: str, command_paths: Sequence[str]
) -> Selection:
    """The tests the patch touched, among those the command's paths hold (all without)."""
    base_tree = git_adapter.list_tree(repo, base_rev)
    patch_tree = git_adapter.list_tree(repo, patch_rev)
    wanted = {
        blob: path
        for tree in (base_tree, patch_tree)
        for path, blob in tree.items()
        if path.endswith(".py")
    }
    objects = git_adapter.read_objects(repo, wanted, names=wanted)
    on_base, on_patch = _sources(base_tree, objects), _sources(patch_tree, objects)
    # Test classes' bases are followed into every module of the side's tree.
    sides = [
        (sources, ProjectModules(files=frozenset(tree), sources=sources))
        for sources, tree in ((on_base, base_tree), (on_patch, patch_tree))
    ]
    tests: dict[str, tuple[str, ...]] = {}
    for module in candidate_modules((base_tree, patch_tree), command_paths):
        ids: dict[str, None] = {}
        for sources, modules in sides:
            if module in sources:
                ids.update(dict.fromkeys(static_test_ids(sources[module], module, modules)))
        if ids:
            tests[module] = tuple(ids)
    every = [nodeid for ids in tests.values() for nodeid in ids]
    oracle = compare_blobs(on_base, on_patch, every)  # modules and conftests are .py files
    return select_changed(
        tests=tests,
        oracle=oracle,
        base_sources=on_base,
        patch_sources=on_patch,
        changed=changed_paths(base_tree, patch_tree),
    )
