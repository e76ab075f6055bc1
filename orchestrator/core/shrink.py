"""A deterministic shrinker around one injected property.

The shrinker asks one question of each candidate: how does it fail? A **judge** (a
callable taking a JSON payload) answers with a :class:`FailureIdentity`, or ``None``
when the property holds. A candidate is kept only when it fails **the same way** as
the original: its identity equals the original's. A candidate that fails differently
explains some other failure and is refused. A judge that cannot answer (a test run
that timed out) raises, and the exception ends the shrink unchanged.

Two judges exist. A host-side property (:func:`outcome`): a callable that fails when
it raises an ``Exception`` or returns ``False``, identified by the exception type and
the line of the property where it surfaced (a ``False`` return is its own identity).
A test in its pinned container (``orchestrator.services.shrink``): the test's label
``assert_fail`` with its position-free assertion key (:func:`assertion_identity`).

Operations, in a fixed order, repeated until a whole round changes nothing:

1. delete blocks of children from the end of every object and array (top level
   first, then nested ones), sizing each block by probing all the remaining
   children, then a binary search (Hypothesis's shrinker grows and halves blocks
   in the same spirit), probing a single child first where needed ones are dense;
2. shorten each string (try empty, then binary search on the length of a prefix);
3. move *pairs* of integers toward zero by the same amount, the largest amount
   first (one of them reaches zero): two values tied by a relation such as
   ``|a - b| = 1`` would otherwise zig-zag down one step per call;
4. move each integer toward zero (try zero; when other integers are present, one
   step next, since a value tied to another often cannot move at all; then binary
   search on the magnitude).

When a round changes nothing, pairs are also tried one step down; any progress
starts another round.

The result is 1-minimal for the single-step operations: in the last round every
single child was tried for deletion, every string for one character shorter and
every integer for one step nearer zero, and none kept the failure. A memo keyed by
the canonical JSON of each candidate means the property is never called twice on
the same candidate. There is no randomness: the same payload and property give
the same minimum, byte for byte.
"""

from __future__ import annotations

import functools
import json
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, islice, pairwise
from typing import Any

from orchestrator.core.digest import canonical_json, digest
from orchestrator.errors import InputError, PropertyDoesNotFailError
from orchestrator.model import SHRINK_SCHEMA, Label, Replay, ShrinkSummary

Property = Callable[[Any], object]
PathKey = str | int
JsonPath = tuple[PathKey, ...]
Step = dict[str, Any]

# Above this many non-zero integers, pairs are only tried between neighbours.
_ALL_PAIRS_LIMIT = 16


@dataclass(frozen=True, kw_only=True)
class FailureIdentity:
    """How a property failed: exception type and failing line, or a ``False`` return."""

    kind: str
    location: str | None

    def describe(self) -> str:
        return self.kind if self.location is None else f"{self.kind} at {self.location}"


RETURNED_FALSE = FailureIdentity(kind="returned False", location=None)
ASSERT_FAIL = "assert_fail"

Judge = Callable[[Any], FailureIdentity | None]
"""How a candidate fails (``None``: the property holds); raising ends the shrink."""


def assertion_identity(assertion_key: str) -> FailureIdentity:
    """The identity of a test's failure: label ``assert_fail`` and its assertion key."""
    return FailureIdentity(kind=ASSERT_FAIL, location=assertion_key)


@dataclass(frozen=True, kw_only=True)
class NoVerdict:
    """A run of the test on a candidate that gave no verdict (``timeout`` or
    ``harness_error``): never the same failure, and no reason to refuse the candidate
    either, so the shrink stops."""

    label: str
    reason: str | None
    message: str | None

    def describe(self) -> str:
        what = self.label if self.reason is None else f"{self.label} ({self.reason})"
        detail = (self.message or "").strip().splitlines()
        return f"{what}: {detail[0]}" if detail else what


def candidate_verdict(
    replay: Replay, *, skipped: bool = False
) -> FailureIdentity | NoVerdict | None:
    """What one run of the test on a candidate tells the shrinker. Pure.

    ``assert_pass`` holds (``None``), and so does a skip: the test said the candidate is
    outside what it checks. ``assert_fail`` fails with :func:`assertion_identity` of its
    assertion key (its assertion id when the probe gave no key). Anything else is a
    :class:`NoVerdict`.
    """
    if skipped or replay.label in (Label.ASSERT_PASS, Label.SKIPPED):
        return None
    if replay.label == Label.ASSERT_FAIL:
        return assertion_identity(replay.assertion_key or replay.assertion_id or "")
    return NoVerdict(label=replay.label, reason=replay.reason, message=replay.message)


@dataclass(frozen=True, kw_only=True)
class ShrinkTarget:
    """What a shrink ran against: a host-side property, or a test at a revision in an
    image with a seed (the pins that make its minimum evidence)."""

    property: str | None = None  # MODULE:FUNCTION (host-side)
    test: str | None = None  # the pytest node id (in a container)
    repo: str | None = None
    rev: str | None = None  # full SHA
    image_id: str | None = None
    image_ref: str | None = None
    seed: int | None = None
    timeout_s: float | None = None
    tests_from: str | None = None  # full SHA whose test files were laid over the tree

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "test": self.test,
            "repo": self.repo,
            "rev": self.rev,
            "image_id": self.image_id,
            "image_ref": self.image_ref,
            "seed": self.seed,
            "timeout_s": self.timeout_s,
            "tests_from": self.tests_from,
        }


@dataclass(frozen=True, kw_only=True)
class ShrinkResult:
    minimal: Any
    minimal_digest: str
    origin_digest: str
    shrink_path: tuple[Step, ...]
    property_calls: int
    failure: FailureIdentity


@dataclass(frozen=True, kw_only=True)
class ShrinkReport:
    """A shrink repeated ``attempts`` times; ``stable`` when every minimum is identical."""

    minimal: Any
    minimal_digest: str
    origin: Any  # the unshrunk payload: kept so a freeze can store the wide bytes too
    origin_digest: str
    shrink_path: tuple[Step, ...]
    property_calls: int  # of one shrink (every attempt starts with an empty memo)
    attempts: int
    identical_minima: int
    stable: bool
    failure: FailureIdentity
    target: ShrinkTarget = ShrinkTarget()
    # Each attempt's minimal digest and property calls, in order.
    minima: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SHRINK_SCHEMA,
            "minimal": self.minimal,
            "minimal_digest": self.minimal_digest,
            "origin": self.origin,
            "origin_digest": self.origin_digest,
            "shrink_path": [dict(step) for step in self.shrink_path],
            "property_calls": self.property_calls,
            "attempts": self.attempts,
            "identical_minima": self.identical_minima,
            "stable": self.stable,
            **self.target.to_json(),
            "failure": self.failure.describe(),
            "assertion_key": self.failure.location if self.failure.kind == ASSERT_FAIL else None,
            "minima": [
                {"minimal_digest": minimal_digest, "property_calls": calls}
                for minimal_digest, calls in self.minima
            ],
        }

    def summary(self) -> ShrinkSummary:
        return ShrinkSummary(
            attempts=self.attempts,
            identical_minima=self.identical_minima,
            stable=self.stable,
            minimal_digest=self.minimal_digest,
            origin_digest=self.origin_digest,
            shrink_path=self.shrink_path,
            test=self.target.test,
            rev=self.target.rev,
            image_id=self.target.image_id,
            seed=self.target.seed,
        )


def _property_code(prop: Property) -> Any:
    target: Any = prop
    while hasattr(target, "func"):  # functools.partial
        target = target.func
    code = getattr(target, "__code__", None)
    if code is None and callable(target):
        code = getattr(type(target).__call__, "__code__", None)
    return code


def failure_identity(prop: Property, error: BaseException) -> FailureIdentity:
    """Exception type plus the line of the property where it surfaced."""
    kind = f"{type(error).__module__}.{type(error).__qualname__}"
    code = _property_code(prop)
    frames = [(frame, line) for frame, line in traceback.walk_tb(error.__traceback__)]
    own = [(f, line) for f, line in frames if f.f_code.co_filename != __file__]
    chosen = [(f, line) for f, line in own if f.f_code is code]
    picked = chosen[-1] if chosen else (own[-1] if own else None)
    if picked is None:
        return FailureIdentity(kind=kind, location=None)
    frame, line = picked
    return FailureIdentity(kind=kind, location=f"{frame.f_code.co_filename}:{line}")


def outcome(prop: Property, payload: Any) -> FailureIdentity | None:
    """Run the property once: ``None`` when it holds, else how it failed."""
    try:
        result = prop(payload)
    except Exception as error:
        return failure_identity(prop, error)
    return RETURNED_FALSE if result is False else None


# --- paths into JSON values -------------------------------------------------------------


def get_at(root: Any, path: Sequence[PathKey]) -> Any:
    node = root
    for key in path:
        node = node[key]
    return node


def replace_at(root: Any, path: Sequence[PathKey], value: Any) -> Any:
    """A new root with ``value`` at ``path``; only the containers on the path are copied."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(root, dict):
        copy_dict = dict(root)
        copy_dict[head] = replace_at(root[head], rest, value)
        return copy_dict
    copy_list = list(root)
    assert isinstance(head, int)
    copy_list[head] = replace_at(root[head], rest, value)
    return copy_list


def _children(container: Any) -> list[PathKey]:
    if isinstance(container, dict):
        return list(container.keys())
    return list(range(len(container)))


def _without(container: Any, start: int, end: int) -> Any:
    """The container without its children at positions ``start`` .. ``end - 1``."""
    if isinstance(container, dict):
        kept = dict(islice(container.items(), start))
        kept.update(islice(container.items(), end, None))
        return kept
    return container[:start] + container[end:]


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def leaves(root: Any, path: JsonPath = ()) -> list[tuple[JsonPath, Any]]:
    """Every scalar with its path, in document order."""
    if isinstance(root, dict):
        return [pair for key, value in root.items() for pair in leaves(value, (*path, key))]
    if isinstance(root, list):
        return [pair for i, value in enumerate(root) for pair in leaves(value, (*path, i))]
    return [(path, root)]


def apply_step(payload: Any, step: Mapping[str, Any]) -> Any:
    """Replay one shrink-path step on a payload (to rebuild a minimum from its origin)."""
    op, path = step["op"], list(step["path"])
    if op in ("drop_key", "drop_item"):
        parent = get_at(payload, path[:-1])
        if isinstance(parent, dict):
            new_parent: Any = {k: v for k, v in parent.items() if k != path[-1]}
        else:
            new_parent = parent[: path[-1]] + parent[path[-1] + 1 :]
        return replace_at(payload, path[:-1], new_parent)
    if op == "shorten_string":
        return replace_at(payload, path, get_at(payload, path)[: step["length"]])
    if op == "move_integer":
        return replace_at(payload, path, step["to"])
    raise InputError(f"unknown shrink step {op!r}")


def replay_shrink_path(origin: Any, steps: Sequence[Mapping[str, Any]]) -> Any:
    payload = origin
    for step in steps:
        payload = apply_step(payload, step)
    return payload


# --- the shrinker -------------------------------------------------------------------


class _Shrinker:
    def __init__(self, payload: Any, judge: Judge) -> None:
        self.judge = judge
        self.memo: dict[bytes, FailureIdentity | None] = {}
        self.calls = 0
        # A private copy: the caller's payload is never touched.
        self.current: Any = json.loads(json.dumps(payload, ensure_ascii=False))
        self.steps: list[Step] = []
        target = self._outcome(self.current)
        if target is None:
            raise PropertyDoesNotFailError(
                "the property holds on this fixture; there is no failure to shrink"
            )
        self.target: FailureIdentity = target

    def _outcome(self, candidate: Any) -> FailureIdentity | None:
        key = canonical_json(candidate)
        if key not in self.memo:
            self.calls += 1
            # The judge gets its own copy, so it cannot alter our candidates.
            self.memo[key] = self.judge(json.loads(key))
        return self.memo[key]

    def _known_refused(self, candidate: Any) -> bool:
        """Already tried and refused (a memo lookup, never a property call)."""
        key = canonical_json(candidate)
        return key in self.memo and self.memo[key] != self.target

    def _keep(self, candidate: Any, steps: list[Step]) -> bool:
        """Accept ``candidate`` when it fails the same way as the original."""
        if self._outcome(candidate) != self.target:
            return False
        self.current = candidate
        self.steps.extend(steps)
        return True

    def run(self) -> ShrinkResult:
        while True:
            changed = self._delete_pass()
            changed = self._string_pass() or changed
            # Pairs before single integers: moving one value of a tied pair at a
            # time zig-zags down by one step per call.
            changed = self._pair_pass(exhaustive=False) or changed
            changed = self._integer_pass() or changed
            if changed:
                continue
            if not self._pair_pass(exhaustive=True):
                break
        return ShrinkResult(
            minimal=self.current,
            minimal_digest=digest(self.current),
            origin_digest="",  # filled in by ``shrink``
            shrink_path=tuple(self.steps),
            property_calls=self.calls,
            failure=self.target,
        )

    # -- deletion --

    def _delete_pass(self) -> bool:
        return self._delete_within(())

    def _delete_within(self, path: JsonPath) -> bool:
        """Delete blocks in the container at ``path``, then inside its children, last first."""
        if not _is_container(get_at(self.current, path)):
            return False
        changed = self._delete_blocks(path)
        container = get_at(self.current, path)
        for key in reversed(_children(container)):
            if _is_container(container[key]):
                changed = self._delete_within((*path, key)) or changed
        return changed

    def _delete_blocks(self, path: JsonPath) -> bool:
        changed = False
        dense = False  # the last child tried here turned out to be needed
        position = len(_children(get_at(self.current, path))) - 1
        while position >= 0:
            base = self.current
            container = get_at(base, path)
            end = position + 1

            def candidate(
                size: int, base: Any = base, container: Any = container, end: int = end
            ) -> Any:
                return replace_at(base, path, _without(container, end - size, end))

            def fails_without(size: int, candidate: Callable[[int], Any] = candidate) -> bool:
                return self._outcome(candidate(size)) == self.target

            if self._known_refused(candidate(1)):
                # A block search that just stopped here already proved this child needed.
                dense = True
                position -= 1
                continue
            at_end = end == len(_children(container))
            size = _largest_block(fails_without, end, one_first=dense, probe_all=not at_end)
            dense = size == 0
            if size == 0:
                position -= 1
                continue
            keys = _children(container)
            op = "drop_key" if isinstance(container, dict) else "drop_item"
            # Steps from the end so that replaying them one by one keeps indices valid.
            steps = [
                {"op": op, "path": [*path, keys[i]]} for i in range(end - 1, end - size - 1, -1)
            ]
            self._keep(candidate(size), steps)
            changed = True
            position -= size
        return changed

    # -- values --

    def _string_pass(self) -> bool:
        changed = False
        for path, value in reversed(leaves(self.current)):
            if isinstance(value, str) and value:
                changed = self._shorten(path, value) or changed
        return changed

    def _shorten(self, path: JsonPath, text: str) -> bool:
        def keep(length: int) -> bool:
            candidate = replace_at(self.current, path, text[:length])
            step = {"op": "shorten_string", "path": list(path), "length": length}
            return self._keep(candidate, [step])

        if keep(0):
            return True
        if self._known_refused(replace_at(self.current, path, text[:-1])):
            return False  # already 1-minimal here: a search would only repeat itself
        low, high = 0, len(text)  # text[:low] refused, text[:high] fails the same way
        changed = False
        while low + 1 < high:
            middle = (low + high) // 2
            if keep(middle):
                high, changed = middle, True
            else:
                low = middle
        return changed

    def _integer_pass(self) -> bool:
        changed = False
        for path, value in reversed(leaves(self.current)):
            if _is_integer(value) and value != 0:
                others = sum(1 for _, v in leaves(self.current) if _is_integer(v) and v != 0)
                changed = self._move_toward_zero(path, value, step_first=others > 1) or changed
        return changed

    def _move_toward_zero(self, path: JsonPath, value: int, *, step_first: bool) -> bool:
        sign = 1 if value > 0 else -1

        def keep(magnitude: int) -> bool:
            candidate = replace_at(self.current, path, sign * magnitude)
            step = {"op": "move_integer", "path": list(path), "to": sign * magnitude}
            return self._keep(candidate, [step])

        if keep(0):
            return True
        if self._known_refused(replace_at(self.current, path, value - sign)):
            return False  # already 1-minimal here: a search would only repeat itself
        low, high, changed = 0, abs(value), False
        if step_first:
            # With other integers about, a value held by a relation with one of them
            # (a sum, a difference) often cannot move at all: one call settles that
            # where a binary search spends about log2(|value|), and the refusal is
            # the proof of 1-minimality the last round needs anyway.
            if not keep(abs(value) - 1):
                return False
            high, changed = abs(value) - 1, True
        while low + 1 < high:
            middle = (low + high) // 2
            if keep(middle):
                high, changed = middle, True
            else:
                low = middle
        return changed

    def _pair_pass(self, *, exhaustive: bool) -> bool:
        """Move two integers toward zero by the same amount.

        Each round tries the largest amount (one of the two reaches zero); once the
        single-value passes are stuck, a step of one is tried too.
        """
        integers = [p for p, v in leaves(self.current) if _is_integer(v) and v != 0]
        if len(integers) <= _ALL_PAIRS_LIMIT:
            pairs = list(combinations(integers, 2))
        else:
            pairs = list(pairwise(integers))
        for first, second in pairs:
            a, b = get_at(self.current, first), get_at(self.current, second)
            most = min(abs(a), abs(b))
            if self._move_pair(first, a, second, b, most):
                return True
            if exhaustive and most > 1 and self._move_pair(first, a, second, b, 1):
                return True
        return False

    def _move_pair(self, first: JsonPath, a: int, second: JsonPath, b: int, amount: int) -> bool:
        new_a = a - amount if a > 0 else a + amount
        new_b = b - amount if b > 0 else b + amount
        candidate = replace_at(replace_at(self.current, first, new_a), second, new_b)
        steps = [
            {"op": "move_integer", "path": list(first), "to": new_a},
            {"op": "move_integer", "path": list(second), "to": new_b},
        ]
        return self._keep(candidate, steps)


def _largest_block(
    fails_without: Callable[[int], bool], limit: int, *, one_first: bool, probe_all: bool
) -> int:
    """The largest block size in ``0..limit`` whose deletion keeps the failure.

    All of it first (one call when the rest is noise; skipped at the end of a
    container, where deleting everything rarely keeps a failure). Next to a child
    found needed, needed children are probably clustered, so one child is probed
    next. Then a binary search. A search that stops on a needed child leaves that
    child's single deletion in the memo, so confirming it costs nothing.
    """
    if limit == 1:
        return 1 if fails_without(1) else 0
    if not probe_all:
        high = limit + 1  # nothing known about ``limit`` itself: search all sizes
    elif fails_without(limit):
        return limit
    else:
        high = limit
    low = 0
    if one_first:
        if not fails_without(1):
            return 0
        low = 1
    while low + 1 < high:
        middle = (low + high) // 2
        if fails_without(middle):
            low = middle
        else:
            high = middle
    return low


def host_judge(prop: Property) -> Judge:
    """The judge of a host-side property: :func:`outcome` of each candidate."""
    return functools.partial(outcome, prop)


def shrink(payload: Any, prop: Property) -> ShrinkResult:
    """The minimal payload that still fails the same way as ``payload``.

    Raises ``PropertyDoesNotFailError`` when the property holds on ``payload``.
    """
    return shrink_with(payload, host_judge(prop))


def shrink_with(payload: Any, judge: Judge) -> ShrinkResult:
    """:func:`shrink` with any judge; what the judge raises ends the shrink unchanged."""
    shrinker = _Shrinker(payload, judge)
    result = shrinker.run()
    return ShrinkResult(
        minimal=result.minimal,
        minimal_digest=result.minimal_digest,
        origin_digest=digest(payload),
        shrink_path=result.shrink_path,
        property_calls=result.property_calls,
        failure=result.failure,
    )


def shrink_report(payload: Any, prop: Property, attempts: int = 2) -> ShrinkReport:
    """Shrink ``attempts`` times from scratch; stable when all minima share one digest."""
    return shrink_report_with(payload, lambda attempt: host_judge(prop), attempts=attempts)


def shrink_report_with(
    payload: Any,
    judge_for: Callable[[int], Judge],
    *,
    attempts: int = 2,
    target: ShrinkTarget | None = None,
) -> ShrinkReport:
    """:func:`shrink_report` with a judge per attempt (``judge_for(1)``, ``judge_for(2)``,
    ...). Every attempt starts from ``payload`` with an empty memo: no attempt is fed by
    another's answers, so the stability it reports is measured, not assumed."""
    if attempts < 1:
        raise InputError(f"attempts must be at least 1, got {attempts}")
    results = [shrink_with(payload, judge_for(attempt)) for attempt in range(1, attempts + 1)]
    first = results[0]
    identical = sum(1 for r in results if r.minimal_digest == first.minimal_digest)
    return ShrinkReport(
        minimal=first.minimal,
        minimal_digest=first.minimal_digest,
        origin=payload,
        origin_digest=first.origin_digest,
        shrink_path=first.shrink_path,
        property_calls=first.property_calls,
        attempts=attempts,
        identical_minima=identical,
        stable=attempts >= 2 and identical == attempts,
        failure=first.failure,
        target=target or ShrinkTarget(),
        minima=tuple((result.minimal_digest, result.property_calls) for result in results),
    )
