"""The interruption-ingester against a real moto SQS and a real Kafka (interruption in
docs/architecture.md#decision-semantics): nodes on ebb.cluster.objects, a spot interruption warning, a
stopping state change, a rebalance recommendation and a garbage message on the queue → three Interruptions on
ebb.interruptions (CloudEvents, keyed by node, decoded with the contracts codec), the garbage counted, and the
queue empty afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiobotocore.session import get_session

from ebb.adapters.bus import Delivery, KafkaBus
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_INTERRUPTIONS, ClusterObject, Interruption
from ebb_interruption_ingester import app
from ebb_interruption_ingester.ingester import Metrics
from ebb_interruption_ingester.settings import Settings
from tests.kit.servers import AwsEndpoint, KafkaServer

pytestmark = pytest.mark.integration

T = datetime(2026, 11, 21, 13, 0, tzinfo=UTC)


def event(detail_type: str, detail: dict[str, Any]) -> str:
    return json.dumps({"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": "aws.ec2",
                       "account": "123456789012", "time": T.isoformat().replace("+00:00", "Z"),
                       "region": "us-east-1", "resources": [], "detail": detail})


def node(name: str, instance: str) -> ClusterObject:
    return ClusterObject(kind="Node", namespace="", name=name, resource_version="1",
                         object={"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                 "spec": {"providerID": f"aws:///us-east-1a/{instance}"}})


async def test_ingester_moves_interruptions_from_sqs_to_kafka(
    aws_endpoint: AwsEndpoint, kafka_server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", aws_endpoint.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", aws_endpoint.secret_access_key)
    run = uuid.uuid4().hex[:8]
    prefix = f"ii{run}."
    spot_i, stop_i, rebalance_i = (f"i-{run}{n:09x}" for n in (1, 2, 3))
    async with get_session().create_client(
        "sqs", endpoint_url=aws_endpoint.endpoint_url, region_name=aws_endpoint.region
    ) as sqs, KafkaBus(kafka_server.bootstrap, prefix=prefix, poll_timeout=0.1) as bus:
        for name, instance in (("spot-node", spot_i), ("stopping-node", stop_i), ("rebalance-node", rebalance_i)):
            await bus.publish(TOPIC_CLUSTER_OBJECTS, node(f"{name}-{run}", instance))
        queue_url = (await sqs.create_queue(QueueName=f"ebb-interruptions-{run}"))["QueueUrl"]
        for body in (
            event("EC2 Spot Instance Interruption Warning", {"instance-id": spot_i, "instance-action": "terminate"}),
            event("EC2 Instance State-change Notification", {"instance-id": stop_i, "state": "stopping"}),
            event("EC2 Instance Rebalance Recommendation", {"instance-id": rebalance_i}),
            "<<< definitely not an EventBridge event >>>",
        ):
            await sqs.send_message(QueueUrl=queue_url, MessageBody=body)

        settings = Settings(queue_url=queue_url, region=aws_endpoint.region, endpoint_url=aws_endpoint.endpoint_url,
                            kafka_bootstrap=kafka_server.bootstrap, topic_prefix=prefix, wait_time_seconds=1,
                            metrics_port=0)
        metrics = Metrics()
        stop = asyncio.Event()
        ingester = asyncio.create_task(app.run(settings, stop, metrics=metrics))

        received: list[Delivery] = []

        async def collect(delivery: Delivery) -> None:
            received.append(delivery)

        consumer_stop = asyncio.Event()
        consumer = asyncio.create_task(bus.consume([TOPIC_INTERRUPTIONS], f"check-{run}", collect, stop=consumer_stop))
        try:
            deadline = asyncio.get_running_loop().time() + 20
            while len(received) < 3 or metrics.count("malformed") < 1:
                assert not ingester.done(), ingester.exception()
                assert asyncio.get_running_loop().time() < deadline, (received, metrics.count("malformed"))
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            consumer_stop.set()
            await asyncio.wait_for(ingester, 10)
            await asyncio.wait_for(consumer, 10)

        got = {d.key: d for d in received}
        assert set(got) == {f"spot-node-{run}", f"stopping-node-{run}", f"rebalance-node-{run}"}
        for delivery in received:
            assert delivery.type == "sh.ebb.interruption.received.v1"
            assert delivery.source == "/ebb/interruption-ingester"
            assert isinstance(delivery.message, Interruption)
        spot = got[f"spot-node-{run}"].message
        stopping = got[f"stopping-node-{run}"].message
        rebalance = got[f"rebalance-node-{run}"].message
        assert isinstance(spot, Interruption) and isinstance(stopping, Interruption)
        assert isinstance(rebalance, Interruption)
        assert (spot.kind, spot.instance_id, spot.deadline) == ("spot-interruption", spot_i, T + timedelta(minutes=2))
        assert (stopping.kind, stopping.instance_id, stopping.detail, stopping.instance_state) == (
            "state-change", stop_i, "state=stopping", "stopping")
        assert (rebalance.kind, rebalance.instance_id, rebalance.deadline) == ("rebalance", rebalance_i, None)
        assert metrics.count("published") == 3 and metrics.count("malformed") == 1 and metrics.count("failed") == 0

        # every message was deleted: nothing visible, nothing in flight
        attributes = (await sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        ))["Attributes"]
        assert attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
        assert (await sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0)).get("Messages", []) == []
        await sqs.delete_queue(QueueUrl=queue_url)


async def test_python_m_logs_json_and_exits_0_on_sigterm(
    aws_endpoint: AwsEndpoint, kafka_server: KafkaServer
) -> None:
    run = uuid.uuid4().hex[:8]
    instance = f"i-{run}000000001"
    async with get_session().create_client(
        "sqs", endpoint_url=aws_endpoint.endpoint_url, region_name=aws_endpoint.region,
        aws_access_key_id=aws_endpoint.access_key_id, aws_secret_access_key=aws_endpoint.secret_access_key,
    ) as sqs, KafkaBus(kafka_server.bootstrap, prefix=f"iim{run}.") as bus:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, node(f"node-{run}", instance))
        queue_name = f"ebb-interruptions-main-{run}"
        queue_url = (await sqs.create_queue(QueueName=queue_name))["QueueUrl"]
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": aws_endpoint.access_key_id,
            "AWS_SECRET_ACCESS_KEY": aws_endpoint.secret_access_key,
            "EBB_INTERRUPTION_INGESTER_QUEUE_NAME": queue_name,
            "EBB_INTERRUPTION_INGESTER_REGION": aws_endpoint.region,
            "EBB_INTERRUPTION_INGESTER_ENDPOINT_URL": aws_endpoint.endpoint_url,
            "EBB_INTERRUPTION_INGESTER_KAFKA_BOOTSTRAP": kafka_server.bootstrap,
            "EBB_INTERRUPTION_INGESTER_TOPIC_PREFIX": f"iim{run}.",
            "EBB_INTERRUPTION_INGESTER_METRICS_PORT": "0",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ebb_interruption_ingester", env=env, stderr=asyncio.subprocess.PIPE
        )
        assert process.stderr is not None
        lines: list[dict[str, Any]] = []

        async def wait_for(event_name: str) -> dict[str, Any]:
            assert process.stderr is not None
            while True:
                raw = await asyncio.wait_for(process.stderr.readline(), 20)
                assert raw, f"the process ended before logging {event_name!r}: {lines}"
                line = json.loads(raw)  # every line is one JSON object
                lines.append(line)
                if line.get("event") == event_name:
                    return line

        try:
            await wait_for("interruption-ingester starting")
            await sqs.send_message(QueueUrl=queue_url, MessageBody=event(
                "EC2 Spot Instance Interruption Warning", {"instance-id": instance, "instance-action": "terminate"}))
            published = await wait_for("interruption published")
            assert published["node"] == f"node-{run}" and published["level"] == "info"
            assert "timestamp" in published and published["logger"] == "ebb_interruption_ingester"
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        remaining = await asyncio.wait_for(process.stderr.read(), 15)
        assert await asyncio.wait_for(process.wait(), 15) == 0, remaining.decode()
        assert b"interruption-ingester stopped" in remaining
        await sqs.delete_queue(QueueUrl=queue_url)
