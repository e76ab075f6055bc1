"""The runner image's tags, as values: file contents in, tags out.

The recipe is the checkout's ``images/``, shipped inside the wheel's package (as
``orchestrator/images/``): ``base/build`` makes ``orchestrator-base`` offline from
Debian's packages, ``runner/Dockerfile`` adds the runner user on top. Each image is tagged
``<repository>:ctx-<12 hex>``, a digest of its build context (the relative path and
content of every file of its folder, plus a few words: the suite for the base, the base
image ID for the runner). When that tag exists nothing is built, so the same recipe never
rebuilds, whether it is read from a checkout or from an installed wheel.

The digest is the one ``sha256sum`` gives over ``find . -type f | sort | xargs sha256sum``
followed by the words, one a line, so images tagged by older set-up scripts are reused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

BASE_REPOSITORY = "orchestrator-base"
RUNNER_REPOSITORY = "orchestrator-runner"
BASE_SUITE = "bookworm"
LOCAL_BASE = f"{BASE_REPOSITORY}:{BASE_SUITE}"  # the base's stable name
RUNNER_LATEST = f"{RUNNER_REPOSITORY}:latest"
DIGEST_HEX = 12


def context_digest(files: Sequence[tuple[str, bytes]], words: Sequence[str]) -> str:
    """12 hex of the sha256 over each file's ``sha256sum`` line (``<hex>  ./<path>``, in
    byte order of the path) and then ``words``, one a line."""
    lines = sorted(
        (f"./{path}".encode(), hashlib.sha256(content).hexdigest().encode())
        for path, content in files
    )
    text = b"".join(hexdigest + b"  " + name + b"\n" for name, hexdigest in lines)
    text += b"".join(word.encode() + b"\n" for word in words)
    return hashlib.sha256(text).hexdigest()[:DIGEST_HEX]


def base_tag(files: Sequence[tuple[str, bytes]], *, suite: str = BASE_SUITE) -> str:
    """``orchestrator-base:ctx-<digest>`` of the base recipe's folder and suite."""
    return f"{BASE_REPOSITORY}:ctx-{context_digest(files, [f'suite={suite}'])}"


def runner_tag(
    files: Sequence[tuple[str, bytes]],
    *,
    base_image_id: str,
    repository: str = RUNNER_REPOSITORY,
) -> str:
    """``<repository>:ctx-<digest>`` of the runner recipe's folder and its base image."""
    return f"{repository}:ctx-{context_digest(files, [f'base={base_image_id}'])}"
