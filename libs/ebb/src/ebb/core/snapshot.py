"""Turn `kubectl get -o yaml` documents into a frozen `Snapshot`, or say exactly what is wrong.

Input is what kubectl prints: single objects, `kind: List` (or `NodeList`, ...) wrappers, and ebb's own
`InstanceTypeCatalog`, `Hold` and `DisruptionPolicy` documents. Pods' PersistentVolumeClaims, their
PersistentVolumes and StorageClasses are read into what each pod's volumes ask of its node (`ebb.core.volumes`).
Every error names the document (kind/namespace/name) and the field, so a user can fix the dump; nothing is
half-parsed. Kinds ebb does not
use are skipped (and named by `input_warnings`).

A NodePool's disruption settings come from one place: `assemble` replaces them by those of the
``ebb.sh/v1 DisruptionPolicy`` named like the NodePool, when there is one, and records that on the NodePool
(`NodePool.policy_kind`), so explanations name the object a setting comes from. A DisruptionPolicy without
its NodePool applies to nothing and gets a warning. ``ebb.sh/v1`` NodePool and NodeClaim documents (kinds
ebb defined until their plurals were found to clash with Karpenter's) are read as Karpenter's, with a
warning.

Defaults are the CRDs': a NodePool that sets no expireAfter has Karpenter's 720h (what the API server would
have written; `NodePool.expire_after_default` marks it so that explanations say so), while ebb's
DisruptionPolicy CRD has no default for it (none: no expiry).
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import chain, compress, groupby, repeat
from operator import attrgetter, eq
from typing import Any, TypeGuard

from ebb.core.labels import combined, selector_matches
from ebb.core.memo import Memo
from ebb.core.model import (
    ANNOTATION_DECISION_ID,
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_DO_NOT_EVICT,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    ANNOTATION_POD_DELETION_COST,
    CONSOLIDATION_POLICIES,
    DEFAULT_EXPIRE_AFTER,
    DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD,
    DISRUPTION_FIELDS,
    FIELD_NODE_NAME,
    HUGEPAGES_PREFIX,
    INTEGER_OPERATORS,
    LABEL_ARCH,
    LABEL_INITIALIZED,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    NEW_NODE_DEFAULT_LABELS,
    NORMALIZED_LABELS,
    POLICY_FROM_DISRUPTION_POLICY,
    REQUIREMENT_OPERATORS,
    SELECTS_NOTHING,
    Budget,
    CSINode,
    DaemonSet,
    DisruptionPolicy,
    Hold,
    HostPort,
    InstanceType,
    KarpenterController,
    LabelSelector,
    Namespace,
    Node,
    NodeClaim,
    NodePool,
    Offering,
    PersistentVolume,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    Requirement,
    SchedulingSpec,
    Snapshot,
    StorageClass,
    Taint,
    Toleration,
    TopologySpread,
    VolumeClaim,
    claim_for,
)
from ebb.core.quantity import (
    MAX_DURATION_SECONDS,
    QuantityError,
    in_time_range,
    nanos_to_amount,
    parse_duration,
    parse_go_int,
    parse_resource,
    parse_resource_nanos,
    parse_time,
    positive_duration,
)
from ebb.core.volumes import IN_TREE_DRIVERS, with_volume_topology

#: the API groups whose NodePool and NodeClaim documents are read: Karpenter's, and ebb's former copies
NODEPOOL_GROUPS = ("karpenter.sh", "ebb.sh")
#: the group of the NodePool and NodeClaim kinds ebb no longer defines (their plurals clash with Karpenter's)
RENAMED_GROUP = "ebb.sh"
#: why a pod with Dynamic Resource Allocation claims goes nowhere in a simulation (`SchedulingSpec.volume_block`)
DRA_BLOCK = ("it has Dynamic Resource Allocation claims (resourceClaims, or a container's resources.claims), which "
             "Karpenter's simulation does not place (IgnoreDRARequests)")


class SnapshotError(ValueError):
    """Invalid input: names the document and the field."""

    def __init__(self, document: str, field: str, message: str) -> None:
        super().__init__(f"{document}: {field}: {message}")
        self.document = document
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type[SnapshotError], tuple[str, str, str]]:
        # made again from its three parts (a back-test's worker process sends it to the parent)
        return SnapshotError, (self.document, self.field, self.message)


#: a path `_Doc.get` reads -> its parts: the parser reads the same few dozen paths of every object (a dict of
#: literals: written by one thread or another with the same value, never removed)
_PATHS: dict[str, tuple[str, ...]] = {}


def _is_mapping(value: Any) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, with a dict (what YAML, JSON and the simulated cluster give) told in C
    first: the ABC's check runs Python code, and a parse asks dozens of times per pod."""
    return type(value) is dict or isinstance(value, Mapping)


@dataclass
class _Doc:
    ref: str
    body: Mapping[str, Any]

    def fail(self, field: str, message: str) -> SnapshotError:
        return SnapshotError(self.ref, field, message)

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.body
        parts = _PATHS.get(path)
        if parts is None:
            parts = _PATHS[path] = tuple(path.split("."))
        for part in parts:
            if type(node) is not dict and not isinstance(node, Mapping):  # a dict, nearly always: no ABC check
                return default
            node = node.get(part)
            if node is None:
                return default
        return node

    def mapping(self, path: str) -> Mapping[str, Any]:
        return self.as_mapping(self.get(path, {}), path)

    def as_mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        """`value` (read from `path`) checked to be a mapping; None is an empty one."""
        if value is None:
            return {}
        if not _is_mapping(value):
            raise self.fail(path, f"must be a mapping, got {type(value).__name__}")
        return value

    def optional_str(self, path: str) -> str | None:
        """A string field that may be absent (a node name, say); any other type names the field."""
        value = self.get(path)
        if value is None or isinstance(value, str):
            return value
        raise self.fail(path, f"must be a string, got {type(value).__name__}")

    def seq(self, path: str) -> list[Any]:
        return self.as_list(self.get(path, []), path)

    def as_list(self, value: Any, path: str) -> list[Any]:
        """`value` (read from `path`) checked to be a list; None is an empty one."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {type(value).__name__}")
        return value

    def str_map(self, path: str) -> dict[str, str]:
        return {str(k): "" if v is None else str(v) for k, v in self.mapping(path).items()}

    def time(self, path: str) -> datetime | None:
        return self.parse_time(self.get(path), path)

    def parse_time(self, value: Any, path: str) -> datetime | None:
        if value is None:
            return None
        try:
            if isinstance(value, datetime):  # a YAML timestamp, read by the loader
                return in_time_range(value)
            return parse_time(str(value))
        except ValueError as exc:
            raise self.fail(path, f"{value!r} is not an RFC 3339 time from 1970 to 2262") from exc

    def resources(self, path: str) -> dict[str, int]:
        return self.as_resources(self.get(path, {}), path)

    def as_resources(self, value: Any, path: str, *, nanos: bool = False) -> dict[str, int]:
        """`value` (read from `path`) as a resource list, each quantity parsed; None is an empty one. ``nanos``: in
        billionths of each resource's base unit, exactly (`parse_resource_nanos`), for a pod's requests to be summed
        before they are rounded."""
        parse = parse_resource_nanos if nanos else parse_resource
        out: dict[str, int] = {}
        for name, quantity in self.as_mapping(value, path).items():
            try:
                out[str(name)] = parse(str(name), quantity)
            except QuantityError as exc:
                raise self.fail(f"{path}.{name}", str(exc)) from exc
        return out

    def duration(self, path: str, default: float | None) -> float | None:
        value = self.get(path)
        if value is None:
            return default
        try:
            return parse_duration(value)
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from exc



def _number(doc: _Doc, value: Any, field: str, kind: type[int] | type[float] = int) -> Any:
    """An integer (or float) field, or a SnapshotError naming the document and field."""
    if isinstance(value, bool):
        raise doc.fail(field, f"{value!r} is not a number")
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise doc.fail(field, f"{value!r} is not {'an integer' if kind is int else 'a number'}") from exc
    if isinstance(number, float) and not math.isfinite(number):
        raise doc.fail(field, f"{value!r} is not a finite number")
    return number


def object_ref(doc: Mapping[str, Any]) -> str:
    """How an object is named in messages and told apart from the others (`ParsedObject.ref`): its kind, namespace
    and name; a nameless one is numbered as the first document."""
    return _ref(doc, 0)


def _ref(doc: Mapping[str, Any], index: int) -> str:
    kind = doc.get("kind", "?")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    assert _is_mapping(meta)
    name = meta.get("name")
    ns = meta.get("namespace")
    if name is None:
        return f"{kind} (document {index + 1})"
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def flatten(documents: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """Unwrap `kind: List` documents (and typed lists like NodeList) into their items, lazily, so a
    streamed input is never held whole."""
    for index, doc in enumerate(documents):
        if doc is None:
            continue
        if not _is_mapping(doc):
            raise SnapshotError(f"document {index + 1}", "(root)", "is not a mapping")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise SnapshotError(f"{kind} (document {index + 1})", "items", "must be a list")
            yield from flatten(items)
        else:
            yield doc


def _requirement(doc: _Doc, path: str, raw: Any, nodepool: bool = False) -> Requirement:
    """One requirement. A ``nodepool``'s may be ``NotIn`` with no values, which its CRD accepts (it asks values of
    ``In`` alone) and Karpenter reads as ``Exists`` (``NewRequirement``: the complement of nothing); the API server
    refuses it in a pod."""
    if not _is_mapping(raw):
        raise doc.fail(path, "must be a mapping with key, operator and values")
    key, op = raw.get("key"), raw.get("operator")
    if not key:
        raise doc.fail(f"{path}.key", "is required")
    if not isinstance(op, str) or op not in REQUIREMENT_OPERATORS:
        raise doc.fail(f"{path}.operator", f"{op!r} is not one of {sorted(REQUIREMENT_OPERATORS)}")
    values = raw.get("values") or []
    if not isinstance(values, list):
        raise doc.fail(f"{path}.values", "must be a list")
    if nodepool and op == "NotIn" and not values:
        op = "Exists"
    if op in ("In", "NotIn") and not values:
        raise doc.fail(f"{path}.values", f"must not be empty with operator {op}")
    if op in INTEGER_OPERATORS:
        # one integer as Go reads it (Kubernetes' validation of Gt and Lt); Gte and Lte exist only in Karpenter's
        # CRDs, whose rule is "a single positive integer value" (one value, int(value) >= 0)
        bound = parse_go_int(str(values[0])) if len(values) == 1 else None
        if bound is None:
            raise doc.fail(f"{path}.values", f"operator {op} takes exactly one integer")
        if op in ("Gte", "Lte") and bound < 0:
            raise doc.fail(f"{path}.values", f"operator {op} takes an integer of 0 or more, not {bound}")
    min_values = raw.get("minValues")
    if min_values is not None:
        # Karpenter's CRD: an integer from 1 to 50, and no more than the values an In requirement lists
        if isinstance(min_values, bool) or not isinstance(min_values, int) or not 1 <= min_values <= 50:
            raise doc.fail(f"{path}.minValues", f"{min_values!r} is not a whole number from 1 to 50")
        if op == "In" and min_values > len(values):
            raise doc.fail(f"{path}.minValues", f"{min_values} is more than the {len(values)} value(s) listed")
    return Requirement(str(key), str(op), tuple(str(v) for v in values), min_values)


def _requirements(doc: _Doc, path: str, raw: Any, nodepool: bool = False) -> tuple[Requirement, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise doc.fail(path, "must be a list")
    return tuple(_requirement(doc, f"{path}[{i}]", r, nodepool) for i, r in enumerate(raw))


def _node_requirements(doc: _Doc, path: str, raw: Any) -> tuple[Requirement, ...]:
    """`_requirements` of a node selector (a pod's node affinity, a NodePool's requirements), each key under its
    current name (`NORMALIZED_LABELS`, as Karpenter's ``NewRequirement`` reads it). A label selector over pods'
    labels is not one: its keys are the pods' own."""
    return _current_keys(_requirements(doc, path, raw))


def _node_selector_terms(doc: _Doc, raw_terms: list[Any], path: str, named: str, *,
                         match_fields: bool = True) -> tuple[tuple[Requirement, ...], ...]:
    """A node selector's terms at ``path`` (a pod's required node affinity, a PersistentVolume's node affinity), each
    its ``matchExpressions`` (`_node_requirements`) and, with ``match_fields``, its ``matchFields`` ANDed; a
    requirement's errors name it under ``named``."""
    terms = []
    for i, raw in enumerate(raw_terms):
        term = doc.as_mapping(raw, f"{path}[{i}]")
        requirements = _node_requirements(doc, f"{named}[{i}].matchExpressions", term.get("matchExpressions"))
        if match_fields:
            requirements += _requirements(doc, f"{named}[{i}].matchFields", term.get("matchFields"))
        terms.append(requirements)
    return tuple(terms)


def _current_keys(requirements: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    return tuple(replace(r, key=NORMALIZED_LABELS[r.key]) if r.key in NORMALIZED_LABELS else r
                 for r in requirements)


#: the pattern of a label key in Karpenter's NodePool CRD (a requirement's and a taint's ``key``): an optional
#: DNS subdomain and ``/``, then a name
LABEL_KEY_PATTERN = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: the longest requirement key Karpenter's NodePool CRD takes (``maxLength``)
MAX_REQUIREMENT_KEY = 316
#: the label keys of Karpenter's ``karpenter.sh`` domain that its NodePool CRD's first rule lets a NodePool name (the
#: second refuses ``karpenter.sh/nodepool``)
KARPENTER_DOMAIN_ALLOWED = ("karpenter.sh/capacity-type", "karpenter.sh/nodepool")
#: a taint's effects (Kubernetes' and Karpenter's NodePool CRD's enum)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _restricted_label(key: str) -> str | None:
    """Why a NodePool may not name the label ``key`` in its requirements or its template's labels, or None: the
    rules of Karpenter's NodePool CRD (v1.14.1, ``x-kubernetes-validations``), as written. The domain is what comes
    before the first ``/`` (the whole key without one), and it is restricted when it ends with ``karpenter.sh``."""
    domain = re.match(r"[^/]+", key)
    if key not in KARPENTER_DOMAIN_ALLOWED and domain is not None and domain.group().endswith("karpenter.sh"):
        return f'{key!r}: label domain "karpenter.sh" is restricted (only karpenter.sh/capacity-type is allowed)'
    if key in ("karpenter.sh/nodepool", "kubernetes.io/hostname"):
        return f'label "{key}" is restricted'
    return None


def _nodepool_requirements(doc: _Doc, path: str, restricted_labels: bool) -> tuple[Requirement, ...]:
    """A NodePool's requirements (`_node_requirements`), with the keys its CRD refuses refused: one that is not a
    label key, or (``restricted_labels``) a restricted one (`_restricted_label`, read before any key is renamed)."""
    requirements = _requirements(doc, path, doc.get(path), nodepool=True)
    for i, r in enumerate(requirements):
        if len(r.key) > MAX_REQUIREMENT_KEY or not LABEL_KEY_PATTERN.fullmatch(r.key):
            raise doc.fail(f"{path}[{i}].key", f"{r.key!r} is not a label key (an optional DNS subdomain and '/', "
                                               f"then a name of letters, digits, '-', '_' and '.')")
        restricted = _restricted_label(r.key) if restricted_labels else None
        if restricted is not None:
            raise doc.fail(f"{path}[{i}].key", restricted)
    return combined(_current_keys(requirements))


def _template_labels(doc: _Doc, path: str, restricted_labels: bool) -> dict[str, str]:
    """A NodePool's template labels, with (``restricted_labels``) the restricted keys its CRD refuses refused
    (`_restricted_label`)."""
    labels = doc.str_map(path)
    for key in labels if restricted_labels else ():
        restricted = _restricted_label(key)
        if restricted is not None:
            raise doc.fail(f"{path}.{key}", restricted)
    return labels


def _normalized_selector(selector: dict[str, str]) -> dict[str, str]:
    """A pod's nodeSelector with each older label name under its current one (`NORMALIZED_LABELS`); an older name
    whose current one the selector names with another value stays as it is, so no node has both (Karpenter finds
    the two requirements on one key disjoint)."""
    if not any(key in NORMALIZED_LABELS for key in selector):
        return selector
    out = {key: value for key, value in selector.items() if key not in NORMALIZED_LABELS}
    for key, value in selector.items():
        current = NORMALIZED_LABELS.get(key)
        if current is None:
            continue
        if out.setdefault(current, value) != value:
            out[key] = value
    return out


def _normalized_labels(labels: dict[str, str]) -> dict[str, str]:
    """A node's labels with the current name of each older one it has without it (`NORMALIZED_LABELS`: Karpenter
    reads a node's labels as requirements under the current names). The older labels stay."""
    for old, current in NORMALIZED_LABELS.items():
        if old in labels and current not in labels:
            labels = {**labels, current: labels[old]}
    return labels


def _selector(doc: _Doc, path: str, raw: Any) -> LabelSelector:
    if raw is None:
        return LabelSelector()
    if not _is_mapping(raw):
        raise doc.fail(path, "must be a label selector")
    labels = raw.get("matchLabels") or {}
    if not _is_mapping(labels):
        raise doc.fail(f"{path}.matchLabels", "must be a mapping")
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        _requirements(doc, f"{path}.matchExpressions", raw.get("matchExpressions")),
    )


def _term_selector(doc: _Doc, path: str, raw: Any) -> LabelSelector:
    """The label selector of a topology spread or a pod affinity term: a missing one selects no pod."""
    return SELECTS_NOTHING if raw is None else _selector(doc, path, raw)


def _taints(doc: _Doc, path: str, key_pattern: bool = True) -> tuple[Taint, ...]:
    """The taints at ``path`` (a Node's, a NodePool's taints or startupTaints): one of the three effects and
    (``key_pattern``) a key that is a label key, as the API server takes them for either kind (a taint read with
    another effect would keep no pod off the node)."""
    out = []
    for i, t in enumerate(doc.seq(path)):
        if not _is_mapping(t) or not t.get("key") or not t.get("effect"):
            raise doc.fail(f"{path}[{i}]", "a taint needs key and effect")
        key, effect = str(t["key"]), str(t["effect"])
        if effect not in TAINT_EFFECTS:
            raise doc.fail(f"{path}[{i}].effect", f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        if key_pattern and not LABEL_KEY_PATTERN.fullmatch(key):
            raise doc.fail(f"{path}[{i}].key", f"{key!r} is not a taint key (an optional DNS subdomain and '/', "
                                               f"then a name of letters, digits, '-', '_' and '.')")
        out.append(Taint(key, str(t.get("value") or ""), effect))
    return tuple(out)


def _affinity_term(doc: _Doc, path: str, raw: Any) -> PodAffinityTerm:
    if not _is_mapping(raw) or not raw.get("topologyKey"):
        raise doc.fail(path, "a pod affinity term needs topologyKey and labelSelector")
    namespaces = doc.as_list(raw.get("namespaces"), f"{path}.namespaces")
    raw_selector = raw.get("namespaceSelector")
    # a namespaceSelector with no requirement (``{}``, ``{matchLabels: {}}``) selects every namespace
    ns_selector = None if raw_selector is None else _selector(doc, f"{path}.namespaceSelector", raw_selector)
    everywhere = ns_selector is not None and not ns_selector.match_labels and not ns_selector.match_expressions
    return PodAffinityTerm(
        _term_selector(doc, f"{path}.labelSelector", raw.get("labelSelector")),
        str(raw["topologyKey"]),
        frozenset(str(n) for n in namespaces) if namespaces else None,
        all_namespaces=everywhere,
        namespace_selector=None if everywhere else ns_selector,
    )


def _namespace(doc: _Doc) -> Namespace:
    return Namespace(str(doc.get("metadata.name")), doc.str_map("metadata.labels"))


def _selects_namespaces(spec: SchedulingSpec) -> bool:
    """Whether a pod affinity term of ``spec`` (required or preferred) has a ``namespaceSelector`` to resolve."""
    return any(t.namespace_selector is not None for t in chain(
        spec.pod_affinity, spec.pod_anti_affinity, (t for _, t in spec.preferred_pod_affinity),
        (t for _, t in spec.preferred_pod_anti_affinity)))


def _namespaces_resolved(pods: list[Pod], namespaces: Sequence[Namespace]) -> list[Pod]:
    """``pods`` with their pod affinity terms' ``namespaceSelector`` resolved against ``namespaces``: each such term
    then selects pods in the namespaces whose labels it matches and those it lists, and no other (its own namespace
    only when one of those), as Karpenter's ``buildNamespaceList`` and kube-scheduler read it. Each selector is matched
    against the Namespaces once (replicas repeat theirs)."""
    labels_of = {ns.name: ns.labels for ns in namespaces}
    chosen_by: dict[LabelSelector, frozenset[str]] = {}

    def resolved(term: PodAffinityTerm) -> PodAffinityTerm:
        selector = term.namespace_selector
        if selector is None:
            return term
        chosen = chosen_by.get(selector)
        if chosen is None:
            chosen = chosen_by[selector] = frozenset(
                name for name, labels in labels_of.items() if selector_matches(selector, labels))
        return replace(term, namespaces=chosen | (term.namespaces or frozenset()), namespace_selector=None)

    def resolved_spec(spec: SchedulingSpec) -> SchedulingSpec:
        return replace(spec, pod_affinity=tuple(map(resolved, spec.pod_affinity)),
                       pod_anti_affinity=tuple(map(resolved, spec.pod_anti_affinity)),
                       preferred_pod_affinity=tuple((w, resolved(t)) for w, t in spec.preferred_pod_affinity),
                       preferred_pod_anti_affinity=tuple((w, resolved(t)) for w, t in spec.preferred_pod_anti_affinity))

    return [replace(pod, spec=resolved_spec(pod.spec)) if _selects_namespaces(pod.spec) else pod for pod in pods]


def _scheduling_spec(doc: _Doc, spec_path: str, status_path: str | None = None, *,
                     match_fields: bool = True) -> SchedulingSpec:
    """The scheduling needs of the pod spec at ``spec_path``; ``status_path``, a pod's status, adds what its
    containers hold during an in-place resize (`_resize_requests`). ``match_fields=False`` leaves out the required
    node affinity's ``matchFields``: a DaemonSet's pod is pinned to its node by one (``metadata.name In``) and never
    moves, and read, they would make each of them a pod class of its own, compiled every pass."""
    p = spec_path + "."
    containers = doc.seq(p + "containers")
    held = _held_requests(doc, status_path) if status_path is not None else None
    # summed exactly, in billionths of each resource's unit (`parse_resource_nanos`), and rounded up to ebb's unit once
    # at the end, as Kubernetes adds the containers' quantities (``Quantity.Add``) and the scheduler then reads the
    # pod's total (``MilliValue``): three containers asking 0.4m cpu ask 2m, not 3m
    requests: dict[str, int] = {}
    for i, container in enumerate(containers):
        creq = _container_requests(doc, f"{p}containers", i)
        if held is not None:
            creq = _resize_requests(creq, held, container)
        for name, value in creq.items():
            requests[name] = requests.get(name, 0) + value
    # Kubernetes' ``resource.PodRequests`` (KEP-753): a sidecar (an init container with ``restartPolicy: Always``)
    # runs beside the app containers, so its requests add to theirs and to every init container started after it;
    # the pod needs the larger of that sum and each init container's own need
    sidecars: dict[str, int] = {}
    init_need: dict[str, int] = {}
    for i, container in enumerate(doc.seq(p + "initContainers")):
        ireq = _container_requests(doc, f"{p}initContainers", i)
        if _is_mapping(container) and container.get("restartPolicy") == "Always":
            if held is not None:
                ireq = _resize_requests(ireq, held, container)
            for name, value in ireq.items():
                requests[name] = requests.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            need = sidecars
        else:
            need = {name: ireq.get(name, 0) + sidecars.get(name, 0) for name in ireq.keys() | sidecars.keys()}
        for name, value in need.items():
            init_need[name] = max(init_need.get(name, 0), value)
    for name, value in init_need.items():
        requests[name] = max(requests.get(name, 0), value)
    # pod-level resources (KEP-2837, on by default since Kubernetes 1.34): a pod-level request of cpu, memory or
    # hugepages replaces what the containers add up to, as ``resource.PodRequests`` has it (a pod-level limit
    # without a request stands for it where the API server defaults the request to it: `_pod_level_requests`)
    pod_level = doc.get(p + "resources")
    if pod_level is not None:
        for name, value in _pod_level_requests(doc, p + "resources", pod_level, requests.keys()).items():
            requests[name] = value
    for name, value in doc.as_resources(doc.get(p + "overhead", {}), p + "overhead", nanos=True).items():
        requests[name] = requests.get(name, 0) + value
    requests = {name: nanos_to_amount(name, value) for name, value in requests.items()}
    requests["pods"] = 1

    affinity = doc.mapping(p + "affinity")
    node_aff = doc.as_mapping(affinity.get("nodeAffinity"), f"{p}affinity.nodeAffinity")
    required_terms = None
    req_path = f"{p}affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    req_raw = doc.as_mapping(node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
    if req_raw:
        selector_terms = doc.as_list(req_raw.get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms")
        required_terms = _node_selector_terms(doc, selector_terms, f"{req_path}.nodeSelectorTerms",
                                              f"{p}affinity.nodeAffinity.required.nodeSelectorTerms",
                                              match_fields=match_fields)
    pref_path = f"{p}affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred_raw = [doc.as_mapping(t, f"{pref_path}[{i}]") for i, t in
                     enumerate(doc.as_list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path))]
    preferred = tuple(
        (_number(doc, t.get("weight", 1), f"{p}affinity.nodeAffinity.preferred[{i}].weight"),
         _node_requirements(
             doc, f"{p}affinity.nodeAffinity.preferred[{i}].preference.matchExpressions",
             doc.as_mapping(t.get("preference"), f"{pref_path}[{i}].preference").get("matchExpressions")))
        for i, t in enumerate(preferred_raw))

    def terms(kind: str, required: bool) -> tuple[Any, ...]:
        block = doc.as_mapping(affinity.get(kind), f"{p}affinity.{kind}")
        if required:
            field = "requiredDuringSchedulingIgnoredDuringExecution"
            return tuple(_affinity_term(doc, f"{p}affinity.{kind}.required[{i}]", t) for i, t in
                         enumerate(doc.as_list(block.get(field), f"{p}affinity.{kind}.{field}")))
        field = "preferredDuringSchedulingIgnoredDuringExecution"
        weighted = [doc.as_mapping(t, f"{p}affinity.{kind}.{field}[{i}]")
                    for i, t in enumerate(doc.as_list(block.get(field), f"{p}affinity.{kind}.{field}"))]
        return tuple((_number(doc, t.get("weight", 1), f"{p}affinity.{kind}.preferred[{i}].weight"),
                      _affinity_term(doc, f"{p}affinity.{kind}.preferred[{i}]", t.get("podAffinityTerm")))
                     for i, t in enumerate(weighted))

    spreads = []
    for i, raw in enumerate(doc.seq(p + "topologySpreadConstraints")):
        path = f"{p}topologySpreadConstraints[{i}]"
        if not _is_mapping(raw) or not raw.get("topologyKey"):
            raise doc.fail(path, "needs topologyKey, maxSkew and whenUnsatisfiable")
        selector = _term_selector(doc, f"{path}.labelSelector", raw.get("labelSelector"))
        keys = doc.as_list(raw.get("matchLabelKeys"), f"{path}.matchLabelKeys")
        if keys:
            # the pod's own values of these keys narrow the selector (`key In (value)`; a key the pod has no label
            # of is left out), as kube-scheduler and Karpenter's topology read it: a Deployment's spread counts the
            # pods of its own revision (pod-template-hash) only. Newer API servers write the same into the selector.
            labels = doc.str_map(spec_path.removesuffix("spec") + "metadata.labels")
            selector = replace(selector, match_expressions=(*selector.match_expressions, *(
                Requirement(str(k), "In", (labels[str(k)],)) for k in keys if str(k) in labels)))
        try:
            skew = int(raw.get("maxSkew", 1))
        except (TypeError, ValueError, OverflowError) as exc:
            raise doc.fail(f"{path}.maxSkew", "must be an integer") from exc
        if skew < 1:
            raise doc.fail(f"{path}.maxSkew", "must be at least 1")
        spreads.append(TopologySpread(
            skew, str(raw["topologyKey"]), str(raw.get("whenUnsatisfiable", "DoNotSchedule")),
            selector,
            _number(doc, raw["minDomains"], f"{path}.minDomains") if raw.get("minDomains") is not None else None,
            str(raw.get("nodeAffinityPolicy") or "Honor"), str(raw.get("nodeTaintsPolicy") or "Ignore")))

    # the host ports of the app containers and of the sidecars (init containers with ``restartPolicy: Always``, which
    # run for the pod's life), as kube-scheduler's ``GetHostPorts`` counts them (Karpenter reads the app containers'
    # only: docs/decisions.md); a regular init container's ports are gone before the app starts. With ``hostNetwork``
    # a port without a hostPort has its containerPort as one: the API server defaults it so
    # (``defaultHostNetworkPorts``)
    ports = []
    host_network = doc.get(p + "hostNetwork") is True
    for kind, listed in (("containers", containers), ("initContainers", doc.seq(p + "initContainers"))):
        for i, c in enumerate(listed):
            if kind == "initContainers" and not (_is_mapping(c) and c.get("restartPolicy") == "Always"):
                continue
            for j, port in enumerate(doc.as_list((c or {}).get("ports"), f"{p}{kind}[{i}].ports")):
                if not _is_mapping(port):
                    continue
                field = "hostPort" if port.get("hostPort") or not host_network else "containerPort"
                if port.get(field):
                    try:
                        ports.append(HostPort(int(port[field]), str(port.get("protocol") or "TCP"),
                                              _host_ip(port.get("hostIP"))))
                    except (TypeError, ValueError, OverflowError) as exc:
                        raise doc.fail(f"{p}{kind}[{i}].ports[{j}].{field}", "must be an integer") from exc

    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                   str(t.get("effect") or ""))
        for t in doc.seq(p + "tolerations") if _is_mapping(t))
    # Dynamic Resource Allocation: a pod that references a ResourceClaim, itself or from a container, is one
    # Karpenter's simulation places nowhere (``HasDRARequirements``, refused while ``IgnoreDRARequests`` is on, its
    # default), so no move of it is planned: it goes nowhere, as a pod whose volumes allow no node
    dra = bool(doc.seq(p + "resourceClaims")) or any(
        _is_mapping(c) and _is_mapping(c.get("resources")) and bool(c["resources"].get("claims"))
        for c in (*containers, *doc.seq(p + "initContainers")))
    return SchedulingSpec(
        requests=requests,
        node_selector=_normalized_selector(doc.str_map(p + "nodeSelector")),
        required_node_terms=required_terms,
        preferred_node_terms=preferred,
        tolerations=tolerations,
        pod_affinity=terms("podAffinity", True),
        pod_anti_affinity=terms("podAntiAffinity", True),
        preferred_pod_affinity=terms("podAffinity", False),
        preferred_pod_anti_affinity=terms("podAntiAffinity", False),
        spread=tuple(spreads),
        host_ports=tuple(ports),
        volume_terms=() if dra else None,
        volume_block=DRA_BLOCK if dra else "",
    )


def _host_ip(value: Any) -> str:
    """A host port's address: unset, or an unspecified one (0.0.0.0, or IPv6's ::, which Karpenter's
    ``HostPortUsage`` reads as every address too), is every address, "0.0.0.0"; another is written one way, so that
    two spellings of one address clash as Karpenter's ``net.IP.Equal`` finds them equal (``FD00:0:0::1`` is
    ``fd00::1``, and an IPv4-mapped ``::ffff:10.0.0.1`` is ``10.0.0.1``)."""
    if not value:
        return "0.0.0.0"
    text = str(value)
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if address.is_unspecified:
        return "0.0.0.0"
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def _pod_level_requests(doc: _Doc, path: str, resources: Any, asked: Iterable[str]) -> dict[str, int]:
    """The pod-level requests of cpu, memory and hugepages-* at ``path`` (``spec.resources``), in billionths of their
    units (`parse_resource_nanos`); other resources are
    container-level only (``IsSupportedPodLevelResource``). A pod-level limit without a request stands for it as the
    API server defaults it (``defaultPodRequests``): for cpu and memory only when no container asks for the resource
    (``asked``, the resources the containers' requests name, a limit defaulting a container's request included: the
    pod-level request is then their aggregate, which they already add up to); for hugepages always."""
    if not _is_mapping(resources):
        raise doc.fail(path, "must be a mapping")
    requests = dict(doc.as_mapping(resources.get("requests"), f"{path}.requests"))
    from_containers = {"cpu", "memory"} & set(asked)
    for name, value in doc.as_mapping(resources.get("limits"), f"{path}.limits").items():
        if str(name) not in from_containers:
            requests.setdefault(name, value)
    out: dict[str, int] = {}
    for name, value in requests.items():
        key = str(name)
        if key in ("cpu", "memory") or key.startswith(HUGEPAGES_PREFIX):
            try:
                out[key] = parse_resource_nanos(key, value)
            except QuantityError as exc:
                raise doc.fail(f"{path}.requests.{key}", str(exc)) from exc
    return out


#: a container's status during an in-place resize, by container name: its ``resources.requests`` (what the kubelet
#: has actuated) and its ``allocatedResources``, in billionths of their units; and whether the resize is Infeasible
_Held = tuple[dict[str, tuple[dict[str, int], dict[str, int]]], bool]


def _held_requests(doc: _Doc, path: str) -> _Held | None:
    """What the containers of the pod whose status is at ``path`` hold (`_Held`): each container status, of
    ``containerStatuses`` then ``initContainerStatuses`` (the later of one name wins), that has ``resources``; and
    whether the first ``PodResizePending`` condition's reason is Infeasible (Kubernetes' ``IsPodResizeInfeasible``).
    None when no container status has ``resources``: every container's requests are then its spec's."""
    pod_status = doc.get(path)
    if not _is_mapping(pod_status) or ("containerStatuses" not in pod_status
                                       and "initContainerStatuses" not in pod_status):
        return None  # most pods: no container status (a simulation's, a `kubectl get` without status)
    held: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for field in ("containerStatuses", "initContainerStatuses"):
        for i, raw in enumerate(doc.seq(f"{path}.{field}")):
            at = f"{path}.{field}[{i}]"
            status = doc.as_mapping(raw, at)
            resources = status.get("resources")
            if resources is None:
                continue
            resources = doc.as_mapping(resources, f"{at}.resources")
            held[str(status.get("name") or "")] = (
                doc.as_resources(resources.get("requests"), f"{at}.resources.requests", nanos=True),
                doc.as_resources(status.get("allocatedResources"), f"{at}.allocatedResources", nanos=True))
    if not held:
        return None
    resize = next((c for c in doc.seq(f"{path}.conditions")
                   if _is_mapping(c) and c.get("type") == "PodResizePending"), None)
    return held, resize is not None and resize.get("reason") == "Infeasible"


def _resize_requests(spec: dict[str, int], held: _Held, container: Any) -> dict[str, int]:
    """A container's requests as Karpenter counts them during an in-place resize (``resources.Ceiling``: Kubernetes'
    ``PodRequests`` with ``UseStatusResources``): with a status that has ``resources``, per resource the largest of
    ``spec`` (its spec's requests), what its status has actuated and what is allocated to it, ``spec`` left out when
    the resize is Infeasible; ``spec`` when its status has no ``resources``."""
    statuses, infeasible = held
    found = statuses.get(str(container.get("name") or "")) if _is_mapping(container) else None
    if found is None:
        return spec
    out = {} if infeasible else dict(spec)
    for quantities in found:
        for name, value in quantities.items():
            out[name] = max(out.get(name, value), value)
    return out


def _container_requests(doc: _Doc, path: str, index: int) -> dict[str, int]:
    """The requests of container ``index`` of the list at ``path``, in billionths of their units
    (`parse_resource_nanos`), a limit standing for a missing request."""
    container = doc.seq(path)[index]
    if not _is_mapping(container):
        raise doc.fail(f"{path}[{index}]", "must be a mapping")
    resources = container.get("resources") or {}
    if not _is_mapping(resources):
        raise doc.fail(f"{path}[{index}].resources", "must be a mapping")
    requests = dict(doc.as_mapping(resources.get("requests"), f"{path}[{index}].resources.requests"))
    for name, value in doc.as_mapping(resources.get("limits"), f"{path}[{index}].resources.limits").items():
        requests.setdefault(name, value)  # Kubernetes defaults a missing request to the limit
    out: dict[str, int] = {}
    for name, value in requests.items():
        try:
            out[str(name)] = parse_resource_nanos(str(name), value)
        except QuantityError as exc:
            raise doc.fail(f"{path}[{index}].resources.requests.{name}", str(exc)) from exc
    return out


#: owner kinds that make a pod special wherever they are among its ownerReferences, the first found taken: Karpenter's
#: ``IsOwnedByDaemonSet``, ``IsOwnedByNode`` and ``IsOwnedByStatefulSet`` read every reference, not the controller's
#: the owners Karpenter's ``IsOwnedBy`` looks for, in this order, with the API version each is of (``pkg/utils/pod``):
#: a DaemonSet's pod needs no new home, a Node's is a mirror pod, a StatefulSet's keeps its name
_SPECIAL_OWNERS = (("DaemonSet", "apps/v1"), ("Node", "v1"), ("StatefulSet", "apps/v1"))
_SPECIAL_KINDS = tuple(kind for kind, _ in _SPECIAL_OWNERS)  # a tuple: a kind written as a list is compared, not hashed


def _owner(doc: _Doc) -> tuple[str | None, str | None]:
    """The pod's owner (kind, name): a DaemonSet, Node or StatefulSet among its ownerReferences (in that order), of
    the API version Karpenter's ``IsOwnedBy`` asks (a reference that names none is taken at its kind), else its
    controller, else its first reference. Another group's kind of the same name (OpenKruise's
    ``apps.kruise.io/v1alpha1`` DaemonSet) is none of those: its kind is written with its API version."""
    owners = [o for o in doc.seq("metadata.ownerReferences") if _is_mapping(o)]
    if not owners:
        return None, None
    special = [o for o in owners if o.get("kind") in _SPECIAL_KINDS]  # (most pods: none, or their one owner)
    for kind, api_version in _SPECIAL_OWNERS if special else ():
        chosen = next((o for o in special if o.get("kind") == kind and o.get("apiVersion") in (api_version, None)),
                      None)
        if chosen is not None:
            return kind, str(chosen.get("name") or "")
    chosen = next((o for o in owners if o.get("controller")), owners[0])
    kind = str(chosen.get("kind") or "")
    if kind in _SPECIAL_KINDS:
        kind = f"{kind} ({chosen.get('apiVersion')})"
    return kind, str(chosen.get("name") or "")


def _unchanged_spec(raw: Mapping[str, Any],
                    previous: tuple[Mapping[str, Any], ParsedObject] | None) -> SchedulingSpec | None:
    """The scheduling needs parsed from ``previous`` when ``raw`` is a Pod with the same ``spec`` but for
    ``nodeName``, and the same resize state (`_resize_state`); else None."""
    if previous is None:
        return None
    old_raw, old = previous
    if not isinstance(old.value, Pod):
        return None
    spec, old_spec = raw.get("spec"), old_raw.get("spec")
    if not _is_mapping(spec) or not _is_mapping(old_spec):
        return None
    if len(spec) - ("nodeName" in spec) != len(old_spec) - ("nodeName" in old_spec):
        return None
    missing = object()
    if not all(name == "nodeName" or old_spec.get(name, missing) == value for name, value in spec.items()):
        return None
    spreads = spec.get("topologySpreadConstraints")
    if isinstance(spreads, list) and any(_is_mapping(c) and c.get("matchLabelKeys") for c in spreads) \
            and _labels_of(raw) != _labels_of(old_raw):
        return None  # a spread's matchLabelKeys read the pod's labels
    return old.value.spec if _resize_state(raw) == _resize_state(old_raw) else None


def _labels_of(raw: Mapping[str, Any]) -> Any:
    metadata = raw.get("metadata")
    return metadata.get("labels") if _is_mapping(metadata) else None


def _resize_state(raw: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a Pod's status its requests read (`_held_requests`), as given: each container status's name,
    ``resources`` and ``allocatedResources``, and the ``PodResizePending`` conditions' reasons."""
    status = raw.get("status")
    if not _is_mapping(status):
        return ()
    statuses, init_statuses = status.get("containerStatuses"), status.get("initContainerStatuses")
    if not statuses and not init_statuses:
        return ()  # nothing held: the conditions are not read (most pods, and every pod a simulation makes)

    def held(statuses: Any) -> Any:
        if not isinstance(statuses, list):
            return statuses
        return tuple((c.get("name"), c.get("resources"), c.get("allocatedResources")) if _is_mapping(c) else c
                     for c in statuses)

    conditions = status.get("conditions")
    if isinstance(conditions, list):
        conditions = tuple(c.get("reason") for c in conditions
                           if _is_mapping(c) and c.get("type") == "PodResizePending")
    return held(statuses), held(init_statuses), conditions


def _pod(doc: _Doc, spec: SchedulingSpec | None = None) -> Pod:
    """A Pod; ``spec``, when given, is its scheduling needs already parsed from the same ``spec``."""
    annotations = doc.str_map("metadata.annotations")
    owner_kind, owner_name = _owner(doc)
    try:
        priority = int(doc.get("spec.priority", 0))
    except (TypeError, ValueError, OverflowError) as exc:
        raise doc.fail("spec.priority", "must be an integer") from exc
    conditions = {str(c.get("type")): str(c.get("status")) for c in doc.seq("status.conditions")
                  if _is_mapping(c)}
    phase = str(doc.get("status.phase", "Pending"))
    if ANNOTATION_POD_DELETION_COST in annotations:
        try:
            int(annotations[ANNOTATION_POD_DELETION_COST])
        except ValueError as exc:
            raise doc.fail(f"metadata.annotations.{ANNOTATION_POD_DELETION_COST}", "must be an integer") from exc
    scheduler = str(doc.get("spec.schedulerName") or "")
    name = str(doc.get("metadata.name"))
    return Pod(
        name=name,
        namespace=str(doc.get("metadata.namespace", "default")),
        labels=doc.str_map("metadata.labels"),
        annotations=annotations,
        spec=spec if spec is not None else _scheduling_spec(doc, "spec", "status",
                                                            match_fields=owner_kind != "DaemonSet"),
        node_name=doc.optional_str("spec.nodeName"),
        scheduling_gated=bool(doc.seq("spec.schedulingGates")),
        phase=phase,
        priority=priority,
        owner_kind=owner_kind,
        owner_name=owner_name,
        is_mirror=owner_kind == "Node",  # Karpenter's IsOwnedByNode: a Node among its owner references
        ready=conditions.get("Ready", "True" if phase == "Running" else "False") == "True",
        deleting=doc.get("metadata.deletionTimestamp") is not None,
        start_time=doc.time("status.startTime"),
        creation_time=doc.time("metadata.creationTimestamp"),
        uid=str(doc.get("metadata.uid", "")),
        priority_class=str(doc.get("spec.priorityClassName", "")),
        termination_grace_seconds=_whole_seconds(doc.get("spec.terminationGracePeriodSeconds")),
        deletion_time=doc.time("metadata.deletionTimestamp"),
        scheduler_name="" if scheduler == "default-scheduler" else scheduler,
        claims=_claims(doc, name),
    )


def _claims(doc: _Doc, pod_name: str) -> tuple[str, ...]:
    """The PersistentVolumeClaims a pod's volumes use: a ``persistentVolumeClaim`` volume's ``claimName``, and an
    ``ephemeral`` volume's claim, which the ephemeral volume controller names ``<pod>-<volume>``."""
    claims: list[str] = []
    for i, volume in enumerate(doc.seq("spec.volumes")):
        if not _is_mapping(volume):
            continue
        if volume.get("persistentVolumeClaim") is not None:
            name = doc.as_mapping(volume["persistentVolumeClaim"], f"spec.volumes[{i}].persistentVolumeClaim") \
                .get("claimName")
            if not name:
                raise doc.fail(f"spec.volumes[{i}].persistentVolumeClaim.claimName", "is required")
            claims.append(str(name))
        elif volume.get("ephemeral") is not None:
            if not volume.get("name"):
                raise doc.fail(f"spec.volumes[{i}].name", "is required")
            claims.append(f"{pod_name}-{volume['name']}")
    return tuple(claims)


def _whole_seconds(value: Any) -> int | None:
    """An integer field of seconds that only the drain reads (a pod's terminationGracePeriodSeconds), None when
    absent or not an integer (the apiserver's pods always have one)."""
    return value if type(value) is int else None


def _node(doc: _Doc) -> Node:
    conditions = {str(c.get("type")): str(c.get("status")) for c in doc.seq("status.conditions")
                  if _is_mapping(c)}
    capacity = doc.resources("status.capacity")
    allocatable = doc.resources("status.allocatable") or dict(capacity)
    return Node(
        name=str(doc.get("metadata.name")),
        labels=_normalized_labels(doc.str_map("metadata.labels")),
        annotations=doc.str_map("metadata.annotations"),
        taints=_taints(doc, "spec.taints"),
        allocatable=allocatable,
        capacity=capacity or dict(allocatable),
        unschedulable=bool(doc.get("spec.unschedulable", False)),
        creation_time=doc.time("metadata.creationTimestamp"),
        deleting=doc.get("metadata.deletionTimestamp") is not None,
        ready=conditions.get("Ready", "True") == "True",
        provider_id=str(doc.get("spec.providerID", "")),
        ready_reported="Ready" in conditions,
    )


def _budgets(doc: _Doc, path: str) -> tuple[Budget, ...]:
    """The budgets at ``path`` as written (``ebb.core.budgets`` judges them and fails closed on a bad one)."""
    raw = doc.get(path)
    if raw is None:
        return (Budget(nodes="10%"),)
    if not isinstance(raw, list):
        raise doc.fail(path, "must be a list")
    out = []
    for i, b in enumerate(raw):
        if not _is_mapping(b):
            raise doc.fail(f"{path}[{i}]", "must be a mapping")
        reasons = b.get("reasons")
        if reasons is not None and not isinstance(reasons, list):  # `reasons: Empty` is not "every reason"
            raise doc.fail(f"{path}[{i}].reasons", f"{reasons!r} is not a list of reasons like [Empty, Drifted]")
        out.append(Budget(
            nodes=str(b.get("nodes", "10%")),
            schedule=str(b["schedule"]) if b.get("schedule") is not None else None,
            duration=str(b["duration"]) if b.get("duration") is not None else None,
            reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
        ))
    return tuple(out)


def _consolidation_policy(doc: _Doc, path: str) -> str:
    policy = str(doc.get(path, "WhenEmptyOrUnderutilized"))
    if policy == "WhenUnderutilized":  # v1beta1 spelling
        policy = "WhenEmptyOrUnderutilized"
    if policy not in CONSOLIDATION_POLICIES:
        raise doc.fail(path, f"{policy!r} is not WhenEmptyOrUnderutilized, WhenEmpty or Balanced")
    return policy


def _nodepool(doc: _Doc, karpenter_crd: bool = True) -> NodePool:
    """A NodePool. ``karpenter_crd``: one of Karpenter's group, whose CRD (every version) refuses a restricted label
    in its requirements and template labels and a taint key that is not a label key; ebb's former ``ebb.sh``
    NodePool CRD checked neither, so a cluster may still hold such an object, and it is read."""
    annotations = doc.str_map("metadata.annotations")
    policy = _consolidation_policy(doc, "spec.disruption.consolidationPolicy")
    consolidate_after = doc.duration("spec.disruption.consolidateAfter", None)
    ttl_empty = doc.get("spec.disruption.ttlSecondsAfterEmpty", doc.get("spec.ttlSecondsAfterEmpty"))
    if doc.get("spec.disruption.consolidateAfter") is None:
        field = ("spec.disruption.ttlSecondsAfterEmpty" if doc.get("spec.disruption.ttlSecondsAfterEmpty") is not None
                 else "spec.ttlSecondsAfterEmpty")
        consolidate_after = _number(doc, ttl_empty, field, float) if ttl_empty is not None else 0.0
        if consolidate_after > MAX_DURATION_SECONDS:
            raise doc.fail(field, f"{ttl_empty!r} is longer than Go's longest duration, 2562047h47m16s")
    # Karpenter's CRD defaults expireAfter to 720h (v1's template field, as v1beta1's disruption field); Never is None
    stated = any(doc.get(path) is not None
                 for path in ("spec.template.spec.expireAfter", "spec.disruption.expireAfter"))
    expire = doc.duration("spec.template.spec.expireAfter",
                          doc.duration("spec.disruption.expireAfter", DEFAULT_EXPIRE_AFTER))
    limits = doc.resources("spec.limits")
    if "nodes" in limits:
        # a Quantity, as every limit ("1k" is 1000 nodes); a node count is whole, so a fraction's floor bounds it
        # alike (a count exceeds 1.5 where it exceeds 1)
        limits["nodes"] = parse_resource_nanos("nodes", doc.mapping("spec.limits")["nodes"]) // 10**9  # read above
    try:
        weight = int(doc.get("spec.weight", 0))
    except (TypeError, ValueError, OverflowError) as exc:
        raise doc.fail("spec.weight", "must be an integer") from exc
    if doc.get("spec.weight") is not None and not 1 <= weight <= 100:  # the CRD's minimum and maximum
        raise doc.fail("spec.weight", f"{doc.get('spec.weight')!r} is not a weight from 1 to 100")
    raw_replicas = doc.get("spec.replicas")
    if raw_replicas is not None and (isinstance(raw_replicas, bool) or not isinstance(raw_replicas, int)
                                     or raw_replicas < 0):
        raise doc.fail("spec.replicas", f"{raw_replicas!r} is not a count of nodes (a whole number, 0 or more)")
    if raw_replicas is not None:  # the CRD's rules on a static NodePool
        if doc.get("spec.weight") is not None:
            raise doc.fail("spec.weight", "is not supported on static NodePools (spec.replicas is set)")
        if any(name != "nodes" for name in doc.mapping("spec.limits")):
            raise doc.fail("spec.limits", f"only limits.nodes is supported on static NodePools (spec.replicas is "
                                          f"set), not {sorted(set(doc.mapping('spec.limits')) - {'nodes'})}")
    # Karpenter's CRD requires a nodeClassRef; an older version's NodePool names its class otherwise
    managed = doc.get("apiVersion") != "karpenter.sh/v1" or doc.get("spec.template.spec.nodeClassRef") is not None
    return NodePool(
        name=str(doc.get("metadata.name")),
        requirements=_nodepool_requirements(doc, "spec.template.spec.requirements", karpenter_crd),
        labels=_template_labels(doc, "spec.template.metadata.labels", karpenter_crd),
        annotations=doc.str_map("spec.template.metadata.annotations"),
        taints=_taints(doc, "spec.template.spec.taints", karpenter_crd),
        startup_taints=_taints(doc, "spec.template.spec.startupTaints", karpenter_crd),
        weight=weight,
        limits=limits,
        replicas=raw_replicas,
        closed=_closed(doc, managed),
        managed=managed,
        consolidation_policy=policy,
        consolidate_after=consolidate_after,
        expire_after=expire,
        expire_after_default=not stated,
        budgets=_budgets(doc, "spec.disruption.budgets"),
        stabilization_window=_finite_duration(doc, "spec.disruption.stabilizationWindow"),
        minimum_price_improvement_percent=_percent(doc, "spec.disruption.minimumPriceImprovementPercent"),
        demand_window=_window(doc, "spec.disruption.demandWindow"),
        minimum_saving_per_evicted_pod=_dollars_per_hour(doc, "spec.disruption.minimumSavingPerEvictedPod", 0.0),
        hash=annotations.get(ANNOTATION_NODEPOOL_HASH),
        hash_version=annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION),
        spot_to_spot=annotations.get("ebb.sh/spot-to-spot-consolidation") == "true",
        node_class_label=_node_class_label(doc),
    )


def _closed(doc: _Doc, managed: bool) -> str:
    """Why Karpenter's scheduler opens no node in the NodePool (`NodePool.closed`), or "": it is being deleted, or not
    Ready, or it is not ``managed`` (no ``nodeClassRef``)."""
    if doc.get("metadata.deletionTimestamp") is not None:
        return "is being deleted"
    ready = next((str(c.get("status")) == "True" for c in doc.seq("status.conditions")
                  if _is_mapping(c) and c.get("type") == "Ready"), True)
    if not ready:
        return "is not Ready"
    if not managed:
        return "has no spec.template.spec.nodeClassRef"
    return ""


def _node_class_label(doc: _Doc) -> tuple[str, str] | None:
    """The label Karpenter gives the NodePool's nodes for its NodeClass (`NodePool.node_class_label`)."""
    group, kind, name = (doc.get(f"spec.template.spec.nodeClassRef.{field}") for field in ("group", "kind", "name"))
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(name, str) and group and kind and name):
        return None
    return f"{group}/{kind.lower()}", name


def _disruption_policy(doc: _Doc) -> DisruptionPolicy:
    """An ebb.sh/v1 DisruptionPolicy: the fields of a NodePool's spec.disruption (and expireAfter), flat in
    ``spec``; ``metadata.name`` is the NodePool's."""
    return DisruptionPolicy(
        name=str(doc.get("metadata.name")),
        consolidation_policy=_consolidation_policy(doc, "spec.consolidationPolicy"),
        consolidate_after=doc.duration("spec.consolidateAfter", 0.0),
        expire_after=doc.duration("spec.expireAfter", None),
        budgets=_budgets(doc, "spec.budgets"),
        stabilization_window=_finite_duration(doc, "spec.stabilizationWindow"),
        minimum_price_improvement_percent=_percent(doc, "spec.minimumPriceImprovementPercent"),
        demand_window=_window(doc, "spec.demandWindow"),
        minimum_saving_per_evicted_pod=_dollars_per_hour(doc, "spec.minimumSavingPerEvictedPod",
                                                         DEFAULT_MINIMUM_SAVING_PER_EVICTED_POD),
    )


def _finite_duration(doc: _Doc, path: str) -> float | None:
    """A duration, or None when absent. ``Never`` is an input error, as the DisruptionPolicy CRD's pattern for
    ``stabilizationWindow`` and ``demandWindow`` refuses it: read as no window, it could as well have meant one
    without end."""
    value = doc.get(path)
    if isinstance(value, str) and value.strip() == "Never":
        raise doc.fail(path, "'Never' is not a window: give a duration like 10m or 1h (0s: none)")
    return doc.duration(path, None)


def _window(doc: _Doc, path: str) -> float | None:
    """A positive duration, or None when absent (``0s`` too: no window); ``Never`` is refused (`_finite_duration`)."""
    value = _finite_duration(doc, path)
    return value if value else None


#: the largest ``minimumSavingPerEvictedPod`` taken, dollars per hour: above the price of any instance type, so
#: it already stops every consolidation that evicts a pod
MAX_SAVING_PER_EVICTED_POD = 1000.0


def _dollars_per_hour(doc: _Doc, path: str, default: float) -> float:
    """A price in dollars per hour, from 0 to `MAX_SAVING_PER_EVICTED_POD`: a number, or a string holding one
    (``"0.01"``, as a Kubernetes object may quote a decimal); absent: ``default``."""
    value = doc.get(path)
    if value is None:
        return default
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value.strip().removeprefix("$"))
    if number is None or not math.isfinite(number) or not 0 <= number <= MAX_SAVING_PER_EVICTED_POD:
        raise doc.fail(path, f"{value!r} is not a price in dollars per hour from 0 to {MAX_SAVING_PER_EVICTED_POD:g}")
    return number


def _percent(doc: _Doc, path: str) -> int:
    """A whole percentage, 0 to 100 (absent: 0)."""
    value = doc.get(path)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise doc.fail(path, f"{value!r} is not a whole percentage from 0 to 100")
    return value


def governed(pool: NodePool, policy: DisruptionPolicy) -> NodePool:
    """``pool`` with the disruption settings of ``policy`` (its DisruptionPolicy) instead of its own: the same
    object again for the same two objects, as a planner's snapshots hold them while they are unchanged (the
    simulator then knows the NodePool by identity, `ebb.core.simulator.constraints.cached_pools`)."""
    hit = _GOVERNED.get((id(pool), id(policy)))  # snapshots are assembled on two threads (a pass and a validation)
    if hit is not None and hit[0] is pool and hit[1] is policy:
        return hit[2]
    made = replace(pool, policy_kind=POLICY_FROM_DISRUPTION_POLICY, own_disruption=(pool.budgets, pool.expire_after,
                                                                                    pool.expire_after_default),
                   **{name: getattr(policy, name) for name in DISRUPTION_FIELDS})
    _GOVERNED.keep((id(pool), id(policy)), (pool, policy, made))
    return made


#: `governed`'s last NodePools by the ids of the NodePool and the policy, kept with both (so the ids stay theirs)
_GOVERNED: Memo[tuple[int, int], tuple[NodePool, DisruptionPolicy, NodePool]] = Memo(64, forget="oldest")


def _nodeclaim(doc: _Doc) -> NodeClaim:
    conditions: dict[str, tuple[str, datetime | None]] = {}
    for i, c in enumerate(doc.seq("status.conditions")):
        if _is_mapping(c) and c.get("type"):
            conditions[str(c["type"])] = (
                str(c.get("status")),
                doc.parse_time(c.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime"))
    labels = doc.str_map("metadata.labels")
    annotations = doc.str_map("metadata.annotations")
    return NodeClaim(
        name=str(doc.get("metadata.name")),
        nodepool=labels.get("karpenter.sh/nodepool"),
        node_name=doc.optional_str("status.nodeName"),
        provider_id=str(doc.get("status.providerID", "")),
        initialized=conditions.get("Initialized", ("False", None))[0] == "True",
        drifted=conditions.get("Drifted", ("False", None))[0] == "True",
        conditions=conditions,
        deleting=doc.get("metadata.deletionTimestamp") is not None,
        creation_time=doc.time("metadata.creationTimestamp"),
        last_pod_event=doc.time("status.lastPodEventTime"),
        decision_id=annotations.get(ANNOTATION_DECISION_ID, ""),
        termination_grace_period=doc.duration("spec.terminationGracePeriod", None),
        expire_after=doc.duration("spec.expireAfter", None),
        expire_after_stated=doc.get("spec.expireAfter") is not None,
        labels=_normalized_labels(labels),
        annotations=annotations,
        capacity=doc.resources("status.capacity"),
        allocatable=doc.resources("status.allocatable"),
    )


#: the label Karpenter's Helm chart puts on its Deployment
KARPENTER_NAME_LABEL = "app.kubernetes.io/name"
#: Karpenter's setting of its interruption queue: the environment variable and the flag (both spellings of one
#: setting, ``settings.interruptionQueue`` in its chart)
INTERRUPTION_QUEUE_ENV = "INTERRUPTION_QUEUE"
INTERRUPTION_QUEUE_FLAG = "--interruption-queue"


def _is_karpenter(doc: _Doc) -> bool:
    """Whether an apps/v1 Deployment is Karpenter's controller: its chart's label ``app.kubernetes.io/name:
    karpenter``, or a container whose image is Karpenter's (``.../karpenter/controller...``)."""
    if doc.str_map("metadata.labels").get(KARPENTER_NAME_LABEL) == "karpenter":
        return True
    return any(_is_mapping(c) and "karpenter/controller" in str(c.get("image", ""))
               for c in doc.seq("spec.template.spec.containers"))


def _karpenter_controller(doc: _Doc) -> KarpenterController:
    """Karpenter's Deployment, as far as ebb checks it: the interruption queue one of its containers is given
    (``INTERRUPTION_QUEUE``, from a value or from a ConfigMap or Secret, or ``--interruption-queue``)."""
    queue = ""
    for container in doc.seq("spec.template.spec.containers"):
        if not _is_mapping(container):
            continue
        for env in container.get("env") or ():
            if _is_mapping(env) and env.get("name") == INTERRUPTION_QUEUE_ENV:
                if env.get("value"):
                    queue = str(env["value"])
                elif env.get("valueFrom"):
                    queue = "(set from valueFrom)"
        args = [str(a) for a in (container.get("args") or ()) if a is not None]
        for i, arg in enumerate(args):
            if arg.startswith(INTERRUPTION_QUEUE_FLAG + "="):
                queue = arg.split("=", 1)[1] or queue
            elif arg == INTERRUPTION_QUEUE_FLAG and i + 1 < len(args):
                queue = args[i + 1]
    namespace = str(doc.get("metadata.namespace", "default"))
    return KarpenterController(f"{namespace}/{doc.get('metadata.name')}", queue)


#: policy/v1 PodDisruptionBudget spec.unhealthyPodEvictionPolicy values
UNHEALTHY_POD_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _pdb(doc: _Doc) -> PodDisruptionBudget:
    def int_or_percent(field: str) -> int | str | None:
        value = doc.get(field)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value)
        if (text.endswith("%") and text[:-1].isdigit()) or text.isdigit():
            return text if text.endswith("%") else int(text)
        raise doc.fail(field, f"{value!r} is not an integer or a percentage")

    policy = doc.get("spec.unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        raise doc.fail("spec.unhealthyPodEvictionPolicy",
                       f"{policy!r} is not one of {', '.join(UNHEALTHY_POD_EVICTION_POLICIES)}")
    return PodDisruptionBudget(
        name=str(doc.get("metadata.name")),
        namespace=str(doc.get("metadata.namespace", "default")),
        selector=None if (raw := doc.get("spec.selector")) is None else _selector(doc, "spec.selector", raw),
        min_available=int_or_percent("spec.minAvailable"),
        max_unavailable=int_or_percent("spec.maxUnavailable"),
        always_allow_unhealthy=policy == "AlwaysAllow",
    )


def _volume_claim(doc: _Doc) -> VolumeClaim:
    return VolumeClaim(
        namespace=str(doc.get("metadata.namespace", "default")),
        name=str(doc.get("metadata.name")),
        volume_name=str(doc.get("spec.volumeName") or ""),
        storage_class=str(doc.get("spec.storageClassName") or ""),
        deleting=doc.get("metadata.deletionTimestamp") is not None,
        lost=doc.get("status.phase") == "Lost",
        bind_completed="pv.kubernetes.io/bind-completed" in doc.str_map("metadata.annotations"),
    )


def _zone_labels_terms(labels: Mapping[str, str]) -> tuple[tuple[Requirement, ...], ...] | None:
    """The node affinity of a volume made before volumes had one (an in-tree EBS volume of Kubernetes before 1.12, or
    written by hand): its zone and region labels, as kube-scheduler's ``VolumeZone`` filter reads them (a value may
    list several zones joined by ``__``; the older label names read as current). None when it has neither. Karpenter
    reads only ``spec.nodeAffinity``, and would move such a pod to a zone where it waits Pending."""
    requirements = []
    for key in (LABEL_ZONE, LABEL_REGION):
        older = next((old for old, current in NORMALIZED_LABELS.items() if current == key), None)
        value = labels.get(key) or (labels.get(older) if older else None)
        if value:
            requirements.append(Requirement(key, "In", tuple(sorted(v for v in value.split("__") if v))))
    return (tuple(requirements),) if requirements else None


#: what a PersistentVolume's ``matchFields`` on ``metadata.name`` are read as: a field no node has (no label key holds a
#: colon), as kube-scheduler reads a volume's node affinity against the node's labels only
_VOLUME_NODE_FIELD = "field:metadata.name"


def _persistent_volume(doc: _Doc) -> PersistentVolume:
    """A PersistentVolume: its ``nodeAffinity.required`` terms' ``matchExpressions``, each key under its current
    name (an in-tree EBS volume says ``failure-domain.beta.kubernetes.io/zone``), as Karpenter reads them, and their
    ``matchFields``, as kube-scheduler reads them (Karpenter does not: a difference in docs/decisions.md)."""
    path = "spec.nodeAffinity.required"
    required = doc.get(path)
    terms = None
    if required is not None:
        raw_terms = doc.as_list(doc.as_mapping(required, path).get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
        # a term's matchFields are read, but not as a pod's are: kube-scheduler matches a volume's affinity against a
        # node of labels only (``CheckNodeAffinity``), so ``metadata.name In [n1]`` admits no node, and here it names
        # a field no node has (`_VOLUME_NODE_FIELD`), not the node's name
        terms = tuple(tuple(replace(r, key=_VOLUME_NODE_FIELD) if r.key == FIELD_NODE_NAME else r for r in term)
                      for term in _node_selector_terms(doc, raw_terms, f"{path}.nodeSelectorTerms",
                                                       f"{path}.nodeSelectorTerms"))
    else:
        terms = _zone_labels_terms(doc.str_map("metadata.labels"))
    driver = str(doc.get("spec.csi.driver") or "")
    if not driver and doc.get("spec.awsElasticBlockStore") is not None:
        driver = IN_TREE_DRIVERS["kubernetes.io/aws-ebs"]
    return PersistentVolume(
        name=str(doc.get("metadata.name")),
        node_terms=terms,
        local=doc.get("spec.local") is not None or doc.get("spec.hostPath") is not None,
        deleting=doc.get("metadata.deletionTimestamp") is not None,
        driver=driver,
    )


STORAGE_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _storage_class(doc: _Doc) -> StorageClass:
    """A StorageClass (its fields are at the top level: it has no spec). ``allowedTopologies`` terms are read as
    Karpenter reads them: each ``matchLabelExpressions`` entry as ``key In values``."""
    mode = str(doc.get("volumeBindingMode") or "Immediate")
    if mode not in STORAGE_BINDING_MODES:
        raise doc.fail("volumeBindingMode", f"{mode!r} is not one of {', '.join(STORAGE_BINDING_MODES)}")
    topologies = []
    for i, term in enumerate(doc.seq("allowedTopologies")):
        path = f"allowedTopologies[{i}].matchLabelExpressions"
        expressions = doc.as_list(doc.as_mapping(term, f"allowedTopologies[{i}]").get("matchLabelExpressions"), path)
        raw = [{"key": e.get("key"), "operator": "In", "values": e.get("values")} if _is_mapping(e) else e
               for e in expressions]
        requirements = _node_requirements(doc, path, raw)
        if requirements:
            topologies.append(requirements)
    provisioner = str(doc.get("provisioner") or "")
    return StorageClass(str(doc.get("metadata.name")), mode, tuple(topologies),
                        IN_TREE_DRIVERS.get(provisioner, provisioner))


def _csi_node(doc: _Doc) -> CSINode:
    """A CSINode: each driver's attach limit (``allocatable.count``; a driver without ``allocatable`` has none, one
    whose count is missing has 0, as Karpenter's ``populateVolumeLimits`` reads it)."""
    limits: dict[str, int] = {}
    for i, driver in enumerate(doc.seq("spec.drivers")):
        path = f"spec.drivers[{i}]"
        entry = doc.as_mapping(driver, path)
        if not entry.get("name"):
            raise doc.fail(f"{path}.name", "is required")
        allocatable = entry.get("allocatable")
        if allocatable is None:
            continue
        count = doc.as_mapping(allocatable, f"{path}.allocatable").get("count")
        value = 0 if count is None else _number(doc, count, f"{path}.allocatable.count")
        if value < 0:
            raise doc.fail(f"{path}.allocatable.count", "must not be negative")
        limits[str(entry["name"])] = value
    return CSINode(str(doc.get("metadata.name")), limits)


def _daemonset(doc: _Doc) -> DaemonSet:
    return DaemonSet(
        name=str(doc.get("metadata.name")),
        namespace=str(doc.get("metadata.namespace", "default")),
        spec=_scheduling_spec(doc, "spec.template.spec"),
        labels=doc.str_map("spec.template.metadata.labels"),
    )


#: a pod created at no known time: older than any other
_NEVER = datetime.min.replace(tzinfo=UTC)
_OWNER_KIND = attrgetter("owner_kind")
_DAEMONSET_KIND = "DaemonSet"


def live_daemonsets(daemonsets: tuple[DaemonSet, ...], pods: Iterable[Pod]) -> tuple[DaemonSet, ...]:
    """``daemonsets`` as their pods ask: a DaemonSet with a pod among ``pods`` (controlled by it: its
    ownerReference, not finished) takes the scheduling needs of its newest one (requests, host ports, tolerations,
    ...), but for the template's required node affinity, which the DaemonSet controller replaces in each pod by that
    pod's node, and its nodeSelector, which it copies into each; one without keeps its template's. Karpenter sizes
    the DaemonSets' overhead so (``getDaemonSetPods``: the cluster state keeps the newest pod of each DaemonSet),
    and a pod is what runs: a LimitRange's defaults or a VPA's requests are in it, not in the template. A DaemonSet
    whose pod asks what its template does stays the same object, and so does one made from the same DaemonSet and
    pod spec objects again (`_LIVE`: the simulator knows DaemonSets by identity pass after pass)."""
    if not daemonsets:
        return daemonsets
    newest: dict[tuple[str, str | None], Pod] = {}
    pods = pods if isinstance(pods, list | tuple) else list(pods)
    # the DaemonSets' pods sorted out in C: a few of the thousands a store assembles every pass
    for pod in compress(pods, map(eq, repeat(_DAEMONSET_KIND), map(_OWNER_KIND, pods))):
        if not pod.is_terminal:
            key = (pod.namespace, pod.owner_name)
            known = newest.get(key)
            if known is None or (pod.creation_time or _NEVER) > (known.creation_time or _NEVER):
                newest[key] = pod
    if not newest:
        return daemonsets
    return tuple(ds if (found := newest.get((ds.namespace, ds.name))) is None else _as_pod_asks(ds, found.spec)
                 for ds in daemonsets)


def _placed_by_karpenter(daemonsets: tuple[DaemonSet, ...]) -> tuple[DaemonSet, ...]:
    """``daemonsets`` but those whose pods have Dynamic Resource Allocation claims: Karpenter's scheduler counts no
    overhead for them on a new node nor keeps room for their pods on an existing one (``shouldSkipDaemonPod``, while
    ``IgnoreDRARequests`` is on). Their pods that run still take what they request where they run."""
    if not any(ds.spec.volume_block == DRA_BLOCK for ds in daemonsets):
        return daemonsets
    return tuple(ds for ds in daemonsets if ds.spec.volume_block != DRA_BLOCK)


def _as_pod_asks(ds: DaemonSet, spec: SchedulingSpec) -> DaemonSet:
    """`live_daemonsets`' DaemonSet ``ds`` with the scheduling needs ``spec`` of its newest pod (made once per pair)."""
    hit = _LIVE.get((id(ds), id(spec)))  # snapshots are assembled on two threads (a pass and a validation)
    if hit is not None and hit[0] is ds and hit[1] is spec:
        return hit[2]
    # the template's nodeSelector too: the DaemonSet controller copies it into every pod, so a pod without it is one
    # written by hand, and the template says where the DaemonSet runs
    asks = replace(spec, required_node_terms=ds.spec.required_node_terms, node_selector=ds.spec.node_selector)
    made = ds if asks == ds.spec else replace(ds, spec=asks)
    _LIVE.keep((id(ds), id(spec)), (ds, spec, made))
    return made


#: `_as_pod_asks`' DaemonSets by the ids of the DaemonSet and the pod's spec, kept with both (so the ids stay theirs)
_LIVE: Memo[tuple[int, int], tuple[DaemonSet, SchedulingSpec, DaemonSet]] = Memo(256, forget="oldest")


#: an instance type's ephemeral storage when its catalog entry does not say (Karpenter's AWS default root volume,
#: 20Gi), and its overhead then (1Gi kube-reserved and a 10% nodefs eviction threshold, as Karpenter's AWS provider)
DEFAULT_EPHEMERAL_STORAGE = 20 * 2**30
DEFAULT_EPHEMERAL_STORAGE_OVERHEAD = 2**30 + DEFAULT_EPHEMERAL_STORAGE // 10


def _catalog(doc: _Doc) -> list[InstanceType]:
    out = []
    for i, raw in enumerate(doc.seq("spec.instanceTypes")):
        path = f"spec.instanceTypes[{i}]"
        if not _is_mapping(raw) or not raw.get("name"):
            raise doc.fail(path, "an instance type needs a name")
        sub = _Doc(doc.ref, raw)
        try:
            capacity = sub.resources("capacity")
            overhead = sub.resources("overhead")
        except SnapshotError as exc:
            raise doc.fail(f"{path}.{exc.field}", str(exc).rsplit(": ", 1)[-1]) from exc
        for needed in ("cpu", "memory"):
            if needed not in capacity:
                raise doc.fail(f"{path}.capacity.{needed}", "is required")
        capacity.setdefault("pods", 110)
        if "ephemeral-storage" not in capacity:
            # Karpenter's AWS defaults: a 20Gi root volume, less 1Gi kube-reserved and the kubelet's 10% nodefs
            # eviction threshold; without them every pod that asks for ephemeral storage would fit no new node
            capacity["ephemeral-storage"] = DEFAULT_EPHEMERAL_STORAGE
            overhead.setdefault("ephemeral-storage", DEFAULT_EPHEMERAL_STORAGE_OVERHEAD)
        offerings = []
        for j, o in enumerate(sub.seq("offerings")):
            opath = f"{path}.offerings[{j}]"
            if not _is_mapping(o):
                raise doc.fail(opath, "an offering is a map of zone, price and capacityType (on-demand by default)")
            zone = o.get("zone")
            # a zone is a label value; YAML reads an unquoted number (an AKS cluster outside availability zones: 0)
            # as one, written as it reads
            if isinstance(zone, int) and not isinstance(zone, bool):
                zone = str(zone)
            if not isinstance(zone, str) or not zone:
                raise doc.fail(f"{opath}.zone", "an offering needs a zone (a topology.kubernetes.io/zone value)")
            try:
                price = float(o.get("price"))  # type: ignore[arg-type]
            except (TypeError, ValueError) as exc:
                raise doc.fail(f"{opath}.price", f"{o.get('price')!r} is not a number") from exc
            if not math.isfinite(price):  # NaN would make every sum it enters NaN, and every comparison false
                raise doc.fail(f"{opath}.price", f"{o.get('price')!r} is not a finite number")
            if price < 0:
                raise doc.fail(f"{opath}.price", "must not be negative")
            ct = str(o.get("capacityType", "on-demand"))
            if ct not in ("on-demand", "spot", "reserved"):
                raise doc.fail(f"{opath}.capacityType", f"{ct!r} is not on-demand, spot or reserved")
            offer_labels = o.get("labels") or {}
            if not _is_mapping(offer_labels) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in offer_labels.items()):
                raise doc.fail(f"{opath}.labels", "must be a map of label names to string values")
            offerings.append(Offering(zone, ct, price, bool(o.get("available", True)),
                                      tuple(sorted(offer_labels.items()))))
        if not offerings:
            raise doc.fail(f"{path}.offerings", "needs at least one offering")
        systems = raw.get("operatingSystems")
        if systems is not None and (not isinstance(systems, list) or not systems
                                    or not all(isinstance(s, str) and s for s in systems)):
            raise doc.fail(f"{path}.operatingSystems", "must be a list of operating system names (linux, windows)")
        out.append(InstanceType(str(raw["name"]), capacity, overhead, tuple(offerings), sub.str_map("labels"),
                                tuple(systems or ())))
    return out


def _hold(doc: _Doc) -> Hold:
    scope = str(doc.get("spec.scope", "cluster"))
    if scope not in ("cluster", "nodePool", "node"):
        raise doc.fail("spec.scope", f"{scope!r} is not cluster, nodePool or node")
    target = doc.get("spec.nodePool") if scope == "nodePool" else doc.get("spec.node") if scope == "node" else None
    if scope != "cluster" and not target:
        raise doc.fail(f"spec.{scope}", f"a {scope} hold names its {scope}")
    for field in ("nodePool", "node"):  # as the CRD's validation: a hold names what its scope holds, nothing else
        if field != scope and doc.get(f"spec.{field}") is not None:
            raise doc.fail(f"spec.{field}", f"only a {field} hold names a {field} (this hold's scope is {scope}"
                                            + ("" if doc.get("spec.scope") is not None else ", by default") + ")")
    return Hold(str(doc.get("metadata.name")), scope, str(target) if target else None,
                doc.time("spec.expiresAt"), str(doc.get("spec.reason", "")))


@dataclass(frozen=True, slots=True)
class ParsedObject:
    """One input object turned into its model value: what ``parse_object`` returns and ``assemble`` takes.
    ``kind`` is empty for objects ebb does not use; a catalog's ``value`` is its tuple of instance types;
    ``renamed`` marks a document of a kind ebb no longer defines (an ebb.sh/v1 NodePool or NodeClaim)."""

    kind: str
    ref: str
    value: Any = None
    renamed: bool = False


def parse_object(raw: Mapping[str, Any], index: int = 0, *,
                 previous: tuple[Mapping[str, Any], ParsedObject] | None = None) -> ParsedObject:
    """Parse one object (not a List); raise SnapshotError naming it and the field. ``index`` numbers
    nameless documents in error messages. ``previous`` is an earlier version of the same object, as it was and
    parsed: a Pod whose ``spec`` is that version's but for ``nodeName`` (bound, its status or metadata changed)
    keeps its parsed scheduling needs instead of parsing them again."""
    ref = _ref(raw, index)
    doc = _Doc(ref, raw)
    kind = raw.get("kind")
    api = str(raw.get("apiVersion", ""))
    group = api.split("/", 1)[0] if "/" in api else ""
    if kind is None:
        raise doc.fail("kind", "is required")
    if not isinstance(raw.get("metadata"), Mapping) or not doc.get("metadata.name"):
        raise doc.fail("metadata.name", "is required")
    if kind == "Node":
        return ParsedObject("Node", ref, _node(doc))
    if kind == "Pod":
        return ParsedObject("Pod", ref, _pod(doc, _unchanged_spec(raw, previous)))
    if kind == "NodePool" and group in NODEPOOL_GROUPS:
        return ParsedObject("NodePool", ref, _nodepool(doc, karpenter_crd=group != RENAMED_GROUP),
                            renamed=group == RENAMED_GROUP)
    if kind == "NodeClaim" and group in NODEPOOL_GROUPS:
        return ParsedObject("NodeClaim", ref, _nodeclaim(doc), renamed=group == RENAMED_GROUP)
    if kind == "PodDisruptionBudget":
        return ParsedObject("PodDisruptionBudget", ref, _pdb(doc))
    if kind == "DaemonSet":
        return ParsedObject("DaemonSet", ref, _daemonset(doc))
    if kind == "PersistentVolumeClaim" and not group:
        return ParsedObject("PersistentVolumeClaim", ref, _volume_claim(doc))
    if kind == "PersistentVolume" and not group:
        return ParsedObject("PersistentVolume", ref, _persistent_volume(doc))
    if kind == "StorageClass" and group == "storage.k8s.io":
        return ParsedObject("StorageClass", ref, _storage_class(doc))
    if kind == "CSINode" and group == "storage.k8s.io":
        return ParsedObject("CSINode", ref, _csi_node(doc))
    if kind == "Namespace" and not group:
        return ParsedObject("Namespace", ref, _namespace(doc))
    if kind == "InstanceTypeCatalog" and group == "ebb.sh":
        return ParsedObject("InstanceTypeCatalog", ref, tuple(_catalog(doc)))
    if kind == "Hold" and group == "ebb.sh":
        return ParsedObject("Hold", ref, _hold(doc))
    if kind == "DisruptionPolicy" and group == "ebb.sh":
        return ParsedObject("DisruptionPolicy", ref, _disruption_policy(doc))
    if kind == "Deployment" and group == "apps" and _is_karpenter(doc):
        return ParsedObject("KarpenterController", ref, _karpenter_controller(doc))
    return ParsedObject("", ref)


def parse_catalog(documents: Iterable[Any]) -> tuple[ParsedObject, ...]:
    """The InstanceTypeCatalog objects of ``documents`` (e.g. the bundled catalog), parsed."""
    return tuple(p for p in (parse_object(raw, i) for i, raw in enumerate(flatten(documents)))
                 if p.kind == "InstanceTypeCatalog")


_REF = attrgetter("ref")
_KIND = attrgetter("kind")
_VALUE = attrgetter("value")
_RENAMED = attrgetter("renamed")


def _once_each(parsed: Iterable[ParsedObject]) -> Iterator[ParsedObject]:
    """``parsed`` as it comes, failing at the first object whose ref came before."""
    seen: set[str] = set()
    for item in parsed:
        if item.ref in seen:
            raise SnapshotError(item.ref, "metadata.name", "appears twice in the input")
        seen.add(item.ref)
        yield item


def assemble(parsed: Iterable[ParsedObject],
             fallback_catalog: Iterable[ParsedObject] | Callable[[], Iterable[ParsedObject]] = (), *,
             refs_unique: bool = False) -> Snapshot:
    """The Snapshot of parsed objects. The ``fallback_catalog`` (or a function returning it) is used only
    when no InstanceTypeCatalog is among them; a NodeClaim that says its node is initialized marks it so; a
    NodeClaim being deleted (or whose instance is terminating) marks its node deleting, as Karpenter's state
    does (a deleting NodeClaim is a deleting node: no candidate, no destination, counted against the budget);
    a NodePool with a DisruptionPolicy of its name takes the policy's disruption settings (`governed`); a DaemonSet
    with pods takes what its newest pod asks (`live_daemonsets`).
    ``refs_unique``: the caller knows that no ref comes twice in the list ``parsed`` (a store that counts them), so it
    is not checked again."""
    nodes: list[Node] = []
    pods: list[Pod] = []
    pools: list[NodePool] = []
    claims: list[NodeClaim] = []
    pdbs: list[PodDisruptionBudget] = []
    daemonsets: list[DaemonSet] = []
    holds: list[Hold] = []
    policies: list[DisruptionPolicy] = []
    controllers: list[KarpenterController] = []
    volume_claims: list[VolumeClaim] = []
    volumes: list[PersistentVolume] = []
    classes: list[StorageClass] = []
    csi_nodes: list[CSINode] = []
    namespaces: list[Namespace] = []
    ignored: list[str] = []
    renamed: list[str] = []
    types: dict[str, InstanceType] = {}
    buckets: dict[str, list[Any]] = {"Node": nodes, "Pod": pods, "NodePool": pools, "NodeClaim": claims,
                                     "PodDisruptionBudget": pdbs, "DaemonSet": daemonsets, "Hold": holds,
                                     "DisruptionPolicy": policies, "KarpenterController": controllers,
                                     "PersistentVolumeClaim": volume_claims, "PersistentVolume": volumes,
                                     "StorageClass": classes, "CSINode": csi_nodes, "Namespace": namespaces}
    if isinstance(parsed, list) and (refs_unique or len(set(map(_REF, parsed))) == len(parsed)):
        items: Iterable[ParsedObject] = parsed  # no ref twice, told in C (a store's thousands of objects, every pass)
    else:
        items = _once_each(parsed)  # a stream (``parse_documents``): a ref seen twice fails where it comes again
    # a run of one kind at a time, sorted out in C (a store's objects come in the order of their keys, kind first)
    for kind, grouped in groupby(items, _KIND):
        run = list(grouped)
        renamed.extend(map(_REF, filter(_RENAMED, run)))
        if kind == "InstanceTypeCatalog":
            for item in run:
                for it in item.value:
                    types[it.name] = it
        elif kind:
            buckets[kind].extend(map(_VALUE, run))
        else:
            ignored.extend(map(_REF, run))
    source = "input"
    if not types:
        source = "bundled"
        for item in (fallback_catalog() if callable(fallback_catalog) else fallback_catalog):
            for it in item.value:
                types[it.name] = it
    claims_by_node = {c.node_name: c for c in claims if c.node_name}
    claims_by_provider = {c.provider_id: c for c in claims if c.provider_id}
    initialized_nodes = []
    for as_read in nodes:
        node = as_read
        claim = claim_for(node.name, node.provider_id, claims_by_node, claims_by_provider) if claims else None
        if claim is not None and claim.initialized and node.labels.get(LABEL_INITIALIZED) != "true":
            labels = dict(node.labels)
            labels[LABEL_INITIALIZED] = "true"
            node = replace(node, labels=labels)
        if claim is not None and (claim.deleting or claim.instance_terminating) and not node.deleting:
            node = replace(node, deleting=True)
        if claim is not None and node.labels.get(LABEL_INITIALIZED) != "true":
            node = _claimed_amounts(node, claim)
        initialized_nodes.append(node)
    if source == "input":
        _labelled_by_nodes(types, initialized_nodes)
    if volume_claims or volumes or classes or csi_nodes:  # what pods' volumes ask of a node (ebb.core.volumes)
        volume_pods, volume_nodes = with_volume_topology(pods, volume_claims, volumes, classes,
                                                         nodes=initialized_nodes, csi_nodes=csi_nodes)
        pods, initialized_nodes = list(volume_pods), list(volume_nodes)
    if namespaces:  # what pod affinity terms' namespaceSelectors select (read only when the input has Namespaces)
        pods = _namespaces_resolved(pods, namespaces)
    policy_of = {p.name: p for p in policies}
    effective = tuple(governed(pool, policy_of[pool.name]) if pool.name in policy_of else pool for pool in pools)
    return Snapshot(
        nodes=tuple(initialized_nodes), pods=tuple(pods), nodepools=effective,
        instance_types=tuple(types.values()), nodeclaims=tuple(claims), pdbs=tuple(pdbs),
        daemonsets=_placed_by_karpenter(live_daemonsets(tuple(daemonsets), pods)), holds=tuple(holds),
        catalog_source=source,
        ignored=tuple(ignored), disruption_policies=tuple(policies), renamed=tuple(renamed),
        karpenter=tuple(controllers), volume_claims=tuple(volume_claims), volumes=tuple(volumes),
        storage_classes=tuple(classes), csi_nodes=tuple(csi_nodes), namespaces=tuple(namespaces),
    )


def _claimed_amounts(node: Node, claim: NodeClaim) -> Node:
    """``node``, not initialized, with its NodeClaim's capacity and allocatable where its own say zero or nothing
    (Karpenter's ``StateNode.Capacity`` and ``Allocatable``: a GPU node whose device plugin is not up yet reports no
    GPU, and its NodeClaim's GPU still counts against its NodePool's limits and is room for pods)."""
    capacity = _filled(node.capacity, claim.capacity)
    allocatable = _filled(node.allocatable, claim.allocatable)
    if capacity is node.capacity and allocatable is node.allocatable:
        return node
    return replace(node, capacity=capacity, allocatable=allocatable)


def _filled(amounts: Mapping[str, int], claimed: Mapping[str, int]) -> Mapping[str, int]:
    """``amounts`` with ``claimed``'s where it has zero or none; ``amounts`` itself when nothing is filled."""
    missing = {name: value for name, value in claimed.items() if not amounts.get(name)}
    return amounts if not missing else {**amounts, **missing}


#: the labels of an instance type a node of it tells, for a catalog type that does not give them: without them a new
#: node of the type would be taken for amd64 and linux (`ebb.core.labels`), and an arm64 type offered to amd64 pods
NODE_TOLD_TYPE_LABELS = (LABEL_ARCH, LABEL_OS)
#: the label prefixes of cloud providers' instance type labels (Karpenter's AWS, Azure and KWOK providers', GKE's): a
#: NodePool requirement on one is about the instance type, which the catalog must then label
PROVIDER_LABEL_PREFIXES = ("karpenter.k8s.aws/", "karpenter.azure.com/", "karpenter.kwok.sh/", "cloud.google.com/")


def _labelled_by_nodes(types: dict[str, InstanceType], nodes: Iterable[Node]) -> None:
    """Give each catalog type of ``types`` that lacks an architecture or OS label the one its nodes carry (the first
    node's, in the input's order), in place. What a type's nodes told is kept with the type for as long as it lives
    (`_TOLD`), so a running planner's type stays one object pass after pass, whether its nodes come and go (the
    simulator keeps what it built for a catalog's types by identity)."""
    told: dict[str, dict[str, str]] = {}
    for node in nodes:
        it = types.get(node.instance_type or "")
        if it is None:
            continue
        for key in NODE_TOLD_TYPE_LABELS:
            value = node.labels.get(key)
            if value and key not in it.labels:
                told.setdefault(it.name, {}).setdefault(key, value)
    for name, it in list(types.items()):
        hit = _TOLD.get(id(it))
        known = hit[1] if hit is not None and hit[0] is it else {}
        new = {k: v for k, v in told.get(name, {}).items() if k not in known}
        if not known and not new:
            continue
        if hit is None or hit[0] is not it or new:
            merged = {**known, **new}
            hit = _TOLD.keep(id(it), (it, merged, replace(it, labels={**it.labels, **merged})))
        types[name] = hit[2]


#: `_labelled_by_nodes`' types by the catalog type's id: the catalog type (so its id stays its own), the labels its
#: nodes told, and the type with them
_TOLD: Memo[int, tuple[InstanceType, dict[str, str], InstanceType]] = Memo(4096, forget="oldest")


#: how many ignored documents a warning names before it counts the rest
NAMED_IN_WARNING = 5


def _named(refs: tuple[str, ...]) -> str:
    """The first `NAMED_IN_WARNING` of ``refs``, and how many more."""
    more = len(refs) - NAMED_IN_WARNING
    return ", ".join(refs[:NAMED_IN_WARNING]) + (f", and {more} more" if more > 0 else "")


def input_warnings(snapshot: Snapshot) -> list[str]:
    """What a user should hear about input that parsed but will not be planned as they may think: documents of kinds
    ebb does not read, documents of the ebb.sh/v1 kinds ebb no longer defines, a DisruptionPolicy whose NodePool is
    not in the input, a NodePool without a nodeClassRef, a pod's do-not-disrupt (or do-not-evict) that is neither
    "true", "false" nor a positive duration (ignored, as Karpenter ignores it), nodes of instance types the catalog
    does not list (priced 0), Holds and active pods naming a NodePool or node the input does not hold, and an input
    with no Nodes, Pods or NodePools at all (an empty file, or the wrong ``kubectl get``). Empty when there is
    nothing to say."""
    warnings: list[str] = []
    if snapshot.ignored:
        warnings.append(f"ignored {len(snapshot.ignored)} document(s) of kinds ebb does not read: "
                        f"{_named(snapshot.ignored)}")
    if snapshot.renamed:
        warnings.append(f"read {len(snapshot.renamed)} ebb.sh/v1 NodePool or NodeClaim document(s) as "
                        f"karpenter.sh/v1 (ebb no longer defines these kinds; ebb's own settings, "
                        f"stabilizationWindow and the budget reason Expired, belong in an ebb.sh/v1 "
                        f"DisruptionPolicy): {_named(snapshot.renamed)}")
    pools = {p.name for p in snapshot.nodepools}
    unmanaged = tuple(f"NodePool {p.name}" for p in snapshot.nodepools if not p.managed)
    if unmanaged:
        warnings.append(f"{len(unmanaged)} NodePool(s) have no spec.template.spec.nodeClassRef, which Karpenter's CRD "
                        f"requires: as Karpenter, ebb launches no node in them and disrupts none of their nodes: "
                        f"{_named(unmanaged)}")
    orphans = tuple(f"DisruptionPolicy {p.name}" for p in snapshot.disruption_policies if p.name not in pools)
    if orphans:
        warnings.append(f"{len(orphans)} DisruptionPolicy document(s) name no NodePool of the input and apply to "
                        f"nothing (a DisruptionPolicy is named after the NodePool it is for): {_named(orphans)}")
    ignored_values = tuple(f"pod {pod.key} {annotation}={value!r}" for pod in snapshot.pods
                           for annotation in (ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_DO_NOT_EVICT)
                           for value in (pod.annotations.get(annotation),)
                           if value is not None and value not in ("true", "false") and positive_duration(value) is None)
    if ignored_values:
        warnings.append(f"{len(ignored_values)} do-not-disrupt annotation(s) are neither true nor a positive duration "
                        f"like 30m and are ignored, as Karpenter ignores them: {_named(ignored_values)}")
    if not (snapshot.volume_claims or snapshot.volumes or snapshot.storage_classes or snapshot.csi_nodes):
        unread = tuple(f"pod {p.key}" for p in snapshot.pods if p.claims and not p.is_terminal)
        if unread:
            warnings.append(f"{len(unread)} pod(s) use PersistentVolumeClaims but the input holds no "
                            f"PersistentVolumeClaims, PersistentVolumes, StorageClasses or CSINodes, so where their "
                            f"volumes let them run is not checked: a zonal volume's pod may be moved to another zone "
                            f"(add pvc,pv,storageclass,csinodes to the kubectl get): {_named(unread)}")
    if not snapshot.namespaces:
        unresolved = tuple(f"pod {p.key}" for p in snapshot.pods if not p.is_terminal and _selects_namespaces(p.spec))
        if unresolved:
            warnings.append(f"{len(unresolved)} pod(s) have pod affinity terms with a namespaceSelector but the input "
                            f"holds no Namespaces, so each such selector is read as selecting the pod's own "
                            f"namespace only (and the term the namespaces it lists): a pod its anti-affinity keeps "
                            f"away in another namespace is not seen (add namespaces to the kubectl get): "
                            f"{_named(unresolved)}")
    of_type = {t.name: t for t in snapshot.instance_types}
    unlike = tuple(f"node {n.name} ({n.instance_type}: {key}={n.labels[key]}, the catalog says {told})"
                   for n in snapshot.nodes if (it := of_type.get(n.instance_type or "")) is not None
                   for key in NODE_TOLD_TYPE_LABELS
                   if n.labels.get(key) and (told := it.labels.get(key, NEW_NODE_DEFAULT_LABELS[key])) != n.labels[key]
                   and not (key == LABEL_OS and n.labels[key] in it.operating_systems))
    if unlike:
        warnings.append(f"{len(unlike)} node(s) carry an architecture or OS label their instance type's catalog entry "
                        f"does not: a new node of the type is planned with the catalog's, so pods that select the "
                        f"node's may be given a node they cannot run on (fix the catalog's labels): {_named(unlike)}")
    known_types = set(of_type)
    typed = {k for t in snapshot.instance_types for k in t.labels} | {
        k for t in snapshot.instance_types for o in t.offerings for k, _ in o.labels}
    untyped = tuple(dict.fromkeys(f"NodePool {p.name} ({r.key})" for p in snapshot.nodepools for r in p.requirements
                                  if r.key.startswith(PROVIDER_LABEL_PREFIXES) and r.key not in typed))
    if untyped:
        warnings.append(f"{len(untyped)} NodePool requirement(s) are on a cloud provider's instance type label "
                        f"that no type of the {snapshot.catalog_source} catalog carries: ebb reads such a key as the "
                        f"NodePool's own (any type may launch, labelled with its value), where the provider launches "
                        f"only the types it names, so the types and prices planned may not be those launched (add the "
                        f"label to the catalog's types, docs/catalog.md): {_named(untyped)}")
    unpriced = tuple(f"node {n.name} ({n.instance_type})" for n in snapshot.nodes
                     if n.instance_type and n.instance_type not in known_types)
    if unpriced:
        warnings.append(f"{len(unpriced)} node(s) are of instance types the {snapshot.catalog_source} catalog does "
                        f"not list, so they cost 0 in the plan and no replacement is cheaper (give an "
                        f"InstanceTypeCatalog with your types and prices, docs/catalog.md): {_named(unpriced)}")
    node_names = {n.name for n in snapshot.nodes}
    aimless = tuple(f"Hold {h.name} ({h.scope} {h.target})" for h in snapshot.holds
                    if (h.scope == "nodePool" and h.target not in pools)
                    or (h.scope == "node" and h.target not in node_names))
    if aimless:
        warnings.append(f"{len(aimless)} Hold(s) name a NodePool or Node the input does not hold and pause "
                        f"nothing: {_named(aimless)}")
    elsewhere = tuple(f"pod {p.key} on {p.node_name}" for p in snapshot.pods
                      if p.node_name and p.node_name not in node_names and not p.is_terminal)
    if elsewhere and snapshot.nodes:
        warnings.append(f"{len(elsewhere)} pod(s) are bound to nodes the input does not hold and are left out of "
                        f"the plan (a dump of some nodes only?): {_named(elsewhere)}")
    if not (snapshot.nodes or snapshot.pods or snapshot.nodepools):
        warnings.append("the input holds no Nodes, Pods or NodePools, so there is nothing to plan (kubectl get "
                        "nodes,pods,pdb,daemonsets,nodepools,nodeclaims,pvc,pv,storageclass,csinodes,namespaces -A "
                        "-o yaml makes a complete dump)")
    return warnings


def parse_documents(documents: Iterable[Any],
                    bundled_catalog: Iterable[Any] | Callable[[], Iterable[Any]] | None = None) -> Snapshot:
    """Build a Snapshot from parsed YAML documents; raise SnapshotError naming document and field.
    `documents` may be a generator: each is turned into a model value and dropped. The bundled catalog
    (or a function returning it) is used only when the input has no InstanceTypeCatalog."""
    return assemble((parse_object(raw, index) for index, raw in enumerate(flatten(documents))),
                    _catalog_fallback(bundled_catalog))


def parse_sources(sources: Iterable[tuple[str, Iterable[Any]]],
                  bundled_catalog: Iterable[Any] | Callable[[], Iterable[Any]] | None = None) -> Snapshot:
    """`parse_documents` over several named sources (files): nameless documents are numbered within their own
    source, and a SnapshotError names the source before the document, so a mistake in the second of two files
    is found in that file."""

    def parsed() -> Iterator[ParsedObject]:
        first_in: dict[str, str] = {}  # ref -> the source it came in first: a second one names both
        for source, documents in sources:
            try:
                for index, raw in enumerate(flatten(documents)):
                    item = parse_object(raw, index)
                    known = first_in.get(item.ref)
                    if known is not None:  # (`assemble` would find it too, but not say in which source)
                        where = "" if known == source else f" (first in {known})"
                        raise SnapshotError(item.ref, "metadata.name", f"appears twice in the input{where}")
                    first_in[item.ref] = source
                    yield item
            except SnapshotError as exc:
                raise SnapshotError(f"{source}: {exc.document}", exc.field, exc.message) from exc

    return assemble(parsed(), _catalog_fallback(bundled_catalog))


def _catalog_fallback(bundled_catalog: Iterable[Any] | Callable[[], Iterable[Any]] | None,
                      ) -> Callable[[], tuple[ParsedObject, ...]]:
    """The catalog `assemble` falls back on when the input has none: the bundled one (or what a function returns),
    parsed only then."""

    def fallback() -> tuple[ParsedObject, ...]:
        raw = bundled_catalog() if callable(bundled_catalog) else bundled_catalog
        return parse_catalog(raw or ())

    return fallback
