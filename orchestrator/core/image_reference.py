"""Is a string an image reference the engine could read? Pure.

The grammar of Docker's distribution/reference package: ``[domain[:port]/]path[:tag]
[@digest]``, the path in lowercase components, or an image ID (``sha256:<64 hex>``). A
string outside it is bad input (exit 2), found before the engine is asked; one inside it
may still name no image, which only the engine can tell (``image_not_found``, exit 3).
"""

from __future__ import annotations

import re

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"

REFERENCE = re.compile(rf"^{_NAME}(?::{_TAG})?(?:@{_DIGEST})?$")
IMAGE_ID = re.compile(r"^sha256:[a-f0-9]{64}$")
NAME_MAX = 255


def reference_problem(ref: str) -> str | None:
    """Why ``ref`` is no image reference (None when it is one)."""
    if not ref.strip():
        return "an empty image reference"
    if IMAGE_ID.match(ref):
        return None
    if not REFERENCE.match(ref):
        return f"{ref!r} is not an image reference ([registry/]name[:tag][@digest], lowercase)"
    name = ref.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    if len(name) > NAME_MAX:
        return f"{ref!r}: the name is longer than {NAME_MAX} characters"
    return None
