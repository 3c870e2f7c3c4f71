"""What the routes share: the ``ApiContext`` ``create_app`` builds, and the dependencies that hand it out.

The composition root (``ebb_decisions_api.app.create_app``) builds the adapters once and puts them in one
``ApiContext`` on ``app.state.context``; a route asks for it with the ``Context`` dependency (FastAPI's
dependency injection), so the route modules (``ebb_decisions_api.routes``) hold no state and import nothing
from the composition root. ``require_token`` is the bearer check every /v1 route runs: the write token may do
everything, the read token (when one is set) only what changes nothing (``READS``); anything else is a write, so a
new route is closed to the read token until it is named there. The dependencies are coroutines so that FastAPI
calls them on the event loop (a plain function would be sent to a worker thread).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast

import anyio
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.models import Hold
from ebb.core.conflicts import ConflictSettings
from ebb.core.methods.base import EngineOptions
from ebb_decisions_api.consumers import Consumers
from ebb_decisions_api.events import EventHub
from ebb_decisions_api.live import InvalidSnapshot, LiveState, LiveView, NotSeeded
from ebb_decisions_api.metrics import ApiMetrics
from ebb_decisions_api.passes import LeaderPasses
from ebb_decisions_api.settings import Settings

#: the prefix of the API's versioned routes, each router's own (a route's path is then its full path, which is
#: what the request metrics are labelled with)
V1 = "/v1"
#: the bearer scheme of /v1 (OpenAPI's security scheme says where the token comes from)
bearer = HTTPBearer(auto_error=False, description="EBB_DECISIONS_API_TOKEN")
#: what every /v1 route may answer besides its own responses
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or wrong bearer token"},
    403: {"description": "the read-only token on a route that writes (it needs the write token)"},
}
#: the requests the read token may make: every safe method, and the POSTs that change nothing (route path)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_ONLY_POSTS = frozenset({f"{V1}/plan"})
#: what a token may do: everything (the write token) or only what changes nothing (the read token)
Role = Literal["write", "read"]


@dataclass(frozen=True, slots=True)
class ApiContext:
    """Everything a route reads or writes, built once by ``create_app``."""

    settings: Settings
    #: the bearer token every /v1 request must carry: the write token
    token: bytes
    store: DecisionStore
    #: the live cluster state rebuilt from ebb.cluster.objects
    live: LiveState
    #: the disruption-event fan-out of /v1/events
    hub: EventHub
    consumers: Consumers
    metrics: ApiMetrics
    #: bounds the engine passes and parses running at once in worker threads
    limiter: anyio.CapacityLimiter
    #: the engine options of explanations and live plans (the planner's)
    engine_options: EngineOptions
    #: "now" when a request gives none (the embedded mode's simulated time)
    clock: Callable[[], datetime]
    #: the leader planner's last pass (ebb.planner.passes): what "why not this node?" answers from
    passes: LeaderPasses
    #: the read-only token (None: none is accepted)
    read_token: bytes | None = None
    #: what /readyz's conflict check needs (``ebb.core.conflicts``; None: no check)
    conflict_settings: ConflictSettings | None = None

    def moment(self, now: datetime | None) -> datetime:
        """The time a request asks about: its ``now`` (naive read as UTC), or the clock's."""
        return utc(now) or self.clock()

    async def live_view(self, moment: datetime) -> LiveView:
        """The live snapshot at ``moment``; 503 while it is loading or when it is invalid."""
        try:
            return await self.live.view(moment)
        except (NotSeeded, InvalidSnapshot) as exc:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc


async def context(request: Request) -> ApiContext:
    """The app's ``ApiContext`` (a dependency)."""
    return cast(ApiContext, request.app.state.context)


#: a route parameter that receives the app's ``ApiContext``
Context = Annotated[ApiContext, Depends(context)]


async def require_token(
    request: Request,
    ctx: Context,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """401 unless the request carries a bearer token the API knows (compared in constant time); 403 when it is
    the read token and the request is not a read (``reads``)."""
    role = role_of(ctx, credentials.credentials if credentials is not None else None)
    if role == "write":
        return
    if role == "read":
        if reads(request):
            return
        raise HTTPException(
            status_code=status.HTTP_403_FORBIDDEN,
            detail=f"the read-only token may not {request.method} {request.url.path}: it changes what ebb does, "
                   "so it needs the write token (EBB_DECISIONS_API_TOKEN)",
        )
    raise HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail="a valid bearer token is required (Authorization: Bearer <token>)",
        headers={"WWW-Authenticate": "Bearer"},
    )


def role_of(ctx: ApiContext, token: str | None) -> Role | None:
    """What ``token`` may do: ``write`` (the write token: everything), ``read`` (the read token, when one is set:
    only what changes nothing), or None (no token, or one the API does not know); compared in constant time. The
    bearer check of /v1 and the console's session (``ebb_decisions_api.console``) both ask here."""
    if token is None:
        return None
    given = token.encode()
    if secrets.compare_digest(given, ctx.token):
        return "write"
    if ctx.read_token is not None and secrets.compare_digest(given, ctx.read_token):
        return "read"
    return None


def reads(request: Request) -> bool:
    """The request changes nothing: a safe method, or a POST named in ``READ_ONLY_POSTS`` (by its route's path)."""
    if request.method in SAFE_METHODS:
        return True
    route = request.scope.get("route")
    return request.method == "POST" and getattr(route, "path", None) in READ_ONLY_POSTS


def utc(value: datetime | None) -> datetime | None:
    """``value`` with UTC as its zone when it has none."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def holds_for(holds: Sequence[Hold], *, pool: str | None, node: str | None = None) -> list[Hold]:
    """The holds that apply to a node of ``pool`` (or, without ``node``, to the pool): cluster-wide ones,
    the pool's, and the node's."""
    return [h for h in holds if h.scope_kind == "cluster"
            or (h.scope_kind == "nodepool" and pool is not None and h.scope == pool)
            or (h.scope_kind == "node" and node is not None and h.scope == node)]


def dump(model: Any) -> Any:
    """A response model as the JSON it is sent as (aliases, RFC 3339 times)."""
    return model.model_dump(mode="json", by_alias=True)
