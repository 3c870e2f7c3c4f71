"""`ebb shadow report` (docs/cli.md, docs/shadow.md): the report asked of a real decisions-api (uvicorn in a thread,
on a SQLite store holding what a shadow planner kept), in words and as the API's JSON; a period that is none, no
``--api`` and a refused token exit 2, an API that does not answer exits 1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from pydantic import SecretStr
from typer.testing import CliRunner

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb.adapters.store.models import ShadowRemoval
from ebb.core.recording import Recorder
from ebb_cli.main import app
from ebb_cli.record_cmd import trace_text
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings
from tests.kit.builders import NOW, catalog, disruption_policy, node, nodepool, pod, proposed

TOKEN = "shadow-test-token"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
END = T0 + timedelta(hours=10)


async def _fill(url: str) -> None:
    """A shadow planner's record: s1 approved (n1, Karpenter kept it); Karpenter removed n3 (ebb: a PDB)."""
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "c", shadow=True)
    try:
        await store.propose(proposed("s1", "n1", now=T0 + timedelta(hours=1), savings=0.5))
        await store.approve("s1", node_pools={"n1": "default"}, reason="Empty", allowed={"default": 1}, counted=(),
                            now=T0 + timedelta(hours=2))
        await store.record_removal(ShadowRemoval(
            node="n3", removed_at=T0 + timedelta(hours=5), nodepool="default", instance_type="m5.large",
            removed_by="karpenter", reason="Underutilized", detail="", verdict="pdb-blocks", verdict_inner="",
            verdict_text="n3: PodDisruptionBudget default/web allows no disruption", verdict_at=T0 + timedelta(hours=4),
            price=Decimal("0.096")))
    finally:
        await store.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('shadow') / 'ebb.db'}"
    asyncio.run(_fill(url))
    settings = Settings(token=SecretStr(TOKEN), database_url=url, cluster="c")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings, bus=InMemoryBus(), clock=lambda: END),
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the API did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["shadow", "report", *args])


def test_the_report_in_words_and_as_json(api: str) -> None:
    as_json = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["counts"]["karpenterOnly"] == 1 and report["counts"]["ebbOnly"] == 1
    assert report["ebbOnly"][0]["saved"] == pytest.approx(0.5 * 8)
    words = _invoke("--api", api, "--token", TOKEN, "--since", "1d")
    assert words.exit_code == 0, words.output
    text = words.stdout
    assert "Karpenter removed 1 node(s): ebb would have disrupted 0 of them too, 1 not." in text
    assert "saving 0.5000/h, 4.0000 over the period" in text
    assert "why ebb would have left Karpenter's removals alone: pdb 1" in text
    [n3] = [line for line in text.splitlines() if line.startswith("n3 ")]
    assert "Underutilized" in n3 and "pdb" in n3 and "PodDisruptionBudget default/web" in n3
    [s1] = [line for line in text.splitlines() if line.startswith("s1 ")]
    assert "n1" in s1 and "4.0000" in s1
    # a period that holds nothing of it
    empty = _invoke("--api", api, "--token", TOKEN, "--since", "1h", "--until", "2026-11-20T00:30:00Z",
                    "-o", "json")
    assert empty.exit_code == 0 and json.loads(empty.stdout)["counts"]["shadowDecisions"] == 0


@pytest.mark.parametrize(("args", "code"), [
    (["--since", "a week", "--api", "http://127.0.0.1:1"], 2),
    (["--since", "7d"], 2),
])
def test_bad_input_exits_2(args: list[str], code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EBB_API_URL", raising=False)
    assert _invoke(*args).exit_code == code


def test_a_refused_token_exits_2_and_an_api_that_does_not_answer_exits_1(api: str) -> None:
    refused = _invoke("--api", api, "--token", "wrong")
    assert refused.exit_code == 2 and "answered 401" in refused.output
    away = _invoke("--api", "http://127.0.0.1:1", "--token", TOKEN)
    assert away.exit_code == 1 and "cannot ask" in away.output


def test_help_names_the_verb() -> None:
    assert "report" in CliRunner().invoke(app, ["shadow", "--help"]).stdout


def _recording(tmp_path: Path) -> Path:
    """An hour's recording of a cluster with ebb's DisruptionPolicy: two half-empty nodes, a Job's pods arriving
    and finishing."""
    start = [nodepool(), catalog(), node("n0"), node("n1"), pod("web-a", "n0", cpu="500m"),
             pod("web-b", "n1", cpu="500m"),
             disruption_policy("default", consolidationPolicy="WhenEmptyOrUnderutilized", consolidateAfter="0s",
                               budgets=[{"nodes": "100%"}])]
    recorder = Recorder(start=NOW, documents=start)
    for i in range(2):
        recorder.observe(NOW + timedelta(seconds=60), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", None, phase="Pending", owner=("Job", "batch"), cpu="1"))
        recorder.observe(NOW + timedelta(seconds=900), "Pod", "default", f"job-{i}",
                         pod(f"job-{i}", "n0", phase="Succeeded", owner=("Job", "batch"), cpu="1"))
    path = tmp_path / "recorded.yaml"
    trace = recorder.trace(NOW + timedelta(hours=1), name="recorded")
    path.write_text(trace_text(trace, path))
    return path


def test_the_back_test_of_the_recorded_period(api: str, tmp_path: Path) -> None:
    path = _recording(tmp_path)
    result = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "--trace", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    tested = json.loads(result.stdout)["backtest"]
    assert tested["durationSeconds"] == 3600.0 and tested["start"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    baseline, ours = tested["policies"]
    assert (baseline["name"], ours["name"]) == ("karpenter-default", "recorded policies")
    # the same run as ebb backtest's, under the recording's own policy file
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(disruption_policy("default", consolidationPolicy="WhenEmptyOrUnderutilized",
                                                   consolidateAfter="0s", budgets=[{"nodes": "100%"}])))
    direct = CliRunner().invoke(app, ["backtest", "--trace", str(path), "--policy", str(policy), "-o", "json",
                                      "-j", "1"])
    assert direct.exit_code == 0, direct.output
    runs = {run["name"]: run["summary"] for run in json.loads(direct.stdout)["policies"]}
    assert baseline["cost"] == runs["karpenter-default"]["node_hours_cost"]
    assert ours["cost"] == runs["policy"]["node_hours_cost"] and ours["evictions"] == runs["policy"]["evictions"]
    words = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "--trace", str(path))
    assert words.exit_code == 0 and "Back-test of the recorded period" in words.stdout
    # a trace that is no recording, and a policy without a trace
    builtin = _invoke("--api", api, "--token", TOKEN, "--trace", "diurnal")
    assert builtin.exit_code == 2
    assert _invoke("--api", api, "--token", TOKEN, "--policy", str(policy)).exit_code == 2
