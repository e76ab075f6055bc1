"""Each property's oracle on both pinned revisions (lanes.md row 2).

Reads every property's test module and the ``conftest.py`` files above it at each SHA
(one pass over each revision's tree for all properties) and compares the slices with the
pure :mod:`orchestrator.core.oracle`. With ``--tests-from`` the trees compared are the
overlaid ones: a test file is read at the overlay's revision on both sides. The replay
service calls :func:`property_oracles` after the sides ran; the digests and reasons go
into each property's evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from orchestrator.adapters import git as git_adapter
from orchestrator.core.oracle import OracleChange, compare_sources
from orchestrator.core.pytest_command import conftest_paths, split_node_id
from orchestrator.core.test_files import TestOverlay

Blobs = Mapping[str, bytes | None]


def oracle_files(property_id: str) -> tuple[str, tuple[str, ...]]:
    """The test module a property lives in and the ``conftest.py`` paths above it. Pure.

    A node id whose path is not a plain relative path names no file (empty module path).
    """
    module = split_node_id(property_id).path
    path = PurePosixPath(module)
    if not module or path.is_absolute() or ".." in path.parts:
        return "", ()
    return module, conftest_paths(module)


def oracle_paths(property_ids: Sequence[str]) -> list[str]:
    """Every file the properties' oracles are read from, sorted. Pure."""
    return sorted(
        {
            path
            for module, conftests in map(oracle_files, property_ids)
            if module
            for path in (module, *conftests)
        }
    )


def read_side(
    repo: Path, rev: str, paths: Sequence[str], overlay: TestOverlay | None = None
) -> dict[str, bytes | None]:
    """The bytes of ``paths`` on one side's tree: at ``rev``, except that with an overlay
    every test file is as it is at the overlay's revision (absent there: absent)."""
    if not paths:
        return {}
    if overlay is None:
        return git_adapter.read_blobs(repo, rev, paths)
    tests = [path for path in paths if overlay.takes(path)]
    others = [path for path in paths if not overlay.takes(path)]
    found = git_adapter.read_blobs(repo, rev, others) if others else {}
    if tests:
        found.update(git_adapter.read_blobs(repo, overlay.rev, tests))
    return found


def compare_blobs(
    base: Blobs, patch: Blobs, property_ids: Sequence[str]
) -> dict[str, OracleChange]:
    """Property id -> its oracle on both sides, from each side's file bytes. Pure."""

    def side(
        blobs: Blobs, module: str, conftests: tuple[str, ...]
    ) -> tuple[bytes | None, dict[str, bytes | None]]:
        return blobs.get(module), {path: blobs.get(path) for path in conftests}

    changes = {}
    for property_id in property_ids:
        module, conftests = oracle_files(property_id)
        changes[property_id] = compare_sources(
            side(base, module, conftests), side(patch, module, conftests), property_id
        )
    return changes


def property_oracles(
    repo: Path,
    base_rev: str,
    patch_rev: str,
    property_ids: Sequence[str],
    *,
    overlay: TestOverlay | None = None,
) -> dict[str, OracleChange]:
    """Property id -> its oracle on base and patch: both digests, changed or not, and why.

    A property whose test is absent on a side has no digest there (``new on patch`` /
    ``gone on patch``). With ``overlay`` (``--tests-from``) both sides read the test files
    of one revision, so their slices are equal by construction.
    """
    paths = oracle_paths(property_ids)
    on_base = read_side(repo, base_rev, paths, overlay)
    on_patch = read_side(repo, patch_rev, paths, overlay)
    return compare_blobs(on_base, on_patch, property_ids)
