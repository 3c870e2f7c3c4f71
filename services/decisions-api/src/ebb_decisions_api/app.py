"""The decisions-api application: /v1 (bearer token), /healthz, /readyz, /metrics and /docs.

``create_app`` is the composition root: the store (``ebb.adapters.store.decision_store.DecisionStore``, the
one the planner and the executor use too), the bus (Kafka from the settings, or an injected one such as
``InMemoryBus``), the live cluster state rebuilt from ebb.cluster.objects (``LiveState``), the
disruption-event fan-out (``EventHub``) and the consumers that feed both, which run inside the FastAPI
lifespan and stop with it. CPU-bound work (parsing, engine passes) runs in worker
threads, at most ``max_concurrent_passes`` at once, so the event loop keeps answering probes and streams.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio
import anyio.to_thread
import structlog
from fastapi import APIRouter, Body, Depends, FastAPI, HTTPException, Path, Query, Request, Response, status
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ebb.adapters.bus import Bus, KafkaBus
from ebb.adapters.clock import clock_of
from ebb.adapters.engine_options import read_engine_options
from ebb.adapters.store.decision_store import MAX_PAGE, CursorError, DecisionFilter, DecisionStore
from ebb.adapters.store.models import Hold
from ebb.core.methods.base import EngineOptions
from ebb_decisions_api.consumers import Consumers
from ebb_decisions_api.events import EventHub, keep_alive
from ebb_decisions_api.explain import budgets_report
from ebb_decisions_api.live import InvalidSnapshot, LiveState, LiveView, NotSeeded, object_holds
from ebb_decisions_api.metrics import ApiMetrics, MetricsMiddleware
from ebb_decisions_api.passes import LeaderPasses, NoPass, UnknownNode, explanation, with_leader_demand
from ebb_decisions_api.planning import (
    InputError,
    PlanInputError,
    SnapshotError,
    plan_options,
    plan_snapshot,
    read_body,
    run_plan,
)
from ebb_decisions_api.schemas import (
    NAME_MAX,
    SCOPE_TO_STORE,
    ClusterHolds,
    DateTime,
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

log = structlog.get_logger("ebb_decisions_api")

#: how many of a node's decisions (newest first) the explanation lists
EXPLAIN_DECISIONS = 10
#: how long an event stream may take to end cleanly once the server stops
SHUTDOWN_GRACE_SECONDS = 2.0
#: a page cursor is unpadded base64url (``ebb.adapters.store.decision_store.encode_cursor``)
CURSOR_PATTERN = r"^[A-Za-z0-9_-]*$"
#: what a page of decisions leads to (OpenAPI links: documentation, and the fuzzer's stateful runs follow them)
DECISION_PAGE_LINKS = {
    "firstDecision": {"operationRef": "#/paths/~1v1~1decisions~1{decision_id}/get",
                      "parameters": {"decision_id": "$response.body#/items/0/id"},
                      "description": "the page's first decision, with its timeline"},
    "nextPage": {"operationRef": "#/paths/~1v1~1decisions/get",
                 "parameters": {"cursor": "$response.body#/nextCursor"},
                 "description": "the next page (nextCursor is null on the last page)"},
}
#: the methods a 405's Allow header may name
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: where holds are created (its body's validation errors are located by field, whatever the scope)
HOLDS_PATH = "/v1/holds"

_bearer = HTTPBearer(auto_error=False, description="EBB_DECISIONS_API_TOKEN")


def _unprocessable(loc: tuple[str, ...] | list[str], message: str, kind: str, **extra: Any) -> JSONResponse:
    """A 422 in FastAPI's own shape: {"detail": [{"loc": [...], "msg": ..., "type": ...}]}."""
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        content={"detail": [{"loc": list(loc), "msg": message, "type": kind, **extra}]},
    )


def _hold_field_locs(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Validation errors of a hold body located as ``["body", <field>]`` whatever its scope: pydantic puts the
    union's tag (the scope) into the loc of a discriminated union's errors, and says ``["body"]`` for a bad or
    missing scope."""
    located = []
    for error in errors:
        loc = list(error.get("loc", ()))
        if error.get("type") in ("union_tag_invalid", "union_tag_not_found"):
            loc = ["body", "scope"]
        elif loc[:1] == ["body"] and len(loc) > 2 and loc[1] in SCOPE_TO_STORE:
            loc = ["body", *loc[2:]]
        located.append({**error, "loc": loc})
    return located


def _allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method some route of the request's path answers (Starlette's 405 names only the first route's,
    so ``OPTIONS /v1/holds`` said ``Allow: POST`` although GET is served there too). Each method is tried
    against the routes, included routers too, as the router would match the request."""
    return [method for method in HTTP_METHODS
            if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in app.router.routes)]


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _holds_for(holds: Sequence[Hold], *, pool: str | None, node: str | None = None) -> list[Hold]:
    """The holds that apply to a node of ``pool`` (or, without ``node``, to the pool): cluster-wide ones,
    the pool's, and the node's."""
    return [h for h in holds if h.scope_kind == "cluster"
            or (h.scope_kind == "nodepool" and pool is not None and h.scope == pool)
            or (h.scope_kind == "node" and node is not None and h.scope == node)]


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True)


def create_app(settings: Settings, store: DecisionStore | None = None, *, bus: Bus | None = None,
               options: EngineOptions | None = None, clock: Callable[[], datetime] = utc_now) -> FastAPI:
    """The API for ``settings``. Without a ``store`` one is built from ``settings.database_url``
    (and closed at shutdown); a given store is the caller's to close. Without a ``bus`` a
    ``KafkaBus`` is built from the settings (it connects when the consumers first use it, and is closed at
    shutdown); a given bus (an ``InMemoryBus`` in tests and the embedded mode, or a ``KafkaBus``) is the caller's.
    ``options`` are the engine options of live plans and explanations at a given time (default: the cluster-wide
    object at ``settings.engine_options`` over the settings' ``spot_to_spot`` and ``provider``, as the planner
    reads them); an explanation without a time is the leader planner's (ebb.planner.passes). ``clock`` is "now"
    when a request gives none (the embedded mode's simulated time)."""
    if settings.token is None or not settings.token.get_secret_value():
        raise ValueError("EBB_DECISIONS_API_TOKEN is required: every /v1 request must carry it as a bearer token")
    token = settings.token.get_secret_value().encode()
    owned = store is None
    if store is None:
        store = DecisionStore.from_url(settings.database_url, settings.cluster)
    owned_bus: KafkaBus | None = None
    if bus is None:
        owned_bus = KafkaBus(settings.kafka_bootstrap, prefix=settings.topic_prefix, source=settings.source,
                             client_id="ebb-decisions-api")
        bus = owned_bus
    engine_options = options or read_engine_options(settings.engine_options, EngineOptions(
        spot_to_spot=settings.spot_to_spot, require_nodeclaim=settings.provider == "karpenter"))
    metrics = ApiMetrics()
    limiter = anyio.CapacityLimiter(settings.max_concurrent_passes)
    live = LiveState(store, limiter)
    hub = EventHub(settings.sse_queue_size, metrics)
    passes = LeaderPasses(settings.cluster)
    consumers = Consumers(bus, live, hub, metrics, group=settings.group,
                          retry_max_seconds=settings.kafka_retry_max_seconds, clock=clock_of(clock), passes=passes)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        consumers.start()
        log.info("decisions-api started", cluster=settings.cluster, objects_group=consumers.objects_group,
                 events_group=consumers.events_group)
        try:
            yield
        finally:
            hub.close()
            await consumers.stop()
            if owned_bus is not None:
                await owned_bus.close()
            if owned:
                await store.close()
            log.info("decisions-api stopped")

    app = FastAPI(
        title="ebb decisions-api",
        version="1",
        summary="ebb's disruption decisions, holds, explanations, budgets, event stream and dry-run planner over REST.",
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.metrics = metrics
    app.state.live = live
    app.state.events = hub
    app.state.consumers = consumers
    app.state.passes = passes
    app.state.bus = bus
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        if request.url.path == HOLDS_PATH:
            exc = RequestValidationError(_hold_field_locs(exc.errors()), body=exc.body)
        return await request_validation_exception_handler(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(_allowed_methods(app, request.scope))}
        return await http_exception_handler(request, exc)

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

    @app.get("/readyz", tags=["ops"], summary="The database answers, the cluster state is loaded and events flow",
             responses={503: {"description": "not ready"}})
    async def readyz() -> JSONResponse:
        problems: dict[str, str] = {}
        try:
            await asyncio.wait_for(store.ping(), timeout=settings.ready_timeout_seconds)
        except Exception as exc:  # any failure to reach the store means not ready
            problems["database"] = type(exc).__name__
        if not live.seeded.is_set():
            problems["snapshot"] = "loading"
        if not consumers.events_ready.is_set():
            problems["events"] = "starting"
        if problems:
            return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                                content={"status": "unavailable", **problems})
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["ops"], summary="Prometheus exposition", response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_token)],
                   responses={401: {"description": "missing or wrong bearer token"}})

    async def live_view(moment: datetime) -> LiveView:
        """The live snapshot at ``moment``; 503 while it is loading or when it is invalid."""
        try:
            return await live.view(moment)
        except (NotSeeded, InvalidSnapshot) as exc:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc

    # -- plan --------------------------------------------------------------------------------------------

    @v1.post(
        "/plan",
        tags=["plan"],
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
            moment = body.now or _utc(now) or clock()
            stable = until_stable if body.until_stable is None else body.until_stable
            options = plan_options(body, spot_to_spot, engine_options)
            if body.live:
                view = await live_view(moment)
                result = await anyio.to_thread.run_sync(
                    functools.partial(plan_snapshot, with_leader_demand(view.snapshot, passes), moment, stable,
                                      options, nodes=node or ()), limiter=limiter)
            else:
                result = await anyio.to_thread.run_sync(run_plan, body, moment, stable, options.spot_to_spot,
                                                        node or (), limiter=limiter)
        except PlanInputError as exc:
            return _unprocessable(exc.loc, str(exc), exc.kind)
        except SnapshotError as exc:
            return _unprocessable(("body", exc.document, exc.field), str(exc), "snapshot_error",
                                  document=exc.document, field=exc.field)
        except InputError as exc:
            return _unprocessable(("body",), str(exc), "input_error")
        return JSONResponse(result)

    # -- holds -------------------------------------------------------------------------------------------

    @v1.post("/holds", tags=["holds"], status_code=status.HTTP_201_CREATED, response_model=HoldOut,
             response_model_by_alias=True,
             summary="Pause Empty and Underutilized disruptions in a scope until expiresAt",
             responses={400: {"description": "a body that cannot be read as JSON"},
                        422: {"description": "an invalid body, or a NodePool the live cluster state does not have"}})
    async def create_hold(hold: Annotated[HoldCreate, Body()]) -> HoldOut | JSONResponse:
        now = clock()
        if hold.scope == "nodePool" and hold.target:
            # a hold on a NodePool that does not exist would pause nothing and say so nowhere; while the
            # cluster state is still loading (or invalid) the pool cannot be checked and the hold is kept
            with suppress(NotSeeded, InvalidSnapshot):
                known = sorted(p.name for p in (await live.snapshot()).nodepools)
                if hold.target not in known:
                    return _unprocessable(("body", "target"), f"no NodePool {hold.target!r} in the live cluster "
                                          f"state (known: {', '.join(known) or 'none'})", "unknown_nodepool")
        row = await store.create_hold(
            scope_kind=SCOPE_TO_STORE[hold.scope],
            scope=hold.target or "",
            reason=hold.reason,
            expires_at=hold.expires_at,
            now=now,
            created_by="decisions-api",
        )
        return HoldOut.of(row, now)

    async def cluster_holds() -> tuple[list[Hold], ClusterHolds]:
        """The cluster's Hold objects (kind ``object``) and whether they could be read: none while the cluster
        state is loading or invalid."""
        try:
            return object_holds(await live.snapshot(), live.objects), "listed"
        except NotSeeded:
            return [], "loading"
        except InvalidSnapshot:
            return [], "invalid"

    @v1.get("/holds", tags=["holds"], summary="Holds in force (and, on request, expired ones): the store's, then "
                                              "the cluster's Hold objects")
    async def list_holds(
        include_expired: Annotated[bool, Query(alias="includeExpired")] = False,
    ) -> HoldList:
        now = clock()
        rows = await store.list_holds(now, include_expired=include_expired)
        objects, known = await cluster_holds()
        objects = [h for h in objects if include_expired or h.in_force(now)]
        return HoldList(items=[HoldOut.of(r, now) for r in [*rows, *objects]], cluster_holds=known)

    @v1.delete("/holds/{hold_id}", tags=["holds"], status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a hold",
               responses={404: {"description": "no such hold"},
                          409: {"description": "a Hold object of the cluster: deleted with kubectl, not here"},
                          503: {"description": "not a hold of the store, and the cluster state that would say "
                                              "whether it is a Hold object is not loaded yet, or invalid"}})
    async def delete_hold(hold_id: str) -> Response:
        if not await store.delete_hold(hold_id):
            objects, known = await cluster_holds()
            if any(h.id == hold_id for h in objects):
                raise HTTPException(status.HTTP_409_CONFLICT, f"hold {hold_id!r} is a Hold object of the cluster: "
                                                              f"delete it with kubectl delete hold {hold_id}")
            if known != "listed":
                raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                                    f"no hold {hold_id!r} in the store, and the cluster state is {known}: whether it "
                                    "is a Hold object of the cluster cannot be told yet", headers={"Retry-After": "5"})
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no hold {hold_id!r}")
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    # -- decisions ---------------------------------------------------------------------------------------

    @v1.get("/decisions", tags=["decisions"], summary="Decisions, newest first, with filters and a cursor",
            responses={200: {"links": DECISION_PAGE_LINKS}, 422: {"description": "invalid filter or cursor"}})
    async def list_decisions(
        *,
        state: DecisionState | None = None,
        method: str | None = None,
        reason: str | None = None,
        nodepool: str | None = None,
        node: str | None = None,
        since: Annotated[DateTime | None, Query(description="created at or after (RFC 3339)")] = None,
        cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the previous page "
                                                                         "(absent or empty: the first page)")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> Any:
        filters = DecisionFilter(state=state, method=method, reason=reason, nodepool=nodepool, node=node,
                                 since=_utc(since))
        try:
            page = await store.list_decisions(filters, cursor=cursor or None, limit=limit)
        except CursorError as exc:
            return _unprocessable(("query", "cursor"), str(exc), "value_error")
        return DecisionList(items=[DecisionOut.of(d) for d in page.items], next_cursor=page.next_cursor)

    @v1.get("/decisions/{decision_id}", tags=["decisions"], summary="One decision and its timeline",
            responses={404: {"description": "no such decision"}})
    async def get_decision(decision_id: str) -> DecisionDetail:
        found = await store.get_decision(decision_id)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no decision {decision_id!r}")
        decision, events = found
        return DecisionDetail(**DecisionOut.fields_of(decision), timeline=[TimelineEntry.of(e) for e in events])

    # -- live state: explanations and budgets --------------------------------------------------------------

    @v1.get("/nodes/{name}/explain", tags=["live"],
            summary="Why this node is or is not being disrupted: the leader planner's last pass, with its time",
            responses={404: {"description": "no such node in the leader's last pass (or, with now, the live state)"},
                       503: {"description": "no pass of the leader planner yet, or the cluster state is not loaded "
                                            "yet, or invalid"}})
    async def explain_node(
        name: Annotated[str, Path(max_length=NAME_MAX)],
        now: Annotated[DateTime | None, Query(description="evaluate a pass at this RFC 3339 time on the live state "
                                                          "(default: the leader planner's last pass)")] = None,
    ) -> JSONResponse:
        moment = _utc(now) or clock()
        view = await live_view(moment)
        try:
            out = await explanation(passes, view.snapshot, name, _utc(now), options=engine_options, limiter=limiter)
        except NoPass as exc:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc
        except UnknownNode as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        recent = await store.list_decisions(DecisionFilter(node=name), limit=EXPLAIN_DECISIONS)
        decisions = [DecisionOut.of(d) for d in recent.items]
        live_id = view.busy.get(name)
        current = next((d for d in decisions if d.id == live_id), None)
        if live_id is not None and current is None:
            found = await store.get_decision(live_id)
            current = DecisionOut.of(found[0]) if found is not None else None
        if current is not None:
            out["state"] = "being-disrupted"
            out["summary"] = (f"decision {current.id} ({current.state}) is disrupting it: {current.method}, "
                              f"{current.reason}, {current.action}")
        out["liveDecision"] = _dump(current) if current is not None else None
        out["decisions"] = [_dump(d) for d in decisions]
        out["holds"] = [_dump(HoldOut.of(h, moment))
                        for h in _holds_for(view.every_hold(), pool=out["nodePool"], node=name)]
        return JSONResponse(out)

    @v1.get("/nodepools/{name}/budgets", tags=["live"], summary="A NodePool's disruption budgets now",
            responses={404: {"description": "no such NodePool in the live cluster state"},
                       503: {"description": "the cluster state is not loaded yet, or invalid"}})
    async def nodepool_budgets(
        name: Annotated[str, Path(max_length=NAME_MAX)],
        now: Annotated[DateTime | None, Query(description="evaluate at this RFC 3339 time (default: now)")] = None,
    ) -> JSONResponse:
        moment = _utc(now) or clock()
        view = await live_view(moment)
        report = await anyio.to_thread.run_sync(budgets_report, view.snapshot, name, moment, limiter=limiter)
        if report is None:
            known = sorted(p.name for p in view.snapshot.nodepools)
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no NodePool {name!r} in the live cluster state "
                                                           f"(known: {', '.join(known) or 'none'})")
        report["holds"] = [_dump(HoldOut.of(h, moment)) for h in _holds_for(view.every_hold(), pool=name)]
        return JSONResponse(report)

    # -- events ------------------------------------------------------------------------------------------

    @v1.get("/events", tags=["events"], summary="Disruption events as they happen (server-sent events)",
            response_class=Response,
            responses={200: {"description": "`text/event-stream`: `id: <event id>`, `event: <phase>`, "
                                            "`data: <DisruptionEvent JSON>` per event; `: keep-alive` comments",
                             "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
    async def events(
        decision: Annotated[str | None, Query(max_length=NAME_MAX, description="only this decision's events")] = None,
        node: Annotated[str | None, Query(max_length=NAME_MAX, description="only this node's events")] = None,
    ) -> EventSourceResponse:
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
            ping=settings.sse_keepalive_seconds,
            ping_message_factory=keep_alive,
            sep="\n",
            send_timeout=settings.sse_send_timeout_seconds,
            background=BackgroundTask(hub.unsubscribe, sub),
        )

    app.include_router(v1)
    return app
