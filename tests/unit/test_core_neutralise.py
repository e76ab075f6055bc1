"""What a replay neutralises, decided from the one table (orchestrator/core/neutralise.py,
orchestrator/probe/neutral.py): the arguments, what a configuration asks, the run log's
record and the one log line; and that pytest's own parser accepts any configuration
built from the table's options once the probe's stand-ins are in."""

from __future__ import annotations

import shlex

import pytest
from _pytest.config.argparsing import Parser
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.neutralise import (
    Neutralisation,
    installed_from_packages,
    neutralised_fields,
    neutraliser_args,
    options_in,
    present_in,
    side_config,
)
from orchestrator.core.replay_env import pytest_addopts
from orchestrator.core.side_spec import ReplayPlan, driver_command, pytest_arguments
from orchestrator.probe.neutral import (
    APPEND,
    BLOCKED,
    BY_KEY,
    FLAG,
    OPTIONAL,
    PINNED,
    PLUGINS,
    SWITCHED_OFF,
    VALUE,
    Option,
    register_stand_ins,
)

ALL_OPTIONS = [(plugin.key, option) for plugin in PLUGINS for option in plugin.options]


def test_the_arguments_pin_the_runs_seed_and_come_after_the_commands_options():
    args = neutraliser_args(41)
    assert "--randomly-seed=41" in args
    assert args[:1] == ("--cov-reset",)
    assert args[args.index("no:rerunfailures") - 1 :][:2] == ("-p", "no:rerunfailures")
    full = pytest_arguments(("-q", "-n", "4"), ("tests/t.py::test_x",), seed=41)
    assert full[:5] == ("-p", "no:cacheprovider", "--continue-on-collection-errors", "-q", "-n")
    assert full[5:7] == ("4", "--cov-reset")  # the command's -n 4 first: ours win
    assert full[-1] == "tests/t.py::test_x"
    assert pytest_arguments(("-q",), (), seed=None) == (
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        "-q",
    )


def test_every_switch_is_an_option_of_its_own_plugin():
    """A switch the probe must stand in for where the plugin is absent is in the table."""
    for plugin in PLUGINS:
        names = {name for option in plugin.options for name in option.names}
        words = iter(plugin.args)
        for word in words:
            if word == "-p":
                assert next(words) == f"no:{plugin.entry_points[0]}"
                assert plugin.how == BLOCKED
                continue
            assert word.partition("=")[0] in names, (plugin.key, word)
        assert plugin.how in (SWITCHED_OFF, BLOCKED, PINNED) or not plugin.args


def test_a_replay_plan_neutralises_unless_told_not_to(tmp_path):
    plan = ReplayPlan(
        image_id="sha256:x",
        pytest_args=("-q",),
        property_ids=("t.py::test_a",),
        fixture=None,
        replays=2,
        timeout_s=5,
        seed=7,
        runner_id="r",
    )
    command = driver_command(plan, 2)
    assert command[command.index("--fresh-dir") + 1] == "/tmp/hypothesis"
    assert "--randomly-seed=7" in command
    older = driver_command(ReplayPlan(**{**plan.__dict__, "neutralise": False}), 2)
    assert "--fresh-dir" not in older
    assert "--cov-reset" not in older


@pytest.mark.parametrize(
    ("words", "found"),
    [
        (
            "--cov=pkg --cov-report=term -n 2 --reruns 3 -p randomly",
            {
                "cov": ("--cov=pkg", "--cov-report=term"),
                "xdist": ("-n", "2"),
                "rerunfailures": ("--reruns", "3"),
                "randomly": ("-p", "randomly"),
            },
        ),
        ("-n2 -q --lf tests/", {"xdist": ("-n2",), "cacheprovider": ("--lf",)}),
        ("--cov --cov-branch tests", {"cov": ("--cov", "--cov-branch")}),
        ("--cov src tests", {"cov": ("--cov", "src")}),
        (
            "-p no:randomly -pxdist -x",
            {"xdist": ("-p", "xdist"), "randomly": ("-p", "no:randomly")},
        ),
        (
            "--only-rerun Timeout --reruns=2",
            {"rerunfailures": ("--only-rerun", "Timeout", "--reruns=2")},
        ),
        ("-q -- -n 2", {}),  # after --: node ids and paths
        ("--numbers -nx --dist", {"xdist": ("-nx", "--dist")}),
    ],
)
def test_options_in_a_configuration(words, found):
    assert options_in(shlex.split(words)) == found


def test_the_project_images_label_says_what_is_installed():
    label = "Hypothesis==6.1 pytest==8.3.5 pytest_cov==7.1.0 pytest-xdist==3.8.0 tinydep==1.2"
    assert installed_from_packages(label) == ("cov", "xdist", "hypothesis")
    assert installed_from_packages("") == ()
    assert installed_from_packages(None) is None


def test_addopts_read_as_pytest_would_at_the_root():
    pyproject = b'[tool.pytest.ini_options]\naddopts = "--cov=pkg -n 2"\n'
    assert pytest_addopts({"pyproject.toml": pyproject}) == (
        ("--cov=pkg", "-n", "2"),
        "pyproject.toml",
    )
    listed = b'[tool.pytest.ini_options]\naddopts = ["--reruns", "3"]\n'
    assert pytest_addopts({"pyproject.toml": listed}) == (("--reruns", "3"), "pyproject.toml")
    ini = b"[pytest]\naddopts = -p randomly\n    --lf\n"
    assert pytest_addopts({"pytest.ini": ini, "pyproject.toml": pyproject}) == (
        ("-p", "randomly", "--lf"),
        "pytest.ini",
    )
    setup = b"[tool:pytest]\naddopts = --cov\n"
    assert pytest_addopts({"setup.cfg": setup}) == (("--cov",), "setup.cfg")
    assert pytest_addopts({}) == ((), None)


def test_the_run_logs_record_and_the_one_line():
    base = side_config(("--cov=pkg", "-n", "2"), "pyproject.toml", ("--reruns", "1"), ("-q",))
    patch = side_config((), None, (), ("-q",))
    record = Neutralisation(seed=3, sides={"base": base, "patch": patch}, installed=("cov",))
    document = record.to_json()
    assert document["args"] == list(neutraliser_args(3))
    assert document["installed"] == ["cov"]
    assert document["plugins"]["randomly"]["args"] == [
        "--randomly-seed=3",
        "--randomly-dont-reorganize",
    ]
    assert document["plugins"]["rerunfailures"]["how"] == BLOCKED
    assert document["config"]["base"] == {
        "ini_file": "pyproject.toml",
        "found": {
            "addopts": {"cov": ["--cov=pkg"], "xdist": ["-n", "2"]},
            "PYTEST_ADDOPTS": {"rerunfailures": ["--reruns", "1"]},
        },
    }
    assert document["config"]["patch"] == {"ini_file": None, "found": {}}
    asked = record.asked()
    assert asked["cov"] == ["base: addopts (pyproject.toml): --cov=pkg"]
    line = neutralised_fields(("hypothesis", "cov"), asked)
    assert line is not None
    assert line["plugins"] == "cov,hypothesis"
    assert line["detail"].startswith("cov: no measurement, nothing written (--cov-reset) [base: ")
    assert neutralised_fields((), asked) is None
    # The cache provider has no entry point: said when a configuration asks for it.
    cached = Neutralisation(seed=0, sides={"base": side_config(("--lf",), "tox.ini", (), ())})
    said = neutralised_fields((), cached.asked())
    assert said is not None
    assert said["plugins"] == "cacheprovider"


def test_what_the_replays_had_comes_from_their_results():
    docs = [
        {"status": "completed", "result": {"neutralised": ["xdist", "cov"]}},
        {"status": "completed", "result": {"neutralised": ["hypothesis", 3]}},
        {"status": "no_result", "result": None},
        {"status": "completed", "result": {}},  # an older probe
        None,
    ]
    assert present_in(docs) == ("cov", "xdist", "hypothesis")


# ------------------------------------------------------------------ the parser


def _value(option: Option) -> st.SearchStrategy[list[str]]:
    value = st.sampled_from(["0", "3", "pkg", "src/pkg", "a.b", "Timeout", "term:skip"])
    name = st.sampled_from(option.names)
    if option.reads == FLAG:
        return name.map(lambda n: [n])
    # An optional value takes the next word that is no option (a path too): the property
    # gives it one; a bare one before an option is in the examples above.
    return st.one_of(
        st.tuples(name, value).map(lambda p: [p[0], p[1]]),
        st.tuples(name, value).map(lambda p: [f"{p[0]}={p[1]}"]),
    )


def _pytest_parser() -> Parser:
    """A parser with pytest's own `-p` (the rest of pytest's options plays no part)."""
    parser = Parser(_ispytest=True)
    parser.getgroup("general")._addoption("-p", action="append", dest="plugins", default=[])
    return parser


@st.composite
def configurations(draw: st.DrawFn) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Words of a configuration made of the table's options (values included), with paths
    between them: the words, the paths, and the words each plugin owns."""
    words: list[str] = []
    paths: list[str] = []
    owned: dict[str, list[str]] = {}
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            path = draw(st.sampled_from(["tests", "tests/test_a.py", "src/pkg"]))
            paths.append(path)
            words.append(path)
            continue
        key, option = draw(st.sampled_from(ALL_OPTIONS))
        taken = draw(_value(option))
        words.extend(taken)
        owned.setdefault(key, []).extend(taken)
    return words, paths, owned


@given(configurations(), st.integers(0, 2**32 - 1))
def test_any_configuration_of_the_tables_options_parses_once_neutralised(config, seed):
    """No plugin of the table installed (the stand-ins then hold every option): the
    project's words and the neutralisers parse as pytest would parse them, and the paths
    stay pytest's positional arguments."""
    words, paths, owned = config
    parser = _pytest_parser()
    register_stand_ins(parser)
    namespace = parser.parse([*words, *neutraliser_args(seed)])
    assert namespace.file_or_dir == paths
    assert {key: list(found) for key, found in options_in(words).items()} == owned


def test_a_stand_in_never_takes_a_name_already_registered():
    parser = _pytest_parser()
    parser.addoption("--reruns", type=int, default=0, dest="own_reruns")  # a conftest's own
    added = register_stand_ins(parser)
    assert "--reruns" not in added
    assert {"--reruns-delay", "-n", "--cov", "--lf"} <= set(added)
    namespace = parser.parse(["--reruns", "4"])
    assert namespace.own_reruns == 4
    assert "reruns" in parser._inidict
    assert "cache_dir" in parser._inidict


def test_the_table_reads_options_as_argparse_does():
    assert {option.reads for _, option in ALL_OPTIONS} == {FLAG, VALUE, APPEND, OPTIONAL}
    assert BY_KEY["xdist"].options[0].names == ("-n", "--numprocesses")
