"""The decisions-api application: /v1 (bearer token), /healthz, /readyz, /metrics and /docs."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ebb.adapters.store.repository import MAX_PAGE, CursorError, DecisionFilter, Repository
from ebb_decisions_api.metrics import ApiMetrics, MetricsMiddleware
from ebb_decisions_api.planning import InputError, PlanInputError, SnapshotError, read_body, run_plan
from ebb_decisions_api.schemas import (
    SCOPE_TO_STORE,
    DecisionDetail,
    DecisionList,
    DecisionOut,
    DecisionState,
    HoldCreate,
    HoldList,
    HoldOut,
    TimelineEntry,
    utc_now,
)
from ebb_decisions_api.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="EBB_DECISIONS_API_TOKEN")


def _unprocessable(loc: tuple[str, ...] | list[str], message: str, kind: str, **extra: Any) -> JSONResponse:
    """A 422 in FastAPI's own shape: {"detail": [{"loc": [...], "msg": ..., "type": ...}]}."""
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        content={"detail": [{"loc": list(loc), "msg": message, "type": kind, **extra}]},
    )


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def create_app(settings: Settings, repository: Repository | None = None) -> FastAPI:
    """The API for ``settings``. Without a ``repository`` one is built from ``settings.database_url``
    (and closed at shutdown); a given repository is the caller's to close."""
    if settings.token is None or not settings.token.get_secret_value():
        raise ValueError("EBB_DECISIONS_API_TOKEN is required: every /v1 request must carry it as a bearer token")
    token = settings.token.get_secret_value().encode()
    owned = repository is None
    repo = repository or Repository.from_url(settings.database_url, settings.cluster)
    metrics = ApiMetrics()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned:
                await repo.close()

    app = FastAPI(
        title="ebb decisions-api",
        version="1",
        summary="ebb's disruption decisions, holds and dry-run planner over REST.",
        lifespan=lifespan,
    )
    app.state.repository = repo
    app.state.metrics = metrics
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    async def require_token(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if credentials is None or not secrets.compare_digest(credentials.credentials.encode(), token):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail="a valid bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # -- probes and metrics ------------------------------------------------------------------------------

    @app.get("/healthz", tags=["ops"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], summary="The database answers", responses={503: {"description": "not ready"}})
    async def readyz() -> JSONResponse:
        try:
            await asyncio.wait_for(repo.ping(), timeout=settings.ready_timeout_seconds)
        except Exception as exc:  # any failure to reach the store means not ready
            return JSONResponse(
                status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                content={"status": "unavailable", "database": type(exc).__name__},
            )
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["ops"], summary="Prometheus exposition", response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_token)],
                   responses={401: {"description": "missing or wrong bearer token"}})

    # -- plan --------------------------------------------------------------------------------------------

    @v1.post(
        "/plan",
        tags=["plan"],
        summary="Dry run: what ebb would disrupt now on an uploaded snapshot (`ebb plan -o json`)",
        responses={422: {"description": "invalid input; loc names the document and field"},
                   413: {"description": "snapshot larger than EBB_DECISIONS_API_MAX_PLAN_BYTES"}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/yaml": {"schema": {"type": "string"}},
                    "text/plain": {"schema": {"type": "string"}},
                    "application/json": {"schema": {"oneOf": [{"type": "object"}, {"type": "array"}]}},
                },
            }
        },
    )
    async def plan(
        request: Request,
        *,
        now: Annotated[datetime | None, Query(description="evaluate at this RFC 3339 time (default: now)")] = None,
        until_stable: Annotated[bool, Query(alias="untilStable", description="apply passes until stable")] = False,
        spot_to_spot: Annotated[bool, Query(alias="spotToSpot", description="allow spot→spot replacement")] = False,
    ) -> JSONResponse:
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
            moment = body.now or _utc(now) or utc_now()
            stable = until_stable if body.until_stable is None else body.until_stable
            spot = spot_to_spot if body.spot_to_spot is None else body.spot_to_spot
            result = await anyio.to_thread.run_sync(run_plan, body, moment, stable, spot)
        except PlanInputError as exc:
            return _unprocessable(exc.loc, str(exc), exc.kind)
        except SnapshotError as exc:
            return _unprocessable(("body", exc.document, exc.field), str(exc), "snapshot_error",
                                  document=exc.document, field=exc.field)
        except InputError as exc:
            return _unprocessable(("body",), str(exc), "input_error")
        return JSONResponse(result)

    # -- holds -------------------------------------------------------------------------------------------

    @v1.post("/holds", tags=["holds"], status_code=status.HTTP_201_CREATED, response_model_by_alias=True,
             summary="Pause Empty and Underutilized disruptions in a scope until expiresAt")
    async def create_hold(hold: HoldCreate) -> HoldOut:
        now = utc_now()
        row = await repo.create_hold(
            scope_kind=SCOPE_TO_STORE[hold.scope],
            scope=hold.target or "",
            reason=hold.reason,
            expires_at=hold.expires_at,
            now=now,
            created_by="decisions-api",
        )
        return HoldOut.of(row, now)

    @v1.get("/holds", tags=["holds"], summary="Holds in force (and, on request, expired ones)")
    async def list_holds(
        include_expired: Annotated[bool, Query(alias="includeExpired")] = False,
    ) -> HoldList:
        now = utc_now()
        rows = await repo.list_holds(now, include_expired=include_expired)
        return HoldList(items=[HoldOut.of(r, now) for r in rows])

    @v1.delete("/holds/{hold_id}", tags=["holds"], status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a hold", responses={404: {"description": "no such hold"}})
    async def delete_hold(hold_id: str) -> Response:
        if not await repo.delete_hold(hold_id):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no hold {hold_id!r}")
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    # -- decisions ---------------------------------------------------------------------------------------

    @v1.get("/decisions", tags=["decisions"], summary="Decisions, newest first, with filters and a cursor",
            responses={422: {"description": "invalid filter or cursor"}})
    async def list_decisions(
        *,
        state: DecisionState | None = None,
        method: str | None = None,
        reason: str | None = None,
        nodepool: str | None = None,
        node: str | None = None,
        since: Annotated[datetime | None, Query(description="created at or after (RFC 3339)")] = None,
        cursor: Annotated[str | None, Query(description="nextCursor of the previous page")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> Any:
        filters = DecisionFilter(state=state, method=method, reason=reason, nodepool=nodepool, node=node,
                                 since=_utc(since))
        try:
            page = await repo.list_decisions(filters, cursor=cursor, limit=limit)
        except CursorError as exc:
            return _unprocessable(("query", "cursor"), str(exc), "value_error")
        return DecisionList(items=[DecisionOut.of(d) for d in page.items], next_cursor=page.next_cursor)

    @v1.get("/decisions/{decision_id}", tags=["decisions"], summary="One decision and its timeline",
            responses={404: {"description": "no such decision"}})
    async def get_decision(decision_id: str) -> DecisionDetail:
        found = await repo.get_decision(decision_id)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no decision {decision_id!r}")
        decision, events = found
        return DecisionDetail(**DecisionOut.fields_of(decision), timeline=[TimelineEntry.of(e) for e in events])

    app.include_router(v1)
    return app
