"""The consolidation-planner's test runner on the in-memory bus: ``Running`` (``app.run`` on an InMemoryBus and a
SQLite store, with a fake leader, a fixed clock and short delays), a fake node annotator, the cluster objects it is
fed (``publish``), an interruption, and the two-node cluster most planner tests start from. Shared by
the planner's service tests, the provider tests and the fuzzing of its handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.kinds import KINDS
from ebb.adapters.store.decision_store import DecisionFilter, DecisionStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, Interruption, KindSynced
from ebb.contracts.messages import InterruptionKind
from ebb_consolidation_planner import app
from ebb_consolidation_planner.leadership import AlwaysLeader, Leadership
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.planner import LivePods, Planner
from ebb_consolidation_planner.policy_status import PolicyStatusWriter
from ebb_consolidation_planner.settings import Settings
from tests.kit.builders import NOW, catalog, node, nodepool, pod
from tests.kit.messages import cluster_object

#: the validation delay, in seconds, between proposing a decision and approving it
DELAY = 0.2


class Clock:
    """"now": ``now`` (NOW at first) plus the event loop's time since the first reading, so that a proposal comes
    due ``validation_delay`` seconds after it was made; setting ``now`` moves it on."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now
        self._origin: float | None = None

    def __call__(self) -> datetime:
        loop_time = asyncio.get_running_loop().time()
        if self._origin is None:
            self._origin = loop_time
        return self.now + timedelta(seconds=loop_time - self._origin)


async def publish(bus: InMemoryBus, *docs: dict[str, Any]) -> None:
    for doc in docs:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))


class FakePolicyStatus:
    """A PolicyStatusWriter that keeps the condition it was asked to write per DisruptionPolicy."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.conditions: dict[str, dict[str, str]] = {}

    async def set_condition(self, policy: str, condition: dict[str, str]) -> None:
        self.calls.append((policy, condition))
        self.conditions[policy] = condition


class FakeAnnotator:
    """A NodeAnnotator that records what it was asked to write; ``failing`` makes it raise instead."""

    def __init__(self, *, failing: bool = False) -> None:
        self.failing = failing
        self.calls: list[tuple[str, str | None]] = []
        self.values: dict[str, str | None] = {}

    async def set_drifted(self, node: str, reason: str | None) -> None:
        if self.failing:
            raise RuntimeError("the API server is away")
        self.calls.append((node, reason))
        self.values[node] = reason


class Running:
    """app.run on an InMemoryBus and a SQLite store with a fake leader and a fixed clock."""

    def __init__(self, bus: InMemoryBus, url: str, *, leader: Leadership | None = None, delay: float = DELAY,
                 recorder: EventRecorder | None = None, annotator: FakeAnnotator | None = None,
                 store_revision: Callable[[], int] | None = None,
                 live_pods: LivePods | None = None, policy_status: PolicyStatusWriter | None = None,
                 synced: bool = True, **settings: Any) -> None:
        self.bus = bus
        #: publish `KindSynced` of every kind before the planner starts, as a cluster-watcher that listed them would
        self.synced = synced
        self.store = DecisionStore.from_url(url, "unit", shadow=settings.get("mode") == "shadow")
        self.leader = leader or AlwaysLeader()
        self.metrics = Metrics()
        self.settings = Settings(**{"debounce_seconds": 0.0, "pass_interval_seconds": 0.3,
                                    "validation_delay_seconds": delay, "group": "planner-test", "cluster": "unit",
                                    **settings})
        self.recorder = recorder
        self.annotator = annotator
        self.live_pods = live_pods
        self.policy_status = policy_status
        self.store_revision = store_revision
        self.clock = Clock()
        self.stop = asyncio.Event()
        self.started = asyncio.Event()
        self.planner: Planner | None = None
        self.task: asyncio.Task[None] | None = None

    def _ready(self, planner: Planner) -> None:
        self.planner = planner

    async def __aenter__(self) -> Running:
        if self.synced:  # as the cluster-watcher says once it listed each kind it watches
            for message in kinds_synced():
                await self.bus.publish(TOPIC_CLUSTER_OBJECTS, message)
        self.task = asyncio.create_task(app.run(self.settings, self.stop, bus=self.bus, store=self.store,
                                                leader=self.leader, metrics=self.metrics, clock=self.clock,
                                                started=self.started, planner_ready=self._ready,
                                                recorder=self.recorder, annotator=self.annotator,
                                                live_pods=self.live_pods, store_revision=self.store_revision,
                                                policy_status=self.policy_status))
        await asyncio.wait_for(self.started.wait(), 5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)
        await self.store.close()

    async def decisions(self, state: str | None = None) -> list[Any]:
        return list((await self.store.list_decisions(DecisionFilter(state=state))).items)

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def cluster(pool: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """n1 empty; n2, the cheapest type, running a pod that fits nowhere else once n1 goes; both in NodePool
    default."""
    return [catalog(), pool or nodepool(), node("n1"), node("n2", itype="t3.medium"), pod("p2", "n2", cpu="1500m")]


def interruption(node_name: str, kind: InterruptionKind = "spot-interruption",
                 detail: str = "instance-action=terminate", **extra: Any) -> Interruption:
    return Interruption(node=node_name, kind=kind, instance_id=f"i-{node_name}", deadline=NOW, detail=detail,
                        **extra)


def kinds_synced(kinds: tuple[str, ...] | None = None) -> list[KindSynced]:
    """The `KindSynced` the cluster-watcher publishes once it has listed each of ``kinds`` (all it watches by
    default): what a planner waits for before it plans. Tests that publish cluster objects by hand publish these
    too, as the watcher would."""
    watched = tuple(KINDS) if kinds is None else kinds
    return [KindSynced(kind=kind, watched=watched) for kind in watched]
