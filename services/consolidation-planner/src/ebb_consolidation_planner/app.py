"""The composition root: the bus, the snapshot store, the decisions store, the Lease, the Kubernetes event
recorder, the Node annotator (ebb.sh/drifted) and the planner, the consumers that feed it and the outbox relay that
publishes what its decisions send (``ebb.adapters.store.outbox``).

Every replica consumes ebb.cluster.objects with a consumer group of its own (each needs the whole cluster, a
follower too, to take over warm). ebb.interruptions is consumed by the leader only, in
one consumer group shared by all replicas (``<group>-interruptions``, also the consumer name in
processed_messages): a replica starts consuming when it becomes the leader and stops when it loses the
leadership, so the next leader continues from the last committed offset and no interruption is lost or
applied by a follower; a message applied but not committed is recognised by its id.

In shadow mode (``Settings.mode``, docs/shadow.md) the store is a shadow store (it sends no message: no command
reaches the executor) and the planner is given no Kubernetes writer: no event recorder, no node annotator, no
DisruptionPolicy status writer, whatever the settings or the arguments say. Its one write to the cluster is its
Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Literal

import structlog

from ebb.adapters.bus import Bus
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.engine_options import read_engine_options
from ebb.adapters.health import serve_health
from ebb.adapters.heap import LongLivedHeap
from ebb.adapters.kube.client import kube_client, ping_apiserver
from ebb.adapters.kube.events import EventRecorder, kube_sink
from ebb.adapters.kube.node_api import KubeNodeApi
from ebb.adapters.metrics import register_consumer_lag
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.outbox import BeforePublish, OutboxRelay
from ebb.adapters.store.port import PLANNER, Store
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_INTERRUPTIONS, DisruptionCommand, DisruptionEvent, Message
from ebb.core.conflicts import ConflictSettings
from ebb.core.drain import api_pod, reschedulable_keys
from ebb.core.events import InvolvedObject
from ebb.core.methods.base import EngineOptions
from ebb_consolidation_planner.annotator import KubeNodeAnnotator, NodeAnnotator
from ebb_consolidation_planner.leadership import Leadership
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.pass_inputs import PassInputs
from ebb_consolidation_planner.passes import PassPublisher
from ebb_consolidation_planner.planner import LEADERSHIP_POLL, LivePods, Planner, new_decision_id, utcnow
from ebb_consolidation_planner.policy_status import KubePolicyStatus, PolicyStatusWriter
from ebb_consolidation_planner.settings import Settings
from ebb_consolidation_planner.shadow import ShadowWatch

log = structlog.get_logger("ebb_consolidation_planner")


async def run(
    settings: Settings,
    stop: asyncio.Event,
    *,
    bus: Bus | None = None,
    store: Store | None = None,
    leader: Leadership | None = None,
    metrics: Metrics | None = None,
    clock: Clock | Callable[[], datetime] = utcnow,
    started: asyncio.Event | None = None,
    planner_ready: Callable[[Planner], None] | None = None,
    recorder: EventRecorder | None = None,
    annotator: NodeAnnotator | None = None,
    decision_ids: Callable[[], str] | None = None,
    store_revision: Callable[[], int] | None = None,
    live_pods: LivePods | None = None,
    objects: SnapshotStore | None = None,
    policy_status: PolicyStatusWriter | None = None,
) -> None:
    """Plan until ``stop`` is set. ``bus`` (e.g. an ``InMemoryBus``), ``store`` and ``leader`` replace the
    ones built from ``settings`` (no Kubernetes client is made when a leader is given: then Kubernetes events go
    to ``recorder``, the ebb.sh/drifted annotations to ``annotator``, the DisruptionPolicies' ConflictFree
    condition to ``policy_status``, or nowhere, and a command is checked
    against the pods ``live_pods`` lists, or not at all); ``started`` is set once
    the topic was read and the loops run. ``clock`` (``ebb.adapters.clock``) gives "now" and times every wait:
    the planner's, the Lease's and the event recorder's. ``decision_ids`` makes the ids of new decisions
    (default: random UUIDs). ``store_revision`` counts the writes to ``store`` when this process makes them all
    (the embedded mode): a pass then knows the store unchanged without reading it (``PassInputs``).
    ``objects`` is the empty store the planner fills from ebb.cluster.objects (default: a new ``SnapshotStore``)."""
    clock = clock_of(clock)
    objects = objects if objects is not None else SnapshotStore()
    objects.keep_pod_events(clock.now)  # consolidateAfter sees the pods that left a node without a NodeClaim
    shadow = settings.mode == "shadow"
    if shadow:  # the gate: a shadow planner has no writer to the cluster
        recorder, annotator, policy_status = None, None, None
        if store is not None and not store.shadow:
            raise ValueError("shadow mode needs a shadow store (DecisionStore(..., shadow=True))")
    identity = settings.holder_identity()
    metrics = metrics or Metrics()
    async with contextlib.AsyncExitStack() as stack:
        readiness = serve_health(stack, settings, metrics.registry)
        readiness.condition("snapshot", "reading ebb.cluster.objects")
        if bus is None:
            from ebb.adapters.bus import KafkaBus  # aiokafka: the distributed mode only

            kafka = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-consolidation-planner")
            readiness.probe("kafka", kafka.ping)
            bus = await stack.enter_async_context(kafka)
        if store is None:
            from ebb.adapters.store.decision_store import DecisionStore  # SQLAlchemy: only for a database

            store = DecisionStore.from_url(settings.database_url, settings.cluster,
                                           ledger_ttl=settings.ledger_ttl_seconds, shadow=shadow)
            stack.push_async_callback(store.close)
            readiness.probe("postgresql", store.ping)
        if leader is None:
            from ebb_consolidation_planner.leader import LeaseElector  # the Kubernetes client: only here

            api = await stack.enter_async_context(
                kube_client(settings.kubeconfig, settings.kube_context, component="ebb-consolidation-planner"))
            readiness.probe("apiserver", lambda: ping_apiserver(api))
            leader = LeaseElector(api, name=settings.lease_name, namespace=settings.lease_namespace,
                                  identity=identity, duration=settings.lease_duration_seconds,
                                  renew=settings.lease_renew_seconds, clock=clock)
            if recorder is None and settings.events_enabled and not shadow:
                recorder = EventRecorder(kube_sink(api), component=settings.events_component, instance=identity,
                                         namespace=settings.events_namespace, uid_of=_uid_of(objects),
                                         qps=settings.events_qps, max_queue=settings.events_queue, clock=clock)
            if annotator is None and settings.annotate_nodes and not shadow:
                annotator = KubeNodeAnnotator(api)
            if policy_status is None and settings.check_conflicts and settings.write_policy_status and not shadow:
                policy_status = KubePolicyStatus(api)
            if live_pods is None:
                live_pods = _live_pods(KubeNodeApi(api))
        register_consumer_lag(metrics.registry, bus)
        interruptions = f"{settings.group}-interruptions"
        options = engine_options(settings)
        heap = LongLivedHeap() if settings.freeze_heap else None
        if heap is not None:
            stack.callback(heap.release)
        planner = Planner(bus, objects, store, leader, metrics=metrics, debounce=settings.debounce_seconds,
                          interval=settings.pass_interval_seconds,
                          validation_delay=settings.validation_delay_seconds,
                          options=options, conflict_settings=conflict_settings(settings, options),
                          policy_status=policy_status,
                          clock=clock, recorder=recorder,
                          interruption_consumer=interruptions, annotator=annotator,
                          decision_ids=decision_ids or new_decision_id, live_pods=live_pods,
                          inputs=PassInputs(objects, store, reuse=settings.reuse_passes, writes=store_revision),
                          pass_publisher=PassPublisher(bus, settings.cluster) if settings.publish_passes else None,
                          shadow=ShadowWatch(store) if shadow else None,
                          heap=heap, require_synced=store_revision is None)
        # every message of a decision goes out through the outbox: what this process wrote at once, what a planner
        # that stopped left within relay_poll_seconds (the embedded mode's planner and store live and die together:
        # no poll, and the sent rows are kept with the decisions)
        embedded = store_revision is not None
        relay = OutboxRelay(store, bus, PLANNER, clock=clock, poll=None if embedded else settings.relay_poll_seconds,
                            keep_sent=None if embedded else settings.outbox_keep_seconds,
                            before_publish=exit_before(settings.exit_at))
        if planner_ready is not None:
            planner_ready(planner)
        # the topic's ends before the snapshot is read: the consumer starts there, so it applies only what is
        # newer than the snapshot (from the beginning it would apply every older record over it once more)
        ends = await bus.end_offsets(TOPIC_CLUSTER_OBJECTS)
        planner.follow_from(ends)
        count = await seed_snapshot(objects, bus, planner.note_synced)
        readiness.mark("snapshot", detail=f"{count} objects")
        metrics.synced.set(0 if planner.unsynced_kinds() else 1)
        planner.changed.set()
        group = f"{settings.group}-{uuid.uuid4().hex[:12]}"
        log.info("consolidation-planner starting", objects=count, group=group, mode=settings.mode)
        consumer_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], group, planner.handle, stop=consumer_stop,
                                            start_at={TOPIC_CLUSTER_OBJECTS: ends}), name="cluster-objects"),
            asyncio.create_task(leader.run(stop), name="leader"),
            asyncio.create_task(planner.run(stop), name="planner"),
            asyncio.create_task(relay.run(stop), name="outbox"),
            asyncio.create_task(consume_while_leading(bus, interruptions, planner, leader, stop),
                                name="interruptions"),
        ]
        if recorder is not None:
            tasks.append(asyncio.create_task(recorder.run(stop), name="kube-events"))
        if started is not None:
            started.set()
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            if not stop.is_set():
                raise RuntimeError(f"the {next(iter(done)).get_name()} task ended unexpectedly")
            await asyncio.gather(*tasks[1:])
        finally:
            stop.set()
            consumer_stop.set()
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        log.info("consolidation-planner stopped", passes=planner.passes, proposed=planner.proposed,
                 approved=planner.approved, rejected=planner.rejected, interrupted=planner.interrupted,
                 relayed=relay.sent,
                 kube_events_written=recorder.written if recorder is not None else 0,
                 drift_annotations_written=planner.annotations.patched if planner.annotations is not None else 0)


def engine_options(settings: Settings) -> EngineOptions:
    """The engine options of the planner's passes: the cluster-wide object's (``settings.engine_options``) over the
    planner's own settings."""
    options = read_engine_options(settings.engine_options, EngineOptions(
        spot_to_spot=settings.spot_to_spot, explain=settings.explain,
        require_nodeclaim=settings.provider == "karpenter"))
    # a NodePool that conflicts with Karpenter is refused in the enforce mode (ebb.core.conflicts)
    return replace(options, refuse_conflicts=conflict_settings(settings, options) if settings.mode == "enforce"
                   else None)


def conflict_settings(settings: Settings, options: EngineOptions) -> ConflictSettings | None:
    """What the planner's conflict check needs (None: no check): the provider the engine options name (karpenter
    when they need NodeClaims) and whether ebb's interruption-ingester runs."""
    if not settings.check_conflicts:
        return None
    provider = "karpenter" if options.require_nodeclaim else settings.provider
    return ConflictSettings(provider, interruption_ingester=settings.interruption_ingester)


#: the exit status of a process stopped by ``exit_at`` (EX_SOFTWARE)
EXIT_AT_STATUS = 70


def exit_before(point: Literal["proposed", "approved"] | None) -> BeforePublish | None:
    """Fault injection (``Settings.exit_at``, for tests): a hook of the outbox relay that ends the process at once,
    without any clean-up, as a crash would, before it publishes the first Proposed event (``proposed``: the
    proposal is committed, nothing of it published or approved) or the first command (``approved``: the approval
    is committed, its command not published)."""
    if point is None:
        return None

    def hook(_topic: str, messages: Sequence[Message]) -> None:
        for message in messages:
            if (point == "proposed" and isinstance(message, DisruptionEvent) and message.phase == "Proposed") or (
                    point == "approved" and isinstance(message, DisruptionCommand)):
                log.warning("exiting before publishing, as EXIT_AT asks", exit_at=point,
                            decision_id=getattr(message, "decision_id", None))
                os._exit(EXIT_AT_STATUS)

    return hook


def _live_pods(nodes: KubeNodeApi) -> LivePods:
    """The pods a disruption of a node would have to move, as the apiserver lists them."""
    async def live_pods(node: str) -> frozenset[str]:
        return reschedulable_keys(map(api_pod, await nodes.list_pods(node)))

    return live_pods


def _uid_of(objects: SnapshotStore) -> Callable[[InvolvedObject], str | None]:
    def uid_of(ref: InvolvedObject) -> str | None:
        raw = objects.get(ref.kind, ref.namespace, ref.name) or {}
        uid = (raw.get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    return uid_of


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    """A done callback that sets ``event``."""
    return lambda _task: event.set()


async def consume_while_leading(bus: Bus, group: str, planner: Planner, leader: Leadership,
                                stop: asyncio.Event) -> None:
    """Consume ebb.interruptions in the shared ``group`` while this replica is the leader, until ``stop``; the
    leadership is looked at every ``LEADERSHIP_POLL`` seconds of the planner's clock (never again when it is
    fixed: a single replica)."""
    clock = planner.clock
    while not stop.is_set():
        if not leader.is_leader:
            await clock.sleep(LEADERSHIP_POLL, stop)
            continue
        consumer_stop = asyncio.Event()
        task = asyncio.create_task(bus.consume([TOPIC_INTERRUPTIONS], group, planner.handle_interruption,
                                               stop=consumer_stop))
        ended = asyncio.Event()
        task.add_done_callback(_setter(ended))
        log.info("consuming interruptions", group=group)
        try:
            while not stop.is_set() and leader.is_leader and not task.done():
                await clock.wait(ended, stop, within=None if leader.fixed else LEADERSHIP_POLL)
        finally:
            consumer_stop.set()
            try:
                await task
            except Exception as e:  # a handler that kept failing, Kafka away: start again while leading
                log.warning("consuming interruptions failed", error=repr(e))
        log.info("stopped consuming interruptions", group=group)
