"""A candidate's pod in phase Pending may move onto a node inside its consolidateAfter: Karpenter's scheduler
(``scheduler.go``, ``isUnderConsolidateAfter``) refuses such a node to a moving pod unless the pod is Pending.
"""

from __future__ import annotations

from tests.kit.builders import ago, blocked_of, node, nodepool, plan_dict, pod

KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def test_a_pod_in_phase_pending_may_move_onto_a_node_inside_its_consolidate_after() -> None:
    """``web-1`` is bound to ``cand`` but still Pending (its image pulling): Karpenter's scheduler lets it onto
    ``keep``, whose pods changed a minute ago, so ``cand`` is deleted; a Running pod may not go there, so ``cand`` is
    replaced by a cheaper node instead."""
    for phase, action in (("Pending", "delete"), ("Running", "replace")):
        out = plan_dict(nodepool(consolidate_after="5m"), node("keep", annotations=KEEP),
                        pod("big-1", "keep", cpu="1500m", memory="2Gi", started=ago(minutes=1)),
                        node("cand"), pod("web-1", "cand", cpu="400m", memory="1Gi", phase=phase))
        assert [(c["action"], c["nodes"]) for c in out["commands"]] == [(action, ["cand"])], phase


def test_a_pod_of_another_node_that_finds_no_room_is_said_to_be_leaving_it() -> None:
    """``dst-0`` runs on ``dest``, which a disruption is taking away; the simulation gave it room on ``src`` first.
    When ``src`` goes it has nowhere to go, and the sentence says it is ``dest``'s pod leaving, where it read as one
    of ``src``'s own."""
    taint = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    only_m5 = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
               {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]
    out = plan_dict(nodepool(requirements=only_m5), node("dest", taints=taint), pod("dst-0", "dest", cpu="1"),
                    node("src"), pod("web-0", "src", cpu="500m"))
    reason = blocked_of(out, "src")["reason"]
    assert "(pod default/dst-0: leaving node dest, which is being taken away, " in reason, reason

