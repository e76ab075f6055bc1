"""``orchestrator shrink``: shrink a failing JSON fixture against a test in its pinned
container, or against a host-side Python property."""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.commands._grouped import Variant, grouped, take
from orchestrator.commands._option_groups import (
    FixtureAndShrink,
    HostProperty,
    Limits,
    OneTest,
    Oracle,
    Outputs,
)
from orchestrator.commands._options import (
    AttemptsOption,
    MinimalOutOption,
    ShrinkFixtureArgument,
    ShrinkJsonOption,
    ShrinkTestOption,
    TestsFromRevOption,
)
from orchestrator.commands._output import echo_line

if TYPE_CHECKING:
    from orchestrator.core.shrink import Property, ShrinkReport
    from orchestrator.services.shrink import ShrinkTestRequest

_MAX_STEPS_SHOWN = 20


def load_property(spec: str, paths: list[Path]) -> Property:
    """Import ``MODULE:FUNCTION``; the --path folders (then the current one) come first."""
    from orchestrator.errors import PropertyImportError

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise PropertyImportError(f"--property {spec!r}: expected MODULE:FUNCTION")
    for folder in reversed(paths):
        sys.path.insert(0, str(folder.resolve()))
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:  # any import-time failure is the user's module, not ours
        raise PropertyImportError(
            f"--property {spec!r}: cannot import {module_name}: "
            f"{type(error).__name__}: {error}".splitlines()[0]
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PropertyImportError(f"--property {spec!r}: {module_name} has no {attribute}")
        target = getattr(target, part)
    if not callable(target):
        raise PropertyImportError(f"--property {spec!r}: {attribute} is not callable")
    prop: Property = target
    return prop


def _describe_path(report: ShrinkReport) -> list[str]:
    steps = report.shrink_path
    if len(steps) <= _MAX_STEPS_SHOWN:
        return [f"  - {step['op']} {step['path']}" + _tail(step) for step in steps]
    counts = Counter(step["op"] for step in steps)
    return [f"  - {op} x{count}" for op, count in sorted(counts.items())]


def _tail(step: dict[str, Any]) -> str:
    if "length" in step:
        return f" -> length {step['length']}"
    if "to" in step:
        return f" -> {step['to']}"
    return ""


# shrink's spelling of the shared groups: the test (--test) at --rev of --repo, or none.
_Test = Annotated[OneTest, take("repo", "rev", property_id=ShrinkTestOption)]
_Shrinking = Annotated[FixtureAndShrink, take("seed", attempts=Variant(AttemptsOption, 2))]
_Outputs = Annotated[Outputs, take(out=MinimalOutOption, as_json=ShrinkJsonOption)]


@grouped
def shrink(
    ctx: typer.Context,
    fixture: ShrinkFixtureArgument,
    *,
    host: HostProperty,
    test: _Test,
    oracle: Annotated[Oracle, take(tests_from=TestsFromRevOption)],
    limits: Annotated[Limits, take("image", "timeout_s")],
    shrinking: _Shrinking,
    outputs: _Outputs,
) -> None:
    """Shrink FIXTURE to a minimal payload that still fails the same way.

    FIXTURE is the failing JSON fixture, or - for standard input.

    Against a test (--test NODEID --repo PATH --rev REV --image REF): one warm container
    of that image runs the test at that revision on every candidate, each a fresh pytest
    session reading the candidate as $REPLAY_FIXTURE (read-only sources, no network, the
    replay's limits). Same way means the label assert_fail with the same position-free
    assertion key as on FIXTURE; a candidate that times out (--timeout, per candidate) or
    gives a harness error stops the shrink with exit 3, naming it. Defaults come from
    [tool.orchestrator] in the repository's pyproject.toml at --rev, as for `replay`: the
    command's pytest options, image and timeout (env and pythonpath are not given to the
    shrink's container); an option given here wins.

    Against a host-side property (--property MODULE:FUNCTION): same way means the same
    exception type at the same line of the property (a False return is its own failure).

    Keys and items are dropped from the end, strings shortened, integers moved toward
    zero, until no single step keeps the failure. The shrink runs --attempts times, each
    from FIXTURE with nothing remembered; the report is stable when every minimum has
    the same digest. Exit 2 when the property or test cannot be used or does not fail
    on FIXTURE.
    """
    from orchestrator.commands._command_arguments import ShrinkArguments
    from orchestrator.commands._output import echo_json
    from orchestrator.core.shrink import ShrinkTarget, host_judge, shrink_report_with
    from orchestrator.files import read_json, write_json_atomic

    arguments = ShrinkArguments(
        host=host, test=replace(test, flag="--test"), oracle=replace(oracle, sides=()),
        fixture=shrinking, limits=limits, outputs=outputs,
    ).with_project()  # fmt: skip
    arguments.validate()  # every usage mistake before the fixture is read or an engine asked
    payload = read_json(fixture)
    if arguments.against_test:
        report = _shrink_test(ctx, arguments.test_request(), payload)
    else:
        spec = arguments.host.spec or ""
        prop = load_property(spec, list(arguments.host.paths))
        report = shrink_report_with(
            payload,
            lambda attempt: host_judge(prop),
            attempts=arguments.fixture.attempts or 2,
            target=ShrinkTarget(property=spec),
        )
    outputs = arguments.outputs
    if outputs.out is not None:
        write_json_atomic(outputs.out, report.minimal)
    if outputs.as_json:
        echo_json(report.to_json())
        return
    _print_report(report, outputs.out)


def _shrink_test(ctx: typer.Context, request: ShrinkTestRequest, payload: Any) -> ShrinkReport:
    from orchestrator import log
    from orchestrator.services.shrink import plan_test_shrink, shrink_test
    from orchestrator.services.sides.pool import open_backend

    logger = log.get_logger("orchestrator.shrink")
    with open_backend(os.environ) as backend:
        plan = plan_test_shrink(request, backend=backend)
        logger.info("shrink.planned", test=request.test, rev=plan.rev, image_id=plan.image_id)
        json_logs = bool(getattr(ctx.obj, "json_logs", False))
        with _progress(json_logs, logger) as progress:
            outcome = shrink_test(plan, payload, backend=backend, progress=progress)
    return outcome.report


@contextmanager
def _progress(json_logs: bool, logger: Any) -> Iterator[Callable[[int, int, Any, str], None]]:
    """A status line on a terminal; a debug log line per candidate otherwise."""
    if json_logs or not sys.stderr.isatty():

        def report(attempt: int, number: int, size: Any, verdict: str) -> None:
            logger.debug(
                "shrink.candidate", attempt=attempt, candidate=number, size=size, verdict=verdict
            )

        yield report
        return
    from rich.console import Console

    with Console(stderr=True).status("shrinking") as status:

        def update(attempt: int, number: int, size: Any, verdict: str) -> None:
            keys = "" if size is None else f", {size} keys"
            status.update(f"shrinking: attempt {attempt}, candidate {number}{keys}")

        yield update


def _print_report(report: ShrinkReport, out: Path | None) -> None:
    from orchestrator.core.digest import canonical_json

    target = report.target
    if target.test is not None:
        echo_line(f"test: {target.test}")
        echo_line(f"rev: {target.rev}")
        echo_line(f"image: {target.image_id} ({target.image_ref})")
        echo_line(f"seed: {target.seed}")
        if target.tests_from is not None:
            echo_line(f"tests from: {target.tests_from}")
    echo_line(f"minimal: {canonical_json(report.minimal).decode('utf-8')}")
    echo_line(f"minimal_digest: {report.minimal_digest}")
    echo_line(f"origin_digest: {report.origin_digest}")
    echo_line(f"failure: {report.failure.describe()}")
    echo_line(f"shrink_path: {len(report.shrink_path)} steps")
    for line in _describe_path(report):
        echo_line(line)
    calls = ", ".join(str(count) for _, count in report.minima)
    echo_line(f"property_calls: {report.property_calls} (per attempt: {calls})")
    echo_line(
        f"attempts: {report.attempts}, identical_minima: {report.identical_minima}, "
        f"stable: {'yes' if report.stable else 'no'}"
    )
    if out is not None:
        echo_line(f"minimal fixture written to {out}")


def register(app: typer.Typer) -> None:
    app.command("shrink")(shrink)
