"""`ebb db`: manage ebb's database (PostgreSQL, or SQLite in embedded mode).

An operational failure (the server does not answer, refuses the login, the file cannot be opened) is one
line on stderr and exit 1; a URL that is no database URL is exit 2. Neither prints a traceback: the
operator needs the cause, not the stack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import typer

from ebb_cli.common import FlagCommand, FlagGroup, require_extra

db_app = typer.Typer(help="Manage ebb's database schema (Alembic migrations).", no_args_is_help=True,
                     cls=FlagGroup)

#: what the migrations import: SQLAlchemy and Alembic, and the drivers of PostgreSQL and SQLite (the ``db`` extra)
DB_MODULES = ("sqlalchemy", "alembic", "asyncpg", "aiosqlite")

DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="EBB_DATABASE_URL",
        help="SQLAlchemy URL, e.g. postgresql+asyncpg://user:pass@host:5432/ebb or sqlite:///ebb.db",
        show_envvar=True,
    ),
]


def _shown(url: str) -> str:
    """The URL as it may be printed: without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL has no password we could hide; show nothing of it
        return "the given URL"


@contextlib.contextmanager
def _database_errors(url: str) -> Iterator[None]:
    from asyncpg import InterfaceError, PostgresError
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    try:
        yield
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        typer.echo(f"error: --database-url: {_shown(url)} is not a database URL ebb can use: {exc}", err=True)
        raise typer.Exit(2) from exc
    # asyncpg raises its own errors on connect (a refused login, a missing database), not SQLAlchemy's
    except (OSError, TimeoutError, DBAPIError, PostgresError, InterfaceError) as exc:
        typer.echo(f"error: cannot use the database at {_shown(url)}: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from exc


@db_app.command(cls=FlagCommand)
def upgrade(
    database_url: DatabaseUrl,
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Migrate the database to the newest schema (or to REVISION)."""
    require_extra("db", "ebb db", *DB_MODULES)
    import asyncio

    from ebb.adapters.store.migrate import current_revision
    from ebb.adapters.store.migrate import upgrade as run_upgrade

    with _database_errors(database_url):
        run_upgrade(database_url, revision)
        typer.echo(f"database at revision {asyncio.run(current_revision(database_url))}")


@db_app.command(cls=FlagCommand)
def current(database_url: DatabaseUrl) -> None:
    """Print the database's current schema revision and the newest one this ebb ships."""
    require_extra("db", "ebb db", *DB_MODULES)
    import asyncio

    from ebb.adapters.store.migrate import current_revision, head_revision

    with _database_errors(database_url):
        typer.echo(f"current: {asyncio.run(current_revision(database_url))}")
    typer.echo(f"head:    {head_revision()}")
