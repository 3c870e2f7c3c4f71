"""Virtual time: an asyncio event loop whose clock moves only when every task waits (the embedded mode's time).

``VirtualTimeLoop`` is an ordinary ``SelectorEventLoop`` with four differences, and it decides nothing else:

- **its clock** (``loop.time()``) is virtual: it starts at 0 and moves only when nothing is ready to run. When
  the loop would sleep until its next timer, it first polls I/O without waiting (a signal, a socket of the
  decisions-api), and if there is none it sets the clock to that timer at once instead of sleeping (while work
  is ready it looks at I/O every ``IO_POLL_SECONDS`` of real time, not at every turn: each look is a system
  call, and a run turns the loop hundreds of thousands of times). Every
  wait of the services is measured on ``loop.time()`` (``ebb.adapters.clock``), so a run goes as fast as its
  computation allows, and its course depends only on its input: computation takes no virtual time, so the
  machine's speed and load change how long a run takes, never what happens in it.
- **work handed to the default executor** (``asyncio.to_thread``, ``loop.run_in_executor(None, ...)``: the
  planner's pass and its validation of a command) runs at once on the loop's own thread. On a thread it would
  look idle to the loop, which would then move the clock past timers while the pass computes (timeouts firing
  during a pass), and when its result came back would depend on the machine. Inline, a pass takes no
  virtual time, or exactly ``thread_cost`` seconds when one is configured (its result is delivered that much
  later, while the other tasks go on, as if it had run on a thread that long).
- **timers due at the same time fire in the order they were set**. The standard loop keeps its timers in a
  heap ordered by time alone, so the order of two timers due at one instant depends on every other timer
  that went through the heap; here ties go by when each timer was set. On virtual time such ties are common
  (every task that slept 15 s after one pass wakes at the same instant), and this way a task that only looks
  (the embedded run's status loop, the decisions-api's server) cannot change the order of the others.
- **pacing**: with ``pace``, the clock moves at most ``pace`` virtual seconds per real second (the loop
  sleeps in real time until a timer is due at that pace), for watching a run; it waits, it never reorders,
  so the run's course is the same at every pace. Without it the run is as fast as it computes.

What the loop cannot see is a thread it did not start: work submitted to an explicit executor still runs on
that executor's threads, and while any such future is pending the clock stands still and the loop waits for
it in real time (so no timeout fires while it works). A thread that calls back into the loop on its own
(``call_soon_threadsafe``) is not seen at all: the embedded mode runs its SQLite statements on the loop's
thread for that reason (``ebb_embedded.store``); only the decisions-api's worker threads remain, whose answers
do not change the run.

Why not a library: ``looptime`` (a pytest plugin with a fake-time loop) moves its fake time in real-time
steps while executor work is pending, so a planner pass would cost as much virtual time as it takes real time
on this machine; it does not see aiosqlite's thread; and it waits a fixed number of idle cycles before each
jump, a heuristic for tests. ``async-solipsism`` has the same clock model but refuses real sockets, signal
handlers and other threads' callbacks (so no Ctrl-C and no API port) and is GPL-licensed;
``asyncio-time-travel`` is unmaintained since 2023; simpy is a simulation framework of its own, so the
services' code would have to be written for it. None paces. This loop is the clock model of the first two
on the standard loop, with the default executor run inline and a pace.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import heapq
import selectors
import time
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple, Unpack

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

#: the longest real wait for a thread the loop did not start before it looks again (the clock stands still)
THREAD_POLL_SECONDS = 0.05
#: the least virtual time a positive wait takes (``call_later``), as any wait takes some real time
MIN_WAIT_SECONDS = 1e-6
#: the real seconds between two looks at I/O while work is ready to run (before the clock jumps it always looks)
IO_POLL_SECONDS = 0.005


class _VirtualClock:
    """The loop's time, and the pace that ties it to real time."""

    def __init__(self, pace: float | None) -> None:
        self.now = 0.0
        self.pace = pace
        #: (real, virtual) times the pace is measured from; reset when the loop falls behind it
        self._anchor: tuple[float, float] | None = None

    def real_wait(self, step: float) -> float:
        """Real seconds to wait before the clock may move ``step`` further (0 without a pace)."""
        if self.pace is None:
            return 0.0
        real = time.monotonic()
        if self._anchor is None:
            self._anchor = (real, self.now)
        anchor_real, anchor_virtual = self._anchor
        wait = anchor_real + (self.now + step - anchor_virtual) / self.pace - real
        if wait < 0:  # computation made the loop fall behind the pace: go on from here, do not rush to catch up
            self._anchor = (real, self.now + step)
            return 0.0
        return wait

    def after_real_wait(self, step: float, interrupted: bool) -> None:
        """Move the clock after a paced wait: by ``step``, or as far as the pace allows when I/O came first."""
        if interrupted and self.pace is not None and self._anchor is not None:
            anchor_real, anchor_virtual = self._anchor
            allowed = anchor_virtual + (time.monotonic() - anchor_real) * self.pace
            self.now = min(self.now + step, max(self.now, allowed))
        else:
            self.now += step


class _VirtualSelector(selectors.DefaultSelector):
    """The platform's selector, whose waits move the virtual clock instead of sleeping (or pace it)."""

    def __init__(self, clock: _VirtualClock, threads_busy: Callable[[], bool]) -> None:
        super().__init__()
        self._clock = clock
        self._threads_busy = threads_busy
        self._polled = -float("inf")

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        real = time.monotonic()
        if timeout == 0 and real - self._polled < IO_POLL_SECONDS:
            return []  # work is ready: I/O can wait a few milliseconds (it never changes a run's course)
        self._polled = real
        ready = super().select(0)  # I/O first: a signal, a socket, a callback from another thread
        if ready or timeout == 0:
            return ready
        if self._threads_busy():  # a thread the loop did not start is working: time stands still meanwhile
            limit = THREAD_POLL_SECONDS if timeout is None else min(timeout, THREAD_POLL_SECONDS)
            return super().select(limit)
        if timeout is None:  # no timer at all: only I/O can wake the loop, as on any loop
            return super().select(None)
        wait = self._clock.real_wait(timeout)
        if wait > 0:
            ready = super().select(wait)
        self._clock.after_real_wait(timeout, interrupted=bool(ready))
        return ready


class _Timer(asyncio.TimerHandle):
    """A timer ordered by its time, then by when it was set (``order``)."""

    __slots__ = ("_order",)

    def __init__(self, when: float, callback: Callable[[*Ts], object], args: tuple[*Ts],
                 loop: asyncio.AbstractEventLoop, context: contextvars.Context | None, *, order: int) -> None:
        super().__init__(when, callback, args, loop, context)
        self._order = order

    def _key(self) -> tuple[float, int]:
        return self._when, self._order  # type: ignore[attr-defined]

    def __lt__(self, other: asyncio.TimerHandle) -> bool:
        return self._key() < other._key() if isinstance(other, _Timer) else super().__lt__(other)

    def __le__(self, other: asyncio.TimerHandle) -> bool:
        return self._key() <= other._key() if isinstance(other, _Timer) else super().__le__(other)

    def __gt__(self, other: asyncio.TimerHandle) -> bool:
        return self._key() > other._key() if isinstance(other, _Timer) else super().__gt__(other)

    def __ge__(self, other: asyncio.TimerHandle) -> bool:
        return self._key() >= other._key() if isinstance(other, _Timer) else super().__ge__(other)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (see the module's docstring). ``pace``: at most this many virtual seconds
    per real second (None: as fast as it computes); ``thread_cost``: the virtual seconds each call handed to
    the default executor takes."""

    def __new__(cls, *, pace: float | None = None, thread_cost: float = 0.0) -> VirtualTimeLoop:
        # checked before the loop exists: a half-made loop would complain when collected
        if pace is not None and pace <= 0:
            raise ValueError("the pace must be positive")
        if thread_cost < 0:
            raise ValueError("the thread cost cannot be negative")
        return super().__new__(cls)

    def __init__(self, *, pace: float | None = None, thread_cost: float = 0.0) -> None:
        self._virtual = _VirtualClock(pace)
        self._thread_cost = thread_cost
        self._in_threads: set[asyncio.Future[Any]] = set()
        self._timers_set = 0
        super().__init__(_VirtualSelector(self._virtual, self._threads_busy))

    @property
    def pace(self) -> float | None:
        return self._virtual.pace

    def time(self) -> float:
        return self._virtual.now

    def call_later(self, delay: float, callback: Callable[[Unpack[Ts]], object], *args: *Ts,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """As on any loop, except that a positive ``delay`` is at least ``MIN_WAIT_SECONDS``. Code that waits
        for a deadline in steps (``sleep(deadline - now)`` until ``now >= deadline``) would otherwise spin at
        one instant when float rounding leaves a remainder too small to move the clock by, which on a real
        clock cannot happen: time passes while it computes."""
        return super().call_later(max(delay, MIN_WAIT_SECONDS) if delay > 0 else delay, callback, *args,
                                  context=context)

    def _threads_busy(self) -> bool:
        return any(not f.done() for f in self._in_threads)

    def call_at(self, when: float, callback: Callable[[*Ts], object], *args: *Ts,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """As on any loop (the same steps as ``BaseEventLoop.call_at``), with a timer that keeps the order in
        which timers due at the same time were set."""
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()  # type: ignore[attr-defined]
        if self.get_debug():
            self._check_thread()  # type: ignore[attr-defined]
            self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
        self._timers_set += 1
        timer = _Timer(when, callback, args, self, context, order=self._timers_set)
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def run_in_executor(self, executor: concurrent.futures.Executor | None, func: Callable[[Unpack[Ts]], T],
                        *args: *Ts) -> asyncio.Future[T]:
        if executor is not None:
            future = super().run_in_executor(executor, func, *args)
            self._in_threads.add(future)
            future.add_done_callback(self._in_threads.discard)
            return future
        self._check_closed()  # type: ignore[attr-defined]
        result: asyncio.Future[T] = self.create_future()
        try:
            value = func(*args)
        except Exception as exc:
            result.set_exception(exc)
            return result
        if self._thread_cost > 0:
            self.call_later(self._thread_cost, _resolve, result, value)
        else:
            result.set_result(value)
        return result


def _resolve(future: asyncio.Future[T], value: T) -> None:
    if not future.done():  # the awaiting task may have been cancelled meanwhile
        future.set_result(value)
