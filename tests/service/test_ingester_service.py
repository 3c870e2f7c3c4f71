"""The interruption-ingester's loop and composition root on the InMemoryBus and a fake SQS client:
messages become Interruptions on ebb.interruptions keyed by node (the node found by providerID in the
snapshot of ebb.cluster.objects), THEN are deleted; garbage, foreign and irrelevant messages are counted
and deleted; a failed publish leaves the message on the queue and its redelivery republishes the same
ids; SQS errors back off and recover; stop cancels a long poll; settings."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from ebb.adapters.aws.eventbridge import Ignored, Notice
from ebb.adapters.aws.sqs import SqsQueue
from ebb.adapters.bus import InMemoryBus
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, TOPIC_INTERRUPTIONS, ClusterObject, Message
from ebb_interruption_ingester import app
from ebb_interruption_ingester.ingester import Ingester, Metrics, message_type
from ebb_interruption_ingester.nodes import MappingLookup, StoreLookup, index_objects
from ebb_interruption_ingester.settings import Settings
from tests.kit.ingester import FAST, I1, I2, I3, UNKNOWN, FakeSqs, ec2_event, interruptions, node, settings, spot
from tests.kit.waiting import eventually

T = datetime(2026, 11, 21, 13, 0, tzinfo=UTC)


def state(instance: str, value: str) -> str:
    return ec2_event(f"ev-{value}", "EC2 Instance State-change Notification", {"instance-id": instance, "state": value})


def rebalance(instance: str) -> str:
    return ec2_event("ev-rebalance", "EC2 Instance Rebalance Recommendation", {"instance-id": instance})


def health(*instances: str) -> str:
    return json.dumps({"id": "ev-health", "source": "aws.health", "detail-type": "AWS Health Event",
                       "time": "2026-11-21T13:00:00Z",
                       "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
                                  "eventTypeCode": "AWS_EC2_INSTANCE_STOP_SCHEDULED",
                                  "startTime": "2026-11-23T08:00:00Z",
                                  "affectedEntities": [{"entityValue": i} for i in instances]}})


class FlakyBus(InMemoryBus):
    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def publish(self, topic: str, message: Message) -> None:
        if topic == TOPIC_INTERRUPTIONS and self.failures:
            self.failures -= 1
            raise ConnectionError("broker down")
        await super().publish(topic, message)


async def test_app_publishes_then_deletes_and_counts_everything() -> None:
    bus = InMemoryBus()
    for message in (node("node-a", I1), node("node-b", I2), node("node-c", I3), node("no-provider", None)):
        await bus.publish(TOPIC_CLUSTER_OBJECTS, message)
    sqs = FakeSqs()
    sent = {
        "spot": sqs.send(spot(I1)),
        "health": sqs.send(health(I2, UNKNOWN)),
        "stopping": sqs.send(state(I3, "stopping")),
        "running": sqs.send(state(I3, "running")),
        "rebalance": sqs.send(rebalance(I2)),
        "unknown": sqs.send(spot(UNKNOWN, "ev-unknown")),
        "garbage": sqs.send("}}} not json"),
        "foreign": sqs.send(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent"})),
    }
    metrics = Metrics()
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(app.run(settings(), stop, bus=bus, sqs=sqs, metrics=metrics, started=started))
    await asyncio.wait_for(started.wait(), 5)
    await eventually("the queue emptied", lambda: not sqs.messages, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)

    assert sorted(sqs.deleted) == sorted(sent.values())
    got = {(m.node, m.kind): m for m in interruptions(bus)}
    assert set(got) == {("node-a", "spot-interruption"), ("node-b", "scheduled-change"), ("node-c", "state-change"),
                        ("node-b", "rebalance")}
    assert got["node-a", "spot-interruption"].deadline == T + timedelta(minutes=2)
    assert got["node-a", "spot-interruption"].instance_id == I1
    assert got["node-a", "spot-interruption"].detail == "instance-action=terminate"
    assert got["node-b", "scheduled-change"].deadline == datetime(2026, 11, 23, 8, tzinfo=UTC)
    assert got["node-c", "state-change"].deadline == T and got["node-c", "state-change"].detail == "state=stopping"
    assert got["node-b", "rebalance"].deadline is None
    assert {r: metrics.count(r) for r in ("published", "unknown_node", "irrelevant", "malformed", "foreign",
                                          "failed")} == {
        "published": 4, "unknown_node": 1, "irrelevant": 1, "malformed": 1, "foreign": 1, "failed": 0}
    assert metrics.registry.get_sample_value("ebb_interruption_unknown_instances_total") == 2
    assert metrics.registry.get_sample_value("ebb_interruptions_published_total", {"kind": "rebalance"}) == 1
    # Karpenter's AWS provider's metrics: every parsed message by Karpenter's kind (the malformed one is not
    # counted), every deletion, and the time on the queue of each message acted on
    received = {kind: metrics.registry.get_sample_value("ebb_interruption_received_messages_total",
                                                        {"message_type": kind})
                for kind in ("spot_interrupted", "scheduled_change", "instance_stopped", "rebalance_recommendation",
                             "no_op", "instance_terminated")}
    assert received == {"spot_interrupted": 2, "scheduled_change": 1, "instance_stopped": 1,
                        "rebalance_recommendation": 1, "no_op": 2, "instance_terminated": None}
    assert metrics.registry.get_sample_value("ebb_interruption_deleted_messages_total") == 8
    assert metrics.registry.get_sample_value("ebb_interruption_message_queue_duration_seconds_count") == 5
    assert (metrics.registry.get_sample_value("ebb_interruption_message_queue_duration_seconds_sum") or 0) > 0
    first = sqs.receives[0]
    assert first == {"QueueUrl": "https://sqs.example/q", "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}


async def test_publish_before_delete_and_redelivery_keeps_ids() -> None:
    bus = FlakyBus(failures=1)
    sqs = FakeSqs()
    message_id = sqs.send(health(I1, I2))
    metrics = Metrics()
    queue = SqsQueue(sqs, "q", wait_time_seconds=0)
    ingester = Ingester(queue, bus, MappingLookup({I1: "node-a", I2: "node-b"}), metrics=metrics, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(ingester.run(stop))
    await eventually("the message deleted", lambda: message_id in sqs.deleted, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)
    assert metrics.count("failed") == 1 and metrics.count("published") == 1
    # received twice (the failed attempt and its redelivery), deleted once
    assert metrics.registry.get_sample_value("ebb_interruption_received_messages_total",
                                             {"message_type": "scheduled_change"}) == 2
    assert metrics.registry.get_sample_value("ebb_interruption_deleted_messages_total") == 1
    published = interruptions(bus)
    assert sorted(m.node for m in published) == ["node-a", "node-b"]
    # the same message again (SQS redelivers at least once): the same ids, so consumers apply them once
    again = InMemoryBus()
    sqs.send(health(I1, I2))
    stop2 = asyncio.Event()
    task2 = asyncio.create_task(Ingester(SqsQueue(sqs, "q", wait_time_seconds=0), again,
                                         MappingLookup({I1: "node-a", I2: "node-b"}), backoff=FAST).run(stop2))
    await eventually("the queue emptied", lambda: not sqs.messages, 5, interval=0.01)
    stop2.set()
    await asyncio.wait_for(task2, 3)
    assert {m.id for m in interruptions(again)} == {m.id for m in published}


async def test_message_is_not_deleted_while_publishing_fails() -> None:
    bus = FlakyBus(failures=10**6)
    sqs = FakeSqs()
    message_id = sqs.send(spot(I1))
    metrics = Metrics()
    ingester = Ingester(SqsQueue(sqs, "q", wait_time_seconds=0), bus, MappingLookup({I1: "node-a"}),
                        metrics=metrics, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(ingester.run(stop))
    await eventually("three failed publishes", lambda: metrics.count("failed") >= 3, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)
    assert sqs.deleted == [] and message_id in sqs.messages
    assert interruptions(bus) == []


async def test_sqs_errors_back_off_and_recover() -> None:
    bus = InMemoryBus()
    sqs = FakeSqs()
    sqs.receive_failures = [ConnectionError("endpoint unreachable"), RuntimeError("throttled")]
    sqs.delete_failures = [ConnectionError("reset")]
    sqs.send(spot(I1))
    metrics = Metrics()
    ingester = Ingester(SqsQueue(sqs, "q", wait_time_seconds=0), bus, MappingLookup({I1: "node-a"}),
                        metrics=metrics, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(ingester.run(stop))
    await eventually("the queue emptied", lambda: not sqs.messages, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)
    assert metrics.registry.get_sample_value("ebb_interruption_sqs_errors_total") == 3
    # the delete failed once: the message came back and was published again, with the same id
    published = interruptions(bus)
    assert len(published) == 2 and len({m.id for m in published}) == 1


async def test_stop_cancels_a_long_poll() -> None:
    sqs = FakeSqs()
    ingester = Ingester(SqsQueue(sqs, "q", wait_time_seconds=20), InMemoryBus(), MappingLookup({}), backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(ingester.run(stop))
    await eventually("a long poll", lambda: len(sqs.receives) == 1, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert sqs.receives[0]["WaitTimeSeconds"] == 20


async def test_nodes_arriving_after_start_are_found_and_queue_name_is_resolved() -> None:
    bus = InMemoryBus()
    sqs = FakeSqs()
    metrics = Metrics()
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(app.run(settings(queue_url="", queue_name="ebb-interruptions"), stop, bus=bus,
                                       sqs=sqs, metrics=metrics, started=started))
    await asyncio.wait_for(started.wait(), 5)
    await bus.publish(TOPIC_CLUSTER_OBJECTS, node("late-node", I3, zone="us-east-1c"))
    await asyncio.sleep(0.05)
    sqs.send(rebalance(I3))
    await eventually("one interruption published", lambda: metrics.count("published") == 1, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)
    assert [m.node for m in interruptions(bus)] == ["late-node"]
    assert sqs.receives[0]["QueueUrl"].endswith("/ebb-interruptions")


def test_index_prefers_nodes_over_nodeclaims() -> None:
    pairs = [
        ("Node//a", {"metadata": {"name": "a"}, "spec": {"providerID": f"aws:///z/{I1}"}}),
        ("NodeClaim//c1", {"status": {"nodeName": "stale", "providerID": f"aws:///z/{I1}"}}),
        ("NodeClaim//c2", {"status": {"nodeName": "b", "providerID": f"aws:///z/{I2}"}}),
        ("NodeClaim//c3", {"status": {"providerID": f"aws:///z/{I3}"}}),
        ("Node//k", {"metadata": {"name": "k"}, "spec": {"providerID": "kwok://k"}}),
        ("Pod/default/p", {"metadata": {"name": "p"}, "spec": {"providerID": f"aws:///z/{I3}"}}),
    ]
    assert index_objects(pairs) == {I1: "a", I2: "b"}


def test_a_nodeclaim_of_another_instance_under_a_nodes_name_maps_nothing() -> None:
    """The node's name was used before: the older instance's NodeClaim still names it. An interruption of that
    instance is not the node's (its own instance runs on), so it maps to no node; the node's own instance does."""
    pairs = [
        ("Node//a", {"metadata": {"name": "a"}, "spec": {"providerID": f"aws:///z/{I1}"}}),
        ("NodeClaim//before", {"status": {"nodeName": "a", "providerID": f"aws:///z/{I2}"}}),
        ("NodeClaim//now", {"status": {"nodeName": "a", "providerID": f"aws:///z/{I1}"}}),
        ("NodeClaim//young", {"status": {"nodeName": "not-registered", "providerID": f"aws:///z/{I3}"}}),
    ]
    assert index_objects(pairs) == {I1: "a", I3: "not-registered"}


def test_store_lookup_follows_the_store() -> None:
    from ebb.adapters.snapshot_store import SnapshotStore

    store = SnapshotStore(bundled_catalog=[])
    lookup = StoreLookup(store)
    assert lookup.node_for(I1) is None
    store.apply(node("node-a", I1))
    assert lookup.node_for(I1) == "node-a"
    store.apply(ClusterObject(kind="Node", namespace="", name="node-a", resource_version="2", object=None))
    assert lookup.node_for(I1) is None


def test_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_INTERRUPTION_INGESTER_QUEUE_NAME", "interruptions")
    monkeypatch.setenv("EBB_INTERRUPTION_INGESTER_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("EBB_INTERRUPTION_INGESTER_WAIT_TIME_SECONDS", "2")
    s = Settings()
    assert (s.queue_name, s.endpoint_url, s.wait_time_seconds, s.max_messages) == (
        "interruptions", "http://127.0.0.1:5000", 2, 10)
    s.require_queue()
    with pytest.raises(ValueError, match="QUEUE_URL or"):
        Settings(queue_name="").require_queue()
    with pytest.raises(ValidationError):
        Settings(wait_time_seconds=21)
    with pytest.raises(ValidationError):
        Settings(max_messages=11)
    monkeypatch.delenv("EBB_INTERRUPTION_INGESTER_WAIT_TIME_SECONDS")
    assert Settings(queue_name="").wait_time_seconds == 20
    with pytest.raises(ValueError, match="max_messages"):
        SqsQueue(FakeSqs(), "q", max_messages=0)


@pytest.mark.parametrize(("parsed", "kind"), [
    (Notice("spot-interruption", (I1,), T, "", None, T), "spot_interrupted"),
    (Notice("capacity-reservation-interruption", (I1,), T, "", None, T), "capacity_reservation_interrupted"),
    (Notice("rebalance", (I1,), None, "", None, T), "rebalance_recommendation"),
    (Notice("scheduled-change", (I1,), T, "", None, T), "scheduled_change"),
    (Notice("state-change", (I1,), T, "", None, T, "stopping"), "instance_stopped"),
    (Notice("state-change", (I1,), T, "", None, T, "stopped"), "instance_stopped"),
    (Notice("state-change", (I1,), T, "", None, T, "shutting-down"), "instance_terminated"),
    (Notice("state-change", (I1,), T, "", None, T, "terminated"), "instance_terminated"),
    (Notice("state-change", (I1,), T, "", None, T, "running"), "no_op"),
    (Ignored("irrelevant", "a state change to running"), "no_op"),
    (Ignored("foreign", "an S3 test event"), "no_op"),
    (Ignored("malformed", "not JSON"), None),
])
def test_message_types_are_karpenters_kinds(parsed: Notice | Ignored, kind: str | None) -> None:
    """karpenter-provider-aws pkg/controllers/interruption/messages: a message's Kind() is its message_type."""
    assert message_type(parsed) == kind
