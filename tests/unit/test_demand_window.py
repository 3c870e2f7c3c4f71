"""A NodePool's ``demandWindow``: Empty and Underutilized disruptions keep its nodes' capacity at the peak of what
its pods requested within the window (ebb.core.cluster, ebb.core.methods.consolidation, ebb.core.demand)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from ebb.core.causes import Cause, Stale
from ebb.core.cluster import ClusterView
from ebb.core.demand import recorded
from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.methods.consolidation import _cpu_memory
from ebb.core.model import DemandSample, Snapshot
from ebb.core.plan import make_plan, plan_json
from ebb.core.snapshot import SnapshotError
from ebb.core.validation import validate
from tests.kit.builders import (
    NOW,
    blocked_of,
    daemonset,
    disrupted,
    disruption_policy,
    ds_pod,
    node,
    nodepool,
    plan,
    pod,
    snapshot,
)

GI = 2**30
WINDOWED = nodepool(disruption={"demandWindow": "1h"})


def sample(cpu: str | int, minutes_ago: float, memory: int = 0, pool: str = "default") -> DemandSample:
    millis = cpu if isinstance(cpu, int) else int(cpu.removesuffix("m"))
    return DemandSample(pool, NOW - timedelta(minutes=minutes_ago), millis, memory)


def with_history(docs: list[Any], *samples: DemandSample) -> Snapshot:
    return replace(snapshot(*docs), demand=samples)


def planned(docs: list[Any], *samples: DemandSample) -> dict[str, Any]:
    return plan_json(make_plan(with_history(docs, *samples), NOW))


# -- settings -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("docs", "expected"), [
    ([nodepool(disruption={"demandWindow": "45m"})], 2700.0),
    ([nodepool(disruption={"demandWindow": "0s"})], None),
    ([nodepool()], None),
    ([nodepool(), disruption_policy(demandWindow="2h")], 7200.0),
    ([nodepool(disruption={"demandWindow": "1h"}), disruption_policy(consolidateAfter="0s")], None),
])
def test_the_window_is_read_from_the_nodepool_or_its_disruption_policy(docs: list[Any],
                                                                       expected: float | None) -> None:
    [pool] = snapshot(*docs).nodepools
    assert pool.demand_window == expected


@pytest.mark.parametrize(("docs", "field"), [
    ([nodepool(), disruption_policy(demandWindow="soon")], r"spec\.demandWindow"),
    ([nodepool(), disruption_policy(demandWindow="Never")], r"spec\.demandWindow"),  # the CRD refuses Never
    ([nodepool(disruption={"demandWindow": "Never"})], r"spec\.disruption\.demandWindow"),
    ([nodepool(disruption={"stabilizationWindow": "Never"})], r"spec\.disruption\.stabilizationWindow"),
])
def test_a_window_that_is_not_a_duration_names_the_field(docs: list[Any], field: str) -> None:
    with pytest.raises(SnapshotError, match=field):
        snapshot(*docs)


# -- what the view counts ---------------------------------------------------------------------------------------


def test_demand_is_the_pods_that_need_a_home_and_capacity_leaves_out_daemonset_pods() -> None:
    docs = [WINDOWED, daemonset("agent", cpu="250m", memory="256Mi"), node("a"), node("b"),
            ds_pod("agent-a", "a", cpu="250m", memory="256Mi"), ds_pod("agent-b", "b", cpu="250m", memory="256Mi"),
            pod("web", "a", cpu="700m", memory="1Gi"), pod("done", "b", cpu="900m", phase="Succeeded")]
    view = ClusterView.build(with_history(docs, sample("1200m", 10, 2 * GI), sample("5000m", 61)), NOW)
    assert view.demand_now == {"default": (700, GI)}
    assert view.capacity == {"default": (2 * (2000 - 250), 2 * (8 * GI - 256 * 2**20))}
    assert view.demand_peak == {"default": (1200, 2 * GI)}  # the sample of 61 minutes ago is out of the window
    assert view.headrooms().get("default") == (3500 - 1200, view.capacity["default"][1] - 2 * GI)


def test_a_pool_without_a_window_has_no_floor() -> None:
    view = ClusterView.build(with_history([nodepool(), node("a"), pod("web", "a")], sample("9000m", 5)), NOW)
    assert (view.demand_peak, view.headrooms().get("default")) == ({}, None)


def _only_on(ds: dict[str, Any], pool: str) -> dict[str, Any]:
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": pool}
    return ds


@pytest.mark.parametrize(("docs", "pool", "type_name", "expected"), [
    # m5.large: 2 cpu, 8Gi, no overhead in the test catalog
    ([WINDOWED], "default", "m5.large", (2000, 8 * GI)),
    ([WINDOWED, daemonset("agent", cpu="250m", memory="1Gi"), daemonset("log", cpu="100m", memory="1Gi")],
     "default", "m5.large", (1650, 6 * GI)),
    # a DaemonSet that selects another NodePool's nodes takes nothing here
    ([WINDOWED, _only_on(daemonset("agent", cpu="250m"), "other")], "default", "m5.large", (2000, 8 * GI)),
    # DaemonSets that ask for more than the type has leave no room, not less than none
    ([WINDOWED, daemonset("big", cpu="3000m", memory="1Gi")], "default", "m5.large", (0, 7 * GI)),
    ([WINDOWED], "default", "no-such-type", None),
    ([WINDOWED], "no-such-pool", "m5.large", None),
])
def test_a_launch_has_its_type_less_the_daemonsets_that_would_run_on_it(
        docs: list[Any], pool: str, type_name: str, expected: tuple[int, int] | None) -> None:
    view = ClusterView.build(snapshot(*docs), NOW)
    assert view.launch_room(pool, type_name) == expected
    assert view.launch_room(pool, type_name) == expected  # the second answer is the one kept


# -- the methods ----------------------------------------------------------------------------------------------


def _idle_and_busy() -> list[Any]:
    """``idle`` (m5.large, 2 cpu) is empty; ``busy`` (m5.large) runs 1.5 cpu."""
    return [WINDOWED, node("idle"), node("busy"), pod("web", "busy", cpu="1500m")]


@pytest.mark.parametrize(("samples", "deleted"), [
    ((), True),  # no history: the pods as they are are the only demand, and they stay where they are
    ((sample("3000m", 30),), False),  # 3 cpu within the hour: idle's 2 cpu are needed
    ((sample("3000m", 61),), True),  # that peak has left the window
    ((sample("2000m", 30),), True),  # 2 cpu fit on busy alone
])
def test_an_empty_node_stays_while_the_peak_of_the_window_needs_it(samples: tuple[DemandSample, ...],
                                                                   deleted: bool) -> None:
    out = planned(_idle_and_busy(), *samples)
    assert ("idle" in disrupted(out)) is deleted
    if not deleted:
        reason = blocked_of(out, "idle")["reason"]
        assert reason.startswith("empty, but NodePool default's demandWindow (1h) keeps capacity for what its pods "
                                 "requested at their peak within it (cpu 3000m")
        assert "deleting it would leave its nodes cpu 2000m" in reason


def test_two_empty_nodes_and_room_for_one_to_go() -> None:
    docs = [WINDOWED, node("idle-1"), node("idle-2"), node("busy"), pod("web", "busy", cpu="1500m")]
    out = planned(docs, sample("3000m", 10))
    assert len(disrupted(out)) == 1
    [kept] = {"idle-1", "idle-2"} - disrupted(out)
    assert "demandWindow (1h)" in blocked_of(out, kept)["reason"]


@pytest.mark.parametrize(("peak", "replaced"), [("1600m", True), ("7000m", False)])
def test_a_replace_gives_back_what_its_replacement_holds(peak: str, replaced: bool) -> None:
    """``big`` (m5.2xlarge, 8 cpu) runs 1.5 cpu and is replaced by a 2-cpu node: 6 cpu less."""
    docs = [WINDOWED, node("big", itype="m5.2xlarge"), pod("web", "big", cpu="1500m")]
    out = planned(docs, sample(peak, 20))
    if replaced:
        assert [(c["method"], c["action"]) for c in out["commands"]] == [("single-node-consolidation", "replace")]
    else:
        assert out["commands"] == []
        reason = blocked_of(out, "big")["reason"]
        assert "demandWindow (1h)" in reason and "this replace would leave its nodes cpu 2000m" in reason


def test_the_capacity_left_is_written_even_when_it_is_none() -> None:
    """The pool's only node would go, its pod onto another pool's node: the sentence says what capacity it leaves
    (none), as the docs write it, not "no requests"."""
    docs = [WINDOWED, nodepool("other"), node("only"), pod("web", "only", cpu="500m", memory="2Gi"),
            node("big", pool="other", itype="m5.2xlarge", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    reason = blocked_of(planned(docs), "only")["reason"]
    assert ("keeps capacity for what its pods requested at their peak within it (cpu 500m, memory 2.00Gi); this "
            "delete would leave its nodes cpu 0m, memory 0.00Gi") in reason


@pytest.mark.parametrize(("after", "peak", "written"), [
    ((0, 0), (500, 2 * GI), "cpu 0m, memory 0.00Gi"),
    ((2000, 2 * GI - 2**20), (500, 2 * GI), "cpu 2000m, memory 1.999Gi"),  # 1 MiB short: not "2.00Gi"
    ((2000, 3 * GI), (500, 2 * GI), "cpu 2000m, memory 3.00Gi"),
])
def test_the_capacity_left_never_reads_as_holding_the_peak(after: tuple[int, int], peak: tuple[int, int],
                                                            written: str) -> None:
    assert _cpu_memory(after, peak) == written


def test_multi_node_consolidation_takes_only_as_many_nodes_as_the_peak_leaves() -> None:
    """Three m5.large with 0.5 cpu each: without a window one t3.medium replaces them all; a 3-cpu peak leaves
    room for one to go."""
    docs = [WINDOWED, *(d for name in ("a", "b", "c") for d in (node(name), pod(f"web-{name}", name, cpu="500m")))]
    free = planned(docs)
    assert [(c["method"], c["action"], len(c["nodes"])) for c in free["commands"]] == [
        ("multi-node-consolidation", "replace", 3)]
    held = planned(docs, sample("3000m", 10))
    assert [(c["method"], c["action"], len(c["nodes"])) for c in held["commands"]] == [
        ("single-node-consolidation", "delete", 1)]
    kept = {"a", "b", "c"} - disrupted(held)
    assert len(kept) == 2
    assert all("this delete would leave its nodes cpu 2000m" in blocked_of(held, name)["reason"] for name in kept)


def test_drift_and_expiration_ignore_the_window() -> None:
    pool = nodepool(disruption={"demandWindow": "1h"}, expire_after="24h")
    out = planned([pool, node("old"), pod("web", "old", cpu="1500m")], sample("8000m", 5))
    assert [c["method"] for c in out["commands"]] == ["expiration"]


def test_validation_rejects_a_command_the_peak_has_grown_past() -> None:
    docs = _idle_and_busy()
    [command] = plan(*docs).first.commands
    assert command.nodes == ("idle",)
    assert validate(command, with_history(docs), NOW) is None
    stale = validate(command, with_history(docs, sample("3000m", 1)), NOW)
    assert stale is not None and stale.kind is Stale.BELOW_DEMAND_PEAK
    assert stale.inner is not None and stale.inner.kind is Cause.DEMAND_WINDOW
    assert "this delete would leave its nodes cpu 2000m" in stale.text


def test_the_pass_is_revisited_when_a_peak_leaves_the_window() -> None:
    snap = with_history(_idle_and_busy(), sample("3000m", 20), sample("1700m", 5))
    result = run_pass(EngineOptions().view_of(snap, NOW))
    assert result.commands == ()
    assert result.revisit_at == NOW + timedelta(minutes=40)
    after = run_pass(EngineOptions().view_of(snap, NOW + timedelta(minutes=40)))
    assert [c.nodes for c in after.commands] == [("idle",)]


# -- the record -------------------------------------------------------------------------------------------------


def test_the_record_keeps_only_samples_that_can_still_be_the_peak() -> None:
    docs = [WINDOWED, nodepool("other"), node("busy"), pod("web", "busy", cpu="1500m", memory="1Gi")]
    view = ClusterView.build(snapshot(*docs), NOW)
    history = (
        sample("4000m", 70, 0),  # out of the window
        sample("1000m", 40, GI // 2),  # now's sample is larger in both: never the peak again
        sample("3000m", 30, 0),  # more cpu than now
        sample("500m", 20, 4 * GI),  # more memory than now
        sample("9000m", 10, 0, pool="other"),  # a pool without a window
    )
    kept = recorded(history, view)
    assert kept == (history[2], history[3], DemandSample("default", NOW, 1500, GI))
    assert recorded(kept, view) == kept  # now's sample again: it replaces the one just like it


def test_two_passes_at_one_moment_leave_one_sample_the_larger_of_each() -> None:
    docs = [WINDOWED, node("busy"), pod("web", "busy", cpu="1500m", memory="1Gi")]
    view = ClusterView.build(snapshot(*docs), NOW)
    earlier = DemandSample("default", NOW, 2000, GI // 2)  # a pass at this same moment saw more cpu, less memory
    assert recorded((earlier,), view) == (DemandSample("default", NOW, 2000, GI),)


def test_a_record_out_of_order_loses_no_peak() -> None:
    """A record read back out of time order (a store's rows, a trace): a sample is made useless only by a later
    one, never by an earlier one that happens to come after it."""
    docs = [WINDOWED, node("busy"), pod("web", "busy", cpu="1500m", memory="1Gi")]
    view = ClusterView.build(snapshot(*docs), NOW)
    later = sample("1000m", 10, 8 * GI)  # the peak of memory from 10 minutes ago until the window ends for it
    earlier = sample("16000m", 50, 16 * GI)  # larger in both, but older: it leaves the window first
    assert recorded((later, earlier), view) == (earlier, later, DemandSample("default", NOW, 1500, GI))
