"""The virtual-time event loop (ebb.adapters.virtual_time): the clock jumps to the next timer when every task
waits, the default executor's work runs inline and takes no virtual time (or the configured cost), an explicit
executor's thread holds the clock still, I/O is seen before the clock jumps, a pace only slows the run down,
and deadline loops do not spin at one instant. Each test runs its own loop (no pytest-asyncio)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from ebb.adapters.clock import SimClock
from ebb.adapters.virtual_time import MIN_WAIT_SECONDS, VirtualTimeLoop

T = TypeVar("T")


def on_virtual_time(main: Callable[[], Coroutine[Any, Any, T]], *, pace: float | None = None,
                    thread_cost: float = 0.0) -> T:
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(pace=pace, thread_cost=thread_cost)) as runner:
        return runner.run(main())


def now() -> float:
    return asyncio.get_running_loop().time()


def spin(seconds: float) -> str:
    """Real work: the thread that runs it is busy for ``seconds`` of real time."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass
    return threading.current_thread().name


@pytest.mark.parametrize("sleeps", [[3600.0], [0.5, 0.5, 9.0], [86400.0 * 3], [0.1] * 30])
def test_the_clock_moves_exactly_by_the_sleeps_in_no_real_time(sleeps: list[float]) -> None:
    async def main() -> float:
        began = now()
        for s in sleeps:
            await asyncio.sleep(s)
        return now() - began

    real = time.monotonic()
    assert on_virtual_time(main) == pytest.approx(sum(sleeps), abs=1e-9)
    assert time.monotonic() - real < 2


def test_timers_fire_in_the_order_of_their_times_and_a_timeout_fires_at_its_time() -> None:
    async def main() -> tuple[list[tuple[str, float]], float]:
        fired: list[tuple[str, float]] = []

        async def at(name: str, seconds: float) -> None:
            await asyncio.sleep(seconds)
            fired.append((name, now()))

        await asyncio.gather(at("c", 30), at("a", 10), at("b", 20))
        began = now()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(90):
                await asyncio.sleep(3600)
        return fired, now() - began

    fired, timed_out_after = on_virtual_time(main)
    assert fired == [("a", 10.0), ("b", 20.0), ("c", 30.0)]
    assert timed_out_after == pytest.approx(90)


@pytest.mark.parametrize(("cost", "expected"), [(None, 0.0), (2.0, 2.0), (30.0, 30.0)])
def test_work_for_the_default_executor_runs_inline_and_takes_the_configured_time(
        cost: float | None, expected: float) -> None:
    async def main() -> tuple[str, float, list[float]]:
        ticks: list[float] = []

        async def ticker() -> None:  # other tasks go on while a costed pass is "running"
            while True:
                await asyncio.sleep(0.7)
                ticks.append(now())

        ticking = asyncio.create_task(ticker())
        began = now()
        async with asyncio.timeout(5 + expected):  # a 0.3 s real pass never lets a 5 s timeout fire
            thread = await asyncio.to_thread(spin, 0.3)
        took = now() - began
        ticking.cancel()
        return thread, took, ticks

    thread, took, ticks = on_virtual_time(main, thread_cost=cost or 0.0)
    assert thread == threading.current_thread().name, "the pass ran on the loop's own thread"
    assert took == pytest.approx(expected)
    assert len(ticks) == int(expected / 0.7), "the other tasks ran while the pass cost its time"


def test_an_exception_of_inline_work_reaches_the_awaiting_task() -> None:
    def fail() -> None:
        raise ValueError("bad snapshot")

    async def main() -> None:
        await asyncio.to_thread(fail)

    with pytest.raises(ValueError, match="bad snapshot"):
        on_virtual_time(main)


def test_the_clock_stands_still_while_an_explicit_executors_thread_works() -> None:
    async def main() -> tuple[str, float, bool]:
        sleeper = asyncio.create_task(asyncio.sleep(1))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="worker") as pool:
            began = now()
            thread = await asyncio.get_running_loop().run_in_executor(pool, spin, 0.2)
            took = now() - began
        done = sleeper.done()
        await sleeper
        return thread, took, done

    thread, took, sleeper_done = on_virtual_time(main)
    assert thread.startswith("worker")
    assert took == 0.0 and not sleeper_done, "no timer fired while the thread worked"


def test_a_signal_is_handled_before_the_clock_jumps() -> None:
    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        got = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, got.set)
        try:
            loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
            began = now()
            try:
                await asyncio.wait_for(got.wait(), 3600)
            except TimeoutError:
                return False, now() - began
            return True, now() - began
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)

    handled, after = on_virtual_time(main)
    assert handled and after < 1


def test_a_signal_is_handled_while_work_keeps_the_loop_busy() -> None:
    """I/O is looked at every few milliseconds while work is ready, not at every turn: never not at all."""
    async def main() -> int:
        loop = asyncio.get_running_loop()
        got = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, got.set)
        try:
            loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
            turns = 0
            while not got.is_set() and turns < 10_000_000:
                await asyncio.sleep(0)  # always ready: the clock never jumps, the selector never waits
                turns += 1
            return turns
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)

    turns = on_virtual_time(main)
    assert 0 < turns < 10_000_000


@pytest.mark.parametrize("pace", [50.0, 200.0])
def test_a_pace_slows_the_clock_to_at_most_pace_times_real_time_and_changes_nothing_else(pace: float) -> None:
    async def main() -> list[float]:
        times = []
        for _ in range(4):
            await asyncio.sleep(5)
            times.append(now())
        return times

    real = time.monotonic()
    times = on_virtual_time(main, pace=pace)
    took = time.monotonic() - real
    assert times == [5.0, 10.0, 15.0, 20.0]
    assert took >= 20 / pace * 0.9
    assert took < 20 / pace + 2


def test_a_deadline_loop_does_not_spin_at_one_instant() -> None:
    """The planner's debounce: ``sleep(debounce - since)`` until ``since >= debounce``. After many uneven steps the
    remainder can be below what float addition moves the clock by; each positive wait still moves it."""

    async def main() -> int:
        steps = random.Random(12)
        rounds = 0
        for _ in range(300):
            await asyncio.sleep(steps.choice([0.1, 0.2, 0.5, 1 / 3, 0.7]))
            last = now() - steps.random()
            while (since := now() - last) < 1.0:
                rounds += 1
                assert rounds < 3000, "the clock stopped moving"
                await asyncio.sleep(1.0 - since)
        return rounds

    assert on_virtual_time(main) > 0


def test_a_positive_wait_takes_at_least_the_minimum() -> None:
    async def main() -> float:
        began = now()
        await asyncio.sleep(1e-12)
        return now() - began

    assert on_virtual_time(main) == pytest.approx(MIN_WAIT_SECONDS)


def test_a_sim_clock_on_the_loop_is_the_simulated_time() -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)

    async def main() -> tuple[datetime, timedelta]:
        clock = SimClock(start)
        clock.restart()
        await clock.sleep(15)
        await asyncio.to_thread(spin, 0.05)
        return clock.now(), clock.elapsed()

    moment, elapsed = on_virtual_time(main)
    assert moment == start + timedelta(seconds=15) and elapsed == timedelta(seconds=15)


@pytest.mark.parametrize(("pace", "cost", "error"), [(0.0, 0.0, "pace"), (-5.0, 0.0, "pace"), (None, -1.0, "cost")])
def test_bad_options_are_refused(pace: float | None, cost: float, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        VirtualTimeLoop(pace=pace, thread_cost=cost)


def test_timers_due_at_the_same_time_fire_in_the_order_they_were_set_whatever_else_is_scheduled() -> None:
    """On the standard loop the order of equal timers depends on the heap's shape, so a task that only looks (a
    status loop's timers) could reorder the others; here it cannot."""

    async def main(lookers: int) -> list[int]:
        loop = asyncio.get_running_loop()
        fired: list[int] = []
        for n in range(lookers):  # timers of something else, some due at the same time
            loop.call_later(1 + n % 3, lambda: None)
        for i in range(40):
            loop.call_later(5.0, fired.append, i)
            loop.call_later(1 + i % 7, lambda: None)
        await asyncio.sleep(6)
        return fired

    for lookers in (0, 1, 7, 50):
        assert on_virtual_time(functools.partial(main, lookers)) == list(range(40))
