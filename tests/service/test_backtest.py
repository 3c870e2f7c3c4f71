"""`ebb backtest` and `ebb run --trace` end to end: the real planner and executor, the simulated provisioner and
a workload trace on the in-memory bus, in virtual time. A burst of Jobs makes the provisioner launch nodes;
when the Jobs end, Karpenter's defaults consolidate the empty nodes at once and launch again for the next
burst, while a policy with a long consolidateAfter keeps them and launches nothing more; the same input gives
the same JSON in two processes; bad trace and policy files exit 2."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ebb.core.traces import Trace
from ebb_cli.main import app
from ebb_embedded.backtest import (
    BacktestOptions,
    Policy,
    _stop_workers,
    karpenter_default,
    policy_of,
    run_backtest,
    run_backtests,
)
from tests.kit.backtest import CHURN_CONTROL, bursts, cluster
from tests.kit.builders import NOW, catalog, node, nodepool, pdb, pod, repack_cluster
from tests.kit.cli import said


def test_the_provisioner_launches_for_bursts_and_the_policies_differ_as_they_should() -> None:
    options = BacktestOptions(start=NOW, duration=timedelta(minutes=25), seed=1, sample_every=60)
    calm = policy_of("churn-control", "(test)", [CHURN_CONTROL])
    result = run_backtest(cluster(), Trace.model_validate(bursts()), [karpenter_default(), calm], options)
    default, controlled = (run["summary"] for run in result["policies"])
    series = {run["name"]: run["series"] for run in result["policies"]}

    # the first burst fits nowhere: the provisioner launches nodes, the pods are bound once they are Ready
    for summary in (default, controlled):
        assert summary["launches_by"].get("provisioner", 0) >= 1
        assert summary["peak_nodes"] > 2
        assert summary["pending_seconds_p95"] >= 60  # the new nodes' boot time
        assert summary["pending_pods_at_end"] == 0
    first_launch = next(s for s in series["karpenter-default"] if s["launches"])
    assert first_launch["t"] <= "2026-11-23T18:33:00Z"  # a minute after the burst, within the batch window

    # Karpenter's defaults: the empty nodes go as soon as the Jobs end, and the second burst launches again
    assert default["disruptions"].get("emptiness", 0) + default["disruptions"].get(
        "multi-node-consolidation", 0) + default["disruptions"].get("single-node-consolidation", 0) >= 1
    between = [s["nodes"] for s in series["karpenter-default"] if "2026-11-23T18:40:00Z" <= s["t"]
               <= "2026-11-23T18:45:00Z"]
    # back to the two original nodes or fewer: where kube-scheduler spreads the pods, the burst's nodes may hold
    # what an original node held and outlive it
    assert min(between) <= 2, "consolidated back to the original size between the bursts"
    # churn control: nothing is disrupted within 30 minutes, the second burst reuses the kept nodes
    assert controlled["disruptions"] == {} and controlled["evictions"] == 0
    assert controlled["launches"] < default["launches"]
    assert controlled["node_hours_cost"] > default["node_hours_cost"]  # what the quiet costs
    assert controlled["churn_cost"] < default["churn_cost"]

    assert result["trace"] == "two-bursts" and result["seed"] == 1 and result["duration_seconds"] == 1500
    assert [run["source"] for run in result["policies"]] == ["built in", "(test)"]
    assert len(series["churn-control"]) == 26 and series["churn-control"][0]["t"] == "2026-11-23T18:30:00Z"


#: the ConfigMap of the engine options, as a policy file may hold it
ENGINE_OPTIONS: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ebb-engine-options"},
                                  "data": {"maxReplacements": "2"}}


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def test_backtest_in_two_processes_prints_the_same_json(tmp_path: Path) -> None:
    ebb = Path(sys.executable).with_name("ebb")
    args = [str(ebb), "backtest", "-f", str(write(tmp_path / "cluster.yaml", {"kind": "List", "items": cluster()})),
            "--trace", str(write(tmp_path / "trace.yaml", bursts())),
            "--policy", str(write(tmp_path / "calm.yaml", CHURN_CONTROL)), "--start", "2026-11-23T18:30:00Z",
            "--duration", "20m", "--seed", "4", "-o", "json"]
    runs = [subprocess.Popen(args, env=os.environ | {"PYTHONHASHSEED": seed}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for seed in ("1", "2")]
    outputs = []
    for process in runs:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err.decode()
        outputs.append(out)
        assert "ebb backtest: karpenter-default: +0:00:00" in err.decode()  # no terminal: progress lines
        # whole seconds (a simulated moment between two seconds was printed "+20:35:24.999999")
        assert re.findall(r"\+\d+:\d\d:\d\d\.", err.decode()) == []
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0])
    assert [p["name"] for p in result["policies"]] == ["karpenter-default", "calm"]
    assert result["policies"][0]["summary"]["launches"] > 0


@pytest.mark.parametrize(("spec", "words"), [
    ("spot-interruptions@soon", "'soon' is not a duration like 90s"),
    ("rollout@5m", "rollout takes no period"),
    ("diurnal@0s", "the period of diurnal must be positive"),
])
def test_a_built_in_trace_with_a_bad_period_is_refused(spec: str, words: str) -> None:
    result = CliRunner().invoke(app, ["backtest", "--trace", spec, "--duration", "1m"])
    assert result.exit_code == 2 and words in said(result.output), result.output


def test_backtest_rejects_bad_trace_and_policy_files(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["backtest", "--duration", "1m", "-f", str(write(tmp_path / "c.yaml", {"kind": "List",
                                                                                  "items": cluster()}))]
    unknown = runner.invoke(app, [*base, "--trace", "tsunami"])
    assert unknown.exit_code == 2 and "neither a built-in trace" in said(unknown.output)
    bad_event = write(tmp_path / "t.yaml", {"name": "t", "events": [{"at": "later", "delete": {"kind": "Pod",
                                                                                                "name": "x"}}]})
    invalid = runner.invoke(app, [*base, "--trace", str(bad_event)])
    assert invalid.exit_code == 2 and "events.0.at" in said(invalid.output) and "not a duration" in said(invalid.output)
    node_policy = write(tmp_path / "p.yaml", nodepool())
    wrong_kind = runner.invoke(app, [*base, "--trace", "batch-bursts", "--policy", str(node_policy)])
    assert wrong_kind.exit_code == 2
    assert ("a policy holds only ebb.sh/v1 DisruptionPolicy and Hold documents, and the v1 ConfigMap "
            "ebb-engine-options") in said(wrong_kind.output)
    bad_options = tmp_path / "o.yaml"
    bad_options.write_text(json.dumps(CHURN_CONTROL) + "\n---\n"
                           + json.dumps(ENGINE_OPTIONS | {"data": {"maxReplacements": "0"}}))
    refused = runner.invoke(app, [*base, "--trace", "batch-bursts", "--policy", str(bad_options)])
    assert refused.exit_code == 2 and "maxReplacements: '0' is not a whole number" in said(refused.output)
    broken = write(tmp_path / "b.yaml", {**CHURN_CONTROL, "spec": {"consolidateAfter": "whenever"}})
    unparsable = runner.invoke(app, [*base, "--trace", "batch-bursts", "--policy", str(broken)])
    assert unparsable.exit_code == 2 and "consolidateAfter" in said(unparsable.output)


@pytest.mark.parametrize("command", ["backtest", "run"])
def test_a_trace_on_a_cluster_without_a_nodepool_is_warned_of(tmp_path: Path, command: str) -> None:
    """Nothing can launch there: the bursts' pods stay Pending, and the user hears why before the run."""
    nodes_only = [d for d in cluster() if d.get("kind") != "NodePool"]
    result = CliRunner().invoke(app, [command, "-f", str(write(tmp_path / "c.yaml", {"kind": "List",
                                                                                   "items": nodes_only})),
                                      "--trace", str(write(tmp_path / "t.yaml", bursts())), "--duration", "2m",
                                      "-o", "json"])
    assert result.exit_code == 0, result.output
    assert ("warning: the input holds no NodePool: the simulated provisioner has nowhere to launch, so the pods "
            "the trace adds that fit on no node stay Pending") in result.stderr
    with_pool = CliRunner().invoke(app, [command, "-f", str(write(tmp_path / "p.yaml", {"kind": "List",
                                                                                      "items": cluster()})),
                                         "--trace", str(write(tmp_path / "t.yaml", bursts())), "--duration", "2m",
                                         "-o", "json"])
    assert with_pool.exit_code == 0 and "no NodePool" not in with_pool.stderr


def test_backtest_writes_the_html_report(tmp_path: Path) -> None:
    pytest.importorskip("ebb_cli.report")
    runner = CliRunner()
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["backtest", "-f", str(write(tmp_path / "c.yaml", {"kind": "List",
                                                                                  "items": cluster()})),
                                 "--trace", str(write(tmp_path / "t.yaml", bursts())), "--duration", "5m",
                                 "--report", str(out), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "<html" in out.read_text().lower()
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".partial")] == []  # written whole, then renamed


@pytest.mark.parametrize(("where", "words"), [
    ("missing/report.html", "does not exist"),
    ("", "is a directory"),
])
def test_a_report_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path, where: str, words: str) -> None:
    cluster_file = write(tmp_path / "c.yaml", {"kind": "List", "items": cluster()})
    result = CliRunner().invoke(app, ["backtest", "-f", str(cluster_file), "--trace", "batch-bursts",
                                      "--duration", "1m", "--report", str(tmp_path / where)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for --report:" in said(result.output) and words in said(result.output)
    assert "node-hours" not in result.output  # nothing ran


def test_a_report_that_fails_at_the_end_keeps_the_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills (or the directory goes) while the run takes its hours: the results still come out, the error
    names the file and the cause, and the exit code is 1."""
    pytest.importorskip("ebb_cli.report")
    import errno

    from ebb_cli import backtest_cmd

    def full_disk(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(backtest_cmd, "write_whole", full_disk)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["backtest", "-f", str(write(tmp_path / "c.yaml", {"kind": "List",
                                                                                       "items": cluster()})),
                                      "--trace", str(write(tmp_path / "t.yaml", bursts())), "--duration", "5m",
                                      "--report", str(out), "-o", "json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["policies"][0]["name"] == "karpenter-default"
    assert f"error: cannot write the report to {out}: No space left on device" in result.stderr
    assert not out.exists()


def test_run_with_a_trace_grows_the_cluster(tmp_path: Path) -> None:
    runner = CliRunner()
    trace = bursts()
    trace["events"] = [e for e in trace["events"] if "scale" in e][:1]  # a burst that does not end
    result = runner.invoke(app, ["run", "-f", str(write(tmp_path / "c.yaml", {"kind": "List", "items": cluster()})),
                                 "--start", "2026-11-23T18:30:00Z", "--trace", str(write(tmp_path / "t.yaml", trace)),
                                 "--duration", "5m", "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # nodes launched for the burst (the original small ones may be consolidated onto them meanwhile)
    assert out["start"]["nodes"] == 2 and out["end"]["costPerHour"] > 2 * out["start"]["costPerHour"]
    assert out["end"]["pods"] == out["start"]["pods"] + 8 and out["end"]["pendingPods"] == 0


def test_a_trace_that_changes_a_nodepool_template_drifts_its_nodes(tmp_path: Path) -> None:
    """A trace file's patch of the NodePool's template drifts the nodes launched before it, as Karpenter's new
    nodepool-hash would: the drift method replaces them."""
    docs = [nodepool(node_hash="h1"), catalog(),
            *(node(f"n{i}", itype="t3.medium", node_hash="h1") for i in range(2)),
            *(pod(f"web-{i}", f"n{i % 2}", cpu="900m", owner=("ReplicaSet", "web-1")) for i in range(4))]
    trace = {"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "relabel", "events": [
        {"at": "2m", "patch": {"kind": "NodePool", "name": "default",
                               "merge": {"spec": {"template": {"metadata": {"labels": {"team": "data"}}}}}}}]}
    snapshot = write(tmp_path / "c.yaml", {"kind": "List", "items": docs})
    trace_file = write(tmp_path / "t.yaml", trace)
    result = CliRunner().invoke(app, ["backtest", "-f", str(snapshot), "--start", "2026-11-23T18:30:00Z",
                                      "--trace", str(trace_file), "--duration", "20m", "-o", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["policies"]
    summary = run["summary"]
    assert summary["disruptions"].get("drift", 0) >= 1, summary
    assert summary["launches_by"].get("executor", 0) >= 1 and run["trace_errors"] == []  # the replacements
    assert summary["pending_pods_at_end"] == 0


async def test_a_workload_scales_as_its_controller_would_and_evictions_follow_the_replica() -> None:
    from ebb.adapters.bus import InMemoryBus
    from ebb.core.traces import TraceEvent
    from ebb_embedded.workload import WorkloadCluster

    docs = [nodepool(), catalog(), node("n0"), pod("web-a", "n0", owner=("ReplicaSet", "web")),
            pod("web-b", None, phase="Pending", owner=("ReplicaSet", "web"))]
    sim = WorkloadCluster(docs, InMemoryBus(), lambda: NOW, seed=7)
    sim.start_measuring({"n0": 0.096})

    def web() -> list[str]:
        return sorted(k for k in sim.objects if k.startswith("Pod/default/web"))

    await sim.apply(TraceEvent.model_validate({"at": 0, "scale": {"workload": {"name": "web"}, "replicas": 4}}))
    assert len(web()) == 4 and sim.pods_waiting.is_set()
    copies = [sim.objects[k] for k in web() if k not in ("Pod/default/web-a", "Pod/default/web-b")]
    assert all(c["spec"]["containers"] == sim.objects["Pod/default/web-a"]["spec"]["containers"] for c in copies)
    # down to one: the Pending pods go first, the one running stays
    await sim.apply(TraceEvent.model_validate({"at": 0, "scale": {"workload": {"name": "web"}, "replicas": 1}}))
    assert web() == ["Pod/default/web-a"]
    # a StatefulSet's pods are numbered
    await sim.apply(TraceEvent.model_validate({"at": 0, "scale": {
        "workload": {"kind": "StatefulSet", "name": "db"}, "replicas": 2, "template": {"cpu": "100m"}}}))
    assert {"Pod/default/db-0", "Pod/default/db-1"} <= set(sim.objects)
    # evicted twice (recreated by its controller in between): one replica evicted more than once
    assert (await sim.evict("default", "web-a"))[0] == "evicted"
    (again,) = [k.split("/")[2] for k in web()]
    sim.objects[f"Pod/default/{again}"]["spec"]["nodeName"] = "n0"  # bound, as kube-scheduler would
    assert (await sim.evict("default", again))[0] == "evicted"
    assert list(sim.measures.evicted.values()) == [2]
    # a patch of a missing object is an error the trace reports
    with pytest.raises(ValueError, match="no NodePool gone"):
        await sim.apply(TraceEvent.model_validate({"at": 0, "patch": {"kind": "NodePool", "name": "gone",
                                                                       "merge": {}}}))


async def test_an_interrupt_tells_ebb_and_the_lost_nodes_pods_come_back_pending() -> None:
    from ebb.adapters.bus import InMemoryBus
    from ebb.contracts import TOPIC_INTERRUPTIONS, Interruption
    from ebb.core.traces import TraceEvent
    from ebb_embedded.workload import WorkloadCluster

    docs = [nodepool(), catalog(), node("od"), *(node(f"s{i}", capacity_type="spot") for i in range(3)),
            pod("web-a", "s0", owner=("ReplicaSet", "web")), pod("bare", "s0"),
            pod("ds", "s0", owner=("DaemonSet", "agent"))]
    bus = InMemoryBus()
    sim = WorkloadCluster(docs, bus, lambda: NOW, seed=3)
    sim.start_measuring({})
    heard: list[Interruption] = []
    stop = asyncio.Event()

    async def hear(delivery: Any) -> None:
        heard.append(delivery.message)

    listener = asyncio.create_task(bus.consume([TOPIC_INTERRUPTIONS], "test", hear, stop=stop))

    def event(**interrupt: Any) -> TraceEvent:
        return TraceEvent.model_validate({"at": 0, "interrupt": interrupt})

    await sim.apply(event(nodes=2))  # two of the three spot nodes, never the on-demand one
    await sim.apply(event(nodes=5))  # the one left: the two interrupted already are not picked again
    await sim.apply(event(node="od", kind="rebalance"))  # a recommendation: nothing will end
    await asyncio.sleep(0.1)
    stop.set()
    await listener
    by_node = {m.node: (m.kind, m.deadline) for m in heard}  # the bus delivers in order per node (its key)
    assert len(heard) == 4 and by_node == {**{name: ("spot-interruption", NOW + timedelta(minutes=2))
                                              for name in ("s0", "s1", "s2")}, "od": ("rebalance", None)}
    assert sim.measures.interruptions == 4 and sorted(name for _, _, name in sim._endings) == ["s0", "s1", "s2"]
    with pytest.raises(ValueError, match="no Ready node of capacity type spot and of NodePool other"):
        await sim.apply(event(nodepool="other"))
    with pytest.raises(ValueError, match="no Node gone"):
        await sim.apply(event(node="gone"))
    with pytest.raises(ValueError, match=r"^interrupt: no Ready node to interrupt$"):
        await WorkloadCluster([nodepool()], bus, lambda: NOW).apply(event(capacityType=None))

    # the node lost: its pods with it; the ReplicaSet's comes back Pending, the bare one and the DaemonSet's do not
    await sim.lose_node("s0")
    assert "Node//s0" not in sim.objects and sim.measures.nodes["s0"].end == NOW
    pending = [o for o in sim.pending_pods() if o["metadata"]["name"].startswith("web-")]
    assert len(pending) == 1 and "nodeName" not in pending[0]["spec"]
    assert not any(k.endswith(("/bare", "/ds")) for k in sim.objects)
    assert sim.measures.pods_lost == 2  # web-a and the bare pod; a DaemonSet pod is not the workload's
    await sim.lose_node("s0")  # gone already: nothing
    assert sim.measures.pods_lost == 2


def test_a_trace_interrupts_nodes_and_ebb_moves_their_pods_before_the_cloud_takes_them(tmp_path: Path) -> None:
    """The planner hears of an interruption and drains the node within the notice. Where PDBs refuse the drain,
    the cloud takes the node at the deadline with its pods, which come back Pending and go onto a launched node."""
    trace = {"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "spot-loss", "events": [
        {"at": "2m", "interrupt": {"node": "n0"}}, {"at": "10m", "interrupt": {"node": "n1"}}]}
    docs = [*cluster(), *(pdb(f"keep-{name}", {"app": name}, max_unavailable=0) for name in ("web-1", "web-3"))]
    args = ["backtest", "-f", str(write(tmp_path / "c.yaml", {"kind": "List", "items": docs})),
            "--start", "2026-11-23T18:30:00Z", "--trace", str(write(tmp_path / "t.yaml", trace)), "--duration", "20m"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"interruptions \(pods lost\)\s*│\s*2 \(2\)", result.stdout), result.stdout
    assert re.search(r"  interruption\s*│\s*2\s*│", result.stdout), result.stdout  # ebb's decisions
    first, second = (CliRunner().invoke(app, [*args, "-o", "json"]).stdout for _ in range(2))
    assert first == second  # deterministic, the cloud's picks and deadlines included
    (run,) = json.loads(first)["policies"]
    summary = run["summary"]
    assert run["trace_errors"] == [] and summary["interruptions"] == 2 and summary["disruptions"]["interruption"] == 2
    assert summary["pods_lost"] == 2  # n1's two pods; n0's were evicted in time
    assert summary["pending_pods_at_end"] == 0 and summary["launches_by"]["provisioner"] >= 1


@pytest.mark.parametrize("command", ["backtest", "run"])
def test_traces_run_together_and_events_not_applied_are_told(tmp_path: Path, command: str) -> None:
    """``--trace`` repeated runs the traces as one; events the cluster cannot apply are named on stderr (the
    first three, then a count), not only in the JSON."""
    typos = {"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "typos", "events": [
        {"at": "1m", "patch": {"kind": "NodePool", "name": "genral", "merge": {"spec": {"weight": 3}}}},
        {"at": "2m", "interrupt": {"nodepool": "nope"}},
        {"at": "3m", "delete": {"kind": "Pod", "namespace": "default", "name": "nobody"}},
        {"at": "4m", "interrupt": {"node": "nobody"}}]}
    snapshot = write(tmp_path / "c.yaml", {"kind": "List", "items": cluster()})
    result = CliRunner().invoke(app, [command, "-f", str(snapshot), "--start", "2026-11-23T18:30:00Z",
                                      "--trace", str(write(tmp_path / "b.yaml", bursts())),
                                      "--trace", str(write(tmp_path / "t.yaml", typos)),
                                      "--trace", "spot-interruptions@1h",  # on-demand nodes only: none applied
                                      "--duration", "5m", "-o", "json"])
    assert result.exit_code == 0, result.output
    who = "karpenter-default, seed 0: " if command == "backtest" else ""
    assert (f"warning: {who}4 trace event(s) not applied: at 60s: patch: no NodePool genral; at 120s: interrupt: no "
            "Ready node of capacity type spot and of NodePool nope to interrupt; at 180s: delete: no Pod "
            "default/nobody (and 1 more)") in result.stderr
    out = json.loads(result.stdout)
    if command == "backtest":
        (run,) = out["policies"]
        assert out["trace"] == "two-bursts+typos+spot-interruptions@1h" and len(run["trace_errors"]) == 4
        assert run["trace_errors"][3] == "at 240s: interrupt: no Node nobody"
        assert run["summary"]["launches_by"]["provisioner"] >= 1  # the bursts' trace ran too
    else:
        assert out["end"]["pods"] == out["start"]["pods"] + 8  # the first burst, the typos' events skipped


@pytest.mark.parametrize("name", ["churn-control.yaml", "price-threshold.yaml", "demand-window.yaml",
                                  "spot-demand-window.yaml"])
def test_the_example_policies_load_and_govern_every_nodepool(name: str) -> None:
    import yaml

    from ebb.core.snapshot import parse_documents
    from ebb_embedded.backtest import apply_policy

    path = Path(__file__).resolve().parents[2] / "examples" / "backtest" / name
    text = path.read_text()
    policy = policy_of(name, text, yaml.safe_load_all(text))
    snap = parse_documents(apply_policy([nodepool(), nodepool("batch"), nodepool("spot"), catalog()], policy))
    specs = {doc["metadata"]["name"]: doc["spec"] for doc in yaml.safe_load_all(text)}
    assert sorted(p.name for p in snap.nodepools) == ["batch", "default", "spot"]
    for pool in snap.nodepools:
        spec = specs.get(pool.name, specs["*"])  # one named after the NodePool wins over "*"
        assert pool.policy_kind == "DisruptionPolicy"
        assert pool.minimum_price_improvement_percent == spec.get("minimumPriceImprovementPercent", 0)
        assert pool.demand_window == {None: None, "35m": 2100.0}[spec.get("demandWindow")]


def test_a_policy_file_may_hold_the_engine_options_its_planner_takes() -> None:
    """The ConfigMap ebb-engine-options beside the DisruptionPolicies: the run's planner takes its keys (here, merges
    that may launch two nodes), as the deployed planner takes that object; a file without it takes none."""
    policy = policy_of("repack", "text", [CHURN_CONTROL, ENGINE_OPTIONS])
    assert policy.engine_options == {"maxReplacements": "2"}
    assert [d["kind"] for d in policy.documents] == ["DisruptionPolicy"]
    assert policy_of("plain", "text", [CHURN_CONTROL]).engine_options is None


def test_every_example_policy_file_is_a_policy() -> None:
    import yaml

    examples = Path(__file__).resolve().parents[2] / "examples" / "backtest"
    files = sorted(p for p in examples.glob("*.yaml") if p.name != "trace.yaml")
    policies = {p.stem: policy_of(p.stem, p.read_text(), yaml.safe_load_all(p.read_text())) for p in files}
    assert "repack" in policies and policies["repack"].engine_options == {"maxReplacements": "2"}
    assert policies["optimizer"].engine_options == {"consolidationSearch": "optimizer"}
    assert all(p.documents for p in policies.values())


def test_a_policy_with_several_replacements_back_tests_with_them() -> None:
    """Six $1.00 nodes of 2 cpu with a 1300m pod each, where a "two" ($1.50/h, 4 cpu) holds three of the pods: with one
    replacement the run merges three nodes at a time; the policy whose engine options allow two repacks all six in one
    command onto two nodes. Both end at $3.00/h."""
    docs = repack_cluster()
    at_once = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": "*"},
               "spec": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}}
    options = BacktestOptions(start=NOW, duration=timedelta(minutes=5), sample_every=30.0)
    trace = Trace.model_validate({"name": "still", "events": []})
    result = run_backtest(docs, trace, [policy_of("one", "text", [at_once]),
                                        policy_of("two", "text", [at_once, ENGINE_OPTIONS])], options)
    runs = {p["name"]: p for p in result["policies"]}
    assert runs["one"]["series"][-1]["cost_per_hour"] == pytest.approx(3.0)
    assert runs["two"]["series"][-1]["cost_per_hour"] == pytest.approx(3.0)
    commands = {name: [d for d in run["decisions"] if d["action"] == "replace"] for name, run in runs.items()}
    assert [len(d["nodes"]) for d in commands["one"]] == [3, 3]
    assert [len(d["nodes"]) for d in commands["two"]] == [6]


def test_apply_policy_gives_every_nodepool_the_star_policy_unless_one_is_named_after_it() -> None:
    import copy

    from ebb_embedded.backtest import apply_policy

    own = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": "*"}, "spec": {}}
    batch = {**CHURN_CONTROL, "metadata": {"name": "batch", "labels": {"team": "x"}}, "spec": {"budgets": []}}
    documents = [nodepool(), nodepool("batch"), nodepool("gpu"), catalog(), own]
    policy = Policy("p", "", (CHURN_CONTROL, batch))
    before = copy.deepcopy((documents, policy.documents))
    out = apply_policy(documents, policy)
    policies = {d["metadata"]["name"]: d for d in out if d["kind"] == "DisruptionPolicy"}
    assert sorted(policies) == ["batch", "default", "gpu"]  # the cluster's own "*" is gone
    assert policies["default"]["spec"] == policies["gpu"]["spec"] == CHURN_CONTROL["spec"]
    assert policies["batch"] == batch  # the one named after its NodePool wins over "*"
    assert policies["default"]["metadata"] is not policies["gpu"]["metadata"]
    assert (documents, policy.documents) == before  # neither input is changed


def _run(seed: int, *summaries: tuple[str, float, int, int]) -> dict[str, Any]:
    """A run_backtest result with only what across_seeds reads: (name, cost, launches, emptiness decisions)."""
    return {"seed": seed, "policies": [
        {"name": name, "summary": {"node_hours_cost": cost, "launches": launches,
                                   "disruptions": {"emptiness": deletes}, "evictions": 10 * deletes,
                                   "pods_evicted_more_than_once": 0}}
        for name, cost, launches, deletes in summaries]}


def test_across_seeds_sums_up_each_policy_and_compares_it_with_the_baseline_per_seed() -> None:
    from ebb_embedded.backtest import across_seeds

    runs = [_run(0, ("karpenter-default", 100.0, 10, 10), ("calm", 104.0, 5, 5)),
            _run(1, ("karpenter-default", 110.0, 20, 20), ("calm", 110.0, 16, 16)),
            _run(2, ("karpenter-default", 90.0, 0, 0), ("calm", 95.0, 1, 0))]
    summed = across_seeds(runs)
    assert summed["seeds"] == [0, 1, 2] and summed["baseline"] == "karpenter-default"
    default, calm = summed["policies"]["karpenter-default"], summed["policies"]["calm"]
    assert default["churn"] == {"mean": 20.0, "min": 0, "max": 40}
    assert default["node_hours_cost"] == {"mean": 100.0, "min": 90.0, "max": 110.0}
    assert "against_baseline" not in default
    assert calm["churn"] == {"mean": 14.3333, "min": 1, "max": 32}
    against = calm["against_baseline"]
    assert against["churn_percent"] == [-50.0, -20.0, None]  # seed 2: the baseline had no churn at all
    assert against["cost_percent"] == [4.0, 0.0, 5.56]
    assert against["churn_percent_spread"] == {"mean": -35.0, "min": -50.0, "max": -20.0}
    with pytest.raises(ValueError, match="same policies"):
        across_seeds([runs[0], _run(1, ("karpenter-default", 1.0, 1, 1), ("other", 1.0, 1, 1))])
    with pytest.raises(ValueError, match="no runs"):
        across_seeds([])


def test_backtest_over_several_seeds(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["backtest", "-f", str(write(tmp_path / "c.yaml", {"kind": "List", "items": cluster()})),
            "--policy", str(write(tmp_path / "calm.yaml", CHURN_CONTROL)), "--trace", "batch-bursts",
            "--start", "2026-11-23T18:30:00Z", "--duration", "20m", "--seed", "3", "--seeds", "2"]
    result = runner.invoke(app, [*base, "-o", "json"])
    assert result.exit_code == 0, result.output
    one_by_one = runner.invoke(app, [*base, "-o", "json", "--jobs", "1"])
    assert one_by_one.exit_code == 0, one_by_one.output
    assert one_by_one.stdout == result.stdout  # the four runs in two processes, or one after the other
    summed = json.loads(result.stdout)
    assert [run["seed"] for run in summed["runs"]] == [3, 4]
    assert summed["across_seeds"]["seeds"] == [3, 4]
    assert list(summed["across_seeds"]["policies"]) == ["karpenter-default", "calm"]
    launches = [run["policies"][1]["summary"]["launches"] for run in summed["runs"]]
    assert summed["across_seeds"]["policies"]["calm"]["launches"] == {
        "mean": round(sum(launches) / 2, 4), "min": min(launches), "max": max(launches)}
    table = runner.invoke(app, base)
    assert table.exit_code == 0
    assert "churn against the baseline" in said(table.output) and "seeds 3-4" in said(table.output)
    refused = runner.invoke(app, [*base, "--report", str(tmp_path / "r.html")])
    assert refused.exit_code == 2 and "--report draws one run" in said(refused.output)


def test_runs_spread_over_processes_give_what_they_give_one_after_the_other() -> None:
    trace = Trace.model_validate(bursts())
    runs = [(trace, BacktestOptions(start=NOW, duration=timedelta(minutes=20), seed=s, sample_every=60))
            for s in (5, 6)]
    policies = [karpenter_default(), policy_of("churn-control", "(test)", [CHURN_CONTROL])]
    seen: dict[tuple[int, str], list[float]] = {}

    def report(seed_index: int, policy: Policy, status: Any) -> None:
        seen.setdefault((seed_index, policy.name), []).append(status.elapsed.total_seconds())

    spread = run_backtests(cluster(), runs, policies, jobs=2, report=report)
    alone = run_backtests(cluster(), runs, policies, jobs=1)
    assert spread == alone
    assert [r["seed"] for r in spread] == [5, 6]
    assert [[p["name"] for p in r["policies"]] for r in spread] == [["karpenter-default", "churn-control"]] * 2
    assert spread[0]["policies"][0] == run_backtest(cluster(), trace, policies[:1], runs[0][1])["policies"][0]
    # every run's progress came back from its worker, in order, to the end
    assert set(seen) == {(i, p.name) for i in (0, 1) for p in policies}
    for elapsed in seen.values():
        assert elapsed == sorted(elapsed) and elapsed[0] == 0 and elapsed[-1] >= 1200


PRELOAD_CHECK = """
import importlib, json, sys
from datetime import timedelta
from ebb.core.traces import Trace
import ebb_embedded.backtest as backtest
from tests.kit.backtest import bursts, cluster
from tests.kit.builders import NOW
light = set(sys.modules)
from ebb_embedded import BACKTEST_WORKER_MODULES
for name in BACKTEST_WORKER_MODULES:
    importlib.import_module(name)
preloaded = set(sys.modules)
backtest.run_policy(cluster(), Trace.model_validate(bursts()), backtest.karpenter_default(),
                    backtest.BacktestOptions(start=NOW, duration=timedelta(minutes=2)))
ours = ("ebb", "ebb_", "alembic", "sqlalchemy", "aiosqlite")
print(json.dumps({"runner_in_parent": "ebb_embedded.runner" in light, "alembic_in_parent": "alembic" in light,
                  "imported_by_the_run": sorted(m for m in set(sys.modules) - preloaded if m.startswith(ours))}))
"""


def test_the_parent_is_ready_without_the_embedded_mode_and_the_workers_preload_all_a_run_imports() -> None:
    """The process that hands out the runs imports ``ebb_embedded.backtest`` without the embedded mode (its runner,
    SQLAlchemy, Alembic: about a second), and ``BACKTEST_WORKER_MODULES``, which the server the workers are forked
    from imports once, hold everything a run imports: a run after them imports no module of ebb's or its store's."""
    out = subprocess.run([sys.executable, "-c", PRELOAD_CHECK], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parents[2], check=False)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"runner_in_parent": False, "alembic_in_parent": False, "imported_by_the_run": []}


def test_a_run_that_fails_in_a_worker_is_raised_here() -> None:
    broken = Policy("broken", "(test)", ({**CHURN_CONTROL, "spec": {"consolidateAfter": "whenever"}},))
    runs = [(Trace.model_validate(bursts()), BacktestOptions(start=NOW, duration=timedelta(minutes=20)))]
    with pytest.raises(ValueError, match="consolidateAfter"):
        run_backtests(cluster(), runs, [karpenter_default(), broken], jobs=2)


def _forever() -> None:
    time.sleep(3600)


def test_stopping_the_workers_ends_the_runs_under_way() -> None:
    pool = concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"))
    futures = [pool.submit(_forever) for _ in range(3)]  # two under way, one waiting
    while not any(f.running() for f in futures):
        time.sleep(0.05)
    processes = list(pool._processes.values())
    assert processes
    try:
        _stop_workers(pool)
        for process in processes:
            process.join(timeout=30)
            assert not process.is_alive()
        # the pool's manager thread cancels the waiting run (or fails it, the pool broken) after shutdown returns
        # (not `concurrent.futures.wait`: it does not count a future cancelled that way as done)
        deadline = time.monotonic() + 30
        while not futures[2].done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert futures[2].cancelled() or futures[2].done()
    finally:
        for process in processes:  # whatever happened, no sleeper is left to hold the test run's exit
            process.kill()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_backtest_leaves_no_worker_running(tmp_path: Path, signum: int) -> None:
    """SIGTERM (or Ctrl-C's SIGINT) to the command alone: it says so and exits, and its worker processes with it."""
    ebb = Path(sys.executable).with_name("ebb")
    args = [str(ebb), "backtest", "--trace", "batch-bursts", "--duration", "24h", "--jobs", "2",
            "--policy", str(write(tmp_path / "calm.yaml", CHURN_CONTROL)), "-o", "json"]
    # SIGINT as a terminal leaves it (a test run started in the background may have it ignored, and the
    # command would inherit that), in a process group of its own: the workers are in it
    default_sigint = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.argv[1], sys.argv[1:])")
    process = subprocess.Popen([sys.executable, "-c", default_sigint, *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stderr is not None
    started: set[str] = set()
    for line in process.stderr:  # both runs under way, each in its worker
        started |= {name for name in ("karpenter-default", "calm") if f"ebb backtest: {name}: +0:00:00" in line}
        if len(started) == 2:
            break
    assert len(started) == 2
    process.send_signal(signum)
    assert process.wait(timeout=120) == 128 + signum
    said_last = process.stderr.read()
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    assert f"ebb backtest: {word}; the runs were stopped and nothing was written" in said_last
    assert "Traceback" not in said_last
    for _ in range(300):  # the group empties once the workers are gone
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("worker processes were left running")


def test_the_nodes_boot_time_is_the_clouds_a_fixed_time_or_a_spread() -> None:
    """BacktestOptions.boot_seconds: the burst's pods wait for their new nodes as long as those take to boot (plus
    the provisioner's batch window), a fixed time or one drawn per node between the two bounds."""
    trace = Trace.model_validate(bursts())
    waits = {}
    for boot in ((30.0, 30.0), (90.0, 90.0), (30.0, 90.0)):
        options = BacktestOptions(start=NOW, duration=timedelta(minutes=12), seed=1, sample_every=60,
                                  boot_seconds=boot[0], boot_seconds_max=boot[1])
        (run,) = run_backtest(cluster(), trace, [karpenter_default()], options)["policies"]
        assert run["summary"]["launches_by"].get("provisioner", 0) >= 1
        waits[boot] = run["summary"]["pending_seconds_p95"]
    assert 30 <= waits[(30.0, 30.0)] < 60 <= 90 <= waits[(90.0, 90.0)] < 120
    assert waits[(30.0, 30.0)] <= waits[(30.0, 90.0)] <= waits[(90.0, 90.0)]


def test_a_recorded_statefulset_replica_runs_in_the_replay_with_its_claim_bound_where_it_runs(tmp_path: Path) -> None:
    """A StatefulSet scaled up during a recording: its new claim (seen first) and its new pod. The recording creates
    both (the claim unbound); the replay's cluster binds the claim where kube-scheduler puts the pod, so the pod runs
    (with its claim missing it would wait Pending all along), and a consolidation moves it only in that zone."""
    from ebb.core.recording import Recorder
    from tests.kit.builders import pvc, storage_class

    start = [nodepool(), catalog(), node("a", zone="us-east-1a"), node("b", zone="us-east-1b"), storage_class(),
             pod("web", "a", cpu="300m")]
    made = pvc("data-db-1", None)
    replica = {**pod("db-1", None, cpu="300m", owner=("StatefulSet", "db"), claims=("data-db-1",)),
               "status": {"phase": "Pending"}}
    recorder = Recorder(start=NOW, documents=start)
    for at, obj in ((5, made), (6, replica)):
        meta = obj["metadata"]
        recorder.observe(NOW + timedelta(seconds=at), obj["kind"], meta.get("namespace", ""), meta["name"], obj)
    trace = recorder.trace(NOW + timedelta(minutes=10), name="recorded")
    path = tmp_path / "recorded.json"
    path.write_text(trace.model_dump_json(exclude_none=True))
    result = CliRunner().invoke(app, ["backtest", "--trace", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["policies"]
    assert run["trace_errors"] == [] and run["summary"]["pending_pods_at_end"] == 0, run["summary"]
    assert run["summary"]["pending_pod_seconds"] < 60
