"""`ebb plan --mode` (docs/cli.md): ``shadow``, the default, reports the conflicts with Karpenter and plans the
NodePool as if it were handed over, the answer to "what would ebb do in Karpenter's place?" that a dry run on a dump
of a Karpenter cluster asks (the adoption guide's first step, docs/adopting.md); ``enforce`` refuses a NodePool that
Karpenter may still disrupt, as ebb deployed does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from ebb_cli.main import app
from tests.kit.builders import catalog, node, nodeclaim, nodepool, pod

NOW_ARG = "2026-11-23T18:30:00Z"


def _karpenter_in_charge(tmp_path: Path) -> str:
    """A NodePool whose own budgets and expiry are Karpenter's defaults, an idle node and a busy one, each with its
    NodeClaim (launched with Karpenter's default expiry)."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([
        nodepool(budgets=None), node("idle"), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m"),
        nodeclaim("claim-idle", "idle"), nodeclaim("claim-busy", "busy"), catalog()], sort_keys=False),
        encoding="utf-8")
    return str(path)


def _plan(path: str, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "--provider", "karpenter", "-o", "json",
                                      *extra])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_shadow_reports_the_conflicts_and_plans_the_nodepool_enforce_refuses(tmp_path: Path) -> None:
    path = _karpenter_in_charge(tmp_path)
    enforced, default = _plan(path, "--mode", "enforce"), _plan(path)
    shadow = _plan(path, "--mode", "shadow")
    assert shadow == default  # shadow is the default: a dry run reports the conflicts and plans on
    kinds = [(w["kind"], w["nodePool"]) for w in shadow["warnings"]]
    assert kinds == [(w["kind"], w["nodePool"]) for w in enforced["warnings"]]
    assert ("KarpenterBudgets", "default") in kinds
    # enforce: nothing disrupted, both nodes refused for the conflict
    assert enforced["commands"] == []
    assert sorted(b["node"] for b in enforced["blocked"]) == ["busy", "idle"]
    assert all(b["reason"].startswith("ebb disrupts no node of NodePool default until this conflict is fixed")
               for b in enforced["blocked"])
    # shadow: the idle node is deleted, the busy one stays for a reason of its own, not the conflict
    assert [(c["method"], c["nodes"]) for c in shadow["commands"]] == [("emptiness", ["idle"])]
    [busy] = shadow["blocked"]
    assert busy["node"] == "busy" and "conflict" not in busy["reason"], busy


def test_the_table_prints_the_conflicts_in_either_mode(tmp_path: Path) -> None:
    path = _karpenter_in_charge(tmp_path)
    for mode in ("enforce", "shadow"):
        table = CliRunner().invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "--provider", "karpenter",
                                         "--mode", mode])
        assert table.exit_code == 0, table.output
        assert any(line.startswith("conflict (KarpenterBudgets)") for line in table.stdout.splitlines()), mode
    wrong = CliRunner().invoke(app, ["plan", "-f", path, "--mode", "dry"])
    assert wrong.exit_code == 2
