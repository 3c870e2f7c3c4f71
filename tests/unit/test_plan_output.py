"""The `ebb plan` JSON contract (docs/plan.md): field names, blocked coverage, cost, --until-stable."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from ebb.core.causes import render
from ebb.core.engine import run_pass
from ebb.core.methods import method_names
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import (
    apply_commands,
    fates,
    finish_under_way,
    make_plan,
    only_nodes,
    step_interval,
    unknown_nodes,
)
from tests.kit.builders import (
    NOW,
    TYPES,
    catalog,
    disrupted,
    hold,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)

OD = {t: v[3] for t, v in TYPES.items()}
METHODS = {"expiration", "drift", "emptiness", "multi-node-consolidation", "single-node-consolidation"}
REASONS = {"Expired", "Drifted", "Empty", "Underutilized"}


def _mixed_cluster() -> list[Any]:
    """Two pools; empty, underutilized, busy, blocked and unmanaged nodes."""
    return [
        nodepool(), nodepool("batch", expire_after="720h"),
        node("idle"),
        node("big", itype="m5.2xlarge"), pod("web-1", "big", cpu="750m"), pod("web-2", "big", cpu="750m"),
        node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"),
        node("guarded"), pod("g", "guarded", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        node("b1", pool="batch", itype="c5.xlarge"), pod("job", "b1", cpu="3500m"),
        node("unmanaged", pool=None), pod("sys", "unmanaged"),
    ]


def _consolidation_cluster() -> list[Any]:
    """Several passes of consolidation: four half-empty m5.xlarge nodes."""
    return [nodepool(), *[node(f"n{i}", itype="m5.xlarge", zone=z) for i, z in
                          enumerate(["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1a"])],
            *[pod(f"web-{i}", f"n{i}", cpu="900m", memory="2Gi") for i in range(4)]]


def test_method_order() -> None:
    assert method_names() == ("expiration", "drift", "emptiness", "multi-node-consolidation",
                              "single-node-consolidation")


def test_field_names() -> None:
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="500m"),
                    node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"))
    # no steps without --until-stable; warnings[]: the conflicts with Karpenter (none here)
    assert set(out) == {"now", "commands", "blocked", "budgets", "cost", "warnings"}
    assert out["warnings"] == []
    assert out["now"] == "2026-11-23T18:30:00Z"
    [command] = out["commands"]
    assert {"method", "reason", "action", "nodes", "replacements", "savingsPerHour"} <= set(command)
    assert command["method"] in METHODS
    assert command["reason"] in REASONS
    assert command["action"] in {"delete", "replace"}
    [rep] = command["replacements"]
    assert set(rep) == {"nodePool", "instanceTypes", "capacityType", "zones", "price"}
    assert isinstance(rep["instanceTypes"], list)
    assert isinstance(rep["zones"], list)
    assert isinstance(rep["price"], float)
    assert isinstance(command["savingsPerHour"], float)
    for entry in out["blocked"]:
        assert set(entry) == {"node", "method", "reason"}
    for entry in out["budgets"]:
        assert {"nodePool", "reason", "allowed"} <= set(entry)
        assert isinstance(entry["allowed"], int)
    assert set(out["cost"]) == {"before", "after"}
    json.dumps(out)  # plain JSON values only


def test_every_node_not_disrupted_is_blocked_once() -> None:
    out = plan_dict(*_mixed_cluster())
    names = {"idle", "big", "busy", "guarded", "b1", "unmanaged"}
    taken = disrupted(out)
    blocked = [b["node"] for b in out["blocked"]]
    assert taken
    assert len(blocked) == len(set(blocked))
    assert set(blocked) | taken == names
    assert not set(blocked) & taken
    assert all(b["reason"] for b in out["blocked"])
    assert all(b["method"] in METHODS | {"all"} for b in out["blocked"])


def test_pool_or_cluster_wide_causes_name_every_node() -> None:
    out = plan_dict(nodepool(), node("e1"), node("e2"), node("e3"), hold("freeze", reason="release"))
    assert out["commands"] == []
    assert sorted(b["node"] for b in out["blocked"]) == ["e1", "e2", "e3"]
    assert all("hold freeze" in b["reason"] for b in out["blocked"])


def test_cost_before_and_after() -> None:
    out = plan_dict(*_mixed_cluster())
    # NodePool-owned nodes only: the unmanaged node is not counted
    before = OD["m5.large"] * 2 + OD["m5.2xlarge"] + OD["t3.medium"] + OD["c5.xlarge"]
    assert out["cost"]["before"] == pytest.approx(before)
    removed = sum(OD[t] for name, t in [("idle", "m5.large"), ("big", "m5.2xlarge"), ("busy", "t3.medium"),
                                        ("guarded", "m5.large"), ("b1", "c5.xlarge")] if name in disrupted(out))
    launched = sum(r["price"] for c in out["commands"] for r in c["replacements"])
    assert out["cost"]["after"] == pytest.approx(before - removed + launched)
    assert sum(c["savingsPerHour"] for c in out["commands"]) == pytest.approx(before - out["cost"]["after"])


def test_cost_with_a_replacement() -> None:
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big"))
    assert out["cost"] == {"before": pytest.approx(OD["m5.2xlarge"]), "after": pytest.approx(OD["t3.medium"])}


def test_a_node_disrupted_already_costs_nothing_now() -> None:
    """A node tainted karpenter.sh/disrupted is on its way out, as a deleting one: the budgets count it as disrupting,
    and ``cost`` leaves it out (it was priced, so --until-stable credited the plan with its saving)."""
    taint = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    out = plan_dict(nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"),
                    node("going", itype="m5.large", taints=taint))
    assert out["cost"]["before"] == out["cost"]["after"] == pytest.approx(OD["t3.medium"])


def test_no_commands_keeps_the_cost() -> None:
    out = plan_dict(nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"))
    assert out["commands"] == []
    assert out["cost"]["before"] == out["cost"]["after"] == pytest.approx(OD["t3.medium"])


def _launching(name: str, **kwargs: Any) -> dict[str, Any]:
    """A NodeClaim launched as an m5.large spot node in us-east-1b whose Node has not registered yet."""
    labels = {"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1b",
              "karpenter.sh/capacity-type": "spot"}
    return nodeclaim(name, f"{name}-node", labels=labels, **kwargs)


SPOT = {t: v[4] for t, v in TYPES.items()}
# (case, NodeClaims besides the registered node's, what they add to the cost before and after)
LAUNCHING_COSTS = [
    ("a NodeClaim whose Node has not registered yet costs its offering", [_launching("c1")], SPOT["m5.large"]),
    ("two of them", [_launching("c1"), _launching("c2")], 2 * SPOT["m5.large"]),
    ("one being deleted costs nothing, as a node being deleted", [_launching("c1", deleting=True)], 0.0),
    ("nor does one of a NodePool the input does not hold", [_launching("c1", pool="other")], 0.0),
]


@pytest.mark.parametrize(("claims", "added"), [c[1:] for c in LAUNCHING_COSTS], ids=[c[0] for c in LAUNCHING_COSTS])
def test_cost_counts_the_nodeclaims_still_launching(claims: list[dict[str, Any]], added: float) -> None:
    """cost.before and cost.after count a NodePool's NodeClaims launched whose Node has not registered yet, priced by
    their labels, as Balanced's NodePool totals do (`ClusterView.launching_claims`)."""
    out = plan_dict(nodepool(), node("busy", itype="t3.medium"), nodeclaim("busy", "busy"),
                    pod("db", "busy", cpu="1800m"), *claims)
    assert out["commands"] == []
    assert out["cost"] == {"before": pytest.approx(OD["t3.medium"] + added),
                           "after": pytest.approx(OD["t3.medium"] + added)}


@pytest.mark.parametrize("with_idle", [False, True])
def test_until_stable_steps(with_idle: bool) -> None:
    docs = [*_consolidation_cluster(), *([node("idle")] if with_idle else [])]
    single = plan_dict(*docs)
    out = plan_dict(*docs, until_stable=True)
    steps = out["steps"]
    assert out["commands"] == single["commands"]  # the first pass is what one pass would do
    assert steps[0]["commands"] == out["commands"]
    assert steps[0]["cost"] == out["cost"]
    if with_idle:  # emptiness first, then the consolidation in the next pass
        assert [[c["method"] for c in s["commands"]] for s in steps if s["commands"]] == [
            ["emptiness"], ["multi-node-consolidation"]]
    for step in steps:
        assert {"commands", "cost"} <= set(step)
        assert step["cost"]["after"] <= step["cost"]["before"] + 1e-9
    for earlier, later in itertools.pairwise(steps):
        assert later["cost"]["before"] == pytest.approx(earlier["cost"]["after"])
    final = steps[-1]["cost"]["after"]
    assert final <= out["cost"]["after"] + 1e-9
    # four 900m/2Gi pods fit on one c5.xlarge (4 cpu, 8Gi), the cheapest node that holds them all
    assert final == pytest.approx(OD["c5.xlarge"])


@pytest.mark.parametrize("make", [_consolidation_cluster, _mixed_cluster])
def test_until_stable_ends_in_a_state_with_nothing_to_do(make: Callable[[], list[Any]]) -> None:
    start = snapshot(*make())
    result = make_plan(start, NOW, until_stable=True)
    assert result.steps
    # replay the passes with the public pieces of the planner, then plan once more: nothing is left to do
    current, moment = start, NOW
    interval = timedelta(seconds=step_interval(start))
    *acting, final = result.steps
    assert final.commands == ()  # the last step is the pass that found nothing to do
    for index, step in enumerate(acting, start=1):
        assert step.commands
        current = apply_commands(current, step.commands, moment, index)  # run when decided; the next pass later
        moment += interval
    assert result.final is not None  # the plan's end: the cluster the replay reached
    assert sorted(n.name for n in result.final.nodes) == sorted(n.name for n in current.nodes)
    assert make_plan(start, NOW).final is None  # one pass ends nowhere
    last = make_plan(current, moment).first
    assert last.commands == ()
    assert last.cost_before == pytest.approx(result.steps[-1].cost_after)
    assert last.cost_before <= result.first.cost_before


def test_until_stable_waits_for_moved_pods_to_settle() -> None:
    """Four m5.xlarge with a 500m pod each, a budget of one node and a consolidateAfter of 10 minutes: each pass
    takes one node, and the pass after a replace finds the node that just took pods settled (its pods arrived an
    interval before), so the passes go on to one t3.medium holding all four pods, not two."""
    docs = [nodepool(consolidate_after="10m", budgets=[{"nodes": "1"}]),
            *[doc for i in range(4) for doc in (node(f"n{i}", itype="m5.xlarge", zone=f"us-east-1{'abc'[i % 3]}"),
                                                pod(f"app{i}", f"n{i}", cpu="500m", memory="1Gi"))]]
    out = plan_dict(*docs, until_stable=True)
    assert out["steps"][-1]["cost"]["after"] == pytest.approx(OD["t3.medium"])


def test_until_stable_labels_replacements_with_their_nodepools_requirements() -> None:
    """A NodePool requirement on its own label (``team In [a]``): a replacement the passes launch carries it, as a
    launcher labels it, so the next pass does not find it drifted and replace it again, pass after pass."""
    team = {"key": "team", "operator": "In", "values": ["a"]}
    od = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    out = plan_dict(nodepool(requirements=[od, team]), node("big", itype="m5.2xlarge", labels={"team": "a"}),
                    pod("web", "big", cpu="500m"), until_stable=True)
    methods = [c["method"] for s in out["steps"] for c in s["commands"]]
    assert methods == ["single-node-consolidation"], methods
    assert out["steps"][-1]["commands"] == []


def test_until_stable_mixed_cluster() -> None:
    out = plan_dict(*_mixed_cluster(), until_stable=True)
    steps = out["steps"]
    assert len([s for s in steps if s["commands"]]) >= 2
    for earlier, later in itertools.pairwise(steps):
        assert later["cost"]["before"] == pytest.approx(earlier["cost"]["after"])
    assert steps[-1]["cost"]["after"] < out["cost"]["after"] <= out["cost"]["before"]
    moved = {n for s in steps for c in s["commands"] for n in c["nodes"]}
    assert not moved & {"guarded", "unmanaged"}  # never disrupted, in any pass


def test_until_stable_ends_with_a_pass_without_commands() -> None:
    out = plan_dict(*_consolidation_cluster(), until_stable=True)
    steps = out["steps"]
    assert steps[-1]["commands"] == []
    assert all(s["commands"] for s in steps[:-1])
    assert steps[-1]["cost"]["before"] == steps[-1]["cost"]["after"] <= out["cost"]["before"]
    stable = plan_dict(nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"),
                       until_stable=True)
    assert [s["commands"] for s in stable["steps"]] == [[]]


def test_until_stable_on_a_stable_cluster() -> None:
    out = plan_dict(nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"), until_stable=True)
    assert out["commands"] == []
    assert "steps" in out
    assert all(s["commands"] == [] for s in out["steps"])


def test_until_stable_launches_the_cheapest_option() -> None:
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"), pod("web", "big", cpu="1500m"), until_stable=True)
    first = out["steps"][0]
    [command] = first["commands"]
    [rep] = command["replacements"]
    assert first["cost"]["after"] == pytest.approx(rep["price"])
    assert rep["price"] == pytest.approx(OD[rep["instanceTypes"][0]])
    # the launched t3.medium is the cheapest there is: nothing else happens
    assert out["steps"][-1]["cost"]["after"] == pytest.approx(OD["t3.medium"])


def test_plan_is_deterministic() -> None:
    assert plan_dict(*_mixed_cluster(), now=NOW) == plan_dict(*_mixed_cluster(), now=NOW)


# -- --node: the plan as it concerns some nodes (fates, only_nodes) ---------------------------------------------


def test_every_node_of_a_plan_has_one_fate_that_agrees_with_the_plan() -> None:
    snap = snapshot(*_consolidation_cluster(), node("idle"), node("unmanaged", pool=None))
    plan = make_plan(snap, NOW, until_stable=True)
    assert plan.steps is not None
    names = [n.name for n in snap.nodes]
    assert unknown_nodes(snap, [*names, "nope"]) == ["nope"]
    for fate in fates(plan, snap, names):
        # this pass: a command or a reason to stay, never both, never neither
        assert (fate.command is None) != (fate.blocked_by is None), fate
        if fate.command is not None:
            assert fate.step == 0 and fate.step_command == fate.command
        if fate.step is not None:
            assert fate.step_command in plan.steps[fate.step].commands
            assert all(fate.node not in c.nodes for s in plan.steps[:fate.step] for c in s.commands)
        else:
            assert all(fate.node not in c.nodes for s in plan.steps for c in s.commands)
    by_name = {f.node: f for f in fates(plan, snap, names)}
    assert by_name["idle"].command is not None and by_name["idle"].command.method == "emptiness"
    assert by_name["unmanaged"].nodepool is None and by_name["unmanaged"].step is None
    assert any(f.step is not None and f.step > 0 for f in by_name.values())  # some go in a later step


def test_only_nodes_keeps_their_commands_whole_their_reasons_and_their_pools_budgets() -> None:
    snap = snapshot(*_mixed_cluster())
    plan = make_plan(snap, NOW, until_stable=True)
    assert plan.steps is not None
    for names in (["idle"], ["busy", "b1"], ["guarded", "unmanaged"]):
        cut = only_nodes(plan, snap, names)
        assert cut.first.commands == tuple(c for c in plan.first.commands if set(names) & set(c.nodes))
        assert cut.first.blocked == tuple(b for b in plan.first.blocked if b.node in names)
        pools = {n.nodepool for n in snap.nodes if n.name in names}
        assert cut.first.budgets == tuple(b for b in plan.first.budgets if b.nodepool in pools)
        assert (cut.first.cost_before, cut.first.cost_after) == (plan.first.cost_before, plan.first.cost_after)
        assert cut.steps is not None and len(cut.steps) == len(plan.steps)
        for whole, kept in zip(plan.steps, cut.steps, strict=True):
            assert kept.commands == tuple(c for c in whole.commands if set(names) & set(c.nodes))


def test_the_cost_after_emptying_every_node_is_zero_not_minus_zero() -> None:
    """The nodes' prices are summed exactly (`math.fsum`), not in a set's hash order, and a sum a hair below zero
    prints 0.0: the same input gives the same bytes."""
    both = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}]
    docs = [nodepool(requirements=both), node("n0", itype="t3.medium", capacity_type="spot", zone="us-east-1b"),
            node("n1", itype="t3.medium", zone="us-east-1c"), node("n2", itype="t3.large", zone="us-east-1b"),
            node("n3", itype="t3.medium", zone="us-east-1b"),
            catalog([instance_type("t3.medium", "2", "4Gi", 17, 0.0416, 0.01622),
                     instance_type("t3.large", "2", "8Gi", 35, 0.0832, 0.03245)])]
    out = plan_dict(*docs)
    assert sorted(n for c in out["commands"] for n in c["nodes"]) == ["n0", "n1", "n2", "n3"]
    assert out["cost"]["after"] == 0.0 and math.copysign(1.0, out["cost"]["after"]) == 1.0
    assert json.dumps(out["cost"]["after"]) == "0.0"


def test_a_replacement_launched_for_karpenters_nodes_has_a_nodeclaim_and_can_be_retired_later() -> None:
    """With NodeClaims in the input (Karpenter's nodes), a simulated launch makes a NodeClaim too, and the removed
    node's goes: under ``--provider karpenter`` a node without one is never disrupted, so a replacement launched in
    one step could not be retired in the next."""
    docs = [nodepool(), node("big", itype="m5.2xlarge"), nodeclaim("big-claim", "big"),
            pod("p", "big", cpu="500m", memory="256Mi")]
    snap = snapshot(*docs)
    options = EngineOptions(require_nodeclaim=True)
    first = make_plan(snap, NOW, options=options).first
    assert [(c.action, c.nodes) for c in first.commands] == [("replace", ("big",))]
    after = apply_commands(snap, first.commands, NOW, 1)
    [launched] = [n for n in after.nodes if n.name != "big"]
    assert [(c.name, c.node_name, c.nodepool, c.provider_id) for c in after.nodeclaims] == [
        (launched.name, launched.name, "default", launched.provider_id)]
    # the next pass takes it as a node of Karpenter's (its reason is not "it has no NodeClaim")
    later = run_pass(options.view_of(after, NOW + timedelta(minutes=10)), options)
    reasons = {b.node: render(b.cause) for b in later.blocked}
    assert "NodeClaim" not in reasons.get(launched.name, ""), reasons


def test_a_replacement_the_passes_launch_carries_the_zonal_csi_drivers_label_the_clusters_nodes_carry() -> None:
    """The cluster's nodes carry an older EBS CSI driver's own zone key: a node the passes launch carries it too, with
    its zone's value (as the simulation labels a new node, `csi_zone_labels`), so a pod whose volume asks for that key
    may move onto it in the next step."""
    key = "topology.ebs.csi.aws.com/zone"
    docs = [nodepool(), node("big", itype="m5.2xlarge", zone="us-east-1b", labels={key: "us-east-1b"}),
            node("other", zone="us-east-1a", labels={key: "us-east-1a"}), pod("busy", "other", cpu="1500m"),
            pod("p", "big", cpu="500m", memory="256Mi")]
    snap = snapshot(*docs)
    first = make_plan(snap, NOW).first
    assert [c.action for c in first.commands] == ["replace"]
    after = apply_commands(snap, first.commands, NOW, 1)
    [launched] = [n for n in after.nodes if n.name not in ("big", "other")]
    assert launched.labels[key] == launched.labels["topology.kubernetes.io/zone"]


def test_until_stable_finishes_a_deletion_under_way_and_frees_its_budget() -> None:
    """A budget of one node, held by node x being deleted when the snapshot was taken: live, x goes once drained and
    the budget frees, so the three empty nodes go one per pass. ``--until-stable`` stopped at the first pass, which
    had nothing to do, and called that the end state."""
    docs = [nodepool(budgets=[{"nodes": "1"}]), node("x", deleting=True),
            *(node(f"e{i}") for i in range(3)), node("d"), pod("busy", "d", cpu="1500m")]
    out = plan_dict(*docs, until_stable=True)
    assert out["steps"][0]["commands"] == []  # the first pass: x holds the budget
    gone = [n for s in out["steps"] for c in s["commands"] for n in c["nodes"]]
    assert {"e0", "e1", "e2"} <= set(gone) and "x" not in gone  # (d may be replaced by a cheaper type at the end)
    assert out["steps"][-1]["cost"]["after"] <= OD["m5.large"] + 1e-9


@pytest.mark.parametrize(("free_cpu", "bound"), [("500m", True), ("1900m", False)])
def test_a_node_being_disrupted_goes_and_its_pods_are_bound_where_they_fit(free_cpu: str, bound: bool) -> None:
    """Node t carries Karpenter's disruption taint (its command is under way): once the pass's commands ran it is
    gone, and its pod is bound where kube-scheduler would bind it, or left Pending where no node has room."""
    taint = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    docs = [nodepool(budgets=[{"nodes": "0"}]), node("t", taints=taint), pod("w-t", "t", cpu="1"),
            node("keep"), pod("filler", "keep", cpu=free_cpu)]
    snap = snapshot(*docs)
    after = finish_under_way(snap, NOW)
    assert [n.name for n in after.nodes] == ["keep"]
    [moved] = [p for p in after.pods if p.name == "w-t"]
    assert (moved.node_name == "keep") is bound
    assert moved.phase == ("Running" if bound else "Pending")


def test_a_node_of_a_type_the_catalog_does_not_list_is_not_consolidated_only_deleted_when_empty() -> None:
    """Karpenter's consolidation leaves a node whose instance type it does not know (``ShouldDisrupt``: instance type
    not found); ebb priced it at 0 and deleted it "to save $0.0000/h". Emptiness, which needs no price, takes it. (The
    bundled catalog: one given in the input drifts such a node first, as Karpenter's ``instanceTypeNotFound``.)"""
    def planned(*docs: Any) -> tuple[list[tuple[str, tuple[str, ...]]], dict[str, str]]:
        snap = replace(snapshot(*docs), catalog_source="bundled")
        first = make_plan(snap, NOW).first
        return [(c.method, c.nodes) for c in first.commands], {b.node: render(b.cause) for b in first.blocked}

    commands, reasons = planned(nodepool(), node("mystery", itype="x9.mystery", cpu="4", memory="16Gi"),
                                pod("web", "mystery", cpu="500m"), node("roomy", itype="m5.xlarge"),
                                pod("other", "roomy"))
    assert all("mystery" not in nodes for _, nodes in commands), commands
    assert "its instance type x9.mystery is not in the catalog" in reasons["mystery"], reasons
    commands, _ = planned(nodepool(), node("mystery", itype="x9.mystery", cpu="4", memory="16Gi"))
    assert commands == [("emptiness", ("mystery",))]
