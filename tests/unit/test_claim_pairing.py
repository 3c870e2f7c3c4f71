"""The rule pairing a Node with its NodeClaim (`ebb.core.model.claim_for`, `names_another_instance`): by provider id,
as Karpenter's ``NodeClaimForNode``, then by the name a NodeClaim gives, unless it is another instance's."""

from __future__ import annotations

import pytest

from ebb.core.model import NodeClaim, claim_for, names_another_instance


@pytest.mark.parametrize(("claim_provider", "node_provider", "another"), [
    ("kwok://a", "kwok://a", False),  # the same instance
    ("kwok://old", "kwok://new", True),  # the name was used again: the claim is the old instance's
    ("", "kwok://new", False),  # a claim not launched yet names no instance
    ("kwok://a", "", False),  # a Node without a provider id yet: the name pairs them
    ("", "", False),
])
def test_names_another_instance(claim_provider: str, node_provider: str, another: bool) -> None:
    assert names_another_instance(claim_provider, node_provider) is another


def _claim(name: str, node: str, provider: str) -> NodeClaim:
    return NodeClaim(name=name, nodepool="default", node_name=node, provider_id=provider)


@pytest.mark.parametrize(("node_provider", "claims", "want"), [
    ("kwok://new", [_claim("old", "n1", "kwok://old"), _claim("new", "", "kwok://new")], "new"),
    ("kwok://new", [_claim("old", "n1", "kwok://old")], None),  # only the old instance's claim names it
    ("kwok://new", [_claim("c", "n1", "")], "c"),  # written without a provider id: the name pairs them
    ("", [_claim("c", "n1", "kwok://a")], "c"),  # the Node has no provider id yet
    ("kwok://a", [], None),
])
def test_claim_for_pairs_by_provider_id_then_name(node_provider: str, claims: list[NodeClaim],
                                                  want: str | None) -> None:
    by_name = {c.node_name: c for c in claims if c.node_name}
    by_provider = {c.provider_id: c for c in claims if c.provider_id}
    found = claim_for("n1", node_provider, by_name, by_provider)
    assert (found.name if found else None) == want
