"""A NodeClaim matched to its Node by ``status.providerID`` alone (its ``status.nodeName`` not written yet) counts as
one matched by name in every rule that reads it (docs/decisions.md, Candidates): its Drifted condition, its
lastPodEventTime and its terminationGracePeriod."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit.builders import ago, disrupted, node, nodeclaim, nodepool, plan_dict, pod


def _by_provider_id(claim: dict[str, Any]) -> dict[str, Any]:
    """The NodeClaim without ``status.nodeName``: matched by its providerID (the node's, us-east-1a)."""
    claim["status"].pop("nodeName")
    return claim


def _other() -> list[Any]:
    """A second node with a NodeClaim, with room for a's pod."""
    return [node("b"), nodeclaim("claim-b", "b"), pod("web-b", "b")]


def test_its_drifted_condition_drifts_the_node() -> None:
    drifted = {"type": "Drifted", "status": "True", "lastTransitionTime": ago(minutes=5)}
    out = plan_dict(nodepool(), node("a"), _by_provider_id(nodeclaim("claim-a", "a", conditions=[drifted])),
                    pod("web", "a"), *_other(), require_nodeclaim=True)
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("drift", ["a"])]


@pytest.mark.parametrize(("left", "deleted"), [(3, False), (15, True)])
def test_its_last_pod_event_holds_an_empty_node_for_consolidate_after(left: int, deleted: bool) -> None:
    """Node a is empty; its last pod left ``left`` minutes ago (the NodeClaim's lastPodEventTime), and its NodePool
    waits 10 minutes."""
    claim = _by_provider_id(nodeclaim("claim-a", "a"))
    claim["status"]["lastPodEventTime"] = ago(minutes=left)
    out = plan_dict(nodepool(consolidate_after="10m"), node("a"), claim, *_other(), require_nodeclaim=True)
    assert ("a" in disrupted(out)) is deleted


def test_its_grace_period_lets_drift_past_a_do_not_disrupt_pod() -> None:
    drifted = {"type": "Drifted", "status": "True", "lastTransitionTime": ago(minutes=5)}
    claim = _by_provider_id(nodeclaim("claim-a", "a", conditions=[drifted]))
    claim["spec"] = {"terminationGracePeriod": "1h"}
    out = plan_dict(nodepool(), node("a"), claim, pod("db", "a", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    *_other(), require_nodeclaim=True)
    assert "a" in disrupted(out)
