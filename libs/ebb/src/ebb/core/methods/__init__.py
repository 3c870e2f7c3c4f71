"""The disruption methods, in the one order a pass evaluates them; only the first that acts, acts.

Each entry: (module, why it stands where it does).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from ebb.core.methods import drift, emptiness, expiration, multi_node, single_node
from ebb.core.methods.base import MethodOutcome, PassContext

METHOD_ORDER: tuple[tuple[ModuleType, str], ...] = (
    (expiration, "expired nodes must be recycled whatever their utilization, so they go first"),
    (drift, "drifted nodes no longer match their NodePool; fixing that beats saving money"),
    (emptiness, "deleting empty nodes moves no pods, the cheapest disruption there is"),
    (multi_node, "one command removing several nodes saves more than several single-node passes"),
    (single_node, "last: the smallest step, one node deleted or replaced by a cheaper one"),
)

Method = Callable[[PassContext], MethodOutcome]


def method_names() -> tuple[str, ...]:
    return tuple(m.NAME for m, _ in METHOD_ORDER)
