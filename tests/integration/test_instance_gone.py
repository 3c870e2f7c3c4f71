"""Karpenter's termination rule for a node whose instance is already gone, against a real kube-apiserver (with
kube-controller-manager's garbage collector): the ``karpenter`` provider finalizes at once, without draining, only
a node whose NodeClaim is gone and which is NotReady; a Ready node (a kubelet still runs its pods) is drained as any
other (``KarpenterProvider.instance_gone``). The Node carries Karpenter's ``karpenter.sh/termination`` finalizer,
as Karpenter's nodes do, so the garbage collector's deletion of it, once its owner NodeClaim is gone, leaves it in
place."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.kube.karpenter import KarpenterProvider, KubeNodeClaimApi
from ebb.adapters.kube.node_api import KubeNodeApi
from tests.kit.system import KARPENTER, install_karpenter_crds, remove_crds
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration


async def test_an_instance_is_gone_only_when_its_nodeclaim_is_gone_and_the_node_is_not_ready(kube_api: Any) -> None:
    run = uuid.uuid4().hex[:8]
    claim, node = f"gone-claim-{run}", f"gone-node-{run}"
    crds = await install_karpenter_crds(kube_api)
    core: Any = client.CoreV1Api(kube_api)
    custom: Any = client.CustomObjectsApi(kube_api)
    provider = KarpenterProvider(KubeNodeApi(kube_api), KubeNodeClaimApi(kube_api))
    try:
        made = await custom.create_cluster_custom_object(KARPENTER, "v1", "nodeclaims", {
            "apiVersion": f"{KARPENTER}/v1", "kind": "NodeClaim", "metadata": {"name": claim},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}})
        await core.create_node(client.V1Node(metadata=client.V1ObjectMeta(
            name=node, labels={"kubernetes.io/hostname": node}, finalizers=["karpenter.sh/termination"],
            owner_references=[client.V1OwnerReference(api_version=f"{KARPENTER}/v1", kind="NodeClaim", name=claim,
                                                      uid=made["metadata"]["uid"])])))
        # no kubelet: the Node has no Ready condition (NotReady), but its NodeClaim is there
        assert not await provider.instance_gone(node)

        await custom.delete_cluster_custom_object(KARPENTER, "v1", "nodeclaims", claim)

        async def claim_gone() -> bool:
            try:
                await custom.get_cluster_custom_object(KARPENTER, "v1", "nodeclaims", claim)
            except ApiException as e:
                return e.status == 404
            return False

        await eventually("the NodeClaim gone", claim_gone, within=30)
        assert await provider.instance_gone(node)  # NodeClaim gone, Node NotReady: finalized without a drain

        await core.patch_node_status(node, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "a kubelet runs its pods"}]}})
        assert not await provider.instance_gone(node)  # Ready: its pods are drained first
    finally:
        with contextlib.suppress(ApiException):
            await core.patch_node(node, {"metadata": {"finalizers": None}},
                                  _content_type="application/merge-patch+json")
        with contextlib.suppress(ApiException):
            await core.delete_node(node)
        with contextlib.suppress(ApiException):
            await custom.delete_cluster_custom_object(KARPENTER, "v1", "nodeclaims", claim)
        await remove_crds(kube_api, crds)
