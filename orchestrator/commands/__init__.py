"""One module per command (as pre-commit does).

Each module defines ``register(app: typer.Typer) -> None`` and is found by
``orchestrator.cli`` without a central list, so adding a command is adding a file.
Modules import their heavy dependencies (Docker, SQLAlchemy, matplotlib) inside
the command body so that ``--help`` stays fast.
"""
