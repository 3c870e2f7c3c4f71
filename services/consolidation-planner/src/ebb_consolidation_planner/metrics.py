"""Prometheus metrics, named like Karpenter's disruption metrics with an ``ebb_`` prefix."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Karpenter's consolidation_type label per method ("" for the methods that are not consolidation)
CONSOLIDATION_TYPES = {
    "emptiness": "empty",
    "single-node-consolidation": "single",
    "multi-node-consolidation": "multi",
}


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.decisions = Counter(
            "ebb_decisions_total",
            "Disruption decisions by outcome: decision is the action (delete, replace) of an approved "
            "command, or rejected",
            ["decision", "reason", "consolidation_type"], registry=self.registry)
        self.eligible_nodes = Gauge(
            "ebb_eligible_nodes", "Nodes that are candidates for the disruption reason's methods, as of the last pass",
            ["reason"], registry=self.registry)
        self.allowed_disruptions = Gauge(
            "ebb_nodepools_allowed_disruptions", "Disruptions the NodePool's budgets allow now, per reason",
            ["nodepool", "reason"], registry=self.registry)
        self.evaluation_duration = Histogram(
            "ebb_decision_evaluation_duration_seconds", "Time of one planning pass (snapshot, holds, engine)",
            registry=self.registry, buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))

    def decided(self, decision: str, reason: str, method: str) -> None:
        self.decisions.labels(decision=decision, reason=reason,
                              consolidation_type=CONSOLIDATION_TYPES.get(method, "")).inc()
