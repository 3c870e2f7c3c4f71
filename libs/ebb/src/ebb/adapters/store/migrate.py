"""Run the store's Alembic migrations from code (``ebb db upgrade`` and tests use this).

Given a URL, these functions make their own engine and dispose of it before they return, and they wait for
the aiosqlite worker threads it started to end: a SQLite file that cannot be opened leaves a thread that
answers its stop on the event loop later, after ``asyncio.run`` has closed that loop, and the thread dies
with an unhandled exception (omnilib/aiosqlite#241).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
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
    asyncio.run(upgrade_async(url, revision))


#: the name Python gives a thread whose target is aiosqlite's worker function
_AIOSQLITE_WORKER = "(_connection_worker_thread)"
#: how long a stopped aiosqlite worker may take to end (it closes one SQLite connection)
_WORKER_STOP_SECONDS = 5.0


def _aiosqlite_workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.endswith(_AIOSQLITE_WORKER)}


@contextlib.asynccontextmanager
async def _own_engine(target: str | AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """The engine for ``target``: the one given, or one made for the URL, disposed of on the way out, after
    which the aiosqlite worker threads started meanwhile are waited for (they were all told to stop)."""
    if not isinstance(target, str):
        yield target
        return
    before = _aiosqlite_workers()
    engine = create_async_engine(async_url(target))
    try:
        yield engine
    finally:
        await engine.dispose()
        for worker in _aiosqlite_workers() - before:
            await asyncio.to_thread(worker.join, _WORKER_STOP_SECONDS)


def _upgrade_on(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade_async(target: str | AsyncEngine, revision: str = "head") -> None:
    """Migrate the database (a URL or an engine) to ``revision`` from a running event loop."""
    async with _own_engine(target) as engine, engine.begin() as connection:
        await connection.run_sync(_upgrade_on, revision)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(target: str | AsyncEngine) -> str | None:
    """The database's current revision (None before the first migration)."""
    async with _own_engine(target) as engine, engine.connect() as connection:
        return await connection.run_sync(_current)


def head_revision() -> str | None:
    """The newest revision shipped with this version of ebb."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
