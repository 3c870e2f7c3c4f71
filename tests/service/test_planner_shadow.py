"""Shadow mode on the in-memory bus and a migrated SQLite store (docs/shadow.md): the planner proposes, validates and
approves as it would, every decision marked shadow with its explanation and budgets, but nothing leaves the store
(no command, no event on the bus, no ledger row) and nothing is written to the cluster, whatever writers it is
handed (Kubernetes Events, annotations, DisruptionPolicy status); a removal another disrupter makes is kept with
ebb's verdict on the node, and the shadow report sets the two side by side. A real store never sees a shadow
decision, and the executor in shadow mode consumes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.store.decision_store import DecisionFilter, DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS, ClusterObject
from ebb.core.decision import State
from ebb_termination_executor import app as executor_app
from ebb_termination_executor.settings import Settings as ExecutorSettings
from tests.kit.builders import NOW, disruption_policy, node, nodepool, pod
from tests.kit.messages import disruption_command
from tests.kit.planner import FakeAnnotator, FakePolicyStatus, Running, cluster, interruption, publish
from tests.kit.waiting import eventually


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


class Sink:
    """A fake API server for the EventRecorder: counts what it is asked to write."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, namespace: str, body: dict[str, Any]) -> object:
        self.bodies.append(body)
        return body


class Recording:
    """A node API that records every call (the executor must make none in shadow mode)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            raise AssertionError(f"the executor called {name} in shadow mode")
        return call


async def test_a_shadow_planner_decides_as_usual_and_sends_and_writes_nothing(db: str) -> None:
    sink, annotator, status = Sink(), FakeAnnotator(), FakePolicyStatus()
    recorder = EventRecorder(sink, component="ebb-consolidation-planner", instance="test")
    bus = InMemoryBus()
    # n1 empty (ebb would remove it), n3 drifted (an annotation in enforce mode), a DisruptionPolicy (its status)
    await publish(bus, *cluster(nodepool(node_hash="new")), node("n3", node_hash="old"), pod("p3", "n3"),
                  disruption_policy("default"))
    async with Running(bus, db, mode="shadow", recorder=recorder, annotator=annotator, policy_status=status) as svc:
        assert svc.store.shadow
        [approved] = await eventually("an approved shadow decision", lambda: svc.decisions("approved"))
        assert approved.shadow is True and approved.approved_at is not None
        assert approved.explanation["text"]
        [budget] = approved.explanation["budgets"]
        assert budget["nodePool"] == "default" and budget["reason"] == approved.reason and budget["allowed"] >= 1
        # validated as a real proposal: due at its approve_at, with its Proposed and Approved steps in the timeline
        found = await svc.store.get_decision(approved.id)
        assert found is not None and [e.type for e in found[1]][:2] == ["Proposed", "Approved"]
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("three more passes", lambda: svc.planner is not None and svc.planner.passes >= passes + 3)
        # its nodes are not proposed again (they count as being disrupted, as they would once ebb acts)
        names = [d.nodes[0]["name"] for d in await svc.decisions()]
        assert len(names) == len(set(names))
        await recorder.flush()
        # nothing left the store: no command, no step on the bus, no outbox row, no ledger row
        assert bus.records(TOPIC_DISRUPTION_COMMANDS) == [] and bus.records(TOPIC_DISRUPTION_EVENTS) == []
        assert await svc.store.outbox() == [] and await svc.store.ledger() == []
        # nothing written to the cluster, though every writer was handed over
        assert sink.bodies == [] and annotator.calls == [] and status.calls == []
        # a real store sees none of it: nothing due, nothing live, nothing approved for an executor
        real = DecisionStore.from_url(db, "unit")
        try:
            assert await real.due(NOW + timedelta(days=1)) == [] and await real.next_due() is None
            assert await real.live_nodes() == {} and await real.approved() == []
            listed = (await real.list_decisions(DecisionFilter(shadow=True))).items
            assert {d.id for d in listed} == {d.id for d in await svc.decisions()}
            assert (await real.list_decisions(DecisionFilter(shadow=False))).items == []
        finally:
            await real.close()


async def test_an_interruption_in_shadow_mode_is_a_shadow_decision_without_a_command(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster(nodepool(policy="WhenEmpty")))
    async with Running(bus, db, mode="shadow") as svc:
        assert svc.planner is not None
        planner = svc.planner
        await eventually("a pass", lambda: planner.passes >= 1)
        await bus.publish("ebb.interruptions", interruption("n2"))
        [decision] = await eventually("the interruption's decision",
                                      lambda: _of_method(svc.decisions("approved"), "interruption"))
        assert decision.shadow is True and decision.nodes[0]["name"] == "n2"
        assert bus.records(TOPIC_DISRUPTION_COMMANDS) == [] and await svc.store.outbox() == []


async def _of_method(decisions: Any, method: str) -> list[Any]:
    return [d for d in await decisions if d.method == method]


async def test_a_removal_by_karpenter_is_kept_with_ebbs_verdict_and_reported(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, mode="shadow") as svc:
        assert svc.planner is not None and svc.planner.shadow is not None
        watch = svc.planner.shadow
        [ebb] = await eventually("ebb's shadow approval of n1", lambda: svc.decisions("approved"))
        await eventually("n2's verdict", lambda: "n2" in watch.verdicts)
        # Karpenter disrupts n2 (which ebb leaves alone: its pod fits nowhere else): its taint, then the deletion
        tainted = node("n2", itype="t3.medium",
                       taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        await publish(bus, tainted)
        await asyncio.sleep(0.5)
        await bus.publish("ebb.cluster.objects", ClusterObject(kind="Node", namespace="", name="n2",
                                                               resource_version="2", object=None))
        await eventually("the removal kept", lambda: watch.removals >= 1)
        now = svc.clock()
        decided, [removal] = await svc.store.shadow_facts(NOW - timedelta(hours=1), now + timedelta(hours=1))
        assert removal.node == "n2" and removal.removed_by == "karpenter" and removal.nodepool == "default"
        # ebb's verdict is the one before Karpenter's taint: n2 is the cheapest type, no cheaper replacement
        assert (removal.verdict, removal.verdict_inner) == ("no-replacement", "no-cheaper-replacement")
        assert removal.verdict_at is not None and removal.verdict_at <= removal.removed_at
        assert [d.id for d in decided] == [ebb.id]
        report = await svc.store.shadow_report(NOW - timedelta(hours=1), now + timedelta(hours=1))
        [karpenter_only] = report.karpenter_only
        assert karpenter_only.removal.node == "n2" and karpenter_only.removal.category == "price"
        [ebb_only] = report.ebb_only
        assert ebb_only.decision.id == ebb.id and ebb_only.kept == ("n1",) and ebb_only.saved > 0
        assert report.both == () and report.counts.karpenter_removals == 1 and report.counts.approved == 1
        assert ebb_only.decision.state is State.APPROVED


async def test_shadow_mode_refuses_a_real_store(db: str) -> None:
    from ebb_consolidation_planner import app
    from ebb_consolidation_planner.settings import Settings

    store = DecisionStore.from_url(db, "unit")
    try:
        with pytest.raises(ValueError, match="shadow store"):
            await app.run(Settings(mode="shadow"), asyncio.Event(), bus=InMemoryBus(), store=store)
    finally:
        await store.close()


async def test_the_executor_in_shadow_mode_consumes_no_command(db: str) -> None:
    bus = InMemoryBus()
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, disruption_command())
    node_api = Recording()
    store = DecisionStore.from_url(db, "unit")
    stop, started = asyncio.Event(), asyncio.Event()
    try:
        task = asyncio.create_task(executor_app.run(
            ExecutorSettings(mode="shadow", cluster="unit"), stop, bus=bus, node_api=node_api,  # type: ignore[arg-type]
            store=store, started=started))
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.sleep(0.3)
        stop.set()
        assert await asyncio.wait_for(task, 5) is None
        assert node_api.calls == [] and bus.records(TOPIC_DISRUPTION_EVENTS) == []
        assert await store.outbox() == [] and await store.state(str(disruption_command().decision_id)) is None
    finally:
        await store.close()
