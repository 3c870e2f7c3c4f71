"""The pure half of list+watch: what to publish for a list result or a watch event, given what was
published before. No I/O; the watch loop (``ebb.adapters.kube.watch``) feeds it and records what it
published once the bus acknowledged it.

Each object is trimmed and digested once: the digest computed to compare with what was published travels
on the ``Change`` and is what ``record`` stores. A batch of watch events (``KindState.batch``) compares each
event with what the events before it in the batch change, as the bus has not acknowledged them yet."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ebb.adapters.kube.kinds import KindSpec
from ebb.adapters.kube.trim import content_digest, object_ref, trim


@dataclass(frozen=True)
class Change:
    """One message for ``ebb.cluster.objects``: the trimmed object, or None for a deletion."""

    kind: str
    namespace: str
    name: str
    resource_version: str
    object: dict[str, Any] | None
    #: ``content_digest(object)`` when already computed (``record`` computes it otherwise)
    digest: str | None = field(default=None, compare=False, repr=False)

    @property
    def deleted(self) -> bool:
        return self.object is None

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass
class KindState:
    """What has been published for one kind: (namespace, name) → digest of the trimmed object, and the
    resourceVersion to watch from."""

    spec: KindSpec
    published: dict[tuple[str, str], str] = field(default_factory=dict)
    resource_version: str | None = None

    def upsert(self, obj: Mapping[str, Any], pending: Mapping[tuple[str, str], str | None] | None = None,
               ) -> Change | None:
        """The change for an added or modified object; None when nothing ebb reads has changed. ``pending``:
        digests (None: deleted) of changes made but not yet recorded, which count before ``published``."""
        # the watch loop's objects are decoded JSON it drops once this returns: shared, not copied
        trimmed = trim(obj, kind=self.spec.kind, api_version=self.spec.api_version, copy=False)
        namespace, name, rv = object_ref(trimmed)
        if not name:
            return None
        digest = content_digest(trimmed)
        key = (namespace, name)
        last = pending[key] if pending is not None and key in pending else self.published.get(key)
        if last == digest:
            return None
        return Change(self.spec.kind, namespace, name, rv, trimmed, digest)

    def delete(self, obj: Mapping[str, Any]) -> Change | None:
        """The tombstone for a deleted object (also for one never published: harmless on a compacted
        topic, and needed after a restart)."""
        namespace, name, rv = object_ref(obj)
        if not name:
            return None
        return Change(self.spec.kind, namespace, name, rv, None)

    def event(self, type_: str, obj: Mapping[str, Any],
              pending: Mapping[tuple[str, str], str | None] | None = None) -> Change | None:
        """The change for a watch event (ADDED, MODIFIED, DELETED); None for anything else."""
        if type_ in ("ADDED", "MODIFIED"):
            return self.upsert(obj, pending)
        if type_ == "DELETED":
            return self.delete(obj)
        return None

    def batch(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Change]:
        """The changes for consecutive watch events published together: each event is compared with the
        changes of the events before it in the batch (not yet recorded), so an object changed and changed
        back within a batch is published both times, as one event at a time would."""
        changes: list[Change] = []
        pending: dict[tuple[str, str], str | None] = {}
        for type_, obj in events:
            change = self.event(type_, obj, pending)
            if change is not None:
                changes.append(change)
                pending[(change.namespace, change.name)] = change.digest if change.object is not None else None
        return changes

    def relist(self, items: Iterable[Mapping[str, Any]]) -> list[Change]:
        """The changes that bring the published state to a fresh list: upserts for new or changed
        objects, then tombstones for published objects the list no longer has (deleted while the
        watch was down, e.g. after 410 Gone)."""
        changes: list[Change] = []
        seen: set[tuple[str, str]] = set()
        for item in items:
            namespace, name, _ = object_ref(item)
            seen.add((namespace, name))
            change = self.upsert(item)
            if change is not None:
                changes.append(change)
        for namespace, name in sorted(self.published.keys() - seen):
            changes.append(Change(self.spec.kind, namespace, name, "", None))
        return changes

    def record(self, change: Change) -> None:
        """Note that ``change`` was published."""
        key = (change.namespace, change.name)
        if change.object is None:
            self.published.pop(key, None)
        else:
            self.published[key] = change.digest or content_digest(change.object)
