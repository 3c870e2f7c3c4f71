"""The planner's Prometheus metrics: Karpenter v1.14's voluntary-disruption metrics under their own names with
``ebb_`` for ``karpenter_`` (sigs.k8s.io/karpenter pkg/controllers/disruption/metrics.go), with Karpenter's
labels and label values, so dashboards and alerts written for Karpenter read ebb by changing the prefix.

- ``ebb_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`` and
  ``ebb_voluntary_disruption_decisions_by_nodepool_total{nodepool,...}``: approved decisions (Karpenter counts
  a command once it is queued); ``decision`` is ``delete`` or ``replace``, ``reason`` Karpenter's reason in
  lowercase (``empty``, ``underutilized``, ``drifted``; ebb's ``expired`` too), ``consolidation_type`` ``empty``,
  ``single``, ``multi`` or ``""`` for drift and expiration. Interruptions are not voluntary disruptions and
  are not counted here (the executor's ``ebb_nodeclaims_disrupted_total{reason="interrupted"}`` counts them).
- ``ebb_voluntary_disruption_failed_validations_total{consolidation_type}``: candidates of a decision that
  failed validation (its recomputation after the validation delay, or the budget ledger), one per node as
  Karpenter counts one per candidate.
- ``ebb_voluntary_disruption_eligible_nodes{reason}`` (lowercase reason), as of the last pass.
- ``ebb_nodepools_allowed_disruptions{nodepool,reason}`` and ``ebb_nodepools_nodes_consuming_budgets`` (the
  reason as Karpenter writes it there: ``Empty``, ``Underutilized``, ``Drifted``; ebb's ``Expired``), as of
  the last pass: as Karpenter's, the budget's number of nodes before the disrupting ones are taken off (the
  pool's node count when no budget applies, where Karpenter shows MaxInt32), and the nodes counted against it
  (deleting, being disrupted, NotReady). What may still be disrupted now is the difference.
- ``ebb_nodepools_demand_window_peak{nodepool,resource_type}`` and ``ebb_nodepools_demand_window_capacity`` (ebb's
  own, no Karpenter counterpart; ``resource_type`` ``cpu`` in cores or ``memory`` in bytes, as Karpenter's
  ``karpenter_nodepools_usage``), for each NodePool with a ``demandWindow``, as of the last pass: the peak of what
  its pods requested within the window, and what its nodes hold for pods. Empty and Underutilized disruptions
  keep the second at least at the first.
- ``ebb_consolidation_moves_total{decision,nodepool,policy}`` and ``ebb_consolidation_score`` (Karpenter v1.14's, for
  ``consolidationPolicy: Balanced``): each consolidation move a computed pass made (``approved``, every policy) or
  a Balanced NodePool refused (``rejected``), per NodePool of its nodes and with that NodePool's policy; the
  histogram, with Karpenter's buckets, has the Balanced NodePools' scores (a move passes at 0.5). A single-node
  move is counted per candidate scored, a multi-node one once per pass (its command, or the last set refused).
- ``ebb_conflicts{kind,nodepool}`` (ebb's own): the conflicts with Karpenter the last computed pass found
  (``ebb.core.conflicts``), per kind and NodePool (``""`` for a conflict that names none); a series goes away when
  its conflicts are fixed.
- ``ebb_voluntary_disruption_decision_evaluation_duration_seconds{reason,consolidation_type}`` with Karpenter's
  buckets: Karpenter times each method; ebb's pass evaluates every method at once, so one observation per
  pass with both labels empty.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ebb.core.balanced import Move
from ebb.core.conflicts import Conflict

#: Karpenter's consolidation_type label per method ("" for the methods that are not consolidation)
CONSOLIDATION_TYPES = {
    "emptiness": "empty",
    "single-node-consolidation": "single",
    "multi-node-consolidation": "multi",
}

#: sigs.k8s.io/karpenter pkg/metrics DurationBuckets (controller-runtime's, and up to 600 s)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
                    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
                    120, 150, 300, 450, 600)


#: Karpenter's buckets of karpenter_consolidation_score (a move passes at 0.5)
SCORE_BUCKETS = (0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0)


def consolidation_type(method: str) -> str:
    return CONSOLIDATION_TYPES.get(method, "")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.decisions = Counter(
            "ebb_voluntary_disruption_decisions_total",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation "
            "type.",
            ["decision", "reason", "consolidation_type"], registry=self.registry)
        self.decisions_by_nodepool = Counter(
            "ebb_voluntary_disruption_decisions_by_nodepool_total",
            "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, "
            "reason, and consolidation type.",
            ["nodepool", "decision", "reason", "consolidation_type"], registry=self.registry)
        self.failed_validations = Counter(
            "ebb_voluntary_disruption_failed_validations_total",
            "Number of candidates that were selected for disruption but failed validation. Labeled by "
            "consolidation type.",
            ["consolidation_type"], registry=self.registry)
        self.eligible_nodes = Gauge(
            "ebb_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by ebb, as of the last pass. Labeled by disruption reason.",
            ["reason"], registry=self.registry)
        self.allowed_disruptions = Gauge(
            "ebb_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time, as "
            "of the last pass. Labeled by NodePool and reason.",
            ["nodepool", "reason"], registry=self.registry)
        self.nodes_consuming_budgets = Gauge(
            "ebb_nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time, as of the last pass. "
            "Labeled by NodePool and reason.",
            ["nodepool", "reason"], registry=self.registry)
        self.demand_peak = Gauge(
            "ebb_nodepools_demand_window_peak",
            "The peak of what a NodePool's pods requested within its demandWindow, as of the last pass (cpu in "
            "cores, memory in bytes). Labeled by NodePool and resource type.",
            ["nodepool", "resource_type"], registry=self.registry)
        self.demand_capacity = Gauge(
            "ebb_nodepools_demand_window_capacity",
            "What the nodes of a NodePool with a demandWindow hold for pods (allocatable less DaemonSet and mirror "
            "pods; cpu in cores, memory in bytes), as of the last pass. Labeled by NodePool and resource type.",
            ["nodepool", "resource_type"], registry=self.registry)
        self.evaluation_duration = Histogram(
            "ebb_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds: one planning pass (snapshot, "
            "holds, every method). Labeled by reason and consolidation type (both empty: a pass evaluates all).",
            ["reason", "consolidation_type"], registry=self.registry, buckets=DURATION_BUCKETS)
        self.consolidation_moves = Counter(
            "ebb_consolidation_moves_total",
            "Number of consolidation moves a pass made or, under consolidationPolicy Balanced, refused. Labeled by "
            "decision (approved, rejected), NodePool, and policy.",
            ["decision", "nodepool", "policy"], registry=self.registry)
        self.conflicts = Gauge(
            "ebb_conflicts",
            "Conflicts with Karpenter found by the last pass (a NodePool Karpenter still disrupts, NodeClaims that "
            "keep an expiry, NodeClaims without the karpenter provider, a DisruptionPolicy without its NodePool, "
            "Karpenter's interruption queue). Labeled by kind and NodePool (empty: none).",
            ["kind", "nodepool"], registry=self.registry)
        self._conflict_labels: set[tuple[str, str]] = set()
        self.consolidation_score = Histogram(
            "ebb_consolidation_score",
            "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            ["decision", "nodepool", "policy"], registry=self.registry, buckets=SCORE_BUCKETS)

    def moved(self, moves: Iterable[Move]) -> None:
        """A computed pass's consolidation moves: each counted, and its Balanced score observed."""
        for move in moves:
            labels = {"decision": "approved" if move.approved else "rejected", "nodepool": move.pool,
                      "policy": move.policy}
            self.consolidation_moves.labels(**labels).inc()
            if move.score is not None:
                self.consolidation_score.labels(**labels).observe(move.score)

    def decided(self, action: str, reason: str, method: str, nodepools: Iterable[str]) -> None:
        """An approved decision: ``action`` (delete, replace) of ``reason`` by ``method`` over ``nodepools``."""
        labels = {"decision": action, "reason": reason.lower(), "consolidation_type": consolidation_type(method)}
        self.decisions.labels(**labels).inc()
        for pool in sorted(set(nodepools)):
            self.decisions_by_nodepool.labels(nodepool=pool, **labels).inc()

    def failed_validation(self, method: str, candidates: int) -> None:
        """A decision of ``candidates`` nodes failed validation (rejected)."""
        self.failed_validations.labels(consolidation_type=consolidation_type(method)).inc(candidates)

    def demand_window(self, pool: str, peak: tuple[int, int], capacity: tuple[int, int]) -> None:
        """A NodePool's demandWindow peak and capacity ((cpu millicores, memory bytes) each) as of a pass."""
        for gauge, (millicores, memory) in ((self.demand_peak, peak), (self.demand_capacity, capacity)):
            gauge.labels(nodepool=pool, resource_type="cpu").set(millicores / 1000)
            gauge.labels(nodepool=pool, resource_type="memory").set(memory)

    def found_conflicts(self, found: Iterable[Conflict]) -> None:
        """The conflicts of a pass: each (kind, NodePool) counted, the series of those gone removed."""
        counts: dict[tuple[str, str], int] = {}
        for conflict in found:
            key = (str(conflict.kind), conflict.nodepool or "")
            counts[key] = counts.get(key, 0) + 1
        for kind, pool in self._conflict_labels - set(counts):
            self.conflicts.remove(kind, pool)
        for (kind, pool), count in counts.items():
            self.conflicts.labels(kind=kind, nodepool=pool).set(count)
        self._conflict_labels = set(counts)

    def evaluated(self, seconds: float) -> None:
        self.evaluation_duration.labels(reason="", consolidation_type="").observe(seconds)
