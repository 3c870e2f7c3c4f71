"""GET /v1/events: disruption events as they happen, as server-sent events from the ``EventHub``.

A subscriber is registered before the response starts, so an event published once the client sees the headers
reaches it; the stream ends cleanly within ``SHUTDOWN_GRACE_SECONDS`` when the server stops, and a client that
falls behind or stops reading is dropped (the hub's queue bound, the settings' send timeout).
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Response
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask

from ebb_decisions_api.context import V1, Context
from ebb_decisions_api.events import keep_alive
from ebb_decisions_api.schemas import NAME_MAX

#: how long an event stream may take to end cleanly once the server stops
SHUTDOWN_GRACE_SECONDS = 2.0

router = APIRouter(prefix=V1, tags=["events"])


@router.get("/events", summary="Disruption events as they happen (server-sent events)",
            response_class=Response,
            responses={200: {"description": "`text/event-stream`: `id: <event id>`, `event: <phase>`, "
                                            "`data: <DisruptionEvent JSON>` per event; `: keep-alive` comments",
                             "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
async def events(
    ctx: Context,
    decision: Annotated[str | None, Query(max_length=NAME_MAX, description="only this decision's events")] = None,
    node: Annotated[str | None, Query(max_length=NAME_MAX, description="only this node's events")] = None,
) -> EventSourceResponse:
    hub = ctx.hub
    # registered now, before the response starts: an event published once the client sees the headers
    # reaches it
    sub = hub.subscribe(decision=decision, node=node)
    # set by sse-starlette when the server stops: the stream then ends cleanly within the grace period
    stopping = anyio.Event()
    return EventSourceResponse(
        hub.stream(sub, stopping),
        shutdown_event=stopping,
        shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"},
        ping=ctx.settings.sse_keepalive_seconds,
        ping_message_factory=keep_alive,
        sep="\n",
        send_timeout=ctx.settings.sse_send_timeout_seconds,
        background=BackgroundTask(hub.unsubscribe, sub),
    )
