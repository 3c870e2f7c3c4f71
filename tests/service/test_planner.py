"""The consolidation-planner service on the InMemoryBus and a migrated SQLite store, always (or never) the
leader: an empty node is proposed, validated after the delay and approved (decision row, ledger row,
command on ebb.disruption.commands keyed by NodePool, Proposed/Approved events); a do-not-disrupt pod that
arrives during the delay rejects it with the reason, and so does a replace whose pods left meanwhile (the empty node
is deleted instead); the budget ledger keeps two planners within a budget;
holds from the store pause planning; a replica without the leadership plans nothing; the findings of each
pass go into its decisions' explanations and the leader keeps the ebb.sh/drifted annotation in line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import ManualClock
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_INTERRUPTIONS,
    ClusterObject,
    DisruptionCommand,
    DisruptionEvent,
    KindSynced,
    Message,
    from_kafka,
)
from ebb.core.model import Snapshot
from ebb_consolidation_planner.leadership import NeverLeader
from ebb_consolidation_planner.pass_inputs import PassInputs
from ebb_consolidation_planner.planner import Planner, command_id
from tests.kit.balanced_clusters import marginal_cluster
from tests.kit.builders import NOW, OLD, catalog, node, nodeclaim, nodepool, pod, proposed
from tests.kit.planner import DELAY, FakeAnnotator, Running, cluster, interruption, kinds_synced, publish
from tests.kit.waiting import eventually


def messages(bus: InMemoryBus, topic: str) -> list[Message]:
    records = sorted(bus.records(topic), key=lambda r: (r.partition, r.offset))
    return [from_kafka(topic, r.key, r.value, r.headers) for r in records]


def commands(bus: InMemoryBus) -> list[DisruptionCommand]:
    return [m for m in messages(bus, TOPIC_DISRUPTION_COMMANDS) if isinstance(m, DisruptionCommand)]


def events(bus: InMemoryBus) -> list[tuple[str, str, str]]:
    return [(m.phase, m.node, m.decision_id) for m in messages(bus, TOPIC_DISRUPTION_EVENTS)
            if isinstance(m, DisruptionEvent)]


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


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
        # approved when due: validation_delay after the proposal, by the row's approve_at
        assert proposed.approve_at == proposed.created_at + timedelta(seconds=DELAY)
        assert command.method == "emptiness" and command.approved_at >= proposed.approve_at
        assert [r.key for r in bus.records(TOPIC_DISRUPTION_COMMANDS)] == [b"default"]
        [approved] = await svc.decisions("approved")
        assert approved.id == proposed.id and approved.approved_at == command.approved_at
        await eventually("the Approved event", lambda: len(events(bus)) == 2)
        assert events(bus) == [("Proposed", "n1", proposed.id), ("Approved", "n1", proposed.id)]
        found = await svc.store.get_decision(proposed.id)
        assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved"]
        # one id per step: the timeline entry's is the published event's
        published = [str(m.id) for m in messages(bus, TOPIC_DISRUPTION_EVENTS)]
        assert [(e.event_id, e.node) for e in found[1]] == [(published[0], "n1"), (published[1], "n1")]
        [entry] = await svc.store.ledger()
        assert (entry.nodepool, entry.node, entry.decision_id, entry.reason) == ("default", "n1", proposed.id, "Empty")
        # later passes do not propose the node again: it has a live decision
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("two more passes", lambda: svc.planner is not None and svc.planner.passes >= passes + 2)
        assert len(await svc.decisions()) == 1 and len(commands(bus)) == 1
        # Karpenter's names, labels and label values (lowercase reasons), ebb_ for karpenter_
        assert svc.metric("ebb_voluntary_disruption_decisions_total", decision="delete", reason="empty",
                          consolidation_type="empty") == 1
        assert svc.metric("ebb_voluntary_disruption_decisions_by_nodepool_total", nodepool="default",
                          decision="delete", reason="empty", consolidation_type="empty") == 1
        assert svc.metric("ebb_voluntary_disruption_failed_validations_total", consolidation_type="empty") == 0
        # n1 is being disrupted now: it counts against the budget and is no candidate any more
        # Karpenter's gauges: the budget's nodes, and n1 consuming one of them
        assert svc.metric("ebb_nodepools_allowed_disruptions", nodepool="default", reason="Empty") == 2
        assert svc.metric("ebb_nodepools_nodes_consuming_budgets", nodepool="default", reason="Empty") == 1
        assert svc.metric("ebb_voluntary_disruption_eligible_nodes", reason="empty") == 1
        assert svc.metric("ebb_voluntary_disruption_decision_evaluation_duration_seconds_count", reason="",
                          consolidation_type="") >= 2


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
        # the pass after the rejection may propose another node's decision: the rejected one's events come first
        await eventually("the Rejected event", lambda: len(events(bus)) >= 2)
        assert events(bus)[:2] == [("Proposed", "n1", proposed.id), ("Rejected", "n1", proposed.id)]
        [event] = [m for m in messages(bus, TOPIC_DISRUPTION_EVENTS)
                   if isinstance(m, DisruptionEvent) and m.phase == "Rejected"]
        assert "do-not-disrupt" in event.message
        assert await svc.store.ledger() == []
        # a rejection is Karpenter's failed validation (one per candidate), not a decision performed
        assert svc.metric("ebb_voluntary_disruption_failed_validations_total", consolidation_type="empty") == 1
        assert svc.metric("ebb_voluntary_disruption_decisions_total", decision="delete", reason="empty",
                          consolidation_type="empty") == 0


async def test_a_replace_whose_pods_left_during_the_delay_is_rejected_and_the_node_deleted(db: str) -> None:
    """A pass that catches a scale-down half done proposes to replace a node that still has pods; when they are gone
    by the validation, the replacement would launch for nothing: the command is rejected (Karpenter's "scheduling
    simulation produced new results") and the next pass deletes the empty node instead."""
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m"))
    async with Running(bus, db, delay=0.5) as svc:
        [replace_] = await eventually("a proposed replace", svc.decisions)
        assert (replace_.method, replace_.action) == ("single-node-consolidation", "replace")
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind="Pod", namespace="default", name="web",
                                                               resource_version="2", object=None))
        [rejected] = await eventually("the rejection", lambda: svc.decisions("rejected"))
        assert rejected.id == replace_.id
        assert rejected.explanation["rejected"] == (
            "its pods now need no new node, fewer than the 1 new node the command would launch: a cheaper command "
            "is likely now")
        [command] = await eventually("the command that deletes the node", lambda: commands(bus))
        assert (command.method, command.action, command.nodes) == ("emptiness", "delete", ("big",))
        assert command.decision_id != replace_.id


class ApiserverPods:
    """The pods the apiserver lists per node (``LivePods``); records the nodes it was asked about. ``failing``
    makes it raise, as an apiserver that is away."""

    def __init__(self, pods: dict[str, set[str]] | None = None, *, failing: bool = False) -> None:
        self.pods = pods or {}
        self.failing = failing
        self.asked: list[str] = []

    async def __call__(self, node: str) -> frozenset[str]:
        self.asked.append(node)
        if self.failing:
            raise ConnectionRefusedError("the apiserver is away")
        return frozenset(self.pods.get(node, ()))


async def test_a_command_is_approved_when_the_apiserver_agrees_with_the_view(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    apiserver = ApiserverPods({"n1": set(), "n2": {"default/p2"}})
    async with Running(bus, db, live_pods=apiserver) as svc:
        [approved] = await eventually("the approval", lambda: svc.decisions("approved"))
        assert approved.nodes[0]["name"] == "n1" and apiserver.asked == ["n1"]
        await eventually("the command", lambda: len(commands(bus)) == 1)


async def test_a_view_behind_the_apiserver_rejects_the_command(db: str) -> None:
    """The view says n1 is empty; the apiserver lists a pod bound to it that the watcher has not published yet
    (its watch in backoff after an apiserver restart, seen in the chaos run): the emptiness command is rejected
    and n1 is not touched, and it is proposed again once the view has caught up and the pod is gone."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    apiserver = ApiserverPods({"n1": {"default/unseen"}})
    async with Running(bus, db, live_pods=apiserver) as svc:
        [rejected] = await eventually("the rejection", lambda: svc.decisions("rejected"))
        assert rejected.nodes[0]["name"] == "n1"
        assert rejected.explanation["rejected"] == ("the planner's view is behind the apiserver: 1 pods run on node n1 "
                                                    "that it has not seen there yet (default/unseen)")
        assert commands(bus) == []
        assert svc.metric("ebb_voluntary_disruption_failed_validations_total", consolidation_type="empty") == 1
        apiserver.pods = {}
        await eventually("a later approval", lambda: svc.decisions("approved"))
        await eventually("the command", lambda: len(commands(bus)) == 1)


async def test_an_approval_is_followed_by_a_pass_not_by_the_next_interval(db: str) -> None:
    """An approved decision changes what a pass reads (its nodes' decision is approved now): the planner passes again
    at once, as after a change of the objects, not at its next interval (an hour here)."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    # the passes are counted while the decision waits out its validation delay (counted once approved, the pass after
    # the approval may have run already, under load)
    async with Running(bus, db, delay=2.0, pass_interval_seconds=3600.0) as svc:
        await eventually("the proposal", lambda: svc.decisions("proposed"))
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("the approval", lambda: svc.decisions("approved"))
        await eventually("a pass after the approval", lambda: svc.planner is not None and svc.planner.passes > passes)


async def test_a_rejection_is_planned_again_at_once_not_at_the_next_interval(db: str) -> None:
    """A rejected decision frees its nodes (and the room the passes kept for its pods): the planner passes again as
    after a change of the objects, not at its next interval (an hour here), though no object changed. Here the view
    is behind the apiserver, so the same command is proposed again, and rejected again."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    apiserver = ApiserverPods({"n1": {"default/unseen"}})
    async with Running(bus, db, live_pods=apiserver, pass_interval_seconds=3600.0) as svc:
        await eventually("a second rejection", lambda: _at_least(svc.decisions("rejected"), 2))
        assert {d.nodes[0]["name"] for d in await svc.decisions("rejected")} == {"n1"}


async def test_an_apiserver_that_does_not_answer_rejects_the_command(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, live_pods=ApiserverPods(failing=True)) as svc:
        [rejected, *_] = await eventually("a rejection", lambda: svc.decisions("rejected"))
        assert rejected.explanation["rejected"].startswith(
            "the apiserver could not be asked for the pods on the command's nodes: ConnectionRefusedError(")
        assert commands(bus) == []


async def test_budget_ledger_keeps_two_planners_within_the_budget(db: str) -> None:
    """Two planners that both believe they lead, each seeing a different node empty, with a budget of one
    disruption: each proposes its node, and both validate every proposal due (its state is its row's). At most one
    is approved, by the ledger's budget or because the other planner's view finds the node no longer empty; every
    rejection says which, and only an approval is commanded and takes the ledger."""
    pool = nodepool(budgets=[{"nodes": "1"}])
    bus_a, bus_b = InMemoryBus(), InMemoryBus()
    await publish(bus_a, catalog(), pool, node("n1"), node("n2"), pod("p2", "n2"))
    await publish(bus_b, catalog(), pool, node("n1"), node("n2"), pod("p1", "n1"))
    async with Running(bus_a, db) as a, Running(bus_b, db) as b:
        await eventually("both decisions decided",
                         lambda: _count(a.decisions("approved"), a.decisions("rejected"), want=2))
        approved = await a.decisions("approved")
        rejected = await a.decisions("rejected")
        assert len(approved) <= 1
        assert sorted(d.nodes[0]["name"] for d in approved + rejected) == ["n1", "n2"]
        for decision in rejected:
            why = decision.explanation["rejected"]
            assert "budget" in why or "no longer empty" in why, why
        await eventually("the commands", lambda: len(commands(bus_a)) + len(commands(bus_b)) == len(approved))
        assert [e.node for e in await a.store.ledger()] == [d.nodes[0]["name"] for d in approved]
        assert b.planner is not None
        # a rejection is a failed validation of the planner that made it, an approval a decision performed
        failed = "ebb_voluntary_disruption_failed_validations_total"
        performed = "ebb_voluntary_disruption_decisions_total"
        assert a.metric(failed, consolidation_type="empty") + b.metric(failed, consolidation_type="empty") == len(
            rejected)
        assert sum(svc.metric(performed, decision="delete", reason="empty", consolidation_type="empty")
                   for svc in (a, b)) == len(approved)


async def _count(*queries: Awaitable[list[Any]], want: int) -> bool:
    return sum([len(await q) for q in queries]) == want


async def _at_least(query: Awaitable[list[Any]], want: int) -> bool:
    return len(await query) >= want


async def test_a_hold_in_the_store_pauses_planning(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    store = DecisionStore.from_url(db, "unit")
    await store.create_hold(scope_kind="nodepool", scope="default", reason="freeze", expires_at=None, now=NOW)
    await store.close()
    async with Running(bus, db) as svc:
        assert svc.planner is not None
        await eventually("two passes", lambda: svc.planner is not None and svc.planner.passes >= 2)
        assert await svc.decisions() == []
        assert svc.metric("ebb_voluntary_disruption_eligible_nodes", reason="empty") == 2


async def test_a_planner_without_the_leadership_does_nothing(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, leader=NeverLeader()) as svc:
        await asyncio.sleep(1.0)
        assert svc.planner is not None and svc.planner.passes == 0
        assert await svc.decisions() == []
        assert commands(bus) == [] and events(bus) == []


async def test_a_new_leader_resumes_the_proposals_it_finds(db: str) -> None:
    """A proposal's state is its row: the proposals a planner that stopped left behind are validated by the next
    leader when they are due, as its own would be (n1 is empty: approved and commanded; n9 is gone: rejected),
    and nothing is proposed again for a node that has one."""
    store = DecisionStore.from_url(db, "unit")
    await store.propose(replace(proposed("d-left", "n1", now=NOW, text="x"), approve_at=NOW + timedelta(seconds=0.5)))
    await store.propose(replace(proposed("d-gone", "n9", now=NOW, text="y"), approve_at=NOW))
    await store.close()
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db) as svc:
        [rejected] = await eventually("the proposal for a node that is gone rejected",
                                      lambda: svc.decisions("rejected"))
        assert rejected.id == "d-gone" and "n9" in rejected.explanation["rejected"]
        [approved] = await eventually("the proposal left behind approved", lambda: svc.decisions("approved"))
        assert approved.id == "d-left" and approved.approved_at >= NOW + timedelta(seconds=0.5)
        [command] = await eventually("its command", lambda: commands(bus))
        assert command.id == command_id("d-left") and command.nodes == ("n1",)
        assert [d.id for d in await svc.decisions()] == ["d-left", "d-gone"]  # nothing new for n1
        # the Proposed events the last planner wrote go out first, then the new leader's steps, in order per node
        await eventually("the events", lambda: len(events(bus)) == 4)
        assert [e for e in events(bus) if e[1] == "n1"] == [("Proposed", "n1", "d-left"), ("Approved", "n1", "d-left")]
        assert [e for e in events(bus) if e[1] == "n9"] == [("Proposed", "n9", "d-gone"), ("Rejected", "n9", "d-gone")]


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
        assert ('ebb_voluntary_disruption_decisions_total{consolidation_type="empty",decision="delete",'
                'reason="empty"} 1.0') in body
        assert 'ebb_nodepools_allowed_disruptions{nodepool="default",reason="Underutilized"}' in body
        assert ('ebb_voluntary_disruption_decision_evaluation_duration_seconds_bucket{consolidation_type="",'
                'le="0.005",reason=""}') in body
        assert 'ebb_voluntary_disruption_eligible_nodes{reason="drifted"}' in body
        assert "ebb_decisions_total" not in body and "ebb_eligible_nodes" not in body  # no old names kept
        # scraped from the health server's thread: the process's build, the synced and leader gauges, the lag of its
        # consumer groups and Karpenter's node gauges of the last pass
        assert 'ebb_build_info{implementation="' in body and "ebb_cluster_state_synced 1.0" in body
        assert "ebb_planner_leader 1.0" in body and 'ebb_consumer_lag{group="' in body
        assert 'ebb_nodes_allocatable{arch="amd64"' in body
        assert "# TYPE ebb_pods_startup_duration_seconds summary" in body
    with pytest.raises(httpx.HTTPError):
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/metrics", timeout=1)


# -- Kubernetes events ----------------------------------------------------------------------------------------


class Sink:
    """A fake API server for the EventRecorder: keeps the Event bodies, or fails while ``failing``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.failing = False
        self.calls = 0

    async def __call__(self, namespace: str, body: dict[str, Any]) -> object:
        self.calls += 1
        if self.failing:
            raise RuntimeError("the API server is away")
        assert namespace == body["metadata"]["namespace"]
        self.bodies.append(body)
        return body

    def reasons(self, name: str, kind: str = "Node") -> list[str]:
        return [b["reason"] for b in self.bodies
                if b["involvedObject"]["name"] == name and b["involvedObject"]["kind"] == kind]


async def test_kube_events_name_why_nodes_are_not_removed_and_what_was_decided(db: str) -> None:
    sink = Sink()
    recorder = EventRecorder(sink, component="ebb-consolidation-planner", instance="test")
    bus = InMemoryBus()
    await publish(bus, *cluster(), nodeclaim("claim-n2", "n2"))
    # the NodeClaim is here for the Events it gets; with the provider none it would be a conflict that refuses the
    # NodePool (test_planner_conflicts.py)
    async with Running(bus, db, recorder=recorder, check_conflicts=False) as svc:
        [decision] = await eventually("the approval", lambda: svc.decisions("approved"))
        await eventually("the approval's event", lambda: "ConsolidationApproved" in sink.reasons("n1"))
        assert sink.reasons("n1") == ["ConsolidationCandidate", "ConsolidationApproved"]
        [candidate, approved] = [b for b in sink.bodies if b["involvedObject"]["name"] == "n1"]
        assert candidate["message"].startswith("Consolidation candidate: emptiness delete of n1 (Empty)")
        assert approved["type"] == "Normal" and approved["source"] == {"component": "ebb-consolidation-planner"}
        assert approved["reportingComponent"] == "ebb-consolidation-planner"
        assert approved["reportingInstance"] == "test" and approved["metadata"]["namespace"] == "default"
        # n2 runs a pod that fits nowhere else: Unconsolidatable on the node and its NodeClaim, with the reason
        assert sink.reasons("n2") == ["Unconsolidatable"]
        assert sink.reasons("claim-n2", "NodeClaim") == ["Unconsolidatable"]
        [why] = [b["message"] for b in sink.bodies if b["involvedObject"]["name"] == "n2"]
        assert "do not fit on the other nodes" in why
        # many passes later, still written once: de-duplicated for 15 minutes
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("three more passes", lambda: svc.planner is not None and svc.planner.passes >= passes + 3)
        await recorder.flush()
        assert sink.reasons("n2") == ["Unconsolidatable"] and recorder.deduplicated >= 3
        assert decision.nodes[0]["name"] == "n1"


async def test_the_recorder_deduplicates_bounds_its_work_and_survives_failures() -> None:
    from ebb.core import events as ev

    ticks, sink = ManualClock(monotonic=1000.0), Sink()
    recorder = EventRecorder(sink, component="c", qps=5, max_queue=50, clock=ticks,
                             uid_of=lambda ref: f"uid-{ref.name}")
    many = [e for i in range(2000) for e in ev.unconsolidatable(f"node-{i}", None, "no cheaper node")]
    assert recorder.record(many) == 50 and recorder.dropped == 1950  # the queue is bounded
    assert await recorder.flush(limit=5) == 5 and sink.calls == 5  # one tick's worth of API calls
    assert sink.bodies[0]["involvedObject"] == {"kind": "Node", "name": "node-0", "apiVersion": "v1",
                                                "uid": "uid-node-0"}
    # the next pass offers the same events: the queued and written ones are not queued again
    assert recorder.record(many) == 5 and len(recorder) == 50
    await recorder.flush()
    assert sink.calls == 55
    # a failing API server: logged, counted, not raised, and the event is offered again by a later pass
    sink.failing = True
    [event] = ev.blocked("n-x", None, "a PDB prevents pod evictions")
    assert recorder.record([event]) == 1
    assert await recorder.flush() == 0 and recorder.failed == 1
    sink.failing = False
    assert recorder.record([event]) == 1 and await recorder.flush() == 1
    assert recorder.record([event]) == 0  # written: within its 2-minute window now
    ticks.advance(ev.DEFAULT_DEDUPE_SECONDS + 1)
    assert recorder.record([event]) == 1  # the window is over


# -- findings ---------------------------------------------------------------------------------------------------


async def test_the_pass_findings_go_into_the_explanation_of_its_decisions(db: str) -> None:
    bus = InMemoryBus()
    # n1 is busy: no decision; a long interval so only a change wakes the pass
    await publish(bus, catalog(), nodepool(), node("n1", itype="t3.medium"), pod("p1", "n1", cpu="1500m"))
    async with Running(bus, db, pass_interval_seconds=3600, debounce_seconds=0.05) as svc:
        assert svc.planner is not None
        await eventually("the first pass", lambda: svc.planner is not None and svc.planner.passes >= 1)
        assert [f.kind for f in svc.planner.findings["n1"]] == ["Consolidatable"]
        assert await svc.decisions() == []
        # the pod leaves: n1 is empty, and its decision carries the finding of the pass that proposed it
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind="Pod", namespace="default", name="p1",
                                                               resource_version="2", object=None))
        [decision] = await eventually("a decision", svc.decisions)
        empty, consolidatable = decision.explanation["findings"]
        assert empty == {"node": "n1", "finding": "Empty", "reason": empty["reason"], "since": empty["since"]}
        # empty since the pod left (the node has no NodeClaim: the planner saw it go), not since the node came
        assert datetime.fromisoformat(empty["since"]) > datetime.fromisoformat(OLD.replace("Z", "+00:00"))
        assert "no pods need rescheduling" in empty["reason"]
        assert (consolidatable["node"], consolidatable["finding"]) == ("n1", "Consolidatable")
        assert "consolidateAfter (0s) has passed" in consolidatable["reason"]


async def test_the_leader_keeps_the_drifted_annotation_in_line_with_the_drift(db: str) -> None:
    bus = InMemoryBus()
    annotator = FakeAnnotator()
    stale = {"ebb.sh/drifted": "drifted: a reason from before"}
    await publish(bus, catalog(), nodepool(node_hash="new", consolidate_after="Never"),
                  node("n1", node_hash="old"), pod("p1", "n1"),
                  node("n2", node_hash="new", annotations=stale), pod("p2", "n2"),
                  node("n3", node_hash="new"), pod("p3", "n3"))
    async with Running(bus, db, annotator=annotator) as svc:
        assert svc.planner is not None
        planner = svc.planner
        reason = await eventually("n1 annotated", lambda: annotator.values.get("n1"))
        assert "nodepool-hash old differs from NodePool default's new" in reason
        # a stale annotation on a node that has not drifted (any more) is removed; n3 is left alone
        await eventually("n2's stale annotation removed", lambda: "n2" in annotator.values)
        assert annotator.values == {"n1": reason, "n2": None}
        [drifted] = [f for f in planner.findings["n1"] if f.kind == "Drifted"]
        # a hash drift has no time of its own: first seen at the first pass
        assert drifted.reason == reason and drifted.since is not None
        assert NOW <= drifted.since < NOW + timedelta(seconds=5)
        # later passes: nothing written again, and the first-seen time is kept
        calls = len(annotator.calls)
        svc.clock.now = NOW + timedelta(minutes=5)
        passes = planner.passes
        await eventually("two more passes", lambda: planner.passes >= passes + 2)
        assert len(annotator.calls) == calls
        assert [f.since for f in planner.findings["n1"] if f.kind == "Drifted"] == [drifted.since]
        # fix it: the node now carries the pool's hash
        await publish(bus, node("n1", node_hash="new"))
        await eventually("n1's annotation removed", lambda: annotator.values["n1"] is None)
        assert "n1" not in planner.findings
        assert annotator.calls[-1] == ("n1", None)


async def test_a_failed_annotation_is_retried_and_a_follower_annotates_nothing(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(node_hash="new", consolidate_after="Never"),
                  node("n1", node_hash="old"), pod("p1", "n1"))
    follower = FakeAnnotator()
    async with Running(bus, db, leader=NeverLeader(), annotator=follower):
        await asyncio.sleep(0.5)
    assert follower.calls == []
    failing = FakeAnnotator(failing=True)
    async with Running(bus, db, annotator=failing) as svc:
        assert svc.planner is not None and svc.planner.annotations is not None
        annotations = svc.planner.annotations
        await eventually("two failed attempts", lambda: annotations.failed >= 2)
        assert failing.calls == [] and annotations.patched == 0
        failing.failing = False
        await eventually("annotated on a later pass", lambda: failing.values.get("n1"))
        assert annotations.patched == 1


# -- interruptions ----------------------------------------------------------------------------------------------


class Switch:
    """A leadership the test turns on and off."""

    fixed = False

    def __init__(self, leading: bool) -> None:
        self.is_leader = leading

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


async def processed(db: str, consumer: str) -> list[str]:
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import create_async_engine

    from ebb.adapters.store.migrate import async_url
    from ebb.adapters.store.models import ProcessedMessage

    engine = create_async_engine(async_url(db))
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(select(ProcessedMessage.message_id).where(ProcessedMessage.consumer == consumer))
            return [r[0] for r in rows]
    finally:
        await engine.dispose()


async def test_an_interruption_is_approved_at_once_and_applied_once(db: str) -> None:
    sink = Sink()
    bus = InMemoryBus()
    # a budget of 0 and a hold: interruption ignores both; n2 is busy (not consolidatable either)
    await publish(bus, catalog(), nodepool(budgets=[{"nodes": "0"}]), node("n2", itype="t3.medium"),
                  pod("p2", "n2", cpu="1500m"), nodeclaim("claim-n2", "n2"))
    store = DecisionStore.from_url(db, "unit")
    await store.create_hold(scope_kind="cluster", scope="", reason="freeze", expires_at=None, now=NOW)
    await store.close()
    message = interruption("n2")
    recorder = EventRecorder(sink, component="ebb-consolidation-planner")
    async with Running(bus, db, delay=3600, recorder=recorder) as svc:
        await bus.publish(TOPIC_INTERRUPTIONS, message)
        [decision] = await eventually("the interruption's decision", lambda: svc.decisions("approved"))
        assert (decision.method, decision.reason, decision.action) == ("interruption", "Interrupted", "delete")
        assert decision.nodes == [{"name": "n2", "nodePool": "default", "instanceType": "t3.medium"}]
        assert decision.explanation["interruption"]["kind"] == "spot-interruption"
        assert decision.approved_at == NOW
        [command] = await eventually("its command", lambda: commands(bus))
        assert command.id == command_id(decision.id) and command.method == "interruption"
        assert command.nodes == ("n2",) and command.replacements == () and command.reason == "Interrupted"
        # the executor counts the node under Karpenter's kind of the message (ebb_nodeclaims_disrupted_total)
        assert command.message_kind == "spot_interrupted"
        assert events(bus) == [("Proposed", "n2", decision.id), ("Approved", "n2", decision.id)]
        assert await processed(db, "planner-test-interruptions") == [str(message.id)]
        found = await svc.store.get_decision(decision.id)
        assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved"]
        assert await svc.store.ledger() == []  # no budget taken
        # the same message delivered again (the ingester's redelivery): nothing new
        await bus.publish(TOPIC_INTERRUPTIONS, message)
        await eventually("the redelivery consumed", lambda: bus.lag("planner-test-interruptions",
                                                                     TOPIC_INTERRUPTIONS) == 0)
        # another message about the same node: the node already has a live decision
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n2", "state-change", "state=shutting-down",
                                                            instance_state="shutting-down"))
        await eventually("the second message consumed", lambda: bus.lag("planner-test-interruptions",
                                                                          TOPIC_INTERRUPTIONS) == 0)
        assert len(await svc.decisions()) == 1 and len(commands(bus)) == 1
        await recorder.flush()
        # a pass may also have said the node is blocked (the hold, the budget): only the interruption's order counts
        wanted = ("SpotInterrupted", "TerminatingOnInterruption")
        assert [r for r in sink.reasons("n2") if r in wanted][:2] == list(wanted)
        assert [r for r in sink.reasons("claim-n2", "NodeClaim") if r in wanted][:2] == list(wanted)
        # an interruption is no voluntary disruption (Karpenter's interruption controller counts none there)
        assert svc.metric("ebb_voluntary_disruption_decisions_total", decision="delete", reason="interrupted",
                          consolidation_type="") == 0


async def test_an_interruptions_events_go_to_the_nodeclaim_of_the_nodes_instance(db: str) -> None:
    """A NodeClaim left by an instance that had the node's name before is not the node's: the interruption's events
    go to the one with the node's provider id, as Karpenter pairs them."""
    sink = Sink()
    bus = InMemoryBus()
    before = nodeclaim("before-n2", "n2")
    before["status"]["providerID"] = "aws:///us-east-1a/i-n2-before"
    await publish(bus, catalog(), nodepool(), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"),
                  before, nodeclaim("claim-n2", "n2"))
    recorder = EventRecorder(sink, component="ebb-consolidation-planner")
    async with Running(bus, db, delay=3600, recorder=recorder) as svc:
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n2"))
        await eventually("the interruption's decision", lambda: svc.decisions("approved"))
        await recorder.flush()
        assert "SpotInterrupted" in sink.reasons("claim-n2", "NodeClaim")
        assert "SpotInterrupted" not in sink.reasons("before-n2", "NodeClaim")


async def test_a_spot_interruption_takes_its_offering_out_of_the_planners_snapshots_for_three_minutes(
        db: str) -> None:
    """Karpenter's AWS provider marks the interrupted node's spot offering unavailable for three minutes: the passes
    and validations of that time launch no replacement in the pool being reclaimed."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, delay=3600) as svc:
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n2"))
        await eventually("the interruption's decision", lambda: svc.decisions("approved"))

        def spot(snap: Snapshot) -> bool:
            [t3] = [it for it in snap.instance_types if it.name == "t3.medium"]
            return [o.available for o in t3.offerings if o.zone == "us-east-1a" and o.capacity_type == "spot"] == [True]

        planner = svc.planner
        assert planner is not None
        assert not spot(await planner.current_snapshot(NOW))
        assert not spot(await planner.current_snapshot(NOW, validating="other"))
        assert spot(await planner.current_snapshot(NOW + timedelta(minutes=3)))
        # another kind takes nothing back
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n1", "scheduled-change", "AWS_EC2_MAINTENANCE"))
        await eventually("consumed", lambda: bus.lag("planner-test-interruptions", TOPIC_INTERRUPTIONS) == 0)
        snap = await planner.current_snapshot(NOW)
        [m5] = [it for it in snap.instance_types if it.name == "m5.large"]
        assert all(o.available for o in m5.offerings)


async def test_an_interruption_takes_over_a_proposed_decision(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, delay=3600) as svc:
        [proposed] = await eventually("n1 proposed", lambda: svc.decisions("proposed"))
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n1", "scheduled-change", "AWS_EC2_MAINTENANCE"))
        [taken] = await eventually("the interruption's decision", lambda: svc.decisions("approved"))
        assert taken.method == "interruption" and taken.nodes[0]["name"] == "n1"
        [rejected] = await svc.decisions("rejected")
        assert rejected.id == proposed.id and "being interrupted" in rejected.explanation["rejected"]
        assert ("Rejected", "n1", proposed.id) in events(bus)
        assert [c.decision_id for c in commands(bus)] == [taken.id]
        assert [c.message_kind for c in commands(bus)] == ["scheduled_change"]


async def test_rebalance_and_unknown_nodes_change_nothing(db: str) -> None:
    sink = Sink()
    bus = InMemoryBus()
    # the foreign node (no NodePool) is too small for p2: a pass has nothing to do either
    await publish(bus, catalog(), nodepool(), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"),
                  node("foreign", pool=None, cpu="1"))
    recorder = EventRecorder(sink, component="ebb-consolidation-planner")
    async with Running(bus, db, recorder=recorder) as svc:
        for message in (interruption("n2", "rebalance", ""), interruption("ghost"), interruption("foreign"),
                        interruption("n2", "state-change", "state=running", instance_state="running")):
            await bus.publish(TOPIC_INTERRUPTIONS, message)
        await eventually("all consumed", lambda: bus.lag("planner-test-interruptions", TOPIC_INTERRUPTIONS) == 0)
        got = await svc.decisions()
        assert got == [] and commands(bus) == [], [(d.method, d.reason, d.nodes, d.explanation) for d in got]
        await recorder.flush()
        assert "SpotRebalanceRecommendation" in sink.reasons("n2")


async def test_only_the_leader_consumes_interruptions_and_none_is_lost(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"))
    leader = Switch(False)
    async with Running(bus, db, leader=leader) as svc:
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n2"))
        await asyncio.sleep(0.5)  # a follower leaves it alone
        assert await svc.decisions() == []
        assert bus.lag("planner-test-interruptions", TOPIC_INTERRUPTIONS) == 1
        leader.is_leader = True
        [decision] = await eventually("the decision once leading", lambda: svc.decisions("approved"))
        assert decision.method == "interruption"
        await eventually("committed", lambda: bus.lag("planner-test-interruptions", TOPIC_INTERRUPTIONS) == 0)


# -- the outbox ------------------------------------------------------------------------------------------------


class FlakyBus(InMemoryBus):
    """An InMemoryBus whose publishes of commands fail while ``failing``."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.failures = 0

    async def publish(self, topic: str, message: Message) -> None:
        if self.failing and topic == TOPIC_DISRUPTION_COMMANDS:
            self.failures += 1
            raise ConnectionError("Kafka is away")
        await super().publish(topic, message)


async def test_a_command_whose_publish_failed_stays_in_the_outbox_until_the_bus_takes_it(db: str) -> None:
    """The approval commits the command in the outbox; while Kafka refuses it the relay retries, and nothing
    written after it (the Approved event) goes out before it; once Kafka is back it goes out once, under the
    command id of its decision, and is marked sent: not published again."""
    bus = FlakyBus()
    bus.failing = True
    await publish(bus, *cluster())
    async with Running(bus, db) as svc:
        [decision] = await eventually("the approval", lambda: svc.decisions("approved"))
        await eventually("failed publishes", lambda: bus.failures >= 2)
        assert commands(bus) == []
        assert events(bus) == [("Proposed", "n1", decision.id)]  # in order: the Approved event waits
        unsent = await svc.store.outbox(unsent=True)
        assert [(m.topic, m.decision_id) for m in unsent] == [(TOPIC_DISRUPTION_COMMANDS, decision.id),
                                                               (TOPIC_DISRUPTION_EVENTS, decision.id)]
        bus.failing = False
        [command] = await eventually("the command", lambda: commands(bus))
        assert command.id == command_id(decision.id) and command.decision_id == decision.id
        assert command.nodes == ("n1",) and command.method == "emptiness"
        assert command.approved_at == decision.approved_at
        await eventually("the Approved event", lambda: ("Approved", "n1", decision.id) in events(bus))

        async def all_sent() -> bool:  # the relay marks a message sent once the bus took it: a moment after
            return await svc.store.outbox(unsent=True) == []

        await eventually("the outbox marked sent", all_sent)
        assert svc.planner is not None
        passes = svc.planner.passes
        await eventually("two more passes", lambda: svc.planner is not None and svc.planner.passes >= passes + 2)
        assert len(commands(bus)) == 1 and len(events(bus)) == 2


async def test_a_new_planner_publishes_what_another_one_left_in_the_outbox(db: str) -> None:
    """A planner that committed an approval and stopped before its relay ran: the next one's relay sends the
    command and the events, in the order they were written."""
    store = DecisionStore.from_url(db, "unit")
    await store.propose(proposed("d-prev", ("n9", "default"), now=NOW))
    assert (await store.approve("d-prev", node_pools={"n9": "default"}, reason="Empty", allowed={"default": 1},
                                counted=(), now=NOW)).approved
    await store.close()
    bus = InMemoryBus()
    async with Running(bus, db) as svc:
        [command] = await eventually("the previous planner's command", lambda: commands(bus))
        assert command.decision_id == "d-prev" and command.id == command_id("d-prev")
        assert command.nodes == ("n9",) and command.node_pool == "default" and command.explanation == "empty"
        await eventually("its events", lambda: len(events(bus)) == 2)
        assert events(bus) == [("Proposed", "n9", "d-prev"), ("Approved", "n9", "d-prev")]
        assert await svc.store.outbox(unsent=True) == []


class CountingLeader:
    """Always the leader; counts how often the planner's loop asks (once per iteration)."""

    fixed = False  # looked at as a Lease would be

    def __init__(self) -> None:
        self.asked = 0

    @property
    def is_leader(self) -> bool:
        self.asked += 1
        return True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


async def test_a_change_waits_out_the_debounce_without_spinning(db: str) -> None:
    """The debounce runs from the start of the last pass, which may itself take a while on a loaded machine: the
    pass starts are recorded on the planner's clock rather than guessed from when the test sees a pass end."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    leader = CountingLeader()
    starts: list[float] = []

    class Timed(Running):
        def _ready(self, planner: Planner) -> None:
            plan_once = planner.plan_once

            async def timed() -> None:
                starts.append(planner.clock.monotonic())
                await plan_once()

            planner.plan_once = timed  # type: ignore[method-assign]
            super()._ready(planner)

    async with Timed(bus, db, leader=leader, debounce_seconds=1.0, pass_interval_seconds=10.0) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("the first pass, at once", lambda: planner.passes >= 1)
        passes, asked = planner.passes, leader.asked
        planner.changed.set()  # a change right after a pass: planned once the debounce is over
        await eventually("the pass for the change", lambda: planner.passes > passes)
        assert planner.passes == passes + 1
        assert len(starts) == passes + 1
        assert starts[-1] - starts[-2] >= 1.0, starts  # not before the debounce is over
        # the loop ticks a few times a second; it spun thousands of times while the debounce ran before
        assert leader.asked - asked < 20, leader.asked - asked


async def test_a_fixed_leader_is_not_looked_at_between_passes(db: str) -> None:
    """A single replica's loop sleeps until a change, the next pass or the next proposal due: no 0.2 s tick."""
    bus = InMemoryBus()
    await publish(bus, *cluster())

    async def asked_in(leader: CountingLeader, seconds: float) -> int:
        async with Running(bus, db, leader=leader, pass_interval_seconds=10.0) as svc:
            planner = svc.planner
            assert planner is not None
            await eventually("the first pass", lambda: planner.passes >= 1)
            asked = leader.asked
            await asyncio.sleep(seconds)
            return leader.asked - asked

    class FixedLeader(CountingLeader):
        fixed = True

    ticking = await asked_in(CountingLeader(), 1.5)
    fixed = await asked_in(FixedLeader(), 1.5)
    assert ticking >= 5, ticking  # a Lease is looked at every tick (0.2 s)
    assert fixed <= 1, fixed  # nothing is due within 1.5 s: no proposal (n1 is proposed and approved at once), the
    # pass interval is 10 s


async def test_a_follower_does_not_spin_on_changes(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())

    class CountingFollower:
        asked = 0
        fixed = False

        @property
        def is_leader(self) -> bool:
            CountingFollower.asked += 1
            return False

        async def run(self, stop: asyncio.Event) -> None:
            await stop.wait()

    async with Running(bus, db, leader=CountingFollower()) as svc:
        assert svc.planner is not None
        svc.planner.changed.set()
        await asyncio.sleep(0.5)
        assert CountingFollower.asked < 20, CountingFollower.asked
        assert svc.planner.passes == 0


async def test_a_change_the_snapshot_does_not_read_reuses_the_last_pass(db: str) -> None:
    """An object changed where the snapshot does not look (here a status field ebb does not parse): the pass is
    answered from the last one, as when nothing changed; a change it reads makes the next pass computed."""
    busy = node("n2", itype="t3.medium")
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), busy, pod("p2", "n2", cpu="1500m"))  # nothing to do
    async with Running(bus, db, reuse_passes=True) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("a pass reused", lambda: planner.passes_reused >= 1)
        computed = planner.passes - planner.passes_reused
        version = planner.objects.version
        await publish(bus, {**busy, "status": {**busy.get("status", {}), "nodeInfo": {"kubeletVersion": "v1.34.4"}}})
        await eventually("the change applied", lambda: planner.objects.version > version)
        passes = planner.passes
        await eventually("two more passes", lambda: planner.passes >= passes + 2)
        assert planner.passes - planner.passes_reused == computed
        await publish(bus, pod("p3", None, cpu="100m"))  # a pending pod: the snapshot reads it
        await eventually("a pass computed", lambda: planner.passes - planner.passes_reused > computed)
        assert await svc.decisions() == []


async def test_with_a_write_count_a_pass_reads_the_store_again_only_after_a_write(db: str) -> None:
    """The embedded mode's passes read the live decisions and the holds once per write (a read yields to the event
    loop, so a computed pass could otherwise see objects that a pass answered from the last one does not); a hold
    that expires meanwhile is left out by the time, not by a read."""
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"))
    async with Running(bus, db, pass_interval_seconds=600.0) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("the first pass", lambda: planner.passes >= 1)  # then none for 10 minutes
        until = datetime(2031, 1, 1, tzinfo=UTC)
        await svc.store.create_hold(scope_kind="node", scope="n2", reason="test", expires_at=until,
                                    now=until - timedelta(days=1))
        revision = [0]
        reads = [0]
        read = planner.store.live_nodes

        async def counted(*args: Any, **kwargs: Any) -> dict[str, str]:
            reads[0] += 1
            return await read(*args, **kwargs)

        planner.store.live_nodes = counted  # type: ignore[method-assign]
        inputs: PassInputs[object] = PassInputs(planner.objects, planner.store, writes=lambda: revision[0])
        first = await inputs.read(until - timedelta(seconds=1), planner.options)
        assert [h.scope for h in first.holds] == ["n2"] and reads[0] == 1
        again = await inputs.read(until, planner.options)
        assert again.holds == [] and reads[0] == 1  # expired: left out without a read
        assert again.key == first.key  # the expiry is the pass's revisit_at, not a change of the store
        revision[0] += 1  # a write
        await inputs.read(until, planner.options)
        assert reads[0] == 2
        # with other writers (no count) the store is read at every pass
        shared: PassInputs[object] = PassInputs(planner.objects, planner.store)
        await shared.read(until, planner.options)
        await shared.read(until, planner.options)
        assert reads[0] == 4


async def test_with_a_store_revision_the_relay_reads_the_outbox_only_after_a_write(db: str) -> None:
    """The embedded mode's store is its process's alone (``store_revision``): its relay does not poll the outbox, it
    reads it when the store committed a write that may have sent something."""
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"))
    reads = [0]

    class Counting(Running):
        def _ready(self, planner: Planner) -> None:
            relay = planner.store.relay

            async def counted(*args: Any, **kwargs: Any) -> int:
                reads[0] += 1
                return await relay(*args, **kwargs)

            planner.store.relay = counted  # type: ignore[method-assign]
            super()._ready(planner)

    async with Counting(bus, db, store_revision=lambda: 0) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("a first read", lambda: reads[0] >= 1)
        await asyncio.sleep(1.5)  # a polling relay would have looked every second
        assert reads[0] == 1
        await planner.store.propose(proposed("d-x", "n7", now=NOW))
        await eventually("a read after the write", lambda: reads[0] >= 2)
        await eventually("the Proposed event", lambda: events(bus) == [("Proposed", "n7", "d-x")])


async def _burst_on_n1() -> tuple[InMemoryBus, dict[str, Any]]:
    """A bus holding NodePool default with ``demandWindow: 1h`` and two t3.medium, n1 running the 1.5-cpu pod
    ``burst`` and n2 one more of 1.5 cpu; and that pod, to end it."""
    burst = pod("burst", "n1", cpu="1500m")
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(disruption={"demandWindow": "1h"}), node("n1", itype="t3.medium"), burst,
                  node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m"))
    return bus, burst


async def test_a_demand_window_keeps_what_a_peak_needed_until_the_peak_leaves_it(db: str) -> None:
    """NodePool default keeps capacity for its pods' peak request within ``demandWindow: 1h``: the planner records
    the demand of its passes while a 1.5-cpu pod runs on n1, so once that pod has ended n1 is empty and still kept;
    an hour later the peak has left the window and n1 is proposed."""
    bus, burst = await _burst_on_n1()
    async with Running(bus, db) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("a pass over the burst", lambda: planner.passes >= 1)
        version = planner.objects.version
        await publish(bus, {**burst, "status": {**burst["status"], "phase": "Succeeded"}})
        await eventually("the burst ended", lambda: planner.objects.version > version)
        passes = planner.passes
        await eventually("two more passes", lambda: planner.passes >= passes + 2)
        assert await svc.decisions() == []
        assert svc.metric("ebb_nodepools_demand_window_peak", nodepool="default", resource_type="cpu") == 3.0
        assert svc.metric("ebb_nodepools_demand_window_capacity", nodepool="default", resource_type="cpu") == 4.0
        svc.clock.now = NOW + timedelta(hours=1, seconds=1)
        [decision] = await eventually("n1 proposed", svc.decisions)
        assert (decision.method, [n["name"] for n in decision.nodes]) == ("emptiness", ["n1"])


async def test_a_new_leader_reads_the_demand_record_the_last_one_saved(db: str) -> None:
    """The demand record is saved in the store: a planner that starts after another stopped (a restart, a new
    leader) keeps n1, which the peak the first one recorded still needs, until that peak leaves the window."""
    bus, burst = await _burst_on_n1()
    async with Running(bus, db) as first:
        await eventually("a pass over the burst", lambda: first.planner is not None and first.planner.passes >= 1)
    await publish(bus, {**burst, "status": {**burst["status"], "phase": "Succeeded"}})
    second = Running(bus, db)
    second.clock.now = NOW + timedelta(seconds=10)  # later than the first planner's passes
    async with second:
        planner = second.planner
        assert planner is not None
        await eventually("two passes", lambda: planner.passes >= 2)
        assert await second.decisions() == []
        assert second.metric("ebb_nodepools_demand_window_peak", nodepool="default", resource_type="cpu") == 3.0
        second.clock.now = NOW + timedelta(hours=1, seconds=1)
        [decision] = await eventually("n1 proposed", second.decisions)
        assert [n["name"] for n in decision.nodes] == ["n1"]


async def test_a_balanced_nodepool_counts_the_moves_it_refuses(db: str) -> None:
    """consolidationPolicy Balanced refuses the RFC's marginal replace (tests/unit/test_balanced.py): the planner
    proposes nothing and counts the move in Karpenter's metrics under ebb_ names, with its score (0.42 is in the
    0.5 bucket, not the 0.33 one)."""
    bus = InMemoryBus()
    await publish(bus, *marginal_cluster("Balanced"))
    async with Running(bus, db) as svc:
        planner = svc.planner
        assert planner is not None
        await eventually("two passes", lambda: planner.passes >= 2)
        assert await svc.decisions() == []
        labels = {"decision": "rejected", "nodepool": "default", "policy": "Balanced"}
        assert svc.metric("ebb_consolidation_moves_total", **labels) >= 1
        assert svc.metric("ebb_consolidation_score_bucket", le="0.5", **labels) >= 1
        assert svc.metric("ebb_consolidation_score_bucket", le="0.33", **labels) == 0
        assert svc.metric("ebb_consolidation_moves_total", **{**labels, "decision": "approved"}) == 0


async def test_nothing_is_planned_until_every_watched_kind_is_synced(db: str) -> None:
    """Karpenter's disruption waits until its cluster state is synced. The cluster-watcher says which kinds it has
    published a first list of (`KindSynced`): until every kind it watches is, a kind still missing (the Holds, the
    PDBs, a node's pods) would look empty, so the planner neither plans nor approves, and says it is not synced."""
    bus = InMemoryBus()
    await publish(bus, *cluster())  # an empty node: an emptiness decision once the planner plans
    watched = ("Node", "Pod", "NodePool", "Hold")
    async with Running(bus, db, synced=False) as svc:
        for message in kinds_synced(watched)[:-1]:  # the Holds are not listed yet
            await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
        await asyncio.sleep(1.0)  # three pass intervals
        assert await svc.decisions() == []
        assert svc.metric("ebb_cluster_state_synced") == 0.0
        assert svc.planner is not None and svc.planner.unsynced_kinds() == ("Hold",)
        await bus.publish(TOPIC_CLUSTER_OBJECTS, kinds_synced(watched)[-1])
        [proposed] = await eventually("a proposed decision", svc.decisions)
        assert proposed.method == "emptiness"
        assert svc.metric("ebb_cluster_state_synced") == 1.0


async def test_a_kind_an_earlier_watcher_did_not_watch_is_waited_for_too(db: str) -> None:
    """The compacted topic keeps each kind's last marker, some from an earlier watcher run that watched fewer kinds:
    the kinds to wait for are every marker's, so a Hold the new watcher has not listed yet keeps the planner waiting
    whichever marker is read last."""
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, synced=False) as svc:
        assert svc.planner is not None
        svc.planner.note_synced(KindSynced(kind="Node", watched=("Node", "Pod", "NodePool", "Hold")))
        for kind in ("Pod", "NodePool"):  # the earlier run's, read after the new one
            svc.planner.note_synced(KindSynced(kind=kind, watched=("Node", "Pod", "NodePool")))
        await asyncio.sleep(1.0)  # three pass intervals
        assert await svc.decisions() == []
        assert svc.planner.unsynced_kinds() == ("Hold",)


async def test_an_interruption_of_a_node_ebb_does_not_manage_tells_nothing_on_it(db: str) -> None:
    """Karpenter's AWS provider emits its interruption events only on the nodes it manages (a NodeClaim found): a
    node without a NodePool gets neither a decision nor a SpotInterrupted event from ebb."""
    sink = Sink()
    bus = InMemoryBus()
    await publish(bus, catalog(), nodepool(), node("foreign", pool=None), node("n2", itype="t3.medium"),
                  pod("p2", "n2", cpu="1500m"))
    recorder = EventRecorder(sink, component="ebb-consolidation-planner")
    async with Running(bus, db, delay=3600, recorder=recorder) as svc:
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("foreign"))
        await bus.publish(TOPIC_INTERRUPTIONS, interruption("n2"))
        await eventually("the interruption's decision", lambda: svc.decisions("approved"))
        await eventually("both consumed", lambda: bus.lag("planner-test-interruptions", TOPIC_INTERRUPTIONS) == 0)
        await recorder.flush()
        assert "SpotInterrupted" in sink.reasons("n2")
        assert "SpotInterrupted" not in sink.reasons("foreign")
        assert [d.nodes[0]["name"] for d in await svc.decisions()] == ["n2"]
