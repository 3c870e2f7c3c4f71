"""The embedded mode's SQLite (ebb_embedded.store): every statement runs on the loop's thread, at once, so on the
virtual-time loop a query takes no virtual time and no thread ever calls back into the loop; the store works
as on aiosqlite's own thread (migrations, the decision store, errors, WAL)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import head_revision, upgrade_async
from ebb.adapters.virtual_time import VirtualTimeLoop
from ebb_embedded.store import sqlite_engine
from tests.kit.builders import NOW


def test_statements_run_on_the_loops_thread_and_take_no_virtual_time(tmp_path: Path) -> None:
    async def main() -> tuple[set[str], float, str | None, list[str], str]:
        loop = asyncio.get_running_loop()
        before = {t.name for t in threading.enumerate()}
        engine = sqlite_engine(tmp_path / "ebb.sqlite")
        began = loop.time()
        try:
            await upgrade_async(engine)
            store = DecisionStore(engine, "embedded")
            hold = await store.create_hold(scope_kind="node", scope="n1", reason="test", expires_at=None,
                                           created_by="test", now=NOW)
            holds = [h.id for h in await store.list_holds(NOW)]
            async with engine.connect() as connection:
                mode = str((await connection.execute(text("PRAGMA journal_mode"))).scalar())
                revision = str((await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar())
        finally:
            await engine.dispose()
        started = {t.name for t in threading.enumerate()} - before
        assert holds == [hold.id]
        return started, loop.time() - began, revision, holds, mode

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        started, took, revision, _holds, mode = runner.run(main())
    assert started == set(), "no worker thread was started"
    assert took == 0.0
    assert revision == head_revision()
    assert mode == "wal"


async def test_an_error_reaches_the_caller_and_the_connection_goes_on(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "ebb.sqlite")
    try:
        async with engine.connect() as connection:
            with pytest.raises(Exception, match="no such table"):
                await connection.execute(text("SELECT * FROM missing"))
            await connection.rollback()
            assert (await connection.execute(text("SELECT 41 + 1"))).scalar() == 42
    finally:
        await engine.dispose()


async def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "ebb.sqlite")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
            await connection.execute(text("CREATE TABLE child (parent INTEGER REFERENCES parent(id))"))
        with pytest.raises(Exception, match="FOREIGN KEY"):
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO child VALUES (7)"))
    finally:
        await engine.dispose()
    with sqlite3.connect(tmp_path / "ebb.sqlite") as db:
        assert db.execute("SELECT count(*) FROM child").fetchone() == (0,)


@pytest.mark.parametrize(("durable", "synchronous"), [(True, 2), (False, 0)])
async def test_a_database_that_ends_with_the_run_does_not_wait_for_the_disk(tmp_path: Path, durable: bool,
                                                                            synchronous: int) -> None:
    # a run's own temporary database (no --database) is not durable: commits do not wait for the disk (FULL is 2)
    engine = sqlite_engine(tmp_path / "ebb.sqlite", durable=durable)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("PRAGMA synchronous"))).scalar() == synchronous
    finally:
        await engine.dispose()
