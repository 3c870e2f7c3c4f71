"""`ebb.core.node_pods`: what a pass derives from the pods on a node, kept while the node holds the same pods."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from ebb.core import node_pods
from ebb.core.memo import Memo
from ebb.core.model import Pod, placement_order
from ebb.core.snapshot import parse_object
from tests.kit.builders import ds_pod, pod


def _pods() -> list[Pod]:
    docs = [pod("web-1", "n1", cpu="500m", memory="1Gi"), pod("web-2", "n1", cpu="2", memory="1Gi"),
            ds_pod("agent-1", "n1", cpu="100m"), pod("batch-1", "n1", cpu="2", memory="4Gi"),
            pod("late", "n1", cpu="250m")]
    docs[1]["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": "1000"}
    docs[4]["status"]["startTime"] = "2026-11-23T18:40:00Z"
    parsed = [parse_object(doc).value for doc in docs]
    assert all(isinstance(p, Pod) for p in parsed)
    return parsed


def test_what_is_derived_is_what_the_pods_say() -> None:
    pods = _pods()
    derived = node_pods.of_node("test-derived", pods)
    movable = [p for p in pods if p.needs_rescheduling]
    assert len(movable) == 4  # the DaemonSet pod stays with its node
    assert derived.movable == tuple(movable)
    assert derived.leaving_order == tuple(placement_order(movable))
    assert [p.name for p in derived.leaving_order] == ["batch-1", "web-2", "web-1", "late"]
    assert derived.cpu_requested == 500 + 2000 + 100 + 2000 + 250  # every pod, the DaemonSet's too
    assert derived.eviction_cost == sum(p.eviction_cost for p in movable)
    assert derived.eviction_cost > 4  # the deletion cost counts
    assert derived.last_arrival == max(p.start_time or p.creation_time for p in movable)  # type: ignore[type-var]
    assert derived.last_arrival == datetime(2026, 11, 23, 18, 40, tzinfo=UTC)
    empty = node_pods.of_node("test-derived-empty", [])
    assert (empty.movable, empty.leaving_order, empty.cpu_requested, empty.eviction_cost, empty.last_arrival) == \
        ((), (), 0, 0, None)


def test_the_requests_summed_and_the_classes_are_those_of_every_active_pod() -> None:
    pods = _pods()
    pods.append(replace(pods[0], name="web-3"))  # a replica of web-1: its class
    pods.append(replace(pods[1], name="web-4", deleting=True))  # being deleted: still uses room, counts in no class
    derived = node_pods.of_node("test-requested", pods)
    resources = ("cpu", "memory", "nvidia.com/gpu")
    memory = (1 + 1 + 4 + 1 + 1) * 2**30 + 2 * 128 * 2**20  # the DaemonSet's pod and "late" ask the default 128Mi
    assert derived.requested(resources) == (500 + 2000 + 100 + 2000 + 250 + 500 + 2000, memory, 0)
    assert derived.requested(resources) is derived.requested(resources)  # made once
    assert derived.requested(("memory",)) == (memory,)
    assert [(key, first.name, count) for key, first, count in derived.classes] == [
        (pods[0].class_key, "web-1", 2), (pods[1].class_key, "web-2", 1), (pods[2].class_key, "agent-1", 1),
        (pods[3].class_key, "batch-1", 1), (pods[4].class_key, "late", 1)]
    # web-4 is of web-2's class, left out as it is being deleted (it raises no topology count)
    assert pods[0].class_key == pods[5].class_key and pods[1].class_key == pods[6].class_key
    assert node_pods.of_node("test-requested-empty", []).requested(resources) == (0, 0, 0)


def test_a_node_holding_the_same_pod_objects_is_answered_from_what_was_kept() -> None:
    pods = _pods()
    first = node_pods.of_node("test-kept", pods)
    assert node_pods.of_node("test-kept", list(pods)) is first  # another list of the same objects
    assert node_pods.of_node("test-kept", tuple(pods)) is first


def test_a_node_whose_pods_changed_in_any_way_is_derived_again() -> None:
    pods = _pods()
    first = node_pods.of_node("test-changed", pods)
    cases = {
        "a pod gone": pods[:-1],
        "a pod more": [*pods, replace(pods[0], name="web-3")],
        "another order": [pods[1], pods[0], *pods[2:]],
        "an equal pod made again": [replace(pods[0]), *pods[1:]],
        "a pod now deleting": [replace(pods[0], deleting=True), *pods[1:]],
    }
    for what, changed in cases.items():
        derived = node_pods.of_node("test-changed", changed)
        assert derived is not first, what
        assert derived.pods == tuple(changed), what
        movable = [p for p in changed if p.needs_rescheduling]
        assert derived.movable == tuple(movable), what
        assert derived.leaving_order == tuple(placement_order(movable)), what
        assert derived.eviction_cost == sum(p.eviction_cost for p in movable), what
        first = derived
    assert node_pods.of_node("test-changed", pods).pods == tuple(pods)


def test_the_kept_entries_are_dropped_past_their_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_pods, "_kept", Memo(3))
    pods = _pods()
    kept = [node_pods.of_node(f"n{i}", pods) for i in range(3)]
    assert node_pods.of_node("n0", pods) is kept[0]
    node_pods.of_node("n3", pods)  # the fourth name: the three kept before are dropped
    assert node_pods.of_node("n0", pods) is not kept[0]
    assert len(node_pods._kept) <= 3
