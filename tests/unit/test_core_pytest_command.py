"""The pytest command line and node ids: one parser for replay, thaw, budget and accept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.pytest_command import (
    PYTEST_LAUNCHERS,
    expand_parametrized,
    property_files,
    pytest_args,
    pytest_paths,
    split_node_id,
    without_params,
)
from orchestrator.errors import InputError


@pytest.mark.parametrize(
    ("command", "properties", "expected"),
    [
        ("pytest -q tests/", (), ("-q", "tests/")),
        ("python -m pytest -x tests/a.py", (), ("-x", "tests/a.py")),
        ("python3 -m pytest", (), ()),
        ("pytest -q tests/", ("tests/t.py::test_a",), ("-q",)),
        ("pytest -k 'slow or fast' -q tests/", ("t.py::a",), ("-k", "slow or fast", "-q")),
        ("pytest --tb=short tests/ -m unit", ("t.py::a",), ("--tb=short", "-m", "unit")),
    ],
)
def test_pytest_args_keep_options_and_give_paths_way_to_properties(
    command: str, properties: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert pytest_args(command, properties) == expected


@pytest.mark.parametrize("command", ["make test", "", "pytest 'unclosed", "tox -e py"])
def test_a_command_that_is_not_pytest_is_bad_input(command: str) -> None:
    with pytest.raises(InputError):
        pytest_args(command, ())


@pytest.mark.parametrize(
    ("nodeid", "files"),
    [
        ("test_a.py::test_b", ("conftest.py", "test_a.py")),
        (
            "tests/unit/test_x.py::TestK::test_y[a-b]",
            ("conftest.py", "tests/conftest.py", "tests/unit/conftest.py", "tests/unit/test_x.py"),
        ),
        ("", ()),
    ],
)
def test_property_files_are_the_test_file_and_the_conftests_above(
    nodeid: str, files: tuple[str, ...]
) -> None:
    assert property_files(nodeid) == files


@pytest.mark.parametrize(
    ("node_id", "path", "names", "params"),
    [
        ("tests/t.py::test_b", "tests/t.py", ("test_b",), ""),
        (" t.py::TestA::TestB::test_c ", "t.py", ("TestA", "TestB", "test_c"), ""),
        ("t.py::test_b[a::b]", "t.py", ("test_b",), "[a::b]"),
        ("t.py::TestA::test_b[x]", "t.py", ("TestA", "test_b"), "[x]"),
        ("t.py", "t.py", (), ""),
        ("t.py::", "t.py", (), ""),
        ("::test_b", "", ("test_b",), ""),
        ("", "", (), ""),
    ],
)
def test_a_node_id_splits_into_path_names_and_parameters(
    node_id: str, path: str, names: tuple[str, ...], params: str
) -> None:
    node = split_node_id(node_id)
    assert (node.path, node.names, node.params) == (path, names, params)
    assert node.names_a_test is bool(path and names)


def test_the_parts_of_a_test_in_a_class() -> None:
    node = split_node_id("t.py::TestA::test_b[3]")
    assert (node.classes, node.function, node.qualname) == (("TestA",), "test_b", "TestA.test_b")


# --- properties -------------------------------------------------------------------------

_words = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_paths = st.lists(_words, min_size=1, max_size=3).map(lambda parts: "/".join(parts) + ".py")
_params = st.just("") | st.text(alphabet="ab:-1[", max_size=6).map(lambda text: f"[{text}]")


@given(_paths, st.lists(_words, min_size=1, max_size=3), _params)
def test_splitting_a_node_id_gives_back_its_parts(path: str, names: list[str], params: str) -> None:
    node = split_node_id(f"{path}::{'::'.join(names)}{params}")
    assert (node.path, node.names, node.params) == (path, tuple(names), params)
    assert node.names_a_test
    assert property_files(node.node_id)[-1] == path


@given(
    st.sampled_from(PYTEST_LAUNCHERS),
    st.lists(st.sampled_from(["-q", "-x", "-k", "expr", "tests/", "t.py::a"]), max_size=6),
)
def test_without_properties_the_arguments_are_the_words_after_the_launcher(
    launcher: tuple[str, ...], words: list[str]
) -> None:
    assert pytest_args(" ".join((*launcher, *words)), ()) == tuple(words)


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("pytest -q tests/", ("tests/",)),
        ("pytest -k 'a or b' tests/unit tests/test_x.py::test_y -m slow", (
            "tests/unit", "tests/test_x.py::test_y")),
        ("python -m pytest -q", ()),
        ("pytest --tb short -p no:cacheprovider", ()),
    ],
)  # fmt: skip
def test_pytest_paths_are_the_positional_arguments(command: str, paths: tuple[str, ...]) -> None:
    assert pytest_paths(command) == paths


def test_a_function_id_expands_to_the_parametrizations_pytest_reported() -> None:
    seen = ("t.py::test_p[1]", "t.py::test_a", "t.py::test_p[2]", "t.py::test_pa[1]")
    selected = ("t.py::test_a", "t.py::test_p", "t.py::test_gone", "t.py::test_p[2]")
    assert expand_parametrized(selected, seen) == (
        "t.py::test_a",
        "t.py::test_p[1]",
        "t.py::test_p[2]",
        "t.py::test_gone",  # reported in no form: stays, to be labelled not_found
    )
    assert without_params("t.py::C::test_p[a::b]") == "t.py::C::test_p"


@given(
    st.lists(st.sampled_from(["t.py::a", "t.py::a[1]", "t.py::a[2]", "t.py::b", "u.py::a"])),
    st.lists(st.sampled_from(["t.py::a", "t.py::b", "t.py::c", "u.py::a"]), min_size=1),
)
def test_expansion_keeps_every_selected_test_in_some_form(
    seen: list[str], selected: list[str]
) -> None:
    expanded = expand_parametrized(selected, seen)
    assert len(set(expanded)) == len(expanded)
    assert {without_params(nodeid) for nodeid in expanded} == set(selected)
    assert all(nodeid in seen or nodeid in selected for nodeid in expanded)
