"""The drift-detector service on the InMemoryBus: cluster objects in -> NodeFinding messages out (keyed by
node), cleared when fixed, only changes published, debounced recomputes, time-based expiry on resync,
the ebb.sh/drifted annotation kept in line, restart from the compacted topic, graceful stop."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_NODE_FINDINGS,
    ClusterObject,
    Message,
    NodeFinding,
    NodeFindingCleared,
    from_kafka,
)
from ebb_drift_detector import app
from ebb_drift_detector.detector import Detector
from ebb_drift_detector.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from builders import NOW, catalog, node, nodepool, pod

T = TypeVar("T")
NEVER = {"consolidate_after": "Never"}


class FakeAnnotator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.values: dict[str, str | None] = {}

    async def set_drifted(self, node: str, reason: str | None) -> None:
        self.calls.append((node, reason))
        self.values[node] = reason


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def obj(doc: dict[str, Any]) -> ClusterObject:
    meta = doc["metadata"]
    name = meta.get("name") or doc["kind"]
    return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=name,
                         resource_version="1", object=doc)


def tombstone(kind: str, namespace: str, name: str) -> ClusterObject:
    return ClusterObject(kind=kind, namespace=namespace, name=name, resource_version="2", object=None)


async def publish(bus: InMemoryBus, *docs: dict[str, Any]) -> None:
    for doc in docs:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(doc))


def messages(bus: InMemoryBus) -> list[Message]:
    records = sorted(bus.records(TOPIC_NODE_FINDINGS), key=lambda r: (r.partition, r.offset))
    return [from_kafka(TOPIC_NODE_FINDINGS, r.key, r.value, r.headers) for r in records]


def summary(bus: InMemoryBus) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for m in messages(bus):
        if isinstance(m, NodeFinding):
            out.append(("raised", m.node, m.finding))
        elif isinstance(m, NodeFindingCleared):
            out.append(("cleared", m.node, m.finding))
    return sorted(out)


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
        await asyncio.sleep(0.01)


class Running:
    """The service (app.run) on an InMemoryBus with a fake annotator and a settable clock."""

    def __init__(self, bus: InMemoryBus, *, debounce: float = 0.0, resync: float = 30.0) -> None:
        self.bus = bus
        self.annotator = FakeAnnotator()
        self.clock = Clock()
        self.settings = Settings(debounce_seconds=debounce, resync_seconds=resync, group="dd-test")
        self.stop = asyncio.Event()
        self.started = asyncio.Event()
        self.detector: Detector | None = None
        self.task: asyncio.Task[None] | None = None

    def _ready(self, detector: Detector) -> None:
        self.detector = detector

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(app.run(self.settings, self.stop, bus=self.bus, annotator=self.annotator,
                                                clock=self.clock, started=self.started,
                                                detector_ready=self._ready))
        await asyncio.wait_for(self.started.wait(), 5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)

    async def settled(self) -> None:
        """Wait until every cluster object is consumed and the loop has recomputed."""
        assert self.detector is not None
        detector = self.detector
        await eventually("the objects consumed", lambda: self.bus.lag("dd-test", TOPIC_CLUSTER_OBJECTS) == 0)
        await eventually("a recompute", lambda: not detector.changed.is_set())
        await asyncio.sleep(0.05)


async def test_drifted_node_is_found_annotated_and_cleared_when_fixed() -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(node_hash="new", **NEVER), node("n1", node_hash="old"),
                  node("n2", node_hash="new"), pod("p1", "n1"), pod("p2", "n2"))
    async with Running(bus) as svc:
        assert summary(bus) == [("raised", "n1", "Drifted")]
        [raised] = messages(bus)
        assert isinstance(raised, NodeFinding)
        assert raised.key() == "n1"
        assert "nodepool-hash old differs from NodePool default's new" in raised.reason
        assert raised.since == NOW  # a hash drift has no time of its own: first seen
        assert [r.key for r in bus.records(TOPIC_NODE_FINDINGS)] == [b"n1"]
        assert svc.annotator.values == {"n1": raised.reason}

        # fix it: the node now carries the pool's hash
        await publish(bus, node("n1", node_hash="new"))
        await svc.settled()
        await eventually("the cleared finding", lambda: ("cleared", "n1", "Drifted") in summary(bus))
        assert summary(bus) == [("cleared", "n1", "Drifted"), ("raised", "n1", "Drifted")]
        cleared = messages(bus)[-1]
        assert isinstance(cleared, NodeFindingCleared) and cleared.at == NOW
        assert svc.annotator.values == {"n1": None}


async def test_only_changes_are_published() -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(node_hash="new", **NEVER), node("n1", node_hash="old"), pod("p1", "n1"))
    async with Running(bus) as svc:
        assert len(messages(bus)) == 1
        # unrelated changes: a new pod elsewhere, the same object again
        await publish(bus, node("n2", node_hash="new"), pod("p2", "n2"), node("n1", node_hash="old"))
        await svc.settled()
        assert svc.detector is not None
        await svc.detector.recompute()
        assert len(messages(bus)) == 1
        assert len(svc.annotator.calls) == 1


async def test_empty_node_raised_then_cleared_when_a_pod_arrives_and_deleted_node_cleared() -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(**NEVER), node("n1"), node("n2"), pod("p2", "n2"))
    async with Running(bus) as svc:
        assert summary(bus) == [("raised", "n1", "Empty")]
        first = messages(bus)[0]
        assert isinstance(first, NodeFinding) and first.since == datetime(2026, 11, 20, tzinfo=UTC)
        await publish(bus, pod("p1", "n1"))
        await svc.settled()
        await eventually("cleared", lambda: ("cleared", "n1", "Empty") in summary(bus))
        # a node that goes away takes its findings with it
        await bus.publish(TOPIC_CLUSTER_OBJECTS, tombstone("Pod", "default", "p2"))
        await svc.settled()
        await eventually("n2 empty", lambda: ("raised", "n2", "Empty") in summary(bus))
        await bus.publish(TOPIC_CLUSTER_OBJECTS, tombstone("Node", "", "n2"))
        await svc.settled()
        await eventually("n2 cleared", lambda: ("cleared", "n2", "Empty") in summary(bus))
        assert svc.annotator.calls == []  # nothing drifted, nothing annotated


async def test_expiry_and_consolidatable_arrive_with_time_on_resync() -> None:
    bus = InMemoryBus()
    created = NOW - timedelta(hours=23)
    await publish(bus, catalog(), nodepool(expire_after="24h", consolidate_after="30m"),
                  node("n1", created=created.strftime("%Y-%m-%dT%H:%M:%SZ")),
                  pod("p1", "n1", started=(NOW - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")))
    async with Running(bus, resync=0.1) as svc:
        assert summary(bus) == []
        svc.clock.now = NOW + timedelta(hours=2)
        await eventually("expired on a resync", lambda: ("raised", "n1", "Expired") in summary(bus), within=3)
        await eventually("consolidatable", lambda: ("raised", "n1", "Consolidatable") in summary(bus), within=3)
        expired = next(m for m in messages(bus) if isinstance(m, NodeFinding) and m.finding == "Expired")
        assert expired.since == created + timedelta(hours=24)
        await asyncio.sleep(0.3)  # more resyncs: nothing new
        assert len(messages(bus)) == 2


async def test_recomputes_are_debounced() -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(**NEVER), node("n1"), pod("p1", "n1"))
    async with Running(bus, debounce=0.5) as svc:
        assert svc.detector is not None
        detector = svc.detector
        passes = detector.passes
        for i in range(20):  # a burst of changes
            await publish(bus, pod(f"burst-{i}", "n1"))
            await asyncio.sleep(0.01)
        await eventually("one recompute after the burst", lambda: detector.passes > passes, within=3)
        await svc.settled()
        await asyncio.sleep(0.6)
        # the burst lasted ~0.2s+ and the debounce is 0.5s: at most two passes, not one per change
        assert detector.passes - passes <= 2


async def test_restart_reads_the_compacted_topic_from_the_start() -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(node_hash="new", **NEVER), node("n1", node_hash="old"), pod("p1", "n1"))
    async with Running(bus):
        pass
    assert summary(bus) == [("raised", "n1", "Drifted")]
    # the same group again: its offsets are committed, yet the snapshot is whole from the topic
    async with Running(bus) as svc:
        assert svc.detector is not None
        assert "n1" in {n for n, fs in svc.detector.current.items() if any(f.kind == "Drifted" for f in fs)}
        assert len(svc.detector.store) == 4


async def test_invalid_snapshot_keeps_the_last_findings() -> None:
    bus = InMemoryBus()
    store = SnapshotStore()
    detector = Detector(bus, store)
    store.apply(obj(nodepool(node_hash="new", **NEVER)))
    store.apply(obj(node("n1", node_hash="old")))
    store.apply(obj(catalog()))
    assert [c.finding.kind for c in await detector.recompute()] == ["Drifted", "Empty"]
    store.apply(obj({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "default"},
                     "spec": {"containers": "not a list"}}))
    assert await detector.recompute() == []
    assert "n1" in detector.current


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_DRIFT_DETECTOR_DEBOUNCE_SECONDS", "0.5")
    monkeypatch.setenv("EBB_DRIFT_DETECTOR_RESYNC_SECONDS", "10")
    monkeypatch.setenv("EBB_DRIFT_DETECTOR_ANNOTATE_NODES", "false")
    settings = Settings()
    assert (settings.debounce_seconds, settings.resync_seconds, settings.annotate_nodes) == (0.5, 10.0, False)
