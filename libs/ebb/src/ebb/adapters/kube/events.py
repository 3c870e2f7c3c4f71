"""Writes ``ebb.core.events.KubeEvent`` values to the API server as core/v1 Events, the way Karpenter's
recorder does: de-duplicated, bounded, and never in the way of planning.

- **De-duplication.** An event whose ``dedupe_key`` (reason, object, dedupe values; not the message) was
  recorded less than its ``dedupe_seconds`` ago is skipped (Karpenter: 15 min for ``Unconsolidatable``, 1 min
  for a NodePool's ``DisruptionBlocked``, 2 min otherwise). A pass over 2,000 unchanged nodes every 10 s
  therefore writes nothing after the first one. Skipping, not bumping ``count``: the Event that was written
  stays as it is until the window ends.
- **Bounded work.** ``record`` only queues (at most ``max_queue`` events; the rest are dropped *without*
  being remembered, so the next pass offers them again). ``run`` writes at most ``qps`` events a second
  (``flush(limit)`` per tick): the first pass over a large cluster is spread over time instead of making
  thousands of calls at once. The windows and the ticks are measured on the recorder's clock
  (``ebb.adapters.clock``), which also dates the events.
- **Failures** (API server away, RBAC, a conflict) are logged and the event's key forgotten, so a later pass
  offers it again; nothing is raised to the caller.

Events of cluster-scoped objects (Nodes, NodeClaims, NodePools) are written into ``namespace`` (``default``,
as client-go does), with ``involvedObject`` (kind, apiVersion, name and the uid when known),
``source.component`` and ``reportingComponent`` = ``component``, ``reportingInstance`` = the replica.
Events of namespaced objects (the executor's ``Evicted`` on a Pod) go to the object's namespace, with the uid
the event carries (``kubectl describe`` matches events by uid). RBAC: ``create`` on ``events`` in those
namespaces.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import structlog

from ebb.adapters.clock import Clock
from ebb.core.events import InvolvedObject, KubeEvent

log = structlog.get_logger("ebb.adapters.kube.events")

#: create(namespace, body): writes one core/v1 Event
EventSink = Callable[[str, dict[str, Any]], Awaitable[object]]
#: the uid of an involved object, when known
UidOf = Callable[[InvolvedObject], str | None]

MESSAGE_LIMIT = 1024


def kube_sink(api: Any) -> EventSink:
    """The sink of a kubernetes-asyncio ApiClient: ``CoreV1Api.create_namespaced_event``."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)

    async def create(namespace: str, body: dict[str, Any]) -> object:
        return await core.create_namespaced_event(namespace, cast(Any, body))  # a dict serialises as is

    return create


@dataclass(frozen=True, slots=True)
class _Queued:
    event: KubeEvent
    uid: str | None


class EventRecorder:
    """Queue events from a pass, write them at a bounded rate; see the module docstring."""

    def __init__(self, sink: EventSink, *, component: str, instance: str = "", namespace: str = "default",
                 uid_of: UidOf | None = None, qps: float = 10.0, max_queue: int = 1000,
                 clock: Clock | None = None) -> None:
        self.sink = sink
        self.component = component
        self.instance = instance
        self.namespace = namespace
        self.uid_of = uid_of
        self.qps = qps
        self.max_queue = max_queue
        self.clock = clock or Clock()
        self._queue: collections.deque[_Queued] = collections.deque()
        #: dedupe key -> (monotonic time it was recorded, window)
        self._seen: dict[str, tuple[float, float]] = {}
        self.written = 0
        self.failed = 0
        self.dropped = 0
        self.deduplicated = 0

    def __len__(self) -> int:
        return len(self._queue)

    def record(self, events: Iterable[KubeEvent]) -> int:
        """Queue the events not recorded within their window; returns how many were queued."""
        now = self.clock.monotonic()
        self._prune(now)
        queued = 0
        for event in events:
            key = event.dedupe_key
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < seen[1]:
                self.deduplicated += 1
                continue
            if len(self._queue) >= self.max_queue:
                self.dropped += 1
                continue
            self._seen[key] = (now, event.dedupe_seconds)
            uid = None
            if self.uid_of is not None and not event.involved.uid:
                with contextlib.suppress(Exception):
                    uid = self.uid_of(event.involved)
            self._queue.append(_Queued(event, uid))
            queued += 1
        return queued

    def _prune(self, now: float) -> None:
        if len(self._seen) < 4 * self.max_queue:
            return
        self._seen = {k: v for k, v in self._seen.items() if now - v[0] < v[1]}

    def body(self, event: KubeEvent, uid: str | None = None) -> dict[str, Any]:
        """The core/v1 Event of ``event``."""
        obj = event.involved
        stamp = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        involved: dict[str, Any] = {"kind": obj.kind, "name": obj.name, "apiVersion": obj.api_version}
        if obj.namespace:
            involved["namespace"] = obj.namespace
        if uid or obj.uid:
            involved["uid"] = uid or obj.uid
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{obj.name[:200]}.{uuid.uuid4().hex[:16]}",
                         "namespace": obj.namespace or self.namespace},
            "involvedObject": involved,
            "type": event.type, "reason": event.reason, "message": event.message[:MESSAGE_LIMIT],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        if self.instance:
            body["reportingInstance"] = self.instance[:128]
        return body

    async def flush(self, limit: int | None = None) -> int:
        """Write queued events, making at most ``limit`` API calls (all when None); returns how many were
        written."""
        written = calls = 0
        while self._queue and (limit is None or calls < limit):
            item = self._queue.popleft()
            body = self.body(item.event, item.uid)
            calls += 1
            try:
                await self.sink(body["metadata"]["namespace"], body)
            except Exception as e:  # never fatal: logged, and offered again by a later pass
                self.failed += 1
                self._seen.pop(item.event.dedupe_key, None)
                log.warning("writing a Kubernetes event failed", reason=item.event.reason,
                            kind=item.event.involved.kind, name=item.event.involved.name, error=repr(e))
                continue
            written += 1
            self.written += 1
        return written

    async def run(self, stop: asyncio.Event, *, tick: float = 1.0) -> None:
        """Write queued events at ``qps`` until ``stop``."""
        per_tick = max(1, int(self.qps * tick))
        while not stop.is_set():
            await self.clock.sleep(tick, stop)
            await self.flush(per_tick)
