"""Retrying with capped exponential backoff: the one retry mechanism of ebb, on tenacity.

``Backoff`` says how long to wait after the n-th failure (``min(maximum, initial * multiplier ** (n - 1))``,
times a uniform share in ``[1 - jitter, 1]``) and how many attempts there are in all; ``Backoff.retrying``
makes the tenacity ``AsyncRetrying`` that carries it out:

- its sleeps are the clock's (``ebb.adapters.clock``): simulated seconds under a ``SimClock``, virtual ones
  on a virtual-time loop, and with ``stop`` they end as soon as ``stop`` is set by raising ``Stopped`` out of
  the retry loop (shutdown stays prompt; the caller decides what a stop in the middle means);
- ``deadline`` (a ``clock.monotonic()`` value) ends the retries before a wait that would end after it, on
  the same clock (tenacity's own ``stop_before_delay`` reads ``time.monotonic``);
- the last failure is re-raised as it is (``reraise``), not wrapped in tenacity's ``RetryError``.

The users and their settings: the bus's handler retries (``bus.base.RetryPolicy``: 0.1 s doubling to 10 s, 10
attempts, then ``HandlerFailed``), the drainer's eviction retries (``kube.drain.EvictionBackoff``: 0.5 s
doubling to 10 s until the eviction deadline), the Kubernetes watch loop (``kube.watch.WATCH_BACKOFF``) and
the SQS poll (retried forever, with jitter, from a fresh ``retrying`` after every success) and the outbox
relay's publish (``ebb.adapters.store.outbox``). tenacity has no multiplicative jitter (its
``wait_random_exponential`` is full jitter, its ``wait_exponential_jitter`` adds up to a fixed amount), so the
wait is ``Backoff.delay`` itself.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, stop_any, stop_never
from tenacity.retry import RetryBaseT, retry_base
from tenacity.stop import stop_base

from ebb.adapters.clock import Clock, Waitable

#: the default of ``Backoff.retrying``: every ``Exception`` is retried
ANY_EXCEPTION = retry_if_exception_type(Exception)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits a uniform share in [1 - jitter, 1] of
    ``min(maximum, initial * multiplier ** (n - 1))``; ``max_attempts`` counts the first call (None: no end)."""

    initial: float = 1.0
    multiplier: float = 2.0
    maximum: float = 60.0
    jitter: float = 0.5
    max_attempts: int | None = None

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.maximum, self.initial * self.multiplier ** max(0, attempt - 1))
        if not self.jitter:
            return float(base)
        return float(base * (1.0 - self.jitter * rng()))

    def retrying(
        self,
        clock: Clock,
        stop: Waitable | None = None,
        *,
        retry: RetryBaseT = ANY_EXCEPTION,
        deadline: float | None = None,
        before_sleep: Callable[[RetryCallState], Awaitable[None] | None] | None = None,
    ) -> AsyncRetrying:
        """A tenacity retry loop with this backoff on ``clock``: ``async for attempt in ...: with attempt: ...``.
        It retries what ``retry`` accepts (every ``Exception`` by default; never a ``BaseException`` that is no
        ``Exception``, such as a task's cancellation, which tenacity would otherwise offer to ``retry`` like any
        other failure) until the attempts run out or the
        next wait would end after ``deadline``, then re-raises the last failure (or, when the last attempt
        returned a result ``retry`` rejected, raises tenacity's ``RetryError``); a sleep cut short by ``stop``
        raises ``Stopped``."""
        ends: list[stop_base] = [stop_never if self.max_attempts is None else stop_after_attempt(self.max_attempts)]
        if deadline is not None:
            ends.append(_BeforeDeadline(clock, deadline))
        return AsyncRetrying(
            sleep=clock.sleeper(stop),
            stop=stop_any(*ends),
            wait=lambda state: self.delay(state.attempt_number),
            retry=_NeverBaseExceptions(retry),
            before_sleep=before_sleep,
            reraise=True,
        )


async def attempt_then_retry(retrying: Callable[[], AsyncRetrying], attempt: Callable[[int], Awaitable[None]],
                             retried: Callable[[Exception], bool]) -> None:
    """``attempt(1)``, and only when it fails with an error ``retried`` accepts, the retry loop ``retrying()``, whose
    first attempt is that failure (replayed, not run again) and whose later attempts call ``attempt(n)``. The
    attempts, their waits, ``before_sleep`` and what is raised in the end are those of the loop run from the start;
    a first attempt that succeeds (nearly every one) costs no tenacity loop, which costs more than many an attempt.
    An error ``retried`` refuses is raised as it is, as the loop would (``reraise``)."""
    try:
        await attempt(1)
    except Exception as e:
        if not retried(e):
            raise
        first = e
    else:
        return
    async for state in retrying():
        with state:
            number = state.retry_state.attempt_number
            if number == 1:
                raise first
            await attempt(number)


class _BeforeDeadline(stop_base):
    """Stop when the upcoming wait would end after ``deadline`` (a ``clock.monotonic()`` value)."""

    def __init__(self, clock: Clock, deadline: float) -> None:
        self.clock = clock
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.clock.monotonic() + retry_state.upcoming_sleep > self.deadline


class _NeverBaseExceptions(retry_base):
    """``retry``, except that an attempt ended by a ``BaseException`` that is no ``Exception`` (the task was
    cancelled, the process is exiting) is never retried: it propagates."""

    def __init__(self, retry: RetryBaseT) -> None:
        self.retry = retry

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        if outcome is not None and outcome.failed and not isinstance(outcome.exception(), Exception):
            return False
        return bool(self.retry(retry_state))
