"""A test module that imports on one side only, under ``--tests-from``: a verdict, not a gap.

With ``--tests-from`` both sides run the same test files, so a module that pytest cannot
import on one side and imports on the other fails there because of the code under test
(a fix's tests naming what only the fix adds, laid over base; a patch removing what a
test imports). That side's replays of the module's entry and of every test pytest found
in it on the other side are failures (``assert_fail``, reason ``does_not_import``, one
assertion key per module, pytest's collection error as message), and the module's entry
passes on the side where it imported (reason ``imports``). The composed decision then
reads them as any failure: base failing and the patch passing is a ``fix_candidate``, the
reverse a regression (docs/lanes.md, section 11), as SWE-bench's harness counts a test
module that does not import on the base revision as failing there.

Without ``--tests-from`` the test files differ between the sides and the oracle decides
(row 2); nothing here applies. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from orchestrator.model import Label, Replay

DOES_NOT_IMPORT = "does_not_import"
IMPORTS = "imports"
COLLECTION_ERROR = "collection_error"
NOT_FOUND = "not_found"

Labelled = Mapping[str, Mapping[str, tuple[Replay, ...]]]


def _failed_import(replays: tuple[Replay, ...]) -> bool:
    return bool(replays) and all(
        replay.label == Label.HARNESS_ERROR and replay.reason == COLLECTION_ERROR
        for replay in replays
    )


def _not_found(replays: tuple[Replay, ...]) -> bool:
    return bool(replays) and all(
        replay.label == Label.HARNESS_ERROR and replay.reason == NOT_FOUND for replay in replays
    )


def _failing(replays: tuple[Replay, ...], module: str, message: str | None) -> tuple[Replay, ...]:
    return tuple(
        replace(
            replay,
            label=Label.ASSERT_FAIL.value,
            reason=DOES_NOT_IMPORT,
            assertion_id=f"{module}:import",
            assertion_key=f"{module}:import",
            message=f"{module} does not import on this side: {message or 'collection error'}",
            calls={},
        )
        for replay in replays
    )


def _importing(replays: tuple[Replay, ...], module: str) -> tuple[Replay, ...]:
    return tuple(
        replace(
            replay,
            label=Label.ASSERT_PASS.value,
            reason=IMPORTS,
            assertion_id=None,
            assertion_key=None,
            message=f"{module} imports on this side",
        )
        for replay in replays
    )


def one_sided_imports(
    labelled: Labelled, *, sides: tuple[str, str]
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """``labelled`` (side -> property -> replays) with every module that does not import on
    one side only read as a failure there (see the module's docstring)."""
    result = {side: dict(labelled.get(side, {})) for side in sides}
    for side, other in (sides, sides[::-1]):
        here, there = result[side], result[other]
        for module, replays in labelled.get(side, {}).items():
            if "::" in module or not _failed_import(replays):
                continue
            elsewhere = there.get(module, ())
            if _failed_import(elsewhere):
                continue  # on both sides: nothing the code under test decides
            message = replays[0].message
            here[module] = _failing(replays, module, message)
            if _not_found(elsewhere):
                there[module] = _importing(elsewhere, module)
            prefix = f"{module}::"
            for property_id, found in there.items():
                if not property_id.startswith(prefix) or _not_found(found):
                    continue
                missing_here = here.get(property_id, ())
                # Labelled with its module's collection error, or not found at all.
                if _not_found(missing_here) or _failed_import(missing_here):
                    here[property_id] = _failing(missing_here, module, message)
    return result
