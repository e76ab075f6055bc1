"""JUnit XML: one ``testsuite`` per run, one ``testcase`` per property. Pure.

The form is the one of the Jenkins JUnit schema (``junit-10.xsd``, the schema pytest
checks its own ``xunit2`` output against), so that every reader of JUnit XML takes it:

- a blocking lane is a ``failure`` (``type`` the lane, ``message`` "lane / code: first
  reason"); an undecided lane is an ``error``; a non-blocking lane passes, or is
  ``skipped`` (counted in the suite's ``skipped``) when the project skipped every replay
  of the patch;
- the run's pins are the ``testsuite``'s ``properties`` (base and patch revisions, image,
  seed, command, ...);
- what that schema has no place for on a ``testcase`` (its lane and code as named values,
  its file, and each replay) is written as ``name: value`` lines in its ``system-out``:
  one line per replay, never one ``testcase`` per replay (readers such as GitLab keep
  only the first of duplicate test names). Surefire's ``rerunFailure``/``flakyFailure``
  elements are not used: they mean "this test was run again after failing", and the
  replays of a property are N runs of each of two revisions, not reruns of one failure.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from orchestrator.core.calls import format_counts
from orchestrator.core.reports.view import (
    BASE,
    PATCH,
    SIDES,
    Kind,
    PropertyView,
    RunView,
    node_parts,
)
from orchestrator.core.text_safety import terminal_safe, terminal_safe_lines

# Characters XML 1.0 cannot carry at all (control characters but tab, newline, return).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
MESSAGE_LIMIT = 4000


def xml_text(text: str) -> str:
    """Text XML 1.0 can hold: characters it forbids become U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _one_line(text: str) -> str:
    """A value from the tree (a node id, a reason, an assertion) for a ``name: value``
    line or an attribute: control characters, line breaks too, as visible escapes (a CI
    page shows them as they are and a line break would forge a line)."""
    return xml_text(terminal_safe(text))


def _lines(text: str) -> str:
    """A text of several lines (an assertion message): its breaks kept, every other
    control character as a visible escape."""
    return xml_text(terminal_safe_lines(text))


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _system_out(item: PropertyView, run: RunView) -> str:
    parts = node_parts(item.property_id)
    lines = [
        f"property: {_one_line(item.property_id)}",
        f"lane: {item.lane}",
        f"code: {item.code}",
        f"kind: {item.kind.value}",
        f"run: {run.run_id}",
        f"base_rev: {run.base_rev or 'unknown'}",
        f"patch_rev: {run.patch_rev or 'unknown'}",
    ]
    if parts.path:
        lines.append(f"file: {_one_line(parts.path)}")
    lines += [f"reason: {_one_line(reason)}" for reason in item.reasons]
    lines += [
        f"calls: {_one_line(delta.name)} base {format_counts(delta.base)}"
        f" patch {format_counts(delta.patch)}"
        for delta in item.call_deltas
    ]
    if item.oracle_changed:
        lines.append(
            "oracle: changed"
            + (f" ({_one_line('; '.join(item.oracle_reasons))})" if item.oracle_reasons else "")
        )
    for side in SIDES:
        replays = item.replays(side)
        if not replays:
            lines += [f"{side} replay {n}: {label}" for n, label in enumerate(item.labels(side), 1)]
        for replay in replays:
            words = [f"{side} replay {replay.number}: {replay.label}"]
            if replay.reason:
                words.append(f"({_one_line(replay.reason)})")
            elif replay.skipped and replay.message:
                words.append(f"({_one_line(' '.join(replay.message.split()))})")
            if replay.assertion_id:
                words.append(_one_line(replay.assertion_id))
            if replay.duration_ms is not None:
                words.append(f"{replay.duration_ms:g} ms")
            if replay.log:
                words.append(f"log {_one_line(replay.log)}")
            lines.append(" ".join(words))
    return xml_text("\n".join(lines) + "\n")


def _message(item: PropertyView) -> str:
    first = item.reasons[0] if item.reasons else ""
    return _one_line(f"{item.lane} / {item.code}" + (f": {first}" if first else ""))[:MESSAGE_LIMIT]


def _details(item: PropertyView) -> str:
    lines = [_one_line(reason) for reason in item.reasons]
    for side in (PATCH, BASE):
        for assertion in item.failing_assertions(side):
            lines.append(f"failing on {side}: {_one_line(assertion)}")
        messages = [r.message for r in item.replays(side) if r.failed and r.message]
        if messages:
            lines.append(f"{side} message: {_lines(messages[0])}")
    return xml_text("\n".join(lines))[: MESSAGE_LIMIT * 4]


def _skipped(item: PropertyView) -> bool:
    """A non-blocking property the project skips on the patch: it did not run there."""
    return item.skipped and item.kind is Kind.NON_BLOCKING


def _testcase(item: PropertyView, run: RunView) -> ET.Element:
    parts = node_parts(item.property_id)
    case = ET.Element(
        "testcase",
        {
            "classname": _one_line(parts.classname),
            "name": _one_line(parts.name),
            "time": _seconds(item.duration_s),
        },
    )
    if item.kind is Kind.BLOCKING:
        element = ET.SubElement(case, "failure", {"type": item.lane, "message": _message(item)})
        element.text = _details(item)
    elif item.kind is Kind.UNDECIDED:
        element = ET.SubElement(case, "error", {"type": item.lane, "message": _message(item)})
        element.text = _details(item)
    elif _skipped(item):
        ET.SubElement(case, "skipped", {"message": _message(item)})
    ET.SubElement(case, "system-out").text = _system_out(item, run)
    return case


def _suite(run: RunView) -> ET.Element:
    properties = run.properties
    failures = sum(item.kind is Kind.BLOCKING for item in properties)
    errors = sum(item.kind is Kind.UNDECIDED for item in properties)
    total_time = sum(item.duration_s for item in properties)
    attributes = {
        "name": xml_text(f"orchestrator replay {run.run_id}"),
        "tests": str(len(properties)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(sum(_skipped(item) for item in properties)),
        "time": _seconds(total_time),
    }
    if run.started_at:
        attributes["timestamp"] = xml_text(run.started_at)
    suite = ET.Element("testsuite", attributes)
    pins = {
        "run_id": run.run_id,
        "exit_status": None if run.exit_status is None else str(run.exit_status),
        "base_rev": run.base_rev,
        "patch_rev": run.patch_rev,
        "image_digest": run.image_digest,
        "seed": None if run.seed is None else str(run.seed),
        "command": run.command,
        "tests_from": run.tests_from,
        "runner_id": run.runner_id,
        "engines": ", ".join(run.engines) or None,
        "replays": None if run.replays is None else str(run.replays),
    }
    holder = ET.SubElement(suite, "properties")
    for name, value in pins.items():
        if value is not None:
            ET.SubElement(holder, "property", {"name": name, "value": xml_text(value)})
    for item in properties:
        suite.append(_testcase(item, run))
    return suite


def render_junit(runs: Sequence[RunView]) -> str:
    """A ``testsuites`` document with one ``testsuite`` per run, as UTF-8 XML text."""
    suites = [_suite(run) for run in runs]
    root = ET.Element(
        "testsuites",
        {
            "name": "orchestrator",
            "tests": str(sum(int(s.get("tests", "0")) for s in suites)),
            "failures": str(sum(int(s.get("failures", "0")) for s in suites)),
            "errors": str(sum(int(s.get("errors", "0")) for s in suites)),
            "time": _seconds(sum(float(s.get("time", "0")) for s in suites)),
        },
    )
    root.extend(suites)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + body + "\n"
