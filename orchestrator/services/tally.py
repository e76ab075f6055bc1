"""Tally wiring: read the ledger's events, count them (pure core), draw the weekly plot."""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.core.tally import COUNTS, Tally, tally, window_start
from orchestrator.files import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# One panel per count of lanes.md section 7; count 1 draws two bar series side by side.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "1. Properties drafted vs killed a mutant",
        ("properties_drafted", "properties_killed_mutant"),
    ),
    ("2. Second shrink changed the minimal digest", ("shrink_changed_digest",)),
    ("3. Output matched, call count moved", ("output_matched_calls_moved",)),
    ("4. Freezes still live after expiry", ("freezes_live_after_expiry",)),
)
_HEADINGS = dict(COUNTS)
_COLOURS = ("#3b6ea5", "#d1495b", "#edae49", "#00798c", "#66a182")


def load_tally(ledger_url: str, *, now: datetime, weeks: int) -> Tally:
    """Read only the window's events from the ledger and count them."""
    from orchestrator.adapters.ledger import Ledger

    with Ledger.open(ledger_url) as ledger:
        events = ledger.events(since=window_start(now, weeks))
    return tally(events, now=now, weeks=weeks)


def build_figure(result: Tally) -> Figure:
    """Four stacked panels sharing the ISO-week axis; integer counts on each y axis."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    labels = [week.week for week in result.weeks]
    positions = list(range(len(labels)))
    figure = Figure(figsize=(max(6.0, 0.9 * len(labels) + 2.0), 10.0), layout="constrained")
    axes = figure.subplots(len(PANELS), 1, sharex=True)
    title = "Counts worth keeping, per ISO week"
    if result.empty:
        title += " (no events: all zero)"
    figure.suptitle(title)
    colour = iter(_COLOURS)
    for ax, (panel_title, keys) in zip(axes, PANELS, strict=True):
        width = 0.8 / len(keys)
        for offset, key in enumerate(keys):
            shift = (offset - (len(keys) - 1) / 2) * width
            bars = ax.bar(
                [p + shift for p in positions],
                result.series(key),
                width=width,
                label=_HEADINGS[key],
                color=next(colour),
            )
            heights = result.series(key)
            ax.bar_label(bars, labels=[str(h) if h else "" for h in heights], fontsize=8)
        ax.set_title(panel_title, fontsize=10, loc="left")
        ax.set_ylabel("count")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0, top=max(1, *(max(result.series(k), default=0) for k in keys)) * 1.15)
        ax.grid(axis="y", alpha=0.3)
        if len(keys) > 1:
            ax.legend(fontsize=8, loc="upper left")
    axes[-1].set_xticks(positions, labels, rotation=45, ha="right")
    axes[-1].set_xlabel("ISO week (UTC)")
    return figure


def figure_series(figure: Figure) -> dict[str, tuple[int, ...]]:
    """The bar heights per count key, read back from a figure built by ``build_figure``."""
    from matplotlib.container import BarContainer

    keys = {heading: key for key, heading in _HEADINGS.items()}
    series: dict[str, tuple[int, ...]] = {}
    for ax in figure.axes:
        for container in ax.containers:
            if isinstance(container, BarContainer):
                key = keys[str(container.get_label())]
                series[key] = tuple(round(bar.get_height()) for bar in container.patches)
    return series


def write_png(result: Tally, path: Path) -> Figure:
    """Render the figure and write it atomically; returns the figure drawn."""
    figure = build_figure(result)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    write_atomic(path, buffer.getvalue())
    return figure
