"""A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with KWOK
playing the kubelet: fake nodes become Ready, pods get scheduled and Running, PodDisruptionBudgets
get their status from the disruption controller and guard the Eviction API."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

T = TypeVar("T")

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SMOKE_LABEL = "ebb.sh/smoke"


def kwok_node(name: str, run: str) -> client.V1Node:
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations={KWOK_ANNOTATION: "fake"},
            labels={
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "type": "kwok",
                SMOKE_LABEL: run,
            },
        ),
        spec=client.V1NodeSpec(taints=[client.V1Taint(key=KWOK_ANNOTATION, value="fake", effect="NoSchedule")]),
        status=client.V1NodeStatus(
            capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        ),
    )


def node_ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


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
                    containers=[
                        client.V1Container(
                            name="app",
                            image="registry.k8s.io/pause:3.10",
                            resources=client.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
                        )
                    ],
                    node_selector={SMOKE_LABEL: run},
                    tolerations=[client.V1Toleration(key=KWOK_ANNOTATION, operator="Exists", effect="NoSchedule")],
                    automount_service_account_token=False,
                ),
            ),
        ),
    )


@pytest.fixture(scope="module")
def run_id() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
async def namespace(kube_api: Any, run_id: str) -> AsyncIterator[str]:
    core = client.CoreV1Api(kube_api)
    name = f"ebb-smoke-{run_id}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    await core.delete_namespace(name)


@pytest.fixture(scope="module")
async def ready_node(kube_api: Any, run_id: str) -> AsyncIterator[str]:
    """A KWOK node for the module's pods, Ready."""
    core = client.CoreV1Api(kube_api)
    name = f"kwok-{run_id}"
    await core.create_node(kwok_node(name, run_id))

    async def ready() -> bool:
        return node_ready(await core.read_node(name))

    await eventually(f"node {name} Ready", ready)
    yield name
    await core.delete_node(name)


async def test_kwok_node_becomes_ready(kube_api: Any) -> None:
    core = client.CoreV1Api(kube_api)
    name = f"kwok-ready-{uuid.uuid4().hex[:6]}"
    await core.create_node(kwok_node(name, "ready-test"))
    try:

        async def ready() -> client.V1Node | None:
            node = await core.read_node(name)
            return node if node_ready(node) else None

        node = await eventually(f"node {name} Ready", ready, within=60)
        assert node.status.allocatable["cpu"] == "4"

        # KWOK keeps the node's lease alive, as a kubelet would
        coordination = client.CoordinationV1Api(kube_api)

        async def lease() -> client.V1Lease | None:
            try:
                return await coordination.read_namespaced_lease(name, "kube-node-lease")
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

        held = await eventually(f"lease of {name}", lease, within=60)
        assert held.spec.renew_time is not None
    finally:
        await core.delete_node(name)


async def test_deployment_pods_scheduled_and_running(
    kube_api: Any, namespace: str, ready_node: str, run_id: str
) -> None:
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    name = "web"
    await apps.create_namespaced_deployment(namespace, deployment(name, run_id, replicas=3))

    async def running() -> list[client.V1Pod] | None:
        pods = (await core.list_namespaced_pod(namespace, label_selector=f"app={name}")).items
        ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
        return ok if len(ok) == 3 else None

    pods = await eventually("3 Running pods", running)
    # bound by kube-scheduler to the KWOK node, with an IP and Ready from KWOK's pod stages
    assert {p.spec.node_name for p in pods} == {ready_node}
    assert all(p.status.pod_ip for p in pods)
    assert all(any(c.type == "Ready" and c.status == "True" for c in p.status.conditions) for p in pods)

    async def available() -> bool:
        status = (await apps.read_namespaced_deployment_status(name, namespace)).status
        return status.available_replicas == 3

    await eventually("deployment available", available)


async def test_pdb_status_and_eviction(kube_api: Any, namespace: str, ready_node: str, run_id: str) -> None:
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    policy = client.PolicyV1Api(kube_api)
    name = "guarded"
    await apps.create_namespaced_deployment(namespace, deployment(name, run_id, replicas=2))
    await policy.create_namespaced_pod_disruption_budget(
        namespace,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=2, selector=client.V1LabelSelector(match_labels={"app": name})
            ),
        ),
    )

    async def pdb_status(allowed: int) -> client.V1PodDisruptionBudgetStatus | None:
        pdb = await policy.read_namespaced_pod_disruption_budget_status(name, namespace)
        status = pdb.status
        if (
            status is not None
            and status.observed_generation == pdb.metadata.generation
            and status.current_healthy == 2
            and status.disruptions_allowed == allowed
        ):
            return status
        return None

    # kube-controller-manager's disruption controller fills the status
    status = await eventually("PDB status with 2 healthy, 0 allowed", lambda: pdb_status(0))
    assert status.desired_healthy == 2 and status.expected_pods == 2

    pods = (await core.list_namespaced_pod(namespace, label_selector=f"app={name}")).items
    victim = pods[0].metadata.name

    def eviction() -> client.V1Eviction:
        return client.V1Eviction(metadata=client.V1ObjectMeta(name=victim, namespace=namespace))

    with pytest.raises(ApiException) as refused:
        await core.create_namespaced_pod_eviction(victim, namespace, eviction())
    assert refused.value.status == 429
    assert "disruption budget" in (refused.value.body or "")

    # relax the budget: one pod may go
    await policy.patch_namespaced_pod_disruption_budget(name, namespace, {"spec": {"minAvailable": 1}})
    await eventually("PDB allowing 1 disruption", lambda: pdb_status(1))
    await core.create_namespaced_pod_eviction(victim, namespace, eviction())

    async def gone() -> bool:
        try:
            pod = await core.read_namespaced_pod(victim, namespace)
        except ApiException as error:
            if error.status == 404:
                return True
            raise
        return pod.metadata.deletion_timestamp is not None

    await eventually(f"pod {victim} evicted", gone, within=60)
