"""The room a replacement loses to DaemonSets is counted per instance type, for the DaemonSets that would run there.

Karpenter counts a DaemonSet's overhead on a new node of an instance type only when its pod is compatible with the
NodePool's template and the type (``buildDaemonOverheadGroups``): its tolerations, nodeSelector and required node
affinity. A DaemonSet for arm64 nodes, for spot nodes, for another zone, for one instance type, or selecting a label
the NodePool does not define takes no room on a new node that would not run it. Counted anyway, it made the
replacement of an oversized node dearer than Karpenter's: a c5.xlarge where a t3.medium does.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.labels import daemonset_runs_on_type
from tests.kit.builders import daemonset, node, nodepool, plan_dict, pod, snapshot

ZONE = "topology.kubernetes.io/zone"


def _agent(**spec: Any) -> dict[str, Any]:
    ds = daemonset("agent", cpu="1600m")
    ds["spec"]["template"]["spec"].update(spec)
    return ds


def _requiring(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}}


ON_DEMAND_AB = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]

# (id, the DaemonSet's pod spec, whether it runs on a new t3.medium of the on-demand NodePool in zones a and b)
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("no selector: everywhere", {}, True),
    ("affinity to arm64, the types amd64", _requiring("kubernetes.io/arch", "In", "arm64"), False),
    ("affinity to amd64", _requiring("kubernetes.io/arch", "In", "amd64"), True),
    ("affinity to spot, the NodePool on-demand", _requiring("karpenter.sh/capacity-type", "In", "spot"), False),
    ("nodeSelector on a zone the NodePool does not offer", {"nodeSelector": {ZONE: "us-east-1c"}}, False),
    ("nodeSelector on a zone it offers", {"nodeSelector": {ZONE: "us-east-1b"}}, True),
    ("nodeSelector on a label the NodePool does not define", {"nodeSelector": {"gpu": "true"}}, False),
    ("nodeSelector on another instance type", {"nodeSelector": {"node.kubernetes.io/instance-type": "c5.large"}},
     False),
    ("nodeSelector on this instance type", {"nodeSelector": {"node.kubernetes.io/instance-type": "t3.medium"}}, True),
    ("a custom key the NodePool does not have, DoesNotExist", _requiring("gpu", "DoesNotExist"), True),
]


@pytest.mark.parametrize(("spec", "runs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_daemonset_runs_on_a_new_node_its_selectors_admit(spec: dict[str, Any], runs: bool) -> None:
    snap = snapshot(nodepool(requirements=ON_DEMAND_AB), _agent(**spec))
    [pool], [ds] = snap.nodepools, snap.daemonsets
    t3 = next(t for t in snap.instance_types if t.name == "t3.medium")
    assert daemonset_runs_on_type(ds, pool, t3) is runs


@pytest.mark.parametrize(("spec", "runs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_oversized_node_is_replaced_by_what_its_pod_and_the_agents_that_run_there_need(spec: dict[str, Any],
                                                                                            runs: bool) -> None:
    # a 500m pod on an m5.2xlarge: a t3.medium (2 cpu) holds it, unless 1.6 cpu of agent runs there too
    out = plan_dict(nodepool(requirements=ON_DEMAND_AB), _agent(**spec), node("n1", itype="m5.2xlarge"),
                    pod("p", "n1", cpu="500m", memory="256Mi"))
    [command] = out["commands"]
    cheapest = command["replacements"][0]["instanceTypes"][0]
    assert (cheapest != "t3.medium") is runs, command
