"""`ebb plan` on hand-written snapshots, each held to what Karpenter v1.14.1 does with it (or to ebb's documented
difference, where docs/decisions.md lists one).

tests/scenarios/ holds them, one folder per area (`scheduling`: where a consolidation's pods may go, the pod's
requests, taints, affinities, spreads, host ports, volumes and DaemonSets; `budgets`: disruption budgets, their
schedules and reasons, expiration, NodePool weights and limits, several NodePools, `--until-stable`; `drift`: the
NodePool hash, requirements and their operators, offerings gone, static NodePools, drift's replacements; `prices`:
spot-to-spot, capacity types, reserved and unavailable offerings, NodePool weights, Balanced's scores; `emptiness`:
what keeps a node from empty, timing, do-not-disrupt and PDBs; `merges`: multi-node consolidation and `--until-stable`
end states held to the cheapest feasible cost; `consolidation`: one pass across the methods on small clusters), each
``NAME.yaml`` beside ``NAME.expect.yaml`` in the format of the product's shared scenarios: what the plan's JSON
must show (the keys are `EXPECTATIONS`'). Each expectation was worked out from Karpenter's source, not from ebb's
output; a change that makes one fail changes what ebb decides against Karpenter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
EPSILON = 1e-6

Plan = dict[str, Any]


def _disrupted(plan: Plan) -> set[str]:
    return {name for command in plan["commands"] for name in command["nodes"]}


def _replacements(plan: Plan) -> list[dict[str, Any]]:
    return [r for command in plan["commands"] for r in command.get("replacements") or []]


def _final_cost(plan: Plan) -> float:
    cost = plan["steps"][-1]["cost"]
    return float(cost["after"] if isinstance(cost, dict) else cost)


def _budget_listed(plan: Plan, want: dict[str, Any]) -> bool:
    return any(b["reason"] == want["reason"] and b["allowed"] == want["allowed"]
               and ("nodePool" not in want or b.get("nodePool") == want["nodePool"]) for b in plan["budgets"])


#: each expectation key -> whether the plan meets it, given the expected value
EXPECTATIONS: dict[str, Callable[[Plan, Any], bool]] = {
    "commands_empty": lambda plan, want: (plan["commands"] == []) is bool(want),
    "methods": lambda plan, want: bool(plan["commands"]) and all(c["method"] in want for c in plan["commands"]),
    "reason": lambda plan, want: all(c["reason"] == want for c in plan["commands"]),
    "action": lambda plan, want: bool(plan["commands"]) and all(c["action"] == want for c in plan["commands"]),
    "nodes_exact": lambda plan, want: _disrupted(plan) == set(want),
    "nodes_count": lambda plan, want: len(_disrupted(plan)) == want,
    "nodes_exclude": lambda plan, want: not _disrupted(plan) & set(want),
    "replacement_price_max": lambda plan, want: bool(_replacements(plan)) and all(
        r["price"] <= want + EPSILON for r in _replacements(plan)),
    "replacements_count": lambda plan, want: len(_replacements(plan)) == want,
    "replacement_capacity_type": lambda plan, want: bool(_replacements(plan)) and all(
        r["capacityType"] == want for r in _replacements(plan)),
    "replacement_zones_subset": lambda plan, want: bool(_replacements(plan)) and all(
        r.get("zones") and set(r["zones"]) <= set(want) for r in _replacements(plan)),
    "budgets_allowed": lambda plan, want: all(_budget_listed(plan, w) for w in want),
    "budget_allowed": _budget_listed,
    "cost_after_max": lambda plan, want: plan["cost"]["after"] <= want + EPSILON,
    "blocked_includes": lambda plan, want: any(
        b["node"] == want["node"] and any(t.lower() in b["reason"].lower() for t in want["text_any"])
        for b in plan["blocked"]),
    "nodes_count_by_prefix": lambda plan, want: all(
        len([n for n in _disrupted(plan) if n.startswith(prefix)]) == count for prefix, count in want.items()),
    "final_cost_max": lambda plan, want: _final_cost(plan) <= want + EPSILON,
    "final_cost_min": lambda plan, want: _final_cost(plan) >= want - EPSILON,
    "first_pass_nodes_min": lambda plan, want: len(
        {n for c in plan["steps"][0]["commands"] for n in c["nodes"]}) >= want,
}
#: keys that say how to run the plan, not what it shows
HOW = {"now", "args"}


def _cases() -> list[Any]:
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}")
            for path in sorted(SCENARIOS.glob("*/*.yaml")) if not path.name.endswith(".expect.yaml")]


def test_every_scenario_has_its_expectations_and_only_known_keys() -> None:
    cases = _cases()
    assert len(cases) >= 490, len(cases)
    for case in cases:
        path: Path = case.values[0]
        expect = yaml.safe_load(path.with_name(f"{path.stem}.expect.yaml").read_text(encoding="utf-8"))
        unknown = set(expect) - set(EXPECTATIONS) - HOW
        assert not unknown, (path.name, unknown)
        assert set(expect) - HOW, f"{path.name} expects nothing"


@pytest.mark.parametrize("path", _cases())
def test_the_plan_does_what_karpenter_does(path: Path) -> None:
    expect = yaml.safe_load(path.with_name(f"{path.stem}.expect.yaml").read_text(encoding="utf-8"))
    args = [str(a) for a in expect.get("args", [])]
    if "now" in expect and "--now" not in args:
        args += ["--now", str(expect["now"])]
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json", *args])
    assert result.exit_code == 0, result.output[-2000:]
    plan: Plan = json.loads(result.stdout)
    failed = {key: want for key, want in expect.items() if key not in HOW and not EXPECTATIONS[key](plan, want)}
    shown = {"commands": [(c["method"], c["action"], c["nodes"], [r.get("instanceTypes", [])[:3] for r in
                                                                  c.get("replacements") or []])
                          for c in plan["commands"]],
             "blocked": [(b["node"], b["reason"][:200]) for b in plan["blocked"][:5]]}
    assert not failed, (failed, shown)
