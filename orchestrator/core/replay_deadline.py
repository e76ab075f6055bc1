"""How long one replay may take when nobody said: ``--timeout``'s default. Pure.

A replay is one pytest session over what the run hands pytest; past its deadline it is
killed and labelled ``timeout`` (lanes.md section 1). ``--timeout`` (or ``timeout =`` in
``[tool.orchestrator]``) sets the deadline of every replay. Without either:

- named tests (``--property``): :data:`NAMED_DEFAULT_S`, a minute per replay, as always;
- a whole suite, or ``--changed``'s selection (one session runs all of it, so one minute
  would time out any real suite): the time the repository's recorded durations say those
  tests take, times :data:`FACTOR` (a busy machine: both sides at once, other jobs), plus
  :data:`SLACK_S` (start-up, collection, imports), at least :data:`FLOOR_S`; when the
  record does not cover the tests (no record, or fewer than :data:`MIN_COVERAGE` of the
  test modules in it: a record of a few named tests says nothing of the suite),
  :data:`WHOLE_SUITE_DEFAULT_S`. A record that covers part of the modules is scaled up
  to all of them.

Never more than a day (:data:`~orchestrator.core.bounds.MAX_TIMEOUT_S`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from orchestrator.core.bounds import MAX_TIMEOUT_S
from orchestrator.core.changed import in_scope
from orchestrator.core.schedule import module_of
from orchestrator.core.test_files import is_test_module_name

NAMED_DEFAULT_S = 60.0
WHOLE_SUITE_DEFAULT_S = 30 * 60.0
FLOOR_S = 10 * 60.0
FACTOR = 3.0
SLACK_S = 60.0
MIN_COVERAGE = 0.5


@dataclass(frozen=True, kw_only=True)
class Deadline:
    """A replay's deadline and, in one line, where it came from (the run log's
    ``timeout_rule``)."""

    timeout_s: float
    rule: str


def replay_deadline(
    *,
    given: float | None,
    given_by: str = "--timeout",
    named: bool,
    paths: Collection[str],
    command_paths: Sequence[str],
    durations: Mapping[str, float],
    selected: Sequence[str] = (),
) -> Deadline:
    """The deadline of each replay (module docstring). ``given``: the user's
    (``given_by`` says where); ``named``: ``--property`` chose the tests; ``paths``: the
    trees' paths; ``command_paths``: what the command runs; ``durations``: the recorded
    milliseconds per node id; ``selected``: the tests ``--changed`` chose (empty: the
    whole suite)."""
    if given is not None:
        return Deadline(timeout_s=given, rule=given_by)
    if named:
        return Deadline(timeout_s=NAMED_DEFAULT_S, rule="the default for named tests")
    if selected:
        modules = frozenset(module_of(test_id) for test_id in selected)
        counted = {t: ms for t, ms in durations.items() if module_of(t) in modules}
    else:
        # The suite: the test modules the command runs, and every recorded test whose
        # file is still there (a doctest's too).
        modules = frozenset(
            path
            for path in paths
            if is_test_module_name(PurePosixPath(path).name) and in_scope(path, command_paths)
        )
        counted = {
            t: ms
            for t, ms in durations.items()
            if module_of(t) in paths and in_scope(module_of(t), command_paths)
        }
    covered = len({module_of(test_id) for test_id in counted} & modules)
    coverage = covered / len(modules) if modules else (1.0 if counted else 0.0)
    if not counted or coverage < MIN_COVERAGE:
        what = "no record" if not counted else f"{covered} of {len(modules)} test modules recorded"
        return Deadline(timeout_s=WHOLE_SUITE_DEFAULT_S, rule=f"the whole-suite default ({what})")
    scale = len(modules) / covered if covered and covered < len(modules) else 1.0
    estimate = sum(counted.values()) / 1000.0 * scale
    timeout = min(MAX_TIMEOUT_S, max(FLOOR_S, FACTOR * estimate + SLACK_S))
    scaled = f", scaled up from {covered} of {len(modules)} test modules" if scale != 1.0 else ""
    return Deadline(
        timeout_s=round(timeout, 1),
        rule=(
            f"recorded durations: {FACTOR:g} x {estimate:.1f} s ({len(counted)} tests{scaled})"
            f" + {SLACK_S:g} s, at least {FLOOR_S:g} s"
        ),
    )
