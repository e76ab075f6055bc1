"""Each property's oracle on both pinned revisions (lanes.md row 2).

Reads every property's test module and the ``conftest.py`` files above it at each SHA
(one pass over each revision's tree for all properties) and compares the slices with the
pure :mod:`orchestrator.core.oracle`. The replay service calls :func:`property_oracles`
after the sides ran; the digests and reasons go into each property's evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from orchestrator.adapters import git as git_adapter
from orchestrator.core.oracle import OracleChange, compare_slices, compare_sources, oracle_slice
from orchestrator.core.pytest_command import conftest_paths, split_node_id


def oracle_files(property_id: str) -> tuple[str, tuple[str, ...]]:
    """The test module a property lives in and the ``conftest.py`` paths above it. Pure.

    A node id whose path is not a plain relative path names no file (empty module path).
    """
    module = split_node_id(property_id).path
    path = PurePosixPath(module)
    if not module or path.is_absolute() or ".." in path.parts:
        return "", ()
    return module, conftest_paths(module)


Sources = tuple[bytes | None, dict[str, bytes | None]]  # a module's bytes, its conftests'


def property_oracles(
    repo: Path, base_rev: str, patch_rev: str, property_ids: Sequence[str]
) -> dict[str, OracleChange]:
    """Property id -> its oracle on base and patch: both digests, changed or not, and why.

    A property whose test module is absent on a side has no digest there (``new on
    patch`` / ``gone on patch``).
    """
    return compare_inputs(oracle_inputs(repo, base_rev, patch_rev, property_ids))


def oracle_inputs(
    repo: Path, base_rev: str, patch_rev: str, property_ids: Sequence[str]
) -> dict[str, tuple[Sources, Sources]]:
    """Property id -> the files its oracle is sliced from, on base and on patch (read in
    one pass over each revision's tree for all properties)."""
    files_of = {property_id: oracle_files(property_id) for property_id in property_ids}
    paths = sorted(
        {path for module, conftests in files_of.values() if module for path in (module, *conftests)}
    )
    on_base = git_adapter.read_blobs(repo, base_rev, paths) if paths else {}
    on_patch = git_adapter.read_blobs(repo, patch_rev, paths) if paths else {}

    def side(blobs: Mapping[str, bytes | None], module: str, conftests: tuple[str, ...]) -> Sources:
        return blobs.get(module), {path: blobs.get(path) for path in conftests}

    return {
        property_id: (side(on_base, module, conftests), side(on_patch, module, conftests))
        for property_id, (module, conftests) in files_of.items()
    }


def same_files(inputs: tuple[Sources, Sources]) -> bool:
    """Are a property's module and conftest files the same bytes on both sides? Its oracle
    is then unchanged (whatever the slice), so only its digest is left to compute."""
    return inputs[0] == inputs[1]


def compare_inputs(inputs: Mapping[str, tuple[Sources, Sources]]) -> dict[str, OracleChange]:
    """Each property's :class:`OracleChange` from its files on both sides. Pure."""
    changes: dict[str, OracleChange] = {}
    for property_id, (before, after) in inputs.items():
        if same_files((before, after)):
            # One slice serves both sides (a whole-suite run has thousands of these).
            same = oracle_slice(before[0], before[1], property_id)
            changes[property_id] = compare_slices(same, same)
        else:
            changes[property_id] = compare_sources(before, after, property_id)
    return changes
