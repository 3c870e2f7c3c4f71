"""``python -m ebb_consolidation_planner``: run the consolidation-planner until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal

from ebb.adapters import logs
from ebb_consolidation_planner import app
from ebb_consolidation_planner.settings import Settings


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
