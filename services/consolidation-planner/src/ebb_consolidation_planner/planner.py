"""The planner's handlers: cluster objects in, validated and budgeted disruption commands out.

``Planner.handle`` applies ebb.cluster.objects records to a ``SnapshotStore`` and wakes the loop;
``Planner.run`` runs an engine pass (``ebb.core.engine.run_pass``) at most every ``debounce`` seconds after
a change and at least every ``interval`` seconds, but only while this replica is the leader (with
``EngineOptions.karpenter_pace`` as Karpenter's disruption loop looks: at once after a proposal was validated, else
every ``interval`` seconds, never on a change). Active holds from the store are merged into the snapshot, so holds
made over REST take effect. A pass that reads what the last one read, before that one's ``revisit_at`` and after a
pass without commands, is answered from it (``pass_inputs.PassInputs``, in every mode): a settled cluster costs the
store's reads, not a pass.

Each command of a pass becomes a decision row (state proposed, with explanation, nodes, replacements, savings
and ``approve_at``, the moment it is due for validation, ``validation_delay`` seconds on) and a Proposed step per
node. Whichever replica leads when a proposal is due validates it (``approve_due``): a new leader resumes the
proposals the last one left, nothing about them lives in one process's memory. The command is re-validated
(``ebb.core.validation.validate``) against the then-current snapshot and, with ``live_pods``, against the
pods the apiserver lists on its nodes (``view_behind``: the view may lag the cluster): a stale command is
rejected with the reason; a valid one takes its budget in the ledger (``DecisionStore.approve``) and is
approved. A node that already has a live decision (proposed, approved, executing) is never proposed or approved
again.

Nothing is published here: every write of a decision puts the messages it sends (its command on
ebb.disruption.commands, keyed by NodePool; its Proposed, Approved, Rejected events) in the store's outbox in the
same transaction, and the service's outbox relay (``ebb.adapters.store.outbox``) publishes them in order. A
command's id is derived from its decision id (``command_id``), so a message sent again by a relay that died
before marking it sent is applied once by the executor.

Kubernetes Events (``ebb.core.events``: Unconsolidatable, DisruptionBlocked, ConsolidationCandidate /
Approved / Rejected, the interruption reasons) are handed to an ``EventRecorder``, which de-duplicates them
and writes them at a bounded rate; a failure there never stops planning.

After each pass the findings of its view (``ebb.core.findings``: Expired, Drifted, Empty, Consolidatable,
with since when) are kept, their changes logged, the findings of a decision's nodes put into its explanation
(``explanation["findings"]``), and the ``ebb.sh/drifted`` annotation of every Node brought in line with its
Drifted finding (``annotator.DriftAnnotations``); with ``pass_publisher`` the pass is published on ebb.planner.passes
(``passes.PassPublisher``), where the decisions-api reads why each node is left alone. ``handle_interruption``
(ebb.interruptions, consumed by the leader only) acts at once, outside the pass and its budgets: a decision
``interruption``/``Interrupted``/``delete`` written approved, with its Proposed and Approved steps, its command
and the message id in processed_messages, in one transaction (``DecisionStore.interrupt``); a rebalance
recommendation only gives an event and a log line.

**Shadow mode** (``shadow``, docs/shadow.md): the same passes, proposals, validations and approvals on a shadow
store (``DecisionStore(shadow=True)``), which marks every decision shadow and sends nothing, so no command reaches
the executor; the composition root gives such a planner no Kubernetes writer (events, annotations, policy status).
``ShadowWatch`` keeps the removals other disrupters make with ebb's verdict on each node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from ebb.adapters.bus import Bus, Delivery
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.heap import LongLivedHeap
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.karpenter import claim_of
from ebb.adapters.live import live_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.port import HoldRow, Store, command_id
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, Interruption, KindSynced
from ebb.core import events as kube_events
from ebb.core.causes import Stale, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.conflicts import Conflict, ConflictSettings, conflicts
from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.demand import recorded
from ebb.core.engine import PassResult, run_pass
from ebb.core.findings import Findings, diff, findings, with_since
from ebb.core.methods import CONSOLIDATION_REASONS
from ebb.core.methods.base import Command, EngineOptions
from ebb.core.model import REASONS, DemandSample, Snapshot
from ebb.core.reclaimed import RECLAIMED_FOR, OfferingKey, active, reclaimed_offering, without_reclaimed
from ebb.core.validation import validate, view_behind
from ebb_consolidation_planner.annotator import DriftAnnotations, NodeAnnotator
from ebb_consolidation_planner.leadership import Leadership
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.pass_inputs import PassInputs, PassRead
from ebb_consolidation_planner.passes import PassPublisher
from ebb_consolidation_planner.policy_status import PolicyConditions, PolicyStatusWriter
from ebb_consolidation_planner.shadow import ShadowWatch, budgets_of

#: the ``namespace/name`` of the pods the apiserver lists on a node that a disruption would have to move
#: (``ebb.core.drain.reschedulable_keys``)
LivePods = Callable[[str], Awaitable[frozenset[str]]]

log = structlog.get_logger("ebb_consolidation_planner")

#: seconds after which the leader tries again to decide a proposal due that it could not decide (the database failed)
RETRY_DUE = 1.0
#: how often (seconds of the planner's clock) a follower looks whether it leads now, and a leader whether it
#: still does (the Lease is renewed in the background; ``Leadership.is_leader`` is only read)
LEADERSHIP_POLL = 0.2
__all__ = ["Planner", "command_id", "new_decision_id", "utcnow"]

#: the namespace of interruption decision ids: uuid5(INTERRUPTIONS, message id)
INTERRUPTIONS = uuid.UUID("0b8e7d6c-5a4f-5e3d-9c2b-1a0f9e8d7c6b")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_decision_id() -> str:
    """A new decision's id: ``dec-`` and a random UUID."""
    return f"dec-{uuid.uuid4().hex}"


@dataclass
class _LastPass:
    """The last computed pass's answer (kept by `PassInputs` for the passes that reuse it)."""

    view: ClusterView
    result: PassResult
    found: Findings
    #: every ebb.sh/drifted patch of the pass went through (a reused pass tries again the ones that failed)
    annotated: bool = True
    #: the pass reached ebb.planner.passes, or was not to be published (a reused pass publishes it when it did not)
    published: bool = True

    def answer(self) -> tuple[ClusterView, PassResult, Findings]:
        return self.view, self.result, self.found


def _conflict_key(conflict: Conflict) -> tuple[str, str]:
    """What a conflict is, for its log lines: its kind and NodePool (or, naming none, its object); a sentence that
    changes while it holds (more NodeClaims) does not raise it again."""
    return str(conflict.kind), conflict.nodepool or conflict.object


class NotLeading(RuntimeError):
    """An interruption reached a replica that is not (any more) the leader: left uncommitted for the next."""


def facts(decision_id: str, command: Command) -> kube_events.DecisionFacts:
    return kube_events.DecisionFacts(decision_id, command.method, command.reason, command.action, command.nodes,
                                     command.savings)


class Planner:
    def __init__(
        self,
        bus: Bus,
        objects: SnapshotStore,
        store: Store,
        leader: Leadership,
        *,
        metrics: Metrics | None = None,
        debounce: float = 1.0,
        interval: float = 10.0,
        validation_delay: float = 15.0,
        options: EngineOptions | None = None,
        clock: Clock | Callable[[], datetime] = utcnow,
        recorder: EventRecorder | None = None,
        interruption_consumer: str = "ebb-consolidation-planner-interruptions",
        annotator: NodeAnnotator | None = None,
        decision_ids: Callable[[], str] = new_decision_id,
        inputs: PassInputs[_LastPass] | None = None,
        live_pods: LivePods | None = None,
        pass_publisher: PassPublisher | None = None,
        conflict_settings: ConflictSettings | None = None,
        policy_status: PolicyStatusWriter | None = None,
        shadow: ShadowWatch | None = None,
        heap: LongLivedHeap | None = None,
        require_synced: bool = False,
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
        self.metrics.timed_by(self.clock)
        self.recorder = recorder
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
        #: what the conflict check with Karpenter needs (``ebb.core.conflicts``; None: no check)
        self.conflict_settings = conflict_settings
        #: the conflicts the last computed pass found (None: no pass has looked yet)
        self.conflicts: tuple[Conflict, ...] | None = None
        #: the ConflictFree condition of the DisruptionPolicies (None: not written)
        self.policy_conditions = PolicyConditions(policy_status) if policy_status is not None else None
        #: shadow mode (docs/shadow.md): the removals other disrupters make and ebb's verdicts, kept for the shadow
        #: report (None: not in shadow mode); the decisions are shadow ones because ``store`` is a shadow store
        self.shadow = shadow
        #: the process's objects frozen after each computed pass (the service's; None in the embedded mode)
        self.heap = heap
        if (shadow is not None) != store.shadow:
            raise ValueError("a planner in shadow mode needs a shadow store, and only it may have one")
        #: plan and approve only once the cluster-watcher said each kind it watches is synced (`KindSynced`), as
        #: Karpenter's disruption waits for its cluster state to be synced (off: the embedded mode, whose cluster
        #: publishes every object before it starts)
        self.require_synced = require_synced
        #: the kinds the cluster-watcher has published a first list of, and the kinds it watches (None: it said
        #: nothing yet)
        self.synced_kinds: set[str] = set()
        self.watched_kinds: frozenset[str] | None = None
        self._waiting_for: tuple[str, ...] | None = None
        #: per partition of ebb.cluster.objects, the offset of the next record this planner will handle; and each
        #: `KindSynced` handled live with the topic's end offsets when it came: it counts once every record before
        #: those is handled (the kind's objects sit on every partition, the marker on one)
        self._next_offsets: dict[int, int] = {}
        self._syncs_pending: list[tuple[KindSynced, dict[int, int] | None]] = []
        self.changed = asyncio.Event()
        self._stop = asyncio.Event()
        #: when the earliest proposal in the store is due for validation, as last read or written by this replica
        #: (None: none is known); the proposals themselves are rows (``approve_due``)
        self._next_due: datetime | None = None
        #: node -> its findings as of the last pass (since filled in with the first-seen time where unknown)
        self.findings: Findings = {}
        #: the ebb.sh/drifted annotations (None: not annotating)
        self.annotations = DriftAnnotations(annotator) if annotator is not None else None
        #: node -> its NodeClaim, as of the last pass
        self._claims: dict[str, str] = {}
        #: what a pass reads and whether it changed since the last computed pass, whose answer it keeps
        #: (``ebb_consolidation_planner.pass_inputs``; default: the store read every pass, the last answer reused)
        self.inputs: PassInputs[_LastPass] = inputs if inputs is not None else PassInputs(objects, store)
        #: what the pods of each NodePool with a demandWindow requested at the passes computed lately
        #: (`ebb.core.demand.recorded`), handed to every pass and validation in ``Snapshot.demand``; saved in the
        #: store after each change and read back when this replica becomes the leader, except in the embedded mode
        #: (``PassInputs.sole_writer``), whose planner and store live and die together (docs/architecture.md)
        self._demand: tuple[DemandSample, ...] = ()
        #: the spot offerings a spot interruption is taking back, each until its mark runs out (`ebb.core.reclaimed`):
        #: no replacement is launched there meanwhile; kept in memory, as Karpenter's AWS provider keeps them
        self._reclaimed: dict[OfferingKey, datetime] = {}
        #: the marks that held at the last computed pass: a pass reads them, so one that comes or runs out computes
        #: the next pass again
        self._reclaimed_seen: frozenset[OfferingKey] = frozenset()
        #: passes due (computed or reused) and, of those, the ones answered from the last computed pass
        self.passes = 0
        self.passes_reused = 0
        self.proposed = 0
        self.approved = 0
        self.rejected = 0
        self.interrupted = 0

    # -- input --------------------------------------------------------------------------------------------

    def note_synced(self, message: KindSynced) -> None:
        """The cluster-watcher has published its first list of a kind, and every record of the topic published before
        it is in the view (read from the topic at start, or handled since: `handle`)."""
        self.synced_kinds.add(message.kind)
        # every list a marker names: one of an earlier watcher run (other kinds) may be read after a newer one
        self.watched_kinds = (self.watched_kinds or frozenset()) | frozenset(message.watched)

    def follow_from(self, offsets: Mapping[int, int]) -> None:
        """The consumer of ebb.cluster.objects starts at ``offsets`` (what the start read of the topic held is
        before them)."""
        self._next_offsets = dict(offsets)

    def _settle_syncs(self) -> None:
        """Note each live `KindSynced` whose records before it are all handled now (its ends taken: `_synced`)."""
        if not self._syncs_pending:
            return
        waiting: list[tuple[KindSynced, dict[int, int] | None]] = []
        for message, ends in self._syncs_pending:
            if ends is not None and all(self._next_offsets.get(partition, 0) >= end
                                        for partition, end in ends.items()):
                self.note_synced(message)
            else:
                waiting.append((message, ends))
        self._syncs_pending = waiting

    def unsynced_kinds(self) -> tuple[str, ...]:
        """The kinds whose first list the planner waits for before it plans or approves (`require_synced`): every
        kind the cluster-watcher watches that it has not said is synced; ``("any",)`` before it said anything."""
        if not self.require_synced:
            return ()
        if self.watched_kinds is None:
            return ("any",)
        return tuple(sorted(self.watched_kinds - self.synced_kinds))

    async def _synced(self) -> bool:
        """Whether the view is whole (`unsynced_kinds`), saying so when that changes: the planner neither plans nor
        approves before, and ``ebb_cluster_state_synced`` is 0. The markers come since take the topic's ends now."""
        if any(ends is None for _, ends in self._syncs_pending):
            ends_now = await self.bus.end_offsets(TOPIC_CLUSTER_OBJECTS)
            self._syncs_pending = [(message, ends_now if ends is None else ends)
                                   for message, ends in self._syncs_pending]
        self._settle_syncs()
        waiting = self.unsynced_kinds()
        if waiting != self._waiting_for:
            if waiting:
                log.warning("waiting for the cluster-watcher's first list of each kind it watches: no pass, no "
                            "approval until then", kinds=list(waiting))
            elif self._waiting_for is not None:
                log.info("every watched kind is synced: planning")
            self._waiting_for = waiting
        if waiting:
            self.metrics.synced.set(0)
        return not waiting

    async def handle(self, delivery: Delivery) -> None:
        """A bus handler for ebb.cluster.objects: apply the object and wake the loop when state changed."""
        message = delivery.message
        if delivery.topic == TOPIC_CLUSTER_OBJECTS:
            at = self._next_offsets.get(delivery.partition, 0)
            self._next_offsets[delivery.partition] = max(at, delivery.offset + 1)
        if isinstance(message, KindSynced):
            # the kind's first list sits on every partition, before the topic's ends: counted once every record
            # before the ends the loop takes next (`_synced`, one read for all the markers come meanwhile) is handled
            self._syncs_pending.append((message, None))
            self.changed.set()
            return
        if self._syncs_pending:
            self._settle_syncs()
        if not isinstance(message, ClusterObject):
            return
        if message.kind == "Pod":
            self.metrics.pod_changed(message.namespace, message.name, message.object)
        if self.shadow is not None:
            self.shadow.observe(message, self.objects, self.clock())
        if self.objects.apply(message):
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

    def _keep_conflicts(self, snapshot: Snapshot) -> None:
        """The conflicts with Karpenter of the pass's snapshot: all of them logged at the first pass (or that there are
        none), then each one that appears or goes; the ``ebb_conflicts`` gauge follows them."""
        if self.conflict_settings is None:
            return
        found = conflicts(snapshot, self.conflict_settings)
        before = self.conflicts
        self.metrics.found_conflicts(found)
        self.conflicts = found
        if before is None:
            log.info("conflict check", conflicts=len(found), provider=self.conflict_settings.provider,
                     enforce=self.options.refuse_conflicts is not None)
        seen = {_conflict_key(c) for c in before or ()}
        kept = {_conflict_key(c) for c in found}
        for conflict in found:
            if _conflict_key(conflict) not in seen:
                log.warning("conflict with Karpenter", kind=str(conflict.kind), object=conflict.object,
                            nodepool=conflict.nodepool, refused=self.options.refuse_conflicts is not None
                            and conflict.nodepool is not None, message=conflict.message)
        for conflict in before or ():
            if _conflict_key(conflict) not in kept:
                log.info("conflict fixed", kind=str(conflict.kind), object=conflict.object, nodepool=conflict.nodepool)

    async def _annotate(self, view: ClusterView) -> bool:
        """Bring ebb.sh/drifted in line with the findings; False when a patch failed (tried again after a pass)."""
        if self.annotations is None:
            return True
        failed = self.annotations.failed
        await self.annotations.sync(view.snapshot.nodes, self.findings)
        return self.annotations.failed == failed

    def _kube(self, events: Iterable[kube_events.KubeEvent]) -> None:
        if self.recorder is not None:
            try:
                self.recorder.record(events)
            except Exception as e:  # events are for people; planning goes on
                log.warning("recording Kubernetes events failed", error=repr(e))

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Plan on changes (debounced) and every ``interval`` seconds while leader, and validate each proposal when
        it is due, until ``stop``. Every wait is on the planner's clock: the debounce, the interval, the proposals'
        due times and the tick (0.2 s, or the interval when shorter) at which the loop looks at the leadership. A
        fixed leadership (``Leadership.fixed``: the embedded mode's single replica) is not looked at again: the loop
        then sleeps until a change, the next pass or the next proposal due."""
        self._stop = stop
        last = -float("inf")
        leading = False
        tick = min(LEADERSHIP_POLL, self.interval)
        while not stop.is_set():
            await self.clock.wait(self.changed, stop, within=self._next_look(tick, last))
            if stop.is_set():
                break
            is_leader = self.leader.is_leader
            # set here, on the event loop: a scrape (another thread) must not read the Lease's clock itself
            self.metrics.leader.set(1.0 if is_leader else 0.0)
            if not is_leader:
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
                    self._next_due = await self.store.next_due()
                except Exception as e:  # the database is away: try again on the next tick
                    log.warning("reading the proposals failed", error=repr(e))
                    await self.clock.sleep(tick, stop)
                    continue
                leading = True
                self.inputs.forget()  # a new leader plans from scratch: another one may have led meanwhile
                if self._next_due is not None:
                    log.info("leading: resuming the proposals in the store", next_due=self._next_due.isoformat())
                await self._load_demand()
            if self._due():
                try:
                    await self.approve_due()
                except Exception as e:  # the database is away, ...: try again in a while
                    log.warning("validating the proposals due failed", error=repr(e))
                    self._next_due = self.clock() + timedelta(seconds=RETRY_DUE)
            if self.options.karpenter_pace and self._next_due is not None:
                # Karpenter's disruption loop waits out its command's validation before it looks again
                await self.clock.sleep(self._until_due(), stop)
                continue
            since = self.clock.monotonic() - last
            if self.options.karpenter_pace and not fresh and since < self.interval:
                # nor does it look again on a change: at once after a command (its validation took longer than the
                # interval), else on its next poll; the wait above ends with the interval
                self.changed.clear()
                continue
            if not fresh and not (self.changed.is_set() and since >= self.debounce) and since < self.interval:
                if self.changed.is_set():
                    # a change waits out the debounce: sleep until it ends or a proposal is due (the set event
                    # would otherwise wake this loop at once, thousands of times a second)
                    await self.clock.sleep(min(min(self.debounce, self.interval) - since, self._until_due()), stop)
                continue
            self.changed.clear()
            last = self.clock.monotonic()
            try:
                await self.plan_once()
            except Exception as e:  # the database is away, ...: try again on the next pass
                log.warning("planning pass failed", error=repr(e))

    def _until_due(self) -> float:
        """Seconds until the earliest known proposal is due (0 when it is; infinity when none is known)."""
        if self._next_due is None:
            return float("inf")
        return max(0.0, (self._next_due - self.clock()).total_seconds())

    def _due(self) -> bool:
        return self._next_due is not None and self.clock() >= self._next_due

    def _next_look(self, tick: float, last: float) -> float:
        """How long the loop may wait for a change before it looks again: a tick while the leadership can change;
        with a fixed one, until the next pass or the next proposal is due (a single replica wakes only for work)."""
        if not self.leader.fixed:
            return tick
        now = self.clock.monotonic()
        # the same differences the loop compares (``since < interval``), so that in floating point a wait is never
        # 0 while the loop still finds the interval unfinished (it would spin at one instant of virtual time)
        return max(0.0, min(self.interval - (now - last), self._until_due()))

    async def current_snapshot(self, now: datetime, *, validating: str | None = None) -> Snapshot:
        """The cluster objects' snapshot with the store's active holds merged in, the nodes of other live
        decisions marked as being disrupted (tainted karpenter.sh/disrupted, as the executor will): they are
        neither candidates nor destinations and count against their pool's budget; and the replacements those
        decisions launch named (no candidates until their decision ends: one waits empty while its decision
        drains the old node, and looked empty itself). For the pass, every live decision counts; when
        ``validating`` a decision, only the approved and executing ones (a proposal does not take budget until
        it is approved: the ledger settles that)."""
        if validating is None:
            read = await self.inputs.read(now, self.options)
            busy, launched, holds = set(read.busy), read.launched, read.holds
        else:
            states = (State.APPROVED, State.EXECUTING)
            busy = set(await self.store.live_nodes(exclude=validating, states=states))
            launched = await self.store.live_replacements(exclude=validating, states=states)
            holds = list(await self.store.list_holds(now))
        return self._snapshot(busy, launched, holds, now)

    def _snapshot(self, busy: Iterable[str], launched: dict[str, str], holds: Sequence[HoldRow],
                  now: datetime) -> Snapshot:
        """The cluster objects' snapshot as it is now, with what the store holds merged in (`current_snapshot`) and
        the spot offerings being reclaimed at ``now`` unavailable."""
        snapshot = live_snapshot(self.objects.snapshot(), holds=holds, busy=busy, launched=launched)
        if self._reclaimed:
            snapshot = without_reclaimed(snapshot, self._reclaimed, now)
        if self._demand:
            # not an input of its own: a pass records the demand it saw, so the record adds nothing a pass on the
            # same objects does not see already, and what leaves a window is the pass's revisit_at
            snapshot = replace(snapshot, demand=self._demand)
        return snapshot

    async def plan_once(self) -> PassResult | None:
        """One pass: propose the pass's commands whose nodes are free; None when the snapshot is invalid. A pass
        that reads what the last one read (``PassInputs``: the objects' version, the store's state, the options; or
        an equal snapshot), before that one's ``revisit_at``, after a pass without commands, is answered from it
        (its commands: none; its findings and view) without computing it again."""
        if not await self._synced():
            return None
        started = time.perf_counter()
        now = self.clock()
        read: PassRead = await self.inputs.read(now, self.options)
        reclaimed = active(self._reclaimed, now)
        if reclaimed != self._reclaimed_seen:  # a spot offering marked unavailable, or no longer: not the last inputs
            self.inputs.forget()
            self._reclaimed_seen = reclaimed
            self._reclaimed = {key: until for key, until in self._reclaimed.items() if key in reclaimed}
        reused = self.inputs.reusable(read, now)
        snapshot: Snapshot | None = None
        if reused is None:
            try:
                snapshot = self._snapshot(read.busy, read.launched, read.holds, now)
            except ValueError as e:  # SnapshotError: an invalid object; plan again once it is fixed
                log.warning("cannot build the snapshot; no pass", error=str(e))
                self.metrics.synced.set(0)
                return None
            self.metrics.synced.set(1)
            # something changed that the snapshot does not read (a status field it does not parse): the same
            # snapshot gives the same pass, until its revisit_at
            reused = self.inputs.reusable(read, now, snapshot)
        if reused is not None:
            # as a computed pass would (a thread's cost included, as the embedded mode's pass_cost counts it)
            view, result, found = await asyncio.to_thread(reused.answer)
            self.passes += 1
            self.passes_reused += 1
            if not reused.published and self.pass_publisher is not None:
                reused.published = await self.pass_publisher.publish(view, result, self.findings,
                                                                     revision=read.version, demand=self._demand)
            if not reused.annotated:
                reused.annotated = await self._annotate(view)  # a patch that failed is tried again after every pass
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
        self._keep_conflicts(snapshot)
        if self.policy_conditions is not None and self.conflicts is not None:
            await self.policy_conditions.sync(snapshot.disruption_policies, self.conflicts, now)
        self._kube_pass(view, result)
        if self.shadow is not None:
            self.shadow.keep_verdicts(view, result)
            try:
                await self.shadow.write_removals(now)
            except Exception as e:  # the report misses it; planning goes on
                log.warning("shadow: writing the removals failed", error=repr(e))
        published = self.pass_publisher is None or await self.pass_publisher.publish(
            view, result, self.findings, revision=read.version, demand=self._demand)
        live = await self.store.live_nodes() if result.commands else {}
        for command in result.commands:
            busy = [n for n in command.nodes if n in live]
            if busy:
                log.info("command skipped: its nodes have live decisions", method=command.method, nodes=command.nodes,
                         busy=busy)
                continue
            await self._propose(command, view, now)
        if not self.inputs.sole_writer:
            # another replica that believed it led may have proposed too (the embedded mode's planner is the only one)
            self._next_due = await self.store.next_due()
        self.inputs.computed(read, snapshot, result, _LastPass(view, result, found, await self._annotate(view),
                                                               published))
        if self.heap is not None:
            self.heap.settle()  # what this pass keeps frozen out of the collector's traversals (`ebb.adapters.heap`)
        return result

    async def _load_demand(self) -> None:
        """Take the demand record the last leader saved (the distributed mode): a restarted or new leader then keeps
        what the demand windows' peaks ask for. A store that does not answer leaves the record as it is."""
        if self.inputs.sole_writer:
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
        if not changed or self.inputs.sole_writer:
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
        return view, run_pass(view, self.options, alone=self.inputs.alone), findings(view)

    def _observe(self, view: ClusterView, result: PassResult) -> None:
        self.metrics.observed(view.snapshot, len(view.snapshot.nodes))
        # the nodes `ClusterView.blocked_reason` finds nothing against, counted with sets (in C): no candidate and
        # hard blocks keep every method away, consolidation blocks the consolidating ones too
        open_to_all = view.nodes.keys() - view.not_candidate.keys() - view.hard_block.keys()
        eligible = {False: len(open_to_all), True: len(open_to_all - view.consolidation_block.keys())}
        for reason in REASONS:
            self.metrics.eligible_nodes.labels(reason=reason.lower()).set(eligible[reason in CONSOLIDATION_REASONS])
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
        explanation: dict[str, Any] = {"text": command.explanation,
                                       "budgets": budgets_of(view, pools.values(), command.reason)}
        found = self._findings_of(command.nodes)
        if found:
            explanation["findings"] = found
        approve_at = now + timedelta(seconds=self.validation_delay)
        decision = Decision.of_command(
            decision_id, command, now=now, explanation=explanation, approve_at=approve_at,
            nodes=tuple(DecisionNode(n, pools[n], view.nodes[n].instance_type) for n in command.nodes))
        await self.store.propose(decision)
        self.proposed += 1
        bound.info("decision proposed", method=command.method, reason=command.reason, action=command.action,
                   nodes=list(command.nodes), savings_per_hour=round(command.savings, 6),
                   explanation=command.explanation, approve_at=approve_at.isoformat())
        self._kube(kube_events.proposed(facts(decision_id, command), self._claims))
        if self._next_due is None or approve_at < self._next_due:
            self._next_due = approve_at
        return decision_id

    async def approve_due(self) -> list[str]:
        """Validate every proposal in the store that is due (``DecisionStore.due``: its ``approve_at`` has come,
        the earliest first, then by id), whichever replica proposed it: approve or reject it. Returns the ids
        decided. Stops early when this replica stops leading (the next leader takes the rest up). Deciding one wakes
        the loop as a change of the objects does: a pass reads the live decisions, and a rejected one's nodes (with
        the room the passes gave its pods) are free again."""
        decided: list[str] = []
        if not await self._synced():
            return decided
        for decision in await self.store.due(self.clock()):
            if not self.leader.is_leader or self._stop.is_set():
                break
            bound = log.bind(decision_id=decision.id)
            try:
                await self._decide(decision, bound)
            except Exception as e:
                bound.error("validating the decision failed", error=repr(e))
                with contextlib.suppress(Exception):
                    await self._rejected(decision, f"validation failed: {e!r}"[:1000], self.clock(), bound)
            decided.append(decision.id)
        if decided:
            self.changed.set()
        due, now = await self.store.next_due(), self.clock()
        # one still due was not decided (the database failed it): again in a while, not at once
        self._next_due = due if due is None or due > now else now + timedelta(seconds=RETRY_DUE)
        return decided

    async def _decide(self, decision: Decision, bound: Any) -> None:
        now = self.clock()
        command = decision.command
        pools = {n.name: n.nodepool for n in decision.nodes}
        snapshot = await self.current_snapshot(now, validating=decision.id)
        view, why = await asyncio.to_thread(self._validate, command, snapshot, now)
        if why is None and self.live_pods is not None:
            why = await self._view_behind(command, snapshot, bound)
        if why is not None:
            if await self._rejected(decision, why.text, now, bound):
                self.metrics.failed_validation(command.method, len(command.nodes))
            return
        allowed = {p: view.budgets[(p, command.reason)].allowed for p in set(pools.values())
                   if (p, command.reason) in view.budgets}
        counted = {n.name for n in snapshot.nodes if n.deleting or n.being_disrupted}
        approval = await self.store.approve(decision.id, node_pools=pools, reason=command.reason, allowed=allowed,
                                            counted=counted, now=now)
        if not approval.approved and not approval.rejected:
            bound.info("decision left alone: it is no longer proposed", why=approval.reason)
            return
        if not approval.approved:
            self.rejected += 1
            self.metrics.failed_validation(command.method, len(command.nodes))
            bound.info("decision rejected", reason=approval.reason)
            self._kube(kube_events.rejected(facts(decision.id, command), self._claims, approval.reason))
            return
        self.approved += 1
        self.metrics.decided(command.action, command.reason, command.method, pools.values())
        bound.info("decision approved", method=command.method, nodes=list(command.nodes),
                   command_id=str(command_id(decision.id)))
        self._kube(kube_events.approved(facts(decision.id, command), self._claims))

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

    async def _rejected(self, decision: Decision, why: str, now: datetime, bound: Any) -> bool:
        """Reject the proposed decision; False when it was no longer proposed."""
        if not await self.store.reject(decision.id, why, now):
            return False
        self.rejected += 1
        bound.info("decision rejected", reason=why)
        self._kube(kube_events.rejected(facts(decision.id, decision.command), self._claims, why))
        return True

    # -- interruptions --------------------------------------------------------------------------------------

    def _claim_of(self, node: str) -> str | None:
        """The NodeClaim of ``node`` in the cluster objects (an interruption may come before any pass), paired as
        Karpenter pairs them: by the Node's provider id, else by ``status.nodeName`` (``claim_of``)."""
        claims = [raw for raw in self.objects.objects() if raw.get("kind") == "NodeClaim"]
        spec = ((self.objects.get("Node", "", node) or {}).get("spec")) or {}
        found = claim_of(claims, node, str(spec.get("providerID") or ""))
        if found is None:
            return None
        return str((found.get("metadata") or {}).get("name") or "") or None

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
        raw = self.objects.get("Node", "", message.node)
        labels = ((raw or {}).get("metadata") or {}).get("labels") or {}
        pool = labels.get("karpenter.sh/nodepool")
        if raw is not None and pool:  # Karpenter's AWS provider tells only of the nodes it manages
            self._kube(kube_events.interruption(message.kind, message.instance_state, message.node, claim))
        offering = reclaimed_offering(message.kind, labels) if raw is not None and pool else None
        if offering is not None:  # Karpenter's AWS provider: that spot pool is reclaiming its nodes, launch elsewhere
            self._reclaimed[offering] = now + RECLAIMED_FOR
            bound.info("spot offering unavailable", instance_type=offering[0], zone=offering[1],
                       until=(now + RECLAIMED_FOR).isoformat())
        if not kube_events.takes_node_away(message.kind, message.instance_state):
            bound.info("interruption noted: nothing to do", detail=message.detail)
            return
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
                                           "messageId": str(message.id),
                                           "messageKind": kube_events.message_kind(message.kind,
                                                                                   message.instance_state)}}
        found = self._findings_of([message.node])
        if found:
            explanation["findings"] = found
        itype = labels.get("node.kubernetes.io/instance-type")
        # proposed and approved at once (the store writes it approved): interruption ignores budgets, is not validated
        decision = Decision(
            id=decision_id, method="interruption", reason="Interrupted", action="delete",
            nodes=(DecisionNode(message.node, pool, itype),), replacements=(), savings=0.0, state=State.PROPOSED,
            created_at=now, updated_at=now, explanation=explanation)
        outcome = await self.store.interrupt(message_id=str(message.id), consumer=self.interruption_consumer,
                                             decision=decision, now=now)
        if outcome.outcome == "duplicate":
            bound.info("interruption already applied")
            return
        if outcome.outcome == "busy":
            # kept on the holder, whose end writes the interruption's own decision if the node is not gone then
            bound.info("interruption noted: the node is already being disrupted; its decision waits for the holder's "
                       "end", holder=outcome.holder)
            return
        for rejected_id, _nodes in outcome.rejected:
            why = f"node {message.node} is being interrupted ({message.kind})"
            log.bind(decision_id=rejected_id).info("decision rejected", reason=why, interruption_decision=decision_id)
            self.rejected += 1
        self.interrupted += 1
        bound.info("decision approved", method="interruption", reason="Interrupted", action="delete",
                   nodes=[message.node], deadline=deadline, command_id=str(command_id(decision_id)), explanation=text)
        self._kube(kube_events.approved(kube_events.DecisionFacts(
            decision_id, "interruption", "Interrupted", "delete", (message.node,), 0.0), self._claims))
