"""`ebb explain NODE`: why ebb does (or does not) disrupt one node, in words. The answer is the plan's, the same
as ``ebb plan --node NODE`` (`ebb_cli.planning` makes both): what this pass does to the node and why, the
command's explanation, saving and replacements, the budgets of its NodePool, and with ``--until-stable`` the step
that disrupts it. ``-o json`` and ``-o yaml`` print the document ``ebb plan --node NODE -o json`` prints.

Input as ``ebb plan``'s: a dump (``-f``) or the cluster itself (``--live``). Or, with ``--api URL``, the running
system's answer: the decisions-api's ``GET /v1/nodes/{name}/explain`` (the leader planner's last pass, the
decision disrupting the node, its recent decisions and holds), in words, or its document with ``-o json|yaml``
(several nodes: a ``List`` of them, as kubectl prints several objects).

Exit codes: 0 with an answer, 2 for bad input (an unknown node names the ones close to it; with ``--api``, a node
the API does not know or a token it refuses), 1 for an internal error or an API that does not answer.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ebb_cli.common import ContextOption, KubeconfigOption, LiveOption, get_api_json
from ebb_cli.planning import PlanOutput, PlanRequest, Provider, Search


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
    max_replacements: Annotated[int, typer.Option(
        "--max-replacements", min=1,
        help="how many nodes one multi-node consolidation may launch, as for ebb plan")] = 1,
    search: Annotated[Search, typer.Option(
        help="how multi-node consolidation finds its set, as for ebb plan")] = Search.greedy,
    api: Annotated[str, typer.Option(
        help="ask the running system instead: the decisions-api at this URL (http://HOST:PORT)")] = "",
    token: Annotated[str, typer.Option(envvar="EBB_API_TOKEN", show_envvar=True,
                                       help="with --api: the API's bearer token")] = "",
) -> None:
    """Why would ebb disrupt this node now, or why not? The plan's answer for one node, in words."""
    # the library and rich are imported when a plan is made, not for `ebb --help` (ebb_cli.common)
    from ebb.core.plan import plan_json
    from ebb_cli.planning import console_for, make, render_explanation, write_document

    if api:
        planning_only = [name for name, given in (("-f", filename), ("--live", live or kubeconfig or context),
                                                  ("--until-stable", until_stable), ("--spot-to-spot", spot_to_spot),
                                                  ("--provider", provider is not Provider.none),
                                                  ("--max-replacements", max_replacements != 1),
                                                  ("--search", search is not Search.greedy)) if given]
        if planning_only:
            typer.echo(f"error: --api asks the running system, which plans with its own input and options: "
                       f"not with {', '.join(planning_only)}", err=True)
            raise typer.Exit(2)
        answers = [_ask_api(api, token, name, now) for name in dict.fromkeys(node)]
        if output in {PlanOutput.json, PlanOutput.yaml}:
            write_document(answers[0] if len(answers) == 1 else {"kind": "List", "items": answers}, output)
        else:
            console = console_for(output)
            for answer in answers:
                _render_api_answer(answer, console)
        return
    planned = make(PlanRequest(filename=filename or [], live=live, kubeconfig=kubeconfig, context=context, now=now,
                               until_stable=until_stable, spot_to_spot=spot_to_spot, provider=provider,
                               nodes=node, nodepools=[], max_replacements=max_replacements, search=search))
    if output in {PlanOutput.json, PlanOutput.yaml}:
        write_document(plan_json(planned.plan), output)
        return
    render_explanation(planned, console_for(output))


def _ask_api(api: str, token: str, name: str, now: str | None) -> dict[str, Any]:
    """The decisions-api's explanation of ``name``; exit 2 when it does not know the node or refuses the token, 1
    when it cannot answer (the message on stderr says which)."""
    import urllib.parse

    query = f"?{urllib.parse.urlencode({'now': now})}" if now else ""
    url = f"{api.rstrip('/')}/v1/nodes/{urllib.parse.quote(name, safe='')}/explain{query}"
    return get_api_json(url, token, timeout=30, what="--api: ")


def _render_api_answer(answer: dict[str, Any], console: Any) -> None:
    """The API's explanation in words: its summary, where the verdict comes from, the cause, the findings, the
    pause, the budgets of the NodePool, the decision disrupting the node, its recent decisions and its holds."""
    from rich.markup import escape

    def say(text: str) -> None:
        console.print(escape(text), highlight=False)

    pool = f" (NodePool {answer['nodePool']})" if answer.get("nodePool") else " (no NodePool)"
    blocked = answer.get("blocked") or {}
    method = f" [{blocked['method']}]" if blocked.get("method") else ""
    say(f"{answer['node']}{pool}: {answer.get('summary', answer.get('state', ''))}{method}")
    passed = answer.get("pass")
    if answer.get("source") == "planner-pass" and passed:
        say(f"  from: the leader planner's pass at {passed['at']} (revision {passed['revision']})")
    else:
        say(f"  from: a pass the API evaluated at {answer.get('now')}")
    if answer.get("cause"):
        say(f"  cause: {answer['cause']}")
    command = answer.get("command")
    if command:
        say(f"  why: {command.get('explanation', '')}")
    for finding in answer.get("findings") or []:
        say(f"  finding: {finding.get('finding')}: {finding.get('reason')}")
    if answer.get("paused"):
        say(f"  paused: {answer['paused']}")
    budgets = ", ".join(f"{b['reason']} {b['allowed']}" for b in answer.get("budgets") or [])
    if answer.get("nodePool"):
        say(f"  budgets of NodePool {answer['nodePool']} now (disruptions allowed): {budgets or 'none'}")
    live = answer.get("liveDecision")
    if live:
        say(f"  being disrupted by decision {live.get('id')} ({live.get('state')})")
    decisions = answer.get("decisions") or []
    say(f"  recent decisions: {len(decisions)}" + "".join(
        f"; {d.get('id')} {d.get('state')} {d.get('method')}" for d in decisions[:3]))
    for hold in answer.get("holds") or []:
        target = f" {hold['target']}" if hold.get("target") else ""
        say(f"  hold: {hold.get('id')} on {hold.get('scope')}{target} until {hold.get('expiresAt') or 'removed'}: "
            f"{hold.get('reason')}")
