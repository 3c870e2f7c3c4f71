"""ebb's termination finalizer against a real kube-apiserver (with kube-controller-manager's disruption
controller), kube-scheduler and KWOK: `kubectl delete node` on a node ebb launched (``KwokLauncher``: it carries
``ebb.sh/termination`` and the decision's ``ebb.sh/decision-id``) takes the graceful path, the pods evicted
through the Eviction API one at a time as their PDB allows and rescheduled on another node, the finalizer removed
last, the Node gone; a deleted node that does not carry ebb's finalizer is left alone."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.clock import Clock
from ebb.adapters.kube.drain import Drainer, EvictionBackoff
from ebb.adapters.kube.karpenter import KubeNodeClaimApi
from ebb.adapters.kube.launch import EBB_TERMINATION_FINALIZER, KwokLauncher, catalog_types
from ebb.adapters.kube.node_api import KubeNodeApi
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT, NodeProvider
from ebb.contracts import Replacement
from ebb_termination_executor.finalizer import Finalizer
from tests.kit.system import (
    create_nodepool,
    delete_nodepool,
    deployment,
    install_karpenter_crds,
    kwok_node,
    nodepool,
    remove_crds,
)
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration


async def _pods_on(core: Any, namespace: str, node: str) -> list[Any]:
    pods = (await core.list_namespaced_pod(namespace)).items
    return [p for p in pods if p.spec.node_name == node and p.metadata.deletion_timestamp is None]


async def test_kubectl_delete_node_on_a_node_ebb_launched_drains_it_through_ebbs_finalizer(kube_api: Any) -> None:
    run = uuid.uuid4().hex[:8]
    pool, namespace = f"fin-{run}", f"fin-{run}"
    launched, other, foreign = f"{pool}-launched", f"{pool}-other", f"{pool}-foreign"
    crds = await install_karpenter_crds(kube_api)
    await create_nodepool(kube_api, nodepool(pool, run))
    core: Any = client.CoreV1Api(kube_api)
    apps, policy = client.AppsV1Api(kube_api), client.PolicyV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    node_api = KubeNodeApi(kube_api)
    launcher = KwokLauncher(kube_api, catalog_types(bundled_catalog()), lambda: datetime.now(UTC))
    provider = NodeProvider("kwok", node_api, launcher, nodepools=KubeNodeClaimApi(kube_api).read_nodepool)
    stop = asyncio.Event()
    drainer = Drainer(node_api, disruption_taint=DISRUPTED_TAINT, eviction_deadline=20,
                      backoff=EvictionBackoff(initial=0.2, maximum=1.0), poll_interval=0.2, clock=Clock(), stop=stop)
    finalizer = Finalizer(drainer, provider, node_api.list_nodes, interval=0.5)
    loop: asyncio.Task[None] | None = None
    try:
        replacement = Replacement(node_pool=pool, instance_types=("m5.xlarge",), capacity_type="on-demand",
                                  zones=("us-east-1a",), price=0.192)
        await provider.launch(launched, replacement, decision_id=f"dec-{run}")
        await eventually("the launched KWOK node Ready", lambda: launcher.ready(launched), within=60)
        node = kube_api.sanitize_for_serialization(await core.read_node(launched))
        assert node["metadata"]["finalizers"] == [EBB_TERMINATION_FINALIZER]
        assert node["metadata"]["annotations"]["ebb.sh/decision-id"] == f"dec-{run}"

        # three pods on the launched node (the only node of the run so far), one disruption at a time
        await apps.create_namespaced_deployment(namespace, deployment("web", run, 3, cpu="100m"))
        await policy.create_namespaced_pod_disruption_budget(namespace, client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1PodDisruptionBudgetSpec(max_unavailable=1,
                                                  selector=client.V1LabelSelector(match_labels={"app": "web"}))))

        async def running_on_launched() -> bool:
            pods = await _pods_on(core, namespace, launched)
            return len(pods) == 3 and all(p.status.phase == "Running" for p in pods)

        await eventually("three pods running on the launched node", running_on_launched, within=90)
        await core.create_node(kwok_node(other, pool, run))  # where the evicted pods go
        foreign_node = kwok_node(foreign, pool, f"{run}-foreign")  # not a node the Deployment's pods may use
        foreign_node.metadata.finalizers = ["example.com/keep"]
        await core.create_node(foreign_node)

        loop = asyncio.create_task(finalizer.run())
        await core.delete_node(launched)  # kubectl delete node
        await core.delete_node(foreign)

        async def launched_gone() -> bool:
            try:
                await core.read_node(launched)
            except ApiException as e:
                return e.status == 404
            return False

        await eventually("the launched node drained and gone", launched_gone, within=120)
        # the apiserver deletes the Node as it answers the finalizer's patch; this test's read can see the 404
        # before the loop's task has taken that answer, so the count is waited for, not read at once
        await eventually("the finalizer loop's count", lambda: finalizer.finalized or None, within=10)
        assert finalizer.finalized == [launched]

        async def moved() -> bool:
            pods = await _pods_on(core, namespace, other)
            return len(pods) == 3 and all(p.status.phase == "Running" for p in pods)

        await eventually("the three pods running on the other node", moved, within=90)
        # a deleted node without ebb's finalizer is not ebb's to drain: untainted, its finalizer kept
        kept = kube_api.sanitize_for_serialization(await core.read_node(foreign))
        assert kept["metadata"]["finalizers"] == ["example.com/keep"]
        assert not any(t["key"] == DISRUPTED_TAINT["key"] for t in kept["spec"].get("taints") or [])
    finally:
        stop.set()
        if loop is not None:
            await asyncio.gather(loop, return_exceptions=True)
        with contextlib.suppress(ApiException):
            await core.patch_node(foreign, {"metadata": {"finalizers": None}},
                                  _content_type="application/merge-patch+json")
        for name in (launched, other, foreign):
            with contextlib.suppress(ApiException):
                await launcher.delete(name)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)
        await delete_nodepool(kube_api, pool)
        await remove_crds(kube_api, crds)
