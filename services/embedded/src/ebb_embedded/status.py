"""Where an embedded run stands (``Status``): what the CLI shows while it goes, and what a back-test's worker
process reports to the parent. It is a module of its own, light to import, so that the parent process of a
back-test can read the statuses its workers send without importing the embedded mode (the runner, its services
and their libraries), which only the workers need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ebb.core.decision import LIVE


@dataclass
class Status:
    """Where a run stands; what the CLI shows."""

    now: datetime
    elapsed: timedelta
    nodes: int
    pods: int
    pending_pods: int
    cost_per_hour: float
    #: (state, method) -> decisions
    decisions: dict[tuple[str, str], int] = field(default_factory=dict)
    evictions: int = 0
    evictions_refused: int = 0
    nodes_deleted: int = 0
    #: the planner's passes, and of those the ones answered from the pass before (``EmbeddedOptions.reuse_passes``)
    passes: int = 0
    passes_reused: int = 0

    def by_state(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (state, _method), n in self.decisions.items():
            totals[state] = totals.get(state, 0) + n
        return totals

    @property
    def live(self) -> int:
        return sum(n for (state, _m), n in self.decisions.items() if state in LIVE)
