"""controllers/disruption/drift_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

The suite's NodePool: consolidateAfter 1h, one budget ``nodes: 100%``; its node is of the most expensive type
(here m5.2xlarge, given Karpenter's 32 cpu) with a NodeClaim. In Context("Drift") the NodeClaim is Drifted=True and
its Consolidatable condition cleared: here the node was created 30 minutes ago, inside consolidateAfter, which is
what that condition says (ebb computes it, docs/decisions.md, Differences: "Consolidatable is computed"), so
consolidation stays out of the cases as in Karpenter. Not translated (counted in docs/decisions.md, "Karpenter's
test suites, translated"): Context("Metrics") (a gauge) and "should untaint nodes when drift replacement fails"
(the orchestration queue's rollback when a replacement NodeClaim is deleted while it launches).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.kit.builders import (
    NOW,
    ago,
    budget_of,
    catalog,
    disrupted,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    pdb,
    plan_dict,
    pod,
    ts,
)
from tests.kit.karpenter_suite import DRIFTED, NOT_DRIFTED, claimed, claimed_nodes

MOST_EXPENSIVE = "m5.2xlarge"
RECENT = ago(minutes=30)  # inside the suite's consolidateAfter of 1h: not consolidatable


def _pool(name: str = "default", budget: str = "100%", consolidate_after: str = "1h") -> dict[str, Any]:
    return nodepool(name, consolidate_after=consolidate_after, budgets=[{"nodes": budget}])


def _drifted(name: str = "a", *, conditions: tuple[dict[str, Any], ...] = (DRIFTED,), **kwargs: Any) -> list[Any]:
    """The suite's node: the most expensive type with 32 cpu, recent, its NodeClaim Drifted."""
    kwargs = {"itype": MOST_EXPENSIVE, "cpu": "32", "pods": 100, "created": RECENT, **kwargs}
    return claimed(name, conditions=conditions, **kwargs)


def _commands(out: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(c["method"], c["action"], c["nodes"]) for c in out["commands"]]


# -- Describe("Drift") / Context("Budgets") -------------------------------------------------------------------------

def test_budgets_should_only_consider_3_nodes_allowed_to_be_disrupted_because_of_budgets() -> None:
    """drift_test.go, Describe("Drift"), Context("Budgets"), It("should only consider 3 nodes allowed to be disrupted
    because of budgets"): ten drifted nodes, 30%: the Drifted allowance is 3, none consumed yet; ebb's pass takes the
    3 (docs/decisions.md, Differences: "Expiration and drift take several nodes per pass")."""
    out = plan_dict(_pool(budget="30%"), claimed_nodes(10, conditions=(DRIFTED,), itype=MOST_EXPENSIVE,
                                                       created=RECENT))
    assert budget_of(out, "default", "Drifted") == 3
    assert len(disrupted(out)) == 3
    assert {c["method"] for c in out["commands"]} == {"drift"}


def _in_progress_cluster(tainted: int) -> list[Any]:
    """Ten nodes, the first five drifted with a 1-cpu pod each; ``tainted`` of those already being disrupted (a
    command in progress: karpenter.sh/disrupted, as Karpenter's queue taints them)."""
    docs: list[Any] = [_pool(budget="30%")]
    for i in range(10):
        taints = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}] if i < tainted else None
        docs += claimed(f"n{i}", conditions=(DRIFTED,) if i < 5 else (), itype=MOST_EXPENSIVE, cpu="32",
                        created=RECENT, zone=("us-east-1a", "us-east-1b", "us-east-1c")[i % 3], taints=taints)
        if i < 5:
            docs.append(pod(f"p{i}", f"n{i}", cpu="1", memory="128Mi", labels={"app": "test"}))
    return docs


# (case, nodes already being disrupted, Drifted allowance, nodes this pass takes)
IN_PROGRESS = [
    ("should disrupt 3 nodes, taking into account commands in progress (ebb: the 3 in one pass)", 0, 3, 3),
    ("should disrupt 3 nodes, taking into account commands in progress (3 in progress: no more)", 3, 0, 0),
    ("should disrupt 3 nodes, taking into account commands in progress (1 in progress: 2 more)", 1, 2, 2),
]


@pytest.mark.parametrize(("tainted", "allowed", "taken"), [c[1:] for c in IN_PROGRESS], ids=[c[0] for c in IN_PROGRESS])
def test_budgets_should_disrupt_3_nodes_taking_into_account_commands_in_progress(tainted: int, allowed: int,
                                                                                 taken: int) -> None:
    """drift_test.go, Describe("Drift"), Context("Budgets"), It("should disrupt 3 nodes, taking into account commands
    in progress"): five of ten nodes drifted, 30%; Karpenter reconciles five times, one command each, and stops at 3
    tainted nodes. ebb takes the 3 in one pass (docs/decisions.md, Differences: "Expiration and drift take several
    nodes per pass"); the nodes already being disrupted count against the budget as Karpenter's in-flight
    commands do."""
    out = plan_dict(*_in_progress_cluster(tainted))
    assert budget_of(out, "default", "Drifted") == allowed
    assert len(disrupted(out)) == taken
    assert all(c["method"] == "drift" for c in out["commands"])
    assert disrupted(out) <= {f"n{i}" for i in range(tainted, 5)}


def test_budgets_should_respect_budgets_for_multiple_nodepools() -> None:
    """drift_test.go, Describe("Drift"), Context("Budgets"), It("should respect budgets for multiple nodepools"): ten
    NodePools (consolidateAfter and expireAfter Never, budget 1) of three drifted nodes, two of them with a 1-cpu pod;
    one node of each pool goes: ten commands' worth, twenty nodes left."""
    docs: list[Any] = []
    for p in range(10):
        docs.append(nodepool(f"pool-{p}", consolidate_after="Never", expire_after="Never", budgets=[{"nodes": "1"}]))
        for i in range(3):
            docs += claimed(f"p{p}-{i}", pool=f"pool-{p}", conditions=(DRIFTED,), itype=MOST_EXPENSIVE, cpu="32",
                            zone=("us-east-1a", "us-east-1b", "us-east-1c")[i])
            if i < 2:
                docs.append(pod(f"pod-{p}-{i}", f"p{p}-{i}", cpu="1", memory="128Mi", labels={"app": "test"}))
    out = plan_dict(*docs)
    gone = disrupted(out)
    assert len(gone) == 10
    for p in range(10):
        assert budget_of(out, f"pool-{p}", "Drifted") == 1
        assert sum(1 for n in gone if n.startswith(f"p{p}-")) == 1
    assert {c["method"] for c in out["commands"]} == {"drift"}


# -- Describe("Drift") / Context("Drift") -----------------------------------------------------------------------------

def test_should_continue_to_the_next_drifted_node_if_the_first_cannot_reschedule_all_pods() -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"), It("should continue to the next drifted node if the first
    cannot reschedule all pods"): a's pod (Karpenter: 150 cpu on a full node; here 20 on a 20-cpu node, more than
    any type of the catalog) fits nowhere, so a stays; b (1 cpu) with a 1-cpu pod is replaced."""
    out = plan_dict(_pool(), _drifted("a", cpu="20"), pod("huge", "a", cpu="20", memory="1Gi"),
                    _drifted("b", zone="us-east-1b", cpu="1"), pod("to-expire", "b", cpu="1", memory="128Mi"))
    assert _commands(out) == [("drift", "replace", ["b"])]
    assert "a" not in disrupted(out)


# (Karpenter's case, the NodeClaim's conditions, the node's annotations)
IGNORED = [
    ("should ignore nodes without the drifted status condition", (), {}),
    ("should ignore nodes with the drifted status condition set to false", (NOT_DRIFTED,), {}),
    ("should ignore nodes with the karpenter.sh/do-not-disrupt annotation set to true", (DRIFTED,),
     {"karpenter.sh/do-not-disrupt": "true"}),
]


@pytest.mark.parametrize(("conditions", "annotations"), [c[1:] for c in IGNORED], ids=[c[0] for c in IGNORED])
def test_should_ignore(conditions: tuple[dict[str, Any], ...], annotations: dict[str, str]) -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"): the node is not drifted (nor drifted by ebb's own checks:
    same requirements, no hash), or the Node says do-not-disrupt; a drifted node next to it goes, so the pass is
    not idle."""
    out = plan_dict(_pool(), _drifted("a", conditions=conditions, annotations=annotations),
                    _drifted("b", zone="us-east-1b"))
    assert _commands(out) == [("drift", "delete", ["b"])]


# (Karpenter's case, node a's annotations, a's pod's annotations, whether b (32 cpu, empty) is there, the command)
DELETE_OR_REPLACE = [
    ("should delete drifted nodes with the karpenter.sh/do-not-disrupt annotation set to false",
     {"karpenter.sh/do-not-disrupt": "false"}, {}, True, [("drift", "delete", ["a"])]),
    ("should drift nodes with pods that have an invalid do-not-disrupt annotation format", {},
     {"karpenter.sh/do-not-disrupt": "invalid-format"}, True, [("drift", "delete", ["a"])]),
    ("should replace drifted nodes", {}, {}, False, [("drift", "replace", ["a"])]),
    ("should delete drifted nodes", {}, {}, True, [("drift", "delete", ["a"])]),
    ("should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt "
     "annotation set to true", {}, {"karpenter.sh/do-not-disrupt": "true"}, False, []),
    ("should not create replacements for drifted nodes that have pods with the karpenter.sh/do-not-disrupt "
     "annotation set to true when the NodePool's TerminationGracePeriod is not nil", {},
     {"karpenter.sh/do-not-disrupt": "true"}, False, []),
]


@pytest.mark.parametrize(("node_ann", "pod_ann", "room", "commands"), [c[1:] for c in DELETE_OR_REPLACE],
                         ids=[c[0] for c in DELETE_OR_REPLACE])
def test_delete_or_replace(node_ann: dict[str, str], pod_ann: dict[str, str], room: bool,
                           commands: list[tuple[str, str, list[str]]]) -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"): drifted node a with one pod; with a second (not drifted)
    32-cpu node b the pod moves there and a is deleted, without it a is replaced. A do-not-disrupt pod keeps a. ebb
    does not model terminationGracePeriod (docs/decisions.md, Differences: "no terminationGracePeriod eventual
    disruption"); with it Karpenter still creates no replacement for such a pod, so both cases agree."""
    docs = [_pool(), _drifted("a", annotations=node_ann), pod("web", "a", labels={"app": "test"}, annotations=pod_ann)]
    if room:
        docs += _drifted("b", conditions=(), zone="us-east-1b")
    out = plan_dict(*docs)
    assert _commands(out) == commands


def test_should_not_create_replacements_for_drifted_nodes_that_have_pods_with_blocking_pdbs() -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"), It("should not create replacements for drifted nodes that
    have pods with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil"): a PDB with
    maxUnavailable 0 over the node's pod. The NodeClaim's terminationGracePeriod makes the node a drift candidate all
    the same, and the pod, which nothing may evict now, is not simulated (``IsCurrentlyReschedulable``): no
    replacement, the node is deleted and the pod stays until the deadline. Without the grace period the node
    stays."""
    claim_docs = _drifted("a")
    claim_docs[1]["spec"] = {"terminationGracePeriod": "300s"}
    blocked = (pod("web", "a", labels={"test": "value"}), pdb("budget", {"test": "value"}, max_unavailable=0))
    out = plan_dict(_pool(), claim_docs, *blocked)
    assert _commands(out) == [("drift", "delete", ["a"])]
    command = out["commands"][0]
    assert command["replacements"] == []
    assert "left in place, as nothing may evict them now: default/web" in command["explanation"]
    assert plan_dict(_pool(), _drifted("a"), *blocked)["commands"] == []


# (Karpenter's case, the pods' do-not-disrupt durations, minutes after their start, whether a is drifted)
DURATION_DO_NOT_DISRUPT = [
    ("should not drift nodes with pods that have a duration-based do-not-disrupt annotation that is still active",
     ("2m",), 0, False),
    ("should not drift nodes with pods that have a duration-based do-not-disrupt annotation that is still active "
     "(3 minutes later: drifted)", ("2m",), 3, True),
    ("should not drift nodes until the longest duration-based do-not-disrupt grace period expires across multiple "
     "pods (2 minutes)", ("1m", "3m"), 2, False),
    ("should not drift nodes until the longest duration-based do-not-disrupt grace period expires across multiple "
     "pods (4 minutes)", ("1m", "3m"), 4, True),
]


@pytest.mark.parametrize(("durations", "minutes", "drifted"), [c[1:] for c in DURATION_DO_NOT_DISRUPT],
                         ids=[c[0] for c in DURATION_DO_NOT_DISRUPT])
def test_duration_based_do_not_disrupt(durations: tuple[str, ...], minutes: int, drifted: bool) -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"): pods started at NOW with a do-not-disrupt duration; the
    drifted node is replaced once the longest has passed (the clock stepped by ``minutes``)."""
    docs = [_pool(), _drifted("a")]
    docs += [pod(f"p{i}", "a", started=ts(NOW), annotations={"karpenter.sh/do-not-disrupt": d})
             for i, d in enumerate(durations)]
    out = plan_dict(*docs, now=NOW + timedelta(minutes=minutes))
    assert _commands(out) == ([("drift", "replace", ["a"])] if drifted else [])


# (Karpenter's case, consolidateAfter, the NodeClaim's conditions)
EMPTY_DRIFTED = [
    ("should delete drifted nodes when they are empty and consolidation is disabled", "Never", (DRIFTED,)),
    ("should delete drifted nodes when they are empty and consolidatable", "1h",
     (DRIFTED, {"type": "Consolidatable", "status": "True", "lastTransitionTime": ago(hours=2)})),
]


@pytest.mark.parametrize(("consolidate_after", "conditions"), [c[1:] for c in EMPTY_DRIFTED],
                         ids=[c[0] for c in EMPTY_DRIFTED])
def test_empty_drifted_nodes_are_deleted(consolidate_after: str, conditions: tuple[dict[str, Any], ...]) -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"): an empty drifted node is deleted by drift, no
    replacement."""
    out = plan_dict(_pool(consolidate_after=consolidate_after), _drifted("a", conditions=conditions,
                                                                          created=ago(hours=2)))
    assert [(c["method"], c["reason"], c["action"], c["nodes"], c["replacements"]) for c in out["commands"]] == \
        [("drift", "Drifted", "delete", ["a"], [])]


def test_should_drift_empty_nodes_before_non_empty_nodes() -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"), It("should drift empty nodes before non-empty nodes"):
    consolidateAfter Never, a (with a pod) and b (empty) both drifted; Karpenter makes one command, for b. ebb takes
    both in the pass, in one command simulated jointly (docs/decisions.md, Differences: "Expiration and drift take
    several nodes per pass"), b first: the empty node costs nothing to disrupt, so it leads the disruption-cost
    order, and a's pod does not count on b: it gets a replacement."""
    out = plan_dict(_pool(consolidate_after="Never"), _drifted("a"), pod("web", "a", labels={"app": "test"}),
                    _drifted("b", zone="us-east-1b"))
    assert _commands(out) == [("drift", "replace", ["b", "a"])]
    assert len(out["commands"][0]["replacements"]) == 1


def test_can_replace_drifted_nodes_with_multiple_nodes() -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"), It("can replace drifted nodes with multiple nodes"): the
    node's type (8 cpu, 0.5/h) is no longer offered; the only type on offer has 3 cpu (0.3/h); three 2-cpu pods need
    three replacements."""
    types = catalog([instance_type("current-on-demand", "8", "32Gi", 110, 0.5, zones=["us-east-1a"],
                                   available=False),
                     instance_type("replacement-on-demand", "3", "32Gi", 110, 0.3, zones=["us-east-1a"])])
    out = plan_dict(types, _pool(), _drifted("a", itype="current-on-demand", cpu="8"),
                    *[pod(f"p{i}", "a", cpu="2", memory="128Mi", labels={"app": "test"}) for i in range(3)])
    [command] = out["commands"]
    assert (command["method"], command["action"], command["nodes"]) == ("drift", "replace", ["a"])
    assert [r["instanceTypes"] for r in command["replacements"]] == [["replacement-on-demand"]] * 3


def test_should_drift_one_non_empty_node_at_a_time_starting_with_the_earliest_drift() -> None:
    """drift_test.go, Describe("Drift"), Context("Drift"), It("should drift one non-empty node at a time, starting
    with the earliest drift"): a (Drifted now) and b (Drifted an hour ago), each with a 30-cpu pod (here 6 of 8);
    one command, for b, in Karpenter. ebb drifts both in the pass, in one command with a replacement each
    (docs/decisions.md, Differences: "Expiration and drift take several nodes per pass"; its order is the
    disruption cost's, not the age of Drifted: "Candidates in disruption-cost order")."""
    b_drifted = {"type": "Drifted", "status": "True", "lastTransitionTime": ago(hours=1)}
    out = plan_dict(_pool(), _drifted("a", cpu="8"), pod("pa", "a", cpu="6", memory="1Gi", labels={"app": "test"}),
                    _drifted("b", cpu="8", zone="us-east-1b", conditions=(b_drifted,)),
                    pod("pb", "b", cpu="6", memory="1Gi", labels={"app": "test"}))
    [command] = out["commands"]
    assert (command["method"], command["action"], sorted(command["nodes"])) == ("drift", "replace", ["a", "b"])
    assert len(command["replacements"]) == 2


# -- Describe("Drift") / Context("Static NodePool") -------------------------------------------------------------------

def test_static_nodepool_should_not_consider_static_nodepool_for_drift() -> None:
    """drift_test.go, Describe("Drift"), Context("Static NodePool"), It("should not consider static nodepool for
    drift"): Karpenter's Drift method has no candidate in a static NodePool; StaticDrift replaces such nodes one for
    one, keeping ``spec.replicas``, so no drifted node of the pool is deleted without a replacement."""
    static = nodepool("static", budgets=[{"nodes": "100%"}])
    static["spec"]["replicas"] = 2
    out = plan_dict(static, node("s0", pool="static"), nodeclaim("c-s0", "s0", pool="static", conditions=[DRIFTED]),
                    node("s1", pool="static", zone="us-east-1b"),
                    nodeclaim("c-s1", "s1", pool="static", conditions=[DRIFTED]))
    assert all(c["action"] == "replace" for c in out["commands"])
