"""What the host may touch of an exported tree (core/tree_files.py) and the caps on what
it writes and reads (core/tree_limits.py): pure, so properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import tree_files, tree_limits
from orchestrator.core.bounds import FileKind
from orchestrator.core.tree_files import Refusal, file_problem, path_problem, tree_path_parts
from orchestrator.core.tree_limits import TreeCaps, TreeSize, read_problem, write_problem

# A name a tree may hold: no slash, no NUL, not "." / ".." / ".git", within NAME_MAX.
names = st.text(
    alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=30,
).filter(lambda name: name not in (".", "..") and name.lower() != ".git")


@given(parts=st.lists(names, min_size=1, max_size=8))
def test_a_path_of_plain_names_is_taken_and_split_back(parts):
    path = "/".join(parts)
    assert path_problem(path) is None
    assert tree_path_parts(path) == tuple(parts)


@given(
    before=st.lists(names, max_size=4),
    bad=st.sampled_from(["..", ".", "", ".git", ".GIT", ".Git"]),
    after=st.lists(names, max_size=4),
)
def test_a_path_with_a_dot_dot_an_empty_part_or_git_is_refused(before, bad, after):
    path = "/".join([*before, bad, *after])
    assert path_problem(path) is not None
    assert tree_path_parts(path) is None


@given(parts=st.lists(names, min_size=1, max_size=4))
def test_an_absolute_path_is_refused(parts):
    assert path_problem("/" + "/".join(parts)) == "an absolute path"


def test_names_and_paths_past_the_file_systems_limits_are_refused():
    assert path_problem("a" * 255) is None
    assert path_problem("a" * 256) == "a name longer than 255 bytes"
    assert path_problem("é" * 128) == "a name longer than 255 bytes"  # bytes, not characters
    deep = "/".join(["abcdefg"] * 512)  # 4095 bytes
    assert path_problem(deep) is None
    assert path_problem(deep + "x") == "a path longer than 4095 bytes"
    assert path_problem("a\0b") == "a path with a NUL byte"
    assert path_problem("") == "an empty path"


@given(
    kind=st.sampled_from(list(FileKind)),
    size=st.integers(min_value=0, max_value=10**10),
    cap=st.integers(min_value=1, max_value=10**9),
)
def test_only_a_regular_file_under_the_cap_is_read(kind, size, cap):
    refusal = file_problem(kind, size, cap)
    if kind is FileKind.SYMLINK:
        assert refusal is Refusal.LINK
    elif kind is not FileKind.REGULAR:
        assert refusal is Refusal.KIND
    else:
        assert (refusal is None) == (size <= cap)
        if refusal is not None:
            text = tree_files.refusal_text("p.toml", refusal, kind=kind, size=size, cap=cap)
            assert text.startswith("p.toml: ")
            assert str(size) in text
            assert str(cap) in text
            assert tree_limits.READ_VARIABLE in text


@given(
    files=st.integers(min_value=0, max_value=200),
    total=st.integers(min_value=0, max_value=10**6),
    size=st.integers(min_value=0, max_value=10**6),
)
def test_a_write_is_refused_exactly_when_it_would_pass_a_cap(files, total, size):
    caps = TreeCaps(max_bytes=10**6, max_files=100)
    written = TreeSize(files=files, total_bytes=total)
    problem = write_problem(written=written, path="a/b.bin", size=size, caps=caps)
    fits = files + 1 <= caps.max_files and total + size <= caps.max_bytes
    assert (problem is None) == fits
    if problem is not None:
        assert "a/b.bin" in problem


@given(size=st.integers(min_value=0, max_value=10**9), cap=st.integers(1, 10**9))
def test_a_read_is_refused_exactly_over_its_cap_naming_the_variable(size, cap):
    problem = read_problem("pyproject.toml at 0123456789ab", size, TreeCaps(max_read_bytes=cap))
    assert (problem is None) == (size <= cap)
    if problem is not None:
        assert problem.startswith("pyproject.toml at 0123456789ab: ")
        assert tree_limits.READ_VARIABLE in problem
        assert f"{cap} bytes" in problem


def test_the_read_cap_comes_from_the_hosts_environment():
    assert tree_limits.tree_caps({}).max_read_bytes == tree_limits.READ_BYTES == 64 << 20
    assert tree_limits.tree_caps({tree_limits.READ_VARIABLE: "4096"}).max_read_bytes == 4096
    with pytest.raises(ValueError, match=tree_limits.READ_VARIABLE):
        tree_limits.tree_caps({tree_limits.READ_VARIABLE: "0"})
