"""The Debian packages and sources of a project image's base. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from orchestrator.core.digest import digest
from orchestrator.errors import InputError

APT_BASE_REPOSITORY = "orchestrator-project-base"

# images/base/build's packages; --apt adds to them.
BASE_INCLUDES = (
    "python3",
    "python3-pytest",
    "python3-venv",
    "passwd",
    "tzdata",
    "ca-certificates",
)
DEFAULT_SUITE = "bookworm"

_APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def check_apt(packages: Sequence[str]) -> tuple[str, ...]:
    """Debian package names, sorted and unique; anything else is refused."""
    for package in packages:
        if not _APT_NAME.match(package):
            raise InputError(f"--apt {package!r}: not a Debian package name")
    return tuple(sorted(set(packages)))


def apt_includes(apt: Sequence[str]) -> tuple[str, ...]:
    """The base image's packages plus ``apt``, in a stable order."""
    extra = [package for package in check_apt(apt) if package not in BASE_INCLUDES]
    return (*BASE_INCLUDES, *extra)


def apt_base_tag(*, suite: str, includes: Sequence[str], sources: Sequence[str]) -> str:
    """The tag of a Debian base with ``includes``, built from these apt sources."""
    hexdigest = digest({"suite": suite, "includes": list(includes), "sources": list(sources)})
    return f"{APT_BASE_REPOSITORY}:{hexdigest.removeprefix('sha256:')[:16]}"


def apt_sources(files: Sequence[tuple[str, str]], suite: str) -> tuple[str, ...]:
    """One-line ``deb`` sources for ``suite`` (and ``suite-*``) from the host's apt source
    files, one-line (``*.list``) and deb822 (``*.sources``) alike, as images/base/build
    reads them: other suites (third-party repositories) are left out."""

    def ours(name: str) -> bool:
        return name == suite or name.startswith(suite + "-")

    out: list[str] = []
    for path, text in files:
        if path.endswith(".sources"):
            out.extend(_deb822_sources(text, ours))
            continue
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if words[:1] != ["deb"]:
                continue
            rest = words[1:]
            if rest and rest[0].startswith("["):
                while rest and not rest[0].endswith("]"):
                    rest = rest[1:]
                rest = rest[1:]
            if len(rest) >= 2 and ours(rest[1]):
                out.append(" ".join(words))
    return tuple(out)


def _deb822_sources(text: str, ours: Callable[[str], bool]) -> list[str]:
    out: list[str] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        suites = [name for name in fields.get("suites", "").split() if ours(name)]
        signed = fields.get("signed-by", "")
        options = f" [signed-by={signed}]" if signed.startswith("/") else ""
        for uri in fields.get("uris", "").split():
            for name in suites:
                out.append(f"deb{options} {uri} {name} {fields.get('components', 'main')}")
    return out
