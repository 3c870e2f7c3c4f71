"""`ebb plan`: the dry run. Reads a `kubectl get -o yaml` dump (or, with ``--live``, the cluster itself) and prints
what ebb would disrupt now.

Exit codes: 0 with a plan, 2 for bad input (the message names the document and field; nothing else is
printed), 1 for an internal error.
"""

from __future__ import annotations

import difflib
import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ebb.core.quantity import TIME_EXAMPLE, format_duration, parse_time
from ebb_cli.common import ContextOption, KubeconfigOption, LiveOption, Output, live_documents, wants_live

if TYPE_CHECKING:
    from rich.console import Console

    from ebb.core.methods.base import Command
    from ebb.core.model import Snapshot
    from ebb.core.plan import NodeFate, Plan


class Provider(StrEnum):
    """The termination-executor's provider a plan is for (EBB_TERMINATION_EXECUTOR_PROVIDER): with karpenter a
    node without a NodeClaim is not a candidate; none and kwok plan alike."""

    none = "none"
    kwok = "kwok"
    karpenter = "karpenter"


def _parse_now(value: str | None) -> datetime:
    from ebb.core.yaml_documents import InputError

    if value is None:
        return datetime.now(UTC)
    try:
        return parse_time(value)
    except ValueError as exc:
        raise InputError(f"--now: {value!r} is not an RFC 3339 time like {TIME_EXAMPLE}") from exc


def plan(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    filename: Annotated[list[str] | None, typer.Option(
        "-f", "--filename", help="YAML file(s) from kubectl get -o yaml; - for stdin")] = None,
    now: Annotated[str | None, typer.Option(help="evaluate at this RFC 3339 time (default: now)")] = None,
    output: Annotated[Output, typer.Option("-o", "--output", help="table (default) or json")] = Output.table,
    until_stable: Annotated[bool, typer.Option("--until-stable",
                                               help="apply passes until nothing changes; adds steps")] = False,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot",
                                               help="allow replacing spot nodes with spot nodes")] = False,
    provider: Annotated[Provider, typer.Option(
        help="plan for this provider: karpenter (next to Karpenter) leaves nodes without a NodeClaim alone; "
             "none and kwok plan alike")] = Provider.none,
    live: LiveOption = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    node: Annotated[list[str] | None, typer.Option(
        "--node", help="show only what the plan does to this node (repeatable): its command or why it stays, "
                       "its NodePool's budgets; with --until-stable, the step that disrupts it")] = None,
) -> None:
    """What would ebb disrupt now, and why not the rest? A dry run on a cluster snapshot."""
    # the library and rich are imported when a plan is made, not for `ebb --help` (ebb_cli.common)
    from rich.console import Console

    from ebb.adapters.catalog import bundled_catalog
    from ebb.adapters.snapshot_files import load_snapshot
    from ebb.core.methods.base import EngineOptions
    from ebb.core.plan import fates, make_plan, only_nodes, plan_json
    from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents
    from ebb.core.yaml_documents import InputError

    try:
        moment = _parse_now(now)
        live = wants_live(live, kubeconfig, context, filename or [])
        if not live and not filename:
            raise InputError("give -f FILE (a kubectl dump; - for stdin) or --live (read the cluster)")
        snapshot = (parse_documents(live_documents(kubeconfig, context), bundled_catalog=bundled_catalog) if live
                    else load_snapshot(filename or []))
        _check_nodes(snapshot, node or [])
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
    if node:
        asked = fates(result, snapshot, node)
        result = only_nodes(result, snapshot, node)
    if output is Output.json:
        sys.stdout.write(json.dumps(plan_json(result), indent=2) + "\n")
    else:
        console = Console()
        if node:
            render_fates(asked, result, console)
        render_table(result, console, focused=bool(node))


def _check_nodes(snapshot: Snapshot, names: list[str]) -> None:
    """Every ``--node`` names a Node of the input, or the input error says which does not and what is close."""
    from ebb.core.plan import unknown_nodes
    from ebb.core.yaml_documents import InputError

    missing = unknown_nodes(snapshot, names)
    if not missing:
        return
    known = [n.name for n in snapshot.nodes]
    close = {name: difflib.get_close_matches(name, known, n=3) for name in missing}
    hints = "; ".join(f"{name} (did you mean {', '.join(c)}?)" if c else name for name, c in close.items())
    raise InputError(f"--node: no Node of that name in the input ({len(known)} nodes): {hints}")


def _command_words(command: Command) -> str:
    others = len(command.nodes) - 1
    with_others = f" with {others} other node{'s' if others != 1 else ''}" if others else ""
    return f"{command.method} ({command.action}{with_others})"


def render_fates(asked: tuple[NodeFate, ...], result: Plan, console: Console) -> None:
    """One line per ``--node``: what this pass does to it, and with --until-stable the step that disrupts it."""
    from rich.markup import escape

    for fate in asked:
        pool = f" (NodePool {fate.nodepool})" if fate.nodepool else " (no NodePool)"
        if fate.command is not None:
            now = f"disrupted this pass by {_command_words(fate.command)}"
        elif fate.blocked_by is not None:
            now = f"stays this pass: {fate.blocked_by[1]} [{fate.blocked_by[0]}]"
        else:
            now = "stays this pass"
        line = f"[bold]{fate.node}[/bold]{pool}: {escape(now)}"
        if result.steps is not None and fate.command is None:
            if fate.step is not None and fate.step_command is not None:
                after = format_duration((result.steps[fate.step].now - result.first.now).total_seconds())
                line += f"; until stable: disrupted at step {fate.step + 1} of {len(result.steps)} ({after} on) by " \
                        f"{escape(_command_words(fate.step_command))}"
            else:
                line += f"; until stable: never disrupted ({len(result.steps)} steps)"
        console.print(line, highlight=False)


def _replacement_text(r: dict[str, Any]) -> str:
    more = len(r["instanceTypes"]) - 1
    options = f", +{more} options" if more else ""
    return f"{r['nodePool']}: {r['instanceTypes'][0]} ({r['capacityType']}, ${r['price']:.4f}/h{options})"


def render_table(result: Plan, console: Console, *, focused: bool = False) -> None:
    """The plan as tables; ``focused`` when it was cut to the ``--node`` nodes (`only_nodes`)."""
    from rich.table import Table

    from ebb.core.plan import plan_json

    first = result.first
    data = plan_json(result)
    console.print(f"[bold]ebb plan[/bold] at {data['now']}")
    title = "Commands that disrupt these nodes (one pass, now)" if focused else "Commands (what one pass does now)"
    commands = Table(title=title, title_justify="left")
    for col in ("method", "reason", "action", "nodes", "replacement", "saves $/h"):
        commands.add_column(col)
    for c in data["commands"]:
        reps = "; ".join(_replacement_text(r) for r in c["replacements"]) or "-"
        nodes = ", ".join(c["nodes"][:6]) + (f" (+{len(c['nodes']) - 6})" if len(c["nodes"]) > 6 else "")
        commands.add_row(c["method"], c["reason"], c["action"], nodes, reps, f"{c['savingsPerHour']:.4f}")
    if not data["commands"]:
        commands.add_row("-", "-", "-", "none of these nodes now" if focused else "nothing to disrupt now", "-", "-")
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
    if result.steps is not None and not focused:
        final = result.steps[-1].cost_after if result.steps else first.cost_after
        acting = sum(1 for step in result.steps if step.commands)
        console.print(f"Until stable: {acting} passes acted, then nothing was left to do; final cost "
                      f"${final:.4f}/h (saves ${first.cost_before - final:.4f}/h)")
