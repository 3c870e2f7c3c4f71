"""The cluster-watcher's Prometheus metrics (``/metrics``, beside ``/readyz``), so an operator can see what it
publishes and which kinds it cannot watch without reading its log:

- ``ebb_cluster_watcher_changes_published_total{kind, change}``: the changes acknowledged by Kafka on
  ``ebb.cluster.objects``, ``change`` ``upsert`` or ``delete`` (a tombstone);
- ``ebb_cluster_watcher_changes_rejected_total{kind}``: changes the contract cannot carry, skipped (never seen
  from a real apiserver);
- ``ebb_cluster_watcher_kind_failing{kind}``: 1 while the kind's list/watch fails (in backoff: what is
  published of it may be stale, and the service is not ready), else 0;
- ``ebb_cluster_watcher_list_watch_failures_total{kind}``: the failed lists and watches.

Karpenter has no watcher of its own (it reads informers in process), so these have no Karpenter names to follow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from ebb.adapters.metrics import register_build_info


class Metrics:
    """The watcher's metrics on a registry of their own (served with the readiness gauges)."""

    def __init__(self, kinds: Iterable[str] = (), registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        register_build_info(self.registry)
        self.published = Counter("ebb_cluster_watcher_changes_published", "Changes published on "
                                 "ebb.cluster.objects and acknowledged, by kind and change (upsert, delete)",
                                 ["kind", "change"], registry=self.registry)
        self.rejected = Counter("ebb_cluster_watcher_changes_rejected", "Changes the contract cannot carry, "
                                "skipped", ["kind"], registry=self.registry)
        self.failing = Gauge("ebb_cluster_watcher_kind_failing", "1 while the kind's list/watch fails (in "
                             "backoff), else 0", ["kind"], registry=self.registry)
        self.failures = Counter("ebb_cluster_watcher_list_watch_failures", "Failed lists and watches, by kind",
                                ["kind"], registry=self.registry)
        self._failing: dict[str, str] = {}
        for kind in kinds:
            self.failing.labels(kind).set(0)

    def kinds_failing(self, failing: Mapping[str, str]) -> None:
        """The kinds failing now (``KubeWatcher.on_failing``): each new failure is counted."""
        for kind, why in failing.items():
            if self._failing.get(kind) != why:
                self.failures.labels(kind).inc()
            self.failing.labels(kind).set(1)
        for kind in set(self._failing) - set(failing):
            self.failing.labels(kind).set(0)
        self._failing = dict(failing)
