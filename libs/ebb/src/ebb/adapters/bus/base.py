"""The bus interface and the delivery semantics both implementations share.

``Bus`` is everything a service asks of the bus: publish, consume (optionally from given start offsets),
the end offsets of a topic, and the latest message per key of a compacted topic. ``KafkaBus`` and
``InMemoryBus`` implement all of it, so no caller needs to know which one it has; tests/kit/bus_conformance.py
runs one suite against both.

A consumer's handler is called once per record, in order per partition (so per key). A record is
committed only after its handler returns (at least once: a consumer that dies before the commit gets
the record again). A record that does not decode (``ContractError``) or whose handler raises
``PoisonMessage`` is written to ``<topic>.dlq`` with a ``DeadLetter`` envelope, then committed. Any
other exception is transient: the handler is retried with exponential backoff; when the attempts run
out the consume loop raises ``HandlerFailed`` without committing (the process restarts and the record
is delivered again). Setting the ``stop`` event ends the loop gracefully: a running handler finishes
and is committed, a backoff wait is cut short and its record left uncommitted.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from tenacity import RetryCallState, retry_if_exception

from ebb.adapters.backoff import Backoff, attempt_then_retry
from ebb.adapters.clock import Clock, Stopped, clock_of
from ebb.contracts import ContractError, DeadLetter, Decoded, Message, decode, is_dlq_topic

log = logging.getLogger("ebb.bus")


class PoisonMessage(Exception):
    """Raised by a handler for a message that can never be applied: it goes to the DLQ."""


class HandlerFailed(RuntimeError):
    """A handler kept failing with a transient error after every retry."""


@dataclass(frozen=True)
class RetryPolicy(Backoff):
    """The backoff of transient handler errors (``ebb.adapters.backoff``): 0.1 s doubling to 10 s, no jitter;
    ``max_attempts`` counts the first call."""

    initial: float = 0.1
    maximum: float = 10.0
    jitter: float = 0.0
    max_attempts: int | None = 10


@dataclass(frozen=True)
class Delivery:
    """A decoded record as a handler sees it."""

    topic: str
    partition: int
    offset: int
    key: str
    message: Message
    type: str
    source: str
    time: datetime | None
    attempt: int = 1


Handler = Callable[[Delivery], Awaitable[None]]


#: per partition number, an offset
Offsets = Mapping[int, int]


class Bus(Protocol):
    """Publish messages and consume topics; topic names are the logical ones of ``ebb.contracts``."""

    async def publish(self, topic: str, message: Message) -> None:
        """Publish ``message`` on ``topic`` (ContractError if it does not belong there)."""
        ...

    async def publish_many(self, topic: str, messages: Sequence[Message]) -> None:
        """Publish ``messages`` on ``topic`` in their order, several in flight at once; returns once every one
        is acknowledged (written), raises the first failure after every send has settled. Each key's records
        keep their order (one partition per key; the Kafka producer is idempotent). After a failure some of
        the messages may be written: a caller publishes the batch again (at least once), it never marks any
        of them done. ContractError, before anything is sent, if one does not belong on ``topic``."""
        ...

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
        """Call ``handler`` for every record of ``topics`` not yet committed by ``group`` until ``stop``
        is set; raises HandlerFailed when a transient error outlasts the retries.

        ``concurrency``: up to that many records of a partition are handled at once, each started in the
        partition's order (1: one after the other). A partition's offset is committed up to its first record not
        handled yet, so after a crash every record that was in flight is delivered again (handlers apply an id
        once); a handler that must keep two records apart (the executor: two commands on one node) does it itself.

        A group without committed offsets starts at the beginning of each partition. ``start_at`` gives,
        per topic and partition, the first offset this consumer delivers: the records before it are not
        read (neither handled nor dead-lettered) and count as committed, whatever the group committed.
        With the ``end_offsets`` taken before a read of the topic, the consumer delivers exactly what
        came after that read ("start at the latest offset" is ``start_at={topic: await
        bus.end_offsets(topic)}``); partitions and topics not named start as usual."""
        ...

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Per partition of ``topic`` (all of them, created if missing), the offset its next record gets."""
        ...

    async def read_compacted(self, topic: str) -> dict[str, Message]:
        """The latest message per key of ``topic`` (tombstones included), read from the beginning up to the
        end offsets taken when the read starts; records that do not decode are skipped with a warning (the
        DLQ is the consumers' job)."""
        ...


@dataclass(frozen=True)
class RawRecord:
    """A record as read from a (logical) topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class Outcome(enum.Enum):
    HANDLED = "handled"
    DEAD_LETTERED = "dead-lettered"
    #: a record of a DLQ topic that failed: logged and skipped (no DLQ of a DLQ)
    DROPPED = "dropped"
    #: stop was requested while the record waited for a retry: not committed
    STOPPED = "stopped"


def utcnow() -> datetime:
    return datetime.now(UTC)


def decode_record(record: RawRecord) -> Decoded:
    """``decode`` of a raw record's parts (``ContractError`` when it does not decode)."""
    return decode(record.topic, record.key, record.value, record.headers)


def latest_per_key(topic: str, records: Iterable[RawRecord],
                   decoder: Callable[[RawRecord], Decoded] = decode_record) -> dict[str, Message]:
    """The latest decodable message per key of ``records`` of ``topic`` (``read_compacted`` of both buses);
    a record that does not decode is logged and skipped. ``decoder`` decodes a record (the in-memory bus's
    gives back the decodings it keeps)."""
    latest: dict[str, Message] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        try:
            message = decoder(record).message
        except ContractError as e:
            log.warning("skipping a record of %s at %d/%d: %s", topic, record.partition, record.offset, e)
            continue
        latest[message.key()] = message
    return latest


class InFlight:
    """The records of one partition handled at once (``Bus.consume``'s ``concurrency``): each started in the
    partition's order while fewer than ``limit`` run, and ``committed``, the offset to commit, is the first one not
    handled yet, so a crash delivers again every record that was in flight (and none before)."""

    def __init__(self, limit: int, committed: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency must be at least 1, not {limit}")
        self.limit = limit
        #: the first offset not handled yet (what a commit stores)
        self.committed = committed
        self.tasks: dict[int, asyncio.Task[Outcome]] = {}
        self._handled: set[int] = set()

    def has_room(self) -> bool:
        return len(self.tasks) < self.limit

    def start(self, offset: int, handling: Awaitable[Outcome] | None) -> None:
        """Start handling the record at ``offset`` (None: nothing to do for it, e.g. a record before ``start_at``)."""
        if handling is None:
            self._handled.add(offset)
            self._advance()
        else:
            self.tasks[offset] = asyncio.ensure_future(handling)

    def harvest(self) -> bool:
        """Take the finished handlers: False when one stopped (``stop`` was set: its record stays uncommitted);
        the first handler's error (HandlerFailed) is raised."""
        stopped = False
        for offset, task in [(o, t) for o, t in self.tasks.items() if t.done()]:
            del self.tasks[offset]
            if task.result() is Outcome.STOPPED:
                stopped = True
            else:
                self._handled.add(offset)
        self._advance()
        return not stopped

    def _advance(self) -> None:
        while self.committed in self._handled:
            self._handled.discard(self.committed)
            self.committed += 1

    async def wait(self, *events: asyncio.Event) -> None:
        """Until a handler finishes or one of ``events`` is set."""
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait([*self.tasks.values(), *waiters], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)

    async def settle(self) -> None:
        """Wait for the handlers still running (at a stop they end, or stop themselves) and take them."""
        if self.tasks:
            await asyncio.wait(self.tasks.values())
        self.harvest()

    async def cancel(self) -> None:
        """Cancel the handlers still running (their records stay uncommitted: delivered again)."""
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()


async def process(
    record: RawRecord,
    *,
    group: str,
    handler: Handler,
    retry: RetryPolicy,
    stop: asyncio.Event,
    dead_letter: Callable[[DeadLetter], Awaitable[None]],
    clock: Clock | Callable[[], datetime] = utcnow,
    decoder: Callable[[RawRecord], Decoded] | None = None,
) -> Outcome:
    """Deliver one record with the semantics described above; the caller commits unless STOPPED. ``clock``
    dates a dead letter and times the retries (``RetryPolicy.retrying``: its waits end early on ``stop``).
    ``decoder`` decodes the record (`decode_record` when None; the in-memory bus shares one decoding of a
    record between its consumer groups)."""
    clock = clock_of(clock)

    async def give_up(cause: str, error: str) -> Outcome:
        if is_dlq_topic(record.topic):
            log.error("dropping a %s record of %s at %d/%d: %s", cause, record.topic, record.partition,
                      record.offset, error)
            return Outcome.DROPPED
        log.warning("dead-lettering a %s record of %s at %d/%d: %s", cause, record.topic, record.partition,
                    record.offset, error)
        await dead_letter(
            DeadLetter.of_record(
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                key=record.key,
                value=record.value,
                headers=record.headers,
                cause="malformed" if cause == "malformed" else "poison",
                error=error,
                group=group,
                failed_at=clock(),
            )
        )
        return Outcome.DEAD_LETTERED

    try:
        decoded = (decoder or decode_record)(record)
    except ContractError as e:
        return await give_up("malformed", str(e))
    where = f"{record.topic} at {record.partition}/{record.offset}"

    def retrying_in(state: RetryCallState) -> None:
        log.warning("handler for %s failed (attempt %d of %s), retrying in %.2fs: %r", where, state.attempt_number,
                    retry.max_attempts or "unlimited", state.upcoming_sleep,
                    state.outcome.exception() if state.outcome else None)

    def delivery(attempt: int) -> Delivery:
        return Delivery(topic=record.topic, partition=record.partition, offset=record.offset,
                        key=decoded.message.key(), message=decoded.message, type=decoded.type,
                        source=decoded.source, time=decoded.time, attempt=attempt)

    tried = 0

    async def attempt(number: int) -> None:
        nonlocal tried
        tried = number
        await handler(delivery(number))

    def retried(error: BaseException) -> bool:
        # a handler that stops because its service is stopping (``Stopped`` once ``stop`` is set) did not fail:
        # the record is left uncommitted for the next consumer, without a retry or a warning
        return not isinstance(error, PoisonMessage) and not (isinstance(error, Stopped) and stop.is_set())

    try:
        await attempt_then_retry(
            lambda: retry.retrying(clock, stop, retry=retry_if_exception(retried), before_sleep=retrying_in),
            attempt, retried=retried)
    except PoisonMessage as e:
        return await give_up("poison", f"{type(e).__name__}: {e}")
    except Stopped:
        return Outcome.STOPPED
    except Exception as e:
        raise HandlerFailed(f"handler for {where} failed {tried} times; last error: {e!r}") from e
    return Outcome.HANDLED
