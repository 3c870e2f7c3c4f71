"""The drain's pod rules (``ebb.core.drain``) on pods as the apiserver lists them, parsed by the snapshot's parser:
what a drain leaves alone, the order it evicts in (Karpenter's terminator suite, "should evict pods in order"),
which pods a disruption has to move (the planner's check before approving), the terminationGracePeriod deletions,
stuck terminating pods and when an evicted pod is gone. The drainer that acts on them is
tests/service/test_executor.py's and tests/service/test_drain_grace_period.py's."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from ebb.core.drain import (
    api_pod,
    delete_time,
    do_not_disrupt_active,
    eviction_groups,
    granted_grace,
    is_critical,
    is_gone,
    is_stuck_terminating,
    reschedulable_keys,
    skip_reason,
)
from ebb.core.model import Pod, Taint
from ebb.core.snapshot import SnapshotError, parse_object
from tests.kit.builders import NOW, pod, ts

KARPENTER = Taint("karpenter.sh/disrupted", effect="NoSchedule")
EBB = Taint("ebb.sh/disrupted", effect="NoSchedule")
DEADLINE = NOW + timedelta(minutes=10)


def listed(name: str = "web", *, spec: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
           **kwargs: Any) -> dict[str, Any]:
    """``builders.pod``'s pod on node n1 as a list's item (no kind), with these ``spec`` and ``metadata`` fields."""
    doc = pod(name, "n1", **kwargs)
    del doc["kind"], doc["apiVersion"]
    doc["spec"].update(spec or {})
    doc["metadata"].update(metadata or {})
    return doc


def parsed(name: str = "web", **kwargs: Any) -> Pod:
    return api_pod(listed(name, **kwargs))


def ending(at: datetime) -> dict[str, Any]:
    """The metadata of a pod being deleted whose grace ends ``at``."""
    return {"deletionTimestamp": ts(at)}


def tolerating(*tolerations: dict[str, str]) -> dict[str, Any]:
    return {"tolerations": list(tolerations)}


@pytest.mark.parametrize(("case", "made", "taint", "reason"), [
    ("a Deployment's pod is evicted", parsed(), KARPENTER, None),
    ("a pod without an owner is evicted", parsed(owner=None), KARPENTER, None),
    ("a DaemonSet's pod is evicted", parsed(owner=("DaemonSet", "agent")), KARPENTER, None),
    ("a mirror pod", parsed(owner=("Node", "n1"), annotations={"kubernetes.io/config.mirror": "abc"}), KARPENTER,
     "mirror/static pod"),
    ("the mirror annotation without a Node owner is no mirror pod (Karpenter's IsOwnedByNode)",
     parsed(owner=None, annotations={"kubernetes.io/config.mirror": "abc"}), KARPENTER, None),
    ("a static pod, owned by its Node", parsed(owner=("Node", "n1")), KARPENTER, "mirror/static pod"),
    ("succeeded", parsed(phase="Succeeded"), KARPENTER, "finished"),
    ("failed", parsed(phase="Failed"), KARPENTER, "finished"),
    ("tolerates the taint's key", parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "operator": "Exists"})),
     KARPENTER, "tolerates karpenter.sh/disrupted"),
    ("tolerates the key and its effect",
     parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"})),
     KARPENTER, "tolerates karpenter.sh/disrupted"),
    ("tolerates every taint (no key, Exists)", parsed(spec=tolerating({"operator": "Exists"})), KARPENTER,
     "tolerates karpenter.sh/disrupted"),
    ("Equal to the taint's empty value",
     parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "operator": "Equal", "value": ""})), KARPENTER,
     "tolerates karpenter.sh/disrupted"),
    ("the key alone (Equal by default, empty value)", parsed(spec=tolerating({"key": "karpenter.sh/disrupted"})),
     KARPENTER, "tolerates karpenter.sh/disrupted"),
    ("another effect", parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "effect": "NoExecute"})),
     KARPENTER, None),
    ("another value", parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "value": "x"})), KARPENTER, None),
    ("no key and Equal tolerates nothing", parsed(spec=tolerating({"operator": "Equal"})), KARPENTER, None),
    ("only node.kubernetes.io/unschedulable",
     parsed(spec=tolerating({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"})), KARPENTER, None),
    ("under ebb's taint, tolerating Karpenter's (which Karpenter never evicts)",
     parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "operator": "Exists"})), EBB,
     "tolerates karpenter.sh/disrupted"),
    ("under ebb's taint, tolerating Karpenter's with another effect",
     parsed(spec=tolerating({"key": "karpenter.sh/disrupted", "effect": "NoExecute"})), EBB, None),
    ("under ebb's taint, tolerating it", parsed(spec=tolerating({"key": "ebb.sh/disrupted", "operator": "Exists"})),
     EBB, "tolerates ebb.sh/disrupted"),
    ("terminating a minute and a second past its grace", parsed(metadata=ending(NOW - timedelta(seconds=61))),
     KARPENTER, "stuck terminating"),
    ("terminating a minute past its grace", parsed(metadata=ending(NOW - timedelta(seconds=60))), KARPENTER, None),
    ("a mirror pod stuck terminating is a mirror pod",
     parsed(owner=("Node", "n1"), annotations={"kubernetes.io/config.mirror": "abc"},
            metadata=ending(NOW - timedelta(hours=1))),
     KARPENTER, "mirror/static pod"),
])
def test_what_a_drain_leaves_alone(case: str, made: Pod, taint: Taint, reason: str | None) -> None:
    assert skip_reason(made, taint, NOW) == reason, case
    assert any(p is made for group in eviction_groups([made], taint, NOW) for p in group) is (reason is None), case


@pytest.mark.parametrize(("case", "made", "critical"), [
    ("no priority", parsed(), False),
    ("system-cluster-critical's priority", parsed(priority=2_000_000_000), True),
    ("just below it", parsed(priority=1_999_999_999), False),
    ("system-node-critical's priority", parsed(priority=2_000_001_000), True),
    ("the system-cluster-critical class", parsed(spec={"priorityClassName": "system-cluster-critical"}), True),
    ("the system-node-critical class", parsed(spec={"priorityClassName": "system-node-critical"}), True),
    ("a class not of the system", parsed(spec={"priorityClassName": "team-critical"}), False),
    ("a system class not critical", parsed(spec={"priorityClassName": "system-high"}), False),
])
def test_critical_pods(case: str, made: Pod, critical: bool) -> None:
    assert is_critical(made) is critical, case


def test_eviction_order_non_critical_then_daemonsets_then_critical_then_critical_daemonsets() -> None:
    pods = [
        parsed("ds-critical", owner=("DaemonSet", "x"), spec={"priorityClassName": "system-node-critical"}),
        parsed("ds", owner=("DaemonSet", "x")),
        parsed("critical-priority", priority=2_000_000_000),
        parsed("critical-class", spec={"priorityClassName": "system-cluster-critical"}),
        parsed("web"),
        parsed("bare", owner=None),
        parsed("mirror", annotations={"kubernetes.io/config.mirror": "abc"}, owner=("Node", "n1")),
        parsed("static", owner=("Node", "n1")),
        parsed("tolerates", spec=tolerating({"key": "karpenter.sh/disrupted", "operator": "Exists"})),
        parsed("tolerates-all", spec=tolerating({"operator": "Exists"})),
        parsed("done", phase="Succeeded"),
        parsed("other-taint", spec=tolerating({"key": "other", "operator": "Exists"})),
    ]
    names = [[p.name for p in group] for group in eviction_groups(pods, KARPENTER)]
    assert names == [["web", "bare", "other-taint"], ["ds"], ["critical-priority", "critical-class"], ["ds-critical"]]
    # under ebb's own taint (the karpenter provider) a pod tolerating only Karpenter's stays too: Karpenter, which
    # drains the node after ebb, never evicts it
    assert [p.name for p in eviction_groups(pods, EBB)[0]] == ["web", "bare", "other-taint"]


@pytest.mark.parametrize(("case", "made", "moves"), [
    ("a Deployment's pod", parsed("web"), True),
    ("a pod without an owner", parsed("bare", owner=None), True),
    ("in another namespace", parsed("other", ns="team"), True),
    ("tolerating the taint does not matter", parsed("tolerates", spec=tolerating({"operator": "Exists"})), True),
    ("a DaemonSet's pod", parsed("ds", owner=("DaemonSet", "x")), False),
    ("a mirror pod", parsed("mirror", annotations={"kubernetes.io/config.mirror": "abc"}, owner=("Node", "n1")), False),
    ("a static pod", parsed("static", owner=("Node", "n1")), False),
    ("succeeded", parsed("done", phase="Succeeded"), False),
    ("failed", parsed("failed", phase="Failed"), False),
    ("being deleted", parsed("leaving", metadata=ending(NOW + timedelta(seconds=30))), False),
    ("a StatefulSet's, being deleted: its replacement comes with its name",
     parsed("db-0", owner=("StatefulSet", "db"), metadata=ending(NOW + timedelta(seconds=30))), True),
])
def test_the_pods_a_disruption_has_to_move(case: str, made: Pod, moves: bool) -> None:
    """What the planner compares with its view before approving a command: the same rule as the view's."""
    assert (reschedulable_keys([parsed("web"), made]) == {"default/web", made.key}) is moves, case


def graced(grace: int, **kwargs: Any) -> Pod:
    return parsed(spec={"terminationGracePeriodSeconds": grace}, **kwargs)


@pytest.mark.parametrize(("case", "made", "expected"), [
    ("a pod's grace ending before the deadline: deleted at deadline - grace",
     graced(30), DEADLINE - timedelta(seconds=30)),
    ("a grace longer than what is left: deleted at once (a time in the past)",
     graced(3600), DEADLINE - timedelta(seconds=3600)),
    ("no terminationGracePeriodSeconds: never deleted", parsed(), None),
    ("terminating, its grace ending by the deadline: left to terminate",
     graced(30, metadata=ending(DEADLINE - timedelta(seconds=1))), None),
    ("terminating, its grace ending at the deadline: left to terminate", graced(30, metadata=ending(DEADLINE)), None),
    ("terminating past the deadline: deleted again (IsPodEligibleForForcedEviction)",
     graced(3600, metadata=ending(DEADLINE + timedelta(minutes=50))), DEADLINE - timedelta(seconds=3600)),
])
def test_delete_time(case: str, made: Pod, expected: datetime | None) -> None:
    assert delete_time(made, DEADLINE) == expected, case


@pytest.mark.parametrize(("left", "granted"), [(600.0, 600), (29.9, 29), (0.5, 1), (0.0, 1), (-30.0, 1)])
def test_granted_grace_is_what_is_left_and_at_least_one_second(left: float, granted: int) -> None:
    """Karpenter: max(int64(terminationTime - now), 1): never 0, which would force-delete from etcd."""
    assert granted_grace(DEADLINE, DEADLINE - timedelta(seconds=left)) == granted


@pytest.mark.parametrize(("ended_ago", "stuck"), [(61, True), (60, False), (10, False), (-30, False), (None, False)])
def test_stuck_terminating_is_a_minute_past_the_deletion_timestamp(ended_ago: int | None, stuck: bool) -> None:
    made = parsed(metadata={} if ended_ago is None else ending(NOW - timedelta(seconds=ended_ago)))
    assert is_stuck_terminating(made, NOW) is stuck


@pytest.mark.parametrize(("case", "annotations", "started", "active"), [
    ("true", {"karpenter.sh/do-not-disrupt": "true"}, NOW - timedelta(days=1), True),
    ("the older do-not-evict", {"karpenter.sh/do-not-evict": "true"}, NOW - timedelta(days=1), True),
    ("false", {"karpenter.sh/do-not-disrupt": "false"}, NOW - timedelta(days=1), False),
    ("a duration not run out", {"karpenter.sh/do-not-disrupt": "1h"}, NOW - timedelta(minutes=30), True),
    ("a duration run out", {"karpenter.sh/do-not-disrupt": "1h"}, NOW - timedelta(minutes=61), False),
    ("a duration, no start time (fail safe)", {"karpenter.sh/do-not-disrupt": "1h"}, None, True),
    ("not a duration", {"karpenter.sh/do-not-disrupt": "soon"}, NOW - timedelta(days=1), False),
    ("none", {}, NOW - timedelta(days=1), False),
])
def test_do_not_disrupt_active(case: str, annotations: dict[str, str], started: datetime | None,
                               active: bool) -> None:
    doc = listed(annotations=annotations)
    doc["status"]["startTime"] = None if started is None else ts(started)
    assert do_not_disrupt_active(api_pod(doc), NOW) is active, case


DRAINED = parsed(metadata={"uid": "uid-1"})


@pytest.mark.parametrize(("case", "current", "terminating_is_gone", "gone"), [
    ("the apiserver has no pod of its name", None, False, True),
    ("the same pod, still running", DRAINED, False, False),
    ("a new pod of the same name (a new UID)", parsed(metadata={"uid": "uid-2"}), False, True),
    ("the same UID bound to another node",
     parsed(metadata={"uid": "uid-1"}, spec={"nodeName": "n2"}), False, True),
    ("the same UID not bound (yet)", api_pod({**listed(metadata={"uid": "uid-1"}), "spec": {}}), False, False),
    ("terminating", parsed(metadata={"uid": "uid-1", **ending(NOW + timedelta(seconds=30))}), False, False),
    ("terminating, when terminating counts as gone",
     parsed(metadata={"uid": "uid-1", **ending(NOW + timedelta(seconds=30))}), True, True),
    ("stuck terminating", parsed(metadata={"uid": "uid-1", **ending(NOW - timedelta(minutes=5))}), False, True),
    ("the same pod, finished (Succeeded)", parsed(metadata={"uid": "uid-1"}, phase="Succeeded"), False, True),
    ("the same pod, failed", parsed(metadata={"uid": "uid-1"}, phase="Failed"), False, True),
])
def test_when_an_evicted_pod_is_gone(case: str, current: Pod | None, terminating_is_gone: bool, gone: bool) -> None:
    assert is_gone(DRAINED, current, "n1", NOW, terminating_is_gone=terminating_is_gone) is gone, case


def test_a_listed_pod_is_the_pod_the_snapshot_parser_makes() -> None:
    """A list's item has no kind; the drain's pod is the planner's, with the fields only the drain reads."""
    doc = listed(priority=2_000_000_000, spec={"priorityClassName": "system-cluster-critical",
                                               "terminationGracePeriodSeconds": 45},
                 metadata=ending(NOW), owner=("StatefulSet", "db"))
    made = api_pod(doc)
    assert made == parse_object({**doc, "kind": "Pod"}).value
    assert (made.key, made.owner_kind, made.priority_class, made.termination_grace_seconds, made.deletion_time) == (
        "default/web", "StatefulSet", "system-cluster-critical", 45, NOW)
    assert made.deleting and made.spec.requests["cpu"] == 100


def test_a_read_again_keeps_the_parsed_scheduling_needs() -> None:
    """The drainer reads a pod again while it waits: the same spec (but for nodeName) is not parsed again."""
    first = listed(spec={"nodeName": None})
    made = api_pod(first)
    again = api_pod(listed(), (first, made))
    assert again.spec is made.spec and again.node_name == "n1"


@pytest.mark.parametrize(("case", "spoiled"), [
    ("a request that is no quantity", {"spec": {"containers": [{"name": "main", "resources": {
        "requests": {"cpu": "lots"}}}]}}),
    ("a spread without its topology key", {"spec": {"topologySpreadConstraints": [{"maxSkew": 1}]}}),
    ("a deletion cost that is no integer", {"metadata": {"annotations": {
        "controller.kubernetes.io/pod-deletion-cost": "high", "karpenter.sh/do-not-disrupt": "true"}}}),
])
def test_a_pod_the_parser_refuses_is_still_drained(case: str, spoiled: dict[str, Any]) -> None:
    """ebb's parser is stricter than a drain needs: such a pod is read from the fields a drain reads, and is
    evicted in its place in the order, not left on a node being deleted."""
    doc = listed(owner=("DaemonSet", "agent"), spec={"priorityClassName": "system-node-critical",
                                                     "terminationGracePeriodSeconds": 45})
    for section, fields in spoiled.items():
        doc[section] = {**doc[section], **fields}
    with pytest.raises(SnapshotError):
        parse_object({**doc, "kind": "Pod"})
    made = api_pod(doc)
    assert (made.key, made.is_daemonset, is_critical(made), made.termination_grace_seconds) == (
        "default/web", True, True, 45), case
    assert skip_reason(made, KARPENTER, NOW) is None
    assert do_not_disrupt_active(made, NOW) is ("do-not-disrupt" in str(spoiled))


def test_a_pod_whose_drain_fields_are_unreadable_is_refused() -> None:
    with pytest.raises(SnapshotError, match="deletionTimestamp"):
        api_pod(listed(metadata={"deletionTimestamp": "soon"}))
