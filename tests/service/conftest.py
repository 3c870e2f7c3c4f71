"""Fixtures shared by the service tests (no servers: the InMemoryBus and SQLite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DecisionStore]:
    """The store the planner, the executor and the API share, on a migrated SQLite database (cluster "unit";
    the executor's commands recorded under the consumer "executor-test")."""
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "unit", consumer="executor-test")
    try:
        yield store
    finally:
        await store.close()
