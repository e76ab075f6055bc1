"""One module per command (as pre-commit does).

A module declares its command with Typer (``register(app: typer.Typer) -> None``) or,
for the read commands that must start fast, with plain Click (a ``command`` attribute).
``orchestrator.cli`` lists every command with the first paragraph of its help
(``COMMANDS``; a test holds the list to the modules) and imports a module only when its
command is asked for. Modules import their heavy dependencies (Docker, SQLAlchemy,
matplotlib) inside the command body so that ``--help`` stays fast.
"""
