"""GET /v1/shadow/report: what ebb in shadow mode would have disrupted beside what Karpenter did, over a period
(docs/shadow.md). The comparison is ``ebb.core.shadow``'s, over what the shadow planner kept in the store
(``DecisionStore.shadow_report``); this route only reads the period and serves ``ebb.core.shadow.as_json``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ebb.core.shadow import as_json, parse_period
from ebb_decisions_api.context import V1, Context
from ebb_decisions_api.errors import unprocessable
from ebb_decisions_api.schemas import DateTime

router = APIRouter(prefix=V1, tags=["shadow"])

#: what ``parse_period`` takes, as the schema says it: a positive number (a leading digit other than 0), and a unit
PERIOD = r"^0*[1-9][0-9]*(\.[0-9]+)?[smhdwSMHDW]?$"



@router.get("/shadow/report", summary="Shadow mode's report: ebb's decisions beside Karpenter's removals",
            responses={422: {"description": "not a period"}})
async def shadow_report(
    ctx: Context,
    since: Annotated[str, Query(max_length=32, pattern=PERIOD,
                                description="the period before the end: 7d, 12h, 90m, 30s, 1w, 1.5h "
                                            "(a bare number: seconds)")] = "7d",
    until: Annotated[DateTime | None, Query(description="the end of the period (RFC 3339; default: now)")] = None,
) -> Any:
    try:
        seconds = parse_period(since)
    except ValueError as exc:
        return unprocessable(("query", "since"), str(exc), "value_error")
    end = ctx.moment(until)
    try:
        start = end - timedelta(seconds=seconds)
    except OverflowError:  # a period longer than the calendar before ``end``: all of it
        start = datetime.min.replace(tzinfo=UTC)
    report = await ctx.store.shadow_report(start, end)
    return JSONResponse(as_json(report))
