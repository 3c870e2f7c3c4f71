"""An independent checker for simulation results: does the cluster the result describes obey the rules?

`check(snapshot, result, removed_nodes, placed_pods)` builds the cluster *after* the simulation acted
and lists, in words, every rule the placement breaks. An empty list means the result is valid.

Why a separate checker. The simulator (`scheduler.py`) is built for speed: numpy bins, per-class
caches, incremental topology counters, a rollback journal. Each of those is a place for a bug that a
test written against the same code would share. This module re-derives the answer the slow and
obvious way, from the model objects, with plain loops over nodes and pods, and shares nothing with the
simulator except the model (`ebb.core.model`) and the Kubernetes matching rules (`ebb.core.labels`).
The property tests (tests/property/) run both and require the checker to accept whatever the simulator
produces. It is not meant for production paths: it is quadratic in pods and happily so.

The final cluster:
  * existing nodes minus `removed_nodes`; each keeps the non-terminal pods bound to it that are not in
    `placed_pods`, and receives the placed pods the result sends to it;
  * one node per `result.new_nodes` entry, launched as its cheapest option: instance type
    `instance_types[0]`, `capacity_type`, and the zone of that type's cheapest available offering of
    that capacity type among `zones` (the one priced `price` when there is one). Its labels are the
    type's labels (kubernetes.io/arch and /os default to amd64 and linux), the NodePool's single-value
    `In` requirements on other keys, the NodePool template labels, and karpenter.sh/nodepool,
    instance type, zone, capacity type and hostname; its taints are the NodePool's taints (startup
    taints go away once the node is initialised); allocatable = capacity - overhead - the requests of
    the DaemonSets that would run there (tolerated taints, matching nodeSelector and node affinity).

The rules, each violation reported as "<rule>: <what>":
  * bookkeeping -- every placed pod is either placed or unplaceable with a reason (never both); every
    placement names a node of the final cluster; new nodes are consistent (known NodePool, instance
    type and offering; labels within the NodePool's requirements; pods listed = pods placed; not empty);
  * closed -- no pod goes to a cordoned, deleting, not-ready or disruption-tainted node
    (karpenter.sh/disrupted or ebb.sh/disrupted);
  * node-affinity -- nodeSelector and required node affinity (an OR of terms) match the node's labels;
  * taints -- every NoSchedule / NoExecute taint of the node is tolerated;
  * resources -- on every node that received a pod and every new node, the requests of all its pods
    (cpu, memory, ephemeral-storage, extended resources; one pod slot per pod) fit its allocatable;
  * pod-affinity -- required pod affinity: another matching pod in the pod's topology domain, or the
    pod may have been the first of its group (see `_check_affinity`);
  * anti-affinity -- no pod in the pod's domain matches its required anti-affinity, and no pod's
    required anti-affinity matches a placed pod in its domain (existing pods' terms count too);
  * spread -- topology spread with whenUnsatisfiable DoNotSchedule, kube-scheduler's rule on the final
    state: count(domain of the pod) - min over eligible domains <= maxSkew. Pods are counted on the
    nodes the constraint's nodeAffinityPolicy / nodeTaintsPolicy admit; eligible domains are those
    nodes' values plus, for keys other than the hostname, the values of every offering a NodePool the
    pod tolerates can launch and its node affinity admits, with a placeholder hostname (Karpenter: a zone it may
    launch into is a domain even when empty); minDomains above the number of domains makes the minimum 0;
  * host-ports -- no two pods on one node use the same protocol and port on overlapping host IPs (on a new node,
    nor a placed pod and the pod of a DaemonSet that runs there);
  * limits -- NodePools that received new nodes stay within their limits (capacity of their remaining
    nodes plus the new ones).

Pods that are deleting still hold their resources, host ports and the required anti-affinity terms of their own
(Karpenter's inverse anti-affinity keeps their binding until they stop) but, as in kube-scheduler's spread, Karpenter's
``countDomains`` and the simulator, do not count for spread, or for another pod's own affinity or anti-affinity terms.
DaemonSet pods of new nodes are overhead and host ports only. Only violations that involve a placed pod or a new node
are reported: the snapshot's own problems (an overfull node nobody touched, two existing pods breaking each other's
anti-affinity) are not the result's.

Limits of a final-state check. Resources, labels, taints, anti-affinity and host ports do not depend
on the order pods were placed in; spread and pod affinity do. The spread rule above is exact when the
pods a constraint's selector matches carry the same constraint and node affinity (the replicas of one
workload); a later pod without the constraint, or with other node affinity and hence other eligible
domains, may legitimately raise a domain past an earlier pod's maxSkew. The pod-affinity rule is a
necessary condition for some placement order to exist. Where the hostname spread rule is looser than
Karpenter's incremental one (a new node is an empty hostname domain), the simulator must satisfy it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ebb.core.labels import (
    blocking_taints,
    daemonset_runs_on_node,
    made_up_labels,
    requirements_match,
    selector_matches,
    terms_match,
)
from ebb.core.model import (
    ATTACH_LIMIT_PREFIX,
    FIELD_NODE_NAME,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_ZONE,
    NEW_NODE_DEFAULT_LABELS,
    DaemonSet,
    InstanceType,
    NodePool,
    Offering,
    Pod,
    PodAffinityTerm,
    SchedulingSpec,
    Snapshot,
    Taint,
    TopologySpread,
)
from ebb.core.simulator.results import NewNode, SimulationResult

# Keys an offering decides itself; a NodePool requirement on any other key with one `In` value labels the node.
_OFFERING_KEYS = (LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_HOSTNAME)
#: the hostname an offering is matched with, as Karpenter's NodeClaim holds a placeholder one while it schedules: it
#: exists, and with a ``/`` no label value may hold, it is no node's (the scheduler's own is its concern)
_NEW_HOSTNAME = "hostname-placeholder/offering"


@dataclass
class _FinalNode:
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, int]
    capacity: Mapping[str, int]
    nodepool: str | None
    is_new: bool
    closed: str | None  # why no pod may be added, or None
    counts_for_limits: bool = True
    pods: list[Pod] = field(default_factory=list)
    received: list[Pod] = field(default_factory=list)  # the placed pods among `pods`
    daemons: list[DaemonSet] = field(default_factory=list)  # a new node's: the DaemonSets whose pods run there


@dataclass
class _Final:
    """The final cluster and where violations go."""

    snapshot: Snapshot
    nodes: list[_FinalNode]
    placed_keys: set[str]
    out: list[str]


def check(snapshot: Snapshot, result: SimulationResult, removed_nodes: Iterable[str],
          placed_pods: Sequence[Pod]) -> list[str]:
    """Every rule the cluster described by `result` breaks, in words (empty: the result is valid).

    `removed_nodes` are the nodes the simulation took away; `placed_pods` the pods it was asked to
    place (those of the removed nodes plus any pending or extra pods)."""
    out: list[str] = []
    removed = set(removed_nodes)
    placed_keys = {p.key for p in placed_pods}
    pools = {p.name: p for p in snapshot.nodepools}
    types = {t.name: t for t in snapshot.instance_types}

    nodes: dict[str, _FinalNode] = {}
    for existing in snapshot.nodes:
        if existing.name in removed:
            continue
        labels = dict(existing.labels)
        labels.setdefault(LABEL_HOSTNAME, existing.name)
        labels[FIELD_NODE_NAME] = existing.name  # what a node selector's matchFields reads
        closed = None
        if existing.unschedulable:
            closed = "cordoned"
        elif existing.deleting:
            closed = "being deleted"
        elif not existing.ready:
            closed = "not ready"
        elif existing.being_disrupted:
            closed = f"tainted {existing.disruption_taint}"
        nodes[existing.name] = _FinalNode(existing.name, labels, existing.taints, dict(existing.allocatable),
                                          existing.capacity, existing.nodepool, False, closed,
                                          counts_for_limits=not existing.deleting)
    for pod in snapshot.pods:
        if pod.node_name in nodes and not pod.is_terminal and pod.key not in placed_keys:
            nodes[pod.node_name].pods.append(pod)

    for new in result.new_nodes:
        made = _materialise(snapshot, new, pools, types, out)
        if made is None:
            continue
        if new.hostname in nodes:
            out.append(f"bookkeeping: new node {new.hostname} has the name of a node that is still there")
            continue
        nodes[new.hostname] = made

    # Bookkeeping: each placed pod once, to a node of the final cluster.
    for key in result.placements:
        if key not in placed_keys:
            out.append(f"bookkeeping: placement for {key}, which the simulation was not asked to place")
    for key in result.unplaceable:
        if key not in placed_keys:
            out.append(f"bookkeeping: {key} reported unplaceable but the simulation was not asked to place it")
    for pod in placed_pods:
        target = result.placements.get(pod.key)
        reason = result.unplaceable.get(pod.key)
        if target is None and reason is None:
            out.append(f"bookkeeping: {pod.key} is neither placed nor reported unplaceable")
            continue
        if target is not None and reason is not None:
            out.append(f"bookkeeping: {pod.key} is both placed (on {target}) and unplaceable ({reason})")
        if target is None:
            if not str(reason).strip():
                out.append(f"bookkeeping: {pod.key} is unplaceable without a reason")
            continue
        node = nodes.get(target)
        if node is None:
            what = "a removed node" if target in removed else "a node that does not exist"
            out.append(f"bookkeeping: {pod.key} placed on {target}, {what}")
            continue
        node.pods.append(pod)
        node.received.append(pod)
    for new in result.new_nodes:
        node = nodes.get(new.hostname)
        if node is None or not node.is_new:
            continue
        listed = sorted(new.pods)
        actual = sorted(p.key for p in node.received)
        if listed != actual:
            out.append(f"bookkeeping: new node {new.hostname} lists pods {listed} but receives {actual}")
        if not node.received:
            out.append(f"bookkeeping: new node {new.hostname} receives no pod")

    final = _Final(snapshot, list(nodes.values()), placed_keys, out)
    for dest in final.nodes:
        for pod in dest.received:
            _check_node_rules(pod, dest, out)
            for term in pod.spec.pod_affinity:
                _check_affinity(final, pod, dest, term)
            _check_anti_affinity(final, pod, dest)
            for spread in pod.spec.spread:
                if spread.when_unsatisfiable == "DoNotSchedule":
                    _check_spread(final, pod, dest, spread)
        if dest.received or dest.is_new:
            _check_resources(dest, out)
            _check_ports(dest, placed_keys, out)
    _check_limits(snapshot, result, final.nodes, out)
    return out


# --------------------------------------------------------------------------------------------------
# The final cluster's new nodes


def offering_labels(pool: NodePool, it: InstanceType, offering: Offering,
                    chosen: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels a node of `pool` launched as this instance type and offering carries (no hostname): a requirement
    `In` on a key of the NodePool's own gives the value `chosen` names (a new node's `labels`), else its first."""
    labels = {**NEW_NODE_DEFAULT_LABELS, **it.labels, LABEL_OS: it.os_under(pool.requirements)}
    for req in pool.requirements:
        if req.operator == "In" and req.values and req.key not in _OFFERING_KEYS and req.key not in labels:
            value = (chosen or {}).get(req.key)
            labels[req.key] = value if value is not None and value in req.values else req.values[0]
    labels.update(made_up_labels(pool, (*_OFFERING_KEYS, *labels)))
    labels.update(pool.labels)
    labels.update(offering.labels)
    labels.update(pool.template_labels)
    labels[LABEL_INSTANCE_TYPE] = it.name
    labels[LABEL_ZONE] = offering.zone
    labels[LABEL_CAPACITY_TYPE] = offering.capacity_type
    return labels


def launch_offering(snapshot: Snapshot, new: NewNode) -> tuple[InstanceType, Offering] | None:
    """What a new node launches as: its cheapest option `instance_types[0]`, and that type's available
    offering of `capacity_type` in `zones` priced `price` (else the cheapest such offering)."""
    it = next((t for t in snapshot.instance_types if new.instance_types and t.name == new.instance_types[0]),
              None)
    if it is None:
        return None
    choices = [o for o in it.offerings
               if o.available and o.capacity_type == new.capacity_type and o.zone in new.zones]
    if not choices:
        return None
    priced = [o for o in choices if o.price == new.price]
    return it, (priced[0] if priced else min(choices, key=lambda o: o.price))


def _materialise(snapshot: Snapshot, new: NewNode, pools: Mapping[str, NodePool],
                 types: Mapping[str, InstanceType], out: list[str]) -> _FinalNode | None:
    where = f"bookkeeping: new node {new.hostname}"
    pool = pools.get(new.nodepool)
    if pool is None:
        out.append(f"{where}: NodePool {new.nodepool} does not exist")
        return None
    if not new.instance_types:
        out.append(f"{where}: no instance type")
        return None
    if new.instance_types[0] not in types:
        out.append(f"{where}: instance type {new.instance_types[0]} is not in the catalog")
        return None
    launched = launch_offering(snapshot, new)
    if launched is None:
        out.append(f"{where}: {new.instance_types[0]} has no available {new.capacity_type} offering in "
                   f"{list(new.zones)}")
        return None
    it, offering = launched
    if offering.price != new.price:
        out.append(f"{where}: price {new.price} is not the price of any matching offering of {it.name} "
                   f"(cheapest {offering.price})")
    labels = offering_labels(pool, it, offering, dict(new.labels))
    if not requirements_match(pool.requirements, labels):
        out.append(f"{where}: {it.name} {offering.capacity_type} in {offering.zone} is outside the "
                   f"requirements of NodePool {pool.name}")
    labels[LABEL_HOSTNAME] = new.hostname
    allocatable = it.allocatable()
    daemons = [ds for ds in snapshot.daemonsets if daemonset_runs_on_node(ds, labels, pool.taints)]
    for ds in daemons:
        for name, value in _requests(ds.spec).items():
            allocatable[name] = allocatable.get(name, 0) - value
    return _FinalNode(new.hostname, labels, pool.taints, allocatable, it.capacity, pool.name, True, None,
                      daemons=daemons)


def _requests(spec: SchedulingSpec) -> dict[str, int]:
    """A pod's requests with exactly one pod slot, whatever the spec says about "pods"."""
    req = {name: value for name, value in spec.requests.items() if value}
    req["pods"] = 1
    return req


# --------------------------------------------------------------------------------------------------
# Rules


def _check_node_rules(pod: Pod, node: _FinalNode, out: list[str]) -> None:
    if node.closed is not None:
        out.append(f"closed: {pod.key} placed on {node.name}, which is {node.closed}")
    spec = pod.spec
    for key, value in spec.node_selector.items():
        if node.labels.get(key) != value:
            out.append(f"node-affinity: {pod.key} on {node.name}: nodeSelector {key}={value} but the node "
                       f"has {key}={node.labels.get(key)}")
    if not terms_match(spec.required_node_terms, node.labels):
        out.append(f"node-affinity: {pod.key} on {node.name}: no required node affinity term matches")
    if not terms_match(spec.volume_terms, node.labels):
        out.append(f"volume-topology: {pod.key} on {node.name}: its volumes cannot be attached there"
                   + (f" ({spec.volume_block})" if spec.volume_block else ""))
    for taint in blocking_taints(spec.tolerations, node.taints):
        out.append(f"taints: {pod.key} on {node.name} does not tolerate {taint.key}={taint.value}:{taint.effect}")


def _check_resources(node: _FinalNode, out: list[str]) -> None:
    used: dict[str, int] = {}
    for pod in node.pods:
        for name, value in _requests(pod.spec).items():
            used[name] = used.get(name, 0) + value
    for name in sorted(used):
        have = node.allocatable.get(name, 0)
        if node.is_new and name.startswith(ATTACH_LIMIT_PREFIX):
            continue  # a new node's volume attachments have no limit (Karpenter checks none on a NodeClaim)
        if used[name] > have:
            out.append(f"resources: {node.name} needs {name} {used[name]} for {len(node.pods)} pods but has "
                       f"{have} allocatable")


def _ports_clash(a: tuple[str, int, str], b: tuple[str, int, str]) -> bool:
    return a[0] == b[0] and a[1] == b[1] and (a[2] == b[2] or "0.0.0.0" in (a[2], b[2]))


def _check_ports(node: _FinalNode, placed_keys: set[str], out: list[str]) -> None:
    for pod in node.received:  # a new node's DaemonSet pods hold their ports before any pod is placed there
        for ds in node.daemons:
            for pa in pod.spec.host_ports:
                for pb in ds.spec.host_ports:
                    if _ports_clash((pa.protocol, pa.port, pa.host_ip), (pb.protocol, pb.port, pb.host_ip)):
                        out.append(f"host-ports: {pod.key} and DaemonSet {ds.namespace}/{ds.name}'s pod both use "
                                   f"{pa.protocol}/{pa.port} on {node.name}")
    pods = node.pods
    for i, a in enumerate(pods):
        for b in pods[i + 1:]:
            if a.key not in placed_keys and b.key not in placed_keys:
                continue
            for pa in a.spec.host_ports:
                for pb in b.spec.host_ports:
                    if _ports_clash((pa.protocol, pa.port, pa.host_ip), (pb.protocol, pb.port, pb.host_ip)):
                        out.append(f"host-ports: {a.key} and {b.key} both use {pa.protocol}/{pa.port} on "
                                   f"{node.name}")


def _term_namespaces(term: PodAffinityTerm, pod: Pod) -> frozenset[str] | None:
    """None: every namespace."""
    if term.all_namespaces:
        return None
    if term.namespaces is None:
        return frozenset((pod.namespace,))
    return term.namespaces | {pod.namespace} if term.namespace_selector is not None else term.namespaces


def _term_matches(term: PodAffinityTerm, owner: Pod, other: Pod) -> bool:
    namespaces = _term_namespaces(term, owner)
    if namespaces is not None and other.namespace not in namespaces:
        return False
    return selector_matches(term.selector, other.labels)


def _pods_by_domain(nodes: Iterable[_FinalNode], key: str) -> list[tuple[str, Pod]]:
    """(domain value, pod) for every non-deleting pod on a node that has the key."""
    out: list[tuple[str, Pod]] = []
    for node in nodes:
        value = node.labels.get(key)
        if value is None:
            continue
        for pod in node.pods:
            if not pod.deleting:
                out.append((value, pod))
    return out


def _same_term(a: PodAffinityTerm, a_owner: Pod, b: PodAffinityTerm, b_owner: Pod) -> bool:
    return (a.topology_key == b.topology_key and a.selector == b.selector
            and _term_namespaces(a, a_owner) == _term_namespaces(b, b_owner))


def _check_affinity(final: _Final, pod: Pod, node: _FinalNode, term: PodAffinityTerm) -> None:
    """Required pod affinity on the final state, for a pod the simulation placed.

    A pod is fine when another pod matching the term shares its domain. Otherwise it must have been the
    first pod of its group (kube-scheduler lets a pod that matches its own term go anywhere when no pod
    in the cluster matches it yet). On the final state that is possible only if (1) the pod matches its
    own term, (2) no pod that was already there matches it, and (3) its domain is the only one whose
    matching pods all carry the term and were placed: in any other such domain the first of them would
    have found neither a partner nor an empty cluster. This is exact for one term, necessary in general."""
    out, placed_keys = final.out, final.placed_keys
    key = term.topology_key
    mine = node.labels.get(key)
    if mine is None:
        out.append(f"pod-affinity: {pod.key} on {node.name}, which has no {key} label")
        return
    matching = [(d, q) for d, q in _pods_by_domain(final.nodes, key) if _term_matches(term, pod, q)]
    if any(d == mine and q.key != pod.key for d, q in matching):
        return
    what = f"pod-affinity: {pod.key} on {node.name}: no pod matching its affinity term in {key}={mine}"
    if not _term_matches(term, pod, pod):
        out.append(what)
        return
    if any(q.key not in placed_keys for _, q in matching):
        out.append(f"{what}, though matching pods exist elsewhere")
        return

    def carries(q: Pod) -> bool:
        return q.key in placed_keys and any(_same_term(t, q, term, pod) for t in q.spec.pod_affinity)

    domains = {d for d, _ in matching}
    seedless = sorted(d for d in domains if all(carries(q) for e, q in matching if e == d))
    if len(seedless) > 1:
        out.append(f"{what}; the pods of this term form {len(seedless)} groups ({', '.join(seedless)}), "
                   f"but only the first pod placed may start one")


def _check_anti_affinity(final: _Final, pod: Pod, node: _FinalNode) -> None:
    out, nodes = final.out, final.nodes
    if pod.deleting:
        return
    # The pod's own terms against every pod in its domain.
    for term in pod.spec.pod_anti_affinity:
        mine = node.labels.get(term.topology_key)
        if mine is None:
            continue
        for d, q in _pods_by_domain(nodes, term.topology_key):
            if d == mine and q.key != pod.key and _term_matches(term, pod, q):
                out.append(f"anti-affinity: {pod.key} on {node.name} shares {term.topology_key}={mine} with "
                           f"{q.key}, which its anti-affinity excludes")
    # Terms of pods that were already there against the pod (placed pods' terms are checked above).
    for other in nodes:
        for q in other.pods:
            if q.key in final.placed_keys or not q.spec.pod_anti_affinity:  # one being deleted too, until it stops
                continue
            for term in q.spec.pod_anti_affinity:
                theirs = other.labels.get(term.topology_key)
                if theirs is None or node.labels.get(term.topology_key) != theirs:
                    continue
                if _term_matches(term, q, pod):
                    out.append(f"anti-affinity: {pod.key} on {node.name} shares {term.topology_key}={theirs} "
                               f"with {q.key}, whose anti-affinity excludes it")


def _admits(spread: TopologySpread, spec: SchedulingSpec, labels: Mapping[str, str],
            taints: Iterable[Taint]) -> bool:
    """Whether a node (or offering) counts as a domain of the spread, per its inclusion policies."""
    if spread.node_affinity_policy != "Ignore":
        if any(labels.get(k) != v for k, v in spec.node_selector.items()):
            return False
        if not terms_match(spec.required_node_terms, labels):
            return False
    return not (spread.node_taints_policy == "Honor" and blocking_taints(spec.tolerations, taints))


def _check_spread(final: _Final, pod: Pod, node: _FinalNode, spread: TopologySpread) -> None:
    snapshot, nodes, out = final.snapshot, final.nodes, final.out
    key = spread.topology_key
    mine = node.labels.get(key)
    if mine is None:
        out.append(f"spread: {pod.key} on {node.name}, which has no {key} label")
        return
    keys = {s.topology_key for s in pod.spec.spread if s.when_unsatisfiable == "DoNotSchedule"}
    counts: dict[str, int] = {}
    for n in nodes:
        if not all(k in n.labels for k in keys) or not _admits(spread, pod.spec, n.labels, n.taints):
            continue
        value = n.labels[key]
        counts[value] = counts.get(value, 0) + sum(
            1 for q in n.pods
            if not q.deleting and q.namespace == pod.namespace and selector_matches(spread.selector, q.labels))
    if key != LABEL_HOSTNAME:
        for pool in snapshot.nodepools:
            if blocking_taints(pod.spec.tolerations, pool.taints):
                continue
            for it in snapshot.instance_types:
                for offering in it.offerings:
                    if not offering.available:
                        continue
                    labels = offering_labels(pool, it, offering)
                    if not requirements_match(pool.requirements, labels):
                        continue
                    labels[LABEL_HOSTNAME] = _NEW_HOSTNAME  # a new node's, while pods are matched to it
                    if key in labels and _admits(spread, pod.spec, labels, pool.taints):
                        counts.setdefault(labels[key], 0)
    own = counts.get(mine)
    if own is None:  # the pod's node is not admitted by the policies: count it on its own
        own = int(selector_matches(spread.selector, pod.labels))
    low = min(counts.values()) if counts else 0
    if spread.min_domains is not None and len(counts) < spread.min_domains:
        low = 0
    if own - low > spread.max_skew:
        shown = ", ".join(f"{d}={c}" for d, c in sorted(counts.items()))
        out.append(f"spread: {pod.key} on {node.name}: {key}={mine} has {own} matching pods, the least "
                   f"populated eligible domain {low}; skew {own - low} > maxSkew {spread.max_skew} ({shown})")


def _check_limits(snapshot: Snapshot, result: SimulationResult, nodes: list[_FinalNode],
                  out: list[str]) -> None:
    grown = {n.nodepool for n in result.new_nodes}
    for pool in snapshot.nodepools:
        if pool.name not in grown or not pool.limits:
            continue
        members = [n for n in nodes if n.nodepool == pool.name and n.counts_for_limits]
        for name, limit in sorted(pool.limits.items()):
            if name == "nodes":
                total = len(members)
            else:
                total = sum(n.capacity.get(name, 0) for n in members)
            if total > limit:
                out.append(f"limits: NodePool {pool.name} would have {name} {total}, above its limit {limit}")
