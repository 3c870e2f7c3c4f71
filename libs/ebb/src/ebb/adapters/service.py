"""A service's process: settings from the environment, JSON logs, and its ``run(settings, stop)`` until SIGTERM
or SIGINT sets ``stop`` (the service then stops gracefully and the process exits 0)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ebb.adapters import logs


class ServiceSettings(Protocol):
    log_level: str


def serve(settings: ServiceSettings, run: Callable[[Any, asyncio.Event], Awaitable[object]]) -> None:
    """Run ``run(settings, stop)`` in a new event loop; SIGTERM and SIGINT set ``stop``."""
    logs.configure(settings.log_level)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)

    asyncio.run(main())
