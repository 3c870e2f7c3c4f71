"""Kubernetes Events the planner emits, as values: which object, Normal or Warning, reason, message.

The reasons and messages are Karpenter's (sigs.k8s.io/karpenter pkg/events and
pkg/controllers/disruption/events; the interruption ones from karpenter-provider-aws), so ``kubectl get
events`` and alerting rules carry over:

- ``Unconsolidatable`` (Normal, on the Node and its NodeClaim): consolidation evaluated the node and cannot
  act on it; the message is the engine's reason. Karpenter's dedupe: one per object per 15 minutes.
- ``DisruptionBlocked`` (Normal, on the Node and its NodeClaim): no method may disrupt the node now
  (do-not-disrupt on the node or a pod, a PDB, not initialized, a budget, a hold or a stabilization window,
  an expired/drifted node whose pods have nowhere to go). Unlike Karpenter, a do-not-disrupt block is
  reported too: ebb's point is that no node is left unexplained. On a NodePool: ``No allowed disruptions
  for disruption reason <reason> due to blocking budget``, once a minute per pool and reason.
- ``ConsolidationCandidate`` / ``ConsolidationApproved`` / ``ConsolidationRejected`` (Normal, on every node
  of a decision and its NodeClaim) when a decision is proposed, approved or rejected (with the reason).
- Interruptions (Warning): ``SpotInterrupted``, ``InstanceUnhealthy`` (scheduled change),
  ``InstanceStopping``, ``InstanceTerminating``, then ``TerminatingOnInterruption`` once the decision is
  approved; ``SpotRebalanceRecommendation`` (Normal) for a rebalance recommendation, which disrupts nothing.

- Termination (the executor's): ``DisruptionTerminating`` on each node of an executing decision,
  ``DisruptionLaunching`` and ``DisruptionWaitingReadiness`` on each replacement it launches,
  ``FailedDraining`` (Warning) when a drain or a launch fails and the node is kept, and ``Evicted`` on each
  Pod the drain evicted (``Evicted pod: <the decision's reason>``; Karpenter's terminator writes the
  NodeClaim's disruption reason there, ``Forceful Termination`` when it has none).
  Karpenter's ``Disrupted`` (on a Pod deleted at its node's terminationGracePeriod deadline, bypassing its
  PDB) and ``TerminationGracePeriodExpiring`` (Warning, on the Node or NodeClaim with a termination
  deadline) are built here with Karpenter's messages; the executor emits them when it drains a node with a
  terminationGracePeriod. Karpenter declares ``FailedTermination`` but emits it nowhere (v1.14), so neither
  does ebb.

What is not reported: nodes that are not ebb's (no NodePool), nodes already deleting or being disrupted
(their decision has its own events; ``DisruptionTerminating`` is the executor's), and nodes a method would
disrupt but another method acted this pass (they are looked at again on the next pass).

Which of the two a node gets is decided by the kind of the engine's `BlockCause` (`EVENT_OF_CAUSE`), never
by its sentence; the sentence is only the message.

An event's ``dedupe_key`` is its reason, its object and its ``dedupe_values``; the recorder does not write
an event whose key it wrote less than ``dedupe_seconds`` ago. Keys leave out the message on purpose, as
Karpenter's do: a message that changes every pass (``launched 3m ago``) would otherwise be written again
every pass. Pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from ebb.core.causes import BlockCause, Cause
from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult

NORMAL = "Normal"
WARNING = "Warning"

UNCONSOLIDATABLE = "Unconsolidatable"
DISRUPTION_BLOCKED = "DisruptionBlocked"
CONSOLIDATION_CANDIDATE = "ConsolidationCandidate"
CONSOLIDATION_APPROVED = "ConsolidationApproved"
CONSOLIDATION_REJECTED = "ConsolidationRejected"
SPOT_INTERRUPTED = "SpotInterrupted"
RESERVATION_INTERRUPTED = "CapacityReservationInstanceInterrupted"
SPOT_REBALANCE = "SpotRebalanceRecommendation"
INSTANCE_STOPPING = "InstanceStopping"
INSTANCE_TERMINATING = "InstanceTerminating"
INSTANCE_UNHEALTHY = "InstanceUnhealthy"
TERMINATING_ON_INTERRUPTION = "TerminatingOnInterruption"

#: Karpenter's recorder default, and its longer windows
DEFAULT_DEDUPE_SECONDS = 120.0
UNCONSOLIDATABLE_DEDUPE_SECONDS = 15 * 60.0
NODEPOOL_DEDUPE_SECONDS = 60.0

#: instance states of a state-change interruption that take the instance away
STOPPING_STATES = frozenset({"stopping", "stopped"})
TERMINATING_STATES = frozenset({"shutting-down", "terminated"})


@dataclass(frozen=True, slots=True)
class InvolvedObject:
    kind: str
    name: str
    api_version: str
    #: empty for cluster-scoped objects (Nodes, NodeClaims, NodePools)
    namespace: str = ""
    #: the object's uid when the caller knows it ("" otherwise: the recorder may look it up); ``kubectl
    #: describe`` lists only the events whose involvedObject.uid is the object's
    uid: str = ""


@dataclass(frozen=True, slots=True)
class KubeEvent:
    involved: InvolvedObject
    type: str
    reason: str
    message: str
    dedupe_values: tuple[str, ...] = ()
    dedupe_seconds: float = DEFAULT_DEDUPE_SECONDS

    @property
    def dedupe_key(self) -> str:
        obj = self.involved
        return "|".join((self.reason.lower(), obj.kind, obj.namespace, obj.name, *self.dedupe_values))


def node_ref(name: str) -> InvolvedObject:
    return InvolvedObject("Node", name, "v1")


def nodeclaim_ref(name: str) -> InvolvedObject:
    return InvolvedObject("NodeClaim", name, "karpenter.sh/v1")


def nodepool_ref(name: str) -> InvolvedObject:
    return InvolvedObject("NodePool", name, "karpenter.sh/v1")


def pod_ref(namespace: str, name: str, uid: str = "") -> InvolvedObject:
    return InvolvedObject("Pod", name, "v1", namespace, uid)


def _on_node(node: str, claim: str | None, type_: str, reason: str, message: str, *,
             dedupe: tuple[str, ...] = (), seconds: float = DEFAULT_DEDUPE_SECONDS,
             claim_message: str | None = None) -> list[KubeEvent]:
    events = [KubeEvent(node_ref(node), type_, reason, message, dedupe, seconds)]
    if claim:
        events.append(KubeEvent(nodeclaim_ref(claim), type_, reason, claim_message or message, dedupe, seconds))
    return events


# -- the pass -----------------------------------------------------------------------------------------------


def unconsolidatable(node: str, claim: str | None, message: str) -> list[KubeEvent]:
    return _on_node(node, claim, NORMAL, UNCONSOLIDATABLE, message, seconds=UNCONSOLIDATABLE_DEDUPE_SECONDS)


def blocked(node: str, claim: str | None, message: str) -> list[KubeEvent]:
    return _on_node(node, claim, NORMAL, DISRUPTION_BLOCKED, message)


def nodepool_blocked(pool: str, reason: str) -> KubeEvent:
    return KubeEvent(nodepool_ref(pool), NORMAL, DISRUPTION_BLOCKED,
                     f"No allowed disruptions for disruption reason {reason} due to blocking budget", (reason,),
                     NODEPOOL_DEDUPE_SECONDS)


#: the Event of a node the pass leaves alone, by the kind of its cause (None: not reported); every kind but
#: `EMPTY_BUT`, which gets its inner cause's (do-not-consolidate on an empty node is Unconsolidatable, a
#: budget DisruptionBlocked), and `NO_MERGE`, which gets that of single-node consolidation's verdict it adds to
EVENT_OF_CAUSE: Mapping[Cause, str | None] = {
    # not ebb's node, or one already on its way out (its decision, or whoever deletes it, reports it)
    Cause.NOT_OWNED: None,
    Cause.NODEPOOL_MISSING: None,
    Cause.NODEPOOL_UNMANAGED: None,
    Cause.DELETING: None,
    Cause.BEING_DISRUPTED: None,
    # a replacement on its way into service (its decision reports it)
    Cause.LAUNCHED_FOR: None,
    # ebb cannot retire it with the karpenter provider (no NodeClaim to delete): not ebb's node to report on
    Cause.NO_NODECLAIM: None,
    # no method may disrupt it now (a NodePool that conflicts with Karpenter: until the conflict is fixed)
    Cause.KARPENTER_CONFLICT: DISRUPTION_BLOCKED,
    Cause.NOT_INITIALIZED: DISRUPTION_BLOCKED,
    Cause.NODE_DO_NOT_DISRUPT: DISRUPTION_BLOCKED,
    Cause.POD_DO_NOT_DISRUPT: DISRUPTION_BLOCKED,
    Cause.POD_PROTECTED_UNTIL: DISRUPTION_BLOCKED,
    Cause.POD_TWO_PDBS: DISRUPTION_BLOCKED,
    Cause.PDB_BLOCKS: DISRUPTION_BLOCKED,
    Cause.NODEPOOL_DO_NOT_DISRUPT: DISRUPTION_BLOCKED,
    # consolidation looked at it and will not take it
    Cause.NODE_DO_NOT_CONSOLIDATE: UNCONSOLIDATABLE,
    Cause.STATIC_NODEPOOL: UNCONSOLIDATABLE,
    Cause.NODECLAIM_NOT_INITIALIZED: UNCONSOLIDATABLE,
    Cause.PRICE_UNKNOWN: UNCONSOLIDATABLE,
    Cause.TYPE_NOT_IN_CATALOG: UNCONSOLIDATABLE,
    Cause.NO_NODEPOOL_LAUNCHES: UNCONSOLIDATABLE,
    Cause.CONSOLIDATION_POLICY: UNCONSOLIDATABLE,
    Cause.CONSOLIDATE_AFTER_NEVER: UNCONSOLIDATABLE,
    Cause.NOT_STABLE: UNCONSOLIDATABLE,
    Cause.PODS_FIT_NOWHERE: UNCONSOLIDATABLE,
    Cause.NO_REPLACEMENT: UNCONSOLIDATABLE,
    Cause.NO_CHEAPER_REPLACEMENT: UNCONSOLIDATABLE,
    Cause.ONLY_SAME_TYPE_CHEAPER: UNCONSOLIDATABLE,
    Cause.BALANCED_SCORE: UNCONSOLIDATABLE,
    Cause.BALANCED_UNMEASURED: UNCONSOLIDATABLE,
    Cause.EVICTIONS_NOT_WORTH: UNCONSOLIDATABLE,
    Cause.PRICE_IMPROVEMENT_TOO_SMALL: UNCONSOLIDATABLE,
    Cause.SPOT_TO_SPOT_DISABLED: UNCONSOLIDATABLE,
    Cause.SPOT_TO_SPOT_TOO_FEW_TYPES: UNCONSOLIDATABLE,
    Cause.NO_SPOT_OFFERING: UNCONSOLIDATABLE,
    Cause.AFFINITY_TARGET_OF_A_MOVE: UNCONSOLIDATABLE,
    Cause.MIN_VALUES_NOT_MET: UNCONSOLIDATABLE,
    Cause.ALONE_SAVES_MORE: UNCONSOLIDATABLE,
    Cause.NOTHING_TO_DO: UNCONSOLIDATABLE,
    # a hold, a stabilization window or a budget stops it for now
    Cause.PAUSED: DISRUPTION_BLOCKED,
    Cause.HOLD: DISRUPTION_BLOCKED,
    Cause.STABILIZATION_WINDOW: DISRUPTION_BLOCKED,
    Cause.DEMAND_WINDOW: DISRUPTION_BLOCKED,
    Cause.BUDGET_INVALID: DISRUPTION_BLOCKED,
    Cause.BUDGET_ZERO: DISRUPTION_BLOCKED,
    Cause.BUDGET_USED_UP: DISRUPTION_BLOCKED,
    Cause.BUDGET_USED_BY_CONSOLIDATIONS: DISRUPTION_BLOCKED,
    Cause.BUDGET_FOR_WAITING_COMMANDS: DISRUPTION_BLOCKED,
    Cause.BUDGET_WAIT: DISRUPTION_BLOCKED,
    Cause.BUDGET_WAIT_UNCONSOLIDATABLE: DISRUPTION_BLOCKED,
    # expired or drifted, but it cannot go now
    Cause.DUE_BUT: DISRUPTION_BLOCKED,
    Cause.POD_NOWHERE_TO_GO: DISRUPTION_BLOCKED,
    Cause.NOMINATED: DISRUPTION_BLOCKED,
    Cause.STATIC_SCALING_DOWN: DISRUPTION_BLOCKED,
    Cause.STATIC_AT_LIMIT: DISRUPTION_BLOCKED,
    Cause.STATIC_NOTHING_OFFERED: DISRUPTION_BLOCKED,
    # considered again next pass
    Cause.ANOTHER_METHOD_ACTED: None,
}


def classify(cause: BlockCause) -> str | None:
    """The event reason for a node the pass did not disrupt (``Unconsolidatable``, ``DisruptionBlocked``),
    or None when nothing is worth reporting about it."""
    if cause.kind in (Cause.EMPTY_BUT, Cause.NO_MERGE) and cause.inner is not None:
        return classify(cause.inner)
    return EVENT_OF_CAUSE[cause.kind]


def pass_events(view: ClusterView, result: PassResult) -> list[KubeEvent]:
    """The events of one pass: a node the pass could not act on, and NodePools whose budget is 0."""
    events: list[KubeEvent] = []
    for entry in result.blocked:
        kind = classify(entry.cause)
        if kind is None:
            continue
        node = view.nodes.get(entry.node)
        claim = view.claim_of(node) if node is not None else None
        factory = unconsolidatable if kind == UNCONSOLIDATABLE else blocked
        events.extend(factory(entry.node, claim.name if claim else None, _sentence(entry.reason)))
    pools_with_nodes = {n.nodepool for n in view.snapshot.nodes if n.nodepool}
    for row in result.budgets:
        if row.allowed == 0 and row.nodepool in pools_with_nodes:
            events.append(nodepool_blocked(row.nodepool, row.reason))
    return events


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# -- decisions ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionFacts:
    """What an event needs to know about a decision."""

    decision_id: str
    method: str
    reason: str
    action: str
    nodes: tuple[str, ...]
    savings: float


def describe(decision: DecisionFacts) -> str:
    return f"{decision.method} {decision.action} of {', '.join(decision.nodes)} ({decision.reason})"


def _decision(decision: DecisionFacts, claims: Mapping[str, str], reason: str, message: str,
              type_: str = NORMAL) -> list[KubeEvent]:
    events: list[KubeEvent] = []
    for node in decision.nodes:
        events.extend(_on_node(node, claims.get(node), type_, reason, message, dedupe=(decision.decision_id,)))
    return events


def proposed(decision: DecisionFacts, claims: Mapping[str, str]) -> list[KubeEvent]:
    """``ConsolidationCandidate`` on each node of a proposed decision."""
    return _decision(decision, claims, CONSOLIDATION_CANDIDATE,
                     f"Consolidation candidate: {describe(decision)} (savings: ${decision.savings:.2f}/h)")


def approved(decision: DecisionFacts, claims: Mapping[str, str]) -> list[KubeEvent]:
    """``ConsolidationApproved`` on each node of an approved pass decision; ``TerminatingOnInterruption``
    for an interruption."""
    if decision.method == "interruption":
        events: list[KubeEvent] = []
        for node in decision.nodes:
            events.extend(_on_node(node, claims.get(node), WARNING, TERMINATING_ON_INTERRUPTION,
                                   "Interruption triggered termination for the Node", dedupe=(decision.decision_id,),
                                   claim_message="Interruption triggered termination for the NodeClaim"))
        return events
    return _decision(decision, claims, CONSOLIDATION_APPROVED,
                     f"Consolidation approved: {describe(decision)} (savings: ${decision.savings:.2f}/h)")


def rejected(decision: DecisionFacts, claims: Mapping[str, str], why: str) -> list[KubeEvent]:
    """``ConsolidationRejected`` on each node of a rejected decision, with the reason."""
    return _decision(decision, claims, CONSOLIDATION_REJECTED,
                     f"Consolidation rejected: {describe(decision)}, reason: {why} "
                     f"(savings: ${decision.savings:.2f}/h)")


# -- interruptions ------------------------------------------------------------------------------------------

def interruption(kind: str, instance_state: str | None, node: str, claim: str | None) -> list[KubeEvent]:
    """The event of an interruption message on the node (and its NodeClaim): Karpenter's AWS provider's.
    ``instance_state`` is a state change's new state (None for the other kinds)."""
    if kind == "spot-interruption":
        return _on_node(node, claim, WARNING, SPOT_INTERRUPTED, "Spot interruption warning was triggered")
    if kind == "capacity-reservation-interruption":
        return _on_node(node, claim, WARNING, RESERVATION_INTERRUPTED,
                        "Capacity Reservation interruption warning was triggered")
    if kind == "rebalance":
        return _on_node(node, claim, NORMAL, SPOT_REBALANCE, "Spot rebalance recommendation was triggered")
    if kind == "scheduled-change":
        return _on_node(node, claim, WARNING, INSTANCE_UNHEALTHY,
                        "An unhealthy warning was triggered for the instance")
    if instance_state in STOPPING_STATES:
        return _on_node(node, claim, WARNING, INSTANCE_STOPPING, "Instance is stopping")
    return _on_node(node, claim, WARNING, INSTANCE_TERMINATING, "Instance is terminating")


#: Karpenter's AWS provider's message kind per interruption kind (a state change's: per instance state, below)
KARPENTER_MESSAGE_KINDS: Final = {"spot-interruption": "spot_interrupted",
                                  "capacity-reservation-interruption": "capacity_reservation_interrupted",
                                  "rebalance": "rebalance_recommendation",
                                  "scheduled-change": "scheduled_change"}


def message_kind(kind: str, instance_state: str | None) -> str:
    """Karpenter's name of an interruption's kind (its AWS provider's ``messages.Kind``): the ``message_type`` of
    ``karpenter_interruption_received_messages_total`` and the ``reason`` of ``karpenter_nodeclaims_disrupted_total``
    for the NodeClaim it deletes: ``spot_interrupted``, ``capacity_reservation_interrupted``, ``scheduled_change``,
    ``rebalance_recommendation``, ``instance_stopped``, ``instance_terminated``; ``no_op`` for a state change to a
    state that keeps the instance."""
    if kind == "state-change":
        if instance_state in STOPPING_STATES:
            return "instance_stopped"
        return "instance_terminated" if instance_state in TERMINATING_STATES else "no_op"
    return KARPENTER_MESSAGE_KINDS.get(kind, "no_op")


def takes_node_away(kind: str, instance_state: str | None) -> bool:
    """Whether an interruption removes the instance (acted on at once) or only recommends it (rebalance, a
    state change to a state that keeps the instance: event and log only)."""
    if kind == "rebalance":
        return False
    if kind == "state-change":
        return instance_state is None or instance_state in STOPPING_STATES | TERMINATING_STATES
    return True


# -- termination (the termination-executor's) ---------------------------------------------------------------

DISRUPTION_TERMINATING = "DisruptionTerminating"
DISRUPTION_LAUNCHING = "DisruptionLaunching"
DISRUPTION_WAITING_READINESS = "DisruptionWaitingReadiness"
FAILED_DRAINING = "FailedDraining"


def terminating(node: str, claim: str | None, reason: str) -> list[KubeEvent]:
    """A node of an executing decision is being disrupted (tainted, then drained and deleted)."""
    return _on_node(node, claim, NORMAL, DISRUPTION_TERMINATING, f"Disrupting Node: {reason}",
                    claim_message=f"Disrupting NodeClaim: {reason}")


def launching(replacement: str, reason: str) -> list[KubeEvent]:
    """A replacement is launched for a decision (on the new Node: ebb launches no NodeClaim)."""
    return [KubeEvent(node_ref(replacement), NORMAL, DISRUPTION_LAUNCHING, f"Launching Node: {reason}")]


def waiting_readiness(replacement: str) -> list[KubeEvent]:
    return [KubeEvent(node_ref(replacement), NORMAL, DISRUPTION_WAITING_READINESS,
                      "Waiting on readiness to continue disruption")]


def failed_draining(node: str, claim: str | None, why: str) -> list[KubeEvent]:
    """The drain (or the replacements it waits for) failed: the node is untainted and kept."""
    return _on_node(node, claim, WARNING, FAILED_DRAINING, f"Failed to drain node, {why}")


# Karpenter's terminator (pkg/controllers/node/termination/terminator/events)
EVICTED = "Evicted"
DISRUPTED = "Disrupted"
TERMINATION_GRACE_PERIOD_EXPIRING = "TerminationGracePeriodExpiring"


def evicted(pod: InvolvedObject, reason: str) -> KubeEvent:
    """The drain evicted ``pod`` (the Eviction API answered 200) for a decision of ``reason``."""
    return KubeEvent(pod, NORMAL, EVICTED, f"Evicted pod: {reason}", (pod.name,))


def go_time(at: datetime) -> str:
    """``at`` as Go prints a ``time.Time`` with ``%v`` (``2026-11-23 18:30:00 +0000 UTC``), in UTC."""
    utc = at.astimezone(UTC)
    fraction = f".{utc.microsecond:06d}".rstrip("0") if utc.microsecond else ""
    return utc.strftime("%Y-%m-%d %H:%M:%S") + fraction + " +0000 UTC"


def disrupted_pod(pod: InvolvedObject, grace_seconds: int, pod_grace_seconds: int, deadline: datetime) -> KubeEvent:
    """A pod deleted (not evicted) at its node's terminationGracePeriod deadline minus its own grace: its
    PDB and do-not-disrupt bypassed, ``grace_seconds`` (at least 1) of its ``pod_grace_seconds`` granted."""
    return KubeEvent(pod, NORMAL, DISRUPTED,
                     f"Deleting the pod to accommodate the terminationTime {go_time(deadline)} of the node. The pod "
                     f"was granted {grace_seconds} seconds of grace-period of its {pod_grace_seconds} "
                     "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt "
                     "annotation.", (pod.name,))


def termination_grace_period_expiring(node: str, claim: str | None, deadline: datetime) -> list[KubeEvent]:
    """A node being terminated has a terminationGracePeriod deadline: every pod is deleted by then.
    Karpenter writes the deadline as RFC 3339 (the NodeClaim's termination-timestamp annotation)."""
    stamp = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _on_node(node, claim, WARNING, TERMINATION_GRACE_PERIOD_EXPIRING, f"All pods will be deleted by {stamp}")
