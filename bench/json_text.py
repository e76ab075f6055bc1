"""The run folder's JSON writer (`core/json_text.indented`) against `json.dumps`.

Documents shaped like a whole suite's run folder: 2,000 evidence documents (two sides,
five replays each, call counts, digests) and one summary with 2,000 decision entries. Each
is encoded both ways, alternately, and the median of the rounds is printed, with a check
that the texts are the same.

    .venv/bin/python bench/json_text.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.core.json_text import indented  # noqa: E402


def replay(index: int, side: str) -> dict[str, Any]:
    return {
        "label": "assert_pass" if index % 7 else "assert_fail",
        "assertion_id": None if index % 7 else f"sha256:{index:064x}",
        "calls": {
            "http": 0,
            "open": index % 3,
            "sleep": 0,
            "socket": 0,
            "sqlite": 0,
            "subprocess": 0,
        },
        "duration_ms": round(0.1 + index / 997, 3),
        "message": None if index % 7 else f"assert {index} == {index + 1} on {side} ✓",
        "skipped": [],
    }


def evidence(index: int) -> dict[str, Any]:
    return {
        "schema": "evidence/1",
        "property_id": f"tests/test_mod_{index // 50:02d}.py::test_case_{index}",
        "sides": {
            side: {"rev": f"{index:040x}", "replays": [replay(index + k, side) for k in range(5)]}
            for side in ("base", "patch")
        },
        "oracle": {
            "base": f"sha256:{index:064x}",
            "patch": f"sha256:{index:064x}",
            "changed": False,
            "reasons": [],
        },
    }


def summary(count: int) -> dict[str, Any]:
    return {
        "schema": "replay-report/1",
        "decisions": [
            {
                "index": n,
                "property_id": evidence(n)["property_id"],
                "lane": "non_blocking",
                "code": "stable_pass",
                "calls": {"base": [[0, 1]], "patch": [[0, 1]]},
                "flags": {"flaky": False, "timeout": False},
                "notes": [],
            }
            for n in range(count)
        ],
        "exit_status": 0,
        "skipped": [],
    }


def timed(function: Any, documents: list[Any]) -> float:
    started = perf_counter()
    for document in documents:
        function(document)
    return perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()

    def standard(document: Any) -> str:
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)

    targets = {
        "2,000 evidence documents": [evidence(n) for n in range(2000)],
        "one summary of 2,000 decisions": [summary(2000)],
    }
    print("| documents | json.dumps (s) | json_text (s) | ratio |\n|---|---:|---:|---:|")
    for name, documents in targets.items():
        assert all(indented(d) == standard(d) for d in documents), "texts differ"
        old, new = [], []
        for _ in range(options.rounds):
            old.append(timed(standard, documents))
            new.append(timed(indented, documents))
        a, b = statistics.median(old), statistics.median(new)
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
