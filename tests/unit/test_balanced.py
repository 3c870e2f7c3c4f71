"""Karpenter's Balanced consolidation policy (ebb.core.balanced): the score itself, table-driven from Karpenter's
balanced_test.go (the RFC's examples), and the engine's consolidations on clusters shaped like the RFC's
(designs/balanced-consolidation.md of sigs.k8s.io/karpenter v1.14.1): a pool of xlarge nodes (and two
2xlarge), every node but the one a case is about too full to take any other node's pods."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ebb.core.balanced import K, PoolTotals, Score, score
from ebb.core.snapshot import SnapshotError
from tests.kit.balanced_clusters import CATALOG, full_node, marginal_cluster, rfc_cluster, sized_node
from tests.kit.builders import (
    blocked_of,
    catalog,
    disrupted,
    disruption_policy,
    instance_type,
    node,
    nodeclaim,
    nodepool,
    plan,
    plan_dict,
    pod,
    snapshot,
)

# the RFC's pool: eight m7i.xlarge ($4.84/day) and two m7i.2xlarge ($9.68/day), 80 pods of cost 1
RFC = PoolTotals(cost=58.08, disruption=90.0)


@pytest.mark.parametrize(("case", "totals", "savings", "disruption", "approved", "expected"), [
    ("an oversized node's replace", RFC, 7.26, 4.0, True, (7.26 / 58.08) / (4 / 90)),
    ("a spare capacity delete", RFC, 4.84, 5.0, True, (4.84 / 58.08) / (5 / 90)),
    ("a marginal move", RFC, 2.42, 9.0, False, (2.42 / 58.08) / (9 / 90)),
    ("a well-packed node, nothing saved", RFC, 0.0, 11.0, False, 0.0),
    ("a replace in a uniform pool (at the threshold)", PoolTotals(48.40, 90.0), 2.42, 9.0, True, 0.5),
    ("a low-disruption node", PoolTotals(58.08, 117.0), 4.84, 5.0, True, (4.84 / 58.08) / (5 / 117)),
    ("a high-disruption node", PoolTotals(58.08, 117.0), 4.84, 32.0, False, (4.84 / 58.08) / (32 / 117)),
    ("the oversized node in a pool ten times as large", PoolTotals(580.80, 900.0), 7.26, 4.0, True,
     (7.26 / 58.08) / (4 / 90)),
    ("no disruption, some savings", RFC, 4.84, 0.0, True, math.inf),
    ("no disruption, no savings", RFC, 0.0, 0.0, False, 0.0),
    ("a NodePool that costs nothing", PoolTotals(0.0, 90.0), 4.84, 5.0, False, 0.0),
    ("on-demand pool, proportionally like the spot one below", PoolTotals(48.40, 90.0), 4.84, 4.0, True,
     (4.84 / 48.40) / (4 / 90)),
    ("spot pool", PoolTotals(14.50, 90.0), 1.45, 4.0, True, (1.45 / 14.50) / (4 / 90)),
])
def test_score(case: str, totals: PoolTotals, savings: float, disruption: float, approved: bool,
               expected: float) -> None:
    """balanced_test.go, Describe("ScoreMove"): approved when savings fraction / disruption fraction >= 1/2."""
    verdict = score(totals, "default", savings, disruption)
    assert verdict.approved is approved, case
    assert verdict.value == pytest.approx(expected, rel=1e-9), case


def test_the_threshold_is_one_over_k() -> None:
    assert K == 2
    assert Score("p", 0.05, 0.1).approved and not Score("p", 0.0499, 0.1).approved
    assert Score("p", 0.05, 0.1).values()["threshold"] == 0.5


# -- the engine --------------------------------------------------------------------------------------------------

MAX_DELETION_COST = {"controller.kubernetes.io/pod-deletion-cost": "2147483647"}  # eviction cost 1 + 16 -> 10


def _plan(policy: str, *docs: Any) -> dict[str, Any]:
    return plan_dict(nodepool(policy=policy), CATALOG, *docs)


@pytest.mark.parametrize("policy", ["Balanced", "WhenEmptyOrUnderutilized"])
def test_an_oversized_node_is_replaced(policy: str) -> None:
    """balanced_integration_test.go, Context("Single-Node"), It("should approve replacing an oversized node"): a
    2xlarge running 3 pods (1.5 cpu) becomes a large. Savings 0.375 of 3.0 (12.5%), disruption 4 of 85 (4.7%):
    score 2.66."""
    out = _plan(policy, *rfc_cluster(sized_node("subject", "b.2xlarge", [("500m", None)] * 3), 8, 1))
    [command] = out["commands"]
    assert (command["method"], command["action"], command["nodes"]) == (
        "single-node-consolidation", "replace", ["subject"])
    assert command["replacements"][0]["instanceTypes"][0] == "b.large"
    # the approval is told as Karpenter's ConsolidationApproved event tells it
    approval = ("; NodePool default (Balanced): score 2.66 >= 0.50, saving 12.5% of its cost for 4.7% of its "
                "disruption cost")
    assert command["explanation"].endswith(approval) == (policy == "Balanced")


def test_a_marginal_replace_is_not_worth_it_under_balanced() -> None:
    """The RFC's marginal move: an xlarge with 8 pods (1.8 cpu) fits a large. Savings 0.125 of 3.0 (4.2%),
    disruption 9 of 90 (10%): score 0.42, rejected; WhenEmptyOrUnderutilized replaces it."""
    assert disrupted(plan_dict(*marginal_cluster("WhenEmptyOrUnderutilized"))) == {"subject"}
    out = plan_dict(*marginal_cluster("Balanced"))
    assert out["commands"] == []
    reason = blocked_of(out, "subject")["reason"]
    assert reason == ("NodePool default's consolidationPolicy is Balanced and this replace is not worth its "
                      "disruption: it would save 4.2% of NodePool default's cost for 10.0% of its disruption cost "
                      "(score 0.42, below 0.50, k=2)")


def test_a_replace_in_a_uniform_pool_is_at_the_threshold() -> None:
    """The RFC's uniform pool: ten xlarge; halving one node's price saves 5% for 10% of the disruption: score 0.50,
    approved."""
    out = _plan("Balanced", *rfc_cluster(sized_node("subject", "b.xlarge", [("225m", None)] * 8), 9, 0))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("replace", ["subject"])]


def test_a_delete_that_cannot_pass_is_not_tried() -> None:
    """The RFC's heterogeneous disruption: node b's 4 pods fit on node spare, but 3 of them carry the highest
    pod-deletion-cost (eviction cost 10 each). Deleting b saves 10% of the pool's cost for 29% of its disruption
    (32 of 109): score 0.34, so not even the delete is tried (Karpenter's CanPassThreshold)."""
    subject = sized_node("b", "b.xlarge", [("100m", None), *[("100m", MAX_DELETION_COST)] * 3])
    cluster = [*rfc_cluster(subject, 8, 0), sized_node("spare", "b.xlarge", [("500m", None)] * 4, kept=True)]
    assert disrupted(_plan("WhenEmptyOrUnderutilized", *cluster)) == {"b"}
    out = _plan("Balanced", *cluster)
    assert out["commands"] == []
    reason = blocked_of(out, "b")["reason"]
    assert "Balanced and even deleting it is not worth its disruption" in reason
    assert "save 10.0% of NodePool default's cost for 29.4% of its disruption cost (score 0.34" in reason


def test_underutilized_nodes_are_merged() -> None:
    """balanced_integration_test.go, Context("Multi-Node"), It("should approve consolidating multiple underutilized
    nodes"): three xlarge with 2 small pods each become one large. Savings 0.625 of 2.5 (25%), disruption 9 of 72
    (12.5%): score 2.0."""
    light = [sized_node(name, "b.xlarge", [("200m", None)] * 2) for name in ("a", "b", "c")]
    out = _plan("Balanced", *light, *(full_node(f"x{i}") for i in range(7)))
    [command] = out["commands"]
    assert (command["method"], command["action"], command["nodes"]) == (
        "multi-node-consolidation", "replace", ["a", "b", "c"])
    assert command["replacements"][0]["instanceTypes"][0] == "b.large"
    assert command["explanation"].endswith("(Balanced): score 2.00 >= 0.50, saving 25.0% of its cost for 12.5% of its "
                                           "disruption cost")


def test_a_merge_whose_pods_are_dear_to_disrupt_is_not_made() -> None:
    """Three such nodes, 4 pods each, every pod with the highest pod-deletion-cost: making them one large would save
    25% of the pool's cost for 66% of its disruption (123 of 186), score 0.38; deleting two, 20% for 44% (82 of
    186), score 0.45; deleting one, the same. Nothing is done, where WhenEmptyOrUnderutilized merges all three."""
    dear = [sized_node(name, "b.xlarge", [("100m", MAX_DELETION_COST)] * 4) for name in ("a", "b", "c")]
    cluster = [*dear, *(full_node(f"x{i}") for i in range(7))]
    assert disrupted(_plan("WhenEmptyOrUnderutilized", *cluster)) == {"a", "b", "c"}
    out = _plan("Balanced", *cluster)
    assert out["commands"] == []
    for name in ("a", "b", "c"):
        assert "(score 0.45, below 0.50, k=2)" in blocked_of(out, name)["reason"]


def test_only_the_balanced_pool_is_scored() -> None:
    """balanced_integration_test.go, Context("Mixed-Policy NodePools"): the same marginal node in a Balanced pool
    and in a WhenEmptyOrUnderutilized one; only the latter is replaced."""
    docs: list[Any] = [nodepool("scored", policy="Balanced"), nodepool("plain"), CATALOG]
    for pool in ("scored", "plain"):
        docs += [sized_node(f"{pool}-subject", "b.xlarge", [("225m", None)] * 8, pool, own_pool=True),
                 *(full_node(f"{pool}-x{i}", pool=pool) for i in range(7)),
                 *(full_node(f"{pool}-big{i}", "b.2xlarge", pool) for i in range(2))]
    out = plan_dict(*docs)
    assert disrupted(out) == {"plain-subject"}
    assert "Balanced" in blocked_of(out, "scored-subject")["reason"]


def test_a_disruption_policy_may_say_balanced() -> None:
    """An ebb.sh/v1 DisruptionPolicy's consolidationPolicy: Balanced governs its NodePool as the NodePool's own
    would, and the sentence names the policy."""
    cluster = rfc_cluster(sized_node("subject", "b.xlarge", [("225m", None)] * 8), 7, 2)
    out = plan_dict(nodepool(), disruption_policy(consolidationPolicy="Balanced", consolidateAfter="0s",
                                                  budgets=[{"nodes": "100%"}]), CATALOG, *cluster)
    assert out["commands"] == []
    assert blocked_of(out, "subject")["reason"].startswith(
        "DisruptionPolicy default's consolidationPolicy is Balanced and this replace")


def test_an_empty_node_is_deleted_whatever_it_would_score() -> None:
    """Emptiness is not scored (an empty node's delete always passes in Karpenter)."""
    out = _plan("Balanced", node("empty", itype="b.xlarge", cpu="4", memory="16Gi", pods=58),
                *(full_node(f"x{i}") for i in range(9)))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", ["empty"])]


def test_an_unknown_policy_names_the_three() -> None:
    with pytest.raises(SnapshotError, match="'Sometimes' is not WhenEmptyOrUnderutilized, WhenEmpty or Balanced"):
        snapshot(nodepool(policy="Sometimes"))


@pytest.mark.parametrize(("policy", "approved", "expected_score"), [
    ("Balanced", False, (0.125 / 3.0) / (9 / 90)),
    ("WhenEmptyOrUnderutilized", True, None),
])
def test_a_pass_counts_its_consolidation_moves(policy: str, approved: bool, expected_score: float | None) -> None:
    """The moves a pass counted, for the planner's ebb_consolidation_moves_total and ebb_consolidation_score
    (Karpenter's): the marginal replace, refused with its score under Balanced, made under the other policy."""
    [move] = plan(*marginal_cluster(policy)).first.moves
    assert (move.pool, move.policy, move.approved) == ("default", policy, approved)
    assert move.score == (None if expected_score is None else pytest.approx(expected_score))


def test_multi_node_counts_the_set_it_made_or_the_last_one_refused() -> None:
    light = [sized_node(name, "b.xlarge", [("200m", None)] * 2) for name in ("a", "b", "c")]
    [made] = plan(nodepool(policy="Balanced"), CATALOG, *light, *(full_node(f"x{i}") for i in range(7))).first.moves
    assert (made.pool, made.policy, made.approved) == ("default", "Balanced", True)
    assert made.score == pytest.approx(2.0)
    dear = [sized_node(name, "b.xlarge", [("100m", MAX_DELETION_COST)] * 4) for name in ("a", "b", "c")]
    [refused] = plan(nodepool(policy="Balanced"), CATALOG, *dear, *(full_node(f"x{i}") for i in range(7))).first.moves
    # the last set the search refused: two of the three, deleted (20% of the cost for 82 of 186)
    assert not refused.approved
    assert refused.score == pytest.approx(0.2 / (82 / 186))


def test_a_launching_nodeclaim_counts_in_the_pools_totals() -> None:
    """The uniform pool's replace at the threshold (score 0.50), with a b.2xlarge NodeClaim of the pool launched
    whose Node has not registered yet: Karpenter's cost tracking and cluster state count it (its price by its labels,
    a disruption cost of 1), so the replace's share falls below the threshold and it is refused; ebb counted Nodes
    only and approved it."""
    claim = nodeclaim("launching", "", labels={"node.kubernetes.io/instance-type": "b.2xlarge",
                                               "topology.kubernetes.io/zone": "us-east-1a",
                                               "karpenter.sh/capacity-type": "on-demand"})
    claim["status"] = {}
    out = _plan("Balanced", *rfc_cluster(sized_node("subject", "b.xlarge", [("225m", None)] * 8), 9, 0), claim)
    assert out["commands"] == []
    assert "consolidationPolicy is Balanced and this replace is not worth its disruption" in \
        blocked_of(out, "subject")["reason"]


@pytest.mark.parametrize(("mirrors", "kept"), [(True, False), (False, True)])
def test_a_node_no_consolidation_may_take_counts_its_mirror_pods_in_the_pools_disruption(mirrors: bool,
                                                                                         kept: bool) -> None:
    """Karpenter sums a NodePool's disruption cost from each candidate's pods to move, but from every pod of another
    node but its DaemonSets' (``StateNode.DisruptionCost``): ``k1`` and ``k2`` (do-not-disrupt) each hold a
    system-node-critical mirror pod of eviction cost 10, so the pool's total is 27 and deleting ``cand`` (cost 5)
    scores 1.8 and passes; without the mirror pods the total is 7 and it scores 0.47, refused. ebb counted those
    nodes' pods to move only (none) and kept ``cand``."""
    keep = {"karpenter.sh/do-not-disrupt": "true"}
    docs: list[Any] = [nodepool(policy="Balanced"), node("cand"), node("k1", annotations=keep),
                       node("k2", annotations=keep)]
    docs += [pod(f"web-{i}", "cand", cpu="100m") for i in range(4)]
    for name in ("k1", "k2"):
        if mirrors:
            docs.append(pod(f"proxy-{name}", name, cpu="100m", owner=("Node", name), priority=2000001000,
                            annotations={"kubernetes.io/config.mirror": "x"}))
    out = plan_dict(*docs)
    assert ("cand" not in disrupted(out)) is kept, out["blocked"]


def test_a_move_in_a_nodepool_whose_nodes_cost_nothing_is_told_why_it_scores_zero() -> None:
    """Karpenter's ``ScoreMove`` scores 0 where the NodePool's total cost is 0 (nothing to measure a saving against):
    the reason says so, not "save 0.0% ... for 0.0% of its disruption cost"."""
    free = catalog([instance_type("free", "4", "16Gi", 29, 0.0)])
    keep = {"karpenter.sh/do-not-disrupt": "true"}
    out = plan_dict(free, nodepool(policy="Balanced"), node("cand", itype="free"), pod("web", "cand"),
                    node("anchor", itype="free", zone="us-east-1b"), pod("stay", "anchor", annotations=keep))
    assert out["commands"] == []
    reason = blocked_of(out, "cand")["reason"]
    assert ("NodePool default's consolidationPolicy is Balanced and this delete scores 0: NodePool default's nodes "
            "cost nothing, so there is nothing to measure it against") in reason, reason


@pytest.mark.parametrize(("require_nodeclaim", "deleted"), [(True, True), (False, False)])
def test_next_to_karpenter_a_node_without_a_nodeclaim_adds_no_price_to_the_pool(require_nodeclaim: bool,
                                                                                 deleted: bool) -> None:
    """Karpenter's ``ClusterCost`` sums the pool's NodeClaims (``state/cost``), while its disruption total counts every
    node of the pool (``balanced.go`` ``computeNodePoolTotals``). ``a`` (m5.large, $0.096/h, one pod) has a NodeClaim,
    ``u`` (m5.2xlarge, $0.384/h, empty) none: next to Karpenter the pool costs $0.096/h, and deleting ``a`` saves all
    of it for 2/3 of the disruption (score 1.5), approved; counting ``u``'s price too it saves 20% (score 0.30),
    refused. Without NodeClaims anywhere (`require_nodeclaim` off) every node is priced."""
    docs: list[Any] = [nodepool(policy="Balanced"), node("a"), node("u", itype="m5.2xlarge"),
                       pod("web", "a", cpu="100m")]
    if require_nodeclaim:
        docs.append(nodeclaim("a-claim", "a"))
    out = plan_dict(*docs, require_nodeclaim=require_nodeclaim)
    assert ("a" in disrupted(out)) is deleted, out["blocked"]
