"""The chaos run, short (tests/kit/chaos.py has the invariants): ebb's six services SIGKILLed at
random while a workload scales up and down on KWOK nodes, PostgreSQL, Kafka and the kube-apiserver restarted once
each, spot interruptions sent to SQS; then every invariant holds, no service crashed on its own, and the run did
real work (kills, decisions, evictions). ``EBB_CHAOS_MINUTES`` (default 2.5) and ``EBB_CHAOS_NODES`` (default 20)
make it longer and bigger; ``python -m bench chaos`` runs it for 10 minutes on 40 nodes and writes the report
(``EBB_CHAOS_REPORT``: a JSON file) for docs/reliability.md."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.kit.chaos import Chaos, ChaosPlan
from tests.kit.servers import AwsEndpoint, Infra, KafkaServer, KubernetesCluster, PostgresServer

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
                     seed=int(os.environ.get("EBB_CHAOS_SEED", "1")))
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
