"""A probe result's test entries held in little memory. Pure.

A replay of a whole suite hands back one entry per test (``replay-probe/1``: nodeid,
label, assertion_id, assertion_key, message, calls, duration_ms, reason), and the host
holds both sides' results until it has labelled them: as dicts, about 1 KB a test. Parsed
with :func:`compact_objects` as the ``object_pairs_hook`` of ``json.loads``, an entry with
exactly the probe's eight keys becomes a :class:`TestEntry` (a read-only mapping of the same
keys and values, a fifth of the size); an object of call counts is one shared value for
all the entries that show the same counts; a label is one string for all. Anything else
(an entry with another key, such as ``read_only``, a skipped entry, the document itself)
stays a ``dict``, as ``json.loads`` makes it. The values are exactly those ``json.loads``
gives, and a duplicated key keeps its last value, as there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

# The probe's keys of a test entry, in the order it writes them (sorted).
ENTRY_KEYS: Final = (
    "assertion_id",
    "assertion_key",
    "calls",
    "duration_ms",
    "label",
    "message",
    "nodeid",
    "reason",
)
_SLOT_OF: Final = {key: index for index, key in enumerate(ENTRY_KEYS)}
_SHARED_MAX: Final = 4096  # distinct shared values kept per document (a forged one: more)


class TestEntry(Mapping[str, Any]):
    """One test's entry of a probe result, read-only, with the probe's eight keys."""

    __slots__ = ("_values",)
    __test__ = False  # not a pytest test class, whatever the name says

    def __init__(self, values: tuple[Any, ...]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        index = _SLOT_OF.get(key)
        if index is None:
            raise KeyError(key)
        return self._values[index]

    def get(self, key: str, default: Any = None) -> Any:
        index = _SLOT_OF.get(key)
        return default if index is None else self._values[index]

    def __contains__(self, key: object) -> bool:
        return key in _SLOT_OF

    def __iter__(self) -> Iterator[str]:
        return iter(ENTRY_KEYS)

    def __len__(self) -> int:
        return len(ENTRY_KEYS)

    def __repr__(self) -> str:
        return f"TestEntry({dict(self)!r})"


def compact_objects() -> Callable[[list[tuple[str, Any]]], Any]:
    """An ``object_pairs_hook`` for one document (its shared values live as long as it)."""
    shared: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    strings: dict[str, str] = {}

    def hook(pairs: list[tuple[str, Any]]) -> Any:
        if len(pairs) == len(ENTRY_KEYS) and all(
            pair[0] == key for pair, key in zip(pairs, ENTRY_KEYS, strict=True)
        ):
            values = [value for _, value in pairs]
            label = values[4]
            if isinstance(label, str) and len(strings) < _SHARED_MAX:
                values[4] = strings.setdefault(label, label)
            return TestEntry(tuple(values))
        if pairs and all(type(value) is int for _, value in pairs):  # call counts
            key = tuple(pairs)
            found = shared.get(key)
            if found is None:
                found = dict(pairs)
                if len(shared) < _SHARED_MAX:
                    shared[key] = found
            return found
        return dict(pairs)

    return hook
