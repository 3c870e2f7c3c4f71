"""The relay of the transactional outbox: what a service wrote into the ``outbox`` table with a decision's change
goes out on the bus, in the order it was written, and is marked sent.

A writer of the store (``DecisionStore``) puts the messages a change publishes (a decision's command on
ebb.disruption.commands, its steps on ebb.disruption.events) into the outbox in the transaction of the change,
under its service's ``origin``; nothing is published before that commit, and nothing committed is lost when the
process dies before publishing: the next relay of that origin (the restarted process, another replica) sends it.
``OutboxRelay.run`` is one task per service (the consolidation-planner's and the termination-executor's); one
relay per origin and cluster works at a time (``DecisionStore.relay`` takes a lock), so the messages keep their
order. Delivery is at least once: a relay that dies between a publish and its mark publishes the same messages
again, under the same ids, which consumers apply once (the executor records command ids in
``processed_messages``; a step's id is derived from its decision, node and phase).

The relay wakes when this process's store committed a write that may have sent something
(``Store.outbox_signal``), and, unless ``poll`` is None, every ``poll`` seconds for what other processes
left (a writer that died before its relay ran). The embedded mode's store is ``private`` (one process, an
in-memory bus that dies with it): there the relay publishes what the committed transactions handed it in memory,
with no query and no poll. A failed publish is retried with backoff (0.2 s doubling to 5 s); ``before_publish`` is
called before each run of messages goes out (tests make the process exit there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta

import structlog

from ebb.adapters.backoff import Backoff
from ebb.adapters.bus import Bus
from ebb.adapters.clock import Clock
from ebb.adapters.store.port import Store
from ebb.contracts import Message

log = structlog.get_logger("ebb.outbox")

#: the waits after a failed round (0.2 s doubling to 5 s, no jitter)
RELAY_BACKOFF = Backoff(initial=0.2, maximum=5.0, jitter=0.0)

#: called with a topic and the messages about to be published on it
BeforePublish = Callable[[str, Sequence[Message]], None]


class OutboxRelay:
    """Publishes the unsent outbox messages of one ``origin`` of one store's cluster, in order, until stopped."""

    def __init__(self, store: Store, bus: Bus, origin: str, *, clock: Clock, poll: float | None = 1.0,
                 batch: int = 500, keep_sent: float | None = 3600.0,
                 before_publish: BeforePublish | None = None) -> None:
        self.store = store
        self.bus = bus
        self.origin = origin
        self.clock = clock
        #: seconds between two looks for messages other processes left (None: only when this process wrote)
        self.poll = poll
        #: the most messages one round publishes
        self.batch = batch
        #: sent messages are removed this many seconds after they went out (None: kept)
        self.keep_sent = keep_sent
        self.before_publish = before_publish
        self.sent = 0
        self.failures = 0
        self._purged_at = -float("inf")

    async def _publish(self, topic: str, messages: Sequence[Message]) -> None:
        if self.before_publish is not None:
            self.before_publish(topic, messages)
        await self.bus.publish_many(topic, messages)

    async def relay_once(self) -> int:
        """One round: publish what is unsent (up to ``batch``); how many went out."""
        sent = await self.store.relay(self.origin, self._publish, self.clock, limit=self.batch)
        self.sent += sent
        if self.keep_sent is not None and self.clock.monotonic() - self._purged_at >= self.keep_sent / 10:
            self._purged_at = self.clock.monotonic()
            await self.store.purge_outbox(self.clock() - timedelta(seconds=self.keep_sent))
        return sent

    async def run(self, stop: asyncio.Event) -> None:
        """Relay until ``stop``: at once, then whenever this process wrote, every ``poll`` seconds, and after a
        failure with backoff."""
        signal = self.store.outbox_signal(self.origin)
        failed = 0
        while not stop.is_set():
            signal.clear()
            try:
                sent = await self.relay_once()
            except Exception as e:  # the bus or the database is away: what is unsent stays for the next round
                failed += 1
                self.failures += 1
                log.warning("relaying the outbox failed", origin=self.origin, attempt=failed, error=repr(e))
                await self.clock.sleep(RELAY_BACKOFF.delay(failed), stop)
                continue
            failed = 0
            if sent >= self.batch:
                continue  # more to send
            await self.clock.wait(signal, stop, within=self.poll)
