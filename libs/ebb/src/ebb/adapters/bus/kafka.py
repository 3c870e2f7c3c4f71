"""The Kafka bus (distributed mode) on aiokafka.

Producer: idempotent (``enable_idempotence=True``, ``acks=all``), so retries neither duplicate nor
reorder a key's records. Its batches hold up to ``PRODUCER_MAX_BATCH`` bytes per partition (aiokafka's
default, 16 KiB, is five or six cluster objects, so the cluster-watcher's batches went out as many small produce
batches; 512 KiB took it from 3,400-4,600 to 4,900-7,200 events/s into a local Kafka, docs/benchmarks.md), and no
linger (the watcher hands a whole batch over at once). Consumer: ``enable_auto_commit=False``; offsets are
committed only for records whose handler returned or that were dead-lettered (``ebb.adapters.bus.base``), once
per fetched batch and at least every ``COMMIT_EVERY`` seconds; records of a partition are handled in order (with
``concurrency`` above 1, started in order, up to that many at once, and committed up to the first not handled).
Topics (each with its ``.dlq``; ``ebb.cluster.objects`` compacted) are created when missing, before the first
publish or consume on them, and waited for until the broker's metadata has every partition of them led (a
consumer subscribed earlier would not be assigned them for minutes).

The bus connects on first use (``start()`` connects at once), waiting as long as Kafka cannot be reached (a
service started while Kafka is down, or restarting, waits for it; each attempt logged), and owns one admin
client for topic creation and partition metadata. ``end_offsets`` and ``read_compacted`` use a short-lived
consumer without a group (assigned partitions, nothing committed). ``start_at`` offsets are applied when the
group's partitions are assigned (a seek where the group committed less, so the records before are not fetched);
the consume loop also skips, and commits, any record before them it gets anyway.

``prefix`` is prepended to every topic name on the broker (several ebb installations, or tests,
sharing one Kafka); messages and handlers only ever see the logical names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import (
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    TopicAlreadyExistsError,
    for_code,
)
from tenacity import RetryCallState, retry_if_exception_type

from ebb.adapters.backoff import Backoff
from ebb.adapters.bus.base import (
    Handler,
    InFlight,
    Offsets,
    Outcome,
    RawRecord,
    RetryPolicy,
    latest_per_key,
    process,
    utcnow,
)
from ebb.adapters.clock import clock_of
from ebb.contracts import (
    DEFAULT_SOURCE,
    TOPICS,
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
#: the producer's batch size per partition, in bytes (under the broker's default message.max.bytes, 1 MiB)
PRODUCER_MAX_BATCH = 512 * 1024
#: the largest record the producer sends: the largest any topic takes (``TopicSpec.max_message_bytes``)
PRODUCER_MAX_REQUEST = max([1024 * 1024, *(s.max_message_bytes or 0 for s in TOPICS.values())])
#: the waits between attempts to reach Kafka when it cannot be reached (``KafkaBus._started``)
#: the ``client_options`` a bare ``AIOKafkaClient`` (the readiness probe's) takes: how to connect, not how to produce
_CLIENT_OPTIONS = frozenset({"security_protocol", "ssl_context", "sasl_mechanism", "sasl_plain_username",
                             "sasl_plain_password", "sasl_kerberos_service_name", "sasl_kerberos_domain_name",
                             "sasl_oauth_token_provider", "request_timeout_ms", "connections_max_idle_ms",
                             "metadata_max_age_ms", "api_version"})
CONNECT_BACKOFF = Backoff(initial=0.5, maximum=10.0, jitter=0.2)
Client = TypeVar("Client", AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient)


def _size_config(max_message_bytes: int | None) -> dict[str, str]:
    """The topic config of a topic whose records may be larger than Kafka's default."""
    return {} if max_message_bytes is None else {"max.message.bytes": str(max_message_bytes)}


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
        metadata_timeout: float = 60.0,
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
        #: how long ``end_offsets`` and ``read_compacted`` may take, waiting for a new topic's metadata included
        self.metadata_timeout = metadata_timeout
        #: passed to every aiokafka client (security_protocol, ssl_context, sasl_*, ...)
        self.client_options = dict(client_options or {})
        self._producer: AIOKafkaProducer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._start_lock = asyncio.Lock()
        self._ensured: set[str] = set()
        self._ensure_lock = asyncio.Lock()
        #: (group, topic, partition) -> records after the last one handled, as of its fetch (``consumer_lags``)
        self._lags: dict[tuple[str, str, int], int] = {}

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect the producer (idempotent; publishing and dead-lettering also connect on first use)."""
        async with self._start_lock:
            if self._producer is not None:
                return
            producer = await self._started(
                lambda: AIOKafkaProducer(
                    bootstrap_servers=self.bootstrap_servers,
                    client_id=self.client_id,
                    acks="all",
                    enable_idempotence=True,
                    **{"max_batch_size": PRODUCER_MAX_BATCH, "max_request_size": PRODUCER_MAX_REQUEST,
                       **self.client_options},
                ),
                "producer",
            )
            self._producer = producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        admin, self._admin = self._admin, None
        if producer is not None:
            await producer.stop()
        if admin is not None:
            await admin.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def ping(self) -> None:
        """Raise unless a broker answers a metadata request, on a connection of its own: the readiness probe
        (``ebb.adapters.health``), which must answer while the bus's own clients wait for Kafka."""
        client = AIOKafkaClient(bootstrap_servers=self.bootstrap_servers, client_id=f"{self.client_id}-probe",
                                **{k: v for k, v in self.client_options.items() if k in _CLIENT_OPTIONS})
        try:
            await client.bootstrap()
        finally:
            await client.close()

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
            admin = await self._admin_client()
            existing = set(await admin.list_topics())
            new = [
                NewTopic(
                    self.physical(t),
                    num_partitions=self.partitions,
                    replication_factor=self.replication_factor,
                    topic_configs={"cleanup.policy": "compact" if topic_spec(t).compacted else "delete",
                                   **_size_config(topic_spec(t).max_message_bytes)},
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
                async with asyncio.timeout(self.metadata_timeout):
                    await self._until_led(admin, [t.name for t in new])
            self._ensured.update(missing)

    @staticmethod
    async def _until_led(admin: AIOKafkaAdminClient, physical: list[str]) -> None:
        """Wait until the broker's metadata has each of the topics with every partition led. A consumer that
        subscribes before then is assigned none of a topic's partitions, and aiokafka learns of them only at its
        next metadata refresh (``metadata_max_age_ms``, 5 minutes): the consolidation-planner's first
        interruptions on a fresh installation were read minutes late."""
        while True:
            led = {entry.get("topic") for entry in await admin.describe_topics(physical)
                   if not entry.get("error_code") and entry.get("partitions")
                   and all(not p.get("error_code") and int(p.get("leader", -1)) >= 0 for p in entry["partitions"])}
            if led >= set(physical):
                return
            await asyncio.sleep(0.1)

    async def _started(self, make: Callable[[], Client], what: str) -> Client:
        """``make()`` a client and start it. While Kafka cannot be reached (``KafkaConnectionError``: not up yet,
        or restarting) the client is closed and a new one tried after ``CONNECT_BACKOFF`` (0.5 s doubling to
        10 s), forever, each wait logged: a service started while Kafka is down waits for it instead of exiting
        (issue 13, server restarts). Any other failure is raised."""

        def waiting(state: RetryCallState) -> None:
            log.warning("Kafka at %s cannot be reached for the %s (%s); trying again in %.1f s",
                        self.bootstrap_servers, what, state.outcome.exception() if state.outcome else None,
                        state.upcoming_sleep)

        async for attempt in CONNECT_BACKOFF.retrying(clock_of(None), retry=retry_if_exception_type(
                KafkaConnectionError), before_sleep=waiting):
            with attempt:
                client = make()
                try:
                    await client.start()
                except BaseException:
                    await _close(client)  # a client that failed to connect still holds its connections
                    raise
                return client
        raise AssertionError("unreachable: the retries never end")  # for mypy: the loop returns or raises

    async def _admin_client(self) -> AIOKafkaAdminClient:
        """The bus's admin client, connected on first use and closed by ``close()``."""
        async with self._start_lock:
            if self._admin is None:
                self._admin = await self._started(
                    lambda: AIOKafkaAdminClient(
                        bootstrap_servers=self.bootstrap_servers, client_id=self.client_id, **self.client_options
                    ),
                    "admin client",
                )
            return self._admin

    async def _partitions_of(self, topic: str) -> list[TopicPartition]:
        """The partitions of the logical ``topic`` (created if missing) as the brokers know them; waits while a
        topic just created is not yet known everywhere."""
        await self.ensure_topics([topic])
        physical = self.physical(topic)
        admin = await self._admin_client()
        while True:
            for entry in await admin.describe_topics([physical]):
                if entry.get("topic") == physical and not entry.get("error_code") and entry.get("partitions"):
                    numbers = sorted(int(p["partition"]) for p in entry["partitions"])
                    return [TopicPartition(physical, n) for n in numbers]
            await asyncio.sleep(0.1)

    # -- reading positions and compacted topics -----------------------------------------------------------

    async def end_offsets(self, topic: str) -> dict[int, int]:
        await self._admin_client()  # waits for Kafka as long as it takes; the metadata then within the timeout
        async with asyncio.timeout(self.metadata_timeout):
            partitions = await self._partitions_of(topic)
            async with self._reader() as consumer:
                ends = await consumer.end_offsets(partitions)
        return {tp.partition: int(offset) for tp, offset in ends.items()}

    async def read_compacted(self, topic: str) -> dict[str, Message]:
        await self._admin_client()
        async with asyncio.timeout(self.metadata_timeout):
            partitions = await self._partitions_of(topic)
            async with self._reader() as consumer:
                consumer.assign(partitions)
                await consumer.seek_to_beginning(*partitions)
                end = await consumer.end_offsets(partitions)
                records: list[RawRecord] = []
                remaining = {tp for tp in partitions if await consumer.position(tp) < end[tp]}
                while remaining:
                    batch = await consumer.getmany(*remaining, timeout_ms=500)
                    for tp, fetched in batch.items():
                        records.extend(self._raw(r) for r in fetched if r.offset < end[tp])
                    remaining = {tp for tp in remaining if await consumer.position(tp) < end[tp]}
        return latest_per_key(topic, records)

    @contextlib.asynccontextmanager
    async def _reader(self) -> AsyncIterator[AIOKafkaConsumer]:
        """A consumer without a group (nothing is committed), for positions and compacted reads."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap_servers, client_id=self.client_id,
                                    enable_auto_commit=False, **self.client_options)
        await consumer.start()
        try:
            yield consumer
        finally:
            await consumer.stop()

    def _raw(self, record: ConsumerRecord[bytes, bytes]) -> RawRecord:
        return RawRecord(
            topic=self.logical(record.topic),
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            value=record.value,
            headers=tuple(record.headers),
        )

    # -- producing ----------------------------------------------------------------------------------------

    async def publish(self, topic: str, message: Message) -> None:
        check_topic(topic, message)
        key, value, headers = to_kafka(message, source=self.source, time=self.clock() if self.clock else None)
        await self.ensure_topics([topic])
        await self._send(topic, key, value, headers)

    async def publish_many(self, topic: str, messages: Sequence[Message]) -> None:
        """Every send is handed to the producer before any acknowledgement is awaited, so a batch costs about
        one broker round trip instead of one per record (``send_and_wait`` per record capped the
        cluster-watcher near 900 records/s). The idempotent producer (``acks=all``) keeps a partition's
        records in the order they were sent, retries included."""
        for message in messages:
            check_topic(topic, message)
        if not messages:
            return
        time = self.clock() if self.clock else None
        encoded = [to_kafka(message, source=self.source, time=time) for message in messages]
        await self.ensure_topics([topic])
        producer = await self._connected()
        physical = self.physical(topic)
        pending: list[asyncio.Future[Any]] = []
        try:
            for key, value, headers in encoded:
                # ``send`` waits only for room in the producer's buffer; its future resolves on the ack
                pending.append(await producer.send(physical, value=value, key=key, headers=list(headers)))
        finally:
            # every send handed over settles before this returns or raises (nothing left unobserved)
            outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _connected(self) -> AIOKafkaProducer:
        if self._producer is None:
            await self.start()
        producer = self._producer
        if producer is None:
            raise RuntimeError("KafkaBus was closed")
        return producer

    async def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
    ) -> None:
        producer = await self._connected()
        await producer.send_and_wait(self.physical(topic), value=value, key=key, headers=list(headers))

    # -- consuming ----------------------------------------------------------------------------------------

    async def consume(
        self,
        topics: Sequence[str],
        group: str,
        handler: Handler,
        *,
        stop: asyncio.Event,
        start_at: Mapping[str, Offsets] | None = None,
        concurrency: int = 1,
    ) -> None:
        if not topics:
            raise ValueError("consume needs at least one topic")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        await self.ensure_topics(topics)
        starts = {
            TopicPartition(self.physical(topic), number): offset
            for topic, offsets in (start_at or {}).items()
            for number, offset in offsets.items()
        }
        consumer = await self._started(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap_servers,
                client_id=self.client_id,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                **self.client_options,
            ),
            f"consumer of group {group}",
        )
        try:
            if concurrency > 1:
                await self._consume_concurrently(consumer, [self.physical(t) for t in topics], starts, group=group,
                                                 handler=handler, stop=stop, limit=concurrency)
                return
            consumer.subscribe([self.physical(t) for t in topics], listener=_SeekToStart(consumer, starts))
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=int(self.poll_timeout * 1000))
                for partition, records in batch.items():
                    self._lag(group, partition, consumer.highwater(partition), records[0].offset if records else None)
                    if not await self._handle(consumer, partition, records, group=group, handler=handler, stop=stop,
                                              start=starts.get(partition, 0)):
                        return
        finally:
            for key in [k for k in self._lags if k[0] == group]:
                del self._lags[key]
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
        start: int,
    ) -> bool:
        """Handle a partition's fetched records in order; False when the loop must end (stop). Records before
        ``start`` are skipped (committed, not handled).

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
                if record.offset >= start:
                    outcome = await process(
                        self._raw(record),
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
                self._lag(group, partition, consumer.highwater(partition), done)
                if time.monotonic() - committed_at >= COMMIT_EVERY:
                    if not await self._commit(consumer, partition, done):
                        done = None
                        return True
                    done, committed_at = None, time.monotonic()
            return True
        finally:
            if done is not None:
                await self._commit(consumer, partition, done)

    async def _consume_concurrently(
        self,
        consumer: AIOKafkaConsumer,
        physical: list[str],
        starts: Mapping[TopicPartition, int],
        *,
        group: str,
        handler: Handler,
        stop: asyncio.Event,
        limit: int,
    ) -> None:
        """``consume`` with up to ``limit`` records of each partition in flight (``InFlight``): fetched records wait
        in the partition's queue (its fetching paused while they do), each partition's offset is committed up to
        its first record not handled as handlers finish, and a partition revoked by a rebalance has its handlers
        cancelled (their records, uncommitted, go to its new owner)."""
        flights: dict[TopicPartition, tuple[InFlight, deque[ConsumerRecord[bytes, bytes]]]] = {}
        sent: dict[TopicPartition, int] = {}  # the offset last committed, per partition

        async def revoked(partitions: Iterable[TopicPartition]) -> None:
            for partition in partitions:
                sent.pop(partition, None)
                gone = flights.pop(partition, None)
                if gone is not None:
                    await gone[0].cancel()

        async def commit(partition: TopicPartition, flight: InFlight) -> None:
            if flight.committed > sent.get(partition, -1):
                if await self._commit(consumer, partition, flight.committed):
                    sent[partition] = flight.committed
                else:
                    await revoked([partition])

        consumer.subscribe(physical, listener=_SeekToStart(consumer, starts, on_revoked=revoked))
        stopped = False
        try:
            while not stop.is_set() and not stopped:
                batch = await consumer.getmany(timeout_ms=int(self.poll_timeout * 1000))
                for partition, records in batch.items():
                    if partition not in consumer.assignment():
                        continue  # revoked meanwhile: its new owner reads them from the last commit
                    if partition not in flights:
                        flights[partition] = (InFlight(limit, records[0].offset), deque())
                        sent[partition] = records[0].offset
                    flights[partition][1].extend(records)
                for partition, (flight, waiting) in list(flights.items()):
                    if not flight.harvest():
                        stopped = True  # a handler stopped: its service is stopping
                        break
                    start = starts.get(partition, 0)
                    while waiting and flight.has_room():
                        record = waiting.popleft()
                        flight.start(record.offset, None if record.offset < start else process(
                            self._raw(record), group=group, handler=handler, retry=self.retry, stop=stop,
                            dead_letter=self._dead_letter, clock=self.clock or utcnow))
                    if waiting:
                        consumer.pause(partition)
                    elif partition in consumer.paused():
                        consumer.resume(partition)
                    self._lag(group, partition, consumer.highwater(partition), flight.committed)
                    await commit(partition, flight)
            for partition, (flight, _) in list(flights.items()):  # a stop lets the running handlers end
                await flight.settle()
                await commit(partition, flight)
        finally:
            for flight, _ in flights.values():
                await flight.cancel()

    def _lag(self, group: str, partition: TopicPartition, highwater: int | None, position: int | None) -> None:
        """Note the records of ``partition`` from ``position`` (the next to handle) to its end (``highwater``)."""
        if highwater is not None and position is not None:
            self._lags[(group, self.logical(partition.topic), partition.partition)] = max(highwater - position, 0)

    def consumer_lags(self) -> dict[tuple[str, str], int]:
        """(group, topic) -> records after the last handled, as of each partition's last fetch, for each group
        consuming now (``ebb_consumer_lag``)."""
        lags: dict[tuple[str, str], int] = {}
        for (group, topic, _partition), lag in list(self._lags.items()):
            lags[(group, topic)] = lags.get((group, topic), 0) + lag
        return lags

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


class _SeekToStart(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka has no type information
    """Moves each assigned partition that has a start offset there, where the group committed less (so the
    records before it are not fetched at all). A failure here is logged by aiokafka and costs only reading
    those records: the consume loop skips them anyway."""

    def __init__(self, consumer: AIOKafkaConsumer, starts: Mapping[TopicPartition, int], *,
                 on_revoked: Callable[[Iterable[TopicPartition]], Awaitable[None]] | None = None) -> None:
        self._consumer = consumer
        self._starts = starts
        self._on_revoked = on_revoked

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        if self._on_revoked is not None:
            await self._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        for partition in assigned:
            start = self._starts.get(partition)
            if start is None:
                continue
            committed = await self._consumer.committed(partition)
            if committed is None or committed < start:
                self._consumer.seek(partition, start)


async def _close(client: AIOKafkaProducer | AIOKafkaConsumer | AIOKafkaAdminClient) -> None:
    if isinstance(client, AIOKafkaAdminClient):
        await client.close()
    else:
        await client.stop()
