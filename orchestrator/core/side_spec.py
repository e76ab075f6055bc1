"""What one side of a replay is, and the plan of its containers. Pure.

A side is a revision of a repository (optionally with a mutant or another revision's
test files laid over it); a plan says how every side is replayed: the same image ID,
command, fixture and seed. From these follow, without touching an engine, each
container's command line, environment, paths, deadline and name, the command that
collects a side's tests, and the labels of what came back
(:mod:`orchestrator.core.labels`). The services that run the containers
(:mod:`orchestrator.services.sides.side_run`) only carry these out.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core import replay_env, result_files
from orchestrator.core.labels import (
    SESSION_NODES,
    ContainerFacts,
    ReplayFile,
    label_replays,
    mark_image_mismatch,
    nodeids_seen,
)
from orchestrator.core.neutralise import neutraliser_args
from orchestrator.core.pool import Batch, narrow_targets
from orchestrator.core.pytest_command import expand_parametrized, node_id_problem, split_arguments
from orchestrator.errors import InputError
from orchestrator.model import Replay
from orchestrator.probe.jobs import hash_seed

if TYPE_CHECKING:
    from orchestrator.core.test_files import SideOverlay

# Where a replay container finds its inputs and leaves its results.
SRC = "/src"
TREE = "/replay/tree"  # the read-only export, with writable_tree (copied to SRC per replay)
# The results folder: a size-capped tmpfs in the container, on every engine. The host
# never mounts a folder of its own there: results come back through the reader
# (orchestrator.adapters.results), so nothing the tree leaves behind is ever followed.
OUT = result_files.RESULTS_FOLDER
# mode=1777 rather than uid=1000: Podman refuses a tmpfs uid option.
RESULTS_TMPFS = f"rw,nosuid,nodev,noexec,size={result_files.TMPFS_BYTES},mode=1777"
FIXTURE = "/replay/fixture.json"
# Recorded test durations (a scheduling hint for --jobs workers), beside the fixture.
DURATIONS = "/replay/durations.json"
PROBE_ROOT = "/opt/orchestrator"
# A screening container kept for the second phase: its drivers keep the rewritten test
# modules here (orchestrator/probe/rewrite_cache.py), and the reader that empties the
# results folder after the first phase leaves it.
REWRITE_CACHE_NAME = ".rewritten"
REWRITE_CACHE = f"{OUT}/{REWRITE_CACHE_NAME}"
KEPT_AFTER_READ = re.escape(REWRITE_CACHE_NAME)

ISOLATIONS = ("side", "container")
NO_TEST_REPORTED = "<no test reported>"
INTERNAL_ERROR = "internal_error"  # the harness sub-reason of a side the tool itself broke
DISK_FULL = "disk_full"  # ... or of a side whose files found no space (ENOSPC, EDQUOT)
# Time for a container to start and the driver to import, on top of N x --timeout.
STARTUP_SLACK_S = 15.0
PER_REPLAY_SLACK_S = 2.0

COLLECT_FILE = "collected.json"
COLLECT_PLUGIN = "orchestrator.probe.collect"


@dataclass(frozen=True, kw_only=True)
class SideSpec:
    """One side of a replay: a revision of a repository, optionally with a mutant applied."""

    name: str
    repo: Path
    rev: str  # full SHA
    mutant: Path | None = None
    # Import roots of the side's tree (relative to it, or absolute in the image), before the
    # probe on PYTHONPATH; None: found in the exported tree (core.replay_env.side_pythonpath).
    pythonpath: tuple[str, ...] | None = None
    # --tests-from: another revision's test files laid over the exported tree.
    tests: SideOverlay | None = None
    # What pytest is handed on this side instead of the plan's property ids (empty: those):
    # the selected node ids this side has (one node id pytest cannot find stops the whole
    # run; the missing ones are labelled not_found), or whole modules.
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReplayPlan:
    """How every side is replayed: same image ID, same command, same fixture, same seed."""

    image_id: str
    pytest_args: tuple[str, ...]
    property_ids: tuple[str, ...]
    fixture: Path | None
    replays: int
    timeout_s: float
    seed: int
    runner_id: str
    isolation: str = "side"
    # The properties are the node ids reported for each selected id: a function's id
    # stands for its parametrizations (core.pytest_command.expand_parametrized).
    expand_parametrized: bool = False
    memory: str = "512m"
    pids: int = 256
    cpus: float = 1.0
    tmp_size: str = "64m"  # the /tmp tmpfs
    # pytest workers per replay (the driver's --workers), and the recorded durations they
    # split the tests by (core.schedule); limits are the caller's to scale with jobs.
    jobs: int = 1
    durations: Path | None = None
    # The interpreter that runs the driver; None: the image's label says (else python3).
    interpreter: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE, after the replay's own
    extra_pythonpath: tuple[str, ...] = ()  # --pythonpath, for sides found in their tree
    writable_tree: bool = False
    # The plugins that change what a replay observes are neutralised (core.neutralise);
    # False only to reproduce a run recorded before that.
    neutralise: bool = True

    @property
    def neutralise_seed(self) -> int | None:
        """The seed the neutralisers pin randomness to; None: nothing is neutralised."""
        return self.seed if self.neutralise else None


def pytest_arguments(
    pytest_args: Sequence[str], property_ids: Sequence[str], *, seed: int | None
) -> tuple[str, ...]:
    """What follows ``--`` on the driver's command line.

    The cache provider is off (the sources are read-only); a module that does not import
    on one side (the fix's tests naming what only the fix adds) is a property of its own,
    and the other modules still run there (pytest would stop the whole session); after
    the command's own options, with a ``seed``, the arguments that neutralise what changes
    what a replay observes (core.neutralise: last, so they win over the project's
    ``addopts`` and the command); then ``--`` and the targets: the property node ids, or
    without them the command's own paths (with them, the paths give way, as
    :func:`~orchestrator.core.pytest_command.pytest_args` has it). So no node id is ever
    read as an option (a collected id is refused on the host when it looks like one, see
    :func:`~orchestrator.core.pytest_command.node_id_problem`: pytest's early scan for
    ``-p`` does not stop at ``--``), and no option follows a positional argument (pytest
    before 8 refuses a ``--`` that comes after one, with an option between).
    """
    options, paths = split_arguments(pytest_args)
    targets = tuple(property_ids) or paths
    return (
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        *options,
        *(neutraliser_args(seed) if seed is not None else ()),
        *(("--", *targets) if targets else ()),
    )


def side_targets(plan: ReplayPlan, side: SideSpec) -> tuple[str, ...]:
    """The node ids (or paths) handed to pytest on one side."""
    return side.targets or plan.property_ids


def batch_targets(plan: ReplayPlan, batch: Batch, side: SideSpec) -> tuple[str, ...]:
    """What pytest is handed on one side of one batch: the side's own targets for a run
    of one batch, else those of the batch's properties."""
    if not batch.property_ids or batch.property_ids == plan.property_ids:
        return side_targets(plan, side)
    return narrow_targets(side.targets, batch.property_ids) or batch.property_ids


def driver_command(
    plan: ReplayPlan,
    replays: int,
    property_ids: Sequence[str] | None = None,
    *,
    out: str = OUT,
    tree: str = TREE,
    rewrite_cache: str | None = None,
) -> list[str]:
    """The container's command: the probe driver, N replays of the pytest arguments
    (``property_ids``: the side's own, default the plan's; ``out``: where the results go
    in the container; ``tree``: where the read-only tree is mounted; ``rewrite_cache``: a
    folder the driver keeps rewritten test modules in for a later driver in the same
    container), HOME made in the tmpfs (and, with ``writable_tree``, a fresh copy of the
    tree before each replay)."""
    made = [arg for folder in replay_env.MADE_DIRS for arg in ("--make-dir", folder)]
    # Hypothesis's example database: emptied before each replay (core.neutralise).
    fresh = [arg for folder in replay_env.FRESH_DIRS for arg in ("--fresh-dir", folder)]
    copy = ["--copy-tree", f"{tree}:{SRC}"] if plan.writable_tree else []
    return [
        plan.interpreter or "python3",
        "-m",
        "orchestrator.probe.replay",
        "--replays",
        str(replays),
        "--timeout",
        f"{plan.timeout_s:g}",
        "--out",
        out,
        "--seed",
        str(plan.seed),
        *(("--workers", str(plan.jobs)) if plan.jobs > 1 else ()),
        *(("--rewrite-cache", rewrite_cache) if rewrite_cache is not None else ()),
        *made,
        *(fresh if plan.neutralise else ()),
        *copy,
        "--",
        *pytest_arguments(
            plan.pytest_args,
            plan.property_ids if property_ids is None else property_ids,
            seed=plan.neutralise_seed,
        ),
    ]


def driver_exec_environment(plan: ReplayPlan) -> dict[str, str]:
    """What the driver's exec adds to the container's environment: the PYTHONHASHSEED its
    entry would otherwise re-execute the interpreter to pin (every replay gets that same
    value from the driver either way, so nothing a test sees changes)."""
    return {"PYTHONHASHSEED": hash_seed(plan.seed)}


def collect_command(plan: ReplayPlan) -> list[str]:
    """``pytest --collect-only`` with the plugin that writes the node ids it found."""
    return [
        plan.interpreter or "python3",
        "-m",
        "pytest",
        "--collect-only",
        "-p",
        COLLECT_PLUGIN,
        *pytest_arguments(plan.pytest_args, (), seed=plan.neutralise_seed),
    ]


def replay_variables(plan: ReplayPlan) -> dict[str, str]:
    """Every variable a replay gets but PYTHONPATH (recorded as pins)."""
    return replay_env.replay_variables(
        seed=plan.seed,
        fixture=FIXTURE if plan.fixture is not None else None,
        extra=plan.env,
    )


def side_pythonpath(paths: Sequence[str]) -> tuple[str, ...]:
    """A side's PYTHONPATH entries in the container: its import roots, then the probe."""
    return (*replay_env.SidePath(entries=tuple(paths)).container_paths(SRC), PROBE_ROOT)


def replay_environment(plan: ReplayPlan, pythonpath: Sequence[str] = ()) -> dict[str, str]:
    """The container's whole environment: only the replay's own variables."""
    env = {**replay_variables(plan), "PYTHONPATH": ":".join(side_pythonpath(pythonpath))}
    if plan.jobs > 1 and plan.durations is not None:
        env["REPLAY_DURATIONS"] = DURATIONS  # a scheduling hint: where the workers split
    return env


def collect_environment(plan: ReplayPlan, pythonpath: Sequence[str]) -> dict[str, str]:
    """A collecting container's environment: the replay's, HOME in the /tmp tmpfs (no
    driver makes one), and where the plugin writes what it found."""
    return {
        **replay_environment(plan, pythonpath),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "REPLAY_COLLECT_OUT": f"{OUT}/{COLLECT_FILE}",
    }


def side_deadline_s(plan: ReplayPlan, replays: int) -> float:
    """Our own bound on one container: its replays x --timeout plus start-up slack."""
    return replays * (plan.timeout_s + PER_REPLAY_SLACK_S) + STARTUP_SLACK_S


def container_units(plan: ReplayPlan) -> tuple[tuple[int, ...], ...]:
    """Which replay numbers each container runs, in order."""
    numbers = tuple(range(1, plan.replays + 1))
    if plan.isolation == "container":
        return tuple((k,) for k in numbers)
    return (numbers,)


def container_name(run_id: str, side: str, unit: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{run_id}-{side}-{unit}")
    return f"orchestrator-{safe}"


def check_plan(plan: ReplayPlan, sides: Sequence[SideSpec]) -> None:
    """Refuse a plan no container could carry out (exit 2)."""
    if plan.isolation not in ISOLATIONS:
        raise InputError(f"--isolation must be one of {', '.join(ISOLATIONS)}")
    if plan.replays < 1:
        raise InputError("--replays must be at least 1")
    if plan.timeout_s <= 0:
        raise InputError("--timeout must be positive")
    if plan.jobs < 1:
        raise InputError("--jobs must be at least 1")
    names = [side.name for side in sides]
    if not names or len(set(names)) != len(names):
        raise InputError("sides must have distinct names")


def collected_selection(found: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The node ids to replay from each side's ``replay-collect/1`` document, first side
    first. A collector that failed on every side it appears on (a module that does not
    import), or skipped itself, is a property of its own, so that its failure (or skip) is
    decided, not lost."""
    items: dict[str, None] = {}
    for doc in found:
        for item in doc.get("items") or ():
            if isinstance(item, str) and node_id_problem(item) is None:
                items.setdefault(item, None)
    for doc in found:
        # A module that skips itself on import has no items: it is a property of its own,
        # so that the skip is shown, not lost.
        for error in (*(doc.get("errors") or ()), *(doc.get("skipped") or ())):
            if not isinstance(error, str) or error in items or node_id_problem(error):
                continue
            prefix = error.rstrip("/") + ("/" if not error.endswith(".py") else "::")
            if error and not any(item.startswith(prefix) for item in items):
                items.setdefault(error, None)
    return tuple(items)


def refused_collected(found: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The ids some side's collection named that are not node ids pytest may be handed
    (:func:`~orchestrator.core.pytest_command.node_id_problem`): id -> why. Pure."""
    refused: dict[str, str] = {}
    for doc in found:
        for key in ("items", "errors", "skipped"):
            for item in doc.get(key) or ():
                problem = node_id_problem(item) if isinstance(item, str) else None
                if problem is not None:
                    refused.setdefault(item, problem)
    return refused


_NODE_PARTS = re.compile(r"::|/")


def unplanned_ids(
    plan: ReplayPlan, results: Mapping[str, Sequence[tuple[ReplayFile, ContainerFacts]]]
) -> tuple[int, str | None]:
    """How many ids the results named that the run did not ask for (nothing is labelled
    for them: :func:`label_sides` looks up only the planned ones), and the first of
    them; ``(0, None)`` for a run whose results say which tests it has. A module's or
    folder's entry that encloses a planned test is not counted. Pure."""
    if not plan.property_ids or plan.expand_parametrized:
        return 0, None
    planned = set(plan.property_ids)
    enclosing = {node[: found.start()] for node in planned for found in _NODE_PARTS.finditer(node)}
    count, first = 0, None
    for observed in results.values():
        for nodeid in nodeids_seen(replay_file for replay_file, _ in observed):
            if nodeid not in planned and nodeid not in enclosing and nodeid not in SESSION_NODES:
                count += 1
                first = first if first is not None else nodeid
    return count, first


def label_sides(
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    results: Mapping[str, Sequence[tuple[ReplayFile, ContainerFacts]]],
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Labels per side and property, with the image check across sides."""
    property_ids = plan.property_ids
    if not property_ids or plan.expand_parametrized:
        seen: dict[str, None] = {}
        for side in sides:
            for nodeid in nodeids_seen(replay_file for replay_file, _ in results[side.name]):
                seen.setdefault(nodeid, None)
        if property_ids:
            property_ids = expand_parametrized(property_ids, tuple(seen))
        else:
            property_ids = tuple(seen) or (NO_TEST_REPORTED,)
    observed_images = {
        facts.image_id
        for side in sides
        for _, facts in results[side.name]
        if facts.image_id is not None
    }
    mismatch = bool(observed_images) and observed_images != {plan.image_id}
    labelled: dict[str, dict[str, tuple[Replay, ...]]] = {}
    for side in sides:
        per_property = label_replays(results[side.name], property_ids, runner_id=plan.runner_id)
        if mismatch:
            per_property = mark_image_mismatch(per_property, plan.image_id, observed_images)
        labelled[side.name] = per_property
    return labelled


def local_fault_reason(error: BaseException) -> str:
    """``disk_full`` for a write that found no space, else ``internal_error``."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return DISK_FULL
    return INTERNAL_ERROR


def internal_error_message(
    side: str, what: str, kept: str | None, reason: str = INTERNAL_ERROR
) -> str:
    """The one line a run ends with when the tool itself broke one of its sides."""
    if reason == DISK_FULL:
        return f"disk full in side {side}: {what} ({DISK_FULL})"
    where = f"traceback in {kept}" if kept is not None else "traceback in the log"
    return (
        f"internal error in side {side}: {what} - a fault of orchestrator itself, "
        f"not of the Docker engine or the tested code ({INTERNAL_ERROR}; {where})"
    )
