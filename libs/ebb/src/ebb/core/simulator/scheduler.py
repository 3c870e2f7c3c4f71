"""Array-based scheduling simulation with Karpenter's semantics.

Model. Every place a pod can go is a *bin*: bins 0..N-1 are the existing nodes (in the caller's
preference order), bins N.. are NodeClaims the simulation opens. A bin has free capacity (one row of an
int64 matrix: cpu millicores, memory bytes, pods, ephemeral storage, extended resources) and a code per
topology key (hostname, zone, ...). A new NodeClaim keeps every (instance type, offering) pair of its
NodePool that is still compatible with its pods, as a boolean mask; it fits a pod while at least one
remaining instance type has room for all of them, and it launches the cheapest remaining offering.

Per pod the simulator evaluates, vectorised over all bins: free capacity, the pod class's static
compatibility (nodeSelector, required node affinity, taints; computed once per distinct class), and
topology (spread with DoNotSchedule, required pod affinity and anti-affinity, and existing pods'
anti-affinity against it) from per-group domain counters. The first bin that passes wins; existing
nodes come first, then open claims, then a new claim from the heaviest compatible NodePool. Preferred
terms are treated as required and relaxed one at a time when the pod would not schedule at all.

Every mutation is journalled so the decision engine can try thousands of "what if" simulations on one
state and roll each back in time proportional to what it changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import filterfalse, repeat
from operator import attrgetter
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ebb.core import node_pods
from ebb.core.labels import blocking_taints, daemonset_requests, requirements_match, selector_matches
from ebb.core.memo import Memo
from ebb.core.model import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_ZONE,
    DaemonSet,
    InstanceType,
    Interned,
    Node,
    NodePool,
    Pod,
    PodAffinityTerm,
    Requirement,
    SchedulingSpec,
    Snapshot,
    Toleration,
    TopologySpread,
    placement_order,
)
from ebb.core.simulator.labeltable import BoolArray, IntArray, LabelTable
from ebb.core.simulator.results import NewNode, SimulationResult

FloatArray = npt.NDArray[np.float64]
FIXED_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
# Keys an instance type or offering decides; a NodePool requirement on any other key becomes a label.
TYPE_KEYS = {LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, "kubernetes.io/arch", LABEL_OS}


#: how many pods' needs a NodePool keeps its offerings for (`_Pool.combo_ok`) before it starts again
_COMBO_OK_CACHE_SIZE = 4096


_REQUESTS_KEY = attrgetter("requests_key")
_REQUESTS_KEYS = attrgetter("requests_keys")
_IS_TERMINAL = attrgetter("is_terminal")
_MOVABLE = attrgetter("movable")
_NEEDS_RESCHEDULING = attrgetter("needs_rescheduling")
_GROUPS_KEY = attrgetter("groups_key")


def resource_names(snapshot: Snapshot, extra_pods: Iterable[Pod] = (), *,
                   derived: Iterable[node_pods.NodePods] | None = None, unbound: Iterable[Pod] = ()) -> tuple[str, ...]:
    """The resources a simulation counts: those the snapshot's active pods (a finished pod needs no room) and
    ``extra_pods`` request, the nodes have and the instance types offer, the fixed ones first. ``derived``: what
    was derived from every node's active pods (`ebb.core.node_pods`), with ``unbound`` the active pods on no node:
    the same pods, their distinct requests kept per node rather than read pod by pod."""
    if derived is None:
        keys = {*map(_REQUESTS_KEY, filterfalse(_IS_TERMINAL, snapshot.pods))}  # replicas share theirs
    else:
        keys = set().union(*map(_REQUESTS_KEYS, derived), map(_REQUESTS_KEY, unbound))
    keys.update(map(_REQUESTS_KEY, extra_pods))
    names: set[str] = set()
    for key in keys:
        names.update(name for name, _ in key.value)
    for node in snapshot.nodes:
        names.update(node.allocatable)
    names.update(_type_resources(snapshot.instance_types))
    return FIXED_RESOURCES + tuple(sorted(names - set(FIXED_RESOURCES)))


def _type_resources(types: tuple[InstanceType, ...]) -> frozenset[str]:
    """The resources the instance types have, kept for the last catalog (its types live through many passes)."""
    kept_types, kept = _TYPE_RESOURCES[0]  # one tuple: read whole though another thread may replace it
    if _same(kept_types, types):
        return kept
    names = frozenset(name for it in types for name in it.capacity)
    _TYPE_RESOURCES[0] = (types, names)
    return names


#: the last catalog's instance types and their resources (`_type_resources`)
_TYPE_RESOURCES: list[tuple[tuple[InstanceType, ...], frozenset[str]]] = [((), frozenset())]


def format_requests(requests: Mapping[str, int]) -> str:
    parts = []
    for name, value in requests.items():
        if name == "pods" or not value:
            continue
        if name == "cpu":
            parts.append(f"cpu {value}m")
        elif name in ("memory", "ephemeral-storage"):
            parts.append(f"{name} {value / 2**30:.2f}Gi")
        else:
            parts.append(f"{name} {value}")
    return ", ".join(parts) or "no requests"


# --------------------------------------------------------------------------------------------------
# Static structures, built once per snapshot


@dataclass
class _Pool:
    pool: NodePool
    types: list[InstanceType]
    type_alloc: IntArray  # T x R: capacity - overhead - DaemonSet overhead
    type_capacity: IntArray  # T x R
    combo_type: IntArray  # C
    combo_price: FloatArray  # C
    combo_zone: list[str]
    combo_ct: list[str]
    combo_labels: LabelTable
    zone_names: list[str] = field(default_factory=list)  # combo_zone_code -> zone
    combo_zone_code: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    combo_ct_code: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    #: T x (R + 1): what a claim of each type counts against the NodePool's limits, its capacity then 1 (for
    #: ``nodes``); read-only rows, shared by the claims charged them
    type_charge: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))

    _type_floor: dict[str | None, FloatArray] = field(default_factory=dict)
    #: `combo_ok` per (nodeSelector, required node terms, tolerations), in a 1-tuple: a pool outlives a pass
    #: (`_cached_pools`)
    _combo_ok: Memo[tuple[Any, ...], tuple[BoolArray | None]] = field(
        default_factory=lambda: Memo(_COMBO_OK_CACHE_SIZE))

    def __post_init__(self) -> None:
        self.zone_names = sorted(set(self.combo_zone))
        zone_code = {z: i for i, z in enumerate(self.zone_names)}
        self.combo_zone_code = np.array([zone_code[z] for z in self.combo_zone], dtype=np.int64)
        ct_code = {c: i for i, c in enumerate(sorted(set(self.combo_ct)))}
        self.combo_ct_code = np.array([ct_code[c] for c in self.combo_ct], dtype=np.int64)
        charge = np.ones((self.type_capacity.shape[0], self.type_capacity.shape[1] + 1), dtype=np.int64)
        charge[:, :-1] = self.type_capacity
        charge.flags.writeable = False
        self.type_charge = charge

    def combo_ok(self, spec: SchedulingSpec) -> BoolArray | None:
        """The offerings a pod of ``spec`` may launch on (its NodePool taints tolerated, its required node affinity
        and nodeSelector met), or None when there is none. Made once per distinct needs for the pool's life, and
        read-only: every pass's Scheduler asks again for the same pods."""
        key = (tuple(spec.node_selector.items()), spec.required_node_terms, spec.tolerations)
        hit = self._combo_ok.get(key)  # one lookup: a pass and a validation may share the pool from two threads
        if hit is not None:
            return hit[0]
        ok: BoolArray | None = None
        if len(self.combo_labels) and not blocking_taints(spec.tolerations, self.pool.taints):
            ok = self.combo_labels.terms(spec.required_node_terms)
            if spec.node_selector:
                ok &= self.combo_labels.selector(spec.node_selector)
            if ok.any():
                ok.flags.writeable = False
            else:
                ok = None
        self._combo_ok.keep(key, (ok,))  # bounded: a long-lived planner's pods may keep bringing needs never seen again
        return ok

    def type_floor(self, without: str | None) -> FloatArray:
        """Per instance type, its cheapest offering in this pool (inf when it has none), leaving out offerings of
        capacity type ``without`` (None: every offering counts)."""
        floor = self._type_floor.get(without)
        if floor is None:
            floor = np.full(len(self.types), np.inf)
            keep = np.array([ct != without for ct in self.combo_ct], dtype=bool)
            np.minimum.at(floor, self.combo_type[keep], self.combo_price[keep])
            self._type_floor[without] = floor
        return floor


@dataclass
class _Group:
    """Pods counted per topology domain: those matching `selector` (kind "match"), or those owning a
    required anti-affinity term (kind "owner", for the inverse check)."""

    kind: str
    key: str
    selector: Any  # LabelSelector
    namespaces: frozenset[str] | None  # None = all namespaces
    term: PodAffinityTerm | None = None


@dataclass
class _Constraint:
    kind: str  # spread | affinity | anti
    group: int
    key: str
    max_skew: int = 1
    self_match: int = 0
    min_domains: int | None = None
    eligible: IntArray | None = None  # spread: codes of eligible domains (hostname: node indices)
    new_domain: bool = False  # hostname spread: a new node is a domain with zero pods


@dataclass
class _Class:
    spec: SchedulingSpec
    namespace: str
    node_ok: BoolArray  # over existing nodes
    pool_combo_ok: list[BoolArray | None]  # per pool; None when the pool's taints repel the pod
    constraints: list[_Constraint]
    matched: list[int]  # groups whose count this pod raises
    owned: list[int]  # anti-affinity "owner" groups this pod raises
    host_ports: tuple[tuple[str, int, str], ...]
    can_launch: bool
    pool_ok: BoolArray  # per pool: pool_combo_ok is not None


@dataclass
class _Claim:
    pool: int
    hostname: str
    mask: BoolArray  # over the pool's combos; once a pod is on it, only offerings whose type holds `total` (`_narrow`)
    total: IntArray
    pods: list[str] = field(default_factory=list)
    charged: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # toward NodePool limits
    #: how many offerings `mask` keeps (-1 before its first pod): the mask only narrows, so an unchanged count is an
    #: unchanged mask
    kept: int = -1
    #: `SimState.launch_floor`'s last answer: (the mask it was for, ``without``, the floor). A mask is never changed
    #: in place (a narrowed one is a new array; an unchanged one stays), so the same mask object gives the same floor
    floor: tuple[BoolArray, str | None, float] | None = None


#: `relaxations` by the id of the spec, with the spec (a pass's Scheduler makes each class's again, of the specs the
#: pods held the pass before: the parser shares a spec among the versions of a pod and its replicas)
_RELAXED: Memo[int, tuple[SchedulingSpec, tuple[SchedulingSpec, ...]]] = Memo(20_000)


def relaxations(spec: SchedulingSpec) -> tuple[SchedulingSpec, ...]:
    """Strictest first: every preference as a requirement; then drop one preference at a time (the
    ScheduleAnyway spreads first, then the lightest preferred term), ending at the pod's requirements. Made once
    per spec object (a value: shared by every Scheduler and thread; a race only makes it twice)."""
    kept = _RELAXED.get(id(spec))
    if kept is not None and kept[0] is spec:
        return kept[1]
    made = tuple(_relaxations(spec))
    _RELAXED.keep(id(spec), (spec, made))
    return made


def _relaxations(spec: SchedulingSpec) -> list[SchedulingSpec]:
    """`relaxations`, made."""
    prefs: list[tuple[int, int, str, Any]] = []
    for i, s in enumerate(spec.spread):
        if s.when_unsatisfiable != "DoNotSchedule":
            prefs.append((-1, i, "spread", s))
    for i, (w, t) in enumerate(spec.preferred_pod_anti_affinity):
        prefs.append((w, i, "anti", t))
    for i, (w, t) in enumerate(spec.preferred_pod_affinity):
        prefs.append((w, i, "affinity", t))
    for i, (w, terms) in enumerate(spec.preferred_node_terms):
        prefs.append((w, i, "node", terms))
    base = replace(spec, spread=tuple(s for s in spec.spread if s.when_unsatisfiable == "DoNotSchedule"),
                   preferred_node_terms=(), preferred_pod_affinity=(), preferred_pod_anti_affinity=())
    if not prefs:
        return [base]
    prefs.sort(key=lambda p: (p[0], p[1]))
    out = []
    for drop in range(len(prefs) + 1):
        kept = prefs[drop:]
        spec_i = base
        node_extra: list[Requirement] = []
        for _, _, kind, item in kept:
            if kind == "spread":
                spec_i = replace(spec_i, spread=(*spec_i.spread, replace(item, when_unsatisfiable="DoNotSchedule")))
            elif kind == "anti":
                spec_i = replace(spec_i, pod_anti_affinity=(*spec_i.pod_anti_affinity, item))
            elif kind == "affinity":
                spec_i = replace(spec_i, pod_affinity=(*spec_i.pod_affinity, item))
            else:
                node_extra.extend(item)
        if node_extra:
            required = spec_i.required_node_terms or ((),)
            spec_i = replace(spec_i, required_node_terms=tuple((*t, *node_extra) for t in required))
        out.append(spec_i)
    return out


@dataclass(frozen=True)
class _PoolsEntry:
    """Built pools with what they were built from, kept (so the ids stay theirs): a Scheduler whose snapshot holds
    these very objects takes the pools without comparing NodePools and DaemonSets by value."""

    resources: tuple[str, ...]
    nodepools: tuple[NodePool, ...]
    daemonsets: tuple[DaemonSet, ...]
    instance_types: tuple[InstanceType, ...]
    pools: list[_Pool]

    def holds(self, resources: Sequence[str], snapshot: Snapshot) -> bool:
        """Built from exactly the objects of ``snapshot`` (by identity) and ``resources``."""
        return (tuple(resources) == self.resources and _same(self.nodepools, snapshot.nodepools)
                and _same(self.daemonsets, snapshot.daemonsets) and _same(self.instance_types, snapshot.instance_types))


def _same(kept: Sequence[object], given: Sequence[object]) -> bool:
    return len(kept) == len(given) and all(a is b for a, b in zip(kept, given, strict=True))


#: built pools by (resource names, the NodePools and DaemonSets, the ids of the InstanceTypes), with those kept (so
#: the ids stay theirs); a few entries: a planner alternates between very few catalogs and pool sets
_POOLS_CACHE: Memo[tuple[Any, ...], _PoolsEntry] = Memo(4, forget="oldest")


#: `Scheduler.pod_vec` and `.pod_needs` by resource names, then by requests (`Pod.requests_key`): the same for every
#: Scheduler with those names, and a planner's Schedulers share their names and most requests pass after pass
_REQUESTS_KEPT: Memo[tuple[str, ...], tuple[dict[Interned, IntArray], dict[Interned, tuple[tuple[int, int], ...]]]] = \
    Memo(8)
#: past this many requests kept for some resource names, they are dropped and made again as asked
_REQUESTS_KEPT_SIZE = 20_000


def _requests_kept(resources: tuple[str, ...]) -> tuple[dict[Interned, IntArray],
                                                          dict[Interned, tuple[tuple[int, int], ...]]]:
    """The vectors and needs kept for ``resources`` (new, empty ones for new names or past the size limit). A
    Scheduler adds to them as it goes: entries are values (read-only arrays), so a race only makes one twice."""
    kept = _REQUESTS_KEPT.get(resources)
    if kept is None or len(kept[0]) > _REQUESTS_KEPT_SIZE:
        kept = _REQUESTS_KEPT.keep(resources, ({}, {}))
    return kept


#: what separates a topology key from its node filter's id in a filtered group's key (`Scheduler._spread_key`);
#: no label key holds it
FILTERED = "|"


class Scheduler:
    """Static, per-snapshot data for simulations; `new_state()` makes a mutable working copy."""

    def __init__(self, snapshot: Snapshot, *, node_order: Sequence[str] | None = None,
                 extra_pods: Sequence[Pod] = (), closed_nodes: Iterable[str] = (),
                 derived: Mapping[str, node_pods.NodePods] | None = None,
                 unbound: Sequence[Pod] | None = None) -> None:
        """``derived``: what `ebb.core.node_pods` derived from each node's active pods of ``snapshot`` (a view's
        ``node_pods``), given with ``unbound``, the snapshot's active pods on no node of it (the view's): the pods on
        each node, what they request and how many would need a home are then taken from them, not found again
        among every pod."""
        self.snapshot = snapshot
        by_name = {n.name: n for n in snapshot.nodes}
        order = list(node_order) if node_order is not None else [n.name for n in snapshot.nodes]
        ordered = set(order)
        order += [n.name for n in snapshot.nodes if n.name not in ordered]
        self.nodes: list[Node] = [by_name[name] for name in order if name in by_name]
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        self.N = len(self.nodes)
        of_nodes: list[node_pods.NodePods] | None = None
        if derived is not None:
            if unbound is None:
                raise ValueError("a Scheduler given the pods derived per node needs the pods on no node too")
            # a pass's view derived them, most nodes' as the pass before; the pods that would need a home: each node's
            # movable ones and those of the pods on no node (a finished pod needs none)
            of_nodes = in_order = [derived[n.name] for n in self.nodes]
            self.resources = resource_names(snapshot, extra_pods, derived=in_order, unbound=unbound)
            rescheduled: int = sum(map(len, map(_MOVABLE, in_order))) + sum(map(_NEEDS_RESCHEDULING, unbound))
        else:
            self.resources = resource_names(snapshot, extra_pods)
        self.r_index = {name: i for i, name in enumerate(self.resources)}
        closed = set(closed_nodes)
        self.node_open = np.array([
            not (n.unschedulable or n.deleting or not n.ready or n.name in closed
                 or n.being_disrupted) for n in self.nodes], dtype=bool)
        self.node_labels = LabelTable([self._node_labels(n) for n in self.nodes])
        by_taints: dict[tuple[Any, ...], list[int]] = {}
        for i, n in enumerate(self.nodes):
            if n.taints:
                by_taints.setdefault(n.taints, []).append(i)
        self.taint_sets = {t: np.array(m, dtype=np.int64) for t, m in by_taints.items()}
        self.node_alloc = self.rows([n.allocatable for n in self.nodes])
        self._pod_vecs, self._pod_needs = _requests_kept(self.resources)
        self.derived: list[node_pods.NodePods] | None = of_nodes
        if of_nodes is not None:
            # the pods on each node and their requests summed (the same integers `_bind` sums)
            #: the active pods bound to each node, by node index
            self.pods_on: list[Sequence[Pod]] = [d.pods for d in of_nodes]
            used = np.array([d.requested(self.resources) for d in of_nodes],
                            dtype=np.int64).reshape(self.node_alloc.shape)
        else:
            self.pods_on, used, rescheduled = self._bind(snapshot)
        self.node_free = self.node_alloc - used
        self.max_bins = self.N + rescheduled + len(extra_pods) + 1
        self.pools = self._cached_pools(snapshot)
        self.pool_order = sorted(range(len(self.pools)),
                                 key=lambda i: (-self.pools[i].pool.weight, self.pools[i].pool.name))
        self._classes: dict[Interned, list[_Class]] = {}
        #: class key -> (groups registered when computed, `memberships`)
        self._memberships: dict[Interned, tuple[int, tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]]]] = {}
        self._pool_usage: list[IntArray] | None = None
        self._pool_charges: list[tuple[int, IntArray] | None] | None = None
        self._counted: dict[int, tuple[int, list[Pod]]] = {}
        #: `SimState._narrowed`'s facts of a claim's offerings, by (pool, the offerings' mask as bytes)
        self._offering_facts: dict[tuple[int, bytes], tuple[IntArray, dict[str, int]]] = {}
        self.groups: list[_Group] = []
        self._group_ids: dict[tuple[Any, ...], int] = {}
        #: the node filters of topology spreads that honour the pod's node affinity (`_spread_key`), by id
        #: (nodeSelector, required node terms, tolerations: None unless the spread honours taints)
        self._node_filters: list[tuple[Mapping[str, str], tuple[tuple[Requirement, ...], ...],
                                       tuple[Toleration, ...] | None]] = []
        self._node_filter_ids: dict[tuple[Any, ...], int] = {}
        self.topology_keys: dict[str, int] = {LABEL_HOSTNAME: 0}
        self._domain_codes: dict[str, tuple[dict[str, int], IntArray, list[IntArray]]] = {}
        self._build_domains(LABEL_HOSTNAME)
        self._register_groups([*snapshot.pods, *extra_pods])

    def _bind(self, snapshot: Snapshot) -> tuple[list[Sequence[Pod]], IntArray, int]:
        """The snapshot's active pods sorted onto their nodes (``pods_on``), what they use per node, and how many
        pods of the snapshot need a home when moved (`Pod.needs_rescheduling`)."""
        pods_on: list[list[Pod]] = [[] for _ in range(self.N)]
        # what the bound pods use, summed per node from one row per distinct requests (replicas share theirs)
        kind_of: dict[Interned, int] = {}
        kinds: list[IntArray] = []
        at_node: list[int] = []
        of_kind: list[int] = []
        rescheduled = 0
        # the loop over every pod of the snapshot: its lookups bound to locals
        node_at, kind_at = self.node_index.get, kind_of.get
        add_node, add_kind = at_node.append, of_kind.append
        for pod in snapshot.pods:
            rescheduled += pod.needs_rescheduling
            at = node_at(pod.node_name or "")
            if at is not None and not pod.is_terminal:
                pods_on[at].append(pod)
                kind = kind_at(pod.requests_key)
                if kind is None:
                    kind = kind_of[pod.requests_key] = len(kinds)
                    kinds.append(self.pod_vec(pod))
                add_node(at)
                add_kind(kind)
        used = np.zeros_like(self.node_alloc)
        if kinds:
            # how many pods of each kind per node, times each kind's requests (integers: exact)
            k = len(kinds)
            per_node = np.bincount(np.array(at_node, dtype=np.int64) * k + np.array(of_kind, dtype=np.int64),
                                   minlength=self.N * k).reshape(self.N, k)
            used = per_node @ np.array(kinds, dtype=np.int64).reshape(k, len(self.resources))
        return cast(list[Sequence[Pod]], pods_on), used, rescheduled

    # -- helpers -------------------------------------------------------------------------------------
    def vec(self, mapping: Mapping[str, int]) -> IntArray:
        """The amounts of ``mapping`` in the order of ``resources`` (0 where it has none; others ignored)."""
        row: IntArray = self.rows([mapping])[0]
        return row

    def rows(self, mappings: Sequence[Mapping[str, int]]) -> IntArray:
        """`vec` of each mapping, one row each (built as lists, then one array)."""
        names = self.resources
        return np.array([[m.get(name, 0) for name in names] for m in mappings],
                        dtype=np.int64).reshape(len(mappings), len(names))

    def pod_vec(self, pod: Pod) -> IntArray:
        """``vec`` of the pod's requests, made once per distinct requests (read-only: shared)."""
        hit = self._pod_vecs.get(pod.requests_key)
        if hit is None:
            hit = self.vec(pod.spec.requests)
            hit.flags.writeable = False
            self._pod_vecs[pod.requests_key] = hit
        return hit

    def pod_needs(self, pod: Pod) -> tuple[tuple[int, int], ...]:
        """The pod's non-zero requests as (resource index, amount), made once per distinct requests: the columns
        a bin's free room is compared on."""
        hit = self._pod_needs.get(pod.requests_key)
        if hit is None:
            vec = self.pod_vec(pod)
            hit = tuple((int(r), int(vec[r])) for r in vec.nonzero()[0])
            self._pod_needs[pod.requests_key] = hit
        return hit

    @staticmethod
    def _node_labels(node: Node) -> Mapping[str, str]:
        if LABEL_HOSTNAME in node.labels:
            return node.labels
        labels = dict(node.labels)
        labels[LABEL_HOSTNAME] = node.name
        return labels

    def _cached_pools(self, snapshot: Snapshot) -> list[_Pool]:
        """``_build_pools``, reused while the same NodePool, InstanceType and DaemonSet objects come back with the
        same resource names: a planner's passes and validations build a Scheduler each, from snapshots that share
        those, and building the offerings was a sixth of a back-test's time. The pools are read-only once built.
        NodePools and DaemonSets are compared by value (their repr), InstanceTypes by identity."""
        # NodePools and DaemonSets by value (a planner builds them again for every snapshot: DisruptionPolicies are
        # merged into the NodePools), the catalog's many InstanceTypes by identity (parsed once, kept)
        entries = list(_POOLS_CACHE.values())  # a planner's pass and a validation may build Schedulers in two threads
        for entry in entries:  # the same objects: no repr (a planner's snapshots share them while nothing changed)
            if entry.holds(self.resources, snapshot):
                return entry.pools
        key = (tuple(self.resources), repr(snapshot.nodepools), repr(snapshot.daemonsets),
               tuple(map(id, snapshot.instance_types)))
        hit = _POOLS_CACHE.get(key)
        if hit is not None and _same(hit.instance_types, snapshot.instance_types):
            pools = hit.pools
        else:
            pools = self._build_pools(snapshot)
        # kept with these objects (the newest entry), so the next snapshot holding them takes the first way
        _POOLS_CACHE.keep(key, _PoolsEntry(tuple(self.resources), tuple(snapshot.nodepools),
                                           tuple(snapshot.daemonsets), tuple(snapshot.instance_types), pools))
        return pools

    def _build_pools(self, snapshot: Snapshot) -> list[_Pool]:
        pools = []
        for pool in snapshot.nodepools:
            types: list[InstanceType] = []
            combo_type: list[int] = []
            combo_price: list[float] = []
            combo_zone: list[str] = []
            combo_ct: list[str] = []
            combo_labels: list[Mapping[str, str]] = []
            extra_labels = dict(pool.labels)
            for req in pool.requirements:
                if (req.key not in TYPE_KEYS and req.operator == "In" and req.values
                        and not any(req.key in it.labels for it in snapshot.instance_types)):
                    extra_labels.setdefault(req.key, req.values[0])
            for it in snapshot.instance_types:
                base = {LABEL_INSTANCE_TYPE: it.name, "kubernetes.io/arch": "amd64", LABEL_OS: "linux",
                        **it.labels, **extra_labels, LABEL_NODEPOOL: pool.name}
                t_index = len(types)
                added = False
                for off in it.offerings:
                    if not off.available:
                        continue
                    labels = {**base, LABEL_ZONE: off.zone, LABEL_CAPACITY_TYPE: off.capacity_type}
                    if not requirements_match(pool.requirements, labels):
                        continue
                    combo_type.append(t_index)
                    combo_price.append(off.price)
                    combo_zone.append(off.zone)
                    combo_ct.append(off.capacity_type)
                    combo_labels.append(labels)
                    added = True
                if added:
                    types.append(it)
            ds_overhead = self._daemonset_overhead(pool)
            type_capacity = self.rows([it.capacity for it in types])
            type_alloc = type_capacity - self.rows([it.overhead for it in types]) - ds_overhead
            pools.append(_Pool(pool, types, type_alloc, type_capacity, np.array(combo_type, dtype=np.int64),
                               np.array(combo_price, dtype=np.float64), combo_zone, combo_ct,
                               LabelTable(combo_labels)))
        return pools

    def _daemonset_overhead(self, pool: NodePool) -> IntArray:
        return self.vec(daemonset_requests(self.snapshot.daemonsets, pool))

    # -- topology groups -------------------------------------------------------------------------------
    def _group(self, kind: str, key: str, selector: Any, namespaces: frozenset[str] | None,
               term: PodAffinityTerm | None = None) -> int:
        gkey = (kind, key, selector, namespaces, term)
        gid = self._group_ids.get(gkey)
        if gid is None:
            gid = self._group_ids[gkey] = len(self.groups)
            self.groups.append(_Group(kind, key, selector, namespaces, term))
            self.topology_keys.setdefault(key, len(self.topology_keys))
            if key not in self._domain_codes:
                self._build_domains(key)
        return gid

    @staticmethod
    def _term_namespaces(term: PodAffinityTerm, own_ns: str) -> frozenset[str] | None:
        if term.all_namespaces:
            return None
        return term.namespaces if term.namespaces is not None else frozenset((own_ns,))

    def _register_groups(self, pods: Sequence[Pod]) -> None:
        # the first pod of each distinct groups key, in the order the keys first come, found in C (every pod of
        # every pass; most have none): the keys in that order, each then given its first pod (an update keeps a
        # key's place, and the pods go in backwards, so the first one is the value left)
        first: dict[Interned | None, Pod | None] = dict.fromkeys(map(_GROUPS_KEY, pods))
        first.update(zip(map(_GROUPS_KEY, reversed(pods)), reversed(pods), strict=True))
        first.pop(None, None)
        for pod in cast(Iterable[Pod], first.values()):
            s = pod.spec
            for sp in s.spread:
                self._group("match", self._spread_key(sp, s), sp.selector, frozenset((pod.namespace,)))
            for term in (*s.pod_affinity, *(t for _, t in s.preferred_pod_affinity)):
                self._group("match", term.topology_key, term.selector, self._term_namespaces(term, pod.namespace))
            for term in (*s.pod_anti_affinity, *(t for _, t in s.preferred_pod_anti_affinity)):
                self._group("match", term.topology_key, term.selector, self._term_namespaces(term, pod.namespace))
            for term in s.pod_anti_affinity:
                self._group("owner", term.topology_key, term.selector,
                            self._term_namespaces(term, pod.namespace), term)

    def _spread_key(self, sp: TopologySpread, spec: SchedulingSpec) -> str:
        """The key a topology spread's group counts under. kube-scheduler's ``nodeAffinityPolicy: Honor`` (the
        default) counts only the pods on nodes the spreading pod's node selector and required node affinity
        admit, and ``nodeTaintsPolicy: Honor`` only those on nodes whose taints it tolerates, so such a spread
        counts under its own key, ``KEY|FILTER``: the topology key's domains, with every node (and offering) the
        filter refuses in none (`_build_domains`). The hostname key needs none: a node the pod may not use is
        never one of its eligible domains, so what is counted there is never read."""
        if sp.topology_key == LABEL_HOSTNAME:
            return sp.topology_key
        by_affinity = sp.node_affinity_policy == "Honor" and bool(spec.node_selector or spec.required_node_terms)
        by_taints = sp.node_taints_policy == "Honor" and self._taints_refuse(spec.tolerations)
        if not (by_affinity or by_taints):
            return sp.topology_key
        selector = spec.node_selector if by_affinity else {}
        terms = (spec.required_node_terms or ()) if by_affinity else ()
        tolerations = spec.tolerations if by_taints else None
        fkey = (tuple(sorted(selector.items())), terms, tolerations)
        fid = self._node_filter_ids.get(fkey)
        if fid is None:
            fid = self._node_filter_ids[fkey] = len(self._node_filters)
            self._node_filters.append((selector, terms, tolerations))
        return f"{sp.topology_key}{FILTERED}{fid}"

    def _taints_refuse(self, tolerations: tuple[Toleration, ...]) -> bool:
        """Whether some node or NodePool has a NoSchedule or NoExecute taint that ``tolerations`` do not
        tolerate (else ``nodeTaintsPolicy: Honor`` filters out nothing)."""
        return any(blocking_taints(tolerations, taints) for taints in self.taint_sets) or any(
            blocking_taints(tolerations, pool.pool.taints) for pool in self.pools)

    def _tolerated(self, tolerations: tuple[Toleration, ...]) -> BoolArray:
        """Per existing node: are its NoSchedule and NoExecute taints all tolerated?"""
        ok = np.ones(self.N, dtype=bool)
        for taints, members in self.taint_sets.items():
            if blocking_taints(tolerations, taints):
                ok[members] = False
        return ok

    def _build_domains(self, key: str) -> None:
        """Domain codes for a topology key: one per value seen on nodes or NodePool offerings; the
        hostname key uses the bin index itself. A filtered key (`_spread_key`) shares its topology key's codes,
        -1 (no domain: not counted) on the nodes and offerings its filter refuses."""
        if key == LABEL_HOSTNAME:
            self._domain_codes[key] = ({}, np.arange(self.N, dtype=np.int64), [])
            return
        if FILTERED in key:
            label, fid = key.split(FILTERED)
            if label not in self._domain_codes:
                self._build_domains(label)
            lookup, node_codes, pool_codes = self._domain_codes[label]
            selector, terms, tolerations = self._node_filters[int(fid)]

            def admitted(table: LabelTable) -> BoolArray:
                ok = table.terms(terms) if terms else np.ones(len(table), dtype=bool)
                return ok & table.selector(selector) if selector else ok

            nodes_ok = admitted(self.node_labels)
            if tolerations is not None:
                nodes_ok &= self._tolerated(tolerations)
            self._domain_codes[key] = (lookup, np.where(nodes_ok, node_codes, -1), [
                np.full_like(codes, -1) if tolerations is not None and blocking_taints(tolerations, pool.pool.taints)
                else np.where(admitted(pool.combo_labels), codes, -1)
                for pool, codes in zip(self.pools, pool_codes, strict=True)])
            return
        codes_n, lookup, _ = self.node_labels.column(key)
        lookup = dict(lookup)
        node_codes = codes_n.copy()
        pool_codes = []
        for pool in self.pools:
            p_codes, _, p_values = pool.combo_labels.column(key)
            remap = np.array([lookup.setdefault(v, len(lookup)) for v in p_values] + [-1], dtype=np.int64)
            pool_codes.append(remap[p_codes])
        self._domain_codes[key] = (lookup, node_codes, pool_codes)

    def domain_count(self, key: str) -> int:
        if key == LABEL_HOSTNAME:
            return self.max_bins
        return len(self._domain_codes[key][0])

    def domain_value(self, key: str, code: int) -> str:
        lookup = self._domain_codes[key][0]
        for value, c in lookup.items():
            if c == code:
                return value
        return ""

    # -- pod classes -----------------------------------------------------------------------------------
    def classes(self, pod: Pod) -> list[_Class]:
        key = pod.class_key
        hit = self._classes.get(key)
        if hit is None:
            hit = self._classes[key] = [self._make_class(pod, spec) for spec in relaxations(pod.spec)]
        return hit

    def _make_class(self, pod: Pod, spec: SchedulingSpec) -> _Class:
        node_ok = self.node_labels.terms(spec.required_node_terms)
        if spec.node_selector:
            node_ok &= self.node_labels.selector(spec.node_selector)
        affinity_ok = node_ok.copy()
        tolerated = self._tolerated(spec.tolerations)
        node_ok &= tolerated
        pool_combo_ok = [p.combo_ok(spec) for p in self.pools]
        can_launch = any(ok is not None for ok in pool_combo_ok)
        constraints: list[_Constraint] = []
        for sp in spec.spread:
            gid = self._group("match", self._spread_key(sp, spec), sp.selector, frozenset((pod.namespace,)))
            constraints.append(self._spread_constraint(pod, sp, gid, pool_combo_ok, affinity_ok=affinity_ok,
                                                       tolerated=tolerated))
        for kind, terms in (("affinity", spec.pod_affinity), ("anti", spec.pod_anti_affinity)):
            for term in terms:
                ns = self._term_namespaces(term, pod.namespace)
                gid = self._group("match", term.topology_key, term.selector, ns)
                self_match = int(selector_matches(term.selector, pod.labels)
                                 and (ns is None or pod.namespace in ns))
                constraints.append(_Constraint(kind, gid, term.topology_key, self_match=self_match))
        matched, owned, inverse = self._roles(pod)
        constraints.extend(inverse)
        for key in {c.key for c in constraints}:
            if key not in self._domain_codes:
                self._build_domains(key)
        ports = _host_ports(spec)
        pool_ok = np.array([ok is not None for ok in pool_combo_ok], dtype=bool)
        return _Class(spec, pod.namespace, node_ok, pool_combo_ok, constraints, matched, owned, ports,
                      can_launch, pool_ok)

    def _roles(self, pod: Pod) -> tuple[list[int], list[int], list[_Constraint]]:
        """The pod's part in the topology groups registered now: the groups whose count it raises (those whose
        selector matches it, and the anti-affinity "owner" groups of its own required terms), and the inverse
        anti-affinity it must respect (owners of a term that selects it). The same for every form of the pod."""
        matched: list[int] = []
        owned: list[int] = []
        inverse: list[_Constraint] = []
        for gid, g in enumerate(self.groups):
            if g.kind == "match":
                if (g.namespaces is None or pod.namespace in g.namespaces) and selector_matches(g.selector, pod.labels):
                    matched.append(gid)
            elif (g.term is not None and g.term in pod.spec.pod_anti_affinity
                  and g.namespaces == self._term_namespaces(g.term, pod.namespace)):
                owned.append(gid)
            # inverse anti-affinity: existing owners of a term that selects this pod
            if g.kind == "owner" and (g.namespaces is None or pod.namespace in g.namespaces) \
                    and selector_matches(g.selector, pod.labels):
                inverse.append(_Constraint("anti", gid, g.key))
        return matched, owned, inverse

    def memberships(self, pod: Pod) -> tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]]:
        """What counting a bound pod needs of its class: the groups whose counts it raises (`_Class.matched` and
        `.owned`) and its host ports; read from its class when that is made, else found without making it (a
        simulation counts every bound pod but places only some: kube-scheduler's the pending ones, a
        consolidation the pods of a candidate up to the first that finds no room)."""
        key = pod.class_key
        hit = self._memberships.get(key)
        if hit is not None and hit[0] == len(self.groups):
            return hit[1]
        made = self._classes.get(key)
        if made is not None:
            cls = made[-1]
            found = ((*cls.matched, *cls.owned), cls.host_ports)
        else:
            matched, owned, _ = self._roles(pod)
            found = ((*matched, *owned), _host_ports(pod.spec))
        self._memberships[key] = (len(self.groups), found)
        return found

    def _spread_constraint(self, pod: Pod, sp: TopologySpread, gid: int, pool_combo_ok: list[BoolArray | None], *,
                           affinity_ok: BoolArray, tolerated: BoolArray) -> _Constraint:
        """The spread's constraint: its eligible domains are the nodes its inclusion policies admit
        (``nodeAffinityPolicy``: the pod's node affinity, Honor by default; ``nodeTaintsPolicy``: the node's
        taints tolerated, Ignore by default) and, for keys other than the hostname, what the NodePools the pod
        may launch in offer."""
        self_match = int(selector_matches(sp.selector, pod.labels))
        honored = affinity_ok if sp.node_affinity_policy == "Honor" else np.ones(self.N, dtype=bool)
        if sp.node_taints_policy == "Honor":
            honored = honored & tolerated
        if sp.topology_key == LABEL_HOSTNAME:
            return _Constraint("spread", gid, sp.topology_key, sp.max_skew, self_match, sp.min_domains,
                               honored.nonzero()[0], new_domain=any(ok is not None for ok in pool_combo_ok))
        if sp.topology_key not in self._domain_codes:
            self._build_domains(sp.topology_key)
        _, node_codes, pool_codes = self._domain_codes[sp.topology_key]
        eligible_nodes = node_codes[(node_codes >= 0) & honored]
        codes = set(eligible_nodes.tolist())
        for ok, pc in zip(pool_combo_ok, pool_codes, strict=True):
            if ok is not None:
                codes.update(pc[ok & (pc >= 0)].tolist())
        return _Constraint("spread", gid, self.groups[gid].key, sp.max_skew, self_match, sp.min_domains,
                           np.array(sorted(codes), dtype=np.int64))

    def new_state(self) -> SimState:
        return SimState(self)

    def leaving_order(self, b: int) -> tuple[Pod, ...]:
        """Node ``b``'s own pods that need a new home when it goes (`Pod.needs_rescheduling`: a terminating
        StatefulSet pod's replacement needs its room too), in `placement_order`: sorted once while the node holds
        the same pods, pass after pass (`ebb.core.node_pods`)."""
        if self.derived is not None:  # derived from the very pods of ``pods_on[b]``
            return self.derived[b].leaving_order
        return node_pods.of_node(self.nodes[b].name, self.pods_on[b]).leaving_order

    def counted_on(self, b: int) -> list[Pod]:
        """Node ``b``'s own pods, not being deleted, that raise a topology group's count (`memberships`), as of the
        groups registered now: most pods raise none, and a removal only needs these (made once per node, and again
        after new groups)."""
        hit = self._counted.get(b)
        if hit is not None and hit[0] == len(self.groups):
            return hit[1]
        if self.derived is not None and not any(self.memberships(first)[0]
                                                for _, first, _ in self.derived[b].classes):
            pods = []  # a pod's memberships are its class's: none of the node's classes (its pods not deleting) has any
        else:
            pods = [p for p in self.pods_on[b] if not p.deleting and self.memberships(p)[0]]
        self._counted[b] = (len(self.groups), pods)
        return pods

    def pool_charge(self, b: int) -> tuple[int, IntArray] | None:
        """What node ``b`` counts against its NodePool's limits, its capacity then 1 (for ``nodes``), with the pool's
        index; None when no NodePool of the snapshot owns it or it is being deleted (made once per node)."""
        if self._pool_charges is None:
            index = {p.pool.name: i for i, p in enumerate(self.pools)}
            charged = [(at, index[n.nodepool]) for at, n in enumerate(self.nodes)
                       if not n.deleting and n.nodepool is not None and n.nodepool in index]
            capacity = np.ones((len(charged), len(self.resources) + 1), dtype=np.int64)
            capacity[:, :-1] = self.rows([self.nodes[at].capacity for at, _ in charged])
            charges: list[tuple[int, IntArray] | None] = [None] * self.N
            for row, (at, i) in enumerate(charged):
                charges[at] = (i, capacity[row])  # read-only rows
            self._pool_charges = charges
        return self._pool_charges[b]

    def pool_usage(self) -> list[IntArray]:
        """Per NodePool: the capacity of its nodes that are not being deleted, then their count: what its limits
        are measured against when a simulation starts (made once; every state starts from a copy)."""
        if self._pool_usage is None:
            usage = [np.zeros(len(self.resources) + 1, dtype=np.int64) for _ in self.pools]
            for b in range(self.N):
                charged = self.pool_charge(b)
                if charged is not None:
                    usage[charged[0]] += charged[1]
            self._pool_usage = usage
        return self._pool_usage


#: the reason `SimState.place` gives a pod it could not place when asked not to explain it
UNEXPLAINED = "not explained"


def _host_ports(spec: SchedulingSpec) -> tuple[tuple[str, int, str], ...]:
    """The host ports a pod of ``spec`` takes on its node, as (protocol, port, host IP): `_Class.host_ports`."""
    return tuple((hp.protocol, hp.port, hp.host_ip) for hp in spec.host_ports)


def has_pod_affinity(classes: Sequence[_Class]) -> bool:
    """Whether some form of the pod requires pod affinity: a pod placed later may let it in (`place_all` retries
    it)."""
    return any(c.kind == "affinity" for cls in classes for c in cls.constraints)


def _any(values: np.ndarray[Any, Any]) -> bool:
    """``values.any()`` without numpy's Python-level reduction wrapper (a quarter of its time on a mask of a few
    dozen offerings): the simulator's innermost loops ask it of such small masks."""
    return bool(_count_nonzero(values))


_count_nonzero = np.count_nonzero
#: numpy's reductions called as ufuncs, in C: an array's ``.all()``, ``.max()`` and ``.min()`` and ``np.ones`` run a
#: Python wrapper first, which the simulator's inner loops paid on every placement
_minimum = np.minimum.reduce
_maximum = np.maximum.reduce
_all_along = np.logical_and.reduce


def _all_of_rows(values: BoolArray) -> BoolArray:
    """``values.all(axis=1)``: per row of a 2-D mask, whether every entry is set."""
    rows: BoolArray = _all_along(values, axis=1)
    return rows


def _trues(n: int) -> BoolArray:
    """``np.ones(n, dtype=bool)``: a new mask of ``n`` set entries."""
    mask: BoolArray = np.empty(n, dtype=bool)
    mask.fill(True)
    return mask


# --------------------------------------------------------------------------------------------------
# Mutable working state


class SimState:
    """A simulation in progress over one Scheduler. Mutations are journalled; see mark()/rollback()."""

    def __init__(self, sched: Scheduler) -> None:
        self.s = sched
        b = sched.max_bins
        r = len(sched.resources)
        self.free = np.zeros((b, r), dtype=np.int64, order="F")  # columns contiguous: per-resource scans
        self.free[: sched.N] = sched.node_free
        self.open = np.zeros(b, dtype=bool)
        self.open[: sched.N] = sched.node_open
        self.n_bins = sched.N
        self.claims: dict[int, _Claim] = {}
        self.bin_pool = np.full(b, -1, dtype=np.int64)
        self._removed: set[int] = set()
        self.pod_by_key: dict[str, Pod] = {}
        self._pending_mask: BoolArray = np.ones(0, dtype=bool)
        self.journal: list[tuple[Any, ...]] = []
        self.placed: dict[str, int] = {}  # pod key -> bin, for pods this simulation moved or placed
        self.moved_onto: dict[int, list[Pod]] = {}
        self.bin_codes: dict[str, IntArray] = {}
        for key, (_, node_codes, _) in sched._domain_codes.items():
            self._ensure_key(key, node_codes)
        self.counts: list[IntArray] = []
        self.ports: dict[int, set[tuple[str, int, str]]] = {}
        self.aside: dict[int, str] = {}  # node bin -> why no pod placed from now on may go there (`set_aside`)
        self.lifted: set[str] = set()  # pods taken off their node to be placed again (`lift`)
        self.pool_used = [usage.copy() for usage in sched.pool_usage()]
        #: the last pod `place` put somewhere, when a pod just like it may follow it there without the search
        #: (`place`, `_follow`): (its classes, its requests, its bin, the journal's last entry after it)
        self._run: tuple[list[_Class], IntArray, int, tuple[Any, ...]] | None = None
        #: the last pod `place` found no room for on the open bins: (its classes, its requests, the journal's last
        #: entry then, None when empty); while that is still the last entry, a pod just like it finds none either
        self._no_room: tuple[list[_Class], IntArray, tuple[Any, ...] | None] | None = None
        self._init_counts()

    def _ensure_key(self, key: str, node_codes: IntArray) -> None:
        if key in self.bin_codes:
            return
        codes = np.full(self.s.max_bins, -1, dtype=np.int64)
        if key == LABEL_HOSTNAME:
            codes[:] = np.arange(self.s.max_bins)
        else:
            codes[: self.s.N] = node_codes
            for b, claim in self.claims.items():
                codes[b] = self._claim_code(claim, key)
        self.bin_codes[key] = codes

    def _init_counts(self) -> None:
        """The topology counts and host ports of the bound pods (not those being deleted), a class at a time:
        replicas share their class, so the per-pod work is one dict lookup. Only the classes' `memberships` are
        needed, not the classes themselves."""
        s = self.s
        nodes_of: dict[Interned, list[int]] = {}
        first: dict[Interned, Pod] = {}
        # each node's classes and how many of its pods are of each: as a pass's view found them, else found now
        per_node = ([d.classes for d in s.derived] if s.derived is not None
                    else [node_pods.classes_of(pods) for pods in s.pods_on])
        for i, classes in enumerate(per_node):
            for class_key, pod, count in classes:
                at = nodes_of.get(class_key)
                if at is None:
                    nodes_of[class_key] = at = []
                    first[class_key] = pod
                at.extend(repeat(i, count))
        bound = [(s.memberships(first[key]), at) for key, at in nodes_of.items()]
        for key in s.topology_keys:
            self._ensure_key(key, s._domain_codes[key][1])
        self.counts = [np.zeros(s.domain_count(g.key), dtype=np.int64) for g in s.groups]
        for (gids, host_ports), at in bound:
            if gids:
                where = np.array(at, dtype=np.int64)
                for gid in gids:
                    codes = self.bin_codes[s.groups[gid].key][where]
                    np.add.at(self.counts[gid], codes[codes >= 0], 1)
            if host_ports:
                for i in at:
                    self.ports.setdefault(i, set()).update(host_ports)

    def _sync_groups(self) -> None:
        """Groups registered after this state was made (a new pod class) start from existing pods."""
        s = self.s
        for gid in range(len(self.counts), len(s.groups)):
            g = s.groups[gid]
            if g.key not in self.bin_codes:
                self._ensure_key(g.key, s._domain_codes[g.key][1])
            arr = np.zeros(s.domain_count(g.key), dtype=np.int64)
            codes = self.bin_codes[g.key]
            for i, pods in enumerate(s.pods_on):
                if i in self._removed:
                    continue
                for pod in pods:
                    if pod.key in self.placed or pod.key in self.lifted or pod.deleting:
                        continue
                    if self._counts_in(g, gid, pod) and codes[i] >= 0:
                        arr[codes[i]] += 1
            for key, b in self.placed.items():
                pod = self.pod_by_key[key]
                if self._counts_in(g, gid, pod) and codes[b] >= 0:
                    arr[codes[b]] += 1
            self.counts.append(arr)

    def _counts_in(self, g: _Group, gid: int, pod: Pod) -> bool:
        cls = self.s.classes(pod)[-1]
        return gid in cls.matched or gid in cls.owned

    # -- journal ---------------------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self.journal)

    def rollback(self, mark: int) -> None:
        j = self.journal
        while len(j) > mark:
            entry = j.pop()
            op = entry[0]
            # the three entries every placed pod makes first
            if op == "arr":
                _, arr, idx, old = entry
                arr[idx] = old
            elif op == "moved":
                _, b, n = entry
                del self.moved_onto[b][n:]
            elif op == "placed":
                _, key, old = entry
                if old is None:
                    self.placed.pop(key, None)
                else:
                    self.placed[key] = old
            elif op == "claim_set":
                _, claim, mask, total, n_pods, charged, kept = entry
                claim.mask, claim.total, claim.charged, claim.kept = mask, total, charged, kept
                del claim.pods[n_pods:]
            elif op == "claim_new":
                _, b = entry
                del self.claims[b]
                self.n_bins = b
                self.open[b] = False
                self.free[b] = 0
            elif op == "moved_clear":
                _, b, old_list = entry
                self.moved_onto[b] = old_list
            elif op == "port":
                _, b, port = entry
                self.ports[b].discard(port)
            elif op == "port_clear":
                _, b, old_ports = entry
                self.ports[b] = old_ports
            elif op == "removed":
                self._removed.discard(entry[1])
            elif op == "pool":
                _, p, old = entry
                self.pool_used[p] = old

    def _set(self, arr: Any, idx: Any, value: Any) -> None:
        self.journal.append(("arr", arr, idx, arr[idx].copy() if isinstance(arr[idx], np.ndarray) else arr[idx]))
        arr[idx] = value

    # -- queries ---------------------------------------------------------------------------------------
    def bin_name(self, b: int) -> str:
        if b < self.s.N:
            return self.s.nodes[b].name
        return self.claims[b].hostname

    def pods_on_bin(self, b: int) -> list[Pod]:
        """Pods currently on a bin: the node's own (not moved away) plus pods moved onto it."""
        own = [p for p in self.s.pods_on[b] if p.key not in self.placed] if b < self.s.N else []
        return own + list(self.moved_onto.get(b, ()))

    # -- mutations -------------------------------------------------------------------------------------
    def close_bin(self, b: int) -> None:
        """No further pods go to this bin (a replacement already promised to one command)."""
        self._set(self.open, b, False)

    def set_aside(self, name: str, why: str) -> None:
        """No pod placed from now on goes to this existing node (the pods already placed there stay), and a pod
        that finds no home says the node was set aside and ``why``. A rollback past it opens the node again."""
        b = self.s.node_index[name]
        if self.open[b]:
            self._set(self.open, b, False)
            self.aside[b] = why

    def lift(self, pods: Sequence[Pod]) -> None:
        """Take bound pods off their nodes' topology counts, to be placed again (pods leaving a node that is going
        away, while the node itself stays a topology domain); placing one counts it where it goes."""
        for pod in pods:
            b = self.s.node_index[pod.node_name or ""]
            if pod.key in self.lifted or pod.key in self.placed or pod.deleting:
                continue
            self.lifted.add(pod.key)
            for gid in self.s.memberships(pod)[0]:
                code = self.bin_codes[self.s.groups[gid].key][b]
                if code >= 0:
                    self._set(self.counts[gid], code, self.counts[gid][code] - 1)

    def remove_node(self, name: str) -> list[Pod]:
        """Take a node out: it accepts no pods and its pods leave the topology counts. Returns the pods
        that need a new home (its reschedulable pods, and pods this simulation had moved onto it)."""
        b = self.s.node_index[name]
        moved = self._take_out(b)
        if moved is None:
            return []
        placed = self.placed
        leaving = [p for p in self.s.pods_on[b] if p.needs_rescheduling and p.key not in placed]
        leaving += [p for p in moved if p.needs_rescheduling]
        return leaving

    def remove_node_ordered(self, name: str) -> list[Pod]:
        """``placement_order(remove_node(name))``, without sorting the node's own pods again: they are sorted once
        per Scheduler (`Scheduler.leaving_order`), and only pods this simulation moved onto the node make a sort
        (multi-node consolidation removes each candidate a few times a pass)."""
        b = self.s.node_index[name]
        moved = self._take_out(b)
        if moved is None:
            return []
        placed, derived = self.placed, self.s.derived
        if derived is not None and placed.keys().isdisjoint(derived[b].leaving_keys):
            leaving = list(derived[b].leaving_order)  # none placed elsewhere (a look in C): the usual case
        else:
            leaving = [p for p in self.s.leaving_order(b) if p.key not in placed]
        also = [p for p in moved if p.needs_rescheduling]
        return placement_order(leaving + also) if also else leaving

    def _take_out(self, b: int) -> list[Pod] | None:
        """`remove_node`'s changes to the state, for bin ``b``: the pods this simulation had moved onto it (None
        when it was removed already)."""
        if b in self._removed:
            return None
        self._removed.add(b)
        self.journal.append(("removed", b))
        self._set(self.open, b, False)
        s, placed = self.s, self.placed
        moved = self.moved_onto.get(b, [])
        # the pods on it leave the topology counts (a pod being deleted is in none): of its own pods only the few
        # that are counted at all are looked at (`Scheduler.counted_on`), those not moved away already
        for pod in (*(p for p in s.counted_on(b) if p.key not in placed), *(p for p in moved if not p.deleting)):
            for gid in s.memberships(pod)[0]:
                code = self.bin_codes[s.groups[gid].key][b]
                if code >= 0:
                    self._set(self.counts[gid], code, self.counts[gid][code] - 1)
        if b in self.moved_onto:
            self.journal.append(("moved_clear", b, self.moved_onto[b]))
            self.moved_onto[b] = []
        if b in self.ports:
            self.journal.append(("port_clear", b, self.ports[b]))
            self.ports[b] = set()
        charged = self.s.pool_charge(b)
        if charged is not None:
            p_index, charge = charged
            old = self.pool_used[p_index]
            self.journal.append(("pool", p_index, old))
            self.pool_used[p_index] = old - charge
        return moved

    def place_all(self, pods: Sequence[Pod], max_new: int, *, first_failure: bool = False,
                  on_claim: Callable[[int], None] | None = None,
                  explain: bool = True) -> tuple[dict[str, str], list[str]]:
        """Place pods (largest cpu, then memory first, as Karpenter does: `placement_order`) with at most
        `max_new` new NodeClaims. Returns (pod key -> reason for each unplaceable pod, hostnames of new claims).
        With `first_failure`, stop at the first pod that cannot be placed and that no later placement
        could help (it has no pod affinity): the caller only needs to know that not everything fits.
        `on_claim` is called with a new claim's bin each time a pod goes onto one; it may raise to abandon the
        placement (the caller rolls back). Without `explain` a failure's reason is ``UNEXPLAINED``."""
        return self.place_ordered(placement_order(pods), max_new, first_failure=first_failure, on_claim=on_claim,
                                  explain=explain)

    def place_ordered(self, order: Sequence[Pod], max_new: int, *, first_failure: bool = False,
                      on_claim: Callable[[int], None] | None = None,
                      explain: bool = True) -> tuple[dict[str, str], list[str]]:
        """`place_all` of pods already in `placement_order` (a caller that sorted them once for more than one
        placement: multi-node consolidation's steps, single-node's prefix and rest)."""
        failures: dict[str, str] = {}
        start_claims = len(self.claims)
        pending = order
        while pending:
            # like Karpenter's queue: pods that failed are retried while a round still places something
            # (a pod whose affinity partner was placed later in the round can go now)
            failures, retry = {}, []
            for pod in pending:
                reason = self.place(pod, max_new - (len(self.claims) - start_claims), explain=explain)
                if reason is None:
                    if on_claim is not None and self.placed[pod.key] >= self.s.N:
                        on_claim(self.placed[pod.key])
                else:
                    failures[pod.key] = reason
                    retry.append(pod)
                    if first_failure and not has_pod_affinity(self.s.classes(pod)):
                        return failures, [self.claims[b].hostname for b in sorted(self.claims)][start_claims:]
            if len(retry) == len(pending):
                break
            pending = retry
        return failures, [self.claims[b].hostname for b in sorted(self.claims)][start_claims:]

    def place_first(self, order: Sequence[Pod]) -> tuple[int | None, str | None]:
        """Place pods already in `placement_order` on the bins open now, opening no claim, up to the first that
        finds no room, or that `place_all` could place differently with a new claim allowed: one with preferred
        terms (its strictest form may open a claim before a relaxed one is tried on the open bins) or required
        pod affinity (`place_all` tries it again after the others). Returns that pod's index (None when every
        pod was placed) and why it found no room (None for a pod not tried). `place_all` over the pods from
        that index on, with any `max_new`, then places them as one `place_all` over them all would: the pods
        before it went where they would have gone, since a claim only opens for a pod that finds no room."""
        for index, pod in enumerate(order):
            classes = self.s.classes(pod)
            if len(classes) > 1 or has_pod_affinity(classes):
                return index, None
            why = self.place(pod, 0)
            if why is not None:
                return index, why
        return None, None

    def open_claim_for(self, pod: Pod) -> int | None:
        """Open a new claim and place ``pod`` on it, as `place` does once no open bin takes the pod; the bin, or
        None when no NodePool can launch a node for it. For a pod of one form and no topology constraint, the
        claim is the one `place` would open for it on any state with the same NodePool usage: its offerings
        depend on nothing else."""
        classes = self.s.classes(pod)
        if len(classes) != 1 or classes[0].constraints:
            raise ValueError(f"pod {pod.key}: its claim depends on where the pods before it went")
        cls = classes[0]
        if not cls.can_launch:
            return None
        self._sync_groups()
        req = self.s.pod_vec(pod)
        b = self._open_claim(cls, req)
        if b is not None:
            self._commit(pod, cls, req, b)
        return b

    def launch_floor(self, b: int, without: str | None = None) -> float:
        """The least any instance type claim ``b`` could still launch costs, whatever pods join it (its offerings
        only narrow and its pods only grow): the cheapest offering, anywhere in its pool, of a type it keeps that
        holds its pods; offerings of capacity type ``without`` do not count (inf when nothing is left)."""
        claim = self.claims[b]
        known = claim.floor
        if known is not None and known[0] is claim.mask and known[1] == without:
            return known[2]
        pool = self.s.pools[claim.pool]
        kept = np.zeros(len(pool.types), dtype=bool)
        kept[pool.combo_type[claim.mask]] = True  # types that hold its pods: its offerings are narrowed to them
        floors = pool.type_floor(without)[kept]
        floor = float(_minimum(floors)) if floors.size else float("inf")
        claim.floor = (claim.mask, without, floor)
        return floor

    def place(self, pod: Pod, max_new: int, *, explain: bool = True) -> str | None:
        """Place one pod; None on success, else why it cannot be placed (``UNEXPLAINED`` without ``explain``: the
        sentence costs more than a placement, and a caller that only needs to know may skip it)."""
        req = self.s.pod_vec(pod)
        needs = self.s.pod_needs(pod)
        classes = self.s.classes(pod)
        # nothing changed since a memo was made while the journal's last entry is the same object (entries are only
        # appended and popped, and a popped one never comes back)
        last = self.journal[-1] if self.journal else None
        run = self._run
        if run is not None and run[0] is classes and run[1] is req and run[3] is last:
            last_bin = run[2]
            if last_bin < self.s.N:
                # the node the pod before went to: the nodes before it had no room then and have none now
                takes = all(self.free[last_bin, r] >= amount for r, amount in needs)
            else:
                mask = self._follow(last_bin, req)
                takes = mask is not None
                if mask is not None:
                    self._pending_mask = mask
            if takes:
                self._commit_found(pod, classes, classes[0], req, last_bin)
                return None
        self._sync_groups()
        full = self._no_room
        if full is not None and full[0] is classes and full[1] is req and full[2] is last and len(classes) == 1:
            # the open bins have no room for it (nothing changed since a pod just like it found none): only a new
            # claim is left, as `_find_bin` would find after its search
            cls = classes[0]
            b = self._open_claim(cls, req) if max_new > 0 and cls.can_launch else None
            if b is not None:
                self._commit_found(pod, classes, cls, req, b)
                return None
        else:
            for cls in classes:
                b = self._find_bin(cls, req, needs, max_new)
                if b is not None:
                    self._commit_found(pod, classes, cls, req, b)
                    return None
        self._no_room = (classes, req, last)
        return self._explain(classes[-1], req, max_new) if explain else UNEXPLAINED

    def _commit_found(self, pod: Pod, classes: list[_Class], cls: _Class, req: IntArray, b: int) -> None:
        """`_commit` the pod onto bin ``b``, found for it in its form ``cls``, and remember it for `_follow` when a pod
        just like it may follow it there."""
        self._commit(pod, cls, req, b)
        if len(classes) == 1 and not cls.constraints and not cls.host_ports and (
                b < self.s.N or (len(self.claims) == 1 and not cls.matched and not cls.owned)):
            self._run = (classes, req, b, self.journal[-1])

    def _follow(self, b: int, req: IntArray) -> BoolArray | None:
        """The offerings claim ``b`` keeps when a pod just like the last one placed (onto that claim, the only one)
        joins it, or None when no type holds them both; asked only while nothing else changed since that pod (the
        caller's journal check). What `_find_bin` would find, without its search: that pod found no room on the
        existing nodes and nothing changed there since, and its class adds no topology constraint, host port or
        topology count (`place` remembers only such a pod). The claim's offerings already meet the pod's node
        affinity and its NodePool's limits (the claim's own charge aside, what the NodePool uses is unchanged), so
        only the room is left to check: types that hold the new total. When none does, `_find_bin` looks again (it
        may open another claim)."""
        claim = self.claims[b]
        pool = self.s.pools[claim.pool]
        mask = claim.mask & self._fits(pool, claim.total + req)[pool.combo_type]
        return mask if _any(mask) else None

    def _topology_ok(self, cls: _Class, nb: int) -> BoolArray:
        ok = _trues(nb)
        if not cls.constraints:
            return ok
        is_claim = np.zeros(nb, dtype=bool)
        is_claim[self.s.N:nb] = True
        for c in cls.constraints:
            codes = self.bin_codes[c.key][:nb]
            counts = self.counts[c.group]
            present = codes >= 0
            val = np.where(present, counts[np.maximum(codes, 0)], 0)
            cond = self._condition(c, val, counts)
            if c.kind == "anti":
                ok &= (~present) | cond | (is_claim & ~present)
            else:
                ok &= (present & cond) | (is_claim & ~present)
        return ok

    def _global_min(self, c: _Constraint, counts: IntArray) -> int:
        if c.key == LABEL_HOSTNAME:
            if c.new_domain:
                return 0
            # kube-scheduler's domains: every node the pod's node affinity admits, cordoned or not
            # (nodes this simulation removed are gone), plus the nodes the simulation opened
            nodes = c.eligible if c.eligible is not None else np.arange(self.s.N)
            if self._removed:
                nodes = nodes[~np.isin(nodes, np.fromiter(self._removed, dtype=np.int64))]
            domains = np.concatenate([nodes, np.arange(self.s.N, self.n_bins)])
            return int(counts[domains].min()) if domains.size else 0
        if c.eligible is None or c.eligible.size == 0:
            return 0
        if c.min_domains is not None and c.eligible.size < c.min_domains:
            return 0
        return int(counts[c.eligible].min())

    def _condition(self, c: _Constraint, val: IntArray, counts: IntArray) -> BoolArray:
        if c.kind == "spread":
            return np.asarray(val + c.self_match - self._global_min(c, counts) <= c.max_skew)
        if c.kind == "affinity":
            if c.self_match and not _any(counts):
                return np.ones(val.shape, dtype=bool)
            return np.asarray(val > 0)
        return np.asarray(val == 0)

    def _find_bin(self, cls: _Class, req: IntArray, needs: tuple[tuple[int, int], ...], max_new: int) -> int | None:
        s = self.s
        nb = self.n_bins
        cand = self.open[:nb].copy()
        free = self.free
        for r, amount in needs:
            cand &= free[:nb, r] >= amount
        cand[: s.N] &= cls.node_ok
        if nb > s.N:
            cand[s.N:] &= cls.pool_ok[self.bin_pool[s.N:nb]]
        if cls.constraints and _any(cand):
            cand &= self._topology_ok(cls, nb)
        for found in cand.nonzero()[0]:
            b = int(found)
            if cls.host_ports and self._port_conflict(b, cls.host_ports):
                continue
            if b < s.N:
                return b
            claim = self.claims[b]
            base = claim.mask
            if s.pools[claim.pool].pool.limits:
                within = self._limit_mask(claim.pool, release=claim.charged)
                if within is None:
                    continue
                base = base & within
            mask = self._narrow(claim.pool, base, cls, claim.total + req)
            if mask is not None:
                self._pending_mask = mask
                return b
        if max_new > 0 and cls.can_launch:
            return self._open_claim(cls, req)
        return None

    @staticmethod
    def _fits(pool: _Pool, total: IntArray) -> BoolArray:
        """Per instance type of the pool: has it room for `total`?"""
        return _all_of_rows(pool.type_alloc >= total)

    def _port_conflict(self, b: int, ports: tuple[tuple[str, int, str], ...]) -> bool:
        used = self.ports.get(b)
        if not used:
            return False
        for proto, port, ip in ports:
            for uproto, uport, uip in used:
                if proto == uproto and port == uport and (ip == uip or "0.0.0.0" in (ip, uip)):
                    return True
        return False

    def _narrow(self, p_index: int, mask: BoolArray, cls: _Class, total: IntArray) -> BoolArray | None:
        """The claim's remaining offerings after adding a pod of `cls` with the claim's new total, or
        None when none is left. Narrows undetermined topology domains (e.g. the zone) as Karpenter does."""
        pool = self.s.pools[p_index]
        ok = cls.pool_combo_ok[p_index]
        if ok is None:
            return None
        mask = mask & ok
        if not _any(mask):
            return None
        mask &= self._fits(pool, total)[pool.combo_type]
        if not _any(mask):
            return None
        for c in cls.constraints:
            if c.key == LABEL_HOSTNAME:
                continue
            combo_codes = self.s._domain_codes[c.key][2][p_index]
            counts = self.counts[c.group]
            present = combo_codes >= 0
            val = np.where(present, counts[np.maximum(combo_codes, 0)], 0)
            cond = self._condition(c, val, counts)
            allowed = (~present | cond) if c.kind == "anti" else (present & cond)
            mask &= allowed
            if not _any(mask):
                return None
            if c.kind == "spread":
                # choose the least-populated remaining domain (lowest code on ties), as Karpenter does
                codes_left = combo_codes[mask]
                load = counts[codes_left] * (len(counts) + 1) + codes_left
                mask &= combo_codes == codes_left[load.argmin()]
        for gid in (*cls.matched, *cls.owned):
            key = self.s.groups[gid].key.split(FILTERED)[0]  # pinned to a domain of the topology key itself
            if key == LABEL_HOSTNAME:
                continue
            combo_codes = self.s._domain_codes[key][2][p_index]
            values = combo_codes[mask]
            if values.size and _any(values != values[0]):  # pin the domain so the pod is counted where it runs
                cheapest = int(mask.nonzero()[0][pool.combo_price[mask].argmin()])
                mask &= combo_codes == combo_codes[cheapest]
        return mask if _any(mask) else None

    def _open_claim(self, cls: _Class, req: IntArray) -> int | None:
        s = self.s
        for c in cls.constraints:
            if c.key == LABEL_HOSTNAME and c.kind == "affinity" and not (c.self_match
                                                                        and not _any(self.counts[c.group])):
                return None  # a new node holds none of the pods this pod must share a host with
        for p_index in s.pool_order:
            pool = s.pools[p_index]
            if cls.pool_combo_ok[p_index] is None:
                continue
            limit_ok = self._limit_mask(p_index)
            if limit_ok is None:
                continue
            mask = self._narrow(p_index, limit_ok, cls, req)
            if mask is None:
                continue
            b = self.n_bins
            claim = _Claim(p_index, f"new-{pool.pool.name}-{b - s.N + 1}", _trues(0),
                           np.zeros(len(s.resources), dtype=np.int64))
            claim.mask = limit_ok
            self.claims[b] = claim
            self.journal.append(("claim_new", b))
            self.n_bins = b + 1
            self.open[b] = True
            self.bin_pool[b] = p_index
            cheapest = int(mask.nonzero()[0][pool.combo_price[mask].argmin()])
            claim.charged = pool.type_charge[pool.combo_type[cheapest]]
            old = self.pool_used[p_index]
            self.journal.append(("pool", p_index, old))
            self.pool_used[p_index] = old + claim.charged
            self._pending_mask = mask
            return b
        return None

    def _limit_mask(self, p_index: int, release: IntArray | None = None) -> BoolArray | None:
        """Offerings whose instance type keeps the NodePool within its limits; `release` is what a
        claim being grown is already charged (it is replaced, not added)."""
        pool = self.s.pools[p_index]
        limits = pool.pool.limits
        mask = _trues(len(pool.combo_type))
        if not limits:
            return mask
        used = self.pool_used[p_index] if release is None else self.pool_used[p_index] - release
        if "nodes" in limits and used[-1] + 1 > limits["nodes"]:
            return None
        type_ok = _trues(len(pool.types))
        for name, limit in limits.items():
            idx = self.s.r_index.get(name)
            if idx is not None:
                type_ok &= pool.type_capacity[:, idx] + used[idx] <= limit
        mask &= type_ok[pool.combo_type]
        return mask if _any(mask) else None

    def _claim_code(self, claim: _Claim, key: str) -> int:
        if key == LABEL_HOSTNAME:
            return -1
        combo_codes = self.s._domain_codes[key][2][claim.pool] if key in self.s._domain_codes else None
        if combo_codes is None:
            return -1
        values = combo_codes[claim.mask]
        return int(values[0]) if values.size and not _any(values != values[0]) else -1

    def _commit(self, pod: Pod, cls: _Class, req: IntArray, b: int) -> None:
        s = self.s
        narrowed = False
        if b >= s.N:
            claim = self.claims[b]
            kept = int(np.count_nonzero(self._pending_mask))
            self.journal.append(("claim_set", claim, claim.mask, claim.total, len(claim.pods), claim.charged,
                                 claim.kept))
            # a pod that narrows nothing (`_Claim.kept`) leaves the mask the same object (`_Claim.floor`), and the
            # room per type, the NodePool charge and the domains as they were: only the room changes, as on a node
            narrowed = kept != claim.kept
            if narrowed:
                claim.mask, claim.kept = self._pending_mask, kept
            claim.total = claim.total + req
            claim.pods.append(pod.key)
        if narrowed:
            self._narrowed(self.claims[b], b)
        else:
            row = self.free[b]  # a view: updated in place, its old values journaled (`_set`, in one step)
            self.journal.append(("arr", self.free, b, row.copy()))
            row -= req
        for gid in (*cls.matched, *cls.owned):
            code = self.bin_codes[s.groups[gid].key][b]
            if code >= 0:
                self._set(self.counts[gid], code, self.counts[gid][code] + 1)
        for port in cls.host_ports:
            used = self.ports.setdefault(b, set())
            if port not in used:
                used.add(port)
                self.journal.append(("port", b, port))
        self.journal.append(("placed", pod.key, self.placed.get(pod.key)))
        self.placed[pod.key] = b
        self.pod_by_key[pod.key] = pod
        lst = self.moved_onto.setdefault(b, [])
        self.journal.append(("moved", b, len(lst)))
        lst.append(pod)

    def _narrowed(self, claim: _Claim, b: int) -> None:
        """What follows from claim ``b``'s offerings once a pod narrowed them: its NodePool charge (the cheapest
        offering left), its room (the largest type left, less its pods) and the domains it is pinned to."""
        pool = self.s.pools[claim.pool]
        if pool.pool.limits:
            fitting = claim.mask.nonzero()[0]  # narrowed to the types that hold the new total
            cheapest = int(fitting[pool.combo_price[fitting].argmin()])
            charged = pool.type_charge[pool.combo_type[cheapest]]
            old = self.pool_used[claim.pool]
            self.journal.append(("pool", claim.pool, old))
            self.pool_used[claim.pool] = old - claim.charged + charged
            claim.charged = charged
        # what follows from the offerings alone, once per Scheduler for each set of them (claims are narrowed the same
        # way again and again: every candidate's replacement starts from the same pods): the room of the largest
        # type left, and the domain of each topology key it is pinned to (-1: none)
        mask_key = (claim.pool, claim.mask.tobytes())
        facts = self.s._offering_facts.get(mask_key)
        if facts is None:
            types_left = np.zeros(len(pool.types), dtype=bool)
            types_left[pool.combo_type[claim.mask]] = True
            facts = self.s._offering_facts[mask_key] = (_maximum(pool.type_alloc[types_left], axis=0), {})
        room, code_of = facts
        self._set(self.free, b, room - claim.total)
        for key, codes in self.bin_codes.items():
            if key != LABEL_HOSTNAME:
                code = code_of.get(key)
                if code is None:
                    code = code_of[key] = self._claim_code(claim, key)
                if codes[b] != code:
                    self._set(codes, b, code)

    def _explain(self, cls: _Class, req: IntArray, max_new: int) -> str:
        s = self.s
        n = s.N
        open_nodes = self.open[:n]
        static = open_nodes & cls.node_ok
        if not _any(open_nodes):
            where = "no other node can take pods"
        elif not _any(static):
            where = "no remaining node matches its nodeSelector, node affinity or tolerations"
        elif not _any(static & _all_of_rows(self.free[:n] >= req)):
            wants = format_requests(dict(zip(s.resources, req.tolist(), strict=True)))
            where = f"no remaining node has room for its requests ({wants})"
        else:
            where = "its topology spread, pod affinity/anti-affinity or host ports leave no remaining node"
        if max_new <= 0:
            pass
        elif not cls.can_launch:
            where += ", and no NodePool can launch a node it tolerates and matches"
        else:
            where += ", and no NodePool offers an instance type that fits it within its limits"
        return where + self._set_aside_note(cls, req)

    def _set_aside_note(self, cls: _Class, req: IntArray) -> str:
        """Which node set aside (`set_aside`) the pod would otherwise fit on, and why it was set aside."""
        if not self.aside:
            return ""
        bins = np.fromiter(sorted(self.aside), dtype=np.int64, count=len(self.aside))
        fits = ~self.open[bins] & cls.node_ok[bins] & _all_of_rows(self.free[bins] >= req)
        for found in fits.nonzero()[0]:
            b = int(bins[found])
            if b not in self._removed:
                return f" (node {self.s.nodes[b].name} has room, but {self.aside[b]})"
        return ""

    # -- results ---------------------------------------------------------------------------------------
    def new_nodes(self) -> list[NewNode]:
        out = []
        for b in sorted(self.claims):
            claim = self.claims[b]
            if not claim.pods:
                continue
            pool = self.s.pools[claim.pool]
            idx = claim.mask.nonzero()[0]  # narrowed to the types that hold its pods
            prices = pool.combo_price[idx]
            order = idx[np.argsort(prices, kind="stable")]
            cheapest = int(order[0])
            ct = pool.combo_ct[cheapest]
            # each instance type once, at the position of its cheapest offering
            sorted_types = pool.combo_type[order]
            _, first = np.unique(sorted_types, return_index=True)
            type_names = [pool.types[int(t)].name for t in sorted_types[np.sort(first)]]
            same_ct = idx[pool.combo_ct_code[idx] == pool.combo_ct_code[cheapest]]
            zones = [pool.zone_names[int(z)] for z in np.unique(pool.combo_zone_code[same_ct])]
            out.append(NewNode(claim.hostname, pool.pool.name, tuple(type_names), ct, tuple(zones),
                               float(pool.combo_price[cheapest]), tuple(claim.pods)))
        return out

    def result(self, pods: Iterable[Pod], failures: Mapping[str, str]) -> SimulationResult:
        placements = {p.key: self.bin_name(self.placed[p.key]) for p in pods if p.key in self.placed}
        return SimulationResult(placements, tuple(self.new_nodes()), dict(failures))

    def claim_offering(self, hostname: str) -> tuple[InstanceType, str, str, float] | None:
        """The instance type, zone and capacity type the claim would launch (its cheapest option)."""
        for claim in self.claims.values():
            if claim.hostname == hostname:
                pool = self.s.pools[claim.pool]
                idx = claim.mask.nonzero()[0]  # narrowed to the types that hold its pods
                if not idx.size:
                    return None
                c = int(idx[np.argmin(pool.combo_price[idx])])
                return (pool.types[int(pool.combo_type[c])], pool.combo_zone[c], pool.combo_ct[c],
                        float(pool.combo_price[c]))
        return None


def simulate(snapshot: Snapshot, pods: Sequence[Pod], *, remove: Iterable[str] = (), max_new: int = 10**9,
             node_order: Sequence[str] | None = None) -> SimulationResult:
    """One-shot convenience: remove nodes, place their pods plus `pods`, report the outcome."""
    sched = Scheduler(snapshot, node_order=node_order, extra_pods=pods)
    state = sched.new_state()
    moving: list[Pod] = []
    for name in remove:
        moving.extend(state.remove_node(name))
    everything = [*moving, *pods]
    failures, _ = state.place_all(everything, max_new)
    return state.result(everything, failures)
