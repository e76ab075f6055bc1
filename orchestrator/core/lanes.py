"""The composed decision of lanes.md section 3: evidence in, one lane out.

``decide`` is total and pure over well-typed evidence (what ``parse_evidence``
builds): whatever ``Evidence`` it is given it returns a ``Decision`` (malformed
evidence is itself a lane, ``reject_malformed``). A value of the wrong type is a
programming error and raises; it never becomes a verdict. The rows are tried top to
bottom and the first match wins. Nothing here depends on the order of replays within
a side: every side is reduced to counts and sets first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from enum import StrEnum

from orchestrator.core.calls import budget_changes, describe_change
from orchestrator.core.oracle.model import SAME_TEST_FILES, ChangeReason, ReasonKind
from orchestrator.model import KNOWN_LABELS, Decision, Evidence, Label, Lane, LaneKind, Replay

# lanes.md row 1, in the order their codes are reported.
REQUIRED_FIELDS = (
    "base_rev",
    "patch_rev",
    "image_digest",
    "runner_id",
    "property_id",
    "fixture_digest",
    "seed",
    "command",
)


class SideState(StrEnum):
    """A side's N completed labels reduced to one state (lanes.md section 2)."""

    PASS = "P"
    FAIL = "F"
    MIXED = "M"


def _decision(lane: Lane, code: str, reasons: Iterable[str]) -> Decision:
    return Decision(
        lane=lane,
        code=code,
        blocking=lane.blocking,
        freeze_allowed=lane is Lane.FLAKE_QUEUE_ELIGIBLE,
        reasons=tuple(reasons),
    )


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    return isinstance(value, str) and not value.strip()


def _malformed(evidence: Evidence) -> list[tuple[str, str]]:
    """Row 1: every problem found, as (code, human reason), in a fixed order."""
    problems: list[tuple[str, str]] = []
    for name in REQUIRED_FIELDS:
        if _is_missing(getattr(evidence, name)):
            problems.append((f"missing_field:{name}", f"required field {name} is missing"))
    declared = evidence.replays
    if declared is None:
        problems.append(("missing_field:replays", "required field replays is missing"))
    elif declared < 1:
        problems.append(("replay_count", f"declared replays {declared} is not positive"))
    else:
        for side, replays in (("base", evidence.base), ("patch", evidence.patch)):
            if len(replays) != declared:
                problems.append(
                    (
                        "replay_count",
                        f"{side} has {len(replays)} replays, {declared} were declared",
                    )
                )
    unknown = sorted(
        {r.label for r in (*evidence.base, *evidence.patch) if r.label not in KNOWN_LABELS}
    )
    if unknown:
        problems.append(("unknown_label", f"unknown label(s): {', '.join(map(repr, unknown))}"))
    for attribute, code, what in (
        ("image_digest", "image_mismatch", "image digests"),
        ("runner_id", "runner_mismatch", "runner ids"),
    ):
        seen = _pins(evidence, attribute)
        if len(seen) > 1:
            problems.append((code, f"replays ran under different {what}: {', '.join(seen)}"))
    return problems


def _pins(evidence: Evidence, attribute: str) -> list[str]:
    """Distinct image digests (or runner ids) the evidence claims, top level and per replay."""
    values: set[str] = set()
    top = getattr(evidence, attribute)
    if not _is_missing(top):
        values.add(str(top))
    for replay in (*evidence.base, *evidence.patch):
        own = getattr(replay, attribute)
        if not _is_missing(own):
            values.add(str(own))
    return sorted(values)


def _infra(side: str, replays: Sequence[Replay]) -> str | None:
    counts = Counter(r.label for r in replays if Label.is_infra(r.label))
    if not counts:
        return None
    parts = []
    for label in (Label.TIMEOUT, Label.HARNESS_ERROR):
        if counts[label]:
            sub = sorted({r.reason for r in replays if r.label == label and r.reason})
            detail = f" ({', '.join(sub)})" if sub else ""
            parts.append(f"{counts[label]} {label.value}{detail}")
    return f"{side}: {', '.join(parts)} of {len(replays)} replays"


def ran(replays: Sequence[Replay]) -> tuple[Replay, ...]:
    """The replays that were not skipped: the ones a verdict and call counts come from."""
    return tuple(r for r in replays if r.label != Label.SKIPPED)


def skip_messages(replays: Sequence[Replay]) -> str:
    """The skipped replays' reasons, each once, in order (``no reason given`` for none)."""
    seen: dict[str, None] = {}
    for replay in replays:
        if replay.label == Label.SKIPPED:
            seen.setdefault(replay.message or "no reason given", None)
    return "; ".join(seen)


def _skipped(base: Sequence[Replay], patch: Sequence[Replay]) -> Decision | None:
    """Row 4a: a side on which the project skipped every replay (None: both sides ran).

    Skipped on both sides is the suite as it is: nothing to decide. Skipped on the patch
    only, the patch no longer runs the test: shown, not blocked (the suite's own CI is
    green too). Skipped on base only, the patch runs it: judged on the patch alone, so a
    failure there blocks as it would in the suite's own CI.
    """
    ran_base, ran_patch = ran(base), ran(patch)
    if ran_base and ran_patch:
        return None
    if not ran_base and not ran_patch:
        why = skip_messages((*base, *patch))
        return _decision(Lane.NO_FREEZE, "skipped", [f"skipped on both sides: {why}"])
    if not ran_patch:
        state = side_state(ran_base).value
        return _decision(
            Lane.NO_FREEZE,
            "skipped_on_patch",
            [
                f"skipped on the patch: {skip_messages(patch)}",
                f"base {state}: the patch no longer runs it",
            ],
        )
    state = side_state(ran_patch)
    skipped_on_base = f"skipped on base: {skip_messages(base)}"
    if state is SideState.PASS:
        return _decision(
            Lane.NO_FREEZE,
            "skipped_on_base",
            [skipped_on_base, "patch P: the patch runs it and it passes"],
        )
    failing = _format_ids(failing_assertions(ran_patch))
    return _decision(
        Lane.PROPERTY_REGRESSION,
        "fails_where_base_skips",
        [skipped_on_base, f"patch {state.value}: the patch runs it and it fails ({failing})"],
    )


def side_state(replays: Sequence[Replay]) -> SideState:
    """P, F or M for a side whose labels are all completed (and at least one)."""
    labels = {r.label for r in replays}
    if labels == {Label.ASSERT_PASS.value}:
        return SideState.PASS
    if labels == {Label.ASSERT_FAIL.value}:
        return SideState.FAIL
    return SideState.MIXED


def failing_assertions(replays: Sequence[Replay], *, by_key: bool = False) -> frozenset[str | None]:
    """The failing replays' assertion ids, or their position-free keys with ``by_key``."""
    return frozenset(
        r.assertion_key if by_key else r.assertion_id
        for r in replays
        if r.label == Label.ASSERT_FAIL
    )


def compare_by_key(*sides: Sequence[Replay]) -> bool:
    """Rows 10-12 compare assertion keys when every failing replay has one (the probe
    writes them), else ids (documents from other CI systems)."""
    failing = [r for replays in sides for r in replays if r.label == Label.ASSERT_FAIL]
    return bool(failing) and all(r.assertion_key for r in failing)


def oracle_moved(evidence: Evidence) -> tuple[str, ...]:
    """Row 2: why the property's oracle differs between the sides (empty: it does not).

    The slice digests decide when the evidence has them; ``oracle_changed`` still counts
    (documents from other CI systems carry only that flag).
    """
    base, patch = evidence.base_oracle_digest, evidence.patch_oracle_digest
    digests_differ = (base is not None or patch is not None) and base != patch
    if not (digests_differ or evidence.oracle_changed):
        return ()
    if evidence.oracle_reasons:
        return evidence.oracle_reasons
    if digests_differ:
        return (f"the oracle digest differs: base {base or 'absent'} vs patch {patch or 'absent'}",)
    return ("a property file or the fixture's locked oracle digest differs between the sides",)


# Row 2a: under one revision's test files (--tests-from), a test pytest collected on one
# side only was made by the code under test (a parametrization over the code's own data:
# its registry, its docstrings' line numbers), not by the pull request's tests.
_MADE_BY_CODE = {
    str(ChangeReason(kind=kind, detail=SAME_TEST_FILES)): kind
    for kind in (ReasonKind.NEW_ON_PATCH, ReasonKind.GONE_ON_PATCH)
}


def _made_by_code(evidence: Evidence, reasons: Sequence[str]) -> Decision | None:
    """Row 2a: a test on one side only, made by the code under test (None: another oracle
    change). It has nothing to be compared with, so the side that has it is judged alone,
    as row 4a judges a test the other side skips: on the patch, a pass is shown and a
    failure blocks; on base only, the patch no longer has it, shown."""
    if len(reasons) != 1 or reasons[0] not in _MADE_BY_CODE:
        return None
    why = f"{reasons[0]} (the code under test makes its id)"
    if _MADE_BY_CODE[reasons[0]] is ReasonKind.GONE_ON_PATCH:
        base = evidence.base
        shown = _infra("base", base) or (
            f"base {side_state(ran(base)).value}" if ran(base) else "base S"
        )
        return _decision(
            Lane.NO_FREEZE, "only_on_base", [why, f"{shown}: the patch no longer has it"]
        )
    patch = evidence.patch
    infra = _infra("patch", patch)
    if infra:
        labels = {r.label for r in patch}
        code = Label.TIMEOUT.value if Label.TIMEOUT in labels else Label.HARNESS_ERROR.value
        return _decision(Lane.INFRA_QUEUE, code, [why, infra])
    if not ran(patch):
        return _decision(
            Lane.NO_FREEZE, "skipped", [why, f"skipped on the patch: {skip_messages(patch)}"]
        )
    state = side_state(ran(patch))
    if state is SideState.PASS:
        return _decision(Lane.NO_FREEZE, "only_on_patch", [why, "patch P: it passes"])
    failing = _format_ids(failing_assertions(ran(patch)))
    return _decision(
        Lane.PROPERTY_REGRESSION,
        "fails_only_on_patch",
        [why, f"patch {state.value}: it fails on the patch ({failing})"],
    )


def _format_ids(ids: frozenset[str | None]) -> str:
    return ", ".join(sorted(str(i) for i in ids)) or "none"


def decide(evidence: Evidence) -> Decision:
    """The lane for one property's evidence (lanes.md section 3, first match wins); the
    decision says where the oracle came from when one revision's tests judged both sides."""
    decision = _decide(evidence)
    if evidence.tests_from is not None:
        return replace(decision, tests_from=evidence.tests_from)
    return decision


def _decide(evidence: Evidence) -> Decision:
    # Row 1: the evidence itself is unusable.
    problems = _malformed(evidence)
    if problems:
        return _decision(Lane.REJECT_MALFORMED, problems[0][0], (p[1] for p in problems))

    # Row 2: the oracle moved between the sides, so they are not comparable.
    oracle_reasons = oracle_moved(evidence)
    if oracle_reasons:
        made = _made_by_code(evidence, oracle_reasons)  # row 2a
        if made is not None:
            return made
        return _decision(Lane.REJECT_RUN, "oracle_changed", oracle_reasons)

    base, patch = evidence.base, evidence.patch

    # Row 3: a replay without a verdict belongs to the runner's owner, not the patch's.
    infra = [line for line in (_infra("base", base), _infra("patch", patch)) if line]
    if infra:
        labels = {r.label for r in (*base, *patch)}
        code = Label.TIMEOUT.value if Label.TIMEOUT in labels else Label.HARNESS_ERROR.value
        return _decision(Lane.INFRA_QUEUE, code, infra)

    # Row 4: a fixture whose shrink is not reproducible cannot be reasoned about.
    shrink = evidence.shrink
    if shrink is not None and (
        shrink.attempts < 2 or shrink.identical_minima != shrink.attempts or not shrink.stable
    ):
        return _decision(
            Lane.RERUN_SHRINK,
            "shrink_unstable",
            [
                f"shrink: {shrink.identical_minima} of {shrink.attempts} attempts gave the "
                "same minimal digest (need at least 2, all identical)"
            ],
        )

    # Row 4a: the project skipped the test on a side; skipped replays give no verdict and
    # no call counts, so the rows below see only the replays that ran.
    skipped = _skipped(base, patch)
    if skipped is not None:
        return skipped
    base, patch = ran(base), ran(patch)

    on_base, on_patch = side_state(base), side_state(patch)

    # Row 5: a moved call budget is a regression whatever the labels say (a retry that
    # hides a flake), except for a clean fix: base fails every replay, so its output never
    # matched, and a replay that fails stops early and calls less (row 9 decides it).
    clean_fix = on_base is SideState.FAIL and on_patch is SideState.PASS
    moved = () if clean_fix else budget_changes(base, patch)
    if moved:
        return _decision(
            Lane.PROPERTY_REGRESSION, "call_budget", (describe_change(c) for c in moved)
        )

    states = f"base {on_base.value}, patch {on_patch.value}"
    if on_base is SideState.PASS:
        if on_patch is SideState.FAIL:  # row 6
            return _decision(
                Lane.PROPERTY_REGRESSION,
                "assertion_regression",
                [f"{states}: fails only with the patch ({_format_ids(failing_assertions(patch))})"],
            )
        if on_patch is SideState.MIXED:  # row 7
            return _decision(
                Lane.PROPERTY_REGRESSION,
                "new_instability",
                [f"{states}: the patch made a passing property unstable"],
            )
        return _decision(  # row 8
            Lane.NO_FREEZE,
            "not_reproduced",
            [f"{states}: the failure did not reproduce on the fixture"],
        )
    if on_patch is SideState.PASS:  # row 9
        return _decision(
            Lane.FIX_CANDIDATE,
            "fix_candidate",
            [f"{states}: the patch passes where base failed; other properties still apply"],
        )
    by_key = compare_by_key(base, patch)
    base_ids, patch_ids = (failing_assertions(s, by_key=by_key) for s in (base, patch))
    if base_ids != patch_ids:  # row 10
        return _decision(
            Lane.DIFFERENT_BUG,
            "different_assertion",
            [f"{states}: base fails at {_format_ids(base_ids)}, patch at {_format_ids(patch_ids)}"],
        )
    patch_ids = failing_assertions(patch)  # the readable ids, for the reasons
    if on_patch is SideState.FAIL:  # row 11
        return _decision(
            Lane.BLOCK_PATCH,
            "uniform_failure",
            ["fails_on_base_too", f"{states}: every patch replay fails ({_format_ids(patch_ids)})"],
        )
    return _decision(  # row 12
        Lane.FLAKE_QUEUE_ELIGIBLE,
        "flake_queue_eligible",
        [f"{states}: the same assertion both passes and fails ({_format_ids(patch_ids)})"],
    )


# Exit statuses by how bad they are: 1 (blocking) beats 3 (undecided) beats 0, as the
# lane kinds declare them (model.LaneKind).
_EXIT_RANK = {kind.exit_status: kind.severity for kind in LaneKind}


def worst_exit_status(statuses: Sequence[int]) -> int | None:
    """The worst of several runs' exit statuses (an unknown one ranks as undecided);
    None when there is none."""
    if not statuses:
        return None
    return max(statuses, key=lambda status: _EXIT_RANK.get(status, LaneKind.UNDECIDED.severity))
