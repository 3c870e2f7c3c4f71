"""The placement state of one simulation: what room each bin has left, which pods went where, and the journal that
undoes it.

Bins 0..N-1 are the existing nodes (in the Scheduler's order), bins N.. the NodeClaims the simulation opens
(`Claim`). A bin has its free room (one row of ``free``: cpu millicores, memory bytes, pods, ...), whether it takes
pods (``open``), its host ports, and for a claim the offerings of its NodePool it may still launch. Every change is
journalled (`Placement.mark`, `Placement.rollback`): the decision engine tries thousands of "what if" simulations on
one state and rolls each back in time proportional to what it changed. What a simulation produced (its new nodes,
where each pod went) and why a pod found no bin are read from here too.

Where a pod goes is the Scheduler's search (`ebb.core.simulator.scheduler.SimState`, built on this state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ebb.core.labels import made_up_value, node_affinity_admits, requirement_matches, requirements_match
from ebb.core.model import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_ZONE,
    InstanceType,
    Node,
    Pod,
    Requirement,
    Snapshot,
)
from ebb.core.simulator.arrays import BoolArray, IntArray, all_of_rows, any_set, reduce_min, trues
from ebb.core.simulator.constraints import PodClass, Pool, format_requests, ports_clash
from ebb.core.simulator.results import NewNode, SimulationResult

#: what a claim launches: its instance types (cheapest first), capacity type, zones, price and custom labels (`_launch`)
Launch = tuple[tuple[str, ...], str, tuple[str, ...], float, tuple[tuple[str, str], ...]]


class Bins(Protocol):
    """What a placement starts from (a Scheduler): the existing nodes in bin order, their room and whether they take
    pods, the pods bound to each, the compiled NodePools and what their nodes count against their limits."""

    N: int
    nodes: list[Node]
    node_index: dict[str, int]
    resources: tuple[str, ...]
    r_index: dict[str, int]
    snapshot: Snapshot
    node_free: IntArray
    node_open: BoolArray
    max_bins: int
    pools: list[Pool]
    pods_on: list[Sequence[Pod]]
    #: the NodePools (indexes) a new claim may open in, in order
    pool_order: list[int]
    #: what a claim launches (`new_nodes`), by its NodePool and offerings' mask as bytes
    launches: dict[tuple[int, bytes], Launch]

    def pool_usage(self) -> list[IntArray]:
        """Per NodePool: what its nodes count against its limits when a simulation starts."""
        ...

    def over_limits(self, p_index: int) -> bool:
        """Whether NodePool ``p_index``'s nodes already count more than one of its limits (it launches no node)."""
        ...


@dataclass
class Claim:
    """A NodeClaim the simulation opened: its NodePool (an index), the offerings it may still launch and its pods."""

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


class Placement:
    """The bins of one simulation and what is placed on them; every mutation journalled (`mark`, `rollback`)."""

    def __init__(self, bins: Bins) -> None:
        self.s = bins
        b = bins.max_bins
        r = len(bins.resources)
        self.free = np.zeros((b, r), dtype=np.int64, order="F")  # columns contiguous: per-resource scans
        self.free[: bins.N] = bins.node_free
        self.open = np.zeros(b, dtype=bool)
        self.open[: bins.N] = bins.node_open
        self.n_bins = bins.N
        #: the NodePools a new claim may open in, in order (`Bins.pool_order`, or with one static NodePool:
        #: `SimState.launching_in`)
        self.pool_order = bins.pool_order
        self.claims: dict[int, Claim] = {}
        self.bin_pool = np.full(b, -1, dtype=np.int64)
        self._removed: set[int] = set()
        self.pod_by_key: dict[str, Pod] = {}
        self._pending_mask: BoolArray = np.ones(0, dtype=bool)
        self.journal: list[tuple[Any, ...]] = []
        self.placed: dict[str, int] = {}  # pod key -> bin, for pods this simulation moved or placed
        self.moved_onto: dict[int, list[Pod]] = {}
        self.ports: dict[int, set[tuple[str, int, str]]] = {}
        self.aside: dict[int, str] = {}  # node bin -> why no pod placed from now on may go there (`set_aside`)
        #: node bin set aside -> which pods may still go there (`set_aside`'s ``admits``)
        self.aside_admits: dict[int, Callable[[Pod], bool]] = {}
        self._admitting = False  # a placement with the nodes that admit its pod open (`SimState._place_admitted`)
        self.lifted: set[str] = set()  # pods taken off their node to be placed again (`lift`)
        self.pool_used = [usage.copy() for usage in bins.pool_usage()]

    # -- journal ---------------------------------------------------------------------------------------
    def mark(self) -> int:
        """Where the journal is now: `rollback` to it undoes every change made since."""
        return len(self.journal)

    def rollback(self, mark: int) -> None:
        """Undo every change since ``mark``, the last first."""
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
        """``arr[idx] = value``, its old value journalled."""
        self.journal.append(("arr", arr, idx, arr[idx].copy() if isinstance(arr[idx], np.ndarray) else arr[idx]))
        arr[idx] = value

    # -- queries ---------------------------------------------------------------------------------------
    def bin_name(self, b: int) -> str:
        """The node's name, or the claim's hostname."""
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

    def set_aside(self, name: str, why: str, admits: Callable[[Pod], bool] | None = None) -> None:
        """No pod placed from now on goes to this existing node (the pods already placed there stay), but those
        ``admits`` answers True for, and a pod that finds no home says the node was set aside and ``why``. A rollback
        past it opens the node again."""
        b = self.s.node_index[name]
        if self.open[b]:
            self._set(self.open, b, False)
            self.aside[b] = why
            if admits is None:
                self.aside_admits.pop(b, None)
            else:
                self.aside_admits[b] = admits

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
        floor = float(reduce_min(floors)) if floors.size else float("inf")
        claim.floor = (claim.mask, without, floor)
        return floor

    def _port_conflict(self, b: int, ports: tuple[tuple[str, int, str], ...]) -> bool:
        """Whether one of ``ports`` is taken on bin ``b`` already (same protocol and port, and host IP or any)."""
        used = self.ports.get(b)
        if not used:
            return False
        return any(ports_clash(port, taken) for port in ports for taken in used)

    def limits_may_refuse(self, p_index: int) -> bool:
        """Whether NodePool ``p_index``'s limits may refuse a claim one of its offerings at its usage now (or less: a
        claim's own charge is released as it grows): False when it has none, or when `_limit_mask` keeps every
        offering (room for one more node of each of its types in everything it limits); a claim then launches as if
        the NodePool had no limits, whatever its usage. True for one past its limits (`Scheduler.over_limits`): it
        launches nothing, and why says what its nodes count."""
        pool = self.s.pools[p_index]
        if not pool.pool.limits or not len(pool.types):
            return False
        if self.s.over_limits(p_index):
            return True
        mask = self._limit_mask(p_index)
        return mask is None or not bool(mask.all())

    def _limit_mask(self, p_index: int, release: IntArray | None = None) -> BoolArray | None:
        """Offerings whose instance type keeps the NodePool within its limits; `release` is what a
        claim being grown is already charged (it is replaced, not added)."""
        pool = self.s.pools[p_index]
        limits = pool.pool.limits
        mask = trues(len(pool.combo_type))
        if not limits:
            return mask
        used = self.pool_used[p_index] if release is None else self.pool_used[p_index] - release
        if "nodes" in limits and used[-1] + 1 > limits["nodes"]:
            return None
        type_ok = trues(len(pool.types))
        for name, limit in limits.items():
            idx = self.s.r_index.get(name)
            if idx is not None:
                type_ok &= pool.type_capacity[:, idx] + used[idx] <= limit
        mask &= type_ok[pool.combo_type]
        return mask if any_set(mask) else None

    def _explain(self, cls: PodClass, req: IntArray, max_new: int, *, closed: int = -1, no_room: bool = False) -> str:
        """Why a pod of ``cls`` requesting ``req`` found no bin, in a sentence. ``closed``: a bin to count as taken out
        too; ``no_room``: the caller knows no open bin has room for it (its prefix's pods took room this state does
        not show), so the sentence says so when some open bin matches it."""
        block = cls.spec.volume_block
        if block:  # its volumes keep it off every node: nothing else is worth saying
            return f"{block}, so no node may take it"
        s = self.s
        n = s.N
        open_nodes = self.open[:n]
        if 0 <= closed < n and open_nodes[closed]:
            open_nodes = open_nodes.copy()
            open_nodes[closed] = False
        static = open_nodes & cls.node_ok
        if not any_set(open_nodes):
            leaving = {closed, *self._removed}
            where = "no other node can take pods" + _shut(s, leaving) + _overcommitted(s, leaving)
        elif not any_set(static):
            where = ("no remaining node matches its nodeSelector, node affinity or tolerations"
                     + (", or its volumes' node affinity" if cls.spec.volume_terms is not None else ""))
        elif no_room or not any_set(static & all_of_rows(self.free[:n] >= req)):
            slots = s.r_index.get("pods")  # a full pod count is named with the rest, when it is part of why
            short_of_slots = slots is not None and any_set(static & (self.free[:n, slots] < req[slots]))
            wants = format_requests(dict(zip(s.resources, req.tolist(), strict=True)), slot=short_of_slots)
            where = f"no remaining node has room for its requests ({wants})"
        else:
            # the nodes with room are ruled out by its rules; those its rules admit may have none (said of both), and
            # some may not match it at all (named too)
            unmatched = any_set(open_nodes & ~cls.node_ok & all_of_rows(self.free[:n] >= req))
            where = ("every remaining node with room for it is ruled out by "
                     + ("its nodeSelector, node affinity or tolerations, or by " if unmatched else "")
                     + _own_rules(cls))
        if max_new <= 0:
            holding = self.n_bins > n and any(ok is not None and any_set(pool.combos_holding(req) & ok)
                                              for pool, ok in zip(s.pools, cls.pool_combo_ok, strict=True))
            if self.n_bins > n and not cls.can_launch:  # no NodePool's node is one it may run on, whatever its size
                where += self._cannot_launch(cls)
            elif self.n_bins > n and not holding:
                # the new node the step allowed is open and did not take it: no type of any NodePool would have
                wants = format_requests(dict(zip(s.resources, req.tolist(), strict=True)))
                where += f", and no NodePool offers an instance type that fits it ({wants})" + self._overhead_note(
                    cls, req)
            elif holding and cls.constraints:
                # a type of the open new node's holds it: the pods the new node took keep it off by the domain counts
                where += f", and the new node, with the pods it took, is ruled out by {_own_rules(cls)}"
        elif not cls.can_launch and cls.host_ports and any(p.combo_ok(cls.spec) is not None for p in s.pools):
            where += (", and every node a NodePool can launch for it runs a DaemonSet that holds one of its host "
                      "ports")
        elif not cls.can_launch:
            where += self._cannot_launch(cls)
        else:
            notes = self._closed_note(cls, req) + self._limits_note(cls, req) + self._min_values_note(cls, req)
            if cls.constraints and ((not notes and any(
                    ok is not None and any_set(pool.combos_holding(req) & ok)
                    for pool, ok in zip(s.pools, cls.pool_combo_ok, strict=True))) or self._launchable(cls, req)):
                # a type fits and nothing else holds it back: the rules that count pods per domain do
                where += (", and its topology spread or pod affinity/anti-affinity leave no node a NodePool can "
                          "launch for it either")
            else:
                where += ", and no NodePool offers an instance type that fits it" + (
                    notes or self._overhead_note(cls, req))
        return where + self._set_aside_note(cls, req, closed)

    def _launchable(self, cls: PodClass, req: IntArray) -> bool:
        """Whether some NodePool that opens nodes has an offering the pod may take whose type holds ``req``, within its
        limits and its ``minValues``: then what kept the pod off a new node is not its NodePools (another NodePool's
        limits or state are no reason to name)."""
        for p_index, pool in enumerate(self.s.pools):
            allowed = cls.pool_combo_ok[p_index]
            if allowed is None or p_index not in self.pool_order or not len(pool.types):
                continue
            limit_ok = self._limit_mask(p_index)
            if limit_ok is None:
                continue
            mask = allowed & limit_ok & pool.combos_holding(req)
            if any_set(mask) and not pool.min_values_short(mask):
                return True
        return False

    def _overhead_note(self, cls: PodClass, req: IntArray) -> str:
        """Why no type fits a pod of ``cls`` requesting ``req`` when some type the pod may launch as is large enough
        for it: what the type keeps for itself and the DaemonSets that would run on it leave too little (a DaemonSet
        that asks much, on every type its NodePool offers); "" when no type is large enough at all."""
        for p_index, (pool, allowed) in enumerate(zip(self.s.pools, cls.pool_combo_ok, strict=True)):
            if allowed is None or p_index not in self.pool_order or not len(pool.types):
                continue
            if any_set(all_of_rows(pool.type_capacity >= req)[pool.combo_type] & allowed):
                return (" (its instance types large enough for it have too little left once their own overhead and "
                        "the DaemonSets that would run on them are counted)")
        return ""

    def _min_values_note(self, cls: PodClass, req: IntArray) -> str:
        """How the NodePools' ``minValues`` keep a pod of ``cls`` requesting ``req`` off a new node: each NodePool
        whose offerings the pod may launch on (within its limits) hold it only on types that offer too few values of
        a label (`Pool.min_values_short`); "" when none."""
        held: list[str] = []
        for p_index, pool in enumerate(self.s.pools):
            allowed = cls.pool_combo_ok[p_index]
            if allowed is None or not len(pool.types):
                continue
            limit_ok = self._limit_mask(p_index)
            if limit_ok is None:
                continue
            mask = allowed & limit_ok & pool.combos_holding(req)
            if not any_set(mask):
                continue
            short = pool.min_values_short(mask)
            if short:
                labels = " ".join(sorted(key for key, _, _ in short))
                held.append(f"NodePool {pool.pool.name}: minValues requirement is not met for label(s) "
                            f"(label(s)=[{labels}]): the instance types that hold it offer only " + ", ".join(
                                f"{count} value(s) of {key} where minValues is {floor}" for key, count, floor in short))
        return f" that meets its minValues ({'; '.join(held)})" if held else ""

    def _closed_note(self, cls: PodClass, req: IntArray) -> str:
        """The NodePools with a type that would hold a pod of ``cls`` requesting ``req`` but that open no node (being
        deleted or not Ready: `NodePool.closed`; static: ``spec.replicas``), each named with why; "" when none."""
        held = [f"NodePool {pool.pool.name} " + (pool.pool.closed or "is static") + ", so it launches no node"
                for p_index, (pool, allowed) in enumerate(zip(self.s.pools, cls.pool_combo_ok, strict=True))
                if (pool.pool.closed or (pool.pool.replicas is not None and p_index not in self.pool_order))
                and allowed is not None and len(pool.types) and any_set(pool.combos_holding(req) & allowed)]
        return f" ({'; '.join(held)})" if held else ""

    def _limits_note(self, cls: PodClass, req: IntArray) -> str:
        """How the NodePools' limits keep a pod of ``cls`` requesting ``req`` off a new node: " within its limits",
        naming each NodePool that has an offering the pod may launch on and whose type holds it but whose limits
        leave no room for it (its limits, and what its nodes count against them now); "" when no NodePool's limits
        are why (no type of any NodePool the pod may launch in holds it)."""
        s = self.s
        held: list[str] = []
        for p_index, pool in enumerate(s.pools):
            allowed = cls.pool_combo_ok[p_index]
            if allowed is None or not pool.pool.limits or not len(pool.types):
                continue
            holds = pool.combos_holding(req) & allowed
            if not any_set(holds):
                continue
            limited = [name for name in pool.pool.limits if name in s.r_index]
            if s.over_limits(p_index):  # no claim opens there at all (`Scheduler.over_limits`)
                held.append(f"NodePool {pool.pool.name}'s nodes already count more than its limits allow "
                            f"({_limit_words(_counted(s.pool_usage()[p_index], pool.pool.limits, s.r_index))} "
                            f"against {_limit_words(pool.pool.limits)}), so it launches no node")
                continue
            mask = self._limit_mask(p_index)
            if mask is not None and any_set(holds & mask):
                continue
            counted = _counted(self.pool_used[p_index], pool.pool.limits, s.r_index)
            # the type that holds the pod and asks least of the limits (of those, the cheapest): what the limits would
            # have to make room for
            floor = pool.type_floor(None)
            types = sorted({int(t) for t in pool.combo_type[holds]},
                           key=lambda t: (tuple(int(pool.type_capacity[t, s.r_index[name]]) for name in limited),
                                          float(floor[t]), pool.types[t].name))
            smallest = types[0]
            size = {name: int(pool.type_capacity[smallest, s.r_index[name]]) for name in limited}
            held.append(f"NodePool {pool.pool.name}'s limits ({_limit_words(pool.pool.limits)}) against what its "
                        f"nodes count ({_limit_words(counted)}) leave no room for {pool.types[smallest].name}"
                        + (f" ({_limit_words(size)})" if size else ""))
        if not held:
            return ""
        return " within its limits (" + "; ".join(held) + ")"

    def _cannot_launch(self, cls: PodClass) -> str:
        """The words for a pod of ``cls`` that no NodePool can launch a node for (its taints, selectors, affinity or
        volumes rule out every offering)."""
        typeless = [pool.pool.name for pool in self.s.pools if not len(pool.types) and not pool.pool.closed]
        if typeless and len(typeless) == sum(1 for pool in self.s.pools if not pool.pool.closed):
            # no NodePool admits any type at all: its own requirements are why, whatever the pod asks
            return (", and no NodePool can launch a node: the requirements of " + _names("NodePool", typeless)
                    + " admit no instance type of the catalog")
        return (", and no NodePool can launch a node it tolerates and matches"
                + (" where its volumes can be attached" if cls.spec.volume_terms is not None else "")
                + self._unlabelled_note(cls) + self._unavailable_note(cls))

    def _unavailable_note(self, cls: PodClass) -> str:
        """The offerings the catalog marks unavailable (a full capacity reservation, a capacity shortage) that the
        pod's nodeSelector and required node affinity would take, at most three named: no node launches on them, so
        they may be all that kept it off a new node; "" when none."""
        spec = cls.spec
        named: list[str] = []
        count = 0
        for it in self.s.snapshot.instance_types:
            for off in it.offerings:
                if off.available:
                    continue
                labels = {**it.labels, **dict(off.labels), LABEL_INSTANCE_TYPE: it.name, LABEL_ZONE: off.zone,
                          LABEL_CAPACITY_TYPE: off.capacity_type}
                if node_affinity_admits(spec, labels):
                    count += 1
                    if len(named) < 3:
                        named.append(f"{off.capacity_type} {it.name} in {off.zone}")
        if not count:
            return ""
        more = f", and {count - len(named)} more" if count > len(named) else ""
        return f" (the catalog marks unavailable offerings it would take: {', '.join(named)}{more})"

    def _unlabelled_note(self, cls: PodClass) -> str:
        """The NodePool requirements that name no value of a key the pod's nodeSelector or required node affinity
        asks something of: ``Exists``, ``NotIn``, ``Gt``, ... give a new node the value made up for the key
        (`made_up_value`; docs/decisions.md), so a pod that asks another value of it (or, ``DoesNotExist`` or
        ``NotIn`` that value, none) fits no new node of that NodePool; "" when none."""
        spec = cls.spec
        asked = [Requirement(key, "In", (value,)) for key, value in spec.node_selector.items()]
        asked += [r for term in spec.required_node_terms or () for r in term]
        held = []
        for pool in self.s.pools:
            requirements = pool.pool.requirements
            given = pool.combo_labels.labels_of(0) if len(pool.combo_labels) else {}  # the labels its new nodes get
            for key in sorted({r.key for r in asked} - set(pool.pool.labels)):
                value = made_up_value(requirements, key)
                # (a key a type or offering labels, or one never made up, such as kubernetes.io/os, has its own value)
                if value is None or given.get(key) != value:
                    continue
                if not all(requirement_matches(r, {key: value}) for r in asked if r.key == key):
                    first = next(r for r in requirements if r.key == key)
                    held.append(f"NodePool {pool.pool.name}'s requirement {key} {first.operator} gives a new node "
                                f"{key}={value}, a value made up as Karpenter's launch makes one")
        note = f" ({'; '.join(held)}, so a pod that asks another value of it, or none, fits none)" if held else ""
        return note + self._os_note(asked)

    def _os_note(self, asked: Sequence[Requirement]) -> str:
        """The NodePools whose new nodes are planned with an operating system the pod refuses though their
        requirements admit one it asks for: a type's nodes run the first of its ``operatingSystems`` the NodePool
        admits (`InstanceType.os_under`; docs/decisions.md); "" when none."""
        on_os = [r for r in asked if r.key == LABEL_OS]
        if not on_os:
            return ""
        held = []
        for pool in self.s.pools:
            planned = {pool.combo_labels.labels_of(i).get(LABEL_OS, "") for i in range(len(pool.combo_labels))}
            admits = [r for r in pool.pool.requirements if r.key == LABEL_OS]
            wanted = {os for it in pool.types for os in it.operating_systems
                      if requirements_match(on_os, {LABEL_OS: os}) and requirements_match(admits, {LABEL_OS: os})}
            if wanted and not wanted & planned:
                held.append(f"NodePool {pool.pool.name}'s new nodes are planned as {', '.join(sorted(planned))}, the "
                            f"first operating system of their types it admits")
        return f" ({'; '.join(held)})" if held else ""

    def _set_aside_note(self, cls: PodClass, req: IntArray, closed: int = -1) -> str:
        """Which node set aside (`set_aside`) the pod would otherwise fit on, and why it was set aside (not bin
        ``closed``, counted as taken out)."""
        if not self.aside:
            return ""
        bins = np.fromiter(sorted(self.aside), dtype=np.int64, count=len(self.aside))
        fits = ~self.open[bins] & cls.node_ok[bins] & all_of_rows(self.free[bins] >= req)
        for found in fits.nonzero()[0]:
            b = int(bins[found])
            if b not in self._removed and b != closed:
                return f" (node {self.s.nodes[b].name} has room, but {self.aside[b]})"
        return ""

    # -- results ---------------------------------------------------------------------------------------
    def new_nodes(self) -> list[NewNode]:
        """The claims that hold pods, as the nodes they would launch: every instance type left, cheapest first."""
        out = []
        # what a claim launches follows from its NodePool and offerings alone, and claims narrowed alike share them
        # (the 200 claims of Karpenter's 1,000-pod benchmark have 15 sets of offerings; a pass's steps open claims
        # narrowed alike again and again): each set worked out once per Scheduler
        for b in sorted(self.claims):
            claim = self.claims[b]
            if claim.pods:
                out.append(self._launched(claim, claim.mask))
        return out

    def _launched(self, claim: Claim, mask: BoolArray) -> NewNode:
        """The node ``claim`` launches from its offerings ``mask``, worked out once per Scheduler and set of
        offerings (`new_nodes`)."""
        pool = self.s.pools[claim.pool]
        key = (claim.pool, mask.tobytes())
        launch = self.s.launches.get(key)
        if launch is None:
            launch = self.s.launches[key] = _launch(pool, mask)
        type_names, ct, zones, price, labels = launch
        return NewNode(claim.hostname, pool.pool.name, type_names, ct, zones, price, tuple(claim.pods), labels)

    def launched_as(self, hostname: str, capacity_type: str) -> NewNode | None:
        """The node claim ``hostname`` would launch from its offerings of ``capacity_type`` alone (Karpenter's
        spot-to-spot consolidation keeps only the spot ones), as `new_nodes` gives it; None when it has none, or
        holds no pod."""
        claim = self.claim_holding(hostname)
        if claim is None:
            return None
        mask = claim.mask & self.s.pools[claim.pool].of_capacity_type(capacity_type)
        return self._launched(claim, mask) if mask.any() else None

    def claim_holding(self, hostname: str) -> Claim | None:
        """The claim ``hostname`` when it holds a pod, else None."""
        return next((c for c in self.claims.values() if c.hostname == hostname and c.pods), None)

    def result(self, pods: Iterable[Pod], failures: Mapping[str, str]) -> SimulationResult:
        """Where each of ``pods`` went, the new nodes, and ``failures`` (pod key -> why it found no bin)."""
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


def _own_rules(cls: PodClass) -> str:
    """The rules that count pods per domain or hold host ports which a pod of ``cls`` found no node under, as the
    sentence's subject: its own (spread, pod affinity or anti-affinity, host ports), and the required pod
    anti-affinity of pods whose terms select it (its inverse anti-affinity constraints, past its own terms')."""
    kinds = [c.kind for c in cls.constraints]
    own_anti = len(cls.spec.pod_anti_affinity)
    rules = [*(["its topology spread"] if "spread" in kinds else []),
             *(["its pod affinity/anti-affinity"] if "affinity" in kinds or own_anti else []),
             *(["its host ports"] if cls.host_ports else []),
             *(["the pod anti-affinity of pods that select it"] if kinds.count("anti") > own_anti else [])]
    if not rules:  # (not reached: the caller names these once every simpler cause is ruled out)
        return "its topology spread, pod affinity/anti-affinity or host ports"
    return ", ".join(rules[:-1]) + " or " + rules[-1] if len(rules) > 1 else rules[0]


def _shut(s: Any, leaving: set[int]) -> str:
    """Why the other existing nodes take no pod: those cordoned, being deleted, NotReady or tainted by a disruption
    already (`noderows.ready_open`), up to three named with why, but for the nodes ``leaving``; "" when there is
    none."""
    named = []
    for i in np.flatnonzero(~s.node_open):
        if int(i) in leaving:
            continue
        node = s.nodes[int(i)]
        why = ("it is being deleted" if node.deleting else "it is NotReady" if not node.ready else
               "it is cordoned" if node.unschedulable else
               f"it is tainted {node.disruption_taint}" if node.being_disrupted else None)
        if why is None:
            continue  # overcommitted (`_overcommitted` names it), or closed by the caller
        named.append(f"{node.name}: {why}")
        if len(named) == 3:
            break
    return f" ({'; '.join(named)})" if named else ""


def _overcommitted(s: Any, leaving: set[int]) -> str:
    """Why nodes that would be open take no pod: those whose pods already ask more than they have (a node past its
    CSI attach limit, its CSINode's count lowered), up to three named with the resources they are short of, but for
    the nodes ``leaving`` (the ones disrupted); "" when there is none."""
    over = (s.node_free < 0) if s.N else np.zeros((0, len(s.resources)), dtype=bool)
    named = [(s.nodes[i].name, ", ".join(r for r, short in zip(s.resources, over[i], strict=True) if short))
             for i in np.flatnonzero(over.any(axis=1)) if int(i) not in leaving][:3]
    if len(named) == 1:
        return f" ({named[0][0]}'s pods already ask more than it has of {named[0][1]})"
    return f" (their pods already ask more than they have: {'; '.join(f'{n} of {r}' for n, r in named)})" \
        if named else ""


def _launch(pool: Pool, mask: BoolArray) -> Launch:
    """What a claim of ``pool`` with the offerings ``mask`` launches: every instance type left (cheapest first), the
    capacity type and zones of its cheapest offering, that offering's price, and the labels its NodePool's custom
    requirements with several values give it there (the value its pods narrowed them to, else the first).

    A NodeClaim says its instance types and zones apart (``In`` each), so the provider may launch any type in any of
    the zones. When ``mask`` ties types to zones (a volume attachable as zone a on one type or zone b on another: the
    alternatives of its node affinity), some such pairs would be offerings its pods cannot use: the claim is then
    narrowed to its cheapest offering's zone, and if that does not untie them, to that offering's type too, as
    Karpenter's NodeClaim takes the requirements of one volume alternative (``tryVolumeAlternative``)."""
    order = pool.price_order[mask[pool.price_order]]  # its offerings (narrowed), cheapest first
    cheapest = int(order[0])
    for narrower in (pool.combo_zone_code == pool.combo_zone_code[cheapest],
                     pool.combo_type == pool.combo_type[cheapest]):
        if not _ties_types_to_zones(pool, mask, order, cheapest):
            break
        mask = mask & narrower
        order = pool.price_order[mask[pool.price_order]]
    # each instance type once, at the position of its cheapest offering: the first position of each type, the types
    # present in that order
    first = np.full(len(pool.types), order.size, dtype=np.int64)
    np.minimum.at(first, pool.combo_type[order], np.arange(order.size, dtype=np.int64))
    present = np.flatnonzero(first < order.size)
    type_names = pool.type_names[present[np.argsort(first[present], kind="stable")]]
    same_ct = _same_ct(pool, order, cheapest)
    zones = tuple(pool.zone_names[z] for z in np.flatnonzero(np.bincount(pool.combo_zone_code[same_ct])))
    labels = pool.combo_custom[cheapest] if pool.combo_custom else ()
    return tuple(type_names.tolist()), pool.combo_ct[cheapest], zones, float(pool.combo_price[cheapest]), labels


def _same_ct(pool: Pool, order: IntArray, cheapest: int) -> IntArray:
    """The offerings of ``order`` of the cheapest's capacity type: a NodeClaim's zones are theirs."""
    same: IntArray = order[pool.combo_ct_code[order] == pool.combo_ct_code[cheapest]]
    return same


def _ties_types_to_zones(pool: Pool, mask: BoolArray, order: IntArray, cheapest: int) -> bool:
    """Whether the NodeClaim of ``mask`` (the types of its offerings ``order`` ``In``, the zones of those of the
    cheapest's capacity type ``In``, that capacity type) admits an offering of the pool whose (type, zone) none of
    ``mask``'s offerings has: an offering the pool has that the claim's pods cannot use. (A pair the pool does not
    offer is no such one: nothing launches it.)"""
    same_ct = _same_ct(pool, order, cheapest)
    zones = len(pool.zone_names)
    ct = pool.combo_ct_code[cheapest]
    types_in = np.zeros(len(pool.types), dtype=bool)
    types_in[pool.combo_type[order]] = True
    zones_in = np.zeros(zones, dtype=bool)
    zones_in[pool.combo_zone_code[same_ct]] = True
    admitted = types_in[pool.combo_type] & zones_in[pool.combo_zone_code] & (pool.combo_ct_code == ct)
    pair = pool.combo_type * zones + pool.combo_zone_code
    usable = np.zeros(len(pool.types) * zones, dtype=bool)
    usable[pair[mask & (pool.combo_ct_code == ct)]] = True
    return not bool(usable[pair[admitted]].all())


def _counted(used: IntArray, limits: Mapping[str, int], r_index: Mapping[str, int]) -> dict[str, int]:
    """What a NodePool's nodes count (``used``: its usage row, the node count last) against each of its ``limits``
    the simulation knows (a resource no node or type has counts nothing)."""
    counted = {name: int(used[r_index[name]]) for name in limits if name in r_index}
    if "nodes" in limits:
        counted["nodes"] = int(used[-1])
    return counted


def _limit_words(amounts: Mapping[str, int]) -> str:
    """A NodePool's limits, or what its nodes count against them, as its manifest would say them: ``cpu 3,
    memory 12Gi, nodes 10`` (cpu in cores, memory and storage in GiB)."""
    parts = []
    for name, value in amounts.items():
        if name == "cpu":
            parts.append(f"cpu {value / 1000:g}")
        elif name in ("memory", "ephemeral-storage"):
            parts.append(f"{name} {value / 2**30:g}Gi")
        else:
            parts.append(f"{name} {value}")
    return ", ".join(parts)


def _names(kind: str, names: Sequence[str]) -> str:
    """``kind`` and ``names`` in a sentence: "NodePool a", "NodePools a and b", "NodePools a, b and c"."""
    if len(names) == 1:
        return f"{kind} {names[0]}"
    return f"{kind}s {', '.join(names[:-1])} and {names[-1]}"
