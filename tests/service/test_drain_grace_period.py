"""The drain's terminationGracePeriod deadline and stuck-terminating pods, as Karpenter's terminator
(``pkg/controllers/node/termination/terminator/terminator.go``, ``DeleteExpiringPods``, ``IsStuckTerminating``;
the cases of ``termination/suite_test.go`` "TerminationGracePeriod" a fake API can express), on the fake API
of tests/kit/executor.py and a manual clock. The rules themselves (``delete_time``, ``granted_grace``,
stuck terminating, do-not-disrupt) are tests/unit/test_drain_rules.py's; the real API server is in
tests/integration/test_termination_grace_period.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import ManualClock
from ebb.adapters.kube.drain import TERMINATION_TIMESTAMP_ANNOTATION, DrainFailed
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.store.decision_store import DecisionStore
from ebb_termination_executor.executor import Executor
from tests.kit.executor import NOW, FakeApi, command, drainer, pod

START = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def graced(name: str, grace: int, **kwargs: Any) -> dict[str, Any]:
    p = pod(name, **kwargs)
    p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


def terminating(p: dict[str, Any], ends: datetime) -> dict[str, Any]:
    p["metadata"]["deletionTimestamp"] = stamp(ends)
    return p


async def test_stuck_terminating_pods_are_neither_evicted_nor_waited_for() -> None:
    """Karpenter's IsDrainable: a pod terminating past its grace (plus a minute) does not hold the drain."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    stuck = terminating(pod("stuck"), START - timedelta(minutes=5))
    api.add_pods(stuck, pod("web"))
    api.linger["default/stuck"] = 10**6  # never goes
    report = await drainer(api, clock).drain("n1")
    assert api.evictions() == ["default/web"]
    assert report.skipped == {"default/stuck": "stuck terminating"}
    assert report.evicted == ["default/web"]


async def test_a_pod_evicted_and_stuck_terminating_stops_being_waited_for() -> None:
    """A pod that is evicted but never goes counts as gone once it is a minute past its deletionTimestamp,
    instead of failing the drain at the eviction deadline."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(pod("web"))
    api.linger["default/web"] = 10**6
    drain = drainer(api, clock, deadline=600.0)
    report = await drain.drain("n1")  # the fake API stamps its deletion with the default 30 s grace
    assert report.evicted == ["default/web"]
    assert 90 <= clock.monotonic() <= 92  # 30 s grace + the stuck minute, in 0.25 s polls


async def test_without_a_grace_period_a_pdb_blocks_until_the_eviction_deadline() -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("web", 30))
    api.refusals["default/web"] = -1
    with pytest.raises(DrainFailed, match="could not be evicted within 60s"):
        await drainer(api, clock).drain("n1")
    assert api.deleted == []


async def test_a_pdb_blocked_pod_is_deleted_at_deadline_minus_its_grace() -> None:
    """Karpenter: "should preemptively delete pods to satisfy their terminationGracePeriodSeconds": a pod whose
    PDB never allows its eviction is deleted (PDB bypassed) at deadline - grace, with what is left of the
    deadline as its grace, and the drain ends: the eviction deadline does not fail it."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("web", 300), graced("quick", 30))
    api.refusals["default/web"] = -1
    deleted: list[tuple[str, int]] = []
    deadline = START + timedelta(seconds=900)
    report = await drainer(api, clock).drain(
        "n1", deadline=deadline, on_deleted=lambda p, grace: deleted.append((p.name, grace)))
    assert [ref for ref, _ in api.deleted] == ["default/web"]
    assert report.deleted == ["default/web"]
    assert "default/quick" in report.evicted and "default/web" not in report.evicted
    [(name, grace)] = deleted
    assert name == "web"
    assert api.deleted == [("default/web", grace)]
    assert 1 <= grace <= 300
    assert clock.now() >= deadline - timedelta(seconds=300)  # not deleted before its time


async def test_pods_whose_grace_outlasts_the_deadline_are_deleted_at_once_with_one_second_at_least() -> None:
    """Karpenter: "should only delete pods when their terminationGracePeriodSeconds is less than the NodeClaim's
    remaining terminationGracePeriod": a deadline already past deletes every pod at once with 1 s grace, even
    one in a later group (a critical DaemonSet pod) while the first group is still blocked."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("web", 30), graced("agent", 30, owner="DaemonSet", priority_class="system-node-critical"))
    api.refusals["default/web"] = -1
    report = await drainer(api, clock).drain("n1", deadline=START - timedelta(seconds=5))
    assert sorted(api.deleted) == [("default/agent", 1), ("default/web", 1)]
    assert sorted(report.deleted) == ["default/agent", "default/web"]


def started(p: dict[str, Any], at: datetime) -> dict[str, Any]:
    p.setdefault("status", {})["startTime"] = stamp(at)
    return p


async def test_a_do_not_disrupt_pod_is_not_evicted_but_deleted_at_the_deadline() -> None:
    """Karpenter's terminator evicts no pod whose do-not-disrupt holds (``IsEvictable``) and waits for it
    (``IsWaitingEviction``) until the terminationGracePeriod deadline deletes it. ebb's drift and expiration take
    such a node only when it has a grace period, so the drain has a deadline."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("batch", 60, annotations={"karpenter.sh/do-not-disrupt": "true"}), graced("web", 30))
    deadline = START + timedelta(seconds=600)
    report = await drainer(api, clock).drain("n1", deadline=deadline)
    assert api.evictions() == ["default/web"]
    assert report.evicted == ["default/web"]
    assert api.deleted == [("default/batch", 60)]
    assert report.deleted == ["default/batch"]
    assert clock.now() >= deadline - timedelta(seconds=60)


async def test_a_do_not_disrupt_pod_that_goes_by_itself_is_not_deleted() -> None:
    """The drain waits for the protected pod; a pod that ends before its deletion time (a job finishing) ends the
    drain without a deletion."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("batch", 60, annotations={"karpenter.sh/do-not-disrupt": "true"}))
    drain = drainer(api, clock)
    original = api.read_pod

    async def gone_after_a_minute(namespace: str, name: str) -> Any:
        if clock.now() >= START + timedelta(minutes=1):
            api.pods.pop(f"{namespace}/{name}", None)
        return await original(namespace, name)

    api.read_pod = gone_after_a_minute  # type: ignore[method-assign]
    report = await drain.drain("n1", deadline=START + timedelta(hours=1))
    assert api.evictions() == []
    assert api.deleted == []
    assert report.evicted == [] and report.deleted == []
    assert clock.now() < START + timedelta(minutes=2)


async def test_pods_that_fit_in_the_deadline_are_evicted_not_deleted() -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(graced("web", 30), graced("db", 60))
    report = await drainer(api, clock).drain("n1", deadline=START + timedelta(hours=1))
    assert api.deleted == []
    assert sorted(report.evicted) == ["default/db", "default/web"]


async def test_a_terminating_pod_past_the_deadline_is_deleted_again_with_the_shorter_grace() -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_pods(terminating(graced("slow", 3600), START + timedelta(minutes=59)))
    api.linger["default/slow"] = 1
    deadline = START + timedelta(seconds=120)
    await drainer(api, clock).drain("n1", deadline=deadline)
    assert api.evictions() == []
    assert api.deleted == [("default/slow", 120)]


# -- the executor ---------------------------------------------------------------------------------------------


def recorder() -> tuple[EventRecorder, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []

    async def sink(namespace: str, body: dict[str, Any]) -> object:
        written.append(body)
        return body

    return EventRecorder(sink, component="ebb-termination-executor"), written


def pool_with(grace_period: str | None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {} if grace_period is None else {"terminationGracePeriod": grace_period}}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": template}}


async def execute(store: DecisionStore, api: FakeApi, clock: ManualClock, grace_period: str | None,
                  events: EventRecorder) -> str:
    async def nodepools(name: str) -> dict[str, Any] | None:
        return pool_with(grace_period) if name == "default" else None

    await store.add_decision(decision_id="d-1", method="emptiness", reason="Empty", action="delete",
                             nodes=["n1"], replacements=[], created_at=NOW, state="approved")
    provider = NodeProvider("kwok", api, nodepools=nodepools)
    executor = Executor(InMemoryBus(), store, drainer(api, clock), clock=lambda: NOW, provider=provider,
                        recorder=events)
    return await executor.execute(command(("n1",)))


async def test_the_executor_deletes_a_pdb_blocked_pod_at_the_nodepools_grace_period(store: DecisionStore) -> None:
    """A NodePool with terminationGracePeriod: 5m: the node's deadline is recorded on it and announced with
    TerminationGracePeriodExpiring; the pod its PDB never lets go is deleted with Karpenter's Disrupted event
    and the node is terminated, where without a grace period the drain fails (next test)."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    api.nodes["n1"]["metadata"]["labels"] = {"karpenter.sh/nodepool": "default"}
    api.add_pods(graced("web", 30))
    api.refusals["default/web"] = -1
    events, written = recorder()
    assert await execute(store, api, clock, "5m", events) == "succeeded"
    await events.flush()
    deadline = START + timedelta(minutes=5)
    assert [ref for ref, _ in api.deleted] == ["default/web"]
    reasons = [(e["involvedObject"]["kind"], e["reason"], e["message"]) for e in written]
    assert ("Node", "TerminationGracePeriodExpiring", f"All pods will be deleted by {stamp(deadline)}") in reasons
    [(_, grace)] = api.deleted
    assert ("Pod", "Disrupted",
            f"Deleting the pod to accommodate the terminationTime {deadline.strftime('%Y-%m-%d %H:%M:%S')} +0000 UTC "
            f"of the node. The pod was granted {grace} seconds of grace-period of its 30 "
            "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
            ) in reasons
    assert api.evictions() and all(ref == "default/web" for ref in api.evictions())
    assert ("delete", "n1") in api.calls


async def test_without_a_grace_period_the_pdb_fails_the_drain_and_rollback_clears_the_deadline(
        store: DecisionStore) -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    api.nodes["n1"]["metadata"]["labels"] = {"karpenter.sh/nodepool": "default"}
    api.nodes["n1"]["metadata"]["annotations"] = {TERMINATION_TIMESTAMP_ANNOTATION: stamp(START)}  # a stale one
    api.add_pods(graced("web", 30))
    api.refusals["default/web"] = -1
    events, _ = recorder()
    assert await execute(store, api, clock, None, events) == "failed"
    assert api.deleted == []
    assert TERMINATION_TIMESTAMP_ANNOTATION not in api.nodes["n1"]["metadata"]["annotations"]


async def test_a_resumed_drain_keeps_the_recorded_deadline() -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    drain = drainer(api, clock)
    first = await drain.termination_deadline("n1", 300)
    clock.advance(120)
    assert await drain.termination_deadline("n1", 300) == first == START + timedelta(minutes=5)
