"""The Kafka bus (distributed mode) on aiokafka.

Producer: idempotent (``enable_idempotence=True``, ``acks=all``), so retries neither duplicate nor
reorder a key's records. Consumer: ``enable_auto_commit=False``; offsets are committed only for records
whose handler returned or that were dead-lettered (``ebb.adapters.bus.base``), once per fetched batch and
at least every ``COMMIT_EVERY`` seconds; records of a partition are handled in order. Topics (each with its
``.dlq``; ``ebb.cluster.objects`` compacted) are created when missing, before the first publish or consume
on them.

``prefix`` is prepended to every topic name on the broker (several ebb installations, or tests,
sharing one Kafka); messages and handlers only ever see the logical names.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError, TopicAlreadyExistsError, for_code

from ebb.adapters.bus.base import Handler, Outcome, RawRecord, RetryPolicy, process, utcnow
from ebb.contracts import (
    DEFAULT_SOURCE,
    DeadLetter,
    Message,
    check_topic,
    dlq_topic,
    is_dlq_topic,
    to_kafka,
    topic_spec,
)

#: while one fetched batch is being handled, offsets are committed at least this often (seconds)
COMMIT_EVERY = 1.0

log = logging.getLogger("ebb.bus.kafka")

DEFAULT_PARTITIONS = 3


class KafkaBus:
    """A ``Bus`` on Kafka. Use as ``async with KafkaBus(...) as bus:`` (or ``start()`` / ``close()``)."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        prefix: str = "",
        source: str = DEFAULT_SOURCE,
        client_id: str = "ebb",
        partitions: int = DEFAULT_PARTITIONS,
        replication_factor: int = 1,
        retry: RetryPolicy | None = None,
        clock: Callable[[], datetime] | None = None,
        poll_timeout: float = 0.2,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.prefix = prefix
        self.source = source
        self.client_id = client_id
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.retry = retry or RetryPolicy()
        self.clock = clock
        self.poll_timeout = poll_timeout
        #: passed to every aiokafka client (security_protocol, ssl_context, sasl_*, ...)
        self.client_options = dict(client_options or {})
        self._producer: AIOKafkaProducer | None = None
        self._ensured: set[str] = set()
        self._ensure_lock = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._producer is not None:
            return
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            acks="all",
            enable_idempotence=True,
            **self.client_options,
        )
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # a producer that failed to connect still holds its client: close it
            raise
        self._producer = producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- topics -------------------------------------------------------------------------------------------

    def physical(self, topic: str) -> str:
        """The broker's name of a logical topic."""
        return self.prefix + topic

    def logical(self, topic: str) -> str:
        return topic.removeprefix(self.prefix)

    async def ensure_topics(self, topics: Iterable[str]) -> None:
        """Create the logical ``topics`` and their dead-letter topics where missing."""
        wanted: list[str] = []
        for topic in topics:
            topic_spec(topic)
            wanted.append(topic)
            if not is_dlq_topic(topic):
                wanted.append(dlq_topic(topic))
        async with self._ensure_lock:
            missing = [t for t in dict.fromkeys(wanted) if t not in self._ensured]
            if not missing:
                return
            admin = AIOKafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, client_id=self.client_id, **self.client_options
            )
            await admin.start()
            try:
                existing = set(await admin.list_topics())
                new = [
                    NewTopic(
                        self.physical(t),
                        num_partitions=self.partitions,
                        replication_factor=self.replication_factor,
                        topic_configs={"cleanup.policy": "compact" if topic_spec(t).compacted else "delete"},
                    )
                    for t in missing
                    if self.physical(t) not in existing
                ]
                if new:
                    response = await admin.create_topics(new)
                    for entry in response.topic_errors:
                        name, code = entry[0], entry[1]
                        if code not in (0, TopicAlreadyExistsError.errno):
                            raise for_code(code)(f"creating topic {name}: {entry[2] if len(entry) > 2 else ''}")
                    log.info("created topics %s", ", ".join(t.name for t in new))
            finally:
                await admin.close()
            self._ensured.update(missing)

    # -- producing ----------------------------------------------------------------------------------------

    async def publish(self, topic: str, message: Message) -> None:
        check_topic(topic, message)
        key, value, headers = to_kafka(message, source=self.source, time=self.clock() if self.clock else None)
        await self.ensure_topics([topic])
        await self._send(topic, key, value, headers)

    async def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
    ) -> None:
        if self._producer is None:
            raise RuntimeError("KafkaBus is not started")
        await self._producer.send_and_wait(self.physical(topic), value=value, key=key, headers=list(headers))

    # -- consuming ----------------------------------------------------------------------------------------

    async def consume(self, topics: Sequence[str], group: str, handler: Handler, *, stop: asyncio.Event) -> None:
        if not topics:
            raise ValueError("consume needs at least one topic")
        await self.ensure_topics(topics)
        consumer = AIOKafkaConsumer(
            *(self.physical(t) for t in topics),
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.client_options,
        )
        await consumer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=int(self.poll_timeout * 1000))
                for partition, records in batch.items():
                    if not await self._handle(consumer, partition, records, group=group, handler=handler, stop=stop):
                        return
        finally:
            await consumer.stop()

    async def _handle(
        self,
        consumer: AIOKafkaConsumer,
        partition: TopicPartition,
        records: list[ConsumerRecord[bytes, bytes]],
        *,
        group: str,
        handler: Handler,
        stop: asyncio.Event,
    ) -> bool:
        """Handle a partition's fetched records in order; False when the loop must end (stop).

        Offsets are committed after the records they cover were handled, once for the batch (and at
        least every ``COMMIT_EVERY`` seconds while a batch takes long): a commit is a broker round trip
        (~6 ms), and one per record capped a consumer near 150 records/s. After a crash the records
        handled since the last commit are delivered again, as at-least-once allows; consumers apply an
        id once."""
        done: int | None = None
        committed_at = time.monotonic()
        try:
            for record in records:
                if stop.is_set():
                    return False  # the rest stay uncommitted: delivered again after the restart
                if partition not in consumer.assignment():
                    done = None  # revoked by a rebalance: the new owner reads from the last commit
                    return True
                raw = RawRecord(
                    topic=self.logical(record.topic),
                    partition=record.partition,
                    offset=record.offset,
                    key=record.key,
                    value=record.value,
                    headers=tuple(record.headers),
                )
                outcome = await process(
                    raw,
                    group=group,
                    handler=handler,
                    retry=self.retry,
                    stop=stop,
                    dead_letter=self._dead_letter,
                    clock=self.clock or utcnow,
                )
                if outcome is Outcome.STOPPED:
                    return False
                done = record.offset + 1
                if time.monotonic() - committed_at >= COMMIT_EVERY:
                    if not await self._commit(consumer, partition, done):
                        done = None
                        return True
                    done, committed_at = None, time.monotonic()
            return True
        finally:
            if done is not None:
                await self._commit(consumer, partition, done)

    async def _commit(self, consumer: AIOKafkaConsumer, partition: TopicPartition, offset: int) -> bool:
        """Commit ``offset`` (the next to read); False when the partition moved to another member."""
        try:
            await consumer.commit({partition: offset})
        except (CommitFailedError, IllegalStateError) as e:
            # the partition moved to another member: it will see the records again (at least once)
            log.warning("commit of %s at %d failed: %s", partition, offset - 1, e)
            return False
        return True

    async def _dead_letter(self, letter: DeadLetter) -> None:
        topic = dlq_topic(letter.topic)
        try:
            await self.publish(topic, letter)
        except KafkaError:
            log.exception("could not write to %s", self.physical(topic))
            raise
