"""``ebb.adapters.record`` from the cluster-watcher's topic, on the in-memory bus: the compacted topic read to its
end is the start, the records after it are the changes at the time they were published, and ebb's decision steps
name who removed a node and why. (The same on Kafka is the same ``Bus``: tests/kit/bus_conformance.py.)"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import ManualClock
from ebb.adapters.record import read_start_from_bus, record_from_bus
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS, ClusterObject, DisruptionEvent
from ebb.core.recording import Recorder
from tests.kit.builders import NOW, node, nodepool, pod
from tests.kit.waiting import eventually


def upsert(obj: dict[str, object]) -> ClusterObject:
    meta: dict[str, str] = obj["metadata"]  # type: ignore[assignment]
    return ClusterObject(kind=str(obj["kind"]), namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=obj)


def gone(kind: str, namespace: str, name: str) -> ClusterObject:
    return ClusterObject(kind=kind, namespace=namespace, name=name, resource_version="2", object=None)


async def test_a_recording_from_the_topic_starts_from_its_compacted_state_and_follows_it() -> None:
    now = [NOW]
    bus = InMemoryBus(clock=lambda: now[0])
    for obj in (nodepool(), node("n0"), pod("web-a", "n0", owner=("ReplicaSet", "web"))):
        await bus.publish(TOPIC_CLUSTER_OBJECTS, upsert(obj))
    clock = ManualClock(NOW)
    started, offsets = await read_start_from_bus(bus, clock, "kafka test")
    assert sorted(d["kind"] for d in started.documents) == ["Node", "NodePool", "Pod"]
    recorder = Recorder(start=started.at, documents=started.documents)
    stop = asyncio.Event()
    task = asyncio.create_task(record_from_bus(bus, offsets, recorder, stop, clock=clock,
                                               group=f"record-{uuid.uuid4().hex}"))

    def at(seconds: float) -> datetime:
        return NOW + timedelta(seconds=seconds)

    async def publish(topic: str, message: ClusterObject | DisruptionEvent) -> None:
        await bus.publish(topic, message)
        await asyncio.sleep(0.05)  # the recorder keeps up: the in-memory topic keeps only the latest per key

    now[0] = at(30)
    await publish(TOPIC_CLUSTER_OBJECTS, upsert(pod("job-0", None, phase="Pending", owner=("Job", "j"))))
    now[0] = at(40)
    await publish(TOPIC_CLUSTER_OBJECTS, upsert(node("n1")))
    now[0] = at(500)
    await publish(TOPIC_DISRUPTION_EVENTS, DisruptionEvent.step(
        "d-1", "n1", "Tainted", "emptiness: the node is empty", at(500)))
    await publish(TOPIC_CLUSTER_OBJECTS, gone("Pod", "default", "job-0"))
    now[0] = at(520)
    await publish(TOPIC_CLUSTER_OBJECTS, gone("Node", "", "n1"))
    now[0] = at(530)  # a later record: the ones before it are handed over (in time order)
    await publish(TOPIC_CLUSTER_OBJECTS, upsert(pod("web-b", None, phase="Pending", owner=("ReplicaSet", "web"))))
    await eventually("every change recorded", lambda: recorder.counts.removals == 1, within=5,
                     on_timeout=lambda: f"{recorder.counts}")
    assert recorder.counts.arrivals == 1  # web-b is held until a newer record (or the end)
    stop.set()
    await task
    assert recorder.counts.arrivals == 2

    trace = recorder.trace(at(600), name="from-kafka")
    assert [(e.at, e.create is not None, e.depart is not None) for e in trace.events] == [
        (30.0, True, False), (500.0, False, True), (530.0, True, False)]
    assert [(c.at, c.node, c.change, c.by, c.reason) for c in trace.observed] == [
        (40.0, "n1", "launched", "karpenter", "provisioning"), (520.0, "n1", "removed", "ebb", "Empty")]
