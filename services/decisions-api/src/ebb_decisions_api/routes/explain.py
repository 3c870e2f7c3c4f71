"""GET /v1/nodes/{name}/explain: why this node is or is not being disrupted.

The verdict is the leader planner's last pass (``ebb_decisions_api.passes``: what it published on
ebb.planner.passes, with the pass's time), or with ``now`` a pass evaluated on the live state in a worker thread
under the context's limiter; this route adds what the store knows: the node's recent decisions, the live decision
that holds it (its state is then "being-disrupted"), and the holds that apply to it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status
from fastapi.responses import JSONResponse

from ebb.adapters.store.decision_store import DecisionFilter
from ebb_decisions_api.context import V1, Context, dump, holds_for, utc
from ebb_decisions_api.passes import NoPass, UnknownNode, explanation
from ebb_decisions_api.schemas import NAME_MAX, DateTime, DecisionOut, HoldOut

#: how many of a node's decisions (newest first) the explanation lists
EXPLAIN_DECISIONS = 10

router = APIRouter(prefix=V1, tags=["live"])


@router.get("/nodes/{name}/explain",
            summary="Why this node is or is not being disrupted: the leader planner's last pass, with its time",
            responses={404: {"description": "no such node in the leader's last pass (or, with now, the live state)"},
                       503: {"description": "no pass of the leader planner yet, or the cluster state is not loaded "
                                            "yet, or invalid"}})
async def explain_node(
    name: Annotated[str, Path(max_length=NAME_MAX)],
    ctx: Context,
    now: Annotated[DateTime | None, Query(description="evaluate a pass at this RFC 3339 time on the live state "
                                                      "(default: the leader planner's last pass)")] = None,
) -> JSONResponse:
    moment = ctx.moment(now)
    view = await ctx.live_view(moment)
    try:
        out = await explanation(ctx.passes, view.snapshot, name, utc(now), options=ctx.engine_options,
                                limiter=ctx.limiter)
    except NoPass as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc
    except UnknownNode as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    recent = await ctx.store.list_decisions(DecisionFilter(node=name), limit=EXPLAIN_DECISIONS)
    decisions = [DecisionOut.of(d) for d in recent.items]
    live_id = view.busy.get(name)
    current = next((d for d in decisions if d.id == live_id), None)
    if live_id is not None and current is None:
        found = await ctx.store.get_decision(live_id)
        current = DecisionOut.of(found[0]) if found is not None else None
    if current is not None:
        out["state"] = "being-disrupted"
        out["summary"] = (f"decision {current.id} ({current.state}) is disrupting it: {current.method}, "
                          f"{current.reason}, {current.action}")
    out["liveDecision"] = dump(current) if current is not None else None
    out["decisions"] = [dump(d) for d in decisions]
    out["holds"] = [dump(HoldOut.of(h, moment))
                    for h in holds_for(view.every_hold(), pool=out["nodePool"], node=name)]
    return JSONResponse(out)
