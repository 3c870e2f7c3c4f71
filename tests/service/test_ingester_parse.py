"""The EventBridge parser of the interruption-ingester (ebb.adapters.aws.eventbridge), table-driven: each
message kind, malformed JSON, missing and mistyped fields, foreign sources; the provider id → instance id
rule. Pure: no I/O."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ebb.adapters.aws import Ignored, Notice, instance_id_of_provider_id, parse_message
from tests.kit.eventbridge import HEALTH, I1, I2, SPOT, event

T = datetime(2026, 11, 21, 13, 0, tzinfo=UTC)


REBALANCE = event("EC2 Instance Rebalance Recommendation", {"instance-id": I2})


def state(value: Any) -> dict[str, Any]:
    return event("EC2 Instance State-change Notification", {"instance-id": I1, "state": value})


def without(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(doc))
    target = copy
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return copy


def with_(doc: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(doc))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy


NOTICES = [
    ("spot", SPOT, "spot-interruption", (I1,), T + timedelta(minutes=2), "instance-action=terminate"),
    ("spot stop action", with_(SPOT, "stop", "detail", "instance-action"), "spot-interruption", (I1,),
     T + timedelta(minutes=2), "instance-action=stop"),
    ("health scheduled change, instances only, deduplicated", HEALTH, "scheduled-change", (I1, I2),
     datetime(2026, 11, 21, 15, 30, tzinfo=UTC), "eventTypeCode=AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"),
    ("health ISO start time", with_(HEALTH, "2026-11-22T01:00:00+01:00", "detail", "startTime"), "scheduled-change",
     (I1, I2), datetime(2026, 11, 22, 0, 0, tzinfo=UTC), "eventTypeCode=AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"),
    ("stopping", state("stopping"), "state-change", (I1,), T, "state=stopping"),
    ("stopped", state("stopped"), "state-change", (I1,), T, "state=stopped"),
    ("shutting-down", state("shutting-down"), "state-change", (I1,), T, "state=shutting-down"),
    ("terminated", state("terminated"), "state-change", (I1,), T, "state=terminated"),
    ("rebalance", REBALANCE, "rebalance", (I2,), None, "rebalance recommendation"),
    # Karpenter's AWS provider drains and deletes such a node as a spot interruption (CapacityReservationInterruption)
    ("capacity reservation interruption",
     event("EC2 Capacity Reservation Instance Interruption Warning",
           {"instance-id": I1, "instance-action": "terminate"}),
     "capacity-reservation-interruption", (I1,), T + timedelta(minutes=2), "instance-action=terminate"),
    ("time without offset is UTC", with_(SPOT, "2026-11-21T13:00:00", "time"), "spot-interruption", (I1,),
     T + timedelta(minutes=2), "instance-action=terminate"),
]


@pytest.mark.parametrize(("name", "doc", "kind", "ids", "deadline", "detail"), NOTICES, ids=[n[0] for n in NOTICES])
def test_notices(name: str, doc: dict[str, Any], kind: str, ids: tuple[str, ...], deadline: datetime | None,
                 detail: str) -> None:
    for body in (json.dumps(doc), json.dumps(doc).encode()):
        result = parse_message(body)
        assert isinstance(result, Notice), result
        assert (result.kind, result.instance_ids, result.deadline, result.detail) == (kind, ids, deadline, detail)
        # the state is a value of its own (what decides), not read back out of the detail text
        assert result.instance_state == (detail.removeprefix("state=") if kind == "state-change" else None)
        assert result.event_id == doc["id"]
        assert result.time == datetime.fromisoformat(doc["time"]).replace(tzinfo=UTC)


def test_a_scheduled_change_without_a_start_time_is_acted_on_with_no_deadline() -> None:
    """Karpenter's AWS provider does not read startTime: the instances are retired all the same; when is unknown."""
    result = parse_message(json.dumps(without(HEALTH, "detail", "startTime")))
    assert isinstance(result, Notice), result
    assert (result.kind, result.instance_ids, result.deadline) == ("scheduled-change", (I1, I2), None)
    bad = parse_message(json.dumps(with_(HEALTH, "soon", "detail", "startTime")))
    assert isinstance(bad, Ignored) and bad.reason == "malformed" and "detail.startTime" in bad.why


def test_an_event_without_a_time_is_taken_as_sent_when_received() -> None:
    """The spot warning's two minutes count from its receipt where it says no time (Karpenter acts on it all the
    same); a time that is not one is still malformed."""
    received = T + timedelta(seconds=7)
    result = parse_message(json.dumps(without(SPOT, "time")), received=received)
    assert isinstance(result, Notice), result
    assert (result.kind, result.time, result.deadline) == ("spot-interruption", received,
                                                           received + timedelta(minutes=2))
    bad = parse_message(json.dumps(with_(SPOT, "yesterday", "time")), received=received)
    assert isinstance(bad, Ignored) and bad.reason == "malformed"


def test_event_id_is_optional() -> None:
    result = parse_message(json.dumps(without(SPOT, "id")))
    assert isinstance(result, Notice) and result.event_id is None


IGNORED = [
    # malformed: not JSON, not an object
    ("not JSON", "{not json", "malformed", "not JSON"),
    ("invalid UTF-8", b"\xff\xfe{}", "malformed", "not JSON"),
    ("empty body", "", "malformed", "not JSON"),
    ("JSON array", "[1, 2]", "malformed", "JSON list"),
    ("JSON string", '"hello"', "malformed", "JSON str"),
    # malformed: subscribed events with missing or mistyped fields
    ("spot without detail", without(SPOT, "detail"), "malformed", "detail is missing"),
    ("spot detail not an object", with_(SPOT, "x", "detail"), "malformed", "detail is missing or not an object"),
    ("spot without instance id", without(SPOT, "detail", "instance-id"), "malformed", "detail.instance-id"),
    ("spot instance id not a string", with_(SPOT, 42, "detail", "instance-id"), "malformed", "detail.instance-id"),
    ("spot instance id not EC2", with_(SPOT, "vol-1", "detail", "instance-id"), "malformed", "not an EC2 instance"),
    ("spot action not a string", with_(SPOT, 1, "detail", "instance-action"), "malformed", "instance-action"),
    ("spot without time", without(SPOT, "time"), "malformed", "time is missing"),
    ("spot bad time", with_(SPOT, "yesterday", "time"), "malformed", "not a timestamp"),
    ("spot id not a string", with_(SPOT, 7, "id"), "malformed", "id is not"),
    ("state without state", without(state("stopping"), "detail", "state"), "malformed", "detail.state"),
    ("state not a string", state(["stopping"]), "malformed", "detail.state"),
    ("rebalance without instance", without(REBALANCE, "detail", "instance-id"), "malformed", "detail.instance-id"),
    ("health without category", without(HEALTH, "detail", "eventTypeCategory"), "malformed", "eventTypeCategory"),
    ("health without entities", without(HEALTH, "detail", "affectedEntities"), "malformed", "affectedEntities"),
    ("health entity without value", with_(HEALTH, [{"entityArn": "x"}], "detail", "affectedEntities"), "malformed",
     "affectedEntities[0].entityValue"),
    # irrelevant: subscribed, but no interruption
    ("state running", state("running"), "irrelevant", "'running'"),
    ("state pending", state("pending"), "irrelevant", "'pending'"),
    ("health issue", with_(HEALTH, "issue", "detail", "eventTypeCategory"), "irrelevant", "'issue'"),
    ("health other service", with_(HEALTH, "RDS", "detail", "service"), "irrelevant", "'RDS'"),
    ("health no instance", with_(HEALTH, [{"entityValue": "vol-1"}], "detail", "affectedEntities"), "irrelevant",
     "no EC2 instance"),
    # foreign: not an event the ingester subscribes to
    ("s3 test event", {"Service": "Amazon S3", "Event": "s3:TestEvent"}, "foreign", "not an EventBridge event"),
    ("empty object", {}, "foreign", "not an EventBridge event"),
    ("other source", event("EC2 Spot Instance Interruption Warning", {"instance-id": I1}, source="my.app"), "foreign",
     "'my.app'"),
    ("other detail type", event("EC2 Spot Instance Request Fulfillment", {"instance-id": I1}), "foreign",
     "Request Fulfillment"),
    ("health from aws.ec2", event("AWS Health Event", HEALTH["detail"]), "foreign", "'AWS Health Event'"),
]


@pytest.mark.parametrize(("name", "doc", "reason", "words"), IGNORED, ids=[i[0] for i in IGNORED])
def test_ignored(name: str, doc: Any, reason: str, words: str) -> None:
    body = doc if isinstance(doc, str | bytes) else json.dumps(doc)
    result = parse_message(body)
    assert isinstance(result, Ignored), result
    assert result.reason == reason
    assert words in result.why


@pytest.mark.parametrize("garbage", [
    "null", "0", "true", "{\"source\": null}", json.dumps({"source": "aws.ec2", "detail-type": None}),
    json.dumps(with_(SPOT, None, "detail")), json.dumps(with_(HEALTH, ["x", 1, None], "detail", "affectedEntities")),
    json.dumps(with_(HEALTH, {"a": 1}, "detail", "affectedEntities")), "\x00", "{" * 5000, "[" * 100_000,
])
def test_garbage_never_raises(garbage: str) -> None:
    assert isinstance(parse_message(garbage), Ignored)


@pytest.mark.parametrize(("provider_id", "instance"), [
    (f"aws:///us-east-1a/{I1}", I1),
    (f"aws:///us-east-1a/{I1}/", I1),
    (f"aws://us-east-1a/{I1}", I1),
    ("aws:///us-east-1a/", None),
    (f"gce://project/zone/{I1}", None),
    ("kwok://node-1", None),
    ("", None),
])
def test_instance_id_of_provider_id(provider_id: str, instance: str | None) -> None:
    assert instance_id_of_provider_id(provider_id) == instance
