"""Array-based scheduling simulation with Karpenter's semantics: the Scheduler, and a simulation's search for a bin.

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
terms are treated as required and relaxed one at a time when the pod would not schedule at all, new claims
included (Karpenter's ``trySchedule``): where a simulation may open no more claims (a delete, a replacement already
open), a pod that a new claim would take as it is fails rather than lose a preference onto an existing node.

Every mutation is journalled so the decision engine can try thousands of "what if" simulations on one
state and roll each back in time proportional to what it changed.

The parts, one module each: `constraints` compiles specs and NodePools into arrays (pools, pod classes,
relaxations); `topology` registers the topology groups and domains and holds the spread and affinity rules over
their counts; `placement` is a simulation's mutable state (free room, claims, what is placed where, the journal)
and its results. Here the `Scheduler` composes them per snapshot (nodes, pools, topology, pod classes) and
`SimState` is the search: it places pods on a `placement.Placement`, keeping the topology counts as they move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from operator import attrgetter
from typing import Any, cast

import numpy as np

from ebb.core import node_pods
from ebb.core.labels import node_affinity_admits, requirements_match, selector_matches, terms_match
from ebb.core.memo import Memo
from ebb.core.model import (
    CAPACITY_RESERVED,
    CAPACITY_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    DaemonSet,
    Interned,
    Node,
    Pod,
    SchedulingSpec,
    Snapshot,
    placement_order,
)
from ebb.core.simulator.arrays import BoolArray, IntArray, all_of_rows, any_set, reduce_max, trues
from ebb.core.simulator.constraints import (
    KEEP_ROWS_AT_MOST,
    Constraint,
    PodClass,
    Pool,
    cached_pools,
    format_requests,
    has_pod_affinity,
    host_ports,
    kept_rows,
    later_may_place,
    node_labels,
    preferences_kept,
    relaxations,
    requests_kept,
    resource_names,
    rows,
    taint_sets,
    tolerated,
)
from ebb.core.simulator.labeltable import LabelTable
from ebb.core.simulator.noderows import NodeRows, daemons_wanted, ready_open, rows_of
from ebb.core.simulator.placement import Claim, Launch, Placement
from ebb.core.simulator.results import NewNode, SimulationResult
from ebb.core.simulator.topology import Group, Topology

__all__ = [
    "UNEXPLAINED",
    "NewNode",
    "Scheduler",
    "SimState",
    "SimulationResult",
    "format_requests",
    "has_pod_affinity",
    "later_may_place",
    "relaxations",
    "resource_names",
    "simulate",
]

#: a class `SimState._init_counts` has not met yet
_UNSEEN: Any = object()
_NEEDS_RESCHEDULING = attrgetter("needs_rescheduling")


class Scheduler:
    """Static, per-snapshot data for simulations; `new_state()` makes a mutable working copy.

    It composes the parts: the existing nodes in bin order with their room, labels and taints and the pods bound to
    each; the NodePools compiled (`constraints.cached_pools`); the topology groups and domains (`topology`); and
    each pod class's forms compiled against all of them (`classes`), made as pods ask."""

    def __init__(self, snapshot: Snapshot, *, node_order: Sequence[str] | None = None,
                 extra_pods: Sequence[Pod] = (), closed_nodes: Iterable[str] = (),
                 derived: Mapping[str, node_pods.NodePods] | None = None,
                 unbound: Sequence[Pod] | None = None, kube_scheduler: bool = False) -> None:
        """``derived``: what `ebb.core.node_pods` derived from each node's active pods of ``snapshot`` (a view's
        ``node_pods``), given with ``unbound``, the snapshot's active pods on no node of it (the view's): the pods on
        each node, what they request and how many would need a home are then taken from them, not found again
        among every pod. A node short of any resource (its pods, and the DaemonSet pods not there yet, request more
        than it has) takes no pod, as Karpenter's ``ExistingNode`` has it (``resources.Fits`` fails on any negative
        room); with ``kube_scheduler`` (the simulated kube-scheduler's bindings) it takes those that fit in what they
        request, as kube-scheduler's resource filter checks only those."""
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
        else:
            self.resources = resource_names(snapshot, extra_pods)
        self.r_index = {name: i for i, name in enumerate(self.resources)}
        closed = set(closed_nodes)
        self._pod_vecs, self._pod_needs = requests_kept(self.resources)
        self.derived: list[node_pods.NodePods] | None = of_nodes
        #: the rows of the nodes, when taken from the last build of this kind (`noderows`)
        self._rows: NodeRows | None = None
        if of_nodes is not None:
            # the rows of the nodes as the last Scheduler had them, for those that did not change (`noderows`)
            kept = self._rows = rows_of(self.resources, snapshot.daemonsets, self.nodes, of_nodes)
            self.node_open = kept.ready_open.copy()
            self.node_labels = kept.table
            self.node_alloc = kept.alloc
            #: the active pods bound to each node, by node index
            self.pods_on: list[Sequence[Pod]] = [d.pods for d in of_nodes]
            # the pods on each node and their requests summed (the same integers `_bind` sums)
            self.node_free = kept.alloc - kept.used
            if kept.daemons_used is not None and kept.daemons_wanted is not None:
                # the room kept for the DaemonSet pods not there yet (`_daemon_room`)
                self.node_free -= np.maximum(kept.daemons_wanted - kept.daemons_used, 0)
            rescheduled: int = int(kept.movable.sum()) + sum(map(_NEEDS_RESCHEDULING, unbound or ()))
        else:
            self.node_open = ready_open(self.nodes)
            self.node_labels = LabelTable([node_labels(n) for n in self.nodes],
                                          names=lambda: [node.name for node in self.nodes])
            self.node_alloc = kept_rows(self.resources, [n.allocatable for n in self.nodes])
            self.pods_on, used, daemons, rescheduled = self._bind(snapshot)
            self.node_free = self.node_alloc - used
            if daemons is not None:
                self.node_free -= self._daemon_room(daemons)
        if closed:
            self.node_open &= np.array([n.name not in closed for n in self.nodes], dtype=bool)
        self.taint_sets = taint_sets(self.nodes)
        #: some node has a PreferNoSchedule taint (Karpenter's scheduler reads it as NoSchedule until it relaxes)
        self.prefer_no_schedule_nodes = any(t.effect == "PreferNoSchedule" for taints in self.taint_sets
                                            for t in taints)
        if not kube_scheduler:
            self.node_open &= ~(self.node_free < 0).any(axis=1)
        self.max_bins = self.N + rescheduled + len(extra_pods) + 1
        self.pools = cached_pools(self.resources, snapshot)
        #: some NodePool's template has a PreferNoSchedule taint: Karpenter's scheduler then tolerates those taints as
        #: its last relaxation (`constraints.relaxations`); until then they keep pods off nodes
        self.tolerate_prefer_no_schedule = any(t.effect == "PreferNoSchedule"
                                               for p in self.pools for t in p.pool.taints)
        # heavier first, and of one weight the name later in the alphabet first (Karpenter's ``OrderByWeight``)
        later_name_first = sorted(range(len(self.pools)), key=lambda i: self.pools[i].pool.name, reverse=True)
        by_weight = sorted(later_name_first, key=lambda i: -self.pools[i].pool.weight)
        self._pool_usage: list[IntArray] | None = None
        #: each node's NodePool index (-1: none) and its capacity, then 1, as one row per node (`pool_charge`)
        self._pool_charges: tuple[list[int], IntArray] | None = None
        #: where a new claim may open, in order: not in a static NodePool (``spec.replicas``), whose node count its
        #: own controller keeps (Karpenter's ``NewScheduler`` drops static NodePools from every simulation); a
        #: static NodePool's one-for-one replacement is asked for by name (`SimState.launching_in`); nor in one being
        #: deleted or not Ready (`NodePool.launches`), nor in one its nodes already take past its limits
        #: (`over_limits`)
        dynamic = [i for i in by_weight if self.pools[i].pool.replicas is None and self.pools[i].pool.launches
                   and not self.over_limits(i)]
        self.pool_order = dynamic
        self._order_with = {static: [i for i in by_weight if i == static or i in dynamic]
                            for static in by_weight if self.pools[static].pool.replicas is not None}
        #: NodePool name -> its index in ``pools`` (`pool_named`)
        self._pool_index = {p.pool.name: i for i, p in enumerate(self.pools)}
        self._classes: dict[Interned, list[PodClass]] = {}
        #: class key -> (groups registered when computed, `memberships`)
        self._memberships: dict[Interned, tuple[int, tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]]]] = {}
        self._counted: dict[int, tuple[int, list[Pod]]] = {}
        #: per node holding any, what its pods being deleted still hold (`held_by_deleting`), made when first asked
        self._held: dict[int, tuple[frozenset[tuple[str, int, str]], tuple[Pod, ...]]] | None = None
        #: `SimState._narrowed`'s facts of a claim's offerings, by (pool, the offerings' mask as bytes)
        self._offering_facts: dict[tuple[int, bytes], tuple[IntArray, dict[str, int]]] = {}
        #: what a claim launches (`Placement.new_nodes`), by (pool, the offerings' mask as bytes)
        self.launches: dict[tuple[int, bytes], Launch] = {}
        #: the topology groups and domains: registered for every spread and pod (anti-)affinity term of the pods now,
        #: and for those a pod class made later brings
        self.topology = Topology(self.N, self.max_bins, self.node_labels, self.taint_sets, self.pools)
        self.topology.register_groups([*snapshot.pods, *extra_pods])

    def _bind(self, snapshot: Snapshot) -> tuple[list[Sequence[Pod]], IntArray, IntArray | None, int]:
        """The snapshot's active pods sorted onto their nodes (``pods_on``), what they use per node, what the DaemonSet
        pods of them use per node (None when the snapshot has no DaemonSets), and how many pods of the snapshot need a
        home when moved (`Pod.needs_rescheduling`)."""
        pods_on: list[list[Pod]] = [[] for _ in range(self.N)]
        # what the bound pods use, summed per node from one row per distinct requests (replicas share theirs)
        kind_of: dict[Interned, int] = {}
        kinds: list[IntArray] = []
        at_node: list[int] = []
        of_kind: list[int] = []
        rescheduled = 0
        # the loop over every pod of the snapshot: its lookups bound to locals
        node_at, kind_at = self.node_index.get, kind_of.get
        of_daemon: list[int] = []  # the DaemonSet pods' places in at_node
        add_node, add_kind, add_daemon = at_node.append, of_kind.append, of_daemon.append
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
                if pod.owner_kind == "DaemonSet":
                    add_daemon(len(at_node) - 1)
        used = np.zeros_like(self.node_alloc)
        daemons = np.zeros_like(self.node_alloc) if snapshot.daemonsets else None
        if kinds:
            # how many pods of each kind per node, times each kind's requests (integers: exact)
            k = len(kinds)
            cells = np.array(at_node, dtype=np.int64) * k + np.array(of_kind, dtype=np.int64)
            by_kind = np.array(kinds, dtype=np.int64).reshape(k, len(self.resources))
            used = np.bincount(cells, minlength=self.N * k).reshape(self.N, k) @ by_kind
            if daemons is not None:  # the same, of the DaemonSet pods
                daemons = np.bincount(cells[np.array(of_daemon, dtype=np.int64)],
                                      minlength=self.N * k).reshape(self.N, k) @ by_kind
        return cast(list[Sequence[Pod]], pods_on), used, daemons, rescheduled

    # -- helpers -------------------------------------------------------------------------------------
    def vec(self, mapping: Mapping[str, int]) -> IntArray:
        """The amounts of ``mapping`` in the order of ``resources`` (0 where it has none; others ignored)."""
        row: IntArray = self.rows([mapping])[0]
        return row

    def rows(self, mappings: Sequence[Mapping[str, int]]) -> IntArray:
        """`vec` of each mapping, one row each (built as lists, then one array)."""
        return rows(self.resources, mappings)

    def _daemon_room(self, daemons: IntArray) -> IntArray:
        """The room kept on each existing node for the pods of the DaemonSets that would run there and are not there
        yet (Karpenter's ``ExistingNode``): what those DaemonSets' pods request (`daemonset_runs_on_node`), less what
        the node's DaemonSet pods request (``daemons``, per node), never below 0 per resource. A node whose DaemonSet
        pods all run keeps none; a node just launched keeps what its DaemonSets' pods will take when they come. Which
        DaemonSets would run on a node is found once for the node and the DaemonSets, which are the same objects pass
        after pass while unchanged (`_DAEMON_ROOM_KEPT`)."""
        daemonsets = self.snapshot.daemonsets
        known = _DAEMON_ROOM_KEPT.get(self.resources)
        if known is None or len(known[1]) > KEEP_ROWS_AT_MOST or known[0] != daemonsets:
            known = _DAEMON_ROOM_KEPT.keep(self.resources, (daemonsets, {}))
        kept = known[1]
        missing = [node for node in self.nodes if (hit := kept.get(id(node))) is None or hit[0] is not node]
        if missing:
            made = daemons_wanted(self.resources, daemonsets, missing)
            made.flags.writeable = False  # its rows are shared by the Schedulers of later passes
            for node, row in zip(missing, made, strict=True):
                kept[id(node)] = (node, row)
        rows = [kept[id(node)][1] for node in self.nodes]
        want = np.array(rows, dtype=np.int64) if rows else np.empty_like(self.node_alloc)  # one copy, in C
        room: IntArray = np.maximum(want - daemons, 0)
        return room

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

    # -- pod classes -----------------------------------------------------------------------------------
    def classes(self, pod: Pod) -> list[PodClass]:
        """The pod's forms compiled, strictest first (`constraints.relaxations`), made once per class."""
        key = pod.class_key
        hit = self._classes.get(key)
        if hit is None:
            hit = self._classes[key] = [self._make_class(pod, spec)
                                        for spec in relaxations(pod.spec, self.tolerate_prefer_no_schedule)]
        return hit

    def _affinity_mask(self, spec: SchedulingSpec) -> BoolArray:
        """Per existing node: do the required node affinity and nodeSelector of ``spec`` admit it? (A new array.)"""
        ok = self.node_labels.terms(spec.required_node_terms)
        if spec.node_selector:
            ok &= self.node_labels.selector(spec.node_selector)
        return ok

    def _make_class(self, pod: Pod, spec: SchedulingSpec) -> PodClass:
        """The form ``spec`` of ``pod`` compiled: the nodes and offerings it may use (labels and taints), its
        topology constraints (the groups it registers), the groups it counts in and its host ports."""
        node_ok = self._affinity_mask(spec)
        affinity_ok = node_ok.copy()
        topology = self.topology
        taints_ok = tolerated(self.taint_sets, self.N, spec.tolerations)  # a spread's nodeTaintsPolicy reads these
        node_ok &= tolerated(self.taint_sets, self.N, spec.tolerations, prefer_no_schedule=True) \
            if self.prefer_no_schedule_nodes else taints_ok
        pool_combo_ok = [p.combo_ok(spec) for p in self.pools]
        constraints: list[Constraint] = []
        # a spread's domains are filtered by the pod's required node affinity only (``nodeAffinityPolicy: Honor``):
        # a preferred term a form holds as required narrows where the pod goes, not which domains count, as
        # Karpenter's topology reads the pod's strict requirements
        strict, strict_affinity_ok, strict_pool_ok = spec, affinity_ok, pool_combo_ok
        if spec.spread and spec.required_node_terms != pod.spec.required_node_terms:
            strict = replace(spec, required_node_terms=pod.spec.required_node_terms)
            strict_affinity_ok = self._affinity_mask(strict)
            strict_pool_ok = [p.combo_ok(strict) for p in self.pools]
        for sp in spec.spread:
            gid = topology.group("match", topology.spread_key(sp, strict), sp.selector, frozenset((pod.namespace,)))
            constraints.append(topology.spread_constraint(pod, strict, sp, gid, strict_pool_ok,
                                                          affinity_ok=strict_affinity_ok, taints_ok=taints_ok))
        for kind, terms in (("affinity", spec.pod_affinity), ("anti", spec.pod_anti_affinity)):
            for term in terms:
                ns = topology.term_namespaces(term, pod.namespace)
                gid = topology.group("match", term.topology_key, term.selector, ns)
                self_match = int(selector_matches(term.selector, pod.labels)
                                 and (ns is None or pod.namespace in ns))
                constraints.append(Constraint(kind, gid, term.topology_key, self_match=self_match))
        matched, owned, inverse = topology.roles(pod)
        constraints.extend(inverse)
        for key in {c.key for c in constraints}:
            if key not in topology.domain_codes:
                topology.build_domains(key)
        volume_terms = spec.volume_terms
        if volume_terms is not None:  # only where its volumes can be attached (its spreads' domains stay)
            node_ok &= self.node_labels.terms(volume_terms)
            pool_combo_ok = [None if ok is None else p.attachable(ok, volume_terms)
                             for p, ok in zip(self.pools, pool_combo_ok, strict=True)]
        ports = host_ports(spec)
        if ports:  # not onto a new node whose DaemonSets hold one of its host ports (its spreads' domains stay)
            pool_combo_ok = [None if ok is None else p.without_daemon_ports(ok, ports)
                             for p, ok in zip(self.pools, pool_combo_ok, strict=True)]
        can_launch = any(ok is not None for ok in pool_combo_ok)
        pool_ok = np.array([ok is not None for ok in pool_combo_ok], dtype=bool)
        return PodClass(spec, pod.namespace, node_ok, pool_combo_ok, constraints, matched, owned, ports,
                        can_launch, pool_ok)

    def memberships(self, pod: Pod) -> tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]]:
        """What counting a bound pod needs of its class: the groups whose counts it raises (`PodClass.matched` and
        `.owned`) and its host ports; read from its class when that is made, else found without making it (a
        simulation counts every bound pod but places only some: kube-scheduler's the pending ones, a
        consolidation the pods of a candidate up to the first that finds no room)."""
        key = pod.class_key
        hit = self._memberships.get(key)
        if hit is not None and hit[0] == len(self.topology.groups):
            return hit[1]
        made = self._classes.get(key)
        if made is not None:
            cls = made[-1]
            found = ((*cls.matched, *cls.owned), cls.host_ports)
        else:
            matched, owned, _ = self.topology.roles(pod)
            found = ((*matched, *owned), host_ports(pod.spec))
        self._memberships[key] = (len(self.topology.groups), found)
        return found

    def pool_named(self, name: str) -> Pool | None:
        """NodePool ``name`` as compiled for this snapshot, or None when the snapshot has no such NodePool."""
        index = self._pool_index.get(name)
        return None if index is None else self.pools[index]

    def new_state(self) -> SimState:
        """A new simulation over this snapshot: nothing moved yet."""
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
        if hit is not None and hit[0] == len(self.topology.groups):
            return hit[1]
        if self.derived is not None and not any(self.memberships(first)[0]
                                                for _, first, _ in self.derived[b].classes):
            pods = []  # a pod's memberships are its class's: none of the node's classes (its pods not deleting) has any
        else:
            pods = [p for p in self.pods_on[b] if not p.deleting and self.memberships(p)[0]]
        self._counted[b] = (len(self.topology.groups), pods)
        return pods

    def held_by_deleting(self) -> dict[int, tuple[frozenset[tuple[str, int, str]], tuple[Pod, ...]]]:
        """Per node whose pods being deleted still hold something: their host ports, and those of them with a required
        pod anti-affinity, which keeps the pods it selects out of its domains until the pod has stopped. A pod being
        deleted counts in no spread and in no pod's own (anti-)affinity (kube-scheduler's spread and Karpenter's
        ``countDomains`` skip terminating pods), but Karpenter's cluster state keeps its binding and its anti-affinity
        (``ForPodsWithAntiAffinity``, the inverse check of every pod it schedules) as kube-scheduler's inter-pod
        affinity does, and its host ports, until it has stopped. Found once per Scheduler (the nodes most have
        neither)."""
        if self._held is None:
            if self.derived is not None:
                found = [d.derived("deleting_held", _deleting_held) for d in self.derived]
            else:
                found = [_deleting_held(pods) for pods in self.pods_on]
            self._held = {i: held for i, held in enumerate(found) if held[0] or held[1]}
        return self._held

    def owned_groups(self, pod: Pod) -> list[int]:
        """The anti-affinity "owner" groups of ``pod``'s own required terms registered now (`Topology.roles`): what a
        pod being deleted still counts in (`held_by_deleting`)."""
        return self.topology.roles(pod)[1]

    def pool_charge(self, b: int) -> tuple[int, IntArray] | None:
        """What node ``b`` counts against its NodePool's limits, its capacity then 1 (for ``nodes``), with the pool's
        index; None when no NodePool of the snapshot owns it or it is being deleted (made once per node)."""
        if self._pool_charges is None:
            self._charge_nodes()
        assert self._pool_charges is not None
        pool_of, capacity = self._pool_charges
        i = pool_of[b]
        return None if i < 0 else (i, capacity[b])  # a read-only row

    def over_limits(self, p_index: int) -> bool:
        """Whether NodePool ``p_index``'s nodes (and its NodeClaims still launching) already take more than one of its
        limits, the nodes of a disruption's candidates included: Karpenter's provisioner then creates no NodeClaim in
        it (``Provisioner.Create``: ``Limits.ExceededBy`` the cluster state's usage, which counts a candidate until
        its replacements have launched), so a command that would launch one fails. A NodePool at its limit exactly
        may still launch (a replacement's room is its candidate's: `SimState._limit_mask`)."""
        limits = self.pools[p_index].pool.limits
        if not limits:
            return False
        used = self.pool_usage()[p_index]
        at = {name: -1 if name == "nodes" else self.r_index.get(name) for name in limits}  # None: a resource none has
        return any(i is not None and used[i] > limits[name] for name, i in at.items())

    def pool_usage(self) -> list[IntArray]:
        """Per NodePool: the capacity of its nodes that are not being deleted, then their count: what its limits
        are measured against when a simulation starts (made once; every state starts from a copy)."""
        if self._pool_usage is None:
            self._charge_nodes()
        return cast(list[IntArray], self._pool_usage)

    def _charge_nodes(self) -> None:
        """`pool_charge` of every node and `pool_usage`, their sums per NodePool (integers: exact in any order)."""
        index = {p.pool.name: i for i, p in enumerate(self.pools)}
        # each node's NodePool index, -1 for a node that counts against none (being deleted, or of no NodePool here)
        pool_of = [-1 if n.deleting else index.get(n.nodepool or "", -1) for n in self.nodes]
        capacity = np.ones((self.N, len(self.resources) + 1), dtype=np.int64)
        capacity[:, :-1] = self._rows.capacity if self._rows is not None else kept_rows(
            self.resources, [n.capacity for n in self.nodes])
        capacity.flags.writeable = False  # `pool_charge`'s rows are views of it
        usage = np.zeros((len(self.pools), len(self.resources) + 1), dtype=np.int64)
        at = np.array(pool_of, dtype=np.int64)
        counted = at >= 0
        if counted.any():
            np.add.at(usage, at[counted], capacity[counted])
        self._charge_launching(usage, index)
        self._pool_charges = (pool_of, capacity)
        self._pool_usage = list(usage)

    def _charge_launching(self, usage: IntArray, index: Mapping[str, int]) -> None:
        """Add to ``usage`` the NodeClaims launched whose Node has not registered yet (none of the snapshot's nodes is
        theirs by name or provider id) and that are not being deleted: Karpenter's cluster state holds each as a node
        of its NodePool and counts it against the NodePool's limits with the capacity its status says
        (``StateNode.Capacity``), else (not launched yet) with its instance type's."""
        claims = self.snapshot.launching_claims()
        if not claims:
            return
        types = {t.name: t for t in self.snapshot.instance_types}
        for claim in claims:
            i = index.get(claim.nodepool or "", -1)
            if i < 0 or claim.deleting:
                continue
            itype = types.get(claim.labels.get(LABEL_INSTANCE_TYPE, ""))
            capacity = claim.capacity or (itype.capacity if itype is not None else None)
            if capacity:
                usage[i, :-1] += rows(self.resources, [capacity])[0]
            usage[i, -1] += 1


#: the reason `SimState.place` gives a pod it could not place when asked not to explain it
#: `Scheduler._daemon_room`'s request of each node by resource names: the DaemonSets they were made from, and by the
#: node's id the node and what those of them that would run there request (a node's id reused by another object
#: makes it again, other DaemonSets all of them)
_DAEMON_ROOM_KEPT: Memo[tuple[str, ...], tuple[tuple[DaemonSet, ...], dict[int, tuple[Node, IntArray]]]] = Memo(8)

UNEXPLAINED = "not explained"


#: how many of a pod's anchored takers `SimState._first_node` asks one by one (a few array lookups each) before it asks
#: the rest as arrays (a few array operations in all)
_LOOKED_AT_ONE_BY_ONE = 16


class Anchor:
    """A simulation's existing nodes as it started: their room then, and per form of pod and its requests the nodes
    that took such a pod then (open or not, by labels, taints and room), in bin order.

    An existing node's room only shrinks as a simulation goes on (a pod placed there; a node taken out or set aside
    is closed, its room left as it was), and a rollback gives back no more than it had at the start. So a node that
    takes a pod at any state took it at the start, and the search for a pod's node asks those only."""

    __slots__ = ("_arrays", "_free", "_lists", "_node_ok")

    def __init__(self, state: SimState) -> None:
        self._free = state.free[:state.s.N].copy()
        self._arrays: dict[tuple[int, tuple[tuple[int, int], ...]], IntArray] = {}
        self._lists: dict[tuple[int, tuple[tuple[int, int], ...]], list[int]] = {}
        #: the forms whose takers are kept, by id: kept alive here so an id is not reused while its entry is
        self._node_ok: dict[int, PodClass] = {}

    def arrays(self, cls: PodClass, needs: tuple[tuple[int, int], ...]) -> IntArray:
        """The existing nodes that took a pod of form ``cls`` needing ``needs`` at the start, in bin order."""
        key = (id(cls), needs)
        found = self._arrays.get(key)
        if found is None:
            ok = cls.node_ok.copy()
            for r, amount in needs:
                ok &= self._free[:, r] >= amount
            found = self._arrays[key] = ok.nonzero()[0]
            self._node_ok[id(cls)] = cls
        return found

    def takers(self, cls: PodClass, needs: tuple[tuple[int, int], ...]) -> list[int]:
        """`arrays`, the first `_LOOKED_AT_ONE_BY_ONE` as Python ints."""
        key = (id(cls), needs)
        found = self._lists.get(key)
        if found is None:
            found = self._lists[key] = self.arrays(cls, needs)[:_LOOKED_AT_ONE_BY_ONE].tolist()
        return found


class SimState(Placement):
    """A simulation in progress over one Scheduler: the search for each pod's bin, on a journalled `Placement`
    (mutations are journalled; see mark()/rollback()), with the topology counts kept as pods come and go."""

    s: Scheduler

    def __init__(self, sched: Scheduler) -> None:
        super().__init__(sched)
        self.topology = sched.topology
        self.bin_codes: dict[str, IntArray] = {}
        for key, (_, node_codes, _) in sched.topology.domain_codes.items():
            self._ensure_key(key, node_codes)
        #: per topology group (an index of ``topology.groups``), how many pods each of its domains holds
        self.counts: list[IntArray] = []
        #: the last pod `place` put somewhere, when a pod just like it may follow it there without the search
        #: (`place`, `_follow`): (its classes, its requests, its bin, the journal's last entry after it)
        self._run: tuple[list[PodClass], IntArray, int, tuple[Any, ...]] | None = None
        #: the last pod `place` found no room for on the open bins: (its classes, its requests, the journal's last
        #: entry then, None when empty); while that is still the last entry, a pod just like it finds none either
        self._no_room: tuple[list[PodClass], IntArray, tuple[Any, ...] | None] | None = None
        #: the existing nodes' room at the start, which `_first_node` asks from (`Anchor`)
        self._anchor = Anchor(self)
        self._init_counts()

    @contextmanager
    def launching_in(self, pool_name: str) -> Iterator[None]:
        """Within the block, new claims may open in the static NodePool ``pool_name`` too, in its weight's place: its
        one-for-one replacement of a drifted or expired node."""
        index = self.s._pool_index.get(pool_name)
        order = self.s._order_with.get(index) if index is not None else None
        if order is None:
            yield
            return
        self.pool_order, self._run, self._no_room = order, None, None
        try:
            yield
        finally:
            self.pool_order, self._run, self._no_room = self.s.pool_order, None, None

    def _ensure_key(self, key: str, node_codes: IntArray) -> None:
        """Each bin's domain of ``key`` (``bin_codes``), once: ``node_codes`` the existing nodes'."""
        if key in self.bin_codes:
            return
        codes = np.full(self.s.max_bins, -1, dtype=np.int64)
        if key == LABEL_HOSTNAME:
            codes[:] = np.arange(self.s.max_bins)
        else:
            codes[: self.s.N] = node_codes
            for b, claim in self.claims.items():
                codes[b] = self.topology.claim_code(claim.pool, claim.mask, key)
        self.bin_codes[key] = codes

    def _init_counts(self) -> None:
        """The topology counts and host ports of the bound pods (not those being deleted), a class at a time:
        replicas share their class, so the per-pod work is one dict lookup. Only the classes' `memberships` are
        needed, not the classes themselves."""
        s, topology = self.s, self.topology
        bound = self._bound_derived(s.derived) if s.derived is not None else self._bound_listed()
        for key in topology.topology_keys:
            self._ensure_key(key, topology.domain_codes[key][1])
        self.counts = [np.zeros(topology.domain_count(g.key), dtype=np.int64) for g in topology.groups]
        for (gids, ports), at in bound:
            if gids:
                where = np.array(at, dtype=np.int64)
                for gid in gids:
                    codes = self.bin_codes[topology.groups[gid].key][where]
                    np.add.at(self.counts[gid], codes[codes >= 0], 1)
            if ports:
                for i in at:
                    self.ports.setdefault(i, set()).update(ports)
        # a pod being deleted counts in no spread (kube-scheduler skips terminating pods), but holds its host ports
        # and its required anti-affinity until it has stopped (`Scheduler.held_by_deleting`)
        for i, (still, owners) in s.held_by_deleting().items():
            if still:
                self.ports.setdefault(i, set()).update(still)
            for pod in owners:
                for gid in s.owned_groups(pod):
                    code = self.bin_codes[topology.groups[gid].key][i]
                    if code >= 0:
                        self.counts[gid][code] += 1

    def _bound_listed(self) -> list[tuple[tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]], list[int]]]:
        """The memberships of each class of the bound pods that raises a count or holds a host port (most classes do
        neither: their pods are skipped), found when the class first comes (`memberships` registers no group), with
        the node of each of its pods, in node order: from each node's classes found now."""
        nodes_of: dict[Interned, list[int] | None] = {}  # None: a class whose pods raise nothing
        bound: list[tuple[tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]], list[int]]] = []
        known, memberships = nodes_of.get, self.s.memberships
        for i, pods in enumerate(self.s.pods_on):
            for class_key, pod, count in node_pods.classes_of(pods):
                at = known(class_key, _UNSEEN)
                if at is _UNSEEN:
                    gids, ports = memberships(pod)
                    at = nodes_of[class_key] = [] if gids or ports else None
                    if at is not None:
                        bound.append(((gids, ports), at))
                if at is not None:
                    at.extend(repeat(i, count))
        return bound

    def _bound_derived(self, derived: Sequence[node_pods.NodePods]
                       ) -> list[tuple[tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]], list[int]]]:
        """`_bound_listed` from each node's classes as a pass's view derived them (their keys a frozenset,
        `NodePods.class_keys`): the classes a node brings that no node before it had, and then those of its classes
        that raise a count, are found with set operations in C, so a node whose classes raise nothing (most) costs two
        of them, not a step per class. The same answer: each class's memberships found when it first comes, its nodes
        listed in node order, once per pod."""
        memberships = self.s.memberships
        nodes_of: dict[Interned, list[int]] = {}  # the classes that raise a count or hold a host port
        bound: list[tuple[tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]], list[int]]] = []
        seen: set[Interned] = set()
        for d in derived:
            new = d.class_keys - seen
            if new:
                seen |= new
                for class_key, pod, _ in d.classes:  # in the order the node's classes first come
                    if class_key in new:
                        gids, ports = memberships(pod)
                        if gids or ports:
                            at = nodes_of[class_key] = []
                            bound.append(((gids, ports), at))
        if nodes_of:
            raising = set(nodes_of)  # a set's intersection with a frozenset is quicker than its keys view's
            for i, d in enumerate(derived):
                hit = raising.intersection(d.class_keys)
                if hit:
                    for class_key, _, count in d.classes:
                        if class_key in hit:
                            nodes_of[class_key].extend(repeat(i, count))
        return bound

    def _sync_groups(self) -> None:
        """Groups registered after this state was made (a new pod class) start from existing pods."""
        s, topology = self.s, self.topology
        for gid in range(len(self.counts), len(topology.groups)):
            g = topology.groups[gid]
            if g.key not in self.bin_codes:
                self._ensure_key(g.key, topology.domain_codes[g.key][1])
            arr = np.zeros(topology.domain_count(g.key), dtype=np.int64)
            codes = self.bin_codes[g.key]
            for i, pods in enumerate(s.pods_on):
                if i in self._removed:
                    continue
                for pod in pods:
                    if pod.key in self.placed or pod.key in self.lifted or pod.deleting:
                        continue
                    if self._counts_in(g, gid, pod) and codes[i] >= 0:
                        arr[codes[i]] += 1
            for i, (_, owners) in s.held_by_deleting().items():  # on a node removed too (`_take_out`)
                if codes[i] >= 0:
                    arr[codes[i]] += sum(gid in s.owned_groups(pod) for pod in owners
                                         if not (i in self._removed and pod.needs_rescheduling))
            for key, b in self.placed.items():
                pod = self.pod_by_key[key]
                if self._counts_in(g, gid, pod) and codes[b] >= 0:
                    arr[codes[b]] += 1
            self.counts.append(arr)

    def _counts_in(self, g: Group, gid: int, pod: Pod) -> bool:
        """Whether ``pod`` raises group ``gid``'s count (as its strictest form's class found)."""
        cls = self.s.classes(pod)[-1]
        return gid in cls.matched or gid in cls.owned

    def lift(self, pods: Sequence[Pod]) -> None:
        """Take bound pods off their nodes' topology counts, to be placed again (pods leaving a node that is going
        away, while the node itself stays a topology domain); placing one counts it where it goes."""
        for pod in pods:
            b = self.s.node_index[pod.node_name or ""]
            if pod.key in self.lifted or pod.key in self.placed or pod.deleting:
                continue
            self.lifted.add(pod.key)
            for gid in self.s.memberships(pod)[0]:
                code = self.bin_codes[self.topology.groups[gid].key][b]
                if code >= 0:
                    self._set(self.counts[gid], code, self.counts[gid][code] - 1)

    def remove_node(self, name: str) -> list[Pod]:
        """Take a node out: it accepts no pods and its pods leave the topology counts. Returns the pods
        that need a new home (its reschedulable pods, and pods this simulation had moved onto it)."""
        leaving = self.leaving_of(name)
        self._take_out(self.s.node_index[name])
        return leaving

    def leaving_of(self, name: str) -> list[Pod]:
        """The pods `remove_node` would return for ``name`` now, changing nothing: its reschedulable pods not moved
        away already, then those this simulation had moved onto it (none once it is removed)."""
        b = self.s.node_index[name]
        if b in self._removed:
            return []
        placed, derived = self.placed, self.s.derived
        if derived is not None:  # its pods that need a home, found once per node (`ebb.core.node_pods`)
            own = derived[b]
            leaving = list(own.movable) if placed.keys().isdisjoint(own.leaving_keys) else \
                [p for p in own.movable if p.key not in placed]
        else:
            leaving = [p for p in self.s.pods_on[b] if p.needs_rescheduling and p.key not in placed]
        leaving += [p for p in self.moved_onto.get(b, ()) if p.needs_rescheduling]
        return leaving

    def remove_node_ordered(self, name: str) -> list[Pod]:
        """``placement_order(remove_node(name))``, without sorting the node's own pods again: they are sorted once
        per Scheduler (`Scheduler.leaving_order`), and only pods this simulation moved onto the node make a sort
        (multi-node consolidation removes each candidate a few times a pass)."""
        leaving = self.leaving_ordered_of(name)
        self._take_out(self.s.node_index[name])
        return leaving

    def leaving_ordered_of(self, name: str) -> list[Pod]:
        """The pods `remove_node_ordered` would return for ``name`` now, changing nothing."""
        b = self.s.node_index[name]
        if b in self._removed:
            return []
        placed, derived = self.placed, self.s.derived
        if derived is not None and placed.keys().isdisjoint(derived[b].leaving_keys):
            leaving = list(derived[b].leaving_order)  # none placed elsewhere (a look in C): the usual case
        else:
            leaving = [p for p in self.s.leaving_order(b) if p.key not in placed]
        also = [p for p in self.moved_onto.get(b, ()) if p.needs_rescheduling]
        return placement_order(leaving + also) if also else leaving

    def _take_out(self, b: int) -> None:
        """`remove_node`'s changes to the state, for bin ``b`` (none when it was removed already; the pods that leave
        it are `leaving_of`'s, read before)."""
        if b in self._removed:
            return
        self._removed.add(b)
        self.journal.append(("removed", b))
        self._set(self.open, b, False)
        s, placed, groups = self.s, self.placed, self.topology.groups
        moved = self.moved_onto.get(b, [])
        # the pods on it leave the topology counts: of its own pods only the few that are counted at all are looked at
        # (`Scheduler.counted_on`), those not moved away already; one being deleted keeps its anti-affinity until it
        # has stopped, on a node going away too (`Scheduler.held_by_deleting`: Karpenter's simulation keeps every
        # bound pod it does not reschedule in its inverse anti-affinity)
        for pod in (*(p for p in s.counted_on(b) if p.key not in placed), *(p for p in moved if not p.deleting)):
            for gid in s.memberships(pod)[0]:
                code = self.bin_codes[groups[gid].key][b]
                if code >= 0:
                    self._set(self.counts[gid], code, self.counts[gid][code] - 1)
        held = s.held_by_deleting().get(b)
        for pod in held[1] if held is not None else ():
            if pod.needs_rescheduling:  # a StatefulSet's: rescheduled, it is counted where it goes instead
                for gid in s.owned_groups(pod):
                    code = self.bin_codes[groups[gid].key][b]
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

    def place_all(self, pods: Sequence[Pod], max_new: int, *, first_failure: bool = False,
                  on_claim: Callable[[int], None] | None = None,
                  explain: bool = True) -> tuple[dict[str, str], list[str]]:
        """Place pods (largest cpu, then memory first, as Karpenter does: `placement_order`) with at most
        `max_new` new NodeClaims. Returns (pod key -> reason for each unplaceable pod, hostnames of new claims).
        With `first_failure`, stop at the first pod that cannot be placed and that no later placement
        could help (no pod affinity, no topology spread: `later_may_place`): the caller only needs to know that not
        everything fits.
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
                    if first_failure and not later_may_place(self.s.classes(pod)):
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
        before it went where they would have gone, since a claim only opens for a pod that finds no room. A pod
        that finds no room but that a later pod may let in (a topology spread, `later_may_place`) is returned
        without its reason: `place_all` tries it again after the others."""
        for index, pod in enumerate(order):
            classes = self.s.classes(pod)
            if len(classes) > 1 or has_pod_affinity(classes):
                return index, None
            why = self.place(pod, 0)
            if why is not None:
                return index, None if later_may_place(classes) else why
        return None, None

    def feasible_nodes(self, pod: Pod) -> tuple[PodClass, BoolArray]:
        """kube-scheduler's filter for ``pod``: its form without preferences (kube-scheduler scores those, it does not
        filter on them) and, per existing node, whether that form fits there now: open, room for its requests, its
        node selector, required node affinity and tolerations, its required topology rules and host ports. The
        choice among them is the caller's (`ebb.core.simulator.binding`); `bind` puts the pod there."""
        s = self.s
        cls = s.classes(pod)[-1]
        self._sync_groups()
        n = s.N
        cand = self.open[:n] & cls.node_ok
        free = self.free
        for r, amount in s.pod_needs(pod):
            cand &= free[:n, r] >= amount
        if cls.constraints and any_set(cand):
            cand &= self.topology.allowed_bins(cls.constraints, self.bin_codes, self.counts, n, self._removed)
        if cls.host_ports:
            for found in cand.nonzero()[0]:
                if self._port_conflict(int(found), cls.host_ports):
                    cand[found] = False
        return cls, cand

    def bind(self, pod: Pod, cls: PodClass, b: int) -> None:
        """Put ``pod`` of form ``cls`` on existing node ``b``, which `feasible_nodes` found for it."""
        self._commit(pod, cls, self.s.pod_vec(pod), b)

    def first_with_room(self, pods: Iterable[Pod], bins: Sequence[int]) -> tuple[Pod, int] | None:
        """The first of ``pods`` that one of the existing nodes ``bins`` (open or not) has room for, by its resources
        (every one, as a node short of any takes no pod), selectors and tolerations, and the first such bin in the
        order of ``bins``; None when none has."""
        if not bins:
            return None
        at = np.array(bins, dtype=np.int64)
        for pod in pods:
            fits = self.s.classes(pod)[-1].node_ok[at] & all_of_rows(self.free[at] >= self.s.pod_vec(pod))
            if fits.any():
                return pod, int(at[int(fits.nonzero()[0][0])])
        return None

    def claim_capacity_types(self, hostname: str) -> tuple[bool, bool]:
        """Whether new node ``hostname`` may be spot, and whether it takes a reserved offering, as Karpenter's NodeClaim
        says after scheduling (``computeConsolidation`` reads its capacity-type requirement): reserved when one of its
        offerings is (``FinalizeScheduling`` narrows the NodeClaim to them); else spot when its NodePool's requirements
        and its pods' (each in its strictest form: the preferences Karpenter holds as requirements while it can) allow
        a spot node of the kind it would launch, whether or not the catalog has a spot offering available for it now.
        (False, False) for a claim that holds no pod."""
        claim = self.claim_holding(hostname)
        if claim is None:
            return False, False
        pool = self.s.pools[claim.pool]
        if any_set(claim.mask & pool.of_capacity_type(CAPACITY_RESERVED)):
            return False, True
        if any_set(claim.mask & pool.of_capacity_type(CAPACITY_SPOT)):
            return True, False
        launchable = claim.mask.nonzero()[0]
        if not len(launchable):
            return False, False
        labels = {**pool.combo_labels.labels_of(int(launchable[0])), LABEL_CAPACITY_TYPE: CAPACITY_SPOT}
        if not requirements_match(pool.pool.requirements, labels):
            return False, False
        for key in claim.pods:
            spec = self.s.classes(self.pod_by_key[key])[0].spec
            if not node_affinity_admits(spec, labels) or not terms_match(spec.volume_terms, labels):
                return False, False
        return True, False

    def why_no_room(self, pod: Pod, closed: int) -> str:
        """What `place` says of ``pod``, of one form with no topology constraint and no host port, that found no room
        on the open bins with no claim allowed, bin ``closed`` taken out as well: the sentence read from the bins'
        openness and labels alone (and the nodes set aside), so the same on this state as on one where pods before it
        took the room it would have had."""
        return self._explain(self.s.classes(pod)[-1], self.s.pod_vec(pod), 0, closed=closed, no_room=True)

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

    def place(self, pod: Pod, max_new: int, *, explain: bool = True) -> str | None:
        """Place one pod; None on success, else why it cannot be placed (``UNEXPLAINED`` without ``explain``: the
        sentence costs more than a placement, and a caller that only needs to know may skip it). A node set aside
        that admits the pod (`set_aside`'s ``admits``: a pod in phase Pending) is open to it alone."""
        if self.aside_admits and pod.phase == "Pending" and not self._admitting:
            reopened = [b for b, admits in self.aside_admits.items()
                        if not self.open[b] and b not in self._removed and admits(pod)]
            if reopened:
                return self._place_admitted(pod, max_new, explain, reopened)
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
            relaxed = len(classes) - 1  # the pod's own requirements: the forms before it hold preferences too
            for form, cls in enumerate(classes):
                b = self._find_bin(cls, req, needs, max_new)
                if b is not None:
                    self._commit_found(pod, classes, cls, req, b)
                    return None
                if form < relaxed and max_new <= 0 and self._launch_in(cls, req) is not None:
                    # a new node would take it as it is: Karpenter relaxes a preference only when no node, new
                    # ones included, would take the pod, so the pod needs a new node this simulation may not open
                    if not explain:
                        return UNEXPLAINED
                    if any(self._find_bin(looser, req, needs, 0) is not None for looser in classes[form + 1:]):
                        return self._whose(pod, self._explain_kept(pod, form))
                    break  # relaxed, it finds no node either: what keeps it off them is its own rules
        self._no_room = (classes, req, last)
        return self._whose(pod, self._explain(classes[-1], req, max_new)) if explain else UNEXPLAINED

    def _place_admitted(self, pod: Pod, max_new: int, explain: bool, reopened: list[int]) -> str | None:
        """`place` with ``reopened``, the nodes set aside that admit ``pod``, open to it, closed again after."""
        is_open = self.open
        for b in reopened:
            self._set(is_open, b, True)
        self._admitting = True
        try:
            return self.place(pod, max_new, explain=explain)
        finally:
            self._admitting = False
            for b in reopened:
                if b not in self._removed:
                    self._set(is_open, b, False)

    def _whose(self, pod: Pod, why: str) -> str:
        """``why`` a pod found no node, saying first whose it is when the simulation had given it room on a node a
        disruption now takes and it is not that node's own: pending, or leaving a node being taken away."""
        if pod.node_name is None:
            return f"pending, {why}"
        if pod.key in self.lifted:
            return f"leaving node {pod.node_name}, which is being taken away, {why}"
        return why

    def _explain_kept(self, pod: Pod, form: int) -> str:
        """Why a pod whose form ``form`` (preferences kept) found no open bin but a new node would take is not placed
        by relaxing them."""
        if not any_set(self.open[:self.s.N]):  # no node is left to take it at all: that is the cause
            return "no other node can take pods"
        kept = preferences_kept(pod.spec, form, self.s.tolerate_prefer_no_schedule)
        return (f"no remaining node takes it with {kept}, and a new node would: a "
                "preference is relaxed only when no node, new ones included, would take the pod")

    def _commit_found(self, pod: Pod, classes: list[PodClass], cls: PodClass, req: IntArray, b: int) -> None:
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
        mask = claim.mask & pool.combos_holding(claim.total + req)
        return mask if any_set(mask) and pool.min_values_met(mask) else None

    def _find_bin(self, cls: PodClass, req: IntArray, needs: tuple[tuple[int, int], ...], max_new: int) -> int | None:
        s = self.s
        nb = self.n_bins
        admitted: list[BoolArray] | None = None  # each constraint's domains, found once for the bins and the claims
        if not cls.constraints:
            # the existing nodes among those that took it at the start, then the claims (a few) one by one
            b = self._first_node(cls, needs) if s.N else None
            if b is not None:
                return b
            opened, free = self.open, self.free
            for b in range(s.N, nb):
                if opened[b] and all(free[b, r] >= amount for r, amount in needs) \
                        and cls.pool_ok[self.bin_pool[b] if len(s.pools) > 1 else 0] \
                        and not (cls.host_ports and self._port_conflict(b, cls.host_ports)) \
                        and self._claim_takes(b, cls, req, None):
                    return b
        else:
            cand = self.open[:nb].copy()
            free = self.free
            for r, amount in needs:
                cand &= free[:nb, r] >= amount
            if s.N:
                cand[: s.N] &= cls.node_ok
            if nb > s.N:
                if len(s.pools) > 1:
                    cand[s.N:] &= cls.pool_ok[self.bin_pool[s.N:nb]]
                elif not cls.pool_ok[0]:  # one NodePool: every claim is of it
                    cand[s.N:] = False
            if any_set(cand):
                admitted = []
                cand &= self.topology.allowed_bins(cls.constraints, self.bin_codes, self.counts, nb, self._removed,
                                                   admitted=admitted)
            for found in cand.nonzero()[0]:
                b = int(found)
                if cls.host_ports and self._port_conflict(b, cls.host_ports):
                    continue
                if b < s.N or self._claim_takes(b, cls, req, admitted):
                    return b
        if max_new > 0 and cls.can_launch:
            return self._open_claim(cls, req, admitted)
        return None

    def _claim_takes(self, b: int, cls: PodClass, req: IntArray, admitted: Sequence[BoolArray] | None) -> bool:
        """Whether claim ``b``, open with room for a pod of form ``cls`` requesting ``req``, keeps an offering that
        holds it within its NodePool's limits (the offerings it keeps then set aside for `_commit`)."""
        claim = self.claims[b]
        base = claim.mask
        if self.s.pools[claim.pool].pool.limits:
            within = self._limit_mask(claim.pool, release=claim.charged)
            if within is None:
                return False
            base = base & within
        mask = self._narrow(claim.pool, base, cls, claim.total + req, b=b, admitted=admitted)
        if mask is None:
            return False
        self._pending_mask = mask
        return True

    def _first_node(self, cls: PodClass, needs: tuple[tuple[int, int], ...]) -> int | None:
        """The first existing node that takes a pod of form ``cls`` (no topology constraint) needing ``needs``: open,
        with room for it, admitting it by its labels and taints and without a host port it holds; None when none does.
        Asked of the nodes that took it at the start (`Anchor.takers`) only: a node's room has only shrunk since."""
        anchor = self._anchor
        takers = anchor.takers(cls, needs)
        opened, free = self.open, self.free
        for b in takers[:_LOOKED_AT_ONE_BY_ONE]:
            if opened[b] and all(free[b, r] >= amount for r, amount in needs) \
                    and not (cls.host_ports and self._port_conflict(b, cls.host_ports)):
                return b
        rest = anchor.arrays(cls, needs)[_LOOKED_AT_ONE_BY_ONE:]
        if not len(rest):
            return None
        cand = opened[rest]
        for r, amount in needs:
            cand &= free[rest, r] >= amount
        for found in rest[cand]:
            b = int(found)
            if not (cls.host_ports and self._port_conflict(b, cls.host_ports)):
                return b
        return None

    def _narrow(self, p_index: int, mask: BoolArray, cls: PodClass, total: IntArray, *, b: int = -1,
                admitted: Sequence[BoolArray] | None = None) -> BoolArray | None:
        """The claim's remaining offerings after adding a pod of `cls` with the claim's new total, or
        None when none is left. Narrows undetermined topology domains (e.g. the zone) as Karpenter does. ``b``: the
        claim's bin (-1: a claim not opened yet); ``admitted``: the domains each constraint of ``cls`` admits now, when
        the caller found them (`Topology.allowed_bins`)."""
        pool = self.s.pools[p_index]
        ok = cls.pool_combo_ok[p_index]
        if ok is None:
            return None
        mask = mask & ok
        if not any_set(mask):
            return None
        mask &= pool.combos_holding(total)
        if not any_set(mask):
            return None
        if cls.constraints or cls.matched or cls.owned:
            narrowed = self.topology.narrow_to_domains(p_index, mask, cls, self.counts, n_bins=self.n_bins,
                                                       removed=self._removed, pinned=self.bin_codes if b >= 0 else None,
                                                       b=b, admitted=admitted)
            if narrowed is None:
                return None
            mask = narrowed
        # the NodePool's minValues: a claim whose types would fall short takes no more pods (Karpenter's Strict policy)
        return mask if pool.min_values_met(mask) else None

    def _launch_in(self, cls: PodClass, req: IntArray, admitted: Sequence[BoolArray] | None = None
                   ) -> tuple[int, BoolArray, BoolArray] | None:
        """Where a new claim for a pod of ``cls`` requesting ``req`` would open, changing nothing: the heaviest
        NodePool that can launch a node for it, its offerings within its limits, and those the pod narrows them to;
        None when no NodePool can. ``admitted`` as for `_narrow`."""
        if not cls.can_launch:
            return None
        for c in cls.constraints:
            if c.key == LABEL_HOSTNAME and c.kind == "affinity" and not (c.self_match
                                                                        and not any_set(self.counts[c.group])):
                return None  # a new node holds none of the pods this pod must share a host with
        for p_index in self.pool_order:
            if cls.pool_combo_ok[p_index] is None:
                continue
            limit_ok = self._limit_mask(p_index)
            if limit_ok is None:
                continue
            mask = self._narrow(p_index, limit_ok, cls, req, admitted=admitted)
            if mask is not None:
                return p_index, limit_ok, mask
        return None

    def _open_claim(self, cls: PodClass, req: IntArray, admitted: Sequence[BoolArray] | None = None) -> int | None:
        """Open a new claim for a pod of ``cls`` requesting ``req`` where `_launch_in` finds one (the pod is committed
        to it by the caller); its bin, or None. ``admitted`` as for `_narrow`."""
        found = self._launch_in(cls, req, admitted)
        if found is None:
            return None
        p_index, limit_ok, mask = found
        s = self.s
        pool = s.pools[p_index]
        b = self.n_bins
        claim = Claim(p_index, f"new-{pool.pool.name}-{b - s.N + 1}", trues(0),
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

    def _commit(self, pod: Pod, cls: PodClass, req: IntArray, b: int) -> None:
        """Put ``pod`` (of form ``cls``, requesting ``req``) on bin ``b``, found for it: the claim's offerings
        narrowed to `_pending_mask`, the bin's room, the topology counts and host ports, where the pod is."""
        s, groups = self.s, self.topology.groups
        narrowed = False
        if b >= s.N:
            claim = self.claims[b]
            kept = int(np.count_nonzero(self._pending_mask))
            self.journal.append(("claim_set", claim, claim.mask, claim.total, len(claim.pods), claim.charged,
                                 claim.kept))
            # a pod that narrows nothing (`Claim.kept`) leaves the mask the same object (`Claim.floor`), and the
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
            code = self.bin_codes[groups[gid].key][b]
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

    def _narrowed(self, claim: Claim, b: int) -> None:
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
            facts = self.s._offering_facts[mask_key] = (reduce_max(pool.type_alloc[types_left], axis=0), {})
        room, code_of = facts
        self._set(self.free, b, room - claim.total)
        for key, codes in self.bin_codes.items():
            if key != LABEL_HOSTNAME:
                code = code_of.get(key)
                if code is None:
                    code = code_of[key] = self.topology.claim_code(claim.pool, claim.mask, key)
                if codes[b] != code:
                    self._set(codes, b, code)


def _deleting_held(pods: Sequence[Pod]) -> tuple[frozenset[tuple[str, int, str]], tuple[Pod, ...]]:
    """What the pods being deleted among ``pods`` (a node's active pods) still hold (`Scheduler.held_by_deleting`):
    their host ports, and those of them with a required pod anti-affinity."""
    deleting = [pod for pod in pods if pod.deleting]
    return (frozenset(port for pod in deleting for port in host_ports(pod.spec)),
            tuple(pod for pod in deleting if pod.spec.pod_anti_affinity))


def simulate(snapshot: Snapshot, pods: Sequence[Pod], *, remove: Iterable[str] = (), max_new: int = 10**9,
             node_order: Sequence[str] | None = None, derived: Mapping[str, node_pods.NodePods] | None = None,
             unbound: Sequence[Pod] | None = None) -> SimulationResult:
    """One-shot convenience: remove nodes, place their pods plus `pods`, report the outcome. ``derived`` and
    ``unbound``: each node's pods derived and the pods on no node (`Scheduler`), when the caller has them."""
    sched = Scheduler(snapshot, node_order=node_order, extra_pods=pods, derived=derived, unbound=unbound)
    state = sched.new_state()
    moving: list[Pod] = []
    for name in remove:
        moving.extend(state.remove_node(name))
    everything = [*moving, *pods]
    failures, _ = state.place_all(everything, max_new)
    return state.result(everything, failures)
