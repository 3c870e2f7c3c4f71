"""`ebb plan`: the dry run. Reads a `kubectl get -o yaml` dump (or, with ``--live``, the cluster itself) and prints
what ebb would disrupt now: tables (``-o wide``: uncut, more columns; ``--summary``: counts instead of a line
per node), or the JSON contract of docs/plan.md (``-o yaml``: the same document as YAML). ``--node`` and
``--nodepool`` cut what is printed to those nodes or NodePools; the plan itself is the whole cluster's.

Making and printing the plan is `ebb_cli.planning`'s, shared with ``ebb explain``.

Exit codes: 0 with a plan, 2 for bad input (the message names the document and field; nothing else is
printed), 1 for an internal error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ebb_cli.common import ContextOption, KubeconfigOption, LiveOption
from ebb_cli.planning import PlanMode, PlanOutput, PlanRequest, Provider, Search


def plan(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    filename: Annotated[list[str] | None, typer.Option(
        "-f", "--filename", help="YAML file(s) from kubectl get -o yaml; - for stdin")] = None,
    now: Annotated[str | None, typer.Option(help="evaluate at this RFC 3339 time (default: now)")] = None,
    output: Annotated[PlanOutput, typer.Option(
        "-o", "--output", help="table (default), wide (uncut, more columns), json or yaml")] = PlanOutput.table,
    until_stable: Annotated[bool, typer.Option("--until-stable/--no-until-stable",
                                               help="apply passes until nothing changes; adds steps")] = False,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot/--no-spot-to-spot",
                                               help="allow replacing spot nodes with spot nodes")] = False,
    provider: Annotated[Provider, typer.Option(
        help="plan for this provider: karpenter (next to Karpenter) leaves nodes without a NodeClaim alone; "
             "none and kwok plan alike")] = Provider.none,
    mode: Annotated[PlanMode, typer.Option(
        help="shadow (the default): conflicts with Karpenter are only reported, and the plan is what ebb would do "
             "with the NodePools handed over (before the switch: in Karpenter's place); enforce (ebb as deployed): "
             "a NodePool that Karpenter may still disrupt is not disrupted, each of its nodes says why")] = (
        PlanMode.shadow),
    live: LiveOption = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    node: Annotated[list[str] | None, typer.Option(
        "--node", help="show only what the plan does to this node (repeatable): its command or why it stays, "
                       "its NodePool's budgets; with --until-stable, the step that disrupts it")] = None,
    nodepool: Annotated[list[str] | None, typer.Option(
        "--nodepool", help="show only what the plan does to this NodePool's nodes (repeatable): the commands that "
                           "disrupt them, why the others stay, its budgets")] = None,
    max_replacements: Annotated[int, typer.Option(
        "--max-replacements", min=1,
        help="how many nodes one multi-node consolidation may launch: 1 as Karpenter (the default); more repacks a "
             "set of nodes onto several cheaper ones")] = 1,
    search: Annotated[Search, typer.Option(
        help="how multi-node consolidation finds its set: greedy (grown in candidate order, the default) or "
             "optimizer (a linear program over every candidate, each proposal simulated)")] = Search.greedy,
    summary: Annotated[bool, typer.Option("--summary/--no-summary",
                                          help="a table view that fits a screen: the commands, the nodes left "
                                               "alone counted per cause and per NodePool, the budgets, the "
                                               "cost")] = False,
) -> None:
    """What would ebb disrupt now, and why not the rest? A dry run on a cluster snapshot."""
    # the library and rich are imported when a plan is made, not for `ebb --help` (ebb_cli.common)
    from ebb.core.plan import plan_json
    from ebb_cli.planning import console_for, make, render_fates, render_summary, render_table, write_document

    if summary and output in {PlanOutput.json, PlanOutput.yaml}:
        typer.echo(f"error: --summary is a table view; -o {output} prints the whole plan", err=True)
        raise typer.Exit(2)
    planned = make(PlanRequest(filename=filename or [], live=live, kubeconfig=kubeconfig, context=context, now=now,
                               until_stable=until_stable, spot_to_spot=spot_to_spot, provider=provider,
                               nodes=node or [], nodepools=nodepool or [], mode=mode,
                               max_replacements=max_replacements, search=search))
    if output in {PlanOutput.json, PlanOutput.yaml}:
        write_document(plan_json(planned.plan), output)
        return
    console = console_for(output)
    render_fates(planned.asked, planned.plan, console)
    if summary:
        render_summary(planned, console, wide=output is PlanOutput.wide)
    else:
        render_table(planned, console, wide=output is PlanOutput.wide)
