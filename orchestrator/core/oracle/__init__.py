"""A property's oracle: the code that decides its verdict, sliced out of its test module.

Pure. Given the source of a test module, the ``conftest.py`` files above it and a property's
node id, :func:`oracle_slice` returns the property's *oracle slice* (lanes.md row 2):

- the test function, with its decorators (parametrize marks included); a node id's
  ``[param]`` maps to the function;
- for a method: every class on the node id's path and every base class, each with its
  header (name, bases, decorators), class attributes, set-up and tear-down methods and the
  fixtures it defines; methods the slice calls through an attribute (``self.make()``) are
  helpers; a test method inherited from a base class is found there. A base defined in
  another module of the project (a mixin in ``tests/__init__.py``) is followed through the
  import that binds its name (:class:`ProjectModules` holds the side's other modules), with
  the names of its module it references and that module's statements that run on import;
- every module-level name the slice references, transitively: helpers, constants,
  classes, fixtures (a test's and a fixture's parameters name fixtures; so do
  ``usefixtures``/``getfixturevalue`` strings), and the import that binds a referenced
  name (one imported name at a time, so importing something else on the same line
  changes nothing; each reduced to what it binds, so ``import a.b`` where ``import a``
  was binds nothing new, and the submodule it loads counts only for a slice that names
  ``a.b``);
- what runs for every test of the module: ``pytestmark``, ``pytest_plugins``,
  ``setup_module``/``teardown_module`` and the other xunit and hook functions, autouse
  fixtures, ``from x import *`` and ``from __future__`` imports, and every module-level
  statement that is neither a definition nor an import (``sys.path.insert(...)``,
  ``if``/``try`` blocks); docstrings and ``if __name__ == "__main__":`` blocks run
  nothing under pytest and are left out;
- every ``conftest.py`` above the module, whole.

Conservative where the source cannot tell: a name bound by a star import is unknown, so
star imports are in every slice; a test not found in a module that has a star import (or
in a class with a base the source cannot follow) is sliced without its body, so the slice
still changes when the body appears or goes; a local variable that shadows a module-level name
pulls that name in. A module or node id that cannot be sliced (a syntax error, a test that
is not a Python function) is compared whole; :func:`compare_slices` then compares both
sides whole and says so.

Digests are position-free: every part is ``ast.dump``'s text (Python 3.11's, written by
:mod:`.dump` on every version) without line and column attributes, parts are keyed by what
they are (``helper make_list``) and, within one key, kept in source order; blank lines,
comments and unrelated definitions anywhere in the module leave the digest alone. Digests
compare within one run, and across runs on Pythons that parse to the same tree.

Modules: :mod:`.model` (the values), :mod:`.dump` (a tree's text), :mod:`.analysis` (a
module's items), :mod:`.resolve`
(bases in other modules), :mod:`.slicer` (one property's slice), :mod:`.compare` (two sides).
"""

from orchestrator.core.oracle.analysis import forget_modules
from orchestrator.core.oracle.compare import (
    UnchangedItem,
    collected_on_one_side,
    compare_slices,
    compare_sources,
    unchanged_oracle,
    unchanged_oracles,
)
from orchestrator.core.oracle.model import (
    NEW_ON_PATCH_HINT,
    NO_MODULES,
    SAME_TEST_FILES,
    SLICE_VERSION,
    ChangeReason,
    OracleChange,
    OracleSlice,
    PartKey,
    ProjectModules,
    ReasonKind,
    SliceStatus,
    parts_digest,
)
from orchestrator.core.oracle.resolve import (
    imported_class,
    inherited_modules,
    may_inherit_from_elsewhere,
)
from orchestrator.core.oracle.slicer import oracle_slice

__all__ = [
    "NEW_ON_PATCH_HINT",
    "NO_MODULES",
    "SAME_TEST_FILES",
    "SLICE_VERSION",
    "ChangeReason",
    "OracleChange",
    "OracleSlice",
    "PartKey",
    "ProjectModules",
    "ReasonKind",
    "SliceStatus",
    "UnchangedItem",
    "collected_on_one_side",
    "compare_slices",
    "compare_sources",
    "forget_modules",
    "imported_class",
    "inherited_modules",
    "may_inherit_from_elsewhere",
    "oracle_slice",
    "parts_digest",
    "unchanged_oracle",
    "unchanged_oracles",
]
