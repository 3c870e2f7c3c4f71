"""The ingest loop: long-poll SQS, parse each message, publish its interruptions on ``ebb.interruptions``
(keyed by node), THEN delete the message (at least once).

Every SQS message is counted once in ``ebb_interruption_messages_total{result}``:

- ``published``: at least one interruption was published;
- ``unknown_node``: none of its instances is a known node (dropped);
- ``irrelevant``: a subscribed event that announces no interruption (e.g. a state change to ``running``);
- ``malformed`` / ``foreign``: not parseable / not an interruption event;
- ``failed``: publishing failed; the message is NOT deleted and comes back after its visibility timeout.

Karpenter's AWS provider's interruption metrics, under their names with ``ebb_`` for ``karpenter_``
(karpenter-provider-aws pkg/controllers/interruption/metrics.go): ``ebb_interruption_received_messages_total
{message_type}`` for every parsed message (Karpenter's kinds: ``spot_interrupted``, ``rebalance_recommendation``,
``scheduled_change``, ``instance_stopped``, ``instance_terminated``, ``no_op``; a malformed message is not
counted, as Karpenter deletes it uncounted), ``ebb_interruption_deleted_messages_total`` for every deleted
message, and ``ebb_interruption_message_queue_duration_seconds``, from the event's ``time`` until it was
handled (Karpenter's buckets).

All but ``failed`` are deleted. A message's interruptions have stable ids (a UUIDv5 of the EventBridge
event id, or the SQS message id, and the instance id), so a redelivered message republishes the same
ids and consumers apply them once. A failed receive, publish or delete backs off (exponential, with
jitter: ``ebb.adapters.backoff``, on the ingester's clock; a poll that succeeds starts the attempts again)
and resumes; setting ``stop`` cancels a receive in flight or a backoff wait, and ends the loop after the
batch in hand.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Final, Literal

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram
from pydantic import ValidationError
from tenacity import RetryCallState, retry_if_not_exception_type

from ebb.adapters.aws import Ignored, parse_message
from ebb.adapters.aws.eventbridge import Notice
from ebb.adapters.aws.sqs import SqsMessage, SqsQueue
from ebb.adapters.backoff import Backoff
from ebb.adapters.bus import Bus
from ebb.adapters.clock import Clock, Stopped, unless_stopped
from ebb.adapters.metrics import register_build_info
from ebb.contracts import TOPIC_INTERRUPTIONS, Interruption
from ebb.core.events import message_kind
from ebb_interruption_ingester.nodes import NodeLookup

log = structlog.get_logger("ebb_interruption_ingester")

#: namespace of the interruption message ids
ID_NAMESPACE: Final = uuid.UUID("6f1c1f5e-8a57-4c43-9b0e-2f1d7a3c9e11")

Result = Literal["published", "unknown_node", "irrelevant", "malformed", "foreign", "failed"]
RESULTS: Final[tuple[Result, ...]] = ("published", "unknown_node", "irrelevant", "malformed", "foreign", "failed")


#: sigs.k8s.io/karpenter pkg/metrics DurationBuckets
DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
                           0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25,
                           30, 40, 50, 60, 120, 150, 300, 450, 600)
def message_type(parsed: Notice | Ignored) -> str | None:
    """Karpenter's ``message_type`` of a parsed message: its ``Kind()`` (``ebb.core.events.message_kind``); None
    for a malformed message, which Karpenter deletes without counting it."""
    if isinstance(parsed, Ignored):
        return None if parsed.reason == "malformed" else "no_op"
    return message_kind(parsed.kind, parsed.instance_state)


class Metrics:
    """The service's Prometheus metrics, in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        register_build_info(self.registry)
        self.messages = Counter("ebb_interruption_messages", "SQS messages handled, by result.", ["result"],
                                registry=self.registry)
        for result in RESULTS:
            self.messages.labels(result=result)
        self.interruptions = Counter("ebb_interruptions_published", "Interruptions published, by kind.", ["kind"],
                                     registry=self.registry)
        self.unknown_instances = Counter("ebb_interruption_unknown_instances",
                                         "Instances named in messages that are no known node.", registry=self.registry)
        self.sqs_errors = Counter("ebb_interruption_sqs_errors", "Failed SQS receive or delete calls.",
                                  registry=self.registry)
        # Karpenter's AWS provider's
        self.received_messages = Counter(
            "ebb_interruption_received_messages_total",
            "Count of messages received from the SQS queue. Broken down by message type.",
            ["message_type"], registry=self.registry)
        self.deleted_messages = Counter(
            "ebb_interruption_deleted_messages_total", "Count of messages deleted from the SQS queue.",
            registry=self.registry)
        self.message_queue_duration = Histogram(
            "ebb_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by ebb.",
            registry=self.registry, buckets=DURATION_BUCKETS)

    def count(self, result: Result) -> float:
        """The current count of ``result`` (for tests and logs)."""
        value = self.registry.get_sample_value("ebb_interruption_messages_total", {"result": result})
        return float(value or 0.0)


class Ingester:
    """Moves interruptions from an SQS queue to the bus."""

    def __init__(
        self,
        queue: SqsQueue,
        bus: Bus,
        lookup: NodeLookup,
        *,
        metrics: Metrics | None = None,
        backoff: Backoff | None = None,
        topic: str = TOPIC_INTERRUPTIONS,
        clock: Clock | None = None,
    ) -> None:
        self.queue = queue
        self.bus = bus
        self.lookup = lookup
        self.metrics = metrics or Metrics()
        self.backoff = backoff or Backoff()
        self.topic = topic
        #: times the backoff
        self.clock = clock or Clock()

    async def run(self, stop: asyncio.Event) -> None:
        """Poll and handle until ``stop`` is set."""
        receiving = True

        def retrying_in(attempt: RetryCallState) -> None:
            error = attempt.outcome.exception() if attempt.outcome else None
            what = ("sqs receive failed" if receiving
                    else "handling a batch failed; the rest of it will be received again")
            log.warning(what, error=repr(error), attempt=attempt.attempt_number,
                        retry_in=round(attempt.upcoming_sleep, 2))

        while not stop.is_set():
            try:
                async for attempt in self.backoff.retrying(self.clock, stop, retry=retry_if_not_exception_type(Stopped),
                                                           before_sleep=retrying_in):
                    with attempt:
                        receiving = True
                        try:
                            messages = await unless_stopped(self.queue.receive(), stop)
                        except Stopped:
                            raise
                        except Exception:
                            self.metrics.sqs_errors.inc()
                            raise
                        receiving = False
                        for message in messages:
                            await self.handle(message)
            except Stopped:
                break

    async def handle(self, message: SqsMessage) -> Result:
        """Publish what ``message`` announces, then delete it. Raises when a publish or the delete failed
        (the message is then left on the queue)."""
        result = await self._publish(message)
        try:
            await self.queue.delete(message)
        except Exception:
            self.metrics.sqs_errors.inc()
            raise
        self.metrics.deleted_messages.inc()
        return result

    async def _publish(self, message: SqsMessage) -> Result:
        parsed = parse_message(message.body, received=self.clock.now())
        kind = message_type(parsed)
        if kind is not None:
            self.metrics.received_messages.labels(message_type=kind).inc()
        if isinstance(parsed, Ignored):
            self.metrics.messages.labels(result=parsed.reason).inc()
            level = log.info if parsed.reason == "irrelevant" else log.warning
            level("message ignored", message_id=message.message_id, result=parsed.reason, why=parsed.why)
            return parsed.reason
        published = 0
        for instance in parsed.instance_ids:
            node = self.lookup.node_for(instance)
            if node is None:
                self.metrics.unknown_instances.inc()
                log.warning("interruption for an unknown instance dropped", message_id=message.message_id,
                            kind=parsed.kind, instance_id=instance)
                continue
            try:
                interruption = Interruption(
                    id=uuid.uuid5(ID_NAMESPACE, f"{parsed.event_id or message.message_id}/{instance}"),
                    node=node,
                    kind=parsed.kind,
                    instance_id=instance,
                    deadline=parsed.deadline,
                    detail=parsed.detail[:4096],
                    instance_state=parsed.instance_state,
                )
            except ValidationError as e:
                log.error("interruption rejected by the contract", node=node, instance_id=instance, error=str(e))
                continue
            try:
                await self.bus.publish(self.topic, interruption)
            except Exception:
                self.metrics.messages.labels(result="failed").inc()
                raise
            published += 1
            self.metrics.interruptions.labels(kind=parsed.kind).inc()
            log.info("interruption published", node=node, kind=parsed.kind, instance_id=instance,
                     deadline=parsed.deadline.isoformat() if parsed.deadline else None, id=str(interruption.id))
        result: Result = "published" if published else "unknown_node"
        self.metrics.messages.labels(result=result).inc()
        self.metrics.message_queue_duration.observe(max(0.0, (self.clock.now() - parsed.time).total_seconds()))
        return result

