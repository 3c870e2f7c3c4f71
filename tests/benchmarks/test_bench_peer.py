"""The pure half of the side by side with Karpenter (bench/peer.py): the trace, and the figures computed from
what the watch saw (cost over NodeClaim lives, churn, settle detection, pending time, eviction lineages, the
metrics' counters, the goal check). The run itself needs the real servers and is a benchmark, never a test."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import peer  # noqa: E402
from bench.peer import NodeClaimLife, PodLife, Timeline  # noqa: E402

PRICES = {("c-4x-amd64-linux", "on-demand", "test-zone-a"): 0.2, ("m-8x-amd64-linux", "on-demand", "test-zone-b"): 0.5}


def nodeclaim(instance_type: str | None = None, zone: str = "test-zone-a", deleting: bool = False) -> dict[str, Any]:
    labels = {"karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": zone}
    if instance_type:
        labels["node.kubernetes.io/instance-type"] = instance_type
    metadata: dict[str, Any] = {"labels": labels}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-23T18:30:00Z"
    return {"metadata": metadata}


def pod(owner: str = "rs-1", node: str = "", evicted: bool = False, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"ownerReferences": [{"kind": "ReplicaSet", "uid": owner, "controller": True}]}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-23T18:30:00Z"
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}] if evicted else []
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": {"conditions": conditions}}


# -- the trace ---------------------------------------------------------------------------------------------------


def test_the_trace_is_the_same_for_a_seed_and_differs_for_another() -> None:
    assert peer.make_trace(1) == peer.make_trace(1)
    assert peer.make_trace(1) != peer.make_trace(2)


def test_the_full_trace_is_at_least_a_hundred_nodes_worth_at_its_peak() -> None:
    trace = peer.make_trace()
    _, cpu_m, _ = trace.peak_requests()
    # the largest node the NodePool may launch has 8 vCPUs, 7.9 allocatable (Karpenter's KWOK overhead 100m)
    assert cpu_m / 7900 >= 100
    spreads = {s.spread for s in trace.services}
    assert spreads == {"hostname", "zone", "none"}
    assert sum(1 for s in trace.services if s.pdb) == 2


def test_the_trace_scales_up_then_down_in_steps_then_bursts() -> None:
    trace = peer.make_trace()
    kinds = [p.kind for p in trace.phases]
    assert kinds == ["up", "down", "down", "down", "bursty"]
    shares = [p.share for p in trace.phases if p.kind != "bursty"]
    assert shares == sorted(shares, reverse=True)
    for before, after in zip(trace.phases, trace.phases[1:], strict=False):
        assert before.end == after.start
    assert all(trace.bursty.start <= j.start < trace.last_job_end for j in trace.jobs)
    assert trace.bursty.end == trace.last_job_end + trace.tail  # the same fixed window on every side


def test_a_longer_scale_up_moves_everything_after_it_and_keeps_every_later_phase_as_long() -> None:
    trace = peer.make_trace()
    later = trace.shifted(200.0)
    assert later.phases[0].start == 0.0 and later.phases[0].end == 200.0
    offset = 200.0 - trace.phases[0].end
    for before, after in zip(trace.phases[1:], later.phases[1:], strict=True):
        assert (after.start, after.end) == (before.start + offset, before.end + offset)
    assert [j.start for j in later.jobs] == [j.start + offset for j in trace.jobs]
    assert later.last_job_end == trace.last_job_end + offset
    assert later.services == trace.services


def test_running_pods() -> None:
    pods = [PodLife("a", "rs", "a", seen=0.0, bound=2.0), PodLife("b", "rs", "b", seen=0.0, bound=3.0, deleting=9.0),
            PodLife("c", "rs", "c", seen=1.0)]
    assert [peer.running(pods, t) for t in (1.0, 2.0, 5.0, 9.0)] == [0, 1, 2, 1]


def test_actions_are_in_time_order_and_every_job_is_deleted_after_its_run() -> None:
    trace = peer.make_trace()
    actions = trace.actions()
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    created = {a.name: a.at for a in actions if a.verb == "create-job"}
    deleted = {a.name: a.at for a in actions if a.verb == "delete-job"}
    assert created.keys() == deleted.keys() == {j.name for j in trace.jobs}
    for job in trace.jobs:
        assert deleted[job.name] - created[job.name] == pytest.approx(job.seconds)
    scaled = [a for a in actions if a.verb == "scale"]
    assert len(scaled) == 3 * len(trace.services)
    assert all(a.replicas >= 1 for a in scaled)


def test_service_objects_carry_the_spread_and_the_pdb() -> None:
    hostname = peer.Service("a", 3, 500, 512, "hostname")
    zone = peer.Service("b", 3, 500, 512, "zone", {"maxUnavailable": 1})
    (dep_a,) = peer.service_objects(hostname, 3)
    dep_b, pdb = peer.service_objects(zone, 2)
    assert dep_a["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert dep_b["spec"]["replicas"] == 2
    assert dep_b["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"] == peer.LABEL_ZONE
    assert pdb["kind"] == "PodDisruptionBudget" and pdb["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize(("consolidate_after", "budget"), [("0s", "100%"), ("30s", "100%"), ("0s", "0")])
def test_nodepool(consolidate_after: str, budget: str) -> None:
    pool = peer.nodepool(consolidate_after, budget)
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                          "consolidateAfter": consolidate_after, "budgets": [{"nodes": budget}]}
    reqs = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["on-demand"]
    assert reqs["kubernetes.io/arch"] == ["amd64"]


def test_a_slow_clouds_nodepool_registers_its_nodes_not_ready_and_an_instant_ones_does_not() -> None:
    not_ready = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
    assert peer.CLOUD.startup_taints == peer.SMOKE_CLOUD.startup_taints == (not_ready,)
    assert peer.Cloud(node_ready=(0, 0), capacity_types=("on-demand",), spot_to_spot=False).startup_taints == ()
    pool = peer.nodepool("0s", "10%", startup_taints=peer.CLOUD.startup_taints)
    assert pool["spec"]["template"]["spec"]["startupTaints"] == [not_ready]
    assert "startupTaints" not in peer.nodepool("0s", "10%")["spec"]["template"]["spec"]


@pytest.mark.parametrize(("side", "extra"), [
    ("ebb", {"stabilizationWindow": "2m"}),
    ("ebb-nowindow", {}),
    ("ebb-min10", {"stabilizationWindow": "2m", "minimumPriceImprovementPercent": 10}),
])
def test_the_ebb_sides_disruption_policy_carries_the_sides_churn_settings(side: str, extra: dict[str, Any]) -> None:
    catalog, policy = peer.ebb_objects(peer.SIDES[side], [])
    assert catalog["kind"] == "InstanceTypeCatalog"
    assert policy["kind"] == "DisruptionPolicy" and policy["metadata"]["name"] == peer.NODEPOOL
    assert policy["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                              "expireAfter": "Never", "budgets": [{"nodes": "100%"}], **extra}


def test_price_table_reads_every_offering() -> None:
    types = [{"name": "c-1x-amd64-linux", "offerings": [
        {"Price": 0.02, "Requirements": [{"key": "karpenter.sh/capacity-type", "values": ["spot"]},
                                         {"key": "topology.kubernetes.io/zone", "values": ["test-zone-a"]}]},
        {"Price": 0.03, "Requirements": [{"key": "karpenter.sh/capacity-type", "values": ["on-demand"]},
                                         {"key": "topology.kubernetes.io/zone", "values": ["test-zone-a", "b"]}]}]}]
    assert peer.price_table(types) == {("c-1x-amd64-linux", "spot", "test-zone-a"): 0.02,
                                       ("c-1x-amd64-linux", "on-demand", "test-zone-a"): 0.03,
                                       ("c-1x-amd64-linux", "on-demand", "b"): 0.03}


# -- NodeClaims: lives, cost, churn -----------------------------------------------------------------------------------


def test_a_nodeclaim_is_priced_once_its_instance_type_is_known_and_ends_when_gone() -> None:
    timeline = Timeline(PRICES)
    timeline.nodeclaim(1.0, "nc-1", nodeclaim())
    assert timeline.nodeclaims["nc-1"].price == 0.0
    timeline.nodeclaim(2.0, "nc-1", nodeclaim("c-4x-amd64-linux"))
    timeline.nodeclaim(50.0, "nc-1", nodeclaim("c-4x-amd64-linux", deleting=True))
    timeline.nodeclaim(55.0, "nc-1", None)
    life = timeline.nodeclaims["nc-1"]
    assert (life.launched, life.price, life.deleting, life.gone) == (1.0, 0.2, 50.0, 55.0)


def test_a_nodeclaim_gone_without_a_deleting_event_was_deleted_then_and_a_new_one_of_the_same_name_is_new() -> None:
    timeline = Timeline(PRICES)
    timeline.nodeclaim(1.0, "nc-1", nodeclaim("m-8x-amd64-linux", zone="test-zone-b"))
    timeline.nodeclaim(9.0, "nc-1", None)
    timeline.nodeclaim(9.0, "nc-1", None)  # a second tombstone changes nothing
    assert (timeline.nodeclaims["nc-1"].deleting, timeline.nodeclaims["nc-1"].gone) == (9.0, 9.0)
    timeline.nodeclaim(20.0, "nc-1", nodeclaim("c-4x-amd64-linux"))
    assert timeline.nodeclaims["nc-1"].launched == 20.0 and timeline.nodeclaims["nc-1"].gone is None
    assert peer.churn(timeline.nodeclaims.values(), 0, 100) == (1, 0)  # the first life was replaced in the dict


def test_an_unknown_offering_costs_nothing() -> None:
    timeline = Timeline(PRICES)
    timeline.nodeclaim(0.0, "nc", nodeclaim("c-4x-amd64-linux", zone="elsewhere"))
    assert timeline.nodeclaims["nc"].price == 0.0


LIVES = [NodeClaimLife("a", launched=0.0, price=3.6, deleting=90.0, gone=100.0),
         NodeClaimLife("b", launched=50.0, price=7.2),
         NodeClaimLife("c", launched=200.0, price=36.0, deleting=210.0, gone=230.0)]


@pytest.mark.parametrize(("start", "end", "dollars"), [
    (0, 100, 3.6 * 100 / 3600 + 7.2 * 50 / 3600),
    (0, 50, 3.6 * 50 / 3600),
    (100, 200, 7.2 * 100 / 3600),  # a is gone at 100, c starts at 200
    (205, 230, 7.2 * 25 / 3600 + 36.0 * 25 / 3600),
    (300, 300, 0.0),
])
def test_cost_is_price_times_time_alive_within_the_window(start: float, end: float, dollars: float) -> None:
    assert peer.cost(LIVES, start, end) == pytest.approx(dollars)


@pytest.mark.parametrize(("t", "rate", "alive"), [
    (0.0, 3.6, 1), (60.0, 10.8, 2), (99.9, 10.8, 2), (100.0, 7.2, 1), (220.0, 43.2, 2), (230.0, 7.2, 1)])
def test_rate_and_count_at_a_moment(t: float, rate: float, alive: int) -> None:
    assert peer.rate_at(LIVES, t) == pytest.approx(rate)
    assert peer.alive_at(LIVES, t) == alive


@pytest.mark.parametrize(("start", "end", "launched", "deleted"), [
    (0, 1000, 3, 2),
    (0, 50, 1, 0),  # b launches at 50: not in [0, 50)
    (50, 95, 1, 1),  # a's deletion counts when it starts (90), not when it is gone
    (95, 200, 0, 0),
    (200, 211, 1, 1),
])
def test_churn_counts_launches_and_deletion_starts(start: float, end: float, launched: int, deleted: int) -> None:
    assert peer.churn(LIVES, start, end) == (launched, deleted)


@pytest.mark.parametrize(("lives", "expected"), [
    # from $10/h to $2/h: within 5% of the way ($0.40) of $2/h once the last big node is gone at 60
    ([NodeClaimLife("big", 0, price=8.0, gone=60.0), NodeClaimLife("small", 0, price=2.0)], 60.0),
    # a late small replacement (a trickle), whose overlap with the node it replaces briefly raises the rate:
    # converged at the big drop all the same
    ([NodeClaimLife("big", 0, price=8.0, gone=30.0), NodeClaimLife("small", 0, price=2.0, gone=90.0),
      NodeClaimLife("smaller", 88.0, price=1.9)], 30.0),
    # nothing changes: converged at once
    ([NodeClaimLife("a", 0, price=3.0)], 0.0),
    # the rate falls in steps: the first step that lands within 5% of the way
    ([NodeClaimLife("a", 0, price=4.0, gone=20.0), NodeClaimLife("b", 0, price=4.0, gone=45.0),
      NodeClaimLife("c", 0, price=0.1, gone=70.0), NodeClaimLife("d", 0, price=2.0)], 45.0),
])
def test_converged_is_when_the_rate_first_came_near_its_end_value(lives: list[NodeClaimLife],
                                                                    expected: float) -> None:
    assert peer.converged(lives, 0.0, 100.0) == expected


# -- pods: pending time, settle, evictions ----------------------------------------------------------------------------


def test_pod_pending_until_bound_and_lineage_through_evictions() -> None:
    timeline = Timeline(PRICES)
    timeline.pod(1.0, "ns/p1", pod())
    timeline.pod(3.0, "ns/p1", pod(node="n1"))
    timeline.pod(10.0, "ns/p1", pod(node="n1", evicted=True, deleting=True))
    timeline.pod(10.5, "ns/p1", pod(node="n1", evicted=True, deleting=True))  # seen again: one eviction
    timeline.pod(11.0, "ns/other", pod(owner="rs-2"))  # another ReplicaSet's new pod inherits nothing
    timeline.pod(11.5, "ns/p2", pod())  # p1's replacement
    timeline.pod(12.0, "ns/p1", None)
    timeline.pod(14.0, "ns/p2", pod(node="n2"))
    assert timeline.pods["ns/p1"].pending_until == 3.0
    assert timeline.pods["ns/p2"].lineage == timeline.pods["ns/p1"].lineage == "ns/p1"
    assert timeline.pods["ns/other"].lineage == "ns/other"
    assert peer.evicted_more_than_once(timeline) == 0
    timeline.pod(30.0, "ns/p2", pod(node="n2", evicted=True))
    timeline.pod(31.0, "ns/p3", pod())
    assert [e[2] for e in timeline.evictions] == ["ns/p1", "ns/p1"]
    assert timeline.pods["ns/p3"].lineage == "ns/p1"
    assert peer.evicted_more_than_once(timeline) == 1
    assert peer.evictions_in(timeline, 0, 20) == 1


def _stamp(seconds: float) -> str:
    """An API timestamp (whole seconds, as the API server keeps them) ``seconds`` after 2026-01-05 12:00 UTC."""
    return (datetime(2026, 1, 5, 12, tzinfo=UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kwok_node(ready_at: float | None, tainted: bool) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "False" if ready_at is None else "True",
                   "lastTransitionTime": _stamp(0.0 if ready_at is None else ready_at)}]
    taints = [{"key": peer.TAINT_NOT_READY, "effect": "NoSchedule"}] if tainted else []
    return {"spec": {"taints": taints}, "status": {"conditions": conditions}}


def _bound(node: str, at: float) -> dict[str, Any]:
    bound = pod(node=node)
    bound["status"] = {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(at)}]}
    return bound


def test_bindings_before_ready_are_told_from_the_objects_own_times_not_the_watch() -> None:
    """A Node is Ready from its Ready condition's transition once the not-ready taint is gone, a pod bound from its
    PodScheduled transition: the watch may see either late. A pod bound to a booting node is early."""
    timeline = Timeline(PRICES, wall_start=datetime(2026, 1, 5, 12, tzinfo=UTC).timestamp())
    timeline.node(5.0, "n1", _kwok_node(None, tainted=True))
    timeline.node(40.0, "n1", _kwok_node(30.0, tainted=True))  # Ready, the taint not removed yet: not yet
    assert "n1" not in timeline.node_ready
    timeline.node(44.0, "n1", _kwok_node(30.0, tainted=False))  # seen 14 s late: Ready since 30 s
    assert timeline.node_ready == {"n1": 30.0}
    timeline.pod(2.0, "ns/waited", pod())
    timeline.pod(33.0, "ns/waited", _bound("n1", 30.0))  # bound the second the node was Ready
    timeline.pod(3.0, "ns/early", pod())
    timeline.pod(12.0, "ns/early", _bound("n1", 11.0))  # bound to the booting node
    timeline.pod(4.0, "ns/elsewhere", pod())
    timeline.pod(6.0, "ns/elsewhere", _bound("n2", 6.0))  # a node whose Ready the run never saw: not counted
    assert peer.bindings_before_ready(timeline) == {"pods": 2, "booting": 2, "early": 1, "earliest": -19.0}
    del timeline.pods["ns/early"]
    assert peer.bindings_before_ready(timeline) == {"pods": 1, "booting": 1, "early": 0, "earliest": 0.0}


def test_a_deleted_pending_pod_stops_waiting() -> None:
    timeline = Timeline(PRICES)
    timeline.pod(1.0, "ns/p", pod())
    timeline.pod(4.0, "ns/p", pod(deleting=True))
    assert timeline.pods["ns/p"].pending_until == 4.0


PODS = [PodLife("a", "rs", "a", seen=0.0, bound=10.0),
        PodLife("b", "rs", "b", seen=5.0, bound=5.0),  # bound on first sight: never waited
        PodLife("c", "rs", "c", seen=20.0, gone=26.0),
        PodLife("d", "rs", "d", seen=40.0)]  # still waiting


@pytest.mark.parametrize(("start", "end", "total", "longest"), [
    (0, 30, 10 + 6, 10),
    (5, 30, 5 + 6, 6),  # a started waiting before the window: counted inside it, not as the longest
    (30, 50, 10, 10),
    (0, 100, 10 + 6 + 60, 60),
])
def test_pending_seconds(start: float, end: float, total: float, longest: float) -> None:
    waited, longest_wait = peer.pending_seconds(PODS, start, end)
    assert waited == pytest.approx(total)
    assert longest_wait == pytest.approx(longest)


@pytest.mark.parametrize(("t", "count"), [(0.0, 1), (5.0, 1), (10.0, 0), (21.0, 1), (26.0, 0), (45.0, 1)])
def test_pending_at(t: float, count: int) -> None:
    assert peer.pending_at(PODS, t) == count


@pytest.mark.parametrize(("times", "start", "end", "expected"), [
    ([], 100, 200, 100),  # nothing happened: settled at once
    ([110, 120, 150], 100, 200, 150),
    ([110, 120, 180], 100, 200, None),  # activity less than QUIET before the end
    ([50, 110], 100, 141, 110),  # activity before the window does not count
    ([110, 250], 100, 200, 110),  # nor after it
    ([110, 169.5], 100, 200, 169.5),
    ([110, 170.5], 100, 200, None),
])
def test_settled_is_the_last_activity_followed_by_a_quiet_stretch(times: list[float], start: float, end: float,
                                                                  expected: float | None) -> None:
    assert peer.settled(times, [], start, end, quiet=30) == expected


def test_not_settled_while_a_pod_waits() -> None:
    waiting = [PodLife("p", "rs", "p", seen=10.0)]
    assert peer.settled([10.0], waiting, 0, 100, quiet=30) is None
    bound = [PodLife("p", "rs", "p", seen=10.0, bound=20.0)]
    assert peer.settled([10.0, 20.0], bound, 0, 100, quiet=30) == 20.0


def test_activity_and_phase_figures_from_a_timeline() -> None:
    timeline = Timeline(PRICES)
    timeline.nodeclaim(0.0, "nc-1", nodeclaim("c-4x-amd64-linux"))
    timeline.pod(1.0, "ns/p", pod())
    timeline.pod(4.0, "ns/p", pod(node="nc-1"))
    timeline.pod(5.0, "ns/q", pod(node="nc-1"))  # bound at once: no activity
    timeline.nodeclaim(60.0, "nc-1", nodeclaim("c-4x-amd64-linux", deleting=True))
    timeline.nodeclaim(65.0, "nc-1", None)
    assert peer.activity(timeline) == [0.0, 1.0, 4.0, 60.0, 65.0]
    figures = peer.phase_figures(timeline, 0.0, 100.0, quiet=30)
    assert figures["settled_after"] == 65.0
    assert figures["rate_settled"] == 0.0
    assert figures["launched"] == figures["deleted"] == 1
    assert figures["cost"] == pytest.approx(0.2 * 65 / 3600)
    assert figures["pending_pod_seconds"] == pytest.approx(3.0)
    assert figures["peak_nodeclaims"] == 1 and figures["nodeclaims_end"] == 0


# -- metrics and the goal ---------------------------------------------------------------------------------------------


EXPOSITION = """\
# HELP karpenter_voluntary_disruption_decisions_total Number of disruption decisions performed.
# TYPE karpenter_voluntary_disruption_decisions_total counter
karpenter_voluntary_disruption_decisions_total{consolidation_type="empty",decision="delete",reason="empty"} 3
karpenter_voluntary_disruption_decisions_total{consolidation_type="single",decision="replace",reason="underutilized"} 2
# HELP karpenter_nodeclaims_created_total Number of nodeclaims created.
# TYPE karpenter_nodeclaims_created_total counter
karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioning"} 7
# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 120
"""


def test_counters_read_the_named_samples_with_their_labels() -> None:
    values = peer.counters(EXPOSITION, peer.KARPENTER_METRICS)
    assert values == {
        'karpenter_voluntary_disruption_decisions_total{consolidation_type="empty",decision="delete",reason="empty"}':
            3.0,
        'karpenter_voluntary_disruption_decisions_total{consolidation_type="single",decision="replace",'
        'reason="underutilized"}': 2.0,
        'karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioning"}': 7.0,
    }
    assert peer.counter_sum(values, "karpenter_voluntary_disruption_decisions_total") == 5.0
    assert peer.counter_sum(values, "karpenter_voluntary_disruption_decisions_total", decision="replace") == 2.0
    assert peer._counts(values, "karpenter_voluntary_disruption_decisions_total", "decision") == \
        "5 (delete 3, replace 2)"


def test_counter_delta_counts_new_series_from_zero_and_leaves_out_unchanged_ones() -> None:
    assert peer.counter_delta({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 5.0, "c": 4.0}) == {"b": 3.0, "c": 4.0}


#: 2026-12-02T17:48:00Z on the wall clock: the run's start in the records below
WALL_START = datetime(2026, 12, 2, 17, 48, tzinfo=UTC).timestamp()


def _disrupting(at: str, command: str, nodeclaims: list[str], replacements: int = 0, pods: int = 4) -> str:
    """A ``disrupting node(s)`` line of Karpenter's JSON log (the fields the harness reads, as v1.14.1 logs them)."""
    return json.dumps({"level": "INFO", "time": at, "logger": "controller", "message": "disrupting node(s)",
                       "controller": "disruption", "command": f"{command}/3779cd41: delete: nodepools=[default]",
                       "decision": "delete", "disrupted-node-count": len(nodeclaims),
                       "replacement-node-count": replacements, "pod-count": pods,
                       "disrupted-nodes": [{"Node": {"name": f"kwok-{n}"}, "NodeClaim": {"name": n}}
                                           for n in nodeclaims],
                       "replacement-nodes": []})


def test_karpenter_commands_reads_each_started_command_with_its_consolidation_type() -> None:
    lines = [_disrupting("2026-12-02T17:48:32.010Z", "Underutilized", ["default-xd2gb", "default-gjr6t"]),
             '{"level":"INFO","time":"2026-12-02T17:48:40.000Z","message":"tainted node"}', "not json at all",
             _disrupting("2026-12-02T17:49:21.916Z", "Underutilized", ["start-040"], pods=1),
             _disrupting("2026-12-02T17:51:13.000Z", "Empty", ["start-010"], pods=0),
             _disrupting("2026-12-02T17:52:00.000Z", "Drifted", ["start-011"], replacements=1)]
    commands = peer.karpenter_commands(lines, WALL_START)
    assert [(c["t"], c["reason"], c["type"], c["nodeclaims"], c["replacements"], c["pods"]) for c in commands] == [
        (32.01, "Underutilized", "multi", ["default-xd2gb", "default-gjr6t"], 0, 4),
        (81.916, "Underutilized", "single", ["start-040"], 0, 1), (193.0, "Empty", "empty", ["start-010"], 0, 0),
        (240.0, "Drifted", "", ["start-011"], 1, 4)]


def _event(reason: str, name: str, message: str, at: str, kind: str = "Node", count: int = 1) -> dict[str, Any]:
    return {"reason": reason, "involvedObject": {"kind": kind, "name": name}, "message": message, "count": count,
            "lastTimestamp": at, "metadata": {"creationTimestamp": at}}


def test_karpenter_events_keeps_what_disruption_published_in_time_order() -> None:
    items = [_event("DisruptionBlocked", "n2", "Node is nominated for a pending pod", "2026-12-02T17:48:20Z", count=2),
             _event("Scheduled", "p1", "Successfully assigned", "2026-12-02T17:48:01Z", kind="Pod"),
             _event("Nominated", "p2", "Pod should schedule on: nodeclaim/c1", "2026-12-02T17:48:10Z", kind="Pod"),
             {"reason": "ConsolidationRejected", "involvedObject": {"kind": "Node", "name": "n3"}, "message": "m",
              "eventTime": "2026-12-02T17:48:30.500000Z"},
             {"reason": "Unconsolidatable", "involvedObject": {"kind": "Node", "name": "n4"}, "message": "no time"}]
    events = peer.karpenter_events(items, WALL_START)
    assert [(e["t"], e["reason"], e["kind"], e["name"], e["count"]) for e in events] == [
        (10.0, "Nominated", "Pod", "p2", 1), (20.0, "DisruptionBlocked", "Node", "n2", 2),
        (30.5, "ConsolidationRejected", "Node", "n3", 1)]


def test_karpenter_probes_counts_commands_refusals_and_why_nodes_were_not_candidates() -> None:
    lines = [_disrupting("2026-12-02T17:48:05Z", "Underutilized", ["a", "b"]),
             _disrupting("2026-12-02T17:49:00Z", "Underutilized", ["c", "d", "e"]),
             _disrupting("2026-12-02T17:49:30Z", "Underutilized", ["f"]),
             _disrupting("2026-12-02T17:47:59Z", "Empty", ["g"])]  # before ``after``: left out
    rejected = "Consolidation rejected: delete: [{}] (part of 3-node consolidation), reason: budget (savings: $0.30)"
    items = [_event("ConsolidationRejected", n, rejected.format(n), at)
             for n, at in (("h", "2026-12-02T17:48:40Z"), ("i", "2026-12-02T17:48:40Z"), ("j", "2026-12-02T17:48:41Z"))]
    items += [_event("ConsolidationRejected", "k", "Consolidation rejected: delete: [k], reason: scheduling",
                     "2026-12-02T17:48:50Z"),
              _event("ConsolidationRejected", "k", "Consolidation rejected: delete: [k], reason: scheduling",
                     "2026-12-02T17:48:50Z", kind="NodeClaim"),
              _event("DisruptionBlocked", "l", "Node is nominated for a pending pod", "2026-12-02T17:48:50Z", count=3),
              _event("DisruptionBlocked", "m", "Node is nominated for a pending pod", "2026-12-02T17:48:51Z"),
              _event("DisruptionBlocked", "n", "Pdb prevents pod evictions (PodDisruptionBudget=[peer/x])",
                     "2026-12-02T17:48:52Z")]
    probes = peer.karpenter_probes(peer.karpenter_commands(lines, WALL_START),
                                   peer.karpenter_events(items, WALL_START), after=1.0)
    assert probes == {"started": {"multi": 2, "single": 1}, "multi_sizes": [2, 3],
                      "refused": {"multi/budget": 1, "single/scheduling": 1}, "refused_multi_sizes": [3],
                      "blocked": {"Node is nominated": 2, "Pdb prevents pod": 1}}


def _side(settle: list[float | None], rates: list[float | None], churn: tuple[int, int],
          converged: float = 100.0) -> dict[str, Any]:
    phases = [{"name": "down", "kind": "down", "settled_after": settle[0], "rate_settled": rates[0], "rate_end": 9.0,
               "converged_after": converged},
              {"name": "bursts", "kind": "bursty", "settled_after": settle[1], "rate_settled": rates[1],
               "rate_end": 9.0, "launched": churn[0], "deleted": churn[1], "converged_after": converged}]
    return {"phases": phases}


@pytest.mark.parametrize(("ebb", "karpenter", "met"), [
    (_side([40, 30], [2.0, 2.0], (3, 3)), _side([50, 30], [2.0, 2.5], (6, 6)), [True, True, True, True, True]),
    (_side([60, None], [2.1, None], (4, 3)), _side([50, 30], [2.0, 2.0], (6, 6)), [False, False, False, False, False]),
    # neither settled: the rate at the end and the time to 95% of the way compare
    (_side([None, None], [None, None], (1, 1), converged=80), _side([None, None], [None, None], (6, 6)),
     [True, True, True, True, True]),
])
def test_goal_rows(ebb: dict[str, Any], karpenter: dict[str, Any], met: list[bool]) -> None:
    rows = peer.goal(ebb, karpenter)
    assert [r[0].split(" (")[0] for r in rows] == [
        "down: cost when settled", "down: time to settle", "bursts: cost when settled", "bursts: time to settle",
        "bursty part: churn"]
    assert [r[3] for r in rows] == met


def _result(key: str, title: str, churn: int, seed: int = 1) -> dict[str, Any]:
    timeline = Timeline(PRICES)
    for n in range(churn):
        timeline.nodeclaim(10.0 * n, f"nc-{n}", nodeclaim("c-4x-amd64-linux"))
        timeline.nodeclaim(10.0 * n + 5, f"nc-{n}", None)
    trace = peer.make_trace(seed, size=peer.SMOKE)
    phases = [{"name": p.name, "kind": p.kind, **peer.phase_figures(timeline, p.start, p.end), "counters": {}}
              for p in trace.phases]
    whole = {**peer.phase_figures(timeline, 0, trace.bursty.end), "counters": {}}
    after_up = peer.phase_figures(timeline, trace.phases[1].start, trace.bursty.end)
    return {"side": key, "title": title, "phases": phases, "whole": whole, "after_up": after_up, "evictions": 0,
            "evicted_more_than_once": 0, "api_errors": [], "seconds": 1.0, "code": "abc1234",
            "load_average": {"mean": 1.0, "max": 2.0}, "trace": peer.describe(trace), "smoke": True, "seed": seed,
            "cloud": {**asdict(peer.SMOKE_CLOUD), **peer.nodeclaim_figures(timeline)},
            "start": {"nodeclaims": 0, "ready_after": 1.0, "cost_rate": 0.0},
            "running_cost": {"Karpenter": {"cpu_seconds": 10.0 * seed, "rss_peak_mib": 100.0, "rss_mean_mib": 90.0,
                                           "samples": 3, "pids": [1]}},
            **({"ebb_code": "abc1234"} if key.startswith("ebb") else {})}


def test_render_has_a_column_per_side_the_goal_per_karpenter_side_and_each_seed_in_detail() -> None:
    results = [_result(side, title, churn * seed, seed) for seed in (1, 2)
               for side, title, churn in (("karpenter-0s", "Karpenter 0s", 4), ("karpenter-30s", "Karpenter 30s", 2),
                                          ("ebb", "ebb", 1))]
    lines = peer.render(results)
    assert lines[0] == "### Side by side with Karpenter (seeds 1, 2: mean [min-max])"
    start = lines.index("| figure | Karpenter 0s | Karpenter 30s | ebb |")
    table = lines[start:lines.index("", start)]
    assert len(table) >= len(peer.HEADLINE) + 2 and all(line.count("|") == 5 for line in table)
    churn = next(line for line in table if line.startswith("| **launches + disruptions"))
    # Karpenter 0s: 4 launched + 4 deleted on seed 1, 8 + 8 on seed 2: mean 12 [8-16]; ebb: 2 and 4
    assert churn.endswith("| 12 [8-16] | 6 [4-8] | 3 [2-4] |")
    assert sum(1 for line in lines if line == "| goal | ebb | Karpenter | met on |") == 2
    assert sum(1 for line in lines if line.startswith("#### Seed ")) == 2
    cloud = next(line for line in lines if line.startswith("Cloud: "))
    assert "Ready 5-15 s after they appear" in cloud and "offers spot and on-demand" in cloud
    assert sum(1 for line in lines if line == "| goal | ebb | Karpenter | met |") == 4  # per seed, per Karpenter side
    assert any("smoke run" in line for line in lines)


# -- repeats: seeds, rounds, mean and range, the goal on every seed ---------------------------------------------------


def test_each_round_is_one_seed_with_every_side_once_the_order_turned_by_one() -> None:
    rounds = peer.schedule(["A", "B", "C"], [1, 2, 3, 4])
    assert rounds == [[(1, "A"), (1, "B"), (1, "C")], [(2, "B"), (2, "C"), (2, "A")],
                      [(3, "C"), (3, "A"), (3, "B")], [(4, "A"), (4, "B"), (4, "C")]]
    # run one after another, every side comes first, and last, once in three rounds
    flat = [side for r in rounds[:3] for _, side in r]
    assert flat == ["A", "B", "C", "B", "C", "A", "C", "A", "B"]
    assert peer.schedule([], [1]) == [[]]


def test_seeds_and_how_many_at_once_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EBB_BENCH_PEER", raising=False)
    monkeypatch.delenv("EBB_BENCH_PEER_SEEDS", raising=False)
    monkeypatch.delenv("EBB_BENCH_PEER_AT_ONCE", raising=False)
    assert peer.seeds_from_env() == list(peer.DEFAULT_SEEDS) and len(peer.DEFAULT_SEEDS) >= 3
    assert peer.at_once_from_env(4) == 4
    monkeypatch.setenv("EBB_BENCH_PEER_AT_ONCE", "1")
    assert peer.at_once_from_env(4) == 1
    monkeypatch.setenv("EBB_BENCH_PEER_AT_ONCE", "9")
    assert peer.at_once_from_env(4) == 4
    monkeypatch.setenv("EBB_BENCH_PEER_SEEDS", "5, 7")
    assert peer.seeds_from_env() == [5, 7]
    for bad in ("x", "1,1", ""):
        monkeypatch.setenv("EBB_BENCH_PEER_SEEDS", bad)
        with pytest.raises(SystemExit, match="EBB_BENCH_PEER_SEEDS"):
            peer.seeds_from_env()
    monkeypatch.delenv("EBB_BENCH_PEER_SEEDS")
    monkeypatch.delenv("EBB_BENCH_PEER_NODE_READY", raising=False)
    assert peer.cloud_from_env() is peer.CLOUD
    monkeypatch.setenv("EBB_BENCH_PEER", "smoke")
    assert peer.seeds_from_env() == [peer.SEED] and peer.cloud_from_env() is peer.SMOKE_CLOUD
    monkeypatch.setenv("EBB_BENCH_PEER_NODE_READY", "30-90")
    assert peer.cloud_from_env().node_ready == (30, 90)
    assert peer.cloud_from_env().capacity_types == peer.SMOKE_CLOUD.capacity_types
    monkeypatch.setenv("EBB_BENCH_PEER_NODE_READY", "0")
    assert peer.cloud_from_env().env()["EBB_KWOK_NODE_READY_SECONDS"] == ""  # at once: KWOK's own stages
    for bad in ("fast", "9-3"):
        monkeypatch.setenv("EBB_BENCH_PEER_NODE_READY", bad)
        with pytest.raises(SystemExit, match="EBB_BENCH_PEER_NODE_READY"):
            peer.cloud_from_env()


def test_spread_is_the_mean_the_least_and_the_most() -> None:
    assert peer.spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert peer.spread([5.0]) == (5.0, 5.0, 5.0)
    with pytest.raises(ValueError):
        peer.spread([])
    assert peer.mean_range([1.0, 2.0, 6.0], lambda v: f"{v:.0f}") == "3 [1-6]"
    assert peer.mean_range([4.0], lambda v: f"{v:.1f}") == "4.0"


def _headline_run(seed: int, cost: float, churn: int, evictions: int, pending: float) -> dict[str, Any]:
    phases = [{"kind": "up", "pending_pod_seconds": 0.0, "settled_after": None},
              {"kind": "down", "start": 0.0, "end": 100.0, "settled_after": 40.0, "pending_pod_seconds": pending},
              {"kind": "bursty", "start": 100.0, "end": 300.0, "settled_after": None, "pending_pod_seconds": 0.0}]
    return {"seed": seed, "after_up": {"cost": cost}, "whole": {"cost": cost + 1, "launched": churn + 10,
                                                                "deleted": 0, "pending_pod_seconds": pending},
            "launches_after_start": churn, "evictions": evictions, "evicted_more_than_once": 0, "phases": phases,
            "trace": {"tail": 60.0}, "running_cost": {"a": {"cpu_seconds": 2.0, "rss_peak_mib": 10.0},
                                                      "b": {"cpu_seconds": 3.0, "rss_peak_mib": 5.0}}}


def test_headline_figures_of_a_run() -> None:
    figures = peer.headline(_headline_run(1, 3.0, 7, 5, 12.0))
    assert figures["cost"] == 3.0 and figures["cost_whole"] == 4.0
    assert figures["churn"] == 7  # the starting cluster's launches are not churn
    assert figures["evictions"] == 5 and figures["pending"] == 12.0 and figures["pending_after_up"] == 12.0
    assert figures["unsettled"] == 40.0 + 60.0  # the bursts did not settle: the whole tail counts
    assert figures["cpu_seconds"] == 5.0 and figures["rss_peak_mib"] == 15.0
    assert set(figures) == {key for key, _, _ in peer.HEADLINE}


def test_the_goal_is_judged_seed_by_seed() -> None:
    karpenter = [_headline_run(1, 10.0, 20, 10, 100.0), _headline_run(2, 10.0, 20, 10, 100.0)]
    # seed 1: within 2% dearer, half the churn, as many evictions, less pending; seed 2: too dear, too much churn
    ebb = [_headline_run(1, 10.1, 10, 10, 90.0), _headline_run(2, 10.5, 11, 12, 90.0)]
    rows = peer.headline_goal(ebb, karpenter)
    assert [(what.split(" ")[0], met, total) for what, _, _, met, total in rows] == [
        ("node-hour", 1, 2), ("at", 1, 2), ("no", 1, 2), ("no", 2, 2)]
    assert rows[1][1] == "10 [10-11]" and rows[1][2] == "20 [20-20]"
    # a seed only one side ran is not compared
    assert [r[4] for r in peer.headline_goal(ebb, karpenter[:1])] == [1, 1, 1, 1]


# -- the cloud and the starting cluster ------------------------------------------------------------------------------


def test_the_cloud_sets_the_control_planes_start_up_time_and_karpenters_feature_gate() -> None:
    assert peer.CLOUD.env() == {"EBB_KWOK_NODE_READY_SECONDS": "30-90",
                                "KARPENTER_FEATURE_GATES": "SpotToSpotConsolidation=true"}
    fast = peer.Cloud((0, 0), ("on-demand",), False)
    assert fast.env() == {"EBB_KWOK_NODE_READY_SECONDS": "", "KARPENTER_FEATURE_GATES":
                          "SpotToSpotConsolidation=false"}
    assert set(peer.CLOUD.capacity_types) == {"spot", "on-demand"}
    assert 30 <= peer.CLOUD.node_ready[0] < peer.CLOUD.node_ready[1] <= 90


def test_the_nodepool_offers_the_clouds_capacity_types_with_the_sides_policy() -> None:
    side = peer.SIDES["karpenter-balanced"]
    pool = peer.nodepool(side.consolidate_after, side.budget_nodes, side.consolidation_policy,
                         peer.CLOUD.capacity_types)
    reqs = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "Balanced", "consolidateAfter": "0s",
                                          "budgets": [{"nodes": "10%"}]}


def test_the_default_sides_are_karpenters_defaults_and_balanced_and_ebbs_defaults_and_recommended() -> None:
    sides = [peer.SIDES[k] for k in peer.DEFAULT_SIDES]
    karpenter = [s for s in sides if not s.ebb]
    assert [(s.consolidation_policy, s.consolidate_after, s.budget_nodes) for s in karpenter] == [
        ("WhenEmptyOrUnderutilized", "0s", "10%"), ("Balanced", "0s", "10%")]
    default, recommended = (peer.disruption_policy(s) for s in sides if s.ebb)
    assert default["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                               "expireAfter": "Never", "budgets": [{"nodes": "10%"}]}
    assert recommended["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
                                   "expireAfter": "Never", "budgets": [{"nodes": "20%"}],
                                   "stabilizationWindow": "10m", "minimumPriceImprovementPercent": 30,
                                   "demandWindow": "35m"}
    assert all(s.budget_nodes == "0" for s in sides if s.ebb)  # Karpenter's own disruption off next to ebb



def test_the_shadow_side_keeps_karpenter_disrupting_at_its_defaults_and_runs_ebb_in_shadow_with_its_api() -> None:
    shadow, karpenter = peer.SIDES["shadow"], peer.SIDES["karpenter-default"]
    assert shadow.ebb and shadow.shadow and shadow.nodepool_side is karpenter
    assert shadow.budget_nodes == "10%"  # Karpenter's own budget stays open: it still disrupts
    assert peer.SIDES["ebb-recommended"].nodepool_side is peer.SIDES["ebb-recommended"]
    assert peer.disruption_policy(shadow)["spec"] == peer.disruption_policy(peer.SIDES["ebb-recommended"])["spec"]
    ports = {"consolidation-planner": 1, "termination-executor": 2, "decisions-api": 3}
    env = peer.ebb_env("k", "b:9092", "postgresql://x", "r1", ports, mode="shadow", token="t0")
    assert env["consolidation-planner"]["EBB_CONSOLIDATION_PLANNER_MODE"] == "shadow"
    assert env["termination-executor"]["EBB_TERMINATION_EXECUTOR_MODE"] == "shadow"
    api = env["decisions-api"]
    assert (api["EBB_DECISIONS_API_PORT"], api["EBB_DECISIONS_API_TOKEN"], api["EBB_DECISIONS_API_CLUSTER"],
            api["EBB_DECISIONS_API_TOPIC_PREFIX"]) == ("3", "t0", "peer-r1", "peerr1.")
    enforcing = peer.ebb_env("k", "b:9092", "postgresql://x", "r1", {"consolidation-planner": 1,
                                                                      "termination-executor": 2})
    assert set(enforcing) == {"cluster-watcher", "consolidation-planner", "termination-executor"}
    assert peer.services_run(shadow) == [*enforcing, "decisions-api"]
    assert peer.services_run(peer.SIDES["ebb-default"]) == list(enforcing)
    assert "EBB_CONSOLIDATION_PLANNER_MODE" not in enforcing["consolidation-planner"]
    evictions = peer.disruption_policy(peer.SIDES["ebb-evictions"])["spec"]
    assert (evictions["minimumSavingPerEvictedPod"], evictions["budgets"]) == (0.05, [{"nodes": "10%"}])
    hour = peer.SIZES_BY_NAME["hour"]  # a trial of an hour or more
    assert hour.up_seconds + hour.step_seconds * len(hour.steps) + hour.burst_period * hour.bursts + hour.tail >= 3600


def test_the_shadow_trial_reports_once_its_json_page_and_words(tmp_path: Path) -> None:
    """``ShadowTrial.report`` runs ``ebb shadow report`` once (its back-test of the recording is the long part) and
    keeps the JSON, the page and the words, rendered from the same answer as the command renders them."""
    from ebb.adapters.store.migrate import upgrade_async
    from ebb_cli.shadow_report import render
    from tests.kit.builders import NOW
    from tests.kit.shadow_api import recording, served

    url = f"sqlite:///{tmp_path / 'ebb.db'}"
    asyncio.run(upgrade_async(url))
    recording(tmp_path / "recorded.yaml")
    policy = peer.disruption_policy(peer.SIDES["shadow"])
    with served(url, token="t0", now=NOW + timedelta(hours=1)) as api:
        trial = peer.ShadowTrial(out_dir=tmp_path, kubeconfig="", api=api, token="t0",
                                 pythonpath=os.environ.get("PYTHONPATH", ""), policy=policy)
        outputs = asyncio.run(trial.report(3600.0))
    report = outputs["report"]
    assert [p["name"] for p in report["backtest"]["policies"]] == ["karpenter-default", "ebb-policy.json"]
    words = (tmp_path / "shadow-report.txt").read_text(encoding="utf-8")
    assert words.splitlines() == render(report) and "Back-test of the recorded period" in words
    assert (tmp_path / "shadow.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert json.loads((tmp_path / "shadow-report.json").read_text(encoding="utf-8")) == report
    assert json.loads((tmp_path / "ebb-policy.json").read_text(encoding="utf-8")) == policy

KWOK_TYPES: list[dict[str, Any]] = [
    {"name": f"{family}-{cpu}x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
               "resources": {"cpu": str(cpu), "memory": f"{cpu * gib}Gi", "pods": "110"},
               "offerings": [{"Price": cpu * gib * 0.01 * share, "Available": True, "Requirements": [
                   {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                   {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
                   for capacity, share in (("spot", 0.7), ("on-demand", 1.0)) for zone in peer.ZONES]}
              for family, gib in (("c", 2), ("m", 8)) for cpu in (2, 4, 8)]


def test_the_starting_cluster_holds_the_peak_the_same_on_every_call_spot_first() -> None:
    trace = peer.make_trace(1, peer.SMOKE)
    pool = peer.nodepool("0s", "0", capacity_types=peer.CLOUD.capacity_types)
    nodes = peer.starting_cluster(trace, KWOK_TYPES, pool)
    assert nodes == peer.starting_cluster(trace, KWOK_TYPES, pool)
    assert nodes and len({n.name for n in nodes}) == len(nodes)
    assert {n.capacity_type for n in nodes} == {"spot"}  # the cheaper offering, as Karpenter picks
    assert all(n.zone in peer.ZONES for n in nodes)
    cpu = {str(t["name"]): int(str(t["resources"]["cpu"])) * 1000 - 100 for t in KWOK_TYPES}
    _, peak_cpu, _ = trace.peak_requests()
    assert sum(cpu[n.instance_type] for n in nodes) >= peak_cpu
    hostname_peak = max(s.peak for s in trace.services if s.spread == "hostname")
    assert len(nodes) >= hostname_peak  # one replica per node
    on_demand = peer.nodepool("0s", "0", capacity_types=("on-demand",))
    assert {n.capacity_type for n in peer.starting_cluster(trace, KWOK_TYPES, on_demand)} == {"on-demand"}
    # read back just after its creation, before Karpenter marked it Ready: planned from its spec all the same
    unready = {**pool, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert peer.starting_cluster(trace, KWOK_TYPES, unready) == nodes


def test_a_starting_nodeclaim_pins_its_type_capacity_and_zone_and_requests_the_types_allocatable() -> None:
    node = peer.StartNode("start-000", "c-4x-amd64-linux", "spot", "test-zone-b")
    pool = peer.nodepool("0s", "0", capacity_types=peer.CLOUD.capacity_types)
    claim = peer.start_nodeclaim(node, pool, KWOK_TYPES)
    reqs = {r["key"]: r["values"] for r in claim["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ["c-4x-amd64-linux"]
    assert reqs["karpenter.sh/capacity-type"] == ["spot"] and reqs["topology.kubernetes.io/zone"] == ["test-zone-b"]
    assert claim["metadata"]["name"] == "start-000"
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == peer.NODEPOOL
    assert claim["spec"]["resources"]["requests"]["cpu"] == "3900m"  # 4 vCPU less KWOK's 100m overhead


def test_the_timeline_keeps_each_nodeclaims_capacity_type_and_when_it_became_ready() -> None:
    timeline = Timeline({("c-4x-amd64-linux", "spot", "test-zone-a"): 0.14})
    spot = nodeclaim("c-4x-amd64-linux")
    spot["metadata"]["labels"]["karpenter.sh/capacity-type"] = "spot"
    timeline.nodeclaim(10.0, "a", spot)
    timeline.nodeclaim(30.0, "a", {**spot, "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    timeline.nodeclaim(55.0, "a", {**spot, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    timeline.nodeclaim(70.0, "a", {**spot, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    timeline.nodeclaim(12.0, "start-0", nodeclaim("c-4x-amd64-linux"))
    life = timeline.nodeclaims["a"]
    assert (life.capacity_type, life.price, life.ready) == ("spot", 0.14, 55.0)
    figures = peer.nodeclaim_figures(timeline, ["start-0"])
    assert figures["ready_seconds"] == {"min": 45.0, "median": 45.0, "max": 45.0, "count": 1}
    assert figures["launched_by_capacity_type"] == {"start": {"on-demand": 1}, "after": {"spot": 1}}


# -- running cost: /proc ---------------------------------------------------------------------------------------------


STAT = ("4242 (java (kafka) x) S 1 4242 4242 0 -1 4194560 3000 0 0 0 250 50 7 3 20 0 60 0 1000 5000000 "
        "120000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")


def test_cpu_seconds_and_parent_from_proc_stat_even_with_parentheses_in_the_name() -> None:
    assert peer.stat_fields(STAT)[0] == "S"
    assert peer.parent_pid(STAT) == 1
    assert peer.cpu_seconds(STAT, 100) == (250 + 50 + 7 + 3) / 100


def test_rss_from_proc_status() -> None:
    assert peer.rss_bytes("Name:\tpostgres\nVmPeak:\t 9000 kB\nVmRSS:\t   20480 kB\nThreads: 1\n") == 20480 * 1024
    assert peer.rss_bytes("Name:\tzombie\nState:\tZ\n") == 0


def test_a_process_tree_is_its_roots_and_their_descendants() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 20: 1, 21: 20}
    assert peer.tree([10], parents) == {10, 11, 12}
    assert peer.tree([10, 20], parents) == {10, 11, 12, 20, 21}
    assert peer.tree([99], parents) == set()  # gone


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0
   2: 00000000:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0
"""


def test_the_socket_listening_on_a_port_from_proc_net_tcp() -> None:
    assert peer.listening_inodes(TCP, 8080) == {"111"}  # the established connection on 8080 is not it
    assert peer.listening_inodes(TCP, 5432) == {"333"}
    assert peer.listening_inodes(TCP, 9092) == set()


def test_the_port_of_a_bootstrap_address_or_a_database_url() -> None:
    assert peer._port("127.0.0.1:19092") == 19092
    assert peer._port("127.0.0.1:19092,127.0.0.1:19093") == 19092
    assert peer._port("postgresql+asyncpg://ebb@127.0.0.1:15432/ebb") == 15432


def test_running_cost_samples_this_process_cpu_and_memory() -> None:
    running = peer.RunningCost({"me": [os.getpid()], "gone": []})
    running.sample()
    sum(i * i for i in range(300_000))  # some CPU between the samples
    running.sample()
    figures = running.figures()
    assert figures["me"]["samples"] == 2 and figures["me"]["rss_peak_mib"] > 1
    assert figures["me"]["cpu_seconds"] >= 0
    assert figures["gone"] == {"cpu_seconds": 0.0, "rss_peak_mib": 0.0, "rss_mean_mib": 0.0, "samples": 2,
                               "pids": []}


# -- the smoke ---------------------------------------------------------------------------------------------------


def test_the_smoke_trace_is_one_step_down_and_one_burst_of_a_tenth_of_the_pods() -> None:
    full, smoke = peer.make_trace(), peer.make_trace(size=peer.SMOKE)
    assert [p.kind for p in smoke.phases] == ["up", "down", "bursty"]
    assert len(smoke.jobs) >= 1 and all(j.replicas >= 1 for j in smoke.jobs)
    assert smoke.peak_requests()[0] <= full.peak_requests()[0] / 5
    # the step down is long enough for a 10 s pass and a 15 s validation before the bursts begin
    assert smoke.phases[1].end - smoke.phases[1].start >= 25
    assert smoke.bursty.end <= full.phases[1].start  # the trace, scale up at its least included, is short


def test_smoke_runs_a_karpenter_and_an_ebb_side_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EBB_BENCH_PEER_SIDES", raising=False)
    monkeypatch.setenv("EBB_BENCH_PEER", "smoke")
    assert peer.size_from_env() is peer.SMOKE
    sides = [peer.SIDES[s] for s in peer.sides_from_env()]
    assert {s.ebb for s in sides} == {True, False}
    monkeypatch.setenv("EBB_BENCH_PEER_SIDES", "ebb")
    assert peer.sides_from_env() == ["ebb"]
    monkeypatch.delenv("EBB_BENCH_PEER")
    monkeypatch.delenv("EBB_BENCH_PEER_SIDES")
    assert peer.size_from_env() is peer.FULL and peer.sides_from_env() == list(peer.DEFAULT_SIDES)


@pytest.mark.parametrize("at_once", [False, True])
def test_run_sides_runs_every_side_in_its_process_and_writes_the_results(
        at_once: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A smoke's round: its sides at once (each child sees the other started), or with EBB_BENCH_PEER_AT_ONCE=1
    one after the other."""
    import threading

    monkeypatch.setenv("EBB_BENCH_PEER_SIDES", "karpenter-0s,ebb-nowindow")
    monkeypatch.setenv("EBB_BENCH_PEER_RESULTS", str(tmp_path / "results.json"))
    monkeypatch.setenv("EBB_BENCH_PEER", "smoke")
    monkeypatch.delenv("EBB_BENCH_PEER_SEEDS", raising=False)
    if at_once:
        monkeypatch.delenv("EBB_BENCH_PEER_AT_ONCE", raising=False)
    else:
        monkeypatch.setenv("EBB_BENCH_PEER_AT_ONCE", "1")
    both_started = threading.Barrier(2, timeout=1 if not at_once else 5)
    calls: list[list[str]] = []

    def child(args: list[str]) -> dict[str, Any]:
        calls.append(args)
        together = True
        try:
            both_started.wait()
        except threading.BrokenBarrierError:
            together = False
        return {"side": args[1], "together": together}

    results = peer.run_sides(child)
    assert sorted(calls) == [["peer", "ebb-nowindow@1"], ["peer", "karpenter-0s@1"]]
    assert [r["side"] for r in results] == ["karpenter-0s@1", "ebb-nowindow@1"]
    assert all(r["together"] is at_once for r in results)
    import json

    assert json.loads((tmp_path / "results.json").read_text()) == results


def test_bench_peer_smoke_sets_the_sides_environment_and_is_never_written_to_a_page(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.__main__ as bench_main

    monkeypatch.delenv("EBB_BENCH_PEER", raising=False)
    with pytest.raises(SystemExit, match="smoke"):
        bench_main.main(["peer", "--smoke", "--write", "docs/benchmarks.md"])
    seen: list[str] = []

    def run(which: str, *, pictures: bool = False) -> str:
        seen.append(which)
        assert not pictures  # a smoke run draws nothing either
        return "report"

    monkeypatch.setattr(bench_main, "run", run)
    monkeypatch.setenv("EBB_BENCH_PEER", "")
    assert bench_main.main(["peer", "--smoke"]) == 0
    assert seen == ["peer"] and peer.is_smoke()


# -- the committed code, unpacked on any Python 3.11 -------------------------------------------------------------


def _tar(*members: tuple[str, str, str]) -> bytes:
    """A tar archive of (kind, name, content or link target) members; kind: file, dir, symlink, hardlink, fifo,
    chardev."""
    import io
    import tarfile

    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
             "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE, "chardev": tarfile.CHRTYPE}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for kind, name, value in members:
            info = tarfile.TarInfo(name)
            info.type = kinds[kind]
            info.mode = 0o6777 if kind == "file" else 0o755
            data = value.encode() if kind == "file" else b""
            if kind in ("symlink", "hardlink"):
                info.linkname = value
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


SAFE = _tar(("dir", "pkg", ""), ("file", "pkg/mod.py", "X = 1\n"), ("symlink", "pkg/alias.py", "mod.py"),
            ("hardlink", "pkg/copy.py", "pkg/mod.py"), ("file", "pkg/sub/deep.py", "Y = 2\n"))


@pytest.mark.parametrize("with_data_filter", [False, True])
def test_an_archive_of_plain_files_and_inner_links_unpacks_with_or_without_tarfiles_data_filter(
        with_data_filter: bool, tmp_path: Path) -> None:
    import stat
    import tarfile

    if with_data_filter and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no data filter (3.11.4 and later have)")
    peer.extract_archive(SAFE, tmp_path, with_data_filter=with_data_filter)
    assert (tmp_path / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert (tmp_path / "pkg" / "alias.py").read_text() == "X = 1\n"
    assert (tmp_path / "pkg" / "copy.py").read_text() == "X = 1\n"
    assert (tmp_path / "pkg" / "sub" / "deep.py").read_text() == "Y = 2\n"
    mode = stat.S_IMODE((tmp_path / "pkg" / "mod.py").stat().st_mode)
    assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_IWGRP | stat.S_IWOTH)


@pytest.mark.parametrize(("member", "why"), [
    (("file", "/etc/evil", "x"), "absolute"),
    (("file", "../evil", "x"), "outside"),
    (("file", "pkg/../../evil", "x"), "outside"),
    (("symlink", "pkg/up", "../../evil"), "outside"),
    (("symlink", "pkg/abs", "/etc/passwd"), "absolute"),
    (("hardlink", "pkg/hard", "../evil"), "outside"),
    (("fifo", "pkg/pipe", ""), "FIFO"),
    (("chardev", "pkg/tty", ""), "device"),
])
def test_without_the_data_filter_a_member_that_would_escape_or_is_special_is_refused_before_anything_is_written(
        member: tuple[str, str, str], why: str, tmp_path: Path) -> None:
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(peer.UnsafeArchive, match=why):
        peer.extract_archive(_tar(("file", "pkg/first.py", "ok"), member), into, with_data_filter=False)
    assert not any(into.iterdir())  # checked before the first member is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["into"]


def test_the_committed_code_unpacks_without_the_data_filter(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    """As on Debian 12's Python 3.11.2: ebb's library, services and CRDs from ``git archive`` of HEAD."""
    import tarfile

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    commit, pythonpath = peer.committed_code(tmp_path)
    assert commit
    paths = pythonpath.split(os.pathsep)
    assert paths[0] == str(tmp_path / "libs" / "ebb" / "src")
    assert (tmp_path / "libs" / "ebb" / "src" / "ebb" / "__init__.py").is_file()
    assert any(p.endswith(os.path.join("services", "consolidation-planner", "src")) for p in paths)
    assert list((tmp_path / "deploy" / "kubernetes" / "crds").glob("ebb.sh_*.yaml"))


@pytest.mark.parametrize("control_plane_fails", [False, True])
def test_the_ebb_sides_servers_start_while_its_control_plane_does_and_stop_after_it(
        control_plane_fails: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import contextlib
    import threading
    from collections.abc import Iterator

    both_starting = threading.Barrier(2, timeout=5)  # each start waits for the other: they overlap, or it times out
    events: list[str] = []

    @contextlib.contextmanager
    def servers() -> Iterator[tuple[str, str, str]]:
        both_starting.wait()
        events.append("servers up")
        try:
            yield "127.0.0.1:9092", "postgresql+asyncpg://db", "fake"
        finally:
            events.append("servers stopped")

    @contextlib.contextmanager
    def control_plane(log_to: Path, cloud: peer.Cloud) -> Iterator[dict[str, str]]:
        both_starting.wait()
        if control_plane_fails:
            raise SystemExit("kubernetes.sh start failed")
        events.append("control plane up")
        try:
            yield {"KUBECONFIG": "kubeconfig", "KARPENTER_METRICS_URL": "http://karpenter/metrics"}
        finally:
            events.append("control plane stopped")

    def ebb_backend(stack: contextlib.ExitStack[Any], out_dir: Path) -> peer.EbbBackend:
        bootstrap, url, origin = stack.enter_context(servers())
        return peer.EbbBackend(bootstrap, url, origin, "abc1234", out_dir / "code", "")

    def run_ebb_side(side: peer.Side, trace: peer.Trace, cloud: peer.Cloud, env: dict[str, str],
                     backend: peer.EbbBackend, *rest: Any) -> dict[str, Any]:
        events.append(f"ran on {backend.bootstrap} and {env['KUBECONFIG']}")
        return {"side": side.key}

    monkeypatch.setattr(peer, "ebb_backend", ebb_backend)
    monkeypatch.setattr(peer, "control_plane", control_plane)
    monkeypatch.setattr(peer, "run_ebb_side", run_ebb_side)
    side, trace = peer.SIDES["ebb"], peer.make_trace(size=peer.SMOKE)
    if control_plane_fails:
        with pytest.raises(SystemExit, match=r"kubernetes\.sh start failed"):
            peer._run_side(side, trace, peer.SMOKE_CLOUD, {}, [], tmp_path)
        assert events == ["servers up", "servers stopped"]
        return
    assert peer._run_side(side, trace, peer.SMOKE_CLOUD, {}, [], tmp_path) == {"side": "ebb"}
    assert sorted(events[:2]) == ["control plane up", "servers up"]
    assert events[2:] == ["ran on 127.0.0.1:9092 and kubeconfig", "control plane stopped", "servers stopped"]


def _go() -> str | None:
    import shutil
    return shutil.which("go") or (None if not Path("/usr/local/go/bin/go").exists() else "/usr/local/go/bin/go")


@pytest.mark.skipif(_go() is None, reason="Go is not installed")
def test_karpenters_instance_types_missing_from_the_module_cache_say_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh machine has not downloaded Karpenter's module: the harness tries, and where it cannot (here the
    module proxy is switched off) it stops with what to run, not a FileNotFoundError."""
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomodcache"))
    monkeypatch.setenv("GOPROXY", "off")
    with pytest.raises(SystemExit) as stopped:
        peer.kwok_instance_types_path()
    said = str(stopped.value)
    assert "deploy/local/karpenter.sh install" in said
    assert f"sigs.k8s.io/karpenter@{peer.KARPENTER_VERSION}" in said and "GOPROXY=off" in said
