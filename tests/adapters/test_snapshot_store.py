"""SnapshotStore: the bundled catalog by default, and an incremental snapshot equal to a fresh parse."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import ClusterObject
from ebb.core.cluster import ClusterView
from ebb.core.snapshot import ParsedObject, parse_documents, parse_object

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def node(name: str, instance_type: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": "2026-11-01T00:00:00Z",
                         "labels": {"karpenter.sh/nodepool": "general", "karpenter.sh/initialized": "true",
                                    "karpenter.sh/capacity-type": "on-demand",
                                    "node.kubernetes.io/instance-type": instance_type,
                                    "topology.kubernetes.io/zone": "us-east-1a"}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}}}


def catalog(price: float) -> dict[str, Any]:
    return {"apiVersion": "ebb.sh/v1", "kind": "InstanceTypeCatalog", "metadata": {"name": "mine"},
            "spec": {"instanceTypes": [{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                                        "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand",
                                                       "price": price, "available": True}]}]}}


def put(store: SnapshotStore, doc: dict[str, Any]) -> None:
    store.apply(ClusterObject(kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1",
                              object=doc))


def test_the_bundled_catalog_prices_nodes_by_default() -> None:
    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    view = ClusterView.build(store.snapshot(), NOW)
    assert view.price_known["a"]
    assert 0.05 < view.price["a"] < 0.5  # the m5.large on-demand list price, ~0.096/h


def test_a_catalog_object_takes_precedence_and_an_empty_catalog_means_none() -> None:
    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    put(store, catalog(1.234))
    assert ClusterView.build(store.snapshot(), NOW).price["a"] == 1.234
    bare = SnapshotStore(bundled_catalog=[])
    put(bare, node("a", "m5.large"))
    assert not ClusterView.build(bare.snapshot(), NOW).price_known["a"]


def pod(name: str, node_name: str, cpu: str = "100m") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-11-01T00:00:00Z"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}}


def put_pod(store: SnapshotStore, doc: dict[str, Any]) -> bool:
    return store.apply(ClusterObject(kind="Pod", namespace="default", name=doc["metadata"]["name"],
                                     resource_version="1", object=doc))


def test_the_snapshot_is_reused_until_a_change_and_always_equals_a_fresh_parse() -> None:
    from ebb.adapters.catalog import bundled_catalog
    from ebb.core.snapshot import parse_documents

    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    put(store, node("b", "m5.large"))
    for i in range(5):
        put_pod(store, pod(f"p{i}", "a"))
    first = store.snapshot()
    assert store.snapshot() is first  # nothing changed: the same value
    assert not put_pod(store, pod("p0", "a"))  # the same object again is no change
    assert store.snapshot() is first
    assert put_pod(store, pod("p0", "b", cpu="250m"))
    second = store.snapshot()
    assert second is not first
    assert second == parse_documents(store.objects(), bundled_catalog)
    moved = next(p for p in second.pods if p.name == "p0")
    assert moved.node_name == "b" and moved.spec.requests["cpu"] == 250
    store.apply(ClusterObject(kind="Pod", namespace="default", name="p1", resource_version="2", object=None))
    assert {p.name for p in store.snapshot().pods} == {"p0", "p2", "p3", "p4"}


def test_an_invalid_object_fails_every_snapshot_until_it_is_fixed() -> None:
    import pytest

    from ebb.core.snapshot import SnapshotError

    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    put_pod(store, pod("bad", "a", cpu="lots"))
    for _ in range(2):
        with pytest.raises(SnapshotError, match="Pod default/bad"):
            store.snapshot()
    put_pod(store, pod("bad", "a", cpu="1"))
    assert [p.spec.requests["cpu"] for p in store.snapshot().pods] == [1000]


def test_a_change_python_reads_as_equal_is_applied() -> None:
    """``True == 1`` in Python: a PDB whose ``minAvailable`` went from an invalid ``true`` to ``1`` was read as
    unchanged and the invalid one held for ever, every snapshot failing (the planner's fuzzing found it)."""
    import pytest

    from ebb.core.snapshot import SnapshotError

    def budget(min_available: object) -> dict[str, Any]:
        return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}

    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    put(store, budget(True))
    with pytest.raises(SnapshotError, match="minAvailable"):
        store.snapshot()
    assert store.apply(ClusterObject(kind="PodDisruptionBudget", namespace="", name="pdb", resource_version="2",
                                     object=budget(1)))
    assert [p.min_available for p in store.snapshot().pdbs] == [1]
    assert not store.apply(ClusterObject(kind="PodDisruptionBudget", namespace="", name="pdb",
                                         resource_version="3", object=budget(1)))  # the same again: no change


def test_put_parses_an_object_once_per_change_and_snapshot_of_keeps_the_given_order() -> None:
    store = SnapshotStore(bundled_catalog=[])
    store.put("Node//b", node("b", "m5.large"))
    store.put("Node//a", node("a", "m5.large"))
    first = store.parsed("Node//a")
    assert store.parsed("Node//a") is first  # unchanged: the parse is reused
    assert [n.name for n in store.snapshot_of(["Node//b", "Node//a"]).nodes] == ["b", "a"]
    assert [n.name for n in store.snapshot().nodes] == ["a", "b"]  # the snapshot: by key
    store.put("Node//a", node("a", "m5.xlarge"))
    assert store.parsed("Node//a") is not first
    assert store.parsed("Node//a").value.instance_type == "m5.xlarge"
    assert store.remove("Node//a") and not store.remove("Node//a")
    assert [n.name for n in store.snapshot().nodes] == ["b"]


def test_a_pod_whose_spec_changed_only_in_its_node_keeps_its_parsed_needs_and_parses_them_again_otherwise() -> None:
    store = SnapshotStore(bundled_catalog=[])
    waiting = pod("p", "a")
    del waiting["spec"]["nodeName"]
    waiting["status"] = {"phase": "Pending"}
    key = "Pod/default/p"
    store.put(key, waiting)
    needs = store.parsed(key).value.spec
    store.put(key, pod("p", "a"))  # bound and running: the same spec but for nodeName
    bound = store.parsed(key).value
    assert bound.spec is needs and (bound.node_name, bound.phase) == ("a", "Running")
    store.put(key, pod("p", "b"))  # moved: still the same needs
    assert store.parsed(key).value.spec is needs
    store.put(key, pod("p", "b", cpu="2"))  # a request changed: parsed again
    resized = store.parsed(key).value.spec
    assert resized is not needs and resized.requests["cpu"] == 2000
    # two changes before the next parse: the comparison is with the version parsed last
    store.put(key, pod("p", "a", cpu="2"))
    store.put(key, pod("p", "b", cpu="3"))
    assert store.parsed(key).value.spec.requests["cpu"] == 3000
    # a kept spec gives the pod a parse from scratch gives
    store.put(key, pod("p", "a", cpu="3"))
    assert store.parsed(key).value == parse_object(pod("p", "a", cpu="3")).value


def owned(name: str, node_name: str, cpu: str = "100m", owner: str = "web-7d9f") -> dict[str, Any]:
    doc = pod(name, node_name, cpu)
    doc["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                           "uid": f"uid-{owner}", "controller": True}]
    return doc


def test_a_new_pod_takes_the_parsed_needs_of_a_pod_of_its_controller_when_its_spec_is_the_same() -> None:
    store = SnapshotStore(bundled_catalog=[])
    store.put("Pod/default/web-1", owned("web-1", "a"))
    store.put("Pod/default/web-2", owned("web-2", "b"))  # a replica: the same spec but for nodeName
    store.put("Pod/default/web-3", owned("web-3", "a", cpu="2"))  # the same controller, another spec
    store.put("Pod/default/job-1", owned("job-1", "a", owner="other"))  # the same spec, another controller
    first = store.parsed("Pod/default/web-1").value.spec
    # parsed in any order: the replica's parse parses the first pod of its controller if it was not yet
    assert store.parsed("Pod/default/web-2").value.spec is first
    assert store.parsed("Pod/default/web-3").value.spec.requests["cpu"] == 2000
    assert store.parsed("Pod/default/job-1").value.spec is not first
    # every pod is what a parse from scratch gives
    for key, doc in (("Pod/default/web-2", owned("web-2", "b")), ("Pod/default/web-3", owned("web-3", "a", "2"))):
        assert store.parsed(key).value == parse_object(doc).value
    # the first pod gone, the next one of the controller is the one new pods are compared with
    assert store.remove("Pod/default/web-1")
    store.put("Pod/default/web-4", owned("web-4", "b"))
    store.put("Pod/default/web-5", owned("web-5", "a"))
    fourth = store.parsed("Pod/default/web-4").value.spec
    assert store.parsed("Pod/default/web-5").value.spec is fourth and fourth is not first


def test_a_new_pod_whose_first_sibling_is_invalid_or_gone_is_parsed_on_its_own() -> None:
    import pytest

    from ebb.core.snapshot import SnapshotError

    store = SnapshotStore(bundled_catalog=[])
    store.put("Pod/default/web-1", owned("web-1", "a", cpu="lots"))
    store.put("Pod/default/web-2", owned("web-2", "a"))
    assert store.parsed("Pod/default/web-2").value.spec.requests["cpu"] == 100
    with pytest.raises(SnapshotError, match="Pod default/web-1"):
        store.parsed("Pod/default/web-1")
    store.put("Pod/default/web-3", owned("web-3", "a"))
    store.remove("Pod/default/web-1")  # web-3 was to be compared with it
    assert store.parsed("Pod/default/web-3").value == parse_object(owned("web-3", "a")).value


def test_snapshot_of_parses_only_what_changed_and_an_invalid_object_fails_only_the_snapshots_holding_it() -> None:
    import pytest

    from ebb.core.snapshot import SnapshotError, parse_documents

    store = SnapshotStore(bundled_catalog=[])
    for i in range(4):
        store.put(f"Pod/default/p{i}", pod(f"p{i}", "a"))
    store.put("Node//a", node("a", "m5.large"))
    keys = store.keys()
    first = store.snapshot_of(keys)
    unchanged = {p.name: p for p in first.pods}
    store.put("Pod/default/p2", pod("p2", "a", cpu="2"))
    again = store.snapshot_of(iter(keys))  # any iterable of keys
    assert [p.name for p in again.pods] == ["p0", "p1", "p2", "p3"]
    assert all(p is unchanged[p.name] for p in again.pods if p.name != "p2")  # not parsed again
    assert again == parse_documents(store.objects(), [])
    # an invalid object: every snapshot that holds it says so, again and again; one without it does not
    store.put("Pod/default/p1", pod("p1", "a", cpu="lots"))
    for _ in range(2):
        with pytest.raises(SnapshotError, match="Pod default/p1"):
            store.snapshot_of(keys)
    assert [p.name for p in store.snapshot_of(["Pod/default/p0", "Pod/default/p3"]).pods] == ["p0", "p3"]
    store.put("Pod/default/p1", pod("p1", "a", cpu="1"))
    assert store.snapshot_of(keys) == parse_documents(store.objects(), [])
    with pytest.raises(KeyError):
        store.snapshot_of(["Pod/default/gone"])


def test_a_nameless_invalid_object_is_numbered_by_its_place_among_the_keys_it_was_parsed_with() -> None:
    import pytest

    from ebb.core.snapshot import SnapshotError

    store = SnapshotStore(bundled_catalog=[])
    store.put("Node//a", node("a", "m5.large"))
    nameless = pod("x", "a", cpu="lots")
    del nameless["metadata"]["name"]
    store.put("Pod/default/x", nameless)
    for _ in range(2):  # parsed once, where it is among the keys: the second of two
        with pytest.raises(SnapshotError, match=r"Pod \(document 2\): metadata.name"):
            store.snapshot_of(["Node//a", "Pod/default/x"])


def test_the_keys_stay_sorted_as_objects_come_and_go_after_a_snapshot() -> None:
    """The sorted keys are made once and then kept sorted as keys come and go (an insertion or a deletion, not a
    sort): after every change they are the held keys sorted, and the snapshot holds the same pods in that order."""
    import random

    rng = random.Random(7)
    store = SnapshotStore(bundled_catalog=[])
    held: set[str] = set()
    store.put("Node//a", node("a", "m5.large"))
    held.add("Node//a")
    for step in range(400):
        name, namespace = f"p{rng.randrange(60)}", rng.choice(["default", "batch", "web"])
        key = f"Pod/{namespace}/{name}"
        if key in held and rng.random() < 0.5:
            assert store.remove(key)
            held.discard(key)
        else:
            doc = pod(name, "a", cpu=str(1 + step % 3))
            doc["metadata"]["namespace"] = namespace
            store.put(key, doc)
            held.add(key)
        if step % 7 == 0:
            assert store.keys() == sorted(held)
            assert [f"Pod/{p.namespace}/{p.name}" for p in store.snapshot().pods] == \
                [k for k in sorted(held) if k.startswith("Pod/")]
            # the parsed objects kept in the keys' order, filled in where keys came or changed: a fresh parse
            assert store.snapshot() == parse_documents(store.objects(), [])
    assert store.keys() == sorted(held)
    assert store.snapshot() == parse_documents(store.objects(), [])


def test_an_object_under_a_second_key_with_the_name_of_another_fails_the_snapshot_until_one_goes() -> None:
    """A snapshot of every key held is told free of an object named twice by the store's count of names, not by
    looking (`assemble`'s ``refs_unique``): two keys holding objects of one name fail it as a fresh parse does, a
    name changed away or an object removed makes it whole again (also for every key in another order), and a snapshot
    of some keys still looks."""
    import pytest

    from ebb.core.snapshot import SnapshotError

    store = SnapshotStore(bundled_catalog=[])
    store.put("Node//a", node("a", "m5.large"))
    store.put("Pod/default/p", pod("p", "a"))
    assert len(store.snapshot().pods) == 1
    store.put("Pod/default/q", pod("p", "a"))  # under another key, named p too
    for _ in range(2):
        with pytest.raises(SnapshotError, match="appears twice"):
            store.snapshot()
    with pytest.raises(SnapshotError, match="appears twice"):
        store.snapshot_of(["Pod/default/p", "Pod/default/q"])
    # every key, in another order and told apart as a dict's keys (the simulated cluster's objects): counted too
    in_own_order = dict.fromkeys(["Pod/default/q", "Node//a", "Pod/default/p"])
    with pytest.raises(SnapshotError, match="appears twice"):
        store.snapshot_of(in_own_order)
    with pytest.raises(SnapshotError, match="appears twice"):
        parse_documents(store.objects(), [])
    store.put("Pod/default/q", pod("q", "a"))  # renamed: whole again
    assert [p.name for p in store.snapshot().pods] == ["p", "q"]
    assert [p.name for p in store.snapshot_of(in_own_order).pods] == ["q", "p"]
    store.put("Pod/default/q", pod("p", "a"))
    with pytest.raises(SnapshotError, match="appears twice"):
        store.snapshot()
    assert store.remove("Pod/default/p")
    assert [p.name for p in store.snapshot().pods] == ["p"]
    assert store.snapshot() == parse_documents(store.objects(), [])


def test_a_parse_found_elsewhere_is_taken_and_an_object_without_one_is_parsed_here() -> None:
    """``parsed_elsewhere`` is asked with the key and the object held before any parse: what it gives is the
    parsed object (the same one, not parsed again); None leaves the parse to the store, as without it."""
    asked: list[tuple[str, str]] = []
    elsewhere = parse_object(node("a", "m5.xlarge"))  # told apart from this store's own parse by its type

    def parsed_elsewhere(key: str, obj: Mapping[str, Any]) -> ParsedObject | None:
        asked.append((key, obj["metadata"]["labels"]["node.kubernetes.io/instance-type"]))
        return elsewhere if key == "Node//a" else None

    store = SnapshotStore(bundled_catalog=[], parsed_elsewhere=parsed_elsewhere)
    store.put("Node//a", node("a", "m5.large"))
    store.put("Node//b", node("b", "m5.large"))
    assert store.parsed("Node//a") is elsewhere
    assert store.parsed("Node//b").value.instance_type == "m5.large"
    assert sorted(asked) == [("Node//a", "m5.large"), ("Node//b", "m5.large")]
    assert [n.instance_type for n in store.snapshot().nodes] == ["m5.xlarge", "m5.large"]
    assert len(asked) == 2  # parsed once per change: the snapshot asks nothing again
    store.put("Node//b", node("b", "m5.2xlarge"))
    assert [n.instance_type for n in store.snapshot().nodes] == ["m5.xlarge", "m5.2xlarge"]
    assert asked[-1] == ("Node//b", "m5.2xlarge")


def _tombstone(store: SnapshotStore, kind: str, name: str, namespace: str = "default") -> None:
    store.apply(ClusterObject(kind=kind, namespace=namespace, name=name, resource_version="2", object=None))


def _with(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``doc`` with ``metadata``/``status`` entries changed (a new dict: the store keeps what it is given)."""
    out = {**doc, "metadata": dict(doc["metadata"]), "status": dict(doc["status"])}
    for path, value in changes.items():
        part, name = path.split("__")
        out[part][name] = value
    return out


def test_pod_events_record_when_a_pod_left_a_node_as_karpenters_pod_events_do() -> None:
    clock = [NOW]
    store = SnapshotStore()
    store.keep_pod_events(lambda: clock[0])
    put(store, node("a", "m5.large"))
    put(store, node("b", "m5.large"))
    agent = pod("agent", "a")
    agent["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "controller": True}]
    for doc in (pod("web", "a"), pod("job", "a"), pod("gone", "a"), pod("moved", "b"), pod("pending", ""), agent):
        put_pod(store, doc)
    assert store.snapshot().pod_events == ()  # pods that came are seen in their start times, not here

    def at(minutes: int) -> datetime:
        clock[0] = NOW + timedelta(minutes=minutes)
        return clock[0]

    one = at(1)
    put_pod(store, _with(pod("web", "a"), metadata__deletionTimestamp="2026-11-23T18:31:30Z"))  # terminating
    assert store.snapshot().pod_events == (("a", one),)
    at(2)
    _tombstone(store, "Pod", "web")  # already counted when it went terminating
    put_pod(store, _with(pod("pending", ""), status__phase="Failed"))  # on no node
    _tombstone(store, "Pod", "agent")  # a DaemonSet's
    assert store.snapshot().pod_events == (("a", one),)
    three = at(3)
    put_pod(store, _with(pod("job", "a"), status__phase="Succeeded"))  # terminal
    put_pod(store, pod("job", "a") | {"status": {"phase": "Succeeded"}})  # still terminal: no new event
    assert store.snapshot().pod_events == (("a", three),)
    four = at(4)
    _tombstone(store, "Pod", "gone")  # deleted at once, as the simulated cluster deletes
    put_pod(store, pod("moved", "a"))  # bound again elsewhere: it left b
    assert store.snapshot().pod_events == (("a", four), ("b", four))
    _tombstone(store, "Node", "b", namespace="")
    assert store.snapshot().pod_events == (("a", four),)
    view = ClusterView.build(store.snapshot(), four + timedelta(seconds=30))
    assert view.last_pod_event(view.nodes["a"]) == four

    quiet = SnapshotStore()  # without a clock: none kept (ebb plan's and kube-scheduler's snapshots)
    put(quiet, node("a", "m5.large"))
    put_pod(quiet, pod("web", "a"))
    _tombstone(quiet, "Pod", "web")
    assert quiet.snapshot().pod_events == ()
