"""The consolidation-planner against a real Kafka, PostgreSQL and kube-apiserver (docs/architecture.md): two
replicas compete for the coordination.k8s.io/v1 Lease and only one leads; a NodePool and an empty KWOK-style
node published to ebb.cluster.objects (trimmed dicts through the contracts' codec) give a decision that is
proposed, re-validated after the delay and approved in PostgreSQL (with its budget_ledger row), and the
command on ebb.disruption.commands; when the leader stops it releases the Lease and the other replica takes
over. The leader also writes ebb.sh/drifted on a drifted real Node and removes it once the drift is gone."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.adapters.store.decision_store import DecisionFilter, DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_COMMANDS, ClusterObject, DisruptionCommand
from ebb_consolidation_planner import app
from ebb_consolidation_planner.planner import Planner
from ebb_consolidation_planner.settings import Settings
from tests.kit.builders import proposed
from tests.kit.planner import kinds_synced
from tests.kit.servers import KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import as_body, run_until_logged
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

T = TypeVar("T")
KWOK = "kwok.x-k8s.io/node"
CREATED = "2026-01-01T00:00:00Z"


def nodepool(name: str) -> dict[str, Any]:
    """A trimmed karpenter.sh/v1 NodePool as the cluster-watcher publishes it; its nodes never expire (they are
    made long ago, ``CREATED``, past Karpenter's default expireAfter of 720h)."""
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {"requirements": [], "expireAfter": "Never", "nodeClassRef": {
                     "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                 "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                "budgets": [{"nodes": "100%"}]}},
    }


def kwok_node(name: str, pool: str) -> dict[str, Any]:
    """A trimmed, empty KWOK node of ``pool``."""
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": CREATED, "annotations": {KWOK: "fake"},
                     "labels": {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m5.xlarge",
                                "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
                                "karpenter.sh/nodepool": pool, "karpenter.sh/initialized": "true",
                                "karpenter.sh/registered": "true", "type": "kwok"}},
        "spec": {"providerID": f"kwok://{name}",
                 "taints": [{"key": KWOK, "value": "fake", "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def obj(doc: dict[str, Any]) -> ClusterObject:
    return ClusterObject(kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1",
                         object=doc)


async def test_one_leader_approves_an_empty_node_on_real_kafka_postgres_and_apiserver(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    run = uuid.uuid4().hex[:8]
    prefix, cluster, lease = f"cp{run}.", f"cp-{run}", f"ebb-planner-{run}"
    pool, node_name = f"cp-pool-{run}", f"cp-node-{run}"
    await upgrade_async(postgres_server.url)
    store = DecisionStore.from_url(postgres_server.url, cluster)
    leases = client.CoordinationV1Api(kube_api)
    planners: dict[str, Planner] = {}
    stops = {name: asyncio.Event() for name in ("a", "b")}
    tasks: dict[str, asyncio.Task[None]] = {}
    received: list[DisruptionCommand] = []
    reader_stop = asyncio.Event()

    async def collect(delivery: Delivery) -> None:
        if isinstance(delivery.message, DisruptionCommand):
            received.append(delivery.message)

    def settings(name: str) -> Settings:
        return Settings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, group=f"cp-{run}-{name}",
                        database_url=postgres_server.url, cluster=cluster,
                        kubeconfig=str(kubernetes_cluster.kubeconfig), lease_name=lease, lease_namespace="default",
                        identity=f"planner-{name}-{run}", lease_duration_seconds=4, lease_renew_seconds=1,
                        debounce_seconds=0.2, pass_interval_seconds=1, validation_delay_seconds=1)

    def leaders() -> list[str]:
        return [name for name, p in planners.items() if p.leader.is_leader]

    async def approved() -> list[Any] | None:
        items = list((await store.list_decisions(DecisionFilter(state="approved"))).items)
        return items or None

    reader: asyncio.Task[None] | None = None
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            await bus.ensure_topics([TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_COMMANDS])
            reader = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], f"cp-read-{run}", collect,
                                                     stop=reader_stop))
            for name in ("a", "b"):
                started = asyncio.Event()
                tasks[name] = asyncio.create_task(app.run(
                    settings(name), stops[name], started=started,
                    planner_ready=functools.partial(planners.__setitem__, name)))
                await asyncio.wait_for(started.wait(), 30)

            [leader] = await eventually("one leader", lambda: leaders() or None)
            follower = "b" if leader == "a" else "a"
            await asyncio.sleep(1.0)  # the follower keeps trying meanwhile and never leads as well
            assert leaders() == [leader]
            held = await leases.read_namespaced_lease(lease, "default")
            assert held.spec.holder_identity == f"planner-{leader}-{run}"

            # the cluster: a NodePool and an empty node, straight onto the compacted topic, every kind synced
            for message in kinds_synced():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(nodepool(pool)))
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(kwok_node(node_name, pool)))

            [decision] = await eventually("the decision approved in PostgreSQL", approved, within=30)
            assert decision.method == "emptiness" and decision.reason == "Empty" and decision.action == "delete"
            assert decision.nodes[0]["name"] == node_name and decision.nodes[0]["nodePool"] == pool
            found = await store.get_decision(decision.id)
            assert found is not None and [e.type for e in found[1]] == ["Proposed", "Approved"]
            assert [(e.node, e.decision_id) for e in await store.ledger()] == [(node_name, decision.id)]
            [command] = await eventually("the command on ebb.disruption.commands", lambda: received or None)
            assert command.decision_id == decision.id and command.nodes == (node_name,)
            assert command.node_pool == pool and command.key() == pool
            assert planners[leader].approved == 1 and planners[follower].passes == 0

            # the leader stops: it releases the Lease and the follower takes over at once
            stops[leader].set()
            await asyncio.wait_for(tasks[leader], 15)
            await eventually("the follower leading", lambda: leaders() == [follower] or None, within=10)
            assert all(not t.done() for n, t in tasks.items() if n != leader)
            await asyncio.sleep(1.5)  # it plans, but the node has a live decision: nothing new
            assert len((await store.list_decisions()).items) == 1
            stops[follower].set()
            await asyncio.wait_for(tasks[follower], 15)
    finally:
        for stop in stops.values():
            stop.set()
        reader_stop.set()
        pending = [*tasks.values(), *([reader] if reader else [])]
        for task in pending:
            if not task.done():
                task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await store.close()
        with contextlib.suppress(Exception):
            await leases.delete_namespaced_lease(lease, "default")


async def test_module_runs_logs_json_and_stops_on_sigterm(
    kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    run = uuid.uuid4().hex[:8]
    await upgrade_async(postgres_server.url)
    env = {**os.environ, "EBB_CONSOLIDATION_PLANNER_KAFKA_BOOTSTRAP": kafka_server.bootstrap,
           "EBB_CONSOLIDATION_PLANNER_TOPIC_PREFIX": f"cpm{run}.",
           "EBB_CONSOLIDATION_PLANNER_DATABASE_URL": postgres_server.url,
           "EBB_CONSOLIDATION_PLANNER_CLUSTER": f"cpm-{run}",
           "EBB_CONSOLIDATION_PLANNER_LEASE_NAME": f"ebb-planner-m{run}",
           "EBB_CONSOLIDATION_PLANNER_KUBECONFIG": str(kubernetes_cluster.kubeconfig)}
    returncode, lines = await run_until_logged("ebb_consolidation_planner", env, "leadership acquired")
    assert returncode == 0
    started = next(line for line in lines if line.get("event") == "consolidation-planner starting")
    assert started["logger"] == "ebb_consolidation_planner" and started["level"] == "info" and "timestamp" in started
    events = [line.get("event") for line in lines]
    assert "lease released" in events and "consolidation-planner stopped" in events


async def test_concurrent_approvals_stay_within_the_budget_on_postgres(postgres_server: PostgresServer) -> None:
    """Four planners' stores approving four decisions of one pool at once, with a budget of two: the advisory
    lock and the ledger let exactly two through; a fifth decision on an already reserved node is refused."""
    from datetime import UTC, datetime

    run = uuid.uuid4().hex[:8]
    cluster, pool = f"cpl-{run}", "default"
    await upgrade_async(postgres_server.url)
    stores = [DecisionStore.from_url(postgres_server.url, cluster) for _ in range(4)]
    now = datetime.now(UTC)
    try:
        for i in range(4):
            await stores[0].propose(proposed(f"d{i}-{run}", f"n{i}", pool=pool, now=now))
        results = await asyncio.gather(*(
            stores[i].approve(f"d{i}-{run}", node_pools={f"n{i}": pool}, reason="Empty", allowed={pool: 2},
                              counted=(), now=now) for i in range(4)))
        assert sorted(r.approved for r in results) == [False, False, True, True]
        assert all("budget" in r.reason and r.rejected for r in results if not r.approved)
        assert len(await stores[0].ledger()) == 2
        states = sorted([await stores[0].state(f"d{i}-{run}") for i in range(4)], key=str)
        assert states == ["approved", "approved", "rejected", "rejected"]
        # a node whose decision holds budget is not booked twice (another replica's proposal for it)
        taken = next(i for i, r in enumerate(results) if r.approved)
        await stores[0].propose(proposed(f"dx-{run}", f"n{taken}", pool=pool, now=now))
        again = await stores[1].approve(f"dx-{run}", node_pools={f"n{taken}": pool}, reason="Empty",
                                        allowed={pool: 10}, counted=(), now=now)
        assert not again.approved and "already has a live decision" in again.reason
    finally:
        for store in stores:
            await store.close()


async def test_an_interruption_of_a_held_node_outlives_a_holder_that_fails_on_postgres(
        postgres_server: PostgresServer) -> None:
    """The planner's store and the executor's (two instances, as two processes have) on PostgreSQL: an interruption
    of a node an approved decision holds is only noted; when the executor ends that decision failed (its drain
    refused at the start), the interruption's decision is written approved in the same transaction, with its command
    in the executor's outbox, once."""
    import dataclasses
    from datetime import UTC, datetime, timedelta

    from ebb.adapters.store.decision_store import EXECUTOR, command_id
    from ebb.adapters.store.decisions import decision_of
    from ebb.core.decision import State

    run = uuid.uuid4().hex[:8]
    cluster, pool = f"int-{run}", "default"
    await upgrade_async(postgres_server.url)
    planner_store = DecisionStore.from_url(postgres_server.url, cluster)
    executor_store = DecisionStore.from_url(postgres_server.url, cluster)
    now = datetime.now(UTC)
    holder, node = f"d-{run}", f"n-{run}"
    try:
        await planner_store.propose(proposed(holder, node, f"m-{run}", pool=pool, now=now))
        approval = await planner_store.approve(holder, node_pools={node: pool, f"m-{run}": pool}, reason="Empty",
                                               allowed={pool: 10}, counted=(), now=now)
        assert approval.approved
        spot = dataclasses.replace(proposed(f"int-{run}", node, pool=pool, now=now, method="interruption",
                                            reason="Interrupted", text="spot"), explanation={"text": "spot"})
        busy = await planner_store.interrupt(message_id=f"msg-{run}", consumer="interruptions", decision=spot,
                                             now=now)
        assert (busy.outcome, busy.holder) == ("busy", holder)
        [row] = await executor_store.approved()
        command = DisruptionCommand.of_decision(decision_of(row), id=command_id(holder))
        await executor_store.start(command, now)
        later = now + timedelta(seconds=30)
        assert await executor_store.finish(command, State.FAILED, later, why="not started: a PDB allows nothing")
        assert not await executor_store.finish(command, State.FAILED, later)
        assert await planner_store.state(f"int-{run}") is State.APPROVED
        assert await planner_store.live_nodes() == {node: f"int-{run}"}
        commands = [m for m in await executor_store.outbox(unsent=True)
                    if m.origin == EXECUTOR and m.topic == TOPIC_DISRUPTION_COMMANDS]
        assert [m.message_id for m in commands] == [str(command_id(f"int-{run}"))]
    finally:
        await planner_store.close()
        await executor_store.close()


async def _run_one(settings: Settings) -> tuple[asyncio.Event, asyncio.Task[None], list[Planner]]:
    stop, started = asyncio.Event(), asyncio.Event()
    planners: list[Planner] = []
    task = asyncio.create_task(app.run(settings, stop, started=started, planner_ready=planners.append))
    await asyncio.wait_for(started.wait(), 30)
    await eventually("the leadership", lambda: planners[0].leader.is_leader or None)
    return stop, task, planners


async def test_kubernetes_events_appear_on_the_nodes_of_the_real_apiserver(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    """A node the planner may not disrupt (karpenter.sh/do-not-disrupt) gets DisruptionBlocked with the reason,
    an empty node ConsolidationCandidate then ConsolidationApproved: core/v1 Events in `default`, written by
    ebb-consolidation-planner, naming the real Node objects (their uid)."""
    run = uuid.uuid4().hex[:8]
    prefix, cluster, lease, pool = f"cpe{run}.", f"cpe-{run}", f"ebb-planner-e{run}", f"cpe-pool-{run}"
    blocked_name, empty_name = f"cpe-blocked-{run}", f"cpe-empty-{run}"
    await upgrade_async(postgres_server.url)
    core = client.CoreV1Api(kube_api)
    uids: dict[str, str] = {}
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    try:
        docs = {blocked_name: kwok_node(blocked_name, pool), empty_name: kwok_node(empty_name, pool)}
        docs[blocked_name]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
        for name, doc in docs.items():
            created = await core.create_node(as_body(client.V1Node, {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "labels": doc["metadata"]["labels"], "annotations": doc["metadata"]["annotations"]},
                "spec": doc["spec"]}))
            uids[name] = created.metadata.uid
            doc["metadata"]["uid"] = created.metadata.uid
        settings = Settings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, group=f"cpe-{run}",
                            database_url=postgres_server.url, cluster=cluster,
                            kubeconfig=str(kubernetes_cluster.kubeconfig), lease_name=lease,
                            identity=f"planner-e-{run}", lease_duration_seconds=4, lease_renew_seconds=1,
                            debounce_seconds=0.2, pass_interval_seconds=1, validation_delay_seconds=1)
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            await bus.ensure_topics([TOPIC_CLUSTER_OBJECTS])
            stop, task, _ = await _run_one(settings)
            for message in kinds_synced():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(nodepool(pool)))
            for doc in docs.values():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(doc))

            async def events_of(name: str, reason: str) -> list[Any] | None:
                found = await core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
                return [e for e in found.items if e.reason == reason] or None

            [blocked] = await eventually("DisruptionBlocked", lambda: events_of(blocked_name, "DisruptionBlocked"))
            assert blocked.type == "Normal" and "karpenter.sh/do-not-disrupt=true" in blocked.message
            assert blocked.involved_object.kind == "Node" and blocked.involved_object.uid == uids[blocked_name]
            assert blocked.source.component == "ebb-consolidation-planner"
            assert blocked.reporting_component == "ebb-consolidation-planner"
            assert blocked.reporting_instance == f"planner-e-{run}"
            [approved] = await eventually("ConsolidationApproved",
                                          lambda: events_of(empty_name, "ConsolidationApproved"), within=30)
            assert approved.message.startswith(f"Consolidation approved: emptiness delete of {empty_name}")
            [candidate] = await events_of(empty_name, "ConsolidationCandidate") or [None]
            assert candidate is not None and candidate.involved_object.uid == uids[empty_name]
            # later passes do not write the blocked node's event again (de-duplicated)
            await asyncio.sleep(2.5)
            assert len(await events_of(blocked_name, "DisruptionBlocked") or []) == 1
    finally:
        if stop is not None:
            stop.set()
        if task is not None:
            await asyncio.wait_for(task, 15)
        for name in uids:
            with contextlib.suppress(Exception):
                await core.delete_node(name)
        with contextlib.suppress(Exception):
            await client.CoordinationV1Api(kube_api).delete_namespaced_lease(lease, "default")


async def test_interruptions_and_malformed_records_on_real_kafka_and_postgres(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    """A malformed record on each topic the planner consumes goes to its ``.dlq`` and planning goes on; a spot
    interruption on a do-not-disrupt node is approved at once in PostgreSQL and commanded, once even when the
    message is delivered again."""
    from aiokafka import AIOKafkaProducer

    from ebb.contracts import TOPIC_INTERRUPTIONS, DeadLetter, Interruption, dlq_topic
    from ebb_consolidation_planner.planner import command_id

    run = uuid.uuid4().hex[:8]
    prefix, cluster, lease, pool = f"cpi{run}.", f"cpi-{run}", f"ebb-planner-i{run}", f"cpi-pool-{run}"
    held_name, empty_name = f"cpi-held-{run}", f"cpi-empty-{run}"
    await upgrade_async(postgres_server.url)
    store = DecisionStore.from_url(postgres_server.url, cluster)
    topics = [TOPIC_CLUSTER_OBJECTS, TOPIC_INTERRUPTIONS]
    letters: list[DeadLetter] = []
    received: list[DisruptionCommand] = []
    reader_stop = asyncio.Event()
    readers: list[asyncio.Task[None]] = []
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None

    async def collect(delivery: Delivery) -> None:
        if isinstance(delivery.message, DeadLetter):
            letters.append(delivery.message)
        elif isinstance(delivery.message, DisruptionCommand):
            received.append(delivery.message)

    async def decisions(state: str) -> list[Any] | None:
        return list((await store.list_decisions(DecisionFilter(state=state))).items) or None

    settings = Settings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, group=f"cpi-{run}",
                        database_url=postgres_server.url, cluster=cluster,
                        kubeconfig=str(kubernetes_cluster.kubeconfig), lease_name=lease, identity=f"planner-i-{run}",
                        lease_duration_seconds=4,
                        lease_renew_seconds=1, debounce_seconds=0.2, pass_interval_seconds=1,
                        validation_delay_seconds=1, events_enabled=False)
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            await bus.ensure_topics([*topics, TOPIC_DISRUPTION_COMMANDS])
            readers.append(asyncio.create_task(bus.consume(
                [dlq_topic(t) for t in topics] + [TOPIC_DISRUPTION_COMMANDS], f"cpi-read-{run}", collect,
                stop=reader_stop)))
            held = kwok_node(held_name, pool)
            held["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
            for synced in kinds_synced():
                await bus.publish(TOPIC_CLUSTER_OBJECTS, synced)
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(nodepool(pool)))
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(held))
            stop, task, planners = await _run_one(settings)
            producer = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap)
            await producer.start()
            try:
                for topic in topics:
                    await producer.send_and_wait(bus.physical(topic), key=held_name.encode(), value=b"{not json",
                                                 headers=[("ce_type", b"sh.ebb.whatever.v1")])
            finally:
                await producer.stop()
            await eventually("a dead letter per topic", lambda: len(letters) >= len(topics) or None, within=30)
            assert sorted(letter.topic for letter in letters) == sorted(topics)
            assert all(letter.cause == "malformed" and letter.value is not None
                       and letter.value.data == "{not json" for letter in letters)

            # planning goes on: an empty node is approved
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(kwok_node(empty_name, pool)))
            [emptied] = await eventually("the empty node approved", lambda: decisions("approved"), within=30)
            assert emptied.method == "emptiness" and emptied.nodes[0]["name"] == empty_name

            # an interruption on the do-not-disrupt node: at once, outside the pass
            message = Interruption(node=held_name, kind="spot-interruption", instance_id=f"i-{run}", deadline=None,
                                   detail="instance-action=terminate")
            await bus.publish(TOPIC_INTERRUPTIONS, message)
            await bus.publish(TOPIC_INTERRUPTIONS, message)  # delivered again

            async def interrupted() -> list[Any] | None:
                return [d for d in await decisions("approved") or [] if d.method == "interruption"] or None

            [decision] = await eventually("the interruption approved", interrupted, within=30)
            assert decision.reason == "Interrupted" and decision.action == "delete"
            assert decision.nodes[0]["name"] == held_name
            await eventually("its command", lambda: [c for c in received if c.decision_id == decision.id] or None)
            await asyncio.sleep(1.5)  # the second delivery is consumed meanwhile
            assert len(await interrupted() or []) == 1
            [command] = [c for c in received if c.decision_id == decision.id]
            assert command.id == command_id(decision.id) and command.method == "interruption"
            assert planners[0].interrupted == 1
    finally:
        if stop is not None:
            stop.set()
        if task is not None:
            await asyncio.wait_for(task, 15)
        reader_stop.set()
        await asyncio.gather(*readers, return_exceptions=True)
        await store.close()
        with contextlib.suppress(Exception):
            await client.CoordinationV1Api(kube_api).delete_namespaced_lease(lease, "default")


HASH, HASH_VERSION = "karpenter.sh/nodepool-hash", "karpenter.sh/nodepool-hash-version"


async def test_the_leader_sets_and_clears_ebb_sh_drifted_on_the_real_apiserver(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    """A KWOK node (published by the real cluster-watcher) whose nodepool-hash differs from its NodePool's (the
    NodePool published to ebb.cluster.objects: no Karpenter CRDs in the test cluster) gets ebb.sh/drifted with
    the drift reason on the real Node, written by the leader after a pass; giving the node the pool's hash
    removes it. The drifted node is also in the pass's findings."""
    from ebb.core.findings import ANNOTATION_DRIFTED
    from ebb_cluster_watcher import app as watcher_app
    from ebb_cluster_watcher.settings import Settings as WatcherSettings

    run = uuid.uuid4().hex[:8]
    prefix, cluster, lease = f"cpd{run}.", f"cpd-{run}", f"ebb-planner-d{run}"
    pool, node_name = f"cpd-pool-{run}", f"cpd-node-{run}"
    await upgrade_async(postgres_server.url)
    core = client.CoreV1Api(kube_api)
    kubeconfig = str(kubernetes_cluster.kubeconfig)
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    drifting = nodepool(pool)
    drifting["metadata"]["annotations"] = {HASH: "new-hash", HASH_VERSION: "v3"}
    drifting["spec"]["disruption"]["consolidateAfter"] = "Never"
    node = kwok_node(node_name, pool)
    node["metadata"]["annotations"] |= {HASH: "old-hash", HASH_VERSION: "v3"}

    async def annotation() -> str | None:
        found = await core.read_node(node_name)
        return (found.metadata.annotations or {}).get(ANNOTATION_DRIFTED)

    async def removed() -> bool:
        return await annotation() is None

    await core.create_node(as_body(client.V1Node, {
        "apiVersion": "v1", "kind": "Node", "spec": node["spec"], "metadata": {
            "name": node_name, "labels": node["metadata"]["labels"], "annotations": node["metadata"]["annotations"]}}))
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(drifting))
            tasks.append(asyncio.create_task(watcher_app.run(
                WatcherSettings(kubeconfig=kubeconfig, kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                                kinds=("Node",), watch_timeout_seconds=10), stop)))
            settings = Settings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, group=f"cpd-{run}",
                                database_url=postgres_server.url, cluster=cluster, kubeconfig=kubeconfig,
                                lease_name=lease, identity=f"planner-d-{run}", lease_duration_seconds=4,
                                lease_renew_seconds=1, debounce_seconds=0.2, pass_interval_seconds=1,
                                validation_delay_seconds=1, events_enabled=False)
            planner_stop, planner_task, planners = await _run_one(settings)
            tasks.append(planner_task)

            reason = await eventually("the ebb.sh/drifted annotation on the real Node", annotation, within=60)
            assert "nodepool-hash old-hash differs from NodePool" in reason
            assert [f.kind for f in planners[0].findings[node_name] if f.kind == "Drifted"] == ["Drifted"]
            assert planners[0].annotations is not None and planners[0].annotations.failed == 0

            # fix it: the node gets the pool's hash (as a replacement from the new template would)
            await core.patch_node(node_name, {"metadata": {"annotations": {HASH: "new-hash"}}})
            assert await eventually("the annotation removed", removed, within=60) is True
            assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()]
            planner_stop.set()
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 15)
    finally:
        stop.set()
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await core.delete_node(node_name)
        with contextlib.suppress(Exception):
            await client.CoordinationV1Api(kube_api).delete_namespaced_lease(lease, "default")
