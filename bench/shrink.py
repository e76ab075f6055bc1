"""Shrinker figures: our shrinker next to textbook ddmin on the same properties.

Run: ``.venv/bin/python bench/shrink.py`` (prints a Markdown table; a minute or two).

Per case, both shrinkers run in this process on the same payload and the same
property. Both count distinct property calls (both memoise: ddmin's textbook
formulation caches test outcomes too) and both keep only candidates that fail
the same way (same exception type and line). The baseline is ddmin (Zeller and
Hildebrandt 2002) over the payload's leaf key-paths, followed by plain value
passes on its result: strings cut by binary search on length, integers moved
toward zero by binary search. "overhead" is wall time minus time spent inside
the property.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.core.digest import canonical_json
from orchestrator.core.shrink import leaves, outcome, replace_at, shrink

SIZES = (10, 30, 100, 300, 1000, 10000)


class Timed:
    """Wraps a property to add up the time spent inside it."""

    def __init__(self, prop: Callable[[Any], object]) -> None:
        self.prop = prop
        self.seconds = 0.0

    def __call__(self, payload: Any) -> object:
        start = time.perf_counter()
        try:
            return self.prop(payload)
        finally:
            self.seconds += time.perf_counter() - start


# --- the baseline -----------------------------------------------------------------------


class Baseline:
    def __init__(self, payload: Any, prop: Callable[[Any], object]) -> None:
        self.prop = prop
        self.memo: dict[bytes, Any] = {}
        self.target = outcome(prop, payload)
        self.memo[canonical_json(payload)] = self.target
        self.payload = payload

    def fails(self, candidate: Any) -> bool:
        key = canonical_json(candidate)
        if key not in self.memo:
            self.memo[key] = outcome(self.prop, candidate)
        return self.memo[key] == self.target

    @property
    def calls(self) -> int:
        return len(self.memo)

    def run(self) -> Any:
        paths = [path for path, _ in leaves(self.payload)]
        kept = ddmin(paths, lambda subset: self.fails(restrict(self.payload, set(subset))))
        current = restrict(self.payload, set(kept))
        for path, value in leaves(current):
            if isinstance(value, str) and value:
                current = self.bisect(current, path, len(value), lambda n, v=value: v[:n])
            elif isinstance(value, int) and not isinstance(value, bool) and value:
                sign = 1 if value > 0 else -1
                current = self.bisect(current, path, abs(value), lambda n, s=sign: s * n)
        return current

    def bisect(self, current: Any, path: Any, high: int, make: Callable[[int], Any]) -> Any:
        if self.fails(replace_at(current, path, make(0))):
            return replace_at(current, path, make(0))
        low = 0
        while low + 1 < high:
            middle = (low + high) // 2
            if self.fails(replace_at(current, path, make(middle))):
                high = middle
            else:
                low = middle
        return replace_at(current, path, make(high))


def restrict(payload: Any, kept: set[tuple[Any, ...]]) -> Any:
    """The payload with only the leaves whose paths are in ``kept``."""
    prefixes = {path[:i] for path in kept for i in range(len(path) + 1)}
    return _restrict(payload, prefixes, ())


def _restrict(payload: Any, prefixes: set[tuple[Any, ...]], path: tuple[Any, ...]) -> Any:
    if isinstance(payload, dict) and payload:
        return {
            key: _restrict(value, prefixes, (*path, key))
            for key, value in payload.items()
            if (*path, key) in prefixes
        }
    if isinstance(payload, list) and payload:
        return [
            _restrict(value, prefixes, (*path, i))
            for i, value in enumerate(payload)
            if (*path, i) in prefixes
        ]
    return payload


def ddmin(items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """Zeller's ddmin: test subsets, then complements, then refine the granularity."""
    n = 2
    while len(items) >= 2:
        size = len(items)
        chunks = [items[i * size // n : (i + 1) * size // n] for i in range(n)]
        for chunk in chunks:
            if chunk and fails(chunk):
                items, n = chunk, 2
                break
        else:
            for i in range(n):
                complement = [x for j, c in enumerate(chunks) if j != i for x in c]
                if complement and fails(complement):
                    items, n = complement, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(n * 2, len(items))
    return items


# --- cases ------------------------------------------------------------------------------


def noise(rng: random.Random) -> Any:
    return rng.choice(
        [rng.randint(-(10**6), 10**6), "".join(rng.choice("abcdef") for _ in range(12))]
    )


def flat_one(n: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    items = [(f"k{i}", noise(rng)) for i in range(n - 1)]
    items.insert(rng.randrange(n), ("limit", 9137))

    def prop(p: Any) -> None:
        assert p.get("limit", 0) < 500

    return dict(items), prop


def flat_two(n: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    items = [(f"k{i}", noise(rng)) for i in range(n - 2)]
    items.insert(rng.randrange(n - 1), ("user_id", 48213))
    items.insert(rng.randrange(n), ("role", "superuser-from-generator"))

    def prop(p: Any) -> None:
        if p["user_id"] >= 0:
            assert p["role"] in {"admin", "viewer"}

    return dict(items), prop


def nested(n: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    groups = max(2, int(n**0.5))
    per = max(1, n // groups)
    payload = {f"g{g}": {f"f{f}": noise(rng) for f in range(per)} for g in range(groups)}
    group, field = f"g{rng.randrange(groups)}", f"f{rng.randrange(per)}"
    payload[group][field] = "needle: a long planted string"

    def prop(p: Any) -> None:
        for fields in p.values():
            if isinstance(fields, dict):
                for value in fields.values():
                    assert not (isinstance(value, str) and value.startswith("needle"))

    return payload, prop


def deep(n: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    """Three levels of objects (about cube-root(n) children each), one planted integer."""
    width = max(2, round(n ** (1 / 3)))
    payload = {
        f"a{i}": {f"b{j}": {f"c{k}": noise(rng) for k in range(width)} for j in range(width)}
        for i in range(width)
    }
    path = [f"a{rng.randrange(width)}", f"b{rng.randrange(width)}", f"c{rng.randrange(width)}"]
    payload[path[0]][path[1]][path[2]] = 7_654_321

    def prop(p: Any) -> None:
        for middle in p.values():
            for inner in middle.values() if isinstance(middle, dict) else ():
                for value in inner.values() if isinstance(inner, dict) else ():
                    assert not (isinstance(value, int) and value > 1000)

    return payload, prop


def listed(n: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    count = max(2, n // 2)
    items = [{"sku": f"s{i}", "qty": rng.randint(0, 50)} for i in range(count)]
    first, second = rng.sample(range(count), 2)
    items[first]["qty"], items[second]["qty"] = -4821, -17

    def prop(p: Any) -> None:
        # Needs both planted quantities: -4821 alone is not enough.
        quantities = [item.get("qty", 0) for item in p["items"] if isinstance(item, dict)]
        assert sum(q for q in quantities if q < 0) > -4830

    return {"items": items, "owner": "bench"}, prop


def zig_zag(_: int, rng: random.Random) -> tuple[Any, Callable[[Any], object]]:
    items = [(f"noise_{i}", rng.randint(0, 10**6)) for i in range(60)]
    items.insert(23, ("a", 48213))
    items.insert(41, ("b", 48212))

    def prop(p: Any) -> None:
        assert abs(p["a"] - p["b"]) != 1

    return dict(items), prop


CASES: list[tuple[str, Callable[[int, random.Random], tuple[Any, Callable[[Any], object]]]]] = [
    ("flat, 1 field", flat_one),
    ("flat, 2 fields", flat_two),
    ("nested", nested),
    ("list of objects", listed),
    ("deep nested, 3 levels", deep),
]


def measure(name: str, n: int, payload: Any, prop: Callable[[Any], object]) -> dict[str, Any]:
    ours_prop = Timed(prop)
    start = time.perf_counter()
    ours = shrink(payload, ours_prop)
    ours_wall = time.perf_counter() - start

    base_prop = Timed(prop)
    start = time.perf_counter()
    baseline = Baseline(payload, base_prop)
    base_minimal = baseline.run()
    base_wall = time.perf_counter() - start
    return {
        "case": name,
        "keys": len(leaves(payload)),
        "ours_calls": ours.property_calls,
        "ours_ms": ours_wall * 1000,
        "ours_overhead_ms": (ours_wall - ours_prop.seconds) * 1000,
        "base_calls": baseline.calls,
        "base_ms": base_wall * 1000,
        "ours_minimal": canonical_json(ours.minimal).decode(),
        "base_minimal": canonical_json(base_minimal).decode(),
    }


def main() -> None:
    rows = []
    for name, make in CASES:
        for n in SIZES:
            payload, prop = make(n, random.Random(n))
            rows.append(measure(name, n, payload, prop))
            print(f"{name} {n}: done", file=sys.stderr)
    payload, prop = zig_zag(0, random.Random(0))
    rows.append(measure("zig-zag, a-b = 1", 62, payload, prop))

    print(
        "| case | leaves | ours: calls | ours: wall ms | ours: overhead ms | ddmin: calls "
        "| ddmin: wall ms | our minimum | ddmin minimum |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['keys']} | {r['ours_calls']} | {r['ours_ms']:.1f} "
            f"| {r['ours_overhead_ms']:.1f} | {r['base_calls']} | {r['base_ms']:.1f} "
            f"| `{shorten(r['ours_minimal'])}` | `{shorten(r['base_minimal'])}` |"
        )
    ours_total = sum(r["ours_calls"] for r in rows)
    base_total = sum(r["base_calls"] for r in rows)
    worse = [r["case"] + f" ({r['keys']})" for r in rows if r["ours_calls"] > r["base_calls"]]
    print()
    print(f"total property calls: ours {ours_total}, ddmin {base_total}")
    print(f"cases where ours used more calls than ddmin: {', '.join(worse) or 'none'}")


def shorten(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    main()
