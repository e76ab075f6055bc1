"""[tool.orchestrator]: parsed from text, checked key by key, the command line over it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.project_config import (
    DEFAULT_COMMAND,
    DEFAULT_REPLAYS,
    DEFAULT_TIMEOUT_S,
    EvidenceGiven,
    ImageBuildInputs,
    ProjectConfig,
    image_build_inputs,
    parse_config,
    replay_settings,
)
from orchestrator.errors import InputError

FULL = """\
[project]
name = "demo"

[tool.orchestrator]
command = "python -m pytest -q -p no:cacheprovider"
test-paths = ["tests", "more tests"]
image = "orchestrator-project/demo:0123456789abcdef"
replays = 3
timeout = 12.5
pythonpath = ["src/"]
env = { TZ = "UTC", GREETING = "hi" }

[tool.orchestrator.image-build]
requirements = ["requirements/tests.txt"]
extras = ["test"]
groups = ["dev"]
pip = ["hypothesis>=6"]
apt = ["libxml2"]
python-image = "python:3.12-slim"
"""


def test_a_full_table_is_read():
    config = parse_config(FULL)
    assert config.command == "python -m pytest -q -p no:cacheprovider"
    assert config.test_paths == ("tests", "more tests")
    assert config.image == "orchestrator-project/demo:0123456789abcdef"
    assert config.replays == 3
    assert config.timeout_s == 12.5
    assert config.pythonpath == ("src",)
    assert config.env == (("TZ", "UTC"), ("GREETING", "hi"))
    assert config.image_build == ImageBuildInputs(
        requirements=("requirements/tests.txt",),
        extras=("test",),
        groups=("dev",),
        pip=("hypothesis>=6",),
        apt=("libxml2",),
        python_image="python:3.12-slim",
    )
    assert config.keys() == (
        "command", "test-paths", "image", "replays", "timeout", "pythonpath", "env",
        "image-build",
    )  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [None, "", '[project]\nname = "x"\n', "[tool.ruff]\nline-length = 100\n"],
)
def test_no_file_or_no_table_is_an_empty_configuration(text):
    assert parse_config(text) == ProjectConfig()
    assert parse_config(text).keys() == ()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("comand = 'pytest'", "'comand'"),
        ("replays = 0", "replays"),
        ("replays = true", "replays"),
        ("replays = 2.5", "replays"),
        ("timeout = 0", "timeout"),
        ("timeout = 'soon'", "timeout"),
        ("timeout = nan", "timeout"),
        ("replays = 1000000000", "replays"),  # bounded as --replays is
        ("timeout = 1e308", "timeout"),
        ("command = ''", "command"),
        ("command = ['pytest']", "command"),
        ("test-paths = 'tests'", "test-paths"),
        ("pythonpath = ['a:b']", "pythonpath"),
        ("env = ['TZ=UTC']", "env"),
        ("env = { TZ = 1 }", "env"),
        ("env = { REPLAY_SEED = '3' }", "REPLAY_SEED"),
        ("image = 'Not A Reference'", "image"),
        ("image-build = 'x'", "image-build"),
        ("image-build = { extra = ['x'] }", "'extra'"),
        ("image-build = { apt = 'libxml2' }", "apt"),
        ("false-block-rate = 0", "false-block-rate"),
        ("false-block-rate = 1.5", "false-block-rate"),
        ("false-block-rate = 'low'", "false-block-rate"),
        ("evidence-cap = 0", "evidence-cap"),
        ("evidence-cap = 201", "evidence-cap"),  # bounded as --evidence-cap is
        ("evidence-cap = 2.5", "evidence-cap"),
    ],
)
def test_a_bad_key_is_refused_in_one_line_naming_it(body, named):
    with pytest.raises(InputError) as caught:
        parse_config(f"[tool.orchestrator]\n{body}\n")
    message = str(caught.value)
    assert named in message
    assert "\n" not in message
    assert message.startswith("pyproject.toml [tool.orchestrator")


def test_invalid_toml_and_a_non_table_are_refused():
    with pytest.raises(InputError, match="not valid TOML"):
        parse_config("[tool.orchestrator\n")
    with pytest.raises(InputError, match="expected a table"):
        parse_config('[tool]\norchestrator = "yes"\n')


# ---------------------------------------------------------------- round trips

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-./ ", min_size=1, max_size=12)
folders = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=8)
# "K..." is never a name the replay sets itself
keys = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", max_size=6).map("K".__add__)


@st.composite
def tables(draw):
    table = {}
    if draw(st.booleans()):
        table["command"] = draw(words.filter(str.strip))
    if draw(st.booleans()):
        table["test-paths"] = draw(st.lists(folders, max_size=3))
    if draw(st.booleans()):
        table["replays"] = draw(st.integers(min_value=1, max_value=1000))
    if draw(st.booleans()):
        table["timeout"] = draw(
            st.floats(min_value=0.1, max_value=86400, allow_nan=False, allow_infinity=False)
        )
    if draw(st.booleans()):
        table["pythonpath"] = draw(st.lists(folders, max_size=3))
    if draw(st.booleans()):
        table["env"] = draw(st.dictionaries(keys, words, max_size=3))
    return table


def toml_of(table):
    # json's strings and numbers are TOML's too (for these alphabets)
    lines = ["[tool.orchestrator]"]
    for key, value in table.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


@given(table=tables())
def test_what_is_written_is_what_is_read(table):
    config = parse_config(toml_of(table))
    assert config.command == table.get("command")
    assert config.test_paths == (tuple(table["test-paths"]) if "test-paths" in table else None)
    assert config.replays == table.get("replays")
    assert config.timeout_s == table.get("timeout")
    assert config.pythonpath == (tuple(table["pythonpath"]) if "pythonpath" in table else None)
    assert config.env == (tuple(table["env"].items()) if "env" in table else None)
    assert set(config.keys()) == set(table)


@given(
    table=tables(),
    command=st.none() | words.filter(str.strip),
    replays=st.none() | st.integers(min_value=1, max_value=50),
    timeout=st.none() | st.floats(min_value=0.1, max_value=100),
    pythonpath=st.none() | st.lists(folders, max_size=2).map(tuple),
)
def test_the_command_line_wins_and_the_table_beats_the_defaults(
    table, command, replays, timeout, pythonpath
):
    config = parse_config(toml_of(table))
    settings = replay_settings(
        config,
        command=command,
        image=None,
        replays=replays,
        timeout_s=timeout,
        pythonpath=pythonpath,
        env=None,
    )
    assert settings.replays == (replays or table.get("replays") or DEFAULT_REPLAYS)
    assert settings.timeout_s == (timeout or table.get("timeout") or DEFAULT_TIMEOUT_S)
    # Who set it: a whole suite derives its own deadline only where nobody did.
    expected_source = None
    if timeout is not None:
        expected_source = "--timeout"
    elif table.get("timeout"):
        expected_source = "pyproject.toml [tool.orchestrator] timeout"
    assert settings.timeout_source == expected_source
    if pythonpath is not None:
        assert settings.pythonpath == pythonpath
    else:
        assert settings.pythonpath == tuple(table.get("pythonpath", ()))
    if command is not None:
        assert settings.command == command  # the table's test-paths never go after it
    else:
        assert settings.command.startswith(table.get("command", DEFAULT_COMMAND))
    assert settings.image is None


def test_test_paths_go_after_the_command_quoted():
    config = parse_config(FULL)
    settings = replay_settings(
        config, command=None, image=None, replays=None, timeout_s=None, pythonpath=None, env=None
    )
    assert settings.command == "python -m pytest -q -p no:cacheprovider tests 'more tests'"
    assert settings.image == "orchestrator-project/demo:0123456789abcdef"
    assert settings.env == (("TZ", "UTC"), ("GREETING", "hi"))
    given_env = (("TZ", "Europe/Paris"),)
    assert (
        replay_settings(
            config,
            command=None,
            image="x:1",
            replays=None,
            timeout_s=None,
            pythonpath=None,
            env=given_env,
        ).env
        == given_env  # replaced whole, like every option
    )


def test_image_build_options_replace_the_tables_keys_one_by_one():
    config = parse_config(FULL)
    merged = image_build_inputs(config, ImageBuildInputs(extras=("docs",), python_image=None))
    assert merged.extras == ("docs",)
    assert merged.requirements == ("requirements/tests.txt",)
    assert merged.python_image == "python:3.12-slim"
    assert image_build_inputs(ProjectConfig(), ImageBuildInputs()) == ImageBuildInputs()


def test_the_evidence_rule_is_read_and_the_command_line_wins():
    config = parse_config("[tool.orchestrator]\nfalse-block-rate = 0.05\nevidence-cap = 40\n")
    assert (config.false_block_rate, config.evidence_cap) == (0.05, 40)
    assert config.keys() == ("false-block-rate", "evidence-cap")
    common = {
        "command": None, "image": None, "replays": None, "timeout_s": None,
        "pythonpath": None, "env": None,
    }  # fmt: skip
    table = replay_settings(config, **common)
    assert (table.false_block_rate, table.evidence_cap) == (0.05, 40)
    given = replay_settings(
        config, **common, evidence=EvidenceGiven(false_block_rate=0.001, cap=10)
    )
    assert (given.false_block_rate, given.evidence_cap) == (0.001, 10)
    default = replay_settings(ProjectConfig(), **common)
    assert (default.false_block_rate, default.evidence_cap) == (0.01, 20)
