"""One self-contained HTML page for one or more run folders. Pure.

Everything is inline: the style sheet, a few lines of script (the lane filter and the
search box) and no image, font or other file. A Content-Security-Policy with the
hashes of that style and script forbids the page any request of its own, so it
opens the same offline. Links to evidence, decisions and replay logs are relative to
the page, as the service computed them.

Rows come in chunks of ``CHUNK`` rows of one lane, each chunk with ``content-visibility:
auto``: the browser styles and lays out only the chunks near the viewport, and has a
few hundred elements to watch while scrolling instead of one per row, which keeps a
run of thousands of properties responsive (tests/report measure it in Chromium).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape

from orchestrator.core.calls import format_counts
from orchestrator.core.reports.view import (
    BASE,
    PATCH,
    SIDES,
    Kind,
    PropertyView,
    ReplayView,
    RunView,
    exit_meaning,
    lane_counts,
    lane_kind,
    sorted_properties,
    worst_exit,
)
from orchestrator.core.text_safety import terminal_safe_lines
from orchestrator.model import Lane

# (symbol, CSS class, words): a symbol per label so the strip reads in greyscale too.
CELLS: dict[str, tuple[str, str, str]] = {
    "assert_pass": ("\u2713", "pass", "assertion passed"),
    "assert_fail": ("\u2717", "fail", "assertion failed"),
    "timeout": ("\u25f7", "timeout", "timeout"),
    "harness_error": ("!", "harness", "harness error (no verdict)"),
    "skipped": ("\u2013", "skip", "skipped by the project (no verdict, not infrastructure)"),
}
UNKNOWN_CELL = ("?", "unknown", "unknown label")
CHUNK = 20  # rows per content-visibility chunk
ROW_PX = 90  # a row's usual height, for the placeholder of a chunk not drawn yet

LANE_MEANING: dict[str, str] = {lane: lane.meaning for lane in Lane}

STYLE_TEMPLATE = """\
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--soft:#f6f8fa;--hi:#fff1c2}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;
color:var(--fg);background:var(--bg)}
header.page,section,nav{padding:12px 20px}
header.page{border-bottom:1px solid var(--line);display:flex;gap:16px;align-items:baseline}
h1{font-size:20px;margin:0}h2{font-size:15px;margin:0 0 6px}
code{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
.verdict{font-weight:600;padding:2px 10px;border-radius:12px;color:#fff}
.exit-0{background:#1a7f37}.exit-1{background:#cf222e}.exit-3,.exit-x{background:#9a6700}
.runs{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:12px}
.run{border:1px solid var(--line);border-radius:6px;padding:10px 12px;background:var(--soft)}
.pins{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
.pins dt{color:var(--muted)}.pins dd{margin:0;overflow-wrap:anywhere}
.counts{display:flex;flex-wrap:wrap;gap:6px;margin-top:6px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;
font-size:12.5px;white-space:nowrap}
.badge.blocking{box-shadow:inset 0 0 0 2px rgba(0,0,0,.35)}
.badge.undecided{border:1px dashed #fff}
.legend{display:flex;flex-wrap:wrap;gap:18px;border-top:1px solid var(--line)}
.legend dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 10px;margin:0}
.legend dd{margin:0;color:var(--muted)}
nav{background:var(--bg);border-top:1px solid var(--line);
border-bottom:1px solid var(--line);display:flex;flex-wrap:wrap;gap:10px;align-items:center}
nav fieldset{border:0;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:8px}
nav label{cursor:pointer}nav input[type=search]{min-width:320px;padding:4px 8px;font:inherit}
.l-reject_run{background:#6e1b1b}.l-property_regression{background:#c21f1f}
.l-different_bug{background:#a3195b}.l-block_patch{background:#b34700}
.l-reject_malformed{background:#6b4b00}.l-infra_queue{background:#946200}
.l-rerun_shrink{background:#7a5a00}.l-flake_queue_eligible{background:#1f56c2}
.l-fix_candidate{background:#0b6e66}.l-no_freeze{background:#1a7f37}.l-unknown{background:#57606a}
#props{padding:0 20px 40px}
.chunk{content-visibility:auto;contain-intrinsic-size:auto 2000px}.chunk[hidden]{display:none}
{CHUNK_SIZES}
.prop{border-bottom:1px solid var(--line);
padding:8px 0;display:grid;grid-template-columns:minmax(150px,auto) minmax(0,1fr);gap:4px 16px}
.prop[hidden]{display:none}
.prop>header{display:flex;flex-wrap:wrap;gap:8px;align-items:baseline;grid-column:1/-1}
.prop .code{font-weight:600}.prop .run-id{color:var(--muted);font-size:12px}
.nid{overflow-wrap:anywhere}
.strips{display:grid;gap:2px;align-content:start}
.strip{display:flex;flex-wrap:wrap;gap:2px;align-items:center}
.strip .side{width:42px;color:var(--muted);font-size:12px}
.c{display:inline-block;width:18px;height:18px;line-height:18px;text-align:center;border-radius:3px;
color:#fff;font-size:12px;font-weight:700;text-decoration:none}
.c.pass{background:#1a7f37}.c.fail{background:#cf222e}.c.timeout{background:#bf8700}
.c.harness{background:#6639ba}.c.unknown{background:#57606a}.c.skip{background:#8c959f}
.facts{min-width:0}.facts p,.facts ul{margin:2px 0}.facts ul{padding-left:18px}
.calls{border-collapse:collapse;margin:2px 0}
.calls td,.calls th{border:1px solid var(--line);padding:1px 8px;text-align:left}
.calls .moved{background:var(--hi)}
.muted{color:var(--muted)}
.shown{color:var(--muted)}
"""

# A chunk's placeholder height before it is first drawn: about a row's height per row.
STYLE = STYLE_TEMPLATE.replace(
    "{CHUNK_SIZES}",
    "".join(f".n{n}{{contain-intrinsic-size:auto {n * ROW_PX}px}}" for n in range(1, CHUNK + 1)),
)

SCRIPT = """\
(()=>{const chunks=[...document.querySelectorAll('#props>.chunk')],q=document.getElementById('q'),
shown=document.getElementById('shown'),boxes=[...document.querySelectorAll('#lanes input')];
function apply(){const off=new Set(boxes.filter(b=>!b.checked).map(b=>b.value)),
s=q.value.trim().toLowerCase();let n=0;for(const c of chunks){let any=false;
for(const r of c.children){const h=off.has(r.dataset.lane)||(s!==''&&!r.dataset.key.includes(s));
if(r.hidden!==h)r.hidden=h;if(!h){n++;any=true;}}if(c.hidden===any)c.hidden=!any;}
shown.textContent=String(n);}
q.addEventListener('input',apply);for(const b of boxes)b.addEventListener('change',apply);
apply();})();
"""


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


# Nothing may be fetched: only the inline style and script above may run.
CSP = (
    f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
    "img-src data:; form-action 'none'; base-uri 'none'"
)


def _e(text: object) -> str:
    """HTML-escaped, and every control character and bidi override (which a browser
    would act on: reorder the text around it) as a visible escape; line breaks kept."""
    return escape(terminal_safe_lines(str(text)), quote=True)


def _lane_class(lane: str) -> str:
    return f"l-{lane}" if lane in LANE_MEANING else "l-unknown"


def badge(lane: str, kind: Kind, text: str | None = None) -> str:
    return (
        f'<span class="badge {_lane_class(lane)} {kind.value.replace("-", "_")}" '
        f'data-lane="{_e(lane)}" title="{_e(kind.value)}: {_e(LANE_MEANING.get(lane, lane))}">'
        f"{_e(text if text is not None else lane)}</span>"
    )


def _short(sha: str | None, length: int = 12) -> str:
    return "unknown" if not sha else sha[:length]


def _pin(name: str, value: str | None, *, code: bool = True, full: str | None = None) -> str:
    shown = "<span class=muted>unknown</span>" if value is None else _e(value)
    if value is not None and code:
        shown = f"<code>{shown}</code>"
    title = f' title="{_e(full)}"' if full else ""
    return f"<dt>{_e(name)}</dt><dd{title}>{shown}</dd>"


def _run_block(run: RunView) -> str:
    engines = ", ".join(run.engines) if run.engines else None
    runner = run.runner_id if engines is None else f"{run.runner_id or '?'} on {engines}"
    pins = [
        _pin("base", run.base_rev),
        _pin("patch", run.patch_rev),
        _pin("image", run.image_digest, full=run.image_ref),
        _pin("seed", None if run.seed is None else str(run.seed)),
        _pin("command", run.command),
        _pin("tests from", run.tests_from or "each side's own", code=run.tests_from is not None),
        *(
            [_pin("removed tests", run.removed_tests_line(), code=False)]
            if run.removed_tests
            else []
        ),
        _pin("engine / runner", runner),
        _pin(
            "replays",
            None
            if run.replays is None
            else f"{run.replays} per side"
            + (f", timeout {run.timeout_s:g} s" if run.timeout_s is not None else "")
            + (f", isolation {run.isolation}" if run.isolation else ""),
            code=False,
        ),
        _pin("fixture", run.fixture_digest),
        _pin("started", run.started_at, code=False),
        _pin("folder", run.name),
    ]
    counts = " ".join(
        badge(lane, lane_kind(lane, None), f"{lane} {count}")
        for lane, count in run.counts().items()
    )
    if run.skipped:
        counts += f' <span class="skipped muted">skipped {run.skipped}</span>'

    status = run.exit_status
    status_class = f"exit-{status}" if status in (0, 1, 3) else "exit-x"
    return (
        f'<div class="run" data-run="{_e(run.run_id)}"><h2>run <code>{_e(run.run_id)}</code> '
        f'<span class="verdict {status_class}">exit {_e("?" if status is None else status)}: '
        f"{_e(exit_meaning(status))}</span></h2>"
        f'<dl class="pins">{"".join(pins)}</dl><div class="counts">{counts}</div></div>'
    )


def _cell(replay: ReplayView) -> str:
    symbol, css, _ = CELLS.get(replay.label, UNKNOWN_CELL)
    details = [f"{replay.side} replay {replay.number}: {replay.label}"]
    if replay.reason:
        details.append(f"({replay.reason})")
    if replay.duration_ms is not None:
        details.append(f"{replay.duration_ms:g} ms")
    if replay.status and replay.status != "completed":
        details.append(f"run {replay.status}")
    if replay.assertion_id:
        details.append(replay.assertion_id)
    if replay.message:
        details.append("\n" + replay.message[:300])
    title = _e(" ".join(details))  # the title names the label too, for screen readers
    if replay.log:
        return f'<a class="c {css}" href="{_e(replay.log)}" title="{title}">{symbol}</a>'
    return f'<span class="c {css}" title="{title}">{symbol}</span>'


def _label_cell(side: str, number: int, label: str) -> str:
    symbol, css, _ = CELLS.get(label, UNKNOWN_CELL)
    title = _e(f"{side} replay {number}: {label}")
    return f'<span class="c {css}" title="{title}">{symbol}</span>'


def _strip(item: PropertyView, side: str) -> str:
    replays = item.replays(side)
    if replays:
        cells = "".join(_cell(replay) for replay in replays)
    else:
        cells = "".join(
            _label_cell(side, n, label) for n, label in enumerate(item.labels(side), start=1)
        )
    return f'<div class="strip" data-side="{side}"><span class="side">{side}</span>{cells}</div>'


def _facts(item: PropertyView) -> str:
    parts: list[str] = []
    if item.reasons:
        parts.append(
            '<ul class="reasons">' + "".join(f"<li>{_e(r)}</li>" for r in item.reasons) + "</ul>"
        )
    if item.call_deltas:
        rows = "".join(
            f'<tr><th><code>{_e(delta.name)}</code></th><td class="moved">base '
            f'<code>{_e(format_counts(delta.base))}</code></td><td class="moved">patch '
            f"<code>{_e(format_counts(delta.patch))}</code></td></tr>"
            for delta in item.call_deltas
        )
        parts.append(f'<table class="calls" title="call counts that differ">{rows}</table>')
    for side in SIDES:
        failing = item.failing_assertions(side)
        if failing:
            ids = ", ".join(f"<code>{_e(assertion)}</code>" for assertion in failing)
            parts.append(f'<p class="asserts">failing on {side}: {ids}</p>')
    if item.oracle_changed or item.oracle_reasons:
        digests = ""
        if item.base_oracle_digest or item.patch_oracle_digest:
            digests = (
                f": base <code>{_e(_short(item.base_oracle_digest, 19))}</code> vs patch "
                f"<code>{_e(_short(item.patch_oracle_digest, 19))}</code>"
            )
        why = "; ".join(item.oracle_reasons)
        parts.append(
            f'<p class="oracle">oracle changed{digests}' + (f" ({_e(why)})" if why else "") + "</p>"
        )
    if item.shrink_path:
        steps = " \u2192 ".join(f"<code>{_e(step)}</code>" for step in item.shrink_path)
        parts.append(f'<p class="shrink">shrink path: {steps}</p>')
    links = [
        f'<a href="{_e(link)}">{name}</a>'
        for name, link in (("evidence", item.evidence_link), ("decision", item.decision_link))
        if link
    ]
    if links:
        parts.append('<p class="files muted">' + " \u00b7 ".join(links) + "</p>")
    return '<div class="facts">' + "".join(parts) + "</div>"


def _row(item: PropertyView, *, show_run: bool) -> str:
    run = f'<span class="run-id">{_e(item.run)}</span>' if show_run else ""
    return (
        f'<article class="prop" data-lane="{_e(item.lane)}" data-kind="{item.kind.value}" '
        f'data-key="{_e(item.property_id.lower())}">'
        f"<header>{badge(item.lane, item.kind)}"
        f'<span class="code">{_e(item.code)}</span>'
        f'<code class="nid">{_e(item.property_id)}</code>{run}</header>'
        f'<div class="strips">{_strip(item, BASE)}{_strip(item, PATCH)}</div>'
        f"{_facts(item)}"
        "</article>"
    )


def _legend(lanes: Sequence[str]) -> str:
    lane_rows = "".join(
        f"<dt>{badge(lane, lane_kind(lane))}</dt>"
        f"<dd>{_e(lane_kind(lane).value)}: {_e(LANE_MEANING[lane])}</dd>"
        for lane in LANE_MEANING
        if lane in lanes
    )
    cell_rows = "".join(
        f'<dt><span class="c {css}">{symbol}</span></dt><dd>{_e(words)}</dd>'
        for symbol, css, words in (*CELLS.values(), UNKNOWN_CELL)
    )
    return (
        '<section class="legend" aria-label="legend">'
        f"<dl>{lane_rows}</dl>"
        f"<dl>{cell_rows}<dt></dt><dd>each strip: base above patch, one cell per replay; "
        "a cell links to its replay log</dd></dl></section>"
    )


def _filters(counts: dict[str, int], total: int) -> str:
    boxes = "".join(
        f'<label><input type="checkbox" value="{_e(lane)}" checked> '
        f"{badge(lane, lane_kind(lane), f'{lane} {count}')}</label>"
        for lane, count in counts.items()
    )
    return (
        '<nav aria-label="filter"><fieldset id="lanes"><legend class="muted">lanes</legend>'
        f"{boxes}</fieldset>"
        '<input type="search" id="q" placeholder="search node id" aria-label="search node id">'
        f'<span class="shown"><span id="shown">{total}</span> of {total} shown</span></nav>'
    )


def _chunks(properties: Sequence[PropertyView]) -> list[list[PropertyView]]:
    """Consecutive rows, at most ``CHUNK`` each, never two lanes in one chunk."""
    chunks: list[list[PropertyView]] = []
    for item in properties:
        if not chunks or len(chunks[-1]) == CHUNK or chunks[-1][0].lane != item.lane:
            chunks.append([])
        chunks[-1].append(item)
    return chunks


def render_html(runs: Sequence[RunView]) -> str:
    """The page for one or more runs: pins and counts per run, legend, filter, one row per
    property (blocking lanes first)."""
    properties = sorted_properties(runs)
    counts = lane_counts(properties)
    status = worst_exit(runs)
    status_class = f"exit-{status}" if status in (0, 1, 3) else "exit-x"
    title = f"replay report: {exit_meaning(status)}"
    show_run = len(runs) > 1
    rows = "".join(
        f'<div class="chunk n{len(chunk)}">'
        + "".join(_row(item, show_run=show_run) for item in chunk)
        + "</div>"
        for chunk in _chunks(properties)
    )
    run_blocks = "".join(_run_block(run) for run in runs)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        f'<header class="page"><h1>Replay report</h1><span class="verdict {status_class}">'
        f"{_e(exit_meaning(status))}</span><span class=muted>{len(properties)} properties in "
        f"{len(runs)} run{'s' if len(runs) != 1 else ''}</span></header>"
        f'<section class="runs">{run_blocks}</section>'
        f"{_legend(list(counts))}"
        f"{_filters(counts, len(properties))}"
        f'<main id="props">{rows}</main>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
