"""The disruption methods, in the one order a pass evaluates them; only the first that acts, acts.

Each entry of `METHOD_ORDER`: (the method, why it stands where it does). Everything else that lists the
methods or asks which of them consolidate derives from it.
"""

from __future__ import annotations

from ebb.core.methods import drift, emptiness, expiration, multi_node, single_node
from ebb.core.methods.base import Method

METHOD_ORDER: tuple[tuple[Method, str], ...] = (
    (expiration.METHOD, "expired nodes must be recycled whatever their utilization, so they go first"),
    (drift.METHOD, "drifted nodes no longer match their NodePool; fixing that beats saving money"),
    (emptiness.METHOD, "deleting empty nodes moves no pods, the cheapest disruption there is"),
    (multi_node.METHOD, "one command removing several nodes saves more than several single-node passes"),
    (single_node.METHOD, "last: the smallest step, one node deleted or replaced by a cheaper one"),
)

#: each method by its wire name (``Command.method``)
METHODS: dict[str, Method] = {method.name: method for method, _why in METHOD_ORDER}
#: the disruption reasons of the consolidation methods (Empty, Underutilized)
CONSOLIDATION_REASONS = frozenset(method.reason for method, _why in METHOD_ORDER if method.consolidation)


def method_names() -> tuple[str, ...]:
    return tuple(method.name for method, _why in METHOD_ORDER)
