"""ebb driving the real Karpenter, end to end (issue 10): ebb's cluster-watcher, consolidation-planner and
termination-executor as ``python -m`` processes in ``karpenter`` mode (``PROVIDER=karpenter``) on real Kafka and
PostgreSQL, against the session's Karpenter cluster (the real Karpenter's KWOK provider on a control plane of
its own, tests/integration/conftest.py). Karpenter provisions and terminates; ebb decides and drains.

Set-up, once for the module: ebb's CRDs, an ``ebb.sh/v1 InstanceTypeCatalog`` of Karpenter's KWOK instance
types (``catalog_from_kwok_instance_types``: ebb prices nodes and picks replacements among exactly the types
Karpenter launches), a database and topic prefix of its own, the three services. Each test has its own
NodePools (``KarpenterKit``: budgets ``nodes: "0"`` and expireAfter Never, so Karpenter disrupts nothing
itself) and gives ebb a NodePool by creating its ``ebb.sh/v1 DisruptionPolicy`` once the pool's first node
runs its pods (consolidateAfter 0s, budgets 100% unless told).

1. A scale-down: ebb replaces the underutilized node by a cheaper NodeClaim it creates and Karpenter launches,
   drains the old node (the pod moves to the new node), deletes the old NodeClaim; Karpenter removes the Node
   and the instance; the decision ``succeeded``.
2. Drift: the NodePool's template changes, so Karpenter's ``karpenter.sh/nodepool-hash`` of the NodePool no
   longer matches the node's; ebb (which also marks the node ``ebb.sh/drifted``) replaces it through a
   NodeClaim of the new template.
3. A spot interruption, published on ``ebb.interruptions`` as the interruption-ingester would (the ingester
   maps EC2 instance ids, and a KWOK node's provider id ``kwok://...`` names none; its SQS path is
   test_system.py's): approved at once although the pool's budget is ``nodes: "0"``, tainted, drained, its
   NodeClaim deleted; the evicted pod's new node is Karpenter's own (an interruption is a delete: ebb launches
   no replacement for it, docs/services/consolidation-planner.md).
4. A PodDisruptionBudget with maxUnavailable 0, created while ebb's replacement boots: ebb's evictions are
   refused (429) and the drain waits, the node stays; relaxed, the command completes.
5. The executor SIGKILLed while it waits for its replacement NodeClaim and restarted: the command resumes,
   finds the NodeClaim it created (its create is answered 409), creates no second one, leaves no orphan, and
   the decision ``succeeded``.

Tests 4 and 5 hold the replacement in WaitingReadiness with a startup taint on the NodePool's template:
Karpenter calls a NodeClaim Initialized only once its Node has lost the startup taints, and nothing removes
them on KWOK but the test.

Every test checks, from the API server's audit log (tests/kit/kube_audit.py: what was sent, not only
the end state), that no request of ebb's touched a ``karpenter.sh/`` taint or finalizer, deleted or created a
Node, or changed a NodeClaim; that the drain was ebb's (Karpenter evicted nothing); and that Karpenter's
``karpenter_voluntary_disruption_decisions_total`` did not move. The module's whole time is checked once more
at its end. Run serialized:
``flock /tmp/ebb-integration.lock uv run pytest tests/integration/test_karpenter_system.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.bus import KafkaBus
from ebb.contracts import TOPIC_INTERRUPTIONS, Interruption
from ebb.core.launch import replacement_name
from tests.kit.karpenter_cluster import RUN_LABEL, KarpenterCluster, KarpenterKit, Metrics
from tests.kit.karpenter_setup import ebb_beside_karpenter
from tests.kit.kube_audit import ANNOTATION_DECISION_ID, AuditEvent, AuditLog, NodeHistory, ebb_violations
from tests.kit.servers import KafkaServer, PostgresServer
from tests.kit.system import Servers, System, SystemSettings, as_body, jv, query
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

EBB = "ebb.sh"
KARPENTER_GROUP = "karpenter.sh"
DECISIONS = "karpenter_voluntary_disruption_decisions_total"
SERVICES = ("cluster-watcher", "consolidation-planner", "termination-executor")
#: the startup taint that holds a node un-initialized until the test removes it (tests 4 and 5)
STARTUP_TAINT = {"key": f"{RUN_LABEL}-startup", "effect": "NoSchedule"}
EBB_TAINT = "ebb.sh/disrupted"
FINISHED = ("succeeded", "failed", "rolled_back")
REPLACE_STEPS = ["Proposed", "Approved", "Tainted", "Launching", "WaitingReadiness", "Evicted", "Terminated"]


# ------------------------------------------------------------------------------------------- the module's ebb


@dataclass
class Ebb:
    """ebb's services next to Karpenter, and what the tests read of them."""

    system: System
    settings: SystemSettings
    database_url: str
    kafka_bootstrap: str
    audit: AuditLog
    nodes: NodeHistory
    started_at: int

    async def decisions(self, pool: str) -> list[Any]:
        """The decisions about ``pool``'s nodes, oldest first."""
        rows = await query(self.database_url, "SELECT * FROM decisions WHERE cluster = $1 ORDER BY created_at, id",
                           self.settings.cluster)
        return [d for d in rows if any(n.get("nodePool") == pool for n in jv(d["nodes"]))]

    async def timeline(self, decision_id: str) -> list[str]:
        return [step for step, _ in await self.steps(decision_id)]

    async def steps(self, decision_id: str) -> list[tuple[str, str]]:
        """The decision's timeline: (step, message)."""
        rows = await query(self.database_url, "SELECT type, detail FROM decision_events WHERE decision_id = $1 "
                                              "ORDER BY at, id", decision_id)
        return [(r["type"], str(jv(r["detail"]).get("message", ""))) for r in rows]

    async def publish_interruption(self, interruption: Interruption) -> None:
        async with KafkaBus(self.kafka_bootstrap, prefix=self.settings.prefix) as bus:
            await bus.publish(TOPIC_INTERRUPTIONS, interruption)

    def violations(self, since: int) -> list[str]:
        self.nodes.check()
        return ebb_violations(self.audit.events(since), self.nodes)


@pytest.fixture(scope="module")
async def ebb(karpenter_cluster: KarpenterCluster, karpenter_api: Any, kafka_server: KafkaServer,
              postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Ebb]:
    """The three services in karpenter mode on the Karpenter cluster, with ebb's CRDs and the catalog of
    Karpenter's instance types; at the end stopped (each must exit 0), and everything made removed again."""
    if karpenter_cluster.audit_log is None:
        pytest.fail("the Karpenter cluster's API server writes no audit log: it was started before "
                    "deploy/local/kubernetes.sh had one; restart it (deploy/local/infra.sh down; up karpenter)")
    run = uuid.uuid4().hex[:8]
    settings = SystemSettings(run=f"k{run}", queue_url="", validation_delay=2.0)
    async with ebb_beside_karpenter(karpenter_cluster.kubeconfig, karpenter_api, postgres_server.url, settings,
                                    catalog=f"karpenter-kwok-{run}") as installed:
        servers = Servers(kafka_bootstrap=kafka_server.bootstrap, database_url=installed.database_url,
                          kubeconfig=str(karpenter_cluster.kubeconfig), aws_endpoint="")
        system = System(servers, settings, tmp_path_factory.mktemp("ebb-karpenter") / "logs", only=SERVICES)
        system["consolidation-planner"].env.update({"EBB_CONSOLIDATION_PLANNER_PROVIDER": "karpenter"})
        system["termination-executor"].env.update({
            "EBB_TERMINATION_EXECUTOR_PROVIDER": "karpenter",
            # tests 4 and 5 hold a replacement un-initialized for a while on purpose
            "EBB_TERMINATION_EXECUTOR_REPLACEMENT_READY_TIMEOUT_SECONDS": "300",
            "EBB_TERMINATION_EXECUTOR_RETIRE_TIMEOUT_SECONDS": "120",
        })
        audit = AuditLog(karpenter_cluster.audit_log)
        async with NodeHistory(karpenter_api) as nodes:
            started_at = audit.mark()
            async with system:
                yield Ebb(system, settings, installed.database_url, kafka_server.bootstrap, audit, nodes, started_at)
                system.check_running()
            # every request ebb sent while the module ran, the tests' clean-ups included
            assert ebb_violations(audit.events(started_at), nodes) == []


# ------------------------------------------------------------------------------------------- one test's case


@dataclass
class Case:
    """One test: its KarpenterKit, the module's ebb, and the marks it is checked from."""

    kit: KarpenterKit
    ebb: Ebb
    since: int
    before: Metrics
    policies: list[str] = field(default_factory=list)
    deployments: list[str] = field(default_factory=list)

    @property
    def custom(self) -> Any:
        """The kit's CustomObjectsApi (untyped: merge patches need ``_content_type``)."""
        return self.kit.custom

    async def pool(self, suffix: str, **settings: Any) -> str:
        """A NodePool in which Karpenter disrupts nothing (budgets ``nodes: "0"``, expireAfter Never);
        ``settings``: ``nodepool_body``'s other keywords."""
        return await self.kit.create_nodepool(suffix, budgets=[{"nodes": "0"}], expire_after="Never", **settings)

    async def hand_over(self, pool: str, budgets: Sequence[Mapping[str, str]] = ({"nodes": "100%"},)) -> None:
        """Create the pool's DisruptionPolicy: from now on ebb disrupts its nodes."""
        await self.custom.create_cluster_custom_object(EBB, "v1", "disruptionpolicies", {
            "apiVersion": f"{EBB}/v1", "kind": "DisruptionPolicy",
            "metadata": {"name": pool, "labels": {RUN_LABEL: self.kit.run}},
            "spec": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                     "budgets": [dict(b) for b in budgets]}})
        self.policies.append(pool)

    async def deployment(self, name: str, pool: str, replicas: int, cpu: str = "1") -> None:
        await self.kit.create_deployment(name, pool, replicas, cpu=cpu)
        self.deployments.append(name)

    async def registered_claims(self, pool: str, count: int) -> list[dict[str, Any]]:
        """Wait until ``pool`` has exactly ``count`` NodeClaims, each with its Node registered (not necessarily
        initialized: a startup taint holds it back); return them."""

        async def registered() -> list[dict[str, Any]] | None:
            claims = await self.kit.nodeclaims(pool)
            done = len(claims) == count and all((c.get("status") or {}).get("nodeName") for c in claims)
            return claims if done else None

        claims: list[dict[str, Any]] = await eventually(f"{count} registered NodeClaim(s) of {pool}", registered,
                                                        within=60)
        return claims

    async def pods_on(self, app: str, count: int, node: str | None = None, within: float = 90) -> dict[str, str]:
        """Wait until exactly ``count`` pods of ``app`` run (all on ``node`` when given); pod → node."""

        async def placed() -> dict[str, str] | None:
            self.ebb.system.check_running()
            pods = await self.kit.running_pods(app)
            right = len(pods) == count and (node is None or set(pods.values()) == {node})
            return pods if right else None

        pods: dict[str, str] = await eventually(f"{count} pod(s) of {app} running{' on ' + node if node else ''}",
                                                placed, within=within)
        return pods

    async def release_startup_taint(self, node: str) -> None:
        """Remove the startup taint (the test plays the agent that would): Karpenter then initializes the
        NodeClaim. A JSON patch guarded by the resourceVersion read, retried when Karpenter wrote meanwhile."""
        core: Any = self.kit.core  # raw JSON and a JSON patch: outside the client's typed signatures
        for _ in range(20):
            raw = await core.read_node(node, _preload_content=False)
            obj = json.loads(await raw.read())
            taints = (obj.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != STARTUP_TAINT["key"]]
            if len(kept) == len(taints):
                return
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
                     {"op": "replace", "path": "/spec/taints", "value": kept}]
            try:
                await core.patch_node(node, patch, _content_type="application/json-patch+json")
                return
            except ApiException as error:
                if error.status not in (409, 422):
                    raise
        raise AssertionError(f"could not remove the startup taint of {node}")

    async def finished(self, pool: str, method: str) -> Any:
        """Wait until a decision of ``method`` about ``pool`` has finished; it must have succeeded."""

        async def ended() -> Any:
            self.ebb.system.check_running()
            rows = [d for d in await self.ebb.decisions(pool) if d["method"] == method and d["state"] in FINISHED]
            return rows[0] if rows else None

        decision = await eventually(f"a {method} decision about {pool} finished", ended, within=150,
                                    on_timeout=self.ebb.system.tails)
        steps = await self.ebb.timeline(decision["id"])
        assert decision["state"] == "succeeded", (dict(decision), steps, self.ebb.system.tails())
        return decision

    async def executing(self, pool: str, step: str = "WaitingReadiness") -> Any:
        """Wait until a decision about ``pool`` executes and its timeline has reached ``step``."""

        async def reached() -> Any:
            self.ebb.system.check_running()
            for d in await self.ebb.decisions(pool):
                if d["state"] == "executing" and step in await self.ebb.timeline(d["id"]):
                    return d
                assert d["state"] not in FINISHED, (dict(d), await self.ebb.timeline(d["id"]))
            return None

        return await eventually(f"a decision about {pool} at {step}", reached, within=120,
                                on_timeout=self.ebb.system.tails)

    def events(self) -> list[AuditEvent]:
        """The audited requests since the test began."""
        return self.ebb.audit.events(self.since)

    async def check_hands_off(self) -> None:
        """No request of ebb's broke the karpenter mode's rules; Karpenter decided no voluntary disruption."""
        assert self.ebb.violations(self.since) == []
        after = await self.kit.metrics()
        assert after.value(DECISIONS) == self.before.value(DECISIONS), "Karpenter disrupted something itself"
        self.ebb.system.check_running()

    async def cleanup(self) -> None:
        """Take the pools from ebb again (their policies deleted: ebb reads the NodePools' own budgets 0) and
        stop the workloads, before the kit removes the pools and waits for their nodes to go."""
        for name in self.policies:
            with contextlib.suppress(ApiException):
                await self.custom.delete_cluster_custom_object(EBB, "v1", "disruptionpolicies", name)
        apps = client.AppsV1Api(self.kit.api)
        for name in self.deployments:
            with contextlib.suppress(ApiException):
                await apps.delete_namespaced_deployment(name, self.kit.namespace, propagation_policy="Foreground")


@pytest.fixture
async def case(karpenter: KarpenterKit, ebb: Ebb) -> AsyncIterator[Case]:
    made = Case(karpenter, ebb, since=ebb.audit.mark(), before=await karpenter.metrics())
    try:
        yield made
    finally:
        await made.cleanup()


def of(events: Sequence[AuditEvent], *, component: str | None = None, verb: str | None = None,
       resource: str | None = None, name: str | None = None, subresource: str = "") -> list[AuditEvent]:
    return [e for e in events if (component is None or e.component == component)
            and (verb is None or e.verb == verb) and (resource is None or e.resource == resource)
            and (name is None or e.name == name) and e.subresource == subresource]


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def is_initialized(claim: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Initialized" and c.get("status") == "True"
               for c in (claim.get("status") or {}).get("conditions") or [])


async def consolidation_set_up(case: Case, suffix: str, *, startup_taint: bool = False) -> tuple[str, str, str]:
    """A pool whose only node (Karpenter's choice for four 1-CPU pods) runs them, scaled down to one pod, then
    handed to ebb (once the three pods are gone: a pass on the half-done scale-down would replace the node by
    one for two or three pods first, and then that one again, as Karpenter's consolidation would too). Returns
    (pool, the old NodeClaim, its node)."""
    pool = await case.pool(suffix, startup_taints=[STARTUP_TAINT] if startup_taint else ())
    await case.deployment("web", pool, 4)
    [claim] = await case.registered_claims(pool, 1)
    node = claim["status"]["nodeName"]
    if startup_taint:
        await case.release_startup_taint(node)
    await case.pods_on("web", 4, node)
    await case.kit.scale_deployment("web", 1)

    async def scaled_down() -> bool:
        pods = await case.kit.core.list_namespaced_pod(case.kit.namespace, label_selector="app=web")
        return len(pods.items) == 1

    await eventually("the scale-down done", scaled_down, within=60)
    await case.pods_on("web", 1, node)
    await case.hand_over(pool)
    return pool, claim["metadata"]["name"], node


# ------------------------------------------------------------------------------------------- the tests


async def test_a_scale_down_is_consolidated_through_a_nodeclaim_karpenter_launches(case: Case) -> None:
    kit, ebb = case.kit, case.ebb
    pool, old_claim, old_node = await consolidation_set_up(case, "cons")
    old_type = labels_of(await kit.nodeclaim(old_claim) or {})["node.kubernetes.io/instance-type"]

    decision = await case.finished(pool, "single-node-consolidation")
    assert (decision["reason"], decision["action"]) == ("Underutilized", "replace"), dict(decision)
    assert [n["name"] for n in jv(decision["nodes"])] == [old_node]
    [wanted] = jv(decision["replacements"])
    assert float(decision["savings"]) > 0
    assert await ebb.timeline(decision["id"]) == REPLACE_STEPS

    # the replacement: ebb's NodeClaim, launched and initialized by Karpenter, the pod moved onto it
    name = replacement_name(decision["id"], 0, pool)
    claim = await kit.nodeclaim(name)
    assert claim is not None and is_initialized(claim), claim
    assert claim["metadata"]["annotations"][ANNOTATION_DECISION_ID] == decision["id"]
    new_type = labels_of(claim)["node.kubernetes.io/instance-type"]
    assert new_type in wanted["instanceTypes"] and new_type != old_type, (old_type, wanted)
    new_node = claim["status"]["nodeName"]
    await case.pods_on("web", 1, new_node)
    # the old NodeClaim, its Node and its instance are gone; no NodeClaim of the pool is left over
    assert await kit.nodeclaim(old_claim) is None and await kit.node(old_node) is None
    assert [c["metadata"]["name"] for c in await kit.nodeclaims(pool)] == [name]

    # what ebb sent: one NodeClaim created, the old one deleted, its own taint on the old node; it evicted the
    # pod itself, so Karpenter's termination found nothing left to drain
    events = case.events()
    assert [(e.name, e.code) for e in of(events, verb="create", resource="nodeclaims") if e.by_ebb] == [(name, 201)]
    assert [e.name for e in of(events, verb="delete", resource="nodeclaims") if e.by_ebb] == [old_claim]
    patches = [e for e in of(events, verb="patch", resource="nodes") if e.by_ebb and e.ok]
    assert [(e.component, e.name) for e in patches] == [("ebb-termination-executor", old_node)]
    evictions = of(events, verb="create", resource="pods", subresource="eviction")
    assert [e.component for e in evictions if e.namespace == kit.namespace] == ["ebb-termination-executor"]
    # the audit log sees Karpenter's own karpenter.sh/ writes, so the check above would see ebb's
    assert any(e.component == "karpenter" and e.name == old_node for e in of(events, resource="nodes")), \
        [str(e) for e in events]
    await case.check_hands_off()


async def test_a_drifted_node_is_replaced_through_a_nodeclaim_of_the_new_template(case: Case) -> None:
    kit, ebb = case.kit, case.ebb
    pool = await case.pool("drift")
    await case.deployment("web", pool, 1)
    [old] = await kit.wait_for_nodeclaims(pool, 1)
    old_claim, old_node = old["metadata"]["name"], old["status"]["nodeName"]
    await case.pods_on("web", 1, old_node)
    await case.hand_over(pool)
    hash_before = old["metadata"]["annotations"]["karpenter.sh/nodepool-hash"]

    # a static field of the template changes: Karpenter gives the NodePool a new hash
    await case.custom.patch_cluster_custom_object(KARPENTER_GROUP, "v1", "nodepools", pool, {
        "spec": {"template": {"metadata": {"labels": {"ebb.sh/template": "v2"}}}}},
        _content_type="application/merge-patch+json")

    async def new_hash() -> str | None:
        obj = await case.custom.get_cluster_custom_object(KARPENTER_GROUP, "v1", "nodepools", pool)
        value = str(obj["metadata"]["annotations"].get("karpenter.sh/nodepool-hash"))
        return value if value != hash_before else None

    hash_after = await eventually("the NodePool's new hash", new_hash, within=30)

    decision = await case.finished(pool, "drift")
    assert (decision["reason"], decision["action"]) == ("Drifted", "replace"), dict(decision)
    assert [n["name"] for n in jv(decision["nodes"])] == [old_node]
    assert "nodepool-hash" in json.dumps(jv(decision["explanation"])), jv(decision["explanation"])
    assert await ebb.timeline(decision["id"]) == REPLACE_STEPS

    name = replacement_name(decision["id"], 0, pool)
    claim = await kit.nodeclaim(name)
    assert claim is not None and is_initialized(claim), claim
    assert labels_of(claim)["ebb.sh/template"] == "v2"
    assert claim["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] == hash_after
    new_node = claim["status"]["nodeName"]
    new = await kit.node(new_node)
    assert new is not None and new.metadata.labels["ebb.sh/template"] == "v2"
    await case.pods_on("web", 1, new_node)
    assert await kit.nodeclaim(old_claim) is None and await kit.node(old_node) is None
    assert [c["metadata"]["name"] for c in await kit.nodeclaims(pool)] == [name]

    events = case.events()
    # the planner marked the drifted node (its only write), the executor tainted it
    marks = [e for e in of(events, verb="patch", resource="nodes", name=old_node) if e.by_ebb and e.ok]
    assert {e.component for e in marks} == {"ebb-consolidation-planner", "ebb-termination-executor"}, \
        [str(e) for e in marks]
    drifted = [e.body for e in marks if e.component == "ebb-consolidation-planner"]
    assert any("ebb.sh/drifted" in (b.get("metadata") or {}).get("annotations", {}) for b in drifted), drifted
    assert [(e.name, e.code) for e in of(events, verb="create", resource="nodeclaims") if e.by_ebb] == [(name, 201)]
    await case.check_hands_off()



async def test_a_spot_interruption_is_carried_out_at_once_without_budget(case: Case) -> None:
    kit, ebb = case.kit, case.ebb
    pool = await case.pool("spot", capacity_types=("spot",))
    await case.deployment("web", pool, 1)
    [old] = await kit.wait_for_nodeclaims(pool, 1)
    old_claim, old_node = old["metadata"]["name"], old["status"]["nodeName"]
    assert labels_of(old)["karpenter.sh/capacity-type"] == "spot"
    await case.pods_on("web", 1, old_node)
    await case.hand_over(pool, budgets=[{"nodes": "0"}])  # no voluntary disruption at all

    interruption = Interruption(node=old_node, kind="spot-interruption",
                                instance_id=old["status"]["providerID"],
                                deadline=datetime.now(UTC) + timedelta(minutes=2),
                                detail="instance-action=terminate")
    await ebb.publish_interruption(interruption)

    decision = await case.finished(pool, "interruption")
    assert decision["id"].startswith("int-")
    assert (decision["reason"], decision["action"]) == ("Interrupted", "delete"), dict(decision)
    assert [n["name"] for n in jv(decision["nodes"])] == [old_node]
    assert jv(decision["explanation"])["interruption"]["messageId"] == str(interruption.id)
    assert await ebb.timeline(decision["id"]) == ["Proposed", "Approved", "Tainted", "Evicted", "Terminated"]
    ledger = await query(ebb.database_url, "SELECT * FROM budget_ledger WHERE decision_id = $1", decision["id"])
    assert ledger == [], "an interruption takes no budget"
    assert await kit.nodeclaim(old_claim) is None and await kit.node(old_node) is None

    # the evicted pod came back and Karpenter gave it a node of its own (ebb launched nothing)
    [new] = await kit.wait_for_nodeclaims(pool, 1)
    assert ANNOTATION_DECISION_ID not in (new["metadata"].get("annotations") or {})
    await case.pods_on("web", 1, new["status"]["nodeName"])
    events = case.events()
    assert [e.name for e in of(events, verb="delete", resource="nodeclaims") if e.by_ebb] == [old_claim]
    assert not [e for e in of(events, verb="create", resource="nodeclaims") if e.by_ebb]
    # only the planner's ebb.interruptions decision ran: no voluntary decision about the pool
    assert {d["method"] for d in await ebb.decisions(pool)} == {"interruption"}
    await case.check_hands_off()


async def test_a_pdb_that_allows_nothing_holds_the_drain_until_it_is_relaxed(case: Case) -> None:
    kit, ebb = case.kit, case.ebb
    policy = client.PolicyV1Api(kit.api)
    pool, old_claim, old_node = await consolidation_set_up(case, "pdb", startup_taint=True)
    decision = await case.executing(pool, "WaitingReadiness")
    name = replacement_name(decision["id"], 0, pool)
    [claim] = [c for c in await case.registered_claims(pool, 2) if c["metadata"]["name"] == name]
    [pod] = await case.pods_on("web", 1, old_node)

    # while the replacement boots, a PDB that allows no disruption of the pod appears
    await policy.create_namespaced_pod_disruption_budget(kit.namespace, as_body(client.V1PodDisruptionBudget, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}}))

    async def refusing() -> bool:
        pdb = await policy.read_namespaced_pod_disruption_budget_status("web", kit.namespace)
        s = pdb.status
        return bool(s and s.observed_generation == pdb.metadata.generation and s.current_healthy == 1
                    and s.disruptions_allowed == 0)

    await eventually("the PDB allowing no disruption", refusing, within=30)
    await case.release_startup_taint(claim["status"]["nodeName"])

    # the drain waits: ebb's evictions are refused (429), the pod stays, nothing is retired
    def refused() -> list[AuditEvent] | None:
        ebb.system.check_running()
        mine = [e for e in of(case.events(), resource="pods", subresource="eviction", name=pod)
                if e.component == "ebb-termination-executor" and e.code == 429]
        return mine if len(mine) >= 3 else None

    await eventually("three refused evictions of the pod", refused, within=60, on_timeout=ebb.system.tails)
    # a few passes and a validation delay while the replacement waits empty: ebb leaves it alone (its decision
    # launched it), and decides nothing else about the pool
    await asyncio.sleep(float(ebb.settings.validation_delay) + 3)
    assert [(d["id"], d["state"]) for d in await ebb.decisions(pool)] == [(decision["id"], "executing")]
    assert "Evicted" not in await ebb.timeline(decision["id"])
    assert await case.pods_on("web", 1, old_node) == {pod: old_node}
    still = await kit.nodeclaim(old_claim)
    assert still is not None and not still["metadata"].get("deletionTimestamp")
    node = await kit.node(old_node)
    assert node is not None and EBB_TAINT in {t.key for t in node.spec.taints or []}

    # relaxed: the eviction goes through, the command completes
    await policy.patch_namespaced_pod_disruption_budget("web", kit.namespace, {"spec": {"maxUnavailable": 1}})
    decision = await case.finished(pool, "single-node-consolidation")
    assert await ebb.timeline(decision["id"]) == REPLACE_STEPS
    await case.pods_on("web", 1, claim["status"]["nodeName"])
    assert await kit.nodeclaim(old_claim) is None and await kit.node(old_node) is None
    assert [c["metadata"]["name"] for c in await kit.nodeclaims(pool)] == [name]
    evictions = of(case.events(), resource="pods", subresource="eviction", name=pod)
    assert {e.component for e in evictions} == {"ebb-termination-executor"}
    assert [e.code for e in evictions if e.code != 429] == [201], [str(e) for e in evictions]
    await case.check_hands_off()


async def test_the_executor_killed_while_its_replacement_boots_resumes_with_the_same_nodeclaim(case: Case) -> None:
    kit, ebb = case.kit, case.ebb
    executor = ebb.system["termination-executor"]
    pool, old_claim, old_node = await consolidation_set_up(case, "kill", startup_taint=True)
    decision = await case.executing(pool, "WaitingReadiness")
    name = replacement_name(decision["id"], 0, pool)
    [claim] = [c for c in await case.registered_claims(pool, 2) if c["metadata"]["name"] == name]

    await executor.kill()
    [row] = [d for d in await ebb.decisions(pool) if d["id"] == decision["id"]]
    assert row["state"] == "executing"
    await ebb.system.start("termination-executor")

    # the restarted executor resumes the command and waits for the NodeClaim it had created
    def resumed() -> bool:
        return any(line.get("event") == "disruption event" and line.get("decision_id") == decision["id"]
                   and line.get("phase") == "WaitingReadiness" for line in executor.lines())

    await eventually("the restarted executor waiting for the replacement again", resumed, within=90,
                     on_timeout=executor.tail)
    await case.release_startup_taint(claim["status"]["nodeName"])

    decision = await case.finished(pool, "single-node-consolidation")
    # the restarted executor reported every step again under the same id (a Launching's derived from the
    # NodeClaim it launches), so the timeline holds each once
    steps = await ebb.steps(decision["id"])
    assert [step for step, _ in steps] == REPLACE_STEPS
    assert [message.split(":")[0] for step, message in steps if step == "Launching"] == [f"launching {name}"]
    await case.pods_on("web", 1, claim["status"]["nodeName"])
    assert await kit.nodeclaim(old_claim) is None and await kit.node(old_node) is None
    # no second NodeClaim, no orphan: the resumed create was answered 409 (it existed), nothing else was made
    assert [c["metadata"]["name"] for c in await kit.nodeclaims(pool)] == [name]
    creates = [(e.name, e.code) for e in of(case.events(), verb="create", resource="nodeclaims") if e.by_ebb]
    assert creates == [(name, 201), (name, 409)], creates
    assert [e.name for e in of(case.events(), verb="delete", resource="nodeclaims") if e.by_ebb] == [old_claim]
    await case.check_hands_off()
