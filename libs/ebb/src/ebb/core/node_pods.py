"""What a pass derives from the pods on one node, made again only when the node's pods change.

Every pass reads, per node, the pods that would need a new home, their cpu requests (the view's utilization
order), their eviction costs (the disruption cost), their latest arrival (consolidateAfter) and, for a
candidate, their placement order (the simulator's steps). A pass computes over snapshots that differ in a few
pods, and ``ebb.adapters.snapshot_store`` gives an unchanged pod as the same object pass after pass, so most
nodes hold the very objects they held the pass before. `of_node` keeps what it derived per node name with the
pods it derived it from, and answers from that while the node holds the same pod objects, in the same order (a
comparison of references, in C: the pods themselves are not read). Pods are frozen values, so what was derived
from them cannot go stale; a node whose pods differ in any way is derived again. Like ``ebb.core.model``'s
interned keys and the simulator's NodePool offerings, a cache, not state: the answers are those computed afresh.
Safe across threads: an entry is a value, replaced whole, and a race only derives one again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import filterfalse
from operator import attrgetter, is_, itemgetter, methodcaller
from typing import TypeVar, cast

from ebb.core.memo import Memo
from ebb.core.model import Interned, Pod, placement_order

T = TypeVar("T")
#: a value no derivation returns: not derived yet
_UNSEEN = object()

#: past this many node names the kept entries are dropped (names of nodes long gone, or other snapshots')
KEEP_AT_MOST = 20_000

_NEEDS_RESCHEDULING = attrgetter("needs_rescheduling")
_PLACEMENT_KEY = attrgetter("placement_key")
_EVICTION_COST = attrgetter("eviction_cost")
_ARRIVED = attrgetter("arrived")
_FIRST = itemgetter(0)
_KEY = attrgetter("key")
_REQUESTS_KEY = attrgetter("requests_key")
_PROTECTION_ANNOTATED = attrgetter("protection_annotated")
_IS_TERMINAL = attrgetter("is_terminal")
_REQUESTS = attrgetter("spec.requests")


@dataclass(frozen=True, slots=True)
class NodePods:
    """What a pass derives from the pods on one node (its active pods: not finished, bound to it)."""

    #: the pods it was derived from, in the snapshot's order
    pods: tuple[Pod, ...]
    #: the pods that need a new home when the node goes (`Pod.needs_rescheduling`), in the same order
    movable: tuple[Pod, ...]
    #: the movable pods in the order the simulator places pods (`ebb.core.model.placement_order`)
    leaving_order: tuple[Pod, ...]
    #: the movable pods' keys (`Pod.key`)
    leaving_keys: frozenset[str]
    #: the distinct requests of all the pods (`Pod.requests_key`): what the simulator's resource names come from
    requests_keys: frozenset[Interned]
    #: the pods with a do-not-disrupt (or do-not-evict) annotation (`Pod.protection_annotated`), in the same order
    protected: tuple[Pod, ...]
    #: the cpu all the pods request (millicores)
    cpu_requested: int
    #: the movable pods' eviction costs summed, in their order (Karpenter's disruption cost before the lifetime)
    eviction_cost: float
    #: the movable pods' eviction costs that are above 0, summed: Karpenter's reschedule cost less its 1 per node
    #: (``computeRescheduleDisruptionCost``: a pod's negative cost lowers no node's)
    positive_eviction_cost: float
    #: the latest start (else creation) of a movable pod, None when none says
    last_arrival: datetime | None
    #: the classes (`Pod.class_key`) of the pods not being deleted, each with its first pod and how many pods are
    #: of it, in the order the classes first come: what the simulator's topology counts start from
    classes: tuple[tuple[Interned, Pod, int], ...]
    #: the keys of `classes`: whether a pod not being deleted is of one of some classes, asked in C
    class_keys: frozenset[Interned]
    #: `requested`'s answers, by the resource names asked, then whether of the DaemonSet pods only
    _requested: dict[tuple[tuple[str, ...], bool], tuple[int, ...]] = field(default_factory=dict, compare=False,
                                                                            repr=False)
    #: `requested`'s last answer of each kind with the very names it was asked of (a planner's Schedulers share one
    #: tuple of names, `constraints.resource_names`): found by reference, without hashing the names
    _last_requested: dict[bool, tuple[tuple[str, ...], tuple[int, ...]]] = field(default_factory=dict, compare=False,
                                                                                 repr=False)
    #: `derived`'s answers, by the name they were asked under
    _derived: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def derived(self, name: str, make: Callable[[tuple[Pod, ...]], T]) -> T:
        """What ``make`` derives from the pods (a module above this one: what it reads of a node's pods), made once
        for these pods and kept under ``name``, one name per ``make``."""
        known = self._derived.get(name, _UNSEEN)
        if known is _UNSEEN:
            known = self._derived[name] = make(self.pods)
        return cast(T, known)

    def requested(self, resources: tuple[str, ...], *, daemons: bool = False) -> tuple[int, ...]:
        """What all the pods (with ``daemons``, the DaemonSet pods) request of each of ``resources`` (0 where a pod asks
        none), summed: what the simulator counts as used on the node (and as the DaemonSets' room already taken). Made
        once per node and resource names (integers: the same sums in any order)."""
        last = self._last_requested.get(daemons)
        if last is not None and last[0] is resources:
            return last[1]
        known = self._requested.get((resources, daemons))
        if known is None:
            pods = [pod for pod in self.pods if pod.owner_kind == "DaemonSet"] if daemons else self.pods
            requests = list(map(_REQUESTS, pods))
            known = self._requested[(resources, daemons)] = tuple(sum(map(methodcaller("get", name, 0), requests))
                                                                  for name in resources)
        self._last_requested[daemons] = (resources, known)
        return known


#: what was derived, by node name; past `KEEP_AT_MOST` names (of nodes long gone, or other snapshots') all dropped
_kept: Memo[str, NodePods] = Memo(KEEP_AT_MOST)


def of_node(name: str, pods: Sequence[Pod], memo: Memo[str, NodePods] | None = None) -> NodePods:
    """What is derived from ``pods``, the active pods on node ``name`` in the snapshot's order; kept in ``memo``, the
    passes' own (`_kept`) unless a caller that looks at other moments of the cluster keeps its own."""
    if memo is None:
        memo = _kept
    kept = memo.get(name)
    if kept is not None and len(kept.pods) == len(pods) and all(map(is_, kept.pods, pods)):
        return kept
    movable = tuple(filter(_NEEDS_RESCHEDULING, pods))
    classes = classes_of(pods)
    made = NodePods(
        pods=tuple(pods), movable=movable,
        leaving_order=tuple(placement_order(movable)),
        leaving_keys=frozenset(map(_KEY, movable)),
        requests_keys=frozenset(map(_REQUESTS_KEY, pods)),
        protected=tuple(filter(_PROTECTION_ANNOTATED, pods)),
        cpu_requested=-sum(map(_FIRST, map(_PLACEMENT_KEY, pods))),  # the placement key starts with -cpu
        eviction_cost=sum(map(_EVICTION_COST, movable)),
        positive_eviction_cost=sum(cost for cost in map(_EVICTION_COST, movable) if cost > 0),
        last_arrival=max(filter(None, map(_ARRIVED, movable)), default=None),
        classes=classes, class_keys=frozenset(map(_FIRST, classes)))
    return memo.keep(name, made)


def of_snapshot(node_names: Iterable[str], pods: Iterable[Pod],
                memo: Memo[str, NodePods]) -> tuple[dict[str, NodePods], list[Pod]]:
    """What is derived from the active pods (not finished) on each of ``node_names``, by node name, and the active
    pods on none of them, each in the order of ``pods`` (a snapshot's): what a Scheduler takes as ``derived`` and
    ``unbound`` when no view made them (`ClusterView.build` makes both with what else it gathers per pod). ``memo``:
    where each node's is kept (`of_node`), the caller's own when its snapshots are not the passes'."""
    on: dict[str, list[Pod]] = {name: [] for name in node_names}
    unbound: list[Pod] = []
    on_node = on.get
    for pod in filterfalse(_IS_TERMINAL, pods):
        at = on_node(pod.node_name or "")  # no node is named "": an unbound pod is on none
        if at is not None:
            at.append(pod)
        else:
            unbound.append(pod)
    return {name: of_node(name, held, memo) for name, held in on.items()}, unbound


def classes_of(pods: Sequence[Pod]) -> tuple[tuple[Interned, Pod, int], ...]:
    """`NodePods.classes` of ``pods``: the classes of those not being deleted, each with its first pod and how many
    pods are of it, in the order the classes first come."""
    first: dict[Interned, Pod] = {}
    count: dict[Interned, int] = {}
    for pod in pods:
        if not pod.deleting:
            key = pod.class_key
            if key in count:
                count[key] += 1
            else:
                first[key] = pod
                count[key] = 1
    return tuple((key, pod, count[key]) for key, pod in first.items())
