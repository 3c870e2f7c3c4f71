"""Which pods a drain evicts, in which order, when it deletes one instead and when it stops waiting for one: the
rules of Karpenter's terminator (``pkg/controllers/node/termination/terminator``), asked of the core's model.

The drainer (``ebb.adapters.kube.drain``) reads pods from the apiserver and parses each with the snapshot's own
parser (`api_pod`), so a pod is a DaemonSet's, a mirror or static pod, finished, terminating or tolerating a taint
by the same fields and rules here as in the planner's view (`ebb.core.model.Pod`, `ebb.core.labels.tolerates`).
A pod the parser refuses (ebb's parser is stricter than the apiserver about the scheduling fields a drain does not
read) is parsed again from the fields a drain reads, so that it is still evicted.

Under a disruption taint a drain leaves alone (`skip_reason`): mirror and static pods, finished pods, pods that
tolerate the taint (they would be scheduled right back) or Karpenter's ``karpenter.sh/disrupted`` (which Karpenter
never evicts, whichever taint the drainer puts), and pods stuck terminating (still there a minute after
their ``deletionTimestamp``: Karpenter's ``IsStuckTerminating``, not waited for). It evicts the others in four
groups (`eviction_groups`), each gone before the next starts:

1. non-critical pods, 2. non-critical DaemonSet pods, 3. critical pods (`is_critical`: priority ≥ 2000000000 or a
``system-*-critical`` priority class), 4. critical DaemonSet pods

(Karpenter's ``groupPodsByPriority`` and its suite's "should evict pods in order": DaemonSet pods after the rest of
their tier, so a DaemonSet's non-critical pod goes before a critical Deployment's).

With a terminationGracePeriod deadline a pod whose own grace would not end by then is deleted at
``deadline - its grace`` (`delete_time`, Karpenter's ``podDeleteTimeWithGracePeriod``) with what is left of the
deadline as its grace, never less than a second (`granted_grace`). A pod whose do-not-disrupt holds
(`do_not_disrupt_active`, the planner's rule) is not evicted then, only waited for until its deletion. A pod
evicted is gone (`is_gone`) when the apiserver no longer has it, has another pod of its name, or has it finished
or stuck terminating.

The planner asks the same model which pods the apiserver lists on a node that a disruption has to move
(`reschedulable_keys`: `Pod.needs_rescheduling`) before approving a command
(``ebb.core.validation.view_behind``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from ebb.core.cluster import do_not_disrupt_protection
from ebb.core.labels import tolerates
from ebb.core.model import ANNOTATION_POD_DELETION_COST, TAINT_DISRUPTED, Pod, Taint
from ebb.core.snapshot import ParsedObject, SnapshotError, parse_object

#: a pod of at least this priority is critical (``system-cluster-critical``'s; ``system-node-critical`` is above)
CRITICAL_PRIORITY: Final = 2_000_000_000
#: Karpenter's disruption taint: a pod that tolerates it is left on its node by every drain (`skip_reason`)
KARPENTER_DISRUPTED: Final = Taint(TAINT_DISRUPTED, effect="NoSchedule")
#: Karpenter's ``IsStuckTerminating``: a pod still there this long after its ``deletionTimestamp`` (its deletion
#: plus its grace) is not waited for
STUCK_TERMINATING_AFTER: Final = 60.0

#: the fields of a pod a drain reads (`api_pod` parses a pod again from these alone when the whole does not parse)
_DRAIN_FIELDS: Final = {
    "metadata": ("name", "namespace", "uid", "annotations", "ownerReferences", "deletionTimestamp"),
    "spec": ("nodeName", "priority", "priorityClassName", "tolerations", "terminationGracePeriodSeconds"),
    "status": ("phase", "startTime"),
}


def api_pod(raw: Mapping[str, Any], previous: tuple[Mapping[str, Any], Pod] | None = None) -> Pod:
    """The pod ``raw``, as the apiserver gives it (a list's items have no ``kind``), parsed by the snapshot's parser
    (``previous``: an earlier version of it, as given and parsed, whose scheduling needs it keeps when its ``spec``
    is the same). A pod the parser refuses is parsed from the fields a drain reads (`_DRAIN_FIELDS`, without the
    deletion cost); SnapshotError when even those are not a pod's."""
    document = raw if raw.get("kind") == "Pod" else {**raw, "kind": "Pod"}
    earlier = None if previous is None else (previous[0], ParsedObject("Pod", "", previous[1]))
    try:
        pod: Pod = parse_object(document, previous=earlier).value
    except SnapshotError:
        pod = parse_object(_drain_fields(document)).value
    return pod


def _drain_fields(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` reduced to `_DRAIN_FIELDS`, the deletion cost annotation left out."""
    reduced: dict[str, Any] = {"kind": "Pod"}
    for section, names in _DRAIN_FIELDS.items():
        part = document.get(section)
        if isinstance(part, Mapping):
            reduced[section] = {name: part[name] for name in names if name in part}
    annotations = reduced.get("metadata", {}).get("annotations")
    if isinstance(annotations, Mapping):
        reduced["metadata"]["annotations"] = {k: v for k, v in annotations.items()
                                              if k != ANNOTATION_POD_DELETION_COST}
    return reduced


def is_critical(pod: Pod) -> bool:
    """A critical pod, evicted after the others: priority ≥ `CRITICAL_PRIORITY` or a ``system-*-critical`` class."""
    name = pod.priority_class
    return pod.priority >= CRITICAL_PRIORITY or (name.startswith("system-") and name.endswith("-critical"))


def is_stuck_terminating(pod: Pod, now: datetime) -> bool:
    """Karpenter's ``IsStuckTerminating``: still there more than a minute after its ``deletionTimestamp``."""
    at = pod.deletion_time
    return at is not None and (now - at).total_seconds() > STUCK_TERMINATING_AFTER


def skip_reason(pod: Pod, taint: Taint, now: datetime | None = None) -> str | None:
    """Why a drain under the disruption ``taint`` leaves ``pod`` alone, or None when it evicts it (a pod that
    tolerates the taint would be scheduled right back; one stuck terminating at ``now`` is not waited for). A pod
    that tolerates Karpenter's ``karpenter.sh/disrupted:NoSchedule`` is left alone under ebb's own taint too: Karpenter
    never evicts it (``IsWaitingEviction``), and the planner counts it as staying with its node."""
    if pod.is_mirror:
        return "mirror/static pod"
    if pod.is_terminal:
        return "finished"
    for left_by in (taint, KARPENTER_DISRUPTED):
        if tolerates(pod.spec.tolerations, left_by):
            return f"tolerates {left_by.key}"
    if now is not None and is_stuck_terminating(pod, now):
        return "stuck terminating"
    return None


def eviction_groups(pods: Sequence[Pod], taint: Taint, now: datetime | None = None) -> list[list[Pod]]:
    """The pods to evict, in the order they go (empty groups dropped): non-critical, non-critical DaemonSet pods,
    critical, critical DaemonSet pods (Karpenter's order); in each group, as ``pods`` has them."""
    groups: list[list[Pod]] = [[], [], [], []]
    for pod in pods:
        if skip_reason(pod, taint, now) is None:
            groups[2 * is_critical(pod) + pod.is_daemonset].append(pod)
    return [g for g in groups if g]


def do_not_disrupt_active(pod: Pod, now: datetime) -> bool:
    """Whether the pod's ``karpenter.sh/do-not-disrupt`` (or the older ``do-not-evict``) protects it at ``now``, by
    the planner's rule (`ebb.core.cluster.do_not_disrupt_protection`; Karpenter's ``IsDoNotDisruptActive``)."""
    return do_not_disrupt_protection(pod.annotations, pod.start_time, now) is not None


def delete_time(pod: Pod, deadline: datetime) -> datetime | None:
    """When a pod is deleted so that its whole grace ends by the node's terminationGracePeriod ``deadline``
    (Karpenter's ``podDeleteTimeWithGracePeriod``), or None when it is never deleted: it has no grace, or it is
    terminating already and its grace ends by the deadline (Karpenter's ``IsPodEligibleForForcedEviction``)."""
    grace = pod.termination_grace_seconds
    if grace is None:
        return None
    if pod.deleting and (pod.deletion_time is None or pod.deletion_time <= deadline):
        return None
    return deadline - timedelta(seconds=grace)


def granted_grace(deadline: datetime, now: datetime) -> int:
    """The grace a pod deleted at ``now`` gets: what is left until the deadline, whole seconds, at least 1
    (0 would force-delete it from etcd, breaking at-most-one-pod)."""
    return max(int((deadline - now).total_seconds()), 1)


def is_gone(pod: Pod, current: Pod | None, node: str, now: datetime, *, terminating_is_gone: bool = False) -> bool:
    """Whether ``pod``, drained from ``node``, is gone, the apiserver now having ``current`` under its name (None:
    nothing): gone when there is nothing, or another pod (a new UID, or bound to another node), or it is stuck
    terminating (Karpenter does not wait for it); with ``terminating_is_gone``, also once its deletion started."""
    if current is None or current.uid != pod.uid or current.node_name not in (None, node) or current.is_terminal:
        return True
    if is_stuck_terminating(current, now):
        return True
    return terminating_is_gone and current.deleting


def reschedulable_keys(pods: Iterable[Pod]) -> frozenset[str]:
    """``namespace/name`` of the pods that a disruption has to move (`Pod.needs_rescheduling`: not finished, neither
    mirror/static pods nor a DaemonSet's, and not being deleted unless a StatefulSet's)."""
    return frozenset(pod.key for pod in pods if pod.needs_rescheduling)
