"""Topology: the domains pods are counted in, and the rules of topology spread and pod (anti-)affinity over the counts.

A *domain* is one value of a topology key (a zone; for the hostname key, a bin itself), coded as an integer per key
for the existing nodes and for every NodePool offering (`Topology.domain_codes`). A *group* is the pods counted per
domain for one rule: those a spread's or an affinity term's selector matches (kind "match"), or those owning a
required anti-affinity term (kind "owner", so a pod the term selects keeps out of their domains). The Scheduler
registers a group per distinct rule its pods have (`Topology.group`) and a simulation keeps one count per domain of
each (`SimState.counts`).

The rules read those counts (`Topology.condition`): a spread admits a domain while its count, with the pod, stays
within ``maxSkew`` of the least-loaded eligible domain (`Topology.global_min`); a required affinity wants a matching
pod in the domain (or none anywhere, when the pod matches itself); an anti-affinity wants none.
`Topology.allowed_bins` applies them to every bin at once; `Topology.narrow_to_domains` to a claim's offerings,
whose domain is not decided yet (Karpenter narrows it as pods join).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np

from ebb.core.labels import blocking_taints, selector_matches
from ebb.core.model import (
    LABEL_HOSTNAME,
    Pod,
    PodAffinityTerm,
    Requirement,
    SchedulingSpec,
    Toleration,
    TopologySpread,
)
from ebb.core.simulator.arrays import BoolArray, IntArray, any_set, trues
from ebb.core.simulator.constraints import Constraint, PodClass, Pool, tolerated
from ebb.core.simulator.labeltable import LabelTable

_GROUPS_KEY = attrgetter("groups_key")

#: what separates a topology key from its node filter's id in a filtered group's key (`Topology.spread_key`);
#: no label key holds it
FILTERED = "|"


@dataclass
class Group:
    """Pods counted per topology domain: those matching `selector` (kind "match"), or those owning a
    required anti-affinity term (kind "owner", for the inverse check)."""

    kind: str
    key: str
    selector: Any  # LabelSelector
    namespaces: frozenset[str] | None  # None = all namespaces
    term: PodAffinityTerm | None = None


class Topology:
    """The topology groups and domains of one Scheduler: registered as pods bring them, never changed once made."""

    def __init__(self, n_nodes: int, max_bins: int, node_labels: LabelTable,
                 taints_of: Mapping[tuple[Any, ...], IntArray], pools: Sequence[Pool]) -> None:
        """``node_labels`` and ``taints_of`` (`constraints.taint_sets`): of the ``n_nodes`` existing nodes;
        ``max_bins``: how many bins a simulation may hold (the hostname key's domains)."""
        self.n_nodes = n_nodes
        self.max_bins = max_bins
        self.node_labels = node_labels
        self.taints_of = taints_of
        self.pools = pools
        self.groups: list[Group] = []
        #: per group, the topology key its domains are of (its key without a spread's node filter)
        self.group_labels: list[str] = []
        self._group_ids: dict[tuple[Any, ...], int] = {}
        #: the node filters of topology spreads that honour the pod's node affinity (`spread_key`), by id
        #: (nodeSelector, required node terms, tolerations: None unless the spread honours taints)
        self._node_filters: list[tuple[Mapping[str, str], tuple[tuple[Requirement, ...], ...],
                                       tuple[Toleration, ...] | None]] = []
        self._node_filter_ids: dict[tuple[Any, ...], int] = {}
        #: the keys the groups count under (a filtered one too), in the order first registered
        self.topology_keys: dict[str, int] = {LABEL_HOSTNAME: 0}
        #: per key: (value -> code, each existing node's code, per NodePool each offering's code); -1 is no domain
        self.domain_codes: dict[str, tuple[dict[str, int], IntArray, list[IntArray]]] = {}
        self.build_domains(LABEL_HOSTNAME)

    def group(self, kind: str, key: str, selector: Any, namespaces: frozenset[str] | None,
              term: PodAffinityTerm | None = None) -> int:
        """The id of the group of pods counted per domain of ``key`` (registered the first time it is asked for):
        those ``selector`` matches in ``namespaces`` (None: all), or with ``kind`` "owner" those owning ``term``."""
        gkey = (kind, key, selector, namespaces, term)
        gid = self._group_ids.get(gkey)
        if gid is None:
            gid = self._group_ids[gkey] = len(self.groups)
            self.groups.append(Group(kind, key, selector, namespaces, term))
            self.group_labels.append(key.split(FILTERED, maxsplit=1)[0])
            self.topology_keys.setdefault(key, len(self.topology_keys))
            if key not in self.domain_codes:
                self.build_domains(key)
        return gid

    @staticmethod
    def term_namespaces(term: PodAffinityTerm, own_ns: str) -> frozenset[str] | None:
        """The namespaces a pod's affinity term selects pods in (None: all), for a pod of namespace ``own_ns``."""
        if term.all_namespaces:
            return None
        if term.namespaces is None:
            return frozenset((own_ns,))
        # a namespaceSelector without Namespace objects to read it by is taken as selecting the pod's own namespace,
        # which it always would with the listed ones too (every namespace carries kubernetes.io/metadata.name)
        return term.namespaces | {own_ns} if term.namespace_selector is not None else term.namespaces

    def register_groups(self, pods: Sequence[Pod]) -> None:
        """The groups of every spread and pod (anti-)affinity term of ``pods``, required or preferred."""
        # the first pod of each distinct groups key, in the order the keys first come, found in C (every pod of
        # every pass; most have none, and a few keys are distinct): the keys in that order, then each key's first
        # place (interned keys compare by identity, in C)
        keys = list(map(_GROUPS_KEY, pods))
        first = dict.fromkeys(keys)
        first.pop(None, None)
        for pod in [pods[keys.index(key)] for key in first]:
            s = pod.spec
            for sp in s.spread:
                self.group("match", self.spread_key(sp, s), sp.selector, frozenset((pod.namespace,)))
            for term in (*s.pod_affinity, *(t for _, t in s.preferred_pod_affinity)):
                self.group("match", term.topology_key, term.selector, self.term_namespaces(term, pod.namespace))
            for term in (*s.pod_anti_affinity, *(t for _, t in s.preferred_pod_anti_affinity)):
                self.group("match", term.topology_key, term.selector, self.term_namespaces(term, pod.namespace))
            for term in s.pod_anti_affinity:
                self.group("owner", term.topology_key, term.selector,
                           self.term_namespaces(term, pod.namespace), term)

    def spread_key(self, sp: TopologySpread, spec: SchedulingSpec) -> str:
        """The key a topology spread's group counts under. kube-scheduler's ``nodeAffinityPolicy: Honor`` (the
        default) counts only the pods on nodes the spreading pod's node selector and required node affinity
        admit, and ``nodeTaintsPolicy: Honor`` only those on nodes whose taints it tolerates, so such a spread
        counts under its own key, ``KEY|FILTER``: the topology key's domains, with every node (and offering) the
        filter refuses in none (`build_domains`). The hostname key needs none: a node the pod may not use is
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
        return any(blocking_taints(tolerations, taints) for taints in self.taints_of) or any(
            blocking_taints(tolerations, pool.pool.taints) for pool in self.pools)

    def build_domains(self, key: str) -> None:
        """Domain codes for a topology key: one per value seen on nodes or NodePool offerings; the
        hostname key uses the bin index itself. A filtered key (`spread_key`) shares its topology key's codes,
        -1 (no domain: not counted) on the nodes and offerings its filter refuses."""
        if key == LABEL_HOSTNAME:
            self.domain_codes[key] = ({}, np.arange(self.n_nodes, dtype=np.int64), [])
            return
        if FILTERED in key:
            label, fid = key.split(FILTERED)
            if label not in self.domain_codes:
                self.build_domains(label)
            lookup, node_codes, pool_codes = self.domain_codes[label]
            selector, terms, tolerations = self._node_filters[int(fid)]
            nodes_ok = self.node_labels.admitted(selector, terms)
            if tolerations is not None:
                nodes_ok &= tolerated(self.taints_of, self.n_nodes, tolerations)
            self.domain_codes[key] = (lookup, np.where(nodes_ok, node_codes, -1), [
                np.full_like(codes, -1) if tolerations is not None and blocking_taints(tolerations, pool.pool.taints)
                else np.where(pool.admitted(selector, terms), codes, -1)
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
        self.domain_codes[key] = (lookup, node_codes, pool_codes)

    def domain_count(self, key: str) -> int:
        """How many domains ``key`` has (the hostname key: one per bin a simulation may hold)."""
        if key == LABEL_HOSTNAME:
            return self.max_bins
        return len(self.domain_codes[key][0])

    def domain_value(self, key: str, code: int) -> str:
        """The label value of domain ``code`` of ``key`` ("" when there is none)."""
        lookup = self.domain_codes[key][0]
        for value, c in lookup.items():
            if c == code:
                return value
        return ""

    def roles(self, pod: Pod) -> tuple[list[int], list[int], list[Constraint]]:
        """The pod's part in the topology groups registered now: the groups whose count it raises (those whose
        selector matches it, and the anti-affinity "owner" groups of its own required terms), and the inverse
        anti-affinity it must respect (owners of a term that selects it). The same for every form of the pod."""
        matched: list[int] = []
        owned: list[int] = []
        inverse: list[Constraint] = []
        for gid, g in enumerate(self.groups):
            if g.kind == "match":
                if (g.namespaces is None or pod.namespace in g.namespaces) and selector_matches(g.selector, pod.labels):
                    matched.append(gid)
            elif (g.term is not None and g.term in pod.spec.pod_anti_affinity
                  and g.namespaces == self.term_namespaces(g.term, pod.namespace)):
                owned.append(gid)
            # inverse anti-affinity: existing owners of a term that selects this pod
            if g.kind == "owner" and (g.namespaces is None or pod.namespace in g.namespaces) \
                    and selector_matches(g.selector, pod.labels):
                inverse.append(Constraint("anti", gid, g.key))
        return matched, owned, inverse

    def spread_constraint(self, pod: Pod, spec: SchedulingSpec, sp: TopologySpread, gid: int,
                          pool_combo_ok: list[BoolArray | None], *, affinity_ok: BoolArray,
                          taints_ok: BoolArray) -> Constraint:
        """The spread's constraint (of the pod's form ``spec``): its eligible domains are the nodes its inclusion
        policies admit (``nodeAffinityPolicy``: the pod's node affinity, Honor by default; ``nodeTaintsPolicy``: the
        node's taints tolerated, Ignore by default) and, for keys other than the hostname, what the NodePools the pod
        may launch in offer, and under ``nodeTaintsPolicy: Ignore`` what those whose taints it does not tolerate
        offer."""
        self_match = int(selector_matches(sp.selector, pod.labels))
        honored = affinity_ok if sp.node_affinity_policy == "Honor" else np.ones(self.n_nodes, dtype=bool)
        if sp.node_taints_policy == "Honor":
            honored = honored & taints_ok
        if sp.topology_key == LABEL_HOSTNAME:
            return Constraint("spread", gid, sp.topology_key, sp.max_skew, self_match, sp.min_domains,
                              honored.nonzero()[0], new_domain=any(ok is not None for ok in pool_combo_ok))
        if sp.topology_key not in self.domain_codes:
            self.build_domains(sp.topology_key)
        _, node_codes, pool_codes = self.domain_codes[sp.topology_key]
        eligible_nodes = node_codes[(node_codes >= 0) & honored]
        codes = set(eligible_nodes.tolist())
        for pool, launch_ok, pc in zip(self.pools, pool_combo_ok, pool_codes, strict=True):
            ok = launch_ok
            if ok is None and sp.node_taints_policy != "Honor" and blocking_taints(spec.tolerations, pool.pool.taints):
                # under the default nodeTaintsPolicy, Ignore, the offerings of a NodePool whose taints the pod does not
                # tolerate are domains too (of 0 pods: a zone only it offers holds the others back), as Karpenter's
                # domain groups keep every NodePool's zones with its taints
                ok = pool.admitted(spec.node_selector, spec.required_node_terms or ())
            if ok is not None:
                codes.update(pc[ok & (pc >= 0)].tolist())
        return Constraint("spread", gid, self.groups[gid].key, sp.max_skew, self_match, sp.min_domains,
                          np.array(sorted(codes), dtype=np.int64))

    def claim_code(self, pool: int, mask: BoolArray, key: str) -> int:
        """The domain of ``key`` a claim of NodePool ``pool`` is pinned to by its offerings ``mask`` (-1: none yet,
        or the hostname key, whose domain is the claim's bin)."""
        if key == LABEL_HOSTNAME:
            return -1
        combo_codes = self.domain_codes[key][2][pool] if key in self.domain_codes else None
        if combo_codes is None:
            return -1
        values = combo_codes[mask]
        return int(values[0]) if values.size and not any_set(values != values[0]) else -1

    def global_min(self, c: Constraint, counts: IntArray, n_bins: int, removed: set[int]) -> int:
        """The count of spread ``c``'s least-loaded eligible domain, which a domain's count (with the pod) may exceed by
        at most ``maxSkew``. ``n_bins``: the bins open so far; ``removed``: the existing nodes the simulation took
        out."""
        if c.key == LABEL_HOSTNAME:
            if c.new_domain:
                return 0
            # kube-scheduler's domains: every node the pod's node affinity admits, cordoned or not
            # (nodes this simulation removed are gone), plus the nodes the simulation opened
            nodes = c.eligible if c.eligible is not None else np.arange(self.n_nodes)
            if removed:
                nodes = nodes[~np.isin(nodes, np.fromiter(removed, dtype=np.int64))]
            domains = np.concatenate([nodes, np.arange(self.n_nodes, n_bins)])
            return int(counts[domains].min()) if domains.size else 0
        if c.eligible is None or c.eligible.size == 0:
            return 0
        if c.min_domains is not None and c.eligible.size < c.min_domains:
            return 0
        return int(counts[c.eligible].min())

    def condition(self, c: Constraint, val: IntArray, counts: IntArray, n_bins: int, removed: set[int]) -> BoolArray:
        """Per domain whose count is in ``val`` (of ``counts``, the group's counts): does constraint ``c`` admit a pod
        there? (`global_min` for the others.)"""
        if c.kind == "spread":
            return np.asarray(val + c.self_match - self.global_min(c, counts, n_bins, removed) <= c.max_skew)
        if c.kind == "affinity":
            if c.self_match and not any_set(counts):
                return np.ones(val.shape, dtype=bool)
            return np.asarray(val > 0)
        return np.asarray(val == 0)

    def admitted(self, c: Constraint, counts: IntArray, n_bins: int, removed: set[int]) -> BoolArray:
        """Per domain of constraint ``c``'s key (``counts``: its group's counts), does ``c`` admit a pod there, and one
        entry more, last, for a bin or an offering without a domain of the key: an anti-affinity admits it, the others
        do not. Indexed by domain codes, -1 (no domain) reads that last entry: the condition is computed once per
        domain, not once per bin or offering."""
        n = counts.shape[0]
        out: BoolArray = np.empty(n + 1, dtype=bool)
        out[:n] = self.condition(c, counts, counts, n_bins, removed)
        out[n] = c.kind == "anti"
        return out

    def allowed_bins(self, constraints: Sequence[Constraint], bin_codes: Mapping[str, IntArray],
                     counts: Sequence[IntArray], n_bins: int, removed: set[int], *,
                     admitted: list[BoolArray] | None = None) -> BoolArray:
        """Per bin of the ``n_bins`` open so far (``bin_codes``: each bin's domain per key; ``counts``: per group): do
        all the ``constraints`` admit a pod there? A claim with no domain of a key yet is admitted (`narrow_to_domains`
        then picks one). ``admitted``: given, each constraint's `admitted` domains are appended to it, in order, for a
        `narrow_to_domains` of the same constraints while nothing changed."""
        ok = trues(n_bins)
        if not constraints:
            return ok
        for c in constraints:
            codes = bin_codes[c.key][:n_bins]
            domains = self.admitted(c, counts[c.group], n_bins, removed)
            if admitted is not None:
                admitted.append(domains)
            allowed = domains[codes]
            if c.kind != "anti":  # a claim without a domain of the key yet
                unpinned = codes[self.n_nodes:] < 0
                allowed[self.n_nodes:] |= unpinned
            ok &= allowed
        return ok

    def narrow_to_domains(self, p_index: int, mask: BoolArray, cls: PodClass, counts: Sequence[IntArray], *,
                          n_bins: int, removed: set[int], pinned: Mapping[str, IntArray] | None = None,
                          b: int = -1, admitted: Sequence[BoolArray] | None = None) -> BoolArray | None:
        """A claim's offerings ``mask`` of NodePool ``p_index`` (none empty) narrowed for a pod of ``cls`` to the
        domains its constraints admit, or None when none is left: a spread picks the least-loaded domain left (the
        lowest code on ties), as Karpenter does, and every group the pod counts in pins the claim to one domain of its
        key (the cheapest offering's), so the pod is counted where it runs. ``counts``: per group; ``n_bins`` and
        ``removed`` as for `global_min`. ``pinned`` and ``b``: the offerings are those of the claim in bin ``b`` (or
        fewer), and ``pinned`` each bin's domain per key (`SimState.bin_codes`): a key the claim is already pinned to
        one domain of needs no pin. ``admitted``: what `allowed_bins` found of the class's constraints on the same
        counts (None: found here)."""
        domain_codes = self.domain_codes
        for i, c in enumerate(cls.constraints):
            if c.key == LABEL_HOSTNAME:
                continue
            combo_codes = domain_codes[c.key][2][p_index]
            of_group = counts[c.group]
            domains = admitted[i] if admitted is not None else self.admitted(c, of_group, n_bins, removed)
            mask &= domains[combo_codes]
            if not any_set(mask):
                return None
            if c.kind == "spread":
                # choose the least-populated remaining domain (lowest code on ties), as Karpenter does
                codes_left = combo_codes[mask]
                load = of_group[codes_left] * (len(of_group) + 1) + codes_left
                mask &= combo_codes == codes_left[load.argmin()]
        labels = self.group_labels
        for gid in (*cls.matched, *cls.owned):
            key = labels[gid]  # pinned to a domain of the topology key itself
            if key == LABEL_HOSTNAME:
                continue
            if pinned is not None:
                codes = pinned.get(key)
                if codes is not None and codes[b] >= 0:
                    continue  # every offering the claim keeps is in that one domain, and so are these
            combo_codes = domain_codes[key][2][p_index]
            values = combo_codes[mask]
            if values.size and any_set(values != values[0]):  # pin the domain so the pod is counted where it runs
                combo_price = self.pools[p_index].combo_price
                cheapest = int(mask.nonzero()[0][combo_price[mask].argmin()])
                mask &= combo_codes == combo_codes[cheapest]
        return mask if any_set(mask) else None
