"""Prometheus metrics of the termination-executor, named like Karpenter's with an ``ebb_`` prefix."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.eviction_requests = Counter(
            "ebb_pods_eviction_requests_total",
            "Eviction API requests by HTTP status code (200 evicted, 429 refused by a PodDisruptionBudget, "
            "404 already gone, others refused)",
            ["code"], registry=self.registry)
        self.termination_duration = Histogram(
            "ebb_nodes_termination_duration_seconds",
            "Time from the disrupted taint to the node's deletion, per node of a succeeded command",
            ["nodepool"], registry=self.registry,
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600))
        self.commands = Counter(
            "ebb_disruption_commands_total",
            "Commands executed, by method and outcome (succeeded, rolled_back, failed)",
            ["method", "outcome"], registry=self.registry)

    def eviction(self, code: str) -> None:
        self.eviction_requests.labels(code=code).inc()
