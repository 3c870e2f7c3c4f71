"""``python -m ebb_decisions_api``: serve the API with uvicorn, configured by EBB_DECISIONS_API_*.

Logs are JSON lines (``ebb.adapters.logs``), uvicorn's included (its own log config is turned off so its
loggers go through the same renderer). uvicorn handles SIGTERM and SIGINT: it stops accepting, ends the
open event streams, waits for requests in flight (at most 10 s), then the lifespan stops the Kafka consumers
and closes the bus and the store. uvicorn raises the signal again once it is done; SIGTERM then exits 0
(a stop asked for is not a failure), as it does when it arrives before uvicorn took over the signals.
Exit 2 without a token, or with a read token that is empty or the write token's.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from types import FrameType

import structlog
import uvicorn

from ebb.adapters import logs
from ebb.adapters.service import load_settings
from ebb_decisions_api.app import create_app, token_problem
from ebb_decisions_api.settings import Settings

log = structlog.get_logger("ebb_decisions_api")


async def serve(settings: Settings) -> None:
    app = create_app(settings)  # builds and, at shutdown, closes its own store and Kafka bus
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(),
                            log_config=None, proxy_headers=True, timeout_graceful_shutdown=10)
    await uvicorn.Server(config).serve()


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> int:
    settings = load_settings(Settings)
    if (problem := token_problem(settings)) is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    signal.signal(signal.SIGTERM, _terminated)
    log.info("decisions-api listening", host=settings.host, port=settings.port, kafka=settings.kafka_bootstrap,
             topic_prefix=settings.topic_prefix, cluster=settings.cluster)
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
