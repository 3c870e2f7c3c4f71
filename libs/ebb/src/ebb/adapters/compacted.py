"""Loading a ``SnapshotStore`` from ``ebb.cluster.objects``, the compacted topic that holds the whole cluster.

The consolidation-planner, the interruption-ingester and the decisions-api seed their snapshot with it on
start, then follow the topic from the end offsets taken before the read (``Bus.consume(start_at=...)``), so
nothing older than the snapshot is applied over it. Reading the topic is the bus's
(``Bus.read_compacted``); this module only turns the messages into the store's objects.
"""

from __future__ import annotations

from ebb.adapters.bus import Bus
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject


async def seed_snapshot(store: SnapshotStore, bus: Bus) -> int:
    """Load ``ebb.cluster.objects`` as it is now into ``store``; returns how many objects it holds."""
    for message in (await bus.read_compacted(TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject):
            store.apply(message)
    return len(store)
