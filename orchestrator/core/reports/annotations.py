"""GitHub Actions annotations: a workflow command per property that needs a look. Pure.

A blocking property is an ``::error`` at its failing assertion's line in the patch's
test file (the ``assertion_id`` carries ``path:line``); an undecided one is a
``::warning``. Without a failing assertion on the patch (a moved call budget with
passing replays, a timeout) the annotation points at the test's file, without a line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from orchestrator.core.reports.view import (
    PATCH,
    AssertionSite,
    Kind,
    PropertyView,
    RunView,
    assertion_site,
    node_parts,
    sorted_properties,
)
from orchestrator.core.text_safety import terminal_safe

MESSAGE_LIMIT = 2000


def _data(text: str) -> str:
    """Escape a workflow command's message: every control character as a visible escape
    (the log shows ANSI sequences as colours, and a line break would end the command),
    then GitHub's own escaping of ``%``, CR and LF."""
    safe = terminal_safe(text)
    return safe.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property_value(text: str) -> str:
    """Escape a workflow command's property value (also ``:`` and ``,``)."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def patch_site(item: PropertyView) -> AssertionSite | None:
    """The patch's most frequent failing assertion site (first seen on a tie)."""
    sites = [
        site
        for replay in item.replays(PATCH)
        if replay.failed and (site := assertion_site(replay.assertion_id)) is not None
    ]
    if not sites:
        return None
    counts = Counter((site.path, site.line, site.exc_type) for site in sites)
    best = max(counts.values())
    return next(s for s in sites if counts[(s.path, s.line, s.exc_type)] == best)


def annotation(item: PropertyView) -> str | None:
    """One workflow command line for a blocking or undecided property, else None."""
    if item.kind is Kind.NON_BLOCKING:
        return None
    command = "error" if item.kind is Kind.BLOCKING else "warning"
    site = patch_site(item)
    fields: list[str] = []
    path = site.path if site is not None else node_parts(item.property_id).path
    if path:
        fields.append(f"file={_property_value(path)}")
    if site is not None:
        fields.append(f"line={site.line}")
    fields.append(f"title={_property_value(f'{item.lane} / {item.code}')}")
    words = [item.property_id]
    if item.reasons:
        words.append("; ".join(item.reasons))
    if site is not None:
        words.append(f"({site.exc_type} on the patch)")
    message = ": ".join(words[:2]) + (" " + words[2] if len(words) > 2 else "")
    return f"::{command} {','.join(fields)}::{_data(message[:MESSAGE_LIMIT])}"


def render_annotations(runs: Sequence[RunView]) -> str:
    """Every annotation of the runs, blocking ones first, one per line."""
    lines = [line for item in sorted_properties(runs) if (line := annotation(item)) is not None]
    return "".join(line + "\n" for line in lines)
