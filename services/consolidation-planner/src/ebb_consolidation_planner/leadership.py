"""Who may plan: the ``Leadership`` a planner asks before each pass, and the two fixed answers.

``Leadership`` is what the planner reads (``is_leader``) and runs beside itself (``run(stop)``). The real one
is a coordination.k8s.io Lease (``ebb_consolidation_planner.leader.LeaseElector``); this module holds the
protocol and the fixed replicas, ``AlwaysLeader`` (the embedded mode's single replica, tests) and
``NeverLeader`` (tests), apart from the Lease so that what runs without an API server (``ebb run``,
``ebb backtest``) does not load the Kubernetes client (over a second of imports in every worker process).
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Leadership(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def fixed(self) -> bool:
        """True when ``is_leader`` never changes (a single replica): nobody needs to look at it again."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Keep (or try to get) the leadership until ``stop`` is set."""
        ...


class AlwaysLeader:
    """A single replica (embedded mode, tests): always the leader."""

    is_leader = True
    fixed = True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class NeverLeader:
    """A replica that never gets the leadership (tests)."""

    is_leader = False
    fixed = True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()
