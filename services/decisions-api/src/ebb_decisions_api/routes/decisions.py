"""/v1/decisions: the store's decisions, newest first with filters and a cursor, and one with its timeline."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status

from ebb.adapters.store.decision_store import MAX_PAGE, CursorError, DecisionFilter
from ebb_decisions_api.context import V1, Context, utc
from ebb_decisions_api.errors import unprocessable
from ebb_decisions_api.schemas import DateTime, DecisionDetail, DecisionList, DecisionOut, DecisionState, TimelineEntry

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

router = APIRouter(prefix=V1, tags=["decisions"])


@router.get("/decisions", summary="Decisions, newest first, with filters and a cursor",
            responses={200: {"links": DECISION_PAGE_LINKS}, 422: {"description": "invalid filter or cursor"}})
async def list_decisions(
    ctx: Context,
    *,
    state: DecisionState | None = None,
    method: str | None = None,
    reason: str | None = None,
    nodepool: str | None = None,
    node: str | None = None,
    since: Annotated[DateTime | None, Query(description="created at or after (RFC 3339)")] = None,
    shadow: Annotated[bool | None, Query(description="true: only shadow decisions (docs/shadow.md); false: only "
                                                     "real ones; absent: both")] = None,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the previous page "
                                                                     "(absent or empty: the first page)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> Any:
    filters = DecisionFilter(state=state, method=method, reason=reason, nodepool=nodepool, node=node,
                             since=utc(since), shadow=shadow)
    try:
        page = await ctx.store.list_decisions(filters, cursor=cursor or None, limit=limit)
    except CursorError as exc:
        return unprocessable(("query", "cursor"), str(exc), "value_error")
    return DecisionList(items=[DecisionOut.of(d) for d in page.items], next_cursor=page.next_cursor)


@router.get("/decisions/{decision_id}", summary="One decision and its timeline",
            responses={404: {"description": "no such decision"}})
async def get_decision(decision_id: str, ctx: Context) -> DecisionDetail:
    found = await ctx.store.get_decision(decision_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no decision {decision_id!r}")
    decision, events = found
    return DecisionDetail(**DecisionOut.fields_of(decision), timeline=[TimelineEntry.of(e) for e in events])
