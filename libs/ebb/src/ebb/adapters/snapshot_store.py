"""The cluster snapshot rebuilt from ``ebb.cluster.objects`` (docs/architecture.md#topics), for every consumer.

``SnapshotStore`` applies cluster-object messages in the order they arrive (per key, the topic's
order): an upsert replaces the object under its key ``kind/namespace/name``, a tombstone removes it.
``snapshot()`` builds the pure core's ``Snapshot`` from the objects held, on demand, with the parser of
``ebb plan`` (``ebb.core.snapshot``). It is incremental: each object is parsed once, when it is first needed
after it changed (a Pod whose ``spec`` changed only in ``nodeName`` keeps its parsed scheduling needs: binding
and status changes are most of a cluster's changes; a new Pod takes them from a pod of the same controller whose
``spec`` is the same but for ``nodeName``: a replica, or a pod made again after an eviction), and the snapshot
itself is reused until the next change (a 2,000-node, 20,000-pod cluster is parsed whole in seconds; one changed
pod then costs microseconds plus the assembly). The parsed objects are also kept in the keys' sorted order, so a
snapshot after a few changes fills in their places instead of looking every key up again, and the objects' names
are counted as they come and go, so a snapshot of every key is known free of a name held twice without checking
thousands of them (``assemble``'s ``refs_unique``). Pure apart from holding state: no I/O; wire it to a bus with
``bus.consume([TOPIC_CLUSTER_OBJECTS], group, store.handle, stop=...)``.

Given a clock (``keep_pod_events``), the store also keeps, per node, when a pod last left it: when a pod bound to
it went terminating (a ``deletionTimestamp``) or terminal (Succeeded, Failed), or was deleted without either first
(the simulated cluster removes pods at once). That is what Karpenter's podevents controller writes into a
NodeClaim's ``status.lastPodEventTime``, and the snapshot carries it (``Snapshot.pod_events``) for the nodes
without one, whose consolidateAfter would otherwise not see a pod that left (a pod that came is seen in its start
time). DaemonSet pods do not count, as in Karpenter; a node's record goes with the node. The time is the clock's
when the change is applied: a planner that starts again reads the compacted topic, where a deleted pod is gone
(nothing to record) or its tombstone follows it (recorded at the restart, which only delays that node's
consolidation).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, KeysView, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, cast

from ebb.adapters.bus.base import Delivery
from ebb.adapters.catalog import bundled_catalog as default_catalog
from ebb.contracts import ClusterObject
from ebb.core.model import Snapshot
from ebb.core.snapshot import ParsedObject, SnapshotError, assemble, object_ref, parse_catalog, parse_object


class SnapshotStore:
    """The latest trimmed object per key, and the snapshot they make."""

    def __init__(
        self, bundled_catalog: Iterable[Any] | Callable[[], Iterable[Any]] | None = default_catalog, *,
        parsed_elsewhere: Callable[[str, Mapping[str, Any]], ParsedObject | None] | None = None,
    ) -> None:
        #: passed to ``parse_documents``: the instance-type catalog used when no InstanceTypeCatalog
        #: object is held (default: ebb's bundled catalog, as ``ebb plan`` uses; ``[]``: none)
        self.bundled_catalog = bundled_catalog
        #: asked before an object is parsed: another holder's parse of that very version of it (key, object held
        #: here), or None. The embedded mode's planner takes the simulated cluster's, which parses the same objects
        #: (untrimmed) for kube-scheduler: each version is then parsed once in the process, not once per store
        self.parsed_elsewhere = parsed_elsewhere
        #: key -> the parsed object (or why it cannot be parsed), for objects unchanged since
        self._parsed: dict[str, ParsedObject | SnapshotError] = {}
        #: the keys held that are not parsed (or invalid) since they last changed, in the order they changed
        self._unparsed: dict[str, None] = {}
        #: key -> an earlier version of a Pod held since, as it was and parsed: `parse_object`'s ``previous``
        self._previous: dict[str, tuple[dict[str, Any], ParsedObject]] = {}
        #: a new Pod's key -> the key of a pod of the same controller held when it came (`_controller`): a replica,
        #: or a pod its controller made again, whose spec is most likely the same but for ``nodeName``
        self._like: dict[str, str] = {}
        #: a controller (`_controller`) -> the key of the first of its pods still held when the last one came
        self._first_of: dict[tuple[str, str, str], str] = {}
        self._fallback: tuple[ParsedObject, ...] | None = None
        self._snapshot: tuple[int, Snapshot] | None = None
        self._objects: dict[str, dict[str, Any]] = {}
        #: the keys held, sorted (sorted once, then kept sorted as keys come and go)
        self._sorted: list[str] | None = None
        #: the parsed object of each key of ``_sorted``, in its place (None: changed since), kept in step with it: a
        #: snapshot then takes the list as it is, not thousands of lookups (`_parsed_in_order`); None until asked
        self._in_order: list[ParsedObject | None] | None = None
        #: the keys put since ``_in_order`` was last filled in
        self._to_fill: set[str] = set()
        #: how many held objects have each ref (`object_ref`: what ``assemble`` tells objects apart by), and how many
        #: refs more than one has: none, and a snapshot of every key is known free of a ref twice without a look
        self._refs: dict[str, int] = {}
        self._refs_twice = 0
        #: incremented by every change; lets a consumer cache a snapshot until the next change
        self.version = 0
        #: "now" for the pod events (`keep_pod_events`); None: none kept
        self._pod_clock: Callable[[], datetime] | None = None
        #: node name -> when a pod last left it (`keep_pod_events`)
        self._pod_events: dict[str, datetime] = {}

    def keep_pod_events(self, clock: Callable[[], datetime]) -> None:
        """Keep, from now on, when a pod last left each node, at ``clock``'s time (the module's docstring)."""
        self._pod_clock = clock

    def _pod_left(self, old: Mapping[str, Any], new: Mapping[str, Any] | None) -> None:
        """Record a pod event on the node of ``old``, a Pod held, when ``new`` (None: deleted) makes it leave."""
        node = _bound_to(old)
        if node is None or _left(old):
            return
        if new is None or _left(new) or _bound_to(new) != node:
            assert self._pod_clock is not None
            self._pod_events[node] = self._pod_clock()

    def apply(self, message: ClusterObject) -> bool:
        """Apply an upsert or a tombstone; True when the held state changed."""
        key = message.key()
        if message.object is None:
            return self.remove(key)
        held = self._objects.get(key)
        if held is not None and held == message.object and _identical(held, message.object):
            return False
        self.put(key, dict(message.object))
        return True

    def put(self, key: str, obj: dict[str, Any]) -> None:
        """Hold ``obj`` under ``key`` (``kind/namespace/name``) as it is, unchanged from now on: the caller gives
        a new dict for every change (the simulated cluster's objects, which it never edits in place)."""
        old, parsed = self._objects.get(key), self._parsed.pop(key, None)
        if old is not None and self._pod_clock is not None and key.startswith("Pod/"):
            self._pod_left(old, obj)
        self._count_ref(obj, 1)
        if old is not None:
            self._count_ref(old, -1)
        if self._in_order is not None:
            self._to_fill.add(key)
        if old is None:
            if self._sorted is not None:
                at = bisect.bisect_left(self._sorted, key)  # kept sorted: an insertion, not a sort of thousands
                self._sorted.insert(at, key)
                if self._in_order is not None:
                    self._in_order.insert(at, None)
            controller = _controller(obj)
            if controller is not None:
                first = self._first_of.get(controller)
                if first is None or first not in self._objects:
                    self._first_of[controller] = key
                else:
                    self._like[key] = first
        elif isinstance(parsed, ParsedObject) and parsed.kind == "Pod":
            self._previous[key] = (old, parsed)  # a pod bound or whose status changed keeps its parsed needs
        self._objects[key] = obj
        self._unparsed[key] = None
        self.version += 1

    def remove(self, key: str) -> bool:
        """Forget the object under ``key``; True when one was held."""
        obj = self._objects.pop(key, None)
        if obj is None:
            return False
        if self._pod_clock is not None:
            if key.startswith("Pod/"):
                self._pod_left(obj, None)
            elif key.startswith("Node/"):
                self._pod_events.pop(key.split("/", 2)[2], None)
        controller = _controller(obj)
        if controller is not None and self._first_of.get(controller) == key:
            del self._first_of[controller]
        self._count_ref(obj, -1)
        if self._sorted is not None:
            at = bisect.bisect_left(self._sorted, key)
            del self._sorted[at]
            if self._in_order is not None:
                del self._in_order[at]
                self._to_fill.discard(key)
        self._parsed.pop(key, None)
        self._unparsed.pop(key, None)
        self._previous.pop(key, None)
        self._like.pop(key, None)
        self.version += 1
        return True

    def _count_ref(self, obj: Mapping[str, Any], change: int) -> None:
        ref = object_ref(obj)
        had = self._refs.get(ref, 0)
        now = had + change
        if now:
            self._refs[ref] = now
        else:
            del self._refs[ref]
        self._refs_twice += (now > 1) - (had > 1)

    def apply_all(self, messages: Iterable[ClusterObject]) -> None:
        for message in messages:
            self.apply(message)

    async def handle(self, delivery: Delivery) -> None:
        """A bus handler: applies the cluster objects it is given and ignores any other message."""
        if isinstance(delivery.message, ClusterObject):
            self.apply(delivery.message)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(f"{kind}/{namespace}/{name}")

    def keys(self) -> list[str]:
        return list(self._sorted_keys())

    def _sorted_keys(self) -> list[str]:
        """The keys held, sorted (read-only: callers copy; a snapshot's list changes as keys come and go)."""
        if self._sorted is None:
            self._sorted = sorted(self._objects)
            self._in_order = None
        return self._sorted

    def objects(self) -> list[dict[str, Any]]:
        """The held objects, ordered by key (kubectl-shaped dicts)."""
        return [self._objects[k] for k in self._sorted_keys()]

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def snapshot(self) -> Snapshot:
        """The pure core's snapshot of the held objects (``SnapshotError`` names an invalid one)."""
        if self._snapshot is not None and self._snapshot[0] == self.version:
            return self._snapshot[1]
        snapshot = self.snapshot_of(self._sorted_keys())
        self._snapshot = (self.version, snapshot)
        return snapshot

    def snapshot_of(self, keys: Iterable[str]) -> Snapshot:
        """The snapshot of the held objects under ``keys``, in that order (not cached; the parsed objects are)."""
        distinct = isinstance(keys, Mapping | AbstractSet | KeysView)  # no key twice: a dict's, a set's
        keys = keys if isinstance(keys, list) else list(keys)
        # every key held, whose refs are counted: the sorted keys, or as many distinct keys as are held (a key not held
        # raises below), as the simulated cluster asks with its objects in their own order
        every = keys is self._sorted or (distinct and len(keys) == len(self._objects))
        snapshot = assemble(self._parsed_in_order(keys), self.fallback_catalog,
                            refs_unique=every and self._refs_twice == 0)
        if self._pod_events:
            snapshot = dataclasses.replace(snapshot, pod_events=tuple(sorted(self._pod_events.items())))
        return snapshot

    def _parsed_in_order(self, keys: list[str]) -> list[ParsedObject]:
        """`parsed` of each of ``keys``: the objects that changed since they were last parsed are parsed first, and
        then every key is one lookup, in C (a snapshot of thousands of objects, of which a few changed). While an
        object held is invalid, key by key: the error of the first invalid one of ``keys`` is raised, numbering a
        nameless one by its index there (an invalid one is never parsed again before it changes)."""
        parsed = self._parsed
        for key in list(self._unparsed):  # a copy: parsing one may parse another (`_parsed_pod`)
            item = parsed.get(key)
            if item is None:
                try:
                    self.parsed(key)
                except SnapshotError:
                    del parsed[key]  # parsed again in its place below: its error numbers it by its index in ``keys``
                    break
            elif type(item) is not ParsedObject:  # invalid, and parsed already
                break
        else:  # every one valid: checked above
            if keys is not self._sorted:
                return cast(list[ParsedObject], list(map(parsed.__getitem__, keys)))
            return self._every_parsed()
        return [self.parsed(key, index) for index, key in enumerate(keys)]

    def _every_parsed(self) -> list[ParsedObject]:
        """The parsed objects of every key held, in ``_sorted``'s order (each parsed and valid, the caller checked):
        ``_in_order`` with the places of the keys put since filled in (made whole the first time)."""
        keys, in_order = self._sorted, self._in_order
        assert keys is not None
        if in_order is None:
            self._in_order = in_order = cast(list[ParsedObject | None], list(map(self._parsed.__getitem__, keys)))
        else:
            for key in self._to_fill:
                in_order[bisect.bisect_left(keys, key)] = cast(ParsedObject, self._parsed[key])
        self._to_fill.clear()
        return list(cast(list[ParsedObject], in_order))

    def parsed(self, key: str, index: int = 0) -> ParsedObject:
        """The held object under ``key`` parsed, once per change (``SnapshotError`` when it is invalid;
        ``index`` numbers a nameless object in that error, as ``parse_documents`` does)."""
        item = self._parsed.get(key)
        if type(item) is ParsedObject:  # the common case first: parsed already, and valid
            return item
        if item is None:
            item = self._parsed[key] = self._parse(key, index, like=self._like.pop(key, None))
        if isinstance(item, SnapshotError):
            raise item
        return item

    def _parse(self, key: str, index: int, *, like: str | None = None) -> ParsedObject | SnapshotError:
        """Parse the held object under ``key`` (``parsed_elsewhere``'s parse of it if there is one, else from its own
        last parse, else from that of the pod under ``like``: one of its controller whose parsed scheduling needs it
        may take) and mark it parsed; its error when invalid."""
        previous = self._previous.pop(key, None)
        obj = self._objects[key]
        item = self.parsed_elsewhere(key, obj) if self.parsed_elsewhere is not None else None
        if item is None:
            if previous is None and like is not None:
                previous = self._parsed_pod(like)
            try:
                item = parse_object(obj, index, previous=previous)
            except SnapshotError as e:
                return e
        self._unparsed.pop(key, None)
        return item

    def _parsed_pod(self, key: str) -> tuple[dict[str, Any], ParsedObject] | None:
        """The Pod under ``key`` as held and parsed (parsed now if it was not: it is held, so a snapshot parses it
        anyway), for another pod's parse to reuse its scheduling needs; None when it is gone or invalid."""
        obj = self._objects.get(key)
        if obj is None:
            return None
        item = self._parsed.get(key)
        if item is None:
            item = self._parse(key, 0)
            if isinstance(item, SnapshotError):
                return None  # its own parse, in its place, says why (naming a nameless one by its index)
            self._parsed[key] = item
        return (obj, item) if isinstance(item, ParsedObject) and item.kind == "Pod" else None

    def fallback_catalog(self) -> tuple[ParsedObject, ...]:
        """The bundled catalog, parsed once: the instance types when no InstanceTypeCatalog is held."""
        if self._fallback is None:
            raw = self.bundled_catalog() if callable(self.bundled_catalog) else self.bundled_catalog
            self._fallback = parse_catalog(raw or ())
        return self._fallback


def _identical(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same, types too: Python's ``==`` has ``True == 1`` and ``1 == 1.0``, so a
    field changed from ``true`` to ``1`` (a hostile object made valid again) would read as no change, and the
    invalid one would stay held for ever."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_identical, a, b))
    return bool(a == b)


def _bound_to(pod: Mapping[str, Any]) -> str | None:
    """The node a Pod is bound to, None when none or when a DaemonSet owns it (its pods' events are not counted)."""
    spec, meta = pod.get("spec"), pod.get("metadata")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    if not node or not isinstance(node, str):
        return None
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    if isinstance(refs, list) and any(isinstance(r, Mapping) and r.get("kind") == "DaemonSet" for r in refs):
        return None
    return node


def _left(pod: Mapping[str, Any]) -> bool:
    """Whether a Pod is terminating or terminal: it has left its node as Karpenter's pod events count."""
    meta, status = pod.get("metadata"), pod.get("status")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return True
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def _controller(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """A Pod's controller, as (namespace, kind, name) from its controller ownerReference; None for another kind
    or a pod without one."""
    if obj.get("kind") != "Pod":
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(meta.get("namespace") or ""), str(ref.get("kind")), str(ref.get("name"))
    return None
