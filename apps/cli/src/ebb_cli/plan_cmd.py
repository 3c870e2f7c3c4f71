"""`ebb plan`: the dry run. Reads a `kubectl get -o yaml` dump and prints what ebb would disrupt now.

Exit codes: 0 with a plan, 2 for bad input (the message names the document and field; nothing else is
printed), 1 for an internal error.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ebb.adapters.snapshot_files import load_snapshot
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import Plan, make_plan, plan_json
from ebb.core.quantity import TIME_EXAMPLE, parse_time
from ebb.core.snapshot import SnapshotError, input_warnings
from ebb.core.yaml_documents import InputError


class Output(StrEnum):
    table = "table"
    json = "json"


class Provider(StrEnum):
    """The termination-executor's provider a plan is for (EBB_TERMINATION_EXECUTOR_PROVIDER): with karpenter a
    node without a NodeClaim is not a candidate; none and kwok plan alike."""

    none = "none"
    kwok = "kwok"
    karpenter = "karpenter"


def _parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        return parse_time(value)
    except ValueError as exc:
        raise InputError(f"--now: {value!r} is not an RFC 3339 time like {TIME_EXAMPLE}") from exc


def plan(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    filename: Annotated[list[str], typer.Option("-f", "--filename",
                                                help="YAML file(s) from kubectl get -o yaml; - for stdin")],
    now: Annotated[str | None, typer.Option(help="evaluate at this RFC 3339 time (default: now)")] = None,
    output: Annotated[Output, typer.Option("-o", "--output", help="table (default) or json")] = Output.table,
    until_stable: Annotated[bool, typer.Option("--until-stable",
                                               help="apply passes until nothing changes; adds steps")] = False,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot",
                                               help="allow replacing spot nodes with spot nodes")] = False,
    provider: Annotated[Provider, typer.Option(
        help="plan for this provider: karpenter (next to Karpenter) leaves nodes without a NodeClaim alone; "
             "none and kwok plan alike")] = Provider.none,
) -> None:
    """What would ebb disrupt now, and why not the rest? A dry run on a cluster snapshot."""
    try:
        moment = _parse_now(now)
        snapshot = load_snapshot(filename)
    except (InputError, SnapshotError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    for warning in input_warnings(snapshot):
        typer.echo(f"warning: {warning}", err=True)
    windowed = sorted(p.name for p in snapshot.nodepools if p.demand_window)
    if windowed:
        typer.echo(f"note: the demandWindow of NodePool(s) {', '.join(windowed)} keeps the peak of the demand a "
                   f"running planner records; a snapshot has no such record, so this plan keeps only what the pods "
                   f"request now (docs/decisions.md#churn-control)", err=True)
    result = make_plan(snapshot, moment, until_stable=until_stable,
                       options=EngineOptions(spot_to_spot=spot_to_spot,
                                             require_nodeclaim=provider is Provider.karpenter))
    if output is Output.json:
        sys.stdout.write(json.dumps(plan_json(result), indent=2) + "\n")
    else:
        render_table(result, Console())


def _replacement_text(r: dict[str, Any]) -> str:
    more = len(r["instanceTypes"]) - 1
    options = f", +{more} options" if more else ""
    return f"{r['nodePool']}: {r['instanceTypes'][0]} ({r['capacityType']}, ${r['price']:.4f}/h{options})"


def render_table(result: Plan, console: Console) -> None:
    first = result.first
    data = plan_json(result)
    console.print(f"[bold]ebb plan[/bold] at {data['now']}")
    commands = Table(title="Commands (what one pass does now)", title_justify="left")
    for col in ("method", "reason", "action", "nodes", "replacement", "saves $/h"):
        commands.add_column(col)
    for c in data["commands"]:
        reps = "; ".join(_replacement_text(r) for r in c["replacements"]) or "-"
        nodes = ", ".join(c["nodes"][:6]) + (f" (+{len(c['nodes']) - 6})" if len(c["nodes"]) > 6 else "")
        commands.add_row(c["method"], c["reason"], c["action"], nodes, reps, f"{c['savingsPerHour']:.4f}")
    if not data["commands"]:
        commands.add_row("-", "-", "-", "nothing to disrupt now", "-", "-")
    console.print(commands)
    blocked = Table(title="Not disrupted, and why", title_justify="left")
    blocked.add_column("node")
    blocked.add_column("method")
    blocked.add_column("reason", overflow="fold")
    for b in first.blocked:
        blocked.add_row(b.node, b.method, b.reason)
    console.print(blocked)
    budgets = Table(title="Budgets (disruptions allowed now)", title_justify="left")
    for col in ("nodePool", "Expired", "Drifted", "Empty", "Underutilized"):
        budgets.add_column(col)
    pools: dict[str, dict[str, int]] = {}
    for row in first.budgets:
        pools.setdefault(row.nodepool, {})[row.reason] = row.allowed
    for pool, allowed in pools.items():
        budgets.add_row(pool, *(str(allowed.get(r, 0)) for r in ("Expired", "Drifted", "Empty", "Underutilized")))
    console.print(budgets)
    # an invalid budget fails closed: say why under the zeros, once per pool and cause
    for detail in dict.fromkeys(row.detail for row in first.budgets if row.invalid):
        console.print(f"[red]invalid budget:[/red] {detail}", highlight=False)
    cost = data["cost"]
    console.print(f"Cost of NodePool nodes: ${cost['before']:.4f}/h now, ${cost['after']:.4f}/h after this pass")
    if result.steps is not None:
        final = result.steps[-1].cost_after if result.steps else first.cost_after
        acting = sum(1 for step in result.steps if step.commands)
        console.print(f"Until stable: {acting} passes acted, then nothing was left to do; final cost "
                      f"${final:.4f}/h (saves ${first.cost_before - final:.4f}/h)")
