"""Hostile cluster objects through the consolidation-planner's real bus handler (issue 13: fuzzing).

Records that decode still carry whatever a broken watcher or a hostile producer put in the object: the
hostile clusters of tests/property/test_hostile_input.py (one to three fields of a valid cluster replaced by
None, bools, huge or negative numbers, NaN, odd strings, lists, mappings) are published on
ebb.cluster.objects to a running planner (``app.run`` on the InMemoryBus and SQLite, as in
tests/service/test_planner.py). The planner must neither crash nor stop consuming: a sentinel object
published after them is applied, the planner task is still running, and with the valid cluster published
again it applies it and runs its passes. Objects the contract refuses at the producer (a NaN is no JSON) are counted and
skipped. The inputs tried are printed (``pytest -s``)."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ContractError
from tests.property.test_hostile_input import _cluster, hostile_clusters
from tests.service.test_planner import Running, eventually, obj
from tests.unit.builders import node

EXAMPLES = int(os.environ.get("EBB_FUZZ_PLANNER_EXAMPLES", "15"))
TRIED: Counter[str] = Counter()


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('fuzz-planner')) / 'ebb.db'}"
    asyncio.run(upgrade_async(url))
    yield url
    print("\nplanner fuzzing: inputs tried", dict(TRIED))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(documents=hostile_clusters())
def test_the_planner_survives_hostile_objects(migrated: str, documents: list[dict[str, Any]]) -> None:
    TRIED["clusters"] += 1
    asyncio.run(_plan(migrated, documents))


async def _plan(url: str, documents: list[dict[str, Any]]) -> None:
    bus = InMemoryBus()
    async with Running(bus, url) as running:
        for doc in documents:
            try:
                message = obj(doc)
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
            except (ContractError, ValidationError, KeyError, TypeError, AttributeError):
                TRIED["objects refused by the contract"] += 1
            else:
                TRIED["objects published"] += 1
        await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(node("sentinel")))
        planner = await eventually("the planner", lambda: running.planner)
        await eventually("the sentinel applied", lambda: planner.objects.get("Node", "", "sentinel"))
        assert running.task is not None and not running.task.done(), "the planner stopped"
        for doc in _cluster():
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(doc))
        await eventually("the valid cluster applied", lambda: planner.objects.get("Node", "", "d") == node(
            "d", pool="other") or None)
        passes = "ebb_voluntary_disruption_decision_evaluation_duration_seconds_count"
        await eventually("a pass on the valid cluster", lambda: running.metric(
            passes, reason="", consolidation_type="") > 0 or None)
        assert not running.task.done(), "the planner stopped"
