"""The termination-executor's metrics, Karpenter's names with ebb_ for karpenter_
(ebb_pods_eviction_requests_total{code}, ebb_pods_drained_total{reason}, ebb_nodes_drained_total{nodepool},
ebb_nodes_terminated_total{nodepool,zone}, ebb_nodeclaims_disrupted_total{reason,nodepool,capacity_type},
ebb_nodes_termination_duration_seconds as a Summary with Karpenter's quantiles and
ebb_nodeclaims_termination_duration_seconds as a histogram, ebb_nodes_created_total{nodepool,zone}) and ebb's
ebb_disruption_commands_total, ebb_disruption_commands_executing and ebb_disruption_command_longest_running_seconds,
and the Evicted Pod events, on the embedded mode's simulated API server (real PDB semantics) with the InMemoryBus and
SQLite."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.clock import ManualClock
from ebb.adapters.kube.events import EventRecorder
from ebb.adapters.kube.node_api import eviction_code
from ebb.adapters.kube.node_provider import NodeProvider
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import DisruptionCommand
from ebb.contracts.messages import Method, Reason
from ebb_embedded.cluster import SimulatedCluster
from ebb_termination_executor.app import build_executor
from ebb_termination_executor.executor import Executor
from ebb_termination_executor.metrics import Metrics, snake_case
from ebb_termination_executor.settings import Settings
from tests.kit.builders import NOW, catalog, node, nodepool, pdb, pod


@pytest.mark.parametrize(("result", "message", "code"), [
    ("evicted", "", "200"), ("blocked", "Cannot evict pod", "429"), ("gone", "not found", "404"),
    ("refused", "HTTP 500: This pod has more than one PodDisruptionBudget", "500"),
    ("refused", "HTTP 403: forbidden", "403"), ("refused", "something odd", "error"),
])
def test_eviction_codes(result: Any, message: str, code: str) -> None:
    assert eviction_code(result, message) == code


def command(*nodes: str, method: Method = "emptiness", reason: Reason = "Empty",
            message_kind: str | None = None) -> DisruptionCommand:
    return DisruptionCommand(decision_id="d1", node_pool="default", method=method, reason=reason,
                             action="delete", nodes=nodes, replacements=(), savings_per_hour=0.1,
                             explanation="x", approved_at=NOW, message_kind=message_kind)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


class Sink:
    """A fake API server for the EventRecorder: keeps the Event bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, namespace: str, body: dict[str, Any]) -> object:
        assert namespace == body["metadata"]["namespace"]
        self.bodies.append(body)
        return body


def pdb_at_zero() -> list[dict[str, Any]]:
    """Two nodes with a pod of ``web`` each, under a PDB that allows no eviction (``minAvailable: 2``)."""
    return [nodepool(), node("a"), node("b"), pod("web-0", "a", labels={"app": "web"}),
            pod("web-1", "b", labels={"app": "web"}), pdb("web", {"app": "web"}, min_available=2)]


def fast_executor(docs: list[dict[str, Any]], store: DecisionStore, *, eviction_deadline: float,
                  failure_hold: float) -> tuple[Executor, SimulatedCluster, Metrics]:
    """An executor on a simulated cluster of ``docs``, its waits short."""
    bus = InMemoryBus()
    sim = SimulatedCluster(docs, bus, lambda: NOW)
    metrics = Metrics()
    settings = Settings(eviction_deadline_seconds=eviction_deadline, eviction_backoff_initial_seconds=0.01,
                        eviction_backoff_max_seconds=0.02, poll_interval_seconds=0.01,
                        failure_hold_seconds=failure_hold)
    executor = build_executor(settings, sim, bus, store, asyncio.Event(), clock=lambda: NOW, metrics=metrics)
    return executor, sim, metrics


async def run(docs: list[dict[str, Any]], store: DecisionStore, *nodes: str, sink: Sink | None = None,
              method: Method = "emptiness", reason: Reason = "Empty",
              message_kind: str | None = None) -> tuple[str, Metrics]:
    bus = InMemoryBus()
    sim = SimulatedCluster(docs, bus, lambda: NOW)
    metrics = Metrics()
    settings = Settings(eviction_deadline_seconds=0.3, eviction_backoff_initial_seconds=0.01,
                        eviction_backoff_max_seconds=0.02, poll_interval_seconds=0.01, failure_hold_seconds=0)
    recorder = EventRecorder(sink, component="ebb-termination-executor") if sink is not None else None
    executor = build_executor(settings, sim, bus, store, asyncio.Event(), clock=lambda: NOW, metrics=metrics,
                              recorder=recorder)
    outcome = await executor.execute(command(*nodes, method=method, reason=reason, message_kind=message_kind))
    if recorder is not None:
        await recorder.flush()
    return outcome, metrics


@pytest.mark.parametrize(("reason", "label"), [
    ("Underutilized", "underutilized"), ("Empty", "empty"), ("Drifted", "drifted"), ("Expired", "expired"),
    ("Interrupted", "interrupted"), ("SpotInterrupted", "spot_interrupted"),
])
def test_reasons_are_snake_cased_as_karpenter_does(reason: str, label: str) -> None:
    assert snake_case(reason) == label


async def test_a_drain_counts_its_evictions_and_the_termination(store: DecisionStore) -> None:
    docs = [nodepool(), node("a"), node("b"), pod("web-0", "a", labels={"app": "web"}),
            pod("web-1", "b", labels={"app": "web"}), pod("api-0", "a"), pdb("web", {"app": "web"}, min_available=1)]
    outcome, metrics = await run(docs, store, "a")
    assert outcome == "succeeded"
    r = metrics.registry
    assert sample(r, "ebb_pods_eviction_requests_total", code="200") == 2
    assert sample(r, "ebb_pods_eviction_requests_total", code="429") == 0
    assert sample(r, "ebb_nodes_termination_duration_seconds_count", nodepool="default") == 1
    assert sample(r, "ebb_nodeclaims_termination_duration_seconds_count", nodepool="default") == 1
    took = sample(r, "ebb_nodes_termination_duration_seconds_sum", nodepool="default")
    for quantile in ("0", "0.5", "0.9", "0.99", "1"):  # one node: every quantile is its duration
        assert sample(r, "ebb_nodes_termination_duration_seconds", nodepool="default", quantile=quantile) == took
    assert sample(r, "ebb_nodeclaims_termination_duration_seconds_bucket", nodepool="default", le="+Inf") == 1
    assert sample(r, "ebb_disruption_commands_total", method="emptiness", outcome="succeeded") == 1
    assert sample(r, "ebb_disruption_commands_executing") == 0
    assert sample(r, "ebb_nodes_created_total", nodepool="default", zone="us-east-1a") == 0
    assert sample(r, "ebb_pods_drained_total", reason="Empty") == 2
    assert sample(r, "ebb_nodes_drained_total", nodepool="default") == 1
    assert sample(r, "ebb_nodes_terminated_total", nodepool="default", zone="us-east-1a") == 1
    assert sample(r, "ebb_nodeclaims_disrupted_total", reason="empty", nodepool="default",
                  capacity_type="on-demand") == 1


async def test_each_evicted_pod_gets_karpenters_evicted_event(store: DecisionStore) -> None:
    """Karpenter's terminator records ``Evicted`` (``Evicted pod: <reason>``) on every pod it evicted, with
    the pod's uid (``kubectl describe pod`` lists events by uid); a pod left alone (here a mirror pod) gets
    none."""
    docs = [nodepool(), node("a", zone="us-east-1b", capacity_type="spot"), node("b"),
            pod("web-0", "a", ns="shop"), pod("api-0", "a"),
            pod("static", "a", annotations={"kubernetes.io/config.mirror": "x"}, owner=("Node", "a"))]
    for doc in docs[3:]:
        doc["metadata"]["uid"] = f"uid-{doc['metadata']['name']}"
    sink = Sink()
    outcome, metrics = await run(docs, store, "a", sink=sink, method="drift", reason="Drifted")
    assert outcome == "succeeded"
    pods = sorted((b["involvedObject"]["namespace"], b["involvedObject"]["name"], b["type"], b["message"],
                   b["metadata"]["namespace"], b["involvedObject"].get("uid"))
                  for b in sink.bodies if b["reason"] == "Evicted")
    assert pods == [("default", "api-0", "Normal", "Evicted pod: Drifted", "default", "uid-api-0"),
                    ("shop", "web-0", "Normal", "Evicted pod: Drifted", "shop", "uid-web-0")]
    assert all(b["involvedObject"]["kind"] == "Pod" for b in sink.bodies if b["reason"] == "Evicted")
    r = metrics.registry
    assert sample(r, "ebb_pods_drained_total", reason="Drifted") == 2
    assert sample(r, "ebb_nodes_terminated_total", nodepool="default", zone="us-east-1b") == 1
    assert sample(r, "ebb_nodeclaims_disrupted_total", reason="drifted", nodepool="default",
                  capacity_type="spot") == 1


async def test_a_budget_that_never_allows_the_eviction_is_counted_and_the_interrupted_node_goes_all_the_same(
        store: DecisionStore) -> None:
    """An interruption is drained whatever the PDBs allow when it starts (the instance goes anyway): the refusals
    are counted until the eviction deadline ends the drain, and the node is removed all the same, undrained."""
    docs = pdb_at_zero()
    outcome, metrics = await run(docs, store, "a", method="interruption", reason="Interrupted",
                                 message_kind="spot_interrupted")
    assert outcome == "succeeded"
    r = metrics.registry
    assert sample(r, "ebb_pods_eviction_requests_total", code="429") >= 2
    assert sample(r, "ebb_pods_eviction_requests_total", code="200") == 0
    assert sample(r, "ebb_disruption_commands_total", method="interruption", outcome="succeeded") == 1
    # nothing drained, the node removed
    assert sample(r, "ebb_pods_drained_total", reason="Interrupted") == 0
    assert sample(r, "ebb_nodes_drained_total", nodepool="default") == 0
    assert sample(r, "ebb_nodes_termination_duration_seconds_count", nodepool="default") == 1
    assert sample(r, "ebb_nodes_terminated_total", nodepool="default", zone="us-east-1a") == 1
    # Karpenter's AWS provider counts the NodeClaim under its message's kind, not one "interrupted"
    assert sample(r, "ebb_nodeclaims_disrupted_total", reason="spot_interrupted", nodepool="default",
                  capacity_type="on-demand") == 1
    assert sample(r, "ebb_nodeclaims_disrupted_total", reason="interrupted", nodepool="default",
                  capacity_type="on-demand") == 0


@pytest.mark.parametrize(("method", "reason"), [
    ("emptiness", "Empty"), ("single-node-consolidation", "Underutilized"), ("drift", "Drifted"),
    ("expiration", "Expired"),
])
async def test_a_command_whose_drain_would_start_blocked_fails_before_anything_is_done(
        store: DecisionStore, method: Method, reason: Reason) -> None:
    """A PDB that allows no eviction when the command starts (the node has no terminationGracePeriod): the command
    fails at once, asked with a dry-run Eviction, with nothing tainted, nothing evicted and no hold left."""
    executor, sim, metrics = fast_executor(pdb_at_zero(), store, eviction_deadline=0.3, failure_hold=900)
    assert await executor.execute(command("a", method=method, reason=reason)) == "failed"
    r = metrics.registry
    assert sample(r, "ebb_pods_eviction_requests_total", code="429") == 0
    assert sample(r, "ebb_disruption_commands_total", method=method, outcome="failed") == 1
    assert not ((await sim.read_node("a")) or {}).get("spec", {}).get("taints")
    assert await sim.read_pod("default", "web-0") is not None
    assert await store.list_holds(NOW) == []
    found = await store.get_decision("d1")
    assert found is not None
    (failed,) = [e for e in found[1] if e.type == "Failed"]
    assert "not started" in failed.detail["message"] and "disruption budget" in failed.detail["message"]


async def test_the_service_serves_its_metrics(store: DecisionStore) -> None:
    import socket
    import urllib.request

    from ebb_termination_executor import app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bus = InMemoryBus()
    sim = SimulatedCluster([nodepool(), node("a")], bus, lambda: NOW)
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(app.run(Settings(metrics_port=port, metrics_address="127.0.0.1"), stop, bus=bus,
                                       node_api=sim, store=store, started=started))
    await asyncio.wait_for(started.wait(), 10)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    text = await asyncio.to_thread(scrape)
    assert "ebb_pods_eviction_requests_total" in text and "ebb_nodes_termination_duration_seconds" in text
    stop.set()
    await asyncio.wait_for(task, 10)


def test_the_commands_in_progress_and_how_long_the_oldest_has_run() -> None:
    metrics = Metrics()
    clock = ManualClock(NOW)
    metrics.timed_by(clock)
    r = metrics.registry
    assert sample(r, "ebb_disruption_commands_executing") == 0
    assert sample(r, "ebb_disruption_command_longest_running_seconds") == 0
    metrics.started("d1", clock.now())
    clock.advance(60)
    metrics.started("d2", clock.now())
    clock.advance(30)
    assert sample(r, "ebb_disruption_commands_executing") == 2
    assert sample(r, "ebb_disruption_command_longest_running_seconds") == 90
    metrics.ended("d1")
    assert sample(r, "ebb_disruption_command_longest_running_seconds") == 30
    metrics.ended("d2")
    assert sample(r, "ebb_disruption_commands_executing") == 0
    assert sample(r, "ebb_disruption_command_longest_running_seconds") == 0


async def test_a_command_is_counted_as_executing_while_its_drain_runs(store: DecisionStore) -> None:
    executor, _, metrics = fast_executor(pdb_at_zero(), store, eviction_deadline=0.5, failure_hold=0)
    running = asyncio.create_task(executor.execute(command("a", method="interruption", reason="Interrupted")))
    for _ in range(100):
        if sample(metrics.registry, "ebb_pods_eviction_requests_total", code="429"):
            break
        await asyncio.sleep(0.01)
    assert sample(metrics.registry, "ebb_disruption_commands_executing") == 1  # refused by the PDB, still trying
    assert await running == "succeeded"  # the deadline ends the drain, and the interrupted node goes all the same
    assert sample(metrics.registry, "ebb_disruption_commands_executing") == 0


async def test_a_launched_replacement_is_a_node_created(store: DecisionStore) -> None:
    now = [NOW]
    bus = InMemoryBus()
    sim = SimulatedCluster([catalog(), nodepool(), node("big", itype="m5.2xlarge"), pod("web-0", "big", cpu="500m")],
                           bus, lambda: now[0], boot_seconds=60)
    metrics = Metrics()
    settings = Settings(poll_interval_seconds=0.01, eviction_backoff_initial_seconds=0.01,
                        eviction_backoff_max_seconds=0.02)

    async def boot() -> None:  # simulated time passes while the executor waits for the replacement
        for _ in range(400):
            await asyncio.sleep(0.01)
            now[0] += timedelta(seconds=1)
            await sim.schedule_pending()

    booting = asyncio.create_task(boot())
    executor = build_executor(settings, sim, bus, store, asyncio.Event(), clock=lambda: now[0], metrics=metrics,
                              provider=NodeProvider("simulated", sim, sim))
    replace = DisruptionCommand.model_validate({
        "decision_id": "dec-r1", "node_pool": "default", "method": "single-node-consolidation",
        "reason": "Underutilized", "action": "replace", "nodes": ["big"],
        "replacements": [{"node_pool": "default", "instance_types": ["t3.medium"], "capacity_type": "on-demand",
                          "zones": ["us-east-1b"], "price": 0.0416}],
        "savings_per_hour": 0.34, "explanation": "replaced by a t3.medium", "approved_at": NOW})
    try:
        assert await executor.execute(replace) == "succeeded"
    finally:
        booting.cancel()
    assert sample(metrics.registry, "ebb_nodes_created_total", nodepool="default", zone="us-east-1b") == 1
