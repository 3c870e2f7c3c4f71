"""``ebb record``'s input errors (before anything is recorded), and a recorded trace replayed by the back-test:
from the recording's own cluster, start and duration, every arrival and departure applied, a departure following
its replica after the replay's own disruptions moved it. (Recording a real cluster:
tests/integration/test_record_live.py.)"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb.core.recording import Recorder
from ebb.core.traces import TraceEvent
from ebb_cli.main import app
from ebb_cli.record_cmd import trace_text
from tests.kit.builders import NOW, catalog, node, nodepool, pod
from tests.kit.cli import said


@pytest.mark.parametrize(("args", "words"), [
    (["--from-kafka", "localhost:9092", "--live"], "not both"),
    (["--anonymize-key", "k"], "only used with --anonymize"),
    (["--duration", "0s"], "positive duration"),
    (["--duration", "soon"], "not a duration"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "no such file"),
])
def test_bad_options_are_refused_before_recording(tmp_path: Path, args: list[str], words: str) -> None:
    result = CliRunner().invoke(app, ["record", "-o", str(tmp_path / "t.yaml"), *args])
    assert result.exit_code == 2, result.output
    assert words in said(result.output)
    assert not (tmp_path / "t.yaml").exists()


def test_an_output_that_cannot_be_written_is_refused_before_recording(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["record", "-o", str(tmp_path / "missing" / "t.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in said(result.output)


def test_a_cluster_that_cannot_be_read_is_an_input_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    result = CliRunner().invoke(app, ["record", "--kubeconfig", str(kubeconfig), "--duration", "5s",
                                      "-o", str(tmp_path / "t.yaml")])
    assert result.exit_code == 2, result.output
    assert "cannot" in result.output and "127.0.0.1:9" in result.output
    assert not (tmp_path / "t.yaml").exists()


def _recorded(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A recording of a small cluster: two web pods running at the start, a Job's pods arriving and finishing,
    one web pod moved by the recorded disrupter and departing later, a node launched and removed."""
    start = [nodepool(), catalog(), node("n0"), pod("web-a", "n0", owner=("ReplicaSet", "web"), cpu="500m"),
             pod("web-b", "n0", owner=("ReplicaSet", "web"), cpu="500m")]
    recorder = Recorder(start=NOW, documents=start)

    def at(seconds: float) -> Any:
        return NOW + timedelta(seconds=seconds)

    for i in range(3):
        recorder.observe(at(60), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", None, phase="Pending", owner=("Job", "batch"), cpu="1"))
    recorder.observe(at(70), "Node", "", "n1", node("n1"))
    for i in range(3):
        recorder.observe(at(900 + i), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", "n1", phase="Succeeded", owner=("Job", "batch"), cpu="1"))
    tainted = node("n1", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    recorder.observe(at(1000), "Node", "", "n1", tainted)
    recorder.observe(at(1010), "Node", "", "n1", None)
    recorder.observe(at(1200), "Node", "", "n0", node("n0", taints=[{"key": "karpenter.sh/disrupted",
                                                                      "effect": "NoSchedule"}]))
    recorder.observe(at(1201), "Pod", "default", "web-a", None)
    recorder.observe(at(1202), "Pod", "default", "web-c", pod("web-c", None, phase="Pending",
                                                             owner=("ReplicaSet", "web"), cpu="500m"))
    recorder.observe(at(2400), "Pod", "default", "web-c", None)
    trace = recorder.trace(at(3600), name="recorded")
    path = tmp_path / "recorded.yaml"
    path.write_text(trace_text(trace, path))
    return path, yaml.safe_load(path.read_text())


def test_a_recorded_trace_is_replayed_from_its_own_cluster_start_and_duration(tmp_path: Path) -> None:
    path, document = _recorded(tmp_path)
    kinds = [e["create"]["objects"][0]["metadata"]["name"] if "create" in e else f"depart {e['depart']['name']}"
             for e in document["events"]]
    # the moved replica (web-a, made again as web-c) is no arrival, and departs under its first name
    assert kinds == ["job-0", "job-1", "job-2", "depart job-0", "depart job-1", "depart job-2", "depart web-a"]
    assert [(c["change"], c["by"], c["node"]) for c in document["observed"]] == [
        ("launched", "karpenter", "n1"), ("removed", "karpenter", "n1")]
    result = CliRunner().invoke(app, ["backtest", "--trace", str(path), "-o", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["duration_seconds"] == 3600.0
    assert out["start"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    [baseline] = out["policies"]
    assert baseline["trace_errors"] == []
    summary = baseline["summary"]
    assert summary["pending_pods_at_end"] == 0
    assert summary["launches"] >= 1  # the Job's 3 CPUs fit on no starting node


async def test_a_departure_follows_its_replica_after_the_replay_moved_it() -> None:
    from ebb.adapters.bus import InMemoryBus
    from ebb_embedded.workload import WorkloadCluster

    docs = [nodepool(), catalog(), node("n0"), pod("web-a", "n0", owner=("ReplicaSet", "web"))]
    sim = WorkloadCluster(docs, InMemoryBus(), lambda: NOW, seed=7)
    assert (await sim.evict("default", "web-a"))[0] == "evicted"  # the policy's disruption moved it
    [now] = [k for k in sim.objects if k.startswith("Pod/default/web-")]
    assert now != "Pod/default/web-a"
    # evicted again: still the same replica
    sim.objects[now]["spec"]["nodeName"] = "n0"
    await sim.evict("default", now.split("/")[2])
    [again] = [k for k in sim.objects if k.startswith("Pod/default/web-")]
    await sim.apply(TraceEvent.model_validate({"at": 0, "depart": {"namespace": "default", "name": "web-a"}}))
    assert again not in sim.objects
    assert not [k for k in sim.objects if k.startswith("Pod/")]
    with pytest.raises(ValueError, match="depart: no Pod default/web-a"):
        await sim.apply(TraceEvent.model_validate({"at": 0, "depart": {"name": "web-a"}}))
