"""Hostile records on every topic, and hostile SQS bodies for the interruption-ingester (issue 13: fuzzing).

Hypothesis mutates a valid record of every message type (``tests.unit.test_contracts.MESSAGES``) the ways a
broken or hostile producer would: headers dropped, duplicated (in any case), replaced by random bytes; the
value truncated, replaced by random bytes or by JSON of the wrong shape, a payload field set to a random
JSON value or to an oversized string; the key changed or dropped; the record sent to another topic.

- ``ebb.contracts.decode`` (every consumer's first step) returns a message or raises ContractError, never
  anything else, on every topic and its DLQ;
- on the InMemoryBus, a consumer group fed such records followed by a good one dead-letters each record that
  does not decode (DLQ of the topic, with the original bytes), hands the others to its handler, and is not
  stuck: its offset reaches the end and the good record is handled;
- ``ebb.adapters.aws.parse_message`` (the ingester's EventBridge parser) returns a Notice or an Ignored with a
  reason, never raises, on random JSON and on mutated interruption events of every kind it reads; the
  ingester itself (SQS in memory) deletes every such message and publishes a good one after them.

The number of inputs tried is printed (``pytest -s``) and bounded by ``EBB_FUZZ_EXAMPLES`` (default 300 per
test) so the module stays a few seconds long."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ebb.adapters.aws import Ignored, Notice, parse_message
from ebb.adapters.aws.sqs import SqsQueue
from ebb.adapters.bus import Delivery, InMemoryBus
from ebb.adapters.bus.base import RawRecord
from ebb.contracts import TOPICS, ContractError, DeadLetter, decode, dlq_topic, to_kafka
from ebb.contracts.messages import Message
from ebb_interruption_ingester.ingester import Ingester
from ebb_interruption_ingester.nodes import MappingLookup
from tests.kit.eventbridge import HEALTH, SPOT, event
from tests.kit.ingester import FAST, I1, FakeSqs, interruptions, spot
from tests.kit.messages import MESSAGES, T0
from tests.kit.waiting import eventually

EXAMPLES = int(os.environ.get("EBB_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
#: inputs tried, by test (printed by the last test of the module)
TRIED: Counter[str] = Counter()
#: what each decode came to
OUTCOMES: Counter[str] = Counter()

Headers = list[tuple[str, bytes | None]]
GOOD: list[tuple[str, bytes | None, bytes | None, Headers]] = []
for _topic, _message in MESSAGES.values():
    _key, _value, _headers = to_kafka(_message, source="/ebb/fuzz", time=T0)
    GOOD.append((_topic, _key, _value, list(_headers)))

GOOD_EVENT = list(MESSAGES).index("event")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def hostile_records(draw: st.DrawFn) -> tuple[str, bytes | None, bytes | None, Headers]:
    """A valid record of some type, mutated one to three times."""
    topic, key, value, headers = draw(st.sampled_from(GOOD))
    headers = list(headers)
    for _ in range(draw(st.integers(1, 3))):
        mutation = draw(st.sampled_from([
            "drop header", "duplicate header", "header bytes", "truncate value", "value bytes", "value json",
            "field", "oversized field", "key", "no key", "topic", "tombstone"]))
        if mutation == "drop header" and headers:
            headers.pop(draw(st.integers(0, len(headers) - 1)))
        elif mutation == "duplicate header" and headers:
            name, raw = draw(st.sampled_from(headers))
            headers.append((draw(st.sampled_from([name, name.upper()])), raw))
        elif mutation == "header bytes" and headers:
            at = draw(st.integers(0, len(headers) - 1))
            headers[at] = (headers[at][0], draw(st.none() | st.binary(max_size=40)))
        elif mutation == "truncate value" and value:
            value = value[: draw(st.integers(0, len(value) - 1))]
        elif mutation == "value bytes":
            value = draw(st.binary(max_size=200))
        elif mutation == "value json":
            value = json.dumps(draw(json_values)).encode()
        elif mutation in ("field", "oversized field") and value:
            try:
                payload = json.loads(value)
            except ValueError:  # an earlier mutation broke it already
                continue
            if isinstance(payload, dict) and payload:
                field = draw(st.sampled_from(sorted(payload)))
                payload[field] = draw(json_values) if mutation == "field" else "x" * draw(st.integers(10**5, 10**6))
                value = json.dumps(payload).encode()
        elif mutation == "key":
            key = draw(st.binary(max_size=40))
        elif mutation == "no key":
            key = None
        elif mutation == "topic":
            topic = draw(st.sampled_from(sorted([*TOPICS, *(dlq_topic(t) for t in TOPICS)])))
        elif mutation == "tombstone":
            value = None
    return topic, key, value, headers


@FUZZ
@given(hostile_records())
def test_decode_gives_a_message_or_a_contract_error(record: tuple[str, bytes | None, bytes | None, Headers]) -> None:
    TRIED["decode"] += 1
    topic, key, value, headers = record
    try:
        decoded = decode(topic, key, value, headers)
    except ContractError as e:
        assert str(e)
        OUTCOMES["contract error"] += 1
    else:
        assert isinstance(decoded.message, Message)
        OUTCOMES["decoded"] += 1


@settings(FUZZ, max_examples=max(EXAMPLES // 10, 10))
@given(st.lists(hostile_records(), min_size=1, max_size=8))
def test_a_consumer_dead_letters_what_does_not_decode_and_is_never_stuck(
        records: list[tuple[str, bytes | None, bytes | None, Headers]]) -> None:
    TRIED["bus batches"] += 1
    TRIED["bus records"] += len(records)
    asyncio.run(_consume(records))


async def _consume(records: list[tuple[str, bytes | None, bytes | None, Headers]]) -> None:
    bus = InMemoryBus(partitions=1)
    handled: list[Message] = []
    # a topic that is not compacted, so no hostile record is compacted away under the good one's key
    good_topic, good_key, good_value, good_headers = GOOD[GOOD_EVENT]

    last = asyncio.Event()

    async def handler(delivery: Delivery) -> None:
        handled.append(delivery.message)
        if delivery.offset == len(records):  # the good record, after all the hostile ones
            last.set()

    expected_letters = 0
    expected_handled = 0
    for topic, key, value, headers in records:
        try:
            decode(good_topic, key, value, headers)
        except ContractError:
            expected_letters += 1
        else:
            expected_handled += 1
        # every hostile record goes to the topic the consumer reads, whatever topic it was made for
        del topic
        bus.append(good_topic, key, value, headers)
    bus.append(good_topic, good_key, good_value, good_headers)
    stop = asyncio.Event()
    consumer = asyncio.create_task(bus.consume([good_topic], "fuzz", handler, stop=stop))
    waiting = asyncio.create_task(last.wait())
    done, _ = await asyncio.wait({consumer, waiting}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if consumer in done:
        consumer.result()  # the consumer crashed: raise its error
    assert waiting in done, "the consumer is stuck before the good record"
    stop.set()
    await consumer
    assert bus.lag("fuzz", good_topic) == 0
    letters = [_letter(r) for r in bus.records(dlq_topic(good_topic))]
    assert len(letters) == expected_letters
    assert len(handled) == expected_handled + 1 and handled[-1] == MESSAGES["event"][1]
    for letter in letters:
        assert letter.cause == "malformed" and letter.group == "fuzz" and letter.error


async def test_a_record_with_an_empty_key_is_dead_lettered() -> None:
    """Found by the test above: the dead letter of a record with an empty key had an empty CloudEvent subject,
    so dead-lettering it raised and the consumer crashed. Its key is now topic/partition/offset."""
    topic, _, value, headers = GOOD[GOOD_EVENT]
    bus = InMemoryBus(partitions=1)
    bus.append(topic, b"", value, headers)
    stop = asyncio.Event()
    handled: list[Delivery] = []

    async def handler(delivery: Delivery) -> None:
        handled.append(delivery)

    consumer = asyncio.create_task(bus.consume([topic], "fuzz", handler, stop=stop))
    for _ in range(100):
        if not bus.lag("fuzz", topic) or consumer.done():
            break
        await asyncio.sleep(0.01)
    stop.set()
    await consumer
    (record,) = bus.records(dlq_topic(topic))
    assert record.key == f"{topic}/0/0".encode() and _letter(record).key_bytes is not None and not handled


def _letter(record: RawRecord) -> DeadLetter:
    message = decode(record.topic, record.key, record.value, record.headers).message
    assert isinstance(message, DeadLetter)
    return message


# -- the interruption-ingester's EventBridge parser -----------------------------------------------------------

REBALANCE = event("EC2 Instance Rebalance Recommendation", {"instance-id": "i-0123456789abcdef0"})
STATE_CHANGE = event("EC2 Instance State-change Notification",
                     {"instance-id": "i-0123456789abcdef0", "state": "stopping"})
EVENTS = [SPOT, HEALTH, REBALANCE, STATE_CHANGE]


@st.composite
def hostile_bodies(draw: st.DrawFn) -> str | bytes:
    kind = draw(st.sampled_from(["json", "bytes", "mutated"]))
    if kind == "json":
        return json.dumps(draw(json_values))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    body: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(EVENTS))))
    for _ in range(draw(st.integers(1, 3))):
        target = body if draw(st.booleans()) or not isinstance(body.get("detail"), dict) else body["detail"]
        if target and draw(st.booleans()):
            target.pop(draw(st.sampled_from(sorted(target))))
        elif target:
            oversized = st.integers(10**5, 10**6).map(lambda n: "i-" + "0" * n)
            target[draw(st.sampled_from(sorted(target)))] = draw(json_values | oversized)
    text = json.dumps(body)
    return text[: draw(st.integers(0, len(text)))] if draw(st.integers(0, 9)) == 0 else text


@FUZZ
@given(hostile_bodies())
def test_the_eventbridge_parser_never_raises(body: str | bytes) -> None:
    TRIED["eventbridge"] += 1
    parsed = parse_message(body)
    assert isinstance(parsed, Notice | Ignored)
    if isinstance(parsed, Ignored):
        assert parsed.reason and parsed.why
    OUTCOMES[f"eventbridge {type(parsed).__name__}"] += 1


@settings(FUZZ, max_examples=max(EXAMPLES // 10, 10))
@given(st.lists(hostile_bodies(), min_size=1, max_size=6))
def test_the_ingester_deletes_every_hostile_message_and_keeps_going(bodies: list[str | bytes]) -> None:
    """The ingester itself (SQS in memory, the InMemoryBus): each hostile message is ignored or published and
    deleted; none stays on the queue to come back forever, and a good message after them is published."""
    TRIED["ingester batches"] += 1
    TRIED["ingester messages"] += len(bodies)
    asyncio.run(_ingest([b if isinstance(b, str) else b.decode("utf-8", "replace") for b in bodies]))


async def _ingest(bodies: list[str]) -> None:
    sqs = FakeSqs()
    for body in bodies:
        sqs.send(body)
    good = sqs.send(spot(I1, event_id="ev-good"))
    bus = InMemoryBus()
    ingester = Ingester(SqsQueue(sqs, "q", wait_time_seconds=0), bus, MappingLookup({I1: "node-a"}), backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(ingester.run(stop))
    await eventually("the queue emptied", lambda: not sqs.messages or task.done(), 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 3)
    assert not sqs.messages and good in sqs.deleted
    assert any(i.node == "node-a" for i in interruptions(bus))


def test_zz_counts() -> None:
    """Prints the inputs tried (runs last in the module)."""
    print("\nrecords fuzzing: inputs tried", dict(TRIED), "outcomes", dict(OUTCOMES))
    assert TRIED["decode"] >= min(EXAMPLES, 100) or not TRIED
