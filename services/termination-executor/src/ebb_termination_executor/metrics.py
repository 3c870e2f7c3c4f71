"""The termination-executor's Prometheus metrics: Karpenter v1.14's termination metrics under their own names
with ``ebb_`` for ``karpenter_`` (sigs.k8s.io/karpenter pkg/metrics, pkg/controllers/node/termination and its
terminator), with Karpenter's labels, so dashboards written for Karpenter read ebb by changing the prefix.

- ``ebb_pods_eviction_requests_total{code}``: every Eviction API request by HTTP status code.
- ``ebb_pods_drained_total{reason}``: pods evicted (200) by a drain; ``reason`` is the decision's reason as
  Karpenter writes the NodeClaim's disruption reason (``Underutilized``, ``Empty``, ``Drifted``; ebb's
  ``Expired`` and ``Interrupted`` too, where Karpenter, which has no disruption reason for those, writes
  ``Forceful Termination``).
- ``ebb_nodes_drained_total{nodepool}``: nodes whose drain finished.
- ``ebb_nodes_terminated_total{nodepool,zone}``: nodes ebb asked to remove that are gone.
- ``ebb_nodeclaims_disrupted_total{reason,nodepool,capacity_type}``: nodes disrupted, once each when ebb asks
  for its removal (Karpenter: when the NodeClaim's deletion succeeded); ``reason`` in snake case as Karpenter's
  (``underutilized``, ``empty``, ``drifted``, ``expired``, ``interrupted``). With the ``kwok``, ``simulated``
  and ``none`` providers the Node stands for the NodeClaim.
- ``ebb_nodes_termination_duration_seconds{nodepool}``: from the command's start (tainting) to the node's
  removal. Karpenter's is a Summary (quantiles 0, 0.5, 0.9, 0.99, 1) from the deletion request; Python's
  prometheus_client computes no quantiles, so ebb's is a histogram.
- ``ebb_disruption_commands_total{method,outcome}``: ebb's own (Karpenter has no command outcome metric):
  commands executed, succeeded, rolled_back or failed.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram


def snake_case(reason: str) -> str:
    """Karpenter's ``pretty.ToSnakeCase``: ``Underutilized`` → ``underutilized``, ``SpotInterrupted`` →
    ``spot_interrupted``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", reason).lower()


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.eviction_requests = Counter(
            "ebb_pods_eviction_requests_total",
            "The total number of pod eviction requests made by ebb, labeled by response code (200 evicted, 429 "
            "refused by a PodDisruptionBudget, 404 already gone, others refused)",
            ["code"], registry=self.registry)
        self.pods_drained = Counter(
            "ebb_pods_drained_total",
            "The total number of pods drained during node termination by ebb, labeled by reason",
            ["reason"], registry=self.registry)
        self.nodes_drained = Counter(
            "ebb_nodes_drained_total", "The total number of nodes drained by ebb",
            ["nodepool"], registry=self.registry)
        self.nodes_terminated = Counter(
            "ebb_nodes_terminated_total",
            "Number of nodes terminated in total by ebb. Labeled by owning nodepool and zone.",
            ["nodepool", "zone"], registry=self.registry)
        self.nodeclaims_disrupted = Counter(
            "ebb_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by ebb. Labeled by reason the nodeclaim was disrupted, the "
            "owning nodepool and its capacity type.",
            ["reason", "nodepool", "capacity_type"], registry=self.registry)
        self.termination_duration = Histogram(
            "ebb_nodes_termination_duration_seconds",
            "The time taken from the disruption taint to the node's removal, per node of a succeeded command",
            ["nodepool"], registry=self.registry,
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600))
        self.commands = Counter(
            "ebb_disruption_commands_total",
            "Commands executed, by method and outcome (succeeded, rolled_back, failed)",
            ["method", "outcome"], registry=self.registry)

    def eviction(self, code: str) -> None:
        self.eviction_requests.labels(code=code).inc()
