"""controllers/nodeclaim/expiration/suite_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Karpenter's expiration controller deletes a NodeClaim whose ``spec.expireAfter`` (30s in the suite, the clock
stepped 60s) has passed since its creation, unbudgeted. ebb's expiration is a budgeted disruption method with the
reason Expired that reads the NodePool's (or DisruptionPolicy's) expireAfter (docs/decisions.md, Differences:
"Expiration is a disruption method with the reason Expired" and "expireAfter is the DisruptionPolicy's (or the
NodePool's) now"): each case asserts ebb's command. "should not remove non-expired NodeClaims" and "should delete
NodeClaims if the nodeClaim is expired but the node isn't" are tests/unit/test_karpenter_rules.py::test_expiration.
Not translated: Context("Metrics") (two cases on a counter), "should ignore expired NodeClaims that are not managed
by this Karpenter instance" (which NodeClasses a cloud provider manages is not in ebb's input), "should return the
requeue interval ..." (the controller's requeue).
"""

from __future__ import annotations

from typing import Any

from tests.kit.builders import ago, blocked_of, node, nodeclaim, nodepool, plan_dict

CLAIM_CREATED = ago(seconds=60)  # the suite steps the clock 60 s past the NodeClaim's creation


def _docs(expire_after: str, *, deleting: bool = False) -> list[Any]:
    return [nodepool(expire_after=expire_after, consolidate_after="Never"),
            node("a", created=CLAIM_CREATED), nodeclaim("claim-a", "a", created=CLAIM_CREATED, deleting=deleting)]


def test_expiration_should_remove_nodeclaims_that_are_expired() -> None:
    """expiration/suite_test.go, DescribeTable("Expiration"), Entry("should remove nodeclaims that are expired"):
    expireAfter 30s, 60 s old. ebb: an expiration command (reason Expired, budgeted; the node is empty, so a delete)."""
    out = plan_dict(*_docs("30s"))
    assert [(c["method"], c["reason"], c["action"], c["nodes"]) for c in out["commands"]] == \
        [("expiration", "Expired", "delete", ["a"])]


def test_should_not_remove_the_nodeclaims_when_expiration_is_disabled() -> None:
    """expiration/suite_test.go, Describe("Expiration"), It("should not remove the NodeClaims when expiration is
    disabled"): expireAfter Never."""
    out = plan_dict(*_docs("Never"))
    assert out["commands"] == []


def test_shouldnt_expire_the_same_nodeclaim_multiple_times() -> None:
    """expiration/suite_test.go, Describe("Expiration"), It("shouldn't expire the same NodeClaim multiple times"): the
    expired NodeClaim is already being deleted (a finalizer holds it): no second expiration."""
    out = plan_dict(*_docs("30s", deleting=True))
    assert out["commands"] == []
    assert blocked_of(out, "a")["reason"] == "it is already being deleted"
