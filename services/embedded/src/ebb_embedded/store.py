"""The embedded mode's database when its decisions are kept or served (``ebb run --database``, ``--api-port``; its
other runs keep them in memory, ``ebb.adapters.store.memory``): SQLite through aiosqlite, with every statement run
on the event loop's thread.

aiosqlite runs each statement on a thread of its own and hands the result back with
``call_soon_threadsafe``. On the embedded mode's virtual-time loop (``ebb.adapters.virtual_time``) such a
thread is invisible: a task waiting for a query looks idle, so the clock would jump past timers while the
query runs, and where the result lands among the other tasks' steps would depend on the machine. Here the
queue aiosqlite feeds its thread (``Connection._tx``, which SQLAlchemy's aiosqlite dialect also uses directly)
is replaced by one that runs each call at once, on the caller's thread, and settles its future before the
caller awaits it. A statement then takes no virtual time and the run stays deterministic.

Nothing can wait for a lock held by another task: a statement never yields to the loop, and the stores'
transactions (``ebb.adapters.store.decision_store``) await nothing but their own statements, so each runs start to
end without another task in between. Leaving a session does yield: SQLAlchemy closes it in a task of its own, so
other tasks run between two reads (the planner keeps a pass's reads until the next write for that reason). A busy
database (another process holding a write lock on a ``--database`` file) is an error after ``BUSY_TIMEOUT``
seconds, which block the loop meanwhile.

Everything else is as in the distributed mode: the same Alembic revisions, WAL, foreign keys.

``WriteCount`` counts the statements that may change the database. Every writer of the embedded mode (planner,
executor, decisions-api) goes through the one engine, so an unchanged count means an unchanged database: the
planner reuses a pass's answer on that (``ebb_consolidation_planner.planner``) without reading the store.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ebb.adapters.store.migrate import async_url

#: seconds a statement waits for another process's lock on the database file
BUSY_TIMEOUT = 5.0


class _RunAtOnce:
    """aiosqlite's queue of calls for its worker thread: ``put_nowait((future, call))`` runs the call now."""

    @staticmethod
    def put_nowait(item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, call = item
        try:
            result = call()
        except Exception as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            return
        if future is not None and not future.done():
            future.set_result(result)


class InlineConnection(aiosqlite.Connection):
    """An aiosqlite connection whose statements run on the caller's thread (no worker thread is started)."""

    def __init__(self, connector: Callable[[], sqlite3.Connection], iter_chunk_size: int = 64) -> None:
        super().__init__(connector, iter_chunk_size)
        self._tx = _RunAtOnce()  # type: ignore[assignment]

    def __await__(self) -> Any:
        return self._connect().__await__()


#: statements that only read: every other one counts as a write (conservatively: a write that changes nothing
#: counts too)
READ_ONLY = ("SELECT", "PRAGMA")


class WriteCount:
    """The number of statements run on an engine that may have changed its database (call it to read it)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.writes = 0
        event.listen(engine.sync_engine, "before_cursor_execute", self._executed)

    def _executed(self, _connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if not statement.lstrip()[:6].upper().startswith(READ_ONLY):
            self.writes += 1

    def __call__(self) -> int:
        return self.writes


def sqlite_engine(path: Path, *, durable: bool = True) -> AsyncEngine:
    """An engine on the SQLite file ``path`` whose statements run on the loop's thread (WAL, foreign keys). Not
    ``durable``: no commit waits for the disk (``synchronous=OFF``), for a database that ends with the run: a crash
    of the machine loses it either way."""

    async def connect() -> InlineConnection:
        connection = InlineConnection(partial(sqlite3.connect, str(path), timeout=BUSY_TIMEOUT,
                                              check_same_thread=False))
        await connection
        return connection

    # the URL chooses the dialect and the pool (a file's: a queue of connections); the connections are ours
    engine = create_async_engine(async_url(f"sqlite:///{path}"), async_creator=connect)

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        if not durable:
            cursor.execute("PRAGMA synchronous=OFF")
        cursor.close()

    return engine
