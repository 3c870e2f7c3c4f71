"""The termination-executor with the ``karpenter`` provider, on the InMemoryBus, SQLite, the fake API server
of tests/kit/executor.py and a fake Karpenter (tests/kit/karpenter_fakes.py): a replacement is a NodeClaim launched and
Initialized before anything is drained; a node is retired by deleting its NodeClaim and waiting until Karpenter
removed it and its Node; ebb's own ``ebb.sh/disrupted`` taint. Every write to a Node is audited: in this mode
none adds or removes a ``karpenter.sh/`` taint or finalizer, and no Node is deleted by ebb."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.catalog import bundled_catalog
from ebb.adapters.clock import ManualClock, Stopped
from ebb.adapters.kube.drain import Drainer
from ebb.adapters.kube.karpenter import KarpenterProvider, no_claim
from ebb.adapters.kube.launch import catalog_types
from ebb.adapters.kube.node_api import KubeError
from ebb.adapters.kube.node_provider import DISRUPTED_TAINT
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import TOPIC_DISRUPTION_EVENTS, DisruptionCommand, from_kafka
from ebb.core.launch import allocatable_of, replacement_name
from ebb_termination_executor.app import build_executor
from ebb_termination_executor.executor import Executor
from ebb_termination_executor.settings import Settings
from tests.kit.executor import NOW, FakeApi, pod, sent
from tests.kit.karpenter_fakes import AuditedNodeApi, FakeKarpenter

CATALOG = catalog_types(bundled_catalog())
EBB_TAINT = {"key": "ebb.sh/disrupted", "effect": "NoSchedule"}
POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
    "metadata": {"name": "default", "uid": "pool-uid",
                 "annotations": {"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3"}},
    "spec": {"template": {
        "metadata": {"labels": {"team": "web"}},
        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                 "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                  {"key": "karpenter.sh/capacity-type", "operator": "In",
                                   "values": ["on-demand", "spot"]}],
                 "expireAfter": "Never"}}},
}


def command(*nodes: str, decision_id: str = "dec-k1", replace: bool = False,
            method: str = "single-node-consolidation", reason: str = "Underutilized") -> DisruptionCommand:
    return DisruptionCommand.model_validate({
        "decision_id": decision_id, "node_pool": "default", "method": method, "reason": reason,
        "action": "replace" if replace else "delete", "nodes": nodes,
        "replacements": [{"node_pool": "default", "instance_types": ["t3.medium", "c5.large"],
                          "capacity_type": "on-demand", "zones": ["us-east-1b"], "price": 0.0416}] if replace else [],
        "savings_per_hour": 0.3, "explanation": "its pods fit on a cheaper node", "approved_at": NOW})


class Cluster:
    """A fake API server with Karpenter, and an executor with the karpenter provider on it."""

    def __init__(self, *, boot_reads: int = 2, terminate_reads: int = 2) -> None:
        self.api = FakeApi(ManualClock(NOW))
        self.karpenter = FakeKarpenter(self.api, boot_reads=boot_reads, terminate_reads=terminate_reads)
        self.karpenter.nodepools["default"] = POOL
        self.nodes = AuditedNodeApi(self.api)
        self.bus = InMemoryBus()
        self.stop = asyncio.Event()

    def executor(self, store: DecisionStore, **settings: Any) -> Executor:
        """A fresh executor (a restarted process: the provider remembers nothing)."""
        config = Settings(poll_interval_seconds=0.25, eviction_backoff_initial_seconds=0.5,
                          eviction_backoff_max_seconds=1.0, failure_hold_seconds=0, **settings)
        provider = KarpenterProvider(self.nodes, self.karpenter, CATALOG)
        self.store = store
        return build_executor(config, self.nodes, self.bus, store, self.stop, clock=ManualClock(NOW),
                              provider=provider)

    async def events(self) -> list[tuple[str, str, str]]:
        """What the executors sent (``tests.service.test_executor.sent``)."""
        return await sent(self.store, self.bus)

    def assert_nothing_karpenter_was_written(self) -> None:
        assert self.nodes.karpenter_writes() == []
        assert self.nodes.taints_written() <= {"ebb.sh/disrupted"}


def old_node(cluster: Cluster) -> None:
    """``old``: a node Karpenter launched (NodeClaim ``old-claim``) with two pods."""
    cluster.karpenter.add_claim("old-claim", "old")
    cluster.api.add_pods(pod("web-0", "old"), pod("web-1", "old"))


async def test_a_replacement_is_a_nodeclaim_initialized_before_the_old_one_is_drained_and_deleted(
        store: DecisionStore) -> None:
    cluster = Cluster()
    old_node(cluster)
    assert await cluster.executor(store).execute(command("old", replace=True)) == "succeeded"
    assert await store.state("dec-k1") == "succeeded"

    name = replacement_name("dec-k1", 0, "default")
    claim = cluster.karpenter.claims[name]
    meta, spec = claim["metadata"], claim["spec"]
    assert meta["labels"] == {"team": "web", "karpenter.sh/nodepool": "default",
                              "karpenter.kwok.sh/kwoknodeclass": "default"}
    assert meta["annotations"] == {"karpenter.sh/nodepool-hash": "h1", "karpenter.sh/nodepool-hash-version": "v3",
                                   "ebb.sh/decision-id": "dec-k1"}
    assert meta["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default",
                                        "uid": "pool-uid"}]
    assert spec["nodeClassRef"] == POOL["spec"]["template"]["spec"]["nodeClassRef"]
    assert spec["expireAfter"] == "Never"
    assert spec["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t3.medium", "c5.large"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]},
    ]
    assert spec["resources"] == {"requests": allocatable_of(CATALOG["t3.medium"])}

    # the old NodeClaim deleted, and Karpenter removed it and its Node; the replacement's Node is there
    assert "old-claim" not in cluster.karpenter.claims and "old" not in cluster.api.nodes
    assert f"{name}-node" in cluster.api.nodes
    assert cluster.karpenter.calls == [("create", name), ("delete", "old-claim")]
    assert not any(p["spec"]["nodeName"] == "old" for p in cluster.api.pods.values())

    events = (await cluster.events())
    assert [phase for node, phase, _ in events] == ["Tainted", "Launching", "WaitingReadiness", "Evicted",
                                                    "Terminated"]
    assert all(node == "old" for node, _, _ in events)
    messages = {phase: message for _, phase, message in events}
    assert messages["Tainted"] == "tainted ebb.sh/disrupted:NoSchedule"
    assert messages["Launching"] == (f"launching {name}: NodeClaim of t3.medium, c5.large (on-demand) in us-east-1b; "
                                     f"t3.medium at $0.0416/h")
    assert messages["Terminated"] == "NodeClaim old-claim deleted: node and instance gone"
    # ebb's only Node writes: its own taint
    assert [w.verb for w in cluster.nodes.writes] == ["patch"]
    cluster.assert_nothing_karpenter_was_written()
    assert cluster.nodes.taints_written() == {"ebb.sh/disrupted"}


async def test_a_command_resumed_after_a_crash_creates_no_second_nodeclaim(store: DecisionStore) -> None:
    cluster = Cluster(boot_reads=3)
    old_node(cluster)
    cluster.karpenter.after_create = cluster.stop.set  # the process stops right after creating the NodeClaim
    with pytest.raises(Stopped):
        await cluster.executor(store).execute(command("old", replace=True))
    assert await store.state("dec-k1") == "executing"

    cluster.stop.clear()
    cluster.karpenter.after_create = None
    assert await cluster.executor(store).execute(command("old", replace=True)) == "succeeded"
    name = replacement_name("dec-k1", 0, "default")
    assert cluster.karpenter.created() == [name, name]  # asked twice, answered 409 the second time
    ours = [c for c in cluster.karpenter.claims.values()
            if c["metadata"].get("annotations", {}).get("ebb.sh/decision-id") == "dec-k1"]
    assert [c["metadata"]["name"] for c in ours] == [name]
    cluster.assert_nothing_karpenter_was_written()


async def test_a_nodeclaim_of_another_decision_under_the_same_name_fails_the_launch(store: DecisionStore) -> None:
    cluster = Cluster()
    old_node(cluster)
    name = replacement_name("dec-k1", 0, "default")
    cluster.karpenter.claims[name] = {"metadata": {"name": name, "annotations": {"ebb.sh/decision-id": "other"}}}
    assert await cluster.executor(store).execute(command("old", replace=True)) == "rolled_back"
    failed = [message for _, phase, message in (await cluster.events()) if phase == "Failed"]
    assert failed == [f"replacement launch failed: NodeClaim {name} exists and was not created for decision dec-k1"]


async def test_a_replacement_not_initialized_in_time_is_deleted_and_the_command_rolled_back(
        store: DecisionStore) -> None:
    cluster = Cluster(boot_reads=-1)  # Karpenter never launches it
    old_node(cluster)
    outcome = await cluster.executor(store, replacement_ready_timeout_seconds=2).execute(command("old", replace=True))
    assert outcome == "rolled_back"
    assert await store.state("dec-k1") == "rolled_back"
    name = replacement_name("dec-k1", 0, "default")
    assert ("delete", name) in cluster.karpenter.calls  # the NodeClaim ebb created is deleted again
    assert cluster.karpenter.created() == [name]
    assert "old-claim" in cluster.karpenter.claims and "old" in cluster.api.nodes  # the old node is kept ...
    assert cluster.api.nodes["old"]["spec"]["taints"] == []  # ... and ebb's taint removed
    assert cluster.api.evictions() == []  # nothing was evicted
    assert [phase for _, phase, _ in (await cluster.events())] == ["Tainted", "Launching", "WaitingReadiness", "Failed",
                                                           "RolledBack"]
    messages = {phase: message for _, phase, message in (await cluster.events())}
    assert messages["Failed"] == f"replacement launch failed: {name} not Ready within 2s"
    assert messages["RolledBack"] == "untainted ebb.sh/disrupted:NoSchedule"
    assert cluster.nodes.taints_written() == {"ebb.sh/disrupted"}
    cluster.assert_nothing_karpenter_was_written()


async def test_a_replacement_karpenter_gives_up_on_rolls_back_at_once(store: DecisionStore) -> None:
    cluster = Cluster(boot_reads=-1)
    old_node(cluster)
    name = replacement_name("dec-k1", 0, "default")

    def karpenter_deletes_it() -> None:  # an insufficient-capacity error: Karpenter removes the NodeClaim
        del cluster.karpenter.claims[name]

    cluster.karpenter.after_create = karpenter_deletes_it
    assert await cluster.executor(store).execute(command("old", replace=True)) == "rolled_back"
    failed = [message for _, phase, message in (await cluster.events()) if phase == "Failed"]
    assert failed == [f"replacement launch failed: NodeClaim {name} is gone: Karpenter could not launch it"]
    cluster.assert_nothing_karpenter_was_written()


async def test_a_node_without_a_nodeclaim_fails_the_command_before_anything_is_done(store: DecisionStore) -> None:
    cluster = Cluster()
    old_node(cluster)
    cluster.api.add_node("static")  # not Karpenter's (it carries the finalizer, but no NodeClaim owns it)
    cluster.api.add_pods(pod("db-0", "static"))
    assert await cluster.executor(store).execute(command("old", "static")) == "failed"
    assert await store.state("dec-k1") == "failed"
    assert (await cluster.events()) == [("static", "Failed", no_claim("static"))]
    assert "has no NodeClaim" in no_claim("static") and "never deletes a Node" in no_claim("static")
    assert cluster.nodes.writes == [] and cluster.karpenter.calls == [] and cluster.api.evictions() == []


@pytest.mark.parametrize(("method", "reason"), [("emptiness", "Empty"), ("interruption", "Interrupted")])
async def test_a_delete_and_an_interruption_go_the_same_way(store: DecisionStore, method: str, reason: str) -> None:
    cluster = Cluster()
    old_node(cluster)
    cluster.karpenter.add_claim("other-claim", "other")
    assert await cluster.executor(store).execute(command("old", "other", method=method, reason=reason)) == "succeeded"
    assert cluster.karpenter.calls == [("delete", "old-claim"), ("delete", "other-claim")]
    assert cluster.karpenter.claims == {} and "old" not in cluster.api.nodes and "other" not in cluster.api.nodes
    for node in ("old", "other"):
        assert [p for n, p, _ in (await cluster.events()) if n == node] == ["Tainted", "Evicted", "Terminated"]
    cluster.assert_nothing_karpenter_was_written()


async def test_an_interrupted_node_whose_instance_is_gone_is_not_tainted(store: DecisionStore) -> None:
    cluster = Cluster()
    cluster.karpenter.add_claim("gone-claim", "gone")
    del cluster.api.nodes["gone"]  # the cloud took it; Karpenter removed the Node, its NodeClaim finalizing
    cluster.karpenter.claims["gone-claim"]["metadata"]["deletionTimestamp"] = "now"
    cmd = command("gone", method="interruption", reason="Interrupted")
    assert await cluster.executor(store).execute(cmd) == "succeeded"
    assert [p for _, p, _ in (await cluster.events())] == ["Terminated"]
    assert cluster.nodes.writes == [] and "gone-claim" not in cluster.karpenter.claims


async def test_a_node_karpenter_does_not_remove_in_time_fails_the_command(store: DecisionStore) -> None:
    cluster = Cluster(terminate_reads=-1)  # Karpenter never finishes the termination
    old_node(cluster)
    assert await cluster.executor(store, retire_timeout_seconds=5).execute(command("old")) == "failed"
    events = (await cluster.events())
    assert [p for _, p, _ in events] == ["Tainted", "Evicted", "Failed"]
    assert events[-1][2] == "not gone 5s after its removal was asked for (karpenter)"
    assert cluster.api.nodes["old"]["spec"]["taints"] == [EBB_TAINT]  # its removal is under way: left tainted
    cluster.assert_nothing_karpenter_was_written()


async def test_the_provider_tells_whether_an_instance_is_gone() -> None:
    api = FakeApi()
    karpenter = FakeKarpenter(api)
    provider = KarpenterProvider(api, karpenter)
    karpenter.add_claim("live-claim", "live")
    karpenter.add_claim("orphan-claim", "orphan")
    del karpenter.claims["orphan-claim"]  # its NodeClaim is gone: so is the instance
    api.add_node("static")
    assert [await provider.instance_gone(n) for n in ("live", "orphan", "static", "missing")] == [
        False, True, False, True]
    # Karpenter's termination controller: a NodeClaim gone while the Node is Ready (a kubelet still runs its
    # pods) is drained, not finalized at once
    api.nodes["orphan"]["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert not await provider.instance_gone("orphan")
    api.nodes["orphan"]["status"] = {"conditions": [{"type": "Ready", "status": "Unknown"}]}
    assert await provider.instance_gone("orphan")
    assert [await provider.cannot_retire(n) for n in ("live", "orphan", "missing")] == [None, None, None]
    assert await provider.cannot_retire("static") == no_claim("static")
    # a NodeClaim found by status.nodeName when the Node has no owner reference (not registered yet)
    karpenter.add_claim("young-claim", "young")
    del api.nodes["young"]["metadata"]["ownerReferences"]
    assert await provider.cannot_retire("young") is None and not await provider.instance_gone("young")


async def test_without_a_catalog_a_nodeclaim_asks_for_no_resources() -> None:
    """The default (app.run): Karpenter takes the cheapest pinned type; ebb's bundled catalog's allocatable is
    not Karpenter's, and requests above Karpenter's allocatable would rule the type out."""
    api = FakeApi()
    karpenter = FakeKarpenter(api)
    karpenter.nodepools["default"] = POOL
    replacement = command("old", replace=True).replacements[0]
    launched = await KarpenterProvider(api, karpenter).launch("r-1", replacement, decision_id="dec-k1")
    assert launched.name == "r-1"
    assert "resources" not in karpenter.claims["r-1"]["spec"]
    await KarpenterProvider(api, karpenter, CATALOG).launch("r-2", replacement, decision_id="dec-k1")
    assert karpenter.claims["r-2"]["spec"]["resources"] == {"requests": allocatable_of(CATALOG["t3.medium"])}


def test_the_executor_refuses_a_drainer_under_another_taint(store: DecisionStore) -> None:
    api = FakeApi()
    provider = KarpenterProvider(api, FakeKarpenter(api))
    with pytest.raises(ValueError, match=r"karpenter.sh/disrupted.*ebb.sh/disrupted"):
        Executor(InMemoryBus(), store, Drainer(api, disruption_taint=DISRUPTED_TAINT), provider=provider)


def test_the_provider_setting_and_its_deprecated_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().provider == "none"
    monkeypatch.setenv("EBB_TERMINATION_EXECUTOR_LAUNCHER", "kwok")
    assert Settings().provider == "kwok"
    monkeypatch.setenv("EBB_TERMINATION_EXECUTOR_PROVIDER", "karpenter")
    assert Settings().provider == "karpenter"
    monkeypatch.setenv("EBB_TERMINATION_EXECUTOR_PROVIDER", "aws")
    with pytest.raises(ValueError, match="provider"):
        Settings()


async def test_a_command_resumed_while_waiting_for_its_replacement_records_each_step_once(
        store: DecisionStore) -> None:
    from sqlalchemy import select

    from ebb.adapters.store.models import DecisionEvent

    cluster = Cluster(boot_reads=-1)  # not launched until the process is restarted
    old_node(cluster)
    # the process stops while it waits for the replacement: at its first look at the booting NodeClaim (on the
    # executor's manual clock its hour of waiting would otherwise pass at once, before a test could stop it)
    cluster.karpenter.while_booting = cluster.stop.set
    with pytest.raises(Stopped):
        await cluster.executor(store, replacement_ready_timeout_seconds=3600).execute(command("old", replace=True))
    cluster.karpenter.while_booting = None
    assert any(phase == "WaitingReadiness" for _, phase, _ in (await cluster.events()))
    assert await store.state("dec-k1") == "executing"

    cluster.stop.clear()
    cluster.karpenter.boot_reads = 2
    assert await cluster.executor(store).execute(command("old", replace=True)) == "succeeded"
    async with store.engine.connect() as connection:
        rows = await connection.execute(select(DecisionEvent.type).where(DecisionEvent.decision_id == "dec-k1")
                                        .order_by(DecisionEvent.id))
        timeline = [str(t) for (t,) in rows]
    assert [p for p in timeline if p != "Evicted"] == ["Tainted", "Launching", "WaitingReadiness", "Terminated"]
    # the resumed process reports the steps again under the same ids: recorded once, so sent once
    await cluster.events()
    published = [from_kafka(TOPIC_DISRUPTION_EVENTS, r.key, r.value, r.headers)
                 for r in cluster.bus.records(TOPIC_DISRUPTION_EVENTS)]
    for phase in ("Launching", "WaitingReadiness"):
        ids = [m.id for m in published if m.phase == phase]  # type: ignore[attr-defined]
        assert len(ids) == 1, ids


async def test_a_nodeclaim_the_api_refuses_rolls_the_command_back_at_once(store: DecisionStore) -> None:
    """An admission webhook (or RBAC) refuses the NodeClaim: Karpenter aborts a command whose launch fails; ebb's
    error escaped, the command was delivered again and again, and the old node stayed tainted."""
    cluster = Cluster()
    old_node(cluster)

    async def refused(body: dict[str, Any]) -> bool:
        raise KubeError(422, 'admission webhook "policy.example" denied the request')

    cluster.karpenter.create_nodeclaim = refused  # type: ignore[method-assign]
    assert await cluster.executor(store).execute(command("old", replace=True)) == "rolled_back"
    failed = [message for _, phase, message in (await cluster.events()) if phase == "Failed"]
    name = replacement_name("dec-k1", 0, "default")
    assert failed == [f"replacement launch failed: creating {name} failed: HTTP 422: admission webhook "
                      '"policy.example" denied the request']
    assert cluster.api.nodes["old"]["spec"]["taints"] == []


async def test_a_replacement_the_api_will_not_read_times_out_and_rolls_back(store: DecisionStore) -> None:
    """A read of the replacement that fails every time is "not ready yet" until the ready timeout, then the command
    is rolled back: no error escapes to leave the node tainted while the command is delivered again."""
    cluster = Cluster()
    old_node(cluster)

    read = cluster.karpenter.read_nodeclaim
    replacement = replacement_name("dec-k1", 0, "default")

    async def forbidden(name: str) -> dict[str, Any] | None:
        if name == replacement:
            raise KubeError(403, "nodeclaims.karpenter.sh is forbidden")
        return await read(name)

    cluster.karpenter.read_nodeclaim = forbidden  # type: ignore[method-assign]
    outcome = await cluster.executor(store, replacement_ready_timeout_seconds=2).execute(command("old", replace=True))
    assert outcome == "rolled_back"
    assert cluster.api.nodes["old"]["spec"]["taints"] == []
    assert cluster.api.evictions() == []


async def test_a_failed_commands_ready_replacement_is_kept(store: DecisionStore) -> None:
    """Two replacements, one Ready and one never: the command rolls back, the one never Ready is deleted and the Ready
    one kept, as Karpenter keeps a failed command's replacements (the scheduler may have put pods there)."""
    cluster = Cluster()
    old_node(cluster)
    executor = cluster.executor(store, replacement_ready_timeout_seconds=2)
    names = [replacement_name("dec-k1", i, "default") for i in (0, 1)]
    ready = executor.provider.ready

    async def second_never_ready(name: str) -> bool:
        return False if name == names[1] else await ready(name)

    executor.provider.ready = second_never_ready  # type: ignore[method-assign]
    one = {"node_pool": "default", "instance_types": ["t3.medium"], "capacity_type": "on-demand",
           "zones": ["us-east-1b"], "price": 0.0416}
    two = DisruptionCommand.model_validate({
        **command("old", replace=True).model_dump(), "method": "multi-node-consolidation", "replacements": [one, one]})
    assert await executor.execute(two) == "rolled_back"
    deleted = [name for verb, name in cluster.karpenter.calls if verb == "delete"]
    assert deleted == [names[1]]
    assert names[0] in cluster.karpenter.claims
    failed = [message for _, phase, message in (await cluster.events()) if phase == "Failed"]
    assert failed == [f"replacement launch failed: {names[1]} not Ready within 2s; kept {names[0]}, Ready (pods may "
                      "run there; emptiness removes it if none do)"]


async def test_a_create_that_timed_out_is_deleted_with_the_rollback(store: DecisionStore) -> None:
    """The create stored the NodeClaim, then its answer was lost (a timeout): the rollback deletes that NodeClaim too,
    which would otherwise launch and run empty."""
    cluster = Cluster()
    old_node(cluster)
    create = cluster.karpenter.create_nodeclaim

    async def stored_then_lost(body: dict[str, Any]) -> bool:
        await create(body)
        raise TimeoutError("no answer from the apiserver")

    cluster.karpenter.create_nodeclaim = stored_then_lost  # type: ignore[method-assign]
    assert await cluster.executor(store).execute(command("old", replace=True)) == "rolled_back"
    name = replacement_name("dec-k1", 0, "default")
    assert ("delete", name) in cluster.karpenter.calls
