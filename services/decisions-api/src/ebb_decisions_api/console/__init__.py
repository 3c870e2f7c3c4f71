"""/ui: the console, server-rendered HTML pages over what the /v1 routes answer (docs/console.md).

The pages are Jinja2 templates (``templates/``) rendered here; htmx (vendored in ``static/``, no CDN: the console
works offline) swaps the fragments a page asks for, and ``static/console.js`` follows ``/ui/events`` (server-sent
events rendered as HTML rows) with the browser's own ``EventSource``. Every page reads through the /v1 route
functions themselves (``ebb_decisions_api.routes``), called as functions with the app's ``ApiContext``, so a page
shows what the API answers, refusals included, and the console decides nothing but layout and the nodes' search: a
decision with its timeline, a node's "why not" from the leader planner's last pass, a NodePool's budgets with their
windows, the holds.

A person signs in with the API's own tokens (``context.role_of``): the token is kept in an HttpOnly, SameSite=Strict
cookie scoped to /ui, and its role is the API's: the read token sees everything and changes nothing, the write token
may also create and remove holds. A write must come from htmx (its ``HX-Request`` header, which a form of another
site cannot send) besides the cookie, which another site's request does not carry. The console's routes are not in
the OpenAPI document: they are pages, not API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

import anyio
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from pydantic import TypeAdapter, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from ebb.core.quantity import parse_duration
from ebb_decisions_api.context import ApiContext, Context, Role, role_of
from ebb_decisions_api.events import keep_alive
from ebb_decisions_api.live import InvalidSnapshot, NotSeeded
from ebb_decisions_api.routes import budgets, decisions, explain, holds
from ebb_decisions_api.schemas import NAME_MAX, HoldCreate, HoldList

#: where the console is served
UI = "/ui"
#: the cookie that keeps the signed-in token (HttpOnly, SameSite=Strict, path /ui)
COOKIE = "ebb_console"
#: how many decisions of each kind (real, shadow) the timeline lists
TIMELINE_DECISIONS = 50
#: the console's assets: name → media type (nothing else is served from static/)
ASSETS = {"htmx.min.js": "text/javascript", "console.js": "text/javascript", "console.css": "text/css"}
#: how long an event stream may take to end cleanly once the server stops (as /v1/events)
SHUTDOWN_GRACE_SECONDS = 2.0

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
hold_body: TypeAdapter[Any] = TypeAdapter(HoldCreate)

router = APIRouter(prefix=UI, include_in_schema=False)


def when(value: datetime | str | None) -> str:
    """A time as the console prints it: UTC to the second (the API's times are UTC)."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.strftime("%Y-%m-%d %H:%M:%SZ")


def short(identifier: str) -> str:
    """A decision id as a list shows it: its first 12 characters (the page's link and title carry it whole)."""
    return identifier if len(identifier) <= 16 else f"{identifier[:12]}…"


def pretty(value: Any) -> str:
    """A JSON value indented, for the explanation and the details the console shows as they are."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


templates.env.filters["when"] = when
templates.env.filters["pretty"] = pretty
templates.env.filters["short"] = short


def from_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


async def viewer(request: Request, ctx: Context) -> Role:
    """The signed-in role (a dependency of every page): without a known token a page redirects to the sign-in
    page (an htmx request is told to, with ``HX-Redirect``)."""
    role = role_of(ctx, request.cookies.get(COOKIE))
    if role is not None:
        return role
    login = f"{UI}/login?next={quote(request.url.path)}"
    if from_htmx(request):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "sign in to the console", headers={"HX-Redirect": login})
    raise HTTPException(status.HTTP_303_SEE_OTHER, "sign in to the console", headers={"Location": login})


async def writer(request: Request, role: Annotated[Role, Depends(viewer)]) -> Role:
    """The write role, on a request htmx sent (a dependency of every route that changes something)."""
    if role != "write":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the read-only token may not change holds: sign in with the "
                                                       "write token (EBB_DECISIONS_API_TOKEN)")
    if not from_htmx(request):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the console changes things only from its own pages (htmx)")
    return role


Viewer = Annotated[Role, Depends(viewer)]
Writer = Annotated[Role, Depends(writer)]


def page(request: Request, template: str, role: Role | None, status_code: int = 200, **values: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, template, {"role": role, "ui": UI, **values}, status_code=status_code)


def body_of(response: Any) -> Any:
    """What a route answered, as JSON: its model, or the body of the ``JSONResponse`` it returned."""
    if isinstance(response, JSONResponse):
        return json.loads(bytes(response.body))
    return response.model_dump(mode="json", by_alias=True)


# -- signing in ------------------------------------------------------------------------------------------------


@router.get("/login")
async def login_page(request: Request, next: str = UI) -> HTMLResponse:
    return page(request, "login.html", None, next=safe_next(next), error=None)


@router.post("/login")
async def login(request: Request, ctx: Context) -> Response:
    form = parse_qs((await request.body()).decode(errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    target = safe_next((form.get("next") or [UI])[0])
    if role_of(ctx, token) is None:
        return page(request, "login.html", None, status.HTTP_401_UNAUTHORIZED, next=target,
                    error="not a token of this API")
    response = RedirectResponse(target, status.HTTP_303_SEE_OTHER)
    response.set_cookie(COOKIE, token, path=UI, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse(f"{UI}/login", status.HTTP_303_SEE_OTHER)
    response.delete_cookie(COOKIE, path=UI, httponly=True, samesite="strict")
    return response


def safe_next(target: str) -> str:
    """Where to go after signing in: a console page only (never another site)."""
    return target if target.startswith(UI) and not target.startswith("//") else UI


# -- assets ----------------------------------------------------------------------------------------------------


@router.get("/static/{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no asset {name!r}")
    return Response((HERE / "static" / name).read_bytes(), media_type=ASSETS[name],
                    headers={"Cache-Control": "no-cache"})


# -- the timeline ----------------------------------------------------------------------------------------------


@router.get("")
async def timeline(request: Request, role: Viewer) -> HTMLResponse:
    return page(request, "timeline.html", role)


@router.get("/fragments/decisions")
async def decision_rows(request: Request, ctx: Context, _role: Viewer, shadow: bool = False) -> HTMLResponse:
    listed = body_of(await decisions.list_decisions(ctx, shadow=shadow, limit=TIMELINE_DECISIONS))
    return page(request, "decision_rows.html", None, decisions=listed["items"], shadow=shadow)


@router.get("/events")
async def events(ctx: Context, _role: Viewer,
                 decision: Annotated[str | None, Query(max_length=NAME_MAX)] = None) -> EventSourceResponse:
    """Disruption events as they happen, each an HTML row (event ``disruption``) for the page to insert."""
    hub = ctx.hub
    sub = hub.subscribe(decision=decision)
    stopping = anyio.Event()
    return EventSourceResponse(
        event_rows(hub.stream(sub, stopping)),
        shutdown_event=stopping,
        shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
        headers={"Cache-Control": "no-store"},
        ping=ctx.settings.sse_keepalive_seconds,
        ping_message_factory=keep_alive,
        sep="\n",
        send_timeout=ctx.settings.sse_send_timeout_seconds,
        background=BackgroundTask(hub.unsubscribe, sub),
    )


async def event_rows(frames: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """The hub's frames with each event's JSON rendered as one HTML row; comments pass as they are."""
    row = templates.get_template("event_row.html")
    async for frame in frames:
        if frame.data is None:
            yield frame
            continue
        event = json.loads(str(frame.data))
        html = " ".join(row.render(event=event, ui=UI).split())
        yield ServerSentEvent(data=html, event="disruption", id=frame.id, sep="\n")


# -- one decision ----------------------------------------------------------------------------------------------


@router.get("/decisions/{decision_id}")
async def decision_page(request: Request, decision_id: str, ctx: Context, role: Viewer) -> HTMLResponse:
    try:
        detail = body_of(await decisions.get_decision(decision_id, ctx))
    except HTTPException as exc:
        return page(request, "missing.html", role, exc.status_code, what=str(exc.detail))
    return page(request, "decision.html", role, decision=detail)


@router.get("/decisions/{decision_id}/timeline")
async def decision_timeline(request: Request, decision_id: str, ctx: Context, _role: Viewer) -> HTMLResponse:
    detail = body_of(await decisions.get_decision(decision_id, ctx))
    return page(request, "timeline_rows.html", None, decision=detail)


# -- nodes and why not -----------------------------------------------------------------------------------------


@router.get("/nodes")
async def nodes_page(request: Request, role: Viewer, q: str = "") -> HTMLResponse:
    return page(request, "nodes.html", role, q=q)


@router.get("/fragments/nodes")
async def node_rows(request: Request, ctx: Context, _role: Viewer, q: str = "") -> HTMLResponse:
    """The leader planner's last pass, one row per node: disrupted (and how) or why not; ``q`` keeps the rows
    whose node, NodePool or reason contain it (any case)."""
    latest = ctx.passes.latest
    rows: list[dict[str, Any]] = []
    if latest is not None:
        for command in latest.commands:
            rows += [{"node": node, "nodePool": pool, "disrupted": True, "method": command.method,
                      "reason": f"{command.method} would {command.action} it ({command.reason})"}
                     for node, pool in zip(command.nodes, command.node_pools, strict=True)]
        rows += [{"node": b.node, "nodePool": b.node_pool, "disrupted": False, "method": b.method,
                  "reason": b.reason} for b in latest.blocked]
    needle = q.strip().lower()
    shown = sorted((r for r in rows if not needle or any(needle in str(r[k] or "").lower()
                                                         for k in ("node", "nodePool", "reason"))),
                   key=lambda r: r["node"])
    return page(request, "node_rows.html", None, rows=shown, total=len(rows), q=q,
                at=latest.at if latest is not None else None)


@router.get("/nodes/{name}")
async def node_page(request: Request, name: str, ctx: Context, role: Viewer) -> HTMLResponse:
    """The node's explanation: the leader planner's last pass, or, when that pass does not have the node (one
    launched since) or there is no pass yet, a pass the API evaluates now on the live state (``?now=``)."""
    try:
        why = body_of(await explain.explain_node(name, ctx))
    except HTTPException:
        try:
            why = body_of(await explain.explain_node(name, ctx, now=ctx.clock()))
        except HTTPException as exc:
            return page(request, "missing.html", role, exc.status_code, what=str(exc.detail))
    return page(request, "node.html", role, why=why)


# -- budgets ---------------------------------------------------------------------------------------------------


@router.get("/budgets")
async def budgets_page(request: Request, ctx: Context, role: Viewer) -> HTMLResponse:
    try:
        pools = sorted(p.name for p in (await ctx.live.snapshot()).nodepools)
    except (NotSeeded, InvalidSnapshot) as exc:
        return page(request, "missing.html", role, status.HTTP_503_SERVICE_UNAVAILABLE, what=str(exc))
    reports = []
    for pool in pools:
        try:
            reports.append(body_of(await budgets.nodepool_budgets(pool, ctx)))
        except HTTPException:  # the pool went away since the list was read
            continue
    return page(request, "budgets.html", role, reports=reports)


# -- holds -----------------------------------------------------------------------------------------------------


@router.get("/holds")
async def holds_page(request: Request, ctx: Context, role: Viewer) -> HTMLResponse:
    return page(request, "holds.html", role, holds=await held(ctx), error=None)


async def held(ctx: ApiContext) -> Any:
    """The holds in force, as ``GET /v1/holds`` lists them."""
    listed: HoldList = await holds.list_holds(ctx)
    return body_of(listed)


@router.post("/holds")
async def create_hold(request: Request, ctx: Context, role: Writer) -> HTMLResponse:
    """A hold from the form (scope, target, reason, and ``for``, a duration; empty: until removed); the list
    again, with what was wrong when it was refused."""
    form = {k: v[0].strip() for k, v in parse_qs((await request.body()).decode(errors="replace")).items()}
    error = None
    try:
        body: dict[str, Any] = {"scope": form.get("scope", ""), "reason": form.get("reason", "")}
        if body["scope"] != "cluster":
            body["target"] = form.get("target", "")
        if form.get("for"):
            seconds = parse_duration(form["for"])
            if seconds is None or seconds <= 0:
                raise ValueError(f"for: {form['for']!r} is not a duration such as 30m or 2h")
            body["expiresAt"] = ctx.clock() + timedelta(seconds=seconds)
        made = body_of(await holds.create_hold(hold_body.validate_python(body), ctx))
        if "detail" in made:
            error = "; ".join(d["msg"] for d in made["detail"])
    except ValidationError as exc:
        error = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'form'}: {e['msg']}" for e in exc.errors())
    except ValueError as exc:
        error = str(exc)
    return page(request, "hold_rows.html", role, holds=await held(ctx), error=error)


@router.delete("/holds/{hold_id}")
async def delete_hold(request: Request, hold_id: str, ctx: Context, role: Writer) -> HTMLResponse:
    error = None
    try:
        await holds.delete_hold(hold_id, ctx)
    except HTTPException as exc:
        error = str(exc.detail)
    return page(request, "hold_rows.html", role, holds=await held(ctx), error=error)

