"""A NodePool's ``demandWindow`` on generated clusters: a pass's commands never take the pool's nodes below the peak
the window keeps room for (ebb.core.methods.consolidation), and the planner's record keeps every sample that can
still be the peak (ebb.core.demand)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ebb.core.cluster import ClusterView
from ebb.core.demand import recorded
from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.methods.consolidation import command_capacity_lost
from ebb.core.model import DemandSample, Snapshot
from tests.kit.builders import NOW, daemonset, ds_pod, node, nodepool, pod, snapshot

TYPES = ("m5.large", "c5.large", "m5.xlarge", "t3.medium", "m5.2xlarge")
OPTIONS = EngineOptions(explain=False)
GI = 2**30


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    docs: list[Any] = [nodepool(disruption={"demandWindow": "1h"}, budgets=[{"nodes": "100%"}]),
                       daemonset("agent", cpu="100m", memory="128Mi")]
    for i in range(draw(st.integers(2, 7))):
        name = f"n{i}"
        docs += [node(name, itype=draw(st.sampled_from(TYPES))), ds_pod(f"agent-{i}", name)]
        for j in range(draw(st.integers(0, 3))):
            docs.append(pod(f"p{i}-{j}", name, cpu=draw(st.sampled_from(["100m", "500m", "1", "1500m"])),
                            memory=draw(st.sampled_from(["128Mi", "1Gi", "3Gi"]))))
    samples = draw(st.lists(st.tuples(st.integers(0, 70), st.integers(0, 16000), st.integers(0, 64)), max_size=4))
    return replace(snapshot(*docs), demand=tuple(
        DemandSample("default", NOW - timedelta(minutes=minutes), cpu, gib * GI) for minutes, cpu, gib in samples))


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_a_pass_never_takes_a_pool_below_the_peak_of_its_window(snap: Snapshot) -> None:
    view = OPTIONS.view_of(snap, NOW)
    result = run_pass(view, OPTIONS)
    room = view.headrooms().get("default")
    assert room is not None
    cpu = memory = 0
    for command in result.commands:
        if command.method in ("emptiness", "single-node-consolidation", "multi-node-consolidation"):
            lost = command_capacity_lost(view, command).get("default", (0, 0))
            cpu, memory = cpu + lost[0], memory + lost[1]
    note(f"room {room}, peak {view.demand_peak}, lost ({cpu}, {memory}), {[c.nodes for c in result.commands]}")
    assert cpu <= max(room[0], 0) and memory <= max(room[1], 0)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 70))
def test_the_record_loses_no_peak(snap: Snapshot, minutes: int) -> None:
    """At any later moment the peak over the pruned record and now's demand is the peak over everything."""
    view = ClusterView.build(snap, NOW)
    kept = recorded(snap.demand, view)
    now_cpu, now_memory = view.demand_now["default"]
    # a sample of the record at this very moment and now's demand become one, the larger of each
    merged = {DemandSample("default", NOW, max(now_cpu, s.cpu), max(now_memory, s.memory))
              for s in snap.demand if s.at == NOW}
    assert set(kept) <= {*snap.demand, DemandSample("default", NOW, now_cpu, now_memory), *merged}
    moment = NOW + timedelta(minutes=minutes)
    every = (*snap.demand, DemandSample("default", NOW, *view.demand_now["default"]))

    def peak(samples: tuple[DemandSample, ...]) -> tuple[int, int]:
        inside = [s for s in samples if timedelta(0) <= moment - s.at < timedelta(hours=1)]
        return max((s.cpu for s in inside), default=0), max((s.memory for s in inside), default=0)

    assert peak(kept) == peak(every)
