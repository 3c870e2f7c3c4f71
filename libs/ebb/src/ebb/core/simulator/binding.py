"""Where kube-scheduler binds a Pending pod: the simulated cluster's kube-scheduler (the embedded mode, the back-test).

The decision engine asks the simulator whether pods fit, in Karpenter's order and Karpenter's way (the first node
that takes a pod, the fullest first: consolidation packs). The real kube-scheduler chooses otherwise: it filters
the nodes that can take the pod, scores each and binds the pod to the best, a tie broken at random. By default
that spreads pods over the least allocated nodes, which decides which nodes empty out, which stay underutilized and
which evicted pods are moved again: a back-test that bound pods to the first node that fits had more emptiness
deletions, fewer evictions and far fewer pods evicted more than once than the real Karpenter on the same trace.

So this module plays kube-scheduler v1.34's default profile for one batch of Pending pods (`bind`):

- **Queue order** (PrioritySort): the higher priority first, then the earlier created; the snapshot's order breaks
  ties.
- **Filter**: the simulator's own (`SimState.feasible_nodes`): room for the requests, node selector, required node
  affinity, taints, required topology spread and pod (anti-)affinity, host ports, on the open existing nodes; the
  pod's preferences are not filters. Above 100 nodes kube-scheduler stops at the first feasible nodes
  `percentageOfNodesToScore` asks for (50% less one point per 125 nodes, at least 5% and 100 nodes), starting where
  the last pod's search stopped (`Binder.start`, kept between batches); the nodes in the snapshot's order.
- **Score**, each plugin 0-100 times its weight, summed:
  - NodeResourcesFit, LeastAllocated (weight 1): per resource of cpu and memory,
    ``(allocatable - requested) * 100 // allocatable`` (0 when over), their mean (integer division); requested is
    the node's pods and this one, a pod that requests no cpu (memory) counted as 100m (200 MiB);
  - NodeResourcesBalancedAllocation (weight 1): ``int((1 - |cpu fraction - memory fraction| / 2) * 100)``, each
    fraction the requests (as they are) over allocatable, at most 1; skipped for a pod that requests neither;
  - PodTopologySpread (weight 2): the pod's ScheduleAnyway constraints; a pod with no constraint of its own and a
    ReplicaSet, StatefulSet or ReplicationController owner gets the system defaults (hostname with maxSkew 3, zone
    with maxSkew 5, over the pods of its owner). A node's raw score is ``Σ count * ln(domains + 2) + maxSkew - 1``
    over the constraints (rounded; the count is the domain's matching pods over every node the pod's node
    affinity admits, the node's own for hostname; ``domains`` those of the feasible nodes), normalized to
    ``100 * (max + min - score) // max`` (100 for all when max is 0). With constraints of its own, a feasible
    node that lacks one of their keys scores 0.
- **Select**: the highest total; among equal totals one drawn uniformly from the caller's seeded random source,
  so a run is the same for its seed.

Not scored, because nothing ebb simulates makes them differ between nodes or because ebb's snapshot has no input for
them: ImageLocality (no node lists its images), TaintToleration (PreferNoSchedule taints), NodeAffinity's and
InterPodAffinity's preferred terms, DRA and volume scoring. The nodes of the default spreading are the owner's pods
(kube-scheduler matches the owner's selector, which selects the pods it owns), not a Service's.

It changes nothing the engine decides: the engine's own simulations keep Karpenter's rules (``Scheduler``'s
search). Pure: the snapshot and pods in, the bindings out; the random source is the caller's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from operator import itemgetter

import numpy as np

from ebb.core import node_pods
from ebb.core.memo import Memo
from ebb.core.model import LABEL_HOSTNAME, LABEL_ZONE, Pod, Snapshot
from ebb.core.simulator.arrays import BoolArray, IntArray
from ebb.core.simulator.constraints import PodClass
from ebb.core.simulator.scheduler import Scheduler, SimState

_FIRST, _SECOND = itemgetter(0), itemgetter(1)

#: kube-scheduler's highest score of one plugin (framework.MaxNodeScore)
MAX_SCORE = 100
#: the default profile's weights of the plugins scored here
WEIGHT_FIT, WEIGHT_BALANCED, WEIGHT_SPREAD = 1, 1, 2
#: what a pod that requests no cpu or memory counts as in LeastAllocated (schedutil.DefaultMilliCPURequest,
#: DefaultMemoryRequest)
NONZERO_CPU, NONZERO_MEMORY = 100, 200 * 1024 * 1024
#: PodTopologySpread's system default constraints: (topology key, maxSkew), both ScheduleAnyway
DEFAULT_SPREAD: tuple[tuple[str, int], ...] = ((LABEL_HOSTNAME, 3), (LABEL_ZONE, 5))
#: the owners whose selector gives a pod without constraints of its own the default spreading (helper.DefaultSelector
#: reads Services, ReplicationControllers, ReplicaSets and StatefulSets)
DEFAULT_SPREAD_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
#: percentageOfNodesToScore: below this many nodes every node is filtered (minFeasibleNodesToFind)
MIN_FEASIBLE = 100
#: the adaptive percentage's floor (minFeasibleNodesPercentageToFind)
MIN_PERCENTAGE = 5


def queue_order(pods: Sequence[Pod]) -> list[Pod]:
    """kube-scheduler's queue (PrioritySort): the higher priority first, then the earlier created; ``pods``' own
    order breaks ties (a pod without a creation time first)."""
    def key(pod: Pod) -> tuple[int, float]:
        created = pod.creation_time
        return -pod.priority, created.timestamp() if created is not None else -math.inf
    return sorted(pods, key=key)


def feasible_to_find(nodes: int) -> int:
    """How many feasible nodes kube-scheduler looks for before it scores (numFeasibleNodesToFind with the default
    adaptive percentageOfNodesToScore)."""
    if nodes < MIN_FEASIBLE:
        return nodes
    percentage = max(MIN_PERCENTAGE, 50 - nodes // 125)
    return max(MIN_FEASIBLE, nodes * percentage // 100)


def _owner(pod: Pod) -> tuple[str, str, str] | None:
    if pod.owner_kind in DEFAULT_SPREAD_OWNERS and pod.owner_name is not None:
        return pod.namespace, pod.owner_kind, pod.owner_name
    return None


def _round(x: np.ndarray) -> IntArray:
    """Go's math.Round of non-negative values (half away from zero), as integers."""
    return np.floor(x + 0.5).astype(np.int64)


def _counts(pods: Sequence[Pod]) -> tuple[int, int, Mapping[tuple[str, str, str], int]]:
    """What a batch reads of one node's pods (not those being deleted): how many request no cpu and how many no memory
    (LeastAllocated counts them as ``NONZERO_*``), and how many pods of each owner that spreads by default
    (`_owner`; read-only: kept with the node's derived pods)."""
    no_cpu = no_memory = 0
    owners: dict[tuple[str, str, str], int] = {}
    for pod in pods:
        if pod.deleting:
            continue
        requests = pod.spec.requests
        no_cpu += not requests.get("cpu")
        no_memory += not requests.get("memory")
        owner = _owner(pod)
        if owner is not None:
            owners[owner] = owners.get(owner, 0) + 1
    return no_cpu, no_memory, owners


class Binder:
    """One batch of kube-scheduler's binding on one simulation state: `choose` a node for a pod, `bind` it there."""

    def __init__(self, state: SimState, rng: random.Random, start: int = 0, owners: Sequence[Pod] = ()) -> None:
        """``start``: where the last batch's node search stopped (`feasible_to_find`); ``owners``: the pods whose
        owners' pods are counted per node for the default spreading (the batch's)."""
        self.state = state
        self.s = s = state.s
        self.rng = rng
        self.start = start
        n = s.N
        ci, mi = s.r_index.get("cpu"), s.r_index.get("memory")
        self._ci, self._mi = ci, mi
        zero = np.zeros(n, dtype=np.int64)
        self.alloc_cpu = s.node_alloc[:, ci] if ci is not None else zero
        self.alloc_mem = s.node_alloc[:, mi] if mi is not None else zero
        self.zones = s.node_labels.column(LABEL_ZONE)[0]
        #: per node, its pods that request no cpu / no memory (LeastAllocated counts them as NONZERO_*)
        self.no_cpu = np.zeros(n, dtype=np.int64)
        self.no_mem = np.zeros(n, dtype=np.int64)
        #: per owner of a pod of the batch (`_owner`), how many of its pods each node holds
        self.owned: dict[tuple[str, str, str], IntArray] = {}
        wanted = {o for o in map(_owner, owners) if o is not None}
        no_cpu, no_mem, owned = self.no_cpu, self.no_mem, self.owned
        # each node's counts, as its pods' derivation kept them (`_counts`) or found now
        per_node = ([d.derived("binding", _counts) for d in s.derived] if s.derived is not None
                    else [_counts(tuple(pods)) for pods in s.pods_on])
        if n:
            no_cpu[:] = np.fromiter(map(_FIRST, per_node), dtype=np.int64, count=n)
            no_mem[:] = np.fromiter(map(_SECOND, per_node), dtype=np.int64, count=n)
        if wanted:
            for b, (_, _, of_owners) in enumerate(per_node):
                for owner in wanted.intersection(of_owners):  # the batch's few owners among the node's, in C
                    counts = owned.get(owner)
                    if counts is None:
                        counts = owned[owner] = np.zeros(n, dtype=np.int64)
                    counts[b] += of_owners[owner]
        #: per class key, the nodes the pod's required node affinity and node selector admit (the spread's
        #: nodeAffinityPolicy: Honor)
        self._admitted: dict[object, BoolArray] = {}

    # -- filter ----------------------------------------------------------------------------------------
    def feasible(self, pod: Pod) -> tuple[PodClass, IntArray]:
        """The pod's form without preferences and the nodes kube-scheduler scores for it: the feasible ones, the
        first `feasible_to_find` of them from ``start`` on in a cluster of 100 nodes or more."""
        cls, ok = self.state.feasible_nodes(pod)
        n = self.s.N
        want = feasible_to_find(n)
        if want >= n:
            return cls, np.flatnonzero(ok)
        start = self.start % n
        order = np.concatenate((np.arange(start, n), np.arange(0, start)))
        at = np.flatnonzero(ok[order])
        if at.size > want:
            at = at[:want]
            processed = int(at[-1]) + 1
        else:
            processed = n
        self.start = (start + processed) % n
        return cls, np.sort(order[at])

    # -- score -----------------------------------------------------------------------------------------
    def scores(self, pod: Pod, cls: PodClass, idx: IntArray) -> IntArray:
        """Each of nodes ``idx``'s total score for ``pod`` (its form ``cls``)."""
        s, state = self.s, self.state
        req = s.pod_vec(pod)
        pod_cpu = int(req[self._ci]) if self._ci is not None else 0
        pod_mem = int(req[self._mi]) if self._mi is not None else 0
        alloc_cpu, alloc_mem = self.alloc_cpu[idx], self.alloc_mem[idx]
        used_cpu = alloc_cpu - state.free[idx, self._ci] if self._ci is not None else np.zeros(idx.size, np.int64)
        used_mem = alloc_mem - state.free[idx, self._mi] if self._mi is not None else np.zeros(idx.size, np.int64)
        # LeastAllocated, on the requests with a pod's missing cpu or memory counted as the defaults
        nz_cpu = used_cpu + self.no_cpu[idx] * NONZERO_CPU + (pod_cpu or NONZERO_CPU)
        nz_mem = used_mem + self.no_mem[idx] * NONZERO_MEMORY + (pod_mem or NONZERO_MEMORY)
        has_cpu, has_mem = alloc_cpu > 0, alloc_mem > 0
        least_cpu = np.where(has_cpu & (nz_cpu <= alloc_cpu),
                             (alloc_cpu - nz_cpu) * MAX_SCORE // np.maximum(alloc_cpu, 1), 0)
        least_mem = np.where(has_mem & (nz_mem <= alloc_mem),
                             (alloc_mem - nz_mem) * MAX_SCORE // np.maximum(alloc_mem, 1), 0)
        weights = has_cpu.astype(np.int64) + has_mem
        total = np.where(weights > 0, (least_cpu * has_cpu + least_mem * has_mem) // np.maximum(weights, 1), 0)
        total *= WEIGHT_FIT
        if pod_cpu or pod_mem:  # BalancedAllocation skips a best-effort pod
            frac_cpu = np.minimum((used_cpu + pod_cpu) / np.maximum(alloc_cpu, 1), 1.0)
            frac_mem = np.minimum((used_mem + pod_mem) / np.maximum(alloc_mem, 1), 1.0)
            std = np.where(has_cpu & has_mem, np.abs((frac_cpu - frac_mem) / 2), 0.0)
            total += WEIGHT_BALANCED * ((1 - std) * MAX_SCORE).astype(np.int64)
        spread = self._spread(pod, cls, idx)
        if spread is not None:
            total += WEIGHT_SPREAD * spread
        return total

    def _spread(self, pod: Pod, cls: PodClass, idx: IntArray) -> IntArray | None:
        """PodTopologySpread's normalized score of nodes ``idx``, None when it has no constraint to score."""
        s, state = self.s, self.state
        # (per-node counts of the scored nodes, the topology size, maxSkew, which scored nodes have the key)
        terms: list[tuple[np.ndarray, int, int, BoolArray]] = []
        ignored = np.zeros(idx.size, dtype=bool)
        if pod.spec.spread:
            strict = s.classes(pod)[0]
            soft = [(sp, c) for sp, c in zip(strict.spec.spread, strict.constraints, strict=False)
                    if sp.when_unsatisfiable != "DoNotSchedule"]
            if not soft:
                return None
            codes_of = [state.bin_codes[c.key][idx] for _, c in soft]
            for codes in codes_of:
                ignored |= codes < 0  # a node without one of the keys is not scored
            kept = ~ignored
            for (sp, c), codes in zip(soft, codes_of, strict=True):
                counts = state.counts[c.group]
                present = codes >= 0
                count = np.where(present, counts[np.maximum(codes, 0)], 0)
                size = int(np.count_nonzero(kept)) if c.key == LABEL_HOSTNAME else np.unique(codes[kept]).size
                terms.append((count, size, sp.max_skew, present))
        else:
            owner = _owner(pod)
            if owner is None:
                return None
            owned = self.owned.get(owner)
            if owned is None:
                owned = self.owned[owner] = np.zeros(s.N, dtype=np.int64)
            for key, max_skew in DEFAULT_SPREAD:
                if key == LABEL_HOSTNAME:
                    terms.append((owned[idx], idx.size, max_skew, np.ones(idx.size, dtype=bool)))
                    continue
                zones = self.zones
                admitted = self._admitted_by(pod)
                counted = admitted & (zones >= 0)
                per_zone = np.bincount(zones[counted], weights=owned[counted], minlength=int(zones.max(initial=-1)) + 1)
                mine = zones[idx]
                present = mine >= 0
                count = np.where(present, per_zone[np.maximum(mine, 0)] if per_zone.size else 0, 0)
                terms.append((count, np.unique(mine).size, max_skew, present))
        raw = np.zeros(idx.size, dtype=np.float64)
        for count, size, max_skew, present in terms:
            raw += np.where(present, count * math.log(size + 2) + (max_skew - 1), 0.0)
        score = _round(raw)
        kept = ~ignored
        if not kept.any():
            return np.zeros(idx.size, dtype=np.int64)
        high, low = int(score[kept].max()), int(score[kept].min())
        if high == 0:
            return np.where(kept, MAX_SCORE, 0).astype(np.int64)
        return np.where(kept, MAX_SCORE * (high + low - score) // high, 0).astype(np.int64)

    def _admitted_by(self, pod: Pod) -> BoolArray:
        """The nodes the pod's required node affinity and node selector admit."""
        key = pod.class_key
        hit = self._admitted.get(key)
        if hit is None:
            table = self.s.node_labels
            hit = table.terms(pod.spec.required_node_terms)
            if pod.spec.node_selector:
                hit = hit & table.selector(pod.spec.node_selector)
            if pod.spec.volume_terms is not None:  # kube-scheduler's VolumeBinding filter
                hit = hit & table.terms(pod.spec.volume_terms)
            self._admitted[key] = hit
        return hit

    # -- select and bind -------------------------------------------------------------------------------
    def choose(self, pod: Pod) -> tuple[PodClass, int] | None:
        """The pod's form and the node kube-scheduler would bind it to, or None when no node takes it."""
        cls, idx = self.feasible(pod)
        if idx.size == 0:
            return None
        if idx.size == 1:
            return cls, int(idx[0])
        total = self.scores(pod, cls, idx)
        best = np.flatnonzero(total == total.max())
        pick = int(best[0]) if best.size == 1 else int(best[self.rng.randrange(best.size)])
        return cls, int(idx[pick])

    def bind(self, pod: Pod, cls: PodClass, b: int) -> None:
        """Put ``pod`` on node ``b``: the state's room and topology counts, and the counts scoring reads."""
        self.state.bind(pod, cls, b)
        requests = pod.spec.requests
        if not requests.get("cpu"):
            self.no_cpu[b] += 1
        if not requests.get("memory"):
            self.no_mem[b] += 1
        owner = _owner(pod)
        if owner is not None and owner in self.owned:
            self.owned[owner][b] += 1


#: what `bind` derived from each node's pods (`node_pods.of_node`), by node name
_DERIVED: Memo[str, node_pods.NodePods] = Memo(node_pods.KEEP_AT_MOST)


def bind(snapshot: Snapshot, pods: Sequence[Pod], rng: random.Random, start: int = 0) -> tuple[dict[str, str], int]:
    """kube-scheduler's bindings of ``pods`` (Pending, on no node, in ``snapshot``): pod key -> node name for each it
    binds, in its queue order, each on the state the ones before left; and where its node search stopped (the next
    batch's ``start``). A pod no node takes is left out."""
    # each node's pods derived as a pass's view derives them (`node_pods`), kept apart from the passes' (they look at
    # other moments of the cluster): the nodes whose pods did not change since the last binding answer from it
    derived, unbound = node_pods.of_snapshot((n.name for n in snapshot.nodes), snapshot.pods, _DERIVED)
    scheduler = Scheduler(snapshot, extra_pods=pods, kube_scheduler=True, derived=derived, unbound=unbound)
    state = scheduler.new_state()
    binder = Binder(state, rng, start, pods)
    bound: dict[str, str] = {}
    for pod in queue_order(pods):
        found = binder.choose(pod)
        if found is None:
            continue
        cls, b = found
        binder.bind(pod, cls, b)
        bound[pod.key] = scheduler.nodes[b].name
    return bound, binder.start
