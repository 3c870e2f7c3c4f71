"""Wire contracts (docs/topics.md): every message type makes the round trip through a Kafka record in
CloudEvents binary mode, every kind of malformed record is rejected with an error naming what is
wrong, and deploy/asyncapi.yaml is exactly what the code generates."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from ebb.contracts import (
    MESSAGE_TYPES,
    TOPICS,
    ClusterObject,
    ContractError,
    DeadLetter,
    DisruptionCommand,
    DisruptionEvent,
    PlannerPass,
    RawBytes,
    Replacement,
    check_topic,
    decode,
    dlq_topic,
    from_kafka,
    to_kafka,
)
from ebb.contracts.asyncapi import document, render
from ebb.core.methods.base import Command
from ebb.core.methods.base import Replacement as CoreReplacement
from tests.kit.messages import MESSAGES, PEAK, T0, disruption_command, planner_pass

REPO = Path(__file__).resolve().parents[2]
ASYNCAPI = REPO / "deploy" / "asyncapi.yaml"


def test_every_topic_and_type_is_covered() -> None:
    covered = {m.ce_type() for _, m in MESSAGES.values()}
    assert covered == set(MESSAGE_TYPES)
    assert {t for t, _ in MESSAGES.values()} >= set(TOPICS)


@pytest.mark.parametrize("name", MESSAGES)
def test_round_trip(name: str) -> None:
    topic, message = MESSAGES[name]
    key, value, headers = to_kafka(message, source="/ebb/test", time=T0)
    names = [h for h, _ in headers]
    assert len(names) == len(set(names))
    found = dict(headers)
    assert found["ce_specversion"] == b"1.0"
    assert found["ce_id"] == str(message.id).encode()
    assert found["ce_source"] == b"/ebb/test"
    assert found["ce_type"] == message.ce_type().encode()
    assert found["ce_time"] == b"2026-11-23T18:30:00Z"
    assert found["ce_subject"] == key
    assert found["content-type"] == b"application/json"
    assert key == message.key().encode()
    if isinstance(message, ClusterObject) and message.deleted:
        assert value is None
    else:
        assert value is not None
        assert json.loads(value)["id"] == str(message.id)
    decoded = decode(topic, key, value, headers)
    assert decoded.message == message
    assert decoded.source == "/ebb/test"
    assert decoded.time == T0
    assert from_kafka(topic, key, value, headers) == message


def test_wire_names_are_camel_case_like_ebb_plan() -> None:
    _, value, _ = to_kafka(disruption_command())
    assert value is not None
    data = json.loads(value)
    assert set(data) == {
        "id", "decisionId", "nodePool", "method", "reason", "action", "nodes", "replacements", "savingsPerHour",
        "explanation", "approvedAt", "messageKind",
    }
    # ``labels`` is always on the wire (``{}`` without any); ``ebb plan`` shows it only when there are some
    assert set(data["replacements"][0]) == {"nodePool", "instanceTypes", "capacityType", "zones", "price", "labels"}


def test_from_engine_command() -> None:
    command = Command(
        method="multi-node-consolidation",
        reason="Underutilized",
        action="replace",
        nodes=("node-a", "node-b"),
        replacements=(CoreReplacement("general", ("c5.large", "m5.large"), "spot", ("us-east-1a", "us-east-1b"),
                                      0.0312345678, "sim-1"),),
        savings=0.2,
        explanation="two nodes fit on one",
    )
    wire = DisruptionCommand.from_command(command, decision_id="d-1", node_pool="general", approved_at=T0)
    assert wire.nodes == ("node-a", "node-b")
    assert wire.replacements[0].instance_types == ("c5.large", "m5.large")
    assert wire.replacements[0].price == 0.031235
    assert wire.savings_per_hour == 0.2
    assert wire.key() == "general"
    fixed = uuid.uuid4()
    again = DisruptionCommand.from_command(command, decision_id="d-1", node_pool="general", approved_at=T0, id=fixed)
    assert again.id == fixed


def test_model_constraints() -> None:
    with pytest.raises(ValueError, match="nodes must be distinct"):
        DisruptionCommand.model_validate({**disruption_command().model_dump(), "nodes": ("node-a", "node-a")})
    with pytest.raises(ValueError, match="needs replacements"):
        DisruptionCommand.model_validate({**disruption_command().model_dump(), "replacements": []})
    with pytest.raises(ValueError, match="timezone"):
        DisruptionEvent(decision_id="d-1", node="node-a", phase="Evicted", message="", at=datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="extra"):
        DisruptionEvent.model_validate({"decisionId": "d-1", "node": "node-a", "phase": "Evicted", "message": "",
                                        "at": T0, "color": "red"})
    with pytest.raises(ValueError, match=r"should match pattern"):
        DisruptionEvent(decision_id="d-1", node="Node_A", phase="Evicted", message="", at=T0)
    with pytest.raises(ValueError):
        Replacement(node_pool="p", instance_types=(), capacity_type="spot", zones=("z",), price=1.0)
    with pytest.raises(ValueError):
        Replacement(node_pool="p", instance_types=("t",), capacity_type="spot", zones=("z",), price=float("nan"))
    assert RawBytes.of(b"\x00\xff").to_bytes() == b"\x00\xff"
    with pytest.raises(ValueError, match="base64"):
        RawBytes(encoding="base64", data="***")


def test_dead_letter_keeps_the_original_record() -> None:
    _, letter = MESSAGES["dead letter"]
    assert isinstance(letter, DeadLetter)
    assert letter.value is not None and letter.value.encoding == "base64"
    headers = [("ce_type", b"sh.ebb.interruption.received.v1"), ("x", None)]
    assert letter.original() == (b"node-a", b"\xff\xfe not json", headers)
    assert letter.key() == "node-a"
    keyless = letter.model_copy(update={"key_bytes": None})
    assert keyless.key() == "ebb.interruptions/2/17"


def test_publishing_checks_the_topic() -> None:
    check_topic("ebb.disruption.events", MESSAGES["event"][1])
    check_topic(dlq_topic("ebb.interruptions"), MESSAGES["dead letter"][1])
    with pytest.raises(ContractError, match=r"does not belong on topic 'ebb\.interruptions'"):
        check_topic("ebb.interruptions", MESSAGES["event"][1])
    with pytest.raises(ContractError, match="unknown topic"):
        check_topic("ebb.nope", MESSAGES["event"][1])


# -- malformed records ------------------------------------------------------------------------------------------


def _good() -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    return to_kafka(MESSAGES["event"][1], time=T0)


def _without(name: str) -> Any:
    key, value, headers = _good()
    return "ebb.disruption.events", key, value, [(h, v) for h, v in headers if h != name]


def _with(name: str, replacement: bytes) -> Any:
    key, value, headers = _good()
    return "ebb.disruption.events", key, value, [(h, replacement if h == name else v) for h, v in headers]


def _payload(change: dict[str, Any], drop: str = "") -> Any:
    key, value, headers = _good()
    assert value is not None
    data = {**json.loads(value), **change}
    data.pop(drop, None)
    return "ebb.disruption.events", key, json.dumps(data).encode(), headers


def _value(value: bytes | None) -> Any:
    key, _, headers = _good()
    return "ebb.disruption.events", key, value, headers


def _key(key: bytes | None) -> Any:
    _, value, headers = _good()
    return "ebb.disruption.events", key, value, headers


def _topic(topic: str) -> Any:
    key, value, headers = _good()
    return topic, key, value, headers


def _upsert_as_tombstone() -> Any:
    key, _, headers = to_kafka(MESSAGES["object upserted"][1])
    return "ebb.cluster.objects", key, None, headers


def _tombstone_with_value() -> Any:
    message = MESSAGES["object deleted (tombstone)"][1]
    key, _, headers = to_kafka(message)
    return "ebb.cluster.objects", key, b"{}", headers


def _tombstone_bad_key() -> Any:
    _, value, headers = to_kafka(MESSAGES["object deleted (tombstone)"][1])
    return "ebb.cluster.objects", b"Node/node-a", value, headers


def _upsert_without_object() -> Any:
    message = MESSAGES["object upserted"][1]
    key, value, headers = to_kafka(message)
    assert value is not None
    return "ebb.cluster.objects", key, json.dumps({**json.loads(value), "object": None}).encode(), headers


MALFORMED: dict[str, tuple[Any, str]] = {
    "unknown topic": (_topic("ebb.nope"), "unknown topic 'ebb.nope'"),
    "no headers at all": ((*_value(b"{}")[:3], []), "missing header(s) ce_specversion, ce_id, ce_source, ce_type"),
    "missing ce_id": (_without("ce_id"), "missing header(s) ce_id"),
    "missing ce_type": (_without("ce_type"), "missing header(s) ce_type"),
    "missing ce_source": (_without("ce_source"), "missing header(s) ce_source"),
    "missing ce_specversion": (_without("ce_specversion"), "missing header(s) ce_specversion"),
    "duplicate header": (("ebb.disruption.events", *_good()[:2], [*_good()[2], ("CE_ID", b"x")]),
                         "header 'CE_ID' appears more than once"),
    "wrong specversion": (_with("ce_specversion", b"0.3"), "unsupported CloudEvents specversion '0.3'"),
    "header not utf-8": (_with("ce_source", b"\xff"), "header 'ce_source' is not UTF-8"),
    "unknown type": (_with("ce_type", b"sh.ebb.node.exploded.v1"), "unknown CloudEvent type 'sh.ebb.node.exploded.v1'"),
    "type not allowed on topic": (_with("ce_type", b"sh.ebb.interruption.received.v1"),
                                  "type 'sh.ebb.interruption.received.v1' is not allowed on topic "
                                  "'ebb.disruption.events'"),
    "ce_id not a uuid": (_with("ce_id", b"not-a-uuid"), "ce_id 'not-a-uuid' is not a UUID"),
    "bad ce_time": (_with("ce_time", b"yesterday"), "ce_time 'yesterday' is not an RFC 3339 timestamp"),
    "ce_time without offset": (_with("ce_time", b"2026-11-23T18:30:00"), "has no UTC offset"),
    "bad extension attribute": (("ebb.disruption.events", *_good()[:2], [*_good()[2], ("ce_Bad-Name", b"x")]),
                                "invalid CloudEvents attributes"),
    "missing content-type": (_without("content-type"), "content-type must be application/json, got None"),
    "wrong content-type": (_with("content-type", b"text/plain"), "content-type must be application/json"),
    "no key": (_key(None), "record has no key; ebb.disruption.events is keyed by node name"),
    "key not utf-8": (_key(b"\xff"), "record key is not UTF-8"),
    "key of another object": (_key(b"node-b"), "record key 'node-b' does not match the message's key 'node-a'"),
    "invalid JSON": (_value(b'{"node": '), "value is not valid JSON"),
    "not UTF-8 at all": (_value(b"\xff\xfe"), "value is not valid JSON"),
    "JSON but not an object": (_value(b"[1, 2]"), "value must be a JSON object, got list"),
    "null value off the compacted topic": (_value(None), "a null value (tombstone) is only allowed for"),
    "no id in payload": (_payload({}, drop="id"), "payload of sh.ebb.disruption.progressed.v1 has no id"),
    "id differs from ce_id": (_payload({"id": str(uuid.uuid4())}), "differs from ce_id"),
    "unknown field": (_payload({"colour": "red"}), "violates the schema: colour: Extra inputs are not permitted"),
    "missing field": (_payload({}, drop="at"), "violates the schema: at: Field required"),
    "bad enum": (_payload({"phase": "Sad"}), "violates the schema: phase: Input should be"),
    "field of another message": (_payload({"nodePool": "general"}), "violates the schema: nodePool: Extra inputs"),
    "naive time": (_payload({"at": "2026-11-23T18:30:00"}), "at: Input should have timezone info"),
    "tombstone of an upsert type": (_upsert_as_tombstone(), "only allowed for sh.ebb.object.deleted.v1"),
    "deletion with a value": (_tombstone_with_value(), "sh.ebb.object.deleted.v1 must be a tombstone"),
    "tombstone with a bad key": (_tombstone_bad_key(), "tombstone key 'Node/node-a' is not kind/namespace/name"),
    "upsert without object": (_upsert_without_object(), "payload is a sh.ebb.object.deleted.v1"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_records_are_rejected_with_a_reason(case: str) -> None:
    (topic, key, value, headers), expected = MALFORMED[case]
    with pytest.raises(ContractError) as raised:
        from_kafka(topic, key, value, headers)
    assert expected in str(raised.value)


def test_snake_case_fields_are_rejected_on_the_wire() -> None:
    topic, message = MESSAGES["command"]
    key, value, headers = to_kafka(message)
    assert value is not None
    data = json.loads(value)
    data["decision_id"] = data.pop("decisionId")
    with pytest.raises(ContractError, match="decisionId: Field required"):
        from_kafka(topic, key, json.dumps(data).encode(), headers)


# -- AsyncAPI ---------------------------------------------------------------------------------------------------


def test_committed_asyncapi_document_is_generated_from_the_code() -> None:
    assert ASYNCAPI.read_text(encoding="utf-8") == render(), (
        "deploy/asyncapi.yaml is stale: run `python -m ebb.contracts.asyncapi > deploy/asyncapi.yaml`"
    )


def test_asyncapi_document_describes_every_topic() -> None:
    doc = yaml.safe_load(render())
    assert doc == document()
    assert doc["asyncapi"].startswith("3.")
    addresses = {c["address"] for c in doc["channels"].values()}
    assert addresses == {*TOPICS, "{topic}.dlq"}
    names = {m["name"] for m in doc["components"]["messages"].values()}
    assert names == set(MESSAGE_TYPES)
    schemas = doc["components"]["schemas"]
    assert {"DisruptionEvent", "DisruptionCommand", "Replacement", "DeadLetter", "ClusterObject"} <= schemas.keys()
    assert "savingsPerHour" in schemas["DisruptionCommand"]["properties"]
    assert "id" in schemas["DisruptionCommand"]["required"]
    assert schemas["DisruptionCommand"]["additionalProperties"] is False
    compacted = doc["channels"]["clusterObjects"]["bindings"]["kafka"]["topicConfiguration"]["cleanup.policy"]
    assert compacted == ["compact"]
    for message in doc["components"]["messages"].values():
        assert message["headers"]["required"] == ["ce_specversion", "ce_id", "ce_source", "ce_type"]
        assert message["bindings"]["kafka"]["key"]["description"]


def _generic_record(message: ClusterObject, time: datetime) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """``to_kafka``'s generic path (a CloudEvent and pydantic's serializer), which other messages take."""
    import ebb.contracts.codec as codec

    direct = codec._cluster_object_record
    codec._cluster_object_record = lambda *_: None  # type: ignore[assignment]
    try:
        return to_kafka(message, source="/ebb/cluster-watcher", time=time)
    finally:
        codec._cluster_object_record = direct  # type: ignore[assignment]


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "ü"}},
     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}], "priority": -5,
              "ratio": 0.25, "empty": {}, "none": None, "flag": True}},
    None,
], ids=["upsert", "tombstone"])
def test_a_cluster_objects_direct_record_decodes_as_the_generic_one(obj: dict[str, Any] | None) -> None:
    message = ClusterObject(kind="Pod", namespace="ns", name="p", resource_version="42", object=obj)
    direct = to_kafka(message, source="/ebb/cluster-watcher", time=T0)
    generic = _generic_record(message, T0)
    assert direct[0] == generic[0]
    assert dict(direct[2]) == dict(generic[2])
    assert (direct[1] is None) == (generic[1] is None)
    if direct[1] is not None:
        assert generic[1] is not None
        assert json.loads(direct[1]) == json.loads(generic[1])
    decoded = decode("ebb.cluster.objects", *direct)
    assert decoded.message == message
    assert decoded.source == "/ebb/cluster-watcher"
    assert decoded.time == T0


def test_a_cluster_object_orjson_cannot_encode_takes_the_generic_path() -> None:
    message = ClusterObject(kind="Node", namespace="", name="n", resource_version="1",
                            object={"big": 2**70, "at": T0})
    key, value, headers = to_kafka(message, source="/ebb/cluster-watcher", time=T0)
    assert value is not None
    assert json.loads(value)["object"] == {"big": 2**70, "at": "2026-11-23T18:30:00Z"}
    assert from_kafka("ebb.cluster.objects", key, value, headers).key() == "Node//n"


def test_a_cluster_object_with_an_invalid_source_is_refused() -> None:
    message = ClusterObject(kind="Node", namespace="", name="n", resource_version="1", object={})
    with pytest.raises(ContractError):
        to_kafka(message, source="")


def test_a_pass_names_every_node_once_with_the_engines_cause_and_sentence() -> None:
    message, result = planner_pass()
    assert message.key() == "prod-eu" and message.at == result.now == T0 and message.revision == 7
    disrupted = [n for c in message.commands for n in c.nodes]
    assert sorted(disrupted + [b.node for b in message.blocked]) == ["busy", "idle", "spare"]
    assert [(b.node, b.method, b.cause, b.reason) for b in message.blocked] == [
        (b.node, b.method, str(b.cause.kind), b.reason) for b in result.blocked]
    [idle] = [b for b in message.blocked if b.node == "idle"]
    assert "demandWindow (1h)" in idle.reason and idle.node_pool == "default"
    assert [(c.method, c.nodes, c.node_pools, c.action) for c in message.commands] == [
        (c.method, c.nodes, ("other",), c.action) for c in result.commands]
    assert disrupted == ["spare"]
    assert sorted(p.policy for p in message.pools) == ["NodePool default", "NodePool other"]
    assert message.demand_record() == (PEAK,)
    wire = message.model_dump(mode="json")
    assert {"revisitAt", "blocked", "findings", "budgets", "demand"} <= wire.keys()
    assert {"nodePool", "cause", "reason", "paused"} <= wire["blocked"][0].keys()
    with pytest.raises(ValueError, match="nodePools must name the NodePool of each node"):
        PlannerPass.model_validate({**wire, "commands": [{**wire["commands"][0], "nodePools": []}]})


def test_a_replacements_labels_go_over_the_wire() -> None:
    """The labels a replacement is launched with (a custom requirement's value its pods need) reach the executor on
    the command's wire; a replacement without any has none (the field of older messages)."""
    core = CoreReplacement("general", ("c5.large",), "on-demand", ("us-east-1a",), 0.085, labels=(("team", "b"),))
    wire = Replacement.of(core)
    assert wire.model_dump(mode="json", by_alias=True)["labels"] == {"team": "b"}
    assert Replacement.model_validate_json(wire.model_dump_json(by_alias=True)).core() == core
    bare = CoreReplacement("general", ("c5.large",), "on-demand", ("us-east-1a",), 0.085)
    assert Replacement.model_validate({"nodePool": "general", "instanceTypes": ["c5.large"],
                                       "capacityType": "on-demand", "zones": ["us-east-1a"],
                                       "price": 0.085}).core() == bare
