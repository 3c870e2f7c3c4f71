"""POST /v1/plan: the dry run (`ebb plan -o json`) on an uploaded snapshot, or on the live cluster state.

The route reads the body within ``max_plan_bytes`` and hands it to ``ebb_decisions_api.planning``, which parses
and plans in a worker thread under the context's limiter; input errors come back as 422s located where they are.
"""

from __future__ import annotations

import functools
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse

from ebb_decisions_api.context import V1, Context, utc
from ebb_decisions_api.errors import unprocessable
from ebb_decisions_api.passes import with_leader_demand
from ebb_decisions_api.planning import (
    InputError,
    PlanInputError,
    SnapshotError,
    plan_options,
    plan_snapshot,
    read_body,
    run_plan,
)
from ebb_decisions_api.schemas import DateTime

router = APIRouter(prefix=V1, tags=["plan"])


@router.post(
    "/plan",
    summary="Dry run: what ebb would disrupt now on an uploaded snapshot, or on the live cluster state when "
            "the body carries none (`ebb plan -o json`)",
    responses={422: {"description": "invalid input; loc names the document and field"},
               413: {"description": "snapshot larger than EBB_DECISIONS_API_MAX_PLAN_BYTES"},
               503: {"description": "live plan: the cluster state is not loaded yet, or invalid"}},
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {
                # the value the YAML stream reads as (schemathesis writes a generated value as YAML): a
                # kubectl document or List, or a sequence of documents; an empty body (or null, an empty
                # document) is a plan on the live state
                "application/yaml": {"schema": {"oneOf": [{"type": "object"}, {"type": "array"},
                                                          {"type": "null"}]}},
                "text/plain": {"schema": {"type": "string"}},
                "application/json": {"schema": {"oneOf": [{"type": "object"}, {"type": "array"}]}},
            },
        }
    },
)
async def plan(
    request: Request,
    ctx: Context,
    *,
    now: Annotated[DateTime | None, Query(description="evaluate at this RFC 3339 time (default: now)")] = None,
    until_stable: Annotated[bool, Query(alias="untilStable", description="apply passes until stable")] = False,
    spot_to_spot: Annotated[bool | None, Query(
        alias="spotToSpot",
        description="allow spot→spot replacement (default: false; on the live state: SPOT_TO_SPOT)")] = None,
    node: Annotated[list[str] | None, Query(
        description="repeatable: only what the plan does to these nodes (`ebb plan --node`): the commands that "
                    "disrupt them, their own blocked entries, their NodePools' budgets")] = None,
) -> JSONResponse:
    settings = ctx.settings
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > settings.max_plan_bytes:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, f"snapshot over {settings.max_plan_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > settings.max_plan_bytes:
            raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, f"snapshot over {settings.max_plan_bytes} bytes")
        chunks.append(chunk)
    try:
        body = read_body(b"".join(chunks), request.headers.get("content-type", ""))
        moment = body.now or utc(now) or ctx.clock()
        stable = until_stable if body.until_stable is None else body.until_stable
        options = plan_options(body, spot_to_spot, ctx.engine_options)
        if body.live:
            view = await ctx.live_view(moment)
            result = await anyio.to_thread.run_sync(
                functools.partial(plan_snapshot, with_leader_demand(view.snapshot, ctx.passes), moment, stable,
                                  options, nodes=node or ()), limiter=ctx.limiter)
        else:
            result = await anyio.to_thread.run_sync(run_plan, body, moment, stable, options.spot_to_spot,
                                                    node or (), limiter=ctx.limiter)
    except PlanInputError as exc:
        return unprocessable(exc.loc, str(exc), exc.kind)
    except SnapshotError as exc:
        return unprocessable(("body", exc.document, exc.field), str(exc), "snapshot_error",
                             document=exc.document, field=exc.field)
    except InputError as exc:
        return unprocessable(("body",), str(exc), "input_error")
    return JSONResponse(result)
