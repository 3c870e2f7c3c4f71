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
- ``ebb_cluster_state_synced`` (Karpenter's ``karpenter_cluster_state_synced``): 1 once the planner read
  ``ebb.cluster.objects`` to its end and the cluster-watcher has said it published a first list of every kind it
  watches (``KindSynced``: the view is the watcher's whole cluster), and while the snapshot it builds from it is
  valid, else 0 (Karpenter disrupts nothing while its cluster state is not synced; ebb's planner computes no pass
  and approves nothing then). ``ebb_cluster_state_node_count``: the nodes of the last computed pass.
- ``ebb_planner_leader``: 1 while this replica holds the Lease (it plans and approves), else 0; the sum over the
  replicas is 1 in a healthy cluster.
- Karpenter's cluster-state gauges, from the last computed pass's snapshot, built when scraped
  (``ClusterStateCollector``): ``ebb_nodes_allocatable``, ``ebb_nodes_total_pod_requests`` (DaemonSet pods
  included, as Karpenter's) and ``ebb_nodes_total_daemon_requests`` per node and ``resource_type`` (cpu in cores,
  memory and ephemeral_storage in bytes, pods), with Karpenter's node labels (``node_name``, ``nodepool``,
  ``zone``, ``region``, ``instance_type``, ``arch``, ``os``, ``capacity_type``, ``windows_build``, ``phase``,
  ``managed``); ``ebb_nodepools_usage`` (the capacity of a NodePool's nodes, and ``nodes``: their count, as
  Karpenter's ``status.resources``) and ``ebb_nodepools_limit`` (its ``spec.limits``) per ``nodepool`` and
  ``resource_type``; ``ebb_pods_state`` (1 per pod, with Karpenter's labels: ``name``, ``namespace``, ``owner``,
  ``node``, ``nodepool``, ``zone``, ``arch``, ``capacity_type``, ``instance_type``, ``phase``, ``scheduled``,
  ``ready``, ``managed``). Built at the scrape, they cost a pass nothing.
- ``ebb_pods_startup_duration_seconds`` (Karpenter's Summary, quantiles 0, 0.5, 0.9, 0.99, 1 over 10 minutes): for
  each pod this planner saw Pending on ``ebb.cluster.objects`` and then Ready, the time from its creation to its
  Ready condition's transition (``pod_changed``); a pod that ends without being Ready is not counted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ebb.adapters.clock import Clock
from ebb.adapters.metrics import WindowedSummary, register_build_info, scrape_monotonic
from ebb.core.balanced import Move
from ebb.core.conflicts import Conflict
from ebb.core.model import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_ZONE,
    Node,
    Pod,
    Snapshot,
)

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


#: Karpenter's well-known node labels (sigs.k8s.io/karpenter pkg/apis/v1 WellKnownLabels) and their metric labels
NODE_LABELS = {
    LABEL_NODEPOOL: "nodepool",
    LABEL_ZONE: "zone",
    "topology.kubernetes.io/region": "region",
    LABEL_INSTANCE_TYPE: "instance_type",
    LABEL_ARCH: "arch",
    LABEL_OS: "os",
    LABEL_CAPACITY_TYPE: "capacity_type",
    "node.kubernetes.io/windows-build": "windows_build",
}
NODE_METRIC_LABELS = ["node_name", *NODE_LABELS.values(), "phase", "managed", "resource_type"]
POD_METRIC_LABELS = ["name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type",
                     "instance_type", "phase", "scheduled", "ready", "managed"]
#: the API group of a pod's owner kind, for Karpenter's ``owner`` label (a self link)
OWNER_API_VERSIONS = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
                      "Deployment": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}


def resource_type(name: str) -> str:
    """Karpenter's ``resource_type`` label of a resource name: ``ephemeral-storage`` → ``ephemeral_storage``."""
    return name.lower().replace("-", "_")


def resource_value(name: str, amount: int) -> float:
    """An amount in Karpenter's metric unit: cpu in cores (ebb keeps millicores), the rest as they are."""
    return amount / 1000 if name == "cpu" else float(amount)


def _node_labels(node: Node) -> dict[str, str]:
    labels = {metric: node.labels.get(key, "") for key, metric in NODE_LABELS.items()}
    labels["node_name"] = node.name
    labels["phase"] = ""  # Node.status.phase: long deprecated, empty on every current kubelet's Node
    labels["managed"] = "true" if node.nodepool else "false"
    return labels


def _add(totals: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        totals[name] = totals.get(name, 0) + amount


class ClusterStateCollector(Collector):
    """Karpenter's node, NodePool and pod gauges (``ebb_nodes_allocatable``, ``ebb_nodes_total_pod_requests``,
    ``ebb_nodes_total_daemon_requests``, ``ebb_nodepools_usage``, ``ebb_nodepools_limit``, ``ebb_pods_state``),
    built at each scrape from the snapshot of the last computed pass (none before the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None

    def observe(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def _families(self) -> dict[str, GaugeMetricFamily]:
        def gauge(name: str, documentation: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, documentation, labels=labels)

        return {
            "allocatable": gauge("ebb_nodes_allocatable", "Node allocatable are the resources allocatable by nodes, "
                                 "as of the last pass.", NODE_METRIC_LABELS),
            "pod_requests": gauge("ebb_nodes_total_pod_requests", "Node total pod requests are the resources "
                                  "requested by pods bound to nodes, including the DaemonSet pods, as of the last "
                                  "pass.", NODE_METRIC_LABELS),
            "daemon_requests": gauge("ebb_nodes_total_daemon_requests", "Node total daemon requests are the resource "
                                     "requested by DaemonSet pods bound to nodes, as of the last pass.",
                                     NODE_METRIC_LABELS),
            "usage": gauge("ebb_nodepools_usage", "The amount of resources that have been provisioned for a "
                           "nodepool, as of the last pass. Labeled by nodepool name and resource type.",
                           ["resource_type", "nodepool"]),
            "limit": gauge("ebb_nodepools_limit", "Limits specified on the nodepool that restrict the quantity of "
                           "resources provisioned. Labeled by nodepool name and resource type.",
                           ["resource_type", "nodepool"]),
            "pods": gauge("ebb_pods_state", "Pod state is the current state of pods, as of the last pass, labeled "
                          "by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity "
                          "type, instance type, pod phase, and pod readiness.", POD_METRIC_LABELS),
        }

    def describe(self) -> Iterable[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        with self._lock:
            snapshot = self._snapshot
        if snapshot is not None:
            self._fill(snapshot, families)
        return list(families.values())

    def _fill(self, snapshot: Snapshot, families: dict[str, GaugeMetricFamily]) -> None:
        nodes = {node.name: node for node in snapshot.nodes}
        requests: dict[str, dict[str, int]] = {name: {} for name in nodes}
        daemon: dict[str, dict[str, int]] = {name: {} for name in nodes}
        for pod in snapshot.pods:
            node = nodes.get(pod.node_name or "")
            families["pods"].add_metric(_pod_labels(pod, node), 1.0)
            if node is None or pod.is_terminal:
                continue
            _add(requests[node.name], pod.spec.requests)
            if pod.is_daemonset:
                _add(daemon[node.name], pod.spec.requests)
        usage: dict[str, dict[str, int]] = {}
        for node in snapshot.nodes:
            labels = _node_labels(node)
            for family, amounts in (("allocatable", node.allocatable), ("pod_requests", requests[node.name]),
                                    ("daemon_requests", daemon[node.name])):
                for name, amount in sorted(amounts.items()):
                    families[family].add_metric([labels[k] for k in NODE_METRIC_LABELS[:-1]] + [resource_type(name)],
                                                resource_value(name, amount))
            if node.nodepool:
                pool = usage.setdefault(node.nodepool, {"nodes": 0})
                _add(pool, node.capacity)
                pool["nodes"] += 1
        for nodepool in snapshot.nodepools:
            for name, amount in sorted(usage.get(nodepool.name, {"nodes": 0}).items()):
                families["usage"].add_metric([resource_type(name), nodepool.name], resource_value(name, amount))
            for name, amount in sorted(nodepool.limits.items()):
                families["limit"].add_metric([resource_type(name), nodepool.name], resource_value(name, amount))



class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        register_build_info(self.registry)
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

        self.synced = Gauge(
            "ebb_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise: ebb.cluster.objects was read to its end and the "
            "snapshot built from it is valid.", registry=self.registry)
        self.node_count = Gauge("ebb_cluster_state_node_count", "Current count of nodes in cluster state, as of the "
                                "last pass.", registry=self.registry)
        self.leader = Gauge("ebb_planner_leader", "1 while this planner replica holds the Lease (it plans and "
                            "approves), else 0.", registry=self.registry)
        self.cluster_state = ClusterStateCollector()
        self.registry.register(self.cluster_state)
        self.clock: Clock = Clock()
        self.pod_startup = WindowedSummary(
            "ebb_pods_startup_duration_seconds", "The time from pod creation until the pod is running (its Ready "
            "condition), for pods seen Pending.", [], clock=self._monotonic, registry=self.registry)
        self._pending_pods: set[tuple[str, str]] = set()

    def timed_by(self, clock: Clock) -> None:
        """Time the summaries' windows with the planner's clock."""
        self.clock = clock

    def _monotonic(self) -> float:
        return scrape_monotonic(self.clock)()

    def pod_changed(self, namespace: str, name: str, pod: Mapping[str, Any] | None) -> None:
        """A Pod as ``ebb.cluster.objects`` has it now (None: deleted): one seen Pending and now Ready is observed in
        ``ebb_pods_startup_duration_seconds``, as Karpenter's pod metrics controller does."""
        key = (namespace, name)
        if pod is None:
            self._pending_pods.discard(key)
            return
        # an object as the topic has it, which the parser has not checked: any field may be of another shape
        status = pod.get("status")
        status = status if isinstance(status, Mapping) else {}
        phase = status.get("phase")
        if phase == "Pending":
            self._pending_pods.add(key)
            return
        if key not in self._pending_pods:
            return
        conditions = status.get("conditions")
        ready = next((c for c in (conditions if isinstance(conditions, list) else ())
                      if isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"), None)
        if ready is not None:
            self._pending_pods.discard(key)
            metadata = pod.get("metadata")
            created = _time(metadata.get("creationTimestamp")) if isinstance(metadata, Mapping) else None
            became = _time(ready.get("lastTransitionTime"))
            if became is not None and created is not None and (became.tzinfo is None) == (created.tzinfo is None):
                self.pod_startup.observe({}, (became - created).total_seconds())
        elif phase in ("Succeeded", "Failed"):
            self._pending_pods.discard(key)

    def observed(self, snapshot: Snapshot, nodes: int) -> None:
        """A computed pass's snapshot: the cluster-state gauges are built from it when scraped."""
        self.node_count.set(nodes)
        self.cluster_state.observe(snapshot)

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


def _time(value: object) -> datetime | None:
    """An RFC 3339 time of a Kubernetes object (None: absent or unreadable)."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _pod_labels(pod: Pod, node: Node | None) -> list[str]:
    """Karpenter's ``karpenter_pods_state`` labels of ``pod`` on ``node`` (in ``POD_METRIC_LABELS`` order)."""
    owner = ""
    if pod.owner_kind and pod.owner_name:
        owner = (f"/apis/{OWNER_API_VERSIONS.get(pod.owner_kind, 'v1')}/namespaces/{pod.namespace}/"
                 f"{pod.owner_kind.lower()}s/{pod.owner_name}")
    on = node.labels if node is not None else {}
    return [pod.name, pod.namespace, owner, pod.node_name or "", on.get(LABEL_NODEPOOL, ""), on.get(LABEL_ZONE, ""),
            on.get(LABEL_ARCH, ""), on.get(LABEL_CAPACITY_TYPE, ""), on.get(LABEL_INSTANCE_TYPE, ""), pod.phase,
            "true" if pod.node_name else "false", "true" if pod.ready else "false",
            "true" if on.get(LABEL_NODEPOOL) else "false"]
