"""Reproducing one recorded replay, the pure part: the run log read back, which replay and
seed, the commands, the comparison with the record, the two outputs side by side."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from unit_factories import ASSERTION, OTHER_ASSERTION, replay

from orchestrator.core.digest import NULL_DIGEST
from orchestrator.core.replay_env import SidePath
from orchestrator.core.replay_run import Pins, ReplayOptions, RunPlan
from orchestrator.core.reproduce import (
    PDB_TIMEOUT_S,
    Mode,
    RecordedRun,
    choose_replay,
    compare,
    describe,
    environment_drift,
    fit,
    fold,
    import_roots,
    isolation_hint,
    parse_run_log,
    plan_reproduce,
    pytest_alone,
    recorded_extras,
    replay_seed,
    shown_calls,
    side_by_side,
    where,
    with_driver_flags,
)
from orchestrator.core.test_files import TestFileRule, TestOverlay
from orchestrator.errors import InputError, SchemaError
from orchestrator.model import Replay

PROP = "tests/test_budget.py::test_clock_budget"
BASE_SHA, PATCH_SHA, TESTS_SHA = "1" * 40, "2" * 40, "3" * 40

LABELS = st.sampled_from(["assert_pass", "assert_fail", "timeout", "harness_error"])


def run_plan(**changes: Any) -> RunPlan:
    options = ReplayOptions(
        repo=Path("/repo"),
        base="main",
        patch="HEAD",
        image="orchestrator-runner:latest",
        command="pytest -q tests/ -x",
        property_ids=(PROP,),
        replays=3,
        seed=11,
        fixture=Path("/in/event.json"),
    )
    return RunPlan(
        **{
            "run_id": "r1",
            "run_dir": Path("/runs/r1"),
            "started_at": datetime(2026, 1, 2, tzinfo=UTC),
            "options": options,
            "pins": Pins(
                base_rev=BASE_SHA,
                patch_rev=PATCH_SHA,
                image_ref=options.image,
                image_id="sha256:" + "a" * 64,
                repo_digests=(),
                fixture_digest="sha256:" + "f" * 64,
                origin_digest="sha256:" + "f" * 64,
                shrink=None,
                probe_version="1.0.0",
            ),
            "pytest_args": ("-q", "-x"),
            "limits": {"memory": "1g", "pids": 64, "cpus": 2.0, "tmp_size": "32m"},
            **changes,
        }
    )


def recorded_run(**changes: Any) -> RecordedRun:
    return parse_run_log({**run_plan().run_log(), **changes})


# -- the run log, read back ---------------------------------------------------------------


def test_what_replay_writes_is_what_reproduce_reads() -> None:
    run = parse_run_log(run_plan().run_log())
    assert run.revs == {"base": BASE_SHA, "patch": PATCH_SHA}
    assert (run.image_id, run.image_ref) == ("sha256:" + "a" * 64, "orchestrator-runner:latest")
    assert (run.seed, run.replays, run.timeout_s, run.isolation) == (11, 3, 60.0, "side")
    assert (run.command, run.repo, run.runner_id) == ("pytest -q tests/ -x", "/repo", "local")
    assert run.fixture_file == "fixture.json"
    assert run.has_fixture
    assert run.limits == {"memory": "1g", "pids": 64, "cpus": 2.0, "tmp_size": "32m"}
    assert run.overlay("base") is None
    assert run.overlay("patch") is None


def test_the_containers_environment_comes_back() -> None:
    plan = run_plan(
        environment={"HOME": "/tmp/home", "TZ": "Europe/Paris", "REPLAY_SEED": "11"},
        pythonpath={"base": ("/src/src", "/opt/orchestrator"), "patch": ("/opt/orchestrator",)},
        options=replace(run_plan().options, writable_tree=True),
        pins=replace(run_plan().pins, interpreter="/opt/venv/bin/python"),
    )
    run = parse_run_log(plan.run_log())
    assert run.environment == {"HOME": "/tmp/home", "TZ": "Europe/Paris", "REPLAY_SEED": "11"}
    assert run.pythonpath == {
        "base": ("/src/src", "/opt/orchestrator"),
        "patch": ("/opt/orchestrator",),
    }
    assert (run.interpreter, run.writable_tree) == ("/opt/venv/bin/python", True)


def test_the_tests_from_overlay_comes_back_per_side() -> None:
    overlay = TestOverlay(
        ref="patch",
        rev=TESTS_SHA,
        rule=TestFileRule(folders=("tests",)),
        files={"tests/test_budget.py": "b1", "tests/test_new.py": "b2"},
        removed={"base": {"tests/test_old.py": "b3"}, "patch": {}},
    )
    run = parse_run_log(run_plan(overlay=overlay).run_log())
    base, patch = run.overlay("base"), run.overlay("patch")
    assert base is not None
    assert patch is not None
    assert base.rev == patch.rev == TESTS_SHA
    assert base.write == patch.write == ("tests/test_budget.py", "tests/test_new.py")
    assert (base.remove, patch.remove) == (("tests/test_old.py",), ())
    # The same overlay the run laid over each side.
    assert (base, patch) == (overlay.side("base"), overlay.side("patch"))


def test_a_run_log_without_the_later_fields_still_reads() -> None:
    # A run folder of an earlier version: no fixture_file, limits, hash_seed or overlay.
    document = run_plan().run_log()
    for name in (
        "fixture_file", "limits", "hash_seed", "tests_from", "overlaid_files",
        "environment", "pythonpath", "interpreter", "writable_tree",
    ):  # fmt: skip
        document.pop(name)
    run = parse_run_log(document)
    assert run.environment == {}
    assert run.pythonpath == {}
    assert (run.interpreter, run.writable_tree) == (None, False)
    assert run.fixture_file is None
    assert run.has_fixture
    assert run.limits == {}
    assert run.tests_from is None


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("base_rev", None, "base_rev"),
        ("image_digest", 7, "image_digest"),
        ("seed", "0", "seed"),
        ("replays", None, "replays"),
        ("timeout_s", None, "timeout_s"),
        ("overlaid_files", [{"blob": "x"}], "overlaid_files[0]"),
        ("limits", [], "limits"),
        ("limits", {"pids": "many"}, "limits.pids"),
        ("environment", {"TZ": 1}, "environment.TZ"),
        ("pythonpath", {"base": "/src"}, "pythonpath.base"),
        ("writable_tree", "yes", "writable_tree"),
    ],
)
def test_a_run_log_missing_what_reproducing_needs_is_refused_by_name(field, value, named):
    with pytest.raises(SchemaError, match=named.replace("[", r"\[")):
        parse_run_log({**run_plan().run_log(), field: value})


def test_no_fixture_is_the_digest_of_null() -> None:
    assert not recorded_run(fixture_digest=NULL_DIGEST).has_fixture


# -- which replay, which seed ------------------------------------------------------------


@given(
    base=st.lists(LABELS, min_size=1, max_size=6),
    patch=st.lists(LABELS, min_size=1, max_size=6),
    which=st.sampled_from([("base",), ("patch",), ("base", "patch")]),
)
def test_by_default_the_first_replay_that_did_not_pass(base, patch, which) -> None:
    recorded = {
        "base": tuple(Replay(label=label) for label in base),
        "patch": tuple(Replay(label=label) for label in patch),
    }
    chosen = choose_replay(recorded, which, None)
    count = min(len(recorded[side]) for side in which)
    assert 1 <= chosen <= count
    before = [recorded[side][n].label for side in which for n in range(chosen - 1)]
    assert all(label == "assert_pass" for label in before)
    at = {recorded[side][chosen - 1].label for side in which}
    assert at != {"assert_pass"} or all(
        recorded[side][n].label == "assert_pass" for side in which for n in range(count)
    )


@given(count=st.integers(1, 8), asked=st.integers(-3, 12))
def test_an_asked_replay_must_be_one_the_run_had(count: int, asked: int) -> None:
    recorded = {"base": (Replay(label="assert_pass"),) * count, "patch": ()}
    if 1 <= asked <= count:
        assert choose_replay(recorded, ("base",), asked) == asked
    else:
        with pytest.raises(InputError, match=f"--replay {asked}: the run has replays 1 to"):
            choose_replay(recorded, ("base",), asked)


def test_a_side_without_replays_cannot_be_reproduced() -> None:
    with pytest.raises(InputError, match="no replay of it on base and patch"):
        choose_replay({"base": (Replay(label="assert_pass"),), "patch": ()}, ("base", "patch"), 1)


@given(run_seed=st.integers(-(2**40), 2**40), raw=st.one_of(st.none(), st.integers(0, 2**40)))
def test_a_replays_own_file_says_its_seed(run_seed: int, raw: int | None) -> None:
    document = None if raw is None else {"schema": "replay-run/1", "seed": raw}
    assert replay_seed(run_seed, document) == (run_seed if raw is None else raw)
    assert replay_seed(run_seed, {"seed": True}) == run_seed  # a boolean is no seed


def test_the_plan_pins_replay_n_of_each_side() -> None:
    run = recorded_run()
    recorded = {
        "base": (replay("assert_pass"), replay("assert_pass"), replay("assert_pass")),
        "patch": (replay("assert_pass"), replay("assert_fail"), replay("assert_fail")),
    }
    raw = {("patch", 2): {"seed": 2**32 + 3}}
    plan = plan_reproduce(
        run, PROP, recorded, raw, side="both", replay=None, mode=Mode.RUN, keep=False
    )
    assert [(s.side, s.rev, s.replay) for s in plan.sides] == [
        ("base", BASE_SHA, 2),
        ("patch", PATCH_SHA, 2),
    ]
    assert [(s.seed, s.hash_seed) for s in plan.sides] == [(11, "11"), (2**32 + 3, "3")]
    assert plan.sides[1].recorded.label == "assert_fail"
    # The command's options stay, its paths give way to the property.
    assert plan.pytest_args == ("-q", "-x")
    assert plan.driver_pytest_args == ("-q", "-x")
    assert plan.timeout_s == 60.0
    pdb = plan_reproduce(run, PROP, recorded, raw, side="patch", replay=3, mode=Mode.PDB, keep=True)
    assert [s.side for s in pdb.sides] == ["patch"]
    assert pdb.driver_pytest_args == ("-q", "-x", "--pdb")
    assert pdb.timeout_s == PDB_TIMEOUT_S


@given(
    counts=st.fixed_dictionaries({"base": st.integers(1, 7), "patch": st.integers(1, 7)}),
    side=st.sampled_from(["base", "patch", "both"]),
)
def test_the_plan_counts_the_replays_each_side_recorded(counts: dict[str, int], side: str) -> None:
    # A property decided on its screening has fewer replays than the run's --replays.
    recorded = {name: (replay("assert_pass"),) * count for name, count in counts.items()}
    plan = plan_reproduce(
        recorded_run(), PROP, recorded, {}, side=side, replay=1, mode=Mode.RUN, keep=False
    )
    assert plan.sides
    for chosen in plan.sides:
        assert chosen.recorded_count == counts[chosen.side]


def test_an_unknown_side_is_refused() -> None:
    with pytest.raises(InputError, match="--side"):
        plan_reproduce(
            recorded_run(), PROP, {}, {}, side="left", replay=None, mode=Mode.RUN, keep=False
        )


# -- the environment, as pinned ----------------------------------------------------------

SEGMENT = st.text(alphabet="abc_-", min_size=1, max_size=4)
ROOT_ENTRY = st.one_of(
    st.just("."),
    st.lists(SEGMENT, min_size=1, max_size=3).map("/".join),
    st.lists(SEGMENT, min_size=1, max_size=3).map(lambda parts: "/opt/" + "/".join(parts)),
)


@given(entries=st.lists(ROOT_ENTRY, max_size=4))
def test_import_roots_are_what_the_containers_pythonpath_was_made_of(entries) -> None:
    container = (*SidePath(entries=tuple(entries)).container_paths("/src"), "/opt/orchestrator")
    roots = import_roots(container, tree="/src", probe="/opt/orchestrator")
    assert roots == tuple(entries)
    assert (*SidePath(entries=roots).container_paths("/src"), "/opt/orchestrator") == container


def test_the_recorded_environment_is_the_defaults_and_its_extras() -> None:
    defaults = {"REPLAY_SEED": "3", "HOME": "/tmp/home", "TMPDIR": "/tmp"}
    recorded = {
        "REPLAY_SEED": "0",  # the replay's own: never taken over
        "REPLAY_FIXTURE": "/replay/fixture.json",
        "HOME": "/tmp/home",
        "TMPDIR": "/var/tmp",  # set otherwise
        "TZ": "Europe/Paris",  # --env
    }
    extras = recorded_extras(recorded, defaults)
    assert extras == (("TMPDIR", "/var/tmp"), ("TZ", "Europe/Paris"))
    built = {**defaults, **dict(extras)}
    assert (
        environment_drift(recorded, {**built, "REPLAY_FIXTURE": "/replay/fixture.json"}, seed=3)
        == ()
    )
    # A default the record lacks (written by an earlier version) is drift, named.
    assert environment_drift({"REPLAY_SEED": "3"}, {"REPLAY_SEED": "3", "X": "1"}, seed=3) == ("X",)
    assert environment_drift({}, built, seed=3) == ()  # nothing recorded to compare


# -- command lines -------------------------------------------------------------------------

WORDS = st.lists(st.text(st.characters(codec="ascii", exclude_characters="\0"), max_size=6))


@given(own=WORDS, pytest_words=WORDS, flags=WORDS)
def test_driver_flags_go_among_the_drivers_own_options(own, pytest_words, flags) -> None:
    own = [word for word in own if word != "--"]
    command = [*own, "--", *pytest_words]
    assert with_driver_flags(command, flags) == [*own, *flags, "--", *pytest_words]


def test_pytest_alone_is_a_shell_command_line() -> None:
    assert (
        pytest_alone("python3", ["-p", "no:cacheprovider", "-k", "a b", PROP])
        == "python3 -m pytest -p orchestrator.probe.plugin -p no:cacheprovider -k 'a b' " + PROP
    )


# -- the outcome ----------------------------------------------------------------------------


def test_the_same_label_at_the_same_assertion_is_reproduced() -> None:
    compared = compare(replay("assert_fail"), replay("assert_fail", calls={"clock": 3}))
    assert compared.same  # call counts are shown, not compared
    assert compared.detail == "assert_fail at tests/test_budget.py:9, as recorded"


def test_another_label_is_not_reproduced() -> None:
    compared = compare(replay("assert_fail"), replay("assert_pass"))
    assert not compared.same
    assert compared.detail == "recorded assert_fail at tests/test_budget.py:9, now assert_pass"


def test_another_assertion_is_not_reproduced() -> None:
    assert not compare(
        replay("assert_fail"), replay("assert_fail", assertion_id=OTHER_ASSERTION)
    ).same


def test_failures_compare_by_their_position_free_key_when_both_have_one() -> None:
    moved = ASSERTION.replace(":9:", ":19:")
    was = replay("assert_fail", assertion_key="k@test_clock_budget+3:AssertionError")
    now = replay("assert_fail", assertion_id=moved, assertion_key=was.assertion_key)
    assert compare(was, now).same
    assert not compare(was, replay("assert_fail", assertion_key="k@f+4:AssertionError")).same


def test_a_harness_error_must_have_the_same_reason() -> None:
    was = Replay(label="harness_error", reason="not_found")
    assert compare(was, Replay(label="harness_error", reason="not_found")).same
    other = compare(was, Replay(label="harness_error", reason="collection_error"))
    assert not other.same
    assert other.detail == (
        "recorded harness_error(not_found), now harness_error(collection_error)"
    )


@given(recorded=LABELS, observed=LABELS)
def test_a_different_label_never_counts_as_reproduced(recorded: str, observed: str) -> None:
    assert compare(Replay(label=recorded), Replay(label=observed)).same == (recorded == observed)


def test_where_an_assertion_failed() -> None:
    assert where(ASSERTION) == "tests/test_budget.py:9"
    assert where("no place") is None
    assert describe(Replay(label="timeout", reason="replay_timeout")) == "timeout(replay_timeout)"


def test_calls_shown_are_those_counted_or_that_moved() -> None:
    replays = [
        Replay(label="assert_pass", calls={"clock": 1, "open": 0, "sleep": 0}),
        Replay(label="assert_pass", calls={"clock": 1, "open": 0, "sleep": 2}),
    ]
    assert shown_calls(replays) == ("clock", "sleep")


def test_a_later_side_isolated_replay_says_what_is_not_recreated() -> None:
    assert isolation_hint(recorded_run(), 1) is None
    assert isolation_hint(recorded_run(isolation="container"), 3) is None
    hint = isolation_hint(recorded_run(), 3)
    assert hint is not None
    assert "after 2 other replays in one container" in hint


# -- side by side ---------------------------------------------------------------------------

TEXT = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300),
    st.text(alphabet="=_ -<>ab.[]%\n\t", max_size=400),  # rulers, padding, indentation
)


def squeezed(text: str) -> str:
    """The text without white space (trailing blanks go), each run of one padding character
    as one: what folding and fitting must keep."""
    joined = "".join(
        piece.replace("\r", "") for piece in text.expandtabs(8).replace("\r\n", "\n").split("\n")
    )
    return re.sub(r"([=_~<>#*-])\1+", r"\1", "".join(joined.split()))


@given(left=TEXT, right=TEXT, width=st.integers(0, 200))
def test_two_outputs_side_by_side_fit_and_lose_nothing_but_padding(
    left: str, right: str, width: int
) -> None:
    lines = side_by_side(left, right, headings=("base", "patch"), width=width)
    column = max(20, (width - 3) // 2)
    assert all(len(line) <= 2 * column + 3 for line in lines)
    assert all(line[column : column + 3] in (" | ", " |") for line in lines)
    lefts = [line[:column] for line in lines[2:]]
    rights = [line[column + 3 :] for line in lines[2:]]
    assert squeezed("".join(lefts)) == squeezed(left)
    assert squeezed("".join(rights)) == squeezed(right)


@given(
    indent=st.integers(0, 12),
    words=st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=5),
    column=st.integers(20, 90),
)
def test_fitting_keeps_indentation_and_words(indent: int, words: list[str], column: int) -> None:
    line = " " * indent + "=" * 30 + " " + " ".join(words) + " " + "=" * 30
    fitted = fit(line, column)
    assert fitted.startswith(" " * indent + "===")
    assert " ".join(words) in fitted
    assert len(fitted) <= max(column, len(line) - 54)  # only the rulers gave way


def test_a_ruler_and_a_progress_line_fit_their_column() -> None:
    ruler = "=" * 35 + " FAILURES " + "=" * 35
    assert fit(ruler, 48) == "=" * 19 + " FAILURES " + "=" * 19
    progress = "." + " " * 72 + "[100%]"
    assert fit(progress, 48) == "." + " " * 41 + "[100%]"
    assert fold("deps = <a b c d e>", 10) == ["deps = <a", "b c d e>"]


def test_side_by_side_headings_and_separator() -> None:
    lines = side_by_side("1 passed", "F\n1 failed", headings=("base", "patch"), width=43)
    assert lines == [
        "base                 | patch",
        "-------------------- | --------------------",
        "1 passed             | F",
        "                     | 1 failed",
    ]
