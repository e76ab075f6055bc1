"""Generated run folders: the documents `replay` writes, for any number of properties.

Each property gets replays built from a pattern (per lane), evidence from the model's
own `to_json`, a decision from the real decision function, and the summary entry of
records.md's `replay-report`. Used for sizes no real run reaches here (5,000
properties) and for fields a real run does not carry yet.

``version=2`` (the default) writes what this version writes: the properties into the
store (``properties.jsonl.gz``, through the tool's own writer) and a ``replay-report/2``
summary listing those that need a look; ``version=1`` writes a run folder of an earlier
version: an ``evidence-<n>.json`` and a ``decision-<n>.json`` per property and a
``replay-report/1`` summary listing every property.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.lanes import decide
from orchestrator.core.significance import needs_a_look
from orchestrator.model import (
    PROPERTIES_FILE,
    REPORT_SCHEMA,
    REPORT_SCHEMA_V1,
    RUN_LOG_SCHEMA,
    Evidence,
    Replay,
    ShrinkSummary,
)
from orchestrator.services import property_store

BASE_REV = "1" * 40
PATCH_REV = "2" * 40
IMAGE = "sha256:" + "ab" * 32
FIXTURE = "sha256:" + "cd" * 32

PASS, FAIL, TIMEOUT, HARNESS = "assert_pass", "assert_fail", "timeout", "harness_error"


def node_id(index: int) -> str:
    return f"tests/test_mod{index // 50:03d}.py::TestGroup{index % 7}::test_case_{index}[p{index}]"


def _replay(label: str, node: str, line: int, clock: int = 1, reason: str | None = None) -> Replay:
    failed = label == FAIL
    return Replay(
        label=label,
        assertion_id=f"{node}@{node.partition('::')[0]}:{line}:AssertionError" if failed else None,
        calls={"clock": clock, "open": 0},
        duration_ms=1.5,
        image_digest=IMAGE,
        runner_id="local",
        reason=reason,
        message="assert 2 == 1" if failed else None,
    )


# name -> (base labels, patch labels, patch clock count, extra evidence fields)
Pattern = Callable[[str, int, int], tuple[list[Replay], list[Replay], dict[str, Any]]]


def _sides(base: Sequence[str], patch: Sequence[str], *, patch_clock: int = 1, line2: int = 0):
    def build(node: str, line: int, n: int) -> tuple[list[Replay], list[Replay], dict[str, Any]]:
        base_side = [_replay(base[k % len(base)], node, line) for k in range(n)]
        patch_side = [
            _replay(patch[k % len(patch)], node, line + line2, clock=patch_clock) for k in range(n)
        ]
        return base_side, patch_side, {}

    return build


def _timeout(node: str, line: int, n: int) -> tuple[list[Replay], list[Replay], dict[str, Any]]:
    base_side = [_replay(PASS, node, line) for _ in range(n)]
    patch_side = [_replay(TIMEOUT, node, line, reason="deadline") for _ in range(n)]
    return base_side, patch_side, {}


def _oracle(node: str, line: int, n: int) -> tuple[list[Replay], list[Replay], dict[str, Any]]:
    base_side = [_replay(PASS, node, line) for _ in range(n)]
    patch_side = [_replay(PASS, node, line) for _ in range(n)]
    return base_side, patch_side, {"oracle_changed": True}


def _unstable(node: str, line: int, n: int) -> tuple[list[Replay], list[Replay], dict[str, Any]]:
    base_side = [_replay(PASS, node, line) for _ in range(n)]
    patch_side = [_replay(FAIL, node, line) for _ in range(n)]
    shrink = ShrinkSummary(
        attempts=2,
        identical_minima=1,
        stable=False,
        shrink_path=({"op": "drop_key", "path": ["meta"]},),
    )
    return base_side, patch_side, {"shrink": shrink}


PATTERNS: dict[str, Pattern] = {
    "no_freeze": _sides([PASS], [PASS]),
    "property_regression": _sides([PASS], [FAIL]),
    "call_budget": _sides([PASS], [PASS], patch_clock=2),
    "fix_candidate": _sides([FAIL], [PASS]),
    "flake_queue_eligible": _sides([PASS, FAIL], [FAIL, PASS]),
    "block_patch": _sides([FAIL], [FAIL]),
    "different_bug": _sides([FAIL], [FAIL], line2=3),
    "infra_queue": _timeout,
    "reject_run": _oracle,
    "rerun_shrink": _unstable,
}
# Mostly quiet runs, with every lane present.
DEFAULT_MIX: tuple[str, ...] = (
    *(["no_freeze"] * 12),
    "property_regression",
    "call_budget",
    "fix_candidate",
    "flake_queue_eligible",
    "block_patch",
    "different_bug",
    "infra_queue",
    "reject_run",
    "rerun_shrink",
)


def _write(path: Path, document: Any) -> None:
    # No indent: json's C encoder then does the work (an indent takes the pure-Python one,
    # several times slower on the 5,000-property folders); readers never see the layout.
    path.write_text(json.dumps(document, sort_keys=True), encoding="utf-8")


def _call_sets(replays: Sequence[Replay]) -> dict[str, list[int]]:
    names = sorted({name for replay in replays for name in replay.calls})
    return {name: sorted({r.calls.get(name, 0) for r in replays}) for name in names}


def make_run_folder(
    root: Path,
    *,
    properties: int,
    replays: int = 3,
    mix: Sequence[str] = DEFAULT_MIX,
    run_id: str = "20260105T090000Z-generated",
    reason_padding: str = "",
    extra_run_log: Mapping[str, Any] | None = None,
    version: int = 2,
    first: int = 1,
) -> Path:
    """A complete run folder under ``root`` with ``properties`` properties, as this
    version writes it (``version=2``) or as an earlier one did (``version=1``)."""
    root.mkdir(parents=True, exist_ok=True)
    run_log = {
        "schema": RUN_LOG_SCHEMA,
        "run_id": run_id,
        "base_rev": BASE_REV,
        "patch_rev": PATCH_REV,
        "command": "pytest -q",
        "image_digest": IMAGE,
        "image_ref": "orchestrator-runner:latest",
        "repo_digests": [],
        "runner_id": "local",
        "fixture_digest": FIXTURE,
        "origin_digest": FIXTURE,
        "shrink": None,
        "seed": 7,
        "replays": replays,
        "timeout_s": 30.0,
        "isolation": "side",
        "property_ids": [],
        "pytest_args": ["-q"],
        "probe_version": "1.0.0",
        "started_at": "2026-01-05T09:00:00Z",
        "repo": "/src/example",
        **(extra_run_log or {}),
    }
    _write(root / "run-log.json", run_log)
    for side in ("base", "patch"):
        (root / "raw" / side).mkdir(parents=True, exist_ok=True)
        for number in range(1, replays + 1):
            _write(
                root / "raw" / side / f"replay-{number:03d}.json",
                {"schema": "replay-run/1", "replay": number, "status": "completed",
                 "exit_code": 0, "wall_ms": 120.0, "seed": 7, "result": None},
            )  # fmt: skip
    entries = []
    records = []
    worst = 0
    for index in range(1, properties + 1):  # node ids from ``first`` on
        lane_name = mix[(index - 1) % len(mix)]
        node = node_id(index + first - 1)
        base_side, patch_side, extra = PATTERNS[lane_name](node, 10 + index % 40, replays)
        evidence = Evidence(
            base_rev=BASE_REV,
            patch_rev=PATCH_REV,
            image_digest=IMAGE,
            runner_id="local",
            command="pytest -q",
            property_id=node,
            seed=7,
            fixture_digest=FIXTURE,
            origin_digest=FIXTURE,
            oracle_changed=bool(extra.get("oracle_changed", False)),
            shrink=extra.get("shrink"),
            replays=replays,
            base=tuple(base_side),
            patch=tuple(patch_side),
        )
        decision = decide(evidence)
        reasons = [reason + reason_padding for reason in decision.reasons]
        decision_doc = {**decision.to_json(), "reasons": reasons}
        if version == 1:
            _write(root / f"evidence-{index}.json", evidence.to_json())
            _write(root / f"decision-{index}.json", decision_doc)
        worst = max(worst, {0: 0, 3: 1, 1: 2}[decision.lane.exit_status])
        entry = {
            "property_id": node,
            "lane": decision.lane.value,
            "code": decision.code,
            "blocking": decision.blocking,
            "freeze_allowed": decision.freeze_allowed,
            "reasons": reasons,
            "base_labels": [r.label for r in base_side],
            "patch_labels": [r.label for r in patch_side],
            "base_reasons": [r.reason for r in base_side],
            "patch_reasons": [r.reason for r in patch_side],
            "calls_base": _call_sets(base_side),
            "calls_patch": _call_sets(patch_side),
            "oracle_changed": evidence.oracle_changed,
            "evidence_file": f"evidence-{index}.json" if version == 1 else None,
            "decision_file": f"decision-{index}.json" if version == 1 else None,
            "decision": decision_doc,
        }
        entries.append(entry)
        if version != 1:
            entry["index"] = index
            records.append(
                {"index": index, "property_id": node, "entry": entry,
                 "evidence": evidence.to_json(), "decision": decision_doc}
            )  # fmt: skip
    summary = {
        "schema": REPORT_SCHEMA_V1 if version == 1 else REPORT_SCHEMA,
        "run_id": run_id,
        "run_dir": str(root),
        "run_log": run_log,
        "exit_status": {0: 0, 1: 3, 2: 1}[worst],
        "decisions": entries,
    }
    if version != 1:
        property_store.writer_for(root).add_records(records)
        property_store.finish(root, run_id)
        listed = [entry for entry in entries if needs_a_look(entry["lane"], entry["code"])]
        lanes: dict[str, int] = {}
        for entry in entries:
            lanes[entry["lane"]] = lanes.get(entry["lane"], 0) + 1
        summary.update(
            decisions=listed,
            decisions_left_out=len(entries) - len(listed),
            properties=len(entries),
            properties_file=PROPERTIES_FILE,
            lanes=lanes,
        )
    _write(root / "summary.json", summary)
    return root
