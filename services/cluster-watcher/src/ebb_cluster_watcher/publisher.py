"""The handler: each change of the watch loop becomes a ``ClusterObject`` on ``ebb.cluster.objects``
(keyed ``kind/namespace/name``; a deletion is a tombstone)."""

from __future__ import annotations

import structlog
from pydantic import ValidationError

from ebb.adapters.bus import Bus
from ebb.adapters.kube import Change
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject

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

    def __init__(self, bus: Bus, topic: str = TOPIC_CLUSTER_OBJECTS) -> None:
        self.bus = bus
        self.topic = topic
        self.published = 0
        self.tombstones = 0
        self.rejected = 0

    async def __call__(self, change: Change) -> None:
        try:
            message = to_message(change)
        except ValidationError as e:
            # an object the contract cannot carry (never seen from a real API server): skip it
            self.rejected += 1
            log.error("object rejected by the contract", key=change.key, error=str(e))
            return
        await self.bus.publish(self.topic, message)
        self.published += 1
        if message.deleted:
            self.tombstones += 1
        log.debug("published", key=change.key, deleted=message.deleted, resource_version=change.resource_version)
