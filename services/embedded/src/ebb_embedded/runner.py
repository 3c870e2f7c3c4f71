"""The embedded mode: the services as tasks of one process, on one code path with the distributed mode
(docs/architecture.md#modes).

``run_embedded`` composes what each service's composition root would build, replacing only the edges:
the ``InMemoryBus`` for Kafka, SQLite (migrated with the same Alembic revisions) for PostgreSQL, the
``SimulatedCluster`` for kube-apiserver, kube-scheduler, the controllers and the cluster-watcher, an
always-leader for the Lease, and a ``SimClock`` (``ebb.adapters.clock``) for the clock: simulated "now" and
simulated intervals alike, so every service keeps its settings in its own units (a 15 s validation delay is
15 simulated seconds at any speed) and nothing is scaled here. The consolidation-planner (which also
writes the ebb.sh/drifted annotation, on the simulated Nodes) and the termination-executor then run their
own ``app.run`` unchanged. The
interruption-ingester has no cloud to listen to here. With ``api_port`` the decisions-api serves the same
store and bus on 127.0.0.1 (explanations, budgets, plans, holds, decisions and the event stream, all in
simulated time).

It stops after ``duration`` of simulated time, or with ``until_stable`` once nothing has happened for
``stable_for`` simulated seconds: no live decision, no Pending pod that could be bound, no new decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.clock import SimClock, until_any
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import async_url, upgrade_async
from ebb.adapters.store.models import Decision
from ebb.core.cluster import ClusterView
from ebb.core.decision import LIVE
from ebb.core.snapshot import parse_documents
from ebb_consolidation_planner import app as planner_app
from ebb_consolidation_planner.leader import AlwaysLeader
from ebb_consolidation_planner.settings import Settings as PlannerSettings
from ebb_embedded.cluster import SimulatedCluster
from ebb_termination_executor import app as executor_app
from ebb_termination_executor.settings import Settings as ExecutorSettings

log = structlog.get_logger("ebb_embedded")


@dataclass(frozen=True)
class EmbeddedOptions:
    #: the simulated time the run starts at
    start: datetime
    #: simulated seconds per real second
    speed: float = 60.0
    #: stop after this much simulated time
    duration: timedelta = timedelta(hours=2)
    #: stop once nothing happened for ``stable_for`` (simulated)
    until_stable: bool = False
    stable_for: timedelta = timedelta(minutes=10)
    #: a SQLite file to keep the decisions in (default: a temporary one, removed at the end)
    database: Path | None = None
    #: how often (real seconds) ``report`` is called
    report_every: float = 1.0
    spot_to_spot: bool = False
    cluster: str = "embedded"
    #: serve the decisions-api on 127.0.0.1:api_port (None: not at all)
    api_port: int | None = None
    #: the bearer token the API expects
    api_token: str = ""


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
    passes: int = 0

    def by_state(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (state, _method), n in self.decisions.items():
            totals[state] = totals.get(state, 0) + n
        return totals

    @property
    def live(self) -> int:
        return sum(n for (state, _m), n in self.decisions.items() if state in LIVE)


@dataclass
class Summary:
    start: Status
    end: Status
    #: why the run stopped: duration, stable or stopped
    stopped_because: str
    database: Path | None


def _sqlite_engine(path: Path) -> AsyncEngine:
    engine = create_async_engine(async_url(f"sqlite:///{path}"), connect_args={"timeout": 30})

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


async def _decision_counts(engine: AsyncEngine, cluster: str) -> dict[tuple[str, str], int]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            select(Decision.state, Decision.method, func.count()).where(Decision.cluster == cluster)
            .group_by(Decision.state, Decision.method))
        return {(str(state), str(method)): int(n) for state, method, n in rows}


def _prices(documents: Iterable[Mapping[str, Any]], now: datetime) -> dict[str, float]:
    """node -> hourly price, from the snapshot the run starts with (the simulated cluster launches nothing)."""
    view = ClusterView.build(parse_documents(documents, bundled_catalog), now)
    return dict(view.price)


class _QuietServer:
    """uvicorn's server without its signal handling: ``ebb run`` owns SIGINT and SIGTERM."""

    @staticmethod
    def build(config: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:
                yield

        return Server(config)


async def _serve_api(options: EmbeddedOptions, store: DecisionStore, bus: InMemoryBus, clock: SimClock,
                     stop: asyncio.Event) -> None:
    """The decisions-api on the embedded store and bus, until ``stop``."""
    import uvicorn
    from pydantic import SecretStr

    from ebb.core.methods.base import EngineOptions
    from ebb_decisions_api.app import create_app
    from ebb_decisions_api.settings import Settings as ApiSettings

    settings = ApiSettings(token=SecretStr(options.api_token), cluster=options.cluster, host="127.0.0.1",
                           port=options.api_port or 0)
    app = create_app(settings, store, bus=bus,
                     options=EngineOptions(spot_to_spot=options.spot_to_spot), clock=clock)
    server = _QuietServer.build(uvicorn.Config(app, host="127.0.0.1", port=options.api_port or 0, log_config=None,
                                               log_level="warning", timeout_graceful_shutdown=2))
    serving = asyncio.create_task(server.serve())
    ended = asyncio.Event()
    serving.add_done_callback(lambda _task: ended.set())
    await until_any(ended, stop)
    server.should_exit = True
    await serving


async def run_embedded(
    documents: Iterable[Mapping[str, Any]],
    options: EmbeddedOptions,
    stop: asyncio.Event,
    *,
    report: Callable[[Status], None] | None = None,
    cluster_ready: Callable[[SimulatedCluster], None] | None = None,
) -> Summary:
    """Run ebb on a simulated cluster made of ``documents`` until the duration is over, it is stable, or
    ``stop`` is set. ``report`` is called with the status every ``report_every`` real seconds and at the end;
    ``cluster_ready`` is given the simulated cluster before the services start (tests inspect it)."""
    clock = SimClock(options.start, options.speed)
    bus = InMemoryBus(clock=clock, source="/ebb/embedded")
    cluster = SimulatedCluster(documents, bus, clock, bundled_catalog=bundled_catalog)
    prices = _prices(cluster.documents(), options.start)
    if cluster_ready is not None:
        cluster_ready(cluster)

    async with contextlib.AsyncExitStack() as stack:
        if options.database is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ebb-embedded-"))
            db_path = Path(tmp) / "ebb.sqlite"
        else:
            db_path = options.database
            db_path.parent.mkdir(parents=True, exist_ok=True)
        engine = _sqlite_engine(db_path)
        stack.push_async_callback(engine.dispose)
        await upgrade_async(engine)
        # one store for the planner, the executor and the API, on the one SQLite engine
        store = DecisionStore(engine, options.cluster)

        def status() -> Status:
            nodes = cluster.nodes()
            names = {str(n["metadata"]["name"]) for n in nodes}
            return Status(
                now=clock(), elapsed=clock.elapsed(), nodes=len(nodes),
                pods=sum(1 for o in cluster.objects.values() if o.get("kind") == "Pod"),
                pending_pods=len(cluster.pending_pods()),
                cost_per_hour=sum(p for n, p in prices.items() if n in names)
                + sum(p for n, (_at, p) in cluster.launched.items() if n in names and n not in prices),
                evictions=cluster.evictions, evictions_refused=cluster.evictions_refused,
                nodes_deleted=cluster.nodes_deleted)

        clock.restart()
        first = status()
        await cluster.publish_all()
        services_stop = asyncio.Event()
        planners: list[Any] = []
        planner_settings = PlannerSettings(
            cluster=options.cluster, debounce_seconds=1.0, pass_interval_seconds=10.0,
            validation_delay_seconds=15.0, spot_to_spot=options.spot_to_spot)
        executor_settings = ExecutorSettings(
            cluster=options.cluster, eviction_deadline_seconds=600.0,
            eviction_backoff_initial_seconds=0.5, eviction_backoff_max_seconds=10.0,
            poll_interval_seconds=0.5, replacement_ready_timeout_seconds=600.0)
        tasks = [
            asyncio.create_task(planner_app.run(planner_settings, services_stop, bus=bus, store=store,
                                                leader=AlwaysLeader(), clock=clock, annotator=cluster,
                                                planner_ready=planners.append), name="consolidation-planner"),
            asyncio.create_task(executor_app.run(executor_settings, services_stop, bus=bus, node_api=cluster,
                                                 store=store, clock=clock,
                                                 provider=NodeProvider("simulated", cluster, cluster)),
                                name="termination-executor"),
            asyncio.create_task(cluster.run_scheduler(services_stop, delay=1.0),
                                name="kube-scheduler"),
        ]
        await cluster.schedule_pending()  # pods Pending in the snapshot
        if options.api_port is not None:
            tasks.append(asyncio.create_task(_serve_api(options, store, bus, clock, services_stop),
                                             name="decisions-api"))
        reason = "stopped"
        last_change = clock()
        last_seen: tuple[Any, ...] = ()
        last_report = -float("inf")
        loop = asyncio.get_running_loop()
        # the status is looked at every simulated second, but no more often than every 10 ms and at least
        # every 0.2 s of the event loop (it reads the database)
        look_every = min(max(1.0, 0.01 * options.speed), 0.2 * options.speed)
        try:
            while not stop.is_set():
                for task in tasks:
                    if task.done():
                        task.result()
                        raise RuntimeError(f"the {task.get_name()} task ended unexpectedly")
                current = status()
                current.decisions = await _decision_counts(engine, options.cluster)
                current.passes = planners[0].passes if planners else 0
                seen = (current.nodes, current.pods - current.pending_pods, tuple(sorted(current.decisions.items())))
                if seen != last_seen or current.live:
                    last_seen = seen
                    last_change = current.now
                if report is not None and loop.time() - last_report >= options.report_every:
                    last_report = loop.time()
                    report(current)
                if current.elapsed >= options.duration:
                    reason = "duration"
                    break
                if options.until_stable and current.passes > 0 and current.now - last_change >= options.stable_for:
                    reason = "stable"
                    break
                await clock.sleep(look_every, stop)
        finally:
            services_stop.set()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            for task, result in zip(tasks, done, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                    log.error("service failed", service=task.get_name(), error=repr(result))
        end = status()
        end.decisions = await _decision_counts(engine, options.cluster)
        end.passes = planners[0].passes if planners else 0
        if report is not None:
            report(end)
        return Summary(start=first, end=end, stopped_because=reason, database=options.database)
