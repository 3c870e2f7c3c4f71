"""EventBridge interruption messages as they arrive on the interruption SQS queue (interruption in
docs/architecture.md#decision-semantics). Pure: no I/O, never reads the clock, never raises on bad input.

The SQS message body is the EventBridge event JSON. ``parse_message(body)`` gives either a ``Notice``
(the cloud is taking instances away or recommends rebalancing them) or an ``Ignored`` with a reason
(``malformed``: not JSON, not an object, a missing or mistyped field; ``foreign``: not an event this
ingester subscribes to; ``irrelevant``: a subscribed event that announces no interruption, such as a
state change to ``running``). What is understood:

- ``aws.ec2`` / ``EC2 Spot Instance Interruption Warning`` → ``spot-interruption`` of
  ``detail.instance-id``, deadline ``time`` + 2 min (``detail.instance-action`` in the detail);
- ``aws.ec2`` / ``EC2 Capacity Reservation Instance Interruption Warning`` → ``capacity-reservation-interruption``
  of ``detail.instance-id``, deadline ``time`` + 2 min (an interruptible capacity reservation taking its instance
  back; Karpenter's AWS provider drains and deletes such a node as a spot interruption);
- ``aws.health`` / ``AWS Health Event`` with ``detail.eventTypeCategory`` ``scheduledChange`` (service
  EC2) → ``scheduled-change`` of every instance id among ``detail.affectedEntities[].entityValue``,
  deadline ``detail.startTime``;
- ``aws.ec2`` / ``EC2 Instance State-change Notification`` with ``detail.state`` stopping, stopped,
  shutting-down or terminated → ``state-change`` of ``detail.instance-id``, deadline ``time`` (it is
  happening now); any other state is ``irrelevant``;
- ``aws.ec2`` / ``EC2 Instance Rebalance Recommendation`` → ``rebalance`` of ``detail.instance-id``,
  no deadline (event only).

Times are RFC 3339 (``2026-11-21T13:00:00Z``); a Health event's ``startTime`` may also be in the RFC 1123
form AWS Health uses (``Sat, 21 Nov 2026 13:00:00 GMT``). A time without an offset is taken as UTC.
"""

from __future__ import annotations

import email.utils
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from ebb.contracts.messages import InterruptionKind

#: how long a spot instance has after its interruption warning
SPOT_NOTICE: Final = timedelta(minutes=2)
SPOT_INTERRUPTION: Final = "EC2 Spot Instance Interruption Warning"
RESERVATION_INTERRUPTION: Final = "EC2 Capacity Reservation Instance Interruption Warning"
HEALTH_EVENT: Final = "AWS Health Event"
STATE_CHANGE: Final = "EC2 Instance State-change Notification"
REBALANCE: Final = "EC2 Instance Rebalance Recommendation"
#: (source, detail-type) of the events the ingester subscribes to
SUBSCRIBED: Final = {
    ("aws.ec2", SPOT_INTERRUPTION),
    ("aws.ec2", RESERVATION_INTERRUPTION),
    ("aws.health", HEALTH_EVENT),
    ("aws.ec2", STATE_CHANGE),
    ("aws.ec2", REBALANCE),
}
#: instance states that take a node away
STOPPING_STATES: Final = frozenset({"stopping", "stopped", "shutting-down", "terminated"})

_INSTANCE_ID = re.compile(r"^i-[0-9a-zA-Z]{1,32}$")

IgnoredReason = Literal["malformed", "foreign", "irrelevant"]


@dataclass(frozen=True)
class Notice:
    """An interruption announced for one or more instances."""

    kind: InterruptionKind
    instance_ids: tuple[str, ...]
    #: when the instances go away; None when unknown (rebalance)
    deadline: datetime | None
    #: the cloud's words, e.g. ``instance-action=terminate`` or ``state=stopping``
    detail: str
    #: the EventBridge event id (stable across redeliveries); None when the event has none
    event_id: str | None
    #: the event's ``time``
    time: datetime
    #: the instances' new state, for a state change (``stopping``, ``stopped``, ``shutting-down``,
    #: ``terminated``); None for the other kinds
    instance_state: str | None = None


@dataclass(frozen=True)
class Ignored:
    """A message that announces nothing to act on, and why."""

    reason: IgnoredReason
    why: str


class _Malformed(ValueError):
    pass


def parse_message(body: str | bytes, received: datetime | None = None) -> Notice | Ignored:
    """The notice in an SQS message body (an EventBridge event), or why there is none. An event without a ``time``
    is taken as sent when it was ``received`` (Karpenter's AWS provider acts on it all the same: the instance goes
    whatever its words lack); without ``received`` it is malformed."""
    try:
        event = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return Ignored("malformed", f"body is not JSON: {str(e)[:200] or type(e).__name__}")
    if not isinstance(event, dict):
        return Ignored("malformed", f"body is a JSON {type(event).__name__}, not an object")
    source, detail_type = event.get("source"), event.get("detail-type")
    # strings first: a list or an object there is unhashable, and the set lookup raised TypeError (found by
    # tests/property/test_fuzz_records.py)
    if not isinstance(source, str) or not isinstance(detail_type, str):
        return Ignored("foreign", "not an EventBridge event (no source and detail-type)")
    if (source, detail_type) not in SUBSCRIBED:
        return Ignored("foreign", f"not an interruption event: source {source!r}, detail-type {detail_type!r}")
    try:
        return _parse_event(event, str(detail_type), received)
    except _Malformed as e:
        return Ignored("malformed", f"{detail_type}: {e}")


def _parse_event(event: Mapping[str, Any], detail_type: str, received: datetime | None) -> Notice | Ignored:
    time = received if event.get("time") is None and received is not None else _time(event.get("time"), "time")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise _Malformed("detail is missing or not an object")
    event_id = event.get("id")
    if event_id is not None and (not isinstance(event_id, str) or not event_id.strip()):
        raise _Malformed("id is not a non-empty string")

    def notice(kind: InterruptionKind, ids: tuple[str, ...], deadline: datetime | None, words: str,
               instance_state: str | None = None) -> Notice:
        return Notice(kind, ids, deadline, words, event_id, time, instance_state)

    if detail_type in (SPOT_INTERRUPTION, RESERVATION_INTERRUPTION):
        # an interruptible capacity reservation taking its instance back has the spot warning's two minutes too
        action = detail.get("instance-action")
        if action is not None and not isinstance(action, str):
            raise _Malformed("detail.instance-action is not a string")
        kind: InterruptionKind = ("spot-interruption" if detail_type == SPOT_INTERRUPTION
                                  else "capacity-reservation-interruption")
        return notice(kind, (_instance_id(detail),), time + SPOT_NOTICE, f"instance-action={action or 'unknown'}")
    if detail_type == STATE_CHANGE:
        state = detail.get("state")
        if not isinstance(state, str) or not state:
            raise _Malformed("detail.state is missing or not a string")
        instance = _instance_id(detail)
        if state not in STOPPING_STATES:
            return Ignored("irrelevant", f"instance {instance} entered state {state!r}, not an interruption")
        return notice("state-change", (instance,), time, f"state={state}", state)
    if detail_type == REBALANCE:
        return notice("rebalance", (_instance_id(detail),), None, "rebalance recommendation")
    return _health(detail, notice)


_MakeNotice = Callable[[InterruptionKind, tuple[str, ...], datetime | None, str], Notice]


def _health(detail: Mapping[str, Any], notice: _MakeNotice) -> Notice | Ignored:
    category = detail.get("eventTypeCategory")
    if not isinstance(category, str):
        raise _Malformed("detail.eventTypeCategory is missing or not a string")
    if category != "scheduledChange":
        return Ignored("irrelevant", f"AWS Health event of category {category!r}, not scheduledChange")
    service = detail.get("service")
    if service is not None and service != "EC2":
        return Ignored("irrelevant", f"AWS Health scheduled change for service {service!r}, not EC2")
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise _Malformed("detail.affectedEntities is missing or not a list")
    ids: list[str] = []
    for n, entity in enumerate(entities):
        value = entity.get("entityValue") if isinstance(entity, dict) else None
        if not isinstance(value, str):
            raise _Malformed(f"detail.affectedEntities[{n}].entityValue is missing or not a string")
        if _INSTANCE_ID.match(value) and value not in ids:
            ids.append(value)
    if not ids:
        return Ignored("irrelevant", "AWS Health scheduled change affects no EC2 instance")
    # no startTime: when the change comes is unknown, and the instances go all the same (Karpenter does not read it)
    start = None if detail.get("startTime") is None else _time(detail.get("startTime"), "detail.startTime")
    type_code = detail.get("eventTypeCode")
    words = f"eventTypeCode={type_code}" if isinstance(type_code, str) and type_code else "scheduledChange"
    return notice("scheduled-change", tuple(ids), start, words)


def _instance_id(detail: Mapping[str, Any]) -> str:
    value = detail.get("instance-id")
    if not isinstance(value, str) or not value:
        raise _Malformed("detail.instance-id is missing or not a string")
    if not _INSTANCE_ID.match(value):
        raise _Malformed(f"detail.instance-id {value!r} is not an EC2 instance id")
    return value


def _time(value: Any, where: str) -> datetime:
    if not isinstance(value, str) or not value:
        raise _Malformed(f"{where} is missing or not a string")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            raise _Malformed(f"{where} {value!r} is not a timestamp") from None
    if moment.utcoffset() is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def instance_id_of_provider_id(provider_id: str) -> str | None:
    """The EC2 instance id of a node's ``spec.providerID`` (``aws:///<zone>/<instance-id>``), or None
    when it is not an AWS provider id."""
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if _INSTANCE_ID.match(last) else None
