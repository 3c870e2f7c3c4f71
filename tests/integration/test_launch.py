"""KwokLauncher against the real kube-apiserver and KWOK: a replacement becomes a KWOK node of its NodePool,
KWOK makes it Ready, the launcher marks it initialized; a second launch finds it; delete removes it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.kube.launch import KwokLauncher, catalog_types
from ebb.contracts import Replacement
from ebb.core.launch import LaunchError
from tests.kit.system import create_nodepool, delete_nodepool, install_karpenter_crds, nodepool, remove_crds
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration


async def test_a_replacement_becomes_a_ready_kwok_node_of_its_pool(kube_api: Any) -> None:
    run = uuid.uuid4().hex[:8]
    pool = f"launch-{run}"
    crds = await install_karpenter_crds(kube_api)
    body = nodepool(pool, run)
    body["metadata"]["annotations"] = {"karpenter.sh/nodepool-hash": "4242", "karpenter.sh/nodepool-hash-version": "v3"}
    await create_nodepool(kube_api, body)
    core = client.CoreV1Api(kube_api)
    launcher = KwokLauncher(kube_api, catalog_types(bundled_catalog()), lambda: datetime.now(UTC))
    replacement = Replacement(node_pool=pool, instance_types=("m5.xlarge",), capacity_type="on-demand",
                              zones=("us-east-1a",), price=0.192)
    name = f"{pool}-node"
    try:
        spec = await launcher.launch(name, replacement)
        assert (spec.instance_type, spec.zone) == ("m5.xlarge", "us-east-1a")
        assert (await launcher.launch(name, replacement)).name == name  # launched before: found

        async def ready() -> bool:
            return await launcher.ready(name)

        await eventually("the KWOK node Ready", ready, within=60)
        node = kube_api.sanitize_for_serialization(await core.read_node(name))
        labels = node["metadata"]["labels"]
        assert labels["karpenter.sh/nodepool"] == pool
        assert labels["karpenter.sh/initialized"] == "true"
        assert labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert node["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] == "4242"
        # ebb's own finalizer (never Karpenter's): `kubectl delete node` waits for ebb's drain
        assert node["metadata"]["finalizers"] == ["ebb.sh/termination"]
        assert "ebb.sh/decision-id" not in node["metadata"]["annotations"]  # launched for no decision
        assert node["status"]["allocatable"]["pods"]

        with pytest.raises(LaunchError, match="does not exist"):
            await launcher.launch(f"{pool}-other", replacement.model_copy(update={"node_pool": f"gone-{run}"}))
    finally:
        await launcher.delete(name)
        await delete_nodepool(kube_api, pool)
        await remove_crds(kube_api, crds)  # only those this test made (the watcher test expects none)

    async def gone() -> bool:
        names = {n.metadata.name for n in (await core.list_node()).items}
        return name not in names

    await eventually("the node deleted", gone, within=30)
    await launcher.delete(name)  # deleting again is no error
