"""Workload traces (``ebb.core.traces``): the file format and the built-in generators."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ebb.core.traces import (
    BUILTIN,
    Interrupt,
    Trace,
    builtin_trace,
    combined,
    merge_patch,
    replica_sets,
    trace_schema,
)
from tests.kit.builders import NOW, node, nodepool, pod

CLUSTER: list[dict[str, Any]] = [
    nodepool("general"), nodepool("spot"),
    *[node(f"n{i}", pool="general") for i in range(20)],
    *[pod(f"web-{i}", f"n{i % 20}", owner=("ReplicaSet", "web-1")) for i in range(12)],
    *[pod(f"api-{i}", f"n{i % 20}", owner=("ReplicaSet", "api-1")) for i in range(4)],
]
DAY = 86400.0


@pytest.mark.parametrize("name", sorted(BUILTIN))
@pytest.mark.parametrize("documents", [CLUSTER, [nodepool("general")]], ids=["snapshot", "empty"])
def test_builtin_traces_are_deterministic_and_within_the_run(name: str, documents: list[dict[str, Any]]) -> None:
    one = builtin_trace(name, documents, start=NOW, duration=DAY, seed=3)
    two = builtin_trace(name, documents, start=NOW, duration=DAY, seed=3)
    assert one.model_dump() == two.model_dump()
    assert one.events, "a built-in trace changes something"
    assert all(0 <= e.at < DAY for e in one.events)
    Trace.model_validate(one.model_dump(by_alias=True))  # what it generates is a valid file


def test_batch_bursts_create_jobs_and_end_them() -> None:
    trace = builtin_trace("batch-bursts", CLUSTER, start=NOW, duration=4 * 3600, seed=1)
    created = {e.scale.workload.name for e in trace.events if e.scale and e.scale.workload.kind == "Job"}
    ended = {e.delete.workload.name for e in trace.events if e.delete and e.delete.workload}
    assert len(created) >= 2 * 7  # 2-5 jobs a burst, a burst about every 30 minutes from minute 1
    assert ended and ended <= created
    other = builtin_trace("batch-bursts", CLUSTER, start=NOW, duration=4 * 3600, seed=2)
    assert other.model_dump() != trace.model_dump(), "the seed matters"


def test_diurnal_follows_the_day() -> None:
    trace = builtin_trace("diurnal", CLUSTER, start=NOW.replace(hour=4, minute=0), duration=DAY, seed=0)
    web = [(e.at, e.scale.replicas) for e in trace.events if e.scale and e.scale.workload.name == "web-1"]
    peak = max(web, key=lambda x: x[1])
    assert 9 * 3600 <= peak[0] <= 15 * 3600  # the peak near 16:00 UTC, 12 hours after a 04:00 start
    assert peak[1] > 12 * 1.5


def test_rollout_moves_the_largest_replica_set() -> None:
    trace = builtin_trace("rollout", CLUSTER, start=NOW, duration=DAY, seed=0)
    scales = [(e.scale.workload.name, e.scale.replicas) for e in trace.events if e.scale]
    assert scales[-2:] == [("web-1-v2", 12), ("web-1", 0)]
    assert replica_sets(CLUSTER) == {("ReplicaSet", "default", "api-1"): 4, ("ReplicaSet", "default", "web-1"): 12}


def test_drift_patches_every_nodepool() -> None:
    trace = builtin_trace("drift", CLUSTER, start=NOW, duration=DAY, seed=0)
    assert sorted(e.patch.name for e in trace.events if e.patch) == ["general", "spot"]


def test_spot_interruptions_come_at_random_and_traces_run_together() -> None:
    spot = builtin_trace("spot-interruptions", CLUSTER, start=NOW, duration=DAY, seed=0)
    assert 12 <= len(spot.events) <= 40  # one an hour on average, a Poisson process
    assert all(e.interrupt == Interrupt() for e in spot.events)  # a spot node, the 2-minute notice
    assert spot == builtin_trace("spot-interruptions", CLUSTER, start=NOW, duration=DAY, seed=0)
    assert spot != builtin_trace("spot-interruptions", CLUSTER, start=NOW, duration=DAY, seed=1)
    bursts = builtin_trace("batch-bursts", CLUSTER, start=NOW, duration=DAY, seed=0)
    both = combined([bursts, spot])
    assert both.name == "batch-bursts+spot-interruptions"
    assert both.events == [*bursts.events, *spot.events]
    assert [e.at for e in both.ordered()] == sorted(e.at for e in both.events)
    assert combined([spot]) is spot


def test_a_periodic_built_in_trace_takes_another_period() -> None:
    hourly = builtin_trace("spot-interruptions", CLUSTER, start=NOW, duration=DAY, seed=0)
    often = builtin_trace("spot-interruptions", CLUSTER, start=NOW, duration=DAY, seed=0, every=600.0)
    assert len(often.events) > 3 * len(hourly.events) and "every 10 minutes" in often.description
    bursts = builtin_trace("batch-bursts", CLUSTER, start=NOW, duration=DAY, seed=0, every=3600.0)
    assert len({e.at for e in bursts.events if e.scale}) < len(
        {e.at for e in builtin_trace("batch-bursts", CLUSTER, start=NOW, duration=DAY, seed=0).events if e.scale})
    with pytest.raises(ValueError, match="rollout takes no period"):
        builtin_trace("rollout", CLUSTER, start=NOW, duration=DAY, seed=0, every=60.0)
    with pytest.raises(ValueError, match="must be positive"):
        builtin_trace("diurnal", CLUSTER, start=NOW, duration=DAY, seed=0, every=0.0)


@pytest.mark.parametrize(("event", "message"), [
    ({"at": "5m"}, "exactly one of"),
    ({"at": "soon", "delete": {"kind": "Pod", "name": "x"}}, "not a duration"),
    ({"at": 1, "delete": {"kind": "Pod"}}, "either kind and name"),
    ({"at": -1, "delete": {"kind": "Pod", "name": "x"}}, "greater than or equal"),
    ({"at": 1, "scale": {"workload": {"name": "w", "kind": "Deployment"}, "replicas": 1}}, "ReplicaSet"),
    ({"at": 1, "bogus": {}}, "Extra inputs"),
    ({"at": 1, "interrupt": {}, "delete": {"kind": "Pod", "name": "x"}}, "exactly one of .*interrupt"),
    ({"at": 1, "interrupt": {"nodes": 0}}, "greater than or equal to 1"),
    ({"at": 1, "interrupt": {"notice": "soon"}}, "not a duration"),
    ({"at": 1, "interrupt": {"kind": "state-change"}}, "spot-interruption"),
    ({"at": 1, "interrupt": {"capacityType": "preemptible"}}, "spot"),
])
def test_bad_trace_files_say_what_is_wrong(event: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Trace.model_validate({"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "t", "events": [event]})


def test_file_events_order_and_schema() -> None:
    trace = Trace.model_validate({"name": "t", "events": [
        {"at": "2m", "delete": {"kind": "Pod", "namespace": "default", "name": "a"}},
        {"at": 30, "scale": {"workload": {"name": "web"}, "replicas": 3, "template": {"cpu": "1"}}}]})
    assert [e.at for e in trace.ordered()] == [30, 120]
    schema = trace_schema()
    assert {"apiVersion", "events", "name"} <= set(schema["properties"])


def test_an_interrupt_reads_durations_and_defaults_to_a_spot_node_with_two_minutes() -> None:
    trace = Trace.model_validate({"name": "t", "events": [
        {"at": "1h", "interrupt": {}},
        {"at": "2h", "interrupt": {"nodes": 3, "capacityType": None, "nodepool": "general", "notice": "10m",
                                   "kind": "scheduled-change"}}]})
    first, second = (e.interrupt for e in trace.ordered())
    assert first is not None and second is not None
    assert (first.node, first.nodes, first.capacity_type, first.nodepool, first.kind, first.notice) == \
        (None, 1, "spot", None, "spot-interruption", 120.0)
    assert (second.nodes, second.capacity_type, second.nodepool, second.kind, second.notice) == \
        (3, None, "general", "scheduled-change", 600.0)


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": 1, "b": {"c": 2}}, {"b": {"c": 3, "d": 4}}, {"a": 1, "b": {"c": 3, "d": 4}}),
    ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
])
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_the_schema_in_the_docs_is_the_models() -> None:
    """docs/trace.schema.json is ``trace_schema()`` (regenerate: see docs/backtest.md)."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "docs" / "trace.schema.json"
    assert json.loads(path.read_text()) == trace_schema()


def test_the_example_trace_file_is_valid() -> None:
    from pathlib import Path

    from ebb.core.yaml_documents import parse_yaml

    path = Path(__file__).parents[2] / "examples" / "backtest" / "trace.yaml"
    (doc,) = parse_yaml(path.read_text(), str(path))
    trace = Trace.model_validate(doc)
    assert [e.at for e in trace.ordered()] == [0, 300, 2100, 2700, 3600, 5400]
    assert trace.ordered()[-1].interrupt is not None
