"""/healthz, /readyz and /metrics: what Kubernetes' probes and Prometheus ask, without a token.

``/readyz`` is ready when the store answers, the live cluster state is loaded and the event consumer is reading:
a replica that cannot yet explain a node or stream events takes no traffic. Its detail also lists the conflicts with
Karpenter the live cluster shows (``conflicts``, ``ebb.core.conflicts``, as ``ebb plan``'s ``warnings[]``): they
do not make the API unready (it explains why the planner refuses those NodePools), they are there to be seen.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ebb.core.conflicts import conflict_json, conflicts
from ebb_decisions_api.context import Context

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database answers, the cluster state is loaded and events flow",
            responses={503: {"description": "not ready"}})
async def readyz(ctx: Context) -> JSONResponse:
    problems: dict[str, str] = {}
    try:
        await asyncio.wait_for(ctx.store.ping(), timeout=ctx.settings.ready_timeout_seconds)
    except Exception as exc:  # any failure to reach the store means not ready
        problems["database"] = type(exc).__name__
    if not ctx.live.seeded.is_set():
        problems["snapshot"] = "loading"
    if not ctx.consumers.events_ready.is_set():
        problems["events"] = "starting"
    if problems:
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                            content={"status": "unavailable", **problems})
    ready: dict[str, object] = {"status": "ready"}
    if ctx.conflict_settings is not None:
        try:
            snapshot = await ctx.live.snapshot()
        except Exception as exc:  # an invalid snapshot: the explanations say so; readiness is not about it
            ready["conflicts_unknown"] = str(exc)
        else:
            ready["conflicts"] = [conflict_json(c) for c in conflicts(snapshot, ctx.conflict_settings)]
    return JSONResponse(ready)


@router.get("/metrics", summary="Prometheus exposition", response_class=Response)
async def prometheus(ctx: Context) -> Response:
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
