"""The termination-executor against a real kube-apiserver + KWOK (with kube-controller-manager's
disruption controller), a real Kafka and a real PostgreSQL: a KWOK node runs three pods of a Deployment
guarded by a PodDisruptionBudget that at first allows no disruption (minAvailable 3), then, once the
executor's evictions are being refused, one at a time (maxUnavailable 1); a second node takes the
replacements. A delete command for the first node is published on ebb.disruption.commands; the
executor taints the node, evicts the pods through the Eviction API (backing off on the 429s the PDB
answers), deletes the node, the decision ends ``succeeded`` and Tainted, Evicted, Terminated arrive in
order on ebb.disruption.events. The same command published again changes nothing."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from sqlalchemy import func, select

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.models import ProcessedMessage
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS, DisruptionCommand, DisruptionEvent
from ebb_termination_executor import app
from ebb_termination_executor.settings import Settings
from tests.kit.servers import KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import run_until_logged
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

T = TypeVar("T")
KWOK = "kwok.x-k8s.io/node"
RUN_LABEL = "ebb.sh/executor-test"


def kwok_node(name: str, run: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK: "fake"},
            labels={"kubernetes.io/hostname": name, "karpenter.sh/nodepool": "default", "type": "kwok",
                    RUN_LABEL: run},
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key=KWOK, value="fake", effect="NoSchedule")]),
        status=client.V1NodeStatus(
            capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        ),
    )


def deployment(name: str, run: str, replicas: int) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="app", image="registry.k8s.io/pause:3.10")],
                    node_selector={RUN_LABEL: run},
                    tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule")],
                    automount_service_account_token=False,
                    termination_grace_period_seconds=0,
                ),
            ),
        ),
    )


async def test_executor_drains_and_deletes_a_node(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    began = time.monotonic()
    run = uuid.uuid4().hex[:8]
    prefix = f"te{run}."
    node, spare, namespace, app_name = f"te-node-{run}", f"te-spare-{run}", f"te-{run}", "web"
    core, apps, policy = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api), client.PolicyV1Api(kube_api)

    await upgrade_async(postgres_server.url)
    store = DecisionStore.from_url(postgres_server.url, f"te-{run}")
    settings = Settings(
        kubeconfig=str(kubernetes_cluster.kubeconfig),
        kafka_bootstrap=kafka_server.bootstrap,
        topic_prefix=prefix,
        database_url=postgres_server.url,
        cluster=store.cluster,
        group=f"executor-{run}",
        eviction_deadline_seconds=40,
        eviction_backoff_initial_seconds=0.2,
        eviction_backoff_max_seconds=1.0,
        poll_interval_seconds=0.2,
    )
    stop, reader_stop = asyncio.Event(), asyncio.Event()
    events: list[DisruptionEvent] = []
    tasks: list[asyncio.Task[Any]] = []

    async def collect(delivery: Delivery) -> None:
        assert isinstance(delivery.message, DisruptionEvent)
        events.append(delivery.message)

    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    try:
        await core.create_node(kwok_node(node, run))
        await apps.create_namespaced_deployment(namespace, deployment(app_name, run, replicas=3))
        await policy.create_namespaced_pod_disruption_budget(
            namespace,
            client.V1PodDisruptionBudget(
                metadata=client.V1ObjectMeta(name=app_name),
                # no disruption allowed at first: a command is refused before it starts; relaxed below
                spec=client.V1PodDisruptionBudgetSpec(
                    min_available=3, selector=client.V1LabelSelector(match_labels={"app": app_name})
                ),
            ),
        )

        async def pods_running_on(where: str, count: int) -> list[client.V1Pod] | None:
            pods = (await core.list_namespaced_pod(namespace, label_selector=f"app={app_name}")).items
            ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == where
                  and p.metadata.deletion_timestamp is None]
            return ok if len(ok) == count else None

        originals = await eventually("3 pods Running on the node", lambda: pods_running_on(node, 3))

        async def pdb_allows(allowed: int) -> bool:
            pdb = await policy.read_namespaced_pod_disruption_budget_status(app_name, namespace)
            s = pdb.status
            return bool(s and s.observed_generation == pdb.metadata.generation and s.current_healthy == 3
                        and s.disruptions_allowed == allowed)

        await eventually("PDB status: 3 healthy, no disruption allowed", lambda: pdb_allows(0))
        # the replacements' node, created after the pods were placed
        await core.create_node(kwok_node(spare, run))

        decision_id = f"dec-{run}"
        await store.add_decision(decision_id=decision_id, method="emptiness", reason="Empty", action="delete",
                                 nodes=[{"name": node, "nodePool": "default"}], replacements=[],
                                 created_at=datetime.now(UTC), state="approved")
        command = DisruptionCommand(
            decision_id=decision_id, node_pool="default", method="single-node-consolidation", reason="Underutilized",
            action="delete", nodes=(node,), replacements=(), savings_per_hour=0.1,
            explanation="its pods fit elsewhere", approved_at=datetime.now(UTC),
        )

        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            await bus.ensure_topics([TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS])
            reader = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_EVENTS], f"reader-{run}", collect,
                                                     stop=reader_stop))
            executor_task = asyncio.create_task(app.run(settings, stop))
            tasks += [reader, executor_task]
            # the PDB allows no eviction now: asked with dry-run Evictions, the command fails with nothing done
            blocked_id = f"blocked-{run}"
            await store.add_decision(decision_id=blocked_id, method="emptiness", reason="Empty", action="delete",
                                     nodes=[{"name": node, "nodePool": "default"}], replacements=[],
                                     created_at=datetime.now(UTC), state="approved")
            await bus.publish(TOPIC_DISRUPTION_COMMANDS, command.model_copy(update={
                "id": uuid.uuid4(), "decision_id": blocked_id}))

            async def refused() -> list[DisruptionEvent]:
                return [e for e in events if e.decision_id == blocked_id]

            [failed] = await eventually("the blocked command Failed", refused, within=30)
            assert failed.phase == "Failed" and "not started" in failed.message
            assert "disruption budget" in failed.message
            taints = (await core.read_node(node)).spec.taints or []
            assert all(t.key != "karpenter.sh/disrupted" for t in taints)
            assert await pods_running_on(node, 3) is not None  # nothing evicted
            assert await store.list_holds(datetime.now(UTC)) == []  # nothing done, nothing held

            # one pod may go at a time (maxUnavailable 1): the command starts, and the drain goes at the PDB's pace
            await policy.patch_namespaced_pod_disruption_budget(
                app_name, namespace, {"spec": {"minAvailable": None, "maxUnavailable": 1}}
            )
            await eventually("PDB status: one disruption allowed", lambda: pdb_allows(1))
            await bus.publish(TOPIC_DISRUPTION_COMMANDS, command)

            async def terminated() -> bool:
                if executor_task.done():
                    executor_task.result()  # raise what stopped it
                return any(e.phase in ("Terminated", "Failed") for e in events if e.decision_id == decision_id)

            await eventually("the node Terminated", terminated, within=45)
            mine = [e for e in events if e.decision_id == decision_id]
            assert [(e.node, e.phase) for e in mine] == [(node, "Tainted"), (node, "Evicted"), (node, "Terminated")]
            evicted = mine[1].message
            assert evicted.startswith("evicted 3 pod(s) after "), evicted
            assert evicted.removeprefix("evicted 3 pod(s) after ").split()[0].isdigit(), evicted  # refusals, if any

            # the node is gone, its pods were evicted (never force-deleted) and replaced on the spare node
            with pytest.raises(ApiException) as missing:
                await core.read_node(node)
            assert missing.value.status == 404
            await eventually("3 replacements Running on the spare node", lambda: pods_running_on(spare, 3))
            names = {p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items}
            assert not names & {p.metadata.name for p in originals}

            # Karpenter's terminator's Evicted event on each evicted pod, in the pod's namespace, naming the
            # real Pod (its uid, so kubectl describe pod lists it)
            async def evicted_events() -> list[Any] | None:
                found = (await core.list_namespaced_event(namespace)).items
                mine = [e for e in found if e.reason == "Evicted" and e.source.component == "ebb-termination-executor"]
                return mine if len(mine) == 3 else None

            written = await eventually("an Evicted event per evicted pod", evicted_events, within=15)
            assert sorted((e.involved_object.kind, e.involved_object.name, e.involved_object.uid) for e in written) == \
                sorted(("Pod", p.metadata.name, p.metadata.uid) for p in originals)
            assert {(e.type, e.message) for e in written} == {("Normal", "Evicted pod: Underutilized")}

            found = await store.get_decision(decision_id)
            assert found is not None
            decision, timeline = found
            assert decision.state == "succeeded"
            assert decision.started_at is not None and decision.finished_at is not None
            assert [e.type for e in timeline] == ["Tainted", "Evicted", "Terminated"]

            # the same command again does nothing; a later command on the same key (the node pool, so
            # the same partition) shows that the duplicate was consumed before it
            await bus.publish(TOPIC_DISRUPTION_COMMANDS, command)
            sentinel = command.model_copy(update={"id": uuid.uuid4(), "decision_id": f"sentinel-{run}",
                                                  "nodes": (f"te-absent-{run}",)})
            await bus.publish(TOPIC_DISRUPTION_COMMANDS, sentinel)

            async def sentinel_done() -> bool:
                return any(e.decision_id == sentinel.decision_id for e in events)

            await eventually("the sentinel command's event", sentinel_done, within=20)
            assert [(e.node, e.phase, e.message) for e in events if e.decision_id == sentinel.decision_id] == [
                (f"te-absent-{run}", "Terminated", "node already gone")
            ]
            assert len([e for e in events if e.decision_id == decision_id]) == 3
            found = await store.get_decision(decision_id)
            assert found is not None and found[0].state == "succeeded" and len(found[1]) == 3
            async with store.engine.connect() as connection:
                processed = await connection.scalar(
                    select(func.count()).select_from(ProcessedMessage).where(
                        ProcessedMessage.consumer == settings.group, ProcessedMessage.message_id == str(command.id)
                    )
                )
            assert processed == 1

            stop.set()
            executor = await asyncio.wait_for(executor_task, 15)
            assert executor is not None  # enforce mode: app.run returns its executor
            assert (executor.succeeded, executor.failed, executor.duplicates) == (2, 1, 1)
            reader_stop.set()
            await reader
        assert time.monotonic() - began < 60
    finally:
        stop.set()
        reader_stop.set()
        if tasks:
            await asyncio.wait(tasks, timeout=15)
        await store.close()
        await core.delete_namespace(namespace)
        for name in (node, spare):
            try:
                await core.delete_node(name)
            except ApiException as e:
                if e.status != 404:
                    raise


async def test_module_logs_json_and_stops_on_sigterm(
    kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    run = uuid.uuid4().hex[:8]
    env = {
        **os.environ,
        "EBB_TERMINATION_EXECUTOR_KUBECONFIG": str(kubernetes_cluster.kubeconfig),
        "EBB_TERMINATION_EXECUTOR_KAFKA_BOOTSTRAP": kafka_server.bootstrap,
        "EBB_TERMINATION_EXECUTOR_TOPIC_PREFIX": f"tm{run}.",
        "EBB_TERMINATION_EXECUTOR_DATABASE_URL": postgres_server.url,
        "EBB_TERMINATION_EXECUTOR_GROUP": f"executor-{run}",
    }
    # a second after the start it is consuming
    returncode, lines = await run_until_logged("ebb_termination_executor", env, "termination-executor starting",
                                               settle=1.0)
    assert returncode == 0
    stopped = [entry for entry in lines if entry.get("event") == "termination-executor stopped"]
    assert stopped and stopped[0]["level"] == "info" and "timestamp" in stopped[0]
