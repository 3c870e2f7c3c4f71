"""The scheduling simulator: "if these nodes go away, where do their pods go, and what must launch?"

It follows kube-scheduler's filters and Karpenter's provisioning (new NodeClaims keep every instance
type that still fits and launch the cheapest). See `scheduler` for the algorithm and `checker` for the
deliberately simple validator the property tests hold it to.

The scheduler's parts, each over the next: `scheduler` (the Scheduler, per snapshot, and a simulation's search
for each pod's bin), `placement` (a simulation's bins, what is placed where, the journal that undoes it),
`topology` (topology groups and domains, and the spread and pod affinity rules over their counts), `constraints`
(specs and NodePools compiled into arrays: pools, pod classes, relaxations), over `labeltable`, `results` and
`arrays`. The checker imports none of them but `results`.
"""

from ebb.core.simulator.results import NewNode, SimulationResult
from ebb.core.simulator.scheduler import Scheduler, SimState

__all__ = ["NewNode", "Scheduler", "SimState", "SimulationResult"]
