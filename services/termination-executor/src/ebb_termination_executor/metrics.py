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
  (``underutilized``, ``empty``, ``drifted``, ``expired``), and for an interruption its message's kind as
  Karpenter's AWS provider counts it (``spot_interrupted``, ``capacity_reservation_interrupted``,
  ``scheduled_change``, ``instance_stopped``, ``instance_terminated``: ``DisruptionCommand.message_kind``). With
  the ``kwok``, ``simulated`` and ``none`` providers the Node stands for the NodeClaim.
- ``ebb_nodes_termination_duration_seconds{nodepool}``: from the command's start (tainting) to the node's
  removal, a Summary with Karpenter's quantiles (0, 0.5, 0.9, 0.99, 1) over the last 10 minutes, as Karpenter's
  (from its deletion request) and its performance dashboard reads it (``{quantile="0.5"}``); Python's client
  computes no quantiles, so it is ``ebb.adapters.metrics.WindowedSummary``.
- ``ebb_nodeclaims_termination_duration_seconds{nodepool}``: the same durations as a histogram with Karpenter's
  buckets of that metric (1 s to 2048 s, doubling), which can be aggregated across replicas and over any range.
- ``ebb_nodes_created_total{nodepool,zone}``: replacements ebb launched (Karpenter counts the nodes it creates;
  next to Karpenter, Karpenter counts these too); ``zone`` when the replacement may go to one zone only.
- ``ebb_disruption_commands_total{method,outcome}``: ebb's own (Karpenter has no command outcome metric):
  commands executed, succeeded, rolled_back or failed.
- ``ebb_disruption_commands_executing`` and ``ebb_disruption_command_longest_running_seconds`` (ebb's own): the
  commands this executor is carrying out now, and how long the oldest of them has run (0: none), so a decision
  stuck in ``executing`` is seen (the ``EbbDecisionStuck`` alert).
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ebb.adapters.clock import Clock
from ebb.adapters.metrics import WindowedSummary, register_build_info, scrape_monotonic

#: Karpenter's buckets of karpenter_nodeclaims_termination_duration_seconds: 1 s to 2048 s, doubling
TERMINATION_BUCKETS = tuple(float(2 ** n) for n in range(12))


def snake_case(reason: str) -> str:
    """Karpenter's ``pretty.ToSnakeCase``: ``Underutilized`` → ``underutilized``, ``SpotInterrupted`` →
    ``spot_interrupted``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", reason).lower()


class Metrics:
    """The executor's metrics, timed by the executor's clock (``timed_by``): the summary's window and how long a
    command has run (the system's clock until then)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        register_build_info(self.registry)
        self.clock: Clock = Clock()
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
        self.termination_summary = WindowedSummary(
            "ebb_nodes_termination_duration_seconds",
            "The time taken from the disruption taint to the node's removal, per node of a succeeded command",
            ["nodepool"], clock=self._monotonic, registry=self.registry)
        self.termination_duration = Histogram(
            "ebb_nodeclaims_termination_duration_seconds",
            "Duration of a node's termination in seconds, from the disruption taint to its removal",
            ["nodepool"], registry=self.registry, buckets=TERMINATION_BUCKETS)
        self.nodes_created = Counter(
            "ebb_nodes_created_total",
            "Number of nodes created in total by ebb (replacements). Labeled by owning nodepool and zone.",
            ["nodepool", "zone"], registry=self.registry)
        self._executing: dict[str, datetime] = {}
        self._executing_lock = threading.Lock()
        self.executing = Gauge("ebb_disruption_commands_executing", "Commands this executor is carrying out now",
                               registry=self.registry)
        self.executing.set_function(lambda: float(len(self._executing)))
        self.longest_running = Gauge(
            "ebb_disruption_command_longest_running_seconds",
            "How long the oldest command this executor is carrying out has run (0: none)", registry=self.registry)
        self.longest_running.set_function(self._longest_running)
        self.commands = Counter(
            "ebb_disruption_commands_total",
            "Commands executed, by method and outcome (succeeded, rolled_back, failed)",
            ["method", "outcome"], registry=self.registry)

    def timed_by(self, clock: Clock) -> None:
        self.clock = clock

    def _monotonic(self) -> float:
        return scrape_monotonic(self.clock)()

    def terminated(self, nodepool: str, seconds: float) -> None:
        """A node of a command was removed ``seconds`` after the command began."""
        self.termination_summary.observe({"nodepool": nodepool}, seconds)
        self.termination_duration.labels(nodepool=nodepool).observe(seconds)

    def started(self, decision_id: str, at: datetime) -> None:
        with self._executing_lock:
            self._executing[decision_id] = at

    def ended(self, decision_id: str) -> None:
        with self._executing_lock:
            self._executing.pop(decision_id, None)

    def _longest_running(self) -> float:
        with self._executing_lock:
            oldest = min(self._executing.values(), default=None)
        if oldest is None:
            return 0.0
        try:
            now = self.clock.now()
        except RuntimeError:  # a simulated clock off its loop: as ``_monotonic``
            now = datetime.now(UTC)
        return max((now - oldest).total_seconds(), 0.0)

    def eviction(self, code: str) -> None:
        self.eviction_requests.labels(code=code).inc()
