"""GET /v1/nodepools/{name}/budgets: a NodePool's disruption budgets now, and the holds on it.

The report is ``ebb_decisions_api.explain.budgets_report`` on the live snapshot (run in a worker thread under the
context's limiter), with the holds that apply to the pool added.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Path, Query, status
from fastapi.responses import JSONResponse

from ebb_decisions_api.context import V1, Context, dump, holds_for
from ebb_decisions_api.explain import budgets_report
from ebb_decisions_api.schemas import NAME_MAX, DateTime, HoldOut

router = APIRouter(prefix=V1, tags=["live"])


@router.get("/nodepools/{name}/budgets", summary="A NodePool's disruption budgets now",
            responses={404: {"description": "no such NodePool in the live cluster state"},
                       503: {"description": "the cluster state is not loaded yet, or invalid"}})
async def nodepool_budgets(
    name: Annotated[str, Path(max_length=NAME_MAX)],
    ctx: Context,
    now: Annotated[DateTime | None, Query(description="evaluate at this RFC 3339 time (default: now)")] = None,
) -> JSONResponse:
    moment = ctx.moment(now)
    view = await ctx.live_view(moment)
    report = await anyio.to_thread.run_sync(budgets_report, view.snapshot, name, moment, limiter=ctx.limiter)
    if report is None:
        known = sorted(p.name for p in view.snapshot.nodepools)
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no NodePool {name!r} in the live cluster state "
                                                       f"(known: {', '.join(known) or 'none'})")
    report["holds"] = [dump(HoldOut.of(h, moment)) for h in holds_for(view.every_hold(), pool=name)]
    return JSONResponse(report)
