"""The quarantine's part of pytest's terminal summary: the quarantined failures' tracebacks,
then one line per test a freeze named, by what the quarantine did with it.

Node ids, owners, reasons and messages come from the tree under test and from the ledger:
every line goes through ``core.text_safety`` (tracebacks keep their line breaks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.core.quarantine import Standing
from orchestrator.core.text_safety import terminal_safe, terminal_safe_lines

# The words each line starts with, in the order the summary lists them.
WORDS = (
    ("quarantined", "QUARANTINED"),
    ("not_covered", "NOT COVERED"),
    ("expired_failed", "EXPIRED"),
    ("thaw_candidate", "THAW CANDIDATE"),
    ("expired_passed", "EXPIRED"),
)


def sort_entries(
    entries: Sequence[tuple[str, dict[str, Any]]],
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each reported ruling under the summary's heading for it. A test that failed in any
    report (a subtest, a tear-down) is never also a thaw candidate."""
    failed = {nodeid for nodeid, entry in entries if entry["failed"]}
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {name: [] for name, _ in WORDS}
    seen_pass: set[str] = set()
    # By node id (then in report order): the same under pytest-xdist as in one process.
    for nodeid, entry in sorted(entries, key=lambda pair: pair[0]):
        standing = entry["standing"]
        if standing == Standing.QUARANTINED.value:
            groups["quarantined"].append((nodeid, entry))
        elif standing == Standing.NOT_COVERED.value:
            groups["not_covered"].append((nodeid, entry))
        elif entry["failed"]:
            groups["expired_failed"].append((nodeid, entry))
        elif nodeid not in failed and nodeid not in seen_pass:
            seen_pass.add(nodeid)
            name = "thaw_candidate" if standing == Standing.PASSED.value else "expired_passed"
            groups[name].append((nodeid, entry))
    return groups


def summary_lines(entries: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """The summary's lines (without the tracebacks), and a count line last."""
    groups = sort_entries(entries)
    lines = []
    for name, word in WORDS:
        for nodeid, entry in groups[name]:
            lines.append(f"{word} {terminal_safe(nodeid)} - {terminal_safe(entry['note'])}")
            freeze = entry["freeze"]
            if name == "quarantined":
                lines.append(f"    frozen: {terminal_safe(freeze['reason'])}")
            if entry.get("failure"):
                lines.append(f"    failed: {terminal_safe(entry['failure'])}")
            budget = freeze.get("budget_ms")
            if budget is not None and entry["when"] == "call":
                over = ", over it" if entry["duration_ms"] > budget else ""
                lines.append(f"    took {entry['duration_ms']:g} ms (budget {budget:g} ms{over})")
    expired = len(groups["expired_failed"]) + len(groups["expired_passed"])
    candidates = len(groups["thaw_candidate"])
    counts = [
        f"{len(groups['quarantined'])} quarantined",
        f"{len(groups['not_covered'])} not covered",
        f"{expired} expired",
        f"{candidates} thaw candidate{'' if candidates == 1 else 's'}",
    ]
    lines.append("quarantine: " + ", ".join(counts))
    return lines


def write_summary(
    terminal: Any, entries: Sequence[tuple[str, dict[str, Any]]], *, tracebacks: bool
) -> None:
    """Write the tracebacks (unless ``--tb=no``) and the summary to pytest's terminal."""
    quarantined = sort_entries(entries)["quarantined"]
    if tracebacks and quarantined:
        terminal.write_sep("=", "QUARANTINED FAILURES", yellow=True)
        for nodeid, entry in quarantined:
            terminal.write_sep("_", terminal_safe(nodeid), yellow=True)
            for line in terminal_safe_lines(entry.get("traceback") or "").splitlines():
                terminal.line(line)
            terminal.line(f"(quarantine: {terminal_safe(entry['note'])})")
    terminal.write_sep("=", "quarantine summary", yellow=True)
    for line in summary_lines(entries):
        terminal.line(line)
