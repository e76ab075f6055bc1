"""One exception tree, one table of exit codes.

Every error the tool raises on purpose derives from :class:`OrchestratorError`.
The CLI catches that base class once and exits with ``exit_code_for(error)``;
nothing else in the package calls ``sys.exit``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal


class ExitCode(IntEnum):
    """The process exit statuses, the same for every command."""

    OK = 0  # done, or a non-blocking lane
    BLOCKING = 1  # a blocking verdict (or an overdue freeze found by check/thaw)
    USAGE = 2  # bad usage or unreadable input; nothing written
    UNDECIDED = 3  # an undecided lane, or the infrastructure failed
    INTERRUPTED = 130  # SIGINT


class OrchestratorError(Exception):
    """Base of every error the tool raises on purpose."""

    exit_code: ExitCode = ExitCode.UNDECIDED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(OrchestratorError):
    """A file, document or argument the tool cannot use (exit 2)."""

    exit_code = ExitCode.USAGE


class SchemaError(InputError):
    """A JSON document of the wrong shape: wrong ``schema``, wrong types."""


class UnknownRevisionError(InputError):
    """A git revision that does not resolve in the repository."""


class PropertyImportError(InputError):
    """A ``MODULE:FUNCTION`` that cannot be imported or is not callable."""


class PropertyDoesNotFailError(InputError):
    """``shrink`` was given a fixture on which the property holds."""


class ShrinkStoppedError(OrchestratorError):
    """A shrink against a test met a candidate with no verdict (a timeout or a harness
    error): never the same failure, so the shrink stops undecided (exit 3), naming the
    candidate."""

    exit_code = ExitCode.UNDECIDED


class InfrastructureError(OrchestratorError):
    """The machinery failed: no Docker engine, no image, no database (exit 3)."""

    exit_code = ExitCode.UNDECIDED


# Why the engine failed us; the same words become a replay's harness sub-reason.
EngineReason = Literal["engine_gone", "docker_api", "image_not_found"]


class EngineError(InfrastructureError):
    """The Docker engine failed us (exit 3).

    Every Docker SDK and transport error (``docker.errors.*``,
    ``requests.exceptions.*`` and the socket errors they wrap) is translated into
    this one class inside the Docker adapter; nothing outside it sees the SDK's.
    ``reason`` says what failed: ``engine_gone`` (nothing answers), ``docker_api``
    (it answers and refused) or ``image_not_found``.
    """

    def __init__(self, reason: EngineReason, message: str) -> None:
        super().__init__(message)
        self.reason: EngineReason = reason


class EngineUnavailableError(EngineError):
    """No Docker engine answers."""

    def __init__(self, message: str) -> None:
        super().__init__("engine_gone", message)


class ImageNotFoundError(EngineError):
    """The runner image is not present locally (the tool never pulls)."""

    def __init__(self, message: str) -> None:
        super().__init__("image_not_found", message)


class ImageBuildError(InfrastructureError):
    """A project image could not be built: a build step failed (exit 3). The message
    carries the step's last lines."""


class LockTimeoutError(InfrastructureError):
    """A build lock stayed held past its timeout (another build of the same inputs runs,
    or hangs): exit 3, one line naming the lock."""


class GitError(InfrastructureError):
    """A git command failed on good input (a corrupt object, a full disk): exit 3.

    Bad input (an unknown revision, a patch that does not apply) is an
    :class:`InputError` instead.
    """


class LedgerError(InfrastructureError):
    """The ledger cannot be opened, or is of a newer schema than this tool."""


class LedgerLocationError(InputError):
    """A ledger the user named that cannot be used: not a database URL, a back end
    other than SQLite or PostgreSQL, or a SQLite path under a file or in a folder that
    cannot be written (exit 2, found before anything runs)."""


class CapError(OrchestratorError):
    """What came back from the containers passed a documented cap (tests per side, bytes
    per run folder: ``orchestrator.core.run_limits``); the message names it (exit 3)."""

    exit_code = ExitCode.UNDECIDED


class InternalError(OrchestratorError):
    """The tool itself failed: a bug or a local fault (say, a full disk under the run
    folder), neither the engine nor the input (exit 3). The traceback is kept."""

    exit_code = ExitCode.UNDECIDED


class LocalWriteError(InternalError):
    """A file the tool writes for the user could not be written once the run was under
    way (exit 3). ``reason`` is ``disk_full`` (no space left) or ``internal_error``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class VerdictError(OrchestratorError):
    """Raised to end a command with a verdict's exit status after printing it."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(OrchestratorError):
    """SIGINT or SIGTERM; cleanup has already run. The message says what was left."""

    exit_code = ExitCode.INTERRUPTED


def one_line(error: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def exit_code_for(error: BaseException) -> ExitCode:
    """The one mapping from an exception to a process exit status."""
    if isinstance(error, OrchestratorError):
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.UNDECIDED
