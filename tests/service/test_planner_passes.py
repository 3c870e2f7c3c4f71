"""One owner for "why not this node?": the leader planner publishes its pass on ebb.planner.passes and the
decisions-api answers from it, on the InMemoryBus and one SQLite store.

The case that made two owners disagree: a NodePool with a ``demandWindow`` whose peak (in the planner's demand
record, saved in the store by an earlier leader) needs the capacity of an empty node. The planner leaves the node
alone; a pass the API ran on its own snapshot (no demand record) would delete it. The API's explanation must be
the planner's: the same cause and sentence, the same findings, the pass's time."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx
from pydantic import SecretStr

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_PLANNER_PASSES, ClusterObject, Message, PlannerPass, from_kafka
from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.model import DemandSample
from ebb.core.plan import make_plan
from ebb_consolidation_planner import app as planner_app
from ebb_consolidation_planner.leadership import AlwaysLeader, Leadership, NeverLeader
from ebb_consolidation_planner.planner import Planner
from ebb_consolidation_planner.settings import Settings as PlannerSettings
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings as ApiSettings
from tests.kit.builders import NOW, catalog, node, nodepool, pod, snapshot, ts
from tests.kit.planner import kinds_synced

TOKEN = "passes-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: 3 cpu requested half an hour ago, inside the pool's 1h window: more than ``busy`` alone holds (2 cpu)
PEAK = DemandSample("default", NOW - timedelta(minutes=30), 3000, 0)


def cluster() -> list[dict[str, Any]]:
    """``idle`` (m5.large, 2 cpu) is empty; ``busy`` (m5.large) runs 1.5 cpu; NodePool default keeps an hour's peak."""
    return [catalog(), nodepool(disruption={"demandWindow": "1h"}), node("idle"), node("busy"),
            pod("web", "busy", cpu="1500m")]


async def eventually(what: str, probe: Callable[[], Awaitable[Any]], within: float = 10) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.02)


class Events:
    """The Kubernetes Events the planner writes (a fake API server's sink)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, namespace: str, body: dict[str, Any]) -> object:
        self.bodies.append(body)
        return body

    def messages(self, node_name: str) -> list[str]:
        return [b["message"] for b in self.bodies
                if b["involvedObject"]["kind"] == "Node" and b["involvedObject"]["name"] == node_name]


@asynccontextmanager
async def planner_running(bus: InMemoryBus, store: DecisionStore, recorder: EventRecorder | None = None,
                          now: datetime = NOW, leader: Leadership | None = None,
                          **settings: Any) -> AsyncIterator[Planner]:
    configured = PlannerSettings(**{"debounce_seconds": 0.0, "pass_interval_seconds": 0.3,
                                    "validation_delay_seconds": 30.0, "group": "passes-test",
                                    "cluster": store.cluster, "engine_options": "", **settings})
    stop, started = asyncio.Event(), asyncio.Event()
    ready: list[Planner] = []
    for message in kinds_synced():  # as the cluster-watcher says once it listed each kind
        await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
    task = asyncio.create_task(planner_app.run(configured, stop, bus=bus, store=store,
                                               leader=leader or AlwaysLeader(),
                                               clock=lambda: now, started=started, planner_ready=ready.append,
                                               recorder=recorder))
    try:
        await asyncio.wait_for(started.wait(), 5)
        yield ready[0]
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


@asynccontextmanager
async def api_running(bus: InMemoryBus, store: DecisionStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ApiSettings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=store.cluster,
                                 engine_options=""), store, bus=bus, clock=lambda: NOW)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def test_the_api_explains_a_node_as_the_leader_planner_decided_demand_window_included(
        store: DecisionStore) -> None:
    bus = InMemoryBus()
    for doc in cluster():
        meta = doc["metadata"]
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""),
                                                               name=meta["name"], resource_version="1", object=doc))
    await store.save_demand((PEAK,))  # an earlier leader's record: the new leader reads it back
    events = Events()
    recorder = EventRecorder(events, component="ebb-consolidation-planner", instance="test")
    async with planner_running(bus, store, recorder) as planner, api_running(bus, store) as client:
        async def explained() -> dict[str, Any] | None:
            response = await client.get("/v1/nodes/idle/explain", headers=AUTH)
            return response.json() if response.status_code == 200 else None

        answer = await eventually("the API's answer from the leader's pass", explained)
        await eventually("the planner's Kubernetes Event on idle",
                         lambda: _flushed(recorder, lambda: events.messages("idle")))
        held_findings = planner.findings.get("idle", [])

    # the planner's own verdict, computed again from what it planned on: the objects and its demand record
    with_record = replace(snapshot(*cluster()), demand=(PEAK,))
    options = EngineOptions()
    [planned] = [b for b in run_pass(options.view_of(with_record, NOW), options).blocked if b.node == "idle"]
    assert "demandWindow (1h)" in planned.reason

    assert answer["source"] == "planner-pass" and answer["now"] == ts(NOW) and answer["pass"]["at"] == ts(NOW)
    assert answer["disrupted"] is False and answer["state"] == "not-disrupted"
    assert answer["blocked"] == {"method": planned.method, "reason": planned.reason}
    assert answer["cause"] == str(planned.cause.kind)
    assert answer["summary"] == f"not disrupted now: {planned.reason}"
    # the Event the planner wrote on the node says the same sentence
    [event] = events.messages("idle")
    assert event == planned.reason[:1].upper() + planned.reason[1:]
    # the findings are the planner's held ones
    assert [(f["finding"], f["reason"]) for f in answer["findings"]] == [(f.kind, f.reason) for f in held_findings]
    assert [f["finding"] for f in answer["findings"]] == ["Empty", "Consolidatable"]

    # what a pass on the API's own snapshot, without the record, would have said instead: the disagreement the
    # topic removes
    assert any("idle" in c.nodes for c in make_plan(snapshot(*cluster()), NOW).first.commands)

    # the pass on the topic carries the record it planned with (the earlier peak and its own sample)
    records = sorted(bus.records(TOPIC_PLANNER_PASSES), key=lambda r: (r.partition, r.offset))
    latest = from_kafka(TOPIC_PLANNER_PASSES, records[-1].key, records[-1].value, records[-1].headers)
    assert isinstance(latest, PlannerPass) and latest.cluster == store.cluster and records[-1].key == b"unit"
    assert PEAK in latest.demand_record()


async def test_an_on_demand_explanation_takes_the_leaders_demand_record(store: DecisionStore) -> None:
    """``?now=`` asks the API for a pass of its own at that moment: with the leader's record it agrees with the
    planner; the live plan (POST /v1/plan, no body) does too."""
    bus = InMemoryBus()
    for doc in cluster():
        meta = doc["metadata"]
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""),
                                                               name=meta["name"], resource_version="1", object=doc))
    await store.save_demand((PEAK,))
    recorder = EventRecorder(Events(), component="ebb-consolidation-planner", instance="test")
    async with planner_running(bus, store, recorder), api_running(bus, store) as client:
        async def from_pass() -> dict[str, Any] | None:
            response = await client.get("/v1/nodes/idle/explain", headers=AUTH)
            return response.json() if response.status_code == 200 else None

        leader = await eventually("the leader's pass", from_pass)
        on_demand = (await client.get("/v1/nodes/idle/explain", params={"now": ts(NOW)}, headers=AUTH)).json()
        live_plan = (await client.post("/v1/plan", headers=AUTH)).json()
    assert on_demand["source"] == "on-demand" and on_demand["pass"] is None
    # at the pass's moment on the same objects, every field of the two answers but where they come from is the same
    same = {k: v for k, v in leader.items() if k not in ("source", "pass")}
    assert {k: v for k, v in on_demand.items() if k not in ("source", "pass")} == same
    assert [c for c in live_plan["commands"] if "idle" in c["nodes"]] == []
    assert [b["reason"] for b in live_plan["blocked"] if b["node"] == "idle"] == [leader["blocked"]["reason"]]


async def test_a_node_the_leaders_pass_does_not_name_is_not_found_with_the_pass_time(store: DecisionStore) -> None:
    bus = InMemoryBus()
    for doc in cluster():
        meta = doc["metadata"]
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""),
                                                               name=meta["name"], resource_version="1", object=doc))
    recorder = EventRecorder(Events(), component="ebb-consolidation-planner", instance="test")
    async with planner_running(bus, store, recorder), api_running(bus, store) as client:
        async def answered() -> httpx.Response | None:
            response = await client.get("/v1/nodes/nope/explain", headers=AUTH)
            return response if response.status_code != 503 else None

        missing = await eventually("the leader's pass", answered)
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"no node 'nope' in the leader planner's last pass (at {ts(NOW)}, 2 nodes)"


async def _flushed(recorder: EventRecorder, probe: Callable[[], Any]) -> Any:
    await recorder.flush()
    return probe()


async def published(bus: InMemoryBus, docs: list[dict[str, Any]]) -> InMemoryBus:
    for doc in docs:
        meta = doc["metadata"]
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""),
                                                               name=meta["name"], resource_version="1", object=doc))
    return bus


def passes_on(bus: InMemoryBus) -> list[PlannerPass]:
    records = sorted(bus.records(TOPIC_PLANNER_PASSES), key=lambda r: (r.partition, r.offset))
    return [m for m in (from_kafka(TOPIC_PLANNER_PASSES, r.key, r.value, r.headers) for r in records)
            if isinstance(m, PlannerPass)]


async def test_only_the_leader_publishes_and_only_when_told(store: DecisionStore) -> None:
    follower_bus = await published(InMemoryBus(), cluster())
    async with planner_running(follower_bus, store, leader=NeverLeader()):
        await asyncio.sleep(1.0)  # three pass intervals
    assert passes_on(follower_bus) == []
    quiet_bus = await published(InMemoryBus(), cluster())
    async with planner_running(quiet_bus, store, publish_passes=False) as planner:
        await eventually("two passes", lambda: _value(planner.passes >= 2))
    assert passes_on(quiet_bus) == []
    leader_bus = await published(InMemoryBus(), cluster())
    # every pass computed (none answered from the last one, which is not published again)
    async with planner_running(leader_bus, store, reuse_passes=False) as planner:
        await eventually("two passes", lambda: _value(planner.passes >= 2))
    # compacted: the topic keeps the latest pass of the cluster
    [latest] = passes_on(leader_bus)
    assert planner.pass_publisher is not None and planner.pass_publisher.published >= 2
    assert latest.at == planner.pass_publisher.last_at == NOW


class PassesRefused(InMemoryBus):
    """A bus that refuses every pass (a broker that rejects the record): everything else goes through."""

    async def publish(self, topic: str, message: Message) -> None:
        if topic == TOPIC_PLANNER_PASSES:
            raise RuntimeError("the broker refused the record")
        await super().publish(topic, message)


async def test_a_pass_that_cannot_be_published_never_stops_planning(store: DecisionStore) -> None:
    """``spare`` (another pool's empty node) is proposed although no pass reaches the topic."""
    bus = await published(PassesRefused(), [*cluster(), nodepool("other"), node("spare", pool="other")])
    async with planner_running(bus, store) as planner:
        await eventually("spare proposed", lambda: _value(planner.proposed >= 1))
        assert planner.pass_publisher is not None and planner.pass_publisher.published == 0
    assert passes_on(bus) == []


async def test_a_node_the_pass_disrupts_is_explained_with_its_command_and_live_decision(
        store: DecisionStore) -> None:
    bus = await published(InMemoryBus(), [*cluster(), nodepool("other"), node("spare", pool="other")])
    # one pass in the test's time: the pass after it leaves spare out (its decision is live), and an explanation read
    # after that pass would have no command to show
    async with planner_running(bus, store, pass_interval_seconds=600.0), api_running(bus, store) as client:
        async def being_disrupted() -> dict[str, Any] | None:
            response = await client.get("/v1/nodes/spare/explain", headers=AUTH)
            body = response.json() if response.status_code == 200 else None
            return body if body is not None and body["liveDecision"] is not None else None

        spare = await eventually("spare's explanation with its decision", being_disrupted)
    # the decision the pass's command became (the passes after it leave spare out: its decision is live)
    [decision] = [d for d in (await store.list_decisions()).items if "spare" in [n["name"] for n in d.nodes]]
    assert spare["source"] == "planner-pass" and spare["disrupted"] is True and spare["nodePool"] == "other"
    assert spare["command"]["method"] == decision.method == "emptiness"
    assert spare["command"]["nodes"] == [n["name"] for n in decision.nodes]
    assert spare["liveDecision"]["id"] == decision.id
    assert spare["state"] == "being-disrupted" and "spare" in [n["name"] for n in spare["liveDecision"]["nodes"]]
    assert spare["blocked"] is None and spare["policy"] == "NodePool other"
    assert [b["reason"] for b in spare["budgets"]] == ["Expired", "Drifted", "Empty", "Underutilized"]


async def _value(value: bool) -> bool:
    return value


async def test_the_service_freezes_its_heap_after_each_computed_pass_and_gives_it_back_when_it_stops(
        store: DecisionStore) -> None:
    """``FREEZE_HEAP`` (on by default): the passes answered from the last one settle nothing; a stopped planner
    leaves nothing frozen. Off, the collector is left alone."""
    bus = await published(InMemoryBus(), cluster())
    async with planner_running(bus, store) as planner:
        await eventually("a pass answered from the last one", lambda: _value(planner.passes_reused >= 1))
        assert planner.heap is not None
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    # each computed pass froze, none collected (that comes every 100th; a pass stopped between its count and its
    # settle is counted and not settled)
    computed = planner.passes - planner.passes_reused
    assert planner.heap.full_collections == 0
    assert computed - 1 <= planner.heap.since_full <= computed
    async with planner_running(await published(InMemoryBus(), cluster()), store, freeze_heap=False) as planner:
        await eventually("two passes", lambda: _value(planner.passes >= 2))
        assert planner.heap is None
        assert gc.get_freeze_count() == 0
