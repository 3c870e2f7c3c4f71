"""Per-pass facts about the cluster that every disruption method needs, derived once from a snapshot.

Prices of nodes, pods per node, what each PodDisruptionBudget allows now, which nodes are candidates
at all and, for the others, the reason as a `BlockCause` (reported, never silent), disruption cost ordering,
budgets per NodePool and reason, holds and stabilization windows. Pure: snapshot + now in, values out.

A node tainted with any of `DISRUPTION_TAINTS` (Karpenter's or ebb's own) is being disrupted: not a candidate,
and counted against its pool's budget. A node that a live decision launched as its replacement
(``Snapshot.launched_for``, by the Node's or its NodeClaim's name) is not a candidate until that decision
ends, as Karpenter does not disrupt the nodes it nominated for a command's pods: while the decision drains its
old node (a PodDisruptionBudget may hold that for long), the replacement waits empty for their pods and would
otherwise look empty itself; it stays a destination and does not count against the budget. A budget's base is
the pool's initialized nodes, as in Karpenter's ``BuildDisruptionBudgetMapping``. With ``require_nodeclaim``
(ebb next to Karpenter, which retires a node when its NodeClaim is deleted) a node without a NodeClaim is not
a candidate either. With ``refuse_conflicts`` (the conflict check's settings) no node of a NodePool that conflicts
with Karpenter is a candidate (`ebb.core.conflicts.refused`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import filterfalse
from operator import attrgetter

from ebb.core import node_pods
from ebb.core.balanced import PoolTotals, pool_totals
from ebb.core.budgets import BudgetVerdict, allowed_disruptions
from ebb.core.causes import BlockCause, Cause
from ebb.core.conflicts import ConflictSettings, conflicts, refused
from ebb.core.labels import daemonset_requests, selector_matches, tolerates
from ebb.core.memo import Memo
from ebb.core.model import (
    ANNOTATION_DECISION_ID,
    ANNOTATION_DO_NOT_CONSOLIDATE,
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_DO_NOT_EVICT,
    CAPACITY_ON_DEMAND,
    CAPACITY_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
    POLICY_FROM_NODEPOOL,
    REASONS,
    TAINT_DISRUPTED,
    InstanceType,
    Interned,
    Node,
    NodeClaim,
    NodePool,
    Pod,
    PodDisruptionBudget,
    Snapshot,
    Taint,
    claim_for,
)
from ebb.core.node_pods import NodePods
from ebb.core.quantity import fmt_time, format_duration, positive_duration

#: Karpenter's disruption taint: a pod that tolerates it is never evicted by a disruption (``IsEvictable``)
_DISRUPTED_NO_SCHEDULE = Taint(TAINT_DISRUPTED, effect="NoSchedule")
#: the loop over every pod of a pass leaves the finished ones out in C
_IS_TERMINAL = attrgetter("is_terminal")
_PDB_HEALTHY = attrgetter("pdb_healthy")
#: the lifetime left that scales a candidate's disruption cost is measured on a grid of this many steps per the
#: shortest expireAfter of the snapshot's NodePools (an hour for Karpenter's default of 720h; `lifetime_step`)
LIFETIME_STEPS = 720


def lifetime_step(pools: Iterable[NodePool]) -> int | None:
    """The step, whole seconds, of the grid the lifetime left is measured on: the shortest ``expireAfter`` of
    ``pools`` over `LIFETIME_STEPS` (at least a second); None when no pool has one (no lifetime to measure).

    Measured to the instant, as Karpenter does at each poll, the lifetime left moves every candidate's disruption
    cost at its own rate, and two of a few thousand candidates swap places in the order every few seconds: every
    pass of a large settled cluster would be computed again (`ebb.core.revisit`). On the grid the order holds for a
    step, and differs from the instant's only between candidates whose costs are within 1/720 of a node's eviction
    cost."""
    shortest = min((p.expire_after for p in pools if p.expire_after), default=None)
    return None if shortest is None else max(1, int(shortest // LIFETIME_STEPS))


def on_lifetime_grid(moment: datetime, step: int) -> datetime:
    """The latest point of the grid of ``step`` seconds (counted from the Unix epoch) at or before ``moment``."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC if moment.tzinfo is not None else None)
    micros = (moment - epoch) // timedelta(microseconds=1)
    return moment - timedelta(microseconds=micros % (step * 1_000_000))


def node_price(it: InstanceType, zone: str | None, capacity_type: str | None) -> tuple[float, bool]:
    """What a node of type ``it`` in ``zone`` and ``capacity_type`` costs an hour, and whether its offering was found:
    the offering of its zone and capacity type, else the cheapest of its capacity type, else the cheapest of all
    (kept on the type, `InstanceType.node_prices`). A reserved node whose type has no reserved offering left (its
    reservation is gone) is priced as on-demand, in its zone if offered there: AWS demotes such an instance to
    on-demand."""
    place = (zone, capacity_type)
    known = it.node_prices.get(place)
    if known is None:
        price = _offered_price(it, zone, capacity_type)
        if price is None and capacity_type == CAPACITY_RESERVED:
            price = _offered_price(it, zone, CAPACITY_ON_DEMAND)
        known = it.node_prices[place] = (min(o.price for o in it.offerings) if price is None else price, True)
    return known


def _offered_price(it: InstanceType, zone: str | None, capacity_type: str | None) -> float | None:
    """The price of ``it``'s offering in ``zone`` and ``capacity_type``, else its cheapest of ``capacity_type``, else
    None."""
    exact = [o.price for o in it.offerings if o.zone == zone and o.capacity_type == capacity_type]
    if exact:
        return exact[0]
    same_ct = [o.price for o in it.offerings if o.capacity_type == capacity_type]
    return min(same_ct) if same_ct else None


@dataclass(frozen=True, slots=True)
class PdbStatus:
    pdb: PodDisruptionBudget
    allowed: int
    healthy: int
    expected: int

    def lets_go(self, pod: Pod) -> bool:
        """Whether the PDB lets the pod be evicted whatever it allows: ``unhealthyPodEvictionPolicy: AlwaysAllow``
        and the pod is not Ready (the Eviction API's rule, which Karpenter's PDB check follows)."""
        return self.pdb.always_allow_unhealthy and not pod.ready

    @property
    def fully_blocking(self) -> bool:
        """Karpenter's ``isFullyBlocking``: the PDB never allows an eviction (maxUnavailable 0 or 0%, or
        minAvailable 100%), whatever its pods' health."""
        return self.pdb.max_unavailable in (0, "0%") or self.pdb.min_available == "100%"


def do_not_disrupt_protection(annotations: Mapping[str, str], start_time: datetime | None,
                              now: datetime) -> tuple[str, str, datetime | None] | None:
    """The annotation that protects a pod at ``now``, its value and when the protection ends (None: while the
    annotation stays), or None when none does. As Karpenter's ``IsDoNotDisruptActive``, for ``do-not-disrupt`` and
    the older ``do-not-evict``: "true" protects; a positive duration protects until the pod's start plus it (a pod
    that has not started is protected: fail safe); any other value ("false", "Never", "0s", "soon") is ignored
    (`ebb.core.snapshot.input_warnings` names it). The planner's view and the drain read it alike."""
    for annotation in (ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_EVICT):
        value = annotations.get(annotation)
        if value is None:
            continue
        if value == "true":
            return annotation, value, None
        seconds = positive_duration(value)
        if seconds is None:
            continue
        if start_time is None:
            return annotation, value, None
        until = start_time + timedelta(seconds=seconds)
        if now < until:
            return annotation, value, until
    return None


def pdb_allowed(pdb: PodDisruptionBudget, pods: list[Pod]) -> PdbStatus:
    """disruptionsAllowed as kube-controller-manager computes it from the matching pods."""
    expected = len(pods)
    healthy = sum(map(_PDB_HEALTHY, pods))

    def scaled(value: int | str, round_up: bool) -> int:
        if isinstance(value, int):
            return value
        pct = int(value[:-1]) * expected / 100
        return math.ceil(pct) if round_up else math.floor(pct)

    if pdb.max_unavailable is not None:
        allowed = scaled(pdb.max_unavailable, True) - (expected - healthy)
    elif pdb.min_available is not None:
        allowed = healthy - scaled(pdb.min_available, True)
    else:
        allowed = 0
    return PdbStatus(pdb, max(0, allowed), healthy, expected)


@dataclass(frozen=True, slots=True)
class _GatheredPods:
    """What `ClusterView._gather_pods` made of a snapshot's pods tuple, its nodes' names and its PDBs; shared by the
    views made of them, which only read it."""
    pods: tuple[Pod, ...]
    node_names: tuple[str, ...]
    pdbs: tuple[PodDisruptionBudget, ...]
    pods_on: dict[str, list[Pod]]
    unbound: list[Pod]
    node_pods: dict[str, NodePods]
    movable: dict[str, Sequence[Pod]]
    pdbs_of_class: dict[Interned, list[PdbStatus]]
    pdb_bound: set[Interned]


#: the last few pods tuples gathered, by identity (each entry holds its tuple, so an id is not reused while kept)
_PODS_GATHERED: Memo[int, _GatheredPods] = Memo(4, forget="oldest")


@dataclass
class ClusterView:
    snapshot: Snapshot
    now: datetime
    pools: dict[str, NodePool] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods_on: dict[str, list[Pod]] = field(default_factory=dict)
    #: the active pods (not finished) on no node of the snapshot, in its order: the pending ones among them
    unbound: list[Pod] = field(default_factory=list, repr=False, compare=False)
    #: per node, its pods that need a new home (`NodePods.movable`, shared: read-only)
    movable: dict[str, Sequence[Pod]] = field(default_factory=dict)
    price: dict[str, float] = field(default_factory=dict)
    price_known: dict[str, bool] = field(default_factory=dict)
    types: dict[str, InstanceType] = field(default_factory=dict)
    claims: dict[str, NodeClaim] = field(default_factory=dict)
    _pdbs_of_class: dict[Interned, list[PdbStatus]] = field(default_factory=dict, repr=False)
    #: the classes of pods whose PDBs may keep them (two PDBs, or one that allows no disruption now): a pod of any
    #: other class is never kept by a PDB
    _pdb_bound: set[Interned] = field(default_factory=set, repr=False, compare=False)
    not_candidate: dict[str, BlockCause] = field(default_factory=dict)  # node -> why never a candidate
    hard_block: dict[str, BlockCause] = field(default_factory=dict)  # node -> why no method may disrupt it
    consolidation_block: dict[str, BlockCause] = field(default_factory=dict)  # node -> why not consolidated
    budgets: dict[tuple[str, str], BudgetVerdict] = field(default_factory=dict)
    pause: dict[tuple[str, str], BlockCause] = field(default_factory=dict)  # (pool, node|"") -> hold or window
    #: a node without a NodeClaim is not a candidate (`EngineOptions.require_nodeclaim`)
    require_nodeclaim: bool = False
    #: NodePool -> why ebb disrupts none of its nodes: it conflicts with Karpenter (`EngineOptions.refuse_conflicts`)
    refused: dict[str, BlockCause] = field(default_factory=dict)
    claims_by_provider: dict[str, NodeClaim] = field(default_factory=dict)
    #: replacement name (a Node's or a NodeClaim's) -> the live decision that launched it
    launched_for: dict[str, str] = field(default_factory=dict)
    #: per NodePool with a ``demandWindow``: (cpu millicores, memory bytes) allocatable on its nodes that stay (not
    #: deleting or being disrupted), requested now by the pods on its nodes, and requested at the window's peak
    capacity: dict[str, tuple[int, int]] = field(default_factory=dict)
    demand_now: dict[str, tuple[int, int]] = field(default_factory=dict)
    demand_peak: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: NodePool -> its demandWindow (seconds), for the pools that have one
    demand_windows: dict[str, float] = field(default_factory=dict)
    _rooms: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)
    _launch_rooms: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)
    _unsettled: list[tuple[str, str]] | None = field(default=None, repr=False)
    _disruption_costs: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    #: what is derived from the pods on each node (`ebb.core.node_pods`)
    node_pods: dict[str, NodePods] = field(default_factory=dict, repr=False, compare=False)
    _tolerating: dict[Interned, bool] = field(default_factory=dict, repr=False, compare=False)
    _last_pod_events: dict[str, datetime | None] = field(default_factory=dict, repr=False, compare=False)
    #: ``Snapshot.pod_events`` by node, made when first asked
    _pod_left: dict[str, datetime] | None = field(default=None, repr=False, compare=False)
    _balanced_totals: dict[str, PoolTotals] | None = field(default=None, repr=False, compare=False)
    _launching: tuple[NodeClaim, ...] | None = field(default=None, repr=False, compare=False)
    #: the drifted nodes and why (`ebb.core.methods.drift.drifted_nodes`), found once per view: the drift method
    #: and the findings both read them
    drifted: dict[str, str] | None = field(default=None, repr=False, compare=False)
    _uninitialized: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    _lifetime_at: tuple[int | None, datetime] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, snapshot: Snapshot, now: datetime, *, require_nodeclaim: bool = False,
              refuse_conflicts: ConflictSettings | None = None) -> ClusterView:
        view = cls(snapshot, now, require_nodeclaim=require_nodeclaim)
        if refuse_conflicts is not None:
            view.refused = {pool: BlockCause(Cause.KARPENTER_CONFLICT, {"pool": pool, "conflict": c.message})
                            for pool, c in refused(conflicts(snapshot, refuse_conflicts)).items()}
        view.pools = {p.name: p for p in snapshot.nodepools}
        view.nodes = {n.name: n for n in snapshot.nodes}
        view.types = {t.name: t for t in snapshot.instance_types}
        view.launched_for = dict(snapshot.launched_for)
        for c in snapshot.nodeclaims:
            if c.node_name:
                view.claims[c.node_name] = c
            if c.provider_id:
                view.claims_by_provider[c.provider_id] = c
        view._gather_pods()
        for node in snapshot.nodes:
            view.price[node.name], view.price_known[node.name] = view._node_price(node)
        view._demand()
        view._candidates()
        view._budgets()
        view._pauses()
        return view

    def _gather_pods(self) -> None:
        """The pods by node (`pods_on`, `unbound`, `node_pods`, `movable`) and what the PDBs allow, taken as the last
        view of the same pods tuple, the same nodes and the same PDBs had them (`_PODS_GATHERED`): a validation's
        snapshot often has its pass's pods, with a node tainted or gone between them, and none of this reads the
        clock."""
        snapshot = self.snapshot
        names = tuple(node.name for node in snapshot.nodes)
        kept = _PODS_GATHERED.get(id(snapshot.pods))
        if (kept is not None and kept.pods is snapshot.pods and kept.pdbs is snapshot.pdbs
                and kept.node_names == names):
            self.pods_on, self.unbound, self.node_pods, self.movable = (kept.pods_on, kept.unbound, kept.node_pods,
                                                                        kept.movable)
            self._pdbs_of_class, self._pdb_bound = kept.pdbs_of_class, kept.pdb_bound
            return
        self._pdbs(self._bucket_pods())
        _PODS_GATHERED.keep(id(snapshot.pods), _GatheredPods(
            snapshot.pods, names, snapshot.pdbs, self.pods_on, self.unbound, self.node_pods, self.movable,
            self._pdbs_of_class, self._pdb_bound))

    def _bucket_pods(self) -> dict[Interned, list[Pod]]:
        """Fill `pods_on`, `unbound`, `node_pods` and `movable`; returns the active pods of each class, in the
        snapshot's order, when the snapshot has PDBs (`_pdbs` reads them), else nothing."""
        view, snapshot = self, self.snapshot
        for node in snapshot.nodes:
            view.pods_on[node.name] = []
        # every pod of every pass: the finished ones left out in C, one lookup for the rest; with PDBs, the pods
        # of each class gathered in the same pass over them (`_pdbs`: they are thousands of objects spread through
        # memory, and reading them is most of a loop's cost)
        on_node, unbound = view.pods_on.get, view.unbound
        of_class: dict[Interned, list[Pod]] = {}
        class_at, by_class = of_class.get, bool(snapshot.pdbs)
        for pod in filterfalse(_IS_TERMINAL, snapshot.pods):
            on = on_node(pod.node_name or "")  # no node is named "": an unbound pod is on none
            if on is not None:
                on.append(pod)
            else:
                unbound.append(pod)
            if by_class:
                same = class_at(pod.class_key)
                if same is None:
                    of_class[pod.class_key] = [pod]
                else:
                    same.append(pod)
        for name, pods in view.pods_on.items():
            derived = view.node_pods[name] = node_pods.of_node(name, pods)  # most nodes: as the last pass had them
            view.movable[name] = derived.movable
        return of_class

    # -- prices ----------------------------------------------------------------------------------------
    def _node_price(self, node: Node) -> tuple[float, bool]:
        it = self.types.get(node.instance_type or "")
        if it is None:
            return 0.0, False
        return node_price(it, node.zone, node.capacity_type)

    def offered(self, instance_type: str | None, zone: str | None, capacity_type: str | None) -> bool:
        """Whether a node launched as ``instance_type`` in ``zone`` and ``capacity_type`` (drift reads them on its
        NodeClaim, `ebb.core.methods.drift`) still has an offering there, available now or not: as Karpenter's
        ``instanceTypeNotFound`` drift, which matches the full list of offerings ("even if they're temporarily
        unavailable"), a capacity shortage is not drift. A node without a zone or a capacity-type label is judged on
        any (no verdict on what it does not say), as Karpenter drifts a node only on an offering it can name. A reserved
        node is matched against reserved and on-demand offerings: Karpenter may demote it to on-demand when its
        reservation ends, before its label says so."""
        it = self.types.get(instance_type or "")
        if it is None:
            return self.snapshot.catalog_source == "bundled"  # unknown to the bundled list: no verdict
        capacity_types = {"reserved", "on-demand"} if capacity_type == "reserved" else {capacity_type}
        return any((not zone or o.zone == zone) and (not capacity_type or o.capacity_type in capacity_types)
                   for o in it.offerings)

    def pool_cost(self) -> float:
        """What the NodePools' nodes cost an hour (``cost.before`` of a plan): their nodes not being deleted nor
        disrupted already (tainted ``karpenter.sh/disrupted``: on their way out, as the budgets count them), and their
        NodeClaims launched whose Node has not registered yet and that are not being deleted (`launching_claims`,
        priced by their labels, `claim_price`), which cost money from launch on and which Balanced counts too."""
        return math.fsum((*(self.price[n.name] for n in self.snapshot.nodes
                            if n.nodepool in self.pools and not (n.deleting or n.being_disrupted)),
                          *(self.claim_price(c) for c in self.launching_claims()
                            if c.nodepool in self.pools and not c.deleting)))

    # -- demand windows ----------------------------------------------------------------------------------
    def _demand(self) -> None:
        """Capacity, demand now and the window's peak demand of every NodePool with a ``demandWindow``. Demand is
        what the pods on the pool's nodes that would need a new home request (not DaemonSet or mirror pods: a
        node brings its own); a node's capacity is its allocatable less what its DaemonSet and mirror pods
        request (`room_of`). The peak is the largest demand of now and of the samples (`Snapshot.demand`) taken
        within the window."""
        windows = self.demand_windows = {p.name: p.demand_window for p in self.snapshot.nodepools if p.demand_window}
        if not windows:
            return
        for name in windows:
            self.capacity[name] = self.demand_now[name] = (0, 0)
        for node in self.snapshot.nodes:
            pool = node.nodepool
            if pool not in windows:
                continue
            cpu, memory = self.demand_now[pool]
            for pod in self.movable[node.name]:
                key = pod.placement_key  # (-cpu, -memory, ...): the pod's requests
                cpu -= key[0]
                memory -= key[1]
            self.demand_now[pool] = (cpu, memory)
            room = self._rooms[node.name] = self._room(node)
            if not (node.deleting or node.being_disrupted):
                have = self.capacity[pool]
                self.capacity[pool] = (have[0] + room[0], have[1] + room[1])
        peak = dict(self.demand_now)
        for sample in self.snapshot.demand:
            window = windows.get(sample.pool)
            if window is None or not 0 <= (self.now - sample.at).total_seconds() < window:
                continue
            cpu, memory = peak[sample.pool]
            peak[sample.pool] = (max(cpu, sample.cpu), max(memory, sample.memory))
        self.demand_peak = peak

    def room_of(self, name: str) -> tuple[int, int]:
        """The cpu and memory a node has for pods that need a home: its allocatable less what its pods that do not
        (DaemonSet and mirror pods) request. Found once per view for the nodes of a pool with a window."""
        room = self._rooms.get(name)
        return room if room is not None else self._room(self.nodes[name])

    def _room(self, node: Node) -> tuple[int, int]:
        name = node.name
        cpu, memory = node.allocatable.get("cpu", 0), node.allocatable.get("memory", 0)
        for pod in self.pods_on[name]:
            if not pod.needs_rescheduling:
                key = pod.placement_key
                cpu += key[0]
                memory += key[1]
        return cpu, memory

    def launch_room(self, pool: str, type_name: str) -> tuple[int, int] | None:
        """The cpu and memory a new node of NodePool ``pool`` and instance type ``type_name`` would have for pods that
        need a home: its allocatable less what the DaemonSets that would run on it request (never below zero).
        None for a type or NodePool the snapshot does not have. Found once per view."""
        key = (pool, type_name)
        room = self._launch_rooms.get(key)
        if room is None:
            itype, nodepool = self.types.get(type_name), self.pools.get(pool)
            if itype is None or nodepool is None:
                return None
            daemons = daemonset_requests(self.snapshot.daemonsets, nodepool, itype)
            allocatable = itype.allocatable()
            cpu, memory = (max(0, allocatable.get(r, 0) - daemons.get(r, 0)) for r in ("cpu", "memory"))
            room = self._launch_rooms[key] = (cpu, memory)
        return room

    def headrooms(self) -> dict[str, tuple[int, int]]:
        """Per NodePool with a ``demandWindow``, how much cpu and memory its nodes may lose to Empty and Underutilized
        disruptions before they hold less than its peak demand within the window (negative when they already do):
        what a pass, or a validation, may take."""
        return {pool: (self.capacity[pool][0] - peak[0], self.capacity[pool][1] - peak[1])
                for pool, peak in self.demand_peak.items()}

    # -- PDBs --------------------------------------------------------------------------------------------
    def _pdbs(self, of_class: dict[Interned, list[Pod]]) -> None:
        """What each PDB allows now, kept per class of the pods it selects. ``of_class``: the active pods (not
        finished) of each class, in the snapshot's order (`build` gathers them). Replicas share their labels: each
        class of pods (same namespace and labels, and more: its interned ``class_key``) is matched once, not every
        pod."""
        if not self.snapshot.pdbs:
            return
        namespaces = {pdb.namespace for pdb in self.snapshot.pdbs}
        by_class: dict[str, dict[Interned, list[Pod]]] = {}
        for key, pods in of_class.items():  # a class is of one namespace (it is in the key)
            if pods[0].namespace in namespaces:
                by_class.setdefault(pods[0].namespace, {})[key] = pods
        for pdb in self.snapshot.pdbs:
            selector = pdb.selector
            if selector is None:
                continue  # policy/v1: a null selector selects no pod (an empty one, every pod of the namespace)
            selected = [key for key, pods in by_class.get(pdb.namespace, {}).items()
                        if selector_matches(selector, pods[0].labels)]
            status = pdb_allowed(pdb, [p for key in selected for p in by_class[pdb.namespace][key]])
            for key in selected:
                self._pdbs_of_class.setdefault(key, []).append(status)
        self._pdb_bound = {key for key, statuses in self._pdbs_of_class.items()
                           if len(statuses) > 1 or statuses[0].allowed <= 0}

    def pdbs_of(self, pod: Pod) -> list[PdbStatus]:
        """The PDBs that select an active pod (not finished), with what they allow now: the same for every pod of
        its class (its namespace and labels are in the class key), so kept per class."""
        return self._pdbs_of_class.get(pod.class_key, [])

    # -- candidates --------------------------------------------------------------------------------------
    def initialized(self, node: Node) -> bool:
        if node.labels.get(LABEL_INITIALIZED) == "true":
            return True
        claim = self.claim_of(node)
        return claim is not None and claim.initialized

    def has_nodeclaim(self, node: Node) -> bool:
        """Whether the node has a NodeClaim (``claim_of``: by ``status.providerID`` or ``status.nodeName``)."""
        return self.claim_of(node) is not None

    def claim_of(self, node: Node) -> NodeClaim | None:
        """The node's NodeClaim: the one with its provider id, else the one naming it (``status.nodeName``), or None
        (``ebb.core.model.claim_for``)."""
        if not self.claims_by_provider and not self.claims:  # no NodeClaim at all (asked for every node, often)
            return None
        return claim_for(node.name, node.provider_id, self.claims, self.claims_by_provider)

    def launched_by(self, node: Node) -> str | None:
        """The live decision that launched ``node`` as a replacement (its name, or its NodeClaim's), or None."""
        if not self.launched_for:
            return None
        decision = self.launched_for.get(node.name)
        if decision is None:
            claim = self.claim_of(node)
            decision = self.launched_for.get(claim.name) if claim is not None else None
        return decision

    def replacement(self, node: Node) -> bool:
        """Whether ``node`` was launched as a replacement for a disruption decision: its NodeClaim or the Node
        carries ``ebb.sh/decision-id``, or a live decision launched it."""
        if node.annotations.get(ANNOTATION_DECISION_ID):
            return True
        claim = self.claim_of(node)
        if claim is not None and claim.decision_id:
            return True
        return self.launched_by(node) is not None

    def _candidates(self) -> None:
        for node in self.snapshot.nodes:
            pool_name = node.nodepool
            if pool_name is None:
                claim = self.claim_of(node)
                named = {"claim": f"its NodeClaim {claim.name} names NodePool {claim.nodepool}, but Karpenter reads "
                                  "the Node's own label"} if claim is not None and claim.nodepool else {}
                self.not_candidate[node.name] = BlockCause(Cause.NOT_OWNED, named)
                continue
            if pool_name not in self.pools:
                self.not_candidate[node.name] = BlockCause(Cause.NODEPOOL_MISSING, {"pool": pool_name or '""'})
                continue
            if not self.pools[pool_name].managed:
                self.not_candidate[node.name] = BlockCause(Cause.NODEPOOL_UNMANAGED, {"pool": pool_name})
                continue
            if node.deleting:
                self.not_candidate[node.name] = BlockCause(Cause.DELETING)
                continue
            taint = node.disruption_taint
            if taint is not None:
                self.not_candidate[node.name] = BlockCause(Cause.BEING_DISRUPTED, {"taint": taint})
                continue
            decision = self.launched_by(node)
            if decision is not None:
                self.not_candidate[node.name] = BlockCause(Cause.LAUNCHED_FOR, {"decision": decision})
                continue
            if self.require_nodeclaim and not self.has_nodeclaim(node):
                self.not_candidate[node.name] = BlockCause(Cause.NO_NODECLAIM)
                continue
            conflict = self.refused.get(pool_name)
            if conflict is not None:
                self.not_candidate[node.name] = conflict
                continue
            if not self.initialized(node):
                self.not_candidate[node.name] = BlockCause(Cause.NOT_INITIALIZED)
                continue
            if node.annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true":
                self.hard_block[node.name] = BlockCause(Cause.NODE_DO_NOT_DISRUPT)
                continue
            reason = self._pod_block(node)
            if reason and self.grace_period(node) is None:
                self.hard_block[node.name] = reason
                continue
            # with a terminationGracePeriod a pod that blocks eviction keeps only the graceful methods (emptiness,
            # consolidation) away: drift and expiration may take the node, and the pod goes at its deadline
            # (Karpenter's NewCandidate for the eventual disruption class); it is not moved (`currently_reschedulable`)
            pool = self.pools[pool_name]
            if pool.annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true":
                self.hard_block[node.name] = BlockCause(Cause.NODEPOOL_DO_NOT_DISRUPT, {"pool": pool.name})
            elif reason:
                self.consolidation_block[node.name] = reason
            elif node.annotations.get(ANNOTATION_DO_NOT_CONSOLIDATE) == "true":
                self.consolidation_block[node.name] = BlockCause(Cause.NODE_DO_NOT_CONSOLIDATE)
            elif pool.replicas is not None:  # Karpenter's emptiness and consolidation skip a static NodePool
                self.consolidation_block[node.name] = BlockCause(Cause.STATIC_NODEPOOL, {
                    "pool": pool.name, "replicas": pool.replicas})
            else:
                # Karpenter's NodeClaim disruption controller keeps Consolidatable off while its NodeClaim is not
                # Initialized, even when the Node is labelled initialized already (its initialization labels the
                # Node first): emptiness and consolidation wait; drift and expiration do not. A NodeClaim with no
                # condition at all (written by hand: Karpenter's have theirs from launch) says nothing of it, and
                # the Node's label decides
                claim = self.claim_of(node)
                if claim is not None and not claim.initialized and claim.conditions:
                    self.consolidation_block[node.name] = BlockCause(Cause.NODECLAIM_NOT_INITIALIZED,
                                                                     {"claim": claim.name})

    def grace_period(self, node: Node) -> float | None:
        """The terminationGracePeriod that lets drift and expiration take the node past pods that block eviction,
        seconds: its NodeClaim's ``spec.terminationGracePeriod`` (copied from the NodePool at launch), the one
        Karpenter's ``NewCandidate`` reads. None when it has none, and for a node without a NodeClaim: there a
        do-not-disrupt pod or a PDB always blocks (the drain of such a node still honours its NodePool's grace
        period, docs/decisions.md)."""
        claim = self.claim_of(node)
        return claim.termination_grace_period if claim is not None else None

    def _pod_block(self, node: Node) -> BlockCause | None:
        """Why a pod keeps the node from being disrupted, or None; Karpenter's ``ValidatePodsDisruptable``. Only
        active pods count: a finished pod, or one being deleted, is evicted by no one. An active do-not-disrupt
        blocks on every pod, DaemonSet and mirror pods included (``IsDisruptable``); PDBs only on the pods that
        would be evicted (``IsEvictable``): not mirror pods, nor pods that tolerate the disrupted taint."""
        selected = self._pdbs_of_class
        derived = self.node_pods[node.name]
        if not derived.protected and self._pdb_bound.isdisjoint(derived.class_keys):
            return None  # no pod is annotated, and no PDB may keep one not being deleted: the most nodes, in C
        for pod in self.pods_on[node.name]:
            if not pod.protection_annotated and pod.class_key not in selected:
                continue  # no do-not-disrupt annotation and no PDB selects it: it blocks nothing (most pods)
            if pod.is_terminal or pod.deleting:
                continue
            protected = self._do_not_disrupt(pod)
            if protected is not None:
                return protected
            if pod.is_mirror or self._tolerates_disrupted(pod):
                continue
            statuses = self.pdbs_of(pod)
            if len(statuses) > 1:
                return BlockCause(Cause.POD_TWO_PDBS, {
                    "pod": pod.key, "pdbs": tuple(f"{s.pdb.namespace}/{s.pdb.name}" for s in statuses)})
            if statuses and statuses[0].allowed <= 0 and not statuses[0].lets_go(pod):
                s = statuses[0]
                return BlockCause(Cause.PDB_BLOCKS, {"pdb": f"{s.pdb.namespace}/{s.pdb.name}", "healthy": s.healthy,
                                                     "expected": s.expected})
        return None

    def _tolerates_disrupted(self, pod: Pod) -> bool:
        """Whether the pod tolerates the disrupted taint (once per class of pods: its tolerations are in the key)."""
        hit = self._tolerating.get(pod.class_key)
        if hit is None:
            hit = self._tolerating[pod.class_key] = tolerates(pod.spec.tolerations, _DISRUPTED_NO_SCHEDULE)
        return hit

    def protected_now(self, pod: Pod) -> bool:
        """Whether the pod's do-not-disrupt (or do-not-evict) annotation protects it now."""
        return self._do_not_disrupt(pod) is not None

    def _do_not_disrupt(self, pod: Pod) -> BlockCause | None:
        """Why the pod's do-not-disrupt (or do-not-evict) annotation protects it now, or None
        (`do_not_disrupt_protection`)."""
        if not pod.protection_annotated:
            return None
        found = do_not_disrupt_protection(pod.annotations, pod.start_time, self.now)
        if found is None:
            return None
        annotation, value, until = found
        protected = {"pod": pod.key, "annotation": annotation, "value": value}
        if until is None:
            return BlockCause(Cause.POD_DO_NOT_DISRUPT, protected)
        return BlockCause(Cause.POD_PROTECTED_UNTIL, {**protected, "until": until})

    def evicted_soon(self) -> list[Pod]:
        """The pods that are about to need a new home because their node is going away: Karpenter's
        ``CurrentlyReschedulablePods`` of its deleting nodes (deleting, or tainted by a disruption), which its
        disruption simulations place before a candidate's pods. A pod whose do-not-disrupt protects it, or whose
        PDB blocks every eviction (``IsCurrentlyReschedulable``), is not evicted now and needs no room."""
        out: list[Pod] = []
        for node in self.snapshot.nodes:
            if not (node.deleting or node.being_disrupted):
                continue
            out.extend(pod for pod in self.movable[node.name] if self.currently_reschedulable(pod))
        return out

    def currently_reschedulable(self, pod: Pod) -> bool:
        """Whether a disruption evicts the pod now, so that it needs room (Karpenter's
        ``IsCurrentlyReschedulable``): a pod being deleted does (a StatefulSet's replacement needs its room); not
        one whose do-not-disrupt protects it or a PDB blocks every eviction of it (two PDBs included). Such a pod
        stays until its node's terminationGracePeriod deadline. A pod that tolerates the disrupted taint is not
        evicted at all (Karpenter's ``IsEvictable``), so no PDB can block its eviction: it goes with its node and
        needs room (``isEvictable`` answers "evictable" before any PDB is read)."""
        if pod.deleting or (not pod.protection_annotated and pod.class_key not in self._pdbs_of_class):
            return True
        statuses = () if self._tolerates_disrupted(pod) else self.pdbs_of(pod)
        return (self._do_not_disrupt(pod) is None and len(statuses) <= 1
                and not (statuses and statuses[0].fully_blocking and not statuses[0].lets_go(pod)))

    def uninitialized_owned(self) -> tuple[str, ...]:
        """Nodes Karpenter manages that are not initialized yet: a disruption simulation counts on them only for
        pods that are leaving a deleting node (Karpenter's ``SimulateScheduling``: "would schedule against
        uninitialized" otherwise). A node no NodePool or NodeClaim owns is initialized as far as Karpenter cares.
        Found once per view: every simulation of a pass asks."""
        if self._uninitialized is None:
            self._uninitialized = tuple(
                n.name for n in self.snapshot.nodes
                if (n.nodepool is not None or self.has_nodeclaim(n)) and not self.initialized(n))
        return self._uninitialized

    def blocked_reason(self, node: str, consolidation: bool) -> BlockCause | None:
        """Why no method (or, with ``consolidation``, no consolidation method) may take the node, or None."""
        return self.not_candidate.get(node) or self.hard_block.get(node) or (
            self.consolidation_block.get(node) if consolidation else None)

    # -- budgets, holds, windows ---------------------------------------------------------------------------
    def _budgets(self) -> None:
        # Karpenter's count: a pool's initialized nodes (an uninitialized one, typically a replacement on its way
        # up, would inflate a percentage), and not those whose instance is already terminating; next to Karpenter
        # (``require_nodeclaim``) only the nodes it manages, those with a NodeClaim (``StateNode.Managed``)
        counted: dict[str, list[Node]] = {}
        for node in self.snapshot.nodes:
            if (node.nodepool is not None and self.initialized(node) and not self._terminating(node)
                    and (not self.require_nodeclaim or self.has_nodeclaim(node))):
                counted.setdefault(node.nodepool, []).append(node)
        for pool in self.snapshot.nodepools:
            owned = counted.get(pool.name, [])
            # Karpenter's disrupting nodes: marked for deletion, or a Ready condition not True (none at all included),
            # each counted once
            deleting = sum(1 for n in owned if n.deleting or n.being_disrupted)
            not_ready = sum(1 for n in owned if not (n.ready and n.ready_reported)
                            and not (n.deleting or n.being_disrupted))
            for reason in REASONS:
                self.budgets[(pool.name, reason)] = allowed_disruptions(
                    pool, reason, self.now, total=len(owned), deleting=deleting, not_ready=not_ready)

    def _terminating(self, node: Node) -> bool:
        claim = self.claim_of(node)
        return claim is not None and claim.instance_terminating

    def _pauses(self) -> None:
        for hold in self.snapshot.holds:
            if hold.expires is not None and hold.expires <= self.now:
                continue
            held = BlockCause(Cause.HOLD, {"hold": hold})
            if hold.scope == "cluster":
                for pool_name in self.pools:
                    self.pause.setdefault((pool_name, ""), held)
            elif hold.scope == "nodePool" and hold.target:
                self.pause.setdefault((hold.target, ""), held)
            elif hold.scope == "node" and hold.target:
                node = self.nodes.get(hold.target)
                if node is not None and node.nodepool:
                    self.pause.setdefault((node.nodepool, node.name), held)
        if not any(pool.stabilization_window for pool in self.snapshot.nodepools):
            return  # no window to find the newest node for
        # a replacement launched for a disruption decision is not a sign of new load: counting it would restart
        # the window on every replace ebb carries out (each replace would pause consolidation again)
        # a NodeClaim launched whose Node has not registered yet is a node launched too (Karpenter's provisioner
        # answering a burst: its cluster state counts it as a node of its NodePool already)
        launched = [(n.creation_time, n.name) for n in self.snapshot.nodes
                    if n.creation_time is not None and not self.replacement(n)]
        launched += [(c.creation_time, f"{c.name} (a NodeClaim whose Node has not registered yet)")
                     for c in self.launching_claims() if c.creation_time is not None and not c.deleting
                     and not c.decision_id and c.name not in self.launched_for]
        newest = max(launched, default=None)
        for pool in self.snapshot.nodepools:
            window = pool.stabilization_window
            if not window or newest is None:
                continue
            launched_at, name = newest
            age = (self.now - launched_at).total_seconds()
            if age < window:
                resume = launched_at + timedelta(seconds=window)
                self.pause.setdefault((pool.name, ""), BlockCause(Cause.STABILIZATION_WINDOW, {
                    "pool": pool.name, "source": pool.policy_source, "window": window, "newest": name,
                    "age": age, "resume": resume}))

    def paused(self, node: Node) -> BlockCause | None:
        """Why Empty and Underutilized disruption of this node is paused (hold or window), or None."""
        pool = node.nodepool or ""
        return self.pause.get((pool, node.name)) or self.pause.get((pool, ""))

    # -- timing ----------------------------------------------------------------------------------------
    def last_pod_event(self, node: Node) -> datetime | None:
        """When the node's pods last changed: the latest pod arrival, the node's creation and, from its NodeClaim,
        ``status.lastPodEventTime`` (Karpenter's record of pods bound and removed: a pod that left is seen only
        there) and the ``Initialized`` transition (Karpenter counts consolidateAfter from it when no pod event is
        recorded); not its ``Consolidatable`` transition, which Karpenter's controller sets once consolidateAfter has
        passed since those (counted from it, a node would wait twice as long). For a node without a NodeClaim, when
        a pod last left it as a running service saw (``Snapshot.pod_events``). Found once per node and view."""
        if node.name in self._last_pod_events:
            return self._last_pod_events[node.name]
        last = self._last_pod_events[node.name] = self._find_last_pod_event(node)
        return last

    def _find_last_pod_event(self, node: Node) -> datetime | None:
        latest = self.node_pods[node.name].last_arrival
        times = [] if latest is None else [latest]
        claim = self.claim_of(node)  # by status.nodeName or status.providerID
        if claim is None:
            left = self._pod_left_at(node.name)
            if left is not None:
                times.append(left)
        if claim is not None:
            if claim.last_pod_event is not None:
                times.append(claim.last_pod_event)
            else:  # as Karpenter: the Initialized transition only when no pod event is recorded, not the later one
                initialized = claim.conditions.get("Initialized")
                if initialized and initialized[1] is not None and initialized[0] == "True":
                    times.append(initialized[1])
        if node.creation_time is not None:
            times.append(node.creation_time)
        return max(times) if times else None

    def _pod_left_at(self, name: str) -> datetime | None:
        """When a pod last left node ``name`` as a running service saw it (``Snapshot.pod_events``, kept by node)."""
        if self._pod_left is None:
            self._pod_left = dict(self.snapshot.pod_events)
        return self._pod_left.get(name)

    def _last_pod_event_words(self, node: Node, last: datetime) -> str | None:
        """What `last_pod_event` found at ``last`` when it is not a change of the node's pods: its NodeClaim's
        initialization, or its creation; None for a pod event (a pod's arrival or departure, ``lastPodEventTime``),
        which wins a tie."""
        arrived = self.node_pods[node.name].last_arrival
        claim = self.claim_of(node)
        if arrived == last or (claim is not None and claim.last_pod_event == last):
            return None
        if claim is None:
            if self._pod_left_at(node.name) == last:
                return None
        else:
            initialized = claim.conditions.get("Initialized")
            if initialized and initialized[0] == "True" and initialized[1] == last:
                return f"its NodeClaim {claim.name} was initialized"
        return "the node was created" if node.creation_time == last else None

    def stable_for(self, node: Node, seconds: float) -> BlockCause | None:
        """None when the node has been stable for `seconds`; else why not yet."""
        last = self.last_pod_event(node)
        if last is None or seconds <= 0:
            return None
        ready_at = last + timedelta(seconds=seconds)
        if self.now >= ready_at:
            return None
        pool = self.pools.get(node.nodepool or "")
        # a NodePool's own consolidateAfter is not attributed (the sentence predates DisruptionPolicies)
        whose = f"{pool.policy_source}'s " if pool is not None and pool.policy_kind != POLICY_FROM_NODEPOOL else ""
        since = self._last_pod_event_words(node, last)
        return BlockCause(Cause.NOT_STABLE, {"after": seconds, "last": last, "ready": ready_at, "whose": whose,
                                             **({"since": since} if since else {})})

    def unsettled(self) -> list[tuple[str, str]]:
        """The nodes a consolidation may not move pods onto, with why: those still inside their NodePool's
        ``consolidateAfter`` since their pods last changed (the same timing as `stable_for`). Karpenter v1.14's
        consolidation simulations refuse them as destinations for the candidates' pods (pending pods and pods
        leaving a deleting node excepted); a ``consolidateAfter`` of 0s or Never makes no node unsettled, and a
        node no NodePool owns is never unsettled. Computed once per view."""
        if self._unsettled is None:
            out: list[tuple[str, str]] = []
            for node in self.snapshot.nodes:
                pool = self.pools.get(node.nodepool or "")
                if pool is None or not pool.consolidate_after:
                    continue
                not_yet = self.stable_for(node, pool.consolidate_after)
                if not_yet is not None:
                    last = not_yet.values["last"]
                    assert isinstance(last, datetime)
                    since = not_yet.values.get("since") or "its pods last changed"
                    out.append((node.name, f"{not_yet.values['whose']}consolidateAfter "
                                           f"({format_duration(pool.consolidate_after)}) has not passed since {since} "
                                           f"at {fmt_time(last)}"))
            self._unsettled = out
        return self._unsettled

    def launched(self, node: Node) -> datetime | None:
        """When the node's life began, as Karpenter measures expiry and the lifetime left: its NodeClaim's
        creation when it has a NodeClaim that says, else the Node's."""
        claim = self.claim_of(node)
        if claim is not None and claim.creation_time is not None:
            return claim.creation_time
        return node.creation_time

    def disruption_cost(self, node: Node) -> float:
        """Karpenter's disruption cost: eviction costs of the pods, scaled by the lifetime left (once per node and
        view: every method orders its candidates by it)."""
        cost = self._disruption_costs.get(node.name)
        if cost is None:
            cost = self.eviction_cost_of(node.name)
            pool = self.pools.get(node.nodepool or "")
            launched = self.launched(node)
            if pool and pool.expire_after and launched is not None:
                age = (self.lifetime_at - launched).total_seconds()
                cost *= min(1.0, max(0.0, 1.0 - age / pool.expire_after))
            self._disruption_costs[node.name] = cost
        return cost

    @property
    def lifetime_step(self) -> int | None:
        """The grid the lifetime left is measured on, seconds (`lifetime_step` of the view's NodePools)."""
        return self._lifetime()[0]

    @property
    def lifetime_at(self) -> datetime:
        """The moment the lifetime left that scales a disruption cost is measured at: ``now`` on the grid of
        `lifetime_step` (``now`` when no NodePool has an expireAfter)."""
        return self._lifetime()[1]

    def _lifetime(self) -> tuple[int | None, datetime]:
        if self._lifetime_at is None:
            step = lifetime_step(self.pools.values())
            self._lifetime_at = (step, self.now if step is None else on_lifetime_grid(self.now, step))
        return self._lifetime_at

    def eviction_cost_of(self, name: str) -> float:
        """The eviction costs of the node's movable pods summed: its disruption cost before the lifetime left
        scales it."""
        return self.node_pods[name].eviction_cost

    def balanced_totals(self) -> dict[str, PoolTotals]:
        """Per NodePool whose consolidationPolicy is Balanced, the price and the disruption cost of all its nodes, the
        NodeClaims launched whose Node has not registered yet included (`launching_claims`: Karpenter's cluster state
        counts them, priced by their labels) (`ebb.core.balanced`: once per view, as Karpenter takes them once per
        pass). Next to Karpenter (`require_nodeclaim`) a node without a NodeClaim adds no price: Karpenter's
        ``ClusterCost`` sums NodeClaims."""
        if self._balanced_totals is None:
            unpriced = frozenset(name for name, node in self.nodes.items()
                                 if not self.has_nodeclaim(node)) if self.require_nodeclaim else frozenset()
            self._balanced_totals = pool_totals(self, list(self.nodes), [
                (claim.nodepool, self.claim_price(claim)) for claim in self.launching_claims() if claim.nodepool],
                unpriced)
        return self._balanced_totals

    def no_pool_launches(self) -> BlockCause | None:
        """Why no move of pods may be simulated, when no NodePool may open a node: each is being deleted, not Ready or
        static (`NodePool.closed`, `NodePool.replicas`). Karpenter's ``NewScheduler`` then returns
        ``ErrNodePoolsNotFound``, so its drift and consolidation propose nothing (only emptiness, which simulates
        nothing, and static drift act); None when one NodePool may."""
        pools = self.pools.values()
        if not pools or any(p.launches and p.replicas is None for p in pools):
            return None
        said = "; ".join(f"NodePool {p.name} {p.closed or 'is static'}" for p in pools)
        return BlockCause(Cause.NO_NODEPOOL_LAUNCHES, {"pools": said})

    def launching_claims(self) -> tuple[NodeClaim, ...]:
        """The NodeClaims no Node of the snapshot is of (by ``status.nodeName`` or ``status.providerID``): launched,
        their node not registered yet. Karpenter's cluster state holds them as nodes of their NodePool already."""
        if self._launching is None:
            self._launching = self.snapshot.launching_claims()
        return self._launching

    def claim_price(self, claim: NodeClaim) -> float:
        """What a NodeClaim's node costs an hour, by its instance type, zone and capacity type labels (0 for a type the
        catalog does not know), as Karpenter's cost tracking prices a NodeClaim."""
        it = self.types.get(claim.labels.get(LABEL_INSTANCE_TYPE, ""))
        if it is None:
            return 0.0
        return node_price(it, claim.labels.get(LABEL_ZONE), claim.labels.get(LABEL_CAPACITY_TYPE))[0]

    def order(self, names: list[str]) -> list[str]:
        return sorted(names, key=lambda n: (self.disruption_cost(self.nodes[n]), len(self.movable[n]),
                                            -self.price[n], n))

    def utilization_order(self) -> list[str]:
        """Where simulated pods should go first: the initialized nodes before those not initialized yet (as
        Karpenter's scheduler tries them, ``sortExistingNodes``: a pending pod is headed for a Ready node with room
        before one still booting), then the fullest nodes (least likely to be removed): by the share of their cpu
        requested, the largest first, then by name (Karpenter tries them by name alone: a difference kept on purpose,
        docs/decisions.md)."""
        derived = self.node_pods
        booting = set(self.uninitialized_owned())
        ranked: list[tuple[bool, float, str]] = []
        for node in self.snapshot.nodes:
            requested = derived[node.name].cpu_requested
            ranked.append((node.name in booting, -(requested / (node.allocatable.get("cpu", 0) or 1)), node.name))
        ranked.sort()  # names differ: no two entries tie
        return [name for _, _, name in ranked]


def budget_rows(view: ClusterView) -> list[tuple[str, str, int]]:
    return [(pool, reason, verdict.allowed) for (pool, reason), verdict in sorted(view.budgets.items(),
                                                                                key=lambda kv: kv[0])]
