"""Karpenter's ``Balanced`` consolidation policy: is a consolidation worth the disruption it causes?

Karpenter v1.14 (``consolidationPolicy: Balanced``, designs/balanced-consolidation.md of sigs.k8s.io/karpenter)
scores each consolidation move against its NodePool::

    score = (savings / NodePool cost) / (move's disruption cost / NodePool's total disruption cost)

and makes the move only when ``score >= 1/k``, with k = 2 (`K`). A node's disruption cost is 1 for the node
itself plus the eviction cost of each pod the move would have to move, negative ones counted as 0
(`node_disruption_cost`; a pod's eviction cost is Karpenter's: 1, plus pod-deletion-cost / 2^27 and priority /
2^25, within [-10, 10]). A NodePool's totals are over every node it owns, candidate or not (`PoolTotals`). A
move whose nodes come from several NodePools is judged by each Balanced one on its share of the savings (in
proportion to the price of its nodes), and every one must approve it (`judge`). A node whose delete, the best
any move of it can do, would not pass is not tried at all by single-node consolidation (`delete_falls_short`).

Only consolidation is scored (single- and multi-node); an empty node's delete always passes and emptiness never
asks; expiration and drift are not consolidation. NodePools of the other policies pass every move. Values in,
values out: the engine turns a failing `Score` into a node's cause (`ebb.core.causes.Cause.BALANCED_SCORE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from ebb.core.causes import BlockCause, Cause
from ebb.core.model import POLICY_BALANCED, Node, NodePool, Pod

#: the consolidationPolicy value
BALANCED = POLICY_BALANCED
#: Karpenter's ``BalancedK``: a move passes when its score is at least 1/K
K = 2
#: Karpenter's ``PerNodeBaseDisruptionCost``: what removing a node costs before any pod on it
NODE_BASE_COST = 1.0


class _View(Protocol):
    """What scoring reads of a `ebb.core.cluster.ClusterView` (a Protocol: the view imports this module)."""

    pools: dict[str, NodePool]
    nodes: dict[str, Node]
    movable: dict[str, Sequence[Pod]]
    pods_on: dict[str, list[Pod]]
    price: dict[str, float]

    def balanced_totals(self) -> dict[str, PoolTotals]: ...

    def blocked_reason(self, node: str, consolidation: bool) -> BlockCause | None: ...


def _pool_of(view: _View, name: str) -> str:
    return view.nodes[name].nodepool or ""


@dataclass(frozen=True, slots=True)
class PoolTotals:
    """A NodePool's denominators: the price of its nodes and their disruption costs, summed."""

    cost: float
    disruption: float


@dataclass(frozen=True, slots=True)
class Score:
    """One NodePool's verdict on a move (Karpenter's ``ScoreResult``)."""

    pool: str
    savings_fraction: float
    disruption_fraction: float
    #: what the NodePool lacks to measure a move by ("cost nothing", "cause no disruption"); "" when it has both
    unmeasured: str = ""

    @property
    def value(self) -> float:
        """savings fraction / disruption fraction; 0 without savings, infinite without disruption."""
        if self.savings_fraction <= 0:
            return 0.0
        if self.disruption_fraction == 0:
            return float("inf")
        return self.savings_fraction / self.disruption_fraction

    @property
    def approved(self) -> bool:
        return self.value >= 1 / K

    def values(self) -> dict[str, object]:
        """The figures a sentence quotes (`ebb.core.causes`: BALANCED_SCORE, or BALANCED_UNMEASURED)."""
        values: dict[str, object] = {
            "pool": self.pool, "score": self.value, "threshold": 1 / K, "k": K,
            "savings_percent": self.savings_fraction * 100, "disruption_percent": self.disruption_fraction * 100}
        if self.unmeasured:
            values["nothing"] = self.unmeasured  # BALANCED_UNMEASURED's
        return values


@dataclass(frozen=True, slots=True)
class Move:
    """A consolidation move a pass counted, per NodePool of its nodes (Karpenter's
    ``karpenter_consolidation_moves_total`` and ``karpenter_consolidation_score``): the NodePool, its
    consolidationPolicy, whether the move was approved, and its Balanced score (None under the other policies)."""

    pool: str
    policy: str
    approved: bool
    score: float | None = None


def moves(view: _View, nodes: Sequence[str], scores: Sequence[Score], approved: bool) -> list[Move]:
    """The `Move` of each NodePool of ``nodes``, with its score where ``scores`` has one."""
    by_pool = {s.pool: s for s in scores}
    pools = sorted({_pool_of(view, name) for name in nodes})
    return [Move(pool, view.pools[pool].consolidation_policy if pool in view.pools else "", approved,
                 by_pool[pool].value if pool in by_pool else None) for pool in pools]


def is_balanced(pool: NodePool | None) -> bool:
    return pool is not None and pool.consolidation_policy == BALANCED


def node_disruption_cost(movable: Sequence[Pod]) -> float:
    """Karpenter's ``RescheduleDisruptionCost`` of a node whose pods to move are ``movable`` (its
    ``StateNode.DisruptionCost``, given all its pods but its DaemonSets')."""
    return NODE_BASE_COST + sum(max(0.0, pod.eviction_cost) for pod in movable)


def pool_totals(view: _View, nodes: Sequence[str], launching: Sequence[tuple[str, float]] = (),
                unpriced: AbstractSet[str] = frozenset()) -> dict[str, PoolTotals]:
    """The totals of every Balanced NodePool, over ``nodes`` (all the snapshot's nodes) and ``launching`` (the
    NodePool and price of each NodeClaim whose node has not registered yet: a node without pods to Karpenter).
    ``unpriced``: nodes whose price is left out of the cost (their disruption counts): nodes without a NodeClaim next
    to Karpenter, whose ``ClusterCost`` sums NodeClaims, while the disruption counts every node of the pool."""
    cost: dict[str, float] = {}
    disruption: dict[str, float] = {}
    for name in nodes:
        pool = _pool_of(view, name)
        if not is_balanced(view.pools.get(pool)):
            continue
        cost[pool] = cost.get(pool, 0.0) + (0.0 if name in unpriced else view.price[name])
        # a consolidation candidate counts the pods it would move (``RescheduleDisruptionCost``), another node every
        # pod but its DaemonSets' (``StateNode.DisruptionCost``: mirror pods and pods being deleted included)
        counted = view.movable[name] if view.blocked_reason(name, True) is None else [
            p for p in view.pods_on[name] if not p.is_daemonset]
        disruption[pool] = disruption.get(pool, 0.0) + node_disruption_cost(counted)
    for pool, price in launching:
        if is_balanced(view.pools.get(pool)):
            cost[pool] = cost.get(pool, 0.0) + price
            disruption[pool] = disruption.get(pool, 0.0) + NODE_BASE_COST
    return {pool: PoolTotals(cost[pool], disruption[pool]) for pool in cost}


def score(totals: PoolTotals | None, pool: str, savings: float, disruption: float) -> Score:
    """Karpenter's ``ScoreMove``: a move saving ``savings`` and causing ``disruption`` in ``pool``."""
    if totals is None or totals.cost <= 0 or totals.disruption <= 0:
        # nothing to measure against: scores 0, rejected
        unmeasured = "cost nothing" if totals is None or totals.cost <= 0 else "cause no disruption"
        return Score(pool, 0.0, 0.0, unmeasured)
    return Score(pool, savings / totals.cost, disruption / totals.disruption)


def judge(view: _View, nodes: Sequence[str], savings: float) -> list[Score]:
    """Each Balanced NodePool's score of the move removing ``nodes`` and saving ``savings`` (net of its
    replacements), in NodePool order; the move goes ahead when every one is `Score.approved`. Karpenter's
    ``EvaluateBalancedMove``: a NodePool's share of the savings is in proportion to its nodes' price."""
    by_pool: dict[str, list[str]] = {}
    for name in nodes:
        by_pool.setdefault(_pool_of(view, name), []).append(name)
    source = sum(view.price[name] for name in nodes)
    scores = []
    for pool, names in sorted(by_pool.items()):
        if not is_balanced(view.pools.get(pool)):
            continue
        share = savings
        if source > 0 and len(by_pool) > 1:
            share = savings * sum(view.price[name] for name in names) / source
        scores.append(score(view.balanced_totals().get(pool), pool, share,
                            sum(node_disruption_cost(view.movable[name]) for name in names)))
    return scores


def approval(scores: Sequence[Score]) -> str:
    """What a command's explanation adds when Balanced NodePools approved it (Karpenter's ConsolidationApproved
    event): each one's score and fractions; empty when no NodePool of the command is Balanced."""
    return "".join(f"; NodePool {s.pool} (Balanced): score {s.value:.2f} >= {1 / K:.2f}, saving "
                   f"{s.savings_fraction * 100:.1f}% of its cost for {s.disruption_fraction * 100:.1f}% of its "
                   f"disruption cost" for s in scores)


def rejection(scores: Sequence[Score]) -> Score | None:
    """The first score that rejects the move, or None when every one approves it."""
    return next((s for s in scores if not s.approved), None)


def delete_falls_short(view: _View, name: str) -> Score | None:
    """Karpenter's ``CanPassThreshold``, negated: the score of deleting node ``name`` outright, when even that (the
    best any move of it can do) would not pass; None when it may pass or its NodePool is not Balanced (or has no
    cost to measure against)."""
    pool = _pool_of(view, name)
    if not is_balanced(view.pools.get(pool)):
        return None
    pool_totals_ = view.balanced_totals().get(pool)
    if pool_totals_ is None or pool_totals_.cost <= 0:
        return None
    verdict = score(pool_totals_, pool, view.price[name], node_disruption_cost(view.movable[name]))
    return None if verdict.approved else verdict


def cause(verdict: Score, pool: NodePool, action: str) -> BlockCause:
    """Why a node is not consolidated: ``action`` (e.g. "this replace") scored ``verdict`` in Balanced ``pool``."""
    kind = Cause.BALANCED_UNMEASURED if verdict.unmeasured else Cause.BALANCED_SCORE
    return BlockCause(kind, {**verdict.values(), "source": pool.policy_source, "action": action})
