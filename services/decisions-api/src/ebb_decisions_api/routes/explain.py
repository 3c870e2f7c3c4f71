"""GET /v1/nodes/{name}/explain: why this node is or is not being disrupted now.

The verdict is the engine's, from ``ebb_decisions_api.explain`` (run in a worker thread under the context's
limiter); this route adds what the store knows: the node's recent decisions, the live decision that holds it (its
state is then "being-disrupted"), and the holds that apply to it.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Path, Query, status
from fastapi.responses import JSONResponse

from ebb.adapters.store.decision_store import DecisionFilter
from ebb_decisions_api.context import V1, Context, dump, holds_for
from ebb_decisions_api.explain import explain_pass, node_explanation
from ebb_decisions_api.schemas import NAME_MAX, DateTime, DecisionOut, HoldOut

#: how many of a node's decisions (newest first) the explanation lists
EXPLAIN_DECISIONS = 10

router = APIRouter(prefix=V1, tags=["live"])


@router.get("/nodes/{name}/explain", summary="Why this node is or is not being disrupted now",
            responses={404: {"description": "no such node in the live cluster state"},
                       503: {"description": "the cluster state is not loaded yet, or invalid"}})
async def explain_node(
    name: Annotated[str, Path(max_length=NAME_MAX)],
    ctx: Context,
    now: Annotated[DateTime | None, Query(description="evaluate at this RFC 3339 time (default: now)")] = None,
) -> JSONResponse:
    moment = ctx.moment(now)
    view = await ctx.live_view(moment)
    verdict = await anyio.to_thread.run_sync(explain_pass, view.snapshot, name, moment, ctx.engine_options,
                                             limiter=ctx.limiter)
    if verdict is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no node {name!r} in the live cluster state "
                                                       f"({len(view.snapshot.nodes)} nodes known)")
    out = node_explanation(verdict)
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
