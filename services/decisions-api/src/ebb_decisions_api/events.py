"""GET /v1/events: fan-out of ebb.disruption.events to server-sent-event subscribers.

One Kafka consumer per process feeds an ``EventHub``; every subscriber has its own bounded queue, so a
slow client never slows the consumer or the other subscribers: when its queue is full it is dropped from
the hub, gets what was already queued and a final comment saying it fell behind, and its stream ends
(the client reconnects). Publishing never blocks and never raises. The wire format of one event is fixed
(another team's end-to-end test relies on it)::

    id: <CloudEvent id = DisruptionEvent.id>
    event: <phase>
    data: <the DisruptionEvent as on the wire, camelCase, one line of JSON>
    <blank line>
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import structlog
from sse_starlette import ServerSentEvent

from ebb.adapters.clock import Stopped, unless_stopped
from ebb.contracts import DisruptionEvent
from ebb_decisions_api.metrics import ApiMetrics

log = structlog.get_logger("ebb_decisions_api")

#: the SSE line separator (the wire contract says \n)
SEP = "\n"
OVERFLOW_COMMENT = "closed: this subscriber fell too far behind ({size} events waiting); reconnect"
SHUTDOWN_COMMENT = "closed: the server is shutting down"


def encode(event: DisruptionEvent) -> ServerSentEvent:
    """The SSE frame of one disruption event."""
    return ServerSentEvent(data=event.model_dump_json(by_alias=True), event=event.phase, id=str(event.id), sep=SEP)


def keep_alive() -> ServerSentEvent:
    return ServerSentEvent(comment="keep-alive", sep=SEP)


@dataclass(eq=False)
class Subscription:
    """One subscriber: its filters and its queue. ``None`` in the queue ends the stream."""

    number: int
    queue: asyncio.Queue[DisruptionEvent | None]
    decision: str | None = None
    node: str | None = None
    #: why the hub closed it (overflow, shutdown); None while open
    closed: str | None = None
    delivered: int = field(default=0)

    def wants(self, event: DisruptionEvent) -> bool:
        return (self.decision is None or event.decision_id == self.decision) and (
            self.node is None or event.node == self.node)


class EventHub:
    """Subscribers of disruption events, each with a queue of at most ``queue_size`` events."""

    def __init__(self, queue_size: int, metrics: ApiMetrics | None = None) -> None:
        self.queue_size = queue_size
        self.metrics = metrics
        self._subscribers: set[Subscription] = set()
        self._numbers = itertools.count(1)
        self._closed = False

    def __len__(self) -> int:
        return len(self._subscribers)

    def subscribe(self, *, decision: str | None = None, node: str | None = None) -> Subscription:
        """Register a subscriber now (events published from here on reach it)."""
        # one slot more than the limit for the end-of-stream marker
        sub = Subscription(next(self._numbers), asyncio.Queue(maxsize=self.queue_size + 1), decision, node)
        if self._closed:
            self._close(sub, SHUTDOWN_COMMENT)
            return sub
        self._subscribers.add(sub)
        self._gauge()
        log.debug("events subscriber added", subscriber=sub.number, decision=decision, node=node)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.discard(sub)
            self._gauge()
            log.debug("events subscriber removed", subscriber=sub.number, delivered=sub.delivered)

    def publish(self, event: DisruptionEvent) -> int:
        """Queue ``event`` for every subscriber that wants it; returns how many. A subscriber whose queue
        is full is closed."""
        count = 0
        for sub in list(self._subscribers):
            if not sub.wants(event):
                continue
            if sub.queue.qsize() >= self.queue_size:
                self._overflow(sub)
                continue
            sub.queue.put_nowait(event)
            count += 1
        return count

    def close(self) -> None:
        """End every stream (shutdown); later subscribers are closed at once."""
        self._closed = True
        for sub in list(self._subscribers):
            self._close(sub, SHUTDOWN_COMMENT)

    def _overflow(self, sub: Subscription) -> None:
        log.warning("events subscriber fell behind; closing it", subscriber=sub.number, waiting=sub.queue.qsize(),
                    decision=sub.decision, node=sub.node)
        if self.metrics is not None:
            self.metrics.sse_overflows.inc()
        self._close(sub, OVERFLOW_COMMENT.format(size=sub.queue.qsize()))

    def _close(self, sub: Subscription, why: str) -> None:
        sub.closed = why
        self._subscribers.discard(sub)
        self._gauge()
        sub.queue.put_nowait(None)  # the reserved slot: never full here

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.sse_subscribers.set(len(self._subscribers))

    async def stream(self, sub: Subscription, shutdown: anyio.Event | None = None) -> AsyncIterator[ServerSentEvent]:
        """The frames of one subscriber until it is closed or ``shutdown`` is set (the server is stopping:
        the stream then ends cleanly, with a final comment); unsubscribes when the client goes away."""
        try:
            while True:
                event = await _next(sub.queue, shutdown)
                if event is _SHUTDOWN:
                    yield ServerSentEvent(comment=SHUTDOWN_COMMENT, sep=SEP)
                    return
                if event is None:
                    yield ServerSentEvent(comment=sub.closed or "closed", sep=SEP)
                    return
                assert isinstance(event, DisruptionEvent)
                sub.delivered += 1
                if self.metrics is not None:
                    self.metrics.sse_events.inc()
                yield encode(event)
        finally:
            self.unsubscribe(sub)


#: what ``_next`` returns once the server is stopping
_SHUTDOWN = object()


async def _next(queue: asyncio.Queue[DisruptionEvent | None], shutdown: anyio.Event | None) -> object:
    """The next item of ``queue``, or ``_SHUTDOWN`` once ``shutdown`` is set (checked before each item)."""
    if shutdown is not None and shutdown.is_set():
        return _SHUTDOWN
    if not queue.empty():
        return queue.get_nowait()
    if shutdown is None:
        return await queue.get()
    try:
        return await unless_stopped(queue.get(), shutdown)
    except Stopped:
        return _SHUTDOWN
