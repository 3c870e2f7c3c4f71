"""Label matching: node selector requirements, label selectors, and taint tolerations; and from them, which
DaemonSets a NodePool's new node would run.

These are the Kubernetes rules, written once and used by the simulator, the checker and the engine, with
Karpenter's two operators added: ``Gte`` and ``Lte`` compare a label's value as an integer with one bound,
inclusively (Karpenter turns ``Gt N`` into ``Gte N+1`` and ``Lt N`` into ``Lte N-1``, the same sets), and a
label that is missing or not an integer (Go's ``strconv.Atoi``) satisfies none of the four.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from itertools import islice, product

from ebb.core.model import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    NEW_NODE_DEFAULT_LABELS,
    DaemonSet,
    InstanceType,
    LabelSelector,
    NodePool,
    Requirement,
    SchedulingSpec,
    Taint,
    Toleration,
)
from ebb.core.quantity import GO_INT_MAX, GO_INT_MIN, parse_go_int

#: how each integer operator (`ebb.core.model.INTEGER_OPERATORS`) compares a label's value with its bound
INTEGER_COMPARISONS: Mapping[str, Callable[[int, int], bool]] = {
    "Gt": operator.gt, "Lt": operator.lt, "Gte": operator.ge, "Lte": operator.le}


def integer_bound(req: Requirement) -> tuple[Callable[[int, int], bool], int] | None:
    """An integer requirement's comparison and bound, or None when ``req`` is not one or its value is not a
    single integer (then it matches nothing; the parser refuses such input)."""
    compare = INTEGER_COMPARISONS.get(req.operator)
    if compare is None or len(req.values) != 1:
        return None
    bound = parse_go_int(req.values[0])
    return None if bound is None else (compare, bound)


def combined(requirements: Iterable[Requirement]) -> tuple[Requirement, ...]:
    """``requirements`` (a NodePool's) as Karpenter's ``Requirements.Add`` combines them: the requirements on one key
    are one requirement, their intersection; where no value satisfies them all (``Gt 9`` and ``Lt 1``, ``Exists`` and
    ``DoesNotExist``, ``In [a]`` and ``In [b]``, ``Gt`` 2^63-1) that is ``DoesNotExist``, which a node without the label
    meets (``Requirement.Intersection``, ``NewRequirementWithFlexibility``): they are replaced by it, in the place of
    the first. The others are kept as they are: each one met is their intersection met."""
    reqs = tuple(requirements)
    by_key: dict[str, list[Requirement]] = {}
    for r in reqs:
        by_key.setdefault(r.key, []).append(r)
    empty = {key for key, group in by_key.items() if _admits_no_value(group)}
    if not empty:
        return reqs
    out: list[Requirement] = []
    for r in reqs:
        if r.key not in empty:
            out.append(r)
        elif r is by_key[r.key][0]:
            out.append(Requirement(r.key, "DoesNotExist"))
    return tuple(out)


def _bounds(group: Sequence[Requirement]) -> tuple[int, int, bool]:
    """The integer bounds ``group``'s ``Gt``/``Gte``/``Lt``/``Lte`` set together (lowest and highest value allowed,
    both included), and whether any does."""
    lower, upper, bounded = GO_INT_MIN, GO_INT_MAX, False
    for r in group:
        found = integer_bound(r)
        if found is None:
            continue
        bounded = True
        bound = found[1]
        if r.operator == "Gt":
            lower = max(lower, bound + 1)
        elif r.operator == "Gte":
            lower = max(lower, bound)
        elif r.operator == "Lt":
            upper = min(upper, bound - 1)
        else:
            upper = min(upper, bound)
    return lower, upper, bounded


def _within(values: set[str], bounds: tuple[int, int, bool]) -> set[str]:
    """``values`` that are integers within ``bounds`` (`_bounds`), as Karpenter's ``withinBounds`` keeps them in an
    intersection; all of them where no bound is set."""
    lower, upper, bounded = bounds
    if not bounded:
        return values
    return {v for v in values if (i := parse_go_int(v)) is not None and lower <= i <= upper}


def absent_label_admitted(requirements: Iterable[Requirement], key: str) -> bool:
    """Whether a node without the label ``key`` meets ``requirements``' (a NodePool's) on that key taken together, as
    Karpenter's ``Requirements.Compatible`` reads their intersection (``Requirement.Intersection``, ``Operator``):
    the intersection of ``Exists``, ``NotIn``, ``Gt``, ``Gte``, ``Lt`` and ``Lte`` is a complement, the ``NotIn``
    values that are within the bounds (integers, where a bound is set) left in it, and with one or more left it reads
    as ``NotIn``, which a missing label meets: ``Exists`` with ``NotIn [blue]`` or ``Gt 3`` with ``NotIn [5]`` does;
    ``Gt 3`` with ``NotIn [1]`` is ``Exists`` with a bound, which it does not. An ``In`` among them makes a set of
    values, which a missing label never meets; a ``DoesNotExist`` is met by it (``requirement_matches``)."""
    group = [r for r in requirements if r.key == key]
    if len(group) < 2 or any(r.operator in ("In", "DoesNotExist") for r in group):
        return False
    return bool(_within({v for r in group if r.operator == "NotIn" for v in r.values}, _bounds(group)))


def _admits_no_value(group: Sequence[Requirement]) -> bool:
    """Whether no label value satisfies every requirement of ``group`` (all on one key)."""
    if any(r.operator == "DoesNotExist" for r in group):
        return len(group) > 1  # one alone is itself; with others, Karpenter's intersection is it
    bounds = _bounds(group)
    within = [set(r.values) for r in group if r.operator == "In"]
    if within:
        excluded = {v for r in group if r.operator == "NotIn" for v in r.values}
        return not _within(set.intersection(*within) - excluded, bounds)
    lower, upper, bounded = bounds
    return bounded and lower > upper


#: the well-known keys a new node's offering, type, NodePool and name give it: Karpenter makes up no value of them
_NOT_MADE_UP = frozenset({LABEL_INSTANCE_TYPE, LABEL_ZONE, LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_OS, LABEL_ARCH,
                          LABEL_REGION, LABEL_HOSTNAME})
#: the operators that let a NodePool require a key of its own without naming its value: a new node still carries it
_UNNAMED_OPERATORS = frozenset({"Exists", "NotIn", "Gt", "Lt", "Gte", "Lte"})


def made_up_value(requirements: Iterable[Requirement], key: str) -> str | None:
    """The value a new node of a NodePool with ``requirements`` gets of a custom ``key`` they require without naming
    it (``Exists``, ``NotIn``, ``Gt``, ``Lt``, ``Gte``, ``Lte``; no ``In``), as Karpenter makes one up when it launches
    the NodeClaim (``resolveCustomLabelsFromRequirements``: ``Requirement.Any``, an integer from the lower bound, or 0,
    up to the upper bound): the smallest such integer that no ``NotIn`` names, where Karpenter draws one at random
    (a pod that does not select the key is served by any). None when they do not require the key so, name its values
    (``In``), forbid it (``DoesNotExist``), or no integer meets the bounds."""
    lower: int | None = None
    high, unnamed = GO_INT_MAX, False
    excluded: set[str] = set()
    for req in requirements:
        if req.key != key:
            continue
        if req.operator not in _UNNAMED_OPERATORS:
            return None
        unnamed = True
        if req.operator == "NotIn":
            excluded.update(req.values)
        if req.operator in ("Exists", "NotIn"):
            continue
        bounded = integer_bound(req)
        if bounded is None:
            return None
        bound = bounded[1]
        if req.operator in ("Gt", "Gte"):
            least = bound + 1 if req.operator == "Gt" else bound
            lower = least if lower is None else max(lower, least)
        else:
            high = min(high, bound - 1 if req.operator == "Lt" else bound)
    if not unnamed:
        return None
    value = 0 if lower is None else lower
    while value <= high and str(value) in excluded:
        value += 1
    return str(value) if value <= high else None


def made_up_labels(pool: NodePool, skip: Container[str] = ()) -> dict[str, str]:
    """The labels a new node of ``pool`` gets made up (`made_up_value`) for the keys its requirements require without
    naming a value, but for those in ``skip`` (a key an instance type or an offering labels its nodes with) and those
    the NodePool's template labels."""
    out: dict[str, str] = {}
    for req in pool.requirements:
        key = req.key
        if key in out or key in skip or key in pool.labels or key in _NOT_MADE_UP:
            continue
        value = made_up_value(pool.requirements, key)
        if value is not None:
            out[key] = value
    return out


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    """Whether concrete labels satisfy one requirement (Kubernetes NodeSelectorRequirement semantics, and
    Karpenter's ``Gte``/``Lte``)."""
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in INTEGER_COMPARISONS:
        bounded = integer_bound(req)
        have = parse_go_int(value) if value is not None else None
        if bounded is None or have is None:
            return False
        compare, bound = bounded
        return compare(have, bound)
    return False


def requirements_match(reqs: Iterable[Requirement], labels: Mapping[str, str]) -> bool:
    return all(requirement_matches(r, labels) for r in reqs)


def terms_match(terms: tuple[tuple[Requirement, ...], ...] | None, labels: Mapping[str, str]) -> bool:
    """Required node affinity: an OR of terms, each an AND of requirements. None means no constraint."""
    if terms is None:
        return True
    return any(requirements_match(term, labels) for term in terms)


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    return requirements_match(selector.match_expressions, labels)


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for tol in tolerations:
        if tol.effect and tol.effect != taint.effect:
            continue
        if not tol.key:
            if tol.operator == "Exists":
                return True
            continue
        if tol.key != taint.key:
            continue
        operator_ = tol.operator
        if operator_ == "Exists" or (operator_ in ("Equal", "") and tol.value == taint.value):
            return True
        if operator_ in ("Gt", "Lt"):  # as Karpenter asks (``ToleratesTaint`` with comparison operators on)
            bound, value = _decimal_integer(tol.value), _decimal_integer(taint.value)
            if bound is not None and value is not None and (value > bound if operator_ == "Gt" else value < bound):
                return True
    return False


#: a decimal integer as Kubernetes' ``content.IsDecimalInteger`` accepts one: no sign but ``-``, no leading zero
_DECIMAL_INTEGER = re.compile(r"0|-?[1-9][0-9]*")


def _decimal_integer(text: str) -> int | None:
    """The int64 ``text`` writes, as a ``Gt``/``Lt`` toleration and its taint are read (``compareNumericValues``),
    or None: then the toleration tolerates nothing."""
    if not _DECIMAL_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if GO_INT_MIN <= value <= GO_INT_MAX else None


def blocking_taints(tolerations: Iterable[Toleration], taints: Iterable[Taint], *,
                    prefer_no_schedule: bool = False) -> list[Taint]:
    """The taints that keep a pod off a node: NoSchedule and NoExecute ones it does not tolerate, and with
    ``prefer_no_schedule`` PreferNoSchedule ones too (Karpenter's scheduler, `Taints.Tolerates`, checks every taint;
    kube-scheduler only the first two)."""
    tols = tuple(tolerations)
    effects = ("NoSchedule", "NoExecute", "PreferNoSchedule") if prefer_no_schedule else ("NoSchedule", "NoExecute")
    return [t for t in taints if t.effect in effects and not tolerates(tols, t)]


#: at most this many combinations of the values of a NodePool's custom `In` requirements are tried per offering
_CUSTOM_COMBINATIONS = 16


def daemonset_runs_on_type(ds: DaemonSet, pool: NodePool, itype: InstanceType) -> bool:
    """Whether a DaemonSet's pod would run on a new node of NodePool ``pool`` and instance type ``itype``, as Karpenter
    counts a DaemonSet's overhead per instance type (``buildDaemonOverheadGroups``): it tolerates the NodePool's taints,
    and some offering of the type the NodePool allows has labels its nodeSelector and required node affinity admit (a
    node of the NodePool's template labels, the type's, the offering's zone and capacity type, and a value of each
    custom requirement `In`). A selector on a label such a node would not have (a custom key the NodePool does not
    define, another zone, another architecture) keeps it off, so it is not counted."""
    if blocking_taints(ds.spec.tolerations, pool.taints):
        return False
    base = {**NEW_NODE_DEFAULT_LABELS, **itype.labels, LABEL_OS: itype.os_under(pool.requirements),
            **made_up_labels(pool, itype.labels), **pool.labels, **pool.template_labels,
            LABEL_INSTANCE_TYPE: itype.name}
    several = [r for r in pool.requirements if r.operator == "In" and r.values and r.key not in base
               and r.key not in (LABEL_ZONE, LABEL_CAPACITY_TYPE)]
    choices = list(islice(product(*(r.values for r in several)), _CUSTOM_COMBINATIONS))
    for offering in itype.offerings:
        if not offering.available:
            continue
        for chosen in choices:
            labels = {**base, **{r.key: v for r, v in zip(several, chosen, strict=True)}, **dict(offering.labels),
                      LABEL_ZONE: offering.zone, LABEL_CAPACITY_TYPE: offering.capacity_type}
            if requirements_match(pool.requirements, labels) and daemonset_runs_on_node(ds, labels, ()):
                return True
    return False


def node_affinity_admits(spec: SchedulingSpec, labels: Mapping[str, str]) -> bool:
    """Whether a pod's nodeSelector and required node affinity admit a node with these labels."""
    return all(labels.get(k) == v for k, v in spec.node_selector.items()) and terms_match(spec.required_node_terms,
                                                                                            labels)


def daemonset_runs_on_node(ds: DaemonSet, labels: Mapping[str, str], taints: Iterable[Taint]) -> bool:
    """Whether a DaemonSet's pod would run on an existing node with these labels and taints: it tolerates the node's
    NoSchedule and NoExecute taints and its nodeSelector and required node affinity admit the labels (Karpenter's
    ``getCompatibleDaemonPods`` for an existing node)."""
    return not blocking_taints(ds.spec.tolerations, taints) and node_affinity_admits(ds.spec, labels)


def daemonsets_on_type(daemonsets: Iterable[DaemonSet], pool: NodePool, itype: InstanceType) -> list[DaemonSet]:
    """The DaemonSets that would run on a new node of NodePool ``pool`` and instance type ``itype``
    (`daemonset_runs_on_type`), in their order."""
    return [ds for ds in daemonsets if daemonset_runs_on_type(ds, pool, itype)]


def summed_requests(daemonsets: Iterable[DaemonSet]) -> dict[str, int]:
    """What the pods of ``daemonsets`` request, summed per resource."""
    total: dict[str, int] = {}
    for ds in daemonsets:
        for name, amount in ds.spec.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


def daemonset_requests(daemonsets: Iterable[DaemonSet], pool: NodePool, itype: InstanceType) -> dict[str, int]:
    """What the DaemonSets that would run on a new node of NodePool ``pool`` and instance type ``itype`` request
    (`daemonset_runs_on_type`), summed per resource: the room a launch loses to them before any other pod arrives."""
    return summed_requests(daemonsets_on_type(daemonsets, pool, itype))
