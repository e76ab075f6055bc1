"""The ``orchestrator`` console script: signal handlers first, then the command line.

Importing the command line (Typer, Click, every command module) takes a moment; the
handlers are installed before it, so an interruption at any time after the
interpreter started is one line and exit 130, never a ``KeyboardInterrupt``
traceback or a death by SIGTERM.
"""

from __future__ import annotations

import sys


def _interrupted() -> None:
    from orchestrator import interrupts

    received = interrupts.received()
    head = f"interrupted ({interrupts.signal_name(received)})" if received else "interrupted"
    sys.stderr.write(f"orchestrator: error: {head}\n")
    sys.stderr.flush()
    sys.exit(130)


def main() -> None:
    from orchestrator import interrupts

    interrupts.install()
    try:
        from orchestrator.cli import main as cli_main

        cli_main()
    except SystemExit as stop:
        # A command that finished its work (``prompt_exit.allow``) ends without the
        # interpreter's teardown when nothing would be lost; else the usual exit.
        from orchestrator import prompt_exit

        prompt_exit.exit_now(stop.code)
        raise
    except KeyboardInterrupt:  # outside every command's own handling (say, while starting)
        _interrupted()
    finally:
        # From here on the exit status is decided: a late signal is only noted.
        interrupts.close()
