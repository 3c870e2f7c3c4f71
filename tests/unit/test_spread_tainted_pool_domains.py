"""A zone spread's domains include the zones of a NodePool whose taints the pod does not tolerate, unless the spread
says ``nodeTaintsPolicy: Honor``.

Karpenter's topology keeps every NodePool's zones, each with its NodePool's taints, and a spread reads them all under
the default ``nodeTaintsPolicy: Ignore`` (docs/simulator.md: "under the default, Ignore, they are domains and count").
A zone only such a NodePool offers is then a domain of 0 pods that holds the others back: two pods per zone in a
and b, zone c offered only by a tainted NodePool, and no pod may leave its node for another in its own zone (2 - 0 is
past maxSkew 1 once it lands). Under Honor, zone c is no domain and the two small nodes go.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import node, nodepool, plan_dict, pod

ZONE = "topology.kubernetes.io/zone"
KEEP = {"karpenter.sh/do-not-disrupt": "true"}  # the big nodes stay: only the small ones are in question


def _cluster(taints_policy: str | None) -> list[dict[str, Any]]:
    spread: dict[str, Any] = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                              "labelSelector": {"matchLabels": {"app": "w"}}}
    if taints_policy is not None:
        spread["nodeTaintsPolicy"] = taints_policy

    def w(name: str, on: str) -> dict[str, Any]:
        return pod(name, on, cpu="1200m", memory="1Gi", labels={"app": "w"}, spread=[spread])

    return [nodepool(requirements=[{"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]),
            nodepool("tainted", requirements=[{"key": ZONE, "operator": "In", "values": ["us-east-1c"]}],
                     taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
            node("a1", itype="t3.medium"), node("b1", itype="t3.medium", zone="us-east-1b"),
            node("a2", itype="m5.xlarge", annotations=KEEP), node("b2", itype="m5.xlarge", zone="us-east-1b",
                                                                  annotations=KEEP),
            w("pa1", "a1"), w("pb1", "b1"), w("pa2", "a2"), w("pb2", "b2")]


@pytest.mark.parametrize(("taints_policy", "disrupted"), [
    (None, set()),  # Ignore, the default: zone c counts, with 0 pods
    ("Ignore", set()),
    ("Honor", {"a1", "b1"}),  # zone c is no domain: a1's and b1's pods move to a2 and b2
])
def test_a_tainted_nodepools_zone_is_a_spread_domain_unless_taints_are_honoured(taints_policy: str | None,
                                                                                 disrupted: set[str]) -> None:
    out = plan_dict(*_cluster(taints_policy))
    assert {n for c in out["commands"] for n in c["nodes"]} == disrupted
