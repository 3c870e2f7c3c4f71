"""PostgreSQL: `ebb db upgrade` migrates a real database with Alembic, the migrated schema is the
one models.py describes, and rows make the round trip through SQLAlchemy async + asyncpg."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from ebb.adapters.store.migrate import current_revision, head_revision
from ebb.adapters.store.models import (
    BudgetLedgerEntry,
    Decision,
    DecisionEvent,
    Hold,
    ProcessedMessage,
    metadata,
)
from tests.kit.servers import PostgresServer

pytestmark = pytest.mark.integration

EBB = Path(sys.executable).with_name("ebb")


async def _ebb(*args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        str(EBB),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    return process.returncode or 0, out.decode()


def _schema_diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_migrate_and_round_trip(postgres_server: PostgresServer) -> None:
    # The command line, with the URL from the environment (EBB_DATABASE_URL); twice: idempotent.
    env = {**os.environ, "EBB_DATABASE_URL": postgres_server.url}
    for _ in range(2):
        code, out = await _ebb("db", "upgrade", env=env)
        assert code == 0, out
    assert f"revision {head_revision()}" in out

    engine = create_async_engine(postgres_server.url)
    try:
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as connection:
            assert await connection.run_sync(_schema_diff) == []
            tables = set(
                (
                    await connection.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
                    )
                ).scalars()
            )
        assert {"decisions", "decision_events", "budget_ledger", "holds", "processed_messages"} <= tables

        sessions = async_sessionmaker(engine, expire_on_commit=False)
        decision_id = f"d-{uuid.uuid4().hex}"
        now = datetime.now(UTC).replace(microsecond=0)
        async with sessions.begin() as session:
            session.add(
                Decision(
                    id=decision_id,
                    cluster="smoke",
                    method="consolidation",
                    reason="Underutilized",
                    action="replace",
                    nodes=[{"name": "node-a", "nodepool": "default", "instanceType": "m5.2xlarge"}],
                    replacements=[{"instanceType": "m5.large"}],
                    savings=Decimal("0.288000"),
                    state="proposed",
                    explanation={"fits": True, "pods": 3},
                    created_at=now,
                    updated_at=now,
                )
            )
            await session.flush()
            session.add(
                DecisionEvent(
                    decision_id=decision_id,
                    event_id=f"e-{uuid.uuid4().hex}",
                    type="Proposed",
                    node="node-a",
                    at=now,
                    detail={},
                )
            )
            session.add(
                BudgetLedgerEntry(
                    cluster="smoke",
                    nodepool="default",
                    node=f"node-{decision_id}",
                    decision_id=decision_id,
                    reason="Underutilized",
                    acquired_at=now,
                )
            )
            session.add(
                Hold(
                    id=f"h-{uuid.uuid4().hex}",
                    cluster="smoke",
                    scope_kind="nodepool",
                    scope="default",
                    kind="manual",
                    reason="maintenance window",
                    created_at=now,
                    expires_at=now + timedelta(hours=1),
                )
            )
            session.add(ProcessedMessage(consumer="smoke", message_id=decision_id, topic="ebb.smoke", processed_at=now))

        async with sessions() as session:
            decision = await session.get(Decision, decision_id)
            assert decision is not None
            assert decision.nodes[0]["instanceType"] == "m5.2xlarge"
            assert decision.savings == Decimal("0.288000")
            assert decision.created_at == now and decision.created_at.tzinfo is not None
            events = (
                await session.scalars(select(DecisionEvent).where(DecisionEvent.decision_id == decision_id))
            ).all()
            assert [e.type for e in events] == ["Proposed"]

        # budget rows are taken under row locks
        async with sessions.begin() as session:
            locked = (
                await session.scalars(
                    select(BudgetLedgerEntry)
                    .where(BudgetLedgerEntry.cluster == "smoke", BudgetLedgerEntry.nodepool == "default")
                    .with_for_update()
                )
            ).all()
            assert any(entry.decision_id == decision_id for entry in locked)

        # a message id is applied once per consumer
        with pytest.raises(IntegrityError):
            async with sessions.begin() as session:
                session.add(ProcessedMessage(consumer="smoke", message_id=decision_id, processed_at=now))
        # states outside the lifecycle are refused by the database
        with pytest.raises(IntegrityError):
            async with sessions.begin() as session:
                session.add(
                    Decision(
                        id=f"d-{uuid.uuid4().hex}",
                        cluster="smoke",
                        method="drift",
                        reason="x",
                        action="delete",
                        nodes=[],
                        replacements=[],
                        state="bogus",
                        explanation={},
                        created_at=now,
                        updated_at=now,
                    )
                )

        async with sessions.begin() as session:
            await session.delete(await session.get(Decision, decision_id))
        async with sessions() as session:
            # decision_events cascade; the ledger entry is kept, detached
            assert (
                await session.scalars(select(DecisionEvent).where(DecisionEvent.decision_id == decision_id))
            ).all() == []
    finally:
        await engine.dispose()
