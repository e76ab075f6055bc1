"""The downloaded wheels: which are the project itself and how pip is told to install
them for the image's Python. Pure."""

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


def pip_target_args(image_python: str, host_python: str) -> tuple[str, ...]:
    """Extra ``pip download`` arguments when the image's Python differs from the host's.

    The same ``major.minor``: none (markers are evaluated by the host's pip). Otherwise
    wheels for the image's version only: pip cannot build sdists for another interpreter.
    """
    if _minor(image_python) == _minor(host_python):
        return ()
    return ("--python-version", _minor(image_python), "--only-binary=:all:")


def _minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])
