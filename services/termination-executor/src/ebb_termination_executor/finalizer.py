"""ebb's termination finalizer: a Node that ebb launched and someone deletes is drained before it goes.

Where no Karpenter runs (the ``kwok`` provider), the Nodes ebb launches carry ebb's own finalizer,
``ebb.sh/termination`` (``ebb.adapters.kube.launch``), never Karpenter's. ``kubectl delete node`` on one only
sets its ``deletionTimestamp``; the API server keeps the Node until the finalizer is removed. This loop takes
the same graceful path a disruption decision's drain takes, as Karpenter's termination controller does for its
own finalizer: it taints the node with the provider's disruption taint (``DisruptionTerminating`` event, reason
``Deleted``), drains it through the Eviction API in Karpenter's order, PDBs respected, and with the NodePool's
terminationGracePeriod when it has one (pods deleted at ``deadline - their grace``, PDBs bypassed only then),
and only then removes the finalizer (the Node is gone; for a KWOK node that is the instance too).

A drain that does not finish within the eviction deadline (a PDB that allows nothing) leaves the node tainted
and the finalizer in place (``FailedDraining`` event); the next round tries again, as Karpenter requeues. A
crash at any point loses nothing: the finalizer keeps the Node, and the next round (after a restart too)
resumes; every step is idempotent. Nodes without ebb's finalizer are never touched here, and no decision is
recorded: nobody decided to disrupt the node but the person who deleted it (docs/termination.md).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from ebb.adapters.clock import Stopped
from ebb.adapters.kube.drain import Drainer, DrainFailed
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.launch import EBB_TERMINATION_FINALIZER
from ebb.adapters.kube.node_api import patch_until_done
from ebb.adapters.kube.node_provider import finalizer_patch
from ebb.adapters.provider import Provider
from ebb.core import events as kube_events
from ebb.core.model import LABEL_NODEPOOL, LABEL_ZONE, Pod
from ebb_termination_executor.metrics import Metrics

log = structlog.get_logger("ebb_termination_executor.finalizer")

#: the disruption reason of a node someone deleted (events and ``ebb_pods_drained_total``)
REASON_DELETED = "Deleted"


def deleting_with_finalizer(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Nodes being deleted that still carry ebb's finalizer, by name."""
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if meta.get("deletionTimestamp") and EBB_TERMINATION_FINALIZER in (meta.get("finalizers") or []):
            out.append(node)
    return sorted(out, key=lambda n: str((n.get("metadata") or {}).get("name", "")))


class Finalizer:
    """Drains each deleting Node that carries ebb's finalizer, then removes the finalizer."""

    def __init__(self, drainer: Drainer, provider: Provider, list_nodes: Callable[[], Awaitable[list[dict[str, Any]]]],
                 *, interval: float = 5.0, metrics: Metrics | None = None,
                 recorder: EventRecorder | None = None) -> None:
        self.drainer = drainer
        self.provider = provider
        self.list_nodes = list_nodes
        #: seconds between two looks for deleting nodes
        self.interval = interval
        self.metrics = metrics or Metrics()
        self.recorder = recorder
        #: nodes whose finalizer this loop removed
        self.finalized: list[str] = []

    async def run(self) -> None:
        """Look for deleting nodes every ``interval`` seconds until the drainer's ``stop`` is set. An API error is
        logged and retried next round (the apiserver may be restarting)."""
        while True:
            try:
                await self.round()
                await self.drainer.sleep(self.interval)
            except Stopped:
                return
            except Exception:  # an apiserver outage must not end the loop: it retries next round
                log.exception("finalizer round failed; retrying")
                try:
                    await self.drainer.sleep(self.interval)
                except Stopped:
                    return

    async def round(self) -> list[str]:
        """One look: finalize every deleting node with ebb's finalizer; returns those whose finalizer went."""
        done = []
        for node in deleting_with_finalizer(await self.list_nodes()):
            name = str(node["metadata"]["name"])
            if await self.finalize(name, node):
                done.append(name)
        return done

    async def finalize(self, name: str, node: Mapping[str, Any]) -> bool:
        """Taint, drain, remove the finalizer; False when the drain did not finish (tried again next round)."""
        bound = log.bind(node=name, reason=REASON_DELETED)
        added = await self.drainer.taint(name)
        if added is None:
            return False  # gone meanwhile
        if added:
            self._kube(kube_events.terminating(name, None, REASON_DELETED))
            bound.info("deleted node tainted", taint=self.drainer.taint_words)
        grace_period = await self.provider.termination_grace_period(name)
        deadline = None
        if grace_period is not None:
            deadline = await self.drainer.termination_deadline(name, grace_period)
            self._kube(kube_events.termination_grace_period_expiring(name, None, deadline))
        try:
            report = await self.drainer.drain(
                name, on_evicted=self._evicted, deadline=deadline,
                on_deleted=None if deadline is None else functools.partial(self._deleted, deadline=deadline))
        except DrainFailed as e:
            self._kube(kube_events.failed_draining(name, None, str(e)))
            bound.warning("deleted node not drained yet; retrying next round", error=str(e))
            return False
        self.metrics.nodes_drained.labels(nodepool=self._label(node, LABEL_NODEPOOL)).inc()
        removed = await patch_until_done(self.drainer.api, name, finalizer_patch)
        if removed:
            self.metrics.nodes_terminated.labels(nodepool=self._label(node, LABEL_NODEPOOL),
                                                 zone=self._label(node, LABEL_ZONE)).inc()
            self.finalized.append(name)
        bound.info("deleted node drained; finalizer removed", evicted=len(report.evicted),
                   deleted=sorted(report.deleted), skipped=sorted(report.skipped))
        return True

    @staticmethod
    def _label(node: Mapping[str, Any], key: str) -> str:
        return str(((node.get("metadata") or {}).get("labels") or {}).get(key, ""))

    def _evicted(self, pod: Pod) -> None:
        self.metrics.pods_drained.labels(reason=REASON_DELETED).inc()
        self._kube([kube_events.evicted(kube_events.pod_ref(pod.namespace, pod.name, pod.uid), REASON_DELETED)])

    def _deleted(self, pod: Pod, grace: int, *, deadline: Any) -> None:
        ref = kube_events.pod_ref(pod.namespace, pod.name, pod.uid)
        self._kube([kube_events.disrupted_pod(ref, grace, pod.termination_grace_seconds or 0, deadline)])

    def _kube(self, events: list[kube_events.KubeEvent]) -> None:
        if self.recorder is not None:
            self.recorder.record(events)
