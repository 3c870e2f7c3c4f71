"""The live cluster state the API explains and plans on: ebb.cluster.objects plus the store.

``LiveState`` holds the ``SnapshotStore`` the objects consumer fills, and builds the same live snapshot
the consolidation-planner plans on (``ebb.adapters.live.live_snapshot``): the store's active holds merged
in, and the nodes of live decisions (``ebb.core.decision.LIVE``) marked as being disrupted. The store
parses incrementally (each object once after it changed) but its first build of a large cluster takes
seconds, so it runs in a worker thread; ``lock`` keeps the consumer from applying objects meanwhile (the
store is not thread-safe), and the result is cached until the next change, so a burst of requests builds
once. The bundled instance-type catalog is used when no InstanceTypeCatalog object is held, as ``ebb plan``
does, so a live plan equals the CLI's on a dump of the same cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio.to_thread

from ebb.adapters.live import HOLD_SCOPES, live_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.models import Hold
from ebb.contracts import ClusterObject
from ebb.core.model import Snapshot
from ebb.core.quantity import parse_time
from ebb.core.snapshot import SnapshotError


class NotSeeded(RuntimeError):
    """The objects topic has not been read to its end yet: there is no live snapshot to answer from."""


class InvalidSnapshot(RuntimeError):
    """The held objects do not make a valid snapshot (the planner does not plan on it either)."""

    def __init__(self, error: SnapshotError) -> None:
        super().__init__(f"the live cluster snapshot is invalid: {error}")
        self.error = error


@dataclass(frozen=True, slots=True)
class LiveView:
    """The live snapshot at one moment, with the store's facts it was built from."""

    snapshot: Snapshot
    #: active holds of this cluster (store rows)
    holds: Sequence[Hold]
    #: node -> the live decision holding it
    busy: dict[str, str]
    #: the cluster's ebb.sh/v1 Hold objects in force, shown as the store's holds are (`object_holds`)
    object_holds: Sequence[Hold] = ()

    def every_hold(self) -> list[Hold]:
        """The store's holds in force, then the Hold objects in force: every hold the planner honours."""
        return [*self.holds, *self.object_holds]


class LiveState:
    """The cluster objects of ebb.cluster.objects and the snapshot they make."""

    def __init__(self, store: DecisionStore, limiter: anyio.CapacityLimiter,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.store = store
        self.limiter = limiter
        #: the objects; the bundled catalog is its default fallback
        self.objects = SnapshotStore()
        # when pods left nodes without a NodeClaim, as the planner keeps it (its passes' consolidateAfter), at the
        # API's clock (the embedded mode's is simulated)
        self.objects.keep_pod_events(clock)
        #: set once the compacted topic was read to its end at startup
        self.seeded = asyncio.Event()
        #: held while a worker thread builds the snapshot; the consumer applies objects under it
        self.lock = asyncio.Lock()
        self._cache: tuple[int, Snapshot] | None = None

    async def snapshot(self) -> Snapshot:
        """The objects' snapshot (without the store's facts); NotSeeded / InvalidSnapshot."""
        if not self.seeded.is_set():
            raise NotSeeded("the cluster state is still loading from ebb.cluster.objects; try again shortly")
        cached = self._cache
        if cached is not None and cached[0] == self.objects.version:
            return cached[1]
        async with self.lock:
            version = self.objects.version
            try:
                snapshot = await anyio.to_thread.run_sync(self.objects.snapshot, limiter=self.limiter)
            except SnapshotError as exc:
                raise InvalidSnapshot(exc) from exc
            self._cache = (version, snapshot)
            return snapshot

    async def apply(self, message: ClusterObject) -> bool:
        """Apply a cluster object (never while a worker thread reads the store)."""
        async with self.lock:
            return self.objects.apply(message)

    async def view(self, now: datetime) -> LiveView:
        """The live snapshot at ``now``: holds in force merged in, nodes of live decisions marked, the
        replacements they launch named (as the planner plans)."""
        snapshot = await self.snapshot()
        holds = await self.store.list_holds(now)
        busy = await self.live_nodes()
        launched = await self.store.live_replacements()
        return LiveView(live_snapshot(snapshot, holds=holds, busy=busy, launched=launched), holds, busy,
                        [h for h in object_holds(snapshot, self.objects) if h.in_force(now)])

    async def live_nodes(self) -> dict[str, str]:
        """node -> id of the live decision (``ebb.core.decision.LIVE``) that holds it."""
        return await self.store.live_nodes()


#: the ``kind`` of a hold that is an ebb.sh/v1 Hold object of the cluster (the store's are manual or automatic)
OBJECT_HOLD = "object"
#: the core's hold scopes -> the store's
_STORE_SCOPES = {core: store for store, core in HOLD_SCOPES.items()}


def object_holds(snapshot: Snapshot, objects: SnapshotStore) -> list[Hold]:
    """The Hold objects of ``snapshot`` (the objects' own, before the store's holds are merged in) as rows shaped
    like the store's, never stored: id the object's name, kind ``OBJECT_HOLD``, created when the apiserver says
    (None when the object does not say). They are made and deleted with kubectl, not over this API."""
    rows = []
    for hold in snapshot.holds:
        stamp = ((objects.get("Hold", "", hold.name) or {}).get("metadata") or {}).get("creationTimestamp")
        try:
            created = parse_time(str(stamp)) if stamp else None
        except ValueError:
            created = None
        rows.append(Hold(id=hold.name, cluster="", scope_kind=_STORE_SCOPES[hold.scope], scope=hold.target or "",
                         kind=OBJECT_HOLD, reason=hold.reason, created_by=None, created_at=created,
                         expires_at=hold.expires))
    return rows

