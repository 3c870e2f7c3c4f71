"""The simulated kube-scheduler's choice of node (ebb.core.simulator.binding): kube-scheduler v1.34's default
profile. The scores expected are kube-scheduler's own test cases' (pkg/scheduler/framework/plugins/noderesources:
least_allocated_test.go and balanced_allocation_test.go, "nothing scheduled, resources requested, differently sized
nodes"), and its documented percentageOfNodesToScore; the rest is what the profile implies: the least allocated node
wins where the first node that fits would not, a ReplicaSet's replicas spread over hosts, required rules still
filter, the queue takes the higher priority first, ties are drawn from the seed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from ebb.core.model import Node, Pod, SchedulingSpec, Snapshot
from ebb.core.simulator.binding import Binder, bind, feasible_to_find, queue_order
from ebb.core.simulator.checker import check
from ebb.core.simulator.results import SimulationResult
from ebb.core.simulator.scheduler import Scheduler
from tests.kit.simulator_model import Gi, Mi, make_node, make_pod, make_type, spread, term

SMALL = make_type("small", 4100, 10 * Gi, 110, [("z1", "on-demand", 0.1)])


def snapshot(nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> Snapshot:
    return Snapshot(tuple(nodes), tuple(pods), (), ())


def node(name: str, cpu: int, mem: int, zone: str = "z1") -> Node:
    it = make_type(f"t-{cpu}-{mem}", cpu + 100, mem + 256 * Mi, 110, [(zone, "on-demand", 0.1)])
    return make_node(name, it, zone)


def owned(name: str, owner: str = "web", **kw: Any) -> Pod:
    pod = make_pod(name, **kw)
    return Pod(pod.name, pod.namespace, pod.labels, {}, pod.spec, node_name=pod.node_name, owner_kind="ReplicaSet",
               owner_name=owner, creation_time=pod.creation_time, priority=pod.priority)


def test_least_allocated_and_balanced_allocation_score_as_kube_schedulers_own_cases() -> None:
    """Pod 3000m / 5000 bytes; node1 4000m / 10000, node2 6000m / 10000: LeastAllocated 37 and 50, BalancedAllocation
    87 and 100 (kube-scheduler's tests); a pod of no owner has no spread to score."""
    nodes = [node("node1", 4000, 10000), node("node2", 6000, 10000)]
    pod = make_pod("p", cpu=3000, mem=5000, owner_kind=None)
    snap = snapshot(nodes, [pod])
    state = Scheduler(snap, extra_pods=[pod]).new_state()
    binder = Binder(state, random.Random(0))
    cls, idx = binder.feasible(pod)
    assert list(idx) == [0, 1]
    assert list(binder.scores(pod, cls, idx)) == [37 + 87, 50 + 100]


def test_a_pod_goes_to_the_least_allocated_node_not_the_first_that_fits() -> None:
    busy = make_node("busy", SMALL, "z1")
    idle = make_node("idle", SMALL, "z1")
    resident = make_pod("resident", cpu=3000, mem=6 * Gi, node="busy", owner_kind=None)
    pod = make_pod("new", cpu=500, mem=Gi, owner_kind=None)
    snap = snapshot([busy, idle], [resident, pod])
    bound, _ = bind(snap, [pod], random.Random(0))
    assert bound == {pod.key: "idle"}
    first_fit = Scheduler(snap, extra_pods=[pod]).new_state()
    first_fit.place_all([pod], 0)
    assert first_fit.bin_name(first_fit.placed[pod.key]) == "busy"  # what the engine's simulation does


def test_a_replicasets_pods_spread_over_equal_nodes() -> None:
    """The default spreading (hostname, maxSkew 3) and LeastAllocated both push replicas apart: three replicas on
    three empty equal nodes, one each."""
    nodes = [make_node(f"n{i}", SMALL, "z1") for i in range(3)]
    pods = [owned(f"web-{i}", cpu=200, mem=256 * Mi) for i in range(3)]
    bound, _ = bind(snapshot(nodes, pods), pods, random.Random(1))
    assert sorted(bound.values()) == ["n0", "n1", "n2"]


def test_the_default_spreading_counts_the_owners_pods_in_the_zone() -> None:
    """Two zones, equally allocated nodes; the owner's pods already in zone a: the zone spread sends the new replica
    to zone b, whatever the tie-break draws."""
    a1, a2 = (make_node(n, make_type("t", 4100, 10 * Gi, 110, [("a", "on-demand", 0.1)]), "a") for n in ("a1", "a2"))
    b1 = make_node("b1", make_type("t", 4100, 10 * Gi, 110, [("b", "on-demand", 0.1)]), "b")
    # the same room used on every node: one pod of the owner on a1, one of another owner on a2 and b1
    residents = [owned("web-0", node="a1", cpu=1000, mem=Gi), owned("other-0", owner="other", node="a2", cpu=1000,
                                                                    mem=Gi),
                 owned("other-1", owner="other", node="b1", cpu=1000, mem=Gi)]
    pod = owned("web-1", cpu=500, mem=Gi)
    for seed in range(8):
        bound, _ = bind(snapshot([a1, a2, b1], [*residents, pod]), [pod], random.Random(seed))
        assert bound == {pod.key: "b1"}


def test_required_rules_still_filter() -> None:
    """Hostname anti-affinity among replicas and a zone spread with DoNotSchedule hold as under the simulator, and
    what is bound passes the independent checker."""
    zones = ("a", "b")
    nodes = [make_node(f"{z}{i}", make_type("t", 4100, 10 * Gi, 110, [(z, "on-demand", 0.1)]), z)
             for z in zones for i in range(2)]
    anti = [owned(f"db-{i}", owner="db", labels={"app": "db"}, pod_anti_affinity=(term("db"),)) for i in range(3)]
    zoned = [owned(f"api-{i}", owner="api", labels={"app": "api"}, spread=(spread("api"),)) for i in range(4)]
    pods = [*anti, *zoned]
    snap = snapshot(nodes, pods)
    bound, _ = bind(snap, pods, random.Random(3))
    assert len({bound[p.key] for p in anti}) == 3
    per_zone = [sum(1 for p in zoned if bound[p.key].startswith(z)) for z in zones]
    assert per_zone == [2, 2]
    assert check(snap, SimulationResult(bound, (), {}), (), pods) == []


def test_a_pod_no_node_takes_is_left_pending() -> None:
    pod = make_pod("huge", cpu=64000, mem=Gi, owner_kind=None)
    bound, _ = bind(snapshot([make_node("n", SMALL, "z1")], [pod]), [pod], random.Random(0))
    assert bound == {}


def test_the_queue_takes_the_higher_priority_first_then_the_earlier_created() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def pod(name: str, priority: int, created: datetime) -> Pod:
        spec = SchedulingSpec(requests={"cpu": 3000, "memory": Gi, "pods": 1})
        return Pod(name, "default", {}, {}, spec, priority=priority, creation_time=created)

    late_high, early_low, earlier_low = pod("a", 100, now + timedelta(seconds=9)), pod("b", 0, now), \
        pod("c", 0, now - timedelta(seconds=1))
    assert queue_order([early_low, late_high, earlier_low]) == [late_high, earlier_low, early_low]
    # one node with room for one of them: the high-priority pod gets it though it came last
    bound, _ = bind(snapshot([make_node("n", SMALL, "z1")], [early_low, late_high]), [early_low, late_high],
                    random.Random(0))
    assert bound == {late_high.key: "n"}


def test_ties_are_drawn_from_the_seed() -> None:
    nodes = [make_node(f"n{i}", SMALL, "z1") for i in range(4)]
    pod = make_pod("p", cpu=500, mem=Gi, owner_kind=None)
    snap = snapshot(nodes, [pod])
    picks = {seed: bind(snap, [pod], random.Random(seed))[0][pod.key] for seed in range(24)}
    assert len(set(picks.values())) > 1  # not always the first
    assert all(bind(snap, [pod], random.Random(seed))[0][pod.key] == picked for seed, picked in picks.items())


@pytest.mark.parametrize(("nodes", "found"), [(50, 50), (99, 99), (100, 100), (200, 100), (500, 230),
                                              (5000, 500), (10000, 500)])
def test_above_a_hundred_nodes_only_part_of_them_are_scored(nodes: int, found: int) -> None:
    """kube-scheduler's adaptive percentageOfNodesToScore: 50% less a point per 125 nodes, at least 5% and at least
    100 nodes (its docs: 10% of 5000 nodes)."""
    assert feasible_to_find(nodes) == found


def test_the_node_search_goes_on_where_the_last_one_stopped() -> None:
    """In 200 nodes kube-scheduler filters until it has found 100 feasible ones, from where the last pod's search
    stopped: the next pod's candidates are the other hundred."""
    nodes = [make_node(f"n{i:03d}", SMALL, "z1") for i in range(200)]
    pods = [make_pod(f"p{i}", cpu=100, mem=Mi, owner_kind=None) for i in range(2)]
    state = Scheduler(snapshot(nodes, pods), extra_pods=pods).new_state()
    binder = Binder(state, random.Random(0))
    _, first = binder.feasible(pods[0])
    _, second = binder.feasible(pods[1])
    assert list(first) == list(range(100)) and list(second) == list(range(100, 200))
    assert binder.start == 0


def test_binding_is_deterministic_for_a_seed_and_passes_the_checker() -> None:
    rng = np.random.default_rng(7)
    nodes = [make_node(f"n{i}", SMALL, ("a", "b")[i % 2]) for i in range(6)]
    residents = [owned(f"r{i}", owner=f"o{i % 3}", node=f"n{i % 6}", cpu=int(rng.integers(1, 8)) * 250,
                       mem=int(rng.integers(1, 8)) * 512 * Mi) for i in range(10)]
    pods = [owned(f"p{i}", owner=f"o{i % 3}", cpu=int(rng.integers(1, 8)) * 250, mem=int(rng.integers(1, 8)) * 512 * Mi)
            for i in range(12)]
    snap = snapshot(nodes, [*residents, *pods])
    first, start = bind(snap, pods, random.Random(5))
    again, start_again = bind(snap, pods, random.Random(5))
    assert first == again and start == start_again
    left = {p.key: "no node takes it" for p in pods if p.key not in first}
    assert len(left) < len(pods)
    assert check(snap, SimulationResult(first, (), left), (), pods) == []
