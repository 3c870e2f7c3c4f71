"""The in-memory bus: the embedded mode's Kafka, with the same semantics (``ebb.adapters.bus.base``).

Records go through the same CloudEvents encoding as on Kafka, into partitioned logs (partition =
CRC-32 of the key modulo the partition count, so one key keeps its order). Each consumer group has
committed offsets per partition; a consumer handles its partitions concurrently and each partition
in order, committing after the handler returns, dead-lettering to ``<topic>.dlq`` exactly as the
Kafka bus does (``ebb.adapters.bus.base``). The compacted topic keeps only the latest record per key
(superseded records are dropped at once; their offsets stay). Within one process a group's partition
has at most one consumer. ``start_at`` offsets are committed for the group when its consume begins (the
records before them are never read). A record is decoded once for all the groups that read it (the last
``DECODED_KEPT`` decodings are kept): the groups of one process then share its message, which a handler never
edits (a ``ClusterObject``'s object is held as it is, ``SnapshotStore.put``), and on Kafka each group decodes
its own copy. A ``ClusterObject`` published on a bus with a clock (the embedded mode's) is not even decoded once:
what decoding its record gives back is known when it is published (an equal message, as its object is plain JSON
for the encoder, with its type, source and time), so the bus keeps that; the record is encoded all the same, for
whoever reads it raw (``records``, a group that falls more than ``DECODED_KEPT`` records behind). Decoding them
was about a twentieth of a back-test's time. ``read_compacted`` takes the decodings kept too (it keeps none of its
own): the planner's first read of the cluster's objects, just published, decodes none of them.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ebb.adapters.bus.base import (
    Handler,
    InFlight,
    Offsets,
    Outcome,
    RawRecord,
    RetryPolicy,
    decode_record,
    latest_per_key,
    process,
    utcnow,
)
from ebb.adapters.clock import until_any
from ebb.contracts import (
    DEFAULT_SOURCE,
    ClusterObject,
    DeadLetter,
    Decoded,
    Message,
    check_topic,
    dlq_topic,
    to_kafka,
    topic_spec,
)

DEFAULT_PARTITIONS = 3
#: how many decoded records the bus keeps for the other groups that read them (`InMemoryBus._decode`): the
#: groups of a process read a topic's new records at about the same time
DECODED_KEPT = 4096


class BusError(RuntimeError):
    """A misuse of the bus (e.g. two consumers of one group's partition)."""


@dataclass
class _Partition:
    #: records by offset; None where compaction removed a superseded record
    log: list[RawRecord | None] = field(default_factory=list)
    latest: dict[bytes, int] = field(default_factory=dict)
    #: one event per running consumer loop, set on every append in the order the loops started (a dict, not a
    #: set: a set of events iterates in the order of their addresses, and the consumers would wake in a
    #: different order in every process, which the embedded mode's deterministic runs cannot have)
    listeners: dict[asyncio.Event, None] = field(default_factory=dict)


class InMemoryBus:
    """A ``Bus`` in process memory."""

    def __init__(
        self,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        retry: RetryPolicy | None = None,
        source: str = DEFAULT_SOURCE,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        self.partitions = partitions
        self.retry = retry or RetryPolicy()
        self.source = source
        #: the CloudEvent time of published messages and the DLQ failure time (simulated time in
        #: the embedded mode); the wall clock when None
        self.clock = clock
        self._topics: dict[str, list[_Partition]] = {}
        self._committed: dict[tuple[str, str, int], int] = {}
        self._owners: set[tuple[str, str, int]] = set()
        self._decoded: OrderedDict[tuple[str, int, int], Decoded] = OrderedDict()

    # -- producing ----------------------------------------------------------------------------------------

    async def publish(self, topic: str, message: Message) -> None:
        check_topic(topic, message)
        time = self.clock() if self.clock else None
        key, value, headers = to_kafka(message, source=self.source, time=time)
        position = self.append(topic, key, value, headers)
        if time is not None and type(message) is ClusterObject:
            # what decoding the record gives back, known without decoding it: a ClusterObject equal to this one
            # (its object is plain JSON, `to_kafka`), of its type, from this source, at this time
            self._keep_decoded((topic, *position), Decoded(message, message.ce_type(), self.source, time))

    async def publish_many(self, topic: str, messages: Sequence[Message]) -> None:
        for message in messages:
            check_topic(topic, message)
        for message in messages:
            await self.publish(topic, message)

    def append(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
    ) -> tuple[int, int]:
        """Append a raw record as a producer would (no validation); returns (partition, offset)."""
        partitions = self._partitions(topic)
        number = zlib.crc32(key) % self.partitions if key is not None else 0
        part = partitions[number]
        offset = len(part.log)
        part.log.append(RawRecord(topic, number, offset, key, value, tuple(headers)))
        if key is not None and self._compacted(topic):
            previous = part.latest.get(key)
            if previous is not None:
                part.log[previous] = None
            part.latest[key] = offset
        for listener in part.listeners:
            listener.set()
        return number, offset

    # -- inspecting ---------------------------------------------------------------------------------------

    def records(self, topic: str) -> list[RawRecord]:
        """The records of ``topic`` still in its log, partition by partition."""
        return [r for part in self._topics.get(topic, []) for r in part.log if r is not None]

    async def end_offsets(self, topic: str) -> dict[int, int]:
        topic_spec(topic)
        return {number: len(part.log) for number, part in enumerate(self._partitions(topic))}

    async def read_compacted(self, topic: str) -> dict[str, Message]:
        topic_spec(topic)
        return latest_per_key(topic, self.records(topic), self._kept_or_decoded)

    def committed(self, group: str, topic: str, partition: int) -> int:
        """The next offset ``group`` will read on ``topic``'s ``partition``."""
        return self._committed.get((group, topic, partition), 0)

    def lag(self, group: str, topic: str) -> int:
        """Records of ``topic`` that ``group`` has not committed yet."""
        return sum(
            len(part.log) - self.committed(group, topic, number)
            for number, part in enumerate(self._topics.get(topic, []))
        )

    def consumer_lags(self) -> dict[tuple[str, str], int]:
        """(group, topic) -> records not committed yet, for each group consuming now (``ebb_consumer_lag``)."""
        lags: dict[tuple[str, str], int] = {}
        for group, topic, number in sorted(self._owners):
            key = (group, topic)
            lags[key] = lags.get(key, 0) + len(self._topics[topic][number].log) - self.committed(group, topic, number)
        return lags

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
        for topic in topics:
            topic_spec(topic)  # unknown topics fail here, not on the first record
        owned = [(group, topic, n) for topic in topics for n in range(self.partitions)]
        taken = [o for o in owned if o in self._owners]
        if taken:
            raise BusError(f"group {group!r} already consumes {taken[0][1]!r} in this process")
        self._owners.update(owned)
        for _, topic, number in owned:
            start = (start_at or {}).get(topic, {}).get(number)
            if start is not None and start > self.committed(group, topic, number):
                self._committed[(group, topic, number)] = start
        tasks = [asyncio.create_task(self._run(topic, n, group, handler, stop, concurrency=concurrency))
                 for _, topic, n in owned]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                error = task.exception()
                if error is not None:
                    raise error
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._owners.difference_update(owned)

    async def _run(self, topic: str, number: int, group: str, handler: Handler, stop: asyncio.Event, *,
                   concurrency: int) -> None:
        part = self._partitions(topic)[number]
        position = (group, topic, number)
        wake = asyncio.Event()
        part.listeners[wake] = None
        try:
            if concurrency == 1:
                await self._loop(part, position, wake, handler, stop)
            else:
                await self._loop_concurrently(part, position, wake, handler, stop, limit=concurrency)
        finally:
            part.listeners.pop(wake, None)

    async def _loop(
        self, part: _Partition, position: tuple[str, str, int], wake: asyncio.Event, handler: Handler,
        stop: asyncio.Event,
    ) -> None:
        group = position[0]
        while not stop.is_set():
            offset = self._committed.get(position, 0)
            if offset >= len(part.log):
                wake.clear()
                await until_any(wake, stop)
                continue
            record = part.log[offset]
            if record is not None:
                outcome = await process(
                    record,
                    group=group,
                    handler=handler,
                    retry=self.retry,
                    stop=stop,
                    dead_letter=self._dead_letter,
                    clock=self.clock or utcnow,
                    decoder=self._decode,
                )
                if outcome is Outcome.STOPPED:
                    return
            self._committed[position] = offset + 1

    async def _loop_concurrently(
        self, part: _Partition, position: tuple[str, str, int], wake: asyncio.Event, handler: Handler,
        stop: asyncio.Event, *, limit: int,
    ) -> None:
        """``_loop`` with up to ``limit`` records in flight (``InFlight``), committed up to the first not handled."""
        group = position[0]
        flight = InFlight(limit, self._committed.get(position, 0))
        following = flight.committed
        try:
            while not stop.is_set():
                wake.clear()
                if not flight.harvest():
                    break
                while flight.has_room() and following < len(part.log):
                    record = part.log[following]
                    flight.start(following, None if record is None else process(
                        record, group=group, handler=handler, retry=self.retry, stop=stop,
                        dead_letter=self._dead_letter, clock=self.clock or utcnow, decoder=self._decode))
                    following += 1
                self._committed[position] = flight.committed
                await flight.wait(wake, stop)
            await flight.settle()  # a stop lets the running handlers end, and commits what they handled
            self._committed[position] = flight.committed
        finally:
            await flight.cancel()

    def _decode(self, record: RawRecord) -> Decoded:
        """The record decoded, once for every group that reads it while it is among the last ``DECODED_KEPT``
        (a record that does not decode raises ``ContractError`` each time)."""
        position = (record.topic, record.partition, record.offset)
        decoded = self._decoded.get(position)
        if decoded is None:
            decoded = decode_record(record)
            self._keep_decoded(position, decoded)
        return decoded

    def _kept_or_decoded(self, record: RawRecord) -> Decoded:
        """The record decoded: the decoding kept for it if there is one (a seed read of the compacted topic right
        after the simulated cluster published it, the embedded mode's start), else decoded now and not kept (a
        read of a whole topic would push out of `_decoded` the records its groups are about to read)."""
        decoded = self._decoded.get((record.topic, record.partition, record.offset))
        return decoded if decoded is not None else decode_record(record)

    def _keep_decoded(self, position: tuple[str, int, int], decoded: Decoded) -> None:
        self._decoded[position] = decoded
        if len(self._decoded) > DECODED_KEPT:
            self._decoded.popitem(last=False)

    async def _dead_letter(self, letter: DeadLetter) -> None:
        await self.publish(dlq_topic(letter.topic), letter)

    def _partitions(self, topic: str) -> list[_Partition]:
        if topic not in self._topics:
            self._topics[topic] = [_Partition() for _ in range(self.partitions)]
        return self._topics[topic]

    @staticmethod
    def _compacted(topic: str) -> bool:
        try:
            return topic_spec(topic).compacted
        except ValueError:
            return False
