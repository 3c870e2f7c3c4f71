"""``ebb record --live`` against the real Karpenter (KWOK provider) on the local control plane: while a driver
plays a short workload (pods arriving, one departing, a Deployment whose pods Karpenter's consolidation moves,
the rest departing so Karpenter removes the emptied nodes), ``ebb record`` records it; the recording's pods,
requests and times match what the driver did (within the watch's latency), its node changes are Karpenter's
with their reasons, and ``ebb backtest`` on the recording replays every arrival and departure."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from ebb.core.traces import Trace
from tests.kit.karpenter_cluster import KarpenterKit
from tests.kit.system import as_body

pytestmark = pytest.mark.integration

EBB = str(Path(sys.executable).parent / "ebb")
#: how late the recording may see a change the driver made (a watch event's way through the apiserver)
LATENCY = 3.0


async def _start_recording(kubeconfig: Path, output: Path) -> tuple[asyncio.subprocess.Process, list[str]]:
    """``ebb record`` in the background, once it says it is recording; its stderr lines gathered as they come."""
    process = await asyncio.create_subprocess_exec(
        EBB, "record", "--kubeconfig", str(kubeconfig), "--duration", "10m", "--save-every", "5s",
        "-o", str(output), stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL)
    lines: list[str] = []
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), timeout=60)).decode()
        assert line, f"ebb record ended before recording: {''.join(lines)}"
        lines.append(line)
        if line.startswith("ebb record: from"):
            break

    async def drain() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            lines.append(raw.decode())

    asyncio.get_running_loop().create_task(drain())
    return process, lines


async def test_a_recording_matches_the_workload_and_replays(karpenter: KarpenterKit, tmp_path: Path) -> None:
    output = tmp_path / "recorded.yaml"
    pool = await karpenter.create_nodepool()
    process, lines = await _start_recording(karpenter.cluster.kubeconfig, output)
    done: dict[str, float] = {}  # what the driver did: "arrive <pod>" / "depart <pod>" -> when (epoch seconds)
    try:
        # a claim made during the recording (a StatefulSet's next replica's): a create in the trace, unbound
        await karpenter.core.create_namespaced_persistent_volume_claim(karpenter.namespace, as_body(
            client.V1PersistentVolumeClaim, {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-db-0"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": f"none-{karpenter.run}",
                         "resources": {"requests": {"storage": "1Gi"}}}}))
        names = await karpenter.create_pods(pool, 3, cpu="1", prefix="batch")
        done.update({f"arrive {n}": time.time() for n in names})  # created one after the other, within ~0.1 s
        await karpenter.wait_for_pods_running(names)
        await karpenter.create_deployment("web", pool, 2, cpu="2")
        done["arrive web"] = time.time()
        web = await _eventually_running(karpenter, "web", 2)
        await asyncio.sleep(2)
        await karpenter.delete_pods(names[:1])
        done[f"depart {names[0]}"] = time.time()
        await asyncio.sleep(2)
        await karpenter.delete_pods(names[1:])
        done.update({f"depart {n}": time.time() for n in names[1:]})
        await karpenter.scale_deployment("web", 0)
        done["depart web"] = time.time()
        await karpenter.wait_for_pods_gone([*names, *web])

        async def removed() -> bool:  # Karpenter's consolidation removes the emptied nodes
            return not await karpenter.nodes(pool)

        from tests.kit.waiting import eventually

        await eventually("Karpenter removing the emptied nodes", removed, within=90, interval=1)
        await asyncio.sleep(LATENCY)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)  # Ctrl-C: what was recorded is written
        code = await asyncio.wait_for(process.wait(), timeout=60)
    text = "".join(lines)
    assert code == 130, text  # stopped early, by the signal
    assert "stopped early; wrote what was recorded" in text

    trace = Trace.model_validate(yaml.safe_load(output.read_text()))
    assert trace.start is not None and trace.cluster is not None
    start = trace.start.timestamp()
    namespace = karpenter.namespace
    ours = [e for e in trace.events if (e.create and e.create.objects[0]["metadata"]["namespace"] == namespace)
            or (e.depart and e.depart.namespace == namespace)]
    arrivals = {e.create.objects[0]["metadata"]["name"]: e for e in ours
                if e.create and e.create.objects[0]["kind"] == "Pod"}
    [claim] = [o for e in ours if e.create for o in e.create.objects if o["kind"] == "PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "data-db-0" and claim["status"] == {"phase": "Pending"}
    assert claim["spec"]["storageClassName"] == f"none-{karpenter.run}" and "volumeName" not in claim["spec"]
    departures = {e.depart.name: e for e in ours if e.depart}
    web_pods = sorted(n for n in arrivals if n.startswith("web-"))
    # the pods the driver made, each once, with their owner and requests; the Deployment's two, as its ReplicaSet's
    assert sorted(n for n in arrivals if n.startswith("batch-")) == sorted(names), text
    assert len(web_pods) == 2, arrivals.keys()
    for name, arrived in arrivals.items():
        pod = arrived.create.objects[0]  # type: ignore[union-attr]
        assert pod["status"] == {"phase": "Pending"} and "nodeName" not in pod["spec"]
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert requests["cpu"] == ("2" if name.startswith("web-") else "1")
        assert "image" not in pod["spec"]["containers"][0]
        if name.startswith("web-"):
            assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    # every pod departs, once, at the time the driver ended it
    assert sorted(departures) == sorted([*names, *web_pods])
    for name in names:
        _near(arrivals[name].at, done[f"arrive {name}"] - start, name)
        _near(departures[name].at, done[f"depart {name}"] - start, name)
    for name in web_pods:
        _near(arrivals[name].at, done["arrive web"] - start, name, slack=5.0)  # the ReplicaSet's controller
        _near(departures[name].at, done["depart web"] - start, name, slack=5.0)
    assert departures[names[0]].at < departures[names[1]].at
    # the node changes are Karpenter's: launches for the pods, removals by its consolidation
    ours_nodes = [c.model_dump() for c in trace.observed if c.nodepool == pool]
    launched = [c for c in ours_nodes if c["change"] == "launched"]
    removed_nodes = [c for c in ours_nodes if c["change"] == "removed"]
    assert launched and all((c["by"], c["reason"]) == ("karpenter", "provisioning") for c in launched), ours_nodes
    assert {c["node"] for c in removed_nodes} == {c["node"] for c in launched}, ours_nodes
    assert all(c["by"] == "karpenter" and c["reason"] in ("Empty", "Underutilized") for c in removed_nodes), \
        ours_nodes

    # the back-test replays it: every arrival and departure applied, from the recording's own cluster
    result = await asyncio.to_thread(subprocess.run, [EBB, "backtest", "--trace", str(output), "-o", "json",
                                                      "-j", "1"],
                                     capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    backtest = json.loads(result.stdout)
    [baseline] = backtest["policies"]
    assert baseline["trace_errors"] == [], baseline["trace_errors"]
    assert backtest["duration_seconds"] == pytest.approx(trace.duration)
    replay_start = datetime.fromisoformat(backtest["start"].replace("Z", "+00:00"))
    assert abs((replay_start - trace.start.astimezone(UTC)).total_seconds()) < 1  # as the JSON writes it
    summary = baseline["summary"]
    # the demand is the recording's: the replay launches for it about as many nodes as Karpenter did
    assert abs(summary["launches"] - len(launched)) <= 1, (summary, ours_nodes)
    assert summary["pending_pods_at_end"] == 0
    print(f"\nrecorded: {len(launched)} launches, {len(removed_nodes)} removals by Karpenter; "
          f"replayed under karpenter-default: {summary['launches']} launches, "
          f"{sum(summary['disruptions'].values())} disruptions, node-hours cost {summary['node_hours_cost']:.4f}")


def _near(at: float, expected: float, what: str, slack: float = LATENCY) -> None:
    assert expected - 1.0 <= at <= expected + slack, f"{what}: recorded at {at:.2f}s, done at {expected:.2f}s"


async def _eventually_running(karpenter: KarpenterKit, app: str, count: int) -> list[str]:
    from tests.kit.waiting import eventually

    async def running() -> list[str] | None:
        pods = await karpenter.running_pods(app)
        return sorted(pods) if len(pods) >= count else None

    result: list[str] = await eventually(f"{count} pods of {app} Running", running, within=60)
    return result

