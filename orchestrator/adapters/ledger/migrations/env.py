"""Alembic's environment for the ledger.

The caller (:mod:`orchestrator.adapters.ledger.migrate`) opens the connection, begins the
transaction and takes the migration lock; it passes the connection in
``config.attributes["connection"]``. Migrations then run inside that one transaction.
"""

from __future__ import annotations

from alembic import context

from orchestrator.adapters.ledger.schema import METADATA

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the ledger's migrations run on a connection the caller passes in")

context.configure(
    connection=connection,
    target_metadata=METADATA,
    # SQLite alters most things by copying the table: let autogenerate write batch blocks.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
