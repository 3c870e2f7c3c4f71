"""A node's terminationGracePeriod and eventual disruption (``ClusterView.grace_period``, `methods.base.leaving`).

Karpenter v1 lets drift and expiration (its eventual disruption class) take a node whose pods block eviction (an
active do-not-disrupt, a PDB that allows nothing) when the node has a terminationGracePeriod: the blocking pods are
not simulated (nothing evicts them now) and go at the node's deadline. Emptiness and consolidation still leave
such a node alone. The grace period is the NodeClaim's (copied from its NodePool at launch), as Karpenter reads it;
a node without a NodeClaim (standalone, kwok, simulated) keeps the plain rule: such a pod always blocks.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.cluster import ClusterView
from ebb.core.snapshot import SnapshotError
from ebb.core.validation import validate
from tests.kit.builders import NOW, ago, ds_pod, node, nodeclaim, nodepool, pdb, plan, plan_dict, pod, snapshot

DND = {"karpenter.sh/do-not-disrupt": "true"}


def _pool(tgp: str | None = None, **kwargs: Any) -> dict[str, Any]:
    doc = nodepool(**kwargs)
    if tgp is not None:
        doc["spec"]["template"]["spec"]["terminationGracePeriod"] = tgp
    return doc


def _claim(name: str, tgp: str | None = None) -> dict[str, Any]:
    doc = nodeclaim(f"claim-{name}", name)
    if tgp is not None:
        doc["spec"] = {"terminationGracePeriod": tgp}
    return doc


def _expired_cluster(*, pool_tgp: str | None, claim_tgp: str | None, with_claim: bool,
                     blocker: str) -> list[Any]:
    """Node a, expired (the pool's expireAfter is 24h, a is two days old), with a pod that blocks eviction
    (``blocker``: "dnd" or "pdb") and one that does not; node b (not expired, no room for a's pods). Both pods
    together need more than the cheapest type's 2 cpu; the movable one alone does not."""
    docs: list[Any] = [_pool(pool_tgp, expire_after="24h"),
                       node("a", itype="m5.large", created=ago(days=2)),
                       node("b", itype="m5.large", created=ago(minutes=10)),
                       pod("filler", "b", cpu="1900m"),
                       pod("movable", "a", cpu="500m")]
    kept_cpu = "1600m"
    if with_claim:
        docs.append(_claim("a", claim_tgp))
    if blocker == "dnd":
        docs.append(pod("kept", "a", cpu=kept_cpu, annotations=DND))
    else:
        docs += [pod("kept", "a", cpu=kept_cpu, labels={"app": "kept"}),
                 pdb("kept", {"app": "kept"}, max_unavailable=0)]
    return docs


# (case, the pool's template terminationGracePeriod, the NodeClaim's, whether a has a NodeClaim, the blocking pod,
# whether a is expired and replaced)
CASES = [
    ("a NodeClaim's grace period lets expiration take a node with a do-not-disrupt pod", None, "300s", True, "dnd",
     True),
    ("and a node with a pod whose PDB allows nothing", None, "300s", True, "pdb", True),
    ("no grace period: the pod keeps the node", None, None, True, "dnd", False),
    ("the NodeClaim's copy counts, not the NodePool's template (changed since the launch)", "300s", None, True, "dnd",
     False),
    ("a node without a NodeClaim: the pod blocks, whatever its NodePool's template says", "5m", None, False, "dnd",
     False),
    ("and a PDB too", "5m", None, False, "pdb", False),
    ("0s is a grace period (Karpenter: set, not nil)", None, "0s", True, "dnd", True),
]


@pytest.mark.parametrize(("pool_tgp", "claim_tgp", "with_claim", "blocker", "taken"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_expiration_with_a_grace_period(pool_tgp: str | None, claim_tgp: str | None, with_claim: bool,
                                        blocker: str, taken: bool) -> None:
    docs = _expired_cluster(pool_tgp=pool_tgp, claim_tgp=claim_tgp, with_claim=with_claim, blocker=blocker)
    first = plan(*docs).first
    expiring = [c for c in first.commands if c.method == "expiration"]
    if not taken:
        assert expiring == []
        [blocked] = [b for b in first.blocked if b.node == "a"]
        assert "expired" in blocked.cause.text
        assert ("do-not-disrupt" if blocker == "dnd" else "prevents pod evictions") in blocked.cause.text
        return
    [command] = expiring
    assert (command.action, command.nodes) == ("replace", ("a",))
    # only the movable pod is given a home, so the cheapest type does: the blocked pod stays until the deadline
    assert set(command.placements) == {"default/movable"}
    assert [r.instance_types[0] for r in command.replacements] == ["t3.medium"]
    assert "left in place, as nothing may evict them now: default/kept" in command.explanation


def test_the_command_stays_valid_and_is_stale_once_the_grace_period_is_gone() -> None:
    """Validation simulates the command as the pass did (the blocked pod is not placed) and re-checks the
    candidate: with the grace period gone from the NodeClaim, the pod blocks again."""
    docs = _expired_cluster(pool_tgp=None, claim_tgp="300s", with_claim=True, blocker="dnd")
    [command] = [c for c in plan(*docs).first.commands if c.method == "expiration"]
    assert validate(command, snapshot(*docs), NOW) is None
    without = _expired_cluster(pool_tgp=None, claim_tgp=None, with_claim=True, blocker="dnd")
    stale = validate(command, snapshot(*without), NOW)
    assert stale is not None
    assert "do-not-disrupt" in stale.text


def test_emptiness_and_consolidation_leave_the_node_alone() -> None:
    """Node a holds only a do-not-disrupt pod and has a grace period: not empty to emptiness, not consolidated
    (Karpenter's graceful class), although deleting it would save its price; the view blocks consolidation only."""
    docs = [_pool(), node("a", itype="m5.xlarge"), _claim("a", "300s"), node("b", itype="m5.xlarge"),
            nodeclaim("claim-b", "b"), pod("kept", "a", annotations=DND), pod("web", "b")]
    out = plan_dict(*docs)
    assert "a" not in {n for c in out["commands"] for n in c["nodes"]}
    view = ClusterView.build(snapshot(*docs), NOW)
    assert view.blocked_reason("a", consolidation=False) is None
    cause = view.blocked_reason("a", consolidation=True)
    assert cause is not None
    assert "do-not-disrupt" in cause.text


def test_a_duration_do_not_disrupt_that_ran_out_is_moved_like_any_pod() -> None:
    """A do-not-disrupt of "1h" on a pod started two hours ago no longer protects it: it is placed (here on the
    replacement), not left in place."""
    docs = _expired_cluster(pool_tgp=None, claim_tgp="300s", with_claim=True, blocker="pdb")
    docs = [d for d in docs if d.get("kind") != "PodDisruptionBudget"]
    for doc in docs:
        if doc.get("kind") == "Pod" and doc["metadata"]["name"] == "kept":
            doc["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "1h"}
            doc["status"]["startTime"] = ago(hours=2)
    [command] = [c for c in plan(*docs).first.commands if c.method == "expiration"]
    assert set(command.placements) == {"default/movable", "default/kept"}
    assert "t3.medium" not in command.replacements[0].instance_types
    assert "left in place" not in command.explanation


@pytest.mark.parametrize(("value", "wanted"), [("90s", 90.0), ("1h30m", 5400.0), ("0s", 0.0), (None, None)])
def test_the_nodeclaims_grace_period_is_read(value: str | None, wanted: float | None) -> None:
    assert snapshot(_pool(), node("a"), _claim("a", value)).nodeclaims[0].termination_grace_period == wanted


def test_the_nodepools_grace_period_is_not_an_input_of_the_decisions() -> None:
    """Only the NodeClaim's copy decides; the NodePool's is the drain's (kwok, simulated), read where it drains, so
    a value the planner does not use is no input error for it (Karpenter's CRD would have refused it anyway)."""
    snap = snapshot(_pool("soon"), node("a"))
    assert [p.name for p in snap.nodepools] == ["default"]


def test_a_grace_period_that_is_no_duration_is_an_input_error() -> None:
    with pytest.raises(SnapshotError, match="terminationGracePeriod"):
        snapshot(_pool(), node("a"), _claim("a", "soon"))



def test_a_static_nodepool_replaces_its_drifted_node_one_for_one_past_a_do_not_disrupt_pod() -> None:
    """A static NodePool's drifted node (Karpenter's StaticDrift, eventual too) whose NodeClaim has a grace period:
    replaced one for one although its pod says do-not-disrupt; the pod is left in place."""
    pool = _pool()
    pool["spec"]["replicas"] = 1
    claim = _claim("a", "300s")
    claim["status"]["conditions"].append({"type": "Drifted", "status": "True", "lastTransitionTime": ago(hours=1)})
    [command] = plan(pool, node("a"), claim, pod("kept", "a", annotations=DND)).first.commands
    assert (command.method, command.action, command.nodes) == ("drift", "replace", ("a",))
    assert command.placements == {}
    assert "replaced one for one" in command.explanation
    assert "left in place, as nothing may evict them now: default/kept" in command.explanation


def test_a_daemonset_pod_kept_by_do_not_disrupt_is_named_as_left_in_place() -> None:
    """A DaemonSet pod needs no new home, but its do-not-disrupt keeps it (and the node) until the deadline: the
    explanation names it with the pods left in place."""
    docs = _expired_cluster(pool_tgp=None, claim_tgp="300s", with_claim=True, blocker="dnd")
    agent = ds_pod("agent-a", "a")
    agent["metadata"]["annotations"] = dict(DND)
    [command] = [c for c in plan(*docs, agent).first.commands if c.method == "expiration"]
    assert "left in place, as nothing may evict them now: default/kept, kube-system/agent-a" in command.explanation
    assert "kube-system/agent-a" not in command.placements
