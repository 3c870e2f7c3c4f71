"""The drain's order and what it leaves alone, against a real kube-apiserver and KWOK (Karpenter's terminator
suite, ``pkg/controllers/node/termination``): on a KWOK node, pods are evicted through the Eviction API group by
group, non-critical before critical and DaemonSet pods after the rest of their tier; a pod tolerating the
disruption taint is left alone, while one tolerating only ``node.kubernetes.io/unschedulable`` is evicted."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.kube.drain import EXCLUDE_FROM_LOAD_BALANCERS, Drainer, EvictionBackoff
from ebb.adapters.kube.node_api import EvictionResult, KubeNodeApi
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT
from tests.kit.system import KWOK, kwok_node
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

SYSTEM = "kube-system"


def _pod(name: str, node: str, *, priority_class: str | None = None, owner: Any = None,
         tolerations: list[client.V1Toleration] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"ebb.sh/drain-order": name},
                                     owner_references=[owner] if owner is not None else None),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="app", image="registry.k8s.io/pause:3.10")],
            node_name=node, priority_class_name=priority_class, termination_grace_period_seconds=0,
            automount_service_account_token=False,
            tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule"),
                         *(tolerations or [])]))


async def _daemonset(apps: Any, namespace: str, name: str) -> client.V1OwnerReference:
    """A DaemonSet that runs nowhere (its node selector matches no node), to own a pod made by hand; not its
    controller, so the DaemonSet controller leaves that pod alone, and the garbage collector keeps it."""
    labels = {"ebb.sh/drain-order-ds": name}
    made = await apps.create_namespaced_daemon_set(namespace, client.V1DaemonSet(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DaemonSetSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(node_selector={"ebb.sh/no-such-node": "true"},
                                      containers=[client.V1Container(name="app",
                                                                     image="registry.k8s.io/pause:3.10")])))))
    return client.V1OwnerReference(api_version="apps/v1", kind="DaemonSet", name=name, uid=made.metadata.uid,
                                   controller=False)


async def test_pods_are_evicted_tier_by_tier_and_taint_tolerating_pods_are_left(kube_api: Any) -> None:
    run = uuid.uuid4().hex[:8]
    node, namespace = f"drain-order-{run}", f"drain-order-{run}"
    core: Any = client.CoreV1Api(kube_api)
    apps: Any = client.AppsV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    await core.create_node(kwok_node(node, "default", run))
    system_pods = [f"critical-{run}", f"critical-ds-{run}"]
    daemonsets = [(namespace, f"ds-{run}"), (SYSTEM, f"critical-ds-{run}")]
    try:
        ds = await _daemonset(apps, namespace, f"ds-{run}")
        critical_ds = await _daemonset(apps, SYSTEM, f"critical-ds-{run}")
        await core.create_namespaced_pod(namespace, _pod("app", node))
        await core.create_namespaced_pod(namespace, _pod("unschedulable-only", node, tolerations=[
            client.V1Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")]))
        await core.create_namespaced_pod(namespace, _pod("tolerant", node, tolerations=[
            client.V1Toleration(key=DISRUPTED_TAINT["key"], operator="Exists", effect="NoSchedule")]))
        await core.create_namespaced_pod(namespace, _pod("ds-pod", node, owner=ds))
        await core.create_namespaced_pod(SYSTEM, _pod(system_pods[0], node, priority_class="system-cluster-critical"))
        await core.create_namespaced_pod(SYSTEM, _pod(system_pods[1], node, priority_class="system-cluster-critical",
                                                      owner=critical_ds))

        async def running() -> bool:
            pods = [*(await core.list_namespaced_pod(namespace)).items,
                    *[p for p in (await core.list_namespaced_pod(SYSTEM)).items if p.metadata.name in system_pods]]
            return len(pods) == 6 and all(p.status.phase == "Running" for p in pods)

        await eventually("the six pods running on the KWOK node", running, within=90)
        drainer = Drainer(KubeNodeApi(kube_api), disruption_taint=DISRUPTED_TAINT, eviction_deadline=60,
                          backoff=EvictionBackoff(initial=0.2, maximum=1.0), poll_interval=0.2)
        assert await drainer.taint(node) is True
        order: list[str] = []
        report = await drainer.drain(node, on_evicted=lambda pod: order.append(pod.key))

        tiers = [{f"{namespace}/app", f"{namespace}/unschedulable-only"}, {f"{namespace}/ds-pod"},
                 {f"{SYSTEM}/{system_pods[0]}"}, {f"{SYSTEM}/{system_pods[1]}"}]
        assert len(order) == 5
        assert set(order[:2]) == tiers[0]
        assert [{name} for name in order[2:]] == tiers[1:]  # non-critical DaemonSet, critical, critical DaemonSet
        assert report.skipped == {f"{namespace}/tolerant": f"tolerates {DISRUPTED_TAINT['key']}"}
        left = [p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items]
        assert left == ["tolerant"]  # still on the node, never evicted
    finally:
        for name in system_pods:
            with contextlib.suppress(ApiException):
                await core.delete_namespaced_pod(name, SYSTEM, grace_period_seconds=0)
        for ns, name in daemonsets:
            with contextlib.suppress(ApiException):
                await apps.delete_namespaced_daemon_set(name, ns)
        with contextlib.suppress(ApiException):
            await core.delete_node(node)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)


async def test_an_eviction_names_its_pod_and_a_late_pod_is_drained_too(kube_api: Any) -> None:
    """Against the real Eviction API: an eviction that names another UID than the pod of that name has is refused
    (409) and read as gone, the pod left running (Karpenter's eviction queue sends the same precondition); and a
    pod bound to the node after the drain's first list (created with its nodeName) is evicted on the next look."""
    run = uuid.uuid4().hex[:8]
    node, namespace = f"drain-late-{run}", f"drain-late-{run}"
    core: Any = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    await core.create_node(kwok_node(node, "default", run))
    try:
        await core.create_namespaced_pod(namespace, _pod("app", node))
        api = KubeNodeApi(kube_api)
        result, message = await api.evict(namespace, "app", uid="not-its-uid")
        assert result == "gone", message
        assert "precondition" in message.lower(), message
        assert [p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items] == ["app"]

        original = api.evict

        async def create_late_pod_on_first_eviction(namespace: str, name: str, *, uid: str = "",
                                                    dry_run: bool = False) -> tuple[EvictionResult, str]:
            if name == "app":  # in the pod's namespace, the test's
                await core.create_namespaced_pod(namespace, _pod("late", node))
            return await original(namespace, name, uid=uid, dry_run=dry_run)

        api.evict = create_late_pod_on_first_eviction  # type: ignore[method-assign]
        drainer = Drainer(api, disruption_taint=DISRUPTED_TAINT, eviction_deadline=60,
                          backoff=EvictionBackoff(initial=0.2, maximum=1.0), poll_interval=0.2)
        assert await drainer.taint(node) is True
        labels = (await core.read_node(node)).metadata.labels
        assert labels[EXCLUDE_FROM_LOAD_BALANCERS] == "ebb"  # out of load balancers while it drains
        report = await drainer.drain(node)
        assert report.evicted == [f"{namespace}/app", f"{namespace}/late"]
        assert (await core.list_namespaced_pod(namespace)).items == []
    finally:
        with contextlib.suppress(ApiException):
            await core.delete_node(node)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)
