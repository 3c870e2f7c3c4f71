"""controllers/nodeclaim/disruption/suite_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Not translated (docs/decisions.md, "Karpenter's test suites, translated"): "should set multiple disruption conditions
simultaneously" and "should remove multiple disruption conditions simultaneously" (the cloud provider's own
IsDrifted sets and clears Drifted; ebb reads the condition as given and computes the rest of drift itself, see
test_nodeclaim_drift.py, and Consolidatable, see test_nodeclaim_consolidation.py).
"""

from __future__ import annotations

from tests.kit.builders import OLD, blocked_of, node, nodeclaim, nodepool, plan_dict


def test_should_not_set_consolidatable_condition_for_static_nodepool() -> None:
    """nodeclaim/disruption/suite_test.go, Describe("Disruption"), It("should not set consolidatable condition for
    Static Nodepool"): a NodePool with ``spec.replicas: 1`` (WhenEmpty, consolidateAfter 30s); its empty node's
    NodeClaim never becomes Consolidatable, so no consolidation takes it."""
    static = nodepool("static", policy="WhenEmpty", consolidate_after="30s")
    static["spec"]["replicas"] = 1
    claim = nodeclaim("claim-s", "s", pool="static", created=OLD)
    claim["status"]["lastPodEventTime"] = "2026-11-23T18:25:00Z"
    out = plan_dict(static, node("s", pool="static"), claim)
    assert out["commands"] == []
    assert "is static (spec.replicas 1)" in blocked_of(out, "s")["reason"]
