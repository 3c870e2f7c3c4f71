"""Compiling constraints: what pods need and what NodePools offer, as the arrays the scheduler's hot path reads.

A simulation compares numbers, not specs. Here the specs become those numbers, once per snapshot (or for as long as
the same objects come back) rather than once per placement:

- resources: the names a simulation counts (`resource_names`) and each distinct requests as a vector over them
  (`requests_kept`: made once per requests, shared by every Scheduler with the same names);
- NodePools: every (instance type, offering) a NodePool may launch, with its price, zone, capacity type and labels,
  the room of each type less its overhead and DaemonSets (`Pool`, built by `cached_pools`), and per pod needs the
  offerings it may use (`Pool.combo_ok`);
- pods: a pod's forms, strictest first (`relaxations`: preferences made requirements, then dropped one at a time),
  each compiled to a `PodClass` (per existing node and per offering: may it go there; its topology `Constraint`s;
  its host ports). The Scheduler makes the classes (`ebb.core.simulator.scheduler`), since a class also names the
  topology groups it counts in (`ebb.core.simulator.topology`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, filterfalse, product
from operator import attrgetter, is_, itemgetter
from typing import Any

import numpy as np

from ebb.core import node_pods
from ebb.core.labels import blocking_taints, daemonsets_on_type, made_up_labels, requirements_match, summed_requests
from ebb.core.memo import Memo
from ebb.core.model import (
    ATTACH_LIMIT_PREFIX,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    UNLIMITED_ATTACHMENTS,
    DaemonSet,
    InstanceType,
    Interned,
    Node,
    NodePool,
    Pod,
    Requirement,
    SchedulingSpec,
    Snapshot,
    Toleration,
)
from ebb.core.simulator.arrays import BoolArray, FloatArray, IntArray, ObjectArray
from ebb.core.simulator.labeltable import LabelTable

FIXED_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")
# Keys an instance type or offering decides; a NodePool requirement on any other key becomes a label.
TYPE_KEYS = {LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, "kubernetes.io/arch", LABEL_OS}
#: at most this many combinations of the values a NodePool's custom requirements allow (`In` with several values) are
#: offerings of their own; past it, each such label takes its first value, as a single-valued requirement does
CUSTOM_VALUE_COMBINATIONS = 16
#: the hostname label a new node carries while pods are matched to it, as Karpenter's NodeClaim carries the
#: requirement ``kubernetes.io/hostname In [hostname-placeholder-NNNN]`` while it schedules (``NewNodeClaim``): the
#: label exists (``Exists``, ``NotIn`` other names), and, with a ``/`` no label value may hold, it is no real node's
#: name nor hostname (``In`` a node's name does not match). One value for every new node: a pod cannot name a new
#: node's placeholder, so each claim's own would match the same requirements; the hostname key's topology domains
#: are the bins themselves, not this label (`ebb.core.simulator.topology`)
NEW_NODE_HOSTNAME = "hostname-placeholder/new-node"

#: the zone labels zonal CSI drivers' node plugins put on each node they run on (their topology keys, which they write
#: into the node affinity of the volumes they make, or older versions did): EBS, Azure disk, GCE persistent disk. A
#: new node gets the label once the driver registers there, so in a cluster whose nodes carry one (with their zone as
#: its value) a new node's offerings carry it too, with their zone: a pod whose volume asks it is replaced in its
#: volume's zone, as Karpenter's AWS provider reads the EBS key as the zone (``NormalizedLabels``)
CSI_ZONE_LABELS = ("topology.ebs.csi.aws.com/zone", "topology.disk.csi.azure.com/zone", "topology.gke.io/zone")
_CSI_ZONE_LABELS = frozenset(CSI_ZONE_LABELS)


#: `csi_zone_labels`: each CSI zone label the cluster's nodes carry, with the value it has in each zone
CsiZones = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


def csi_zone_labels(nodes: Iterable[Mapping[str, str]]) -> CsiZones:
    """Of `CSI_ZONE_LABELS`, those the nodes of labels ``nodes`` carry, each with the value a node of each zone has
    (its zone, mostly; an Azure node outside availability zones, zone ``0``, has its disk driver's label empty)."""
    found: dict[str, dict[str, str]] = {}
    for labels in nodes:
        if not labels.keys().isdisjoint(_CSI_ZONE_LABELS):  # (most nodes of most clusters: one look, in C)
            zone = labels.get(LABEL_ZONE)
            if zone:
                for key in CSI_ZONE_LABELS:
                    value = labels.get(key)
                    if value is not None:
                        found.setdefault(key, {}).setdefault(zone, value)
    return tuple((key, tuple(sorted(found[key].items()))) for key in CSI_ZONE_LABELS if key in found)


def csi_zone_value(values: tuple[tuple[str, str], ...], zone: str) -> str | None:
    """The value a new node in ``zone`` gets of a CSI zone label whose nodes have ``values`` per zone: the one of
    that zone's nodes, else the zone itself where the label names zones as they are; None otherwise."""
    for known, value in values:
        if known == zone:
            return value
    return zone if all(known == value for known, value in values) else None


#: how many pods' needs a NodePool keeps its offerings for (`Pool.combo_ok`) before it starts again
_COMBO_OK_CACHE_SIZE = 4096
#: how many claims' totals a NodePool keeps the offerings that hold them for (`Pool.combos_holding`) before it starts
#: again
_HOLDING_CACHE_SIZE = 16384


_REQUESTS_KEY = attrgetter("requests_key")
_REQUESTS_KEYS = attrgetter("requests_keys")
_IS_TERMINAL = attrgetter("is_terminal")
_ALLOCATABLE_NAMES = attrgetter("allocatable_names")
_FIRST = itemgetter(0)


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
        names.update(map(_FIRST, key.value))  # its (name, amount) pairs
    for allocatable in set(map(_ALLOCATABLE_NAMES, snapshot.nodes)):  # a few distinct ones, told apart by identity
        names.update(allocatable.value)
    names.update(_type_resources(snapshot.instance_types))
    found = FIXED_RESOURCES + tuple(sorted(names - set(FIXED_RESOURCES)))
    # the one tuple of these names (`_NAMES`): what is kept by them (a node's requests summed, `NodePods.requested`)
    # is then found by reference
    kept = _NAMES.get(found)
    return kept if kept is not None else _NAMES.keep(found, found)


#: the tuples of resource names `resource_names` returned, each by itself (a few: a cluster's names rarely change)
_NAMES: Memo[tuple[str, ...], tuple[str, ...]] = Memo(16)


def _type_resources(types: tuple[InstanceType, ...]) -> frozenset[str]:
    """The resources the instance types have, kept for the last catalog (its types live through many passes)."""
    kept_types, kept = _TYPE_RESOURCES[0]  # one tuple: read whole though another thread may replace it
    if same_objects(kept_types, types):
        return kept
    names = frozenset(name for it in types for name in it.capacity)
    _TYPE_RESOURCES[0] = (types, names)
    return names


#: the last catalog's instance types and their resources (`_type_resources`)
_TYPE_RESOURCES: list[tuple[tuple[InstanceType, ...], frozenset[str]]] = [((), frozenset())]


def format_requests(requests: Mapping[str, int], *, slot: bool = False) -> str:
    """Requests as a reader sees them (cpu in millicores, memory and storage in GiB, hugepages in the binary unit
    that writes them whole: ``hugepages-2Mi 512Mi``), for a pod that finds no room. Its pod slot is written
    (``pods 1``) only with ``slot``: when a full node's pod count is part of why."""
    parts = []
    for name, value in requests.items():
        if (name == "pods" and not slot) or not value:
            continue
        if name == "cpu":
            parts.append(f"cpu {value}m")
        elif name in ("memory", "ephemeral-storage"):
            parts.append(f"{name} {_gib(value)}")
        elif name.startswith("hugepages-"):
            parts.append(f"{name} {_binary_bytes(value)}")
        else:
            parts.append(f"{name} {value}")
    return ", ".join(parts) or "no requests"


def _binary_bytes(value: int) -> str:
    """Bytes in the largest binary unit that writes them whole (536870912: ``512Mi``), else in GiB to 2 decimals."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return _gib(value)


def _gib(value: int) -> str:
    """Bytes in GiB to 2 decimals, or to as many more as it takes not to read as the round figure it is not (4.3G is
    ``4.005Gi``, not ``4.00Gi``, which a node with exactly 4Gi free would seem to hold), at most 9."""
    gib = value / 2**30
    shown = f"{gib:.2f}"
    if round(float(shown) * 2**30) != value:
        for places in range(3, 10):
            shown = f"{gib:.{places}f}"
            if float(shown) != round(gib, 2):
                break
    return f"{shown}Gi"


def rows(resources: Sequence[str], mappings: Sequence[Mapping[str, int]]) -> IntArray:
    """The amounts of each mapping in the order of ``resources`` (0 where it has none; others ignored), one row
    each (built as lists, then one array)."""
    return np.array([[m.get(name, 0) for name in resources] for m in mappings],
                    dtype=np.int64).reshape(len(mappings), len(resources))


def kept_rows(resources: tuple[str, ...], mappings: Sequence[Mapping[str, int]]) -> IntArray:
    """`rows` of mappings that live through many passes (the nodes' allocatable and capacity: a node unchanged is
    the same object pass after pass, and so is its mapping): each mapping's row is made once per resource names and
    kept with the mapping it was made from, so a row is only reused for that very object."""
    kept = _ROWS_KEPT.get(resources)
    if kept is None or len(kept) > KEEP_ROWS_AT_MOST:
        kept = _ROWS_KEPT.keep(resources, {})
    out: list[list[int]] = []
    for m in mappings:
        hit = kept.get(id(m))
        if hit is None or hit[0] is not m:
            hit = kept[id(m)] = (m, [m.get(name, 0) for name in resources])
        out.append(hit[1])
    # one flat run of integers (quicker for numpy than a list of lists)
    return np.fromiter(chain.from_iterable(out), dtype=np.int64,
                       count=len(mappings) * len(resources)).reshape(len(mappings), len(resources))


#: `kept_rows`'s rows by resource names, then by the mapping's id (with the mapping, so that an id reused by another
#: object makes its row again)
_ROWS_KEPT: Memo[tuple[str, ...], dict[int, tuple[Mapping[str, int], list[int]]]] = Memo(8)
#: past this many mappings kept for some resource names (nodes long gone), they are dropped and made again
KEEP_ROWS_AT_MOST = 50_000


#: `Scheduler.pod_vec` and `.pod_needs` by resource names, then by requests (`Pod.requests_key`): the same for every
#: Scheduler with those names, and a planner's Schedulers share their names and most requests pass after pass
_REQUESTS_KEPT: Memo[tuple[str, ...], tuple[dict[Interned, IntArray], dict[Interned, tuple[tuple[int, int], ...]]]] = \
    Memo(8)
#: past this many requests kept for some resource names, they are dropped and made again as asked
_REQUESTS_KEPT_SIZE = 20_000


def requests_kept(resources: tuple[str, ...]) -> tuple[dict[Interned, IntArray],
                                                         dict[Interned, tuple[tuple[int, int], ...]]]:
    """The vectors and needs kept for ``resources`` (new, empty ones for new names or past the size limit). A
    Scheduler adds to them as it goes: entries are values (read-only arrays), so a race only makes one twice."""
    kept = _REQUESTS_KEPT.get(resources)
    if kept is None or len(kept[0]) > _REQUESTS_KEPT_SIZE:
        kept = _REQUESTS_KEPT.keep(resources, ({}, {}))
    return kept


# --------------------------------------------------------------------------------------------------
# NodePools: their offerings as arrays


def type_values(key: str, itype: InstanceType) -> set[str]:
    """The values of label ``key`` that instance type ``itype`` offers, as Karpenter's ``SatisfiesMinValues`` counts
    them (``it.Requirements.Get(key).Values()``): its name; the zones and the capacity types of its available
    offerings, whatever the NodePool and the pods allow of them; else its label's value."""
    if key == LABEL_INSTANCE_TYPE:
        return {itype.name}
    if key == LABEL_ZONE:
        return {o.zone for o in itype.offerings if o.available}
    if key == LABEL_CAPACITY_TYPE:
        return {o.capacity_type for o in itype.offerings if o.available}
    value = itype.labels.get(key)
    return set() if value is None else {value}


@dataclass
class Pool:
    """A NodePool compiled: every (instance type, offering) it may launch is a *combo*, an index into the ``combo_``
    arrays; ``types`` are the instance types with at least one, ``type_alloc`` their room for pods."""

    pool: NodePool
    types: list[InstanceType]
    type_alloc: IntArray  # T x R: capacity - overhead - DaemonSet overhead
    type_capacity: IntArray  # T x R
    combo_type: IntArray  # C
    combo_price: FloatArray  # C
    combo_zone: list[str]
    combo_ct: list[str]
    combo_labels: LabelTable
    #: C: the labels of each offering that a custom requirement of the NodePool with several values gives it (one
    #: offering per value, as Karpenter narrows such a requirement to what the pods on the new node need and labels
    #: the node with it); empty tuples when the NodePool has none
    combo_custom: list[tuple[tuple[str, str], ...]] = field(default_factory=list)
    zone_names: list[str] = field(default_factory=list)  # combo_zone_code -> zone
    combo_zone_code: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    combo_ct_code: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    #: T x (R + 1): what a claim of each type counts against the NodePool's limits, its capacity then 1 (for
    #: ``nodes``); read-only rows, shared by the claims charged them
    type_charge: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    #: T: the instance types' names, as an object array (a claim's type names taken by index, without a loop)
    type_names: ObjectArray = field(default_factory=lambda: np.zeros(0, dtype=object))
    #: R: ``type_alloc``'s columns, each contiguous (a claim's fit is a comparison per resource, `types_holding`),
    #: and whether each is nowhere negative (a total of 0 then fits every type, and is not compared)
    alloc_columns: tuple[IntArray, ...] = ()
    alloc_nonnegative: tuple[bool, ...] = ()
    #: C: the offerings, cheapest first (ties in offering order): a claim's offerings in price order are this
    #: filtered by its mask, without sorting them again
    price_order: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: T: the host ports the pods of the DaemonSets that would run on a node of each type hold, as (protocol, port,
    #: host IP): a pod that needs one of them cannot go on such a new node (Karpenter's daemon overhead groups carry
    #: their ``HostPortUsage``); empty tuples when none holds any
    type_daemon_ports: list[tuple[tuple[str, int, str], ...]] = field(default_factory=list)

    _type_floor: dict[str | None, FloatArray] = field(default_factory=dict)
    _of_capacity_type: dict[str, BoolArray] = field(default_factory=dict)
    #: per requirement with ``minValues``: its floor and, per instance type, the values it offers (`type_values`);
    #: made when first asked
    _floors: list[tuple[str, int, list[frozenset[str]]]] | None = None
    #: `combo_ok` per (nodeSelector, required node terms, tolerations), in a 1-tuple: a pool outlives a pass
    #: (`cached_pools`)
    _combo_ok: Memo[tuple[Any, ...], tuple[BoolArray | None]] = field(
        default_factory=lambda: Memo(_COMBO_OK_CACHE_SIZE))
    #: `without_daemon_ports`' offerings per host ports
    _ports_free: Memo[tuple[tuple[str, int, str], ...], BoolArray] = field(
        default_factory=lambda: Memo(_COMBO_OK_CACHE_SIZE))
    #: `combos_holding` per total (its bytes): the pass after pass steps of a cluster grow claims by the same pods
    _holding: Memo[bytes, BoolArray] = field(default_factory=lambda: Memo(_HOLDING_CACHE_SIZE))
    #: `admitted` per (nodeSelector items, required node terms), in a 1-tuple
    _admitted: Memo[tuple[Any, ...], tuple[BoolArray]] = field(default_factory=lambda: Memo(_COMBO_OK_CACHE_SIZE))

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
        names = np.array([t.name for t in self.types], dtype=object)
        names.flags.writeable = False
        self.type_names = names
        columns = tuple(np.ascontiguousarray(self.type_alloc[:, r]) for r in range(self.type_alloc.shape[1]))
        for column in columns:
            column.flags.writeable = False
        self.alloc_columns = columns
        self.alloc_nonnegative = tuple(bool((column >= 0).all()) for column in columns)
        order = np.argsort(self.combo_price, kind="stable").astype(np.int64)
        order.flags.writeable = False
        self.price_order = order

    def combo_ok(self, spec: SchedulingSpec) -> BoolArray | None:
        """The offerings a pod of ``spec`` may launch on (its NodePool taints tolerated, PreferNoSchedule ones too as
        Karpenter reads them, its required node affinity
        and nodeSelector met), or None when there is none. Made once per distinct needs for the pool's life, and
        read-only: every pass's Scheduler asks again for the same pods."""
        key = (tuple(spec.node_selector.items()), spec.required_node_terms, spec.tolerations)
        hit = self._combo_ok.get(key)  # one lookup: a pass and a validation may share the pool from two threads
        if hit is not None:
            return hit[0]
        ok: BoolArray | None = None
        if len(self.combo_labels) and not blocking_taints(spec.tolerations, self.pool.taints, prefer_no_schedule=True):
            ok = self.combo_labels.terms(spec.required_node_terms)
            if spec.node_selector:
                ok &= self.combo_labels.selector(spec.node_selector)
            if ok.any():
                ok.flags.writeable = False
            else:
                ok = None
        self._combo_ok.keep(key, (ok,))  # bounded: a long-lived planner's pods may keep bringing needs never seen again
        return ok

    def attachable(self, ok: BoolArray, volume_terms: tuple[tuple[Requirement, ...], ...]) -> BoolArray | None:
        """The offerings of ``ok`` in which a pod's volumes can be attached (`SchedulingSpec.volume_terms`: a zonal
        volume's zone), or None when none is left."""
        kept = ok & self.combo_labels.terms(volume_terms)
        if not kept.any():
            return None
        kept.flags.writeable = False
        return kept

    def without_daemon_ports(self, ok: BoolArray, ports: tuple[tuple[str, int, str], ...]) -> BoolArray | None:
        """The offerings of ``ok`` whose instance type runs no DaemonSet holding one of ``ports`` (a pod's host ports,
        `host_ports`), or None when none is left: a new node's DaemonSet pods take their host ports before any other
        pod comes, as Karpenter's scheduler skips the instance types whose daemons' ``HostPortUsage`` conflicts with
        the pod's (``filterInstanceTypesByRequirements``). ``ok`` itself when no DaemonSet of the pool holds a port
        that clashes."""
        free = self._ports_free.get(ports)
        if free is None:
            types_free = np.array([not any(ports_clash(a, b) for a in ports for b in held)
                                   for held in self.type_daemon_ports], dtype=bool)
            free = types_free[self.combo_type] if len(types_free) else np.ones(len(self.combo_type), dtype=bool)
            free.flags.writeable = False
            self._ports_free.keep(ports, free)
        if free.all():
            return ok
        kept = ok & free
        if not kept.any():
            return None
        kept.flags.writeable = False
        return kept

    def admitted(self, selector: Mapping[str, str], terms: tuple[tuple[Requirement, ...], ...]) -> BoolArray:
        """The offerings whose labels meet ``terms`` (OR of ANDs; none: every offering) and ``selector`` (read-only:
        made once per filter for the pool's life, as every Scheduler's topology spreads ask again)."""
        key = (tuple(selector.items()), terms)
        hit = self._admitted.get(key)
        if hit is not None:
            return hit[0]
        ok = self.combo_labels.admitted(selector, terms)
        ok.flags.writeable = False
        self._admitted.keep(key, (ok,))
        return ok

    def types_holding(self, total: IntArray) -> BoolArray:
        """Per instance type: has it room for ``total``? One comparison per resource asked (a resource of which
        ``total`` asks none is left out where no type has less than none of it)."""
        fits: BoolArray | None = None
        for column, nonnegative, amount in zip(self.alloc_columns, self.alloc_nonnegative, total.tolist(), strict=True):
            if amount == 0 and nonnegative:
                continue
            if fits is None:
                fits = column >= amount
            else:
                fits &= column >= amount
        return fits if fits is not None else np.ones(len(self.types), dtype=bool)

    def min_values_met(self, mask: BoolArray) -> bool:
        """Whether the instance types of the offerings ``mask`` keeps offer each of the NodePool's ``minValues``
        requirements that many distinct values of its label (`type_values`), as Karpenter's scheduler asks of a
        NodeClaim's remaining types before it takes a pod (``filterInstanceTypesByRequirements`` under the default
        Strict policy): a claim that would fall short does not take the pod, and the next NodePool is tried."""
        return not self._min_value_floors() or not self.min_values_short(mask)

    def min_values_short(self, mask: BoolArray) -> list[tuple[str, int, int]]:
        """The ``minValues`` requirements the instance types of the offerings ``mask`` keeps fall short of: (the
        label, the distinct values they offer, its minValues)."""
        floors = self._min_value_floors()
        if not floors:
            return []
        types = np.unique(self.combo_type[mask]).tolist()
        found = ((key, len(frozenset().union(*(values[t] for t in types))), floor) for key, floor, values in floors)
        return [(key, count, floor) for key, count, floor in found if count < floor]

    def _min_value_floors(self) -> list[tuple[str, int, list[frozenset[str]]]]:
        """`_floors`, made when first asked."""
        if self._floors is None:
            self._floors = [(req.key, req.min_values, [frozenset(type_values(req.key, it)) for it in self.types])
                            for req in self.pool.requirements if req.min_values]
        return self._floors

    def combos_holding(self, total: IntArray) -> BoolArray:
        """Per offering: has its instance type room for ``total`` (`types_holding`)? Read-only, and kept per total
        for the pool's life: a claim grows by the same pods step after step and pass after pass."""
        key = total.tobytes()
        hit = self._holding.get(key)  # one lookup: a pass and a validation may share the pool from two threads
        if hit is not None:
            return hit
        holding = self.types_holding(total)[self.combo_type]
        holding.flags.writeable = False
        return self._holding.keep(key, holding)

    def of_capacity_type(self, capacity_type: str) -> BoolArray:
        """C: the offerings of ``capacity_type`` (all False when the NodePool may launch none: its requirements
        exclude it, or the catalog offers none of its types so)."""
        found = self._of_capacity_type.get(capacity_type)
        if found is None:
            found = self._of_capacity_type[capacity_type] = np.array([ct == capacity_type for ct in self.combo_ct],
                                                                     dtype=bool)
            found.flags.writeable = False
        return found

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


@dataclass(frozen=True)
class PoolsEntry:
    """Built pools with what they were built from, kept (so the ids stay theirs): a Scheduler whose snapshot holds
    these very objects takes the pools without comparing NodePools and DaemonSets by value."""

    resources: tuple[str, ...]
    nodepools: tuple[NodePool, ...]
    daemonsets: tuple[DaemonSet, ...]
    instance_types: tuple[InstanceType, ...]
    pools: list[Pool]
    regions: tuple[tuple[str, str], ...] = ()
    csi_zones: CsiZones = ()

    def holds(self, resources: Sequence[str], snapshot: Snapshot, regions: tuple[tuple[str, str], ...],
              csi_zones: CsiZones) -> bool:
        """Built from exactly the objects of ``snapshot`` (by identity), ``resources``, ``regions`` and
        ``csi_zones``."""
        return (tuple(resources) == self.resources and same_objects(self.nodepools, snapshot.nodepools)
                and same_objects(self.daemonsets, snapshot.daemonsets)
                and same_objects(self.instance_types, snapshot.instance_types) and regions == self.regions
                and csi_zones == self.csi_zones)


def zone_regions(snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """The region of each zone, as the snapshot's nodes label them (``topology.kubernetes.io/region``): a new node is
    labelled with its zone's region, as a cloud's instance types carry their region. When the nodes name one region
    only, every zone is of it (an empty zone, "", stands for that)."""
    found: dict[str, str] = {}
    regions: set[str] = set()
    for node in snapshot.nodes:
        region = node.labels.get(LABEL_REGION)
        if region is None:
            continue
        regions.add(region)
        zone = node.labels.get(LABEL_ZONE)
        if zone is not None:
            found.setdefault(zone, region)
    if len(regions) == 1:
        found[""] = next(iter(regions))
    return tuple(sorted(found.items()))


def same_objects(kept: Sequence[object], given: Sequence[object]) -> bool:
    """The same objects (by identity), in the same order."""
    return len(kept) == len(given) and all(map(is_, kept, given))  # compared in C


#: built pools by (resource names, the NodePools and DaemonSets, the ids of the InstanceTypes), with those kept (so
#: the ids stay theirs); a few entries: a planner alternates between very few catalogs and pool sets
_POOLS_CACHE: Memo[tuple[Any, ...], PoolsEntry] = Memo(4, forget="oldest")


def cached_pools(resources: tuple[str, ...], snapshot: Snapshot) -> list[Pool]:
    """`build_pools`, reused while the same NodePool, InstanceType and DaemonSet objects come back with the
    same resource names: a planner's passes and validations build a Scheduler each, from snapshots that share
    those, and building the offerings was a sixth of a back-test's time. The pools are read-only once built.
    NodePools and DaemonSets are compared by value (their repr), InstanceTypes by identity."""
    # NodePools and DaemonSets by value (a planner builds them again for every snapshot: DisruptionPolicies are
    # merged into the NodePools), the catalog's many InstanceTypes by identity (parsed once, kept)
    regions = zone_regions(snapshot)
    csi_zones = csi_zone_labels(node.labels for node in snapshot.nodes)
    entries = list(_POOLS_CACHE.values())  # a planner's pass and a validation may build Schedulers in two threads
    for entry in entries:  # the same objects: no repr (a planner's snapshots share them while nothing changed)
        if entry.holds(resources, snapshot, regions, csi_zones):
            return entry.pools
    key = (tuple(resources), repr(snapshot.nodepools), repr(snapshot.daemonsets),
           tuple(map(id, snapshot.instance_types)), regions, csi_zones)
    hit = _POOLS_CACHE.get(key)
    if hit is not None and same_objects(hit.instance_types, snapshot.instance_types):
        pools = hit.pools
    else:
        pools = build_pools(resources, snapshot, regions, csi_zones)
    # kept with these objects (the newest entry), so the next snapshot holding them takes the first way
    _POOLS_CACHE.keep(key, PoolsEntry(tuple(resources), tuple(snapshot.nodepools), tuple(snapshot.daemonsets),
                                      tuple(snapshot.instance_types), pools, regions, csi_zones))
    return pools

def build_pools(resources: tuple[str, ...], snapshot: Snapshot, regions: tuple[tuple[str, str], ...] | None = None,
                csi_zones: CsiZones | None = None) -> list[Pool]:
    """Each NodePool of ``snapshot`` compiled (`Pool`): its offerings that its requirements admit, over
    ``resources``, each labelled with its zone's region where ``regions`` (`zone_regions`) knows it, with its zone
    under each of ``csi_zones`` (`csi_zone_labels`), and with the placeholder hostname `NEW_NODE_HOSTNAME`."""
    region_of = dict(zone_regions(snapshot) if regions is None else regions)
    if csi_zones is None:
        csi_zones = csi_zone_labels(node.labels for node in snapshot.nodes)
    offering_keys = {k for it in snapshot.instance_types for o in it.offerings for k, _ in o.labels}
    type_label_keys = offering_keys | TYPE_KEYS | {k for it in snapshot.instance_types for k in it.labels}
    pools = []
    for pool in snapshot.nodepools:
        types: list[InstanceType] = []
        combo_type: list[int] = []
        combo_price: list[float] = []
        combo_zone: list[str] = []
        combo_ct: list[str] = []
        combo_labels: list[Mapping[str, str]] = []
        combo_custom: list[tuple[tuple[str, str], ...]] = []
        # a template label on a key the instance types or offerings label (kubernetes.io/arch, kubernetes.io/os, a
        # zone, ...) is a requirement, as Karpenter's NodeClaim template makes one of each of its labels: it keeps the
        # types and offerings that carry that value, and does not relabel the others
        pinned = tuple(Requirement(key, "In", (value,)) for key, value in pool.labels.items()
                       if key in type_label_keys)
        requirements = pool.requirements + pinned
        extra_labels = {key: value for key, value in pool.labels.items() if key not in type_label_keys}
        several: list[tuple[str, tuple[str, ...]]] = []  # custom keys whose requirement allows several values
        for req in pool.requirements:
            if (req.key not in TYPE_KEYS and req.operator == "In" and req.values and req.key not in extra_labels
                    and not any(req.key in it.labels for it in snapshot.instance_types)
                    and req.key not in offering_keys):
                if len(req.values) > 1 and all(key != req.key for key, _ in several):
                    several.append((req.key, tuple(req.values)))
                else:
                    extra_labels.setdefault(req.key, req.values[0])
        # a key required without a value named (Exists, NotIn, Gt, ...): the value Karpenter's launch makes up
        extra_labels.update(made_up_labels(pool, type_label_keys))
        if math.prod(len(values) for _, values in several) > CUSTOM_VALUE_COMBINATIONS:
            for key, values in several:
                extra_labels.setdefault(key, values[0])
            several = []
        keys = [key for key, _ in several]
        customs = [tuple(zip(keys, chosen, strict=True)) for chosen in product(*(values for _, values in several))]
        for it in snapshot.instance_types:
            base = {LABEL_INSTANCE_TYPE: it.name, "kubernetes.io/arch": "amd64", **it.labels,
                    LABEL_OS: it.os_under(requirements), **extra_labels, **pool.template_labels}
            t_index = len(types)
            added = False
            for off in it.offerings:
                if not off.available:
                    continue
                for custom in customs:  # one offering per value of each custom label, in the requirement's order
                    labels = {**base, **dict(custom), **dict(off.labels), LABEL_ZONE: off.zone,
                              LABEL_CAPACITY_TYPE: off.capacity_type}
                    region = region_of.get(off.zone) or region_of.get("")
                    if region is not None:
                        labels.setdefault(LABEL_REGION, region)
                    labels.setdefault(LABEL_HOSTNAME, NEW_NODE_HOSTNAME)
                    for key, per_zone in csi_zones:
                        value = csi_zone_value(per_zone, off.zone)
                        if value is not None:
                            labels.setdefault(key, value)
                    if not requirements_match(requirements, labels):
                        continue
                    combo_type.append(t_index)
                    combo_price.append(off.price)
                    combo_zone.append(off.zone)
                    combo_ct.append(off.capacity_type)
                    combo_labels.append(labels)
                    combo_custom.append(custom)
                    added = True
            if added:
                types.append(it)
        running = [daemonsets_on_type(snapshot.daemonsets, pool, it) for it in types]
        ds_overhead = rows(resources, [summed_requests(daemons) for daemons in running])
        type_capacity = rows(resources, [it.capacity for it in types])
        for r, name in enumerate(resources):
            if name.startswith(ATTACH_LIMIT_PREFIX):  # a new node's volume attachments: Karpenter checks no limit
                type_capacity[:, r] = UNLIMITED_ATTACHMENTS
        type_alloc = type_capacity - rows(resources, [it.overhead for it in types])
        if "memory" in resources:  # a type with huge pages has that much less memory (`InstanceType.allocatable`)
            memory = list(resources).index("memory")
            for t, it in enumerate(types):
                if it.hugepages():
                    type_alloc[t, memory] = it.allocatable()["memory"]
        type_alloc -= ds_overhead
        pools.append(Pool(pool, types, type_alloc, type_capacity, np.array(combo_type, dtype=np.int64),
                          np.array(combo_price, dtype=np.float64), combo_zone, combo_ct,
                          LabelTable(combo_labels), combo_custom,
                          type_daemon_ports=[tuple(chain.from_iterable(host_ports(ds.spec) for ds in daemons))
                                             for daemons in running]))
    return pools


# --------------------------------------------------------------------------------------------------
# Pods: their forms and what each may use


@dataclass
class Constraint:
    """One topology rule of a pod's form, over the counts of one topology group (`ebb.core.simulator.topology`):
    a spread's skew, a required pod affinity (some matching pod in the domain) or anti-affinity (none)."""

    kind: str  # spread | affinity | anti
    group: int
    key: str
    max_skew: int = 1
    self_match: int = 0
    min_domains: int | None = None
    eligible: IntArray | None = None  # spread: codes of eligible domains (hostname: node indices)
    new_domain: bool = False  # hostname spread: a new node is a domain with zero pods


@dataclass
class PodClass:
    """One form of the pods that share a class (`Pod.class_key`), compiled: where it may go among the existing
    nodes and each NodePool's offerings, its topology constraints and counts, its host ports."""

    spec: SchedulingSpec
    namespace: str
    node_ok: BoolArray  # over existing nodes
    pool_combo_ok: list[BoolArray | None]  # per pool; None when the pool's taints repel the pod
    constraints: list[Constraint]
    matched: list[int]  # groups whose count this pod raises
    owned: list[int]  # anti-affinity "owner" groups this pod raises
    host_ports: tuple[tuple[str, int, str], ...]
    can_launch: bool
    pool_ok: BoolArray  # per pool: pool_combo_ok is not None



#: `relaxations` by the id of the spec, with the spec and each form's words (a pass's Scheduler makes each class's
#: again, of the specs the pods held the pass before: the parser shares a spec among the versions of a pod and its
#: replicas)
_RELAXED: Memo[tuple[int, bool], tuple[SchedulingSpec, tuple[SchedulingSpec, ...], tuple[str, ...]]] = Memo(20_000)

#: the toleration Karpenter's last relaxation adds (``toleratePreferNoScheduleTaints``)
TOLERATE_PREFER_NO_SCHEDULE = Toleration(operator="Exists", effect="PreferNoSchedule")


def relaxations(spec: SchedulingSpec, prefer_no_schedule: bool = False) -> tuple[SchedulingSpec, ...]:
    """The pod's forms, strictest first, in the order Karpenter's scheduler relaxes them (``Preferences.Relax``,
    v1.14.1): its first required node affinity term, the heaviest preferred node affinity term, every preferred pod
    affinity and anti-affinity term and every ScheduleAnyway spread held as requirements; then one dropped at a
    time: the first required term while more than one is left (the terms are tried in order), the heaviest preferred
    pod affinity term, the heaviest preferred pod anti-affinity term, the heaviest preferred node affinity term (the
    next heaviest is then held), a ScheduleAnyway spread. The last form is the pod's own requirements (its required
    terms OR'ed), and with ``prefer_no_schedule`` (some NodePool's template has a PreferNoSchedule taint) one more
    after it that tolerates every PreferNoSchedule taint, as Karpenter relaxes last: until then such a taint keeps the
    pod off a node as NoSchedule does. Made once per spec object (a value: shared by every Scheduler and thread; a
    race only makes it twice)."""
    return _relaxed(spec, prefer_no_schedule)[0]


def preferences_kept(spec: SchedulingSpec, form: int, prefer_no_schedule: bool = False) -> str:
    """The preferences the pod's form ``form`` (an index of `relaxations`) still holds as requirements, in words."""
    return _relaxed(spec, prefer_no_schedule)[1][form]


def _relaxed(spec: SchedulingSpec, prefer_no_schedule: bool) -> tuple[tuple[SchedulingSpec, ...], tuple[str, ...]]:
    key = (id(spec), prefer_no_schedule)
    kept = _RELAXED.get(key)
    if kept is not None and kept[0] is spec:
        return kept[1], kept[2]
    forms, words = _relaxations(spec)
    if prefer_no_schedule and TOLERATE_PREFER_NO_SCHEDULE not in spec.tolerations:
        forms.append(replace(forms[-1], tolerations=(*spec.tolerations, TOLERATE_PREFER_NO_SCHEDULE)))
        words = [f"{w}, not tolerating PreferNoSchedule taints" if w != "no preference"
                 else "its PreferNoSchedule taints not tolerated" for w in words]
        words.append("no preference")
    made = (tuple(forms), tuple(words))
    _RELAXED.keep(key, (spec, *made))
    return made


def _by_weight(terms: tuple[tuple[int, Any], ...]) -> list[tuple[int, Any]]:
    """Heaviest first, ties in their written order (Karpenter sorts so before it drops the first)."""
    return sorted(terms, key=lambda t: -t[0])


def _in_words(items: list[str]) -> str:
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else "no preference"


def _relaxations(spec: SchedulingSpec) -> tuple[list[SchedulingSpec], list[str]]:
    """`relaxations` made, with each form's preferences in words."""
    terms = list(spec.required_node_terms or ())
    n_terms = len(terms)
    affinity = _by_weight(spec.preferred_pod_affinity)
    anti = _by_weight(spec.preferred_pod_anti_affinity)
    node = _by_weight(spec.preferred_node_terms)
    spreads = list(spec.spread)
    own = replace(spec, spread=tuple(s for s in spec.spread if s.when_unsatisfiable == "DoNotSchedule"),
                  preferred_node_terms=(), preferred_pod_affinity=(), preferred_pod_anti_affinity=())
    if len(terms) <= 1 and not (affinity or anti or node or len(own.spread) < len(spreads)):
        return [own], ["no preference"]
    forms: list[SchedulingSpec] = []
    words: list[str] = []
    while True:
        # held as one term: the first required term left, and the heaviest preferred node affinity term left
        held = (*(terms[0] if terms else ()), *(node[0][1] if node else ()))
        forms.append(replace(
            own, required_node_terms=(held,) if terms or node else spec.required_node_terms,
            pod_affinity=(*spec.pod_affinity, *(t for _, t in affinity)),
            pod_anti_affinity=(*spec.pod_anti_affinity, *(t for _, t in anti)),
            spread=tuple(s if s.when_unsatisfiable == "DoNotSchedule"
                         else replace(s, when_unsatisfiable="DoNotSchedule") for s in spreads)))
        words.append(_in_words(
            ([f"its required node affinity term {n_terms - len(terms) + 1} of {n_terms} (tried in order)"]
             if len(terms) > 1 else [])
            + [f"its preferred pod affinity over {t.topology_key}" for _, t in affinity]
            + [f"its preferred pod anti-affinity over {t.topology_key}" for _, t in anti]
            + (["its preferred node affinity"] if node else [])
            + [f"its ScheduleAnyway topology spread over {s.topology_key}" for s in spreads
               if s.when_unsatisfiable != "DoNotSchedule"]))
        if len(terms) > 1:
            terms = terms[1:]
        elif affinity:
            affinity = affinity[1:]
        elif anti:
            anti = anti[1:]
        elif node:
            node = node[1:]
        else:
            anyway = next((i for i, s in enumerate(spreads) if s.when_unsatisfiable != "DoNotSchedule"), None)
            if anyway is None:
                break
            spreads[anyway] = spreads[-1]  # as Karpenter removes it: the last one takes its place
            spreads.pop()
    if n_terms > 1:
        forms.append(own)  # the required terms OR'ed, as the pod's own requirements read
        words.append("no preference")
    return forms, words


def host_ports(spec: SchedulingSpec) -> tuple[tuple[str, int, str], ...]:
    """The host ports a pod of ``spec`` takes on its node, as (protocol, port, host IP): `PodClass.host_ports`."""
    return tuple((hp.protocol, hp.port, hp.host_ip) for hp in spec.host_ports)


def ports_clash(a: tuple[str, int, str], b: tuple[str, int, str]) -> bool:
    """Whether two host ports (`host_ports`) cannot be held on one node: the same protocol and port, and the same
    host IP or either 0.0.0.0 (every address)."""
    return a[0] == b[0] and a[1] == b[1] and (a[2] == b[2] or "0.0.0.0" in (a[2], b[2]))


def has_pod_affinity(classes: Sequence[PodClass]) -> bool:
    """Whether some form of the pod requires pod affinity: a pod placed later may let it in."""
    return any(c.kind == "affinity" for cls in classes for c in cls.constraints)


#: the constraint kinds a pod placed later may satisfy (`later_may_place`)
_HELPED_LATER = frozenset({"affinity", "spread"})


def later_may_place(classes: Sequence[PodClass]) -> bool:
    """Whether a pod placed later may let in a pod that finds no room now (`place_all` retries it, as Karpenter's
    queue retries a pod while a round still places something): some form of it requires pod affinity (a pod it
    wants arrives) or spreads (a pod of its selector raises the least-populated domain's count, and with it the skew
    the spread allows)."""
    return any(c.kind in _HELPED_LATER for cls in classes for c in cls.constraints)


# --------------------------------------------------------------------------------------------------
# Existing nodes: their labels and taints


def node_labels(node: Node) -> Mapping[str, str]:
    """The node's labels, with its hostname label its name when it has none."""
    if LABEL_HOSTNAME in node.labels:
        return node.labels
    labels = dict(node.labels)
    labels[LABEL_HOSTNAME] = node.name
    return labels


def taint_sets(nodes: Sequence[Node]) -> dict[tuple[Any, ...], IntArray]:
    """The indices of the tainted nodes, by their taints (nodes of one NodePool share theirs)."""
    by_taints: dict[tuple[Any, ...], list[int]] = {}
    for i, n in enumerate(nodes):
        if n.taints:
            by_taints.setdefault(n.taints, []).append(i)
    return {t: np.array(m, dtype=np.int64) for t, m in by_taints.items()}


def tolerated(taints_of: Mapping[tuple[Any, ...], IntArray], n_nodes: int,
              tolerations: tuple[Toleration, ...], *, prefer_no_schedule: bool = False) -> BoolArray:
    """Per existing node (``taints_of``: `taint_sets` of the ``n_nodes``): are its NoSchedule and NoExecute taints
    (with ``prefer_no_schedule``, its PreferNoSchedule ones too) all tolerated?"""
    ok = np.ones(n_nodes, dtype=bool)
    for taints, members in taints_of.items():
        if blocking_taints(tolerations, taints, prefer_no_schedule=prefer_no_schedule):
            ok[members] = False
    return ok
