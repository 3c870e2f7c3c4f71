"""Trimming: what of a Kubernetes object goes on ``ebb.cluster.objects``. Pure functions, no I/O.

Kept: ``apiVersion``, ``kind``; from ``metadata`` the name, namespace, labels, annotations (without
``kubectl.kubernetes.io/last-applied-configuration``), ownerReferences, creationTimestamp,
deletionTimestamp, uid and resourceVersion; the whole ``spec``; the top-level fields of kinds that have no
``spec`` (a StorageClass's ``provisioner``, ``volumeBindingMode`` and ``allowedTopologies``: the topology an
unbound claim of the class may be provisioned in); and only the status fields ebb reads
(``ebb.core.snapshot.parse_documents``):

- Node: ``capacity``, ``allocatable``, ``conditions`` (type, status, reason, lastTransitionTime)
- Pod: ``phase``, ``conditions`` (the same four fields), ``startTime``; of ``containerStatuses`` and
  ``initContainerStatuses`` the entries with ``resources``, each its ``name``, ``resources`` and
  ``allocatedResources`` (what a container holds during an in-place resize, which its pod's requests count)
- NodeClaim: ``conditions`` (the same four fields), ``nodeName``, ``providerID``, ``lastPodEventTime`` (when
  Karpenter last saw a pod bound to or removed from the node; consolidateAfter counts from it), ``capacity`` and
  ``allocatable`` (what the cloud launched: a launching claim counts against its NodePool's limits, and an
  uninitialized Node takes them where it reports nothing)
- PersistentVolumeClaim: ``phase`` (Pending, Bound, Lost)
- NodePool, PodDisruptionBudget, DaemonSet, PersistentVolume, StorageClass, CSINode (its ``spec.drivers``, with
  each driver's ``allocatable.count``, is what Karpenter reads; it has no status): no status
- Namespace: only its name, labels (what a pod affinity term's ``namespaceSelector`` matches), uid,
  resourceVersion and creation and deletion times; no annotations, spec or status, so that nothing else about a
  namespace wakes the planner

Dropped: ``managedFields``, ``generation``, ``finalizers``, every other status field; from conditions the
heartbeat times and messages, which change on every kubelet heartbeat without changing anything ebb
decides on (so an unchanged trimmed object can be recognised and not published again).

``trim(..., copy=False)`` shares the kept values with the input instead of deep-copying them: for the watcher,
whose objects are freshly decoded JSON it drops after trimming (the copy was a third of its CPU per event).
The digest is orjson's sorted encoding (a seventh of ``json.dumps``'s cost), the stdlib's for what orjson
cannot encode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"

METADATA_FIELDS: Final = (
    "name",
    "namespace",
    "labels",
    "annotations",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
    "uid",
    "resourceVersion",
)
#: the metadata fields kept of kinds that keep fewer than `METADATA_FIELDS`
METADATA_FIELDS_OF: Final[Mapping[str, tuple[str, ...]]] = {
    "Namespace": ("name", "labels", "creationTimestamp", "deletionTimestamp", "uid", "resourceVersion"),
}
#: kinds whose spec is not kept (a Namespace's is its finalizers)
SPECLESS_KINDS: Final = frozenset({"Namespace"})
#: status fields kept, by kind (kinds not listed keep no status)
STATUS_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "Node": ("capacity", "allocatable", "conditions"),
    "Pod": ("phase", "conditions", "startTime", "containerStatuses", "initContainerStatuses"),
    "NodeClaim": ("conditions", "nodeName", "providerID", "lastPodEventTime", "capacity", "allocatable"),
    "PersistentVolumeClaim": ("phase",),
}
#: top-level fields kept, by kind, besides apiVersion, kind, metadata, spec and status (kinds without a spec)
TOP_LEVEL_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "StorageClass": ("provisioner", "volumeBindingMode", "allowedTopologies"),
}
CONDITION_FIELDS: Final = ("type", "status", "reason", "lastTransitionTime")
#: the fields kept of a Pod's container status (only of those with ``resources``)
CONTAINER_STATUS_FIELDS: Final = ("name", "resources", "allocatedResources")


def trim(obj: Mapping[str, Any], *, kind: str | None = None, api_version: str | None = None,
         copy: bool = True) -> dict[str, Any]:
    """The trimmed, kubectl-shaped copy of ``obj`` (camelCase keys, as the API serves it). ``kind``
    and ``apiVersion`` are set from the arguments when given (list items carry neither). ``copy=False``: the
    kept values are ``obj``'s own (decoded JSON that the caller does not change afterwards)."""
    keep = _deep_copy if copy else _same
    kind = kind or str(obj.get("kind") or "")
    out: dict[str, Any] = {
        "apiVersion": api_version or obj.get("apiVersion"),
        "kind": kind,
        "metadata": trim_metadata(obj.get("metadata") or {}, copy=copy, fields=METADATA_FIELDS_OF.get(kind)),
    }
    if out["apiVersion"] is None:
        del out["apiVersion"]
    spec = obj.get("spec")
    if spec is not None and kind not in SPECLESS_KINDS:
        out["spec"] = keep(spec)
    for name in TOP_LEVEL_FIELDS.get(kind, ()):
        value = obj.get(name)
        if value is not None:
            out[name] = keep(value)
    status = obj.get("status")
    fields = STATUS_FIELDS.get(kind, ())
    if isinstance(status, Mapping) and fields:
        kept: dict[str, Any] = {}
        for name in fields:
            value = status.get(name)
            if value is None:
                continue
            if name == "conditions":
                value = _conditions(value, keep)
            elif name in ("containerStatuses", "initContainerStatuses"):
                value = _container_statuses(value, keep)
                if not value:
                    continue
            else:
                value = keep(value)
            kept[name] = value
        if kept:
            out["status"] = kept
    return out


def trim_metadata(metadata: Mapping[str, Any], *, copy: bool = True,
                  fields: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The kept ``metadata``: `METADATA_FIELDS`, or ``fields`` when given (a kind's own, `METADATA_FIELDS_OF`)."""
    keep = _deep_copy if copy else _same
    out: dict[str, Any] = {}
    for name in fields or METADATA_FIELDS:
        value = metadata.get(name)
        if value is None:
            continue
        if name == "annotations" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k != LAST_APPLIED}
            if not value:
                continue
        out[name] = keep(value)
    return out


def _conditions(value: Any, keep: Callable[[Any], Any]) -> Any:
    if not isinstance(value, list):
        return keep(value)
    return [
        {k: c[k] for k in CONDITION_FIELDS if c.get(k) is not None} if isinstance(c, Mapping) else keep(c)
        for c in value
    ]


def _container_statuses(value: Any, keep: Callable[[Any], Any]) -> Any:
    """The container statuses that have ``resources``, each with `CONTAINER_STATUS_FIELDS` only: the others change
    with every restart and probe, and ebb reads none of them."""
    if not isinstance(value, list):
        return keep(value)
    return [
        {k: keep(c[k]) for k in CONTAINER_STATUS_FIELDS if c.get(k) is not None} if isinstance(c, Mapping) else keep(c)
        for c in value if not isinstance(c, Mapping) or c.get("resources") is not None
    ]


#: the types of decoded JSON's leaves, returned as they are
_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _same(value: Any) -> Any:
    return value


def _deep_copy(value: Any) -> Any:
    """A deep copy with string keys. Decoded JSON (dicts, lists and leaves) is checked by exact type first: an
    ``isinstance`` against the ``Mapping`` ABC for every leaf was most of the watcher's trimming time."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): _deep_copy(v) for k, v in value.items()}
    if kind is list:
        return [_deep_copy(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_deep_copy(v) for v in value]
    return value


def object_ref(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, resourceVersion) of an object; namespace empty for cluster-scoped ones."""
    metadata = obj.get("metadata") or {}
    return (
        str(metadata.get("namespace") or ""),
        str(metadata.get("name") or ""),
        str(metadata.get("resourceVersion") or ""),
    )


def content_digest(trimmed: Mapping[str, Any]) -> str:
    """A digest of a trimmed object that ignores its resourceVersion: equal digests mean nothing ebb
    reads has changed."""
    metadata = {k: v for k, v in (trimmed.get("metadata") or {}).items() if k != "resourceVersion"}
    body = {**trimmed, "metadata": metadata}
    try:
        encoded = orjson.dumps(body, option=orjson.OPT_SORT_KEYS, default=str)
    except orjson.JSONEncodeError:  # e.g. a non-string key or an integer beyond 64 bits
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()
