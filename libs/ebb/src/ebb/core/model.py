"""The cluster snapshot: frozen values the simulator and the decision engine read.

These are trimmed, already-parsed versions of the Kubernetes and Karpenter objects (Node, Pod,
PodDisruptionBudget, DaemonSet, NodePool, NodeClaim, PersistentVolumeClaim, PersistentVolume, StorageClass,
CSINode) plus ebb's own InstanceTypeCatalog, Hold and DisruptionPolicy. The parser (`ebb.core.snapshot`) builds
them from `kubectl get -o yaml` documents; the watcher builds them from watch events. Nothing here has behaviour
beyond small derived properties.

A NodePool's disruption settings (`DISRUPTION_FIELDS`) are the effective ones: its own
``spec.disruption`` block, or, when the input has an ``ebb.sh/v1 DisruptionPolicy`` of the same name, the
policy's (``NodePool.policy_kind`` says which; the parser's `assemble` applies the policy, nothing else
does).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from types import MappingProxyType
from typing import Any, final

# Well-known names (Karpenter's, so manifests and habits carry over).
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_INITIALIZED = "karpenter.sh/initialized"
LABEL_REGISTERED = "karpenter.sh/registered"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_HOSTNAME = "kubernetes.io/hostname"
#: the field a node selector term's ``matchFields`` names, read as a requirement on this key: an existing node's name
#: (the simulator's node tables give it as if a label; a new node's name is not known, so no new node has it)
FIELD_NODE_NAME = "metadata.name"
LABEL_ARCH = "kubernetes.io/arch"
#: the resource names of huge pages, one per page size (``hugepages-2Mi``): memory a node sets aside for them
HUGEPAGES_PREFIX = "hugepages-"
LABEL_OS = "kubernetes.io/os"
#: Karpenter's ``NormalizedLabels`` (``pkg/apis/v1/labels.go``): the older names of well-known labels, each read as
#: its current name wherever Karpenter builds a scheduling requirement (a pod's node selector and node affinity, a
#: NodePool's requirements, a node's labels), so a pod that still selects ``beta.kubernetes.io/arch`` gets a new node
#: of that architecture. The parser does the same (`ebb.core.snapshot`)
#: the architecture and OS labels a new node has whatever its instance type says, unless the type says otherwise
NEW_NODE_DEFAULT_LABELS: Mapping[str, str] = MappingProxyType({LABEL_ARCH: "amd64", LABEL_OS: "linux"})
NORMALIZED_LABELS: Mapping[str, str] = MappingProxyType({
    "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
})
ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ANNOTATION_DO_NOT_EVICT = "karpenter.sh/do-not-evict"
ANNOTATION_DO_NOT_CONSOLIDATE = "karpenter.sh/do-not-consolidate"
ANNOTATION_NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
ANNOTATION_POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
#: on a Node or NodeClaim ebb launched as a replacement: the decision it was launched for (Karpenter copies a
#: NodeClaim's annotations to its Node)
ANNOTATION_DECISION_ID = "ebb.sh/decision-id"
#: the resource a node's attachments of a CSI driver's volumes are counted in: ``attachable-volumes-csi-<driver>``, as
#: kube-scheduler's ``NodeVolumeLimits`` names it (``ebb.core.volumes``)
ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
#: the attachments of a driver a node without a limit for it (a new node, or one whose CSINode lists none) holds
UNLIMITED_ATTACHMENTS = 1 << 40
TAINT_DISRUPTED = "karpenter.sh/disrupted"
#: ebb's own disruption taint, used instead of Karpenter's when ebb runs next to Karpenter: Karpenter's
#: disruption controller removes karpenter.sh/disrupted from every node that is not in its own queue
TAINT_EBB_DISRUPTED = "ebb.sh/disrupted"
#: the taints that mean "this node is being disrupted" (not a candidate, not a destination, counted against
#: its pool's budget), whoever set them: the one place the core and the services ask this
DISRUPTION_TAINTS = (TAINT_DISRUPTED, TAINT_EBB_DISRUPTED)
#: the NodeClaim condition Karpenter sets once the node is drained and the instance is being deleted
CONDITION_INSTANCE_TERMINATING = "InstanceTerminating"
CAPACITY_SPOT = "spot"
#: a capacity reservation's offering (Karpenter v1.x reserved capacity)
CAPACITY_RESERVED = "reserved"
#: a NodePool's spec.disruption.consolidationPolicy (Balanced: Karpenter v1.14's scored consolidation,
#: ebb.core.balanced)
POLICY_BALANCED = "Balanced"
CONSOLIDATION_POLICIES = ("WhenEmptyOrUnderutilized", "WhenEmpty", POLICY_BALANCED)
CAPACITY_ON_DEMAND = "on-demand"

REASONS = ("Expired", "Drifted", "Empty", "Underutilized")


#: the operators that compare a label's value as an integer with the requirement's one value: Kubernetes' Gt and
#: Lt (strict) and Karpenter's Gte and Lte (inclusive; ``karpenter.sh/v1`` NodePool and NodeClaim requirements
#: since Karpenter v1.10). A label that is missing or not an integer satisfies none of them.
INTEGER_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
#: every operator a requirement may have: Kubernetes' node selector operators and Karpenter's Gte and Lte
REQUIREMENT_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", *INTEGER_OPERATORS)


@dataclass(frozen=True, slots=True)
class Requirement:
    """A node selector requirement or label selector expression (`REQUIREMENT_OPERATORS`: In, NotIn, Exists,
    DoesNotExist, Gt, Lt, Gte, Lte)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    #: a NodePool requirement's ``minValues``: a NodeClaim launched from the pool must keep at least this many
    #: distinct values of ``key`` among its instance type options (Karpenter's flexibility floor); None elsewhere
    min_values: int | None = None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels AND matchExpressions. An empty selector matches everything; a missing one
    (null) of a topology spread or pod affinity term matches nothing (`SELECTS_NOTHING`)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


#: a null label selector of a topology spread or a pod affinity term: it selects no pod, as
#: ``metav1.LabelSelectorAsSelector(nil)`` reads it (kube-scheduler and Karpenter), where an empty one selects every
#: pod. A requirement no labels meet (the empty key, in no values) says so to every matcher.
SELECTS_NOTHING = LabelSelector(match_expressions=(Requirement("", "In", ()),))


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required (or, with a weight, preferred) pod affinity or anti-affinity term.

    `namespaces` None means the pod's own namespace; an empty frozenset with `all_namespaces` means all.
    `namespace_selector`: a ``namespaceSelector`` that is not empty, as parsed; a snapshot with Namespace objects
    resolves it into `namespaces` (the ones it selects and those listed, Karpenter's ``buildNamespaceList``); without
    them it stays, and the term reads it as selecting the pod's own namespace (with those listed).
    """

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] | None = None
    all_namespaces: bool = False
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class TopologySpread:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@final
class Interned:
    """A key the simulator looks up for every pod of every pass (a pod's class, its requests), made once per
    distinct value: equal values give the same object (`interned`), so a key is hashed and compared by identity,
    in C, as a plain object is: no nested tuple is hashed or compared, and no Python method runs for a lookup. A
    cache, not state: a value is interned again when no pod holds it any more. A copy is the object itself and
    unpickling interns again, so equal values stay one object in a copy and in another process."""

    __slots__ = ("__weakref__", "value")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Callable[[tuple[Any, ...]], Interned], tuple[tuple[Any, ...]]]:
        return interned, (self.value,)

    def __copy__(self) -> Interned:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Interned:
        return self

    def __repr__(self) -> str:
        return f"Interned({self.value!r})"


_INTERNED: weakref.WeakValueDictionary[tuple[Any, ...], Interned] = weakref.WeakValueDictionary()
#: values are interned from more than one thread (a pass runs in one of its own): two must not make two objects of
#: one value
_INTERNING = threading.Lock()


def interned(value: tuple[Any, ...]) -> Interned:
    """The one `Interned` of ``value`` while any holds it: equal values, the same object."""
    with _INTERNING:
        hit = _INTERNED.get(value)
        if hit is None:
            hit = Interned(value)
            _INTERNED[value] = hit
        return hit


@dataclass(frozen=True, slots=True)
class SchedulingSpec:
    """Everything about a pod that decides where it may run (shared by DaemonSet templates)."""

    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_terms: tuple[tuple[Requirement, ...], ...] | None = None
    preferred_node_terms: tuple[tuple[int, tuple[Requirement, ...]], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    preferred_pod_anti_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    spread: tuple[TopologySpread, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    #: what the pod's PersistentVolumes ask of a node: an OR of terms, each an AND of requirements, that its node
    #: must meet besides `required_node_terms` (a bound claim's volume's ``nodeAffinity``, an unbound one's
    #: StorageClass ``allowedTopologies``: Karpenter's ``VolumeTopology``, kube-scheduler's ``VolumeBinding``); None
    #: when its volumes ask nothing. Kept apart from the pod's own node affinity, which alone filters a topology
    #: spread's domains (``ebb.core.volumes`` sets it)
    volume_terms: tuple[tuple[Requirement, ...], ...] | None = None
    #: why the pod's volumes keep it off every node, "" when they do not (a claim or volume the input lacks, or one
    #: being deleted: `volume_terms` is then ``()``, which no node meets)
    volume_block: str = ""
    #: `keys`, once made
    _keys: tuple[Interned, Interned] | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def keys(self) -> tuple[Interned, Interned]:
        """What a pod's ``class_key`` takes of its spec, and the pod's ``requests_key``: made once per spec, which
        every version of a pod whose spec changed only in ``nodeName`` shares (``ebb.core.snapshot``), so a pod
        bound or whose status changed does not hash its terms and tolerations again."""
        keys = self._keys
        if keys is None:
            keys = (interned((tuple(sorted(self.node_selector.items())), self.required_node_terms,
                              self.preferred_node_terms, self.tolerations, self.pod_affinity, self.pod_anti_affinity,
                              self.preferred_pod_affinity, self.preferred_pod_anti_affinity, self.spread,
                              self.host_ports, self.volume_terms, self.volume_block)),
                    interned(tuple(sorted(self.requests.items()))))
            object.__setattr__(self, "_keys", keys)
        return keys


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec: SchedulingSpec
    node_name: str | None = None
    phase: str = "Running"
    priority: int = 0
    owner_kind: str | None = None
    owner_name: str | None = None
    is_mirror: bool = False
    ready: bool = True
    deleting: bool = False
    start_time: datetime | None = None
    creation_time: datetime | None = None
    uid: str = ""
    #: spec.priorityClassName ("" when none)
    priority_class: str = ""
    #: spec.terminationGracePeriodSeconds (None when absent: the apiserver defaults it to 30)
    termination_grace_seconds: int | None = None
    #: metadata.deletionTimestamp: when a terminating pod's grace ends (its deletion plus its grace)
    deletion_time: datetime | None = None
    #: spec.schedulerName ("" for the default scheduler)
    scheduler_name: str = ""
    #: spec.schedulingGates is not empty: no scheduler places the pod until they are removed
    scheduling_gated: bool = False
    #: the PersistentVolumeClaims (in the pod's namespace) its volumes use: each ``persistentVolumeClaim``'s claim, and
    #: an ``ephemeral`` volume's, named ``<pod>-<volume>`` (``ebb.core.volumes`` reads what they ask of a node)
    claims: tuple[str, ...] = ()
    key: str = field(default="", compare=False)
    class_key: Interned = field(default=interned(()), compare=False, repr=False)
    requests_key: Interned = field(default=interned(()), compare=False, repr=False)
    #: Succeeded or Failed
    is_terminal: bool = field(default=False, init=False, compare=False, repr=False)
    #: DaemonSet, mirror/static and finished pods never need a new home (which pods block a node is
    #: ``ClusterView._pod_block``'s: a DaemonSet's may); nor does a pod being deleted, except a StatefulSet's: its
    #: replacement is created only once it is gone, with the same name and needs, so it still needs its room
    #: (Karpenter's ``IsReschedulable``)
    needs_rescheduling: bool = field(default=False, init=False, compare=False, repr=False)
    #: the simulator places pods largest cpu, then memory first, as Karpenter does; the key breaks ties
    placement_key: tuple[int, int, str] = field(default=(0, 0, ""), init=False, compare=False, repr=False)
    #: Karpenter's EvictionCost: 1 + deletion cost / 2^27 + priority / 2^25, clamped to [-10, 10] (the disruption
    #: cost of a node sums it over the pods that would move)
    eviction_cost: float = field(default=1.0, init=False, compare=False, repr=False)
    #: the pod has a do-not-disrupt or do-not-evict annotation (``ClusterView`` decides whether it protects now)
    protection_annotated: bool = field(default=False, init=False, compare=False, repr=False)
    #: when the pod came to its node, as a node's last pod event counts it: its start, else its creation
    arrived: datetime | None = field(default=None, init=False, compare=False, repr=False)
    #: the pod counts as healthy for a PodDisruptionBudget (Ready, Running and not being deleted: the
    #: disruption controller's count, which `ebb.core.cluster.pdb_allowed` sums over a PDB's pods every pass)
    pdb_healthy: bool = field(default=False, init=False, compare=False, repr=False)
    #: what decides the topology groups the pod's spread and (anti-)affinity terms count in, None without any
    #: (the simulator registers each distinct one once per snapshot: interned, so that finding them among every
    #: pod of every pass hashes no nested terms)
    groups_key: Interned | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Derived once: the pod's name key, and what makes pods interchangeable for scheduling
        # (replicas share it), so the simulator can cache per class.
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        s = self.spec
        spec_key, requests_key = s.keys
        object.__setattr__(self, "class_key", interned((self.namespace, tuple(sorted(self.labels.items())), spec_key)))
        object.__setattr__(self, "requests_key", requests_key)
        object.__setattr__(self, "placement_key", (-s.requests.get("cpu", 0), -s.requests.get("memory", 0), self.key))
        # read in every loop over pods: fields, set once, not properties
        # a StatefulSet's pod being deleted is not done with, whatever its phase: its replacement of the same name
        # waits for it and needs its room (Karpenter's ``IsReschedulable``: active, or a StatefulSet's and terminating)
        terminal = self.phase in ("Succeeded", "Failed") and not (self.deleting and self.is_statefulset)
        object.__setattr__(self, "is_terminal", terminal)
        object.__setattr__(self, "needs_rescheduling", not (
            self.is_daemonset or self.is_mirror or terminal or (self.deleting and not self.is_statefulset)))
        # read for every pod of every pass, and a pod object lives through many passes: computed once here
        cost = 1.0
        raw = self.annotations.get(ANNOTATION_POD_DELETION_COST)
        if raw is not None:
            with contextlib.suppress(ValueError):
                cost += int(raw) / 2**27
        cost += self.priority / 2**25
        object.__setattr__(self, "eviction_cost", max(-10.0, min(10.0, cost)))
        object.__setattr__(self, "protection_annotated", ANNOTATION_DO_NOT_DISRUPT in self.annotations
                           or ANNOTATION_DO_NOT_EVICT in self.annotations)
        object.__setattr__(self, "arrived", self.start_time or self.creation_time)
        object.__setattr__(self, "pdb_healthy", self.ready and self.phase == "Running" and not self.deleting)
        if s.spread or s.pod_affinity or s.pod_anti_affinity or s.preferred_pod_affinity \
                or s.preferred_pod_anti_affinity:
            object.__setattr__(self, "groups_key", interned((
                self.namespace, s.spread, s.pod_affinity, s.pod_anti_affinity, s.preferred_pod_affinity,
                s.preferred_pod_anti_affinity)))

    @property
    def is_daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def is_statefulset(self) -> bool:
        return self.owner_kind == "StatefulSet"


#: a pod's `Pod.placement_key`, read in C
_PLACEMENT_KEY = attrgetter("placement_key")


def placement_order(pods: Iterable[Pod]) -> list[Pod]:
    """The order the simulator places pods in (`ebb.core.simulator.scheduler.SimState.place_all`): largest cpu, then
    memory first, as Karpenter does; the pod's key breaks ties."""
    return sorted(pods, key=_PLACEMENT_KEY)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    capacity: Mapping[str, int]
    unschedulable: bool = False
    creation_time: datetime | None = None
    deleting: bool = False
    ready: bool = True
    provider_id: str = ""
    #: the Node reports a Ready condition at all (a Node without one is scheduled to as Ready, and counted NotReady
    #: against disruption budgets, as Karpenter counts it)
    ready_reported: bool = True
    # read for every node of every pass, and a node object lives through many passes: fields set once from the
    # labels and taints, not properties
    #: its NodePool's name (the karpenter.sh/nodepool label), None when no NodePool owns it
    nodepool: str | None = field(default=None, init=False, compare=False, repr=False)
    instance_type: str | None = field(default=None, init=False, compare=False, repr=False)
    zone: str | None = field(default=None, init=False, compare=False, repr=False)
    capacity_type: str = field(default=CAPACITY_ON_DEMAND, init=False, compare=False, repr=False)
    #: the key of the node's disruption taint (one of `DISRUPTION_TAINTS`), or None
    disruption_taint: str | None = field(default=None, init=False, compare=False, repr=False)
    #: the names of its allocatable resources, sorted, interned: nodes of one kind share the object, so the simulator
    #: finds every node's resource names among a few distinct ones (`ebb.core.simulator.constraints.resource_names`)
    allocatable_names: Interned = field(default=interned(()), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable_names", interned(tuple(sorted(self.allocatable))))
        labels = self.labels
        object.__setattr__(self, "nodepool", labels.get(LABEL_NODEPOOL))
        object.__setattr__(self, "instance_type", labels.get(LABEL_INSTANCE_TYPE))
        object.__setattr__(self, "zone", labels.get(LABEL_ZONE))
        object.__setattr__(self, "capacity_type", labels.get(LABEL_CAPACITY_TYPE, CAPACITY_ON_DEMAND))
        object.__setattr__(self, "disruption_taint",
                           next((t.key for t in self.taints if t.key in DISRUPTION_TAINTS), None))

    @property
    def being_disrupted(self) -> bool:
        """Tainted by a disruption (Karpenter's or ebb's): someone is already taking it away."""
        return self.disruption_taint is not None


@dataclass(frozen=True, slots=True)
class Budget:
    """A disruption budget as written; `ebb.core.budgets` evaluates it and fails closed when invalid."""

    nodes: str
    schedule: str | None = None
    duration: str | None = None
    reasons: tuple[str, ...] | None = None


#: where a NodePool's disruption settings come from: its own spec.disruption block, or a DisruptionPolicy
POLICY_FROM_NODEPOOL = "NodePool"
POLICY_FROM_DISRUPTION_POLICY = "DisruptionPolicy"
#: the disruption settings, fields of the same name on `NodePool` and `DisruptionPolicy` (with
#: ``expire_after_default``, which says where ``expire_after`` came from)
DISRUPTION_FIELDS = ("consolidation_policy", "consolidate_after", "expire_after", "expire_after_default", "budgets",
                     "stabilization_window", "minimum_price_improvement_percent", "demand_window",
                     "minimum_saving_per_evicted_pod")
#: Karpenter's CRD default of a NodePool's ``spec.template.spec.expireAfter`` (and of v1beta1's
#: ``spec.disruption.expireAfter``), seconds: the API server writes 720h into a NodePool that sets none
DEFAULT_EXPIRE_AFTER = 720 * 3600.0
#: a DisruptionPolicy's ``minimumSavingPerEvictedPod`` when it states none, dollars per hour (`ebb.core.worth`;
#: docs/policies.md says how it was chosen). A NodePool's own spec.disruption defaults to 0, Karpenter's rule
DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD = 0.005


@dataclass(frozen=True, slots=True)
class NodePool:
    """A NodePool with its effective disruption settings (see the module docstring and `policy_kind`)."""

    name: str
    requirements: tuple[Requirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    weight: int = 0
    limits: Mapping[str, int] = field(default_factory=dict)
    #: spec.replicas: a static NodePool keeps this many nodes; Karpenter's emptiness and consolidation leave its
    #: nodes alone (None: a dynamic NodePool)
    replicas: int | None = None
    #: why Karpenter's scheduler opens no new node in this NodePool ("" when it may): "is being deleted"
    #: (``metadata.deletionTimestamp``) or "is not Ready" (its status says so; ``NewScheduler`` drops such NodePools
    #: from every simulation; a NodePool without a Ready condition, as a snapshot written by hand has, is taken as
    #: Ready). Its nodes stay candidates and destinations.
    closed: str = ""
    #: False for a ``karpenter.sh/v1`` NodePool without ``spec.template.spec.nodeClassRef`` (the CRD requires one; a
    #: snapshot written by hand can leave it out): Karpenter lists only the NodePools whose NodeClass its cloud
    #: provider supports (``ListManaged``), so it neither launches in it (`closed`) nor disrupts its nodes
    managed: bool = True
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: float | None = 0.0
    #: seconds; None: no expiry (``Never``). The parser gives a NodePool that sets none Karpenter's CRD default,
    #: `DEFAULT_EXPIRE_AFTER`
    expire_after: float | None = None
    budgets: tuple[Budget, ...] = (Budget(nodes="10%"),)
    stabilization_window: float | None = None
    #: a consolidation replaces this pool's nodes only by one at least this much cheaper (percent of what the
    #: removed nodes cost; 0: any cheaper, as Karpenter); deletes are not affected (docs/architecture.md)
    minimum_price_improvement_percent: int = 0
    #: Empty and Underutilized disruptions keep the pool's capacity (cpu and memory of its nodes) at least at what
    #: its pods requested at their peak within this window, seconds (None: no such floor; docs/architecture.md)
    demand_window: float | None = None
    #: a consolidation of this pool's nodes must save at least this many dollars per hour per pod it evicts (each
    #: pod weighted by its eviction cost; 0: any saving, as Karpenter; `ebb.core.worth`)
    minimum_saving_per_evicted_pod: float = 0.0
    hash: str | None = None
    hash_version: str | None = None
    spot_to_spot: bool = False
    #: the label Karpenter gives every node of the NodePool for its NodeClass (``<group>/<kind, lowercased>``: the
    #: nodeClassRef's name, ``NodeClassLabelKey``); None when the nodeClassRef does not say its group and kind
    node_class_label: tuple[str, str] | None = None
    #: the kind of the object the disruption settings above come from: `POLICY_FROM_NODEPOOL` (its own
    #: spec.disruption) or `POLICY_FROM_DISRUPTION_POLICY` (the ebb.sh/v1 DisruptionPolicy named like it)
    policy_kind: str = POLICY_FROM_NODEPOOL
    #: ``expire_after`` is Karpenter's CRD default, not a value the object states (explanations say so)
    expire_after_default: bool = False
    #: under a DisruptionPolicy, the NodePool's own ``spec.disruption.budgets``, ``expireAfter`` (seconds, None:
    #: Never) and whether that is Karpenter's default, which Karpenter still reads (None: no policy governs, the
    #: settings above are the NodePool's own)
    own_disruption: tuple[tuple[Budget, ...], float | None, bool] | None = None

    @property
    def launches(self) -> bool:
        """Whether Karpenter's scheduler may open a new node in this NodePool (`closed`)."""
        return not self.closed

    @property
    def template_labels(self) -> dict[str, str]:
        """The labels Karpenter's NodeClaim template gives a new node of this NodePool beyond its template's own: the
        NodePool's and the NodeClass's, and ``karpenter.sh/registered`` and ``karpenter.sh/initialized`` (which the
        template requires "for DaemonSet scheduling calculations", ``NewNodeClaimTemplate``)."""
        labels = {LABEL_NODEPOOL: self.name, LABEL_REGISTERED: "true", LABEL_INITIALIZED: "true"}
        if self.node_class_label is not None:
            labels[self.node_class_label[0]] = self.node_class_label[1]
        return labels

    @property
    def karpenter_budgets(self) -> tuple[Budget, ...]:
        """The budgets Karpenter reads on this NodePool: its own, whatever a DisruptionPolicy gives ebb."""
        return self.own_disruption[0] if self.own_disruption is not None else self.budgets

    @property
    def karpenter_expire_after(self) -> float | None:
        """The expireAfter Karpenter reads on this NodePool (seconds; None: Never): its own."""
        return self.own_disruption[1] if self.own_disruption is not None else self.expire_after

    @property
    def karpenter_expire_after_default(self) -> bool:
        """`karpenter_expire_after` is Karpenter's CRD default, not a value the NodePool states."""
        return self.own_disruption[2] if self.own_disruption is not None else self.expire_after_default

    @property
    def policy_source(self) -> str:
        """The object explanations name when they quote a disruption setting: ``NodePool default`` or
        ``DisruptionPolicy default``."""
        return f"{self.policy_kind} {self.name}"


@dataclass(frozen=True, slots=True)
class DisruptionPolicy:
    """An ebb.sh/v1 DisruptionPolicy: ebb's disruption settings for the NodePool of the same name, read
    instead of that NodePool's spec.disruption (next to Karpenter, whose own disruption the NodePool turns
    off). An absent field has the parser's default for a NodePool without a disruption block, except
    expireAfter: none is no expiry (ebb's CRD gives it no default; Karpenter's NodePool CRD defaults it to 720h,
    and next to Karpenter the NodePool itself says Never)."""

    name: str
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: float | None = 0.0
    expire_after: float | None = None
    budgets: tuple[Budget, ...] = (Budget(nodes="10%"),)
    stabilization_window: float | None = None
    minimum_price_improvement_percent: int = 0
    demand_window: float | None = None
    minimum_saving_per_evicted_pod: float = DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD
    #: always False: a DisruptionPolicy's expireAfter has no default (the field is here for `DISRUPTION_FIELDS`)
    expire_after_default: bool = False


@dataclass(frozen=True, slots=True)
class NodeClaim:
    name: str
    nodepool: str | None
    node_name: str | None
    provider_id: str = ""
    initialized: bool = False
    drifted: bool = False
    conditions: Mapping[str, tuple[str, datetime | None]] = field(default_factory=dict)
    #: metadata.deletionTimestamp is set: Karpenter is taking the NodeClaim (and its node) away
    deleting: bool = False
    #: metadata.creationTimestamp: when the node was asked for, what Karpenter measures expiry from
    creation_time: datetime | None = None
    #: status.lastPodEventTime: when Karpenter last saw a pod bound to or removed from the node (a pod that left
    #: is seen nowhere else in a snapshot); consolidateAfter is counted from it
    last_pod_event: datetime | None = None
    #: ``ebb.sh/decision-id``: the disruption decision ebb launched it for ("" when it was not)
    decision_id: str = ""
    #: spec.terminationGracePeriod, seconds (copied from its NodePool at launch; None: unset or Never)
    termination_grace_period: float | None = None
    #: spec.expireAfter, seconds (copied from its NodePool at launch, kept when the NodePool changes): Karpenter
    #: expires the NodeClaim at its creation plus this. None: Never, or not stated (``expire_after_stated``)
    expire_after: float | None = None
    #: spec.expireAfter is in the input. Karpenter writes its NodePool's into every NodeClaim it makes (and its CRD
    #: defaults the field to 720h), so only a hand-written one lacks it; the conflict check then reads its NodePool's
    #: (`ebb.core.conflicts.claim_expire_after`)
    expire_after_stated: bool = True
    #: metadata.labels: what Karpenter launched it as (its NodePool's requirements and instance type's values); drift
    #: judges the NodePool's requirements on them, as Karpenter's ``areRequirementsDrifted`` does
    labels: Mapping[str, str] = field(default_factory=dict)
    #: metadata.annotations: among them the ``karpenter.sh/nodepool-hash`` and its version, which Karpenter stamps on
    #: the NodeClaim (again when the hash version changes) and drift compares with its NodePool's
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: status.capacity: what the cloud launched (Karpenter writes it once the instance is up); what a NodeClaim whose
    #: Node has not registered yet counts against its NodePool's limits (Karpenter's ``StateNode.Capacity``). Empty
    #: before the launch
    capacity: Mapping[str, int] = field(default_factory=dict)
    #: status.allocatable: what the cloud launched less the overhead; with ``capacity``, what stands in for the zero or
    #: missing amounts of its Node while the Node is not initialized (a device plugin not up yet: `ebb.core.snapshot`)
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @property
    def instance_terminating(self) -> bool:
        """``InstanceTerminating=True``: the node is drained and the cloud instance is being deleted."""
        return self.conditions.get(CONDITION_INSTANCE_TERMINATING, ("False", None))[0] == "True"


def claim_for(node_name: str, provider_id: str, by_name: Mapping[str, NodeClaim],
              by_provider: Mapping[str, NodeClaim]) -> NodeClaim | None:
    """A Node's NodeClaim, paired as Karpenter pairs them (``nodeutils.NodeClaimForNode``: by ``status.providerID``):
    the NodeClaim with the Node's provider id; else the one naming it (``status.nodeName``: a Node without a provider
    id yet, or NodeClaims written without one), unless that NodeClaim has a provider id of its own that is not the
    Node's: it is another instance's, one that had the Node's name before (a name used again, as KWOK and some
    clouds do), and stands for no Node here."""
    if provider_id:
        claim = by_provider.get(provider_id)
        if claim is not None:
            return claim
    named = by_name.get(node_name)
    if named is not None and names_another_instance(named.provider_id, provider_id):
        return None
    return named


def names_another_instance(claim_provider_id: str, node_provider_id: str) -> bool:
    """Whether a NodeClaim that names a Node (``status.nodeName``) is another instance's: both have a provider id and
    they differ. The Node's name was used before (KWOK and some clouds reuse names); Karpenter pairs the two by provider
    id, so such a NodeClaim is not that Node's. The one rule behind `claim_for`, the karpenter provider's ``claim_of``
    and the interruption-ingester's instance index."""
    return bool(claim_provider_id and node_provider_id and claim_provider_id != node_provider_id)


@dataclass(frozen=True, slots=True)
class KarpenterController:
    """Karpenter's controller as its Deployment (``apps/v1``) shows it: only what ebb checks against
    (`ebb.core.conflicts`), its interruption queue (the ``INTERRUPTION_QUEUE`` environment variable or the
    ``--interruption-queue`` argument of one of its containers; "" when unset)."""

    #: ``namespace/name`` of the Deployment
    name: str
    interruption_queue: str = ""


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool = True
    #: labels a node launched from this offering carries besides its type's (a catalog offering's ``labels``: AKS
    #: labels spot nodes ``kubernetes.azure.com/scalesetpriority: spot``, on-demand ones ``regular``)
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    capacity: Mapping[str, int]
    overhead: Mapping[str, int]
    offerings: tuple[Offering, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    #: the operating systems a node of the type may run (a catalog's ``operatingSystems``; none given: its
    #: ``kubernetes.io/os`` label's, else linux): a NodePool's ``kubernetes.io/os`` requirement picks one
    operating_systems: tuple[str, ...] = ()
    #: a node's price by (zone, capacity type), as `ebb.core.cluster.node_price` found it: a catalog's types live
    #: through many passes, each pricing every node
    node_prices: dict[tuple[str | None, str | None], tuple[float, bool]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def allocatable(self) -> dict[str, int]:
        """What a node of the type has for pods, as Karpenter's ``computeAllocatable``: its capacity less its overhead,
        and its memory less what its huge pages reserve (never below zero): a type with 8Gi of memory and
        ``hugepages-2Mi: 4Gi`` has 4Gi of memory for pods, as a kubelet's allocatable says."""
        out = {name: value - self.overhead.get(name, 0) for name, value in self.capacity.items()}
        reserved = self.hugepages()
        if reserved:
            out["memory"] = max(0, out.get("memory", 0) - reserved)
        return out

    def hugepages(self) -> int:
        """The memory the type's huge pages take, bytes: its ``hugepages-<size>`` capacities summed."""
        return sum(value for name, value in self.capacity.items() if name.startswith(HUGEPAGES_PREFIX))

    def os_under(self, requirements: Iterable[Requirement]) -> str:
        """The operating system a new node of this type runs under a NodePool's ``requirements``: the first of its
        operating systems (`operating_systems`, else its ``kubernetes.io/os`` label, else linux) that their
        ``kubernetes.io/os`` requirements admit, as Karpenter's NodeClaim narrows the label to what both allow (a
        Windows NodePool's node of a type that runs Linux and Windows runs Windows); the first when none is (the
        offering is then refused on the requirement)."""
        systems = self.operating_systems or (self.labels.get(LABEL_OS) or "linux",)
        if len(systems) > 1:
            wanted = [r for r in requirements if r.key == LABEL_OS]
            for system in systems:
                if all(_admits(r, system) for r in wanted):
                    return system
        return systems[0]


def _admits(requirement: Requirement, value: str) -> bool:
    """Whether a requirement on a label admits a node whose label has ``value`` (the set operators; a numeric one
    admits no operating system's name)."""
    if requirement.operator == "In":
        return value in requirement.values
    if requirement.operator == "NotIn":
        return value not in requirement.values
    return requirement.operator == "Exists"


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str
    #: policy/v1: a null selector (None) selects no pod, an empty one every pod of the namespace
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    #: ``spec.unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not Ready may be evicted whatever the budget
    always_allow_unhealthy: bool = False


@dataclass(frozen=True, slots=True)
class DaemonSet:
    name: str
    namespace: str
    spec: SchedulingSpec
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    """A PersistentVolumeClaim: the volume it is bound to ("" when unbound) or the StorageClass that will make one."""

    namespace: str
    name: str
    volume_name: str = ""
    #: spec.storageClassName ("" when none: the admission plugin writes the default class's name at creation)
    storage_class: str = ""
    deleting: bool = False
    #: status.phase Lost: bound to a volume that no longer exists
    lost: bool = False
    #: it carries ``pv.kubernetes.io/bind-completed``, which the PersistentVolume controller writes once it bound the
    #: claim: without it a claim naming a volume is not bound yet, for kube-scheduler and Karpenter alike
    bind_completed: bool = True

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """A PersistentVolume: where it can be attached (``spec.nodeAffinity.required``, None when unconstrained)."""

    name: str
    node_terms: tuple[tuple[Requirement, ...], ...] | None = None
    #: a ``local`` or ``hostPath`` volume: its data is on one node's disk
    local: bool = False
    deleting: bool = False
    #: the CSI driver that attaches it (``spec.csi.driver``; an in-tree ``awsElasticBlockStore`` volume's is EBS's),
    #: "" for a volume no CSI driver attaches
    driver: str = ""


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A StorageClass: how its claims are bound, and the topologies its volumes may be made in (each
    ``allowedTopologies`` term as requirements, ``In`` the values listed)."""

    name: str
    binding_mode: str = "Immediate"
    allowed_topologies: tuple[tuple[Requirement, ...], ...] = ()
    #: the CSI driver that makes its volumes (``provisioner``, an in-tree plugin's name read as its CSI driver's)
    driver: str = ""


@dataclass(frozen=True, slots=True)
class Namespace:
    """A Namespace's name and labels: what a pod affinity term's ``namespaceSelector`` selects."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CSINode:
    """A CSINode: how many volumes each CSI driver can attach to the node of its name (``spec.drivers[].allocatable
    .count``; a driver that lists no ``allocatable`` has no limit, one whose count is missing has 0)."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hold:
    """An ebb.sh/v1 Hold: pauses Empty and Underutilized disruptions in its scope until it expires."""

    name: str
    scope: str  # cluster | nodePool | node
    target: str | None
    expires: datetime | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DemandSample:
    """What the pods on a NodePool's nodes requested at one moment (cpu in millicores, memory in bytes): the
    history a NodePool's ``demandWindow`` keeps the peak of. A running planner records one per computed pass
    (``Snapshot.demand``); a snapshot read from files has none (the pods as they are are the only demand)."""

    pool: str
    at: datetime
    cpu: int
    memory: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    nodepools: tuple[NodePool, ...]
    instance_types: tuple[InstanceType, ...]
    nodeclaims: tuple[NodeClaim, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    daemonsets: tuple[DaemonSet, ...] = ()
    holds: tuple[Hold, ...] = ()
    catalog_source: str = "bundled"
    #: the input documents of kinds ebb does not read (``Kind namespace/name``), so a front end can say so
    ignored: tuple[str, ...] = ()
    #: every DisruptionPolicy of the input, applied or not (one whose NodePool is missing applies to nothing)
    disruption_policies: tuple[DisruptionPolicy, ...] = ()
    #: input documents of the ebb.sh/v1 kinds ebb no longer defines (NodePool, NodeClaim), read as Karpenter's
    renamed: tuple[str, ...] = ()
    #: (replacement name, decision id) of the replacements live decisions launched (``replacement_name``: the
    #: Node's name, or its NodeClaim's next to Karpenter): such a node is no candidate until its decision ends
    #: (the store knows them; ``ebb.adapters.live``)
    launched_for: tuple[tuple[str, str], ...] = ()
    #: what pods requested per NodePool in the recent past (a running planner's record), for ``demandWindow``
    demand: tuple[DemandSample, ...] = ()
    #: Karpenter's controller Deployments of the input (``ebb.core.conflicts`` reads their interruption queue)
    karpenter: tuple[KarpenterController, ...] = ()
    #: the PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes of the input (``ebb.core.volumes``:
    #: what pods' volumes ask of a node, read only when the input holds any of them)
    volume_claims: tuple[VolumeClaim, ...] = ()
    volumes: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    csi_nodes: tuple[CSINode, ...] = ()
    #: the Namespaces of the input, read only to resolve pod affinity terms' ``namespaceSelector``
    namespaces: tuple[Namespace, ...] = ()
    #: (node name, when a pod last left it) as a running service saw it (``SnapshotStore.keep_pod_events``): for a
    #: node without a NodeClaim, what Karpenter keeps in a NodeClaim's ``status.lastPodEventTime``
    pod_events: tuple[tuple[str, datetime], ...] = ()

    def launching_claims(self) -> tuple[NodeClaim, ...]:
        """The NodeClaims no Node of the snapshot is of (``claim_for``: by ``status.providerID``, else
        ``status.nodeName``): launched, their node not registered yet. Karpenter's cluster state holds them as nodes
        of their NodePool already."""
        if not self.nodeclaims:
            return ()
        by_name = {c.node_name: c for c in self.nodeclaims if c.node_name}
        by_provider = {c.provider_id: c for c in self.nodeclaims if c.provider_id}
        paired = {id(claim) for n in self.nodes
                  if (claim := claim_for(n.name, n.provider_id, by_name, by_provider)) is not None}
        return tuple(c for c in self.nodeclaims if id(c) not in paired)
