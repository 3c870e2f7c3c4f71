"""A raw request to the API server through kubernetes-asyncio's client, for tests that check what it answers
(server-side apply, dry runs, SubjectAccessReviews) without the typed client's decoding or its exceptions."""

from __future__ import annotations

import json
from typing import Any


async def call(api: Any, method: str, path: str, *, body: Any = None, query: list[tuple[str, str]] | None = None,
               content_type: str = "application/json") -> tuple[int, Any]:
    """One raw request: (status, decoded JSON body, or the text of a body that is not JSON); never raises on an
    HTTP status."""
    response = await api.call_api(
        path, method, query_params=query or [], header_params={"Accept": "application/json",
                                                              "Content-Type": content_type},
        body=body, auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)
    try:
        raw = await response.read()
    finally:
        response.release()
    try:
        return int(response.status), json.loads(raw) if raw else None
    except ValueError:
        return int(response.status), raw.decode("utf-8", "replace")
