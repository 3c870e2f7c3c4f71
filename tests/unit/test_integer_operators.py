"""The integer requirement operators: Kubernetes' Gt and Lt and Karpenter's Gte and Lte (``karpenter.sh/v1`` since
Karpenter v1.10), wherever a requirement is read and evaluated.

Karpenter v1.14.1's rules (``pkg/scheduling/requirement.go``, ``pkg/apis/v1/nodepool.go``): Gte and Lte compare the
label's value as an integer with one bound, inclusively (Gt N is Gte N+1, Lt N is Lte N-1); a label that is missing
or that Go's ``strconv.Atoi`` does not read satisfies none of them (``withinBounds``); the CRD accepts exactly one
value, an integer of 0 or more. Drift follows from that: a node whose label no longer satisfies a NodePool's Gte or
Lte requirement has drifted (``areRequirementsDrifted``).
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from ebb.core.labels import requirement_matches
from ebb.core.launch import nodeclaim_object
from ebb.core.methods.drift import drifted_nodes
from ebb.core.model import Requirement
from ebb.core.simulator.labeltable import LabelTable
from ebb.core.simulator.scheduler import Scheduler
from ebb.core.snapshot import SnapshotError
from tests.kit.builders import (
    NOW,
    TYPES,
    ago,
    labelled_catalog,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)

CPU = "karpenter.k8s.aws/instance-cpu"
CT = "karpenter.sh/capacity-type"
ON_DEMAND = {"key": CT, "operator": "In", "values": ["on-demand"]}


def _req(key: str, operator: str, *values: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# -- the rule: one requirement against one label ------------------------------------------------------------------

# (operator, bound, the label's value or None when missing, satisfied)
MATCHES: list[tuple[str, str, str | None, bool]] = [
    ("Gte", "4", "8", True),
    ("Gte", "4", "4", True),  # inclusive
    ("Gte", "4", "3", False),
    ("Gte", "0", "0", True),
    ("Lte", "4", "2", True),
    ("Lte", "4", "4", True),  # inclusive
    ("Lte", "4", "5", False),
    ("Lte", "0", "-3", True),  # a label may be negative; only the bound may not
    ("Gte", "4", None, False),  # missing: no value to compare
    ("Lte", "4", None, False),
    ("Gte", "4", "large", False),  # not an integer
    ("Lte", "4", "large", False),
    ("Gte", "7", "007", True),  # strconv.Atoi reads leading zeros
    ("Gte", "5", "+5", True),  # and a sign
    ("Lte", "9000", "5_000", False),  # not underscores, which Python's int would read
    ("Lte", "9", " 5", False),  # nor spaces
    ("Gte", "0", "9223372036854775808", False),  # past int64: Atoi fails
    ("Gte", "0", "9223372036854775807", True),
    ("Gt", "4", "4", False),  # the strict pair, unchanged
    ("Gt", "4", "5", True),
    ("Lt", "4", "4", False),
    ("Lt", "4", "3", True),
    ("Gt", "4", "5_000", False),
]


@pytest.mark.parametrize(("operator", "bound", "value", "satisfied"), MATCHES,
                         ids=[f"{o}-{b}-{v}" for o, b, v, _ in MATCHES])
def test_a_label_satisfies_an_integer_requirement(operator: str, bound: str, value: str | None,
                                                  satisfied: bool) -> None:
    req = Requirement("cores", operator, (bound,))
    labels = {} if value is None else {"cores": value}
    assert requirement_matches(req, labels) is satisfied
    # the simulator's vectorised table says the same, for this label set among others
    table = LabelTable([{"cores": "6"}, labels, {}])
    assert bool(table.requirement(req)[1]) is satisfied


@pytest.mark.parametrize("bound", [-2, 0, 1, 4, 31])
def test_gt_and_lt_are_gte_and_lte_one_step_in(bound: int) -> None:
    """Karpenter canonicalises Gt N to Gte N+1 and Lt N to Lte N-1: the same label sets satisfy each pair."""
    values = [str(v) for v in range(bound - 3, bound + 4)] + ["x", ""]
    for value in values:
        labels = {"cores": value}
        assert requirement_matches(Requirement("cores", "Gt", (str(bound),)), labels) == \
            requirement_matches(Requirement("cores", "Gte", (str(bound + 1),)), labels)
        assert requirement_matches(Requirement("cores", "Lt", (str(bound),)), labels) == \
            requirement_matches(Requirement("cores", "Lte", (str(bound - 1),)), labels)


def test_the_label_table_agrees_with_the_rule_on_every_object() -> None:
    label_sets = [{"cores": v} for v in ("0", "1", "2", "4", "8", "16", "-1", "x", "03")] + [{}, {"other": "4"}]
    table = LabelTable(label_sets)
    for operator in ("Gt", "Lt", "Gte", "Lte"):
        for bound in ("0", "2", "4", "16"):
            req = Requirement("cores", operator, (bound,))
            assert list(table.requirement(req)) == [requirement_matches(req, labels) for labels in label_sets]


# -- parsing: where requirements are read, and the CRD's rule on the values -----------------------------------------

# (values, the words of the error, or None when they are valid)
VALUES: list[tuple[list[Any], str | None]] = [
    (["4"], None),
    (["0"], None),
    ([16], None),  # an unquoted YAML integer, read as its text
    (["+4"], None),  # Go's Atoi (and CEL's int) read a sign
    ([], "takes exactly one integer"),
    (["1", "2"], "takes exactly one integer"),
    (["a"], "takes exactly one integer"),
    (["4.5"], "takes exactly one integer"),
    (["-1"], "0 or more"),  # Karpenter's CRD: "a single positive integer value"
]


@pytest.mark.parametrize("operator", ["Gte", "Lte"])
@pytest.mark.parametrize(("values", "error"), VALUES, ids=[str(v) for v, _ in VALUES])
def test_a_nodepool_requirement_with_gte_or_lte_is_read_or_refused(operator: str, values: list[Any],
                                                                   error: str | None) -> None:
    doc = nodepool(requirements=[ON_DEMAND, _req(CPU, operator, *values)])
    if error is None:
        pool = snapshot(doc).nodepools[0]
        assert pool.requirements[1] == Requirement(CPU, operator, tuple(str(v) for v in values))
        return
    with pytest.raises(SnapshotError) as caught:
        snapshot(doc)
    assert caught.value.document == "NodePool default"
    assert caught.value.field == "spec.template.spec.requirements[1].values"
    assert error in caught.value.message


@pytest.mark.parametrize("operator", ["Gte", "Lte"])
def test_gte_and_lte_are_read_in_node_affinity_and_selectors_too(operator: str) -> None:
    """Every requirement goes through one reader; a pod's node affinity with Gte is evaluated like a NodePool's."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [_req("cores", operator, "4")]}]}}}
    snap = snapshot(nodepool(), node("a"), pod("web", "a", affinity=affinity))
    (term,) = snap.pods[0].spec.required_node_terms or ()
    assert term == (Requirement("cores", operator, ("4",)),)


# -- drift: a node whose label no longer satisfies a Gte or Lte requirement -----------------------------------------

# (the NodePool's requirement on the instance's cpu count, the node's label or None, drifted)
DRIFT: list[tuple[dict[str, Any], str | None, bool]] = [
    (_req(CPU, "Gte", "4"), "4", False),
    (_req(CPU, "Gte", "4"), "8", False),
    (_req(CPU, "Gte", "4"), "2", True),
    (_req(CPU, "Gte", "4"), None, True),  # Karpenter: the label has no known value (Compatible fails)
    (_req(CPU, "Lte", "4"), "4", False),
    (_req(CPU, "Lte", "4"), "8", True),
    (_req(CPU, "Lte", "4"), None, True),
    (_req(CPU, "Gte", "0"), "0", False),
]


@pytest.mark.parametrize(("requirement", "label", "drifted"), DRIFT,
                         ids=[f"{r['operator']}{r['values'][0]}-{label}" for r, label, _ in DRIFT])
def test_a_node_whose_label_no_longer_satisfies_gte_or_lte_has_drifted(requirement: dict[str, Any],
                                                                       label: str | None, drifted: bool) -> None:
    labels = {} if label is None else {CPU: label}
    view = ClusterView.build(snapshot(nodepool(requirements=[ON_DEMAND, requirement]), node("a", labels=labels),
                                      nodeclaim("claim-a", "a"), pod("web", "a")), NOW)
    why = drifted_nodes(view).get("a")
    assert (why is not None) is drifted
    if drifted and label is None:
        assert why == (f"drifted: it has no {CPU} label, which NodePool default's requirement "
                       f"{CPU} {requirement['operator']} {requirement['values']} needs")
    elif drifted:
        assert why == (f"drifted: its {CPU}={label} no longer satisfies NodePool default's requirement "
                       f"{CPU} {requirement['operator']} {requirement['values']}")


def test_a_drifted_node_is_replaced_by_one_that_satisfies_the_requirement() -> None:
    out = plan_dict(nodepool(requirements=[ON_DEMAND, _req(CPU, "Gte", "4")]), labelled_catalog(),
                    node("a", labels={CPU: "2"}), pod("web", "a", cpu="500m"))
    (command,) = out["commands"]
    assert (command["method"], command["nodes"], command["action"]) == ("drift", ["a"], "replace")
    (replacement,) = command["replacements"]
    assert replacement["instanceTypes"]
    assert all(int(TYPES[t][0]) >= 4 for t in replacement["instanceTypes"]), replacement


# -- launches: the offerings a NodePool's Gte or Lte requirement leaves ---------------------------------------------

# (requirement, which catalog types (name -> cpu count) the NodePool may launch)
OFFERINGS: list[tuple[dict[str, Any], Any]] = [
    (_req(CPU, "Gte", "4"), lambda cpu: cpu >= 4),
    (_req(CPU, "Gte", "8"), lambda cpu: cpu >= 8),
    (_req(CPU, "Lte", "2"), lambda cpu: cpu <= 2),
    (_req(CPU, "Lte", "4"), lambda cpu: cpu <= 4),
    (_req(CPU, "Gte", "16"), lambda cpu: cpu >= 16),  # none
    (_req(CPU, "Gt", "2"), lambda cpu: cpu > 2),
]


@pytest.mark.parametrize(("requirement", "allowed"), OFFERINGS,
                         ids=[f"{r['operator']}{r['values'][0]}" for r, _ in OFFERINGS])
def test_a_nodepool_launches_only_the_types_its_integer_requirement_allows(requirement: dict[str, Any],
                                                                           allowed: Any) -> None:
    snap = snapshot(nodepool(requirements=[ON_DEMAND, requirement]), labelled_catalog())
    (pool,) = Scheduler(snap).pools
    expected = {name for name, spec in TYPES.items() if allowed(int(spec[0]))}
    assert {it.name for it in pool.types} == expected


@pytest.mark.parametrize(("requirement", "allowed"), OFFERINGS[:4],
                         ids=[f"{r['operator']}{r['values'][0]}" for r, _ in OFFERINGS[:4]])
def test_an_expired_nodes_replacement_keeps_to_the_requirement(requirement: dict[str, Any], allowed: Any) -> None:
    """The replacement's options (cheapest first) are the allowed types that fit the pods."""
    out = plan_dict(nodepool(requirements=[ON_DEMAND, requirement], expire_after="24h"), labelled_catalog(),
                    node("a", itype="m5.large", labels={CPU: "2"}, created=ago(days=2)),
                    pod("web", "a", cpu="500m", memory="1Gi"))
    (command,) = out["commands"]
    assert command["method"] in ("expiration", "drift")
    (replacement,) = command["replacements"]
    types = replacement["instanceTypes"]
    assert types and all(allowed(int(TYPES[t][0])) for t in types), types
    cheapest = min((name for name, spec in TYPES.items() if allowed(int(spec[0]))), key=lambda n: TYPES[n][3])
    assert types[0] == cheapest


def test_a_replacement_nodeclaim_keeps_the_nodepools_gte_and_lte_requirements() -> None:
    """In ``karpenter`` mode the replacement is a NodeClaim written as Karpenter's provisioner writes one: the
    template's requirements on other keys than the pinned instance type, capacity type and zone are kept, so
    Karpenter launches within the same bounds the simulation chose the options by."""
    bounds = [_req(CPU, "Gte", "4"), _req(CPU, "Lte", "8")]
    pool = nodepool(requirements=[ON_DEMAND, *bounds])
    claim = nodeclaim_object("default-abc", nodepool=pool, instance_types=("c5.xlarge", "m5.2xlarge"),
                             capacity_type="on-demand", zones=("us-east-1a",), decision_id="dec-1")
    kept = [r for r in claim["spec"]["requirements"] if r["key"] == CPU]
    assert kept == bounds


# -- requirements on one key, combined as Karpenter's Requirements.Add combines them --------------------------------

GEN = "example.com/gen"

# (case, the NodePool's requirements on GEN, node a's GEN label (None: none), whether a has drifted)
COMBINED = [
    ("Gt 9 and Lt 1 admit no value: DoesNotExist, met by a node without the label", [("Gt", "9"), ("Lt", "1")],
     None, False),
    ("Gt 9 and Lt 1: a node with the label has drifted", [("Gt", "9"), ("Lt", "1")], "5", True),
    ("Exists and DoesNotExist: DoesNotExist", [("Exists", None), ("DoesNotExist", None)], None, False),
    ("Exists and DoesNotExist: a node with the label has drifted", [("Exists", None), ("DoesNotExist", None)], "1",
     True),
    ("Gt 2^63-1 admits no integer: DoesNotExist", [("Gt", "9223372036854775807")], None, False),
    ("Gt 2^63-1: a node with the label has drifted", [("Gt", "9223372036854775807")], "5", True),
    ("In [a] and In [b]: DoesNotExist", [("In", "a"), ("In", "b")], None, False),
    ("In [a] and In [b]: a node labelled a has drifted", [("In", "a"), ("In", "b")], "a", True),
    ("Gt 1 and Lt 9 admit 5: kept as they are", [("Gt", "1"), ("Lt", "9")], "5", False),
    ("Gt 1 and Lt 9: a node without the label has drifted", [("Gt", "1"), ("Lt", "9")], None, True),
    # a complement with a value left in it reads as NotIn (Operator: Len() < MaxInt64), which Compatible lets a
    # missing label meet; with none left it is Exists (bounded or not), which it does not
    ("Exists and NotIn [blue]: NotIn, met by a node without the label", [("Exists", None), ("NotIn", "blue")], None,
     False),
    ("Exists and NotIn [blue]: a node labelled blue has drifted", [("Exists", None), ("NotIn", "blue")], "blue", True),
    ("Gt 3 and NotIn [5]: NotIn, met by a node without the label", [("Gt", "3"), ("NotIn", "5")], None, False),
    ("Lt 10 and NotIn [5]: NotIn, met by a node without the label", [("Lt", "10"), ("NotIn", "5")], None, False),
    ("Gt 3 and NotIn [1]: 1 is out of bounds, Exists: a node without the label has drifted",
     [("Gt", "3"), ("NotIn", "1")], None, True),
    ("Gt 3 and NotIn [blue]: not an integer, out of bounds: a node without the label has drifted",
     [("Gt", "3"), ("NotIn", "blue")], None, True),
    ("In [a, b] and NotIn [a]: In [b], a node without the label has drifted", [("In", "b"), ("NotIn", "a")], None,
     True),
]


@pytest.mark.parametrize(("requirements", "label", "drifted"), [c[1:] for c in COMBINED], ids=[c[0] for c in COMBINED])
def test_requirements_on_one_key_are_combined_before_drift_is_judged(
        requirements: list[tuple[str, str | None]], label: str | None, drifted: bool) -> None:
    """requirement.go ``Intersection`` (requirement_test.go: Gt 9 ∩ Lt 1 and Exists ∩ DoesNotExist are DoesNotExist;
    Gt of the largest int64 is DoesNotExist) and ``Compatible``, which admits a node without the label under
    DoesNotExist (``areRequirementsDrifted``): ebb judged each requirement alone, so every node of such a NodePool
    had drifted."""
    reqs = [ON_DEMAND, *({"key": GEN, "operator": op, **({"values": [v]} if v is not None else {})}
                         for op, v in requirements)]
    labels = {} if label is None else {GEN: label}
    view = ClusterView.build(snapshot(nodepool(requirements=reqs), node("a", labels=labels), pod("web", "a")), NOW)
    assert ("a" in drifted_nodes(view)) is drifted, drifted_nodes(view)


def test_a_nodepool_whose_requirements_on_one_key_admit_no_value_launches_nodes_without_the_label() -> None:
    """Karpenter launches such a NodePool's nodes without the label (its combined requirement is DoesNotExist); ebb
    found no instance type for it, so its oversized node was never replaced."""
    reqs = [ON_DEMAND, {"key": GEN, "operator": "Gt", "values": ["9"]}, {"key": GEN, "operator": "Lt", "values": ["1"]}]
    out = plan_dict(nodepool(requirements=reqs), node("a", itype="m5.2xlarge"), pod("web", "a", cpu="500m"))
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [
        ("single-node-consolidation", "replace", ["a"])]
