"""The watch loop (ebb.adapters.kube.watch) on a scripted fake API (a fake watch event stream), with the
service's publisher on the InMemoryBus and the snapshot rebuilt by ebb.adapters.snapshot_store:
list → watch from the list's resourceVersion with bookmarks → 410 Gone → relist with tombstones for
what vanished; backoff on errors; a missing CRD does not hold up the other kinds; graceful stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

from ebb.adapters.bus import BusError, Delivery, InMemoryBus
from ebb.adapters.kube import KINDS, Backoff, Change, KindSpec, KindState, KubeWatcher, split_lines
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, Message, from_kafka
from ebb_cluster_watcher.metrics import Metrics
from ebb_cluster_watcher.publisher import Publisher, to_message
from ebb_cluster_watcher.settings import Settings
from tests.kit.waiting import eventually

FAST = Backoff(initial=0.01, maximum=0.02)


class FakeContent:
    def __init__(self, chunks: list[bytes], hang: bool) -> None:
        self.chunks = chunks
        self.hang = hang

    async def readany(self) -> bytes:
        await asyncio.sleep(0)
        if self.chunks:
            return self.chunks.pop(0)
        if self.hang:
            await asyncio.Event().wait()
        return b""


class FakeResponse:
    def __init__(self, status: int = 200, body: Any = None, chunks: list[bytes] | None = None,
                 hang: bool = False) -> None:
        self.status = status
        self.body = json.dumps(body).encode() if body is not None else b""
        self.content = FakeContent(list(chunks or []), hang)
        self.released = False

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        self.released = True

    def close(self) -> None:
        self.released = True


def events(*items: tuple[str, dict[str, Any]], split: int = 7) -> list[bytes]:
    """A watch stream: one JSON event per line, cut in arbitrary chunks."""
    data = b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in items)
    return [data[i:i + split] for i in range(0, len(data), split)]


def page(rv: str, *items: dict[str, Any], cont: str | None = None) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv, **({"continue": cont} if cont else {})}, "items": list(items)}


def obj(name: str, rv: str, namespace: str | None = "default", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "spec": {"containers": [], **spec}, "status": {"phase": "Running"}}


class FakeApi:
    """Scripted answers per kind, in call order; the calls' keyword arguments are recorded."""

    def __init__(self, script: dict[str, list[FakeResponse]]) -> None:
        self.script = script
        self.calls: dict[str, list[dict[str, Any]]] = {k: [] for k in script}

    def lister(self, spec: KindSpec) -> Callable[..., Awaitable[Any]]:
        async def call(**kwargs: Any) -> FakeResponse:
            self.calls[spec.kind].append(kwargs)
            answers = self.script[spec.kind]
            if not answers:
                await asyncio.Event().wait()
            return answers.pop(0)

        return call


async def run_watcher(api: FakeApi, kinds: list[KindSpec], condition: Callable[[InMemoryBus, SnapshotStore], bool],
                      **options: Any) -> tuple[InMemoryBus, SnapshotStore, KubeWatcher]:
    bus = InMemoryBus()
    store = SnapshotStore(bundled_catalog=[])
    watcher = KubeWatcher(None, kinds, Publisher(bus), lister=api.lister, backoff=FAST, **options)
    stop = asyncio.Event()
    consumer_stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    consumer = asyncio.create_task(bus.consume([TOPIC_CLUSTER_OBJECTS], "store", store.handle, stop=consumer_stop))
    try:
        await eventually("the condition of the run", lambda: condition(bus, store), 5, interval=0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, 2)  # graceful: even a watch blocked on a read ends
        await eventually("the store caught up", lambda: bus.lag("store", TOPIC_CLUSTER_OBJECTS) == 0, 5,
                         interval=0.01)
        consumer_stop.set()
        await asyncio.wait_for(consumer, 2)
    return bus, store, watcher


def decoded(bus: InMemoryBus) -> list[ClusterObject]:
    out = []
    for r in sorted(bus.records(TOPIC_CLUSTER_OBJECTS), key=lambda r: (r.partition, r.offset)):
        message = from_kafka(r.topic, r.key, r.value, r.headers)
        assert isinstance(message, ClusterObject)
        out.append(message)
    return out


async def test_list_watch_gone_relist_publishes_tombstones_for_the_vanished() -> None:
    api = FakeApi({"Pod": [
        # list, two pages
        FakeResponse(body=page("100", obj("a", "90"), cont="tok")),
        FakeResponse(body=page("100", obj("b", "95"))),
        # watch from 100: c added, a modified, a bookmark, then the server ends the stream
        FakeResponse(chunks=events(("ADDED", obj("c", "101")), ("MODIFIED", obj("a", "102", nodeName="n1")),
                                   ("BOOKMARK", {"metadata": {"resourceVersion": "150"}}))),
        # watch again from the bookmark: 410 Gone as an ERROR event
        FakeResponse(chunks=events(("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                                              "message": "too old resource version: 150 (160)"}))),
        # relist: b was deleted meanwhile, c unchanged, d new
        FakeResponse(body=page("200", obj("a", "102", nodeName="n1"), obj("c", "101"), obj("d", "180"))),
        # watch from 200: d deleted; then the stream stays open
        FakeResponse(chunks=events(("DELETED", obj("d", "201"))), hang=True),
    ]})

    def done(bus: InMemoryBus, store: SnapshotStore) -> bool:
        return sum(1 for m in decoded(bus) if m.name == "d" and m.deleted) == 1

    bus, store, watcher = await run_watcher(api, [KINDS["Pod"]], done)
    calls = api.calls["Pod"]
    assert calls[0]["limit"] == 500 and "_continue" not in calls[0]
    assert calls[1]["_continue"] == "tok"
    assert calls[2]["watch"] is True and calls[2]["resource_version"] == "100"
    assert calls[2]["allow_watch_bookmarks"] is True and calls[2]["timeout_seconds"] == 300
    assert calls[3]["resource_version"] == "150"  # resumed from the bookmark
    assert "watch" not in calls[4]  # 410 → relist
    assert calls[5]["resource_version"] == "200"
    assert all(c["_preload_content"] is False for c in calls)

    # compacted topic: the latest per key; the full history is what was published
    keys = {m.key(): m for m in decoded(bus)}
    assert keys["Pod/default/b"].deleted  # vanished between the lists → tombstone
    assert keys["Pod/default/d"].deleted
    assert not keys["Pod/default/a"].deleted and keys["Pod/default/a"].resource_version == "102"
    assert store.keys() == ["Pod/default/a", "Pod/default/c"]
    snapshot = store.snapshot()
    assert {(p.name, p.node_name) for p in snapshot.pods} == {("a", "n1"), ("c", None)}
    assert watcher.states["Pod"].resource_version == "201"


async def test_errors_back_off_and_resume_from_the_last_resource_version() -> None:
    api = FakeApi({"Node": [
        FakeResponse(status=500, body={"message": "etcd unavailable"}),
        FakeResponse(body=page("10", obj("n1", "9", namespace=None))),
        FakeResponse(status=503, body={"message": "shutting down"}),
        FakeResponse(chunks=events(("ADDED", obj("n2", "11", namespace=None))), hang=True),
    ]})

    def done(bus: InMemoryBus, store: SnapshotStore) -> bool:
        return "Node//n2" in store

    seen: list[dict[str, str]] = []
    _, store, watcher = await run_watcher(api, [KINDS["Node"]], done, on_failing=lambda f: seen.append(dict(f)))
    calls = api.calls["Node"]
    assert [c.get("watch", False) for c in calls] == [False, False, True, True]
    # the kind is failing (what is published of it may be stale) from each error until the apiserver answers
    assert [sorted(f) for f in seen] == [["Node"], [], ["Node"], []] and watcher.failing == {}
    assert "list/watch failed 1 times, the last with WatchError('HTTP 500: etcd unavailable')" in seen[0]["Node"]
    assert calls[3]["resource_version"] == "10"  # a failed watch resumes; no relist
    assert store.keys() == ["Node//n1", "Node//n2"]
    assert store.get("Node", "", "n1") == {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": "n1", "resourceVersion": "9"},
                                           "spec": {"containers": []}}  # a Node keeps no pod status
    assert watcher.synced["Node"].is_set()


async def test_the_metrics_count_what_is_published_and_which_kinds_fail() -> None:
    metrics = Metrics(["Node", "Pod"])
    api = FakeApi({"Node": [
        FakeResponse(status=500, body={"message": "etcd unavailable"}),
        FakeResponse(status=503, body={"message": "shutting down"}),
        FakeResponse(body=page("10", obj("n1", "9", namespace=None), obj("n2", "9", namespace=None))),
        FakeResponse(chunks=events(("DELETED", obj("n2", "11", namespace=None))), hang=True),
    ]})
    bus = InMemoryBus()
    failing_seen: list[float] = []

    def on_failing(failing: Mapping[str, str]) -> None:
        metrics.kinds_failing(failing)
        failing_seen.append(value(metrics, "ebb_cluster_watcher_kind_failing", kind="Node"))

    watcher = KubeWatcher(None, [KINDS["Node"]], Publisher(bus, metrics=metrics), lister=api.lister, backoff=FAST,
                          on_failing=on_failing)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    await eventually("the delete published", lambda: value(metrics, "ebb_cluster_watcher_changes_published_total",
                                                         kind="Node", change="delete") == 1, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert value(metrics, "ebb_cluster_watcher_changes_published_total", kind="Node", change="upsert") == 2
    assert value(metrics, "ebb_cluster_watcher_list_watch_failures_total", kind="Node") == 2
    assert failing_seen == [1, 1, 0]
    assert value(metrics, "ebb_cluster_watcher_kind_failing", kind="Pod") == 0  # every kind has its series


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_a_kind_whose_crd_is_missing_once_the_apiserver_answers_again_is_not_failing() -> None:
    """An apiserver restart fails every kind's watch; a custom kind without its CRD then gets a 404, which is
    no failure: the cluster-watcher must not stay not-ready for it (seen in the chaos run)."""
    api = FakeApi({"NodeClaim": [FakeResponse(status=503, body={"message": "shutting down"}),
                                 FakeResponse(status=404, body={"message": "the server could not find it"})]})
    seen: list[dict[str, str]] = []
    await run_watcher(api, [KINDS["NodeClaim"]], lambda _bus, _store: len(api.calls["NodeClaim"]) >= 2,
                      missing_kind_retry=60, on_failing=lambda f: seen.append(dict(f)))
    assert [sorted(f) for f in seen] == [["NodeClaim"], []]


async def test_missing_crd_is_retried_without_holding_up_the_other_kinds() -> None:
    api = FakeApi({
        "NodeClaim": [
            FakeResponse(status=404, body={"message": "the server could not find the requested resource"}),
            FakeResponse(status=404, body={"message": "the server could not find the requested resource"}),
            FakeResponse(body=page("5", {"metadata": {"name": "claim-1", "resourceVersion": "4"},
                                         "status": {"nodeName": "n1", "imageID": "ami"}})),
        ],
        "Node": [
            FakeResponse(body=page("7", obj("n1", "6", namespace=None))),
        ],
    })

    def done(bus: InMemoryBus, store: SnapshotStore) -> bool:
        return "NodeClaim//claim-1" in store

    _, store, watcher = await run_watcher(api, [KINDS["NodeClaim"], KINDS["Node"]], done, missing_kind_retry=0.05)
    assert len(api.calls["NodeClaim"]) >= 3
    claim = store.get("NodeClaim", "", "claim-1")
    assert claim is not None and claim["apiVersion"] == "karpenter.sh/v1"
    assert claim["status"] == {"nodeName": "n1"}
    assert watcher.synced["Node"].is_set() and watcher.synced["NodeClaim"].is_set()


async def test_disruption_policies_are_watched_and_a_cluster_without_their_crd_still_plans() -> None:
    """ebb.sh/v1 DisruptionPolicy is a custom kind like Karpenter's: while its CRD is missing (404) the NodePool
    is published and planned on its own spec.disruption; once the CRD is there the policy governs the pool."""
    missing = {"message": "the server could not find the requested resource"}
    pool = {"metadata": {"name": "default", "resourceVersion": "3"},
            "spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}
    policy = {"metadata": {"name": "default", "resourceVersion": "8"}, "spec": {"budgets": [{"nodes": "2"}]}}
    api = FakeApi({
        "DisruptionPolicy": [FakeResponse(status=404, body=missing), FakeResponse(status=404, body=missing),
                             FakeResponse(body=page("9", policy))],
        "NodePool": [FakeResponse(body=page("4", pool))],
    })
    pool_kinds: list[str] = []

    def done(bus: InMemoryBus, store: SnapshotStore) -> bool:
        if "NodePool//default" not in store:
            return False
        pool_kinds.append(store.snapshot().nodepools[0].policy_kind)
        return "DisruptionPolicy//default" in store

    _, store, watcher = await run_watcher(api, [KINDS["DisruptionPolicy"], KINDS["NodePool"]], done,
                                          missing_kind_retry=0.05)
    assert len(api.calls["DisruptionPolicy"]) >= 3
    assert pool_kinds[0] == "NodePool"  # planned without the CRD, on the NodePool's own block
    stored = store.get("DisruptionPolicy", "", "default")
    assert stored is not None and stored["apiVersion"] == "ebb.sh/v1"
    (governed,) = store.snapshot().nodepools
    assert (governed.policy_source, governed.budgets[0].nodes) == ("DisruptionPolicy default", "2")
    assert watcher.synced["DisruptionPolicy"].is_set()


async def test_stop_ends_a_watch_blocked_on_a_list_call() -> None:
    api = FakeApi({"Pod": []})  # the list never answers
    bus = InMemoryBus()
    watcher = KubeWatcher(None, [KINDS["Pod"]], Publisher(bus), lister=api.lister, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    await eventually("one list of pods", lambda: len(api.calls["Pod"]) == 1, 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert bus.records(TOPIC_CLUSTER_OBJECTS) == []


def test_backoff_is_exponential_capped_and_jittered() -> None:
    backoff = Backoff(initial=1, multiplier=2, maximum=10, jitter=0.5)
    assert [backoff.delay(n, rng=lambda: 0.0) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 10, 10]
    assert backoff.delay(3, rng=lambda: 1.0) == 2.0
    assert all(2.0 <= backoff.delay(3) <= 4.0 for _ in range(100))


def test_split_lines_keeps_the_incomplete_rest() -> None:
    lines, rest = split_lines(b'{"a"', b':1}\n\n{"b":2}\n{"c"')
    assert lines == [b'{"a":1}', b'{"b":2}'] and rest == b'{"c"'


async def test_publisher_sends_upserts_and_tombstones_keyed_kind_namespace_name() -> None:
    bus = InMemoryBus()
    publisher = Publisher(bus)
    trimmed = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    await publisher([Change("Pod", "ns", "p", "7", trimmed)])
    await publisher([Change("Pod", "ns", "p", "8", None), Change("Pod", "ns", "bad/name", "9", trimmed)])
    # the second batch: the tombstone is published, the name that breaks the contract skipped
    assert (publisher.published, publisher.tombstones, publisher.rejected) == (2, 1, 1)
    records = bus.records(TOPIC_CLUSTER_OBJECTS)
    assert [r.key for r in records] == [b"Pod/ns/p"]  # compacted: the tombstone superseded the upsert
    (tombstone,) = records
    assert tombstone.value is None
    headers = dict(tombstone.headers)
    assert headers["ce_type"] == b"sh.ebb.object.deleted.v1" and headers["ce_resourceversion"] == b"8"
    assert to_message(Change("Node", "", "n", "1", {"kind": "Node"})).key() == "Node//n"


async def test_store_applies_upserts_and_tombstones() -> None:
    store = SnapshotStore(bundled_catalog=[])
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
    upsert = ClusterObject(kind="Node", namespace="", name="n", resource_version="1", object=node)
    assert store.apply(upsert) and not store.apply(upsert)  # the same object twice: no change
    assert [n.name for n in store.snapshot().nodes] == ["n"]
    delivery = Delivery(topic=TOPIC_CLUSTER_OBJECTS, partition=0, offset=1, key="Node//n",
                        message=ClusterObject(kind="Node", namespace="", name="n", resource_version="2", object=None),
                        type="sh.ebb.object.deleted.v1", source="/t", time=None)
    await store.handle(delivery)
    assert len(store) == 0 and store.snapshot().nodes == ()
    assert store.version == 2


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EBB_CLUSTER_WATCHER_KINDS", "node, Pod,nodeclaim")
    monkeypatch.setenv("EBB_CLUSTER_WATCHER_KUBECONFIG", "/tmp/kubeconfig")
    monkeypatch.setenv("EBB_CLUSTER_WATCHER_KAFKA_BOOTSTRAP", "kafka:9092")
    settings = Settings()
    assert settings.kinds == ("Node", "Pod", "NodeClaim")
    assert (settings.kubeconfig, settings.kafka_bootstrap) == ("/tmp/kubeconfig", "kafka:9092")
    with pytest.raises(ValueError, match="at least one kind"):
        Settings(kinds=())
    monkeypatch.setenv("EBB_CLUSTER_WATCHER_KINDS", "Deployment")
    with pytest.raises(ValueError, match="Deployment"):
        Settings()
    monkeypatch.delenv("EBB_CLUSTER_WATCHER_KINDS")
    assert Settings().kinds == tuple(KINDS)


async def test_restart_seeds_from_the_topic_tombstones_the_vanished_and_skips_the_unchanged() -> None:
    from ebb_cluster_watcher.app import seed_from_topic

    bus = InMemoryBus()
    first_run = Publisher(bus)
    await first_run(KindState(KINDS["Pod"]).relist([obj("a", "1"), obj("gone", "2")]))
    assert len(bus.records(TOPIC_CLUSTER_OBJECTS)) == 2
    # the restarted watcher lists a (unchanged) and c (new); "gone" was deleted while it was down
    api = FakeApi({"Pod": [FakeResponse(body=page("10", obj("a", "1"), obj("c", "3")))]})
    watcher = KubeWatcher(None, [KINDS["Pod"]], Publisher(bus), lister=api.lister, backoff=FAST)
    assert await seed_from_topic(watcher, bus) == 2
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    await asyncio.wait_for(watcher.synced["Pod"].wait(), 2)
    stop.set()
    await asyncio.wait_for(task, 2)
    latest = {m.key(): m for m in decoded(bus)}
    assert latest["Pod/default/gone"].deleted
    assert not latest["Pod/default/c"].deleted
    assert sum(1 for r in bus.records(TOPIC_CLUSTER_OBJECTS) if r.key == b"Pod/default/a") == 1  # not republished



# -- batches: the watch events of one read are published together, several records in flight ----------------------


class RecordingBus(InMemoryBus):
    """Records each ``publish_many`` batch; ``gate`` (when set up) holds every batch until it is opened, as an
    acknowledgement still on its way; ``fail_after`` writes that many records of the next batch, then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[ClusterObject]] = []
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()
        self.fail_after: int | None = None

    async def publish_many(self, topic: str, messages: Sequence[Message]) -> None:
        self.batches.append([m for m in messages if isinstance(m, ClusterObject)])
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        if self.fail_after is not None:
            written, self.fail_after = self.fail_after, None
            await super().publish_many(topic, messages[:written])
            raise BusError("the broker went away mid-batch")
        await super().publish_many(topic, messages)


def one_chunk(*items: tuple[str, dict[str, Any]]) -> list[bytes]:
    return events(*items, split=1 << 20)


async def test_a_chunk_is_one_batch_in_order_with_a_change_and_its_undoing_both_published() -> None:
    stream = one_chunk(("ADDED", obj("a", "2", image="x")), ("MODIFIED", obj("a", "3", image="y")),
                       ("MODIFIED", obj("a", "4", image="x")), ("ADDED", obj("b", "5")),
                       ("MODIFIED", obj("b", "6")), ("DELETED", obj("a", "7")))  # b's rv-only change: skipped
    api = FakeApi({"Pod": [FakeResponse(body=page("1")), FakeResponse(chunks=stream, hang=True)]})
    bus = RecordingBus()
    watcher = KubeWatcher(None, [KINDS["Pod"]], Publisher(bus), lister=api.lister, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    state = watcher.states["Pod"]
    await eventually("resourceVersion 7", lambda: state.resource_version == "7", 5, interval=0.01)
    stop.set()
    await asyncio.wait_for(task, 2)
    (batch,) = bus.batches  # the empty list published nothing; the chunk is one batch
    assert [(m.name, m.resource_version, m.deleted) for m in batch] == [
        ("a", "2", False), ("a", "3", False), ("a", "4", False), ("b", "5", False), ("a", "7", True)]
    assert [m.object["spec"].get("image") for m in batch[:3] if m.object] == ["x", "y", "x"]
    assert set(state.published) == {("default", "b")}
    a_partitions = {r.partition for r in bus.records(TOPIC_CLUSTER_OBJECTS) if r.key == b"Pod/default/a"}
    assert len(a_partitions) == 1 and {m.key(): m for m in decoded(bus)}["Pod/default/a"].deleted


async def test_nothing_is_recorded_as_published_before_the_bus_acknowledged_the_batch() -> None:
    stream = one_chunk(("ADDED", obj("a", "2")), ("ADDED", obj("b", "3")))
    api = FakeApi({"Pod": [FakeResponse(body=page("1")), FakeResponse(chunks=stream, hang=True)]})
    bus = RecordingBus()
    bus.gate = asyncio.Event()
    publisher = Publisher(bus)
    watcher = KubeWatcher(None, [KINDS["Pod"]], publisher, lister=api.lister, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    state = watcher.states["Pod"]
    try:
        await asyncio.wait_for(bus.waiting.wait(), 2)
        await asyncio.sleep(0.05)
        # in flight: neither the digests nor the resourceVersion moved, nor the publisher's count
        assert (state.published, state.resource_version, publisher.published) == ({}, "1", 0)
        bus.gate.set()
        await eventually("resourceVersion 3", lambda: state.resource_version == "3", 5, interval=0.01)
        assert set(state.published) == {("default", "a"), ("default", "b")} and publisher.published == 2
    finally:
        stop.set()
        await asyncio.wait_for(task, 2)


async def test_a_batch_that_fails_midway_is_watched_and_published_again_from_before_it() -> None:
    stream = [("ADDED", obj("a", "2")), ("ADDED", obj("b", "3")), ("ADDED", obj("c", "4"))]
    api = FakeApi({"Pod": [FakeResponse(body=page("1")), FakeResponse(chunks=one_chunk(*stream), hang=True),
                           FakeResponse(chunks=one_chunk(*stream), hang=True)]})
    bus = RecordingBus()
    bus.fail_after = 1  # "a" is written, then the batch fails
    watcher = KubeWatcher(None, [KINDS["Pod"]], Publisher(bus), lister=api.lister, backoff=FAST)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    state = watcher.states["Pod"]
    try:
        await eventually("resourceVersion 4", lambda: state.resource_version == "4", 5, interval=0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, 2)
    assert [call.get("resource_version") for call in api.calls["Pod"]] == [None, "1", "1"]  # watched again from 1
    assert [[m.name for m in batch] for batch in bus.batches] == [["a", "b", "c"], ["a", "b", "c"]]
    assert set(state.published) == {("default", "a"), ("default", "b"), ("default", "c")}
    assert sorted(m.name for m in decoded(bus)) == ["a", "b", "c"]  # "a" twice on the wire, compacted to one


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{"n":1,"f":0.5,"s":"\\u00fc"}}}',
     {"type": "ADDED", "object": {"metadata": {"name": "a"}, "spec": {"n": 1, "f": 0.5, "s": "ü"}}}),
    # not JSON (the API server never sends it) but the stdlib's: orjson refuses, the stdlib decodes it
    (b'{"type":"ADDED","object":{"spec":{"f":Infinity}}}', {"type": "ADDED", "object": {"spec": {"f": float("inf")}}}),
])
def test_a_watch_line_decodes_as_the_stdlib_decodes_it(line: bytes, expected: dict[str, Any]) -> None:
    from ebb.adapters.kube.watch import decode_json

    assert decode_json(line) == expected == json.loads(line)


def test_a_malformed_watch_line_raises_as_the_stdlib() -> None:
    from ebb.adapters.kube.watch import decode_json

    with pytest.raises(ValueError):
        decode_json(b'{"type":"ADDED",')


async def test_each_kind_is_said_synced_once_its_first_list_is_published_or_it_is_not_served() -> None:
    """A planner plans only once every watched kind is synced (Karpenter's cluster state sync): the watcher publishes
    `KindSynced` of a kind after its first list's objects are acknowledged, and of a kind the apiserver does not
    serve (it has no objects), once per run, naming every kind it watches."""
    from ebb.contracts import KindSynced
    from ebb_cluster_watcher.app import build_watcher

    class OrderedBus(InMemoryBus):
        """Keeps the keys in the order they were published (the records' order across partitions)."""

        def __init__(self) -> None:
            super().__init__()
            self.keys: list[str] = []

        async def publish_many(self, topic: str, messages: Sequence[Message]) -> None:
            await super().publish_many(topic, messages)
            self.keys.extend(m.key() for m in messages)

    api = FakeApi({
        "NodeClaim": [FakeResponse(status=404, body={"message": "the server could not find the requested resource"})],
        "Node": [FakeResponse(body=page("7", obj("n1", "6", namespace=None)))],
    })
    bus = OrderedBus()
    watcher, _ = build_watcher(Settings(kinds=("Node", "NodeClaim"), missing_kind_retry_seconds=0.05), None, bus)
    watcher.lister = api.lister
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        await eventually("both kinds said synced", lambda: sum(k.startswith("KindSynced//") for k in bus.keys) == 2,
                         5, interval=0.01)
        await asyncio.sleep(0.2)  # the missing kind tried again: said synced once all the same
    finally:
        stop.set()
        await asyncio.wait_for(task, 2)
    messages = [from_kafka(r.topic, r.key, r.value, r.headers) for r in bus.records(TOPIC_CLUSTER_OBJECTS)]
    synced = sorted((m.kind, m.watched) for m in messages if isinstance(m, KindSynced))
    assert synced == [("Node", ("Node", "NodeClaim")), ("NodeClaim", ("Node", "NodeClaim"))]
    assert bus.keys.index("Node//n1") < bus.keys.index("KindSynced//Node")
    assert len(api.calls["NodeClaim"]) >= 2
    # a kind not served is said synced (it has no objects) but not listed: the watcher's own `synced` waits for a list
    assert watcher.synced["Node"].is_set() and not watcher.synced["NodeClaim"].is_set()


async def test_a_kind_no_longer_served_has_its_objects_tombstoned() -> None:
    """A Hold published, then its CRD removed (the watch ends, the relist is a 404): a delete missed meanwhile would
    have kept the Hold in every view for ever; the watcher now tombstones what it published of a kind not served."""
    missing = {"message": "the server could not find the requested resource"}
    hold = {"metadata": {"name": "freeze", "resourceVersion": "2"}, "spec": {"nodePool": "default"}}
    api = FakeApi({"Hold": [FakeResponse(body=page("3", hold)), FakeResponse(status=410, body={"message": "gone"}),
                            FakeResponse(status=404, body=missing)]})

    def tombstoned(bus: InMemoryBus, store: SnapshotStore) -> bool:  # the topic keeps a key's last record
        return [(m.key(), m.deleted) for m in decoded(bus)] == [("Hold//freeze", True)]

    _, store, _ = await run_watcher(api, [KINDS["Hold"]], tombstoned, missing_kind_retry=0.05)
    assert len(api.calls["Hold"]) >= 3  # listed (published), watched (410), listed again (404)
    assert "Hold//freeze" not in store


async def test_a_kind_synced_marker_that_failed_to_publish_is_published_again() -> None:
    """The first list published, then its `KindSynced` fails to go out (Kafka away a moment): the retry goes on to
    watch, and says the kind synced first; otherwise every planner would wait until the next relist."""
    api = FakeApi({"Node": [FakeResponse(body=page("7", obj("n1", "6", namespace=None)))]})
    told: list[str] = []

    async def flaky(kind: str) -> None:
        told.append(kind)
        if len(told) == 1:
            raise ConnectionError("the broker did not answer")

    bus = InMemoryBus()
    watcher = KubeWatcher(None, [KINDS["Node"]], Publisher(bus), lister=api.lister, backoff=FAST, on_synced=flaky)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        await eventually("the kind said synced", watcher.synced["Node"].is_set, 5, interval=0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, 2)
    assert told == ["Node", "Node"]
    assert len(api.calls["Node"]) == 2  # listed once, then watching: not listed again
