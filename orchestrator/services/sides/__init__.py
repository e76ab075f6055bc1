"""Running sides: everything between a side's plan and the containers it runs in, apart
from the workflows that use it (``replay``, ``accept``, ``thaw``, ``reproduce``,
``shrink``: one module each in :mod:`orchestrator.services`).

- :mod:`.pool`: the backends of a run (the Docker one over the Docker adapter, the one
  module here that imports it), the image on each, the inputs staged there, the sweep.
- :mod:`.exports`: what the containers mount from this machine, held for as long as they
  need it (:class:`~.exports.Exports`: each tree exported once per run).
- :mod:`.side_run`: a side's container's job, and :class:`~.side_run.SideRun`, the one
  way a side's container runs and is read back.
- :mod:`.run_sides`: both sides of a run over the pool (:func:`run_sides`), with
  :mod:`.dispatch` (batches over engines), :mod:`.container` (one container of it),
  :mod:`.warm` (the containers a screening keeps), :mod:`.outcome` (the labels gathered).
- :mod:`.collection` (the tests a command collects), :mod:`.serve` (a warm container
  serving pytest jobs).

The backend seam itself, the protocol and the values that cross it, is
:mod:`orchestrator.core.backend`. What the workflows import from here is named below.
"""

from __future__ import annotations

from orchestrator.services.sides.run_sides import (
    FIXTURE,
    ISOLATIONS,
    NO_TEST_REPORTED,
    AttemptRecord,
    Progress,
    ReplayPlan,
    SideInternalError,
    SidesOutcome,
    SideSpec,
    SidesRun,
    collect_tests,
    new_run_id,
    plan_limits,
    planned_pythonpath,
    pytest_arguments,
    run_sides,
    side_pythonpath,
)

__all__ = [
    "FIXTURE",
    "ISOLATIONS",
    "NO_TEST_REPORTED",
    "AttemptRecord",
    "Progress",
    "ReplayPlan",
    "SideInternalError",
    "SideSpec",
    "SidesOutcome",
    "SidesRun",
    "collect_tests",
    "new_run_id",
    "plan_limits",
    "planned_pythonpath",
    "pytest_arguments",
    "run_sides",
    "side_pythonpath",
]
