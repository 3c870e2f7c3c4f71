"""controllers/disruption/suite_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Describe("Candidate Filtering") asks ``NewCandidate`` whether a node is a disruption candidate; ebb's counterpart is
``ClusterView``'s ``not_candidate`` (never a candidate, with why) and ``hard_block`` (no method may disrupt it, with
why). Describe("Pod Eviction Cost") is ``ebb.core.cluster.eviction_cost``. Translated elsewhere:
"should allow pods on deleting nodes to reschedule to uninitialized nodes", Describe("BuildDisruptionBudgetMapping")
(six cases), "should not consider candidates that are deleting", "... do-not-disrupt terminating pods" and
"... fully blocking PDBs on terminating pods" are in tests/unit/test_karpenter_rules.py. Not translated (counted in
docs/decisions.md, "Karpenter's test suites, translated"): "should allow multiple replace operations to happen
successively", "should remove taints from NodeClaims that were left tainted from a previous disruption action",
"should add and remove taints from NodeClaims that fail to disrupt" (the orchestration queue over time), "should
ensure that we do not duplicate capacity for disrupted nodes with provisioning" (the provisioner), "should not
consider candidates that are nominated" (nomination by the provisioner; docs/decisions.md, Differences: "No
nominated nodes"), Describe("Metrics") (six cases) and "should stop multi-node consolidation after context deadline is
reached" (a timeout ebb's greedy search does not have).
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from tests.kit.builders import (
    NOW,
    ago,
    disrupted,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan_dict,
    pod,
    snapshot,
)

TAINT_DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
MIRROR = {"kubernetes.io/config.mirror": "x"}
DND = {"karpenter.sh/do-not-disrupt": "true"}
TGP = "terminationGracePeriod"


def _with_tgp(claim: dict[str, Any]) -> dict[str, Any]:
    claim["spec"] = {TGP: "300s"}
    return claim


def _cause(*docs: Any, name: str = "a", require_nodeclaim: bool = False) -> str | None:
    """Why node ``name`` is no candidate (or no method may take it), or None when it is one."""
    view = ClusterView.build(snapshot(*docs), NOW, require_nodeclaim=require_nodeclaim)
    cause = view.not_candidate.get(name) or view.hard_block.get(name)
    return cause.text if cause is not None else None


def _a(itype: str = "m5.2xlarge", **node_kwargs: Any) -> list[Any]:
    """The suite's node a (the most expensive type) and its NodeClaim."""
    return [node("a", itype=itype, **node_kwargs), nodeclaim("claim-a", "a")]


def _pod_on_a(**kwargs: Any) -> dict[str, Any]:
    return pod(kwargs.pop("name", "p"), "a", **kwargs)


def _ds_pod(**kwargs: Any) -> dict[str, Any]:
    return pod("agent-a", "a", ns="kube-system", owner=("DaemonSet", "agent"), labels={"app": "agent"}, **kwargs)


def _mirror_pod(**kwargs: Any) -> dict[str, Any]:
    annotations = {**MIRROR, **kwargs.pop("annotations", {})}
    return pod("static-a", "a", ns="kube-system", owner=("Node", "a"), labels={"app": "static"},
               annotations=annotations, **kwargs)


ZERO_PDB = pdb("p", {"app": "p"}, max_unavailable=0)
ZERO_PDB_DS = pdb("agent", {"app": "agent"}, max_unavailable=0, ns="kube-system")
ZERO_PDB_MIRROR = pdb("static", {"app": "static"}, max_unavailable=0, ns="kube-system")

# (Karpenter's case, documents besides the NodePool, the phrase of why a is no candidate, or None: it is one)
CANDIDATE_FILTERING = [
    ("should not consider candidates that have do-not-disrupt pods scheduled and no terminationGracePeriod",
     [_a(), _pod_on_a(annotations=DND)], "karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have do-not-disrupt mirror pods scheduled",
     [_a(), _mirror_pod(annotations=DND)], "karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have do-not-disrupt daemonset pods scheduled",
     [_a(), _ds_pod(annotations=DND)], "karpenter.sh/do-not-disrupt=true"),
    # the NodeClaim's terminationGracePeriod lets drift and expiration (Karpenter's eventual disruption class) take
    # the node: no method is kept away, consolidation is (GRACEFUL below)
    ("should consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for "
     "eventual disruption", [_with_tgp(_a()[1]), _a()[0], _pod_on_a(annotations=DND)], None),
    ("should consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for eventual "
     "disruption", [_with_tgp(_a()[1]), _a()[0], _pod_on_a(labels={"app": "p"}), ZERO_PDB], None),
    ("should not consider candidates that have do-not-disrupt pods scheduled without a terminationGracePeriod set "
     "for eventual disruption", [_a(), _pod_on_a(annotations=DND)], "karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have PDB-blocked pods scheduled without a terminationGracePeriod set for "
     "eventual disruption", [_a(), _pod_on_a(labels={"app": "p"}), ZERO_PDB], "prevents pod evictions"),
    ("should consider candidates that have do-not-disrupt terminal pods",
     [_a(), _pod_on_a(annotations=DND, phase="Succeeded", owner=("Job", "j"))], None),
    ("should not consider candidates that have do-not-disrupt on nodes",
     [_a(annotations=DND)], "the node is annotated karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have multiple PDBs on the same pod",
     [_a(), _pod_on_a(labels={"app": "p"}), pdb("p1", {"app": "p"}, max_unavailable=1),
      pdb("p2", {"app": "p"}, max_unavailable=1)], "covered by two PDBs"),
    ("should not consider candidates that have fully blocking PDBs",
     [_a(), _pod_on_a(labels={"app": "p"}), ZERO_PDB], "prevents pod evictions"),
    ("should not consider candidates that have fully blocking PDBs on daemonset pods",
     [_a(), _ds_pod(), ZERO_PDB_DS], "prevents pod evictions"),
    ("should consider candidates that have fully blocking PDBs on mirror pods", [_a(), _mirror_pod(), ZERO_PDB_MIRROR],
     None),
    ("should not consider candidates that have do-not-disrupt pods without a terminationGracePeriod set for graceful "
     "disruption", [_a(), _pod_on_a(annotations=DND)], "karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have fully blocking PDBs without a terminationGracePeriod set for graceful "
     "disruption", [_a(), _pod_on_a(labels={"app": "p"}), ZERO_PDB], "prevents pod evictions"),
    ("should consider candidates that have fully blocking PDBs on terminal pods",
     [_a(), _pod_on_a(labels={"app": "p"}, phase="Succeeded", owner=("Job", "j")), ZERO_PDB], None),
    ("should not consider candidates that are MarkedForDeletion", [_a(taints=[TAINT_DISRUPTED])],
     "already being disrupted"),
    ("should not consider candidates that are actively being processed in the queue (a command's taint)",
     [_a(taints=[{"key": "ebb.sh/disrupted", "effect": "NoSchedule"}])], "already being disrupted"),
    ("should not consider candidates that aren't yet initialized",
     [node("a", initialized=False), nodeclaim("claim-a", "a", initialized=False)], "not initialized"),
    ("should not consider candidates that are not owned by a NodePool (no karpenter.sh/nodepool label)",
     [node("a", pool=None)], "not owned by a NodePool"),
    ("should not consider candidates that are have a non-existent NodePool",
     [node("a", pool="gone"), nodeclaim("claim-a", "a", pool="gone")], "NodePool gone is not in the snapshot"),
    ("should consider candidates that do not have the karpenter.sh/capacity-type label",
     [_a(labels={"karpenter.sh/capacity-type": ""})], None),
    ("should consider candidates that do not have the topology.kubernetes.io/zone label",
     [_a(labels={"topology.kubernetes.io/zone": ""})], None),
    ("should consider candidates that do not have the node.kubernetes.io/instance-type label",
     [_a(labels={"node.kubernetes.io/instance-type": ""})], None),
    ("should consider candidates that have an instance type that cannot be resolved",
     [_a(itype="x9.unknown")], None),
]


# (Karpenter's case, documents besides the NodePool, the phrase of why emptiness and consolidation (Karpenter's
# graceful disruption class) may not take a)
GRACEFUL = [
    ("should not consider candidates that have do-not-disrupt pods scheduled with a terminationGracePeriod set for "
     "graceful disruption", [_with_tgp(_a()[1]), _a()[0], _pod_on_a(annotations=DND)],
     "karpenter.sh/do-not-disrupt=true"),
    ("should not consider candidates that have PDB-blocked pods scheduled with a terminationGracePeriod set for "
     "graceful disruption", [_with_tgp(_a()[1]), _a()[0], _pod_on_a(labels={"app": "p"}), ZERO_PDB],
     "prevents pod evictions"),
]


def _drop_empty_labels(docs: list[Any]) -> list[Any]:
    """Labels given as "" are removed (the builders always set them)."""
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Node":
            labels = doc["metadata"]["labels"]
            for key in [k for k, v in labels.items() if v == ""]:
                del labels[key]
    return docs


def _flatten(docs: list[Any]) -> list[Any]:
    out: list[Any] = []
    for d in docs:
        out.extend(d if isinstance(d, list) else [d])
    return out


@pytest.mark.parametrize(("docs", "phrase"), [c[1:] for c in CANDIDATE_FILTERING],
                         ids=[c[0] for c in CANDIDATE_FILTERING])
def test_candidate_filtering(docs: list[Any], phrase: str | None) -> None:
    """suite_test.go, Describe("Candidate Filtering"): NewCandidate's verdict on node a, the pods on it and their
    PDBs. Do-not-disrupt blocks on every active pod, DaemonSet and mirror pods included; a PDB allowing nothing
    blocks on the pods a disruption would evict (a DaemonSet's, not a mirror pod)."""
    cause = _cause(nodepool(), *_drop_empty_labels(_flatten(docs)))
    if phrase is None:
        assert cause is None
    else:
        assert cause is not None
        assert phrase in cause


# (Karpenter's case, with the karpenter provider, whether a is a candidate)
NODE_ONLY = [
    ("should not consider candidates that has just a Node representation (ebb with the karpenter provider)", True,
     False),
    ("should not consider candidates that has just a Node representation (ebb standalone: a candidate)", False, True),
]


@pytest.mark.parametrize(("require_nodeclaim", "candidate"), [c[1:] for c in NODE_ONLY], ids=[c[0] for c in NODE_ONLY])
def test_should_not_consider_candidates_that_has_just_a_node_representation(require_nodeclaim: bool,
                                                                           candidate: bool) -> None:
    """suite_test.go, Describe("Candidate Filtering"), It("should not consider candidates that has just a Node
    representation"): a Node of the NodePool without a NodeClaim. Next to Karpenter (``require_nodeclaim``) ebb
    agrees; standalone it takes such nodes (docs/decisions.md, Differences: "A node without a NodeClaim is a
    candidate (except with the karpenter provider)")."""
    cause = _cause(nodepool(), node("a"), require_nodeclaim=require_nodeclaim)
    assert (cause is None) is candidate
    if not candidate:
        assert cause is not None and "it has no NodeClaim" in cause


def test_should_not_consider_candidate_that_has_just_a_nodeclaim_representation() -> None:
    """suite_test.go, Describe("Candidate Filtering"), It("should not consider candidate that has just a NodeClaim
    representation"): a NodeClaim whose node has not registered is nothing ebb can disrupt: no command, no entry."""
    out = plan_dict(nodepool(), nodeclaim("claim-a", "a"), node("b"), pod("web", "b"))
    assert "a" not in disrupted(out)
    assert all(b["node"] != "a" for b in out["blocked"])


# -- Describe("Pod Eviction Cost") ------------------------------------------------------------------------------------

def _cost(annotations: dict[str, str] | None = None, priority: int | None = None) -> float:
    [p] = snapshot(pod("p", None, annotations=annotations, priority=priority, phase="Pending")).pods
    return p.eviction_cost


STANDARD = 1.0
EVICTION_COST = [
    ("should have a standard disruptionCost for a pod with no priority or disruptionCost specified",
     lambda: _cost() == STANDARD),
    ("should have a higher disruptionCost for a pod with a positive deletion disruptionCost",
     lambda: _cost({"controller.kubernetes.io/pod-deletion-cost": "100"}) > STANDARD),
    ("should have a lower disruptionCost for a pod with a positive deletion disruptionCost",
     lambda: _cost({"controller.kubernetes.io/pod-deletion-cost": "-100"}) < STANDARD),
    ("should have higher costs for higher deletion costs",
     lambda: _cost({"controller.kubernetes.io/pod-deletion-cost": "101"})
     > _cost({"controller.kubernetes.io/pod-deletion-cost": "100"})
     > _cost({"controller.kubernetes.io/pod-deletion-cost": "99"})),
    ("should have a higher disruptionCost for a pod with a higher priority", lambda: _cost(priority=1) > STANDARD),
    ("should have a lower disruptionCost for a pod with a lower priority", lambda: _cost(priority=-1) < STANDARD),
]


@pytest.mark.parametrize("holds", [c[1] for c in EVICTION_COST], ids=[c[0] for c in EVICTION_COST])
def test_pod_eviction_cost(holds: Any) -> None:
    """suite_test.go, Describe("Pod Eviction Cost"): Karpenter's EvictionCost."""
    assert holds()


# -- the suite's top-level cases --------------------------------------------------------------------------------------

def test_can_replace_node_with_a_local_pv_ignoring_hostname_affinity() -> None:
    """suite_test.go, Describe("Simulate Scheduling"), It("can replace node with a local PV (ignoring hostname
    affinity)"): the pod's local volume pins it to its node by hostname; Karpenter ignores that affinity and
    replaces the node (ebb does not read volumes, so the pod is as free to move)."""
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    web = pod("web", "a", cpu="1", memory="1Gi")
    web["spec"]["volumes"] = [claim]
    out = plan_dict(nodepool(), node("a", itype="m5.2xlarge", created=ago(hours=2)), nodeclaim("claim-a", "a"), web)
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == \
        [("single-node-consolidation", "replace", ["a"])]


@pytest.mark.parametrize(("docs", "phrase"), [c[1:] for c in GRACEFUL], ids=[c[0] for c in GRACEFUL])
def test_candidate_filtering_graceful(docs: list[Any], phrase: str) -> None:
    """suite_test.go, Describe("Candidate Filtering"), NewCandidate with GracefulDisruptionClass: a
    terminationGracePeriod does not let emptiness or consolidation take a node whose pod blocks eviction; drift and
    expiration may (CANDIDATE_FILTERING)."""
    view = ClusterView.build(snapshot(nodepool(), *_flatten(docs)), NOW)
    assert view.blocked_reason("a", consolidation=False) is None
    cause = view.blocked_reason("a", consolidation=True)
    assert cause is not None
    assert phrase in cause.text
