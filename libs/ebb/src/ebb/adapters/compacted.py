"""Loading a ``SnapshotStore`` from ``ebb.cluster.objects``, the compacted topic that holds the whole cluster.

The consolidation-planner, the interruption-ingester and the decisions-api seed their snapshot with it on
start, then follow the topic from the end offsets taken before the read (``Bus.consume(start_at=...)``), so
nothing older than the snapshot is applied over it. Reading the topic is the bus's
(``Bus.read_compacted``); this module only turns the messages into the store's objects.
"""

from __future__ import annotations

from collections.abc import Callable

from ebb.adapters.bus import Bus
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, KindSynced


async def seed_snapshot(store: SnapshotStore, bus: Bus,
                        on_synced: Callable[[KindSynced], None] | None = None) -> int:
    """Load ``ebb.cluster.objects`` as it is now into ``store``; returns how many objects it holds. ``on_synced`` is
    told each kind the cluster-watcher has said it published a first list of (`KindSynced`)."""
    for message in (await bus.read_compacted(TOPIC_CLUSTER_OBJECTS)).values():
        if isinstance(message, ClusterObject):
            store.apply(message)
        elif isinstance(message, KindSynced) and on_synced is not None:
            on_synced(message)
    return len(store)
