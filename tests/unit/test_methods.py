"""The methods as the engine runs them (METHOD_ORDER), method order within a pass, order within a method, and
expiration, drift and emptiness."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from ebb.core.methods import CONSOLIDATION_REASONS, METHOD_ORDER, METHODS
from ebb.core.methods.base import EngineOptions, Method, MethodOutcome, PassContext, simulation
from ebb.core.model import REASONS
from tests.kit.builders import (
    NOW,
    TYPES,
    ago,
    blocked_of,
    budget_of,
    catalog,
    disrupted,
    instance_type,
    node,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)

# -- the methods ----------------------------------------------------------------------------------------

# (wire name, disruption reason, consolidates)
METHODS_IN_ORDER = [
    ("expiration", "Expired", False),
    ("drift", "Drifted", False),
    ("emptiness", "Empty", True),
    ("multi-node-consolidation", "Underutilized", True),
    ("single-node-consolidation", "Underutilized", True),
]


def test_method_order_is_written_once_with_a_reason_per_entry() -> None:
    assert [(m.name, m.reason, m.consolidation) for m, _ in METHOD_ORDER] == METHODS_IN_ORDER
    for method, why in METHOD_ORDER:
        assert isinstance(method, Method) and method.reason in REASONS
        assert why and "\n" not in why, method.name
    assert {m.name: m for m, _ in METHOD_ORDER} == METHODS
    assert {"Empty", "Underutilized"} == CONSOLIDATION_REASONS


@pytest.mark.parametrize("method", [m for m, _ in METHOD_ORDER], ids=lambda m: m.name)
def test_every_method_runs_and_revalidates(method: Method) -> None:
    """Each method runs on a pass context and re-checks one node; on a cluster where it has nothing to do it
    proposes nothing, and its re-check of a node it never wanted says why the node is not (or None)."""
    view = ClusterView.build(snapshot(nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m")),
                             NOW)
    sched, state = simulation(view)
    outcome = method.run(PassContext(view, EngineOptions(), sched, state,
                                     {k: v.allowed for k, v in view.budgets.items()}))
    assert isinstance(outcome, MethodOutcome) and outcome.commands == []
    stale = method.validate(view, view.nodes["busy"])
    expected = {"expiration": "node busy is no longer expired", "drift": "node busy is no longer drifted",
                "emptiness": "node busy is no longer empty: 1 pods arrived"}.get(method.name)
    assert (stale.text if stale is not None else None) == expected


def _summary(out: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    return [(c["method"], c["reason"], c["action"], c["nodes"]) for c in out["commands"]]


# -- one method acts per pass ----------------------------------------------------------------------------


def test_expiration_acts_alone_when_another_node_is_empty() -> None:
    out = plan_dict(nodepool("old", expire_after="24h"), nodepool("keep"),
                    node("expired", pool="old"), pod("web", "expired"),
                    node("busy", pool="keep", zone="us-east-1b"), pod("big", "busy", cpu="1500m"),
                    node("idle", pool="keep"))
    assert {c["method"] for c in out["commands"]} == {"expiration"}
    assert disrupted(out) == {"expired"}
    idle = blocked_of(out, "idle")
    assert idle["method"] == "emptiness"
    assert "only one method acts per pass" in idle["reason"]


def test_drift_acts_before_emptiness() -> None:
    out = plan_dict(nodepool("moved", node_hash="h2"), nodepool("keep"),
                    node("drifted", pool="moved", node_hash="h1"), pod("web", "drifted"),
                    node("busy", pool="keep"), pod("big", "busy", cpu="1500m"),
                    node("idle", pool="keep"))
    assert {c["method"] for c in out["commands"]} == {"drift"}
    assert disrupted(out) == {"drifted"}
    assert "drift acted this pass" in blocked_of(out, "idle")["reason"]


def test_emptiness_acts_before_consolidation() -> None:
    # a and b could merge (multi-node) but the empty node goes first, alone
    out = plan_dict(nodepool(), node("a"), pod("web-a", "a"), node("b"), pod("web-b", "b"), node("idle"))
    assert _summary(out) == [("emptiness", "Empty", "delete", ["idle"])]
    for name in ("a", "b"):
        assert "emptiness acted this pass" in blocked_of(out, name)["reason"]


def _busy_pool_and_an_expired_node() -> list[Any]:
    """Pool ``old``: one expired node. Pool ``keep`` (budget 2): four nodes with a small pod each, which multi-node
    consolidation would fold into fewer, two at most this pass."""
    return [nodepool("old", expire_after="24h"), nodepool("keep", budgets=[{"nodes": "2"}]),
            node("expired", pool="old"), pod("web", "expired"),
            *(d for name in ("k1", "k2", "k3", "k4")
              for d in (node(name, pool="keep"), pod(f"{name}-pod", name, cpu="200m")))]


def test_a_budget_the_waiting_commands_would_use_names_them_not_this_passs_disruptions() -> None:
    """The explaining run's commands do not execute this pass, so a node they leave out for budget is not told its
    budget is "used up by other disruptions this pass" (none are, in its NodePool): it is told whose commands would
    take the budget, and that they wait for the method that acted."""
    out = plan_dict(*_busy_pool_and_an_expired_node())
    assert disrupted(out) == {"expired"}
    keep = {b["node"]: b for b in out["blocked"] if b["node"].startswith("k")}
    waiting = {name: b["method"] for name, b in keep.items() if "only one method acts per pass" in b["reason"]}
    assert set(waiting) == set(keep)  # every node of `keep` waits for expiration
    left_out = [b for b in keep.values() if "budget" in b["reason"]]
    assert left_out, keep
    for blocked in left_out:
        assert "used up by other disruptions this pass" not in blocked["reason"]
        assert blocked["reason"].startswith(
            "the Underutilized budget of NodePool keep would be used up by the commands of multi-node-consolidation, "
            "which wait because expiration acted this pass and only one method acts per pass (budget nodes=2 of "
            "NodePool keep allows 2 of 4 nodes"), blocked["reason"]
    assert budget_of(out, "keep", "Underutilized") == 2


def test_a_drifted_node_left_out_of_the_waiting_drift_commands_says_whose_they_are() -> None:
    out = plan_dict(nodepool("old", expire_after="24h"),
                    nodepool("keep", node_hash="h2", budgets=[{"nodes": "1", "reasons": ["Drifted"]}]),
                    node("expired", pool="old"), pod("web", "expired"),
                    node("d1", pool="keep", node_hash="h1"), pod("d1-pod", "d1"),
                    node("d2", pool="keep", node_hash="h1"), pod("d2-pod", "d2"))
    assert disrupted(out) == {"expired"}
    taken, left = sorted((blocked_of(out, name)["reason"] for name in ("d1", "d2")),
                         key=lambda reason: reason.startswith("drifted"))
    assert taken.startswith("it could be disrupted by drift (delete), but expiration acted this pass"), taken
    assert left.startswith("drifted: its nodepool-hash h1 differs"), left
    assert ", but the Drifted budget of NodePool keep would be used up by the commands of drift, which wait because " \
           "expiration acted this pass and only one method acts per pass (budget nodes=1 of NodePool keep allows 1 " \
           "of 2 nodes" in left, left


def test_a_budget_used_by_the_acting_methods_commands_is_used_up_this_pass() -> None:
    """When the method that acts took the budget, it is used this pass: the plain sentence."""
    out = plan_dict(nodepool(budgets=[{"nodes": "1"}]), node("e1"), node("e2"))
    assert [c["method"] for c in out["commands"]] == ["emptiness"]
    (left,) = {"e1", "e2"} - disrupted(out)
    assert blocked_of(out, left)["reason"].startswith(
        "empty, but the Empty budget of NodePool default is used up by other disruptions this pass"), out


# -- least disruption cost first ---------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "z_pods", "a_pods"), [
    ("fewer pods", [pod("z-1", "z")], [pod("a-1", "a"), pod("a-2", "a")]),
    ("lower priority", [pod("z-1", "z", priority=0)], [pod("a-1", "a", priority=100000)]),
    ("lower deletion cost", [pod("z-1", "z", annotations={"controller.kubernetes.io/pod-deletion-cost": "-1000"})],
     [pod("a-1", "a", annotations={"controller.kubernetes.io/pod-deletion-cost": "1000000"})]),
], ids=["fewer-pods", "priority", "pod-deletion-cost"])
def test_budget_of_one_takes_the_least_disruptive_node(label: str, z_pods: list[Any],
                                                       a_pods: list[Any]) -> None:
    # `z` sorts last by name, so only its lower disruption cost (fewer pods, ...) can put it first
    out = plan_dict(nodepool(budgets=[{"nodes": "1"}]), node("a"), node("z"), *z_pods, *a_pods)
    assert disrupted(out) == {"z"}
    assert "budget" in blocked_of(out, "a")["reason"]


def test_closer_to_expiry_goes_first() -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "1"}], expire_after="720h"),
                    node("a", created=ago(days=1)), pod("a-1", "a"),
                    node("z", created=ago(days=25)), pod("z-1", "z"))
    assert disrupted(out) == {"z"}


# -- expiration ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pool_kwargs", "expired"), [
    ({"expire_after": "24h"}, True),
    ({"expire_after": "84h"}, True),  # the node is 3d18h30m old
    ({"expire_after": "90h30m"}, True),  # exactly its age: expireAfter reached
    ({"expire_after": "720h"}, False),
    ({"expire_after": "Never"}, False),
    ({}, False),
    ({"disruption": {"expireAfter": "24h"}}, True),  # the older place
])
def test_expiration(pool_kwargs: dict[str, Any], expired: bool) -> None:
    out = plan_dict(nodepool(**pool_kwargs), node("a"), pod("web", "a", cpu="1500m"),
                    node("b"), pod("web-b", "b", cpu="1500m"))
    expiring = {n for c in out["commands"] if c["reason"] == "Expired" for n in c["nodes"]}
    if expired:
        assert [c["method"] for c in out["commands"]] == ["expiration"]
        assert expiring == {"a", "b"}
    else:
        assert expiring == set()
        assert all(c["method"] != "expiration" for c in out["commands"])


def test_expiration_launches_a_replacement_when_pods_do_not_fit_elsewhere() -> None:
    out = plan_dict(nodepool(expire_after="24h"), node("a"), pod("web", "a", cpu="1", memory="1Gi"))
    [command] = out["commands"]
    assert (command["method"], command["reason"], command["action"], command["nodes"]) == (
        "expiration", "Expired", "replace", ["a"])
    [rep] = command["replacements"]
    assert rep["nodePool"] == "default"
    assert rep["capacityType"] == "on-demand"
    assert rep["instanceTypes"][0] == "t3.medium"
    assert rep["price"] == pytest.approx(TYPES["t3.medium"][3])
    assert command["savingsPerHour"] == pytest.approx(TYPES["m5.large"][3] - TYPES["t3.medium"][3])


def test_expiration_deletes_when_pods_fit_elsewhere() -> None:
    out = plan_dict(nodepool("old", expire_after="24h"), nodepool("keep"), node("a", pool="old"),
                    pod("web", "a"), node("b", pool="keep"))
    assert _summary(out) == [("expiration", "Expired", "delete", ["a"])]
    assert out["commands"][0]["replacements"] == []


def test_expiration_respects_the_expired_budget() -> None:
    # t3.medium is the cheapest type and neither pod fits beside the other: consolidation has nothing to do
    out = plan_dict(nodepool(expire_after="24h", budgets=[{"nodes": "0", "reasons": ["Expired"]},
                                                          {"nodes": "100%"}]),
                    node("a", itype="t3.medium"), pod("web", "a", cpu="1500m"),
                    node("b", itype="t3.medium"), pod("web-b", "b", cpu="1500m"))
    assert budget_of(out, "default", "Expired") == 0
    assert budget_of(out, "default", "Drifted") == 2
    assert all(c["method"] != "expiration" for c in out["commands"])
    for name in ("a", "b"):
        reason = blocked_of(out, name)["reason"]
        assert "expired" in reason
        assert "Expired budget allows 0" in reason


# -- drift -------------------------------------------------------------------------------------------------

ZONE_REQ = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
ZONE_REQ_WIDE = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}
TYPE_REQ = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "c5.xlarge"]}
OD_REQ = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
SPOT_REQ = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
TEAM_REQ = {"key": "team", "operator": "In", "values": ["blue"]}


def _only_in_b(name: str, available: bool = True) -> dict[str, Any]:
    c, m, p, od, sp = TYPES[name]
    return instance_type(name, c, m, p, od, sp, zones=["us-east-1b"], available=available)


def _types_but(name: str) -> list[dict[str, Any]]:
    return [instance_type(n, c, m, p, od, sp) for n, (c, m, p, od, sp) in TYPES.items() if n != name]


DRIFT = [
    ("hash-changed", {"node_hash": "h2"}, {"node_hash": "h1"}, [], "nodepool-hash h1 differs"),
    ("requirement-zone", {"requirements": [OD_REQ, {**ZONE_REQ, "values": ["us-east-1b"]}]}, {}, [],
     "topology.kubernetes.io/zone=us-east-1a no longer satisfies"),
    ("requirement-type", {"requirements": [OD_REQ, TYPE_REQ]}, {}, [], "node.kubernetes.io/instance-type"),
    ("requirement-capacity-type", {"requirements": [SPOT_REQ]}, {}, [], "karpenter.sh/capacity-type"),
    ("requirement-custom-label", {"requirements": [OD_REQ, TEAM_REQ]}, {}, [], "no team label"),
    ("requirement-label-value", {"requirements": [OD_REQ, TEAM_REQ]}, {"labels": {"team": "red"}}, [],
     "team=red no longer satisfies"),
    ("not-offered-in-zone", {}, {}, [catalog([*_types_but("m5.large"), _only_in_b("m5.large")])],
     "no longer offered"),
]


@pytest.mark.parametrize(("pool_kwargs", "node_kwargs", "extra", "phrase"), [c[1:] for c in DRIFT],
                         ids=[c[0] for c in DRIFT])
def test_drift(pool_kwargs: dict[str, Any], node_kwargs: dict[str, Any], extra: list[Any], phrase: str) -> None:
    out = plan_dict(nodepool(**pool_kwargs), node("a", **node_kwargs), pod("web", "a"), *extra)
    assert [(c["method"], c["reason"], c["nodes"]) for c in out["commands"]] == [("drift", "Drifted", ["a"])]
    assert phrase in out["commands"][0]["explanation"]


NO_DRIFT = [
    ("same-hash", {"node_hash": "h1"}, {"node_hash": "h1"}),
    ("other-hash-version", {"node_hash": "h2", "hash_version": "v4"}, {"node_hash": "h1", "hash_version": "v3"}),
    ("node-without-hash", {"node_hash": "h2"}, {}),
    # Karpenter's areStaticFieldsDrifted says nothing unless both sides carry a hash version, and the same one
    ("hashes-without-versions", {"node_hash": "h2", "hash_version": None}, {"node_hash": "h1", "hash_version": None}),
    ("node-without-hash-version", {"node_hash": "h2"}, {"node_hash": "h1", "hash_version": None}),
    ("nodepool-without-hash-version", {"node_hash": "h2", "hash_version": None}, {"node_hash": "h1"}),
    ("requirement-widened", {"requirements": [OD_REQ, ZONE_REQ_WIDE]}, {}),
    ("requirement-still-met", {"requirements": [OD_REQ, ZONE_REQ]}, {}),
    ("behavioural-fields", {"node_hash": "h1", "weight": 50, "budgets": [{"nodes": "5"}],
                            "consolidate_after": "10m"}, {"node_hash": "h1"}),
    # a node that names no zone is not judged "not offered" on a zone it does not name
    ("node-without-zone", {}, {"zone": ""}),
]


@pytest.mark.parametrize(("pool_kwargs", "node_kwargs"), [c[1:] for c in NO_DRIFT], ids=[c[0] for c in NO_DRIFT])
def test_no_drift(pool_kwargs: dict[str, Any], node_kwargs: dict[str, Any]) -> None:
    out = plan_dict(nodepool(**pool_kwargs), node("a", **node_kwargs), pod("web", "a", cpu="1500m"),
                    node("b", **node_kwargs), pod("web-b", "b", cpu="1500m"))
    assert all(c["method"] != "drift" for c in out["commands"])
    assert all(b["method"] != "drift" for b in out["blocked"])


def test_several_drifted_nodes_in_one_command_up_to_the_budget() -> None:
    out = plan_dict(nodepool(node_hash="h2", budgets=[{"nodes": "2"}]),
                    *[node(n, node_hash="h1") for n in ("a", "b", "c")],
                    *[pod(f"web-{n}", n, cpu="1500m") for n in ("a", "b", "c")])
    [command] = out["commands"]
    assert command["method"] == "drift"
    assert len(command["nodes"]) == 2
    assert command["action"] == "replace"  # 1500m pods fit nowhere else: replacements launched first
    assert command["replacements"]
    [left] = {"a", "b", "c"} - set(command["nodes"])
    assert "Drifted budget" in blocked_of(out, left)["reason"]


# -- emptiness -------------------------------------------------------------------------------------------


def test_empty_node_is_deleted() -> None:
    out = plan_dict(nodepool(), node("busy"), pod("web", "busy", cpu="1500m"), node("idle"))
    assert _summary(out) == [("emptiness", "Empty", "delete", ["idle"])]
    assert out["commands"][0]["replacements"] == []
    assert out["commands"][0]["savingsPerHour"] == pytest.approx(TYPES["m5.large"][3])


def test_all_empty_nodes_in_one_command() -> None:
    out = plan_dict(nodepool(), node("busy"), pod("web", "busy", cpu="1500m"),
                    node("e1"), node("e2", zone="us-east-1b"), node("e3", itype="c5.xlarge"))
    [command] = out["commands"]
    assert command["method"] == "emptiness"
    assert sorted(command["nodes"]) == ["e1", "e2", "e3"]
    assert command["savingsPerHour"] == pytest.approx(2 * TYPES["m5.large"][3] + TYPES["c5.xlarge"][3])


@pytest.mark.parametrize(("pool_kwargs", "created", "deleted"), [
    ({"consolidate_after": "10m"}, ago(minutes=5), False),
    ({"consolidate_after": "10m"}, ago(minutes=20), True),
    ({"consolidate_after": None, "disruption": {"ttlSecondsAfterEmpty": 600}}, ago(minutes=5), False),
    ({"consolidate_after": None, "disruption": {"ttlSecondsAfterEmpty": 600}}, ago(minutes=11), True),
    ({"consolidate_after": "Never"}, ago(days=3), False),
])
def test_empty_for_consolidate_after(pool_kwargs: dict[str, Any], created: str, deleted: bool) -> None:
    out = plan_dict(nodepool(**pool_kwargs), node("busy"), pod("web", "busy", cpu="1500m"),
                    node("idle", created=created))
    if deleted:
        assert ("emptiness", "Empty", "delete", ["idle"]) in _summary(out)
    else:
        assert "idle" not in disrupted(out)
        assert "consolidateAfter" in blocked_of(out, "idle")["reason"]


def test_budget_caps_empty_nodes_per_command() -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "2"}]), node("busy"), pod("web", "busy", cpu="1500m"),
                    *[node(f"e{i}") for i in range(4)])
    [command] = out["commands"]
    assert command["method"] == "emptiness"
    assert len(command["nodes"]) == 2
    for name in {f"e{i}" for i in range(4)} - set(command["nodes"]):
        assert "Empty budget" in blocked_of(out, name)["reason"]


def _recent(doc: dict[str, Any]) -> dict[str, Any]:
    doc["status"]["startTime"] = doc["metadata"]["creationTimestamp"] = ago(minutes=1)
    return doc


@pytest.mark.parametrize("recent_pod", [
    _recent(pod("agent-idle", "idle", ns="kube-system", owner=("DaemonSet", "agent"), labels={"app": "agent"})),
    _recent(pod("etcd-idle", "idle", owner=("Node", "idle"), annotations={"kubernetes.io/config.mirror": "x"})),
    _recent(pod("job-idle", "idle", owner=("Job", "j"), phase="Succeeded")),
], ids=["daemonset", "mirror", "finished"])
def test_pods_that_need_no_home_do_not_delay_emptiness(recent_pod: dict[str, Any]) -> None:
    out = plan_dict(nodepool(consolidate_after="10m"), node("busy", itype="t3.medium"),
                    pod("web", "busy", cpu="1800m"), node("idle"), recent_pod)
    assert _summary(out) == [("emptiness", "Empty", "delete", ["idle"])]


def test_a_later_method_is_explained_on_the_cluster_the_acting_commands_leave() -> None:
    """Multi-node consolidation replaces a and b by one c5.xlarge, which holds one of their 3-cpu pods; the other
    goes to c. The explaining run sees c as it will be, its own pod and that one (6 cpu): only a node of its own
    type holds them, so it is told why it stays, not that single-node consolidation could replace it (the
    replacement is closed once launched as the command chose, not grown into a dearer type for c's pods)."""
    docs = [nodepool(), *(node(n, itype="m5.2xlarge") for n in "abc"),
            *(pod(f"p{n}", n, cpu="3", memory="1Gi") for n in "abc")]
    out = plan_dict(*docs)
    assert [(c["method"], c["nodes"], c["action"]) for c in out["commands"]] == [
        ("multi-node-consolidation", ["a", "b"], "replace")]
    reason = blocked_of(out, "c")["reason"]
    assert "could be disrupted" not in reason
    assert "can't replace with a cheaper node: its pods need a node costing $0.3840/h or more" in reason
