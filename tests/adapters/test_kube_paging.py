"""`ebb.adapters.kube.paging`: the one loop over the apiserver's ``continue`` tokens that every list of ebb's uses
(the watcher's relists, ``ebb plan --live``, the executor's lists)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ebb.adapters.kube.paging import PAGE_SIZE, list_items, page_options, pages


def test_page_options_pass_the_token_only_when_there_is_one() -> None:
    assert page_options(None) == {"limit": PAGE_SIZE}
    assert page_options("", limit=7) == {"limit": 7}
    assert page_options("abc", limit=2, field_selector="spec.nodeName=a") == {
        "limit": 2, "_continue": "abc", "field_selector": "spec.nodeName=a"}


async def test_pages_follow_the_tokens_until_a_page_has_none() -> None:
    served: dict[str | None, Mapping[str, Any]] = {
        None: {"metadata": {"continue": "t1", "resourceVersion": "9"}, "items": [{"n": 1}, {"n": 2}]},
        "t1": {"metadata": {"continue": "t2"}, "items": [{"n": 3}]},
        "t2": {"metadata": {"continue": ""}, "items": None},  # the last page: an empty token ends the list
    }
    asked: list[str | None] = []

    async def fetch(token: str | None) -> Mapping[str, Any]:
        asked.append(token)
        return served[token]

    seen = [page async for page in pages(fetch)]
    assert asked == [None, "t1", "t2"] and seen == [served[None], served["t1"], served["t2"]]
    asked.clear()
    assert await list_items(fetch) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert asked == [None, "t1", "t2"]


async def test_a_page_without_metadata_is_the_last_and_a_fetch_error_ends_the_list() -> None:
    async def one(token: str | None) -> Mapping[str, Any]:
        return {"items": [{"n": token}]}

    assert await list_items(one) == [{"n": None}]

    async def failing(token: str | None) -> Mapping[str, Any]:
        if token:
            raise RuntimeError("the apiserver went away")
        return {"metadata": {"continue": "t1"}, "items": [{"n": 1}]}

    with pytest.raises(RuntimeError, match="went away"):
        await list_items(failing)
