"""The decisions-api's test kit on the in-memory bus: its bearer token, the scenario documents it is fed (as
``ebb.cluster.objects`` messages), and ``running``, the app with its lifespan (consumers running) and an in-process
client. Shared by the API's service tests, its fuzzing, the fuzzing of the handlers and the server-restart
tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import yaml
from fastapi import FastAPI

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.messages import cluster_object

#: the API token of these tests, and the header that carries it
TOKEN = "service-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


#: the shared scenario documents (a cluster as ``kubectl get -o yaml`` prints it)
SCENARIOS = Path("/work/shared/scenarios")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SCENARIOS / name).read_text()) if d]


async def publish(bus: InMemoryBus, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, cluster_object(doc))


@contextlib.asynccontextmanager
async def running(settings: Settings, store: DecisionStore,
                  bus: InMemoryBus) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with its lifespan (consumers running), and an in-process client."""
    app = create_app(settings, store, bus=bus)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield app, client
