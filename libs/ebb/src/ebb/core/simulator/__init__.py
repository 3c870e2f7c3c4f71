"""The scheduling simulator: "if these nodes go away, where do their pods go, and what must launch?"

It follows kube-scheduler's filters and Karpenter's provisioning (new NodeClaims keep every instance
type that still fits and launch the cheapest). See `scheduler` for the algorithm and `checker` for the
deliberately simple validator the property tests hold it to.
"""

from ebb.core.simulator.results import NewNode, SimulationResult
from ebb.core.simulator.scheduler import Scheduler, SimState

__all__ = ["NewNode", "Scheduler", "SimState", "SimulationResult"]
