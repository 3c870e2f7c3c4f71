"""The chaos run, short (tests/kit/chaos.py has the invariants): ebb's six services SIGKILLed at
random while a workload scales up and down on KWOK nodes, PostgreSQL, Kafka and the kube-apiserver restarted once
each, spot interruptions sent to SQS; then every invariant holds, no service crashed on its own, and the run did
real work (kills, decisions, evictions). ``EBB_CHAOS_MINUTES`` (default 2.5) and ``EBB_CHAOS_NODES`` (default 20)
make it longer and bigger; ``EBB_CHAOS_DOWN_SECONDS`` (default 8) leaves each server down longer. ``python -m bench
chaos`` runs it for 10 minutes on 40 nodes and writes the report (``EBB_CHAOS_REPORT``: a JSON file) for
docs/reliability.md. A run with violations prints what the PodDisruptionBudgets said through it and keeps the
control plane's logs beside its services' (``cluster-logs`` in the test's tmp_path).

And two kills at chosen points of a decision (the planner's ``EXIT_AT`` fault injection: the process exits at once,
as on SIGKILL, when its outbox relay is about to publish): between a proposal's commit and its approval, and
between an approval's commit and the publish of its command. The restarted planner (the next Lease holder)
resumes the decision from its row and relays what the dead one left in the outbox: the decision ends succeeded,
its command is on the topic once, each of its steps once, and its node is gone."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from ebb.contracts import TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS, DisruptionCommand, from_kafka
from tests.kit.chaos import Chaos, ChaosPlan
from tests.kit.servers import AwsEndpoint, Infra, KafkaServer, KubernetesCluster, PostgresServer
from tests.kit.system import (
    Sandbox,
    System,
    TopicReader,
    create_nodepool,
    jv,
    kwok_node,
    node_gone,
    nodepool,
    nodes_ready,
    query,
)
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration


def _work_dir() -> Path:
    """Under /tmp: PostgreSQL runs as the postgres user when the tests run as root, and must reach its data."""
    work = Path(tempfile.mkdtemp(prefix="ebb-chaos-"))
    work.chmod(0o755)
    return work


def _write(path: Path, text: str) -> None:
    path.write_text(text)


async def test_chaos_run_keeps_every_invariant(kube_api: Any, kubernetes_cluster: KubernetesCluster,
                                               aws_endpoint: AwsEndpoint, infra: Infra, tmp_path: Path,
                                               kafka_server: KafkaServer, postgres_server: PostgresServer) -> None:
    # (kafka_server and postgres_server are not used: asking for them has the fixtures install Kafka's jars and
    # PostgreSQL's binaries, which the run's private servers are started from, when this test runs alone)
    plan = ChaosPlan(minutes=float(os.environ.get("EBB_CHAOS_MINUTES", "2.5")),
                     nodes=int(os.environ.get("EBB_CHAOS_NODES", "20")),
                     seed=int(os.environ.get("EBB_CHAOS_SEED", "1")),
                     server_down_seconds=float(os.environ.get("EBB_CHAOS_DOWN_SECONDS", "8")))
    audit = infra.settings("kubernetes").get("KUBE_AUDIT_LOG")
    work = _work_dir()
    try:
        chaos = Chaos(plan, kube_api, str(kubernetes_cluster.kubeconfig), aws_endpoint.endpoint_url,
                      Path(audit) if audit else None, work, progress=lambda text: print(f"[chaos] {text}", flush=True))
        report = await chaos.run()
    finally:
        if (tmp_path / "logs").exists():
            shutil.rmtree(tmp_path / "logs")
        if (work / "logs").exists():
            shutil.copytree(work / "logs", tmp_path / "logs")
        shutil.rmtree(work, ignore_errors=True)
    print(report.markdown())
    if report.violations and (own := getattr(infra, "own_dir", None)) is not None and (own / "logs").exists():
        # the control plane's logs (the controller-manager's PDB and node lifecycle, KWOK's pod stages) explain
        # most violations; the session's own copy goes when the servers stop
        shutil.copytree(own / "logs", tmp_path / "cluster-logs", dirs_exist_ok=True)
        print(f"[chaos] the control plane's logs are kept in {tmp_path / 'cluster-logs'}")
    if target := os.environ.get("EBB_CHAOS_REPORT"):
        _write(Path(target), json.dumps(report.as_json(), indent=2))
    assert report.violations == [], report.markdown()
    assert report.crashes == [], report.markdown()
    assert sum(report.kills.values()) >= plan.minutes * 60 / plan.kill_every[1] / 2, report.markdown()
    assert len(report.server_restarts) == (3 if audit else 2), report.markdown()
    assert report.decisions["succeeded"] > 0 and report.evictions[201] > 0, report.markdown()
    assert report.interruptions_sent == plan.interruptions, report.markdown()
    assert report.samples > plan.minutes * 20, report.markdown()
    # readiness was asked during every server's restart, and some service running then said it was not ready
    assert set(report.not_ready_during) == {"postgresql", "kafka"} | ({"apiserver"} if audit else set())
    assert all(report.not_ready_during.values()), report.markdown()


# -- kills at chosen points of a decision ------------------------------------------------------------------------

#: the planner's fault injection (``Settings.exit_at``) and the exit status it ends the process with
EXIT_AT = "EBB_CONSOLIDATION_PLANNER_EXIT_AT"
EXIT_AT_STATUS = 70




@pytest.mark.parametrize("point", ["proposed", "approved"])
async def test_a_planner_killed_between_a_commit_and_its_publish_loses_nothing_and_does_nothing_twice(
        kube_api: Any, box: Sandbox, point: str) -> None:
    """One empty KWOK node, the watcher, the planner and the executor. The planner exits at ``point``: after the
    proposal's commit, before anything of it is published or approved (``proposed``); or after the approval's
    commit, before its command is published (``approved``). Nothing of the decision reached Kafka that its row
    does not already say. Restarted without the fault, the planner takes the Lease again, resumes the decision
    from its row and relays what the dead process left: one decision, succeeded; one command; each step once;
    the node gone."""
    core = client.CoreV1Api(kube_api)
    run = box.run
    name = f"sys-{run}-empty"
    box.nodes.append(name)
    await core.create_node(kwok_node(name, box.pool, run))
    await eventually("the node Ready", lambda: nodes_ready(kube_api, [name]), within=60)
    system = System(box.servers, box.settings, box.log_dir,
                    only=("cluster-watcher", "consolidation-planner", "termination-executor"))
    planner = system["consolidation-planner"]
    planner.env[EXIT_AT] = point

    def commands(decision_id: str) -> list[DisruptionCommand]:
        found = [from_kafka(TOPIC_DISRUPTION_COMMANDS, r.key, r.value, list(r.headers))
                 for r in reader.on(TOPIC_DISRUPTION_COMMANDS)]
        return [c for c in found if isinstance(c, DisruptionCommand) and c.decision_id == decision_id]

    async with TopicReader(box.servers.kafka_bootstrap, box.settings.prefix,
                           [TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS]) as reader, system:
        await create_nodepool(kube_api, nodepool(box.pool, run, budget="1", consolidate_after="0s"))

        async def exited() -> bool:
            return planner.process is not None and planner.process.returncode is not None

        await eventually(f"the planner exiting at {point}", exited, within=120, on_timeout=system.tails)
        assert planner.process is not None and planner.process.returncode == EXIT_AT_STATUS, planner.tail()
        [decision] = await box.decisions()
        assert [n["name"] for n in jv(decision["nodes"])] == [name]
        assert decision["state"] == point, dict(decision)
        await asyncio.sleep(2)  # what the dead process sent would be on the topics by now
        sent = [e.phase for e in reader.events() if e.decision_id == decision["id"]]
        assert commands(decision["id"]) == []
        assert sent == ([] if point == "proposed" else ["Proposed"]), sent
        unsent = await _outbox(box, decision["id"])
        assert unsent, "what the dead process did not publish waits in the outbox"

        del planner.env[EXIT_AT]
        await planner.start()
        await system.wait_started("consolidation-planner")

        async def succeeded() -> bool:
            system.check_running()
            rows = await box.decisions()
            return bool(rows) and rows[0]["state"] == "succeeded"

        await eventually("the decision resumed and succeeded", succeeded, within=150, on_timeout=system.tails)
        assert await eventually("the node gone", lambda: node_gone(core, name), within=60)
        await eventually("the Terminated event", lambda: any(
            e.phase == "Terminated" for e in reader.events() if e.decision_id == decision["id"]), within=30)
        await asyncio.sleep(3)  # anything sent twice would have arrived by now
        rows = await box.decisions()
        assert [(d["id"], d["state"]) for d in rows] == [(decision["id"], "succeeded")], [dict(d) for d in rows]
        [command] = commands(decision["id"])
        assert command.nodes == (name,)
        steps = Counter((e.node, e.phase) for e in reader.events() if e.decision_id == decision["id"])
        assert {phase for _, phase in steps} >= {"Proposed", "Approved", "Tainted", "Terminated"}, steps
        assert all(count == 1 for count in steps.values()), steps
        timeline = Counter(t["type"] for t in await box.timeline(decision["id"]))
        assert all(count == 1 for count in timeline.values()) and timeline.keys() == {p for _, p in steps}, timeline
        assert await _outbox(box, decision["id"]) == []
        system.check_running()


async def _outbox(box: Sandbox, decision_id: str) -> list[Any]:
    """The unsent outbox messages of ``decision_id``."""
    return await query(box.servers.database_url,
                       "SELECT id, topic FROM outbox WHERE decision_id = $1 AND sent_at IS NULL ORDER BY id",
                       decision_id)
