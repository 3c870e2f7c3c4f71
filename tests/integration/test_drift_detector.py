"""The drift-detector against a real Kafka and a real kube-apiserver + KWOK (DESIGN §1-§2): a KWOK node whose
karpenter.sh/nodepool-hash differs from its NodePool's (the NodePool published to ebb.cluster.objects with
the contracts' codec, the Node by the real cluster-watcher) gives a Drifted finding on ebb.node.findings
and the ebb.sh/drifted annotation on the real Node; giving the node the pool's hash clears both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_NODE_FINDINGS, ClusterObject, NodeFinding, NodeFindingCleared
from ebb_cluster_watcher import app as watcher_app
from ebb_cluster_watcher.settings import Settings as WatcherSettings
from ebb_drift_detector import app
from ebb_drift_detector.detector import ANNOTATION_DRIFTED
from ebb_drift_detector.settings import Settings

from .conftest import KafkaServer, KubernetesCluster
from .system import eventually, run_until_logged

pytestmark = pytest.mark.integration

T = TypeVar("T")
KWOK = "kwok.x-k8s.io/node"
HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION = "karpenter.sh/nodepool-hash-version"


def nodepool(name: str, node_hash: str) -> dict[str, Any]:
    """A trimmed karpenter.sh/v1 NodePool as the cluster-watcher would publish it."""
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "annotations": {HASH: node_hash, HASH_VERSION: "v3"}},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                     "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                 "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never"}},
    }


def kwok_node(name: str, pool: str, node_hash: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK: "fake", HASH: node_hash, HASH_VERSION: "v3"},
            # a node as Karpenter labels it: an instance type offered in its zone and capacity type (the
            # bundled catalog), so that the hash is the only drift
            labels={"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m5.xlarge",
                    "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
                    "karpenter.sh/nodepool": pool, "karpenter.sh/initialized": "true", "type": "kwok"},
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key=KWOK, value="fake", effect="NoSchedule")]),
        status=client.V1NodeStatus(
            capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        ),
    )


async def test_drift_found_annotated_and_cleared_on_real_kafka_and_apiserver(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer
) -> None:
    run = uuid.uuid4().hex[:8]
    prefix = f"dd{run}."
    pool, node_name = f"dd-pool-{run}", f"dd-node-{run}"
    core = client.CoreV1Api(kube_api)
    kubeconfig = str(kubernetes_cluster.kubeconfig)
    stop = asyncio.Event()
    findings: list[NodeFinding | NodeFindingCleared] = []

    async def collect(delivery: Delivery) -> None:
        if isinstance(delivery.message, NodeFinding | NodeFindingCleared) and delivery.key == node_name:
            findings.append(delivery.message)

    async def annotation() -> str | None:
        node = await core.read_node(node_name)
        return (node.metadata.annotations or {}).get(ANNOTATION_DRIFTED)

    await core.create_node(kwok_node(node_name, pool, "old-hash"))
    tasks: list[asyncio.Task[None]] = []
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
            # the NodePool straight onto the compacted topic (no karpenter CRDs in the test cluster)
            await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(
                kind="NodePool", namespace="", name=pool, resource_version="1", object=nodepool(pool, "new-hash")))
            tasks.append(asyncio.create_task(watcher_app.run(
                WatcherSettings(kubeconfig=kubeconfig, kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                                kinds=("Node",), watch_timeout_seconds=10), stop)))
            tasks.append(asyncio.create_task(app.run(
                Settings(kubeconfig=kubeconfig, kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix,
                         group=f"dd-{run}", debounce_seconds=0.5, resync_seconds=5), stop)))
            tasks.append(asyncio.create_task(bus.consume([TOPIC_NODE_FINDINGS], f"dd-read-{run}", collect, stop=stop)))

            raised = await eventually("a Drifted finding on ebb.node.findings", lambda: next(
                (f for f in findings if isinstance(f, NodeFinding) and f.finding == "Drifted"), None))
            assert "nodepool-hash old-hash differs from NodePool" in raised.reason
            assert raised.key() == node_name
            assert await eventually("the ebb.sh/drifted annotation", annotation) == raised.reason

            # fix it: the node gets the pool's hash (as a replacement from the new template would)
            await core.patch_node(node_name, {"metadata": {"annotations": {HASH: "new-hash"}}})
            cleared = await eventually("the cleared finding", lambda: next(
                (f for f in findings if isinstance(f, NodeFindingCleared) and f.finding == "Drifted"), None))
            assert cleared.node == node_name
            assert await eventually("the annotation removed", lambda: _none(annotation())) is True
            assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()]
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 15)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await core.delete_node(node_name)


async def _none(value: Awaitable[str | None]) -> bool:
    return await value is None


async def test_module_runs_logs_json_and_stops_on_sigterm(
    kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer
) -> None:
    run = uuid.uuid4().hex[:8]
    env = {**os.environ, "EBB_DRIFT_DETECTOR_KAFKA_BOOTSTRAP": kafka_server.bootstrap,
           "EBB_DRIFT_DETECTOR_TOPIC_PREFIX": f"ddm{run}.", "EBB_DRIFT_DETECTOR_GROUP": f"ddm-{run}",
           "EBB_DRIFT_DETECTOR_KUBECONFIG": str(kubernetes_cluster.kubeconfig)}
    returncode, lines = await run_until_logged("ebb_drift_detector", env, "drift-detector starting")
    assert returncode == 0
    started = next(line for line in lines if line.get("event") == "drift-detector starting")
    assert started["logger"] == "ebb_drift_detector" and started["level"] == "info" and "timestamp" in started
    assert any(line.get("event") == "drift-detector stopped" for line in lines)
