"""The termination-executor on the InMemoryBus, a SQLite store and a fake Kubernetes API (ordering and
backoff only; the real API server is in tests/integration/test_termination_executor.py): the eviction
order (non-critical, non-critical DaemonSet, critical, critical DaemonSet pods, as Karpenter's suite "should
evict pods in order"; mirror/static pods left alone: the rules themselves are tests/unit/test_drain_rules.py's),
429 → capped exponential backoff, 404 → gone, the eviction deadline failing the drain with a rollback,
idempotent taints, the decision's state and processed_messages, and the events on ebb.disruption.events."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from ebb.adapters.bus import HandlerFailed, InMemoryBus, RetryPolicy
from ebb.adapters.clock import ManualClock, Stopped
from ebb.adapters.kube.drain import (
    EXCLUDE_FROM_LOAD_BALANCERS,
    Drainer,
    DrainFailed,
    EvictionBackoff,
    taint_patch,
    untaint_patch,
)
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT, NodeProvider
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.models import DecisionEvent, ProcessedMessage
from ebb.contracts import TOPIC_DISRUPTION_COMMANDS
from ebb.core.drain import api_pod
from ebb_termination_executor import app
from ebb_termination_executor.executor import REPLACEMENTS_UNSUPPORTED, Executor
from ebb_termination_executor.settings import Settings
from tests.kit.executor import NOW, FakeApi, command, drainer, events_of, pod, sent
from tests.kit.waiting import eventually

# -- pure parts ------------------------------------------------------------------------------------------


def test_taint_patches_are_idempotent() -> None:
    other = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
    node = {"metadata": {"resourceVersion": "7"}, "spec": {"taints": [other]}}
    patch = taint_patch(node, DISRUPTED_TAINT)
    excluded = {EXCLUDE_FROM_LOAD_BALANCERS: "ebb"}
    assert patch == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/spec/taints", "value": [other, dict(DISRUPTED_TAINT)]},
        {"op": "add", "path": "/metadata/labels", "value": excluded},  # out of load balancers, as Karpenter's
    ]
    tainted = {"metadata": {"resourceVersion": "8", "labels": {"app": "x", **excluded}},
               "spec": {"taints": [other, dict(DISRUPTED_TAINT)]}}
    assert taint_patch(tainted, DISRUPTED_TAINT) is None
    assert untaint_patch(tainted, DISRUPTED_TAINT) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "8"},
        {"op": "add", "path": "/spec/taints", "value": [other]},
        {"op": "add", "path": "/metadata/labels", "value": {"app": "x"}},
    ]
    assert untaint_patch(node, DISRUPTED_TAINT) is None
    assert untaint_patch(tainted, {"key": "ebb.sh/disrupted", "effect": "NoSchedule"}) is None  # not ours
    assert taint_patch({"metadata": {}, "spec": {}}, DISRUPTED_TAINT) == [
        {"op": "add", "path": "/spec/taints", "value": [dict(DISRUPTED_TAINT)]},
        {"op": "add", "path": "/metadata/labels", "value": excluded},
    ]
    # the label someone else put is neither changed nor removed
    theirs: dict[str, Any] = {"metadata": {"labels": {EXCLUDE_FROM_LOAD_BALANCERS: "true"}}, "spec": {}}
    assert taint_patch(theirs, DISRUPTED_TAINT) == [
        {"op": "add", "path": "/spec/taints", "value": [dict(DISRUPTED_TAINT)]}]
    theirs["spec"]["taints"] = [dict(DISRUPTED_TAINT)]
    assert untaint_patch(theirs, DISRUPTED_TAINT) == [{"op": "add", "path": "/spec/taints", "value": []}]


def test_backoff_is_exponential_and_capped() -> None:
    backoff = EvictionBackoff(initial=0.5, multiplier=2, maximum=4)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]


# -- the drainer on the fake API -------------------------------------------------------------------------


async def test_drain_order_backoff_on_429_and_gone_pods() -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(
        pod("ds", owner="DaemonSet"),
        pod("critical", priority_class="system-cluster-critical"),
        pod("web-1"),
        pod("web-2"),
        pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}, owner="Node"),
        pod("elsewhere", node="n2"),
    )
    api.refusals["default/web-2"] = 5  # a PDB lets it go after 5 refusals
    api.linger["default/web-1"] = 2
    d = drainer(api, clock)
    assert await d.taint("n1") is True
    assert await d.taint("n1") is False  # idempotent: no second patch
    assert api.calls.count(("patch", "n1")) == 1
    report = await d.drain("n1")

    evictions = api.evictions()
    # the DaemonSet pod only after both web pods are gone (the rest of its tier); the critical pod last
    assert evictions.index("default/ds") > max(i for i, e in enumerate(evictions) if e.startswith("default/web"))
    assert evictions[-1] == "default/critical"
    assert evictions.count("default/web-2") == 6
    assert "default/mirror" not in evictions and "default/elsewhere" not in evictions
    assert report.blocked == 5
    assert report.skipped == {"default/mirror": "mirror/static pod"}
    assert sorted(report.evicted) == ["default/critical", "default/ds", "default/web-1", "default/web-2"]
    # capped exponential backoff between refusals (interleaved with web-1's polls)
    assert [s for s in clock.sleeps if s != 0.25] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert set(api.pods) == {"default/mirror", "default/elsewhere"}

    retirer = NodeProvider("none", api)
    assert await retirer.retire("n1") == "node deleted"
    assert api.nodes["n1"]["metadata"]["finalizers"] == []
    assert await d.untaint("n1") is True
    assert api.nodes["n1"]["spec"]["taints"] == []
    assert await retirer.retire("missing") is None
    assert await d.taint("missing") is None


async def test_drain_fails_at_the_deadline_without_force() -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("guarded"))
    api.refusals["default/guarded"] = -1  # the PDB never allows it
    d = drainer(api, clock, deadline=10.0)
    with pytest.raises(DrainFailed, match="could not be evicted within 10s"):
        await d.drain("n1")
    assert "default/guarded" in api.pods  # never deleted
    assert clock.monotonic() <= 10.0
    # an evicted pod that never goes fails as well
    clock2 = ManualClock()
    api2 = FakeApi(clock2)
    api2.add_node("n1")
    api2.add_pods(pod("stuck"))
    api2.linger["default/stuck"] = 10_000
    with pytest.raises(DrainFailed, match="still there"):
        await drainer(api2, clock2, deadline=3.0).drain("n1")


async def test_a_pod_the_parser_refuses_is_still_evicted_in_its_place() -> None:
    """ebb's parser is stricter than a drain needs (a request that is no quantity): the drain reads such a pod from
    the fields it uses and evicts it in its group, rather than leaving it on a node that is going away."""
    clock = ManualClock()
    api = FakeApi(clock)
    odd = pod("odd", owner="DaemonSet")
    odd["spec"]["containers"] = [{"name": "main", "resources": {"requests": {"cpu": "lots"}}}]
    api.add_pods(odd, pod("web"), pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}, owner="Node"))
    report = await drainer(api, clock).drain("n1")
    assert api.evictions() == ["default/web", "default/odd"]  # a DaemonSet's pod, after the rest of its tier
    assert report.skipped == {"default/mirror": "mirror/static pod"}


async def test_a_pod_that_is_no_pod_fails_the_drain_before_any_eviction() -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    broken = pod("broken")
    broken["metadata"]["deletionTimestamp"] = "soon"
    api.add_pods(pod("web"), broken)
    with pytest.raises(DrainFailed, match=r"a pod on node n1 cannot be read: .*deletionTimestamp"):
        await drainer(api, clock).drain("n1")
    assert api.evictions() == []


async def test_a_version_of_a_pod_is_parsed_once_between_the_check_and_the_drain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before the taint (`Drainer.refusal`) and the drain list the node's pods moments apart: a pod the
    apiserver numbered (uid and resourceVersion) is parsed once per version, and a pod that changed in between is
    parsed again."""
    parsed: list[str] = []

    def counted(raw: Any, previous: Any = None) -> Any:
        parsed.append(raw["metadata"]["name"])
        return api_pod(raw, previous)

    monkeypatch.setattr("ebb.adapters.kube.drain.api_pod", counted)
    clock = ManualClock()
    api = FakeApi(clock)
    a, b = pod("a"), pod("b")
    a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"] = "7", "8"
    api.add_pods(a, b)
    drains = drainer(api, clock)
    assert await drains.refusal("n1") is None
    assert sorted(parsed) == ["a", "b"]
    b["metadata"]["resourceVersion"] = "9"
    b["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] = "-5"
    await drains.drain("n1")
    assert sorted(parsed) == ["a", "b", "b"]  # b changed: parsed again; a was not
    assert sorted(api.evictions()) == ["default/a", "default/b"]


async def test_taint_retries_a_conflict() -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1", taints=[{"key": "a", "effect": "NoSchedule"}])
    api.conflicts = 2
    assert await drainer(api, clock).taint("n1") is True
    assert api.nodes["n1"]["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}, dict(DISRUPTED_TAINT)]


async def test_the_drainers_waits_end_when_the_service_stops() -> None:
    stop = asyncio.Event()
    sleep = Drainer(FakeApi(), disruption_taint=DISRUPTED_TAINT, stop=stop).sleep
    await sleep(0.01)
    stop.set()
    with pytest.raises(Stopped):
        await sleep(10)


# -- the service ------------------------------------------------------------------------------------------


async def run_once(bus: InMemoryBus, executor: Executor, until: int) -> None:
    """Consume commands until ``until`` commands were handled."""
    stop = asyncio.Event()
    task = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_COMMANDS], "executor", executor.handle, stop=stop))
    for _ in range(500):
        if executor.succeeded + executor.failed + executor.duplicates >= until:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await task


async def test_service_deletes_nodes_and_is_idempotent(store: DecisionStore) -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    for name in ("n1", "n2"):
        api.add_node(name)
    api.add_pods(pod("a", "n1"), pod("b", "n2"), pod("ds", "n2", owner="DaemonSet"))
    api.refusals["default/a"] = 2
    await store.add_decision(
        decision_id="d-1",
        method="emptiness",
        reason="Empty",
        action="delete",
        nodes=["n1", "n2"],
        replacements=[],
        created_at=NOW,
        state="approved",
    )
    bus = InMemoryBus()
    executor = Executor(bus, store, drainer(api, clock), clock=lambda: NOW)
    cmd = command(("n1", "n2"))
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, cmd)
    await run_once(bus, executor, 1)

    assert executor.succeeded == 1
    assert await store.state("d-1") == "succeeded"
    phases = [(node, phase) for node, phase, _ in await sent(store, bus)]
    for node in ("n1", "n2"):
        assert [p for n, p in phases if n == node] == ["Tainted", "Evicted", "Terminated"]
    messages = {(n, p): m for n, p, m in events_of(bus)}
    assert messages[("n1", "Evicted")] == "evicted 1 pod(s) after 2 refusal(s)"
    # deleted (and the termination finalizer removed) only after both nodes were drained
    assert api.calls[-4:] == [("delete", "n1"), ("patch", "n1"), ("delete", "n2"), ("patch", "n2")]
    found = await store.get_decision("d-1")
    assert found is not None
    decision, timeline = found
    assert decision.started_at is not None and decision.finished_at is not None
    assert [e.type for e in timeline].count("Terminated") == 2

    # the same command again: nothing happens
    calls = len(api.calls)
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, cmd)
    await run_once(bus, executor, 2)
    assert executor.duplicates == 1 and len(api.calls) == calls
    assert len(await sent(store, bus)) == 6
    async with store.engine.connect() as connection:
        processed = await connection.scalar(select(func.count()).select_from(ProcessedMessage))
        rows = await connection.scalar(select(func.count()).select_from(DecisionEvent))
    assert processed == 1 and rows == 6


async def test_failed_drain_rolls_back(store: DecisionStore) -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_node("n2")
    api.add_pods(pod("ok", "n1"), pod("guarded", "n2"))
    api.refusals["default/guarded"] = -1
    bus = InMemoryBus()
    executor = Executor(bus, store, drainer(api, clock, deadline=5.0), clock=lambda: NOW)
    outcome = await executor.execute(command(("n1", "n2"), decision_id="d-2"))  # no decisions row: inserted
    assert outcome == "failed"
    assert await store.state("d-2") == "failed"
    # the events keep their order per node (the key)
    phases = [(n, p) for n, p, _ in await sent(store, bus)]
    assert [p for n, p in phases if n == "n1"] == ["Tainted", "Evicted", "RolledBack"]
    assert [p for n, p in phases if n == "n2"] == ["Tainted", "Failed", "RolledBack"]
    assert all(api.nodes[n]["spec"]["taints"] == [] for n in ("n1", "n2"))
    assert "n1" in api.nodes and not api.nodes["n1"]["metadata"].get("deletionTimestamp")
    assert "default/guarded" in api.pods


async def test_an_interruptions_node_is_removed_though_its_drain_cannot_finish(store: DecisionStore) -> None:
    """The drain of an interrupted node that a PDB blocks past the eviction deadline does not keep the node (the
    cloud takes the instance whatever ebb does): the Evicted step says which pod would not go, the node is deleted
    and the decision succeeds; the same drain of a consolidation rolls back (``test_failed_drain_rolls_back``)."""
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("ok", "n1"), pod("guarded", "n1"))
    api.refusals["default/guarded"] = -1
    bus = InMemoryBus()
    executor = Executor(bus, store, drainer(api, clock, deadline=5.0), clock=lambda: NOW)
    spot = command(("n1",), decision_id="int-1").model_copy(update={"method": "interruption",
                                                                     "reason": "Interrupted"})
    assert await executor.execute(spot) == "succeeded"
    assert await store.state("int-1") == "succeeded"
    steps = [(p, m) for n, p, m in await sent(store, bus)]
    assert [p for p, _ in steps] == ["Tainted", "Evicted", "Terminated"]
    assert "guarded" in steps[1][1] and "removed all the same" in steps[1][1]
    assert ("delete", "n1") in api.calls and api.nodes["n1"]["metadata"].get("deletionTimestamp")


async def test_replacements_fail_and_finished_decisions_are_left(store: DecisionStore) -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    bus = InMemoryBus()
    executor = Executor(bus, store, drainer(api, clock), clock=lambda: NOW)
    assert await executor.execute(command(("n1",), decision_id="d-3", replacements=True)) == "failed"
    assert await sent(store, bus) == [("n1", "Failed", REPLACEMENTS_UNSUPPORTED)]
    assert api.calls == []  # nothing tainted
    assert await store.state("d-3") == "failed"
    # another command of a finished decision does nothing
    assert await executor.execute(command(("n1",), decision_id="d-3")) == "finished"
    assert api.calls == []


async def test_missing_node_is_terminated_at_once(store: DecisionStore) -> None:
    clock = ManualClock()
    api = FakeApi(clock)
    bus = InMemoryBus()
    executor = Executor(bus, store, drainer(api, clock), clock=lambda: NOW)
    assert await executor.execute(command(("gone",), decision_id="d-4")) == "succeeded"
    assert await sent(store, bus) == [("gone", "Terminated", "node already gone")]


async def test_app_run_stops_gracefully(store: DecisionStore) -> None:
    api = FakeApi()
    api.add_node("n1")
    api.add_pods(pod("guarded", "n1"))
    api.refusals["default/guarded"] = -1
    bus = InMemoryBus()
    stop = asyncio.Event()
    started = asyncio.Event()
    settings = Settings(
        eviction_deadline_seconds=60,
        eviction_backoff_initial_seconds=0.05,
        eviction_backoff_max_seconds=0.05,
        group="executor",
    )
    task = asyncio.create_task(app.run(settings, stop, bus=bus, node_api=api, store=store, started=started))
    await started.wait()
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("n1",), decision_id="d-5", approved_at=datetime.now(UTC)))
    for _ in range(200):
        if api.evictions():
            break
        await asyncio.sleep(0.01)
    stop.set()
    executor = await asyncio.wait_for(task, 5)
    assert executor is not None  # enforce mode: app.run returns its executor (shadow mode has none)
    assert executor.succeeded == executor.failed == 0
    # interrupted mid-drain: not committed, the decision still executing, resumed after a restart
    assert bus.lag("executor", TOPIC_DISRUPTION_COMMANDS) == 1
    assert await store.state("d-5") == "executing"


class UnreachableApi(FakeApi):
    """An apiserver that cannot be reached: every read of a node fails (a transient error)."""

    async def read_node(self, name: str) -> dict[str, Any] | None:
        raise ConnectionRefusedError(111, "Connect call failed")


async def test_app_run_ends_when_its_handler_gives_up_so_the_process_restarts(store: DecisionStore) -> None:
    """A command whose handler keeps failing (the apiserver unreachable through every retry) ends the consumer
    with HandlerFailed: the whole run ends with it, its event writer too, so that the process exits and is
    restarted with the command redelivered. Before, the writer (and in the kwok mode the finalizer loop) kept the
    process alive with its consumer dead, and the decision stayed executing for ever (found by the chaos run)."""

    async def sink(namespace: str, event: dict[str, Any]) -> None:
        return None

    recorder = EventRecorder(sink, component="ebb-termination-executor")
    bus = InMemoryBus(retry=RetryPolicy(initial=0.01, maximum=0.01, max_attempts=3))
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        app.run(
            Settings(group="executor"),
            stop,
            bus=bus,
            node_api=UnreachableApi(),
            store=store,
            started=started,
            recorder=recorder,
        )
    )
    await started.wait()
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("n1",), decision_id="d-6", approved_at=datetime.now(UTC)))
    with pytest.raises(HandlerFailed):
        await asyncio.wait_for(task, 10)
    assert stop.is_set()
    assert bus.lag("executor", TOPIC_DISRUPTION_COMMANDS) == 1  # not committed: delivered again after the restart


class RestartingApi(FakeApi):
    """An apiserver that cannot be reached for its first ``down`` reads of a node (a restart), then answers."""

    def __init__(self, down: int) -> None:
        super().__init__()
        self.down = down

    async def read_node(self, name: str) -> dict[str, Any] | None:
        if self.down > 0:
            self.down -= 1
            raise ConnectionRefusedError(111, "Connect call failed")
        return await super().read_node(name)


async def test_with_unlimited_retries_a_command_outlasts_an_apiserver_restart(store: DecisionStore) -> None:
    """The executor's own Kafka bus retries a command's handler without limit (``app.run``): a command that fails
    for longer than the default ten attempts (an apiserver restart) is carried out once the apiserver is back, with
    no HandlerFailed and no restart of the process."""
    api = RestartingApi(down=15)
    bus = InMemoryBus(retry=RetryPolicy(initial=0.001, maximum=0.001, max_attempts=None))
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        app.run(Settings(group="executor"), stop, bus=bus, node_api=api, store=store, started=started)
    )
    await started.wait()
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("gone",), decision_id="d-7", approved_at=datetime.now(UTC)))
    for _ in range(500):
        if await store.state("d-7") == "succeeded":
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert api.down == 0 and await store.state("d-7") == "succeeded"
    assert bus.lag("executor", TOPIC_DISRUPTION_COMMANDS) == 0


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_TERMINATION_EXECUTOR_EVICTION_DEADLINE_SECONDS", "30")
    monkeypatch.setenv("EBB_TERMINATION_EXECUTOR_CLUSTER", "prod")
    settings = Settings()
    assert settings.eviction_deadline_seconds == 30 and settings.cluster == "prod"


async def test_a_resumed_command_is_not_checked_again_before_its_drain(store: DecisionStore) -> None:
    """A pod its PDB blocks now fails a new command before the taint (the dry-run Eviction is asked); the same
    command resumed after a crash is not asked again (its own evictions may be what the PDB waits for now) and
    drains through the refusals."""
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("a", "n1"))
    api.blocked_now.add("default/a")
    await store.add_decision(decision_id="d-1", method="emptiness", reason="Empty", action="delete", nodes=["n1"],
                             replacements=[], created_at=NOW, state="approved")
    executor = Executor(InMemoryBus(), store, drainer(api, clock), clock=lambda: NOW)
    assert await executor.execute(command(("n1",))) == "failed"
    assert ("dry-run", "default/a") in api.calls and api.evictions() == [] and ("patch", "n1") not in api.calls

    await store.add_decision(decision_id="d-2", method="emptiness", reason="Empty", action="delete", nodes=["n1"],
                             replacements=[], created_at=NOW, state="executing")
    api.calls.clear()
    api.refusals["default/a"] = 1
    assert await executor.execute(command(("n1",), decision_id="d-2")) == "succeeded"
    assert ("dry-run", "default/a") not in api.calls and api.evictions() == ["default/a", "default/a"]


@pytest.mark.parametrize(("waited", "method", "state", "outcome"), [
    (301.0, "emptiness", "approved", "failed"),  # the executor was down or behind: the cluster may have changed
    (300.0, "emptiness", "approved", "succeeded"),  # at the limit: carried out
    (3600.0, "interruption", "approved", "succeeded"),  # the instance goes whatever ebb does: drained all the same
    (3600.0, "emptiness", "executing", "succeeded"),  # resumed after a crash: its taint and evictions are under way
])
async def test_a_command_started_too_long_after_its_approval_is_not_carried_out(
        store: DecisionStore, waited: float, method: str, state: str, outcome: str) -> None:
    """A command that starts more than ``max_age`` seconds after its approval fails before anything is done (no
    taint, no eviction) and leaves no hold, so the planner's next pass decides on the cluster of now."""
    clock = ManualClock()
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("a", "n1"))
    await store.add_decision(decision_id="d-1", method=method, reason="Empty", action="delete", nodes=["n1"],
                             replacements=[], created_at=NOW, state=state)
    bus = InMemoryBus()
    started = NOW + timedelta(seconds=waited)
    executor = Executor(bus, store, drainer(api, clock), clock=lambda: started, max_age=300.0, failure_hold=900.0)
    cmd = command(("n1",)).model_copy(update={"method": method})
    assert await executor.execute(cmd) == outcome
    assert await store.state("d-1") == outcome
    if outcome == "failed":
        assert api.calls == [] and not api.nodes["n1"]["metadata"].get("deletionTimestamp")
        assert await sent(store, bus) == [(
            "n1", "Failed", "not started: approved 301 s ago, more than the 300 s a command may wait "
            "(max_command_age_seconds); the cluster may have changed since its validation")]
        assert list(await store.list_holds(started)) == []
    else:
        assert api.evictions() == ["default/a"] and api.nodes["n1"]["metadata"].get("deletionTimestamp")


async def test_an_interruption_does_not_wait_behind_commands_in_flight(store: DecisionStore) -> None:
    """With one command at a time (CONCURRENCY 1), a drain held by a PDB takes the slot; the interruption of another
    node published after it on the same partition runs at once, on the interruptions' own consumer (Karpenter
    deletes an interrupted NodeClaim outside its disruption queue: the cloud takes the node in 2 minutes)."""
    api = FakeApi()
    api.add_node("n1")
    api.add_node("spot")
    api.add_pods(pod("guarded", "n1"), pod("web", "spot"))
    api.refusals["default/guarded"] = -1  # its PDB never allows the eviction
    bus = InMemoryBus()
    stop = asyncio.Event()
    started = asyncio.Event()
    settings = Settings(eviction_deadline_seconds=60, eviction_backoff_initial_seconds=0.05,
                        eviction_backoff_max_seconds=0.05, group="executor", concurrency=1,
                        min_drain_seconds=0)
    task = asyncio.create_task(app.run(settings, stop, bus=bus, node_api=api, store=store, started=started))
    await started.wait()
    now = datetime.now(UTC)
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, command(("n1",), decision_id="d-held", approved_at=now))
    interrupted = command(("spot",), decision_id="d-int", approved_at=now).model_copy(
        update={"method": "interruption", "reason": "Interrupted"})
    await bus.publish(TOPIC_DISRUPTION_COMMANDS, interrupted)
    try:
        async def interruption_done() -> bool:
            return await store.state("d-int") == "succeeded"

        async def held_executing() -> bool:
            return await store.state("d-held") == "executing"

        # the held drain has the one slot (its own consumer may take it after the interruption's has started: the
        # two consumers run side by side), and the interruption is carried out while it still holds it
        await eventually("the held command in its drain", held_executing, 5, interval=0.02)
        await eventually("the interruption carried out", interruption_done, 5, interval=0.02)
        assert await store.state("d-held") == "executing"  # still waiting for its PDB
        assert "default/web" in api.evictions()
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
