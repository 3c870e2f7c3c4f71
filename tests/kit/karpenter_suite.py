"""Shapes shared by the translated Karpenter suites: NodeClaim conditions and nodes with their NodeClaims, as
Karpenter's ``test.NodeClaimsAndNodes`` makes them."""

from __future__ import annotations

from typing import Any

from tests.kit.builders import OLD, node, nodeclaim

CONSOLIDATABLE = {"type": "Consolidatable", "status": "True", "lastTransitionTime": OLD}
NOT_CONSOLIDATABLE = {"type": "Consolidatable", "status": "False", "lastTransitionTime": OLD}
DRIFTED = {"type": "Drifted", "status": "True", "lastTransitionTime": OLD}
NOT_DRIFTED = {"type": "Drifted", "status": "False", "lastTransitionTime": OLD}
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def claimed(name: str, *, pool: str = "default", conditions: tuple[dict[str, Any], ...] = (CONSOLIDATABLE,),
            claim_created: str | None = None, **node_kwargs: Any) -> list[Any]:
    """Node ``name`` of ``pool`` and its NodeClaim ``claim-<name>`` (Initialized, plus ``conditions``)."""
    return [node(name, pool=pool, **node_kwargs),
            nodeclaim(f"claim-{name}", name, pool=pool, conditions=conditions, created=claim_created,
                      zone=node_kwargs.get("zone", "us-east-1a"))]


def claimed_nodes(count: int, prefix: str = "n", **kwargs: Any) -> list[Any]:
    """``count`` nodes ``<prefix>0``... with their NodeClaims, spread over the three zones (``claimed``'s
    arguments for each)."""
    return [doc for i in range(count) for doc in claimed(f"{prefix}{i}", zone=ZONES[i % 3], **kwargs)]
