"""Messages to and from Kafka records: CloudEvents 1.0 in binary content mode (``ce_`` headers, JSON data).

``to_kafka(message)`` gives the record's key, value and headers (``ce_specversion``, ``ce_id``,
``ce_source``, ``ce_type``, ``ce_subject`` (the key), ``ce_time``, ``content-type: application/json``).
A deleted cluster object is a tombstone: a null value, its fields in the key and in ``ce_id`` /
``ce_resourceversion``. The value is the message's compact JSON (pydantic's serializer). A ``ClusterObject``,
the one message published at the watch rate, takes a direct path: its headers made without a ``CloudEvent``
object (the source checked once) and its payload encoded by orjson, as its ``object`` is decoded JSON
(about a tenth of the generic path's CPU; an object orjson cannot encode as plain JSON, e.g. one holding a
datetime or an integer beyond 64 bits, takes the generic path). Both give the same JSON to a decoder.

``from_kafka(topic, key, value, headers)`` checks everything a record of ``topic`` must satisfy and
raises ``ContractError`` naming what is wrong: missing CloudEvents headers, an unknown type or one
that does not belong on the topic, a value that is not JSON, a payload that violates the schema, a
payload id or key that does not match the headers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

import orjson
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary, to_binary
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from pydantic import ValidationError

from ebb.contracts.messages import (
    MESSAGE_TYPES,
    TYPE_OBJECT_DELETED,
    TYPE_OBJECT_UPSERTED,
    ClusterObject,
    ContractError,
    Message,
    topic_spec,
)

SPECVERSION: Final = "1.0"
CONTENT_TYPE: Final = "application/json"
DEFAULT_SOURCE: Final = "/ebb"
#: CloudEvents attributes every record must carry as ``ce_`` headers
REQUIRED_HEADERS: Final = ("ce_specversion", "ce_id", "ce_source", "ce_type")
#: extension attribute carrying a tombstone's resourceVersion
RESOURCE_VERSION_ATTR: Final = "resourceversion"

Headers = list[tuple[str, bytes]]

_FORMAT: Final = JSONFormat()


@dataclass(frozen=True)
class Decoded:
    """A record's message with its CloudEvent attributes."""

    message: Message
    type: str
    source: str
    time: datetime | None


def to_kafka(
    message: Message, *, source: str = DEFAULT_SOURCE, time: datetime | None = None
) -> tuple[bytes, bytes | None, Headers]:
    """The Kafka record (key, value, headers) of ``message``. ``time`` (timezone-aware) is the
    CloudEvent time, the current time when None. The value is None for a tombstone."""
    if time is not None and time.utcoffset() is None:
        raise ContractError("the CloudEvent time must be timezone-aware")
    if type(message) is ClusterObject:
        direct = _cluster_object_record(message, source, time)
        if direct is not None:
            return direct
    key = message.key()
    attributes: dict[str, Any] = {
        "id": str(message.id),
        "source": source,
        "type": message.ce_type(),
        "subject": key,
        "datacontenttype": CONTENT_TYPE,
    }
    if time is not None:
        attributes["time"] = time
    tombstone = isinstance(message, ClusterObject) and message.deleted
    data: bytes | None = None
    if tombstone:
        assert isinstance(message, ClusterObject)
        if message.resource_version:
            attributes[RESOURCE_VERSION_ATTR] = message.resource_version
    else:
        data = message.model_dump_json(by_alias=True).encode("utf-8")
    try:
        record = to_binary(CloudEvent(attributes, data), _FORMAT, lambda _: key)
    except BaseCloudEventException as e:
        raise ContractError(f"cannot make a CloudEvent of {type(message).__name__}: {e}") from e
    return key.encode("utf-8"), None if tombstone else record.value, list(record.headers.items())


def _cluster_object_record(
    message: ClusterObject, source: str, time: datetime | None
) -> tuple[bytes, bytes | None, Headers] | None:
    """``to_kafka`` of a ``ClusterObject`` without the generic path's ``CloudEvent`` and pydantic dump; None when
    its object is not plain JSON for orjson (the caller takes the generic path)."""
    key = message.key()
    subject = key.encode("utf-8")
    value: bytes | None = None
    if message.object is not None:
        payload = {"id": str(message.id), "kind": message.kind, "namespace": message.namespace,
                   "name": message.name, "resourceVersion": message.resource_version, "object": message.object}
        try:
            value = orjson.dumps(payload, option=orjson.OPT_PASSTHROUGH_DATETIME)
        except orjson.JSONEncodeError:
            return None
    moment = (time or datetime.now(UTC)).isoformat()
    if moment.endswith("+00:00"):
        moment = moment[:-6] + "Z"
    headers: Headers = [
        ("ce_id", str(message.id).encode("ascii")),
        ("ce_source", _checked_source(source)),
        ("ce_type", (TYPE_OBJECT_DELETED if value is None else TYPE_OBJECT_UPSERTED).encode("ascii")),
        ("ce_subject", subject),
        ("content-type", _CONTENT_TYPE_BYTES),
    ]
    if value is None and message.resource_version:
        headers.append(("ce_" + RESOURCE_VERSION_ATTR, message.resource_version.encode("utf-8")))
    headers += [("ce_specversion", _SPECVERSION_BYTES), ("ce_time", moment.encode("ascii"))]
    return subject, value, headers


@functools.lru_cache(maxsize=16)
def _checked_source(source: str) -> bytes:
    """``source`` as a header value, once the cloudevents library accepted it as a CloudEvent source."""
    try:
        CloudEvent({"id": "0", "source": source, "type": TYPE_OBJECT_UPSERTED})
    except BaseCloudEventException as e:
        raise ContractError(f"cannot make a CloudEvent of ClusterObject: {e}") from e
    return source.encode("utf-8")


_CONTENT_TYPE_BYTES: Final = CONTENT_TYPE.encode("ascii")
_SPECVERSION_BYTES: Final = SPECVERSION.encode("ascii")


def from_kafka(
    topic: str, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]
) -> Message:
    """The message of a record read from ``topic``; ContractError when the record breaks the contract."""
    return decode(topic, key, value, headers).message


def decode(
    topic: str, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]
) -> Decoded:
    """Like ``from_kafka``, with the CloudEvent attributes."""
    spec = topic_spec(topic)
    found: dict[str, bytes] = {}
    for name, raw in headers:
        lowered = name.lower()
        if lowered in found:
            raise ContractError(f"header {name!r} appears more than once")
        found[lowered] = raw if raw is not None else b""
    missing = [h for h in REQUIRED_HEADERS if not found.get(h)]
    if missing:
        raise ContractError(f"not a CloudEvent in binary content mode: missing header(s) {', '.join(missing)}")
    text: dict[str, str] = {}
    for name, raw in found.items():
        try:
            text[name] = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ContractError(f"header {name!r} is not UTF-8") from e
    if text["ce_specversion"] != SPECVERSION:
        raise ContractError(f"unsupported CloudEvents specversion {text['ce_specversion']!r} (expected {SPECVERSION})")
    if "ce_time" in text:
        _check_time(text["ce_time"])
    ce_type = text["ce_type"]
    if ce_type not in MESSAGE_TYPES:
        raise ContractError(f"unknown CloudEvent type {ce_type!r}")
    if ce_type not in spec.types:
        raise ContractError(f"type {ce_type!r} is not allowed on topic {topic!r} (allowed: {', '.join(spec.types)})")
    try:
        event_id = UUID(text["ce_id"])
    except ValueError as e:
        raise ContractError(f"ce_id {text['ce_id']!r} is not a UUID") from e
    if key is None:
        raise ContractError(f"record has no key; {topic} is keyed by {spec.key}")
    try:
        key_text = key.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ContractError("record key is not UTF-8") from e

    if value is None:
        if ce_type != TYPE_OBJECT_DELETED:
            raise ContractError(f"a null value (tombstone) is only allowed for {TYPE_OBJECT_DELETED}, not {ce_type!r}")
        event = _event(found, key, b"")
        message: Message = _tombstone(key_text, event_id, text.get("ce_" + RESOURCE_VERSION_ATTR, ""))
    else:
        content_type = text.get("content-type")
        if content_type is None or content_type.split(";")[0].strip().lower() != CONTENT_TYPE:
            raise ContractError(f"content-type must be {CONTENT_TYPE}, got {content_type!r}")
        if ce_type == TYPE_OBJECT_DELETED:
            raise ContractError(f"{TYPE_OBJECT_DELETED} must be a tombstone (null value)")
        event = _event(found, key, value)
        data = event.get_data()
        if not isinstance(data, dict):
            raise ContractError(_not_json_object(value))
        if "id" not in data:
            raise ContractError(f"payload of {ce_type} has no id")
        try:
            message = spec.types[ce_type].model_validate(data, by_alias=True, by_name=False)
        except ValidationError as e:
            raise ContractError(f"payload of {ce_type} violates the schema: {_errors(e)}") from e
        if message.id != event_id:
            raise ContractError(f"payload id {message.id} differs from ce_id {event_id}")
        if message.ce_type() != ce_type:
            raise ContractError(f"payload is a {message.ce_type()}, not a {ce_type}")
    if message.key() != key_text:
        raise ContractError(f"record key {key_text!r} does not match the message's key {message.key()!r} ({spec.key})")
    return Decoded(message, ce_type, event.get_source(), event.get_time())


def _event(headers: dict[str, bytes], key: bytes, value: bytes) -> CloudEvent:
    try:
        event = from_binary(KafkaMessage(headers=headers, key=key, value=value), _FORMAT, CloudEvent)
    except (BaseCloudEventException, ValueError, OverflowError) as e:
        raise ContractError(f"invalid CloudEvents attributes: {e}") from e
    assert isinstance(event, CloudEvent)
    return event


def _check_time(value: str) -> None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as e:
        raise ContractError(f"ce_time {value!r} is not an RFC 3339 timestamp") from e
    if moment.utcoffset() is None:
        raise ContractError(f"ce_time {value!r} has no UTC offset")


def _tombstone(key: str, event_id: UUID, resource_version: str) -> ClusterObject:
    parts = key.split("/")
    if len(parts) != 3:
        raise ContractError(f"tombstone key {key!r} is not kind/namespace/name")
    kind, namespace, name = parts
    try:
        return ClusterObject(
            id=event_id, kind=kind, namespace=namespace, name=name, resource_version=resource_version, object=None
        )
    except ValidationError as e:
        raise ContractError(f"tombstone key or headers violate the schema: {_errors(e)}") from e


def _not_json_object(value: bytes) -> str:
    try:
        parsed = json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        return f"value is not valid JSON: {e}"
    return f"value must be a JSON object, got {type(parsed).__name__}"


def _errors(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(payload)'}: {e['msg']}" for e in error.errors(include_url=False)
    )
