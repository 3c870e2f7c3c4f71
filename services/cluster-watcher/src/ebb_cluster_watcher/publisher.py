"""The handler: each change of the watch loop becomes a ``ClusterObject`` on ``ebb.cluster.objects``
(keyed ``kind/namespace/name``; a deletion is a tombstone), and once a kind's first list is acknowledged, a
``KindSynced`` of it (keyed ``KindSynced//kind``), which a planner waits for before it plans. The watch loop hands
over a batch at a time and the publisher sends it with ``Bus.publish_many`` (several records in flight, each key's
order kept); it returns, and the counts move, only once every record is acknowledged, so the watch loop never
records a change as published before Kafka has it."""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from pydantic import ValidationError

from ebb.adapters.bus import Bus
from ebb.adapters.kube import Change
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, KindSynced
from ebb_cluster_watcher.metrics import Metrics

log = structlog.get_logger("ebb_cluster_watcher")


def to_message(change: Change) -> ClusterObject:
    """The wire message of a change (``ValidationError`` when a name breaks the contract)."""
    return ClusterObject(
        kind=change.kind,
        namespace=change.namespace,
        name=change.name,
        resource_version=change.resource_version,
        object=change.object,
    )


class Publisher:
    """Publishes changes on ``ebb.cluster.objects``; counts what it did."""

    def __init__(self, bus: Bus, topic: str = TOPIC_CLUSTER_OBJECTS, metrics: Metrics | None = None) -> None:
        self.bus = bus
        self.topic = topic
        self.metrics = metrics
        self.published = 0
        self.tombstones = 0
        self.rejected = 0

    async def synced(self, kind: str, watched: Sequence[str]) -> None:
        """Publish `KindSynced` of ``kind``: its first list is on the topic (acknowledged), or it is not served."""
        await self.bus.publish_many(self.topic, [KindSynced(kind=kind, watched=tuple(watched))])
        log.info("kind synced", kind=kind)

    async def __call__(self, changes: Sequence[Change]) -> None:
        messages: list[ClusterObject] = []
        for change in changes:
            try:
                messages.append(to_message(change))
            except ValidationError as e:
                # an object the contract cannot carry (never seen from a real API server): skip it
                self.rejected += 1
                if self.metrics is not None:
                    self.metrics.rejected.labels(change.kind).inc()
                log.error("object rejected by the contract", key=change.key, error=str(e))
        if not messages:
            return
        await self.bus.publish_many(self.topic, messages)
        self.published += len(messages)
        self.tombstones += sum(1 for message in messages if message.deleted)
        if self.metrics is not None:
            for message in messages:
                self.metrics.published.labels(message.kind, "delete" if message.deleted else "upsert").inc()
        log.debug("published", records=len(messages), last=changes[-1].key)
