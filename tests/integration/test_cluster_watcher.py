"""The cluster-watcher against a real kube-apiserver + KWOK and a real Kafka (docs/architecture.md): a KWOK node
and a pod bound to it appear on ebb.cluster.objects (CloudEvents, binary mode), the snapshot rebuilt
from the topic holds them with the right fields; deleting the pod publishes a tombstone and the pod
leaves the rebuilt snapshot. A custom kind whose CRD is missing at start is picked up once the CRD
is installed, without disturbing the other kinds. ebb's own DisruptionPolicy, with its real CRD, reaches the
rebuilt snapshot and governs its NodePool; ebb's Hold pauses the node it names there, beside the store's holds."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.bus import Delivery, InMemoryBus, KafkaBus
from ebb.adapters.kube import KINDS, Backoff, KindSpec, KubeWatcher
from ebb.adapters.live import live_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.models import Hold as HoldRow
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb.core.plan import make_plan
from ebb_cluster_watcher import app
from ebb_cluster_watcher.publisher import Publisher
from ebb_cluster_watcher.settings import Settings
from tests.kit import builders
from tests.kit.servers import KafkaServer, KubernetesCluster
from tests.kit.system import as_body, create_namespace
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

T = TypeVar("T")
KWOK = "kwok.x-k8s.io/node"
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "crds"


def kwok_node(name: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK: "fake", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            labels={"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m5.xlarge",
                    "karpenter.sh/nodepool": "default", "type": "kwok"},
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key=KWOK, value="fake", effect="NoSchedule")]),
        status=client.V1NodeStatus(
            capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        ),
    )


def bound_pod(name: str, node: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
        spec=client.V1PodSpec(
            node_name=node,
            containers=[
                client.V1Container(
                    name="app",
                    image="registry.k8s.io/pause:3.10",
                    resources=client.V1ResourceRequirements(requests={"cpu": "250m", "memory": "128Mi"}),
                )
            ],
            tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule")],
            automount_service_account_token=False,
        ),
    )


async def test_watcher_publishes_objects_and_tombstones_to_kafka(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer
) -> None:
    run = uuid.uuid4().hex[:8]
    prefix = f"cw{run}."
    node_name, namespace, pod_name = f"cw-node-{run}", f"cw-{run}", f"cw-pod-{run}"
    core = client.CoreV1Api(kube_api)
    settings = Settings(
        kubeconfig=str(kubernetes_cluster.kubeconfig),
        kafka_bootstrap=kafka_server.bootstrap,
        topic_prefix=prefix,
        watch_timeout_seconds=10,
    )
    stop = asyncio.Event()
    watcher = asyncio.create_task(app.run(settings, stop))

    store = SnapshotStore(bundled_catalog=[])
    deliveries: list[Delivery] = []

    async def handle(delivery: Delivery) -> None:
        deliveries.append(delivery)
        await store.handle(delivery)

    consumer_stop = asyncio.Event()
    async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as reader:
        consumer = asyncio.create_task(reader.consume([TOPIC_CLUSTER_OBJECTS], f"rebuild-{run}", handle,
                                                      stop=consumer_stop))
        await create_namespace(kube_api, namespace)
        try:
            await core.create_node(kwok_node(node_name))
            await core.create_namespaced_pod(namespace, bound_pod(pod_name, node_name))

            node_key, pod_key = f"Node//{node_name}", f"Pod/{namespace}/{pod_name}"

            def node_ready() -> bool:
                node = store.get("Node", "", node_name)
                conditions = (node or {}).get("status", {}).get("conditions", [])
                return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

            def pod_running() -> bool:
                pod = store.get("Pod", namespace, pod_name)
                return (pod or {}).get("status", {}).get("phase") == "Running"

            await eventually("the KWOK node, Ready, in the rebuilt snapshot", node_ready)
            await eventually("the pod, Running, in the rebuilt snapshot", pod_running)

            # the records: CloudEvents in binary mode, keyed kind/namespace/name, trimmed objects
            node_record = next(d for d in reversed(deliveries) if d.key == node_key)
            assert node_record.type == "sh.ebb.object.upserted.v1"
            assert node_record.source == "/ebb/cluster-watcher"
            assert isinstance(node_record.message, ClusterObject)
            node_doc = store.get("Node", "", node_name)
            assert node_doc is not None
            assert node_doc["kind"] == "Node" and node_doc["apiVersion"] == "v1"
            assert "managedFields" not in node_doc["metadata"]
            assert "kubectl.kubernetes.io/last-applied-configuration" not in node_doc["metadata"]["annotations"]
            assert node_doc["metadata"]["annotations"][KWOK] == "fake"
            assert set(node_doc["status"]) <= {"capacity", "allocatable", "conditions"}
            assert all("lastHeartbeatTime" not in c for c in node_doc["status"]["conditions"])
            pod_doc = store.get("Pod", namespace, pod_name)
            assert pod_doc is not None
            assert set(pod_doc["status"]) <= {"phase", "conditions", "startTime", "containerStatuses",
                                              "initContainerStatuses"}
            assert pod_doc["spec"]["nodeName"] == node_name

            snapshot = store.snapshot()
            node = next(n for n in snapshot.nodes if n.name == node_name)
            assert node.ready
            assert node.allocatable["cpu"] == 4000
            assert node.labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
            assert any(t.key == KWOK for t in node.taints)
            pod = next(p for p in snapshot.pods if p.name == pod_name and p.namespace == namespace)
            assert pod.node_name == node_name
            assert pod.phase == "Running"
            assert pod.spec.requests["cpu"] == 250
            assert pod.start_time is not None

            # delete the pod: a tombstone, and the pod leaves the rebuilt snapshot
            await core.delete_namespaced_pod(pod_name, namespace, grace_period_seconds=0)
            await eventually("the pod gone from the rebuilt snapshot", lambda: pod_key not in store)
            tombstone = next(d for d in deliveries if d.key == pod_key and d.type == "sh.ebb.object.deleted.v1")
            assert isinstance(tombstone.message, ClusterObject) and tombstone.message.deleted
            assert all(p.name != pod_name for p in store.snapshot().pods)
            assert any(n.name == node_name for n in store.snapshot().nodes)

            await core.delete_node(node_name)
            await eventually("the node gone from the rebuilt snapshot", lambda: node_key not in store)
        finally:
            stop.set()
            consumer_stop.set()
            await asyncio.wait_for(watcher, 15)
            await asyncio.wait_for(consumer, 15)
            with contextlib.suppress(ApiException):
                await core.delete_node(node_name)
            with contextlib.suppress(ApiException):
                await core.delete_namespace(namespace)


@contextlib.asynccontextmanager
async def watcher_running(watcher: KubeWatcher, bus: InMemoryBus, group: str,
                          handle: Callable[[Delivery], Awaitable[None]], kinds: tuple[str, ...]) -> AsyncIterator[None]:
    """``watcher`` running and ``handle`` consuming ebb.cluster.objects on ``bus`` as ``group``, once every one of
    ``kinds`` is watched; both stopped on the way out."""
    stop, consumer_stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    consumer = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], group, handle, stop=consumer_stop))
    try:
        for kind in kinds:
            await eventually(f"the {kind} kind watched", watcher.synced[kind].is_set)
        yield
    finally:
        stop.set()
        consumer_stop.set()
        await asyncio.wait_for(task, 15)
        await asyncio.wait_for(consumer, 15)


async def test_custom_kind_missing_then_installed(kube_api: Any) -> None:
    """A kind whose CRD is not installed is retried without failing the others, and watched once the
    CRD exists (a CRD of a group unique to this test, so the shared cluster is left as it was)."""
    run = uuid.uuid4().hex[:8]
    group = f"cw{run}.ebb.test"
    spec = KindSpec("NodePool", group, "v1", "nodepools", namespaced=False, custom=True)
    bus = InMemoryBus()
    store = SnapshotStore(bundled_catalog=[])
    watcher = KubeWatcher(kube_api, [spec, KindSpec("Node", "", "v1", "nodes", namespaced=False)], Publisher(bus),
                          missing_kind_retry=0.5, watch_timeout=10, backoff=Backoff(initial=0.1, maximum=1))
    extensions = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    crd_name = f"nodepools.{group}"
    try:
        async with watcher_running(watcher, bus, "store", store.handle, ("Node",)):
            assert not watcher.synced["NodePool"].is_set()
            await extensions.create_custom_resource_definition(as_body(client.V1CustomResourceDefinition, {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": crd_name},
                    "spec": {
                        "group": group,
                        "scope": "Cluster",
                        "names": {"plural": "nodepools", "singular": "nodepool", "kind": "NodePool"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
                    },
                }))
            await eventually("the NodePool kind watched", watcher.synced["NodePool"].is_set)

            async def create() -> bool:
                try:
                    await custom.create_cluster_custom_object(
                        group, "v1", "nodepools",
                        {"apiVersion": f"{group}/v1", "kind": "NodePool", "metadata": {"name": "default"},
                         "spec": {"weight": 10}, "status": {"resources": {"cpu": "4"}}},
                    )
                except ApiException as error:
                    if error.status == 404:  # the CRD's endpoint is not served yet
                        return False
                    raise
                return True

            await eventually("the NodePool created", create)
            held = await eventually("the NodePool published", lambda: store.get("NodePool", "", "default"))
            assert held["spec"] == {"weight": 10} and "status" not in held
            await custom.delete_cluster_custom_object(group, "v1", "nodepools", "default")
            await eventually("the NodePool tombstoned", lambda: "NodePool//default" not in store)
    finally:
        with contextlib.suppress(ApiException):
            await extensions.delete_custom_resource_definition(crd_name)


@contextlib.asynccontextmanager
async def watching_ebb_kind(kube_api: Any, kind: str, crd_file: str, store: SnapshotStore,
                            plural: str) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[None]]]:
    """ebb's CRD of ``kind`` installed from deploy/kubernetes (removed after when this installed it), a watcher of
    that kind publishing to an in-memory bus and ``store`` reading it, the kind synced. Yields ``create``, which
    creates a cluster-scoped object of the kind (retrying while a CRD installed a moment ago is not served yet);
    the objects it created are deleted after."""
    crd = yaml.safe_load(CRDS.joinpath(crd_file).read_text())
    extensions = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    installed = False
    try:
        await extensions.read_custom_resource_definition(crd["metadata"]["name"])
    except ApiException as error:
        if error.status != 404:
            raise
        await extensions.create_custom_resource_definition(as_body(client.V1CustomResourceDefinition, crd))
        installed = True
    bus = InMemoryBus()
    watcher = KubeWatcher(kube_api, [KINDS[kind]], Publisher(bus), missing_kind_retry=0.5,
                          watch_timeout=10, backoff=Backoff(initial=0.1, maximum=1))
    created: list[str] = []

    async def create(body: dict[str, Any]) -> None:
        async def created_now() -> bool:
            try:
                await custom.create_cluster_custom_object("ebb.sh", "v1", plural, body)
            except ApiException as error:
                if error.status == 404:  # a CRD installed a moment ago is not served yet
                    return False
                raise
            return True

        await eventually(f"the {kind} created", created_now)
        created.append(body["metadata"]["name"])

    try:
        async with watcher_running(watcher, bus, "store", store.handle, (kind,)):
            yield create
    finally:
        for name in created:
            with contextlib.suppress(ApiException):
                await custom.delete_cluster_custom_object("ebb.sh", "v1", plural, name)
        if installed:
            with contextlib.suppress(ApiException):
                await extensions.delete_custom_resource_definition(crd["metadata"]["name"])


async def test_disruption_policies_are_watched_with_ebbs_own_crd(kube_api: Any) -> None:
    """ebb.sh/v1 DisruptionPolicy with deploy/kubernetes's CRD: a policy created after the watcher started is
    published with the CRD's defaults filled in and governs the NodePool of its name in the rebuilt snapshot
    (the planner's and the decisions-api's view); deleting it gives the NodePool its own block back."""
    store = SnapshotStore(bundled_catalog=[])
    name = f"pool-{uuid.uuid4().hex[:8]}"
    # Karpenter's NodePool as the watcher would have published it, with Karpenter's own disruption off
    store.apply(ClusterObject(kind="NodePool", namespace="", name=name, resource_version="1", object={
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}))

    def pool() -> Any:
        (only,) = store.snapshot().nodepools
        return only

    async with watching_ebb_kind(kube_api, "DisruptionPolicy", "ebb.sh_disruptionpolicies.yaml", store,
                                 "disruptionpolicies") as create:
        assert pool().policy_source == f"NodePool {name}"
        await create({"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": name},
                      "spec": {"consolidateAfter": "5m", "stabilizationWindow": "10m"}})
        held = await eventually("the policy published", lambda: store.get("DisruptionPolicy", "", name))
        assert held["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
                                "stabilizationWindow": "10m", "minimumSavingPerEvictedPod": 0.005,
                                "budgets": [{"nodes": "10%"}]}
        governed = await eventually("the NodePool governed", lambda: pool() if pool().policy_kind
                                    == "DisruptionPolicy" else None)
        assert (governed.consolidate_after, governed.stabilization_window, governed.budgets[0].nodes) == (
            300.0, 600.0, "10%")
        await client.CustomObjectsApi(kube_api).delete_cluster_custom_object("ebb.sh", "v1", "disruptionpolicies",
                                                                             name)
        await eventually("the NodePool's own block again", lambda: pool().policy_source == f"NodePool {name}")


async def test_console_entry_point_publishes_and_stops_on_sigterm(
    kube_api: Any, kubernetes_cluster: KubernetesCluster, kafka_server: KafkaServer
) -> None:
    """``python -m ebb_cluster_watcher``: settings from the environment, JSON logs, graceful SIGTERM; on
    start it reads back what is on the topic, so an object deleted while it was down is tombstoned."""
    import json
    import os
    import signal
    import sys

    run = uuid.uuid4().hex[:8]
    prefix = f"cwm{run}."
    node_name = f"cw-main-{run}"
    core = client.CoreV1Api(kube_api)
    await core.create_node(kwok_node(node_name))
    stale = f"cw-stale-{run}"  # published by an earlier run, deleted from the cluster since
    async with KafkaBus(kafka_server.bootstrap, prefix=prefix) as earlier:
        await earlier.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(
            kind="Node", namespace="", name=stale, resource_version="1",
            object={"apiVersion": "v1", "kind": "Node", "metadata": {"name": stale}}))
    env = {
        **os.environ,
        "EBB_CLUSTER_WATCHER_KUBECONFIG": str(kubernetes_cluster.kubeconfig),
        "EBB_CLUSTER_WATCHER_KAFKA_BOOTSTRAP": kafka_server.bootstrap,
        "EBB_CLUSTER_WATCHER_TOPIC_PREFIX": prefix,
        "EBB_CLUSTER_WATCHER_KINDS": "Node,NodePool",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ebb_cluster_watcher", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    store = SnapshotStore(bundled_catalog=[])
    stop = asyncio.Event()
    try:
        async with KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as reader:
            consumer = asyncio.create_task(reader.consume([TOPIC_CLUSTER_OBJECTS], f"main-{run}", store.handle,
                                                          stop=stop))
            try:
                await eventually("the node published by the process", lambda: f"Node//{node_name}" in store, 30)
                await eventually("the stale node tombstoned", lambda: f"Node//{stale}" not in store)
            finally:
                stop.set()
                await asyncio.wait_for(consumer, 15)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
        assert process.returncode == 0, stderr.decode()
        logs = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
        events = [entry.get("event", "") for entry in logs]
        assert "cluster-watcher starting" in events and "cluster-watcher stopped" in events
        assert any(e["level"] == "warning" and "NodePool" in e["event"] for e in logs)  # no CRD: a warning
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        with contextlib.suppress(ApiException):
            await core.delete_node(node_name)


async def test_holds_are_watched_and_pause_the_nodes_they_name(kube_api: Any) -> None:
    """ebb.sh/v1 Hold with deploy/kubernetes's CRD: a Hold object created after the watcher started reaches the
    planner's rebuilt snapshot and pauses its node, beside a hold of the store (`live_snapshot`, as the planner
    merges them); the node no hold names is emptied; once the Hold object is deleted its node is emptied too."""
    run = uuid.uuid4().hex[:8]
    pool, hold_name = f"pool-{run}", f"maintenance-{run}"
    by_object, by_store, free = (f"{pool}-{n}" for n in ("a", "b", "c"))
    store = SnapshotStore()
    # the NodePool and three idle nodes as the watcher would have published them
    for doc in (builders.nodepool(pool), *(builders.node(n, pool=pool) for n in (by_object, by_store, free))):
        store.apply(ClusterObject(kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1",
                                  object=doc))
    store_hold = HoldRow(id=f"hold-{run}", cluster="test", scope_kind="node", scope=by_store, kind="manual",
                         reason="asked over REST", created_at=builders.NOW, expires_at=None)

    def planned() -> tuple[set[str], dict[str, str]]:
        """The nodes the planner's pass would disrupt, and why each other one of this test's nodes stays."""
        snapshot = live_snapshot(store.snapshot(), holds=[store_hold])
        result = make_plan(snapshot, builders.NOW).first
        commanded = {n for c in result.commands for n in c.nodes}
        return commanded, {b.node: b.reason for b in result.blocked if b.node.startswith(pool)}

    async with watching_ebb_kind(kube_api, "Hold", "ebb.sh_holds.yaml", store, "holds") as create:
        assert planned()[0] == {by_object, free}
        await create({"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": hold_name},
                      "spec": {"scope": "node", "node": by_object, "reason": "kernel upgrade"}})
        await eventually("the Hold published", lambda: store.get("Hold", "", hold_name))
        commanded, why = planned()
        assert commanded == {free}
        assert f"hold {hold_name} (node {by_object})" in why[by_object] and "kernel upgrade" in why[by_object]
        assert f"hold hold-{run} (node {by_store})" in why[by_store] and "asked over REST" in why[by_store]
        await client.CustomObjectsApi(kube_api).delete_cluster_custom_object("ebb.sh", "v1", "holds", hold_name)
        await eventually("the Hold's tombstone", lambda: store.get("Hold", "", hold_name) is None)
        assert planned()[0] == {by_object, free}


@contextlib.asynccontextmanager
async def published_by_watcher(kube_api: Any, kinds: tuple[str, ...],
                               group: str) -> AsyncIterator[dict[str, dict[str, Any]]]:
    """A watcher of ``kinds`` publishing on an in-memory bus, and what reached ebb.cluster.objects (by key, a tombstone
    removing its object), once every kind is watched; both stopped on the way out."""
    bus = InMemoryBus()
    watcher = KubeWatcher(kube_api, [KINDS[k] for k in kinds], Publisher(bus), watch_timeout=10,
                          backoff=Backoff(initial=0.1, maximum=1))
    published: dict[str, dict[str, Any]] = {}

    async def handle(delivery: Delivery) -> None:
        message = delivery.message
        if isinstance(message, ClusterObject):
            if message.object is None:
                published.pop(message.key(), None)
            else:
                published[message.key()] = message.object

    async with watcher_running(watcher, bus, group, handle, kinds):
        yield published


VOLUME_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")


async def test_the_volume_kinds_reach_the_topic_and_the_live_read_intact(kube_api: Any) -> None:
    """A StorageClass with allowed topologies, a zonal PersistentVolume and a claim bound to it (bound by the real
    kube-controller-manager) reach ebb.cluster.objects through the watcher, and ``read_cluster`` (``ebb plan --live``,
    ``ebb record``'s start) reads them, each with what volume topology reads: the class's top-level provisioner,
    binding mode and topologies; the volume's node affinity, CSI driver and class; the claim's volume, class, phase
    and bind-completed annotation. A CSINode (the apiserver takes one for any name) reaches them likewise, its spec
    whole. A recording's starting cluster keeps the same, of the CSINode only its name and its drivers' names and
    attach limits, its name hashed as its node's with --anonymize."""
    from datetime import UTC, datetime

    from ebb.adapters.kube.read import read_cluster
    from ebb.core.recording import Anonymizer, Recorder

    run = uuid.uuid4().hex[:8]
    namespace, class_name, volume, claim = f"vol-{run}", f"zonal-{run}", f"pv-{run}", f"data-{run}"
    csi_name = f"ip-10-0-1-7.{run}.ec2.internal"  # a node's name: the apiserver does not ask for the node
    drivers: list[dict[str, Any]] = [
        {"name": "ebs.csi.aws.com", "nodeID": f"i-{run}", "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
         "allocatable": {"count": 25}},
        {"name": "efs.csi.aws.com", "nodeID": f"i-{run}"}]
    topologies = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                              "values": ["us-east-1a", "us-east-1b"]}]}]
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]}}
    core, storage = client.CoreV1Api(kube_api), client.StorageV1Api(kube_api)
    try:
        async with published_by_watcher(kube_api, VOLUME_KINDS, "volumes") as published:
            await create_namespace(kube_api, namespace)
            await storage.create_storage_class(as_body(client.V1StorageClass, {
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": class_name},
                "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
                "allowedTopologies": topologies, "parameters": {"type": "gp3"}}))
            await core.create_persistent_volume(as_body(client.V1PersistentVolume, {
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": class_name, "persistentVolumeReclaimPolicy": "Retain",
                         "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{run}"}, "nodeAffinity": affinity,
                         "claimRef": {"namespace": namespace, "name": claim}}}))
            await core.create_namespaced_persistent_volume_claim(namespace, as_body(client.V1PersistentVolumeClaim, {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                         "storageClassName": class_name, "volumeName": volume}}))
            await storage.create_csi_node(as_body(client.V1CSINode, {
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": csi_name},
                "spec": {"drivers": drivers}}))
            claim_key = f"PersistentVolumeClaim/{namespace}/{claim}"
            await eventually("the CSINode published", lambda: f"CSINode//{csi_name}" in published)

            def bound() -> bool:
                obj = published.get(claim_key) or {}
                return bool((obj.get("status") or {}).get("phase") == "Bound")

            await eventually("the claim published Bound (kube-controller-manager's binder)", bound)
            read = await read_cluster(kube_api, [KINDS[k] for k in VOLUME_KINDS])
            live = {f"{d['kind']}/{d['metadata'].get('namespace', '')}/{d['metadata']['name']}": d
                    for d in read.documents}
            recorded = Recorder(start=datetime.now(UTC), documents=read.documents).starting_cluster()
            kept = {f"{d['kind']}/{d['metadata'].get('namespace', '')}/{d['metadata']['name']}": d for d in recorded}
            for source, docs in (("the topic", published), ("the live read", live), ("a recording", kept)):
                sc, pv, pvc = (docs[f"StorageClass//{class_name}"], docs[f"PersistentVolume//{volume}"],
                               docs[claim_key])
                assert (sc["apiVersion"], sc["provisioner"], sc["volumeBindingMode"], sc["allowedTopologies"]) == (
                    "storage.k8s.io/v1", "ebs.csi.aws.com", "WaitForFirstConsumer", topologies), source
                assert pv["apiVersion"] == "v1" and pv["spec"]["nodeAffinity"] == affinity, source
                assert (pv["spec"]["csi"]["driver"], pv["spec"]["storageClassName"]) == ("ebs.csi.aws.com", class_name)
                assert (pvc["spec"]["volumeName"], pvc["spec"]["storageClassName"]) == (volume, class_name), source
                assert pvc["status"] == {"phase": "Bound"}, source
                assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes", source
                assert not pvc["metadata"].get("deletionTimestamp") and not pv["metadata"].get("deletionTimestamp")
            assert "parameters" not in kept[f"StorageClass//{class_name}"]  # a recording keeps no class parameters
            assert kept[f"PersistentVolume//{volume}"]["spec"]["csi"] == {"driver": "ebs.csi.aws.com"}  # nor handle
            # the apiserver serves a driver's topologyKeys always
            served = [{"topologyKeys": None, **d} for d in drivers]
            for source, docs in (("the topic", published), ("the live read", live)):
                csi = docs[f"CSINode//{csi_name}"]
                assert (csi["apiVersion"], csi["spec"]["drivers"], "status" in csi) == (
                    "storage.k8s.io/v1", served, False), source
            limits = [{"name": "ebs.csi.aws.com", "allocatable": {"count": 25}}, {"name": "efs.csi.aws.com"}]
            assert kept[f"CSINode//{csi_name}"] == {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                                    "metadata": {"name": csi_name}, "spec": {"drivers": limits}}
            secret = Anonymizer(b"k")
            hidden = Recorder(start=datetime.now(UTC), documents=read.documents, anonymizer=secret).starting_cluster()
            (anonymized,) = [d for d in hidden if d["kind"] == "CSINode" and d["metadata"]["name"] == secret.node_name(
                csi_name)]
            assert anonymized["spec"] == {"drivers": limits}
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_namespaced_persistent_volume_claim(claim, namespace)
        with contextlib.suppress(ApiException):
            await core.delete_persistent_volume(volume)
        with contextlib.suppress(ApiException):
            await storage.delete_storage_class(class_name)
        with contextlib.suppress(ApiException):
            await storage.delete_csi_node(csi_name)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)


async def test_namespaces_reach_the_topic_and_the_live_read_with_their_labels_only(kube_api: Any) -> None:
    """A Namespace (its labels are what a pod affinity term's ``namespaceSelector`` matches) reaches
    ebb.cluster.objects through the watcher, and ``read_cluster`` (``ebb plan --live``, ``ebb record``'s start)
    reads it, with its name and labels (the apiserver's ``kubernetes.io/metadata.name`` among them) and no
    annotations, spec or status; a label changed is published again. The objects as published resolve a pod's
    selector to the namespaces it matches, as the planner's snapshot does; a recording keeps name and labels."""
    from datetime import UTC, datetime

    from ebb.adapters.kube.read import read_cluster
    from ebb.core.recording import Recorder
    from ebb.core.snapshot import parse_documents

    run = uuid.uuid4().hex[:8]
    name = f"ledger-{run}"
    core = client.CoreV1Api(kube_api)
    key = f"Namespace//{name}"
    try:
        async with published_by_watcher(kube_api, ("Namespace",), "namespaces") as published:
            await core.create_namespace(as_body(client.V1Namespace, {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"team": f"data-{run}"}, "annotations": {"owner": "bob"}}}))
            await eventually("the Namespace published", lambda: key in published)
            await core.patch_namespace(name, {"metadata": {"labels": {"team": f"ledger-{run}"}}})
            await eventually("the new label published",
                             lambda: published[key]["metadata"]["labels"].get("team") == f"ledger-{run}")
            read = await read_cluster(kube_api, [KINDS["Namespace"]])
            (live,) = [d for d in read.documents if d["metadata"]["name"] == name]
            for source, doc in (("the topic", published[key]), ("the live read", live)):
                assert set(doc) == {"apiVersion", "kind", "metadata"}, source
                assert set(doc["metadata"]) <= {"name", "labels", "uid", "resourceVersion", "creationTimestamp"}, source
                assert doc["metadata"]["labels"] == {"kubernetes.io/metadata.name": name, "team": f"ledger-{run}"}
            (kept,) = [d for d in Recorder(start=datetime.now(UTC), documents=read.documents).starting_cluster()
                       if d["metadata"]["name"] == name]
            assert kept == {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": name, "labels": {"kubernetes.io/metadata.name": name, "team": f"ledger-{run}"}}}
            away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname",
                "namespaceSelector": {"matchLabels": {"team": f"ledger-{run}"}}}]}}
            snapshot = parse_documents([*published.values(), builders.pod("web", affinity=away)], bundled_catalog=[])
            (web,) = snapshot.pods
            assert web.spec.pod_anti_affinity[0].namespaces == frozenset({name})
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_namespace(name)
