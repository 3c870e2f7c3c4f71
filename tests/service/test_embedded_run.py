"""The embedded mode end to end: the real planner and executor on the simulated cluster."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ebb_cli.main import app
from ebb_cli.run_cmd import _documents
from ebb_embedded.cluster import SimulatedCluster
from ebb_embedded.runner import EmbeddedOptions, Status, run_embedded
from tests.unit.builders import NOW, node, nodepool, pod

LIVE = ("proposed", "approved", "executing")


def decisions(database: Path) -> list[tuple[str, str, str, list[str]]]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, method, state, nodes FROM decisions").fetchall()
    return [(i, m, s, [n["name"] for n in json.loads(nodes)]) for i, m, s, nodes in rows]


async def test_the_bundled_example_is_consolidated_safely(tmp_path: Path) -> None:
    database = tmp_path / "ebb.sqlite"
    clusters: list[SimulatedCluster] = []
    statuses: list[Status] = []
    stop = asyncio.Event()

    def report(status: Status) -> None:
        statuses.append(status)
        if status.by_state().get("succeeded", 0) >= 3:
            stop.set()

    options = EmbeddedOptions(start=NOW, speed=120, duration=timedelta(hours=6), database=database,
                              report_every=0.05)
    summary = await asyncio.wait_for(
        run_embedded(_documents([]), options, stop, report=report, cluster_ready=clusters.append), timeout=300)
    sim = clusters[0]
    assert summary.stopped_because == "stopped", "three decisions should succeed well within six simulated hours"
    assert summary.start.nodes == 50 and summary.end.nodes < 50
    assert summary.end.cost_per_hour < summary.start.cost_per_hour
    rows = decisions(database)
    succeeded = [r for r in rows if r[2] == "succeeded"]
    assert len(succeeded) >= 3
    live_nodes = {n for _i, _m, state, nodes in rows if state in LIVE for n in nodes}
    existing = {o["metadata"]["name"] for o in sim.nodes()}
    for _id, _method, _state, nodes in succeeded:
        assert not set(nodes) & existing, "a succeeded decision's nodes are deleted"
    for obj in sim.nodes():
        taints = obj.get("spec", {}).get("taints") or []
        if any(t.get("key") == "karpenter.sh/disrupted" for t in taints):
            assert obj["metadata"]["name"] in live_nodes, "a tainted node always has a live decision"
    for obj in sim.objects.values():
        if obj["kind"] == "Pod" and obj["spec"].get("nodeName"):
            assert obj["spec"]["nodeName"] in existing, "no pod is bound to a node that is gone"
    assert sim.evictions > 0
    # every status the run reported moved forward in simulated time
    times = [s.now for s in statuses]
    assert times == sorted(times) and times[-1] - times[0] > timedelta(minutes=1)


async def test_a_cluster_with_nothing_to_do_is_stable() -> None:
    docs: list[dict[str, Any]] = [nodepool(), node("a"),
                                  pod("p", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    options = EmbeddedOptions(start=NOW, speed=600, duration=timedelta(hours=2), until_stable=True,
                              stable_for=timedelta(minutes=5))
    summary = await asyncio.wait_for(run_embedded(docs, options, asyncio.Event()), timeout=120)
    assert summary.stopped_because == "stable"
    assert summary.end.nodes == 1 and summary.end.decisions == {}
    assert summary.end.elapsed < timedelta(hours=2)


async def test_the_planner_annotates_a_drifted_node_of_the_simulated_cluster() -> None:
    # the do-not-disrupt pod keeps the drifted node: only the annotation changes
    docs: list[dict[str, Any]] = [nodepool(node_hash="new"), node("a", node_hash="old"),
                                  pod("p", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    clusters: list[SimulatedCluster] = []
    options = EmbeddedOptions(start=NOW, speed=600, duration=timedelta(hours=2), until_stable=True,
                              stable_for=timedelta(minutes=5))
    summary = await asyncio.wait_for(run_embedded(docs, options, asyncio.Event(), cluster_ready=clusters.append),
                                     timeout=120)
    assert summary.stopped_because == "stable" and summary.end.nodes == 1
    [annotated] = clusters[0].nodes()
    reason = annotated["metadata"]["annotations"].get("ebb.sh/drifted", "")
    assert "nodepool-hash old differs from NodePool default's new" in reason, annotated["metadata"]


def test_cli_runs_and_prints_a_json_summary(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--speed", "600", "--duration", "10m", "-o", "json",
                                 "--database", str(tmp_path / "db.sqlite")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["start"]["nodes"] == 50 and out["stoppedBecause"] == "duration"
    assert out["database"] == str(tmp_path / "db.sqlite")
    assert (tmp_path / "db.sqlite").is_file()
    # no terminal: progress as log lines on stderr
    assert "ebb run: 2026-11-23 " in result.stderr and "50 nodes, 500 pods" in result.stderr


def test_cli_rejects_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_duration = runner.invoke(app, ["run", "--duration", "soon"])
    assert bad_duration.exit_code == 2 and "--duration" in bad_duration.output
    missing = runner.invoke(app, ["run", "-f", str(tmp_path / "missing.yaml")])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: lots}}\n")
    invalid = runner.invoke(app, ["run", "-f", str(broken)])
    assert invalid.exit_code == 2 and "error:" in invalid.output
    # checked before any service starts: a request the simulator cannot hold is a message, not a crashed task
    huge = tmp_path / "huge.yaml"
    huge.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: '1e30'}}}]}\n")
    too_large = runner.invoke(app, ["run", "-f", str(huge)])
    assert too_large.exit_code == 2 and "Pod d/p: spec.containers[0].resources.requests.cpu" in too_large.output
    assert "too large" in too_large.output and "Traceback" not in too_large.output


async def test_the_decisions_api_serves_the_running_simulation(tmp_path: Path) -> None:
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = asyncio.Event()
    options = EmbeddedOptions(start=NOW, speed=60, duration=timedelta(hours=6), api_port=port, api_token="secret")
    run = asyncio.create_task(run_embedded(_documents([]), options, stop))
    headers = {"Authorization": "Bearer secret"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(600):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the embedded decisions-api never became ready")
            assert (await client.get("/v1/decisions")).status_code == 401
            nodes = (await client.post("/v1/plan", headers=headers, json={}))
            assert nodes.status_code == 200, nodes.text
            plan = nodes.json()
            some_node = (plan["blocked"] or [{"node": c["nodes"][0]} for c in plan["commands"]])[0]["node"]
            explain = await client.get(f"/v1/nodes/{some_node}/explain", headers=headers)
            assert explain.status_code == 200, explain.text
            assert explain.json()["node"] == some_node
            # "now" is the simulated time, not the wall clock
            assert plan["now"].startswith("2026-11-23")
            assert (await client.get("/v1/nodes/no-such-node/explain", headers=headers)).status_code == 404
    finally:
        stop.set()
        await asyncio.wait_for(run, 60)
