"""ebb.sh/v1 DisruptionPolicy, the disruption taints and the karpenter provider's NodeClaim rule (ebb.core).

- A DisruptionPolicy is parsed into frozen values, or refused with a SnapshotError naming it and the field.
- A NodePool's effective disruption settings are its DisruptionPolicy's when it has one (recorded as
  ``policy_kind``), its own spec.disruption otherwise; a policy without its NodePool is a warning.
- Explanations that quote a setting name where it comes from: ``DisruptionPolicy X`` or ``NodePool X``.
- ebb.sh/v1 NodePool and NodeClaim documents (kinds ebb no longer defines) are read as Karpenter's, with a
  warning.
- ``karpenter.sh/disrupted`` and ``ebb.sh/disrupted`` both mean "being disrupted": no candidate, no
  destination, counted against the budget.
- With ``require_nodeclaim`` a node without a NodeClaim is not a candidate (``Cause.NO_NODECLAIM``).
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.causes import Cause
from ebb.core.cluster import ClusterView
from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.model import (
    DISRUPTION_TAINTS,
    POLICY_FROM_DISRUPTION_POLICY,
    POLICY_FROM_NODEPOOL,
    TAINT_DISRUPTED,
    TAINT_EBB_DISRUPTED,
    Budget,
    DisruptionPolicy,
)
from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents
from ebb.core.validation import validate
from tests.kit.builders import (
    NOW,
    ago,
    blocked_of,
    budget_of,
    catalog,
    disrupted,
    disruption_policy,
    node,
    nodeclaim,
    nodepool,
    plan,
    plan_dict,
    pod,
    snapshot,
)

# Karpenter's own voluntary disruption switched off, as the NodePool next to ebb carries it
KARPENTER_OFF: dict[str, Any] = {"budgets": [{"nodes": "0"}], "expire_after": "Never"}

# -- parsing ---------------------------------------------------------------------------------------------

PARSED: list[tuple[str, dict[str, Any], DisruptionPolicy]] = [
    ("empty spec: the defaults", {}, DisruptionPolicy("default")),
    ("every field", {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m", "expireAfter": "720h",
                     "stabilizationWindow": "10m",
                     "budgets": [{"nodes": "20%", "reasons": ["Empty", "Expired"]},
                                 {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]},
     DisruptionPolicy("default", "WhenEmpty", 300.0, 2_592_000.0,
                      (Budget("20%", reasons=("Empty", "Expired")), Budget("0", "0 9 * * mon-fri", "8h")), 600.0)),
    ("Never", {"consolidateAfter": "Never", "expireAfter": "Never"},
     DisruptionPolicy("default", consolidate_after=None, expire_after=None)),
    ("no budgets: one of 10%", {"budgets": None}, DisruptionPolicy("default", budgets=(Budget("10%"),))),
    ("minimumSavingPerEvictedPod, dollars per hour", {"minimumSavingPerEvictedPod": 0.01},
     DisruptionPolicy("default", minimum_saving_per_evicted_pod=0.01)),
    ("minimumSavingPerEvictedPod quoted, as a decimal may be", {"minimumSavingPerEvictedPod": "0.025"},
     DisruptionPolicy("default", minimum_saving_per_evicted_pod=0.025)),
    ("minimumSavingPerEvictedPod 0: any saving, Karpenter's rule", {"minimumSavingPerEvictedPod": 0},
     DisruptionPolicy("default", minimum_saving_per_evicted_pod=0.0)),
    ("a bad budget is kept as written (it fails closed when judged)", {"budgets": [{"nodes": "lots"}]},
     DisruptionPolicy("default", budgets=(Budget("lots"),))),
]


@pytest.mark.parametrize(("case", "spec", "expected"), PARSED, ids=[c[0] for c in PARSED])
def test_a_disruption_policy_is_parsed(case: str, spec: dict[str, Any], expected: DisruptionPolicy) -> None:
    snap = snapshot(nodepool(), disruption_policy(**spec))
    assert snap.disruption_policies == (expected,)


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"consolidationPolicy": "WhenBored"}, "spec.consolidationPolicy", "is not WhenEmptyOrUnderutilized"),
    ({"consolidateAfter": "soon"}, "spec.consolidateAfter", "soon"),
    ({"stabilizationWindow": "-5m"}, "spec.stabilizationWindow", "-5m"),
    ({"stabilizationWindow": "Never"}, "spec.stabilizationWindow", "'Never' is not a window"),  # the CRD refuses it
    ({"demandWindow": "Never"}, "spec.demandWindow", "'Never' is not a window"),
    ({"expireAfter": "3000000h"}, "spec.expireAfter", "longer than Go's longest duration"),
    ({"expireAfter": float("nan")}, "spec.expireAfter", "nan"),
    ({"budgets": "all"}, "spec.budgets", "must be a list"),
    ({"budgets": ["1"]}, "spec.budgets[0]", "must be a mapping"),
    ({"minimumPriceImprovementPercent": 101}, "spec.minimumPriceImprovementPercent", "whole percentage"),
    ({"minimumPriceImprovementPercent": -1}, "spec.minimumPriceImprovementPercent", "-1"),
    ({"minimumPriceImprovementPercent": "20%"}, "spec.minimumPriceImprovementPercent", "'20%'"),
    ({"minimumPriceImprovementPercent": 12.5}, "spec.minimumPriceImprovementPercent", "12.5"),
    ({"minimumPriceImprovementPercent": True}, "spec.minimumPriceImprovementPercent", "True"),
    ({"minimumSavingPerEvictedPod": -0.01}, "spec.minimumSavingPerEvictedPod", "dollars per hour from 0"),
    ({"minimumSavingPerEvictedPod": "cheap"}, "spec.minimumSavingPerEvictedPod", "'cheap'"),
    ({"minimumSavingPerEvictedPod": True}, "spec.minimumSavingPerEvictedPod", "True"),
    ({"minimumSavingPerEvictedPod": 1001}, "spec.minimumSavingPerEvictedPod", "1001"),
    ({"minimumSavingPerEvictedPod": float("inf")}, "spec.minimumSavingPerEvictedPod", "inf"),
    ({"minimumSavingPerEvictedPod": "nan"}, "spec.minimumSavingPerEvictedPod", "'nan'"),
    ({"minimumSavingPerEvictedPod": [0.01]}, "spec.minimumSavingPerEvictedPod", "[0.01]"),
]


@pytest.mark.parametrize(("spec", "field", "words"), REFUSED, ids=[c[1] + ":" + str(c[0]) for c in REFUSED])
def test_a_bad_value_names_the_policy_and_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        snapshot(nodepool(), disruption_policy(**spec))
    assert caught.value.document == "DisruptionPolicy default"
    assert caught.value.field == field
    assert words in str(caught.value)


def test_a_policy_of_another_group_is_not_read() -> None:
    doc = disruption_policy(consolidateAfter="1h")
    doc["apiVersion"] = "example.com/v1"
    snap = snapshot(nodepool(), doc)
    assert snap.disruption_policies == ()
    assert snap.nodepools[0].policy_kind == POLICY_FROM_NODEPOOL
    assert snap.ignored == ("DisruptionPolicy default",)


def test_two_policies_of_one_name_are_refused() -> None:
    with pytest.raises(SnapshotError, match="appears twice"):
        snapshot(nodepool(), disruption_policy(), disruption_policy(consolidateAfter="1h"))


# -- effective settings ----------------------------------------------------------------------------------

# (NodePool's own block, the policy's spec or None, the effective (policy_kind, consolidation_policy,
#  consolidate_after, expire_after, budgets, stabilization_window))
EFFECTIVE: list[tuple[str, dict[str, Any], dict[str, Any] | None, tuple[Any, ...]]] = [
    ("no policy: the NodePool's own block",
     {"policy": "WhenEmpty", "consolidate_after": "2m", "expire_after": "24h", "budgets": [{"nodes": "1"}],
      "stabilization_window": "5m"}, None,
     (POLICY_FROM_NODEPOOL, "WhenEmpty", 120.0, 86_400.0, (Budget("1"),), 300.0)),
    ("next to Karpenter: the policy's, whatever the NodePool says", KARPENTER_OFF,
     {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m", "expireAfter": "48h",
      "budgets": [{"nodes": "2"}], "stabilizationWindow": "3m"},
     (POLICY_FROM_DISRUPTION_POLICY, "WhenEmpty", 60.0, 172_800.0, (Budget("2"),), 180.0)),
    ("a field the policy leaves out has the policy's default, not the NodePool's",
     {"policy": "WhenEmpty", "consolidate_after": "2m", "expire_after": "24h", "budgets": [{"nodes": "1"}],
      "stabilization_window": "5m"}, {},
     (POLICY_FROM_DISRUPTION_POLICY, "WhenEmptyOrUnderutilized", 0.0, None, (Budget("10%"),), None)),
]


@pytest.mark.parametrize(("case", "own", "policy", "expected"), EFFECTIVE, ids=[c[0] for c in EFFECTIVE])
def test_effective_settings_come_from_the_policy_when_there_is_one(
        case: str, own: dict[str, Any], policy: dict[str, Any] | None, expected: tuple[Any, ...]) -> None:
    docs: list[Any] = [nodepool(**own)]
    if policy is not None:
        docs.append(disruption_policy(**policy))
    (pool,) = snapshot(*docs).nodepools
    assert (pool.policy_kind, pool.consolidation_policy, pool.consolidate_after, pool.expire_after, pool.budgets,
            pool.stabilization_window) == expected
    assert pool.policy_source == f"{expected[0]} default"


def test_a_policy_governs_only_the_nodepool_of_its_name() -> None:
    snap = snapshot(nodepool("a", **KARPENTER_OFF), nodepool("b", **KARPENTER_OFF),
                    disruption_policy("a", consolidateAfter="1m"))
    kinds = {p.name: (p.policy_kind, p.budgets) for p in snap.nodepools}
    assert kinds == {"a": (POLICY_FROM_DISRUPTION_POLICY, (Budget("10%"),)),
                     "b": (POLICY_FROM_NODEPOOL, (Budget("0"),))}


# -- warnings --------------------------------------------------------------------------------------------

WARNED: list[tuple[str, list[Any], list[str]]] = [
    ("a policy with its NodePool", [nodepool("a"), disruption_policy("a")], []),
    ("a policy without its NodePool", [nodepool("a"), disruption_policy("b")],
     ["1 DisruptionPolicy document(s) name no NodePool of the input and apply to nothing (a DisruptionPolicy is "
      "named after the NodePool it is for): DisruptionPolicy b"]),
    ("ebb.sh/v1 NodePool and NodeClaim", [nodepool("a", api_version="ebb.sh/v1"),
                                          {**nodeclaim("c", "n1", pool="a"), "apiVersion": "ebb.sh/v1"}],
     ["read 2 ebb.sh/v1 NodePool or NodeClaim document(s) as karpenter.sh/v1 (ebb no longer defines these kinds; "
      "ebb's own settings, stabilizationWindow and the budget reason Expired, belong in an ebb.sh/v1 "
      "DisruptionPolicy): NodePool a, NodeClaim c"]),
    ("karpenter.sh/v1 NodePool and NodeClaim", [nodepool("a"), nodeclaim("c", "n1", pool="a")], []),
]


@pytest.mark.parametrize(("case", "docs", "expected"), WARNED, ids=[c[0] for c in WARNED])
def test_input_warnings_about_policies_and_renamed_kinds(case: str, docs: list[Any], expected: list[str]) -> None:
    assert input_warnings(parse_documents([*docs, catalog()])) == expected


def test_an_old_ebb_nodepool_is_still_planned_as_before() -> None:
    """A dump of the former ebb.sh/v1 NodePool plans exactly as the same NodePool in karpenter.sh/v1."""
    cluster = [node("a", created=ago(days=2)), pod("web", "a")]
    old = plan_dict(nodepool(expire_after="24h", api_version="ebb.sh/v1"), *cluster)
    new = plan_dict(nodepool(expire_after="24h"), *cluster)
    assert old == new
    assert disrupted(old) == {"a"}


# -- explanations name the policy's source ---------------------------------------------------------------

def _one_node(*extra: Any, created: str = "2026-11-20T00:00:00Z", pods: bool = False) -> list[Any]:
    docs: list[Any] = [node("a", created=created), node("b", created=created), *extra]
    if pods:
        docs += [pod("web-a", "a", started=ago(minutes=1)), pod("web-b", "b")]
    return docs


# (case, the NodePool's own block, the policy's spec or None, what node a's blocked reason says)
EXPLAINED: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = [
    ("WhenEmpty from the policy", KARPENTER_OFF, {"consolidationPolicy": "WhenEmpty"},
     "DisruptionPolicy default's consolidationPolicy is WhenEmpty: only empty nodes are consolidated"),
    ("WhenEmpty from the NodePool", {"policy": "WhenEmpty"}, None,
     "NodePool default's consolidationPolicy is WhenEmpty: only empty nodes are consolidated"),
    ("consolidateAfter Never from the policy", KARPENTER_OFF, {"consolidateAfter": "Never"},
     "DisruptionPolicy default's consolidateAfter is Never"),
    ("consolidateAfter not passed, from the policy", KARPENTER_OFF, {"consolidateAfter": "1h"},
     "DisruptionPolicy default's consolidateAfter (1h) has not passed since the node's pods last changed at "
     "2026-11-23T18:29:00Z; it becomes consolidatable at 2026-11-23T19:29:00Z"),
    ("consolidateAfter not passed, from the NodePool: as it always read", {"consolidate_after": "1h"}, None,
     "consolidateAfter (1h) has not passed since the node's pods last changed at 2026-11-23T18:29:00Z; it "
     "becomes consolidatable at 2026-11-23T19:29:00Z"),
    ("budget 0 from the NodePool (Karpenter's switched off, no policy)", KARPENTER_OFF, None,
     "the Underutilized budget allows 0 disruptions now: budget nodes=0 of NodePool default allows 0 of 2 nodes "
     "(0 deleting, 0 NotReady)"),
    ("budget 0 from the policy", {}, {"budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]},
     "the Underutilized budget allows 0 disruptions now: budget nodes=0 of DisruptionPolicy default allows 0 of "
     "2 nodes (0 deleting, 0 NotReady)"),
]


@pytest.mark.parametrize(("case", "own", "policy", "reason"), EXPLAINED, ids=[c[0] for c in EXPLAINED])
def test_explanations_name_where_the_setting_comes_from(case: str, own: dict[str, Any],
                                                        policy: dict[str, Any] | None, reason: str) -> None:
    docs = _one_node(nodepool(**own), pods=True)
    if policy is not None:
        docs.append(disruption_policy(**policy))
    out = plan_dict(*docs)
    assert "a" not in disrupted(out)
    assert reason in blocked_of(out, "a")["reason"], blocked_of(out, "a")["reason"]


def test_expiry_and_budget_details_name_the_policy() -> None:
    out = plan_dict(*_one_node(nodepool(**KARPENTER_OFF), disruption_policy(expireAfter="24h",
                                                                           budgets=[{"nodes": "1"}])))
    (command,) = out["commands"]
    assert command["reason"] == "Expired"
    assert "past DisruptionPolicy default's expireAfter 24h" in command["explanation"]
    details = {b["reason"]: b["detail"] for b in out["budgets"]}
    assert details["Expired"] == ("budget nodes=1 of DisruptionPolicy default allows 1 of 2 nodes (0 deleting, "
                                  "0 NotReady)")
    other = blocked_of(out, "b" if command["nodes"] == ["a"] else "a")["reason"]
    assert "the Expired budget of DisruptionPolicy default is used up" in other, other


def test_a_stabilization_window_from_the_policy_is_named() -> None:
    out = plan_dict(nodepool(**KARPENTER_OFF), disruption_policy(stabilizationWindow="1h"),
                    node("a"), node("fresh", created=ago(minutes=10)))
    assert disrupted(out) == set()
    assert blocked_of(out, "a")["reason"] == (
        "empty, but consolidation is paused by DisruptionPolicy default's stabilizationWindow (1h), in effect since "
        "node fresh launched 10m ago; Empty and Underutilized disruptions resume at 2026-11-23T19:20:00Z")


def test_next_to_karpenter_ebb_acts_on_its_policy_not_on_the_nodepools_zero_budget() -> None:
    """The point of the policy: the NodePool keeps Karpenter's disruption off (budget 0, no expiry), and ebb
    still disrupts by its own policy; without the policy it reads the NodePool's 0 and disrupts nothing."""
    cluster = [node("empty"), node("busy"), pod("web", "busy")]
    assert disrupted(plan_dict(nodepool(**KARPENTER_OFF), *cluster)) == set()
    out = plan_dict(nodepool(**KARPENTER_OFF), disruption_policy(budgets=[{"nodes": "1"}]), *cluster)
    assert disrupted(out) == {"empty"}
    assert budget_of(out, "default", "Empty") == 1


# -- the disruption taints -------------------------------------------------------------------------------

@pytest.mark.parametrize("taint", DISRUPTION_TAINTS)
def test_either_disruption_taint_means_being_disrupted(taint: str) -> None:
    out = plan_dict(nodepool(budgets=[{"nodes": "1"}]), node("gone", taints=[{"key": taint, "effect": "NoSchedule"}]),
                    node("empty"))
    assert blocked_of(out, "gone") == {"node": "gone", "method": "all",
                                       "reason": f"it is already being disrupted (tainted {taint})"}
    # the tainted node takes the pool's one disruption: the empty node waits
    assert budget_of(out, "default", "Empty") == 0
    assert disrupted(out) == set()


# (the taint on node "room", whether node "small"'s pod may move there so that "small" can be deleted)
DESTINATIONS: list[tuple[str, bool]] = [
    (TAINT_DISRUPTED, False),
    (TAINT_EBB_DISRUPTED, False),
    ("example.com/other", True),  # tolerated by the pod below: an ordinary taint closes nothing
]


@pytest.mark.parametrize(("taint", "movable"), DESTINATIONS)
def test_a_node_being_disrupted_is_no_destination(taint: str, movable: bool) -> None:
    web = pod("web", "small")
    web["spec"]["tolerations"] = [{"key": "example.com/other", "operator": "Exists"}]
    out = plan_dict(nodepool(), node("small", itype="t3.medium"), web,
                    node("room", itype="m5.2xlarge", taints=[{"key": taint, "effect": "NoSchedule"}]),
                    pod("big", "room", cpu="7"))
    assert ("small" in disrupted(out)) is movable


# -- the karpenter provider: no NodeClaim, no candidate ---------------------------------------------------

def _claim_by_provider_only(name: str) -> dict[str, Any]:
    claim = nodeclaim(f"claim-{name}", name)
    del claim["status"]["nodeName"]
    return claim


def _claim_of_another_instance(name: str) -> dict[str, Any]:
    """A NodeClaim that names the node but has another instance's provider id: the node's name was used before."""
    claim = nodeclaim(f"claim-{name}-before", name)
    claim["status"]["providerID"] = f"aws:///us-east-1a/i-{name}-before"
    return claim


def _claim_by_provider_named_otherwise(name: str) -> dict[str, Any]:
    """The node's NodeClaim (its provider id) whose status.nodeName names another node."""
    claim = nodeclaim(f"claim-{name}", "busy")
    claim["status"]["providerID"] = f"aws:///us-east-1a/i-{name}"
    return claim


# (case, the NodeClaims, require_nodeclaim, node "empty" disrupted?, its blocked reason otherwise)
CLAIMS: list[tuple[str, list[Any], bool, bool, str | None]] = [
    ("no NodeClaim, standalone", [], False, True, None),
    ("no NodeClaim, karpenter provider", [], True, False,
     "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"),
    ("a NodeClaim naming the node", [nodeclaim("claim-empty", "empty")], True, True, None),
    ("a NodeClaim with the node's provider id only", [_claim_by_provider_only("empty")], True, True, None),
    ("another node's NodeClaim", [nodeclaim("claim-busy", "busy")], True, False,
     "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"),
    # paired by provider id first, as Karpenter's NodeClaimForNode pairs them
    ("a NodeClaim naming the node, of another instance", [_claim_of_another_instance("empty")], True, False,
     "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"),
    ("the node's provider id, naming another node", [_claim_by_provider_named_otherwise("empty")], True, True, None),
]


@pytest.mark.parametrize(("case", "claims", "required", "taken", "reason"), CLAIMS, ids=[c[0] for c in CLAIMS])
def test_with_the_karpenter_provider_a_node_needs_a_nodeclaim(case: str, claims: list[Any], required: bool,
                                                              taken: bool, reason: str | None) -> None:
    out = plan_dict(nodepool(), node("empty"), node("busy"), pod("web", "busy"), *claims,
                    require_nodeclaim=required)
    assert ("empty" in disrupted(out)) is taken
    if reason is not None:
        assert blocked_of(out, "empty") == {"node": "empty", "method": "all", "reason": reason}


def test_a_view_and_options_that_disagree_are_refused() -> None:
    view = ClusterView.build(snapshot(nodepool(), node("a")), NOW)
    with pytest.raises(ValueError, match="require_nodeclaim"):
        run_pass(view, EngineOptions(require_nodeclaim=True))


def test_validation_rejects_a_command_whose_node_lost_its_nodeclaim() -> None:
    docs = [nodepool(), node("empty"), node("busy"), pod("web", "busy"), nodeclaim("claim-empty", "empty")]
    (command,) = plan(*docs, require_nodeclaim=True).first.commands
    options = EngineOptions(require_nodeclaim=True)
    assert validate(command, snapshot(*docs), NOW, options) is None
    stale = validate(command, snapshot(*docs[:-1]), NOW, options)
    assert stale is not None
    assert stale.inner is not None and stale.inner.kind is Cause.NO_NODECLAIM
    assert stale.text == ("node empty is no longer a candidate: it has no NodeClaim: with the karpenter provider "
                          "ebb retires nodes by deleting their NodeClaim")


def test_a_deleting_nodeclaim_of_another_instance_under_the_nodes_name_does_not_make_the_node_deleting() -> None:
    """The name was used before: the old instance's NodeClaim, still being deleted, is not the node's (Karpenter
    pairs them by provider id), so the empty node is not taken for one being deleted and goes as empty. The old
    NodeClaim, without a Node, is not initialized, so it takes none of the budget (Karpenter's
    BuildDisruptionBudgetMapping counts initialized nodes only)."""
    before = _claim_of_another_instance("empty")
    before["metadata"]["deletionTimestamp"] = "2026-11-23T18:00:00Z"
    out = plan_dict(nodepool(), node("empty"), node("busy"), pod("web", "busy"), before)
    assert "empty" in disrupted(out)
    assert not any(b["node"] == "empty" for b in out["blocked"])
