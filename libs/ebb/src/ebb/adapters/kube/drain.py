"""Draining a node through the Eviction API, as the termination-executor does it (termination in
docs/architecture.md#decision-semantics): the async adapter that carries out ``ebb.core.drain``'s rules through a
``NodeApi`` (``ebb.adapters.kube.node_api``).

``Drainer.taint`` adds the drainer's disruption taint (the provider's, ``ebb.adapters.provider``:
``karpenter.sh/disrupted:NoSchedule`` where ebb deletes Nodes itself, ``ebb.sh/disrupted:NoSchedule`` next to a
real Karpenter) with an idempotent JSON patch (nothing when the taint is there; a ``test`` of the
resourceVersion read guards against a concurrent writer, and a lost race is read again and retried).
``Drainer.drain`` lists the node's pods, parses them into the core's model (``ebb.core.drain.api_pod``) and asks
the core which to leave alone and in which groups to evict the others (``skip_reason``, ``eviction_groups``:
non-critical, non-critical DaemonSet, critical, critical DaemonSet pods); it evicts them with ``policy/v1``
Evictions, group by group, each group gone (``is_gone``) before the next one starts.

HTTP 429 (a PodDisruptionBudget forbids the eviction now) and other refusals are retried with capped exponential
backoff (``EvictionBackoff``, an ``ebb.adapters.backoff.Backoff``; every wait on the drainer's clock, cut short by
its ``stop`` with ``Stopped``); 404 means the pod is already gone. With ``terminating_is_gone`` a pod whose
deletion has started counts as gone too. A pod that is not gone ``eviction_deadline`` seconds after its first
eviction attempt (by the drainer's clock) fails the drain (``DrainFailed``).

With a terminationGracePeriod deadline (``drain(deadline=...)``: the start of the node's termination plus its
NodeClaim's/NodePool's ``terminationGracePeriod``, as Karpenter's ``karpenter.sh/nodeclaim-termination-timestamp``,
recorded on the Node by ``termination_deadline``), each pod whose own ``terminationGracePeriodSeconds`` would not
end before the deadline is *deleted* (not evicted: its PDB is bypassed, only then) at the core's ``delete_time``,
granted the core's ``granted_grace`` (Karpenter's ``DeleteExpiringPods``); a pod already terminating with a
``deletionTimestamp`` after the deadline is deleted again with the shorter grace. Its evictions are retried until
then instead of ``eviction_deadline``, so without a deadline a drain still fails where a PDB never allows the
eviction, and with one the drain ends by the deadline (plus the stuck minute). A pod whose do-not-disrupt holds
is not evicted then, only waited for until its deletion.
``Drainer.refusal`` asks the Eviction API, with dry-run Evictions, whether it would take the pods now.
The taint comes with the label ``node.kubernetes.io/exclude-from-external-load-balancers`` (as Karpenter's
terminator puts it), which a rollback removes where ebb put it. ``Drainer.untaint`` removes the taint again
(rollback). Removing the node afterwards is the provider's
(``retire``). The drainer itself names no taint and touches no finalizer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from tenacity import RetryCallState, retry_if_exception_type

from ebb.adapters.backoff import Backoff, attempt_then_retry
from ebb.adapters.clock import Clock, Waitable
from ebb.adapters.kube.node_api import EvictionResult, NodeApi, eviction_code, guard, patch_until_done
from ebb.core.drain import (
    STUCK_TERMINATING_AFTER,
    api_pod,
    delete_time,
    do_not_disrupt_active,
    eviction_groups,
    granted_grace,
    is_gone,
    skip_reason,
)
from ebb.core.memo import Memo
from ebb.core.model import Pod, Taint
from ebb.core.snapshot import SnapshotError

log = logging.getLogger("ebb.kube.drain")

#: the terminationGracePeriod deadline of a node being drained, RFC 3339, set once at the first drain (ebb's
#: copy of Karpenter's ``karpenter.sh/nodeclaim-termination-timestamp``, on the Node: kwok and simulated nodes
#: have no NodeClaim), so a command resumed after a restart keeps the deadline; removed by a rollback
TERMINATION_TIMESTAMP_ANNOTATION: Final = "ebb.sh/termination-timestamp"
#: Kubernetes' well-known label that takes a node out of external load balancers' targets
#: (``LabelNodeExcludeBalancers``), put with the disruption taint (Karpenter's terminator puts it, valued
#: ``karpenter``, on a node it drains)
EXCLUDE_FROM_LOAD_BALANCERS: Final = "node.kubernetes.io/exclude-from-external-load-balancers"
#: its value where ebb put it: a rollback removes only that one
EXCLUDED_BY: Final = "ebb"


class DrainFailed(RuntimeError):
    """The node could not be drained: a pod that would not go within the deadline, or one the apiserver gave that
    is not a pod's (``ebb.core.drain.api_pod`` cannot read it)."""


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


# -- the node's taint and deadline (JSON patches, pure) ---------------------------------------------------------


def _section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def _same_taint(taint: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    return taint.get("key") == wanted["key"] and taint.get("effect") == wanted["effect"]


def _labels(node: Mapping[str, Any]) -> dict[str, Any]:
    return dict(_section(_section(node, "metadata"), "labels"))


def taint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that adds ``taint``, or None when the node has it already. With it the node is labelled
    `EXCLUDE_FROM_LOAD_BALANCERS` (``ebb``) unless it has that label, so that load balancers stop sending it traffic
    before it goes, as Karpenter's terminator labels a node it drains."""
    taints = list(_section(node, "spec").get("taints") or [])
    if any(_same_taint(t, taint) for t in taints):
        return None
    patch = [*guard(node), {"op": "add", "path": "/spec/taints", "value": [*taints, dict(taint)]}]
    labels = _labels(node)
    if EXCLUDE_FROM_LOAD_BALANCERS not in labels:
        patch.append({"op": "add", "path": "/metadata/labels",
                      "value": {**labels, EXCLUDE_FROM_LOAD_BALANCERS: EXCLUDED_BY}})
    return patch


def untaint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes ``taint`` (every copy of it), and `EXCLUDE_FROM_LOAD_BALANCERS` where ebb put it,
    or None when there is no such taint."""
    taints = list(_section(node, "spec").get("taints") or [])
    kept = [t for t in taints if not _same_taint(t, taint)]
    if len(kept) == len(taints):
        return None
    patch = [*guard(node), {"op": "add", "path": "/spec/taints", "value": kept}]
    labels = _labels(node)
    if labels.get(EXCLUDE_FROM_LOAD_BALANCERS) == EXCLUDED_BY:
        del labels[EXCLUDE_FROM_LOAD_BALANCERS]
        patch.append({"op": "add", "path": "/metadata/labels", "value": labels})
    return patch


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    return dict(_section(_section(node, "metadata"), "annotations"))


def termination_deadline(node: Mapping[str, Any]) -> datetime | None:
    """The node's terminationGracePeriod deadline (``TERMINATION_TIMESTAMP_ANNOTATION``), None when unset or not an
    RFC 3339 time."""
    value = _annotations(node).get(TERMINATION_TIMESTAMP_ANNOTATION)
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


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


# -- the drainer ----------------------------------------------------------------------------------------------


@dataclass
class DrainReport:
    """What a drain did on one node (pods by ``namespace/name``)."""

    node: str
    evicted: list[str] = field(default_factory=list)
    #: pods deleted at the terminationGracePeriod deadline minus their grace (PDB bypassed)
    deleted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: 429s (and other refusals) answered while evicting
    blocked: int = 0


#: Karpenter's ``MinDrainTime``: a node is drained no sooner than this after its taint, its pods listed again until
#: then (a pod the scheduler bound before it saw the taint is evicted too)
MIN_DRAIN_SECONDS: Final = 5.0

#: how many versions of pods a Drainer keeps parsed (`Drainer._parsed`) before it forgets them all
READ_KEPT = 4096


@dataclass(frozen=True)
class _Drained:
    """A pod of the drain: as the apiserver listed it (the ``previous`` a read of it again is parsed against) and
    parsed."""

    raw: Mapping[str, Any]
    pod: Pod


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
        min_drain_time: float = MIN_DRAIN_SECONDS,
        terminating_is_gone: bool = False,
        clock: Clock | None = None,
        stop: Waitable | None = None,
        on_eviction: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        #: the taint (``key``, ``effect``) put on a node being disrupted: the provider's
        self.disruption_taint: Mapping[str, str] = dict(disruption_taint)
        #: the same taint in the core's model, which pods that tolerate it are left alone by
        self._taint = Taint(key=self.disruption_taint["key"], value=self.disruption_taint.get("value", ""),
                            effect=self.disruption_taint["effect"])
        #: called with the HTTP status code of every eviction request ("200", "429", "404", ...; "error"
        #: when the API gave none): the executor's ebb_pods_eviction_requests_total{code}
        self.on_eviction = on_eviction
        self.eviction_deadline = eviction_deadline
        self.backoff = backoff or EvictionBackoff()
        self.poll_interval = poll_interval
        #: a drain ends no sooner than this many seconds after the taint (the pods listed again until then)
        self.min_drain_time = min_drain_time
        #: when each node was tainted (the drainer's monotonic clock), until its drain starts or it is untainted
        self._tainted_at: dict[str, float] = {}
        self.terminating_is_gone = terminating_is_gone
        #: measures the deadline and the waits
        self.clock = clock or Clock()
        self.stop = stop
        #: a wait on the clock that raises ``Stopped`` once ``stop`` is set (also the executor's readiness poll)
        self.sleep = self.clock.sleeper(stop)
        #: the pods read, parsed, by their namespace, name, uid and resourceVersion (`_parsed`)
        self._read: Memo[tuple[str, str, str, str], Pod] = Memo(READ_KEPT)

    @property
    def taint_words(self) -> str:
        """The taint as ``key:effect`` (the Tainted and RolledBack events say it)."""
        return f"{self.disruption_taint['key']}:{self.disruption_taint['effect']}"

    async def taint(self, node: str) -> bool | None:
        """Add the disruption taint; True when added, False when present, None when the node is gone. The moment
        is kept for the node's drain (`min_drain_time`)."""
        tainted = await patch_until_done(self.api, node, lambda obj: taint_patch(obj, self.disruption_taint))
        if tainted is not None:
            self._tainted_at.setdefault(node, self.clock.monotonic())
        return tainted

    async def untaint(self, node: str) -> bool | None:
        """Remove the disruption taint (rollback), and the terminationGracePeriod deadline so that a later
        termination starts its own; True when the taint was removed, False when absent, None when gone."""
        self._tainted_at.pop(node, None)
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

    def _parsed(self, node: str, raw: Mapping[str, Any], previous: _Drained | None = None) -> Pod:
        """``raw``, a pod the apiserver gave, in the core's model; DrainFailed when it is not a pod's. A version of a
        pod the apiserver numbered (its ``uid`` and ``resourceVersion``, which every change of it moves) is parsed
        once: a command's check before it taints (`refusal`) and its drain list the node's pods moments apart, and
        the pods that did not change since are the same."""
        meta = raw.get("metadata")
        key = None
        if isinstance(meta, Mapping) and meta.get("resourceVersion"):
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")),
                   str(meta["resourceVersion"]))
        if key is not None:
            known = self._read.get(key)
            if known is not None:
                return known
        try:
            pod = api_pod(raw, None if previous is None else (previous.raw, previous.pod))
        except SnapshotError as e:
            raise DrainFailed(f"a pod on node {node} cannot be read: {e}") from None
        return pod if key is None else self._read.keep(key, pod)

    async def refusal(self, node: str) -> str | None:
        """Why the Eviction API would refuse now a pod the drain of ``node`` evicts (a PodDisruptionBudget that
        allows no disruption, a pod under more than one), asked with dry-run Evictions (nothing is evicted); None
        when it would take each. The executor asks before it taints, as Karpenter validates a command's candidates
        just before it acts (a node whose pods a PDB blocks is no candidate): a drain that starts blocked waits
        out its whole eviction deadline with the node tainted and the budget held. DaemonSet pods, pods already
        terminating and pods whose do-not-disrupt the drain waits out are not asked."""
        now = self.clock.now()
        pods = [self._parsed(node, raw) for raw in await self.api.list_pods(node)]
        for group in eviction_groups(pods, self._taint, now):
            for pod in group:
                if pod.is_daemonset or pod.deleting or do_not_disrupt_active(pod, now):
                    continue
                result, message = await self.api.evict(pod.namespace, pod.name, uid=pod.uid, dry_run=True)
                if result in ("blocked", "refused"):
                    return f"the eviction of {pod.key} would be refused now: {message or result}"
        return None

    async def drain(self, node: str, *, on_evicted: Callable[[Pod], None] | None = None,
                    deadline: datetime | None = None,
                    on_deleted: Callable[[Pod, int], None] | None = None) -> DrainReport:
        """Evict the node's pods group by group; DrainFailed when a pod does not go in time. ``on_evicted`` is
        called with each pod the Eviction API evicted (200; not the pods already gone or terminating): the
        executor's ``Evicted`` event and ``ebb_pods_drained_total``. With a terminationGracePeriod
        ``deadline``, a pod whose grace would not end by then is deleted at ``deadline - its grace`` whatever
        its group, and ``on_deleted`` is called with it and the grace it was granted (Karpenter's
        ``Disrupted`` event).

        Once the pods listed are gone the node's pods are listed again, and the ones not seen before are drained
        the same way, until a list brings none and ``min_drain_time`` has passed since the node was tainted (by
        this drainer; else since the drain started): a pod the scheduler bound before it saw the taint, or one
        created with its ``nodeName``, is evicted too, as Karpenter's terminator lists the pods on every pass and
        waits ``MinDrainTime`` (5 s) before it calls a node drained."""
        report = DrainReport(node)
        since = self._tainted_at.pop(node, None)
        started = self.clock.monotonic() if since is None else since
        seen: set[tuple[str, str]] = set()
        while True:
            listed = [_Drained(raw, self._parsed(node, raw)) for raw in await self.api.list_pods(node)]
            fresh = [drained for drained in listed if (drained.pod.key, drained.pod.uid) not in seen]
            if fresh:
                seen.update((drained.pod.key, drained.pod.uid) for drained in fresh)
                await self._drain_listed(node, fresh, report, on_evicted=on_evicted, deadline=deadline,
                                         on_deleted=on_deleted)
                continue
            left = self.min_drain_time - (self.clock.monotonic() - started)
            if left <= 0:
                return report
            await self.sleep(left)  # then one more look: what was bound meanwhile is drained then

    async def _drain_listed(self, node: str, listed: list[_Drained], report: DrainReport, *,
                            on_evicted: Callable[[Pod], None] | None, deadline: datetime | None,
                            on_deleted: Callable[[Pod, int], None] | None) -> None:
        """Drain the pods of one list of the node's (`drain`), group by group, deleting the expiring ones."""
        by_key = {drained.pod.key: drained for drained in listed}
        pods = [drained.pod for drained in listed]
        now = self.clock.now()
        for pod in pods:
            reason = skip_reason(pod, self._taint, now)
            if reason is not None:
                report.skipped[pod.key] = reason
        groups = [[by_key[pod.key] for pod in group] for group in eviction_groups(pods, self._taint, now)]
        if not groups:
            return
        expiring: dict[str, datetime] = {}
        if deadline is not None:
            for grouped in (drained for group in groups for drained in group):
                at = delete_time(grouped.pod, deadline)
                if at is not None:
                    expiring[grouped.pod.key] = at
        main = asyncio.ensure_future(self._drain_groups(node, groups, report, on_evicted=on_evicted,
                                                       deadline=deadline, expiring=expiring))
        deletions = [] if deadline is None else [
            asyncio.ensure_future(self._delete_at(node, drained, report, at=expiring[drained.pod.key],
                                                  deadline=deadline, on_deleted=on_deleted))
            for group in groups for drained in group if drained.pod.key in expiring]
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

    async def _drain_groups(self, node: str, groups: list[list[_Drained]], report: DrainReport, *,
                            on_evicted: Callable[[Pod], None] | None, deadline: datetime | None,
                            expiring: Mapping[str, datetime]) -> None:
        for group in groups:
            await asyncio.gather(*(self._evict_until_gone(node, drained, report, on_evicted=on_evicted,
                                                          deadline=deadline, delete_at=expiring.get(drained.pod.key))
                                   for drained in group))

    def _monotonic_at(self, at: datetime) -> float:
        """The drainer's monotonic time of the wall-clock time ``at``."""
        return self.clock.monotonic() + (at - self.clock.now()).total_seconds()

    async def _current(self, node: str, drained: _Drained) -> Pod | None:
        """The pod of ``drained``'s name as the apiserver has it now, None when it has none."""
        raw = await self.api.read_pod(drained.pod.namespace, drained.pod.name)
        return None if raw is None else self._parsed(node, raw, drained)

    async def _delete_at(self, node: str, drained: _Drained, report: DrainReport, *, at: datetime,
                         deadline: datetime, on_deleted: Callable[[Pod, int], None] | None) -> None:
        """Delete the pod at ``at`` (deadline - its grace) unless it is gone or terminating within the deadline
        by then (Karpenter's ``DeleteExpiringPods``: its PDB and do-not-disrupt bypassed)."""
        # in poll-interval steps, on the drainer's clock (Karpenter re-checks each reconcile, about every second)
        while (wait := (at - self.clock.now()).total_seconds()) > 0:
            await self.sleep(min(wait, self.poll_interval))
        pod = drained.pod
        current = await self._current(node, drained)
        if current is None or current.uid != pod.uid:
            return
        if delete_time(current, deadline) is None:
            return  # terminating already, its grace ending by the deadline
        grace = granted_grace(deadline, self.clock.now())
        log.info("deleting %s on %s at its terminationGracePeriod deadline %s with %ds grace",
                 pod.key, node, deadline.isoformat(), grace)
        if await self.api.delete_pod(pod.namespace, pod.name, grace):
            report.deleted.append(pod.key)
            if on_deleted is not None:
                on_deleted(pod, grace)

    async def _while_protected(self, node: str, drained: _Drained, until: datetime) -> bool:
        """Wait, polling, while the pod's do-not-disrupt holds and it is there, until ``until`` at most; True when it
        went meanwhile, False when it is there still (its protection ended, or ``until`` came)."""
        while self.clock.now() < until:
            current = await self._current(node, drained)
            now = self.clock.now()
            if is_gone(drained.pod, current, node, now, terminating_is_gone=self.terminating_is_gone):
                return True
            if current is not None and not do_not_disrupt_active(current, now):
                log.info("%s on %s: its do-not-disrupt ended; evicting it", drained.pod.key, node)
                return False
            await self.sleep(min(self.poll_interval, max(0.0, (until - now).total_seconds())))
        return False

    async def _gone(self, node: str, drained: _Drained) -> bool:
        return is_gone(drained.pod, await self._current(node, drained), node, self.clock.now(),
                       terminating_is_gone=self.terminating_is_gone)

    async def _evict_until_gone(self, node: str, drained: _Drained, report: DrainReport, *,
                                on_evicted: Callable[[Pod], None] | None = None,
                                deadline: datetime | None = None, delete_at: datetime | None = None) -> None:
        """Evict the pod until the Eviction API takes it, then wait until it is gone. Without a
        terminationGracePeriod ``deadline`` both end at ``eviction_deadline`` (DrainFailed); with one, the
        evictions of a pod deleted at ``delete_at`` end then (the deletion takes over) and the wait ends a
        minute after the deadline, when the pod counts as stuck terminating."""
        pod = drained.pod
        ref = pod.key
        deadline_mono = self.clock.monotonic() + self.eviction_deadline
        evict_until = deadline_mono if delete_at is None else self._monotonic_at(delete_at)
        wait_until = deadline_mono if deadline is None else max(
            deadline_mono, self._monotonic_at(deadline) + STUCK_TERMINATING_AFTER + 1 + 2 * self.poll_interval)
        protected = delete_at is not None and do_not_disrupt_active(pod, self.clock.now())
        if protected and delete_at is not None and self.clock.now() < delete_at:
            # not evicted while its do-not-disrupt holds (Karpenter's ``IsEvictable``, asked on every pass): the drain
            # waits for it to go, for the protection to end (a duration run out, the annotation removed: then it is
            # evicted), or for ``_delete_at`` to delete it at the deadline; drift and expiration take such a node
            # only with a terminationGracePeriod
            log.info("not evicting %s on %s: its do-not-disrupt holds; waiting for it until %s", ref, node,
                     delete_at.isoformat())
            protected = await self._while_protected(node, drained, delete_at)
        if delete_at is not None and self.clock.now() >= delete_at:
            pass  # deleted by ``_delete_at`` (Karpenter deletes the expiring pods before it evicts the rest)
        elif protected:
            return  # gone while protected
        elif not pod.deleting:

            def refused(attempt: RetryCallState) -> None:
                error = attempt.outcome.exception() if attempt.outcome else None
                log.info("eviction of %s %s (attempt %d), retrying in %.2fs", ref, error, attempt.attempt_number,
                         attempt.upcoming_sleep)

            tried = 0

            async def evict(number: int) -> None:
                nonlocal tried
                tried = number
                result, message = await self.api.evict(pod.namespace, pod.name, uid=pod.uid)
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
        while not await self._gone(node, drained):
            if self.clock.monotonic() + self.poll_interval > wait_until:
                raise DrainFailed(
                    f"pod {ref} on node {node} was evicted but still there after "
                    f"{wait_until - deadline_mono + self.eviction_deadline:g}s"
                )
            await self.sleep(self.poll_interval)
