"""Screening: replay every property K times per side first, then, only where there is
signal, until it has N replays per side (docs/lanes.md, "Screening"). Pure.

A property has **signal** after its screening replays when any of them is not
``assert_pass`` on either side, when a dependency's call counts differ between the sides
(the sets of counts, as row 5 compares them), or when its oracle slice differs between
the sides (which includes a test that exists on one side only). A property with signal
is replayed until it has N replays per side (its K screening replays count: N - K more);
the others are decided on their K screening replays
(P/P with equal counts: ``no_freeze`` / ``not_reproduced``). Nodes that are no test (the
session, "no test reported") cannot be replayed by name and are decided on their screening
replays too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.calls import budget_changes, describe_change
from orchestrator.core.oracle import OracleChange
from orchestrator.core.pytest_command import split_node_id
from orchestrator.model import Label, Replay

DEFAULT_SCREEN = 1  # screening replays per side when no --property is named
# Nodes a replay can report that pytest cannot be asked to run by name.
UNNAMEABLE = frozenset({"", "<session>", "<no test reported>"})

Labelled = Mapping[str, Mapping[str, tuple[Replay, ...]]]


def screen_replays(screen: int | None, *, replays_all: bool, named: bool) -> int:
    """K, the screening replays per side (0: no screening, every property gets N).

    ``--replays-all`` turns screening off; an explicit ``--screen K`` is taken as it is;
    by default a run of the whole selection screens once and a run of properties that
    were named (``--property``, or chosen by ``--changed``) does not: they were chosen
    to be replayed.
    """
    if replays_all:
        return 0
    if screen is not None:
        return screen
    return 0 if named else DEFAULT_SCREEN


@dataclass(frozen=True, kw_only=True)
class ScreenPolicy:
    """How a run spends its replays: K screening replays then N where there is signal
    (``screen`` > 0), or N for every property (``screen`` 0, ``--replays-all``)."""

    screen: int
    replays: int

    @property
    def enabled(self) -> bool:
        return self.screen > 0

    def to_json(self) -> dict[str, Any]:
        """The run log's ``screening``."""
        return {
            "policy": "screen" if self.enabled else "replays_all",
            "screen": self.screen,
            "replays": self.replays,
        }


def replayable(property_id: str) -> bool:
    """Can pytest be asked to run this node by name (a file, or a test in one)?"""
    return property_id not in UNNAMEABLE and bool(split_node_id(property_id).path)


def _labels_text(replays: Sequence[Replay]) -> str:
    counts: dict[str, int] = {}
    for replay in replays:
        name = replay.label
        if not Label.is_completed(replay.label) and replay.reason:
            name = f"{replay.label}({replay.reason})"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in counts.items())


def signal_reasons(
    base: Sequence[Replay], patch: Sequence[Replay], oracle: OracleChange | None
) -> tuple[str, ...]:
    """Why a property's screening replays call for more (empty: no signal)."""
    reasons: list[str] = []
    for side, replays in (("base", base), ("patch", patch)):
        # The project's own skip is no signal: replaying it N times only skips it again.
        not_passing = [
            replay for replay in replays if replay.label not in (Label.ASSERT_PASS, Label.SKIPPED)
        ]
        if not_passing:
            reasons.append(f"{side}: {_labels_text(not_passing)}")
    reasons.extend(f"calls {describe_change(change)}" for change in budget_changes(base, patch))
    if oracle is not None and oracle.changed:
        what = ", ".join(oracle.reason_texts) or "digests differ"
        reasons.append(f"oracle changed: {what}")
    return tuple(reasons)


@dataclass(frozen=True, kw_only=True)
class Screening:
    """What screening found: each property's signal (only those that have one)."""

    policy: ScreenPolicy
    signals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def more(self) -> int:
        """Replays per side of the second phase: N less the K a property already has."""
        return max(0, self.policy.replays - self.policy.screen)

    def replays_of(self, property_id: str) -> int:
        """The replays a property gets per side: K, or N (at least K) when it has signal."""
        if property_id in self.signals:
            return self.policy.screen + self.more
        return self.policy.screen

    def summary(self, property_ids: Sequence[str]) -> dict[str, Any]:
        """The report's ``screening``: the policy, how many were screened and replayed."""
        return {
            **self.policy.to_json(),
            "screened": len(property_ids),
            "replayed": sum(1 for property_id in property_ids if property_id in self.signals),
        }


def screen(
    policy: ScreenPolicy,
    screened: Labelled,
    oracle: Mapping[str, OracleChange],
    *,
    base: str,
    patch: str,
) -> Screening:
    """The signal of every property after the screening replays (``screened``: side ->
    property -> its K replays)."""
    signals: dict[str, tuple[str, ...]] = {}
    for property_id, base_replays in screened[base].items():
        if not replayable(property_id):
            continue
        reasons = signal_reasons(
            base_replays, screened[patch].get(property_id, ()), oracle.get(property_id)
        )
        if reasons:
            signals[property_id] = reasons
    return Screening(policy=policy, signals=signals)


def missing(replays: Sequence[Replay]) -> bool:
    """Did pytest find no such test on this side, in every replay?"""
    return bool(replays) and all(
        replay.label == Label.HARNESS_ERROR and replay.reason == "not_found" for replay in replays
    )


def in_suite_order(
    property_ids: Sequence[str], screened_sides: Sequence[Mapping[str, object]]
) -> tuple[str, ...]:
    """``property_ids`` in the order the screening sides reported them (each side's order
    in turn, for a property only one side has), any others after them as given. Pure."""
    wanted = set(property_ids)
    ordered: dict[str, None] = {}
    for side in screened_sides:
        ordered.update((p, None) for p in side if p in wanted)
    ordered.update((p, None) for p in property_ids)
    return tuple(ordered)


def replay_targets(
    ordered: Sequence[str], screened_side: Mapping[str, Sequence[Replay]]
) -> tuple[str, ...]:
    """What one side's pytest is handed for the second phase: the properties it has (a
    node id pytest cannot find stops the whole session; the side labels the others
    ``not_found`` without running them). When it has none, all of them: each is then
    reported not found, as it should be, and nothing else runs."""
    present = tuple(
        property_id for property_id in ordered if not missing(screened_side.get(property_id, ()))
    )
    return present or tuple(ordered)


def combine(
    screened: Labelled, replayed: Labelled, screening: Screening
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Side -> property -> its replays: the K screening replays, then, for a property with
    signal, the N - K of the second phase. Properties keep the screening order."""
    return extend(screened, replayed, screening.signals)


def extend(
    earlier: Labelled, later: Labelled, property_ids: Collection[str]
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Side -> property -> its replays: the earlier ones, then, for ``property_ids``, the
    later ones (a second phase, or a round of evidence). Properties keep their order."""
    combined: dict[str, dict[str, tuple[Replay, ...]]] = {}
    wanted = set(property_ids)
    for side, per_property in earlier.items():
        more = later.get(side, {})
        combined[side] = {
            property_id: (
                (*replays, *more.get(property_id, ())) if property_id in wanted else tuple(replays)
            )
            for property_id, replays in per_property.items()
        }
    return combined


# ---------------------------------------------------------------- raw replay files

RAW = "raw"
SECOND_PHASE = "replays"  # the second phase's raw files: raw/replays[/<batch>]/<side>/


@dataclass(frozen=True, kw_only=True)
class RawLink:
    """Replay files of one run-folder folder given to another:
    ``<source>/<side>/replay-<k>.json`` is also ``<target>/<side>/replay-<k + offset>.json``
    (only ``k <= upto`` when ``upto`` is set)."""

    source: str
    target: str
    offset: int = 0
    upto: int | None = None


def second_phase_dir(raw_dir: str, phase: str = SECOND_PHASE) -> str:
    """Where a second-phase folder that ``run_sides`` named ``raw`` or ``raw/<batch>``
    (relative to its own root) is in the run folder: ``raw/replays[/<batch>]`` (a round
    of evidence: ``raw/<phase>[/<batch>]``)."""
    rest = raw_dir.removeprefix(RAW)
    return f"{RAW}/{phase}{rest}"


def _folder_key(raw_dir: str, whole: str) -> str:
    """``raw/e1-b2`` -> ``e1-b2``; a phase's single folder -> ``whole``; a batch of a
    round of evidence, ``raw/round-1/e1-b2`` -> ``round-1-e1-b2`` (rounds never share a
    folder)."""
    parts = raw_dir.split("/")
    if len(parts) > 2 and parts[1] != SECOND_PHASE:
        return f"{parts[1]}-{parts[-1]}"
    return parts[-1] if len(parts) > 1 and parts[-1] != SECOND_PHASE else whole


def raw_layout(
    first: Mapping[str, str], second: Mapping[str, str], *, screen: int
) -> tuple[dict[str, str], tuple[RawLink, ...]]:
    """Each replayed property's raw folder after both phases, and the links that fill it.

    ``first`` and ``second`` give each property's folder in the run folder in each phase
    (``second`` only for the properties with signal). A property's replay k must be
    ``<raw_dir>/<side>/replay-<k>.json``: its K screening replays first, then the second
    phase's. When every replayed property of a screening folder went to one second-phase
    folder, that folder's files join the screening folder numbered after K (the usual
    case: one batch per phase, everything in ``raw``). Otherwise each (screening folder,
    second-phase folder) pair gets a folder of its own, ``raw/<first>+<second>``, with the
    K screening files and the later ones; files are never overwritten. Pure.
    """
    seconds_of: dict[str, set[str]] = {}
    for property_id, later in second.items():
        seconds_of.setdefault(first.get(property_id, RAW), set()).add(later)
    dirs: dict[str, str] = {}
    links: dict[tuple[str, str], RawLink] = {}
    for property_id, later in second.items():
        earlier = first.get(property_id, RAW)
        if len(seconds_of[earlier]) == 1:
            dirs[property_id] = earlier
            links[(later, earlier)] = RawLink(source=later, target=earlier, offset=screen)
            continue
        target = f"{RAW}/{_folder_key(earlier, 'screen')}+{_folder_key(later, SECOND_PHASE)}"
        dirs[property_id] = target
        links[(earlier, target)] = RawLink(source=earlier, target=target, upto=screen)
        links[(later, target)] = RawLink(source=later, target=target, offset=screen)
    return dirs, tuple(links[key] for key in sorted(links))
