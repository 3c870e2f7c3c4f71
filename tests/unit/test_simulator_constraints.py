"""Scheduling constraints, seen through consolidation outcomes.

Node `src` (t3.medium, the cheapest type, so it can only be deleted, never replaced more cheaply) runs
pod `p`; node `dst` (m5.large in another zone, kept busy by a 5Gi pod) has room for `p`. `src` is
deleted exactly when the simulator lets `p` move onto `dst`. `dst` is no candidate itself (do-not-consolidate):
else, where a new node may take `p`, merging the two into one r5.large saves $0.0116/h and multi-node
consolidation's search takes that.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from ebb.core.simulator.binding import bind
from ebb.core.simulator.scheduler import UNEXPLAINED, Scheduler, format_requests
from ebb.core.snapshot import governed
from tests.kit.builders import (
    ZONES,
    blocked_of,
    daemonset,
    disrupted,
    disruption_policy,
    ds_pod,
    node,
    nodeclaim,
    nodepool,
    plan_dict,
    pod,
    snapshot,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _on_host_ip(doc: dict[str, Any], host_ip: str) -> dict[str, Any]:
    """``doc``, a pod with a host port, with that port on ``host_ip``."""
    doc["spec"]["containers"][0]["ports"][0]["hostIP"] = host_ip
    return doc


def _init_with_port(port: int, *, sidecar: bool) -> dict[str, Any]:
    init: dict[str, Any] = {"name": "proxy", "image": "registry.example/app:1",
                            "resources": {"requests": {"cpu": "10m"}},
                            "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]}
    if sidecar:
        init["restartPolicy"] = "Always"
    return init


def _required(*terms: list[tuple[str, str, list[str]]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in term]}
        for term in terms]}}}


def _anti(labels: dict[str, str], key: str = HOST) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


def _affinity(labels: dict[str, str], key: str = HOST) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


def _spread(skew: int = 1, key: str = ZONE) -> list[dict[str, Any]]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}}]


def _taint(effect: str = "NoSchedule") -> list[dict[str, Any]]:
    return [{"key": "dedicated", "value": "x", "effect": effect}]


def _tol(**kwargs: str) -> list[dict[str, Any]]:
    return [kwargs]


WEB = {"app": "web"}

# (id, dst node kwargs, extra pods on dst, kwargs of pod p, p moves (src deleted))
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any], bool]] = [
    ("no-constraint", {}, [], {}, True),
    # nodeSelector
    ("node-selector-match", {"labels": {"disk": "ssd"}}, [], {"node_selector": {"disk": "ssd"}}, True),
    ("node-selector-miss", {}, [], {"node_selector": {"disk": "ssd"}}, False),
    ("node-selector-other-value", {"labels": {"disk": "hdd"}}, [], {"node_selector": {"disk": "ssd"}}, False),
    # required node affinity
    ("in-match", {}, [], {"affinity": _required([(ZONE, "In", ["us-east-1b"])])}, True),
    ("in-miss", {}, [], {"affinity": _required([(ZONE, "In", ["us-east-1c"])])}, False),
    ("notin-match", {}, [], {"affinity": _required([(ZONE, "NotIn", ["us-east-1b"])])}, False),
    ("notin-miss", {}, [], {"affinity": _required([(ZONE, "NotIn", ["us-east-1c"])])}, True),
    ("exists-present", {"labels": {"disk": "ssd"}}, [], {"affinity": _required([("disk", "Exists", [])])}, True),
    ("exists-absent", {}, [], {"affinity": _required([("disk", "Exists", [])])}, False),
    ("doesnotexist-present", {"labels": {"disk": "ssd"}}, [],
     {"affinity": _required([("disk", "DoesNotExist", [])])}, False),
    ("doesnotexist-absent", {}, [], {"affinity": _required([("disk", "DoesNotExist", [])])}, True),
    ("gt-above", {"labels": {"cores": "8"}}, [], {"affinity": _required([("cores", "Gt", ["4"])])}, True),
    ("gt-below", {"labels": {"cores": "2"}}, [], {"affinity": _required([("cores", "Gt", ["4"])])}, False),
    ("gt-equal", {"labels": {"cores": "4"}}, [], {"affinity": _required([("cores", "Gt", ["4"])])}, False),
    ("lt-below", {"labels": {"cores": "2"}}, [], {"affinity": _required([("cores", "Lt", ["4"])])}, True),
    ("lt-above", {"labels": {"cores": "8"}}, [], {"affinity": _required([("cores", "Lt", ["4"])])}, False),
    # the terms are tried in order, as Karpenter's scheduler tries them: the second only once no node, new ones
    # included, takes the first (a new node in zone c would: p stays, the node no cheaper to replace); terms no node
    # can meet are passed over
    ("terms-tried-in-order", {}, [],
     {"affinity": _required([(ZONE, "In", ["us-east-1c"])], [(ZONE, "In", ["us-east-1b"])])}, False),
    ("terms-are-ored", {}, [],
     {"affinity": _required([(ZONE, "In", ["eu-west-9z"])], [(ZONE, "In", ["us-east-1b"])])}, True),
    ("expressions-are-anded", {"labels": {"disk": "ssd"}}, [],
     {"affinity": _required([(ZONE, "In", ["us-east-1b"]), ("disk", "DoesNotExist", [])])}, False),
    # taints and tolerations
    ("noschedule-untolerated", {"taints": _taint()}, [], {}, False),
    ("noschedule-tolerated-equal", {"taints": _taint()}, [],
     {"tolerations": _tol(key="dedicated", operator="Equal", value="x", effect="NoSchedule")}, True),
    ("noschedule-tolerated-exists", {"taints": _taint()}, [],
     {"tolerations": _tol(key="dedicated", operator="Exists")}, True),
    ("noschedule-wrong-value", {"taints": _taint()}, [],
     {"tolerations": _tol(key="dedicated", operator="Equal", value="y", effect="NoSchedule")}, False),
    ("tolerate-everything", {"taints": _taint()}, [], {"tolerations": _tol(operator="Exists")}, True),
    # Karpenter's scheduler reads a PreferNoSchedule taint as it reads NoSchedule, and tolerates it only as its last
    # relaxation when some NodePool's template has one (not here): tests/unit/test_preference_relaxation.py
    ("prefernoschedule", {"taints": _taint("PreferNoSchedule")}, [], {}, False),
    ("prefernoschedule-tolerated", {"taints": _taint("PreferNoSchedule")}, [],
     {"tolerations": _tol(operator="Exists", effect="PreferNoSchedule")}, True),
    ("noexecute", {"taints": _taint("NoExecute")}, [], {}, False),
    ("dst-being-disrupted", {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}, [],
     {"tolerations": _tol(key="karpenter.sh/disrupted", operator="Exists")}, False),
    # pod anti-affinity (hostname)
    ("anti-affinity-match", {}, [pod("web-2", "dst", labels=WEB)], {"labels": WEB, "affinity": _anti(WEB)},
     False),
    ("anti-affinity-other-labels", {}, [pod("db", "dst", labels={"app": "db"})],
     {"labels": WEB, "affinity": _anti(WEB)}, True),
    ("anti-affinity-other-namespace", {}, [pod("web-2", "dst", labels=WEB, ns="other")],
     {"labels": WEB, "affinity": _anti(WEB)}, True),
    ("anti-affinity-of-the-pod-already-there", {}, [pod("guard", "dst", labels={"app": "guard"},
                                                        affinity=_anti(WEB))], {"labels": WEB}, False),
    # pod affinity (hostname)
    ("affinity-present", {}, [pod("db", "dst", labels={"app": "db"})],
     {"affinity": _affinity({"app": "db"})}, True),
    ("affinity-absent", {}, [], {"affinity": _affinity({"app": "db"})}, False),
    # zone topology spread: moving p from us-east-1a onto dst (us-east-1b, which has web-2) would make it
    # 0/2/0 over the NodePool's three zones
    ("zone-spread-skew-1", {}, [pod("web-2", "dst", labels=WEB, spread=_spread(1))],
     {"labels": WEB, "spread": _spread(1)}, False),
    # a third web pod in us-east-1c: b=2, c=1 would look balanced over the zones that still have nodes,
    # but us-east-1a, where the NodePool can still launch, would have none (skew 2): never collapse a spread
    ("zone-spread-not-collapsed", {}, [pod("web-2", "dst", labels=WEB, spread=_spread(1)),
                                       node("third", zone="us-east-1c"), pod("web-3", "third", labels=WEB,
                                                                             spread=_spread(1))],
     {"labels": WEB, "spread": _spread(1)}, False),
    ("zone-spread-skew-2", {}, [pod("web-2", "dst", labels=WEB, spread=_spread(2))],
     {"labels": WEB, "spread": _spread(2)}, True),
    ("zone-spread-alone", {}, [pod("db", "dst", labels={"app": "db"})],
     {"labels": WEB, "spread": _spread(1)}, True),  # p is the only web pod: 0/1/0 is within skew 1
    ("zone-no-spread", {}, [pod("web-2", "dst", labels=WEB)], {"labels": WEB}, True),
    # hostname spread, as Karpenter counts it: a new node is a domain with zero pods, so p may not join web-2
    ("hostname-spread", {}, [pod("web-2", "dst", labels=WEB, spread=_spread(1, HOST))],
     {"labels": WEB, "spread": _spread(1, HOST)}, False),
    ("hostname-spread-skew-2", {}, [pod("web-2", "dst", labels=WEB, spread=_spread(2, HOST))],
     {"labels": WEB, "spread": _spread(2, HOST)}, True),
    # host ports
    ("host-port-conflict", {}, [pod("proxy", "dst", host_port=8080)], {"host_port": 8080}, False),
    ("host-port-free", {}, [pod("proxy", "dst", host_port=9090)], {"host_port": 8080}, True),
    # a sidecar (an init container with restartPolicy: Always) holds its host ports for the pod's life, as
    # kube-scheduler's NodePorts counts them; a regular init container's are gone before the app starts
    ("host-port-of-a-sidecar", {}, [pod("proxy", "dst", host_port=8080)],
     {"init_containers": [_init_with_port(8080, sidecar=True)]}, False),
    ("host-port-of-an-init-container", {}, [pod("proxy", "dst", host_port=8080)],
     {"init_containers": [_init_with_port(8080, sidecar=False)]}, True),
    ("host-port-on-another-address", {}, [_on_host_ip(pod("proxy", "dst", host_port=8080), "10.0.0.2")],
     {"host_port": 8080}, False),  # p's is on every address
]


@pytest.mark.parametrize(("dst_kwargs", "dst_pods", "p_kwargs", "moves"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_constraint(dst_kwargs: dict[str, Any], dst_pods: list[dict[str, Any]], p_kwargs: dict[str, Any],
                    moves: bool) -> None:
    out = plan_dict(
        nodepool(),
        node("src", itype="t3.medium", zone="us-east-1a"),
        node("dst", zone="us-east-1b", annotations={"karpenter.sh/do-not-consolidate": "true"}, **dst_kwargs),
        pod("filler", "dst", cpu="100m", memory="5Gi", labels={"app": "filler"}),
        *dst_pods,
        pod("p", "src", cpu="300m", memory="256Mi", **p_kwargs),
    )
    if moves:
        assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [
            ("single-node-consolidation", "delete", ["src"])]
    else:
        assert "src" not in disrupted(out)
        assert "do not fit on the other nodes" in blocked_of(out, "src")["reason"]


def test_counting_the_bound_pods_makes_no_class_and_finds_what_the_classes_say() -> None:
    """A simulation counts every bound pod in the topology groups and host ports (`SimState._init_counts`) but
    places only some: it reads each class's `Scheduler.memberships` without making the class, and those are
    what the class, once made, says (the groups it raises, its host ports)."""
    sched = Scheduler(snapshot(
        nodepool(), node("a", zone="us-east-1a"), node("b", zone="us-east-1b"),
        pod("web-1", "a", labels=WEB, spread=_spread()), pod("web-2", "b", labels=WEB, spread=_spread()),
        pod("solo", "a", labels={"app": "solo"}, affinity=_anti({"app": "solo"})),
        pod("agent", "b", labels={"app": "agent"}, host_port=9100),
        pod("plain", "b", labels={"app": "plain"})))
    state = sched.new_state()
    assert sched._classes == {}
    assert state.ports == {1: {("TCP", 9100, "0.0.0.0")}}
    found = {p.name: sched.memberships(p) for p in sched.snapshot.pods}
    for p in sched.snapshot.pods:
        cls = sched.classes(p)[-1]
        assert found[p.name] == ((*cls.matched, *cls.owned), cls.host_ports), p.name
    assert found["web-1"][0] and found["solo"][0] and not found["plain"][0]
    spread_group = next(gid for gid, g in enumerate(sched.topology.groups) if g.kind == "match" and g.key == ZONE)
    assert state.counts[spread_group].sum() == 2  # both web pods, one per zone


def test_a_placement_asked_not_to_explain_fails_the_same_pods_without_the_sentence() -> None:
    """`SimState.place_all(explain=False)`: the same placements and failures, each failure's reason
    ``UNEXPLAINED`` (the sentence costs more than a placement; the greedy runs only need to know)."""
    sched = Scheduler(snapshot(nodepool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
                               pod("big", "a", cpu="1500m"), pod("fits", "a", cpu="100m"),
                               pod("other", "b", cpu="1500m")))
    results = []
    for explain in (True, False):
        state = sched.new_state()
        leaving = state.remove_node("a")
        failures, _ = state.place_all(leaving, max_new=0, explain=explain)
        results.append((failures, dict(state.placed)))
    (explained, placed), (quiet, placed_quietly) = results
    assert placed == placed_quietly == {"default/fits": 1}
    assert explained.keys() == quiet.keys() == {"default/big"}
    assert "no remaining node has room" in explained["default/big"]
    assert quiet == {"default/big": UNEXPLAINED}


def test_a_pools_offerings_for_a_pod_are_made_once_and_shared_read_only() -> None:
    """`Pool.combo_ok` is kept for the pool's life (pools outlive a pass: `constraints.cached_pools`): a second
    pass's Scheduler gets the same read-only array for the same needs, and needs that differ get their own answer."""
    docs = [nodepool(), node("a", zone="us-east-1a"),
            pod("any", "a"), pod("zoned", "a", node_selector={ZONE: "us-east-1b"}),
            pod("nowhere", "a", node_selector={ZONE: "mars-1a"})]
    snap = snapshot(*docs)
    first, second = Scheduler(snap), Scheduler(snap)  # a pass and a validation of the same objects
    assert first.pools[0] is second.pools[0]
    by_name = {p.name: p for p in second.snapshot.pods}
    ok = {name: (first.pools[0].combo_ok(p.spec), second.pools[0].combo_ok(p.spec)) for name, p in by_name.items()}
    assert ok["any"][0] is ok["any"][1] and ok["zoned"][0] is ok["zoned"][1]
    assert ok["nowhere"] == (None, None)
    assert ok["any"][0] is not None and not ok["any"][0].flags.writeable
    zones = first.pools[0].combo_zone
    assert ok["zoned"][0] is not None
    assert {zones[i] for i in ok["zoned"][0].nonzero()[0]} == {"us-east-1b"}
    assert ok["any"][0].sum() > ok["zoned"][0].sum()


def test_a_scheduler_takes_the_pools_of_the_very_same_objects_without_comparing_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`constraints.cached_pools`: a snapshot holding the NodePool, DaemonSet and InstanceType objects the pools were
    built from takes them without a repr; one with equal NodePools that are other objects takes them by value (and
    the entry then keeps those objects); a NodePool that differs builds its own."""
    snap = snapshot(nodepool(weight=5), node("a"), pod("p", "a"))
    first = Scheduler(snap)
    reprs: list[object] = []
    real_repr = repr

    def counted_repr(obj: object) -> str:
        reprs.append(obj)
        return real_repr(obj)

    monkeypatch.setattr("builtins.repr", counted_repr)
    assert Scheduler(replace(snap, pods=())).pools is first.pools  # another pass's snapshot of the same objects
    assert reprs == []
    equal = replace(snap, nodepools=tuple(replace(p) for p in snap.nodepools))  # a planner's policies merged again
    assert equal.nodepools[0] is not snap.nodepools[0]
    assert Scheduler(equal).pools is first.pools and reprs  # compared by value
    reprs.clear()
    assert Scheduler(replace(equal, pods=())).pools is first.pools and reprs == []  # now known by identity
    heavier = replace(snap, nodepools=tuple(replace(p, weight=9) for p in snap.nodepools))
    assert Scheduler(heavier).pools is not first.pools
    assert Scheduler(heavier).pools[0].pool.weight == 9


def test_a_nodepool_governed_by_a_policy_is_the_same_object_for_the_same_two_objects() -> None:
    """`governed` gives the same NodePool again for the same NodePool and DisruptionPolicy objects (a planner's
    snapshots, so the simulator knows it by identity), and its own for another policy."""
    snap = snapshot(nodepool(), disruption_policy(consolidateAfter="5m"))
    other = snapshot(nodepool(), disruption_policy(consolidateAfter="10m"))
    pool, policy = snap.nodepools[0], snap.disruption_policies[0]
    assert governed(pool, policy) is governed(pool, policy)
    assert governed(pool, other.disruption_policies[0]) is not governed(pool, policy)
    assert governed(pool, other.disruption_policies[0]).consolidate_after != governed(pool, policy).consolidate_after


@pytest.mark.parametrize("max_new", [1, 2])
def test_replicas_following_each_other_onto_a_new_node_go_where_the_search_puts_them(max_new: int) -> None:
    """`SimState._follow`: a replica after one that went onto the only new node joins it without the search, and
    when the node can take no more (the largest type holds three) the search goes on: a second new node when
    allowed, else the pod finds no room. The same placements, new nodes and failures as the search alone."""
    up_to_4_cpus = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.xlarge", "m5.xlarge"]}]
    docs = [nodepool(requirements=up_to_4_cpus), node("a", itype="t3.medium"), pod("filler", "a", cpu="1900m"),
            *(pod(f"web-{i}", "a", cpu="1200m", labels=WEB) for i in range(5))]
    outcomes = []
    for follow in (True, False):
        sched = Scheduler(snapshot(*docs))
        state = sched.new_state()
        if not follow:
            state._follow = lambda b, req: None  # type: ignore[method-assign]
        leaving = [p for p in state.remove_node("a") if p.name.startswith("web")]
        failures, _ = state.place_all(leaving, max_new=max_new, explain=False)
        outcomes.append((failures, dict(state.placed), state.new_nodes()))
    assert outcomes[0] == outcomes[1]
    failures, _, new = outcomes[0]
    assert [len(n.pods) for n in new] == ([3, 2] if max_new == 2 else [3])
    assert len(failures) == (0 if max_new == 2 else 2)


def test_a_pool_keeps_its_offerings_for_a_bounded_number_of_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-lived planner's pods may keep bringing needs never seen again (a nodeSelector on a node's name): the
    pool's `combo_ok` starts again once it holds `_COMBO_OK_CACHE_SIZE` of them, and answers the same after."""
    from ebb.core.simulator import constraints

    monkeypatch.setattr(constraints, "_COMBO_OK_CACHE_SIZE", 2)
    snap = snapshot(nodepool(), node("a"), *(pod(f"p{z}", "a", node_selector={ZONE: z}) for z in ZONES))
    pool = Scheduler(snap).pools[0]
    first = [pool.combo_ok(p.spec) for p in snap.pods]
    assert len(pool._combo_ok) <= 2
    again = [pool.combo_ok(p.spec) for p in snap.pods]
    assert len(pool._combo_ok) <= 2
    for before, after in zip(first, again, strict=True):
        assert before is not None and after is not None and (before == after).all()


def test_a_pod_known_to_find_no_room_goes_onto_a_new_node_as_after_the_search() -> None:
    """`SimState._no_room`: a pod that found no room on the open nodes (none may open), asked again with a new node
    allowed and nothing changed since, opens the new node the search opens; a replica after it fails at once where
    no new node is allowed. The same placements, failures and new nodes as a state that never saw it fail."""
    up_to_4_cpus = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.xlarge", "m5.xlarge"]}]
    snap = snapshot(nodepool(requirements=up_to_4_cpus), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
                    pod("filler", "b", cpu="1500m"), *(pod(f"web-{i}", "a", cpu="1200m", labels=WEB) for i in range(2)))
    sched = Scheduler(snap)
    seen, fresh = sched.new_state(), sched.new_state()
    leaving = [fresh.remove_node("a"), seen.remove_node("a")][1]
    assert seen.place(leaving[0], 0) is not None  # no room on b
    assert seen._no_room is not None
    assert seen.place(leaving[1], 0, explain=False) == UNEXPLAINED  # its replica: known, no search
    for state in (seen, fresh):
        assert state.place(leaving[0], 1) is None
    assert seen.placed == fresh.placed and seen.new_nodes() == fresh.new_nodes()
    assert seen.placed[leaving[0].key] == sched.N  # the new node


def test_replicas_following_each_other_onto_a_node_go_where_the_search_puts_them() -> None:
    """A replica after one that went onto an existing node goes there too without the search while it has room
    (the nodes before it had none and still have none), and once that node is full the search finds the next one:
    the same placements as the search alone."""
    docs = [nodepool(), *(node(n, itype="m5.large") for n in "abcd"), pod("filler", "a", cpu="1800m"),
            *(pod(f"web-{i}", "d", cpu="600m", labels=WEB) for i in range(4))]
    outcomes = []
    for follow in (True, False):
        state = Scheduler(snapshot(*docs), node_order=["a", "b", "c", "d"]).new_state()
        leaving = state.remove_node("d")
        placed: list[str] = []
        for p in leaving:
            if not follow:
                state._run = None  # the search for every pod
            assert state.place(p, 0, explain=False) is None
            placed.append(state.bin_name(state.placed[p.key]))
        outcomes.append(placed)
    assert outcomes[0] == outcomes[1] == ["b", "b", "b", "c"]


def test_nodepools_are_tried_heavier_first_and_of_one_weight_the_later_name_first() -> None:
    """Karpenter's ``OrderByWeight`` (pkg/utils/nodepool): by weight, heaviest first; of one weight, by name, the
    name later in the alphabet first. A new node comes from the first NodePool that can launch it."""
    snap = snapshot(nodepool("alpha", weight=5), nodepool("zeta", weight=5), nodepool("mid", weight=5),
                    nodepool("heavy", weight=9), nodepool("light"))
    scheduler = Scheduler(snap)
    assert [scheduler.pools[i].pool.name for i in scheduler.pool_order] == ["heavy", "zeta", "mid", "alpha", "light"]
    (placed,) = plan_dict(nodepool("alpha"), nodepool("zeta"), node("a", itype="m5.xlarge", pool="alpha"),
                          pod("web", "a", cpu="500m"))["commands"]
    assert placed["replacements"][0]["nodePool"] == "zeta"


@pytest.mark.parametrize("declared", [True, False], ids=["daemonset-declared", "no-daemonset"])
def test_an_existing_node_keeps_room_for_the_daemonset_pods_not_there_yet(declared: bool) -> None:
    """Karpenter's ``ExistingNode``: an existing node's room is its allocatable less its pods' requests, less what the
    pods of the DaemonSets that would run there and are not there yet request. ``na`` has 1.5 cpu free but its 1-cpu
    agent has not started there, so ``nb``'s 800m pod does not fit; without the DaemonSet it does, and ``nb`` goes."""
    only_m5 = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},  # no cheaper
               {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    docs = [nodepool(requirements=only_m5), node("na"), pod("big", "na", cpu="500m"),
            node("nb"), pod("web", "nb", cpu="800m"), ds_pod("agent-nb", "nb", cpu="1")]
    if declared:
        docs.append(daemonset("agent", cpu="1"))
    out = plan_dict(*docs)
    # with the DaemonSet, no new m5.large takes both nodes' pods either: its agent would need 1 cpu of it too
    assert any("nb" in c["nodes"] for c in out["commands"]) is not declared, out["commands"]


@pytest.mark.parametrize("short", [True, False], ids=["agent-short-of-storage", "agent-fits"])
def test_a_node_short_of_any_resource_takes_no_pod(short: bool) -> None:
    """Karpenter's ``ExistingNode.CanAdd``: ``resources.Fits`` fails when any of the node's room is negative, whatever
    the pod asks for. The agent of a new DaemonSet, not on either node yet, asks for more ephemeral-storage than
    either has (it does not fit on the full nodes): neither node's pod, which asks only for cpu and memory, may go
    to the other, and both stay; with an agent that fits, one node's pod moves and that node goes."""
    only_m5 = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},  # no cheaper
               {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    na, nb = node("na"), node("nb")
    for each in (na, nb):
        each["status"]["allocatable"]["ephemeral-storage"] = "10Gi"
    agent = daemonset("agent", cpu="10m", memory="16Mi")
    agent["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = (
        "12Gi" if short else "1Gi")
    out = plan_dict(nodepool(requirements=only_m5), na, pod("big", "na", cpu="500m"), nb,
                    pod("web", "nb", cpu="800m"), agent)
    assert bool(out["commands"]) is not short, out["commands"]


def test_the_simulated_kube_scheduler_binds_onto_a_node_short_of_a_resource_the_pod_does_not_ask_for() -> None:
    """kube-scheduler's resource filter checks only what the pod requests: a node short of ephemeral-storage (its
    agent not there yet asks for more than it has) still takes a pod that asks only for cpu and memory."""
    storage = node("na")
    storage["status"]["allocatable"]["ephemeral-storage"] = "10Gi"
    agent = daemonset("agent", cpu="10m", memory="16Mi")  # not on na yet
    agent["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "12Gi"
    waiting = pod("web", None, cpu="800m")
    snap = snapshot(nodepool(), storage, agent, waiting)
    bound, _ = bind(snap, [p for p in snap.pods if p.node_name is None], random.Random(0))
    assert bound == {"default/web": "na"}


TEAMS = {"key": "team", "operator": "In", "values": ["a", "b"]}


@pytest.mark.parametrize(("wanted", "labels"), [
    ({"team": "b"}, {"team": "b"}),  # the second value: Karpenter narrows the requirement to it
    ({"team": "a"}, {"team": "a"}),
    (None, {"team": "a"}),  # no pod asks: the first value, as before
])
def test_a_custom_requirement_with_several_values_is_narrowed_to_what_the_pods_need(
        wanted: dict[str, str] | None, labels: dict[str, str]) -> None:
    """A NodePool that splits workloads by ``team In [a, b]``: the replacement of a node whose pods select ``team: b``
    is a ``team=b`` node (Karpenter's ``Compatible`` then ``Add`` narrow the NodeClaim's requirement, and
    ``resolveCustomLabelsFromRequirements`` labels it). ebb gave every new node the first value, so such pods fit no
    new node and their node was never replaced."""
    docs = [nodepool(requirements=[TEAMS]), node("big", itype="m5.2xlarge", labels={"team": (wanted or {}).get(
        "team", "a")}), pod("web-1", "big", cpu="500m", node_selector=wanted), pod("web-2", "big", cpu="500m",
                                                                                   node_selector=wanted)]
    (command,) = plan_dict(*docs)["commands"]
    assert command["action"] == "replace" and command["nodes"] == ["big"]
    assert command["replacements"][0]["labels"] == labels


def test_pods_that_need_different_values_do_not_share_a_new_node() -> None:
    """One node cannot be ``team=a`` and ``team=b``: the pods of both teams need two new nodes, which a single-node
    consolidation does not launch, so their node stays."""
    docs = [nodepool(requirements=[TEAMS]), node("big", itype="m5.2xlarge", labels={"team": "a"}),
            pod("web-a", "big", cpu="500m", node_selector={"team": "a"}),
            pod("web-b", "big", cpu="500m", node_selector={"team": "b"})]
    out = plan_dict(*docs)
    assert out["commands"] == []
    assert "not on one new node" in blocked_of(out, "big")["reason"]


@pytest.mark.parametrize(("limits", "nodes", "may_refuse"), [
    (None, 1, False),  # no limits: nothing to refuse
    ({"cpu": "100"}, 1, False),  # 2 of 100 cpu used: room for one more of the largest type (8 cpu)
    ({"cpu": "9"}, 1, True),  # 2 of 9: an m5.2xlarge (8 cpu) would pass the limit
    ({"cpu": "10"}, 1, False),  # 2 of 10: every type fits
    ({"memory": "39Gi"}, 1, True),  # 8Gi of 39Gi: an m5.2xlarge (32Gi) would pass the limit
    ({"nodes": "2"}, 1, False),  # one node, room for one more
    ({"nodes": "2"}, 2, True),  # two nodes: a new one would pass the limit
])
def test_limits_may_refuse_a_type_only_near_them(limits: dict[str, str] | None, nodes: int, may_refuse: bool) -> None:
    """Whether a NodePool's limits may refuse a new node one of its types at its usage now: kept refusals read the
    usage of such a NodePool only (`Placement.limits_may_refuse`)."""
    pool = nodepool()
    if limits is not None:
        pool["spec"]["limits"] = limits
    snap = snapshot(pool, *(node(f"n{i}") for i in range(nodes)))
    assert Scheduler(snap).new_state().limits_may_refuse(0) is may_refuse


@pytest.mark.parametrize(("limits", "expected"), [
    # the two nodes (16 cpu) are past the limit already: the NodePool launches nothing (Karpenter's launch refuses)
    ({"cpu": "6"}, "NodePool default's nodes already count more than its limits allow (cpu 16 against cpu 6), so it "
                   "launches no node"),
    ({"nodes": "0"}, "NodePool default's nodes already count more than its limits allow (nodes 2 against nodes 0), "
                     "so it launches no node"),
])
def test_a_pod_kept_off_a_new_node_by_the_limits_names_them(limits: dict[str, str], expected: str) -> None:
    """Why a pod finds no new node names the NodePool limits that keep it off one, what the NodePool's nodes count
    against them and the smallest type that would hold it: "within its limits" alone left a reader to guess which
    limit, and said it also of a pod no type holds at all (the merge of the two nodes is refused so)."""
    pool = nodepool()
    pool["spec"]["limits"] = limits
    out = plan_dict(pool, node("a", itype="m5.2xlarge"), node("b", itype="m5.2xlarge"),
                    pod("big-a", "a", cpu="6", memory="1Gi"), pod("big-b", "b", cpu="6", memory="1Gi"))
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert "no NodePool offers an instance type that fits it within its limits (" + expected + ")" in reason


@pytest.mark.parametrize(("claim_node", "deleting", "replaced"), [
    ("", False, False),  # launched, no Node yet: its 2 cpu count, the NodePool is past its limit of 6
    ("", True, True),  # being deleted: it counts against nothing
    ("n-busy", False, True),  # its Node is in the snapshot: counted once, as that node
])
def test_a_nodeclaim_launched_whose_node_has_not_registered_counts_against_the_limits(
        claim_node: str, deleting: bool, replaced: bool) -> None:
    """Karpenter's cluster state holds a NodeClaim launched, its Node not registered yet, as a node of its NodePool
    with its instance type's capacity (``StateNode.Capacity``), and the scheduler subtracts it from what the
    NodePool's limits leave. ebb counted only the Nodes, so it replaced ``big`` with a 2-cpu node past the limit."""
    pool = nodepool()
    pool["spec"]["limits"] = {"cpu": "6"}
    claim = nodeclaim("nc-burst", claim_node, deleting=deleting,
                      labels={"node.kubernetes.io/instance-type": "m5.large"})
    if not claim_node:
        claim["status"]["providerID"] = "aws:///us-east-1c/i-burst"
    out = plan_dict(pool, node("n-busy", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    pod("filler", "n-busy", cpu="1900m"), node("big", itype="m5.xlarge"),
                    pod("web", "big", cpu="500m"), claim)
    assert ("big" in disrupted(out)) is replaced, out["commands"]


def test_a_pod_no_type_holds_is_not_blamed_on_the_limits() -> None:
    """A pod larger than every instance type finds no new node whatever the limits: the sentence does not say
    "within its limits"."""
    pool = nodepool()
    pool["spec"]["limits"] = {"cpu": "1000"}
    out = plan_dict(pool, node("a", itype="m5.2xlarge", cpu="64"), node("b", itype="m5.2xlarge", cpu="64"),
                    pod("huge", "a", cpu="40"), pod("other", "b", cpu="40"))
    reason = blocked_of(out, "a")["reason"]
    assert "no NodePool offers an instance type that fits it" in reason
    assert "within its limits" not in reason


@pytest.mark.parametrize("others", [0, 1])
def test_a_node_the_limits_keep_from_a_replacement_says_why_alone(others: int) -> None:
    """Single-node consolidation's verdict "its pods do not fit on the other nodes ..., and not on one new node
    either" says why the new node would not take them, whether the node is the only candidate (single-node's own
    simulation) or one of several (the multi-node search's step alone): here the limits."""
    pool = nodepool()
    pool["spec"]["limits"] = {"cpu": "14"}
    docs = [pool, node("a", itype="m5.2xlarge"), pod("big-a", "a", cpu="6", memory="1Gi"),
            node("b", itype="m5.2xlarge", annotations={} if others else {"karpenter.sh/do-not-disrupt": "true"}),
            pod("big-b", "b", cpu="6", memory="1Gi")]
    out = plan_dict(*docs)
    assert out["commands"] == []
    reason = blocked_of(out, "a")["reason"]
    assert reason.startswith(
        "its pods do not fit on the other nodes (pod default/big-a: no remaining node has room for its requests (cpu "
        "6000m, memory 1.00Gi)), and not on one new node either (pod default/big-a: no NodePool offers an instance "
        "type that fits it within its limits (NodePool default's nodes already count more than its limits allow (cpu "
        "16 against cpu 14), so it launches no node))")


@pytest.mark.parametrize(("requests", "slot", "written"), [
    ({"cpu": 500, "memory": 2**30, "pods": 1}, False, "cpu 500m, memory 1.00Gi"),
    ({"cpu": 500, "memory": 2**30, "pods": 1}, True, "cpu 500m, memory 1.00Gi, pods 1"),
    ({"cpu": 500, "hugepages-2Mi": 512 * 2**20}, False, "cpu 500m, hugepages-2Mi 512Mi"),
    ({"hugepages-1Gi": 2 * 2**30}, False, "hugepages-1Gi 2Gi"),
    ({"cpu": 0, "pods": 1}, False, "no requests"),
    # not a round figure: the decimals it takes not to read as one (a node with 4Gi free does not hold 4.3G)
    ({"memory": 4_300_000_000}, False, "memory 4.005Gi"),
    ({"memory": 4_295_000_000}, False, "memory 4.00003Gi"),
    ({"memory": 4 * 2**30 - 2**20}, False, "memory 3.999Gi"),
    ({"ephemeral-storage": 512 * 2**20}, False, "ephemeral-storage 0.50Gi"),
    ({"hugepages-2Mi": 3 * 10**6}, False, "hugepages-2Mi 0.003Gi"),
])
def test_requests_as_a_reader_sees_them(requests: dict[str, int], slot: bool, written: str) -> None:
    assert format_requests(requests, slot=slot) == written


@pytest.mark.parametrize(("slots", "named"), [(1, True), (3, False)])
def test_a_full_pod_count_is_named_among_the_requests(slots: int, named: bool) -> None:
    """``keep`` runs one pod; with room for one pod only, ``web`` has no room there though cpu and memory would fit,
    and the reason says so; with room for three, it is cpu that is short and the pod slot goes unsaid."""
    cpu = "500m" if slots == 1 else "1900m"
    only_m5_large = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    docs = [nodepool(requirements=only_m5_large), node("a"), pod("web", "a", cpu="500m", memory="1Gi"),
            node("keep", pods=slots, annotations={"karpenter.sh/do-not-disrupt": "true"}), pod("k", "keep", cpu=cpu)]
    out = plan_dict(*docs)
    reason = blocked_of(out, "a")["reason"]
    assert "no remaining node has room for its requests (cpu 500m, memory 1.00Gi" in reason
    assert ("memory 1.00Gi, pods 1)" in reason) is named


@pytest.mark.parametrize(("selector", "replaced"), [
    ({"topology.kubernetes.io/region": "us-east-1"}, True),  # the nodes' region: a new node is of it
    ({"failure-domain.beta.kubernetes.io/region": "us-east-1"}, True),  # the older name, read as the new one
    ({"topology.kubernetes.io/region": "eu-west-1"}, False),  # another region: no new node is of it
])
def test_a_new_node_is_labelled_with_its_zones_region(selector: dict[str, str], replaced: bool) -> None:
    """A cloud's instance types carry their region, so a pod pinned to the cluster's region may go on a new node
    (Karpenter's well-known label); ebb's new nodes had no region label, and a node holding such a pod was never
    replaced, drifted or expired. A new node takes its zone's region as the snapshot's nodes label it."""
    region = {"topology.kubernetes.io/region": "us-east-1"}
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge", labels=region),
                    pod("p", "big", cpu="500m", memory="1Gi", node_selector=selector))
    if replaced:
        [command] = out["commands"]
        assert (command["action"], command["nodes"]) == ("replace", ["big"])
    else:
        assert out["commands"] == []


@pytest.mark.parametrize(("operator", "values", "replaced"), [
    ("Exists", [], True),  # every node has a hostname, a new one too
    ("NotIn", ["big", "other"], True),  # a new node is none of the named nodes
    ("In", ["big"], False),  # a new node is not the node the pod is pinned to
    ("DoesNotExist", [], False),
])
def test_a_new_node_has_a_hostname_no_other_node_has(operator: str, values: list[str], replaced: bool) -> None:
    """Karpenter's NodeClaim carries ``kubernetes.io/hostname In [hostname-placeholder-NNNN]`` while it schedules, so
    a pod requiring the label to exist may go on a new node; ebb's new nodes had no hostname label, and a node holding
    such a pod was never replaced. A new node has a placeholder hostname, which no real node's name matches."""
    out = plan_dict(nodepool(), node("big", itype="m5.2xlarge"),
                    pod("p", "big", cpu="500m", memory="1Gi", affinity=_required([(HOST, operator, values)])))
    if replaced:
        [command] = out["commands"]
        assert (command["action"], command["nodes"]) == ("replace", ["big"])
    else:
        assert out["commands"] == []
        assert "no NodePool can launch a node it tolerates and matches" in blocked_of(out, "big")["reason"]


def _next_to_proxy(proxy: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """The plan of ``p`` on ``src`` (a t3.medium it would leave), with ``proxy`` on ``dst``, a node that stays and has
    room for ``p``: whether ``src`` goes is whether their host ports let ``p`` onto ``dst``."""
    return plan_dict(
        nodepool(),
        node("src", itype="t3.medium", zone="us-east-1a"),
        node("dst", zone="us-east-1b", annotations={"karpenter.sh/do-not-consolidate": "true"}),
        pod("filler", "dst", cpu="100m", memory="5Gi", labels={"app": "filler"}),
        proxy, p,
    )


@pytest.mark.parametrize(("dst_ip", "moves"), [("::", False), ("0.0.0.0", False), ("10.0.0.2", True)])
def test_ipv6s_unspecified_address_is_every_address(dst_ip: str, moves: bool) -> None:
    """A host port on ``::`` holds it on every address, as on 0.0.0.0 (Karpenter's ``HostPortUsage`` reads any
    unspecified address so): p's port on 10.0.0.1 conflicts with it. ebb read ``::`` as one address and moved p."""
    out = _next_to_proxy(_on_host_ip(pod("proxy", "dst", host_port=8080), dst_ip),
                         _on_host_ip(pod("p", "src", cpu="300m", memory="256Mi", host_port=8080), "10.0.0.1"))
    assert ("src" in disrupted(out)) is moves


@pytest.mark.parametrize(("operator", "named"), [("Exists", True), ("NotIn", True), ("In", False)])
def test_a_nodepool_requirement_that_gives_no_label_is_named(operator: str, named: bool) -> None:
    """A NodePool requirement ``Exists`` (or ``NotIn``) on a key gives a new node a value made up for it, the smallest
    integer it allows (docs/decisions.md), so a pod selecting another value of the key fits no new node: the sentence
    names the requirement and the value, which a reader of the NodePool would otherwise take for one that admits the
    pod. ``In`` listing the value labels the node."""
    values = {"Exists": None, "NotIn": ["9"], "In": ["x"]}[operator]
    requirement: dict[str, Any] = {"key": "team", "operator": operator, **({"values": values} if values else {})}
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                  requirement])
    out = plan_dict(pool, node("a", labels={"team": "x"}, node_hash=None),
                    pod("p", "a", node_selector={"team": "x"}), node("b", labels={"team": "1"}), pod("q", "b"))
    words = f"NodePool default's requirement team {operator} gives a new node team=0"
    assert (words in blocked_of(out, "a")["reason"]) is named, out["blocked"]


@pytest.mark.parametrize(("limits", "replaced"), [
    ({"cpu": "8"}, True),  # its nodes count cpu 8 (big's 4, full's 4): at the limit, a replacement may still launch
    ({"cpu": "7"}, False),  # past it: Karpenter's provisioner creates no NodeClaim in the NodePool
    ({"memory": "31Gi"}, False),  # 32Gi counted (two m5.xlarge)
    ({"nodes": "2"}, True),
    ({"nodes": "1"}, False),  # two nodes count against a limit of one
    ({"nodes": "1.5"}, False),  # a Quantity: two nodes exceed 1.5
    ({"nodes": "1k"}, True),  # a Quantity: a thousand nodes
    ({"gpu.example.com/a100": "0"}, True),  # a resource no node or type has: nothing counts against it
])
def test_a_nodepool_its_nodes_take_past_its_limits_launches_no_replacement(limits: dict[str, str],
                                                                          replaced: bool) -> None:
    """Karpenter's ``Provisioner.Create`` refuses a NodeClaim when its NodePool's usage (the candidate's node still
    counted: replacements launch before it is deleted) is past one of its limits (``Limits.ExceededBy``: strictly
    more), so a replacement there is never launched; at the limit exactly it is. The verdict says which limit."""
    pool = nodepool()
    pool["spec"]["limits"] = limits
    full = node("full", itype="m5.xlarge", annotations={"karpenter.sh/do-not-disrupt": "true"})
    out = plan_dict(pool, node("big", itype="m5.xlarge"), pod("web", "big", cpu="500m"), full,
                    pod("filler", "full", cpu="3900m"))
    assert [(c["nodes"], c["action"]) for c in out["commands"]] == ([(["big"], "replace")] if replaced else [])
    if not replaced:
        assert "so it launches no node" in blocked_of(out, "big")["reason"]


def test_a_replacement_comes_from_the_next_nodepool_when_the_heavier_one_is_past_its_limits() -> None:
    """A NodePool past its limits is left out of the replacement's choice, as one that cannot launch is: the next by
    weight launches it."""
    heavy = nodepool("heavy", weight=50)
    heavy["spec"]["limits"] = {"cpu": "3"}
    out = plan_dict(heavy, nodepool("light"), node("big", pool="heavy", itype="m5.xlarge"),
                    pod("web", "big", cpu="500m"))
    assert [(c["nodes"], [r["nodePool"] for r in c["replacements"]]) for c in out["commands"]] == [
        (["big"], ["light"])]


def test_a_drift_replacement_the_limits_leave_no_room_for_names_them() -> None:
    """A NodePool within its limits may still have no room for a replacement larger than the node it replaces (its
    requirements now allow only larger types): the verdict names the limits, what the nodes count once the drifted
    node is freed, and the smallest type that would hold its pod."""
    pool = nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                   "values": ["m5.2xlarge"]}])
    pool["spec"]["limits"] = {"cpu": "4"}
    out = plan_dict(pool, node("old", itype="m5.large"), pod("web", "old", cpu="500m"))
    assert out["commands"] == []
    assert ("NodePool default's limits (cpu 4) against what its nodes count (cpu 0) leave no room for m5.2xlarge "
            "(cpu 8)") in blocked_of(out, "old")["reason"]


@pytest.mark.parametrize(("asked", "on_a"), [
    ({"operator": "DoesNotExist"}, {}),
    ({"operator": "NotIn", "values": ["0"]}, {}),
    ({"operator": "Gt", "values": ["5"]}, {"team": "9"}),
])
def test_a_made_up_value_a_pods_node_affinity_refuses_is_named(asked: dict[str, Any], on_a: dict[str, str]) -> None:
    """A pod whose required node affinity refuses the value made up for a NodePool's key (``DoesNotExist``, ``NotIn``
    it, or a ``Gt`` above it) fits no new node of that NodePool (docs/decisions.md): the sentence names the value, as
    it does for a nodeSelector asking another."""
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                  {"key": "team", "operator": "NotIn", "values": ["x"]}])
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "team", **asked}]}]}}}
    out = plan_dict(pool, node("a", itype="m5.2xlarge", labels=on_a, node_hash=None),
                    pod("p", "a", affinity=affinity), node("b", labels={"team": "0"}), pod("q", "b"))
    reason = blocked_of(out, "a")["reason"]
    assert "NodePool default's requirement team NotIn gives a new node team=0, a value made up" in reason
    assert "so a pod that asks another value of it, or none, fits none" in reason


@pytest.mark.parametrize(("src_ip", "dst_ip", "moves"), [
    ("fd00::1", "FD00:0:0::1", False),  # one IPv6 address written two ways
    ("10.0.0.1", "::ffff:10.0.0.1", False),  # an IPv4-mapped IPv6 address is the IPv4 one (Go's net.IP.Equal)
    ("fd00::1", "fd00::2", True),
])
def test_two_spellings_of_one_host_ip_clash(src_ip: str, dst_ip: str, moves: bool) -> None:
    """Karpenter's ``HostPortUsage`` compares host IPs with ``net.IP.Equal``: two spellings of one address hold the
    same port, and p may not move next to the proxy."""
    out = _next_to_proxy(_on_host_ip(pod("proxy", "dst", host_port=8080), dst_ip),
                         _on_host_ip(pod("p", "src", cpu="300m", memory="256Mi", host_port=8080), src_ip))
    assert ("src" in disrupted(out)) is moves


@pytest.mark.parametrize(("phase", "deleting", "moves"), [
    ("Running", True, False),  # being deleted but still running: it holds 8080 until it stops
    ("Succeeded", True, True),  # finished: its port is free
    ("Running", False, False),
])
def test_a_pod_being_deleted_holds_its_host_port_until_it_stops(phase: str, deleting: bool, moves: bool) -> None:
    """Karpenter's state node keeps a pod's host ports until the pod is terminal, and kube-scheduler's NodePorts
    counts them while the pod is on the node: p may not move onto dst while the old proxy, being deleted, still runs
    there. ebb read the port as free, so p would have stayed Pending."""
    proxy = pod("proxy", "dst", host_port=8080, phase=phase)
    if deleting:
        proxy["metadata"]["deletionTimestamp"] = "2026-11-23T18:29:00Z"
    out = _next_to_proxy(proxy, pod("p", "src", cpu="300m", memory="256Mi", host_port=8080))
    assert ("src" in disrupted(out)) is moves


@pytest.mark.parametrize(("phase", "deleting", "moves"), [
    ("Running", True, False),  # being deleted but still running: its anti-affinity keeps web off dst until it stops
    ("Succeeded", True, True),  # finished: its binding is gone
    ("Running", False, False),
])
def test_a_pod_being_deleted_keeps_its_anti_affinity_until_it_stops(phase: str, deleting: bool, moves: bool) -> None:
    """Karpenter's cluster state keeps a pod's binding, and with it its required anti-affinity (the inverse check of
    every pod it schedules, ``ForPodsWithAntiAffinity``), until the pod is terminal: p may not move onto dst while the
    old guard, being deleted, still runs there. ebb left pods being deleted out of every topology count, so it moved
    p next to it."""
    guard = pod("guard", "dst", labels={"app": "guard"}, affinity=_anti(WEB), phase=phase)
    if deleting:
        guard["metadata"]["deletionTimestamp"] = "2026-11-23T18:29:00Z"
    out = _next_to_proxy(guard, pod("p", "src", cpu="300m", memory="256Mi", labels=WEB))
    assert ("src" in disrupted(out)) is moves


def test_a_pods_own_anti_affinity_skips_a_pod_being_deleted() -> None:
    """The other way round, Karpenter's ``countDomains`` skips terminating pods for the scheduled pod's own terms:
    p's anti-affinity against web does not keep it off dst, where the only web pod is being deleted."""
    old = pod("old-web", "dst", labels=WEB)
    old["metadata"]["deletionTimestamp"] = "2026-11-23T18:29:00Z"
    out = _next_to_proxy(old, pod("p", "src", cpu="300m", memory="256Mi", labels={"app": "p"}, affinity=_anti(WEB)))
    assert "src" in disrupted(out)


def test_a_pod_being_deleted_on_a_node_going_away_keeps_its_zone() -> None:
    """A pod being deleted on a node a simulation removes is one Karpenter's simulation does not reschedule, so its
    zonal anti-affinity still counts (``updateInverseAffinities`` skips only the pods being scheduled): a web pod may
    not go to its zone while it runs, the node it is on removed or not; a finished one holds nothing."""
    def placed_on(phase: str) -> dict[str, int]:
        guard = pod("guard", "a", labels={"app": "guard"}, affinity=_anti(WEB, ZONE), phase=phase)
        guard["metadata"]["deletionTimestamp"] = "2026-11-23T18:29:00Z"
        sched = Scheduler(snapshot(nodepool(), node("a", zone="us-east-1a"), node("stay", zone="us-east-1a"),
                                   node("b", zone="us-east-1b"), guard, pod("web", "b", labels=WEB)))
        state = sched.new_state()
        state.remove_node("a")
        failures, _ = state.place_all(state.remove_node("b"), max_new=0)
        assert set(failures) == ({"default/web"} if phase == "Running" else set())
        return dict(state.placed)

    assert placed_on("Running") == {}
    assert placed_on("Succeeded") == {"default/web": 1}


def test_a_statefulset_pod_being_deleted_is_counted_where_its_replacement_goes() -> None:
    """A StatefulSet's pod being deleted on a removed node is rescheduled (its replacement needs its room), so
    Karpenter counts its anti-affinity where it goes, not where it was: once the guard went to us-east-1b, web may go
    to us-east-1a."""
    guard = pod("guard", "a", labels={"app": "guard"}, affinity=_anti(WEB, ZONE), owner=("StatefulSet", "guard"),
                node_selector={ZONE: "us-east-1b"})
    guard["metadata"]["deletionTimestamp"] = "2026-11-23T18:29:00Z"
    sched = Scheduler(snapshot(nodepool(), node("a", zone="us-east-1a"), node("stay", zone="us-east-1a"),
                               node("bnode", zone="us-east-1b"), node("c", zone="us-east-1c"), guard,
                               pod("web", "c", labels=WEB)))
    state = sched.new_state()
    failures, _ = state.place_all(state.remove_node("a"), max_new=0)
    assert not failures and state.placed == {"default/guard": 2}
    failures, _ = state.place_all(state.remove_node("c"), max_new=0)
    assert not failures and state.placed["default/web"] == 1


@pytest.mark.parametrize(("status_capacity", "replaced"), [
    ({"cpu": "2", "memory": "8Gi", "pods": "29"}, False),  # 2 of the 3 cpus taken: no m5.large fits the limits
    ({}, True),  # not launched yet, of a type the catalog does not list: it charges no cpu
])
def test_a_launching_claim_counts_its_status_capacity_against_the_limits(status_capacity: dict[str, str],
                                                                         replaced: bool) -> None:
    """Karpenter charges a NodeClaim whose Node has not registered its ``status.capacity`` (``StateNode.Capacity``).
    ebb charged its instance type's catalog capacity, nothing for a type the catalog does not list, so it saw room
    within the limits a launch would pass."""
    claim = nodeclaim("nc-new", "", labels={"node.kubernetes.io/instance-type": "m9z.large"})
    del claim["status"]["nodeName"], claim["status"]["providerID"]  # launching: no Node yet
    if status_capacity:
        claim["status"]["capacity"] = status_capacity
    pool = nodepool(node_hash="new")
    pool["spec"]["limits"] = {"cpu": "3"}
    out = plan_dict(pool, node("x", itype="m5.large", node_hash="old"), pod("big", "x", cpu="1500m", memory="1Gi"),
                    claim)
    assert (out["commands"] != []) is replaced, out["blocked"]
