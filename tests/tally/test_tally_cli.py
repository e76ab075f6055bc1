"""`orchestrator tally` against a real SQLite ledger filled with known events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tally_events import EXPECTED_EVENTS_COUNTED, EXPECTED_THREE_WEEKS, KNOWN_EVENTS, NOW

from orchestrator.adapters.ledger import Ledger
from orchestrator.cli import main
from orchestrator.commands.tally import to_markdown
from orchestrator.core.tally import COUNTS, tally, tally_from_json
from orchestrator.services.tally import PANELS, build_figure, figure_series, write_png

KEYS = [key for key, _ in COUNTS]
NOW_TEXT = NOW.isoformat()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.open(url) as ledger:
        for known in KNOWN_EVENTS:
            ledger.append_event(known)
    return url


def test_json_counts_match_the_known_events(
    capsys: pytest.CaptureFixture[str], ledger_url: str
) -> None:
    status, out, _ = run(
        capsys, "tally", "--ledger", ledger_url, "--now", NOW_TEXT, "--weeks", "3", "--json"
    )
    assert status == 0
    doc = json.loads(out)
    assert doc["schema"] == "tally/1"
    got = [(w["week"], *(w[key] for key in KEYS)) for w in doc["weeks"]]
    assert got == EXPECTED_THREE_WEEKS


def test_png_is_written_and_plots_exactly_the_json(
    capsys: pytest.CaptureFixture[str], ledger_url: str, tmp_path: Path
) -> None:
    png = tmp_path / "out" / "tally.png"
    status, out, _ = run(
        capsys, "tally", "--ledger", ledger_url, "--now", NOW_TEXT, "--weeks", "3",
        "--json", "--png", str(png),
    )  # fmt: skip
    assert status == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000
    doc = json.loads(out)
    assert doc["png"] == str(png)

    # The figure drawn from the JSON document holds the JSON's series, panel by panel...
    from_json = tally_from_json(doc)
    figure = build_figure(from_json)
    series = figure_series(figure)
    assert series == {key: tuple(w[key] for w in doc["weeks"]) for key in KEYS}
    assert len(figure.axes) == len(PANELS) == 4
    assert [tick.get_text() for tick in figure.axes[-1].get_xticklabels()] == [
        "2026-W45", "2026-W46", "2026-W47",
    ]  # fmt: skip
    assert all(ax.get_ylabel() == "count" for ax in figure.axes)
    assert figure.axes[-1].get_xlabel() == "ISO week (UTC)"
    # ...and rendering it gives the very bytes the command wrote.
    again = tmp_path / "again.png"
    write_png(from_json, again)
    assert again.read_bytes() == data


def test_a_changed_count_changes_the_png(ledger_url: str, tmp_path: Path) -> None:
    from orchestrator.services.tally import load_tally

    result = load_tally(ledger_url, now=NOW, weeks=3)
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    write_png(result, first)
    with Ledger.open(ledger_url) as ledger:
        ledger.append_event(KNOWN_EVENTS[-3])  # one more overdue freeze event...
        from orchestrator.model import Event, EventKind

        ledger.append_event(
            Event(id=None, at=NOW, kind=EventKind.OVERDUE, code="overdue", subject="t.py::f9",
                  detail={"freeze_id": 9})  # ...of a new freeze
        )  # fmt: skip
    changed = load_tally(ledger_url, now=NOW, weeks=3)
    assert changed.weeks[-1].freezes_live_after_expiry == 2
    write_png(changed, second)
    assert first.read_bytes() != second.read_bytes()


def test_markdown_table_for_the_step_summary(
    capsys: pytest.CaptureFixture[str], ledger_url: str
) -> None:
    status, out, _ = run(
        capsys, "tally", "--ledger", ledger_url, "--now", NOW_TEXT, "--weeks", "3", "--markdown"
    )
    assert status == 0
    assert "| 2026-W46 | 2 | 0 | 1 | 0 | 2 |" in out.splitlines()
    assert "| ISO week | Properties drafted | Killed a mutant |" in out


def test_empty_ledger_prints_zeros_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    status, out, _ = run(capsys, "tally", "--ledger", url, "--now", NOW_TEXT)
    assert status == 0
    lines = out.splitlines()
    assert len([line for line in lines if line.startswith("2026-W")]) == 8
    assert "no events in the ledger for these 8 weeks: all zero" in out
    status, out, _ = run(capsys, "tally", "--ledger", url, "--now", NOW_TEXT, "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["empty"] is True
    assert set(doc["totals"].values()) == {0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--now", "yesterday"], "--now 'yesterday': not an ISO-8601"),
        (["--markdown", "--json"], "choose one"),
        (["--weeks", "0"], "0"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    png = tmp_path / "never.png"
    status, out, err = run(capsys, "tally", "--ledger", url, "--png", str(png), *args)
    assert status == 2
    assert message in err
    assert "Traceback" not in err
    assert out == ""
    assert not png.exists()


def test_markdown_table_has_a_row_per_week_and_the_totals() -> None:
    text = to_markdown(tally(KNOWN_EVENTS, now=NOW, weeks=3))
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 3 + 1  # header, rule, weeks, totals
    assert table[2] == "| 2026-W45 | 3 | 1 | 1 | 1 | 0 |"
    assert table[-1] == "| **total** | **7** | **3** | **2** | **3** | **3** |"
    assert f"{EXPECTED_EVENTS_COUNTED} events from 2026-W45 to 2026-W47" in text


def test_the_text_table_has_stable_columns_a_row_per_week_and_the_totals(
    capsys: pytest.CaptureFixture[str], ledger_url: str
) -> None:
    status, out, _ = run(capsys, "tally", "--ledger", ledger_url, "--now", NOW_TEXT, "--weeks", "3")
    assert status == 0
    assert "\x1b[" not in out  # not a terminal: no colour codes
    header, *weeks, total = [line.split() for line in out.splitlines()]
    assert header == ["week", "drafted", "killed", "shrink_changed", "calls_moved", "live_expired"]
    assert [(w[0], *map(int, w[1:])) for w in weeks] == EXPECTED_THREE_WEEKS
    sums = [sum(row[1 + i] for row in EXPECTED_THREE_WEEKS) for i in range(len(KEYS))]
    assert total == ["total", *map(str, sums)]
    assert all(line == line.rstrip() for line in out.splitlines())


def test_an_empty_tally_in_markdown_says_every_count_is_zero() -> None:
    assert "every count is zero" in to_markdown(tally([], now=NOW, weeks=2))


def test_png_without_matplotlib_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without it sees
    ledger = tmp_path / "l.db"
    png = tmp_path / "tally.png"
    status, out, err = run(capsys, "tally", "--ledger", f"sqlite:///{ledger}", "--png", str(png))
    assert status == 2
    assert out == ""
    assert err.strip() == (
        "orchestrator: error: --png needs matplotlib, an optional extra: "
        "pip install 'orchestrator[plot]'"
    )
    assert not png.exists()
    assert not ledger.exists()  # refused before the ledger is opened
