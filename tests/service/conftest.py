"""Fixtures shared by the service tests (no servers: the InMemoryBus and SQLite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ebb.adapters.store.migrate import upgrade_async
from ebb_consolidation_planner.store import PlannerStore
from ebb_termination_executor.store import ExecutorStore


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[PlannerStore, ExecutorStore]]:
    """The planner's and the executor's store on one migrated SQLite database (cluster "unit")."""
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    planner = PlannerStore.from_url(url, cluster="unit")
    executor = ExecutorStore.from_url(url, cluster="unit", consumer="executor-test")
    yield planner, executor
    await planner.close()
    await executor.close()
