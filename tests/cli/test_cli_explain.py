"""`ebb explain NODE` (docs/cli.md): the plan's answer for a node in words, the same as ``ebb plan --node NODE``;
``-o json|yaml`` print that command's document; on the example cluster of examples/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app
from tests.kit.builders import budget_bound_cluster, repack_cluster

REPO = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO / "examples" / "cluster.yaml")
NOW = ["--now", "2026-11-23T18:30:00Z"]


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def whole() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_run("plan", "-f", CLUSTER, *NOW, "-o", "json"))
    return loaded


def test_explain_a_node_left_alone(whole: dict[str, Any]) -> None:
    entry = whole["blocked"][0]
    out = _run("explain", entry["node"], "-f", CLUSTER, *NOW)
    first = out.splitlines()[0]
    assert first.startswith(f"{entry['node']} (NodePool ")
    assert f"stays this pass: {entry['reason']} [{entry['method']}]" in first
    assert "cause: " in out
    pool = first.split("(NodePool ", 1)[1].split(")", 1)[0]
    for budget in (b for b in whole["budgets"] if b["nodePool"] == pool):
        assert f"{budget['reason']} {budget['allowed']}" in out


def test_explain_a_disrupted_node(whole: dict[str, Any]) -> None:
    command = whole["commands"][0]
    name = command["nodes"][0]
    out = _run("explain", name, "-f", CLUSTER, *NOW)
    assert f"{name} (NodePool " in out
    assert f"disrupted this pass by {command['method']} ({command['action']}" in out
    assert f"why: {command['explanation']}" in out
    assert f"saves: ${command['savingsPerHour']:.4f}/h" in out
    for other in command["nodes"][1:]:
        assert other in out


def test_explain_says_what_plan_node_says(whole: dict[str, Any]) -> None:
    name = whole["blocked"][1]["node"]
    plan_line = _run("plan", "-f", CLUSTER, *NOW, "--node", name, "--until-stable").splitlines()[0]
    explained = _run("explain", name, "-f", CLUSTER, *NOW, "--until-stable")
    assert explained.splitlines()[0] == plan_line
    assert "until stable:" in plan_line


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_explain_documents_are_plan_nodes(whole: dict[str, Any], output: str) -> None:
    names = [whole["blocked"][0]["node"], whole["commands"][0]["nodes"][0]]
    node_args = [arg for name in names for arg in ("--node", name)]
    expected = json.loads(_run("plan", "-f", CLUSTER, *NOW, *node_args, "-o", "json"))
    out = _run("explain", *names, "-f", CLUSTER, *NOW, "-o", output)
    assert (json.loads(out) if output == "json" else yaml.safe_load(out)) == expected
    assert [b["node"] for b in expected["blocked"]] == names[:1]


def test_explain_an_unknown_node_exits_2_with_a_hint(whole: dict[str, Any]) -> None:
    name = whole["blocked"][0]["node"]
    result = CliRunner().invoke(app, ["explain", name.split(".")[0], "-f", CLUSTER, *NOW])
    assert result.exit_code == 2
    assert f"did you mean {name}" in result.output


def test_explain_needs_an_input() -> None:
    result = CliRunner().invoke(app, ["explain", "some-node"])
    assert result.exit_code == 2
    assert "--live" in result.output


def test_explain_takes_the_plans_max_replacements(tmp_path: Path) -> None:
    """Six $1.00 nodes a "two" ($1.50/h) holds three of the pods of: the node a merge of three leaves out says so with
    one replacement, and with two it is in the merge."""
    docs = repack_cluster()
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    planned = json.loads(_run("plan", "-f", str(path), *NOW, "-o", "json"))
    left = sorted({f"n{i}" for i in range(6)} - set(planned["commands"][0]["nodes"]))[0]
    alone = _run("explain", left, "-f", str(path), *NOW)
    assert "stays this pass" in alone.splitlines()[0]
    repacked = _run("explain", left, "-f", str(path), *NOW, "--max-replacements", "2")
    assert "stays this pass" not in repacked.splitlines()[0] and "replaced by 2 nodes" in repacked


def test_explain_takes_the_plans_search(tmp_path: Path) -> None:
    """A budget of two nodes: the greedy search merges the two $1.00 nodes and leaves a $4.00 one; with --search
    optimizer that node is in the merge and says it was the optimizer's choice."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(budget_bound_cluster(), sort_keys=False), encoding="utf-8")
    assert "stays this pass" in _run("explain", "b1", "-f", str(path), *NOW).splitlines()[0]
    optimized = _run("explain", "b1", "-f", str(path), *NOW, "--search", "optimizer")
    assert "stays this pass" not in optimized.splitlines()[0] and "the optimizer's choice" in optimized
