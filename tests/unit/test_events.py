"""ebb.core.events: which Kubernetes Event (Karpenter's reasons and messages) a pass, a decision and an
interruption give, on which object, Normal or Warning, and how events are keyed for de-duplication."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ebb.core import events as ev
from ebb.core.cluster import ClusterView
from ebb.core.engine import run_pass
from tests.kit.builders import NOW, ago, hold, node, nodeclaim, nodepool, pdb, pod, snapshot

DND = {"karpenter.sh/do-not-disrupt": "true"}


def pass_of(*docs: Any) -> list[ev.KubeEvent]:
    view = ClusterView.build(snapshot(*docs), NOW)
    return ev.pass_events(view, run_pass(view))


def on(events: list[ev.KubeEvent], kind: str, name: str) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in events if e.involved.kind == kind and e.involved.name == name]


BUSY = [node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m")]  # fits nowhere else, cheapest type

# (case, documents, node, expected reason or None, words the message contains)
PASS_CASES: list[tuple[str, list[Any], str, str | None, str]] = [
    ("cannot be consolidated", [nodepool(), *BUSY], "n2", ev.UNCONSOLIDATABLE, "can't replace with a cheaper node"),
    ("do-not-consolidate node", [nodepool(), node("n1", annotations={"karpenter.sh/do-not-consolidate": "true"}),
                                 *BUSY], "n1", ev.UNCONSOLIDATABLE, "do-not-consolidate"),
    ("consolidation policy WhenEmpty", [nodepool(policy="WhenEmpty"), *BUSY], "n2", ev.UNCONSOLIDATABLE,
     "consolidationPolicy is WhenEmpty"),
    ("do-not-disrupt node", [nodepool(), node("n1", annotations=DND), *BUSY], "n1", ev.DISRUPTION_BLOCKED,
     "do-not-disrupt=true"),
    ("do-not-disrupt pod", [nodepool(), node("n1"), pod("p1", "n1", annotations=DND), *BUSY], "n1",
     ev.DISRUPTION_BLOCKED, "Pod default/p1 has karpenter.sh/do-not-disrupt=true"),
    ("PDB forbids eviction", [nodepool(), node("n1"), pod("p1", "n1", labels={"app": "a"}),
                              pdb("a", {"app": "a"}, min_available=1), *BUSY], "n1", ev.DISRUPTION_BLOCKED,
     "prevents pod evictions"),
    ("not initialized", [nodepool(), node("n1", initialized=False), *BUSY], "n1", ev.DISRUPTION_BLOCKED,
     "not initialized"),
    ("budget of 0", [nodepool(budgets=[{"nodes": "0"}]), node("n1"), *BUSY], "n1", ev.DISRUPTION_BLOCKED,
     "budget allows 0 disruptions"),
    ("hold on the NodePool", [nodepool(), node("n1"), hold("h", "nodePool", "default", reason="freeze"), *BUSY],
     "n1", ev.DISRUPTION_BLOCKED, "hold h"),
    ("not a NodePool node", [nodepool(), node("n1", pool=None), *BUSY], "n1", None, ""),
    ("already deleting", [nodepool(), node("n1", deleting=True), *BUSY], "n1", None, ""),
    ("already being disrupted", [nodepool(), node("n1", taints=[{"key": "karpenter.sh/disrupted",
                                                                  "effect": "NoSchedule"}]), *BUSY], "n1", None, ""),
    ("disrupted by this pass", [nodepool(), node("n1"), *BUSY], "n1", None, ""),
    ("another method acted this pass", [nodepool(expire_after="1h"), node("n1"), pod("p1", "n1", cpu="1500m"),
                                        node("n3", created=ago(minutes=5)), node("n4", created=ago(minutes=5))],
     "n3", None, ""),
    # n1's pod, which expiration moves this pass, has nowhere else to go than the empty n3
    ("nominated for a pod leaving a disrupted node", [nodepool(expire_after="1h"), node("n1"),
                                                      pod("p1", "n1", cpu="1500m"), node("n3", created=ago(minutes=5))],
     "n3", ev.DISRUPTION_BLOCKED, "nominated for pod default/p1"),
    ("stabilization window", [nodepool(stabilization_window="1h"), node("n1"),
                              node("n2", itype="t3.medium", created=ago(minutes=5)), pod("p2", "n2", cpu="1500m")],
     "n1", ev.DISRUPTION_BLOCKED, "stabilizationWindow (1h), in effect since node"),
]


@pytest.mark.parametrize(("documents", "name", "reason", "words"),
                         [pytest.param(d, n, r, w, id=c) for c, d, n, r, w in PASS_CASES])
def test_pass_events_per_node(documents: list[Any], name: str, reason: str | None, words: str) -> None:
    found = on(pass_of(*documents), "Node", name)
    if reason is None:
        assert found == []
        return
    [(type_, got, message)] = found
    assert (type_, got) == ("Normal", reason)
    assert words in message and message[0].isupper()


def test_a_nodeclaim_gets_the_same_event_as_its_node() -> None:
    events = pass_of(nodepool(), node("n1", annotations=DND), nodeclaim("claim-1", "n1"), *BUSY)
    [(_, reason, message)] = on(events, "NodeClaim", "claim-1")
    assert (reason, message) == on(events, "Node", "n1")[0][1:]
    [claim_event] = [e for e in events if e.involved.kind == "NodeClaim"]
    assert claim_event.involved.api_version == "karpenter.sh/v1" and claim_event.involved.namespace == ""


def test_a_nodepool_with_a_zero_budget_is_reported_once_per_reason() -> None:
    events = pass_of(nodepool(budgets=[{"nodes": "0", "reasons": ["Empty", "Drifted"]}, {"nodes": "100%"}]),
                     node("n1"), *BUSY)
    pool = [e for e in events if e.involved.kind == "NodePool"]
    assert sorted(e.message for e in pool) == [
        "No allowed disruptions for disruption reason Drifted due to blocking budget",
        "No allowed disruptions for disruption reason Empty due to blocking budget"]
    assert all(e.reason == ev.DISRUPTION_BLOCKED and e.dedupe_seconds == 60 for e in pool)
    assert len({e.dedupe_key for e in pool}) == 2


def test_dedupe_keys_follow_karpenter() -> None:
    [node_event] = ev.unconsolidatable("n1", None, "first reason")
    [again] = ev.unconsolidatable("n1", None, "another reason")
    assert node_event.dedupe_seconds == 15 * 60
    assert node_event.dedupe_key == again.dedupe_key  # the message is not part of the key
    assert node_event.dedupe_key != ev.unconsolidatable("n2", None, "first reason")[0].dedupe_key
    assert node_event.dedupe_key != ev.blocked("n1", None, "first reason")[0].dedupe_key
    assert ev.blocked("n1", None, "x")[0].dedupe_seconds == ev.DEFAULT_DEDUPE_SECONDS


FACTS = ev.DecisionFacts(decision_id="dec-1", method="emptiness", reason="Empty", action="delete",
                         nodes=("n1", "n2"), savings=0.192)

DECISION_CASES = [
    ("proposed", lambda: ev.proposed(FACTS, {"n1": "c1"}), ev.CONSOLIDATION_CANDIDATE, "Normal",
     "Consolidation candidate: emptiness delete of n1, n2 (Empty) (savings: $0.19/h)"),
    ("approved", lambda: ev.approved(FACTS, {"n1": "c1"}), ev.CONSOLIDATION_APPROVED, "Normal",
     "Consolidation approved: emptiness delete of n1, n2 (Empty) (savings: $0.19/h)"),
    ("rejected", lambda: ev.rejected(FACTS, {"n1": "c1"}, "node n1 is no longer empty"), ev.CONSOLIDATION_REJECTED,
     "Normal", "Consolidation rejected: emptiness delete of n1, n2 (Empty), reason: node n1 is no longer empty "
     "(savings: $0.19/h)"),
]


@pytest.mark.parametrize(("build", "reason", "type_", "message"),
                         [pytest.param(b, r, t, m, id=c) for c, b, r, t, m in DECISION_CASES])
def test_decision_events(build: Any, reason: str, type_: str, message: str) -> None:
    events: list[ev.KubeEvent] = build()
    assert [(e.involved.kind, e.involved.name) for e in events] == [("Node", "n1"), ("NodeClaim", "c1"),
                                                                     ("Node", "n2")]
    assert {(e.reason, e.type, e.message) for e in events} == {(reason, type_, message)}
    assert all(e.dedupe_values == ("dec-1",) for e in events)  # one event per decision, never held back


def test_an_approved_interruption_reports_termination_on_interruption() -> None:
    facts = ev.DecisionFacts("dec-2", "interruption", "Interrupted", "delete", ("n1",), 0.0)
    events = ev.approved(facts, {"n1": "c1"})
    assert [(e.involved.kind, e.type, e.reason, e.message) for e in events] == [
        ("Node", "Warning", ev.TERMINATING_ON_INTERRUPTION, "Interruption triggered termination for the Node"),
        ("NodeClaim", "Warning", ev.TERMINATING_ON_INTERRUPTION,
         "Interruption triggered termination for the NodeClaim")]


INTERRUPTION_CASES = [
    ("spot-interruption", None, "Warning", ev.SPOT_INTERRUPTED, True),
    ("capacity-reservation-interruption", None, "Warning", ev.RESERVATION_INTERRUPTED, True),
    ("scheduled-change", None, "Warning", ev.INSTANCE_UNHEALTHY, True),
    ("state-change", "stopping", "Warning", ev.INSTANCE_STOPPING, True),
    ("state-change", "stopped", "Warning", ev.INSTANCE_STOPPING, True),
    ("state-change", "shutting-down", "Warning", ev.INSTANCE_TERMINATING, True),
    ("state-change", "terminated", "Warning", ev.INSTANCE_TERMINATING, True),
    ("state-change", "running", "Warning", ev.INSTANCE_TERMINATING, False),
    # a state change that names no state (an older message) is taken as taking the node away
    ("state-change", None, "Warning", ev.INSTANCE_TERMINATING, True),
    ("rebalance", None, "Normal", ev.SPOT_REBALANCE, False),
]


@pytest.mark.parametrize(("kind", "state", "type_", "reason", "acts"), INTERRUPTION_CASES)
def test_interruption_events(kind: str, state: str | None, type_: str, reason: str, acts: bool) -> None:
    events = ev.interruption(kind, state, "n1", "c1")
    assert [(e.involved.kind, e.involved.name, e.type, e.reason) for e in events] == [
        ("Node", "n1", type_, reason), ("NodeClaim", "c1", type_, reason)]
    assert ev.takes_node_away(kind, state) is acts


@pytest.mark.parametrize(("events", "expected"), [
    (lambda: ev.terminating("n1", "claim-1", "Drifted"),
     [("Node", "n1", "Normal", "DisruptionTerminating", "Disrupting Node: Drifted"),
      ("NodeClaim", "claim-1", "Normal", "DisruptionTerminating", "Disrupting NodeClaim: Drifted")]),
    (lambda: ev.launching("general-abc", "Underutilized"),
     [("Node", "general-abc", "Normal", "DisruptionLaunching", "Launching Node: Underutilized")]),
    (lambda: ev.waiting_readiness("general-abc"),
     [("Node", "general-abc", "Normal", "DisruptionWaitingReadiness",
       "Waiting on readiness to continue disruption")]),
    (lambda: ev.failed_draining("n1", None, "pod default/web-0 could not be evicted"),
     [("Node", "n1", "Warning", "FailedDraining", "Failed to drain node, pod default/web-0 could not be evicted")]),
])
def test_termination_events(events: Any, expected: list[tuple[str, str, str, str, str]]) -> None:
    assert [(e.involved.kind, e.involved.name, e.type, e.reason, e.message) for e in events()] == expected


WEB_0 = ev.pod_ref("shop", "web-0", "uid-web-0")
DEADLINE = datetime(2026, 11, 23, 19, 30, tzinfo=timezone(timedelta(hours=1)))  # 18:30Z


# Karpenter's terminator events (pkg/controllers/node/termination/terminator/events/events.go), word for word
@pytest.mark.parametrize(("event", "expected"), [
    (lambda: [ev.evicted(WEB_0, "Underutilized")],
     [("Pod", "shop", "web-0", "uid-web-0", "Normal", "Evicted", "Evicted pod: Underutilized")]),
    (lambda: [ev.disrupted_pod(WEB_0, 1, 30, DEADLINE)],
     [("Pod", "shop", "web-0", "uid-web-0", "Normal", "Disrupted",
       "Deleting the pod to accommodate the terminationTime 2026-11-23 18:30:00 +0000 UTC of the node. The pod "
       "was granted 1 seconds of grace-period of its 30 terminationGracePeriodSeconds. This bypasses the PDB of "
       "the pod and the do-not-disrupt annotation.")]),
    (lambda: ev.termination_grace_period_expiring("n1", "claim-1", DEADLINE),
     [("Node", "", "n1", "", "Warning", "TerminationGracePeriodExpiring", "All pods will be deleted by "
       "2026-11-23T18:30:00Z"),
      ("NodeClaim", "", "claim-1", "", "Warning", "TerminationGracePeriodExpiring", "All pods will be deleted by "
       "2026-11-23T18:30:00Z")]),
])
def test_pod_and_grace_period_events(event: Any, expected: list[tuple[str, ...]]) -> None:
    assert [(e.involved.kind, e.involved.namespace, e.involved.name, e.involved.uid, e.type, e.reason, e.message)
            for e in event()] == expected


@pytest.mark.parametrize(("at", "printed"), [
    (datetime(2026, 11, 23, 18, 30, tzinfo=UTC), "2026-11-23 18:30:00 +0000 UTC"),
    (datetime(2026, 11, 23, 18, 30, 0, 250000, tzinfo=UTC), "2026-11-23 18:30:00.25 +0000 UTC"),
    (datetime(2026, 11, 24, 0, 15, tzinfo=timezone(timedelta(hours=1))), "2026-11-23 23:15:00 +0000 UTC"),
])
def test_go_time(at: datetime, printed: str) -> None:
    assert ev.go_time(at) == printed


def test_an_evicted_event_is_keyed_on_its_pod_as_karpenter_dedupes_it() -> None:
    first, again = ev.evicted(WEB_0, "Drifted"), ev.evicted(WEB_0, "Empty")
    other = ev.evicted(ev.pod_ref("other", "web-0"), "Drifted")
    assert first.dedupe_key == again.dedupe_key != other.dedupe_key
