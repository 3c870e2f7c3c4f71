"""A Node not initialized yet takes its NodeClaim's capacity and allocatable where it reports zero or nothing
(Karpenter's ``StateNode.Capacity``/``Allocatable``; its counter suite, "should use NodeClaim capacity for
uninitialized nodes"): a GPU node whose device plugin is not up yet reports no GPU, and its NodeClaim's GPU counts
against its NodePool's limits all the same."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import catalog, disrupted, instance_type, node, nodeclaim, nodepool, plan_dict, pod, snapshot

GPU = "nvidia.com/gpu"


def _gpu_type(name: str, cpu: str, memory: str, price: float) -> dict[str, Any]:
    made = instance_type(name, cpu, memory, 29, price)
    made["capacity"][GPU] = "1"
    return made


GPU_CATALOG = catalog([_gpu_type("gpu.small", "4", "16Gi", 0.5), _gpu_type("gpu.large", "8", "32Gi", 0.75)])


def _gpu_node(name: str, itype: str, cpu: str, memory: str, *, initialized: bool, gpu: str | None) -> dict[str, Any]:
    made = node(name, itype=itype, cpu=cpu, memory=memory, initialized=initialized)
    for amounts in (made["status"]["capacity"], made["status"]["allocatable"]):
        amounts.pop(GPU, None)
        if gpu is not None:
            amounts[GPU] = gpu
    return made


def _gpu_claim(name: str, node_name: str, *, initialized: bool = False) -> dict[str, Any]:
    claim = nodeclaim(name, node_name, initialized=initialized)
    claim.setdefault("status", {})["capacity"] = {"cpu": "4", "memory": "16Gi", GPU: "1"}
    claim["status"]["allocatable"] = {"cpu": "3920m", "memory": "15Gi", GPU: "1"}
    return claim


@pytest.mark.parametrize(("initialized", "gpu", "read"), [
    (False, "0", 1),  # zero: the claim's
    (False, None, 1),  # missing: the claim's
    (True, "0", 0),  # initialized: the Node's own
])
def test_an_uninitialized_node_takes_its_claims_amounts_where_it_reports_none(initialized: bool, gpu: str | None,
                                                                               read: int) -> None:
    booting = _gpu_node("boot", "gpu.small", "4", "16Gi", initialized=initialized, gpu=gpu)
    snap = snapshot(GPU_CATALOG, nodepool(), booting, _gpu_claim("boot-claim", "boot", initialized=initialized))
    [found] = snap.nodes
    assert (found.capacity.get(GPU, 0), found.allocatable.get(GPU, 0)) == (read, read)
    assert found.capacity["cpu"] == 4000  # what the Node says itself is kept


@pytest.mark.parametrize(("limit", "replaced"), [("1", False), ("2", True)])
def test_a_booting_gpu_node_counts_against_the_limits(limit: str, replaced: bool) -> None:
    """``cand`` (gpu.large, one GPU pod) could be replaced by a gpu.small; ``boot`` (gpu.small, not initialized)
    reports no GPU yet, and its NodeClaim one: with a limit of one GPU the pool has no room for the replacement."""
    pool = nodepool()
    pool["spec"]["limits"] = {GPU: limit}
    cand = _gpu_node("cand", "gpu.large", "8", "32Gi", initialized=True, gpu="1")
    booting = _gpu_node("boot", "gpu.small", "4", "16Gi", initialized=False, gpu=None)
    gpu_pod = pod("train", "cand", cpu="1", memory="2Gi")
    gpu_pod["spec"]["containers"][0]["resources"]["requests"][GPU] = "1"
    out = plan_dict(GPU_CATALOG, pool, cand, booting, _gpu_claim("boot-claim", "boot"), gpu_pod)
    assert ("cand" in disrupted(out)) is replaced, out["blocked"]
