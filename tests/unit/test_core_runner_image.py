"""The runner image's context digest: the one `sha256sum` gives, in any file order."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.runner_image import base_tag, context_digest, runner_tag

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12)
files_strategy = st.dictionaries(names, st.binary(max_size=64), min_size=1, max_size=6)


def shell_digest(folder: Path, words: list[str]) -> str:
    """What the set-up scripts always computed, by the shell tools themselves."""
    script = (
        'cd "$1" && shift && { find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum;'
        ' printf "%s\\n" "$@"; } | sha256sum | cut -c1-12'
    )
    done = subprocess.run(
        ["bash", "-c", script, "digest", str(folder), *words],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@given(files=files_strategy, words=st.lists(names, max_size=3))
def test_the_digest_ignores_the_order_files_come_in(files, words):
    items = list(files.items())
    assert context_digest(items, words) == context_digest(list(reversed(items)), words)


@given(files=files_strategy, name=names, content=st.binary(max_size=8))
def test_a_changed_or_added_file_changes_the_digest(files, name, content):
    changed = {**files, name: files.get(name, b"") + content + b"!"}
    assert context_digest(list(files.items()), []) != context_digest(list(changed.items()), [])


def test_the_digest_is_the_shell_tools_digest(tmp_path):
    (tmp_path / "Dockerfile").write_bytes(b"FROM x\n")
    (tmp_path / "a-b.txt").write_bytes(b"\x00\xff binary\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "build").write_bytes(b"#!/bin/sh\n")
    files = [
        (path.relative_to(tmp_path).as_posix(), path.read_bytes())
        for path in tmp_path.rglob("*")
        if path.is_file()
    ]
    # (With no word printf would still print one empty line: the scripts always gave one.)
    for words in (["suite=bookworm"], ["base=sha256:abc", "two"]):
        assert context_digest(files, words) == shell_digest(tmp_path, words)


def test_tags_name_the_repository_and_the_context():
    files = [("Dockerfile", b"FROM x\n")]
    assert base_tag(files).startswith("orchestrator-base:ctx-")
    one = runner_tag(files, base_image_id="sha256:1")
    assert one.startswith("orchestrator-runner:ctx-")
    assert one != runner_tag(files, base_image_id="sha256:2")  # a new base rebuilds
    assert runner_tag(files, base_image_id="sha256:1", repository="r").startswith("r:ctx-")
