"""How the decisions-api words its errors: 422s in FastAPI's own shape, and the two exception handlers.

Every 422 the routes return themselves (a bad snapshot, cursor or NodePool) has the shape of FastAPI's
validation errors (``{"detail": [{"loc", "msg", "type"}]}``), so a client reads one shape. The handlers fix two
answers FastAPI and Starlette get wrong for this API: a hold body's validation errors are located by field
whatever its scope (``POST /v1/holds`` takes a discriminated union), and a 405 names every method the path
answers in ``Allow``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request, Response, status
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ebb_decisions_api.schemas import SCOPE_TO_STORE

#: the methods a 405's Allow header may name
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: where holds are created (its body's validation errors are located by field, whatever the scope)
HOLDS_PATH = "/v1/holds"


def unprocessable(loc: tuple[str, ...] | list[str], message: str, kind: str, **extra: Any) -> JSONResponse:
    """A 422 in FastAPI's own shape: {"detail": [{"loc": [...], "msg": ..., "type": ...}]}."""
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        content={"detail": [{"loc": list(loc), "msg": message, "type": kind, **extra}]},
    )


def hold_field_locs(errors: Sequence[Any]) -> list[dict[str, Any]]:
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


def allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method some route of the request's path answers (Starlette's 405 names only the first route's,
    so ``OPTIONS /v1/holds`` said ``Allow: POST`` although GET is served there too). Each method is tried
    against the routes, included routers too, as the router would match the request."""
    return [method for method in HTTP_METHODS
            if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in app.router.routes)]


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422, with a hold body's errors located by field."""
    if request.url.path == HOLDS_PATH:
        exc = RequestValidationError(hold_field_locs(exc.errors()), body=exc.body)
    return await request_validation_exception_handler(request, exc)


async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's answer to an HTTP error, with a 405's ``Allow`` naming every method of the path."""
    if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        exc.headers = {**(exc.headers or {}), "Allow": ", ".join(allowed_methods(request.app, request.scope))}
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.exception_handler(RequestValidationError)(invalid_request)
    app.exception_handler(StarletteHTTPException)(http_error)
