"""The pure half of list+watch: what to publish for a list result or a watch event, given what was
published before. No I/O; the watch loop (``ebb.adapters.kube.watch``) feeds it and records what it
published."""

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

    def upsert(self, obj: Mapping[str, Any]) -> Change | None:
        """The change for an added or modified object; None when nothing ebb reads has changed."""
        trimmed = trim(obj, kind=self.spec.kind, api_version=self.spec.api_version)
        namespace, name, rv = object_ref(trimmed)
        if not name:
            return None
        if self.published.get((namespace, name)) == content_digest(trimmed):
            return None
        return Change(self.spec.kind, namespace, name, rv, trimmed)

    def delete(self, obj: Mapping[str, Any]) -> Change | None:
        """The tombstone for a deleted object (also for one never published: harmless on a compacted
        topic, and needed after a restart)."""
        namespace, name, rv = object_ref(obj)
        if not name:
            return None
        return Change(self.spec.kind, namespace, name, rv, None)

    def event(self, type_: str, obj: Mapping[str, Any]) -> Change | None:
        """The change for a watch event (ADDED, MODIFIED, DELETED); None for anything else."""
        if type_ in ("ADDED", "MODIFIED"):
            return self.upsert(obj)
        if type_ == "DELETED":
            return self.delete(obj)
        return None

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
            self.published[key] = content_digest(change.object)
