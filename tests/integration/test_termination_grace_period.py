"""The drain's terminationGracePeriod deadline and stuck-terminating pods against a real kube-apiserver (with
kube-controller-manager's disruption controller), through ``KubeNodeApi``: the API server's own Eviction API
answers the PDB, its own graceful deletion records the grace ebb granted. The node is a plain Node that no
kubelet or KWOK runs, so a deleted pod stays terminating exactly as its deletionTimestamp says; the drainer's
clock runs two minutes ahead, so a pod whose grace ended counts as stuck terminating (Karpenter's
``IsStuckTerminating``: a minute past its deletionTimestamp) at once instead of a minute later."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client

from ebb.adapters.clock import Clock
from ebb.adapters.kube.drain import Drainer, DrainFailed, EvictionBackoff
from ebb.adapters.kube.node_api import KubeNodeApi
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

AHEAD = timedelta(minutes=2)


def plain_node(name: str) -> client.V1Node:
    return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}))


def bare_pod(name: str, node: str, grace: int) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="app", image="registry.k8s.io/pause:3.10")],
                              node_name=node, termination_grace_period_seconds=grace,
                              automount_service_account_token=False))


def drainer(kube_api: Any, eviction_deadline: float) -> Drainer:
    return Drainer(KubeNodeApi(kube_api), disruption_taint=DISRUPTED_TAINT, eviction_deadline=eviction_deadline,
                   backoff=EvictionBackoff(initial=0.2, maximum=1.0), poll_interval=0.2,
                   clock=Clock(lambda: datetime.now(UTC) + AHEAD))


@pytest.fixture
async def cluster(kube_api: Any) -> AsyncIterator[tuple[str, str, Any, Any]]:
    """A namespace and a plain Node, removed afterwards (pods force-deleted: no kubelet finishes them)."""
    run = uuid.uuid4().hex[:8]
    node, namespace = f"tgp-node-{run}", f"tgp-{run}"
    core, policy = client.CoreV1Api(kube_api), client.PolicyV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    await core.create_node(plain_node(node))
    try:
        yield node, namespace, core, policy
    finally:
        for p in (await core.list_namespaced_pod(namespace)).items:
            await core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        await core.delete_node(node)
        await core.delete_namespace(namespace)


async def running_behind_a_pdb(core: Any, policy: Any, namespace: str, name: str, node: str, grace: int) -> None:
    """A pod that looks Running (not Ready: no kubelet) under a PDB that never allows its eviction."""
    await core.create_namespaced_pod(namespace, bare_pod(name, node, grace))
    await core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running"}})
    await policy.create_namespaced_pod_disruption_budget(namespace, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1,
                                              selector=client.V1LabelSelector(match_labels={"app": name}))))

    async def observed() -> bool:
        pdb = await policy.read_namespaced_pod_disruption_budget_status(name, namespace)
        return bool(pdb.status and pdb.status.observed_generation == pdb.metadata.generation)

    await eventually("the PDB's status observed", observed)


async def test_a_pdb_blocked_pod_is_deleted_with_what_is_left_of_the_deadline(
        kube_api: Any, cluster: tuple[str, str, Any, Any]) -> None:
    """Karpenter's DeleteExpiringPods: a pod with 30 s of grace, its eviction refused (429) by its PDB, and a node
    deadline 10 s away: the pod is deleted at once (deadline - 30 s is past), with 9-10 s of grace (what is left,
    not its own 30 s), its PDB bypassed; the drain ends."""
    node, namespace, core, policy = cluster
    await running_behind_a_pdb(core, policy, namespace, "guarded", node, grace=30)
    drain = drainer(kube_api, eviction_deadline=30)
    deadline = drain.clock.now() + timedelta(seconds=10)
    report = await drain.drain(node, deadline=deadline)
    assert report.deleted == [f"{namespace}/guarded"]
    assert report.evicted == []
    pod = await core.read_namespaced_pod("guarded", namespace)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds in (9, 10)


async def test_a_do_not_disrupt_pod_is_not_evicted_but_deleted_at_its_time(
        kube_api: Any, cluster: tuple[str, str, Any, Any]) -> None:
    """Karpenter's IsEvictable: a pod whose karpenter.sh/do-not-disrupt holds is not evicted, though the Eviction
    API would take it (no PDB), but waited for, and deleted at the deadline minus its grace (here 12 - 5 s after
    the drain starts); a pod beside it without the annotation is evicted at once."""
    node, namespace, core, _ = cluster
    kept = bare_pod("kept", node, grace=5)
    kept.metadata.annotations = {"karpenter.sh/do-not-disrupt": "true"}
    await core.create_namespaced_pod(namespace, kept)
    await core.create_namespaced_pod(namespace, bare_pod("web", node, grace=5))
    for name in ("kept", "web"):
        await core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Running"}})
    drain = drainer(kube_api, eviction_deadline=30)
    started = drain.clock.now()
    report = await drain.drain(node, deadline=started + timedelta(seconds=12))
    assert report.evicted == [f"{namespace}/web"]
    assert report.deleted == [f"{namespace}/kept"]
    assert drain.clock.now() - started >= timedelta(seconds=7)
    pod = await core.read_namespaced_pod("kept", namespace)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds in (4, 5)


async def test_without_a_deadline_the_pdb_fails_the_drain_and_nothing_is_deleted(
        kube_api: Any, cluster: tuple[str, str, Any, Any]) -> None:
    node, namespace, core, policy = cluster
    await running_behind_a_pdb(core, policy, namespace, "guarded", node, grace=30)
    with pytest.raises(DrainFailed, match="could not be evicted within 3s"):
        await drainer(kube_api, eviction_deadline=3).drain(node)
    pod = await core.read_namespaced_pod("guarded", namespace)
    assert pod.metadata.deletion_timestamp is None


async def test_a_pod_stuck_terminating_is_neither_evicted_nor_waited_for(
        kube_api: Any, cluster: tuple[str, str, Any, Any]) -> None:
    """Karpenter's IsDrainable/IsStuckTerminating: a pod terminating past its grace (plus a minute) does not hold
    the drain; a pod whose grace has not ended (by the drainer's clock) is waited for."""
    node, namespace, core, _ = cluster
    await core.create_namespaced_pod(namespace, bare_pod("stuck", node, grace=5))
    await core.patch_namespaced_pod_status("stuck", namespace, {"status": {"phase": "Running"}})
    await core.delete_namespaced_pod("stuck", namespace)  # stays terminating: no kubelet
    report = await drainer(kube_api, eviction_deadline=5).drain(node)
    assert report.skipped == {f"{namespace}/stuck": "stuck terminating"}
    assert report.evicted == []

    await core.create_namespaced_pod(namespace, bare_pod("slow", node, grace=600))
    await core.patch_namespaced_pod_status("slow", namespace, {"status": {"phase": "Running"}})
    await core.delete_namespaced_pod("slow", namespace)  # its grace ends in 10 min: 8 min ahead of the clock
    with pytest.raises(DrainFailed, match="still there"):
        await drainer(kube_api, eviction_deadline=2).drain(node)
