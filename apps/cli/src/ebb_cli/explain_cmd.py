"""`ebb explain NODE`: why ebb does (or does not) disrupt one node, in words. The answer is the plan's, the same
as ``ebb plan --node NODE`` (`ebb_cli.planning` makes both): what this pass does to the node and why, the
command's explanation, saving and replacements, the budgets of its NodePool, and with ``--until-stable`` the step
that disrupts it. ``-o json`` and ``-o yaml`` print the document ``ebb plan --node NODE -o json`` prints.

Input as ``ebb plan``'s: a dump (``-f``) or the cluster itself (``--live``). Exit codes: 0 with an answer, 2 for
bad input (an unknown node names the ones close to it), 1 for an internal error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ebb_cli.common import ContextOption, KubeconfigOption, LiveOption
from ebb_cli.planning import PlanOutput, PlanRequest, Provider


def explain(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    node: Annotated[list[str], typer.Argument(
        help="the Node(s) to explain, by name", metavar="NODE...", show_default=False)],
    filename: Annotated[list[str] | None, typer.Option(
        "-f", "--filename", help="YAML file(s) from kubectl get -o yaml; - for stdin")] = None,
    live: LiveOption = False,
    kubeconfig: KubeconfigOption = "",
    context: ContextOption = "",
    now: Annotated[str | None, typer.Option(help="evaluate at this RFC 3339 time (default: now)")] = None,
    output: Annotated[PlanOutput, typer.Option(
        "-o", "--output", help="table (words; default), wide (the same, uncut), json or yaml (the document of "
                               "ebb plan --node NODE)")] = PlanOutput.table,
    until_stable: Annotated[bool, typer.Option("--until-stable/--no-until-stable",
                                               help="apply passes until nothing changes: the step that disrupts "
                                                    "the node, if any")] = False,
    spot_to_spot: Annotated[bool, typer.Option("--spot-to-spot/--no-spot-to-spot",
                                               help="allow replacing spot nodes with spot nodes")] = False,
    provider: Annotated[Provider, typer.Option(
        help="plan for this provider: karpenter (next to Karpenter) leaves nodes without a NodeClaim alone; "
             "none and kwok plan alike")] = Provider.none,
) -> None:
    """Why would ebb disrupt this node now, or why not? The plan's answer for one node, in words."""
    # the library and rich are imported when a plan is made, not for `ebb --help` (ebb_cli.common)
    from ebb.core.plan import plan_json
    from ebb_cli.planning import console_for, make, render_explanation, write_document

    planned = make(PlanRequest(filename=filename or [], live=live, kubeconfig=kubeconfig, context=context, now=now,
                               until_stable=until_stable, spot_to_spot=spot_to_spot, provider=provider,
                               nodes=node, nodepools=[]))
    if output in {PlanOutput.json, PlanOutput.yaml}:
        write_document(plan_json(planned.plan), output)
        return
    render_explanation(planned, console_for(output))
