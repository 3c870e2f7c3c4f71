"""The handler of ``ebb.disruption.commands``: one approved ``DisruptionCommand`` → taint, pre-spin, drain,
retire, in that order, through the cluster's ``Provider`` (``ebb.adapters.provider``: ``none``, ``kwok``,
``simulated`` or ``karpenter``), which says which taint ebb uses, what a replacement is and how a node is
removed.

Before anything is done: a command with replacements fails at once (``Failed``, decision ``failed``) when the
provider launches none, and so does a command with a node the provider cannot retire (``karpenter``: a node
without a NodeClaim), with nothing tainted. So does a command whose drain would start blocked: a pod whose
PodDisruptionBudget allows no eviction now, asked with dry-run Evictions (``Drainer.refusal``; emptiness,
consolidation, and drift or expiration without a terminationGracePeriod; never an interruption, never a resumed
command). Karpenter validates its candidates just before it acts for the same reason: a drain that starts blocked
keeps its nodes tainted and its budget held until the eviction deadline. So does a command that starts more than
``max_age`` seconds after its approval (the executor was down or behind): the planner validated it against the
cluster of then, and nothing kept pods off its nodes since (they are tainted only now), where Karpenter taints a
command's nodes right after its validation; an interruption is exempt (the instance goes whatever ebb does). Such a
decision leaves no hold (nothing was done), so the planner's next pass decides again on what it sees.

For a replace (pre-spin): the nodes are tainted, then each replacement is launched (``Launching``: a KWOK
node, a simulated node, or a NodeClaim Karpenter launches) and waited for until ready (``WaitingReadiness``);
a launch that fails or a replacement not ready within ``ready_timeout`` → ``Failed``, the launched
replacements deleted, the taints removed (``RolledBack``), the decision ``rolled_back`` (nothing was
evicted: all is undone). Then as a delete.
Replacement names come from the decision, so a command resumed after a crash finds what it launched.

For a delete: every node whose instance is not gone already is tainted with the provider's disruption taint
(``Tainted``), then drained through the Eviction API one node after the other (``Evicted``), and only when
all are drained retired (the Node deleted, or its NodeClaim deleted and waited for until Karpenter removed
it) → ``Terminated``; the decision ends ``succeeded``. A node that cannot be drained (a pod that would not
go within the eviction deadline) → ``Failed`` on that node, every tainted node untainted
(``RolledBack``), the decision ends ``failed`` (evictions cannot be undone); so does a node not gone
``retire_timeout`` after its removal was asked for (``Failed``, nothing untainted). An interruption's node is
removed even so (``Evicted`` says which pod would not go): the cloud takes the instance whatever ebb does, and an
untainted node it is about to take would only draw pods.

terminationGracePeriod (Karpenter's NodePool ``spec.template.spec.terminationGracePeriod``, the
``Provider``'s ``termination_grace_period``: the NodeClaim's in ``karpenter`` mode, the NodePool's otherwise): when
a node has one, its drain gets a deadline, the start of its termination (its first drain, recorded on the Node as
``ebb.sh/termination-timestamp`` so a resumed command keeps it) plus the grace period; Karpenter's
``TerminationGracePeriodExpiring`` event says it on the node, and each pod whose own grace would not end by then
is deleted at ``deadline - its grace`` (PDB bypassed) with Karpenter's ``Disrupted`` event
(``ebb.adapters.kube.drain``). The grace period is read by the executor when it drains, not carried by the
command: Karpenter reads it from the NodeClaim at termination too, and the planner's snapshot need not have it. A rolled
back or failed decision leaves an automatic
hold on its nodes (``failure_hold_seconds``, default 15 min), so the planner does not propose the same
failing disruption at its next pass; the hold is in every explanation of those nodes meanwhile.

Kubernetes Events (``ebb.core.events``, through the ``EventRecorder``): ``DisruptionTerminating`` on each
tainted node, ``DisruptionLaunching``/``DisruptionWaitingReadiness`` on each replacement, ``FailedDraining``
when the node is kept, and Karpenter's ``Evicted`` on each pod the drain evicted. Metrics: Karpenter's
termination metrics with ``ebb_`` for ``karpenter_`` (``ebb_termination_executor.metrics``).

Every step is recorded through the store (``DecisionStore.record_steps``): its timeline entry and its event in the
outbox in one transaction, which the service's outbox relay (``ebb.adapters.store.outbox``) publishes; the last
steps of a command are written with the decision's end (``DecisionStore.finish``). A step recorded before (a
resumed command reports it again, under the same id) is neither recorded nor sent again.

Idempotency: the command id goes into ``processed_messages`` in the transaction that ends the decision
(``DecisionStore.finish``); a redelivered command that was applied does nothing. Other errors (the API
server, the database) propagate, so the bus retries the handler; every step is idempotent, so a retry
or a redelivery after a crash resumes where the previous attempt stopped. A wait cut short because the
service is stopping raises ``ebb.adapters.clock.Stopped``: the command is left uncommitted and resumed
after the restart. Every wait and deadline (eviction backoff and deadline, the replacements' readiness
poll and ready timeout, the retire wait, the termination duration metric) is measured on the drainer's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime

import structlog

from ebb.adapters.bus import Bus, Delivery, PoisonMessage
from ebb.adapters.clock import Clock, clock_of
from ebb.adapters.kube.drain import Drainer, DrainFailed
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.provider import Provider, RetireError
from ebb.adapters.store.port import Start, Store
from ebb.contracts import DisruptionCommand, DisruptionEvent
from ebb.contracts.messages import Phase, event_id
from ebb.core import events as kube_events
from ebb.core.decision import IllegalTransition, State
from ebb.core.launch import LaunchError, replacement_name
from ebb.core.model import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_ZONE, Pod
from ebb_termination_executor.metrics import Metrics, snake_case

__all__ = ["REPLACEMENTS_UNSUPPORTED", "Executor", "event_id"]

log = structlog.get_logger("ebb_termination_executor")

REPLACEMENTS_UNSUPPORTED = "replacement launching not configured (EBB_TERMINATION_EXECUTOR_PROVIDER)"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Executor:
    """Executes commands; counts what it did."""

    def __init__(
        self,
        bus: Bus,
        store: Store,
        drainer: Drainer,
        *,
        clock: Clock | Callable[[], datetime] = utcnow,
        failure_hold: float = 0.0,
        metrics: Metrics | None = None,
        provider: Provider | None = None,
        ready_timeout: float = 600.0,
        retire_timeout: float = 600.0,
        max_age: float | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.bus = bus
        #: writes Kubernetes Events (None: none)
        self.recorder = recorder
        #: launches replacements and retires nodes (default: ``none``, Nodes deleted, no replacements)
        self.provider: Provider = provider or NodeProvider("none", drainer.api)
        if dict(drainer.disruption_taint) != dict(self.provider.disruption_taint):
            raise ValueError(f"the drainer's taint {dict(drainer.disruption_taint)} is not the {self.provider.name} "
                             f"provider's {dict(self.provider.disruption_taint)}")
        #: replacements not Ready this long after their launch fail the command
        self.ready_timeout = ready_timeout
        #: nodes not gone this long after their removal was asked for fail the command
        self.retire_timeout = retire_timeout
        #: a command approved longer ago than this when it starts fails without being carried out (None: no limit)
        self.max_age = max_age
        self.metrics = metrics or Metrics()
        #: seconds a failed decision's nodes are held (an automatic hold; 0: none)
        self.failure_hold = failure_hold
        self.store = store
        self.drainer = drainer
        #: "now" of the events and the decision; the drainer's clock times the waits
        self.clock = clock_of(clock)
        self.metrics.timed_by(self.clock)
        #: node -> the lock of the command that runs on it (``execute``), and how many hold or wait for it
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        self.succeeded = 0
        self.rolled_back = 0
        self.failed = 0
        self.duplicates = 0

    async def handle(self, delivery: Delivery) -> None:
        command = delivery.message
        if not isinstance(command, DisruptionCommand):
            raise PoisonMessage(f"not a DisruptionCommand: {type(command).__name__}")
        await self.execute(command)

    async def handle_interruptions(self, delivery: Delivery) -> None:
        """`handle` of the interruptions' commands alone (the other commands are the other consumer's): an
        interrupted node's drain never waits for a slot behind commands that wait for replacements or PDBs, as
        Karpenter deletes an interrupted NodeClaim outside its disruption queue."""
        if isinstance(delivery.message, DisruptionCommand) and delivery.message.method != "interruption":
            return
        await self.handle(delivery)

    async def handle_others(self, delivery: Delivery) -> None:
        """`handle` of every command but the interruptions' (`handle_interruptions`)."""
        if isinstance(delivery.message, DisruptionCommand) and delivery.message.method == "interruption":
            return
        await self.handle(delivery)

    def step(self, command: DisruptionCommand, node: str, phase: Phase, message: str,
             key: str | None = None) -> DisruptionEvent:
        """The event of a step of ``command`` on ``node`` (recorded by ``emit``, or with the decision's end by
        ``_finish``)."""
        log.info("disruption event", decision_id=command.decision_id, node=node, phase=phase, message=message)
        return DisruptionEvent.step(command.decision_id, node, phase, message, self.clock(), key=key)

    async def emit(self, command: DisruptionCommand, node: str, phase: Phase, message: str,
                   key: str | None = None) -> None:
        """Record a step: its timeline entry and its event in the outbox, in one transaction (the relay publishes
        it)."""
        await self.store.record_steps([self.step(command, node, phase, message, key)])

    async def execute(self, command: DisruptionCommand) -> str:
        """Apply ``command``; returns the outcome: succeeded, rolled_back, failed, duplicate or finished. Commands run
        at once (the bus's ``concurrency``) keep apart on their nodes: one waits for the commands before it that
        share a node (a node's locks taken in name order, each lock first come first served)."""
        async with contextlib.AsyncExitStack() as held:
            for node in sorted(set(command.nodes)):
                await held.enter_async_context(self._node_lock(node))
            return await self._execute_alone(command)

    @contextlib.asynccontextmanager
    async def _node_lock(self, node: str) -> AsyncIterator[None]:
        """The node's lock, dropped when no command holds or waits for it."""
        lock = self._locks.setdefault(node, asyncio.Lock())
        self._waiting[node] = self._waiting.get(node, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._waiting[node] -= 1
            if not self._waiting[node]:
                del self._waiting[node], self._locks[node]

    async def _execute_alone(self, command: DisruptionCommand) -> str:
        """``execute`` with the command's nodes locked."""
        bound = log.bind(command=str(command.id), decision_id=command.decision_id, nodes=list(command.nodes))
        try:
            start, state = await self.store.start(command, self.clock())
        except IllegalTransition as e:
            # a command for a decision never approved (still proposed): the planner approves before it
            # publishes, so no retry makes it executable; retried, it stopped the executor's consumer on it
            # (found by tests/service/test_fuzz_handlers.py). Dead-lettered, and the decision is left as it is
            raise PoisonMessage(f"decision {command.decision_id} cannot be executed: {e}") from e
        if start is Start.DUPLICATE:
            self.duplicates += 1
            bound.info("command applied before: nothing to do")
            return "duplicate"
        if start is Start.FINISHED:
            bound.info("decision already finished: nothing to do", state=state)
            return "finished"
        bound.info("executing", method=command.method, reason=command.reason, action=command.action)
        self.metrics.started(command.decision_id, self.clock())
        try:
            return await self._execute(command, resumed=start is Start.RESUME)
        finally:
            self.metrics.ended(command.decision_id)

    async def _execute(self, command: DisruptionCommand, *, resumed: bool = False) -> str:
        """Carry out a started command (``resumed``: one that was executing already): check, taint, pre-spin, drain,
        retire."""
        late = None if resumed else self._late(command)
        if late is not None:  # nothing done: not held, the planner's next pass decides on what it sees
            return await self._finish(command, State.FAILED, late,
                                      [self.step(command, node, "Failed", late) for node in command.nodes], hold=False)
        if command.replacements and not self.provider.launches:
            return await self._finish(command, State.FAILED, REPLACEMENTS_UNSUPPORTED, [
                self.step(command, node, "Failed", REPLACEMENTS_UNSUPPORTED) for node in command.nodes])
        for node in command.nodes:
            why_not = await self.provider.cannot_retire(node)
            if why_not is not None:  # nothing done yet: the decision could not be run
                return await self._finish(command, State.FAILED, why_not, [self.step(command, node, "Failed", why_not)])
        gone = {node for node in command.nodes if await self.provider.instance_gone(node)}  # reported Terminated below
        if not resumed:  # (a resumed command's own evictions may be what its PDBs wait for now)
            for node in command.nodes:
                refused = None if node in gone else await self._refusal(command, node)
                if refused is not None:  # nothing done: not held, the planner's next pass decides on what it sees
                    why = f"not started: {refused}"
                    return await self._finish(command, State.FAILED, why, [self.step(command, node, "Failed", why)],
                                              hold=False)

        started = self.drainer.clock.monotonic()
        tainted: list[str] = []
        for node in command.nodes:
            if node in gone:
                continue  # reported Terminated below
            added = await self.drainer.taint(node)
            if added is None:
                continue  # already gone: reported Terminated below
            tainted.append(node)
            self._kube(kube_events.terminating(node, None, command.reason))
            await self.emit(command, node, "Tainted",
                            f"tainted {self.drainer.taint_words}" if added else "already tainted")
        if command.replacements:
            failed = await self._pre_spin(command)
            if failed is not None:  # nothing was evicted: untainted and the replacements deleted, all is undone
                why, failure = failed
                return await self._finish(command, State.ROLLED_BACK, why,
                                          [failure, *await self._roll_back(command, tainted)])
        for node in tainted:
            try:
                deadline = await self._termination_deadline(node)
                report = await self.drainer.drain(
                    node, on_evicted=lambda pod: self._evicted(command, pod), deadline=deadline,
                    on_deleted=None if deadline is None else functools.partial(self._deleted, deadline=deadline))
            except DrainFailed as e:
                self._kube(kube_events.failed_draining(node, None, str(e)))
                if command.method == "interruption":
                    # the cloud takes the instance whatever ebb does: a drain it cannot finish (a PDB that allows
                    # nothing) does not keep the node, whose pods go with it as they would with the instance
                    await self.emit(command, node, "Evicted",
                                    f"drain not finished: {e}; the node is removed all the same (the cloud takes an "
                                    "interrupted instance)")
                    continue
                failure = self.step(command, node, "Failed", f"drain failed: {e}")
                return await self._finish(command, State.FAILED, f"drain of {node} failed: {e}",
                                          [failure, *await self._roll_back(command, tainted)])
            self.metrics.nodes_drained.labels(nodepool=command.node_pool).inc()
            skipped = ", ".join(f"{pod} ({why})" for pod, why in sorted(report.skipped.items()))
            deleted = ", ".join(sorted(report.deleted))
            await self.emit(
                command, node, "Evicted",
                f"evicted {len(report.evicted)} pod(s) after {report.blocked} refusal(s)"
                + (f"; deleted at the terminationGracePeriod deadline: {deleted}" if deleted else "")
                + (f"; left alone: {skipped}" if skipped else ""),
            )
        return await self._retire(command, started)

    def _late(self, command: DisruptionCommand) -> str | None:
        """Why ``command`` is too old to start (``max_age`` seconds after its approval), or None."""
        if self.max_age is None or command.method == "interruption":
            return None
        age = (self.clock() - command.approved_at).total_seconds()
        if age <= self.max_age:
            return None
        return (f"not started: approved {age:.0f} s ago, more than the {self.max_age:g} s a command may wait "
                f"(max_command_age_seconds); the cluster may have changed since its validation")

    async def _refusal(self, command: DisruptionCommand, node: str) -> str | None:
        """Why the drain of ``node`` would start blocked (``Drainer.refusal``: a PodDisruptionBudget allows no
        eviction now), for the methods the planner keeps off such a node: emptiness, consolidation, and drift or
        expiration of a node without a terminationGracePeriod (``ebb.core.cluster``'s rule, checked again
        when the command starts, as Karpenter validates its candidates just before it acts). An interruption is
        never held back: the instance goes whatever ebb does."""
        if command.method == "interruption":
            return None
        if command.method in ("drift", "expiration") and await self.provider.termination_grace_period(node) is not None:
            return None
        return await self.drainer.refusal(node)

    async def _retire(self, command: DisruptionCommand, started: float) -> str:
        """Ask the provider to remove every (drained) node, then wait until each is gone → ``Terminated``;
        a node not gone within ``retire_timeout`` fails the decision (the evictions cannot be undone, and its
        removal is under way: nothing is untainted)."""
        asked: dict[str, str | None] = {}
        labels: dict[str, Mapping[str, str]] = {}
        for node in command.nodes:
            labels[node] = await self._labels(node)
            try:
                asked[node] = await self.provider.retire(node)
            except RetireError as e:
                return await self._finish(command, State.FAILED, str(e), [self.step(command, node, "Failed", str(e))])
            if asked[node] is not None:
                self.metrics.nodeclaims_disrupted.labels(
                    reason=command.message_kind or snake_case(command.reason),
                    nodepool=labels[node].get(LABEL_NODEPOOL, command.node_pool),
                    capacity_type=labels[node].get(LABEL_CAPACITY_TYPE, "")).inc()
        deadline = self.drainer.clock.monotonic() + self.retire_timeout
        waiting = list(command.nodes)
        while True:
            still: list[str] = []
            gone: list[DisruptionEvent] = []
            for node in waiting:
                if not await self.provider.retired(node):
                    still.append(node)
                    continue
                if asked[node] is not None:
                    self.metrics.terminated(command.node_pool, self.drainer.clock.monotonic() - started)
                    self.metrics.nodes_terminated.labels(
                        nodepool=labels[node].get(LABEL_NODEPOOL, command.node_pool),
                        zone=labels[node].get(LABEL_ZONE, "")).inc()
                gone.append(self.step(command, node, "Terminated", asked[node] or "node already gone"))
            waiting = still
            if not waiting:  # the last ones gone: their steps and the decision's end in one transaction
                return await self._finish(command, State.SUCCEEDED, events=gone)
            if gone:
                await self.store.record_steps(gone)
            if self.drainer.clock.monotonic() + self.drainer.poll_interval > deadline:
                why = f"not gone {self.retire_timeout:g}s after its removal was asked for ({self.provider.name})"
                return await self._finish(command, State.FAILED, f"{', '.join(waiting)} {why}",
                                          [self.step(command, node, "Failed", why) for node in waiting])
            await self.drainer.sleep(self.drainer.poll_interval)

    async def _pre_spin(self, command: DisruptionCommand) -> tuple[str, DisruptionEvent] | None:
        """Launch the command's replacements and wait until all are ready; None when they are, else why not and
        the step that says so. The replacements not ready then are deleted again; one that is Ready is kept, as
        Karpenter keeps a failed command's replacements: the scheduler may have put pods there, which deleting it
        would take away without a drain."""
        first = command.nodes[0]
        launched: list[str] = []
        ready: set[str] = set()
        try:
            for index, replacement in enumerate(command.replacements):
                name = replacement_name(command.decision_id, index, replacement.node_pool)
                try:
                    done = await self.provider.launch(name, replacement, decision_id=command.decision_id)
                except LaunchError:
                    raise
                except Exception as e:  # the API refused it (a webhook, 403, 422, ...): Karpenter aborts the command
                    launched.append(name)  # a create that timed out may have been stored: deleted with the rest
                    raise LaunchError(f"creating {name} failed: {e}") from e
                launched.append(name)
                self.metrics.nodes_created.labels(
                    nodepool=replacement.node_pool,
                    zone=replacement.zones[0] if len(replacement.zones) == 1 else "").inc()
                self._kube(kube_events.launching(name, command.reason))
                await self.emit(command, first, "Launching", f"launching {name}: {done.summary}", key=name)
            await self.emit(command, first, "WaitingReadiness", f"waiting for {', '.join(launched)} to be Ready")
            for name in launched:
                self._kube(kube_events.waiting_readiness(name))
            deadline = self.drainer.clock.monotonic() + self.ready_timeout
            waiting = list(launched)
            while waiting:
                waiting = [name for name in waiting if not await self._ready(name)]
                ready.update(name for name in launched if name not in waiting)
                if not waiting:
                    break
                if self.drainer.clock.monotonic() + self.drainer.poll_interval > deadline:
                    raise LaunchError(f"{', '.join(waiting)} not Ready within {self.ready_timeout:g}s")
                await self.drainer.sleep(self.drainer.poll_interval)
        except LaunchError as e:
            why = f"replacement launch failed: {e}"
            kept = [name for name in launched if name in ready]
            if kept:  # Karpenter keeps its replacements too: pods may run there already, emptiness takes it if none
                why += f"; kept {', '.join(kept)}, Ready (pods may run there; emptiness removes it if none do)"
            failure = self.step(command, first, "Failed", why)
            for node in command.nodes:
                self._kube(kube_events.failed_draining(node, None, why))
            for name in launched:
                if name not in ready:
                    await self.provider.delete_replacement(name)
            return why, failure
        return None

    async def _ready(self, name: str) -> bool:
        """Whether the replacement ``name`` is ready; a read the API fails is not ready yet (tried again at the next
        poll, until the ready timeout rolls the command back, as Karpenter retries until its command times out),
        and never an error that would leave the nodes tainted while the command is delivered again and again."""
        try:
            return await self.provider.ready(name)
        except LaunchError:
            raise
        except Exception as e:
            log.warning("reading a replacement failed", replacement=name, error=repr(e))
            return False

    def _evicted(self, command: DisruptionCommand, pod: Pod) -> None:
        """A pod of the command's drain was evicted: Karpenter's ``Evicted`` Pod event and
        ``ebb_pods_drained_total``, with the decision's reason (Karpenter: the NodeClaim's disruption reason)."""
        self.metrics.pods_drained.labels(reason=command.reason).inc()
        self._kube([kube_events.evicted(kube_events.pod_ref(pod.namespace, pod.name, pod.uid), command.reason)])

    async def _termination_deadline(self, node: str) -> datetime | None:
        """The node's terminationGracePeriod deadline (None: it has no grace period), announced with
        Karpenter's ``TerminationGracePeriodExpiring`` event."""
        grace_period = await self.provider.termination_grace_period(node)
        if grace_period is None:
            return None
        deadline = await self.drainer.termination_deadline(node, grace_period)
        self._kube(kube_events.termination_grace_period_expiring(node, None, deadline))
        return deadline

    def _deleted(self, pod: Pod, grace: int, *, deadline: datetime) -> None:
        """A pod deleted at its node's terminationGracePeriod deadline: Karpenter's ``Disrupted`` Pod event."""
        ref = kube_events.pod_ref(pod.namespace, pod.name, pod.uid)
        self._kube([kube_events.disrupted_pod(ref, grace, pod.termination_grace_seconds or 0, deadline)])

    async def _labels(self, node: str) -> Mapping[str, str]:
        """The Node's labels (nodepool, zone, capacity type of the metrics); empty when it is gone."""
        found = await self.drainer.api.read_node(node)
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def _kube(self, events: list[kube_events.KubeEvent]) -> None:
        if self.recorder is not None:
            self.recorder.record(events)

    async def _roll_back(self, command: DisruptionCommand, tainted: list[str]) -> list[DisruptionEvent]:
        """Untaint ``tainted``; the RolledBack steps (recorded with the decision's end)."""
        steps = []
        for node in tainted:
            removed = await self.drainer.untaint(node)
            if removed is None:
                continue
            steps.append(self.step(command, node, "RolledBack", f"untainted {self.drainer.taint_words}"))
        return steps

    async def _finish(self, command: DisruptionCommand, state: State, why: str = "",
                      events: list[DisruptionEvent] | None = None, *, hold: bool = True) -> str:
        """End the decision with its last steps (``events``), in one transaction (``DecisionStore.finish``); a
        failed or rolled back one holds its nodes for ``failure_hold`` unless not ``hold``."""
        recorded = await self.store.finish(command, state, self.clock(), hold_for=self.failure_hold if hold else 0.0,
                                           why=why, events=events or ())
        self.metrics.commands.labels(method=command.method, outcome=state.value).inc()
        if state is State.SUCCEEDED:
            self.succeeded += 1
        elif state is State.ROLLED_BACK:
            self.rolled_back += 1
        else:
            self.failed += 1
        log.info("command finished", command=str(command.id), decision_id=command.decision_id, state=state,
                 recorded=recorded)
        return state
