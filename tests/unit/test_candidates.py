"""Who is a disruption candidate, and the reason reported for each node that is not (docs/decisions.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import (
    ago,
    blocked_of,
    disrupted,
    ds_pod,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan_dict,
    pod,
)

TAINT_DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def _cluster(a_node: dict[str, Any], a_pods: list[Any], extra: list[Any] | None = None) -> dict[str, Any]:
    """Node `a` (m5.large) with the case's pods, and node `b` (m5.large) with room to take them."""
    return plan_dict(nodepool(), a_node, node("b", zone="us-east-1b"), pod("other", "b"), *a_pods,
                     *(extra or []))


def _unmanaged(name: str, **kwargs: Any) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool without spec.template.spec.nodeClassRef, as only a snapshot written by hand has."""
    pool = nodepool(name, **kwargs)
    del pool["spec"]["template"]["spec"]["nodeClassRef"]
    return pool


# (id, node a, pods on a, extra docs, phrase in a's blocked reason)
BLOCKED = [
    ("not-owned", node("a", pool=None), [pod("web", "a")], [], "not owned by a NodePool"),
    ("not-owned-whose-nodeclaim-names-a-pool", node("a", pool=None), [pod("web", "a")], [nodeclaim("nc-a", "a")],
     "not owned by a NodePool (no karpenter.sh/nodepool label) (its NodeClaim nc-a names NodePool default, but "
     "Karpenter reads the Node's own label)"),
    ("unknown-pool", node("a", pool="gone"), [pod("web", "a")], [], "not in the snapshot"),
    ("unmanaged-pool", node("a", pool="bare"), [pod("web", "a")], [_unmanaged("bare")],
     "its NodePool bare has no spec.template.spec.nodeClassRef"),
    ("not-initialized", node("a", initialized=False), [pod("web", "a")], [], "not initialized"),
    ("deleting", node("a", deleting=True), [pod("web", "a")], [], "being deleted"),
    ("tainted-disrupted", node("a", taints=[TAINT_DISRUPTED]), [pod("web", "a")], [],
     "already being disrupted"),
    ("pod-do-not-disrupt", node("a"), [pod("web", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})],
     [], "karpenter.sh/do-not-disrupt"),
    ("pod-do-not-disrupt-duration", node("a"),
     [pod("web", "a", started=ago(minutes=10), annotations={"karpenter.sh/do-not-disrupt": "1h"})], [],
     "protected until 2026-11-23T19:20:00Z"),
    ("legacy-do-not-evict", node("a"), [pod("web", "a", annotations={"karpenter.sh/do-not-evict": "true"})],
     [], "karpenter.sh/do-not-evict"),
    ("node-do-not-disrupt", node("a", annotations={"karpenter.sh/do-not-disrupt": "true"}), [pod("web", "a")],
     [], "karpenter.sh/do-not-disrupt"),
    ("node-do-not-consolidate", node("a", annotations={"karpenter.sh/do-not-consolidate": "true"}),
     [pod("web", "a")], [], "do-not-consolidate"),
    ("pdb-min-available", node("a"), [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, min_available=1)], "pdb default/web"),
    ("pdb-min-available-percent", node("a"), [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, min_available="100%")], "0 disruptions allowed"),
    ("pdb-max-unavailable", node("a"), [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, max_unavailable=0)], "0 disruptions allowed"),
    ("pdb-max-unavailable-percent", node("a"), [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, max_unavailable="0%")], "0 disruptions allowed"),
    ("pdb-already-unhealthy", node("a"),
     [pod("web", "a", labels={"app": "web"}), pod("web-2", "b", labels={"app": "web"}, phase="Pending")],
     [pdb("web", {"app": "web"}, max_unavailable=1)], "0 disruptions allowed"),
    ("two-pdbs", node("a"), [pod("web", "a", labels={"app": "web", "tier": "front"})],
     [pdb("by-app", {"app": "web"}, max_unavailable=1), pdb("by-tier", {"tier": "front"}, max_unavailable=1)],
     "two PDBs"),
    # Karpenter's ValidatePodsDisruptable: do-not-disrupt on any active pod blocks, DaemonSet and mirror pods too;
    # a PDB allowing nothing blocks on a DaemonSet pod, which is evicted (not on a mirror pod, which is not)
    ("daemonset-pod-do-not-disrupt", node("a"),
     [pod("web", "a"), pod("agent-a", "a", owner=("DaemonSet", "agent"), labels={"app": "agent"},
                           annotations={"karpenter.sh/do-not-disrupt": "true"})], [], "karpenter.sh/do-not-disrupt"),
    ("mirror-pod-do-not-disrupt", node("a"),
     [pod("static-a", "a", owner=("Node", "a"), annotations={"kubernetes.io/config.mirror": "x",
                                                     "karpenter.sh/do-not-disrupt": "true"})], [],
     "karpenter.sh/do-not-disrupt"),
    ("daemonset-pod-under-zero-pdb", node("a"),
     [pod("agent-a", "a", ns="kube-system", owner=("DaemonSet", "agent"), labels={"app": "agent"})],
     [pdb("agent", {"app": "agent"}, min_available="100%", ns="kube-system")], "0 disruptions allowed"),
    # policy/v1: an empty selector ({}) selects every pod of its namespace (a null one, none: below)
    ("pdb-empty-selector", node("a"), [pod("web", "a", labels={"app": "web"})],
     [pdb("everything", {}, max_unavailable=0)], "pdb default/everything"),
]


@pytest.mark.parametrize(("a_node", "a_pods", "extra", "phrase"), [c[1:] for c in BLOCKED],
                         ids=[c[0] for c in BLOCKED])
def test_node_is_not_disrupted_and_the_reason_says_why(a_node: dict[str, Any], a_pods: list[Any],
                                                       extra: list[Any], phrase: str) -> None:
    out = _cluster(a_node, a_pods, extra)
    assert "a" not in disrupted(out)
    assert phrase in blocked_of(out, "a")["reason"]


# (id, pods on a, extra docs): a is consolidated (its pod fits on b, or a new cheaper node)
NOT_BLOCKED = [
    ("plain", [pod("web", "a")], []),
    ("do-not-disrupt-duration-passed",
     [pod("web", "a", started=ago(hours=2), annotations={"karpenter.sh/do-not-disrupt": "1h"})], []),
    ("do-not-disrupt-false", [pod("web", "a", annotations={"karpenter.sh/do-not-disrupt": "false"})], []),
    ("pdb-allows-one", [pod("web", "a", labels={"app": "web"}), pod("web-2", "b", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, min_available=1)]),
    ("pdb-max-unavailable-1", [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, max_unavailable=1)]),
    ("pdb-max-unavailable-50-percent",
     [pod("web", "a", labels={"app": "web"}), pod("web-2", "b", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, max_unavailable="50%")]),
    ("pdb-other-namespace", [pod("web", "a", labels={"app": "web"})],
     [pdb("web", {"app": "web"}, min_available=1, ns="other")]),
    ("pdb-empty-selector-other-namespace", [pod("web", "a", labels={"app": "web"})],
     [pdb("everything", {}, max_unavailable=0, ns="other")]),
    ("pdb-null-selector", [pod("web", "a", labels={"app": "web"})],  # policy/v1: a null selector selects no pod
     [{**pdb("nothing", {}, max_unavailable=0), "spec": {"maxUnavailable": 0}}]),
    ("finished-pod-do-not-disrupt",
     [pod("web", "a"), pod("job", "a", owner=("Job", "j"), phase="Succeeded",
                           annotations={"karpenter.sh/do-not-disrupt": "true"})], []),
]


@pytest.mark.parametrize(("a_pods", "extra"), [c[1:] for c in NOT_BLOCKED], ids=[c[0] for c in NOT_BLOCKED])
def test_node_is_a_candidate(a_pods: list[Any], extra: list[Any]) -> None:
    out = _cluster(node("a"), a_pods, extra)
    assert "a" in disrupted(out), out["blocked"]


# Pods that never block and need no new home: a node with only these is empty.
IGNORED_PODS = [
    ("daemonset", [ds_pod("agent-a", "a")]),
    ("daemonset-tolerating-everything-under-zero-pdb",  # not evicted by a disruption: its PDB does not matter
     [pod("agent-a", "a", ns="kube-system", owner=("DaemonSet", "agent"), labels={"app": "agent"},
          tolerations=[{"operator": "Exists"}]),
      pdb("agent", {"app": "agent"}, min_available="100%", ns="kube-system")]),
    ("mirror", [pod("etcd-a", "a", owner=("Node", "a"), annotations={"kubernetes.io/config.mirror": "x"})]),
    ("mirror-under-zero-pdb",  # a mirror pod is never evicted: its PDB does not matter
     [pod("etcd-a", "a", ns="kube-system", owner=("Node", "a"), labels={"app": "etcd"},
          annotations={"kubernetes.io/config.mirror": "x"}),
      pdb("etcd", {"app": "etcd"}, max_unavailable=0, ns="kube-system")]),
    ("succeeded", [pod("job-1", "a", owner=("Job", "j"), phase="Succeeded", cpu="1500m")]),
    ("failed", [pod("job-2", "a", owner=("Job", "j"), phase="Failed", cpu="1500m",
                    annotations={"karpenter.sh/do-not-evict": "true"})]),
    ("all-of-them", [ds_pod("agent-a", "a"),
                     pod("etcd-a", "a", owner=("Node", "a"), annotations={"kubernetes.io/config.mirror": "x"}),
                     pod("job-1", "a", owner=("Job", "j"), phase="Succeeded")]),
]


@pytest.mark.parametrize("a_pods", [c[1] for c in IGNORED_PODS], ids=[c[0] for c in IGNORED_PODS])
def test_daemonset_mirror_and_finished_pods_leave_the_node_empty(a_pods: list[Any]) -> None:
    out = plan_dict(nodepool(), node("a"), node("b"), pod("busy", "b", cpu="1800m"), *a_pods)
    assert [(c["method"], c["reason"], c["action"], c["nodes"]) for c in out["commands"]] == [
        ("emptiness", "Empty", "delete", ["a"])]


@pytest.mark.parametrize(("kwargs", "method", "reason"), [
    ({"expire_after": "24h"}, "expiration", "Expired"),
    ({"node_hash": "h2"}, "drift", "Drifted"),
])
def test_do_not_consolidate_does_not_stop_expiration_or_drift(kwargs: dict[str, Any], method: str,
                                                               reason: str) -> None:
    out = plan_dict(nodepool(**kwargs), node("a", node_hash="h1", annotations={
        "karpenter.sh/do-not-consolidate": "true"}), pod("web", "a"))
    assert [(c["method"], c["reason"], c["nodes"]) for c in out["commands"]] == [(method, reason, ["a"])]


@pytest.mark.parametrize(("kwargs", "phrase"), [
    ({"expire_after": "24h"}, "expired"),
    ({"node_hash": "h2"}, "drifted"),
])
def test_do_not_disrupt_stops_expiration_and_drift(kwargs: dict[str, Any], phrase: str) -> None:
    out = plan_dict(nodepool(**kwargs), node("a", node_hash="h1"),
                    pod("web", "a", annotations={"karpenter.sh/do-not-disrupt": "true"}))
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert phrase in reason
    assert "do-not-disrupt" in reason


def test_do_not_consolidate_blocks_emptiness() -> None:
    out = plan_dict(nodepool(), node("a", annotations={"karpenter.sh/do-not-consolidate": "true"}))
    assert out["commands"] == []
    assert "do-not-consolidate" in blocked_of(out, "a")["reason"]


def test_a_nodepool_do_not_disrupt_stops_drift_of_a_node_marked_do_not_consolidate() -> None:
    """The NodePool's template annotates its nodes do-not-disrupt (every method, as the node's own annotation would);
    the node's do-not-consolidate (consolidation only) does not hide that from drift."""
    out = plan_dict(nodepool(node_hash="h2", template_annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    node("a", node_hash="h1", annotations={"karpenter.sh/do-not-consolidate": "true"}),
                    pod("web", "a"))
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert "drifted" in reason
    assert "template annotates its nodes karpenter.sh/do-not-disrupt=true" in reason


def test_no_replacement_comes_from_a_nodepool_without_a_nodeclassref() -> None:
    """Karpenter lists only the NodePools whose NodeClass its cloud provider supports (``ListManaged``, which the
    provisioner and disruption both read; consolidation_test.go builds such a NodePool to show it is ignored): node
    a (m5.2xlarge, on-demand only) is replaced from its own NodePool, not from the heavier NodePool bare that admits
    spot."""
    spot = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]
    out = plan_dict(nodepool(), _unmanaged("bare", requirements=spot, weight=10), node("a", itype="m5.2xlarge"),
                    pod("web", "a"))
    [command] = out["commands"]
    [replacement] = command["replacements"]
    assert (replacement["nodePool"], replacement["capacityType"]) == ("default", "on-demand")
