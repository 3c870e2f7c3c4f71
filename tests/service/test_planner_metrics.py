"""The consolidation-planner's cluster-state metrics: Karpenter's node, NodePool and pod gauges built from the
last pass's snapshot at the scrape (``ClusterStateCollector``), and, on a running planner, whether its cluster
state is synced, whether it leads and how many nodes its pass saw."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.migrate import upgrade_async
from ebb_consolidation_planner.leadership import NeverLeader
from ebb_consolidation_planner.metrics import ClusterStateCollector, Metrics
from tests.kit.builders import daemonset, ds_pod, node, nodepool, pod, snapshot
from tests.kit.planner import Running, cluster, publish
from tests.kit.waiting import eventually

GiB = 1024 ** 3


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[str]:
    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    await upgrade_async(url)
    yield url


def _collected() -> tuple[CollectorRegistry, ClusterStateCollector]:
    registry = CollectorRegistry()
    collector = ClusterStateCollector()
    registry.register(collector)
    return registry, collector


def test_nothing_before_the_first_pass() -> None:
    registry, _ = _collected()
    assert registry.get_sample_value("ebb_nodes_allocatable", {}) is None
    assert [m.samples for m in registry.collect()] == [[]] * 6


def test_nodes_nodepools_and_pods_as_karpenter_labels_them() -> None:
    limited = nodepool("default")
    limited["spec"]["limits"] = {"cpu": "100", "memory": "400Gi"}
    registry, collector = _collected()
    collector.observe(snapshot(
        limited, node("n1", itype="m5.large", zone="us-east-1b", capacity_type="spot"), node("n2", itype="m5.xlarge"),
        node("plain", pool=None), daemonset("agent"),
        pod("web", "n1", cpu="500m", memory="1Gi"), ds_pod("agent-n1", "n1", cpu="100m", memory="128Mi"),
        pod("done", "n1", cpu="4", phase="Succeeded"), pod("pending", None, cpu="250m", phase="Pending")))

    def node_value(metric: str, name: str, resource: str) -> float | None:
        [labels] = [s.labels for m in registry.collect() for s in m.samples
                    if s.name == metric and s.labels["node_name"] == name and s.labels["resource_type"] == resource]
        return registry.get_sample_value(metric, labels)

    assert node_value("ebb_nodes_allocatable", "n1", "cpu") == 2.0  # cores, as Karpenter's
    assert node_value("ebb_nodes_allocatable", "n1", "memory") == 8 * GiB
    assert node_value("ebb_nodes_allocatable", "n2", "pods") == 58
    # the DaemonSet pod is in both, the finished pod in neither
    assert node_value("ebb_nodes_total_pod_requests", "n1", "cpu") == 0.6
    assert node_value("ebb_nodes_total_pod_requests", "n1", "pods") == 2
    assert node_value("ebb_nodes_total_daemon_requests", "n1", "cpu") == 0.1
    assert node_value("ebb_nodes_total_daemon_requests", "n1", "memory") == 128 * 1024 ** 2
    [n1] = [s.labels for m in registry.collect() for s in m.samples if s.name == "ebb_nodes_allocatable"
            and s.labels["node_name"] == "n1" and s.labels["resource_type"] == "cpu"]
    assert n1 == {"node_name": "n1", "nodepool": "default", "zone": "us-east-1b", "region": "",
                  "instance_type": "m5.large", "arch": "amd64", "os": "linux", "capacity_type": "spot",
                  "windows_build": "", "phase": "", "managed": "true", "resource_type": "cpu"}
    [plain] = [s.labels for m in registry.collect() for s in m.samples
               if s.name == "ebb_nodes_allocatable" and s.labels["node_name"] == "plain"][:1]
    assert plain["managed"] == "false" and plain["nodepool"] == ""
    usage = {"resource_type": "cpu", "nodepool": "default"}
    assert registry.get_sample_value("ebb_nodepools_usage", usage) == 2.0 + 4.0  # the plain node is no pool's
    assert registry.get_sample_value("ebb_nodepools_usage", {**usage, "resource_type": "nodes"}) == 2
    assert registry.get_sample_value("ebb_nodepools_limit", usage) == 100.0
    assert registry.get_sample_value("ebb_nodepools_limit", {**usage, "resource_type": "memory"}) == 400 * GiB
    pods = {s.labels["name"]: s.labels for m in registry.collect() for s in m.samples if s.name == "ebb_pods_state"}
    assert set(pods) == {"web", "agent-n1", "done", "pending"}
    assert pods["web"] == {"name": "web", "namespace": "default", "owner": "/apis/apps/v1/namespaces/default/"
                           "replicasets/rs", "node": "n1", "nodepool": "default", "zone": "us-east-1b",
                           "arch": "amd64", "capacity_type": "spot", "instance_type": "m5.large", "phase": "Running",
                           "scheduled": "true", "ready": "true", "managed": "true"}
    assert pods["pending"]["scheduled"] == "false" and pods["pending"]["node"] == ""
    assert pods["agent-n1"]["owner"] == "/apis/apps/v1/namespaces/kube-system/daemonsets/agent"


async def test_a_running_planner_is_synced_leads_and_counts_its_nodes(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db) as svc:
        registry = svc.metrics.registry
        await eventually("a pass", lambda: registry.get_sample_value("ebb_cluster_state_node_count") == 2)
        assert registry.get_sample_value("ebb_cluster_state_synced") == 1
        assert registry.get_sample_value("ebb_planner_leader") == 1
        assert registry.get_sample_value("ebb_nodes_allocatable", {}) is None  # only with all its labels
        assert any(s.name == "ebb_nodes_allocatable" for m in registry.collect() for s in m.samples)


async def test_a_follower_says_it_does_not_lead(db: str) -> None:
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, leader=NeverLeader()) as svc:
        registry = svc.metrics.registry
        await eventually("the snapshot read", lambda: registry.get_sample_value("ebb_cluster_state_synced") == 1)
        assert registry.get_sample_value("ebb_planner_leader") == 0


def _pod(phase: str, *, ready_at: str | None = None) -> dict[str, object]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}] if ready_at else []
    return {"metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-03-01T10:00:00Z"},
            "status": {"phase": phase, "conditions": conditions}}


def test_a_pod_seen_pending_then_ready_is_a_startup_observed() -> None:
    metrics = Metrics()
    r = metrics.registry
    metrics.pod_changed("ns", "p", _pod("Running", ready_at="2026-03-01T10:00:30Z"))  # never seen Pending
    assert r.get_sample_value("ebb_pods_startup_duration_seconds_count") is None
    metrics.pod_changed("ns", "p", _pod("Pending"))
    metrics.pod_changed("ns", "p", _pod("Running"))  # running, not Ready yet
    assert r.get_sample_value("ebb_pods_startup_duration_seconds_count") is None
    metrics.pod_changed("ns", "p", _pod("Running", ready_at="2026-03-01T10:01:15Z"))
    assert r.get_sample_value("ebb_pods_startup_duration_seconds_count") == 1
    assert r.get_sample_value("ebb_pods_startup_duration_seconds", {"quantile": "0.5"}) == 75.0
    metrics.pod_changed("ns", "p", _pod("Running", ready_at="2026-03-01T10:01:15Z"))  # once per start
    assert r.get_sample_value("ebb_pods_startup_duration_seconds_count") == 1


def test_a_pod_that_ends_or_goes_before_it_is_ready_is_no_startup() -> None:
    metrics = Metrics()
    metrics.pod_changed("ns", "p", _pod("Pending"))
    metrics.pod_changed("ns", "p", _pod("Failed"))
    metrics.pod_changed("ns", "p", _pod("Running", ready_at="2026-03-01T10:01:15Z"))
    metrics.pod_changed("ns", "q", _pod("Pending"))
    metrics.pod_changed("ns", "q", None)
    metrics.pod_changed("ns", "q", _pod("Running", ready_at="2026-03-01T10:01:15Z"))
    assert metrics.registry.get_sample_value("ebb_pods_startup_duration_seconds_count") is None


@pytest.mark.parametrize("hostile", [
    {"status": True},
    {"status": {"phase": "Running", "conditions": [True, ["Ready"]]}},
    {"status": {"phase": "Running", "conditions": "Ready"}},
    {"metadata": ["p"], "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T10:01:15Z"}]}},
    {"metadata": {"creationTimestamp": "2026-03-01T10:00:00"}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T10:01:15Z"}]}},  # one time naive
])
def test_a_pod_of_any_shape_is_no_error_and_no_startup(hostile: dict[str, object]) -> None:
    """The topic's objects are not checked by the parser before the metrics see them: a field of another shape (a
    status that is not a mapping, conditions that are not mappings, a time without a zone beside one with) is
    neither an error that stops the planner's consumer nor a startup observed."""
    metrics = Metrics()
    metrics.pod_changed("ns", "p", _pod("Pending"))
    metrics.pod_changed("ns", "p", hostile)
    assert metrics.registry.get_sample_value("ebb_pods_startup_duration_seconds_count") is None


class LoopBoundLeader:
    """A leadership that reads its event loop's clock, as the Lease's does (``LeaseElector.is_leader``): asked from
    another thread, it raises."""

    fixed = False

    @property
    def is_leader(self) -> bool:
        asyncio.get_running_loop()
        return True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


async def test_a_scrape_from_another_thread_reads_the_leadership_the_loop_saw(db: str) -> None:
    # /metrics is served by a thread of its own; the Lease's clock needs the event loop (a scrape that asked the
    # Lease failed whole, and every counter of the planner with it)
    bus = InMemoryBus()
    await publish(bus, *cluster())
    async with Running(bus, db, leader=LoopBoundLeader()) as svc:
        registry = svc.metrics.registry
        await eventually("a pass", lambda: registry.get_sample_value("ebb_cluster_state_node_count") == 2)
        scraped = (await asyncio.to_thread(generate_latest, registry)).decode()
        assert "ebb_planner_leader 1.0" in scraped
        assert "ebb_cluster_state_synced 1.0" in scraped
