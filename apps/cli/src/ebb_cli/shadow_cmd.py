"""`ebb shadow report`: shadow mode's report (docs/shadow.md), asked of the running system's decisions-api
(``GET /v1/shadow/report``) like ``ebb explain --api``: over the period, what Karpenter removed that ebb would have
left alone (with ebb's reason at the time), what ebb would have disrupted that Karpenter kept (with the saving),
what both did, and the counts. The comparison is ``ebb.core.shadow``'s, made by the API; this module only asks and
prints (``-o json``: the API's document as it is).

With ``--trace``, a recording of the period (``ebb record --from-kafka`` beside the shadow run), the report adds the
back-test of the recorded period (``ebb_embedded.backtest``, as ``ebb backtest --trace`` runs it): Karpenter's
defaults as ebb simulates them against ebb's policy (``--policy``, or the DisruptionPolicies and Holds the recording
holds), each policy's cost, churn, evictions and pending pods (``-o json``: under ``backtest``).

Exit codes: 0 with a report, 2 for bad input (a period that is none, no ``--api``, a token the API refuses), 1 for
an API that does not answer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from ebb_cli.common import FlagCommand, FlagGroup, Output, get_api_json, load_trace, require_extra

shadow_app = typer.Typer(help="Shadow mode: what ebb would have done beside the Karpenter that disrupts.",
                         no_args_is_help=True, cls=FlagGroup)


@shadow_app.command(name="report", cls=FlagCommand)
def report(  # noqa: PLR0917 - one parameter per command-line option, as typer wants
    since: Annotated[str, typer.Option(help="the period before --until: 7d, 12h, 90m, 30s, 1w")] = "7d",
    until: Annotated[str | None, typer.Option(help="the end of the period, RFC 3339 (default: now)")] = None,
    api: Annotated[str, typer.Option(envvar="EBB_API_URL", show_envvar=True,
                                     help="the decisions-api at this URL (http://HOST:PORT)")] = "",
    token: Annotated[str, typer.Option(envvar="EBB_API_TOKEN", show_envvar=True,
                                       help="the API's bearer token")] = "",
    output: Annotated[Output, typer.Option("-o", "--output", help="table (words; default) or json")] = Output.table,
    trace: Annotated[Path | None, typer.Option(
        help="a recording of the period (ebb record): add its back-test, Karpenter's defaults against ebb's policy",
        show_default=False)] = None,
    policy: Annotated[Path | None, typer.Option(
        help="with --trace: ebb's policy, a file of DisruptionPolicy and Hold documents (default: those the "
             "recording holds)", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="with --trace: the back-test's seed")] = 0,
) -> None:
    """What ebb in shadow mode would have disrupted, beside what Karpenter did, over a period."""
    from ebb.core.shadow import parse_period

    try:
        parse_period(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from exc
    if not api:
        typer.echo("error: ebb shadow report asks the decisions-api: give --api URL (or EBB_API_URL)", err=True)
        raise typer.Exit(2)
    if policy is not None and trace is None:
        raise typer.BadParameter("only with --trace", param_hint="--policy")
    query = {"since": since, **({"until": until} if until else {})}
    answer = _get(api, token, "/v1/shadow/report", query)
    if trace is not None:
        answer["backtest"] = backtest(trace, policy, seed)
    if output is Output.json:
        import json

        typer.echo(json.dumps(answer, indent=2))
        return
    for line in render(answer):
        typer.echo(line)


def backtest(path: Path, policy_file: Path | None, seed: int) -> dict[str, Any]:
    """The back-test of the recording at ``path``: Karpenter's defaults and ebb's policy, each policy's figures."""
    require_extra("embedded", "ebb shadow report --trace", "ebb_embedded", "sqlalchemy", "aiosqlite")
    from ebb.adapters.logs import configure
    from ebb.core.yaml_documents import InputError, parse_yaml
    from ebb_embedded.backtest import (
        POLICY_KINDS,
        BacktestOptions,
        PolicyError,
        karpenter_default,
        policy_of,
        run_backtest,
    )

    recorded = load_trace(str(path), [], start=_epoch(), duration=0.0, seed=seed)
    if not recorded.cluster or recorded.start is None or not recorded.duration:
        raise typer.BadParameter(f"{path}: not a recording (ebb record): no starting cluster, start or duration",
                                 param_hint="--trace")
    documents = list(recorded.cluster)
    try:
        if policy_file is not None:
            text = policy_file.read_text(encoding="utf-8")
            ours = policy_of(policy_file.name, text, parse_yaml(text, str(policy_file)))
        else:
            ours = policy_of("recorded policies", "the recording's", [d for d in documents
                                                                      if d.get("kind") in POLICY_KINDS])
    except (PolicyError, InputError, OSError) as exc:
        raise typer.BadParameter(f"{exc} (give ebb's policy with --policy)",
                                 param_hint="--policy" if policy_file else "--trace") from exc
    configure("error")  # the embedded services' logs: errors only, on stderr (stdout is the report's)
    options = BacktestOptions(start=recorded.start, duration=timedelta(seconds=recorded.duration), seed=seed)
    result = run_backtest(documents, recorded, [karpenter_default(), ours], options)
    return {"trace": str(path), "start": result["start"], "durationSeconds": result["duration_seconds"],
            "seed": seed, "policies": [_figures(run) for run in result["policies"]]}


def _epoch() -> datetime:
    """A start for `load_trace`, which a recording (the only trace taken here) does not read: it has its own."""
    return datetime(1970, 1, 1, tzinfo=UTC)


def _figures(run: dict[str, Any]) -> dict[str, Any]:
    summary = run["summary"]
    return {"name": run["name"], "cost": summary["node_hours_cost"],
            "churn": summary["launches"] + sum(summary["disruptions"].values()),
            "launches": summary["launches"], "disruptions": summary["disruptions"],
            "evictions": summary["evictions"], "pendingPodSeconds": summary["pending_pod_seconds"],
            "pendingPodsAtEnd": summary["pending_pods_at_end"]}


def _get(api: str, token: str, path: str, query: dict[str, str]) -> dict[str, Any]:
    """The API's JSON answer; exit 2 when it refuses the request (token, period), 1 when it cannot answer."""
    import urllib.parse

    return get_api_json(f"{api.rstrip('/')}{path}?{urllib.parse.urlencode(query)}", token, timeout=60)


def _when(value: Any) -> str:
    """An RFC 3339 time of the API's to the second, as the tables show it (``2026-11-23 18:30:00Z``)."""
    text = str(value or "")
    return text[:19].replace("T", " ") + "Z" if len(text) >= 19 else text


def _money(value: Any) -> str:
    return f"{float(value or 0):.4f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart (kubectl's look)."""
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def render(answer: dict[str, Any]) -> list[str]:
    """The report in words and tables, for people."""
    c = answer["counts"]
    lines = [f"Shadow report from {_when(answer['since'])} to {_when(answer['until'])}",
             f"  Karpenter removed {c['karpenterRemovals']} node(s): ebb would have disrupted {c['both']} of them "
             f"too, {c['karpenterOnly']} not.",
             f"  ebb would have disrupted {c['ebbOnly']} decision(s)' nodes Karpenter kept, saving "
             f"{_money(c['ebbOnlySavingsPerHour'])}/h, {_money(c['ebbOnlySaved'])} over the period.",
             f"  ebb's shadow decisions: {c['shadowDecisions']} ({c['approved']} approved, {c['proposed']} still "
             f"proposed, {c['rejected']} rejected at validation); other removals (not Karpenter's): "
             f"{c['otherRemovals']}."]
    by_category = c.get("karpenterOnlyByCategory") or {}
    if by_category:
        lines.append("  why ebb would have left Karpenter's removals alone: "
                     + ", ".join(f"{k} {v}" for k, v in by_category.items()))
    if answer["karpenterOnly"]:
        lines += ["", "Karpenter only (removed by Karpenter; ebb's reason then):"]
        lines += _table(["NODE", "NODEPOOL", "REMOVED AT", "KARPENTER'S REASON", "EBB", "EBB'S REASON"],
                        [[e["node"], e["nodePool"], _when(e["removedAt"]), e["reason"], e["ebb"]["category"],
                          e["ebb"]["reason"] or "no pass of ebb's saw the node"]
                         for e in answer["karpenterOnly"]])
    if answer["ebbOnly"]:
        lines += ["", "ebb only (approved by ebb; Karpenter kept the nodes):"]
        lines += _table(["DECISION", "NODES", "METHOD", "REASON", "APPROVED AT", "SAVING/H", "SAVED"],
                        [[e["id"], ",".join(e["kept"]) + (" (partly)" if e["partial"] else ""), e["method"],
                          e["reason"], _when(e["approvedAt"]), _money(e["savingsPerHour"]), _money(e["saved"])]
                         for e in answer["ebbOnly"]])
    if answer["both"]:
        lines += ["", "Both (Karpenter removed a node ebb had decided to disrupt):"]
        lines += _table(["NODE", "KARPENTER AT", "KARPENTER'S REASON", "EBB'S DECISION", "EBB AHEAD"],
                        [[b["node"], _when(b["removedAt"]), b["reason"],
                          f"{b['decision']['id']} ({b['decision']['state']})", f"{b['ebbAheadSeconds']:.0f}s"]
                         for b in answer["both"]])
    tested = answer.get("backtest")
    if tested:
        hours = tested["durationSeconds"] / 3600
        lines += ["", f"Back-test of the recorded period ({tested['trace']}, {hours:.1f} h from "
                      f"{_when(tested['start'])}, seed {tested['seed']}; the first row is ebb's simulation of "
                      "Karpenter's defaults):"]
        lines += _table(["POLICY", "COST", "CHURN", "EVICTIONS", "PENDING POD-SECONDS", "PENDING AT END"],
                        [[p["name"], _money(p["cost"]), str(p["churn"]), str(p["evictions"]),
                          f"{p['pendingPodSeconds']:.0f}", str(p["pendingPodsAtEnd"])] for p in tested["policies"]])
    return lines
