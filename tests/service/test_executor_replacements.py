"""Pre-spin: the termination-executor launches a command's replacements, waits until they are Ready, then
drains and deletes; a launch that fails or a node that never gets Ready rolls everything back. On the
embedded mode's simulated cluster (API server, cloud, controllers) with the InMemoryBus and SQLite."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import DisruptionCommand
from ebb.core.launch import replacement_name
from ebb_embedded.cluster import SimulatedCluster
from ebb_termination_executor.app import build_executor
from ebb_termination_executor.settings import Settings
from tests.kit.builders import NOW, catalog, node, nodepool, pod


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def command(pool: str = "default", capacity_type: str = "on-demand") -> DisruptionCommand:
    return DisruptionCommand.model_validate({
        "decision_id": "dec-r1", "node_pool": "default", "method": "single-node-consolidation",
        "reason": "Underutilized", "action": "replace", "nodes": ["big"],
        "replacements": [{"node_pool": pool, "instance_types": ["t3.medium", "c5.large"],
                          "capacity_type": capacity_type, "zones": ["us-east-1b"], "price": 0.0416}],
        "savings_per_hour": 0.34, "explanation": "replaced by a t3.medium", "approved_at": NOW})


def cluster(clock: Clock) -> tuple[SimulatedCluster, InMemoryBus]:
    bus = InMemoryBus()
    docs = [catalog(), nodepool(node_hash="h1"), node("big", itype="m5.2xlarge"),
            pod("web-0", "big", cpu="500m"), pod("web-1", "big", cpu="500m")]
    return SimulatedCluster(docs, bus, clock, boot_seconds=60), bus


async def phases(store: DecisionStore) -> list[str]:
    """The decision's timeline as the executor recorded it (the events it published, in order)."""
    from sqlalchemy import select

    from ebb.adapters.store.models import DecisionEvent

    async with store.engine.connect() as connection:
        rows = await connection.execute(select(DecisionEvent.type).where(DecisionEvent.decision_id == "dec-r1")
                                        .order_by(DecisionEvent.id))
        return [str(t) for (t,) in rows]


async def run(store: DecisionStore, sim: SimulatedCluster, bus: InMemoryBus, clock: Clock,
              recorder: EventRecorder | None = None, **settings: Any) -> str:
    config = Settings(poll_interval_seconds=0.01, eviction_backoff_initial_seconds=0.01,
                      eviction_backoff_max_seconds=0.02, **settings)

    async def boot() -> None:  # simulated time passes while the executor waits
        for _ in range(400):
            await asyncio.sleep(0.01)
            clock.now += timedelta(seconds=1)
            await sim.schedule_pending()

    booting = asyncio.create_task(boot())
    executor = build_executor(config, sim, bus, store, asyncio.Event(), clock=clock,
                              provider=NodeProvider("simulated", sim, sim), recorder=recorder)
    try:
        return await executor.execute(command())
    finally:
        booting.cancel()


async def test_a_replacement_is_launched_and_ready_before_anything_is_drained(
        store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    outcome = await run(store, sim, bus, clock)
    assert outcome == "succeeded"
    name = replacement_name("dec-r1", 0, "default")
    new = await sim.read_node(name)
    assert new is not None
    labels = new["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "t3.medium"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["karpenter.sh/initialized"] == "true"
    assert new["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] == "h1"
    assert await sim.read_node("big") is None
    assert await store.state("dec-r1") == "succeeded"
    timeline = await phases(store)
    assert [p for p in timeline if p != "Evicted"] == ["Tainted", "Launching", "WaitingReadiness", "Terminated"]
    assert timeline.index("Evicted") > timeline.index("WaitingReadiness")
    # the moved pods found room on the replacement
    await sim.schedule_pending()
    assert sorted(o["spec"].get("nodeName") for o in sim.objects.values() if o["kind"] == "Pod") == [name, name]


async def test_a_launch_that_fails_rolls_back(store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    del sim.objects["NodePool//default"]  # the NodePool went away meanwhile
    outcome = await run(store, sim, bus, clock, failure_hold_seconds=0)
    assert outcome == "rolled_back"
    assert await phases(store) == ["Tainted", "Failed", "RolledBack"]
    big = await sim.read_node("big")
    assert big is not None and not big["spec"].get("taints")
    # everything the command did is undone (untainted, nothing launched, nothing evicted): rolled back, not failed
    assert await store.state("dec-r1") == "rolled_back"


async def test_a_replacement_never_ready_is_deleted_and_the_command_rolled_back(
        store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    sim.boot_seconds = 10**9  # it never boots
    outcome = await run(store, sim, bus, clock, replacement_ready_timeout_seconds=0.2, failure_hold_seconds=0)
    assert outcome == "rolled_back"
    assert await store.state("dec-r1") == "rolled_back"
    assert await phases(store) == ["Tainted", "Launching", "WaitingReadiness", "Failed", "RolledBack"]
    assert await sim.read_node(replacement_name("dec-r1", 0, "default")) is None
    assert len([o for o in sim.objects.values() if o["kind"] == "Pod"]) == 2  # nothing was evicted


async def test_a_command_resumed_after_a_crash_finds_the_node_it_launched(
        store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    from ebb.contracts import Replacement

    first = await sim.launch(replacement_name("dec-r1", 0, "default"),
                             Replacement.model_validate(command().replacements[0].model_dump()))
    outcome = await run(store, sim, bus, clock)
    assert outcome == "succeeded"
    assert [n["metadata"]["name"] for n in sim.nodes()] == [first.name]  # launched once


def recorder() -> tuple[EventRecorder, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []

    async def sink(namespace: str, body: dict[str, Any]) -> object:
        written.append(body)
        return body

    return EventRecorder(sink, component="ebb-termination-executor"), written


async def test_kubernetes_events_say_what_the_executor_does(store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    events, written = recorder()
    assert await run(store, sim, bus, clock, recorder=events) == "succeeded"
    await events.flush()
    name = replacement_name("dec-r1", 0, "default")
    got = [(e["involvedObject"]["name"], e["reason"], e["type"], e["message"]) for e in written]
    got = got[:3] + sorted(got[3:])
    assert got == [
        ("big", "DisruptionTerminating", "Normal", "Disrupting Node: Underutilized"),
        (name, "DisruptionLaunching", "Normal", "Launching Node: Underutilized"),
        (name, "DisruptionWaitingReadiness", "Normal", "Waiting on readiness to continue disruption"),
        # Karpenter's terminator's Pod event, once per evicted pod (their order is the drain's: concurrent)
        *sorted([("web-0", "Evicted", "Normal", "Evicted pod: Underutilized"),
                 ("web-1", "Evicted", "Normal", "Evicted pod: Underutilized")]),
    ]
    assert all(e["source"]["component"] == "ebb-termination-executor" for e in written)


async def test_a_failed_launch_is_a_failed_draining_warning(store: DecisionStore) -> None:
    clock = Clock()
    sim, bus = cluster(clock)
    del sim.objects["NodePool//default"]
    events, written = recorder()
    assert await run(store, sim, bus, clock, recorder=events, failure_hold_seconds=0) == "rolled_back"
    await events.flush()
    warnings = [(e["involvedObject"]["name"], e["reason"]) for e in written if e["type"] == "Warning"]
    assert warnings == [("big", "FailedDraining")]
    assert "NodePool default does not exist" in next(e["message"] for e in written if e["type"] == "Warning")


async def test_a_command_with_several_replacements_launches_them_all_before_draining(store: DecisionStore) -> None:
    """A repack (`EngineOptions.max_replacements` above 1): one node onto two smaller ones. Both are launched and
    Ready before anything is evicted, and the node's two pods, too big to share one, land one on each."""
    clock = Clock()
    bus = InMemoryBus()
    sim = SimulatedCluster([catalog(), nodepool(node_hash="h1"), node("big", itype="m5.2xlarge"),
                            pod("web-0", "big", cpu="1500m"), pod("web-1", "big", cpu="1500m")],
                           bus, clock, boot_seconds=60)
    one = {"node_pool": "default", "instance_types": ["t3.medium"], "capacity_type": "on-demand",
           "zones": ["us-east-1b"], "price": 0.0416}
    repack = DisruptionCommand.model_validate({
        "decision_id": "dec-r1", "node_pool": "default", "method": "multi-node-consolidation",
        "reason": "Underutilized", "action": "replace", "nodes": ["big"], "replacements": [one, one],
        "savings_per_hour": 0.30, "explanation": "replaced by 2 nodes", "approved_at": NOW})

    async def boot() -> None:
        for _ in range(400):
            await asyncio.sleep(0.01)
            clock.now += timedelta(seconds=1)
            await sim.schedule_pending()

    booting = asyncio.create_task(boot())
    executor = build_executor(Settings(poll_interval_seconds=0.01, eviction_backoff_initial_seconds=0.01,
                                       eviction_backoff_max_seconds=0.02), sim, bus, store, asyncio.Event(),
                              clock=clock, provider=NodeProvider("simulated", sim, sim))
    try:
        assert await executor.execute(repack) == "succeeded"
    finally:
        booting.cancel()
    names = [replacement_name("dec-r1", i, "default") for i in (0, 1)]
    for name in names:
        new = await sim.read_node(name)
        assert new is not None and new["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "t3.medium"
    assert await sim.read_node("big") is None
    timeline = await phases(store)
    assert timeline.index("Evicted") > timeline.index("WaitingReadiness")
    await sim.schedule_pending()
    assert sorted(o["spec"].get("nodeName") for o in sim.objects.values() if o["kind"] == "Pod") == sorted(names)
