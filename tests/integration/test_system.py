"""The system's "done when" tests: the six services as separate ``python -m`` processes on real Kafka,
PostgreSQL, kube-apiserver + KWOK (with kube-controller-manager and kube-scheduler) and moto SQS.

1. End to end: a NodePool and three KWOK nodes whose Deployment pods (placed by kube-scheduler) fit on two
   of them → one consolidation decision, in PostgreSQL and over REST with its explanation; the node drained
   through the Eviction API (its pod recreated elsewhere by the ReplicaSet) and deleted; the decision
   ``succeeded``; Proposed, Approved, Tainted, Evicted, Terminated in order on ebb.disruption.events (read
   by a plain aiokafka consumer) and on ``GET /v1/events``.
2. Crash safety: the termination-executor SIGKILLed in the middle of a drain, and the consolidation-planner
   SIGKILLed between a proposal and its approval, then restarted: each decision completes once, the budget
   is never overrun, no pod is evicted twice, no node is left tainted without a live decision.
3. Bad input: malformed records on every consumed topic go to ``<topic>.dlq`` and the consumers keep
   working; malformed REST bodies get 422.

Each test makes its own names from a random run id (topic prefix, database, cluster, Lease, NodePool,
nodes, namespace) and removes what it created. On failure every service's log tail is printed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_INTERRUPTIONS,
    TOPIC_NODE_FINDINGS,
)

from .conftest import AwsEndpoint, KafkaServer, KubernetesCluster, PostgresServer
from .system import (
    DISRUPTED_TAINT,
    PodTracker,
    Sandbox,
    SseReader,
    TopicReader,
    create_nodepool,
    deployment,
    eventually,
    has_taint,
    jv,
    kwok_node,
    nodepool,
    nodes_ready,
    pods_of,
    running,
    sandbox,
)

pytestmark = pytest.mark.integration

LIFECYCLE = ["Proposed", "Approved", "Tainted", "Evicted", "Terminated"]
CONSOLIDATION = ("single-node-consolidation", "multi-node-consolidation")
ALL_TOPICS = [TOPIC_CLUSTER_OBJECTS, TOPIC_NODE_FINDINGS, TOPIC_INTERRUPTIONS, TOPIC_DISRUPTION_COMMANDS,
              TOPIC_DISRUPTION_EVENTS]


@pytest.fixture
async def box(kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer,
              postgres_server: PostgresServer, aws_endpoint: AwsEndpoint, tmp_path: Path) -> AsyncIterator[Sandbox]:
    async with sandbox(kube_api, kafka_server.bootstrap, postgres_server.url, str(kubernetes_cluster.kubeconfig),
                       aws_endpoint.endpoint_url, aws_endpoint.region, tmp_path / "logs") as made:
        yield made


async def node_gone(core: client.CoreV1Api, name: str) -> bool:
    try:
        await core.read_node(name)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


async def test_end_to_end_consolidation(kube_api: Any, box: Sandbox) -> None:
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
                base_url=system.api, headers=system.auth, timeout=30) as http:
        sse = await open_sse(system)
        try:
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
            # the planner's entries are the decision's (no node), the executor's name the node
            assert {n for t, n in timeline if t not in ("Proposed", "Approved")} == {target}, timeline

            # its pod was evicted (gone, never force-deleted) and recreated by the ReplicaSet on another node
            async def replaced() -> list[client.V1Pod] | None:
                now = running(await pods_of(kube_api, ns, "web"))
                return now if len(now) == 3 and target not in {p.spec.node_name for p in now} else None

            after = await eventually("3 web pods Running on the other nodes", replaced, within=90)
            assert original[target] not in {p.metadata.uid for p in after}
            assert {original[n] for n in box.nodes if n != target} <= {p.metadata.uid for p in after}
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
            if sse is not None:
                await check_sse(sse, records, decision_id, target)

            # the other nodes stay, untainted; nothing else was decided
            for name in box.nodes:
                if name != target:
                    assert not has_taint(await core.read_node(name), DISRUPTED_TAINT)
            assert [d["id"] for d in await box.decisions()] == [decision_id]
        finally:
            if sse is not None:
                await sse.__aexit__(None, None, None)


async def open_sse(system: Any) -> SseReader | None:
    """The subscription to GET /v1/events; None while the decisions-api does not serve it yet."""
    async with httpx.AsyncClient(base_url=system.api, timeout=10) as http:
        spec = (await http.get("/openapi.json")).json()
    if "/v1/events" not in spec.get("paths", {}):
        return None
    reader = SseReader(f"{system.api}/v1/events", system.auth)
    await reader.__aenter__()
    assert reader.status == 200 and (reader.content_type or "").startswith("text/event-stream")
    return reader


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
