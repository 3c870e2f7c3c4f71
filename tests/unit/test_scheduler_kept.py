"""What the simulator keeps from one Scheduler to the next: a pod's requests as vectors per resource names
(`Scheduler.pod_vec`, `.pod_needs`) and a spec's relaxations (`relaxations`). Values made once and shared, equal
to what a fresh computation gives."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from ebb.core.cluster import ClusterView
from ebb.core.memo import Memo
from ebb.core.model import Pod, Snapshot
from ebb.core.simulator import constraints
from ebb.core.simulator.scheduler import Scheduler, relaxations
from tests.kit.builders import node, pod, snapshot

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def _snapshot() -> Snapshot:
    return snapshot([node("n1"), node("n2")],
                    [pod("a", "n1", cpu="500m", memory="1Gi"), pod("b", "n2", cpu="2", memory="3Gi"),
                     pod("c", None, cpu="500m", memory="1Gi")])


def test_schedulers_with_the_same_resource_names_share_the_requests_vectors() -> None:
    snap = _snapshot()
    first, second = Scheduler(snap), Scheduler(snap)
    assert first.resources == second.resources
    for p in snap.pods:
        vec = first.pod_vec(p)
        assert second.pod_vec(p) is vec  # made once, shared
        assert not vec.flags.writeable
        assert vec.tolist() == [p.spec.requests.get(name, 0) for name in first.resources]
        assert second.pod_needs(p) is first.pod_needs(p)
        assert first.pod_needs(p) == tuple((i, v) for i, v in enumerate(vec.tolist()) if v)
    a, c = snap.pods[0], snap.pods[2]
    assert a.requests_key is c.requests_key and first.pod_vec(c) is first.pod_vec(a)  # equal requests: one vector


def test_other_resource_names_get_vectors_of_their_own() -> None:
    snap = _snapshot()
    plain = Scheduler(snap)
    gpu = replace(snap.pods[1], spec=replace(snap.pods[1].spec, requests={**snap.pods[1].spec.requests,
                                                                         "nvidia.com/gpu": 1}))
    wider = Scheduler(snap, extra_pods=[gpu])
    assert "nvidia.com/gpu" in wider.resources and "nvidia.com/gpu" not in plain.resources
    assert len(wider.pod_vec(snap.pods[0])) == len(plain.pod_vec(snap.pods[0])) + 1
    assert wider.pod_vec(gpu).tolist()[wider.resources.index("nvidia.com/gpu")] == 1


def test_kept_requests_are_dropped_past_their_limit_and_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constraints, "_REQUESTS_KEPT", Memo(8))
    monkeypatch.setattr(constraints, "_REQUESTS_KEPT_SIZE", 1)
    snap = _snapshot()
    first = Scheduler(snap)
    old = first.pod_vec(snap.pods[0])
    first.pod_vec(snap.pods[1])  # two kept: past the limit of 1
    again = Scheduler(snap).pod_vec(snap.pods[0])
    assert again is not old and np.array_equal(again, old)


def test_a_specs_relaxations_are_made_once_and_equal_to_those_of_an_equal_spec() -> None:
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": "a"}}}]
    snap = snapshot([node("n1")], [pod("a", "n1", labels={"app": "a"}, spread=spread)])
    p: Pod = snap.pods[0]
    made = relaxations(p.spec)
    assert relaxations(p.spec) is made
    assert len(made) == 2  # the spread as a requirement, then without it
    assert made[0].spread[0].when_unsatisfiable == "DoNotSchedule" and made[1].spread == ()
    equal = replace(p.spec)
    assert equal is not p.spec and relaxations(equal) == made and relaxations(equal) is not made


def _with_gpu(p: Pod, name: str, phase: str) -> Pod:
    return replace(p, name=name, phase=phase, spec=replace(p.spec, requests={**p.spec.requests, "nvidia.com/gpu": 1}))


@pytest.mark.parametrize(("phase", "counted"), [("Running", True), ("Succeeded", False), ("Failed", False)])
def test_a_finished_pods_requests_are_no_resource_of_the_simulation(phase: str, counted: bool) -> None:
    """A pod that finished needs no room: a resource only it requests is not one the simulation counts, whether the
    Scheduler reads every pod or takes them from a view (`ebb.core.node_pods`)."""
    snap = _snapshot()
    snap = replace(snap, pods=(*snap.pods, _with_gpu(snap.pods[0], name="done", phase=phase)))
    view = ClusterView.build(snap, NOW)
    found = Scheduler(snap)
    given = Scheduler(snap, derived=view.node_pods, unbound=view.unbound)
    assert found.resources == given.resources
    assert ("nvidia.com/gpu" in found.resources) is counted
    assert found.max_bins == given.max_bins


def test_a_scheduler_given_the_pods_per_node_needs_the_pods_on_no_node() -> None:
    snap = _snapshot()
    view = ClusterView.build(snap, NOW)
    with pytest.raises(ValueError, match="pods on no node"):
        Scheduler(snap, derived=view.node_pods)
    given = Scheduler(snap, derived=view.node_pods, unbound=view.unbound)
    assert given.max_bins == Scheduler(snap).max_bins  # the pending pod "c" counted: it would need a home


def test_a_nodes_row_is_kept_for_that_very_mapping_and_made_again_for_another() -> None:
    names = ("cpu", "memory", "pods")
    first = {"cpu": 4000, "memory": 8 * 2**30}
    rows = constraints.kept_rows(names, [first, {"pods": 110}])
    assert rows.tolist() == constraints.rows(names, [first, {"pods": 110}]).tolist()
    assert constraints.kept_rows(names, [first]).tolist() == [[4000, 8 * 2**30, 0]]
    first["cpu"] = 1  # never done to a snapshot's objects: shows the row is kept, not made again
    assert constraints.kept_rows(names, [first]).tolist() == [[4000, 8 * 2**30, 0]]
    equal = {"cpu": 1, "memory": 8 * 2**30}  # another object: its own row, whatever was kept for the first
    assert constraints.kept_rows(names, [equal]).tolist() == [[1, 8 * 2**30, 0]]
    assert constraints.kept_rows(("memory",), [first, equal]).tolist() == [[8 * 2**30], [8 * 2**30]]
    assert constraints.kept_rows(names, []).shape == (0, 3)


def test_kept_rows_are_dropped_past_their_limit_and_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constraints, "_ROWS_KEPT", Memo(8))
    monkeypatch.setattr(constraints, "KEEP_ROWS_AT_MOST", 2)
    names = ("cpu",)
    mappings = [{"cpu": n} for n in range(4)]
    assert constraints.kept_rows(names, mappings).tolist() == [[0], [1], [2], [3]]
    assert constraints.kept_rows(names, mappings[:1]).tolist() == [[0]]
    assert len(constraints._ROWS_KEPT[names]) == 1  # past the limit: started afresh
