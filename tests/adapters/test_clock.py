"""The clock module (ebb.adapters.clock) and the retry mechanism on it (ebb.adapters.backoff): sleeps that end on
stop, waits for the first of several events, the periodic loop, the simulated clock's scaling, the manual clock
of the tests, and tenacity's retries on the clock (attempts, deadline, stop)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from tenacity import AsyncRetrying

from ebb.adapters.backoff import Backoff, attempt_then_retry
from ebb.adapters.clock import Clock, ManualClock, SimClock, Stopped, clock_of, unless_stopped, until_any

T0 = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def loop_time() -> float:
    return asyncio.get_running_loop().time()


async def set_later(event: asyncio.Event, seconds: float) -> None:
    await asyncio.sleep(seconds)
    event.set()


# -- sleeping and waiting ---------------------------------------------------------------------------------------


async def test_a_sleep_ends_early_when_stop_is_set() -> None:
    clock, stop = Clock(), asyncio.Event()
    began = loop_time()
    setter = asyncio.create_task(set_later(stop, 0.05))
    assert await clock.sleep(30, stop) is True
    assert loop_time() - began < 1
    await setter
    assert await clock.sleep(30, stop) is True  # already set: at once


async def test_a_sleep_that_is_not_stopped_lasts_its_time() -> None:
    clock, stop = Clock(), asyncio.Event()
    began = loop_time()
    assert await clock.sleep(0.05, stop) is False
    assert loop_time() - began >= 0.05 * 0.9
    assert await clock.sleep(0.01) is False  # no stop at all


async def test_wait_returns_with_the_first_event_or_after_its_time() -> None:
    clock, a, b = Clock(), asyncio.Event(), asyncio.Event()
    assert await clock.wait(a, b, within=0.02) is False
    setter = asyncio.create_task(set_later(b, 0.02))
    began = loop_time()
    assert await clock.wait(a, b, within=30) is True
    assert loop_time() - began < 1 and b.is_set() and not a.is_set()
    await setter
    waiting = asyncio.create_task(clock.wait(a))  # no time limit: it returns once an event is set, not before
    await asyncio.sleep(0.05)
    assert not waiting.done()
    a.set()
    assert await asyncio.wait_for(waiting, 5) is True


async def test_until_any_and_unless_stopped() -> None:
    first, stop = asyncio.Event(), asyncio.Event()
    setter = asyncio.create_task(set_later(first, 0.01))
    await asyncio.wait_for(until_any(first, stop), 5)
    await setter

    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 42

    assert await unless_stopped(answer(), stop) == 42
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    setter = asyncio.create_task(set_later(stop, 0.01))
    with pytest.raises(Stopped):
        await unless_stopped(forever(), stop)
    assert cancelled.is_set()  # the work was cancelled, not left running
    await setter
    with pytest.raises(Stopped):  # stop already set: the work does not even start
        await unless_stopped(answer(), stop)


async def test_a_sleeper_raises_stopped() -> None:
    stop = asyncio.Event()
    sleep = Clock().sleeper(stop)
    await sleep(0.01)
    stop.set()
    with pytest.raises(Stopped):
        await sleep(10)


async def test_a_periodic_loop_runs_every_interval_until_stop() -> None:
    clock, stop = ManualClock(monotonic=100.0), asyncio.Event()
    ticks: list[float] = []
    while not await clock.sleep(2.5, stop):
        ticks.append(clock.monotonic())
        if len(ticks) == 4:
            stop.set()
    assert ticks == [102.5, 105.0, 107.5, 110.0]
    # on the event loop, a stop from elsewhere ends it at once
    real, stop = Clock(), asyncio.Event()
    setter = asyncio.create_task(set_later(stop, 0.05))
    began, rounds = loop_time(), 0
    while not await real.sleep(3600, stop):
        rounds += 1
    assert rounds == 0 and loop_time() - began < 1
    await setter


# -- the clocks -------------------------------------------------------------------------------------------------


async def test_the_system_clock_and_clock_of() -> None:
    clock = clock_of(None)
    assert isinstance(clock, Clock) and clock.now().tzinfo is not None
    assert abs(clock.monotonic() - loop_time()) < 1
    fixed = clock_of(lambda: T0)
    assert fixed() == fixed.now() == T0  # a bare "now" function: its time, intervals on the loop
    assert abs(fixed.monotonic() - loop_time()) < 1
    sim = SimClock(T0, speed=60)
    assert clock_of(sim) is sim


async def test_the_simulated_clock_scales_now_and_every_interval() -> None:
    speed = 200.0
    clock = SimClock(T0, speed=speed)
    clock.restart()
    began_loop, began_clock = loop_time(), clock.monotonic()
    assert clock.now() - T0 < timedelta(seconds=1)
    assert await clock.sleep(10.0) is False  # 10 simulated seconds: 50 ms of the loop
    loop_seconds = loop_time() - began_loop
    assert 10.0 / speed * 0.9 <= loop_seconds < 1.0
    assert clock.monotonic() - began_clock == pytest.approx(loop_seconds * speed, rel=0.05)
    assert clock.elapsed() >= timedelta(seconds=10 * 0.9)
    assert clock.now() - T0 == pytest.approx(clock.elapsed(), abs=timedelta(seconds=1))
    # waits and stops are scaled the same way
    stop = asyncio.Event()
    began_loop = loop_time()
    assert await clock.wait(stop, within=10.0) is False
    assert loop_time() - began_loop < 1.0
    assert clock.loop_seconds(600) == clock.real(600) == 3.0


@pytest.mark.parametrize(("start", "speed", "error"), [
    (datetime(2026, 11, 23, 18, 30), 60.0, "timezone-aware"),  # noqa: DTZ001 (the naive start refused)
    (T0, 0.0, "positive"),
    (T0, -1.0, "positive"),
])
def test_the_simulated_clock_refuses(start: datetime, speed: float, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SimClock(start, speed)


async def test_the_manual_clock_moves_only_when_told_or_slept_on() -> None:
    clock = ManualClock(T0, monotonic=5.0)
    assert clock.monotonic() == 5.0 and clock.now() == T0
    clock.advance(10)
    assert clock.monotonic() == 15.0 and clock.now() == T0 + timedelta(seconds=10)
    began = loop_time()
    assert await clock.sleep(3600) is False
    assert loop_time() - began < 1 and clock.monotonic() == 3615.0 and clock.sleeps == [3600]
    event = asyncio.Event()
    assert await clock.wait(event, within=60) is False and clock.monotonic() == 3675.0
    event.set()
    assert await clock.wait(event, within=60) is True and clock.monotonic() == 3675.0


# -- retries on the clock (tenacity) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("backoff", "delays"), [
    (Backoff(initial=1, multiplier=2, maximum=10, jitter=0), [1, 2, 4, 8, 10, 10]),
    (Backoff(initial=0.5, multiplier=3, maximum=100, jitter=0), [0.5, 1.5, 4.5, 13.5, 40.5, 100]),
    (Backoff(initial=1, multiplier=2, maximum=10, jitter=0.5), [0.5, 1, 2, 4, 5, 5]),  # rng = 1: the low end
])
def test_backoff_delays(backoff: Backoff, delays: list[float]) -> None:
    assert [backoff.delay(n, rng=lambda: 1.0) for n in range(1, 7)] == delays


async def test_retrying_waits_on_the_clock_and_reraises_the_last_failure() -> None:
    clock = ManualClock()
    calls = 0
    with pytest.raises(ConnectionError, match="attempt 4"):
        async for attempt in Backoff(initial=1, maximum=4, jitter=0, max_attempts=4).retrying(clock):
            with attempt:
                calls += 1
                raise ConnectionError(f"attempt {calls}")
    assert calls == 4 and clock.sleeps == [1, 2, 4]


async def test_attempt_then_retry_runs_no_loop_when_the_first_attempt_succeeds() -> None:
    made, numbers = [], []

    async def attempt(number: int) -> None:
        numbers.append(number)

    def retrying() -> AsyncRetrying:
        made.append(1)
        return Backoff(initial=1, jitter=0).retrying(ManualClock())

    await attempt_then_retry(retrying, attempt, retried=lambda e: True)
    assert numbers == [1] and made == []


@pytest.mark.parametrize("failures", [1, 2, 3, 4])
async def test_attempt_then_retry_is_the_loop_run_from_the_start(failures: int) -> None:
    """The same attempts, waits, before_sleep calls and final error as ``async for`` over the loop itself."""
    async def run(with_helper: bool) -> tuple[list[int], list[float], list[int], str]:
        clock, numbers, slept_after = ManualClock(), [], []
        backoff = Backoff(initial=1, maximum=4, jitter=0, max_attempts=3)

        def retrying() -> AsyncRetrying:
            return backoff.retrying(clock, before_sleep=lambda state: slept_after.append(state.attempt_number))

        async def attempt(number: int) -> None:
            numbers.append(number)
            if number <= failures:
                raise ConnectionError(f"attempt {number}")

        error = ""
        try:
            if with_helper:
                await attempt_then_retry(retrying, attempt, retried=lambda e: isinstance(e, ConnectionError))
            else:
                async for state in retrying():
                    with state:
                        await attempt(state.retry_state.attempt_number)
        except ConnectionError as e:
            error = str(e)
        return numbers, clock.sleeps, slept_after, error

    assert await run(True) == await run(False)


async def test_attempt_then_retry_raises_an_error_it_does_not_retry_at_once() -> None:
    made = []

    async def attempt(number: int) -> None:
        raise ValueError("not retried")

    def retrying() -> AsyncRetrying:
        made.append(1)
        return Backoff(initial=1, jitter=0).retrying(ManualClock())

    with pytest.raises(ValueError, match="not retried"):
        await attempt_then_retry(retrying, attempt, retried=lambda e: isinstance(e, ConnectionError))
    assert made == []


async def test_retrying_stops_before_a_wait_past_the_deadline() -> None:
    clock = ManualClock(monotonic=0.0)
    calls = 0
    with pytest.raises(ConnectionError):
        async for attempt in Backoff(initial=1, maximum=100, jitter=0).retrying(clock, deadline=10.0):
            with attempt:
                calls += 1
                raise ConnectionError("down")
    assert clock.sleeps == [1, 2, 4] and clock.monotonic() == 7.0 and calls == 4  # the next wait (8) ends at 15


async def test_retrying_ends_with_stopped_when_stop_is_set_during_a_wait() -> None:
    stop = asyncio.Event()
    calls = 0
    setter = asyncio.create_task(set_later(stop, 0.05))
    began = loop_time()
    with pytest.raises(Stopped):
        async for attempt in Backoff(initial=30, jitter=0).retrying(Clock(), stop):
            with attempt:
                calls += 1
                raise ConnectionError("down")
    assert calls == 1 and loop_time() - began < 1
    await setter


async def test_retrying_returns_after_a_success() -> None:
    clock = ManualClock()
    outcomes = [ConnectionError("once"), None]
    async for attempt in Backoff(initial=2, jitter=0).retrying(clock):
        with attempt:
            error = outcomes.pop(0)
            if error is not None:
                raise error
    assert outcomes == [] and clock.sleeps == [2]


async def test_retrying_never_retries_a_cancellation() -> None:
    calls = 0
    started = asyncio.Event()

    async def attempts() -> None:
        nonlocal calls
        async for attempt in Backoff(initial=0.01, jitter=0).retrying(Clock()):
            with attempt:
                calls += 1
                started.set()
                await asyncio.Event().wait()

    task = asyncio.create_task(attempts())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert calls == 1
