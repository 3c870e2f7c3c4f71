"""controllers/nodeclaim/disruption/consolidation_test.go, translated (Karpenter v1.14.1, paths under ``pkg``).

Karpenter's NodeClaim disruption controller sets ``Consolidatable=True`` on an initialized NodeClaim once the
NodePool's consolidateAfter has passed since ``status.lastPodEventTime`` (or, without one, since the
``Initialized`` transition), and removes it otherwise; the disruption methods wait for it. ebb computes the same
from the snapshot (docs/decisions.md, Differences: "Consolidatable is computed"), so each case asserts what the
condition would decide: whether the empty node is taken. The suite's NodePool: WhenEmptyOrUnderutilized,
consolidateAfter 1m; its NodeClaim's last pod event 5 minutes ago. Not translated: "should ignore NodeClaims not
managed by this instance of Karpenter" (which NodeClasses a cloud provider manages is not in ebb's input).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from tests.kit.builders import NOW, ago, blocked_of, disrupted, node, nodeclaim, nodepool, plan_dict, snapshot, ts
from tests.kit.karpenter_suite import CONSOLIDATABLE

CREATED = ago(minutes=30)


def _claim(*, last_pod_event: datetime | None, initialized: tuple[str, str] = ("True", CREATED),
           conditions: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """The NodeClaim of node ``a``: ``status.lastPodEventTime`` (None: never set), its Initialized condition as
    (status, lastTransitionTime), and more conditions."""
    claim = nodeclaim("claim-a", "a", created=CREATED, conditions=conditions)
    claim["status"]["conditions"][0].update(status=initialized[0], lastTransitionTime=initialized[1])
    if last_pod_event is not None:
        claim["status"]["lastPodEventTime"] = ts(last_pod_event)
    return claim


def _plan(claim: dict[str, Any], *, consolidate_after: str = "1m", minutes: float = 0) -> dict[str, Any]:
    """The empty node ``a`` (created 30 minutes ago, no karpenter.sh/initialized label: its NodeClaim says) planned
    ``minutes`` after NOW."""
    return plan_dict(nodepool(consolidate_after=consolidate_after), node("a", created=CREATED, initialized=False),
                     claim, now=NOW + timedelta(minutes=minutes))


# (Karpenter's case, the NodeClaim, minutes after NOW, whether a is consolidatable then)
MARK = [
    ("should mark NodeClaims as consolidatable (the last pod event is now: not yet)",
     _claim(last_pod_event=NOW), 0, False),
    ("should mark NodeClaims as consolidatable (a minute later)", _claim(last_pod_event=NOW), 1, True),
    ("should mark NodeClaims as consolidatable based on the nodeclaim initialized time (initialized now: not yet)",
     _claim(last_pod_event=None, initialized=("True", ts(NOW))), 0, False),
    ("should mark NodeClaims as consolidatable based on the nodeclaim initialized time (a minute later)",
     _claim(last_pod_event=None, initialized=("True", ts(NOW))), 1, True),
    ("should remove the status condition from the nodeClaim when lastPodEvent is too recent",
     _claim(last_pod_event=NOW, conditions=(CONSOLIDATABLE,)), 0, False),
    ("the suite's NodeClaim: its last pod event 5 minutes ago, consolidatable",
     _claim(last_pod_event=NOW - timedelta(minutes=5)), 0, True),
]


@pytest.mark.parametrize(("claim", "minutes", "taken"), [c[1:] for c in MARK], ids=[c[0] for c in MARK])
def test_consolidatable_after_the_last_pod_event(claim: dict[str, Any], minutes: int, taken: bool) -> None:
    """nodeclaim/disruption/consolidation_test.go, Describe("Underutilized"): the empty node goes once consolidateAfter
    (1m) has passed since the NodeClaim's last pod event, or its initialization when none is recorded; a pod that
    left is seen only in ``lastPodEventTime``, which a stale Consolidatable=True does not override."""
    out = _plan(claim, minutes=minutes)
    assert ("a" in disrupted(out)) is taken
    if not taken:
        assert "consolidateAfter" in blocked_of(out, "a")["reason"]


def test_should_remove_the_status_condition_from_the_nodeclaim_when_consolidateafter_is_never() -> None:
    """nodeclaim/disruption/consolidation_test.go, Describe("Underutilized"), It("should remove the status condition
    from the nodeClaim when consolidateAfter is never"): with Never, no consolidation whatever the condition says."""
    out = _plan(_claim(last_pod_event=NOW - timedelta(minutes=5), conditions=(CONSOLIDATABLE,)),
                consolidate_after="Never")
    assert out["commands"] == []


# (Karpenter's case, the Initialized condition's status)
NOT_INITIALIZED = [
    ("should remove the status condition from the nodeClaim when the nodeClaim initialization condition is unknown",
     "Unknown"),
    ("should remove the status condition from the nodeClaim when the nodeClaim is not initialized", "False"),
]


@pytest.mark.parametrize("status", [c[1] for c in NOT_INITIALIZED], ids=[c[0] for c in NOT_INITIALIZED])
def test_not_initialized_is_not_consolidatable(status: str) -> None:
    """nodeclaim/disruption/consolidation_test.go, Describe("Underutilized"): a NodeClaim that is not Initialized is
    no candidate, Consolidatable=True or not."""
    out = _plan(_claim(last_pod_event=NOW - timedelta(minutes=5), initialized=(status, CREATED),
                       conditions=(CONSOLIDATABLE,)))
    assert out["commands"] == []
    assert blocked_of(out, "a")["method"] == "all"


# (what the NodeClaim records, when the node's pods last changed)
LAST_POD_EVENT = [
    ("lastPodEventTime after everything else", _claim(last_pod_event=NOW - timedelta(minutes=2)),
     NOW - timedelta(minutes=2)),
    ("the Initialized transition when it is the latest",
     _claim(last_pod_event=None, initialized=("True", ago(minutes=3))), NOW - timedelta(minutes=3)),
    ("an Initialized condition that is not True says nothing", _claim(last_pod_event=None,
                                                                      initialized=("False", ago(minutes=3))),
     NOW - timedelta(minutes=30)),
    ("an older lastPodEventTime does not hide the node's creation", _claim(last_pod_event=NOW - timedelta(hours=2)),
     NOW - timedelta(minutes=30)),
    # Karpenter's controller sets Consolidatable once consolidateAfter has passed since the pod event: counted from
    # it, a node next to Karpenter waited twice consolidateAfter (and was said to have had its pods change then)
    ("a Consolidatable transition is no pod event", _claim(
        last_pod_event=NOW - timedelta(minutes=20),
        conditions=({"type": "Consolidatable", "status": "True", "lastTransitionTime": ago(minutes=2)},)),
     NOW - timedelta(minutes=20)),
]


@pytest.mark.parametrize(("claim", "last"), [c[1:] for c in LAST_POD_EVENT], ids=[c[0] for c in LAST_POD_EVENT])
def test_cluster_view_last_pod_event_reads_the_nodeclaim(claim: dict[str, Any], last: datetime) -> None:
    """ebb.core.cluster.ClusterView.last_pod_event: the latest of the node's creation (30 minutes ago here), its
    pods' arrivals, and the NodeClaim's lastPodEventTime and Initialized transition."""
    view = ClusterView.build(snapshot(nodepool(), node("a", created=CREATED, initialized=False), claim), NOW)
    [a] = view.snapshot.nodes
    assert view.last_pod_event(a) == last


@pytest.mark.parametrize(("claim", "since"), [
    (_claim(last_pod_event=None, initialized=("True", ago(minutes=3))), "its NodeClaim claim-a was initialized"),
    (_claim(last_pod_event=NOW - timedelta(minutes=2)), "the node's pods last changed"),
    (_claim(last_pod_event=None, initialized=("True", ago(minutes=40))), "the node was created"),
])
def test_the_wait_names_what_consolidate_after_is_counted_from(claim: dict[str, Any], since: str) -> None:
    """The reason names the moment the wait is counted from: a pod event, the NodeClaim's initialization (Karpenter
    counts from it when no pod event is recorded) or the node's creation, not a change of its pods that never
    happened."""
    out = _plan(claim, consolidate_after="1h")
    reason = blocked_of(out, "a")["reason"]
    assert f"consolidateAfter (1h) has not passed since {since} at " in reason, reason
