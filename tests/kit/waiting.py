"""Waiting for something asynchronous to happen: ``eventually``, the one poller of every test that waits (the
service tests on the in-memory bus, the integration tests on real servers, the bus conformance suite).

A probe is polled until its value is truthy, and that value is returned, so a wait can hand over what it waited
for (``[decision] = await eventually("the approval", lambda: store.approved())``). A probe says "not yet" with
None, False or an empty value; a probe whose answer may legitimately be empty says so with a boolean. For its first
two seconds a wait polls every 20 ms, as an in-memory service answers in milliseconds and a test may look at once
at what follows (a planner's next pass can propose again 300 ms after a rejection); then the pause doubles up to
``interval``, so that a real server is not asked more than a few times a second. The default limit is generous,
because the test machine is small and shared, and it only matters to a test that fails."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: the pause between two polls during a wait's first seconds, and how long those last
QUICK_PAUSE = 0.02
QUICK_SECONDS = 2.0


@overload
async def eventually(what: str, probe: Callable[[], Awaitable[T | None]], within: float = 60, *,
                     interval: float = 0.25, on_timeout: Callable[[], str] | None = None) -> T: ...


@overload
async def eventually(what: str, probe: Callable[[], T | None], within: float = 60, *,
                     interval: float = 0.25, on_timeout: Callable[[], str] | None = None) -> T: ...


async def eventually(what: str, probe: Callable[[], Any], within: float = 60, *, interval: float = 0.25,
                     on_timeout: Callable[[], str] | None = None) -> Any:
    """Call ``probe`` (awaiting its value when it is awaitable) until the value is truthy, and return it;
    AssertionError naming ``what`` (and ``on_timeout()``'s text, e.g. a service's log) after ``within`` seconds.
    The overloads give the caller the probe's type."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + within
    pause = min(QUICK_PAUSE, interval)
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            extra = f"\n{on_timeout()}" if on_timeout else ""
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}{extra}")
        await asyncio.sleep(pause)
        if loop.time() - start > QUICK_SECONDS:
            pause = min(pause * 2, interval)
