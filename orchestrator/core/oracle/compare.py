"""Two sides' slices compared: the digests and the reasons they differ. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.core.oracle.model import (
    NEW_ON_PATCH_HINT,
    NO_MODULES,
    SAME_TEST_FILES,
    ChangeReason,
    OracleChange,
    OracleSlice,
    PartKey,
    ProjectModules,
    ReasonKind,
    SliceStatus,
    parts_digest,
)
from orchestrator.core.oracle.slicer import oracle_slice

# Reasons named without their part's subject (one line however many classes changed).
_UNNAMED = frozenset({ReasonKind.TEST_BODY, ReasonKind.CLASS_SETUP, ReasonKind.MODULE_SETUP})


def compare_slices(base: OracleSlice, patch: OracleSlice) -> OracleChange:
    """What differs between a property's oracle on base and on patch. Pure.

    A side that cannot be sliced makes both sides compared whole (the reason says so).
    """
    property_id = patch.property_id
    if base.status is SliceStatus.ABSENT or patch.status is SliceStatus.ABSENT:
        reasons: tuple[ChangeReason, ...] = ()
        if base.status is SliceStatus.ABSENT and patch.status is not SliceStatus.ABSENT:
            reasons = (ChangeReason(kind=ReasonKind.NEW_ON_PATCH, detail=NEW_ON_PATCH_HINT),)
        elif patch.status is SliceStatus.ABSENT and base.status is not SliceStatus.ABSENT:
            reasons = (ChangeReason(kind=ReasonKind.GONE_ON_PATCH),)
        return OracleChange(
            property_id=property_id,
            base_digest=base.digest,
            patch_digest=patch.digest,
            reasons=reasons,
        )
    whole = SliceStatus.WHOLE_FILE in (base.status, patch.status)
    before, after = (base.whole_file, patch.whole_file) if whole else (base.parts, patch.parts)
    if base is patch:  # one slice for both sides (the same files): one digest, no change
        same = parts_digest(before)
        return OracleChange(
            property_id=property_id, base_digest=same, patch_digest=same, whole_file=whole
        )
    detail = _whole_file_detail(base, patch)
    return OracleChange(
        property_id=property_id,
        base_digest=parts_digest(before),
        patch_digest=parts_digest(after),
        reasons=_differences(before, after, whole_detail=detail),
        whole_file=whole,
    )


UnchangedItem = tuple[str, str | bytes | None, Mapping[str, str | bytes | None], ProjectModules]


def unchanged_oracle(item: UnchangedItem) -> OracleChange:
    """The oracle of a property whose files are the same bytes on both sides: one slice
    serves both, so both digests are its digest and nothing changed. ``item`` is
    ``(property id, module source, conftest sources, the side's other modules)``. Pure."""
    property_id, source, conftests, modules = item
    same = oracle_slice(source, conftests, property_id, modules)
    return compare_slices(same, same)


def unchanged_oracles(items: Sequence[UnchangedItem]) -> list[OracleChange]:
    """:func:`unchanged_oracle` of each item (a chunk a helper process slices). Pure."""
    return [unchanged_oracle(item) for item in items]


def _whole_file_detail(base: OracleSlice, patch: OracleSlice) -> str:
    """Why the sides were compared whole: ``does not parse on patch (invalid syntax, line 4)``."""
    if base.note and (base.note, base.problem) == (patch.note, patch.problem):
        sides = [("both sides", base)]
    else:
        sides = [(name, side) for name, side in (("base", base), ("patch", patch)) if side.note]
    return "; ".join(
        f"{side.note} on {name}" + (f" ({side.problem})" if side.problem else "")
        for name, side in sides
    )


def compare_sources(
    base: tuple[str | bytes | None, Mapping[str, str | bytes | None]],
    patch: tuple[str | bytes | None, Mapping[str, str | bytes | None]],
    property_id: str,
    modules: tuple[ProjectModules, ProjectModules] = (NO_MODULES, NO_MODULES),
) -> OracleChange:
    """:func:`compare_slices` of the slices of ``(module source, conftests)`` on each side
    (``modules``: each side's other modules)."""
    return compare_slices(
        oracle_slice(base[0], base[1], property_id, modules[0]),
        oracle_slice(patch[0], patch[1], property_id, modules[1]),
    )


def collected_on_one_side(
    change: OracleChange, *, on_base: bool, on_patch: bool, tests_from: str | None = None
) -> OracleChange:
    """The oracle as collection saw it: a test pytest collected on one side only exists on
    that side only, whatever its source seemed to say (a base class the source could not
    follow), so it has no digest on the other side. Pure."""
    if on_base == on_patch:
        return change
    if on_patch:
        detail = SAME_TEST_FILES if tests_from else NEW_ON_PATCH_HINT
        reason = ChangeReason(kind=ReasonKind.NEW_ON_PATCH, detail=detail)
        return OracleChange(
            property_id=change.property_id,
            base_digest=None,
            patch_digest=change.patch_digest or change.base_digest,
            reasons=(reason,),
        )
    return OracleChange(
        property_id=change.property_id,
        base_digest=change.base_digest or change.patch_digest,
        patch_digest=None,
        reasons=(
            ChangeReason(
                kind=ReasonKind.GONE_ON_PATCH, detail=SAME_TEST_FILES if tests_from else ""
            ),
        ),
    )


def _differences(
    before: Mapping[PartKey, Sequence[str]],
    after: Mapping[PartKey, Sequence[str]],
    *,
    whole_detail: str,
) -> tuple[ChangeReason, ...]:
    reasons: dict[str, ChangeReason] = {}
    for key in set(before) | set(after):
        if before.get(key) == after.get(key):
            continue
        kind, subject = key
        if kind in _UNNAMED:
            subject = ""
        reason = ChangeReason(
            kind=kind,
            subject=subject,
            detail=whole_detail if kind is ReasonKind.WHOLE_FILE else "",
        )
        reasons[str(reason)] = reason
    return tuple(sorted(reasons.values(), key=ChangeReason.sort_key))
