"""The bus contract, written once and run against both buses: ``TestInMemoryBus`` (tests/service/test_bus_memory.py)
and ``TestKafkaBus`` (tests/integration/test_bus_kafka.py, a real broker) subclass ``BusConformance`` and say
only how to open a bus and how to look at it from outside (append a raw record, read a topic's raw records,
read a group's committed offsets). Whatever a service may rely on is asserted here: per-key order, CloudEvents
in binary mode, commit after the handler (a consumer that dies mid-handler, or whose retries run out, gets the
record again), the DLQ for malformed records and poison messages, retries with backoff, graceful stop, end
offsets, compacted reads, and ``start_at`` (seed-then-follow, start at the latest offset)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from ebb.adapters.bus import Bus, Delivery, HandlerFailed, Offsets, PoisonMessage, RawRecord, RetryPolicy
from ebb.adapters.clock import Stopped
from ebb.adapters.compacted import seed_snapshot
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import (
    TOPIC_CLUSTER_OBJECTS,
    TOPIC_DISRUPTION_EVENTS,
    TOPIC_INTERRUPTIONS,
    ClusterObject,
    ContractError,
    DeadLetter,
    DisruptionEvent,
    from_kafka,
    to_kafka,
)
from tests.kit.waiting import eventually

EVENTS = TOPIC_DISRUPTION_EVENTS
OBJECTS = TOPIC_CLUSTER_OBJECTS
T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
FAST = RetryPolicy(initial=0.005, multiplier=2, maximum=0.02, max_attempts=4)
SLOW = RetryPolicy(initial=30, max_attempts=5)
#: a record as a producer writes it: key, value, headers
Raw = tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]
#: a record no consumer can decode: JSON, but no CloudEvent headers
MALFORMED: Raw = (b"node-a", b'{"node": "node-a"}', (("content-type", b"application/json"),))


def event(node: str, minute: int, *, decision: str = "d-1") -> DisruptionEvent:
    return DisruptionEvent(decision_id=decision, node=node, phase="Proposed", message="",
                           at=T0 + timedelta(minutes=minute))


def node(name: str, version: str, *, deleted: bool = False) -> ClusterObject:
    doc = None if deleted else {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "resourceVersion": version}}
    return ClusterObject(kind="Node", namespace="", name=name, resource_version=version, object=doc)


class Consumer:
    """A consume loop running as a task; ``close()`` sets its stop event and waits for it."""

    def __init__(self, bus: Bus, topics: Sequence[str], group: str, handler: Callable[[Delivery], Awaitable[None]],
                 *, start_at: Mapping[str, Offsets] | None = None, grace: float = 10, concurrency: int = 1) -> None:
        self.stop = asyncio.Event()
        self.grace = grace
        self.task = asyncio.create_task(bus.consume(topics, group, handler, stop=self.stop, start_at=start_at,
                                                    concurrency=concurrency))

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, timeout=self.grace)

    async def kill(self) -> None:
        """Cancel the loop, as a process that dies would leave it: nothing more is committed."""
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


class BusConformance:
    """The shared tests. A subclass provides the bus and the outside views of it below."""

    #: how long a condition may take to come true (a real broker: a group join, a fetch)
    patience: float = 5.0
    #: how long a graceful stop may take
    prompt: float = 1.0

    def open_bus(self, *, partitions: int = 3, retry: RetryPolicy | None = None, source: str = "/ebb/test",
                 clock: Callable[[], datetime] | None = None) -> AbstractAsyncContextManager[Bus]:
        """A new bus on topics of its own (empty)."""
        raise NotImplementedError

    async def append_raw(self, bus: Bus, topic: str, record: Raw) -> None:
        """Write ``(key, value, headers)`` to ``topic`` as a foreign producer would (no validation)."""
        raise NotImplementedError

    async def raw_records(self, bus: Bus, topic: str) -> list[RawRecord]:
        """The records of ``topic`` as stored, in (partition, offset) order."""
        raise NotImplementedError

    async def committed(self, bus: Bus, group: str, topic: str) -> dict[int, int]:
        """The offsets ``group`` committed on ``topic``, per partition (partitions without a commit left out)."""
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------------------------

    async def until(self, what: str, condition: Callable[[], bool]) -> None:
        await eventually(what, condition, within=self.patience, interval=0.01)

    async def committed_total(self, bus: Bus, group: str, topic: str) -> int:
        return sum((await self.committed(bus, group, topic)).values())

    def consumer(self, bus: Bus, topics: Sequence[str], group: str, handler: Callable[[Delivery], Awaitable[None]],
                 *, start_at: Mapping[str, Offsets] | None = None, concurrency: int = 1) -> Consumer:
        return Consumer(bus, topics, group, handler, start_at=start_at, grace=self.patience, concurrency=concurrency)

    async def dead_letters(self, bus: Bus, topic: str, count: int) -> list[DeadLetter]:
        """The first ``count`` letters of ``topic``'s DLQ, read with a consumer like any other topic."""
        letters: list[DeadLetter] = []

        async def collect(delivery: Delivery) -> None:
            assert isinstance(delivery.message, DeadLetter)
            letters.append(delivery.message)

        reader = self.consumer(bus, [topic + ".dlq"], "operator", collect)
        await self.until(f"{count} dead letters", lambda: len(letters) >= count)
        await reader.close()
        return sorted(letters, key=lambda letter: (letter.partition, letter.offset))

    # -- publish and consume ------------------------------------------------------------------------------

    async def test_per_key_order_is_kept(self) -> None:
        async with self.open_bus(partitions=4) as bus:
            nodes = [f"node-{i}" for i in range(6)]
            for minute in range(20):
                for name in nodes:
                    await bus.publish(EVENTS, event(name, minute))
            seen: dict[str, list[datetime]] = {n: [] for n in nodes}
            partitions: dict[str, set[int]] = {n: set() for n in nodes}
            rng = random.Random(7)

            async def handler(delivery: Delivery) -> None:
                await asyncio.sleep(rng.random() / 1000)  # partitions interleave
                assert isinstance(delivery.message, DisruptionEvent)
                assert delivery.key == delivery.message.node
                seen[delivery.message.node].append(delivery.message.at)
                partitions[delivery.key].add(delivery.partition)

            consumer = self.consumer(bus, [EVENTS], "planner", handler)
            await self.until("120 records handled", lambda: sum(map(len, seen.values())) == 120)
            await consumer.close()
            for name in nodes:
                assert seen[name] == sorted(seen[name]) and len(seen[name]) == 20
                assert len(partitions[name]) == 1  # the records of one key share a partition
            assert await self.committed_total(bus, "planner", EVENTS) == 120

    async def test_a_consumer_group_reports_what_it_has_not_handled(self) -> None:
        """``consumer_lags()`` (``ebb_consumer_lag``): the records a consuming group has not handled yet, per topic;
        none for a group that stopped."""
        async with self.open_bus(partitions=2) as bus:
            handled: list[int] = []
            release = asyncio.Event()

            async def handler(delivery: Delivery) -> None:
                handled.append(delivery.offset)
                if len(handled) > 2:
                    await release.wait()

            await bus.publish_many(EVENTS, [event("node-a", minute) for minute in range(2)])
            consumer = self.consumer(bus, [EVENTS], "lagging", handler)
            lags = getattr(bus, "consumer_lags")  # noqa: B009  (not part of the Bus protocol)
            await self.until("the first two handled",
                             lambda: len(handled) == 2 and lags().get(("lagging", EVENTS)) == 0)
            await bus.publish_many(EVENTS, [event("node-a", minute) for minute in range(2, 6)])
            await self.until("the third waiting", lambda: len(handled) == 3)
            await self.until("four behind", lambda: lags().get(("lagging", EVENTS)) == 4)
            release.set()
            await self.until("all handled", lambda: lags().get(("lagging", EVENTS)) == 0 and len(handled) == 6)
            await consumer.close()
            assert ("lagging", EVENTS) not in lags()

    async def test_a_batch_keeps_each_keys_order_and_a_wrong_topic_sends_nothing(self) -> None:
        async with self.open_bus(partitions=4) as bus:
            nodes = [f"node-{i}" for i in range(6)]
            await bus.publish_many(EVENTS, [event(name, minute) for minute in range(50) for name in nodes])
            records = await self.raw_records(bus, EVENTS)
            assert len(records) == 300
            for name in nodes:
                mine = [r for r in records if r.key == name.encode()]
                assert len({r.partition for r in mine}) == 1  # one partition per key, in the batch's order
                assert [r.offset for r in mine] == sorted(r.offset for r in mine)
                decoded = [from_kafka(EVENTS, r.key, r.value, r.headers) for r in mine]
                assert [m.at for m in decoded if isinstance(m, DisruptionEvent)] == [
                    T0 + timedelta(minutes=m) for m in range(50)]
            with pytest.raises(ContractError):  # checked before anything is sent
                await bus.publish_many(EVENTS, [event("node-x", 0), node("n", "1")])
            assert len(await self.raw_records(bus, EVENTS)) == 300
            await bus.publish_many(EVENTS, [])

    async def test_published_records_are_cloudevents_in_binary_mode(self) -> None:
        async with self.open_bus(source="/ebb/planner", clock=lambda: T0) as bus:
            message = event("node-a", 1)
            upsert = node("node-a", "7")
            tombstone = node("node-a", "8", deleted=True)
            await bus.publish(EVENTS, message)
            await bus.publish(OBJECTS, upsert)
            await bus.publish(OBJECTS, tombstone)
            [record] = await self.raw_records(bus, EVENTS)
            assert (record.key, record.value, list(record.headers)) == to_kafka(message, source="/ebb/planner", time=T0)
            headers = dict(record.headers)
            assert headers["ce_specversion"] == b"1.0" and headers["content-type"] == b"application/json"
            assert {"ce_id", "ce_source", "ce_time", "ce_type"} <= headers.keys()
            # the deletion is a real tombstone: a null value (superseded versions may be compacted away)
            last = (await self.raw_records(bus, OBJECTS))[-1]
            assert last.key == b"Node//node-a" and last.value is None
            assert dict(last.headers)["ce_type"] == b"sh.ebb.object.deleted.v1"
            assert from_kafka(OBJECTS, last.key, last.value, last.headers) == tombstone

    async def test_groups_are_independent_and_an_idle_consumer_stops_promptly(self) -> None:
        async with self.open_bus() as bus:
            seen: dict[str, list[UUID]] = {"a": [], "b": []}

            def counting(group: str) -> Callable[[Delivery], Awaitable[None]]:
                async def handler(delivery: Delivery) -> None:
                    seen[group].append(delivery.message.id)

                return handler

            first, second = (self.consumer(bus, [EVENTS], g, counting(g)) for g in ("a", "b"))
            await asyncio.sleep(0.05)
            message = event("node-a", 1)
            await bus.publish(EVENTS, message)  # wakes consumers that wait for records
            await self.until("both groups got the record", lambda: seen == {"a": [message.id], "b": [message.id]})
            began = asyncio.get_running_loop().time()
            await asyncio.gather(first.close(), second.close())
            assert asyncio.get_running_loop().time() - began < self.prompt

    async def test_known_topics_and_types_only(self) -> None:
        async with self.open_bus() as bus:

            async def handler(delivery: Delivery) -> None:
                return None

            with pytest.raises(ContractError, match="unknown topic"):
                await bus.consume(["ebb.nope"], "planner", handler, stop=asyncio.Event())
            with pytest.raises(ContractError, match="does not belong on topic"):
                await bus.publish(TOPIC_INTERRUPTIONS, event("node-a", 1))
            with pytest.raises(ContractError, match="unknown topic"):
                await bus.end_offsets("ebb.nope")

    # -- commit after handle ------------------------------------------------------------------------------

    async def test_a_consumer_that_dies_mid_handler_gets_the_record_again(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            message = event("node-b", 1)
            await bus.publish(EVENTS, message)
            started = asyncio.Event()

            async def dies(delivery: Delivery) -> None:
                started.set()
                await asyncio.Event().wait()  # the process dies here, mid-handler

            consumer = self.consumer(bus, [EVENTS], "executor", dies)
            await asyncio.wait_for(started.wait(), self.patience)
            await consumer.kill()
            assert await self.committed_total(bus, "executor", EVENTS) == 0

            again: list[Delivery] = []

            async def handler(delivery: Delivery) -> None:
                again.append(delivery)

            consumer = self.consumer(bus, [EVENTS], "executor", handler)
            await self.until("the record delivered again", lambda: len(again) == 1)
            await consumer.close()
            assert again[0].message == message
            assert await self.committed(bus, "executor", EVENTS) == {0: 1}

    async def test_records_are_committed_up_to_the_last_one_handled(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            messages = [event("node-c", minute) for minute in range(5)]  # one key: one partition, one batch
            for message in messages:
                await bus.publish(EVENTS, message)
            seen: list[Delivery] = []
            stuck = asyncio.Event()

            async def handler(delivery: Delivery) -> None:
                seen.append(delivery)
                if len(seen) == 4:
                    stuck.set()
                    await asyncio.Event().wait()  # the fourth never finishes: the consumer dies here

            consumer = self.consumer(bus, [EVENTS], "batch", handler)
            await asyncio.wait_for(stuck.wait(), self.patience)
            await consumer.kill()
            assert await self.committed(bus, "batch", EVENTS) == {0: 3}  # the three handled, not the fourth

            rest: list[Delivery] = []

            async def again(delivery: Delivery) -> None:
                rest.append(delivery)

            consumer = self.consumer(bus, [EVENTS], "batch", again)
            await self.until("the last two delivered", lambda: len(rest) == 2)
            await consumer.close()
            assert [d.message for d in rest] == messages[3:]
            assert await self.committed(bus, "batch", EVENTS) == {0: 5}

    async def test_concurrent_handlers_start_in_order_and_commit_up_to_the_first_not_handled(self) -> None:
        """``concurrency``: at most that many records of a partition in flight, started in the partition's order;
        one that takes long holds the commit, not the records after it."""
        async with self.open_bus(partitions=1) as bus:
            messages = [event("node-c", minute) for minute in range(6)]  # one key: one partition
            for message in messages:
                await bus.publish(EVENTS, message)
            started: list[int] = []
            done: list[int] = []
            running = most = 0
            release = asyncio.Event()

            async def handler(delivery: Delivery) -> None:
                nonlocal running, most
                started.append(delivery.offset)
                running += 1
                most = max(most, running)
                if delivery.offset == 0:
                    await release.wait()
                else:
                    await asyncio.sleep(0.01)
                running -= 1
                done.append(delivery.offset)

            consumer = self.consumer(bus, [EVENTS], "executor", handler, concurrency=3)
            await self.until("all but the first handled", lambda: sorted(done) == [1, 2, 3, 4, 5])
            assert started == [0, 1, 2, 3, 4, 5] and most == 3
            assert await self.committed_total(bus, "executor", EVENTS) == 0  # the first is not handled yet
            release.set()
            await self.until("the first handled", lambda: 0 in done)
            await consumer.close()
            assert await self.committed(bus, "executor", EVENTS) == {0: 6}

    async def test_a_concurrent_consumer_that_dies_gets_every_record_in_flight_again(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            messages = [event("node-c", minute) for minute in range(4)]
            for message in messages:
                await bus.publish(EVENTS, message)
            handled: list[int] = []
            stuck = asyncio.Event()

            async def handler(delivery: Delivery) -> None:
                if delivery.offset == 1:
                    stuck.set()
                    await asyncio.Event().wait()  # never finishes: the consumer dies here
                handled.append(delivery.offset)

            consumer = self.consumer(bus, [EVENTS], "executor", handler, concurrency=2)
            await asyncio.wait_for(stuck.wait(), self.patience)
            await self.until("the others handled", lambda: sorted(handled) == [0, 2, 3])
            for _ in range(int(self.patience / 0.05)):  # the first is committed, and nothing past the one in flight
                if await self.committed(bus, "executor", EVENTS) == {0: 1}:
                    break
                await asyncio.sleep(0.05)
            await consumer.kill()
            assert await self.committed(bus, "executor", EVENTS) == {0: 1}

            again: list[int] = []

            async def fixed(delivery: Delivery) -> None:
                again.append(delivery.offset)

            consumer = self.consumer(bus, [EVENTS], "executor", fixed, concurrency=2)
            await self.until("delivered again from the one in flight", lambda: len(again) == 3)
            await consumer.close()
            assert sorted(again) == [1, 2, 3]
            assert await self.committed(bus, "executor", EVENTS) == {0: 4}

    async def test_stop_lets_the_running_handler_finish_and_commit(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            await bus.publish(EVENTS, event("node-a", 1))
            await bus.publish(EVENTS, event("node-a", 2))
            started, release = asyncio.Event(), asyncio.Event()
            finished: list[int] = []

            async def handler(delivery: Delivery) -> None:
                started.set()
                await release.wait()
                finished.append(delivery.offset)

            consumer = self.consumer(bus, [EVENTS], "planner", handler)
            await asyncio.wait_for(started.wait(), self.patience)
            consumer.stop.set()
            release.set()
            await asyncio.wait_for(consumer.task, self.patience)
            assert finished == [0]
            assert await self.committed(bus, "planner", EVENTS) == {0: 1}

    # -- dead letters and retries -------------------------------------------------------------------------

    async def test_malformed_records_and_poison_messages_go_to_the_dlq_and_are_committed(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            await self.append_raw(bus, EVENTS, MALFORMED)
            poison, good = event("node-a", 1, decision="d-poison"), event("node-a", 2, decision="d-good")
            await bus.publish(EVENTS, poison)
            await bus.publish(EVENTS, good)
            handled: list[Delivery] = []

            async def handler(delivery: Delivery) -> None:
                if delivery.message == poison:
                    raise PoisonMessage("d-poison is not in the store")
                handled.append(delivery)

            consumer = self.consumer(bus, [EVENTS], "planner", handler)
            await self.until("the good record handled", lambda: len(handled) == 1)
            await consumer.close()
            assert handled[0].message == good and handled[0].offset == 2
            assert await self.committed(bus, "planner", EVENTS) == {0: 3}

            malformed, poisoned = await self.dead_letters(bus, EVENTS, 2)
            assert (malformed.topic, malformed.partition, malformed.offset, malformed.cause) == (EVENTS, 0, 0,
                                                                                               "malformed")
            assert "missing header(s) ce_specversion, ce_id, ce_source, ce_type" in malformed.error
            assert malformed.group == "planner"
            key, value, headers = MALFORMED
            assert malformed.original() == (key, value, list(headers))
            assert (poisoned.topic, poisoned.offset, poisoned.cause) == (EVENTS, 1, "poison")
            assert poisoned.error == "PoisonMessage: d-poison is not in the store"
            poison_key, poison_value, poison_headers = poisoned.original()
            assert from_kafka(EVENTS, poison_key, poison_value, poison_headers) == poison

    async def test_transient_errors_are_retried_with_backoff(self) -> None:
        async with self.open_bus(partitions=1, retry=FAST) as bus:
            message = event("node-a", 1)
            await bus.publish(EVENTS, message)
            attempts: list[tuple[int, float]] = []

            async def handler(delivery: Delivery) -> None:
                attempts.append((delivery.attempt, asyncio.get_running_loop().time()))
                if delivery.attempt < 3:
                    raise ConnectionError("database unavailable")
                assert delivery.message == message

            consumer = self.consumer(bus, [EVENTS], "planner", handler)
            await self.until("handled on the third attempt", lambda: len(attempts) == 3)
            await consumer.close()
            assert [a for a, _ in attempts] == [1, 2, 3]
            assert attempts[1][1] - attempts[0][1] >= FAST.delay(1) * 0.9
            assert attempts[2][1] - attempts[1][1] >= FAST.delay(2) * 0.9
            assert await self.committed(bus, "planner", EVENTS) == {0: 1}
            assert await self.raw_records(bus, EVENTS + ".dlq") == []

    async def test_exhausted_retries_fail_the_loop_without_commit(self) -> None:
        async with self.open_bus(partitions=1, retry=FAST) as bus:
            await bus.publish(EVENTS, event("node-a", 1))
            calls = 0

            async def broken(delivery: Delivery) -> None:
                nonlocal calls
                calls += 1
                raise ConnectionError("still down")

            with pytest.raises(HandlerFailed, match="failed 4 times"):
                await asyncio.wait_for(bus.consume([EVENTS], "planner", broken, stop=asyncio.Event()), self.patience)
            assert calls == FAST.max_attempts
            assert await self.committed_total(bus, "planner", EVENTS) == 0
            assert await self.raw_records(bus, EVENTS + ".dlq") == []

            # restarted, the group gets the record again (at least once)
            handled: list[Delivery] = []

            async def fixed(delivery: Delivery) -> None:
                handled.append(delivery)

            consumer = self.consumer(bus, [EVENTS], "planner", fixed)
            await self.until("the record delivered again", lambda: len(handled) == 1)
            await consumer.close()
            assert await self.committed(bus, "planner", EVENTS) == {0: 1}

    async def test_stop_during_backoff_leaves_the_record_uncommitted(self) -> None:
        async with self.open_bus(partitions=1, retry=SLOW) as bus:
            await bus.publish(EVENTS, event("node-a", 1))
            calls = 0

            async def handler(delivery: Delivery) -> None:
                nonlocal calls
                calls += 1
                raise ConnectionError("down")

            consumer = self.consumer(bus, [EVENTS], "planner", handler)
            await self.until("the first attempt", lambda: calls == 1)
            began = asyncio.get_running_loop().time()
            await consumer.close()  # does not wait out the 30 s backoff
            assert asyncio.get_running_loop().time() - began < self.prompt
            assert calls == 1
            assert await self.committed_total(bus, "planner", EVENTS) == 0

    async def test_a_handler_stopped_by_its_service_leaves_the_record_without_a_retry(
            self, caplog: pytest.LogCaptureFixture) -> None:
        """A handler that gives up because its service is stopping (``Stopped``, the stop being set) did not fail:
        the record stays uncommitted for the next consumer, with no retry and no warning of one."""
        async with self.open_bus(partitions=1, retry=FAST) as bus:
            await bus.publish(EVENTS, event("node-a", 1))
            calls = 0
            consumer: Consumer | None = None

            async def stopping(delivery: Delivery) -> None:
                nonlocal calls
                calls += 1
                assert consumer is not None
                consumer.stop.set()  # the service stops while the handler works
                raise Stopped

            with caplog.at_level(logging.WARNING, logger="ebb.bus"):
                consumer = self.consumer(bus, [EVENTS], "executor", stopping)
                await asyncio.wait_for(consumer.task, self.patience)
            assert calls == 1
            assert [r.getMessage() for r in caplog.records if "failed" in r.getMessage()] == []
            assert await self.committed_total(bus, "executor", EVENTS) == 0

    # -- positions and compacted topics -------------------------------------------------------------------

    async def test_end_offsets_name_every_partition_and_count_compacted_records(self) -> None:
        async with self.open_bus(partitions=2) as bus:
            assert await bus.end_offsets(OBJECTS) == {0: 0, 1: 0}
            for version in range(5):
                await bus.publish(OBJECTS, node("a", str(version)))  # one key: one partition
            ends = await bus.end_offsets(OBJECTS)
            assert sorted(ends.values()) == [0, 5]  # offsets stay when compaction drops superseded records

    async def test_read_compacted_gives_the_latest_message_per_key(self, caplog: pytest.LogCaptureFixture) -> None:
        async with self.open_bus(partitions=2, clock=lambda: T0) as bus:
            assert await bus.read_compacted(OBJECTS) == {}
            versions = [node("node-a", str(version)) for version in range(5)]
            for version in versions:
                await bus.publish(OBJECTS, version)
            web = ClusterObject(kind="Pod", namespace="default", name="web", resource_version="1", object={"spec": {}})
            gone = ClusterObject(kind="Pod", namespace="default", name="web", resource_version="2", object=None)
            await bus.publish(OBJECTS, web)
            await bus.publish(OBJECTS, gone)
            await self.append_raw(bus, OBJECTS, (b"Node//bad", b"{}", ()))
            with caplog.at_level(logging.WARNING, logger="ebb.bus"):
                latest = await bus.read_compacted(OBJECTS)
            assert latest == {"Node//node-a": versions[-1], "Pod/default/web": gone}  # the tombstone too
            assert any("skipping a record of ebb.cluster.objects" in r.getMessage() for r in caplog.records)

            # following the topic from its beginning rebuilds the same state
            rebuilt: dict[str, ClusterObject] = {}

            async def rebuild(delivery: Delivery) -> None:
                assert isinstance(delivery.message, ClusterObject)
                assert delivery.time == T0
                rebuilt[delivery.key] = delivery.message

            consumer = self.consumer(bus, [OBJECTS], "watcher-replica", rebuild)
            await self.until("the topic read", lambda: rebuilt == latest)
            await consumer.close()

    async def test_a_group_started_at_the_ends_before_a_snapshot_never_sets_it_back(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            await bus.publish(OBJECTS, node("gone", "1"))
            await bus.publish(OBJECTS, node("kept", "2"))
            await bus.publish(OBJECTS, node("gone", "3", deleted=True))
            await self.append_raw(bus, OBJECTS, (b"Node//bad", b"{}", ()))  # before the start: not read at all
            ends = await bus.end_offsets(OBJECTS)
            assert ends == {0: 4}
            store = SnapshotStore(bundled_catalog=[])
            assert await seed_snapshot(store, bus) == 1
            seen: list[str] = []

            async def handle(delivery: Delivery) -> None:
                assert isinstance(delivery.message, ClusterObject)
                seen.append(delivery.message.name)
                store.apply(delivery.message)
                assert "Node//gone" not in store, "a deleted node came back"

            consumer = self.consumer(bus, [OBJECTS], "fresh", handle, start_at={OBJECTS: ends})
            await bus.publish(OBJECTS, node("new", "4"))
            await self.until("the new node applied", lambda: bool(seen))
            await consumer.close()
            assert seen == ["new"]  # only what came after the snapshot
            assert await self.committed(bus, "fresh", OBJECTS) == {0: 5}
            assert sorted(k for k in ("Node//kept", "Node//new", "Node//gone") if k in store) == ["Node//kept",
                                                                                                   "Node//new"]
            assert await self.raw_records(bus, OBJECTS + ".dlq") == []  # the record before the start: not read

    async def test_start_at_names_topics_and_partitions_the_rest_start_as_usual(self) -> None:
        async with self.open_bus(partitions=1) as bus:
            await bus.publish(OBJECTS, node("a", "1"))
            await bus.publish(OBJECTS, node("b", "2"))
            ends = await bus.end_offsets(OBJECTS)
            history = event("a", 1)
            await bus.publish(EVENTS, history)  # offset 0 of its own topic
            seen: list[Delivery] = []

            async def handle(delivery: Delivery) -> None:
                seen.append(delivery)

            consumer = self.consumer(bus, [OBJECTS, EVENTS], "g", handle, start_at={OBJECTS: ends})
            await self.until("the event delivered", lambda: bool(seen))
            await consumer.close()
            assert [(d.topic, d.message) for d in seen] == [(EVENTS, history)]

    async def test_start_at_the_latest_offsets_then_go_on_from_the_commits(self) -> None:
        async with self.open_bus() as bus:
            for minute in range(6):
                await bus.publish(EVENTS, event(f"old-{minute}", minute))  # history on every partition
            start = {EVENTS: await bus.end_offsets(EVENTS)}
            got: list[str] = []

            async def handle(delivery: Delivery) -> None:
                assert isinstance(delivery.message, DisruptionEvent)
                got.append(delivery.message.node)

            consumer = self.consumer(bus, [EVENTS], "follower", handle, start_at=start)
            await bus.publish(EVENTS, event("new-1", 10))
            await self.until("the new event", lambda: got == ["new-1"])
            await consumer.close()

            # stopped and started again with the same start: it goes on from its commits (nothing twice)
            await bus.publish(EVENTS, event("new-2", 11))
            consumer = self.consumer(bus, [EVENTS], "follower", handle, start_at=start)
            await self.until("the event published while it was stopped", lambda: got == ["new-1", "new-2"])
            await asyncio.sleep(0.2)
            await consumer.close()
            assert got == ["new-1", "new-2"]

