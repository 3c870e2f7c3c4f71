"""A zone spread of a pod whose required node affinity has several terms counts the zones every term admits.

kube-scheduler's ``PodTopologySpread`` filter, under ``nodeAffinityPolicy: Honor`` (the default), takes the spread's
minimum over the nodes the pod's node affinity admits, whichever term admits them. Karpenter v1.14.1 counts only
the domains of the pod's first term (``newPodRequirements`` keeps the first term as its strict requirements, and
``TopologyGroup.AddRequirements`` reads the pod's domains from them), so it may move a pod where kube-scheduler
then refuses it. ebb counts as kube-scheduler does: a difference from Karpenter (docs/decisions.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import node, nodepool, plan_dict, pod

WEB = {"app": "web"}
KEEP = {"karpenter.sh/do-not-disrupt": "true"}
WEB_SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": WEB}}]


def _zone_terms(*zones: str) -> dict[str, Any]:
    """A required node affinity of one term per zone (the terms are ORed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
        for zone in zones]}}}


@pytest.mark.parametrize(("zones", "command"), [
    # zones a and b admitted: b holds no web pod, so zone a (one already, two with w0) is past the skew; a new
    # node in zone b takes w0 (Karpenter, counting zone a alone, would put it on oa and delete victim)
    (("us-east-1a", "us-east-1b"), ("replace", ["us-east-1b"])),
    # zone a alone: its minimum is its own count, and oa takes w0
    (("us-east-1a",), ("delete", None)),
], ids=["two terms: the minimum over both zones", "one term: the minimum over its zone"])
def test_a_spread_counts_the_zones_of_every_node_affinity_term(zones: tuple[str, ...],
                                                                 command: tuple[str, list[str] | None]) -> None:
    out = plan_dict(
        nodepool(), node("victim"), pod("w0", "victim", labels=WEB, affinity=_zone_terms(*zones), spread=WEB_SPREAD),
        node("oa", annotations=KEEP), pod("w-a", "oa", labels=WEB),
        node("ob", zone="us-east-1b", annotations=KEEP), pod("full-b", "ob", cpu="1950m"))
    [taken] = [c for c in out["commands"] if c["nodes"] == ["victim"]]
    action, replacement_zones = command
    assert taken["action"] == action, taken
    if replacement_zones is not None:
        assert taken["replacements"][0]["zones"] == replacement_zones
