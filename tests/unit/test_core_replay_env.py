"""The container environment of a replay, as values: variables, PYTHONPATH per side, and the
labels of a write the read-only file system refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import replay_env
from orchestrator.core.evidence import parse_evidence
from orchestrator.core.labels import (
    READ_ONLY_FS,
    READ_ONLY_TREE,
    ContainerFacts,
    ReplayFile,
    label_replay,
    read_only_replay,
)
from orchestrator.errors import InputError
from orchestrator.model import Evidence, Replay
from orchestrator.probe import RESULT_SCHEMA, RUN_SCHEMA


def test_the_variables_suites_expect_and_no_tz_unless_asked():
    env = replay_env.replay_variables(seed=3, fixture=None)
    assert env == {
        "REPLAY_SEED": "3",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "HYPOTHESIS_STORAGE_DIRECTORY": "/tmp/hypothesis",
    }
    with_tz = replay_env.replay_variables(seed=3, fixture="/f.json", extra=(("TZ", "UTC"),))
    assert (with_tz["TZ"], with_tz["REPLAY_FIXTURE"]) == ("UTC", "/f.json")


def test_home_and_hypothesis_live_in_the_tmpfs_and_home_is_made():
    env = replay_env.replay_variables(seed=0, fixture=None)
    assert env["HOME"].startswith(env["TMPDIR"] + "/")
    assert env["HOME"] in replay_env.MADE_DIRS
    assert env["HYPOTHESIS_STORAGE_DIRECTORY"].startswith(env["TMPDIR"] + "/")


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["TZ"], "expected KEY=VALUE"),
        (["1X=a"], "expected KEY=VALUE"),
        (["PYTHONPATH=/x"], "--pythonpath"),
        (["REPLAY_SEED=1"], "--seed"),
        (["PYTHONHASHSEED=1"], "pins it"),
        (["A=1", "A=2"], "given twice"),
    ],
)
def test_bad_env_items_are_refused(items, message):
    with pytest.raises(InputError, match=message):
        replay_env.parse_env(items)


@given(
    st.lists(
        st.tuples(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), st.text(max_size=10)),
        unique_by=lambda pair: pair[0],
        max_size=5,
    )
)
def test_env_items_round_trip(pairs):
    pairs = [(key, value) for key, value in pairs if key not in ("PYTHONPATH", "PYTHONHASHSEED")]
    pairs = [(key, value) for key, value in pairs if not key.startswith("REPLAY_")]
    assert replay_env.parse_env([f"{key}={value}" for key, value in pairs]) == tuple(pairs)


def _files() -> dict[str, bytes | None]:
    """No configuration file at all."""
    return dict.fromkeys(replay_env.INI_FILES)


def test_pytest_pythonpath_follows_pytests_own_choice_of_file():
    pyproject = '[tool.pytest.ini_options]\npythonpath = ["lib", "."]\n'
    files = {**_files(), "pyproject.toml": pyproject.encode()}
    assert replay_env.pytest_pythonpath(files) == (("lib", "."), "pyproject.toml")
    files["pytest.ini"] = b"[pytest]\naddopts = -q\n"  # pytest.ini wins, even without it
    assert replay_env.pytest_pythonpath(files) == ((), "pytest.ini")
    native = {**_files(), "pyproject.toml": b'[tool.pytest]\npythonpath = ["src"]\n'}
    assert replay_env.pytest_pythonpath(native) == (("src",), "pyproject.toml")
    tox = {**_files(), "tox.ini": b"[pytest]\npythonpath = a b\n"}
    assert replay_env.pytest_pythonpath(tox) == (("a", "b"), "tox.ini")
    cfg = {**_files(), "setup.cfg": b"[tool:pytest]\npythonpath = x\n"}
    assert replay_env.pytest_pythonpath(cfg) == (("x",), "setup.cfg")
    assert replay_env.pytest_pythonpath(_files()) == ((), None)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", '[tool.setuptools.packages.find]\nwhere = ["src"]\n'),
        ("pyproject.toml", '[tool.setuptools]\npackage-dir = {"" = "src"}\n'),
        ("pyproject.toml", '[tool.hatch.build.targets.wheel]\npackages = ["src/pkg"]\n'),
        ("pyproject.toml", '[tool.poetry]\npackages = [{include = "pkg", from = "src"}]\n'),
        ("pyproject.toml", '[tool.pdm.build]\npackage-dir = "src"\n'),
        ("setup.cfg", "[options]\npackage_dir =\n    =src\n"),
        ("setup.cfg", "[options.packages.find]\nwhere = src\n"),
    ],
)
def test_declared_package_folders_are_import_roots(name, text):
    files = {**_files(), name: text.encode()}
    found = replay_env.side_pythonpath(files, ())
    assert found.entries == ("src",)
    assert "package folder" in found.reasons[0]


@pytest.mark.parametrize(
    ("paths", "layout"),
    [
        (("src/pkg/__init__.py", "src/pkg/core.py"), True),
        (("src/module.py",), True),
        (("src/__init__.py", "src/x.py"), False),  # src is a package of the root
        (("src/native.c",), False),
        ((), False),
    ],
)
def test_a_src_layout_is_found_in_the_tree(paths, layout):
    found = replay_env.side_pythonpath(_files(), paths)
    assert found.entries == (("src",) if layout else ())


@given(st.lists(st.from_regex(r"[a-z]{1,5}(/[a-z]{1,5})?", fullmatch=True), max_size=4))
def test_pythonpath_keeps_the_given_folders_first_in_order_once(extra):
    files = {**_files(), "pyproject.toml": b'[tool.pytest.ini_options]\npythonpath = "lib"\n'}
    found = replay_env.side_pythonpath(files, ("src/p/__init__.py",), extra)
    unique = list(dict.fromkeys(extra))
    assert list(found.entries[: len(unique)]) == unique
    assert len(found.entries) == len(set(found.entries)) == len(found.reasons)
    assert {"lib", "src"} <= set(found.entries)
    assert all(path.startswith("/src/") for path in found.container_paths("/src"))


def test_pythonpath_items_are_single_folders():
    assert replay_env.check_pythonpath(["lib/", "/opt/x"]) == ("lib", "/opt/x")
    with pytest.raises(InputError, match="one folder"):
        replay_env.check_pythonpath(["a:b"])


# ---------------------------------------------------------------- read-only writes


def _entry(label: str, read_only: object, message: str = "boom") -> dict[str, object]:
    return {"nodeid": "t.py::t", "label": label, "message": message, "read_only": read_only}


@pytest.mark.parametrize("label", ["assert_fail", "harness_error"])
def test_a_write_into_the_read_only_tree_is_a_harness_error_naming_the_flag(label):
    replay = read_only_replay(_entry(label, {"path": "/src/.cache/x", "in_rootdir": True}))
    assert replay is not None
    assert (replay.label, replay.reason) == ("harness_error", READ_ONLY_TREE)
    assert "--writable-tree" in (replay.message or "")
    assert "/src/.cache/x" in (replay.message or "")


def test_a_write_elsewhere_on_the_image_is_read_only_fs():
    replay = read_only_replay(_entry("assert_fail", {"path": "/usr/lib/x", "in_rootdir": False}))
    assert replay is not None
    assert (replay.label, replay.reason) == ("harness_error", READ_ONLY_FS)
    assert "$TMPDIR" in (replay.message or "")


def test_a_session_that_died_on_the_read_only_tree_labels_every_property():
    """The session's own entry (a plugin erasing .coverage at its start, a conftest
    writing as it is imported): every property of the replay is read_only_tree."""
    session = {
        "nodeid": "<session>",
        "label": "harness_error",
        "reason": "session_error",
        "message": "the pytest session failed: OSError: [Errno 30] Read-only file system",
        "calls": {},
        "read_only": {"path": "/src/.coverage", "in_rootdir": True},
    }
    doc = {
        "schema": RUN_SCHEMA,
        "status": "completed",
        "exit_code": 1,
        "result": {"schema": RESULT_SCHEMA, "tests": [session], "skipped": []},
    }
    for property_id in ("tests/t.py::test_a", "<no test reported>"):
        replay = label_replay(
            ReplayFile(replay=1, state="ok", doc=doc), ContainerFacts(exit_code=0), property_id
        )
        assert (replay.label, replay.reason) == ("harness_error", READ_ONLY_TREE)
        assert (replay.message or "").startswith("the pytest session wrote /src/.coverage in")
        assert "--writable-tree" in (replay.message or "")


@pytest.mark.parametrize("fact", [None, "yes", 1])
def test_no_fact_or_a_pass_is_left_alone(fact):
    assert read_only_replay(_entry("assert_fail", fact)) is None
    assert read_only_replay(_entry("assert_pass", {"path": None, "in_rootdir": True})) is None


def test_evidence_carries_the_environment_and_reads_it_back():
    evidence = Evidence(
        base_rev="a" * 40, patch_rev="b" * 40, image_digest="sha256:i", runner_id="r",
        command="pytest", property_id="t.py::t", seed=0, fixture_digest="sha256:f",
        origin_digest="sha256:f", oracle_changed=False, shrink=None, replays=1,
        base=(Replay(label="assert_pass"),), patch=(Replay(label="assert_pass"),),
        environment={"TZ": "UTC", "HOME": "/tmp/home"},
        pythonpath={"base": ("/src/src", "/opt/orchestrator"), "patch": ("/opt/orchestrator",)},
    )  # fmt: skip
    document = evidence.to_json()
    assert document["environment"] == {"HOME": "/tmp/home", "TZ": "UTC"}
    assert parse_evidence(document) == evidence
    older = {
        key: value for key, value in document.items() if key not in ("environment", "pythonpath")
    }
    assert parse_evidence(older).environment == {}
