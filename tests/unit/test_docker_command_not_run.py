"""Why a container's own command never ran, read from its inspected state (pure)."""

from __future__ import annotations

from orchestrator.adapters.docker.container import command_not_run

IDLE = ("sleep", "infinity")


def test_a_missing_executable_is_named_on_one_line() -> None:
    why = command_not_run(IDLE, {"Running": False, "ExitCode": 127})
    assert why is not None
    assert "the image has no `sleep` executable" in why
    assert "`sleep infinity`" in why
    assert "\n" not in why


def test_an_executable_that_may_not_run_is_named() -> None:
    why = command_not_run(IDLE, {"Running": False, "ExitCode": 126})
    assert why is not None
    assert "cannot execute `sleep`" in why


def test_a_running_container_or_another_exit_says_nothing() -> None:
    assert command_not_run(IDLE, {"Running": True, "ExitCode": 0}) is None
    assert command_not_run(IDLE, {"Running": False, "ExitCode": 137}) is None
    assert command_not_run(IDLE, {"Running": False}) is None
    assert command_not_run((), {"Running": False, "ExitCode": 127}) is None
