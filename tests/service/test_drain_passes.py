"""The drain looks again, as Karpenter's terminator does on every pass (``terminator.go`` ``Drain``, the
controller's ``MinDrainTime``; the termination suite's "should not finish draining until minDrainTime has passed",
"should not evict a pod with the same name but a different UID", "should evict a pod once its do-not-disrupt
duration has expired"): pods bound after the first list are evicted too, an eviction names the pod's UID, a
do-not-disrupt that runs out mid-drain lets the pod be evicted, and a pod that finishes is gone. On the fake API of
tests/kit/executor.py and a manual clock; the real API server's answer to a UID precondition is in
tests/integration/test_drain_order.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ebb.adapters.clock import ManualClock
from ebb.adapters.kube.drain import MIN_DRAIN_SECONDS
from ebb.adapters.kube.node_api import EvictionResult
from tests.kit.executor import FakeApi, drainer, pod

START = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_pod_bound_while_the_node_drains_is_evicted_too() -> None:
    """A pod the scheduler bound before it saw the taint (or created with its nodeName) is listed on the next look
    and evicted; the first list alone would leave it to be killed with the node."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("web"))
    original = api.evict

    async def bind_late_on_first_eviction(namespace: str, name: str, *, uid: str = "",
                                          dry_run: bool = False) -> tuple[EvictionResult, str]:
        if name == "web":
            api.add_pods(pod("late"))
        return await original(namespace, name, uid=uid, dry_run=dry_run)

    api.evict = bind_late_on_first_eviction  # type: ignore[method-assign]
    drain = drainer(api, clock)
    await drain.taint("n1")
    report = await drain.drain("n1")
    assert api.evictions() == ["default/web", "default/late"]
    assert report.evicted == ["default/web", "default/late"]
    assert not [ref for ref, p in api.pods.items() if p["spec"]["nodeName"] == "n1"]


async def test_a_drain_ends_no_sooner_than_the_minimum_after_the_taint() -> None:
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    drain = drainer(api, clock)
    await drain.taint("n1")
    tainted = clock.monotonic()
    report = await drain.drain("n1")  # an empty node: nothing to evict
    assert report.evicted == []
    assert MIN_DRAIN_SECONDS <= clock.monotonic() - tainted <= MIN_DRAIN_SECONDS + 0.25


async def test_a_drain_long_after_the_taint_does_not_wait_again() -> None:
    """The minimum counts from the taint: a node whose replacements took a minute to be Ready drains at once."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    drain = drainer(api, clock)
    await drain.taint("n1")
    await clock.sleep(60)
    before = clock.monotonic()
    await drain.drain("n1")
    assert clock.monotonic() == before


async def test_an_eviction_never_takes_another_pod_of_the_same_name() -> None:
    """A pod whose PDB refuses its eviction is replaced meanwhile by another pod of its name (a StatefulSet's):
    the next eviction names the first pod's UID, is refused with a conflict, and the first pod counts as gone."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(pod("db-0"))
    api.refusals["default/db-0"] = 1
    original = api.evict
    replacement = pod("db-0", "n2")

    async def replaced_after_the_first_refusal(namespace: str, name: str, *, uid: str = "",
                                               dry_run: bool = False) -> tuple[EvictionResult, str]:
        answer = await original(namespace, name, uid=uid, dry_run=dry_run)
        if answer[0] == "blocked":
            api.pods["default/db-0"] = replacement
        return answer

    api.evict = replaced_after_the_first_refusal  # type: ignore[method-assign]
    drain = drainer(api, clock)
    await drain.taint("n1")
    report = await drain.drain("n1")
    assert api.pods["default/db-0"] is replacement
    assert not replacement["metadata"].get("deletionTimestamp")  # not evicted
    assert report.evicted == ["default/db-0"]  # gone from n1: the eviction's 409 says so


def graced(name: str, grace: int, **kwargs: Any) -> dict[str, Any]:
    p = pod(name, **kwargs)
    p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


async def test_a_do_not_disrupt_that_runs_out_mid_drain_lets_the_pod_be_evicted() -> None:
    """A pod protected for 2 more minutes on a node with an hour's terminationGracePeriod is evicted (through its
    PDB) when the 2 minutes are up, not deleted at the deadline."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    protected = graced("batch", 60, annotations={"karpenter.sh/do-not-disrupt": "5m"})
    protected["status"]["startTime"] = stamp(START - timedelta(minutes=3))
    api.add_pods(protected)
    drain = drainer(api, clock)
    await drain.taint("n1")
    report = await drain.drain("n1", deadline=START + timedelta(hours=1))
    assert api.evictions() == ["default/batch"]
    assert report.evicted == ["default/batch"] and report.deleted == []
    assert START + timedelta(minutes=2) <= clock.now() < START + timedelta(minutes=4)


async def test_a_protected_pod_that_finishes_ends_the_drain() -> None:
    """A do-not-disrupt job pod that completes (Succeeded, still listed) is gone for the drain: Karpenter waits for
    no finished pod."""
    clock = ManualClock(START)
    api = FakeApi(clock)
    api.add_node("n1")
    api.add_pods(graced("job", 60, annotations={"karpenter.sh/do-not-disrupt": "true"}))
    original = api.read_pod

    async def done_after_a_minute(namespace: str, name: str) -> Any:
        if clock.now() >= START + timedelta(minutes=1):
            api.pods[f"{namespace}/{name}"]["status"]["phase"] = "Succeeded"
        return await original(namespace, name)

    api.read_pod = done_after_a_minute  # type: ignore[method-assign]
    drain = drainer(api, clock)
    await drain.taint("n1")
    report = await drain.drain("n1", deadline=START + timedelta(hours=1))
    assert api.evictions() == [] and api.deleted == []
    assert report.evicted == [] and report.deleted == []
    assert clock.now() < START + timedelta(minutes=2)
