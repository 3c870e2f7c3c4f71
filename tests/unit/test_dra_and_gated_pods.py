"""Pods Karpenter's simulation does not place: those with Dynamic Resource Allocation claims, and pending pods held
back by scheduling gates.

Karpenter v1.14.1 refuses a pod with DRA claims (``HasDRARequirements``: a pod's ``resourceClaims`` or a
container's ``resources.claims``) in every scheduling simulation while ``IgnoreDRARequests`` is on, its default: a
candidate holding one is never consolidated nor drifted, a pending one takes no room, and a DaemonSet whose pods have
claims counts no overhead on a new node. A pod with ``schedulingGates`` is placed by no scheduler until they are
removed, and Karpenter provisions none (its PodScheduled reason is ``SchedulingGated``), so it keeps no room either.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import blocked_of, daemonset, node, nodepool, plan_dict, pod

KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def _with_claim(doc: dict[str, Any], where: str) -> dict[str, Any]:
    spec = doc["spec"]
    if where == "pod":
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    elif where == "container":
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    else:
        spec["initContainers"] = [{"name": "setup", "resources": {"claims": [{"name": "gpu"}]}}]
    return doc


@pytest.mark.parametrize("where", ["pod", "container", "initContainer"])
def test_a_node_holding_a_pod_with_dra_claims_is_not_consolidated(where: str) -> None:
    """``cand``'s pod fits on ``keep``, but it has DRA claims: Karpenter's simulation places it nowhere, so ``cand``
    stays (its device may exist on its node only). Without the claim ``cand`` is deleted."""
    docs = [nodepool(), node("keep", annotations=KEEP), node("cand"), pod("plain", "keep", cpu="500m")]
    assert [c["nodes"] for c in plan_dict(*docs, pod("web", "cand", cpu="500m"))["commands"]] == [["cand"]]
    out = plan_dict(*docs, _with_claim(pod("web", "cand", cpu="500m"), where))
    assert out["commands"] == []
    assert "it has Dynamic Resource Allocation claims (resourceClaims, or a container's resources.claims), which " \
           "Karpenter's simulation does not place" in blocked_of(out, "cand")["reason"]


def test_a_drifted_node_holding_a_pod_with_dra_claims_stays() -> None:
    out = plan_dict(nodepool(node_hash="h2"), node("d1", node_hash="h1"),
                    _with_claim(pod("web", "d1", cpu="500m"), "pod"))
    assert out["commands"] == []
    assert "would have nowhere to go" in blocked_of(out, "d1")["reason"]


@pytest.mark.parametrize(("pending", "action"), [("plain", "replace"), ("dra", "delete"), ("gated", "delete")])
def test_a_pending_pod_with_dra_claims_or_scheduling_gates_keeps_no_room(pending: str, action: str) -> None:
    """A pending pod keeps its room on ``keep``, so ``cand``'s pod needs a new node (a replace); one with DRA claims
    or scheduling gates is placed nowhere by Karpenter and keeps none, so ``cand`` is deleted."""
    waiting = pod("waiting", None, cpu="1600m", phase="Pending")
    if pending == "dra":
        _with_claim(waiting, "pod")
    elif pending == "gated":
        waiting["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    out = plan_dict(nodepool(), node("keep", annotations=KEEP), node("cand", itype="m5.xlarge"),
                    pod("web", "cand", cpu="500m"), waiting)
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [(action, ["cand"])]


@pytest.mark.parametrize(("claims", "price"), [(False, 0.17), (True, 0.0416)])
def test_a_daemonset_whose_pods_have_dra_claims_counts_no_overhead(claims: bool, price: float) -> None:
    """A 1.6-cpu agent on every new node makes ``cand``'s replacement a c5.xlarge; one with DRA claims Karpenter
    skips (``shouldSkipDaemonPod``), and the replacement is a t3.medium."""
    agent = daemonset("agent", cpu="1600m")
    if claims:
        agent["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "nic"}]
    out = plan_dict(nodepool(), agent, node("cand", itype="m5.2xlarge"), pod("web", "cand", cpu="500m"))
    [command] = out["commands"]
    assert [r["price"] for r in command["replacements"]] == [price]
