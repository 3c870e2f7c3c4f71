"""Karpenter v1.14.1's disruption rules that ebb follows, each pinned by the Karpenter test case that pins it.

Every test (or table row) is named after a Karpenter case: ``test_<describe>_<it>`` or a row id with the
case's title, and the docstring or comment says where it is (paths under
``sigs.k8s.io/karpenter@v1.14.1/pkg``). The cases are rebuilt here as kubectl-shaped documents and planned by
ebb (`tests.kit.builders`); each table has a row where the rule does not apply, so a table cannot pass
by ebb doing nothing. Where ebb deliberately differs from Karpenter, docs/decisions.md ("Differences from
Karpenter v1.14") says so and why; those differences are not tested here as Karpenter's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ebb.core.causes import Stale
from ebb.core.cluster import ClusterView
from ebb.core.methods.base import EngineOptions, simulation
from ebb.core.model import REASONS
from ebb.core.plan import make_plan, plan_json
from ebb.core.snapshot import input_warnings
from ebb.core.validation import validate
from tests.kit.builders import (
    NOW,
    OLD,
    TYPES,
    ago,
    blocked_of,
    budget_of,
    catalog,
    disrupted,
    ds_pod,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan,
    plan_dict,
    pod,
    snapshot,
    ts,
)

TAINT_DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
INSTANCE_TERMINATING = {"type": "InstanceTerminating", "status": "True", "lastTransitionTime": "2026-11-23T18:29:00Z"}


def _nodes_with_claims(numbers: range, **claim_kwargs: Any) -> list[Any]:
    """Initialized nodes n<i> of the default NodePool for i in ``numbers``, each with its NodeClaim c<i>
    (``claim_kwargs`` for every claim)."""
    return [doc for i in numbers for doc in (node(f"n{i}"), nodeclaim(f"c{i}", f"n{i}", **claim_kwargs))]


# -- a deleting NodeClaim is a deleting node ------------------------------------------------------------------
# state/statenode.go: MarkedForDeletion() is markedForDeletion || Deleted(), and Deleted() is a NodeClaim with a
# deletionTimestamp or InstanceTerminating=True (the Node's own deletionTimestamp counts only without a NodeClaim).

# (Karpenter's case, the NodeClaim of node a, whether a is disrupted)
DELETING_CLAIM = [
    ("Candidate Filtering: should not consider candidates that are deleting", {"deleting": True}, False),
    ("Candidate Filtering: a NodeClaim whose instance is terminating is deleting",
     {"conditions": [INSTANCE_TERMINATING]}, False),
    ("Candidate Filtering: a NodeClaim that is not deleting leaves its node a candidate", {}, True),
]


@pytest.mark.parametrize(("claim", "taken"), [c[1:] for c in DELETING_CLAIM], ids=[c[0] for c in DELETING_CLAIM])
def test_candidate_filtering_should_not_consider_candidates_that_are_deleting(claim: dict[str, Any],
                                                                              taken: bool) -> None:
    """controllers/disruption/suite_test.go, Describe("Candidate Filtering"), It("should not consider candidates
    that are deleting"): the NodeClaim gets a deletionTimestamp, the Node does not; NewCandidate answers "node is
    deleting or marked for deletion"."""
    out = plan_dict(nodepool(), node("a"), nodeclaim("claim-a", "a", **claim), pod("web", "a"),
                    node("b", zone="us-east-1b"), pod("other", "b"))
    assert ("a" in disrupted(out)) is taken
    if not taken:
        entry = blocked_of(out, "a")
        assert (entry["method"], entry["reason"]) == ("all", "it is already being deleted")


# (Karpenter's case, documents, allowed disruptions for every reason)
BUDGET_MAPPING = [
    ("should consider nodes with a deletion timestamp set and MarkedForDeletion to the disruption count",
     # Karpenter deletes NodeClaim 0 and marks NodeClaim 1 for deletion (ebb's mark is the disruption taint)
     [nodepool(budgets=[{"nodes": "100%"}]), node("n0"), nodeclaim("c0", "n0", deleting=True),
      node("n1", taints=[TAINT_DISRUPTED]), nodeclaim("c1", "n1"), _nodes_with_claims(range(2, 10))], 8),
    ("should not consider nodes that have the terminating status condition as part of disruption count",
     [nodepool(budgets=[{"nodes": "100%"}]), _nodes_with_claims(range(10)), node("t"),
      nodeclaim("ct", "t", conditions=[INSTANCE_TERMINATING])], 10),
    ("should not return a negative disruption value",
     [nodepool(budgets=[{"nodes": "10%"}]), _nodes_with_claims(range(10), deleting=True)], 0),
    ("no deleting NodeClaim: the budget allows all of them", [nodepool(budgets=[{"nodes": "100%"}]),
                                                              _nodes_with_claims(range(10))], 10),
]


@pytest.mark.parametrize(("docs", "allowed"), [c[1:] for c in BUDGET_MAPPING], ids=[c[0] for c in BUDGET_MAPPING])
def test_build_disruption_budget_mapping_deleting_nodeclaims(docs: list[Any], allowed: int) -> None:
    """controllers/disruption/suite_test.go, Describe("BuildDisruptionBudgetMapping"): ten initialized nodes with
    their NodeClaims; a deleting NodeClaim's node counts against the budget, a terminating one is not counted at
    all."""
    out = plan_dict(*docs)
    assert {reason: budget_of(out, "default", reason) for reason in REASONS} == dict.fromkeys(REASONS, allowed)


# -- a budget's base is the pool's initialized nodes --------------------------------------------------------------
# controllers/disruption/helpers.go, BuildDisruptionBudgetMapping: "We only consider nodes that we own and are
# initialized towards the total" (neither in the total nor among the NotReady ones).

# (Karpenter's case, the pool's budget, extra documents next to ten initialized nodes with NodeClaims, allowed)
UNINITIALIZED_BUDGET = [
    ("should not consider nodes that are not initialized as part of disruption count", "100%",
     [node("new", initialized=False), nodeclaim("c-new", "new", initialized=False)], 10),
    ("should not consider nodes that are not initialized as part of disruption count (10%: no round-up from 11)",
     "10%", [node("new", initialized=False), nodeclaim("c-new", "new", initialized=False)], 1),
    ("should not consider nodes that are not initialized as part of disruption count (nor as NotReady)", "5",
     [node("new", initialized=False, ready=False), nodeclaim("c-new", "new", initialized=False)], 5),
    ("should not consider nodes that are not managed as part of disruption count", "100%", [node("own", pool=None)],
     10),
    ("should consider not ready nodes to the disruption count", "100%",
     [node("sick", ready=False), nodeclaim("c-sick", "sick")], 10),  # 11 initialized, 1 NotReady
]


@pytest.mark.parametrize(("nodes", "extra", "allowed"), [c[1:] for c in UNINITIALIZED_BUDGET],
                         ids=[c[0] for c in UNINITIALIZED_BUDGET])
def test_build_disruption_budget_mapping_initialized_nodes(nodes: str, extra: list[Any], allowed: int) -> None:
    """controllers/disruption/suite_test.go, Describe("BuildDisruptionBudgetMapping"): ten initialized nodes with
    their NodeClaims and one more node; an uninitialized node is neither in the base of a percentage nor counted
    NotReady, an initialized NotReady node is both."""
    out = plan_dict(nodepool(budgets=[{"nodes": nodes}]), _nodes_with_claims(range(10)), *extra)
    assert {reason: budget_of(out, "default", reason) for reason in REASONS} == dict.fromkeys(REASONS, allowed)


# -- the pods of deleting nodes are placed first; a disruption's pods never count on an uninitialized node -----------
# controllers/disruption/helpers.go, SimulateScheduling: the pods to schedule are the pending pods, the candidates'
# pods and the currently reschedulable pods of the deleting nodes ("deletingNodePods"); a pod that lands on an
# uninitialized existing node is a scheduling error ("would schedule against uninitialized"), unless it comes from a
# deleting node. It is used by consolidation, its validation and drift alike.

def small(name: str, node_name: str, *, started: str = OLD) -> dict[str, Any]:
    """A 200m / 256Mi pod of `node_name`, started long ago unless `started` says when."""
    return pod(name, node_name, cpu="200m", memory="256Mi", started=started)


def _parallelization_cluster(old: dict[str, Any]) -> list[Any]:
    """Node ``old`` with three 1-cpu pods, and ``new`` (m5.2xlarge, 8 cpu) launched for them, holding two so far: on
    its own, new's two pods would fit a cheaper c5.xlarge; with old's three they need all of new."""
    return [nodepool(), old, *[pod(f"old-{i}", "old", cpu="1", memory="1Gi") for i in range(3)],
            node("new", itype="m5.2xlarge", zone="us-east-1b"),
            *[pod(f"new-{i}", "new", cpu="1", memory="1Gi") for i in range(2)]]


# (Karpenter's case, node old, whether new is disrupted)
PARALLELIZATION = [
    ("should not consolidate a node that is launched for pods on a deleting node (MarkedForDeletion)",
     node("old", itype="m5.2xlarge", taints=[TAINT_DISRUPTED]), False),
    ("should not consolidate a node that is launched for pods on a deleting node (deletionTimestamp)",
     node("old", itype="m5.2xlarge", deleting=True), False),
    ("old is not deleting: its pods stay where they are and new is consolidated",
     node("old", itype="m5.2xlarge", annotations={"karpenter.sh/do-not-disrupt": "true"}), True),
]


@pytest.mark.parametrize(("old", "taken"), [c[1:] for c in PARALLELIZATION], ids=[c[0] for c in PARALLELIZATION])
def test_consolidation_parallelization_should_not_consolidate_a_node_launched_for_pods_on_a_deleting_node(
        old: dict[str, Any], taken: bool) -> None:
    """controllers/disruption/consolidation_test.go, Describe("Consolidation"), Context("Parallelization"),
    It("should not consolidate a node that is launched for pods on a deleting node"): the node launched for a
    deleting node's pods is not consolidated while those pods still need it."""
    out = plan_dict(*_parallelization_cluster(old))
    assert ("new" in disrupted(out)) is taken, out["commands"]
    if not taken:
        assert blocked_of(out, "new")["method"] == "single-node-consolidation"


# (Karpenter's case, the pod's annotations, PDBs over it, whether it needs room now)
CURRENTLY_RESCHEDULABLE = [
    ("considers pod as currently reschedulable when no PDBs match", {}, [pdb("other", {"app": "other"},
                                                                            max_unavailable=0)], True),
    ("pods which are not currently reschedulable due to PDBs: 100% min available", {},
     [pdb("p", {"app": "p"}, min_available="100%")], False),
    ("pods which are not currently reschedulable due to PDBs: 0% max unavailable", {},
     [pdb("p", {"app": "p"}, max_unavailable="0%")], False),
    ("pods which are not currently reschedulable due to PDBs: 0 max unavailable", {},
     [pdb("p", {"app": "p"}, max_unavailable=0)], False),
    ("pods which are not currently reschedulable due to PDBs: multiple PDBs on the same pod", {},
     [pdb("pdb-1", {"app": "p"}, min_available="100%"), pdb("pdb-2", {"app": "p"}, min_available="100%")], False),
    ("a PDB that allows no disruption now but is not fully blocking: the pod will go, it needs room", {},
     [pdb("p", {"app": "p"}, min_available=1)], True),
    ("does not consider pod with do-not-disrupt annotation as currently reschedulable",
     {"karpenter.sh/do-not-disrupt": "true"}, [], False),
]
#: pdb.go isEvictable: a pod that tolerates the disrupted taint is never evicted, so no PDB holds it: it needs room
TOLERATING_CURRENTLY_RESCHEDULABLE = [
    ("a pod tolerating the disrupted taint under a fully blocking PDB", [pdb("p", {"app": "p"}, max_unavailable=0)]),
    ("a pod tolerating the disrupted taint under two PDBs",
     [pdb("pdb-1", {"app": "p"}, min_available="100%"), pdb("pdb-2", {"app": "p"}, max_unavailable=1)]),
]


@pytest.mark.parametrize(("annotations", "pdbs", "evicted"), [c[1:] for c in CURRENTLY_RESCHEDULABLE],
                         ids=[c[0] for c in CURRENTLY_RESCHEDULABLE])
def test_is_currently_reschedulable(annotations: dict[str, str], pdbs: list[Any], evicted: bool) -> None:
    """utils/pdb/suite_test.go, Describe("IsCurrentlyReschedulable"): which pods of a deleting node the simulation
    keeps room for (helpers.go: GetCurrentlyReschedulablePods of the deleting nodes); the same pod on a node that
    is not going away needs none."""
    docs = [nodepool(), node("old", deleting=True), pod("p", "old", labels={"app": "p"}, annotations=annotations),
            node("stays", zone="us-east-1b"), pod("q", "stays", labels={"app": "p"}, annotations=annotations), *pdbs]
    view = ClusterView.build(snapshot(*docs), NOW)
    assert [p.key for p in view.evicted_soon()] == (["default/p"] if evicted else [])


@pytest.mark.parametrize("pdbs", [c[1] for c in TOLERATING_CURRENTLY_RESCHEDULABLE],
                         ids=[c[0] for c in TOLERATING_CURRENTLY_RESCHEDULABLE])
def test_is_currently_reschedulable_tolerating_the_disrupted_taint(pdbs: list[Any]) -> None:
    """utils/pdb/pdb.go, isEvictable: "if the pod isn't eligible for being evicted, then the predicate doesn't
    matter"; a pod tolerating karpenter.sh/disrupted is not (pod.IsEvictable), so it is never fully blocked and
    IsCurrentlyReschedulable holds: the pod goes with its node, and the simulation keeps room for it."""
    tolerate = [{"operator": "Exists"}]
    docs = [nodepool(), node("old", deleting=True), pod("p", "old", labels={"app": "p"}, tolerations=tolerate),
            node("stays", zone="us-east-1b"), *pdbs]
    view = ClusterView.build(snapshot(*docs), NOW)
    assert [p.key for p in view.evicted_soon()] == ["default/p"]


def test_drift_makes_room_for_a_pod_tolerating_the_disrupted_taint_whatever_its_pdb() -> None:
    """The same rule in drift (Karpenter's SimulateScheduling sizes a replacement for every currently reschedulable
    pod): the drifted node's only pod tolerates every taint and its PDB allows no eviction. Nothing evicts it, so it
    dies with its node: the node is replaced, not deleted as if the pod could stay behind."""
    out = plan_dict(nodepool(node_hash="h1"), node("low", itype="m5.large", node_hash="h0"),
                    pod("db-0", "low", cpu="1500m", labels={"app": "db"}, owner=STS,
                        tolerations=[{"operator": "Exists"}]),
                    pdb("db", {"app": "db"}, max_unavailable=0))
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [("drift", "replace", ["low"])]


def test_simulate_scheduling_should_allow_pods_on_deleting_nodes_to_reschedule_to_uninitialized_nodes() -> None:
    """controllers/disruption/suite_test.go, Describe("Simulate Scheduling"), It("should allow pods on deleting nodes
    to reschedule to uninitialized nodes"), and helpers.go ("Only add a pod scheduling error if it isn't on an already
    deleting node"): the pod of a deleting node goes to the uninitialized replacement, the only node with room; a
    pod a disruption moves does not."""
    view = ClusterView.build(snapshot(
        nodepool(), node("old", deleting=True), pod("evicted", "old", cpu="1500m"),
        node("up", zone="us-east-1b", initialized=False), nodeclaim("c-up", "up", initialized=False),
        node("busy", zone="us-east-1c"), pod("moving", "busy", cpu="1500m")), NOW)
    _, state = simulation(view)
    assert state.bin_name(state.placed["default/evicted"]) == "up"
    assert view.evicted_soon() == [p for p in view.snapshot.pods if p.name == "evicted"]
    leaving = state.remove_node("busy")
    failures, _ = state.place_all(leaving, max_new=0)
    assert set(failures) == {"default/moving"}  # "up" is full now, and set aside for moved pods anyway


# (Karpenter's case, node a, the method and action taken on b, or None when nothing is)
UNINITIALIZED_DESTINATION = [
    ("won't delete node if it would require pods to schedule on an uninitialized node",
     [node("a", itype="t3.medium", initialized=False), nodeclaim("c-a", "a", initialized=False)], None),
    ("an initialized node takes them: b is deleted", [node("a", itype="t3.medium")],
     ("single-node-consolidation", "delete")),
]


@pytest.mark.parametrize(("a", "taken"), [c[1:] for c in UNINITIALIZED_DESTINATION],
                         ids=[c[0] for c in UNINITIALIZED_DESTINATION])
def test_consolidation_delete_wont_delete_node_if_it_would_require_pods_to_schedule_on_an_uninitialized_node(
        a: list[Any], taken: tuple[str, str] | None) -> None:
    """controllers/disruption/consolidation_test.go, Describe("Consolidation"), Context("Delete"), It("won't delete
    node if it would require pods to schedule on an uninitialized node"): two nodes of the cheapest type, a (not
    initialized) with two pods, b with one that fits on a; no cheaper node exists, so b stays."""
    out = plan_dict(nodepool(), *a, small("a-0", "a"), small("a-1", "a"),
                    node("b", itype="t3.medium", zone="us-east-1b"), small("b-0", "b"))
    assert [(c["method"], c["action"]) for c in out["commands"] if c["nodes"] == ["b"]] == \
        ([taken] if taken else [])
    if taken is None:
        assert out["commands"] == []
        assert "node a has room, but it is not initialized yet" in blocked_of(out, "b")["reason"]


@pytest.mark.parametrize(("a_initialized", "action"), [(False, "replace"), (True, "delete")],
                         ids=["expired node's pod does not count on an uninitialized node: a replacement is launched",
                              "an initialized node takes it: the expired node is deleted"])
def test_simulate_scheduling_uninitialized_nodes_for_expiration_and_drift(a_initialized: bool, action: str) -> None:
    """helpers.go, SimulateScheduling's uninitialized-node error holds for every method that simulates (drift in
    Karpenter; expiration and drift in ebb): the expired node's pod would fit on a, which is not initialized."""
    out = plan_dict(nodepool(expire_after="24h"), node("a", itype="t3.medium", created=ago(hours=1),
                                                        initialized=a_initialized),
                    node("b", itype="t3.medium", zone="us-east-1b"), small("b-0", "b"))
    assert [(c["method"], c["nodes"], c["action"]) for c in out["commands"]] == [("expiration", ["b"], action)]


# -- a consolidation does not move pods onto a node inside its consolidateAfter -------------------------------------
# provisioning/scheduling/scheduler.go (addToExistingNode, v1.14): in a consolidation simulation
# (IsConsolidationSimulation: consolidation and its validation, not drift) a candidate's pod is not placed on an
# existing node that IsUnderConsolidateAfter (utils/disruption/disruption.go: consolidateAfter neither 0 nor Never,
# and less than that since the node's pods last changed); pending pods and pods of deleting nodes are exempt.

def _destination_cluster(*, b: dict[str, Any], dest_pool: str = "default", **dest_pool_kwargs: Any) -> list[Any]:
    """Node a (t3.medium, the cheapest type) whose pods changed 30 s ago, and node b with one pod that fits on a;
    the default NodePool's consolidateAfter is 1m."""
    pools = [nodepool(consolidate_after="1m")]
    if dest_pool != "default":
        pools.append(nodepool(dest_pool, **dest_pool_kwargs))
    return [*pools, node("a", pool=dest_pool, itype="t3.medium"), small("a-0", "a"),
            small("a-1", "a", started=ago(seconds=30)), b, small("b-0", "b")]


B_CHEAPEST = node("b", itype="t3.medium", zone="us-east-1b")
B_DEARER = node("b", itype="m5.2xlarge", zone="us-east-1b")

# (Karpenter's case, the cluster, minutes after NOW, the command on b as (method, action) or None)
DESTINATION_WINDOW = [
    ("should not consolidate pods onto a destination node that is under its consolidateAfter window",
     _destination_cluster(b=B_CHEAPEST), 0, None),
    ("should not consolidate pods onto a destination node that is under its consolidateAfter window (2m later)",
     _destination_cluster(b=B_CHEAPEST), 2, ("single-node-consolidation", "delete")),
    ("should consolidate pods onto a destination node with consolidateAfter set to Never",
     _destination_cluster(b=B_CHEAPEST, dest_pool="dest", consolidate_after="Never"), 0,
     ("single-node-consolidation", "delete")),
    ("a destination NodePool with consolidateAfter 0s has no window",
     _destination_cluster(b=B_CHEAPEST, dest_pool="dest", consolidate_after="0s"), 0,
     ("single-node-consolidation", "delete")),
    ("should replace a node with a cheaper one even when consolidateAfter has not expired",
     _destination_cluster(b=B_DEARER), 0, ("single-node-consolidation", "replace")),
]


@pytest.mark.parametrize(("docs", "minutes", "taken"), [c[1:] for c in DESTINATION_WINDOW],
                         ids=[c[0] for c in DESTINATION_WINDOW])
def test_consolidation_delete_consolidate_after_window_of_the_destination(docs: list[Any], minutes: int,
                                                                          taken: tuple[str, str] | None) -> None:
    """controllers/disruption/consolidation_test.go, Describe("Consolidation"), Context("Delete"): b's pod would fit
    on a, whose pods changed 30 s ago; inside a's window (consolidateAfter 1m) b stays (no cheaper node exists for a
    t3.medium), past it b is deleted; a Never or 0s window never keeps pods away; a replacement needs no
    destination and is not held back."""
    out = plan_dict(*docs, now=NOW + timedelta(minutes=minutes))
    assert [(c["method"], c["action"]) for c in out["commands"] if c["nodes"] == ["b"]] == ([taken] if taken else [])
    if taken is None:
        assert out["commands"] == []
        assert ("node a has room, but consolidateAfter (1m) has not passed since its pods last changed at "
                "2026-11-23T18:29:30Z") in blocked_of(out, "b")["reason"]


@pytest.mark.parametrize(("arrived", "stale"), [(True, True), (False, False)],
                         ids=["validation uses a consolidation simulation: a pod arrived on the destination",
                              "nothing arrived: still valid"])
def test_validation_is_consolidation_simulation(arrived: bool, stale: bool) -> None:
    """controllers/disruption/validation.go: the re-check simulates with IsConsolidationSimulation too, so a command
    whose destination's pods changed in the meantime is stale."""
    docs = [nodepool(consolidate_after="1m"), node("a", itype="t3.medium"), small("a-0", "a"),
            small("a-1", "a"), B_CHEAPEST, small("b-0", "b")]
    [command] = plan(*docs).first.commands
    assert (command.method, command.nodes) == ("single-node-consolidation", ("b",))
    later = NOW + timedelta(seconds=15)
    fresher = [*docs, small("a-new", "a", started=ts(later - timedelta(seconds=5)))] if arrived else docs
    verdict = validate(command, snapshot(*fresher), later)
    assert (verdict is not None) is stale
    if verdict is not None:
        assert verdict.kind == Stale.POD_NO_LONGER_FITS
        assert "node a has room, but consolidateAfter (1m) has not passed" in verdict.text


# -- a terminating StatefulSet pod still needs its room -------------------------------------------------------------
# utils/pod/scheduling.go, IsReschedulable: an active pod, or a StatefulSet's pod that is terminating ("StatefulSet
# pods MUST get deleted before new pods are re-created"); IsDisruptable and the PDB check (IsEvictable) ignore pods
# that are terminating, so such a pod neither protects its node nor lets it count as empty.

STS = ("StatefulSet", "db")

# (Karpenter's case, pods on node a, the commands)
TERMINATING = [
    ("will not consider a node with a terminating StatefulSet pod as empty",
     [pod("db-0", "a", owner=STS, deleting=True)], []),
    ("will consider a node with terminating Deployment pods as empty",
     [pod(f"web-{i}", "a", deleting=True) for i in range(3)], [("emptiness", "delete", ["a"])]),
    ("a StatefulSet pod that is not terminating: not empty either", [pod("db-0", "a", owner=STS)], []),
    ("a Failed StatefulSet pod being deleted is not finished: its replacement needs its room (IsReschedulable)",
     [pod("db-0", "a", owner=STS, deleting=True, phase="Failed")], []),
    ("a Failed Deployment pod being deleted is: the node is empty",
     [pod("web-0", "a", deleting=True, phase="Failed")], [("emptiness", "delete", ["a"])]),
]


@pytest.mark.parametrize(("pods", "commands"), [c[1:] for c in TERMINATING], ids=[c[0] for c in TERMINATING])
def test_emptiness_terminating_pods(pods: list[Any], commands: list[tuple[str, str, list[str]]]) -> None:
    """controllers/disruption/emptiness_test.go, Describe("Emptiness"): node a is of the cheapest type and alone,
    so only emptiness could take it; its pods were evicted and are terminating."""
    out = plan_dict(nodepool(), node("a", itype="t3.medium"), *pods)
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == commands


def _owned_by(doc: dict[str, Any], *refs: tuple[str, str, bool]) -> dict[str, Any]:
    """``doc`` with these owner references (kind, name, controller); a kind written ``group/version:Kind`` is of that
    API version, else of the one Kubernetes gives it."""
    def api_version(kind: str) -> tuple[str, str]:
        if ":" in kind:
            version, _, plain = kind.partition(":")
            return version, plain
        return ("v1" if kind == "Node" else "apps/v1"), kind

    doc["metadata"]["ownerReferences"] = [{"apiVersion": api_version(kind)[0], "kind": api_version(kind)[1],
                                           "name": name, "uid": f"uid-{name}", "controller": controller}
                                          for kind, name, controller in refs]
    return doc


# (case, node a's pod's owner references, whether it is terminating, the commands): utils/pod/scheduling.go IsOwnedBy
# reads every reference
OWNERS = [
    ("a StatefulSet reference after the controller's: still a StatefulSet's terminating pod, the node is not empty",
     [("ReplicaSet", "rs", True), ("StatefulSet", "db", False)], True, []),
    ("the controller's reference alone: a ReplicaSet's terminating pod, the node is empty",
     [("ReplicaSet", "rs", True)], True, [("emptiness", "delete", ["a"])]),
    ("a DaemonSet reference after the controller's: a DaemonSet's pod, the node is empty",
     [("ReplicaSet", "rs", True), ("DaemonSet", "agent", False)], False, [("emptiness", "delete", ["a"])]),
    ("the controller's reference alone: a ReplicaSet's running pod with nowhere to go, the node stays",
     [("ReplicaSet", "rs", True)], False, []),
    ("another group's DaemonSet (OpenKruise's Advanced DaemonSet) is not apps/v1's: its pod needs a home, the node "
     "stays", [("apps.kruise.io/v1alpha1:DaemonSet", "agent", True)], False, []),
    ("another group's StatefulSet: its terminating pod is a ReplicaSet's alike, the node is empty",
     [("apps.kruise.io/v1beta1:StatefulSet", "db", True)], True, [("emptiness", "delete", ["a"])]),
]


@pytest.mark.parametrize(("refs", "deleting", "commands"), [c[1:] for c in OWNERS], ids=[c[0] for c in OWNERS])
def test_owner_references_are_all_read(refs: list[tuple[str, str, bool]], deleting: bool,
                                       commands: list[tuple[str, str, list[str]]]) -> None:
    """utils/pod/scheduling.go, IsOwnedByStatefulSet and IsOwnedByDaemonSet: any of the pod's owner references, not
    only its controller's. Node a, of the cheapest type, holds one pod (IsReschedulable: a StatefulSet's terminating
    pod still needs a home; a DaemonSet's never does)."""
    out = plan_dict(nodepool(), node("a", itype="t3.medium"),
                    _owned_by(pod("p", "a", deleting=deleting), *refs))
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == commands


# (Karpenter's case, the terminating pod of node a, extra documents)
TERMINATING_UNPROTECTED = [
    ("should consider candidates that have do-not-disrupt terminating pods",
     pod("db-0", "a", owner=STS, deleting=True, annotations={"karpenter.sh/do-not-disrupt": "true"}), []),
    ("should consider candidates that have fully blocking PDBs on terminating pods",
     pod("db-0", "a", owner=STS, deleting=True, labels={"app": "db"}), [pdb("db", {"app": "db"}, max_unavailable=0)]),
]


@pytest.mark.parametrize(("terminating", "extra"), [c[1:] for c in TERMINATING_UNPROTECTED],
                         ids=[c[0] for c in TERMINATING_UNPROTECTED])
def test_candidate_filtering_terminating_pods_do_not_protect_the_node(terminating: dict[str, Any],
                                                                      extra: list[Any]) -> None:
    """controllers/disruption/suite_test.go, Describe("Candidate Filtering"): a terminating pod's do-not-disrupt or
    PDB does not stop the node (here the terminating pod is a StatefulSet's, which still needs a home), so a is
    consolidated."""
    out = plan_dict(nodepool(), node("a"), terminating, pod("web", "a"), node("b", zone="us-east-1b"),
                    pod("other", "b"), *extra)
    assert "a" in disrupted(out), out["blocked"]


# -- a do-not-disrupt that is neither "true" nor a positive duration is ignored ---------------------------------------
# utils/pod/scheduling.go, IsDoNotDisruptActive: "true" protects; a duration parsed by time.ParseDuration that is
# positive protects until status.startTime plus it (no startTime: protected, "fail safe"); anything else is ignored
# (with an event; ebb plan prints a warning instead).


def _started(doc: dict[str, Any], start: str | None) -> dict[str, Any]:
    """The pod `doc` with status.startTime `start` (None: the pod has not started)."""
    status = {k: v for k, v in doc["status"].items() if k != "startTime"}
    if start is not None:
        status["startTime"] = start
    return {**doc, "status": status}


# (Karpenter's case, the annotation's value or None, whether the pod has started, whether node a is protected)
DO_NOT_DISRUPT = [
    ("should return false when no annotation exists", None, True, False),
    ("should return true for 'true' annotation", "true", True, True),
    ("should return false and emit event for invalid duration format", "invalid-format", True, False),
    ("should return false and emit event for zero duration", "0s", True, False),
    ("should return false and emit event for negative duration", "-5m", True, False),
    ("should return true and emit disruptable-at event when duration has not expired", "15m", True, True),
    ("should return false and emit grace period elapsed event when duration has expired", "5m", True, False),
    ("should fail safe when start time is nil", "5m", False, True),
    ("Never is not a duration either", "Never", True, False),
    ("false", "false", True, False),
    # time.ParseDuration takes a sign and both spellings of microseconds
    ("a plus sign is Go's too", "+15m", True, True),
    ("a plus sign, expired", "+5m", True, False),
    ("a minus sign and a zero", "-0s", True, False),
    ("two signs are not a duration", "+-15m", True, False),
    ("fractions and units mixed", "0.25h1m", True, True),
]


@pytest.mark.parametrize(("value", "started", "protected"), [c[1:] for c in DO_NOT_DISRUPT],
                         ids=[c[0] for c in DO_NOT_DISRUPT])
@pytest.mark.parametrize("annotation", ["karpenter.sh/do-not-disrupt", "karpenter.sh/do-not-evict"])
def test_is_do_not_disrupt_active(annotation: str, value: str | None, started: bool, protected: bool) -> None:
    """utils/pod/suite_test.go, Describe("IsDoNotDisruptActive"): the pod on node a started 10 minutes ago (created
    then, too); b has room for it. ebb reads the older do-not-evict the same way."""
    web = pod("web", "a", started=ago(minutes=10), annotations={annotation: value} if value is not None else {})
    out = plan_dict(nodepool(), node("a"), _started(web, ago(minutes=10) if started else None),
                    node("b", zone="us-east-1b"), pod("other", "b"))
    assert ("a" not in disrupted(out)) is protected, out["commands"]


@pytest.mark.parametrize(("value", "method"), [("invalid-format", "drift"), ("true", None)],
                         ids=["should drift nodes with pods that have an invalid do-not-disrupt annotation format",
                              "should ignore nodes with the karpenter.sh/do-not-disrupt annotation set to true"])
def test_drift_do_not_disrupt(value: str, method: str | None) -> None:
    """controllers/disruption/drift_test.go, Describe("Drift"): a drifted node whose pod has do-not-disrupt."""
    out = plan_dict(nodepool(node_hash="h2"), node("a", node_hash="h1"),
                    pod("web", "a", annotations={"karpenter.sh/do-not-disrupt": value}))
    assert [c["method"] for c in out["commands"]] == ([method] if method else [])


def test_an_ignored_do_not_disrupt_value_is_named_in_the_input_warnings() -> None:
    """What Karpenter says with an InvalidDoNotDisruptAnnotation event, ebb plan says on stderr."""
    snap = snapshot(nodepool(), node("a"), pod("web", "a", annotations={"karpenter.sh/do-not-disrupt": "soon"}),
                    pod("db", "a", annotations={"karpenter.sh/do-not-disrupt": "false"}),
                    pod("job", "a", annotations={"karpenter.sh/do-not-evict": "1h"}))
    assert input_warnings(snap) == [
        "1 do-not-disrupt annotation(s) are neither true nor a positive duration like 30m and are ignored, as "
        "Karpenter ignores them: pod default/web karpenter.sh/do-not-disrupt='soon'"]


# -- unhealthyPodEvictionPolicy: AlwaysAllow lets an unready pod go --------------------------------------------------
# utils/pdb/pdb.go, isEvictable: when the pod's one PDB has canAlwaysEvictUnhealthyPods (AlwaysAllow) and the pod is
# not Ready, the PDB does not stop its eviction (two PDBs still do).

ALWAYS = "AlwaysAllow"

# (Karpenter's case, the PDB's policy, whether the pod is Ready, extra PDB, whether node a is taken)
UNHEALTHY_POLICY = [
    ("can evict unhealthy pods when UnhealthyPodEvictionPolicy is set to always allow", ALWAYS, False, False, True),
    ("can't evict unhealthy pods when UnhealthyPodEvictionPolicy is not set", None, False, False, False),
    ("IfHealthyBudget: the budget decides", "IfHealthyBudget", False, False, False),
    ("AlwaysAllow and a healthy pod: the budget decides", ALWAYS, True, False, False),
    ("AlwaysAllow, but the pod has two PDBs", ALWAYS, False, True, False),
]


@pytest.mark.parametrize(("policy", "ready", "two", "taken"), [c[1:] for c in UNHEALTHY_POLICY],
                         ids=[c[0] for c in UNHEALTHY_POLICY])
def test_can_evict_pods_unhealthy_pod_eviction_policy(policy: str | None, ready: bool, two: bool,
                                                      taken: bool) -> None:
    """utils/pdb/suite_test.go, Describe("CanEvictPods"): a PDB with minAvailable 100% over the pod on node a."""
    pdbs = [pdb("web", {"app": "web"}, min_available="100%", unhealthy_pod_eviction_policy=policy)]
    if two:
        pdbs.append(pdb("web-2", {"app": "web"}, max_unavailable=1))
    out = plan_dict(nodepool(), node("a"), pod("web", "a", labels={"app": "web"}, ready=ready),
                    node("b", zone="us-east-1b"), pod("other", "b"), *pdbs)
    assert ("a" in disrupted(out)) is taken, out["blocked"]


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"],
                         ids=["if the candidate is on-demand node", "if the candidate is spot node"])
def test_consolidation_replace_can_replace_nodes_considers_pdb_policy(capacity_type: str) -> None:
    """controllers/disruption/consolidation_test.go, Describe("Consolidation"), Context("Replace"),
    DescribeTable("can replace nodes, considers PDB policy"): three unready pods under a maxUnavailable 0 PDB with
    AlwaysAllow on an expensive node are replaced onto a cheaper one (spot-to-spot enabled, as in that suite)."""
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}])
    out = plan_dict(pool, node("a", itype="m5.2xlarge", capacity_type=capacity_type),
                    *[pod(f"web-{i}", "a", labels={"app": "web"}, ready=False) for i in range(3)],
                    pdb("web", {"app": "web"}, max_unavailable=0, unhealthy_pod_eviction_policy=ALWAYS),
                    catalog([*[instance_type(f"s{i}.large", "2", "8Gi", 29, 0.05 + i / 1000, 0.01 + i / 1000)
                               for i in range(16)], instance_type("m5.2xlarge", "8", "32Gi", 58, 0.384, 0.14)]),
                    spot_to_spot=True)
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [
        ("single-node-consolidation", "replace", ["a"])]


@pytest.mark.parametrize(("policy", "evicted"), [(ALWAYS, True), (None, False)],
                         ids=["considers unhealthy pod as currently reschedulable when UnhealthyPodEvictionPolicy is "
                              "set to always allow",
                              "does not consider unhealthy pod as currently reschedulable when "
                              "UnhealthyPodEvictionPolicy is not set"])
def test_is_currently_reschedulable_unhealthy_pod_eviction_policy(policy: str | None, evicted: bool) -> None:
    """utils/pdb/suite_test.go, Describe("IsCurrentlyReschedulable"): the unready pod of a deleting node under a
    minAvailable 100% PDB."""
    view = ClusterView.build(snapshot(nodepool(), node("old", deleting=True),
                                      pod("p", "old", labels={"app": "p"}, ready=False),
                                      pdb("p", {"app": "p"}, min_available="100%",
                                          unhealthy_pod_eviction_policy=policy)), NOW)
    assert [p.key for p in view.evicted_soon()] == (["default/p"] if evicted else [])


# -- spot-to-spot is when every candidate is spot; 15 cheaper types only for a single node ----------------------------
# controllers/disruption/consolidation.go, computeConsolidation: allExistingAreSpot && the replacement may be spot ->
# computeSpotToSpotConsolidation (the feature gate; for a single candidate at least 15 cheaper instance types); a
# mixed set takes the ordinary path, where a replacement that may be spot is launched as spot.

SPOT_OR_ON_DEMAND = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]

# (Karpenter's case, capacity types of nodes a, b, c, spot-to-spot enabled, the command)
SPOT_MERGE = [
    ("can merge 3 nodes into 1 if the candidates have both spot and on-demand",
     ("on-demand", "on-demand", "spot"), False, ("replace", ["a", "b", "c"], "spot")),
    ("can merge 3 nodes into 1 (if the candidate is spot node): no 15 types asked of several nodes",
     ("spot", "spot", "spot"), True, ("replace", ["a", "b", "c"], "spot")),
    ("all spot, spot-to-spot disabled: no spot replacement, two of them are deleted instead",
     ("spot", "spot", "spot"), False, ("delete", ["a", "b"], None)),
]


@pytest.mark.parametrize(("capacity_types", "spot_to_spot", "command"), [c[1:] for c in SPOT_MERGE],
                         ids=[c[0] for c in SPOT_MERGE])
def test_consolidation_multi_nodeclaim_spot_and_on_demand(capacity_types: tuple[str, str, str], spot_to_spot: bool,
                                                          command: tuple[str, list[str], str | None]) -> None:
    """controllers/disruption/consolidation_test.go, Describe("Consolidation"), Context("Multi-NodeClaim"): three
    m5.xlarge nodes with a small pod each; the catalog has seven types, fewer than 15."""
    docs = [nodepool(requirements=SPOT_OR_ON_DEMAND)]
    for name, capacity_type, zone in zip("abc", capacity_types, ("us-east-1a", "us-east-1b", "us-east-1c"),
                                         strict=True):
        docs += [node(name, itype="m5.xlarge", capacity_type=capacity_type, zone=zone), pod(f"web-{name}", name)]
    out = plan_dict(*docs, spot_to_spot=spot_to_spot)
    assert [(c["method"], c["action"], sorted(c["nodes"]), c["replacements"][0]["capacityType"] if c["replacements"]
             else None) for c in out["commands"]] == [("multi-node-consolidation", *command)]


# -- drift on instance types matches offerings whether or not they are available now ---------------------------------
# controllers/nodeclaim/disruption/drift.go, instanceTypeNotFound: "InstanceType Offerings should return the full list
# of allowed instance types, even if they're temporarily unavailable"; it drifts a NodeClaim whose instance type, or
# an offering compatible with its zone and capacity type, is not in that list (Offerings.HasCompatible ignores
# Available, cloudprovider/types.go).


def _m5_large(**kwargs: Any) -> dict[str, Any]:
    """The test catalog with m5.large's entry as given (None: without m5.large)."""
    others = [instance_type(n, c, m, p, od, sp) for n, (c, m, p, od, sp) in TYPES.items() if n != "m5.large"]
    return catalog(others + ([instance_type("m5.large", "2", "8Gi", 29, 0.096, 0.035, **kwargs)] if kwargs else []))


# (Karpenter's case, the catalog, whether node a has its instance-type label, what the drift's explanation says or
# None for no drift)
INSTANCE_TYPE_DRIFT = [
    ("should detect stale instance type drift if the instance type label doesn't exist", _m5_large(
        zones=["us-east-1a"]), False, "a: drifted: it has no node.kubernetes.io/instance-type label"),
    ("should detect stale instance type drift if the instance type doesn't exist", _m5_large(), True,
     "a: drifted: instance type m5.large is not in the catalog (it is offered nowhere)"),
    ("should detect stale instance type drift if the instance type offerings aren't compatible with the nodeclaim",
     _m5_large(zones=["us-east-1b", "us-east-1c"]), True,
     "a: drifted: instance type m5.large is no longer offered as on-demand in us-east-1a"),
    ("an offering that is temporarily unavailable is still an offering: no drift",
     _m5_large(available=False), True, None),
    ("the offering exists and is available: no drift", _m5_large(zones=["us-east-1a"]), True, None),
]


@pytest.mark.parametrize(("types", "labelled", "says"), [c[1:] for c in INSTANCE_TYPE_DRIFT],
                         ids=[c[0] for c in INSTANCE_TYPE_DRIFT])
def test_drift_stale_instance_type(types: dict[str, Any], labelled: bool, says: str | None) -> None:
    """controllers/nodeclaim/disruption/drift_test.go, Describe("Drift"): node a is an on-demand m5.large in
    us-east-1a; the input's catalog is the cloud provider's list of instance types. ("... if the instance type
    offerings doesn't exist" has no row: an InstanceTypeCatalog entry without offerings is an input error.)"""
    a = node("a")
    if not labelled:
        a["metadata"]["labels"].pop("node.kubernetes.io/instance-type")
    out = plan_dict(nodepool(), a, pod("web", "a", cpu="1500m"), types)
    drift = [c["explanation"] for c in out["commands"] if c["method"] == "drift"]
    assert len(drift) == (1 if says else 0), out["commands"]
    assert all(b["method"] != "drift" for b in out["blocked"]), out["blocked"]
    if says:
        assert drift[0].startswith(says), drift[0]


# -- drift reads the NodeClaim -----------------------------------------------------------------------------------------
# controllers/nodeclaim/disruption/drift.go: areRequirementsDrifted judges the NodePool's requirements on
# scheduling.NewLabelRequirements(nodeClaim.Labels), and areStaticFieldsDrifted compares the NodePool's hash with
# nodeClaim.Annotations (which Karpenter's hash controller re-stamps when the hash version changes; the Node keeps the
# copy it registered with). ebb reads the Node for what its NodeClaim does not say (a label it lacks, no hash).

TEAM_BLUE = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
             {"key": "example.com/team", "operator": "In", "values": ["blue"]}]
HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION = "karpenter.sh/nodepool-hash-version"

# (the case, the NodePool's arguments, the Node's, its NodeClaim's or None for none, what the drift's explanation says
# or None for no drift)
NODECLAIM_DRIFT = [
    ("a Node relabelled by hand while its NodeClaim still satisfies the requirement: no drift",
     {"requirements": TEAM_BLUE}, {"labels": {"example.com/team": "red"}}, {"labels": {"example.com/team": "blue"}},
     None),
    ("a NodeClaim that no longer satisfies the requirement drifts whatever its Node says",
     {"requirements": TEAM_BLUE}, {"labels": {"example.com/team": "blue"}}, {"labels": {"example.com/team": "red"}},
     "a: drifted: its NodeClaim claim-a's example.com/team=red no longer satisfies NodePool default's requirement "
     "example.com/team In ['blue']"),
    ("a label the NodeClaim lacks is read on the Node: satisfied", {"requirements": TEAM_BLUE},
     {"labels": {"example.com/team": "blue"}}, {}, None),
    ("a label the NodeClaim lacks is read on the Node: not satisfied", {"requirements": TEAM_BLUE},
     {"labels": {"example.com/team": "red"}}, {}, "a: drifted: its example.com/team=red no longer satisfies"),
    ("without a NodeClaim, the Node's labels", {"requirements": TEAM_BLUE}, {"labels": {"example.com/team": "red"}},
     None, "a: drifted: its example.com/team=red no longer satisfies"),
    ("the NodeClaim's hash, re-stamped after a hash-version change, differs: drift",
     {"node_hash": "h3", "hash_version": "v4"}, {"node_hash": "h0", "hash_version": "v3"},
     {"annotations": {HASH: "h2", HASH_VERSION: "v4"}},
     "a: drifted: its NodeClaim claim-a's nodepool-hash h2 differs from NodePool default's h3"),
    ("the NodeClaim's hash is the NodePool's; the Node's registration copy differs: no drift",
     {"node_hash": "h3", "hash_version": "v4"}, {"node_hash": "h0", "hash_version": "v4"},
     {"annotations": {HASH: "h3", HASH_VERSION: "v4"}}, None),
    ("a NodeClaim without a hash: the Node's is read", {"node_hash": "h2"}, {"node_hash": "h1"}, {},
     "a: drifted: its nodepool-hash h1 differs from NodePool default's h2"),
]


@pytest.mark.parametrize(("pool_kwargs", "node_kwargs", "claim_kwargs", "says"), [c[1:] for c in NODECLAIM_DRIFT],
                         ids=[c[0] for c in NODECLAIM_DRIFT])
def test_drift_reads_the_nodeclaim(pool_kwargs: dict[str, Any], node_kwargs: dict[str, Any],
                                   claim_kwargs: dict[str, Any] | None, says: str | None) -> None:
    """Node a, with a pod only a new node takes, and its NodeClaim claim-a (``claim_kwargs``)."""
    claims = [nodeclaim("claim-a", "a", **claim_kwargs)] if claim_kwargs is not None else []
    out = plan_dict(nodepool(**pool_kwargs), node("a", **node_kwargs), pod("web", "a", cpu="1500m"), *claims)
    drift = [c["explanation"] for c in out["commands"] if c["method"] == "drift"]
    assert len(drift) == (1 if says else 0), out["commands"]
    assert all(b["method"] != "drift" for b in out["blocked"]), out["blocked"]
    if says:
        assert drift[0].startswith(says), drift[0]


# instanceTypeNotFound reads nodeClaim.Labels too: the instance type, and the zone and capacity type its offerings must
# be compatible with. The catalog offers m5.large only in us-east-1b; every other type everywhere.

# (the case, the Node's arguments, its NodeClaim's labels or None for no NodeClaim, what the drift's explanation says
# or None for no drift)
NODECLAIM_OFFERING_DRIFT = [
    ("a Node relabelled by hand to an offered type while its NodeClaim's type is no longer offered there: drift",
     {"itype": "c5.large", "zone": "us-east-1a"}, {"node.kubernetes.io/instance-type": "m5.large",
                                                  "topology.kubernetes.io/zone": "us-east-1a"},
     "a: drifted: instance type m5.large is no longer offered as on-demand in us-east-1a (its NodeClaim claim-a's "
     "labels; the Node's say c5.large, on-demand in us-east-1a)"),
    ("a Node relabelled by hand to a type not offered while its NodeClaim's type is: no drift",
     {"itype": "m5.large", "zone": "us-east-1a"}, {"node.kubernetes.io/instance-type": "c5.large",
                                                  "topology.kubernetes.io/zone": "us-east-1a"}, None),
    ("the NodeClaim's zone, where its type is offered, over the Node's: no drift",
     {"itype": "m5.large", "zone": "us-east-1a"}, {"node.kubernetes.io/instance-type": "m5.large",
                                                  "topology.kubernetes.io/zone": "us-east-1b"}, None),
    ("labels the NodeClaim lacks are read on the Node", {"itype": "m5.large", "zone": "us-east-1a"}, {},
     "a: drifted: instance type m5.large is no longer offered as on-demand in us-east-1a"),
    ("without a NodeClaim, the Node's labels", {"itype": "m5.large", "zone": "us-east-1a"}, None,
     "a: drifted: instance type m5.large is no longer offered as on-demand in us-east-1a"),
]


@pytest.mark.parametrize(("node_kwargs", "claim_labels", "says"), [c[1:] for c in NODECLAIM_OFFERING_DRIFT],
                         ids=[c[0] for c in NODECLAIM_OFFERING_DRIFT])
def test_offering_drift_reads_the_nodeclaim(node_kwargs: dict[str, Any], claim_labels: dict[str, str] | None,
                                            says: str | None) -> None:
    """Node a, with a pod only a new node takes, and its NodeClaim claim-a labelled ``claim_labels``."""
    claims = [nodeclaim("claim-a", "a", labels=claim_labels)] if claim_labels is not None else []
    out = plan_dict(nodepool(), node("a", **node_kwargs), pod("web", "a", cpu="1500m"),
                    _m5_large(zones=["us-east-1b"]), *claims)
    drift = [c["explanation"] for c in out["commands"] if c["method"] == "drift"]
    assert len(drift) == (1 if says else 0), out["commands"]
    assert all(b["method"] != "drift" for b in out["blocked"]), out["blocked"]
    if says:
        assert drift[0].startswith(says), drift[0]


# -- expiry is measured from the NodeClaim -----------------------------------------------------------------------------
# controllers/nodeclaim/expiration/controller.go: expirationTime := nodeClaim.CreationTimestamp + expireAfter (the
# NodeClaim is created before its Node registers); utils/disruption LifetimeRemaining scales the disruption cost
# from the same time. A node without a NodeClaim is measured from its own creation.

# (Karpenter's case, the Node's creation, its NodeClaim's creation or None for no NodeClaim, whether it expires)
EXPIRATION = [
    ("should delete NodeClaims if the nodeClaim is expired but the node isn't", ago(minutes=30), ago(hours=25), True),
    ("should not remove non-expired NodeClaims", ago(hours=25), ago(minutes=30), False),
    ("a node without a NodeClaim: its own age", ago(hours=25), None, True),
]


@pytest.mark.parametrize(("node_created", "claim_created", "expires"), [c[1:] for c in EXPIRATION],
                         ids=[c[0] for c in EXPIRATION])
def test_expiration(node_created: str, claim_created: str | None, expires: bool) -> None:
    """controllers/nodeclaim/expiration/suite_test.go, Describe("Expiration"), with expireAfter 24h. (Karpenter
    deletes an expired NodeClaim outright; ebb's expiration is budgeted, a deliberate difference.)"""
    claims = [nodeclaim("c-a", "a", created=claim_created)] if claim_created is not None else []
    out = plan_dict(nodepool(expire_after="24h"), node("a", created=node_created), pod("web", "a", cpu="1500m"),
                    *claims)
    assert ([c["method"] for c in out["commands"]] == ["expiration"]) is expires, out["commands"]
    if expires:
        assert f"launched {claim_created or node_created}" in out["commands"][0]["explanation"]


# -- a multi-node replacement of a removed node's type, or dearer, is no replacement ----------------------------------
# controllers/disruption/multinodeconsolidation.go, filterOutSameInstanceType: when the replacement could be of the
# type of a node the command removes, every option costing as much as that node goes, whatever its type ("we should
# just keep that one and do a deletion only to reduce cluster disruption"); ebb's own engine drops only that type.
# Karpenter's rule holds under EngineOptions.karpenter_pace (the back-test's karpenter-* policies).

#: small (2 cpu) $0.12, medium (4 cpu) $0.20, wide (4 cpu) $0.22: two mediums cost $0.40
SAME_TYPE_TYPES = catalog([instance_type("small", "2", "8Gi", 29, 0.12), instance_type("medium", "4", "16Gi", 29, 0.20),
                           instance_type("wide", "4", "16Gi", 29, 0.22)])

# (the case, the type of nodes a and b, the cpu of the pod on each, Karpenter's pace, the command: method, action,
# nodes, the replacement's instance types)
SAME_TYPE = [
    ("[medium, medium] -> 1 of medium, wide: not a merge; the loop deletes one node instead", "medium", "1500m", True,
     ("single-node-consolidation", "delete", ["a"], [])),
    ("the same with ebb's own engine, whose merge search takes a merge only when it saves more than its nodes one at a "
     "time", "medium", "1500m", False, ("single-node-consolidation", "delete", ["a"], [])),
    ("[medium, medium] -> 1 of small: the cheaper option stays, wide goes", "medium", "750m", True,
     ("multi-node-consolidation", "replace", ["a", "b"], ["small"])),
    ("no removed node's type among the options: [small, small] -> 1 of medium, wide", "small", "1500m", True,
     ("multi-node-consolidation", "replace", ["a", "b"], ["medium", "wide"])),
]


@pytest.mark.parametrize(("itype", "cpu", "pace", "command"), [c[1:] for c in SAME_TYPE], ids=[c[0] for c in SAME_TYPE])
def test_multi_node_consolidation_filter_out_same_instance_type(itype: str, cpu: str, pace: bool,
                                                               command: tuple[str, str, list[str], list[str]]) -> None:
    """Two on-demand nodes a and b of ``itype`` with a pod of ``cpu`` each; neither pod fits beside the other on a
    small node, so a merge needs a replacement of 4 cpu, where a medium, the nodes' own type, is an option."""
    docs = [SAME_TYPE_TYPES, nodepool()]
    for name in "ab":
        docs += [node(name, itype=itype, cpu="2" if itype == "small" else "4", memory="8Gi"),
                 pod(f"web-{name}", name, cpu=cpu)]
    out = plan_json(make_plan(snapshot(*docs), NOW, options=EngineOptions(karpenter_pace=pace)))
    assert [(c["method"], c["action"], sorted(c["nodes"]), [t for r in c["replacements"] for t in r["instanceTypes"]])
            for c in out["commands"]] == [command]


# -- a pod an uninitialized node has room for is no replacement's ----------------------------------------------------
# controllers/provisioning/scheduling/scheduler.go, sortExistingNodes: the scheduler tries the initialized nodes, then
# the uninitialized ones, and only then a new NodeClaim; controllers/disruption/helpers.go, SimulateScheduling: a
# consolidation's pod on an uninitialized node is an UninitializedNodeError, so the consolidation is refused, replace
# or delete. ebb's own engine sets such a node aside and may launch a replacement for the pod instead; Karpenter's rule
# holds under EngineOptions.karpenter_pace.

# (the case, node u: initialized, and the cpu of the pod already on it; Karpenter's pace; the command taken on b)
UNINITIALIZED_ROOM = [
    ("a pod of b fits only on u, not initialized: no replacement for it, b stays", False, "200m", True, None),
    ("the same with ebb's own engine: b is replaced by a cheaper node", False, "200m", False,
     ("single-node-consolidation", "replace")),
    ("u has no room for it: b is replaced by a cheaper node", False, "1800m", True,
     ("single-node-consolidation", "replace")),
    ("u is initialized: b's pod moves there and b is deleted", True, "200m", True,
     ("single-node-consolidation", "delete")),
]


@pytest.mark.parametrize(("initialized", "used", "pace", "taken"), [c[1:] for c in UNINITIALIZED_ROOM],
                         ids=[c[0] for c in UNINITIALIZED_ROOM])
def test_consolidation_replace_wont_launch_for_a_pod_an_uninitialized_node_has_room_for(
        initialized: bool, used: str, pace: bool, taken: tuple[str, str] | None) -> None:
    """Node b (m5.large, $0.096/h) runs a 1-cpu pod; node full (c5.large, no NodePool's) has no room for it; node u
    (t3.medium, 2 cpu) runs a pod of ``used`` cpu. A t3.medium ($0.0416/h) would take b's pod for less."""
    docs = [nodepool(), node("b", itype="m5.large"), pod("b-0", "b", cpu="1", memory="256Mi"),
            node("full", pool=None, itype="c5.large", zone="us-east-1b"),
            pod("full-0", "full", cpu="1900m", memory="256Mi"),
            node("u", itype="t3.medium", zone="us-east-1c", initialized=initialized),
            nodeclaim("c-u", "u", initialized=initialized), pod("u-0", "u", cpu=used, memory="256Mi")]
    out = plan_json(make_plan(snapshot(*docs), NOW, options=EngineOptions(karpenter_pace=pace)))
    assert [(c["method"], c["action"]) for c in out["commands"] if c["nodes"] == ["b"]] == ([taken] if taken else [])


# controllers/nodeclaim/disruption/consolidation.go (v1.14): Consolidatable is kept off while the NodeClaim is not
# Initialized; emptiness.go and consolidation.go take only Consolidatable candidates. The initialization controller
# labels the Node karpenter.sh/initialized before it sets Initialized=True, so a labelled Node may have a NodeClaim
# that is not Initialized yet.
@pytest.mark.parametrize(("claim_initialized", "deleted"), [(True, True), (False, False)])
def test_an_empty_node_waits_for_its_nodeclaim_to_be_initialized(claim_initialized: bool, deleted: bool) -> None:
    docs = [nodepool(), node("e0"), nodeclaim("claim-e0", "e0", initialized=claim_initialized)]
    out = plan_dict(*docs)
    assert ("e0" in disrupted(out)) is deleted
    if not deleted:
        assert "NodeClaim claim-e0 is not Initialized yet" in blocked_of(out, "e0")["reason"]


def test_a_nodeclaim_without_conditions_leaves_initialization_to_the_nodes_label() -> None:
    """A NodeClaim written by hand with no ``status.conditions`` (Karpenter's carry theirs from launch) says nothing
    of Initialized: the Node's ``karpenter.sh/initialized`` label decides, as docs/decisions.md says."""
    claim = nodeclaim("claim-e0", "e0")
    del claim["status"]["conditions"]
    out = plan_dict(nodepool(), node("e0"), claim)
    assert "e0" in disrupted(out), out["blocked"]
    unlabelled = plan_dict(nodepool(), node("e0", initialized=False), claim)
    assert "e0" not in disrupted(unlabelled)


def test_a_drifted_node_is_replaced_while_its_nodeclaim_is_not_initialized() -> None:
    """Drift does not wait for Consolidatable: only emptiness and consolidation do."""
    docs = [nodepool(node_hash="new"), node("d0", node_hash="old"), pod("web", "d0"),
            nodeclaim("claim-d0", "d0", initialized=False)]
    assert "d0" in disrupted(plan_dict(*docs))


def _pinned(field_op: str, names: list[str]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": field_op, "values": names}]}]}}}


# (case, the pod's affinity, whether node a is taken): kube-scheduler ANDs a term's matchFields (metadata.name) into
# it, so a pod pinned to its node by name runs nowhere else; Karpenter's simulation ignores matchFields and would move
# it, and the pod recreated would stay Pending for ever. ebb reads the field as a requirement no other node meets.
MATCH_FIELDS = [
    ("a pod pinned to its node by metadata.name In stays, and so does its node", _pinned("In", ["a"]), False),
    ("a pod that only avoids another node by metadata.name NotIn moves", _pinned("NotIn", ["c"]), True),
    # the field is a node's name: ebb read it as a label no node has, so a pod pinned to another node moved nowhere
    ("a pod pinned by metadata.name to the node that stays moves there", _pinned("In", ["b"]), True),
]


@pytest.mark.parametrize(("affinity", "taken"), [c[1:] for c in MATCH_FIELDS], ids=[c[0] for c in MATCH_FIELDS])
def test_a_pod_pinned_by_match_fields_is_not_moved(affinity: dict[str, Any], taken: bool) -> None:
    out = plan_dict(nodepool(), node("a"), pod("p", "a", affinity=affinity), node("b", zone="us-east-1b"),
                    pod("other", "b"))
    assert ("a" in disrupted(out)) is taken, out["blocked"]


def test_a_daemonset_s_pods_pinned_by_match_fields_share_one_pod_class() -> None:
    """The DaemonSet controller pins each of its pods to its node by matchFields; such a pod never moves, so the field
    is not read for it, and the pods of one DaemonSet stay one pod class (compiled once a pass, not once a node). A
    pod of another owner pinned so is read as pinned (the test above)."""
    pods = []
    for name in ("a", "b"):
        doc = ds_pod(f"agent-{name}", name)
        doc["spec"]["affinity"] = _pinned("In", [name])
        pods.append(doc)
    agents = snapshot(node("a"), node("b"), *pods).pods
    assert agents[0].class_key is agents[1].class_key
    web = snapshot(node("a"), pod("web", "a", affinity=_pinned("In", ["a"]))).pods[0]
    assert any(r.key == "metadata.name" for term in web.spec.required_node_terms or () for r in term)


@pytest.mark.parametrize(("scheduler", "kept"), [("fargate-scheduler", False), ("default-scheduler", True),
                                                 (None, True)])
def test_a_pending_pod_of_the_fargate_scheduler_keeps_no_room(scheduler: str | None, kept: bool) -> None:
    """A pending pod keeps room on the node it fits (the empty node e stays, nominated), unless its scheduler never
    places pods on the cluster's nodes: EKS's fargate-scheduler gives it a Fargate node of its own (Karpenter's
    FailedToSchedule names Fargate among the schedulers whose pods it leaves alone)."""
    waiting = pod("waiting", None, cpu="1500m", phase="Pending")
    if scheduler is not None:
        waiting["spec"]["schedulerName"] = scheduler
    out = plan_dict(nodepool(), node("e", itype="t3.medium"), waiting)
    assert ("e" in disrupted(out)) is not kept, out["blocked"]


def test_single_node_savings_ratio_counts_each_pods_eviction_cost_above_zero() -> None:
    """disruption/types.go ``computeRescheduleDisruptionCost``: 1 plus each reschedulable pod's eviction cost above
    0, so a pod of very low priority lowers no node's cost. a (a pod of priority -2e9 and six others) costs 7 to
    disrupt, b (three pods) 4: at one price b saves more per disruption and goes first under a budget of one."""
    docs = [nodepool(budgets=[{"nodes": "1"}]), node("anchor", itype="m5.2xlarge"),
            pod("anchored", "anchor", annotations={"karpenter.sh/do-not-disrupt": "true"}),  # a destination only
            node("a", itype="m5.large"), pod("a-low", "a", priority=-2_000_000_000),
            *(pod(f"a-{i}", "a") for i in range(6)), node("b", itype="m5.large"),
            *(pod(f"b-{i}", "b") for i in range(3))]
    out = plan_json(make_plan(snapshot(*docs), NOW, options=EngineOptions(karpenter_pace=True)))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("single-node-consolidation", ["b"])]


def test_drift_takes_its_empty_candidates_first() -> None:
    """disruption/drift.go ``ComputeCommands``: the empty candidates before the others, whatever their order, so a
    node whose pods' eviction costs sum below 0 does not go before an empty one when the budget allows one."""
    docs = [nodepool(node_hash="h2", budgets=[{"nodes": "1"}]), node("a", node_hash="h1"),
            pod("low-1", "a", priority=-2_000_000_000), pod("low-2", "a", priority=-2_000_000_000),
            node("b", node_hash="h1")]
    out = plan_dict(*docs)
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("drift", ["b"])]


@pytest.mark.parametrize(("last_pod_event", "deleted"), [(5, True), (None, False)])
def test_consolidate_after_counts_from_the_last_pod_event_whenever_one_is_recorded(last_pod_event: int | None,
                                                                                  deleted: bool) -> None:
    """nodeclaim/disruption/consolidation_test.go (and ``consolidation.go``: lastPodEventTime when set, else the
    Initialized transition): an empty node whose NodeClaim was initialized 30 s ago but whose pods last changed 5
    minutes ago is past a consolidateAfter of 1m, and is deleted; without a recorded pod event the initialization
    counts, and it waits. ebb took the later of the two."""
    initialized = {"type": "Initialized", "status": "True", "lastTransitionTime": ago(seconds=30)}
    claim = nodeclaim("nc-e", "e")
    claim["status"]["conditions"] = [initialized]
    if last_pod_event is not None:
        claim["status"]["lastPodEventTime"] = ago(minutes=last_pod_event)
    out = plan_dict(nodepool(consolidate_after="1m"), node("e"), claim, require_nodeclaim=True)
    assert ("e" in {n for c in out["commands"] for n in c["nodes"]}) is deleted, out
