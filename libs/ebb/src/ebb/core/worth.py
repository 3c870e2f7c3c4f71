"""Is a consolidation worth the evictions it causes? A NodePool's ``minimumSavingPerEvictedPod``.

A consolidation saves money and moves pods: every pod on a node it removes is evicted and started again
elsewhere. Karpenter weighs the two only under ``consolidationPolicy: Balanced`` (`ebb.core.balanced`), as
fractions of the whole NodePool; otherwise any saving, however small, is worth any number of evictions, and a
replace that moves 40 pods to save $0.05/h goes ahead. ebb's ``minimumSavingPerEvictedPod`` (a DisruptionPolicy's
``spec``, or a NodePool's ``spec.disruption``; dollars per hour) puts a price on an eviction: a consolidation
(single- or multi-node, delete or replace) is made only when what it saves is at least that price times the pods
it evicts. 0 is Karpenter's rule, any saving goes.

The pods counted are the ones the move has to reschedule (`ClusterView.movable`: not DaemonSet, mirror or
finished pods), each weighted by Karpenter's pod eviction cost (`ebb.core.model.Pod.eviction_cost`: 1, plus
``controller.kubernetes.io/pod-deletion-cost`` / 2^27 and priority / 2^25, within [-10, 10]; a negative one
counts 0). A plain pod counts one; a pod its owner marked cheap to delete counts less, a high-priority pod more,
as in Karpenter's candidate order and its Balanced score. Each removed node's pods are priced by its own
NodePool, so a move across NodePools asks the sum (`Evictions.asked`).

Emptiness (no pods to evict), expiration and drift (not consolidation: they must happen) are not weighed. Values
in, values out: a refused move is a `BlockCause` (`Cause.EVICTIONS_NOT_WORTH`), an accepted one's explanation
gets `words`, its evictions against its saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ebb.core.causes import BlockCause, Cause
from ebb.core.model import Node, NodePool, Pod
from ebb.core.quantity import dollars

EPSILON = 1e-9


class _View(Protocol):
    """What the rule reads of a `ebb.core.cluster.ClusterView` (a Protocol, so that this module stays below it)."""

    pools: dict[str, NodePool]
    nodes: dict[str, Node]
    movable: dict[str, Sequence[Pod]]


def pod_weight(pod: Pod) -> float:
    """What one evicted pod counts for: its Karpenter eviction cost, a negative one as 0."""
    return max(0.0, pod.eviction_cost)


@dataclass(frozen=True, slots=True)
class Evictions:
    """What removing some nodes evicts, and what their NodePools ask a move to save for it."""

    #: the pods the move evicts
    pods: int
    #: their weights summed (`pod_weight`): ``pods`` when every pod is a plain one
    weight: float
    #: dollars per hour the move must save: per removed node, its NodePool's price times its pods' weight
    asked: float
    #: the objects whose ``minimumSavingPerEvictedPod`` is above 0, with that price, in NodePool order
    sources: tuple[tuple[str, float], ...]

    @property
    def priced(self) -> bool:
        """Whether any NodePool of the move puts a price on its evictions."""
        return bool(self.sources)


def price_of(pool: NodePool | None) -> float:
    """A NodePool's price of one evicted pod, dollars per hour (0 without one)."""
    return pool.minimum_saving_per_evicted_pod if pool is not None else 0.0


def evictions(view: _View, nodes: Sequence[str]) -> Evictions:
    """What removing ``nodes`` evicts and asks (`Evictions`)."""
    pods = 0
    weight = 0.0
    asked = 0.0
    sources: dict[str, tuple[str, float]] = {}
    for name in nodes:
        pool = view.pools.get(view.nodes[name].nodepool or "")
        moved = view.movable.get(name, [])
        node_weight = sum(pod_weight(p) for p in moved)
        pods += len(moved)
        weight += node_weight
        price = price_of(pool)
        if pool is not None and price > 0:
            asked += price * node_weight
            sources[pool.name] = (pool.policy_source, price)
    return Evictions(pods, weight, asked, tuple(sources[k] for k in sorted(sources)))


def asked(view: _View, nodes: Sequence[str]) -> float:
    """What removing ``nodes`` must save for its evictions, dollars per hour (0 when no price is set)."""
    return evictions(view, nodes).asked


def net(view: _View, nodes: Sequence[str], savings: float) -> float:
    """A move's saving less what its evictions ask: how two moves compare (the saving itself when no price is
    set)."""
    return savings - asked(view, nodes)


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _weighted(found: Evictions) -> str:
    """The weight in words when it is not the count (priority or pod-deletion-cost changed it)."""
    if abs(found.weight - found.pods) <= 1e-6:
        return ""
    return f" (counted as {found.weight:.2f} by their priority and pod-deletion-cost)"


def refusal(view: _View, nodes: Sequence[str], savings: float, action: str) -> BlockCause | None:
    """Why removing ``nodes`` (``action``, e.g. "this replace") saving ``savings`` dollars per hour is not worth its
    evictions, or None when it is (or no NodePool of it prices evictions)."""
    found = evictions(view, nodes)
    if not found.priced or savings >= found.asked - EPSILON:
        return None
    return BlockCause(Cause.EVICTIONS_NOT_WORTH, {
        "action": action, "evictions": _pods(found.pods), "pods": found.pods, "weighted": _weighted(found),
        "savings": savings, "per_pod": savings / found.weight, "per": _per(found),
        "source": tuple(source for source, _ in found.sources), "price": max(price for _, price in found.sources),
        "asked": found.asked})


def words(view: _View, nodes: Sequence[str], savings: float) -> str:
    """What an accepted consolidation's explanation adds: the pods it evicts against what it saves, and the price
    its NodePools ask when one is set."""
    found = evictions(view, nodes)
    if not found.pods:
        return f"; it evicts no pods and saves ${dollars(savings)}/h"
    text = f"; it evicts {_pods(found.pods)}{_weighted(found)} to save ${dollars(savings)}/h"
    if found.weight < _NO_WEIGHT:  # their priority and pod-deletion-cost weigh them at (about) nothing: no figure
        return text + ", and no eviction weighs against it"
    per_pod = savings / found.weight
    per = _per(found)
    if found.priced:
        price = max(price for _, price in found.sources)
        if abs(per_pod - price) <= EPSILON:  # met exactly: the figure is the price, not its rounding below it
            per_pod = price
        return (text + f", ${dollars(per_pod)}/h {per} (at least ${dollars(price)}/h asked by "
                f"{' and '.join(source for source, _ in found.sources)}'s minimumSavingPerEvictedPod)")
    return text + f", ${dollars(per_pod)}/h {per}"


#: an eviction weight below this is said as none (it reads 0.00): a per-pod figure of it would be meaningless
_NO_WEIGHT = 0.005


def _per(found: Evictions) -> str:
    """What a figure divided by the evictions' weight is per: an evicted pod, or one as counted when priority or
    pod-deletion-cost weighed them otherwise (`_weighted`)."""
    return "per evicted pod as counted" if _weighted(found) else "per evicted pod"
