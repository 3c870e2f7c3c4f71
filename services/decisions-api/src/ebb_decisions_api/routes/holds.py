"""/v1/holds: create, list and remove holds, the manual pause of Empty and Underutilized disruptions.

The store's holds are created and removed here; the cluster's ``ebb.sh/v1 Hold`` objects are listed beside them
(read from the live cluster state) but removed with kubectl, so a delete of one is a 409 that says so. A hold on
a NodePool the live state does not have is refused, since it would pause nothing and say so nowhere.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse

from ebb.adapters.store.models import Hold
from ebb_decisions_api.context import V1, ApiContext, Context
from ebb_decisions_api.errors import unprocessable
from ebb_decisions_api.live import InvalidSnapshot, NotSeeded, object_holds
from ebb_decisions_api.schemas import SCOPE_TO_STORE, ClusterHolds, HoldCreate, HoldList, HoldOut

router = APIRouter(prefix=V1, tags=["holds"])


@router.post("/holds", status_code=status.HTTP_201_CREATED, response_model=HoldOut,
             response_model_by_alias=True,
             summary="Pause Empty and Underutilized disruptions in a scope until expiresAt",
             responses={400: {"description": "a body that cannot be read as JSON"},
                        422: {"description": "an invalid body, or a NodePool the live cluster state does not have"}})
async def create_hold(hold: Annotated[HoldCreate, Body()], ctx: Context) -> HoldOut | JSONResponse:
    now = ctx.clock()
    if hold.expires_at is not None and hold.expires_at <= now:  # the API's now: simulated in the embedded mode
        return unprocessable(("body", "expiresAt"), "Value error, must be in the future", "value_error")
    if hold.scope == "nodePool" and hold.target:
        # a hold on a NodePool that does not exist would pause nothing and say so nowhere; while the
        # cluster state is still loading (or invalid) the pool cannot be checked and the hold is kept
        with suppress(NotSeeded, InvalidSnapshot):
            known = sorted(p.name for p in (await ctx.live.snapshot()).nodepools)
            if hold.target not in known:
                return unprocessable(("body", "target"), f"no NodePool {hold.target!r} in the live cluster "
                                     f"state (known: {', '.join(known) or 'none'})", "unknown_nodepool")
    row = await ctx.store.create_hold(
        scope_kind=SCOPE_TO_STORE[hold.scope],
        scope=hold.target or "",
        reason=hold.reason,
        expires_at=hold.expires_at,
        now=now,
        created_by="decisions-api",
    )
    return HoldOut.of(row, now)


async def cluster_holds(ctx: ApiContext) -> tuple[list[Hold], ClusterHolds]:
    """The cluster's Hold objects (kind ``object``) and whether they could be read: none while the cluster
    state is loading or invalid."""
    try:
        return object_holds(await ctx.live.snapshot(), ctx.live.objects), "listed"
    except NotSeeded:
        return [], "loading"
    except InvalidSnapshot:
        return [], "invalid"


@router.get("/holds", summary="Holds in force (and, on request, expired ones): the store's, then "
                              "the cluster's Hold objects")
async def list_holds(
    ctx: Context,
    include_expired: Annotated[bool, Query(alias="includeExpired")] = False,
) -> HoldList:
    now = ctx.clock()
    rows = await ctx.store.list_holds(now, include_expired=include_expired)
    objects, known = await cluster_holds(ctx)
    objects = [h for h in objects if include_expired or h.in_force(now)]
    return HoldList(items=[HoldOut.of(r, now) for r in [*rows, *objects]], cluster_holds=known)


@router.delete("/holds/{hold_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Remove a hold",
               responses={404: {"description": "no such hold"},
                          409: {"description": "a Hold object of the cluster: deleted with kubectl, not here"},
                          503: {"description": "not a hold of the store, and the cluster state that would say "
                                              "whether it is a Hold object is not loaded yet, or invalid"}})
async def delete_hold(hold_id: str, ctx: Context) -> Response:
    if not await ctx.store.delete_hold(hold_id):
        objects, known = await cluster_holds(ctx)
        if any(h.id == hold_id for h in objects):
            raise HTTPException(status.HTTP_409_CONFLICT, f"hold {hold_id!r} is a Hold object of the cluster: "
                                                          f"delete it with kubectl delete hold {hold_id}")
        if known != "listed":
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                                f"no hold {hold_id!r} in the store, and the cluster state is {known}: whether it "
                                "is a Hold object of the cluster cannot be told yet", headers={"Retry-After": "5"})
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no hold {hold_id!r}")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
