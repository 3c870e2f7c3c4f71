"""The planner's ConflictFree condition on real DisruptionPolicies (a real kube-apiserver with ebb's CRD from
deploy/kubernetes, Kafka and PostgreSQL): with the karpenter provider, a NodePool published to ebb.cluster.objects
that still lets Karpenter disrupt makes its DisruptionPolicy ConflictFree False with the conflict's kind and
sentence, through the status subresource (the spec is untouched), and a policy without a NodePool False as
PolicyWithoutNodePool; once the NodePool is switched over, the condition turns True and the empty node is
proposed. ``kubectl get edp`` shows the condition in its ConflictFree column."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.bus import KafkaBus
from ebb.adapters.store.decision_store import DecisionFilter, DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb_consolidation_planner import app
from ebb_consolidation_planner.planner import Planner
from ebb_consolidation_planner.settings import Settings
from tests.kit.planner import kinds_synced
from tests.kit.servers import KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import as_body
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

CRD = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "crds" / "ebb.sh_disruptionpolicies.yaml"
CREATED = "2026-01-01T00:00:00Z"


def nodepool(name: str, budgets: list[dict[str, str]]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"requirements": [], "expireAfter": "Never", "nodeClassRef": {
                "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                     "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                    "budgets": budgets}}}


def node(name: str, pool: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": CREATED,
                         "labels": {"node.kubernetes.io/instance-type": "m5.xlarge",
                                    "topology.kubernetes.io/zone": "us-east-1a",
                                    "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": pool,
                                    "karpenter.sh/initialized": "true"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def nodeclaim(name: str, node_name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "creationTimestamp": CREATED, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"expireAfter": "Never"},
            "status": {"nodeName": node_name, "providerID": f"aws:///us-east-1a/i-{node_name}",
                       "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": CREATED}]}}


def policy(name: str) -> dict[str, Any]:
    return {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": name},
            "spec": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "100%"}]}}


def obj(doc: dict[str, Any]) -> ClusterObject:
    return ClusterObject(kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1",
                         object=doc)


async def _install_crd(kube_api: Any) -> None:
    """ebb's DisruptionPolicy CRD as deploy/kubernetes has it (replacing an older one another test installed)."""
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    extensions = client.ApiextensionsV1Api(kube_api)
    try:
        current = await extensions.read_custom_resource_definition(crd["metadata"]["name"])
    except ApiException as error:
        if error.status != 404:
            raise
        await extensions.create_custom_resource_definition(as_body(client.V1CustomResourceDefinition, crd))
        return
    crd["metadata"]["resourceVersion"] = current.metadata.resource_version
    await extensions.replace_custom_resource_definition(crd["metadata"]["name"],
                                                        as_body(client.V1CustomResourceDefinition, crd))


async def test_the_conflict_free_condition_on_real_disruption_policies(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer, postgres_server: PostgresServer
) -> None:
    run = uuid.uuid4().hex[:8]
    prefix, cluster, lease = f"cps{run}.", f"cps-{run}", f"ebb-planner-s{run}"
    pool, orphan, node_name = f"cps-pool-{run}", f"cps-gone-{run}", f"cps-node-{run}"
    await upgrade_async(postgres_server.url)
    await _install_crd(kube_api)
    custom = client.CustomObjectsApi(kube_api)

    async def created(body: dict[str, Any]) -> bool:
        try:
            await custom.create_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", body)
        except ApiException as error:
            if error.status == 404:  # the CRD's endpoint is not served yet
                return False
            raise
        return True

    async def condition(name: str) -> dict[str, Any] | None:
        found = await custom.get_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", name)
        return next((c for c in (found.get("status") or {}).get("conditions") or () if c["type"] == "ConflictFree"),
                    None)

    conflicting = nodepool(pool, [{"nodes": "100%"}])
    for name in (pool, orphan):
        await eventually(f"DisruptionPolicy {name} created", functools.partial(created, policy(name)), within=30)
    stop, started = asyncio.Event(), asyncio.Event()
    planners: list[Planner] = []
    task: asyncio.Task[None] | None = None
    store = DecisionStore.from_url(postgres_server.url, cluster)
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            for doc in (conflicting, node(node_name, pool), nodeclaim(f"claim-{run}", node_name, pool),
                        policy(pool), policy(orphan)):
                await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(doc))
            for message in kinds_synced():  # as the cluster-watcher says once it listed each kind
                await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
            settings = Settings(kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, group=f"cps-{run}",
                                database_url=postgres_server.url, cluster=cluster,
                                kubeconfig=str(kubernetes_cluster.kubeconfig), lease_name=lease,
                                identity=f"planner-s-{run}", lease_duration_seconds=4, lease_renew_seconds=1,
                                debounce_seconds=0.2, pass_interval_seconds=1, validation_delay_seconds=1,
                                events_enabled=False, annotate_nodes=False, provider="karpenter")
            task = asyncio.create_task(app.run(settings, stop, started=started, planner_ready=planners.append))
            await asyncio.wait_for(started.wait(), 30)

            refused = await eventually("ConflictFree False on the pool's policy", lambda: condition(pool), within=60)
            assert (refused["status"], refused["reason"]) == ("False", "KarpenterBudgets")
            assert refused["message"].startswith(f"NodePool {pool} still lets Karpenter disrupt its nodes")
            assert refused["lastTransitionTime"]
            gone = await eventually("ConflictFree on the orphan", lambda: condition(orphan), within=30)
            assert (gone["status"], gone["reason"]) == ("False", "PolicyWithoutNodePool")
            stored = await custom.get_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", pool)
            assert stored["spec"]["budgets"] == [{"nodes": "100%"}]  # the status subresource only
            assert not (await store.list_decisions(DecisionFilter())).items  # refused: nothing proposed

            # switched over: Karpenter's budgets 0
            await bus.publish(TOPIC_CLUSTER_OBJECTS, obj(nodepool(pool, [{"nodes": "0"}])))

            async def conflict_free() -> bool:
                held = await condition(pool)
                return held is not None and held["status"] == "True"

            assert await eventually("ConflictFree True", conflict_free, within=60) is True
            assert (await condition(pool) or {})["reason"] == "NoConflict"

            async def proposed() -> list[Any]:
                return list((await store.list_decisions(DecisionFilter())).items)

            [decision] = await eventually("the empty node proposed", proposed, within=60)
            assert [n["name"] for n in decision.nodes] == [node_name]
            assert planners[0].policy_conditions is not None and planners[0].policy_conditions.failed == 0
            assert task is not None and not task.done()
    finally:
        stop.set()
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 15)
        await store.close()
        for name in (pool, orphan):
            with contextlib.suppress(Exception):
                await custom.delete_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies", name)
        with contextlib.suppress(Exception):
            await client.CoordinationV1Api(kube_api).delete_namespaced_lease(lease, "default")
