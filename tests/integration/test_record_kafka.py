"""``ebb record --from-kafka`` on a real broker: the recording a deployed ebb makes without the apiserver, from
the cluster-watcher's compacted topic (the start) and what is published on it after (the changes, at their
publish time), with ebb's own decision steps naming who removed a node and why. SIGTERM (a pod stopped) writes
what was recorded."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from ebb.adapters.bus import KafkaBus
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_EVENTS, ClusterObject, DisruptionEvent
from ebb.core.traces import Trace
from tests.kit.builders import node, nodepool, pod
from tests.kit.servers import KafkaServer

pytestmark = pytest.mark.integration

EBB = str(Path(sys.executable).parent / "ebb")


def upsert(obj: dict[str, Any]) -> ClusterObject:
    meta = obj["metadata"]
    return ClusterObject(kind=obj["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                         resource_version="1", object=obj)


def gone(kind: str, namespace: str, name: str) -> ClusterObject:
    return ClusterObject(kind=kind, namespace=namespace, name=name, resource_version="2", object=None)


async def test_a_recording_from_the_watchers_topic(kafka_server: KafkaServer, tmp_path: Path) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    output = tmp_path / "week.yaml"
    async with KafkaBus(kafka_server.bootstrap, prefix=prefix) as bus:
        for obj in (nodepool(), node("n0"), pod("web-a", "n0", owner=("ReplicaSet", "web"))):
            await bus.publish(TOPIC_CLUSTER_OBJECTS, upsert(obj))
        process = await asyncio.create_subprocess_exec(
            EBB, "record", "--from-kafka", kafka_server.bootstrap, "--topic-prefix", prefix, "--duration", "5m",
            "--save-every", "2s", "-o", str(output), stderr=asyncio.subprocess.PIPE)
        lines: list[str] = []
        assert process.stderr is not None
        while not lines or not lines[-1].startswith("ebb record: from"):
            line = (await asyncio.wait_for(process.stderr.readline(), timeout=60)).decode()
            assert line, "".join(lines)
            lines.append(line)
        await asyncio.sleep(3)  # its consumer joined
        done: dict[str, float] = {}
        done["arrive"] = time.time()
        await bus.publish(TOPIC_CLUSTER_OBJECTS, upsert(pod("job-0", None, phase="Pending", owner=("Job", "j"))))
        await asyncio.sleep(1)
        done["launch"] = time.time()
        await bus.publish(TOPIC_CLUSTER_OBJECTS, upsert(node("n1")))
        await asyncio.sleep(1)
        await bus.publish(TOPIC_DISRUPTION_EVENTS, DisruptionEvent.step(
            "d-1", "n1", "Tainted", "emptiness: the node is empty", datetime.now(UTC)))
        done["depart"] = time.time()
        await bus.publish(TOPIC_CLUSTER_OBJECTS, gone("Pod", "default", "job-0"))
        await asyncio.sleep(1)
        done["remove"] = time.time()
        await bus.publish(TOPIC_CLUSTER_OBJECTS, gone("Node", "", "n1"))
        await asyncio.sleep(4)  # a save after the last change
        process.send_signal(signal.SIGTERM)
        stderr = "".join(lines) + (await asyncio.wait_for(process.stderr.read(), timeout=60)).decode()
        code = await process.wait()
    assert code == 130, stderr
    trace = Trace.model_validate(yaml.safe_load(output.read_text()))
    assert trace.start is not None
    start = trace.start.timestamp()
    assert sorted(d["metadata"]["name"] for d in trace.cluster or []) == ["default", "n0", "web-a"]
    events = [(e.create.objects[0]["metadata"]["name"] if e.create else e.depart.name if e.depart else "", e.at)
              for e in trace.events]
    assert [name for name, _ in events] == ["job-0", "job-0"]
    (_, arrived), (_, departed) = events
    assert abs(arrived - (done["arrive"] - start)) < 1.0
    assert abs(departed - (done["depart"] - start)) < 1.0
    assert [(c.node, c.change, c.by, c.reason) for c in trace.observed] == [
        ("n1", "launched", "karpenter", "provisioning"), ("n1", "removed", "ebb", "Empty")]
    assert abs(trace.observed[1].at - (done["remove"] - start)) < 1.0
