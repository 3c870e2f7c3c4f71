"""The planner's handlers: cluster objects in, validated and budgeted disruption commands out.

``Planner.handle`` applies ebb.cluster.objects records to a ``SnapshotStore`` and wakes the loop;
``Planner.run`` runs an engine pass (``ebb.core.engine.run_pass``) at most every ``debounce`` seconds after
a change and at least every ``interval`` seconds, but only while this replica is the leader. Active holds
from the store are merged into the snapshot, so holds made over REST take effect.

Each command of a pass becomes a decision row (state proposed, with explanation, nodes, replacements and
savings) and a Proposed event per node. After ``validation_delay`` seconds the command is re-validated
(``ebb.core.validation.validate``) against the then-current snapshot and, with ``live_pods``, against the
pods the apiserver lists on its nodes (``view_behind``: the view may lag the cluster): a stale command is
rejected with the reason; a valid one takes its budget in the ledger (``DecisionStore.approve``), is
approved, published on ebb.disruption.commands (keyed by NodePool) and announced by an Approved event per
node. A node that already has a live decision (proposed, approved, executing) is never proposed or approved
again.

Kubernetes Events (``ebb.core.events``: Unconsolidatable, DisruptionBlocked, ConsolidationCandidate /
Approved / Rejected, the interruption reasons) are handed to an ``EventRecorder``, which de-duplicates them
and writes them at a bounded rate; a failure there never stops planning.

After each pass the findings of its view (``ebb.core.findings``: Expired, Drifted, Empty, Consolidatable,
with since when) are kept, their changes logged, the findings of a decision's nodes put into its explanation
(``explanation["findings"]``), and the ``ebb.sh/drifted`` annotation of every Node brought in line with its
Drifted finding (``annotator.DriftAnnotations``); with ``pass_publisher`` the pass is published on ebb.planner.passes
(``passes.PassPublisher``), where the decisions-api reads why each node is left alone. ``handle_interruption``
(ebb.interruptions, consumed by the leader only) acts at once, outside the pass and its budgets: a decision
``interruption``/``Interrupted``/``delete`` written approved with the message id in processed_messages in
one transaction (``DecisionStore.interrupt``), then its command and Proposed/Approved events; a rebalance
recommendation only gives an event and a log line.

A command's id is derived from its decision id (``command_id``), so publishing it again is harmless: the
executor applies a command id once. ``republish`` sends the command of every decision still ``approved``
(not yet picked up by the executor) whose last publish by this replica, or whose approval when this
replica never published it, is ``republish_after`` seconds old: on becoming the leader and every
``republish_interval`` seconds; the wait doubles with every republish of the same command (up to 5 min), so
an executor that is down for long is not flooded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from tenacity import RetryCallState

from ebb.adapters.backoff import Backoff
from ebb.adapters.bus import Bus, Delivery
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.live import core_holds, live_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store import decisions
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.models import Decision as DecisionRow
from ebb.adapters.store.models import Hold
from ebb.contracts import (
    TOPIC_DISRUPTION_COMMANDS,
    TOPIC_DISRUPTION_EVENTS,
    ClusterObject,
    DisruptionCommand,
    DisruptionEvent,
    Interruption,
)
from ebb.contracts.messages import Phase
from ebb.core import events as kube_events
from ebb.core.causes import Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.decision import Decision, DecisionNode, State, transition
from ebb.core.demand import recorded
from ebb.core.engine import PassResult, run_pass
from ebb.core.findings import Findings, diff, findings, with_since
from ebb.core.methods import CONSOLIDATION_REASONS
from ebb.core.methods.base import Command, EngineOptions
from ebb.core.model import REASONS, DemandSample, Snapshot
from ebb.core.validation import validate, view_behind
from ebb_consolidation_planner.annotator import DriftAnnotations, NodeAnnotator
from ebb_consolidation_planner.leadership import Leadership
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.passes import PassPublisher

#: the ``namespace/name`` of the pods the apiserver lists on a node that a disruption would have to move
#: (``ebb.core.drain.reschedulable_keys``)
LivePods = Callable[[str], Awaitable[frozenset[str]]]

log = structlog.get_logger("ebb_consolidation_planner")

ORPHANED = "the planner that proposed it stopped before validating it"
#: the longest wait between two republishes of one command (the wait doubles from ``republish_after``)
REPUBLISH_MAX_WAIT = 300.0
#: how often (seconds of the planner's clock) a follower looks whether it leads now, and a leader whether it
#: still does (the Lease is renewed in the background; ``Leadership.is_leader`` is only read)
LEADERSHIP_POLL = 0.2
#: the waits between the attempts to publish an approved command (0.2 s doubling to 5 s, no jitter)
PUBLISH_BACKOFF = Backoff(initial=0.2, maximum=5.0, jitter=0.0)
#: the namespace of command ids: uuid5(COMMANDS, decision id)
COMMANDS = uuid.UUID("6f1c2e4a-9b1d-5c3e-8a7f-0e6b5d4c3b2a")
#: the namespace of interruption decision ids: uuid5(INTERRUPTIONS, message id)
INTERRUPTIONS = uuid.UUID("0b8e7d6c-5a4f-5e3d-9c2b-1a0f9e8d7c6b")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_decision_id() -> str:
    """A new decision's id: ``dec-`` and a random UUID."""
    return f"dec-{uuid.uuid4().hex}"


def command_id(decision_id: str) -> uuid.UUID:
    """The command id of a decision: the same on every (re)publish, so the executor applies it once."""
    return uuid.uuid5(COMMANDS, decision_id)


@dataclass
class _LastPass:
    """The last computed pass: what it was computed from (`Planner.plan_once`'s inputs) and its answer."""

    inputs: tuple[object, ...]
    view: ClusterView
    result: PassResult
    found: Findings
    #: the annotator's failed patches after the pass (a reused pass retries a patch that failed since)
    annotation_failures: int

    def answer(self) -> tuple[ClusterView, PassResult, Findings]:
        return self.view, self.result, self.found


class NotLeading(RuntimeError):
    """An interruption reached a replica that is not (any more) the leader: left uncommitted for the next."""


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def command_of(row: DecisionRow) -> DisruptionCommand:
    """The wire command of an approved decision row (for republishing); ValueError when the row does not
    make one."""
    try:
        decision = decisions.decision_of(row)
    except (KeyError, TypeError) as e:
        raise ValueError(f"decision {row.id}: its row does not hold a decision: {e!r}") from e
    return DisruptionCommand.of_decision(decision, id=command_id(decision.id))


def facts(decision_id: str, command: Command) -> kube_events.DecisionFacts:
    return kube_events.DecisionFacts(decision_id, command.method, command.reason, command.action, command.nodes,
                                     command.savings)


class Planner:
    def __init__(
        self,
        bus: Bus,
        objects: SnapshotStore,
        store: DecisionStore,
        leader: Leadership,
        *,
        metrics: Metrics | None = None,
        debounce: float = 1.0,
        interval: float = 10.0,
        validation_delay: float = 15.0,
        options: EngineOptions | None = None,
        clock: Clock | Callable[[], datetime] = utcnow,
        recorder: EventRecorder | None = None,
        republish_after: float = 10.0,
        republish_interval: float = 5.0,
        interruption_consumer: str = "ebb-consolidation-planner-interruptions",
        annotator: NodeAnnotator | None = None,
        decision_ids: Callable[[], str] = new_decision_id,
        reuse_passes: bool = False,
        store_revision: Callable[[], int] | None = None,
        live_pods: LivePods | None = None,
        pass_publisher: PassPublisher | None = None,
    ) -> None:
        self.bus = bus
        self.objects = objects
        self.store = store
        self.leader = leader
        self.metrics = metrics or Metrics()
        self.debounce = debounce
        self.interval = interval
        self.validation_delay = validation_delay
        self.options = options or EngineOptions()
        #: "now" (decisions, events, the engine) and every interval of the loop (``ebb.adapters.clock``)
        self.clock = clock_of(clock)
        self.recorder = recorder
        self.republish_after = republish_after
        self.republish_interval = republish_interval
        #: the consumer name of ebb.interruptions in processed_messages
        self.interruption_consumer = interruption_consumer
        #: makes the id of each proposed decision (the embedded mode's come from its seed: decisions approved at
        #: the same instant are taken up in the order of their ids)
        self.decision_ids = decision_ids
        #: the pods the apiserver lists on a node, asked before approving (None: the view is the cluster's
        #: own, as in the embedded mode, and is not checked)
        self.live_pods = live_pods
        #: publishes each computed pass on ebb.planner.passes for the decisions-api (None: not published)
        self.pass_publisher = pass_publisher
        self.changed = asyncio.Event()
        self._stop = asyncio.Event()
        #: decision id -> its validation task
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._pending_nodes: dict[str, str] = {}
        #: node -> its findings as of the last pass (since filled in with the first-seen time where unknown)
        self.findings: Findings = {}
        #: the ebb.sh/drifted annotations (None: not annotating)
        self.annotations = DriftAnnotations(annotator) if annotator is not None else None
        #: node -> its NodeClaim, as of the last pass
        self._claims: dict[str, str] = {}
        #: decision id -> monotonic time this replica last published (or first saw) its command
        self._published: dict[str, float] = {}
        #: the approved decisions as last read, at that store revision (`store_revision`): read again after a write
        self._approved: tuple[int, list[Any]] | None = None
        #: decision id -> how many times this replica republished its command (the wait doubles each time)
        self._republishes: dict[str, int] = {}
        #: answer a pass from the last one while its inputs are unchanged and ``now`` is before its ``revisit_at``
        self.reuse_passes = reuse_passes
        #: a count of the store's writes, when this process makes them all (the embedded mode): the inputs a pass
        #: reads from the store are then known unchanged without reading them
        self.store_revision = store_revision
        #: what a pass read from the store (live nodes, launched replacements, holds with the expired ones), at that
        #: store revision (`store_revision`): read again after a write
        self._store_reads: tuple[int, set[str], dict[str, str], list[Hold]] | None = None
        self._last: _LastPass | None = None
        #: what the pods of each NodePool with a demandWindow requested at the passes computed lately
        #: (`ebb.core.demand.recorded`), handed to every pass and validation in ``Snapshot.demand``; saved in the
        #: store after each change and read back when this replica becomes the leader, except in the embedded mode
        #: (``store_revision``), whose planner and store live and die together (docs/architecture.md)
        self._demand: tuple[DemandSample, ...] = ()
        #: passes due (computed or reused) and, of those, the ones answered from the last computed pass
        self.passes = 0
        self.passes_reused = 0
        self.proposed = 0
        self.approved = 0
        self.rejected = 0
        self.interrupted = 0
        self.republished = 0

    # -- input --------------------------------------------------------------------------------------------

    async def handle(self, delivery: Delivery) -> None:
        """A bus handler for ebb.cluster.objects: apply the object and wake the loop when state changed."""
        message = delivery.message
        if isinstance(message, ClusterObject) and self.objects.apply(message):
            self.changed.set()

    def _findings_of(self, nodes: Iterable[str]) -> list[dict[str, str | None]]:
        """The explanation's ``findings``: the last pass's findings of ``nodes``."""
        return [{"node": f.node, "finding": f.kind, "reason": f.reason,
                 "since": f.since.isoformat() if f.since is not None else None}
                for n in nodes for f in self.findings.get(n, [])]

    def _keep_findings(self, found: Findings, now: datetime) -> None:
        """The pass's findings become the held ones (first-seen times carried over); the changes are logged."""
        current = with_since(self.findings, found, now)
        for change in diff(self.findings, current):
            f = change.finding
            if change.cleared:
                log.info("finding cleared", node=f.node, finding=f.kind)
            else:
                log.info("finding raised", node=f.node, finding=f.kind, reason=f.reason,
                         since=f.since.isoformat() if f.since is not None else None)
        self.findings = current

    async def _annotate(self, view: ClusterView) -> None:
        if self.annotations is not None:
            await self.annotations.sync(view.snapshot.nodes, self.findings)

    def _kube(self, events: Iterable[kube_events.KubeEvent]) -> None:
        if self.recorder is not None:
            try:
                self.recorder.record(events)
            except Exception as e:  # events are for people; planning goes on
                log.warning("recording Kubernetes events failed", error=repr(e))

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Plan on changes (debounced) and every ``interval`` seconds while leader, until ``stop``. Every wait is
        on the planner's clock: the debounce, the interval, the republish interval, the validation delay and
        the tick (0.2 s, or the interval when shorter) at which the loop looks at the leadership. A fixed leadership
        (``Leadership.fixed``: the embedded mode's single replica) is not looked at again: the loop then sleeps until
        a change, the next pass or the next republish."""
        self._stop = stop
        last = -float("inf")
        last_republish = -float("inf")
        leading = False
        tick = min(LEADERSHIP_POLL, self.interval)
        try:
            while not stop.is_set():
                await self.clock.wait(self.changed, stop, within=self._next_look(tick, last, last_republish))
                if stop.is_set():
                    break
                if not self.leader.is_leader:
                    if leading:
                        log.info("not the leader any more: planning stopped")
                    leading = False
                    # changes are of no use to a follower (a new leader plans from scratch): wait a tick,
                    # not on the set event, which would wake this loop at once again and again
                    self.changed.clear()
                    await self.clock.sleep(tick, stop)
                    continue
                fresh = not leading
                if fresh:
                    try:
                        orphans = await self.store.reject_orphans(ORPHANED, self.clock(), keep=self._pending)
                    except Exception as e:  # the database is away: try again on the next tick
                        log.warning("rejecting orphaned proposals failed", error=repr(e))
                        continue
                    leading = True
                    if orphans:
                        log.info("orphaned proposals rejected", decisions=orphans)
                    await self._load_demand()
                    last_republish = -float("inf")
                if self.clock.monotonic() - last_republish >= self.republish_interval:
                    last_republish = self.clock.monotonic()
                    try:
                        await self.republish()
                    except Exception as e:
                        log.warning("republishing approved commands failed", error=repr(e))
                since = self.clock.monotonic() - last
                if not fresh and not (self.changed.is_set() and since >= self.debounce) and since < self.interval:
                    if self.changed.is_set():
                        # a change waits out the debounce: sleep until it ends (the set event would
                        # otherwise wake this loop at once, thousands of times a second)
                        await self.clock.sleep(min(self.debounce, self.interval) - since, stop)
                    continue
                self.changed.clear()
                last = self.clock.monotonic()
                try:
                    await self.plan_once()
                except Exception as e:  # the database is away, ...: try again on the next pass
                    log.warning("planning pass failed", error=repr(e))
        finally:
            tasks = list(self._pending.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _next_look(self, tick: float, last: float, last_republish: float) -> float:
        """How long the loop may wait for a change before it looks again: a tick while the leadership can change;
        with a fixed one, until the next pass or republish is due (a single replica wakes only for work)."""
        if not self.leader.fixed:
            return tick
        now = self.clock.monotonic()
        # the same differences the loop compares (``since < interval``), so that in floating point a wait is never
        # 0 while the loop still finds the interval unfinished (it would spin at one instant of virtual time)
        return max(0.0, min(self.interval - (now - last), self.republish_interval - (now - last_republish)))

    async def current_snapshot(self, now: datetime, *, validating: str | None = None) -> Snapshot:
        """The cluster objects' snapshot with the store's active holds merged in, the nodes of other live
        decisions marked as being disrupted (tainted karpenter.sh/disrupted, as the executor will): they are
        neither candidates nor destinations and count against their pool's budget; and the replacements those
        decisions launch named (no candidates until their decision ends: one waits empty while its decision
        drains the old node, and looked empty itself). For the pass, every live decision counts; when
        ``validating`` a decision, only the approved and executing ones (a proposal does not take budget until
        it is approved: the ledger settles that)."""
        snapshot, _inputs = await self._snapshot_and_inputs(now, validating=validating)
        return snapshot

    async def _snapshot_and_inputs(self, now: datetime, *,
                                   validating: str | None = None) -> tuple[Snapshot, tuple[object, ...]]:
        """`current_snapshot`, and what it was made of (the objects' version, the busy nodes, the launched
        replacements, the holds): equal inputs make an equal snapshot. A pass's reads of the store are kept until
        the next write with ``store_revision`` (the embedded mode): reading yields to the event loop (SQLAlchemy
        closes a session in a task of its own), so other tasks run meanwhile and the objects can change before
        they are taken; without a read, a computed pass sees the objects at the same moment as a pass answered
        from the last one, and both give the same run."""
        if validating is None:
            live, launched, holds = await self._pass_store_reads(now)
            busy = live | set(self._pending_nodes)
        else:
            states = (State.APPROVED, State.EXECUTING)
            busy = set(await self.store.live_nodes(exclude=validating, states=states))
            launched = await self.store.live_replacements(exclude=validating, states=states)
            holds = await self.store.list_holds(now)
        objects, version = self.objects.snapshot(), self.objects.version
        inputs = (version, frozenset(busy), tuple(sorted(launched.items())), core_holds(holds))
        snapshot = live_snapshot(objects, holds=holds, busy=busy, launched=launched)
        if self._demand:
            # not an input of its own: a pass records the demand it saw, so the record adds nothing a pass on the
            # same objects does not see already, and what leaves a window is the pass's revisit_at
            snapshot = replace(snapshot, demand=self._demand)
        return snapshot, inputs

    async def _pass_store_reads(self, now: datetime) -> tuple[set[str], dict[str, str], list[Hold]]:
        """The nodes of live decisions, the replacements they launched and the holds in force at ``now``, read
        again only after a write to the store when ``store_revision`` counts them."""
        if self.store_revision is None:
            live = set(await self.store.live_nodes())
            return live, await self.store.live_replacements(), await self.store.list_holds(now)
        revision = self.store_revision()
        reads = self._store_reads
        if reads is None or reads[0] != revision:
            reads = self._store_reads = (revision, set(await self.store.live_nodes()),
                                         await self.store.live_replacements(),
                                         await self.store.list_holds(now, include_expired=True))
        _, live, launched, every_hold = reads
        return set(live), dict(launched), [h for h in every_hold if h.in_force(now)]

    def _reusable(self, inputs: tuple[object, ...], now: datetime) -> _LastPass | None:
        """The last pass, when a pass on ``inputs`` at ``now`` would answer as it did: the same inputs, no
        commands (a command changes the inputs once proposed), and ``now`` not before it nor past its
        ``revisit_at``."""
        last = self._last
        if not self.reuse_passes or last is None or last.inputs != inputs or last.result.commands:
            return None
        revisit = last.result.revisit_at
        if now < last.result.now or (revisit is not None and now >= revisit):
            return None
        return last

    async def plan_once(self) -> PassResult | None:
        """One pass: propose the pass's commands whose nodes are free; None when the snapshot is invalid. With
        ``reuse_passes`` a pass whose inputs are those of the last one, before that one's ``revisit_at``, is
        answered from it (its commands: none; its findings and view) without computing it again; so is a pass whose
        inputs changed in what the snapshot does not read (an equal snapshot)."""
        started = time.perf_counter()
        now = self.clock()
        reused: _LastPass | None = None
        if self.store_revision is not None:
            # every write to the store is this process's: its count stands for what the pass reads from it
            inputs: tuple[object, ...] = (self.objects.version, self.store_revision(),
                                          frozenset(self._pending_nodes))
            reused = self._reusable(inputs, now)
        snapshot: Snapshot | None = None
        if reused is None:
            try:
                snapshot, read = await self._snapshot_and_inputs(now)
            except ValueError as e:  # SnapshotError: an invalid object; plan again once it is fixed
                log.warning("cannot build the snapshot; no pass", error=str(e))
                return None
            if self.store_revision is None:
                inputs = read
                reused = self._reusable(inputs, now)
            last = self._last
            if reused is None and last is not None and last.view.snapshot == snapshot:
                # something changed that the snapshot does not read (a status field it does not parse): the
                # same snapshot gives the same pass, until its revisit_at
                reused = self._reusable(last.inputs, now)
                if reused is not None:
                    reused.inputs = inputs
        if reused is not None:
            # as a computed pass would (a thread's cost included, as the embedded mode's pass_cost counts it)
            view, result, found = await asyncio.to_thread(reused.answer)
            self.passes += 1
            self.passes_reused += 1
            if self.annotations is not None and self.annotations.failed != reused.annotation_failures:
                await self._annotate(view)  # a patch that failed is tried again after every pass
                reused.annotation_failures = self.annotations.failed
            self._kube_pass(view, result)
            return result
        assert snapshot is not None
        view, result, found = await asyncio.to_thread(self._pass, snapshot, now)
        if view.demand_now or self._demand:
            await self._record_demand(recorded(self._demand, view))
        self.metrics.evaluated(time.perf_counter() - started)
        self._observe(view, result)
        self.passes += 1
        self._claims = {n: c.name for n, c in view.claims.items()}
        self._keep_findings(found, now)
        self._kube_pass(view, result)
        if self.pass_publisher is not None:
            await self.pass_publisher.publish(view, result, self.findings, revision=inputs[0], demand=self._demand)
        live = await self.store.live_nodes() if result.commands else {}
        for command in result.commands:
            busy = [n for n in command.nodes if n in live or n in self._pending_nodes]
            if busy:
                log.info("command skipped: its nodes have live decisions", method=command.method, nodes=command.nodes,
                         busy=busy)
                continue
            await self._propose(command, view, now)
        await self._annotate(view)
        if self.reuse_passes:
            self._last = _LastPass(inputs, view, result, found,
                                   self.annotations.failed if self.annotations is not None else 0)
        return result

    async def _load_demand(self) -> None:
        """Take the demand record the last leader saved (the distributed mode): a restarted or new leader then keeps
        what the demand windows' peaks ask for. A store that does not answer leaves the record as it is."""
        if self.store_revision is not None:
            return
        try:
            self._demand = await self.store.load_demand()
        except Exception as e:
            log.warning("reading the demand record failed; demand windows start from the pods as they are",
                        error=repr(e))
            return
        if self._demand:
            log.info("demand record read", samples=len(self._demand))

    async def _record_demand(self, record: tuple[DemandSample, ...]) -> None:
        """Keep ``record`` and, in the distributed mode, save it when it changed (a failed save is logged: the
        record in memory still serves this leader)."""
        changed, self._demand = record != self._demand, record
        if not changed or self.store_revision is not None:
            return
        try:
            await self.store.save_demand(record)
        except Exception as e:
            log.warning("saving the demand record failed", error=repr(e))

    def _kube_pass(self, view: ClusterView, result: PassResult) -> None:
        if self.recorder is not None:
            self._kube(kube_events.pass_events(view, result))

    def _pass(self, snapshot: Snapshot, now: datetime) -> tuple[ClusterView, PassResult, Findings]:
        view = self.options.view_of(snapshot, now)
        return view, run_pass(view, self.options), findings(view)

    def _observe(self, view: ClusterView, result: PassResult) -> None:
        for reason in REASONS:
            consolidation = reason in CONSOLIDATION_REASONS
            eligible = sum(1 for name in view.nodes if view.blocked_reason(name, consolidation) is None)
            self.metrics.eligible_nodes.labels(reason=reason.lower()).set(eligible)
        for row in result.budgets:
            # Karpenter's: the budget's nodes, and the nodes counted against it (deleting, disrupted, NotReady)
            self.metrics.allowed_disruptions.labels(nodepool=row.nodepool, reason=row.reason).set(row.limit)
            self.metrics.nodes_consuming_budgets.labels(nodepool=row.nodepool, reason=row.reason).set(row.disrupting)
        for pool, peak in view.demand_peak.items():
            self.metrics.demand_window(pool, peak, view.capacity[pool])
        self.metrics.moved(result.moves)

    # -- one command --------------------------------------------------------------------------------------

    async def _propose(self, command: Command, view: ClusterView, now: datetime) -> str:
        decision_id = self.decision_ids()
        pools = {n: view.nodes[n].nodepool or "" for n in command.nodes}
        bound = log.bind(decision_id=decision_id)
        explanation: dict[str, Any] = {"text": command.explanation}
        found = self._findings_of(command.nodes)
        if found:
            explanation["findings"] = found
        decision = Decision.of_command(
            decision_id, command, now=now, explanation=explanation,
            nodes=tuple(DecisionNode(n, pools[n], view.nodes[n].instance_type) for n in command.nodes))
        await self.store.propose(decision)
        self.proposed += 1
        bound.info("decision proposed", method=command.method, reason=command.reason, action=command.action,
                   nodes=list(command.nodes), savings_per_hour=round(command.savings, 6),
                   explanation=command.explanation)
        await self._events(decision_id, command.nodes, phase="Proposed", message=command.explanation or "proposed",
                           now=now, bound=bound)
        self._kube(kube_events.proposed(facts(decision_id, command), self._claims))
        for n in command.nodes:
            self._pending_nodes[n] = decision_id
        task = asyncio.create_task(self._validate_later(decision_id, command, pools), name=decision_id)
        self._pending[decision_id] = task
        task.add_done_callback(lambda _t: self._forget(decision_id, command.nodes))
        return decision_id

    def _forget(self, decision_id: str, nodes: tuple[str, ...]) -> None:
        self._pending.pop(decision_id, None)
        for n in nodes:
            if self._pending_nodes.get(n) == decision_id:
                del self._pending_nodes[n]

    async def _validate_later(self, decision_id: str, command: Command, pools: dict[str, str]) -> None:
        bound = log.bind(decision_id=decision_id)
        if await self.clock.sleep(self.validation_delay, self._stop):
            return  # left proposed: the next leader rejects it as orphaned
        try:
            await self._decide(decision_id, command, pools, bound)
        except Exception as e:
            bound.error("validating the decision failed", error=repr(e))
            with contextlib.suppress(Exception):
                await self._rejected(decision_id, command, f"validation failed: {e!r}"[:1000], self.clock(), bound)

    async def _decide(self, decision_id: str, command: Command, pools: dict[str, str], bound: Any) -> None:
        now = self.clock()
        if not self.leader.is_leader:
            await self._rejected(decision_id, command, "the planner lost its leadership before validating", now,
                                 bound)
            return
        snapshot = await self.current_snapshot(now, validating=decision_id)
        view, why = await asyncio.to_thread(self._validate, command, snapshot, now)
        if why is None and self.live_pods is not None:
            why = await self._view_behind(command, snapshot, bound)
        if why is not None:
            if await self._rejected(decision_id, command, why.text, now, bound):
                self.metrics.failed_validation(command.method, len(command.nodes))
            return
        allowed = {p: view.budgets[(p, command.reason)].allowed for p in set(pools.values())
                   if (p, command.reason) in view.budgets}
        counted = {n.name for n in snapshot.nodes if n.deleting or n.being_disrupted}
        approval = await self.store.approve(decision_id, node_pools=pools, reason=command.reason, allowed=allowed,
                                            counted=counted, now=now)
        if not approval.approved and not approval.rejected:
            bound.info("decision left alone: it is no longer proposed", why=approval.reason)
            return
        if not approval.approved:
            self.rejected += 1
            self.metrics.failed_validation(command.method, len(command.nodes))
            bound.info("decision rejected", reason=approval.reason)
            await self._events(decision_id, command.nodes, phase="Rejected", message=approval.reason,
                               now=now, bound=bound)
            self._kube(kube_events.rejected(facts(decision_id, command), self._claims, approval.reason))
            return
        self.approved += 1
        self.metrics.decided(command.action, command.reason, command.method, pools.values())
        assert approval.decision is not None
        wire = DisruptionCommand.of_decision(approval.decision, id=command_id(decision_id))
        bound.info("decision approved", method=command.method, nodes=list(command.nodes), command_id=str(wire.id))
        await self._publish_command(wire, bound)
        await self._events(decision_id, command.nodes, phase="Approved", message="validated and approved",
                           now=now, bound=bound)
        self._kube(kube_events.approved(facts(decision_id, command), self._claims))

    def _validate(self, command: Command, snapshot: Snapshot, now: datetime) -> tuple[ClusterView, StaleCause | None]:
        """`validate`, with the view it ran on: the approval reads the budgets from it."""
        view = self.options.view_of(snapshot, now)
        return view, validate(command, snapshot, now, self.options, view=view)

    async def _view_behind(self, command: Command, snapshot: Snapshot, bound: Any) -> StaleCause | None:
        """Why the command's nodes are not as the view has them, asking the apiserver (``view_behind``); an
        apiserver that does not answer rejects the command too: its view cannot be trusted (Karpenter does not
        disrupt while its cluster state is not synced either)."""
        assert self.live_pods is not None
        try:
            live = {name: await self.live_pods(name) for name in command.nodes}
        except Exception as e:
            bound.warning("the apiserver did not list the command's pods", error=repr(e))
            return StaleCause(Stale.VIEW_UNCHECKED, {"error": repr(e)[:300]})
        return view_behind(snapshot, live)

    async def _rejected(self, decision_id: str, command: Command, why: str, now: datetime, bound: Any) -> bool:
        """Reject the proposed decision; False when it was no longer proposed."""
        if not await self.store.reject(decision_id, why, now):
            return False
        self.rejected += 1
        bound.info("decision rejected", reason=why)
        await self._events(decision_id, command.nodes, phase="Rejected", message=why,
                           now=now, bound=bound)
        self._kube(kube_events.rejected(facts(decision_id, command), self._claims, why))
        return True

    async def _publish_command(self, wire: DisruptionCommand, bound: Any, *, attempts: int = 3) -> bool:
        """Publish an approved command, retrying a little; False when it failed (``republish`` sends it later:
        the decision stays approved)."""
        self._published[wire.decision_id] = self.clock.monotonic()

        def retrying_in(attempt: RetryCallState) -> None:
            error = attempt.outcome.exception() if attempt.outcome else None
            bound.warning("publishing the command failed", attempt=attempt.attempt_number, error=repr(error))

        try:
            async for attempt in replace(PUBLISH_BACKOFF, max_attempts=attempts).retrying(self.clock,
                                                                                          before_sleep=retrying_in):
                with attempt:
                    await self.bus.publish(TOPIC_DISRUPTION_COMMANDS, wire)
        except Exception as e:
            bound.warning("publishing the command failed", attempt=attempts, error=repr(e))
        else:
            self._published[wire.decision_id] = self.clock.monotonic()
            return True
        self._published[wire.decision_id] = self.clock.monotonic()
        bound.error("the approved command could not be published; it will be republished",
                    command_id=str(wire.id), republish_after_seconds=self.republish_after)
        return False

    async def republish(self) -> list[str]:
        """Publish again the command of every approved decision (not yet executing) whose last publish by
        this replica is ``republish_after`` seconds old (doubled per earlier republish, up to
        ``REPUBLISH_MAX_WAIT``) or, when this replica never published it, whose approval is (by the clock) or
        which this replica first saw that long ago. Returns the decision ids republished."""
        if not self.leader.is_leader:
            return []
        mono, now = self.clock.monotonic(), self.clock()
        waiting = await self._approved_decisions()
        ids = {d.id for d in waiting}
        for gone in [d for d in self._published if d not in ids]:
            del self._published[gone]
            self._republishes.pop(gone, None)
        sent: list[str] = []
        for decision in waiting:
            last = self._published.get(decision.id)
            if last is None:
                approved_at = _aware(decision.approved_at or decision.updated_at)
                if (now - approved_at).total_seconds() < self.republish_after:
                    self._published[decision.id] = mono  # first seen now: another replica may be publishing it
                    continue
            elif mono - last < min(self.republish_after * 2 ** self._republishes.get(decision.id, 0),
                                   max(self.republish_after, REPUBLISH_MAX_WAIT)):
                continue
            bound = log.bind(decision_id=decision.id)
            try:
                wire = command_of(decision)
            except ValueError as e:
                self._published[decision.id] = mono
                bound.error("the approved decision cannot be made a command", error=str(e))
                continue
            self._republishes[decision.id] = self._republishes.get(decision.id, 0) + 1
            bound.info("republishing the approved command", command_id=str(wire.id),
                       republishes=self._republishes[decision.id])
            if await self._publish_command(wire, bound, attempts=1):
                self.republished += 1
                sent.append(decision.id)
        return sent

    async def _approved_decisions(self) -> list[Any]:
        """The store's approved decisions; with ``store_revision`` (every write is this process's), the last read
        again while no write came since."""
        if self.store_revision is None:
            return await self.store.approved()
        revision = self.store_revision()
        if self._approved is None or self._approved[0] != revision:
            self._approved = (revision, await self.store.approved())
        return self._approved[1]

    # -- interruptions --------------------------------------------------------------------------------------

    def _claim_of(self, node: str) -> str | None:
        """The NodeClaim of ``node`` in the cluster objects (an interruption may come before any pass)."""
        for raw in self.objects.objects():
            if raw.get("kind") == "NodeClaim" and (raw.get("status") or {}).get("nodeName") == node:
                return str((raw.get("metadata") or {}).get("name") or "") or None
        return None

    async def handle_interruption(self, delivery: Delivery) -> None:
        """A bus handler for ebb.interruptions (leader only): act at once, outside the pass and its budgets."""
        message = delivery.message
        if not isinstance(message, Interruption):
            return
        if not self.leader.is_leader:
            raise NotLeading("not the leader: the interruption is left for the leader")
        now = self.clock()
        bound = log.bind(node=message.node, interruption=message.kind, message_id=str(message.id))
        claim = self._claim_of(message.node)
        if claim:
            self._claims[message.node] = claim
        self._kube(kube_events.interruption(message.kind, message.instance_state, message.node, claim))
        if not kube_events.takes_node_away(message.kind, message.instance_state):
            bound.info("interruption noted: nothing to do", detail=message.detail)
            return
        raw = self.objects.get("Node", "", message.node)
        labels = ((raw or {}).get("metadata") or {}).get("labels") or {}
        pool = labels.get("karpenter.sh/nodepool")
        if raw is None or not pool:
            bound.info("interruption ignored: not a node ebb manages", known=raw is not None)
            return
        decision_id = f"int-{uuid.uuid5(INTERRUPTIONS, str(message.id)).hex}"
        bound = bound.bind(decision_id=decision_id)
        deadline = message.deadline.isoformat() if message.deadline else None
        text = f"{message.kind} of instance {message.instance_id}: {message.detail}".strip().rstrip(":")
        explanation: dict[str, Any] = {
            "text": text, "interruption": {"kind": message.kind, "instanceId": message.instance_id,
                                           "deadline": deadline, "detail": message.detail,
                                           "messageId": str(message.id)}}
        found = self._findings_of([message.node])
        if found:
            explanation["findings"] = found
        itype = labels.get("node.kubernetes.io/instance-type")
        # proposed and approved at once: interruption ignores budgets and is not validated
        decision = transition(Decision(
            id=decision_id, method="interruption", reason="Interrupted", action="delete",
            nodes=(DecisionNode(message.node, pool, itype),), replacements=(), savings=0.0, state=State.PROPOSED,
            created_at=now, updated_at=now, explanation=explanation), State.APPROVED, now)
        outcome = await self.store.interrupt(message_id=str(message.id), consumer=self.interruption_consumer,
                                             decision=decision, now=now)
        if outcome.outcome == "duplicate":
            bound.info("interruption already applied")
            return
        if outcome.outcome == "busy":
            bound.info("interruption noted: the node is already being disrupted", holder=outcome.holder)
            return
        for rejected_id, nodes in outcome.rejected:
            why = f"node {message.node} is being interrupted ({message.kind})"
            other = log.bind(decision_id=rejected_id)
            other.info("decision rejected", reason=why, interruption_decision=decision_id)
            self.rejected += 1
            await self._events(rejected_id, tuple(n for n in nodes if n), phase="Rejected", message=why, now=now,
                               bound=other)
        self.interrupted += 1
        wire = DisruptionCommand.of_decision(decision, id=command_id(decision_id))
        bound.info("decision approved", method="interruption", reason="Interrupted", action="delete",
                   nodes=[message.node], deadline=deadline, command_id=str(wire.id), explanation=text)
        await self._events(decision_id, (message.node,), phase="Proposed", message=text, now=now, bound=bound)
        await self._publish_command(wire, bound)
        await self._events(decision_id, (message.node,), phase="Approved", message="interruption: approved at once",
                           now=now, bound=bound)
        self._kube(kube_events.approved(kube_events.DecisionFacts(
            decision_id, "interruption", "Interrupted", "delete", (message.node,), 0.0), self._claims))

    async def _events(self, decision_id: str, nodes: tuple[str, ...], *, phase: Phase, message: str, now: datetime,
                      bound: Any) -> None:
        """Publish the step's event per node, under the ids of the store's timeline entries of the step
        (``ebb.contracts.messages.event_id``)."""
        for node in nodes:
            try:
                await self.bus.publish(TOPIC_DISRUPTION_EVENTS, DisruptionEvent.step(decision_id, node, phase, message,
                                                                                     now))
            except Exception as e:  # events are for subscribers; the store has the timeline
                bound.warning("publishing an event failed", phase=phase, node=node, error=repr(e))

