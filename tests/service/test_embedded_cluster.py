"""The embedded mode's simulated cluster: what it publishes, the API-server semantics the drainer relies on, and
Karpenter's NodePool hash."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.kube.drain import Drainer, EvictionBackoff
from ebb.adapters.kube.node_api import Conflict, KubeError
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT, NodeProvider
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb.core.cluster import ClusterView
from ebb.core.methods.drift import drifted_nodes
from ebb.core.snapshot import parse_documents
from ebb.core.traces import TraceEvent
from ebb_embedded.cluster import SimulatedCluster, template_hash_input
from ebb_embedded.workload import WorkloadCluster
from tests.kit.builders import NOW, catalog, daemonset, ds_pod, node, nodepool, pdb, pod, pvc, storage_class


def clock() -> Any:
    return NOW


def cluster(*docs: dict[str, Any]) -> tuple[SimulatedCluster, InMemoryBus]:
    bus = InMemoryBus()
    return SimulatedCluster(docs, bus, clock), bus


async def published(bus: InMemoryBus) -> SnapshotStore:
    """The snapshot a consumer rebuilds from the compacted topic."""
    store = SnapshotStore(bundled_catalog=[])
    stop = asyncio.Event()

    async def handle(delivery: Any) -> None:
        await store.handle(delivery)

    task = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], "reader", handle, stop=stop))
    await asyncio.sleep(0.1)
    stop.set()
    await task
    return store


def pods_on(sim: SimulatedCluster, node_name: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in sim.objects.values()
                  if o["kind"] == "Pod" and o["spec"].get("nodeName") == node_name)


async def test_every_object_is_published_and_consumers_rebuild_the_same_cluster() -> None:
    sim, bus = cluster(nodepool(), node("a"), node("b"), pod("p1", "a"), pdb("pdb", {"app": "p1"}, min_available=0))
    assert await sim.publish_all() == 5
    store = await published(bus)
    assert store.keys() == ["Node//a", "Node//b", "NodePool//default", "Pod/default/p1",
                            "PodDisruptionBudget/default/pdb"]
    assert {n.name for n in store.snapshot().nodes} == {"a", "b"}


async def test_the_clusters_snapshot_is_its_documents_parsed_and_follows_its_changes() -> None:
    """`SimulatedCluster.snapshot` (the embedded run's prices, kube-scheduler's view) is ``parse_documents`` of its
    documents, in their order, before and after a change (the objects parsed once per change)."""
    sim = SimulatedCluster([nodepool(), node("a"), node("b"), pod("p1", "a"), pod("p2", None)], InMemoryBus(),
                           clock, bundled_catalog=bundled_catalog)
    assert sim.snapshot() == parse_documents(sim.documents(), bundled_catalog)
    await sim.delete_pod("default", "p1", 0)  # gone, and made again by its controller: a new name
    assert sim.snapshot() == parse_documents(sim.documents(), bundled_catalog)
    assert "p1" not in [p.name for p in sim.snapshot().pods] and len(sim.snapshot().pods) == 2


async def test_a_stale_patch_is_a_conflict_and_a_missing_node_is_404() -> None:
    sim, _ = cluster(node("a"))
    current = await sim.read_node("a")
    assert current is not None
    version = current["metadata"]["resourceVersion"]
    await sim.patch_node("a", [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
                               {"op": "add", "path": "/spec/unschedulable", "value": True}])
    with pytest.raises(Conflict):
        await sim.patch_node("a", [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
                                   {"op": "add", "path": "/spec/unschedulable", "value": False}])
    with pytest.raises(KubeError) as missing:
        await sim.patch_node("nope", [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    assert missing.value.status == 404
    node_a = await sim.read_node("a")
    assert node_a is not None and node_a["spec"]["unschedulable"] is True


@pytest.mark.parametrize(("budget", "ready_pods", "expected"), [
    ({"min_available": 2}, 2, "blocked"),
    ({"min_available": 1}, 2, "evicted"),
    ({"max_unavailable": 0}, 2, "blocked"),
    ({"max_unavailable": "50%"}, 2, "evicted"),
    ({"min_available": "100%"}, 2, "blocked"),
])
async def test_evictions_respect_pod_disruption_budgets(budget: dict[str, Any], ready_pods: int,
                                                        expected: str) -> None:
    pods = [pod(f"web-{i}", "a", labels={"app": "web"}) for i in range(ready_pods)]
    sim, _ = cluster(node("a"), pdb("web", {"app": "web"}, **budget), *pods)
    result, message = await sim.evict("default", "web-0")
    assert result == expected, message
    assert (sim.objects.get("Pod/default/web-0") is None) == (expected == "evicted")


async def test_a_budget_counts_the_pods_of_its_namespace_as_they_come_and_go() -> None:
    # two ready web pods here and three with the same labels elsewhere: minAvailable 1 lets one eviction go,
    # whatever the other namespace holds; the pod made again is Pending (not healthy) until bound
    web = [pod(f"web-{i}", "a", labels={"app": "web"}) for i in range(2)]
    elsewhere = [pod(f"web-{i}", "a", labels={"app": "web"}, ns="other") for i in range(3)]
    sim, _ = cluster(nodepool(), node("a"), pdb("web", {"app": "web"}, min_available=1), *web, *elsewhere)
    assert (await sim.evict("default", "web-0"))[0] == "evicted"
    assert (await sim.evict("default", "web-1"))[0] == "blocked"
    assert (await sim.evict("other", "web-0"))[0] == "evicted"  # no budget in its namespace
    assert await sim.schedule_pending() == 2  # the new web pod and the other one, bound and Running
    assert (await sim.evict("default", "web-1"))[0] == "evicted"


async def test_dry_runs_answer_as_the_eviction_would_and_an_eviction_changes_the_next_answer() -> None:
    # what a budget allows is found once per change of the objects: dry runs between changes share it, and the
    # eviction (a change) is seen by the next dry run
    web = [pod(f"web-{i}", "a", labels={"app": "web"}) for i in range(3)]
    sim, _ = cluster(nodepool(), node("a"), pdb("web", {"app": "web"}, max_unavailable=1), *web)
    assert [(await sim.evict("default", f"web-{i}", dry_run=True))[0] for i in range(3)] == ["evicted"] * 3
    assert sim.objects.get("Pod/default/web-0") is not None  # a dry run evicts nothing
    assert (await sim.evict("default", "web-0"))[0] == "evicted"
    assert [(await sim.evict("default", f"web-{i}", dry_run=True))[0] for i in (1, 2)] == ["blocked"] * 2
    assert sim.evictions_refused == 0  # dry runs are not refusals
    assert await sim.schedule_pending() == 1  # web-0 made again, bound and Running: healthy again
    assert (await sim.evict("default", "web-1", dry_run=True))[0] == "evicted"


async def test_two_budgets_on_one_pod_refuse_the_eviction_and_a_gone_pod_is_gone() -> None:
    sim, _ = cluster(node("a"), pod("web-0", "a", labels={"app": "web"}),
                     pdb("one", {"app": "web"}, min_available=0), pdb("two", {"app": "web"}, min_available=0))
    assert (await sim.evict("default", "web-0"))[0] == "refused"
    assert (await sim.evict("default", "nope"))[0] == "gone"


async def test_controllers_recreate_evicted_pods_and_the_scheduler_binds_them_where_they_fit() -> None:
    tainted = node("c", taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    sim, _ = cluster(nodepool(), node("a"), node("b", cpu="1"), tainted,
                     pod("rs-1", "a", cpu="1500m", owner=("ReplicaSet", "rs")),
                     pod("db-0", "a", cpu="100m", owner=("StatefulSet", "db")),
                     pod("bare", "a", cpu="100m", owner=None),
                     daemonset("agent"), ds_pod("agent-a", "a"))
    for name in ("rs-1", "db-0", "bare"):
        assert (await sim.evict("default", name))[0] == "evicted"
    assert (await sim.evict("kube-system", "agent-a"))[0] == "evicted"
    pending = {p["metadata"]["name"] for p in sim.pending_pods()}
    assert "db-0" in pending  # a StatefulSet pod comes back under its name
    assert len(pending) == 2 and any(n.startswith("rs-") and n != "rs-1" for n in pending)
    assert sim.objects.get("Pod/default/bare") is None  # nothing recreates a bare pod
    assert sim.objects.get("Pod/kube-system/agent-a") is None  # nor a DaemonSet pod
    bound = await sim.schedule_pending()
    # 1.5 cpu fits only on a (b has 1 cpu, c is tainted); db-0 fits anywhere untainted
    assert bound == 2
    assert not sim.pending_pods()
    assert pods_on(sim, "c") == []
    moved = [p for p in sim.objects.values() if p["kind"] == "Pod" and p["metadata"]["name"].startswith("rs-")]
    assert [p["spec"]["nodeName"] for p in moved] == ["a"]
    assert moved[0]["status"]["phase"] == "Running"


async def test_a_pod_that_fits_nowhere_stays_pending() -> None:
    sim, _ = cluster(nodepool(), node("a", cpu="1"), pod("big", "a", cpu="900m"))
    assert (await sim.evict("default", "big"))[0] == "evicted"
    sim.objects["Node//a"]["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    assert await sim.schedule_pending() == 0
    assert len(sim.pending_pods()) == 1


async def test_a_node_with_a_finalizer_is_marked_and_goes_with_its_pods_when_the_finalizer_is_removed() -> None:
    sim, bus = cluster(node("a", deleting=False), pod("p", "a"))
    sim.objects["Node//a"]["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    assert await sim.delete_node("a") is True
    marked = await sim.read_node("a")
    assert marked is not None and marked["metadata"]["deletionTimestamp"]
    await sim.patch_node("a", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert await sim.read_node("a") is None
    assert sim.objects.get("Pod/default/p") is None
    assert await sim.delete_node("a") is False
    store = await published(bus)
    assert "Node//a" not in store and "Pod/default/p" not in store  # tombstones reached the consumers


def csi_node(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name}]},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": f"i-{name}", "allocatable": {"count": count}}]}}


async def test_a_csinode_is_published_and_goes_with_its_node() -> None:
    """The cluster keeps and publishes each node's CSINode (its drivers' attach limits, trimmed as the watcher trims
    them); deleting the node deletes it (the garbage collector follows its owner, the Node), not another node's."""
    sim, bus = cluster(node("a"), node("b"), csi_node("a", 25), csi_node("b", 39), pod("p", "a"))
    assert await sim.publish_all() == 5
    assert sorted(sim.objects) == ["CSINode//a", "CSINode//b", "Node//a", "Node//b", "Pod/default/p"]
    assert await sim.delete_node("a") is True
    assert sorted(sim.objects) == ["CSINode//b", "Node//b"]
    store = await published(bus)
    assert store.keys() == ["CSINode//b", "Node//b"]  # the objects, then the tombstones, reached the consumers
    kept = store.get("CSINode", "", "b")
    assert kept is not None and kept["spec"]["drivers"] == [  # trimmed as the watcher trims: the spec whole
        {"name": "ebs.csi.aws.com", "nodeID": "i-b", "allocatable": {"count": 39}}]


async def test_the_real_drainer_drains_and_deletes_a_node_of_the_simulated_cluster() -> None:
    sim, _ = cluster(nodepool(), node("a"), node("b"), pod("web-0", "a", labels={"app": "web"}),
                     pod("web-1", "b", labels={"app": "web"}), pdb("web", {"app": "web"}, min_available=1))
    drainer = Drainer(sim, disruption_taint=DISRUPTED_TAINT, eviction_deadline=5,
                      backoff=EvictionBackoff(initial=0.01, maximum=0.02), poll_interval=0.01)
    assert await drainer.taint("a") is True
    report = await drainer.drain("a")
    assert report.evicted == ["default/web-0"]
    assert await NodeProvider("simulated", sim, sim).retire("a") == "node deleted"
    assert await sim.read_node("a") is None
    assert await sim.schedule_pending() == 1
    assert len(pods_on(sim, "b")) == 2


async def test_the_drifted_annotation_is_set_and_removed() -> None:
    sim, _ = cluster(node("a"))
    await sim.set_drifted("a", "NodePool hash changed")
    assert sim.objects["Node//a"]["metadata"]["annotations"]["ebb.sh/drifted"] == "NodePool hash changed"
    await sim.set_drifted("a", None)
    assert "ebb.sh/drifted" not in sim.objects["Node//a"]["metadata"]["annotations"]
    await sim.set_drifted("gone", "x")  # a node that is gone: nothing to annotate


def test_the_published_messages_are_valid_cluster_objects() -> None:
    sim, _ = cluster(node("a"))
    obj = sim.objects["Node//a"]
    message = ClusterObject(kind="Node", namespace="", name="a", resource_version=obj["metadata"]["resourceVersion"],
                            object=obj)
    assert message.key() == "Node//a"


async def test_a_nodepool_template_change_gets_a_new_hash_as_karpenter_gives_it() -> None:
    """Karpenter's NodePool hash controller, simulated: a change of what Karpenter hashes (the template but for
    requirements and resources) drifts the nodes launched before it; behavioural fields do not; a template seen
    before gets its hash back; a change that names its own hash keeps it."""
    sim = WorkloadCluster([nodepool(node_hash="h1"), node("a", node_hash="h1")], InMemoryBus(), clock)

    async def patch(merge: dict[str, Any]) -> str:
        await sim.apply(TraceEvent.model_validate({"at": 0, "patch": {"kind": "NodePool", "name": "default",
                                                                       "merge": merge}}))
        return str(sim.objects["NodePool//default"]["metadata"]["annotations"]["karpenter.sh/nodepool-hash"])

    def drifted() -> set[str]:
        return set(drifted_nodes(ClusterView.build(sim.snapshot(), NOW)))

    # behavioural fields, requirements, the default expireAfter written out, a list in another order: the same hash
    assert await patch({"spec": {"disruption": {"consolidateAfter": "10m"}, "weight": 5,
                                 "limits": {"cpu": 100}}}) == "h1"
    assert await patch({"spec": {"template": {"spec": {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}]}}}}) == "h1"
    assert await patch({"spec": {"template": {"spec": {"expireAfter": "720h"}}}}) == "h1"
    assert drifted() == set()
    taints = [{"key": "x", "value": "1", "effect": "NoSchedule"}, {"key": "y", "value": "2", "effect": "NoSchedule"}]
    with_taints = await patch({"spec": {"template": {"spec": {"taints": taints}}}})
    assert with_taints.startswith("ebb-") and drifted() == {"a"}
    assert await patch({"spec": {"template": {"spec": {"taints": taints[::-1]}}}}) == with_taints
    # a label on the template: another hash; taken away again, the template is the first one and so is its hash
    labelled = await patch({"spec": {"template": {"metadata": {"labels": {"team": "data"}}}}})
    assert labelled not in ("h1", with_taints)
    assert await patch({"spec": {"template": {"metadata": {"labels": None}, "spec": {"taints": None}}}}) == "h1"
    assert drifted() == set()
    # the controller puts the hash back where a change dropped it, and a change that names its own keeps it
    assert await patch({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": None}}}) == "h1"
    assert await patch({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": "mine"}},
                        "spec": {"template": {"spec": {"expireAfter": "24h"}}}}) == "mine"
    assert drifted() == {"a"}


def test_the_hash_input_leaves_out_what_karpenter_does_not_hash() -> None:
    base = nodepool()
    assert template_hash_input(base) == template_hash_input(
        nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
                 consolidate_after="1h", budgets=[{"nodes": "1"}], weight=10, expire_after="720h"))
    for changed in (nodepool(labels={"a": "b"}), nodepool(template_annotations={"a": "b"}),
                    nodepool(expire_after="24h"), nodepool(taints=[{"key": "k", "effect": "NoSchedule"}])):
        assert template_hash_input(changed) != template_hash_input(base)


async def test_a_consumer_takes_the_clusters_parse_of_the_version_it_holds_and_parses_any_other() -> None:
    """``parsed_as_held`` (the embedded planner's ``SnapshotStore.parsed_elsewhere``): a consumer of the topic
    rebuilds the same snapshot as one that parses everything itself, from the cluster's parsed objects where it holds
    the version the cluster holds; an older version, or an object the cluster no longer holds, is parsed by the
    consumer."""
    sim, bus = cluster(nodepool(), node("a"), node("b"), pod("p1", "a"), pod("p2", "b"))
    await sim.publish_all()
    alone = await published(bus)
    sharing = SnapshotStore(bundled_catalog=[], parsed_elsewhere=sim.parsed_as_held)
    for key, obj in zip(alone.keys(), alone.objects(), strict=True):
        sharing.put(key, dict(obj))
    assert sharing.snapshot() == alone.snapshot() == parse_documents(sim.documents(), [])
    assert sharing.parsed("Pod/default/p1") is sim._parse_cache.parsed("Pod/default/p1")
    old = dict(sharing.get("Pod", "default", "p2") or {})
    await sim.delete_pod("default", "p2", 0)  # gone from the cluster: the consumer's version is its own to parse
    assert sim.parsed_as_held("Pod/default/p2", old) is None
    await sim.patch_node("a", [{"op": "add", "path": "/metadata/labels/team", "value": "x"}])
    stale = sharing.get("Node", "", "a")
    assert stale is not None and sim.parsed_as_held("Node//a", stale) is None  # the cluster holds a newer one
    current = sim.objects["Node//a"]
    assert sim.parsed_as_held("Node//a", current) is sim._parse_cache.parsed("Node//a")


def test_a_launched_node_boots_in_boot_seconds_or_a_time_drawn_per_node_in_the_clouds_spread() -> None:
    fixed = SimulatedCluster([], InMemoryBus(), clock, seed=3, boot_seconds=60.0)
    assert {fixed.boot_time(f"n{i}") for i in range(20)} == {60.0}
    spread = SimulatedCluster([], InMemoryBus(), clock, seed=3, boot_seconds=30.0, boot_seconds_max=90.0)
    times = [spread.boot_time(f"n{i}") for i in range(200)]
    assert all(30.0 <= t <= 90.0 for t in times)
    assert min(times) < 40.0 and max(times) > 80.0  # spread over the range, not one value
    # the same node of the same seed boots in the same time in every run; another seed draws anew
    again = SimulatedCluster([], InMemoryBus(), clock, seed=3, boot_seconds=30.0, boot_seconds_max=90.0)
    assert [again.boot_time(f"n{i}") for i in range(200)] == times
    other = SimulatedCluster([], InMemoryBus(), clock, seed=4, boot_seconds=30.0, boot_seconds_max=90.0)
    assert [other.boot_time(f"n{i}") for i in range(200)] != times


def test_with_measured_boot_times_each_node_boots_in_one_of_them_each_as_likely() -> None:
    samples = (40.0, 45.0, 50.0, 161.5)
    sim = SimulatedCluster([], InMemoryBus(), clock, seed=3, boot_seconds=40.0, boot_seconds_max=161.5,
                           boot_samples=samples)
    times = [sim.boot_time(f"n{i}") for i in range(400)]
    assert set(times) == set(samples)
    assert all(70 <= times.count(t) <= 130 for t in samples)  # about a quarter each, not a uniform draw's mean
    again = SimulatedCluster([], InMemoryBus(), clock, seed=3, boot_samples=samples)
    assert [again.boot_time(f"n{i}") for i in range(400)] == times


async def test_a_launched_node_is_ready_only_after_its_own_boot_time() -> None:
    now = [NOW]
    sim = SimulatedCluster([nodepool(), node("a")], InMemoryBus(), lambda: now[0], seed=5, boot_seconds=30.0,
                           boot_seconds_max=90.0)
    sim.launched["a"] = (NOW, 0.1)
    sim.objects["Node//a"]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    boot = sim.boot_time("a")
    now[0] = NOW + timedelta(seconds=boot - 1)
    assert not await sim.ready("a")
    # at its boot time to the microsecond the clock can tell (a drawn time is not a whole number of seconds)
    now[0] = NOW + timedelta(seconds=boot)
    assert boot != int(boot) and await sim.ready("a")


@pytest.mark.parametrize(("binding", "nodes_used"), [("scored", 3), ("first-fit", 1)])
async def test_kube_scheduler_spreads_a_replicasets_pods_as_its_default_scoring_does(binding: str,
                                                                                   nodes_used: int) -> None:
    """The simulated kube-scheduler scores as kube-scheduler's default profile (`ebb.core.simulator.binding`): three
    replicas of one ReplicaSet on three equal empty nodes go one to a node (LeastAllocated, the default spreading
    over hosts), where the first node that fits takes them all; the same seed binds them alike."""
    replicas = [pod(f"web-{i}", None, labels={"app": "web"}, owner=("ReplicaSet", "web"), phase="Pending")
                for i in range(3)]
    docs = [nodepool(), *(node(n) for n in ("a", "b", "c")), *replicas]

    async def bound(seed: int) -> dict[str, str]:
        sim = SimulatedCluster(docs, InMemoryBus(), clock, seed=seed, binding=binding)
        assert await sim.schedule_pending() == 3
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in sim.objects.values() if p["kind"] == "Pod"}

    first = await bound(4)
    assert len(set(first.values())) == nodes_used
    assert await bound(4) == first


def test_an_unknown_binding_is_refused() -> None:
    with pytest.raises(ValueError, match="binding"):
        SimulatedCluster([], InMemoryBus(), clock, binding="random")


async def test_a_replacement_launched_for_pods_of_one_team_carries_their_label_and_takes_them() -> None:
    """A NodePool that splits workloads by ``team In [a, b]``: the plan replaces a node of team ``b`` with a smaller
    node labelled ``team=b`` (the value its pods select), the simulated cluster launches it with that label, and
    kube-scheduler binds the evicted pods there."""
    from ebb.contracts import Replacement
    from ebb.core.plan import make_plan

    teams = {"key": "team", "operator": "In", "values": ["a", "b"]}
    sim, _ = cluster(nodepool(requirements=[teams]), node("big", itype="m5.2xlarge", labels={"team": "b"}),
                     pod("web-1", "big", cpu="500m", node_selector={"team": "b"}),
                     pod("web-2", "big", cpu="500m", node_selector={"team": "b"}), catalog())
    (command,) = make_plan(sim.snapshot(), NOW).first.commands
    (replacement,) = command.replacements
    assert command.nodes == ("big",) and dict(replacement.labels) == {"team": "b"}
    await sim.launch("small", Replacement.of(replacement))
    assert sim.objects["Node//small"]["metadata"]["labels"]["team"] == "b"
    sim.objects["Node//small"]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    for name in ("web-1", "web-2"):
        assert (await sim.evict("default", name))[0] == "evicted"
    await sim.delete_node("big")
    assert await sim.schedule_pending() == 2
    assert len(pods_on(sim, "small")) == 2


# -- the volume controllers (ebb_embedded.volumes) ---------------------------------------------------------------


def _pending(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "status": {"phase": "Pending"}}


def _claim_of(sim: SimulatedCluster, name: str) -> dict[str, Any]:
    return sim.objects[f"PersistentVolumeClaim/default/{name}"]


def _volume_zones(sim: SimulatedCluster, claim: dict[str, Any]) -> list[str]:
    volume = sim.objects[f"PersistentVolume//{claim['spec']['volumeName']}"]
    [term] = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    return [v for e in term["matchExpressions"] for v in e["values"]]


async def test_a_wait_for_first_consumer_claim_is_bound_in_the_zone_of_its_pods_node() -> None:
    """kube-scheduler binds db on b (a is full): the provisioner makes its volume in b's zone and the claim is bound
    to it, so that db's later moves keep to that zone, as the real cluster's would."""
    sim, _ = cluster(nodepool(), node("a", cpu="1"), pod("big", "a", cpu="900m"), node("b", zone="us-east-1b"),
                     storage_class(), pvc("data-db", None), _pending(pod("db", None, cpu="500m", claims=("data-db",))))
    assert await sim.schedule_pending() == 1
    claim = _claim_of(sim, "data-db")
    assert claim["status"]["phase"] == "Bound" and _volume_zones(sim, claim) == ["us-east-1b"]
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "b"
    snapshot = sim.snapshot()
    [db] = [p for p in snapshot.pods if p.name == "db"]
    assert db.spec.volume_terms is not None and not db.spec.volume_block  # the engine reads the bound volume


async def test_an_immediate_claim_is_bound_when_made_and_a_claim_without_a_provisioner_is_not() -> None:
    sim, _ = cluster(nodepool(), node("a", zone="us-east-1b"), storage_class("now", mode="Immediate"),
                     {**storage_class("static", mode="Immediate"), "provisioner": "kubernetes.io/no-provisioner"})
    await sim._put(pvc("fast", None, storage_class="now"))
    await sim._put(pvc("manual", None, storage_class="static"))
    assert _volume_zones(sim, _claim_of(sim, "fast")) == ["us-east-1b"]  # the first zone of the cluster's nodes
    assert "volumeName" not in _claim_of(sim, "manual")["spec"]


async def test_a_claim_naming_no_class_gets_the_default_one() -> None:
    default = {**storage_class("gp3"), "metadata": {"name": "gp3", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}}
    sim, _ = cluster(nodepool(), node("a"), storage_class("other"), default)
    await sim._put(pvc("data", None, storage_class=None))
    await sim._put(pvc("none-on-purpose", None, storage_class=""))
    assert _claim_of(sim, "data")["spec"]["storageClassName"] == "gp3"
    assert _claim_of(sim, "none-on-purpose")["spec"]["storageClassName"] == ""


async def test_an_ephemeral_volumes_claim_is_made_with_its_pod_and_goes_with_it() -> None:
    """The ephemeral volume controller makes ``<pod>-<volume>`` from the template, owned by the pod; bound where the
    pod is bound; and the garbage collector removes the claim and its volume with the pod (an eviction's new pod
    gets a claim of its own)."""
    sim, _ = cluster(nodepool(), node("a", zone="us-east-1c"), storage_class())
    cache = _pending(pod("cache-1", None, cpu="100m", ephemeral=("scratch",)))
    cache["spec"]["volumes"][-1]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] = "gp3"
    await sim._put(cache)
    claim = _claim_of(sim, "cache-1-scratch")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "cache-1" and "volumeName" not in claim["spec"]
    assert await sim.schedule_pending() == 1
    claim = _claim_of(sim, "cache-1-scratch")
    volume_key = f"PersistentVolume//{claim['spec']['volumeName']}"
    assert _volume_zones(sim, claim) == ["us-east-1c"]
    assert (await sim.evict("default", "cache-1"))[0] == "evicted"
    assert "PersistentVolumeClaim/default/cache-1-scratch" not in sim.objects and volume_key not in sim.objects
    [again] = [k for k in sim.objects if k.startswith("PersistentVolumeClaim/default/rs-")]
    assert again.endswith("-scratch")


async def test_a_launched_node_gets_the_ebs_drivers_zone_label_where_the_clusters_nodes_have_it() -> None:
    labelled = node("a")
    labelled["metadata"]["labels"]["topology.ebs.csi.aws.com/zone"] = "us-east-1a"
    for docs, expected in (([labelled], "us-east-1b"), ([node("a")], None)):
        sim = SimulatedCluster([nodepool(), *docs, node("new", zone="us-east-1b")], InMemoryBus(), clock,
                               boot_seconds=0.0)
        sim.launched["new"] = (NOW, 0.1)
        sim.objects["Node//new"]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        assert await sim.ready("new")
        assert sim.objects["Node//new"]["metadata"]["labels"].get("topology.ebs.csi.aws.com/zone") == expected
