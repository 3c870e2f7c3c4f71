"""Which NodeClaim the karpenter provider deletes to retire a Node (``ebb.adapters.kube.karpenter.claim_of``): the
one Karpenter pairs with the Node, by provider id first, as ``ebb.core.model.claim_for`` pairs them in a pass."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.adapters.kube.karpenter import claim_of


def claim(name: str, node: str | None, provider_id: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if node is not None:
        status["nodeName"] = node
    if provider_id is not None:
        status["providerID"] = provider_id
    return {"metadata": {"name": name}, "status": status}


BEFORE = claim("before", "a", "aws:///us-east-1a/i-before")  # a NodeClaim of the instance that had the name "a"
NOW = claim("now", "a", "aws:///us-east-1a/i-now")
UNNAMED = claim("unnamed", None, "aws:///us-east-1a/i-now")  # status.nodeName not written yet
NO_ID = claim("no-id", "a", None)

# (case, the NodeClaims in list order, the Node's provider id, the NodeClaim retired, or None)
CASES: list[tuple[str, list[dict[str, Any]], str, str | None]] = [
    ("the NodeClaim of the node's instance, listed after an older one of the same name", [BEFORE, NOW],
     "aws:///us-east-1a/i-now", "now"),
    ("only the older instance's NodeClaim names the node", [BEFORE], "aws:///us-east-1a/i-now", None),
    ("by provider id, status.nodeName not written yet", [BEFORE, UNNAMED], "aws:///us-east-1a/i-now", "unnamed"),
    ("by name, a NodeClaim without a provider id", [NO_ID], "aws:///us-east-1a/i-now", "no-id"),
    ("by name, a Node without a provider id", [BEFORE], "", "before"),
    ("none", [claim("other", "b", "aws:///us-east-1a/i-b")], "aws:///us-east-1a/i-now", None),
]


@pytest.mark.parametrize(("case", "claims", "provider_id", "retired"), CASES, ids=[c[0] for c in CASES])
def test_the_nodeclaim_retired_is_the_one_of_the_nodes_instance(case: str, claims: list[dict[str, Any]],
                                                               provider_id: str, retired: str | None) -> None:
    found = claim_of(claims, "a", provider_id)
    assert (found["metadata"]["name"] if found is not None else None) == retired
