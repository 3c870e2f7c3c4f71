"""The termination executor's test doubles: a fake API server (``FakeApi``: nodes, pods, evictions with scripted
answers, every call recorded), a drainer on it with short waits, the pods it serves, the commands the executor is
given and the events it publishes. Shared by the executor's service tests and the fuzzing of its handler."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import Clock, ManualClock
from ebb.adapters.kube.drain import Drainer, EvictionBackoff, rfc3339
from ebb.adapters.kube.node_api import Conflict, EvictionResult, KubeError
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT
from ebb.adapters.store.decision_store import EXECUTOR, DecisionStore
from ebb.adapters.store.outbox import OutboxRelay
from ebb.contracts import TOPIC_DISRUPTION_EVENTS, DisruptionCommand, from_kafka

#: the executor's clock in these tests
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


# -- a fake API server -------------------------------------------------------------------------------------


def pod(
    name: str,
    node: str = "n1",
    *,
    namespace: str = "default",
    priority: int | None = None,
    priority_class: str | None = None,
    owner: str | None = "ReplicaSet",
    annotations: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "tolerations": tolerations or []}
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uuid.uuid4().hex,
            "annotations": annotations or {},
            "ownerReferences": [{"kind": owner, "name": "x"}] if owner else [],
        },
        "spec": spec,
        "status": {"phase": phase},
    }


class FakeApi:
    """Nodes and pods in memory. ``refusals[pod]`` answers that many 429s before the eviction is
    accepted (-1: always), as a PDB does once the drain's first evictions used its allowance; a dry-run Eviction
    (the executor's check before it taints) is refused for the pods in ``blocked_now``; ``linger[pod]`` keeps an
    evicted pod that many reads before it goes. An evicted or
    deleted pod's ``deletionTimestamp`` is ``clock``'s now plus its grace, as the apiserver sets it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or ManualClock()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.refusals: dict[str, int] = {}
        #: pods whose PodDisruptionBudget allows no eviction before the drain starts (a dry-run Eviction's answer)
        self.blocked_now: set[str] = set()
        self.linger: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        #: pods deleted (not evicted) and the grace they were given
        self.deleted: list[tuple[str, int]] = []
        self.conflicts = 0
        self.version = 0

    def add_node(self, name: str, taints: list[dict[str, Any]] | None = None) -> None:
        self.version += 1
        self.nodes[name] = {"metadata": {"name": name, "resourceVersion": str(self.version),
                                         "finalizers": ["karpenter.sh/termination"]},
                            "spec": {"taints": taints or []}}

    def add_pods(self, *pods: dict[str, Any]) -> None:
        for p in pods:
            self.pods[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = p

    def _terminate(self, ref: str, grace_seconds: int | None = None) -> None:
        """Start the pod's deletion: its grace (``grace_seconds``, else its own, else the default 30 s) ends at
        its deletionTimestamp."""
        p = self.pods[ref]
        grace = grace_seconds if grace_seconds is not None else p["spec"].get("terminationGracePeriodSeconds", 30)
        p["metadata"]["deletionTimestamp"] = rfc3339(self.clock.now() + timedelta(seconds=grace))

    async def read_node(self, name: str) -> dict[str, Any] | None:
        node = self.nodes.get(name)
        return copy.deepcopy(node) if node is not None else None

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        self.calls.append(("patch", name))
        node = self.nodes.get(name)
        if node is None:
            raise KubeError(404, "not found")
        if self.conflicts:
            self.conflicts -= 1
            self.version += 1
            node["metadata"]["resourceVersion"] = str(self.version)
            raise Conflict(409, "the object has been modified")
        for op in patch:
            section, field = op["path"].strip("/").split("/")
            if op["op"] == "test":
                if node[section].get(field) != op["value"]:
                    raise Conflict(422, "test failed")
            else:
                assert op["op"] == "add", op
                node[section][field] = copy.deepcopy(op["value"])
        self.version += 1
        node["metadata"]["resourceVersion"] = str(self.version)

    async def delete_node(self, name: str) -> bool:
        self.calls.append(("delete", name))
        node = self.nodes.get(name)
        if node is None:
            return False
        node["metadata"]["deletionTimestamp"] = "now"
        return True

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.pods.values() if p["spec"]["nodeName"] == node]

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        ref = f"{namespace}/{name}"
        p = self.pods.get(ref)
        if p is None:
            return None
        if p["metadata"].get("deletionTimestamp"):
            left = self.linger.get(ref, 0)
            if left <= 0:
                del self.pods[ref]
                return None
            self.linger[ref] = left - 1
        return copy.deepcopy(p)

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        ref = f"{namespace}/{name}"
        self.calls.append(("dry-run" if dry_run else "evict", ref))
        if ref not in self.pods:
            return "gone", "not found"
        if uid and (self.pods[ref].get("metadata") or {}).get("uid", uid) != uid:
            return "gone", "Precondition failed: UID in precondition"  # another pod of the name: 409
        if dry_run:  # the answer of now, before the drain: ``blocked_now``; ``refusals`` come while it evicts
            return ("blocked", "Cannot evict pod as it would violate the pod's disruption budget.") \
                if ref in self.blocked_now else ("evicted", "")
        left = self.refusals.get(ref, 0)
        if left != 0:
            self.refusals[ref] = left - 1
            return "blocked", "Cannot evict pod as it would violate the pod's disruption budget."
        self._terminate(ref)
        return "evicted", ""

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        ref = f"{namespace}/{name}"
        self.calls.append(("delete_pod", ref))
        if ref not in self.pods:
            return False
        self.deleted.append((ref, grace_seconds))
        self._terminate(ref, grace_seconds)
        return True

    def evictions(self) -> list[str]:
        return [target for kind, target in self.calls if kind == "evict"]


def drainer(api: FakeApi, clock: ManualClock, *, deadline: float = 60.0) -> Drainer:
    return Drainer(api, disruption_taint=DISRUPTED_TAINT, eviction_deadline=deadline,
                   backoff=EvictionBackoff(initial=0.5, maximum=4.0), poll_interval=0.25, clock=clock)


def command(nodes: tuple[str, ...], *, decision_id: str = "d-1", replacements: bool = False,
            approved_at: datetime = NOW) -> DisruptionCommand:
    """A command approved at ``approved_at`` (an executor on the wall clock, as ``app.run`` makes it, refuses one
    approved longer ago than its ``max_command_age_seconds``: give it ``datetime.now(UTC)``)."""
    return DisruptionCommand.model_validate({
        "decision_id": decision_id,
        "node_pool": "default",
        "method": "emptiness",
        "reason": "Empty",
        "action": "replace" if replacements else "delete",
        "nodes": nodes,
        "replacements": [{"node_pool": "default", "instance_types": ["m5.large"], "capacity_type": "on-demand",
                          "zones": ["eu-west-1a"], "price": 0.1}] if replacements else [],
        "savings_per_hour": 0.2,
        "explanation": "empty for 10m",
        "approved_at": approved_at,
    })


async def sent(store: DecisionStore, bus: InMemoryBus) -> list[tuple[str, str, str]]:
    """What the executor sent, as (node, phase, message): its outbox relayed to ``bus`` (the service's relay does
    that in a task of its own), then every event on the bus."""
    await OutboxRelay(store, bus, EXECUTOR, clock=ManualClock(NOW), poll=None).relay_once()
    return events_of(bus)


def events_of(bus: InMemoryBus) -> list[tuple[str, str, str]]:
    out = []
    for r in bus.records(TOPIC_DISRUPTION_EVENTS):
        m = from_kafka(TOPIC_DISRUPTION_EVENTS, r.key, r.value, r.headers)
        out.append((m.node, m.phase, m.message))  # type: ignore[attr-defined]
    return out
