"""Run the store's Alembic migrations from code (``ebb db upgrade`` and tests use this)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

_ASYNC_DRIVERS = {"postgresql": "asyncpg", "sqlite": "aiosqlite"}


def async_url(url: str) -> str:
    """The URL with an asyncio driver: ``postgresql://`` → ``postgresql+asyncpg://``,
    ``sqlite://`` → ``sqlite+aiosqlite://``; URLs that name a driver are kept."""
    parsed = make_url(url)
    if parsed.drivername in _ASYNC_DRIVERS:
        parsed = parsed.set(drivername=f"{parsed.drivername}+{_ASYNC_DRIVERS[parsed.drivername]}")
    return parsed.render_as_string(hide_password=False)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration for the store, without an alembic.ini."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", async_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision``. Blocking: it runs its own event loop, so
    call :func:`upgrade_async` from async code."""
    command.upgrade(alembic_config(url), revision)


def _upgrade_on(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade_async(target: str | AsyncEngine, revision: str = "head") -> None:
    """Migrate the database (a URL or an engine) to ``revision`` from a running event loop."""
    engine = create_async_engine(async_url(target)) if isinstance(target, str) else target
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade_on, revision)
    finally:
        if isinstance(target, str):
            await engine.dispose()


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(target: str | AsyncEngine) -> str | None:
    """The database's current revision (None before the first migration)."""
    engine = create_async_engine(async_url(target)) if isinstance(target, str) else target
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_current)
    finally:
        if isinstance(target, str):
            await engine.dispose()


def head_revision() -> str | None:
    """The newest revision shipped with this version of ebb."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
