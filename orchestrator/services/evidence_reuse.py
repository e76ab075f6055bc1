"""Reusing a side's screening evidence across runs (docs/lanes.md section 10, "Reusing a
side's screening").

A screening's first phase asks, for each batch of the base side, whether a store (the
ledger's table, a cache folder) holds an entry under that side's key
(:mod:`orchestrator.core.side_evidence`). On a hit the side runs no container for its
screening: its stored result files are parsed, written to the run folder's ``raw/`` and
labelled with the patch side's, exactly as a container's would have been; the second phase
and the rounds of evidence replay both sides fresh, as always. Every side whose screening
went cleanly is offered for storing, and the offers are written only once the run folder
is complete (:meth:`SideReuse.flush`): an interrupted or failed run stores nothing.

The object is handed to the first phase's ``run_sides`` only; the side threads call
:meth:`SideReuse.take` (before a side's containers), :meth:`SideReuse.capture` (the bytes
each container's reader brought back) and :meth:`SideReuse.offer` (after them).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.evidence_cache import FolderStore, decode_entry
from orchestrator.adapters.evidence_cache import max_bytes_from as cache_bytes_from
from orchestrator.adapters.results import parse_replay_bytes, replay_file_name
from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.replay_run import BASE, RunPlan
from orchestrator.core.side_evidence import (
    SideEvidence,
    SideKeyInputs,
    StoredReplay,
    deadline_problem,
    scope_of,
    screening_stored,
    side_key,
    unclean_reason,
    without_deadline,
)
from orchestrator.core.side_spec import (
    OUT,
    RESULTS_TMPFS,
    REWRITE_CACHE,
    SRC,
    TREE,
    SideSpec,
    batch_targets,
    container_units,
    driver_command,
    driver_exec_environment,
    replay_environment,
)
from orchestrator.errors import OrchestratorError, one_line
from orchestrator.log import get_logger
from orchestrator.services import run_writer
from orchestrator.services.sides.side_run import plan_limits, writable_tree_tmpfs

if TYPE_CHECKING:
    from orchestrator.core.backend import Backend
    from orchestrator.core.pool import Batch
    from orchestrator.core.test_files import TestOverlay
    from orchestrator.services.sides import SidesRun

log = get_logger(__name__)

Observed = list[tuple[ReplayFile, ContainerFacts]]


class Store(Protocol):
    """Where entries are kept: the ledger's table or a cache folder."""

    @property
    def name(self) -> str: ...

    def load(self, key: str) -> bytes | None: ...

    def save(self, entry: SideEvidence) -> bool: ...


@dataclass(kw_only=True)
class _SideRecord:
    """What the run did about one side of one batch: its key, where it came from, whether
    it was offered for storing (and why not)."""

    side: str
    batch: str
    key: str
    scope: str
    reused_from: str | None = None  # the run id of the entry it reused
    store: str | None = None  # where that entry was found
    offer: Callable[[], SideEvidence] | None = None  # made when stored (read from raw/)
    not_stored: str | None = None
    stored: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "batch": self.batch,
            "key": self.key,
            "scope": self.scope,
            "reused_from": self.reused_from,
            "found_in": self.store,
            "stored_in": list(self.stored),
            "not_stored": self.not_stored,
        }


class SideReuse:
    """One run's reuse of screening evidence (see the module)."""

    def __init__(
        self,
        *,
        stores: Sequence[Store],
        lookup: frozenset[str],
        run_id: str,
        repo: Path,
        patch_rev: str,
        overlay: TestOverlay | None = None,
        now: datetime | None = None,
    ) -> None:
        self.stores = tuple(stores)
        self.lookup = lookup  # the sides whose entries are looked for (empty: store only)
        self.run_id = run_id
        self.repo = repo
        self.patch_rev = patch_rev
        self.overlay = overlay
        self.now = now
        self._lock = threading.Lock()
        self._records: dict[tuple[str, int, str], _SideRecord] = {}
        # Per side of a batch, each replay's result file: the reader's bytes, or where the
        # run folder keeps them (raw/: read back when stored, never held for the run)
        self._bytes: dict[tuple[str, int, str], dict[int, bytes | Path]] = {}
        self._trees: dict[str, str] = {}
        self._refused: set[tuple[str, str]] = set()
        self._probe: str | None = None

    # -- the side threads ---------------------------------------------------------

    def take(
        self,
        run: SidesRun,
        engine: Backend,
        batch: Batch,
        side: SideSpec,
        pythonpath: Sequence[str],
    ) -> Observed | None:
        """The side's screening from a store, its raw files written, or None (then the
        side runs, and is offered for storing afterwards)."""
        try:
            key, scope = self.key_of(run, engine, batch, side, pythonpath)
        except (OSError, OrchestratorError) as error:  # no key, no reuse: the run goes on
            log.warning("reuse.no_key", side=side.name, error=one_line(error))
            return None
        record = _SideRecord(side=side.name, batch=batch.key, key=key, scope=scope)
        with self._lock:
            self._records[(batch.key, batch.attempt, side.name)] = record
        if side.name not in self.lookup:
            return None
        found = self._find(key)
        if found is None:
            log.info("reuse.miss", side=side.name, key=key)
            return None
        entry, store = found
        if len(entry.replays) != run.plan.replays:
            return None
        observed: Observed = [
            (parse_replay_bytes(stored.data, stored.replay), stored.facts())
            for stored in entry.replays
        ]
        late = deadline_problem([replay_file for replay_file, _ in observed], run.plan.timeout_s)
        if late is not None:
            log.info("reuse.not_taken", side=side.name, key=key, reason=late)
            return None
        raw_root = run.raw_root(batch)
        if raw_root is not None:
            folder = raw_root / side.name
            folder.mkdir(parents=True, exist_ok=True)
            for stored in entry.replays:
                run_writer.write_raw(folder / replay_file_name(stored.replay), stored.data)
        record.reused_from, record.store = entry.run_id, store
        record.not_stored = "reused"
        if run.warm is not None:  # both sides' second phase in fresh containers alike
            run.warm.cool(engine.index)
        log.info("reuse.hit", side=side.name, key=key, run_id=entry.run_id, store=store)
        return observed

    def capture(
        self,
        batch: Batch,
        side: str,
        numbers: Sequence[int],
        files: Mapping[str, bytes],
        kept_in: Path | None = None,
    ) -> None:
        """The result files one container's reader brought back, by replay number; with
        ``kept_in`` the folder where the run keeps them as they came (``raw/<side>``), so
        that only their names are held until the run stores them."""
        got: dict[int, bytes | Path] = {
            number: files[replay_file_name(index)]
            if kept_in is None
            else kept_in / replay_file_name(number)
            for index, number in enumerate(numbers, start=1)
            if replay_file_name(index) in files
        }
        with self._lock:
            self._bytes.setdefault((batch.key, batch.attempt, side), {}).update(got)

    def offer(self, run: SidesRun, batch: Batch, side: SideSpec, observed: Observed) -> None:
        """After a side's screening containers: keep it for storing when it went cleanly."""
        where = (batch.key, batch.attempt, side.name)
        with self._lock:
            record = self._records.get(where)
            data = self._bytes.pop(where, {})
        if record is None or record.reused_from is not None:
            return
        plan = run.plan
        targets = batch_targets(plan, batch, side)
        problem = unclean_reason(
            observed,
            replays=plan.replays,
            image_id=plan.image_id,
            seed=plan.seed,
            timeout_s=plan.timeout_s,
            property_ids=targets,
        )
        if problem is None and sorted(data) != list(range(1, plan.replays + 1)):
            problem = "a result file's bytes were not kept"
        if problem is not None:
            record.not_stored = problem
            log.info("reuse.not_offered", side=side.name, key=record.key, reason=problem)
            return
        image_ids = [str(facts.image_id) for _, facts in observed]
        stored_at = (self.now or datetime.now(UTC)).isoformat()

        def entry() -> SideEvidence:
            return SideEvidence(
                key=record.key,
                scope=record.scope,
                side=side.name,
                rev=side.rev,
                run_id=self.run_id,
                stored_at=stored_at,
                replays=tuple(
                    StoredReplay(
                        replay=number,
                        data=_result_bytes(data[number]),
                        image_id=image_id,
                        exit_code=0,
                    )
                    for image_id, number in zip(image_ids, sorted(data), strict=True)
                ),
            )

        record.offer = entry

    # -- the end of the run ----------------------------------------------------------

    def flush(self) -> None:
        """Write every offer to every store (the run folder is complete). A store that
        fails is logged once and the run goes on: reuse is never a verdict."""
        for record in self._records.values():
            if record.offer is None:
                continue
            try:
                offered = record.offer()
            except OSError as error:  # its result files left the run folder
                log.warning("reuse.not_stored", side=record.side, error=one_line(error))
                record.offer = None
                continue
            for store in self.stores:
                try:
                    if store.save(offered):
                        record.stored.append(store.name)
                except (OSError, OrchestratorError) as error:
                    log.warning("reuse.store_failed", store=store.name, error=one_line(error))
            if record.stored:
                log.info("reuse.stored", side=record.side, key=record.key, stores=record.stored)
            record.offer = None
            del offered  # one side's result files held at a time, never two

    def to_json(self) -> dict[str, Any]:
        """The run log's ``reuse``: the stores, and per side and batch what was done."""
        return {
            "enabled": bool(self.lookup),
            "stores": [store.name for store in self.stores],
            "lookup": sorted(self.lookup),
            "sides": [record.to_json() for record in self._records.values()],
        }

    # -- keys and stores -------------------------------------------------------------

    def key_of(
        self,
        run: SidesRun,
        engine: Backend,
        batch: Batch,
        side: SideSpec,
        pythonpath: Sequence[str],
    ) -> tuple[str, str]:
        """The side's key for this batch, and its scope."""
        plan = (
            replace(run.plan, property_ids=batch.property_ids) if batch.property_ids else run.plan
        )
        targets = batch_targets(run.plan, batch, side)
        foreign = side.tests is not None or side.mutant is not None
        scope = scope_of(foreign_bytes=foreign, patch_rev=self.patch_rev)
        tmpfs = {OUT: RESULTS_TMPFS}
        if plan.writable_tree:
            tmpfs[SRC] = writable_tree_tmpfs(run.tree(side))
        write: dict[str, str] = {}
        if side.tests is not None and self.overlay is not None:
            write = {path: self.overlay.files.get(path, "") for path in side.tests.write}
        inputs = SideKeyInputs(
            scope=scope,
            tree=self._tree(side.rev),
            overlay_write=write,
            overlay_remove=side.tests.remove if side.tests is not None else (),
            mutant=_file_digest(side.mutant) if side.mutant is not None else None,
            image_id=plan.image_id,
            interpreter=plan.interpreter or "python3",
            runner_id=engine.runner_id,
            commands=tuple(
                without_deadline(
                    driver_command(
                        plan,
                        len(numbers),
                        targets,
                        out=OUT,
                        tree=TREE,  # where the read-only copy is mounted: no input
                        rewrite_cache=REWRITE_CACHE if run.parks else None,
                    )
                )
                for numbers in container_units(plan)
            ),
            exec_environment=driver_exec_environment(plan),
            environment=replay_environment(plan, pythonpath),
            limits=asdict(plan_limits(plan)),
            tmpfs=tmpfs,
            isolation=plan.isolation,
            fixture_sha256=_file_digest(plan.fixture) if plan.fixture is not None else None,
            probe_digest=self._probe_digest(),
            probe_version=_probe_version(),
        )
        return side_key(inputs), scope

    def _tree(self, rev: str) -> str:
        with self._lock:
            known = self._trees.get(rev)
        if known is None:
            known = git_adapter.tree_id(self.repo, rev)
            with self._lock:
                self._trees[rev] = known
        return known

    def _probe_digest(self) -> str:
        if self._probe is None:
            self._probe = probe_digest()
        return self._probe

    def _find(self, key: str) -> tuple[SideEvidence, str] | None:
        for store in self.stores:
            try:
                data = store.load(key)
            except (OSError, OrchestratorError) as error:
                self._refuse(store.name, f"not read: {one_line(error)}")
                continue
            if data is None:
                continue
            entry, problem = decode_entry(data, key)
            if entry is None:
                self._refuse(store.name, f"{key}: {problem}")
                continue
            return entry, store.name
        return None

    def _refuse(self, store: str, problem: str) -> None:
        """An entry that is not to be trusted is ignored, and said once per store."""
        with self._lock:
            if (store, problem) in self._refused:
                return
            self._refused.add((store, problem))
        log.warning("reuse.entry_ignored", store=store, problem=problem)


def _result_bytes(source: bytes | Path) -> bytes:
    """A result file's bytes: as held, or read back from where the run folder keeps them."""
    return source if isinstance(source, bytes) else source.read_bytes()


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _probe_version() -> str:
    from orchestrator.probe import PROBE_VERSION

    return str(PROBE_VERSION)


def probe_digest() -> str:
    """sha256 over the probe's own files (the package the containers import it from):
    a changed probe is another key, whatever its version says."""
    import orchestrator

    root = Path(os.path.dirname(orchestrator.__file__))
    hasher = hashlib.sha256()
    for path in [root / "__init__.py", *sorted((root / "probe").rglob("*.py"))]:
        hasher.update(str(path.relative_to(root)).encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return f"sha256:{hasher.hexdigest()}"


def plan_reuse(
    plan: RunPlan, *, ledger_url: str | None, env: Mapping[str, str] | None = None
) -> SideReuse | None:
    """The run's reuse, when there is a store to use and the run screens (None: none).

    Stores: the ledger the run records in (``ledger_url``) and ``--evidence-cache`` (or
    ``$ORCHESTRATOR_EVIDENCE_CACHE``). With ``--no-reuse`` nothing is looked up or stored."""
    from orchestrator.adapters.ledger.side_evidence import LedgerStore
    from orchestrator.adapters.ledger.side_evidence import max_bytes_from as ledger_bytes_from

    options = plan.options
    environ = os.environ if env is None else env
    if not screening_stored(
        reuse=options.reuse,
        screens=plan.screen_policy.enabled,
        ledger=ledger_url is not None,
        cache=options.evidence_cache is not None,
    ):
        return None
    stores: list[Store] = []
    if ledger_url is not None:
        stores.append(LedgerStore(url=ledger_url, max_bytes=ledger_bytes_from(dict(environ))))
    if options.evidence_cache is not None:
        stores.append(
            FolderStore(root=options.evidence_cache, max_bytes=cache_bytes_from(dict(environ)))
        )
    return SideReuse(
        stores=stores,
        lookup=frozenset({BASE}),
        run_id=plan.run_id,
        repo=options.repo,
        patch_rev=plan.pins.patch_rev,
        overlay=plan.overlay,
        now=plan.started_at,
    )
