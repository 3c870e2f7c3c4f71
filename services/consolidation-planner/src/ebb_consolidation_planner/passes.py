"""Publishing the leader's passes on ebb.planner.passes: the one answer to "why not this node?".

The decisions-api explains a node from the leader planner's last computed pass instead of running a pass of its
own (which would not have the planner's demand record, nor its exact moment), so after each computed pass the
leader publishes what it decided: ``PlannerPass.of_pass`` (``ebb.contracts.messages``, pure) builds the message
from the pass's view and result, the planner's held findings, the revision of the objects it planned on and its
demand record. The topic is compacted and keyed by cluster: the latest pass is what a reader finds.

Only computed passes are published (a pass answered from the last one, ``PassInputs``, has the same answer and
the last one's time). A publish that fails is logged and dropped: the next pass publishes again (a reused one
publishes the pass it answers from), and planning never waits on it. The message is built on the event loop,
not in a worker thread: in the embedded mode a worker thread's job costs simulated time (``--pass-cost``), and
publishing must not change a run.
"""

from __future__ import annotations

from datetime import datetime

import structlog

from ebb.adapters.bus import Bus
from ebb.contracts import TOPIC_PLANNER_PASSES, PlannerPass
from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult
from ebb.core.findings import Findings
from ebb.core.model import DemandSample

log = structlog.get_logger("ebb_consolidation_planner")


class PassPublisher:
    """Publishes each computed pass of the leader on ebb.planner.passes, keyed by ``cluster``."""

    def __init__(self, bus: Bus, cluster: str) -> None:
        self.bus = bus
        self.cluster = cluster
        #: passes published, and the time of the last one
        self.published = 0
        self.last_at: datetime | None = None

    async def publish(self, view: ClusterView, result: PassResult, found: Findings, *, revision: object,
                      demand: tuple[DemandSample, ...]) -> bool:
        """Publish the pass; False (logged) when it could not be built or sent."""
        try:
            message = PlannerPass.of_pass(cluster=self.cluster, view=view, result=result, found=found,
                                          revision=revision if isinstance(revision, int) else 0, demand=demand)
            await self.bus.publish(TOPIC_PLANNER_PASSES, message)
        except Exception as e:  # the pass is for explanations: planning goes on, the next pass publishes again
            log.warning("publishing the pass failed", error=repr(e), at=result.now.isoformat())
            return False
        self.published += 1
        self.last_at = result.now
        return True
