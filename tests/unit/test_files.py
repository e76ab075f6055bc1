"""The tool's own file writes (orchestrator/files.py): many documents at once."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator import files

documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(documents, min_size=1, max_size=40), st.integers(1, 8))
def test_many_documents_are_written_as_one_by_one(tmp_path_factory, docs, threads) -> None:
    root = tmp_path_factory.mktemp("many")
    one, many = root / "one", root / "many"
    for index, document in enumerate(docs):
        files.write_json_atomic(one / f"sub{index % 3}" / f"doc-{index}.json", document)
    files.write_json_many(
        ((many / f"sub{index % 3}" / f"doc-{index}.json", doc) for index, doc in enumerate(docs)),
        threads=threads,
    )
    written = sorted(path.relative_to(many) for path in many.rglob("*") if path.is_file())
    assert written == sorted(path.relative_to(one) for path in one.rglob("*") if path.is_file())
    for name in written:
        assert (many / name).read_bytes() == (one / name).read_bytes()
        assert (many / name).stat().st_mode & 0o777 == (one / name).stat().st_mode & 0o777
    assert not [path for path in many.rglob(".*") if path.name.endswith(".tmp")]


def test_nothing_to_write_writes_nothing(tmp_path: Path) -> None:
    files.write_json_many([])
    assert os.listdir(tmp_path) == []
