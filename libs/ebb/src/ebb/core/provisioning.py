"""What a provisioner launches for Pending pods, as Karpenter's provisioner decides it.

Karpenter batches the pods it cannot schedule (until no new one came for 1 s, at most 10 s:
``batch_wait``), then simulates scheduling the batch on the nodes that exist and on those still launching
(in-flight NodeClaims count as capacity, or every pod waiting for a booting node would get a second one), and
launches a NodeClaim per new node the simulation opens: from the heaviest NodePool whose requirements,
taints and limits allow it, with the cheapest instance type that holds all its pods (``launches``). The
simulation is ebb's own (``ebb.core.simulator``): existing nodes first, then new claims, NodePool weight
and limits, every filter it models. A pod that fits on no existing, in-flight or new node is left Pending
with the simulator's reason.

Pure: values in, values out; the embedded mode's provisioner (``ebb_embedded.provisioner``) does the
waiting and the launching.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ebb.core import node_pods
from ebb.core.memo import Memo
from ebb.core.model import Node, Pod, Snapshot, Taint
from ebb.core.simulator.results import NewNode
from ebb.core.simulator.scheduler import simulate

#: the taints Karpenter expects to go away by themselves (its ``KnownEphemeralTaints``): a booting node carries some
#: (a kubelet registers its Node tainted not-ready until it is Ready), and its simulation ignores them on a node that
#: is not initialized yet, as it ignores the NodePool's startup taints there
EPHEMERAL_TAINTS: frozenset[Taint] = frozenset({
    Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),
    Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
    Taint("node.kubernetes.io/unreachable", "", "NoSchedule"),
    Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule"),
    Taint("karpenter.sh/unregistered", "", "NoExecute"),
})

#: Karpenter's batching: the batch closes once no new pod came for this long ...
BATCH_IDLE_SECONDS = 1.0
#: ... or once it has been open this long
BATCH_MAX_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ProvisioningPlan:
    """The nodes to launch for a batch of Pending pods, and the pods nothing can hold."""

    #: the new nodes, each with its NodePool, instance types (cheapest first), capacity type, zones and pods
    launches: tuple[NewNode, ...] = ()
    #: pod key -> the node (existing or in flight) it is expected to go to
    expected: Mapping[str, str] = field(default_factory=dict)
    #: pod key -> why it fits nowhere, not even on a new node
    unschedulable: Mapping[str, str] = field(default_factory=dict)


#: what `launches` derived from each node's pods (`node_pods.of_node`), by node name
_DERIVED: Memo[str, node_pods.NodePods] = Memo(node_pods.KEEP_AT_MOST)


def batch_wait(opened: float, last_arrival: float, now: float, *, idle: float = BATCH_IDLE_SECONDS,
               maximum: float = BATCH_MAX_SECONDS) -> float:
    """Seconds the batch opened at ``opened`` (its last pod arrived at ``last_arrival``) stays open after
    ``now``; 0 when it is closed."""
    return max(0.0, min(last_arrival + idle, opened + maximum) - now)


def _as_booted(node: Node, startup: frozenset[Taint]) -> Node:
    """A node still launching as Karpenter's simulation counts on it: Ready, without the taints it only has while
    booting (``EPHEMERAL_TAINTS``, its NodePool's startup taints)."""
    taints = tuple(t for t in node.taints if t not in EPHEMERAL_TAINTS and t not in startup)
    return replace(node, ready=True, taints=taints)


def launches(snapshot: Snapshot, pending: Sequence[Pod], *, in_flight: Iterable[str] = ()) -> ProvisioningPlan:
    """The nodes to launch so that ``pending`` can run: the simulator places them on the existing nodes, on
    the nodes of ``in_flight`` (launched, not Ready yet: counted as if they were, without their booting taints:
    `_as_booted`) and then on new nodes."""
    booting = set(in_flight)
    if booting:
        startup = {pool.name: frozenset(pool.startup_taints) for pool in snapshot.nodepools}
        nodes = tuple(_as_booted(n, startup.get(n.nodepool or "", frozenset()))
                      if n.name in booting and not n.deleting else n for n in snapshot.nodes)
        snapshot = replace(snapshot, nodes=nodes)
    waiting = [p for p in pending if p.node_name is None and p.needs_rescheduling]
    if not waiting:
        return ProvisioningPlan()
    # each node's pods derived as a pass's view derives them, kept apart from the passes' (another moment of the
    # cluster): the nodes whose pods did not change since the last batch answer from it
    derived, unbound = node_pods.of_snapshot((n.name for n in snapshot.nodes), snapshot.pods, _DERIVED)
    result = simulate(snapshot, waiting, derived=derived, unbound=unbound)
    new = {n.hostname for n in result.new_nodes}
    expected = {pod: at for pod, at in result.placements.items() if at not in new}
    return ProvisioningPlan(launches=result.new_nodes, expected=expected, unschedulable=dict(result.unplaceable))
