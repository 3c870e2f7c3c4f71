"""What ``ebb plan`` and ``ebb explain`` share: reading their input, making the plan, cutting it to the nodes or
NodePools asked about, and printing it (tables, the summary, the words of one node's answer, JSON or YAML).

Both commands answer from the same plan, so ``ebb explain NODE`` says what ``ebb plan --node NODE`` says: the
plan is made here once, and each command chooses how much of it to print.

How the tables are laid out follows kubectl's habits: on a terminal the tables fit its width (a long cell is cut
with an ellipsis, a reason folds); when stdout is not a terminal (a pipe, a file) or with ``-o wide`` nothing is
cut, so a name can be searched for, and ``-o wide`` adds columns (the NodePool and the cause of each node left
alone, every node and option of a command, its explanation). ``--summary`` trades the line per node for counts
(per cause and per NodePool), so a plan of hundreds of nodes fits a screen.

Like ``ebb_cli.common``, this module is imported for ``--help``, so the library and rich are imported by the
functions that use them.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

from ebb.core.quantity import TIME_EXAMPLE, format_duration, parse_time
from ebb_cli.common import live_documents, wants_live

if TYPE_CHECKING:
    from rich.console import Console

    from ebb.core.methods.base import Command
    from ebb.core.model import Snapshot
    from ebb.core.plan import NodeFate, Plan

#: the width of the console when nothing may be cut (not a terminal, or ``-o wide``): wider than any line
UNCUT_WIDTH = 10_000
#: the nodes of a command a table names before it counts the rest (``-o wide`` names them all)
NODES_SHOWN = 6
#: the budget reasons, in the order of the budgets table
BUDGET_REASONS = ("Expired", "Drifted", "Empty", "Underutilized")


class PlanOutput(StrEnum):
    """What ``ebb plan`` and ``ebb explain`` print: tables for people (``wide``: uncut, with more columns), or the
    JSON contract of docs/plan.md (``yaml``: the same document as YAML)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


class Provider(StrEnum):
    """The termination-executor's provider a plan is for (EBB_TERMINATION_EXECUTOR_PROVIDER): with karpenter a
    node without a NodeClaim is not a candidate; none and kwok plan alike."""

    none = "none"
    kwok = "kwok"
    karpenter = "karpenter"


class Search(StrEnum):
    """How multi-node consolidation searches for its set (``EngineOptions.search``): ``greedy``, grown in candidate
    order (the default), or ``optimizer``, a linear program over every candidate (`ebb.core.methods.optimizer`)."""

    greedy = "greedy"
    optimizer = "optimizer"


class PlanMode(StrEnum):
    """What a conflict with Karpenter does to the plan (``ebb.core.conflicts.Mode``): ``shadow``, a dry run's
    default, only reports the conflict and plans those nodes as if the NodePool were handed over, which answers "what
    would ebb do in Karpenter's place?" on a dump of a cluster Karpenter still disrupts (its NodePools' own
    disruption blocks read as ebb's policy, docs/adopting.md); ``enforce``, as ebb deployed decides, refuses every
    node of a NodePool that Karpenter may still disrupt (the check before the switch)."""

    enforce = "enforce"
    shadow = "shadow"


@dataclass(frozen=True)
class PlanRequest:
    """What a command asks of the plan: its input, the time, the engine's options, and what to keep."""

    filename: list[str]
    live: bool
    kubeconfig: str
    context: str
    now: str | None
    until_stable: bool
    spot_to_spot: bool
    provider: Provider
    nodes: list[str]
    nodepools: list[str]
    mode: PlanMode = PlanMode.shadow
    #: how many nodes one multi-node consolidation may launch (``EngineOptions.max_replacements``)
    max_replacements: int = 1
    #: how multi-node consolidation searches (``EngineOptions.search``)
    search: Search = Search.greedy


@dataclass(frozen=True)
class Planned:
    """The plan cut to what was asked (the whole plan when nothing was), and the answers for the nodes asked."""

    snapshot: Snapshot
    plan: Plan
    asked: tuple[NodeFate, ...]
    focused: bool


def _parse_now(value: str | None) -> datetime:
    from ebb.core.yaml_documents import InputError

    if value is None:
        return datetime.now(UTC)
    try:
        return parse_time(value)
    except ValueError as exc:
        raise InputError(f"--now: {value!r} is not an RFC 3339 time from 1970 to 2262 like {TIME_EXAMPLE}") from exc


def make(request: PlanRequest) -> Planned:
    """Read the input, warn on stderr about what it lacks, plan, and cut the plan to ``--nodepool`` and ``--node``;
    bad input exits 2 with the message on stderr."""
    from ebb.adapters.catalog import bundled_catalog
    from ebb.adapters.snapshot_files import load_snapshot
    from ebb.core.conflicts import ConflictSettings
    from ebb.core.methods.base import EngineOptions
    from ebb.core.plan import MAX_STEPS, fates, make_plan, only_nodes
    from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents
    from ebb.core.yaml_documents import InputError

    try:
        moment = _parse_now(request.now)
        live = wants_live(request.live, request.kubeconfig, request.context, request.filename)
        if not live and not request.filename:
            raise InputError("give -f FILE (a kubectl dump; - for stdin) or --live (read the cluster)")
        snapshot = (parse_documents(live_documents(request.kubeconfig, request.context),
                                    bundled_catalog=bundled_catalog) if live
                    else load_snapshot(request.filename))
        check_nodes(snapshot, request.nodes)
        check_nodepools(snapshot, request.nodepools)
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
    # ebb's plan with its interruption-ingester running: shadow (the default) reports the conflicts and refuses
    # nothing; enforce, as deployed, refuses the conflicting NodePools (docs/karpenter.md#the-conflict-check)
    conflict_settings = ConflictSettings(str(request.provider), interruption_ingester=True)
    refuse = conflict_settings if request.mode is PlanMode.enforce else None
    result = make_plan(snapshot, moment, until_stable=request.until_stable,
                       options=EngineOptions(spot_to_spot=request.spot_to_spot,
                                             require_nodeclaim=request.provider is Provider.karpenter,
                                             refuse_conflicts=refuse, max_replacements=request.max_replacements,
                                             search=str(request.search)),
                       conflict_settings=conflict_settings)
    if result.steps and result.steps[-1].commands:
        typer.echo(f"warning: --until-stable stopped after {MAX_STEPS:,} passes without settling (each pass "
                   f"still had commands: a NodePool that replaces its nodes faster than they settle, such as an "
                   f"expireAfter shorter than consolidateAfter?); the last step's commands were not applied",
                   err=True)
    if request.nodepools:
        result = only_nodepools(result, snapshot, request.nodepools)
    asked: tuple[NodeFate, ...] = ()
    if request.nodes:
        asked = fates(result, snapshot, request.nodes)
        result = only_nodes(result, snapshot, request.nodes)
    return Planned(snapshot, result, asked, focused=bool(request.nodes or request.nodepools))


def check_nodes(snapshot: Snapshot, names: list[str]) -> None:
    """Every ``--node`` names a Node of the input, or the input error says which does not and what is close."""
    from ebb.core.plan import unknown_nodes
    from ebb.core.yaml_documents import InputError

    missing = unknown_nodes(snapshot, names)
    if not missing:
        return
    known = [n.name for n in snapshot.nodes]
    raise InputError(f"--node: no Node of that name in the input ({len(known)} nodes): {_hints(missing, known)}")


def check_nodepools(snapshot: Snapshot, names: list[str]) -> None:
    """Every ``--nodepool`` names a NodePool of the input (or one its nodes name), or the input error says which
    does not and what is close."""
    from ebb.core.yaml_documents import InputError

    known = sorted({p.name for p in snapshot.nodepools} | {n.nodepool for n in snapshot.nodes if n.nodepool})
    missing = [name for name in dict.fromkeys(names) if name not in known]
    if missing:
        raise InputError(f"--nodepool: no NodePool of that name in the input ({', '.join(known) or 'none'}): "
                         f"{_hints(missing, known)}")


def _hints(missing: list[str], known: list[str]) -> str:
    close = {name: difflib.get_close_matches(name, known, n=3) for name in missing}
    return "; ".join(f"{name} (did you mean {', '.join(c)}?)" if c else name for name, c in close.items())


def only_nodepools(plan: Plan, snapshot: Snapshot, pools: list[str]) -> Plan:
    """The plan as it concerns the nodes of ``pools`` (``--nodepool``): `ebb.core.plan.only_nodes` of their nodes,
    with the budgets of ``pools`` themselves (a NodePool without a node keeps its budgets)."""
    from ebb.core.plan import only_nodes

    wanted = set(pools)
    cut = only_nodes(plan, snapshot, [n.name for n in snapshot.nodes if n.nodepool in wanted])
    budgets = tuple(b for b in plan.first.budgets if b.nodepool in wanted)
    return replace(cut, first=replace(cut.first, budgets=budgets))


# -- output -----------------------------------------------------------------------------------------------------


def write_document(data: dict[str, Any], output: PlanOutput) -> None:
    """``data`` on stdout as JSON (``-o json``) or as the same document in YAML (``-o yaml``)."""
    if output is PlanOutput.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def console_for(output: PlanOutput) -> Console:
    """The console of the tables: the terminal's width on a terminal, and uncut (`UNCUT_WIDTH`) with ``-o wide``
    or when stdout is not a terminal, so no name is cut."""
    from rich.console import Console

    console = Console()
    if output is PlanOutput.wide or not console.is_terminal:
        return Console(width=UNCUT_WIDTH)
    return console


def command_words(command: Command) -> str:
    """A command in a few words: its method, its action and how many other nodes it takes."""
    others = len(command.nodes) - 1
    with_others = f" with {others} other node{'s' if others != 1 else ''}" if others else ""
    return f"{command.method} ({command.action}{with_others})"


def render_fates(asked: tuple[NodeFate, ...], result: Plan, console: Console) -> None:
    """One line per ``--node``: what this pass does to it, and with --until-stable the step that disrupts it."""
    from rich.markup import escape

    for fate in asked:
        pool = f" (NodePool {fate.nodepool})" if fate.nodepool else " (no NodePool)"
        if fate.command is not None:
            now = f"disrupted this pass by {command_words(fate.command)}"
        elif fate.blocked_by is not None:
            now = f"stays this pass: {fate.blocked_by[1]} [{fate.blocked_by[0]}]"
        else:
            now = "stays this pass"
        line = f"[bold]{escape(fate.node)}[/bold]{escape(pool)}: {escape(now)}"
        if result.steps is not None and fate.command is None:
            if fate.step is not None and fate.step_command is not None:
                after = format_duration((result.steps[fate.step].now - result.first.now).total_seconds())
                line += f"; until stable: disrupted at step {fate.step + 1} of {len(result.steps)} ({after} on) by " \
                        f"{escape(command_words(fate.step_command))}"
            else:
                count = len(result.steps)
                line += f"; until stable: never disrupted ({count} step{'' if count == 1 else 's'})"
        console.print(line, highlight=False)


def _replacement_text(r: dict[str, Any], *, wide: bool) -> str:
    more = len(r["instanceTypes"]) - 1
    if wide:
        labels = "".join(f", {key}={value}" for key, value in sorted((r.get("labels") or {}).items()))
        return (f"{r['nodePool']}: {', '.join(r['instanceTypes'])} ({r['capacityType']}, ${r['price']:.4f}/h, "
                f"zones {', '.join(r['zones']) or 'any'}{labels})")
    options = f", +{more} options" if more else ""
    return f"{r['nodePool']}: {r['instanceTypes'][0]} ({r['capacityType']}, ${r['price']:.4f}/h{options})"


def _plain(*cells: str) -> list[Any]:
    """Table cells shown as written: a reason, a name or a Hold's text may hold brackets (``[/ops/freeze]``), which
    Rich would read as markup (and fail on, or drop)."""
    from rich.text import Text

    return [Text(cell) for cell in cells]


def _header(data: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]ebb plan[/bold] at {data['now']}")


def _commands_table(data: dict[str, Any], console: Console, *, focused: bool, wide: bool) -> None:
    from rich.table import Table

    title = "Commands that disrupt these nodes (one pass, now)" if focused else "Commands (what one pass does now)"
    commands = Table(title=title, title_justify="left")
    columns = ["method", "reason", "action", "nodes", "replacement", "saves $/h"]
    for col in [*columns, "explanation"] if wide else columns:
        commands.add_column(col, overflow="fold")
    for c in data["commands"]:
        reps = "; ".join(_replacement_text(r, wide=wide) for r in c["replacements"]) or "-"
        nodes = c["nodes"] if wide else c["nodes"][:NODES_SHOWN]
        named = ", ".join(nodes) + (f" (+{len(c['nodes']) - len(nodes)})" if len(c["nodes"]) > len(nodes) else "")
        row = [c["method"], c["reason"], c["action"], named, reps, f"{c['savingsPerHour']:.4f}"]
        commands.add_row(*_plain(*row, *([c["explanation"]] if wide else [])))
    if not data["commands"]:
        empty = ["-", "-", "-", "none of these nodes now" if focused else "nothing to disrupt now", "-", "-"]
        commands.add_row(*empty, *(["-"] if wide else []))
    console.print(commands)


def _budgets_table(result: Plan, console: Console) -> None:
    from rich.table import Table

    first = result.first
    budgets = Table(title="Budgets (disruptions allowed now)", title_justify="left")
    for col in ("nodePool", *BUDGET_REASONS):
        budgets.add_column(col)
    pools: dict[str, dict[str, int]] = {}
    for row in first.budgets:
        pools.setdefault(row.nodepool, {})[row.reason] = row.allowed
    for pool, allowed in pools.items():
        budgets.add_row(*_plain(pool, *(str(allowed.get(r, 0)) for r in BUDGET_REASONS)))
    console.print(budgets)
    # an invalid budget fails closed: say why under the zeros, once per pool and cause
    from rich.markup import escape

    for detail in dict.fromkeys(row.detail for row in first.budgets if row.invalid):
        console.print(f"[red]invalid budget:[/red] {escape(detail)}", highlight=False)


def _warning_lines(result: Plan, console: Console) -> None:
    """A line per conflict with Karpenter (``warnings[]`` of the JSON), before everything else."""
    from rich.markup import escape

    for conflict in result.warnings:
        console.print(f"[yellow]conflict ({conflict.kind}):[/yellow] {escape(conflict.message)}", highlight=False)


def _cost_lines(data: dict[str, Any], result: Plan, console: Console, *, focused: bool) -> None:
    first = result.first
    cost = data["cost"]
    console.print(f"Cost of NodePool nodes: ${cost['before']:.4f}/h now, ${cost['after']:.4f}/h after this pass")
    if result.steps is not None and not focused:
        unsettled = bool(result.steps and result.steps[-1].commands)  # the last step's commands were not applied
        applied = result.steps[:-1] if unsettled else result.steps
        final = result.steps[-1].cost_before if unsettled else result.steps[-1].cost_after if result.steps \
            else first.cost_after
        acting = sum(1 for step in applied if step.commands)
        ending = "then stopped without settling" if unsettled else "then nothing was left to do"
        console.print(f"Until stable: {acting} passes acted, {ending}; final cost "
                      f"${final:.4f}/h (saves ${first.cost_before - final:.4f}/h)")


def render_table(planned: Planned, console: Console, *, wide: bool = False) -> None:
    """The plan as tables: the commands, a line per node left alone and why, the budgets, the cost."""
    from rich.table import Table

    from ebb.core.plan import plan_json

    result = planned.plan
    data = plan_json(result)
    _header(data, console)
    _warning_lines(result, console)
    _commands_table(data, console, focused=planned.focused, wide=wide)
    pools = {n.name: n.nodepool for n in planned.snapshot.nodes}
    blocked = Table(title="Not disrupted, and why", title_justify="left")
    blocked.add_column("node", overflow="fold")
    if wide:
        blocked.add_column("nodePool")
    blocked.add_column("method")
    if wide:
        blocked.add_column("cause")
    blocked.add_column("reason", overflow="fold")
    for b in result.first.blocked:
        if wide:
            blocked.add_row(*_plain(b.node, pools.get(b.node) or "-", b.method, str(b.cause.kind), b.reason))
        else:
            blocked.add_row(*_plain(b.node, b.method, b.reason))
    console.print(blocked)
    _budgets_table(result, console)
    _cost_lines(data, result, console, focused=planned.focused)


def cause_label(cause: Any) -> str:
    """A cause's code, with the cause it qualifies (``empty-but: budget-used-up``): what ``--summary`` counts."""
    return f"{cause.kind}: {cause.inner.kind}" if cause.inner is not None else str(cause.kind)


def render_summary(planned: Planned, console: Console, *, wide: bool = False) -> None:
    """The plan in a screen (``--summary``): the commands (``wide``: as ``-o wide`` shows them), the nodes left alone
    counted per cause and per NodePool (each cause with one of its sentences), the budgets and the cost."""
    from rich.table import Table

    from ebb.core.plan import plan_json

    result = planned.plan
    data = plan_json(result)
    _header(data, console)
    _warning_lines(result, console)
    _commands_table(data, console, focused=planned.focused, wide=wide)
    blocked = result.first.blocked
    per_cause = Counter(cause_label(b.cause) for b in blocked)
    example: dict[str, str] = {}
    for b in blocked:
        example.setdefault(cause_label(b.cause), b.reason)
    causes = Table(title=f"Not disrupted: {len(blocked)} nodes, per cause", title_justify="left")
    for col in ("cause", "nodes", "for example"):
        causes.add_column(col, overflow="fold")
    for label, count in per_cause.most_common():
        causes.add_row(*_plain(label, str(count), example[label]))
    console.print(causes)
    pools = {n.name: n.nodepool or "(none)" for n in planned.snapshot.nodes}
    disrupted = Counter(pools.get(node, "(none)") for c in result.first.commands for node in c.nodes)
    left = Counter(pools.get(b.node, "(none)") for b in blocked)
    per_pool = Table(title="Per NodePool", title_justify="left")
    for col in ("nodePool", "disrupted now", "not disrupted"):
        per_pool.add_column(col)
    for pool in sorted(set(disrupted) | set(left)):
        per_pool.add_row(*_plain(pool, str(disrupted[pool]), str(left[pool])))
    console.print(per_pool)
    _budgets_table(result, console)
    _cost_lines(data, result, console, focused=planned.focused)


def render_explanation(planned: Planned, console: Console) -> None:
    """The answer for the nodes asked (``ebb explain``), in words: what this pass does to each and why, the
    command's explanation and saving, and the budgets of its NodePool."""
    from rich.markup import escape

    result = planned.plan
    allowed = {(b.nodepool, b.reason): b.allowed for b in result.first.budgets}
    for fate in planned.asked:
        render_fates((fate,), result, console)
        if fate.command is not None:
            command = fate.command
            console.print(f"  why: {escape(command.explanation)}", highlight=False)
            if len(command.nodes) > 1:
                console.print(f"  with: {escape(', '.join(n for n in command.nodes if n != fate.node))}",
                              highlight=False)
            for rep in command.replacements:
                console.print(f"  replaced by: {escape(rep.nodepool)} {escape(', '.join(rep.instance_types))} "
                              f"({rep.capacity_type}, ${rep.price:.4f}/h)", highlight=False)
            console.print(f"  saves: ${command.savings:.4f}/h", highlight=False)
        elif fate.blocked_by is not None:
            cause = next((b.cause for b in result.first.blocked if b.node == fate.node), None)
            if cause is not None:
                console.print(f"  cause: {escape(cause_label(cause))}", highlight=False)
        if fate.nodepool:
            budgets = ", ".join(f"{reason} {allowed[(fate.nodepool, reason)]}" for reason in BUDGET_REASONS
                                if (fate.nodepool, reason) in allowed)
            console.print(f"  budgets of NodePool {escape(fate.nodepool)} now (disruptions allowed): "
                          f"{budgets or 'none'}", highlight=False)
