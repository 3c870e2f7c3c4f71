"""What a simulation returns: placements, new nodes to launch, and pods that cannot be placed (why)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NewNode:
    """A NodeClaim the simulation needs: options cheapest first; `price` is the cheapest option's."""

    hostname: str
    nodepool: str
    instance_types: tuple[str, ...]
    capacity_type: str
    zones: tuple[str, ...]
    price: float
    pods: tuple[str, ...]
    #: the labels its NodePool's custom requirements with several values give it (`Pool.combo_custom`)
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SimulationResult:
    placements: Mapping[str, str]  # pod key -> existing node name or new node hostname
    new_nodes: tuple[NewNode, ...] = ()
    unplaceable: Mapping[str, str] = field(default_factory=dict)  # pod key -> reason

    @property
    def all_placed(self) -> bool:
        return not self.unplaceable

    @property
    def new_price(self) -> float:
        return sum(n.price for n in self.new_nodes)
