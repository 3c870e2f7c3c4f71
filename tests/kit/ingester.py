"""The interruption-ingester's test doubles: a fake SQS queue (``FakeSqs``: long polls, visibility, scripted
failures), the EventBridge messages it carries as SQS bodies, the Node objects that map instances to nodes, the
interruptions the ingester publishes, and its settings with short backoffs. Shared by the ingester's service
tests, the health tests and the fuzzing of its records."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from ebb.adapters.backoff import Backoff
from ebb.adapters.bus import InMemoryBus
from ebb.contracts import TOPIC_INTERRUPTIONS, ClusterObject, Interruption, from_kafka
from ebb_interruption_ingester.settings import Settings

#: the ingester's backoff in these tests: short, so that a failure is retried at once
FAST = Backoff(initial=0.01, maximum=0.02)
#: instance ids: three of known nodes, one of no node
I1, I2, I3, UNKNOWN = "i-00000000000000001", "i-00000000000000002", "i-00000000000000003", "i-0000000000000dead"


def ec2_event(event_id: str, detail_type: str, detail: dict[str, Any]) -> str:
    return json.dumps({"id": event_id, "source": "aws.ec2", "detail-type": detail_type,
                       "time": "2026-11-21T13:00:00Z", "detail": detail})


def spot(instance: str, event_id: str = "ev-spot") -> str:
    return ec2_event(event_id, "EC2 Spot Instance Interruption Warning",
                     {"instance-id": instance, "instance-action": "terminate"})


class FakeSqs:
    """An SQS queue in memory: receive hands out messages not in flight (a message received and not
    deleted becomes visible again on the next receive, like an expired visibility timeout); an empty
    receive waits (long poll) until a message is sent. ``failures`` are raised by the next calls."""

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}
        self.receives: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.receive_failures: list[Exception] = []
        self.delete_failures: list[Exception] = []
        #: raised by the next GetQueueUrl calls
        self.url_failures: list[Exception] = []
        #: GetQueueAttributes (the readiness probe) fails while set
        self.down = False
        self.arrived = asyncio.Event()
        self._next = 0

    def send(self, body: str) -> str:
        self._next += 1
        message_id = f"m-{self._next}"
        self.messages[message_id] = body
        self.arrived.set()
        return message_id

    async def get_queue_url(self, **kwargs: Any) -> dict[str, Any]:
        if self.url_failures:
            raise self.url_failures.pop(0)
        return {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/123456789012/{kwargs['QueueName']}"}

    async def get_queue_attributes(self, **kwargs: Any) -> dict[str, Any]:
        if self.down:
            raise ConnectionError("SQS is away")
        return {"Attributes": {"QueueArn": "arn:aws:sqs:us-east-1:123456789012:q"}}

    async def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        self.receives.append(kwargs)
        if self.receive_failures:
            raise self.receive_failures.pop(0)
        if not self.messages:
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), kwargs["WaitTimeSeconds"] or 0.001)
        batch = list(self.messages.items())[: kwargs["MaxNumberOfMessages"]]
        return {"Messages": [{"MessageId": i, "ReceiptHandle": f"rh-{i}", "Body": b} for i, b in batch]}

    async def delete_message(self, **kwargs: Any) -> dict[str, Any]:
        if self.delete_failures:
            raise self.delete_failures.pop(0)
        message_id = kwargs["ReceiptHandle"].removeprefix("rh-")
        self.messages.pop(message_id)
        self.deleted.append(message_id)
        return {}


def node(name: str, instance: str | None, zone: str = "us-east-1a") -> ClusterObject:
    spec = {"providerID": f"aws:///{zone}/{instance}"} if instance else {}
    return ClusterObject(kind="Node", namespace="", name=name, resource_version="1",
                         object={"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec})


def interruptions(bus: InMemoryBus) -> list[Interruption]:
    out = []
    for r in sorted(bus.records(TOPIC_INTERRUPTIONS), key=lambda r: (r.partition, r.offset)):
        message = from_kafka(r.topic, r.key, r.value, r.headers)
        assert isinstance(message, Interruption)
        assert r.key == message.node.encode()
        out.append(message)
    return out


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"queue_url": "https://sqs.example/q", "wait_time_seconds": 1, "metrics_port": 0,
                              "backoff_initial_seconds": 0.01, "backoff_max_seconds": 0.02, **overrides}
    return Settings(**values)
