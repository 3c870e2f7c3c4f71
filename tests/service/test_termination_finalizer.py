"""Which deleted Nodes ebb's finalizer loop drains (ebb_termination_executor.finalizer): only those being deleted
that still carry ``ebb.sh/termination``; the real drain is tests/integration/test_termination_finalizer.py."""

from __future__ import annotations

from typing import Any

import pytest

from ebb_termination_executor.finalizer import deleting_with_finalizer


def _node(name: str, *, deleting: bool, finalizers: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(("deleting", "finalizers", "drained"), [
    (True, ["ebb.sh/termination"], True),
    (True, ["example.com/keep", "ebb.sh/termination"], True),
    (False, ["ebb.sh/termination"], False),  # not deleted: a decision's drain is the executor's business
    (True, ["karpenter.sh/termination"], False),  # Karpenter's node: never ebb's to finalize
    (True, [], False),
])
def test_only_deleting_nodes_with_ebbs_finalizer_are_drained(deleting: bool, finalizers: list[str],
                                                             drained: bool) -> None:
    nodes = [_node("n", deleting=deleting, finalizers=finalizers)]
    assert [n["metadata"]["name"] for n in deleting_with_finalizer(nodes)] == (["n"] if drained else [])


def test_in_name_order() -> None:
    nodes = [_node(n, deleting=True, finalizers=["ebb.sh/termination"]) for n in ("b", "a", "c")]
    assert [n["metadata"]["name"] for n in deleting_with_finalizer(nodes)] == ["a", "b", "c"]
