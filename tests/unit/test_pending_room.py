"""Pods that take room before a disruption's do (pending pods, pods leaving a node taken away already) keep their way
to the nodes Karpenter's scheduler lets them use when the node the simulation first gave them room on is the one being
disrupted: a node not initialized yet (``UninitializedNodeError`` is an error for neither, helpers.go and
``AllNonPendingPodsScheduled``) and a node inside its consolidateAfter (scheduler.go exempts a Pending pod and a
deleting node's). ebb placed them on the candidate first, then closed those nodes to them when the candidate went.
"""

from __future__ import annotations

from tests.kit.builders import ago, node, nodeclaim, nodepool, plan_dict, pod

KEEP = {"karpenter.sh/do-not-disrupt": "true"}


def _booting() -> list[dict[str, object]]:
    """``boot``: a node of the NodePool still starting up (not initialized), with room for a 1-cpu pod."""
    return [node("boot", initialized=False), nodeclaim("nc-boot", "boot", initialized=False)]


def test_a_pending_pod_goes_to_a_booting_node_when_the_candidate_it_was_first_given_goes() -> None:
    """``pend-1`` fits on ``cand`` or on ``boot``; ``cand``'s pod fits on ``keep``: ``cand`` is deleted, its room
    never needed (ebb replaced it with a node nobody needed, or kept it)."""
    out = plan_dict(nodepool(), node("keep", annotations=KEEP), nodeclaim("nc-keep", "keep"),
                    pod("big-1", "keep", cpu="1500m", memory="2Gi"),
                    node("cand"), nodeclaim("nc-cand", "cand"), pod("web-1", "cand", cpu="400m", memory="1Gi"),
                    *_booting(), pod("pend-1", None, cpu="1", memory="2Gi", phase="Pending"))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["cand"])], out["blocked"]


def test_a_deleting_nodes_pod_goes_to_a_booting_node_when_the_candidate_it_was_first_given_goes() -> None:
    out = plan_dict(nodepool(), node("keep", annotations=KEEP), nodeclaim("nc-keep", "keep"),
                    pod("big-1", "keep", cpu="1500m", memory="2Gi"),
                    node("cand"), nodeclaim("nc-cand", "cand"), pod("web-1", "cand", cpu="400m", memory="1Gi"),
                    *_booting(), node("old", deleting=True), nodeclaim("nc-old", "old", deleting=True),
                    pod("leaving", "old", cpu="1", memory="2Gi"))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["cand"])], out["blocked"]


def test_a_pod_in_phase_pending_may_move_onto_a_node_inside_its_consolidate_after() -> None:
    """``web-1`` is bound to ``cand`` but still Pending (its image pulling): Karpenter's scheduler lets it onto
    ``keep``, whose pods changed a minute ago, so ``cand`` is deleted; a Running pod may not go there, so ``cand`` is
    replaced by a cheaper node instead."""
    for phase, action in (("Pending", "delete"), ("Running", "replace")):
        out = plan_dict(nodepool(consolidate_after="5m"), node("keep", annotations=KEEP),
                        pod("big-1", "keep", cpu="1500m", memory="2Gi", started=ago(minutes=1)),
                        node("cand"), pod("web-1", "cand", cpu="400m", memory="1Gi", phase=phase))
        assert [(c["action"], c["nodes"]) for c in out["commands"]] == [(action, ["cand"])], phase
