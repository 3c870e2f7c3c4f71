"""The system's "done when" tests: the five services as separate ``python -m`` processes on real Kafka,
PostgreSQL, kube-apiserver + KWOK (with kube-controller-manager and kube-scheduler) and moto SQS.

1. End to end: a NodePool and three KWOK nodes whose Deployment pods (placed by kube-scheduler) fit on two
   of them → one consolidation decision, in PostgreSQL and over REST with its explanation; the node drained
   through the Eviction API (its pod recreated elsewhere by the ReplicaSet) and deleted; the decision
   ``succeeded``; Proposed, Approved, Tainted, Evicted, Terminated in order on ebb.disruption.events (read
   by a plain aiokafka consumer) and on ``GET /v1/events``.
2. Crash safety: the termination-executor SIGKILLed in the middle of a drain, and the consolidation-planner
   SIGKILLed between a proposal and its approval, then restarted: the new leader resumes the proposal from its
   row, each decision completes once, the budget is never overrun, no pod is evicted twice, no node is left
   tainted without a live decision.
3. Bad input: malformed records on every consumed topic go to ``<topic>.dlq`` and the consumers keep
   working; malformed REST bodies get 422.

Each test makes its own names from a random run id (topic prefix, database, cluster, Lease, NodePool,
nodes, namespace) and removes what it created. On failure every service's log tail is printed (the whole
logs stay in the test's tmp_path/logs). The services watch the whole cluster and delete nodes: run the tests
on servers of their own, e.g. ``EBB_INFRA_DIR=/tmp/ebb-sys-infra .venv/bin/pytest -q
tests/integration/test_system.py`` (the fixtures start the servers there and reuse them while they run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import httpx
import pytest
from aiobotocore.session import get_session
from kubernetes_asyncio import client

from ebb.adapters.bus import KafkaBus
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_INTERRUPTIONS,
    ClusterObject,
)
from tests.kit.system import (
    DISRUPTED_TAINT,
    PodTracker,
    Sandbox,
    SseReader,
    TopicReader,
    create_nodepool,
    daemonset,
    deployment,
    has_taint,
    instance_id,
    jv,
    kwok_node,
    malformed_records,
    node_gone,
    nodepool,
    nodes_ready,
    pods_of,
    query,
    running,
    send_raw,
)
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

LIFECYCLE = ["Proposed", "Approved", "Tainted", "Evicted", "Terminated"]
CONSOLIDATION = ("single-node-consolidation", "multi-node-consolidation")




async def test_end_to_end_consolidation(kube_api: Any, box: Sandbox) -> None:
    """Three KWOK nodes with one 1.5-CPU web pod each, the NodePool created once the five services run: one
    node's pod fits elsewhere, so exactly one single-node consolidation is decided, explained, approved,
    executed through the Eviction API and reported on Kafka, over REST and on GET /v1/events."""
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    run, ns = box.run, box.namespace
    box.nodes += [f"sys-{run}-n{i}" for i in range(3)]
    for name in box.nodes:
        await core.create_node(kwok_node(name, box.pool, run))
    await eventually("the nodes Ready", lambda: nodes_ready(kube_api, box.nodes), within=60)
    # three pods of 1.5 CPU on three 4-CPU nodes, added one at a time so that kube-scheduler (least allocated)
    # puts each on an empty node: any one node's pod fits on another node, but two nodes' pods do not fit on
    # one, so exactly one consolidation is possible
    await apps.create_namespaced_deployment(ns, deployment("web", run, replicas=1, cpu="1500m"))
    for replicas in (1, 2, 3):
        if replicas > 1:
            await apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": replicas}})

        async def spread(count: int = replicas) -> list[client.V1Pod] | None:
            pods = running(await pods_of(kube_api, ns, "web"))
            return pods if len(pods) == count else None

        placed = await eventually(f"{replicas} web pods Running", spread, within=90)
    assert sorted(p.spec.node_name for p in placed) == sorted(box.nodes), "kube-scheduler spread one pod per node"
    original = {p.spec.node_name: p.metadata.uid for p in placed}

    async with TopicReader(box.servers.kafka_bootstrap, box.settings.prefix, [TOPIC_DISRUPTION_EVENTS]) as reader, \
            box.system() as system, PodTracker(kube_api, ns) as pods, httpx.AsyncClient(
                base_url=system.api, headers=system.auth, timeout=30) as http, contextlib.AsyncExitStack() as streams:
        # GET /v1/events, subscribed before the decision is made: everything, per node, a decision filter
        events_url = f"{system.api}/v1/events"
        sse = await streams.enter_async_context(SseReader(events_url, system.auth))
        by_node = {name: await streams.enter_async_context(SseReader(events_url, system.auth, {"node": name}))
                   for name in box.nodes}
        no_such_decision = await streams.enter_async_context(
            SseReader(events_url, system.auth, {"decision": f"dec-none-{run}"}))
        for stream in (sse, *by_node.values(), no_such_decision):
            assert stream.status == 200 and (stream.content_type or "").startswith("text/event-stream")
        # the NodePool last: nothing is a candidate before it exists
        await create_nodepool(kube_api, nodepool(box.pool, run, budget="1", consolidate_after="2s"))

        async def first_decision() -> Any:
            system.check_running()
            rows = await box.decisions()
            return rows[0] if rows else None

        decision = await eventually("a decision in PostgreSQL", first_decision, within=120,
                                    on_timeout=system.tails)
        decision_id, [target] = decision["id"], [n["name"] for n in jv(decision["nodes"])]
        assert decision["method"] in CONSOLIDATION, dict(decision)
        assert (decision["reason"], decision["action"]) == ("Underutilized", "delete")
        assert target in box.nodes
        assert jv(decision["explanation"])["text"], "the decision explains itself"

        # over REST: in the list and on its own, with its explanation
        listed = (await http.get("/v1/decisions", params={"node": target})).raise_for_status().json()
        assert [d["id"] for d in listed["items"]] == [decision_id]
        assert listed["items"][0]["explanation"]["text"] == jv(decision["explanation"])["text"]

        # the node drained and deleted; the decision succeeded
        await eventually(f"node {target} deleted", lambda: node_gone(core, target), within=120,
                         on_timeout=system.tails)

        async def succeeded() -> dict[str, Any] | None:
            system.check_running()
            body = (await http.get(f"/v1/decisions/{decision_id}")).raise_for_status().json()
            return body if body["state"] == "succeeded" else None

        detail = await eventually("the decision succeeded", succeeded, within=60)
        assert detail["explanation"]["text"] and detail["nodes"][0]["name"] == target
        assert detail["startedAt"] and detail["finishedAt"]
        timeline = [(e["type"], e["node"]) for e in detail["timeline"]]
        assert [t for t, _ in timeline] == LIFECYCLE, timeline
        # every entry names the node: one per published event, under its id (the planner's steps too)
        assert {n for _, n in timeline} == {target}, timeline

        # its pod was evicted (gone, never force-deleted) and recreated by the ReplicaSet on another node
        async def replaced() -> list[client.V1Pod] | None:
            now = running(await pods_of(kube_api, ns, "web"))
            return now if len(now) == 3 and target not in {p.spec.node_name for p in now} else None

        after = await eventually("3 web pods Running on the other nodes", replaced, within=90)
        assert original[target] not in {p.metadata.uid for p in after}
        assert {original[n] for n in box.nodes if n != target} <= {p.metadata.uid for p in after}
        await pods.caught_up()
        assert len(pods.seen) == 4, f"one pod evicted once and replaced: {pods.seen}"

        # the lifecycle on Kafka: CloudEvents in binary mode, keyed by node, in order
        def lifecycle() -> list[str] | None:
            phases: list[str] = [e.phase for e in reader.events() if e.decision_id == decision_id]
            return phases if "Terminated" in phases else None

        phases = await eventually("Terminated on ebb.disruption.events", lifecycle, within=30)
        assert phases == LIFECYCLE
        records = [r for r in reader.on(TOPIC_DISRUPTION_EVENTS) if r.json()["decisionId"] == decision_id]
        for record in records:
            assert record.key == target.encode()
            assert record.header("ce_specversion") == "1.0"
            assert record.header("ce_type") == "sh.ebb.disruption.progressed.v1"
            assert record.header("ce_id") == record.json()["id"]
            assert record.header("content-type") == "application/json"
            assert record.header("ce_source") and record.header("ce_time")
        assert len({r.partition for r in records}) == 1

        # the same lifecycle on GET /v1/events, subscribed before the decision was made
        await check_sse(sse, records, decision_id, target)
        await eventually("the node filter's stream", lambda: len(by_node[target].events) >= len(LIFECYCLE))
        assert [(e.event, e.json()["node"]) for e in by_node[target].events] == [(p, target) for p in LIFECYCLE]
        for name in box.nodes:
            if name != target:
                assert all(e.json()["node"] == name for e in by_node[name].events), by_node[name].events
        assert not no_such_decision.events, no_such_decision.events
        async with httpx.AsyncClient(base_url=system.api, timeout=10) as anonymous:
            assert (await anonymous.get("/v1/events")).status_code == 401

        # the other nodes stay, untainted: two nodes' pods do not fit on one, so no other decision may be
        # approved (one proposed while the evicted pod's replacement was still pending is rejected on validation)
        await asyncio.sleep(box.settings.validation_delay + 3)
        others = [(d["id"], d["state"], jv(d["nodes"]), jv(d["explanation"])) for d in await box.decisions()
                  if d["id"] != decision_id]
        assert all(state in ("proposed", "rejected") for _, state, _, _ in others), others
        for name in box.nodes:
            if name != target:
                assert not has_taint(await core.read_node(name), DISRUPTED_TAINT)
        assert len(running(await pods_of(kube_api, ns, "web"))) == 3




async def check_sse(sse: SseReader, records: list[Any], decision_id: str, node: str) -> None:
    def streamed() -> list[Any] | None:
        sse.check()
        mine = [e for e in sse.events if e.json().get("decisionId") == decision_id]
        return mine if len(mine) >= len(LIFECYCLE) else None

    events = await eventually("the lifecycle on GET /v1/events", streamed, within=30)
    assert [e.event for e in events] == LIFECYCLE
    assert [e.id for e in events] == [r.json()["id"] for r in records]
    for event, record in zip(events, records, strict=True):
        data = event.json()
        assert set(data) == {"id", "decisionId", "node", "phase", "message", "at"}
        assert data["node"] == node and data["phase"] == event.event and data["id"] == event.id
        assert data == {k: record.json()[k] for k in data}
        assert "\n" not in event.data


DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


class BudgetWatch:
    """Samples, all through a test, how many decisions of the cluster hold budget at once (approved or
    executing) and how many budget_ledger rows of the pool belong to such live decisions."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.max_live = 0
        self.max_ledger = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        url, cluster = self.box.servers.database_url, self.box.settings.cluster
        while True:
            [row] = await query(url, """
                SELECT (SELECT count(*) FROM decisions WHERE cluster = $1 AND state IN ('approved', 'executing'))
                           AS live,
                       (SELECT count(*) FROM budget_ledger l JOIN decisions d ON d.id = l.decision_id
                         WHERE l.cluster = $1 AND l.nodepool = $2 AND d.state IN ('approved', 'executing'))
                           AS ledger""", cluster, self.box.pool)
            self.max_live = max(self.max_live, int(row["live"]))
            self.max_ledger = max(self.max_ledger, int(row["ledger"]))
            self.samples += 1
            await asyncio.sleep(0.2)

    async def __aenter__(self) -> BudgetWatch:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


#: the label that puts A's agent pod under the refusing PDB of the crash-safety test, once A's decision is approved
BLOCKED_LABEL = "ebb.sh/system-test-blocked"


async def test_crash_safety_executor_and_planner_killed_mid_decision(kube_api: Any, box: Sandbox) -> None:
    """Budget 1 node. Node A runs two web pods and a DaemonSet pod whose PDB refuses evictions (429); B and C
    are spares, annotated do-not-disrupt. The executor is SIGKILLed while it retries A's DaemonSet pod (the web
    pods already evicted), restarted, and the PDB relaxed: A is deleted once, no pod evicted twice. Then B is
    released; the planner is SIGKILLed between B's proposal and its approval and restarted: the new Lease
    holder resumes that proposal (its state and approve_at are its row) and carries it out, once."""
    core, apps, policy = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api), client.PolicyV1Api(kube_api)
    coordination = client.CoordinationV1Api(kube_api)
    run, ns = box.run, box.namespace
    a, b, c = (f"sys-{run}-{x}" for x in "abc")
    box.nodes += [a, b, c]
    await core.create_node(kwok_node(a, box.pool, run))
    await eventually("node A Ready", lambda: nodes_ready(kube_api, [a]), within=60)
    await apps.create_namespaced_deployment(ns, deployment("web", run, replicas=2, cpu="1"))

    async def web_on_a() -> list[client.V1Pod] | None:
        pods = running(await pods_of(kube_api, ns, "web"))
        return pods if len(pods) == 2 and {p.spec.node_name for p in pods} == {a} else None

    await eventually("2 web pods Running on A", web_on_a, within=90)
    for spare in (b, c):
        await core.create_node(kwok_node(spare, box.pool, run, annotations={DO_NOT_DISRUPT: "true"}))
    await eventually("B and C Ready", lambda: nodes_ready(kube_api, [b, c]), within=60)
    await apps.create_namespaced_daemon_set(ns, daemonset("agent", run))

    async def agents() -> dict[str, client.V1Pod] | None:
        pods = running(await pods_of(kube_api, ns, "agent"))
        by_node = {p.spec.node_name: p for p in pods}
        return by_node if set(by_node) == {a, b, c} and len(pods) == 3 else None

    await eventually("an agent pod Running on A, B and C", agents, within=90)
    # A PDB that will refuse the eviction of A's agent pod (429) until the test relaxes it. It selects no pod
    # until A's decision is approved: a PDB that allows nothing on any pod of a node, DaemonSet pods included,
    # keeps the node from being a candidate (Karpenter's ValidatePodsDisruptable), so it must appear after the
    # planner decided and validated.
    blocked = {"app": "agent", BLOCKED_LABEL: "yes"}
    await policy.create_namespaced_pod_disruption_budget(ns, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="agent"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=client.V1LabelSelector(match_labels=blocked))))
    agent_on_a = (await agents() or {})[a]
    on_a = {p.metadata.uid for p in await pods_of(kube_api, ns, "web")} | {agent_on_a.metadata.uid}

    async with TopicReader(box.servers.kafka_bootstrap, box.settings.prefix, [TOPIC_DISRUPTION_EVENTS]) as reader, \
            box.system(validation_delay=5.0) as system, PodTracker(kube_api, ns) as pods, BudgetWatch(box) as budget:
        executor, planner = system["termination-executor"], system["consolidation-planner"]
        await create_nodepool(kube_api, nodepool(box.pool, run, budget="1", consolidate_after="0s"))

        async def approved() -> bool:
            return any(d["state"] in ("approved", "executing") for d in await box.decisions())

        await eventually("A's decision approved", approved, within=120, interval=0.1, on_timeout=system.tails)
        await core.patch_namespaced_pod(agent_on_a.metadata.name, ns,
                                        {"metadata": {"labels": {BLOCKED_LABEL: "yes"}}})

        # -- the executor dies in the middle of A's drain ---------------------------------------------------
        async def draining_agent() -> bool:
            system.check_running()
            node = await core.read_node(a)
            web = running(await pods_of(kube_api, ns, "web"))
            agent_left = any(p.spec.node_name == a for p in await pods_of(kube_api, ns, "agent"))
            return (has_taint(node, DISRUPTED_TAINT) and len(web) == 2 and a not in {p.spec.node_name for p in web}
                    and agent_left)

        await eventually("A tainted, its web pods evicted and replaced, its agent pod refused", draining_agent,
                         within=150, on_timeout=system.tails)
        [first] = await box.decisions()
        assert [n["name"] for n in jv(first["nodes"])] == [a] and first["state"] == "executing", dict(first)
        await asyncio.sleep(1.5)  # a few refused attempts
        await executor.kill()
        assert first["id"] not in {e.decision_id for e in reader.events() if e.phase in ("Evicted", "Terminated")}
        await asyncio.sleep(3)  # the planner keeps planning: A has a live decision, B and C are protected
        assert [(d["id"], d["state"]) for d in await box.decisions()] == [(first["id"], "executing")]
        assert has_taint(await core.read_node(a), DISRUPTED_TAINT)

        await system.start("termination-executor")
        await eventually("the restarted executor resuming the command", lambda: executor.logged("executing"),
                         within=90, on_timeout=executor.tail)
        await asyncio.sleep(1.5)
        await policy.delete_namespaced_pod_disruption_budget("agent", ns)
        await eventually("A deleted", lambda: node_gone(core, a), within=90, on_timeout=system.tails)

        async def state_of(decision_id: str, wanted: str) -> bool:
            system.check_running()
            rows = [d for d in await box.decisions() if d["id"] == decision_id]
            return bool(rows) and rows[0]["state"] == wanted

        await eventually("the first decision succeeded", lambda: state_of(first["id"], "succeeded"), within=60)
        # its last step is committed with the decision's end and relayed from the executor's outbox after it
        await eventually("the Terminated event", lambda: any(
            e.decision_id == first["id"] and e.phase == "Terminated" for e in reader.events()), within=30)
        phases = [e.phase for e in reader.events() if e.decision_id == first["id"]]
        assert phases.count("Evicted") == 1 and phases.count("Terminated") == 1, phases
        assert phases[:2] == ["Proposed", "Approved"] and phases[-2:] == ["Evicted", "Terminated"], phases
        assert "Failed" not in phases and "RolledBack" not in phases
        # the restarted executor reports its steps under the same ids: one Tainted in the timeline
        tainted = {e.id for e in reader.events() if e.decision_id == first["id"] and e.phase == "Tainted"}
        assert len(tainted) == 1, tainted
        assert [t["type"] for t in await box.timeline(first["id"])].count("Tainted") == 1
        evicted = next(e for e in reader.events() if e.decision_id == first["id"] and e.phase == "Evicted")
        assert evicted.message.startswith("evicted 1 pod(s)"), f"only the agent pod was left: {evicted.message}"

        # -- the planner dies between B's proposal and its approval -----------------------------------------
        lease_before = await coordination.read_namespaced_lease(box.settings.lease, "default")
        await core.patch_node(b, {"metadata": {"annotations": {DO_NOT_DISRUPT: None}}})

        async def proposed_for_b() -> Any:
            system.check_running()
            rows = [d for d in await box.decisions() if d["state"] == "proposed"
                    and [n["name"] for n in jv(d["nodes"])] == [b]]
            return rows[0] if rows else None

        left = await eventually("a decision proposed for B", proposed_for_b, within=90, interval=0.1,
                                on_timeout=system.tails)
        await planner.kill()
        states = {d["id"]: d["state"] for d in await box.decisions()}
        assert states[left["id"]] == "proposed", "killed before the validation delay ran out"
        assert not has_taint(await core.read_node(b), DISRUPTED_TAINT)

        await system.start("consolidation-planner")

        await eventually("B's proposal resumed and succeeded", lambda: state_of(left["id"], "succeeded"), within=150)
        assert [d["id"] for d in await box.decisions()] == [first["id"], left["id"]], "nothing proposed again"
        assert await node_gone(core, b)
        lease_after = await coordination.read_namespaced_lease(box.settings.lease, "default")
        assert lease_after.spec.holder_identity != lease_before.spec.holder_identity
        assert (lease_after.spec.lease_transitions or 0) > (lease_before.spec.lease_transitions or 0)
        def left_events() -> list[Any] | None:
            events = [e for e in reader.events() if e.decision_id == left["id"]]
            return events if any(e.phase == "Approved" for e in events) else None

        mine = await eventually("B's Approved event", left_events, within=30)
        # the SIGKILL may fall between the relay's publish of Proposed and its mark: at least once, under one id
        assert len({e.id for e in mine if e.phase == "Proposed"}) == 1, mine
        assert [e.phase for e in mine].count("Approved") == 1, mine

        # -- exactly once, within budget, nothing left behind ------------------------------------------------
        await asyncio.sleep(3)  # C is protected: nothing else happens
        decisions = await box.decisions()
        succeeded = sorted(n["name"] for d in decisions if d["state"] == "succeeded" for n in jv(d["nodes"]))
        assert succeeded == sorted([a, b]), [dict(d) for d in decisions]
        assert {d["state"] for d in decisions} == {"succeeded"}
        assert budget.samples > 10 and budget.max_live <= 1 and budget.max_ledger <= 1, vars(budget)
        assert not has_taint(await core.read_node(c), DISRUPTED_TAINT)
        assert await node_gone(core, a) and await node_gone(core, b)
        # every pod that disappeared was on A or B when it was evicted, once: the rest still run
        alive = {p.metadata.uid for p in (await core.list_namespaced_pod(ns)).items
                 if p.metadata.deletion_timestamp is None}
        gone = set(pods.seen) - alive
        assert on_a <= gone
        assert all(pods.seen[uid][1] in (a, b) for uid in gone), {uid: pods.seen[uid] for uid in gone}
        web_now = running(await pods_of(kube_api, ns, "web"))
        assert len(web_now) == 2 and {p.spec.node_name for p in web_now} == {c}
        system.check_running()
        # nothing was proposed about a node that was already gone (a restarted planner that replays the
        # compacted topic over its seeded snapshot sees deleted nodes again for a while)
        stale = [(d["id"], d["method"], [n["name"] for n in jv(d["nodes"])], jv(d["explanation"]))
                 for d in decisions if d["state"] == "rejected"]
        assert not stale, f"decisions proposed on stale state after the planner's restart: {stale}"


#: the topics a system service consumes → the CloudEvent type a record there would carry
CONSUMED = {
    TOPIC_CLUSTER_OBJECTS: "sh.ebb.object.upserted.v1",
    TOPIC_INTERRUPTIONS: "sh.ebb.interruption.received.v1",
    TOPIC_DISRUPTION_COMMANDS: "sh.ebb.command.approved.v1",
    TOPIC_DISRUPTION_EVENTS: "sh.ebb.disruption.progressed.v1",
}


async def test_bad_input_goes_to_dead_letters_and_the_services_keep_working(kube_api: Any, box: Sandbox) -> None:
    """Three malformed records (not a CloudEvent, not JSON, wrong schema) on each consumed topic, keyed like
    the valid records that follow them (same partition, so those come after): every consumer group writes
    them to ``<topic>.dlq`` and goes on. The valid records after them are processed: a node on
    ebb.cluster.objects (a NodePool with budget 0, so nothing but an interruption may disrupt it) gets its
    findings in a planner pass, the interruption-ingester maps an SQS spot warning for it to an
    Interruption, the planner (holding the node's findings) approves it at once, the executor runs the
    command (the node is not a real Node: "node already gone"), and the decisions-api streams its events and
    explains the node. Malformed REST bodies get 422 and a valid one still works."""
    run = box.run
    fake, pool = f"sys-{run}-ghost", f"sys-dlq-pool-{run}"
    topics = [*CONSUMED, *(f"{t}.dlq" for t in CONSUMED)]
    async with TopicReader(box.servers.kafka_bootstrap, box.settings.prefix, topics) as reader, \
            box.system() as system, httpx.AsyncClient(base_url=system.api, headers=system.auth, timeout=30) as http, \
            SseReader(f"{system.api}/v1/events", system.auth, {"node": fake}) as sse:
        # the bad records first, each keyed as the valid records after it
        keys = {TOPIC_CLUSTER_OBJECTS: f"Node//{fake}", TOPIC_DISRUPTION_COMMANDS: pool}
        for topic, ce_type in CONSUMED.items():
            await send_raw(box.servers.kafka_bootstrap, box.settings.prefix + topic,
                           malformed_records(ce_type, keys.get(topic, fake)))

        # valid records after them: a NodePool allowing no voluntary disruption and a node of it
        pool_doc = nodepool(pool, run, budget="0")
        node_doc = client.ApiClient().sanitize_for_serialization(kwok_node(fake, pool, run))
        node_doc |= {"apiVersion": "v1", "kind": "Node"}
        node_doc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        node_doc["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        async with KafkaBus(box.servers.kafka_bootstrap, prefix=box.settings.prefix) as bus:
            for doc in (pool_doc, node_doc):
                await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(
                    kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1", object=doc))

        # every consumer group dead-lettered its three records, with the cause
        expected = {
            TOPIC_CLUSTER_OBJECTS: [f"{box.settings.planner_group}-", f"{box.settings.ingester_group}-",
                                    f"{box.settings.api_group}-objects-"],
            TOPIC_INTERRUPTIONS: [f"{box.settings.planner_group}-interruptions"],
            TOPIC_DISRUPTION_COMMANDS: [box.settings.executor_group],
            TOPIC_DISRUPTION_EVENTS: [f"{box.settings.api_group}-events-"],
        }

        def dead_lettered() -> bool:
            system.check_running()
            for topic, groups in expected.items():
                letters = reader.dead_letters(topic)
                for group in groups:
                    mine = [d for d in letters if d.group == group or (group.endswith("-") and
                                                                        d.group.startswith(group))]
                    if len(mine) < 3:
                        return False
            return True

        def missing() -> str:
            return "\n".join(f"{t}.dlq: {sorted((d.group, d.error[:80]) for d in reader.dead_letters(t))}"
                             for t in CONSUMED) + "\n" + system.tails()

        await eventually("three dead letters per consumer group and topic", dead_lettered, within=120,
                         on_timeout=missing)
        for topic, groups in expected.items():
            letters = reader.dead_letters(topic)
            assert {d.cause for d in letters} == {"malformed"} and all(d.topic == topic for d in letters)
            for group in groups:
                mine = [d for d in letters if d.group == group or (group.endswith("-") and d.group.startswith(group))]
                assert len(mine) == 3, (topic, group, [(d.group, d.error) for d in letters])
                errors = " | ".join(d.error for d in mine)
                assert "not a CloudEvent" in errors and "not valid JSON" in errors and "schema" in errors, errors
                # the letter carries the original record, byte for byte
                originals = {d.original()[1] for d in mine}
                assert b"hello, I am not a CloudEvent" in originals

        # a planner pass found the node's findings (after the bad records on ebb.cluster.objects)
        def findings() -> list[Any] | None:
            system.check_running()
            mine = [line for line in system["consolidation-planner"].lines()
                    if line.get("event") == "finding raised" and line.get("node") == fake]
            return mine or None

        await eventually("the planner's findings for the node", findings, within=90, on_timeout=system.tails)

        # a spot interruption on SQS for the node's instance → ingester → planner → executor
        async with get_session().create_client(
            "sqs", endpoint_url=box.servers.aws_endpoint, region_name=box.servers.aws_region,
            aws_access_key_id="testing", aws_secret_access_key="testing") as sqs:
            await sqs.send_message(QueueUrl=box.settings.queue_url, MessageBody=json.dumps({
                "version": "0", "id": str(uuid.uuid4()), "detail-type": "EC2 Spot Instance Interruption Warning",
                "source": "aws.ec2", "account": "123456789012", "time": "2026-11-21T13:00:00Z",
                "region": box.servers.aws_region, "resources": [],
                "detail": {"instance-id": instance_id(fake), "instance-action": "terminate"}}))

        async def interrupted() -> Any:
            system.check_running()
            rows = [d for d in await box.decisions() if d["id"].startswith("int-") and d["state"] == "succeeded"]
            return rows[0] if rows else None

        decision = await eventually("the interruption's decision succeeded", interrupted, within=90,
                                    on_timeout=system.tails)
        assert [n["name"] for n in jv(decision["nodes"])] == [fake]
        explanation = jv(decision["explanation"])
        assert explanation["interruption"]["instanceId"] == instance_id(fake)
        assert {f["node"] for f in explanation.get("findings", [])} == {fake}, explanation
        assert [r for r in reader.on(TOPIC_INTERRUPTIONS) if r.key == fake.encode() and reader.decodes(r)]
        # the last step is committed with the decision's end and relayed from the executor's outbox after it
        terminated = await eventually("the Terminated event", lambda: [
            e for e in reader.events() if e.decision_id == decision["id"] and e.phase == "Terminated"], within=30)
        assert [e.message for e in terminated] == ["node already gone"]

        # the decisions-api: its events consumer streamed the node's events; its live state has the node
        def streamed() -> list[Any] | None:
            sse.check()
            mine = [e for e in sse.events if e.json().get("decisionId") == decision["id"]]
            return mine if any(e.event == "Terminated" for e in mine) else None

        await eventually("the node's events on GET /v1/events", streamed, within=30)
        explained = await http.get(f"/v1/nodes/{fake}/explain")
        assert explained.status_code == 200, explained.text
        assert explained.json()["source"] == "planner-pass", "the answer is the leader planner's last pass"

        # malformed REST bodies: 422 naming the problem; a valid body afterwards still works
        bad_holds: list[dict[str, Any]] = [
            {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
            {"json": {"scope": "galaxy", "reason": "x"}},
            {"json": {"scope": "node", "target": fake, "reason": "x", "unexpected": 1}},
            {"json": {"scope": "node", "target": fake}},
            {"json": ["scope", "node"]},
        ]
        for body in bad_holds:
            answer = await http.post("/v1/holds", **body)
            assert answer.status_code == 422, (body, answer.status_code, answer.text)
            assert isinstance(answer.json()["detail"], list) and answer.json()["detail"][0]["loc"]
        for content, kind in ((b"kind: [unclosed", "application/yaml"), (b'{"documents": 7}', "application/json"),
                              (b'{"snapshot": "", "surprise": true}', "application/json"),
                              (b"apiVersion: v1\nkind: Node\nmetadata: {name: x}\nstatus: {capacity: {cpu: lots}}\n",
                               "application/yaml")):
            answer = await http.post("/v1/plan", content=content, headers={"Content-Type": kind})
            assert answer.status_code == 422, (content, answer.status_code, answer.text)
        created = await http.post("/v1/holds", json={"scope": "node", "target": fake, "reason": "after bad input"})
        assert created.status_code == 201, created.text
        assert (await http.delete(f"/v1/holds/{created.json()['id']}")).status_code == 204
        system.check_running()
