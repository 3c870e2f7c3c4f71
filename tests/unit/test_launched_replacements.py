"""A replacement that a live decision launched is no candidate until its decision ends (``Snapshot.launched_for``,
from the store; ``ebb.core.cluster``), found by its Node's name or, next to Karpenter, by its NodeClaim's; it
stays a destination. Without the rule the replacement, waiting empty while its decision drains the old node
(a PodDisruptionBudget may hold that for long), is deleted as empty: seen against the real Karpenter
(tests/integration/test_karpenter_system.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ebb.core.plan import make_plan, plan_json
from tests.kit.builders import NOW, blocked_of, disrupted, node, nodeclaim, nodepool, pod, snapshot

EBB_DISRUPTED = {"key": "ebb.sh/disrupted", "effect": "NoSchedule"}


def cluster(*, claim: bool) -> list[Any]:
    """``old`` being disrupted by decision d1 (its pod waits for a PDB), ``new`` the replacement d1 launched
    (empty, initialized), ``c`` an m5.large whose small pod fits on ``new``."""
    docs: list[Any] = [nodepool(), node("old", taints=[EBB_DISRUPTED]), pod("web", "old"), node("new"),
                       node("c"), pod("tiny", "c")]
    if claim:
        docs += [nodeclaim("pool-claim-1", "new"), nodeclaim("claim-old", "old"), nodeclaim("claim-c", "c")]
    return docs


# (id, NodeClaims in the snapshot, launched_for, new's blocked reason or None: new is deleted as empty)
CASES = [
    ("by-node-name", False, (("new", "d1"),),
     "it was launched as a replacement for decision d1, which is still being carried out"),
    ("by-nodeclaim-name", True, (("pool-claim-1", "d1"),),
     "it was launched as a replacement for decision d1, which is still being carried out"),
    ("another-decisions-replacement", False, (("elsewhere", "d2"),), None),
    ("no-live-decision", False, (), None),
]


@pytest.mark.parametrize(("claims", "launched", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_replacement_in_flight_is_no_candidate_but_still_a_destination(
        claims: bool, launched: tuple[tuple[str, str], ...], reason: str | None) -> None:
    live = dataclasses.replace(snapshot(cluster(claim=claims)), launched_for=launched)
    out = plan_json(make_plan(live, NOW))
    if reason is None:
        assert "new" in disrupted(out), out["commands"]  # empty: deleted, the decision's pods lose their home
        return
    assert "new" not in disrupted(out)
    assert blocked_of(out, "new")["reason"] == reason
    # a destination all the same: c's pod moves onto it and c goes
    [command] = out["commands"]
    assert command["nodes"] == ["c"], out["commands"]
