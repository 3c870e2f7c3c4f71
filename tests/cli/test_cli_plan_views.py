"""What a terminal user sees of `ebb plan` (docs/cli.md): full names off a terminal and with ``-o wide``, ``-o yaml``
as the JSON document, ``--summary`` that fits a screen, ``--nodepool``, and boolean options shown and taken as
``--flag/--no-flag``; on the example cluster of examples/ (300 nodes) and the Karpenter example."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app

REPO = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO / "examples" / "cluster.yaml")
KARPENTER = str(REPO / "examples" / "karpenter.yaml")
NOW = ["--now", "2026-11-23T18:30:00Z"]
#: a terminal of 80 columns, without colours (rich reads these)
TERMINAL = {"TTY_COMPATIBLE": "1", "COLUMNS": "80", "NO_COLOR": "1"}
#: what a screen holds: the summary of a 300-node plan must fit in it
SCREEN_LINES = 60


#: the styles (bold, italic) a terminal gets even without colours
STYLE = re.compile(r"\x1b\[[0-9;]*m")


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return STYLE.sub("", result.stdout)


@pytest.fixture(scope="module")
def cluster_json() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_run("plan", "-f", CLUSTER, *NOW, "-o", "json"))
    return loaded


def _pools() -> dict[str, str]:
    """Node name to NodePool (the karpenter.sh/nodepool label) in the example cluster."""
    docs = [d for d in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text(encoding="utf-8")) if d]
    items = [i for d in docs for i in (d.get("items", [d]) if d.get("kind", "").endswith("List") else [d])]
    return {n["metadata"]["name"]: n["metadata"].get("labels", {}).get("karpenter.sh/nodepool", "")
            for n in items if n.get("kind") == "Node"}


def test_piped_table_names_every_node_in_full(cluster_json: dict[str, Any]) -> None:
    out = _run("plan", "-f", CLUSTER, *NOW)
    assert "…" not in out
    lines = out.splitlines()
    for entry in cluster_json["blocked"]:
        row = next((line for line in lines if f" {entry['node']} " in line), None)
        assert row is not None, entry["node"]
        assert entry["reason"] in row  # the reason on the node's line, uncut: grep finds both
    for name in cluster_json["commands"][0]["nodes"]:
        assert name in out


def test_terminal_table_fits_the_terminal_and_wide_does_not_cut(cluster_json: dict[str, Any]) -> None:
    narrow = _run("plan", "-f", CLUSTER, *NOW, env=TERMINAL)
    assert max(len(line) for line in narrow.splitlines()) <= int(TERMINAL["COLUMNS"])
    wide = _run("plan", "-f", CLUSTER, *NOW, "-o", "wide", env=TERMINAL)
    assert "…" not in wide
    lines = wide.splitlines()
    pools = _pools()
    for entry in cluster_json["blocked"]:
        row = next(line for line in lines if f" {entry['node']} " in line)
        cells = [cell.strip() for cell in row.split("│")]
        assert pools[entry["node"]] in cells  # wide adds the NodePool and the cause
        assert entry["reason"] in row
    header = next(line for line in lines if "reason" in line and "cause" in line)
    assert "nodePool" in header
    command = cluster_json["commands"][0]
    assert command["explanation"] in wide


def test_yaml_is_the_json_document(cluster_json: dict[str, Any]) -> None:
    assert yaml.safe_load(_run("plan", "-f", CLUSTER, *NOW, "-o", "yaml")) == cluster_json
    until_stable_json = json.loads(_run("plan", "-f", KARPENTER, *NOW, "--until-stable", "-o", "json"))
    until_stable_yaml = yaml.safe_load(_run("plan", "-f", KARPENTER, *NOW, "--until-stable", "-o", "yaml"))
    assert until_stable_yaml == until_stable_json
    assert "steps" in until_stable_yaml


def _table_rows(out: str, title: str) -> list[list[str]]:
    """The body rows of the table titled ``title``, as cells."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows: list[list[str]] = []
    body = False
    for line in lines[start + 1:]:
        if line.startswith(("┡", "├")):
            body = True
            continue
        if line.startswith("└"):
            break
        if body and line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_summary_fits_a_screen_and_counts_what_the_table_lists(cluster_json: dict[str, Any]) -> None:
    full = _run("plan", "-f", CLUSTER, *NOW)
    out = _run("plan", "-f", CLUSTER, *NOW, "--summary")
    assert len(out.splitlines()) <= SCREEN_LINES < len(full.splitlines())
    blocked = cluster_json["blocked"]
    assert f"Not disrupted: {len(blocked)} nodes, per cause" in out
    per_cause = {row[0]: int(row[1]) for row in _table_rows(out, "Not disrupted:")}
    assert sum(per_cause.values()) == len(blocked)
    assert len(per_cause) > 1
    pools = _pools()
    per_pool = {row[0]: (int(row[1]), int(row[2])) for row in _table_rows(out, "Per NodePool")}
    assert {pool: left for pool, (_, left) in per_pool.items() if left} == dict(
        Counter(pools[b["node"]] for b in blocked))
    assert {pool: now for pool, (now, _) in per_pool.items() if now} == dict(
        Counter(pools[n] for c in cluster_json["commands"] for n in c["nodes"]))
    budgets = _table_rows(out, "Budgets")
    assert {row[0] for row in budgets} == {b["nodePool"] for b in cluster_json["budgets"]}
    cost = cluster_json["cost"]
    assert f"${cost['before']:.4f}/h now, ${cost['after']:.4f}/h after this pass" in out
    for command in cluster_json["commands"]:
        assert command["method"] in out
        assert command["explanation"] not in out
    wide = _run("plan", "-f", CLUSTER, *NOW, "--summary", "-o", "wide")  # wide: the commands as -o wide shows them
    assert len(wide.splitlines()) <= SCREEN_LINES
    for command in cluster_json["commands"]:
        assert command["explanation"] in wide


def test_summary_is_a_table_view() -> None:
    result = CliRunner().invoke(app, ["plan", "-f", CLUSTER, *NOW, "--summary", "-o", "json"])
    assert result.exit_code == 2
    assert "--summary" in result.output


def test_nodepool_keeps_only_that_nodepool(cluster_json: dict[str, Any]) -> None:
    pools = _pools()
    out = json.loads(_run("plan", "-f", CLUSTER, *NOW, "--nodepool", "memory", "-o", "json"))
    assert out["blocked"] == [b for b in cluster_json["blocked"] if pools[b["node"]] == "memory"]
    assert out["blocked"]
    assert {b["nodePool"] for b in out["budgets"]} == {"memory"}
    assert out["commands"] == [c for c in cluster_json["commands"] if any(pools[n] == "memory" for n in c["nodes"])]
    assert out["cost"] == cluster_json["cost"]  # the cost stays the cluster's, as with --node
    two = json.loads(_run("plan", "-f", CLUSTER, *NOW, "--nodepool", "memory", "--nodepool", "batch", "-o", "json"))
    assert {pools[b["node"]] for b in two["blocked"]} == {"memory", "batch"}
    table = _run("plan", "-f", CLUSTER, *NOW, "--nodepool", "batch")
    assert "Commands that disrupt these nodes" in table
    listed = {name for name, pool in pools.items() if re.search(rf" {re.escape(name)} ", table)}
    assert {pools[name] for name in listed} == {"batch"}


def test_unknown_nodepool_exits_2_with_a_hint() -> None:
    result = CliRunner().invoke(app, ["plan", "-f", CLUSTER, *NOW, "--nodepool", "memroy"])
    assert result.exit_code == 2
    assert "--nodepool" in result.output
    assert "did you mean memory" in result.output


@pytest.mark.parametrize("command", [[], ["plan"], ["explain"], ["run"], ["backtest"], ["db"], ["db", "upgrade"]],
                         ids=lambda c: " ".join(["ebb", *c]))
def test_boolean_options_are_flags_in_the_help(command: list[str]) -> None:
    out = _run(*command, "--help", env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "--help" in out
    assert "<bool>" not in out
    if command and command[0] in {"plan", "explain", "run", "backtest"}:
        live = next(line for line in out.splitlines() if "--live" in line and "--kubeconfig" not in line)
        assert "--no-live" in live


def test_a_flag_can_be_turned_off() -> None:
    on = json.loads(_run("plan", "-f", KARPENTER, *NOW, "--until-stable", "-o", "json"))
    off = json.loads(_run("plan", "-f", KARPENTER, *NOW, "--until-stable", "--no-until-stable", "-o", "json"))
    assert "steps" in on
    assert "steps" not in off


@pytest.mark.parametrize("view", [[], ["-o", "wide"], ["--summary"], ["--node", "a"]])
def test_a_reason_with_brackets_is_shown_as_written(tmp_path: Path, view: list[str]) -> None:
    """A Hold's reason is the user's text: ``[/ops/freeze]`` is no markup (Rich failed on it and dropped
    ``[red]...[/red]``); every table view shows it as the JSON has it."""
    from tests.kit.builders import hold, node, nodepool, pod

    frozen = hold("freeze", "node", "a", reason="see [/ops/freeze] and [red]INC-7[/red]")
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump_all([nodepool(), node("a"), pod("web", "a"), node("b"), frozen]))
    reasons = {b["node"]: b["reason"] for b in json.loads(_run("plan", "-f", str(path), *NOW, "-o", "json"))["blocked"]}
    assert "[/ops/freeze]" in reasons["a"] and "[red]INC-7[/red]" in reasons["a"]
    out = " ".join(_run("plan", "-f", str(path), *NOW, *view, env={**TERMINAL, "COLUMNS": "400"}).split())
    assert "[/ops/freeze]" in out and "[red]INC-7[/red]" in out
