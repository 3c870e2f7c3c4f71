"""A preference is relaxed only when no node, new ones included, would take the pod (Karpenter's rule).

Karpenter's scheduler (v1.14.1, ``trySchedule``) tries a pod on the existing nodes, the NodeClaims it has opened and
a new NodeClaim, and only when all three fail drops one preference (``Preferences.Relax``) and tries again. A
consolidation simulation that may open no node (a delete) or no more nodes (a replacement already open) therefore
does not place a pod by dropping a preference a new node would keep: the pod needs a node the move may not launch,
so a delete becomes a replace, and is refused when the replacement is no cheaper. Karpenter keeps the nodes; so
does ebb: same-priced nodes whose pods prefer separate hosts, one node per zone under a ``ScheduleAnyway`` spread.
A preference that no new node would keep either (no NodePool offers it, the NodePool is at its limits, a new node
holds none of the pods a preferred affinity wants) is still relaxed, and the pod goes onto an existing node.

The simulator's rule first (`SimState.place_all` with the new nodes a move allows), then the engine's decisions on
the examples of docs/decisions.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.simulator.constraints import preferences_kept, relaxations
from ebb.core.simulator.scheduler import Scheduler
from tests.kit.builders import blocked_of, node, nodepool, plan_dict, pod, snapshot

WEB = {"app": "web"}
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PREFER_OWN_HOST = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": WEB}, "topologyKey": HOSTNAME}}]}}
PREFER_ZONE_D = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1d"]}]}}]}}
PREFER_ZONE_B = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]}]}}]}}
PREFER_NEAR_DB = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}}]}}
PREFER_WEIGHTED = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]}},
    {"weight": 100, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["eu-west-9z"]}]}},
    {"weight": 50, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]}]}}]}}
SPREAD_ANYWAY = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                  "labelSelector": {"matchLabels": WEB}}]
PREFER_NOT = {"key": "soft", "value": "drain", "effect": "PreferNoSchedule"}
KEEP = {"karpenter.sh/do-not-disrupt": "true"}
#: a NodePool past its limits once the removed node is gone too: it may launch no node
LIMITED = {"spec": {"limits": {"nodes": 1}}}


def _pool(**extra: Any) -> dict[str, Any]:
    doc = nodepool()
    for key, value in extra.get("spec", {}).items():
        doc["spec"][key] = value
    return doc


def _web(name: str, on: str | None, **how: Any) -> dict[str, Any]:
    return pod(name, on, labels=WEB, **how)


# (id, documents, the node removed, the new nodes the move may open, the pods placed after it (in order), where
#  web-1 ends: a node's name, "new" for a new node, or None when it is not placed; words its failure says)
CASES: list[tuple[str, list[Any], str, int, list[Any], str | None, str]] = [
    ("preferred anti-affinity, a delete: a new node would keep it", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     "b", 0, [], None, "its preferred pod anti-affinity over kubernetes.io/hostname, and a new node would"),
    ("preferred anti-affinity, a replace: the new node keeps it", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     "b", 1, [], "new", ""),
    ("preferred anti-affinity, the one new node taken: no second", [
        # big finds no room on a and opens the new node, which only its own type may be (its nodeSelector), too
        # small for web-1 as well
        _pool(), node("a", itype="t3.medium", cpu="1"), node("b", itype="t3.medium", cpu="3"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST),
        pod("big", "b", cpu="1950m", node_selector={"node.kubernetes.io/instance-type": "t3.medium"})],
     "b", 1, [], None, "a new node would"),
    ("preferred anti-affinity, the NodePool past its limits: relaxed", [
        _pool(**LIMITED), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     "b", 0, [], "a", ""),
    ("ScheduleAnyway zone spread, a delete: a new node in the empty zone would keep it", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium", zone="us-east-1b"),
        node("c", itype="t3.medium", zone="us-east-1c"),
        _web("web-0", "a", spread=SPREAD_ANYWAY), _web("web-1", "b", spread=SPREAD_ANYWAY),
        _web("web-2", "c", spread=SPREAD_ANYWAY)],
     "b", 0, [], None, "its ScheduleAnyway topology spread over topology.kubernetes.io/zone"),
    ("ScheduleAnyway zone spread, a replace: the new node opens in the empty zone", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium", zone="us-east-1b"),
        node("c", itype="t3.medium", zone="us-east-1c"),
        _web("web-0", "a", spread=SPREAD_ANYWAY), _web("web-1", "b", spread=SPREAD_ANYWAY),
        _web("web-2", "c", spread=SPREAD_ANYWAY)],
     "b", 1, [], "new", ""),
    ("preferred node affinity no NodePool offers: relaxed", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-1", "b", affinity=PREFER_ZONE_D)],
     "b", 0, [], "a", ""),
    ("preferred node affinity a new node would keep, a delete", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-1", "b", affinity=PREFER_ZONE_B)],
     "b", 0, [], None, "its preferred node affinity"),
    ("preferred pod affinity to a pod no new node holds: relaxed", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"), node("d", itype="t3.medium", cpu="1"),
        pod("db", "d", cpu="950m", labels={"app": "db"}), _web("web-1", "b", affinity=PREFER_NEAR_DB)],
     "b", 0, [], "a", ""),
    ("preferred node affinity: only the heaviest term is held, then the next (Karpenter's lighter weights)", [
        # weight 100: a zone nothing offers, 50: zone b, 1: zone a. Held one at a time, heaviest first, the pod goes
        # to zone b; held together (or the lightest dropped first) it would end on the first node, in zone a
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium", zone="us-east-1b"),
        node("c", itype="t3.medium", zone="us-east-1c"),
        _web("web-1", "c", affinity=PREFER_WEIGHTED)],
     "c", 0, [], "b", ""),
    ("preferred node affinity is dropped before a ScheduleAnyway spread, which counts every zone", [
        # without c: a=1, b=2, c=0. Zone b (its preference) is past the skew of the spread, whose domains the
        # preference does not narrow; dropping the preference first, the spread needs zone c: a new node
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium", zone="us-east-1b"),
        node("c", itype="t3.medium", zone="us-east-1c"),
        _web("web-0", "a", spread=SPREAD_ANYWAY), _web("web-2", "b", spread=SPREAD_ANYWAY),
        _web("web-3", "b", spread=SPREAD_ANYWAY), _web("web-1", "c", spread=SPREAD_ANYWAY, affinity=PREFER_ZONE_B)],
     "c", 0, [], None, "no remaining node takes it with its ScheduleAnyway topology spread over topology.kubernetes.io/"
                       "zone, and a new node would"),
    ("no preference: a delete places it as before", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"), _web("web-1", "b")],
     "b", 0, [], "a", ""),
]


@pytest.mark.parametrize(("docs", "removed", "max_new", "extra", "where", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_preference_is_relaxed_only_when_no_new_node_would_take_the_pod(
        docs: list[Any], removed: str, max_new: int, extra: list[Any], where: str | None, words: str) -> None:
    snap = snapshot(*docs)
    state = Scheduler(snap, node_order=["a", "b", "c", "d"]).new_state()
    leaving = state.remove_node(removed)
    failures, new = state.place_all([*leaving, *extra], max_new)
    web = next(p for p in leaving if p.name == "web-1")
    if where is None:
        assert web.key in failures and words in failures[web.key]
        assert "a preference is relaxed only when no node, new ones included, would take the pod" in failures[web.key]
        return
    assert failures == {}
    placed = state.bin_name(state.placed[web.key])
    assert (placed in new if where == "new" else placed == where), placed


def test_with_new_nodes_to_spare_the_strictest_form_opens_one() -> None:
    """A provisioning simulation (new nodes without a limit) is unchanged: the pod keeps its preference on a new
    node rather than relax it onto an existing one."""
    snap = snapshot(_pool(), node("a", itype="t3.medium"), _web("web-0", "a", affinity=PREFER_OWN_HOST))
    extra = snapshot(_pool(), _web("web-1", None, affinity=PREFER_OWN_HOST)).pods
    state = Scheduler(snap, extra_pods=extra).new_state()
    failures, new = state.place_all(list(extra), max_new=10)
    assert failures == {} and state.bin_name(state.placed[extra[0].key]) in new


# -- the engine: the nodes Karpenter keeps, and those it does not ----------------------------------------------------

# (id, documents, the commands as (action, nodes), the words each kept node's explanation has)
DECISIONS: list[tuple[str, list[Any], list[tuple[str, list[str]]], dict[str, str]]] = [
    ("same-priced nodes whose pods prefer separate hosts are kept", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     [], {"a": "its preferred pod anti-affinity over kubernetes.io/hostname",
          "b": "can't replace with a cheaper node"}),
    ("one node per zone under a ScheduleAnyway spread is kept", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium", zone="us-east-1b"),
        node("c", itype="t3.medium", zone="us-east-1c"),
        _web("web-0", "a", spread=SPREAD_ANYWAY), _web("web-1", "b", spread=SPREAD_ANYWAY),
        _web("web-2", "c", spread=SPREAD_ANYWAY)],
     [], {"a": "its ScheduleAnyway topology spread over topology.kubernetes.io/zone",
          "c": "can't replace with a cheaper node"}),
    ("dearer nodes whose pods prefer separate hosts: replaced, each on a host of its own", [
        _pool(), node("a"), node("b"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     [("replace", ["a"]), ("replace", ["b"])], {}),
    ("the NodePool past its limits: no new node, so the preference is relaxed and one node deleted", [
        _pool(**LIMITED), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_OWN_HOST), _web("web-1", "b", affinity=PREFER_OWN_HOST)],
     [("delete", ["a"])], {}),
    ("a node tainted PreferNoSchedule takes no pod while no NodePool has such a taint", [
        _pool(), node("a", itype="t3.medium", taints=[PREFER_NOT], annotations=KEEP), node("b", itype="t3.medium"),
        _web("web-1", "b")],
     [], {"b": "its pods do not fit on the other nodes"}),
    ("a NodePool with a PreferNoSchedule taint: tolerated as the last relaxation, once no new node would do", [
        # the only NodePool is the tainted one, so a new node would not take the pod either: it goes onto a
        nodepool(taints=[PREFER_NOT]), node("a", itype="t3.medium", taints=[PREFER_NOT], annotations=KEEP),
        node("b", itype="t3.medium", taints=[PREFER_NOT]), _web("web-1", "b")],
     [("delete", ["b"])], {}),
    ("a preference no NodePool offers is relaxed: one node deleted", [
        _pool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
        _web("web-0", "a", affinity=PREFER_ZONE_D), _web("web-1", "b", affinity=PREFER_ZONE_D)],
     [("delete", ["a"])], {}),
]


@pytest.mark.parametrize(("docs", "commands", "kept"), [c[1:] for c in DECISIONS], ids=[c[0] for c in DECISIONS])
def test_consolidation_keeps_the_nodes_karpenter_keeps_for_preferences(
        docs: list[Any], commands: list[tuple[str, list[str]]], kept: dict[str, str]) -> None:
    out = plan_dict(*docs)
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == commands
    for name, words in kept.items():
        assert words in blocked_of(out, name)["reason"]


def test_the_forms_drop_one_thing_at_a_time_in_karpenters_order() -> None:
    """Karpenter's ``Preferences.Relax``: the first required node affinity term while more are left, then the
    heaviest preferred pod affinity term, the heaviest preferred pod anti-affinity term, the heaviest preferred node
    affinity term (one is held at a time), a ScheduleAnyway spread; the last form is the pod's own requirements."""
    def anti(weight: int, key: str) -> dict[str, Any]:
        return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": WEB}, "topologyKey": key}}

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]},
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]}]}]},
            **PREFER_WEIGHTED["nodeAffinity"]},
        "podAffinity": PREFER_NEAR_DB["podAffinity"],
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [anti(5, ZONE), anti(20, HOSTNAME)]}}
    [web] = snapshot(_pool(), node("a"), _web("web-1", "a", affinity=affinity, spread=SPREAD_ANYWAY)).pods
    forms = relaxations(web.spec)
    # held by each form: (required terms, pod affinity, anti-affinity keys, preferred node zones, ScheduleAnyway)
    held = [(len(f.required_node_terms or ()), len(f.pod_affinity), [t.topology_key for t in f.pod_anti_affinity],
             sorted({v for term in f.required_node_terms or () for r in term for v in r.values}), len(f.spread))
            for f in forms]
    assert held == [
        (1, 1, [HOSTNAME, ZONE], ["eu-west-9z", "us-east-1a"], 1),  # term 1 and the weight-100 preference
        (1, 1, [HOSTNAME, ZONE], ["eu-west-9z", "us-east-1b"], 1),  # term 2
        (1, 0, [HOSTNAME, ZONE], ["eu-west-9z", "us-east-1b"], 1),  # the preferred pod affinity
        (1, 0, [ZONE], ["eu-west-9z", "us-east-1b"], 1),  # the heavier anti-affinity term (20)
        (1, 0, [], ["eu-west-9z", "us-east-1b"], 1),
        (1, 0, [], ["us-east-1b"], 1),  # weight 100 dropped: 50 (us-east-1b, as term 2) is held ...
        (1, 0, [], ["us-east-1a", "us-east-1b"], 1),  # ... then 1 (us-east-1a, in one term with term 2's)
        (1, 0, [], ["us-east-1b"], 1),  # no preferred node affinity left
        (1, 0, [], ["us-east-1b"], 0),  # the ScheduleAnyway spread
        (2, 0, [], ["us-east-1a", "us-east-1b"], 0),  # the pod's own requirements: its terms OR'ed
    ]
    assert all(s.when_unsatisfiable == "DoNotSchedule" for f in forms for s in f.spread)
    assert preferences_kept(web.spec, 0).startswith("its required node affinity term 1 of 2 (tried in order), its "
                                                    "preferred pod affinity over kubernetes.io/hostname")
    assert preferences_kept(web.spec, len(forms) - 1) == "no preference"


def test_a_pod_its_own_rules_keep_off_every_node_is_not_said_to_wait_on_a_preference() -> None:
    """A pod with a ``ScheduleAnyway`` zone spread (which a1 meets: zone a 2, zone b 1) and a ``DoNotSchedule``
    hostname spread (which a1 does not: 2 against a new node's 0) finds no node either way: relaxing the preference
    would not help, so its verdict names the rule that keeps it off, not the preference."""
    anyway_and_host = [*SPREAD_ANYWAY, {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": {"matchLabels": WEB}}]
    pool = nodepool(requirements=[{"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]},
                                  {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    out = plan_dict(pool, node("a1", itype="t3.medium"), node("a2", itype="t3.medium"),
                    node("b1", itype="t3.medium", zone="us-east-1b"),
                    _web("web-a1", "a1", spread=anyway_and_host, annotations=KEEP),
                    _web("web-a2", "a2", spread=anyway_and_host),
                    _web("web-b1", "b1", spread=anyway_and_host, annotations=KEEP),
                    pod("filler", "b1", cpu="1900m", annotations=KEEP))
    assert out["commands"] == []
    reason = blocked_of(out, "a2")["reason"]
    assert "pod default/web-a2: every remaining node with room for it is ruled out by its topology spread" in reason
    assert "a preference is relaxed only when" not in reason
