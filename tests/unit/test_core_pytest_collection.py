"""What pytest collects as its configuration says (testpaths, python_files, doctest options)."""

from __future__ import annotations

import pytest

from orchestrator.core.pytest_collection import (
    CollectionConfig,
    collection_config,
    doctest_glob_of,
    is_test_module,
    matches_pattern,
    merge_configs,
    names_test_modules,
    search_roots,
)
from orchestrator.core.pytest_command import pytest_options, pytest_paths


def ini(name: str, text: str) -> dict[str, bytes | None]:
    return {name: text.encode()}


def test_tox_ini_testpaths_and_a_doctest_glob_in_addopts():
    config = collection_config(
        ini("tox.ini", "[pytest]\ntestpaths = tests docs\naddopts = -q --doctest-glob='*.rst'\n"),
        at="base",
    )
    assert config.testpaths == ("tests", "docs")
    assert config.doctest_globs == ("*.rst",)
    assert config.python_files == ("test_*.py", "*_test.py")
    assert not config.doctest_modules
    assert config.where == ("tox.ini at base",)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pytest.ini", "[pytest]\ntestpaths = docs\npython_files = check_*.py\n"
                       "addopts = --doctest-glob *.md --doctest-modules\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["docs"]\n'
                           'python_files = ["check_*.py"]\n'
                           'addopts = "--doctest-glob=*.md --doctest-modules"\n'),
        ("pyproject.toml", '[tool.pytest]\ntestpaths = ["docs"]\npython_files = ["check_*.py"]\n'
                           'addopts = ["--doctest-glob", "*.md", "--doctest-modules"]\n'),
        ("setup.cfg", "[tool:pytest]\ntestpaths =\n    docs\npython_files = check_*.py\n"
                      "addopts = --doctest-glob=*.md --doctest-modules\n"),
    ],
)  # fmt: skip
def test_every_ini_file_pytest_reads(name, text):
    config = collection_config(ini(name, text))
    assert (config.testpaths, config.python_files, config.doctest_globs) == (
        ("docs",),
        ("check_*.py",),
        ("*.md",),
    )
    assert config.doctest_modules


def test_pytest_ini_wins_and_the_command_adds_its_own_options():
    files = {
        "pytest.ini": b"[pytest]\ntestpaths = a\n",
        "tox.ini": b"[pytest]\ntestpaths = b\n",
    }
    assert collection_config(files).testpaths == ("a",)
    options = pytest_options("pytest -q --doctest-glob '*.txt' -o python_files=x_*.py docs")
    assert pytest_paths("pytest -q --doctest-glob '*.txt' docs") == ("docs",)
    config = collection_config(files, options)
    assert config.doctest_globs == ("*.txt",)
    assert config.python_files == ("x_*.py",)
    assert not collection_config(files, ("-p", "no:doctest")).doctest_text
    assert collection_config({}) == CollectionConfig()  # pytest's defaults


def test_patterns_match_as_pytest_matches_them():
    assert matches_pattern("tests/sub/check_x.py", "check_*.py")
    assert matches_pattern("docs/api/usage.rst", "api/*.rst")
    assert not matches_pattern("docs/usage.rst", "api/*.rst")
    assert names_test_modules("check_*.py")
    assert names_test_modules("*_spec.py")
    assert not names_test_modules("*.py")
    assert not names_test_modules("*")
    config = CollectionConfig(python_files=("*.py", "check_*.py"), doctest_globs=("*.rst",))
    assert is_test_module("pkg/check_a.py", config)
    assert not is_test_module("pkg/mod.py", config)  # "*.py" is no rule for test files
    assert doctest_glob_of("docs/usage.rst", config) == "*.rst"
    assert doctest_glob_of("docs/conf.py", config) is None
    assert doctest_glob_of("tests/test_x.txt", CollectionConfig()) == "test*.txt"


def test_search_roots_are_the_commands_paths_else_testpaths_else_the_tree():
    config = CollectionConfig(testpaths=("tests", "docs/*"))
    folders = ["docs", "docs/a", "docs/b", "tests"]
    assert search_roots(("x",), config, folders) == ("x",)
    assert search_roots((), config, folders) == ("tests", "docs/a", "docs/b")
    assert search_roots((), CollectionConfig(), folders) == (".",)


def test_merged_configurations_collect_what_either_collects():
    base = CollectionConfig(testpaths=("tests",), where=("tox.ini at base",))
    rev = CollectionConfig(testpaths=("tests", "docs"), doctest_globs=("*.rst",), where=("b",))
    merged = merge_configs([base, rev])
    assert merged.testpaths == ("tests", "docs")
    assert merged.doctest_globs == ("test*.txt", "*.rst")
    assert merged.where == ("tox.ini at base", "b")
