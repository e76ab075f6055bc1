"""A package's names imported from its modules when first used (PEP 562).

Two packages (``core/project_image`` and ``adapters/ledger``) offer their modules' names at
the package's level but must not import every module when one name is asked for: reading a
project's labels should not import the requirement parser, nor reading a freeze the
SQLAlchemy store. Standard library only; every room may use it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``package``: ``homes`` maps each name to the
    submodule that defines it; the value found is kept in the package's namespace, so the
    next use is an ordinary attribute."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
