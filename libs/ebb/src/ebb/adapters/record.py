"""Feeding a recording (``ebb record``): the I/O half of ``ebb.core.recording``.

Two sources, one `Recorder`:

- **the apiserver** (`record_live`, ``--live``): the cluster read once (``ebb.adapters.kube.read``, as ``ebb plan
  --live`` reads it) is the starting state; then the cluster-watcher's own list+watch loop
  (``ebb.adapters.kube.watch.KubeWatcher``, seeded with that state so it hands over only what changes after it)
  watches Nodes, Pods, NodeClaims and PersistentVolumeClaims (a StatefulSet's new replica comes with its new claim),
  and a small watch of core/v1 Events (`watch_events`) adds Karpenter's and
  ebb's own disruption Events. A cluster that does not serve NodeClaims, or does not let the recorder read Events,
  is recorded without them (what they would explain is then ``unknown``), said once in the log.
- **the cluster-watcher's topic** (`record_from_bus`, ``--from-kafka``): the compacted ``ebb.cluster.objects``
  read to its end is the starting state; then its new records, at their CloudEvent time (when the watcher saw the
  change), and ebb's own decisions' steps on ``ebb.disruption.events``, in a consumer group of the recording's
  own (nothing the services commit moves), handed over in time order (`Reordered`: the partitions keep only each
  object's order). The recorder must keep up with the topic: a record compacted away before it was read (Kafka
  compacts old segments of ``ebb.cluster.objects``) is a change it does not see.
  Nothing needs the laptop that started it: the same command runs as a
  Job or a pod in the cluster for a week. The topic carries no Kubernetes Events; the reasons come from the
  NodeClaims' conditions, the disruption taints and ebb's own steps.

Each changes the recorder only from the event loop's thread, and stops between two changes when ``stop`` is set,
so what was recorded up to then is whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from ebb.adapters.bus import Bus, Delivery
from ebb.adapters.clock import Clock, unless_stopped
from ebb.adapters.kube.kinds import NODE, NODECLAIM, PLAN_KINDS, POD, PVC
from ebb.adapters.kube.read import ClusterRead, read_cluster
from ebb.adapters.kube.reflector import Change
from ebb.adapters.kube.watch import KubeWatcher, decode_json, split_lines
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS, ClusterObject, DisruptionEvent

log = logging.getLogger("ebb.record")

#: the kinds whose changes a recording follows (the rest of the starting state is read once): a claim made during the
#: recording is a ``create`` in the trace, or its pods would wait Pending in the replay
WATCHED = (NODE, POD, NODECLAIM, PVC)
#: seconds between two attempts of the Events' watch after a failure
EVENTS_RETRY = 5.0


class Observer(Protocol):
    """What the sources call: ``observe(at, kind, namespace, name, obj)`` and, for ebb's steps,
    ``note_ebb_step(node, phase, message)`` (``ebb.core.recording.Recorder`` is one)."""

    def observe(self, at: datetime, kind: str, namespace: str, name: str,
                obj: Mapping[str, Any] | None) -> None: ...

    def note_ebb_step(self, node: str, phase: str, message: str) -> None: ...


@dataclass
class Started:
    """Where a recording starts: its time, the cluster then, and where it was read from."""

    at: datetime
    documents: list[dict[str, Any]]
    source: str


# -- the apiserver ------------------------------------------------------------------------------------------------


async def read_start(api: Any, clock: Clock,
                     progress: Callable[[str, int], None] | None = None) -> tuple[Started, ClusterRead]:
    """The cluster as it is now (every kind ``ebb plan --live`` reads)."""
    at = clock.now()
    read = await read_cluster(api, PLAN_KINDS, progress=progress)
    return Started(at=at, documents=read.documents, source=read.server), read


async def record_live(api: Any, started: Started, observer: Observer, stop: asyncio.Event, *,
                      clock: Clock, watch_timeout: int = 300, events: bool = True) -> None:
    """Hand every change after ``started`` of the watched kinds (and the disruption Events) to ``observer``,
    each at the time it arrived, until ``stop`` is set."""

    async def sink(changes: Sequence[Change]) -> None:
        now = clock.now()
        for change in changes:
            observer.observe(now, change.kind, change.namespace, change.name, change.object)

    watcher = KubeWatcher(api, WATCHED, sink, watch_timeout=watch_timeout, clock=clock)
    for doc in started.documents:  # the first list hands over only what changed since the start was read
        meta = doc.get("metadata") or {}
        watcher.seed(str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name") or ""), doc)
    tasks = [asyncio.create_task(watcher.run(stop), name="record-watch")]
    if events:
        tasks.append(asyncio.create_task(watch_events(api, observer, stop, clock=clock), name="record-events"))
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def watch_events(api: Any, observer: Observer, stop: asyncio.Event, *, clock: Clock,
                       watch_seconds: int = 300) -> None:
    """Every core/v1 Event from now on, handed to ``observer`` as kind ``Event`` (untrimmed: its reason, message,
    object and source are what it says); watched again from where it ended, relisted when that is too old. A
    cluster that refuses the recorder Events (403) is recorded without them."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                listed: Any = await unless_stopped(core.list_event_for_all_namespaces(limit=1, _preload_content=False),
                                              stop)
                try:
                    if listed.status == 403:
                        log.warning("Events: not allowed to list them (%s); recording without them",
                                    (await listed.read())[:200])
                        return
                    body = decode_json(await listed.read())
                finally:
                    listed.release()
                version = str((body.get("metadata") or {}).get("resourceVersion") or "") or None
                continue
            response: Any = await unless_stopped(core.list_event_for_all_namespaces(
                watch=True, resource_version=version, allow_watch_bookmarks=True, timeout_seconds=watch_seconds,
                _preload_content=False, _request_timeout=(10, watch_seconds + 30)), stop)
            try:
                buffer = b""
                while version is not None:
                    chunk = await unless_stopped(response.content.readany(), stop)
                    if not chunk:
                        break
                    lines, buffer = split_lines(buffer, chunk)
                    for line in lines:
                        watched = decode_json(line)
                        obj = watched.get("object") or {}
                        if watched.get("type") == "ERROR":
                            version = None  # 410 Gone, or another error: start again from now
                            break
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or "") or version
                        if watched.get("type") in ("ADDED", "MODIFIED"):
                            meta = obj.get("metadata") or {}
                            observer.observe(clock.now(), "Event", str(meta.get("namespace") or ""),
                                             str(meta.get("name") or ""), obj)
            finally:
                response.close()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure of the Events' watch: they only add reasons
            if stop.is_set():
                return
            log.warning("Events: watch failed (%r); again in %.0fs", exc, EVENTS_RETRY)
            version = None
            with contextlib.suppress(Exception):
                await clock.sleep(EVENTS_RETRY, stop)


# -- the cluster-watcher's topic ----------------------------------------------------------------------------------


async def read_start_from_bus(bus: Bus, clock: Clock, source: str) -> tuple[Started, dict[str, dict[int, int]]]:
    """The cluster as the compacted ``ebb.cluster.objects`` holds it now, and the offsets to follow both topics
    from (taken before the read: a change in between is handed over again, which changes nothing)."""
    offsets = {topic: await bus.end_offsets(topic) for topic in (TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS)}
    at = clock.now()
    documents = [dict(m.object) for m in (await bus.read_compacted(TOPIC_CLUSTER_OBJECTS)).values()
                 if isinstance(m, ClusterObject) and m.object is not None]
    return Started(at=at, documents=documents, source=source), offsets


class Reordered:
    """Deliveries handed to an observer in the order of their times: the topics' partitions keep each object's
    order but not the order between objects (a node's disruption taint and its pods' deletions are on different
    partitions), and whether a pod left a node being disrupted depends on it. A delivery is held until one
    ``window`` seconds newer has arrived (or `flush`)."""

    def __init__(self, observer: Observer, window: float) -> None:
        self.observer = observer
        self.window = timedelta(seconds=window)
        self._held: list[tuple[datetime, int, Delivery]] = []
        self._count = 0

    def add(self, at: datetime, delivery: Delivery) -> None:
        self._count += 1
        heapq.heappush(self._held, (at, self._count, delivery))
        newest = max(at, self._held[0][0])
        while self._held and self._held[0][0] <= newest - self.window:
            self._hand(*heapq.heappop(self._held))

    def flush(self) -> None:
        while self._held:
            self._hand(*heapq.heappop(self._held))

    def _hand(self, at: datetime, _: int, delivery: Delivery) -> None:
        message = delivery.message
        if isinstance(message, ClusterObject):
            self.observer.observe(at, message.kind, message.namespace, message.name, message.object)
        elif isinstance(message, DisruptionEvent):
            self.observer.note_ebb_step(message.node, message.phase, message.message)


#: seconds a delivery from the topics is held to be handed over in time order (`Reordered`)
REORDER_WINDOW = 2.0


async def record_from_bus(bus: Bus, offsets: Mapping[str, Mapping[int, int]], observer: Observer,
                          stop: asyncio.Event, *, clock: Clock, group: str, window: float = REORDER_WINDOW) -> None:
    """Hand every record of ``ebb.cluster.objects`` (at the time the watcher saw it) and every step of ebb's
    decisions on ``ebb.disruption.events`` from ``offsets`` to ``observer``, in time order (`Reordered`), until
    ``stop`` is set; then what is held."""
    reordered = Reordered(observer, window)

    async def handle(delivery: Delivery) -> None:
        at = delivery.message.at if isinstance(delivery.message, DisruptionEvent) else delivery.time
        reordered.add(at or clock.now(), delivery)

    try:
        await bus.consume([TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS], group, handle, stop=stop,
                          start_at=offsets)
    finally:
        reordered.flush()
