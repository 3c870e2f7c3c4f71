"""Shadow mode next to the real Karpenter, which disrupts (docs/shadow.md): ebb's cluster-watcher,
consolidation-planner, termination-executor and decisions-api as ``python -m`` processes, the planner and the
executor in shadow mode (``EBB_CONSOLIDATION_PLANNER_MODE=shadow``, ``EBB_TERMINATION_EXECUTOR_MODE=shadow``), on real
Kafka and PostgreSQL and the session's Karpenter cluster (the real Karpenter's KWOK provider,
tests/integration/conftest.py).

Two NodePools, each with one node for four 1-CPU pods, scaled down to one pod:

- ``kar``: Karpenter consolidates it (budgets 100%, consolidateAfter 0s) and replaces the node by a cheaper one;
  ebb's DisruptionPolicy waits an hour after a pod change (consolidateAfter 1h), so ebb would not have: the report's
  *Karpenter only*, with ebb's reason in the category ``window``.
- ``ebb``: Karpenter disrupts nothing (budgets ``nodes: "0"``); ebb's policy would replace the node by a cheaper one:
  a shadow decision, approved, never executed: the report's *ebb only*, with its saving.

Checked from the API server's audit log (every write, deploy/local/kubernetes.sh): no request of ebb's services but
the planner's writes of its own Lease (no taint, annotation, NodeClaim, eviction, Event or DisruptionPolicy
status); from the database: every decision is shadow, no outbox message, no ledger row; and the report
(``GET /v1/shadow/report`` and ``ebb shadow report``) against those facts: Karpenter's removals as the Node watch
saw them, ebb's approved decisions as the store holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from typer.testing import CliRunner

from ebb_cli.main import app as cli
from tests.kit.karpenter_cluster import RUN_LABEL, KarpenterCluster, KarpenterKit
from tests.kit.karpenter_setup import EbbInstalled, ebb_beside_karpenter
from tests.kit.kube_audit import AuditLog, NodeHistory
from tests.kit.servers import KafkaServer, PostgresServer
from tests.kit.system import Servers, System, SystemSettings, jv, query
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

EBB = "ebb.sh"
SERVICES = ("cluster-watcher", "consolidation-planner", "termination-executor", "decisions-api")
DECISIONS = "karpenter_voluntary_disruption_decisions_total"
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def audits_every_write(audit_log: Path) -> bool:
    """Whether the API server's audit policy (next to its log) logs every write (deploy/local/kubernetes.sh)."""
    policy = audit_log.parent / "audit-policy.yaml"
    return policy.exists() and "verbs: [create, update, patch, delete, deletecollection]\n  - level: None" in \
        policy.read_text()


@pytest.fixture
async def ebb(karpenter_cluster: KarpenterCluster, karpenter_api: Any,
              postgres_server: PostgresServer) -> AsyncIterator[tuple[SystemSettings, EbbInstalled]]:
    """ebb's CRDs, the catalog of Karpenter's instance types and a database, removed again after the test."""
    if karpenter_cluster.audit_log is None or not audits_every_write(karpenter_cluster.audit_log):
        pytest.fail("the Karpenter cluster's API server does not audit every write: it was started before "
                    "deploy/local/kubernetes.sh's policy did; restart it (deploy/local/infra.sh down; up karpenter)")
    run = uuid.uuid4().hex[:8]
    settings = SystemSettings(run=f"s{run}", queue_url="", validation_delay=2.0)
    async with ebb_beside_karpenter(karpenter_cluster.kubeconfig, karpenter_api, postgres_server.url, settings,
                                    catalog=f"karpenter-kwok-{run}") as installed:
        yield settings, installed


async def test_shadow_mode_next_to_a_consolidating_karpenter(
        karpenter_cluster: KarpenterCluster, karpenter_api: Any, karpenter: KarpenterKit, kafka_server: KafkaServer,
        ebb: tuple[SystemSettings, EbbInstalled], tmp_path: Path) -> None:
    assert karpenter_cluster.audit_log is not None
    kit = karpenter
    custom = client.CustomObjectsApi(karpenter_api)
    settings, installed = ebb
    database_url = installed.database_url
    servers = Servers(kafka_bootstrap=kafka_server.bootstrap, database_url=database_url,
                      kubeconfig=str(karpenter_cluster.kubeconfig), aws_endpoint="")
    system = System(servers, settings, tmp_path / "logs", only=SERVICES)
    system["consolidation-planner"].env.update({"EBB_CONSOLIDATION_PLANNER_PROVIDER": "karpenter",
                                                "EBB_CONSOLIDATION_PLANNER_MODE": "shadow"})
    system["termination-executor"].env.update({"EBB_TERMINATION_EXECUTOR_PROVIDER": "karpenter",
                                               "EBB_TERMINATION_EXECUTOR_MODE": "shadow"})
    audit = AuditLog(karpenter_cluster.audit_log)
    policies: list[str] = []
    before = await kit.metrics()
    try:
        async with NodeHistory(karpenter_api) as history:
            since = audit.mark()
            async with system:
                pools = {}
                for suffix, budgets, ebb_waits in (("kar", [{"nodes": "100%"}], "1h"), ("ebb", [{"nodes": "0"}], "0s")):
                    pool = await kit.create_nodepool(suffix, budgets=budgets, expire_after="Never")
                    await custom.create_cluster_custom_object(EBB, "v1", "disruptionpolicies", {
                        "apiVersion": f"{EBB}/v1", "kind": "DisruptionPolicy",
                        "metadata": {"name": pool, "labels": {RUN_LABEL: kit.run}},
                        "spec": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": ebb_waits,
                                 "budgets": [{"nodes": "100%"}]}})
                    policies.append(pool)
                    await kit.create_deployment(f"web-{suffix}", pool, 4)
                    pools[suffix] = pool
                first = {}
                for suffix, pool in pools.items():
                    claims = await kit.wait_for_nodeclaims(pool, 1, within=90)
                    first[suffix] = claims[0]["status"]["nodeName"]
                    await eventually(f"4 pods of web-{suffix} running", _running(kit, f"web-{suffix}", 4), within=90)
                for suffix in pools:
                    await kit.scale_deployment(f"web-{suffix}", 1)

                # Karpenter replaces kar's node; ebb would have waited (consolidateAfter 1h)
                await eventually("Karpenter removed kar's first node", lambda: _gone(kit, first["kar"]), within=180,
                                 on_timeout=system.tails)

                async def kept() -> list[Any] | None:
                    system.check_running()
                    rows = await query(database_url, "SELECT * FROM shadow_removals WHERE cluster = $1 AND node = $2",
                                       settings.cluster, first["kar"])
                    return rows or None

                [removal] = await eventually("the removal kept with ebb's verdict", kept, within=60,
                                             on_timeout=system.tails)
                assert removal["removed_by"] == "karpenter", dict(removal)
                assert removal["verdict"] and removal["verdict_at"] is not None, dict(removal)

                # ebb would have replaced ebb's node (Karpenter may not: budgets nodes 0)
                async def approved() -> Any:
                    system.check_running()
                    rows = await query(database_url, "SELECT * FROM decisions WHERE cluster = $1 AND state = "
                                                     "'approved' ORDER BY created_at", settings.cluster)
                    ours = [r for r in rows if any(n.get("name") == first["ebb"] for n in jv(r["nodes"]))]
                    return ours[0] if ours else None

                decision = await eventually("ebb's shadow approval of ebb's node", approved, within=120,
                                            on_timeout=system.tails)
                assert decision["shadow"] is True and float(decision["savings"]) > 0, dict(decision)
                assert jv(decision["explanation"])["budgets"], dict(decision)
                assert await kit.node(first["ebb"]) is not None, "ebb's node was disrupted: shadow mode acted"

                # the report, over REST and on the command line, against the facts
                async with httpx.AsyncClient(base_url=system.api, headers=system.auth, timeout=30) as http:
                    report = (await http.get("/v1/shadow/report", params={"since": "1h"})).json()
                    shadow = (await http.get("/v1/decisions", params={"shadow": "true"})).json()["items"]
                    real = (await http.get("/v1/decisions", params={"shadow": "false"})).json()["items"]
                assert real == [] and shadow and all(d["shadow"] for d in shadow)
                removed_kar = {n for n in _seen(history, pools["kar"]) if await kit.node(n) is None}
                karpenter_nodes = {e["node"] for e in report["karpenterOnly"]} | {b["node"] for b in report["both"]}
                assert first["kar"] in removed_kar and removed_kar <= karpenter_nodes, (removed_kar, report)
                [alone] = [e for e in report["karpenterOnly"] if e["node"] == first["kar"]]
                assert alone["removedBy"] == "karpenter" and alone["ebb"]["category"] == "window", alone
                [ours] = [e for e in report["ebbOnly"] if e["id"] == decision["id"]]
                assert ours["kept"] == [first["ebb"]] and ours["savingsPerHour"] == pytest.approx(
                    float(decision["savings"])) and ours["saved"] > 0
                counts = report["counts"]
                assert counts["karpenterRemovals"] == len(report["karpenterOnly"]) + len(report["both"])
                assert counts["approved"] >= 1 and counts["ebbOnly"] == len(report["ebbOnly"])
                words = await asyncio.to_thread(CliRunner().invoke, cli, [
                    "shadow", "report", "--since", "1h", "--api", system.api, "--token", settings.token])
                assert words.exit_code == 0, words.output
                assert first["kar"] in words.stdout and decision["id"] in words.stdout
                print("\n$ ebb shadow report --since 1h\n" + words.stdout)

                # nothing left the store; Karpenter disrupted; every service still runs
                assert await query(database_url, "SELECT 1 FROM outbox WHERE cluster = $1", settings.cluster) == []
                assert await query(database_url, "SELECT 1 FROM budget_ledger WHERE cluster = $1",
                                   settings.cluster) == []
                assert (await kit.metrics()).value(DECISIONS) > before.value(DECISIONS)
                system.check_running()
            # the processes are stopped: every request they sent is in the log
            events = audit.events(since)
            ebb_writes = [e for e in events if e.by_ebb and e.verb in WRITES]
            assert [str(e) for e in ebb_writes if (e.resource, e.name) != ("leases", settings.lease)] == []
            assert any(e.component == "ebb-consolidation-planner" for e in ebb_writes), "no Lease write was audited"
            assert not any(e.by_ebb and e.subresource == "eviction" for e in events)
    finally:
        for name in policies:
            with contextlib.suppress(ApiException):
                await custom.delete_cluster_custom_object(EBB, "v1", "disruptionpolicies", name)


def _running(kit: KarpenterKit, app: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def running() -> bool:
        return len(await kit.running_pods(app)) == count

    return running


async def _gone(kit: KarpenterKit, node: str) -> bool:
    return await kit.node(node) is None


def _seen(history: NodeHistory, pool: str) -> set[str]:
    """The Nodes of ``pool`` the watch saw."""
    return {name for name in history.names()
            if any((v.get("metadata") or {}).get("labels", {}).get("karpenter.sh/nodepool") == pool
                   for v in history.versions(name))}

