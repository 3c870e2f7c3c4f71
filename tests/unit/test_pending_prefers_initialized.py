"""A pending pod is headed for an initialized node with room before one still booting (Karpenter's scheduler tries
initialized nodes first), so the empty node it would take stays, nominated, whatever the nodes are called
(docs/decisions.md, Pending pods)."""

from __future__ import annotations

import pytest

from tests.kit.builders import blocked_of, node, nodeclaim, nodepool, plan_dict, pod


@pytest.mark.parametrize("booting", ["u", "a-new"])  # after the empty node's name, and before it
def test_an_empty_node_a_pending_pod_would_take_stays_whatever_the_names(booting: str) -> None:
    out = plan_dict(nodepool(),
                    node(booting, initialized=False), nodeclaim(f"claim-{booting}", booting, initialized=False),
                    node("e"), nodeclaim("claim-e", "e"),
                    node("busy", itype="t3.medium", zone="us-east-1b"), nodeclaim("claim-busy", "busy"),
                    pod("web", "busy", cpu="1900m"),
                    pod("waiting", None, cpu="500m", phase="Pending"), require_nodeclaim=True)
    assert out["commands"] == []
    assert "nominated for pod default/waiting" in blocked_of(out, "e")["reason"]
