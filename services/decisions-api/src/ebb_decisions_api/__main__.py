"""``python -m ebb_decisions_api``: serve the API with uvicorn, configured by EBB_DECISIONS_API_*."""

from __future__ import annotations

import asyncio
import sys

import uvicorn

from ebb.adapters.store.repository import Repository
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings


async def serve(settings: Settings) -> None:
    repository = Repository.from_url(settings.database_url, settings.cluster)
    try:
        app = create_app(settings, repository)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level,
                                proxy_headers=True)
        await uvicorn.Server(config).serve()
    finally:
        await repository.close()


def main() -> int:
    settings = Settings()
    if settings.token is None or not settings.token.get_secret_value():
        print("error: EBB_DECISIONS_API_TOKEN is required", file=sys.stderr)
        return 2
    asyncio.run(serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
