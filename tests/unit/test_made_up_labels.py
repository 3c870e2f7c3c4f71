"""A NodePool that requires a key of its own without naming a value (``Exists``, ``NotIn``, ``Gt``, ``Lt``, ``Gte``,
``Lte``): Karpenter's launch makes a value up for it (``resolveCustomLabelsFromRequirements``, ``Requirement.Any`` in
``pkg/scheduling/requirement.go``: an integer from the lower bound, or 0, to the upper bound), so the NodePool launches
nodes that satisfy its own requirement. ebb gives a new node the smallest such integer no ``NotIn`` names, in the
simulation, in a launch and in the nodes ``--until-stable`` launches.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.labels import daemonset_runs_on_type, made_up_value
from ebb.core.model import Requirement
from ebb.core.plan import apply_commands, make_plan
from tests.kit.builders import NOW, daemonset, node, nodepool, plan_dict, pod, snapshot

R = Requirement


@pytest.mark.parametrize(("requirements", "value"), [
    ([R("team", "Exists")], "0"),
    ([R("team", "NotIn", ("0", "1"))], "2"),
    ([R("gen", "Gt", ("4",))], "5"),
    ([R("gen", "Gte", ("4",))], "4"),
    ([R("gen", "Gt", ("4",)), R("gen", "Gte", ("7",))], "7"),  # the bounds intersect
    ([R("gen", "Gt", ("4",)), R("gen", "Lt", ("6",))], "5"),
    ([R("gen", "Gt", ("4",)), R("gen", "Lt", ("5",))], None),  # no integer between
    ([R("gen", "Lte", ("3",)), R("gen", "NotIn", ("0", "1", "2", "3"))], None),
    ([R("gen", "Lt", ("3",))], "0"),
    ([R("gen", "In", ("a",))], None),  # named: the requirement's own value, elsewhere
    ([R("gen", "Exists"), R("gen", "DoesNotExist")], None),
    ([R("other", "Exists")], None),  # not this key
])
def test_the_value_made_up_is_the_smallest_integer_the_requirements_allow(requirements: list[Requirement],
                                                                           value: str | None) -> None:
    key = requirements[0].key if requirements[0].key != "other" else "gen"
    assert made_up_value(requirements, key) == value


OD = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}


@pytest.mark.parametrize("requirement", [
    {"key": "team", "operator": "Exists"},
    {"key": "gen", "operator": "Gt", "values": ["4"]},
    {"key": "gen", "operator": "Lte", "values": ["9"]},
    {"key": "team", "operator": "NotIn", "values": ["0"]},
])
def test_a_drifted_node_of_a_pool_that_requires_a_key_without_a_value_is_replaced(requirement: dict[str, Any]) -> None:
    """The node has drifted (its NodePool's hash changed) and its pod selects nothing: Karpenter replaces it with a
    node labelled with a made-up value. ebb gave the new node no label, which its own NodePool's requirement
    refused, so the pod had nowhere to go and the node stayed drifted for good."""
    key = requirement["key"]
    docs = [nodepool(requirements=[OD, requirement], node_hash="new"),
            node("a", node_hash="old", labels={key: "7"}), pod("web", "a", cpu="500m")]
    (command,) = plan_dict(*docs)["commands"]
    assert (command["method"], command["nodes"], command["action"]) == ("drift", ["a"], "replace")


def test_a_node_the_passes_launch_carries_the_made_up_value_and_is_not_drifted_again() -> None:
    """``--until-stable``: the replacement is labelled as the simulation had it, so the next pass does not find it
    drifted (a missing label fails ``Exists``) and replace it again, pass after pass."""
    team = {"key": "team", "operator": "Exists"}
    snap = snapshot(nodepool(requirements=[OD, team]), node("big", itype="m5.2xlarge", labels={"team": "x"}),
                    pod("web", "big", cpu="500m"))
    first = make_plan(snap, NOW).first
    assert [c.action for c in first.commands] == ["replace"]
    after = apply_commands(snap, first.commands, NOW, 1)
    [launched] = [n for n in after.nodes if n.name != "big"]
    assert launched.labels["team"] == "0"
    out = plan_dict(nodepool(requirements=[OD, team]), node("big", itype="m5.2xlarge", labels={"team": "x"}),
                    pod("web", "big", cpu="500m"), until_stable=True)
    assert [c["method"] for s in out["steps"] for c in s["commands"]] == ["single-node-consolidation"]


def test_a_daemonset_runs_on_a_new_node_of_a_pool_that_requires_a_key_without_a_value() -> None:
    """The DaemonSet runs on every node: on a new node of a NodePool requiring ``team Exists`` too, so its requests
    count against a new node's room (they were left out: the node's label was missing, and no offering of the
    NodePool's met its requirements)."""
    team = {"key": "team", "operator": "Exists"}
    snap = snapshot(nodepool(requirements=[OD, team]), daemonset("agent"), node("a", labels={"team": "x"}))
    (pool,), (agent,) = snap.nodepools, snap.daemonsets
    itype = next(t for t in snap.instance_types if t.name == "m5.large")
    assert daemonset_runs_on_type(agent, pool, itype)
