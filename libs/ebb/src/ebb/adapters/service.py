"""A service's process: settings from the environment, JSON logs, and its ``run(settings, stop)`` until SIGTERM
or SIGINT sets ``stop`` (the service then stops gracefully and the process exits 0).

A service that has not returned ``STOP_GRACE_SECONDS`` after the first signal, or when a second one comes, is
cancelled: a wait that does not watch ``stop`` (a service started while Kafka is down waits for it, forever) must
not keep the process from ending. The grace is shorter than Kubernetes' default termination grace period (30 s),
so the process ends on its own, with its clean-up run, before the kubelet kills it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import structlog
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from ebb.adapters import logs

#: how long a stopping service may take before it is cancelled
STOP_GRACE_SECONDS = 20.0

log = structlog.get_logger("ebb.service")


class ServiceSettings(Protocol):
    log_level: str


Settings = TypeVar("Settings", bound=BaseSettings)

#: the exit status of a service whose settings are invalid (as a command-line error)
BAD_SETTINGS_EXIT = 2
#: a setting whose name has one of these words may hold a credential (a token, a URL with a password): its value
#: is never printed
_SECRET_WORDS = frozenset({"token", "password", "secret", "url", "key", "credentials"})


def load_settings(settings_class: type[Settings]) -> Settings:
    """The service's settings from its environment. Invalid ones end the process with exit 2 and a line per
    problem on stderr naming the environment variable, its value and what is wrong, not a traceback."""
    try:
        return settings_class()
    except ValidationError as e:
        prefix = str(settings_class.model_config.get("env_prefix") or "")
        whole = f"the {prefix.rstrip('_') or settings_class.__name__} settings"  # an error of no one field
        for error in e.errors(include_url=False):
            field = "_".join(str(part) for part in error["loc"])
            name = (prefix + field).upper() if field else whole
            shown = isinstance(error.get("input"), str | int | float) and not _SECRET_WORDS.intersection(
                field.lower().split("_"))
            given = f" (given {error['input']!r})" if shown else ""
            print(f"error: {name}{given}: {error['msg']}", file=sys.stderr)
        raise SystemExit(BAD_SETTINGS_EXIT) from None


def serve(settings: ServiceSettings, run: Callable[[Any, asyncio.Event], Awaitable[object]],
          *, grace: float = STOP_GRACE_SECONDS) -> None:
    """Run ``run(settings, stop)`` in a new event loop; SIGTERM and SIGINT set ``stop``, and cancel ``run`` when it
    has not returned ``grace`` seconds after the first signal, or at the second."""
    logs.configure(settings.log_level)
    asyncio.run(stopped_by_signals(lambda stop: run(settings, stop), grace=grace))


async def stopped_by_signals(run: Callable[[asyncio.Event], Awaitable[object]], *,
                             grace: float = STOP_GRACE_SECONDS) -> None:
    """``run(stop)`` until it returns; SIGTERM and SIGINT set ``stop``; the task is cancelled ``grace`` seconds
    after the first signal if it is still running, or at once on a second signal. A cancelled run ends quietly
    (it was asked to stop), after a warning."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    task: asyncio.Task[object] = asyncio.ensure_future(run(stop))
    cancelled_because: list[str] = []

    def cancel(why: str) -> None:
        if not task.done() and not cancelled_because:
            cancelled_because.append(why)
            log.warning("the service did not stop in time; cancelling it", why=why)
            task.cancel()

    def on_signal(signum: int) -> None:
        if not stop.is_set():
            log.info("stopping", signal=signal.Signals(signum).name, grace_seconds=grace)
            stop.set()
            loop.call_later(grace, cancel, f"still running {grace:g} s after {signal.Signals(signum).name}")
        else:
            cancel(f"a second signal ({signal.Signals(signum).name})")

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await task
    except asyncio.CancelledError:
        if not cancelled_because:
            raise  # cancelled from outside, not by a signal here
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
