"""The Kubernetes adapter: list+watch of the kinds ebb reads (``watch``), the pure trimming of
objects for ``ebb.cluster.objects`` (``trim``) and the pure list/event → change logic (``reflector``)."""

from ebb.adapters.backoff import Backoff
from ebb.adapters.kube.kinds import KINDS, KindSpec, kinds_named
from ebb.adapters.kube.reflector import Change, KindState
from ebb.adapters.kube.trim import content_digest, trim
from ebb.adapters.kube.watch import Gone, KindMissing, KubeWatcher, WatchError, split_lines

__all__ = [
    "KINDS",
    "Backoff",
    "Change",
    "Gone",
    "KindMissing",
    "KindSpec",
    "KindState",
    "KubeWatcher",
    "WatchError",
    "content_digest",
    "kinds_named",
    "split_lines",
    "trim",
]
