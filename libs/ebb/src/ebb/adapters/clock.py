"""Time, for every service: one clock object says what time it is and measures every wait that means something.

A service is given a ``Clock`` and takes both from it:

- **"now"** (``clock.now()``, or ``clock()``): an aware UTC ``datetime``, for what is written down (decision
  times, event times, hold expiry, the engine's "now");
- **intervals** (``clock.monotonic()``, ``clock.sleep``, ``clock.wait``): every interval, deadline, debounce
  and timeout with a meaning (the pass interval and debounce, the validation delay, the outbox relay's
  poll and backoff, the eviction backoff and deadline, the replacement ready timeout, the Lease renewal, the
  retry backoffs).

Intervals are measured on the running event loop's clock (``loop.time()``), never with ``time.monotonic()``.
So a virtual-time event loop (one whose ``time()`` jumps forward whenever every task waits, as the
``looptime`` library's does) runs the services unchanged, deterministically and as fast as they compute:
every sleep, timeout and deadline here follows it. Pure I/O safety timeouts (a Kafka admin call, an HTTP
request) are not the clock's business and stay ``asyncio.timeout``/``wait_for`` on the loop.

The clocks:

- ``Clock()``: the system's UTC time, intervals in event-loop seconds. ``Clock(now=f)`` takes "now" from ``f``
  instead (a test's fixed or settable time) and still measures intervals on the loop.
- ``SimClock(start, speed)``: the embedded mode's simulated time: ``start`` when it starts, then ``speed``
  clock seconds per loop second, for "now" and intervals alike. A service given one keeps its settings in
  its own units (a 15 s validation delay is 15 simulated seconds at any speed); nobody scales them by hand.
  On a virtual-time loop a ``SimClock`` with speed 1 is the simulated time.
- ``ManualClock``: for tests of code with backoffs and deadlines: it moves only when told or when something
  sleeps on it (the sleep returns at once, the clock moved on by its length).

``clock_of`` turns what callers pass (a ``Clock``, a bare ``() -> datetime`` as older call sites and tests
give, or None) into a ``Clock``.

Waiting until stopped: ``clock.sleep(seconds, stop)`` returns True as soon as ``stop`` is set (so
``while not await clock.sleep(n, stop): ...`` is a periodic loop); ``clock.wait(*events, within=...)``
returns when the first of the events is set or the time is over; ``clock.sleeper(stop)`` is a sleep that
raises ``Stopped`` (for the retry loops of ``ebb.adapters.backoff`` and the drainer); ``until_any`` waits
for the first event with no timeout and ``unless_stopped`` awaits something unless ``stop`` comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

T = TypeVar("T")


class Waitable(Protocol):
    """An event to wait for: ``asyncio.Event``, ``anyio.Event``."""

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[object]: ...


class Stopped(Exception):
    """``stop`` was set while waiting."""


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


async def _first(events: tuple[Waitable, ...], loop_timeout: float | None) -> bool:
    """Wait until one of ``events`` is set or ``loop_timeout`` event-loop seconds passed; True when one is set."""
    if any(e.is_set() for e in events):
        return True
    if not events:
        if loop_timeout is None:
            raise ValueError("waiting for nothing, forever")
        await asyncio.sleep(max(0.0, loop_timeout))
        return False
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=None if loop_timeout is None else max(0.0, loop_timeout),
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return any(e.is_set() for e in events)


async def until_any(*events: Waitable) -> None:
    """Wait until one of ``events`` is set."""
    await _first(events, None)


async def unless_stopped(awaitable: Awaitable[T], stop: Waitable) -> T:
    """Await ``awaitable`` unless ``stop`` is set first: then it is cancelled and ``Stopped`` raised. A result
    that is ready when ``stop`` comes is returned, not lost."""
    if stop.is_set():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise Stopped
    work = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
    if work.cancelled():
        raise Stopped
    return work.result()


class Clock:
    """The system clock: "now" from ``now`` (default: the system's UTC time), intervals on the event loop."""

    #: clock seconds per event-loop second
    speed: float = 1.0

    def __init__(self, now: Callable[[], datetime] | None = None) -> None:
        self._now = now

    def now(self) -> datetime:
        """What time it is (aware, UTC)."""
        return self._now() if self._now is not None else datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now()

    def monotonic(self) -> float:
        """Seconds of this clock since an arbitrary origin, for intervals and deadlines (needs a running loop)."""
        return _loop_time() * self.speed

    def loop_seconds(self, seconds: float) -> float:
        """The event-loop seconds that ``seconds`` of this clock take."""
        return seconds / self.speed

    async def sleep(self, seconds: float, stop: Waitable | None = None) -> bool:
        """Wait ``seconds``, or less when ``stop`` is set meanwhile; True when ``stop`` is set."""
        if stop is None:
            await asyncio.sleep(max(0.0, self.loop_seconds(seconds)))
            return False
        return await _first((stop,), self.loop_seconds(seconds))

    async def wait(self, *events: Waitable, within: float | None = None) -> bool:
        """Wait until one of ``events`` is set, for at most ``within`` seconds (None: no limit); True when one
        is set."""
        return await _first(events, None if within is None else self.loop_seconds(within))

    def sleeper(self, stop: Waitable | None = None) -> Callable[[float], Awaitable[None]]:
        """A ``sleep(seconds)`` on this clock that raises ``Stopped`` as soon as ``stop`` is set."""

        async def sleep(seconds: float) -> None:
            if await self.sleep(seconds, stop):
                raise Stopped

        return sleep


class SimClock(Clock):
    """Simulated time: ``start`` when the clock starts (on first use, or ``restart``), then ``speed`` seconds
    of this clock per event-loop second, for "now" and for every interval."""

    def __init__(self, start: datetime, speed: float = 1.0) -> None:
        super().__init__()
        if start.tzinfo is None:
            raise ValueError("the simulated start time must be timezone-aware")
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.start = start
        self.speed = speed
        self._origin: float | None = None

    def restart(self) -> None:
        """Make "now" the start again (after a set-up, so it costs no simulated time)."""
        self._origin = _loop_time()

    def _since_start(self) -> float:
        if self._origin is None:
            self.restart()
        assert self._origin is not None
        return (_loop_time() - self._origin) * self.speed

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self._since_start())

    def elapsed(self) -> timedelta:
        """Simulated time since the start."""
        return timedelta(seconds=self._since_start())

    def real(self, simulated_seconds: float) -> float:
        """The event-loop seconds that ``simulated_seconds`` take at this speed (``loop_seconds``)."""
        return self.loop_seconds(simulated_seconds)


class ManualClock(Clock):
    """A clock that moves only when told (``advance``) or when something sleeps on it: a sleep (or a wait with
    a time limit that no event ends) returns after one turn of the event loop, the clock moved on by its length.
    ``sleeps`` lists the sleeps, in order. For tests of backoffs, deadlines and timeouts without waiting."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=UTC), monotonic: float = 0.0) -> None:
        super().__init__()
        self.start = start
        self._elapsed = monotonic
        self._origin = monotonic
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self._elapsed - self._origin)

    def monotonic(self) -> float:
        return self._elapsed

    def advance(self, seconds: float) -> None:
        self._elapsed += seconds

    async def sleep(self, seconds: float, stop: Waitable | None = None) -> bool:
        if stop is not None and stop.is_set():
            return True
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)
        return stop is not None and stop.is_set()

    async def wait(self, *events: Waitable, within: float | None = None) -> bool:
        if within is None:
            return await _first(events, None)
        await asyncio.sleep(0)
        if any(e.is_set() for e in events):
            return True
        self.advance(max(0.0, within))
        return False


def clock_of(clock: Clock | Callable[[], datetime] | None) -> Clock:
    """``clock`` as a ``Clock``: itself, the system clock for None, and for a bare ``() -> datetime`` a clock
    whose "now" it is (intervals on the event loop)."""
    if isinstance(clock, Clock):
        return clock
    return Clock(now=clock)
