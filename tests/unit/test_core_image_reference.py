"""Image references the engine could read, found without it (core/image_reference.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.image_reference import reference_problem

component = st.from_regex(r"[a-z0-9]+(?:[._-][a-z0-9]+)?", fullmatch=True)
names = st.lists(component, min_size=1, max_size=3).map("/".join)
tags = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
domains = st.sampled_from(["", "localhost:5000/", "registry.example.com/", "10.0.0.1:443/"])
digests = st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True)


@given(domain=domains, name=names, tag=st.none() | tags, digest=st.none() | digests)
def test_every_well_formed_reference_is_accepted(domain, name, tag, digest):
    ref = domain + name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    assert reference_problem(ref) is None, ref


@given(digest=digests)
def test_an_image_id_is_a_reference(digest):
    assert reference_problem(digest) is None


@pytest.mark.parametrize(
    "ref",
    ["", "  ", "UPPER:tag", "foo::bar", "bad ref", "-x", "a@sha256:zz", "name:", "a//b", "x" * 300],
)
def test_a_malformed_reference_is_named(ref):
    problem = reference_problem(ref)
    assert problem is not None
    assert "reference" in problem or "longer" in problem


@given(name=names, bad=st.sampled_from([" ", "::", "A", "@", "!", "\n"]))
def test_a_reference_with_a_foreign_character_in_its_name_is_refused(name, bad):
    assert reference_problem(name + bad + "x") is not None
