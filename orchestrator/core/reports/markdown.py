"""Markdown for a CI job summary (``$GITHUB_STEP_SUMMARY``). Pure.

The same top block as the page (pins, exit status, a count per lane), a table of
the properties that need a look (every lane but ``no_freeze``), blocking lanes first,
a table of the properties the project skips on the patch, and one line for the rest.
GitHub refuses a step summary over 1 MiB, so the tables stop before ``max_bytes`` with
"and N more".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.core.reports.view import (
    BASE,
    GREEN_LANES,
    PATCH,
    WEAK_EVIDENCE,
    PropertyView,
    RunView,
    exit_meaning,
    lane_counts,
    sorted_properties,
    worst_exit,
)
from orchestrator.core.text_safety import terminal_safe

GITHUB_SUMMARY_LIMIT = 1024 * 1024  # bytes GitHub accepts for one step's summary
DEFAULT_MAX_BYTES = GITHUB_SUMMARY_LIMIT - 4096  # room for a few lines written before ours

_SYMBOLS = {
    "assert_pass": "\u2713",
    "assert_fail": "\u2717",
    "timeout": "\u25f7",
    "skipped": "\u2013",
}


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _code(text: str) -> str:
    """An inline code span that holds any text: a longer fence than any backtick run
    inside, pipes escaped for tables, control characters (line breaks too) written as
    visible escapes."""
    flat = terminal_safe(text).replace("|", "\\|")
    longest = run = 0
    for char in flat:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


# A word GitHub's Markdown would turn into a link on its own (GFM's autolinks: a URL, a
# www. host name, an e-mail address): shown as code instead, where nothing links.
_LINKABLE = re.compile(r"://|mailto:|xmpp:|@|www\.", re.IGNORECASE)
# HTML and table syntax as entities; with a backslash, the brackets of link and image
# syntax, the backtick (one left open would pair with a code span of ours and set free
# the link it holds), and the backslash that could undo those escapes. (Emphasis and the
# like may render: they only change how a cell looks.)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;"}
_MARKDOWN_PUNCTUATION = re.compile(r"[\\\[\]`]")


def _plain_word(word: str) -> str:
    word = _MARKDOWN_PUNCTUATION.sub(lambda match: "\\" + match.group(), word)
    return "".join(_ENTITIES.get(char, char) for char in word)


def _text(text: str) -> str:
    """Plain cell text, one line, no control character: HTML, table, link and image
    syntax neutralised, and a word that would link by itself shown as code."""
    words = terminal_safe(" ".join(text.split())).split(" ")
    return " ".join(_code(word) if _LINKABLE.search(word) else _plain_word(word) for word in words)


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _strip(labels: Sequence[str]) -> str:
    return "".join(_SYMBOLS.get(label, "!") for label in labels) or "-"


def _short(sha: str | None) -> str:
    return _code(sha[:12]) if sha else "unknown"


def run_block(run: RunView) -> str:
    counts = ", ".join(f"{lane} {count}" for lane, count in run.counts().items()) or "none"
    status = "?" if run.exit_status is None else str(run.exit_status)
    rows = [
        ("exit", f"**{status}** ({exit_meaning(run.exit_status)})"),
        ("lanes", _text(counts)),
        ("base", _short(run.base_rev)),
        ("patch", _short(run.patch_rev)),
        ("image", _code(run.image_digest) if run.image_digest else "unknown"),
        ("seed", "unknown" if run.seed is None else str(run.seed)),
        ("command", _code(run.command) if run.command else "unknown"),
        ("tests from", _code(run.tests_from) if run.tests_from else "each side's own"),
        ("engine / runner", _text(", ".join((run.runner_id or "?", *run.engines)))),
    ]
    if run.skipped:
        rows.insert(2, ("skipped", f"{run.skipped} (the project skips them on the patch)"))
    removed = run.removed_tests_line()
    if removed is not None:
        rows.insert(2, ("removed tests", _text(removed)))
    lines = [f"### Replay {_code(run.run_id)}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _more(count: int) -> str:
    return f"\nand {count} more not shown (size limit).\n"


def _row(item: PropertyView, show_run: bool) -> str:
    failing = item.failing_assertions(PATCH) or item.failing_assertions(BASE)
    cells = [
        _code(_clip(item.property_id)),
        f"**{_text(item.lane)}**" if item.kind.value == "blocking" else _text(item.lane),
        _text(item.code),
        _strip(item.labels(BASE)),
        _strip(item.labels(PATCH)),
        _text(_clip("; ".join(item.reasons))) or "-",
        ", ".join(_code(_clip(assertion)) for assertion in failing[:3]) or "-",
    ]
    if show_run:
        cells.insert(0, _code(item.run))
    return "| " + " | ".join(cells) + " |"


def _table(heading: str, items: Sequence[PropertyView], show_run: bool, room: int) -> str:
    """A heading and a table of ``items``, cut with "and N more" to fit ``room`` bytes
    ("" when not even the heading fits)."""
    columns = ["property", "lane", "code", "base", "patch", "reasons", "failing assertion"]
    if show_run:
        columns.insert(0, "run")
    lines = [heading, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    body = "\n".join(lines) + "\n"
    # Room for the longest "and N more" line, so that whatever is cut still fits.
    used = _size(body) + _size(_more(len(items)))
    if used > room:
        return ""
    rows: list[str] = []
    for item in items:
        row = _row(item, show_run) + "\n"
        if used + _size(row) > room:
            break
        rows.append(row)
        used += _size(row)
    cut = len(items) - len(rows)
    return body + "".join(rows) + (_more(cut) if cut else "")


def render_markdown(runs: Sequence[RunView], *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The job summary, at most ``max_bytes`` of UTF-8 (the top block always fits a
    sensible limit; the tables are what gets cut)."""
    properties = sorted_properties(runs)
    flagged = [
        item for item in properties if item.lane not in GREEN_LANES or item.code == WEAK_EVIDENCE
    ]
    green = [item for item in properties if item not in flagged]
    # A test the project skips on the patch is shown, not folded into "behaved alike".
    skipped = [item for item in green if item.skipped]
    rest = [item for item in green if not item.skipped]
    show_run = len(runs) > 1
    head = [f"## Replay: {exit_meaning(worst_exit(runs))}", ""]
    head += [run_block(run) for run in runs]
    text = "\n".join(head) + "\n"
    rest_counts = ", ".join(f"{lane} {count}" for lane, count in lane_counts(rest).items())
    rest_line = (
        f"\n{len(rest)} more {'property' if len(rest) == 1 else 'properties'} behaved alike on "
        f"both sides ({_text(rest_counts)}).\n"
        if rest
        else ""
    )
    if not flagged and not skipped:
        return text + (rest_line.lstrip("\n") or "No properties.\n")
    room = max_bytes - _size(text) - _size(rest_line)
    tables = ""
    if flagged:
        need = "property needs" if len(flagged) == 1 else "properties need"
        tables = _table(f"#### {len(flagged)} {need} a look", flagged, show_run, room)
    if skipped:
        which = "property" if len(skipped) == 1 else "properties"
        heading = f"#### {len(skipped)} {which} skipped by the project on the patch"
        separator = "\n" if tables else ""
        shown = _table(heading, skipped, show_run, room - _size(tables) - _size(separator))
        tables += separator + shown if shown else ""
    return text + tables + rest_line
