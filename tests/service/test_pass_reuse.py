"""The planner's pass reuse (``reuse_passes``, ``PassResult.revisit_at``) in the embedded mode changes nothing but
the passes computed: ``ebb run`` and ``ebb backtest`` give the same JSON (apart from the count of passes reused)
and the same decisions and timelines, with reuse on and off. The runs have time-driven answers in them:
consolidateAfter ripening, a stabilization window, expireAfter and a do-not-disrupt duration, a pass cost."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ebb.core.traces import Trace
from ebb_cli.main import app
from ebb_embedded.backtest import BacktestOptions, karpenter_default, policy_of, run_backtest
from tests.kit.backtest import CHURN_CONTROL, bursts, cluster
from tests.kit.builders import NOW, ago, node, nodepool, pdb, pod


def timed_cluster() -> list[dict[str, Any]]:
    """Nine m5.large nodes of a NodePool with consolidateAfter 2m and an expireAfter that runs out during the
    run: an empty one, one whose pod may not be disrupted for 4 more minutes, seven with two 300m pods under a
    PDB that lets two go at a time; one node launched a minute ago (its pods arrived then)."""
    docs: list[dict[str, Any]] = [
        nodepool(consolidate_after="2m", expire_after="84h10m"), pdb("web", {"app": "web"}, min_available=12),
        node("empty"), node("guarded"),
        pod("guarded-0", "guarded", cpu="300m", started=ago(minutes=1),
            annotations={"karpenter.sh/do-not-disrupt": "5m"})]
    for i in range(7):
        created = ago(minutes=1) if i == 0 else "2026-11-20T00:00:00Z"
        docs.append(node(f"n{i}", created=created))
        docs.extend(pod(f"web-{i}-{j}", f"n{i}", cpu="300m", memory="512Mi", labels={"app": "web"},
                        started=created) for j in range(2))
    return docs


def run_json(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, Any], list[Any]]:
    """``ebb run`` on the timed cluster: its JSON summary and the decisions and timelines in its database."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": timed_cluster()}))
    database = tmp_path / f"{name}.sqlite"
    result = CliRunner().invoke(app, ["run", "-f", str(cluster), "--start", "2026-11-23T18:30:00Z", "--duration",
                                      "20m", "--seed", "7", "-o", "json", "--database", str(database), *args])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    summary.pop("database")
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, method, reason, state, nodes, replacements, created_at, approved_at, finished_at "
                          "FROM decisions ORDER BY created_at, id").fetchall()
        rows += db.execute("SELECT id, decision_id, CASE WHEN type IN ('Launching', 'WaitingReadiness') THEN NULL "
                           "ELSE event_id END, type, node, at, detail FROM decision_events ORDER BY id").fetchall()
    return summary, rows


@pytest.mark.parametrize("pass_cost", ["0s", "3s"])
def test_ebb_run_is_the_same_with_passes_reused_or_not(tmp_path: Path, pass_cost: str) -> None:
    reused, reused_rows = run_json(tmp_path, "reused", "--pass-cost", pass_cost)
    computed, computed_rows = run_json(tmp_path, "computed", "--pass-cost", pass_cost, "--no-reuse-passes")
    assert computed.pop("passesReused") == 0
    assert reused.pop("passesReused") > 0, "some passes were answered from the last one"
    assert reused == computed
    assert reused_rows == computed_rows
    assert computed["nodesDeleted"] > 0 and len(computed_rows) >= 10


def test_ebb_backtest_is_the_same_with_passes_reused_or_not() -> None:
    calm = policy_of("churn-control", "(test)", [CHURN_CONTROL])
    results = []
    for reuse in (True, False):
        options = BacktestOptions(start=NOW, duration=timedelta(minutes=30), seed=3, sample_every=60,
                                  reuse_passes=reuse)
        results.append(run_backtest(cluster(), Trace.model_validate(bursts()), [karpenter_default(), calm], options))
    reused, computed = results
    for run in computed["policies"]:
        assert run["summary"].pop("planner_passes_reused") == 0
    for run in reused["policies"]:
        assert run["summary"].pop("planner_passes_reused") > 0
    assert reused == computed
    assert computed["policies"][0]["summary"]["launches"] > 0
