"""Each property's oracle on both pinned revisions (lanes.md row 2).

Reads every property's test module and the ``conftest.py`` files above it at each SHA
(one pass over each revision's tree for all properties), and the other project modules its
classes inherit from (a mixin in ``tests/__init__.py``, read round by round as the bases
lead there), and compares the slices with the pure :mod:`orchestrator.core.oracle`. With
``--tests-from`` the trees compared are the overlaid ones: a test file is read at the
overlay's revision on both sides. The replay service calls :func:`property_oracles` after
the sides ran; the digests and reasons go into each property's evidence.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.helper_process import HelperProcess
from orchestrator.core.oracle import (
    OracleChange,
    ProjectModules,
    UnchangedItem,
    compare_sources,
    forget_modules,
    inherited_modules,
    may_inherit_from_elsewhere,
    unchanged_oracle,
    unchanged_oracles,
)
from orchestrator.core.pytest_command import conftest_paths, split_node_id
from orchestrator.core.test_files import TestOverlay, overlaid_tree

Blobs = Mapping[str, bytes | None]
# A property's files on one side: its module's bytes, its conftests', the bytes of the other
# modules its classes inherit from, and the side's file paths (to resolve imports; shared,
# never compared).
Sources = tuple[bytes | None, dict[str, bytes | None], dict[str, bytes | None], frozenset[str]]
# Rounds of reading bases from other modules (a mixin's own base in a third module, ...).
MAX_BASE_ROUNDS = 6


def oracle_files(property_id: str) -> tuple[str, tuple[str, ...]]:
    """The test module a property lives in and the ``conftest.py`` paths above it. Pure.

    A node id whose path is not a plain relative path names no file (empty module path).
    """
    return _module_files(split_node_id(property_id).path)


@lru_cache(maxsize=4096)  # a whole suite asks once per test, for a few modules
def _module_files(module: str) -> tuple[str, tuple[str, ...]]:
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
    return read_sides(repo, [rev], paths, overlay)[0]


def read_sides(
    repo: Path, revs: Sequence[str], paths: Sequence[str], overlay: TestOverlay | None = None
) -> list[dict[str, bytes | None]]:
    """:func:`read_side` for each of ``revs``, in order, in one read of the repository."""
    if not paths:
        return [{} for _ in revs]
    tests = [path for path in paths if overlay is not None and overlay.takes(path)]
    others = [path for path in paths if path not in tests]
    wanted: list[tuple[str, Sequence[str]]] = [(rev, others) for rev in revs]
    if overlay is not None and tests:
        wanted.append((overlay.rev, tests))  # the same on every side
    found = git_adapter.read_blobs_at(repo, wanted)
    overlaid = found[len(revs)] if len(found) > len(revs) else {}
    return [{**side, **overlaid} for side in found[: len(revs)]]


def oracle_inputs(
    repo: Path,
    base_rev: str,
    patch_rev: str,
    property_ids: Sequence[str],
    *,
    overlay: TestOverlay | None = None,
) -> dict[str, tuple[Sources, Sources]]:
    """Property id -> the files its oracle is sliced from, on base and on patch (read in
    one pass over both sides' trees for all properties)."""
    paths = oracle_paths(property_ids)
    revs = (base_rev, patch_rev)
    sides = read_sides(repo, list(revs), paths, overlay)
    modules = sorted({module for module, _ in map(oracle_files, property_ids) if module})
    files: list[frozenset[str]] = []
    for rev, blobs in zip(revs, sides, strict=True):
        if not any(may_inherit_from_elsewhere(blobs.get(module)) for module in modules):
            files.append(frozenset())
            continue
        tree = git_adapter.list_tree(repo, rev)
        paths_there = frozenset(tree if overlay is None else overlaid_tree(tree, overlay))
        files.append(paths_there)
        for _ in range(MAX_BASE_ROUNDS):
            known = ProjectModules(files=paths_there, sources=blobs)
            wanted = sorted(
                {path for module in modules for path in inherited_modules(module, known)[1]}
            )
            if not wanted:
                break
            blobs.update(read_side(repo, rev, wanted, overlay))
    return inputs_from_blobs(sides[0], sides[1], property_ids, files=(files[0], files[1]))


def inputs_from_blobs(
    base: Blobs,
    patch: Blobs,
    property_ids: Sequence[str],
    *,
    files: tuple[frozenset[str], frozenset[str]] | None = None,
) -> dict[str, tuple[Sources, Sources]]:
    """Property id -> its module, conftest and base-class module bytes on each side
    (``files``: each side's paths; default, the paths of its blobs). Pure."""
    base_files, patch_files = files if files is not None else (frozenset(base), frozenset(patch))
    inherited: dict[tuple[int, str], dict[str, bytes | None]] = {}
    # One value per module and side: a whole suite's properties share their module's.
    made: dict[tuple[int, str], Sources] = {}

    def side(
        blobs: Blobs, paths: frozenset[str], module: str, conftests: tuple[str, ...]
    ) -> Sources:
        key = (id(blobs), module)
        found_sources = made.get(key)
        if found_sources is not None:
            return found_sources
        if key not in inherited:
            found: frozenset[str] = frozenset()
            if paths and may_inherit_from_elsewhere(blobs.get(module)):
                found = inherited_modules(module, ProjectModules(files=paths, sources=blobs))[0]
            inherited[key] = {path: blobs.get(path) for path in sorted(found)}
        conftest_bytes = {path: blobs.get(path) for path in conftests}
        made[key] = (blobs.get(module), conftest_bytes, inherited[key], paths)
        return made[key]

    inputs = {}
    for property_id in property_ids:
        module, conftests = oracle_files(property_id)
        inputs[property_id] = (
            side(base, base_files, module, conftests),
            side(patch, patch_files, module, conftests),
        )
    return inputs


def same_files(inputs: tuple[Sources, Sources]) -> bool:
    """Are a property's module, conftest and base-class files the same bytes on both sides?
    Its oracle is then unchanged (whatever the slice), so only its digest is left to
    compute."""
    return inputs[0][:3] == inputs[1][:3]


def compare_inputs(inputs: Mapping[str, tuple[Sources, Sources]]) -> dict[str, OracleChange]:
    """Each property's :class:`OracleChange` from its files on both sides. Pure."""
    comparer = OracleComparer()
    try:
        return {
            property_id: comparer.change(property_id, pair) for property_id, pair in inputs.items()
        }
    finally:
        comparer.close()


def shared_modules(
    shared: dict[tuple[int, int], tuple[ProjectModules, Sources]], sources: Sources
) -> ProjectModules:
    """One :class:`ProjectModules` per module's other modules in ``shared``: the properties
    of one module share what was resolved once (the sources are held so that their ids
    stay theirs)."""
    key = (id(sources[2]), id(sources[3]))
    if key not in shared:
        shared[key] = (ProjectModules(files=sources[3], sources=sources[2]), sources)
    return shared[key][0]


class OracleComparer:
    """Properties' :class:`OracleChange`, one at a time, sharing what they have in common
    (:meth:`close` lets go of the parsed modules). A whole suite's changes are then made
    as they are needed and never all held: :class:`LazyOracle`."""

    def __init__(self) -> None:
        # The properties of one module share its base-class modules: one value for them
        # all keeps what was resolved once (the sources are held so that their ids stay
        # theirs).
        self._shared: dict[tuple[int, int], tuple[ProjectModules, Sources]] = {}

    def _modules(self, sources: Sources) -> ProjectModules:
        return shared_modules(self._shared, sources)

    def change(self, property_id: str, pair: tuple[Sources, Sources]) -> OracleChange:
        before, after = pair
        if same_files(pair):
            # One slice serves both sides (a whole-suite run has thousands of these).
            return unchanged_oracle((property_id, before[0], before[1], self._modules(before)))
        return compare_sources(
            (before[0], before[1]),
            (after[0], after[1]),
            property_id,
            (self._modules(before), self._modules(after)),
        )

    def close(self) -> None:
        self._shared.clear()
        forget_modules()  # the parsed modules of the slices: no longer needed


class LazyOracle(Mapping[str, OracleChange]):
    """The oracle of every property: ``known`` ones as given, the others compared from
    their ``inputs`` when asked for, and not kept (a whole suite's changes, held at once,
    were some 30 MB at 100,000 tests). The same values :func:`compare_inputs` gives.

    With ``ahead`` (:func:`unchanged_ahead`), the changes of the properties in ``order``
    that are neither known nor changed come from there, made elsewhere in that order:
    asked in that order, each is taken as it comes and none is held."""

    def __init__(
        self,
        known: Mapping[str, OracleChange],
        inputs: Mapping[str, tuple[Sources, Sources]],
        comparer: OracleComparer,
        ahead: tuple[Sequence[str], Iterator[OracleChange]] | None = None,
    ) -> None:
        self._known = known
        self._inputs = inputs
        self._comparer = comparer
        self._coming: set[str] = set(ahead[0]) if ahead is not None else set()
        self._ahead: Iterator[OracleChange] = ahead[1] if ahead is not None else iter(())
        self._came: dict[str, OracleChange] = {}  # taken from ahead before being asked for

    def __getitem__(self, property_id: str) -> OracleChange:
        found = self._known.get(property_id)
        if found is not None:
            return found
        came = self._came.pop(property_id, None)
        if came is not None:
            return came
        if property_id in self._coming:
            for change in self._ahead:
                self._coming.discard(change.property_id)
                if change.property_id == property_id:
                    return change
                self._came[change.property_id] = change  # asked out of order: kept
        return self._comparer.change(property_id, self._inputs[property_id])

    def __contains__(self, property_id: object) -> bool:
        return property_id in self._known or property_id in self._inputs

    def __iter__(self) -> Iterator[str]:
        yield from self._known
        yield from (p for p in self._inputs if p not in self._known)

    def __len__(self) -> int:
        return len(self._known) + sum(1 for p in self._inputs if p not in self._known)


# A whole suite's unchanged properties are sliced in a helper process this many at a time
# (some 50 ms of work each), from this many on (fewer do not pay for its start).
HELPER_CHUNK = 500
HELPER_FROM = 2000


def unchanged_ahead(
    order: Sequence[str],
    inputs: Mapping[str, tuple[Sources, Sources]],
    comparer: OracleComparer,
    helper: HelperProcess,
) -> tuple[list[str], Iterator[OracleChange]]:
    """The properties of ``order`` whose files are the same on both sides (``inputs``),
    and their changes in that order, made in ``helper`` (here when it is not started or
    fails: the same values): for :class:`LazyOracle`'s ``ahead``."""
    wanted = [p for p in order if p in inputs]
    chunks = [wanted[i : i + HELPER_CHUNK] for i in range(0, len(wanted), HELPER_CHUNK)]

    def sent_as(chunk: Sequence[str]) -> list[UnchangedItem]:
        # Fresh modules per chunk (nothing resolved here travels), shared within it: one
        # value per module's other modules pickles once.
        shared: dict[tuple[int, int], tuple[ProjectModules, Sources]] = {}
        items: list[UnchangedItem] = []
        for property_id in chunk:
            sources = inputs[property_id][0]  # the base's: the same bytes as the patch's
            items.append((property_id, sources[0], sources[1], shared_modules(shared, sources)))
        return items

    def here(chunk: Sequence[str]) -> list[OracleChange]:
        return [comparer.change(p, inputs[p]) for p in chunk]

    changes = helper.map_chunks(unchanged_oracles, chunks, sent_as=sent_as, here=here)
    return wanted, changes


def compare_blobs(
    base: Blobs, patch: Blobs, property_ids: Sequence[str]
) -> dict[str, OracleChange]:
    """Property id -> its oracle on both sides, from each side's file bytes (all the
    modules its classes may inherit from among them). Pure."""
    return compare_inputs(inputs_from_blobs(base, patch, property_ids))


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
    return compare_inputs(oracle_inputs(repo, base_rev, patch_rev, property_ids, overlay=overlay))
