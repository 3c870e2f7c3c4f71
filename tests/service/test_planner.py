"""The consolidation-planner service on the InMemoryBus and a migrated SQLite store, always (or never) the
leader: an empty node is proposed, validated after the delay and approved (decision row, ledger row,
command on ebb.disruption.commands keyed by NodePool, Proposed/Approved events); a do-not-disrupt pod that
arrives during the delay rejects it with the reason; the budget ledger keeps two planners within a budget;
holds from the store pause planning; a replica without the leadership plans nothing."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.repository import Repository
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    ClusterObject,
    DisruptionCommand,
    DisruptionEvent,
    Message,
    from_kafka,
)
from ebb_consolidation_planner import app
from ebb_consolidation_planner.leader import AlwaysLeader, Leadership, NeverLeader
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.planner import Planner
from ebb_consolidation_planner.settings import Settings
from ebb_consolidation_planner.store import PlannerStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from builders import NOW, catalog, node, nodepool, pod

T = TypeVar("T")
DELAY = 0.2


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def obj(doc: dict[str, Any]) -> ClusterObject:
    meta = doc["metadata"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta.get("name"),
                         resource_version="1", object=doc)


async def publish(bus: InMemoryBus, *docs: dict[str, Any]) -> None:
    for doc in docs:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(doc))


def messages(bus: InMemoryBus, topic: str) -> list[Message]:
    records = sorted(bus.records(topic), key=lambda r: (r.partition, r.offset))
    return [from_kafka(topic, r.key, r.value, r.headers) for r in records]


def commands(bus: InMemoryBus) -> list[DisruptionCommand]:
    return [m for m in messages(bus, TOPIC_DISRUPTION_COMMANDS) if isinstance(m, DisruptionCommand)]


def events(bus: InMemoryBus) -> list[tuple[str, str, str]]:
    return [(m.phase, m.node, m.decision_id) for m in messages(bus, TOPIC_DISRUPTION_EVENTS)
            if isinstance(m, DisruptionEvent)]


async def eventually(what: str, probe: Callable[[], Awaitable[T | None] | T | None], within: float = 5) -> T:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


class Running:
    """app.run on an InMemoryBus and a SQLite store with a fake leader and a fixed clock."""

    def __init__(self, bus: InMemoryBus, url: str, *, leader: Leadership | None = None, delay: float = DELAY) -> None:
        self.bus = bus
        self.store = PlannerStore.from_url(url, cluster="unit")
        self.repo = Repository.from_url(url, cluster="unit")
        self.leader = leader or AlwaysLeader()
        self.metrics = Metrics()
        self.settings = Settings(debounce_seconds=0.0, pass_interval_seconds=0.3, validation_delay_seconds=delay,
                                 group="planner-test", cluster="unit")
        self.stop = asyncio.Event()
        self.started = asyncio.Event()
        self.planner: Planner | None = None
        self.task: asyncio.Task[None] | None = None

    def _ready(self, planner: Planner) -> None:
        self.planner = planner

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(app.run(self.settings, self.stop, bus=self.bus, store=self.store,
                                                leader=self.leader, metrics=self.metrics, clock=Clock(),
                                                started=self.started, planner_ready=self._ready))
        await asyncio.wait_for(self.started.wait(), 5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)
        await self.store.close()
        await self.repo.close()

    async def decisions(self, state: str | None = None) -> list[Any]:
        from ebb.adapters.store.repository import DecisionFilter

        return list((await self.repo.list_decisions(DecisionFilter(state=state))).items)

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def cluster(pool: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """n1 empty; n2, the cheapest type, running a pod that fits nowhere else once n1 goes; both in NodePool
    default."""
    return [catalog(), pool or nodepool(), node("n1"), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m")]


async def test_empty_node_is_proposed_then_approved_and_commanded(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db) as svc:
        [proposed] = await eventually("a proposed decision", svc.decisions)
        assert proposed.method == "emptiness" and proposed.reason == "Empty" and proposed.action == "delete"
        assert proposed.nodes == [{"name": "n1", "nodePool": "default", "instanceType": "m5.large"}]
        assert float(proposed.savings) > 0
        assert proposed.explanation["text"]
        [command] = await eventually("the command", lambda: commands(bus))
        assert command.decision_id == proposed.id and command.nodes == ("n1",) and command.node_pool == "default"
        assert command.method == "emptiness" and command.approved_at == NOW
        assert [r.key for r in bus.records(TOPIC_DISRUPTION_COMMANDS)] == [b"default"]
        [approved] = await svc.decisions("approved")
        assert approved.id == proposed.id and approved.approved_at == NOW
        assert events(bus) == [("Proposed", "n1", proposed.id), ("Approved", "n1", proposed.id)]
        found = await svc.repo.get_decision(proposed.id)
        assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved"]
        [entry] = await svc.store.ledger()
        assert (entry.nodepool, entry.node, entry.decision_id, entry.reason) == ("default", "n1", proposed.id, "Empty")
        # later passes do not propose the node again: it has a live decision
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("two more passes", lambda: svc.planner is not None and svc.planner.passes >= passes + 2)
        assert len(await svc.decisions()) == 1 and len(commands(bus)) == 1
        assert svc.metric("ebb_decisions_total", decision="delete", reason="Empty", consolidation_type="empty") == 1
        # n1 is being disrupted now: it counts against the budget and is no candidate any more
        assert svc.metric("ebb_nodepools_allowed_disruptions", nodepool="default", reason="Empty") == 1
        assert svc.metric("ebb_eligible_nodes", reason="Empty") == 1
        assert svc.metric("ebb_decision_evaluation_duration_seconds_count") >= 1


async def test_do_not_disrupt_pod_during_the_delay_rejects_the_decision(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, delay=0.5) as svc:
        [proposed] = await eventually("a proposed decision", svc.decisions)
        await publish(bus, pod("precious", "n1", annotations={"karpenter.sh/do-not-disrupt": "true"}))
        [rejected] = await eventually("the rejection", lambda: svc.decisions("rejected"))
        assert rejected.id == proposed.id
        assert "do-not-disrupt" in rejected.explanation["rejected"]
        assert commands(bus) == []
        assert [e[0] for e in events(bus)] == ["Proposed", "Rejected"]
        [event] = [m for m in messages(bus, TOPIC_DISRUPTION_EVENTS)
                   if isinstance(m, DisruptionEvent) and m.phase == "Rejected"]
        assert "do-not-disrupt" in event.message
        assert await svc.store.ledger() == []
        assert svc.metric("ebb_decisions_total", decision="rejected", reason="Empty", consolidation_type="empty") == 1


async def test_budget_ledger_keeps_two_planners_within_the_budget(db: str) -> None:
    """Two planners that both believe they lead, each seeing a different node empty, with a budget of one
    disruption: one decision is approved, the other rejected by the ledger."""
    pool = nodepool(budgets=[{"nodes": "1"}])
    bus_a, bus_b = InMemoryBus(), InMemoryBus()
    await publish(bus_a, catalog(), pool, node("n1"), node("n2"), pod("p2", "n2"))
    await publish(bus_b, catalog(), pool, node("n1"), node("n2"), pod("p1", "n1"))
    async with Running(bus_a, db) as a, Running(bus_b, db) as b:
        await eventually("both decisions decided",
                         lambda: _count(a.decisions("approved"), a.decisions("rejected"), want=2))
        [approved] = await a.decisions("approved")
        [rejected] = await a.decisions("rejected")
        assert {approved.nodes[0]["name"], rejected.nodes[0]["name"]} == {"n1", "n2"}
        assert "budget" in rejected.explanation["rejected"]
        assert len(commands(bus_a)) + len(commands(bus_b)) == 1
        assert [e.node for e in await a.store.ledger()] == [approved.nodes[0]["name"]]
        assert b.planner is not None


async def _count(*queries: Awaitable[list[Any]], want: int) -> bool:
    return sum([len(await q) for q in queries]) == want


async def test_a_hold_in_the_store_pauses_planning(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    repo = Repository.from_url(db, cluster="unit")
    await repo.create_hold(scope_kind="nodepool", scope="default", reason="freeze", expires_at=None, now=NOW)
    await repo.close()
    async with Running(bus, db) as svc:
        assert svc.planner is not None
        await eventually("two passes", lambda: svc.planner is not None and svc.planner.passes >= 2)
        assert await svc.decisions() == []
        assert svc.metric("ebb_eligible_nodes", reason="Empty") == 2


async def test_a_planner_without_the_leadership_does_nothing(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, leader=NeverLeader()) as svc:
        await asyncio.sleep(1.0)
        assert svc.planner is not None and svc.planner.passes == 0
        assert await svc.decisions() == []
        assert commands(bus) == [] and events(bus) == []


async def test_a_new_leader_rejects_orphaned_proposals(db: str) -> None:
    store = PlannerStore.from_url(db, cluster="unit")
    await store.propose(decision_id="d-old", method="emptiness", reason="Empty", action="delete",
                        nodes=[{"name": "n9", "nodePool": "default"}], replacements=[], savings=0.1,
                        explanation={"text": "x"}, now=NOW)
    await store.close()
    bus = InMemoryBus()
    async with Running(bus, db) as svc:
        [rejected] = await eventually("the orphan rejected", lambda: svc.decisions("rejected"))
        assert rejected.id == "d-old" and "stopped before validating" in rejected.explanation["rejected"]


async def test_metrics_are_served_on_the_port(db: str) -> None:
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bus = InMemoryBus()
    await publish(bus, *cluster())
    svc = Running(bus, db)
    svc.settings = svc.settings.model_copy(update={"metrics_port": port, "metrics_address": "127.0.0.1"})
    async with svc:
        await eventually("the approval", lambda: svc.decisions("approved"))
        async with httpx.AsyncClient() as http:
            body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        assert 'ebb_decisions_total{consolidation_type="empty",decision="delete",reason="Empty"} 1.0' in body
        assert 'ebb_nodepools_allowed_disruptions{nodepool="default",reason="Underutilized"}' in body
        assert "ebb_decision_evaluation_duration_seconds_bucket" in body
        assert 'ebb_eligible_nodes{reason="Drifted"}' in body
    with pytest.raises(httpx.HTTPError):
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
