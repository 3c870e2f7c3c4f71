"""``python -m ebb_termination_executor``: run the termination-executor until SIGTERM or SIGINT.

A stop lets a command being executed finish a step; a drain waiting on a pod is interrupted, its
command left uncommitted and resumed after the restart."""

from __future__ import annotations

import asyncio
import signal

from ebb.adapters import logs
from ebb_termination_executor import app
from ebb_termination_executor.settings import Settings


async def _main(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await app.run(settings, stop)


def main() -> None:
    settings = Settings()
    logs.configure(settings.log_level)
    asyncio.run(_main(settings))


if __name__ == "__main__":
    main()
