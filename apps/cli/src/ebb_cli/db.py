"""`ebb db`: manage ebb's database (PostgreSQL, or SQLite in embedded mode)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

db_app = typer.Typer(help="Manage ebb's database schema (Alembic migrations).", no_args_is_help=True)

DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="EBB_DATABASE_URL",
        help="SQLAlchemy URL, e.g. postgresql+asyncpg://user:pass@host:5432/ebb or sqlite:///ebb.db",
        show_envvar=True,
    ),
]


@db_app.command()
def upgrade(
    database_url: DatabaseUrl,
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Migrate the database to the newest schema (or to REVISION)."""
    from ebb.adapters.store.migrate import current_revision
    from ebb.adapters.store.migrate import upgrade as run_upgrade

    run_upgrade(database_url, revision)
    typer.echo(f"database at revision {asyncio.run(current_revision(database_url))}")


@db_app.command()
def current(database_url: DatabaseUrl) -> None:
    """Print the database's current schema revision and the newest one this ebb ships."""
    from ebb.adapters.store.migrate import current_revision, head_revision

    typer.echo(f"current: {asyncio.run(current_revision(database_url))}")
    typer.echo(f"head:    {head_revision()}")
