"""examples/karpenter.yaml planned as ``ebb plan -f examples/karpenter.yaml [--provider karpenter]`` plans it (the
parser given the bundled catalog, ``ebb.adapters.catalog``): its DisruptionPolicy, not the NodePool's budget 0,
decides, and with the karpenter provider the node without a NodeClaim is left alone with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ebb.adapters.catalog import bundled_catalog
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import make_plan, plan_json
from ebb.core.snapshot import input_warnings, parse_documents
from tests.kit.builders import NOW

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "karpenter.yaml"
NO_NODECLAIM_REASON = "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"


# (keep the DisruptionPolicy document, --provider karpenter, the first pass's commands, hand-made's reason
#  when it is that it has no NodeClaim)
EXAMPLE_CASES: list[tuple[bool, bool, list[tuple[str, list[str]]], bool]] = [
    (True, True, [("expiration", ["general-a"])], True),
    (True, False, [("expiration", ["general-a"])], False),
    (False, True, [], True),  # the NodePool's own block: Karpenter's budget 0, no expiry
]


@pytest.mark.parametrize(("with_policy", "karpenter", "first", "no_claim"), EXAMPLE_CASES)
def test_the_karpenter_example_plans_as_its_comments_say(with_policy: bool, karpenter: bool,
                                                         first: list[tuple[str, list[str]]], no_claim: bool) -> None:
    """ebb plan -f examples/karpenter.yaml --provider karpenter: the policy (not the NodePool's budget 0)
    decides, and the node without a NodeClaim is left alone with the reason."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8"))
            if d and (with_policy or d["kind"] != "DisruptionPolicy")]
    snap = parse_documents(docs, bundled_catalog=bundled_catalog)
    assert input_warnings(snap) == []
    assert snap.nodepools[0].policy_source == ("DisruptionPolicy general" if with_policy else "NodePool general")
    out = plan_json(make_plan(snap, NOW, options=EngineOptions(require_nodeclaim=karpenter)))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == first
    reasons = {b["node"]: b["reason"] for b in out["blocked"]}
    assert (reasons["hand-made"] == NO_NODECLAIM_REASON) is no_claim
