"""The downloaded wheels: which are the project itself, which sdists become wheels, what
the host takes from the build container's output folder, and what a failed pip run
says. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from orchestrator.errors import InputError


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """One file of the wheelhouse."""

    filename: str
    name: str  # canonical
    version: str
    sha256: str

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "file": self.filename,
            "sha256": self.sha256,
        }


def wheel(filename: str, sha256: str) -> Wheel:
    """A wheel named as PEP 427 says; anything else is refused."""
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as error:
        raise InputError(f"{filename}: not a wheel file name ({error})") from None
    return Wheel(filename=filename, name=str(name), version=str(version), sha256=sha256)


def is_sdist(filename: str) -> bool:
    try:
        parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return False
    return True


def sdist_name(filename: str) -> str:
    name, _version = parse_sdist_filename(filename)
    return str(name)


def split_project(
    wheels: Sequence[Wheel], project: str | None
) -> tuple[tuple[Wheel, ...], tuple[Wheel, ...]]:
    """(kept, excluded): the project's own wheels are excluded, whoever pulled them in."""
    if project is None:
        return tuple(sorted(wheels, key=_wheel_order)), ()
    own = canonicalize_name(project)
    kept = tuple(sorted((w for w in wheels if w.name != own), key=_wheel_order))
    excluded = tuple(sorted((w for w in wheels if w.name == own), key=_wheel_order))
    return kept, excluded


def _wheel_order(item: Wheel) -> tuple[str, str]:
    return (item.name, item.filename)


def excluded_notes(excluded: Sequence[Wheel]) -> tuple[str, ...]:
    return tuple(
        f"left out {item.filename}: it is the project under test (another requirement "
        "depends on it); each side's own tree is what is tested"
        for item in excluded
    )


# pip's words for a requirement that cannot be met: the input's fault, not the machine's.
_UNSATISFIABLE = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "ResolutionImpossible",
    "conflicting dependencies",
    "Invalid requirement",
)
# What the host takes from the build container's output folder, at most.
WHEEL_BYTES = 1024 * 1024 * 1024  # one file (the container's RLIMIT_FSIZE too)
OUTPUT_BYTES = 8 * WHEEL_BYTES  # all of them
OUTPUT_ENTRIES = 4096
REGULAR = "regular file"  # the kind output_problem takes (core.bounds.FileKind's words)


# pip's words for an index it could not reach: the machine's (or the options'), not the
# requirements', whatever pip concludes about them afterwards.
_UNREACHABLE = ("Could not fetch URL", "SSLError", "NewConnectionError", "ProxyError")


def pip_failure(what: str, lines: Sequence[str]) -> tuple[bool, str]:
    """(the input's fault, one line) for a pip run that failed with ``lines`` of output:
    its first ``ERROR:`` line, else its last line; an index it could not reach says so."""
    errors = [line.strip() for line in lines if line.strip().startswith("ERROR:")]
    shown = [line.strip() for line in lines if line.strip()]
    detail = errors[0] if errors else (shown[-1] if shown else "no output")
    unreachable = [line.strip() for line in lines if any(w in line for w in _UNREACHABLE)]
    if unreachable:
        return False, (
            f"{what}: the index could not be reached ({unreachable[-1][:300]}): check "
            "--network, --index-url and, behind another CA, --cert"
        )
    text = "\n".join(lines)
    return any(words in text for words in _UNSATISFIABLE), f"{what}: {detail}"


def sdists_to_build(
    names: Sequence[str], project: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the sdists ``pip wheel`` makes wheels of, notes) among the names ``pip download``
    left: the project's own sdist is left out (each side's own tree is what is tested);
    other names (wheels, anything else) are not sdists."""
    build: list[str] = []
    notes: list[str] = []
    for name in sorted(names):
        if name.endswith(".whl") or not is_sdist(name):
            continue
        if project is not None and sdist_name(name) == canonicalize_name(project):
            notes.append(
                f"left out {name}: it is the project under test (another requirement "
                "depends on it); each side's own tree is what is tested"
            )
            continue
        build.append(name)
    return tuple(build), tuple(notes)


def output_problem(name: str, *, kind: str, size: int, taken: int) -> str | None:
    """Why the host refuses an entry of the build container's output folder (None: a
    wheel it takes). Only regular files are taken, named as wheels or sdists, under the
    caps; an sdist is not taken (its wheel was built) but not refused either."""
    if kind != REGULAR:
        return f"{name!r} is a {kind}, not a regular file"
    if not name.endswith(".whl"):
        if is_sdist(name):
            return None
        return f"{name!r} is neither a wheel nor an sdist"
    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename:
        return f"{name!r} is not a wheel's file name"
    if size > WHEEL_BYTES:
        return f"{name} is larger than {WHEEL_BYTES // (1024 * 1024)} MiB"
    if taken + size > OUTPUT_BYTES:
        return f"the wheels add up to more than {OUTPUT_BYTES // (1024 * 1024)} MiB"
    return None
