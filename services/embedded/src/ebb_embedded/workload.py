"""A simulated cluster whose workload changes: traces applied, nodes provisioned, what happened measured.

``WorkloadCluster`` is the embedded mode's ``SimulatedCluster`` plus what a back-test needs:

- **the workload's controllers** for a trace's events (``apply``, ``ebb.core.traces``): a ``scale`` creates a
  workload's pods (Pending, named and identified from the run's seed) from the event's template or a copy
  of one of its pods, or deletes them (Pending ones first, then those on the nodes with the most of the
  workload's pods, then the newest, as the ReplicaSet controller does); ``create`` puts objects (replacing
  one of the same kind, namespace and name); ``patch`` merges a JSON merge patch into one object; ``delete``
  removes one object or every pod of a workload (a Node goes as one the cloud lost: its pods with it, made
  again by their controllers, Pending); ``depart`` removes a recorded pod, or the pod its controller made in its
  place after the run's disruptions moved it (a pod made again is the same replica: ``replica_of``);
- **the cloud's interruptions** (``interrupt``): the nodes picked hear of it at once on ``ebb.interruptions``,
  as the interruption-ingester would tell the planner, and ``run_cloud`` takes each away at its deadline if it
  is still there, as a node lost;
- **the provisioner's signals**: ``unschedulable`` is set whenever kube-scheduler leaves a pod Pending, so
  the provisioner (``ebb_embedded.provisioner``) wakes only when there is something to launch for;
- **the measures** (``Measures``): every node's life (from the start or its launch to its deletion) and
  price, the node count's peak, every pod's time Pending, the evictions per pod lineage (a pod recreated by
  its controller after an eviction is the same replica: evicting it again counts as evicting the same pod
  twice), the launches and their boot time.

Everything happens at the injected clock's time, so it is as deterministic as the run.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ebb.adapters.bus import Bus
from ebb.adapters.clock import Clock
from ebb.adapters.kube.launch import is_ready
from ebb.adapters.kube.node_api import EvictionResult
from ebb.contracts import TOPIC_INTERRUPTIONS, Interruption, Replacement
from ebb.core.launch import LaunchSpec
from ebb.core.model import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, Snapshot
from ebb.core.traces import Interrupt, PodTemplate, TraceEvent, Workload, merge_patch, pod_spec
from ebb_embedded.cluster import NAME_ALPHABET, SimulatedCluster, _meta, _pending


@dataclass
class NodeLife:
    start: datetime
    price: float
    end: datetime | None = None
    launched: bool = False


@dataclass
class Measures:
    """What happened to the cluster during a run, for ``ebb backtest``."""

    #: node -> its life and price
    nodes: dict[str, NodeLife] = field(default_factory=dict)
    peak_nodes: int = 0
    #: pod key -> when it became Pending (while it is)
    pending_since: dict[str, datetime] = field(default_factory=dict)
    #: seconds each pod waited Pending before it was bound (or deleted)
    pending_seconds: list[float] = field(default_factory=list)
    #: pod key -> its lineage (the first pod of the replica it is)
    lineage: dict[str, str] = field(default_factory=dict)
    #: lineage -> evictions
    evicted: dict[str, int] = field(default_factory=dict)
    #: launches by who asked: the provisioner or the executor (replacements)
    launches: dict[str, int] = field(default_factory=dict)
    #: nodes the cloud interrupted (a notice sent), and pods still on a node when the cloud took it away
    interruptions: int = 0
    pods_lost: int = 0


class WorkloadCluster(SimulatedCluster):
    """The simulated cluster, with a workload that changes and a provisioner's signal (see the module)."""

    def __init__(self, documents: Iterable[Mapping[str, Any]], bus: Bus, clock: Clock | Callable[[], datetime],
                 **kwargs: Any) -> None:
        self.measures = Measures()
        self._node_count = 0
        self._last_pod: str | None = None
        self._launching_for = "executor"
        #: pod key -> the key of the first pod of its replica, for pods a controller made again; and back
        self._first_of: dict[str, str] = {}
        self._now_of: dict[str, str] = {}
        super().__init__(documents, bus, clock, **kwargs)
        #: set when kube-scheduler left a pod Pending (the provisioner has something to look at)
        self.unschedulable = asyncio.Event()
        #: the interrupted nodes' ends: (deadline, order, node), earliest first (`run_cloud`)
        self._endings: list[tuple[datetime, int, str]] = []
        self._endings_changed = asyncio.Event()

    def start_measuring(self, prices: Mapping[str, float]) -> None:
        """From now on, nodes are measured; the starting ones at ``prices``."""
        now = self.clock()
        for name in sorted(self.node_names()):
            self.measures.nodes[name] = NodeLife(now, prices.get(name, 0.0))
        self._node_count = len(self.measures.nodes)
        self.measures.peak_nodes = self._node_count
        for key, obj in self.objects.items():
            if obj.get("kind") == "Pod" and _pending(obj):
                self.measures.pending_since[key] = now

    def snapshot(self) -> Snapshot:
        """The cluster parsed, as kube-scheduler and the provisioner see it."""
        return self._parse_cache.snapshot_of(self.objects)

    # -- measuring ------------------------------------------------------------------------------------------

    def _store(self, obj: dict[str, Any]) -> str:
        key = super()._store(obj)
        if obj.get("kind") == "Pod" and hasattr(self, "measures"):
            self._last_pod = key
            since = self.measures.pending_since
            if key in self._pending_keys:  # as the simulated cluster just counted it
                since.setdefault(key, self.clock())
            elif key in since:
                self.measures.pending_seconds.append((self.clock() - since.pop(key)).total_seconds())
        return key

    async def _remove(self, key: str) -> None:
        obj = self.objects.get(key)
        await super()._remove(key)
        if obj is None:
            return
        now = self.clock()
        if obj.get("kind") == "Pod" and key in self.measures.pending_since:
            self.measures.pending_seconds.append((now - self.measures.pending_since.pop(key)).total_seconds())
        elif obj.get("kind") == "Node":
            life = self.measures.nodes.get(key.split("/", 2)[2])
            if life is not None and life.end is None:
                life.end = now
                self._node_count -= 1

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str = "") -> LaunchSpec:
        known = name in self.launched
        spec = await super().launch(name, replacement, decision_id=decision_id)
        if not known and name in self.launched:
            self.measures.nodes[name] = NodeLife(self.clock(), spec.price, launched=True)
            self.measures.launches[self._launching_for] = self.measures.launches.get(self._launching_for, 0) + 1
            self._node_count += 1
            self.measures.peak_nodes = max(self.measures.peak_nodes, self._node_count)
        return spec

    async def provision(self, name: str, replacement: Replacement) -> LaunchSpec:
        """Launch a node for the provisioner (counted as its launch)."""
        self._launching_for = "provisioner"
        try:
            return await self.launch(name, replacement)
        finally:
            self._launching_for = "executor"

    async def boot(self, name: str) -> bool:
        """Make a launched node Ready (its boot time over) and let kube-scheduler look at it."""
        ready = await self.ready(name)
        if ready:
            self.pods_waiting.set()
        return ready

    def in_flight(self) -> list[str]:
        """The launched nodes not Ready yet."""
        return sorted(n for n in self.launched if (node := self.objects.get(self.key_of("Node", "", n)))
                      is not None and not is_ready(node))

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        if dry_run:
            return await super().evict(namespace, name, uid=uid, dry_run=True)
        key = self.key_of("Pod", namespace, name)
        self._last_pod = None
        result = await super().evict(namespace, name, uid=uid)
        if result[0] == "evicted":
            lineage = self.measures.lineage.pop(key, key)
            self.measures.evicted[lineage] = self.measures.evicted.get(lineage, 0) + 1
            if self._last_pod is not None and self._last_pod != key:
                self.measures.lineage[self._last_pod] = lineage  # the controller's new pod: the same replica
        return result

    async def _recreate(self, pod: Mapping[str, Any]) -> None:
        key = self._key(pod)
        self._last_pod = None
        await super()._recreate(pod)
        if self._last_pod is not None and self._last_pod != key:  # the controller's new pod: the same replica
            first = self._first_of.pop(key, key)
            self._first_of[self._last_pod] = first
            self._now_of[first] = self._last_pod

    def replica_of(self, namespace: str, name: str) -> str:
        """The key of the pod that is now the replica first made as ``namespace/name``."""
        first = self.key_of("Pod", namespace, name)
        return self._now_of.get(first, first)

    async def schedule_pending(self) -> int:
        bound = await super().schedule_pending()
        if self.pending_count():
            self.unschedulable.set()
        return bound

    # -- the workload's controllers -------------------------------------------------------------------------

    def _owned(self, workload: Workload) -> list[str]:
        """The keys of the workload's pods (in no particular order: every caller sorts them), looked for among the
        pods of its namespace only (a pod without a namespace is in ``default``)."""
        keys = []
        spaces = (workload.namespace, "") if workload.namespace == "default" else (workload.namespace,)
        for space in spaces:
            for key in self._pods_in.get(space, ()):
                refs = (self.objects[key].get("metadata") or {}).get("ownerReferences") or []
                if any(r.get("kind") == workload.kind and r.get("name") == workload.name for r in refs):
                    keys.append(key)
        return keys

    def _new_pod(self, workload: Workload, template: PodTemplate | None, like: Mapping[str, Any] | None,
                 index: int) -> dict[str, Any]:
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        if template is not None:
            labels = dict(template.labels) or {"app": workload.name}
            spec = pod_spec(template)
        elif like is not None:
            labels = dict((like.get("metadata") or {}).get("labels") or {})
            spec = copy.deepcopy(dict(like.get("spec") or {}))
        else:
            raise ValueError(f"{workload.kind} {workload.namespace}/{workload.name} has no pods to copy and the "
                             "event no template")
        spec.pop("nodeName", None)
        if workload.kind == "Job":
            spec.setdefault("restartPolicy", "Never")
        suffix = str(index) if workload.kind == "StatefulSet" else \
            "".join(self._random.choice(NAME_ALPHABET) for _ in range(5))
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{workload.name}-{suffix}", "namespace": workload.namespace, "labels": labels,
                         "uid": f"{self._random.getrandbits(128):032x}", "creationTimestamp": now,
                         "ownerReferences": [{"apiVersion": "batch/v1" if workload.kind == "Job" else "apps/v1",
                                              "kind": workload.kind, "name": workload.name,
                                              "uid": f"trace-{workload.name}", "controller": True}]},
            "spec": spec, "status": {"phase": "Pending"},
        }

    async def apply(self, event: TraceEvent) -> None:
        """Apply one trace event now."""
        if event.scale is not None:
            await self._scale(event.scale.workload, event.scale.replicas, event.scale.template)
        elif event.create is not None:
            for obj in event.create.objects:
                await self._put(copy.deepcopy(obj))
            self.pods_waiting.set()
        elif event.patch is not None:
            p = event.patch
            key = self.key_of(p.kind, p.namespace, p.name)
            current = self.objects.get(key)
            if current is None:
                raise ValueError(f"patch: no {p.kind} {p.namespace + '/' if p.namespace else ''}{p.name}")
            await self._put(merge_patch(current, p.merge))
        elif event.delete is not None:
            d = event.delete
            if d.workload is not None:
                for key in sorted(self._owned(d.workload)):
                    await self._remove(key)
            elif (key := self.key_of(str(d.kind), d.namespace, str(d.name))) not in self.objects:
                raise ValueError(f"delete: no {d.kind} {d.namespace + '/' if d.namespace else ''}{d.name}")
            elif d.kind == "Node":
                await self.lose_node(str(d.name))
            else:
                await self._remove(key)
        elif event.depart is not None:
            key = self.replica_of(event.depart.namespace, event.depart.name)
            if key not in self.objects:
                raise ValueError(f"depart: no Pod {event.depart.namespace}/{event.depart.name}")
            await self._remove(key)
        elif event.interrupt is not None:
            await self._interrupt(event.interrupt)

    # -- the cloud ------------------------------------------------------------------------------------------

    async def _interrupt(self, interrupt: Interrupt) -> None:
        """Send the cloud's notice for the node named, or for nodes picked at random among the Ready ones that
        match and are not interrupted already, and mark when each ends (none for a rebalance recommendation)."""
        ending = {name for _, _, name in self._endings}
        if interrupt.node is not None:
            if self.key_of("Node", "", interrupt.node) not in self.objects:
                raise ValueError(f"interrupt: no Node {interrupt.node}")
            chosen = [interrupt.node]
        else:
            matching = sorted(
                name for name in self.node_names() if name not in ending
                and is_ready(node := self.objects[self.key_of("Node", "", name)])
                and not _meta(node).get("deletionTimestamp")
                and (interrupt.capacity_type is None
                     or (_meta(node).get("labels") or {}).get(LABEL_CAPACITY_TYPE) == interrupt.capacity_type)
                and (interrupt.nodepool is None
                     or (_meta(node).get("labels") or {}).get(LABEL_NODEPOOL) == interrupt.nodepool))
            if not matching:
                which = " and ".join(
                    [f"of capacity type {interrupt.capacity_type}"] * (interrupt.capacity_type is not None)
                    + [f"of NodePool {interrupt.nodepool}"] * (interrupt.nodepool is not None))
                raise ValueError(f"interrupt: no Ready node {which + ' ' if which else ''}to interrupt")
            chosen = sorted(self._random.sample(matching, min(interrupt.nodes, len(matching))))
        now = self.clock()
        takes_away = interrupt.kind != "rebalance"
        deadline = now + timedelta(seconds=interrupt.notice) if takes_away else None
        for name in chosen:
            node = self.objects[self.key_of("Node", "", name)]
            provider_id = str((node.get("spec") or {}).get("providerID") or name)
            await self.bus.publish(TOPIC_INTERRUPTIONS, Interruption(
                id=uuid.UUID(int=self._random.getrandbits(128), version=4), node=name, kind=interrupt.kind,
                instance_id=provider_id.rsplit("/", 1)[-1] or name, deadline=deadline,
                detail="simulated by the trace"))
            self.measures.interruptions += 1
            if deadline is not None and name not in ending:
                heapq.heappush(self._endings, (deadline, self.measures.interruptions, name))  # then by notice
                ending.add(name)
        self._endings_changed.set()

    async def run_cloud(self, stop: asyncio.Event) -> None:
        """The cloud's side of the interruptions: each interrupted node ends at its deadline if it is still there
        (ebb has drained and deleted it by then when it could)."""
        while not stop.is_set():
            self._endings_changed.clear()
            if not self._endings:
                await self.clock.wait(self._endings_changed, stop)
                continue
            deadline, _, name = self._endings[0]
            wait = (deadline - self.clock()).total_seconds()
            if wait > 0:
                await self.clock.wait(self._endings_changed, stop, within=wait)
                continue
            heapq.heappop(self._endings)
            await self.lose_node(name)

    async def lose_node(self, name: str) -> None:
        """The node is gone, as the cloud or a deletion takes it: its NodeClaim and pods go with it (the pod
        garbage collector), and the controllers make those pods again, Pending; nothing when it is gone already."""
        key = self.key_of("Node", "", name)
        if key not in self.objects:
            return
        pods = [self.objects[k] for k in sorted(self._pods_on.get(name, ()))]
        await self._delete_node_now(key)
        for pod in pods:
            owners = _meta(pod).get("ownerReferences") or []
            if not any(o.get("kind") == "DaemonSet" for o in owners):
                self.measures.pods_lost += 1
            await self._recreate(pod)

    async def _scale(self, workload: Workload, replicas: int, template: PodTemplate | None) -> None:
        owned = self._owned(workload)
        if len(owned) < replicas:
            like = self.objects[sorted(owned)[0]] if owned else None
            taken = {k.rsplit("-", 1)[-1] for k in owned}
            index = 0
            for _ in range(replicas - len(owned)):
                while workload.kind == "StatefulSet" and str(index) in taken:
                    index += 1
                await self._put(self._new_pod(workload, template, like, index))
                index += 1
            self.pods_waiting.set()
        elif len(owned) > replicas:
            def order(key: str) -> tuple[bool, str, str]:
                obj = self.objects[key]
                return (not _pending(obj), str((obj.get("metadata") or {}).get("creationTimestamp")), key)

            doomed = sorted(owned, key=order)
            # Pending first; then, as the ReplicaSet controller ranks them (getPodsToDelete), the pods on the nodes
            # with the most of the workload's pods ("doubled up"), and among those the newest (the latest
            # creationTimestamp, then the name)
            pending = [k for k in doomed if _pending(self.objects[k])]
            on_node: dict[str, int] = {}
            for key in doomed:
                node = str((self.objects[key].get("spec") or {}).get("nodeName") or "")
                on_node[node] = on_node.get(node, 0) + 1

            def ranked(key: str) -> tuple[int, bool, str, str]:
                return (on_node[str((self.objects[key].get("spec") or {}).get("nodeName") or "")], *order(key))

            running = sorted((k for k in doomed if not _pending(self.objects[k])), key=ranked, reverse=True)
            for key in [*pending, *running][:len(owned) - replicas]:
                await self._remove(key)
