"""A back-test gives the same result on the memory store as on SQLite (``BacktestOptions.store``): the memory
store (``ebb.adapters.store.memory``) answers as the SQL one does, yields to the loop where it does and moves its
write count where it does, so the planner, the executor and the run read the same things at the same moments, and
the JSON, every series, decision and explanation included, is the same to the last figure. The runs are chosen
so that decisions are made, approved, refused for their budget, executed and interrupted."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ebb.core.traces import Trace
from ebb.core.yaml_documents import parse_yaml
from ebb_cli.common import load_traces
from ebb_cli.main import app
from ebb_embedded.backtest import BacktestOptions, Policy, karpenter_default, policy_of, run_backtest
from tests.kit.backtest import CHURN_CONTROL, bursts, cluster
from tests.kit.builders import NOW, pdb

EXAMPLES = Path(__file__).parents[2] / "examples"


def _both(documents: Sequence[Any], trace: Trace, policies: list[Policy], options: BacktestOptions,
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    memory = run_backtest(documents, trace, policies, options)
    sqlite = run_backtest(documents, trace, policies, dataclasses.replace(options, store="sqlite"))
    return memory, sqlite


def _decisions(result: dict[str, Any]) -> dict[str, int]:
    made: dict[str, int] = {}
    for run in result["policies"]:
        for key, n in run["summary"]["decisions"].items():
            made[key] = made.get(key, 0) + n
    return made


def test_bursts_under_two_policies_back_test_the_same_on_either_store() -> None:
    options = BacktestOptions(start=NOW, duration=timedelta(minutes=25), seed=1, sample_every=60)
    calm = policy_of("churn-control", "(test)", [CHURN_CONTROL])
    memory, sqlite = _both(cluster(), Trace.model_validate(bursts()), [karpenter_default(), calm], options)
    assert sum(n for key, n in _decisions(memory).items() if key.endswith("/succeeded")) >= 1
    assert json.dumps(memory, sort_keys=True) == json.dumps(sqlite, sort_keys=True)


def test_interruptions_against_pdbs_back_test_the_same_on_either_store() -> None:
    trace = Trace.model_validate({"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "spot-loss", "events": [
        {"at": "2m", "interrupt": {"node": "n0"}}, {"at": "10m", "interrupt": {"node": "n1"}}]})
    docs = [*cluster(), *(pdb(f"keep-{name}", {"app": name}, max_unavailable=0) for name in ("web-1", "web-3"))]
    options = BacktestOptions(start=NOW, duration=timedelta(minutes=20), seed=2, sample_every=60)
    memory, sqlite = _both(docs, trace, [karpenter_default()], options)
    assert _decisions(memory).get("interruption/succeeded", 0) + _decisions(memory).get("interruption/failed", 0) >= 1
    assert json.dumps(memory, sort_keys=True) == json.dumps(sqlite, sort_keys=True)


@pytest.mark.parametrize("traces", [["batch-bursts", "drift"]], ids="+".join)
def test_the_example_cluster_back_tests_the_same_on_either_store(traces: list[str]) -> None:
    text = (EXAMPLES / "karpenter.yaml").read_text(encoding="utf-8")
    documents = [d for d in parse_yaml(text, "karpenter.yaml") if d]
    policy_text = (EXAMPLES / "backtest" / "churn-control.yaml").read_text(encoding="utf-8")
    calm = policy_of("churn-control", "churn-control.yaml", parse_yaml(policy_text, "churn-control.yaml"))
    duration = timedelta(hours=1)
    trace = load_traces(traces, documents, start=NOW, duration=duration.total_seconds(), seed=3)
    options = BacktestOptions(start=NOW, duration=duration, seed=3)
    memory, sqlite = _both(documents, trace, [karpenter_default(), calm], options)
    assert sum(_decisions(memory).values()) >= 2
    assert json.dumps(memory, sort_keys=True) == json.dumps(sqlite, sort_keys=True)


def test_ebb_run_on_memory_gives_the_summary_of_ebb_run_on_a_database_file(tmp_path: Path) -> None:
    """``ebb run`` keeps its decisions in memory unless given ``--database``; the example cluster ebb ships (50
    nodes) has decisions that succeeded and decisions rejected in half an hour, and the summary is the same either way
    but for the file."""
    args = ["run", "--start", "2026-11-23T18:30:00Z", "--duration", "30m", "-o", "json"]
    memory = CliRunner().invoke(app, args)
    assert memory.exit_code == 0, memory.output
    database = tmp_path / "ebb.db"
    sqlite = CliRunner().invoke(app, [*args, "--database", str(database)])
    assert sqlite.exit_code == 0, sqlite.output
    on_memory, on_sqlite = json.loads(memory.stdout), json.loads(sqlite.stdout)
    assert (on_memory.pop("database"), on_sqlite.pop("database")) == (None, str(database))
    ends = {state for states in on_memory["decisions"].values() for state in states}
    assert {"succeeded", "rejected"} <= ends
    assert on_memory == on_sqlite
