"""A NodePool that sets no expireAfter expires its nodes at Karpenter's CRD default, 720h.

Karpenter's NodePool CRD defaults ``spec.template.spec.expireAfter`` to 720h (``+kubebuilder:default:="720h"`` in
``pkg/apis/v1/nodeclaim.go``, v1.14.1), so the API server writes it into every NodePool that sets none; ebb reads
a dump that lacks it the same way, and its explanation names the default as the source. ``Never`` still never
expires. A NodePool governed by an ``ebb.sh/v1 DisruptionPolicy`` takes the policy's expireAfter, whose CRD has no
default: a policy without one does not expire nodes, whatever the NodePool says (docs/decisions.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from ebb.core.findings import findings
from tests.kit.builders import NOW, ago, disrupted, disruption_policy, node, nodepool, plan_dict, pod, snapshot

DEFAULT_WORDS = "(Karpenter's CRD default: it sets none)"

# (id, the NodePool's expireAfter place and value, the DisruptionPolicy's spec or None, the node's age in days,
#  the source the explanation names or None when the node does not expire)
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, float, str | None]] = [
    ("absent, 31 days old", {}, None, 31, f"past NodePool default's expireAfter 720h {DEFAULT_WORDS}"),
    ("absent, 29 days old", {}, None, 29, None),
    ("absent, exactly 720h", {}, None, 30, f"past NodePool default's expireAfter 720h {DEFAULT_WORDS}"),
    ("Never", {"expire_after": "Never"}, None, 400, None),
    ("Never in the v1beta1 place", {"disruption": {"expireAfter": "Never"}}, None, 400, None),
    ("720h stated", {"expire_after": "720h"}, None, 31, "past NodePool default's expireAfter 720h"),
    ("24h stated", {"expire_after": "24h"}, None, 2, "past NodePool default's expireAfter 24h"),
    ("48h in the v1beta1 place", {"disruption": {"expireAfter": "48h"}}, None, 3,
     "past NodePool default's expireAfter 48h"),
    # a DisruptionPolicy replaces the NodePool's settings, the NodePool's default included
    ("policy without expireAfter, NodePool absent", {}, {"consolidateAfter": "0s"}, 31, None),
    ("policy without expireAfter, NodePool Never", {"expire_after": "Never"}, {"consolidateAfter": "0s"}, 400, None),
    ("policy 720h, NodePool absent", {}, {"expireAfter": "720h"}, 31,
     "past DisruptionPolicy default's expireAfter 720h"),
    ("policy 24h, NodePool Never", {"expire_after": "Never"}, {"expireAfter": "24h"}, 2,
     "past DisruptionPolicy default's expireAfter 24h"),
    ("policy Never, NodePool absent", {}, {"expireAfter": "Never"}, 31, None),
]


def _docs(own: dict[str, Any], policy: dict[str, Any] | None, days: float) -> list[Any]:
    # t3.medium, the cheapest type: its pod has nowhere cheaper to go, so only expiration may take it
    docs: list[Any] = [nodepool(**own), node("a", itype="t3.medium", created=ago(days=days)), pod("web", "a")]
    if policy is not None:
        docs.append(disruption_policy(**policy))
    return docs


@pytest.mark.parametrize(("own", "policy", "days", "source"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_expiry_follows_the_crd_default(own: dict[str, Any], policy: dict[str, Any] | None, days: float,
                                        source: str | None) -> None:
    out = plan_dict(*_docs(own, policy, days))
    expired = [c for c in out["commands"] if c["method"] == "expiration"]
    if source is None:
        assert expired == []
        assert "a" not in disrupted(out)
        return
    (command,) = expired
    assert (command["nodes"], command["reason"]) == (["a"], "Expired")
    assert source in command["explanation"], command["explanation"]
    # the default is named only where it applies
    assert (DEFAULT_WORDS in command["explanation"]) is (DEFAULT_WORDS in source)


@pytest.mark.parametrize(("own", "policy", "days", "source"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_expired_finding_starts_at_launch_plus_the_effective_expire_after(
        own: dict[str, Any], policy: dict[str, Any] | None, days: float, source: str | None) -> None:
    view = ClusterView.build(snapshot(*_docs(own, policy, days)), NOW)
    expired = [f for f in findings(view).get("a", []) if f.kind == "Expired"]
    if source is None:
        assert expired == []
        return
    (finding,) = expired
    pool = view.pools["default"]
    assert pool.expire_after is not None
    assert finding.since == NOW - timedelta(days=days) + timedelta(seconds=pool.expire_after)
    assert source in finding.reason


def test_a_governed_nodepool_does_not_keep_the_nodepools_default() -> None:
    """The policy's settings replace the NodePool's, the marker of a defaulted expireAfter with them."""
    snap = snapshot(nodepool(), disruption_policy(consolidateAfter="5m"))
    (pool,) = snap.nodepools
    assert (pool.policy_kind, pool.expire_after, pool.expire_after_default) == ("DisruptionPolicy", None, False)
