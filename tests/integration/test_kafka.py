"""Kafka 4 (KRaft): a CloudEvent in binary content mode (ce_ headers, JSON data) makes the round
trip through a real broker with aiokafka."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary_event, to_binary_event
from cloudevents.core.v1.event import CloudEvent

from tests.kit.servers import KafkaServer

pytestmark = pytest.mark.integration


async def test_cloudevent_binary_mode_round_trip(kafka_server: KafkaServer) -> None:
    topic = f"ebb.smoke.{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_server.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()

    event = CloudEvent(
        {
            "type": "sh.ebb.node.finding.v1",
            "source": "/ebb/smoke-test",
            "subject": "node-a",
            "datacontenttype": "application/json",
        },
        {"node": "node-a", "finding": "Drifted", "reason": "ami changed"},
    )
    message = to_binary_event(event)
    assert message.headers["ce_type"] == b"sh.ebb.node.finding.v1"

    producer = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value=message.value, key=b"node-a", headers=list(message.headers.items()))
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_server.bootstrap,
        group_id=f"ebb-smoke-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), timeout=60)
        await consumer.commit()
    finally:
        await consumer.stop()

    headers = dict(record.headers)
    assert {"ce_specversion", "ce_id", "ce_type", "ce_source", "ce_subject"} <= headers.keys()
    assert record.key == b"node-a"
    assert json.loads(record.value) == {"node": "node-a", "finding": "Drifted", "reason": "ami changed"}

    received = from_binary_event(KafkaMessage(headers=headers, key=record.key, value=record.value))
    assert received.get_id() == event.get_id()
    assert received.get_type() == "sh.ebb.node.finding.v1"
    assert received.get_subject() == "node-a"
    assert received.get_data() == event.get_data()
