"""Reproduce one recorded replay: what to run again, and whether it came out the same.

Pure. ``orchestrator reproduce RUN_DIR PROPERTY`` reads what a finished run pinned
(``run-log.json``: :func:`parse_run_log`), how each side's replays of the property were
labelled (its evidence) and the seed each replay ran with (``raw/<side>/replay-<k>.json``),
and plans one replay per chosen side (:func:`plan_reproduce`): the same revision with the
same test overlay, image, fixture, environment and limits, the seed and hash seed of
replay N, and pytest handed the property alone. After the run, :func:`compare` says
whether the probe's label is the recorded one; a replay that does not come out the same
is not reproducible, which is evidence too.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchestrator.core.digest import NULL_DIGEST
from orchestrator.core.evidence import optional_bool, optional_int, optional_number, optional_str
from orchestrator.core.pytest_command import pytest_args
from orchestrator.core.replay_run import BASE, PATCH
from orchestrator.core.test_files import SideOverlay
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import Label, Replay
from orchestrator.probe.jobs import hash_seed

SIDES = (BASE, PATCH)
BOTH = "both"
SIDE_CHOICES = (BASE, PATCH, BOTH)
DEFAULT_SIDE = PATCH
# With --pdb a person, not a deadline, decides when the replay ends.
PDB_TIMEOUT_S = 24 * 3600.0
# Keeps the container up between the replay and whatever runs after it (--keep, --shell).
IDLE_COMMAND = ("sleep", "infinity")
SHELL_COMMAND = ("sh", "-c", 'exec "$(command -v bash || command -v sh)" -i')


class Mode(StrEnum):
    RUN = "run"  # run the property once, output streamed
    PDB = "pdb"  # pytest --pdb on a terminal
    SHELL = "shell"  # a shell in the container instead


@dataclass(frozen=True, kw_only=True)
class RecordedRun:
    """What a run's ``run-log.json`` pinned, as far as reproducing a replay needs it."""

    run_id: str
    repo: str
    revs: Mapping[str, str]  # side -> full SHA
    command: str
    image_id: str
    image_ref: str | None
    seed: int
    timeout_s: float
    isolation: str
    replays: int
    runner_id: str
    probe_version: str | None
    fixture_digest: str
    fixture_file: str | None  # the run folder's copy of the fixture (None: older runs)
    tests_from: str | None
    overlaid_files: tuple[str, ...] = ()
    overlay_removed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)  # empty: the defaults
    # The container's environment as pinned (empty: a run folder older than these pins):
    # every variable but PYTHONPATH, each side's PYTHONPATH entries, the driver's
    # interpreter, and whether the tree was a writable copy.
    environment: Mapping[str, str] = field(default_factory=dict)
    pythonpath: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    interpreter: str | None = None
    writable_tree: bool = False
    # Whether its replays neutralised the plugins that change what a replay observes
    # (the run log's `neutralise`; absent in a run folder older than that).
    neutralised: bool = False

    @property
    def has_fixture(self) -> bool:
        return self.fixture_digest != NULL_DIGEST

    def overlay(self, side: str) -> SideOverlay | None:
        """What ``--tests-from`` laid over this side's tree (None: its own tests ran)."""
        if self.tests_from is None:
            return None
        return SideOverlay(
            rev=self.tests_from,
            write=self.overlaid_files,
            remove=tuple(self.overlay_removed.get(side, ())),
        )


def _required_str(doc: Mapping[str, Any], name: str) -> str:
    value = optional_str(doc, name)
    if not value:
        raise SchemaError(f"{name}: missing")
    return value


def _strings_by_key(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SchemaError(f"{name}: expected an object")
    return {str(key): item for key, item in value.items()}


def _environment(value: Any) -> dict[str, str]:
    found = _strings_by_key(value, "environment")
    for key, item in found.items():
        if not isinstance(item, str):
            raise SchemaError(f"environment.{key}: expected a string")
    return found


def _pythonpath(value: Any) -> dict[str, tuple[str, ...]]:
    found = _strings_by_key(value, "pythonpath")
    for side, entries in found.items():
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise SchemaError(f"pythonpath.{side}: expected an array of strings")
    return {side: tuple(entries) for side, entries in found.items()}


def _paths(value: Any, name: str) -> tuple[str, ...]:
    """``[{"path": ..., "blob": ...}, ...]`` -> the paths."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError(f"{name}: expected an array")
    paths = []
    for index, entry in enumerate(value):
        path = entry.get("path") if isinstance(entry, Mapping) else None
        if not isinstance(path, str) or not path:
            raise SchemaError(f"{name}[{index}]: expected an object with a path")
        paths.append(path)
    return tuple(paths)


def parse_run_log(doc: Any) -> RecordedRun:
    """A ``replay-run-log/1`` document as a :class:`RecordedRun`; a field reproducing
    needs that is missing or of the wrong type is a :class:`SchemaError` naming it."""
    if not isinstance(doc, Mapping):
        raise SchemaError("expected a JSON object")
    seed = optional_int(doc, "seed")
    replays = optional_int(doc, "replays")
    timeout_s = optional_number(doc, "timeout_s")
    if seed is None:
        raise SchemaError("seed: missing")
    if replays is None or replays < 1:
        raise SchemaError("replays: missing")
    if timeout_s is None or timeout_s <= 0:
        raise SchemaError("timeout_s: missing")
    removed = doc.get("overlay_removed")
    removed = {} if removed is None else removed
    if not isinstance(removed, Mapping):
        raise SchemaError("overlay_removed: expected an object")
    limits = doc.get("limits")
    limits = {} if limits is None else limits
    if not isinstance(limits, Mapping):
        raise SchemaError("limits: expected an object")
    for name, read in (
        ("memory", optional_str),
        ("pids", optional_int),
        ("cpus", optional_number),
        ("tmp_size", optional_str),
    ):
        read(limits, name, "limits.")
    return RecordedRun(
        run_id=_required_str(doc, "run_id"),
        repo=_required_str(doc, "repo"),
        revs={BASE: _required_str(doc, "base_rev"), PATCH: _required_str(doc, "patch_rev")},
        command=_required_str(doc, "command"),
        image_id=_required_str(doc, "image_digest"),
        image_ref=optional_str(doc, "image_ref"),
        seed=seed,
        timeout_s=timeout_s,
        isolation=optional_str(doc, "isolation") or "side",
        replays=replays,
        runner_id=optional_str(doc, "runner_id") or "local",
        probe_version=optional_str(doc, "probe_version"),
        fixture_digest=optional_str(doc, "fixture_digest") or NULL_DIGEST,
        fixture_file=optional_str(doc, "fixture_file"),
        tests_from=optional_str(doc, "tests_from"),
        overlaid_files=_paths(doc.get("overlaid_files"), "overlaid_files"),
        overlay_removed={
            str(side): _paths(entries, f"overlay_removed.{side}")
            for side, entries in removed.items()
        },
        limits=dict(limits),
        environment=_environment(doc.get("environment")),
        pythonpath=_pythonpath(doc.get("pythonpath")),
        interpreter=optional_str(doc, "interpreter"),
        writable_tree=bool(optional_bool(doc, "writable_tree")),
        neutralised=isinstance(doc.get("neutralise"), dict),
    )


def chosen_sides(side: str) -> tuple[str, ...]:
    if side == BOTH:
        return SIDES
    if side not in SIDES:
        raise InputError(f"--side must be one of {', '.join(SIDE_CHOICES)}, got {side!r}")
    return (side,)


def choose_replay(
    recorded: Mapping[str, Sequence[Replay]], sides: Sequence[str], requested: int | None
) -> int:
    """Replay N (1-based) on ``sides``: the one asked for, which every side must have;
    by default the first that did not pass on any of them (else the first)."""
    count = min(len(recorded.get(side, ())) for side in sides)
    if count == 0:
        raise InputError(f"the run recorded no replay of it on {' and '.join(sides)}")
    if requested is not None:
        if not 1 <= requested <= count:
            raise InputError(f"--replay {requested}: the run has replays 1 to {count}")
        return requested
    for number in range(1, count + 1):
        if any(recorded[side][number - 1].label != Label.ASSERT_PASS for side in sides):
            return number
    return 1


def replay_seed(run_seed: int, raw_run: Any) -> int:
    """The seed replay N ran with: its own ``replay-run/1`` file says, else the run's."""
    if isinstance(raw_run, Mapping):
        seed = raw_run.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return seed
    return run_seed


@dataclass(frozen=True, kw_only=True)
class SideReplay:
    """One side's replay to run again."""

    side: str
    rev: str
    replay: int
    seed: int
    recorded: Replay
    # How many replays of the property the run recorded on this side: its screening
    # replays alone when it was decided on them, N when it was replayed further.
    recorded_count: int = 1

    @property
    def hash_seed(self) -> str:
        return hash_seed(self.seed)


@dataclass(frozen=True, kw_only=True)
class ReproducePlan:
    run: RecordedRun
    property_id: str
    mode: Mode
    keep: bool
    sides: tuple[SideReplay, ...]
    pytest_args: tuple[str, ...]  # the command's options (its paths give way to the property)

    @property
    def timeout_s(self) -> float:
        return PDB_TIMEOUT_S if self.mode is Mode.PDB else self.run.timeout_s

    @property
    def driver_pytest_args(self) -> tuple[str, ...]:
        """What the driver hands pytest before the property: with --pdb, ``--pdb`` too."""
        return (*self.pytest_args, "--pdb") if self.mode is Mode.PDB else self.pytest_args


def plan_reproduce(
    run: RecordedRun,
    property_id: str,
    recorded: Mapping[str, Sequence[Replay]],
    raw_runs: Mapping[tuple[str, int], Any],
    *,
    side: str,
    replay: int | None,
    mode: Mode,
    keep: bool,
) -> ReproducePlan:
    """What to run: one :class:`SideReplay` per chosen side. ``recorded`` holds each
    side's replays of the property (from its evidence), ``raw_runs`` the run's
    ``replay-run/1`` documents by (side, replay number)."""
    sides = chosen_sides(side)
    number = choose_replay(recorded, sides, replay)
    return ReproducePlan(
        run=run,
        property_id=property_id,
        mode=mode,
        keep=keep,
        sides=tuple(
            SideReplay(
                side=name,
                rev=run.revs[name],
                replay=number,
                seed=replay_seed(run.seed, raw_runs.get((name, number))),
                recorded=recorded[name][number - 1],
                recorded_count=len(recorded[name]),
            )
            for name in sides
        ),
        pytest_args=pytest_args(run.command, (property_id,)),
    )


# Variables the replay sets from its own values, never taken over from a record.
OWN_VARIABLES = frozenset({"REPLAY_SEED", "REPLAY_FIXTURE", "PYTHONPATH"})


def recorded_extras(
    recorded: Mapping[str, str], defaults: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The variables (``--env``'s part) that make ``defaults`` (what a replay gets without
    any) the recorded environment: those the record adds or sets otherwise. Pure."""
    return tuple(
        (key, value)
        for key, value in recorded.items()
        if key not in OWN_VARIABLES and defaults.get(key) != value
    )


def environment_drift(
    recorded: Mapping[str, str], built: Mapping[str, str], *, seed: int
) -> tuple[str, ...]:
    """The variables in which the environment built now differs from the recorded one
    (REPLAY_SEED aside: it is replay N's); empty when the record has none to compare."""
    if not recorded:
        return ()
    expected = {**recorded, "REPLAY_SEED": str(seed)}
    keys = sorted((set(expected) | set(built)) - {"PYTHONPATH"})
    return tuple(key for key in keys if expected.get(key) != built.get(key))


def import_roots(container_paths: Sequence[str], *, tree: str, probe: str) -> tuple[str, ...]:
    """A side's import roots (relative to its tree, or absolute) from the PYTHONPATH its
    container had: its entries in order, less the probe's; ``/src/lib`` -> ``lib``. Pure."""
    roots: list[str] = []
    for entry in container_paths:
        if entry == probe:
            continue
        if entry == tree:
            roots.append(".")
        elif entry.startswith(tree + "/"):
            roots.append(entry[len(tree) + 1 :])
        else:
            roots.append(entry)
    return tuple(roots)


def with_driver_flags(command: Sequence[str], flags: Sequence[str]) -> list[str]:
    """The probe driver's command line with ``flags`` added to its own options (before
    the ``--`` that starts pytest's)."""
    words = list(command)
    split = words.index("--") if "--" in words else len(words)
    return [*words[:split], *flags, *words[split:]]


def pytest_alone(interpreter: str, arguments: Sequence[str]) -> str:
    """The replay's pytest command without the driver: for a person at a shell."""
    return shlex.join([interpreter, "-m", "pytest", "-p", "orchestrator.probe.plugin", *arguments])


# ---------------------------------------------------------------- the outcome


@dataclass(frozen=True, kw_only=True)
class Comparison:
    same: bool
    detail: str


def _failure_identity(replay: Replay) -> str | None:
    return replay.assertion_key or replay.assertion_id


def compare(recorded: Replay, observed: Replay) -> Comparison:
    """Did the replay come out as recorded? The same label, and for a failure the same
    assertion (by its position-free key when both have one), for a harness error the same
    reason. Call counts are shown, not compared: the label is what was decided on."""
    if observed.label != recorded.label:
        return Comparison(
            same=False, detail=f"recorded {describe(recorded)}, now {describe(observed)}"
        )
    if recorded.label == Label.ASSERT_FAIL:
        both_keyed = recorded.assertion_key is not None and observed.assertion_key is not None
        was = recorded.assertion_key if both_keyed else recorded.assertion_id
        now = observed.assertion_key if both_keyed else observed.assertion_id
        if was != now:
            return Comparison(
                same=False,
                detail=f"both assert_fail, at another assertion: recorded {was}, now {now}",
            )
    if recorded.label == Label.HARNESS_ERROR and recorded.reason != observed.reason:
        return Comparison(
            same=False, detail=f"recorded {describe(recorded)}, now {describe(observed)}"
        )
    return Comparison(same=True, detail=f"{describe(observed)}, as recorded")


def where(assertion_id: str | None) -> str | None:
    """``<nodeid>@tests/test_x.py:9:AssertionError`` -> ``tests/test_x.py:9``."""
    if not assertion_id or "@" not in assertion_id:
        return None
    place = assertion_id.rsplit("@", 1)[1]
    path, _, rest = place.partition(":")
    line = rest.split(":", 1)[0]
    return f"{path}:{line}" if path and re.fullmatch(r"[0-9]+", line) else None


def describe(replay: Replay) -> str:
    """``assert_fail at tests/x.py:9``, ``harness_error(not_found)``, ``assert_pass``."""
    if replay.label == Label.ASSERT_FAIL:
        place = where(replay.assertion_id)
        return f"assert_fail at {place}" if place else "assert_fail"
    if not Label.is_completed(replay.label) and replay.reason:
        return f"{replay.label}({replay.reason})"
    return replay.label


def calls_text(replay: Replay, shown: Sequence[str]) -> str:
    return ", ".join(f"{name} {replay.calls.get(name, 0)}" for name in shown) or "-"


def shown_calls(replays: Sequence[Replay]) -> tuple[str, ...]:
    """The dependencies worth a column: counted above zero, or counted differently."""
    names = sorted({name for replay in replays for name in replay.calls})
    return tuple(
        name
        for name in names
        if any(replay.calls.get(name, 0) for replay in replays)
        or len({replay.calls.get(name, 0) for replay in replays}) > 1
    )


def isolation_hint(run: RecordedRun, replay: int) -> str | None:
    """Why a side-isolated replay after the first may not come out the same again."""
    if run.isolation != "side" or replay <= 1:
        return None
    others = replay - 1
    return (
        f"replay {replay} ran after {others} other replay{'s' if others != 1 else ''} in one "
        "container (isolation side); what they left behind (in /tmp, say) is not recreated"
    )


# A run of one padding character: pytest's rulers (``=====``, ``_____``) and the blanks that
# push ``[100%]`` to the right margin (never a line's indentation). Shortened, never below
# three, to fit a column.
_PADDING = re.compile(r"(?<=\S) {4,}|([=_~<>#*-])\1{3,}")


def fit(line: str, column: int) -> str:
    """``line`` with its padding runs shortened (the longest first, each to no fewer than
    three) until it fits ``column``, or they are all that short. Only padding goes."""
    runs = [match.span() for match in _PADDING.finditer(line)]
    lengths = [end - start for start, end in runs]
    excess = len(line) - column
    while excess > 0 and lengths and max(lengths) > 3:
        longest = lengths.index(max(lengths))
        lengths[longest] -= 1
        excess -= 1
    pieces, last = [], 0
    for (start, end), length in zip(runs, lengths, strict=True):
        pieces.append(line[last : start + length])
        last = end
    pieces.append(line[last:])
    return "".join(pieces)


def fold(line: str, column: int) -> list[str]:
    """``line`` in pieces of at most ``column`` characters, cut after a blank when there
    is one in the second half of the piece."""
    rows: list[str] = []
    while len(line) > column:
        cut = line.rfind(" ", column // 2, column)
        cut = column if cut <= 0 else cut + 1
        rows.append(line[:cut].rstrip())
        line = line[cut:]
    rows.append(line)
    return rows


def side_by_side(left: str, right: str, *, headings: tuple[str, str], width: int) -> list[str]:
    """Two texts in two columns of equal width separated by `` | ``; a line too wide for
    its column loses padding first (:func:`fit`), then folds (:func:`fold`), so nothing but
    padding is lost. Every line is at most ``width`` characters (at least 43)."""
    column = max(20, (width - 3) // 2)

    def rows_of(text: str) -> list[str]:
        rows: list[str] = []
        for raw in text.expandtabs(8).replace("\r\n", "\n").split("\n"):
            rows.extend(fold(fit(raw.replace("\r", "").rstrip(), column), column))
        while rows and not rows[-1]:
            rows.pop()
        return rows

    lefts = [headings[0][:column], "-" * column, *rows_of(left)]
    rights = [headings[1][:column], "-" * column, *rows_of(right)]
    height = max(len(lefts), len(rights))
    lefts += [""] * (height - len(lefts))
    rights += [""] * (height - len(rights))
    return [f"{a:<{column}} | {b}".rstrip() for a, b in zip(lefts, rights, strict=True)]
