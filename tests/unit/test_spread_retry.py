"""A pod its topology spread keeps out now may fit once a later pod is placed: the simulation tries it again.

Karpenter's scheduling queue (v1.14.1, ``scheduling/queue.go`` and ``Scheduler.Solve``) puts a pod that failed back
and tries it again while a round still places something; its pods go largest first. A pod with a ``DoNotSchedule``
zone spread may fail first because the least-populated zone has no pod of its selector yet, and fit once a smaller
pod of that selector has gone there: the spread's minimum rose. ebb's simulation stopped at the first pod that found no
room unless it had pod affinity, so it kept nodes that Karpenter deletes (`later_may_place`, docs/simulator.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import blocked_of, node, nodepool, plan_dict, pod

ZONES = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}
GOLD = {"tier": "gold"}
KEEP = {"karpenter.sh/do-not-disrupt": "true"}
WEB_SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]


def _cluster(*, with_web_pod: bool) -> list[Any]:
    """``victim`` (zone a) runs ``api`` (1500m, only on ``tier: gold`` nodes, which no NodePool launches; spread over
    the ``app: web`` pods by zone) and, given ``with_web_pod``, ``w0`` (an ``app: web`` pod of 100m). ``oa`` (zone a)
    has 500m free, ``ob`` (zone b) 1800m and two web pods. Both are kept by do-not-disrupt."""
    docs: list[Any] = [
        nodepool(requirements=[ZONES]),
        node("victim", labels=GOLD), pod("api", "victim", cpu="1500m", node_selector=GOLD, spread=WEB_SPREAD),
        node("oa", labels=GOLD, annotations=KEEP), pod("fa", "oa", cpu="1500m"),
        node("ob", zone="us-east-1b", labels=GOLD, annotations=KEEP),
        pod("w1", "ob", labels={"app": "web"}), pod("w2", "ob", labels={"app": "web"})]
    if with_web_pod:
        docs.append(pod("w0", "victim", labels={"app": "web"}))
    return docs


@pytest.mark.parametrize(("with_web_pod", "deleted"), [
    # api fails first (zone b holds 2 web pods, zone a none: skew 2), w0 goes to oa in zone a, and api then fits ob
    (True, True),
    # no pod of the selector arrives in zone a: api fits nowhere
    (False, False),
], ids=["a later web pod raises zone a: api fits on the retry", "no later pod: api fits nowhere"])
def test_a_spread_pod_is_tried_again_after_the_pods_placed_after_it(with_web_pod: bool, deleted: bool) -> None:
    out = plan_dict(*_cluster(with_web_pod=with_web_pod))
    commands = [(c["method"], c["action"], c["nodes"]) for c in out["commands"]]
    if deleted:
        assert commands == [("single-node-consolidation", "delete", ["victim"])], out["blocked"]
    else:
        assert commands == []
        assert "topology spread" in blocked_of(out, "victim")["reason"]
