"""A candidate's pod in phase Pending may move onto a node inside its consolidateAfter: Karpenter's scheduler
(``scheduler.go``, ``isUnderConsolidateAfter``) refuses such a node to a moving pod unless the pod is Pending.
"""

from __future__ import annotations

from tests.kit.builders import ago, node, nodepool, plan_dict, pod

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
