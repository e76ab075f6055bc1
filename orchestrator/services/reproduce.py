"""Reproduce one replay of a finished run: check everything, then rebuild that replay's
container and run the property in it once (``orchestrator reproduce``).

:func:`prepare` finds every refusal before any container starts, each one line: a run
folder that is missing or unfinished (exit 2), a property the run did not have, a replay
number out of range, a fixture whose kept bytes no longer match the run's digest (or a
run folder that kept none), a repository that lacks the pinned commits. :func:`reproduce`
then pins the image by the run's image ID (gone from the engine: exit 3, never pulled) and,
for each chosen side in turn:

- exports the pinned revision with the run's ``--tests-from`` overlay, if any;
- builds the container with the same builder ``replay`` uses
  (:func:`orchestrator.services.sides.side_run.side_job`): image, mounts, the
  replay's environment, limits, no network; its main process idles;
- runs the probe's driver in it (``docker exec``) for one replay with the seed of replay
  N, pytest handed the property alone and ``--attach``, so pytest's own output streams
  out as it comes (with ``--pdb`` on a terminal of its own, relayed to the user's);
  ``--shell`` opens a shell there instead;
- labels the replay from its result file and the engine's facts exactly as ``replay``
  does (:func:`orchestrator.core.labels.label_replay`) and compares it with the record.

The container is removed afterwards, with its tree and folders, unless ``keep``: then it
stays up (labelled like any other, so the next ``replay`` or ``reproduce`` on this machine
sweeps it, and its folders, once this process is gone).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator import files
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import terminal
from orchestrator.adapters.owners import Owner
from orchestrator.adapters.results import (
    ResultsRead,
    replay_file_from,
)
from orchestrator.core.backend import Backend, Exit, SideContainer
from orchestrator.core.digest import digest
from orchestrator.core.evidence import parse_evidence
from orchestrator.core.labels import ContainerFacts, label_replay
from orchestrator.core.replay_env import MADE_DIRS
from orchestrator.core.reproduce import (
    SHELL_COMMAND,
    Comparison,
    Mode,
    RecordedRun,
    ReproducePlan,
    SideReplay,
    compare,
    environment_drift,
    import_roots,
    parse_run_log,
    plan_reproduce,
    pytest_alone,
    recorded_extras,
    with_driver_flags,
)
from orchestrator.core.side_spec import (
    FIXTURE,
    PROBE_ROOT,
    SRC,
    TREE,
    ReplayPlan,
    SideSpec,
    container_name,
    driver_command,
    pytest_arguments,
    replay_environment,
    replay_variables,
    side_deadline_s,
)
from orchestrator.errors import ImageNotFoundError, InputError, Interrupted, SchemaError
from orchestrator.log import get_logger
from orchestrator.model import Replay
from orchestrator.services.interrupts import terminate_as_interrupt
from orchestrator.services.run_folders import read_documents
from orchestrator.services.sides.exports import Exports
from orchestrator.services.sides.pool import sweep
from orchestrator.services.sides.side_run import (
    SideRun,
    side_job,
    side_mounts,
)

log = get_logger(__name__)

ATTACH = "--attach"  # the driver's flag: the replay keeps its stdin, stdout and stderr
OUTPUT_KEPT_BYTES = 1024 * 1024  # of the replay's output, for the --json report
LABEL_REPRODUCE = "orchestrator.reproduce"  # the replay number a container reproduces
INTERPRETER = "python3"  # what driver_command runs the driver with


@dataclass(frozen=True, kw_only=True)
class ReproduceRequest:
    run_dir: Path
    property_id: str
    side: str
    replay: int | None = None
    mode: Mode = Mode.RUN
    keep: bool = False
    repo: Path | None = None  # default: the repository the run log names


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """A reproduction every input of which has been checked."""

    plan: ReproducePlan
    repo: Path
    fixture_bytes: bytes | None


@dataclass(frozen=True, kw_only=True)
class Kept:
    """A container left running (``--keep``), and what to tell the user about it."""

    name: str
    folders: tuple[Path, ...]
    hash_seed: str


@dataclass(frozen=True, kw_only=True)
class SideResult:
    replay: SideReplay
    observed: Replay | None  # None: a shell in which the replay was not run
    comparison: Comparison | None
    output: str
    kept: Kept | None = None


@dataclass(frozen=True, kw_only=True)
class UserTerminal:
    """Where the user is: standard input and output's descriptors."""

    stdin_fd: int = 0
    stdout_fd: int = 1


# ---------------------------------------------------------------- checks, before anything


def _property_entry(summary: Any, property_id: str, run_dir: Path) -> Mapping[str, Any]:
    listed_entries = summary.get("decisions") if isinstance(summary, Mapping) else None
    entries: list[Mapping[str, Any]] = [
        entry for entry in listed_entries or () if isinstance(entry, Mapping)
    ]
    for entry in entries:
        if entry.get("property_id") == property_id:
            return entry
    known = [str(entry.get("property_id")) for entry in entries]
    listed = ", ".join(known[:3]) + (f" and {len(known) - 3} more" if len(known) > 3 else "")
    raise InputError(
        f"{property_id}: not a property of the run in {run_dir}"
        + (f" (it has {listed})" if known else " (it has none)")
    )


def _stored_property(stored: Any, property_id: str, run_dir: Path) -> tuple[Mapping[str, Any], Any]:
    """A property's entry and evidence from the run's store (``StoreRead``)."""
    record = stored.find(property_id)
    if record is not None:
        return record["entry"], record["evidence"]
    known: list[str] = []
    for found in stored.records():
        known.append(str(found["property_id"]))
        if len(known) == 3:
            break
    more = stored.count - len(known)
    listed = ", ".join(known) + (f" and {more} more" if more > 0 else "")
    raise InputError(
        f"{property_id}: not a property of the run in {run_dir}"
        + (f" (it has {listed})" if known else " (it has none)")
    )


def _recorded_replays(
    evidence_doc: Any, entry: Mapping[str, Any], run_dir: Path
) -> dict[str, tuple[Replay, ...]]:
    name = entry.get("evidence_file")
    if evidence_doc is None:
        raise InputError(
            f"{run_dir}: {name or 'the evidence'} of {entry['property_id']} is missing"
        )
    try:
        evidence = parse_evidence(evidence_doc)
    except SchemaError as error:
        raise InputError(f"{run_dir}: {name}: {error}") from None
    return {"base": evidence.base, "patch": evidence.patch}


def _kept_fixture(run: RecordedRun, run_dir: Path) -> bytes | None:
    """The fixture's bytes the run kept, checked against its digest; None without one."""
    if not run.has_fixture:
        return None
    if not run.fixture_file or run.fixture_file != Path(run.fixture_file).name:
        raise InputError(
            f"{run_dir}: the run had a fixture ({run.fixture_digest}) but its folder keeps no "
            "copy of it (a run folder of an earlier version): nothing to check it against"
        )
    path = run_dir / run.fixture_file
    data = files.read_bytes(path)
    found = digest(files.parse_json(data, str(path)))
    if found != run.fixture_digest:
        raise InputError(
            f"{path}: its bytes no longer match the run's fixture digest "
            f"(recorded {run.fixture_digest}, now {found})"
        )
    return data


def _check_repository(run: RecordedRun, repo: Path) -> None:
    """The repository must hold every commit the run pinned (exit 2 when it does not)."""
    wanted = {**run.revs, **({"tests_from": run.tests_from} if run.tests_from else {})}
    for what, sha in wanted.items():
        if git_adapter.resolve_rev(repo, sha) != sha:
            raise InputError(f"{repo}: {what} {sha} does not resolve to itself")


def prepare(request: ReproduceRequest) -> Prepared:
    """Read and check everything the reproduction needs; nothing touches the engine."""
    run_dir = request.run_dir
    documents = read_documents(run_dir)  # missing, unfinished or incomplete: exit 2
    run_log = documents.run_log
    if run_log is None and isinstance(documents.summary, Mapping):
        run_log = documents.summary.get("run_log")
    try:
        run = parse_run_log(run_log)
    except SchemaError as error:
        raise InputError(f"{run_dir}: run-log.json: {error}") from None
    if documents.records is not None:  # replay-report/2: the run's store
        entry, evidence_doc = _stored_property(documents.records, request.property_id, run_dir)
    else:
        entry = _property_entry(documents.summary, request.property_id, run_dir)
        evidence_file = entry.get("evidence_file")
        evidence_docs = documents.evidence or {}
        evidence_doc = evidence_docs.get(evidence_file) if isinstance(evidence_file, str) else None
    recorded = _recorded_replays(evidence_doc, entry, run_dir)
    raw = documents.raw or {}
    raw_runs = {
        (side, number): raw.get(f"raw/{side}/replay-{number:03d}.json")
        for side, replays in recorded.items()
        for number in range(1, len(replays) + 1)
    }
    plan = plan_reproduce(
        run,
        request.property_id,
        recorded,
        raw_runs,
        side=request.side,
        replay=request.replay,
        mode=request.mode,
        keep=request.keep,
    )
    fixture_bytes = _kept_fixture(run, run_dir)
    repo = (request.repo or Path(run.repo)).resolve()
    _check_repository(run, repo)
    return Prepared(plan=plan, repo=repo, fixture_bytes=fixture_bytes)


def pin_image(backend: Backend, run: RecordedRun) -> None:
    """The run's image, by its ID, must still be on the engine (exit 3; never pulled)."""
    try:
        backend.resolve_image(run.image_id)
    except ImageNotFoundError:
        named = f" ({run.image_ref})" if run.image_ref and run.image_ref != run.image_id else ""
        raise ImageNotFoundError(
            f"the run's image {run.image_id}{named} is no longer on the engine; reproducing "
            "needs that very image (the tool never pulls)"
        ) from None


# ---------------------------------------------------------------- the container


def replay_plan(plan: ReproducePlan, side: SideReplay, fixture: Path | None) -> ReplayPlan:
    """The sides service's plan of one replay: what ``replay`` planned, for replay N."""
    run = plan.run
    defaults = ReplayPlan(
        image_id=run.image_id,
        pytest_args=plan.driver_pytest_args,
        property_ids=(plan.property_id,),
        fixture=fixture,
        replays=1,
        timeout_s=plan.timeout_s,
        seed=side.seed,
        runner_id=run.runner_id,
        isolation=run.isolation,
        # A run folder older than these pins ran python3 on a read-only tree.
        interpreter=run.interpreter or INTERPRETER,
        writable_tree=run.writable_tree,
        # A run folder older than the neutralisers ran the project's plugins as they were.
        neutralise=run.neutralised,
    )
    limits = run.limits
    return replace(
        defaults,
        env=recorded_extras(run.environment, replay_variables(defaults)),
        memory=str(limits.get("memory", defaults.memory)),
        pids=int(limits.get("pids", defaults.pids)),
        cpus=float(limits.get("cpus", defaults.cpus)),
        tmp_size=str(limits.get("tmp_size", defaults.tmp_size)),
    )


def commands_for(plan: ReproducePlan, side: SideReplay) -> tuple[list[str], str]:
    """The driver's command line for the replay, and pytest's alone (for a shell)."""
    sides_plan = replay_plan(plan, side, Path(FIXTURE) if plan.run.has_fixture else None)
    driver = with_driver_flags(driver_command(sides_plan, 1, (plan.property_id,)), [ATTACH])
    alone = pytest_alone(
        sides_plan.interpreter or INTERPRETER,
        pytest_arguments(plan.pytest_args, (plan.property_id,), seed=sides_plan.neutralise_seed),
    )
    return driver, alone


def side_import_roots(run: RecordedRun, side: str) -> tuple[str, ...]:
    """The side's import roots as its containers had them on PYTHONPATH (none, in a run
    folder older than that pin: its containers had the probe's folder alone)."""
    return import_roots(run.pythonpath.get(side, ()), tree=SRC, probe=PROBE_ROOT)


def drift(run: RecordedRun, side: SideReplay, environment: Mapping[str, str]) -> tuple[str, ...]:
    """Where the container's environment would differ from the one the run pinned."""
    changed = list(environment_drift(run.environment, environment, seed=side.seed))
    recorded_path = run.pythonpath.get(side.side)
    if recorded_path is not None and environment.get("PYTHONPATH", "").split(":") != list(
        recorded_path
    ):
        changed.append("PYTHONPATH")
    return tuple(changed)


def shell_preparation(sides_plan: ReplayPlan) -> list[str]:
    """What the driver does before each replay, done before a shell opens: HOME made in
    the tmpfs and, with a writable tree, the tree copied in."""
    script = 'for folder in "$@"; do mkdir -p "$folder"; done'
    if sides_plan.writable_tree:
        script += f" && cp -a {TREE}/. {SRC}/"
    return ["sh", "-c", script, "sh", *MADE_DIRS]


def reproduce(
    prepared: Prepared,
    *,
    backend: Backend,
    on_output: Callable[[bytes], None],
    on_note: Callable[[str], None],
    user: UserTerminal | None = None,
) -> tuple[SideResult, ...]:
    """Run each chosen side's replay once, one side after the other."""
    plan = prepared.plan
    pin_image(backend, plan.run)
    owner = Owner.current(plan.run.run_id)
    sweep((backend,), owner.host)
    if plan.run.probe_version and plan.run.probe_version != _probe_version():
        log.warning(
            "reproduce.probe_version",
            recorded=plan.run.probe_version,
            now=_probe_version(),
            detail="the probe that labels this replay is not the one that labelled the run",
        )
    results = []
    try:
        with terminate_as_interrupt():  # a SIGTERM removes what a Ctrl-C would
            for side in plan.sides:
                results.append(
                    _reproduce_side(
                        prepared,
                        side,
                        backend=backend,
                        owner=owner,
                        on_output=on_output,
                        on_note=on_note,
                        user=user or UserTerminal(),
                    )
                )
    except KeyboardInterrupt:
        # The containers (unless kept) and the trees went with the context managers.
        raise Interrupted("interrupted; containers and sources removed") from None
    return tuple(results)


def _probe_version() -> str:
    from orchestrator.probe import PROBE_VERSION

    return str(PROBE_VERSION)


def _reproduce_side(
    prepared: Prepared,
    side: SideReplay,
    *,
    backend: Backend,
    owner: Owner,
    on_output: Callable[[bytes], None],
    on_note: Callable[[str], None],
    user: UserTerminal,
) -> SideResult:
    plan = prepared.plan
    keep = plan.keep
    overlay = plan.run.overlay(side.side)
    output: list[bytes] = []
    roots = side_import_roots(plan.run, side.side)
    spec = SideSpec(
        name=side.side,
        repo=prepared.repo,
        rev=side.rev,
        tests=overlay,
        targets=(plan.property_id,),
        pythonpath=roots,
    )
    with Exports("reproduce", keep=keep) as exports:
        fixture_copy = None
        if prepared.fixture_bytes is not None:
            fixture_copy = exports.fixture(prepared.fixture_bytes)
        tree = exports.tree(spec)
        sides_plan = replay_plan(plan, side, fixture_copy)
        moved = drift(plan.run, side, replay_environment(sides_plan, roots))
        if moved:
            on_note(
                f"note: the environment differs from the run's in {', '.join(moved)} "
                "(a run folder written by another version)"
            )
        name = container_name(
            f"{plan.run.run_id}-reproduce-{uuid.uuid4().hex[:6]}", side.side, side.replay
        )
        job = side_job(
            sides_plan,
            name=name,
            labels={**owner.labels(side.side), LABEL_REPRODUCE: str(side.replay)},
            mounts=side_mounts(tree, fixture_copy, writable_tree=sides_plan.writable_tree),
            tree=tree,
            pythonpath=roots,
        )
        on_note(_header(plan, side))

        def tee(chunk: bytes) -> None:
            if sum(map(len, output)) < OUTPUT_KEPT_BYTES:  # what the report keeps
                output.append(chunk)
            on_output(chunk)

        with SideRun(backend, job, keep=keep) as side_run:
            exit_ = _run_replay(
                side_run.container,
                plan=plan,
                side=side,
                sides_plan=sides_plan,
                tee=tee,
                on_note=on_note,
                user=user,
            )
            facts, read = side_run.read(exit_, interpreter=sides_plan.interpreter or INTERPRETER)
        observed = _label(read, facts, plan, side)
        kept = None
        if keep:
            kept = Kept(name=name, folders=(exports.scratch, tree.parent), hash_seed=side.hash_seed)
    comparison = None if observed is None else compare(side.recorded, observed)
    return SideResult(
        replay=side,
        observed=observed,
        comparison=comparison,
        output=b"".join(output).decode("utf-8", errors="replace"),
        kept=kept,
    )


def _run_replay(
    container: SideContainer,
    *,
    plan: ReproducePlan,
    side: SideReplay,
    sides_plan: ReplayPlan,
    tee: Callable[[bytes], None],
    on_note: Callable[[str], None],
    user: UserTerminal,
) -> Exit:
    """The replay in the container: streamed out, on the user's terminal (``--pdb``), or
    a shell there instead (``--shell``)."""
    driver, alone = commands_for(plan, side)
    if plan.mode is Mode.RUN:
        return container.exec_stream(
            driver,
            environment={},
            on_output=tee,
            deadline=time.monotonic() + side_deadline_s(sides_plan, 1),
        )
    if plan.mode is Mode.SHELL:
        container.exec_stream(
            shell_preparation(sides_plan),
            environment={},
            on_output=lambda chunk: None,
            deadline=time.monotonic() + side_deadline_s(sides_plan, 1),
        )
        on_note(_shell_note(plan, side, driver, alone))
        command, environment = list(SHELL_COMMAND), {"PYTHONHASHSEED": side.hash_seed}
    else:
        command, environment = driver, {}
    session = container.exec_terminal(command, environment=environment)
    try:
        terminal.relay(
            session.socket,
            stdin_fd=user.stdin_fd,
            stdout_fd=user.stdout_fd,
            on_resize=session.resize,
        )
    finally:
        session.close()
    return Exit(status_code=session.exit_code(), killed_at_deadline=False, cancelled=False)


def _label(
    read: ResultsRead, facts: ContainerFacts, plan: ReproducePlan, side: SideReplay
) -> Replay | None:
    """The replay's label, as ``replay`` gives it; None for a shell in which it was not
    run."""
    replay_file = replay_file_from(read, 1)
    if plan.mode is Mode.SHELL and replay_file.state == "missing":
        return None
    labelled = label_replay(replay_file, facts, plan.property_id)
    return replace(labelled, image_digest=facts.image_id, runner_id=plan.run.runner_id)


def _header(plan: ReproducePlan, side: SideReplay) -> str:
    overlay = f", tests from {plan.run.tests_from[:12]}" if plan.run.tests_from else ""
    return (
        f"== {side.side} {side.rev[:12]}{overlay}: {plan.property_id}, replay {side.replay} "
        f"of {side.recorded_count} (seed {side.seed}, PYTHONHASHSEED {side.hash_seed}) =="
    )


def _shell_note(plan: ReproducePlan, side: SideReplay, driver: list[str], alone: str) -> str:
    import shlex

    fixture = f"; the fixture is $REPLAY_FIXTURE ({FIXTURE})" if plan.run.has_fixture else ""
    tree = (
        f"a writable copy of the tree at {SRC} (the replay's command copies {TREE} afresh)"
        if plan.run.writable_tree
        else f"the tree at {SRC}"
    )
    return "\n".join(
        (
            f"a shell in the replay's container: {tree}{fixture}; REPLAY_SEED="
            f"{side.seed} and PYTHONHASHSEED={side.hash_seed} are set; exit to leave",
            f"the replay, labelled:  {shlex.join(driver)}",
            f"pytest alone:          {alone}",
        )
    )


def kept_lines(kept: Kept) -> list[str]:
    """What to tell the user about a container left running."""
    folders = ", ".join(str(folder) for folder in kept.folders)
    return [
        f"kept: container {kept.name}, running (its tree and folders: {folders})",
        f"  docker exec -it -e PYTHONHASHSEED={kept.hash_seed} {kept.name} bash",
        f"  docker rm -f {kept.name}   "
        "(or leave it: the next replay or reproduce here removes it and its folders)",
    ]
