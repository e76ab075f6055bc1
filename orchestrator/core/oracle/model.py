"""The oracle's values: slices, changes and their reasons. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchestrator.core.digest import digest

SLICE_VERSION = "oracle-slice/1"
NEW_ON_PATCH_HINT = "replay with --tests-from patch to ask whether it fails on base"
# A test on one side only though both sides had one revision's test files (--tests-from):
# the code under test, not the tests, made it.
SAME_TEST_FILES = "collected on one side only under the same test files"


@dataclass(frozen=True, kw_only=True)
class ProjectModules:
    """The other modules of one side's tree, for test classes whose bases are imported.

    ``files`` are the tree's paths (an import resolves as :mod:`orchestrator.core.imports`
    says); ``sources`` the modules read so far (path -> text, None: no such file). A path
    missing from ``sources`` is one the slice would read (:func:`inherited_modules`).
    """

    files: frozenset[str] = frozenset()
    sources: Mapping[str, str | bytes | None] = field(default_factory=dict)
    # The bases already resolved against these modules (the many tests of one class ask
    # the same question); never part of what the value is.
    resolved: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


NO_MODULES = ProjectModules()


class ReasonKind(StrEnum):
    """What changed in a property's oracle (the order is the order reasons are listed in)."""

    NEW_ON_PATCH = "new on patch"
    GONE_ON_PATCH = "gone on patch"
    WHOLE_FILE = "whole file"
    TEST_BODY = "test body"
    DOCTEST = "doctest"  # the docstring a doctest item runs: its examples are the oracle
    CLASS_SETUP = "class set-up"
    MODULE_SETUP = "module set-up"
    FIXTURE = "fixture"
    HELPER = "helper"
    CONFTEST = "conftest.py"


_KIND_ORDER = {kind: index for index, kind in enumerate(ReasonKind)}

PartKey = tuple[ReasonKind, str]


@dataclass(frozen=True, kw_only=True)
class ChangeReason:
    """One thing that differs between two slices: ``helper make_list``, ``test body``, ..."""

    kind: ReasonKind
    subject: str = ""
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.kind.value} {self.subject}" if self.subject else self.kind.value
        return f"{text}: {self.detail}" if self.detail else text

    def sort_key(self) -> tuple[int, str, str]:
        return _KIND_ORDER[self.kind], self.subject, self.detail


class SliceStatus(StrEnum):
    SLICED = "sliced"
    WHOLE_FILE = "whole_file"  # the module could not be sliced; its whole text is the oracle
    ABSENT = "absent"  # no such test on this side


@dataclass(frozen=True, kw_only=True)
class OracleSlice:
    """One property's oracle on one side.

    ``parts`` maps what each part is (``(HELPER, "make_list")``) to its position-free
    dumps in source order: the slice, or the whole file when ``status`` is WHOLE_FILE
    (``note`` says why). ``whole_file`` is always the whole-file form, which
    :func:`compare_slices` falls back to when the other side cannot be sliced.
    """

    property_id: str
    path: str
    status: SliceStatus
    parts: Mapping[PartKey, tuple[str, ...]] = field(default_factory=dict)
    whole_file: Mapping[PartKey, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""
    problem: str = ""  # the parser's message, when the module does not parse

    @property
    def digest(self) -> str | None:
        """``sha256:…`` of the slice (or of the whole file); None when the test is absent."""
        if self.status is SliceStatus.ABSENT:
            return None
        return parts_digest(self.parts)


@dataclass(frozen=True, kw_only=True)
class OracleChange:
    """A property's oracle on both sides: the digests that were compared and what differs.

    A digest is None on a side where the test does not exist. ``whole_file`` is true when
    one side could not be sliced and both were compared whole.
    """

    property_id: str
    base_digest: str | None
    patch_digest: str | None
    reasons: tuple[ChangeReason, ...] = ()
    whole_file: bool = False

    @property
    def changed(self) -> bool:
        return self.base_digest != self.patch_digest

    @property
    def reason_texts(self) -> tuple[str, ...]:
        return tuple(str(reason) for reason in self.reasons)


def parts_digest(parts: Mapping[PartKey, Sequence[str]]) -> str:
    """The digest of a slice's parts: canonical, whatever order they were built in. Pure."""
    rows = sorted([kind.value, subject, list(dumps)] for (kind, subject), dumps in parts.items())
    return digest({"oracle": SLICE_VERSION, "parts": rows})


# ---------------------------------------------------------------- the slice
