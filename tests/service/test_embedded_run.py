"""The embedded mode end to end: the real planner and executor on the simulated cluster, in virtual time: a run
is deterministic (two processes print the same JSON and write the same decisions), a pace changes nothing but
the real time it takes, and the duration is exact."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ebb_cli.common import snapshot_documents
from ebb_cli.main import app
from ebb_embedded.cluster import SimulatedCluster
from ebb_embedded.runner import RUN_GC_THRESHOLD, EmbeddedOptions, run_embedded, simulate, simulation_runner
from ebb_embedded.status import Status
from tests.kit.builders import NOW, node, nodepool, pdb, pod
from tests.kit.cli import said

LIVE = ("proposed", "approved", "executing")


def small_cluster() -> list[dict[str, Any]]:
    """Nine m5.large nodes, one empty and eight with two 300m pods each under a PDB that lets two of the 16
    go at a time: emptiness, multi- and single-node consolidation, PDB refusals and retries, in about six
    simulated minutes and a few real seconds."""
    docs = [nodepool(), pdb("web", {"app": "web"}, min_available=14), node("empty")]
    for i in range(8):
        docs.append(node(f"n{i}"))
        docs.extend(pod(f"web-{i}-{j}", f"n{i}", cpu="300m", memory="512Mi", labels={"app": "web"}) for j in range(2))
    return docs


def decisions(database: Path) -> list[tuple[str, str, str, list[str]]]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, method, state, nodes FROM decisions").fetchall()
    return [(i, m, s, [n["name"] for n in json.loads(nodes)]) for i, m, s, nodes in rows]


def test_the_bundled_example_is_consolidated_safely(tmp_path: Path) -> None:
    database = tmp_path / "ebb.sqlite"
    clusters: list[SimulatedCluster] = []
    statuses: list[Status] = []
    stop = asyncio.Event()

    def report(status: Status) -> None:
        statuses.append(status)
        states = status.by_state()  # a replacement launched by a drain still running costs before its node goes
        if states.get("succeeded", 0) >= 3 and not states.get("executing", 0):
            stop.set()

    options = EmbeddedOptions(start=NOW, duration=timedelta(hours=6), database=database, report_every=0.05)
    summary = simulate(snapshot_documents([]), options, stop, report=report, cluster_ready=clusters.append)
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
    # every status the run reported moved forward in simulated time, past the 15 s validation delay at least
    times = [s.now for s in statuses]
    assert times == sorted(times) and times[-1] - times[0] > timedelta(seconds=15)


def test_a_cluster_with_nothing_to_do_is_stable() -> None:
    docs: list[dict[str, Any]] = [nodepool(), node("a"),
                                  pod("p", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    options = EmbeddedOptions(start=NOW, duration=timedelta(hours=2), until_stable=True,
                              stable_for=timedelta(minutes=5))
    summary = simulate(docs, options)
    assert summary.stopped_because == "stable"
    assert summary.end.nodes == 1 and summary.end.decisions == {}
    # the first pass at once, then 5 minutes without a change, seen at the next look (every 5 simulated seconds)
    assert timedelta(minutes=5) <= summary.end.elapsed <= timedelta(minutes=5, seconds=options.look_every)


def test_the_planner_annotates_a_drifted_node_of_the_simulated_cluster() -> None:
    # the do-not-disrupt pod keeps the drifted node: only the annotation changes
    docs: list[dict[str, Any]] = [nodepool(node_hash="new"), node("a", node_hash="old"),
                                  pod("p", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    clusters: list[SimulatedCluster] = []
    options = EmbeddedOptions(start=NOW, duration=timedelta(hours=2), until_stable=True,
                              stable_for=timedelta(minutes=5))
    summary = simulate(docs, options, cluster_ready=clusters.append)
    assert summary.stopped_because == "stable" and summary.end.nodes == 1
    [annotated] = clusters[0].nodes()
    reason = annotated["metadata"]["annotations"].get("ebb.sh/drifted", "")
    assert "nodepool-hash old differs from NodePool default's new" in reason, annotated["metadata"]


def test_cli_runs_and_prints_a_json_summary(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--duration", "2m", "-o", "json", "--seed", "3", "--pass-cost", "2s",
                                 "--database", str(tmp_path / "db.sqlite")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["start"]["nodes"] == 50 and out["stoppedBecause"] == "duration"
    # the duration of simulated time, whatever the passes cost in real time; a computation running when it is over
    # (a pass or a validation, 2 s of simulated time each here) ends first
    assert out["simulated"] in ("0h02m00s", "0h02m01s", "0h02m02s")
    assert out["start"]["time"] == "2026-11-23T18:30:00Z"
    assert "2026-11-23T18:32:00Z" <= out["end"]["time"] <= "2026-11-23T18:32:02Z"
    assert out["database"] == str(tmp_path / "db.sqlite")
    assert (tmp_path / "db.sqlite").is_file()
    # no terminal: progress as log lines on stderr
    assert "ebb run: 2026-11-23 " in result.stderr and "50 nodes, 500 pods" in result.stderr


def test_cli_rejects_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_duration = runner.invoke(app, ["run", "--duration", "soon"])
    assert bad_duration.exit_code == 2 and "--duration" in said(bad_duration.output)
    bad_cost = runner.invoke(app, ["run", "--pass-cost", "-1s"])
    assert bad_cost.exit_code == 2 and "--pass-cost" in said(bad_cost.output)
    bad_speed = runner.invoke(app, ["run", "--speed", "0"])
    assert bad_speed.exit_code == 2 and "--speed" in said(bad_speed.output)
    missing = runner.invoke(app, ["run", "-f", str(tmp_path / "missing.yaml")])
    assert missing.exit_code == 2 and "cannot read" in said(missing.output)
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: lots}}\n")
    invalid = runner.invoke(app, ["run", "-f", str(broken)])
    assert invalid.exit_code == 2 and "error:" in said(invalid.output)
    # checked before any service starts: a request the simulator cannot hold is a message, not a crashed task
    huge = tmp_path / "huge.yaml"
    huge.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: '1e30'}}}]}\n")
    too_large = runner.invoke(app, ["run", "-f", str(huge)])
    assert too_large.exit_code == 2 and "Pod d/p: spec.containers[0].resources.requests.cpu" in said(too_large.output)
    assert "too large" in said(too_large.output) and "Traceback" not in too_large.output


async def test_the_decisions_api_serves_the_running_simulation(tmp_path: Path) -> None:
    """The run paced at x60 on its own thread and loop (as `ebb run --api-port` on the CLI's), asked from here
    over HTTP in real time."""
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = asyncio.Event()
    loops: list[asyncio.AbstractEventLoop] = []
    summaries: list[Any] = []
    options = EmbeddedOptions(start=NOW, speed=60, duration=timedelta(hours=6), api_port=port, api_token="secret")
    run = threading.Thread(target=lambda: summaries.append(simulate(
        snapshot_documents([]), options, stop, cluster_ready=lambda _c: loops.append(asyncio.get_running_loop()))))
    run.start()
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
            # the embedded planner publishes its passes while the API is served: the answer is the planner's pass
            assert explain.json()["source"] == "planner-pass" and explain.json()["pass"]["at"].startswith("2026-11-23")
            # "now" is the simulated time, not the wall clock
            assert plan["now"].startswith("2026-11-23")
            assert (await client.get("/v1/nodes/no-such-node/explain", headers=headers)).status_code == 404
    finally:
        if loops:
            loops[0].call_soon_threadsafe(stop.set)
        await asyncio.to_thread(run.join, 60)
    assert not run.is_alive() and summaries and summaries[0].stopped_because == "stopped"


def test_run_embedded_refuses_a_loop_without_virtual_time() -> None:
    async def main() -> None:
        await run_embedded([nodepool()], EmbeddedOptions(start=NOW), asyncio.Event())

    with pytest.raises(RuntimeError, match="VirtualTimeLoop"):
        asyncio.run(main())


def _summary_and_decisions(options: EmbeddedOptions, database: Path) -> tuple[str, list[tuple[Any, ...]]]:
    from ebb_cli.run_cmd import _summary_json

    summary = simulate(small_cluster(), options)
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, method, state, nodes, created_at, approved_at, finished_at FROM decisions "
                          "ORDER BY id").fetchall()
    return json.dumps(_summary_json(summary) | {"database": None}), rows


def test_a_pace_changes_nothing_but_the_real_time_a_run_takes(tmp_path: Path) -> None:
    duration = timedelta(minutes=6)
    fast = EmbeddedOptions(start=NOW, duration=duration, database=tmp_path / "fast.sqlite")
    fast_result = _summary_and_decisions(fast, tmp_path / "fast.sqlite")
    paced = EmbeddedOptions(start=NOW, duration=duration, database=tmp_path / "paced.sqlite", speed=90)
    began = time.monotonic()
    paced_result = _summary_and_decisions(paced, tmp_path / "paced.sqlite")
    paced_took = time.monotonic() - began
    assert paced_result == fast_result
    # decisions were made and carried out (no longer counting the proposals to delete a replacement while its
    # decision still ran, rejected at validation: the planner leaves such a node alone now)
    assert sum(1 for row in fast_result[1] if row[2] == "succeeded") >= 4, "decisions were made and carried out"
    assert paced_took >= duration.total_seconds() / 90, "x90: at least 4 real seconds for 6 simulated minutes"


def test_the_decision_ids_come_from_the_seed(tmp_path: Path) -> None:
    rows_of = []
    for seed in (1, 2):
        database = tmp_path / f"{seed}.sqlite"
        _summary, rows = _summary_and_decisions(
            EmbeddedOptions(start=NOW, duration=timedelta(minutes=1), database=database, seed=seed), database)
        assert rows and all(r[0].startswith("dec-") and len(r[0]) == 36 for r in rows)
        rows_of.append(rows)
    assert {r[0] for r in rows_of[0]}.isdisjoint({r[0] for r in rows_of[1]})


def test_the_same_run_in_two_processes_prints_the_same_json_and_makes_the_same_decisions(tmp_path: Path) -> None:
    """`ebb run` twice, in two processes with different string hashing (PYTHONHASHSEED), at the same time on
    this machine's two cores: byte-identical `-o json`, and the same decisions (ids, methods, nodes, states,
    times) and timelines (event ids, phases, times, details) in the two databases."""
    ebb = Path(sys.executable).with_name("ebb")
    cluster = tmp_path / "cluster.yaml"  # JSON is YAML
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": small_cluster()}))
    runs = []
    for name, hash_seed in (("a", "1"), ("b", "2")):
        workdir = tmp_path / name
        workdir.mkdir()
        env = os.environ | {"PYTHONHASHSEED": hash_seed}
        runs.append((workdir, subprocess.Popen(
            [str(ebb), "run", "-f", str(cluster), "--start", "2026-11-23T18:30:00Z", "--duration", "8m",
             "--seed", "5", "-o", "json", "--database", "ebb.sqlite"],
            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    outputs, decisions_of = [], []
    for workdir, process in runs:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err.decode()
        outputs.append(out)
        with sqlite3.connect(workdir / "ebb.sqlite") as db:
            decisions_of.append(db.execute(
                "SELECT id, method, reason, state, nodes, replacements, created_at, approved_at, finished_at "
                "FROM decisions ORDER BY created_at, id").fetchall()
                # in the order recorded; the ids of the steps that may happen more than once per node (Launching,
                # WaitingReadiness) are random UUIDs (ebb.contracts.messages.event_id), the others derived
                + db.execute("SELECT id, decision_id, CASE WHEN type IN ('Launching', 'WaitingReadiness') THEN NULL "
                             "ELSE event_id END, type, node, at, detail FROM decision_events ORDER BY id").fetchall())
    assert outputs[0] == outputs[1]
    summary = json.loads(outputs[0])
    assert summary["simulated"] == "0h08m00s" and summary["nodesDeleted"] > 0 and summary["evictionsRefused"] > 0
    assert decisions_of[0] == decisions_of[1]
    assert len(decisions_of[0]) >= 20, "decisions and their timelines"


def test_a_run_sets_the_garbage_collector_for_itself_and_back() -> None:
    """`simulation_runner`: during the run the objects made before it are frozen out of the collector's sight and
    the youngest generation is collected less often; afterwards both are as they were."""
    import gc

    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    before_run = [object() for _ in range(3)]  # some objects that exist when the run starts
    seen: list[tuple[int, int]] = []

    async def look() -> None:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))

    with simulation_runner(EmbeddedOptions(start=NOW, duration=timedelta(minutes=1))) as runner:
        runner.run(look())
    assert seen == [(RUN_GC_THRESHOLD, seen[0][1])] and seen[0][1] > frozen + len(before_run)
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0
