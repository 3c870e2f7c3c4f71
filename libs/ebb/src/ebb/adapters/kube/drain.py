"""Draining a node through the Eviction API, as the termination-executor does it (termination in
docs/architecture.md#decision-semantics).

``Drainer.taint`` adds the drainer's disruption taint (the provider's, ``ebb.adapters.provider``:
``karpenter.sh/disrupted:NoSchedule`` where ebb deletes Nodes itself, ``ebb.sh/disrupted:NoSchedule`` next to a
real Karpenter) with an idempotent JSON patch (nothing when the taint is there; a ``test`` of the
resourceVersion read guards against a concurrent writer, and a lost race is read again and retried);
``patch_until_done`` is that loop for any node patch.
``Drainer.drain`` evicts the node's pods with ``policy/v1`` Evictions (``pods/{name}/eviction``) in
groups, each group gone before the next one starts:

1. non-critical pods, 2. non-critical DaemonSet pods, 3. critical pods (priority ≥ 2000000000 or a
``system-*-critical`` priority class), 4. critical DaemonSet pods

(Karpenter's ``groupPodsByPriority`` and its suite's "should evict pods in order": DaemonSet pods after the
rest of their tier, so a DaemonSet's non-critical pod goes before a critical Deployment's).

Mirror/static pods, finished pods and pods that tolerate the disruption taint are left alone. HTTP 429
(a PodDisruptionBudget forbids the eviction now) and other refusals are retried with capped exponential
backoff (``EvictionBackoff``, an ``ebb.adapters.backoff.Backoff``; every wait on the drainer's clock, cut
short by its ``stop`` with ``Stopped``); 404 means the pod is already gone. A pod is gone when the API
server no longer has it (or has a new pod of the same name: a new UID or another node); with
``terminating_is_gone`` a pod whose deletion has started counts as gone too. A pod that is not gone
``eviction_deadline`` seconds after its first eviction attempt (by the drainer's clock) fails the drain
(``DrainFailed``). Pods stuck terminating (still there a minute after their ``deletionTimestamp``, Karpenter's
``IsStuckTerminating``) are neither evicted nor waited for: they count as gone.

With a terminationGracePeriod deadline (``drain(deadline=...)``: the start of the node's termination plus its
NodeClaim's/NodePool's ``terminationGracePeriod``, as Karpenter's ``karpenter.sh/nodeclaim-termination-timestamp``),
each pod whose own ``terminationGracePeriodSeconds`` would not end before the deadline is *deleted* (not
evicted: its PDB is bypassed, only then) at ``deadline - its grace``, granted ``max(int(deadline - now), 1)``
seconds (Karpenter's ``DeleteExpiringPods``: never 0, which would force-delete it from etcd); a pod already
terminating with a ``deletionTimestamp`` after the deadline is deleted again with the shorter grace. Its
evictions are retried until then instead of ``eviction_deadline``, so without a deadline a drain still fails
where a PDB never allows the eviction, and with one the drain ends by the deadline (plus the stuck minute).
``Drainer.untaint`` removes the taint again (rollback). Removing the node afterwards is the provider's
(``retire``). The drainer itself names no taint and touches no finalizer.

The API is behind the small ``NodeApi`` protocol: ``KubeNodeApi`` on kubernetes-asyncio, fakes in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, Protocol

from tenacity import RetryCallState, retry_if_exception_type

from ebb.adapters.backoff import Backoff, attempt_then_retry
from ebb.adapters.clock import Clock, Waitable
from ebb.adapters.kube.paging import list_items, page_options
from ebb.core.cluster import do_not_disrupt_protection

log = logging.getLogger("ebb.kube.drain")

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
CRITICAL_PRIORITY: Final = 2_000_000_000
#: Karpenter's ``IsStuckTerminating``: a pod still there this long after its ``deletionTimestamp`` (its deletion
#: plus its grace) is not waited for
STUCK_TERMINATING_AFTER: Final = 60.0
#: the terminationGracePeriod deadline of a node being drained, RFC 3339, set once at the first drain (ebb's
#: copy of Karpenter's ``karpenter.sh/nodeclaim-termination-timestamp``, on the Node: kwok and simulated nodes
#: have no NodeClaim), so a command resumed after a restart keeps the deadline; removed by a rollback
TERMINATION_TIMESTAMP_ANNOTATION: Final = "ebb.sh/termination-timestamp"

EvictionResult = Literal["evicted", "blocked", "gone", "refused"]


class KubeError(RuntimeError):
    """The API server answered with an unexpected status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Conflict(KubeError):
    """A patch's ``test`` failed or the object changed meanwhile (409/422): read again and retry."""


class DrainFailed(RuntimeError):
    """The node could not be drained (a pod that would not go within the deadline)."""


class NodeApi(Protocol):
    """The few API calls a drain needs; objects are kubectl-shaped dicts (camelCase)."""

    async def read_node(self, name: str) -> dict[str, Any] | None:
        """The Node, or None when it does not exist."""
        ...

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        """Apply a JSON patch (RFC 6902); Conflict when a ``test`` fails, KubeError(404) when missing."""
        ...

    async def delete_node(self, name: str) -> bool:
        """Delete the Node; False when it did not exist."""
        ...

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to ``node`` (all namespaces)."""
        ...

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        ...

    async def evict(self, namespace: str, name: str) -> tuple[EvictionResult, str]:
        """Create a policy/v1 Eviction: evicted (2xx), blocked (429: a PDB), gone (404), refused (other);
        with the API server's message."""
        ...

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        """Delete the pod with ``gracePeriodSeconds`` (no PDB is consulted); False when it did not exist."""
        ...


@dataclass(frozen=True)
class EvictionBackoff(Backoff):
    """Capped exponential backoff between eviction attempts of one pod: 0.5 s doubling to 10 s, no jitter,
    until the eviction deadline."""

    initial: float = 0.5
    maximum: float = 10.0
    jitter: float = 0.0


class _Refused(Exception):
    """An eviction was refused (429 or another refusal): tried again after the backoff."""

    def __init__(self, result: EvictionResult, message: str) -> None:
        super().__init__(f"{result}: {message}")
        self.result = result
        self.message = message


def eviction_code(result: EvictionResult, message: str) -> str:
    """The HTTP status code of an eviction request, as a metric label: 200, 429, 404, or the code of a
    refusal (``KubeNodeApi`` words it "HTTP nnn: ..."); "error" when it is not known."""
    if result == "evicted":
        return "200"
    if result == "blocked":
        return "429"
    if result == "gone":
        return "404"
    head = message.split(":", 1)[0]
    if head.startswith("HTTP ") and head[5:].isdigit():
        return head[5:]
    return "error"


# -- pod classification (pure) --------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def pod_ref(pod: Mapping[str, Any]) -> str:
    meta = _meta(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_mirror_or_static(pod: Mapping[str, Any]) -> bool:
    meta = _meta(pod)
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return True
    return any(ref.get("kind") == "Node" for ref in meta.get("ownerReferences") or [])


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in _meta(pod).get("ownerReferences") or [])


def is_critical(pod: Mapping[str, Any]) -> bool:
    spec = _spec(pod)
    priority = spec.get("priority")
    if isinstance(priority, int) and priority >= CRITICAL_PRIORITY:
        return True
    name = spec.get("priorityClassName") or ""
    return isinstance(name, str) and name.startswith("system-") and name.endswith("-critical")


def is_finished(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def reschedulable_pod_keys(pods: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """``namespace/name`` of the pods (as the apiserver lists them) that a disruption has to move, as the core's
    ``Pod.needs_rescheduling`` reads them: not finished, neither mirror/static pods nor a DaemonSet's, and not
    being deleted unless a StatefulSet's (its replacement takes the same name once it is gone). The planner
    compares them with its view before approving a command (``ebb.core.validation.view_behind``)."""
    def leaving(pod: Mapping[str, Any]) -> bool:
        owners = _meta(pod).get("ownerReferences") or []
        return deletion_timestamp(pod) is not None and not any(o.get("kind") == "StatefulSet" for o in owners)

    return frozenset(pod_ref(pod) for pod in pods
                     if not (is_finished(pod) or is_mirror_or_static(pod) or is_daemonset_pod(pod) or leaving(pod)))


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """Kubernetes' toleration matching (an empty key with Exists tolerates every taint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool((toleration.get("value") or "") == (taint.get("value") or ""))


def tolerates_disruption(pod: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    return any(tolerates(t, taint) for t in _spec(pod).get("tolerations") or [])


def _timestamp(value: object) -> datetime | None:
    """An RFC 3339 timestamp of the API (``2026-11-23T18:30:00Z``), or None when absent or not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def deletion_timestamp(pod: Mapping[str, Any]) -> datetime | None:
    """When a terminating pod's grace ends (``metadata.deletionTimestamp``: its deletion plus its grace)."""
    return _timestamp(_meta(pod).get("deletionTimestamp"))


def is_stuck_terminating(pod: Mapping[str, Any], now: datetime) -> bool:
    """Karpenter's ``IsStuckTerminating``: still there more than a minute after its ``deletionTimestamp``."""
    at = deletion_timestamp(pod)
    return at is not None and (now - at).total_seconds() > STUCK_TERMINATING_AFTER


def do_not_disrupt_active(pod: Mapping[str, Any], now: datetime) -> bool:
    """Whether the pod's ``karpenter.sh/do-not-disrupt`` (or the older ``do-not-evict``) protects it at ``now``, by
    the planner's rule (`ebb.core.cluster.do_not_disrupt_protection`; Karpenter's ``IsDoNotDisruptActive``)."""
    annotations = _meta(pod).get("annotations") or {}
    started = _timestamp((pod.get("status") or {}).get("startTime"))
    return do_not_disrupt_protection(annotations, started, now) is not None


def pod_grace_seconds(pod: Mapping[str, Any]) -> int | None:
    """The pod's ``terminationGracePeriodSeconds`` (the API server defaults it to 30), None when absent."""
    value = _spec(pod).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def delete_time(pod: Mapping[str, Any], deadline: datetime) -> datetime | None:
    """When a pod is deleted so that its whole grace ends by the node's terminationGracePeriod ``deadline``
    (Karpenter's ``podDeleteTimeWithGracePeriod``), or None when it is never deleted: it has no grace, or it
    is terminating already and its grace ends by the deadline (Karpenter's ``IsPodEligibleForForcedEviction``)."""
    grace = pod_grace_seconds(pod)
    if grace is None:
        return None
    if _meta(pod).get("deletionTimestamp") is not None:
        ends = deletion_timestamp(pod)
        if ends is None or ends <= deadline:
            return None
    return deadline - timedelta(seconds=grace)


def granted_grace(deadline: datetime, now: datetime) -> int:
    """The grace a pod deleted at ``now`` gets: what is left until the deadline, whole seconds, at least 1
    (0 would force-delete it from etcd, breaking at-most-one-pod)."""
    return max(int((deadline - now).total_seconds()), 1)


def skip_reason(pod: Mapping[str, Any], taint: Mapping[str, str], now: datetime | None = None) -> str | None:
    """Why a pod is left alone by a drain under the disruption ``taint``, or None when it must be evicted
    (a pod that tolerates the taint would be scheduled right back; one stuck terminating at ``now`` is not
    waited for)."""
    if is_mirror_or_static(pod):
        return "mirror/static pod"
    if is_finished(pod):
        return "finished"
    if tolerates_disruption(pod, taint):
        return f"tolerates {taint['key']}"
    if now is not None and is_stuck_terminating(pod, now):
        return "stuck terminating"
    return None


def eviction_groups(pods: Sequence[Mapping[str, Any]], taint: Mapping[str, str],
                    now: datetime | None = None) -> list[list[Mapping[str, Any]]]:
    """The pods to evict, in the order they go (empty groups dropped): non-critical, non-critical DaemonSet
    pods, critical, critical DaemonSet pods (Karpenter's order)."""
    groups: list[list[Mapping[str, Any]]] = [[], [], [], []]
    for pod in pods:
        if skip_reason(pod, taint, now) is None:
            groups[2 * is_critical(pod) + is_daemonset_pod(pod)].append(pod)
    return [g for g in groups if g]


# -- taints (JSON patches, pure) ----------------------------------------------------------------------------


def _same_taint(taint: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    return taint.get("key") == wanted["key"] and taint.get("effect") == wanted["effect"]


def guard(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``test`` of the resourceVersion read: the patch fails (Conflict) if the node changed meanwhile."""
    version = _meta(node).get("resourceVersion")
    return [] if version is None else [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]


def taint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that adds ``taint``, or None when the node has it already."""
    taints = list(_spec(node).get("taints") or [])
    if any(_same_taint(t, taint) for t in taints):
        return None
    return [*guard(node), {"op": "add", "path": "/spec/taints", "value": [*taints, dict(taint)]}]


def untaint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes ``taint`` (every copy of it), or None when there is none."""
    taints = list(_spec(node).get("taints") or [])
    kept = [t for t in taints if not _same_taint(t, taint)]
    if len(kept) == len(taints):
        return None
    return [*guard(node), {"op": "add", "path": "/spec/taints", "value": kept}]


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    value = _meta(node).get("annotations")
    return dict(value) if isinstance(value, Mapping) else {}


def termination_deadline(node: Mapping[str, Any]) -> datetime | None:
    """The node's terminationGracePeriod deadline (``TERMINATION_TIMESTAMP_ANNOTATION``), None when unset."""
    return _timestamp(_annotations(node).get(TERMINATION_TIMESTAMP_ANNOTATION))


def deadline_patch(node: Mapping[str, Any], deadline: datetime) -> list[dict[str, Any]] | None:
    """The JSON patch that records ``deadline`` on the node, or None when it has one already (kept: the
    deadline is set once, at the start of the node's termination)."""
    if termination_deadline(node) is not None:
        return None
    annotations = {**_annotations(node), TERMINATION_TIMESTAMP_ANNOTATION: rfc3339(deadline)}
    return [*guard(node), {"op": "add", "path": "/metadata/annotations", "value": annotations}]


def undeadline_patch(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes the deadline (rollback), or None when there is none."""
    annotations = _annotations(node)
    if TERMINATION_TIMESTAMP_ANNOTATION not in annotations:
        return None
    del annotations[TERMINATION_TIMESTAMP_ANNOTATION]
    return [*guard(node), {"op": "add", "path": "/metadata/annotations", "value": annotations}]


async def patch_until_done(api: NodeApi, name: str,
                           make: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]) -> bool | None:
    """Read the node and apply ``make``'s patch until it applies cleanly (a lost race is read again); True
    when patched, False when there was nothing to do, None when the node does not exist."""
    for _ in range(10):
        node = await api.read_node(name)
        if node is None:
            return None
        patch = make(node)
        if patch is None:
            return False
        try:
            await api.patch_node(name, patch)
        except Conflict:
            continue
        except KubeError as e:
            if e.status == 404:
                return None
            raise
        return True
    raise KubeError(409, f"node {name} kept changing while being patched")


# -- the drainer ----------------------------------------------------------------------------------------------


@dataclass
class DrainReport:
    """What a drain did on one node."""

    node: str
    evicted: list[str] = field(default_factory=list)
    #: pods deleted at the terminationGracePeriod deadline minus their grace (PDB bypassed)
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: 429s (and other refusals) answered while evicting
    blocked: int = 0


class Drainer:
    """Taint, drain and untaint nodes through a ``NodeApi``, under one disruption taint."""

    def __init__(
        self,
        api: NodeApi,
        *,
        disruption_taint: Mapping[str, str],
        eviction_deadline: float = 600.0,
        backoff: EvictionBackoff | None = None,
        poll_interval: float = 0.5,
        terminating_is_gone: bool = False,
        clock: Clock | None = None,
        stop: Waitable | None = None,
        on_eviction: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        #: the taint (``key``, ``effect``) put on a node being disrupted: the provider's
        self.disruption_taint: Mapping[str, str] = dict(disruption_taint)
        #: called with the HTTP status code of every eviction request ("200", "429", "404", ...; "error"
        #: when the API gave none): the executor's ebb_pods_eviction_requests_total{code}
        self.on_eviction = on_eviction
        self.eviction_deadline = eviction_deadline
        self.backoff = backoff or EvictionBackoff()
        self.poll_interval = poll_interval
        self.terminating_is_gone = terminating_is_gone
        #: measures the deadline and the waits
        self.clock = clock or Clock()
        self.stop = stop
        #: a wait on the clock that raises ``Stopped`` once ``stop`` is set (also the executor's readiness poll)
        self.sleep = self.clock.sleeper(stop)

    @property
    def taint_words(self) -> str:
        """The taint as ``key:effect`` (the Tainted and RolledBack events say it)."""
        return f"{self.disruption_taint['key']}:{self.disruption_taint['effect']}"

    async def taint(self, node: str) -> bool | None:
        """Add the disruption taint; True when added, False when present, None when the node is gone."""
        return await patch_until_done(self.api, node, lambda obj: taint_patch(obj, self.disruption_taint))

    async def untaint(self, node: str) -> bool | None:
        """Remove the disruption taint (rollback), and the terminationGracePeriod deadline so that a later
        termination starts its own; True when the taint was removed, False when absent, None when gone."""
        removed = await patch_until_done(self.api, node, lambda obj: untaint_patch(obj, self.disruption_taint))
        if removed is not None:
            await patch_until_done(self.api, node, undeadline_patch)
        return removed

    async def termination_deadline(self, node: str, grace_period: float) -> datetime:
        """The node's terminationGracePeriod deadline: the one recorded on it, or now + ``grace_period``,
        recorded (the start of its termination is its first drain; a resumed drain keeps it)."""
        wanted = self.clock.now() + timedelta(seconds=grace_period)
        await patch_until_done(self.api, node, lambda obj: deadline_patch(obj, wanted))
        found = await self.api.read_node(node)
        return (termination_deadline(found) if found is not None else None) or wanted

    async def drain(self, node: str, *, on_evicted: Callable[[Mapping[str, Any]], None] | None = None,
                    deadline: datetime | None = None,
                    on_deleted: Callable[[Mapping[str, Any], int], None] | None = None) -> DrainReport:
        """Evict the node's pods group by group; DrainFailed when a pod does not go in time. ``on_evicted`` is
        called with each pod the Eviction API evicted (200; not the pods already gone or terminating): the
        executor's ``Evicted`` event and ``ebb_pods_drained_total``. With a terminationGracePeriod
        ``deadline``, a pod whose grace would not end by then is deleted at ``deadline - its grace`` whatever
        its group, and ``on_deleted`` is called with it and the grace it was granted (Karpenter's
        ``Disrupted`` event)."""
        report = DrainReport(node)
        pods = await self.api.list_pods(node)
        now = self.clock.now()
        for pod in pods:
            reason = skip_reason(pod, self.disruption_taint, now)
            if reason is not None:
                report.skipped[pod_ref(pod)] = reason
        groups = eviction_groups(pods, self.disruption_taint, now)
        expiring: dict[str, datetime] = {}
        if deadline is not None:
            for grouped in (p for group in groups for p in group):
                at = delete_time(grouped, deadline)
                if at is not None:
                    expiring[pod_ref(grouped)] = at
        main = asyncio.ensure_future(self._drain_groups(node, groups, report, on_evicted=on_evicted,
                                                       deadline=deadline, expiring=expiring))
        deletions = [] if deadline is None else [
            asyncio.ensure_future(self._delete_at(node, pod, report, at=expiring[pod_ref(pod)], deadline=deadline,
                                                  on_deleted=on_deleted))
            for group in groups for pod in group if pod_ref(pod) in expiring]
        try:
            pending: set[asyncio.Future[None]] = {main, *deletions}
            while not main.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    error = task.exception()
                    if error is not None:
                        raise error
            main.result()
        finally:
            for task in (main, *deletions):
                task.cancel()
            await asyncio.gather(main, *deletions, return_exceptions=True)
        return report

    async def _drain_groups(self, node: str, groups: list[list[Mapping[str, Any]]], report: DrainReport, *,
                            on_evicted: Callable[[Mapping[str, Any]], None] | None, deadline: datetime | None,
                            expiring: Mapping[str, datetime]) -> None:
        for group in groups:
            await asyncio.gather(*(self._evict_until_gone(node, pod, report, on_evicted=on_evicted, deadline=deadline,
                                                          delete_at=expiring.get(pod_ref(pod))) for pod in group))

    def _monotonic_at(self, at: datetime) -> float:
        """The drainer's monotonic time of the wall-clock time ``at``."""
        return self.clock.monotonic() + (at - self.clock.now()).total_seconds()

    async def _delete_at(self, node: str, pod: Mapping[str, Any], report: DrainReport, *, at: datetime,
                         deadline: datetime, on_deleted: Callable[[Mapping[str, Any], int], None] | None) -> None:
        """Delete ``pod`` at ``at`` (deadline - its grace) unless it is gone or terminating within the deadline
        by then (Karpenter's ``DeleteExpiringPods``: its PDB and do-not-disrupt bypassed)."""
        # in poll-interval steps, on the drainer's clock (Karpenter re-checks each reconcile, about every second)
        while (wait := (at - self.clock.now()).total_seconds()) > 0:
            await self.sleep(min(wait, self.poll_interval))
        meta = _meta(pod)
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        current = await self.api.read_pod(namespace, name)
        if current is None or _meta(current).get("uid") != meta.get("uid"):
            return
        if delete_time(current, deadline) is None:
            return  # terminating already, its grace ending by the deadline
        grace = granted_grace(deadline, self.clock.now())
        log.info("deleting %s on %s at its terminationGracePeriod deadline %s with %ds grace",
                 pod_ref(pod), node, deadline.isoformat(), grace)
        if await self.api.delete_pod(namespace, name, grace):
            report.deleted.append(pod_ref(pod))
            if on_deleted is not None:
                on_deleted(pod, grace)

    async def _gone(self, node: str, pod: Mapping[str, Any]) -> bool:
        meta = _meta(pod)
        current = await self.api.read_pod(str(meta.get("namespace", "")), str(meta.get("name", "")))
        if current is None:
            return True
        current_meta = _meta(current)
        if current_meta.get("uid") != meta.get("uid") or _spec(current).get("nodeName") not in (None, node):
            return True  # a new pod of the same name
        if is_stuck_terminating(current, self.clock.now()):
            return True  # Karpenter does not wait for it
        return self.terminating_is_gone and current_meta.get("deletionTimestamp") is not None

    async def _evict_until_gone(self, node: str, pod: Mapping[str, Any], report: DrainReport, *,
                                on_evicted: Callable[[Mapping[str, Any]], None] | None = None,
                                deadline: datetime | None = None, delete_at: datetime | None = None) -> None:
        """Evict ``pod`` until the Eviction API takes it, then wait until it is gone. Without a
        terminationGracePeriod ``deadline`` both end at ``eviction_deadline`` (DrainFailed); with one, the
        evictions of a pod deleted at ``delete_at`` end then (the deletion takes over) and the wait ends a
        minute after the deadline, when the pod counts as stuck terminating."""
        meta = _meta(pod)
        namespace, name, ref = str(meta.get("namespace", "")), str(meta.get("name", "")), pod_ref(pod)
        deadline_mono = self.clock.monotonic() + self.eviction_deadline
        evict_until = deadline_mono if delete_at is None else self._monotonic_at(delete_at)
        wait_until = deadline_mono if deadline is None else max(
            deadline_mono, self._monotonic_at(deadline) + STUCK_TERMINATING_AFTER + 1 + 2 * self.poll_interval)
        if delete_at is not None and self.clock.now() >= delete_at:
            pass  # deleted by ``_delete_at`` (Karpenter deletes the expiring pods before it evicts the rest)
        elif delete_at is not None and do_not_disrupt_active(pod, self.clock.now()):
            # not evicted (Karpenter's ``IsEvictable``): the drain waits for it to end or go, and ``_delete_at``
            # deletes it at the deadline; drift and expiration take such a node only with a terminationGracePeriod
            log.info("not evicting %s on %s: its do-not-disrupt holds; waiting for it until %s", ref, node,
                     delete_at.isoformat())
        elif meta.get("deletionTimestamp") is None:

            def refused(attempt: RetryCallState) -> None:
                error = attempt.outcome.exception() if attempt.outcome else None
                log.info("eviction of %s %s (attempt %d), retrying in %.2fs", ref, error, attempt.attempt_number,
                         attempt.upcoming_sleep)

            tried = 0

            async def evict(number: int) -> None:
                nonlocal tried
                tried = number
                result, message = await self.api.evict(namespace, name)
                if self.on_eviction is not None:
                    self.on_eviction(eviction_code(result, message))
                if result not in ("evicted", "gone"):
                    report.blocked += 1
                    raise _Refused(result, message)
                if result == "evicted" and on_evicted is not None:
                    on_evicted(pod)

            try:
                await attempt_then_retry(
                    lambda: self.backoff.retrying(self.clock, self.stop, deadline=evict_until,
                                                  retry=retry_if_exception_type(_Refused), before_sleep=refused),
                    evict, retried=lambda e: isinstance(e, _Refused))
            except _Refused as last:
                if delete_at is None:
                    raise DrainFailed(
                        f"pod {ref} on node {node} could not be evicted within {self.eviction_deadline:g}s "
                        f"({tried} attempts; last: {last})"
                    ) from None
                # deleted at delete_at by ``_delete_at``: wait for it below
            else:
                report.evicted.append(ref)
        else:
            report.evicted.append(ref)
        while not await self._gone(node, pod):
            if self.clock.monotonic() + self.poll_interval > wait_until:
                raise DrainFailed(
                    f"pod {ref} on node {node} was evicted but still there after "
                    f"{wait_until - deadline_mono + self.eviction_deadline:g}s"
                )
            await self.sleep(self.poll_interval)


# -- kubernetes-asyncio ------------------------------------------------------------------------------------------


class KubeNodeApi:
    """``NodeApi`` on a kubernetes-asyncio ``ApiClient`` (raw JSON, so objects stay kubectl-shaped)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self._client = client
        self.core: Any = client.CoreV1Api(api_client)

    @staticmethod
    async def _body(response: Any) -> tuple[int, Any]:
        try:
            raw = await response.read()
        finally:
            with contextlib.suppress(Exception):
                response.release()
        try:
            return int(response.status), json.loads(raw) if raw else None
        except ValueError:
            return int(response.status), raw.decode("utf-8", "replace")

    @staticmethod
    def _message(body: Any) -> str:
        if isinstance(body, dict):
            return str(body.get("message") or body.get("reason") or body)
        return str(body)

    async def read_node(self, name: str) -> dict[str, Any] | None:
        status, body = await self._body(await self.core.read_node(name, _preload_content=False))
        if status == 404:
            return None
        if status >= 300:
            raise KubeError(status, self._message(body))
        return dict(body)

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        response = await self.core.patch_node(
            name, patch, _content_type="application/json-patch+json", _preload_content=False
        )
        status, body = await self._body(response)
        if status in (409, 422):
            raise Conflict(status, self._message(body))
        if status >= 300:
            raise KubeError(status, self._message(body))

    async def delete_node(self, name: str) -> bool:
        status, body = await self._body(await self.core.delete_node(name, _preload_content=False))
        if status == 404:
            return False
        if status >= 300:
            raise KubeError(status, self._message(body))
        return True

    async def list_nodes(self) -> list[dict[str, Any]]:
        """Every Node (not part of ``NodeApi``: the executor's finalizer loop looks for deleting ones)."""
        async def page(token: str | None) -> Mapping[str, Any]:
            return await self._page(self.core.list_node(_preload_content=False, **page_options(token)))

        return await list_items(page)

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        async def page(token: str | None) -> Mapping[str, Any]:
            return await self._page(self.core.list_pod_for_all_namespaces(
                _preload_content=False, **page_options(token, field_selector=f"spec.nodeName={node}")))

        return await list_items(page)

    async def _page(self, request: Awaitable[Any]) -> Mapping[str, Any]:
        """One page of a list: its decoded body (KubeError when the apiserver refuses it)."""
        status, body = await self._body(await request)
        if status >= 300:
            raise KubeError(status, self._message(body))
        if not isinstance(body, Mapping):
            raise KubeError(status, f"the apiserver's answer is not a list: {str(body)[:200]!r}")
        return body

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        response = await self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        status, body = await self._body(response)
        if status == 404:
            return None
        if status >= 300:
            raise KubeError(status, self._message(body))
        return dict(body)

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        response = await self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_seconds,
                                                         _preload_content=False)
        status, body = await self._body(response)
        if status == 404:
            return False
        if status >= 300:
            raise KubeError(status, self._message(body))
        return True

    async def evict(self, namespace: str, name: str) -> tuple[EvictionResult, str]:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        response = await self.core.create_namespaced_pod_eviction(name, namespace, eviction, _preload_content=False)
        status, body = await self._body(response)
        message = self._message(body)
        if 200 <= status < 300:
            return "evicted", message
        if status == 429:
            return "blocked", message
        if status == 404:
            return "gone", message
        return "refused", f"HTTP {status}: {message}"
