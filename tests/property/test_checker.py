"""The checker catches violations: hand-made results that break one rule each must be rejected for it.

A checker that accepts everything would make the property tests pass vacuously, so every rule it
claims to enforce has an example here, next to a valid twin it must accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ebb.core.model import (
    LABEL_ZONE,
    TAINT_DISRUPTED,
    DaemonSet,
    HostPort,
    NodePool,
    Pod,
    Requirement,
    SchedulingSpec,
    Snapshot,
    Taint,
    Toleration,
)
from ebb.core.simulator.checker import check
from ebb.core.simulator.results import NewNode, SimulationResult
from ebb.core.simulator.scheduler import simulate
from tests.kit.simulator_model import Gi, Mi, make_node, make_pod, make_type, spread, term

SMALL = make_type("small", 2000, 4 * Gi, 8, [("z-a", "on-demand", 0.10), ("z-b", "on-demand", 0.11)])
BIG = make_type("big", 8000, 16 * Gi, 8, [("z-a", "on-demand", 0.40), ("z-b", "on-demand", 0.41)])
POOL = NodePool("default")


def snap(nodes: Sequence[object], pods: Sequence[Pod] = (), pools: Sequence[NodePool] = (POOL,),
         daemonsets: Sequence[DaemonSet] = ()) -> Snapshot:
    return Snapshot(tuple(nodes), tuple(pods), tuple(pools), (SMALL, BIG),  # type: ignore[arg-type]
                    daemonsets=tuple(daemonsets))


def result(placements: Mapping[str, str], new_nodes: Sequence[NewNode] = (),
           unplaceable: Mapping[str, str] | None = None) -> SimulationResult:
    return SimulationResult(dict(placements), tuple(new_nodes), dict(unplaceable or {}))


def kinds(violations: list[str]) -> set[str]:
    return {v.split(":", 1)[0] for v in violations}


def new_node(hostname: str, pods: Sequence[str], it: str = "small", zone: str = "z-a",
             price: float = 0.10) -> NewNode:
    return NewNode(hostname, "default", (it,), "on-demand", (zone,), price, tuple(pods))


# ------------------------------------------------------------------------------------------------


def test_accepts_a_real_simulation() -> None:
    nodes = [make_node("n1", SMALL, "z-a"), make_node("n2", SMALL, "z-b")]
    residents = [make_pod(f"r{i}", 500, labels={"app": "web"}, node="n1") for i in range(2)]
    s = snap(nodes, residents)
    res = simulate(s, [], remove=["n1"])
    assert res.all_placed
    assert check(s, res, ["n1"], residents) == []


def test_resources_overfilled_node() -> None:
    s = snap([make_node("n1", SMALL, "z-a")])  # 1900m allocatable
    pods = [make_pod("a", 1000), make_pod("b", 1000)]
    bad = check(s, result({"default/a": "n1", "default/b": "n1"}), [], pods)
    assert kinds(bad) == {"resources"}, bad
    assert "cpu 2000" in bad[0]
    assert check(s, result({"default/a": "n1"}, unplaceable={"default/b": "full"}), [], pods) == []


def test_resources_count_staying_pods_and_pod_slots() -> None:
    tiny = make_type("tiny", 4000, 8 * Gi, 2, [("z-a", "on-demand", 0.1)])
    s = Snapshot((make_node("n1", tiny, "z-a"),), (make_pod("r", 100, node="n1"),), (POOL,), (tiny,))
    pods = [make_pod("a"), make_pod("b")]
    bad = check(s, result({"default/a": "n1", "default/b": "n1"}), [], pods)
    assert kinds(bad) == {"resources"} and "pods 3" in bad[0], bad


def test_resources_new_node_daemonset_overhead() -> None:
    ds = DaemonSet("agent", "kube-system", SchedulingSpec({"cpu": 500, "memory": 64 * Mi, "pods": 1}))
    s = snap([], daemonsets=[ds])
    pods = [make_pod("a", 1500)]  # small: 2000 - 100 overhead = 1900; minus 500 DaemonSet = 1400
    bad = check(s, result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])]), [], pods)
    assert kinds(bad) == {"resources"}, bad
    s_no_ds = snap([])
    assert check(s_no_ds, result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])]), [], pods) == []
    # A DaemonSet that does not tolerate the NodePool's taint does not run there.
    tainted = NodePool("default", taints=(Taint("dedicated", "x"),))
    tol = (Toleration("dedicated", "Equal", "x"),)
    pods_tol = [make_pod("a", 1500, tolerations=tol)]
    s_taint = snap([], pools=[tainted], daemonsets=[ds])
    assert check(s_taint, result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])]), [],
                 pods_tol) == []


def test_anti_affinity_between_placed_pods() -> None:
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-a"), make_node("n3", BIG, "z-b")])
    spec = {"labels": {"app": "web"}, "pod_anti_affinity": (term("web"),)}
    pods = [make_pod("a", **spec), make_pod("b", **spec)]  # type: ignore[arg-type]
    bad = check(s, result({"default/a": "n1", "default/b": "n1"}), [], pods)
    assert kinds(bad) == {"anti-affinity"}, bad
    assert check(s, result({"default/a": "n1", "default/b": "n2"}), [], pods) == []
    zone_spec = {"labels": {"app": "web"}, "pod_anti_affinity": (term("web", LABEL_ZONE),)}
    zpods = [make_pod("a", **zone_spec), make_pod("b", **zone_spec)]  # type: ignore[arg-type]
    assert kinds(check(s, result({"default/a": "n1", "default/b": "n2"}), [], zpods)) == {"anti-affinity"}
    assert check(s, result({"default/a": "n1", "default/b": "n3"}), [], zpods) == []


def test_existing_pods_anti_affinity_against_incoming() -> None:
    resident = make_pod("db", labels={"app": "db"}, node="n1", pod_anti_affinity=(term("web"),))
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-a")], [resident])
    pods = [make_pod("w", labels={"app": "web"})]
    bad = check(s, result({"default/w": "n1"}), [], pods)
    assert kinds(bad) == {"anti-affinity"} and "default/db" in bad[0], bad
    assert check(s, result({"default/w": "n2"}), [], pods) == []


def test_spread_zone_skew() -> None:
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-b")])
    spec = {"labels": {"app": "web"}, "spread": (spread("web"),)}
    pods = [make_pod(f"p{i}", **spec) for i in range(3)]  # type: ignore[arg-type]
    bad = check(s, result({p.key: "n1" for p in pods}), [], pods)
    assert kinds(bad) == {"spread"}, bad
    ok = {"default/p0": "n1", "default/p1": "n2", "default/p2": "n1"}
    assert check(s, result(ok), [], pods) == []


def test_spread_counts_zones_the_nodepool_can_launch_into() -> None:
    # Only z-a has a node, but the NodePool can launch into z-b: two pods in z-a is skew 2.
    s = snap([make_node("n1", BIG, "z-a")])
    spec = {"labels": {"app": "web"}, "spread": (spread("web"),)}
    pods = [make_pod(f"p{i}", **spec) for i in range(2)]  # type: ignore[arg-type]
    assert kinds(check(s, result({p.key: "n1" for p in pods}), [], pods)) == {"spread"}
    # A NodePool restricted to z-a adds no domain.
    pool_a = NodePool("default", requirements=(Requirement(LABEL_ZONE, "In", ("z-a",)),))
    s_a = snap([make_node("n1", BIG, "z-a")], pools=[pool_a])
    assert check(s_a, result({p.key: "n1" for p in pods}), [], pods) == []


def test_spread_hostname() -> None:
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-a")])
    spec = {"labels": {"app": "web"}, "spread": (spread("web", "kubernetes.io/hostname"),)}
    pods = [make_pod(f"p{i}", **spec) for i in range(3)]  # type: ignore[arg-type]
    assert kinds(check(s, result({p.key: "n1" for p in pods}), [], pods)) == {"spread"}
    assert check(s, result({"default/p0": "n1", "default/p1": "n2", "default/p2": "n1"}), [], pods) == []


def test_taint_not_tolerated() -> None:
    s = snap([make_node("n1", BIG, "z-a", taints=(Taint("dedicated", "x", "NoSchedule"),))])
    bad = check(s, result({"default/a": "n1"}), [], [make_pod("a")])
    assert kinds(bad) == {"taints"}, bad
    tolerant = make_pod("a", tolerations=(Toleration("dedicated", "Equal", "x", "NoSchedule"),))
    assert check(s, result({"default/a": "n1"}), [], [tolerant]) == []
    prefer = snap([make_node("n1", BIG, "z-a", taints=(Taint("dedicated", "x", "PreferNoSchedule"),))])
    assert check(prefer, result({"default/a": "n1"}), [], [make_pod("a")]) == []


def test_host_port_conflict() -> None:
    port = (HostPort(8080),)
    resident = make_pod("r", node="n1", host_ports=port)
    s = snap([make_node("n1", BIG, "z-a")], [resident])
    bad = check(s, result({"default/a": "n1"}), [], [make_pod("a", host_ports=port)])
    assert kinds(bad) == {"host-ports"}, bad
    assert check(s, result({"default/a": "n1"}), [], [make_pod("a", host_ports=(HostPort(8081),))]) == []
    udp = (HostPort(8080, "UDP"),)
    assert check(s, result({"default/a": "n1"}), [], [make_pod("a", host_ports=udp)]) == []
    two = [make_pod("a", host_ports=(HostPort(9000, host_ip="10.0.0.1"),)),
           make_pod("b", host_ports=(HostPort(9000),))]
    s2 = snap([make_node("n1", BIG, "z-a")])
    assert kinds(check(s2, result({"default/a": "n1", "default/b": "n1"}), [], two)) == {"host-ports"}


def test_host_port_of_a_new_nodes_daemonset() -> None:
    """A new node's DaemonSet pods hold their host ports before any placed pod comes."""
    exporter = DaemonSet("exporter", "kube-system",
                         SchedulingSpec({"cpu": 10, "pods": 1}, host_ports=(HostPort(9100),)))
    s = snap([], daemonsets=[exporter])
    bad = check(s, result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])]), [],
                [make_pod("a", host_ports=(HostPort(9100),))])
    assert kinds(bad) == {"host-ports"} and "DaemonSet kube-system/exporter" in bad[0], bad
    assert check(s, result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])]), [],
                 [make_pod("a", host_ports=(HostPort(9101),))]) == []


def test_node_selector_and_affinity() -> None:
    s = snap([make_node("n1", BIG, "z-a", labels={"tier": "a"}), make_node("n2", BIG, "z-b")])
    sel = make_pod("a", node_selector={"tier": "a"})
    assert kinds(check(s, result({"default/a": "n2"}), [], [sel])) == {"node-affinity"}
    assert check(s, result({"default/a": "n1"}), [], [sel]) == []
    terms = ((Requirement(LABEL_ZONE, "In", ("z-c",)),), (Requirement("tier", "Exists"),))
    aff = make_pod("a", required_node_terms=terms)
    assert kinds(check(s, result({"default/a": "n2"}), [], [aff])) == {"node-affinity"}
    assert check(s, result({"default/a": "n1"}), [], [aff]) == []


def test_closed_nodes_receive_no_pods() -> None:
    cordoned = make_node("n1", BIG, "z-a", unschedulable=True)
    disrupted = make_node("n2", BIG, "z-a", taints=(Taint(TAINT_DISRUPTED, "", "NoSchedule"),))
    s = snap([cordoned, disrupted, make_node("n3", BIG, "z-a")])
    pod = make_pod("a", tolerations=(Toleration(operator="Exists"),))
    assert kinds(check(s, result({"default/a": "n1"}), [], [pod])) == {"closed"}
    assert kinds(check(s, result({"default/a": "n2"}), [], [pod])) == {"closed"}
    assert check(s, result({"default/a": "n3"}), [], [pod]) == []


def test_pod_affinity() -> None:
    db = make_pod("db", labels={"app": "db"}, node="n1")
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-b")], [db])
    web = make_pod("w", labels={"app": "web"}, pod_affinity=(term("db", LABEL_ZONE),))
    assert kinds(check(s, result({"default/w": "n2"}), [], [web])) == {"pod-affinity"}
    assert check(s, result({"default/w": "n1"}), [], [web]) == []


def test_pod_affinity_first_of_its_group() -> None:
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-b")])
    spec = {"labels": {"app": "web"}, "pod_affinity": (term("web", LABEL_ZONE),)}
    pods = [make_pod(f"p{i}", **spec) for i in range(3)]  # type: ignore[arg-type]
    # One self-affine group: the first pod may go anywhere, the others follow it.
    assert check(s, result({p.key: "n2" for p in pods}), [], pods) == []
    # Split 2 + 1: whichever came later into the other zone had no partner there.
    split = {"default/p0": "n1", "default/p1": "n1", "default/p2": "n2"}
    assert kinds(check(s, result(split), [], pods)) == {"pod-affinity"}
    # With a pod of the group already running in z-a, nobody may start a group in z-b.
    s_db = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-b")],
                [make_pod("r", labels={"app": "web"}, node="n1")])
    assert kinds(check(s_db, result({"default/p0": "n2"}), [], pods[:1])) == {"pod-affinity"}


def test_nodepool_limits() -> None:
    limited = NodePool("default", limits={"cpu": 8000})
    s = snap([make_node("n1", BIG, "z-a")], pools=[limited])  # already 8000m
    pods = [make_pod("a", 1000)]
    res = result({"default/a": "new-1"}, [new_node("new-1", ["default/a"])])
    assert kinds(check(s, res, [], pods)) == {"limits"}
    assert check(s, res, ["n1"], pods) == []  # removing n1 frees the room


def test_bookkeeping() -> None:
    s = snap([make_node("n1", BIG, "z-a"), make_node("n2", BIG, "z-a")])
    pods = [make_pod("a"), make_pod("b")]
    assert kinds(check(s, result({"default/a": "n1"}), [], pods)) == {"bookkeeping"}  # b missing
    assert kinds(check(s, result({"default/a": "n1", "default/b": "n2"}), ["n2"], pods)) == {"bookkeeping"}
    assert kinds(check(s, result({"default/a": "n1"}, unplaceable={"default/b": ""}), [], pods)) == {"bookkeeping"}
    both = result({"default/a": "n1", "default/b": "n1"}, unplaceable={"default/b": "x"})
    assert kinds(check(s, both, [], pods)) == {"bookkeeping"}
    empty_new = result({"default/a": "n1", "default/b": "n1"}, [new_node("new-1", [])])
    assert kinds(check(s, empty_new, [], pods)) == {"bookkeeping"}
    wrong_zone = result({"default/a": "new-1", "default/b": "n1"},
                        [new_node("new-1", ["default/a"], zone="z-c")])
    assert kinds(check(s, wrong_zone, [], pods)) == {"bookkeeping"}
    outside = NodePool("default", requirements=(Requirement(LABEL_ZONE, "In", ("z-b",)),))
    s_out = snap([make_node("n1", BIG, "z-a")], pools=[outside])
    ok_zone = result({"default/a": "new-1", "default/b": "n1"}, [new_node("new-1", ["default/a"])])
    assert kinds(check(s_out, ok_zone, [], pods)) == {"bookkeeping"}


def test_new_node_is_materialised_with_its_labels_and_taints() -> None:
    pool = NodePool("default", labels={"team": "x"}, taints=(Taint("dedicated", "x"),))
    s = snap([], pools=[pool])
    wants_team = make_pod("a", node_selector={"team": "x", LABEL_ZONE: "z-b"},
                          tolerations=(Toleration("dedicated", "Equal", "x"),))
    res = result({"default/a": "new-1"}, [new_node("new-1", ["default/a"], zone="z-b", price=0.11)])
    assert check(s, res, [], [wants_team]) == []
    untolerated = make_pod("a", node_selector={"team": "x"})
    assert kinds(check(s, res, [], [untolerated])) == {"taints"}
