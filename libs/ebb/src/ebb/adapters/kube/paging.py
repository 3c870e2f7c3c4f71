"""Paginated lists: the apiserver's ``limit`` and ``continue`` token, in one loop for every list ebb makes (the
cluster-watcher's relists, ``ebb plan --live``'s read, the executor's lists of nodes, pods and NodeClaims).

A list asks for at most ``limit`` objects a request; the apiserver answers with a page and, while objects are
left, a ``metadata.continue`` token that the next request passes as ``continue`` (``_continue`` in the client's
keyword arguments). The caller's ``fetch`` makes one request and decodes it (its errors are its own); this module
only decides what to ask next and when the list is done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

#: the page size of ebb's lists (the apiserver's default chunk size; kubectl's too)
PAGE_SIZE = 500


def page_options(token: str | None, *, limit: int = PAGE_SIZE, **options: Any) -> dict[str, Any]:
    """The client's keyword arguments for one page: ``limit``, the ``continue`` token when there is one, and the
    caller's ``options``."""
    out: dict[str, Any] = {"limit": limit, **options}
    if token:
        out["_continue"] = token
    return out


async def pages(fetch: Callable[[str | None], Awaitable[Mapping[str, Any]]]) -> AsyncIterator[Mapping[str, Any]]:
    """Every page of a list, in order: ``fetch(token)`` makes the request for the page after ``token`` (None: the
    first page) and returns its decoded body; the list ends at the first page without a ``continue`` token."""
    token: str | None = None
    while True:
        page = await fetch(token)
        yield page
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return


async def list_items(fetch: Callable[[str | None], Awaitable[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The ``items`` of every page of a list (`pages`), in order."""
    items: list[dict[str, Any]] = []
    async for page in pages(fetch):
        items.extend(page.get("items") or [])
    return items
